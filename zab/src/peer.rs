//! `Peer`: one member's consensus state machine. Inputs in, outputs out;
//! see the module doc of `zab` for the driving contract.

use std::collections::BTreeMap;
use std::fmt;

use super::election::{Decision, Election, Sends, Vote};
use super::history::History;
use super::leader::Leading;
use super::learner::Learning;
use super::message::{Channel, Message, Notification};
use super::quorum::QuorumRule;
use super::types::{Config, Payload, Restored, ServerId, ServerState, Zxid};

/// What happens to a member.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// A message from another member (either channel).
    Message { from: ServerId, msg: Message },
    /// The quorum connection with `peer` is gone, with whatever it had in
    /// flight. Not reported for a link the core closed itself
    /// (`Output::CloseLink`); reported before any message of a newer
    /// connection with the same peer.
    Disconnected { peer: ServerId },
    /// Time passed (at least every `Config::heartbeat_ms`, and every half
    /// `tick_ms`; `mono_ms` comes with every input).
    Tick,
    /// Every `Persist` up to `zxid` is fsynced.
    Durable { zxid: Zxid },
}

/// A change of role, for the shell (serve or stop serving clients) and for
/// `mntr`/`srvr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoleChange {
    /// Back to election; stop serving writes (and reads, unless read-only
    /// mode allows them).
    Looking,
    /// The epoch is established: a quorum holds the leader's history.
    /// `propose` works from now on.
    Leading {
        epoch: u32,
    },
    /// Synchronized with the leader (UPTODATE): serve clients.
    Following {
        leader: ServerId,
        epoch: u32,
    },
    Observing {
        leader: ServerId,
        epoch: u32,
    },
    /// The leader did not hear from a quorum within syncLimit, or its lease
    /// ran out, and renounces its epoch (followed by `Looking`).
    LeaderLostQuorum {
        epoch: u32,
    },
}

/// What the shell must do, in this order (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// Send on the channel `msg.channel()` names.
    Send {
        to: ServerId,
        msg: Message,
    },
    /// Send `Message::Snap { zxid, data }` to `to`, with `data` the state
    /// machine serialized exactly at `zxid` (every `Deliver` before this
    /// output applied, no later one), in this position of the link's FIFO.
    SendSnapshot {
        to: ServerId,
        zxid: Zxid,
    },
    /// Close the quorum connection with `peer`, dropping what is in flight
    /// both ways. Not reported back as `Disconnected`.
    CloseLink {
        peer: ServerId,
    },
    /// Durably store acceptedEpoch before the next output.
    SetAcceptedEpoch {
        epoch: u32,
    },
    /// Durably store currentEpoch before the next output.
    SetCurrentEpoch {
        epoch: u32,
    },
    /// Append to the txn log. May be fsynced later (group commit); report
    /// it with `Input::Durable`.
    Persist {
        zxid: Zxid,
        payload: Payload,
    },
    /// Durably drop every logged txn after `after` before the next output.
    Truncate {
        after: Zxid,
    },
    /// Replace the state machine with this snapshot, store it durably and
    /// drop the whole txn log, before the next output.
    InstallSnapshot {
        zxid: Zxid,
        data: Payload,
    },
    /// Apply this committed txn to the state machine. Strictly in zxid
    /// order, each exactly once per incarnation.
    Deliver {
        zxid: Zxid,
        payload: Payload,
    },
    /// The `sync(token)` asked here is complete: every txn proposed before
    /// it reached the leader has been delivered (the `Deliver`s came
    /// first). Syncs still open when the role changes are lost: fail them
    /// on `Role(Looking)`.
    SyncDone {
        token: u64,
    },
    Role(RoleChange),
}

/// Why `propose` refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProposeError {
    /// Not the leader; `leader` is who this member follows, if anybody.
    NotLeader { leader: Option<ServerId> },
    /// Leading, but the epoch is not established yet.
    NotReady,
    /// `outstanding_proposals_max` proposals await a quorum.
    Backpressure,
    /// The epoch's counter is used up; the leader has stepped down to start
    /// a new epoch (ZooKeeper forces an election on rollover too).
    EpochExhausted,
}

