//! `wazoo-bench lean`: both systems driven by the bench's own lean load
//! generator (`lean/gen.rs`: one thread, raw pre-encoded frames,
//! TCP_NODELAY, pipelined), which costs a few µs of CPU per request, so
//! that the servers, not the client library, are what is measured.
//!
//! Per workload (getData, setData, create, and on wazoo the native recipe
//! calls `echo.noop` and `counter.incr` and the same calls made as node
//! calls) and system: a
//! warm-up in 1 s chunks until the rate settles, a closed-loop window
//! (sessions x in flight), then fixed-rate windows at fractions of
//! ZooKeeper's closed-loop rate (p50/p99/p99.9 from each request's
//! scheduled send time). Every window reads the servers' CPU
//! (/proc/<pid>/stat) and the generator thread's own (getrusage).
//! `--pinned` starts the servers on CPU 1 and runs the generator on CPU 0.

pub(crate) mod gen;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Parser;
use serde::Serialize;
use wazoo_proto::{Acl, CreateRequest, Request};
use wazoo_testkit::Flavor;

use crate::results::serialize_flavors;
use crate::servers::{Server, ServerConfig};
use crate::stats::Latency;
use gen::{drive, encode, send_all, Frames, Pace, Session, Tally};

/// The lean generator's workloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LeanWorkload {
    /// getData of `--keys` znodes of `--payload` bytes.
    Get,
    /// setData (version -1) of the same znodes.
    Set,
    /// Persistent sequential creates under a fresh parent (deleted after).
    Create,
    /// wazoo only: the native recipe call (opcode 0x5A00) of `echo.noop`.
    Call,
    /// wazoo only: the same call as a node call, an ephemeral sequential
    /// create of /zookeeper/calls/echo/noop (gone when the sessions close).
    /// Its reply is the create's (the call node's path); a client that
    /// reads the result adds a getData.
    NodeCall,
    /// wazoo only: the same call as a read call, a getData of
    /// /zookeeper/calls/echo/noop/null (the result is the reply's data;
    /// nothing is logged).
    ReadCall,
    /// wazoo only: a native call of a method that writes, `counter.incr`
    /// by 1 of one of `--keys` counters (/counters/c-NNNNN, a read and a
    /// setData; the first call of each creates it). Both ways log a txn.
    CallWrite,
    /// wazoo only: the same call as a node call (JSON arguments), an
    /// ephemeral sequential create of /zookeeper/calls/counter/incr.
    NodeCallWrite,
}

impl LeanWorkload {
    pub fn name(self) -> &'static str {
        match self {
            LeanWorkload::Get => "get",
            LeanWorkload::Set => "set",
            LeanWorkload::Create => "create",
            LeanWorkload::Call => "call",
            LeanWorkload::NodeCall => "node-call",
            LeanWorkload::ReadCall => "read-call",
            LeanWorkload::CallWrite => "call-write",
            LeanWorkload::NodeCallWrite => "node-call-write",
        }
    }

    fn wazoo_only(self) -> bool {
        self.module().is_some()
    }

    /// The recipe module a call workload calls.
    fn module(self) -> Option<&'static str> {
        match self {
            LeanWorkload::Call | LeanWorkload::NodeCall | LeanWorkload::ReadCall => Some("echo"),
            LeanWorkload::CallWrite | LeanWorkload::NodeCallWrite => Some("counter"),
            _ => None,
        }
    }
}

