//! ZooKeeper's txn records (`zookeeper.jute`, module
//! `org.apache.zookeeper.txn`) as its `SerializeUtils.deserializeTxn` reads
//! them from a log entry: `TxnHeader`, the record its type names, then an
//! optional `TxnDigest` (3.6+).

use super::jute::{put_bool, put_buffer, put_int, put_long, put_string, Jute};
use super::{FormatError, ZkAcl};

/// ZooKeeper's opcodes that appear in txn logs (`ZooDefs.OpCode`).
pub mod op {
    pub const ERROR: i32 = -1;
    pub const CREATE: i32 = 1;
    pub const DELETE: i32 = 2;
    pub const SET_DATA: i32 = 5;
    pub const SET_ACL: i32 = 7;
    pub const CHECK: i32 = 13;
    pub const MULTI: i32 = 14;
    pub const CREATE2: i32 = 15;
    pub const RECONFIG: i32 = 16;
    pub const CREATE_CONTAINER: i32 = 19;
    pub const DELETE_CONTAINER: i32 = 20;
    pub const CREATE_TTL: i32 = 21;
    pub const CREATE_SESSION: i32 = -10;
    pub const CLOSE_SESSION: i32 = -11;
}

/// `TxnHeader`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnHeader {
    pub client_id: i64,
    pub cxid: i32,
    pub zxid: i64,
    pub time: i64,
    pub op: i32,
}

/// `TxnDigest`: the tree's digest after the txn was applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnDigest {
    pub version: i32,
    pub tree_digest: i64,
}

/// What a txn creates: `CreateTxn` (and V0), `CreateTTLTxn`,
/// `CreateContainerTxn`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Create {
    pub path: String,
    /// `None`: null data (length -1).
    pub data: Option<Vec<u8>>,
    /// `None`: a null vector (ZooKeeper reads it as OPEN_ACL_UNSAFE).
    pub acl: Option<Vec<ZkAcl>>,
    /// `-1` for a V0 create without one (ZooKeeper then uses the parent's
    /// cversion plus one).
    pub parent_cversion: i32,
    pub kind: CreateKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateKind {
    /// `create`/`create2`; `ephemeral` makes the session the owner.
    Plain {
        ephemeral: bool,
    },
    Container,
    Ttl {
        ttl_ms: i64,
    },
}

/// One txn's record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ZkTxn {
    CreateSession {
        timeout_ms: i32,
    },
    /// `paths` is `CloseSessionTxn.paths2Delete` (3.6+), `None` before.
    CloseSession {
        paths: Option<Vec<String>>,
    },
    /// `op` is the opcode it was logged under (create, create2, ...): only
    /// a `create` gets ZooKeeper's NODEEXISTS parent fixup on replay.
    Create {
        op: i32,
        create: Create,
    },
    Delete {
        path: String,
    },
    /// setData and reconfig (which sets `/zookeeper/config`).
    SetData {
        path: String,
        /// `None`: null data (length -1).
        data: Option<Vec<u8>>,
        version: i32,
    },
    SetAcl {
        path: String,
        acl: Option<Vec<ZkAcl>>,
        version: i32,
    },
    Check {
        path: String,
        version: i32,
    },
    Error {
        err: i32,
    },
    Multi(Vec<ZkTxn>),
}

/// One decoded log entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnEntry {
    pub header: TxnHeader,
    pub txn: ZkTxn,
    pub digest: Option<TxnDigest>,
}

/// Bytes of an ACL at the least: perms and two empty strings.
const MIN_ACL: usize = 12;

pub(crate) fn read_acl_list(
    r: &mut Jute<'_>,
    what: &str,
) -> Result<Option<Vec<ZkAcl>>, FormatError> {
    let Some(n) = r.vector_len(MIN_ACL, what)? else {
        return Ok(None);
    };
    let mut list = Vec::with_capacity(n);
    for _ in 0..n {
        let perms = r.int("ACL perms")?;
        let scheme = r.string("ACL scheme")?;
        let id = r.string("ACL id")?;
        list.push(ZkAcl { perms, scheme, id });
    }
    Ok(Some(list))
}

/// Writes an ACL list; `None` is a null vector.
pub(crate) fn put_acl_list(out: &mut Vec<u8>, acl: Option<&[ZkAcl]>) {
    let Some(list) = acl else {
        put_int(out, -1);
        return;
    };
    put_int(out, list.len() as i32);
    for a in list {
        put_int(out, a.perms);
        put_string(out, &a.scheme);
        put_string(out, &a.id);
    }
}

/// Node data: ZooKeeper writes null data as length -1 and keeps it null.
fn data(r: &mut Jute<'_>) -> Result<Option<Vec<u8>>, FormatError> {
    Ok(r.buffer("data")?.map(<[u8]>::to_vec))
}

