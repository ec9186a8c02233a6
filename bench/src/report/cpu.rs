//! The server CPU per operation of every workload run, both systems side
//! by side: the figure that a busy shared machine moves least.

use std::fmt::Write as _;

use super::{num, ratio, WZ, ZK};
use crate::results::Results;

/// One row: what was counted, then µs per operation for ZooKeeper and
/// wazoo (0 where the system did not run it).
struct Row {
    what: String,
    per: &'static str,
    zookeeper: f64,
    wazoo: f64,
}

fn rows(r: &Results) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut throughput = |prefix: &str, w: &crate::results::WorkloadResult| {
        let cpu = |name: &str| {
            w.runs
                .get(name)
                .filter(|run| run.ops > 0)
                .map(|run| run.server_cpu_us_per_op)
                .unwrap_or(0.0)
        };
        rows.push(Row {
            what: format!("{prefix}{}", w.workload.name()),
            per: "request",
            zookeeper: cpu(ZK),
            wazoo: cpu(WZ),
        });
    };
    for w in &r.workloads {
        throughput("", w);
    }
    if let Some(e) = &r.ensemble {
        let prefix = format!("{}-member ensemble: ", e.members);
        for w in &e.workloads {
            throughput(&prefix, w);
        }
    }
    if let Some(c) = &r.churn {
        let cpu = |name: &str| {
            c.runs
                .get(name)
                .filter(|run| run.cycles > 0)
                .map(|run| run.server_cpu_us_per_cycle)
                .unwrap_or(0.0)
        };
        rows.push(Row {
            what: "churn".into(),
            per: "session (connect, create, close)",
            zookeeper: cpu(ZK),
            wazoo: cpu(WZ),
        });
    }
    if let Some(m) = &r.memory {
        let cpu = |name: &str| {
            m.runs
                .get(name)
                .filter(|run| run.created > 0 && run.failure.is_none())
                .map(|run| run.load_server_cpu_secs * 1e6 / run.created as f64)
                .unwrap_or(0.0)
        };
        rows.push(Row {
            what: format!("memory load ({} znodes)", m.spec.nodes),
            per: "create",
            zookeeper: cpu(ZK),
            wazoo: cpu(WZ),
        });
    }
    if let Some(c) = r.recipes.as_ref().and_then(|b| b.recipe_call.as_ref()) {
        if c.run.failure.is_none() {
            rows.push(Row {
                what: "recipe-call (a no-op call and a getData, alternating)".into(),
                per: "request",
                zookeeper: 0.0,
                wazoo: c.run.server_cpu_us_per_request,
            });
        }
    }
    if let Some(rb) = &r.recipes {
        for b in [&rb.lock, &rb.queue].into_iter().flatten() {
            use crate::recipes::{Contended, WAZOO, ZK_KAZOO};
            let cpu = |key: &str| {
                b.runs
                    .get(key)
                    .map(|run| run.server_cpu_us_per_cycle)
                    .unwrap_or(0.0)
            };
            rows.push(Row {
                what: format!(
                    "{} ({} sessions on ensembles, members summed; wazoo's recipe, kazoo's on ZooKeeper)",
                    b.spec.recipe.name(),
                    b.spec.sessions
                ),
                per: match b.spec.recipe {
                    Contended::Lock => "cycle (acquire + release)",
                    Contended::Queue => "cycle (put + take)",
                },
                zookeeper: cpu(ZK_KAZOO),
                wazoo: cpu(WAZOO),
            });
        }
    }
    rows.retain(|row| row.zookeeper > 0.0 || row.wazoo > 0.0);
    rows
}

/// The section; nothing when no workload measured server CPU.
pub fn cpu_section(md: &mut String, r: &Results) {
    let rows = rows(r);
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        md,
        "## server CPU per operation\n\n\
         The server process's utime+stime (/proc/<pid>/stat; an ensemble's members summed) over \
         each workload's measured windows, divided by the operations completed in them, in µs \
         (lower is better). The sessions sweep and the payload curve give theirs per point in \
         their tables.\n"
    );
    let _ = writeln!(
        md,
        "| workload | per | zookeeper µs | wazoo µs | **wazoo/zookeeper** |"
    );
    let _ = writeln!(md, "|---|---|---:|---:|---:|");
    for row in rows {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | **{}** |",
            row.what,
            row.per,
            num(row.zookeeper),
            num(row.wazoo),
            ratio(row.wazoo, row.zookeeper)
        );
    }
    let _ = writeln!(md);
}
