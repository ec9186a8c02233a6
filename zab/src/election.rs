//! Fast leader election (ZooKeeper Internals, "Leader Election"), as one LOOKING member sees it.
//!
//! A member that starts looking moves to a new round (`logical_clock`,
//! ZooKeeper's `logicalclock`), votes for itself and sends its vote to every
//! voter. A notification of the same round that carries a better vote
//! replaces the member's vote, which it then sends again; a notification of
//! a later round moves the member to that round. Once the votes received in
//! this round that equal its own form a quorum, the member waits
//! `finalize_wait_ms` for a better one and decides.
//!
//! A member that hears from FOLLOWING/LEADING members joins their leader
//! when a quorum of them agree and the leader itself says it is LEADING
//! (ZooKeeper's `outofelection` set and `checkLeader`).
//!
//! Observers run the same code without a vote of their own: they adopt the
//! voters' votes, nobody counts theirs, and they never lead.
//!
//! The core of the vote rule, `Vote::beats`, orders votes by (epoch, zxid,
//! sid), see its doc for how that reads ZooKeeper Internals, "Leader Election".

use std::collections::BTreeMap;

use super::message::Notification;
use super::types::{Config, ServerId, ServerState, Zxid};

/// A proposed leader and what makes it a good one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Vote {
    pub leader: ServerId,
    pub zxid: Zxid,
    /// The proposed leader's currentEpoch.
    pub peer_epoch: u32,
}

impl Vote {
    /// Whether a received vote should replace the current one.
    ///
    /// ZooKeeper Internals, "Leader Election": "If (voteZxid > myZxid) or (voteZxid = myZxid and voteId >
    /// mySid), keep the current vote. Otherwise, change my vote ... In
    /// short, the server that is most up to date wins, because it has the
    /// most recent zxid. ... If multiple servers have the most recent zxid,
    /// the one with the highest sid wins." So the vote with the larger zxid
    /// wins and the larger sid breaks a tie. As in ZooKeeper's
    /// `totalOrderPredicate` (and as the brief asks) the proposed leader's
    /// currentEpoch is compared first: a member that has acknowledged a
    /// newer leader's NEWLEADER is more up to date than any member with a
    /// larger zxid from an older epoch, whose extra txns were skipped.
    pub fn beats(&self, current: &Vote) -> bool {
        (self.peer_epoch, self.zxid, self.leader)
            > (current.peer_epoch, current.zxid, current.leader)
    }
}

/// The outcome of an election.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    pub vote: Vote,
    /// The round the decision was made in; the decided member answers
    /// LOOKING members with its vote and this round.
    pub election_epoch: u64,
}

#[derive(Clone, Debug)]
pub struct Election {
    me: ServerId,
    voter: bool,
    /// This member's own candidacy (meaningless for an observer).
    own: Vote,
    logical_clock: u64,
    /// `None` only for an observer that has not seen a vote yet.
    proposal: Option<Vote>,
    /// Votes of voters in this round (ZooKeeper's `recvset`), own included.
    recv: BTreeMap<ServerId, Vote>,
    /// Votes of voters that are FOLLOWING/LEADING, with their state and
    /// round (ZooKeeper's `outofelection`).
    out_of_election: BTreeMap<ServerId, (Vote, ServerState, u64)>,
    finalize_at_ms: Option<u64>,
    resend_at_ms: u64,
    resend_interval_ms: u64,
}

/// Notifications to send: (to, notification).
pub type Sends = Vec<(ServerId, Notification)>;

/// ZooKeeper's `totalOrderPredicate`: `vote` replaces `current` when it
/// beats it, and never when it is for a member of weight zero (one whose
/// `weight.N` is 0 is never elected).
fn better(cfg: &Config, vote: &Vote, current: &Vote) -> bool {
    cfg.weight(vote.leader) > 0 && vote.beats(current)
}

