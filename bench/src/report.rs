//! The Markdown report: one table per workload, both systems and the ratio
//! wazoo/zookeeper.

mod cpu;
mod ensemble;
mod recipes;
mod scale;

use std::fmt::Write as _;

use crate::client_bench::ClientResult;
use crate::load::{LoadSpec, RunResult, Workload};
use crate::memory::mib;
use crate::results::{Results, WorkloadResult};
use ensemble::ensemble_section;
use recipes::recipes_section;
use scale::{churn_section, fanout_section};

const ZK: &str = "zookeeper";
const WZ: &str = "wazoo";
/// Other tasks using more CPU than this (in cores) during a window get a
/// noise warning under the table.
const NOISE_CORES: f64 = 0.25;

pub(crate) fn ratio(wazoo: f64, zookeeper: f64) -> String {
    if wazoo > 0.0 && zookeeper > 0.0 {
        format!("{:.2}×", wazoo / zookeeper)
    } else {
        "–".to_string()
    }
}

pub(crate) fn num(v: f64) -> String {
    if v == 0.0 {
        "–".to_string()
    } else if v >= 100.0 {
        // Thousands separators for readability.
        let s = format!("{:.0}", v);
        let mut out = String::new();
        for (i, c) in s.chars().enumerate() {
            if i > 0 && (s.len() - i) % 3 == 0 {
                out.push(',');
            }
            out.push(c);
        }
        out
    } else {
        format!("{v:.1}")
    }
}

fn describe(w: Workload, l: &LoadSpec) -> String {
    let mixed_read_percent = l.mixed_read_percent;
    match w {
        Workload::Create => "create: persistent znodes with unique paths under one parent".into(),
        Workload::Set => "setData on random znodes of a pre-created set".into(),
        Workload::Get => "getData on random znodes of a pre-created set".into(),
        Workload::Mixed => format!(
            "{mixed_read_percent}% getData / {}% setData on random pre-created znodes",
            100 - mixed_read_percent
        ),
        Workload::ExistsWatch => format!(
            "exists(path, watch=true) on random znodes of {} pre-created; every call leaves a \
             watch (the server's watch table holds up to sessions × paths)",
            l.watch_paths
        ),
        Workload::Client
        | Workload::Memory
        | Workload::Failover
        | Workload::FailoverPause
        | Workload::FailoverPartition
        | Workload::Fanout
        | Workload::Churn
        | Workload::Recovery
        | Workload::RecipeCall
        | Workload::RecipeIsolation
        | Workload::Lock
        | Workload::Queue
        | Workload::Sweep
        | Workload::MemoryCurve
        | Workload::FanoutCurve
        | Workload::PayloadCurve => w.name().into(),
    }
}

