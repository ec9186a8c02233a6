//! The leader's side of ZAB (ZooKeeper Internals, "Atomic Broadcast"): discovery, synchronization and
//! broadcast.
//!
//! 1. Discovery: once FOLLOWERINFO from a quorum (itself included) is in,
//!    the new epoch is one more than every acceptedEpoch it heard; it is
//!    stored as our own acceptedEpoch and sent in LEADERINFO. A quorum of
//!    ACKEPOCH confirms it (a member acknowledges an epoch only once, so no
//!    other leader can be confirmed for it); an ACKEPOCH showing a member
//!    ahead of us (newer currentEpoch, or same and a larger zxid) makes us
//!    step down, as ZooKeeper does: our history must hold every committed
//!    txn.
//! 2. Synchronization: currentEpoch := epoch (once our own log is
//!    durable: currentEpoch vouches for it); each learner gets DIFF, TRUNC
//!    or SNAP (see `History::plan_sync`), the txns it misses and NEWLEADER.
//!    When a quorum (us once our log is durable) acknowledged NEWLEADER,
//!    the whole initial history is committed and the epoch is established.
//! 3. Broadcast: proposals are numbered `epoch:1, epoch:2...`, logged and
//!    sent down every follower's FIFO link; cumulative ACKs; a txn is
//!    committed once a quorum logged it, and COMMITs are cumulative, so in
//!    zxid order. Observers get INFORM of committed txns.
//!
//! Learners that arrive late go through the same steps against the
//! established epoch. Heartbeats: the leader pings every
//! `Config::heartbeat_ms`; a learner silent for syncLimit ticks (initLimit
//! while syncing) is dropped; without a quorum of live synced followers the
//! leader steps down. The lease: an established leader serves only while a
//! quorum (itself included) has heard from it within `Config::lease_ms`,
//! which it learns from the answers to its PINGs and NEWLEADER; once that
//! runs out it steps down (`leader_check_lease`, run before every input).
//!
//! Step 3, broadcast (proposals, ACKs, commits, `sync`s), is in
//! `leader/broadcast.rs`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::history::{SyncKind, SyncPlan};
use super::message::Message;
use super::peer::{Output, Peer, Role, RoleChange};
use super::quorum::QuorumRule;
use super::types::{Config, ServerId, Zxid};

mod broadcast;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Phase {
    /// Waiting for FOLLOWERINFO from a quorum.
    Discovery,
    /// LEADERINFO sent; waiting for ACKEPOCH from a quorum.
    EpochProposed,
    /// Epoch confirmed, learners syncing; waiting for a quorum of
    /// NEWLEADER acknowledgements.
    Syncing,
    /// Established.
    Broadcast,
}

/// One learner's session with us.
#[derive(Clone, Debug)]
pub(super) struct LearnerSession {
    /// Distinguishes this session from the learner's earlier ones.
    pub session: u64,
    pub observer: bool,
    pub accepted_epoch: u32,
    /// From FOLLOWERINFO, then from ACKEPOCH.
    pub last_zxid: Zxid,
    pub leader_info_sent: bool,
    pub epoch_acked: bool,
    /// Set once the sync went out: everything after it is forwarded.
    pub synced_to: Option<Zxid>,
    pub new_leader_acked: bool,
    /// Cumulative: every proposal up to here is durable at the follower.
    pub acked: Zxid,
    pub last_heard_ms: u64,
    /// When we sent NEWLEADER (its ACK shows the learner heard us then).
    pub new_leader_sent_ms: u64,
    /// When we sent each PING the learner has not answered yet, oldest
    /// first. A learner answers every PING with one PING, in order, on the
    /// FIFO link, so its next PING answers the front one.
    pub pings_unanswered: VecDeque<u64>,
    /// The send time of the latest of our messages the learner is known to
    /// have received (NEWLEADER, an answered PING): it heard us then, so it
    /// keeps its promise (`Config::suspect_ms`) until after our lease from
    /// that time ends.
    pub heard_us_at_ms: Option<u64>,
}

