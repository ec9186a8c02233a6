//! The idle-session figure (`wazoo-bench idle`): a fresh server, N
//! sessions opened with raw handshakes (no client library in this
//! process's way) and left idle, then the server process's resident memory
//! per session, ZooKeeper and wazoo alternating, with the ratio.
//!
//! Sockets are opened in this process, one thread, blocking: a handshake
//! is a ConnectRequest frame and its ConnectResponse. The sessions' timeout
//! is the server's maximum, so none expires while they are held; they are
//! held `settle_secs` before the figure is read, and closed with the
//! process's sockets.

use std::ffi::OsString;
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

use anyhow::{Context, Result};
use serde::Serialize;
use wazoo_testkit::Flavor;

use crate::servers::{proc_status_bytes, Server, ServerConfig};

#[derive(Clone, Debug, Serialize)]
pub struct IdleSpec {
    /// Sessions opened before the baseline (warming the server's accept
    /// path and allocator), not counted.
    pub warm_sessions: usize,
    /// Sessions the figure is about.
    pub sessions: usize,
    pub settle_secs: f64,
}

impl Default for IdleSpec {
    fn default() -> Self {
        IdleSpec {
            warm_sessions: 50,
            sessions: 2000,
            settle_secs: 3.0,
        }
    }
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct IdleRun {
    /// VmRSS with the warm-up sessions open.
    pub rss_before_bytes: u64,
    /// VmRSS with every session open, after `settle_secs`.
    pub rss_after_bytes: u64,
    pub sessions: usize,
    /// (after - before) / sessions.
    pub bytes_per_session: f64,
    pub failure: Option<String>,
}

/// One raw session: the handshake, answered (the recovery probe's).
fn open_session(addr: SocketAddr, timeout_ms: i32) -> Result<TcpStream> {
    crate::recovery::open_session(addr, Duration::from_secs(10), timeout_ms).map(|(s, _)| s)
}

/// Starts a fresh server of `flavor`, holds the sessions and measures it;
/// the server is killed before this returns.
pub fn measure(flavor: Flavor, cfg: &ServerConfig, spec: &IdleSpec) -> IdleRun {
    let mut run = IdleRun {
        sessions: spec.sessions,
        ..IdleRun::default()
    };
    if let Err(e) = measure_inner(flavor, cfg, spec, &mut run) {
        run.failure = Some(format!("{e:#}"));
    }
    run
}

fn measure_inner(
    flavor: Flavor,
    cfg: &ServerConfig,
    spec: &IdleSpec,
    run: &mut IdleRun,
) -> Result<()> {
    let mut server = Server::start(flavor, cfg)?;
    let pid = server.pid()?;
    let addr = server.addr();
    let timeout_ms = 60_000;
    let mut held = Vec::with_capacity(spec.warm_sessions + spec.sessions);
    for _ in 0..spec.warm_sessions {
        held.push(open_session(addr, timeout_ms)?);
    }
    std::thread::sleep(Duration::from_secs(1));
    run.rss_before_bytes = proc_status_bytes(pid, "VmRSS")?;
    for i in 0..spec.sessions {
        held.push(open_session(addr, timeout_ms).with_context(|| format!("session {i}"))?);
    }
    std::thread::sleep(Duration::from_secs_f64(spec.settle_secs));
    run.rss_after_bytes = proc_status_bytes(pid, "VmRSS")?;
    run.bytes_per_session =
        (run.rss_after_bytes as f64 - run.rss_before_bytes as f64) / spec.sessions.max(1) as f64;
    eprintln!(
        "[idle] {}: {} idle sessions, {:.1} KB each",
        flavor.name(),
        spec.sessions,
        run.bytes_per_session / 1000.0
    );
    drop(held);
    server.kill();
    Ok(())
}

/// `wazoo-bench idle`: the memory of idle sessions.
#[derive(Parser, Debug)]
#[command(name = "wazoo-bench idle")]
struct IdleArgs {
    /// Sessions held idle (the figure is per session).
    #[arg(long, default_value_t = 2000)]
    sessions: usize,
    /// Fresh-server runs per system, alternating ZooKeeper and wazoo.
    #[arg(long, default_value_t = 2)]
    runs: usize,
    /// The wazoo binary (default: target/release/wazoo, else target/debug).
    #[arg(long)]
    wazoo_bin: Option<PathBuf>,
    /// ZooKeeper's JVM heap (-Xmx).
    #[arg(long, default_value = "2g")]
    zk_heap: String,
}

pub fn main(argv: impl Iterator<Item = OsString>) -> ExitCode {
    let args = IdleArgs::parse_from(argv);
    crate::servers::raise_nofile_limit();
    let wazoo_bin = match crate::servers::find_wazoo_bin(args.wazoo_bin.clone()) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    let cfg = ServerConfig {
        wazoo_bin,
        zk_heap: args.zk_heap.clone(),
        wazoo_cfg: vec!["wazoo.recipes.builtin=false".into()],
        extra_cfg: Vec::new(),
        zk_jvm_args: Vec::new(),
        startup_timeout_secs: 90.0,
    };
    let spec = IdleSpec {
        sessions: args.sessions,
        ..IdleSpec::default()
    };
    let mut per = [Vec::new(), Vec::new()];
    for _ in 0..args.runs.max(1) {
        for (i, flavor) in [Flavor::Zookeeper, Flavor::Wazoo].into_iter().enumerate() {
            let run = measure(flavor, &cfg, &spec);
            if let Some(f) = &run.failure {
                eprintln!("error: {}: {f}", flavor.name());
                return ExitCode::FAILURE;
            }
            per[i].push(run.bytes_per_session);
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (zk, wz) = (median(&mut per[0]), median(&mut per[1]));
    println!("| idle sessions | ZooKeeper KB/session | wazoo KB/session | wazoo/ZooKeeper |");
    println!("|---:|---:|---:|---:|");
    println!(
        "| {} | {:.1} | {:.1} | {:.2} |",
        args.sessions,
        zk / 1000.0,
        wz / 1000.0,
        wz / zk
    );
    ExitCode::SUCCESS
}
