//! The AdminServer's commands (ZooKeeper Administrator's Guide, "The
//! AdminServer"), answered as ZooKeeper 3.8's `Commands` answers them: a
//! JSON object with `command` (the primary name) and `error` (null, or
//! why the command did nothing) beside the command's own keys, under the
//! names and aliases ZooKeeper registers.
//!
//! The figures are those of the four-letter words (`super`'s gatherers
//! and the metrics catalog); only the format differs.

use serde_json::{json, Map, Value};
use wazoo_zab::{Peer, ServerState};

use crate::core::acl::AuthInfo;
use crate::core::server::{Role, Server, SnapshotJob};
use crate::member::{snap_dir, AdminContext};
use crate::metrics::MntrValue;

/// A command: its primary name, its other names, and whether it needs a
/// member that serves (ZooKeeper's `CommandBase.serverRequired`).
struct Command {
    names: &'static [&'static str],
    server_required: bool,
}

/// ZooKeeper 3.8's commands, and 3.9's `snapshot` and `restore` (a POST;
/// see [`super::server`]).
const COMMANDS: &[Command] = &[
    cmd(&["snapshot", "snap"], true),
    cmd(&["restore", "rest"], true),
    cmd(&["configuration", "conf", "config"], true),
    cmd(&["connection_stat_reset", "crst"], true),
    cmd(&["connections", "cons"], true),
    cmd(&["dirs"], true),
    cmd(&["dump"], true),
    cmd(&["environment", "env", "envi"], false),
    cmd(&["get_trace_mask", "gtmk"], false),
    cmd(&["hash"], true),
    cmd(&["initial_configuration", "icfg"], true),
    cmd(&["is_read_only", "isro"], true),
    cmd(&["last_snapshot", "lsnp"], true),
    cmd(&["leader", "lead"], true),
    cmd(&["monitor", "mntr"], false),
    cmd(&["observer_connection_stat_reset", "orst"], true),
    cmd(&["observers", "obsr"], true),
    cmd(&["ruok"], true),
    cmd(&["server_stats", "srvr"], true),
    cmd(&["set_trace_mask", "stmk"], false),
    cmd(&["stat_reset", "srst"], true),
    cmd(&["stats", "stat"], true),
    cmd(&["system_properties", "sysp"], false),
    cmd(&["voting_view"], true),
    cmd(&["watch_summary", "wchs"], true),
    cmd(&["watches", "wchc"], true),
    cmd(&["watches_by_path", "wchp"], true),
    cmd(&["zabstate"], false),
];

const fn cmd(names: &'static [&'static str], server_required: bool) -> Command {
    Command {
        names,
        server_required,
    }
}

/// The primary names, sorted (what `GET /commands` links to).
pub fn primary_names() -> Vec<&'static str> {
    let mut v: Vec<_> = COMMANDS.iter().map(|c| c.names[0]).collect();
    v.sort_unstable();
    v
}

/// The primary name of the command `name` names, if any.
pub fn primary_name(name: &str) -> Option<&'static str> {
    COMMANDS
        .iter()
        .find(|c| c.names.contains(&name))
        .map(|c| c.names[0])
}

/// The commands that need an authorized asker (ZooKeeper 3.9's
/// `AuthRequest(Perms.ALL, "/")`).
const NEEDS_AUTH: &[&str] = &["snapshot", "restore"];

/// The commands served on POST (ZooKeeper 3.9's `PostCommand`s); the
/// others on GET.
pub const POST_COMMANDS: &[&str] = &["restore"];

/// What a command reads beside the pipeline.
pub struct Context<'a> {
    pub admin: &'a AdminContext,
    /// Consensus, on an ensemble member.
    pub peer: Option<&'a Peer>,
    /// Client connections open.
    pub conns: usize,
}

/// Who asks: the `Authorization` header (`digest user:password`, `ip`),
/// and the address asking.
pub struct Asker<'a> {
    pub authorization: Option<&'a str>,
    pub ip: std::net::IpAddr,
    /// The client certificate of a TLS connection (checked against the
    /// `ssl.quorum.*` trust store in the handshake, `admin.needClientAuth`).
    pub cert: Option<&'a [u8]>,
}

