//! `kill -9` at any moment loses no acknowledged write (docs/ARCHITECTURE.md,
//! "Durability and recovery"),
//! and recovery (snapshot + log replay) brings back the same tree. Run
//! against Apache ZooKeeper too, which makes the same promise.

mod common;

use std::time::Duration;

use common::{connect, start};
use wazoo_testkit::{Flavor, TestServer};
use zookeeper_client::{Acls, CreateMode};

/// Writers create nodes as fast as they can; the server is killed while
/// they run; after a restart every acknowledged create must be there.
async fn acknowledged_writes_survive_kill_9(flavor: Flavor, rounds: usize) {
    let mut server: Box<dyn TestServer> = start(flavor);
    let hosts = server.connect_string();
    common::create_persistent(&hosts, "/dur").await;
    let mut acked: Vec<String> = Vec::new();
    for round in 0..rounds {
        // Each writer stops at its first failure (the kill).
        let writers =
            common::Writers::start(&hosts, "/dur", &format!("r{round}-"), 4, usize::MAX, true);
        // Let some writes land, then pull the plug mid-stream.
        tokio::time::sleep(Duration::from_millis(300 + 170 * round as u64)).await;
        server.kill();
        acked.extend(writers.finish().await);
        server.restart().unwrap();
        let zk = connect(&hosts).await;
        let acked_now = acked.clone();
        assert!(!acked_now.is_empty(), "some writes were acknowledged");
        let mut missing = Vec::new();
        for p in &acked_now {
            if zk.check_stat(p).await.unwrap().is_none() {
                missing.push(p.clone());
            }
        }
        assert!(
            missing.is_empty(),
            "{flavor}: {} of {} acknowledged creates lost after kill -9 in round {round}: {:?}",
            missing.len(),
            acked_now.len(),
            &missing[..missing.len().min(5)]
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wazoo_loses_no_acknowledged_write_on_kill_9() {
    acknowledged_writes_survive_kill_9(Flavor::Wazoo, 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_loses_no_acknowledged_write_on_kill_9() {
    acknowledged_writes_survive_kill_9(Flavor::Zookeeper, 1).await;
}

/// Sessions and their ephemerals are part of the durable state: a session
/// that re-attaches after a restart finds its ephemeral node.
async fn sessions_survive_a_restart(flavor: Flavor) {
    let mut server: Box<dyn TestServer> = start(flavor);
    let hosts = server.connect_string();
    let zk = zookeeper_client::Client::connector()
        .with_session_timeout(Duration::from_secs(30))
        .connect(&hosts)
        .await
        .unwrap();
    zk.create(
        "/e",
        b"",
        &CreateMode::Ephemeral.with_acls(Acls::anyone_all()),
    )
    .await
    .unwrap();
    let session = zk.session().clone();
    drop(zk);
    // The close above may or may not reach the server before the kill; use
    // a session that we keep open instead.
    // Detached: dropping this client must not close the session.
    let keeper = zookeeper_client::Client::connector()
        .with_detached()
        .with_session_timeout(Duration::from_secs(30))
        .connect(&hosts)
        .await
        .unwrap();
    keeper
        .create(
            "/kept",
            b"",
            &CreateMode::Ephemeral.with_acls(Acls::anyone_all()),
        )
        .await
        .unwrap();
    let kept_session = keeper.session().clone();
    let _ = session;
    server.kill();
    drop(keeper);
    server.restart().unwrap();
    let back = zookeeper_client::Client::connector()
        .with_session(kept_session)
        .with_session_timeout(Duration::from_secs(30))
        .connect(&hosts)
        .await
        .unwrap();
    // A connection lost right after the re-attach (ZooKeeper 3.8 has
    // dropped one under load here) is retried, as a client would: the
    // session, not the connection, is what must survive.
    let mut kept = None;
    for _ in 0..5 {
        match back.check_stat("/kept").await {
            Err(zookeeper_client::Error::ConnectionLoss) => {
                tokio::time::sleep(Duration::from_millis(200)).await
            }
            other => {
                kept = Some(other.unwrap());
                break;
            }
        }
    }
    let kept = kept.unwrap_or_else(|| panic!("{flavor}: the connection kept being lost"));
    assert!(kept.is_some(), "{flavor}: ephemeral kept with its session");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wazoo_sessions_survive_a_restart() {
    sessions_survive_a_restart(Flavor::Wazoo).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_sessions_survive_a_restart() {
    sessions_survive_a_restart(Flavor::Zookeeper).await;
}

/// Segment files (`log.<hex zxid>`) anywhere under `dir`, sorted by name:
/// wazoo keeps them in `<dataLogDir>/wazoo-v1/`.
fn wazoo_log_segments(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                pending.push(path);
            } else if name.starts_with("log.") {
                found.push(path);
            }
        }
    }
    found.sort_by_key(|p| p.file_name().unwrap().to_owned());
    found
}

/// Offset of the last record of a wazoo log segment and its body length
/// (the segment grammar of the storage crate: an 8-byte file header, then
/// records of a 16-byte header, whose first field is the body length as a
/// big-endian u32, and the body).
fn last_record(bytes: &[u8]) -> Option<(usize, usize)> {
    let mut at = 8;
    let mut last = None;
    while at + 16 <= bytes.len() {
        let len = u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        if at + 16 + len > bytes.len() {
            break;
        }
        last = Some((at, len));
        at += 16 + len;
    }
    last
}

/// Restarts `server`, which must exit by itself with a failure status
/// (`what` says why); returns the start's error message.
fn restart_refused(server: &mut dyn TestServer, what: &str) -> String {
    let flavor = server.flavor();
    let err = server.restart().expect_err(what);
    let msg = format!("{err:#}");
    assert!(
        msg.contains("exited (") && !msg.contains("exit status: 0)"),
        "{flavor} exited by itself, with a failure status: {msg}"
    );
    msg
}

/// The newest of Apache ZooKeeper's log files (`log.<hex zxid>`) under `dir`.
fn zookeeper_newest_log(dir: &std::path::Path) -> std::path::PathBuf {
    wazoo_log_segments(dir)
        .into_iter()
        .max_by_key(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            u64::from_str_radix(&name[4..], 16).unwrap_or(0)
        })
        .expect("ZooKeeper wrote a log file")
}

/// (offset, length) of each record of an Apache ZooKeeper log file: after a
/// 16-byte file header, an 8-byte CRC, a 4-byte length, the txn and an
/// end-of-record byte 'B'; a length of 0 (preallocated zero fill) ends it.
fn zookeeper_records(bytes: &[u8]) -> Vec<(usize, usize)> {
    let mut at = 16;
    let mut records = Vec::new();
    while at + 12 <= bytes.len() {
        let len = u32::from_be_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        if len == 0 || at + 12 + len + 1 > bytes.len() {
            break;
        }
        records.push((at, 12 + len + 1));
        at += 12 + len + 1;
    }
    records
}

/// A member whose last log record (complete, fsynced, acknowledged) has a
/// flipped bit must not start as if the record were a torn write: cutting it
/// would lose an acknowledged write. Apache ZooKeeper refuses to start on
/// such a record ("CRC check failed"); wazoo exits non-zero with a message
/// that names the corruption and says what to do, and leaves the file as it
/// found it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wazoo_refuses_to_start_on_a_flipped_bit_in_its_last_log_record() {
    let mut server: Box<dyn TestServer> = start(Flavor::Wazoo);
    let hosts = server.connect_string();
    for i in 0..5 {
        common::create_persistent(&hosts, &format!("/flip{i}")).await;
    }
    // Every create above was acknowledged, so it is fsynced in the log.
    server.kill();
    let segments = wazoo_log_segments(&server.data_dir());
    let newest = segments.last().expect("wazoo wrote a log segment");
    let mut bytes = std::fs::read(newest).unwrap();
    let (at, len) = last_record(&bytes).expect("the newest segment holds a record");
    assert!(len > 0, "the last record has a body");
    bytes[at + 16 + len / 2] ^= 0x10;
    std::fs::write(newest, &bytes).unwrap();

    let msg = restart_refused(&mut *server, "wazoo must not start on a corrupt log record");
    for needle in [
        "transaction log is corrupt",
        "checksum mismatch",
        "refuses to start",
        "resyncs from the other members",
    ] {
        assert!(msg.contains(needle), "message mentions {needle:?}: {msg}");
    }
    let name = newest.file_name().unwrap().to_string_lossy().into_owned();
    assert!(msg.contains(&name), "message names {name}: {msg}");
    assert!(!server.is_running());
    assert_eq!(
        std::fs::read(newest).unwrap(),
        bytes,
        "the corrupt segment is left as it was, for the operator"
    );
}

/// The same damage to Apache ZooKeeper's log, to check the behavior wazoo
/// copies: ZooKeeper 3.8 does not start ("CRC check failed"). Its segment
/// format: a 16-byte file header, then records of an 8-byte CRC, a 4-byte
/// length, the txn and an end-of-record byte 'B', then the zero fill of
/// preallocation (a length of 0 ends the log).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_refuses_to_start_on_a_flipped_bit_in_its_last_log_record() {
    let mut server: Box<dyn TestServer> = start(Flavor::Zookeeper);
    let hosts = server.connect_string();
    for i in 0..5 {
        common::create_persistent(&hosts, &format!("/flip{i}")).await;
    }
    server.kill();
    let newest = zookeeper_newest_log(&server.data_dir());
    let mut bytes = std::fs::read(&newest).unwrap();
    let &(at, frame) = zookeeper_records(&bytes)
        .last()
        .expect("the log holds a record");
    let len = frame - 13;
    bytes[at + 12 + len / 2] ^= 0x10;
    std::fs::write(&newest, &bytes).unwrap();

    let msg = restart_refused(
        &mut *server,
        "ZooKeeper does not start on a corrupt log record",
    );
    assert!(msg.contains("CRC check failed"), "{msg}");
}

/// Seeded garbage, so a failure reproduces.
fn garbage(seed: u64, len: usize) -> Vec<u8> {
    common::Rng::new(seed).bytes(len)
}

/// Start offsets of the records of a wazoo log segment (same grammar as
/// [`last_record`]).
fn wazoo_record_offsets(bytes: &[u8]) -> Vec<usize> {
    let mut at = 8;
    let mut offsets = Vec::new();
    while at + 16 <= bytes.len() {
        let len = u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        offsets.push(at);
        at += 16 + len;
    }
    offsets
}

/// Random bytes over the last 3 records of the log (acknowledged creates,
/// fsynced) are not a torn write: wazoo refuses to start, naming the file,
/// the offset and the way to accept the loss; started once with
/// `--truncate-corrupt-log-tail` it cuts the log there and serves every
/// write before the damage. ZooKeeper refuses to start on the same damage
/// (below). Administrator's Guide, "Data File Management": the transaction
/// log is what makes a write durable before it is acknowledged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wazoo_refuses_garbage_over_its_last_log_records_until_the_operator_accepts_the_loss() {
    let mut server =
        wazoo_testkit::WazooServer::start(common::options(Flavor::Wazoo)).expect("wazoo starts");
    let hosts = server.connect_string();
    // One session, kept open across the kill, so that the last records of
    // the log are the last creates (no session txns after them).
    let zk = connect(&hosts).await;
    let n = 10;
    for i in 0..n {
        zk.create(
            &format!("/tail{i}"),
            format!("v{i}").as_bytes(),
            &CreateMode::Persistent.with_acls(Acls::anyone_all()),
        )
        .await
        .unwrap();
    }
    server.kill();
    drop(zk);
    let segments = wazoo_log_segments(&server.data_dir());
    let newest = segments.last().expect("wazoo wrote a log segment");
    let mut bytes = std::fs::read(newest).unwrap();
    let offsets = wazoo_record_offsets(&bytes);
    assert!(offsets.len() >= 3, "the newest segment holds 3 records");
    let at = offsets[offsets.len() - 3];
    let len = bytes.len() - at;
    bytes[at..].copy_from_slice(&garbage(3, len));
    std::fs::write(newest, &bytes).unwrap();

    let msg = restart_refused(
        &mut server,
        "wazoo must not start on garbage over acknowledged records",
    );
    let name = newest.file_name().unwrap().to_string_lossy().into_owned();
    for needle in [
        "transaction log is corrupt",
        name.as_str(),
        &format!("byte offset {at}"),
        "--truncate-corrupt-log-tail",
    ] {
        assert!(msg.contains(needle), "message mentions {needle:?}: {msg}");
    }
    assert_eq!(std::fs::read(newest).unwrap(), bytes, "file left untouched");

    server
        .restart_with_args(&["--truncate-corrupt-log-tail"])
        .expect("wazoo starts when the operator accepts the loss");
    let log = server.log_tail(200);
    assert!(
        log.contains("truncating a CORRUPT transaction log")
            && log.contains(&format!("{len} bytes dropped")),
        "the cut is logged with the bytes dropped: {log}"
    );
    assert_eq!(std::fs::metadata(newest).unwrap().len(), at as u64);
    let zk = connect(&hosts).await;
    for i in 0..n - 3 {
        let (data, _) = zk
            .get_data(&format!("/tail{i}"))
            .await
            .unwrap_or_else(|e| panic!("/tail{i}, written before the damage: {e}"));
        assert_eq!(data, format!("v{i}").as_bytes());
    }
    for i in n - 3..n {
        assert!(
            zk.check_stat(&format!("/tail{i}")).await.unwrap().is_none(),
            "/tail{i} was in the records the operator gave up"
        );
    }
    // Writes go on, and a plain restart afterwards needs no flag.
    zk.create(
        "/after",
        b"",
        &CreateMode::Persistent.with_acls(Acls::anyone_all()),
    )
    .await
    .unwrap();
    drop(zk);
    server.restart().expect("a plain restart after the cut");
    let zk = connect(&hosts).await;
    assert!(zk.check_stat("/after").await.unwrap().is_some());
}

