//! A member's metrics, under Apache ZooKeeper 3.8's names: `mntr` prints
//! them (`zk_znode_count`) and the Prometheus endpoint
//! (`metricsProvider.httpPort`) serves them as ZooKeeper's
//! PrometheusMetricsProvider does (`znode_count`, same types), with
//! wazoo's own beside them under `wazoo_`. docs/METRICS.md lists them all.
//!
//! One catalog ([`Metrics::families`]) feeds both, so the two cannot
//! disagree on a name. Figures come from three places:
//! - the pipeline (`Server`) and consensus (`Peer`), read by the core loop
//!   after each batch of events ([`Metrics::update`],
//!   [`Metrics::set_consensus`]);
//! - the connections' writers, which time each request from the moment
//!   its frame was read to the moment its reply was written, and record
//!   each write's requests together ([`Metrics::observe_requests`]):
//!   `readlatency`, `updatelatency` and the sub-millisecond
//!   `wazoo_request_latency_seconds` histogram;
//! - the log writer's running totals (`fsynctime`,
//!   `sync_processor_batch_size`).
//!
//! A scrape asks the core loop for a fresh catalog and waits for its next
//! batch (a tick at most, ticks come every half `tickTime`, 200 ms at
//! most); otherwise the core loop refreshes it once a second.

mod exposition;
mod figures;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use wazoo_zab::{LeaderReport, Peer, ServerState};

pub use exposition::{
    encode, java_double, mntr, mntr_values, Family, Format, MntrValue, Num, Value,
};
use exposition::{PROM_QUANTILES_ADVANCED, PROM_QUANTILES_BASIC};
pub use figures::{
    Histogram, HistogramFigures, LatencyBatch, Summary, SummaryFigures, LATENCY_BUCKETS_S,
};

use crate::core::server::{Role, Server};

/// How often the core loop refreshes the catalog nobody asked for.
const REFRESH_EVERY: Duration = Duration::from_secs(1);
/// How long a scrape waits for a fresh catalog before serving the last one.
const SCRAPE_WAIT: Duration = Duration::from_secs(1);

/// What the core loop knows of consensus, as of its last batch (an
/// ensemble member only).
#[derive(Debug, Clone, Copy)]
struct Consensus {
    state: ServerState,
    serving: bool,
    voters: usize,
    elections: u64,
    syncs_diff: u64,
    syncs_snap: u64,
    /// Times this member, leading, let its lease run out and stepped down.
    leases_expired: u64,
    leader: Option<LeaderReport>,
    /// A follower with `observerMasterPort`: the observers it has synced.
    master_synced_observers: Option<usize>,
    /// An observer: the member it syncs from (its learner master).
    observer_master_id: Option<u64>,
}

/// What `election_time` is measured with.
#[derive(Debug, Default)]
struct ElectionClock {
    /// When this member started looking for a leader.
    looking_since: Option<Instant>,
    /// Consensus' election count at the last call.
    elections_seen: u64,
    last_call: Option<Instant>,
}

/// Counter values at the last `srst`: `mntr` shows the difference.
#[derive(Debug, Default, Clone, Copy)]
struct Baselines {
    looking: u64,
    diff: u64,
    snap: u64,
    stale_sessions: u64,
    digest_mismatches: u64,
    txns_applied: u64,
    txns_refused: u64,
    local_reads: u64,
    audit_records: u64,
    log_fsyncs: u64,
    leases_expired: u64,
    step_reruns: u64,
    steps_offloaded: u64,
}

/// The log writer's totals as last seen.
#[derive(Debug, Default, Clone, Copy)]
struct LogSeen {
    commits: u64,
    commit_micros: u64,
    appends: u64,
}

pub struct Metrics {
    started: Instant,
    read_latency: Summary,
    update_latency: Summary,
    fsync_time: Summary,
    batch_size: Summary,
    election_time: Summary,
    request_latency: Histogram,
    consensus: Mutex<Option<Consensus>>,
    election: Mutex<ElectionClock>,
    baselines: Mutex<Baselines>,
    log_seen: Mutex<LogSeen>,
    /// The catalog as of the core loop's last refresh, for scrapes.
    exported: Mutex<(Option<Instant>, Vec<Family>)>,
    /// A scrape is waiting for a fresh catalog.
    wanted: AtomicBool,
    fresh: Notify,
}

