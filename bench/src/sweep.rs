//! The sessions sweep (`--workloads sweep`, or `--sessions-sweep`): one
//! throughput workload (`--sweep-workload`, `mixed` by default) run at
//! each of several session counts against both systems, for the plot of
//! throughput against sessions, a table and the raw figures.

use std::fmt::Write as _;

use serde::Serialize;

use crate::load::{LoadSpec, RunResult, Workload};
use crate::results::WorkloadResult;
use crate::svg::Panel;

const SYSTEMS: [&str; 2] = ["zookeeper", "wazoo"];

/// One session count's runs.
#[derive(Debug, Serialize)]
pub struct SweepPoint {
    pub sessions: usize,
    #[serde(flatten)]
    pub result: WorkloadResult,
}

/// The whole sweep on one topology.
#[derive(Debug, Serialize)]
pub struct SweepBlock {
    pub workload: Workload,
    /// The load of every point but its `sessions` (one round per point).
    pub load: LoadSpec,
    pub points: Vec<SweepPoint>,
}

fn ok_run<'a>(p: &'a SweepPoint, system: &str) -> Option<&'a RunResult> {
    p.result.runs.get(system).filter(|r| r.failure.is_none())
}

/// The line plots: ops/s and p99 against sessions, one line per system.
pub fn panels(b: &SweepBlock) -> Vec<Panel> {
    let x_labels: Vec<String> = b.points.iter().map(|p| p.sessions.to_string()).collect();
    let line = |f: &dyn Fn(&RunResult) -> f64| {
        SYSTEMS
            .iter()
            .map(|&name| {
                let values = b.points.iter().map(|p| ok_run(p, name).map(f)).collect();
                (name.to_string(), values)
            })
            .filter(|(_, v): &(String, Vec<Option<f64>>)| v.iter().any(Option::is_some))
            .collect()
    };
    vec![
        Panel::Lines {
            title: format!("{} throughput (higher is better)", b.workload.name()),
            x_label: "sessions".into(),
            y_label: "ops/s".into(),
            x_labels: x_labels.clone(),
            series: line(&|r| r.ops_per_sec),
        },
        Panel::Lines {
            title: format!("{} p99 latency (lower is better)", b.workload.name()),
            x_label: "sessions".into(),
            y_label: "p99 ms".into(),
            x_labels,
            series: line(&|r| r.latency.p99_us / 1000.0),
        },
    ]
}

/// The Markdown section: sessions, both systems' ops/s and p99, ratios.
pub fn section(md: &mut String, b: &SweepBlock, title: &str, plot: Option<&str>) {
    let l = &b.load;
    let _ = writeln!(
        md,
        "## {title}sessions sweep — {} at {} sessions\n\n\
         Each point: {} requests in flight per session, {}-byte payloads, {} s warm-up then {} s \
         measured, one round per system (the order alternates from point to point), on the \
         servers of this phase.\n",
        b.workload.name(),
        b.points
            .iter()
            .map(|p| p.sessions.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        l.inflight,
        l.payload,
        l.warmup_secs,
        l.duration_secs
    );
    if let Some(link) = plot {
        let _ = writeln!(md, "![sessions sweep]({link})\n");
    }
    let _ = writeln!(
        md,
        "| sessions | zookeeper ops/s | wazoo ops/s | **wazoo/zookeeper** | zookeeper p99 µs | wazoo p99 µs | p99 ratio | zookeeper server CPU µs/op | wazoo server CPU µs/op | CPU ratio |"
    );
    let _ = writeln!(md, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut failures = Vec::new();
    for p in &b.points {
        let z = ok_run(p, "zookeeper");
        let x = ok_run(p, "wazoo");
        let ops = |r: Option<&RunResult>| r.map(|r| r.ops_per_sec).unwrap_or(0.0);
        let p99 = |r: Option<&RunResult>| r.map(|r| r.latency.p99_us).unwrap_or(0.0);
        let cpu = |r: Option<&RunResult>| r.map(|r| r.server_cpu_us_per_op).unwrap_or(0.0);
        let _ = writeln!(
            md,
            "| {} | {} | {} | **{}** | {} | {} | {} | {} | {} | {} |",
            p.sessions,
            crate::report::num(ops(z)),
            crate::report::num(ops(x)),
            crate::report::ratio(ops(x), ops(z)),
            crate::report::num(p99(z)),
            crate::report::num(p99(x)),
            crate::report::ratio(p99(x), p99(z)),
            crate::report::num(cpu(z)),
            crate::report::num(cpu(x)),
            crate::report::ratio(cpu(x), cpu(z)),
        );
        for (name, run) in &p.result.runs {
            if let Some(f) = &run.failure {
                failures.push(format!("{name} at {} sessions: `{f}`", p.sessions));
            }
        }
    }
    for f in failures {
        let _ = writeln!(md, "\n**failed:** {}", f.replace('\n', " "));
    }
    let _ = writeln!(md);
}
