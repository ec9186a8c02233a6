//! The load generator: S sessions of the `zookeeper-client` crate, K tasks
//! per session each with one request in flight (so K requests pipelined on
//! every connection), for a warm-up and then a measured window.

mod nodes;
mod sample;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use hdrhistogram::Histogram;
use serde::Serialize;
use tokio::task::JoinSet;
use zookeeper_client as zk;

use crate::stats::{new_histogram, record, Latency, Rng};

pub use nodes::create_many;
use nodes::{prepare, Prepared};
pub(crate) use sample::{cpu_sample, CpuSample};
use sample::{member_modes, sessions_per_member};

/// Session timeout the load generator asks for (the crate's default is 6 s,
/// short enough for a GC pause under load to expire a session).
const SESSION_TIMEOUT: Duration = Duration::from_secs(30);

/// Everything a run of the bench can do; `--workloads` takes a list of these.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// create: persistent nodes with unique paths under one parent.
    Create,
    /// setData on random nodes of a pre-created set.
    Set,
    /// getData on random nodes of a pre-created set.
    Get,
    /// getData / setData on random pre-created nodes (90% reads by default).
    Mixed,
    /// Client throughput: one connection pipelining getData against wazoo,
    /// `zookeeper-client` crate vs `wazoo-client`.
    Client,
    /// Resident memory holding `--nodes` znodes of 100 bytes, and load time.
    Memory,
    /// Ensemble only: kill the leader under write load, measure the time to
    /// the first acknowledged write on the new leader.
    Failover,
    /// Ensemble only: as `failover`, but the leader is paused (SIGSTOP)
    /// instead of killed: its connections stay open and nothing answers.
    #[value(name = "failover-pause")]
    #[serde(rename = "failover-pause")]
    FailoverPause,
    /// Ensemble only: as `failover`, but the leader is cut off from the
    /// other members by a silent partition (the testkit's fault proxies
    /// between members drop every byte, no reset), on ensembles of their
    /// own started with those proxies.
    #[value(name = "failover-partition")]
    #[serde(rename = "failover-partition")]
    FailoverPartition,
    /// exists(path, watch=true) in a hot loop on random paths of
    /// `--watch-paths` pre-created znodes: the cost of the watch table.
    #[value(name = "exists-watch")]
    #[serde(rename = "exists-watch")]
    ExistsWatch,
    /// N sessions watch one znode, one write: time until every watcher
    /// got the event.
    Fanout,
    /// Sessions that open, create an ephemeral znode and close, in a loop.
    Churn,
    /// A server holding `--nodes` znodes killed (-9) and restarted: time
    /// from process start to the first answered request. Runs on the
    /// memory figure's loaded server (loading it if memory is not asked for).
    Recovery,
    /// A no-op recipe call (`echo.noop`) against a getData on one
    /// connection to a standalone wazoo, and the server-side instantiate +
    /// call time (src/recipes.rs).
    #[value(name = "recipe-call")]
    #[serde(rename = "recipe-call")]
    RecipeCall,
    /// Other clients' setData latency on a standalone wazoo while clients
    /// call a fuel-exhausting recipe flat out, against the same writes with
    /// no recipe load (src/recipes/isolation.rs).
    #[value(name = "recipe-isolation")]
    #[serde(rename = "recipe-isolation")]
    RecipeIsolation,
    /// Contended lock: wazoo's `lock` recipe on a wazoo ensemble against
    /// kazoo's `Lock` on a ZooKeeper ensemble (src/recipes.rs).
    Lock,
    /// Queue put + take: wazoo's `queue` recipe against kazoo's `Queue`.
    Queue,
    /// Throughput against sessions: `--sweep-workload` at each of
    /// `--sessions-sweep` session counts, on every topology run.
    Sweep,
    /// Resident memory against znode count (`--memory-curve-nodes`), a
    /// fresh standalone server per point (src/curves.rs).
    #[value(name = "memory-curve")]
    #[serde(rename = "memory-curve")]
    MemoryCurve,
    /// Time to notify every watcher against the watcher count
    /// (`--fanout-curve-watchers`).
    #[value(name = "fanout-curve")]
    #[serde(rename = "fanout-curve")]
    FanoutCurve,
    /// setData throughput against payload size (`--payload-curve-bytes`).
    #[value(name = "payload-curve")]
    #[serde(rename = "payload-curve")]
    PayloadCurve,
}

