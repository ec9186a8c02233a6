//! The AdminServer against a real Apache ZooKeeper 3.8 (ZooKeeper
//! Administrator's Guide, "The AdminServer"): on the same scenario, every
//! command, under each of its names, answers with ZooKeeper's keys (its
//! JSON's shape, nested objects included), except the differences
//! docs/COMPATIBILITY.md lists ("The AdminServer"); the command list, an
//! unknown command and the HTTP statuses are ZooKeeper's. And the port's
//! bounds (wazoo only): bad HTTP is a 400, an idle connection is closed.

mod common;

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use wazoo_testkit::{start_ensemble, Flavor};
use zookeeper_client::{Acl, Acls, AuthId, CreateMode, Permission};

/// ZooKeeper 3.8's commands, each with its other names
/// (`org.apache.zookeeper.server.admin.Commands`).
const COMMANDS: &[&[&str]] = &[
    &["configuration", "conf", "config"],
    &["connection_stat_reset", "crst"],
    &["connections", "cons"],
    &["dirs"],
    &["dump"],
    &["environment", "env", "envi"],
    &["get_trace_mask", "gtmk"],
    &["hash"],
    &["initial_configuration", "icfg"],
    &["is_read_only", "isro"],
    &["last_snapshot", "lsnp"],
    &["leader", "lead"],
    &["monitor", "mntr"],
    &["observer_connection_stat_reset", "orst"],
    &["observers", "obsr"],
    &["ruok"],
    &["server_stats", "srvr"],
    &["set_trace_mask", "stmk"],
    &["stat_reset", "srst"],
    &["stats", "stat"],
    &["system_properties", "sysp"],
    &["voting_view"],
    &["watch_summary", "wchs"],
    &["watches", "wchc"],
    &["watches_by_path", "wchp"],
    &["zabstate"],
];

/// Sends `request` as is and returns the status, the head and the body's
/// bytes.
fn http_bytes(addr: SocketAddr, request: &[u8]) -> (u16, String, Vec<u8>) {
    let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(request).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let split = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no head from {addr}: {:?}", String::from_utf8_lossy(&out)));
    let head = String::from_utf8_lossy(&out[..split]).into_owned();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line from {addr}: {head:?}"));
    (status, head, out[split + 4..].to_vec())
}

/// Sends `request` as is and returns the status and body. HTTP/1.0, so
/// that Jetty answers without chunks.
fn http_raw(addr: SocketAddr, request: &[u8]) -> (u16, String) {
    let (status, _, body) = http_bytes(addr, request);
    (status, String::from_utf8_lossy(&body).into_owned())
}

fn http(addr: SocketAddr, method: &str, path: &str) -> (u16, String) {
    http_raw(
        addr,
        format!("{method} {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes(),
    )
}

fn command(addr: SocketAddr, name: &str) -> Value {
    let (status, body) = http(addr, "GET", &format!("/commands/{name}"));
    assert_eq!(status, 200, "{name}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{name}: {e}: {body}"))
}

/// The shape of a JSON value: the paths of its keys, with keys that are
/// data (ids, times, paths) as `*` and array elements as `[]`.
fn shape(v: &Value) -> BTreeSet<String> {
    fn walk(v: &Value, at: &str, out: &mut BTreeSet<String>) {
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    let data = k.starts_with('/') || k.parse::<i64>().is_ok();
                    let path = format!("{at}{}", if data { "*" } else { k });
                    out.insert(path.clone());
                    walk(v, &format!("{path}."), out);
                }
            }
            Value::Array(a) => {
                for v in a {
                    walk(v, &format!("{at}[]."), out);
                }
            }
            _ => {}
        }
    }
    let mut out = BTreeSet::new();
    walk(v, "", &mut out);
    out
}

/// Keys docs/COMPATIBILITY.md says differ ("The AdminServer"): ZooKeeper's
/// that wazoo has not (the JVM's), and wazoo's own.
fn documented_difference(command: &str, key: &str) -> bool {
    match command {
        "environment" => {
            key.starts_with("java.") || key.starts_with("os.memory.") || key == "wazoo.version"
        }
        // A JVM's system properties: compared by `command` and `error` only.
        "system_properties" => !matches!(key, "command" | "error"),
        // Compared with `mntr` below (tests/mntr_keys.rs compares those).
        "monitor" => true,
        _ => false,
    }
}

/// A session with an ephemeral node and a data watch, so that
/// `connections`, `dump` and the watch commands have something to show.
async fn scenario(
    client: SocketAddr,
) -> (zookeeper_client::Client, zookeeper_client::OneshotWatcher) {
    let zk = common::connect(&client.to_string()).await;
    zk.create(
        "/admin-eph",
        b"x",
        &CreateMode::Ephemeral.with_acls(Acls::anyone_all()),
    )
    .await
    .unwrap();
    let (_, _, watch) = zk.get_and_watch_data("/admin-eph").await.unwrap();
    (zk, watch)
}

/// Every command's answer on one server, by primary name, after checking
/// that its other names give the same command.
fn answers(admin: SocketAddr) -> Vec<(&'static str, Value)> {
    COMMANDS
        .iter()
        .map(|names| {
            let v = command(admin, names[0]);
            for alias in &names[1..] {
                let a = command(admin, alias);
                assert_eq!(a["command"], names[0], "{alias} names {}", names[0]);
            }
            (names[0], v)
        })
        .collect()
}

