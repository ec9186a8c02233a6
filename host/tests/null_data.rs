//! Null data (ZooKeeper Programmer's Guide, "ZooKeeper Data Model": a
//! znode's data may be null, and ZooKeeper keeps it null, apart from empty
//! data): a node created or set with a null buffer (length -1) reads back
//! as null, through ZooKeeper's C client (libzookeeper-mt, compiled with cc
//! at test time: `zoo_get` gives buffer_len -1) and its Java client
//! (zookeeper.jar, compiled with javac: `getData` returns null), and after
//! a restart that loads a snapshot and replays the log, and in a member
//! that lost its files and syncs from the leader. Every test runs
//! against Apache ZooKeeper 3.8 and wazoo and expects the same answers.
//! (kazoo's tests are in tests/python/test_null_data_kazoo.py.)

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use wazoo_proto::Request;
use wazoo_testkit::{Flavor, TestEnsemble, WazooEnsemble, ZkEnsemble};

/// The jars ZooKeeper's Java client runs with (Debian's `zookeeper`
/// package and its dependencies).
const JAVA_CLASSPATH: &[&str] = &[
    "/usr/share/java/zookeeper.jar",
    "/usr/share/java/zookeeper-jute.jar",
    "/usr/share/java/slf4j-api.jar",
    "/usr/share/java/slf4j-nop.jar",
];