impl Workload {
    pub fn name(self) -> &'static str {
        match self {
            Workload::Create => "create",
            Workload::Set => "set",
            Workload::Get => "get",
            Workload::Mixed => "mixed",
            Workload::Client => "client",
            Workload::Memory => "memory",
            Workload::Failover => "failover",
            Workload::FailoverPause => "failover-pause",
            Workload::FailoverPartition => "failover-partition",
            Workload::ExistsWatch => "exists-watch",
            Workload::Fanout => "fanout",
            Workload::Churn => "churn",
            Workload::Recovery => "recovery",
            Workload::RecipeCall => "recipe-call",
            Workload::RecipeIsolation => "recipe-isolation",
            Workload::Lock => "lock",
            Workload::Queue => "queue",
            Workload::Sweep => "sweep",
            Workload::MemoryCurve => "memory-curve",
            Workload::FanoutCurve => "fanout-curve",
            Workload::PayloadCurve => "payload-curve",
        }
    }

    /// The throughput workloads driven by [`run_workload`].
    pub fn is_throughput(self) -> bool {
        matches!(
            self,
            Workload::Create
                | Workload::Set
                | Workload::Get
                | Workload::Mixed
                | Workload::ExistsWatch
        )
    }
}

/// The shape of the load, the same for both systems.
#[derive(Clone, Debug, Serialize)]
pub struct LoadSpec {
    pub sessions: usize,
    pub inflight: usize,
    pub payload: usize,
    pub warmup_secs: f64,
    pub duration_secs: f64,
    /// Pre-created nodes that set/get/mixed pick from at random.
    pub keys: usize,
    /// Measured rounds per system (alternating order).
    pub rounds: usize,
    pub mixed_read_percent: u32,
    /// exists-watch: pre-created znodes it watches at random.
    pub watch_paths: usize,
}

/// What one system did in one workload: every round pooled (requests of
/// all measured windows together, latencies from the merged histograms).
#[derive(Clone, Debug, Default, Serialize)]
pub struct RunResult {
    /// Successful operations that started and finished inside the measured windows.
    pub ops: u64,
    pub window_secs: f64,
    pub ops_per_sec: f64,
    /// ops/s of each round, in the order run.
    pub rounds_ops_per_sec: Vec<f64>,
    pub latency: Latency,
    /// Latency at [`crate::svg::CDF_QUANTILES`], in µs (for the CDF plot).
    pub latency_cdf_us: Vec<f64>,
    /// Mixed only: the reads and the writes separately.
    pub read_latency: Option<Latency>,
    pub write_latency: Option<Latency>,
    pub errors: u64,
    pub error_kinds: BTreeMap<String, u64>,
    /// CPU seconds the server process used during the windows (all threads).
    pub server_cpu_secs: f64,
    pub server_cpu_us_per_op: f64,
    /// CPU seconds this (client) process used during the windows.
    pub client_cpu_secs: f64,
    pub client_cpu_us_per_op: f64,
    /// CPU the other (idle) server process used during the windows, in cores.
    pub idle_server_cpu_cores: f64,
    /// CPU every other task of the machine (other processes, kernel threads
    /// such as the filesystem's journal) used during the windows, in cores:
    /// the noise on a shared box.
    pub other_cpu_cores: f64,
    /// Kernel irq + softirq time during the windows, in cores: mostly the
    /// loopback network processing of this very load.
    pub softirq_cores: f64,
    /// Ensembles: CPU seconds of each member during the windows (all rounds),
    /// by member index; standalone: empty.
    pub member_cpu_secs: Vec<f64>,
    /// Ensembles: each member's `srvr` mode when the first round started.
    pub member_modes: Vec<String>,
    /// Ensembles: how many of the sessions each member held, per round (the
    /// client picks a member at random; from the members' `cons`).
    pub sessions_per_member: Vec<Vec<i64>>,
    /// Set when a round did not complete; the figures above are then partial.
    pub failure: Option<String>,
}

