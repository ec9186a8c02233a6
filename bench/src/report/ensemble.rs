//! The ensemble section: the throughput workloads on ensembles, and
//! failover.

use std::fmt::Write as _;

use super::{num, one_line, plot_for, ratio, workload_section, WZ, ZK};
use crate::failover::{fmt_ms, FailoverRun, Spread};
use crate::memory::mib;
use crate::results::{EnsembleBlock, FailoverBlock, Results};

pub(super) fn ensemble_section(md: &mut String, r: &Results, e: &EnsembleBlock) {
    let l = &e.load;
    let _ = writeln!(
        md,
        "# {}-member ensembles
",
        e.members
    );
    let _ = writeln!(
        md,
        "Each system runs as a {}-member ensemble on loopback (both ensembles alive through \
         the phase; the idle one is the \"idle server\" column). The clients get the full \
         connect string, and the `zookeeper-client` crate picks a member at random per \
         session, so sessions land unevenly (the per-member lines say where they went: reads \
         are served by the member a session is on, writes go through the leader). Server CPU \
         is the sum over the members. Load: {} sessions × {} requests in flight, {}-byte \
         payloads, {} s warm-up then {} s measured, {} round(s) per system.\n",
        e.members, l.sessions, l.inflight, l.payload, l.warmup_secs, l.duration_secs, l.rounds
    );
    let _ = writeln!(md, "## Systems (ensembles)\n");
    for s in &e.systems {
        let _ = writeln!(md, "- **{}**: {}", s.name, s.version);
        for n in &s.notes {
            let _ = writeln!(md, "  - {n}");
        }
    }
    let _ = writeln!(md);
    for w in &e.workloads {
        let name = format!("ensemble-{}", w.workload.name());
        workload_section(md, w, l, "ensemble: ", plot_for(r, &name));
    }
    if let Some(b) = &e.sweep {
        crate::sweep::section(md, b, "ensemble: ", plot_for(r, "ensemble-sweep"));
    }
    for (f, plot) in [
        (&e.failover, "failover"),
        (&e.failover_pause, "failover-pause"),
        (&e.failover_partition, "failover-partition"),
    ] {
        if let Some(f) = f {
            failover_section(md, r, f, plot);
        }
    }
    if !e.member_rss_bytes.is_empty() {
        let parts: Vec<String> = [ZK, WZ]
            .iter()
            .filter_map(|name| {
                let rss = e.member_rss_bytes.get(*name)?;
                Some(format!(
                    "{name} {} MiB",
                    rss.iter()
                        .map(|b| b
                            .map(|b| format!("{:.0}", mib(b)))
                            .unwrap_or_else(|| "?".into()))
                        .collect::<Vec<_>>()
                        .join(" / ")
                ))
            })
            .collect();
        let _ = writeln!(
            md,
            "Members' RSS at the end of the ensemble phase: {}.\n",
            parts.join("; ")
        );
    }
}

