//! Observers behind followers (zoo.cfg `observerMasterPort`;
//! Administrator's Guide, "Cluster Options", and the Observers Guide):
//! a synchronized follower acts as a *learner master* for observers, so
//! the leader does not carry them.
//!
//! The follower's side, for each observer that sent it OBSERVERINFO:
//!
//! 1. LEARNERMASTER (the leader it follows, whom the observer's pipeline
//!    forwards writes to) and LEADERINFO (the epoch it follows, confirmed).
//! 2. On ACKEPOCH, the sync from the follower's *committed* history: DIFF,
//!    TRUNC or SNAP (`History::plan_sync`), the committed txns the observer
//!    misses, the commit point and NEWLEADER. An observer that holds more
//!    than the follower has committed (it came from a master further on)
//!    waits until the follower's commit point reaches its last zxid: an
//!    observer only ever holds committed txns, so it never loses one.
//! 3. After the sync, every txn the follower delivers goes to the observer
//!    as INFORM, in order; ACK(NEWLEADER) is answered with UPTODATE.
//! 4. PINGs every heartbeat; an observer silent for syncLimit (initLimit
//!    before its ACK(NEWLEADER)) is dropped. A client `sync` the observer
//!    sends is relayed to the leader and its reply relayed back behind the
//!    INFORMs of the txns it waited for (replies come back in request
//!    order on the FIFO link with the leader).
//!
//! An observer link that breaks the protocol is closed, that link only.
//! At most `Config::observer_master_links_max` observers are served. When
//! the follower leaves its leader every observer link is closed and the
//! observers choose a learner master again.
//!
//! The observer's side (`Peer::choose_learner_master`): ZooKeeper's
//! observer walks a shuffled list of every voter's observerMasterPort and
//! the leader refuses (it runs no ObserverMaster). The core has no
//! randomness: each observer starts its walk over the followers at an
//! offset of its id (so observers spread), skips the leader it elected,
//! and after every follower failed it once tries the leader's own
//! observer path, which always works.

use super::message::Message;
use super::peer::{Output, Peer, Role};
use super::types::{Payload, ServerId, Zxid};

/// Where one observer's session with this follower is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ObserverPhase {
    /// LEADERINFO sent, waiting for ACKEPOCH.
    AwaitAckEpoch,
    /// The observer holds txns up to this zxid, which this follower has
    /// not committed yet: its sync waits until it has.
    AwaitCommitted(Zxid),
    /// Synced up to `ObserverLink::synced_to`; waiting for ACK(NEWLEADER).
    AwaitAckNewLeader,
    /// UPTODATE sent.
    Serving,
}

/// One observer's session with this follower.
#[derive(Clone, Debug)]
pub(super) struct ObserverLink {
    /// Distinguishes this session from the observer's earlier ones (a
    /// relayed `sync` reply goes only to the session that asked).
    pub session: u64,
    pub phase: ObserverPhase,
    /// Set once the sync went out: every later delivery is INFORMed.
    pub synced_to: Option<Zxid>,
    pub last_heard_ms: u64,
    /// `sync`s relayed to the leader and not answered yet.
    pub syncs_relayed: usize,
}

/// The learner master's part of a following member's state.
#[derive(Clone, Debug, Default)]
pub(super) struct Master {
    pub observers: std::collections::BTreeMap<ServerId, ObserverLink>,
    pub sessions_started: u64,
    pub last_ping_ms: u64,
    /// Who asked each `sync` in flight to the leader, oldest first:
    /// `None` this member, `Some((observer, session))` a relayed one.
    pub sync_origins: std::collections::VecDeque<Option<(ServerId, u64)>>,
}

impl Peer {
    fn master(&mut self) -> &mut Master {
        match &mut self.role {
            Role::Learning(l) => &mut l.master,
            _ => unreachable!("learner-master code runs while following"),
        }
    }

    fn master_ref(&self) -> &Master {
        match &self.role {
            Role::Learning(l) => &l.master,
            _ => unreachable!("learner-master code runs while following"),
        }
    }

    /// Whether this member serves observers now: `observerMasterPort` is
    /// set and it is a follower synchronized with its leader.
    pub(super) fn master_serves(&self) -> bool {
        self.cfg.observer_master
            && matches!(&self.role, Role::Learning(l) if !l.observer && l.is_serving())
    }

    /// Whether an observer's OBSERVERINFO may wait for this member to be
    /// synchronized (it follows, or may, and serves observers then).
    pub(super) fn master_may_serve(&self, from: ServerId, observer: bool) -> bool {
        self.cfg.observer_master
            && observer
            && self.cfg.is_observer(from)
            && !self.cfg.is_observer(self.cfg.my_id)
    }