/// A command's answer: the HTTP status, the JSON object (with `command`
/// and `error`), for `snapshot`, the state to stream, and for `restore`,
/// whether the asker may go on (authorized, the command enabled).
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub json: Value,
    pub snapshot: Option<SnapshotJob>,
    pub restore: bool,
}

/// Runs the command `name` (the shell has already done what a reset
/// command changes: `super::resets_stats`).
pub fn run(
    name: &str,
    kwargs: &[(String, String)],
    asker: &Asker<'_>,
    s: &Server,
    cx: &Context<'_>,
) -> Answer {
    let mut out = Map::new();
    let Some(command) = COMMANDS.iter().find(|c| c.names.contains(&name)) else {
        return answer(200, name, Some(format!("Unknown command: {name}")), out);
    };
    let primary = command.names[0];
    let serving = s.in_read_only_mode() || s.role().serves_clients();
    if command.server_required && !serving {
        return answer(
            200,
            name,
            Some("This ZooKeeper instance is not currently serving requests".into()),
            out,
        );
    }
    if NEEDS_AUTH.contains(&primary) {
        if let Err((status, why)) = authorize(asker, s, cx.admin) {
            return answer(status, name, Some(why.into()), out);
        }
    }
    if primary == "snapshot" || primary == "restore" {
        let admin = cx.admin.cfg.admin.as_ref();
        let (enabled, why) = if primary == "snapshot" {
            (admin.is_some_and(|a| a.snapshot_enabled), None)
        } else {
            // ZooKeeper 3.9 answers 503 with no error text; the key is
            // named here.
            let why = "the restore command is disabled (admin.restore.enabled=false)";
            (admin.is_some_and(|a| a.restore_enabled), Some(why.into()))
        };
        if !enabled {
            return answer(503, primary, why, out);
        }
        let mut a = answer(200, primary, None, out);
        if primary == "snapshot" {
            a.snapshot = Some(s.snapshot_job());
        } else {
            a.restore = true;
        }
        return a;
    }
    let error = fill(primary, kwargs, s, cx, &mut out);
    answer(200, primary, error, out)
}

fn answer(
    status: u16,
    command: &str,
    error: Option<String>,
    mut out: Map<String, Value>,
) -> Answer {
    out.insert("command".into(), command.into());
    out.insert("error".into(), error.map_or(Value::Null, Value::from));
    Answer {
        status,
        json: Value::Object(out),
        snapshot: None,
        restore: false,
    }
}

/// ZooKeeper 3.9's check for a command that needs authorization: the
/// `Authorization` header names a scheme (`digest user:password`; `ip`,
/// the asking address; `x509`, the subject of the client certificate,
/// which is the super user if it is `X509AuthenticationProvider.superUser`),
/// and the identities it gives must have every
/// permission on `/` (the super user has them all). The statuses and
/// errors are ZooKeeper's.
fn authorize(asker: &Asker<'_>, s: &Server, ctx: &AdminContext) -> Result<(), (u16, &'static str)> {
    const NOT_AUTHENTICATED: (u16, &str) = (401, "Not authenticated");
    let Some(header) = asker.authorization else {
        return Err((401, "Auth info is missing for the command"));
    };
    let parts: Vec<&str> = header.split(' ').collect();
    let ids = match parts.as_slice() {
        ["digest", credentials] if credentials.contains(':') => crate::core::acl::authenticate(
            "digest",
            credentials.as_bytes(),
            ctx.cfg.super_digest.as_deref(),
        )
        .map_err(|_| NOT_AUTHENTICATED)?,
        ["ip"] => vec![wazoo_proto::Id::new("ip", &asker.ip.to_string())],
        ["x509"] => {
            let cert = asker.cert.ok_or(NOT_AUTHENTICATED)?;
            let cert = rustls_pki_types::CertificateDer::from(cert);
            crate::tls::x509_ids(&cert, ctx.cfg.tls.x509_super_user.as_deref())
                .map_err(|_| NOT_AUTHENTICATED)?
        }
        _ => return Err(NOT_AUTHENTICATED),
    };
    let auth = AuthInfo { ids };
    let acl = s.tree().acl("/").unwrap_or_default();
    for bit in [1, 2, 4, 8, 16] {
        crate::core::acl::check(&acl, bit, &auth).map_err(|_| (403, "Not authorized"))?;
    }
    Ok(())
}

