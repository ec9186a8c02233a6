//! The recipe workloads (issues 5 and 6): wazoo's server-side recipes
//! (WebAssembly modules loaded with `--plugins`) against kazoo's client-side
//! ones on Apache ZooKeeper.
//!
//! * `recipe-call`: on a standalone wazoo with the `echo` module, ONE
//!   connection alternates a no-op recipe call (`echo.noop`) and a getData
//!   of a small znode, N samples each: the round trip of each and the ratio.
//!   Plus the server-side instantiate + call time of `echo.noop`, measured
//!   in this process with the server's own runtime (`wazoo::plugin::Runtime`,
//!   default configuration: pooling allocator, fresh instance per call), as
//!   runtime/tests/plugin_bench.rs does.
//! * `lock`: S sessions loop acquire + release on one lock path: wazoo's
//!   `lock` recipe (client handle `Lock`) on a wazoo ensemble against kazoo's
//!   `Lock` on a ZooKeeper ensemble (bench/kazoo_recipes.py, a thread and a
//!   `KazooClient` per session), and kazoo's `Lock` on the wazoo ensemble
//!   (the server's share of the difference, apart from the recipe's).
//! * `queue`: S sessions loop put + take on one queue: wazoo's `queue`
//!   recipe (`Queue`) against kazoo's `Queue`, same three pairings. Every
//!   item must be taken exactly once or still be in the queue.

use std::collections::{BTreeMap, HashSet};
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use hdrhistogram::Histogram;
use serde::Serialize;
use tokio::task::JoinSet;
use wazoo::plugin::abi::{self, CallerInfo, CreateMode, NodeStat, Reply};
use wazoo::plugin::{RecipeHost, Runtime, RuntimeConfig};
use wazoo_client::recipes::{Lock, Queue};
use wazoo_client::{Client, ClientOptions};
use wazoo_proto::ErrorCode;
use zookeeper_client as zk;

use crate::load::{connect_sessions, persistent};
use crate::stats::{new_histogram, record, Latency};

/// The modules the recipe workloads load.
pub const MODULES: &[&str] = &["echo", "lock", "queue"];

/// The run keys: kazoo's recipe on ZooKeeper, wazoo's recipe on wazoo,
/// kazoo's recipe on wazoo.
pub const ZK_KAZOO: &str = "zookeeper";
pub const WAZOO: &str = "wazoo";
pub const WAZOO_KAZOO: &str = "wazoo-kazoo";

const SESSION_TIMEOUT: Duration = Duration::from_secs(30);

/// Where the compiled recipe modules (`echo.wasm`, `lock.wasm`,
/// `queue.wasm`) come from: `--recipes-dir`, else `$WAZOO_RECIPES_DIR`,
/// else scripts/build-recipes.sh builds them into `<workspace>/target/recipes`
/// (incremental: about a second when nothing changed).
pub fn find_modules(explicit: Option<PathBuf>) -> Result<PathBuf> {
    let dir = match explicit.or_else(|| std::env::var_os("WAZOO_RECIPES_DIR").map(PathBuf::from)) {
        Some(d) => d,
        None => {
            let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
                .parent()
                .expect("bench lives inside the workspace");
            let out = workspace.join("target").join("recipes");
            eprintln!(
                "building the recipe modules (scripts/build-recipes.sh {}) ...",
                out.display()
            );
            let status = Command::new("bash")
                .arg(workspace.join("scripts").join("build-recipes.sh"))
                .arg(&out)
                .stdout(Stdio::null())
                .status()
                .context("running scripts/build-recipes.sh")?;
            if !status.success() {
                bail!(
                    "scripts/build-recipes.sh failed ({status}); is the wasm32-unknown-unknown \
                     target installed? Or point --recipes-dir at built modules"
                );
            }
            out
        }
    };
    for m in MODULES {
        let p = dir.join(format!("{m}.wasm"));
        if !p.is_file() {
            bail!(
                "{} is missing (--recipes-dir {})",
                p.display(),
                dir.display()
            );
        }
    }
    std::fs::canonicalize(&dir).with_context(|| format!("resolving {}", dir.display()))
}

