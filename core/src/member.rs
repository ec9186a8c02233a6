//! One member of wazoo as a deterministic state machine: the join of
//! consensus (ZAB's [`Peer`]) and the request pipeline ([`Server`]).
//! A standalone member is the pipeline alone, driven the same way.
//!
//! # Driving contract
//!
//! ```text
//! let mut m = Member::new(server, peer, codec, now);   // or Member::standalone(server)
//! loop {
//!     m.handle(input, now);                   // now: both clocks, read by the shell
//!     for out in m.take_outputs() { carry_out(out) }   // strictly in order
//!     if let Some(why) = m.fatal() { stop(why) }
//! }
//! ```
//!
//! Inputs ([`Input`]), each with the time ([`Now`]): what a client
//! connection says (connect, request, unknown opcode, malformed body,
//! closed, bytes written), a `Tick` at least every half tickTime, `Durable`
//! once the log is fsynced up to a zxid, a ZAB message or a pipeline
//! message from another member, and a quorum link that broke by itself.
//! Admin queries read the state through [`Member::server`] and
//! [`Member::peer`] between inputs.
//!
//! Outputs ([`Output`]) come out as ONE list, in the order they must be
//! carried out:
//!
//! 1. `StoreAcceptedEpoch`, `StoreCurrentEpoch`, `Truncate` and
//!    `InstallSnapshot` are durable before the next output is carried out
//!    (they are rare: once per election or sync). `StoreInstalled` (an
//!    observer of ZooKeeper only) is written in the background, but every
//!    `Persist` after it waits until it is durable.
//! 2. `Persist` appends to the txn log and may complete later (group
//!    commit); report `Input::Durable { zxid }` once every `Persist` up to
//!    `zxid` is on disk. Acknowledging only what is durable is the core's
//!    job: no output waits for an earlier `Persist`.
//! 3. `SendPeer` goes on the message's channel (`Message::channel`), in
//!    FIFO order per member; `CloseLink` drops that quorum connection;
//!    `SendApp` goes to that member's pipeline on the quorum connection.
//! 4. `Send` and `Close` go to a client connection (a close after what was
//!    sent before it is flushed); `WriteSnapshot` may be written in the
//!    background.
//!
//! Inside, each machine's outputs are carried out as they are produced:
//! the pipeline's right after the pipeline input that made them (a
//! proposal goes to consensus at once), consensus' in the order consensus
//! made them (a delivery or a role change reaches the pipeline in its
//! place, and what the pipeline answers comes out right there). So what the
//! pipeline sent before a role change is carried out before it, and what
//! the role change closes comes after.
//!
//! # One zxid owner
//!
//! Consensus numbers the txns. Before every pipeline input the join hands
//! the pipeline the proposal window of consensus ([`Peer::proposal_window`]:
//! the next zxid and how many proposals it takes in a row, or why it takes
//! none); the pipeline preps each txn with the next number of that window,
//! and the join proposes it right away, so consensus gives it that same
//! zxid ([`Peer::propose`] decides by the same window; an assertion names
//! the invariant).
//!
//! # Refusals
//!
//! A write the pipeline cannot make a txn for (consensus is no longer
//! leading, too many proposals await a quorum, the epoch's counter is used
//! up) changes nothing the next prep sees and queues no reply. The leader
//! then steps down, as a ZooKeeper leader that cannot propose stops
//! leading: the pipeline asks ([`server::Output::StepDown`]), the join has
//! consensus abdicate, and the role change comes back through the same
//! path as any other: the pipeline closes its clients' connections and
//! they reconnect to another member (ZooKeeper Programmer's Guide,
//! "ZooKeeper Sessions": a client that loses its connection keeps its
//! session on another server). The member itself never stops for it.

use std::collections::VecDeque;

use wazoo_proto::Zxid;
use wazoo_zab::{self as zab, Message, Peer, RoleChange, ServerId};

use crate::recipe::RecipeWaits;
use crate::server::{self, Numbering, PeerMsg, Role, Server, SnapshotJob};
use crate::time::Now;
use crate::tree::DataTree;
use crate::watch::ConnId;

/// A snapshot payload read back: the state as of `zxid`.
#[derive(Debug)]
pub struct LoadedSnapshot {
    pub zxid: Zxid,
    /// Every live session.
    pub sessions: Vec<wazoo_proto::SessionRecord>,
    pub waits: RecipeWaits,
    pub tree: DataTree,
}