impl fmt::Display for ProposeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProposeError::NotLeader { leader: Some(l) } => {
                write!(f, "not the leader (server {l} is)")
            }
            ProposeError::NotLeader { leader: None } => write!(f, "not the leader (electing)"),
            ProposeError::NotReady => write!(f, "leader not established yet"),
            ProposeError::Backpressure => write!(f, "too many outstanding proposals"),
            ProposeError::EpochExhausted => write!(f, "zxid counter exhausted, electing"),
        }
    }
}

impl std::error::Error for ProposeError {}

/// What [`Peer::propose`] would do now, when it would take a proposal:
/// the zxid it gives the next one and how many in a row it takes (at
/// least one). A pipeline that numbers its txns before proposing them
/// takes its zxids from here, so consensus stays their one owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProposalWindow {
    pub next: Zxid,
    pub room: usize,
}

/// Counters for metrics and for the simulation's checks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub elections: u64,
    pub epochs_established: u64,
    pub leader_lost_quorum: u64,
    pub syncs_diff: u64,
    pub syncs_trunc: u64,
    pub syncs_snap: u64,
    /// A message that contradicts the protocol (a bug somewhere, never a
    /// race): the member dropped the session and went back to election.
    pub protocol_violations: u64,
    pub last_violation: Option<String>,
    /// A quorum message that belongs to no current session (stale after a
    /// shell race): the link was closed.
    pub unexpected_messages: u64,
    pub last_unexpected: Option<String>,
    /// FOLLOWERINFOs from members that took us for their leader while we
    /// are not (they go back to election when we close the link).
    pub learners_refused: u64,
    /// Times the member we decided to follow said, before it brought us up
    /// to date, that it will not lead (it votes for another or follows),
    /// and we went back to election instead of waiting out initLimit.
    pub leaders_declined: u64,
    /// Times this leader started over because a voter had promised a
    /// later epoch than ours and so could never join.
    pub stepped_down_for_later_epoch: u64,
    /// Times this leader stepped down because its lease ran out: no quorum
    /// answered its heartbeats within `Config::lease_ms`.
    pub leases_expired: u64,
}

/// A snapshot of the member's state for `mntr`/`srvr` and tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Status {
    pub state: ServerState,
    /// The leader this member leads or follows (itself when leading).
    pub leader: Option<ServerId>,
    /// True once leading an established epoch / synchronized with it.
    pub serving: bool,
    pub accepted_epoch: u32,
    pub current_epoch: u32,
    pub last_zxid: Zxid,
    pub committed_zxid: Zxid,
    pub durable_zxid: Zxid,
    pub election_epoch: u64,
}

/// What a leader reports to `mntr` (ZooKeeper 3.8's leader keys).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LeaderReport {
    /// Learners with a session with us: followers and observers.
    pub learners: usize,
    /// Voting followers synced with us (`synced_followers`).
    pub synced_followers: usize,
    /// Observers synced with us (`synced_observers`).
    pub synced_observers: usize,
    /// `sync`s waiting for the commit point (`pending_syncs`).
    pub pending_syncs: usize,
    /// Milliseconds since this member started leading (`leader_uptime`).
    pub leader_uptime_ms: u64,
    /// Bytes of the last, smallest and largest proposal of this epoch.
    pub last_proposal_bytes: usize,
    pub min_proposal_bytes: usize,
    pub max_proposal_bytes: usize,
}

pub(super) enum Role {
    Looking(Election),
    Leading(Box<Leading>),
    Learning(Learning),
}

/// A FOLLOWERINFO received while still looking: kept until we know
/// whether we lead.
#[derive(Clone, Copy, Debug)]
pub(super) struct PendingInfo {
    pub accepted_epoch: u32,
    pub last_zxid: Zxid,
    pub observer: bool,
}

