//! Scale curves: how a cost grows as the work grows, both systems on the
//! same axes. Each curve is a workload of its own, opt-in (none is in the
//! default set or in `--quick`):
//!
//! - `memory-curve`: resident memory against znode count
//!   (`--memory-curve-nodes`, 10^4, 10^5, 10^6 by default; add 10^7 by
//!   hand), a fresh server per point (the memory workload's load);
//! - `fanout-curve`: time until every watcher of one znode has the event,
//!   against the watcher count (`--fanout-curve-watchers`, 10 to 10,000);
//! - `payload-curve`: setData throughput against the payload size
//!   (`--payload-curve-bytes`, 10 B to 1 MB), on servers whose
//!   jute.maxbuffer fits the largest payload.
//!
//! Throughput and p99 against sessions is the sessions sweep
//! (`src/sweep.rs`). Every curve keeps its raw runs in the JSON and a
//! [`Curve`] (one value per point, system and metric) that the report's
//! table and the line plots read.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use anyhow::Result;
use serde::Serialize;
use wazoo_testkit::Flavor;

use crate::fanout::{FanoutRun, FanoutSpec};
use crate::load::{LoadSpec, RunResult, Workload};
use crate::memory::{mib, MemoryRun, MemorySpec};
use crate::phases::{order_for, standalone_target, throughput_workload};
use crate::results::{Results, WorkloadResult};
use crate::servers::{Server, ServerConfig};
use crate::svg::Panel;

const SYSTEMS: [&str; 2] = ["zookeeper", "wazoo"];

/// One measured quantity of a curve: a value per point and system.
#[derive(Clone, Debug, Serialize)]
pub struct Metric {
    /// What it is, with its unit ("RSS MiB").
    pub name: String,
    pub lower_is_better: bool,
    /// system -> one value per point (`None`: the point failed or did not run).
    pub values: BTreeMap<String, Vec<Option<f64>>>,
}

/// What the report and the plots read of a curve.
#[derive(Clone, Debug, Serialize)]
pub struct Curve {
    pub x_label: String,
    /// One label per point ("10k", "1 MB").
    pub x: Vec<String>,
    pub metrics: Vec<Metric>,
}

impl Curve {
    pub fn empty() -> Curve {
        Curve {
            x_label: String::new(),
            x: Vec::new(),
            metrics: Vec::new(),
        }
    }

    /// One line panel per metric, the points evenly spaced on the x axis
    /// (they grow by a factor, so this is a log scale of x).
    pub fn panels(&self) -> Vec<Panel> {
        self.metrics
            .iter()
            .map(|m| Panel::Lines {
                title: format!(
                    "{} ({} is better)",
                    m.name,
                    if m.lower_is_better { "lower" } else { "higher" }
                ),
                x_label: self.x_label.clone(),
                y_label: m.name.clone(),
                x_labels: self.x.clone(),
                series: SYSTEMS
                    .iter()
                    .filter_map(|&s| {
                        let v = m.values.get(s)?;
                        v.iter()
                            .any(Option::is_some)
                            .then(|| (s.to_string(), v.clone()))
                    })
                    .collect(),
            })
            .collect()
    }

    /// The Markdown table: a row per point; per metric both systems and
    /// wazoo/zookeeper.
    pub fn table(&self, md: &mut String) {
        let mut head = format!("| {} |", self.x_label);
        let mut rule = String::from("|---:|");
        for m in &self.metrics {
            let _ = write!(
                head,
                " zookeeper {0} | wazoo {0} | **wazoo/zookeeper** |",
                m.name
            );
            rule.push_str("---:|---:|---:|");
        }
        let _ = writeln!(md, "{head}\n{rule}");
        for (i, x) in self.x.iter().enumerate() {
            let mut row = format!("| {x} |");
            for m in &self.metrics {
                let v = |s: &str| {
                    m.values
                        .get(s)
                        .and_then(|v| v.get(i).copied().flatten())
                        .unwrap_or(0.0)
                };
                let (z, w) = (v("zookeeper"), v("wazoo"));
                let _ = write!(
                    row,
                    " {} | {} | **{}** |",
                    crate::report::num(z),
                    crate::report::num(w),
                    crate::report::ratio(w, z)
                );
            }
            let _ = writeln!(md, "{row}");
        }
        let _ = writeln!(md);
    }
}