/// Puts the command's keys into `out`; the error, if it did nothing.
fn fill(
    primary: &str,
    kwargs: &[(String, String)],
    s: &Server,
    cx: &Context<'_>,
    out: &mut Map<String, Value>,
) -> Option<String> {
    let ctx = cx.admin;
    let cfg = &ctx.cfg;
    let mut put = |k: &str, v: Value| {
        out.insert(k.to_string(), v);
    };
    match primary {
        "configuration" => {
            let (snaps, log) = (snap_dir(cfg), crate::member::log_dir(cfg));
            put("client_port", cfg.client_port.into());
            put(
                "data_dir",
                super::absolute(&snaps).display().to_string().into(),
            );
            put(
                "data_log_dir",
                super::absolute(&log).display().to_string().into(),
            );
            put("tick_time", cfg.tick_time_ms.into());
            put("max_client_cnxns", cfg.max_client_cnxns.into());
            put("min_session_timeout", cfg.min_session_timeout_ms.into());
            put("max_session_timeout", cfg.max_session_timeout_ms.into());
            put("server_id", cfg.my_id.unwrap_or(0).into());
            put(
                "client_port_listen_backlog",
                cfg.client_port_listen_backlog.into(),
            );
        }
        "connections" => {
            put("connections", connections(s, false));
            put("secure_connections", json!([]));
        }
        "stats" | "server_stats" => {
            server_stats(s, cx, &mut put);
            if primary == "stats" {
                put("connections", connections(s, true));
                put("secure_connections", json!([]));
            }
        }
        "dirs" => {
            let (data, log) = super::dir_sizes(ctx);
            put("datadir_size", data.into());
            put("logdir_size", log.into());
        }
        "dump" => {
            // Expiry times on the wall clock, as ZooKeeper keys them; as
            // in ZooKeeper, only where expiry is decided (a follower's
            // and an observer's map is empty).
            let now = ctx.clock.now();
            let mut by_expiry: std::collections::BTreeMap<i64, Vec<i64>> = Default::default();
            let decides = matches!(s.role(), Role::Standalone | Role::Leader { .. });
            for sess in s.sessions().all().into_iter().filter(|_| decides) {
                let at = now.wall_ms + (sess.expires_at_ms - now.mono_ms);
                by_expiry.entry(at).or_default().push(sess.id);
            }
            let expiry: Map<String, Value> = by_expiry
                .into_iter()
                .map(|(at, ids)| (at.to_string(), json!(ids)))
                .collect();
            put("expiry_time_to_session_ids", Value::Object(expiry));
            let mut owners = s.tree().sessions_with_ephemerals();
            owners.sort_unstable();
            let eph: Map<String, Value> = owners
                .into_iter()
                .map(|o| (o.to_string(), json!(s.tree().ephemerals(o))))
                .collect();
            put("session_id_to_ephemeral_paths", Value::Object(eph));
        }
        "environment" => {
            for (k, v) in super::environment() {
                put(k, v.into());
            }
        }
        "system_properties" => {
            // wazoo runs no JVM: the properties that describe it.
            put("file.separator", "/".into());
            put("line.separator", "\n".into());
            for (k, v) in super::environment() {
                if k.starts_with("os.") || k.starts_with("user.") {
                    put(k, v.into());
                }
            }
        }
        // wazoo has no trace mask; ZooKeeper's answer shape, nothing set.
        "get_trace_mask" => put("tracemask", 0.into()),
        "set_trace_mask" => {
            let arg = kwargs.iter().find(|(k, _)| k == "traceMask");
            match arg.map(|(_, v)| v.parse::<i64>()) {
                None => return Some("setTraceMask requires long traceMask argument".into()),
                Some(Err(_)) => {
                    return Some(format!(
                        "setTraceMask requires long traceMask argument, got {}",
                        arg.map_or("", |(_, v)| v.as_str())
                    ))
                }
                Some(Ok(_)) => put("tracemask", 0.into()),
            }
        }
        // ZooKeeper's `ZxidDigest`s, in its JSON's snake case.
        "hash" => put(
            "digests",
            s.digest_log()
                .map(|(zxid, digest)| {
                    json!({"zxid": zxid.to_wire(), "digest_version": 2, "digest": digest})
                })
                .collect::<Vec<_>>()
                .into(),
        ),
        "initial_configuration" => {
            let mut text = String::new();
            for l in cfg.conf_lines() {
                text.push_str(&l);
                text.push('\n');
            }
            put("initial_configuration", text.into());
        }
        "is_read_only" => put("read_only", s.in_read_only_mode().into()),
        "last_snapshot" => {
            let newest = wazoo_storage::list_snapshots(snap_dir(cfg))
                .ok()
                .and_then(|v| v.into_iter().max_by_key(|(z, _)| *z));
            let (zxid, ts) = match newest {
                Some((z, path)) => {
                    let ts = std::fs::metadata(&path)
                        .and_then(|m| m.modified())
                        .ok()
                        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                        .map_or(-1, |d| d.as_secs() as i64);
                    (format!("{:x}", z.0), ts)
                }
                None => ("ffffffffffffffff".to_string(), -1),
            };
            put("zxid", zxid.into());
            put("timestamp", ts.into());
        }
        "leader" => {
            let Some(peer) = cx.peer else {
                return Some("server is not initialized".into());
            };
            let st = peer.status();
            put("is_leader", (st.state == ServerState::Leading).into());
            let id = st.leader.map_or(-1, |l| l as i64);
            put("leader_id", id.into());
            let ip = st
                .leader
                .and_then(|l| {
                    s.quorum_config()?
                        .servers
                        .get(&l)
                        .map(|e| e.hostname().to_string())
                })
                .unwrap_or_default();
            put("leader_ip", ip.into());
        }
        "monitor" => {
            let leader = cx.peer.and_then(|p| p.leader_report());
            for (k, v) in super::mntr_values(s, ctx, cx.conns, leader) {
                let k = k.strip_prefix("zk_").unwrap_or(&k).to_string();
                put(&k, mntr_json(v));
            }
        }
        // wazoo keeps no per-observer connection figures to reset.
        // The pipeline's figures were reset before (`super::resets_stats`);
        // `mntr`'s are reset here, as `srst` resets them.
        "stat_reset" => ctx.metrics.reset(s, &ctx.log_stats),
        // wazoo keeps no per-observer connection figures to reset.
        "observer_connection_stat_reset" | "connection_stat_reset" | "ruok" => {}
        "observers" => {
            let mut synced = Vec::new();
            if let Some(p) = cx.peer {
                p.synced_learners_into(&mut synced);
            }
            let observers: Vec<Value> = synced
                .into_iter()
                .filter(|id| {
                    s.quorum_config()
                        .and_then(|q| q.servers.get(id))
                        .is_some_and(|e| e.observer)
                })
                .map(|id| json!({ "sid": id }))
                .collect();
            put("synced_observers", observers.len().into());
            put("observers", Value::Array(observers));
        }
        "voting_view" => {
            let mut view = Map::new();
            if cx.peer.is_some() {
                for (id, e) in s.quorum_config().map(|q| &q.servers).into_iter().flatten() {
                    if e.observer {
                        continue;
                    }
                    let client = e.client.as_ref().map_or(String::new(), |(a, p)| {
                        format!("{}:{p}", a.as_deref().unwrap_or("0.0.0.0"))
                    });
                    view.insert(
                        id.to_string(),
                        json!({
                            "server_addresses": e.addrs.iter().map(|a| format!("{}:{}", a.host, a.quorum_port)).collect::<Vec<_>>(),
                            "election_addresses": e.addrs.iter().map(|a| format!("{}:{}", a.host, a.election_port)).collect::<Vec<_>>(),
                            "client_address": client,
                            "learner_type": "participant",
                        }),
                    );
                }
            }
            put("current_config", Value::Object(view));
        }
        "watch_summary" => {
            let (conns, paths, total) = s.watches().data_summary();
            put("num_connections", conns.into());
            put("num_paths", paths.into());
            put("num_total_watches", total.into());
        }
        "watches" => {
            let m: Map<String, Value> = s
                .watches()
                .by_connection()
                .into_iter()
                .map(|(conn, paths)| (super::session_of(s, conn).to_string(), json!(paths)))
                .collect();
            put("session_id_to_watched_paths", Value::Object(m));
        }
        "watches_by_path" => {
            let m: Map<String, Value> = s
                .watches()
                .by_path()
                .into_iter()
                .map(|(path, conns)| {
                    let ids: Vec<i64> =
                        conns.into_iter().map(|c| super::session_of(s, c)).collect();
                    (path, json!(ids))
                })
                .collect();
            put("path_to_session_ids", Value::Object(m));
        }
        "zabstate" => zabstate(s, cx, &mut put),
        _ => {}
    }
    None
}

