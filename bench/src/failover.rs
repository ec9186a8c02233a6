//! The failover workloads (ensembles only): writers pipeline creates through
//! sessions spread over every member; after a warm-up the leader fails and
//! the bench measures how long writes stop. `failover` kills it (SIGKILL);
//! `failover-pause` pauses it (SIGSTOP) and `failover-partition` cuts it off
//! from the other members silently (the testkit's fault proxies between
//! members), the two silent failures only timeouts can detect. Below,
//! "kill" stands for the failure, whichever it is.
//!
//! Per round, all relative to the moment the SIGKILL was sent:
//!
//! * **first ack**: the first create acknowledged to the load's sessions
//!   whose request was issued *after* the killed leader was reaped. Such a
//!   write can only have been committed by the new leader, so this is "the
//!   time from killing the leader to the first acknowledged write on the new
//!   leader" as the client sees it. It includes the client library's
//!   reconnect back-off (`zookeeper-client` retries members after 0, ~50,
//!   ~100 ms, then ~300 ms, ~600 ms, ... per cycle), the same for both
//!   systems.
//! * **probe**: a fresh session opened to each surviving member every
//!   `probe_interval` until one of them gets a create acknowledged (session
//!   creation is itself a quorum write in an ensemble): the server side
//!   without the client's back-off.
//! * **election**: until a surviving member answers `srvr` with
//!   `Mode: leader` (polled every 10 ms).
//! * **write gap**: from the last ack before the kill to the first ack above.
//! * **half throughput**: to the end of the first 100 ms (from the kill) in
//!   which writes issued after the kill get half the acks/s of the last
//!   second before it.
//!
//! Then the killed member is restarted and, once it serves, every member is
//! asked (after `sync`) for the round's znodes: an acknowledged create that
//! a member lacks is a lost write.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::Serialize;
use tokio::sync::watch;
use tokio::task::JoinSet;
use zookeeper_client as zk;

use crate::ensembles::{quick_mode, Ensemble};
use crate::load::{connect_sessions, error_kind, persistent};

/// How the leader fails in a round.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Failure {
    /// SIGKILL: the process is gone, its connections close at once.
    Kill,
    /// SIGSTOP: the process hangs, its connections stay open and silent;
    /// it goes on (SIGCONT) once the round is over.
    Pause,
    /// The testkit's proxies between members drop every byte to and from
    /// it (no reset): only timeouts notice; healed once the round is over.
    Partition,
}

impl Failure {
    /// The failure a failover workload injects.
    pub fn of(workload: crate::load::Workload) -> Option<Failure> {
        use crate::load::Workload;
        match workload {
            Workload::Failover => Some(Failure::Kill),
            Workload::FailoverPause => Some(Failure::Pause),
            Workload::FailoverPartition => Some(Failure::Partition),
            _ => None,
        }
    }

    /// What happens to the leader, for the logs and the report.
    pub fn what(self) -> &'static str {
        match self {
            Failure::Kill => "kill -9 of the leader",
            Failure::Pause => "the leader paused (SIGSTOP)",
            Failure::Partition => "the leader cut off by a silent partition",
        }
    }

    /// The verb for the log lines.
    pub fn verb(self) -> &'static str {
        match self {
            Failure::Kill => "killed",
            Failure::Pause => "paused",
            Failure::Partition => "partitioned",
        }
    }
}

/// The shape of a failover round, the same for both systems.
#[derive(Clone, Debug, Serialize)]
pub struct FailoverSpec {
    pub failure: Failure,
    pub sessions: usize,
    pub inflight: usize,
    pub payload: usize,
    /// Writes before the kill.
    pub warmup_secs: f64,
    /// The writers keep going at least this long after the kill, and at
    /// least 1 s after the first ack on the new leader.
    pub window_secs: f64,
    /// Give up on a round when no write is acknowledged this long after the kill.
    pub timeout_secs: f64,
    pub rounds: usize,
    pub probe_interval_ms: u64,
}