/// How the state is turned into a snapshot payload and back: the shell's
/// format (storage's envelope around the core's body), the same bytes it
/// writes to its snapshot files. Pure functions over bytes.
pub trait SnapshotCodec {
    /// The payload of `job`.
    fn encode(&self, job: &SnapshotJob) -> Vec<u8>;
    /// Reads a payload `encode` wrote. The bytes come from another member:
    /// a bad payload is an error, never a panic.
    fn decode(&self, bytes: &[u8]) -> Result<LoadedSnapshot, String>;
}

/// One entry of the journal [`Member::observe_applied`] keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// Consensus delivered this committed txn and the pipeline was handed
    /// it to apply (consensus delivers each txn once, in zxid order).
    Txn { zxid: Zxid, record: zab::Payload },
    /// The pipeline's state was replaced by the leader's snapshot at
    /// `zxid` (it loaded; the outputs carry `InstallSnapshot`).
    Snapshot { zxid: Zxid },
}

/// What happens to a member.
#[derive(Debug)]
pub enum Input {
    /// From a client connection: `Connect`, `Request`, `Unknown`,
    /// `Malformed`, `Closed` or `Written`; or `Plugin`, from the shell's
    /// plugins directory watcher (a `Tick` or `Durable` given here
    /// counts as the input of that name; the pipeline's other inputs are
    /// the join's to make and are dropped).
    Client(server::Input),
    /// Time passed: at least every half tickTime.
    Tick,
    /// Every `Persist` up to `zxid` is fsynced.
    Durable { zxid: Zxid },
    /// A ZAB message from another member, in the order its connection
    /// delivered it.
    Zab { from: ServerId, msg: Message },
    /// A pipeline message (encoded [`PeerMsg`]) from another member.
    App { from: ServerId, payload: Vec<u8> },
    /// The quorum connection with `peer` broke by itself (not after
    /// `CloseLink`).
    LinkDown { peer: ServerId },
    /// An observer of a ZooKeeper ensemble: its link to the leader.
    Zk(ZkInput),
}

