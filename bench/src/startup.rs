//! The start-up figure (`wazoo-bench startup`): does compiling the
//! built-in recipe modules throttle a fresh ensemble's writes?
//!
//! A fresh 3-member wazoo ensemble (empty data directories, so an empty
//! compile cache) starts with its built-in modules on; from the moment
//! every member serves, the lean generator (`lean/gen.rs`) drives setData
//! of 100 keys, closed loop, in one-second windows, over sessions spread
//! across the members. The same is done on a fresh ensemble with the
//! built-ins off, which compiles nothing. Runs alternate the two; the
//! figure is each window's writes per second, and the ratio of the first
//! windows (while the members compile) to the same windows without
//! compiling.

use std::ffi::OsString;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Parser;
use serde::Serialize;
use wazoo_proto::{frame, Acl, CreateRequest, Jute, Reader, ReplyHeader, Request};
use wazoo_testkit::Flavor;

use crate::ensembles::Ensemble;
use crate::lean::gen::{drive, Frames, Pace, Session};
use crate::servers::ServerConfig;

#[derive(Parser, Debug)]
#[command(name = "wazoo-bench startup")]
struct StartupArgs {
    /// Members of each ensemble.
    #[arg(long, default_value_t = 3)]
    members: usize,
    /// One-second windows measured from the moment every member serves.
    #[arg(long, default_value_t = 20)]
    seconds: usize,
    /// Sessions, spread over the members round robin.
    #[arg(long, default_value_t = 12)]
    sessions: usize,
    /// Requests each session keeps in flight.
    #[arg(long, default_value_t = 4)]
    inflight: usize,
    /// Pairs of fresh ensembles (compiling, not compiling), alternating.
    #[arg(long, default_value_t = 1)]
    runs: usize,
    /// The wazoo binary (default: target/release/wazoo, else target/debug).
    #[arg(long)]
    wazoo_bin: Option<PathBuf>,
    /// Write the windows as JSON here.
    #[arg(long)]
    out: Option<PathBuf>,
    /// The compiling ensemble's members share one fresh compile cache
    /// directory (`recipe.cacheDir`), as members on one machine may: they
    /// compile each module once between them instead of once each.
    #[arg(long)]
    shared_cache: bool,
}

const KEYS: usize = 100;
const PARENT: &str = "/startup";

#[derive(Debug, Serialize)]
struct StartupRun {
    builtins_compiling: bool,
    /// Writes per second in each one-second window, in order.
    writes_per_sec: Vec<f64>,
    /// The members' CPU per write in each window, µs.
    server_cpu_us_per_write: Vec<f64>,
    errors: u64,
}

