//! The simulated network, of both simulations: the whole-member one and
//! ZAB's own (`zab_ensemble`, which uses the quorum links and datagrams).
//!
//! Quorum links: one TCP-like connection per pair of members carrying ZAB
//! messages and pipeline messages in one FIFO per direction. A connection
//! has a generation; a reset (a fault, `CloseLink`, a crash) starts a new
//! one: everything in flight is dropped and each endpoint that did not
//! cause the reset learns of it through a marker queued towards it, before
//! any message of the new connection. A message written by an endpoint
//! that has not learned of the reset belongs to the dead connection and is
//! dropped. A partition holds a pair's queues (TCP retransmits) until it
//! heals or the connection is reset. A paused member reads nothing: its
//! inbound queues (a reset marker included) wait until it goes on, so what
//! it writes while handling older input still goes to the old connection.
//!
//! Election notifications: datagrams with independent delays (so
//! reordered), dropped or duplicated by the sender's dice, lost across a
//! partition.
//!
//! Client links: one FIFO per direction per client connection; a reset or
//! a member's crash drops what is in flight and tells both ends.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use wazoo_core::watch::ConnId;
use wazoo_proto::{ConnectRequest, Request};
use wazoo_zab::ServerId;

#[derive(Clone, Debug)]
enum Item {
    Msg {
        generation: u64,
        app: bool,
        bytes: Vec<u8>,
    },
    Reset {
        generation: u64,
    },
}

/// Client to member.
#[derive(Clone, Debug)]
pub enum Up {
    Connect(ConnectRequest),
    Request {
        xid: i32,
        req: Request,
    },
    /// The connection is gone: the member's shell tells its core.
    Closed,
}

/// Member to client.
#[derive(Clone, Debug)]
pub enum Down {
    Bytes(Vec<u8>),
    /// A reply the member's reader answered itself (local reads): bytes
    /// the pipeline does not count, so their reading is not reported.
    Local(Vec<u8>),
    /// End of stream (the member closed, or the connection broke).
    Closed,
}

#[derive(Debug)]
struct ClientLink {
    client: usize,
    member: ServerId,
    up: VecDeque<(u64, Up)>,
    down: VecDeque<(u64, Down)>,
    /// No more sends from the client are taken (it or the member closed).
    up_closed: bool,
    /// No more sends from the member are taken.
    down_closed: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Delivery {
    Zab {
        from: ServerId,
        to: ServerId,
        bytes: Vec<u8>,
    },
    App {
        from: ServerId,
        to: ServerId,
        bytes: Vec<u8>,
    },
    /// `to` learns its quorum connection with `peer` is gone.
    Disconnected { to: ServerId, peer: ServerId },
    Notification {
        from: ServerId,
        to: ServerId,
        bytes: Vec<u8>,
    },
    ToMember {
        member: ServerId,
        conn: ConnId,
        up: Up,
    },
    ToClient {
        client: usize,
        conn: ConnId,
        down: Down,
    },
    /// Nothing to hand over (a stale item was dropped).
    Nothing,
}

// `Up` holds requests, which are not `Eq`; deliveries compare by debug
// text in tests only.
impl PartialEq for Up {
    fn eq(&self, other: &Up) -> bool {
        format!("{self:?}") == format!("{other:?}")
    }
}
impl Eq for Up {}
impl PartialEq for Down {
    fn eq(&self, other: &Down) -> bool {
        format!("{self:?}") == format!("{other:?}")
    }
}
impl Eq for Down {}

#[derive(Default)]
pub struct Net {
    generations: BTreeMap<(ServerId, ServerId), u64>,
    /// The generation each endpoint believes current: (endpoint, peer).
    seen: BTreeMap<(ServerId, ServerId), u64>,
    queues: BTreeMap<(ServerId, ServerId), VecDeque<(u64, Item)>>,
    datagrams: BTreeMap<(u64, u64), (ServerId, ServerId, Vec<u8>)>,
    cut: BTreeSet<(ServerId, ServerId)>,
    /// Members that read nothing from their quorum links (paused, like a
    /// process under SIGSTOP): what is sent to them waits in the queue, and
    /// a reset reaches them only when they read again, so what they write
    /// before that still belongs to the old connection.
    not_reading: BTreeSet<ServerId>,
    links: BTreeMap<ConnId, ClientLink>,
    sequence: u64,
    pub resets: u64,
}

fn pair(a: ServerId, b: ServerId) -> (ServerId, ServerId) {
    (a.min(b), a.max(b))
}

fn fifo_at<T>(queue: &VecDeque<(u64, T)>, at: u64) -> u64 {
    queue.back().map_or(at, |(last, _)| (*last).max(at))
}

impl Net {
    fn generation(&self, a: ServerId, b: ServerId) -> u64 {
        self.generations.get(&pair(a, b)).copied().unwrap_or(0)
    }