impl Election {
    /// Starts looking in the round after `previous_clock`, voting for
    /// `own` (a voter) or for nobody yet (an observer).
    pub fn start(
        cfg: &Config,
        own: Vote,
        previous_clock: u64,
        now_ms: u64,
        sends: &mut Sends,
    ) -> (Election, Option<Decision>) {
        let voter = cfg.is_voter(cfg.my_id);
        let mut e = Election {
            me: cfg.my_id,
            voter,
            own,
            logical_clock: previous_clock + 1,
            proposal: voter.then_some(own),
            recv: BTreeMap::new(),
            out_of_election: BTreeMap::new(),
            finalize_at_ms: None,
            resend_at_ms: now_ms + cfg.notification_interval_ms_min,
            resend_interval_ms: cfg.notification_interval_ms_min,
        };
        if voter {
            e.recv.insert(e.me, own);
        }
        e.send_to_all(cfg, sends);
        let decision = e.check_quorum(cfg, now_ms);
        (e, decision)
    }

    pub fn logical_clock(&self) -> u64 {
        self.logical_clock
    }

    #[cfg(test)]
    pub fn proposal(&self) -> Option<Vote> {
        self.proposal
    }

    /// The notification this member sends now.
    pub fn notification(&self) -> Notification {
        let vote = self.proposal.unwrap_or(Vote {
            leader: self.me,
            zxid: Zxid::ZERO,
            peer_epoch: 0,
        });
        Notification {
            leader: vote.leader,
            zxid: vote.zxid,
            peer_epoch: vote.peer_epoch,
            election_epoch: self.logical_clock,
            state: ServerState::Looking,
        }
    }

    fn send_to_all(&self, cfg: &Config, sends: &mut Sends) {
        let n = self.notification();
        for &to in cfg.voters.iter().filter(|&&id| id != self.me) {
            sends.push((to, n));
        }
    }

    /// A notification from `from`. Returns a decision when the election is
    /// over.
    pub fn on_notification(
        &mut self,
        cfg: &Config,
        from: ServerId,
        n: Notification,
        now_ms: u64,
        sends: &mut Sends,
    ) -> Option<Decision> {
        if !cfg.is_voter(from) {
            // An observer's vote never counts; a looking one learns ours.
            if n.state == ServerState::Looking && self.voter {
                sends.push((from, self.notification()));
            }
            return None;
        }
        let vote = Vote {
            leader: n.leader,
            zxid: n.zxid,
            peer_epoch: n.peer_epoch,
        };
        match n.state {
            ServerState::Looking => {
                self.on_looking(cfg, from, vote, n.election_epoch, now_ms, sends)
            }
            ServerState::Following | ServerState::Leading => self.on_decided(cfg, from, vote, n),
            ServerState::Observing => None,
        }
    }

    fn on_looking(
        &mut self,
        cfg: &Config,
        from: ServerId,
        vote: Vote,
        round: u64,
        now_ms: u64,
        sends: &mut Sends,
    ) -> Option<Decision> {
        if round > self.logical_clock {
            // A later round: join it, starting again from our own vote.
            self.logical_clock = round;
            self.recv.clear();
            let mine = if self.voter { Some(self.own) } else { None };
            self.proposal = Some(match mine {
                Some(own) if !better(cfg, &vote, &own) => own,
                _ => vote,
            });
            self.finalize_at_ms = None;
            self.send_to_all(cfg, sends);
        } else if round < self.logical_clock {
            // A laggard: tell it about the current round.
            if self.voter {
                sends.push((from, self.notification()));
            }
            return None;
        } else if self.proposal.is_none_or(|p| better(cfg, &vote, &p)) {
            self.proposal = Some(vote);
            self.finalize_at_ms = None;
            self.send_to_all(cfg, sends);
        }
        self.recv.insert(from, vote);
        if self.voter {
            let proposal = self.proposal.expect("a voter always has a proposal");
            self.recv.insert(self.me, proposal);
        }
        self.check_quorum(cfg, now_ms)
    }

