//! Tree snapshots: an O(1) copy of the applied state, and its binary form.
//!
//! # Format (version 2)
//!
//! Integers are big-endian. A "string" is a `u32` byte length and that many
//! bytes of UTF-8.
//!
//! ```text
//! magic     8 bytes  "WZTREE" then u16 version (2)
//! count     u64      number of nodes
//! node * count, in key order (every parent before its children, siblings
//!                    sorted by name; the root first):
//!   path      string  the absolute path
//!   kind      u8      0 persistent, 1 ephemeral, 2 container, 3 TTL
//!   value     i64     ephemeral: owner session; TTL: ttl in ms; else 0
//!   czxid mzxid pzxid ctime mtime    i64 each
//!   version cversion aversion        i32 each
//!   acl       u32     index of the node's ACL list among the lists defined so
//!                     far in this stream; when it equals their number, the
//!                     list is defined here:
//!                       count u32, then per entry: perms i32, scheme string,
//!                       id string
//!   data      u32 length, then the bytes; 0xFFFFFFFF (jute's -1) and no
//!                     bytes for null data
//! crc       u32      CRC-32 (IEEE) of every byte before it
//! ```
//!
//! Version 1, still read, is the same but for null data: it had none, and
//! its data, empty included, loads as bytes, never as null (ZooKeeper
//! Programmer's Guide, "ZooKeeper Data Model": null data reads back as
//! null, which version 2 keeps apart from empty).
//!
//! numChildren is not stored (it is the number of children that follow).
//! The reader consumes exactly these bytes, so a snapshot can be embedded
//! in a larger file.
//! The same tree always gives the same bytes: nodes come in key order and
//! ACL lists are numbered by first use, whatever ids the tree used inside.
//! A loader reads it in one pass: the parent of each node is already loaded.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::sync::Arc;

use wazoo_proto::{Acl, Id};

use super::node::{encode_key, Header, Node, ZnodeType};
use super::DataTree;

const MAGIC: &[u8; 6] = b"WZTREE";
/// The version written: 2 keeps null data apart from empty data.
const VERSION: u16 = 2;
/// The version before null data, still read.
const VERSION_1: u16 = 1;
/// The data length that stands for null data (version 2).
const NULL_DATA: u32 = u32::MAX;

/// Bytes of a node record between its path and its ACL definition.
const FIXED_LEN: usize = 1 + 8 + 5 * 8 + 3 * 4 + 4;
/// Longest path a snapshot may hold (a path travels in one request frame).
const MAX_PATH_LEN: u32 = 1 << 20;
/// Largest data a snapshot may hold for one node.
const MAX_DATA_LEN: u32 = 256 << 20;
/// Most entries one ACL list may have.
const MAX_ACL_ENTRIES: u32 = 1 << 16;
/// Longest ACL scheme or id.
const MAX_ACL_STRING: u32 = 1 << 20;

/// Why a snapshot could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("tree snapshot is truncated")]
    Truncated,
    #[error("not a tree snapshot (bad magic)")]
    BadMagic,
    #[error("unsupported tree snapshot version {0}")]
    Version(u16),
    #[error("corrupt tree snapshot: {0}")]
    Corrupt(String),
    #[error("tree snapshot checksum mismatch: stored {stored:08x}, computed {computed:08x}")]
    Checksum { stored: u32, computed: u32 },
    #[error("reading tree snapshot: {0}")]
    Io(io::Error),
}

impl From<io::Error> for SnapshotError {
    fn from(e: io::Error) -> Self {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            SnapshotError::Truncated
        } else {
            SnapshotError::Io(e)
        }
    }
}

fn corrupt(msg: impl Into<String>) -> SnapshotError {
    SnapshotError::Corrupt(msg.into())
}

/// The tree as of one applied zxid, sharing its nodes with the live tree.
/// Cheap to take and to clone; `Send`, so a background thread can write it.
#[derive(Clone)]
pub struct TreeSnapshot {
    nodes: imbl::OrdSet<Node>,
    acls: imbl::OrdMap<u32, Arc<[Acl]>>,
}

impl std::fmt::Debug for TreeSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TreeSnapshot")
            .field("nodes", &self.nodes.len())
            .finish()
    }
}

/// Buffers output and checksums it.
struct Out<'a> {
    w: &'a mut dyn Write,
    buf: Vec<u8>,
    crc: crc32fast::Hasher,
}

impl Out<'_> {
    fn flush(&mut self) -> io::Result<()> {
        self.crc.update(&self.buf);
        self.w.write_all(&self.buf)?;
        self.buf.clear();
        Ok(())
    }

    fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }
    fn i32(&mut self, v: i32) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }
    fn i64(&mut self, v: i64) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }
    fn bytes(&mut self, v: &[u8]) -> io::Result<()> {
        let len = u32::try_from(v.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "field over 4 GiB"))?;
        self.u32(len);
        if v.len() > 1 << 16 {
            self.flush()?;
            self.crc.update(v);
            self.w.write_all(v)
        } else {
            self.buf.extend_from_slice(v);
            Ok(())
        }
    }
}

