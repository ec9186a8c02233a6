//! What members' pipelines say to each other, beside ZAB: a follower
//! forwards its clients' writes (and new sessions) to the leader, and
//! reports which sessions it heard from. Encoded with jute primitives; a
//! peer's bytes are untrusted, so decoding checks every length.

use wazoo_proto::jute::{DecodeError, Reader, Writer};
use wazoo_proto::Id;

use super::deploy::PluginOp;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PeerMsg {
    /// A client write (or sync, or closeSession) for the leader to prep.
    /// `op` and `body` are the request as the client sent it. `local`:
    /// the session is local to the sender (`localSessionsEnabled`), so the
    /// leader does not know it (tag `FORWARD_LOCAL`).
    Forward {
        session: i64,
        cxid: i32,
        auth: Vec<Id>,
        op: i32,
        body: Vec<u8>,
        local: bool,
    },
    /// A new session a follower created for a client, with its
    /// password's verifier (`None` only from a member older than random
    /// passwords, tag `CREATE_SESSION`).
    CreateSession {
        session: i64,
        timeout_ms: i32,
        verifier: Option<crate::session::Verifier>,
    },
    /// A client re-attaches on a follower to a session it does not know
    /// yet: the leader answers with a txn for the session (a no-op if it
    /// lives, an error if not), after which the follower knows it and
    /// checks the password.
    Revalidate { session: i64 },
    /// Sessions that showed activity here since the last report; `claimed`
    /// re-attached here (their owner is now this member).
    Touch {
        sessions: Vec<i64>,
        claimed: Vec<i64>,
    },
    /// What this member's plugins directory asks for, for the leader to
    /// prep (docs/RECIPES.md, "The plugins directory").
    Plugin(PluginOp),
    /// The AdminServer's `restore`, asked of a follower, for the leader
    /// to propose (`super::restore`).
    Restore(Box<crate::txn::RestoreTxn>),
}

const FORWARD: i32 = 1;
const CREATE_SESSION: i32 = 2;
const TOUCH: i32 = 3;
const PLUGIN_DEPLOY: i32 = 4;
const PLUGIN_UNDEPLOY: i32 = 5;
const CREATE_SESSION_VERIFIED: i32 = 6;
const REVALIDATE: i32 = 7;
const FORWARD_LOCAL: i32 = 8;
const RESTORE: i32 = 9;

fn write_ids(w: &mut Vec<u8>, v: &[i64]) {
    w.write_i32(v.len() as i32);
    for x in v {
        w.write_i64(*x);
    }
}

fn read_ids(r: &mut Reader<'_>) -> Result<Vec<i64>, DecodeError> {
    let n = r.read_len(8)?;
    (0..n).map(|_| r.read_i64()).collect()
}

