//! A stranger on the quorum and election ports of a 3-member ensemble
//! cannot stop or slow its writes: members are known by what their links
//! do, not by the id a hello claims (ZooKeeper Administrator's Guide,
//! "Cluster Options": server.x=host:quorumPort:electionPort).
//!
//! The test measures acknowledged writes for a few seconds, then again
//! while a stranger hammers every quorum and election port of every member
//! (hellos claiming every member id, hellos followed by a 0xffffffff frame
//! length or a huge frame trickled byte by byte, garbage, half-open
//! connections), then checks the ensemble still replicates afterwards.

mod common;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::connect;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use wazoo_testkit::{ServerOptions, TestEnsemble, WazooEnsemble};
use zookeeper_client::{Acls, CreateMode};

const BASELINE: Duration = Duration::from_secs(4);
const ATTACK: Duration = Duration::from_secs(6);
/// The longest a writer may go without an acknowledged write under attack.
const GAP_MAX: Duration = Duration::from_millis(2500);

/// The quorum and election ports of every `server.N` line in member `i`'s
/// zoo.cfg, with the member ids.
fn member_ports(e: &WazooEnsemble, i: usize) -> (Vec<u64>, Vec<u16>) {
    let cfg_path = e
        .data_dir(i)
        .parent()
        .expect("the data dir is inside the member dir")
        .join("zoo.cfg");
    let cfg = std::fs::read_to_string(&cfg_path).expect("zoo.cfg is readable");
    let mut ids = Vec::new();
    let mut ports = Vec::new();
    for line in cfg.lines() {
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let Some(id) = key.trim().strip_prefix("server.") else {
            continue;
        };
        ids.push(id.parse().expect("server.N has a numeric id"));
        let addr = value.split(';').next().expect("split yields one part");
        let parts: Vec<&str> = addr.split(':').collect();
        ports.push(parts[1].parse().expect("quorum port"));
        ports.push(parts[2].parse().expect("election port"));
    }
    (ids, ports)
}

fn hello(id: u64, version: u8, epoch: u64) -> Vec<u8> {
    let mut h = b"WZQ1".to_vec();
    h.push(version);
    h.extend_from_slice(&id.to_be_bytes());
    h.extend_from_slice(&epoch.to_be_bytes());
    h
}

/// A small deterministic generator for the stranger's garbage.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

/// Hammers `targets` until `stop`; returns how many connections it made.
async fn stranger(targets: Vec<SocketAddr>, ids: Vec<u64>, stop: Arc<AtomicBool>) -> u64 {
    let mut rng = Lcg(0x5eed);
    let mut held: VecDeque<TcpStream> = VecDeque::new();
    let mut made = 0u64;
    let mut round = 0u64;
    while !stop.load(Ordering::Relaxed) {
        round += 1;
        for &addr in &targets {
            for &id in &ids {
                // A hello claiming a real member, held open.
                let version = if round.is_multiple_of(2) { 2 } else { 1 };
                if let Ok(Ok(mut s)) =
                    tokio::time::timeout(Duration::from_millis(200), TcpStream::connect(addr)).await
                {
                    made += 1;
                    let _ = s.write_all(&hello(id, version, round)).await;
                    held.push_back(s);
                }
                // A hello followed by a frame length of 0xffffffff.
                if let Ok(Ok(mut s)) =
                    tokio::time::timeout(Duration::from_millis(200), TcpStream::connect(addr)).await
                {
                    made += 1;
                    let mut b = hello(id, 2, round);
                    b.extend_from_slice(&[0xff; 4]);
                    b.extend_from_slice(&[1, 2, 3]);
                    let _ = s.write_all(&b).await;
                }
            }
            // A hello announcing a 512 MiB frame, then trickling it.
            if let Ok(Ok(mut s)) =
                tokio::time::timeout(Duration::from_millis(200), TcpStream::connect(addr)).await
            {
                made += 1;
                let mut b = hello(ids[(round as usize) % ids.len()], 2, round);
                b.extend_from_slice(&(512u32 << 20).to_be_bytes());
                b.push(1);
                let _ = s.write_all(&b).await;
                held.push_back(s);
            }
            // Garbage, then gone.
            if let Ok(Ok(mut s)) =
                tokio::time::timeout(Duration::from_millis(200), TcpStream::connect(addr)).await
            {
                made += 1;
                let n = 1 + rng.next() as usize % 200;
                let junk: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                let _ = s.write_all(&junk).await;
            }
            // Half-open: connected, a partial hello or nothing, held.
            if let Ok(Ok(mut s)) =
                tokio::time::timeout(Duration::from_millis(200), TcpStream::connect(addr)).await
            {
                made += 1;
                if round.is_multiple_of(2) {
                    let _ = s.write_all(&hello(ids[0], 2, round)[..10]).await;
                }
                held.push_back(s);
            }
        }
        // Trickle a byte into every held connection; keep the newest 200.
        for s in held.iter_mut() {
            let _ = s.try_write(&[0]);
        }
        while held.len() > 200 {
            held.pop_front();
        }
        tokio::time::sleep(Duration::from_millis(60)).await;
    }
    made
}

/// Acknowledged writes: (writer, when) for every setData that succeeded.
type Acks = Arc<Mutex<Vec<(usize, Instant)>>>;

