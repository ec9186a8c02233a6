//! Which sets of voters are a quorum: ZooKeeper's quorum verifiers
//! (`QuorumMaj`, `QuorumHierarchical`), as one rule ZAB asks everywhere it
//! needs a quorum (election, discovery, sync, commit, the leader's lease).
//!
//! - A majority of the voters (zoo.cfg without `group.N`).
//! - Hierarchical (Administrator's Guide, "Cluster Options", `group.x` and
//!   `weight.x`): the voters are split into disjoint groups and each has a
//!   weight (1 unless given); a set is a quorum when, in more than half of
//!   the groups whose weight is not zero, its members hold more than half
//!   of the group's weight. A member of weight zero never makes a
//!   difference: its vote and its acks count for nothing, and it is never
//!   elected.
//!
//! - Oracle majority (Administrator's Guide, "Oracle Quorum", zoo.cfg
//!   `oraclePath`; ZooKeeper's `QuorumOracleMaj`): a majority, and in an
//!   ensemble of exactly two voters, also a set without the other voter
//!   while the oracle says 1. The host reads the oracle (a file) and feeds
//!   its answer in ([`crate::Peer::on_oracle`]); the leader does not ask it
//!   while its other voter is synced with it (ZooKeeper's `needOracle`).
//!
//! Any two quorums share a voter of non-zero weight (they share a group,
//! and each holds more than half of its weight), which is what election
//! and commit rely on.

use std::collections::BTreeMap;

use super::types::ServerId;

/// How the ensemble decides what a quorum is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum QuorumRule {
    /// More than half of the voters.
    #[default]
    Majority,
    /// Groups and weights.
    Hierarchical(Hierarchy),
    /// A majority, or, with two voters, the oracle's latest answer.
    Oracle {
        /// The oracle said 1 when last asked.
        says_yes: bool,
    },
}

/// `group.N` and `weight.N`, checked (see [`Hierarchy::new`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hierarchy {
    /// Each grouped member's group.
    group_of: BTreeMap<ServerId, u64>,
    /// Each grouped member's weight (1 when not given).
    weight: BTreeMap<ServerId, u64>,
    /// The sum of the weights of each group's members.
    group_weight: BTreeMap<u64, u64>,
    /// How many groups weigh more than zero.
    groups_counted: usize,
}

impl Hierarchy {
    /// Checks and builds a hierarchy: every voter is in exactly one group,
    /// every grouped member is a member, weights default to 1. `groups` is
    /// (group id, member ids); `weights` (member id, weight). The errors
    /// are ZooKeeper's (`QuorumHierarchical`), in words a start error can
    /// show; the ones ZooKeeper meets as a crash (a grouped id that is no
    /// member) are refused too.
    pub fn new(
        voters: &[ServerId],
        observers: &[ServerId],
        groups: &[(u64, Vec<ServerId>)],
        weights: &[(ServerId, u64)],
    ) -> Result<Hierarchy, String> {
        let mut group_of = BTreeMap::new();
        for (gid, members) in groups {
            if members.is_empty() {
                return Err(format!("group.{gid} lists no server"));
            }
            for &id in members {
                if group_of.insert(id, *gid).is_some() {
                    return Err(format!("server {id} is in more than one group"));
                }
                if !voters.contains(&id) && !observers.contains(&id) {
                    return Err(format!("group.{gid} lists {id}, which is no server.{id}"));
                }
            }
        }
        if let Some(id) = voters.iter().find(|id| !group_of.contains_key(id)) {
            return Err(format!(
                "server {id} is in no group (with group.N, every participant is in one)"
            ));
        }
        let mut weight: BTreeMap<ServerId, u64> = BTreeMap::new();
        for &(id, w) in weights {
            if weight.insert(id, w).is_some() {
                return Err(format!("weight.{id} is given twice"));
            }
        }
        let mut group_weight: BTreeMap<u64, u64> = BTreeMap::new();
        for (&id, &gid) in &group_of {
            let w = *weight.entry(id).or_insert(1);
            let total = group_weight.entry(gid).or_insert(0);
            *total = total
                .checked_add(w)
                .ok_or_else(|| format!("group.{gid}: its weights add up past 2^64"))?;
        }
        let groups_counted = group_weight.values().filter(|&&w| w > 0).count();
        if groups_counted == 0 {
            return Err("every group weighs zero: no set of servers is a quorum".into());
        }
        Ok(Hierarchy {
            group_of,
            weight,
            group_weight,
            groups_counted,
        })
    }

