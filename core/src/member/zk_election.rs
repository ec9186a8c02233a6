//! ZooKeeper 3.8's fast leader election (`FastLeaderElection`), as a
//! wazoo **participant** of a ZooKeeper ensemble takes part in it
//! (docs/MIGRATION.md, "Live migration", phase 2): it votes, counts votes
//! and decides whom to follow by ZooKeeper's rules, but never proposes
//! itself, since it cannot lead ZooKeeper followers yet.
//!
//! ZooKeeper's rules, as its `lookForLeader` and `WorkerReceiver` apply
//! them ("ZooKeeper Internals", "Leader Activation"):
//!
//! - Each round has a number (`logicalclock`). A LOOKING vote from a
//!   later round moves this member to that round and drops the votes
//!   counted so far; one from an earlier round is answered with this
//!   member's vote and otherwise ignored.
//! - A vote names a candidate by (epoch, last zxid, id); a member adopts
//!   a candidate that is larger, in that order, than the one it proposes,
//!   and tells every voter.
//! - When the voters that propose the same candidate as this member are a
//!   quorum, it waits `finalizeWait` (200 ms) for a better vote; if none
//!   comes it follows that candidate.
//! - Votes of members that already follow or lead (FOLLOWING, LEADING)
//!   decide at once when a quorum of them names the same leader and that
//!   leader says it leads: how a member joins an ensemble that runs.
//! - A member that is not looking answers a LOOKING vote with the vote
//!   it decided on.
//!
//! wazoo's one difference: its own candidacy. It proposes no one until it
//! hears of a ZooKeeper candidate at least as up to date as itself (epoch
//! and zxid; a tie goes to the candidate), and until then sends a vote
//! with zxid -1, which a looking ZooKeeper member ignores (its
//! `lookForLeader` skips such votes) and a settled one answers. Such a
//! vote cannot draw members of an earlier round into this member's, as a
//! ZooKeeper member's vote does, so a member that has proposed no one
//! joins the earlier round of a vote it may take instead. This
//! keeps ZooKeeper's guarantee that the elected leader holds every
//! committed txn: this member never votes for a candidate that lacks a
//! txn it holds, so where it alone holds the newest txns of a quorum the
//! ensemble waits (for a ZooKeeper member that holds them to come back)
//! rather than elect a leader without them.
//!
//! [`ZkElection::may_lead`] makes a member a candidate as every ZooKeeper
//! member is; the tests use such members as the model of ZooKeeper's, in
//! a simulated mixed ensemble (`a_mixed_ensemble_elects_one_leader_...`).
//!
//! Sans-io and deterministic: votes and time in, votes to send out.

use std::collections::BTreeMap;

use wazoo_zab::QuorumRule;
use wazoo_zkquorum::{Notification, PeerState};

/// `FastLeaderElection.finalizeWait`.
pub const FINALIZE_WAIT_MS: i64 = 200;
/// `FastLeaderElection.maxNotificationInterval`.
pub const MAX_NOTIFICATION_INTERVAL_MS: i64 = 60_000;

/// A candidate: ZooKeeper's `Vote` without its round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    pub leader: i64,
    pub zxid: i64,
    pub epoch: i64,
}

/// A vote counted in a round: what ZooKeeper's `Vote.equals` compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Counted {
    candidate: Candidate,
    round: i64,
    state: PeerState,
    /// The sender's notification version was above 0.
    versioned: bool,
}

impl Counted {
    fn of(n: &Notification) -> Counted {
        Counted {
            candidate: Candidate {
                leader: n.leader,
                zxid: n.zxid,
                epoch: n.peer_epoch(),
            },
            round: n.election_epoch,
            state: n.state,
            versioned: n.version.unwrap_or(0) > 0,
        }
    }

