//! The messages members exchange, named after ZooKeeper's quorum packets.
//!
//! Two channels, as in ZooKeeper:
//! - the election channel carries [`Notification`]s. It may drop, duplicate
//!   and reorder them: fast leader election only keeps the latest vote per
//!   sender and round.
//! - the quorum channel carries everything else, over one FIFO connection
//!   per learner and leader (TCP). ZAB relies on that order: a PROPOSAL is
//!   received before its COMMIT, the sync messages before NEWLEADER. A lost
//!   message is only ever the tail of a connection that is then reported
//!   closed (`Input::Disconnected`).

use super::types::{Payload, ServerId, ServerState, Zxid};

/// A vote as ZooKeeper Internals, "Leader Election" describes it, plus the round it was cast in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Notification {
    /// The proposed leader's sid.
    pub leader: ServerId,
    /// The proposed leader's last logged zxid.
    pub zxid: Zxid,
    /// The proposed leader's currentEpoch (ZooKeeper's `peerEpoch`).
    pub peer_epoch: u32,
    /// The sender's election round (ZooKeeper's `logicalclock`).
    pub election_epoch: u64,
    /// The sender's state: a FOLLOWING/LEADING sender reports the leader it
    /// is with, so a LOOKING member can join an established leader.
    pub state: ServerState,
}

/// Which connection a message travels on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Channel {
    Election,
    Quorum,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// Election channel: a vote.
    Notification(Notification),
    /// Learner -> leader, first message of a session (FOLLOWERINFO, or
    /// OBSERVERINFO when `observer`): the learner's acceptedEpoch and last
    /// logged zxid.
    FollowerInfo {
        accepted_epoch: u32,
        last_zxid: Zxid,
        observer: bool,
    },
    /// Leader -> learner: the new epoch (LEADERINFO). `confirmed` says a
    /// quorum has already acknowledged it: a learner that already accepted
    /// exactly this epoch may then join (it is the one leader of the epoch);
    /// otherwise it acknowledges only an epoch later than its own.
    LeaderInfo { epoch: u32, confirmed: bool },
    /// Learner -> leader (ACKEPOCH): the learner accepted `epoch`; its
    /// currentEpoch and last logged zxid let the leader plan the sync and
    /// check that nobody in its quorum is ahead of it.
    AckEpoch {
        epoch: u32,
        current_epoch: u32,
        last_zxid: Zxid,
    },
    /// Leader -> learner: keep your log; the missing txns follow as
    /// proposals (DIFF).
    Diff,
    /// Leader -> learner: drop every txn after `zxid`, then the missing txns
    /// follow (TRUNC).
    Trunc { zxid: Zxid },
    /// Leader -> learner: replace your state with this snapshot of the
    /// state machine at `zxid` (SNAP); the txns after it follow.
    Snap { zxid: Zxid, data: Payload },
    /// Leader -> follower: log this txn (PROPOSAL; also used for the txns
    /// of a sync).
    Proposal { zxid: Zxid, payload: Payload },
    /// Leader -> learner: every txn up to `zxid` is committed (cumulative).
    Commit { zxid: Zxid },
    /// Leader -> learner: the sync is complete; your log now equals the
    /// leader's history up to `zxid` (NEWLEADER).
    NewLeader { epoch: u32, zxid: Zxid },
    /// Learner -> leader: currentEpoch is set and the synced history is
    /// durable (the ACK of NEWLEADER).
    AckNewLeader { epoch: u32 },
    /// Leader -> learner: start serving (UPTODATE).
    UpToDate,
    /// Follower -> leader: every proposal up to `zxid` is durable in my log
    /// (cumulative ACK).
    Ack { zxid: Zxid },
    /// Leader -> observer: a committed txn (INFORM).
    Inform { zxid: Zxid, payload: Payload },
    /// Heartbeat, leader -> learner and the learner's reply (PING).
    Ping,
    /// Learner -> leader: a client's `sync` (ZooKeeper's SYNC request).
    SyncRequest { token: u64 },
    /// Leader -> learner: every txn proposed before the matching request
    /// is committed and its COMMIT/INFORM precedes this on the link.
    SyncReply { token: u64 },
    /// Learner master (a follower) -> observer, before LEADERINFO: the
    /// leader this follower follows, the one the observer forwards its
    /// clients' writes to (ZooKeeper's observer learns it from the
    /// follower's quorum address; wazoo's pipeline talks to the leader
    /// directly).
    LearnerMaster { leader: ServerId },
}

impl Message {
    pub fn channel(&self) -> Channel {
        match self {
            Message::Notification(_) => Channel::Election,
            _ => Channel::Quorum,
        }
    }

    /// ZooKeeper's name for the packet, for logs and metrics.
    pub fn name(&self) -> &'static str {
        match self {
            Message::Notification(_) => "NOTIFICATION",
            Message::FollowerInfo {
                observer: false, ..
            } => "FOLLOWERINFO",
            Message::FollowerInfo { observer: true, .. } => "OBSERVERINFO",
            Message::LeaderInfo { .. } => "LEADERINFO",
            Message::AckEpoch { .. } => "ACKEPOCH",
            Message::Diff => "DIFF",
            Message::Trunc { .. } => "TRUNC",
            Message::Snap { .. } => "SNAP",
            Message::Proposal { .. } => "PROPOSAL",
            Message::Commit { .. } => "COMMIT",
            Message::NewLeader { .. } => "NEWLEADER",
            Message::AckNewLeader { .. } => "ACK(NEWLEADER)",
            Message::UpToDate => "UPTODATE",
            Message::Ack { .. } => "ACK",
            Message::Inform { .. } => "INFORM",
            Message::Ping => "PING",
            Message::SyncRequest { .. } => "SYNC",
            Message::SyncReply { .. } => "SYNC(reply)",
            Message::LearnerMaster { .. } => "LEARNERMASTER",
        }
    }
}