    /// A member's weight (ZooKeeper's `getWeight`): 0 for one in no group.
    pub fn weight(&self, id: ServerId) -> u64 {
        if self.group_of.contains_key(&id) {
            self.weight.get(&id).copied().unwrap_or(1)
        } else {
            0
        }
    }

    /// ZooKeeper's `QuorumHierarchical.containsQuorum`. `ids` may repeat.
    fn contains_quorum(&self, ids: impl IntoIterator<Item = ServerId>) -> bool {
        let mut held: BTreeMap<u64, u64> = BTreeMap::new();
        let mut seen: Vec<ServerId> = Vec::new();
        for id in ids {
            if seen.contains(&id) {
                continue;
            }
            seen.push(id);
            if let Some(gid) = self.group_of.get(&id) {
                *held.entry(*gid).or_insert(0) += self.weight(id);
            }
        }
        let groups_held = held
            .iter()
            .filter(|(gid, w)| **w > self.group_weight[*gid] / 2)
            .count();
        groups_held > self.groups_counted / 2
    }

    /// The `group.N` and `weight.N` lines as ZooKeeper prints them in
    /// `/zookeeper/config`: groups by id with their members in id order,
    /// then the weight of every grouped member, by id.
    pub fn render_lines(&self) -> Vec<String> {
        let mut groups: BTreeMap<u64, Vec<String>> = BTreeMap::new();
        for (id, gid) in &self.group_of {
            groups.entry(*gid).or_default().push(id.to_string());
        }
        let mut lines: Vec<String> = groups
            .iter()
            .map(|(gid, ids)| format!("group.{gid}={}", ids.join(":")))
            .collect();
        lines.extend(self.weight.iter().map(|(id, w)| format!("weight.{id}={w}")));
        lines
    }
}

impl QuorumRule {
    /// Whether the voters among `ids` are a quorum of `voters`. Ids that
    /// are not voters, and repeats, count for nothing.
    pub fn contains_quorum(&self, voters: &[ServerId], ids: &[ServerId]) -> bool {
        let of_voters = ids.iter().copied().filter(|id| voters.contains(id));
        match self {
            QuorumRule::Majority => majority(voters, ids),
            QuorumRule::Hierarchical(h) => h.contains_quorum(of_voters),
            QuorumRule::Oracle { says_yes } => {
                majority(voters, ids)
                    || (*says_yes && voters.len() == 2 && ids.iter().any(|id| voters.contains(id)))
            }
        }
    }

    /// The rule without its oracle: a leader whose other voter is synced
    /// with it decides by majority (ZooKeeper's `needOracle` is false).
    pub fn without_oracle(&self) -> &QuorumRule {
        match self {
            QuorumRule::Oracle { .. } => &QuorumRule::Majority,
            other => other,
        }
    }

    /// A voter's weight: 1 under a majority; under a hierarchy, its
    /// `weight.N` (zero keeps it out of every decision).
    pub fn weight(&self, id: ServerId) -> u64 {
        match self {
            QuorumRule::Majority | QuorumRule::Oracle { .. } => 1,
            QuorumRule::Hierarchical(h) => h.weight(id),
        }
    }

    /// The largest value `v` for which the voters whose value is at least
    /// `v` are a quorum (with `values` of (voter, value), a voter listed
    /// once): the zxid a quorum has logged, or the latest time by which a
    /// quorum heard the leader. `None` when all of them are no quorum.
    /// Quorums are upward closed, so adding voters from the highest value
    /// down finds it. Sorts `values`.
    pub fn quorum_value<T: Ord + Copy>(
        &self,
        voters: &[ServerId],
        values: &mut [(ServerId, T)],
        ids: &mut Vec<ServerId>,
    ) -> Option<T> {
        values.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        ids.clear();
        for &(id, v) in values.iter() {
            ids.push(id);
            if self.contains_quorum(voters, ids) {
                return Some(v);
            }
        }
        None
    }
}

