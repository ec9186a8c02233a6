//! The follower's and the observer's side of ZAB (ZooKeeper Internals ("Leader Election", "Atomic Broadcast")).
//!
//! "Connect to a leader; delete any transactions in the txn log that the
//! leader says to delete; continually log to the transaction log and send
//! an ack to leader; deliver any committed transactions."
//!
//! 1. FOLLOWERINFO (our acceptedEpoch and last zxid) -> LEADERINFO. A
//!    follower acknowledges "only if the new epoch proposed is later than
//!    its own" (ZooKeeper Internals, "Leader Election"), or the same epoch once a quorum has confirmed it
//!    (a late joiner of the established leader); otherwise it goes back to
//!    election. ACKEPOCH carries currentEpoch and the last zxid.
//! 2. DIFF / TRUNC / SNAP, then the missing txns (logged), a COMMIT of what
//!    is already committed, then NEWLEADER: once the log is durable up to
//!    NEWLEADER's zxid, currentEpoch := epoch and ACK(NEWLEADER).
//! 3. UPTODATE: serve. PROPOSALs are logged and acknowledged (cumulatively)
//!    once durable; COMMITs deliver in zxid order. Observers get INFORM
//!    (log and deliver) and never acknowledge txns.
//!
//! Silence from the leader for `Config::suspect_ms` (initLimit before
//! UPTODATE) sends the member back to election. A voter that leaves a
//! leader keeps its promise to it (`Peer::promise_until_ms`): its ACKEPOCH
//! to any new leader waits until then.

use super::learner_master::Master;
use super::message::Message;
use super::peer::{Output, Peer, ProposeError, Role, RoleChange};
use super::types::{Payload, ServerId, Zxid};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Phase {
    /// FOLLOWERINFO sent.
    AwaitLeaderInfo,
    /// LEADERINFO received; ACKEPOCH waits for our promise to the leader
    /// we followed before (`Peer::promise_until_ms`).
    AwaitPromise { epoch: u32, confirmed: bool },
    /// ACKEPOCH sent.
    AwaitSync,
    /// DIFF/TRUNC/SNAP applied; txns arriving until NEWLEADER.
    Syncing,
    /// NEWLEADER received; acknowledging once the log is durable up to it.
    AwaitDurable(Zxid),
    /// ACK(NEWLEADER) sent.
    AwaitUpToDate,
    /// UPTODATE received.
    Serving,
}

pub(super) struct Learning {
    /// The member this one talks ZAB with: its leader, or for an observer
    /// with `observerMasterPort`, the follower that is its learner master.
    pub leader: ServerId,
    /// The leader of the ensemble: whom the pipeline forwards writes to.
    /// The election's word, until the member we sync from speaks: a
    /// learner master names the leader it follows (LEARNERMASTER) before
    /// its LEADERINFO; a LEADERINFO without it comes from the leader.
    pub elected: ServerId,
    /// LEARNERMASTER came in this session.
    pub leader_named: bool,
    pub observer: bool,
    pub phase: Phase,
    /// The leader's epoch, from LEADERINFO.
    pub epoch: u32,
    pub last_heard_ms: u64,
    /// The last cumulative ACK sent.
    pub acked: Zxid,
    /// SYNC requests sent and not answered yet (bounded).
    pub syncs_open: usize,
    /// When the last PING came, and how many PINGs in a row came less
    /// than a quarter tick apart: a leader that pings that often keeps a
    /// lease (`Config::heartbeat_ms`), and we then suspect it after
    /// `Config::suspect_ms`. One that pings every half tick (an older
    /// wazoo, during a rolling upgrade) gets three of its intervals.
    pub last_ping_ms: Option<u64>,
    pub fast_pings: u32,
    /// A follower's observers, when it is their learner master.
    pub master: Master,
}

/// PINGs in a row, less than a quarter tick apart, that show the leader
/// heartbeats for a lease.
const FAST_PINGS_TO_TRUST: u32 = 2;

impl Learning {
    pub fn is_serving(&self) -> bool {
        self.phase == Phase::Serving
    }
}

impl Peer {
    fn learning(&mut self) -> &mut Learning {
        match &mut self.role {
            Role::Learning(l) => l,
            _ => unreachable!("learner code runs while following or observing"),
        }
    }

    fn learning_ref(&self) -> &Learning {
        match &self.role {
            Role::Learning(l) => l,
            _ => unreachable!("learner code runs while following or observing"),
        }
    }

    /// Starts learning from `leader` (the learner master of an observer
    /// with `observerMasterPort`), in the epoch `elected` leads.
    pub(super) fn become_learner(&mut self, leader: ServerId, elected: ServerId, observer: bool) {
        self.role = Role::Learning(Learning {
            leader,
            elected,
            leader_named: false,
            observer,
            phase: Phase::AwaitLeaderInfo,
            epoch: 0,
            last_heard_ms: self.mono_ms,
            acked: Zxid::ZERO,
            syncs_open: 0,
            last_ping_ms: None,
            fast_pings: 0,
            master: Master::default(),
        });
        let msg = Message::FollowerInfo {
            accepted_epoch: self.accepted_epoch,
            last_zxid: self.history.last(),
            observer,
        };
        self.send(leader, msg);
    }

