//! ZooKeeper's snapshot file (`FileSnap`, `SerializeUtils`,
//! `DataTree.serialize`, `ReferenceCountedACLCache.serialize`,
//! `SnapStream`), version 2, uncompressed:
//!
//! ```text
//! Snapshot  := FileHeader Sessions AclMap Node* End Seal [Digest Seal] [LastZxid Seal]
//! FileHeader:= magic:int("ZKSN") version:int(2) dbid:long
//! Sessions  := count:int (id:long timeout:int){count}
//! AclMap    := count:int (id:long acls:vector<ACL>){count}
//! Node      := path:ustring data:buffer acl:long StatPersisted   (path != "/")
//! End       := path:ustring("/")
//! Seal      := checksum:long path:ustring("/")
//! Digest    := zxid:long version:int digest:long       (3.6+; version < 2: digest:ustring, hex)
//! LastZxid  := zxid:long                                (3.9+)
//! StatPersisted := czxid mzxid ctime mtime:long version cversion aversion:int
//!                  ephemeralOwner pzxid:long
//! ```
//!
//! Each seal's checksum is the Adler-32 of every byte of the file before
//! it. Nodes come parent first (a depth-first walk from the root, whose
//! path is the empty string). An ACL id of -1 stands for OPEN_ACL_UNSAFE.
//! The optional sections are told apart by the bytes left after the first
//! seal, since ZooKeeper writes them only when a setting enables them.

use std::collections::{BTreeMap, HashSet};

use super::jute::{put_buffer, put_int, put_long, put_string, Adler32, Jute};
use super::txn::{put_acl_list, read_acl_list};
use super::{FormatError, StatPersisted, ZkAcl};

/// `"ZKSN"`.
pub const SNAP_MAGIC: i32 = 0x5A4B_534E;
/// The only snapshot version ZooKeeper 3.x writes.
pub const SNAP_VERSION: i32 = 2;

/// Bytes of a LastZxid section with its seal: long, long, then "/" as a
/// ustring (4 + 1).
const LAST_ZXID_SECTION: usize = 8 + 8 + 5;

/// The digest of the tree as of `zxid` (`DataTree.ZxidDigest`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZxidDigest {
    pub zxid: i64,
    pub version: i32,
    pub digest: i64,
}

/// One node as a snapshot stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapNode {
    /// The root's path is `""`.
    pub path: String,
    /// `None`: null data (ZooKeeper writes it as length -1).
    pub data: Option<Vec<u8>>,
    pub acl: i64,
    pub stat: StatPersisted,
}

/// A parsed snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZkSnapshot {
    pub dbid: i64,
    /// (session id, timeout in ms).
    pub sessions: Vec<(i64, i32)>,
    pub acls: BTreeMap<i64, Vec<ZkAcl>>,
    /// In file order: every parent before its children.
    pub nodes: Vec<SnapNode>,
    pub digest: Option<ZxidDigest>,
    pub last_processed_zxid: Option<i64>,
}

/// Bytes of a StatPersisted.
const STAT_LEN: usize = 6 * 8 + 3 * 4;

fn read_stat(r: &mut Jute<'_>) -> Result<StatPersisted, FormatError> {
    Ok(StatPersisted {
        czxid: r.long("czxid")?,
        mzxid: r.long("mzxid")?,
        ctime: r.long("ctime")?,
        mtime: r.long("mtime")?,
        version: r.int("version")?,
        cversion: r.int("cversion")?,
        aversion: r.int("aversion")?,
        ephemeral_owner: r.long("ephemeralOwner")?,
        pzxid: r.long("pzxid")?,
    })
}

/// Checks a seal: the Adler-32 of everything before it, then "/".
fn check_seal(r: &mut Jute<'_>, what: &str) -> Result<(), FormatError> {
    let computed = Adler32::of(r.consumed());
    let at = r.offset();
    let stored = r.long(what)?;
    if stored != i64::from(computed) {
        return Err(FormatError {
            offset: at,
            what: format!(
                "{what}: Adler-32 checksum mismatch (stored {stored:#x}, computed {computed:#x})"
            ),
        });
    }
    if r.string(what)? != "/" {
        return Err(r.error(format!("{what} does not end with \"/\"")));
    }
    Ok(())
}

