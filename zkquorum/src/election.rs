//! The election port (`QuorumCnxManager`, `FastLeaderElection`).
//!
//! A server that connects to a peer's election port first sends an
//! [`InitialMessage`]; after it, each direction carries messages framed as
//! `length:int payload[length]` ([`decode_frame`], [`encode_frame`]), and
//! the payload of each is a [`Notification`]. A connection between two
//! servers survives only if the connecting side has the larger server id;
//! otherwise the receiver closes it and connects back (so an observer with
//! a larger id than every voter keeps the connection it opened).
//!
//! ```text
//! InitialMessage := protocolVersion:long sid:long length:int address[length]   (3.5+)
//!                 | sid:long                                                   (before 3.5)
//! protocolVersion:= -65536 (one "host:port") | -65535 (several, joined by '|')
//! Notification   := state:int leader:long zxid:long electionEpoch:long
//!                   [peerEpoch:long [version:int [configLength:int config[configLength]]]]
//! ```
//!
//! 3.8 sends protocol version -65536 unless `multiAddress.enabled` is set,
//! and notifications of version 2 carrying the sender's quorum config (the
//! text of its dynamic config, `server.N=...` lines and `version=`).
//! Older forms are still read: 28 bytes (before peerEpoch existed), 40
//! bytes (whose last 4, a version 1, are not read), and version 1 or
//! less in a longer message (no config).

use crate::{Error, Limits};

/// `QuorumCnxManager.PROTOCOL_VERSION_V1`: one election address.
pub const PROTOCOL_VERSION_V1: i64 = -65536;
/// `QuorumCnxManager.PROTOCOL_VERSION_V2`: several addresses
/// (`multiAddress.enabled`).
pub const PROTOCOL_VERSION_V2: i64 = -65535;
/// `FastLeaderElection.Notification.CURRENTVERSION`.
pub const NOTIFICATION_VERSION: i32 = 2;
/// The sid an observer without one sends (`QuorumPeer.OBSERVER_ID`).
pub const OBSERVER_ID: i64 = i64::MAX;

/// Which form of the connection handshake a server sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtocolVersion {
    /// Before 3.5: the sid alone.
    Legacy,
    /// `-65536`: one election address.
    V1,
    /// `-65535`: one or more election addresses.
    V2,
}

/// The first bytes a server sends on a connection it opened to a peer's
/// election port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitialMessage {
    pub version: ProtocolVersion,
    pub sid: i64,
    /// The sender's election addresses, `host:port` each (IPv6 hosts in
    /// brackets); empty for [`ProtocolVersion::Legacy`].
    pub addresses: Vec<String>,
}

fn be_i32(b: &[u8]) -> i32 {
    i32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

fn be_i64(b: &[u8]) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    i64::from_be_bytes(a)
}

/// Checks `host:port` as `ConfigUtils.getHostAndPort` and the port parse
/// of `InitialMessage.parse` would accept it (a port must be a number;
/// here it must also fit in 16 bits).
fn check_address(addr: &str) -> Result<(), Error> {
    let bad = || Error::malformed("election address", format!("{addr:?} is not host:port"));
    let (host, port) = if let Some(rest) = addr.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or_else(bad)?;
        (host, after.strip_prefix(':').ok_or_else(bad)?)
    } else {
        addr.split_once(':').ok_or_else(bad)?
    };
    if host.is_empty() || port.contains(':') || port.parse::<u16>().is_err() {
        return Err(bad());
    }
    Ok(())
}