/// `10000` -> "10k", `1000000` -> "1M".
pub fn count_label(n: u64) -> String {
    match n {
        n if n >= 1_000_000 && n % 1_000_000 == 0 => format!("{}M", n / 1_000_000),
        n if n >= 1000 && n % 1000 == 0 => format!("{}k", n / 1000),
        n => n.to_string(),
    }
}

/// `10` -> "10 B", `1000` -> "1 kB", `1000000` -> "1 MB" (powers of ten,
/// as the sizes are given).
pub fn bytes_label(n: usize) -> String {
    match n {
        n if n >= 1_000_000 && n % 1_000_000 == 0 => format!("{} MB", n / 1_000_000),
        n if n >= 1000 && n % 1000 == 0 => format!("{} kB", n / 1000),
        n => format!("{n} B"),
    }
}

fn metric(name: &str, lower_is_better: bool, values: BTreeMap<String, Vec<Option<f64>>>) -> Metric {
    Metric {
        name: name.into(),
        lower_is_better,
        values,
    }
}

/// `f` of every system's run at every point.
fn per_system<R>(
    runs: &BTreeMap<String, Vec<R>>,
    points: usize,
    f: impl Fn(&R) -> Option<f64>,
) -> BTreeMap<String, Vec<Option<f64>>> {
    runs.iter()
        .map(|(s, rs)| {
            let v = (0..points)
                .map(|i| rs.get(i).and_then(&f).filter(|v| v.is_finite()))
                .collect();
            (s.clone(), v)
        })
        .collect()
}

/// Resident memory against znode count.
#[derive(Clone, Debug, Serialize)]
pub struct MemoryCurveBlock {
    /// The load of every point but its `nodes`.
    pub spec: MemorySpec,
    pub nodes: Vec<u64>,
    pub order: Vec<String>,
    /// system -> one run per point, in `nodes` order.
    pub runs: BTreeMap<String, Vec<MemoryRun>>,
    pub curve: Curve,
}

impl MemoryCurveBlock {
    pub fn summarize(&mut self) {
        let n = self.nodes.len();
        let ok = |r: &MemoryRun| r.failure.is_none();
        // Bytes per znode above the empty server: (RSS - empty RSS) / created.
        let per_node = self
            .runs
            .iter()
            .map(|(s, rs)| {
                let v = rs
                    .iter()
                    .map(|r| {
                        (ok(r) && r.created > 0).then(|| {
                            r.rss_bytes.saturating_sub(r.rss_empty_bytes) as f64 / r.created as f64
                        })
                    })
                    .collect();
                (s.clone(), v)
            })
            .collect();
        self.curve = Curve {
            x_label: "znodes".into(),
            x: self.nodes.iter().map(|&n| count_label(n)).collect(),
            metrics: vec![
                metric(
                    "RSS MiB",
                    true,
                    per_system(&self.runs, n, |r| ok(r).then(|| mib(r.rss_bytes))),
                ),
                metric("bytes per znode", true, per_node),
                metric(
                    "load s",
                    true,
                    per_system(&self.runs, n, |r| ok(r).then_some(r.load_secs)),
                ),
                metric(
                    "server CPU µs per create",
                    true,
                    per_system(&self.runs, n, |r| {
                        (ok(r) && r.created > 0)
                            .then(|| r.load_server_cpu_secs * 1e6 / r.created as f64)
                    }),
                ),
            ],
        };
    }
}

/// Time to notify every watcher against the watcher count.
#[derive(Clone, Debug, Serialize)]
pub struct FanoutCurveBlock {
    pub spec: FanoutSpec,
    pub order: Vec<String>,
    /// system -> one run per watcher count, in `spec.watchers` order.
    pub runs: BTreeMap<String, Vec<FanoutRun>>,
    /// The servers' zoo.cfg additions and JVM options (as the payload curve's).
    pub notes: Vec<String>,
    pub curve: Curve,
}

