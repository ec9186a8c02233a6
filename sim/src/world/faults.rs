//! The faults of the chaos phase: one is drawn every `fault_gap_ms`
//! (election notifications are dropped and duplicated as they are sent).

use wazoo_zab::ServerId;

use super::{Event, World};

impl World {
    pub(super) fn fault(&mut self) {
        let ids: Vec<ServerId> = self.nodes.keys().copied().collect();
        let at = self.now_ms + self.rng.range(1, 20);
        match self.rng.below(12) {
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
                for &other in ids.iter().filter(|&&o| o != id) {
                    self.net.cut(id, other);
                }
                self.summary.partitions += 1;
                let after = self.rng.range(200, 3_000);
                self.schedule(after, Event::Heal);
            }
            7 => {
                let side: Vec<bool> = ids.iter().map(|_| self.rng.chance(500)).collect();
                self.log(format!("split {side:?}"));
                for (i, &a) in ids.iter().enumerate() {
                    for (j, &b) in ids.iter().enumerate() {
                        if i < j && side[i] != side[j] {
                            self.net.cut(a, b);
                        }
                    }
                }
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