fn read_create(r: &mut Jute<'_>, op: i32) -> Result<Create, FormatError> {
    let path = r.string("path")?;
    let data = data(r)?;
    let acl = read_acl_list(r, "ACL list")?;
    let kind_and_cversion = match op {
        op::CREATE | op::CREATE2 => {
            let ephemeral = r.boolean("ephemeral")?;
            // A V0 CreateTxn ends here; ZooKeeper reads it when the V1 read
            // hits the end, and replays it with parentCVersion -1.
            let parent_cversion = if r.remaining() == 0 && op == op::CREATE {
                -1
            } else {
                r.int("parentCVersion")?
            };
            (CreateKind::Plain { ephemeral }, parent_cversion)
        }
        op::CREATE_CONTAINER => (CreateKind::Container, r.int("parentCVersion")?),
        _ => {
            let parent_cversion = r.int("parentCVersion")?;
            let ttl_ms = r.long("ttl")?;
            (CreateKind::Ttl { ttl_ms }, parent_cversion)
        }
    };
    Ok(Create {
        path,
        data,
        acl,
        parent_cversion: kind_and_cversion.1,
        kind: kind_and_cversion.0,
    })
}

/// Reads the record of a txn of type `op`. `top` allows the types only a
/// whole txn can have (sessions, multi, reconfig).
fn read_record(r: &mut Jute<'_>, op: i32, top: bool) -> Result<ZkTxn, FormatError> {
    Ok(match op {
        op::CREATE | op::CREATE2 | op::CREATE_CONTAINER | op::CREATE_TTL => ZkTxn::Create {
            op,
            create: read_create(r, op)?,
        },
        op::DELETE | op::DELETE_CONTAINER => ZkTxn::Delete {
            path: r.string("path")?,
        },
        op::SET_DATA => ZkTxn::SetData {
            path: r.string("path")?,
            data: data(r)?,
            version: r.int("version")?,
        },
        op::RECONFIG if top => ZkTxn::SetData {
            path: r.string("path")?,
            data: data(r)?,
            version: r.int("version")?,
        },
        op::SET_ACL if top => ZkTxn::SetAcl {
            path: r.string("path")?,
            acl: read_acl_list(r, "ACL list")?,
            version: r.int("version")?,
        },
        op::CHECK => ZkTxn::Check {
            path: r.string("path")?,
            version: r.int("version")?,
        },
        op::ERROR => ZkTxn::Error { err: r.int("err")? },
        op::CREATE_SESSION if top => ZkTxn::CreateSession {
            timeout_ms: r.int("timeOut")?,
        },
        op::CLOSE_SESSION if top => ZkTxn::CloseSession {
            paths: read_paths_to_delete(r),
        },
        op::MULTI if top => {
            let n = r.vector_len(8, "multi txns")?.unwrap_or(0);
            let mut subs = Vec::with_capacity(n);
            for _ in 0..n {
                let sub_op = r.int("multi txn type")?;
                let at = r.offset();
                let bytes = r.buffer("multi txn data")?.unwrap_or_default();
                let mut sr = Jute::new(bytes, at + 4);
                let sub = read_record(&mut sr, sub_op, false)?;
                if sr.remaining() != 0 {
                    return Err(sr.error(format!(
                        "{} unexpected bytes after a multi's txn of type {sub_op}",
                        sr.remaining()
                    )));
                }
                subs.push(sub);
            }
            ZkTxn::Multi(subs)
        }
        _ => {
            return Err(r.error(format!(
                "unsupported txn type {op}{}",
                if top { "" } else { " inside a multi" }
            )))
        }
    })
}

/// `CloseSessionTxn.paths2Delete`, if the entry has one. Before 3.6, and
/// with `zookeeper.closeSessionTxn.enabled=false`, a closeSession has no
/// record, and a digest (12 bytes) may follow the header directly; the
/// record is taken only if it parses as a vector of absolute paths that
/// leaves nothing or exactly a digest behind (a digest read as a vector
/// would need two empty paths).
fn read_paths_to_delete(r: &mut Jute<'_>) -> Option<Vec<String>> {
    let start = r.pos();
    let parsed = (|| -> Result<Vec<String>, FormatError> {
        let n = r.vector_len(4, "paths2Delete")?.unwrap_or(0);
        let mut paths = Vec::with_capacity(n);
        for _ in 0..n {
            let p = r.string("path to delete")?;
            if !p.starts_with('/') {
                return Err(r.error("not a path"));
            }
            paths.push(p);
        }
        Ok(paths)
    })();
    match parsed {
        Ok(paths) if r.remaining() == 0 || r.remaining() == 12 => Some(paths),
        _ => {
            r.rewind(start);
            None
        }
    }
}

