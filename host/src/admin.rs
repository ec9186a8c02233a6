//! Four-letter words (ruok, srvr, stat, mntr, conf, cons, envi, wchs, wchc,
//! wchp, dump, isro, dirs; and wazoo's `recp`), formatted as Apache ZooKeeper 3.8 formats them
//! so that existing monitoring keeps working; and the AdminServer's
//! commands ([`commands`]), which give the same figures as JSON, served
//! over HTTP by [`server`]. The figures both show are gathered here, once
//! (`environment`, `conns_in_order`, `session_of`, `dir_sizes`, and the
//! metrics catalog behind `mntr` and `monitor`).

pub mod commands;
pub mod server;

use std::fmt::Write;
use wazoo_zab::LeaderReport;

use crate::core::server::Server;
use std::path::{Path, PathBuf};

use crate::member::{log_dir, snap_dir, AdminContext};

/// The version string reported where ZooKeeper reports its own.
pub fn version() -> String {
    format!(
        "3.8.0-wazoo-{}, built on unknown",
        env!("CARGO_PKG_VERSION")
    )
}

/// Does what a four-letter word changes (`srst`, `crst` reset the figures
/// the other words show); the shell calls it before [`four_letter`].
pub fn resets_stats(word: &str, s: &mut Server) {
    match word {
        "srst" | "stat_reset" => s.reset_server_stats(),
        "crst" | "connection_stat_reset" => s.reset_connection_stats(),
        _ => {}
    }
}

/// The connection a four-letter word came on, and how many client
/// connections are open beside it.
///
/// ZooKeeper counts the asking connection as alive while it asks
/// (`zk_num_alive_connections`, and `Connections:` in `srvr` and `stat`
/// are its connection factory's count), and lists it in `cons` and `stat`
/// as a connection without a session that has received one packet.
pub struct Asker {
    pub peer: std::net::SocketAddr,
    pub others: usize,
}

impl Asker {
    /// The open connections, the asking one included.
    fn alive(&self) -> usize {
        self.others + 1
    }

    /// Its line in `cons` and `stat`, as ZooKeeper prints it.
    fn line(&self) -> String {
        format!(" /{}[0](queued=0,recved=1,sent=0)", self.peer)
    }
}

/// The answer to a four-letter word. `leader` is the consensus' report when
/// this member leads an ensemble (its `mntr` then has ZooKeeper's leader
/// keys).
pub fn four_letter(
    word: &str,
    s: &Server,
    ctx: &AdminContext,
    asker: Asker,
    leader: Option<LeaderReport>,
) -> String {
    let conns = asker.alive();
    match word {
        "ruok" => "imok".to_string(),
        "isro" => if s.in_read_only_mode() {
            "ro"
        } else if s.role().serves_clients() {
            "rw"
        } else {
            "null"
        }
        .to_string(),
        "srvr" => srvr(s, conns),
        "stat" => {
            let mut out = format!("Zookeeper version: {}\nClients:\n", version());
            for line in cons_lines(s, false).into_iter().chain([asker.line()]) {
                let _ = writeln!(out, "{line}");
            }
            out.push('\n');
            out + &srvr(s, conns)[format!("Zookeeper version: {}\n", version()).len()..]
        }
        "cons" => {
            let mut out = String::new();
            for line in cons_lines(s, true).into_iter().chain([asker.line()]) {
                let _ = writeln!(out, "{line}");
            }
            out.push('\n');
            out
        }
        "conf" => conf(ctx, s),
        "envi" => envi(),
        "mntr" => mntr(s, ctx, conns, leader),
        "wchs" => {
            let (conns, paths, total) = s.watches().data_summary();
            format!("{conns} connections watching {paths} paths\nTotal watches:{total}\n")
        }
        "wchc" => {
            let mut out = String::new();
            for (conn, paths) in s.watches().by_connection() {
                let _ = writeln!(out, "0x{:x}", session_of(s, conn));
                for p in paths {
                    let _ = writeln!(out, "\t{p}");
                }
            }
            // ZooKeeper ends the dump with a line of its own.
            out.push('\n');
            out
        }
        "wchp" => {
            let mut out = String::new();
            for (path, conns) in s.watches().by_path() {
                let _ = writeln!(out, "{path}");
                for conn in conns {
                    let _ = writeln!(out, "\t0x{:x}", session_of(s, conn));
                }
            }
            out.push('\n');
            out
        }
        "dump" => dump(s),
        // wazoo's own: the recipe modules loaded and the pending waits.
        "recp" => match s.recipes_report() {
            Some(report) => report,
            None => {
                "recipes are not enabled (no plugins directory, and wazoo.recipes.builtin=false)\n"
                    .to_string()
            }
        },
        "dirs" => {
            let (data, log) = dir_sizes(ctx);
            format!("datadir_size: {data}\nlogdir_size: {log}\n")
        }
        // The shell resets the core's figures before it asks for this
        // answer (see `resets_stats`); ZooKeeper answers with this text.
        "crst" => "Connection stats reset.\n".into(),
        "srst" => {
            ctx.metrics.reset(s, &ctx.log_stats);
            "Server stats reset.\n".into()
        }
        // The tree digests logged, as ZooKeeper 3.8 prints its digest log.
        "hash" => s
            .digest_log()
            .map(|(zxid, digest)| format!("{:x}: {digest}\n", zxid.to_wire()))
            .collect(),
        "gtmk" | "stmk" => "0\n".into(),
        other => format!("{other} is not executed because it is not a known command.\n"),
    }
}

