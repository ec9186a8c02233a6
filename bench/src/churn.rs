//! Ephemeral churn: C churners, each in a loop opening a session, creating
//! one ephemeral znode and closing the session, for a warm-up and then a
//! measured window. On a ZooKeeper server each cycle is three transactions
//! (createSession, create, closeSession, which deletes the ephemeral).
//!
//! A cycle counts if it starts and completes inside the window. Its parts
//! are timed separately: *connect* (TCP + handshake until the session is
//! usable), *create*, and *close* (the client drops its last handle, which
//! sends closeSession; it is over when the client reports the session
//! `Closed`, i.e. the server answered). After the window every ephemeral
//! must be gone: the leftovers are counted (should be 0).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use hdrhistogram::Histogram;
use serde::Serialize;
use tokio::task::JoinSet;
use zookeeper_client as zk;

use crate::load::{error_kind, persistent};
use crate::stats::{new_histogram, record, Latency};

/// How long one cycle may take before the churner gives up on it.
const CYCLE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Clone, Debug, Serialize)]
pub struct ChurnSpec {
    /// Concurrent churners (each one session at a time).
    pub churners: usize,
    pub warmup_secs: f64,
    pub duration_secs: f64,
    pub rounds: usize,
    /// Session timeout the churners ask for (ms).
    pub session_timeout_ms: u64,
}

impl ChurnSpec {
    /// An upper bound on one round: warm-up, window, the last cycles'
    /// timeout, and the check for leftovers.
    pub fn round_bound_secs(&self) -> f64 {
        self.warmup_secs + self.duration_secs + CYCLE_TIMEOUT.as_secs_f64() + 20.0
    }
}

/// One system: every round pooled.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ChurnRun {
    /// Whole cycles (connect + create + close) completed inside the windows.
    pub cycles: u64,
    pub window_secs: f64,
    pub sessions_per_sec: f64,
    pub rounds_sessions_per_sec: Vec<f64>,
    pub connect: Latency,
    pub create: Latency,
    pub close: Latency,
    /// create + close: the ephemeral's life as the brief's figure.
    pub create_close: Latency,
    pub cycle: Latency,
    /// Cycle latency at [`crate::svg::CDF_QUANTILES`], in µs.
    pub cycle_cdf_us: Vec<f64>,
    /// CPU seconds of the server process during the windows, per cycle (µs).
    pub server_cpu_us_per_cycle: f64,
    pub errors: BTreeMap<String, u64>,
    /// Ephemerals of the round's churners still present after every
    /// churner's session closed (summed over rounds; should be 0).
    pub leftover_ephemerals: u64,
    pub failure: Option<String>,
}

/// One round's histograms, kept for pooling.
pub struct ChurnRound {
    connect: Histogram<u64>,
    create: Histogram<u64>,
    close: Histogram<u64>,
    create_close: Histogram<u64>,
    cycle: Histogram<u64>,
    errors: BTreeMap<String, u64>,
    window_secs: f64,
    server_cpu_secs: f64,
    leftover: u64,
    failure: Option<String>,
}

impl ChurnRound {
    pub fn failed(why: String) -> ChurnRound {
        let mut r = ChurnRound::empty();
        r.failure = Some(why);
        r
    }

    fn empty() -> ChurnRound {
        ChurnRound {
            connect: new_histogram(),
            create: new_histogram(),
            close: new_histogram(),
            create_close: new_histogram(),
            cycle: new_histogram(),
            errors: BTreeMap::new(),
            window_secs: 0.0,
            server_cpu_secs: 0.0,
            leftover: 0,
            failure: None,
        }
    }

    fn merge(&mut self, o: &ChurnRound) {
        for (a, b) in [
            (&mut self.connect, &o.connect),
            (&mut self.create, &o.create),
            (&mut self.close, &o.close),
            (&mut self.create_close, &o.create_close),
            (&mut self.cycle, &o.cycle),
        ] {
            a.add(b).expect("same histogram bounds");
        }
        for (k, v) in &o.errors {
            *self.errors.entry(k.clone()).or_default() += v;
        }
    }
}

/// Pools the rounds of one system.
pub fn summarize(rounds: &[ChurnRound]) -> ChurnRun {
    let mut all = ChurnRound::empty();
    let (mut window, mut cpu, mut leftover) = (0.0, 0.0, 0);
    let mut failures = Vec::new();
    for r in rounds {
        all.merge(r);
        window += r.window_secs;
        cpu += r.server_cpu_secs;
        leftover += r.leftover;
        failures.extend(r.failure.clone());
    }
    let cycles = all.cycle.len();
    ChurnRun {
        cycles,
        window_secs: window,
        sessions_per_sec: if window > 0.0 {
            cycles as f64 / window
        } else {
            0.0
        },
        rounds_sessions_per_sec: rounds
            .iter()
            .map(|r| {
                if r.window_secs > 0.0 {
                    r.cycle.len() as f64 / r.window_secs
                } else {
                    0.0
                }
            })
            .collect(),
        connect: Latency::of(&all.connect),
        create: Latency::of(&all.create),
        close: Latency::of(&all.close),
        create_close: Latency::of(&all.create_close),
        cycle: Latency::of(&all.cycle),
        cycle_cdf_us: crate::svg::cdf_points(&all.cycle),
        server_cpu_us_per_cycle: if cycles > 0 {
            cpu * 1e6 / cycles as f64
        } else {
            0.0
        },
        errors: all.errors,
        leftover_ephemerals: leftover,
        failure: (!failures.is_empty()).then(|| failures.join("; ")),
    }
}