/// What [`Metrics::families`] reads besides the metrics' own figures.
pub struct Sources<'a> {
    pub server: &'a Server,
    /// Client connections open on this member.
    pub conns: usize,
    /// The consensus' leader report when this member leads an ensemble.
    pub leader: Option<LeaderReport>,
    pub log: &'a wazoo_storage::LogStats,
}

impl Metrics {
    pub fn new() -> Arc<Metrics> {
        Arc::new(Metrics {
            started: Instant::now(),
            read_latency: Summary::new(1000.0),
            update_latency: Summary::new(1000.0),
            fsync_time: Summary::new(1000.0),
            batch_size: Summary::new(1.0),
            election_time: Summary::new(1000.0),
            request_latency: Histogram::default(),
            consensus: Mutex::new(None),
            election: Mutex::new(ElectionClock::default()),
            baselines: Mutex::new(Baselines::default()),
            log_seen: Mutex::new(LogSeen::default()),
            exported: Mutex::new((None, Vec::new())),
            wanted: AtomicBool::new(false),
            fresh: Notify::new(),
        })
    }

    /// The requests a connection's writer answered with one write: for
    /// each, `update` if it went through the write pipeline (ZooKeeper's
    /// `updatelatency`; otherwise `readlatency`, pings included as in
    /// ZooKeeper), timed from its frame read to its reply written. Each
    /// shared figure is touched once per write, not once per request.
    pub fn observe_requests(&self, batch: &LatencyBatch) {
        self.request_latency.observe_batch(batch);
        self.update_latency.observe_all(&batch.update_us);
        self.read_latency.observe_all(&batch.read_us);
    }

    /// Takes the pipeline's and the log's figures (the core loop calls it
    /// after each batch of events).
    pub fn update(&self, s: &mut Server, conns: usize, log: &wazoo_storage::LogStats) {
        // The pipeline's own millisecond samples are not used: the
        // connections time requests to the microsecond, socket to socket.
        s.stats.latency_samples_ms.clear();
        self.take_log(log);
        let now = Instant::now();
        let stale = {
            let e = self.exported.lock().unwrap_or_else(|e| e.into_inner());
            e.0.is_none_or(|at| now.duration_since(at) >= REFRESH_EVERY)
        };
        if !self.wanted.swap(false, Ordering::AcqRel) && !stale {
            return;
        }
        let leader = self.consensus().and_then(|c| c.leader);
        let families = self.families(&Sources {
            server: s,
            conns,
            leader,
            log,
        });
        *self.exported.lock().unwrap_or_else(|e| e.into_inner()) = (Some(now), families);
        self.fresh.notify_waiters();
    }

    /// Takes consensus' figures (an ensemble member's core loop calls it
    /// after each batch of events).
    pub fn set_consensus(&self, peer: &Peer) {
        let status = peer.status();
        let stats = peer.stats();
        let c = Consensus {
            state: status.state,
            serving: status.serving,
            voters: peer.config().voters.len(),
            elections: stats.elections,
            syncs_diff: stats.syncs_diff,
            syncs_snap: stats.syncs_snap,
            leases_expired: stats.leases_expired,
            leader: peer.leader_report(),
            master_synced_observers: peer.master_synced_observers(),
            observer_master_id: match status.state {
                ServerState::Observing => peer.learning_from(),
                _ => None,
            },
        };
        // ZooKeeper's election_time: from starting to look for a leader to
        // knowing it (to following or leading). An election that began
        // and ended within one batch began after the previous call.
        {
            let now = Instant::now();
            let mut e = self.election.lock().unwrap_or_else(|e| e.into_inner());
            if c.elections > e.elections_seen && e.looking_since.is_none() {
                e.looking_since = Some(e.last_call.unwrap_or(self.started));
            }
            match (e.looking_since, c.state) {
                (None, ServerState::Looking) => e.looking_since = Some(now),
                (Some(t), s) if s != ServerState::Looking => {
                    let us = u64::try_from(now.duration_since(t).as_micros()).unwrap_or(u64::MAX);
                    self.election_time.observe(us);
                    e.looking_since = None;
                }
                _ => {}
            }
            e.elections_seen = c.elections;
            e.last_call = Some(now);
        }
        *self.consensus.lock().unwrap_or_else(|e| e.into_inner()) = Some(c);
    }

