//! Prometheus metrics on an HTTP port (`metricsProvider.httpPort`, as
//! ZooKeeper's PrometheusMetricsProvider): request latencies, outstanding
//! requests, fsync time, quorum size, elections, and the tree's and
//! sessions' sizes. The exposition format comes from `prometheus-client`;
//! the core loop updates the values after each batch, the HTTP task
//! encodes them on each scrape.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::core::server::Server;

pub struct Metrics {
    registry: Registry,
    latency: Histogram,
    outstanding: Gauge,
    pending_txns: Gauge,
    znodes: Gauge,
    watches: Gauge,
    sessions: Gauge,
    connections: Gauge,
    packets_received: Gauge,
    packets_sent: Gauge,
    txns_applied: Gauge,
    fsyncs: Gauge,
    fsync_seconds: Gauge<f64, std::sync::atomic::AtomicU64>,
    quorum_size: Gauge,
    elections: Counter,
    leader: Gauge,
    elections_seen: AtomicU64,
    recipe_calls: Family<ModuleLabel, Gauge>,
    recipe_errors: Family<ModuleLabel, Gauge>,
    recipe_fuel: Family<ModuleLabel, Gauge>,
    recipe_waits: Gauge,
    /// When the per-module figures were last taken (monotonic ms since
    /// `started`, plus 1000).
    recipes_at: AtomicU64,
    /// The origin of `recipes_at`.
    started: std::time::Instant,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModuleLabel {
    module: String,
}

impl Metrics {
    pub fn new(quorum_size: usize) -> Arc<Metrics> {
        let mut registry = Registry::with_prefix("wazoo");
        let latency = Histogram::new([
            0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
        ]);
        let m = Metrics {
            latency,
            outstanding: Gauge::default(),
            pending_txns: Gauge::default(),
            znodes: Gauge::default(),
            watches: Gauge::default(),
            sessions: Gauge::default(),
            connections: Gauge::default(),
            packets_received: Gauge::default(),
            packets_sent: Gauge::default(),
            txns_applied: Gauge::default(),
            fsyncs: Gauge::default(),
            fsync_seconds: Gauge::default(),
            quorum_size: Gauge::default(),
            elections: Counter::default(),
            leader: Gauge::default(),
            elections_seen: AtomicU64::new(0),
            recipe_calls: Family::default(),
            recipe_errors: Family::default(),
            recipe_fuel: Family::default(),
            recipe_waits: Gauge::default(),
            recipes_at: AtomicU64::new(0),
            started: std::time::Instant::now(),
            registry: Registry::default(),
        };
        registry.register(
            "recipe_calls",
            "Recipe calls and callbacks run here, per module",
            m.recipe_calls.clone(),
        );
        registry.register(
            "recipe_errors",
            "Recipe calls and callbacks that failed, per module",
            m.recipe_errors.clone(),
        );
        registry.register(
            "recipe_fuel_used",
            "Fuel the module's calls and callbacks burned",
            m.recipe_fuel.clone(),
        );
        registry.register(
            "recipe_waits",
            "Pending recipe waits (replicated)",
            m.recipe_waits.clone(),
        );
        registry.register(
            "request_latency_seconds",
            "Time from a request's arrival to its reply (millisecond resolution)",
            m.latency.clone(),
        );
        registry.register(
            "outstanding_requests",
            "Requests received but not answered",
            m.outstanding.clone(),
        );
        registry.register(
            "pending_txns",
            "Txns proposed but not yet committed",
            m.pending_txns.clone(),
        );
        registry.register("znode_count", "Nodes in the tree", m.znodes.clone());
        registry.register("watch_count", "Watches set", m.watches.clone());
        registry.register("sessions", "Live sessions", m.sessions.clone());
        registry.register("connections", "Client connections", m.connections.clone());
        registry.register(
            "packets_received",
            "Client packets received",
            m.packets_received.clone(),
        );
        registry.register(
            "packets_sent",
            "Client packets sent",
            m.packets_sent.clone(),
        );
        registry.register(
            "txns_applied",
            "Txns applied to the tree",
            m.txns_applied.clone(),
        );
        registry.register("fsyncs", "Group commits of the txn log", m.fsyncs.clone());
        registry.register(
            "fsync_seconds",
            "Time spent in group commits (flush + fdatasync)",
            m.fsync_seconds.clone(),
        );
        registry.register(
            "quorum_size",
            "Votes needed for a quorum (1 standalone)",
            m.quorum_size.clone(),
        );
        registry.register(
            "elections",
            "Leader elections this member took part in",
            m.elections.clone(),
        );
        registry.register(
            "is_leader",
            "1 on the leader (or a standalone member)",
            m.leader.clone(),
        );
        m.quorum_size.set(quorum_size as i64);
        let mut m = m;
        m.registry = registry;
        Arc::new(m)
    }