/// Bound on a learner's unanswered PINGs. A learner answers each at once;
/// one that lets this many pile up while still talking is broken, and is
/// dropped.
const PINGS_UNANSWERED_MAX: usize = 1024;

/// A `sync` waiting for the commit point to reach `target`.
#[derive(Clone, Copy, Debug)]
pub(super) struct PendingSync {
    pub target: Zxid,
    /// The learner (id, session) that asked, or `None` for ourselves.
    pub asker: Option<(ServerId, u64)>,
    pub token: u64,
}

pub(super) struct Leading {
    pub phase: Phase,
    /// The epoch we lead; zero until chosen in discovery.
    pub epoch: u32,
    pub started_ms: u64,
    pub last_ping_ms: u64,
    pub learners: BTreeMap<ServerId, LearnerSession>,
    /// Voters (us included) that acknowledged the epoch. Acknowledgements
    /// are promises stored durably by their senders, so they count even if
    /// the sender's link drops later.
    pub epoch_acks: BTreeSet<ServerId>,
    /// Voters (not us) that acknowledged NEWLEADER.
    pub new_leader_acks: BTreeSet<ServerId>,
    /// The last zxid of the initial history, the one we bring to the epoch.
    pub history_end: Zxid,
    pub next_counter: u32,
    /// Open `sync`s, oldest first (their targets ascend).
    pub pending_syncs: VecDeque<PendingSync>,
    pub sessions_started: u64,
    /// Last, smallest and largest proposal of this epoch, for `mntr`.
    pub proposal_sizes: super::peer::LeaderReport,
}

impl Leading {
    pub fn is_established(&self) -> bool {
        self.phase == Phase::Broadcast
    }

    pub fn learner_ids(&self) -> Vec<ServerId> {
        self.learners.keys().copied().collect()
    }

    pub fn validate(&self, peer: &Peer) {
        let me = peer.cfg.my_id;
        if self.phase >= Phase::EpochProposed {
            assert_eq!(
                peer.accepted_epoch, self.epoch,
                "leader {me}: acceptedEpoch is not its epoch"
            );
        }
        if self.phase >= Phase::Syncing {
            assert_eq!(
                peer.current_epoch, self.epoch,
                "leader {me}: currentEpoch is not its epoch"
            );
        }
        if self.phase == Phase::Broadcast {
            assert!(
                peer.history.committed() >= self.history_end,
                "leader {me}: established without committing its initial history"
            );
        }
        assert!(
            self.history_end.epoch() < self.epoch || self.epoch == 0,
            "leader {me}: history from its own epoch"
        );
        let last = peer.history.last();
        for (id, l) in &self.learners {
            assert!(
                l.acked <= last,
                "leader {me}: learner {id} acked {:?} beyond {last:?}",
                l.acked
            );
        }
    }
}

impl Peer {
    fn leading(&mut self) -> &mut Leading {
        match &mut self.role {
            Role::Leading(l) => l,
            _ => unreachable!("leader code runs while leading"),
        }
    }

    fn leading_ref(&self) -> &Leading {
        match &self.role {
            Role::Leading(l) => l,
            _ => unreachable!("leader code runs while leading"),
        }
    }

    pub(super) fn become_leader(&mut self) {
        let now_ms = self.mono_ms;
        self.role = Role::Leading(Box::new(Leading {
            phase: Phase::Discovery,
            epoch: 0,
            started_ms: now_ms,
            last_ping_ms: now_ms,
            learners: BTreeMap::new(),
            epoch_acks: BTreeSet::new(),
            new_leader_acks: BTreeSet::new(),
            history_end: self.history.last(),
            next_counter: 1,
            pending_syncs: VecDeque::new(),
            sessions_started: 0,
            proposal_sizes: Default::default(),
        }));
        let pending = std::mem::take(&mut self.pending_infos);
        for (from, info) in pending {
            self.on_follower_info(from, info.accepted_epoch, info.last_zxid, info.observer);
        }
        self.check_discovery();
    }