/// ZooKeeper 3.8 on the same damage: garbage over its last 3 records (each
/// an 8-byte CRC, a 4-byte length, the txn and an end-of-record byte 'B').
/// Its reader takes a length past `jute.maxbuffer` as an error ("Unreasonable
/// length", what this seed gives: `java.io.IOException: Unreasonable length
/// = -1287229558`, exit status 1), a checksum that fails as "CRC check
/// failed", and the server does not start either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_refuses_garbage_over_its_last_log_records() {
    let mut server: Box<dyn TestServer> = start(Flavor::Zookeeper);
    let hosts = server.connect_string();
    let zk = connect(&hosts).await;
    for i in 0..10 {
        zk.create(
            &format!("/tail{i}"),
            b"v",
            &CreateMode::Persistent.with_acls(Acls::anyone_all()),
        )
        .await
        .unwrap();
    }
    server.kill();
    drop(zk);
    let newest = zookeeper_newest_log(&server.data_dir());
    let mut bytes = std::fs::read(&newest).unwrap();
    let records = zookeeper_records(&bytes);
    assert!(records.len() >= 3, "the log holds 3 records");
    let from = records[records.len() - 3].0;
    let (last, frame) = records[records.len() - 1];
    let end = last + frame;
    bytes[from..end].copy_from_slice(&garbage(3, end - from));
    std::fs::write(&newest, &bytes).unwrap();

    let msg = restart_refused(
        &mut *server,
        "ZooKeeper does not start on garbage over its last records",
    );
    assert!(
        msg.contains("Unreasonable length") || msg.contains("CRC check failed"),
        "{msg}"
    );
}