    /// `Vote.equals`: in full while either is looking; else the leader
    /// (and its epoch, unless one side is of a version that has none).
    fn same(&self, other: &Counted) -> bool {
        if self.state == PeerState::Looking || other.state == PeerState::Looking {
            self.candidate == other.candidate && self.round == other.round
        } else if self.versioned != other.versioned {
            self.candidate.leader == other.candidate.leader
        } else {
            self.candidate.leader == other.candidate.leader
                && self.candidate.epoch == other.candidate.epoch
        }
    }
}

/// What the election asks of the shell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ElectionOut {
    /// A notification for voter `to`.
    Send { to: u64, n: Notification },
}

/// Where the election stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    Looking,
    /// Decided: follow `leader` (the vote kept to answer others with).
    Following {
        leader: u64,
    },
    /// Decided: this member leads (only one that may lead, see
    /// [`ZkElection::may_lead`]).
    Leading,
}

/// One member's part in ZooKeeper's elections, round after round.
#[derive(Debug)]
pub struct ZkElection {
    my_id: u64,
    voters: Vec<u64>,
    rule: QuorumRule,
    /// This member's own (epoch, last zxid) for the round.
    mine: (i64, i64),
    round: i64,
    proposal: Option<Candidate>,
    /// LOOKING-round votes (`recvset`), this member's own among them.
    counted: BTreeMap<u64, Counted>,
    /// Votes of members out of the election (`outofelection`).
    settled: BTreeMap<u64, Counted>,
    /// A quorum agrees with the proposal: decide at this time unless a
    /// better vote comes first.
    finalize_at: Option<i64>,
    /// When to send the vote again, and the interval after that.
    resend_at: i64,
    interval: i64,
    standing: Standing,
    /// The vote decided on, to answer looking members with.
    end: Option<Notification>,
    out: Vec<ElectionOut>,
    /// This member is a candidate itself, as every ZooKeeper member is.
    may_lead: bool,
}

impl ZkElection {
    pub fn new(my_id: u64, voters: Vec<u64>, rule: QuorumRule) -> ZkElection {
        ZkElection {
            my_id,
            voters,
            rule,
            mine: (0, 0),
            round: 0,
            proposal: None,
            counted: BTreeMap::new(),
            settled: BTreeMap::new(),
            finalize_at: None,
            resend_at: 0,
            interval: FINALIZE_WAIT_MS,
            standing: Standing::Looking,
            end: None,
            out: Vec::new(),
            may_lead: false,
        }
    }

    /// Makes this member a candidate, as a ZooKeeper member is: it
    /// proposes itself at the start of a round and may be elected
    /// (`Standing::Leading`). Only for a member that can lead ZooKeeper
    /// followers; the tests use it as the model of a ZooKeeper member.
    pub fn may_lead(mut self) -> ZkElection {
        self.may_lead = true;
        self
    }

    /// This member as a candidate with its own (epoch, last zxid).
    fn itself(&self) -> Option<Candidate> {
        (self.may_lead && self.rule.weight(self.my_id) > 0).then_some(Candidate {
            leader: self.my_id as i64,
            zxid: self.mine.1,
            epoch: self.mine.0,
        })
    }

    /// The voters and how they make a quorum (a new membership).
    pub fn set_voters(&mut self, voters: Vec<u64>, rule: QuorumRule) {
        self.voters = voters;
        self.rule = rule;
    }

    pub fn voters(&self) -> &[u64] {
        &self.voters
    }

    pub fn standing(&self) -> Standing {
        self.standing
    }

    /// The round this member is in (`logicalclock`).
    pub fn round(&self) -> i64 {
        self.round
    }

    /// A new round (`lookForLeader`): this member is looking, with
    /// `epoch` (its currentEpoch) and `last_zxid` (the last it logged).
    pub fn start(&mut self, now_ms: i64, epoch: i64, last_zxid: i64) {
        self.mine = (epoch, last_zxid);
        self.round += 1;
        self.proposal = self.itself();
        self.counted.clear();
        self.settled.clear();
        self.finalize_at = None;
        self.standing = Standing::Looking;
        self.end = None;
        self.interval = FINALIZE_WAIT_MS;
        self.resend_at = now_ms + self.interval;
        self.send_all();
    }

