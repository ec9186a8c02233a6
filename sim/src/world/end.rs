//! The end-of-run checks, once the healed ensemble is quiet.

use super::{World, TICK_MS};
use crate::check::{converge, sessions};

impl World {
    pub(super) fn final_checks(&mut self) {
        self.summary.observers_behind_followers = self
            .nodes
            .values()
            .filter_map(|n| n.member.as_ref())
            .map(|m| m.peer())
            .filter(|p| p.state() == wazoo_zab::ServerState::Observing)
            .filter(|p| p.learning_from() != p.status().leader)
            .count() as u64;
        let last = self.shadow.last_zxid();
        for n in self.nodes.values() {
            let m = n.member.as_ref().expect("everybody is up");
            let at = m.server().last_zxid();
            assert_eq!(
                at, last,
                "convergence: member {} at {at:?}, the committed sequence at {last:?}",
                n.id
            );
            if let Err(e) = converge::compare(
                &format!("member {}", n.id),
                m.server().tree(),
                &self.shadow.tree,
            ) {
                panic!("{e}");
            }
        }
        if let Err(e) = self.shadow.recipes.check_quiet() {
            panic!("{e}");
        }
        // Abandoned sessions have expired everywhere, once the leader that
        // took over last has had a session timeout and then some.
        for c in &self.clients {
            for &(session, at, timeout) in &c.abandoned {
                let from = at.max(self.leader_since_ms);
                if self.now_ms < from + timeout as u64 * 11 / 10 + 4 * TICK_MS {
                    continue;
                }
                self.summary.expiries_checked += 1;
                for n in self.nodes.values() {
                    let m = n.member.as_ref().expect("up");
                    if let Err(e) = sessions::check_expired(n.id, m.server(), session) {
                        let tables: Vec<String> = self
                            .nodes
                            .values()
                            .filter_map(|n| {
                                let m = n.member.as_ref()?;
                                Some(format!(
                                    "{}: {:?} (mono {})",
                                    n.id,
                                    m.server().sessions().get(session),
                                    n.now(self.now_ms).mono_ms
                                ))
                            })
                            .collect();
                        panic!(
                            "{e} (client {} left it at {at} ms; committed: created {}, closed at {:?}; tables: {tables:?})",
                            c.id,
                            self.shadow.opened.contains(&session),
                            self.shadow.closed.get(&session)
                        );
                    }
                }
            }
        }
        if let Err(e) = converge::check_multis(&self.shadow.tree) {
            panic!("{e}");
        }
        match self.history.check() {
            Ok(inconclusive) => self.summary.linear_inconclusive += inconclusive as u64,
            Err(e) => panic!("{e}"),
        }
        // FNV-1a over the committed sequence and the register history.
        let mut digest: u64 = 0xcbf2_9ce4_8422_2325;
        let mut eat = |bytes: &[u8]| {
            for b in bytes {
                digest = (digest ^ *b as u64).wrapping_mul(0x0100_0000_01b3);
            }
        };
        for (zxid, payload) in &self.shadow.seq {
            eat(&zxid.0.to_be_bytes());
            eat(payload);
        }
        for op in &self.history.ops {
            eat(format!("{:?}{:?}{}{}", op.op, op.result, op.invoke, op.respond).as_bytes());
        }
        self.summary.digest = digest;
        self.summary.committed = self.shadow.seq.len() as u64;
        self.summary.register_ops = self.history.ops.len() as u64;
        self.summary.register_acked = self
            .history
            .ops
            .iter()
            .filter(|o| o.result.is_some())
            .count() as u64;
        self.summary.wait_callbacks = self.shadow.recipes.called_back;
        self.summary.refused += self.shadow.refused;
        self.summary.resets += self.net.resets;
        self.summary.sim_ms = self.now_ms;
        for c in &self.clients {
            self.summary.sessions += c.stats.sessions;
            self.summary.expired += c.stats.expired;
            self.summary.events += c.stats.events;
            self.summary.replies += c.stats.replies;
            self.summary.recipe_waits += c.stats.recipe_waits;
            self.summary.recipe_finished += c.stats.recipe_finished;
        }
        for n in self.nodes.values() {
            if let Some(m) = &n.member {
                self.summary.elections += m.peer().stats().elections;
            }
        }
    }
}
