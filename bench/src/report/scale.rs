//! Watches and sessions at scale: the fan-out and churn sections.

use std::fmt::Write as _;

use super::{lat_ms, median, num, one_line, plot_for, ratio, WZ, ZK};
use crate::results::{ChurnBlock, FanoutBlock, Results};

pub(super) fn fanout_section(md: &mut String, r: &Results, f: &FanoutBlock) {
    let s = &f.spec;
    let _ = writeln!(
        md,
        "## fanout — one write, many watchers\n\n\
         N sessions (plus one writer session) on the standalone server; per round every watcher \
         sets a data watch (getData with watch=true, all replies in before the write), then the \
         writer sets the znode. Delivery latency is from just before the setData to the moment \
         the watcher's task woke with the event (in this client process); \"all notified\" is \
         the largest of them in a round. {} round(s) per watcher count and system; the systems \
         alternate ({}).\n",
        s.rounds,
        f.order.join(", ")
    );
    if let Some(link) = plot_for(r, "fanout") {
        let _ = writeln!(md, "![fanout]({link})\n");
    }
    let _ = writeln!(
        md,
        "| watchers | system | delivery p50 ms | p90 ms | p99 ms | max ms | all notified ms: median (worst) | setData ms (median) | arming ms (median) | connect s |"
    );
    let _ = writeln!(md, "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (k, &n) in s.watchers.iter().enumerate() {
        let mut pair = Vec::new();
        for name in [ZK, WZ] {
            let Some(run) = f.runs.get(name).and_then(|v| v.get(k)) else {
                continue;
            };
            let d = &run.delivery;
            let _ = writeln!(
                md,
                "| {n} | {name} | {} | {} | {} | {} | {:.1} ({:.1}) | {:.2} | {:.1} | {:.1} |",
                lat_ms(d.p50_us),
                lat_ms(d.p90_us),
                lat_ms(d.p99_us),
                lat_ms(d.max_us),
                run.all_delivered_ms_median,
                run.all_delivered_ms_max,
                median(run.rounds.iter().map(|x| x.write_ms).collect()),
                median(run.rounds.iter().map(|x| x.arm_ms).collect()),
                run.connect_secs
            );
            pair.push(run);
        }
        if let [z, x] = pair[..] {
            let _ = writeln!(
                md,
                "| {n} | **wazoo/zookeeper** | {} | {} | **{}** | {} | **{}** | | {} | |",
                ratio(x.delivery.p50_us, z.delivery.p50_us),
                ratio(x.delivery.p90_us, z.delivery.p90_us),
                ratio(x.delivery.p99_us, z.delivery.p99_us),
                ratio(x.delivery.max_us, z.delivery.max_us),
                ratio(x.all_delivered_ms_median, z.all_delivered_ms_median),
                ratio(
                    median(x.rounds.iter().map(|r| r.arm_ms).collect()),
                    median(z.rounds.iter().map(|r| r.arm_ms).collect())
                ),
            );
        }
    }
    for (name, runs) in &f.runs {
        for run in runs {
            if let Some(e) = &run.failure {
                let _ = writeln!(
                    md,
                    "\n**{name}, {} watchers, did not complete:** `{}`",
                    run.watchers,
                    one_line(e)
                );
            }
        }
    }
    let _ = writeln!(md);
}

pub(super) fn churn_section(md: &mut String, r: &Results, c: &ChurnBlock) {
    let s = &c.spec;
    let _ = writeln!(
        md,
        "## churn — sessions that create an ephemeral znode and close\n\n\
         {} churners on the standalone server, each in a loop: open a session (TCP + handshake), \
         create an ephemeral znode, close the session (the client reports it closed once the \
         server answered closeSession). On ZooKeeper that is three transactions per cycle \
         (createSession, create, closeSession). {} s warm-up then {} s measured, {} round(s) per \
         system ({}). After each round every ephemeral must be gone: \"left\" counts those that \
         were not.\n",
        s.churners,
        s.warmup_secs,
        s.duration_secs,
        s.rounds,
        c.order.join(", ")
    );
    if let Some(link) = plot_for(r, "churn") {
        let _ = writeln!(md, "![churn]({link})\n");
    }
    let _ = writeln!(
        md,
        "| system | sessions/s | cycle p50 ms | cycle p99 ms | connect p50 / p99 ms | create p50 / p99 ms | close p50 / p99 ms | create+close p50 / p99 ms | server CPU µs/cycle | errors | left |"
    );
    let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|");
    let pair = |l: &crate::stats::Latency| format!("{} / {}", lat_ms(l.p50_us), lat_ms(l.p99_us));
    for name in [ZK, WZ] {
        if let Some(run) = c.runs.get(name) {
            let _ = writeln!(
                md,
                "| {name} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                num(run.sessions_per_sec),
                lat_ms(run.cycle.p50_us),
                lat_ms(run.cycle.p99_us),
                pair(&run.connect),
                pair(&run.create),
                pair(&run.close),
                pair(&run.create_close),
                num(run.server_cpu_us_per_cycle),
                if run.errors.is_empty() {
                    "0".to_string()
                } else {
                    format!("{:?}", run.errors)
                },
                run.leftover_ephemerals
            );
        }
    }
    if let (Some(z), Some(x)) = (c.runs.get(ZK), c.runs.get(WZ)) {
        let _ = writeln!(
            md,
            "| **wazoo/zookeeper** | **{}** | {} | **{}** | {} | {} | {} | {} | {} | | |",
            ratio(x.sessions_per_sec, z.sessions_per_sec),
            ratio(x.cycle.p50_us, z.cycle.p50_us),
            ratio(x.cycle.p99_us, z.cycle.p99_us),
            ratio(x.connect.p99_us, z.connect.p99_us),
            ratio(x.create.p99_us, z.create.p99_us),
            ratio(x.close.p99_us, z.close.p99_us),
            ratio(x.create_close.p99_us, z.create_close.p99_us),
            ratio(x.server_cpu_us_per_cycle, z.server_cpu_us_per_cycle),
        );
    }
    for (name, run) in &c.runs {
        if let Some(f) = &run.failure {
            let _ = writeln!(md, "\n**{name} did not complete:** `{}`", one_line(f));
        }
    }
    let _ = writeln!(md);
}