/// `Mode:` as ZooKeeper prints it, with `read-only` for a member serving
/// read-only clients without a quorum.
pub(crate) fn mode(s: &Server) -> &'static str {
    if s.in_read_only_mode() {
        "read-only"
    } else {
        s.role().mode()
    }
}

/// The node count as ZooKeeper reports it: its DataTree keeps the root
/// under two keys ("" and "/"), so `srvr` and `mntr` show one more than
/// the nodes there are; monitoring built on ZooKeeper expects that.
pub(crate) fn reported_node_count(s: &Server) -> usize {
    s.tree().node_count() + 1
}

fn latency(s: &Server) -> (i64, f64, i64) {
    let st = &s.stats;
    let avg = if st.requests_completed == 0 {
        0.0
    } else {
        st.total_latency_ms as f64 / st.requests_completed as f64
    };
    (st.min_latency_ms, avg, st.max_latency_ms)
}

fn srvr(s: &Server, conns: usize) -> String {
    let (min, avg, max) = latency(s);
    format!(
        "Zookeeper version: {}\nLatency min/avg/max: {min}/{avg:.4}/{max}\nReceived: {}\nSent: {}\nConnections: {conns}\nOutstanding: {}\nZxid: 0x{:x}\nMode: {}\nNode count: {}\n",
        version(),
        s.packets_since_reset().0,
        s.packets_since_reset().1,
        s.outstanding_requests(),
        s.last_zxid(),
        mode(s),
        reported_node_count(s),
    )
}

/// The session a watching connection holds (0 if it holds none).
pub(crate) fn session_of(s: &Server, conn: crate::core::watch::ConnId) -> i64 {
    s.conns()
        .find(|(c, _)| **c == conn)
        .map(|(_, c)| c.session)
        .unwrap_or(0)
}

/// The client connections, in the order they were made.
pub(crate) fn conns_in_order(s: &Server) -> Vec<&crate::core::server::Conn> {
    let mut conns: Vec<_> = s.conns().collect();
    conns.sort_by_key(|(id, _)| **id);
    conns.into_iter().map(|(_, c)| c).collect()
}

/// The bytes under the snapshot and the log directories (`dirs`).
pub(crate) fn dir_sizes(ctx: &AdminContext) -> (u64, u64) {
    (dir_size(&snap_dir(&ctx.cfg)), dir_size(&log_dir(&ctx.cfg)))
}

fn cons_lines(s: &Server, detailed: bool) -> Vec<String> {
    conns_in_order(s)
        .into_iter()
        .map(|c| {
            let peer = c
                .peer
                .map(|p| p.to_string())
                .unwrap_or_else(|| "unknown".into());
            if detailed {
                let n = c.packets_sent.max(1) as i64;
                format!(
                    " /{peer}[1](queued=0,recved={},sent={},sid=0x{:x},est={},to={},lzxid=0x{:x},llat={},minlat={},avglat={},maxlat={})",
                    c.packets_received,
                    c.packets_sent,
                    c.session,
                    c.connected_at_ms,
                    c.timeout_ms,
                    c.last_zxid,
                    c.last_latency_ms,
                    if c.min_latency_ms == i64::MAX { 0 } else { c.min_latency_ms },
                    c.total_latency_ms / n,
                    c.max_latency_ms
                )
            } else {
                format!(
                    " /{peer}[1](queued=0,recved={},sent={})",
                    c.packets_received, c.packets_sent
                )
            }
        })
        .collect()
}