fn mntr_json(v: MntrValue) -> Value {
    match v {
        MntrValue::Text(t) => t.into(),
        MntrValue::Int(i) => i.into(),
        MntrValue::Float(f) => f.into(),
    }
}

/// `server_stats` (and `stats`): ZooKeeper's `ServerStats` object, from the
/// figures `mntr` shows. Those wazoo does not measure (docs/COMPATIBILITY.md,
/// "The AdminServer") are 0, and the response sizes -1, ZooKeeper's value
/// before any was recorded.
fn server_stats(s: &Server, cx: &Context<'_>, put: &mut impl FnMut(&str, Value)) {
    let leader = cx.peer.and_then(|p| p.leader_report());
    let m: std::collections::HashMap<String, MntrValue> =
        super::mntr_values(s, cx.admin, cx.conns, leader)
            .into_iter()
            .collect();
    let get = |k: &str, none: i64| m.get(k).cloned().map_or(none.into(), mntr_json);
    let response_sizes = json!({
        "last_buffer_size": get("zk_last_client_response_size", -1),
        "min_buffer_size": get("zk_min_client_response_size", -1),
        "max_buffer_size": get("zk_max_client_response_size", -1),
    });
    let (data, log) = super::dir_sizes(cx.admin);
    let (min, avg, max) = super::latency(s);
    let (received, sent) = s.packets_since_reset();
    let stats = json!({
        "packets_sent": sent,
        "packets_received": received,
        "fsync_threshold_exceed_count": get("zk_fsync_threshold_exceed_count", 0),
        "client_response_stats": response_sizes,
        "data_dir_size": data,
        "log_dir_size": log,
        "provider_null": false,
        "server_state": super::mode(s),
        "last_processed_zxid": s.last_zxid().0,
        "outstanding_requests": s.outstanding_requests(),
        "avg_latency": avg,
        "max_latency": max,
        "min_latency": min,
        "num_alive_client_connections": cx.conns,
        "auth_failed_count": get("zk_auth_failed_count", 0),
        "non_mtlsremote_conn_count": get("zk_non_mtls_remote_conn_count", 0),
        "non_mtlslocal_conn_count": get("zk_non_mtls_local_conn_count", 0),
        "uptime": get("zk_uptime", 0),
    });
    put("version", super::version().into());
    put("read_only", s.in_read_only_mode().into());
    put("server_stats", stats);
    put("client_response", response_sizes);
    if let Some(l) = leader {
        put(
            "proposal_stats",
            json!({
                "last_buffer_size": l.last_proposal_bytes,
                "min_buffer_size": l.min_proposal_bytes,
                "max_buffer_size": l.max_proposal_bytes,
            }),
        );
    }
    put("node_count", super::reported_node_count(s).into());
}