impl InitialMessage {
    /// The handshake a 3.8 server with one election address sends.
    pub fn new(sid: i64, address: impl Into<String>) -> InitialMessage {
        InitialMessage {
            version: ProtocolVersion::V1,
            sid,
            addresses: vec![address.into()],
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self.version {
            ProtocolVersion::Legacy => out.extend_from_slice(&self.sid.to_be_bytes()),
            v => {
                let pv = if v == ProtocolVersion::V1 {
                    PROTOCOL_VERSION_V1
                } else {
                    PROTOCOL_VERSION_V2
                };
                out.extend_from_slice(&pv.to_be_bytes());
                out.extend_from_slice(&self.sid.to_be_bytes());
                let addr = self.addresses.join("|");
                out.extend_from_slice(&(addr.len() as i32).to_be_bytes());
                out.extend_from_slice(addr.as_bytes());
            }
        }
        out
    }

    /// Reads the handshake at the start of `buf`: `Ok(None)` while `buf`
    /// holds only a prefix of one, else the message and its length.
    pub fn decode(buf: &[u8], limits: &Limits) -> Result<Option<(InitialMessage, usize)>, Error> {
        if buf.len() < 8 {
            return Ok(None);
        }
        let first = be_i64(buf);
        if first >= 0 {
            return Ok(Some((
                InitialMessage {
                    version: ProtocolVersion::Legacy,
                    sid: first,
                    addresses: Vec::new(),
                },
                8,
            )));
        }
        let version = match first {
            PROTOCOL_VERSION_V1 => ProtocolVersion::V1,
            PROTOCOL_VERSION_V2 => ProtocolVersion::V2,
            v => {
                return Err(Error::malformed(
                    "election handshake",
                    format!("unknown protocol version {v}"),
                ))
            }
        };
        if buf.len() < 20 {
            return Ok(None);
        }
        let sid = be_i64(&buf[8..]);
        let len = be_i32(&buf[16..]);
        if len <= 0 || len as usize > limits.max_handshake_address {
            return Err(Error::Length {
                what: "election handshake address",
                len: len.into(),
                limit: limits.max_handshake_address,
            });
        }
        let end = 20 + len as usize;
        if buf.len() < end {
            return Ok(None);
        }
        let text = std::str::from_utf8(&buf[20..end])
            .map_err(|_| Error::malformed("election handshake address", "not UTF-8"))?;
        let addresses: Vec<String> = text.split('|').map(str::to_string).collect();
        for a in &addresses {
            check_address(a)?;
        }
        Ok(Some((
            InitialMessage {
                version,
                sid,
                addresses,
            },
            end,
        )))
    }
}

/// Frames one election message: its length, then its bytes.
pub fn encode_frame(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + payload.len());
    out.extend_from_slice(&(payload.len() as i32).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// Reads one framed election message at the start of `buf`: `Ok(None)`
/// while incomplete, else its payload and the bytes the frame took. A
/// length of 0, a negative one or one past
/// [`Limits::max_election_message`] is refused, as `RecvWorker` refuses it.
pub fn decode_frame<'a>(
    buf: &'a [u8],
    limits: &Limits,
) -> Result<Option<(&'a [u8], usize)>, Error> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let len = be_i32(buf);
    if len <= 0 || len as usize > limits.max_election_message {
        return Err(Error::Length {
            what: "election message",
            len: len.into(),
            limit: limits.max_election_message,
        });
    }
    let end = 4 + len as usize;
    if buf.len() < end {
        return Ok(None);
    }
    Ok(Some((&buf[4..end], end)))
}

/// A server's state as a notification carries it (`QuorumPeer.ServerState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerState {
    Looking = 0,
    Following = 1,
    Leading = 2,
    Observing = 3,
}

impl PeerState {
    pub fn from_i32(v: i32) -> Option<PeerState> {
        Some(match v {
            0 => PeerState::Looking,
            1 => PeerState::Following,
            2 => PeerState::Leading,
            3 => PeerState::Observing,
            _ => return None,
        })
    }
}

/// A vote (`FastLeaderElection.Notification`), in the forms a 3.8 server
/// reads: `peer_epoch` is `None` in the 28-byte form (no later field is
/// then written), `version` is `None` in the 40-byte form (whose last 4
/// bytes are not read), and `config` is read only when `version` is above
/// 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    pub state: PeerState,
    /// The proposed leader's sid.
    pub leader: i64,
    /// The proposed leader's last zxid.
    pub zxid: i64,
    /// The sender's election round (`logicalclock`).
    pub election_epoch: i64,
    pub peer_epoch: Option<i64>,
    pub version: Option<i32>,
    /// The sender's quorum config as text (`QuorumVerifier.toString`).
    pub config: Option<Vec<u8>>,
}