    pub(super) fn leader_on_message(&mut self, from: ServerId, msg: Message) {
        let now_ms = self.mono_ms;
        if let Some(l) = self.leading().learners.get_mut(&from) {
            l.last_heard_ms = now_ms;
        }
        match msg {
            Message::FollowerInfo {
                accepted_epoch,
                last_zxid,
                observer,
            } => {
                if self.leading().learners.contains_key(&from) {
                    // A new session on a link we think is live: the shell
                    // should have reported the old one closed first.
                    self.stats.unexpected_messages += 1;
                    self.stats.last_unexpected = Some(format!("second FOLLOWERINFO from {from}"));
                }
                self.on_follower_info(from, accepted_epoch, last_zxid, observer);
            }
            Message::AckEpoch {
                epoch,
                current_epoch,
                last_zxid,
            } => self.on_ack_epoch(from, epoch, current_epoch, last_zxid),
            Message::AckNewLeader { epoch } => self.on_ack_new_leader(from, epoch),
            Message::Ack { zxid } => self.on_ack(from, zxid),
            Message::SyncRequest { token } => self.on_sync_request(from, token),
            Message::Ping => {
                let Some(s) = self.leading().learners.get_mut(&from) else {
                    self.unexpected(from, &msg);
                    return;
                };
                match s.pings_unanswered.pop_front() {
                    Some(sent_ms) => {
                        s.heard_us_at_ms =
                            Some(s.heard_us_at_ms.map_or(sent_ms, |h| h.max(sent_ms)))
                    }
                    None => self.learner_violation(from, "PING that answers no PING".into()),
                }
            }
            _ => {
                self.leading().learners.remove(&from);
                self.unexpected(from, &msg);
            }
        }
    }

    fn on_follower_info(
        &mut self,
        from: ServerId,
        accepted_epoch: u32,
        last_zxid: Zxid,
        observer: bool,
    ) {
        if observer != self.cfg.is_observer(from) || accepted_epoch == u32::MAX {
            // A misconfigured member: refuse it.
            self.leading().learners.remove(&from);
            self.stats.learners_refused += 1;
            self.outputs.push(Output::CloseLink { peer: from });
            return;
        }
        let now_ms = self.mono_ms;
        let l = self.leading();
        l.sessions_started += 1;
        let session = l.sessions_started;
        l.learners.insert(
            from,
            LearnerSession {
                session,
                observer,
                accepted_epoch,
                last_zxid,
                leader_info_sent: false,
                epoch_acked: false,
                synced_to: None,
                new_leader_acked: false,
                acked: Zxid::ZERO,
                last_heard_ms: now_ms,
                new_leader_sent_ms: now_ms,
                pings_unanswered: VecDeque::new(),
                heard_us_at_ms: None,
            },
        );
        let (phase, epoch) = (l.phase, l.epoch);
        match phase {
            Phase::Discovery => self.check_discovery(),
            Phase::Syncing | Phase::Broadcast if !observer && accepted_epoch > epoch => {
                // This voter promised a later epoch (to a leader attempt
                // that failed): it can never join ours, and ZooKeeper would
                // leave it out for as long as we lead. Start a new epoch
                // later than every promise instead.
                self.stats.stepped_down_for_later_epoch += 1;
                self.start_looking_after(None);
            }
            Phase::EpochProposed | Phase::Syncing | Phase::Broadcast => self.send_leader_info(from),
        }
    }

    fn send_leader_info(&mut self, to: ServerId) {
        let l = self.leading();
        let confirmed = l.phase >= Phase::Syncing;
        let epoch = l.epoch;
        if let Some(s) = l.learners.get_mut(&to) {
            s.leader_info_sent = true;
        }
        self.send(to, Message::LeaderInfo { epoch, confirmed });
    }