/// What the shell must do, in order (see the module doc).
#[derive(Debug)]
pub enum Output {
    /// Frames for a client connection; `replies` of them answer requests.
    Send {
        conn: ConnId,
        bytes: Vec<u8>,
        replies: u32,
    },
    /// Close the client connection once what was sent before is flushed.
    Close { conn: ConnId },
    /// The pipeline's [`server::Output::LocalReads`].
    LocalReads {
        conn: ConnId,
        auth: std::sync::Arc<crate::acl::AuthInfo>,
    },
    /// Append to the txn log; report `Input::Durable` once synced.
    Persist { zxid: Zxid, record: Vec<u8> },
    /// Durably drop every logged txn after `after`, before the next output.
    Truncate { after: Zxid },
    /// Durably store acceptedEpoch before the next output.
    StoreAcceptedEpoch { epoch: u32 },
    /// Durably store currentEpoch before the next output.
    StoreCurrentEpoch { epoch: u32 },
    /// The leader's snapshot, already the member's state: store it durably
    /// as the snapshot at `zxid` and drop the whole txn log, before the
    /// next output.
    InstallSnapshot { zxid: Zxid, data: zab::Payload },
    /// The state a sync installed (an observer of a ZooKeeper ensemble:
    /// the leader's snapshot after SNAP, or the empty state it starts
    /// afresh from), already the member's state: store it as the snapshot
    /// at `job.zxid` in the background, in place of every snapshot named
    /// by a later zxid and of the txn log. Outputs after it are carried
    /// out at once (the ACK of NEWLEADER goes without waiting for it), but
    /// no `Persist` after it may become durable before it does: on disk
    /// there is never a txn after `job.zxid` without the snapshot at
    /// `job.zxid` under it. The observer's ACK counts towards no quorum,
    /// so a crash before the snapshot is durable only costs a sync.
    StoreInstalled(Box<SnapshotJob>),
    /// Write a snapshot of the state as of `job.zxid` (in the background).
    WriteSnapshot(Box<SnapshotJob>),
    /// A ZAB message for another member.
    SendPeer { to: ServerId, msg: Message },
    /// Close the quorum connection with `peer`.
    CloseLink { peer: ServerId },
    /// A pipeline message for another member's pipeline.
    SendApp { to: ServerId, msg: PeerMsg },
    /// A reconfig committed: this membership is active from now on. The
    /// shell keeps it for restarts and opens or drops quorum links to
    /// follow it.
    Reconfigured(crate::quorum_config::QuorumConfig),
    /// An audit record to write to the audit log (only with
    /// `ServerConfig::audit`; see [`crate::audit`]). Written before the
    /// replies of the same list are handed to their connections.
    Audit(Box<crate::audit::AuditRecord>),
    /// An observer of a ZooKeeper ensemble: a packet for the leader's
    /// quorum port.
    SendZk(wazoo_zkquorum::QuorumPacket),
    /// An observer of a ZooKeeper ensemble: close the link to the leader
    /// and find the leader again (report `ZkInput::Down` once closed or
    /// not at all; the member already counts it down).
    CloseZk,
    /// A participant of a ZooKeeper ensemble: a notification for member
    /// `to`'s election port (the shell keeps a connection to each voter,
    /// by ZooKeeper's rule, and sends the last one again on a new one).
    SendVote {
        to: u64,
        n: wazoo_zkquorum::Notification,
    },
    /// A participant of a ZooKeeper ensemble told to truncate txns it
    /// already applied (ZooKeeper's TRUNC after a restart replayed
    /// proposals never committed): durably drop every logged txn after
    /// `upto` and every snapshot past it, load the state as of `upto`
    /// from what is left on disk, and report it with `ZkInput::Reloaded`,
    /// as ZooKeeper's learner truncates its log and reloads its database.
    ZkReload { upto: Zxid },
    /// A participant of a ZooKeeper ensemble elected `leader`: connect to
    /// its quorum port (report `ZkInput::Connected`, or `ZkInput::Down`
    /// when that fails, which starts the next election round).
    ZkFollow { leader: u64 },
    /// An observer of a ZooKeeper ensemble: the ensemble's membership as
    /// ZooKeeper's leader sent it (NEWLEADER) or committed it (a reconfig),
    /// `/zookeeper/config`'s text: where to look for the leader next time.
    ZkMembership(Vec<u8>),
    /// Run a recipe step off the member's thread and report it with
    /// `Input::Client(server::Input::RecipeStepDone(..))`, in any order
    /// (only when the pipeline offloads steps).
    RecipeStep(Box<server::RecipeJob>),
    /// A restore (the AdminServer's) was applied at `zxid`, or refused
    /// (`error`); `token` names the request of the member asked.
    Restored {
        token: u64,
        zxid: Zxid,
        error: Option<String>,
    },
}

mod zk;
pub mod zk_election;
pub mod zk_sync;
mod zk_txn;
pub use zk::{zk_leader_of, ZkInput, ZkObserverStart};
pub use zk_txn::{to_zk_acl, to_zk_txn, zk_acl, zk_txn, NoZkForm};

/// Consensus and what the join keeps beside it.
struct Ensemble {
    peer: Peer,
    codec: Box<dyn SnapshotCodec>,
    /// The leader this member follows or observes, for `SendApp`.
    leader: Option<ServerId>,
    /// Consensus' outputs taken and not carried out yet, in its order.
    queue: VecDeque<zab::Output>,
}

/// Most outputs of consensus one input may lead to (each delivery may make
/// the pipeline propose, each proposal makes a few more): far above any
/// real input, a bound on a feedback loop that would be a bug.
const STEPS_PER_INPUT_MAX: usize = 1 << 26;

/// One member: the pipeline, and consensus unless standalone.
pub struct Member {
    server: Server,
    ens: Option<Ensemble>,
    out: Vec<Output>,
    now: Now,
    /// Set when the member can no longer go on (a snapshot from the leader
    /// that does not load); the shell stops it.
    fatal: Option<String>,
    /// The journal of what was applied, while an observer asked for it
    /// ([`Member::observe_applied`]); `None` otherwise, so it cannot grow.
    applied: Option<Vec<Applied>>,
    /// The learner of a ZooKeeper leader, in place of consensus
    /// (`wazoo.peers=zookeeper`).
    zk: Option<zk::ZkLearner>,
}

impl Member {
    /// A standalone member: the pipeline numbers and persists its own txns.
    pub fn standalone(server: Server) -> Member {
        Member {
            server,
            ens: None,
            out: Vec::new(),
            now: Now::default(),
            fatal: None,
            applied: None,
            zk: None,
        }
    }

