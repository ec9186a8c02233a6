//! wazoo-bench: wazoo against Apache ZooKeeper 3.8, side by side, in one run,
//! on one machine, with the same client (`zookeeper-client` crate) and the
//! same load.
//!
//! ```text
//! cargo build --release -p wazoo -p wazoo-bench
//! target/release/wazoo-bench --quick                  # about a minute
//! target/release/wazoo-bench --out results.json --report report.md
//! target/release/wazoo-bench --topology ensemble      # 3-member ensembles only
//! ```
//!
//! `--topology` picks standalone servers, 3-member ensembles, or both (the
//! default); the ensemble phase runs create/set/get/mixed with sessions
//! spread over every member, and the failover workload (kill the leader
//! under write load).
//!
//! Markdown tables go to stdout (and `--report`), raw figures to `--out`
//! (JSON, rewritten after every phase), progress to stderr.

mod churn;
mod client_bench;
mod ensembles;
mod failover;
mod fanout;
mod load;
mod memory;
mod plots;
mod recipes;
mod recovery;
mod report;
mod servers;
mod stats;
mod svg;
mod sweep;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use clap::Parser;
use serde::Serialize;
use wazoo_testkit::Flavor;

use churn::{ChurnRun, ChurnSpec};
use client_bench::{ClientResult, ClientSpec};
use ensembles::Ensemble;
use failover::{FailoverRun, FailoverSpec};
use fanout::{FanoutRun, FanoutSpec};
use load::{LoadSpec, RawRound, RunResult, Target, Workload};
use memory::{MemoryRun, MemorySpec};
use recovery::RecoverySpec;
use servers::{Server, ServerConfig, SystemInfo};

