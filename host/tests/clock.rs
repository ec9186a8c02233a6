//! Time and the disk, end to end, on in-process members.
//!
//! - A step of the wall clock, forward or back, neither expires a live
//!   session nor keeps a dead one (ZooKeeper Programmer's Guide, "ZooKeeper
//!   Sessions": a session expires when the server hears nothing from it for
//!   the session timeout). The member's wall clock is injected and stepped.
//! - A slow disk neither stalls nor deadlocks a member: reads and pings are
//!   answered while writes wait for the log writer, and the writes all
//!   complete once it catches up.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use wazoo::config::Config;
use wazoo::member::{Clock, Member, MemberOptions, SystemWallClock, WallClock};
use wazoo_storage::GroupCommitOptions;
use wazoo_testkit::{free_port, Proxy};
use zookeeper_client::{Acls, Client, CreateMode};

const HOUR_MS: i64 = 3_600_000;
const SESSION_TIMEOUT: Duration = Duration::from_secs(2);

/// The system's wall clock, set `offset_ms` away by the test.
#[derive(Default)]
struct SteppedWall {
    offset_ms: AtomicI64,
}

impl SteppedWall {
    fn step_to(&self, offset_ms: i64) {
        self.offset_ms.store(offset_ms, Ordering::SeqCst);
    }
}

impl WallClock for SteppedWall {
    fn wall_ms(&self) -> i64 {
        SystemWallClock.wall_ms() + self.offset_ms.load(Ordering::SeqCst)
    }
}

fn standalone_config(dir: &std::path::Path) -> Config {
    let text = format!(
        "tickTime=200\n\
         dataDir={}\n\
         clientPort={}\n\
         clientPortAddress=127.0.0.1\nadmin.enableServer=false\n\
         minSessionTimeout=1000\n\
         maxSessionTimeout=20000\n",
        dir.display(),
        free_port()
    );
    Config::parse(&text).expect("valid zoo.cfg")
}

async fn connect(addr: &str, timeout: Duration) -> Client {
    Client::connector()
        .with_session_timeout(timeout)
        .connect(addr)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {addr}: {e}"))
}

async fn create(zk: &Client, path: &str, mode: CreateMode) {
    zk.create(path, b"", &mode.with_acls(Acls::anyone_all()))
        .await
        .unwrap_or_else(|e| panic!("cannot create {path}: {e}"));
}

async fn exists(zk: &Client, path: &str) -> bool {
    zk.check_stat(path)
        .await
        .unwrap_or_else(|e| panic!("exists {path}: {e}"))
        .is_some()
}