impl TreeSnapshot {
    pub(super) fn new(nodes: imbl::OrdSet<Node>, acls: imbl::OrdMap<u32, Arc<[Acl]>>) -> Self {
        TreeSnapshot { nodes, acls }
    }

    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    #[cfg(test)]
    pub(super) fn nodes(&self) -> &imbl::OrdSet<Node> {
        &self.nodes
    }

    /// Writes the snapshot in the format described in the module docs.
    /// Pass a buffered writer for files; this batches its own writes in
    /// 64 KiB chunks anyway.
    pub fn write_to(&self, w: &mut dyn Write) -> io::Result<()> {
        let mut out = Out {
            w,
            buf: Vec::with_capacity(64 << 10),
            crc: crc32fast::Hasher::new(),
        };
        out.buf.extend_from_slice(MAGIC);
        out.buf.extend_from_slice(&VERSION.to_be_bytes());
        out.buf
            .extend_from_slice(&(self.nodes.len() as u64).to_be_bytes());
        let mut acl_index: BTreeMap<u32, u32> = BTreeMap::new();
        for n in self.nodes.iter() {
            // The path: the key with its NUL back to '/'.
            let key = n.key();
            if key.is_empty() {
                out.bytes(b"/")?;
            } else {
                out.u32(key.len() as u32);
                out.buf
                    .extend(key.iter().map(|&b| if b == 0 { b'/' } else { b }));
            }
            let h = n.header();
            out.u8(h.kind.tag());
            out.i64(h.kind.value());
            for v in [h.czxid, h.mzxid, h.pzxid, h.ctime, h.mtime] {
                out.i64(v);
            }
            for v in [h.version, h.cversion, h.aversion] {
                out.i32(v);
            }
            match acl_index.get(&h.acl) {
                Some(&i) => out.u32(i),
                None => {
                    let list = self.acls.get(&h.acl).ok_or_else(|| {
                        io::Error::other(format!("node refers to missing ACL id {}", h.acl))
                    })?;
                    let i = acl_index.len() as u32;
                    acl_index.insert(h.acl, i);
                    out.u32(i);
                    out.u32(list.len() as u32);
                    for a in list.iter() {
                        out.i32(a.perms);
                        out.bytes(a.id.scheme.as_bytes())?;
                        out.bytes(a.id.id.as_bytes())?;
                    }
                }
            }
            match n.nullable_data() {
                Some(data) => out.bytes(data)?,
                None => out.u32(NULL_DATA),
            }
            if out.buf.len() >= 64 << 10 {
                out.flush()?;
            }
        }
        out.flush()?;
        let crc = out.crc.clone().finalize();
        out.w.write_all(&crc.to_be_bytes())?;
        out.w.flush()
    }
}

/// Reads and checksums input.
struct In<'a> {
    r: &'a mut dyn Read,
    crc: crc32fast::Hasher,
}

impl In<'_> {
    fn exact<const N: usize>(&mut self) -> Result<[u8; N], SnapshotError> {
        let mut b = [0u8; N];
        self.r.read_exact(&mut b)?;
        self.crc.update(&b);
        Ok(b)
    }
    fn u16(&mut self) -> Result<u16, SnapshotError> {
        Ok(u16::from_be_bytes(self.exact()?))
    }
    fn u32(&mut self) -> Result<u32, SnapshotError> {
        Ok(u32::from_be_bytes(self.exact()?))
    }
    fn i32(&mut self) -> Result<i32, SnapshotError> {
        Ok(i32::from_be_bytes(self.exact()?))
    }
    fn u64(&mut self) -> Result<u64, SnapshotError> {
        Ok(u64::from_be_bytes(self.exact()?))
    }

    /// A length-prefixed field of at most `max` bytes. The buffer grows with
    /// the bytes that actually arrive, so a lying length cannot make us
    /// allocate what the input does not hold.
    fn bytes(&mut self, max: u32, what: &str) -> Result<Vec<u8>, SnapshotError> {
        let len = self.u32()?;
        self.bytes_of_len(len, max, what)
    }

    /// [`In::bytes`] once its length is read.
    fn bytes_of_len(&mut self, len: u32, max: u32, what: &str) -> Result<Vec<u8>, SnapshotError> {
        if len > max {
            return Err(corrupt(format!(
                "{what} of {len} bytes is over the limit of {max}"
            )));
        }
        let mut v = Vec::with_capacity((len as usize).min(1 << 16));
        (&mut *self.r).take(u64::from(len)).read_to_end(&mut v)?;
        if v.len() != len as usize {
            return Err(SnapshotError::Truncated);
        }
        self.crc.update(&v);
        Ok(v)
    }

    fn string(&mut self, max: u32, what: &str) -> Result<String, SnapshotError> {
        String::from_utf8(self.bytes(max, what)?)
            .map_err(|_| corrupt(format!("{what} is not UTF-8")))
    }
}

