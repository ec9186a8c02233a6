//! The quorum port: jute `QuorumPacket`s, back to back on the stream with
//! no other framing (`zookeeper.jute`, module
//! `org.apache.zookeeper.server.quorum`):
//!
//! ```text
//! QuorumPacket := type:int zxid:long data:buffer authinfo:vector<Id>
//! Id           := scheme:ustring id:ustring
//! LearnerInfo  := serverid:long protocolVersion:int configVersion:long
//! ```
//!
//! A learner (follower or observer) opens the connection and the exchange
//! goes, per `Learner` and `LearnerHandler` ("ZooKeeper Internals", Zab's
//! phases; "Administrator's Guide, Observers"):
//!
//! 1. learner: FOLLOWERINFO or OBSERVERINFO (zxid: its accepted epoch
//!    `<< 32`; data: [`LearnerInfo`]);
//! 2. leader: LEADERINFO (zxid: the new epoch `<< 32`; data: its protocol
//!    version); learner: ACKEPOCH (zxid: its last logged zxid; data: its
//!    current epoch, or -1);
//! 3. leader: DIFF, TRUNC (zxid: where to truncate to) or SNAP (zxid: the
//!    snapshot's; then, *outside* any packet, the snapshot stream that
//!    `wazoo_storage::zookeeper::parse_sync_snapshot` reads); then for a
//!    DIFF, PROPOSAL/COMMIT pairs; then NEWLEADER (data: the quorum
//!    config); learner: ACK (zxid: the NEWLEADER's); leader: UPTODATE;
//!    learner: ACK (zxid: the new epoch `<< 32`);
//! 4. broadcast: PROPOSAL, ACK and COMMIT with followers; INFORM (the
//!    committed txn) with observers; COMMITANDACTIVATE and
//!    INFORMANDACTIVATE for a reconfig; PING from the leader, echoed by
//!    the learner with its session touches; REQUEST (a client's write, or
//!    a sync) forwarded by the learner; REVALIDATE for a client
//!    reconnecting to the learner; SYNC answering a forwarded sync.
//!
//! [`QuorumPacket`] is the frame; [`Payload`] the meaning of its data for
//! each type, which depends on who sent it ([`Direction`]).

use wazoo_proto::jute::Reader;
use wazoo_proto::records::Id;
use wazoo_storage::zookeeper::{decode_entry, encode_entry, TxnEntry};

use crate::{Error, Limits};

/// Packet types (`Leader`'s constants).
pub mod kind {
    pub const REQUEST: i32 = 1;
    pub const PROPOSAL: i32 = 2;
    pub const ACK: i32 = 3;
    pub const COMMIT: i32 = 4;
    pub const PING: i32 = 5;
    pub const REVALIDATE: i32 = 6;
    pub const SYNC: i32 = 7;
    pub const INFORM: i32 = 8;
    pub const COMMITANDACTIVATE: i32 = 9;
    pub const NEWLEADER: i32 = 10;
    pub const FOLLOWERINFO: i32 = 11;
    pub const UPTODATE: i32 = 12;
    pub const DIFF: i32 = 13;
    pub const TRUNC: i32 = 14;
    pub const SNAP: i32 = 15;
    pub const OBSERVERINFO: i32 = 16;
    pub const LEADERINFO: i32 = 17;
    pub const ACKEPOCH: i32 = 18;
    pub const INFORMANDACTIVATE: i32 = 19;

    /// The name ZooKeeper's logs give a type.
    pub fn name(kind: i32) -> Option<&'static str> {
        Some(match kind {
            REQUEST => "REQUEST",
            PROPOSAL => "PROPOSAL",
            ACK => "ACK",
            COMMIT => "COMMIT",
            PING => "PING",
            REVALIDATE => "REVALIDATE",
            SYNC => "SYNC",
            INFORM => "INFORM",
            COMMITANDACTIVATE => "COMMITANDACTIVATE",
            NEWLEADER => "NEWLEADER",
            FOLLOWERINFO => "FOLLOWERINFO",
            UPTODATE => "UPTODATE",
            DIFF => "DIFF",
            TRUNC => "TRUNC",
            SNAP => "SNAP",
            OBSERVERINFO => "OBSERVERINFO",
            LEADERINFO => "LEADERINFO",
            ACKEPOCH => "ACKEPOCH",
            INFORMANDACTIVATE => "INFORMANDACTIVATE",
            _ => return None,
        })
    }
}

