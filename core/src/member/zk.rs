//! A member as an **observer of an Apache ZooKeeper 3.8 ensemble**
//! (`wazoo.peers=zookeeper`; docs/MIGRATION.md, "Live migration"): the
//! first phase of joining a running ZooKeeper ensemble.
//!
//! The learner side of ZooKeeper's quorum protocol, as its `Observer` and
//! `Learner` speak it ("ZooKeeper Internals", "Atomic Broadcast"), in
//! place of wazoo's own consensus: the shell finds the leader (through
//! the election port) and connects to its quorum port; here the member
//! sends OBSERVERINFO, acknowledges the new epoch, takes the leader's
//! sync (DIFF, TRUNC or SNAP, then NEWLEADER and UPTODATE), and then
//! applies every INFORM the leader sends, in zxid order, as committed
//! txns. The pipeline serves reads and watches from that tree, as any
//! observer does; writes, new sessions, closes and syncs go to the leader
//! as REQUEST packets, and the pipeline answers each when the txn that
//! carries it is applied here, as it does behind a wazoo leader. A PING
//! is answered with the sessions touched since the last one; a client
//! that re-attaches here is revalidated with the leader (REVALIDATE), so
//! that the leader knows where its session lives.
//!
//! The state is kept as a ZooKeeper observer keeps it (`syncEnabled`, its
//! default): every applied txn is logged (after it is applied: an
//! observer acknowledges nothing), snapshots are taken every `snapCount`
//! txns, the leader's snapshot is stored as soon as it is installed, and
//! the epochs are stored when ZooKeeper's learner stores them. A restarted
//! observer tells the leader the last zxid it holds and is synced by DIFF.
//! Recipes cannot run behind a ZooKeeper leader, which preps every write.

use std::collections::{BTreeSet, VecDeque};

use wazoo_proto::{ErrorCode, SessionRecord, Zxid};
use wazoo_storage::zookeeper::TxnEntry;
use wazoo_zkquorum::{
    Direction, ForwardedRequest, LearnerInfo, Payload, QuorumPacket, ZAB_PROTOCOL_VERSION,
};

use super::zk_txn::zk_txn;
use super::{Member, Output};
use crate::server::{self, PeerMsg, Role};
use crate::tree::DataTree;
use crate::txn::{Txn, TxnHeader, TxnRecord};

/// `DigestCalculator.DIGEST_VERSION`: the digest this tree keeps.
const ZK_DIGEST_VERSION: i32 = 2;

/// ZooKeeper's opcodes a learner forwards beside the client's.
const OP_SYNC: i32 = 9;
const OP_CREATE_SESSION: i32 = -10;

/// What happens on the link to a ZooKeeper leader.
#[derive(Debug)]
pub enum ZkInput {
    /// The shell connected to the quorum port of `leader`, which the
    /// election port named.
    Connected { leader: u64 },
    /// A packet from the leader, in the order the connection delivered it.
    Packet(QuorumPacket),
    /// The snapshot that followed SNAP, read and converted by the shell.
    Snapshot {
        tree: Box<DataTree>,
        sessions: Vec<SessionRecord>,
    },
    /// The connection ended, or could not be made.
    Down,
    /// A participant: a notification from member `from` on the election
    /// port.
    Vote {
        from: u64,
        n: wazoo_zkquorum::Notification,
    },
    /// The state a sync installed (`Output::StoreInstalled`) is durable.
    Stored { zxid: Zxid },
    /// The state as of the zxid `Output::ZkReload` named, loaded from disk.
    Reloaded {
        tree: Box<DataTree>,
        sessions: Vec<SessionRecord>,
        zxid: Zxid,
    },
}

/// Packets from the leader held at most (the proposals of a sync waiting
/// for their COMMIT, or what comes while a participant reloads its
/// state); a leader that sends more loses the link.
const PACKETS_HELD_MAX: usize = if cfg!(test) { 64 } else { 1 << 20 };

/// Bytes of proposals a participant keeps, logged and not yet committed,
/// at most: a leader that proposes more without committing loses the link
/// (the next sync settles what was logged).
const LOGGED_BYTES_MAX: usize = if cfg!(test) { 16 << 10 } else { 1 << 30 };

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// No leader.
    Down,
    /// OBSERVERINFO sent; waiting for LEADERINFO.
    Epoch,
    /// ACKEPOCH sent; the leader's sync until UPTODATE.
    Sync,
    /// Serving clients; INFORMs applied as they come.
    Serving,
}

/// The learner's state beside the pipeline.
pub(super) struct ZkLearner {
    my_id: u64,
    leader: Option<u64>,
    phase: Phase,
    accepted_epoch: i64,
    current_epoch: i64,
    new_epoch: i64,
    /// SNAP announced its zxid; the snapshot comes next.
    snap_zxid: Option<i64>,
    /// Proposals of the sync, waiting for their COMMIT.
    proposals: VecDeque<TxnEntry>,
    /// Sessions touched since the last PING.
    touched: BTreeSet<i64>,
    /// Forwarded syncs, answered in order by SYNC packets.
    syncs: VecDeque<(i64, i32)>,
    /// Re-attaches of sessions this member does not know, waiting for the
    /// leader's REVALIDATE.
    revalidating: BTreeSet<i64>,
    /// A participant (phase 2): its part in ZooKeeper's elections. `None`
    /// for an observer, which the shell finds the leader for.
    election: Option<super::zk_election::ZkElection>,
    /// A participant: proposals logged and not yet committed (or known to
    /// be), oldest first. They are part of this member's history: a
    /// restart replays them, and they count in its votes.
    logged: VecDeque<Logged>,
    /// A participant: logged proposals of this leader's not yet
    /// acknowledged, waiting to be durable.
    unacked: VecDeque<i64>,
    /// The last zxid reported durable (never past `persisted`).
    durable: i64,
    /// The last zxid given to the log since it was last cut back: a
    /// durability report past it is of a record since truncated.
    persisted: i64,
    /// NEWLEADER came (a participant logs proposals from then on).
    after_newleader: bool,
    /// A participant's ACK of NEWLEADER, waiting for what it acknowledges
    /// to be durable: (NEWLEADER's zxid, the last zxid logged before it).
    newleader_ack: Option<(i64, i64)>,
    /// A participant: the state a SNAP installed is still being stored.
    storing: Option<Zxid>,
    /// The bytes of the records in `logged`.
    logged_bytes: usize,
    /// A participant reloading its state from disk (`Output::ZkReload`):
    /// the zxid it reloads to, and the leader's packets, waiting in order
    /// until the state is back.
    reloading: Option<(Zxid, VecDeque<QuorumPacket>)>,
}

/// A ZooKeeper txn as wazoo's record, with what applying it needs: a
/// proposal a participant logged, or a txn to apply now.
#[derive(Debug)]
struct Logged {
    zxid: i64,
    record: Vec<u8>,
    digest: Option<wazoo_storage::zookeeper::TxnDigest>,
    /// A write of `/zookeeper/config` (a reconfig): the new membership.
    membership: Option<Vec<u8>>,
}

impl std::fmt::Debug for ZkLearner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZkLearner")
            .field("my_id", &self.my_id)
            .field("leader", &self.leader)
            .field("phase", &self.phase)
            .field("accepted_epoch", &self.accepted_epoch)
            .field("current_epoch", &self.current_epoch)
            .finish_non_exhaustive()
    }
}

/// What an observer of a ZooKeeper ensemble starts from, beside the
/// state its pipeline recovered.
pub struct ZkObserverStart {
    pub my_id: u64,
    /// `acceptedEpoch` and `currentEpoch` as stored (0 when absent).
    pub accepted_epoch: u32,
    pub current_epoch: u32,
    /// A participant: the voters (itself among them) and their quorum
    /// rule, as its zoo.cfg gives them; `None` for an observer.
    pub voters: Option<(Vec<u64>, wazoo_zab::QuorumRule)>,
}

impl ZkLearner {
    fn new(start: ZkObserverStart) -> ZkLearner {
        ZkLearner {
            my_id: start.my_id,
            leader: None,
            phase: Phase::Down,
            accepted_epoch: i64::from(start.accepted_epoch),
            current_epoch: i64::from(start.current_epoch),
            new_epoch: 0,
            snap_zxid: None,
            proposals: VecDeque::new(),
            touched: BTreeSet::new(),
            syncs: VecDeque::new(),
            revalidating: BTreeSet::new(),
            election: start
                .voters
                .map(|(v, rule)| super::zk_election::ZkElection::new(start.my_id, v, rule)),
            logged: VecDeque::new(),
            unacked: VecDeque::new(),
            durable: 0,
            persisted: 0,
            after_newleader: false,
            newleader_ack: None,
            storing: None,
            reloading: None,
            logged_bytes: 0,
        }
    }

