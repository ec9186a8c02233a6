//! The ensemble's recipe counters (see `crate::recipe::ModuleCounters`):
//! the leader commits its engine's counters when they changed, at most
//! every `COUNTERS_INTERVAL_MS`; every member applies them, shows them on
//! /zookeeper/recipes, `recp` and the metrics when it does not run steps
//! itself, and a member that starts running steps goes on from them.

use super::{ensemble, Origin, Server, Txn};
use crate::recipe::{ModuleReport, RecipeCounters, COUNTERS_INTERVAL_MS, UNSERVED};

impl Server {
    /// The counters as last committed (kept with the replicated recipe
    /// state, so snapshots carry them).
    pub fn committed_recipe_counters(&self) -> &RecipeCounters {
        &self.waits.counters
    }

    /// Leader (or standalone), on a tick: commits the engine's counters if
    /// they changed since the last commit and the interval has passed.
    pub(super) fn commit_recipe_counters(&mut self) {
        if self.mono_ms < self.counters_next_ms {
            return;
        }
        let Some(engine) = self.recipes.as_ref() else {
            return;
        };
        self.counters_next_ms = self.mono_ms + COUNTERS_INTERVAL_MS;
        // Modules that never ran a step are not listed (nothing to keep).
        let now: RecipeCounters = engine
            .modules()
            .into_iter()
            .filter(|m| m.counters != Default::default())
            .map(|m| (m.name, m.counters))
            .collect();
        if now == self.waits.counters || self.counters_in_flight {
            return;
        }
        if !self.can_propose() {
            return;
        }
        self.counters_in_flight = true;
        self.propose(
            Origin::Internal,
            ensemble::INTERNAL_CXID,
            0,
            Txn::RecipeCounters(Box::new(now)),
            Vec::new(),
            None,
            false,
        );
    }

    /// A counters txn was applied.
    pub(super) fn apply_recipe_counters(&mut self, c: &RecipeCounters) {
        self.waits.counters = c.clone();
        self.counters_in_flight = false;
    }

    /// This member now runs the steps (leader, or a standalone member with
    /// a new engine): its engine goes on from the committed counters.
    pub(super) fn seed_recipe_counters(&mut self) {
        self.counters_in_flight = false;
        if let Some(engine) = self.recipes.as_mut() {
            engine.seed_counters(&self.waits.counters);
        }
    }

    /// The modules' reports with the ensemble's counters: the engine's own
    /// where this member runs the steps, the committed ones elsewhere (a
    /// follower's engine runs none).
    pub(super) fn ensemble_reports(&self, mut reports: Vec<ModuleReport>) -> Vec<ModuleReport> {
        if self.role.decides() {
            return reports;
        }
        // Calls that found no module: listed once the leader counted one
        // (this member's engine runs no call, so it has no entry of its own).
        if let Some(c) = self.waits.counters.get(UNSERVED) {
            if !reports.iter().any(|r| r.name == UNSERVED) {
                reports.push(ModuleReport::unserved(c.clone()));
            }
        }
        for r in &mut reports {
            let c = self
                .waits
                .counters
                .get(&r.name)
                .cloned()
                .unwrap_or_default();
            r.calls = c.calls;
            r.errors = c.errors_total();
            r.fuel_used = c.fuel;
            r.counters = c;
        }
        reports
    }
}