    fn seen(&self, endpoint: ServerId, peer: ServerId) -> u64 {
        self.seen.get(&(endpoint, peer)).copied().unwrap_or(0)
    }

    /// Queues a quorum message (ZAB or, with `app`, the pipeline's).
    pub fn send_quorum(
        &mut self,
        from: ServerId,
        to: ServerId,
        app: bool,
        bytes: Vec<u8>,
        at_ms: u64,
    ) {
        let generation = self.seen(from, to);
        let queue = self.queues.entry((from, to)).or_default();
        let at = fifo_at(queue, at_ms);
        queue.push_back((
            at,
            Item::Msg {
                generation,
                app,
                bytes,
            },
        ));
    }

    pub fn send_datagram(&mut self, from: ServerId, to: ServerId, bytes: Vec<u8>, at_ms: u64) {
        self.sequence += 1;
        self.datagrams
            .insert((at_ms, self.sequence), (from, to, bytes));
    }

    /// Starts a new quorum connection between `a` and `b`; an endpoint
    /// with `notify` learns of it at `at_ms`, the other already knows.
    pub fn reset(&mut self, a: ServerId, b: ServerId, notify: [bool; 2], at_ms: u64) {
        self.resets += 1;
        let generation = self.generation(a, b) + 1;
        self.generations.insert(pair(a, b), generation);
        for (endpoint, peer, tell) in [(a, b, notify[0]), (b, a, notify[1])] {
            let queue = self.queues.entry((peer, endpoint)).or_default();
            queue.clear();
            if tell {
                queue.push_back((at_ms, Item::Reset { generation }));
            } else {
                self.seen.insert((endpoint, peer), generation);
            }
        }
    }

    pub fn cut(&mut self, a: ServerId, b: ServerId) {
        self.cut.insert(pair(a, b));
    }

    /// Cuts `id` off from every other of `members`.
    pub fn isolate(&mut self, id: ServerId, members: &[ServerId]) {
        for &other in members.iter().filter(|&&o| o != id) {
            self.cut(id, other);
        }
    }

    /// Cuts every link between `members` on different sides (`side[i]`
    /// is the side of `members[i]`).
    pub fn split(&mut self, members: &[ServerId], side: &[bool]) {
        assert_eq!(members.len(), side.len(), "one side per member");
        for (i, &a) in members.iter().enumerate() {
            for (j, &b) in members.iter().enumerate() {
                if i < j && side[i] != side[j] {
                    self.cut(a, b);
                }
            }
        }
    }

    pub fn heal_all(&mut self) {
        self.cut.clear();
    }

    /// Member `id` stops reading its quorum links (paused).
    pub fn stop_reading(&mut self, id: ServerId) {
        self.not_reading.insert(id);
    }

    /// Member `id` reads its quorum links again (it goes on, or crashed).
    pub fn resume_reading(&mut self, id: ServerId) {
        self.not_reading.remove(&id);
    }

    /// Whether the queue from `from` to `to` delivers now.
    fn flows(&self, from: ServerId, to: ServerId) -> bool {
        !self.is_cut(from, to) && !self.not_reading.contains(&to)
    }