async fn writer(w: usize, hosts: String, acks: Acks, stop: Arc<AtomicBool>) -> u64 {
    let zk = connect(&hosts).await;
    let path = format!("/stranger-w{w}");
    let mut errors = 0;
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let r = tokio::time::timeout(
            Duration::from_secs(5),
            zk.set_data(&path, n.to_string().as_bytes(), None),
        )
        .await;
        match r {
            Ok(Ok(_)) => acks.lock().unwrap().push((w, Instant::now())),
            _ => errors += 1,
        }
    }
    errors
}

fn acks_between(acks: &Acks, from: Instant, to: Instant) -> Vec<(usize, Instant)> {
    acks.lock()
        .unwrap()
        .iter()
        .copied()
        .filter(|&(_, t)| t >= from && t < to)
        .collect()
}

/// The longest time writer `w` went without an ack in [from, to).
fn longest_gap(acks: &[(usize, Instant)], w: usize, from: Instant, to: Instant) -> Duration {
    let mut last = from;
    let mut gap = Duration::ZERO;
    for &(_, t) in acks.iter().filter(|(x, _)| *x == w) {
        gap = gap.max(t - last);
        last = t;
    }
    gap.max(to - last)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stranger_on_every_peer_port_leaves_writes_flowing() {
    let opts = ServerOptions::default()
        .tick_time_ms(500)
        .session_timeouts_ms(1000, 20_000)
        .binary(env!("CARGO_BIN_EXE_wazoo"));
    let e = WazooEnsemble::start(3, opts).expect("a 3-member wazoo ensemble starts");
    let mut targets = Vec::new();
    let mut ids = Vec::new();
    for i in 0..e.len() {
        let (member_ids, ports) = member_ports(&e, i);
        ids = member_ids;
        for p in ports {
            let a = SocketAddr::from(([127, 0, 0, 1], p));
            if !targets.contains(&a) {
                targets.push(a);
            }
        }
    }
    assert_eq!(ids.len(), 3, "three server lines");
    assert_eq!(targets.len(), 6, "a quorum and an election port per member");

    let opts_open = CreateMode::Persistent.with_acls(Acls::anyone_all());
    let zk = connect(&e.connect_string()).await;
    for w in 0..3 {
        zk.create(&format!("/stranger-w{w}"), b"0", &opts_open)
            .await
            .unwrap();
    }

    let acks: Acks = Arc::default();
    let stop_writers = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..3)
        .map(|w| {
            // Writer w talks to member w: its writes cross the links.
            tokio::spawn(writer(
                w,
                e.addr(w).to_string(),
                Arc::clone(&acks),
                Arc::clone(&stop_writers),
            ))
        })
        .collect();

    let t0 = Instant::now();
    tokio::time::sleep(BASELINE).await;
    let t1 = Instant::now();
    let stop_stranger = Arc::new(AtomicBool::new(false));
    let strangers: Vec<_> = (0..2)
        .map(|_| {
            tokio::spawn(stranger(
                targets.clone(),
                ids.clone(),
                Arc::clone(&stop_stranger),
            ))
        })
        .collect();
    tokio::time::sleep(ATTACK).await;
    let t2 = Instant::now();
    stop_stranger.store(true, Ordering::Relaxed);
    let mut connections = 0;
    for s in strangers {
        connections += s.await.unwrap();
    }
    stop_writers.store(true, Ordering::Relaxed);
    for w in writers {
        w.await.unwrap();
    }

    let baseline = acks_between(&acks, t0, t1);
    let attacked = acks_between(&acks, t1, t2);
    let rate = |n: usize, d: Duration| n as f64 / d.as_secs_f64();
    let base_rate = rate(baseline.len(), t1 - t0);
    let attack_rate = rate(attacked.len(), t2 - t1);
    eprintln!(
        "writes/s: {base_rate:.0} before, {attack_rate:.0} under attack \
         ({connections} stranger connections)"
    );
    assert!(connections > 100, "the stranger reached the ports");
    assert!(!baseline.is_empty(), "writes succeed before the attack");
    for w in 0..3 {
        let gap = longest_gap(&attacked, w, t1, t2);
        assert!(
            gap <= GAP_MAX,
            "writer {w} went {gap:?} without an acknowledged write under attack"
        );
    }
    assert!(
        attack_rate >= 0.3 * base_rate,
        "throughput under attack ({attack_rate:.0}/s) fell below 30 % of \
         the baseline ({base_rate:.0}/s)"
    );

    // Afterwards every member still takes writes and replicates them.
    for i in 0..3 {
        let zk = connect(&e.addr(i).to_string()).await;
        zk.create(&format!("/after{i}"), b"", &opts_open)
            .await
            .unwrap_or_else(|err| panic!("member {i} takes a write after the attack: {err}"));
    }
    for i in 0..3 {
        let zk = connect(&e.addr(i).to_string()).await;
        zk.sync("/").await.unwrap();
        for j in 0..3 {
            assert!(
                zk.check_stat(&format!("/after{j}"))
                    .await
                    .unwrap()
                    .is_some(),
                "/after{j} reached member {i}"
            );
        }
    }
    for i in 0..3 {
        let log = e.log_tail(i, 400);
        assert!(!log.contains("panicked"), "member {i} panicked:\n{log}");
    }
}