    pub fn take_outputs(&mut self) -> Vec<ElectionOut> {
        std::mem::take(&mut self.out)
    }

    fn is_voter(&self, id: i64) -> bool {
        u64::try_from(id).is_ok_and(|id| self.voters.contains(&id))
    }

    /// The vote this member sends while looking: its proposal, or one
    /// ZooKeeper's looking members ignore (zxid -1) before it has one.
    fn looking_vote(&self) -> Notification {
        let c = self.proposal.unwrap_or(Candidate {
            leader: self.my_id as i64,
            zxid: -1,
            epoch: self.mine.0,
        });
        vote(PeerState::Looking, c, self.round)
    }

    /// What this member answers with: its decided vote, or its looking one.
    fn current_vote(&self) -> Notification {
        self.end.clone().unwrap_or_else(|| self.looking_vote())
    }

    fn send_all(&mut self) {
        let n = self.looking_vote();
        if let Some(c) = self.proposal {
            // ZooKeeper's members send their vote to themselves as well:
            // it counts.
            self.counted.insert(
                self.my_id,
                Counted {
                    candidate: c,
                    round: self.round,
                    state: PeerState::Looking,
                    versioned: false,
                },
            );
        }
        for &to in &self.voters {
            if to != self.my_id {
                self.out.push(ElectionOut::Send { to, n: n.clone() });
            }
        }
    }

    /// A candidate this member may vote for: a ZooKeeper member with a
    /// say in quorums, at least as up to date as this one.
    fn acceptable(&self, c: &Candidate) -> bool {
        let Ok(id) = u64::try_from(c.leader) else {
            return false;
        };
        (id != self.my_id || self.may_lead)
            && self.voters.contains(&id)
            && self.rule.weight(id) > 0
            && (c.epoch, c.zxid) >= self.mine
    }

    /// `totalOrderPredicate`: `new` beats `cur`.
    fn beats(&self, new: &Candidate, cur: &Candidate) -> bool {
        let id_weighs = u64::try_from(new.leader).is_ok_and(|id| self.rule.weight(id) > 0);
        id_weighs && (new.epoch, new.zxid, new.leader) > (cur.epoch, cur.zxid, cur.leader)
    }

    fn better(&self, c: &Candidate) -> bool {
        self.acceptable(c) && self.proposal.is_none_or(|p| self.beats(c, &p))
    }

    fn quorum_of(&self, votes: &BTreeMap<u64, Counted>, like: &Counted) -> bool {
        let ids: Vec<u64> = votes
            .iter()
            .filter(|(_, v)| v.same(like))
            .map(|(id, _)| *id)
            .collect();
        self.rule.contains_quorum(&self.voters, &ids)
    }

    /// `checkLeader`: the named leader says itself that it leads.
    fn leader_says_so(&self, votes: &BTreeMap<u64, Counted>, leader: i64) -> bool {
        u64::try_from(leader).is_ok_and(|l| {
            if l == self.my_id {
                // This member named as leader, by votes of its own round
                // (`checkLeader`'s other case).
                self.may_lead && votes.values().any(|v| v.round == self.round)
            } else {
                votes.get(&l).is_some_and(|v| v.state == PeerState::Leading)
            }
        })
    }

    /// A notification from `from`, at `now_ms`.
    pub fn on_notification(&mut self, now_ms: i64, from: u64, n: &Notification) {
        if from == self.my_id {
            // Not from a member: the shell connects no one under this id.
            return;
        }
        if !self.voters.contains(&from) {
            // A non-voter (an observer) is told this member's vote.
            let to = from;
            let n = self.current_vote();
            self.out.push(ElectionOut::Send { to, n });
            return;
        }
        if self.standing != Standing::Looking {
            if n.state == PeerState::Looking {
                let n = self.current_vote();
                self.out.push(ElectionOut::Send { to: from, n });
            }
            return;
        }
        if n.state == PeerState::Looking && n.election_epoch < self.round {
            let answer = self.looking_vote();
            self.out.push(ElectionOut::Send {
                to: from,
                n: answer,
            });
        }
        if !self.is_voter(n.leader) {
            return;
        }
        let v = Counted::of(n);
        match n.state {
            PeerState::Looking => self.on_looking(now_ms, from, v),
            PeerState::Following | PeerState::Leading => self.on_settled(from, v),
            PeerState::Observing => {}
        }
    }

