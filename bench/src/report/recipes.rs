//! The recipe sections: recipe-call, and lock and queue contention.

use std::fmt::Write as _;

use super::{lat_ms, num, one_line, plot_for, ratio};
use crate::results::{ContendBlock, RecipesBlock, Results};

pub(super) fn recipes_section(md: &mut String, r: &Results, rb: &RecipesBlock) {
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
        "| pairing | client | cycles/s | cycle p50 ms | cycle p90 ms | cycle p99 ms | max ms | server CPU µs/cycle | other processes, cores | errors | {extra} |"
    );
    let _ = writeln!(md, "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|");
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
            "| {} | {} | {} | {} | {} | {} | {} | {} | {:.2} | {} | {check} |",
            pairing(key, s.recipe),
            run.client_version.as_deref().unwrap_or("–"),
            num(run.cycles_per_sec),
            lat_ms(run.cycle.p50_us),
            lat_ms(run.cycle.p90_us),
            lat_ms(run.cycle.p99_us),
            lat_ms(run.cycle.max_us),
            num(run.server_cpu_us_per_cycle),
            run.other_cpu_cores,
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
            "| **wazoo recipe / kazoo on ZooKeeper** | | **{}** | {} | {} | **{}** | | {} | | | |",
            ratio(w.cycles_per_sec, z.cycles_per_sec),
            ratio(w.cycle.p50_us, z.cycle.p50_us),
            ratio(w.cycle.p90_us, z.cycle.p90_us),
            ratio(w.cycle.p99_us, z.cycle.p99_us),
            ratio(w.server_cpu_us_per_cycle, z.server_cpu_us_per_cycle),
        );
    }
    if let (Some(z), Some(k)) = (b.runs.get(ZK_KAZOO), b.runs.get(WAZOO_KAZOO)) {
        let _ = writeln!(
            md,
            "| kazoo on wazoo / kazoo on ZooKeeper | | {} | {} | {} | {} | | {} | | | |",
            ratio(k.cycles_per_sec, z.cycles_per_sec),
            ratio(k.cycle.p50_us, z.cycle.p50_us),
            ratio(k.cycle.p90_us, z.cycle.p90_us),
            ratio(k.cycle.p99_us, z.cycle.p99_us),
            ratio(k.server_cpu_us_per_cycle, z.server_cpu_us_per_cycle),
        );
    }
    for (key, run) in &b.runs {
        if let Some(f) = &run.failure {
            let _ = writeln!(md, "\n**{key} did not complete:** `{}`", one_line(f));
        }
    }
    let _ = writeln!(md);
}
