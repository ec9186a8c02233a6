//! The Markdown report: one table per workload, both systems and the ratio
//! wazoo/zookeeper.

use std::fmt::Write as _;

use crate::client_bench::ClientResult;
use crate::failover::{fmt_ms, FailoverRun, Spread};
use crate::load::{LoadSpec, RunResult, Workload};
use crate::memory::mib;
use crate::results::{
    ChurnBlock, ContendBlock, EnsembleBlock, FanoutBlock, RecipesBlock, Results, WorkloadResult,
};

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
        | Workload::Fanout
        | Workload::Churn
        | Workload::Recovery
        | Workload::RecipeCall
        | Workload::Lock
        | Workload::Queue
        | Workload::Sweep => w.name().into(),
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

    if let Some(e) = &r.ensemble {
        ensemble_section(&mut md, r, e);
    }

    if let Some(rb) = &r.recipes {
        recipes_section(&mut md, r, rb);
    }

    let _ = writeln!(
        md,
        "Targets (issues 2, 4, 5 and 6): wazoo/zookeeper ops/s ≥ 2×, p99 < 1×, RSS ≤ 0.25×; \
         failover well under ZooKeeper's; recovery of 1,000,000 znodes under 5 s; a no-op \
         recipe call at most 1.5× a getData and instantiate + call under 50 µs; lock and \
         queue cycles/s with wazoo's recipes ≥ 3× kazoo's on ZooKeeper."
    );
    md
}

fn recipes_section(md: &mut String, r: &Results, rb: &RecipesBlock) {
    let _ = writeln!(
        md,
        "## Recipes — wazoo's server-side recipes against kazoo's client-side ones\n\n\
         Modules from `{}`; each server loads only the modules its workload uses.\n",
        rb.modules_dir
    );
    for s in &rb.systems {
        let _ = writeln!(md, "- **{}**: {}", s.name, s.version);
        for n in &s.notes {
            let _ = writeln!(md, "  - {n}");
        }
    }
    let _ = writeln!(md);
    if let Some(b) = &rb.recipe_call {
        let (s, run) = (&b.spec, &b.run);
        let _ = writeln!(
            md,
            "## recipe-call — a no-op recipe call against a getData\n\n\
             One `wazoo-client` connection to a standalone wazoo with the `echo` module: \
             {} round trips of `echo.noop` (a recipe call: the extension opcode, MessagePack \
             arguments, a fresh wasm instance on the server, the reply) and {} getData of a \
             {}-byte znode, alternating one by one (which goes first alternates too), after {} \
             unmeasured pairs. One request in flight, so this is latency, not throughput.\n",
            s.samples, s.samples, s.node_bytes, s.warmup_samples
        );
        if let Some(link) = plot_for(r, "recipe-call") {
            let _ = writeln!(md, "![recipe-call]({link})\n");
        }
        let _ = writeln!(
            md,
            "| request | count | p50 µs | p90 µs | p99 µs | p99.9 µs | max µs |"
        );
        let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|---:|");
        for (name, l) in [("echo.noop call", &run.call), ("getData", &run.get)] {
            let _ = writeln!(
                md,
                "| {name} | {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} |",
                l.count, l.p50_us, l.p90_us, l.p99_us, l.p999_us, l.max_us
            );
        }
        let _ = writeln!(
            md,
            "| **call/getData** | | **{:.2}×** | | **{:.2}×** | | |\n",
            run.ratio_p50, run.ratio_p99
        );
        let _ = writeln!(
            md,
            "Server CPU over the measured samples: {:.1} µs per request (calls and getData \
             together).\n",
            run.server_cpu_us_per_request
        );
        if let Some(i) = &run.inprocess {
            let _ = writeln!(
                md,
                "Server-side instantiate + call of `echo.noop` ({} bytes; compiled in {:.0} ms), \
                 measured in the bench's process with the server's runtime \
                 (`wazoo::plugin::Runtime`, default configuration), {} calls: \
                 **p50 {:.1} µs**, p99 {:.1} µs, mean {:.1} µs; fuel {} per call.\n",
                i.module_bytes, i.compile_ms, i.calls, i.p50_us, i.p99_us, i.mean_us, i.fuel
            );
        }
        if !run.errors.is_empty() {
            let _ = writeln!(md, "Errors: `{:?}`\n", run.errors);
        }
        if let Some(f) = &run.failure {
            let _ = writeln!(md, "**recipe-call did not complete:** `{}`\n", one_line(f));
        }
    }
    for b in [&rb.lock, &rb.queue].into_iter().flatten() {
        contend_section(md, r, b);
    }
}