impl FanoutCurveBlock {
    pub fn summarize(&mut self) {
        let n = self.spec.watchers.len();
        let ok = |r: &FanoutRun| r.failure.is_none();
        self.curve = Curve {
            x_label: "watchers".into(),
            x: self
                .spec
                .watchers
                .iter()
                .map(|&w| count_label(w as u64))
                .collect(),
            metrics: vec![
                metric(
                    "all notified ms (median)",
                    true,
                    per_system(&self.runs, n, |r| {
                        ok(r).then_some(r.all_delivered_ms_median)
                    }),
                ),
                metric(
                    "delivery p99 ms",
                    true,
                    per_system(&self.runs, n, |r| ok(r).then(|| r.delivery.p99_us / 1000.0)),
                ),
                metric(
                    "arming the watches ms (median)",
                    true,
                    per_system(&self.runs, n, |r| {
                        (ok(r) && !r.rounds.is_empty()).then(|| {
                            let mut v: Vec<f64> = r.rounds.iter().map(|x| x.arm_ms).collect();
                            v.sort_by(f64::total_cmp);
                            v[v.len() / 2]
                        })
                    }),
                ),
            ],
        };
    }
}

/// setData throughput against the payload size.
#[derive(Clone, Debug, Serialize)]
pub struct PayloadCurveBlock {
    /// The load of every point but its `payload` and `keys`.
    pub load: LoadSpec,
    pub payloads: Vec<usize>,
    /// Znodes set at random at each point (fewer for large payloads, so
    /// the tree stays under [`PAYLOAD_TREE_BYTES`]).
    pub keys: Vec<usize>,
    /// Requests in flight per session at each point (fewer for large
    /// payloads, see [`payload_inflight`]).
    pub inflight: Vec<usize>,
    /// The servers' zoo.cfg additions and JVM options.
    pub notes: Vec<String>,
    /// One workload result (set) per payload.
    pub points: Vec<WorkloadResult>,
    pub curve: Curve,
}

impl PayloadCurveBlock {
    pub fn summarize(&mut self) {
        let mut runs: BTreeMap<String, Vec<Option<RunResult>>> = BTreeMap::new();
        for p in &self.points {
            for s in SYSTEMS {
                let r = p.runs.get(s).filter(|r| r.ops > 0).cloned();
                runs.entry(s.to_string()).or_default().push(r);
            }
        }
        runs.retain(|_, v| v.iter().any(Option::is_some));
        let n = self.points.len();
        let payloads = self.payloads.clone();
        let pick = |f: &dyn Fn(&RunResult, usize) -> f64| {
            runs.iter()
                .map(|(s, rs)| {
                    let v = (0..n)
                        .map(|i| rs.get(i).cloned().flatten().map(|r| f(&r, payloads[i])))
                        .collect();
                    (s.clone(), v)
                })
                .collect::<BTreeMap<_, _>>()
        };
        self.curve = Curve {
            x_label: "payload".into(),
            x: self.payloads.iter().map(|&b| bytes_label(b)).collect(),
            metrics: vec![
                metric("setData ops/s", false, pick(&|r, _| r.ops_per_sec)),
                metric(
                    "MB/s written",
                    false,
                    pick(&|r, p| r.ops_per_sec * p as f64 / 1e6),
                ),
                metric("p99 ms", true, pick(&|r, _| r.latency.p99_us / 1000.0)),
                metric(
                    "server CPU µs/op",
                    true,
                    pick(&|r, _| r.server_cpu_us_per_op),
                ),
            ],
        };
    }
}

/// The payload curve's in-flight bytes over all sessions: above this a
/// session has fewer requests in flight, so that a request of a large
/// payload still starts and ends inside the measured window.
pub const PAYLOAD_INFLIGHT_BYTES: usize = 16 << 20;

