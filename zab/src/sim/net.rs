//! The simulated network.
//!
//! Quorum channel: one TCP-like connection per pair of members. Each
//! direction is a FIFO queue; a connection has a generation, and a reset
//! (random fault, `CloseLink`, a crash) starts a new one: everything in
//! flight is dropped and each endpoint that did not cause the reset finds
//! out through a marker queued towards it, so it learns of the reset before
//! any message of the new connection. A message written by an endpoint that
//! has not learned of the reset yet belongs to the dead connection and is
//! dropped. A partition holds a pair's queues (TCP retransmits) until it
//! heals or the connection is reset.
//!
//! Election channel: datagrams with independent delays (so reordered),
//! dropped or duplicated by the sender's dice, dropped across a partition.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::super::types::ServerId;

#[derive(Clone, Debug)]
enum Item {
    Msg { generation: u64, bytes: Vec<u8> },
    Reset { generation: u64 },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// A quorum message of the current connection.
    Message {
        from: ServerId,
        to: ServerId,
        bytes: Vec<u8>,
    },
    /// `to` learns that its connection with `peer` is gone.
    Disconnected { to: ServerId, peer: ServerId },
    Notification {
        from: ServerId,
        to: ServerId,
        bytes: Vec<u8>,
    },
    /// Nothing to hand to a member (a stale message was dropped).
    Nothing,
}

#[derive(Default)]
pub struct Net {
    /// Connection generation per unordered pair.
    generations: BTreeMap<(ServerId, ServerId), u64>,
    /// The generation each endpoint believes current: (endpoint, peer).
    seen: BTreeMap<(ServerId, ServerId), u64>,
    /// Directed FIFO queues: (from, to) -> (deliver at, item).
    queues: BTreeMap<(ServerId, ServerId), VecDeque<(u64, Item)>>,
    /// Election datagrams by (deliver at, sequence).
    datagrams: BTreeMap<(u64, u64), (ServerId, ServerId, Vec<u8>)>,
    cut: BTreeSet<(ServerId, ServerId)>,
    sequence: u64,
    pub quorum_messages: u64,
    pub resets: u64,
}

fn pair(a: ServerId, b: ServerId) -> (ServerId, ServerId) {
    (a.min(b), a.max(b))
}

impl Net {
    fn generation(&self, a: ServerId, b: ServerId) -> u64 {
        self.generations.get(&pair(a, b)).copied().unwrap_or(0)
    }

    fn seen(&self, endpoint: ServerId, peer: ServerId) -> u64 {
        self.seen.get(&(endpoint, peer)).copied().unwrap_or(0)
    }

    /// Queues a quorum message; FIFO per direction whatever the delay.
    pub fn send_quorum(
        &mut self,
        from: ServerId,
        to: ServerId,
        bytes: Vec<u8>,
        now_ms: u64,
        delay_ms: u64,
    ) {
        self.quorum_messages += 1;
        let generation = self.seen(from, to);
        let queue = self.queues.entry((from, to)).or_default();
        let at = queue.back().map_or(now_ms + delay_ms, |(last, _)| {
            (*last).max(now_ms + delay_ms)
        });
        queue.push_back((at, Item::Msg { generation, bytes }));
    }

    pub fn send_datagram(&mut self, from: ServerId, to: ServerId, bytes: Vec<u8>, at_ms: u64) {
        self.sequence += 1;
        self.datagrams
            .insert((at_ms, self.sequence), (from, to, bytes));
    }

    /// Starts a new connection between `a` and `b`. An endpoint with
    /// `notify` learns of it after `delay_ms` (through the partition, if
    /// any); the other one already knows.
    pub fn reset(
        &mut self,
        a: ServerId,
        b: ServerId,
        notify: [bool; 2],
        now_ms: u64,
        delay_ms: u64,
    ) {
        self.resets += 1;
        let generation = self.generation(a, b) + 1;
        self.generations.insert(pair(a, b), generation);
        for (endpoint, peer, tell) in [(a, b, notify[0]), (b, a, notify[1])] {
            // Everything in flight towards `endpoint` dies with the old
            // connection, and so do older markers.
            let queue = self.queues.entry((peer, endpoint)).or_default();
            queue.clear();
            if tell {
                queue.push_back((now_ms + delay_ms, Item::Reset { generation }));
            } else {
                self.seen.insert((endpoint, peer), generation);
            }
        }
    }

    pub fn cut(&mut self, a: ServerId, b: ServerId) {
        self.cut.insert(pair(a, b));
    }