/// Decodes one log entry's bytes (header, record, optional digest). `base`
/// is the entry's offset in its file, for errors.
pub fn decode_entry(bytes: &[u8], base: u64) -> Result<TxnEntry, FormatError> {
    let mut r = Jute::new(bytes, base);
    let header = TxnHeader {
        client_id: r.long("clientId")?,
        cxid: r.int("cxid")?,
        zxid: r.long("zxid")?,
        time: r.long("time")?,
        op: r.int("type")?,
    };
    let txn = read_record(&mut r, header.op, true)?;
    let digest = if r.remaining() >= 12 {
        Some(TxnDigest {
            version: r.int("digest version")?,
            tree_digest: r.long("tree digest")?,
        })
    } else {
        None
    };
    if r.remaining() != 0 {
        return Err(r.error(format!(
            "{} unexpected bytes after txn 0x{:x}",
            r.remaining(),
            header.zxid
        )));
    }
    Ok(TxnEntry {
        header,
        txn,
        digest,
    })
}

/// The opcode a txn inside a multi is written under.
fn sub_op(txn: &ZkTxn) -> i32 {
    match txn {
        ZkTxn::Create { op, .. } => *op,
        ZkTxn::Delete { .. } => op::DELETE,
        ZkTxn::SetData { .. } => op::SET_DATA,
        ZkTxn::Check { .. } => op::CHECK,
        ZkTxn::Error { .. } => op::ERROR,
        ZkTxn::SetAcl { .. } => op::SET_ACL,
        ZkTxn::CreateSession { .. } => op::CREATE_SESSION,
        ZkTxn::CloseSession { .. } => op::CLOSE_SESSION,
        ZkTxn::Multi(_) => op::MULTI,
    }
}

/// Writes a txn's record as its jute class serializes it. A create is
/// written in its current form (with `parentCVersion`), as ZooKeeper 3.x
/// writes it; a `CloseSession` without paths has no record (3.5 and
/// `closeSessionTxn.enabled=false`).
fn put_record(out: &mut Vec<u8>, txn: &ZkTxn) {
    match txn {
        ZkTxn::CreateSession { timeout_ms } => put_int(out, *timeout_ms),
        ZkTxn::CloseSession { paths } => {
            if let Some(paths) = paths {
                put_int(out, paths.len() as i32);
                for p in paths {
                    put_string(out, p);
                }
            }
        }
        ZkTxn::Create { create, .. } => {
            put_string(out, &create.path);
            put_buffer(out, create.data.as_deref());
            put_acl_list(out, create.acl.as_deref());
            match create.kind {
                CreateKind::Plain { ephemeral } => {
                    put_bool(out, ephemeral);
                    put_int(out, create.parent_cversion);
                }
                CreateKind::Container => put_int(out, create.parent_cversion),
                CreateKind::Ttl { ttl_ms } => {
                    put_int(out, create.parent_cversion);
                    put_long(out, ttl_ms);
                }
            }
        }
        ZkTxn::Delete { path } => put_string(out, path),
        ZkTxn::SetData {
            path,
            data,
            version,
        } => {
            put_string(out, path);
            put_buffer(out, data.as_deref());
            put_int(out, *version);
        }
        ZkTxn::SetAcl { path, acl, version } => {
            put_string(out, path);
            put_acl_list(out, acl.as_deref());
            put_int(out, *version);
        }
        ZkTxn::Check { path, version } => {
            put_string(out, path);
            put_int(out, *version);
        }
        ZkTxn::Error { err } => put_int(out, *err),
        ZkTxn::Multi(subs) => {
            put_int(out, subs.len() as i32);
            for sub in subs {
                put_int(out, sub_op(sub));
                let mut bytes = Vec::new();
                put_record(&mut bytes, sub);
                put_buffer(out, Some(&bytes));
            }
        }
    }
}

/// Encodes a txn as `Util.marshallTxnEntry` does (the bytes of a log entry
/// and of a PROPOSAL or INFORM): header, record, then the digest if any.
/// [`decode_entry`] reads it back.
pub fn encode_entry(entry: &TxnEntry) -> Vec<u8> {
    let mut out = Vec::new();
    let h = &entry.header;
    put_long(&mut out, h.client_id);
    put_int(&mut out, h.cxid);
    put_long(&mut out, h.zxid);
    put_long(&mut out, h.time);
    put_int(&mut out, h.op);
    put_record(&mut out, &entry.txn);
    if let Some(d) = entry.digest {
        put_int(&mut out, d.version);
        put_long(&mut out, d.tree_digest);
    }
    out
}