    /// Discovery: a quorum of FOLLOWERINFO (us included) fixes the epoch.
    fn check_discovery(&mut self) {
        let me = self.cfg.my_id;
        let l = self.leading_ref();
        if l.phase != Phase::Discovery {
            return;
        }
        let voters_in: Vec<ServerId> = l.learners.keys().copied().chain([me]).collect();
        if !self.cfg.contains_quorum(&voters_in) {
            return;
        }
        let highest = l
            .learners
            .values()
            .map(|s| s.accepted_epoch)
            .fold(self.accepted_epoch, u32::max);
        let Some(epoch) = highest.checked_add(1) else {
            self.violation("no epoch left to propose".into());
            return;
        };
        self.accepted_epoch = epoch;
        self.outputs.push(Output::SetAcceptedEpoch { epoch });
        let l = self.leading();
        l.epoch = epoch;
        l.phase = Phase::EpochProposed;
        l.epoch_acks.insert(me);
        for id in self.leading_ref().learner_ids() {
            self.send_leader_info(id);
        }
        self.check_epoch_quorum();
    }

    fn on_ack_epoch(&mut self, from: ServerId, epoch: u32, current_epoch: u32, last_zxid: Zxid) {
        let (my_epoch, my_current, my_last) = (
            self.leading_ref().epoch,
            self.current_epoch,
            self.history.last(),
        );
        let phase = self.leading_ref().phase;
        let voter = self.cfg.is_voter(from);
        let Some(s) = self.leading().learners.get_mut(&from) else {
            self.unexpected(
                from,
                &Message::AckEpoch {
                    epoch,
                    current_epoch,
                    last_zxid,
                },
            );
            return;
        };
        if !s.leader_info_sent || s.epoch_acked || epoch != my_epoch {
            self.learner_violation(
                from,
                format!("ACKEPOCH {epoch} out of turn (epoch {my_epoch})"),
            );
            return;
        }
        s.epoch_acked = true;
        s.last_zxid = last_zxid;
        if phase == Phase::EpochProposed {
            if voter
                && self.cfg.weight(from) > 0
                && (current_epoch, last_zxid) > (my_current, my_last)
            {
                // ZooKeeper: "Follower is ahead of the leader". Our history
                // might miss committed txns: let the election run again.
                // Not for a member of weight zero: no quorum needs it, so
                // what only it holds was never committed (and it can never
                // be elected, so stepping down for it would never end).
                self.start_looking_after(None);
                return;
            }
            if voter {
                self.leading().epoch_acks.insert(from);
            }
            self.check_epoch_quorum();
        } else {
            self.sync_learner(from);
        }
    }

    /// A quorum acknowledged the epoch: it is ours. Sync everybody who
    /// acknowledged it.
    ///
    /// currentEpoch := epoch only once our own history is durable: a
    /// currentEpoch on disk vouches for the log under it (see
    /// `maybe_ack_new_leader` on the learner side).
    fn check_epoch_quorum(&mut self) {
        let durable = self.history.durable();
        let l = self.leading_ref();
        if l.phase != Phase::EpochProposed || durable < l.history_end {
            return;
        }
        let acks: Vec<ServerId> = l.epoch_acks.iter().copied().collect();
        if !self.cfg.contains_quorum(&acks) {
            return;
        }
        if self.mono_ms < self.promise_until_ms {
            // Our own acknowledgement of the epoch waits, like a learner's
            // ACKEPOCH, until the promise to the leader we followed is
            // kept (`Peer::promise_until_ms`); a tick tries again.
            return;
        }
        let epoch = l.epoch;
        self.current_epoch = epoch;
        self.outputs.push(Output::SetCurrentEpoch { epoch });
        let l = self.leading();
        l.phase = Phase::Syncing;
        let ready: Vec<ServerId> = l
            .learners
            .iter()
            .filter(|(_, s)| s.epoch_acked)
            .map(|(id, _)| *id)
            .collect();
        for id in ready {
            self.sync_learner(id);
        }
        self.check_new_leader_quorum();
    }