pub fn main(argv: impl Iterator<Item = OsString>) -> ExitCode {
    let args = StartupArgs::parse_from(argv);
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &StartupArgs) -> Result<()> {
    anyhow::ensure!(
        args.members > 0 && args.seconds > 0 && args.sessions > 0 && args.inflight > 0,
        "--members, --seconds, --sessions and --inflight must be positive"
    );
    let wazoo_bin = crate::servers::find_wazoo_bin(args.wazoo_bin.clone())?;
    let mut runs = Vec::new();
    for r in 0..args.runs {
        // Alternate which goes first.
        let order = if r % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        for compiling in order {
            eprintln!(
                "startup: run {} of {}, built-ins {}",
                r + 1,
                args.runs,
                if compiling { "compiling" } else { "off" }
            );
            runs.push(one_run(args, &wazoo_bin, compiling)?);
        }
    }
    print!("{}", report(&runs, args.seconds));
    if let Some(path) = &args.out {
        std::fs::write(path, serde_json::to_vec_pretty(&runs)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

fn one_run(args: &StartupArgs, wazoo_bin: &std::path::Path, compiling: bool) -> Result<StartupRun> {
    let shared = tempfile::tempdir().context("a directory for the shared compile cache")?;
    let mut wazoo_cfg = vec![format!("wazoo.recipes.builtin={compiling}")];
    if args.shared_cache {
        wazoo_cfg.push(format!("recipe.cacheDir={}", shared.path().display()));
    }
    let cfg = ServerConfig {
        wazoo_bin: wazoo_bin.to_path_buf(),
        zk_heap: "1g".into(),
        wazoo_cfg,
        extra_cfg: Vec::new(),
        zk_jvm_args: Vec::new(),
        startup_timeout_secs: 120.0,
    };
    let ens = Ensemble::start(Flavor::Wazoo, args.members, &cfg)?;
    let pids: Vec<u32> = (0..args.members).filter_map(|i| ens.pid(i)).collect();
    make_keys(ens.addr(0))?;
    let mut sessions = (0..args.sessions)
        .map(|i| Session::open(ens.addr(i % args.members)))
        .collect::<Result<Vec<_>>>()?;
    let frames = Frames::new(
        &(0..KEYS)
            .map(|i| Request::SetData {
                path: format!("{PARENT}/k-{i:03}"),
                data: Some(vec![b'x'; 100]),
                version: -1,
            })
            .collect::<Vec<_>>(),
    );
    let mut out = StartupRun {
        builtins_compiling: compiling,
        writes_per_sec: Vec::new(),
        server_cpu_us_per_write: Vec::new(),
        errors: 0,
    };
    for _ in 0..args.seconds {
        let t = drive(
            &mut sessions,
            &frames,
            Pace::Closed {
                inflight: args.inflight,
            },
            Duration::ZERO,
            Duration::from_secs(1),
            &pids,
        )?;
        out.writes_per_sec.push(t.ops as f64 / t.secs);
        out.server_cpu_us_per_write
            .push(t.server_cpu_secs * 1e6 / (t.ops.max(1) as f64));
        out.errors += t.errors.values().sum::<u64>();
    }
    for s in sessions {
        s.close()?;
    }
    Ok(out)
}

/// Creates the parent and the keys the windows write, over one blocking
/// session.
fn make_keys(addr: SocketAddr) -> Result<()> {
    let (mut s, _) = crate::recovery::open_session(addr, Duration::from_secs(30), 30_000)?;
    let create = |path: String| {
        Request::Create(CreateRequest {
            path,
            data: Some(Vec::new()),
            acl: Acl::open_unsafe(),
            flags: 0,
            ttl: None,
        })
    };
    let mut out = Vec::new();
    let requests = std::iter::once(create(PARENT.into()))
        .chain((0..KEYS).map(|i| create(format!("{PARENT}/k-{i:03}"))));
    for (xid, req) in (1..).zip(requests) {
        out.clear();
        frame::write_request(&mut out, xid, &req);
        s.write_all(&out)?;
        let reply = crate::recovery::read_frame(&mut s)?;
        let h = ReplyHeader::read(&mut Reader::new(&reply))
            .map_err(|e| anyhow::anyhow!("decode a reply header: {e}"))?;
        if h.err != 0 {
            bail!("creating the keys: error {}", h.err);
        }
    }
    Ok(())
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn report(runs: &[StartupRun], seconds: usize) -> String {
    let mut s = String::from("| window (s) |");
    for r in runs {
        s.push_str(if r.builtins_compiling {
            " compiling: writes/s |"
        } else {
            " built-ins off: writes/s |"
        });
    }
    s.push_str("\n|---:|");
    s.push_str(&"---:|".repeat(runs.len()));
    s.push('\n');
    for w in 0..seconds {
        s.push_str(&format!("| {}-{} |", w, w + 1));
        for r in runs {
            let v = r.writes_per_sec.get(w).copied().unwrap_or(0.0);
            s.push_str(&format!(" {v:.0} |"));
        }
        s.push('\n');
    }
    // The first half of the windows is where a cold start compiles.
    let half = (seconds / 2).max(1);
    let first = |compiling: bool| {
        median(
            &runs
                .iter()
                .filter(|r| r.builtins_compiling == compiling)
                .flat_map(|r| r.writes_per_sec.iter().take(half).copied())
                .collect::<Vec<_>>(),
        )
    };
    let (on, off) = (first(true), first(false));
    s.push_str(&format!(
        "\nfirst {half} windows, median writes/s: compiling {on:.0}, built-ins off {off:.0}: ratio {:.2}\n",
        if off > 0.0 { on / off } else { 0.0 }
    ));
    let errors: u64 = runs.iter().map(|r| r.errors).sum();
    s.push_str(&format!("error replies: {errors}\n"));
    s
}
