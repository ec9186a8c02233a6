//! A seeded simulation of whole wazoo members.
//!
//! Three or five members run in one thread on simulated time, each the
//! core's `wazoo_core::member::Member` (ZAB's `Peer` joined to the request
//! pipeline `Server`, the machine the binary runs; [`member`] starts one
//! from a simulated disk and turns on its journal of what it applied, for
//! the checkers), its ordered outputs carried out by [`world`] as the
//! shell's driver carries them out against real I/O, with a simulated
//! disk ([`disk`]: a crash keeps only what was reported durable), a
//! network ([`net`]: quorum links, election datagrams, client connections)
//! and clocks of their own (skewed rates, stepping wall clocks). Simulated clients ([`client`]) speak ZooKeeper's protocol to
//! the pipeline: sessions that move between members and expire,
//! ephemerals, standard and persistent watches, multis, and recipe calls
//! served by a plain-Rust recipe engine ([`recipes`]). Faults: message
//! drops, duplicates, delays and reorders, partitions, paused members
//! (SIGSTOP), connection resets,
//! crashes that lose unsynced writes, restarts, clock skew and steps. In a
//! third of the seeds (and every seed of `local_reads_keep_every_guarantee`)
//! members answer plain reads outside the pipeline, from a published copy
//! of the tree, as a member with client I/O threads does
//! (`wazoo_core::local_reads`), the copy now and then published late.
//!
//! The checkers ([`check`]): client-visible linearizability of writes,
//! session and ephemeral invariants, watch delivery order, each session's
//! replies in its requests' order and its reads never older than what it
//! saw, tree
//! convergence, and recipe waits called back exactly once; each has a
//! test that feeds it a bad history or state and expects it to fail.
//!
//! # Layout
//!
//! | module | owns |
//! |---|---|
//! | [`world`] | the event loop, members, faults, end-of-run checks |
//! | [`member`] | the core's `Member` started from a simulated disk, with its applied journal |
//! | [`disk`], [`net`] | simulated storage and network |
//! | [`client`] | simulated ZooKeeper clients and their workload |
//! | [`recipes`] | the plain-Rust recipe engine (lock, counter) |
//! | [`check`] | the invariant checkers |
//! | [`rng`] | the seeded generator |
//! | `zab_ensemble` (tests) | ZAB's own simulation: the consensus core alone, on the same network and generator |
//!
//! # Running
//!
//! `cargo test -p wazoo-sim` runs 300 seeds. More, in a release build:
//!
//! ```text
//! WAZOO_SIM_SEEDS=10000 cargo test -p wazoo-sim --release --test sim -- --nocapture
//! ```
//!
//! `WAZOO_SIM_FIRST=<n>` starts at seed n; `WAZOO_SIM_KEEP_GOING=1` runs
//! every seed and then lists the failures. A failing seed prints itself;
//! `WAZOO_SIM_SEED=<n>` replays exactly that run, and `WAZOO_SIM_TRACE=1`
//! with it prints every input and output.

#![forbid(unsafe_code)]

pub mod check;
pub mod client;
pub mod disk;
pub mod member;
pub mod net;
pub mod recipes;
pub mod rng;
pub mod world;
// ZAB's own whole-ensemble simulation: the consensus core alone, with
// clients that only propose, on this crate's network and generator.
#[cfg(test)]
mod zab_ensemble;

use std::panic::{catch_unwind, AssertUnwindSafe};

use rng::Rng;
use wazoo_zab::ServerId;

/// The knobs one seed draws.
#[derive(Clone, Debug)]
pub struct Params {
    /// The voters.
    pub members: Vec<ServerId>,
    /// Observers (none unless the run is a [`Variant`] with some).
    pub observers: Vec<ServerId>,
    /// zoo.cfg `observerMasterPort`: observers sync from followers.
    pub observer_master: bool,
    pub clients: usize,
    pub register_keys: u64,
    pub chaos_ms: u64,
    pub work_after_heal_ms: u64,
    pub fault_gap_ms: (u64, u64),
    pub election_drop_per_mille: u64,
    pub election_dup_per_mille: u64,
    pub quorum_delay_ms: (u64, u64),
    pub client_delay_ms: (u64, u64),
    pub fsync_ms: (u64, u64),
    pub client_gap_ms: (u64, u64),
    pub snap_count: u64,
    pub committed_log_max: usize,
    pub outstanding_proposals_max: usize,
    pub finalize_wait_ms: u64,
    /// Members' clock rates differ from real time by up to this.
    pub skew_ppm: u64,
}