/// One packet on the quorum port. `data` and `authinfo` keep jute's null
/// (`None`, written as -1) apart from empty, as ZooKeeper writes null for
/// packets built without them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumPacket {
    pub kind: i32,
    pub zxid: i64,
    pub data: Option<Vec<u8>>,
    pub authinfo: Option<Vec<Id>>,
}

/// Bytes of a packet's type and zxid.
const HEADER_LEN: usize = 4 + 8;

/// Reads a jute length or count (-1 for null) and checks it against
/// `limit` before any bytes are waited for; `Ok(None)` while the length
/// itself is not all there.
fn bounded_len(r: &mut Reader<'_>, what: &'static str, limit: usize) -> Result<Option<i32>, Error> {
    if r.remaining() < 4 {
        return Ok(None);
    }
    let len = r
        .read_i32()
        .map_err(|detail| Error::Jute { what, detail })?;
    if len < -1 || (len > 0 && len as usize > limit) {
        return Err(Error::Length {
            what,
            len: len.into(),
            limit,
        });
    }
    Ok(Some(len))
}

/// A jute buffer within `limit`: `Ok(None)` while incomplete, else the
/// bytes (`None` for null).
#[allow(clippy::type_complexity)]
fn bounded_buffer<'a>(
    r: &mut Reader<'a>,
    what: &'static str,
    limit: usize,
) -> Result<Option<Option<&'a [u8]>>, Error> {
    let mut peek = r.clone();
    let Some(len) = bounded_len(&mut peek, what, limit)? else {
        return Ok(None);
    };
    if len > 0 && peek.remaining() < len as usize {
        return Ok(None);
    }
    r.read_opt_buffer()
        .map(Some)
        .map_err(|detail| Error::Jute { what, detail })
}

impl QuorumPacket {
    pub fn new(kind: i32, zxid: i64, data: Option<Vec<u8>>) -> QuorumPacket {
        QuorumPacket {
            kind,
            zxid,
            data,
            authinfo: None,
        }
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.kind.to_be_bytes());
        out.extend_from_slice(&self.zxid.to_be_bytes());
        match &self.data {
            Some(d) => {
                out.extend_from_slice(&(d.len() as i32).to_be_bytes());
                out.extend_from_slice(d);
            }
            None => out.extend_from_slice(&(-1i32).to_be_bytes()),
        }
        match &self.authinfo {
            Some(ids) => {
                out.extend_from_slice(&(ids.len() as i32).to_be_bytes());
                for id in ids {
                    for s in [&id.scheme, &id.id] {
                        out.extend_from_slice(&(s.len() as i32).to_be_bytes());
                        out.extend_from_slice(s.as_bytes());
                    }
                }
            }
            None => out.extend_from_slice(&(-1i32).to_be_bytes()),
        }
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode(&mut out);
        out
    }

    /// Reads the packet at the start of `buf`: `Ok(None)` while `buf` holds
    /// only a prefix of one, else the packet and its length. Each length
    /// is checked against `limits` as soon as it is read, so a peer cannot
    /// make the caller buffer more than a packet within the limits.
    pub fn decode(buf: &[u8], limits: &Limits) -> Result<Option<(QuorumPacket, usize)>, Error> {
        if buf.len() < HEADER_LEN {
            return Ok(None);
        }
        let mut r = Reader::new(buf);
        let jute = |detail| Error::Jute {
            what: "quorum packet",
            detail,
        };
        let kind = r.read_i32().map_err(jute)?;
        let zxid = r.read_i64().map_err(jute)?;
        let Some(data) = bounded_buffer(&mut r, "quorum packet data", limits.max_buffer)? else {
            return Ok(None);
        };
        let data = data.map(<[u8]>::to_vec);
        let Some(count) = bounded_len(&mut r, "quorum packet authinfo", limits.max_authinfo)?
        else {
            return Ok(None);
        };
        let authinfo = if count < 0 {
            None
        } else {
            let mut ids = Vec::with_capacity(count as usize);
            for _ in 0..count {
                let mut pair = [String::new(), String::new()];
                for s in &mut pair {
                    let Some(b) = bounded_buffer(&mut r, "authinfo string", limits.max_buffer)?
                    else {
                        return Ok(None);
                    };
                    *s = String::from_utf8_lossy(b.unwrap_or_default()).into_owned();
                }
                let [scheme, id] = pair;
                ids.push(Id { scheme, id });
            }
            Some(ids)
        };
        Ok(Some((
            QuorumPacket {
                kind,
                zxid,
                data,
                authinfo,
            },
            r.position(),
        )))
    }

    /// What the packet's data means, for a packet sent in `dir`.
    pub fn payload(&self, dir: Direction) -> Result<Payload, Error> {
        Payload::decode(self, dir)
    }
}