    fn reset(&mut self) {
        self.leader = None;
        self.phase = Phase::Down;
        self.snap_zxid = None;
        self.proposals.clear();
        self.touched.clear();
        self.syncs.clear();
        self.revalidating.clear();
        // What was logged stays (it is this member's history); only this
        // leader's acknowledgements are moot.
        self.unacked.clear();
        self.after_newleader = false;
        self.newleader_ack = None;
        // A reload under way still ends (the log is cut back already);
        // the old link's packets are moot.
        if let Some((_, held)) = &mut self.reloading {
            held.clear();
        }
    }

    fn participant(&self) -> bool {
        self.election.is_some()
    }
}

impl Member {
    /// An observer of a ZooKeeper ensemble, with `server` as its stored
    /// snapshot and log left it (empty at first: it takes the leader's
    /// state at the first sync); it serves no client until the leader says
    /// UPTODATE.
    pub fn zookeeper_observer(mut server: crate::server::Server, start: ZkObserverStart) -> Member {
        server.set_ensemble();
        // What the member recovered is durable.
        let recovered = server.last_zxid().to_wire();
        let mut m = Member::standalone(server);
        m.zk = Some(ZkLearner::new(start));
        let zk = m.zk.as_mut().expect("just set");
        zk.durable = recovered;
        zk.persisted = recovered;
        m.start_zk_election();
        m
    }

    pub(super) fn on_zk(&mut self, input: ZkInput) {
        if self.zk.is_none() {
            tracing::error!("a ZooKeeper quorum input for a member that does not observe one");
            return;
        }
        match input {
            ZkInput::Connected { leader } => {
                let config_version = self.config_version();
                let zk = self.zk.as_mut().expect("checked");
                zk.reset();
                zk.leader = Some(leader);
                zk.phase = Phase::Epoch;
                let info = LearnerInfo {
                    sid: zk.my_id as i64,
                    protocol_version: ZAB_PROTOCOL_VERSION,
                    config_version,
                };
                let zxid = zk.accepted_epoch << 32;
                let info = if zk.participant() {
                    Payload::FollowerInfo(info)
                } else {
                    Payload::ObserverInfo(info)
                };
                self.send_zk(info.to_packet(zxid));
            }
            ZkInput::Packet(p) => {
                let zk = self.zk.as_mut().expect("checked");
                match &mut zk.reloading {
                    Some((_, held)) if held.len() >= PACKETS_HELD_MAX => {
                        self.drop_zk("the leader sent too much while this member reloaded")
                    }
                    Some((_, held)) => held.push_back(p),
                    None => self.on_zk_packet(p),
                }
            }
            ZkInput::Reloaded {
                tree,
                sessions,
                zxid,
            } => {
                let zk = self.zk.as_mut().expect("checked");
                let Some((upto, held)) = zk.reloading.take() else {
                    tracing::warn!("a reloaded state nobody asked for");
                    return;
                };
                if zxid != upto {
                    // The disk did not give the state at the TRUNC's zxid:
                    // sync from nothing (SNAP) rather than from a state
                    // the leader's next txns do not follow.
                    return self.start_afresh(&format!(
                        "reloading to {upto} after the leader's TRUNC gave the state at {zxid}"
                    ));
                }
                tracing::info!(%zxid, "reloaded the state as of the leader's TRUNC");
                self.install_zk_state(*tree, sessions, zxid);
                for p in held {
                    self.on_zk_packet(p);
                }
            }
            ZkInput::Snapshot { tree, sessions } => {
                let zk = self.zk.as_mut().expect("checked");
                let Some(zxid) = zk.snap_zxid.take().filter(|_| zk.phase == Phase::Sync) else {
                    return self.drop_zk("a snapshot the leader did not announce with SNAP");
                };
                self.install_zk_state(*tree, sessions, Zxid::from_wire(zxid));
            }
            ZkInput::Down => {
                let zk = self.zk.as_mut().expect("checked");
                let was = zk.phase;
                zk.reset();
                if was != Phase::Down {
                    self.feed_server(server::Input::Role(Role::Looking));
                }
                self.start_zk_election();
            }
            ZkInput::Vote { from, n } => {
                let now = self.now.mono_ms;
                if let Some(e) = &mut self.zk.as_mut().expect("checked").election {
                    e.on_notification(now, from, &n);
                    self.drive_zk_election();
                }
            }
            ZkInput::Stored { zxid } => {
                let zk = self.zk.as_mut().expect("checked");
                if zk.storing == Some(zxid) {
                    zk.storing = None;
                    // The stored state is durable up to its zxid.
                    zk.durable = zk.durable.max(zxid.to_wire());
                    self.ack_durable_zk();
                }
            }
        }
    }

    /// A participant looks for a leader: a new election round, from its
    /// current epoch and the last zxid it logged.
    fn start_zk_election(&mut self) {
        let last = self.last_logged_zk();
        let now = self.now.mono_ms;
        let zk = self.zk.as_mut().expect("a ZooKeeper member");
        let epoch = zk.current_epoch;
        if let Some(e) = &mut zk.election {
            e.start(now, epoch, last);
            self.drive_zk_election();
        }
    }

    /// Time passes for a participant's election.
    pub(super) fn tick_zk_election(&mut self) {
        let now = self.now.mono_ms;
        if let Some(e) = self.zk.as_mut().and_then(|zk| zk.election.as_mut()) {
            e.on_tick(now);
            self.drive_zk_election();
        }
    }

    /// Carries out what the election asks, and follows the leader it
    /// decided on.
    fn drive_zk_election(&mut self) {
        let zk = self.zk.as_mut().expect("a ZooKeeper member");
        let Some(e) = &mut zk.election else {
            return;
        };
        for super::zk_election::ElectionOut::Send { to, n } in e.take_outputs() {
            self.out.push(Output::SendVote { to, n });
        }
        if let super::zk_election::Standing::Following { leader } = e.standing() {
            if zk.phase == Phase::Down && zk.leader.is_none() {
                tracing::info!(
                    leader,
                    round = e.round(),
                    "elected: following ZooKeeper member {leader}"
                );
                zk.leader = Some(leader);
                self.out.push(Output::ZkFollow { leader });
            }
        }
    }

    /// The last zxid this member holds in its log: the last applied, or a
    /// proposal logged after it.
    fn last_logged_zk(&self) -> i64 {
        let applied = self.server.last_zxid().to_wire();
        let zk = self.zk.as_ref().expect("a ZooKeeper member");
        zk.logged.back().map_or(applied, |l| l.zxid.max(applied))
    }

    /// Every `Persist` up to `zxid` is durable.
    pub(super) fn on_zk_durable(&mut self, zxid: Zxid) {
        let zk = self.zk.as_mut().expect("a ZooKeeper member");
        // A report that was on its way when the log was cut back may name
        // a record that is gone (and may be proposed again).
        zk.durable = zk.durable.max(zxid.to_wire().min(zk.persisted));
        self.ack_durable_zk();
    }

    /// A participant acknowledges what is durable: NEWLEADER first (once
    /// the state it synced is stored and every txn logged before it is
    /// durable, as ZooKeeper's follower logs them before that ACK), then
    /// each proposal logged since, in order.
    fn ack_durable_zk(&mut self) {
        let zk = self.zk.as_mut().expect("a ZooKeeper member");
        if !zk.participant() {
            return;
        }
        if let Some((newleader, needs)) = zk.newleader_ack {
            if zk.storing.is_some() || zk.durable < needs {
                return;
            }
            zk.newleader_ack = None;
            self.send_zk(Payload::Ack.to_packet(newleader));
        }
        let zk = self.zk.as_mut().expect("a ZooKeeper member");
        let mut acks = Vec::new();
        while let Some(&z) = zk.unacked.front() {
            if z > zk.durable {
                break;
            }
            zk.unacked.pop_front();
            acks.push(z);
        }
        for z in acks {
            self.send_zk(Payload::Ack.to_packet(z));
        }
    }

    /// A participant logs a proposal (to be acknowledged once durable,
    /// when NEWLEADER came) and keeps it until its COMMIT.
    fn log_proposal_zk(&mut self, t: &TxnEntry) {
        if self.zk.as_ref().expect("a ZooKeeper member").logged_bytes > LOGGED_BYTES_MAX {
            return self.drop_zk(&format!(
                "over {LOGGED_BYTES_MAX} bytes of proposals logged and not committed"
            ));
        }
        let last = self.last_logged_zk();
        if t.header.zxid <= last {
            return self.drop_zk(&format!(
                "a proposal of {:#x}, not after {last:#x} already logged",
                t.header.zxid
            ));
        }
        let Some(l) = self.zk_record(t) else {
            return;
        };
        self.out.push(Output::Persist {
            zxid: Zxid::from_wire(l.zxid),
            record: l.record.clone(),
        });
        let zk = self.zk.as_mut().expect("a ZooKeeper member");
        zk.persisted = l.zxid;
        if zk.after_newleader {
            zk.unacked.push_back(l.zxid);
        }
        zk.logged_bytes += l.record.len();
        zk.logged.push_back(l);
    }