impl PeerMsg {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Vec::new();
        match self {
            PeerMsg::Forward {
                session,
                cxid,
                auth,
                op,
                body,
                local,
            } => {
                w.write_i32(if *local { FORWARD_LOCAL } else { FORWARD });
                w.write_i64(*session);
                w.write_i32(*cxid);
                w.write_vec(auth);
                w.write_i32(*op);
                w.write_buffer(body);
            }
            PeerMsg::CreateSession {
                session,
                timeout_ms,
                verifier,
            } => {
                w.write_i32(match verifier {
                    None => CREATE_SESSION,
                    Some(_) => CREATE_SESSION_VERIFIED,
                });
                w.write_i64(*session);
                w.write_i32(*timeout_ms);
                if let Some(v) = verifier {
                    w.write_buffer(v);
                }
            }
            PeerMsg::Revalidate { session } => {
                w.write_i32(REVALIDATE);
                w.write_i64(*session);
            }
            PeerMsg::Touch { sessions, claimed } => {
                w.write_i32(TOUCH);
                write_ids(&mut w, sessions);
                write_ids(&mut w, claimed);
            }
            PeerMsg::Plugin(PluginOp::Deploy { bytes, source }) => {
                w.write_i32(PLUGIN_DEPLOY);
                w.write_buffer(bytes);
                w.write_string(source);
            }
            PeerMsg::Plugin(PluginOp::Undeploy { name, sha256 }) => {
                w.write_i32(PLUGIN_UNDEPLOY);
                w.write_string(name);
                w.write_string(sha256);
            }
            PeerMsg::Restore(r) => {
                w.write_i32(RESTORE);
                // The txn's own encoding, tag included.
                crate::txn::Txn::Restore(r.clone()).write(&mut w);
            }
        }
        w
    }

    pub fn decode(b: &[u8]) -> Result<PeerMsg, DecodeError> {
        let mut r = Reader::new(b);
        let m = match r.read_i32()? {
            t @ (FORWARD | FORWARD_LOCAL) => PeerMsg::Forward {
                session: r.read_i64()?,
                cxid: r.read_i32()?,
                auth: r.read_vec()?,
                op: r.read_i32()?,
                body: r.read_buffer()?,
                local: t == FORWARD_LOCAL,
            },
            CREATE_SESSION => PeerMsg::CreateSession {
                session: r.read_i64()?,
                timeout_ms: r.read_i32()?,
                verifier: None,
            },
            CREATE_SESSION_VERIFIED => PeerMsg::CreateSession {
                session: r.read_i64()?,
                timeout_ms: r.read_i32()?,
                verifier: Some(crate::session::read_verifier(&mut r)?),
            },
            REVALIDATE => PeerMsg::Revalidate {
                session: r.read_i64()?,
            },
            TOUCH => PeerMsg::Touch {
                sessions: read_ids(&mut r)?,
                claimed: read_ids(&mut r)?,
            },
            PLUGIN_DEPLOY => PeerMsg::Plugin(PluginOp::Deploy {
                bytes: r.read_buffer()?,
                source: r.read_string()?,
            }),
            PLUGIN_UNDEPLOY => PeerMsg::Plugin(PluginOp::Undeploy {
                name: r.read_string()?,
                sha256: r.read_string()?,
            }),
            RESTORE => match crate::txn::Txn::read(&mut r)? {
                crate::txn::Txn::Restore(t) => PeerMsg::Restore(t),
                t => {
                    return Err(DecodeError::Invalid(format!(
                        "a restore message carries {t:?}"
                    )))
                }
            },
            t => return Err(DecodeError::Invalid(format!("unknown peer message {t}"))),
        };
        if r.remaining() != 0 {
            return Err(DecodeError::Invalid(
                "trailing bytes in peer message".into(),
            ));
        }
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_messages_round_trip_and_garbage_is_an_error() {
        let msgs = vec![
            PeerMsg::Forward {
                session: 7,
                cxid: 3,
                auth: vec![Id::new("digest", "u:x")],
                op: 1,
                body: vec![1, 2, 3],
                local: false,
            },
            PeerMsg::Forward {
                session: 7,
                cxid: 4,
                auth: Vec::new(),
                op: 9,
                body: vec![],
                local: true,
            },
            PeerMsg::CreateSession {
                session: 9,
                timeout_ms: 4000,
                verifier: None,
            },
            PeerMsg::CreateSession {
                session: 9,
                timeout_ms: 4000,
                verifier: Some([3; 32]),
            },
            PeerMsg::Revalidate { session: 9 },
            PeerMsg::Touch {
                sessions: vec![1, 2],
                claimed: vec![2],
            },
            PeerMsg::Plugin(PluginOp::Deploy {
                bytes: vec![0, 0x61, 0x73, 0x6d],
                source: "plugins:2:latch.wasm".into(),
            }),
            PeerMsg::Plugin(PluginOp::Undeploy {
                name: "latch".into(),
                sha256: "ab".into(),
            }),
            PeerMsg::Restore(Box::new(crate::txn::RestoreTxn {
                token: 5,
                snapshot_zxid: 9,
                body_version: 5,
                sessions: vec![wazoo_proto::SessionRecord {
                    id: 3,
                    timeout_ms: 4000,
                    verifier: None,
                }],
                body: std::sync::Arc::from(&b"b"[..]),
            })),
        ];
        for m in msgs {
            let b = m.encode();
            assert_eq!(PeerMsg::decode(&b).unwrap(), m);
            for n in 0..b.len() {
                assert!(PeerMsg::decode(&b[..n]).is_err());
            }
        }
        assert!(PeerMsg::decode(&[0xff; 40]).is_err());
    }
}
