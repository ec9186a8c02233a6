//! The member's in-memory view of its txn log, and the leader's choice of
//! DIFF, TRUNC or SNAP for a learner (ZooKeeper Internals, "Atomic Broadcast").
//!
//! `History` holds the txns after `base` in zxid order: every txn not yet
//! committed (they are needed to deliver them later, and on a leader to
//! sync learners), plus up to `committed_kept_max` committed ones (the
//! leader's `committedLog`, what DIFFs are made of). `base` is the zxid of
//! the last txn dropped from memory (trimmed, or the snapshot the member
//! started from): the member's history reaches back exactly to `base`.
//!
//! Watermarks, all zxids, with `base <= committed <= last` and
//! `durable <= last`:
//! - `committed`: delivered to the state machine (in order, exactly once).
//! - `durable`: every txn up to it is fsynced in the local log.

use std::collections::VecDeque;

use super::types::{Payload, Zxid};

#[derive(Clone, Debug)]
pub struct History {
    base: Zxid,
    entries: VecDeque<(Zxid, Payload)>,
    committed: Zxid,
    durable: Zxid,
    committed_kept_max: usize,
}

/// How the leader brings a learner whose last logged zxid is `peer_last`
/// in line with its history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncKind {
    /// The learner's log is a prefix of the leader's history: send the txns
    /// after `peer_last`.
    Diff,
    /// The learner has txns the leader does not (never committed): drop
    /// everything after the zxid, then send the txns after it.
    Trunc(Zxid),
    /// The leader's in-memory history does not reach back to the learner:
    /// send the state machine's snapshot at the leader's committed zxid,
    /// then the txns after it.
    Snap,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyncPlan {
    pub kind: SyncKind,
    /// The learner's last zxid once the DIFF/TRUNC/SNAP is applied: the
    /// leader sends the txns after it.
    pub start: Zxid,
}

impl History {
    /// A history that starts at a snapshot (`base`) followed by the
    /// restored log, all of it durable and none of it known committed.
    pub fn restore(base: Zxid, log: Vec<(Zxid, Payload)>, committed_kept_max: usize) -> History {
        let durable = log.last().map_or(base, |(z, _)| *z);
        let h = History {
            base,
            entries: log.into(),
            committed: base,
            durable,
            committed_kept_max,
        };
        h.validate();
        h
    }

    #[cfg(test)]
    pub fn base(&self) -> Zxid {
        self.base
    }

    pub fn last(&self) -> Zxid {
        self.entries.back().map_or(self.base, |(z, _)| *z)
    }

    pub fn committed(&self) -> Zxid {
        self.committed
    }

    pub fn durable(&self) -> Zxid {
        self.durable
    }

    /// Number of txns logged but not delivered.
    pub fn uncommitted_len(&self) -> usize {
        self.entries.len() - self.entries.partition_point(|(z, _)| *z <= self.committed)
    }

    /// True when `zxid` is a point of this history: the base or a txn.
    pub fn contains(&self, zxid: Zxid) -> bool {
        zxid == self.base || self.index_of(zxid).is_some()
    }

    fn index_of(&self, zxid: Zxid) -> Option<usize> {
        self.entries.binary_search_by_key(&zxid, |(z, _)| *z).ok()
    }

    pub fn append(&mut self, zxid: Zxid, payload: Payload) {
        assert!(
            zxid > self.last(),
            "append {zxid:?} after {:?}: the log must ascend",
            self.last()
        );
        assert!(zxid.counter() != 0, "counter 0 is never a txn ({zxid:?})");
        self.entries.push_back((zxid, payload));
    }

    /// Drops every txn after `zxid`. `zxid` must be a point of the history
    /// and not below `committed`: committed txns are never undone.
    pub fn truncate_after(&mut self, zxid: Zxid) -> Result<(), String> {
        if zxid < self.committed {
            return Err(format!(
                "truncate to {zxid:?} below committed {:?}",
                self.committed
            ));
        }
        if !self.contains(zxid) {
            return Err(format!("truncate to {zxid:?} which this log does not hold"));
        }
        let keep = self.entries.partition_point(|(z, _)| *z <= zxid);
        self.entries.truncate(keep);
        self.durable = self.durable.min(zxid);
        Ok(())
    }

    /// Replaces everything with a snapshot at `zxid` (already durable).
    pub fn reset_to_snapshot(&mut self, zxid: Zxid) {
        self.entries.clear();
        self.base = zxid;
        self.committed = zxid;
        self.durable = zxid;
    }

    /// Records that the log is fsynced up to `zxid`. Reports about txns a
    /// truncation removed since are clamped to what the log holds.
    pub fn set_durable(&mut self, zxid: Zxid) {
        self.durable = self.durable.max(zxid.min(self.last()));
    }