/// A plugins directory holding only the named modules (a wazoo member
/// compiles every module it loads at start); removed on drop.
pub struct PluginsDir(PathBuf);

impl PluginsDir {
    pub fn new(modules_dir: &Path, modules: &[&str], tag: &str) -> Result<PluginsDir> {
        let dir =
            std::env::temp_dir().join(format!("wazoo-bench-plugins-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        for m in modules {
            let name = format!("{m}.wasm");
            std::fs::copy(modules_dir.join(&name), dir.join(&name))
                .with_context(|| format!("copying {name}"))?;
        }
        Ok(PluginsDir(dir))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for PluginsDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

async fn wazoo_connect(hosts: &str) -> Result<Client> {
    let opts = ClientOptions {
        session_timeout: SESSION_TIMEOUT,
        connect_timeout: Some(Duration::from_secs(10)),
        ..Default::default()
    };
    let (c, _events) = Client::connect(hosts, opts)
        .await
        .with_context(|| format!("wazoo-client connecting to {hosts}"))?;
    Ok(c)
}

// ---- recipe-call ----------------------------------------------------------

#[derive(Clone, Debug, Serialize)]
pub struct RecipeCallSpec {
    /// Samples of each kind (call and getData, alternating).
    pub samples: usize,
    /// Unmeasured pairs first.
    pub warmup_samples: usize,
    /// Bytes of the znode read by getData.
    pub node_bytes: usize,
    /// Calls of the in-process instantiate + call measurement.
    pub inprocess_calls: usize,
    /// The whole workload gives up after this long.
    pub timeout_secs: f64,
}

/// Server-side `echo.noop`: instantiate + call in the server's runtime.
#[derive(Clone, Debug, Default, Serialize)]
pub struct InProcess {
    pub module_bytes: u64,
    pub compile_ms: f64,
    pub calls: usize,
    pub p50_us: f64,
    pub p99_us: f64,
    pub mean_us: f64,
    pub fuel: u64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct RecipeCallRun {
    /// Round trip of `echo.noop` (a recipe call on the client port).
    pub call: Latency,
    /// Round trip of getData of a `node_bytes` znode, same connection.
    pub get: Latency,
    pub call_cdf_us: Vec<f64>,
    pub get_cdf_us: Vec<f64>,
    /// call / getData at p50 and p99 (target: at most 1.5).
    pub ratio_p50: f64,
    pub ratio_p99: f64,
    /// Server CPU (user+system) over the measured samples, per request
    /// (calls and gets together).
    pub server_cpu_us_per_request: f64,
    pub errors: BTreeMap<String, u64>,
    pub inprocess: Option<InProcess>,
    pub failure: Option<String>,
}

impl RecipeCallSpec {
    pub fn bound_secs(&self) -> f64 {
        self.timeout_secs + 10.0
    }
}

/// The recipe-call workload against the wazoo server at `addr` (process
/// `pid`) that has the echo module loaded, then the in-process figure with
/// `echo_wasm`.
pub async fn recipe_call(
    hosts: &str,
    pid: u32,
    echo_wasm: &Path,
    spec: &RecipeCallSpec,
) -> RecipeCallRun {
    let limit = Duration::from_secs_f64(spec.timeout_secs);
    let mut run = match tokio::time::timeout(limit, recipe_call_wire(hosts, pid, spec)).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => RecipeCallRun {
            failure: Some(format!("{e:#}")),
            ..Default::default()
        },
        Err(_) => RecipeCallRun {
            failure: Some(format!("took longer than {limit:?}")),
            ..Default::default()
        },
    };
    let (bytes, calls) = (echo_wasm.to_path_buf(), spec.inprocess_calls);
    match tokio::task::spawn_blocking(move || inprocess(&bytes, calls)).await {
        Ok(Ok(p)) => run.inprocess = Some(p),
        Ok(Err(e)) => {
            let f = format!("in-process: {e:#}");
            run.failure = Some(match run.failure.take() {
                Some(prev) => format!("{prev}; {f}"),
                None => f,
            });
        }
        Err(e) => run.failure = Some(format!("in-process measurement panicked: {e}")),
    }
    run
}

async fn recipe_call_wire(hosts: &str, pid: u32, spec: &RecipeCallSpec) -> Result<RecipeCallRun> {
    let path = "/bench-recipe-call";
    let admin = connect_sessions(hosts, 1)
        .await?
        .pop()
        .expect("one session");
    match admin
        .create(path, &vec![b'x'; spec.node_bytes], &persistent())
        .await
    {
        Ok(_) | Err(zk::Error::NodeExists) => {}
        Err(e) => bail!("create {path}: {e}"),
    }
    drop(admin);
    let c = wazoo_connect(hosts).await?;
    let args = abi::encode(&()).context("encoding ()")?;
    let (mut call_h, mut get_h) = (new_histogram(), new_histogram());
    let mut errors: BTreeMap<String, u64> = BTreeMap::new();
    let mut cpu0 = None;
    for i in 0..spec.warmup_samples + spec.samples {
        if i == spec.warmup_samples {
            cpu0 = Some(crate::servers::cpu_secs(Some(pid))?);
        }
        let measured = i >= spec.warmup_samples;
        // Alternate which goes first, so neither always follows the other.
        for k in 0..2 {
            let do_call = (i + k) % 2 == 0;
            let t = Instant::now();
            if do_call {
                match c.recipe_call("echo", "noop", &args).await {
                    Ok(body) => match abi::decode::<Reply>(&body) {
                        Ok(Reply::Done(_)) => {
                            if measured {
                                record(&mut call_h, t.elapsed());
                            }
                        }
                        Ok(other) => bail!("echo.noop answered {other:?}"),
                        Err(e) => bail!("echo.noop reply does not decode: {e}"),
                    },
                    Err(e) => *errors.entry(format!("call: {e}")).or_default() += 1,
                }
            } else {
                match c.get_data(path).await {
                    Ok((data, _)) => {
                        if data.len() != spec.node_bytes {
                            bail!("getData returned {} bytes", data.len());
                        }
                        if measured {
                            record(&mut get_h, t.elapsed());
                        }
                    }
                    Err(e) => *errors.entry(format!("get: {e}")).or_default() += 1,
                }
            }
        }
        if errors.values().sum::<u64>() > 100 {
            bail!("too many errors: {errors:?}");
        }
    }
    let cpu1 = crate::servers::cpu_secs(Some(pid))?;
    let _ = c.close().await;
    let (call, get) = (Latency::of(&call_h), Latency::of(&get_h));
    let requests = (call.count + get.count).max(1) as f64;
    Ok(RecipeCallRun {
        ratio_p50: if get.p50_us > 0.0 {
            call.p50_us / get.p50_us
        } else {
            0.0
        },
        ratio_p99: if get.p99_us > 0.0 {
            call.p99_us / get.p99_us
        } else {
            0.0
        },
        call_cdf_us: crate::svg::cdf_points(&call_h),
        get_cdf_us: crate::svg::cdf_points(&get_h),
        call,
        get,
        server_cpu_us_per_request: (cpu1 - cpu0.unwrap_or(cpu1)) * 1e6 / requests,
        errors,
        inprocess: None,
        failure: None,
    })
}

/// A tree that answers nothing: `echo.noop` never touches it.
struct NoTree;

impl RecipeHost for NoTree {
    fn get(&mut self, _: &str, _: Option<&str>) -> Result<(Vec<u8>, NodeStat), ErrorCode> {
        Err(ErrorCode::Unimplemented)
    }
    fn children(&mut self, _: &str, _: Option<&str>) -> Result<Vec<String>, ErrorCode> {
        Err(ErrorCode::Unimplemented)
    }
    fn exists(&mut self, _: &str, _: Option<&str>) -> Result<Option<NodeStat>, ErrorCode> {
        Err(ErrorCode::Unimplemented)
    }
    fn create(&mut self, _: &str, _: &[u8], _: CreateMode) -> Result<String, ErrorCode> {
        Err(ErrorCode::Unimplemented)
    }
    fn set(&mut self, _: &str, _: &[u8], _: i32) -> Result<NodeStat, ErrorCode> {
        Err(ErrorCode::Unimplemented)
    }
    fn delete(&mut self, _: &str, _: i32) -> Result<(), ErrorCode> {
        Err(ErrorCode::Unimplemented)
    }
    fn check(&mut self, _: &str, _: i32) -> Result<(), ErrorCode> {
        Err(ErrorCode::Unimplemented)
    }
    fn notify(&mut self, _: i64, _: &[u8]) -> Result<(), ErrorCode> {
        Err(ErrorCode::Unimplemented)
    }
}

/// `echo.noop` instantiated and called `calls` times (after a tenth as
/// many unmeasured) in the server's runtime, in this process.
fn inprocess(echo_wasm: &Path, calls: usize) -> Result<InProcess> {
    let bytes = std::fs::read(echo_wasm).with_context(|| format!("{}", echo_wasm.display()))?;
    let rt = Runtime::new(RuntimeConfig::default())?;
    let t = Instant::now();
    rt.load_bytes(&bytes)
        .map_err(|e| anyhow::anyhow!("loading echo.wasm: {e}"))?;
    let compile = t.elapsed();
    let caller = CallerInfo {
        session: 1,
        guid: "bench".into(),
    };
    let mut tree = NoTree;
    let mut fuel = 0;
    for _ in 0..calls / 10 {
        rt.call("echo", "noop", &[], &caller, &mut tree)
            .map_err(|e| anyhow::anyhow!("echo.noop: {e}"))?;
    }
    let mut h = new_histogram();
    for _ in 0..calls {
        let t = Instant::now();
        let out = rt
            .call("echo", "noop", &[], &caller, &mut tree)
            .map_err(|e| anyhow::anyhow!("echo.noop: {e}"))?;
        record(&mut h, t.elapsed());
        fuel = out.fuel_used;
    }
    let l = Latency::of(&h);
    Ok(InProcess {
        module_bytes: bytes.len() as u64,
        compile_ms: compile.as_secs_f64() * 1e3,
        calls,
        p50_us: l.p50_us,
        p99_us: l.p99_us,
        mean_us: l.mean_us,
        fuel,
    })
}

// ---- lock and queue -------------------------------------------------------

/// Which contended recipe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Contended {
    Lock,
    Queue,
}

impl Contended {
    pub fn name(self) -> &'static str {
        match self {
            Contended::Lock => "lock",
            Contended::Queue => "queue",
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct ContendSpec {
    pub recipe: Contended,
    /// Contending sessions (one connection each).
    pub sessions: usize,
    pub warmup_secs: f64,
    pub duration_secs: f64,
    /// Rounds per pairing, the order alternating.
    pub rounds: usize,
    /// One acquire/release or put/take gives up after this long.
    pub cycle_timeout_secs: f64,
    /// The Python running bench/kazoo_recipes.py.
    pub python: String,
    /// Also run kazoo's recipe against the wazoo ensemble.
    pub kazoo_on_wazoo: bool,
}

impl ContendSpec {
    /// An upper bound on one round: connecting, warm-up, window, the last
    /// cycles' timeout, the checks (and Python's start).
    pub fn round_bound_secs(&self) -> f64 {
        30.0 + self.warmup_secs + self.duration_secs + self.cycle_timeout_secs + 30.0
    }

    pub fn describe(&self) -> String {
        match self.recipe {
            Contended::Lock => format!(
                "{} sessions loop acquire + release on one lock path, {} s warm-up + {} s measured",
                self.sessions, self.warmup_secs, self.duration_secs
            ),
            Contended::Queue => format!(
                "{} sessions loop put + take on one queue, {} s warm-up + {} s measured",
                self.sessions, self.warmup_secs, self.duration_secs
            ),
        }
    }
}

/// One pairing (recipe implementation on a system), every round pooled.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ContendRun {
    /// What ran: client, recipe, server.
    pub what: String,
    /// Cycles (acquire + release, or put + take) completed inside the windows.
    pub cycles: u64,
    pub window_secs: f64,
    pub cycles_per_sec: f64,
    pub rounds_cycles_per_sec: Vec<f64>,
    pub cycle: Latency,
    pub cycle_cdf_us: Vec<f64>,
    pub errors: BTreeMap<String, u64>,
    /// lock: a session got the lock while another held it (must be 0).
    pub overlaps: u64,
    /// queue: items put, taken, taken twice, taken but never put, left in
    /// the queue, and neither taken nor left (all rounds; the last three
    /// must be 0 and taken + remaining = put).
    pub items_put: u64,
    pub items_taken: u64,
    pub duplicates: u64,
    pub foreign: u64,
    pub remaining: u64,
    pub lost: u64,
    /// The client's version (kazoo, Python) when kazoo ran.
    pub client_version: Option<String>,
    pub failure: Option<String>,
}

/// One round of one pairing.
pub struct ContendRound {
    cycle: Histogram<u64>,
    window_secs: f64,
    errors: BTreeMap<String, u64>,
    overlaps: u64,
    items_put: u64,
    items_taken: u64,
    duplicates: u64,
    foreign: u64,
    remaining: u64,
    lost: u64,
    client_version: Option<String>,
    failure: Option<String>,
}

impl ContendRound {
    pub fn failed(why: String) -> ContendRound {
        let mut r = ContendRound::empty();
        r.failure = Some(why);
        r
    }

    fn empty() -> ContendRound {
        ContendRound {
            cycle: new_histogram(),
            window_secs: 0.0,
            errors: BTreeMap::new(),
            overlaps: 0,
            items_put: 0,
            items_taken: 0,
            duplicates: 0,
            foreign: 0,
            remaining: 0,
            lost: 0,
            client_version: None,
            failure: None,
        }
    }
}

/// Pools the rounds of one pairing.
pub fn summarize(what: &str, rounds: &[ContendRound]) -> ContendRun {
    let mut h = new_histogram();
    let mut run = ContendRun {
        what: what.to_string(),
        ..Default::default()
    };
    let mut failures = Vec::new();
    for r in rounds {
        h.add(&r.cycle).expect("same histogram bounds");
        run.window_secs += r.window_secs;
        run.rounds_cycles_per_sec.push(if r.window_secs > 0.0 {
            r.cycle.len() as f64 / r.window_secs
        } else {
            0.0
        });
        for (k, v) in &r.errors {
            *run.errors.entry(k.clone()).or_default() += v;
        }
        run.overlaps += r.overlaps;
        run.items_put += r.items_put;
        run.items_taken += r.items_taken;
        run.duplicates += r.duplicates;
        run.foreign += r.foreign;
        run.remaining += r.remaining;
        run.lost += r.lost;
        if run.client_version.is_none() {
            run.client_version = r.client_version.clone();
        }
        failures.extend(r.failure.clone());
    }
    run.cycles = h.len();
    run.cycles_per_sec = if run.window_secs > 0.0 {
        run.cycles as f64 / run.window_secs
    } else {
        0.0
    };
    run.cycle = Latency::of(&h);
    run.cycle_cdf_us = crate::svg::cdf_points(&h);
    run.failure = (!failures.is_empty()).then(|| failures.join("; "));
    run
}

/// wazoo's own recipe (`Lock` / `Queue` handles of wazoo-client), one round
/// on `path`, against `hosts`.
pub async fn wazoo_round(hosts: &str, spec: &ContendSpec, path: &str) -> ContendRound {
    match wazoo_round_inner(hosts, spec, path).await {
        Ok(r) => r,
        Err(e) => ContendRound::failed(format!("{e:#}")),
    }
}

struct SessionOut {
    cycle: Histogram<u64>,
    errors: BTreeMap<String, u64>,
    puts: Vec<Vec<u8>>,
    taken: Vec<Vec<u8>>,
}

/// One step of a contention cycle under `limit`: its value, or None after
/// counting "`what`: error" or "`what` timeout" in `errors`.
async fn timed<T, E: std::fmt::Display>(
    errors: &mut BTreeMap<String, u64>,
    what: &str,
    limit: Duration,
    step: impl std::future::Future<Output = Result<T, E>>,
) -> Option<T> {
    match tokio::time::timeout(limit, step).await {
        Ok(Ok(v)) => Some(v),
        Ok(Err(e)) => {
            *errors.entry(format!("{what}: {e}")).or_default() += 1;
            None
        }
        Err(_) => {
            *errors.entry(format!("{what} timeout")).or_default() += 1;
            None
        }
    }
}

async fn wazoo_round_inner(hosts: &str, spec: &ContendSpec, path: &str) -> Result<ContendRound> {
    let admin = connect_sessions(hosts, 1)
        .await?
        .pop()
        .expect("one session");
    match admin.create(path, b"", &persistent()).await {
        Ok(_) | Err(zk::Error::NodeExists) => {}
        Err(e) => bail!("create {path}: {e}"),
    }
    let mut clients = Vec::with_capacity(spec.sessions);
    let mut connecting = JoinSet::new();
    for _ in 0..spec.sessions {
        let hosts = hosts.to_string();
        connecting.spawn(async move { wazoo_connect(&hosts).await });
    }
    while let Some(c) = connecting.join_next().await {
        clients.push(c.context("connect task")??);
    }
    let start = Instant::now();
    let measure_start = start + Duration::from_secs_f64(spec.warmup_secs);
    let end = measure_start + Duration::from_secs_f64(spec.duration_secs);
    let cycle_timeout = Duration::from_secs_f64(spec.cycle_timeout_secs);
    let held = Arc::new(AtomicBool::new(false));
    let overlaps = Arc::new(AtomicU64::new(0));
    let mut set = JoinSet::new();
    for (i, client) in clients.iter().cloned().enumerate() {
        let (path, recipe) = (path.to_string(), spec.recipe);
        let (held, overlaps) = (held.clone(), overlaps.clone());
        set.spawn(async move {
            let mut out = SessionOut {
                cycle: new_histogram(),
                errors: BTreeMap::new(),
                puts: Vec::new(),
                taken: Vec::new(),
            };
            let lock = Lock::new(&client, &path).with_id(format!("wazoo-{i}").as_bytes());
            let queue = Queue::new(&client, &path);
            let mut n = 0u64;
            loop {
                let t0 = Instant::now();
                if t0 >= end {
                    break;
                }
                n += 1;
                let ok = match recipe {
                    Contended::Lock => {
                        let acquired =
                            timed(&mut out.errors, "acquire", cycle_timeout, lock.acquire()).await;
                        if acquired.is_some() {
                            if held.swap(true, Ordering::SeqCst) {
                                overlaps.fetch_add(1, Ordering::Relaxed);
                            }
                            // Cleared before the release is sent: the next
                            // holder can only be told after it applies.
                            held.store(false, Ordering::SeqCst);
                            timed(&mut out.errors, "release", cycle_timeout, lock.release())
                                .await
                                .is_some()
                        } else {
                            false
                        }
                    }
                    Contended::Queue => {
                        let item = format!("{i}-{n}").into_bytes();
                        let put =
                            timed(&mut out.errors, "put", cycle_timeout, queue.put(&item)).await;
                        if put.is_some() {
                            out.puts.push(item);
                            match timed(&mut out.errors, "take", cycle_timeout, queue.take()).await
                            {
                                Some(data) => {
                                    out.taken.push(data);
                                    true
                                }
                                None => false,
                            }
                        } else {
                            false
                        }
                    }
                };
                let t1 = Instant::now();
                if ok && t0 >= measure_start && t1 <= end {
                    record(&mut out.cycle, t1 - t0);
                }
            }
            out
        });
    }
    let mut round = ContendRound::empty();
    let mut puts: HashSet<Vec<u8>> = HashSet::new();
    let mut taken: Vec<Vec<u8>> = Vec::new();
    let drained = tokio::time::timeout(
        end.saturating_duration_since(Instant::now()) + cycle_timeout * 2 + Duration::from_secs(5),
        async {
            while let Some(r) = set.join_next().await {
                let out = r.context("a session's task panicked")?;
                round.cycle.add(&out.cycle).expect("same histogram bounds");
                for (k, v) in out.errors {
                    *round.errors.entry(k).or_default() += v;
                }
                puts.extend(out.puts);
                taken.extend(out.taken);
            }
            Ok::<(), anyhow::Error>(())
        },
    )
    .await;
    match drained {
        Ok(r) => r?,
        Err(_) => bail!(
            "sessions still busy {:?} after the window",
            cycle_timeout * 2
        ),
    }
    round.window_secs = spec.duration_secs;
    round.overlaps = overlaps.load(Ordering::Relaxed);
    round.client_version = Some("wazoo-client".into());
    for c in &clients {
        let _ = c.close().await;
    }
    if spec.recipe == Contended::Queue {
        admin.sync(path).await.context("sync before counting")?;
        let remaining = admin
            .list_children(path)
            .await
            .with_context(|| format!("list {path}"))?
            .iter()
            .filter(|n| n.starts_with("entry-"))
            .count() as u64;
        check_items(&mut round, &puts, &taken, remaining);
    }
    Ok(round)
}

fn check_items(
    round: &mut ContendRound,
    puts: &HashSet<Vec<u8>>,
    taken: &[Vec<u8>],
    remaining: u64,
) {
    let taken_set: HashSet<&Vec<u8>> = taken.iter().collect();
    round.items_put = puts.len() as u64;
    round.items_taken = taken.len() as u64;
    round.duplicates = (taken.len() - taken_set.len()) as u64;
    round.foreign = taken_set.iter().filter(|t| !puts.contains(**t)).count() as u64;
    let taken_known = taken_set.len() as u64 - round.foreign;
    round.remaining = remaining;
    round.lost = (puts.len() as u64).saturating_sub(taken_known + remaining);
}

/// kazoo's recipe (bench/kazoo_recipes.py in a subprocess) against `hosts`.
pub async fn kazoo_round(hosts: &str, spec: &ContendSpec, path: &str) -> ContendRound {
    let (hosts, spec, path) = (hosts.to_string(), spec.clone(), path.to_string());
    match tokio::task::spawn_blocking(move || kazoo_round_blocking(&hosts, &spec, &path)).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => ContendRound::failed(format!("{e:#}")),
        Err(e) => ContendRound::failed(format!("kazoo round panicked: {e}")),
    }
}

/// The kazoo driver script.
pub fn kazoo_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("kazoo_recipes.py")
}

#[derive(serde::Deserialize)]
struct KazooOut {
    window_secs: f64,
    latencies_ns: Vec<u64>,
    errors: BTreeMap<String, u64>,
    stuck_threads: u64,
    kazoo: String,
    python: String,
    #[serde(default)]
    overlaps: u64,
    #[serde(default)]
    items_put: u64,
    #[serde(default)]
    items_taken: u64,
    #[serde(default)]
    duplicates: u64,
    #[serde(default)]
    foreign: u64,
    #[serde(default)]
    remaining: u64,
    #[serde(default)]
    lost: u64,
}

fn kazoo_round_blocking(hosts: &str, spec: &ContendSpec, path: &str) -> Result<ContendRound> {
    let script = kazoo_script();
    let mut child = Command::new(&spec.python)
        .arg(&script)
        .args([
            "--hosts",
            hosts,
            "--recipe",
            spec.recipe.name(),
            "--path",
            path,
        ])
        .args(["--sessions", &spec.sessions.to_string()])
        .args(["--warmup", &spec.warmup_secs.to_string()])
        .args(["--duration", &spec.duration_secs.to_string()])
        .args(["--cycle-timeout", &spec.cycle_timeout_secs.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {} {}", spec.python, script.display()))?;
    // Read both pipes on threads (a full pipe would stall the script).
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let out_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let err_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + Duration::from_secs_f64(spec.round_bound_secs());
    let status = loop {
        if let Some(st) = child.try_wait()? {
            break Some(st);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = out_t.join().unwrap_or_default();
    let err = err_t.join().unwrap_or_default();
    let tail = |s: &str| {
        let lines: Vec<&str> = s.lines().collect();
        lines[lines.len().saturating_sub(8)..].join("\n")
    };
    match status {
        None => bail!(
            "kazoo_recipes.py took longer than {:.0} s; killed. stderr:\n{}",
            spec.round_bound_secs(),
            tail(&err)
        ),
        Some(st) if !st.success() => {
            bail!("kazoo_recipes.py failed ({st}); stderr:\n{}", tail(&err))
        }
        Some(_) => {}
    }
    let k: KazooOut = serde_json::from_str(out.trim()).with_context(|| {
        format!(
            "kazoo_recipes.py printed no JSON: {:?}; stderr:\n{}",
            out.chars().take(200).collect::<String>(),
            tail(&err)
        )
    })?;
    let mut round = ContendRound::empty();
    for ns in &k.latencies_ns {
        record(&mut round.cycle, Duration::from_nanos(*ns));
    }
    round.window_secs = k.window_secs;
    round.errors = k.errors;
    if k.stuck_threads > 0 {
        round
            .errors
            .insert("threads stuck at the end".into(), k.stuck_threads);
    }
    round.overlaps = k.overlaps;
    round.items_put = k.items_put;
    round.items_taken = k.items_taken;
    round.duplicates = k.duplicates;
    round.foreign = k.foreign;
    round.remaining = k.remaining;
    round.lost = k.lost;
    round.client_version = Some(format!("kazoo {} (Python {})", k.kazoo, k.python));
    Ok(round)
}

/// What each run key means, for the report.
pub fn pairing(key: &str, recipe: Contended) -> String {
    let (kazoo_name, wazoo_name) = match recipe {
        Contended::Lock => ("Lock", "lock"),
        Contended::Queue => ("Queue", "queue"),
    };
    match key {
        ZK_KAZOO => format!("kazoo `{kazoo_name}` on ZooKeeper"),
        WAZOO => format!("wazoo `{wazoo_name}` recipe on wazoo"),
        WAZOO_KAZOO => format!("kazoo `{kazoo_name}` on wazoo"),
        other => other.to_string(),
    }
}

/// The Python to run the kazoo script with: `--python`, else `$PYTHON`,
/// else `python3`.
pub fn python(explicit: Option<String>) -> String {
    explicit
        .or_else(|| std::env::var("PYTHON").ok().filter(|s| !s.is_empty()))
        .unwrap_or_else(|| "python3".to_string())
}

/// Whether `python` imports kazoo (a short check before the rounds).
pub fn has_kazoo(python: &str) -> Result<String> {
    let out = Command::new(python)
        .args(["-c", "import kazoo, sys; print(kazoo.__version__)"])
        .output()
        .with_context(|| format!("running {python}"))?;
    if !out.status.success() {
        bail!(
            "{python} cannot import kazoo: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn item_accounting() {
        let puts: HashSet<Vec<u8>> = [b"a".to_vec(), b"b".to_vec(), b"c".to_vec(), b"d".to_vec()]
            .into_iter()
            .collect();
        let taken = vec![b"a".to_vec(), b"b".to_vec(), b"b".to_vec(), b"z".to_vec()];
        let mut r = ContendRound::empty();
        check_items(&mut r, &puts, &taken, 1);
        assert_eq!(
            (
                r.items_put,
                r.items_taken,
                r.duplicates,
                r.foreign,
                r.remaining,
                r.lost
            ),
            (4, 4, 1, 1, 1, 1)
        );
        let mut ok = ContendRound::empty();
        check_items(
            &mut ok,
            &puts,
            &[b"a".to_vec(), b"b".to_vec(), b"c".to_vec()],
            1,
        );
        assert_eq!((ok.duplicates, ok.foreign, ok.lost), (0, 0, 0));
    }

    #[test]
    fn pools_rounds() {
        let mut a = ContendRound::empty();
        record(&mut a.cycle, Duration::from_micros(100));
        record(&mut a.cycle, Duration::from_micros(200));
        a.window_secs = 1.0;
        let mut b = ContendRound::empty();
        record(&mut b.cycle, Duration::from_micros(300));
        b.window_secs = 1.0;
        b.overlaps = 2;
        let run = summarize("x", &[a, b]);
        assert_eq!(run.cycles, 3);
        assert!((run.cycles_per_sec - 1.5).abs() < 1e-9);
        assert_eq!(run.rounds_cycles_per_sec, vec![2.0, 1.0]);
        assert_eq!(run.overlaps, 2);
        assert_eq!(run.cycle_cdf_us.len(), crate::svg::CDF_QUANTILES.len());
    }
}