    /// Sends `to`, whose last zxid is `peer_last`, the DIFF, TRUNC or SNAP
    /// that starts its sync from our history (the leader's, or a learner
    /// master's), and counts it; the txns after `plan.start` follow.
    pub(super) fn start_sync(&mut self, to: ServerId, peer_last: Zxid) -> SyncPlan {
        let plan = self.history.plan_sync(peer_last);
        match plan.kind {
            SyncKind::Diff => {
                self.stats.syncs_diff += 1;
                self.send(to, Message::Diff);
            }
            SyncKind::Trunc(zxid) => {
                self.stats.syncs_trunc += 1;
                self.send(to, Message::Trunc { zxid });
            }
            SyncKind::Snap => {
                self.stats.syncs_snap += 1;
                self.outputs.push(Output::SendSnapshot {
                    to,
                    zxid: plan.start,
                });
            }
        }
        plan
    }

    /// DIFF, TRUNC or SNAP, the missing txns, the commit point, NEWLEADER.
    fn sync_learner(&mut self, to: ServerId) {
        let (observer, peer_last) = {
            let s = &self.leading_ref().learners[&to];
            (s.observer, s.last_zxid)
        };
        let plan = self.start_sync(to, peer_last);
        // Followers get the uncommitted tail too (it is part of the history
        // they must hold); observers only what is committed.
        let committed = self.history.committed();
        let upto = if observer {
            committed
        } else {
            self.history.last()
        };
        for (zxid, payload) in self.history.range(plan.start, upto) {
            self.send(to, Message::Proposal { zxid, payload });
        }
        // The learner may hold txns it does not know are committed (its
        // restored log, or what it logged before losing the old leader):
        // always tell it the commit point.
        if committed > Zxid::ZERO {
            self.send(to, Message::Commit { zxid: committed });
        }
        let synced_to = plan.start.max(upto);
        let now_ms = self.mono_ms;
        let l = self.leading();
        let epoch = l.epoch;
        let s = l.learners.get_mut(&to).expect("syncing a known learner");
        s.synced_to = Some(synced_to);
        s.new_leader_sent_ms = now_ms;
        self.send(
            to,
            Message::NewLeader {
                epoch,
                zxid: synced_to,
            },
        );
    }

    fn on_ack_new_leader(&mut self, from: ServerId, epoch: u32) {
        let my_epoch = self.leading_ref().epoch;
        let voter = self.cfg.is_voter(from);
        let Some(s) = self.leading().learners.get_mut(&from) else {
            self.unexpected(from, &Message::AckNewLeader { epoch });
            return;
        };
        let Some(synced_to) = s.synced_to else {
            self.learner_violation(from, "ACK(NEWLEADER) before its sync".into());
            return;
        };
        if epoch != my_epoch || s.new_leader_acked {
            self.learner_violation(from, format!("ACK(NEWLEADER) {epoch} out of turn"));
            return;
        }
        s.new_leader_acked = true;
        let sent_ms = s.new_leader_sent_ms;
        s.heard_us_at_ms = Some(s.heard_us_at_ms.map_or(sent_ms, |h| h.max(sent_ms)));
        if !s.observer {
            s.acked = s.acked.max(synced_to);
        }
        let l = self.leading();
        if voter {
            l.new_leader_acks.insert(from);
        }
        match l.phase {
            Phase::Syncing => self.check_new_leader_quorum(),
            Phase::Broadcast => {
                self.send(from, Message::UpToDate);
                self.try_commit();
            }
            Phase::Discovery | Phase::EpochProposed => {
                unreachable!("synced before the epoch was confirmed")
            }
        }
    }

    /// A quorum holds the initial history durably: establish the epoch.
    fn check_new_leader_quorum(&mut self) {
        let durable = self.history.durable();
        let l = self.leading_ref();
        if l.phase != Phase::Syncing {
            return;
        }
        let me = (durable >= l.history_end).then_some(self.cfg.my_id);
        let acks: Vec<ServerId> = l.new_leader_acks.iter().copied().chain(me).collect();
        if !self.cfg.contains_quorum(&acks) {
            return;
        }
        let (epoch, history_end) = (l.epoch, l.history_end);
        self.leading().phase = Phase::Broadcast;
        self.stats.epochs_established += 1;
        self.leader_commit_to(history_end);
        self.vote_for_established(self.cfg.my_id, epoch);
        self.outputs
            .push(Output::Role(RoleChange::Leading { epoch }));
        let acked: Vec<ServerId> = self
            .leading_ref()
            .learners
            .iter()
            .filter(|(_, s)| s.new_leader_acked)
            .map(|(id, _)| *id)
            .collect();
        for id in acked {
            self.send(id, Message::UpToDate);
        }
        self.try_commit();
    }