/// Where a throughput workload sends its load.
#[derive(Clone, Debug)]
pub struct Target {
    /// Connect string: one server, or every member of an ensemble.
    pub cluster: String,
    /// Ensembles: each member's client address (for `mntr`); standalone: empty.
    pub members: Vec<SocketAddr>,
    /// The server process, or each member's, in member order.
    pub server_pids: Vec<u32>,
    /// The other system's processes, idle meanwhile.
    pub idle_pids: Vec<u32>,
}

/// One measured round, with its histograms kept for pooling.
pub struct RawRound {
    reads: Histogram<u64>,
    writes: Histogram<u64>,
    errors: BTreeMap<String, u64>,
    window_secs: f64,
    server_cpu_secs: f64,
    client_cpu_secs: f64,
    other_cpu_secs: f64,
    idle_server_cpu_secs: f64,
    softirq_secs: f64,
    member_cpu_secs: Vec<f64>,
    member_modes: Vec<String>,
    sessions_per_member: Vec<i64>,
    failure: Option<String>,
}

impl RawRound {
    pub fn failed(why: String) -> RawRound {
        RawRound {
            reads: new_histogram(),
            writes: new_histogram(),
            errors: BTreeMap::new(),
            window_secs: 0.0,
            server_cpu_secs: 0.0,
            client_cpu_secs: 0.0,
            other_cpu_secs: 0.0,
            idle_server_cpu_secs: 0.0,
            softirq_secs: 0.0,
            member_cpu_secs: Vec::new(),
            member_modes: Vec::new(),
            sessions_per_member: Vec::new(),
            failure: Some(why),
        }
    }

    pub fn ops(&self) -> u64 {
        self.reads.len() + self.writes.len()
    }

    pub fn ops_per_sec(&self) -> f64 {
        if self.window_secs > 0.0 {
            self.ops() as f64 / self.window_secs
        } else {
            0.0
        }
    }
}

/// Pools the rounds of one system in one workload.
pub fn summarize(workload: Workload, rounds: &[RawRound]) -> RunResult {
    let mut reads = new_histogram();
    let mut writes = new_histogram();
    let mut errors: BTreeMap<String, u64> = BTreeMap::new();
    let (mut window, mut server, mut client) = (0.0, 0.0, 0.0);
    let (mut other, mut idle, mut irq) = (0.0, 0.0, 0.0);
    let mut failures = Vec::new();
    let mut member_cpu: Vec<f64> = Vec::new();
    for r in rounds {
        if member_cpu.len() < r.member_cpu_secs.len() {
            member_cpu.resize(r.member_cpu_secs.len(), 0.0);
        }
        for (i, c) in r.member_cpu_secs.iter().enumerate() {
            member_cpu[i] += c;
        }
        reads.add(&r.reads).expect("same histogram bounds");
        writes.add(&r.writes).expect("same histogram bounds");
        for (k, v) in &r.errors {
            *errors.entry(k.clone()).or_default() += v;
        }
        window += r.window_secs;
        server += r.server_cpu_secs;
        client += r.client_cpu_secs;
        other += r.other_cpu_secs;
        idle += r.idle_server_cpu_secs;
        irq += r.softirq_secs;
        failures.extend(r.failure.clone());
    }
    let mut all = reads.clone();
    all.add(&writes).expect("same histogram bounds");
    let ops = all.len();
    let per_op = |cpu: f64| {
        if ops == 0 {
            0.0
        } else {
            cpu * 1e6 / ops as f64
        }
    };
    let mixed = workload == Workload::Mixed;
    RunResult {
        ops,
        window_secs: window,
        ops_per_sec: if window > 0.0 {
            ops as f64 / window
        } else {
            0.0
        },
        rounds_ops_per_sec: rounds.iter().map(RawRound::ops_per_sec).collect(),
        latency: Latency::of(&all),
        latency_cdf_us: crate::svg::cdf_points(&all),
        read_latency: mixed.then(|| Latency::of(&reads)),
        write_latency: mixed.then(|| Latency::of(&writes)),
        errors: errors.values().sum(),
        error_kinds: errors,
        server_cpu_secs: server,
        server_cpu_us_per_op: per_op(server),
        client_cpu_secs: client,
        client_cpu_us_per_op: per_op(client),
        idle_server_cpu_cores: if window > 0.0 { idle / window } else { 0.0 },
        other_cpu_cores: if window > 0.0 { other / window } else { 0.0 },
        softirq_cores: if window > 0.0 { irq / window } else { 0.0 },
        member_cpu_secs: member_cpu,
        member_modes: rounds
            .iter()
            .find(|r| !r.member_modes.is_empty())
            .map(|r| r.member_modes.clone())
            .unwrap_or_default(),
        sessions_per_member: rounds
            .iter()
            .filter(|r| !r.sessions_per_member.is_empty())
            .map(|r| r.sessions_per_member.clone())
            .collect(),
        failure: (!failures.is_empty()).then(|| failures.join("; ")),
    }
}