/// `wazoo-bench lean [OPTIONS]`.
#[derive(Parser, Debug, Clone, Serialize)]
#[command(name = "wazoo-bench lean")]
pub struct LeanArgs {
    /// Short windows: 1 s measured, at most 3 s of warm-up, one fixed rate (50%).
    #[arg(long)]
    pub quick: bool,
    /// Systems to measure: zookeeper, wazoo.
    #[arg(long, value_delimiter = ',', default_value = "zookeeper,wazoo")]
    #[serde(serialize_with = "serialize_flavors")]
    pub systems: Vec<Flavor>,
    /// Workloads, in this order (the call workloads run on wazoo only).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "get,set,create,call,node-call,read-call,call-write,node-call-write"
    )]
    pub workloads: Vec<LeanWorkload>,
    /// Sessions (one connection each).
    #[arg(long, default_value_t = 16)]
    pub sessions: usize,
    /// Requests in flight per session (closed loop).
    #[arg(long, default_value_t = 8)]
    pub inflight: usize,
    /// Data bytes per znode (get, set, create).
    #[arg(long, default_value_t = 100)]
    pub payload: usize,
    /// Znodes read and written by get and set; counters of call-write.
    #[arg(long, default_value_t = 1000)]
    pub keys: usize,
    /// Measured seconds per window [default: 5, --quick: 1].
    #[arg(long)]
    pub duration_secs: Option<f64>,
    /// Most warm-up seconds per workload and system: 1 s chunks (--quick:
    /// 0.5 s) until two in a row are within 5% of each other
    /// [default: 30, --quick: 3].
    #[arg(long)]
    pub warmup_secs: Option<f64>,
    /// Fixed-rate windows at these percents of ZooKeeper's closed-loop rate
    /// (of wazoo's when ZooKeeper does not run the workload); `--rates 0`:
    /// none [default: 25,50,75, --quick: 50].
    #[arg(long, value_delimiter = ',')]
    pub rates: Option<Vec<f64>>,
    /// Servers started on CPU 1 (their affinity from exec on, as under
    /// `taskset -c 1`), the generator on CPU 0. Needs 2 CPUs.
    #[arg(long)]
    pub pinned: bool,
    /// A zoo.cfg line for wazoo (repeatable), e.g.
    /// `--wazoo-cfg wazoo.client.ioThreads=1`.
    #[arg(long)]
    pub wazoo_cfg: Vec<String>,
    /// The wazoo server binary [default: $WAZOO_BIN, else target/release/wazoo].
    #[arg(long)]
    pub wazoo_bin: Option<PathBuf>,
    /// Directory of the compiled recipe modules (echo.wasm and
    /// counter.wasm, for the call workloads), as the main bench's
    /// --recipes-dir.
    #[arg(long)]
    pub recipes_dir: Option<PathBuf>,
    /// ZooKeeper's JVM heap (-Xmx).
    #[arg(long, default_value = "2g")]
    pub zk_heap: String,
    /// Where to write the figures as JSON (none by default).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// One closed-loop or fixed-rate window of one system and workload.
