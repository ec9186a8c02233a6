//! Transactions: what the write pipeline turns a request into, what the log
//! stores and what every member applies.
//!
//! A txn carries absolute values (the new version, the parent's new
//! cversion), never "increment", so applying it is a pure function of the
//! tree and the txn. Requests that fail in prep produce no txn at all: the
//! error reply is ordered behind the session's earlier writes instead.
//!
//! Encoding (jute primitives, big-endian): the header, then a type tag and
//! the body. The log treats the bytes as opaque.
//!
//! A node's data in a create or setData is a jute buffer, and null data
//! (ZooKeeper Programmer's Guide, "ZooKeeper Data Model": a node created or
//! set with null data reads back as null) is jute's null, length -1, as in
//! ZooKeeper's own CreateTxn and SetDataTxn. Until null data was kept, txns
//! wrote it as an empty buffer and never wrote -1, so every record an older
//! wazoo logged decodes as it did (its empty data stays empty); an older
//! wazoo would read a -1 as empty data.

use wazoo_proto::jute::{DecodeError, Reader, Writer};
use wazoo_proto::Acl;

pub use super::recipe::{DeployTxn, RecipeTxn};

/// Who asked, when, and where the txn sits in the total order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnHeader {
    pub session_id: i64,
    pub cxid: i32,
    pub zxid: i64,
    /// Leader time (milliseconds since the epoch) stamped in prep; used for
    /// ctime/mtime so every member applies the same value.
    pub time_ms: i64,
}