    /// A participant applies the logged proposal `zxid` the leader
    /// committed: the oldest one logged.
    fn commit_logged_zk(&mut self, zxid: i64) {
        if Zxid::from_wire(zxid) <= self.server.last_zxid() {
            return;
        }
        let zk = self.zk.as_mut().expect("a ZooKeeper member");
        let front = zk.logged.pop_front();
        if let Some(l) = &front {
            zk.logged_bytes -= l.record.len();
        }
        match front {
            Some(l) if l.zxid == zxid => self.commit_record_zk(l),
            Some(l) => {
                let next = l.zxid;
                self.drop_zk(&format!(
                    "COMMIT of {zxid:#x} while the oldest proposal is {next:#x}"
                ))
            }
            None => self.drop_zk(&format!("COMMIT of {zxid:#x} with no proposal")),
        }
    }

    /// The leader's sync says every proposal logged up to `upto` is in
    /// its history (DIFF, or TRUNC to a zxid at or after it): they are
    /// committed; those after `upto` are dropped, from the log too.
    fn settle_logged_zk(&mut self, upto: i64) {
        let zk = self.zk.as_mut().expect("a ZooKeeper member");
        let logged: Vec<Logged> = zk.logged.drain(..).collect();
        zk.logged_bytes = 0;
        if logged.iter().any(|l| l.zxid > upto) {
            self.out.push(Output::Truncate {
                after: Zxid::from_wire(upto),
            });
            // What was durable after `upto` is gone: a leader that proposes
            // those zxids again gets its ACKs only once they are durable
            // again.
            zk.durable = zk.durable.min(upto);
            zk.persisted = upto;
        }
        for l in logged.into_iter().filter(|l| l.zxid <= upto) {
            self.commit_record_zk(l);
        }
    }

    /// The version of the quorum config this member holds (`version=` of
    /// a dynamic config), for LearnerInfo.
    fn config_version(&self) -> i64 {
        self.server
            .tree()
            .get_data(crate::server::reconfig::CONFIG_NODE)
            .and_then(|(data, _)| data)
            .and_then(|d| {
                let text = String::from_utf8(d).ok()?;
                crate::quorum_config::QuorumConfig::parse(&text).ok()
            })
            .map_or(0, |c| c.version)
    }

    fn send_zk(&mut self, p: QuorumPacket) {
        self.out.push(Output::SendZk(p));
    }

    /// Ends the link to the leader (the shell finds one again) after a
    /// packet this learner cannot take.
    fn drop_zk(&mut self, why: &str) {
        tracing::warn!("leaving the ZooKeeper leader: {why}");
        self.out.push(Output::CloseZk);
        self.on_zk(ZkInput::Down);
    }

    /// Drops the state and the link: the next leader syncs this member
    /// from nothing (SNAP). What an in-memory observer does where a
    /// ZooKeeper learner would truncate its log, or cannot take a txn.
    fn start_afresh(&mut self, why: &str) {
        tracing::warn!("dropping this observer's state to be synced afresh: {why}");
        self.install_zk_state(DataTree::new(), Vec::new(), Zxid::ZERO);
        self.drop_zk(why);
    }

    /// Makes `tree` and `sessions` the state at `zxid` (the leader's
    /// snapshot, or nothing), and has it stored in place of the snapshots
    /// and log before it, as ZooKeeper's learner takes a snapshot of what
    /// SNAP brought. Unlike ZooKeeper's learner, which writes that
    /// snapshot before it acknowledges NEWLEADER, this one leaves the
    /// writing to the background (`Output::StoreInstalled`): an observer's
    /// ACK counts towards no quorum, and the shell holds the txns logged
    /// after it until it is durable, so a crash in between restarts from
    /// the state stored before and is synced again.
    fn install_zk_state(&mut self, tree: DataTree, sessions: Vec<SessionRecord>, zxid: Zxid) {
        self.server
            .install_snapshot(tree, sessions, crate::recipe::RecipeWaits::default(), zxid);
        let job = self.server.snapshot_job();
        self.out.push(Output::StoreInstalled(Box::new(job)));
        let zk = self.zk.as_mut().expect("a ZooKeeper member");
        // The installed state replaces whatever was logged (the shell
        // drops the log after `zxid`); a participant acknowledges
        // NEWLEADER only once it is stored.
        zk.logged.clear();
        zk.logged_bytes = 0;
        zk.durable = zk.durable.min(zxid.to_wire());
        zk.persisted = zxid.to_wire();
        if zk.participant() {
            zk.storing = Some(zxid);
        }
        self.drain_server();
    }