/// More than half of `voters` among `ids` (repeats and others not counted).
fn majority(voters: &[ServerId], ids: &[ServerId]) -> bool {
    let mut n = 0;
    for (i, id) in ids.iter().enumerate() {
        if voters.contains(id) && !ids[..i].contains(id) {
            n += 1;
        }
    }
    n > voters.len() / 2
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn hier(voters: &[u64], groups: &[(u64, &[u64])], weights: &[(u64, u64)]) -> QuorumRule {
        let groups: Vec<(u64, Vec<u64>)> = groups.iter().map(|(g, m)| (*g, m.to_vec())).collect();
        QuorumRule::Hierarchical(Hierarchy::new(voters, &[], &groups, weights).unwrap())
    }

    /// Administrator's Guide, "Cluster Options" (`weight.x`): with
    /// `group.1=1:2:3` and `weight.3=0`, member 3 counts for nothing: 1
    /// and 2 together are the only quorum.
    #[test]
    fn a_zero_weight_member_counts_for_nothing() {
        let v = [1, 2, 3];
        let q = hier(&v, &[(1, &[1, 2, 3])], &[(3, 0)]);
        assert!(q.contains_quorum(&v, &[1, 2]));
        assert!(!q.contains_quorum(&v, &[1, 3]));
        assert!(!q.contains_quorum(&v, &[2, 3]));
        assert!(q.contains_quorum(&v, &[1, 2, 3]));
        assert_eq!(q.weight(3), 0);
        assert_eq!(q.weight(1), 1);
    }

    /// Two groups of weight 2 each: a quorum needs both groups (more than
    /// half of 2 groups), and in each group more than half of its weight.
    #[test]
    fn groups_need_a_majority_of_groups_each_held_by_weight() {
        let v = [1, 2, 3, 4, 5];
        // group 1: 1, 2, 3 (3 weighs 0); group 2: 4, 5.
        let q = hier(&v, &[(1, &[1, 2, 3]), (2, &[4, 5])], &[(3, 0)]);
        assert!(q.contains_quorum(&v, &[1, 2, 4, 5]));
        assert!(!q.contains_quorum(&v, &[1, 2, 3, 4]), "group 2 needs both");
        assert!(
            !q.contains_quorum(&v, &[1, 3, 4, 5]),
            "group 1 needs 1 and 2"
        );
        // Three groups: any two held make a quorum.
        let q = hier(&v, &[(1, &[1, 2]), (2, &[3, 4]), (3, &[5])], &[]);
        assert!(q.contains_quorum(&v, &[1, 2, 5]));
        assert!(q.contains_quorum(&v, &[3, 4, 5]));
        assert!(!q.contains_quorum(&v, &[1, 3, 5]));
    }

    /// A group whose members all weigh zero is not counted among the
    /// groups (ZooKeeper's `computeGroupWeight`).
    #[test]
    fn a_zero_weight_group_is_not_counted() {
        let v = [1, 2, 3];
        let q = hier(&v, &[(1, &[1, 2]), (2, &[3])], &[(3, 0)]);
        assert!(q.contains_quorum(&v, &[1, 2]));
        assert!(!q.contains_quorum(&v, &[1, 3]));
    }

    #[test]
    fn bad_hierarchies_are_refused_with_the_reason() {
        let v = [1, 2, 3];
        for (groups, weights, reason) in [
            (
                vec![(1, vec![1, 2]), (2, vec![2, 3])],
                vec![],
                "more than one group",
            ),
            (vec![(1, vec![1, 2])], vec![], "server 3 is in no group"),
            (vec![(1, vec![1, 2, 3, 9])], vec![], "no server.9"),
            (
                vec![(1, vec![1, 2, 3])],
                vec![(1, 0), (2, 0), (3, 0)],
                "weighs zero",
            ),
        ] {
            let e = Hierarchy::new(&v, &[], &groups, &weights).unwrap_err();
            assert!(e.contains(reason), "{groups:?} {weights:?}: {e}");
        }
    }

    /// Administrator's Guide, "Oracle Quorum": with two voters, one of
    /// them is a quorum while the oracle says 1; with more, the oracle
    /// changes nothing.
    #[test]
    fn the_oracle_decides_for_one_of_two_voters() {
        let yes = QuorumRule::Oracle { says_yes: true };
        let no = QuorumRule::Oracle { says_yes: false };
        assert!(yes.contains_quorum(&[1, 2], &[1]));
        assert!(!no.contains_quorum(&[1, 2], &[1]));
        assert!(no.contains_quorum(&[1, 2], &[1, 2]));
        assert!(!yes.contains_quorum(&[1, 2], &[]), "somebody must be in it");
        assert!(!yes.contains_quorum(&[1, 2, 3], &[1]));
        assert!(yes.contains_quorum(&[1, 2, 3], &[1, 3]));
        assert_eq!(yes.without_oracle(), &QuorumRule::Majority);
    }

    #[test]
    fn the_quorum_value_is_what_a_quorum_holds() {
        let v = [1, 2, 3, 4, 5];
        let mut ids = Vec::new();
        let mut vals = [(1, 9), (2, 7), (3, 8), (4, 3), (5, 1)];
        assert_eq!(
            QuorumRule::Majority.quorum_value(&v, &mut vals, &mut ids),
            Some(7)
        );
        // 3 weighs 0: after 1 (9) and 3 (8) comes 2 (7), and group 2 needs 4 and 5.
        let q = hier(&v, &[(1, &[1, 2, 3]), (2, &[4, 5])], &[(3, 0)]);
        assert_eq!(q.quorum_value(&v, &mut vals, &mut ids), Some(1));
        let mut few = [(1, 9)];
        assert_eq!(
            QuorumRule::Majority.quorum_value(&v, &mut few, &mut ids),
            None
        );
    }

    #[test]
    fn groups_and_weights_render_as_zookeeper_prints_them() {
        let v = [1, 2, 3];
        let QuorumRule::Hierarchical(h) = hier(&v, &[(2, &[3]), (1, &[2, 1])], &[(3, 0)]) else {
            unreachable!()
        };
        assert_eq!(
            h.render_lines(),
            [
                "group.1=1:2",
                "group.2=3",
                "weight.1=1",
                "weight.2=1",
                "weight.3=0"
            ]
        );
    }

    fn subset(n: u64) -> impl Strategy<Value = Vec<u64>> {
        proptest::collection::vec(1..=n + 1, 0..(n as usize + 3))
    }

    proptest! {
        /// The majority rule is a count of distinct voters.
        #[test]
        fn majority_agrees_with_counting(n in 1u64..9, ids in subset(9)) {
            let voters: Vec<u64> = (1..=n).collect();
            let mut distinct: Vec<u64> = ids.iter().copied().filter(|i| voters.contains(i)).collect();
            distinct.sort_unstable();
            distinct.dedup();
            prop_assert_eq!(
                QuorumRule::Majority.contains_quorum(&voters, &ids),
                2 * distinct.len() > voters.len()
            );
        }

        /// One group with every weight 1 is a majority.
        #[test]
        fn one_group_of_weight_one_is_a_majority(n in 1u64..9, ids in subset(9)) {
            let voters: Vec<u64> = (1..=n).collect();
            let h = Hierarchy::new(&voters, &[], &[(1, voters.clone())], &[]).unwrap();
            let q = QuorumRule::Hierarchical(h);
            prop_assert_eq!(
                q.contains_quorum(&voters, &ids),
                QuorumRule::Majority.contains_quorum(&voters, &ids)
            );
        }

        /// Any two quorums of a hierarchy share a voter of non-zero weight.
        #[test]
        fn hierarchical_quorums_intersect(
            weights in proptest::collection::vec(0u64..3, 6),
            split in 1usize..6,
            a in subset(6),
            b in subset(6),
        ) {
            let voters: Vec<u64> = (1..=6).collect();
            let groups = vec![(1, voters[..split].to_vec()), (2, voters[split..].to_vec())];
            let groups: Vec<(u64, Vec<u64>)> = groups.into_iter().filter(|g| !g.1.is_empty()).collect();
            let w: Vec<(u64, u64)> = voters.iter().map(|&v| (v, weights[v as usize - 1])).collect();
            let Ok(h) = Hierarchy::new(&voters, &[], &groups, &w) else { return Ok(()) };
            let q = QuorumRule::Hierarchical(h);
            if q.contains_quorum(&voters, &a) && q.contains_quorum(&voters, &b) {
                prop_assert!(a.iter().any(|x| b.contains(x) && q.weight(*x) > 0));
            }
        }
    }
}
