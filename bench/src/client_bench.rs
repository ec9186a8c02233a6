//! The client-throughput figure (docs/BENCHMARKS.md; its history in docs/benchmarks/HISTORY.md): ONE connection to wazoo
//! on loopback pipelining getData of a 100-byte node, `inflight` requests
//! outstanding, once through the `zookeeper-client` crate and once through our
//! own `wazoo-client`. Rounds alternate A B B A ... so that drift on the shared
//! machine hits both crates alike.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::Serialize;
use tokio::task::JoinSet;
use zookeeper_client as zk;

use crate::servers::cpu_secs;

const NODE: &str = "/bench-client";

#[derive(Clone, Debug, Serialize)]
pub struct ClientSpec {
    pub inflight: usize,
    pub warmup_secs: f64,
    pub duration_secs: f64,
    /// Measured runs per crate.
    pub rounds: usize,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct ClientRun {
    pub requests: u64,
    pub secs: f64,
    pub requests_per_sec: f64,
    /// CPU of this process (the client) per request, in µs.
    pub client_cpu_us_per_request: f64,
    /// CPU of the wazoo server per request, in µs.
    pub server_cpu_us_per_request: f64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct ClientResult {
    /// Per crate: every measured round, in the order run.
    pub zookeeper_client: Vec<ClientRun>,
    pub wazoo_client: Vec<ClientRun>,
    pub failure: Option<String>,
}

impl ClientResult {
    /// All rounds of one crate pooled: total requests / total time.
    pub fn pooled(runs: &[ClientRun]) -> Option<ClientRun> {
        if runs.is_empty() {
            return None;
        }
        let requests: u64 = runs.iter().map(|r| r.requests).sum();
        let secs: f64 = runs.iter().map(|r| r.secs).sum();
        let weighted = |f: fn(&ClientRun) -> f64| {
            runs.iter().map(|r| f(r) * r.requests as f64).sum::<f64>() / requests.max(1) as f64
        };
        Some(ClientRun {
            requests,
            secs,
            requests_per_sec: requests as f64 / secs,
            client_cpu_us_per_request: weighted(|r| r.client_cpu_us_per_request),
            server_cpu_us_per_request: weighted(|r| r.server_cpu_us_per_request),
        })
    }
}

pub async fn run(addr: SocketAddr, server_pid: u32, spec: &ClientSpec) -> ClientResult {
    let mut result = ClientResult::default();
    if let Err(e) = run_inner(addr, server_pid, spec, &mut result).await {
        result.failure = Some(format!("{e:#}"));
    }
    result
}

async fn run_inner(
    addr: SocketAddr,
    server_pid: u32,
    spec: &ClientSpec,
    result: &mut ClientResult,
) -> Result<()> {
    {
        let c = zk::Client::connect(&addr.to_string()).await?;
        let opts = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
        match c.create(NODE, &[b'c'; 100], &opts).await {
            Ok(_) | Err(zk::Error::NodeExists) => {}
            Err(e) => bail!("create {NODE}: {e}"),
        }
    }
    for round in 0..spec.rounds {
        // A B B A A B ...: each crate goes first equally often.
        let zk_first = round % 2 == 0;
        for which in [zk_first, !zk_first] {
            if which {
                let run = zookeeper_client_round(addr, server_pid, spec).await?;
                log_round("zookeeper-client", round, &run);
                result.zookeeper_client.push(run);
            } else {
                let run = wazoo_client_round(addr, server_pid, spec).await?;
                log_round("wazoo-client", round, &run);
                result.wazoo_client.push(run);
            }
        }
    }
    Ok(())
}

fn log_round(name: &str, round: usize, run: &ClientRun) {
    eprintln!(
        "[client] {name} round {}: {:.0} requests/s, client CPU {:.1} µs/request",
        round + 1,
        run.requests_per_sec,
        run.client_cpu_us_per_request
    );
}

async fn zookeeper_client_round(
    addr: SocketAddr,
    server_pid: u32,
    spec: &ClientSpec,
) -> Result<ClientRun> {
    let c = zk::Client::connector()
        .with_session_timeout(Duration::from_secs(30))
        .connect(&addr.to_string())
        .await
        .context("zookeeper-client: connect")?;
    pipelined(server_pid, spec, move || {
        let c = c.clone();
        async move {
            c.get_data(NODE)
                .await
                .map(drop)
                .map_err(anyhow::Error::from)
        }
    })
    .await
    .context("zookeeper-client round")
}

/// The same load through our own client crate.
async fn wazoo_client_round(
    addr: SocketAddr,
    server_pid: u32,
    spec: &ClientSpec,
) -> Result<ClientRun> {
    let options = wazoo_client::ClientOptions::default().session_timeout(Duration::from_secs(30));
    let (c, events) = wazoo_client::Client::connect(&addr.to_string(), options)
        .await
        .context("wazoo-client: connect")?;
    let c2 = c.clone();
    let run = pipelined(server_pid, spec, move || {
        let c = c2.clone();
        async move {
            c.get_data(NODE)
                .await
                .map(drop)
                .map_err(anyhow::Error::from)
        }
    })
    .await
    .context("wazoo-client round");
    let _ = tokio::time::timeout(Duration::from_secs(5), c.close()).await;
    drop(events);
    run
}

/// `spec.inflight` tasks, each issuing `op` back to back, over one shared
/// connection: a warm-up, then the measured window.
async fn pipelined<F, Fut>(server_pid: u32, spec: &ClientSpec, op: F) -> Result<ClientRun>
where
    F: Fn() -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<()>> + Send + 'static,
{
    let start = Instant::now();
    let measure_start = start + Duration::from_secs_f64(spec.warmup_secs);
    let end = measure_start + Duration::from_secs_f64(spec.duration_secs);
    let counted = Arc::new(AtomicU64::new(0));
    let mut set = JoinSet::new();
    for _ in 0..spec.inflight {
        let (op, counted) = (op.clone(), counted.clone());
        set.spawn(async move {
            loop {
                let t0 = Instant::now();
                if t0 >= end {
                    return Ok::<(), anyhow::Error>(());
                }
                op().await?;
                if t0 >= measure_start && Instant::now() <= end {
                    counted.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
    }
    tokio::time::sleep_until(measure_start.into()).await;
    let (s0, c0) = (cpu_secs(Some(server_pid))?, cpu_secs(None)?);
    tokio::time::sleep_until(end.into()).await;
    let (s1, c1) = (cpu_secs(Some(server_pid))?, cpu_secs(None)?);
    tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(r) = set.join_next().await {
            r.context("task panicked")??;
        }
        Ok::<(), anyhow::Error>(())
    })
    .await
    .context("requests still outstanding 30 s after the window")??;
    let requests = counted.load(Ordering::Relaxed);
    let secs = spec.duration_secs;
    let per = |cpu: f64| cpu * 1e6 / requests.max(1) as f64;
    Ok(ClientRun {
        requests,
        secs,
        requests_per_sec: requests as f64 / secs,
        client_cpu_us_per_request: per(c1 - c0),
        server_cpu_us_per_request: per(s1 - s0),
    })
}