    fn on_looking(&mut self, now_ms: i64, from: u64, v: Counted) {
        if v.candidate.zxid == -1 {
            return;
        }
        if self.finalize_at.is_some() {
            // Waiting to decide: only a better vote stops it, and any
            // other vote makes it wait `finalizeWait` again.
            if self.better(&v.candidate) {
                self.finalize_at = None;
            } else {
                self.finalize_at = Some(now_ms + FINALIZE_WAIT_MS);
                return;
            }
        }
        if v.round > self.round {
            self.round = v.round;
            self.counted.clear();
            // The better of the vote's candidate and this member.
            self.proposal = self.itself();
            if self.better(&v.candidate) {
                self.proposal = Some(v.candidate);
            }
            self.send_all();
        } else if v.round < self.round {
            if self.proposal.is_some() || !self.acceptable(&v.candidate) {
                return;
            }
            // This member has proposed no one in its round, so none of its
            // votes in it counted anywhere (looking members ignore zxid
            // -1), and its round cannot draw the lagging members up, as a
            // ZooKeeper member's vote would: it joins their round instead,
            // as if it had never left it. Without this, members that
            // could elect a leader wait in the earlier round for a vote
            // that never comes.
            self.round = v.round;
            self.counted.clear();
            self.proposal = Some(v.candidate);
            self.send_all();
        } else if self.better(&v.candidate) {
            self.proposal = Some(v.candidate);
            self.send_all();
        }
        self.counted.insert(from, v);
        if let Some(p) = self.proposal {
            let mine = Counted {
                candidate: p,
                round: self.round,
                state: PeerState::Looking,
                versioned: false,
            };
            if self.quorum_of(&self.counted, &mine) {
                self.finalize_at = Some(now_ms + FINALIZE_WAIT_MS);
            }
        }
    }

    fn on_settled(&mut self, from: u64, v: Counted) {
        if v.round == self.round {
            self.counted.insert(from, v);
            if self.quorum_of(&self.counted, &v)
                && self.leader_says_so(&self.counted, v.candidate.leader)
            {
                return self.decide(v.candidate, v.round);
            }
        }
        self.settled.insert(from, v);
        if self.quorum_of(&self.settled, &v)
            && self.leader_says_so(&self.settled, v.candidate.leader)
        {
            self.round = v.round;
            self.decide(v.candidate, v.round);
        }
    }

    fn decide(&mut self, c: Candidate, round: i64) {
        let leader = u64::try_from(c.leader).expect("a voter's id");
        let state = if leader == self.my_id {
            assert!(self.may_lead, "a member that may not lead decided to lead");
            self.standing = Standing::Leading;
            PeerState::Leading
        } else {
            self.standing = Standing::Following { leader };
            PeerState::Following
        };
        self.finalize_at = None;
        self.end = Some(vote(state, c, round));
    }

    /// Time passes: a quorum's proposal is decided once `finalizeWait`
    /// passed without a better vote; a looking member sends its vote
    /// again, less and less often (ZooKeeper doubles the wait up to
    /// `maxNotificationInterval`).
    pub fn on_tick(&mut self, now_ms: i64) {
        if self.standing != Standing::Looking {
            return;
        }
        if let Some(at) = self.finalize_at {
            if now_ms >= at {
                let p = self.proposal.expect("finalizing a proposal");
                return self.decide(p, self.round);
            }
        }
        if now_ms >= self.resend_at {
            self.send_all();
            self.interval = (self.interval * 2).min(MAX_NOTIFICATION_INTERVAL_MS);
            self.resend_at = now_ms + self.interval;
        }
    }
}