    /// Marks every txn up to `zxid` committed and returns the newly
    /// committed ones in zxid order. Trims old committed txns.
    pub fn commit_to(&mut self, zxid: Zxid) -> Vec<(Zxid, Payload)> {
        assert!(
            zxid <= self.last(),
            "commit {zxid:?} beyond the log's last {:?}",
            self.last()
        );
        if zxid <= self.committed {
            return Vec::new();
        }
        let from = self.entries.partition_point(|(z, _)| *z <= self.committed);
        let to = self.entries.partition_point(|(z, _)| *z <= zxid);
        let newly: Vec<(Zxid, Payload)> = self.entries.range(from..to).cloned().collect();
        self.committed = zxid;
        self.trim();
        newly
    }

    /// Keeps at most `committed_kept_max` committed txns in memory.
    fn trim(&mut self) {
        let committed_len = self.entries.partition_point(|(z, _)| *z <= self.committed);
        let excess = committed_len.saturating_sub(self.committed_kept_max);
        if excess > 0 {
            self.base = self.entries[excess - 1].0;
            self.entries.drain(..excess);
        }
    }

    /// The txns after `after`, up to and including `upto`.
    pub fn range(&self, after: Zxid, upto: Zxid) -> Vec<(Zxid, Payload)> {
        let from = self.entries.partition_point(|(z, _)| *z <= after);
        let to = self.entries.partition_point(|(z, _)| *z <= upto);
        if from >= to {
            return Vec::new();
        }
        self.entries.range(from..to).cloned().collect()
    }

    /// The largest point of the history (base or txn) not after `zxid`.
    fn floor(&self, zxid: Zxid) -> Option<Zxid> {
        if zxid < self.base {
            return None;
        }
        let n = self.entries.partition_point(|(z, _)| *z <= zxid);
        Some(if n == 0 {
            self.base
        } else {
            self.entries[n - 1].0
        })
    }

    /// ZooKeeper Internals, "Atomic Broadcast", "Leader Protocol in a nutshell": "Tell the follower to
    /// delete any transaction that the leader doesn't have" (TRUNC) and
    /// "Send any transactions that the follower doesn't have" (DIFF); SNAP
    /// "when too far behind", i.e. when this history does not reach back to
    /// the learner's last zxid.
    ///
    /// ZAB's prefix property makes this exact: two logs that hold the same
    /// zxid hold the same txns up to it, so the learner keeps its log up to
    /// the largest zxid of ours not after its last one, and everything it
    /// has beyond that was never committed ("a skipped message must remain
    /// skipped"). Committed txns are all in a leader's history, so that
    /// point is never below what the learner delivered.
    pub fn plan_sync(&self, peer_last: Zxid) -> SyncPlan {
        match self.floor(peer_last) {
            None => SyncPlan {
                kind: SyncKind::Snap,
                start: self.committed,
            },
            Some(point) if point == peer_last => SyncPlan {
                kind: SyncKind::Diff,
                start: peer_last,
            },
            Some(point) => SyncPlan {
                kind: SyncKind::Trunc(point),
                start: point,
            },
        }
    }