async fn stop(member: Member) {
    member
        .run_until(async {})
        .await
        .expect("the member stops cleanly");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wall_clock_steps_neither_expire_live_sessions_nor_keep_dead_ones() {
    let dir = tempfile::tempdir().unwrap();
    let wall = Arc::new(SteppedWall::default());
    let opts = MemberOptions {
        clock: Clock::with_wall(wall.clone()),
        ..MemberOptions::default()
    };
    let member = Member::start_with(standalone_config(dir.path()), opts)
        .await
        .expect("the member starts");
    let addr: SocketAddr = member.client_addr;
    // The client that will die reaches the member through a proxy, so the
    // test can cut it off without it closing its session.
    let proxy = Proxy::start(addr).unwrap();
    let alive = connect(&addr.to_string(), SESSION_TIMEOUT).await;
    let doomed = connect(&proxy.connect_string(), SESSION_TIMEOUT).await;
    create(&alive, "/alive", CreateMode::Ephemeral).await;
    create(&doomed, "/doomed", CreateMode::Ephemeral).await;

    // +1 h: with expiry on the wall clock, every session would be past its
    // deadline at the next tick.
    wall.step_to(HOUR_MS);
    tokio::time::sleep(SESSION_TIMEOUT * 3).await;
    assert!(
        exists(&alive, "/alive").await,
        "a live session survives +1 h"
    );
    assert!(
        exists(&doomed, "/doomed").await,
        "every live session survives +1 h"
    );
    create(&alive, "/after-forward", CreateMode::Persistent).await;
    let stamped = alive.check_stat("/after-forward").await.unwrap().unwrap();
    assert!(
        stamped.mtime >= SystemWallClock.wall_ms() + HOUR_MS / 2,
        "txns are stamped with the wall clock: mtime {}",
        stamped.mtime
    );

    // Back to 1 h behind: with expiry on the wall clock, a dead session's
    // deadline would be two hours away.
    wall.step_to(-HOUR_MS);
    tokio::time::sleep(Duration::from_millis(500)).await;
    proxy.cut();
    let cut_at = Instant::now();
    let slack = Duration::from_secs(8);
    while exists(&alive, "/doomed").await {
        assert!(
            cut_at.elapsed() < SESSION_TIMEOUT + slack,
            "a dead session's ephemeral outlived its timeout after -1 h"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let gone_after = cut_at.elapsed();
    assert!(
        gone_after >= SESSION_TIMEOUT / 2,
        "expired after {gone_after:?}, before its timeout"
    );
    assert!(
        exists(&alive, "/alive").await,
        "the live session is still there"
    );
    // Stamps do not go back with the clock.
    create(&alive, "/after-back", CreateMode::Persistent).await;
    let back = alive.check_stat("/after-back").await.unwrap().unwrap();
    assert!(
        back.mtime >= stamped.mtime,
        "stamps never decrease: {} after {}",
        back.mtime,
        stamped.mtime
    );
    drop(doomed);
    drop(alive);
    stop(member).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_disk_leaves_the_member_responsive_and_it_catches_up() {
    const WRITES: usize = 200;
    let dir = tempfile::tempdir().unwrap();
    // A writer queue of 4 and 150 ms per fsync: at most 5 records per
    // fsync, so a burst of creates waits for the disk for seconds, most of
    // it held by the member rather than in the writer's queue.
    let opts = MemberOptions {
        group_commit: GroupCommitOptions {
            queue_capacity: 4,
            sync_delay: Some(Duration::from_millis(150)),
            ..GroupCommitOptions::default()
        },
        ..MemberOptions::default()
    };
    let member = Member::start_with(standalone_config(dir.path()), opts)
        .await
        .expect("the member starts");
    let addr = member.client_addr.to_string();
    let writer = connect(&addr, Duration::from_secs(20)).await;
    let reader = connect(&addr, Duration::from_secs(20)).await;
    create(&writer, "/w", CreateMode::Persistent).await;

    let done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let burst = {
        let (writer, done) = (writer.clone(), done.clone());
        tokio::spawn(async move {
            let options = CreateMode::Persistent.with_acls(Acls::anyone_all());
            let paths: Vec<String> = (0..WRITES).map(|i| format!("/w/n{i}")).collect();
            // Every create is sent before the first reply is awaited.
            let pending: Vec<_> = paths
                .iter()
                .map(|p| writer.create(p, b"x", &options))
                .collect();
            for (p, f) in paths.iter().zip(pending) {
                f.await.unwrap_or_else(|e| panic!("create {p}: {e}"));
                done.fetch_add(1, Ordering::SeqCst);
            }
        })
    };
    // Wait until the first create is durable: the burst is in the pipe.
    let started = Instant::now();
    while done.load(Ordering::SeqCst) == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no write completed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Another session's read is answered while most of the writes still
    // wait for the disk (a member blocked on the writer's queue would
    // answer it only once the burst had gone through the queue).
    reader
        .get_data("/w")
        .await
        .expect("a read while the log is behind");
    let during = done.load(Ordering::SeqCst);
    assert!(
        during <= WRITES / 2,
        "the read was answered only after {during} of {WRITES} writes"
    );
    // And so are four-letter words.
    let a = member.client_addr;
    let srvr = tokio::task::spawn_blocking(move || wazoo_testkit::four_letter_word(a, "srvr"))
        .await
        .unwrap()
        .expect("srvr while the log is behind");
    assert!(srvr.contains("Mode: standalone"), "srvr answered: {srvr}");
    tokio::time::timeout(Duration::from_secs(60), burst)
        .await
        .expect("the member catches up with the slow disk")
        .unwrap();
    let children = reader.list_children("/w").await.unwrap();
    assert_eq!(children.len(), WRITES, "every write landed");
    drop(writer);
    drop(reader);
    stop(member).await;
}