#[derive(Clone, Debug, Serialize)]
pub struct LeanRun {
    pub system: String,
    pub workload: LeanWorkload,
    /// None: closed loop; else the percent of the base rate asked for.
    pub percent: Option<f64>,
    /// Fixed rate: requests a second scheduled.
    pub target_per_sec: Option<f64>,
    pub ops: u64,
    pub ops_per_sec: f64,
    pub latency: Latency,
    pub server_cpu_us_per_op: f64,
    /// wazoo: of that, its member thread's (the core loop); what the
    /// member's one thread can serve at most is 1 / this.
    pub member_thread_cpu_us_per_op: Option<f64>,
    pub gen_cpu_us_per_op: f64,
    /// CPU the rest of the machine burned per second of the window (other
    /// processes, softirq), in cores: tells a quiet run from a noisy one.
    pub other_cpu_cores: f64,
    /// Error replies by code, warm-up included.
    pub errors: BTreeMap<i32, u64>,
    /// Closed loop: the warm-up chunks' rates, last one settled.
    pub warmup_rates: Vec<f64>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct LeanRatios {
    /// wazoo: node call / native call, server CPU per request (target <= 1.5).
    pub node_call_over_call_server_cpu: Option<f64>,
    /// wazoo: read call (getData) / native call of the same no-op.
    pub read_call_over_call_server_cpu: Option<f64>,
    /// wazoo: native call / getData, server CPU per request (target <= 1.2).
    pub call_over_get_server_cpu: Option<f64>,
    /// wazoo: the same as the first for `counter.incr`, a method that
    /// writes (both ways a logged txn).
    pub node_call_write_over_call_write_server_cpu: Option<f64>,
    /// The same as closed-loop rates (native over node call; getData over call).
    pub call_over_node_call_rate: Option<f64>,
    pub get_over_call_rate: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct LeanResults {
    pub args: LeanArgs,
    pub loadavg_before: String,
    pub loadavg_after: String,
    /// Cpus_allowed_list of each server process and of the generator thread.
    pub affinity: BTreeMap<String, String>,
    pub closed: Vec<LeanRun>,
    pub fixed_rate: Vec<LeanRun>,
    pub ratios: LeanRatios,
    /// Errors of the create workload's clean-up (deletes), by code.
    pub cleanup_errors: BTreeMap<i32, u64>,
}

/// Entry point: `argv` starts with "lean".
pub fn main(argv: impl Iterator<Item = OsString>) -> ExitCode {
    let args = LeanArgs::parse_from(argv);
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Sets the calling thread's CPU affinity to `cpu` alone.
fn pin_this_thread(cpu: usize) -> Result<()> {
    // SAFETY: cpu_set_t is plain data; CPU_SET writes inside it;
    // sched_setaffinity(0, ...) applies to the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("sched_setaffinity to CPU {cpu}"));
        }
    }
    Ok(())
}

fn allowed_cpus(path: &str) -> String {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .map(|v| v.trim().to_string())
        })
        .unwrap_or_else(|| "?".into())
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

const KEYS_PARENT: &str = "/lean";

fn key_path(i: usize) -> String {
    format!("{KEYS_PARENT}/k-{i:05}")
}

fn create_request(path: String, data: Vec<u8>, flags: i32) -> Request {
    Request::Create(CreateRequest {
        path,
        data: Some(data),
        acl: Acl::open_unsafe(),
        flags,
        ttl: None,
    })
}

/// CreateMode flags on the wire.
const PERSISTENT: i32 = 0;
const PERSISTENT_SEQUENTIAL: i32 = 2;
const EPHEMERAL_SEQUENTIAL: i32 = 3;

/// One system under test.
struct System {
    flavor: Flavor,
    server: Server,
    /// Sequential-create parents made so far (for fresh names).
    create_parents: usize,
}

impl System {
    fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    fn pids(&self) -> Result<Vec<u32>> {
        Ok(vec![self.server.pid()?])
    }

    fn open(&self, n: usize) -> Result<Vec<Session>> {
        (0..n).map(|_| Session::open(self.addr())).collect()
    }
}

fn close_all(sessions: Vec<Session>) -> Result<()> {
    for s in sessions {
        s.close()?;
    }
    Ok(())
}

