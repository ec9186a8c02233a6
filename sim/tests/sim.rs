//! The whole-member simulation: seeds in the default suite, more on
//! request (see the crate doc), and a replay check.

use wazoo_sim::{env_u64, run_seed, run_seed_with, Summary, Variant};

const DEFAULT_SEEDS: u64 = 300;

/// 300 seeds by default; `WAZOO_SIM_SEEDS` for more (from
/// `WAZOO_SIM_FIRST`), `WAZOO_SIM_SEED` for one.
#[test]
fn whole_member_simulation() {
    let trace = std::env::var("WAZOO_SIM_TRACE").is_ok_and(|v| v == "1");
    if let Some(seed) = env_u64("WAZOO_SIM_SEED") {
        let s = run_seed(seed, trace);
        eprintln!("seed {seed}: {s:?}");
        return;
    }
    let count = env_u64("WAZOO_SIM_SEEDS").unwrap_or(DEFAULT_SEEDS);
    let first = env_u64("WAZOO_SIM_FIRST").unwrap_or(0);
    let started = std::time::Instant::now();
    // WAZOO_SIM_KEEP_GOING=1: run every seed, then list the failures.
    let keep_going = std::env::var("WAZOO_SIM_KEEP_GOING").is_ok_and(|v| v == "1");
    let mut total = Summary::default();
    let mut failed: Vec<(u64, String)> = Vec::new();
    for seed in first..first + count {
        if !keep_going {
            total.add(&run_seed(seed, false));
            continue;
        }
        match std::panic::catch_unwind(|| run_seed(seed, false)) {
            Ok(s) => total.add(&s),
            Err(p) => {
                let why = p
                    .downcast_ref::<String>()
                    .cloned()
                    .unwrap_or_else(|| "(no message)".into());
                failed.push((seed, why.lines().next().unwrap_or("").to_string()));
            }
        }
    }
    eprintln!(
        "member simulation, seeds {first}..{}: {} failed; {total:?} in {:.1?}",
        first + count,
        failed.len(),
        started.elapsed()
    );
    for (_, why) in &failed {
        eprintln!("  {why}");
    }
    assert!(failed.is_empty(), "{} seeds failed", failed.len());
    // The runs must exercise what the checkers check.
    assert!(
        total.crashes > 0
            && total.lost_writes > 0
            && total.partitions > 0
            && total.pauses > 0
            && total.snaps > 0,
        "fault coverage: {total:?}"
    );
    assert!(
        total.register_acked > 0
            && total.events > 0
            && total.expired > 0
            && total.expiries_checked > 0
            && total.wait_callbacks > 0
            && total.recipe_finished > 0,
        "workload coverage: {total:?}"
    );
}

/// Same seed, same run: what makes `WAZOO_SIM_SEED` a replay.
#[test]
fn a_seed_replays_exactly() {
    for seed in [5, 17, 745] {
        let a = format!("{:?}", run_seed(seed, false));
        let b = format!("{:?}", run_seed(seed, false));
        assert_eq!(a, b, "seed {seed} ran differently twice");
    }
}

/// Observers behind followers (Administrator's Guide, "Cluster Options",
/// `observerMasterPort`): two observers sync from followers and serve
/// clients (sessions, watches, writes forwarded to the leader) through
/// the same faults, crashes of their learner master mid-sync among them,
/// with every checker; every member's committed sequence, observers
/// included, is checked against the one sequence. 40 seeds by default;
/// `WAZOO_SIM_OM_SEEDS` for more, `WAZOO_SIM_OM_SEED` for one.
#[test]
fn observers_behind_followers() {
    let variant = Variant {
        observers: 2,
        observer_master: true,
        local_reads: false,
    };
    let Some((count, total)) = run_variant(variant, "OM", 40) else {
        return;
    };
    eprintln!("member simulation with observers behind followers, {count} seeds: {total:?}");
    assert!(
        total.observers_behind_followers > count,
        "most observers end behind a follower: {total:?}"
    );
    assert!(
        total.crashes > 0 && total.partitions > 0 && total.register_acked > 0,
        "coverage: {total:?}"
    );
}

/// Every member answers plain reads outside the pipeline, from its
/// published copy of the tree, as a member with client I/O threads does
/// (`wazoo_core::local_reads`; a third of the default seeds do too), and
/// publishes that copy now and then a few milliseconds late, the window
/// an I/O thread can see. Every checker runs, and the clients check what
/// the rules promise: a session's replies in its requests' order, a read
/// never older than what the session saw, and a watch's event before the
/// data that fired it. 60 seeds by default; `WAZOO_SIM_LR_SEEDS` for more,
/// `WAZOO_SIM_LR_SEED` for one.
#[test]
fn local_reads_keep_every_guarantee() {
    let variant = Variant {
        local_reads: true,
        ..Variant::default()
    };
    let Some((count, total)) = run_variant(variant, "LR", 60) else {
        return;
    };
    eprintln!("member simulation with local reads, {count} seeds: {total:?}");
    assert!(
        total.local_reads > 2 * count,
        "reads were answered outside the pipeline: {total:?}"
    );
    assert!(
        total.crashes > 0 && total.partitions > 0 && total.events > 0,
        "coverage: {total:?}"
    );
}

/// Runs `variant` over seeds 0..`WAZOO_SIM_<tag>_SEEDS` (`default_count`
/// without it) and gives the count and the summed summary; with
/// `WAZOO_SIM_<tag>_SEED` runs that seed alone (traced with
/// `WAZOO_SIM_TRACE=1`) and gives None.
fn run_variant(variant: Variant, tag: &str, default_count: u64) -> Option<(u64, Summary)> {
    if let Some(seed) = env_u64(&format!("WAZOO_SIM_{tag}_SEED")) {
        let trace = std::env::var("WAZOO_SIM_TRACE").is_ok_and(|v| v == "1");
        let s = run_seed_with(seed, trace, variant);
        eprintln!("seed {seed}: {s:?}");
        return None;
    }
    let count = env_u64(&format!("WAZOO_SIM_{tag}_SEEDS")).unwrap_or(default_count);
    let mut total = Summary::default();
    for seed in 0..count {
        total.add(&run_seed_with(seed, false, variant));
    }
    Some((count, total))
}
