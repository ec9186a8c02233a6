//! Which server to connect to next: a shuffled list tried in turn, and the
//! probabilistic load-balancing algorithm run when the list is updated
//! (ZooKeeper Programmer's Guide, "What Happens in Session Creation" and
//! "Updating the List of Servers"; ZooKeeper's `StaticHostProvider`).
//!
//! Everything here is pure: randomness comes in through [`RandomSource`], so
//! tests drive it with a seeded generator.

use crate::connect_string::HostPort;

/// A source of randomness, injectable for tests.
pub trait RandomSource {
    /// A uniformly random 64-bit value.
    fn next_u64(&mut self) -> u64;

    /// Uniform in `[0, 1)`.
    fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        debug_assert!(n > 0);
        // Lemire's multiply-shift: unbiased enough for n far below 2^64.
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }
}

/// SplitMix64: small, fast, good enough for shuffling and jitter.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    /// Seeded from the process's hash keys, the clock and a counter, so
    /// every client gets its own sequence.
    pub fn from_entropy() -> SplitMix64 {
        use std::collections::hash_map::RandomState;
        use std::hash::{BuildHasher, Hasher};
        use std::sync::atomic::{AtomicU64, Ordering};
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let mut h = RandomState::new().build_hasher();
        h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
        if let Ok(d) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
            h.write_u128(d.as_nanos());
        }
        SplitMix64(h.finish())
    }
}

impl RandomSource for SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Fisher-Yates shuffle.
pub fn shuffle<T>(v: &mut [T], rng: &mut dyn RandomSource) {
    for i in (1..v.len()).rev() {
        let j = rng.below(i + 1);
        v.swap(i, j);
    }
}

/// What a client does after its server list was replaced.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rebalance {
    /// Keep the current server.
    Stay,
    /// Drop the connection and pick the next server with the probabilistic
    /// algorithm: at each attempt one of the servers that are new in the
    /// list with probability `p_new`, else one of the old ones.
    Move { p_new: f64 },
}

/// The load-balancing decision of ZooKeeper Programmer's Guide ("Updating the
/// List of Servers"), for a client currently on `my_server`.
///
/// * The list grew and my server is still in it: move with probability
///   `1 - old_len / new_len` (3 -> 5 servers: 0.4), then to a new server.
/// * The list grew and my server left it: move, to a new server.
/// * The list stayed or shrank and my server is still in it: stay.
/// * The list stayed or shrank and my server left it: move, to a server of
///   the old list with probability
///   `num_old * (old_len - new_len) / (new_len * (old_len - num_old))`,
///   where `num_old` counts the servers of the new list that were in the old
///   one (5 -> 3 with the 3 kept: always an old one).
///
/// The only random draw is the move decision of the first case.
pub fn rebalance(
    old_list: &[HostPort],
    new_list: &[HostPort],
    my_server: &HostPort,
    rng: &mut dyn RandomSource,
) -> Rebalance {
    let old_len = old_list.len();
    let new_len = new_list.len();
    let mine_kept = new_list.contains(my_server);
    let num_old = new_list.iter().filter(|h| old_list.contains(h)).count();
    if new_len > old_len {
        if !mine_kept {
            return Rebalance::Move { p_new: 1.0 };
        }
        let p_move = 1.0 - old_len as f64 / new_len as f64;
        if rng.next_f64() < p_move {
            Rebalance::Move { p_new: 1.0 }
        } else {
            Rebalance::Stay
        }
    } else if mine_kept {
        Rebalance::Stay
    } else {
        let denominator = (new_len * (old_len - num_old)) as f64;
        let p_old = if denominator == 0.0 {
            // Every old server is kept yet mine is not among them: mine was
            // not in the old list either. Prefer known servers.
            1.0
        } else {
            (num_old * (old_len - new_len)) as f64 / denominator
        };
        Rebalance::Move {
            p_new: (1.0 - p_old).clamp(0.0, 1.0),
        }
    }
}