/// One kill of a leader.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FailoverRound {
    /// The member killed (1-based, its myid).
    pub killed_member: usize,
    /// From sending SIGKILL to having reaped the process (a JVM takes tens
    /// of ms to go; its sockets close during that).
    pub reap_ms: f64,
    /// The member that reported `Mode: leader` after the kill.
    pub new_leader_member: Option<usize>,
    /// Kill to the first ack of a write issued after the kill (load sessions).
    pub first_ack_ms: Option<f64>,
    /// Kill to the first create acknowledged to a fresh probe session.
    pub probe_ms: Option<f64>,
    pub probe_member: Option<usize>,
    /// Kill to a surviving member answering `srvr` with `Mode: leader`.
    pub election_ms: Option<f64>,
    /// Last ack before the kill to the first ack after it.
    pub write_gap_ms: Option<f64>,
    /// Kill to the end of the first 100 ms with half the pre-kill ack rate.
    pub half_throughput_ms: Option<f64>,
    /// Acknowledged creates per second in the last second before the kill.
    pub pre_kill_writes_per_sec: f64,
    /// ... and from 0.5 s after the first ack on the new leader to the end.
    pub post_failover_writes_per_sec: f64,
    /// Measured from the kill to the end of the round.
    pub secs_after_kill: f64,
    pub acked_writes: u64,
    /// Requests that failed (any time in the round), and why.
    pub errors: u64,
    pub error_kinds: BTreeMap<String, u64>,
    /// How long the killed member took to restart and serve again.
    pub restart_secs: Option<f64>,
    /// After the restart: the round's znodes each member holds, and how many
    /// acknowledged creates it lacks (should be 0).
    pub znodes_per_member: Vec<Option<u64>>,
    pub lost_acked_writes_per_member: Vec<Option<u64>>,
    /// After the restart and the check: each member's mode and VmRSS.
    pub modes_after: Vec<String>,
    pub rss_after_bytes: Vec<Option<u64>>,
    /// Acks per 100 ms, from 1 s before the kill to the end of the round.
    pub timeline_100ms: Vec<u64>,
    pub failure: Option<String>,
}

/// min / median / max of one figure over the rounds that have it.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Spread {
    pub n: usize,
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    pub fn of(values: impl IntoIterator<Item = Option<f64>>) -> Option<Spread> {
        let mut v: Vec<f64> = values.into_iter().flatten().collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(|a, b| a.total_cmp(b));
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Spread {
            n,
            median,
            min: v[0],
            max: v[n - 1],
        })
    }
}

/// Every round of one system, and the spreads.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FailoverRun {
    pub rounds: Vec<FailoverRound>,
    pub first_ack_ms: Option<Spread>,
    pub probe_ms: Option<Spread>,
    pub election_ms: Option<Spread>,
    pub write_gap_ms: Option<Spread>,
    pub half_throughput_ms: Option<Spread>,
    pub errors: u64,
    pub error_kinds: BTreeMap<String, u64>,
    /// Acknowledged writes some member lacked after the restart, all rounds.
    pub lost_acked_writes: u64,
    pub failures: Vec<String>,
}

impl FailoverRun {
    pub fn summarize(rounds: Vec<FailoverRound>) -> FailoverRun {
        let mut error_kinds: BTreeMap<String, u64> = BTreeMap::new();
        for r in &rounds {
            for (k, v) in &r.error_kinds {
                *error_kinds.entry(k.clone()).or_default() += v;
            }
        }
        FailoverRun {
            first_ack_ms: Spread::of(rounds.iter().map(|r| r.first_ack_ms)),
            probe_ms: Spread::of(rounds.iter().map(|r| r.probe_ms)),
            election_ms: Spread::of(rounds.iter().map(|r| r.election_ms)),
            write_gap_ms: Spread::of(rounds.iter().map(|r| r.write_gap_ms)),
            half_throughput_ms: Spread::of(rounds.iter().map(|r| r.half_throughput_ms)),
            errors: rounds.iter().map(|r| r.errors).sum(),
            error_kinds,
            lost_acked_writes: rounds
                .iter()
                .map(|r| {
                    r.lost_acked_writes_per_member
                        .iter()
                        .flatten()
                        .copied()
                        .max()
                        .unwrap_or(0)
                })
                .sum(),
            failures: rounds.iter().filter_map(|r| r.failure.clone()).collect(),
            rounds,
        }
    }
}