impl Params {
    pub fn draw(rng: &mut Rng) -> Params {
        let members = if rng.chance(500) {
            vec![1, 2, 3]
        } else {
            vec![1, 2, 3, 4, 5]
        };
        Params {
            members,
            observers: Vec::new(),
            observer_master: false,
            clients: rng.range(2, 5) as usize,
            register_keys: rng.range(1, 3),
            chaos_ms: rng.range(2_000, 4_000),
            work_after_heal_ms: 1_000,
            fault_gap_ms: *rng.pick(&[(50, 300), (200, 800), (500, 2_000)]),
            election_drop_per_mille: rng.range(0, 200),
            election_dup_per_mille: rng.range(0, 200),
            quorum_delay_ms: *rng.pick(&[(1, 3), (1, 10), (2, 40)]),
            client_delay_ms: *rng.pick(&[(1, 3), (1, 20)]),
            fsync_ms: *rng.pick(&[(1, 2), (1, 8), (3, 30)]),
            client_gap_ms: *rng.pick(&[(10, 60), (20, 120)]),
            snap_count: *rng.pick(&[5, 20, 100, 100_000]),
            committed_log_max: *rng.pick(&[2, 5, 20, 100]),
            outstanding_proposals_max: *rng.pick(&[1 << 20, 1 << 20, 8]),
            finalize_wait_ms: *rng.pick(&[0, 20, 50]),
            skew_ppm: *rng.pick(&[0, 1_000, 20_000]),
        }
    }
}

/// Totals over a run (and over many), for the summary line and for
/// coverage checks.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    pub steps: u64,
    pub sim_ms: u64,
    pub committed: u64,
    pub register_ops: u64,
    pub register_acked: u64,
    pub linear_inconclusive: u64,
    pub sessions: u64,
    pub expired: u64,
    pub expiries_checked: u64,
    pub events: u64,
    pub replies: u64,
    pub recipe_waits: u64,
    pub recipe_finished: u64,
    pub wait_callbacks: u64,
    pub refused: u64,
    pub elections: u64,
    pub leaders: u64,
    pub crashes: u64,
    pub lost_writes: u64,
    pub partitions: u64,
    /// Members paused (SIGSTOP) and resumed.
    pub pauses: u64,
    pub resets: u64,
    pub snaps: u64,
    /// Observers that ended the run synced by a follower (learner master).
    pub observers_behind_followers: u64,
    /// Reads answered outside the pipeline (`Variant::local_reads`).
    pub local_reads: u64,
    /// A digest of the committed sequence and of what clients were told
    /// (summed over seeds): two runs of a seed must agree on it.
    pub digest: u64,
}

impl Summary {
    pub fn add(&mut self, o: &Summary) {
        macro_rules! sum {
            ($($f:ident),*) => { $( self.$f += o.$f; )* };
        }
        sum!(
            steps,
            sim_ms,
            committed,
            register_ops,
            register_acked,
            linear_inconclusive,
            sessions,
            expired,
            expiries_checked,
            events,
            replies,
            recipe_waits,
            recipe_finished,
            wait_callbacks,
            refused,
            elections,
            leaders,
            crashes,
            lost_writes,
            partitions,
            pauses,
            resets,
            snaps,
            observers_behind_followers,
            local_reads
        );
        self.digest = self.digest.wrapping_add(o.digest);
    }
}

/// What a run adds to the seed's draw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Variant {
    /// Observers besides the seed's voters (ids after theirs).
    pub observers: u64,
    /// Observers sync from followers (`observerMasterPort`).
    pub observer_master: bool,
    /// Members answer plain reads outside the pipeline, as with client I/O
    /// threads (`wazoo_core::local_reads`); a third of the seeds do anyway.
    pub local_reads: bool,
}

/// Runs one seed; on a failure, panics with the seed and how to replay it.
pub fn run_seed(seed: u64, trace: bool) -> Summary {
    run_seed_with(seed, trace, Variant::default())
}

/// Runs one seed with a [`Variant`]; on a failure, panics with the seed.
pub fn run_seed_with(seed: u64, trace: bool, variant: Variant) -> Summary {
    let result = catch_unwind(AssertUnwindSafe(|| {
        let mut w = world::World::with_variant(seed, trace, variant);
        w.run();
        w.summary
    }));
    match result {
        Ok(summary) => summary,
        Err(panic) => {
            let why = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("(no message)");
            panic!(
                "member simulation failed for seed {seed} ({variant:?}): {why}\nreplay with WAZOO_SIM_SEED={seed} cargo test -p wazoo-sim --test sim (add WAZOO_SIM_TRACE=1 for a trace)"
            );
        }
    }
}

/// A number from the environment, if set.
pub fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}