pub struct Peer {
    pub(super) cfg: Config,
    /// The monotonic clock (`wazoo_core::time::Now::mono_ms`): every timer of
    /// consensus (election rounds, init/sync limits, pings) runs on it,
    /// never on the wall clock, so setting the system clock cannot make a
    /// leader lose its quorum or a follower give up on its leader.
    pub(super) mono_ms: u64,
    pub(super) accepted_epoch: u32,
    pub(super) current_epoch: u32,
    pub(super) history: History,
    pub(super) role: Role,
    /// What this member answers LOOKING members with while it leads or
    /// follows, and the round it decided in. First the vote that ended the
    /// election; once the epoch is established (leader) or synchronized
    /// (learner) it becomes `(leader, epoch:0, epoch)`, so every member of
    /// the same established epoch reports the same vote even if they joined
    /// through different elections whose votes named a different
    /// peerEpoch (a LOOKING member needs a quorum of equal votes to join).
    pub(super) current_vote: (Vote, u64),
    pub(super) pending_infos: BTreeMap<ServerId, PendingInfo>,
    pub(super) outputs: Vec<Output>,
    pub(super) stats: Stats,
    /// The follower's promise (`Config::suspect_ms`): until this time a
    /// voter acknowledges no new epoch, its own included when it leads,
    /// because the leader it last followed may still hold a lease counted
    /// on it. Set when it leaves a leader, however it leaves (silence, a
    /// broken link, a violation), and on restart (what it promised before
    /// the restart is not known).
    pub(super) promise_until_ms: u64,
    /// An observer with `observerMasterPort`: how many learner masters it
    /// has chosen, and how many in a row failed to bring it up to date
    /// (`learner_master.rs`).
    pub(super) master_cursor: usize,
    pub(super) master_misses: usize,
}

impl Peer {
    /// A member starting (or restarting) from its durable state. It starts
    /// LOOKING: the first outputs are its notifications.
    pub fn new(cfg: Config, restored: Restored, mono_ms: u64) -> Result<Peer, String> {
        cfg.validate()?;
        restored.validate()?;
        let history = History::restore(restored.snapshot_zxid, restored.log, cfg.committed_log_max);
        let own = Vote {
            leader: cfg.my_id,
            zxid: history.last(),
            peer_epoch: restored.current_epoch,
        };
        // A voter that ever accepted an epoch may have answered a leader's
        // PING right before it stopped: keep the promise from now on.
        let promise_until_ms =
            if restored.accepted_epoch > 0 && cfg.is_voter(cfg.my_id) && !cfg.alone_is_quorum() {
                mono_ms.saturating_add(cfg.suspect_ms())
            } else {
                0
            };
        let mut peer = Peer {
            mono_ms,
            promise_until_ms,
            accepted_epoch: restored.accepted_epoch,
            current_epoch: restored.current_epoch,
            history,
            role: Role::Looking(placeholder_election(&cfg, own)),
            current_vote: (own, 0),
            pending_infos: BTreeMap::new(),
            master_cursor: 0,
            master_misses: 0,
            outputs: Vec::new(),
            stats: Stats::default(),
            cfg,
        };
        peer.start_looking(0);
        Ok(peer)
    }

    /// Feeds one input. Outputs accumulate until `take_outputs`.
    pub fn handle(&mut self, input: Input, mono_ms: u64) {
        // The links a lease running out now would close (rarely any: no
        // allocation otherwise).
        let expiring = self
            .lease_until_ms()
            .is_some_and(|until| self.mono_ms.max(mono_ms) >= until);
        let links = match &self.role {
            Role::Leading(l) if expiring => l.learner_ids(),
            _ => Vec::new(),
        };
        self.advance(mono_ms);
        if let Input::Message { from, msg } = &input {
            let closed = !links.is_empty() && !matches!(self.role, Role::Leading(_));
            if closed && msg.channel() == Channel::Quorum && links.contains(from) {
                // The lease ran out and stepping down closed this link:
                // what was in flight on it goes with it (`CloseLink`).
                return;
            }
        }
        match input {
            Input::Message { from, msg } => self.on_message(from, msg),
            Input::Disconnected { peer } => self.on_disconnected(peer),
            Input::Tick => self.on_tick(),
            Input::Durable { zxid } => self.on_durable(zxid),
        }
    }

    /// Proposes a txn. Only an established leader accepts; the txn is
    /// committed when `Deliver` for the returned zxid comes out.
    pub fn propose(&mut self, payload: Payload, mono_ms: u64) -> Result<Zxid, ProposeError> {
        self.advance(mono_ms);
        match &self.role {
            Role::Leading(_) => self.leader_propose(payload),
            Role::Learning(l) => Err(ProposeError::NotLeader {
                leader: Some(l.elected),
            }),
            Role::Looking(_) => Err(ProposeError::NotLeader { leader: None }),
        }
    }