/// Who sent a packet: the meaning of PING and REVALIDATE data depends on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    FromLeader,
    FromLearner,
}

/// `LearnerInfo`, the data of FOLLOWERINFO and OBSERVERINFO.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LearnerInfo {
    pub sid: i64,
    /// [`crate::ZAB_PROTOCOL_VERSION`] since 3.4.
    pub protocol_version: i32,
    /// The version of the learner's quorum config (`version=` of its
    /// dynamic config; 0 with a static config).
    pub config_version: i64,
}

/// A client request a learner forwards to the leader (`Learner.request`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForwardedRequest {
    pub session_id: i64,
    pub cxid: i32,
    /// The client opcode (`ZooDefs.OpCode`).
    pub op: i32,
    /// The request's record as the client sent it.
    pub body: Vec<u8>,
    /// The session's identities.
    pub authinfo: Option<Vec<Id>>,
}

/// What a packet carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Payload {
    FollowerInfo(LearnerInfo),
    ObserverInfo(LearnerInfo),
    /// The leader's Zab protocol version; the new epoch is in the zxid.
    LeaderInfo {
        protocol_version: i32,
    },
    /// The learner's current epoch (-1: "already acked this epoch"); its
    /// last logged zxid is in the zxid.
    AckEpoch {
        current_epoch: i32,
    },
    Diff,
    Trunc,
    /// The snapshot follows on the stream, outside any packet.
    Snap,
    /// The leader's quorum config (3.5+; `None` from older leaders).
    NewLeader {
        config: Option<Vec<u8>>,
    },
    UpToDate,
    Proposal(TxnEntry),
    Ack,
    Commit,
    Inform(TxnEntry),
    CommitAndActivate {
        suggested_leader: i64,
    },
    InformAndActivate {
        suggested_leader: i64,
        txn: TxnEntry,
    },
    /// From a learner: its sessions and their timeouts, for the leader to
    /// touch. From the leader: empty.
    Ping(Vec<(i64, i32)>),
    /// A learner asks whether a session a client reconnected with is valid.
    RevalidateRequest {
        session_id: i64,
        timeout_ms: i32,
    },
    /// The leader's answer.
    RevalidateReply {
        session_id: i64,
        valid: bool,
    },
    Request(ForwardedRequest),
    /// The leader's answer to a forwarded sync (the data is not used).
    Sync,
    /// A type ZooKeeper's learners and leaders skip.
    Unknown {
        kind: i32,
    },
}

fn fixed<const N: usize>(data: Option<&[u8]>, what: &'static str) -> Result<[u8; N], Error> {
    let d = data.unwrap_or_default();
    if d.len() < N {
        return Err(Error::malformed(
            what,
            format!("{} bytes, {N} needed", d.len()),
        ));
    }
    let mut a = [0u8; N];
    a.copy_from_slice(&d[..N]);
    Ok(a)
}

fn txn(data: Option<&[u8]>, what: &'static str) -> Result<TxnEntry, Error> {
    decode_entry(data.unwrap_or_default(), 0).map_err(|detail| Error::Storage { what, detail })
}