    /// A learner broke the protocol: record it and drop that session only.
    fn learner_violation(&mut self, from: ServerId, what: String) {
        self.stats.protocol_violations += 1;
        self.stats.last_violation = Some(format!(
            "leader {} about learner {from}: {what}",
            self.cfg.my_id
        ));
        self.leading().learners.remove(&from);
        self.outputs.push(Output::CloseLink { peer: from });
    }

    pub(super) fn leader_on_disconnected(&mut self, peer: ServerId) {
        self.leading().learners.remove(&peer);
        self.pending_infos.remove(&peer);
    }

    pub(super) fn leader_on_durable(&mut self) {
        match self.leading_ref().phase {
            Phase::EpochProposed => self.check_epoch_quorum(),
            Phase::Syncing => self.check_new_leader_quorum(),
            Phase::Broadcast => self.try_commit(),
            Phase::Discovery => {}
        }
    }

    pub(super) fn leader_on_tick(&mut self) {
        let now_ms = self.mono_ms;
        let tick_ms = self.cfg.tick_ms;
        let sync_ms = self.cfg.sync_limit_ticks * tick_ms;
        let init_ms = self.cfg.init_limit_ticks * tick_ms;
        let l = self.leading_ref();
        // Learners we have not heard from in time are gone.
        let silent: Vec<ServerId> = l
            .learners
            .iter()
            .filter(|(_, s)| {
                let limit = if s.new_leader_acked { sync_ms } else { init_ms };
                now_ms.saturating_sub(s.last_heard_ms) >= limit
            })
            .map(|(id, _)| *id)
            .collect();
        for peer in silent {
            self.leading().learners.remove(&peer);
            self.outputs.push(Output::CloseLink { peer });
        }
        let l = self.leading_ref();
        if l.phase == Phase::Broadcast {
            let live: Vec<ServerId> = l
                .learners
                .iter()
                .filter(|(_, s)| s.new_leader_acked)
                .map(|(id, _)| *id)
                .chain([self.cfg.my_id])
                .collect();
            if !self.cfg.contains_quorum(&live) {
                let epoch = l.epoch;
                self.stats.leader_lost_quorum += 1;
                self.outputs
                    .push(Output::Role(RoleChange::LeaderLostQuorum { epoch }));
                self.start_looking_after(None);
                return;
            }
        } else if now_ms.saturating_sub(l.started_ms) >= init_ms {
            // Not established within initLimit.
            self.start_looking_after(None);
            return;
        } else if l.phase == Phase::EpochProposed {
            // Our own acknowledgement may have waited for our promise.
            self.check_epoch_quorum();
            if !matches!(self.role, Role::Leading(_)) {
                return;
            }
        }
        if now_ms.saturating_sub(self.leading_ref().last_ping_ms) >= self.cfg.heartbeat_ms() {
            self.leading().last_ping_ms = now_ms;
            for id in self.leading_ref().learner_ids() {
                let s = self
                    .leading()
                    .learners
                    .get_mut(&id)
                    .expect("a learner we just listed");
                if s.pings_unanswered.len() >= PINGS_UNANSWERED_MAX {
                    self.learner_violation(id, "PINGs left unanswered".into());
                    continue;
                }
                s.pings_unanswered.push_back(now_ms);
                self.send(id, Message::Ping);
            }
        }
    }