    /// The zxids the next proposals get and how many `propose` takes in a
    /// row from now, or why it refuses the next one. Nothing changes
    /// between this answer and those proposals unless an input comes in
    /// between: proposing `room` payloads right after returns `next`,
    /// `next + 1`, ... in order.
    pub fn proposal_window(&self) -> Result<ProposalWindow, ProposeError> {
        match &self.role {
            Role::Leading(_) => self.leader_window(),
            Role::Learning(l) => Err(ProposeError::NotLeader {
                leader: Some(l.elected),
            }),
            Role::Looking(_) => Err(ProposeError::NotLeader { leader: None }),
        }
    }

    /// ZooKeeper's `sync`: completes (`Output::SyncDone { token }`) once
    /// every txn the leader had proposed when the request reached it is
    /// delivered here. On a follower or observer the request travels to
    /// the leader and the reply comes back behind the COMMITs on the same
    /// FIFO link. Tokens are the shell's; they need not be unique.
    pub fn sync(&mut self, token: u64, mono_ms: u64) -> Result<(), ProposeError> {
        self.advance(mono_ms);
        match &self.role {
            Role::Leading(_) => self.leader_sync_local(token),
            Role::Learning(_) => self.learner_sync(token),
            Role::Looking(_) => Err(ProposeError::NotLeader { leader: None }),
        }
    }

    /// Time passed: a leader whose lease ran out steps down now (its
    /// outputs say so), before it serves anything more. Every input,
    /// `propose` and `sync` does this first; a shell that serves clients
    /// from the state machine between inputs calls it before each client
    /// input, so the leader's `proposal_window` is refused once the lease
    /// is gone.
    pub fn advance(&mut self, mono_ms: u64) {
        self.mono_ms = self.mono_ms.max(mono_ms);
        self.leader_check_lease();
    }

    /// Everything the shell must do, in order.
    pub fn take_outputs(&mut self) -> Vec<Output> {
        std::mem::take(&mut self.outputs)
    }