/// `mntr`'s `zk_cnt_fsynctime` after ten creates on a fresh server with
/// `extra` zoo.cfg lines.
async fn fsyncs_after_ten_creates(flavor: Flavor, extra: &[&str]) -> u64 {
    let mut opts = common::options(flavor);
    for line in extra {
        opts = opts.cfg(*line);
    }
    let server = flavor
        .start_with(opts)
        .unwrap_or_else(|e| panic!("cannot start {flavor}: {e:#}"));
    let zk = connect(&server.connect_string()).await;
    for i in 0..10 {
        zk.create(
            &format!("/fsync-{i}"),
            b"x",
            &CreateMode::Persistent.with_acls(Acls::anyone_all()),
        )
        .await
        .unwrap();
    }
    let addr = server.addr();
    let mntr = tokio::task::spawn_blocking(move || {
        wazoo_testkit::four_letter_word(addr, "mntr").expect("mntr answers")
    })
    .await
    .unwrap();
    mntr.lines()
        .find_map(|l| l.strip_prefix("zk_cnt_fsynctime\t"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{flavor}: mntr has no zk_cnt_fsynctime: {mntr}"))
}

/// ZooKeeper Administrator's Guide, "Advanced Configuration", forceSync:
/// with `forceSync=no` the log is not synced to the media, so no fsync time
/// is recorded; by default every group commit is.
async fn force_sync_no_writes_the_log_without_syncing_it(flavor: Flavor) {
    let synced = fsyncs_after_ten_creates(flavor, &[]).await;
    assert!(synced >= 1, "{flavor}: {synced} fsyncs by default");
    let unsynced = fsyncs_after_ten_creates(flavor, &["forceSync=no"]).await;
    assert_eq!(unsynced, 0, "{flavor}: forceSync=no");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wazoo_honors_force_sync_no() {
    force_sync_no_writes_the_log_without_syncing_it(Flavor::Wazoo).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_honors_force_sync_no() {
    force_sync_no_writes_the_log_without_syncing_it(Flavor::Zookeeper).await;
}