    pub fn is_cut(&self, a: ServerId, b: ServerId) -> bool {
        self.cut.contains(&pair(a, b))
    }

    /// A member crashed: its datagrams are gone, and so is every client
    /// connection to it (each client learns at `at_ms`).
    pub fn crash(&mut self, id: ServerId, at_ms: u64) {
        self.datagrams
            .retain(|_, (from, to, _)| *from != id && *to != id);
        for link in self.links.values_mut().filter(|l| l.member == id) {
            link.up.clear();
            link.up_closed = true;
            if !link.down_closed {
                link.down.clear();
                link.down.push_back((at_ms, Down::Closed));
                link.down_closed = true;
            }
        }
    }

    // ---- client links ----------------------------------------------------

    /// A client opens a connection to `member`.
    pub fn open(&mut self, conn: ConnId, client: usize, member: ServerId) {
        let old = self.links.insert(
            conn,
            ClientLink {
                client,
                member,
                up: VecDeque::new(),
                down: VecDeque::new(),
                up_closed: false,
                down_closed: false,
            },
        );
        assert!(old.is_none(), "connection id {conn} reused");
    }

    /// The client sends; dropped once the connection is closing.
    pub fn to_member(&mut self, conn: ConnId, up: Up, at_ms: u64) {
        if let Some(link) = self.links.get_mut(&conn) {
            if link.up_closed {
                return;
            }
            if matches!(up, Up::Closed) {
                link.up_closed = true;
            }
            let at = fifo_at(&link.up, at_ms);
            link.up.push_back((at, up));
        }
    }

    /// The member sends; dropped once the connection is closing.
    pub fn to_client(&mut self, conn: ConnId, down: Down, at_ms: u64) {
        if let Some(link) = self.links.get_mut(&conn) {
            if link.down_closed {
                return;
            }
            if matches!(down, Down::Closed) {
                link.down_closed = true;
            }
            let at = fifo_at(&link.down, at_ms);
            link.down.push_back((at, down));
        }
    }

    /// The client walks away from the connection: what the member sends is
    /// no longer read, and the member learns the connection closed.
    pub fn client_close(&mut self, conn: ConnId, at_ms: u64) {
        self.to_member(conn, Up::Closed, at_ms);
        if let Some(link) = self.links.get_mut(&conn) {
            link.down.clear();
            link.down_closed = true;
        }
    }

    /// The connection breaks: in-flight data is lost both ways, and both
    /// ends learn of it.
    pub fn reset_client(&mut self, conn: ConnId, at_ms: u64) {
        if let Some(link) = self.links.get_mut(&conn) {
            if !link.up_closed {
                link.up.clear();
                link.up.push_back((at_ms, Up::Closed));
                link.up_closed = true;
            }
            if !link.down_closed {
                link.down.clear();
                link.down.push_back((at_ms, Down::Closed));
                link.down_closed = true;
            }
        }
    }

    /// The member at the other end of a client connection.
    pub fn member_of(&self, conn: ConnId) -> Option<ServerId> {
        self.links.get(&conn).map(|l| l.member)
    }

    /// Open client connections to `member`.
    pub fn conns_of(&self, member: ServerId) -> Vec<ConnId> {
        self.links
            .iter()
            .filter(|(_, l)| l.member == member && !l.up_closed)
            .map(|(c, _)| *c)
            .collect()
    }

    // ---- delivery ----------------------------------------------------------

    /// The time of the next deliverable item.
    pub fn next_time(&self) -> Option<u64> {
        let queue_head = self
            .queues
            .iter()
            .filter(|((from, to), _)| self.flows(*from, *to))
            .filter_map(|(_, q)| q.front().map(|(at, _)| *at));
        let links = self.links.values().flat_map(|l| {
            [
                l.up.front().map(|(at, _)| *at),
                l.down.front().map(|(at, _)| *at),
            ]
            .into_iter()
            .flatten()
        });
        let datagram = self.datagrams.keys().next().map(|(at, _)| *at);
        queue_head.chain(links).chain(datagram).min()
    }