/// Requests in flight per session at a payload of `bytes`: `inflight`, or
/// fewer so that all `sessions` hold at most [`PAYLOAD_INFLIGHT_BYTES`]
/// (at least 1).
pub fn payload_inflight(inflight: usize, sessions: usize, bytes: usize) -> usize {
    inflight
        .min(PAYLOAD_INFLIGHT_BYTES / (bytes.max(1) * sessions.max(1)))
        .max(1)
}

/// Znodes the payload curve sets at random for a payload of `bytes`: the
/// throughput workloads' `keys`, fewer when they would hold more than
/// `tree_bytes` (at least 16).
pub fn payload_keys(keys: usize, bytes: usize, tree_bytes: usize) -> usize {
    keys.min(tree_bytes / bytes.max(1)).max(16)
}

/// The payload curve's servers hold at most about this many bytes of
/// data in the znodes it sets (see [`payload_keys`]).
pub const PAYLOAD_TREE_BYTES: usize = 64 << 20;

/// Bytes of client requests both servers of the payload curve hold read
/// and unanswered (`largeRequestMaxBytes`, ZooKeeper's default 100 MiB,
/// which 16 sessions x 8 setData of 1 MB in flight pass).
pub const PAYLOAD_LARGE_REQUEST_MAX_BYTES: u64 = 1 << 30;

/// jute.maxbuffer for the payload curve's servers: the default (1 MiB less
/// one byte) cannot take a 1 MB payload with its path and header.
pub fn payload_max_buffer(largest_payload: usize) -> usize {
    (largest_payload + (1 << 20)).max(4 << 20)
}

/// Which curves to run, and their points.
#[derive(Debug, Default)]
pub struct CurveRuns {
    pub memory_nodes: Option<Vec<u64>>,
    pub fanout_watchers: Option<Vec<usize>>,
    pub payloads: Option<Vec<usize>>,
}

impl CurveRuns {
    pub fn any(&self) -> bool {
        self.memory_nodes.is_some() || self.fanout_watchers.is_some() || self.payloads.is_some()
    }
}