    /// A message from an observer on the learner-master path.
    pub(super) fn master_on_message(&mut self, from: ServerId, msg: Message) {
        let now_ms = self.mono_ms;
        if let Some(o) = self.master().observers.get_mut(&from) {
            o.last_heard_ms = now_ms;
        }
        let phase = self.master_ref().observers.get(&from).map(|o| o.phase);
        match (msg, phase) {
            (Message::FollowerInfo { observer, .. }, _) => self.master_accept(from, observer),
            (Message::AckEpoch { last_zxid, .. }, Some(ObserverPhase::AwaitAckEpoch)) => {
                if last_zxid > self.history.committed() {
                    self.set_phase(from, ObserverPhase::AwaitCommitted(last_zxid));
                } else {
                    self.master_sync(from, last_zxid);
                }
            }
            (Message::AckNewLeader { epoch }, Some(ObserverPhase::AwaitAckNewLeader))
                if epoch == self.learner_epoch() =>
            {
                self.set_phase(from, ObserverPhase::Serving);
                self.send(from, Message::UpToDate);
            }
            (Message::Ping, Some(_)) => {}
            (Message::SyncRequest { token }, Some(ObserverPhase::Serving)) => {
                self.master_relay_sync(from, token)
            }
            (other, _) => {
                let what = format!("{} from observer {from} in {phase:?}", other.name());
                self.master_drop(from, what);
            }
        }
    }

    fn learner_epoch(&self) -> u32 {
        match &self.role {
            Role::Learning(l) => l.epoch,
            _ => 0,
        }
    }

    fn set_phase(&mut self, id: ServerId, phase: ObserverPhase) {
        if let Some(o) = self.master().observers.get_mut(&id) {
            o.phase = phase;
        }
    }

    /// OBSERVERINFO: open a session (the observer's earlier one, if any,
    /// is over), or refuse when full or not an observer.
    pub(super) fn master_accept(&mut self, from: ServerId, observer: bool) {
        let max = self.cfg.observer_master_links_max;
        let full = {
            let m = self.master_ref();
            !m.observers.contains_key(&from) && m.observers.len() >= max
        };
        if !observer || !self.cfg.is_observer(from) || full || !self.master_serves() {
            self.stats.learners_refused += 1;
            self.master_close(from);
            return;
        }
        let now_ms = self.mono_ms;
        let m = self.master();
        m.sessions_started += 1;
        let session = m.sessions_started;
        m.observers.insert(
            from,
            ObserverLink {
                session,
                phase: ObserverPhase::AwaitAckEpoch,
                synced_to: None,
                last_heard_ms: now_ms,
                syncs_relayed: 0,
            },
        );
        let (leader, epoch) = match &self.role {
            Role::Learning(l) => (l.elected, l.epoch),
            _ => unreachable!("accepting observers while following"),
        };
        self.send(from, Message::LearnerMaster { leader });
        self.send(
            from,
            Message::LeaderInfo {
                epoch,
                confirmed: true,
            },
        );
    }

    /// DIFF, TRUNC or SNAP from our committed history, the committed txns
    /// the observer misses, the commit point and NEWLEADER.
    fn master_sync(&mut self, to: ServerId, peer_last: Zxid) {
        let committed = self.history.committed();
        let plan = self.start_sync(to, peer_last);
        for (zxid, payload) in self.history.range(plan.start, committed) {
            self.send(to, Message::Proposal { zxid, payload });
        }
        if committed > Zxid::ZERO {
            self.send(to, Message::Commit { zxid: committed });
        }
        let synced_to = plan.start.max(committed);
        let epoch = self.learner_epoch();
        if let Some(o) = self.master().observers.get_mut(&to) {
            o.synced_to = Some(synced_to);
            o.phase = ObserverPhase::AwaitAckNewLeader;
        }
        self.send(
            to,
            Message::NewLeader {
                epoch,
                zxid: synced_to,
            },
        );
    }

    /// This follower delivered `newly`: INFORM every synced observer of
    /// what it does not have, and sync those that waited for our commit
    /// point.
    pub(super) fn master_inform(&mut self, newly: &[(Zxid, Payload)]) {
        if !self.cfg.observer_master || newly.is_empty() {
            return;
        }
        let Role::Learning(l) = &self.role else {
            return;
        };
        let targets: Vec<(ServerId, Zxid)> = l
            .master
            .observers
            .iter()
            .filter_map(|(id, o)| o.synced_to.map(|s| (*id, s)))
            .collect();
        for (id, synced_to) in targets {
            for (zxid, payload) in newly.iter().filter(|(z, _)| *z > synced_to) {
                self.send(
                    id,
                    Message::Inform {
                        zxid: *zxid,
                        payload: payload.clone(),
                    },
                );
            }
        }
        let committed = self.history.committed();
        let ready: Vec<(ServerId, Zxid)> = self
            .master_ref()
            .observers
            .iter()
            .filter_map(|(id, o)| match o.phase {
                ObserverPhase::AwaitCommitted(last) if last <= committed => Some((*id, last)),
                _ => None,
            })
            .collect();
        for (id, last) in ready {
            self.master_sync(id, last);
        }
    }