    /// Takes the pipeline's figures (called by the core loop).
    pub fn update(&self, s: &mut Server, connections: usize, log: &wazoo_storage::LogStats) {
        for l in s.stats.latency_samples_ms.drain(..) {
            self.latency.observe(l as f64 / 1000.0);
        }
        self.outstanding.set(s.outstanding_requests() as i64);
        self.pending_txns.set(s.pending_txns() as i64);
        self.znodes.set(s.tree().node_count() as i64);
        self.watches.set(s.watches().count() as i64);
        self.sessions.set(s.sessions().len() as i64);
        self.connections.set(connections as i64);
        self.packets_received.set(s.stats.packets_received as i64);
        self.packets_sent.set(s.stats.packets_sent as i64);
        self.txns_applied.set(s.stats.txns_applied as i64);
        self.fsyncs.set(log.commits() as i64);
        self.fsync_seconds.set(log.commit_micros() as f64 / 1e6);
        let leads = matches!(
            s.role(),
            crate::core::server::Role::Leader { .. } | crate::core::server::Role::Standalone
        );
        self.leader.set(leads as i64);
        self.recipe_waits.set(s.recipe_waits().len() as i64);
        // The runtime's counters are behind a lock: at most once a second.
        // On the monotonic clock, shifted so that the first update reads them.
        let now = self.started.elapsed().as_millis() as u64 + 1000;
        if now.saturating_sub(self.recipes_at.load(Ordering::Relaxed)) < 1000 {
            return;
        }
        self.recipes_at.store(now, Ordering::Relaxed);
        for m in s.recipe_modules().unwrap_or_default() {
            let l = ModuleLabel { module: m.name };
            self.recipe_calls.get_or_create(&l).set(m.calls as i64);
            self.recipe_errors.get_or_create(&l).set(m.errors as i64);
            self.recipe_fuel.get_or_create(&l).set(m.fuel_used as i64);
        }
    }

    /// Takes consensus' election count (a running total).
    pub fn set_elections(&self, total: u64) {
        let seen = self.elections_seen.swap(total, Ordering::Relaxed);
        if total > seen {
            self.elections.inc_by(total - seen);
        }
    }

    pub fn encode(&self) -> String {
        let mut out = String::new();
        if encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}

/// Serves `GET /metrics` on `addr` (a minimal HTTP/1.1 responder: one
/// request per connection, bounded request size).
pub async fn serve(addr: SocketAddr, metrics: Arc<Metrics>) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    tracing::info!(%addr, "metrics on http://{addr}/metrics");
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                continue;
            };
            let m = Arc::clone(&metrics);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let mut n = 0;
                while n < buf.len() {
                    match tokio::time::timeout(
                        std::time::Duration::from_secs(5),
                        s.read(&mut buf[n..]),
                    )
                    .await
                    {
                        Ok(Ok(0)) | Err(_) | Ok(Err(_)) => break,
                        Ok(Ok(k)) => n += k,
                    }
                    if buf[..n].windows(4).any(|w| w == b"\r\n\r\n") {
                        break;
                    }
                }
                let req = String::from_utf8_lossy(&buf[..n]);
                let path = req.split_whitespace().nth(1).unwrap_or("");
                let (status, ctype, body) =
                    if req.starts_with("GET ") && (path == "/metrics" || path == "/") {
                        (
                            "200 OK",
                            "text/plain; version=0.0.4; charset=utf-8",
                            m.encode(),
                        )
                    } else {
                        ("404 Not Found", "text/plain", "not found\n".to_string())
                    };
                let resp = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = s.write_all(resp.as_bytes()).await;
                let _ = s.shutdown().await;
            });
        }
    });
    Ok(())
}