/// A vote as this member sends it: the 40-byte form, without the config
/// text, which ZooKeeper reads only to learn of a newer membership.
fn vote(state: PeerState, c: Candidate, round: i64) -> Notification {
    Notification {
        state,
        leader: c.leader,
        zxid: c.zxid,
        election_epoch: round,
        peer_epoch: Some(c.epoch),
        version: None,
        config: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const E: i64 = 1;

    fn z(n: i64) -> i64 {
        (E << 32) | n
    }

    fn looking(leader: i64, zxid: i64, round: i64) -> Notification {
        Notification::current(PeerState::Looking, leader, zxid, round, E, Vec::new())
    }

    fn settled(state: PeerState, leader: i64, round: i64) -> Notification {
        Notification::current(state, leader, z(5), round, E, Vec::new())
    }

    fn sent(e: &mut ZkElection) -> Vec<(u64, Notification)> {
        e.take_outputs()
            .into_iter()
            .map(|ElectionOut::Send { to, n }| (to, n))
            .collect()
    }

    /// Member 3 of voters 1, 2, 3 at zxid `z(mine)`.
    fn member(mine: i64) -> ZkElection {
        let mut e = ZkElection::new(3, vec![1, 2, 3], QuorumRule::Majority);
        e.start(0, E, z(mine));
        e
    }

    // ZooKeeper Internals, "Leader Activation": a member that holds no
    // candidate yet sends a vote ZooKeeper's looking members ignore (zxid
    // -1) to every other voter, and proposes no one.
    #[test]
    fn a_member_starts_by_asking_without_proposing_itself() {
        let mut e = member(5);
        let out = sent(&mut e);
        assert_eq!(out.len(), 2, "{out:?}");
        for (to, n) in out {
            assert!(to == 1 || to == 2);
            assert_eq!(
                (n.state, n.zxid, n.election_epoch),
                (PeerState::Looking, -1, 1)
            );
        }
    }

    // ZooKeeper Internals, "Leader Activation" (the leader is the voter
    // with the highest epoch, zxid and id that a quorum agrees on): this
    // member votes for the best candidate at least as up to date as
    // itself, a tie of zxids going to the candidate, decides after
    // finalizeWait once a quorum (with its own vote) agrees, and answers
    // a looking member with the vote it decided on.
    #[test]
    fn a_member_votes_for_the_best_candidate_as_up_to_date_as_itself() {
        let mut e = member(5);
        sent(&mut e);
        e.on_notification(10, 1, &looking(1, z(5), 1));
        let out = sent(&mut e);
        assert_eq!(out.len(), 2, "it tells both others: {out:?}");
        assert!(out.iter().all(|(_, n)| n.leader == 1 && n.zxid == z(5)));
        e.on_notification(20, 2, &looking(2, z(5), 1));
        let out = sent(&mut e);
        assert!(
            out.iter().all(|(_, n)| n.leader == 2),
            "2 beats 1 at the same zxid: {out:?}"
        );
        // 2's vote for itself and this member's make a quorum of three.
        e.on_tick(100);
        assert_eq!(e.standing(), Standing::Looking, "finalizeWait");
        e.on_tick(20 + FINALIZE_WAIT_MS);
        assert_eq!(e.standing(), Standing::Following { leader: 2 });
        e.on_notification(300, 1, &looking(1, z(5), 1));
        let out = sent(&mut e);
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].1.state, out[0].1.leader), (PeerState::Following, 2));
    }

    // The safety rule of wazoo's participation: a candidate without a txn
    // this member holds gets no vote from it, and no quorum forms with it.
    #[test]
    fn a_candidate_behind_this_member_gets_no_vote() {
        let mut e = member(7);
        sent(&mut e);
        e.on_notification(10, 2, &looking(2, z(5), 1));
        assert!(sent(&mut e).is_empty(), "no vote for a candidate behind");
        e.on_notification(20, 1, &looking(2, z(5), 1));
        e.on_tick(10_000);
        assert_eq!(e.standing(), Standing::Looking);
        assert!(
            sent(&mut e).iter().all(|(_, n)| n.zxid == -1),
            "still proposing no one"
        );
        // A later epoch is more up to date, whatever its zxid.
        e.on_notification(
            10_010,
            1,
            &Notification::current(PeerState::Looking, 1, (2 << 32) | 1, 1, 2, Vec::new()),
        );
        assert!(sent(&mut e).iter().all(|(_, n)| n.leader == 1));
    }

    // ZooKeeper Internals, "Leader Activation": a vote of a later round
    // moves the member to it and drops the votes counted; one of an
    // earlier round is answered with the member's vote and not counted.
    #[test]
    fn rounds_move_forward_and_earlier_ones_are_answered() {
        let mut e = member(5);
        sent(&mut e);
        e.on_notification(10, 1, &looking(1, z(5), 4));
        assert_eq!(e.round(), 4);
        let out = sent(&mut e);
        assert!(out
            .iter()
            .all(|(_, n)| n.election_epoch == 4 && n.leader == 1));
        e.on_notification(20, 2, &looking(2, z(9), 3));
        let out = sent(&mut e);
        assert_eq!(out.len(), 1, "answered: {out:?}");
        assert_eq!(
            (out[0].0, out[0].1.leader, out[0].1.election_epoch),
            (2, 1, 4)
        );
    }

    // ZooKeeper Internals, "Leader Activation": a member that joins an
    // ensemble that runs follows the leader a quorum of members follow
    // or lead under, once that leader says it leads.
    #[test]
    fn a_member_joins_the_leader_a_quorum_follows() {
        let mut e = member(0);
        sent(&mut e);
        e.on_notification(10, 1, &settled(PeerState::Following, 2, 7));
        assert_eq!(e.standing(), Standing::Looking, "one vote");
        e.on_notification(20, 2, &settled(PeerState::Leading, 2, 7));
        assert_eq!(e.standing(), Standing::Following { leader: 2 });
        assert_eq!(e.round(), 7);
        // A leader that does not say so is not followed.
        let mut e = member(0);
        e.on_notification(10, 1, &settled(PeerState::Following, 2, 7));
        e.on_notification(20, 2, &settled(PeerState::Following, 2, 7));
        assert_eq!(e.standing(), Standing::Looking);
    }

    // ZooKeeper Internals, "Leader Activation": a vote that comes while
    // the member waits to decide restarts the wait, and a better one ends
    // it; the member then follows the better candidate.
    #[test]
    fn a_better_vote_during_finalize_wait_wins() {
        let mut e = ZkElection::new(3, vec![1, 2, 3, 4, 5], QuorumRule::Majority);
        e.start(0, E, z(5));
        e.on_notification(0, 1, &looking(1, z(5), 1));
        e.on_notification(0, 2, &looking(1, z(5), 1));
        e.on_tick(FINALIZE_WAIT_MS - 1);
        e.on_notification(FINALIZE_WAIT_MS - 1, 4, &looking(4, z(6), 1));
        e.on_tick(FINALIZE_WAIT_MS + 10);
        assert_eq!(
            e.standing(),
            Standing::Looking,
            "4 is better: no decision for 1"
        );
        e.on_notification(FINALIZE_WAIT_MS + 20, 5, &looking(4, z(6), 1));
        e.on_tick(2 * FINALIZE_WAIT_MS + 20);
        assert_eq!(e.standing(), Standing::Following { leader: 4 });
    }

    // Administrator's Guide, "Cluster Options" (weight.x): a candidate of
    // weight 0 is never voted for.
    #[test]
    fn a_voter_of_weight_zero_is_no_candidate() {
        let h =
            wazoo_zab::Hierarchy::new(&[1, 2, 3], &[], &[(1, vec![1, 2, 3])], &[(1, 0)]).unwrap();
        let mut e = ZkElection::new(3, vec![1, 2, 3], QuorumRule::Hierarchical(h));
        e.start(0, E, z(0));
        sent(&mut e);
        e.on_notification(0, 1, &looking(1, z(9), 1));
        assert!(sent(&mut e).is_empty());
    }

    // Nothing a voter sends stops the election or makes it vote for
    // itself or a non-voter.
    proptest::proptest! {
        #[test]
        fn any_votes_leave_the_election_sound(
            steps in proptest::collection::vec(
                (0u64..6, 0i32..4, -1i64..6, -1i64..8, 0i64..5, 0i64..3, 0i64..400),
                0..80,
            )
        ) {
            let mut e = member(3);
            let mut now = 0;
            for (from, state, leader, zxid, round, epoch, dt) in steps {
                now += dt;
                let n = Notification::current(
                    PeerState::from_i32(state).unwrap(),
                    leader,
                    if zxid < 0 { -1 } else { (epoch << 32) | zxid },
                    round,
                    epoch,
                    Vec::new(),
                );
                e.on_notification(now, from, &n);
                e.on_tick(now);
                for (to, n) in sent(&mut e) {
                    proptest::prop_assert!(to != 3);
                    if n.state == PeerState::Looking && n.zxid != -1 {
                        proptest::prop_assert!(n.leader != 3 && (1..=2).contains(&n.leader));
                    }
                }
                if let Standing::Following { leader } = e.standing() {
                    proptest::prop_assert!(leader == 1 || leader == 2);
                }
            }
        }
    }

    /// A run of one election among `members` (id, may it lead, epoch,
    /// last zxid, start time in ms): notifications delivered after a
    /// delay the seed draws (1 to 300 ms), members ticked every 10 ms, for
    /// at most `for_ms`. Members that may lead stand for ZooKeeper's (the
    /// same rules: `ZkElection` is written from `FastLeaderElection`). A
    /// member that decided to follow one that does not lead 2 s later
    /// starts a new round, as one whose dial the elected member refuses
    /// does (a vote that came late can make a member decide on a
    /// candidate the others left), and so does a member that leads
    /// without a quorum following it 2 s later, as a ZooKeeper leader
    /// gives up after initLimit. Returns each member's standing and its
    /// (epoch, zxid).
    fn elect(
        members: &[(u64, bool, i64, i64, i64)],
        seed: u64,
        for_ms: i64,
    ) -> BTreeMap<u64, (Standing, (i64, i64))> {
        let voters: Vec<u64> = members.iter().map(|m| m.0).collect();
        let mut rng = seed | 1;
        let mut draw = |n: i64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            (rng % n as u64) as i64
        };
        let mut es: BTreeMap<u64, ZkElection> = members
            .iter()
            .map(|&(id, lead, ..)| {
                let e = ZkElection::new(id, voters.clone(), QuorumRule::Majority);
                (id, if lead { e.may_lead() } else { e })
            })
            .collect();
        let mut queue: Vec<(i64, u64, u64, Notification)> = Vec::new();
        let mut decided: BTreeMap<u64, i64> = BTreeMap::new();
        let mut now = 0;
        while now <= for_ms {
            let leading: Vec<u64> = es
                .iter()
                .filter(|(_, e)| e.standing() == Standing::Leading)
                .map(|(id, _)| *id)
                .collect();
            let followers = |l: u64, es: &BTreeMap<u64, ZkElection>| {
                es.values()
                    .filter(|e| e.standing() == Standing::Following { leader: l })
                    .count()
            };
            let alone: Vec<u64> = leading
                .iter()
                .copied()
                // With itself, no quorum.
                .filter(|&l| followers(l, &es) < members.len() / 2)
                .collect();
            for &(id, _, epoch, zxid, _) in members {
                let e = es.get_mut(&id).unwrap();
                match e.standing() {
                    Standing::Leading if alone.contains(&id) => {
                        let since = *decided.entry(id).or_insert(now);
                        if now - since >= 2_000 {
                            decided.remove(&id);
                            e.start(now, epoch, zxid);
                        }
                    }
                    Standing::Following { leader } if !leading.contains(&leader) => {
                        let since = *decided.entry(id).or_insert(now);
                        if now - since >= 2_000 {
                            decided.remove(&id);
                            e.start(now, epoch, zxid);
                        }
                    }
                    _ => {
                        decided.remove(&id);
                    }
                }
            }
            for &(id, _, epoch, zxid, at) in members {
                if at == now {
                    es.get_mut(&id).unwrap().start(now, epoch, zxid);
                }
            }
            let (due, later): (Vec<_>, Vec<_>) = queue.into_iter().partition(|m| m.0 <= now);
            queue = later;
            for (_, from, to, n) in due {
                // A member not started yet has no election port open.
                if members.iter().any(|m| m.0 == to && m.4 <= now) {
                    es.get_mut(&to).unwrap().on_notification(now, from, &n);
                }
            }
            for (&id, e) in es.iter_mut() {
                e.on_tick(now);
                for ElectionOut::Send { to, n } in e.take_outputs() {
                    queue.push((now + 1 + draw(300), id, to, n));
                }
            }
            now += 10;
        }
        members
            .iter()
            .map(|&(id, _, epoch, zxid, _)| (id, (es[&id].standing(), (epoch, zxid))))
            .collect()
    }

    fn arb_members() -> impl proptest::strategy::Strategy<Value = Vec<(u64, bool, i64, i64, i64)>> {
        use proptest::prelude::*;
        (3usize..=5)
            .prop_flat_map(|n| {
                prop::collection::vec((any::<bool>(), 1i64..3, 0i64..4, 0i64..50), n)
            })
            .prop_map(|v| {
                v.into_iter()
                    .enumerate()
                    .map(|(i, (lead, epoch, zxid, start))| {
                        (i as u64 + 1, lead, epoch, (epoch << 32) | zxid, start * 20)
                    })
                    .collect()
            })
    }

    // ZooKeeper Internals, "Leader Activation", with a model of ZooKeeper
    // members (`may_lead`) beside wazoo members that do not lead, votes
    // delayed and reordered, members starting at different times: at most
    // one leader is established (followed by a quorum), a member that may
    // lead; it holds every txn a quorum holds (its (epoch, zxid) is at
    // least that of a quorum), so none it lacks was committed. (A member
    // ahead of it may join it through the votes of those that settled,
    // as a ZooKeeper member does, and is cut back by TRUNC.) When a
    // member that may lead is the most up to date, every member decides.
    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        #[test]
        fn a_mixed_ensemble_elects_one_leader_that_holds_a_quorums_txns(
            members in arb_members(),
            seed in proptest::prelude::any::<u64>(),
        ) {
            let n = members.len();
            let out = elect(&members, seed, 30_000);
            // A leader is established once a quorum follows it.
            let leaders: Vec<u64> = out
                .iter()
                .filter(|(id, (st, _))| {
                    *st == Standing::Leading
                        && out.values().filter(|(f, _)| *f == Standing::Following { leader: **id }).count() + 1 > n / 2
                })
                .map(|(id, _)| *id)
                .collect();
            proptest::prop_assert!(leaders.len() <= 1, "two established leaders: {:?}", out);
            if let Some(&l) = leaders.first() {
                let lz = out[&l].1;
                let lead = members.iter().any(|m| m.0 == l && m.1);
                proptest::prop_assert!(lead, "elected a member that may not lead: {:?}", out);
                let behind = out.values().filter(|(_, z)| *z <= lz).count();
                proptest::prop_assert!(behind > n / 2, "the leader lacks a quorum's txns: {:?}", out);
            }
            let best = members.iter().map(|m| (m.2, m.3)).max().unwrap();
            let best_may_lead = members.iter().any(|m| m.1 && (m.2, m.3) == best);
            if best_may_lead {
                let l = leaders.first().copied();
                proptest::prop_assert!(l.is_some(), "no leader after 30 s: {:?}", out);
                proptest::prop_assert!(
                    out.iter().all(|(id, (st, _))| Some(*id) == l
                        || *st == Standing::Following { leader: l.unwrap() }),
                    "not everyone follows the leader after 30 s: {:?}", out
                );
            }
        }
    }
}
