//! How a leader brings a ZooKeeper learner up to date (ZooKeeper
//! Internals, "Leader Activation"; `LearnerHandler.syncFollower` and
//! `queueCommittedProposals` in ZooKeeper 3.8): from the learner's last
//! zxid and the committed proposals the leader still holds, one of DIFF
//! (the proposals the learner lacks, each then committed), TRUNC (the
//! learner drops proposals the quorum never committed, then gets the
//! ones it lacks) or SNAP (the whole state). A leader of ZooKeeper
//! members decides with [`plan_sync`] exactly as a ZooKeeper leader does:
//! a learner is never sent a DIFF with a gap, nor a TRUNC where a
//! ZooKeeper leader would send SNAP.

/// What the leader sends a learner before NEWLEADER.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyncPlan {
    /// DIFF, then each of `proposals` (zxids, ascending) as a PROPOSAL
    /// and a COMMIT. `last` is the DIFF packet's zxid: the last committed
    /// zxid the leader holds.
    Diff { last: i64, proposals: Vec<i64> },
    /// TRUNC to `to`, then each of `proposals` as a PROPOSAL and a COMMIT.
    Trunc { to: i64, proposals: Vec<i64> },
    /// SNAP: the whole state, then what was committed after it.
    Snap,
}

fn epoch(zxid: i64) -> i64 {
    zxid >> 32
}