/// The shortest notification a 3.8 server reads.
const NOTIFICATION_MIN: usize = 28;

impl Notification {
    /// A notification as 3.8 sends it (version 2, with a config).
    pub fn current(
        state: PeerState,
        leader: i64,
        zxid: i64,
        election_epoch: i64,
        peer_epoch: i64,
        config: impl Into<Vec<u8>>,
    ) -> Notification {
        Notification {
            state,
            leader,
            zxid,
            election_epoch,
            peer_epoch: Some(peer_epoch),
            version: Some(NOTIFICATION_VERSION),
            config: Some(config.into()),
        }
    }

    /// The proposed leader's epoch, derived from its zxid in the 28-byte
    /// form, as `FastLeaderElection` derives it.
    pub fn peer_epoch(&self) -> i64 {
        self.peer_epoch.unwrap_or(self.zxid >> 32)
    }

    /// The message's bytes (to be framed with [`encode_frame`]). Fields
    /// after a missing one are not written.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(44 + self.config.as_ref().map_or(0, Vec::len));
        out.extend_from_slice(&(self.state as i32).to_be_bytes());
        for v in [self.leader, self.zxid, self.election_epoch] {
            out.extend_from_slice(&v.to_be_bytes());
        }
        let Some(pe) = self.peer_epoch else {
            return out;
        };
        out.extend_from_slice(&pe.to_be_bytes());
        let Some(version) = self.version else {
            // The 40-byte form: 3.4.6's buildMsg wrote version 1 here, and
            // a reader of a 40-byte message skips it.
            out.extend_from_slice(&1i32.to_be_bytes());
            return out;
        };
        out.extend_from_slice(&version.to_be_bytes());
        // A config length follows even for version 1 or less (where readers
        // ignore it): at 40 bytes the version would not be read at all.
        let config = self
            .config
            .as_deref()
            .filter(|_| version > 1)
            .unwrap_or_default();
        out.extend_from_slice(&(config.len() as i32).to_be_bytes());
        out.extend_from_slice(config);
        out
    }

    /// Reads a notification from one message's payload, as
    /// `FastLeaderElection.Messenger.WorkerReceiver` reads it: the form is
    /// told by the length (28, 40, or longer with a version); bytes after
    /// what the version defines are ignored, as there. A state ZooKeeper
    /// does not know is an error here (it drops the message).
    pub fn decode(msg: &[u8]) -> Result<Notification, Error> {
        if msg.len() < NOTIFICATION_MIN {
            return Err(Error::malformed(
                "notification",
                format!("{} bytes, fewer than {NOTIFICATION_MIN}", msg.len()),
            ));
        }
        let state_code = be_i32(msg);
        let state = PeerState::from_i32(state_code).ok_or_else(|| {
            Error::malformed("notification", format!("unknown state {state_code}"))
        })?;
        let mut n = Notification {
            state,
            leader: be_i64(&msg[4..]),
            zxid: be_i64(&msg[12..]),
            election_epoch: be_i64(&msg[20..]),
            peer_epoch: None,
            version: None,
            config: None,
        };
        if msg.len() == 28 {
            return Ok(n);
        }
        // Java reads peerEpoch, then (unless the message is exactly 40
        // bytes) the version: anything shorter underflows its buffer.
        if msg.len() < 40 {
            return Err(Error::malformed(
                "notification",
                format!("{} bytes end inside a field", msg.len()),
            ));
        }
        n.peer_epoch = Some(be_i64(&msg[28..]));
        if msg.len() == 40 {
            return Ok(n);
        }
        let version = be_i32(&msg[36..]);
        n.version = Some(version);
        if version > 1 {
            if msg.len() < 44 {
                return Err(Error::malformed(
                    "notification",
                    "the config length is cut off",
                ));
            }
            let len = be_i32(&msg[40..]);
            if len < 0 || len as usize > msg.len() - 44 {
                return Err(Error::Length {
                    what: "notification config",
                    len: len.into(),
                    limit: msg.len() - 44,
                });
            }
            n.config = Some(msg[44..44 + len as usize].to_vec());
        }
        Ok(n)
    }
}