    fn on_zk_packet(&mut self, p: QuorumPacket) {
        let payload = match Payload::decode(&p, Direction::FromLeader) {
            Ok(pl) => pl,
            Err(e) => return self.drop_zk(&format!("an undecodable packet: {e}")),
        };
        let zk = self.zk.as_mut().expect("checked by on_zk");
        match (zk.phase, payload) {
            (Phase::Epoch, Payload::LeaderInfo { protocol_version }) => {
                if protocol_version < ZAB_PROTOCOL_VERSION {
                    return self.fail(format!(
                        "the ZooKeeper leader speaks Zab protocol {protocol_version:#x}, older than 3.4's {ZAB_PROTOCOL_VERSION:#x}: not supported"
                    ));
                }
                let new_epoch = p.zxid >> 32;
                // As ZooKeeper's `Learner.registerWithLeader`: a newer
                // epoch is accepted (stored) and acknowledged with the
                // current one; the same one with -1; an older one is a
                // leader this member cannot follow.
                let current = match new_epoch.cmp(&zk.accepted_epoch) {
                    std::cmp::Ordering::Greater => {
                        zk.accepted_epoch = new_epoch;
                        self.out.push(Output::StoreAcceptedEpoch {
                            epoch: new_epoch as u32,
                        });
                        zk.current_epoch as i32
                    }
                    std::cmp::Ordering::Equal => -1,
                    std::cmp::Ordering::Less => {
                        let accepted = zk.accepted_epoch;
                        return self.drop_zk(&format!(
                            "the leader's epoch {new_epoch} is older than the epoch {accepted} this member accepted"
                        ));
                    }
                };
                zk.new_epoch = new_epoch;
                zk.phase = Phase::Sync;
                let last = self.last_logged_zk();
                self.send_zk(
                    Payload::AckEpoch {
                        current_epoch: current,
                    }
                    .to_packet(last),
                );
            }
            (Phase::Sync, Payload::Diff) => {
                tracing::info!(
                    "the ZooKeeper leader syncs this member by DIFF to {:#x}",
                    p.zxid
                );
                // The leader has this member's last logged zxid in its
                // history: what it logged is committed.
                let last = self.last_logged_zk();
                self.settle_logged_zk(last);
            }
            (Phase::Sync, Payload::Snap) => {
                tracing::info!(
                    "the ZooKeeper leader syncs this member by SNAP at {:#x}",
                    p.zxid
                );
                zk.snap_zxid = Some(p.zxid)
            }
            (Phase::Sync, Payload::Trunc) => {
                tracing::info!(
                    "the ZooKeeper leader syncs this member by TRUNC to {:#x}",
                    p.zxid
                );
                let last = self.server.last_zxid().to_wire();
                if p.zxid < last && zk.participant() {
                    // As ZooKeeper's follower: cut the log back and reload
                    // the state from disk; what the leader sends next
                    // waits for it. Nothing logged and not applied is
                    // below `last`.
                    tracing::info!(
                        "the leader asks to truncate to {:#x}, below {last:#x} applied here: reloading",
                        p.zxid
                    );
                    zk.logged.clear();
                    zk.logged_bytes = 0;
                    zk.reloading = Some((Zxid::from_wire(p.zxid), VecDeque::new()));
                    zk.durable = zk.durable.min(p.zxid);
                    zk.persisted = p.zxid;
                    self.out.push(Output::ZkReload {
                        upto: Zxid::from_wire(p.zxid),
                    });
                } else if p.zxid < last {
                    self.start_afresh(&format!(
                        "the leader asks to truncate to {:#x}, below {last:#x} already applied here",
                        p.zxid
                    ));
                } else {
                    self.settle_logged_zk(p.zxid);
                }
            }
            (Phase::Sync, Payload::Proposal(t)) if zk.after_newleader => self.log_proposal_zk(&t),
            (Phase::Sync, Payload::Proposal(_)) if zk.proposals.len() >= PACKETS_HELD_MAX => {
                self.drop_zk("too many proposals of the sync without their COMMIT")
            }
            (Phase::Sync, Payload::Proposal(t)) => zk.proposals.push_back(t),
            (Phase::Sync, Payload::Commit | Payload::CommitAndActivate { .. })
                if zk.after_newleader =>
            {
                self.commit_logged_zk(p.zxid)
            }
            (Phase::Sync, Payload::Commit) => match zk.proposals.pop_front() {
                Some(t) if t.header.zxid == p.zxid => self.apply_zk(&t),
                Some(t) => {
                    let want = t.header.zxid;
                    self.drop_zk(&format!(
                        "COMMIT of {:#x} while the next proposal is {want:#x}",
                        p.zxid
                    ));
                }
                None => self.drop_zk(&format!("COMMIT of {:#x} with no proposal", p.zxid)),
            },
            (Phase::Sync, Payload::NewLeader { config }) => {
                // ZooKeeper's learner stores the new epoch as current
                // before acknowledging NEWLEADER.
                if zk.current_epoch != zk.new_epoch {
                    zk.current_epoch = zk.new_epoch;
                    self.out.push(Output::StoreCurrentEpoch {
                        epoch: zk.new_epoch as u32,
                    });
                }
                if zk.participant() {
                    // As ZooKeeper's follower: the proposals of the sync
                    // not committed yet are logged now, and NEWLEADER is
                    // acknowledged once they (and a state SNAP brought)
                    // are durable; each of them is acknowledged after.
                    zk.after_newleader = true;
                    let held: Vec<TxnEntry> = zk.proposals.drain(..).collect();
                    for t in &held {
                        self.log_proposal_zk(t);
                    }
                    let needs = self.last_logged_zk();
                    let zk = self.zk.as_mut().expect("checked by on_zk");
                    zk.newleader_ack = Some((p.zxid, needs));
                    self.ack_durable_zk();
                } else {
                    self.send_zk(Payload::Ack.to_packet(p.zxid));
                }
                if let Some(c) = config.filter(|c| !c.is_empty()) {
                    self.zk_membership(c);
                }
            }
            (Phase::Sync, Payload::UpToDate) => {
                if zk.snap_zxid.is_some() {
                    return self.drop_zk("UPTODATE before the snapshot SNAP announced");
                }
                zk.phase = Phase::Serving;
                if zk.current_epoch != zk.new_epoch {
                    zk.current_epoch = zk.new_epoch;
                    self.out.push(Output::StoreCurrentEpoch {
                        epoch: zk.new_epoch as u32,
                    });
                }
                let leader = zk.leader.expect("a connected learner has a leader");
                let epoch = zk.new_epoch;
                let participant = zk.participant();
                self.send_zk(Payload::Ack.to_packet(epoch << 32));
                tracing::info!(
                    leader,
                    zxid = %self.server.last_zxid(),
                    "{} the ZooKeeper ensemble",
                    if participant { "following in" } else { "observing" }
                );
                let role = if participant {
                    Role::Follower { leader }
                } else {
                    Role::Observer { leader }
                };
                self.feed_server(server::Input::Role(role));
            }
            (Phase::Sync | Phase::Serving, Payload::Inform(t))
            | (Phase::Sync | Phase::Serving, Payload::InformAndActivate { txn: t, .. }) => {
                self.apply_zk(&t)
            }
            (Phase::Serving, Payload::Ping(_)) => {
                let touched = std::mem::take(&mut zk.touched);
                let touches = touched
                    .into_iter()
                    .filter_map(|id| {
                        let s = self.server.sessions().get(id)?;
                        Some((id, s.timeout_ms))
                    })
                    .collect();
                self.send_zk(Payload::Ping(touches).to_packet(p.zxid));
            }
            (Phase::Serving, Payload::RevalidateReply { session_id, valid }) => {
                if zk.revalidating.remove(&session_id) {
                    let txn = if valid {
                        Txn::Noop
                    } else {
                        Txn::Error {
                            errs: vec![ErrorCode::SessionExpired.code()],
                        }
                    };
                    self.feed_server(server::Input::Answered {
                        session: session_id,
                        cxid: 0,
                        txn,
                    });
                } else if !valid {
                    tracing::info!(
                        "the ZooKeeper leader says session 0x{session_id:x}, re-attached here, is not valid"
                    );
                }
            }
            (Phase::Serving, Payload::Sync) => match zk.syncs.pop_front() {
                Some((session, cxid)) => self.feed_server(server::Input::Answered {
                    session,
                    cxid,
                    txn: Txn::Noop,
                }),
                None => tracing::warn!("a SYNC from the ZooKeeper leader with no sync pending"),
            },
            (Phase::Serving, Payload::Proposal(t)) if zk.participant() => self.log_proposal_zk(&t),
            (Phase::Serving, Payload::Commit | Payload::CommitAndActivate { .. })
                if zk.participant() =>
            {
                self.commit_logged_zk(p.zxid)
            }
            // ZooKeeper's observer ignores these (Observer.processPacket).
            (Phase::Serving, Payload::Proposal(_) | Payload::Commit | Payload::UpToDate) => {}
            (Phase::Sync, Payload::Ping(_)) => {}
            (phase, other) => {
                tracing::warn!(
                    ?phase,
                    "an unexpected packet from the ZooKeeper leader: {other:?}"
                );
            }
        }
    }

    /// A ZooKeeper txn as wazoo's log record; `None` for a txn this
    /// member cannot take, which makes it sync afresh.
    fn zk_record(&mut self, t: &TxnEntry) -> Option<Logged> {
        let txn = match zk_txn(&t.txn, t.header.client_id, self.server.tree()) {
            Ok(txn) => txn,
            Err(why) => {
                self.start_afresh(&format!(
                    "its txn {:#x} cannot be applied here: {why}",
                    t.header.zxid
                ));
                return None;
            }
        };
        // A reconfig (or a plain write of the node): the voters to look
        // for a leader among next time.
        let membership = match &txn {
            Txn::SetData {
                path,
                data: Some(d),
                ..
            } if path == crate::server::reconfig::CONFIG_NODE => Some(d.clone()),
            _ => None,
        };
        let record = TxnRecord {
            header: TxnHeader {
                session_id: t.header.client_id,
                cxid: t.header.cxid,
                zxid: t.header.zxid,
                time_ms: t.header.time,
            },
            txn,
        };
        Some(Logged {
            zxid: t.header.zxid,
            record: record.encode(),
            digest: t.digest,
            membership,
        })
    }

    /// The ensemble's membership changed (NEWLEADER's, or a reconfig's):
    /// the shell and a participant's election take it.
    fn zk_membership(&mut self, text: Vec<u8>) {
        if let Some(e) = self.zk.as_mut().and_then(|zk| zk.election.as_mut()) {
            let parsed = std::str::from_utf8(&text)
                .map_err(|e| e.to_string())
                .and_then(crate::quorum_config::QuorumConfig::parse);
            match parsed.and_then(|c| Ok((c.voters(), c.quorum_rule()?))) {
                Ok((voters, rule)) if !voters.is_empty() => e.set_voters(voters, rule),
                Ok(_) => tracing::warn!("a ZooKeeper membership without voters: not taken"),
                Err(err) => {
                    tracing::warn!("the ZooKeeper ensemble's membership does not read: {err}")
                }
            }
        }
        self.out.push(Output::ZkMembership(text));
    }

    /// Applies a committed ZooKeeper txn through the pipeline.
    fn apply_zk(&mut self, t: &TxnEntry) {
        if Zxid::from_wire(t.header.zxid) <= self.server.last_zxid() {
            return;
        }
        let Some(l) = self.zk_record(t) else {
            return;
        };
        // Logged after it is applied, as ZooKeeper's observer logs what it
        // commits (`ObserverZooKeeperServer.commitRequest`): it
        // acknowledges nothing, so nothing waits for the log.
        self.out.push(Output::Persist {
            zxid: Zxid::from_wire(l.zxid),
            record: l.record.clone(),
        });
        self.zk.as_mut().expect("a ZooKeeper member").persisted = l.zxid;
        self.commit_record_zk(l);
    }

    /// Applies a committed txn's record (already logged).
    fn commit_record_zk(&mut self, l: Logged) {
        let Logged {
            zxid,
            record: bytes,
            digest,
            membership,
        } = l;
        let zxid = Zxid::from_wire(zxid);
        if let Some(j) = &mut self.applied {
            j.push(super::Applied::Txn {
                zxid,
                record: wazoo_zab::Payload::from(bytes.clone()),
            });
        }
        self.feed_server(server::Input::Committed {
            zxid,
            record: bytes,
        });
        if let Some(m) = membership {
            self.zk_membership(m);
        }
        // ZooKeeper's learners compare the leader's digest of the tree
        // after each txn with their own (`DataTree.compareDigest`): a
        // difference means the trees differ, which is logged and counted.
        if let Some(d) = digest.filter(|d| d.version == ZK_DIGEST_VERSION) {
            let ours = self.server.tree().digest();
            if self.server.last_zxid() == zxid && ours != d.tree_digest {
                tracing::error!(
                    zxid = %zxid,
                    leader = d.tree_digest,
                    ours,
                    "the tree's digest differs from the ZooKeeper leader's after this txn"
                );
                self.server.count_digest_mismatch();
            }
        }
    }