/// `connections` (`brief`: `stats`' shorter form), as ZooKeeper's
/// `ServerCnxn.getConnectionInfo` describes a connection.
fn connections(s: &Server, brief: bool) -> Value {
    let list: Vec<Value> = super::conns_in_order(s)
        .into_iter()
        .map(|c| {
            let mut m = Map::new();
            let peer = c.peer.map(|p| p.to_string()).unwrap_or_default();
            m.insert("remote_socket_address".into(), peer.into());
            m.insert("interest_ops".into(), 1.into());
            m.insert("outstanding_requests".into(), 0.into());
            m.insert("packets_received".into(), c.packets_received.into());
            m.insert("packets_sent".into(), c.packets_sent.into());
            if !brief {
                let n = c.packets_sent.max(1) as i64;
                let min = if c.min_latency_ms == i64::MAX {
                    0
                } else {
                    c.min_latency_ms
                };
                m.insert("session_id".into(), c.session.into());
                m.insert("last_operation".into(), "NA".into());
                m.insert("established".into(), c.connected_at_ms.into());
                m.insert("session_timeout".into(), c.timeout_ms.into());
                m.insert("last_cxid".into(), (-1).into());
                m.insert("last_zxid".into(), c.last_zxid.into());
                m.insert("last_response_time".into(), 0.into());
                m.insert("last_latency".into(), c.last_latency_ms.into());
                m.insert("min_latency".into(), min.into());
                m.insert("avg_latency".into(), (c.total_latency_ms / n).into());
                m.insert("max_latency".into(), c.max_latency_ms.into());
            }
            Value::Object(m)
        })
        .collect();
    Value::Array(list)
}