    /// `srst`: `mntr`'s counters and summaries start again (ZooKeeper's
    /// `ServerStats.reset` resets every metric of its default provider);
    /// Prometheus' stay monotonic.
    pub fn reset(&self, s: &Server, log: &wazoo_storage::LogStats) {
        for summary in self.summaries() {
            summary.reset();
        }
        let c = self.consensus();
        *self.baselines.lock().unwrap_or_else(|e| e.into_inner()) = Baselines {
            looking: c.map_or(0, |c| c.elections),
            diff: c.map_or(0, |c| c.syncs_diff),
            snap: c.map_or(0, |c| c.syncs_snap),
            stale_sessions: s.stats.sessions_expired,
            digest_mismatches: s.stats.digest_mismatches,
            txns_applied: s.stats.txns_applied,
            txns_refused: s.stats.txns_refused,
            local_reads: s.stats.local_reads,
            audit_records: s.stats.audit_records,
            log_fsyncs: log.fsyncs(),
            leases_expired: c.map_or(0, |c| c.leases_expired),
            step_reruns: s.recipe_step_reruns().0,
            steps_offloaded: s.recipe_steps_offloaded(),
        };
    }

    fn summaries(&self) -> [&Summary; 5] {
        [
            &self.read_latency,
            &self.update_latency,
            &self.fsync_time,
            &self.batch_size,
            &self.election_time,
        ]
    }