    pub fn heal_all(&mut self) {
        self.cut.clear();
    }

    pub fn is_cut(&self, a: ServerId, b: ServerId) -> bool {
        self.cut.contains(&pair(a, b))
    }

    /// Drops every datagram to or from `id` (a crash).
    pub fn forget_datagrams_of(&mut self, id: ServerId) {
        self.datagrams
            .retain(|_, (from, to, _)| *from != id && *to != id);
    }

    /// The time of the next deliverable item.
    pub fn next_time(&self) -> Option<u64> {
        let queue_head = self
            .queues
            .iter()
            .filter(|((from, to), _)| !self.is_cut(*from, *to))
            .filter_map(|(_, q)| q.front().map(|(at, _)| *at))
            .min();
        let datagram = self.datagrams.keys().next().map(|(at, _)| *at);
        match (queue_head, datagram) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Takes the next item due at `now_ms`, if any.
    pub fn pop(&mut self, now_ms: u64) -> Option<Delivery> {
        let due = self
            .queues
            .iter()
            .filter(|((from, to), _)| !self.is_cut(*from, *to))
            .filter_map(|(key, q)| q.front().map(|(at, _)| (*at, *key)))
            .filter(|(at, _)| *at <= now_ms)
            .min();
        if let Some((_, (from, to))) = due {
            let (_, item) = self
                .queues
                .get_mut(&(from, to))
                .and_then(VecDeque::pop_front)
                .expect("due item");
            let current = self.generation(from, to);
            return Some(match item {
                Item::Reset { generation } => {
                    assert_eq!(
                        generation, current,
                        "a reset marker outlived its connection"
                    );
                    self.seen.insert((to, from), generation);
                    Delivery::Disconnected { to, peer: from }
                }
                Item::Msg { generation, .. } if generation != current => Delivery::Nothing,
                Item::Msg { generation, bytes } => {
                    assert_eq!(
                        self.seen(to, from),
                        generation,
                        "{to} receives a message of connection {generation} with {from} before learning of it"
                    );
                    Delivery::Message { from, to, bytes }
                }
            });
        }
        let key = *self.datagrams.keys().next()?;
        if key.0 > now_ms {
            return None;
        }
        let (from, to, bytes) = self.datagrams.remove(&key).expect("present");
        if self.is_cut(from, to) {
            return Some(Delivery::Nothing);
        }
        Some(Delivery::Notification { from, to, bytes })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_and_reset_markers() {
        let mut net = Net::default();
        net.send_quorum(1, 2, vec![1], 0, 10);
        net.send_quorum(1, 2, vec![2], 0, 1); // later send, shorter delay: still after
        assert_eq!(
            net.pop(10),
            Some(Delivery::Message {
                from: 1,
                to: 2,
                bytes: vec![1]
            })
        );
        assert_eq!(
            net.pop(10),
            Some(Delivery::Message {
                from: 1,
                to: 2,
                bytes: vec![2]
            })
        );
        // 2 closes; 1 learns through a marker, 2's in-flight data is gone.
        net.send_quorum(1, 2, vec![3], 10, 1);
        net.reset(1, 2, [true, false], 10, 1);
        net.send_quorum(2, 1, vec![4], 10, 1); // new connection
        net.send_quorum(1, 2, vec![5], 10, 1); // 1 writes to the dead one
        assert_eq!(
            net.pop(11),
            Some(Delivery::Nothing),
            "5 belonged to the dead connection"
        );
        assert_eq!(net.pop(11), Some(Delivery::Disconnected { to: 1, peer: 2 }));
        assert_eq!(
            net.pop(11),
            Some(Delivery::Message {
                from: 2,
                to: 1,
                bytes: vec![4]
            })
        );
        assert_eq!(net.pop(11), None);
    }

    #[test]
    fn partitions_hold_the_quorum_channel() {
        let mut net = Net::default();
        net.cut(1, 2);
        net.send_quorum(1, 2, vec![1], 0, 1);
        net.send_datagram(1, 2, vec![9], 1);
        assert_eq!(net.next_time(), Some(1));
        assert_eq!(net.pop(5), Some(Delivery::Nothing), "the datagram is lost");
        assert_eq!(net.pop(5), None, "the message waits");
        net.heal_all();
        assert_eq!(
            net.pop(5),
            Some(Delivery::Message {
                from: 1,
                to: 2,
                bytes: vec![1]
            })
        );
    }
}