/// Runs the curves asked for, in the order memory, fan-out, payload, each
/// on servers of its own, saving the results after every point.
#[allow(clippy::too_many_arguments)]
pub async fn run(
    runs: &CurveRuns,
    systems: &[Flavor],
    cfg: &ServerConfig,
    memory: &MemorySpec,
    fanout: &FanoutSpec,
    payload_load: &LoadSpec,
    order_index: &mut usize,
    results: &mut Results,
    save: &dyn Fn(&Results) -> Result<()>,
) -> Result<()> {
    results.curves = Some(CurvesBlock::default());
    if let Some(nodes) = &runs.memory_nodes {
        let nodes: Vec<u64> = nodes.iter().copied().filter(|&n| n > 0).collect();
        let mut block = MemoryCurveBlock {
            spec: memory.clone(),
            nodes: nodes.clone(),
            order: Vec::new(),
            runs: BTreeMap::new(),
            curve: Curve::empty(),
        };
        for (k, &n) in nodes.iter().enumerate() {
            for flavor in order_for(systems, *order_index, k) {
                eprintln!("[memory-curve] {flavor} at {n} znodes");
                let spec = MemorySpec {
                    nodes: n,
                    ..memory.clone()
                };
                let run = crate::memory::measure(flavor, cfg, &spec, None).await;
                if let Some(f) = &run.failure {
                    eprintln!("[memory-curve] {flavor} at {n} znodes FAILED: {f}");
                }
                block.order.push(format!("{flavor} {}", count_label(n)));
                block
                    .runs
                    .entry(flavor.name().to_string())
                    .or_default()
                    .push(run);
                block.summarize();
                curves(results).memory = Some(block.clone());
                save(results)?;
            }
        }
        *order_index += 1;
    }
    if let Some(watchers) = &runs.fanout_watchers {
        let spec = FanoutSpec {
            watchers: watchers.iter().copied().filter(|&n| n > 0).collect(),
            ..fanout.clone()
        };
        let running = start_servers(systems, cfg).await?;
        let mut block = FanoutCurveBlock {
            spec: spec.clone(),
            order: Vec::new(),
            runs: BTreeMap::new(),
            notes: vec![format!(
                "fresh standalone servers alive through the curve, zoo.cfg as the fanout workload's ({})",
                crate::servers::EXTRA_CFG.join(", ")
            )],
            curve: Curve::empty(),
        };
        for (k, &n) in spec.watchers.iter().enumerate() {
            for flavor in order_for(systems, *order_index, k) {
                let Some(server) = running.get(flavor.name()) else {
                    continue;
                };
                let label = format!("[fanout-curve] {flavor}, {n} watchers");
                eprintln!(
                    "{label}: {n} sessions watch one znode, {} write(s); at most {:.0} s",
                    spec.rounds,
                    spec.bound_secs()
                );
                let run =
                    crate::fanout::run(&server.addr().to_string(), n, &spec, flavor.name()).await;
                match &run.failure {
                    Some(f) => eprintln!("{label}: FAILED: {f}"),
                    None => eprintln!(
                        "{label}: all notified in {:.1} ms (median of {}), delivery p99 {:.0} µs",
                        run.all_delivered_ms_median,
                        run.rounds.len(),
                        run.delivery.p99_us
                    ),
                }
                block.order.push(format!("{flavor} {n}"));
                block
                    .runs
                    .entry(flavor.name().to_string())
                    .or_default()
                    .push(run);
                block.summarize();
                curves(results).fanout = Some(block.clone());
                save(results)?;
            }
        }
        *order_index += 1;
        tokio::task::spawn_blocking(move || drop(running)).await?;
    }
    if let Some(payloads) = &runs.payloads {
        let payloads: Vec<usize> = payloads.iter().copied().filter(|&b| b > 0).collect();
        let max_buffer = payload_max_buffer(payloads.iter().copied().max().unwrap_or(0));
        let mut extra_cfg = cfg.extra_cfg.clone();
        extra_cfg.push(format!("jute.maxbuffer={max_buffer}"));
        extra_cfg.push(format!(
            "largeRequestMaxBytes={PAYLOAD_LARGE_REQUEST_MAX_BYTES}"
        ));
        let big = ServerConfig {
            extra_cfg,
            zk_jvm_args: vec![format!("-Djute.maxbuffer={max_buffer}")],
            ..cfg.clone()
        };
        let mut running = start_servers(systems, &big).await?;
        let mut block = PayloadCurveBlock {
            load: payload_load.clone(),
            payloads: payloads.clone(),
            keys: payloads
                .iter()
                .map(|&b| payload_keys(payload_load.keys, b, PAYLOAD_TREE_BYTES))
                .collect(),
            notes: vec![format!(
                "zoo.cfg adds {}, {} for both; ZooKeeper's JVM also gets {} (it reads jute.maxbuffer as a system property)",
                crate::servers::EXTRA_CFG.join(", "),
                big.extra_cfg.join(", "),
                big.zk_jvm_args.join(" ")
            )],
            inflight: payloads
                .iter()
                .map(|&b| payload_inflight(payload_load.inflight, payload_load.sessions, b))
                .collect(),
            points: Vec::new(),
            curve: Curve::empty(),
        };
        let per_point: Vec<(usize, usize, usize)> = payloads
            .iter()
            .zip(&block.keys)
            .zip(&block.inflight)
            .map(|((&b, &k), &i)| (b, k, i))
            .collect();
        for (b, keys, inflight) in per_point {
            let spec = LoadSpec {
                payload: b,
                keys,
                inflight,
                ..payload_load.clone()
            };
            let result = throughput_workload(
                Workload::Set,
                *order_index,
                systems,
                &spec,
                &format!("payload-curve {} ", bytes_label(b)),
                |flavor| standalone_target(&mut running, flavor),
            )
            .await;
            *order_index += 1;
            block.points.push(result);
            block.summarize();
            curves(results).payload = Some(block.clone());
            save(results)?;
        }
        tokio::task::spawn_blocking(move || drop(running)).await?;
    }
    Ok(())
}