/// The workload's frames on `sys` (making its parent for create).
fn frames_for(sys: &mut System, w: LeanWorkload, args: &LeanArgs) -> Result<(Frames, String)> {
    let payload = vec![b'x'; args.payload];
    Ok(match w {
        LeanWorkload::Get => (
            Frames::new(
                &(0..args.keys)
                    .map(|i| Request::GetData {
                        path: key_path(i),
                        watch: false,
                    })
                    .collect::<Vec<_>>(),
            ),
            String::new(),
        ),
        LeanWorkload::Set => (
            Frames::new(
                &(0..args.keys)
                    .map(|i| Request::SetData {
                        path: key_path(i),
                        data: Some(payload.clone()),
                        version: -1,
                    })
                    .collect::<Vec<_>>(),
            ),
            String::new(),
        ),
        LeanWorkload::Create => {
            sys.create_parents += 1;
            let parent = format!("/lean-create-{}", sys.create_parents);
            let mut s = Session::open(sys.addr())?;
            let errors = send_all(
                &mut s,
                &[encode(&create_request(
                    parent.clone(),
                    Vec::new(),
                    PERSISTENT,
                ))],
                1,
            )?;
            s.close()?;
            anyhow::ensure!(errors.is_empty(), "create {parent}: errors {errors:?}");
            (
                Frames::new(&[create_request(
                    format!("{parent}/n-"),
                    payload,
                    PERSISTENT_SEQUENTIAL,
                )]),
                parent,
            )
        }
        LeanWorkload::Call => (
            Frames::new(&[Request::RecipeCall {
                module: "echo".into(),
                method: "noop".into(),
                // MessagePack nil: echo.noop takes no arguments.
                args: vec![0xc0],
                guid: String::new(),
            }]),
            String::new(),
        ),
        LeanWorkload::NodeCall => (
            // Empty data is nil, as the native call's arguments.
            Frames::new(&[create_request(
                "/zookeeper/calls/echo/noop".into(),
                Vec::new(),
                EPHEMERAL_SEQUENTIAL,
            )]),
            String::new(),
        ),
        LeanWorkload::ReadCall => (
            Frames::new(&[Request::GetData {
                path: "/zookeeper/calls/echo/noop/null".into(),
                watch: false,
            }]),
            String::new(),
        ),
        LeanWorkload::CallWrite => (
            Frames::new(
                &(0..args.keys)
                    .map(|i| Request::RecipeCall {
                        module: "counter".into(),
                        method: "incr".into(),
                        args: incr_msgpack(&counter_name(i)),
                        guid: String::new(),
                    })
                    .collect::<Vec<_>>(),
            ),
            String::new(),
        ),
        LeanWorkload::NodeCallWrite => (
            Frames::new(
                &(0..args.keys)
                    .map(|i| {
                        create_request(
                            "/zookeeper/calls/counter/incr".into(),
                            format!(r#"{{"name":"{}","by":1}}"#, counter_name(i)).into_bytes(),
                            EPHEMERAL_SEQUENTIAL,
                        )
                    })
                    .collect::<Vec<_>>(),
            ),
            String::new(),
        ),
    })
}

fn counter_name(i: usize) -> String {
    format!("c-{i:05}")
}

/// `counter.incr`'s arguments `{"name": NAME, "by": 1}` as MessagePack (a
/// map of two, short strings: NAME is under 32 bytes).
fn incr_msgpack(name: &str) -> Vec<u8> {
    let mut b = vec![0x82, 0xa4];
    b.extend_from_slice(b"name");
    b.push(0xa0 | name.len() as u8);
    b.extend_from_slice(name.as_bytes());
    b.push(0xa2);
    b.extend_from_slice(b"by");
    b.push(0x01);
    b
}

/// Creates the get/set znodes.
fn make_keys(sys: &System, args: &LeanArgs) -> Result<()> {
    let mut frames = vec![encode(&create_request(
        KEYS_PARENT.into(),
        Vec::new(),
        PERSISTENT,
    ))];
    frames.extend(
        (0..args.keys).map(|i| encode(&create_request(key_path(i), vec![b'x'; args.payload], 0))),
    );
    let mut s = Session::open(sys.addr())?;
    let errors = send_all(&mut s, &frames, 64)?;
    s.close()?;
    anyhow::ensure!(errors.is_empty(), "creating the keys: errors {errors:?}");
    Ok(())
}

/// Deletes `parent`'s `count` sequential children (n-0000000000 ...: a
/// fresh parent numbers them from 0) and `parent`.
fn delete_created(sys: &System, parent: &str, count: u64) -> Result<BTreeMap<i32, u64>> {
    let mut frames: Vec<Vec<u8>> = (0..count)
        .map(|i| {
            encode(&Request::Delete {
                path: format!("{parent}/n-{i:010}"),
                version: -1,
            })
        })
        .collect();
    frames.push(encode(&Request::Delete {
        path: parent.to_string(),
        version: -1,
    }));
    let mut s = Session::open(sys.addr())?;
    let errors = send_all(&mut s, &frames, 64)?;
    s.close()?;
    Ok(errors)
}

fn to_run(
    sys: &System,
    w: LeanWorkload,
    t: &Tally,
    percent: Option<f64>,
    target: Option<f64>,
) -> LeanRun {
    let ops = t.ops.max(1) as f64;
    LeanRun {
        system: sys.flavor.name().to_string(),
        workload: w,
        percent,
        target_per_sec: target,
        ops: t.ops,
        ops_per_sec: t.ops as f64 / t.secs,
        latency: Latency::of(&t.latency),
        server_cpu_us_per_op: t.server_cpu_secs * 1e6 / ops,
        member_thread_cpu_us_per_op: (sys.flavor == Flavor::Wazoo)
            .then(|| t.member_thread_cpu_secs * 1e6 / ops),
        gen_cpu_us_per_op: t.gen_cpu_secs * 1e6 / ops,
        other_cpu_cores: (t.machine_cpu_secs - t.server_cpu_secs - t.gen_cpu_secs).max(0.0)
            / t.secs,
        errors: t.errors.clone(),
        warmup_rates: Vec::new(),
    }
}

fn add_errors(into: &mut BTreeMap<i32, u64>, from: &BTreeMap<i32, u64>) {
    for (k, v) in from {
        *into.entry(*k).or_default() += v;
    }
}

fn run(args: LeanArgs) -> Result<()> {
    anyhow::ensure!(
        args.sessions > 0 && args.inflight > 0 && args.keys > 0,
        "--sessions, --inflight and --keys must be positive"
    );
    let measure =
        Duration::from_secs_f64(
            args.duration_secs
                .unwrap_or(if args.quick { 1.0 } else { 5.0 }),
        );
    let max_warmup =
        Duration::from_secs_f64(
            args.warmup_secs
                .unwrap_or(if args.quick { 3.0 } else { 30.0 }),
        );
    let chunk = Duration::from_secs_f64(if args.quick { 0.5 } else { 1.0 });
    let mut percents = args.rates.clone().unwrap_or_else(|| {
        if args.quick {
            vec![50.0]
        } else {
            vec![25.0, 50.0, 75.0]
        }
    });
    percents.retain(|&p| p > 0.0);
    let loadavg_before = loadavg();
    let mut flavors: Vec<Flavor> = Vec::new();
    for f in &args.systems {
        if !flavors.contains(f) {
            flavors.push(*f);
        }
    }
    anyhow::ensure!(!flavors.is_empty(), "--systems is empty");
    let mut modules: Vec<&str> = args.workloads.iter().filter_map(|w| w.module()).collect();
    modules.sort_unstable();
    modules.dedup();
    let cfg = ServerConfig {
        wazoo_bin: if flavors.contains(&Flavor::Wazoo) {
            crate::servers::find_wazoo_bin(args.wazoo_bin.clone())?
        } else {
            PathBuf::from("(not used)")
        },
        zk_heap: args.zk_heap.clone(),
        wazoo_cfg: args.wazoo_cfg.clone(),
        extra_cfg: Vec::new(),
        zk_jvm_args: Vec::new(),
        startup_timeout_secs: 90.0,
    };
    let plugins = if !modules.is_empty() && flavors.contains(&Flavor::Wazoo) {
        let dir = crate::recipes::find_modules(args.recipes_dir.clone())?;
        Some(crate::recipes::PluginsDir::new(&dir, &modules, "lean")?)
    } else {
        None
    };
    if args.pinned {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        anyhow::ensure!(
            cpus >= 2,
            "--pinned needs 2 CPUs, this process may use {cpus}"
        );
        // Every server is forked by testkit's spawner thread, which is made
        // by the first start and inherits this thread's affinity: CPU 1
        // from the first instruction of each server process on.
        pin_this_thread(1)?;
    }
    let mut systems = Vec::new();
    for &f in &flavors {
        eprintln!("lean: starting {f} ...");
        let server = Server::start_with_plugins(f, &cfg, plugins.as_ref().map(|p| p.path()))?;
        systems.push(System {
            flavor: f,
            server,
            create_parents: 0,
        });
    }
    if args.pinned {
        pin_this_thread(0)?;
    }
    let mut affinity = BTreeMap::new();
    for s in &systems {
        affinity.insert(
            s.flavor.name().to_string(),
            allowed_cpus(&format!("/proc/{}/status", s.server.pid()?)),
        );
    }
    affinity.insert(
        "generator".to_string(),
        allowed_cpus("/proc/thread-self/status"),
    );
    if args
        .workloads
        .iter()
        .any(|w| matches!(w, LeanWorkload::Get | LeanWorkload::Set))
    {
        for s in &systems {
            make_keys(s, &args)?;
        }
    }

    let mut closed: Vec<LeanRun> = Vec::new();
    let mut fixed: Vec<LeanRun> = Vec::new();
    let mut cleanup_errors = BTreeMap::new();
    for (wi, &w) in args.workloads.iter().enumerate() {
        // Alternate the systems' order from workload to workload.
        let mut order: Vec<usize> = (0..systems.len()).collect();
        if wi % 2 == 1 {
            order.reverse();
        }
        order.retain(|&i| !(w.wazoo_only() && systems[i].flavor != Flavor::Wazoo));
        let mut made: Vec<(usize, Frames, String, u64)> = Vec::new();
        for &i in &order {
            let sys = &mut systems[i];
            let (frames, parent) = frames_for(sys, w, &args)?;
            let pids = sys.pids()?;
            eprintln!(
                "lean: {} on {} (closed loop, {} x {}) ...",
                w.name(),
                sys.flavor,
                args.sessions,
                args.inflight
            );
            let mut sessions = sys.open(args.sessions)?;
            let pace = Pace::Closed {
                inflight: args.inflight,
            };
            let mut replies = 0u64;
            let mut warm_errors = BTreeMap::new();
            let mut rates: Vec<f64> = Vec::new();
            let started = Instant::now();
            loop {
                let t = drive(&mut sessions, &frames, pace, Duration::ZERO, chunk, &pids)?;
                replies += t.ok_total + t.errors.values().sum::<u64>();
                add_errors(&mut warm_errors, &t.errors);
                rates.push(t.ops as f64 / t.secs);
                // Two chunks with no reply (a recipe module still
                // compiling) are not a settled rate.
                let settled = rates.len() >= 2 && {
                    let (a, b) = (rates[rates.len() - 2], rates[rates.len() - 1]);
                    b > 0.0 && (a - b).abs() <= 0.05 * a.max(b)
                };
                if settled || started.elapsed() >= max_warmup {
                    break;
                }
            }
            let t = drive(&mut sessions, &frames, pace, Duration::ZERO, measure, &pids)?;
            replies += t.ok_total + t.errors.values().sum::<u64>();
            let mut run = to_run(sys, w, &t, None, None);
            add_errors(&mut run.errors, &warm_errors);
            run.warmup_rates = rates;
            let member = run
                .member_thread_cpu_us_per_op
                .map(|m| format!(" (member thread {m:.1})"))
                .unwrap_or_default();
            eprintln!(
                "lean:   {:.0}/s, server {:.1}{member} µs/req, generator {:.2} µs/req",
                run.ops_per_sec, run.server_cpu_us_per_op, run.gen_cpu_us_per_op
            );
            closed.push(run);
            close_all(sessions)?;
            made.push((i, frames, parent, replies));
        }
        // Fixed rates: fractions of ZooKeeper's closed-loop rate (of the
        // first system's when ZooKeeper does not run this workload).
        let base = closed
            .iter()
            .filter(|r| r.workload == w)
            .find(|r| r.system == Flavor::Zookeeper.name())
            .or_else(|| closed.iter().find(|r| r.workload == w))
            .map(|r| r.ops_per_sec)
            .unwrap_or(0.0);
        for &pct in &percents {
            if base <= 0.0 {
                break;
            }
            let per_sec = base * pct / 100.0;
            for (i, frames, _, replies) in made.iter_mut() {
                let sys = &systems[*i];
                eprintln!(
                    "lean: {} on {} at {per_sec:.0}/s ({pct}%) ...",
                    w.name(),
                    sys.flavor
                );
                let mut sessions = sys.open(args.sessions)?;
                let t = drive(
                    &mut sessions,
                    frames,
                    Pace::Rate {
                        per_sec,
                        max_inflight: 1024,
                    },
                    chunk,
                    measure,
                    &sys.pids()?,
                )?;
                *replies += t.ok_total + t.errors.values().sum::<u64>();
                fixed.push(to_run(sys, w, &t, Some(pct), Some(per_sec)));
                close_all(sessions)?;
            }
        }
        if w == LeanWorkload::Create {
            for (i, _, parent, replies) in &made {
                add_errors(
                    &mut cleanup_errors,
                    &delete_created(&systems[*i], parent, *replies)?,
                );
            }
        }
    }

    let ratios = ratios(&closed);
    let results = LeanResults {
        args: args.clone(),
        loadavg_before,
        loadavg_after: loadavg(),
        affinity,
        closed,
        fixed_rate: fixed,
        ratios,
        cleanup_errors,
    };
    if let Some(out) = &args.out {
        std::fs::write(out, serde_json::to_string_pretty(&results)?)
            .with_context(|| format!("writing {}", out.display()))?;
    }
    print!("{}", report(&results));
    let bad: u64 = results
        .closed
        .iter()
        .chain(&results.fixed_rate)
        .flat_map(|r| r.errors.values())
        .sum();
    if bad > 0 {
        bail!("{bad} error replies (see the errors column)");
    }
    Ok(())
}

fn find(runs: &[LeanRun], system: Flavor, w: LeanWorkload) -> Option<&LeanRun> {
    runs.iter()
        .find(|r| r.system == system.name() && r.workload == w && r.ops > 0)
}

fn ratios(closed: &[LeanRun]) -> LeanRatios {
    let wz = |w| find(closed, Flavor::Wazoo, w);
    let (get, call, node) = (
        wz(LeanWorkload::Get),
        wz(LeanWorkload::Call),
        wz(LeanWorkload::NodeCall),
    );
    let div = |a: f64, b: f64| (b > 0.0).then(|| a / b);
    LeanRatios {
        node_call_write_over_call_write_server_cpu: wz(LeanWorkload::NodeCallWrite)
            .zip(wz(LeanWorkload::CallWrite))
            .and_then(|(n, c)| div(n.server_cpu_us_per_op, c.server_cpu_us_per_op)),
        read_call_over_call_server_cpu: wz(LeanWorkload::ReadCall)
            .zip(call)
            .and_then(|(n, c)| div(n.server_cpu_us_per_op, c.server_cpu_us_per_op)),
        node_call_over_call_server_cpu: node
            .zip(call)
            .and_then(|(n, c)| div(n.server_cpu_us_per_op, c.server_cpu_us_per_op)),
        call_over_get_server_cpu: call
            .zip(get)
            .and_then(|(c, g)| div(c.server_cpu_us_per_op, g.server_cpu_us_per_op)),
        call_over_node_call_rate: call
            .zip(node)
            .and_then(|(c, n)| div(c.ops_per_sec, n.ops_per_sec)),
        get_over_call_rate: get
            .zip(call)
            .and_then(|(g, c)| div(g.ops_per_sec, c.ops_per_sec)),
    }
}

fn cell(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.digits$}"))
}