    pub(super) fn learner_on_message(&mut self, msg: Message) {
        let now_ms = self.mono_ms;
        let l = self.learning();
        l.last_heard_ms = now_ms;
        let (phase, observer, epoch, leader) = (l.phase, l.observer, l.epoch, l.leader);
        let elected = l.elected;
        let after_new_leader = matches!(
            phase,
            Phase::AwaitDurable(_) | Phase::AwaitUpToDate | Phase::Serving
        );
        match msg {
            Message::Ping => {
                let quarter_tick_ms = self.cfg.tick_ms / 4;
                let l = self.learning();
                if let Some(previous) = l.last_ping_ms {
                    if now_ms.saturating_sub(previous) <= quarter_tick_ms {
                        l.fast_pings = l.fast_pings.saturating_add(1);
                    } else if l.fast_pings < FAST_PINGS_TO_TRUST {
                        l.fast_pings = 0;
                    }
                }
                l.last_ping_ms = Some(now_ms);
                self.send(leader, Message::Ping)
            }
            Message::LearnerMaster { leader: chief }
                if phase == Phase::AwaitLeaderInfo && observer && chief != leader =>
            {
                if !self.cfg.is_voter(chief) {
                    self.violation(format!("LEARNERMASTER names {chief}, not a voter"));
                    return;
                }
                let l = self.learning();
                l.elected = chief;
                l.leader_named = true;
            }
            Message::LeaderInfo { epoch, confirmed } if phase == Phase::AwaitLeaderInfo => {
                let l = self.learning();
                if !l.leader_named {
                    l.elected = l.leader;
                }
                self.on_leader_info(epoch, confirmed)
            }
            Message::Diff if phase == Phase::AwaitSync => self.learning().phase = Phase::Syncing,
            Message::Trunc { zxid } if phase == Phase::AwaitSync => {
                match self.history.truncate_after(zxid) {
                    Ok(()) => {
                        self.outputs.push(Output::Truncate { after: zxid });
                        self.learning().phase = Phase::Syncing;
                    }
                    Err(e) => self.violation(format!("TRUNC: {e}")),
                }
            }
            Message::Snap { zxid, data } if phase == Phase::AwaitSync => {
                if zxid < self.history.committed() {
                    let committed = self.history.committed();
                    self.violation(format!(
                        "SNAP at {zxid:?} would undo committed {committed:?}"
                    ));
                    return;
                }
                self.outputs.push(Output::InstallSnapshot { zxid, data });
                self.history.reset_to_snapshot(zxid);
                self.learning().phase = Phase::Syncing;
            }
            Message::Proposal { zxid, payload }
                if (phase == Phase::Syncing && zxid.epoch() <= epoch)
                    || (after_new_leader && !observer && zxid.epoch() == epoch) =>
            {
                self.log_txn(zxid, payload);
            }
            Message::Commit { zxid } if phase == Phase::Syncing || after_new_leader => {
                if zxid > self.history.last() {
                    self.violation(format!("COMMIT {zxid:?} of a txn not logged"));
                    return;
                }
                let newly = self.deliver_to(zxid);
                self.master_inform(&newly);
            }
            Message::Inform { zxid, payload } if after_new_leader && observer => {
                if self.log_txn(zxid, payload) {
                    self.deliver_to(zxid);
                }
            }
            Message::NewLeader { epoch: e, zxid } if phase == Phase::Syncing => {
                if e != epoch || self.history.last() != zxid {
                    let last = self.history.last();
                    self.violation(format!(
                        "NEWLEADER {e} {zxid:?} but epoch {epoch}, log ends {last:?}"
                    ));
                    return;
                }
                self.learning().phase = Phase::AwaitDurable(zxid);
                self.maybe_ack_new_leader();
            }
            Message::UpToDate if phase == Phase::AwaitUpToDate => {
                self.learning().phase = Phase::Serving;
                self.vote_for_established(elected, epoch);
                let change = if observer {
                    self.master_misses = 0;
                    RoleChange::Observing {
                        leader: elected,
                        epoch,
                    }
                } else {
                    RoleChange::Following {
                        leader: elected,
                        epoch,
                    }
                };
                self.outputs.push(Output::Role(change));
                self.maybe_ack();
                self.master_take_pending();
            }
            Message::SyncReply { token } if phase == Phase::Serving => {
                match self.master_on_sync_reply(token) {
                    Some(true) => {
                        let l = self.learning();
                        l.syncs_open = l.syncs_open.saturating_sub(1);
                        self.outputs.push(Output::SyncDone { token });
                    }
                    Some(false) => {}
                    None => self.violation(format!("SYNC(reply) {token} answers no sync")),
                }
            }
            other => self.violation(format!(
                "{} from leader {leader} in phase {phase:?}",
                other.name()
            )),
        }
    }