/// One measured round against the server at `cluster` (process `pid`).
pub async fn run_round(cluster: &str, pid: u32, spec: &ChurnSpec, tag: &str) -> ChurnRound {
    match run_round_inner(cluster, pid, spec, tag).await {
        Ok(r) => r,
        Err(e) => ChurnRound::failed(format!("{e:#}")),
    }
}

struct Cycle {
    connect: Duration,
    create: Duration,
    close: Duration,
}

/// One connect, create-ephemeral, close cycle.
async fn cycle(cluster: &str, path: &str, timeout_ms: u64) -> Result<Cycle, zk::Error> {
    let t0 = Instant::now();
    let client = zk::Client::connector()
        .with_session_timeout(Duration::from_millis(timeout_ms))
        .with_connection_timeout(Duration::from_secs(5))
        .connect(cluster)
        .await?;
    let t1 = Instant::now();
    client
        .create(
            path,
            b"e",
            &zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all()),
        )
        .await?;
    let t2 = Instant::now();
    let mut state = client.state_watcher();
    drop(client);
    loop {
        match state.changed().await {
            zk::SessionState::Closed => break,
            zk::SessionState::Expired => return Err(zk::Error::SessionExpired),
            zk::SessionState::AuthFailed => return Err(zk::Error::AuthFailed),
            _ => {}
        }
    }
    let t3 = Instant::now();
    Ok(Cycle {
        connect: t1 - t0,
        create: t2 - t1,
        close: t3 - t2,
    })
}

async fn run_round_inner(
    cluster: &str,
    pid: u32,
    spec: &ChurnSpec,
    tag: &str,
) -> Result<ChurnRound> {
    let parent = format!("/bench-churn-{tag}");
    let admin = crate::load::connect_sessions(cluster, 1)
        .await?
        .pop()
        .expect("one session");
    match admin.create(&parent, b"", &persistent()).await {
        Ok(_) | Err(zk::Error::NodeExists) => {}
        Err(e) => bail!("create {parent}: {e}"),
    }
    let start = Instant::now();
    let measure_start = start + Duration::from_secs_f64(spec.warmup_secs);
    let end = measure_start + Duration::from_secs_f64(spec.duration_secs);
    let mut set = JoinSet::new();
    for c in 0..spec.churners {
        let (cluster, parent, timeout_ms) =
            (cluster.to_string(), parent.clone(), spec.session_timeout_ms);
        set.spawn(async move {
            let mut r = ChurnRound::empty();
            let mut n = 0u64;
            loop {
                let t0 = Instant::now();
                if t0 >= end {
                    break;
                }
                n += 1;
                let path = format!("{parent}/c{c}-{n}");
                match tokio::time::timeout(CYCLE_TIMEOUT, cycle(&cluster, &path, timeout_ms)).await
                {
                    Ok(Ok(cy)) => {
                        if t0 >= measure_start && Instant::now() <= end {
                            record(&mut r.connect, cy.connect);
                            record(&mut r.create, cy.create);
                            record(&mut r.close, cy.close);
                            record(&mut r.create_close, cy.create + cy.close);
                            record(&mut r.cycle, cy.connect + cy.create + cy.close);
                        }
                    }
                    Ok(Err(e)) => *r.errors.entry(error_kind(&e)).or_default() += 1,
                    Err(_) => *r.errors.entry("cycle timeout".into()).or_default() += 1,
                }
            }
            r
        });
    }
    tokio::time::sleep_until(measure_start.into()).await;
    let cpu0 = crate::servers::cpu_secs(Some(pid))?;
    tokio::time::sleep_until(end.into()).await;
    let cpu1 = crate::servers::cpu_secs(Some(pid))?;
    let mut round = ChurnRound::empty();
    let drained = tokio::time::timeout(CYCLE_TIMEOUT + Duration::from_secs(5), async {
        while let Some(r) = set.join_next().await {
            round.merge(&r.context("churner panicked")?);
        }
        Ok::<(), anyhow::Error>(())
    })
    .await;
    match drained {
        Ok(r) => r?,
        Err(_) => bail!("churners still running {CYCLE_TIMEOUT:?} after the window"),
    }
    round.window_secs = spec.duration_secs;
    round.server_cpu_secs = cpu1 - cpu0;
    // Every churner's session is closed: no ephemeral may be left.
    admin.sync(&parent).await.context("sync before counting")?;
    round.leftover = admin
        .list_children(&parent)
        .await
        .with_context(|| format!("list {parent}"))?
        .len() as u64;
    Ok(round)
}

/// Cycles the churners had going (only for the progress line).
pub fn describe(spec: &ChurnSpec) -> String {
    format!(
        "{} churners (connect, create ephemeral, close), {} s warm-up + {} s measured",
        spec.churners, spec.warmup_secs, spec.duration_secs
    )
}