    /// An ensemble member. `server` holds the state of the newest snapshot
    /// (the log after it went to `peer`, which delivers it again once a
    /// leader confirms it); the member starts electing, serving no client.
    pub fn new(mut server: Server, peer: Peer, codec: Box<dyn SnapshotCodec>, now: Now) -> Member {
        server.set_ensemble();
        let mut m = Member {
            server,
            ens: Some(Ensemble {
                peer,
                codec,
                leader: None,
                queue: VecDeque::new(),
            }),
            out: Vec::new(),
            now,
            fatal: None,
            applied: None,
            zk: None,
        };
        m.take_peer_outputs();
        m.settle();
        m
    }

    /// Handles one input at time `now`; outputs accumulate until
    /// [`Member::take_outputs`].
    pub fn handle(&mut self, input: Input, now: Now) {
        self.now = now;
        if let Some(e) = &mut self.ens {
            // A leader whose lease ran out steps down before this input
            // can be served (docs/ARCHITECTURE.md, "Timing model").
            e.peer.advance(mono(now));
            self.take_peer_outputs();
            self.settle();
        }
        match input {
            Input::Client(server::Input::Tick) | Input::Tick => {
                if let Some(e) = &mut self.ens {
                    e.peer.handle(zab::Input::Tick, mono(now));
                    self.take_peer_outputs();
                    // A role change the tick made reaches the pipeline first.
                    self.settle();
                }
                if self.zk.is_some() {
                    self.tick_zk_election();
                }
                self.feed_server(server::Input::Tick);
            }
            Input::Client(server::Input::Durable { zxid }) => self.on_durable(zxid),
            Input::Durable { zxid } => self.on_durable(zxid),
            Input::Client(
                i @ (server::Input::Committed { .. }
                | server::Input::Peer { .. }
                | server::Input::Role(_)),
            ) => {
                debug_assert!(false, "the join's own input given as a client's: {i:?}");
                tracing::error!("dropping an input only the join makes: {i:?}");
            }
            Input::Client(i) => self.feed_server(i),
            Input::Zab { from, msg } => self.feed_peer(zab::Input::Message { from, msg }),
            Input::LinkDown { peer } => self.feed_peer(zab::Input::Disconnected { peer }),
            Input::Zk(z) => self.on_zk(z),
            Input::App { from, payload } => match PeerMsg::decode(&payload) {
                Ok(msg) if self.ens.is_some() => {
                    self.feed_server(server::Input::Peer { from, msg })
                }
                Ok(_) => tracing::warn!(from, "a pipeline message to a standalone member"),
                Err(e) => tracing::warn!(from, "undecodable pipeline message: {e}"),
            },
        }
        self.settle();
    }

    /// The oracle's answer (Administrator's Guide, "Oracle Quorum"): the
    /// shell reads the file `oraclePath` names before every tick and says
    /// whether it holds `1` first. Nothing happens unless consensus runs
    /// with an oracle ([`zab::QuorumRule::Oracle`]).
    pub fn on_oracle(&mut self, says_yes: bool, now: Now) {
        self.now = now;
        if let Some(e) = &mut self.ens {
            e.peer.on_oracle(says_yes, mono(now));
            self.take_peer_outputs();
            self.settle();
        }
    }

    /// Everything the shell must do, in order.
    pub fn take_outputs(&mut self) -> Vec<Output> {
        std::mem::take(&mut self.out)
    }

    /// The pipeline: the tree, sessions, connections, statistics.
    pub fn server(&self) -> &Server {
        &self.server
    }

    /// The pipeline, to reset its statistics (`srst`, `crst`) or take its
    /// latency samples. Not for inputs: those go through [`Member::handle`].
    pub fn server_mut(&mut self) -> &mut Server {
        &mut self.server
    }

    /// Consensus; `None` when standalone.
    pub fn peer(&self) -> Option<&Peer> {
        self.ens.as_ref().map(|e| &e.peer)
    }

    /// Why this member must stop, if it must.
    pub fn fatal(&self) -> Option<&str> {
        self.fatal.as_deref().or(self.server.fatal())
    }

