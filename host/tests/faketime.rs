//! A real 3-member wazoo ensemble whose wall clock is stepped by
//! libfaketime (Debian package `libfaketime`, installed by
//! scripts/setup.sh): +1 h then -1 h on every member, the leader included.
//! No live session expires, and a dead one expires on time (ZooKeeper
//! Programmer's Guide, "ZooKeeper Sessions").
//!
//! libfaketime reads the offset from a file on every clock read
//! (`FAKETIME_TIMESTAMP_FILE`, `FAKETIME_NO_CACHE=1`) and leaves the
//! monotonic clock alone (`FAKETIME_DONT_FAKE_MONOTONIC=1`), as a step of
//! the system clock by an operator or NTP would.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use wazoo_testkit::{Flavor, Proxy, ServerOptions};
use zookeeper_client::{Acls, Client, CreateMode};

const SESSION_TIMEOUT: Duration = Duration::from_secs(2);

/// libfaketime's multithreaded build, wherever Debian put it.
fn libfaketime() -> PathBuf {
    let mut candidates = Vec::new();
    if let Ok(dirs) = std::fs::read_dir("/usr/lib") {
        for d in dirs.flatten() {
            candidates.push(d.path().join("faketime/libfaketimeMT.so.1"));
        }
    }
    candidates.push(PathBuf::from("/usr/lib/faketime/libfaketimeMT.so.1"));
    candidates
        .into_iter()
        .find(|p| p.is_file())
        .expect("libfaketime is not installed (Debian package libfaketime; run scripts/setup.sh)")
}

async fn connect(addr: &str) -> Client {
    Client::connector()
        .with_session_timeout(SESSION_TIMEOUT)
        .connect(addr)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {addr}: {e}"))
}

async fn exists(zk: &Client, path: &str) -> bool {
    zk.check_stat(path)
        .await
        .unwrap_or_else(|e| panic!("exists {path}: {e}"))
        .is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ensemble_under_a_stepped_wall_clock_keeps_live_sessions_and_expires_dead_ones() {
    let dir = tempfile::tempdir().unwrap();
    let offset = dir.path().join("faketime");
    std::fs::write(&offset, "+0\n").unwrap();
    let opts = ServerOptions::default()
        .binary(env!("CARGO_BIN_EXE_wazoo"))
        .tick_time_ms(200)
        .session_timeouts_ms(1000, 20_000)
        .env("LD_PRELOAD", libfaketime().display().to_string())
        .env("FAKETIME_TIMESTAMP_FILE", offset.display().to_string())
        .env("FAKETIME_NO_CACHE", "1")
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
    let ensemble = wazoo_testkit::start_ensemble(Flavor::Wazoo, 3, opts).expect("ensemble starts");
    let leader = ensemble
        .wait_for_leader(Duration::from_secs(30))
        .expect("a leader is elected");
    let follower = (leader + 1) % 3;
    // The session that stays is on the leader, the one that dies on a
    // follower, behind a proxy the test cuts.
    let proxy = Proxy::start(ensemble.addr(follower)).unwrap();
    let alive = connect(&ensemble.addr(leader).to_string()).await;
    let doomed = connect(&proxy.connect_string()).await;
    let eph = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
    alive.create("/alive", b"", &eph).await.unwrap();
    doomed.create("/doomed", b"", &eph).await.unwrap();

    std::fs::write(&offset, "+1h\n").unwrap();
    tokio::time::sleep(SESSION_TIMEOUT * 3).await;
    assert!(
        exists(&alive, "/alive").await,
        "a live session survives +1 h"
    );
    assert!(
        exists(&doomed, "/doomed").await,
        "every live session survives +1 h"
    );

    std::fs::write(&offset, "-1h\n").unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    proxy.cut();
    let cut_at = Instant::now();
    let slack = Duration::from_secs(10);
    while exists(&alive, "/doomed").await {
        assert!(
            cut_at.elapsed() < SESSION_TIMEOUT + slack,
            "a dead session's ephemeral outlived its timeout after -1 h:\n{}",
            ensemble.log_tail(leader, 30)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        exists(&alive, "/alive").await,
        "the live session is still there"
    );
    // The member really ran on the faked clock: its stamps are an hour off.
    alive
        .create(
            "/stamp",
            b"",
            &CreateMode::Persistent.with_acls(Acls::anyone_all()),
        )
        .await
        .unwrap();
    let stat = alive.check_stat("/stamp").await.unwrap().unwrap();
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    assert!(
        stat.mtime > now_ms + 30 * 60_000,
        "the leader stamped {} (now {now_ms}): the +1 h step reached it and stamps did not go back",
        stat.mtime
    );
}
