//! The faults of the chaos phase: one is drawn every `fault_gap_ms`
//! (election notifications are dropped and duplicated as they are sent).

use wazoo_zab::ServerId;

use super::{Event, World};

impl World {
    pub(super) fn fault(&mut self) {
        let ids: Vec<ServerId> = self.nodes.keys().copied().collect();
        let at = self.now_ms + self.rng.range(1, 20);
        match self.rng.below(13) {
            0..=2 => {
                let id = *self.rng.pick(&ids);
                if self.nodes[&id].member.is_some() {
                    self.crash(id);
                    let after = self.rng.range(50, 3_000);
                    self.schedule(after, Event::Restart(id));
                }
            }
            3 | 4 => {
                let (a, b) = (*self.rng.pick(&ids), *self.rng.pick(&ids));
                if a != b {
                    self.log(format!("reset link {a}-{b}"));
                    self.net.reset(a, b, [true, true], at);
                }
            }
            5 | 6 => {
                let id = *self.rng.pick(&ids);
                self.log(format!("isolate {id}"));
                self.net.isolate(id, &ids);
                self.summary.partitions += 1;
                let after = self.rng.range(200, 3_000);
                self.schedule(after, Event::Heal);
            }
            7 => {
                let side: Vec<bool> = ids.iter().map(|_| self.rng.chance(500)).collect();
                self.log(format!("split {side:?}"));
                self.net.split(&ids, &side);
                self.summary.partitions += 1;
                let after = self.rng.range(200, 3_000);
                self.schedule(after, Event::Heal);
            }
            8 | 9 => {
                // A client connection breaks.
                let id = *self.rng.pick(&ids);
                let conns = self.net.conns_of(id);
                if !conns.is_empty() {
                    let conn = *self.rng.pick(&conns);
                    self.log(format!("reset client connection {conn} to {id}"));
                    self.net.reset_client(conn, at);
                }
            }
            10 => {
                // The wall clock steps (NTP, an operator).
                let id = *self.rng.pick(&ids);
                let step = self.rng.range(0, 60_000) as i64 - 30_000;
                self.log(format!("wall clock of {id} steps {step} ms"));
                self.nodes.get_mut(&id).expect("node").wall_offset_ms += step;
            }
            12 => {
                // A process stops (SIGSTOP, a VM paused), the leader half
                // the time: it hears nothing and does nothing, and then
                // goes on. A paused leader must not serve once it goes on
                // if another was established meanwhile (the lease check).
                let leader = self.leader.map(|(id, _)| id);
                let id = match leader {
                    Some(l) if self.rng.chance(500) => l,
                    _ => *self.rng.pick(&ids),
                };
                if self.nodes[&id].member.is_some() && !self.paused.contains_key(&id) {
                    self.log(format!("pause {id}"));
                    self.paused.insert(id, Vec::new());
                    self.net.stop_reading(id);
                    self.summary.pauses += 1;
                    let after = self.rng.range(200, 3_000);
                    self.schedule(after, Event::Resume(id));
                }
            }
            _ => {
                let (a, b) = (*self.rng.pick(&ids), *self.rng.pick(&ids));
                if a != b {
                    self.log(format!("cut {a}-{b}"));
                    self.net.cut(a, b);
                    let after = self.rng.range(100, 2_000);
                    self.schedule(after, Event::Heal);
                }
            }
        }
    }
}