impl Payload {
    /// Reads `p`'s data. Fields are read as ZooKeeper's reader reads them:
    /// fixed-size data may carry bytes after what is read (ignored, as in
    /// Java), a PING's touches must fill its data exactly (Java's reader
    /// fails on a partial one).
    pub fn decode(p: &QuorumPacket, dir: Direction) -> Result<Payload, Error> {
        let data = p.data.as_deref();
        let learner_info = |what| -> Result<LearnerInfo, Error> {
            let b: [u8; 20] = fixed(data, what)?;
            Ok(LearnerInfo {
                sid: i64::from_be_bytes(b[..8].try_into().expect("8 bytes")),
                protocol_version: i32::from_be_bytes(b[8..12].try_into().expect("4 bytes")),
                config_version: i64::from_be_bytes(b[12..].try_into().expect("8 bytes")),
            })
        };
        Ok(match p.kind {
            kind::FOLLOWERINFO => Payload::FollowerInfo(learner_info("FOLLOWERINFO")?),
            kind::OBSERVERINFO => Payload::ObserverInfo(learner_info("OBSERVERINFO")?),
            kind::LEADERINFO => Payload::LeaderInfo {
                protocol_version: i32::from_be_bytes(fixed(data, "LEADERINFO")?),
            },
            kind::ACKEPOCH => Payload::AckEpoch {
                current_epoch: i32::from_be_bytes(fixed(data, "ACKEPOCH")?),
            },
            kind::DIFF => Payload::Diff,
            kind::TRUNC => Payload::Trunc,
            kind::SNAP => Payload::Snap,
            kind::NEWLEADER => Payload::NewLeader {
                config: p.data.clone(),
            },
            kind::UPTODATE => Payload::UpToDate,
            kind::PROPOSAL => Payload::Proposal(txn(data, "PROPOSAL txn")?),
            kind::ACK => Payload::Ack,
            kind::COMMIT => Payload::Commit,
            kind::INFORM => Payload::Inform(txn(data, "INFORM txn")?),
            kind::COMMITANDACTIVATE => Payload::CommitAndActivate {
                suggested_leader: i64::from_be_bytes(fixed(data, "COMMITANDACTIVATE")?),
            },
            kind::INFORMANDACTIVATE => {
                let b: [u8; 8] = fixed(data, "INFORMANDACTIVATE")?;
                Payload::InformAndActivate {
                    suggested_leader: i64::from_be_bytes(b),
                    txn: txn(data.map(|d| &d[8..]), "INFORMANDACTIVATE txn")?,
                }
            }
            kind::PING => {
                let d = data.unwrap_or_default();
                if !d.len().is_multiple_of(12) {
                    return Err(Error::malformed(
                        "PING",
                        format!("{} bytes are not whole (session, timeout) pairs", d.len()),
                    ));
                }
                Payload::Ping(
                    d.chunks_exact(12)
                        .map(|c| {
                            (
                                i64::from_be_bytes(c[..8].try_into().expect("8 bytes")),
                                i32::from_be_bytes(c[8..].try_into().expect("4 bytes")),
                            )
                        })
                        .collect(),
                )
            }
            kind::REVALIDATE => match dir {
                Direction::FromLearner => {
                    let b: [u8; 12] = fixed(data, "REVALIDATE")?;
                    Payload::RevalidateRequest {
                        session_id: i64::from_be_bytes(b[..8].try_into().expect("8 bytes")),
                        timeout_ms: i32::from_be_bytes(b[8..].try_into().expect("4 bytes")),
                    }
                }
                Direction::FromLeader => {
                    let b: [u8; 9] = fixed(data, "REVALIDATE")?;
                    Payload::RevalidateReply {
                        session_id: i64::from_be_bytes(b[..8].try_into().expect("8 bytes")),
                        valid: b[8] != 0,
                    }
                }
            },
            kind::REQUEST => {
                let b: [u8; 16] = fixed(data, "REQUEST")?;
                Payload::Request(ForwardedRequest {
                    session_id: i64::from_be_bytes(b[..8].try_into().expect("8 bytes")),
                    cxid: i32::from_be_bytes(b[8..12].try_into().expect("4 bytes")),
                    op: i32::from_be_bytes(b[12..].try_into().expect("4 bytes")),
                    body: data.map(|d| d[16..].to_vec()).unwrap_or_default(),
                    authinfo: p.authinfo.clone(),
                })
            }
            kind::SYNC => Payload::Sync,
            k => Payload::Unknown { kind: k },
        })
    }