    fn consensus(&self) -> Option<Consensus> {
        *self.consensus.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Turns the log writer's running totals into `fsynctime` and
    /// `sync_processor_batch_size` observations. The writer reports a
    /// durable zxid after each group commit and the core loop comes here
    /// after each batch, so a delta is usually one commit; when it holds
    /// several, each is counted with their mean.
    fn take_log(&self, log: &wazoo_storage::LogStats) {
        let now = LogSeen {
            commits: log.commits(),
            commit_micros: log.commit_micros(),
            appends: log.appends(),
        };
        let mut seen = self.log_seen.lock().unwrap_or_else(|e| e.into_inner());
        let commits = now.commits.saturating_sub(seen.commits);
        let micros = now.commit_micros.saturating_sub(seen.commit_micros);
        let appends = now.appends.saturating_sub(seen.appends);
        if let (Some(each_us), Some(each_txns)) =
            (micros.checked_div(commits), appends.checked_div(commits))
        {
            self.fsync_time.observe_n(each_us, commits);
            self.batch_size.observe_n(each_txns, commits);
            *seen = now;
        }
    }

    /// Every metric, as `mntr` and the Prometheus endpoint show them.
    pub fn families(&self, src: &Sources<'_>) -> Vec<Family> {
        let s = src.server;
        let c = self.consensus();
        let base = *self.baselines.lock().unwrap_or_else(|e| e.into_inner());
        let mut f = Vec::with_capacity(64);
        let mut text = |name: &str, help: &'static str, v: String| {
            f.push(Family {
                name: name.into(),
                help,
                value: Value::Text(v),
            })
        };
        text(
            "version",
            "The version ZooKeeper's clients see",
            crate::admin::version(),
        );
        text(
            "server_state",
            "standalone, leader, follower, observer or read-only",
            crate::admin::mode(s).into(),
        );
        if let Some(c) = c {
            text(
                "peer_state",
                "The consensus state and phase",
                peer_state(&c),
            );
        }
        let gauge = |f: &mut Vec<Family>, name: &str, help: &'static str, v: Num| {
            f.push(Family {
                name: name.into(),
                help,
                value: Value::Gauge(v),
            })
        };
        let int = |v: usize| Num::Int(i64::try_from(v).unwrap_or(i64::MAX));
        let st = &s.stats;
        let avg = if st.requests_completed == 0 {
            0.0
        } else {
            st.total_latency_ms as f64 / st.requests_completed as f64
        };
        let (received, sent) = s.packets_since_reset();
        gauge(
            &mut f,
            "avg_latency",
            "Mean request latency since srst, ms",
            Num::Float(avg),
        );
        gauge(
            &mut f,
            "max_latency",
            "Largest request latency since srst, ms",
            Num::Int(st.max_latency_ms),
        );
        gauge(
            &mut f,
            "min_latency",
            "Smallest request latency since srst, ms",
            Num::Int(st.min_latency_ms),
        );
        gauge(
            &mut f,
            "packets_received",
            "Client packets received since srst",
            Num::Int(received as i64),
        );
        gauge(
            &mut f,
            "packets_sent",
            "Client packets sent since srst",
            Num::Int(sent as i64),
        );
        gauge(
            &mut f,
            "num_alive_connections",
            "Client connections open",
            int(src.conns),
        );
        gauge(
            &mut f,
            "outstanding_requests",
            "Requests received and not yet answered",
            int(s.outstanding_requests()),
        );
        gauge(
            &mut f,
            "uptime",
            "Milliseconds since the member started serving",
            Num::Int(self.started.elapsed().as_millis() as i64),
        );
        gauge(
            &mut f,
            "znode_count",
            "Nodes in the tree, counted as ZooKeeper counts them (one more)",
            int(crate::admin::reported_node_count(s)),
        );
        gauge(
            &mut f,
            "watch_count",
            "Watches set",
            int(s.watches().count()),
        );
        gauge(
            &mut f,
            "ephemerals_count",
            "Ephemeral nodes",
            int(s.tree().ephemeral_count()),
        );
        gauge(
            &mut f,
            "approximate_data_size",
            "Bytes of node data and paths",
            Num::Int(s.tree().approximate_data_size() as i64),
        );
        // A read-only member's sessions are local in the table but counted
        // as ZooKeeper's read-only server counts them: with the others.
        let local = match s.role() {
            Role::Looking => 0,
            _ => s.sessions().local_len(),
        };
        gauge(
            &mut f,
            "global_sessions",
            "Sessions every member knows (created by a txn)",
            int(s.sessions().len() - local),
        );
        gauge(
            &mut f,
            "local_sessions",
            "Sessions local to this member (localSessionsEnabled)",
            int(local),
        );
        if let Some(n) = open_fds() {
            gauge(
                &mut f,
                "open_file_descriptor_count",
                "File descriptors open",
                int(n),
            );
        }
        if let Some(n) = max_fds() {
            gauge(
                &mut f,
                "max_file_descriptor_count",
                "The process' soft limit on open files",
                Num::Int(n),
            );
        }
        if let Some(c) = c {
            gauge(
                &mut f,
                "quorum_size",
                "Voting members of the ensemble",
                int(c.voters),
            );
            // ZooKeeper 3.8's mntr: a follower with observerMasterPort
            // reports the observers it has synced, an observer the member
            // it syncs from.
            if let Some(n) = c.master_synced_observers {
                gauge(
                    &mut f,
                    "synced_observers",
                    "Observers synced by this follower (observerMasterPort)",
                    int(n),
                );
            }
            // mntr only: ZooKeeper exports no such Prometheus metric.
            if let Some(id) = c.observer_master_id {
                f.push(Family {
                    name: "observer_master_id".into(),
                    help: "",
                    value: Value::Text(id.to_string()),
                });
            }
        }
        if let Some(l) = src.leader {
            let size = |v: usize| {
                // ZooKeeper shows -1 until the first proposal.
                if l.max_proposal_bytes == 0 {
                    Num::Int(-1)
                } else {
                    int(v)
                }
            };
            gauge(
                &mut f,
                "learners",
                "Followers and observers connected",
                int(l.learners),
            );
            gauge(
                &mut f,
                "synced_followers",
                "Voting followers synced",
                int(l.synced_followers),
            );
            gauge(
                &mut f,
                "synced_non_voting_followers",
                "Non-voting followers synced (wazoo has none)",
                Num::Int(0),
            );
            gauge(
                &mut f,
                "synced_observers",
                "Observers synced",
                int(l.synced_observers),
            );
            gauge(
                &mut f,
                "pending_syncs",
                "sync requests waiting for the commit point",
                int(l.pending_syncs),
            );
            gauge(
                &mut f,
                "leader_uptime",
                "Milliseconds since this member started leading",
                Num::Int(l.leader_uptime_ms as i64),
            );
            gauge(
                &mut f,
                "last_proposal_size",
                "Bytes of the last proposal",
                size(l.last_proposal_bytes),
            );
            gauge(
                &mut f,
                "max_proposal_size",
                "Bytes of the largest proposal",
                size(l.max_proposal_bytes),
            );
            gauge(
                &mut f,
                "min_proposal_size",
                "Bytes of the smallest proposal",
                size(l.min_proposal_bytes),
            );
            // ZooKeeper 3.4's name for the learners: mntr only, for the
            // monitoring scripts of that time.
            f.push(Family {
                name: "followers".into(),
                help: "",
                value: Value::Text(l.learners.to_string()),
            });
        }
        let counter = |f: &mut Vec<Family>, name: &str, help: &'static str, v: u64, base: u64| {
            let total = name.starts_with("wazoo_");
            f.push(Family {
                name: name.into(),
                help,
                value: Value::Counter {
                    prom: v,
                    mntr: v.saturating_sub(base),
                    total,
                },
            })
        };
        let (elections, diffs, snaps) =
            c.map_or((0, 0, 0), |c| (c.elections, c.syncs_diff, c.syncs_snap));
        counter(
            &mut f,
            "looking_count",
            "Times this member started looking for a leader",
            elections,
            base.looking,
        );
        counter(
            &mut f,
            "diff_count",
            "Learners this leader synced with a DIFF",
            diffs,
            base.diff,
        );
        counter(
            &mut f,
            "snap_count",
            "Learners this leader synced with a snapshot",
            snaps,
            base.snap,
        );
        counter(
            &mut f,
            "stale_sessions_expired",
            "Sessions expired by their timeout",
            st.sessions_expired,
            base.stale_sessions,
        );
        counter(
            &mut f,
            "digest_mismatches_count",
            "Txns after which the tree digest differed from the leader's",
            st.digest_mismatches,
            base.digest_mismatches,
        );
        let summary = |f: &mut Vec<Family>, name: &str, help: &'static str, s: &Summary, adv| {
            let prom_qs: &[f64] = if adv {
                &PROM_QUANTILES_ADVANCED
            } else {
                &PROM_QUANTILES_BASIC
            };
            let mntr_qs: Vec<f64> = exposition::MNTR_QUANTILES.iter().map(|q| q.0).collect();
            f.push(Family {
                name: name.into(),
                help,
                value: Value::Summary {
                    prom: s.prometheus(prom_qs),
                    mntr: s.mntr(if adv { &mntr_qs } else { &[] }),
                    advanced: adv,
                },
            })
        };
        summary(
            &mut f,
            "readlatency",
            "Read latency (pings included), ms, frame read to reply written",
            &self.read_latency,
            true,
        );
        summary(
            &mut f,
            "updatelatency",
            "Write latency, ms, frame read to reply written",
            &self.update_latency,
            true,
        );
        summary(
            &mut f,
            "fsynctime",
            "Time of a group commit of the txn log (write and fdatasync), ms",
            &self.fsync_time,
            false,
        );
        summary(
            &mut f,
            "sync_processor_batch_size",
            "Txns written per group commit",
            &self.batch_size,
            false,
        );
        summary(
            &mut f,
            "election_time",
            "Time from looking for a leader to following or leading, ms",
            &self.election_time,
            false,
        );
        // wazoo's own.
        f.push(Family {
            name: "wazoo_request_latency_seconds".into(),
            help: "Request latency, frame read to reply written",
            value: Value::Histogram(self.request_latency.figures()),
        });
        gauge(
            &mut f,
            "wazoo_pending_txns",
            "Txns proposed and not yet applied",
            int(s.pending_txns()),
        );
        counter(
            &mut f,
            "wazoo_txns_applied",
            "Txns applied to the tree",
            st.txns_applied,
            base.txns_applied,
        );
        counter(
            &mut f,
            "wazoo_txns_refused",
            "Committed txns the tree refused (0 unless prep and apply disagree)",
            st.txns_refused,
            base.txns_refused,
        );
        counter(
            &mut f,
            "wazoo_reads_on_io_threads",
            "Reads answered by the client I/O threads from the published tree (wazoo.client.ioThreads), as reported to the core (every 200 ms at most per connection)",
            st.local_reads,
            base.local_reads,
        );
        counter(
            &mut f,
            "wazoo_audit_records",
            "Audit records of operations written (audit.enable; serverStart and serverStop not counted); one that cannot be written stops the member",
            st.audit_records,
            base.audit_records,
        );
        counter(
            &mut f,
            "wazoo_log_fsyncs",
            "fsyncs of log segments and directories",
            src.log.fsyncs(),
            base.log_fsyncs,
        );
        counter(
            &mut f,
            "wazoo_leader_leases_expired",
            "Times this member led without hearing from a quorum for its lease and stepped down",
            c.map_or(0, |c| c.leases_expired),
            base.leases_expired,
        );
        gauge(
            &mut f,
            "wazoo_recipe_steps_in_flight",
            "Recipe steps running on recipe workers now",
            int(s.recipe_steps_in_flight()),
        );
        counter(
            &mut f,
            "wazoo_recipe_steps_offloaded",
            "Recipe steps sent to a recipe worker because their first try on the member's thread did not fit its budget",
            s.recipe_steps_offloaded(),
            base.steps_offloaded,
        );
        counter(
            &mut f,
            "wazoo_recipe_step_reruns",
            "Offloaded recipe steps run again because what they read had changed",
            s.recipe_step_reruns().0,
            base.step_reruns,
        );
        let leads = matches!(s.role(), Role::Leader { .. } | Role::Standalone);
        gauge(
            &mut f,
            "wazoo_is_leader",
            "1 on the leader or a standalone member",
            Num::Int(leads as i64),
        );
        if let Some(rss) = resident_bytes() {
            gauge(
                &mut f,
                "wazoo_resident_bytes",
                "Resident memory of the process",
                Num::Int(rss as i64),
            );
        }
        gauge(
            &mut f,
            "wazoo_recipe_waits",
            "Pending recipe waits (replicated)",
            int(s.recipe_waits().len()),
        );
        if let Some(modules) = s.recipe_modules() {
            let per = |v: fn(&crate::core::recipe::ModuleReport) -> u64| {
                modules.iter().map(|m| (m.name.clone(), v(m))).collect()
            };
            for (name, help, values) in [
                (
                    "wazoo_recipe_calls",
                    "Recipe calls and callbacks the ensemble ran, per module",
                    per(|m| m.calls),
                ),
                (
                    "wazoo_recipe_errors",
                    "Recipe calls and callbacks that failed, per module",
                    per(|m| m.errors),
                ),
                (
                    "wazoo_recipe_fuel_used",
                    "Fuel the module's calls and callbacks burned",
                    per(|m| m.fuel_used),
                ),
            ] {
                f.push(Family {
                    name: name.into(),
                    help,
                    value: Value::LabeledCounter {
                        label: "module",
                        values,
                    },
                });
            }
            recipe_families(&mut f, &modules, s.recipe_waits());
        }
        f
    }

    /// The catalog for a scrape: asks the core loop for a fresh one and
    /// waits for it (at most [`SCRAPE_WAIT`]; then the last one).
    pub async fn scrape(&self, format: Format) -> String {
        let fresh = self.fresh.notified();
        tokio::pin!(fresh);
        fresh.as_mut().enable();
        self.wanted.store(true, Ordering::Release);
        let _ = tokio::time::timeout(SCRAPE_WAIT, fresh).await;
        let e = self.exported.lock().unwrap_or_else(|e| e.into_inner());
        encode(&e.1, format)
    }
}