    pub fn id(&self) -> ServerId {
        self.cfg.my_id
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The leader's `mntr` figures; `None` unless leading.
    pub fn leader_report(&self) -> Option<LeaderReport> {
        let Role::Leading(l) = &self.role else {
            return None;
        };
        let synced = |observer: bool| {
            l.learners
                .values()
                .filter(|s| s.observer == observer && s.synced_to.is_some())
                .count()
        };
        Some(LeaderReport {
            learners: l.learners.len(),
            synced_followers: synced(false),
            synced_observers: synced(true),
            pending_syncs: l.pending_syncs.len(),
            leader_uptime_ms: self.mono_ms.saturating_sub(l.started_ms),
            ..l.proposal_sizes
        })
    }

    /// The member this one syncs from while it learns: its leader, or an
    /// observer's learner master (`observerMasterPort`). `None` unless
    /// following or observing.
    pub fn learning_from(&self) -> Option<ServerId> {
        match &self.role {
            Role::Learning(l) => Some(l.leader),
            _ => None,
        }
    }

    /// A follower serving observers as their learner master: how many it
    /// has synced (ZooKeeper's `synced_observers` on a follower). `None`
    /// unless following with `observerMasterPort` set.
    pub fn master_synced_observers(&self) -> Option<usize> {
        match &self.role {
            Role::Learning(_)
                if self.cfg.observer_master && !self.cfg.is_observer(self.cfg.my_id) =>
            {
                let mut ids = Vec::new();
                self.master_synced_into(&mut ids);
                Some(ids.len())
            }
            _ => None,
        }
    }

    pub fn state(&self) -> ServerState {
        match &self.role {
            Role::Looking(_) => ServerState::Looking,
            Role::Leading(_) => ServerState::Leading,
            Role::Learning(l) if l.observer => ServerState::Observing,
            Role::Learning(_) => ServerState::Following,
        }
    }

    pub fn status(&self) -> Status {
        let (leader, serving, election_epoch) = match &self.role {
            Role::Looking(e) => (None, false, e.logical_clock()),
            Role::Leading(l) => (
                Some(self.cfg.my_id),
                l.is_established(),
                self.current_vote.1,
            ),
            Role::Learning(l) => (Some(l.elected), l.is_serving(), self.current_vote.1),
        };
        Status {
            state: self.state(),
            leader,
            serving,
            accepted_epoch: self.accepted_epoch,
            current_epoch: self.current_epoch,
            last_zxid: self.history.last(),
            committed_zxid: self.history.committed(),
            durable_zxid: self.history.durable(),
            election_epoch,
        }
    }

    /// Checks the member's invariants; panics naming the broken one. Tests
    /// call it after every step.
    pub fn validate(&self) {
        self.history.validate();
        assert!(
            self.current_epoch <= self.accepted_epoch,
            "member {}: currentEpoch {} > acceptedEpoch {}",
            self.cfg.my_id,
            self.current_epoch,
            self.accepted_epoch
        );
        if let Role::Leading(l) = &self.role {
            l.validate(self);
        }
    }

    // ---- dispatch -------------------------------------------------------

    fn on_message(&mut self, from: ServerId, msg: Message) {
        if from == self.cfg.my_id || !(self.cfg.is_voter(from) || self.cfg.is_observer(from)) {
            self.stats.unexpected_messages += 1;
            self.stats.last_unexpected = Some(format!("{} from unknown server {from}", msg.name()));
            return;
        }
        if let Message::Notification(n) = msg {
            self.on_notification(from, n);
            return;
        }
        match &self.role {
            Role::Looking(_) => match msg {
                Message::FollowerInfo {
                    accepted_epoch,
                    last_zxid,
                    observer,
                } => {
                    let info = PendingInfo {
                        accepted_epoch,
                        last_zxid,
                        observer,
                    };
                    self.pending_infos.insert(from, info);
                }
                _ => self.unexpected(from, &msg),
            },
            Role::Leading(_) => self.leader_on_message(from, msg),
            Role::Learning(l) => {
                let info = matches!(msg, Message::FollowerInfo { .. });
                if from == l.leader && info {
                    // The member we follow follows us: two elections ended
                    // differently (stale votes). Neither leads; start over.
                    self.stats.learners_refused += 1;
                    self.start_looking_after(None);
                } else if from == l.leader {
                    self.learner_on_message(msg);
                } else if l.master.observers.contains_key(&from) {
                    self.master_on_message(from, msg);
                } else if let Message::FollowerInfo {
                    accepted_epoch,
                    last_zxid,
                    observer,
                } = msg
                {
                    if self.master_serves() {
                        self.master_accept(from, observer);
                    } else if !l.observer && self.master_may_serve(from, observer) {
                        // Served once this follower is synchronized.
                        let info = PendingInfo {
                            accepted_epoch,
                            last_zxid,
                            observer,
                        };
                        self.pending_infos.insert(from, info);
                    } else {
                        // Somebody takes us for its leader.
                        self.stats.learners_refused += 1;
                        self.outputs.push(Output::CloseLink { peer: from });
                    }
                } else if info {
                    // Somebody takes us for its leader.
                    self.stats.learners_refused += 1;
                    self.outputs.push(Output::CloseLink { peer: from });
                } else {
                    self.unexpected(from, &msg);
                }
            }
        }
    }

    fn on_notification(&mut self, from: ServerId, n: Notification) {
        let now_ms = self.mono_ms;
        let mut sends = Sends::new();
        let decision = match &mut self.role {
            Role::Looking(e) => e.on_notification(&self.cfg, from, n, now_ms, &mut sends),
            _ => {
                // Decided members answer LOOKING voters (and looking
                // observers) with the vote that elected their leader.
                if n.state == ServerState::Looking && self.cfg.is_voter(self.cfg.my_id) {
                    sends.push((from, self.decided_notification()));
                }
                None
            }
        };
        self.send_notifications(sends);
        if let Some(d) = decision {
            self.decide(d);
        } else if self.chosen_leader_declined(from, &n) {
            // Waiting out initLimit for a leader that will not lead would
            // keep this member out of any quorum for that long.
            self.stats.leaders_declined += 1;
            self.start_looking_after(None);
        }
    }

    /// Whether `n`, from the leader this member decided to follow and has
    /// not been brought up to date by yet, says that member will not lead:
    /// in a round at least as late as our decision's, it votes for another
    /// member or it follows or observes. Within a round a vote only moves
    /// to a better one, and we heard the leader vote for itself in our
    /// round (or say LEADING) before we decided, so such a notification is
    /// newer news than what we decided on; one from an earlier round may
    /// be stale and says nothing. A
    /// member that decided at once (a short finalize wait) on a quorum that
    /// included the leader's own vote can see the leader switch to a better
    /// candidate it heard of first; without this the follower waits
    /// initLimit x tickTime (20 s by default) for a leader that never
    /// answers. ZooKeeper finds out when its connection to the leader's
    /// quorum port is refused a few times (about 5 s).
    fn chosen_leader_declined(&self, from: ServerId, n: &Notification) -> bool {
        let Role::Learning(l) = &self.role else {
            return false;
        };
        if from != l.elected || l.is_serving() {
            return false;
        }
        // Older news may still be on its way (notifications can be
        // reordered across reconnections): only a round at least as late
        // as our decision's counts.
        if n.election_epoch < self.current_vote.1 {
            return false;
        }
        match n.state {
            ServerState::Looking => n.leader != l.elected,
            ServerState::Following | ServerState::Observing => true,
            ServerState::Leading => false,
        }
    }

    fn decided_notification(&self) -> Notification {
        let (vote, round) = self.current_vote;
        Notification {
            leader: vote.leader,
            zxid: vote.zxid,
            peer_epoch: vote.peer_epoch,
            election_epoch: round,
            state: self.state(),
        }
    }

    fn on_disconnected(&mut self, peer: ServerId) {
        match &self.role {
            Role::Looking(_) => {
                self.pending_infos.remove(&peer);
            }
            Role::Leading(_) => self.leader_on_disconnected(peer),
            Role::Learning(l) => {
                if l.leader == peer {
                    // The link is already gone: nothing to close.
                    self.start_looking_after(None);
                } else {
                    self.master_on_disconnected(peer);
                }
            }
        }
    }

    fn on_tick(&mut self) {
        let now_ms = self.mono_ms;
        match &mut self.role {
            Role::Looking(e) => {
                let mut sends = Sends::new();
                let decision = e.on_tick(&self.cfg, now_ms, &mut sends);
                self.send_notifications(sends);
                if let Some(d) = decision {
                    self.decide(d);
                }
            }
            Role::Leading(_) => self.leader_on_tick(),
            Role::Learning(_) => self.learner_on_tick(),
        }
    }

    fn on_durable(&mut self, zxid: Zxid) {
        self.history.set_durable(zxid);
        match &self.role {
            Role::Looking(_) => {}
            Role::Leading(_) => self.leader_on_durable(),
            Role::Learning(_) => self.learner_on_durable(),
        }
    }

    // ---- election -------------------------------------------------------

    fn own_vote(&self) -> Vote {
        Vote {
            leader: self.cfg.my_id,
            zxid: self.history.last(),
            peer_epoch: self.current_epoch,
        }
    }

    fn send_notifications(&mut self, sends: Sends) {
        for (to, n) in sends {
            self.outputs.push(Output::Send {
                to,
                msg: Message::Notification(n),
            });
        }
    }

    /// The leader steps down and an election starts: the state machine
    /// above it had a txn to make that [`Peer::proposal_window`] would not
    /// take (too many proposals await a quorum), and a ZooKeeper leader
    /// that cannot propose stops leading. Does nothing unless leading.
    pub fn abdicate(&mut self, mono_ms: u64) {
        self.mono_ms = self.mono_ms.max(mono_ms);
        if matches!(self.role, Role::Leading(_)) {
            self.start_looking_after(None);
        }
    }

    /// The oracle's answer (Administrator's Guide, "Oracle Quorum"): the
    /// shell reads the file `oraclePath` names, before every tick, and
    /// says whether its first character is `1`. Does nothing unless the
    /// quorum rule is [`QuorumRule::Oracle`]. A member that is looking
    /// decides if the answer makes its votes a quorum; a leader commits
    /// what the answer lets it commit, and steps down at its next input
    /// (its lease) when the answer takes its quorum away.
    pub fn on_oracle(&mut self, says_yes: bool, mono_ms: u64) {
        let QuorumRule::Oracle { says_yes: was } = &mut self.cfg.quorum else {
            return;
        };
        if *was == says_yes {
            return;
        }
        *was = says_yes;
        self.advance(mono_ms);
        let now_ms = self.mono_ms;
        match &mut self.role {
            Role::Looking(e) => {
                if let Some(d) = e.recheck(&self.cfg, now_ms) {
                    self.decide(d);
                }
            }
            Role::Leading(_) => self.leader_on_oracle(),
            Role::Learning(_) => {}
        }
    }

    /// Activates a new membership, as a ZooKeeper member does when a
    /// reconfiguration commits (ZooKeeper Dynamic Reconfiguration): from
    /// now on only `voters` vote and ack, and only members are heard.
    ///
    /// - A leader that is no longer a participant steps down, so the new
    ///   participants elect a leader among themselves; one that stays
    ///   closes the links of learners no longer in the ensemble, and
    ///   commits what the new quorum has already acknowledged.
    /// - A learner that was removed, or whose role changed (participant to
    ///   observer or back), leaves its leader and looks again, under the
    ///   new role.
    /// - A member that is looking uses the new membership from its next
    ///   round on.
    pub fn reconfigure(
        &mut self,
        voters: Vec<ServerId>,
        observers: Vec<ServerId>,
        quorum: QuorumRule,
        mono_ms: u64,
    ) {
        self.mono_ms = self.mono_ms.max(mono_ms);
        let me = self.cfg.my_id;
        let was_observer = self.cfg.is_observer(me);
        self.cfg.voters = voters;
        self.cfg.observers = observers;
        // `oraclePath` is static: a new membership keeps the oracle
        // unless it brings groups.
        if !(matches!(self.cfg.quorum, QuorumRule::Oracle { .. }) && quorum == QuorumRule::Majority)
        {
            self.cfg.quorum = quorum;
        }
        let is_member = |c: &Config, id| c.is_voter(id) || c.is_observer(id);
        match &self.role {
            Role::Looking(_) => {}
            Role::Leading(l) => {
                if !self.cfg.is_voter(me) {
                    self.start_looking_after(None);
                    return;
                }
                let gone: Vec<ServerId> = l
                    .learner_ids()
                    .into_iter()
                    .filter(|&id| !is_member(&self.cfg, id))
                    .collect();
                for peer in gone {
                    self.leader_on_disconnected(peer);
                    self.outputs.push(Output::CloseLink { peer });
                }
                self.leader_on_durable();
            }
            Role::Learning(_) => {
                if !is_member(&self.cfg, me) || was_observer != self.cfg.is_observer(me) {
                    self.start_looking_after(None);
                    return;
                }
                let gone: Vec<ServerId> = self
                    .master_links()
                    .into_iter()
                    .filter(|&id| !self.cfg.is_observer(id))
                    .collect();
                for peer in gone {
                    self.master_on_disconnected(peer);
                    self.outputs.push(Output::CloseLink { peer });
                }
            }
        }
    }

    /// Leader: fills `out` with the learners in sync with it (their
    /// NEWLEADER acknowledged), in id order; empty when not leading.
    /// A follower that is a learner master lists the observers it has
    /// synced.
    pub fn synced_learners_into(&self, out: &mut Vec<ServerId>) {
        out.clear();
        self.master_synced_into(out);
        if let Role::Leading(l) = &self.role {
            out.extend(
                l.learners
                    .iter()
                    .filter(|(_, s)| s.new_leader_acked)
                    .map(|(id, _)| *id),
            );
        }
    }

    /// Leaves the current role for LOOKING, closing the session's links
    /// (except `already_closed`).
    pub(super) fn start_looking_after(&mut self, already_closed: Option<ServerId>) {
        let never_served = matches!(&self.role, Role::Learning(l) if !l.is_serving());
        let round = self.leave_role(already_closed);
        // A learner whose leader never brought it up to date looks again in
        // the round it decided in, not the next: the others are still in
        // it (or decided in it), and a later round would pull the member
        // they are about to elect out of the round their votes are in.
        self.start_looking(if never_served {
            round.saturating_sub(1)
        } else {
            round
        });
    }

    /// Leaves the current role for election (keeping a learner's promise,
    /// closing the role's links but `already_closed`); returns the round
    /// the member was in.
    fn leave_role(&mut self, already_closed: Option<ServerId>) -> u64 {
        if let Role::Learning(l) = &self.role {
            if self.cfg.is_voter(self.cfg.my_id) && !self.cfg.alone_is_quorum() {
                let until = l.last_heard_ms.saturating_add(self.cfg.suspect_ms());
                self.promise_until_ms = self.promise_until_ms.max(until);
            }
        }
        let links: Vec<ServerId> = match &self.role {
            Role::Looking(_) => Vec::new(),
            Role::Leading(l) => l.learner_ids(),
            Role::Learning(l) => {
                let mut links = self.master_links();
                links.push(l.leader);
                links
            }
        };
        for peer in links.into_iter().filter(|p| Some(*p) != already_closed) {
            self.outputs.push(Output::CloseLink { peer });
        }
        match &self.role {
            Role::Looking(e) => e.logical_clock(),
            _ => self.current_vote.1,
        }
    }

    fn start_looking(&mut self, previous_clock: u64) {
        self.stats.elections += 1;
        self.outputs.push(Output::Role(RoleChange::Looking));
        let mut sends = Sends::new();
        let (election, decision) = Election::start(
            &self.cfg,
            self.own_vote(),
            previous_clock,
            self.mono_ms,
            &mut sends,
        );
        self.role = Role::Looking(election);
        self.send_notifications(sends);
        if let Some(d) = decision {
            self.decide(d);
        }
    }

    fn decide(&mut self, d: Decision) {
        self.current_vote = (d.vote, d.election_epoch);
        let leader = d.vote.leader;
        if leader == self.cfg.my_id {
            self.become_leader();
        } else {
            // FOLLOWERINFOs sent to us were for a leader we are not;
            // observers that chose us as their learner master wait until
            // we are synchronized.
            let pending = std::mem::take(&mut self.pending_infos);
            for (peer, info) in pending {
                if self.master_may_serve(peer, info.observer) {
                    self.pending_infos.insert(peer, info);
                } else {
                    self.stats.learners_refused += 1;
                    self.outputs.push(Output::CloseLink { peer });
                }
            }
            let observer = self.cfg.is_observer(self.cfg.my_id);
            let master = self.choose_learner_master(leader);
            self.become_learner(master, leader, observer);
        }
    }

    // ---- shared helpers ---------------------------------------------------

    /// The leader `leader` is established in `epoch` and we are with it.
    pub(super) fn vote_for_established(&mut self, leader: ServerId, epoch: u32) {
        self.current_vote.0 = Vote {
            leader,
            zxid: Zxid::new(epoch, 0),
            peer_epoch: epoch,
        };
    }

    pub(super) fn send(&mut self, to: ServerId, msg: Message) {
        self.outputs.push(Output::Send { to, msg });
    }

    /// Delivers every txn up to `zxid` (which the log must hold).
    pub(super) fn deliver_to(&mut self, zxid: Zxid) -> Vec<(Zxid, Payload)> {
        let newly = self.history.commit_to(zxid);
        for (zxid, payload) in &newly {
            self.outputs.push(Output::Deliver {
                zxid: *zxid,
                payload: payload.clone(),
            });
        }
        newly
    }

    /// A quorum message outside any session: close that link.
    pub(super) fn unexpected(&mut self, from: ServerId, msg: &Message) {
        self.stats.unexpected_messages += 1;
        self.stats.last_unexpected = Some(format!(
            "{} from {from} while {:?}",
            msg.name(),
            self.state()
        ));
        self.pending_infos.remove(&from);
        self.outputs.push(Output::CloseLink { peer: from });
    }

    /// A message that breaks the protocol: record it and start over.
    pub(super) fn violation(&mut self, what: String) {
        self.stats.protocol_violations += 1;
        self.stats.last_violation = Some(format!("member {}: {what}", self.cfg.my_id));
        self.start_looking_after(None);
    }
}

/// The role a `Peer` holds for the instant before `start_looking` runs.
fn placeholder_election(cfg: &Config, own: Vote) -> Election {
    let mut ignored = Sends::new();
    Election::start(cfg, own, 0, 0, &mut ignored).0
}