/// Connects `n` sessions to `cluster` (a connect string: one server, or
/// every member of an ensemble, of which the client picks one at random),
/// at most [`CONNECTS_IN_FLIGHT`] handshakes at a time (thousands at once
/// overflow a server's accept backlog and time out), within
/// [`connect_bound`].
pub async fn connect_sessions(cluster: &str, n: usize) -> Result<Vec<zk::Client>> {
    let mut set = JoinSet::new();
    let gate = Arc::new(tokio::sync::Semaphore::new(CONNECTS_IN_FLIGHT));
    for i in 0..n {
        let cluster = cluster.to_string();
        let gate = gate.clone();
        set.spawn(async move {
            let _permit = gate.acquire_owned().await;
            let c = zk::Client::connector()
                .with_session_timeout(SESSION_TIMEOUT)
                .with_connection_timeout(Duration::from_secs(10))
                .connect(&cluster)
                .await;
            (i, c)
        });
    }
    let mut clients: Vec<Option<zk::Client>> = (0..n).map(|_| None).collect();
    let bound = connect_bound(n);
    let joined = tokio::time::timeout(bound, async {
        while let Some(r) = set.join_next().await {
            let (i, c) = r.context("connect task panicked")?;
            clients[i] = Some(c.with_context(|| format!("connecting session {i} to {cluster}"))?);
        }
        Ok::<(), anyhow::Error>(())
    })
    .await;
    match joined {
        Ok(r) => r?,
        Err(_) => bail!("connecting {n} sessions to {cluster} took more than {bound:?}"),
    }
    Ok(clients.into_iter().map(|c| c.expect("joined")).collect())
}

/// Session handshakes [`connect_sessions`] has in flight at once.
pub const CONNECTS_IN_FLIGHT: usize = 256;

/// How long [`connect_sessions`] may take for `n` sessions: 60 s, plus
/// 20 ms a session beyond the first thousand (10,000 sessions: 240 s).
pub fn connect_bound(n: usize) -> Duration {
    Duration::from_secs(60) + Duration::from_millis(20 * n.saturating_sub(1000) as u64)
}

pub fn persistent() -> zk::CreateOptions<'static> {
    zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())
}

/// Whether an error means the session is gone (the task stops instead of
/// spinning on failures).
pub fn is_fatal(e: &zk::Error) -> bool {
    matches!(
        e,
        zk::Error::ConnectionLoss | zk::Error::SessionExpired | zk::Error::ClientClosed
    )
}

pub fn error_kind(e: &zk::Error) -> String {
    if let zk::Error::Custom(c) = e {
        // The client's own conditions ("no response from connection in
        // 6000ms", an I/O error, ...): the message says which.
        let msg: String = c.to_string().chars().take(80).collect();
        return format!("Custom: {msg}");
    }
    let s = format!("{e:?}");
    s.split(['(', ' ', '{']).next().unwrap_or(&s).to_string()
}