const DEFAULT_WORKLOADS: &[Workload] = &[
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
enum Topology {
    /// One server per system (every workload but failover).
    Standalone,
    /// A `--members`-member ensemble per system (create, set, get, mixed,
    /// failover).
    Ensemble,
    /// Standalone first, then ensembles.
    Both,
}

impl Topology {
    fn standalone(self) -> bool {
        matches!(self, Topology::Standalone | Topology::Both)
    }
    fn ensemble(self) -> bool {
        matches!(self, Topology::Ensemble | Topology::Both)
    }
}

/// Benchmark wazoo against Apache ZooKeeper 3.8 side by side (same machine,
/// same run, same client and load), standalone servers and/or 3-member
/// ensembles on loopback.
#[derive(Parser, Debug, Clone, Serialize)]
#[command(name = "wazoo-bench", version)]
struct Args {
    /// Client sessions (connections) driving each throughput workload.
    #[arg(long, default_value_t = 16)]
    sessions: usize,
    /// Requests in flight per session (one task each, sharing the session).
    #[arg(long, default_value_t = 8)]
    inflight: usize,
    /// Data bytes per create/setData.
    #[arg(long, default_value_t = 100)]
    payload: usize,
    /// Measured seconds per workload and system [default: 8, --quick: 0.5].
    #[arg(long)]
    duration_secs: Option<f64>,
    /// Measured rounds per throughput workload and system; rounds alternate
    /// the systems' order (A B B A ...) [default: 2, --quick: 1].
    #[arg(long)]
    rounds: Option<usize>,
    /// Unmeasured warm-up seconds before each measurement (JIT, caches)
    /// [default: 2, --quick: 0.25].
    #[arg(long)]
    warmup_secs: Option<f64>,
    /// What to run, in this order [default: create,set,get,mixed,exists-watch,
    /// fanout,churn,client,memory,recovery,failover,recipe-call,lock,queue;
    /// sweep runs only when named].
    #[arg(long, value_delimiter = ',')]
    workloads: Vec<Workload>,
    /// Znodes of 100 bytes for the memory figure [default: 1000000, --quick: 20000].
    #[arg(long)]
    nodes: Option<u64>,
    /// Short run (about a minute with both topologies on a quiet machine):
    /// 0.5 s windows, 0.25 s warm-up, 1 round, 20k nodes, one restart, 50
    /// fan-out watchers, 1 failover round (1 s of writes before the kill,
    /// 1 s after), 2000 recipe-call samples. A smoke test: its figures are
    /// cold and noisy.
    #[arg(long)]
    quick: bool,
    /// standalone servers, ensembles, or both (standalone first).
    #[arg(long, value_enum, default_value = "both")]
    topology: Topology,
    /// Members per ensemble.
    #[arg(long, default_value_t = 3)]
    members: usize,
    /// Measured seconds per ensemble throughput workload and system
    /// [default: --duration-secs].
    #[arg(long)]
    ensemble_duration_secs: Option<f64>,
    /// Leader kills per system in the failover workload (alternating the
    /// systems) [default: 3, --quick: 1].
    #[arg(long)]
    failover_rounds: Option<usize>,
    /// Writer sessions in the failover workload (spread over all members).
    #[arg(long, default_value_t = 4)]
    failover_sessions: usize,
    /// Creates in flight per failover session.
    #[arg(long, default_value_t = 8)]
    failover_inflight: usize,
    /// Seconds of writes before the leader is killed [default: 2, --quick: 1].
    #[arg(long)]
    failover_warmup_secs: Option<f64>,
    /// Seconds the writers go on after the kill (at least; and at least 1 s
    /// after the first write on the new leader) [default: 5, --quick: 1].
    #[arg(long)]
    failover_window_secs: Option<f64>,
    /// A round fails when no write is acknowledged this long after the kill.
    #[arg(long, default_value_t = 30.0)]
    failover_timeout_secs: f64,
    /// How often a fresh probe session tries each surviving member after the
    /// kill, in milliseconds.
    #[arg(long, default_value_t = 10)]
    failover_probe_interval_ms: u64,
    /// Systems to measure: zookeeper, wazoo.
    #[arg(long, value_delimiter = ',', default_value = "zookeeper,wazoo")]
    #[serde(serialize_with = "serialize_flavors")]
    systems: Vec<Flavor>,
    /// Where to write the raw figures (JSON).
    #[arg(long, default_value = "results.json")]
    out: PathBuf,
    /// Also write the Markdown report to this file.
    #[arg(long)]
    report: Option<PathBuf>,
    /// The wazoo server binary [default: $WAZOO_BIN, else target/release/wazoo].
    #[arg(long)]
    wazoo_bin: Option<PathBuf>,
    /// ZooKeeper's JVM heap (-Xmx), large enough for the memory figure.
    #[arg(long, default_value = "2g")]
    zk_heap: String,
    /// Pre-created nodes that set/get/mixed pick from at random.
    #[arg(long, default_value_t = 1000)]
    keys: usize,
    /// Share of reads in the mixed workload, in percent.
    #[arg(long, default_value_t = 90)]
    mixed_read_percent: u32,
    /// Requests in flight per session while loading the memory figure's nodes.
    #[arg(long, default_value_t = 32)]
    load_inflight: usize,
    /// Upper bound on loading the memory figure's nodes, per system.
    #[arg(long, default_value_t = 600.0)]
    load_timeout_secs: f64,
    /// Requests in flight on the single connection of the client benchmark.
    #[arg(long, default_value_t = 128)]
    client_inflight: usize,
    /// Measured seconds per client-benchmark round [default: 5, --quick: 0.5].
    #[arg(long)]
    client_duration_secs: Option<f64>,
    /// Measured rounds per client crate (alternating A B B A ...)
    /// [default: 2, --quick: 1].
    #[arg(long)]
    client_rounds: Option<usize>,
    /// Worker threads of the load generator's tokio runtime [default: CPUs].
    #[arg(long)]
    client_threads: Option<usize>,
    /// The whole run is abandoned (servers killed) after this long
    /// [default: 1800, --quick: 420].
    #[arg(long)]
    time_limit_secs: Option<f64>,
    /// exists-watch: pre-created znodes watched at random
    /// [default: 10000, --quick: 2000].
    #[arg(long)]
    watch_paths: Option<usize>,
    /// fanout: watcher counts, each a run of its own
    /// [default: 100,1000, --quick: 50].
    #[arg(long, value_delimiter = ',')]
    fanout_watchers: Option<Vec<usize>>,
    /// fanout: rounds (one write each) per watcher count and system
    /// [default: 5, --quick: 3].
    #[arg(long)]
    fanout_rounds: Option<usize>,
    /// churn: concurrent churners, each opening a session, creating an
    /// ephemeral znode and closing, in a loop.
    #[arg(long, default_value_t = 16)]
    churn_sessions: usize,
    /// churn: measured seconds per round [default: --duration-secs].
    #[arg(long)]
    churn_duration_secs: Option<f64>,
    /// recovery: kill -9 + restart cycles of the loaded server per system
    /// [default: 2, --quick: 1].
    #[arg(long)]
    recovery_restarts: Option<usize>,
    /// recovery: a restart fails when the server has not answered this long
    /// after its start.
    #[arg(long, default_value_t = 120.0)]
    recovery_timeout_secs: f64,
    /// Where the SVG plots go [default: beside --report, else beside --out].
    #[arg(long)]
    plots_dir: Option<PathBuf>,
    /// recipe-call, lock, queue: where echo.wasm, lock.wasm and queue.wasm
    /// are [default: $WAZOO_RECIPES_DIR, else built by
    /// scripts/build-recipes.sh into target/recipes].
    #[arg(long)]
    recipes_dir: Option<PathBuf>,
    /// recipe-call: samples of each kind (no-op call, getData), alternating
    /// on one connection [default: 20000, --quick: 2000].
    #[arg(long)]
    recipe_call_samples: Option<usize>,
    /// lock, queue: contending sessions.
    #[arg(long, default_value_t = 16)]
    recipe_sessions: usize,
    /// lock, queue: measured seconds per round [default: 5, --quick:
    /// --duration-secs].
    #[arg(long)]
    recipe_duration_secs: Option<f64>,
    /// sweep: session counts, each a point of the throughput-against-sessions
    /// plot; giving it adds `sweep` to the workloads [default: 1,4,16,64].
    #[arg(long, value_delimiter = ',')]
    sessions_sweep: Option<Vec<usize>>,
    /// sweep: the throughput workload run at each session count.
    #[arg(long, default_value = "mixed")]
    sweep_workload: Workload,
    /// sweep: measured seconds per point and system (one round each)
    /// [default: 3, --quick: 1].
    #[arg(long)]
    sweep_duration_secs: Option<f64>,
    /// lock, queue: do not also run kazoo's recipe against the wazoo ensemble.
    #[arg(long)]
    no_kazoo_on_wazoo: bool,
    /// lock, queue: the Python with kazoo that runs bench/kazoo_recipes.py
    /// [default: $PYTHON, else python3].
    #[arg(long)]
    python: Option<String>,
}

#[derive(Debug, Serialize)]
struct Machine {
    cpus: usize,
    kernel: String,
    mem_total_bytes: Option<u64>,
    loadavg_at_start: String,
    loadavg_at_end: String,
    client_threads: usize,
}

#[derive(Debug, Serialize)]
struct WorkloadResult {
    workload: Workload,
    /// The order the systems ran in (alternates from workload to workload).
    order: Vec<String>,
    runs: BTreeMap<String, RunResult>,
}

#[derive(Debug, Serialize)]
struct ClientBlock {
    spec: ClientSpec,
    result: ClientResult,
}

#[derive(Debug, Serialize)]
struct MemoryBlock {
    spec: MemorySpec,
    order: Vec<String>,
    runs: BTreeMap<String, MemoryRun>,
}

#[derive(Debug, Serialize)]
struct FanoutBlock {
    spec: FanoutSpec,
    /// The order the systems ran in, per watcher count.
    order: Vec<String>,
    /// system -> one run per watcher count.
    runs: BTreeMap<String, Vec<FanoutRun>>,
}

#[derive(Debug, Serialize)]
struct ChurnBlock {
    spec: ChurnSpec,
    order: Vec<String>,
    runs: BTreeMap<String, ChurnRun>,
}

#[derive(Debug, Serialize)]
struct FailoverBlock {
    spec: FailoverSpec,
    /// The order of the kills, system by system.
    order: Vec<String>,
    runs: BTreeMap<String, FailoverRun>,
}

#[derive(Debug, Serialize)]
struct RecipeCallBlock {
    spec: recipes::RecipeCallSpec,
    run: recipes::RecipeCallRun,
}

#[derive(Debug, Serialize)]
struct ContendBlock {
    spec: recipes::ContendSpec,
    /// The order the pairings ran in.
    order: Vec<String>,
    /// `zookeeper` (kazoo's recipe on ZooKeeper), `wazoo` (wazoo's recipe),
    /// `wazoo-kazoo` (kazoo's recipe on wazoo).
    runs: BTreeMap<String, recipes::ContendRun>,
}

#[derive(Debug, Serialize)]
struct RecipesBlock {
    /// Where the modules came from.
    modules_dir: String,
    /// The servers the recipe workloads ran on.
    systems: Vec<SystemInfo>,
    recipe_call: Option<RecipeCallBlock>,
    lock: Option<ContendBlock>,
    queue: Option<ContendBlock>,
}

#[derive(Debug, Serialize)]
struct EnsembleBlock {
    members: usize,
    load: LoadSpec,
    systems: Vec<SystemInfo>,
    workloads: Vec<WorkloadResult>,
    failover: Option<FailoverBlock>,
    /// Throughput against sessions on the ensembles.
    sweep: Option<sweep::SweepBlock>,
    /// VmRSS of each member (in member order) at the end of the phase.
    member_rss_bytes: BTreeMap<String, Vec<Option<u64>>>,
}

#[derive(Debug, Serialize)]
struct Results {
    started_unix_secs: u64,
    total_secs: f64,
    complete: bool,
    args: Args,
    machine: Machine,
    /// Standalone servers.
    load: LoadSpec,
    systems: Vec<SystemInfo>,
    workloads: Vec<WorkloadResult>,
    client: Option<ClientBlock>,
    memory: Option<MemoryBlock>,
    /// Ensembles (`--topology ensemble|both`).
    ensemble: Option<EnsembleBlock>,
    fanout: Option<FanoutBlock>,
    churn: Option<ChurnBlock>,
    /// Throughput against sessions on the standalone servers.
    sweep: Option<sweep::SweepBlock>,
    /// The recovery workload's settings; its runs are in `memory.runs[*].restarts`.
    recovery: Option<RecoverySpec>,
    /// recipe-call, lock, queue.
    recipes: Option<RecipesBlock>,
    /// SVG files written beside the report (file names).
    plots: Vec<String>,
}

fn main() -> ExitCode {
    let mut args = Args::parse();
    let threads = args.client_threads.unwrap_or_else(cpus).max(1);
    args.client_threads = Some(threads);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let limit = Duration::from_secs_f64(args.time_limit_secs.unwrap_or(if args.quick {
        420.0
    } else {
        1800.0
    }));
    let outcome = runtime.block_on(async {
        match tokio::time::timeout(limit, run(args)).await {
            Ok(r) => r,
            Err(_) => bail!("the run took longer than --time-limit-secs ({limit:?}); abandoned"),
        }
    });
    // Any server still alive is killed when its handle drops (it has by now)
    // or, at the latest, by the kernel as this process exits (PR_SET_PDEATHSIG).
    runtime.shutdown_timeout(Duration::from_secs(5));
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn cpus() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

fn mem_total() -> Option<u64> {
    read_trimmed("/proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kib| kib * 1024)
}

async fn run(args: Args) -> Result<()> {
    let started = Instant::now();
    let quick = args.quick;
    let mut args = args;
    if args.workloads.is_empty() {
        args.workloads = DEFAULT_WORKLOADS.to_vec();
    }
    if args.sessions_sweep.is_some() && !args.workloads.contains(&Workload::Sweep) {
        args.workloads.push(Workload::Sweep);
    }
    let args = args;
    let duration = args.duration_secs.unwrap_or(if quick { 0.5 } else { 8.0 });
    let warmup = args.warmup_secs.unwrap_or(if quick { 0.25 } else { 2.0 });
    let nodes = args.nodes.unwrap_or(if quick { 20_000 } else { 1_000_000 });
    let rounds_per_workload = args.rounds.unwrap_or(if quick { 1 } else { 2 }).max(1);
    let client_duration = args
        .client_duration_secs
        .unwrap_or(if quick { 0.5 } else { 5.0 });
    let ensemble_duration = args.ensemble_duration_secs.unwrap_or(duration);
    anyhow::ensure!(
        args.sessions > 0 && args.inflight > 0,
        "--sessions and --inflight must be positive"
    );
    anyhow::ensure!(
        duration > 0.0 && ensemble_duration > 0.0 && warmup >= 0.0,
        "--duration-secs must be positive"
    );
    anyhow::ensure!(args.keys > 0, "--keys must be positive");
    anyhow::ensure!((2..=9).contains(&args.members), "--members must be 2..=9");
    anyhow::ensure!(
        args.failover_sessions > 0 && args.failover_inflight > 0,
        "--failover-sessions and --failover-inflight must be positive"
    );

    let mut systems: Vec<Flavor> = Vec::new();
    for s in &args.systems {
        if !systems.contains(s) {
            systems.push(*s);
        }
    }
    if systems.is_empty() {
        bail!("--systems is empty");
    }
    let wazoo_bin = if systems.contains(&Flavor::Wazoo) {
        servers::find_wazoo_bin(args.wazoo_bin.clone())?
    } else {
        PathBuf::from("(not used)")
    };
    if systems.contains(&Flavor::Zookeeper) {
        wazoo_testkit::zookeeper_classpath().context("Apache ZooKeeper is needed")?;
    }
    let server_cfg = ServerConfig {
        wazoo_bin,
        zk_heap: args.zk_heap.clone(),
    };

    let watch_paths = args
        .watch_paths
        .unwrap_or(if quick { 2000 } else { 10_000 })
        .max(1);
    let load_spec = LoadSpec {
        sessions: args.sessions,
        inflight: args.inflight,
        payload: args.payload,
        warmup_secs: warmup,
        duration_secs: duration,
        keys: args.keys,
        rounds: rounds_per_workload,
        mixed_read_percent: args.mixed_read_percent.min(100),
        watch_paths,
    };
    let ensemble_load = LoadSpec {
        duration_secs: ensemble_duration,
        ..load_spec.clone()
    };
    let sweep_sessions: Vec<usize> = args
        .sessions_sweep
        .clone()
        .unwrap_or_else(|| vec![1, 4, 16, 64])
        .into_iter()
        .filter(|&n| n > 0)
        .collect();
    anyhow::ensure!(
        !args.workloads.contains(&Workload::Sweep)
            || (!sweep_sessions.is_empty() && args.sweep_workload.is_throughput()),
        "sweep: --sessions-sweep needs a positive count and --sweep-workload a throughput workload"
    );
    let sweep_load = LoadSpec {
        duration_secs: args
            .sweep_duration_secs
            .unwrap_or(if quick { 1.0 } else { 3.0 }),
        rounds: 1,
        ..load_spec.clone()
    };
    let failover_spec = FailoverSpec {
        sessions: args.failover_sessions,
        inflight: args.failover_inflight,
        payload: args.payload,
        warmup_secs: args
            .failover_warmup_secs
            .unwrap_or(if quick { 1.0 } else { 2.0 })
            .max(0.2),
        window_secs: args
            .failover_window_secs
            .unwrap_or(if quick { 1.0 } else { 5.0 }),
        timeout_secs: args.failover_timeout_secs.max(1.0),
        rounds: args
            .failover_rounds
            .unwrap_or(if quick { 1 } else { 3 })
            .max(1),
        probe_interval_ms: args.failover_probe_interval_ms.max(1),
    };
    let fanout_spec = FanoutSpec {
        watchers: args
            .fanout_watchers
            .clone()
            .unwrap_or(if quick { vec![50] } else { vec![100, 1000] })
            .into_iter()
            .filter(|&n| n > 0)
            .collect(),
        rounds: args
            .fanout_rounds
            .unwrap_or(if quick { 3 } else { 5 })
            .max(1),
        round_timeout_secs: 30.0,
    };
    let churn_spec = ChurnSpec {
        churners: args.churn_sessions.max(1),
        warmup_secs: warmup,
        duration_secs: args.churn_duration_secs.unwrap_or(duration),
        rounds: rounds_per_workload,
        session_timeout_ms: 10_000,
    };
    let recovery_spec = RecoverySpec {
        restarts: args
            .recovery_restarts
            .unwrap_or(if quick { 1 } else { 2 })
            .max(1),
        probe_interval_ms: 10,
        timeout_secs: args.recovery_timeout_secs.max(1.0),
    };
    let mut results = Results {
        started_unix_secs: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        total_secs: 0.0,
        complete: false,
        args: args.clone(),
        machine: Machine {
            cpus: cpus(),
            kernel: read_trimmed("/proc/sys/kernel/osrelease"),
            mem_total_bytes: mem_total(),
            loadavg_at_start: read_trimmed("/proc/loadavg"),
            loadavg_at_end: String::new(),
            client_threads: args.client_threads.unwrap_or(1),
        },
        load: load_spec.clone(),
        systems: Vec::new(),
        workloads: Vec::new(),
        client: None,
        memory: None,
        ensemble: None,
        fanout: None,
        churn: None,
        sweep: None,
        recovery: None,
        recipes: None,
        plots: Vec::new(),
    };
    let save = |results: &Results| -> Result<()> {
        let json = serde_json::to_string_pretty(results)?;
        std::fs::write(&args.out, json + "\n")
            .with_context(|| format!("writing {}", args.out.display()))
    };
    eprintln!(
        "wazoo-bench: systems {}; topology {:?}; workloads {}; {} sessions x {} in flight, {} B payload, \
         {warmup} s warm-up + {duration} s per run ({ensemble_duration} s for ensembles); \
         {nodes} znodes for memory",
        names(&systems),
        args.topology,
        args.workloads
            .iter()
            .map(|w| w.name())
            .collect::<Vec<_>>()
            .join(","),
        args.sessions,
        args.inflight,
        args.payload,
    );

    // Which throughput workload this is, to alternate who goes first.
    let mut order_index = 0usize;

    // Phase 1: throughput workloads and the client benchmark, on one server
    // of each system that lives through the phase.
    let needs_servers = args.topology.standalone()
        && args.workloads.iter().any(|w| {
            w.is_throughput()
                || matches!(
                    w,
                    Workload::Client | Workload::Fanout | Workload::Churn | Workload::Sweep
                )
        });
    if needs_servers {
        let mut running: BTreeMap<&'static str, Server> = BTreeMap::new();
        let any_throughput = args.workloads.iter().any(|w| {
            w.is_throughput() || matches!(w, Workload::Fanout | Workload::Churn | Workload::Sweep)
        });
        for &flavor in &systems {
            // The client benchmark alone needs only wazoo.
            if !any_throughput && flavor != Flavor::Wazoo {
                continue;
            }
            eprintln!("starting {flavor} ...");
            let cfg = server_cfg.clone();
            let server = tokio::task::spawn_blocking(move || Server::start(flavor, &cfg)).await??;
            let info = server.describe(&server_cfg);
            eprintln!(
                "  {flavor} on {} (pid {}): {}",
                server.addr(),
                server.pid()?,
                info.version
            );
            results.systems.push(info);
            running.insert(flavor.name(), server);
        }
        save(&results)?;

        for &workload in &args.workloads {
            if workload.is_throughput() {
                let result = throughput_workload(
                    workload,
                    order_index,
                    &systems,
                    &load_spec,
                    "",
                    |flavor| standalone_target(&mut running, flavor),
                )
                .await;
                order_index += 1;
                results.workloads.push(result);
                save(&results)?;
            } else if workload == Workload::Client {
                let Some(server) = running.get("wazoo") else {
                    eprintln!("[client] skipped: wazoo is not among --systems");
                    continue;
                };
                let spec = ClientSpec {
                    inflight: args.client_inflight,
                    warmup_secs: warmup.min(1.0),
                    duration_secs: client_duration,
                    rounds: args
                        .client_rounds
                        .unwrap_or(if quick { 1 } else { 2 })
                        .max(1),
                };
                eprintln!(
                    "[client] one connection to wazoo, {} getData in flight, {} round(s) of {} s per crate",
                    spec.inflight, spec.rounds, spec.duration_secs
                );
                let result = client_bench::run(server.addr(), server.pid()?, &spec).await;
                if let Some(f) = &result.failure {
                    eprintln!("[client] FAILED: {f}");
                }
                results.client = Some(ClientBlock { spec, result });
                save(&results)?;
            } else if workload == Workload::Fanout {
                results.fanout =
                    Some(fanout_phase(&running, &systems, &fanout_spec, order_index).await);
                order_index += 1;
                save(&results)?;
            } else if workload == Workload::Churn {
                results.churn =
                    Some(churn_phase(&running, &systems, &churn_spec, order_index).await);
                order_index += 1;
                save(&results)?;
            } else if workload == Workload::Sweep {
                results.sweep = Some(
                    sessions_sweep(
                        args.sweep_workload,
                        &sweep_sessions,
                        &systems,
                        &sweep_load,
                        "",
                        &mut order_index,
                        |flavor| standalone_target(&mut running, flavor),
                    )
                    .await,
                );
                save(&results)?;
            }
        }
        eprintln!("stopping the throughput servers");
        tokio::task::spawn_blocking(move || drop(running)).await?;
    }

    // Phase 2: ensembles of every system, alive through the phase.
    let ensemble_workloads: Vec<Workload> = args
        .workloads
        .iter()
        .copied()
        .filter(|w| w.is_throughput() || matches!(w, Workload::Failover | Workload::Sweep))
        .collect();
    if args.topology.ensemble() && !ensemble_workloads.is_empty() {
        let mut block = EnsembleBlock {
            members: args.members,
            load: ensemble_load.clone(),
            systems: Vec::new(),
            workloads: Vec::new(),
            failover: None,
            sweep: None,
            member_rss_bytes: BTreeMap::new(),
        };
        let mut running: BTreeMap<&'static str, Ensemble> = BTreeMap::new();
        for &flavor in &systems {
            eprintln!("starting a {}-member {flavor} ensemble ...", args.members);
            let (cfg, n) = (server_cfg.clone(), args.members);
            let t = Instant::now();
            let ens =
                tokio::task::spawn_blocking(move || Ensemble::start(flavor, n, &cfg)).await??;
            let info = tokio::task::block_in_place(|| ens.describe(&server_cfg));
            eprintln!(
                "  {flavor} ensemble serving after {:.1} s on {}; {}",
                t.elapsed().as_secs_f64(),
                ens.connect_string(),
                info.notes.get(1).map(String::as_str).unwrap_or("")
            );
            block.systems.push(info);
            running.insert(flavor.name(), ens);
        }
        results.ensemble = Some(block);
        save(&results)?;

        for &workload in &ensemble_workloads {
            if workload.is_throughput() {
                let result = throughput_workload(
                    workload,
                    order_index,
                    &systems,
                    &ensemble_load,
                    "ensemble ",
                    |flavor| ensemble_target(&running, flavor),
                )
                .await;
                order_index += 1;
                ensemble_block(&mut results).workloads.push(result);
                save(&results)?;
            } else if workload == Workload::Failover {
                let spec = failover_spec.clone();
                let mut rounds: BTreeMap<&'static str, Vec<failover::FailoverRound>> =
                    BTreeMap::new();
                let mut order = Vec::new();
                for r in 0..spec.rounds {
                    let mut this_round = systems.clone();
                    if (order_index + r) % 2 == 1 {
                        this_round.reverse();
                    }
                    for &flavor in &this_round {
                        order.push(flavor.name().to_string());
                        let label = format!("[failover] {flavor} (round {})", r + 1);
                        eprintln!(
                            "{label}: {} sessions x {} creates in flight over all members, \
                             kill the leader after {} s; at most {:.0} s",
                            spec.sessions,
                            spec.inflight,
                            spec.warmup_secs,
                            spec.warmup_secs + spec.timeout_secs + spec.window_secs + 120.0
                        );
                        let ens = running.get_mut(flavor.name()).expect("started above");
                        let tag = format!("{}-{}", flavor.name(), r + 1);
                        let round = failover::run_round(ens, &spec, &tag, &label).await;
                        if let Some(f) = &round.failure {
                            eprintln!("{label}: FAILED: {f}");
                        }
                        rounds.entry(flavor.name()).or_default().push(round);
                        let runs = rounds
                            .iter()
                            .map(|(name, rs)| {
                                (name.to_string(), FailoverRun::summarize(rs.clone()))
                            })
                            .collect();
                        ensemble_block(&mut results).failover = Some(FailoverBlock {
                            spec: spec.clone(),
                            order: order.clone(),
                            runs,
                        });
                        save(&results)?;
                    }
                }
                order_index += 1;
            } else if workload == Workload::Sweep {
                let block = sessions_sweep(
                    args.sweep_workload,
                    &sweep_sessions,
                    &systems,
                    &sweep_load,
                    "ensemble ",
                    &mut order_index,
                    |flavor| ensemble_target(&running, flavor),
                )
                .await;
                ensemble_block(&mut results).sweep = Some(block);
                save(&results)?;
            }
        }
        for (name, ens) in &running {
            let rss = (0..ens.len())
                .map(|i| {
                    ens.pid(i)
                        .and_then(|p| servers::proc_status_bytes(p, "VmRSS").ok())
                })
                .collect();
            ensemble_block(&mut results)
                .member_rss_bytes
                .insert(name.to_string(), rss);
        }
        save(&results)?;
        eprintln!("stopping the ensembles");
        tokio::task::spawn_blocking(move || drop(running)).await?;
    }

    // Phase 2b: the recipe workloads (recipe-call on a standalone wazoo
    // with the echo module; lock and queue on ensembles, wazoo's members
    // loading the lock and queue modules). Whatever --topology says: they
    // have their own servers.
    let recipe_workloads = [Workload::RecipeCall, Workload::Lock, Workload::Queue];
    if args.workloads.iter().any(|w| recipe_workloads.contains(w)) {
        let spec = RecipePhase {
            quick,
            warmup,
            duration,
            rounds: rounds_per_workload,
        };
        recipes_phase(
            &args,
            &systems,
            &server_cfg,
            &spec,
            &mut order_index,
            &mut results,
            &save,
        )
        .await?;
    }

    // Phase 3: memory, one fresh server at a time, and recovery (the
    // loaded server killed and restarted).
    let recovery = args
        .workloads
        .contains(&Workload::Recovery)
        .then_some(&recovery_spec);
    results.recovery = recovery.cloned();
    if args.topology.standalone()
        && (args.workloads.contains(&Workload::Memory) || recovery.is_some())
    {
        let spec = MemorySpec {
            nodes,
            node_bytes: memory::NODE_BYTES,
            children_per_parent: memory::BUCKET,
            sessions: args.sessions,
            inflight: args.load_inflight,
            settle_secs: if quick { 0.5 } else { 3.0 },
            load_timeout_secs: args.load_timeout_secs,
        };
        let mut order = systems.clone();
        if order_index % 2 == 1 {
            order.reverse();
        }
        let mut runs = BTreeMap::new();
        for &flavor in &order {
            let run = memory::measure(flavor, &server_cfg, &spec, recovery).await;
            if let Some(f) = &run.failure {
                eprintln!("[memory] {flavor} FAILED: {f}");
            }
            if let Some(info) = &run.system {
                if !results.systems.iter().any(|s| s.name == info.name) {
                    results.systems.push(info.clone());
                }
            }
            runs.insert(flavor.name().to_string(), run);
            results.memory = Some(MemoryBlock {
                spec: spec.clone(),
                order: order.iter().map(|f| f.name().to_string()).collect(),
                runs: runs.clone(),
            });
            save(&results)?;
        }
    }

    results.total_secs = started.elapsed().as_secs_f64();
    results.machine.loadavg_at_end = read_trimmed("/proc/loadavg");
    results.complete = true;
    let plots_dir = args.plots_dir.clone().unwrap_or_else(|| {
        let beside = args.report.as_deref().unwrap_or(&args.out);
        match beside.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        }
    });
    let stem = args
        .report
        .as_deref()
        .or(Some(args.out.as_path()))
        .and_then(|p| p.file_stem())
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "wazoo-bench".into());
    // Links in the report: bare file names when the plots sit beside it.
    let link_prefix = match &args.plots_dir {
        None => String::new(),
        Some(d) => format!("{}/", d.display()),
    };
    results.plots = plots::write_all(&results, &plots_dir, &stem, &link_prefix)?;
    save(&results)?;
    eprintln!(
        "{} SVG plot(s) in {}",
        results.plots.len(),
        plots_dir.display()
    );
    let markdown = report::markdown(&results);
    println!("{markdown}");
    if let Some(path) = &args.report {
        std::fs::write(path, &markdown).with_context(|| format!("writing {}", path.display()))?;
    }
    eprintln!(
        "done in {:.0} s; raw figures in {}",
        results.total_secs,
        args.out.display()
    );
    Ok(())
}

/// Runs the rounds of one throughput workload on every system: round r of
/// the i-th workload runs the systems in the listed order when i + r is
/// even, reversed when odd (A B, B A, ...). `target_of` says where a
/// system's load goes, or why it cannot run.
async fn throughput_workload(
    workload: Workload,
    order_index: usize,
    systems: &[Flavor],
    spec: &LoadSpec,
    prefix: &str,
    mut target_of: impl FnMut(Flavor) -> Result<Target, String>,
) -> WorkloadResult {
    let i = order_index;
    let mut order = Vec::new();
    let mut rounds: BTreeMap<&'static str, Vec<RawRound>> = BTreeMap::new();
    for r in 0..spec.rounds {
        let mut this_round = systems.to_vec();
        if (i + r) % 2 == 1 {
            this_round.reverse();
        }
        for &flavor in &this_round {
            order.push(flavor.name().to_string());
            let label = if spec.rounds > 1 {
                format!("[{prefix}{}] {flavor} (round {})", workload.name(), r + 1)
            } else {
                format!("[{prefix}{}] {flavor}", workload.name())
            };
            let round = match target_of(flavor) {
                Err(why) => RawRound::failed(why),
                Ok(target) => {
                    eprintln!(
                        "{label}: {} s warm-up + {} s measured, {} sessions x {} in flight; \
                         at most {:.0} s",
                        spec.warmup_secs,
                        spec.duration_secs,
                        spec.sessions,
                        spec.inflight,
                        load::round_bound_secs(spec)
                    );
                    load::run_workload(&target, workload, spec, &label).await
                }
            };
            log_run(
                &label,
                &load::summarize(workload, std::slice::from_ref(&round)),
            );
            rounds.entry(flavor.name()).or_default().push(round);
        }
    }
    let runs: BTreeMap<String, RunResult> = rounds
        .iter()
        .map(|(name, rs)| (name.to_string(), load::summarize(workload, rs)))
        .collect();
    WorkloadResult {
        workload,
        order,
        runs,
    }
}

/// Where a standalone system's load goes, or why it cannot run.
fn standalone_target(
    running: &mut BTreeMap<&'static str, Server>,
    flavor: Flavor,
) -> Result<Target, String> {
    let idle_pids: Vec<u32> = running
        .iter()
        .filter(|(name, _)| **name != flavor.name())
        .filter_map(|(_, s)| s.pid().ok())
        .collect();
    let server = running.get_mut(flavor.name()).expect("started above");
    if !server.is_running() {
        return Err(format!(
            "{flavor} is not running; log tail:\n{}",
            server.log_tail(20)
        ));
    }
    Ok(Target {
        cluster: server.addr().to_string(),
        members: Vec::new(),
        server_pids: vec![server.pid().map_err(|e| format!("{e:#}"))?],
        idle_pids,
    })
}

/// Where an ensemble's load goes, or why it cannot run.
fn ensemble_target(
    running: &BTreeMap<&'static str, Ensemble>,
    flavor: Flavor,
) -> Result<Target, String> {
    let idle_pids: Vec<u32> = running
        .iter()
        .filter(|(name, _)| **name != flavor.name())
        .flat_map(|(_, e)| (0..e.len()).filter_map(|i| e.pid(i)))
        .collect();
    let ens = running.get(flavor.name()).expect("started above");
    let server_pids = ens.pids().map_err(|e| {
        format!(
            "{e:#}; log tails:\n{}",
            (0..ens.len())
                .map(|i| format!("--- member {} ---\n{}", i + 1, ens.log_tail(i, 10)))
                .collect::<Vec<_>>()
                .join("\n")
        )
    })?;
    Ok(Target {
        cluster: ens.connect_string(),
        members: ens.addrs(),
        server_pids,
        idle_pids,
    })
}

/// The sessions sweep: `workload` at each session count, one round per
/// system and count, the order alternating from count to count.
async fn sessions_sweep(
    workload: Workload,
    counts: &[usize],
    systems: &[Flavor],
    load: &LoadSpec,
    prefix: &str,
    order_index: &mut usize,
    mut target_of: impl FnMut(Flavor) -> Result<Target, String>,
) -> sweep::SweepBlock {
    let mut points = Vec::new();
    for &n in counts {
        let spec = LoadSpec {
            sessions: n,
            rounds: 1,
            ..load.clone()
        };
        let result = throughput_workload(
            workload,
            *order_index,
            systems,
            &spec,
            &format!("{prefix}sweep n={n} "),
            &mut target_of,
        )
        .await;
        *order_index += 1;
        points.push(sweep::SweepPoint {
            sessions: n,
            result,
        });
    }
    sweep::SweepBlock {
        workload,
        load: load.clone(),
        points,
    }
}

/// The order of the systems for the `i`-th workload, round `r`: as listed
/// when i + r is even, reversed when odd.
fn order_for(systems: &[Flavor], i: usize, r: usize) -> Vec<Flavor> {
    let mut v = systems.to_vec();
    if (i + r) % 2 == 1 {
        v.reverse();
    }
    v
}

/// The fan-out workload on the standalone servers: every watcher count,
/// the systems alternating.
async fn fanout_phase(
    running: &BTreeMap<&'static str, Server>,
    systems: &[Flavor],
    spec: &FanoutSpec,
    order_index: usize,
) -> FanoutBlock {
    let mut block = FanoutBlock {
        spec: spec.clone(),
        order: Vec::new(),
        runs: BTreeMap::new(),
    };
    for (k, &n) in spec.watchers.iter().enumerate() {
        for flavor in order_for(systems, order_index, k) {
            let Some(server) = running.get(flavor.name()) else {
                continue;
            };
            let label = format!("[fanout] {flavor}, {n} watchers");
            eprintln!(
                "{label}: {n} sessions watch one znode, {} write(s); at most {:.0} s",
                spec.rounds,
                spec.bound_secs()
            );
            block.order.push(flavor.name().to_string());
            let run = fanout::run(&server.addr().to_string(), n, spec, flavor.name()).await;
            match &run.failure {
                Some(f) => eprintln!("{label}: FAILED: {f}"),
                None => eprintln!(
                    "{label}: delivery p50 {:.0} µs, p99 {:.0} µs; all delivered in {:.1} ms (median of {}), worst {:.1} ms",
                    run.delivery.p50_us,
                    run.delivery.p99_us,
                    run.all_delivered_ms_median,
                    run.rounds.len(),
                    run.all_delivered_ms_max
                ),
            }
            block
                .runs
                .entry(flavor.name().to_string())
                .or_default()
                .push(run);
        }
    }
    block
}

/// The churn workload on the standalone servers: rounds alternating the
/// systems, pooled per system.
async fn churn_phase(
    running: &BTreeMap<&'static str, Server>,
    systems: &[Flavor],
    spec: &ChurnSpec,
    order_index: usize,
) -> ChurnBlock {
    let mut order = Vec::new();
    let mut rounds: BTreeMap<&'static str, Vec<churn::ChurnRound>> = BTreeMap::new();
    for r in 0..spec.rounds {
        for flavor in order_for(systems, order_index, r) {
            let Some(server) = running.get(flavor.name()) else {
                continue;
            };
            let label = format!("[churn] {flavor} (round {})", r + 1);
            eprintln!(
                "{label}: {}; at most {:.0} s",
                churn::describe(spec),
                spec.round_bound_secs()
            );
            order.push(flavor.name().to_string());
            let round = match server.pid() {
                Ok(pid) => {
                    let tag = format!("{}-{}", flavor.name(), r + 1);
                    churn::run_round(&server.addr().to_string(), pid, spec, &tag).await
                }
                Err(e) => churn::ChurnRound::failed(format!("{e:#}")),
            };
            let one = churn::summarize(std::slice::from_ref(&round));
            match &one.failure {
                Some(f) => eprintln!("{label}: FAILED: {f}"),
                None => eprintln!(
                    "{label}: {:.0} sessions/s; cycle p50 {:.0} µs, p99 {:.0} µs; {} errors; {} ephemerals left",
                    one.sessions_per_sec,
                    one.cycle.p50_us,
                    one.cycle.p99_us,
                    one.errors.values().sum::<u64>(),
                    one.leftover_ephemerals
                ),
            }
            rounds.entry(flavor.name()).or_default().push(round);
        }
    }
    ChurnBlock {
        spec: spec.clone(),
        order,
        runs: rounds
            .iter()
            .map(|(name, rs)| (name.to_string(), churn::summarize(rs)))
            .collect(),
    }
}

fn recipes_block(r: &mut Results) -> &mut RecipesBlock {
    r.recipes.as_mut().expect("the recipe phase sets it first")
}

fn ensemble_block(r: &mut Results) -> &mut EnsembleBlock {
    r.ensemble
        .as_mut()
        .expect("the ensemble phase sets it first")
}

fn serialize_flavors<S: serde::Serializer>(v: &[Flavor], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(v.iter().map(|f| f.name()))
}

fn names(systems: &[Flavor]) -> String {
    systems
        .iter()
        .map(|f| f.name())
        .collect::<Vec<_>>()
        .join(",")
}

fn log_run(label: &str, r: &RunResult) {
    if let Some(line) = report::members_line(r) {
        eprintln!("{label}: members {line}");
    }
    match &r.failure {
        Some(f) if r.ops == 0 => eprintln!("{label}: FAILED: {f}"),
        _ => eprintln!(
            "{label}: {:.0} ops/s, p50 {:.0} µs, p99 {:.0} µs, server CPU {:.1} µs/op{}{}",
            r.ops_per_sec,
            r.latency.p50_us,
            r.latency.p99_us,
            r.server_cpu_us_per_op,
            if r.errors > 0 {
                format!(", {} errors {:?}", r.errors, r.error_kinds)
            } else {
                String::new()
            },
            r.failure
                .as_ref()
                .map(|f| format!(" (incomplete: {f})"))
                .unwrap_or_default()
        ),
    }
}

/// The run-wide settings the recipe phase uses.
struct RecipePhase {
    quick: bool,
    warmup: f64,
    duration: f64,
    rounds: usize,
}

/// recipe-call, lock and queue (see src/recipes.rs).
async fn recipes_phase(
    args: &Args,
    systems: &[Flavor],
    server_cfg: &ServerConfig,
    p: &RecipePhase,
    order_index: &mut usize,
    results: &mut Results,
    save: &dyn Fn(&Results) -> Result<()>,
) -> Result<()> {
    use recipes::{ContendSpec, Contended, PluginsDir, RecipeCallSpec};
    let explicit = args.recipes_dir.clone();
    let modules_dir =
        tokio::task::spawn_blocking(move || recipes::find_modules(explicit)).await??;
    eprintln!("recipe modules from {}", modules_dir.display());
    results.recipes = Some(RecipesBlock {
        modules_dir: modules_dir.display().to_string(),
        systems: Vec::new(),
        recipe_call: None,
        lock: None,
        queue: None,
    });

    if args.workloads.contains(&Workload::RecipeCall) {
        if !systems.contains(&Flavor::Wazoo) {
            eprintln!("[recipe-call] skipped: wazoo is not among --systems");
        } else {
            let spec = RecipeCallSpec {
                samples: args
                    .recipe_call_samples
                    .unwrap_or(if p.quick { 2000 } else { 20_000 })
                    .max(1),
                warmup_samples: if p.quick { 200 } else { 2000 },
                node_bytes: 100,
                inprocess_calls: if p.quick { 2000 } else { 20_000 },
                timeout_secs: 120.0,
            };
            let plugins = PluginsDir::new(&modules_dir, &["echo"], "call")?;
            let (cfg, dir) = (server_cfg.clone(), plugins.path().to_path_buf());
            eprintln!("starting wazoo with the echo module ...");
            let server = tokio::task::spawn_blocking(move || {
                Server::start_with_plugins(Flavor::Wazoo, &cfg, Some(&dir))
            })
            .await??;
            let mut info = server.describe(server_cfg);
            info.notes.push(format!(
                "--plugins {} (echo.wasm)",
                plugins.path().display()
            ));
            recipes_block(results).systems.push(info);
            eprintln!(
                "[recipe-call] one connection: {} no-op recipe calls (echo.noop) and {} getData \
                 of a {}-byte znode, alternating (after {} pairs of warm-up); then {} in-process \
                 instantiate+call; at most {:.0} s",
                spec.samples,
                spec.samples,
                spec.node_bytes,
                spec.warmup_samples,
                spec.inprocess_calls,
                spec.bound_secs()
            );
            let run = recipes::recipe_call(
                &server.addr().to_string(),
                server.pid()?,
                &modules_dir.join("echo.wasm"),
                &spec,
            )
            .await;
            if let Some(f) = &run.failure {
                eprintln!("[recipe-call] FAILED: {f}");
            }
            eprintln!(
                "[recipe-call] call p50 {:.0} µs p99 {:.0} µs; getData p50 {:.0} µs p99 {:.0} µs; \
                 call/getData {:.2}x (p50), {:.2}x (p99); in-process instantiate+call p50 {}",
                run.call.p50_us,
                run.call.p99_us,
                run.get.p50_us,
                run.get.p99_us,
                run.ratio_p50,
                run.ratio_p99,
                run.inprocess
                    .as_ref()
                    .map(|i| format!("{:.1} µs", i.p50_us))
                    .unwrap_or_else(|| "–".into())
            );
            recipes_block(results).recipe_call = Some(RecipeCallBlock { spec, run });
            save(results)?;
            tokio::task::spawn_blocking(move || drop(server)).await?;
            drop(plugins);
        }
    }

    let contended: Vec<Contended> = args
        .workloads
        .iter()
        .filter_map(|w| match w {
            Workload::Lock => Some(Contended::Lock),
            Workload::Queue => Some(Contended::Queue),
            _ => None,
        })
        .collect();
    if contended.is_empty() {
        return Ok(());
    }
    let python = recipes::python(args.python.clone());
    let kazoo = {
        let py = python.clone();
        tokio::task::spawn_blocking(move || recipes::has_kazoo(&py)).await?
    };
    match &kazoo {
        Ok(v) => eprintln!("kazoo {v} ({python}) drives kazoo's recipes"),
        Err(e) => eprintln!("kazoo's recipes cannot run: {e:#}"),
    }
    let plugins = PluginsDir::new(&modules_dir, &["lock", "queue"], "ensemble")?;
    let mut running: BTreeMap<&'static str, Ensemble> = BTreeMap::new();
    for &flavor in systems {
        eprintln!(
            "starting a {}-member {flavor} ensemble for the recipes ...",
            args.members
        );
        let (cfg, n) = (server_cfg.clone(), args.members);
        let dir = (flavor == Flavor::Wazoo).then(|| plugins.path().to_path_buf());
        let t = Instant::now();
        let ens = tokio::task::spawn_blocking(move || {
            Ensemble::start_with_plugins(flavor, n, &cfg, dir.as_deref())
        })
        .await??;
        let mut info = tokio::task::block_in_place(|| ens.describe(server_cfg));
        if flavor == Flavor::Wazoo {
            info.notes.push(format!(
                "every member with --plugins {} (lock.wasm, queue.wasm)",
                plugins.path().display()
            ));
        }
        eprintln!(
            "  {flavor} ensemble serving after {:.1} s on {}",
            t.elapsed().as_secs_f64(),
            ens.connect_string()
        );
        recipes_block(results).systems.push(info);
        running.insert(flavor.name(), ens);
    }
    save(results)?;
    // Pairings: kazoo on ZooKeeper, wazoo's recipe, kazoo on wazoo.
    let kazoo_on_wazoo = !args.no_kazoo_on_wazoo;
    let mut pairings: Vec<&'static str> = Vec::new();
    for &flavor in systems {
        match flavor {
            Flavor::Zookeeper => pairings.push(recipes::ZK_KAZOO),
            Flavor::Wazoo => {
                pairings.push(recipes::WAZOO);
                if kazoo_on_wazoo {
                    pairings.push(recipes::WAZOO_KAZOO);
                }
            }
        }
    }
    for recipe in contended {
        let spec = ContendSpec {
            recipe,
            sessions: args.recipe_sessions.max(1),
            warmup_secs: p.warmup,
            duration_secs: args.recipe_duration_secs.unwrap_or(if p.quick {
                p.duration
            } else {
                5.0
            }),
            rounds: p.rounds,
            cycle_timeout_secs: 10.0,
            python: python.clone(),
            kazoo_on_wazoo,
        };
        let mut order = Vec::new();
        let mut rounds: BTreeMap<&'static str, Vec<recipes::ContendRound>> = BTreeMap::new();
        for r in 0..spec.rounds {
            let mut this_round = pairings.clone();
            if (*order_index + r) % 2 == 1 {
                this_round.reverse();
            }
            for key in this_round {
                let flavor = if key == recipes::ZK_KAZOO {
                    Flavor::Zookeeper
                } else {
                    Flavor::Wazoo
                };
                let ens = running.get(flavor.name()).expect("started above");
                let hosts = ens.connect_string();
                let label = format!(
                    "[{}] {} (round {})",
                    recipe.name(),
                    recipes::pairing(key, recipe),
                    r + 1
                );
                eprintln!(
                    "{label}: {}; at most {:.0} s",
                    spec.describe(),
                    spec.round_bound_secs()
                );
                order.push(key.to_string());
                let path = format!("/bench-{}-{key}-{}", recipe.name(), r + 1);
                let round = if key == recipes::WAZOO {
                    recipes::wazoo_round(&hosts, &spec, &path).await
                } else {
                    match &kazoo {
                        Ok(_) => recipes::kazoo_round(&hosts, &spec, &path).await,
                        Err(e) => recipes::ContendRound::failed(format!("{e:#}")),
                    }
                };
                let one = recipes::summarize(key, std::slice::from_ref(&round));
                match &one.failure {
                    Some(f) => eprintln!("{label}: FAILED: {f}"),
                    None => eprintln!(
                        "{label}: {:.0} cycles/s; cycle p50 {:.0} µs, p99 {:.0} µs; errors {:?}; {}",
                        one.cycles_per_sec,
                        one.cycle.p50_us,
                        one.cycle.p99_us,
                        one.errors,
                        match recipe {
                            Contended::Lock => format!("{} overlaps", one.overlaps),
                            Contended::Queue => format!(
                                "{} put, {} taken, {} left, {} duplicates, {} lost",
                                one.items_put,
                                one.items_taken,
                                one.remaining,
                                one.duplicates,
                                one.lost
                            ),
                        }
                    ),
                }
                rounds.entry(key).or_default().push(round);
                let runs = rounds
                    .iter()
                    .map(|(k, rs)| {
                        (
                            k.to_string(),
                            recipes::summarize(&recipes::pairing(k, recipe), rs),
                        )
                    })
                    .collect();
                let b = ContendBlock {
                    spec: spec.clone(),
                    order: order.clone(),
                    runs,
                };
                match recipe {
                    Contended::Lock => recipes_block(results).lock = Some(b),
                    Contended::Queue => recipes_block(results).queue = Some(b),
                }
                save(results)?;
            }
        }
        *order_index += 1;
    }
    eprintln!("stopping the recipe ensembles");
    tokio::task::spawn_blocking(move || drop(running)).await?;
    drop(plugins);
    Ok(())
}
