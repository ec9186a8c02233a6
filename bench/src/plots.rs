//! One SVG per workload, written beside the report: bars for throughput
//! (or times) and latency CDF lines, ZooKeeper against wazoo.

use std::path::Path;

use anyhow::{Context, Result};

use crate::results::{Results, WorkloadResult};
use crate::svg::{figure, Panel};

const SYSTEMS: [&str; 2] = ["zookeeper", "wazoo"];

/// Writes every plot the results allow into `dir` as `<stem>-<name>.svg`;
/// returns the links for the report (`link_prefix` + file name), in order.
pub fn write_all(r: &Results, dir: &Path, stem: &str, link_prefix: &str) -> Result<Vec<String>> {
    let mut figures: Vec<(String, String)> = Vec::new();
    for w in &r.workloads {
        figures.push((w.workload.name().to_string(), throughput(w, "")));
    }
    if let Some(b) = &r.sweep {
        figures.push((
            "sweep".into(),
            figure(
                "throughput and p99 against sessions (standalone servers)",
                &crate::sweep::panels(b),
            ),
        ));
    }
    if let Some(e) = &r.ensemble {
        for w in &e.workloads {
            figures.push((
                format!("ensemble-{}", w.workload.name()),
                throughput(w, "3-member ensembles: "),
            ));
        }
        if let Some(b) = &e.sweep {
            figures.push((
                "ensemble-sweep".into(),
                figure(
                    &format!(
                        "throughput and p99 against sessions ({}-member ensembles)",
                        e.members
                    ),
                    &crate::sweep::panels(b),
                ),
            ));
        }
        for (f, plot) in [
            (&e.failover, "failover"),
            (&e.failover_pause, "failover-pause"),
            (&e.failover_partition, "failover-partition"),
        ] {
            let Some(f) = f else { continue };
            let med = |s: &Option<crate::failover::Spread>| s.as_ref().map(|s| s.median);
            let mut groups = Vec::new();
            for (label, pick) in [("first write", 0usize), ("probe", 1), ("election", 2)] {
                let bars = SYSTEMS
                    .iter()
                    .filter_map(|&name| {
                        let run = f.runs.get(name)?;
                        let v = match pick {
                            0 => med(&run.first_ack_ms),
                            1 => med(&run.probe_ms),
                            _ => med(&run.election_ms),
                        }?;
                        Some((name.to_string(), v))
                    })
                    .collect();
                groups.push((label.to_string(), bars));
            }
            figures.push((
                plot.into(),
                figure(
                    &format!("{plot}: {} (medians)", f.spec.failure.what()),
                    &[Panel::Bars {
                        title: "time from the kill (lower is better)".into(),
                        unit: "ms".into(),
                        groups,
                    }],
                ),
            ));
        }
    }
    if let Some(f) = &r.fanout {
        let mut groups = Vec::new();
        let mut series = Vec::new();
        for (k, &n) in f.spec.watchers.iter().enumerate() {
            let mut bars = Vec::new();
            for name in SYSTEMS {
                if let Some(run) = f.runs.get(name).and_then(|v| v.get(k)) {
                    if run.failure.is_none() {
                        bars.push((name.to_string(), run.all_delivered_ms_median));
                        // Short labels: four of them share the legend row.
                        let short = if name == "zookeeper" { "zk" } else { name };
                        series.push((name.to_string(), format!("{short} {n}"), run.cdf_us.clone()));
                    }
                }
            }
            groups.push((format!("{n} watchers"), bars));
        }
        figures.push((
            "fanout".into(),
            figure(
                "watch fan-out: one setData, every watcher notified",
                &[
                    Panel::Bars {
                        title: "all watchers notified, median round (lower is better)".into(),
                        unit: "ms".into(),
                        groups,
                    },
                    Panel::Cdf {
                        title: "delivery latency per watcher".into(),
                        series,
                    },
                ],
            ),
        ));
    }
    if let Some(c) = &r.churn {
        let bars = SYSTEMS
            .iter()
            .filter_map(|&n| Some((n.to_string(), c.runs.get(n)?.sessions_per_sec)))
            .collect();
        let series = SYSTEMS
            .iter()
            .filter_map(|&n| {
                let run = c.runs.get(n)?;
                Some((n.to_string(), n.to_string(), run.cycle_cdf_us.clone()))
            })
            .collect();
        figures.push((
            "churn".into(),
            figure(
                "ephemeral churn: connect, create ephemeral, close",
                &[
                    Panel::Bars {
                        title: "sessions/s (higher is better)".into(),
                        unit: "sessions/s".into(),
                        groups: vec![("churn".into(), bars)],
                    },
                    Panel::Cdf {
                        title: "cycle latency".into(),
                        series,
                    },
                ],
            ),
        ));
    }
    if let Some(m) = &r.memory {
        let rss = SYSTEMS
            .iter()
            .filter_map(|&n| {
                let run = m.runs.get(n)?;
                Some((n.to_string(), crate::memory::mib(run.rss_bytes)))
            })
            .collect();
        figures.push((
            "memory".into(),
            figure(
                &format!("memory holding {} znodes", m.spec.nodes),
                &[Panel::Bars {
                    title: "resident set after loading (lower is better)".into(),
                    unit: "MiB".into(),
                    groups: vec![("RSS".into(), rss)],
                }],
            ),
        ));
        if r.recovery.is_some() {
            let most = m.runs.values().map(|r| r.restarts.len()).max().unwrap_or(0);
            let groups = (0..most)
                .map(|k| {
                    let bars = SYSTEMS
                        .iter()
                        .filter_map(|&n| {
                            let rs = m.runs.get(n)?.restarts.get(k)?;
                            rs.failure
                                .is_none()
                                .then(|| (n.to_string(), rs.answered_ms / 1e3))
                        })
                        .collect();
                    (format!("restart {}", k + 1), bars)
                })
                .collect();
            figures.push((
                "recovery".into(),
                figure(
                    &format!("recovery: kill -9 with {} znodes, restart", m.spec.nodes),
                    &[Panel::Bars {
                        title: "process start to first answer (lower is better)".into(),
                        unit: "s".into(),
                        groups,
                    }],
                ),
            ));
        }
    }
    if let Some(rb) = &r.recipes {
        if let Some(b) = &rb.recipe_call {
            let run = &b.run;
            if run.call.count > 0 && run.get.count > 0 {
                // Both are wazoo: the call in wazoo's blue, getData in its
                // lighter shade (second series of the same system).
                figures.push((
                    "recipe-call".into(),
                    figure(
                        "recipe call (echo.noop) vs getData, one connection",
                        &[
                            Panel::Bars {
                                title: "round trip p50 / p99 (lower is better)".into(),
                                unit: "µs".into(),
                                groups: vec![
                                    (
                                        "p50".into(),
                                        vec![
                                            ("recipe call".into(), run.call.p50_us),
                                            ("getData".into(), run.get.p50_us),
                                        ],
                                    ),
                                    (
                                        "p99".into(),
                                        vec![
                                            ("recipe call".into(), run.call.p99_us),
                                            ("getData".into(), run.get.p99_us),
                                        ],
                                    ),
                                ],
                            },
                            Panel::Cdf {
                                title: "round trip".into(),
                                series: vec![
                                    ("wazoo".into(), "call".into(), run.call_cdf_us.clone()),
                                    ("wazoo".into(), "getData".into(), run.get_cdf_us.clone()),
                                ],
                            },
                        ],
                    ),
                ));
            }
        }
        for b in [&rb.lock, &rb.queue].into_iter().flatten() {
            let name = b.spec.recipe.name();
            let keys = [
                crate::recipes::ZK_KAZOO,
                crate::recipes::WAZOO,
                crate::recipes::WAZOO_KAZOO,
            ];
            let label = |k: &str| match k {
                crate::recipes::ZK_KAZOO => "kazoo/zk",
                crate::recipes::WAZOO => "wazoo",
                _ => "kazoo/wazoo",
            };
            // Bars are named by server (the legend), kazoo on wazoo in grey.
            let sys = |k: &str| match k {
                crate::recipes::ZK_KAZOO => "zookeeper",
                crate::recipes::WAZOO => "wazoo",
                _ => "kazoo on wazoo",
            };
            let bars = keys
                .iter()
                .filter_map(|&k| {
                    let run = b.runs.get(k)?;
                    (run.cycles > 0).then(|| (sys(k).to_string(), run.cycles_per_sec))
                })
                .collect();
            let series = keys
                .iter()
                .filter_map(|&k| {
                    let run = b.runs.get(k)?;
                    (run.cycles > 0).then(|| {
                        (
                            sys(k).to_string(),
                            label(k).to_string(),
                            run.cycle_cdf_us.clone(),
                        )
                    })
                })
                .collect();
            let (title, unit) = match b.spec.recipe {
                crate::recipes::Contended::Lock => (
                    format!(
                        "{name}: {} sessions, acquire + release (kazoo/zk, wazoo, kazoo/wazoo)",
                        b.spec.sessions
                    ),
                    "cycles/s",
                ),
                crate::recipes::Contended::Queue => (
                    format!(
                        "{name}: {} sessions, put + take (kazoo/zk, wazoo, kazoo/wazoo)",
                        b.spec.sessions
                    ),
                    "cycles/s",
                ),
            };
            figures.push((
                name.to_string(),
                figure(
                    &title,
                    &[
                        Panel::Bars {
                            title: "cycles/s (higher is better)".into(),
                            unit: unit.into(),
                            groups: vec![(name.to_string(), bars)],
                        },
                        Panel::Cdf {
                            title: "cycle latency".into(),
                            series,
                        },
                    ],
                ),
            ));
        }
    }
    if let Some(c) = &r.curves {
        for (name, title, curve) in c.figures() {
            figures.push((name.to_string(), figure(&title, &curve.panels())));
        }
    }
    let mut links = Vec::new();
    if figures.is_empty() {
        return Ok(links);
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for (name, svg) in figures {
        let file = format!("{stem}-{name}.svg");
        let path = dir.join(&file);
        std::fs::write(&path, svg).with_context(|| format!("writing {}", path.display()))?;
        links.push(format!("{link_prefix}{file}"));
    }
    Ok(links)
}

/// A throughput workload: ops/s bars and the latency CDF.
fn throughput(w: &WorkloadResult, prefix: &str) -> String {
    let name = w.workload.name();
    let bars = SYSTEMS
        .iter()
        .filter_map(|&n| Some((n.to_string(), w.runs.get(n)?.ops_per_sec)))
        .collect();
    let series = SYSTEMS
        .iter()
        .filter_map(|&n| {
            let run = w.runs.get(n)?;
            Some((n.to_string(), n.to_string(), run.latency_cdf_us.clone()))
        })
        .collect();
    figure(
        &format!("{prefix}{name}"),
        &[
            Panel::Bars {
                title: "throughput (higher is better)".into(),
                unit: "ops/s".into(),
                groups: vec![(name.to_string(), bars)],
            },
            Panel::Cdf {
                title: "latency per request".into(),
                series,
            },
        ],
    )
}