fn compare(role: &str, zk: &[(&str, Value)], wazoo: &[(&str, Value)]) {
    let mut failures = Vec::new();
    for ((name, z), (_, w)) in zk.iter().zip(wazoo) {
        let (zs, ws) = (shape(z), shape(w));
        let missing: Vec<_> = zs
            .difference(&ws)
            .filter(|k| !documented_difference(name, k))
            .collect();
        let extra: Vec<_> = ws
            .difference(&zs)
            .filter(|k| !documented_difference(name, k))
            .collect();
        if !missing.is_empty() || !extra.is_empty() {
            failures.push(format!(
                "{role} {name}: ZooKeeper's keys wazoo lacks {missing:?}, wazoo's extra {extra:?}\n  zk: {z}\n  wazoo: {w}"
            ));
        }
        assert_eq!(z["command"], w["command"], "{role} {name}");
        assert_eq!(
            z["error"].is_null(),
            w["error"].is_null(),
            "{role} {name}: error {} on ZooKeeper, {} on wazoo",
            z["error"],
            w["error"]
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `monitor` gives `mntr`'s figures under its keys without `zk_`.
fn monitor_is_mntr(flavor: Flavor, client: SocketAddr, monitor: &Value) {
    let mntr = wazoo_testkit::four_letter_word(client, "mntr").unwrap();
    let from_mntr: BTreeSet<String> = mntr
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(k, _)| k.strip_prefix("zk_").unwrap_or(k).to_string())
        .collect();
    let from_monitor: BTreeSet<String> = monitor
        .as_object()
        .unwrap()
        .keys()
        .filter(|k| !matches!(k.as_str(), "command" | "error"))
        .cloned()
        .collect();
    // A leader's per-learner keys come and go with its learners.
    let stable = |s: &BTreeSet<String>| -> BTreeSet<String> {
        s.iter()
            .filter(|k| !k.contains("learner_handler"))
            .cloned()
            .collect()
    };
    assert_eq!(
        stable(&from_monitor),
        stable(&from_mntr),
        "{flavor}: monitor's keys against mntr's"
    );
}

/// What a standalone server answers (ZooKeeper or wazoo), with the
/// statuses of the requests that are not commands.
async fn standalone(flavor: Flavor) -> (Vec<(&'static str, Value)>, Vec<u16>, String) {
    let server = flavor
        .start_with(common::options(flavor).admin_server())
        .unwrap_or_else(|e| panic!("cannot start {flavor}: {e:#}"));
    let admin = server.admin_addr().expect("an AdminServer");
    let zk = scenario(server.addr()).await;
    let mut all = answers(admin);
    // An unknown command: its name back, and why.
    all.push(("no_such_command", command(admin, "no_such_command")));
    monitor_is_mntr(
        flavor,
        server.addr(),
        &all.iter().find(|(n, _)| *n == "monitor").unwrap().1,
    );
    let (status, listing) = http(admin, "GET", "/commands");
    assert_eq!(status, 200);
    let statuses = vec![
        http(admin, "GET", "/nothing-here").0,
        http_raw(admin, b"POST /commands/ruok HTTP/1.0\r\nContent-Length: 0\r\n\r\n").0,
        http_raw(
            admin,
            b"POST /commands/ruok HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        )
        .0,
        http(admin, "TRACE", "/commands/ruok").0,
        http_raw(admin, b"GET /commands/ruok HTTP/1.1\r\nno colon here\r\n\r\n").0,
        http_raw(admin, b"NOT HTTP AT ALL\r\n\r\n").0,
    ];
    drop(zk);
    (all, statuses, listing)
}

// ZooKeeper Administrator's Guide, "The AdminServer": the commands, their
// names, the JSON they answer with, and the listing at the command URL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standalone_commands_answer_as_zookeeper_does() {
    let (zk, zk_status, zk_listing) = standalone(Flavor::Zookeeper).await;
    let (wazoo, wazoo_status, wazoo_listing) = standalone(Flavor::Wazoo).await;
    compare("standalone", &zk, &wazoo);
    // ZooKeeper 3.8's commands, and 3.9's snapshot and restore.
    let snapshot_link = "<a href=\"/commands/snapshot\">snapshot</a>\n<br/>\n";
    let restore_link = "<a href=\"/commands/restore\">restore</a>\n<br/>\n";
    assert_eq!(
        wazoo_listing
            .replacen(snapshot_link, "", 1)
            .replacen(restore_link, "", 1),
        zk_listing,
        "the command listing"
    );
    assert!(wazoo_listing.contains(snapshot_link), "{wazoo_listing}");
    assert!(wazoo_listing.contains(restore_link), "{wazoo_listing}");
    assert_eq!(
        wazoo_status, zk_status,
        "statuses of: an unknown path, POST (HTTP/1.0, 1.1), TRACE, a malformed header, not HTTP"
    );
    // The same scenario shows the same figures.
    let get = |all: &[(&str, Value)], c: &str| all.iter().find(|(n, _)| *n == c).unwrap().1.clone();
    for (c, key) in [
        ("watch_summary", "num_paths"),
        ("watch_summary", "num_total_watches"),
        ("is_read_only", "read_only"),
        ("server_stats", "node_count"),
        ("leader", "error"),
        ("zabstate", "zabstate"),
    ] {
        assert_eq!(get(&wazoo, c)[key], get(&zk, c)[key], "{c} {key}");
    }
    let paths = |all: &[(&str, Value)]| -> Vec<Value> {
        get(all, "dump")["session_id_to_ephemeral_paths"]
            .as_object()
            .unwrap()
            .values()
            .cloned()
            .collect()
    };
    assert_eq!(paths(&wazoo), paths(&zk), "dump's ephemerals");
    assert_eq!(
        get(&wazoo, "no_such_command")["error"],
        get(&zk, "no_such_command")["error"]
    );
}

// The same on an ensemble's leader and a follower (ZooKeeper 3.8 answers
// `leader`, `voting_view`, `zabstate` and `observers` there).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensemble_commands_answer_as_zookeeper_does() {
    let mut by_flavor = Vec::new();
    for flavor in [Flavor::Zookeeper, Flavor::Wazoo] {
        let e = start_ensemble(flavor, 3, common::options(flavor).admin_server())
            .unwrap_or_else(|err| panic!("cannot start a {flavor} ensemble: {err:#}"));
        let leader = e.wait_for_leader(Duration::from_secs(60)).unwrap();
        let follower = (leader + 1) % 3;
        let zk = scenario(e.addr(leader)).await;
        // Until the leader counts both followers synced.
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            let mntr = wazoo_testkit::four_letter_word(e.addr(leader), "mntr").unwrap_or_default();
            if mntr.contains("zk_synced_followers\t2") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let l = answers(e.admin_addr(leader).unwrap());
        let f = answers(e.admin_addr(follower).unwrap());
        for (all, i) in [(&l, leader), (&f, follower)] {
            let monitor = &all.iter().find(|(n, _)| *n == "monitor").unwrap().1;
            monitor_is_mntr(flavor, e.addr(i), monitor);
        }
        drop(zk);
        by_flavor.push((l, f));
    }
    let (zl, zf) = &by_flavor[0];
    let (wl, wf) = &by_flavor[1];
    compare("leader", zl, wl);
    compare("follower", zf, wf);
    for (role, z, w) in [("leader", zl, wl), ("follower", zf, wf)] {
        let get =
            |all: &[(&str, Value)], c: &str| all.iter().find(|(n, _)| *n == c).unwrap().1.clone();
        for (c, key) in [
            ("leader", "is_leader"),
            ("zabstate", "is_leader"),
            ("zabstate", "zabstate"),
            ("zabstate", "voting"),
            ("observers", "synced_observers"),
        ] {
            assert_eq!(get(w, c)[key], get(z, c)[key], "{role}: {c} {key}");
        }
        assert_eq!(
            get(w, "voting_view")["current_config"]
                .as_object()
                .unwrap()
                .len(),
            3,
            "{role}"
        );
    }
}

// The port's bounds (ZooKeeper Administrator's Guide, admin.idleTimeout):
// a connection that says nothing is closed after admin.idleTimeout; one
// connection over the 32 open at once is answered 503; a request head
// with too many headers is refused (431), never a crash.
#[test]
fn admin_port_is_bounded() {
    let server = Flavor::Wazoo
        .start_with(
            common::options(Flavor::Wazoo)
                .admin_server()
                .cfg("admin.idleTimeout=3000"),
        )
        .unwrap();
    let admin = server.admin_addr().unwrap();
    let held: Vec<TcpStream> = (0..32)
        .map(|_| TcpStream::connect(admin).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    // Read before writing: the answer comes unasked, and no request
    // bytes are left unread to reset the connection.
    let mut over = TcpStream::connect(admin).unwrap();
    over.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut answer = String::new();
    let _ = over.read_to_string(&mut answer);
    assert!(
        answer.starts_with("HTTP/1.1 503"),
        "one over the bound: {answer:?}"
    );
    drop(held);
    let deadline = Instant::now() + Duration::from_secs(10);
    while http(admin, "GET", "/commands/ruok").0 != 200 {
        assert!(Instant::now() < deadline, "room comes back");
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut idle = TcpStream::connect(admin).unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 16];
    let n = idle.read(&mut buf).unwrap_or(0);
    assert_eq!(n, 0, "an idle connection is closed without an answer");
    assert!(
        started.elapsed() < Duration::from_secs(9),
        "closed after {:?}",
        started.elapsed()
    );
    let headers: String = (0..200).map(|i| format!("h{i}: v\r\n")).collect();
    let (status, _) = http_raw(
        admin,
        format!("GET /commands/ruok HTTP/1.0\r\n{headers}\r\n").as_bytes(),
    );
    assert_eq!(status, 431);
    let (status, _) = http_raw(admin, b"\xff\xfe\xfd /\r\n\r\n");
    assert_eq!(status, 400);
    // Still serving.
    assert_eq!(command(admin, "ruok")["error"], Value::Null);
}

/// `GET /commands/snapshot` with an `Authorization` header.
fn snapshot(admin: SocketAddr, query: &str, auth: Option<&str>) -> (u16, String, Vec<u8>) {
    let auth = auth.map_or(String::new(), |a| format!("Authorization: {a}\r\n"));
    http_bytes(
        admin,
        format!("GET /commands/snapshot{query} HTTP/1.0\r\n{auth}\r\n").as_bytes(),
    )
}

/// `/kept` (holding `data`) and `/kept/child` (holding `c`), world-open.
async fn create_kept(zk: &zookeeper_client::Client, data: &[u8]) {
    let open = Acls::anyone_all();
    for (path, data) in [("/kept", data), ("/kept/child", b"c")] {
        zk.create(path, data, &CreateMode::Persistent.with_acls(open))
            .await
            .unwrap();
    }
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case(name))
        .map(|(_, v)| v.trim())
}

// ZooKeeper 3.9's snapshot command (Administrator's Guide, "The
// AdminServer", snapshot; admin.snapshot.enabled,
// admin.rateLimiterIntervalInMS): authorization by the Authorization
// header against the ACL of `/` with ZooKeeper's statuses and errors, one
// per interval (429), and the stream round-trips into a new member through
// `wazoo restore`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_streams_the_state_to_an_authorized_asker_and_restores_into_a_new_member() {
    let server = Flavor::Wazoo
        .start_with(common::options(Flavor::Wazoo).admin_server())
        .unwrap();
    let admin = server.admin_addr().unwrap();
    let zk = common::connect(&server.connect_string()).await;
    create_kept(&zk, b"kept").await;
    let error = |body: &[u8]| -> Value {
        let v: Value = serde_json::from_slice(body).unwrap();
        assert_eq!(v["command"], "snapshot", "{v}");
        v["error"].clone()
    };

    let (status, _, body) = snapshot(admin, "", None);
    assert_eq!(
        (status, error(&body)),
        (401, "Auth info is missing for the command".into())
    );
    for bad in ["x509", "digest", "digest a:b c", "sasl bob:pw"] {
        let (status, _, body) = snapshot(admin, "", Some(bad));
        assert_eq!(
            (status, error(&body)),
            (401, "Not authenticated".into()),
            "{bad}"
        );
    }
    // `/` open to the world (its default): any identity has every right.
    // Closed to all but one address, only the super user passes.
    let only = [Acl::new(Permission::ALL, AuthId::new("ip", "10.9.8.7"))];
    zk.set_acl("/", &only, None).await.unwrap();
    let (status, _, body) = snapshot(admin, "", Some("digest bob:pw"));
    assert_eq!((status, error(&body)), (403, "Not authorized".into()));
    let (status, _, body) = snapshot(admin, "", Some("ip"));
    assert_eq!((status, error(&body)), (403, "Not authorized".into()));

    let (status, head, bytes) = snapshot(admin, "?streaming=true", Some("digest super:test"));
    assert_eq!(status, 200, "{head}");
    assert_eq!(
        header(&head, "content-type"),
        Some("application/octet-stream")
    );
    assert_eq!(
        header(&head, "snapshot_size"),
        Some(bytes.len().to_string().as_str()),
        "{head}"
    );
    let zxid = header(&head, "last_zxid").expect("last_zxid").to_string();
    assert!(zxid.starts_with("0x"), "{zxid}");
    // One per admin.rateLimiterIntervalInMS (5 minutes by default).
    let (status, _, body) = snapshot(admin, "", Some("digest super:test"));
    assert_eq!((status, error(&body)), (429, Value::Null));
    // No temporary file is left behind.
    let leftovers: Vec<_> = std::fs::read_dir(server.data_dir().join("wazoo-v1"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains("admin-snapshot"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    // Into a new member.
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("snapshot");
    std::fs::write(&file, &bytes).unwrap();
    let data = work.path().join("data");
    let cfg = work.path().join("restore.cfg");
    std::fs::write(
        &cfg,
        format!(
            "tickTime=2000\ndataDir={}\nclientPort=2181\n",
            data.display()
        ),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_wazoo"))
        .args(["restore", "--from"])
        .arg(&file)
        .arg("--config")
        .arg(&cfg)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    drop(zk);
    let restored = Flavor::Wazoo
        .start_with(common::options(Flavor::Wazoo).cfg(format!("dataDir={}", data.display())))
        .unwrap();
    let zk2 = common::connect(&restored.connect_string()).await;
    let (data, _) = zk2.get_data("/kept/child").await.unwrap();
    assert_eq!(data, b"c");
    zk2.auth("digest", b"super:test").await.unwrap();
    let (acl, _) = zk2.get_acl("/").await.unwrap();
    assert_eq!(acl, only.to_vec(), "the ACL of / travels too");
    // It goes on from the snapshot's zxid (its sessions may expire since).
    let srvr = restored.four_letter("srvr").unwrap();
    let hex = |z: &str| u64::from_str_radix(z.trim_start_matches("0x"), 16).unwrap();
    let now = srvr
        .lines()
        .find_map(|l| l.strip_prefix("Zxid: "))
        .map(hex)
        .unwrap();
    assert!(now >= hex(&zxid), "{srvr} against {zxid}");
}

// admin.snapshot.enabled=false and admin.restore.enabled=false: each
// command answers 503, as ZooKeeper 3.9's, and the other is still served.
// (ZooKeeper 3.8, the oracle, has neither command: wazoo only.)
#[test]
fn snapshot_and_restore_can_be_turned_off() {
    let start = |off: &str| {
        let o = common::options(Flavor::Wazoo).admin_server().cfg(off);
        Flavor::Wazoo.start_with(o).unwrap()
    };
    let no_restore = start("admin.restore.enabled=false");
    let admin = no_restore.admin_addr().unwrap();
    let (status, _, snap) = snapshot(admin, "", Some("digest super:test"));
    assert_eq!(status, 200);
    let (status, v) = restore_json(admin, Some("digest super:test"), &snap);
    assert_eq!(status, 503, "{v}");
    assert!(
        v["error"].to_string().contains("admin.restore.enabled"),
        "{v}"
    );
    let no_snapshot = start("admin.snapshot.enabled=false");
    let admin = no_snapshot.admin_addr().unwrap();
    let (status, _, body) = snapshot(admin, "", Some("digest super:test"));
    assert_eq!(status, 503, "{}", String::from_utf8_lossy(&body));
    let (status, v) = restore_json(admin, Some("digest super:test"), &snap);
    assert_eq!(status, 200, "{v}");
}

// The restore command of ZooKeeper 3.9 (Administrator's Guide, "The
// AdminServer", restore/rest; admin.restore.enabled,
// admin.rateLimiterIntervalInMS). ZooKeeper 3.8, these tests' oracle, has
// no restore command, so they run against wazoo only.

/// `POST /commands/<name>` with `body` and an `Authorization` header.
fn restore_as(name: &str, admin: SocketAddr, auth: Option<&str>, body: &[u8]) -> (u16, String) {
    let auth = auth.map_or(String::new(), |a| format!("Authorization: {a}\r\n"));
    let mut req = format!(
        "POST /commands/{name} HTTP/1.0\r\n{auth}Content-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(body);
    http_raw(admin, &req)
}

/// `restore`; the JSON answer. (An error before the command runs names it
/// as asked, as ZooKeeper's does; its own answers by its primary name.)
fn restore_json(admin: SocketAddr, auth: Option<&str>, body: &[u8]) -> (u16, Value) {
    let (status, text) = restore_as("restore", admin, auth, body);
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{status} {e}: {text}"));
    assert_eq!(v["command"], "restore", "{v}");
    (status, v)
}

/// Every node under `/` but `/zookeeper`'s, with its data, in path order.
async fn tree_of(zk: &zookeeper_client::Client) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut todo = vec!["/".to_string()];
    while let Some(p) = todo.pop() {
        let (data, _) = zk.get_data(&p).await.unwrap();
        out.push((p.clone(), data));
        for c in zk.get_children(&p).await.unwrap().0 {
            let child = if p == "/" {
                format!("/{c}")
            } else {
                format!("{p}/{c}")
            };
            if child != "/zookeeper" {
                todo.push(child);
            }
        }
    }
    out.sort();
    out
}

// restore/rest: a snapshot streamed by `snapshot` puts its tree back,
// answering last_zxid (here the zxid the restore was applied at); a
// restart serves the restored tree. Refused, with the tree unchanged and
// the member serving: no or bad credentials (401), an identity without
// every right on `/` (403), a second restore within the interval (429),
// no body (400), a body cut short (400), garbage (500, ZooKeeper's status
// for a failed restore), a body over the bound (413, naming it), and GET.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restore_puts_back_a_streamed_snapshot_and_refuses_bad_requests() {
    let mut server = Flavor::Wazoo
        .start_with(
            common::options(Flavor::Wazoo)
                .admin_server()
                .cfg("admin.rateLimiterIntervalInMS=1500")
                .cfg("admin.idleTimeout=2000"),
        )
        .unwrap();
    let admin = server.admin_addr().unwrap();
    // The super user reads every node, whatever the ACL of `/` says.
    let connect = || async {
        let zk = common::connect(&server.connect_string()).await;
        zk.auth("digest", b"super:test").await.unwrap();
        zk
    };
    let zk = connect().await;
    let open = Acls::anyone_all();
    create_kept(&zk, b"v1").await;
    let only = [Acl::new(Permission::ALL, AuthId::new("ip", "10.9.8.7"))];
    zk.set_acl("/", &only, None).await.unwrap();
    let (status, head, snap) = snapshot(admin, "", Some("digest super:test"));
    assert_eq!(status, 200, "{head}");
    let hex = |z: &str| i64::from_str_radix(z.trim_start_matches("0x"), 16).unwrap();
    let snap_zxid = hex(header(&head, "last_zxid").unwrap());
    let before = tree_of(&zk).await;

    // Changes the restore is to undo.
    zk.set_data("/kept", b"v2", None).await.unwrap();
    zk.delete("/kept/child", None).await.unwrap();
    zk.create("/added", b"a", &CreateMode::Persistent.with_acls(open))
        .await
        .unwrap();
    let changed = tree_of(&zk).await;
    assert_ne!(changed, before);

    let super_ = Some("digest super:test");
    let (status, v) = restore_json(admin, None, &snap);
    assert_eq!(
        (status, v["error"].clone()),
        (401, "Auth info is missing for the command".into())
    );
    let (status, v) = restore_json(admin, Some("digest"), &snap);
    assert_eq!(
        (status, v["error"].clone()),
        (401, "Not authenticated".into())
    );
    for who in ["digest super:wrong", "ip"] {
        let (status, v) = restore_json(admin, Some(who), &snap);
        assert_eq!(
            (status, v["error"].clone()),
            (403, "Not authorized".into()),
            "{who}"
        );
    }
    let (status, v) = restore_json(admin, super_, b"");
    assert_eq!(status, 400, "{v}");
    // Garbage: checked before anything changes.
    let garbage: Vec<u8> = (0..50_000u32).map(|i| (i * 7919 % 251) as u8).collect();
    let (status, v) = restore_json(admin, super_, &garbage);
    assert_eq!(status, 500, "{v}");
    assert!(
        v["error"].to_string().contains("not a wazoo snapshot"),
        "{v}"
    );
    // A snapshot with one byte changed fails its checksum.
    let mut flipped = snap.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x40;
    std::thread::sleep(Duration::from_millis(1600));
    let (status, v) = restore_json(admin, super_, &flipped);
    assert_eq!(status, 500, "{v}");
    // A body cut short: the client stops sending and closes its side.
    let mut s = TcpStream::connect(admin).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let head = format!(
        "POST /commands/restore HTTP/1.0\r\nAuthorization: digest super:test\r\nContent-Length: {}\r\n\r\n",
        snap.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(&snap[..snap.len() / 2]).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    // A body that stalls: admin.idleTimeout, then 408; others are served
    // meanwhile.
    let mut stalled = TcpStream::connect(admin).unwrap();
    stalled
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stalled.write_all(head.as_bytes()).unwrap();
    stalled.write_all(&snap[..10]).unwrap();
    assert_eq!(command(admin, "ruok")["error"], Value::Null);
    let mut answer = String::new();
    let _ = stalled.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    // Over the bound: refused before it is read, naming the bound.
    let (status, text) = http_raw(
        admin,
        format!(
            "POST /commands/restore HTTP/1.0\r\nAuthorization: digest super:test\r\nContent-Length: {}\r\n\r\nWZSN",
            15 * 1024 * 1024 + 1
        )
        .as_bytes(),
    );
    assert_eq!(status, 413, "{text}");
    assert!(text.contains(&(15 * 1024 * 1024).to_string()), "{text}");
    assert_eq!(
        http(admin, "GET", "/commands/restore").0,
        400,
        "GET (HTTP/1.0)"
    );
    // Nothing changed, and the member serves.
    assert_eq!(tree_of(&zk).await, changed);
    assert!(std::fs::read_dir(server.data_dir().join("wazoo-v1"))
        .unwrap()
        .filter_map(|e| e.ok())
        .all(|e| !e.file_name().to_string_lossy().starts_with("admin-restore")));

    std::thread::sleep(Duration::from_millis(1600));
    let (status, text) = restore_as("rest", admin, super_, &snap);
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        v["command"], "restore",
        "its primary name, asked by its alias"
    );
    assert_eq!(v["error"], Value::Null);
    let last = v["last_zxid"]
        .as_i64()
        .expect("last_zxid, a number as ZooKeeper's");
    assert!(last > snap_zxid, "{last:x} after {snap_zxid:x}");
    // One per interval.
    let (status, v) = restore_json(admin, super_, &snap);
    assert_eq!((status, v["error"].clone()), (429, Value::Null));

    // Every connection was closed, and the snapshot did not hold the
    // session: a new one sees the snapshot's tree.
    drop(zk);
    let zk = connect().await;
    assert_eq!(tree_of(&zk).await, before);
    // It goes on after the restore's zxid, not back from the snapshot's.
    let srvr = server.four_letter("srvr").unwrap();
    let now = srvr.lines().find_map(|l| l.strip_prefix("Zxid: ")).map(hex);
    assert!(now.is_some_and(|z| z > last), "{srvr}: after 0x{last:x}");
    drop(zk);
    server.kill();
    server.restart().unwrap();
    let zk = common::connect(&server.connect_string()).await;
    zk.auth("digest", b"super:test").await.unwrap();
    assert_eq!(tree_of(&zk).await, before, "after a restart");
}

// A restore through one member of an ensemble reaches every member (a
// divergence from ZooKeeper 3.9, which restores the asked server only:
// docs/COMPATIBILITY.md, "The AdminServer"): each serves the restored
// tree and `hash` shows the same digest at the restore's zxid on all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_through_one_member_restores_every_member() {
    let e = start_ensemble(
        Flavor::Wazoo,
        3,
        common::ensemble_options(Flavor::Wazoo).admin_server(),
    )
    .unwrap();
    let leader = e.wait_for_leader(Duration::from_secs(30)).unwrap();
    let follower = (0..3).find(|&i| i != leader).unwrap();
    let zk = common::connect(&e.connect_string()).await;
    let open = Acls::anyone_all();
    create_kept(&zk, b"v1").await;
    // `/` is world-open: the `ip` identity has every right on it.
    let (status, head, snap) = snapshot(e.admin_addr(leader).unwrap(), "", Some("ip"));
    assert_eq!(status, 200, "{head}");
    let before = tree_of(&zk).await;
    zk.set_data("/kept", b"v2", None).await.unwrap();
    zk.create("/added", b"a", &CreateMode::Persistent.with_acls(open))
        .await
        .unwrap();
    drop(zk);

    let (status, v) = restore_json(e.admin_addr(follower).unwrap(), Some("ip"), &snap);
    assert_eq!(status, 200, "{v}");
    let last = v["last_zxid"].as_i64().unwrap();
    let mut digests = Vec::new();
    for i in 0..3 {
        let deadline = Instant::now() + Duration::from_secs(20);
        let digest = loop {
            let hash = command(e.admin_addr(i).unwrap(), "hash");
            let found = hash["digests"]
                .as_array()
                .unwrap()
                .iter()
                .find(|d| d["zxid"].as_i64() == Some(last))
                .map(|d| d["digest"].clone());
            match found {
                Some(d) => break d,
                None if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
                None => panic!("member {i} shows no digest at 0x{last:x}: {hash}"),
            }
        };
        digests.push(digest);
        let zk = common::connect(&e.addr(i).to_string()).await;
        zk.sync("/").await.unwrap();
        assert_eq!(tree_of(&zk).await, before, "member {i}");
    }
    assert!(digests.iter().all(|d| *d == digests[0]), "{digests:?}");
}

/// Runs curl against `url` on `admin` (as localhost), trusting `ca`;
/// returns whether it got an answer, and the answer with its head.
fn curl(admin: SocketAddr, scheme: &str, ca: &std::path::Path) -> (bool, String) {
    let url = format!("{scheme}://localhost:{}/commands/ruok", admin.port());
    let out = Command::new("curl")
        .args(["-sS", "-i", "--max-time", "10", "--cacert"])
        .arg(ca)
        .arg("--resolve")
        .arg(format!("localhost:{}:127.0.0.1", admin.port()))
        .arg(&url)
        .output()
        .expect("curl runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

// ZooKeeper Administrator's Guide, admin.forceHttps and
// admin.portUnification: the AdminServer over TLS with the ssl.quorum key
// store's certificate, HTTPS only or beside plain HTTP on the one port.
#[test]
fn the_admin_port_serves_tls_with_the_quorum_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let key = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let cert = dir.path().join("cert.pem");
    std::fs::write(&cert, key.cert.pem()).unwrap();
    let store = dir.path().join("admin.pem");
    std::fs::write(
        &store,
        format!("{}{}", key.signing_key.serialize_pem(), key.cert.pem()),
    )
    .unwrap();
    for (mode, plain_served) in [("admin.forceHttps", false), ("admin.portUnification", true)] {
        let server = Flavor::Wazoo
            .start_with(
                common::options(Flavor::Wazoo)
                    .admin_server()
                    .cfg(format!("{mode}=true"))
                    .cfg(format!("ssl.quorum.keyStore.location={}", store.display()))
                    .cfg("ssl.quorum.keyStore.type=PEM"),
            )
            .unwrap_or_else(|e| panic!("{mode}: {e:#}"));
        let admin = server.admin_addr().unwrap();
        let (ok, answer) = curl(admin, "https", &cert);
        assert!(ok, "{mode}: https: {answer}");
        assert!(answer.starts_with("HTTP/1.1 200"), "{mode}: {answer}");
        assert!(answer.contains("\"command\": \"ruok\""), "{mode}: {answer}");
        assert!(
            answer.contains("Strict-Transport-Security: max-age=86400; includeSubDomains"),
            "{mode}: {answer}"
        );
        let (ok, answer) = curl(admin, "http", &cert);
        assert_eq!(ok, plain_served, "{mode}: plain http: {answer}");
        if plain_served {
            assert!(answer.starts_with("HTTP/1.1 200"), "{mode}: {answer}");
            assert!(!answer.contains("Strict-Transport-Security"), "{answer}");
        }
    }
}

// A snapshot's temporary file that a stopped member did not finish sending
// does not stay in the snapshot directory: the next start removes it.
#[test]
fn an_unfinished_snapshot_file_is_removed_at_start() {
    let mut server = Flavor::Wazoo
        .start_with(common::options(Flavor::Wazoo).admin_server())
        .unwrap();
    let dir = server.data_dir().join("wazoo-v1");
    let leftover = dir.join("admin-snapshot-1-0.partial");
    std::fs::write(&leftover, b"half a snapshot").unwrap();
    let unrelated = dir.join("notes.partial");
    std::fs::write(&unrelated, b"not ours").unwrap();
    server.kill();
    server.restart().unwrap();
    assert!(!leftover.exists());
    assert!(unrelated.exists());
}

/// A test CA, and a certificate it issues for `cn` (PEM files in `dir`:
/// `<name>.crt`, `<name>.key`, and both in `<name>.pem`).
fn issue(
    dir: &std::path::Path,
    ca: &rcgen::CertifiedIssuer<'static, rcgen::KeyPair>,
    name: &str,
    cn: &str,
) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    use rcgen::{CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, KeyPair};
    let mut p = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    p.distinguished_name = DistinguishedName::new();
    p.distinguished_name.push(DnType::CommonName, cn);
    p.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    let key = KeyPair::generate().unwrap();
    let cert = p.signed_by(&key, ca).unwrap();
    let (crt, k, pem) = (
        dir.join(format!("{name}.crt")),
        dir.join(format!("{name}.key")),
        dir.join(format!("{name}.pem")),
    );
    std::fs::write(&crt, cert.pem()).unwrap();
    std::fs::write(&k, key.serialize_pem()).unwrap();
    std::fs::write(&pem, format!("{}{}", key.serialize_pem(), cert.pem())).unwrap();
    (crt, k, pem)
}

/// curl `path` over HTTPS with a client certificate (if any) and headers.
fn curl_tls(
    admin: SocketAddr,
    path: &str,
    ca: &std::path::Path,
    client: Option<(&std::path::Path, &std::path::Path)>,
    headers: &[&str],
) -> (bool, String) {
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "-i", "--max-time", "10", "--cacert"])
        .arg(ca)
        .arg("--resolve")
        .arg(format!("localhost:{}:127.0.0.1", admin.port()));
    if let Some((crt, key)) = client {
        cmd.arg("--cert").arg(crt).arg("--key").arg(key);
    }
    for h in headers {
        cmd.args(["-H", h]);
    }
    let out = cmd
        .arg(format!("https://localhost:{}{path}", admin.port()))
        .output()
        .expect("curl runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

// ZooKeeper 3.9's admin.needClientAuth: a client must present a
// certificate the ssl.quorum trust store accepts; its subject is the x509
// identity `Authorization: x509` gives the snapshot command, checked
// against the ACL of `/` as any identity.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificates_are_required_and_give_the_x509_identity() {
    use rcgen::{BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, KeyPair};
    let dir = tempfile::tempdir().unwrap();
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name = DistinguishedName::new();
    p.distinguished_name
        .push(DnType::CommonName, "admin-test-ca");
    let ca = rcgen::CertifiedIssuer::self_signed(p, KeyPair::generate().unwrap()).unwrap();
    let ca_pem = dir.path().join("ca.pem");
    std::fs::write(&ca_pem, ca.pem()).unwrap();
    let (_, _, server_pem) = issue(dir.path(), &ca, "server", "member");
    let (client_crt, client_key, _) = issue(dir.path(), &ca, "client", "operator");
    let server = Flavor::Wazoo
        .start_with(
            common::options(Flavor::Wazoo)
                .admin_server()
                .cfg("admin.forceHttps=true")
                .cfg("admin.needClientAuth=true")
                .cfg(format!(
                    "ssl.quorum.keyStore.location={}",
                    server_pem.display()
                ))
                .cfg("ssl.quorum.keyStore.type=PEM")
                .cfg(format!(
                    "ssl.quorum.trustStore.location={}",
                    ca_pem.display()
                ))
                .cfg("ssl.quorum.trustStore.type=PEM"),
        )
        .unwrap();
    let admin = server.admin_addr().unwrap();
    let client = Some((client_crt.as_path(), client_key.as_path()));
    let (ok, answer) = curl_tls(admin, "/commands/ruok", &ca_pem, None, &[]);
    assert!(
        !ok || !answer.contains("HTTP/1.1 200"),
        "no certificate: {answer}"
    );
    let (ok, answer) = curl_tls(admin, "/commands/ruok", &ca_pem, client, &[]);
    assert!(ok && answer.starts_with("HTTP/1.1 200"), "{answer}");

    let snap = "/commands/snapshot?streaming=false";
    let (_, answer) = curl_tls(admin, snap, &ca_pem, client, &["Authorization: x509"]);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("snapshot_size: "), "{answer}");
    // `/` closed to that identity: it is not authorized.
    let zk = common::connect(&server.connect_string()).await;
    let only = [Acl::new(Permission::ALL, AuthId::new("ip", "10.9.8.7"))];
    zk.set_acl("/", &only, None).await.unwrap();
    let (_, answer) = curl_tls(admin, snap, &ca_pem, client, &["Authorization: x509"]);
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    assert!(answer.contains("Not authorized"), "{answer}");
}

// ZooKeeper Administrator's Guide, "The AdminServer": it is on by default;
// a standalone server whose AdminServer cannot start does not start
// ("Unable to start AdminServer, exiting abnormally"), while a member of
// an ensemble serves without it ("Problem starting AdminServer").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_admin_port_stops_a_standalone_server_but_not_an_ensemble_member() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    for flavor in [Flavor::Zookeeper, Flavor::Wazoo] {
        let standalone = flavor.start_with(
            common::options(flavor)
                .admin_server()
                .cfg(format!("admin.serverPort={port}"))
                .startup_timeout(Duration::from_secs(20)),
        );
        assert!(
            standalone.is_err(),
            "{flavor}: a standalone server started with its AdminServer's port taken"
        );
        let e = start_ensemble(
            flavor,
            3,
            common::ensemble_options(flavor)
                .admin_server()
                .cfg(format!("admin.serverPort={port}")),
        )
        .unwrap_or_else(|err| panic!("{flavor}: the ensemble did not start: {err:#}"));
        e.wait_for_leader(Duration::from_secs(30)).unwrap();
        let zk = common::connect(&e.connect_string()).await;
        zk.create(
            "/served",
            b"",
            &CreateMode::Persistent.with_acls(Acls::anyone_all()),
        )
        .await
        .unwrap_or_else(|err| panic!("{flavor}: {err}"));
    }
    drop(taken);
}