/// The member's environment as `envi` and `environment` show it:
/// ZooKeeper's keys that mean something for wazoo (no `java.*`), and
/// wazoo's version.
pub(crate) fn environment() -> Vec<(&'static str, String)> {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "unknown".into())
    };
    let cwd = std::env::current_dir()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    vec![
        ("zookeeper.version", version()),
        ("host.name", read("/proc/sys/kernel/hostname")),
        ("wazoo.version", env!("CARGO_PKG_VERSION").to_string()),
        ("os.name", std::env::consts::OS.to_string()),
        ("os.arch", std::env::consts::ARCH.to_string()),
        ("os.version", read("/proc/sys/kernel/osrelease")),
        ("user.name", var("USER")),
        ("user.home", var("HOME")),
        ("user.dir", cwd),
    ]
}

fn envi() -> String {
    let mut out = String::from("Environment:\n");
    for (k, v) in environment() {
        let _ = writeln!(out, "{k}={v}");
    }
    out
}

fn dump(s: &Server) -> String {
    let mut out = String::from("SessionTracker dump:\n");
    let sessions = s.sessions().all();
    let _ = writeln!(
        out,
        "Session Sets ({})/({}):",
        sessions.len(),
        sessions.len()
    );
    for sess in &sessions {
        let _ = writeln!(out, "0x{:x}\t{}ms", sess.id, sess.timeout_ms);
    }
    let mut owners = s.tree().sessions_with_ephemerals();
    owners.sort_unstable();
    let _ = writeln!(
        out,
        "ephemeral nodes dump:\nSessions with Ephemerals ({}):",
        owners.len()
    );
    for o in owners {
        let _ = writeln!(out, "0x{o:x}:");
        for p in s.tree().ephemerals(o) {
            let _ = writeln!(out, "\t{p}");
        }
    }
    out.push_str("Connections dump:\n");
    let _ = writeln!(out, "Connections Sets ({}):", s.conns().count());
    out
}

/// `mntr`'s figures: the metrics catalog, read now.
pub(crate) fn mntr_values(
    s: &Server,
    ctx: &AdminContext,
    conns: usize,
    leader: Option<LeaderReport>,
) -> Vec<(String, crate::metrics::MntrValue)> {
    let families = ctx.metrics.families(&crate::metrics::Sources {
        server: s,
        conns,
        leader,
        log: &ctx.log_stats,
    });
    crate::metrics::mntr_values(&families)
}

fn mntr(s: &Server, ctx: &AdminContext, conns: usize, leader: Option<LeaderReport>) -> String {
    let mut out = String::new();
    for (k, v) in mntr_values(s, ctx, conns, leader) {
        let _ = writeln!(out, "{k}\t{v}");
    }
    out
}

/// `conf`: the configuration as ZooKeeper prints it, with the directories
/// wazoo really uses and their sizes. ZooKeeper prints the directories
/// that hold its files (`<dataDir>/version-2`); wazoo's are
/// `<dataDir>/wazoo-v1` (snapshots) and `<dataLogDir>/wazoo-v1` (the log).
fn conf(ctx: &AdminContext, s: &Server) -> String {
    let (snaps, log) = (snap_dir(&ctx.cfg), log_dir(&ctx.cfg));
    let mut out = String::new();
    let membership = s.quorum_config();
    for l in ctx.cfg.conf_lines() {
        let key = l.split_once('=').map_or(l.as_str(), |(k, _)| k);
        if membership.is_some() && key.starts_with("server.") {
            // The active membership follows, as ZooKeeper prints it.
            continue;
        }
        let l = match key {
            "dataDir" => format!("dataDir={}", absolute(&snaps).display()),
            "dataDirSize" => format!("dataDirSize={}", dir_size(&snaps)),
            "dataLogDir" => format!("dataLogDir={}", absolute(&log).display()),
            "dataLogSize" => format!("dataLogSize={}", dir_size(&log)),
            _ => l,
        };
        let _ = writeln!(out, "{l}");
    }
    // ZooKeeper 3.5+ prints the active membership (which a reconfig may
    // have changed since zoo.cfg was read) after `membership: `.
    if let Some(m) = membership {
        let _ = writeln!(out, "membership: \n{}", m.render());
    }
    out
}

pub(crate) fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

/// How deep [`dir_size`] descends.
const DIR_DEPTH_MAX: usize = 8;

/// The bytes of the files under `dir`, subdirectories included (as
/// ZooKeeper's `getDirSize`), symbolic links not followed; 0 if it does
/// not exist.
pub fn dir_size(dir: &Path) -> u64 {
    fn walk(dir: &Path, depth: usize) -> u64 {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return 0;
        };
        rd.filter_map(|e| e.ok())
            .map(|e| match e.metadata() {
                Ok(m) if m.is_file() => m.len(),
                Ok(m) if m.is_dir() && depth < DIR_DEPTH_MAX => walk(&e.path(), depth + 1),
                _ => 0,
            })
            .sum()
    }
    walk(dir, 0)
}