/// The ensemble's per-module recipe figures beside calls, errors and fuel
/// (docs/METRICS.md, "Recipes"): errors by kind, the latency histogram
/// (seconds) and the pending waits.
fn recipe_families(
    f: &mut Vec<Family>,
    modules: &[crate::core::recipe::ModuleReport],
    waits: &crate::core::recipe::RecipeWaits,
) {
    use crate::core::recipe::LATENCY_BOUNDS_US;
    let mut by_kind = Vec::new();
    let mut latency = Vec::new();
    let mut pending = Vec::new();
    for m in modules {
        let c = &m.counters;
        for (kind, n) in &c.errors {
            by_kind.push((vec![m.name.clone(), kind.clone()], *n));
        }
        let mut cumulative = 0;
        let mut buckets: Vec<(f64, u64)> = LATENCY_BOUNDS_US
            .iter()
            .zip(&c.latency_buckets)
            .map(|(b, n)| {
                cumulative += n;
                (*b as f64 / 1e6, cumulative)
            })
            .collect();
        buckets.push((f64::INFINITY, c.calls));
        latency.push((
            m.name.clone(),
            HistogramFigures {
                buckets,
                sum: c.latency_sum_us as f64 / 1e6,
                count: c.calls,
            },
        ));
        pending.push((vec![m.name.clone()], waits.of_module(&m.name).len() as u64));
    }
    f.push(Family {
        name: "wazoo_recipe_errors_by_kind".into(),
        help: "Recipe calls and callbacks that failed, per module and kind of failure",
        value: Value::Labeled {
            counter: true,
            labels: &["module", "kind"],
            values: by_kind,
        },
    });
    f.push(Family {
        name: "wazoo_recipe_latency_seconds".into(),
        help: "How long the ensemble's recipe calls and callbacks ran, per module",
        value: Value::LabeledHistogram {
            label: "module",
            values: latency,
        },
    });
    f.push(Family {
        name: "wazoo_recipe_module_waits".into(),
        help: "Pending recipe waits per module (replicated)",
        value: Value::Labeled {
            counter: false,
            labels: &["module"],
            values: pending,
        },
    });
}