/// What the writers share with the coordinator.
struct Shared {
    /// Round start; every time below is microseconds since it.
    t0: Instant,
    /// When the killed leader had been reaped (u64::MAX before the kill).
    dead_us: AtomicU64,
    /// The first ack of a request issued after `dead_us`.
    first_after_us: AtomicU64,
}

impl Shared {
    fn now_us(&self) -> u64 {
        self.t0.elapsed().as_micros() as u64
    }
}

struct Ack {
    issue_us: u64,
    ack_us: u64,
    n: u64,
}

struct WriterLog {
    dir: String,
    acks: Vec<Ack>,
    errors: BTreeMap<String, u64>,
}

async fn writer(
    client: zk::Client,
    dir: String,
    payload: Arc<Vec<u8>>,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) -> WriterLog {
    let mut log = WriterLog {
        dir,
        acks: Vec::new(),
        errors: BTreeMap::new(),
    };
    let mut n = 0u64;
    let mut failing = 0u32;
    loop {
        if *stop.borrow() {
            break;
        }
        n += 1;
        let path = format!("{}/n{n}", log.dir);
        let issue_us = shared.now_us();
        let result = tokio::select! {
            r = client.create(&path, &payload, &persistent()) => r,
            _ = stop.changed() => break,
        };
        let ack_us = shared.now_us();
        match result {
            Ok(_) => {
                failing = 0;
                log.acks.push(Ack {
                    issue_us,
                    ack_us,
                    n,
                });
                if issue_us > shared.dead_us.load(Ordering::Acquire) {
                    shared.first_after_us.fetch_min(ack_us, Ordering::AcqRel);
                }
            }
            Err(e) => {
                *log.errors.entry(error_kind(&e)).or_default() += 1;
                if matches!(e, zk::Error::SessionExpired | zk::Error::ClientClosed) {
                    break;
                }
                // ConnectionLoss and the like: the client reconnects on its
                // own (requests wait for it); do not spin if it fails fast.
                failing += 1;
                if failing > 20 {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
        }
    }
    log
}

/// Opens a fresh session to `addr` every `interval` until a create is
/// acknowledged on it; returns when (µs since `shared.t0`).
async fn probe(addr: String, path: String, interval: Duration, shared: Arc<Shared>) -> Option<u64> {
    loop {
        let attempt = async {
            let c = zk::Client::connector()
                .with_fail_eagerly()
                .with_session_timeout(Duration::from_secs(10))
                .with_connection_timeout(Duration::from_millis(1000))
                .connect(&addr)
                .await?;
            c.create(&path, b"", &persistent()).await.map(drop)
        };
        match tokio::time::timeout(Duration::from_secs(3), attempt).await {
            Ok(Ok(())) | Ok(Err(zk::Error::NodeExists)) => return Some(shared.now_us()),
            _ => tokio::time::sleep(interval).await,
        }
    }
}

/// Polls `srvr` of `members` (1-based numbers, addresses) every 10 ms until
/// one says `leader`; (µs since t0, member) or `None` when stopped first.
fn poll_election(
    members: Vec<(usize, std::net::SocketAddr)>,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
) -> Option<(u64, usize)> {
    while !stop.load(Ordering::Relaxed) {
        for &(m, addr) in &members {
            if quick_mode(addr, Duration::from_millis(500)).as_deref() == Some("leader") {
                return Some((shared.now_us(), m));
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

/// The figures from the acks of a round (times in µs since its start):
/// first ack of a request issued after `dead_us`, gap, rates, timeline.
/// Returns that first ack's time.
fn ack_figures(
    round: &mut FailoverRound,
    acks: &[&Ack],
    kill_us: u64,
    dead_us: u64,
    end_us: u64,
) -> Option<u64> {
    let first_after = acks
        .iter()
        .filter(|a| a.issue_us > dead_us)
        .map(|a| a.ack_us)
        .min();
    round.first_ack_ms = first_after.map(|t| ms(t - kill_us));
    let last_before = acks
        .iter()
        .filter(|a| a.ack_us < kill_us)
        .map(|a| a.ack_us)
        .max();
    if let (Some(b), Some(a)) = (last_before, first_after) {
        round.write_gap_ms = Some(ms(a - b));
    }
    let pre_span = kill_us.min(1_000_000);
    let pre = acks
        .iter()
        .filter(|a| a.ack_us < kill_us && a.ack_us >= kill_us - pre_span)
        .count();
    round.pre_kill_writes_per_sec = if pre_span > 0 {
        pre as f64 / (pre_span as f64 / 1e6)
    } else {
        0.0
    };
    if let Some(first) = first_after {
        let from = first + 500_000;
        if end_us > from {
            let post = acks
                .iter()
                .filter(|a| a.ack_us >= from && a.ack_us < end_us)
                .count();
            round.post_failover_writes_per_sec = post as f64 / ((end_us - from) as f64 / 1e6);
        }
    }
    // Timeline: acks per 100 ms from 1 s before the kill.
    let start = kill_us.saturating_sub(1_000_000);
    let mut timeline = vec![0u64; ((end_us.max(start) - start) / 100_000 + 1) as usize];
    for a in acks {
        if a.ack_us >= start && a.ack_us < end_us {
            timeline[((a.ack_us - start) / 100_000) as usize] += 1;
        }
    }
    round.timeline_100ms = timeline;
    // Half rate: the first 100 ms from the kill in which requests issued
    // after it got half the pre-kill number of acks.
    let half = round.pre_kill_writes_per_sec * 0.1 / 2.0;
    if half > 0.0 && end_us > kill_us {
        let mut after = vec![0u64; ((end_us - kill_us) / 100_000 + 1) as usize];
        for a in acks {
            if a.issue_us > dead_us && a.ack_us < end_us {
                after[((a.ack_us - kill_us) / 100_000) as usize] += 1;
            }
        }
        round.half_throughput_ms = after
            .iter()
            .position(|&c| c as f64 >= half)
            .map(|i| (i as f64 + 1.0) * 100.0);
    }
    first_after
}

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

/// One failover round on `ens`: the round's znodes go under `/failover-<tag>`.
pub async fn run_round(
    ens: &mut Ensemble,
    spec: &FailoverSpec,
    tag: &str,
    label: &str,
) -> FailoverRound {
    let mut round = FailoverRound::default();
    if let Err(e) = run_round_inner(ens, spec, tag, label, &mut round).await {
        round.failure = Some(format!("{e:#}"));
    }
    round
}

async fn run_round_inner(
    ens: &mut Ensemble,
    spec: &FailoverSpec,
    tag: &str,
    label: &str,
    round: &mut FailoverRound,
) -> Result<()> {
    let flavor = ens.flavor();
    tokio::task::block_in_place(|| ens.wait_for_leader(Duration::from_secs(30)))
        .context("no leader before the round")?;
    let clients = connect_sessions(&ens.connect_string(), spec.sessions).await?;
    let parent = format!("/failover-{tag}");
    clients[0]
        .create(&parent, b"", &persistent())
        .await
        .with_context(|| format!("create {parent}"))?;
    let mut dirs = Vec::new();
    for s in 0..spec.sessions {
        for t in 0..spec.inflight {
            let dir = format!("{parent}/s{s}t{t}");
            clients[0]
                .create(&dir, b"", &persistent())
                .await
                .with_context(|| format!("create {dir}"))?;
            dirs.push((s, dir));
        }
    }
    for c in &clients {
        c.sync(&parent).await.context("sync before the round")?;
    }

    let shared = Arc::new(Shared {
        t0: Instant::now(),
        dead_us: AtomicU64::new(u64::MAX),
        first_after_us: AtomicU64::new(u64::MAX),
    });
    let payload = Arc::new(vec![b'f'; spec.payload]);
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut writers = JoinSet::new();
    for (s, dir) in &dirs {
        writers.spawn(writer(
            clients[*s].clone(),
            dir.clone(),
            payload.clone(),
            shared.clone(),
            stop_rx.clone(),
        ));
    }
    tokio::time::sleep(Duration::from_secs_f64(spec.warmup_secs)).await;

    // Kill the leader.
    let leader = tokio::task::block_in_place(|| ens.leader());
    let Some(leader) = leader else {
        let _ = stop_tx.send(true);
        bail!("no member reports Mode: leader at the time of the kill");
    };
    round.killed_member = leader + 1;
    let failed = tokio::task::block_in_place(|| {
        let kill_us = shared.now_us();
        let failed = match spec.failure {
            Failure::Kill => {
                ens.kill(leader);
                Ok(())
            }
            Failure::Pause => ens.pause(leader),
            Failure::Partition => ens.isolate(leader),
        };
        let dead_us = shared.now_us();
        shared.dead_us.store(dead_us, Ordering::Release);
        failed.map(|()| (kill_us, dead_us))
    });
    let (kill_us, dead_us) = match failed {
        Ok(t) => t,
        Err(e) => {
            let _ = stop_tx.send(true);
            return Err(e.context("failing the leader"));
        }
    };
    round.reap_ms = ms(dead_us - kill_us);
    eprintln!(
        "  {label}: {} the leader, member {} ({:.1} ms)",
        spec.failure.verb(),
        leader + 1,
        ms(dead_us - kill_us)
    );
    let survivors: Vec<(usize, std::net::SocketAddr)> = (0..ens.len())
        .filter(|&i| i != leader)
        .map(|i| (i + 1, ens.addr(i)))
        .collect();
    let stop_poll = Arc::new(AtomicBool::new(false));
    let poller = {
        let (survivors, shared, stop) = (survivors.clone(), shared.clone(), stop_poll.clone());
        std::thread::spawn(move || poll_election(survivors, shared, stop))
    };
    let mut probes = JoinSet::new();
    for &(m, addr) in &survivors {
        let path = format!("{parent}/probe-m{m}");
        let (addr, shared) = (addr.to_string(), shared.clone());
        let interval = Duration::from_millis(spec.probe_interval_ms);
        probes.spawn(async move { (m, probe(addr, path, interval, shared).await) });
    }

    // Keep writing until the window is over and the new leader has taken
    // writes for a second (or the timeout).
    let window_us = (spec.window_secs * 1e6) as u64;
    let timeout_us = (spec.timeout_secs * 1e6) as u64;
    let mut reported = false;
    let end_us = loop {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let now = shared.now_us();
        let first = shared.first_after_us.load(Ordering::Acquire);
        if first != u64::MAX && !reported {
            reported = true;
            eprintln!(
                "  {label}: first write acknowledged {:.0} ms after the kill",
                ms(first - kill_us)
            );
        }
        let after = now - kill_us;
        if after >= timeout_us {
            break now;
        }
        if after >= window_us && first != u64::MAX && now >= first + 1_000_000 {
            break now;
        }
    };
    let _ = stop_tx.send(true);
    stop_poll.store(true, Ordering::Relaxed);
    let mut logs = Vec::new();
    let joined = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(r) = writers.join_next().await {
            if let Ok(log) = r {
                logs.push(log);
            }
        }
    })
    .await;
    if joined.is_err() {
        writers.abort_all();
    }
    drop(clients);
    // Probes: take what finished; a probe still trying failed.
    let mut probe_first: Option<(u64, usize)> = None;
    while let Some(r) = probes.try_join_next() {
        if let Ok((m, Some(at))) = r {
            if probe_first.is_none_or(|(t, _)| at < t) {
                probe_first = Some((at, m));
            }
        }
    }
    probes.abort_all();
    let election = tokio::task::block_in_place(|| poller.join().ok().flatten());

    // The figures.
    round.secs_after_kill = (end_us - kill_us) as f64 / 1e6;
    round.election_ms = election.map(|(at, _)| ms(at.saturating_sub(kill_us)));
    round.new_leader_member = election.map(|(_, m)| m);
    round.probe_ms = probe_first.map(|(at, _)| ms(at.saturating_sub(kill_us)));
    round.probe_member = probe_first.map(|(_, m)| m);
    let acks: Vec<&Ack> = logs.iter().flat_map(|l| &l.acks).collect();
    let first_after = ack_figures(round, &acks, kill_us, dead_us, end_us);
    round.acked_writes = logs.iter().map(|l| l.acks.len() as u64).sum();
    for l in &logs {
        for (k, v) in &l.errors {
            *round.error_kinds.entry(k.clone()).or_default() += v;
        }
    }
    round.errors = round.error_kinds.values().sum();
    eprintln!(
        "  {label}: election (srvr) {}, probe {}, first ack {}, gap {}; {:.0} writes/s before, {:.0} after; {} errors {:?}",
        fmt_ms(round.election_ms),
        fmt_ms(round.probe_ms),
        fmt_ms(round.first_ack_ms),
        fmt_ms(round.write_gap_ms),
        round.pre_kill_writes_per_sec,
        round.post_failover_writes_per_sec,
        round.errors,
        round.error_kinds
    );
    if joined.is_err() {
        round.failure = Some("writers still blocked 10 s after the round ended".into());
    }
    let no_ack = first_after.is_none().then(|| {
        format!(
            "no write acknowledged within {} s of killing member {}; survivors' log tails:\n{}",
            spec.timeout_secs,
            leader + 1,
            survivors
                .iter()
                .map(|&(m, _)| format!("--- member {m} ---\n{}", ens.log_tail(m - 1, 15)))
                .collect::<Vec<_>>()
                .join("\n")
        )
    });

    // Restart the killed member (or let the paused one go on, or heal the
    // partition) and wait until it serves, then check every member holds
    // every acknowledged create.
    let t = Instant::now();
    tokio::task::block_in_place(|| match spec.failure {
        Failure::Kill => ens.restart(leader),
        Failure::Pause => {
            ens.resume(leader)?;
            wait_serving(ens, leader)
        }
        Failure::Partition => {
            ens.heal()?;
            wait_serving(ens, leader)
        }
    })
    .with_context(|| format!("bringing {flavor} member {} back", leader + 1))?;
    round.restart_secs = Some(t.elapsed().as_secs_f64());
    tokio::task::block_in_place(|| ens.wait_for_leader(Duration::from_secs(30)))
        .context("no leader after the restart")?;
    if let Some(e) = no_ack {
        bail!(e);
    }
    let acked: Vec<(String, BTreeSet<String>)> = logs
        .iter()
        .map(|l| {
            (
                l.dir.clone(),
                l.acks.iter().map(|a| format!("n{}", a.n)).collect(),
            )
        })
        .collect();
    for i in 0..ens.len() {
        let addr = ens.addr(i).to_string();
        let check = tokio::time::timeout(
            Duration::from_secs(30),
            count_on_member(&addr, &parent, &acked),
        )
        .await;
        match check {
            Ok(Ok((present, missing))) => {
                round.znodes_per_member.push(Some(present));
                round.lost_acked_writes_per_member.push(Some(missing));
            }
            Ok(Err(e)) => {
                eprintln!("  {label}: cannot check member {}: {e:#}", i + 1);
                round.znodes_per_member.push(None);
                round.lost_acked_writes_per_member.push(None);
            }
            Err(_) => {
                eprintln!("  {label}: checking member {} took more than 30 s", i + 1);
                round.znodes_per_member.push(None);
                round.lost_acked_writes_per_member.push(None);
            }
        }
    }
    (round.modes_after, round.rss_after_bytes) = tokio::task::block_in_place(|| {
        let modes = ens
            .modes()
            .into_iter()
            .map(|m| m.unwrap_or_else(|| "not serving".into()))
            .collect();
        let rss = (0..ens.len())
            .map(|i| {
                ens.pid(i)
                    .and_then(|p| crate::servers::proc_status_bytes(p, "VmRSS").ok())
            })
            .collect();
        (modes, rss)
    });
    let lost: u64 = round.lost_acked_writes_per_member.iter().flatten().sum();
    eprintln!(
        "  {label}: member {} back in {:.1} s; znodes per member {:?}; members now {}{}",
        leader + 1,
        round.restart_secs.unwrap_or(0.0),
        round.znodes_per_member,
        round
            .modes_after
            .iter()
            .zip(&round.rss_after_bytes)
            .map(|(m, r)| format!(
                "{m} {}",
                r.map(|b| format!("{:.0} MiB", b as f64 / (1u64 << 20) as f64))
                    .unwrap_or_else(|| "?".into())
            ))
            .collect::<Vec<_>>()
            .join(" / "),
        if lost > 0 {
            format!(
                "; ACKNOWLEDGED WRITES MISSING per member: {:?}",
                round.lost_acked_writes_per_member
            )
        } else {
            String::new()
        }
    );
    Ok(())
}

/// Waits (60 s at most) until member `i` serves as leader or follower.
fn wait_serving(ens: &Ensemble, i: usize) -> Result<()> {
    let t = Instant::now();
    loop {
        let mode = quick_mode(ens.addr(i), Duration::from_millis(500));
        if matches!(mode.as_deref(), Some("leader" | "follower")) {
            return Ok(());
        }
        if t.elapsed() > Duration::from_secs(60) {
            bail!(
                "member {} does not serve 60 s after it came back; log:\n{}",
                i + 1,
                ens.log_tail(i, 15)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// On the member at `addr` alone (after `sync`): the znodes under the
/// writers' directories, and how many acknowledged ones are missing.
async fn count_on_member(
    addr: &str,
    parent: &str,
    acked: &[(String, BTreeSet<String>)],
) -> Result<(u64, u64)> {
    let c = zk::Client::connector()
        .with_fail_eagerly()
        .with_session_timeout(Duration::from_secs(10))
        .with_connection_timeout(Duration::from_secs(5))
        .connect(addr)
        .await
        .with_context(|| format!("connecting to {addr}"))?;
    c.sync(parent).await.context("sync")?;
    let (mut present, mut missing) = (0u64, 0u64);
    for (dir, names) in acked {
        let children: BTreeSet<String> = c
            .list_children(dir)
            .await
            .with_context(|| format!("list {dir}"))?
            .into_iter()
            .collect();
        present += children.len() as u64;
        missing += names.difference(&children).count() as u64;
    }
    Ok((present, missing))
}

pub fn fmt_ms(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.0} ms"))
        .unwrap_or_else(|| "–".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_of_rounds() {
        let s = Spread::of([Some(3.0), None, Some(1.0), Some(2.0)]).unwrap();
        assert_eq!((s.n, s.median, s.min, s.max), (3, 2.0, 1.0, 3.0));
        let s = Spread::of([Some(4.0), Some(1.0)]).unwrap();
        assert_eq!(s.median, 2.5);
        assert!(Spread::of([None]).is_none());
    }

    #[test]
    fn figures_from_acks() {
        let ack = |issue_ms: u64, ack_ms: u64| Ack {
            issue_us: issue_ms * 1000,
            ack_us: ack_ms * 1000,
            n: 0,
        };
        // 1000 acks/s until the kill at 2000 ms (reaped at 2001 ms); a
        // request issued before the kill is acked after it (it does not
        // count); the first write issued after the kill is acked at 2300 ms,
        // then 1000/s again.
        let mut acks: Vec<Ack> = (1000..2000).map(|t| ack(t - 1, t)).collect();
        acks.push(ack(1999, 2002));
        acks.extend((2300..4000).map(|t| ack(t - 1, t)));
        let refs: Vec<&Ack> = acks.iter().collect();
        let mut r = FailoverRound::default();
        let first = ack_figures(&mut r, &refs, 2_000_000, 2_001_000, 4_000_000);
        assert_eq!(first, Some(2_300_000));
        assert_eq!(r.first_ack_ms, Some(300.0));
        assert_eq!(r.write_gap_ms, Some(301.0));
        assert_eq!(r.pre_kill_writes_per_sec, 1000.0);
        assert!(
            (r.post_failover_writes_per_sec - 1000.0).abs() < 1.0,
            "{r:?}"
        );
        // 100 ms buckets from the kill: [2300, 2400) is the 4th.
        assert_eq!(r.half_throughput_ms, Some(400.0));
        assert_eq!(r.timeline_100ms.len(), 31);
        assert_eq!(r.timeline_100ms[0], 100);
        assert_eq!(r.timeline_100ms[10], 1);
        assert_eq!(r.timeline_100ms[13], 100);
    }
}