    /// From now on, keeps a journal of every committed txn consensus hands
    /// the pipeline and every snapshot of the leader's that replaces its
    /// state, in order, for [`Member::take_applied`] (see the module doc,
    /// "Observing what a member applies"). Only an ensemble member has
    /// entries: a standalone one applies its own `Persist`ed txns.
    pub fn observe_applied(&mut self) {
        self.applied.get_or_insert_with(Vec::new);
    }

    /// The journal's entries since the last call, oldest first; empty
    /// unless [`Member::observe_applied`] was called.
    pub fn take_applied(&mut self) -> Vec<Applied> {
        self.applied
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    fn on_durable(&mut self, zxid: Zxid) {
        if self.zk.is_some() {
            self.on_zk_durable(zxid);
        }
        if self.ens.is_some() {
            self.feed_peer(zab::Input::Durable { zxid });
        } else {
            self.feed_server(server::Input::Durable { zxid });
        }
    }

    fn feed_peer(&mut self, input: zab::Input) {
        let now = mono(self.now);
        let Some(e) = &mut self.ens else {
            tracing::warn!("a quorum input to a standalone member: {input:?}");
            return;
        };
        e.peer.handle(input, now);
        self.take_peer_outputs();
    }

    fn take_peer_outputs(&mut self) {
        if let Some(e) = &mut self.ens {
            let outs = e.peer.take_outputs();
            e.queue.extend(outs);
        }
    }

    /// Carries out consensus' outputs, in its order, until none is left.
    fn settle(&mut self) {
        for _ in 0..STEPS_PER_INPUT_MAX {
            let Some(out) = self.ens.as_mut().and_then(|e| e.queue.pop_front()) else {
                return;
            };
            self.peer_output(out);
        }
        panic!("consensus and the pipeline did not settle: a feedback loop between them");
    }

    /// One input for the pipeline, with consensus' proposal window; its
    /// outputs are carried out at once.
    fn feed_server(&mut self, input: server::Input) {
        if let Some(e) = &self.ens {
            e.peer
                .synced_learners_into(self.server.synced_learners_mut());
            self.server.set_numbering(match e.peer.proposal_window() {
                Ok(w) => Numbering::Granted {
                    next: w.next,
                    room: w.room,
                },
                Err(e) => Numbering::Refused(e.to_string()),
            });
        }
        self.server.handle(input, self.now);
        self.drain_server();
    }

    fn drain_server(&mut self) {
        for out in self.server.take_outputs() {
            self.server_output(out);
        }
    }

    fn server_output(&mut self, out: server::Output) {
        match out {
            server::Output::Send {
                conn,
                bytes,
                replies,
            } => self.out.push(Output::Send {
                conn,
                bytes,
                replies,
            }),
            server::Output::Close { conn } => self.out.push(Output::Close { conn }),
            server::Output::LocalReads { conn, auth } => {
                self.out.push(Output::LocalReads { conn, auth })
            }
            server::Output::Snapshot(job) => self.out.push(Output::WriteSnapshot(job)),
            server::Output::RecipeStep(job) => self.out.push(Output::RecipeStep(job)),
            server::Output::Audit(record) => self.out.push(Output::Audit(record)),
            server::Output::Restored { token, zxid, error } => {
                self.out.push(Output::Restored { token, zxid, error })
            }
            server::Output::Persist { zxid, record } => {
                if self.ens.is_some() {
                    unreachable!("an ensemble pipeline proposes, it never persists by itself");
                }
                self.out.push(Output::Persist { zxid, record });
            }
            server::Output::Propose { zxid, record } => {
                let now = mono(self.now);
                let e = self
                    .ens
                    .as_mut()
                    .expect("only an ensemble pipeline proposes");
                let given = e.peer.propose(zab::Payload::from(record), now);
                assert_eq!(
                    given,
                    Ok(zxid),
                    "consensus takes a proposal the pipeline numbered from its window, with that zxid"
                );
                self.take_peer_outputs();
            }
            server::Output::ToLeader(msg) if self.zk.is_some() => self.forward_to_zk_leader(msg),
            server::Output::ToLeader(msg) => {
                match self.ens.as_ref().and_then(|e| e.leader) {
                    Some(to) => self.out.push(Output::SendApp { to, msg }),
                    // Only while the role changes: the pipeline fails what it
                    // forwarded when the change reaches it.
                    None => tracing::debug!("no leader to forward to"),
                }
            }
            server::Output::Reconfigured(c) => {
                let now = mono(self.now);
                let e = self
                    .ens
                    .as_mut()
                    .expect("only an ensemble pipeline reconfigures");
                // Every configuration that reaches here parsed, which checks
                // its groups and weights.
                let rule = c
                    .quorum_rule()
                    .expect("an active configuration has a valid quorum rule");
                e.peer.reconfigure(c.voters(), c.observers(), rule, now);
                self.out.push(Output::Reconfigured(c));
                self.take_peer_outputs();
            }
            server::Output::StepDown { why } => {
                let now = mono(self.now);
                let e = self
                    .ens
                    .as_mut()
                    .expect("only an ensemble pipeline steps down");
                tracing::warn!("the pipeline cannot propose ({why}): the leader steps down");
                e.peer.abdicate(now);
                self.take_peer_outputs();
            }
        }
    }

    fn peer_output(&mut self, out: zab::Output) {
        let e = self.ens.as_mut().expect("consensus outputs need consensus");
        match out {
            zab::Output::Send { to, msg } => self.out.push(Output::SendPeer { to, msg }),
            zab::Output::CloseLink { peer } => self.out.push(Output::CloseLink { peer }),
            zab::Output::SetAcceptedEpoch { epoch } => {
                self.out.push(Output::StoreAcceptedEpoch { epoch })
            }
            zab::Output::SetCurrentEpoch { epoch } => {
                self.out.push(Output::StoreCurrentEpoch { epoch })
            }
            zab::Output::Persist { zxid, payload } => self.out.push(Output::Persist {
                zxid,
                record: payload.to_vec(),
            }),
            zab::Output::Truncate { after } => self.out.push(Output::Truncate { after }),
            zab::Output::InstallSnapshot { zxid, data } => {
                let loaded = match e.codec.decode(&data) {
                    Ok(l) if l.zxid == zxid => l,
                    Ok(l) => {
                        return self.fail(format!(
                            "the leader's snapshot holds {}, announced {zxid}",
                            l.zxid
                        ))
                    }
                    Err(why) => {
                        return self.fail(format!("the leader's snapshot does not load: {why}"))
                    }
                };
                self.server.install_snapshot(
                    loaded.tree,
                    loaded.sessions,
                    loaded.waits,
                    loaded.zxid,
                );
                if let Some(j) = &mut self.applied {
                    j.push(Applied::Snapshot { zxid });
                }
                self.out.push(Output::InstallSnapshot { zxid, data });
                self.drain_server();
            }
            zab::Output::SendSnapshot { to, zxid } => {
                let job = self.server.snapshot_job();
                if job.zxid != zxid {
                    tracing::warn!(
                        "snapshot for {to} is at {}, consensus asked for {zxid}",
                        job.zxid
                    );
                }
                let data = zab::Payload::from(e.codec.encode(&job));
                self.out.push(Output::SendPeer {
                    to,
                    msg: Message::Snap { zxid, data },
                });
            }
            zab::Output::Deliver { zxid, payload } => {
                let record = payload.to_vec();
                if let Some(j) = &mut self.applied {
                    j.push(Applied::Txn {
                        zxid,
                        record: payload,
                    });
                }
                self.feed_server(server::Input::Committed { zxid, record });
            }
            // The pipeline makes a sync a txn of its own (ZooKeeper's
            // leader answers it in order with the writes); consensus'
            // sync is not used.
            zab::Output::SyncDone { .. } => {}
            zab::Output::Role(r) => {
                let role = match r {
                    RoleChange::Looking | RoleChange::LeaderLostQuorum { .. } => Role::Looking,
                    RoleChange::Leading { epoch } => Role::Leader { epoch },
                    RoleChange::Following { leader, .. } => Role::Follower { leader },
                    RoleChange::Observing { leader, .. } => Role::Observer { leader },
                };
                e.leader = match role {
                    Role::Follower { leader } | Role::Observer { leader } => Some(leader),
                    _ => None,
                };
                self.feed_server(server::Input::Role(role));
            }
        }
    }

    fn fail(&mut self, why: String) {
        tracing::error!("{why}");
        if self.fatal.is_none() {
            self.fatal = Some(why);
        }
    }
}

/// Consensus reads the monotonic clock as unsigned milliseconds.
fn mono(now: Now) -> u64 {
    now.mono_ms.max(0) as u64
}