/// The sessions, the ACL map and the nodes up to the "/" that ends them:
/// what `SerializeUtils.serializeSnapshot` writes, in a snapshot file and
/// in the stream a leader sends after SNAP.
#[allow(clippy::type_complexity)]
fn read_tree(
    r: &mut Jute<'_>,
) -> Result<(Vec<(i64, i32)>, BTreeMap<i64, Vec<ZkAcl>>, Vec<SnapNode>), FormatError> {
    let n = r.vector_len(12, "session count")?.unwrap_or(0);
    let mut sessions = Vec::with_capacity(n);
    for _ in 0..n {
        sessions.push((r.long("session id")?, r.int("session timeout")?));
    }

    let n = r.vector_len(12, "ACL map size")?.unwrap_or(0);
    let mut acls = BTreeMap::new();
    for _ in 0..n {
        let at = r.offset();
        let id = r.long("ACL id")?;
        let list = read_acl_list(r, "ACL list")?.ok_or_else(|| FormatError {
            offset: at,
            what: format!("ACL {id} is a null list"),
        })?;
        if acls.insert(id, list).is_some() {
            return Err(FormatError {
                offset: at,
                what: format!("ACL {id} is defined twice"),
            });
        }
    }

    let mut nodes: Vec<SnapNode> = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    loop {
        let at = r.offset();
        let path = r.string("node path")?;
        if path == "/" {
            break;
        }
        let data = r.buffer("node data")?.map(<[u8]>::to_vec);
        let acl = r.long("node ACL")?;
        r.need(STAT_LEN, "node stat is truncated")?;
        let stat = read_stat(r)?;
        let bad = |what: String| FormatError { offset: at, what };
        if nodes.is_empty() {
            if !path.is_empty() {
                return Err(bad(format!("the first node is {path:?}, not the root")));
            }
        } else {
            let Some(slash) = path.rfind('/') else {
                return Err(bad(format!("node path {path:?} is not absolute")));
            };
            if path.len() == slash + 1 {
                return Err(bad(format!("node path {path:?} ends with /")));
            }
            if !seen.contains(&path[..slash]) {
                return Err(bad(format!("node {path} comes before its parent")));
            }
        }
        if acl != -1 && !acls.contains_key(&acl) {
            return Err(bad(format!(
                "node {path:?} uses ACL {acl}, which is not defined"
            )));
        }
        if !seen.insert(path.clone()) {
            return Err(bad(format!("node {path} appears twice")));
        }
        nodes.push(SnapNode {
            path,
            data,
            acl,
            stat,
        });
    }
    if nodes.is_empty() {
        return Err(r.error("the snapshot has no root node"));
    }
    Ok((sessions, acls, nodes))
}

/// What a leader writes after a SNAP packet (`LearnerHandler`: the
/// database's `serializeSnapshot`, then the string `"BenWasHere"`), unframed
/// and without the file's header, seals and digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncSnapshot {
    pub sessions: Vec<(i64, i32)>,
    pub acls: BTreeMap<i64, Vec<ZkAcl>>,
    /// Every parent before its children; the root's path is `""`.
    pub nodes: Vec<SnapNode>,
}

/// The signature that ends a snapshot sent after SNAP.
pub const SYNC_SNAPSHOT_SIGNATURE: &str = "BenWasHere";

/// Reads a snapshot sent after SNAP from the start of `bytes`: `Ok(None)`
/// when `bytes` ends before it does (call again with more; each call reads
/// from the start, so a caller should wait for a good deal more bytes
/// between calls and bound the total), otherwise the snapshot and how
/// many bytes it took. Nodes are checked as in a file (root first, parents
/// before children, ACLs defined), and the signature must follow.
pub fn parse_sync_snapshot(bytes: &[u8]) -> Result<Option<(SyncSnapshot, usize)>, FormatError> {
    let mut r = Jute::new(bytes, 0);
    let parsed = read_tree(&mut r).and_then(|t| {
        let at = r.offset();
        let signature = r.string("snapshot signature")?;
        if signature != SYNC_SNAPSHOT_SIGNATURE {
            return Err(FormatError {
                offset: at,
                what: format!("the snapshot ends with {signature:?}, not the signature {SYNC_SNAPSHOT_SIGNATURE:?}"),
            });
        }
        Ok(t)
    });
    match parsed {
        Ok((sessions, acls, nodes)) => Ok(Some((
            SyncSnapshot {
                sessions,
                acls,
                nodes,
            },
            r.pos(),
        ))),
        Err(_) if r.ran_short() => Ok(None),
        Err(e) => Err(e),
    }
}

/// Writes `snap` as a leader sends it after SNAP (see [`parse_sync_snapshot`]).
pub fn encode_sync_snapshot(snap: &SyncSnapshot, out: &mut Vec<u8>) {
    put_tree(&snap.sessions, &snap.acls, &snap.nodes, out);
    put_string(out, SYNC_SNAPSHOT_SIGNATURE);
}