fn curves(r: &mut Results) -> &mut CurvesBlock {
    r.curves.get_or_insert_with(CurvesBlock::default)
}

/// One fresh standalone server per system, started one after the other.
async fn start_servers(
    systems: &[Flavor],
    cfg: &ServerConfig,
) -> Result<BTreeMap<&'static str, Server>> {
    let mut running = BTreeMap::new();
    for &flavor in systems {
        eprintln!("starting {flavor} for the curve ...");
        let cfg2 = cfg.clone();
        let server = tokio::task::spawn_blocking(move || Server::start(flavor, &cfg2)).await??;
        running.insert(flavor.name(), server);
    }
    Ok(running)
}

/// Every curve run.
#[derive(Debug, Default, Serialize)]
pub struct CurvesBlock {
    pub memory: Option<MemoryCurveBlock>,
    pub fanout: Option<FanoutCurveBlock>,
    pub payload: Option<PayloadCurveBlock>,
}

impl CurvesBlock {
    /// (plot name, figure title, curve) of every curve run.
    pub fn figures(&self) -> Vec<(&'static str, String, &Curve)> {
        let mut v = Vec::new();
        if let Some(m) = &self.memory {
            v.push((
                "memory-curve",
                format!(
                    "memory against znodes of {} bytes (fresh standalone server per point)",
                    m.spec.node_bytes
                ),
                &m.curve,
            ));
        }
        if let Some(f) = &self.fanout {
            v.push((
                "fanout-curve",
                "watch fan-out against watchers (one write, every session watching)".to_string(),
                &f.curve,
            ));
        }
        if let Some(p) = &self.payload {
            v.push((
                "payload-curve",
                format!(
                    "setData against payload size ({} sessions x {} in flight)",
                    p.load.sessions, p.load.inflight
                ),
                &p.curve,
            ));
        }
        v
    }
}

/// The Markdown sections of every curve run; `plot_of(name)` is the link
/// of the plot named `name`, if written.
pub fn sections<'a>(md: &mut String, c: &CurvesBlock, plot_of: impl Fn(&str) -> Option<&'a str>) {
    if let Some(m) = &c.memory {
        let _ = writeln!(
            md,
            "## memory against znode count\n\n\
             For each count, a fresh standalone server per system (the order alternates from \
             point to point: {}); the memory workload's load (`/mem/bNNNN/nNNNN`, {} per \
             parent, {} bytes each, {} sessions × {} pipelined creates), then VmRSS {} s after \
             the last create. Bytes per znode: (RSS − the empty server's RSS) / znodes created. \
             Server CPU per create: the server process's utime+stime over the load.\n",
            m.order.join(", "),
            m.spec.children_per_parent,
            m.spec.node_bytes,
            m.spec.sessions,
            m.spec.inflight,
            m.spec.settle_secs
        );
        if let Some(link) = plot_of("memory-curve") {
            let _ = writeln!(md, "![memory curve]({link})\n");
        }
        m.curve.table(md);
        failures(md, &m.runs, &m.nodes, |r: &MemoryRun| r.failure.as_deref());
    }
    if let Some(f) = &c.fanout {
        let _ = writeln!(
            md,
            "## watch fan-out against watcher count\n\n\
             For each count N, N sessions plus a writer connect to a standalone server; each of \
             {} round(s) arms a data watch on one znode in every session, then the writer sets \
             it: \"all notified\" is from just before the setData to the last watcher's event \
             (median over the rounds). Order: {}. Servers: {}.\n",
            f.spec.rounds,
            f.order.join(", "),
            f.notes.join("; ")
        );
        if let Some(link) = plot_of("fanout-curve") {
            let _ = writeln!(md, "![fan-out curve]({link})\n");
        }
        f.curve.table(md);
        let counts: Vec<u64> = f.spec.watchers.iter().map(|&w| w as u64).collect();
        failures(md, &f.runs, &counts, |r: &FanoutRun| r.failure.as_deref());
    }
    if let Some(p) = &c.payload {
        let l = &p.load;
        let _ = writeln!(
            md,
            "## setData throughput against payload size\n\n\
             For each payload size, the set workload ({} sessions × {} in flight, fewer for \
             large payloads so that at most 16 MiB are in flight: {}; setData on random znodes \
             of a pre-created set: {} znodes, fewer for large payloads), {} s \
             warm-up then {} s measured, one round per system (the order alternates from point \
             to point), on fresh standalone servers alive through the curve: {}.\n",
            l.sessions,
            l.inflight,
            p.inflight
                .iter()
                .zip(&p.payloads)
                .map(|(i, b)| format!("{i} at {}", bytes_label(*b)))
                .collect::<Vec<_>>()
                .join(", "),
            p.keys
                .iter()
                .zip(&p.payloads)
                .map(|(k, b)| format!("{k} at {}", bytes_label(*b)))
                .collect::<Vec<_>>()
                .join(", "),
            l.warmup_secs,
            l.duration_secs,
            p.notes.join("; ")
        );
        if let Some(link) = plot_of("payload-curve") {
            let _ = writeln!(md, "![payload curve]({link})\n");
        }
        p.curve.table(md);
        for (w, b) in p.points.iter().zip(&p.payloads) {
            for (name, run) in &w.runs {
                if let Some(f) = &run.failure {
                    let _ = writeln!(
                        md,
                        "**{name} at {}:** `{}`\n",
                        bytes_label(*b),
                        f.replace('\n', " ")
                    );
                }
            }
        }
    }
}

