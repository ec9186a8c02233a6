//! `recipe-isolation`: other clients' write latency while clients call a
//! fuel-exhausting recipe flat out, against the same writes with no recipe
//! load, on one standalone wazoo (docs/ARCHITECTURE.md, "Recipes", "Where
//! a step runs"). Rounds alternate the order of the two phases.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::Serialize;
use wazoo::plugin::abi::{self, Manifest, Reply, ABI_MAJOR, ABI_MINOR};

use super::wazoo_connect;
use crate::stats::{new_histogram, record, Latency};

#[derive(Clone, Debug, Serialize)]
pub struct IsolationSpec {
    /// Clients looping setData on a znode each.
    pub writers: usize,
    /// Clients calling `spin.spin` flat out during the loaded phase.
    pub spinners: usize,
    /// Unmeasured seconds at the start of each phase.
    pub warmup_secs: f64,
    /// Measured seconds per phase.
    pub secs: f64,
    /// Rounds of (quiet, loaded), alternating which goes first.
    pub rounds: usize,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct IsolationRun {
    /// setData round trips with no recipe load.
    pub quiet: Latency,
    /// setData round trips while the spinners call flat out.
    pub loaded: Latency,
    pub quiet_writes_per_sec: f64,
    pub loaded_writes_per_sec: f64,
    /// loaded / quiet (target: p99 at most 1.5).
    pub ratio_p50: f64,
    pub ratio_p99: f64,
    /// Fuel-exhausting calls answered per second during the loaded phase.
    pub spin_calls_per_sec: f64,
    pub failure: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct IsolationBlock {
    pub spec: IsolationSpec,
    /// The wazoo configuration lines the server ran with (`--wazoo-cfg`).
    pub wazoo_cfg: Vec<String>,
    pub run: IsolationRun,
}

/// Module `spin`: `spin` loops until its fuel (or deadline) runs out.
pub fn spin_module() -> Vec<u8> {
    let manifest = Manifest {
        abi: (ABI_MAJOR, ABI_MINOR),
        name: "spin".into(),
        version: "1.0.0".into(),
        methods: vec!["spin".into()],
        prefixes: Vec::new(),
        on_watch: false,
    };
    let manifest: String = abi::encode(&manifest)
        .expect("a manifest encodes")
        .iter()
        .map(|b| format!("\\{b:02x}"))
        .collect();
    let text = format!(
        r#"(module
  (memory (export "memory") 1)
  (func (export "alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "call") (param i32 i32) (result i64) (loop $l (br $l)) (unreachable))
  (@custom "wazoo:recipe" "{manifest}"))"#
    );
    wat::parse_str(text).expect("the spin module is valid WAT")
}

/// Runs the workload against `hosts` (a wazoo with `spin` loaded).
pub async fn isolation(hosts: &str, spec: &IsolationSpec) -> IsolationRun {
    let bound =
        Duration::from_secs_f64((spec.warmup_secs + spec.secs) * 2.0 * spec.rounds as f64 + 60.0);
    match tokio::time::timeout(bound, run(hosts, spec)).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => IsolationRun {
            failure: Some(format!("{e:#}")),
            ..Default::default()
        },
        Err(_) => IsolationRun {
            failure: Some(format!("took longer than {bound:?}")),
            ..Default::default()
        },
    }
}

async fn run(hosts: &str, spec: &IsolationSpec) -> Result<IsolationRun> {
    let mut writers = Vec::new();
    for k in 0..spec.writers {
        let c = wazoo_connect(hosts).await?;
        let path = format!("/bench-isolation-{k}");
        match c
            .create(
                &path,
                b"",
                &wazoo_client::Acl::open_unsafe(),
                wazoo_client::CreateMode::Persistent,
            )
            .await
        {
            Ok(_) | Err(wazoo_client::Error::NodeExists) => {}
            Err(e) => bail!("create {path}: {e}"),
        }
        writers.push((c, path));
    }
    let mut spinners = Vec::new();
    for _ in 0..spec.spinners {
        spinners.push(wazoo_connect(hosts).await?);
    }
    let (mut quiet, mut loaded) = (new_histogram(), new_histogram());
    let (mut quiet_secs, mut loaded_secs, mut spins) = (0.0, 0.0, 0u64);
    for round in 0..spec.rounds {
        for phase in 0..2 {
            let load = (phase + round) % 2 == 1;
            let stop = Arc::new(AtomicBool::new(false));
            let answered = Arc::new(AtomicU64::new(0));
            let mut spin_tasks = Vec::new();
            if load {
                for c in &spinners {
                    spin_tasks.push(tokio::spawn(spin_loop(
                        c.clone(),
                        Arc::clone(&stop),
                        Arc::clone(&answered),
                    )));
                }
            }
            let warm = Duration::from_secs_f64(spec.warmup_secs);
            let measured = Duration::from_secs_f64(spec.secs);
            let start = Instant::now();
            let (from, to) = (start + warm, start + warm + measured);
            let mut tasks = Vec::new();
            for (c, path) in &writers {
                tasks.push(tokio::spawn(write_loop(c.clone(), path.clone(), from, to)));
            }
            let mut spun_from = 0;
            tokio::time::sleep_until(from.into()).await;
            if load {
                spun_from = answered.load(Ordering::Relaxed);
            }
            for t in tasks {
                let h = t.await.context("a writer panicked")??;
                let into = if load { &mut loaded } else { &mut quiet };
                into.add(&h).expect("histograms of one shape");
            }
            stop.store(true, Ordering::Relaxed);
            for t in spin_tasks {
                t.await.context("a spinner panicked")??;
            }
            if load {
                loaded_secs += spec.secs;
                spins += answered.load(Ordering::Relaxed) - spun_from;
            } else {
                quiet_secs += spec.secs;
            }
        }
    }
    for (c, _) in writers {
        let _ = c.close().await;
    }
    for c in spinners {
        let _ = c.close().await;
    }
    let (q, l) = (Latency::of(&quiet), Latency::of(&loaded));
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
    Ok(IsolationRun {
        ratio_p50: ratio(l.p50_us, q.p50_us),
        ratio_p99: ratio(l.p99_us, q.p99_us),
        quiet_writes_per_sec: q.count as f64 / quiet_secs.max(f64::MIN_POSITIVE),
        loaded_writes_per_sec: l.count as f64 / loaded_secs.max(f64::MIN_POSITIVE),
        spin_calls_per_sec: spins as f64 / loaded_secs.max(f64::MIN_POSITIVE),
        quiet: q,
        loaded: l,
        failure: None,
    })
}

/// setData in a loop until `to`; the round trips that started at or after
/// `from` and ended by `to`.
async fn write_loop(
    c: wazoo_client::Client,
    path: String,
    from: Instant,
    to: Instant,
) -> Result<hdrhistogram::Histogram<u64>> {
    let mut h = new_histogram();
    loop {
        let t = Instant::now();
        if t >= to {
            return Ok(h);
        }
        c.set_data(&path, b"isolation", None)
            .await
            .with_context(|| format!("setData {path}"))?;
        let end = Instant::now();
        if t >= from && end <= to {
            record(&mut h, end - t);
        }
    }
}

/// `spin.spin` in a loop until `stop`: every answer must be an error (the
/// fuel or the deadline ran out).
async fn spin_loop(
    c: wazoo_client::Client,
    stop: Arc<AtomicBool>,
    answered: Arc<AtomicU64>,
) -> Result<()> {
    let args = abi::encode(&()).context("encoding ()")?;
    while !stop.load(Ordering::Relaxed) {
        let body = c.recipe_call("spin", "spin", &args).await?;
        match abi::decode::<Reply>(&body) {
            Ok(Reply::Error { .. }) => {}
            other => bail!("spin.spin must run out of fuel, answered {other:?}"),
        }
        answered.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}