    /// A quorum of this round's votes equals ours: start the finalize wait
    /// (or decide at once when there is none).
    fn check_quorum(&mut self, cfg: &Config, now_ms: u64) -> Option<Decision> {
        let proposal = self.proposal?;
        if !self.has_quorum_in_round(cfg, proposal) {
            self.finalize_at_ms = None;
            return None;
        }
        let at = *self
            .finalize_at_ms
            .get_or_insert(now_ms + cfg.finalize_wait_ms);
        if now_ms >= at {
            return self.decide(proposal);
        }
        None
    }

    fn has_quorum_in_round(&self, cfg: &Config, vote: Vote) -> bool {
        let same: Vec<ServerId> = self
            .recv
            .iter()
            .filter(|(_, v)| **v == vote)
            .map(|(id, _)| *id)
            .collect();
        cfg.contains_quorum(&same)
    }

    fn on_decided(
        &mut self,
        cfg: &Config,
        from: ServerId,
        vote: Vote,
        n: Notification,
    ) -> Option<Decision> {
        if n.election_epoch == self.logical_clock {
            self.recv.insert(from, vote);
            self.out_of_election
                .insert(from, (vote, n.state, n.election_epoch));
            if self.has_quorum_in_round(cfg, vote)
                && self.check_leader(vote.leader, n.election_epoch)
            {
                return self.decide_vote(vote);
            }
            // A leader of our round that we alone keep from a quorum:
            // join it. Members that came back to this round after the
            // others decided (their chosen leader declined) may each vote
            // for one that beats the leader, and would wait for it until
            // the leader gives up at initLimit. ZooKeeper waits there;
            // joining is safe because discovery, not the vote, guards the
            // history (a leader steps down for a follower ahead of it).
            let decided_and_me: Vec<ServerId> = self
                .out_of_election
                .iter()
                .filter(|(id, (v, _, round))| {
                    **id != self.me
                        && *round == n.election_epoch
                        && v.leader == vote.leader
                        && v.peer_epoch == vote.peer_epoch
                })
                .map(|(id, _)| *id)
                .chain([self.me])
                .collect();
            if self.voter
                && vote.leader != self.me
                && cfg.contains_quorum(&decided_and_me)
                && self.check_leader(vote.leader, n.election_epoch)
            {
                return self.decide_vote(vote);
            }
        }
        self.out_of_election
            .insert(from, (vote, n.state, n.election_epoch));
        let agreeing: Vec<ServerId> = self
            .out_of_election
            .iter()
            .filter(|(_, (v, _, _))| v.leader == vote.leader && v.peer_epoch == vote.peer_epoch)
            .map(|(id, _)| *id)
            .collect();
        if cfg.contains_quorum(&agreeing) && self.check_leader(vote.leader, n.election_epoch) {
            self.logical_clock = n.election_epoch;
            return self.decide_vote(vote);
        }
        None
    }

    /// ZooKeeper's `checkLeader`: never join a leader we have not heard
    /// say LEADING itself; a vote for ourselves needs our own round.
    fn check_leader(&self, leader: ServerId, round: u64) -> bool {
        if leader == self.me {
            return round == self.logical_clock;
        }
        matches!(
            self.out_of_election.get(&leader),
            Some((_, ServerState::Leading, _))
        )
    }

    fn decide_vote(&mut self, vote: Vote) -> Option<Decision> {
        self.proposal = Some(vote);
        self.decide(vote)
    }

    fn decide(&mut self, vote: Vote) -> Option<Decision> {
        if !self.voter && vote.leader == self.me {
            return None;
        }
        Some(Decision {
            vote,
            election_epoch: self.logical_clock,
        })
    }

    /// The quorum rule changed (the oracle answered): whether this round's
    /// votes make a quorum now.
    pub fn recheck(&mut self, cfg: &Config, now_ms: u64) -> Option<Decision> {
        self.check_quorum(cfg, now_ms)
    }