fn contend_section(md: &mut String, r: &Results, b: &ContendBlock) {
    use crate::recipes::{pairing, Contended, WAZOO, WAZOO_KAZOO, ZK_KAZOO};
    let s = &b.spec;
    let name = s.recipe.name();
    let what = match s.recipe {
        Contended::Lock => format!(
            "{} sessions (one connection each) loop on ONE lock path: acquire, release. \
             wazoo's `lock` recipe through the client handle `Lock` (each acquire is one \
             recipe call, answered at once or, when another session holds the lock, by a \
             notification after the server-side watch on the predecessor fires; release is one \
             call) against kazoo's `Lock` (create the sequential node, list the children, \
             watch the predecessor, ... from the client, in Python: bench/kazoo_recipes.py, one \
             thread and one `KazooClient` per session). \"Overlaps\" counts a session getting \
             the lock while another held it (a sanity check; must be 0).",
            s.sessions
        ),
        Contended::Queue => format!(
            "{} sessions (one connection each) loop on ONE queue: put a unique item, then take \
             one (any session's). wazoo's `queue` recipe through `Queue` (one call each) against \
             kazoo's `Queue` (put: a create; get: list the children, getData and delete the \
             first, retry on a lost race). Afterwards every item put must have been taken \
             exactly once or still be in the queue: duplicates, foreign (taken, never put) and \
             lost items must all be 0.",
            s.sessions
        ),
    };
    let _ = writeln!(
        md,
        "## {name} — 3-member ensembles, {} contending sessions\n\n{what} {} s warm-up then {} s \
         measured, {} round(s) per pairing ({}). A cycle counts if it starts and ends inside \
         the window. Both ensembles run the whole time (one of them idle). The kazoo rows \
         include Python's own cost (GIL, one process, {} threads): that is what a kazoo user \
         runs; \"kazoo on wazoo\" shows the server's share apart from the recipe's.\n",
        s.sessions,
        s.warmup_secs,
        s.duration_secs,
        s.rounds,
        b.order.join(", "),
        s.sessions
    );
    if let Some(link) = plot_for(r, name) {
        let _ = writeln!(md, "![{name}]({link})\n");
    }
    let extra = match s.recipe {
        Contended::Lock => "overlaps",
        Contended::Queue => "put / taken / left · dup / foreign / lost",
    };
    let _ = writeln!(
        md,
        "| pairing | client | cycles/s | cycle p50 ms | cycle p90 ms | cycle p99 ms | max ms | errors | {extra} |"
    );
    let _ = writeln!(md, "|---|---|---:|---:|---:|---:|---:|---|---|");
    for key in [ZK_KAZOO, WAZOO, WAZOO_KAZOO] {
        let Some(run) = b.runs.get(key) else { continue };
        let check = match s.recipe {
            Contended::Lock => run.overlaps.to_string(),
            Contended::Queue => format!(
                "{} / {} / {} · {} / {} / {}",
                run.items_put,
                run.items_taken,
                run.remaining,
                run.duplicates,
                run.foreign,
                run.lost
            ),
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {check} |",
            pairing(key, s.recipe),
            run.client_version.as_deref().unwrap_or("–"),
            num(run.cycles_per_sec),
            lat_ms(run.cycle.p50_us),
            lat_ms(run.cycle.p90_us),
            lat_ms(run.cycle.p99_us),
            lat_ms(run.cycle.max_us),
            if run.errors.is_empty() {
                "0".to_string()
            } else {
                format!("{:?}", run.errors)
            },
        );
    }
    if let (Some(z), Some(w)) = (b.runs.get(ZK_KAZOO), b.runs.get(WAZOO)) {
        let _ = writeln!(
            md,
            "| **wazoo recipe / kazoo on ZooKeeper** | | **{}** | {} | {} | **{}** | | | |",
            ratio(w.cycles_per_sec, z.cycles_per_sec),
            ratio(w.cycle.p50_us, z.cycle.p50_us),
            ratio(w.cycle.p90_us, z.cycle.p90_us),
            ratio(w.cycle.p99_us, z.cycle.p99_us),
        );
    }
    if let (Some(z), Some(k)) = (b.runs.get(ZK_KAZOO), b.runs.get(WAZOO_KAZOO)) {
        let _ = writeln!(
            md,
            "| kazoo on wazoo / kazoo on ZooKeeper | | {} | {} | {} | {} | | | |",
            ratio(k.cycles_per_sec, z.cycles_per_sec),
            ratio(k.cycle.p50_us, z.cycle.p50_us),
            ratio(k.cycle.p90_us, z.cycle.p90_us),
            ratio(k.cycle.p99_us, z.cycle.p99_us),
        );
    }
    for (key, run) in &b.runs {
        if let Some(f) = &run.failure {
            let _ = writeln!(md, "\n**{key} did not complete:** `{}`", one_line(f));
        }
    }
    let _ = writeln!(md);
}

fn ensemble_section(md: &mut String, r: &Results, e: &EnsembleBlock) {
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
    if let Some(f) = &e.failover {
        let s = &f.spec;
        let _ = writeln!(
            md,
            "## ensemble: failover — kill -9 of the leader under write load\n\n\
             {} sessions × {} creates in flight (full connect string); after {} s the member \
             reporting `Mode: leader` is SIGKILLed; the writers go on for at least {} s and until \
             the new leader has taken writes for 1 s; then the member is restarted and every member \
             is checked (after `sync`) for every acknowledged create. {} kill(s) per system, the \
             systems alternating ({}). Times are from the SIGKILL:\n\n\
             * **first write**: the first create acknowledged to the load's sessions whose request \
             was issued after the killed leader was reaped (so it was committed by the new leader). \
             It includes the client's reconnect back-off (`zookeeper-client` tries members after 0, \
             ~50, ~100 ms, then ~0.3, ~0.6, ~1.2 s ... per cycle), the same for both systems.\n\
             * **probe**: a fresh session opened to each surviving member every {} ms until a create \
             on it is acknowledged (session creation is itself a quorum write): the server side, \
             without the client's back-off.\n\
             * **election**: until a survivor answers `srvr` with `Mode: leader` (polled every 10 ms).\n\
             * **gap**: last ack before the kill to the first write above; **½ rate**: to the end \
             of the first 100 ms (counted from the kill) in which writes issued after the kill got \
             half the acks/s of the last second before it.\n",
            s.sessions,
            s.inflight,
            s.warmup_secs,
            s.window_secs,
            s.rounds,
            f.order.join(", "),
            s.probe_interval_ms
        );
        if let Some(link) = plot_for(r, "failover") {
            let _ = writeln!(md, "![failover]({link})\n");
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

fn fanout_section(md: &mut String, r: &Results, f: &FanoutBlock) {
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

fn churn_section(md: &mut String, r: &Results, c: &ChurnBlock) {
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
        "## client — one connection pipelining getData against wazoo (issue 3)\n\n\
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