/// `zabstate`: the phase of ZAB this member is in.
fn zabstate(s: &Server, cx: &Context<'_>, put: &mut impl FnMut(&str, Value)) {
    let Some(peer) = cx.peer else {
        put("voting", false.into());
        put("zabstate", "".into());
        return;
    };
    let st = peer.status();
    let my_id = cx.admin.cfg.my_id.unwrap_or(0);
    let me = s.quorum_config().and_then(|q| q.servers.get(&my_id));
    // ZooKeeper's `MultipleAddresses`, as Jackson writes its getters
    // (every address counts as reachable: wazoo probes none).
    let addr = |port: fn(&crate::core::quorum_config::MemberAddr) -> u16| {
        let Some(e) = me else {
            return Value::Null;
        };
        let all: Vec<String> = e
            .addrs
            .iter()
            .map(|a| format!("{}:{}", a.host, port(a)))
            .collect();
        let (mut hosts, mut ports): (Vec<&str>, Vec<u16>) = (Vec::new(), Vec::new());
        for a in &e.addrs {
            if !hosts.contains(&a.host.as_str()) {
                hosts.push(&a.host);
            }
            if !ports.contains(&port(a)) {
                ports.push(port(a));
            }
        }
        let wildcards: Vec<String> = ports.iter().map(|p| format!("0.0.0.0:{p}")).collect();
        let one = all.first().cloned().unwrap_or_default();
        json!({
            "all_addresses": all,
            "all_host_strings": hosts,
            "all_ports": ports,
            "all_reachable_addresses": all,
            "all_reachable_addresses_or_all": all,
            "empty": false,
            "one": one,
            "reachable_address": one,
            "reachable_or_one": one,
            "wildcard_addresses": wildcards,
        })
    };
    put("myid", my_id.into());
    put("is_leader", matches!(s.role(), Role::Leader { .. }).into());
    put("quorum_address", addr(|a| a.quorum_port));
    put("election_address", addr(|a| a.election_port));
    put(
        "client_address",
        cx.admin.cfg.client_addr().to_string().into(),
    );
    put("voting", me.is_some_and(|e| !e.observer).into());
    let z = s.last_zxid();
    put("last_zxid", format!("0x{:x}", z.0).into());
    put("zab_epoch", z.epoch().into());
    put("zab_counter", z.counter().into());
    let phase = match (st.state, st.serving) {
        (ServerState::Looking, _) => "election",
        (_, false) => "synchronization",
        (_, true) => "broadcast",
    };
    put("zabstate", phase.into());
}