    /// Structural invariants; panics naming the broken one.
    pub fn validate(&self) {
        let mut previous = self.base;
        for (z, _) in &self.entries {
            assert!(
                *z > previous,
                "history not ascending: {z:?} after {previous:?}"
            );
            assert!(z.counter() != 0, "history holds a counter-0 zxid {z:?}");
            previous = *z;
        }
        assert!(
            self.base <= self.committed && self.committed <= self.last(),
            "watermarks out of order: base {:?} committed {:?} last {:?}",
            self.base,
            self.committed,
            self.last()
        );
        assert!(
            self.durable <= self.last(),
            "durable {:?} beyond last {:?}",
            self.durable,
            self.last()
        );
        assert!(
            self.committed == self.base || self.contains(self.committed),
            "committed {:?} is not a txn of the history",
            self.committed
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn z(e: u32, c: u32) -> Zxid {
        Zxid::new(e, c)
    }

    fn history(base: Zxid, zxids: &[Zxid], committed: Zxid, kept: usize) -> History {
        let log = zxids
            .iter()
            .map(|&x| (x, Payload::from(&x.0.to_be_bytes()[..])))
            .collect();
        let mut h = History::restore(base, log, kept);
        h.commit_to(committed);
        h
    }

    /// ZooKeeper Internals, "Atomic Broadcast": "Send any transactions that the follower doesn't have":
    /// a follower whose last zxid is in the leader's history gets a DIFF.
    #[test]
    fn diff_when_the_follower_is_a_prefix() {
        let h = history(
            Zxid::ZERO,
            &[z(1, 1), z(1, 2), z(1, 3), z(2, 1)],
            z(2, 1),
            10,
        );
        assert_eq!(
            h.plan_sync(z(1, 2)),
            SyncPlan {
                kind: SyncKind::Diff,
                start: z(1, 2)
            }
        );
        assert_eq!(h.range(z(1, 2), h.last()).len(), 2);
        // Up to date: an empty DIFF.
        assert_eq!(
            h.plan_sync(z(2, 1)),
            SyncPlan {
                kind: SyncKind::Diff,
                start: z(2, 1)
            }
        );
        // An empty follower of a history that starts at zero.
        assert_eq!(
            h.plan_sync(Zxid::ZERO),
            SyncPlan {
                kind: SyncKind::Diff,
                start: Zxid::ZERO
            }
        );
    }

    /// ZooKeeper Internals, "Atomic Broadcast": "A skipped message must remain skipped": the old leader
    /// proposed 1:3 to nobody else; the new leader never had it, so the
    /// follower holding it is told to truncate to 1:2 before the DIFF.
    #[test]
    fn trunc_when_the_follower_has_txns_the_leader_never_had() {
        let h = history(
            Zxid::ZERO,
            &[z(1, 1), z(1, 2), z(2, 1), z(2, 2)],
            z(2, 2),
            10,
        );
        assert_eq!(
            h.plan_sync(z(1, 3)),
            SyncPlan {
                kind: SyncKind::Trunc(z(1, 2)),
                start: z(1, 2)
            }
        );
        assert_eq!(
            h.range(z(1, 2), h.last())
                .iter()
                .map(|e| e.0)
                .collect::<Vec<_>>(),
            [z(2, 1), z(2, 2)]
        );
        // Ahead of the leader's last txn: truncate to it, nothing to send.
        assert_eq!(
            h.plan_sync(z(2, 5)),
            SyncPlan {
                kind: SyncKind::Trunc(z(2, 2)),
                start: z(2, 2)
            }
        );
        assert_eq!(
            h.plan_sync(z(3, 1)),
            SyncPlan {
                kind: SyncKind::Trunc(z(2, 2)),
                start: z(2, 2)
            }
        );
    }

    /// ZooKeeper Internals, "Atomic Broadcast"'s recovery: "the old leader has locally committed proposal
    /// 2 ... the new leader ... will replay any missed proposals from its
    /// transaction log", including ones it has not committed itself yet.
    #[test]
    fn diff_includes_the_uncommitted_tail() {
        let h = history(Zxid::ZERO, &[z(1, 1), z(1, 2)], z(1, 1), 10);
        assert_eq!(
            h.plan_sync(z(1, 1)),
            SyncPlan {
                kind: SyncKind::Diff,
                start: z(1, 1)
            }
        );
        assert_eq!(
            h.range(z(1, 1), h.last())
                .iter()
                .map(|e| e.0)
                .collect::<Vec<_>>(),
            [z(1, 2)]
        );
    }

    /// SNAP "when too far behind": the in-memory history (the leader's
    /// committedLog) no longer reaches back to the learner.
    #[test]
    fn snap_when_the_history_does_not_reach_back() {
        let h = history(
            Zxid::ZERO,
            &[z(1, 1), z(1, 2), z(1, 3), z(1, 4)],
            z(1, 4),
            2,
        );
        assert_eq!(h.base(), z(1, 2), "two committed txns kept");
        assert_eq!(
            h.plan_sync(z(1, 1)),
            SyncPlan {
                kind: SyncKind::Snap,
                start: z(1, 4)
            }
        );
        assert_eq!(
            h.plan_sync(z(1, 2)),
            SyncPlan {
                kind: SyncKind::Diff,
                start: z(1, 2)
            }
        );
        // A restarted leader whose history starts at its snapshot.
        let h = history(z(3, 7), &[z(3, 8)], z(3, 7), 10);
        assert_eq!(
            h.plan_sync(z(3, 6)),
            SyncPlan {
                kind: SyncKind::Snap,
                start: z(3, 7)
            }
        );
    }

    #[test]
    fn truncation_never_undoes_a_commit() {
        let mut h = history(Zxid::ZERO, &[z(1, 1), z(1, 2), z(1, 3)], z(1, 2), 10);
        assert!(h.truncate_after(z(1, 1)).is_err());
        assert!(h.truncate_after(z(1, 5)).is_err(), "not a point of the log");
        h.set_durable(z(1, 3));
        h.truncate_after(z(1, 2)).unwrap();
        assert_eq!((h.last(), h.durable()), (z(1, 2), z(1, 2)));
        // A stale durable report about the removed txn is clamped.
        h.set_durable(z(1, 3));
        assert_eq!(h.durable(), z(1, 2));
        h.validate();
    }

    #[test]
    fn commit_returns_newly_committed_in_order() {
        let mut h = history(Zxid::ZERO, &[z(1, 1), z(1, 2), z(1, 3)], Zxid::ZERO, 1);
        assert_eq!(h.uncommitted_len(), 3);
        assert_eq!(
            h.commit_to(z(1, 2)).iter().map(|e| e.0).collect::<Vec<_>>(),
            [z(1, 1), z(1, 2)]
        );
        assert!(h.commit_to(z(1, 1)).is_empty(), "commits are cumulative");
        assert_eq!(h.base(), z(1, 1));
        assert_eq!(h.uncommitted_len(), 1);
        h.validate();
    }
}