/// exists-watch: the watchers a session holds, the newest per path. A
/// replaced watcher is dropped while the newer one on the same path is
/// registered, so the client sends nothing to the server for it.
type SessionWatchers = std::sync::Mutex<std::collections::HashMap<usize, zk::OneshotWatcher>>;

struct TaskResult {
    reads: Histogram<u64>,
    writes: Histogram<u64>,
    errors: BTreeMap<String, u64>,
}

#[allow(clippy::too_many_arguments)]
async fn worker(
    client: zk::Client,
    workload: Workload,
    session: usize,
    task: usize,
    prepared: Arc<Prepared>,
    payload: Arc<Vec<u8>>,
    read_percent: u32,
    window: (Instant, Instant),
    live: Arc<AtomicU64>,
    watchers: Arc<SessionWatchers>,
) -> TaskResult {
    let (measure_start, end) = window;
    let mut rng = Rng::new(((session as u64) << 32) | task as u64);
    let mut out = TaskResult {
        reads: new_histogram(),
        writes: new_histogram(),
        errors: BTreeMap::new(),
    };
    let keys = &prepared.keys;
    let mut n: u64 = 0;
    loop {
        let t0 = Instant::now();
        if t0 >= end {
            break;
        }
        let (is_read, result) = match workload {
            Workload::Create => {
                n += 1;
                let path = format!("{}/s{session}t{task}n{n}", prepared.parent);
                (
                    false,
                    client
                        .create(&path, &payload, &persistent())
                        .await
                        .map(drop),
                )
            }
            Workload::Set => {
                let key = &keys[rng.below(keys.len() as u64) as usize];
                (false, client.set_data(key, &payload, None).await.map(drop))
            }
            Workload::Get => {
                let key = &keys[rng.below(keys.len() as u64) as usize];
                (true, client.get_data(key).await.map(drop))
            }
            Workload::Mixed => {
                let key = &keys[rng.below(keys.len() as u64) as usize];
                if rng.below(100) < read_percent as u64 {
                    (true, client.get_data(key).await.map(drop))
                } else {
                    (false, client.set_data(key, &payload, None).await.map(drop))
                }
            }
            Workload::ExistsWatch => {
                let i = rng.below(keys.len() as u64) as usize;
                let r = client.check_and_watch_stat(&keys[i]).await;
                (
                    true,
                    r.map(|(_, w)| {
                        // Keep the newest watcher of each path: dropping
                        // the last one would make the client send a
                        // removeWatches, a second request per exists.
                        let old = watchers.lock().expect("not poisoned").insert(i, w);
                        drop(old);
                    }),
                )
            }
            Workload::Client
            | Workload::Memory
            | Workload::Failover
            | Workload::FailoverPause
            | Workload::FailoverPartition
            | Workload::Fanout
            | Workload::Churn
            | Workload::Recovery
            | Workload::RecipeCall
            | Workload::RecipeIsolation
            | Workload::Lock
            | Workload::Queue
            | Workload::Sweep
            | Workload::MemoryCurve
            | Workload::FanoutCurve
            | Workload::PayloadCurve => {
                unreachable!("not a throughput workload")
            }
        };
        let t1 = Instant::now();
        match result {
            Ok(()) => {
                live.fetch_add(1, Ordering::Relaxed);
                if t0 >= measure_start && t1 <= end {
                    let h = if is_read {
                        &mut out.reads
                    } else {
                        &mut out.writes
                    };
                    record(h, t1 - t0);
                }
            }
            Err(e) => {
                *out.errors.entry(error_kind(&e)).or_default() += 1;
                if is_fatal(&e) {
                    break;
                }
            }
        }
    }
    out
}

/// An upper bound on one round of a throughput workload: connecting
/// ([`connect_bound`]), pre-creating its znodes (120 s), the warm-up and
/// window, and draining the last replies (30 s); each step is bounded by
/// those timeouts.
pub fn round_bound_secs(spec: &LoadSpec) -> f64 {
    connect_bound(spec.sessions).as_secs_f64()
        + 120.0
        + spec.warmup_secs
        + spec.duration_secs
        + 30.0
}