pub(super) fn read(r: &mut dyn Read) -> Result<DataTree, SnapshotError> {
    let mut inp = In {
        r,
        crc: crc32fast::Hasher::new(),
    };
    if &inp.exact::<6>()? != MAGIC {
        return Err(SnapshotError::BadMagic);
    }
    let format = inp.u16()?;
    if format != VERSION && format != VERSION_1 {
        return Err(SnapshotError::Version(format));
    }
    let count = inp.u64()?;
    if count == 0 {
        return Err(corrupt("no nodes, not even the root"));
    }
    // Nodes in key order with their children counted; nothing is reserved
    // from `count`, which is not trusted.
    let mut nodes: Vec<Node> = Vec::new();
    let mut kids: Vec<u32> = Vec::new();
    let mut acl_lists: Vec<Vec<Acl>> = Vec::new();
    for i in 0..count {
        let p = inp.string(MAX_PATH_LEN, "path")?;
        wazoo_proto::path::validate(&p, false).map_err(corrupt)?;
        if (i == 0) != (p == "/") {
            return Err(corrupt(format!(
                "node {i} is {p}: the root must come first, once"
            )));
        }
        let key = encode_key(&p);
        if let Some(prev) = nodes.last() {
            if prev.key() >= key.as_slice() {
                return Err(corrupt(format!("{p} is out of order")));
            }
        }
        // The fixed part in one read: kind, value, five i64, three i32, acl.
        let f = inp.exact::<FIXED_LEN>()?;
        let i64_at = |o: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&f[o..o + 8]);
            i64::from_be_bytes(b)
        };
        let i32_at = |o: usize| {
            let mut b = [0u8; 4];
            b.copy_from_slice(&f[o..o + 4]);
            i32::from_be_bytes(b)
        };
        let (tag, value) = (f[0], i64_at(1));
        let kind = ZnodeType::from_parts(tag, value)
            .ok_or_else(|| corrupt(format!("{p}: invalid node kind {tag}/{value}")))?;
        if i == 0 && kind != ZnodeType::Persistent {
            return Err(corrupt("the root is not a persistent node"));
        }
        let (czxid, mzxid, pzxid, ctime, mtime) =
            (i64_at(9), i64_at(17), i64_at(25), i64_at(33), i64_at(41));
        let (version, cversion, aversion) = (i32_at(49), i32_at(53), i32_at(57));
        let acl = i32_at(61) as u32;
        if acl as usize == acl_lists.len() {
            let n = inp.u32()?;
            if n > MAX_ACL_ENTRIES {
                return Err(corrupt(format!("{p}: ACL list of {n} entries")));
            }
            let mut list = Vec::new();
            for _ in 0..n {
                let perms = inp.i32()?;
                let scheme = inp.string(MAX_ACL_STRING, "ACL scheme")?;
                let id = inp.string(MAX_ACL_STRING, "ACL id")?;
                list.push(Acl {
                    perms,
                    id: Id { scheme, id },
                });
            }
            acl_lists.push(list);
        } else if acl as usize > acl_lists.len() {
            return Err(corrupt(format!("{p}: ACL {acl} is not defined")));
        }
        let data = match inp.u32()? {
            NULL_DATA if format >= VERSION => None,
            len => Some(inp.bytes_of_len(len, MAX_DATA_LEN, "data")?),
        };
        if i > 0 {
            let parent = encode_key(wazoo_proto::path::parent(&p));
            let pi = nodes
                .binary_search_by(|n| n.key().cmp(parent.as_slice()))
                .map_err(|_| corrupt(format!("{p}: the parent is missing")))?;
            if matches!(nodes[pi].kind(), ZnodeType::Ephemeral { .. }) {
                return Err(corrupt(format!("{p}: the parent is ephemeral")));
            }
            kids[pi] = kids[pi].saturating_add(1);
        }
        let h = Header {
            czxid,
            mzxid,
            pzxid,
            ctime,
            mtime,
            version,
            cversion,
            aversion,
            acl,
            num_children: 0,
            kind,
        };
        nodes.push(Node::new(&h, &key, data.as_deref()));
        kids.push(0);
    }
    let computed = inp.crc.clone().finalize();
    let mut b = [0u8; 4];
    inp.r.read_exact(&mut b)?;
    let stored = u32::from_be_bytes(b);
    if stored != computed {
        return Err(SnapshotError::Checksum { stored, computed });
    }

    let mut t = DataTree::empty();
    for (id, list) in acl_lists.into_iter().enumerate() {
        t.acls.insert_with_id(id as u32, list);
    }
    for (n, k) in nodes.into_iter().zip(kids) {
        let n = if k > 0 {
            let mut h = n.header();
            h.num_children = k;
            n.with_header(&h)
        } else {
            n
        };
        let p = super::node::decode_key(n.key());
        t.set_node(&p, Some(n));
    }
    t.acls.purge();
    Ok(t)
}