/// The Markdown report.
fn report(r: &LeanResults) -> String {
    let mut md = String::new();
    let a = &r.args;
    let _ = writeln!(
        md,
        "## lean generator: {} sessions x {} in flight, {} B payloads{}\n\n\
         load average before {} / after {}; CPUs allowed: {}\n",
        a.sessions,
        a.inflight,
        a.payload,
        if a.pinned {
            ", pinned (servers CPU 1, generator CPU 0)"
        } else {
            ""
        },
        r.loadavg_before,
        r.loadavg_after,
        r.affinity
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(
        md,
        "| workload | zookeeper ops/s | wazoo ops/s | **wazoo/zookeeper** | zookeeper server µs/req | \
         wazoo server µs/req | of which wazoo's member thread | generator µs/req (zk / wazoo) | \
         other CPU (cores, zk / wazoo) | errors |"
    );
    let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    for &w in &a.workloads {
        let zk = find(&r.closed, Flavor::Zookeeper, w);
        let wz = find(&r.closed, Flavor::Wazoo, w);
        if zk.is_none() && wz.is_none() {
            continue;
        }
        let errors: Vec<String> = r
            .closed
            .iter()
            .filter(|x| x.workload == w && !x.errors.is_empty())
            .map(|x| format!("{}: {:?}", x.system, x.errors))
            .collect();
        let _ = writeln!(
            md,
            "| {} | {} | {} | **{}** | {} | {} | {} | {} / {} | {} / {} | {} |",
            w.name(),
            cell(zk.map(|x| x.ops_per_sec), 0),
            cell(wz.map(|x| x.ops_per_sec), 0),
            cell(
                zk.zip(wz)
                    .map(|(z, x)| x.ops_per_sec / z.ops_per_sec.max(1e-9)),
                2
            ),
            cell(zk.map(|x| x.server_cpu_us_per_op), 1),
            cell(wz.map(|x| x.server_cpu_us_per_op), 1),
            cell(wz.and_then(|x| x.member_thread_cpu_us_per_op), 1),
            cell(zk.map(|x| x.gen_cpu_us_per_op), 2),
            cell(wz.map(|x| x.gen_cpu_us_per_op), 2),
            cell(zk.map(|x| x.other_cpu_cores), 2),
            cell(wz.map(|x| x.other_cpu_cores), 2),
            if errors.is_empty() {
                "0".to_string()
            } else {
                errors.join("; ")
            }
        );
    }
    let q = &r.ratios;
    let _ = writeln!(
        md,
        "\nwazoo, server CPU per request: node call / native call **{}** for `echo.noop` \
         (read call: **{}**), **{}** for `counter.incr` (target <= 1.5); \
         native call / getData **{}** (target <= 1.2). Closed-loop rates: native call / node \
         call {}, getData / native call {}.\n",
        cell(q.node_call_over_call_server_cpu, 2),
        cell(q.read_call_over_call_server_cpu, 2),
        cell(q.node_call_write_over_call_write_server_cpu, 2),
        cell(q.call_over_get_server_cpu, 2),
        cell(q.call_over_node_call_rate, 2),
        cell(q.get_over_call_rate, 2),
    );
    if !r.fixed_rate.is_empty() {
        let _ = writeln!(
            md,
            "Fixed rate (latency from each request's scheduled send, µs):\n\n\
             | workload | % of base | rate/s | system | achieved/s | p50 | p99 | p99.9 | server µs/req |\n\
             |---|---:|---:|---|---:|---:|---:|---:|---:|"
        );
        for x in &r.fixed_rate {
            let _ = writeln!(
                md,
                "| {} | {} | {:.0} | {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.1} |",
                x.workload.name(),
                x.percent.unwrap_or(0.0),
                x.target_per_sec.unwrap_or(0.0),
                x.system,
                x.ops_per_sec,
                x.latency.p50_us,
                x.latency.p99_us,
                x.latency.p999_us,
                x.server_cpu_us_per_op
            );
        }
        let _ = writeln!(md);
    }
    md
}