/// What kind of node a create makes, beyond ephemeral ownership.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    Regular,
    Container,
    /// Persistent node removed once it has had no children for `ttl_ms`
    /// since its last modification.
    Ttl {
        ttl_ms: i64,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateTxn {
    /// The final path (with the sequence suffix already appended).
    pub path: String,
    /// `None` for null data.
    pub data: Option<Vec<u8>>,
    pub acl: Vec<Acl>,
    /// The owning session for ephemeral nodes, 0 otherwise.
    pub ephemeral_owner: i64,
    /// The parent's cversion after this create.
    pub parent_cversion: i32,
    pub kind: NodeKind,
}

impl CreateTxn {
    /// The data's length, 0 for null data (as a Stat's dataLength).
    pub fn data_len(&self) -> i64 {
        self.data.as_ref().map_or(0, Vec::len) as i64
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Txn {
    CreateSession {
        timeout_ms: i32,
        /// The SHA-256 of the session's password (`crate::session`).
        /// `None` only in records written before passwords were random
        /// (tag `CREATE_SESSION`, no verifier): those sessions keep
        /// ZooKeeper's password computed from the id.
        verifier: Option<crate::session::Verifier>,
    },
    /// Ends a session: the tree deletes every ephemeral it owns.
    CloseSession,
    Create(CreateTxn),
    Delete {
        path: String,
    },
    SetData {
        path: String,
        /// `None` for null data.
        data: Option<Vec<u8>>,
        /// The node's version after this write.
        version: i32,
    },
    SetAcl {
        path: String,
        acl: Vec<Acl>,
        /// The node's aversion after this write.
        aversion: i32,
    },
    /// A version check inside a multi: changes nothing.
    Check {
        path: String,
    },
    /// Every op applies, in order, under one zxid.
    Multi(Vec<Txn>),
    /// A forwarded write that failed in the leader's prep: changes nothing,
    /// but carries the outcome to the member holding the session, in order
    /// with its other writes (ZooKeeper's error txn). One code for a single
    /// op; one per op for a multi (ZooKeeper's per-op results).
    Error {
        errs: Vec<i32>,
    },
    /// Changes nothing; orders a forwarded `sync` behind every earlier write.
    Noop,
    /// A recipe step's effects: its tree ops (all or none, like a multi),
    /// wait registrations, notifications and the caller's reply.
    Recipe(Box<RecipeTxn>),
    /// Deploys a recipe module (replacing one of the same name).
    Deploy(Box<DeployTxn>),
    /// Undeploys the recipe module `name`.
    Undeploy {
        name: String,
    },
    /// Commits a new ensemble configuration (ZooKeeper's reconfig txn, a
    /// setData of `/zookeeper/config`): `data` is its text, whose version
    /// is this txn's zxid. Every member activates it when it applies it.
    Reconfig {
        data: Vec<u8>,
    },
    /// The leader's recipe counters, per module (they replace the
    /// committed ones; see `crate::recipe::ModuleCounters`).
    RecipeCounters(Box<crate::recipe::RecipeCounters>),
    /// A setACL of /zookeeper/recipes, whose ACL the pipeline keeps beside
    /// the deployed modules (`crate::recipe::RecipesAcl`), not the tree.
    SetRecipesAcl {
        acl: Vec<Acl>,
        /// The node's aversion after this write.
        aversion: i32,
    },
    /// Replaces the whole state with a snapshot's (the AdminServer's
    /// `restore`, docs/OPERATIONS.md, "The AdminServer"): every member
    /// applies it at its zxid, so every member holds the restored tree.
    Restore(Box<RestoreTxn>),
}

/// The state a `restore` installs: a snapshot's sessions and body, as the
/// shell read and checked them from a snapshot file's bytes (the envelope
/// is storage's, which the core does not read).
#[derive(Clone, PartialEq, Eq)]
pub struct RestoreTxn {
    /// Chosen by the member that was asked, to match the txn to its
    /// request when it is applied (unique per member: its id in the top
    /// 16 bits).
    pub token: u64,
    /// The zxid the snapshot was taken at (the txn has its own).
    pub snapshot_zxid: i64,
    /// The snapshot's body format (`crate::snapshot::read_snapshot_body`).
    pub body_version: u32,
    /// The snapshot's sessions, which replace the session table.
    pub sessions: Vec<wazoo_proto::SessionRecord>,
    /// The snapshot's body: the recipe state, then the tree.
    pub body: std::sync::Arc<[u8]>,
}

/// The body's length, not its bytes (a restore carries megabytes).
impl std::fmt::Debug for RestoreTxn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RestoreTxn")
            .field("token", &self.token)
            .field("snapshot_zxid", &format_args!("0x{:x}", self.snapshot_zxid))
            .field("body_version", &self.body_version)
            .field("sessions", &self.sessions.len())
            .field("body_bytes", &self.body.len())
            .finish()
    }
}

impl RestoreTxn {
    fn write(&self, w: &mut Vec<u8>) {
        w.write_i64(self.token as i64);
        w.write_i64(self.snapshot_zxid);
        w.write_i32(self.body_version as i32);
        w.write_i32(self.sessions.len() as i32);
        for s in &self.sessions {
            w.write_i64(s.id);
            w.write_i32(s.timeout_ms);
            w.write_nullable_buffer(s.verifier.as_ref().map(|v| &v[..]));
        }
        w.write_buffer(&self.body);
    }

    fn read(r: &mut Reader<'_>) -> Result<RestoreTxn, DecodeError> {
        let token = r.read_i64()? as u64;
        let snapshot_zxid = r.read_i64()?;
        let body_version = r.read_i32()?;
        let body_version = u32::try_from(body_version)
            .map_err(|_| DecodeError::Invalid(format!("restore body format {body_version}")))?;
        // id, timeout, and a null verifier's length at least.
        let n = r.read_len(16)?;
        let mut sessions = Vec::with_capacity(n);
        for _ in 0..n {
            let id = r.read_i64()?;
            let timeout_ms = r.read_i32()?;
            let verifier = match r.read_nullable_buffer()? {
                None => None,
                Some(b) => Some(b.try_into().map_err(|b: Vec<u8>| {
                    DecodeError::Invalid(format!("session verifier of {} bytes", b.len()))
                })?),
            };
            sessions.push(wazoo_proto::SessionRecord {
                id,
                timeout_ms,
                verifier,
            });
        }
        Ok(RestoreTxn {
            token,
            snapshot_zxid,
            body_version,
            sessions,
            body: std::sync::Arc::from(r.read_buffer()?),
        })
    }
}

mod tag {
    pub const CREATE_SESSION: i32 = 1;
    pub const CLOSE_SESSION: i32 = 2;
    pub const CREATE: i32 = 3;
    pub const DELETE: i32 = 4;
    pub const SET_DATA: i32 = 5;
    pub const SET_ACL: i32 = 6;
    pub const CHECK: i32 = 7;
    pub const MULTI: i32 = 8;
    pub const ERROR: i32 = 9;
    pub const NOOP: i32 = 10;
    pub const RECIPE: i32 = 11;
    pub const DEPLOY: i32 = 12;
    pub const UNDEPLOY: i32 = 13;
    pub const RECONFIG: i32 = 14;
    pub const RECIPE_COUNTERS: i32 = 15;
    pub const SET_RECIPES_ACL: i32 = 16;
    /// A createSession with its password's verifier (`CREATE_SESSION`
    /// has none: it is what wazoo wrote before passwords were random).
    pub const CREATE_SESSION_VERIFIED: i32 = 17;
    pub const RESTORE: i32 = 18;
}

mod kind_tag {
    pub const REGULAR: i32 = 0;
    pub const CONTAINER: i32 = 1;
    pub const TTL: i32 = 2;
}

/// How deep multis may nest when decoding (they never nest when written).
const MAX_MULTI_DEPTH: usize = 1;

impl Txn {
    pub fn write(&self, w: &mut Vec<u8>) {
        match self {
            Txn::CreateSession {
                timeout_ms,
                verifier: None,
            } => {
                w.write_i32(tag::CREATE_SESSION);
                w.write_i32(*timeout_ms);
            }
            Txn::CreateSession {
                timeout_ms,
                verifier: Some(v),
            } => {
                w.write_i32(tag::CREATE_SESSION_VERIFIED);
                w.write_i32(*timeout_ms);
                w.write_buffer(v);
            }
            Txn::CloseSession => w.write_i32(tag::CLOSE_SESSION),
            Txn::Create(c) => {
                w.write_i32(tag::CREATE);
                w.write_string(&c.path);
                w.write_nullable_buffer(c.data.as_deref());
                w.write_vec(&c.acl);
                w.write_i64(c.ephemeral_owner);
                w.write_i32(c.parent_cversion);
                match c.kind {
                    NodeKind::Regular => w.write_i32(kind_tag::REGULAR),
                    NodeKind::Container => w.write_i32(kind_tag::CONTAINER),
                    NodeKind::Ttl { ttl_ms } => {
                        w.write_i32(kind_tag::TTL);
                        w.write_i64(ttl_ms);
                    }
                }
            }
            Txn::Delete { path } => {
                w.write_i32(tag::DELETE);
                w.write_string(path);
            }
            Txn::SetData {
                path,
                data,
                version,
            } => {
                w.write_i32(tag::SET_DATA);
                w.write_string(path);
                w.write_nullable_buffer(data.as_deref());
                w.write_i32(*version);
            }
            Txn::SetAcl {
                path,
                acl,
                aversion,
            } => {
                w.write_i32(tag::SET_ACL);
                w.write_string(path);
                w.write_vec(acl);
                w.write_i32(*aversion);
            }
            Txn::Check { path } => {
                w.write_i32(tag::CHECK);
                w.write_string(path);
            }
            Txn::Multi(ops) => {
                w.write_i32(tag::MULTI);
                w.write_i32(ops.len() as i32);
                for op in ops {
                    op.write(w);
                }
            }
            Txn::Error { errs } => {
                w.write_i32(tag::ERROR);
                w.write_i32(errs.len() as i32);
                for e in errs {
                    w.write_i32(*e);
                }
            }
            Txn::Noop => w.write_i32(tag::NOOP),
            Txn::Recipe(r) => {
                w.write_i32(tag::RECIPE);
                r.write(w);
            }
            Txn::Deploy(d) => {
                w.write_i32(tag::DEPLOY);
                d.write(w);
            }
            Txn::Undeploy { name } => {
                w.write_i32(tag::UNDEPLOY);
                w.write_string(name);
            }
            Txn::Reconfig { data } => {
                w.write_i32(tag::RECONFIG);
                w.write_buffer(data);
            }
            Txn::RecipeCounters(c) => {
                w.write_i32(tag::RECIPE_COUNTERS);
                crate::recipe::write_counters(c, w);
            }
            Txn::SetRecipesAcl { acl, aversion } => {
                w.write_i32(tag::SET_RECIPES_ACL);
                w.write_vec(acl);
                w.write_i32(*aversion);
            }
            Txn::Restore(r) => {
                w.write_i32(tag::RESTORE);
                r.write(w);
            }
        }
    }

    pub fn read(r: &mut Reader<'_>) -> Result<Txn, DecodeError> {
        Self::read_at_depth(r, 0)
    }

    fn read_at_depth(r: &mut Reader<'_>, depth: usize) -> Result<Txn, DecodeError> {
        Ok(match r.read_i32()? {
            tag::CREATE_SESSION => Txn::CreateSession {
                timeout_ms: r.read_i32()?,
                verifier: None,
            },
            tag::CREATE_SESSION_VERIFIED => Txn::CreateSession {
                timeout_ms: r.read_i32()?,
                verifier: Some(crate::session::read_verifier(r)?),
            },
            tag::CLOSE_SESSION => Txn::CloseSession,
            tag::CREATE => Txn::Create(CreateTxn {
                path: r.read_string()?,
                data: r.read_nullable_buffer()?,
                acl: r.read_vec()?,
                ephemeral_owner: r.read_i64()?,
                parent_cversion: r.read_i32()?,
                kind: match r.read_i32()? {
                    kind_tag::REGULAR => NodeKind::Regular,
                    kind_tag::CONTAINER => NodeKind::Container,
                    kind_tag::TTL => NodeKind::Ttl {
                        ttl_ms: r.read_i64()?,
                    },
                    k => return Err(DecodeError::Invalid(format!("unknown node kind {k}"))),
                },
            }),
            tag::DELETE => Txn::Delete {
                path: r.read_string()?,
            },
            tag::SET_DATA => Txn::SetData {
                path: r.read_string()?,
                data: r.read_nullable_buffer()?,
                version: r.read_i32()?,
            },
            tag::SET_ACL => Txn::SetAcl {
                path: r.read_string()?,
                acl: r.read_vec()?,
                aversion: r.read_i32()?,
            },
            tag::CHECK => Txn::Check {
                path: r.read_string()?,
            },
            tag::MULTI => {
                if depth >= MAX_MULTI_DEPTH {
                    return Err(DecodeError::Invalid("nested multi txn".into()));
                }
                let n = r.read_len(4)?;
                let mut ops = Vec::with_capacity(n);
                for _ in 0..n {
                    ops.push(Self::read_at_depth(r, depth + 1)?);
                }
                Txn::Multi(ops)
            }
            tag::ERROR => {
                let n = r.read_len(4)?;
                let mut errs = Vec::with_capacity(n);
                for _ in 0..n {
                    errs.push(r.read_i32()?);
                }
                Txn::Error { errs }
            }
            tag::NOOP => Txn::Noop,
            tag::RECIPE => {
                if depth >= MAX_MULTI_DEPTH {
                    return Err(DecodeError::Invalid("nested recipe txn".into()));
                }
                let r = RecipeTxn::read(r, |r| Self::read_at_depth(r, depth + 1))?;
                if let Some(op) = r.ops.iter().find(|op| {
                    !matches!(
                        op,
                        Txn::Create(_)
                            | Txn::Delete { .. }
                            | Txn::SetData { .. }
                            | Txn::Check { .. }
                    )
                }) {
                    return Err(DecodeError::Invalid(format!(
                        "recipe txn carries a non-tree op {op:?}"
                    )));
                }
                Txn::Recipe(Box::new(r))
            }
            tag::DEPLOY if depth == 0 => Txn::Deploy(Box::new(DeployTxn::read(r)?)),
            tag::UNDEPLOY if depth == 0 => Txn::Undeploy {
                name: r.read_string()?,
            },
            tag::RECONFIG if depth == 0 => Txn::Reconfig {
                data: r.read_buffer()?,
            },
            tag::RECIPE_COUNTERS if depth == 0 => {
                Txn::RecipeCounters(Box::new(crate::recipe::read_counters(r)?))
            }
            tag::SET_RECIPES_ACL if depth == 0 => Txn::SetRecipesAcl {
                acl: r.read_vec()?,
                aversion: r.read_i32()?,
            },
            tag::RESTORE if depth == 0 => Txn::Restore(Box::new(RestoreTxn::read(r)?)),
            t => return Err(DecodeError::Invalid(format!("unknown txn type {t}"))),
        })
    }
}

/// A header and its txn: one record of the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnRecord {
    pub header: TxnHeader,
    pub txn: Txn,
}