pub fn markdown(r: &Results) -> String {
    let mut md = String::new();
    let l = &r.load;
    let _ = writeln!(md, "# wazoo vs Apache ZooKeeper: side-by-side benchmark\n");
    let _ = writeln!(
        md,
        "One run, one machine ({} CPUs, kernel {}, {:.1} GiB RAM; load average at start `{}`, at end `{}`), \
         servers on loopback (standalone, then {}-member ensembles where run), driven by the same load generator \
         (Rust `zookeeper-client` crate, tokio with {} worker threads, in the same process for both). \
         Systems alternate order from workload to workload. Total time {:.0} s.\n",
        r.machine.cpus,
        r.machine.kernel,
        r.machine.mem_total_bytes.unwrap_or(0) as f64 / (1u64 << 30) as f64,
        r.machine.loadavg_at_start,
        r.machine.loadavg_at_end,
        r.args.members,
        r.machine.client_threads,
        r.total_secs
    );
    let _ = writeln!(
        md,
        "Load: {} sessions × {} requests in flight each, {}-byte payloads, {} s warm-up then {} s measured, \
         {} round(s) per system (pooled; the order alternates A B, B A, ...); \
         set/get/mixed pick uniformly among {} pre-created znodes. Latency is per request, from the \
         client's call to its reply. Server CPU is the server process's user+system time during the \
         measured windows divided by the requests completed in them: on a shared 2-core box it is the \
         steadiest figure of efficiency. Softirq is kernel time no process is charged for, mostly \
         the loopback traffic of this load. \"Idle server\" is the other system's server, idle but \
         alive meanwhile (a JVM may still be collecting or snapshotting). \"Others' CPU\" is what \
         every other task on the machine burned meanwhile (other processes, kernel threads such as \
         the filesystem journal), in cores: the noise.\n",
        l.sessions, l.inflight, l.payload, l.warmup_secs, l.duration_secs, l.rounds, l.keys
    );
    if !r.systems.is_empty() {
        let _ = writeln!(md, "## Systems (standalone)\n");
    }
    for s in &r.systems {
        let _ = writeln!(md, "- **{}**: {}", s.name, s.version);
        if !s.jvm_flags.is_empty() {
            let heap = s
                .jvm_max_heap_bytes
                .map(|b| format!("; the JVM runs with MaxHeapSize {:.0} MiB", mib(b)))
                .unwrap_or_default();
            let _ = writeln!(
                md,
                "  - JVM options: `{}` (the last -Xmx wins){heap}",
                s.jvm_flags.join(" ")
            );
        }
        for n in &s.notes {
            let _ = writeln!(md, "  - {n}");
        }
    }
    let _ = writeln!(md);

    if !r.plots.is_empty() {
        let links: Vec<String> = r
            .plots
            .iter()
            .map(|p| format!("[{}]({p})", plot_name(p)))
            .collect();
        let _ = writeln!(
            md,
            "Plots (SVG, ZooKeeper orange, wazoo blue): {}\n",
            links.join(" · ")
        );
    }
    for w in &r.workloads {
        workload_section(&mut md, w, l, "", plot_for(r, w.workload.name()));
    }
    if let Some(b) = &r.sweep {
        crate::sweep::section(&mut md, b, "", plot_for(r, "sweep"));
    }
    if let Some(f) = &r.fanout {
        fanout_section(&mut md, r, f);
    }
    if let Some(c) = &r.churn {
        churn_section(&mut md, r, c);
    }

    if let Some(c) = &r.client {
        client_section(&mut md, &c.spec, &c.result);
    }

    if let Some(m) = &r.memory {
        let s = &m.spec;
        let _ = writeln!(
            md,
            "## memory — {} znodes of {} bytes\n\nA fresh server per system; the znodes \
             (`/mem/bNNNN/nNNNN`, {} per parent) are created as fast as {} sessions × {} pipelined \
             creates go; then VmRSS of the server process is read from /proc/<pid>/status \
             ({} s after the last create; peak is VmHWM). Run order: {}.\n",
            s.nodes,
            s.node_bytes,
            s.children_per_parent,
            s.sessions,
            s.inflight,
            s.settle_secs,
            m.order.join(", then ")
        );
        if let Some(link) = plot_for(r, "memory") {
            let _ = writeln!(md, "![memory]({link})\n");
        }
        let _ = writeln!(
            md,
            "| system | RSS MiB | peak RSS MiB | empty-server RSS MiB | znodes created | mntr znode count | load s | creates/s |"
        );
        let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|---:|---:|");
        for name in [ZK, WZ] {
            if let Some(run) = m.runs.get(name) {
                let _ = writeln!(
                    md,
                    "| {name} | {:.1} | {:.1} | {:.1} | {} | {} | {:.1} | {} |",
                    mib(run.rss_bytes),
                    mib(run.rss_peak_bytes),
                    mib(run.rss_empty_bytes),
                    run.created,
                    run.mntr_znode_count
                        .map(|n| n.to_string())
                        .unwrap_or_else(|| "–".into()),
                    run.load_secs,
                    num(run.creates_per_sec)
                );
            }
        }
        if let (Some(z), Some(x)) = (m.runs.get(ZK), m.runs.get(WZ)) {
            let _ = writeln!(
                md,
                "| **wazoo/zookeeper** | **{}** | {} | {} | | | {} | **{}** |",
                ratio(x.rss_bytes as f64, z.rss_bytes as f64),
                ratio(x.rss_peak_bytes as f64, z.rss_peak_bytes as f64),
                ratio(x.rss_empty_bytes as f64, z.rss_empty_bytes as f64),
                ratio(x.load_secs, z.load_secs),
                ratio(x.creates_per_sec, z.creates_per_sec),
            );
        }
        if m.all_runs.values().any(|v| v.len() > 1) {
            let each: Vec<String> = [ZK, WZ]
                .iter()
                .filter_map(|&name| {
                    let v = m.all_runs.get(name)?;
                    let list: Vec<String> = v
                        .iter()
                        .map(|r| match &r.failure {
                            None => format!("{:.1}", mib(r.rss_bytes)),
                            Some(_) => "failed".to_string(),
                        })
                        .collect();
                    Some(format!("{name} {}", list.join(", ")))
                })
                .collect();
            let _ = writeln!(
                md,
                "\nEach row is the run with the median RSS of {} runs per system, each on a fresh \
                 server (RSS MiB of every run, in order: {}).",
                m.all_runs.values().map(Vec::len).max().unwrap_or(0),
                each.join("; ")
            );
        }
        if let Some(z) = m.runs.get(ZK) {
            if let (Some(rss), Some(heap)) =
                (z.rss_after_full_gc_bytes, z.jvm_heap_used_after_gc_bytes)
            {
                let vs = m
                    .runs
                    .get(WZ)
                    .map(|x| {
                        format!(
                            " (wazoo/zookeeper against those: {} of the RSS, {} of the live heap)",
                            ratio(x.rss_bytes as f64, rss as f64),
                            ratio(x.rss_bytes as f64, heap as f64)
                        )
                    })
                    .unwrap_or_default();
                let _ = writeln!(
                    md,
                    "\nThe JVM holds garbage until it needs the room: after the figure above, a forced \
                     full GC (`jcmd GC.run`) left ZooKeeper with RSS {:.1} MiB and a live heap of \
                     {:.1} MiB{vs}.",
                    mib(rss),
                    mib(heap)
                );
            }
        }
        for (name, run) in &m.runs {
            if let Some(f) = &run.failure {
                let _ = writeln!(md, "\n**{name} did not complete:** `{}`", one_line(f));
            }
        }
        let _ = writeln!(md);
    }

    recovery_section(&mut md, r);

    if let Some(c) = &r.curves {
        crate::curves::sections(&mut md, c, |name| plot_for(r, name));
    }

    if let Some(e) = &r.ensemble {
        ensemble_section(&mut md, r, e);
    }

    if let Some(rb) = &r.recipes {
        recipes_section(&mut md, r, rb);
    }

    cpu::cpu_section(&mut md, r);

    let _ = writeln!(
        md,
        "Targets: wazoo/zookeeper ops/s ≥ 2×, p99 < 1×, RSS ≤ 0.25×; \
         failover well under ZooKeeper's; recovery of 1,000,000 znodes under 5 s; a no-op \
         recipe call at most 1.5× a getData and instantiate + call under 50 µs; lock and \
         queue cycles/s with wazoo's recipes ≥ 3× kazoo's on ZooKeeper."
    );
    md
}