    /// Until when, by our clock, the lease of an established leader runs:
    /// `Config::lease_ms` after the latest time by which a quorum of voters
    /// (us included) had heard from us. `None` when not leading an
    /// established epoch.
    pub fn lease_until_ms(&self) -> Option<u64> {
        let Role::Leading(l) = &self.role else {
            return None;
        };
        if l.phase != Phase::Broadcast {
            return None;
        }
        let rule = leader_rule(&self.cfg, l);
        if rule.contains_quorum(&self.cfg.voters, &[self.cfg.my_id]) {
            return Some(u64::MAX);
        }
        if *rule != QuorumRule::Majority {
            // The latest time by which a quorum (us, now, included) heard us.
            let mut heard: Vec<(ServerId, u64)> = l
                .learners
                .iter()
                .filter(|(_, s)| s.new_leader_acked)
                .filter_map(|(id, s)| s.heard_us_at_ms.map(|t| (*id, t)))
                .chain([(self.cfg.my_id, u64::MAX)])
                .collect();
            let mut ids = Vec::with_capacity(heard.len());
            let t = rule.quorum_value(&self.cfg.voters, &mut heard, &mut ids);
            return Some(t.map_or(0, |t| t.saturating_add(self.cfg.lease_ms())));
        }
        let others_needed = self.cfg.voters.len() / 2;
        // The others_needed-th latest time a voter heard us. Run before
        // every input: no allocation while a quorum is small.
        let heard = l
            .learners
            .iter()
            .filter(|(id, s)| s.new_leader_acked && self.cfg.is_voter(**id))
            .filter_map(|(_, s)| s.heard_us_at_ms);
        let kth = if others_needed <= 8 {
            let mut top = [0u64; 8];
            let mut n = 0;
            for t in heard {
                // Keep the others_needed latest, descending.
                let mut i = n.min(others_needed);
                if i == others_needed && top[i - 1] >= t {
                    continue;
                }
                if i == others_needed {
                    i -= 1;
                }
                while i > 0 && top[i - 1] < t {
                    top[i] = top[i - 1];
                    i -= 1;
                }
                top[i] = t;
                n = (n + 1).min(others_needed);
            }
            (n == others_needed).then(|| top[others_needed - 1])
        } else {
            let mut all: Vec<u64> = heard.collect();
            all.sort_unstable_by(|a, b| b.cmp(a));
            all.get(others_needed - 1).copied()
        };
        match kth {
            Some(t) => Some(t.saturating_add(self.cfg.lease_ms())),
            None => Some(0),
        }
    }

    /// The oracle answered (`Peer::on_oracle`): what waited for a quorum
    /// may have one now (ZooKeeper's `revalidateOutstandingProp`); losing
    /// one is found by the lease and the next tick.
    pub(super) fn leader_on_oracle(&mut self) {
        self.leader_on_durable();
    }

    /// An established leader whose lease ran out stops leading at once:
    /// it takes no proposal and answers no sync from now on, and is gone
    /// before any other member can be established (see `lease_until_ms`).
    pub(super) fn leader_check_lease(&mut self) {
        let Some(until) = self.lease_until_ms() else {
            return;
        };
        if self.mono_ms < until {
            return;
        }
        let epoch = self.leading_ref().epoch;
        self.stats.leases_expired += 1;
        // As when syncLimit drops the last followers: the links go first,
        // then the role.
        for peer in self.leading_ref().learner_ids() {
            self.outputs.push(Output::CloseLink { peer });
        }
        self.leading().learners.clear();
        self.outputs
            .push(Output::Role(RoleChange::LeaderLostQuorum { epoch }));
        self.start_looking_after(None);
    }
}

/// The rule a leader decides by: without the oracle while another voter
/// is synced with it (ZooKeeper asks the oracle only when the leader has
/// no follower left, `needOracle`).
pub(super) fn leader_rule<'a>(cfg: &'a Config, l: &Leading) -> &'a QuorumRule {
    let synced_voter = l
        .learners
        .iter()
        .any(|(id, s)| s.new_leader_acked && cfg.is_voter(*id));
    if synced_voter {
        cfg.quorum.without_oracle()
    } else {
        &cfg.quorum
    }
}