    /// The packet that carries this payload, with `zxid`, built as
    /// ZooKeeper builds it (null data where it sends none).
    pub fn to_packet(&self, zxid: i64) -> QuorumPacket {
        let (kind, data) = match self {
            Payload::FollowerInfo(li) | Payload::ObserverInfo(li) => {
                let mut d = Vec::with_capacity(20);
                d.extend_from_slice(&li.sid.to_be_bytes());
                d.extend_from_slice(&li.protocol_version.to_be_bytes());
                d.extend_from_slice(&li.config_version.to_be_bytes());
                let k = if matches!(self, Payload::FollowerInfo(_)) {
                    kind::FOLLOWERINFO
                } else {
                    kind::OBSERVERINFO
                };
                (k, Some(d))
            }
            Payload::LeaderInfo { protocol_version } => (
                kind::LEADERINFO,
                Some(protocol_version.to_be_bytes().to_vec()),
            ),
            Payload::AckEpoch { current_epoch } => {
                (kind::ACKEPOCH, Some(current_epoch.to_be_bytes().to_vec()))
            }
            Payload::Diff => (kind::DIFF, None),
            Payload::Trunc => (kind::TRUNC, None),
            Payload::Snap => (kind::SNAP, None),
            Payload::NewLeader { config } => (kind::NEWLEADER, config.clone()),
            Payload::UpToDate => (kind::UPTODATE, None),
            Payload::Proposal(t) => (kind::PROPOSAL, Some(encode_entry(t))),
            Payload::Ack => (kind::ACK, None),
            Payload::Commit => (kind::COMMIT, None),
            Payload::Inform(t) => (kind::INFORM, Some(encode_entry(t))),
            Payload::CommitAndActivate { suggested_leader } => (
                kind::COMMITANDACTIVATE,
                Some(suggested_leader.to_be_bytes().to_vec()),
            ),
            Payload::InformAndActivate {
                suggested_leader,
                txn,
            } => {
                let mut d = suggested_leader.to_be_bytes().to_vec();
                d.extend_from_slice(&encode_entry(txn));
                (kind::INFORMANDACTIVATE, Some(d))
            }
            Payload::Ping(touches) => {
                let mut d = Vec::with_capacity(12 * touches.len());
                for (id, timeout) in touches {
                    d.extend_from_slice(&id.to_be_bytes());
                    d.extend_from_slice(&timeout.to_be_bytes());
                }
                (kind::PING, Some(d))
            }
            Payload::RevalidateRequest {
                session_id,
                timeout_ms,
            } => {
                let mut d = session_id.to_be_bytes().to_vec();
                d.extend_from_slice(&timeout_ms.to_be_bytes());
                (kind::REVALIDATE, Some(d))
            }
            Payload::RevalidateReply { session_id, valid } => {
                let mut d = session_id.to_be_bytes().to_vec();
                d.push(u8::from(*valid));
                (kind::REVALIDATE, Some(d))
            }
            Payload::Request(r) => {
                let mut d = Vec::with_capacity(16 + r.body.len());
                d.extend_from_slice(&r.session_id.to_be_bytes());
                d.extend_from_slice(&r.cxid.to_be_bytes());
                d.extend_from_slice(&r.op.to_be_bytes());
                d.extend_from_slice(&r.body);
                return QuorumPacket {
                    kind: kind::REQUEST,
                    zxid,
                    data: Some(d),
                    authinfo: r.authinfo.clone(),
                };
            }
            Payload::Sync => (kind::SYNC, None),
            Payload::Unknown { kind } => (*kind, None),
        };
        QuorumPacket::new(kind, zxid, data)
    }
}