/// Runs one round of a throughput workload against `target`.
pub async fn run_workload(
    target: &Target,
    workload: Workload,
    spec: &LoadSpec,
    label: &str,
) -> RawRound {
    match run_workload_inner(target, workload, spec, label).await {
        Ok(r) => r,
        Err(e) => RawRound::failed(format!("{e:#}")),
    }
}

async fn run_workload_inner(
    target: &Target,
    workload: Workload,
    spec: &LoadSpec,
    label: &str,
) -> Result<RawRound> {
    let clients = connect_sessions(&target.cluster, spec.sessions).await?;
    let placement = sessions_per_member(&target.members, &clients).await;
    let modes = member_modes(&target.members).await;
    let prepared = Arc::new(prepare(&clients, workload, spec).await?);
    let payload = Arc::new(vec![b'v'; spec.payload]);
    let warmup = Duration::from_secs_f64(spec.warmup_secs);
    let duration = Duration::from_secs_f64(spec.duration_secs);
    let start = Instant::now();
    let measure_start = start + warmup;
    let end = measure_start + duration;
    let live = Arc::new(AtomicU64::new(0));
    let mut set = JoinSet::new();
    for (s, client) in clients.iter().enumerate() {
        let watchers = Arc::new(SessionWatchers::default());
        for t in 0..spec.inflight {
            set.spawn(worker(
                client.clone(),
                workload,
                s,
                t,
                prepared.clone(),
                payload.clone(),
                spec.mixed_read_percent,
                (measure_start, end),
                live.clone(),
                watchers.clone(),
            ));
        }
    }
    // Progress every 2 s: completed ops/s since the last line.
    let stop_progress = Arc::new(AtomicBool::new(false));
    let progress = {
        let (live, stop, label) = (live.clone(), stop_progress.clone(), label.to_string());
        tokio::spawn(async move {
            let mut last = 0;
            let mut t = Instant::now();
            loop {
                tokio::time::sleep(Duration::from_secs(2)).await;
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                let now = live.load(Ordering::Relaxed);
                let phase = if Instant::now() < measure_start {
                    "warm-up"
                } else {
                    "measuring"
                };
                eprintln!(
                    "  {label}: {phase} {:.0} s, {:.0} ops/s",
                    start.elapsed().as_secs_f64(),
                    (now - last) as f64 / t.elapsed().as_secs_f64()
                );
                last = now;
                t = Instant::now();
            }
        })
    };

    tokio::time::sleep_until(measure_start.into()).await;
    let c0 = cpu_sample(target)?;
    tokio::time::sleep_until(end.into()).await;
    let c1 = cpu_sample(target)?;

    // Every task stops issuing at `end`; give the last replies a bounded time.
    let mut round = RawRound::failed(String::new());
    round.failure = None;
    let drained = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(r) = set.join_next().await {
            let r = r.context("worker panicked")?;
            round.reads.add(&r.reads).expect("same histogram bounds");
            round.writes.add(&r.writes).expect("same histogram bounds");
            for (k, v) in r.errors {
                *round.errors.entry(k).or_default() += v;
            }
        }
        Ok::<(), anyhow::Error>(())
    })
    .await;
    stop_progress.store(true, Ordering::Relaxed);
    progress.abort();
    round.failure = match drained {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(format!("{e:#}")),
        Err(_) => Some("requests still outstanding 30 s after the window ended".to_string()),
    };
    round.window_secs = duration.as_secs_f64();
    let members: Vec<f64> = c1
        .servers
        .iter()
        .zip(&c0.servers)
        .map(|(a, b)| a - b)
        .collect();
    round.server_cpu_secs = members.iter().sum();
    if !target.members.is_empty() {
        round.member_cpu_secs = members;
        round.member_modes = modes;
        round.sessions_per_member = placement;
    }
    round.client_cpu_secs = c1.client - c0.client;
    round.idle_server_cpu_secs = c1.idle - c0.idle;
    round.other_cpu_secs = ((c1.busy - c0.busy)
        - round.server_cpu_secs
        - round.client_cpu_secs
        - round.idle_server_cpu_secs)
        .max(0.0);
    round.softirq_secs = c1.irq - c0.irq;
    Ok(round)
}