/// The link of the plot named `name` (`<stem>-<name>.svg`), if written.
fn plot_for<'a>(r: &'a Results, name: &str) -> Option<&'a str> {
    let suffix = format!("-{name}.svg");
    r.plots
        .iter()
        .find(|p| p.ends_with(&suffix))
        .map(String::as_str)
}

/// `fanout` for `.../report-fanout.svg`: the name after the stem.
fn plot_name(link: &str) -> String {
    let file = link.rsplit('/').next().unwrap_or(link);
    let base = file.strip_suffix(".svg").unwrap_or(file);
    if base.ends_with("-recipe-call") {
        return "recipe-call".to_string();
    }
    for known in ["exists-watch", "create", "set", "get", "mixed", "sweep"] {
        let ens = format!("ensemble-{known}");
        if base.ends_with(&format!("-{ens}")) {
            return ens;
        }
        if base.ends_with(&format!("-{known}")) {
            return known.to_string();
        }
    }
    base.rsplit('-').next().unwrap_or(base).to_string()
}

fn lat_ms(us: f64) -> String {
    if us <= 0.0 {
        "–".to_string()
    } else {
        format!("{:.2}", us / 1000.0)
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn recovery_section(md: &mut String, r: &Results) {
    let (Some(spec), Some(m)) = (&r.recovery, &r.memory) else {
        return;
    };
    let _ = writeln!(
        md,
        "## recovery — kill -9 with {} znodes, then restart\n\n\
         The memory figure's loaded server (snapCount at its default, 100,000: both systems \
         snapshot along the load) is killed with SIGKILL and started again on the same data \
         directory, {} time(s) per system. *Answered* is from the new process's start to the \
         first getData of the last znode loaded answered with its data, by a probe that speaks \
         the wire protocol itself (a new attempt every {} ms, no client back-off); *ready* is \
         testkit's readiness check (polled every 50 ms), for reference. The first restart \
         recovers from the snapshots taken during the load plus the log after them (ZooKeeper \
         also writes a fresh snapshot once it has loaded); later restarts recover from whatever \
         the previous one left.\n",
        m.spec.nodes, spec.restarts, spec.probe_interval_ms
    );
    if let Some(link) = plot_for(r, "recovery") {
        let _ = writeln!(md, "![recovery]({link})\n");
    }
    let _ = writeln!(
        md,
        "| system | restart | answered s | ready s | znodes after | RSS after MiB | data dir MiB | probe attempts |"
    );
    let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|---:|---:|");
    let mut failures = Vec::new();
    for name in [ZK, WZ] {
        let Some(run) = m.runs.get(name) else {
            continue;
        };
        for (k, rs) in run.restarts.iter().enumerate() {
            let _ = writeln!(
                md,
                "| {name} | {} | **{:.2}** | {:.2} | {} | {} | {:.1} | {} |",
                k + 1,
                rs.answered_ms / 1e3,
                rs.ready_ms / 1e3,
                rs.znodes_after
                    .map(|n| n.to_string())
                    .unwrap_or_else(|| "–".into()),
                rs.rss_after_bytes
                    .map(|b| format!("{:.1}", mib(b)))
                    .unwrap_or_else(|| "–".into()),
                mib(rs.data_dir_bytes),
                rs.probe_attempts
            );
            if let Some(f) = &rs.failure {
                failures.push(format!(
                    "**{name} restart {} failed:** `{}`",
                    k + 1,
                    one_line(f)
                ));
            }
        }
    }
    if let (Some(z), Some(x)) = (m.runs.get(ZK), m.runs.get(WZ)) {
        let first = |run: &crate::memory::MemoryRun| {
            run.restarts
                .first()
                .filter(|r| r.failure.is_none())
                .map(|r| r.answered_ms)
                .unwrap_or(0.0)
        };
        let dir = |run: &crate::memory::MemoryRun| {
            run.restarts.first().map(|r| r.data_dir_bytes).unwrap_or(0) as f64
        };
        let _ = writeln!(
            md,
            "| **wazoo/zookeeper** | 1 | **{}** | | | | {} | |",
            ratio(first(x), first(z)),
            ratio(dir(x), dir(z)),
        );
    }
    for f in failures {
        let _ = writeln!(md, "\n{f}");
    }
    let _ = writeln!(md);
}

/// Ensembles: each member's mode, CPU (cores) and sessions.
pub fn members_line(run: &RunResult) -> Option<String> {
    if run.member_cpu_secs.is_empty() || run.window_secs <= 0.0 {
        return None;
    }
    let parts: Vec<String> = run
        .member_cpu_secs
        .iter()
        .enumerate()
        .map(|(i, cpu)| {
            let mode = run.member_modes.get(i).map(String::as_str).unwrap_or("?");
            let sessions: Vec<String> = run
                .sessions_per_member
                .iter()
                .map(|r| match r.get(i) {
                    Some(&n) if n >= 0 => n.to_string(),
                    _ => "?".to_string(),
                })
                .collect();
            format!(
                "{} {mode} {:.2} cores, {} sessions",
                i + 1,
                cpu / run.window_secs,
                sessions.join("/")
            )
        })
        .collect();
    Some(format!(
        "{} (member mode CPU, sessions per round)",
        parts.join("; ")
    ))
}

fn run_row(name: &str, run: &RunResult) -> String {
    let l = &run.latency;
    format!(
        "| {name} | {} | {} | {} | {} | {} | {} | {} | {} | {:.2} | {:.2} | {:.2} | {} | {} |",
        num(run.ops_per_sec),
        num(l.p50_us),
        num(l.p90_us),
        num(l.p99_us),
        num(l.p999_us),
        num(l.max_us),
        num(run.server_cpu_us_per_op),
        num(run.client_cpu_us_per_op),
        run.idle_server_cpu_cores,
        run.softirq_cores,
        run.other_cpu_cores,
        run.errors,
        run.rounds_ops_per_sec
            .iter()
            .map(|v| num(*v))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

fn client_section(md: &mut String, spec: &crate::client_bench::ClientSpec, c: &ClientResult) {
    let _ = writeln!(
        md,
        "## client — one connection pipelining getData against wazoo\n\n\
         One session on loopback, {} getData of a 100-byte znode in flight, {} measured round(s) of {} s \
         per crate, rounds alternating between the crates. Client CPU is this process's CPU per request.\n",
        spec.inflight, spec.rounds, spec.duration_secs
    );
    let _ = writeln!(
        md,
        "| client crate | requests/s | client CPU µs/request | server CPU µs/request | rounds (requests/s) |"
    );
    let _ = writeln!(md, "|---|---:|---:|---:|---|");
    let zc = ClientResult::pooled(&c.zookeeper_client);
    let wc = ClientResult::pooled(&c.wazoo_client);
    for (name, pooled, runs) in [
        ("zookeeper-client", &zc, &c.zookeeper_client),
        ("wazoo-client", &wc, &c.wazoo_client),
    ] {
        if let Some(p) = pooled {
            let rounds: Vec<String> = runs.iter().map(|r| num(r.requests_per_sec)).collect();
            let _ = writeln!(
                md,
                "| {name} | {} | {:.1} | {:.1} | {} |",
                num(p.requests_per_sec),
                p.client_cpu_us_per_request,
                p.server_cpu_us_per_request,
                rounds.join(", ")
            );
        }
    }
    if let (Some(z), Some(w)) = (&zc, &wc) {
        let _ = writeln!(
            md,
            "| **wazoo-client/zookeeper-client** | **{}** | {} | {} | |",
            ratio(w.requests_per_sec, z.requests_per_sec),
            ratio(w.client_cpu_us_per_request, z.client_cpu_us_per_request),
            ratio(w.server_cpu_us_per_request, z.server_cpu_us_per_request),
        );
    }
    if let Some(f) = &c.failure {
        let _ = writeln!(md, "\n**did not complete:** `{}`", one_line(f));
    }
    let _ = writeln!(md);
}

fn one_line(s: &str) -> String {
    s.lines().next().unwrap_or("").chars().take(300).collect()
}

/// One throughput workload's table; `title` prefixes the heading
/// ("" standalone, "ensemble: " for ensembles).
fn workload_section(
    md: &mut String,
    w: &WorkloadResult,
    l: &LoadSpec,
    title: &str,
    plot: Option<&str>,
) {
    let _ = writeln!(
        md,
        "## {title}{} — {}\n",
        w.workload.name(),
        describe(w.workload, l)
    );
    if let Some(link) = plot {
        let _ = writeln!(md, "![{}]({link})\n", w.workload.name());
    }
    let _ = writeln!(md, "Run order: {}.\n", w.order.join(", then "));
    let _ = writeln!(
        md,
        "| system | ops/s | p50 µs | p90 µs | p99 µs | p99.9 µs | max µs | server CPU µs/op | client CPU µs/op | idle server CPU (cores) | softirq (cores) | others' CPU (cores) | errors | ops/s per round |"
    );
    let _ = writeln!(
        md,
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    );
    for name in [ZK, WZ] {
        if let Some(run) = w.runs.get(name) {
            let _ = writeln!(md, "{}", run_row(name, run));
        }
    }
    if let (Some(z), Some(x)) = (w.runs.get(ZK), w.runs.get(WZ)) {
        let (zl, xl) = (&z.latency, &x.latency);
        let _ = writeln!(
            md,
            "| **wazoo/zookeeper** | **{}** | {} | {} | **{}** | {} | {} | {} | {} | | | | | |",
            ratio(x.ops_per_sec, z.ops_per_sec),
            ratio(xl.p50_us, zl.p50_us),
            ratio(xl.p90_us, zl.p90_us),
            ratio(xl.p99_us, zl.p99_us),
            ratio(xl.p999_us, zl.p999_us),
            ratio(xl.max_us, zl.max_us),
            ratio(x.server_cpu_us_per_op, z.server_cpu_us_per_op),
            ratio(x.client_cpu_us_per_op, z.client_cpu_us_per_op),
        );
    }
    if w.workload == Workload::Mixed {
        for name in [ZK, WZ] {
            if let Some(run) = w.runs.get(name) {
                if let (Some(rd), Some(wr)) = (&run.read_latency, &run.write_latency) {
                    let _ = writeln!(
                        md,
                        "\n{name}: reads p50 {} / p99 {} µs ({} ops), writes p50 {} / p99 {} µs ({} ops)",
                        num(rd.p50_us),
                        num(rd.p99_us),
                        rd.count,
                        num(wr.p50_us),
                        num(wr.p99_us),
                        wr.count
                    );
                }
            }
        }
    }
    for name in [ZK, WZ] {
        if let Some(run) = w.runs.get(name) {
            if let Some(line) = members_line(run) {
                let _ = writeln!(md, "\n{name} members: {line}");
            }
        }
    }
    let noisy: Vec<String> = w
        .runs
        .iter()
        .filter(|(_, run)| run.other_cpu_cores > NOISE_CORES)
        .map(|(name, run)| format!("{:.2} cores during {name}'s windows", run.other_cpu_cores))
        .collect();
    if !noisy.is_empty() {
        let _ = writeln!(
            md,
            "\n**Noisy:** other tasks on the machine used {}; ops/s and latency of that \
             system are understated (server CPU per op is less affected). Rerun for a clean figure.",
            noisy.join(", ")
        );
    }
    for (name, run) in &w.runs {
        if let Some(f) = &run.failure {
            let _ = writeln!(md, "\n**{name} did not complete:** `{}`", one_line(f));
        }
        if !run.error_kinds.is_empty() {
            let _ = writeln!(md, "\n{name} errors: {:?}", run.error_kinds);
        }
    }
    let _ = writeln!(md);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_ratios() {
        assert_eq!(num(1234567.4), "1,234,567");
        assert_eq!(num(123.0), "123");
        assert_eq!(num(12.34), "12.3");
        assert_eq!(num(0.0), "–");
        assert_eq!(ratio(2.0, 1.0), "2.00×");
        assert_eq!(ratio(0.0, 1.0), "–");
    }
}