/// Runs `tests/c_client/null_data.c` against `hosts` under `base`: its
/// lines. Panics if it fails.
fn c_client(dir: &Path, hosts: &str, base: &str) -> Vec<String> {
    let bin = common::compile_c_client(dir, "null_data");
    let out = Command::new("timeout")
        .arg("60")
        .arg(&bin)
        .args([hosts, base])
        .output()
        .expect("the C client runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "the C client: {stdout}");
    stdout.lines().map(str::to_string).collect()
}

/// ZooKeeper's C client: `zoo_create` and `zoo_set` with a NULL value of
/// length -1 (alone and in `zoo_multi`) leave null data, which `zoo_get`
/// reports as buffer_len -1; empty data is buffer_len 0.
async fn the_c_client_reads_null_data_as_length_minus_one(flavor: Flavor) {
    let hosts = common::shared(flavor);
    let dir = tempfile::tempdir().unwrap();
    let lines = tokio::task::spawn_blocking(move || c_client(dir.path(), &hosts, "/null-data-c"))
        .await
        .unwrap();
    assert_eq!(
        lines,
        [
            "create base: ok",
            "create null: ok",
            "get null: ok len -1 dataLength 0",
            "create empty: ok",
            "get empty: ok len 0 dataLength 0",
            "set x: ok",
            "get x: ok len 1 dataLength 1",
            "set null: ok",
            "get set null: ok len -1 dataLength 0",
            "multi create null, set null: ok",
            "get multi create: ok len -1 dataLength 0",
            "get multi set: ok len -1 dataLength 0",
            "get /zookeeper: ok len 0 dataLength 0",
        ],
        "{flavor}"
    );
}

/// ZooKeeper's Java client: `create` and `setData` with null data (alone
/// and in `multi`) leave null data, which `getData` returns as null (and
/// a multi's `GetDataResult` too); empty data is `byte[0]`.
async fn the_java_client_reads_null_data_as_null(flavor: Flavor) {
    let hosts = common::shared(flavor);
    let dir = tempfile::tempdir().unwrap();
    let lines = tokio::task::spawn_blocking(move || {
        common::run_java(
            dir.path(),
            "NullData",
            JAVA_CLASSPATH,
            &[&hosts, "/null-data-java"],
        )
    })
    .await
    .unwrap();
    assert_eq!(
        lines,
        [
            "create2 null: dataLength 0",
            "get null: null, dataLength 0",
            "get empty: bytes 0, dataLength 0",
            "get x: bytes 1, dataLength 1",
            "set null: dataLength 0",
            "get set null: null, dataLength 0",
            "get multi create: null, dataLength 0",
            "get multi set: null, dataLength 0",
            "multi read: null, dataLength 0",
            "multi read: bytes 0, dataLength 0",
            "get /zookeeper: bytes 0, dataLength 0",
        ],
        "{flavor}"
    );
}

/// Null data survives a restart (kill -9) that loads the newest snapshot,
/// taken after the first null node, and replays the log after it, which
/// holds the rest: the server's own files keep null apart from empty.
async fn null_data_survives_a_restart(flavor: Flavor) {
    let opts = common::options(flavor).cfg("snapCount=10");
    let mut server = flavor
        .start_with(opts)
        .unwrap_or_else(|e| panic!("cannot start {flavor}: {e:#}"));
    let addr = server.addr();
    let mut writes = vec![
        common::raw_create("/snapped-null", None),
        common::raw_create("/snapped-empty", Some(b"")),
    ];
    // Enough writes for snapshots after the nodes above.
    for i in 0..40 {
        writes.push(common::raw_create(&format!("/filler{i}"), Some(b"f")));
    }
    writes.extend([
        common::raw_create("/logged-null", None),
        Request::SetData {
            path: "/snapped-empty".into(),
            data: None,
            version: -1,
        },
        common::raw_create("/logged-empty", Some(b"")),
    ]);
    common::raw_writes(addr, &writes);
    server
        .restart()
        .unwrap_or_else(|e| panic!("{flavor} does not restart: {e:#}"));
    let data = common::raw_data(
        server.addr(),
        &[
            "/snapped-null",
            "/snapped-empty",
            "/logged-null",
            "/logged-empty",
        ],
    );
    assert_eq!(data, [None, None, None, Some(Vec::new())], "{flavor}");
}

/// A member that lost its files syncs null data from the leader: every
/// member first restarts from a snapshot holding the nodes (so a wazoo
/// leader's history starts after them and it sends the empty member a
/// SNAP, ZooKeeper Internals, "Atomic Broadcast"), then one follower
/// starts with nothing.
fn a_member_without_files_syncs_null_data<E: TestEnsemble>(
    e: &mut E,
    files: impl Fn(&E, usize) -> PathBuf,
) {
    let wait = Duration::from_secs(60);
    let leader = e.wait_for_leader(wait).expect("a leader");
    let mut writes = vec![
        common::raw_create("/ens-null", None),
        common::raw_create("/ens-empty", Some(b"")),
    ];
    for i in 0..30 {
        writes.push(common::raw_create(&format!("/ens-filler{i}"), Some(b"f")));
    }
    common::raw_writes(e.addr(leader), &writes);
    for i in 0..e.len() {
        e.kill(i);
        e.restart(i).expect("a member restarts");
    }
    let leader = e
        .wait_for_leader(wait)
        .expect("a leader after the restarts");
    let lost = (leader + 1) % e.len();
    e.kill(lost);
    std::fs::remove_dir_all(files(e, lost)).expect("the member's files are removed");
    e.restart(lost).expect("the member restarts empty");
    for i in 0..e.len() {
        // A member may refuse sessions a moment longer than its `srvr`
        // says it serves (still syncing); a bounded wait, not a failure.
        let deadline = std::time::Instant::now() + wait;
        while common::raw_session(e.addr(i)).is_none() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        assert_eq!(
            common::raw_data(e.addr(i), &["/ens-null", "/ens-empty"]),
            [None, Some(Vec::new())],
            "member {i} (leader {leader}, emptied {lost})"
        );
    }
}

async fn a_member_without_files_syncs_null_data_from_the_leader(flavor: Flavor) {
    let opts = common::ensemble_options(flavor).cfg("snapCount=10");
    tokio::task::spawn_blocking(move || match flavor {
        Flavor::Wazoo => {
            let mut e = WazooEnsemble::start(3, opts).expect("a wazoo ensemble");
            a_member_without_files_syncs_null_data(&mut e, |e, i| e.data_dir(i).join("wazoo-v1"));
        }
        Flavor::Zookeeper => {
            let mut e = ZkEnsemble::start_with(3, opts).expect("a ZooKeeper ensemble");
            a_member_without_files_syncs_null_data(&mut e, |e, i| e.data_dir(i).join("version-2"));
        }
    })
    .await
    .unwrap();
}

on_both! {
    the_c_client_reads_null_data_as_length_minus_one,
    the_java_client_reads_null_data_as_null,
    null_data_survives_a_restart,
    a_member_without_files_syncs_null_data_from_the_leader,
}