    fn on_leader_info(&mut self, epoch: u32, confirmed: bool) {
        let observer = self.learning_ref().observer;
        let acceptable = if observer {
            // An observer's acceptedEpoch protects nothing: it never
            // acknowledges an epoch or a txn that counts.
            true
        } else {
            // ZooKeeper Internals, "Leader Election": "it only does so if the new epoch proposed is later
            // than its own".
            epoch > self.accepted_epoch || (epoch == self.accepted_epoch && confirmed)
        };
        if !acceptable {
            self.start_looking_after(None);
            return;
        }
        if !observer && self.mono_ms < self.promise_until_ms {
            // The leader we followed may still count on us for its lease:
            // acknowledge no new epoch before the promise is kept. A tick
            // comes back here.
            self.learning().phase = Phase::AwaitPromise { epoch, confirmed };
            return;
        }
        if epoch > self.accepted_epoch {
            self.accepted_epoch = epoch;
            self.outputs.push(Output::SetAcceptedEpoch { epoch });
        }
        let l = self.learning();
        l.epoch = epoch;
        l.phase = Phase::AwaitSync;
        let leader = l.leader;
        let msg = Message::AckEpoch {
            epoch,
            current_epoch: self.current_epoch,
            last_zxid: self.history.last(),
        };
        self.send(leader, msg);
    }

    /// Appends a txn from the leader; false (after a violation) if it does
    /// not extend the log.
    fn log_txn(&mut self, zxid: Zxid, payload: Payload) -> bool {
        let last = self.history.last();
        if zxid <= last || zxid.counter() == 0 {
            self.violation(format!(
                "txn {zxid:?} does not extend the log ending {last:?}"
            ));
            return false;
        }
        self.history.append(zxid, payload.clone());
        self.outputs.push(Output::Persist { zxid, payload });
        true
    }

    /// Once the synced history is durable: currentEpoch := epoch, then
    /// ACK(NEWLEADER). In this order only: currentEpoch is what makes our
    /// vote beat members of older epochs, so it must never be on disk
    /// while the history it vouches for is not (a crash in between would
    /// let us win an election with a log missing committed txns; the same
    /// hole as ZooKeeper's ZOOKEEPER-3911).
    fn maybe_ack_new_leader(&mut self) {
        let durable = self.history.durable();
        let l = self.learning();
        let Phase::AwaitDurable(zxid) = l.phase else {
            return;
        };
        if durable < zxid {
            return;
        }
        l.phase = Phase::AwaitUpToDate;
        l.acked = zxid;
        let (leader, epoch) = (l.leader, l.epoch);
        if self.current_epoch != epoch {
            self.current_epoch = epoch;
            self.outputs.push(Output::SetCurrentEpoch { epoch });
        }
        self.send(leader, Message::AckNewLeader { epoch });
        self.maybe_ack();
    }

    /// Cumulative ACK of every proposal durable since the last one.
    fn maybe_ack(&mut self) {
        let durable = self.history.durable();
        let l = self.learning();
        if l.observer
            || !matches!(l.phase, Phase::AwaitUpToDate | Phase::Serving)
            || durable <= l.acked
        {
            return;
        }
        l.acked = durable;
        let leader = l.leader;
        self.send(leader, Message::Ack { zxid: durable });
    }

    pub(super) fn learner_sync(&mut self, token: u64) -> Result<(), ProposeError> {
        let max = self.cfg.outstanding_proposals_max;
        let l = self.learning();
        if l.phase != Phase::Serving {
            return Err(ProposeError::NotReady);
        }
        if l.syncs_open >= max {
            return Err(ProposeError::Backpressure);
        }
        l.syncs_open += 1;
        l.master.sync_origins.push_back(None);
        let leader = l.leader;
        self.send(leader, Message::SyncRequest { token });
        Ok(())
    }

    pub(super) fn learner_on_durable(&mut self) {
        self.maybe_ack_new_leader();
        self.maybe_ack();
    }

    pub(super) fn learner_on_tick(&mut self) {
        let l = self.learning_ref();
        let limit_ms = if l.phase == Phase::Serving {
            self.suspect_limit_ms(l)
        } else {
            self.cfg.init_limit_ticks * self.cfg.tick_ms
        };
        if self.mono_ms.saturating_sub(l.last_heard_ms) >= limit_ms {
            self.start_looking_after(None);
            return;
        }
        if let Phase::AwaitPromise { epoch, confirmed } = l.phase {
            if self.mono_ms >= self.promise_until_ms {
                self.on_leader_info(epoch, confirmed);
            }
        }
        self.master_on_tick();
    }

    /// How long a serving learner waits for its leader: `suspect_ms` once
    /// the leader heartbeats for a lease, else three of its PING intervals
    /// (an older leader pings every half tick), within syncLimit.
    fn suspect_limit_ms(&self, l: &Learning) -> u64 {
        let sync_ms = self.cfg.sync_limit_ticks.saturating_mul(self.cfg.tick_ms);
        let suspect_ms = self.cfg.suspect_ms();
        if l.fast_pings >= FAST_PINGS_TO_TRUST {
            suspect_ms
        } else {
            suspect_ms.max(3 * (self.cfg.tick_ms / 2)).min(sync_ms)
        }
    }
}