    /// Time passes: finalize a decision whose wait is over, resend our vote
    /// every interval (doubling each time up to the max). ZooKeeper resends
    /// only when nothing arrived for a while, which relies on its election
    /// connections being reliable; we do not assume that: with lossy
    /// notifications, hearing from one member must not keep us from
    /// re-sending to another that missed our vote.
    pub fn on_tick(&mut self, cfg: &Config, now_ms: u64, sends: &mut Sends) -> Option<Decision> {
        if let (Some(at), Some(proposal)) = (self.finalize_at_ms, self.proposal) {
            if now_ms >= at && self.has_quorum_in_round(cfg, proposal) {
                return self.decide(proposal);
            }
        }
        if now_ms >= self.resend_at_ms {
            self.send_to_all(cfg, sends);
            self.resend_interval_ms =
                (self.resend_interval_ms * 2).min(cfg.notification_interval_ms_max);
            self.resend_at_ms = now_ms + self.resend_interval_ms;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn z(e: u32, c: u32) -> Zxid {
        Zxid::new(e, c)
    }

    fn v(leader: ServerId, zxid: Zxid, peer_epoch: u32) -> Vote {
        Vote {
            leader,
            zxid,
            peer_epoch,
        }
    }

    fn cfg(me: ServerId) -> Config {
        let mut c = Config::new(me, vec![1, 2, 3], vec![4]);
        c.finalize_wait_ms = 200;
        c
    }

    fn looking(vote: Vote, round: u64) -> Notification {
        Notification {
            leader: vote.leader,
            zxid: vote.zxid,
            peer_epoch: vote.peer_epoch,
            election_epoch: round,
            state: ServerState::Looking,
        }
    }

    /// ZooKeeper Internals, "Leader Election": "If (voteZxid > myZxid) ... keep the current vote": the
    /// most recent zxid wins.
    #[test]
    fn the_most_recent_zxid_wins() {
        assert!(v(1, z(1, 9), 1).beats(&v(3, z(1, 8), 1)));
        assert!(!v(3, z(1, 8), 1).beats(&v(1, z(1, 9), 1)));
    }

    /// ZooKeeper Internals, "Leader Election": "(voteZxid = myZxid and voteId > mySid)": with equal
    /// zxids "the one with the highest sid wins".
    #[test]
    fn the_highest_sid_breaks_a_tie() {
        assert!(v(3, z(1, 8), 1).beats(&v(2, z(1, 8), 1)));
        assert!(!v(2, z(1, 8), 1).beats(&v(3, z(1, 8), 1)));
        assert!(
            !v(2, z(1, 8), 1).beats(&v(2, z(1, 8), 1)),
            "an equal vote changes nothing"
        );
    }

    /// The epoch comes first (ZooKeeper's totalOrderPredicate): a member
    /// that joined epoch 3 beats one with a larger zxid of epoch 2.
    #[test]
    fn the_later_epoch_wins_over_a_larger_zxid() {
        assert!(v(1, z(2, 4), 3).beats(&v(2, z(2, 9), 2)));
    }

    /// ZooKeeper Internals, "Leader Election": "Upon receiving a vote, a server changes its vote" when
    /// the received one is better, and sends it again; "Once a server
    /// receives the same vote from a quorum of servers, the server declares
    /// the leader elected" (after the finalize wait).
    #[test]
    fn adopts_a_better_vote_and_decides_on_a_quorum() {
        let c = cfg(1);
        let mut sends = Sends::new();
        let (mut e, d) = Election::start(&c, v(1, z(1, 5), 1), 0, 0, &mut sends);
        assert_eq!(d, None);
        assert_eq!(
            sends.iter().map(|s| s.0).collect::<Vec<_>>(),
            [2, 3],
            "votes to every other voter"
        );
        assert_eq!(sends[0].1.leader, 1);
        sends.clear();

        // Server 3 is more up to date: adopt its vote and tell everybody.
        let d = e.on_notification(&c, 3, looking(v(3, z(1, 7), 1), 1), 10, &mut sends);
        assert_eq!(d, None, "a quorum, but the finalize wait is not over");
        assert_eq!(e.proposal(), Some(v(3, z(1, 7), 1)));
        assert_eq!(sends.len(), 2);
        assert!(sends.iter().all(|s| s.1.leader == 3));
        sends.clear();

        // A worse vote changes nothing and sends nothing.
        assert_eq!(
            e.on_notification(&c, 2, looking(v(2, z(1, 6), 1), 1), 20, &mut sends),
            None
        );
        assert!(sends.is_empty());
        assert_eq!(e.on_tick(&c, 100, &mut sends), None);
        let d = e
            .on_tick(&c, 210, &mut sends)
            .expect("decided after the finalize wait");
        assert_eq!(d.vote.leader, 3);
        assert_eq!(d.election_epoch, 1);
    }

    /// A member that comes back to a round in which a leader was elected
    /// without it, voting for one that beats that leader, joins the leader
    /// once the leader and the members following it are a quorum short of
    /// only this member (here 2 LEADING itself in round 1; with 5 voters,
    /// 2 and its follower 3 plus us make 3).
    #[test]
    fn joins_a_leader_of_its_round_that_it_alone_keeps_from_a_quorum() {
        let mut c = Config::new(1, vec![1, 2, 3, 4, 5], vec![]);
        c.finalize_wait_ms = 0;
        let mut sends = Sends::new();
        // Our own vote (sid 1, a later zxid) beats the elected leader's.
        let (mut e, _) = Election::start(&c, v(1, z(1, 9), 1), 0, 0, &mut sends);
        let decided = |state| Notification {
            leader: 2,
            zxid: z(1, 8),
            peer_epoch: 1,
            election_epoch: 1,
            state,
        };
        assert_eq!(
            e.on_notification(&c, 2, decided(ServerState::Leading), 10, &mut sends),
            None,
            "the leader alone and us are not a quorum"
        );
        let d = e
            .on_notification(&c, 3, decided(ServerState::Following), 20, &mut sends)
            .expect("joins the leader");
        assert_eq!(d.vote.leader, 2);
        assert_eq!(d.election_epoch, 1);

        // Followers of another round do not count toward ours.
        let (mut e, _) = Election::start(&c, v(1, z(1, 9), 1), 1, 0, &mut sends);
        let mut old = decided(ServerState::Leading);
        old.election_epoch = 2;
        e.on_notification(&c, 2, old, 10, &mut sends);
        let mut old_follower = decided(ServerState::Following);
        old_follower.election_epoch = 1;
        assert_eq!(e.on_notification(&c, 3, old_follower, 20, &mut sends), None);
    }

    /// A better vote during the finalize wait restarts it (ZooKeeper puts
    /// the notification back and keeps looking).
    #[test]
    fn a_better_vote_during_the_finalize_wait_wins() {
        let c = cfg(1);
        let mut sends = Sends::new();
        let (mut e, _) = Election::start(&c, v(1, z(1, 5), 1), 0, 0, &mut sends);
        e.on_notification(&c, 2, looking(v(1, z(1, 5), 1), 1), 0, &mut sends);
        e.on_notification(&c, 3, looking(v(3, z(1, 5), 1), 1), 100, &mut sends);
        assert_eq!(
            e.on_tick(&c, 250, &mut sends),
            None,
            "the wait restarted at 100"
        );
        e.on_notification(&c, 2, looking(v(3, z(1, 5), 1), 1), 260, &mut sends);
        assert_eq!(
            e.on_tick(&c, 500, &mut sends).map(|d| d.vote.leader),
            Some(3)
        );
    }

    #[test]
    fn a_later_round_resets_the_votes() {
        let c = cfg(2);
        let mut sends = Sends::new();
        let (mut e, _) = Election::start(&c, v(2, z(1, 5), 1), 0, 0, &mut sends);
        sends.clear();
        // Round 4 with a worse vote: join the round, keep our own vote.
        e.on_notification(&c, 1, looking(v(1, z(1, 1), 1), 4), 0, &mut sends);
        assert_eq!(e.logical_clock(), 4);
        assert_eq!(e.proposal(), Some(v(2, z(1, 5), 1)));
        assert_eq!(sends.len(), 2);
        sends.clear();
        // An older round is answered with the current vote and ignored.
        e.on_notification(&c, 3, looking(v(3, z(9, 9), 9), 2), 0, &mut sends);
        assert_eq!(sends, vec![(3, e.notification())]);
        assert_eq!(e.proposal(), Some(v(2, z(1, 5), 1)));
    }

    /// ZooKeeper Internals, "Leader Election": "If a leader already exists, other servers inform the new
    /// one which server is the leader."
    #[test]
    fn joins_an_established_leader() {
        let c = cfg(1);
        let mut sends = Sends::new();
        let (mut e, _) = Election::start(&c, v(1, z(1, 1), 1), 0, 0, &mut sends);
        let established = v(3, z(4, 2), 4);
        let following = Notification {
            leader: 3,
            zxid: z(4, 2),
            peer_epoch: 4,
            election_epoch: 7,
            state: ServerState::Following,
        };
        // A quorum says FOLLOWING 3, but 3 itself has not said LEADING.
        assert_eq!(e.on_notification(&c, 2, following, 0, &mut sends), None);
        let leading = Notification {
            state: ServerState::Leading,
            ..following
        };
        let d = e
            .on_notification(&c, 3, leading, 0, &mut sends)
            .expect("joins 3");
        assert_eq!(d.vote, established);
        assert_eq!(d.election_epoch, 7);
    }

    #[test]
    fn observers_neither_count_nor_lead() {
        // A voter ignores an observer's vote but answers it.
        let c = cfg(1);
        let mut sends = Sends::new();
        let (mut e, _) = Election::start(&c, v(1, z(1, 1), 1), 0, 0, &mut sends);
        sends.clear();
        e.on_notification(&c, 4, looking(v(4, z(9, 9), 9), 1), 0, &mut sends);
        assert_eq!(e.proposal(), Some(v(1, z(1, 1), 1)));
        assert_eq!(sends, vec![(4, e.notification())]);

        // An observer adopts the voters' vote and decides on their quorum.
        let c = cfg(4);
        let (mut o, d) = Election::start(&c, v(4, z(1, 1), 1), 0, 0, &mut sends);
        assert_eq!((o.proposal(), d), (None, None));
        o.on_notification(&c, 2, looking(v(3, z(1, 2), 1), 1), 0, &mut sends);
        o.on_notification(&c, 3, looking(v(3, z(1, 2), 1), 1), 0, &mut sends);
        assert_eq!(
            o.on_tick(&c, 300, &mut sends).map(|d| d.vote.leader),
            Some(3)
        );
    }

    #[test]
    fn resends_with_backoff() {
        let mut c = cfg(1);
        c.notification_interval_ms_min = 100;
        c.notification_interval_ms_max = 250;
        let mut sends = Sends::new();
        let (mut e, _) = Election::start(&c, v(1, z(1, 1), 1), 0, 0, &mut sends);
        sends.clear();
        e.on_tick(&c, 99, &mut sends);
        assert!(sends.is_empty());
        e.on_tick(&c, 100, &mut sends);
        assert_eq!(sends.len(), 2);
        e.on_tick(&c, 250, &mut sends);
        assert_eq!(sends.len(), 2, "the interval doubled to 200");
        e.on_tick(&c, 300, &mut sends);
        assert_eq!(sends.len(), 4);
        e.on_tick(&c, 549, &mut sends);
        assert_eq!(sends.len(), 4, "capped at 250");
        e.on_tick(&c, 550, &mut sends);
        assert_eq!(sends.len(), 6);
    }
}