/// Writes a whole snapshot file as ZooKeeper 3.8 does (see
/// [`parse_snapshot`]), uncompressed: the header, the tree, its seal, then
/// the digest and the last processed zxid, each with its seal, when `snap`
/// has them. A digest of version 2 or more is a long, an older one hex.
pub fn encode_snapshot(snap: &ZkSnapshot) -> Vec<u8> {
    let mut out = Vec::new();
    put_int(&mut out, SNAP_MAGIC);
    put_int(&mut out, SNAP_VERSION);
    put_long(&mut out, snap.dbid);
    put_tree(&snap.sessions, &snap.acls, &snap.nodes, &mut out);
    put_seal(&mut out);
    if let Some(d) = &snap.digest {
        put_long(&mut out, d.zxid);
        put_int(&mut out, d.version);
        if d.version < 2 {
            put_string(&mut out, &format!("{:x}", d.digest as u64));
        } else {
            put_long(&mut out, d.digest);
        }
        put_seal(&mut out);
    }
    if let Some(zxid) = snap.last_processed_zxid {
        put_long(&mut out, zxid);
        put_seal(&mut out);
    }
    out
}

/// A seal: the Adler-32 of every byte of `out` so far, then "/".
fn put_seal(out: &mut Vec<u8>) {
    let sum = Adler32::of(out);
    put_long(out, i64::from(sum));
    put_string(out, "/");
}

/// The sessions, the ACL map and the nodes, then the "/" that ends them
/// (what [`read_tree`] reads).
fn put_tree(
    sessions: &[(i64, i32)],
    acls: &BTreeMap<i64, Vec<ZkAcl>>,
    nodes: &[SnapNode],
    out: &mut Vec<u8>,
) {
    put_int(out, sessions.len() as i32);
    for (id, timeout) in sessions {
        put_long(out, *id);
        put_int(out, *timeout);
    }
    put_int(out, acls.len() as i32);
    for (id, list) in acls {
        put_long(out, *id);
        put_acl_list(out, Some(list));
    }
    for n in nodes {
        put_string(out, &n.path);
        put_buffer(out, n.data.as_deref());
        put_long(out, n.acl);
        let s = &n.stat;
        for v in [s.czxid, s.mzxid, s.ctime, s.mtime] {
            put_long(out, v);
        }
        for v in [s.version, s.cversion, s.aversion] {
            put_int(out, v);
        }
        put_long(out, s.ephemeral_owner);
        put_long(out, s.pzxid);
    }
    put_string(out, "/");
}

/// Parses a whole snapshot file, checking every seal.
pub fn parse_snapshot(bytes: &[u8]) -> Result<ZkSnapshot, FormatError> {
    let mut r = Jute::new(bytes, 0);
    let magic = r.int("magic")?;
    if magic != SNAP_MAGIC {
        return Err(FormatError {
            offset: 0,
            what: format!("not a ZooKeeper snapshot (magic {magic:#x}, not ZKSN)"),
        });
    }
    let version = r.int("version")?;
    if version != SNAP_VERSION {
        return Err(FormatError {
            offset: 4,
            what: format!("unsupported snapshot version {version}"),
        });
    }
    let dbid = r.long("dbid")?;

    let (sessions, acls, nodes) = read_tree(&mut r)?;
    check_seal(&mut r, "snapshot checksum")?;

    let mut digest = None;
    let mut last_processed_zxid = None;
    if r.remaining() > 0 && r.remaining() != LAST_ZXID_SECTION {
        let zxid = r.long("digest zxid")?;
        let version = r.int("digest version")?;
        let value = if version < 2 {
            let at = r.offset();
            let hex = r.string("digest")?;
            u64::from_str_radix(&hex, 16).map_err(|_| FormatError {
                offset: at,
                what: format!("digest {hex:?} is not hexadecimal"),
            })? as i64
        } else {
            r.long("digest")?
        };
        check_seal(&mut r, "digest checksum")?;
        digest = Some(ZxidDigest {
            zxid,
            version,
            digest: value,
        });
    }
    if r.remaining() == LAST_ZXID_SECTION {
        last_processed_zxid = Some(r.long("last processed zxid")?);
        check_seal(&mut r, "last zxid checksum")?;
    }
    if r.remaining() != 0 {
        return Err(r.error(format!(
            "{} unexpected bytes after the last checksum",
            r.remaining()
        )));
    }
    Ok(ZkSnapshot {
        dbid,
        sessions,
        acls,
        nodes,
        digest,
        last_processed_zxid,
    })
}