fn failures<R>(
    md: &mut String,
    runs: &BTreeMap<String, Vec<R>>,
    xs: &[u64],
    failure: impl Fn(&R) -> Option<&str>,
) {
    for (name, rs) in runs {
        for (r, x) in rs.iter().zip(xs) {
            if let Some(f) = failure(r) {
                let _ = writeln!(
                    md,
                    "**{name} at {}:** `{}`\n",
                    count_label(*x),
                    f.replace('\n', " ")
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_name_powers_of_ten() {
        assert_eq!(count_label(10), "10");
        assert_eq!(count_label(10_000), "10k");
        assert_eq!(count_label(10_000_000), "10M");
        assert_eq!(count_label(1500), "1500");
        assert_eq!(bytes_label(10), "10 B");
        assert_eq!(bytes_label(100_000), "100 kB");
        assert_eq!(bytes_label(1_000_000), "1 MB");
    }

    #[test]
    fn large_payloads_have_fewer_requests_in_flight() {
        assert_eq!(payload_inflight(8, 16, 100), 8);
        assert_eq!(payload_inflight(8, 16, 100_000), 8);
        assert_eq!(payload_inflight(8, 16, 1_000_000), 1);
        assert_eq!(payload_inflight(8, 10_000, 1_000_000), 1);
    }

    #[test]
    fn payload_keys_bound_the_tree() {
        assert_eq!(payload_keys(1000, 100, 64 << 20), 1000);
        assert_eq!(payload_keys(1000, 1_000_000, 64 << 20), 67);
        assert_eq!(payload_keys(1000, 100_000_000, 64 << 20), 16);
    }

    #[test]
    fn a_curve_tabulates_both_systems_and_the_ratio() {
        let mut values = BTreeMap::new();
        values.insert("zookeeper".to_string(), vec![Some(200.0), None]);
        values.insert("wazoo".to_string(), vec![Some(50.0), Some(60.0)]);
        let c = Curve {
            x_label: "znodes".into(),
            x: vec!["10k".into(), "100k".into()],
            metrics: vec![metric("RSS MiB", true, values)],
        };
        let mut md = String::new();
        c.table(&mut md);
        assert!(md.contains("| 10k | 200 | 50.0 | **0.25×** |"), "{md}");
        assert!(md.contains("| 100k | – | 60.0 | **–** |"), "{md}");
        assert_eq!(c.panels().len(), 1);
    }
}