    /// REVALIDATE: the leader touches the session and takes this member
    /// as its owner, and answers whether it lives.
    fn revalidate_with_zk(&mut self, session: i64) {
        let timeout_ms = self.server.attached_timeout_ms(session).unwrap_or(0);
        self.send_zk(
            Payload::RevalidateRequest {
                session_id: session,
                timeout_ms,
            }
            .to_packet(-1),
        );
    }

    /// What the pipeline sends its leader, as ZooKeeper's learner sends it.
    pub(super) fn forward_to_zk_leader(&mut self, msg: PeerMsg) {
        let zk = self
            .zk
            .as_mut()
            .expect("only a ZooKeeper observer forwards to ZooKeeper");
        if zk.phase != Phase::Serving {
            // The pipeline fails what it forwarded when the role changes.
            tracing::debug!("no ZooKeeper leader to forward to");
            return;
        }
        match msg {
            PeerMsg::Forward {
                session,
                cxid,
                auth,
                op,
                body,
                local: _,
            } => {
                if op == OP_SYNC {
                    zk.syncs.push_back((session, cxid));
                }
                zk.touched.insert(session);
                let r = ForwardedRequest {
                    session_id: session,
                    cxid,
                    op,
                    body,
                    authinfo: Some(auth),
                };
                self.send_zk(Payload::Request(r).to_packet(-1));
            }
            PeerMsg::CreateSession {
                session,
                timeout_ms,
                verifier: _,
            } => {
                zk.touched.insert(session);
                let r = ForwardedRequest {
                    session_id: session,
                    cxid: 0,
                    op: OP_CREATE_SESSION,
                    body: timeout_ms.to_be_bytes().to_vec(),
                    authinfo: None,
                };
                self.send_zk(Payload::Request(r).to_packet(-1));
            }
            PeerMsg::Revalidate { session } => {
                zk.revalidating.insert(session);
                self.revalidate_with_zk(session);
            }
            PeerMsg::Touch { sessions, claimed } => {
                zk.touched.extend(sessions.iter().copied());
                zk.touched.extend(claimed.iter().copied());
                // A session that moved here: the leader learns its new
                // owner before any write the client sends here (the link
                // is FIFO), as ZooKeeper's learner revalidates on every
                // re-attach.
                for session in claimed {
                    self.revalidate_with_zk(session);
                }
            }
            PeerMsg::Plugin(_) => {
                tracing::warn!(
                    "the plugins directory cannot deploy recipes behind a ZooKeeper leader"
                );
            }
            // A ZooKeeper leader has no such txn: the asker is told.
            PeerMsg::Restore(r) => self.out.push(Output::Restored {
                token: r.token,
                zxid: self.server.last_zxid(),
                error: Some(
                    "an observer of a ZooKeeper ensemble cannot restore: ask the ensemble's own AdminServer"
                        .into(),
                ),
            }),
        }
    }
}