/// One failover workload's section: the leader killed, paused or cut off.
fn failover_section(md: &mut String, r: &Results, f: &FailoverBlock, plot: &str) {
    let s = &f.spec;
    let _ = writeln!(
        md,
        "## ensemble: {plot} — {} under write load\n\n\
         {} sessions × {} creates in flight (full connect string); after {} s the member \
         reporting `Mode: leader` fails ({}); the writers go on for at least {} s and until \
         the new leader has taken writes for 1 s; then the member is brought back (killed: \
         restarted; paused: let go on; partitioned: healed) and every member is checked \
         (after `sync`) for every acknowledged create. {} failure(s) per system, the systems \
         alternating ({}). Times are from the failure (\"kill\" below):\n\n\
         * **first write**: the first create acknowledged to the load's sessions whose request \
         was issued after the failure was injected (so it was committed by the new leader). \
         It includes the client's reconnect back-off (`zookeeper-client` tries members after 0, \
         ~50, ~100 ms, then ~0.3, ~0.6, ~1.2 s ... per cycle), the same for both systems.\n\
         * **probe**: a fresh session opened to each surviving member every {} ms until a create \
         on it is acknowledged (session creation is itself a quorum write): the server side, \
         without the client's back-off.\n\
         * **election**: until a survivor answers `srvr` with `Mode: leader` (polled every 10 ms).\n\
         * **gap**: last ack before the kill to the first write above; **½ rate**: to the end \
         of the first 100 ms (counted from the kill) in which writes issued after the kill got \
         half the acks/s of the last second before it.\n",
        s.failure.what(),
        s.sessions,
        s.inflight,
        s.warmup_secs,
        s.failure.what(),
        s.window_secs,
        s.rounds,
        f.order.join(", "),
        s.probe_interval_ms
    );
    if let Some(link) = plot_for(r, plot) {
        let _ = writeln!(md, "![{plot}]({link})\n");
    }
    let _ = writeln!(
        md,
        "| system | kills | first write ms: median (min–max) | probe ms | election ms | gap ms | ½ rate ms | writes/s before → after | client errors | acked writes lost |"
    );
    let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|");
    for name in [ZK, WZ] {
        if let Some(run) = f.runs.get(name) {
            let _ = writeln!(md, "{}", failover_row(name, run));
        }
    }
    if let (Some(z), Some(x)) = (f.runs.get(ZK), f.runs.get(WZ)) {
        let med = |s: &Option<Spread>| s.as_ref().map(|s| s.median).unwrap_or(0.0);
        let _ = writeln!(
            md,
            "| **wazoo/zookeeper** (medians) | | **{}** | {} | {} | {} | {} | | | |",
            ratio(med(&x.first_ack_ms), med(&z.first_ack_ms)),
            ratio(med(&x.probe_ms), med(&z.probe_ms)),
            ratio(med(&x.election_ms), med(&z.election_ms)),
            ratio(med(&x.write_gap_ms), med(&z.write_gap_ms)),
            ratio(med(&x.half_throughput_ms), med(&z.half_throughput_ms)),
        );
    }
    let _ = writeln!(md);
    for name in [ZK, WZ] {
        let Some(run) = f.runs.get(name) else {
            continue;
        };
        for (i, r) in run.rounds.iter().enumerate() {
            let _ = writeln!(
                md,
                "- {name} kill {}: member {} killed ({:.0} ms to reap), member {} took over; election {}, probe {} \
                 (member {}), first write {}, gap {}, ½ rate {}; {} writes/s before, {} after; \
                 errors {:?}; restart {}; the round's znodes per member {}; then members (mode, RSS MiB) {}{}",
                i + 1,
                r.killed_member,
                r.reap_ms,
                r.new_leader_member
                    .map(|m| m.to_string())
                    .unwrap_or_else(|| "?".into()),
                fmt_ms(r.election_ms),
                fmt_ms(r.probe_ms),
                r.probe_member
                    .map(|m| m.to_string())
                    .unwrap_or_else(|| "?".into()),
                fmt_ms(r.first_ack_ms),
                fmt_ms(r.write_gap_ms),
                fmt_ms(r.half_throughput_ms),
                num(r.pre_kill_writes_per_sec),
                num(r.post_failover_writes_per_sec),
                r.error_kinds,
                r.restart_secs
                    .map(|s| format!("{s:.1} s"))
                    .unwrap_or_else(|| "–".into()),
                r.znodes_per_member
                    .iter()
                    .map(|v| v.map(|n| n.to_string()).unwrap_or_else(|| "?".into()))
                    .collect::<Vec<_>>()
                    .join(" / "),
                r.modes_after
                    .iter()
                    .zip(&r.rss_after_bytes)
                    .map(|(m, b)| format!(
                        "{m} {}",
                        b.map(|b| format!("{:.0}", mib(b)))
                            .unwrap_or_else(|| "?".into())
                    ))
                    .collect::<Vec<_>>()
                    .join(" / "),
                r.failure
                    .as_ref()
                    .map(|f| format!("; **failed:** `{}`", one_line(f)))
                    .unwrap_or_default()
            );
        }
    }
    let _ = writeln!(md);
}

fn spread(s: &Option<Spread>) -> String {
    match s {
        None => "–".to_string(),
        Some(s) if s.n == 1 => format!("{:.0}", s.median),
        Some(s) => format!("{:.0} ({:.0}–{:.0})", s.median, s.min, s.max),
    }
}

fn failover_row(name: &str, run: &FailoverRun) -> String {
    let before: Vec<f64> = run
        .rounds
        .iter()
        .map(|r| r.pre_kill_writes_per_sec)
        .collect();
    let after: Vec<f64> = run
        .rounds
        .iter()
        .map(|r| r.post_failover_writes_per_sec)
        .collect();
    let mean = |v: &[f64]| {
        if v.is_empty() {
            0.0
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    };
    let errors = if run.error_kinds.is_empty() {
        "0".to_string()
    } else {
        run.error_kinds
            .iter()
            .map(|(k, v)| format!("{v} {k}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "| {name} | {}{} | **{}** | {} | {} | {} | {} | {} → {} | {} | {} |",
        run.rounds.len(),
        if run.failures.is_empty() {
            String::new()
        } else {
            format!(" ({} failed)", run.failures.len())
        },
        spread(&run.first_ack_ms),
        spread(&run.probe_ms),
        spread(&run.election_ms),
        spread(&run.write_gap_ms),
        spread(&run.half_throughput_ms),
        num(mean(&before)),
        num(mean(&after)),
        errors,
        run.lost_acked_writes
    )
}
