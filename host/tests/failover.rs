//! Failover after silent failures, on a real 3-member ensemble at
//! ZooKeeper's default tickTime (2000) and syncLimit (5): a leader that is
//! paused (SIGSTOP) or cut off by a partition that drops packets without a
//! reset is replaced, and writes resume, within a generous bound (the
//! timing targets belong to the benchmark). docs/ARCHITECTURE.md, "Timing
//! model"; ZooKeeper Internals, "Atomic Broadcast" (a follower that stops
//! hearing from its leader goes back to election).

use std::time::{Duration, Instant};

use wazoo_testkit::{ServerOptions, TestEnsemble, WazooEnsemble};
use zookeeper_client::{Acls, Client, CreateMode};

/// Far above the ~1 s the timing model gives, far below ZooKeeper's 10 s.
const RESUME_BOUND: Duration = Duration::from_secs(8);

fn ensemble(quorum_proxies: bool) -> WazooEnsemble {
    let mut opts = ServerOptions::default().binary(env!("CARGO_BIN_EXE_wazoo"));
    if quorum_proxies {
        opts = opts.quorum_proxies();
    }
    WazooEnsemble::start(3, opts).unwrap_or_else(|e| panic!("cannot start an ensemble: {e:#}"))
}

async fn connect(hosts: &str) -> Client {
    Client::connector()
        .with_session_timeout(Duration::from_secs(20))
        .connect(hosts)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {hosts}: {e}"))
}

fn persistent() -> zookeeper_client::CreateOptions<'static> {
    CreateMode::Persistent.with_acls(Acls::anyone_all())
}

/// Creates `/failover/n<k>` for k = 1, 2, ... until one is acknowledged;
/// returns when, and the names acknowledged. Each attempt is bounded, the
/// whole at 30 s.
async fn first_write_after(client: &Client, start: Instant) -> (Duration, Vec<String>) {
    let mut acked = Vec::new();
    for k in 1.. {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no write acknowledged 30 s after the failure"
        );
        let path = format!("/failover/n{k}");
        let attempt = tokio::time::timeout(
            Duration::from_secs(2),
            client.create(&path, b"x", &persistent()),
        )
        .await;
        match attempt {
            Ok(Ok(_)) => {
                acked.push(path);
                return (start.elapsed(), acked);
            }
            // ConnectionLoss while the followers elect, or a timeout:
            // the client reconnects by itself.
            _ => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
    unreachable!("the loop returns or panics")
}

/// Every name in `acked` is on member `i` (after a sync).
async fn all_on(e: &WazooEnsemble, i: usize, acked: &[String]) {
    let zk = connect(&e.addr(i).to_string()).await;
    zk.sync("/failover").await.unwrap();
    for path in acked {
        assert!(
            zk.check_stat(path).await.unwrap().is_some(),
            "acknowledged {path} missing on member {}",
            i + 1
        );
    }
}

/// Waits (bounded) until member `i` reports `mode`.
fn wait_mode(e: &WazooEnsemble, i: usize, mode: &str, timeout: Duration) {
    let start = Instant::now();
    while e.mode(i).as_deref() != Some(mode) {
        assert!(
            start.elapsed() < timeout,
            "member {} is not {mode} after {timeout:?} (it is {:?}); log:\n{}",
            i + 1,
            e.mode(i),
            e.log_tail(i, 20)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Clients on the followers write until the leader fails (`fail`), then
/// until a write is acknowledged again; returns how long that took, the
/// old leader's index and what was acknowledged.
async fn failover(
    e: &mut WazooEnsemble,
    fail: impl FnOnce(&mut WazooEnsemble, usize),
) -> (Duration, usize, Vec<String>) {
    let leader = e.wait_for_leader(Duration::from_secs(30)).unwrap();
    let followers: Vec<String> = (0..3)
        .filter(|&i| i != leader)
        .map(|i| e.addr(i).to_string())
        .collect();
    let client = connect(&followers.join(",")).await;
    client
        .create("/failover", b"", &persistent())
        .await
        .unwrap();
    // A second of writes first: the followers have seen the leader's
    // heartbeats for a while, as in any ensemble that ran before.
    let mut acked = Vec::new();
    let warm = Instant::now();
    for k in 0.. {
        let path = format!("/failover/before{k}");
        client.create(&path, b"", &persistent()).await.unwrap();
        acked.push(path);
        if warm.elapsed() > Duration::from_secs(1) {
            break;
        }
    }
    let start = Instant::now();
    fail(e, leader);
    if std::env::var("FAILOVER_TRACE").is_ok() {
        let addrs: Vec<_> = (0..3).map(|i| e.addr(i)).collect();
        std::thread::spawn(move || {
            let mut last = Vec::new();
            while start.elapsed() < Duration::from_secs(6) {
                let modes: Vec<_> = addrs.iter().map(|a| srvr_mode(*a)).collect();
                if modes != last {
                    eprintln!("{:?}: {modes:?}", start.elapsed());
                    last = modes;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        });
    }
    let (took, after) = first_write_after(&client, start).await;
    acked.extend(after);
    (took, leader, acked)
}

/// `srvr`'s `Mode:` of the member at `addr`, or why there is none.
fn srvr_mode(addr: std::net::SocketAddr) -> String {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else {
        return "down".into();
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(300)));
    let _ = s.write_all(b"srvr");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.lines()
        .find_map(|l| l.strip_prefix("Mode: "))
        .unwrap_or("not serving")
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_resume_soon_after_the_leader_is_paused() {
    let mut e = ensemble(false);
    let (took, old, acked) = failover(&mut e, |e, leader| e.pause(leader).unwrap()).await;
    eprintln!(
        "paused leader (member {}): writes resumed after {took:?}",
        old + 1
    );
    assert!(
        took < RESUME_BOUND,
        "writes resumed only {took:?} after the leader was paused"
    );
    let new = (0..3).find(|&i| i != old && e.mode(i).as_deref() == Some("leader"));
    assert!(new.is_some(), "a follower leads now");
    // The old leader goes on: it finds its lease gone, steps down and
    // follows the new leader, with everything acknowledged meanwhile.
    e.resume(old).unwrap();
    wait_mode(&e, old, "follower", Duration::from_secs(30));
    for i in 0..3 {
        all_on(&e, i, &acked).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_resume_soon_after_the_leader_is_partitioned_silently() {
    let mut e = ensemble(true);
    let (took, old, acked) = failover(&mut e, |e, leader| {
        e.quorum_net().expect("quorum proxies").isolate(leader)
    })
    .await;
    eprintln!(
        "partitioned leader (member {}): writes resumed after {took:?}",
        old + 1
    );
    assert!(
        took < RESUME_BOUND,
        "writes resumed only {took:?} after the leader was cut off"
    );
    // Cut off, the old leader's lease runs out and it stops leading by
    // itself (its clients are closed), though nobody told it anything.
    assert_ne!(
        e.mode(old).as_deref(),
        Some("leader"),
        "member {} still leads, cut off from the others",
        old + 1
    );
    e.quorum_net().expect("quorum proxies").heal();
    wait_mode(&e, old, "follower", Duration::from_secs(30));
    for i in 0..3 {
        all_on(&e, i, &acked).await;
    }
}
