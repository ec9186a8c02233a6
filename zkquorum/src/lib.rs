//! Apache ZooKeeper 3.8's quorum protocol, as a codec a wazoo member can
//! speak to a running ZooKeeper ensemble (issue 27, live migration). It
//! is sans-io: bytes in, records out, and records to bytes; no sockets,
//! threads or clocks here. A wazoo member that observes a ZooKeeper
//! ensemble, or follows in one, speaks it (`core::member::zk`).
//!
//! A ZooKeeper server listens on two quorum ports ("Administrator's
//! Guide, Configuration Parameters", `server.x=host:port1:port2`):
//!
//! - the **election port** ([`election`]): `QuorumCnxManager`'s
//!   connection handshake, then length-framed messages that carry
//!   `FastLeaderElection`'s notifications (votes);
//! - the **quorum port** ([`packet`]): a stream of jute `QuorumPacket`s
//!   between a learner (follower or observer, `Learner`) and the leader
//!   (`LearnerHandler`), as "ZooKeeper Internals" describes Zab's
//!   phases: the learner's info, the new epoch (LEADERINFO, ACKEPOCH),
//!   the sync (DIFF, TRUNC or SNAP, then NEWLEADER and UPTODATE), then
//!   broadcast (PROPOSAL, ACK, COMMIT, and INFORM for observers), PINGs
//!   carrying session touches, REQUEST forwarding, REVALIDATE and SYNC.
//!
//! The txns inside PROPOSAL and INFORM and the snapshot that follows SNAP
//! are ZooKeeper's own on-disk encodings; they are read and written by
//! `wazoo_storage::zookeeper`, which `wazoo import` uses too.
//!
//! Every decoder treats its input as hostile: each length is checked
//! against a limit ([`Limits`], after ZooKeeper's own `jute.maxbuffer` and
//! `QuorumCnxManager`'s bounds) before anything is allocated, and bad
//! bytes give an [`Error`], never a panic. Stream decoders answer
//! `Ok(None)` when the bytes so far are a valid prefix of a record.
//!
//! Formats were read from ZooKeeper 3.8.4's `QuorumCnxManager`,
//! `FastLeaderElection`, `Learner`, `LearnerHandler`, `Leader`,
//! `Observer`, `ObserverMaster` and `zookeeper.jute`.

#![forbid(unsafe_code)]

pub mod election;
#[doc(hidden)]
pub mod fuzzing;
pub mod packet;

pub use election::{InitialMessage, Notification, PeerState, ProtocolVersion};
pub use packet::{kind, Direction, ForwardedRequest, LearnerInfo, Payload, QuorumPacket};

/// ZooKeeper's quorum protocol version, sent in LearnerInfo and LEADERINFO
/// (Zab 1.0, `0x10000`).
pub const ZAB_PROTOCOL_VERSION: i32 = 0x10000;

/// Why bytes from a peer could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A length or count past its limit (or negative where that is not
    /// null).
    #[error("{what}: length {len} is out of bounds (limit {limit})")]
    Length {
        what: &'static str,
        len: i64,
        limit: usize,
    },
    /// Bytes that are not of the format.
    #[error("malformed {what}: {detail}")]
    Malformed { what: &'static str, detail: String },
    /// A payload that ended early or had bytes left over.
    #[error("{what}: {detail}")]
    Jute {
        what: &'static str,
        detail: wazoo_proto::jute::DecodeError,
    },
    /// A txn or snapshot in ZooKeeper's on-disk encoding that does not
    /// decode.
    #[error("{what}: {detail}")]
    Storage {
        what: &'static str,
        detail: wazoo_storage::zookeeper::FormatError,
    },
}

impl Error {
    pub(crate) fn malformed(what: &'static str, detail: impl Into<String>) -> Error {
        Error::Malformed {
            what,
            detail: detail.into(),
        }
    }
}

/// Bounds on what a peer can make a decoder accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest buffer or string inside a QuorumPacket: ZooKeeper's
    /// `jute.maxbuffer` (default `0xfffff`) plus its `extraMaxBufferSize`
    /// (1024), which its `BinaryInputArchive` allows.
    pub max_buffer: usize,
    /// The most `authinfo` entries in one QuorumPacket.
    pub max_authinfo: usize,
    /// The largest message on the election port
    /// (`QuorumCnxManager.PACKETMAXSIZE`, 512 KiB).
    pub max_election_message: usize,
    /// The largest address string of the election handshake
    /// (`QuorumCnxManager.maxBuffer`, 2048).
    pub max_handshake_address: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_buffer: 0xfffff + 1024,
            max_authinfo: 1024,
            max_election_message: 512 * 1024,
            max_handshake_address: 2048,
        }
    }
}

#[cfg(test)]
mod tests;
