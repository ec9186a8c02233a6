//! The command line: which systems, topologies and workloads to run, and
//! for how long.

use std::path::PathBuf;

use clap::Parser;
use serde::Serialize;
use wazoo_testkit::Flavor;

use crate::load::Workload;
use crate::results::serialize_flavors;

pub const DEFAULT_WORKLOADS: &[Workload] = &[
    Workload::Create,
    Workload::Set,
    Workload::Get,
    Workload::Mixed,
    Workload::ExistsWatch,
    Workload::Fanout,
    Workload::Churn,
    Workload::Client,
    Workload::Memory,
    Workload::Recovery,
    Workload::Failover,
    Workload::RecipeCall,
    Workload::Lock,
    Workload::Queue,
];

/// Which deployments to measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Topology {
    /// One server per system (every workload but failover).
    Standalone,
    /// A `--members`-member ensemble per system (create, set, get, mixed,
    /// failover).
    Ensemble,
    /// Standalone first, then ensembles.
    Both,
}

impl Topology {
    pub fn standalone(self) -> bool {
        matches!(self, Topology::Standalone | Topology::Both)
    }
    pub fn ensemble(self) -> bool {
        matches!(self, Topology::Ensemble | Topology::Both)
    }
}

/// Benchmark wazoo against Apache ZooKeeper 3.8 side by side (same machine,
/// same run, same client and load), standalone servers and/or 3-member
/// ensembles on loopback.
#[derive(Parser, Debug, Clone, Serialize)]
#[command(name = "wazoo-bench", version)]
pub struct Args {
    /// Client sessions (connections) driving each throughput workload.
    #[arg(long, default_value_t = 16)]
    pub sessions: usize,
    /// Requests in flight per session (one task each, sharing the session).
    #[arg(long, default_value_t = 8)]
    pub inflight: usize,
    /// Data bytes per create/setData.
    #[arg(long, default_value_t = 100)]
    pub payload: usize,
    /// Measured seconds per workload and system [default: 8, --quick: 0.5].
    #[arg(long)]
    pub duration_secs: Option<f64>,
    /// Measured rounds per throughput workload and system; rounds alternate
    /// the systems' order (A B B A ...) [default: 2, --quick: 1].
    #[arg(long)]
    pub rounds: Option<usize>,
    /// Unmeasured warm-up seconds before each measurement (JIT, caches)
    /// [default: 2, --quick: 0.25].
    #[arg(long)]
    pub warmup_secs: Option<f64>,
    /// What to run, in this order [default: create,set,get,mixed,exists-watch,
    /// fanout,churn,client,memory,recovery,failover,recipe-call,lock,queue;
    /// sweep, failover-pause, failover-partition, memory-curve, fanout-curve
    /// and payload-curve run only when named].
    #[arg(long, value_delimiter = ',')]
    pub workloads: Vec<Workload>,
    /// Znodes of 100 bytes for the memory figure [default: 1000000, --quick: 20000].
    #[arg(long)]
    pub nodes: Option<u64>,
    /// Short run (about a minute with both topologies on a quiet machine):
    /// 0.5 s windows, 0.25 s warm-up, 1 round, 20k nodes, one restart, 50
    /// fan-out watchers, 1 failover round (1 s of writes before the kill,
    /// 1 s after), 2000 recipe-call samples. A smoke test: its figures are
    /// cold and noisy.
    #[arg(long)]
    pub quick: bool,
    /// standalone servers, ensembles, or both (standalone first).
    #[arg(long, value_enum, default_value = "both")]
    pub topology: Topology,
    /// Members per ensemble.
    #[arg(long, default_value_t = 3)]
    pub members: usize,
    /// Measured seconds per ensemble throughput workload and system
    /// [default: --duration-secs].
    #[arg(long)]
    pub ensemble_duration_secs: Option<f64>,
    /// Leader kills per system in the failover workload (alternating the
    /// systems) [default: 3, --quick: 1].
    #[arg(long)]
    pub failover_rounds: Option<usize>,
    /// Writer sessions in the failover workload (spread over all members).
    #[arg(long, default_value_t = 4)]
    pub failover_sessions: usize,
    /// Creates in flight per failover session.
    #[arg(long, default_value_t = 8)]
    pub failover_inflight: usize,
    /// Seconds of writes before the leader is killed [default: 2, --quick: 1].
    #[arg(long)]
    pub failover_warmup_secs: Option<f64>,
    /// Seconds the writers go on after the kill (at least; and at least 1 s
    /// after the first write on the new leader) [default: 5, --quick: 1].
    #[arg(long)]
    pub failover_window_secs: Option<f64>,
    /// A round fails when no write is acknowledged this long after the kill.
    #[arg(long, default_value_t = 30.0)]
    pub failover_timeout_secs: f64,
    /// How often a fresh probe session tries each surviving member after the
    /// kill, in milliseconds.
    #[arg(long, default_value_t = 10)]
    pub failover_probe_interval_ms: u64,
    /// Systems to measure: zookeeper, wazoo.
    #[arg(long, value_delimiter = ',', default_value = "zookeeper,wazoo")]
    #[serde(serialize_with = "serialize_flavors")]
    pub systems: Vec<Flavor>,
    /// Where to write the raw figures (JSON).
    #[arg(long, default_value = "results.json")]
    pub out: PathBuf,
    /// Also write the Markdown report to this file.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// The wazoo server binary [default: $WAZOO_BIN, else target/release/wazoo].
    #[arg(long)]
    pub wazoo_bin: Option<PathBuf>,
    /// More zoo.cfg lines for both systems' standalone servers, e.g.
    /// `--zoo-cfg snapCount=2000000` (ZooKeeper takes an unknown key as the
    /// system property `zookeeper.<key>`); repeatable.
    #[arg(long = "zoo-cfg")]
    pub zoo_cfg: Vec<String>,
    /// ZooKeeper's JVM heap (-Xmx), large enough for the memory figure.
    #[arg(long, default_value = "2g")]
    pub zk_heap: String,
    /// An extra zoo.cfg line for every wazoo server (repeatable), e.g.
    /// `--wazoo-cfg recipe.workers=0` to run recipe steps on the member's
    /// thread.
    #[arg(long = "wazoo-cfg", value_name = "KEY=VALUE")]
    pub wazoo_cfg: Vec<String>,
    /// recipe-isolation: clients looping setData while the recipe load runs.
    #[arg(long, default_value_t = 2)]
    pub isolation_writers: usize,
    /// Pre-created nodes that set/get/mixed pick from at random.
    #[arg(long, default_value_t = 1000)]
    pub keys: usize,
    /// Share of reads in the mixed workload, in percent.
    #[arg(long, default_value_t = 90)]
    pub mixed_read_percent: u32,
    /// Requests in flight per session while loading the memory figure's nodes.
    #[arg(long, default_value_t = 32)]
    pub load_inflight: usize,
    /// Upper bound on loading the memory figure's nodes, per system.
    #[arg(long, default_value_t = 600.0)]
    pub load_timeout_secs: f64,
    /// Requests in flight on the single connection of the client benchmark.
    #[arg(long, default_value_t = 128)]
    pub client_inflight: usize,
    /// Measured seconds per client-benchmark round [default: 5, --quick: 0.5].
    #[arg(long)]
    pub client_duration_secs: Option<f64>,
    /// Measured rounds per client crate (alternating A B B A ...)
    /// [default: 2, --quick: 1].
    #[arg(long)]
    pub client_rounds: Option<usize>,
    /// Worker threads of the load generator's tokio runtime [default: CPUs].
    #[arg(long)]
    pub client_threads: Option<usize>,
    /// The whole run is abandoned (servers killed) after this long
    /// [default: 1800, --quick: 420].
    #[arg(long)]
    pub time_limit_secs: Option<f64>,
    /// exists-watch: pre-created znodes watched at random
    /// [default: 10000, --quick: 2000].
    #[arg(long)]
    pub watch_paths: Option<usize>,
    /// fanout: watcher counts, each a run of its own
    /// [default: 100,1000, --quick: 50].
    #[arg(long, value_delimiter = ',')]
    pub fanout_watchers: Option<Vec<usize>>,
    /// fanout: rounds (one write each) per watcher count and system
    /// [default: 5, --quick: 3].
    #[arg(long)]
    pub fanout_rounds: Option<usize>,
    /// churn: concurrent churners, each opening a session, creating an
    /// ephemeral znode and closing, in a loop.
    #[arg(long, default_value_t = 16)]
    pub churn_sessions: usize,
    /// churn: measured seconds per round [default: --duration-secs].
    #[arg(long)]
    pub churn_duration_secs: Option<f64>,
    /// recovery: kill -9 + restart cycles of the loaded server per system
    /// [default: 2, --quick: 1].
    #[arg(long)]
    pub recovery_restarts: Option<usize>,
    /// recovery: a restart fails when the server has not answered this long
    /// after its start.
    #[arg(long, default_value_t = 120.0)]
    pub recovery_timeout_secs: f64,
    /// Where the SVG plots go [default: beside --report, else beside --out].
    #[arg(long)]
    pub plots_dir: Option<PathBuf>,
    /// recipe-call, lock, queue: where echo.wasm, lock.wasm and queue.wasm
    /// are [default: $WAZOO_RECIPES_DIR, else built by
    /// scripts/build-recipes.sh into target/recipes].
    #[arg(long)]
    pub recipes_dir: Option<PathBuf>,
    /// recipe-call: samples of each kind (no-op call, getData), alternating
    /// on one connection [default: 20000, --quick: 2000].
    #[arg(long)]
    pub recipe_call_samples: Option<usize>,
    /// lock, queue: contending sessions.
    #[arg(long, default_value_t = 16)]
    pub recipe_sessions: usize,
    /// lock, queue: measured seconds per round [default: 5, --quick:
    /// --duration-secs].
    #[arg(long)]
    pub recipe_duration_secs: Option<f64>,
    /// sweep: session counts, each a point of the throughput-against-sessions
    /// plot; giving it adds `sweep` to the workloads [default: 1,4,16,64].
    #[arg(long, value_delimiter = ',')]
    pub sessions_sweep: Option<Vec<usize>>,
    /// sweep: the throughput workload run at each session count.
    #[arg(long, default_value = "mixed")]
    pub sweep_workload: Workload,
    /// sweep: measured seconds per point and system (one round each)
    /// [default: 3, --quick: 1].
    #[arg(long)]
    pub sweep_duration_secs: Option<f64>,
    /// memory: fresh-server runs per system (alternating the order); the
    /// report gives the run with the median RSS, and every run [default: 1;
    /// the memory target is read on 3].
    #[arg(long)]
    pub memory_runs: Option<usize>,
    /// memory-curve: znode counts, a fresh server per count and system
    /// [default: 10000,100000,1000000; add 10000000 with a --zk-heap that fits].
    #[arg(long, value_delimiter = ',')]
    pub memory_curve_nodes: Option<Vec<u64>>,
    /// fanout-curve: watcher counts, one run each per system
    /// [default: 10,100,1000,10000].
    #[arg(long, value_delimiter = ',')]
    pub fanout_curve_watchers: Option<Vec<usize>>,
    /// payload-curve: payload sizes in bytes, one set run each per system
    /// [default: 10,100,1000,10000,100000,1000000].
    #[arg(long, value_delimiter = ',')]
    pub payload_curve_bytes: Option<Vec<usize>>,
    /// payload-curve: measured seconds per point and system (after
    /// --warmup-secs) [default: 3].
    #[arg(long)]
    pub payload_curve_duration_secs: Option<f64>,
    /// lock, queue: do not also run kazoo's recipe against the wazoo ensemble.
    #[arg(long)]
    pub no_kazoo_on_wazoo: bool,
    /// lock, queue: the Python with kazoo that runs bench/kazoo_recipes.py
    /// [default: $PYTHON, else python3].
    #[arg(long)]
    pub python: Option<String>,
}