/// The leader an observer follows, from the votes voters answered it
/// with (`FastLeaderElection.lookForLeader`, as an observer): the one a
/// quorum of `voters` (by `rule`: majorities, or `group.N` and
/// `weight.N`) follow or lead under, in the same epoch, and that says
/// itself that it leads. `None` while no such leader shows.
pub fn zk_leader_of(
    voters: &[u64],
    rule: &wazoo_zab::QuorumRule,
    votes: &std::collections::BTreeMap<u64, wazoo_zkquorum::Notification>,
) -> Option<u64> {
    use wazoo_zkquorum::PeerState;
    let settled = |v: &wazoo_zkquorum::Notification| {
        matches!(v.state, PeerState::Following | PeerState::Leading)
    };
    let mut tally: std::collections::BTreeMap<(i64, i64), Vec<u64>> = Default::default();
    for (sid, v) in votes {
        if voters.contains(sid) && settled(v) {
            tally
                .entry((v.leader, v.peer_epoch()))
                .or_default()
                .push(*sid);
        }
    }
    tally
        .into_iter()
        .filter(|(_, ids)| rule.contains_quorum(voters, ids))
        .find_map(|((leader, epoch), _)| {
            let l = u64::try_from(leader).ok()?;
            let own = votes.get(&l)?;
            (own.state == PeerState::Leading && own.peer_epoch() == epoch).then_some(l)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use wazoo_storage::zookeeper::{Create, CreateKind, ZkTxn};
    use wazoo_zkquorum::{Notification, PeerState};

    fn vote(state: PeerState, leader: i64) -> Notification {
        Notification::current(state, leader, 0x1_0000_0005, 3, 1, Vec::new())
    }

    // Administrator's Guide, "Observers": an observer follows the leader
    // the voters follow; a leader only a minority names, or one that does
    // not say itself that it leads, is not followed yet.
    #[test]
    fn an_observer_follows_the_leader_a_quorum_of_voters_names() {
        let voters = [1, 2, 3];
        let mut votes = BTreeMap::new();
        votes.insert(1, vote(PeerState::Following, 3));
        assert_eq!(
            zk_leader_of(&voters, &MAJ, &votes),
            None,
            "one voter of three"
        );
        votes.insert(2, vote(PeerState::Following, 3));
        assert_eq!(
            zk_leader_of(&voters, &MAJ, &votes),
            None,
            "the leader has not said so"
        );
        votes.insert(3, vote(PeerState::Leading, 3));
        assert_eq!(zk_leader_of(&voters, &MAJ, &votes), Some(3));
        let mut looking = BTreeMap::new();
        for sid in 1..=3 {
            looking.insert(sid, vote(PeerState::Looking, 3));
        }
        assert_eq!(
            zk_leader_of(&voters, &MAJ, &looking),
            None,
            "voters still electing"
        );
        // A vote from a non-voter (another observer) does not count.
        let mut two = BTreeMap::new();
        two.insert(3, vote(PeerState::Leading, 3));
        two.insert(9, vote(PeerState::Observing, 3));
        assert_eq!(zk_leader_of(&voters, &MAJ, &two), None);
    }

    const MAJ: wazoo_zab::QuorumRule = wazoo_zab::QuorumRule::Majority;

    // Administrator's Guide, "Cluster Options" (group.x, weight.x): with
    // hierarchical quorums the leader is the one a quorum of groups, by
    // weight, follows; a voter of weight 0 adds nothing.
    #[test]
    fn an_observer_counts_votes_by_the_ensembles_groups_and_weights() {
        let voters = [1, 2, 3];
        let h = wazoo_zab::Hierarchy::new(
            &voters,
            &[],
            &[(1, vec![1, 2, 3])],
            &[(1, 1), (2, 1), (3, 0)],
        )
        .unwrap();
        let rule = wazoo_zab::QuorumRule::Hierarchical(h);
        let mut votes = BTreeMap::new();
        votes.insert(3, vote(PeerState::Leading, 3));
        votes.insert(2, vote(PeerState::Following, 3));
        assert_eq!(
            zk_leader_of(&voters, &MAJ, &votes),
            Some(3),
            "two of three, by majority"
        );
        assert_eq!(
            zk_leader_of(&voters, &rule, &votes),
            None,
            "weight 1 of 2: not a quorum"
        );
        votes.insert(1, vote(PeerState::Following, 3));
        assert_eq!(zk_leader_of(&voters, &rule, &votes), Some(3));
    }

    /// The ACKEPOCH and the epoch stores among `out`.
    fn epoch_outputs(out: Vec<Output>) -> (Option<i32>, Vec<u32>, bool) {
        let mut ack = None;
        let mut stored = Vec::new();
        let mut closed = false;
        for o in out {
            match o {
                Output::SendZk(p) => {
                    if let Ok(Payload::AckEpoch { current_epoch }) =
                        Payload::decode(&p, Direction::FromLearner)
                    {
                        ack = Some(current_epoch);
                    }
                }
                Output::StoreAcceptedEpoch { epoch } => stored.push(epoch),
                Output::CloseZk => closed = true,
                _ => {}
            }
        }
        (ack, stored, closed)
    }

    // ZooKeeper Internals, "Atomic Broadcast" (Phase 1: discovery), as
    // ZooKeeper's learner registers: a newer epoch is stored before it is
    // acknowledged with the current epoch, the same epoch again is
    // acknowledged with -1, and an older one is refused. A restart starts
    // from the stored epochs.
    #[test]
    fn a_new_epoch_is_stored_before_it_is_acknowledged() {
        let now = crate::time::Now::default();
        let info = |epoch: i64| {
            let p = Payload::LeaderInfo {
                protocol_version: ZAB_PROTOCOL_VERSION,
            }
            .to_packet(epoch << 32);
            crate::member::Input::Zk(ZkInput::Packet(p))
        };
        let connect = crate::member::Input::Zk(ZkInput::Connected { leader: 1 });
        let server = crate::server::Server::new(Default::default(), now);
        let mut m = Member::zookeeper_observer(server, test_start());
        m.handle(connect, now);
        m.handle(info(5), now);
        assert_eq!(epoch_outputs(m.take_outputs()), (Some(0), vec![5], false));
        m.handle(crate::member::Input::Zk(ZkInput::Down), now);
        m.handle(
            crate::member::Input::Zk(ZkInput::Connected { leader: 1 }),
            now,
        );
        m.handle(info(5), now);
        assert_eq!(epoch_outputs(m.take_outputs()), (Some(-1), vec![], false));

        let server = crate::server::Server::new(Default::default(), now);
        let mut start = test_start();
        start.accepted_epoch = 7;
        start.current_epoch = 6;
        let mut m = Member::zookeeper_observer(server, start);
        m.handle(
            crate::member::Input::Zk(ZkInput::Connected { leader: 1 }),
            now,
        );
        m.handle(info(5), now);
        assert_eq!(
            epoch_outputs(m.take_outputs()),
            (None, vec![], true),
            "a leader older than the accepted epoch"
        );
        m.handle(
            crate::member::Input::Zk(ZkInput::Connected { leader: 2 }),
            now,
        );
        m.handle(info(8), now);
        assert_eq!(epoch_outputs(m.take_outputs()), (Some(6), vec![8], false));
    }

    fn create(ephemeral: bool, parent_cversion: i32) -> ZkTxn {
        ZkTxn::Create {
            op: 1,
            create: Create {
                path: "/a".into(),
                data: None,
                acl: None,
                parent_cversion,
                kind: CreateKind::Plain { ephemeral },
            },
        }
    }

    // ZooKeeper Internals, "Atomic Broadcast": every member applies the
    // leader's txns as they are; an ephemeral belongs to the txn's session
    // and a null ACL is ZooKeeper's open one.
    #[test]
    fn zookeeper_txns_become_the_same_changes_in_wazoo() {
        let tree = DataTree::new();
        let Txn::Create(c) = zk_txn(&create(true, 4), 0x42, &tree).unwrap() else {
            panic!("a create");
        };
        assert_eq!(c.ephemeral_owner, 0x42);
        assert_eq!(c.parent_cversion, 4);
        assert_eq!(c.acl.len(), 1);
        assert_eq!(c.acl[0].id.scheme, "world");
        assert_eq!(c.data, None, "null data stays null");
        let Txn::Create(c) = zk_txn(&create(false, -1), 0x42, &tree).unwrap() else {
            panic!("a create");
        };
        assert_eq!(c.ephemeral_owner, 0);
        assert_eq!(
            c.parent_cversion,
            tree.stored_cversion("/").unwrap() + 1,
            "a create without a parent cversion takes the parent's next"
        );
    }

    // Programmer's Guide, "Multi": a failed multi's ops are all error
    // txns, each the result its op gets.
    #[test]
    fn a_failed_multi_carries_each_ops_result() {
        let failed = ZkTxn::Multi(vec![
            ZkTxn::Error { err: 0 },
            ZkTxn::Error { err: -110 },
            ZkTxn::Error { err: -2 },
        ]);
        assert_eq!(
            zk_txn(&failed, 1, &DataTree::new()).unwrap(),
            Txn::Error {
                errs: vec![0, -110, -2]
            }
        );
        let ok = ZkTxn::Multi(vec![create(false, 1), ZkTxn::Delete { path: "/a".into() }]);
        let Txn::Multi(ops) = zk_txn(&ok, 1, &DataTree::new()).unwrap() else {
            panic!("a multi");
        };
        assert_eq!(ops.len(), 2);
    }

    // ZooKeeper Internals, "Atomic Broadcast" (a learner synced by SNAP
    // acknowledges NEWLEADER, then applies what the leader sends after
    // UPTODATE); Administrator's Guide, "Cluster Options", initLimit. The
    // state SNAP brought goes to the shell to store in the background
    // (`StoreInstalled`, never the synchronous `InstallSnapshot`), the ACK
    // of NEWLEADER right behind it, and the txns after it as `Persist`s,
    // which the shell holds until that snapshot is durable.
    #[test]
    fn a_snap_sync_stores_its_state_in_the_background_and_acks_at_once() {
        use wazoo_storage::zookeeper::TxnHeader as ZkHeader;
        let now = crate::time::Now::default();
        let server = crate::server::Server::new(Default::default(), now);
        let mut m = Member::zookeeper_observer(server, test_start());
        let zk = |input| crate::member::Input::Zk(input);
        let packet = |pl: Payload, zxid: i64| zk(ZkInput::Packet(pl.to_packet(zxid)));
        let snap_at = (1i64 << 32) | 7;
        m.handle(zk(ZkInput::Connected { leader: 1 }), now);
        let info = Payload::LeaderInfo {
            protocol_version: ZAB_PROTOCOL_VERSION,
        };
        m.handle(packet(info, 1 << 32), now);
        m.handle(packet(Payload::Snap, snap_at), now);
        let _ = m.take_outputs();
        let spec = |path: &str| crate::tree::NodeSpec {
            path: path.into(),
            kind: crate::tree::ZnodeType::Persistent,
            czxid: snap_at,
            mzxid: snap_at,
            pzxid: snap_at,
            ctime: 0,
            mtime: 0,
            version: 0,
            stored_cversion: 0,
            aversion: 0,
            acl: Vec::new(),
            data: Some(b"v".to_vec()),
        };
        let tree = DataTree::from_nodes(vec![spec("/"), spec("/s")]).unwrap();
        m.handle(
            zk(ZkInput::Snapshot {
                tree: Box::new(tree),
                sessions: Vec::new(),
            }),
            now,
        );
        m.handle(packet(Payload::NewLeader { config: None }, 1 << 32), now);
        m.handle(packet(Payload::UpToDate, 0), now);
        let inform = TxnEntry {
            header: ZkHeader {
                client_id: 1,
                cxid: 1,
                zxid: snap_at + 1,
                time: 0,
                op: 1,
            },
            txn: create(false, -1),
            digest: None,
        };
        m.handle(packet(Payload::Inform(inform), snap_at + 1), now);
        assert!(m.fatal().is_none(), "{:?}", m.fatal());
        let outs = m.take_outputs();
        let at = |f: &dyn Fn(&Output) -> bool| outs.iter().position(f);
        assert!(
            at(&|o| matches!(o, Output::InstallSnapshot { .. })).is_none(),
            "nothing is stored before the next output: {outs:?}"
        );
        let stored =
            at(&|o| matches!(o, Output::StoreInstalled(j) if j.zxid == Zxid::from_wire(snap_at)))
                .expect("the installed state is stored");
        let Output::StoreInstalled(job) = &outs[stored] else {
            unreachable!()
        };
        assert_eq!(
            job.tree.node_count(),
            2,
            "the leader's tree (/ and /s) is stored"
        );
        assert!(
            m.server().tree().get_data("/a").is_some(),
            "the INFORM applied"
        );
        let ack = at(&|o| {
            matches!(o, Output::SendZk(p) if p.kind == wazoo_zkquorum::kind::ACK && p.zxid == 1 << 32)
        })
        .expect("NEWLEADER is acknowledged");
        let persist = at(
            &|o| matches!(o, Output::Persist { zxid, .. } if *zxid == Zxid::from_wire(snap_at + 1)),
        )
        .expect("the INFORM after the sync is logged");
        assert!(stored < ack && ack < persist, "{outs:?}");
    }

    fn participant() -> Member {
        let now = crate::time::Now::default();
        let server = crate::server::Server::new(Default::default(), now);
        let mut start = test_start();
        start.voters = Some((vec![1, 2, 4], wazoo_zab::QuorumRule::Majority));
        let mut m = Member::zookeeper_observer(server, start);
        let _ = m.take_outputs();
        m
    }

    /// The zxids of the ACKs among `out`.
    fn acks(out: &[Output]) -> Vec<i64> {
        out.iter()
            .filter_map(|o| match o {
                Output::SendZk(p) if p.kind == wazoo_zkquorum::kind::ACK => Some(p.zxid),
                _ => None,
            })
            .collect()
    }

    fn entry(zxid: i64) -> TxnEntry {
        use wazoo_storage::zookeeper::TxnHeader as ZkHeader;
        TxnEntry {
            header: ZkHeader {
                client_id: 1,
                cxid: 1,
                zxid,
                time: 0,
                op: 1,
            },
            txn: ZkTxn::Create {
                op: 1,
                create: Create {
                    path: format!("/n{}", zxid & 0xff),
                    data: None,
                    acl: None,
                    parent_cversion: -1,
                    kind: CreateKind::Plain { ephemeral: false },
                },
            },
            digest: None,
        }
    }

    // ZooKeeper Internals, "Atomic Broadcast" (a follower acknowledges a
    // proposal once it is on its disk, and NEWLEADER once the history
    // the leader synced it with is): a participant sends FOLLOWERINFO,
    // holds the ACK of NEWLEADER until what it logged is durable, logs
    // each proposal at once, acknowledges it only when it is durable, and
    // applies it at its COMMIT.
    #[test]
    fn a_participant_acknowledges_what_is_durable_and_applies_what_is_committed() {
        let now = crate::time::Now::default();
        let zk = |input| crate::member::Input::Zk(input);
        let packet = |pl: Payload, zxid: i64| zk(ZkInput::Packet(pl.to_packet(zxid)));
        let durable = |z: i64| crate::member::Input::Durable {
            zxid: Zxid::from_wire(z),
        };
        let e = 1i64 << 32;
        let mut m = participant();
        m.handle(zk(ZkInput::Connected { leader: 1 }), now);
        let out = m.take_outputs();
        assert!(
            out.iter().any(
                |o| matches!(o, Output::SendZk(p) if p.kind == wazoo_zkquorum::kind::FOLLOWERINFO)
            ),
            "{out:?}"
        );
        let info = Payload::LeaderInfo {
            protocol_version: ZAB_PROTOCOL_VERSION,
        };
        m.handle(packet(info, e), now);
        m.handle(packet(Payload::Diff, 0), now);
        m.handle(packet(Payload::Proposal(entry(e | 1)), e | 1), now);
        m.handle(packet(Payload::Commit, e | 1), now);
        m.handle(packet(Payload::Proposal(entry(e | 2)), e | 2), now);
        m.handle(packet(Payload::NewLeader { config: None }, e), now);
        let out = m.take_outputs();
        assert!(acks(&out).is_empty(), "nothing durable yet: {out:?}");
        let logged: Vec<Zxid> = out
            .iter()
            .filter_map(|o| match o {
                Output::Persist { zxid, .. } => Some(*zxid),
                _ => None,
            })
            .collect();
        assert_eq!(logged, vec![Zxid::from_wire(e | 1), Zxid::from_wire(e | 2)]);
        m.handle(durable(e | 1), now);
        assert!(acks(&m.take_outputs()).is_empty(), "e|2 is not durable yet");
        m.handle(durable(e | 2), now);
        assert_eq!(
            acks(&m.take_outputs()),
            vec![e, e | 2],
            "NEWLEADER, then the proposal"
        );
        m.handle(packet(Payload::UpToDate, 0), now);
        assert_eq!(acks(&m.take_outputs()), vec![e]);
        assert!(m.server().tree().get_data("/n1").is_some());
        assert!(m.server().tree().get_data("/n2").is_none(), "not committed");
        m.handle(packet(Payload::Commit, e | 2), now);
        assert!(m.server().tree().get_data("/n2").is_some());
        m.handle(packet(Payload::Proposal(entry(e | 3)), e | 3), now);
        assert!(acks(&m.take_outputs()).is_empty());
        m.handle(durable(e | 3), now);
        assert_eq!(acks(&m.take_outputs()), vec![e | 3]);
        assert!(m.fatal().is_none());
    }

    /// A participant connected to leader 1, in its epoch 1, being synced
    /// by DIFF.
    fn diff_synced_participant() -> Member {
        let now = crate::time::Now::default();
        let mut m = participant();
        m.handle(
            crate::member::Input::Zk(ZkInput::Connected { leader: 1 }),
            now,
        );
        for p in [
            Payload::LeaderInfo {
                protocol_version: ZAB_PROTOCOL_VERSION,
            }
            .to_packet(1 << 32),
            Payload::Diff.to_packet(0),
        ] {
            m.handle(crate::member::Input::Zk(ZkInput::Packet(p)), now);
        }
        m
    }

    /// A participant synced by DIFF in epoch 1 that logged the
    /// proposals `e|1` and `e|2` (none committed) before its leader went.
    fn participant_with_logged_proposals() -> Member {
        let now = crate::time::Now::default();
        let zk = |input| crate::member::Input::Zk(input);
        let packet = |pl: Payload, zxid: i64| zk(ZkInput::Packet(pl.to_packet(zxid)));
        let e = 1i64 << 32;
        let mut m = diff_synced_participant();
        m.handle(packet(Payload::NewLeader { config: None }, e), now);
        m.handle(packet(Payload::UpToDate, 0), now);
        m.handle(packet(Payload::Proposal(entry(e | 1)), e | 1), now);
        m.handle(packet(Payload::Proposal(entry(e | 2)), e | 2), now);
        m.handle(zk(ZkInput::Down), now);
        let _ = m.take_outputs();
        m
    }

    /// Reconnects `m` to a leader of epoch 2 and returns the zxid its
    /// ACKEPOCH reports.
    fn reconnect(m: &mut Member) -> i64 {
        let now = crate::time::Now::default();
        m.handle(
            crate::member::Input::Zk(ZkInput::Connected { leader: 2 }),
            now,
        );
        let info = Payload::LeaderInfo {
            protocol_version: ZAB_PROTOCOL_VERSION,
        };
        m.handle(
            crate::member::Input::Zk(ZkInput::Packet(info.to_packet(2 << 32))),
            now,
        );
        m.take_outputs()
            .into_iter()
            .find_map(|o| match o {
                Output::SendZk(p) if p.kind == wazoo_zkquorum::kind::ACKEPOCH => Some(p.zxid),
                _ => None,
            })
            .expect("ACKEPOCH")
    }

    // ZooKeeper Internals, "Atomic Broadcast" (a follower's history is
    // its log, committed or not; the next leader's sync decides what of
    // it stays): proposals a participant logged stay its history when
    // the leader goes. It reports the last of them to the next leader, a
    // DIFF commits them, and a TRUNC drops those after its zxid, from
    // the log too, and commits the rest.
    #[test]
    fn logged_proposals_outlive_a_leader_until_the_next_one_syncs_them() {
        let now = crate::time::Now::default();
        let e = 1i64 << 32;
        let mut m = participant_with_logged_proposals();
        assert!(m.server().tree().get_data("/n1").is_none());
        assert_eq!(reconnect(&mut m), e | 2, "the last zxid logged");
        let diff = Payload::Diff.to_packet(e | 2);
        m.handle(crate::member::Input::Zk(ZkInput::Packet(diff)), now);
        assert!(m.server().tree().get_data("/n1").is_some());
        assert!(m.server().tree().get_data("/n2").is_some());

        let mut m = participant_with_logged_proposals();
        assert_eq!(reconnect(&mut m), e | 2);
        let trunc = Payload::Trunc.to_packet(e | 1);
        m.handle(crate::member::Input::Zk(ZkInput::Packet(trunc)), now);
        let out = m.take_outputs();
        assert!(
            out.iter().any(
                |o| matches!(o, Output::Truncate { after } if *after == Zxid::from_wire(e | 1))
            ),
            "{out:?}"
        );
        assert!(m.server().tree().get_data("/n1").is_some());
        assert!(m.server().tree().get_data("/n2").is_none(), "truncated");
        // The leader proposes e|2 again (it was outstanding there): its
        // ACK waits until it is durable again, though it was before.
        let zk = |input| crate::member::Input::Zk(input);
        let packet = |pl: Payload, zxid: i64| zk(ZkInput::Packet(pl.to_packet(zxid)));
        m.handle(
            crate::member::Input::Durable {
                zxid: Zxid::from_wire(e | 2),
            },
            now,
        );
        m.handle(packet(Payload::NewLeader { config: None }, 2 << 32), now);
        m.handle(packet(Payload::UpToDate, 0), now);
        let _ = m.take_outputs();
        m.handle(packet(Payload::Proposal(entry(e | 2)), e | 2), now);
        assert!(
            acks(&m.take_outputs()).is_empty(),
            "logged again, not yet durable"
        );
        m.handle(
            crate::member::Input::Durable {
                zxid: Zxid::from_wire(e | 2),
            },
            now,
        );
        assert_eq!(acks(&m.take_outputs()), vec![e | 2]);
        assert!(m.fatal().is_none());
    }

    // ZooKeeper Internals, "Atomic Broadcast", as ZooKeeper's learner
    // takes a TRUNC below what it applied (after a restart replayed
    // proposals never committed): a participant cuts its log back and
    // reloads its state from disk (`ZkReload`), holding what the leader
    // sends meanwhile, which it applies on the reloaded state; a reload
    // that does not reach the TRUNC's zxid makes it sync from nothing.
    #[test]
    fn a_truncation_below_what_was_applied_reloads_the_state_from_disk() {
        let now = crate::time::Now::default();
        let zk = |input| crate::member::Input::Zk(input);
        let packet = |pl: Payload, zxid: i64| zk(ZkInput::Packet(pl.to_packet(zxid)));
        let e = 1i64 << 32;
        let synced_to = |last: i64| {
            let mut m = diff_synced_participant();
            for n in 1..=last {
                m.handle(packet(Payload::Proposal(entry(e | n)), e | n), now);
                m.handle(packet(Payload::Commit, e | n), now);
            }
            m.handle(zk(ZkInput::Down), now);
            let _ = m.take_outputs();
            m
        };
        let synced_to_two = || {
            let mut m = synced_to(2);
            assert_eq!(reconnect(&mut m), e | 2);
            m
        };
        // The state as of e|1, as the disk gives it.
        let tree = Box::new(synced_to(1).server().tree().read_only_copy());

        let mut m = synced_to_two();
        m.handle(packet(Payload::Trunc, e | 1), now);
        let out = m.take_outputs();
        assert!(
            out.iter()
                .any(|o| matches!(o, Output::ZkReload { upto } if *upto == Zxid::from_wire(e | 1))),
            "{out:?}"
        );
        let e2 = 2i64 << 32;
        m.handle(packet(Payload::Proposal(entry(e2 | 1)), e2 | 1), now);
        m.handle(packet(Payload::Commit, e2 | 1), now);
        assert_eq!(
            m.server().last_zxid(),
            Zxid::from_wire(e | 2),
            "nothing applied while reloading"
        );
        m.handle(
            zk(ZkInput::Reloaded {
                tree,
                sessions: Vec::new(),
                zxid: Zxid::from_wire(e | 1),
            }),
            now,
        );
        assert!(m.server().tree().get_data("/n2").is_none(), "truncated");
        assert_eq!(
            m.server().last_zxid(),
            Zxid::from_wire(e2 | 1),
            "the held packets applied"
        );
        assert!(m.fatal().is_none());

        let mut m = synced_to_two();
        m.handle(packet(Payload::Trunc, e | 1), now);
        let _ = m.take_outputs();
        m.handle(
            zk(ZkInput::Reloaded {
                tree: Box::new(DataTree::new()),
                sessions: Vec::new(),
                zxid: Zxid::ZERO,
            }),
            now,
        );
        let out = m.take_outputs();
        assert!(
            out.iter().any(|o| matches!(o, Output::CloseZk)),
            "a reload short of the TRUNC syncs afresh: {out:?}"
        );
    }

    // Nothing a leader sends may grow a member's memory without bound: a
    // leader that proposes without committing loses its link once the
    // proposals held pass their bound (smaller under test), in a sync and
    // after it.
    #[test]
    fn a_leader_that_proposes_without_committing_loses_its_link() {
        let now = crate::time::Now::default();
        let packet =
            |pl: Payload, zxid: i64| crate::member::Input::Zk(ZkInput::Packet(pl.to_packet(zxid)));
        let e = 1i64 << 32;
        let closed = |m: &mut Member| {
            m.take_outputs()
                .iter()
                .any(|o| matches!(o, Output::CloseZk))
        };
        let mut m = diff_synced_participant();
        let _ = m.take_outputs();
        for n in 1..=PACKETS_HELD_MAX as i64 {
            m.handle(packet(Payload::Proposal(entry(e | n)), e | n), now);
        }
        assert!(!closed(&mut m), "within the bound");
        let n = PACKETS_HELD_MAX as i64 + 1;
        m.handle(packet(Payload::Proposal(entry(e | n)), e | n), now);
        assert!(closed(&mut m), "past the bound of a sync's proposals");

        let mut m = diff_synced_participant();
        m.handle(packet(Payload::NewLeader { config: None }, e), now);
        let _ = m.take_outputs();
        let mut n = 0;
        while !closed(&mut m) {
            n += 1;
            assert!(n < 100_000, "the logged proposals are never bounded");
            m.handle(packet(Payload::Proposal(entry(e | n)), e | n), now);
        }
        assert!(n > 10, "{n} proposals");
        assert!(m.fatal().is_none());
    }

    fn test_start() -> super::ZkObserverStart {
        super::ZkObserverStart {
            my_id: 4,
            accepted_epoch: 0,
            current_epoch: 0,
            voters: None,
        }
    }

    // Nothing a leader sends may stop the member or panic it: random
    // packets of every type, in any order, after a connection.
    proptest::proptest! {
        #[test]
        fn any_packets_from_a_leader_leave_the_observer_standing(
            packets in proptest::collection::vec(
                (1i32..=20, proptest::prelude::any::<i64>(), proptest::option::of(proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64))),
                0..40,
            )
        ) {
            let server = crate::server::Server::new(Default::default(), crate::time::Now::default());
            let mut m = Member::zookeeper_observer(server, test_start());
            m.handle(crate::member::Input::Zk(ZkInput::Connected { leader: 1 }), crate::time::Now::default());
            for (kind, zxid, data) in packets {
                let p = QuorumPacket { kind, zxid, data, authinfo: None };
                m.handle(crate::member::Input::Zk(ZkInput::Packet(p)), crate::time::Now::default());
                let _ = m.take_outputs();
            }
            proptest::prop_assert!(m.fatal().is_none() || m.fatal().is_some_and(|f| f.contains("Zab protocol")));
        }
    }

    fn arb_txn() -> impl proptest::strategy::Strategy<Value = ZkTxn> {
        use proptest::prelude::*;
        let path = prop::sample::select(vec!["/a", "/a/b", "/c", "/zookeeper", "/", "/a/b/c"])
            .prop_map(str::to_string);
        prop_oneof![
            (path.clone(), any::<bool>(), -1i32..3).prop_map(|(p, e, cv)| ZkTxn::Create {
                op: 1,
                create: Create {
                    path: p,
                    data: Some(b"x".to_vec()),
                    acl: None,
                    parent_cversion: cv,
                    kind: CreateKind::Plain { ephemeral: e },
                },
            }),
            path.clone().prop_map(|p| ZkTxn::Delete { path: p }),
            (path.clone(), -1i32..3).prop_map(|(p, v)| ZkTxn::SetData {
                path: p,
                data: None,
                version: v,
            }),
            (1i32..10_000).prop_map(|t| ZkTxn::CreateSession { timeout_ms: t }),
            Just(ZkTxn::CloseSession { paths: None }),
            (-120i32..1).prop_map(|err| ZkTxn::Error { err }),
        ]
    }

    fn arb_entry() -> impl proptest::strategy::Strategy<Value = TxnEntry> {
        use proptest::prelude::*;
        use wazoo_storage::zookeeper::TxnHeader as ZkHeader;
        (arb_txn(), 1i64..6, 1i64..4, 0i32..3).prop_map(|(txn, n, session, cxid)| TxnEntry {
            header: ZkHeader {
                client_id: session,
                cxid,
                zxid: (1 << 32) | n,
                time: 0,
                op: 1,
            },
            txn,
            digest: None,
        })
    }

    fn arb_payload() -> impl proptest::strategy::Strategy<Value = (Payload, i64)> {
        use proptest::prelude::*;
        let zxid = prop_oneof![Just(0i64), (1i64..6).prop_map(|n| (1 << 32) | n)];
        (
            prop_oneof![
                Just(Payload::LeaderInfo {
                    protocol_version: ZAB_PROTOCOL_VERSION
                }),
                Just(Payload::Diff),
                Just(Payload::Snap),
                Just(Payload::Trunc),
                Just(Payload::NewLeader { config: None }),
                Just(Payload::UpToDate),
                Just(Payload::Commit),
                Just(Payload::Sync),
                Just(Payload::Ping(Vec::new())),
                (1i64..4, any::<bool>()).prop_map(|(session_id, valid)| {
                    Payload::RevalidateReply { session_id, valid }
                }),
                arb_entry().prop_map(Payload::Proposal),
                arb_entry().prop_map(Payload::Inform),
            ],
            zxid,
        )
    }

    // The same, with well-formed packets of every kind a leader sends, in
    // any order and with any txns (a leader may be wrong; a member that
    // cannot take a txn syncs again from nothing, and never stops).
    proptest::proptest! {
        #[test]
        fn any_well_formed_packets_from_a_leader_leave_the_learner_standing(
            steps in proptest::collection::vec(
                (arb_payload(), proptest::prelude::any::<u8>()),
                0..60,
            ),
            as_participant in proptest::prelude::any::<bool>(),
        ) {
            let now = crate::time::Now::default();
            let mut m = if as_participant {
                participant()
            } else {
                let server = crate::server::Server::new(Default::default(), now);
                Member::zookeeper_observer(server, test_start())
            };
            m.handle(crate::member::Input::Zk(ZkInput::Connected { leader: 1 }), now);
            for ((payload, zxid), roll) in steps {
                let input = match roll % 16 {
                    0 => ZkInput::Down,
                    1 => ZkInput::Connected { leader: 1 },
                    2 => ZkInput::Snapshot { tree: Box::new(DataTree::new()), sessions: Vec::new() },
                    3 => ZkInput::Stored { zxid: Zxid::from_wire(zxid) },
                    4 => {
                        m.handle(crate::member::Input::Durable { zxid: Zxid::from_wire(zxid) }, now);
                        continue;
                    }
                    _ => ZkInput::Packet(payload.to_packet(zxid)),
                };
                m.handle(crate::member::Input::Zk(input), now);
                m.handle(crate::member::Input::Tick, now);
                let _ = m.take_outputs();
                proptest::prop_assert!(m.fatal().is_none(), "stopped: {:?}", m.fatal());
            }
        }
    }
}