impl TxnRecord {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Vec::with_capacity(64);
        w.write_i64(self.header.session_id);
        w.write_i32(self.header.cxid);
        w.write_i64(self.header.zxid);
        w.write_i64(self.header.time_ms);
        self.txn.write(&mut w);
        w
    }

    pub fn decode(b: &[u8]) -> Result<TxnRecord, DecodeError> {
        let mut r = Reader::new(b);
        let header = TxnHeader {
            session_id: r.read_i64()?,
            cxid: r.read_i32()?,
            zxid: r.read_i64()?,
            time_ms: r.read_i64()?,
        };
        let txn = Txn::read(&mut r)?;
        if r.remaining() != 0 {
            return Err(DecodeError::Invalid("trailing bytes after txn".into()));
        }
        Ok(TxnRecord { header, txn })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Txn> {
        vec![
            Txn::CreateSession {
                timeout_ms: 30000,
                verifier: None,
            },
            Txn::CreateSession {
                timeout_ms: 30000,
                verifier: Some([9; 32]),
            },
            Txn::CloseSession,
            Txn::Create(CreateTxn {
                path: "/a/b0000000001".into(),
                data: Some(b"x".to_vec()),
                acl: Acl::open_unsafe(),
                ephemeral_owner: 7,
                parent_cversion: 2,
                kind: NodeKind::Ttl { ttl_ms: 500 },
            }),
            Txn::Delete { path: "/a".into() },
            Txn::SetData {
                path: "/a".into(),
                data: Some(vec![]),
                version: 3,
            },
            Txn::Multi(vec![
                Txn::Create(CreateTxn {
                    path: "/n".into(),
                    data: None,
                    acl: Acl::open_unsafe(),
                    ephemeral_owner: 0,
                    parent_cversion: 1,
                    kind: NodeKind::Regular,
                }),
                Txn::SetData {
                    path: "/n".into(),
                    data: None,
                    version: 1,
                },
            ]),
            Txn::SetAcl {
                path: "/a".into(),
                acl: Acl::read_unsafe(),
                aversion: 1,
            },
            Txn::Multi(vec![
                Txn::Check { path: "/a".into() },
                Txn::Delete { path: "/a".into() },
            ]),
            Txn::Error {
                errs: vec![0, -101, -2],
            },
            Txn::Noop,
            Txn::Deploy(Box::new(crate::recipe::DeployTxn {
                name: "m".into(),
                version: "1.0.0".into(),
                sha256: "ab".repeat(32),
                bytes: std::sync::Arc::from(&b"\0asm"[..]),
                source: "client".into(),
            })),
            Txn::Undeploy { name: "m".into() },
            Txn::Reconfig {
                data: b"server.1=h:1:2:participant\nversion=100000001".to_vec(),
            },
            Txn::RecipeCounters(Box::new(
                [("m".to_string(), {
                    let mut c = crate::recipe::ModuleCounters::default();
                    c.record(7, 120, Some("fuel"));
                    c
                })]
                .into_iter()
                .collect(),
            )),
            Txn::SetRecipesAcl {
                acl: vec![Acl::new(31, "digest", "bob:x")],
                aversion: 2,
            },
            Txn::Restore(Box::new(RestoreTxn {
                token: (3 << 48) | 7,
                snapshot_zxid: 0x2_0000_0009,
                body_version: 5,
                sessions: vec![
                    wazoo_proto::SessionRecord {
                        id: 0x0100_0000_0000_0001,
                        timeout_ms: 30_000,
                        verifier: Some([4; 32]),
                    },
                    wazoo_proto::SessionRecord {
                        id: 2,
                        timeout_ms: 4_000,
                        verifier: None,
                    },
                ],
                body: std::sync::Arc::from(&b"body bytes"[..]),
            })),
        ]
    }

    #[test]
    fn every_txn_round_trips_through_its_encoding() {
        for (i, txn) in sample().into_iter().enumerate() {
            let rec = TxnRecord {
                header: TxnHeader {
                    session_id: 1,
                    cxid: i as i32,
                    zxid: 0x1_0000_0005,
                    time_ms: 1234,
                },
                txn,
            };
            assert_eq!(TxnRecord::decode(&rec.encode()).unwrap(), rec);
        }
    }

    /// ZooKeeper Programmer's Guide, "ZooKeeper Data Model": null data
    /// stays null through a txn's encoding (length -1, as ZooKeeper's
    /// CreateTxn and SetDataTxn write it), empty data stays empty, and a
    /// record an older wazoo wrote (which never held -1) decodes as before.
    #[test]
    fn null_data_survives_the_txn_encoding_apart_from_empty_data() {
        let header = TxnHeader {
            session_id: 1,
            cxid: 2,
            zxid: 3,
            time_ms: 4,
        };
        let set = |data: Option<Vec<u8>>| TxnRecord {
            header: header.clone(),
            txn: Txn::SetData {
                path: "/a".into(),
                data,
                version: 1,
            },
        };
        let null = set(None).encode();
        let empty = set(Some(vec![])).encode();
        // Header (28 bytes), tag, path "/a": then the data's length.
        assert_eq!(&null[38..42], &(-1i32).to_be_bytes());
        assert_eq!(&empty[38..42], &0i32.to_be_bytes());
        assert_eq!(TxnRecord::decode(&null).unwrap(), set(None));
        assert_eq!(TxnRecord::decode(&empty).unwrap(), set(Some(vec![])));
        // The old encoding of a create with empty data, written by hand.
        let mut old = Vec::new();
        old.write_i64(1);
        old.write_i32(2);
        old.write_i64(3);
        old.write_i64(4);
        old.write_i32(tag::CREATE);
        old.write_string("/c");
        old.write_i32(0);
        old.write_vec(&Acl::open_unsafe());
        old.write_i64(0);
        old.write_i32(1);
        old.write_i32(kind_tag::REGULAR);
        match TxnRecord::decode(&old).unwrap().txn {
            Txn::Create(c) => assert_eq!(c.data, Some(vec![])),
            t => panic!("{t:?}"),
        }
    }

    /// ZooKeeper Programmer's Guide, "ZooKeeper Sessions": a createSession
    /// an older wazoo logged (tag 1, the timeout alone) decodes as a
    /// session without a verifier, which keeps ZooKeeper's password; one
    /// with a verifier has a tag of its own, and a verifier of another
    /// length is refused.
    #[test]
    fn a_create_session_logged_before_random_passwords_still_decodes() {
        let mut old = Vec::new();
        old.write_i64(1);
        old.write_i32(2);
        old.write_i64(3);
        old.write_i64(4);
        old.write_i32(1);
        old.write_i32(30_000);
        assert_eq!(
            TxnRecord::decode(&old).unwrap().txn,
            Txn::CreateSession {
                timeout_ms: 30_000,
                verifier: None
            }
        );
        let mut short = old[..28].to_vec();
        short.write_i32(tag::CREATE_SESSION_VERIFIED);
        short.write_i32(30_000);
        short.write_buffer(&[1; 31]);
        assert!(TxnRecord::decode(&short).is_err());
    }

    #[test]
    fn truncated_or_garbage_txn_bytes_are_errors_not_panics() {
        for txn in sample() {
            let rec = TxnRecord {
                header: TxnHeader {
                    session_id: 1,
                    cxid: 1,
                    zxid: 1,
                    time_ms: 1,
                },
                txn,
            };
            let b = rec.encode();
            for n in 0..b.len() {
                assert!(TxnRecord::decode(&b[..n]).is_err());
            }
        }
        assert!(TxnRecord::decode(&[0xff; 64]).is_err());
    }
}