/// The sync for a learner whose last logged zxid is `peer`, when the
/// leader's state is at `last_processed` and it holds the committed
/// proposals `committed` (zxids, ascending, the newest at most
/// `last_processed`; empty when it holds none, as after a start).
///
/// - The learner is where the leader is: an empty DIFF.
/// - It has proposals past the newest committed one (it led, or followed
///   a leader that fell, and logged what no quorum committed), unless its
///   zxid opens a new epoch: TRUNC to the newest committed one.
/// - Its zxid lies within the committed proposals: DIFF with those after
///   it if it holds one of them (or its zxid opens an epoch); otherwise it
///   logged a proposal the quorum dropped in that epoch, and gets a TRUNC
///   to the committed one before it, then the rest; but when the next
///   committed proposal is of a later epoch, SNAP (ZooKeeper's leader
///   sends no TRUNC there).
/// - Older than every committed proposal the leader holds: SNAP.
pub fn plan_sync(peer: i64, last_processed: i64, committed: &[i64]) -> SyncPlan {
    debug_assert!(
        committed.windows(2).all(|w| w[0] < w[1]),
        "committed proposals ascend: {committed:?}"
    );
    let (min, max) = match (committed.first(), committed.last()) {
        (Some(&min), Some(&max)) => (min, max),
        _ => (last_processed, last_processed),
    };
    let opens_epoch = peer & 0xffff_ffff == 0;
    if peer == last_processed {
        return SyncPlan::Diff {
            last: peer,
            proposals: Vec::new(),
        };
    }
    if peer > max && !opens_epoch {
        return SyncPlan::Trunc {
            to: max,
            proposals: Vec::new(),
        };
    }
    if !(min..=max).contains(&peer) || committed.is_empty() {
        return SyncPlan::Snap;
    }
    let after: Vec<i64> = committed.iter().copied().filter(|&z| z > peer).collect();
    if opens_epoch || committed.binary_search(&peer).is_ok() {
        return SyncPlan::Diff {
            last: max,
            proposals: after,
        };
    }
    // The learner logged `peer`, which the leader never committed.
    let next = after[0];
    if epoch(next) != epoch(peer) {
        return SyncPlan::Snap;
    }
    let before = committed
        .iter()
        .copied()
        .take_while(|&z| z < peer)
        .last()
        .expect("peer >= min and peer is not min, so a committed zxid precedes it");
    SyncPlan::Trunc {
        to: before,
        proposals: after,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const E1: i64 = 1 << 32;
    const E2: i64 = 2 << 32;

    // ZooKeeper Internals, "Leader Activation": each case as ZooKeeper
    // 3.8's LearnerHandler decides it.
    #[test]
    fn a_learner_is_synced_as_a_zookeeper_leader_syncs_it() {
        let log = [E1 | 3, E1 | 4, E1 | 5, E2 | 1, E2 | 2];
        let last = E2 | 2;
        assert_eq!(
            plan_sync(last, last, &log),
            SyncPlan::Diff {
                last,
                proposals: vec![]
            },
            "up to date: an empty DIFF"
        );
        assert_eq!(
            plan_sync(E1 | 4, last, &log),
            SyncPlan::Diff {
                last,
                proposals: vec![E1 | 5, E2 | 1, E2 | 2]
            },
            "behind, within the committed log"
        );
        assert_eq!(
            plan_sync(E2, last, &log),
            SyncPlan::Diff {
                last,
                proposals: vec![E2 | 1, E2 | 2]
            },
            "a zxid that opens an epoch"
        );
        assert_eq!(
            plan_sync(E2 | 7, last, &log),
            SyncPlan::Trunc {
                to: last,
                proposals: vec![]
            },
            "ahead: it logged what no quorum committed"
        );
        assert_eq!(
            plan_sync(E1 | 9, E2 | 2, &[E1 | 3, E1 | 4, E1 | 10, E2 | 1]),
            SyncPlan::Trunc {
                to: E1 | 4,
                proposals: vec![E1 | 10, E2 | 1]
            },
            "a dropped proposal inside the epoch: TRUNC back, then DIFF"
        );
        assert_eq!(
            plan_sync(E1 | 7, last, &log),
            SyncPlan::Snap,
            "a dropped proposal the next epoch follows: no TRUNC across epochs"
        );
        assert_eq!(
            plan_sync(E1 | 1, last, &log),
            SyncPlan::Snap,
            "older than the log"
        );
        assert_eq!(plan_sync(0, last, &[]), SyncPlan::Snap, "nothing held");
        assert_eq!(
            plan_sync(E1 | 9, E1 | 5, &[]),
            SyncPlan::Trunc {
                to: E1 | 5,
                proposals: vec![]
            },
            "nothing held, the learner ahead"
        );
    }

    proptest! {
        // Whatever the plan, the learner ends with exactly the leader's
        // committed history from where it keeps its own: a DIFF never
        // leaves a gap, a TRUNC keeps only committed zxids and, inside the
        // committed log, only drops what the learner logged in an epoch
        // whose later proposals the leader holds; SNAP is the fallback.
        #[test]
        fn a_planned_sync_leaves_the_learner_with_the_leaders_history(
            committed in prop::collection::btree_set((1i64..4, 1i64..12), 0..12),
            peer in (0i64..5, 0i64..14),
        ) {
            let committed: Vec<i64> = committed.into_iter().map(|(e, c)| (e << 32) | c).collect();
            let peer = (peer.0 << 32) | peer.1;
            let last = committed.last().copied().unwrap_or(1 << 32);
            match plan_sync(peer, last, &committed) {
                SyncPlan::Diff { last: l, proposals } => {
                    prop_assert_eq!(l, last);
                    let expected: Vec<i64> = committed.iter().copied().filter(|&z| z > peer).collect();
                    prop_assert_eq!(&proposals, &expected);
                    // The learner's own zxid is committed, or opens an
                    // epoch, or is the leader's.
                    prop_assert!(peer == last || peer & 0xffff_ffff == 0 || committed.contains(&peer));
                }
                SyncPlan::Trunc { to, proposals } => {
                    prop_assert!(to < peer);
                    if peer > last {
                        // Ahead of everything committed: back to the
                        // newest committed zxid, whatever its epoch (what
                        // the learner logged past it no quorum has).
                        prop_assert_eq!(to, last);
                    } else {
                        // Inside the log: only when the next committed
                        // proposal is of the learner's epoch (its leader
                        // then dropped what the learner logged), back to
                        // the committed one before.
                        prop_assert_eq!(epoch(proposals[0]), epoch(peer));
                        prop_assert_eq!(Some(to), committed.iter().copied().rev().find(|&z| z < peer));
                    }
                    prop_assert!(committed.is_empty() && to == last || committed.contains(&to));
                    let expected: Vec<i64> = committed.iter().copied().filter(|&z| z > to).collect();
                    prop_assert_eq!(&proposals, &expected);
                }
                SyncPlan::Snap => {}
            }
        }
    }
}