#[derive(Debug, Clone)]
struct Reconfig {
    old: Vec<HostPort>,
    new: Vec<HostPort>,
    p_new: f64,
    next_old: usize,
    next_new: usize,
}

/// The servers of a client, shuffled once, tried in turn.
#[derive(Debug, Clone)]
pub struct HostList {
    servers: Vec<HostPort>,
    /// The server `next` returned last.
    current: Option<usize>,
    /// The server of the last successful connection (`None`: never).
    last_connected: Option<usize>,
    reconfig: Option<Reconfig>,
}

impl HostList {
    /// Shuffles `servers` (ZooKeeper Programmer's Guide: "pick an arbitrary
    /// server", not the local one first). Duplicates are dropped.
    pub fn new(mut servers: Vec<HostPort>, rng: &mut dyn RandomSource) -> HostList {
        dedup(&mut servers);
        shuffle(&mut servers, rng);
        HostList {
            servers,
            current: None,
            last_connected: None,
            reconfig: None,
        }
    }

    pub fn servers(&self) -> &[HostPort] {
        &self.servers
    }

    pub fn len(&self) -> usize {
        self.servers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// The server `next` returned last.
    pub fn current(&self) -> Option<&HostPort> {
        self.current.map(|i| &self.servers[i])
    }

    /// Whether the probabilistic mode of an update is in progress.
    pub fn in_reconfig(&self) -> bool {
        self.reconfig.is_some()
    }

    /// The server to try next, and whether the list has been gone through
    /// once more without a success (the caller then backs off longer).
    ///
    /// After an update that moves the client, servers come from the
    /// probabilistic mode until it has tried them all; then round robin
    /// resumes.
    pub fn next(&mut self, rng: &mut dyn RandomSource) -> (HostPort, bool) {
        let mut wrapped = false;
        if let Some(rc) = &mut self.reconfig {
            let take_new = rng.next_f64() < rc.p_new;
            let pick = if rc.next_new < rc.new.len() && (take_new || rc.next_old >= rc.old.len()) {
                rc.next_new += 1;
                Some(rc.new[rc.next_new - 1].clone())
            } else if rc.next_old < rc.old.len() {
                rc.next_old += 1;
                Some(rc.old[rc.next_old - 1].clone())
            } else {
                None
            };
            match pick {
                Some(h) => {
                    self.current = self.servers.iter().position(|s| *s == h);
                    return (h, false);
                }
                None => {
                    // Tried every server of the new list: back to normal.
                    self.reconfig = None;
                    wrapped = true;
                }
            }
        }
        let i = match self.current {
            Some(i) => (i + 1) % self.servers.len(),
            None => 0,
        };
        self.current = Some(i);
        let back_at_start = i == self.last_connected.unwrap_or(0);
        (self.servers[i].clone(), wrapped || back_at_start)
    }

    /// A connection to the current server succeeded.
    pub fn on_connected(&mut self) {
        self.last_connected = self.current;
        self.reconfig = None;
    }

    /// Replaces the list; `connected_to` is the server of the live
    /// connection, if any. Returns whether the client must drop its
    /// connection (always when its server left the list; otherwise as
    /// [`rebalance`] decides). When it must, the following [`next`](Self::next)
    /// calls pick servers the probabilistic way.
    pub fn update(
        &mut self,
        mut new_servers: Vec<HostPort>,
        connected_to: Option<&HostPort>,
        rng: &mut dyn RandomSource,
    ) -> bool {
        dedup(&mut new_servers);
        shuffle(&mut new_servers, rng);
        let my_server = connected_to
            .cloned()
            .or_else(|| self.current().cloned())
            .or_else(|| self.servers.first().cloned());
        let decision = match &my_server {
            Some(me) => rebalance(&self.servers, &new_servers, me, rng),
            None => Rebalance::Stay,
        };
        let (old, new): (Vec<HostPort>, Vec<HostPort>) = new_servers
            .iter()
            .cloned()
            .partition(|h| self.servers.contains(h));
        self.servers = new_servers;
        self.last_connected = None;
        match decision {
            Rebalance::Stay => {
                self.reconfig = None;
                self.current = my_server.and_then(|me| self.servers.iter().position(|s| *s == me));
                self.last_connected = self.current;
                false
            }
            Rebalance::Move { p_new } => {
                self.reconfig = Some(Reconfig {
                    old,
                    new,
                    p_new,
                    next_old: 0,
                    next_new: 0,
                });
                self.current = None;
                true
            }
        }
    }
}

fn dedup(v: &mut Vec<HostPort>) {
    let mut seen = std::collections::HashSet::new();
    v.retain(|h| seen.insert(h.clone()));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(ports: std::ops::Range<u16>) -> Vec<HostPort> {
        ports.map(|p| HostPort::new("10.0.0.1", p)).collect()
    }

    #[test]
    fn the_list_is_shuffled_and_every_server_is_tried_in_turn() {
        // ZooKeeper Programmer's Guide, "What Happens in Session Creation":
        // pick an arbitrary server, on failure try the next one.
        let mut rng = SplitMix64::new(7);
        let mut firsts = std::collections::HashSet::new();
        for _ in 0..50 {
            let mut list = HostList::new(hosts(1..6), &mut rng);
            let mut seen: Vec<u16> = (0..5).map(|_| list.next(&mut rng).0.port).collect();
            firsts.insert(seen[0]);
            seen.sort();
            seen.dedup();
            assert_eq!(seen.len(), 5, "5 attempts cover 5 servers");
        }
        assert!(firsts.len() > 1, "the first server is random: {firsts:?}");
    }

    #[test]
    fn next_reports_a_wrap_after_trying_every_server_since_the_last_success() {
        let mut rng = SplitMix64::new(1);
        let mut list = HostList::new(hosts(1..4), &mut rng);
        let wraps: Vec<bool> = (0..7).map(|_| list.next(&mut rng).1).collect();
        assert_eq!(wraps, [true, false, false, true, false, false, true]);
        list.on_connected(); // at index 0
        list.next(&mut rng);
        list.next(&mut rng);
        assert!(
            list.next(&mut rng).1,
            "back at the server of the last success"
        );
    }

    /// ZooKeeper Programmer's Guide, "Updating the List of Servers", first
    /// example: 3 servers become 5; 40% of the clients of each old server move,
    /// each to one of the 2 new servers chosen at random.
    #[test]
    fn growing_from_3_to_5_servers_moves_40_percent_of_clients_to_the_new_ones() {
        let mut rng = SplitMix64::new(0x5eed);
        let old = hosts(1..4);
        let new = hosts(1..6);
        let clients = 20_000;
        let mut moved = 0;
        let mut load = [0usize; 6];
        for c in 0..clients {
            let mut list = HostList::new(old.clone(), &mut rng);
            // The client is connected to one of the old servers.
            let mine = old[c % 3].clone();
            let must_drop = list.update(new.clone(), Some(&mine), &mut rng);
            let now = if must_drop {
                moved += 1;
                let (next, _) = list.next(&mut rng);
                assert!(
                    next.port >= 4,
                    "a moving client goes to a new server first, got {next}"
                );
                next
            } else {
                mine
            };
            load[now.port as usize] += 1;
        }
        let frac = moved as f64 / clients as f64;
        assert!((0.37..0.43).contains(&frac), "moved {frac}, expected 0.4");
        // Expected uniform load: 20% per server.
        for (port, &n) in load.iter().enumerate().skip(1) {
            let share = n as f64 / clients as f64;
            assert!(
                (0.17..0.23).contains(&share),
                "server {port} got {share} of the clients"
            );
        }
    }

    #[test]
    fn the_growth_decision_is_exactly_the_probability_of_the_guide() {
        // The move decision alone: 1 - 3/5 = 0.4.
        let mut rng = SplitMix64::new(99);
        let (old, new) = (hosts(1..4), hosts(1..6));
        let n = 50_000;
        let moves = (0..n)
            .filter(|_| rebalance(&old, &new, &old[0], &mut rng) != Rebalance::Stay)
            .count();
        let frac = moves as f64 / n as f64;
        assert!((0.38..0.42).contains(&frac), "{frac}");
        // A client whose server left a grown list always moves, to a new one.
        let grown: Vec<HostPort> = hosts(2..6);
        assert_eq!(
            rebalance(&old, &grown, &old[0], &mut rng),
            Rebalance::Move { p_new: 1.0 }
        );
    }

    /// ZooKeeper Programmer's Guide, "Updating the List of Servers", second
    /// example: 5 servers become 3; clients of the 3 remaining servers stay,
    /// clients of the 2 removed ones move to one of the 3, chosen at random.
    #[test]
    fn shrinking_from_5_to_3_servers_moves_only_clients_of_removed_servers() {
        let mut rng = SplitMix64::new(0xfeed);
        let old = hosts(1..6);
        let new = hosts(1..4);
        let mut landed = [0usize; 4];
        let per_server = 3_000;
        for mine in &old {
            for _ in 0..per_server {
                let mut list = HostList::new(old.clone(), &mut rng);
                let must_drop = list.update(new.clone(), Some(mine), &mut rng);
                if mine.port <= 3 {
                    assert!(!must_drop, "a client of a kept server stays");
                    assert_eq!(list.current(), Some(mine));
                } else {
                    assert!(must_drop, "a client of a removed server moves");
                    let (next, _) = list.next(&mut rng);
                    assert!(next.port <= 3, "moves to a remaining server: {next}");
                    landed[next.port as usize] += 1;
                }
            }
        }
        let moved = 2 * per_server;
        for (port, &n) in landed.iter().enumerate().skip(1) {
            let share = n as f64 / moved as f64;
            assert!(
                (0.28..0.39).contains(&share),
                "server {port} got {share} of the moved clients"
            );
        }
    }

    #[test]
    fn moving_client_falls_back_to_old_servers_then_round_robin() {
        // ZooKeeper Programmer's Guide: "only if it cannot connect to any of
        // the new servers will it try to connect to the old ones. After ...
        // trying all servers in the new list and failing to connect, the client
        // moves back to the normal mode".
        let mut rng = SplitMix64::new(3);
        let old = hosts(1..4);
        let new = hosts(1..6);
        let mut list = HostList::new(old.clone(), &mut rng);
        // A client whose server left: p_new = 1.
        let gone = HostPort::new("10.0.0.9", 9);
        assert!(list.update(new, Some(&gone), &mut rng));
        let order: Vec<u16> = (0..5).map(|_| list.next(&mut rng).0.port).collect();
        assert!(
            order[..2].iter().all(|&p| p >= 4),
            "new servers first: {order:?}"
        );
        assert!(
            order[2..].iter().all(|&p| p <= 3),
            "then old ones: {order:?}"
        );
        assert!(list.in_reconfig());
        let (_, wrapped) = list.next(&mut rng);
        assert!(
            wrapped,
            "after the new list is exhausted, round robin resumes"
        );
        assert!(!list.in_reconfig());
    }

    #[test]
    fn an_unchanged_list_keeps_everyone() {
        let mut rng = SplitMix64::new(5);
        let old = hosts(1..4);
        for mine in &old {
            let mut list = HostList::new(old.clone(), &mut rng);
            let mut shuffled = old.clone();
            shuffled.reverse();
            assert!(!list.update(shuffled, Some(mine), &mut rng));
            assert_eq!(list.current(), Some(mine));
        }
    }

    #[test]
    fn random_source_helpers_stay_in_range() {
        let mut rng = SplitMix64::new(11);
        for _ in 0..10_000 {
            let f = rng.next_f64();
            assert!((0.0..1.0).contains(&f));
            assert!(rng.below(7) < 7);
        }
    }
}
