//! Watch fan-out: N sessions each set a data watch on one znode, one writer
//! sets it, and the bench measures how long until every watcher got the
//! event. Repeated R rounds on the same sessions (a data watch is one-shot:
//! every round sets them again).
//!
//! Per round the clock starts just before the writer's setData is issued;
//! each watcher's delivery latency is the instant its task woke with the
//! event minus that start. "All delivered" is the largest of them: the
//! time until the last watcher knew.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::Serialize;
use tokio::task::JoinSet;
use zookeeper_client as zk;

use crate::load::{connect_sessions, persistent};
use crate::stats::{new_histogram, record, Latency};

/// Pause after closing a run's sessions (their closeSession requests are
/// sent in the background).
const CLOSE_PAUSE: Duration = Duration::from_secs(1);

/// The shape of the fan-out workload, the same for both systems.
#[derive(Clone, Debug, Serialize)]
pub struct FanoutSpec {
    /// Watcher counts to run, one after the other (e.g. 100 and 1000).
    pub watchers: Vec<usize>,
    /// Rounds (one write each) per watcher count and system.
    pub rounds: usize,
    /// A round fails when not every watcher got the event this long after
    /// the write.
    pub round_timeout_secs: f64,
}

impl FanoutSpec {
    /// An upper bound on one system's run for the largest watcher count:
    /// connecting the sessions (bounded by `connect_sessions`), then every round.
    pub fn bound_secs(&self) -> f64 {
        let most = self.watchers.iter().copied().max().unwrap_or(0) + 1;
        crate::load::connect_bound(most).as_secs_f64()
            + self.rounds as f64 * (self.round_timeout_secs + 10.0)
    }
}

/// One round: one write, every watcher's delivery.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FanoutRound {
    /// Time to register every watch (all getData-with-watch replies in).
    pub arm_ms: f64,
    /// The writer's setData latency.
    pub write_ms: f64,
    /// Until the last watcher got the event.
    pub all_delivered_ms: f64,
    pub delivery: Latency,
}

/// One system, one watcher count: every round pooled.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FanoutRun {
    pub watchers: usize,
    pub connect_secs: f64,
    /// Delivery latency of every watcher of every round.
    pub delivery: Latency,
    /// Median and worst "all delivered" over the rounds, in ms.
    pub all_delivered_ms_median: f64,
    pub all_delivered_ms_max: f64,
    /// Delivery latency at the quantiles of [`crate::svg::CDF_QUANTILES`],
    /// in µs, for the CDF plot.
    pub cdf_us: Vec<f64>,
    pub rounds: Vec<FanoutRound>,
    pub failure: Option<String>,
}

/// Runs every round for `n` watchers against `cluster`.
pub async fn run(cluster: &str, n: usize, spec: &FanoutSpec, tag: &str) -> FanoutRun {
    let mut out = FanoutRun {
        watchers: n,
        ..FanoutRun::default()
    };
    if let Err(e) = run_inner(cluster, n, spec, tag, &mut out).await {
        out.failure = Some(format!("{e:#}"));
    }
    out
}

async fn run_inner(
    cluster: &str,
    n: usize,
    spec: &FanoutSpec,
    tag: &str,
    out: &mut FanoutRun,
) -> Result<()> {
    let t = Instant::now();
    // n watchers and one writer of its own.
    let mut sessions = connect_sessions(cluster, n + 1).await?;
    out.connect_secs = t.elapsed().as_secs_f64();
    let writer = sessions.pop().expect("n + 1 sessions");
    let path = format!("/bench-fanout-{tag}-{n}");
    match writer.create(&path, b"0", &persistent()).await {
        Ok(_) | Err(zk::Error::NodeExists) => {}
        Err(e) => bail!("create {path}: {e}"),
    }
    let sessions = Arc::new(sessions);
    let mut pooled = new_histogram();
    let timeout = Duration::from_secs_f64(spec.round_timeout_secs);
    for round in 0..spec.rounds {
        // Arm: every session sets a data watch, all at once; the round
        // starts once every reply is in (so every watch is registered).
        let armed = Instant::now();
        let mut arm = JoinSet::new();
        for i in 0..n {
            let (sessions, path) = (sessions.clone(), path.clone());
            arm.spawn(async move {
                let (_, _, w) = sessions[i]
                    .get_and_watch_data(&path)
                    .await
                    .with_context(|| format!("getData+watch on session {i}"))?;
                Ok::<_, anyhow::Error>(w)
            });
        }
        let mut watchers = Vec::with_capacity(n);
        let got = tokio::time::timeout(timeout, async {
            while let Some(r) = arm.join_next().await {
                watchers.push(r.context("arm task panicked")??);
            }
            Ok::<(), anyhow::Error>(())
        })
        .await;
        match got {
            Ok(r) => r?,
            Err(_) => bail!(
                "round {}: arming {n} watches took over {timeout:?}",
                round + 1
            ),
        }
        let arm_ms = armed.elapsed().as_secs_f64() * 1e3;

        // Every watcher waits in its own task; the write goes out after
        // they are all spawned.
        let mut wait = JoinSet::new();
        for w in watchers {
            wait.spawn(async move {
                let ev = w.changed().await;
                (Instant::now(), ev.event_type)
            });
        }
        let write_start = Instant::now();
        writer
            .set_data(&path, format!("{round}").as_bytes(), None)
            .await
            .with_context(|| format!("round {}: setData {path}", round + 1))?;
        let write_ms = write_start.elapsed().as_secs_f64() * 1e3;
        let mut h = new_histogram();
        let mut last = Duration::ZERO;
        let done = tokio::time::timeout(timeout, async {
            while let Some(r) = wait.join_next().await {
                let (at, kind) = r.context("watcher task panicked")?;
                if kind != zk::EventType::NodeDataChanged {
                    bail!("a watcher got {kind:?}, not NodeDataChanged");
                }
                let d = at.saturating_duration_since(write_start);
                record(&mut h, d);
                last = last.max(d);
            }
            Ok::<(), anyhow::Error>(())
        })
        .await;
        match done {
            Ok(r) => r?,
            Err(_) => bail!(
                "round {}: {} of {n} watchers still without the event {timeout:?} after the write",
                round + 1,
                n as u64 - h.len()
            ),
        }
        pooled.add(&h).expect("same histogram bounds");
        out.rounds.push(FanoutRound {
            arm_ms,
            write_ms,
            all_delivered_ms: last.as_secs_f64() * 1e3,
            delivery: Latency::of(&h),
        });
    }
    out.delivery = Latency::of(&pooled);
    out.cdf_us = crate::svg::cdf_points(&pooled);
    let mut all: Vec<f64> = out.rounds.iter().map(|r| r.all_delivered_ms).collect();
    all.sort_by(f64::total_cmp);
    out.all_delivered_ms_median = all.get(all.len() / 2).copied().unwrap_or(0.0);
    out.all_delivered_ms_max = all.last().copied().unwrap_or(0.0);
    // Close the sessions, and give the closes a moment to reach the server
    // so they do not overlap the next system's run.
    drop(sessions);
    drop(writer);
    tokio::time::sleep(CLOSE_PAUSE).await;
    Ok(())
}
