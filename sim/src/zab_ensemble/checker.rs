//! The simulation's checker: the global view every member's behaviour is
//! held against (see the invariants listed in `sim/mod.rs`).

use std::collections::{BTreeMap, BTreeSet};

use wazoo_zab::{Payload, ServerId, Zxid};

/// The global view the invariants are checked against.
#[derive(Default)]
pub(super) struct Checker {
    pub(super) proposals: BTreeMap<Zxid, Payload>,
    /// The one sequence every member's applied sequence is a prefix of.
    pub(super) global: Vec<(Zxid, Payload)>,
    pub(super) leaders: BTreeMap<u32, ServerId>,
    /// Proposals whose client waits on (member, incarnation).
    pub(super) waiting: BTreeMap<(ServerId, u64), BTreeSet<Zxid>>,
    /// Proposals whose commit was reported to the client, and when.
    pub(super) acknowledged: BTreeMap<Zxid, u64>,
    /// Open `sync`s: (member, incarnation, token) -> when asked.
    pub(super) open_syncs: BTreeMap<(ServerId, u64, u64), u64>,
    /// When each epoch's leader was established (true time).
    pub(super) established_ms: BTreeMap<u32, u64>,
}

impl Checker {
    pub(super) fn on_propose(
        &mut self,
        zxid: Zxid,
        payload: &Payload,
        member: ServerId,
        incarnation: u64,
    ) {
        let previous = self.proposals.insert(zxid, payload.clone());
        assert!(
            previous.is_none(),
            "zxid {zxid:?} proposed twice (two leaders in epoch {})",
            zxid.epoch()
        );
        self.waiting
            .entry((member, incarnation))
            .or_default()
            .insert(zxid);
    }

    pub(super) fn check_integrity(&self, zxid: Zxid, payload: &Payload, what: &str) {
        assert_eq!(
            self.proposals.get(&zxid),
            Some(payload),
            "integrity: {what} {zxid:?} that nobody proposed"
        );
    }

    /// Total order, agreement and primary order for the txn at `index` of
    /// some member's applied sequence.
    pub(super) fn check_position(&mut self, index: usize, zxid: Zxid, payload: &Payload) {
        self.check_integrity(zxid, payload, "delivered");
        if index < self.global.len() {
            assert_eq!(
                self.global[index].0, zxid,
                "agreement: position {index} holds {:?} elsewhere, {zxid:?} here",
                self.global[index].0
            );
            return;
        }
        assert_eq!(index, self.global.len(), "a gap in a delivered sequence");
        if let Some((previous, _)) = self.global.last() {
            if previous.epoch() == zxid.epoch() {
                assert_eq!(
                    zxid.counter(),
                    previous.counter() + 1,
                    "primary order: {zxid:?} delivered right after {previous:?}"
                );
            } else {
                assert!(
                    previous.epoch() < zxid.epoch(),
                    "epochs go back: {zxid:?} after {previous:?}"
                );
                assert_eq!(
                    zxid.counter(),
                    1,
                    "primary order: epoch {} starts at {zxid:?}",
                    zxid.epoch()
                );
            }
        } else {
            assert_eq!(
                zxid.counter(),
                1,
                "primary order: the first txn is {zxid:?}"
            );
        }
        self.global.push((zxid, payload.clone()));
    }

    /// ZooKeeper's sync, as far as it is promised: a sync answered by a
    /// member whose leader leads epoch `epoch` has delivered every txn of
    /// that epoch or an earlier one acknowledged before the sync began.
    /// (A member still with a deposed leader may miss txns of a newer
    /// epoch: ZooKeeper's sync has the same window.)
    pub(super) fn on_sync_done(
        &mut self,
        key: (ServerId, u64, u64),
        epoch: u32,
        applied_last: Zxid,
    ) {
        let asked_ms = self
            .open_syncs
            .remove(&key)
            .expect("a SyncDone answers an open sync");
        let newest = self
            .acknowledged
            .range(..Zxid::new(epoch + 1, 0))
            .rev()
            .find(|(_, at)| **at < asked_ms)
            .map(|(z, _)| *z);
        if let Some(z) = newest {
            assert!(
                applied_last >= z,
                "sync: member {} answered a sync at {applied_last:?} missing {z:?} acknowledged before it",
                key.0
            );
        }
    }

    /// The leader of `epoch` served a client at `now_ms` (took a proposal,
    /// answered a sync): no leader of a later epoch may be established by
    /// then. Its lease ended before any later leader could be established,
    /// so two members never act as leader at the same time
    /// (docs/ARCHITECTURE.md, "Timing model").
    pub(super) fn on_leader_served(&self, epoch: u32, leader: ServerId, now_ms: u64, what: &str) {
        if let Some((later, at)) = self
            .established_ms
            .range(epoch + 1..)
            .find(|(_, at)| **at <= now_ms)
        {
            panic!(
                "lease: leader {leader} of epoch {epoch} {what} at {now_ms} ms, \
                 after the leader of epoch {later} was established at {at} ms"
            );
        }
    }

    pub(super) fn on_established(&mut self, epoch: u32, leader: ServerId, now_ms: u64) {
        self.established_ms.entry(epoch).or_insert(now_ms);
        let first = *self.leaders.entry(epoch).or_insert(leader);
        assert_eq!(
            first, leader,
            "two established leaders in epoch {epoch}: {first} and {leader}"
        );
    }
}