    fn master_relay_sync(&mut self, from: ServerId, token: u64) {
        let max = self.cfg.outstanding_proposals_max;
        let leader = match &self.role {
            Role::Learning(l) => l.leader,
            _ => return,
        };
        let Some(o) = self.master().observers.get_mut(&from) else {
            return;
        };
        if o.syncs_relayed >= max {
            self.master_drop(from, "too many syncs in flight".into());
            return;
        }
        o.syncs_relayed += 1;
        let session = o.session;
        self.master().sync_origins.push_back(Some((from, session)));
        self.send(leader, Message::SyncRequest { token });
    }

    /// The leader answered the oldest `sync` in flight: ours (true, the
    /// caller completes it), or an observer's, relayed back to it here.
    /// None when no `sync` is in flight.
    pub(super) fn master_on_sync_reply(&mut self, token: u64) -> Option<bool> {
        let origin = self.master().sync_origins.pop_front()?;
        let Some((id, session)) = origin else {
            return Some(true);
        };
        let m = self.master();
        if let Some(o) = m.observers.get_mut(&id).filter(|o| o.session == session) {
            o.syncs_relayed -= 1;
            self.send(id, Message::SyncReply { token });
        }
        Some(false)
    }

    /// Pings synced observers every heartbeat; drops silent ones.
    pub(super) fn master_on_tick(&mut self) {
        if !self.cfg.observer_master || !matches!(self.role, Role::Learning(_)) {
            return;
        }
        let now_ms = self.mono_ms;
        let sync_ms = self.cfg.sync_limit_ticks * self.cfg.tick_ms;
        let init_ms = self.cfg.init_limit_ticks * self.cfg.tick_ms;
        let silent: Vec<ServerId> = self
            .master_ref()
            .observers
            .iter()
            .filter(|(_, o)| {
                let limit = if o.phase == ObserverPhase::Serving {
                    sync_ms
                } else {
                    init_ms
                };
                now_ms.saturating_sub(o.last_heard_ms) >= limit
            })
            .map(|(id, _)| *id)
            .collect();
        for id in silent {
            self.master().observers.remove(&id);
            self.master_close(id);
        }
        if now_ms.saturating_sub(self.master_ref().last_ping_ms) >= self.cfg.heartbeat_ms() {
            self.master().last_ping_ms = now_ms;
            let ids: Vec<ServerId> = self.master_ref().observers.keys().copied().collect();
            for id in ids {
                self.send(id, Message::Ping);
            }
        }
    }

    /// An observer broke the protocol: record it and close its link only.
    fn master_drop(&mut self, id: ServerId, what: String) {
        self.stats.protocol_violations += 1;
        self.stats.last_violation = Some(format!(
            "learner master {} about observer {id}: {what}",
            self.cfg.my_id
        ));
        self.master().observers.remove(&id);
        self.master_close(id);
    }

    fn master_close(&mut self, id: ServerId) {
        self.pending_infos.remove(&id);
        self.outputs.push(Output::CloseLink { peer: id });
    }

    /// The link with `peer` broke: its session (if any) is over.
    pub(super) fn master_on_disconnected(&mut self, peer: ServerId) {
        self.pending_infos.remove(&peer);
        if let Role::Learning(l) = &mut self.role {
            l.master.observers.remove(&peer);
        }
    }

    /// Observers whose OBSERVERINFO waited for this follower to be
    /// synchronized: serve them now.
    pub(super) fn master_take_pending(&mut self) {
        if !self.master_serves() {
            return;
        }
        let waiting: Vec<ServerId> = self
            .pending_infos
            .iter()
            .filter(|(_, i)| i.observer)
            .map(|(id, _)| *id)
            .collect();
        for id in waiting {
            self.pending_infos.remove(&id);
            self.master_accept(id, true);
        }
    }

    /// The observer's choice of the member it syncs from, once the
    /// election named `leader` (see the module doc).
    pub(super) fn choose_learner_master(&mut self, leader: ServerId) -> ServerId {
        let me = self.cfg.my_id;
        if !self.cfg.observer_master || !self.cfg.is_observer(me) {
            return leader;
        }
        let followers: Vec<ServerId> = self
            .cfg
            .voters
            .iter()
            .copied()
            .filter(|&v| v != leader && v != me)
            .collect();
        if followers.is_empty() || self.master_misses >= followers.len() {
            self.master_misses = 0;
            return leader;
        }
        let at = (self.master_cursor as u64).wrapping_add(me) % followers.len() as u64;
        self.master_cursor = self.master_cursor.wrapping_add(1);
        self.master_misses += 1;
        followers[at as usize]
    }

    /// The observers served here and synced (their NEWLEADER acknowledged),
    /// in id order; empty unless a learner master.
    pub(super) fn master_synced_into(&self, out: &mut Vec<ServerId>) {
        if let Role::Learning(l) = &self.role {
            out.extend(
                l.master
                    .observers
                    .iter()
                    .filter(|(_, o)| o.phase == ObserverPhase::Serving)
                    .map(|(id, _)| *id),
            );
        }
    }

    /// The ids of every observer link this follower holds (closed when it
    /// leaves its leader).
    pub(super) fn master_links(&self) -> Vec<ServerId> {
        match &self.role {
            Role::Learning(l) => l.master.observers.keys().copied().collect(),
            _ => Vec::new(),
        }
    }
}