/// ZooKeeper's `getDetailedPeerState`: the state and the ZAB phase. The
/// phase before broadcast (discovery, then synchronization) is reported
/// as synchronization: the core loop sees only whether the member serves.
fn peer_state(c: &Consensus) -> String {
    let state = match c.state {
        ServerState::Looking => return "looking - election".into(),
        ServerState::Following => "following",
        ServerState::Leading => "leading",
        ServerState::Observing => "observing",
    };
    let phase = if c.serving {
        "broadcast"
    } else {
        "synchronization"
    };
    format!("{state} - {phase}")
}

fn open_fds() -> Option<usize> {
    std::fs::read_dir("/proc/self/fd").ok().map(|d| d.count())
}

/// The soft limit on open files (`RLIMIT_NOFILE`), as Java's
/// `getMaxFileDescriptorCount` reports it.
fn max_fds() -> Option<i64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

/// Serves `GET /metrics` on `addr` ([`crate::http`]), the format
/// negotiated on `Accept` ([`Format::negotiate`]).
pub async fn serve(addr: SocketAddr, metrics: Arc<Metrics>) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    tracing::info!(%addr, "metrics on http://{addr}/metrics");
    crate::http::serve(
        listener,
        crate::http::Limits::default(),
        None,
        move |req, _| {
            let m = Arc::clone(&metrics);
            async move {
                if req.method == "GET" && (req.path == "/metrics" || req.path == "/") {
                    let format = Format::negotiate(req.header("accept"));
                    let mut resp = crate::http::Response::new(
                        200,
                        format.content_type(),
                        m.scrape(format).await,
                    );
                    resp.headers.push(("Vary", "Accept".to_string()));
                    resp
                } else {
                    crate::http::Response::status(404)
                }
            }
        },
    );
    Ok(())
}