    /// Takes the next item due at `now_ms`, if any.
    pub fn pop(&mut self, now_ms: u64) -> Option<Delivery> {
        let due = self
            .queues
            .iter()
            .filter(|((from, to), _)| self.flows(*from, *to))
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
                Item::Msg {
                    generation,
                    app,
                    bytes,
                } => {
                    assert_eq!(
                        self.seen(to, from),
                        generation,
                        "{to} receives a message of connection {generation} with {from} before learning of it"
                    );
                    if app {
                        Delivery::App { from, to, bytes }
                    } else {
                        Delivery::Zab { from, to, bytes }
                    }
                }
            });
        }
        if let Some(d) = self.pop_client(now_ms) {
            return Some(d);
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

    fn pop_client(&mut self, now_ms: u64) -> Option<Delivery> {
        let mut best: Option<(u64, ConnId, bool)> = None;
        for (conn, l) in &self.links {
            for (at, up) in [
                (l.up.front().map(|(at, _)| *at), true),
                (l.down.front().map(|(at, _)| *at), false),
            ] {
                if let Some(at) = at.filter(|&at| at <= now_ms) {
                    if best.is_none_or(|b| (at, *conn) < (b.0, b.1)) {
                        best = Some((at, *conn, up));
                    }
                }
            }
        }
        let (_, conn, up) = best?;
        let link = self.links.get_mut(&conn).expect("link");
        let (client, member) = (link.client, link.member);
        let d = if up {
            let (_, up) = link.up.pop_front().expect("due");
            Delivery::ToMember { member, conn, up }
        } else {
            let (_, down) = link.down.pop_front().expect("due");
            Delivery::ToClient { client, conn, down }
        };
        if link.up_closed && link.down_closed && link.up.is_empty() && link.down.is_empty() {
            self.links.remove(&conn);
        }
        Some(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quorum_fifo_resets_and_partitions() {
        let mut net = Net::default();
        net.send_quorum(1, 2, false, vec![1], 10);
        net.send_quorum(1, 2, true, vec![2], 1); // later send, shorter delay: still after
        assert!(matches!(net.pop(10), Some(Delivery::Zab { bytes, .. }) if bytes == [1]));
        assert!(matches!(net.pop(10), Some(Delivery::App { bytes, .. }) if bytes == [2]));
        net.send_quorum(1, 2, false, vec![3], 11);
        net.reset(1, 2, [true, false], 11);
        net.send_quorum(2, 1, false, vec![4], 11);
        net.send_quorum(1, 2, false, vec![5], 11); // to the dead connection
        assert_eq!(net.pop(11), Some(Delivery::Nothing));
        assert_eq!(net.pop(11), Some(Delivery::Disconnected { to: 1, peer: 2 }));
        assert!(matches!(net.pop(11), Some(Delivery::Zab { bytes, .. }) if bytes == [4]));
        net.cut(1, 2);
        net.send_quorum(1, 2, false, vec![6], 12);
        assert_eq!(net.pop(20), None, "held by the partition");
        net.heal_all();
        assert!(matches!(net.pop(20), Some(Delivery::Zab { bytes, .. }) if bytes == [6]));
    }

    #[test]
    fn a_client_link_closes_after_what_was_sent() {
        let mut net = Net::default();
        net.open(7, 0, 1);
        net.to_client(7, Down::Bytes(vec![1]), 5);
        net.to_client(7, Down::Closed, 1);
        net.to_client(7, Down::Bytes(vec![2]), 1); // after the close: dropped
        assert!(matches!(
            net.pop(5),
            Some(Delivery::ToClient {
                down: Down::Bytes(_),
                ..
            })
        ));
        assert!(matches!(
            net.pop(5),
            Some(Delivery::ToClient {
                down: Down::Closed,
                ..
            })
        ));
        assert_eq!(net.pop(5), None);
        net.crash(1, 6);
        assert_eq!(net.conns_of(1), Vec::<ConnId>::new());
    }
}
