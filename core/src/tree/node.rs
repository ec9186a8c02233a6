//! One znode in one allocation, and the key order of the tree.
//!
//! # Keys
//!
//! The tree is one ordered set of nodes. A node's key is its path with the
//! *last* `/` replaced by a NUL byte (`/a/b` -> `/a\0b`, `/a` -> `\0a`), and
//! the root's key is the empty string. NUL cannot occur in a path (ZooKeeper Programmer's Guide, "Data Model",
//! "ZNodes"), so this is a bijection, keys have the same length as paths, and
//! the byte order of keys is the order of (parent path, name):
//!
//! - the children of a node `P` are exactly the keys that start with `P\0`
//!   (for the root, `\0`), one contiguous run sorted by name, so
//!   getChildren is a range scan and needs no per-node children set;
//! - the descendants of `P` deeper than its children are the keys that start
//!   with `P/` (for the root, `/`), another contiguous run;
//! - a parent sorts before each of its children (`P`'s own key shares the
//!   prefix up to its last `/`, where it has `\0` and the child has `/`), so
//!   walking the set in order visits parents first.
//!
//! # Layout
//!
//! A node is an `Arc<[u8]>`: a flags byte, the key, the stat fields (those
//! at their usual value left out, see [`Node`]), then the data (null data,
//! which ZooKeeper keeps apart from empty data, is a flag bit and no bytes). One
//! allocation per znode and no separate children set keep a znode of 100
//! bytes at about 210 bytes of resident memory, set overhead and allocator
//! slack included (the `memory_per_node` test; Apache ZooKeeper 3.8 holds
//! about 440 bytes of live heap per such znode and, with default JVM
//! settings, 1.6 GB of RSS for a million). The layout lives in memory only:
//! snapshots write the stat fields one by one. Nodes are immutable: a change builds a new node and
//! replaces the old one in the set, which leaves any snapshot sharing the old
//! one untouched.
//!
//! The B-tree's branch levels hold clones of some keys as separators; here a
//! key is a whole node, so a separator can keep an old version of a node (its
//! data included) alive after the node changed or went, until the branch is
//! rewritten. Separators are about one node in ten, so this costs a fraction
//! of the churned data, never correctness: only the key of a separator is
//! ever read.

use std::cmp::Ordering;
use std::sync::Arc;

use equivalent::{Comparable, Equivalent};

/// What a znode is, beyond its stat fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ZnodeType {
    Persistent,
    /// Deleted when the owning session ends (ZooKeeper Programmer's Guide, "Data Model", "Ephemeral Nodes").
    Ephemeral {
        owner: i64,
    },
    /// Reaped once it has had children and has none (ZooKeeper Programmer's Guide, "Data Model", "Container Nodes").
    Container,
    /// Reaped when unmodified for `ttl_ms` and childless (ZooKeeper Programmer's Guide, "Data Model", "TTL Nodes").
    Ttl {
        ttl_ms: i64,
    },
}

/// `EphemeralType.CONTAINER_EPHEMERAL_OWNER`: how ZooKeeper stores a
/// container's type in `StatPersisted.ephemeralOwner` (clients see 0).
pub const CONTAINER_EPHEMERAL_OWNER: i64 = i64::MIN;
/// `EphemeralType` extended-type mask: the top byte of a TTL node's
/// stored `ephemeralOwner` (clients see 0).
pub const TTL_EPHEMERAL_OWNER_MASK: i64 = 0xFF00_0000_0000_0000u64 as i64;
/// The largest TTL ZooKeeper can encode (`EphemeralType.TTL.maxValue()`,
/// 40 bits of milliseconds, about 34 years).
pub const MAX_TTL_MS: i64 = 0x00FF_FFFF_FFFF;

/// Whether a TTL node may have this TTL (`EphemeralType.TTL`'s range,
/// 1..=[`MAX_TTL_MS`]): the one rule prep, apply and snapshot loading share.
pub fn ttl_in_range(ttl_ms: i64) -> bool {
    (1..=MAX_TTL_MS).contains(&ttl_ms)
}

impl ZnodeType {
    /// `StatPersisted.ephemeralOwner`, ZooKeeper's stored encoding of the
    /// type: the session for an ephemeral, `0x8000000000000000` for a
    /// container, `0xFF00000000000000 | ttl` for a TTL node, 0 otherwise.
    pub fn persisted_ephemeral_owner(self) -> i64 {
        match self {
            ZnodeType::Persistent => 0,
            ZnodeType::Ephemeral { owner } => owner,
            ZnodeType::Container => CONTAINER_EPHEMERAL_OWNER,
            ZnodeType::Ttl { ttl_ms } => TTL_EPHEMERAL_OWNER_MASK | ttl_ms,
        }
    }

    /// Stat.ephemeralOwner as clients see it (`DataNode.getClientEphemeralOwner`):
    /// the owning session for an ephemeral and 0 for everything else,
    /// containers and TTL nodes included.
    pub fn client_ephemeral_owner(self) -> i64 {
        match self {
            ZnodeType::Ephemeral { owner } => owner,
            _ => 0,
        }
    }

    pub(crate) fn tag(self) -> u8 {
        match self {
            ZnodeType::Persistent => 0,
            ZnodeType::Ephemeral { .. } => 1,
            ZnodeType::Container => 2,
            ZnodeType::Ttl { .. } => 3,
        }
    }

    /// The value stored next to the tag: the owner or the TTL.
    pub(crate) fn value(self) -> i64 {
        match self {
            ZnodeType::Persistent | ZnodeType::Container => 0,
            ZnodeType::Ephemeral { owner } => owner,
            ZnodeType::Ttl { ttl_ms } => ttl_ms,
        }
    }

    /// The inverse of (`tag`, `value`); `None` for combinations that never
    /// occur (an unknown tag, an ephemeral without owner, a TTL out of range).
    pub(crate) fn from_parts(tag: u8, value: i64) -> Option<ZnodeType> {
        match (tag, value) {
            (0, 0) => Some(ZnodeType::Persistent),
            (1, owner) if owner != 0 => Some(ZnodeType::Ephemeral { owner }),
            (2, 0) => Some(ZnodeType::Container),
            (3, ttl_ms) if ttl_in_range(ttl_ms) => Some(ZnodeType::Ttl { ttl_ms }),
            _ => None,
        }
    }
}

/// The fixed-size part of a node: every persisted stat field plus the
/// bookkeeping the tree keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    pub czxid: i64,
    pub mzxid: i64,
    pub pzxid: i64,
    pub ctime: i64,
    pub mtime: i64,
    pub version: i32,
    pub cversion: i32,
    pub aversion: i32,
    /// Id of the node's ACL list in the tree's ACL table.
    pub acl: u32,
    pub num_children: u32,
    pub kind: ZnodeType,
}

impl Header {
    /// A node with every stat field zero, as ZooKeeper's built-in nodes are.
    pub fn zero(acl: u32) -> Header {
        Header {
            czxid: 0,
            mzxid: 0,
            pzxid: 0,
            ctime: 0,
            mtime: 0,
            version: 0,
            cversion: 0,
            aversion: 0,
            acl,
            num_children: 0,
            kind: ZnodeType::Persistent,
        }
    }
}

/// Byte 0 of a node: the type's tag in the low two bits, then one bit per
/// optional field present (see [`Node`]'s layout), then whether the data
/// is null.
const TAG_MASK: u8 = 0b11;
const F_CHILDREN: u8 = 1 << 2;
const F_MZXID: u8 = 1 << 3;
const F_MTIME: u8 = 1 << 4;
const F_PZXID: u8 = 1 << 5;
const F_VERSIONS: u8 = 1 << 6;
/// The data is null (ZooKeeper Programmer's Guide, "ZooKeeper Data Model":
/// a node created or set with null data reads back as null, not empty);
/// no data bytes follow.
const F_NULL_DATA: u8 = 1 << 7;
/// The optional fields, in the order they are stored, with their sizes.
const OPTIONALS: [(u8, usize); 5] = [
    (F_CHILDREN, 4),
    (F_MZXID, 8),
    (F_MTIME, 8),
    (F_PZXID, 8),
    (F_VERSIONS, 12),
];
/// czxid, ctime and the ACL id: the fields every node stores.
const FIXED_LEN: usize = 20;
/// The most bytes a node's fields take (flags, key length, fixed and
/// optional fields, the type's value), besides its key and data.
#[cfg(test)]
pub(crate) const HEADER_LEN_MAX: usize = 1 + 5 + FIXED_LEN + 40 + 8;
/// The fewest: a childless, never-changed persistent node with a key
/// shorter than 128 bytes.
#[cfg(test)]
pub(crate) const HEADER_LEN_MIN: usize = 1 + 1 + FIXED_LEN;

/// Whether a type tag stores a value (the owner, the TTL).
fn tag_has_value(tag: u8) -> bool {
    matches!(tag, 1 | 3)
}

/// Bytes of the optional fields and the type's value that `flags` says are
/// present.
fn optional_len(flags: u8) -> usize {
    let opt: usize = OPTIONALS
        .iter()
        .filter(|(f, _)| flags & f != 0)
        .map(|(_, n)| n)
        .sum();
    opt + if tag_has_value(flags & TAG_MASK) {
        8
    } else {
        0
    }
}

/// Appends fixed-size little-endian fields to a stack buffer.
struct Fields {
    buf: [u8; FIXED_LEN + 48],
    len: usize,
}

impl Fields {
    fn put(&mut self, bytes: &[u8]) {
        self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }
}

/// One znode: its fields, key and data in a single shared allocation.
///
/// Layout (little-endian): a flags byte (the type's tag, and which optional
/// fields are stored); the key's length as a LEB128 varint; the key; czxid,
/// ctime, the ACL id; then, each only when it differs from its usual value,
/// numChildren (else 0), mzxid (else czxid), mtime (else ctime), pzxid (else
/// czxid), version/cversion/aversion (else all 0); the owner or TTL for an
/// ephemeral or TTL node; then the data (none when the flags byte says it
/// is null). A fresh leaf, the bulk of any
/// large tree, stores 22 bytes besides its key and data instead of the 73 of
/// every field in full: at 100 bytes of data that moves its allocation from
/// allocator size class 224 to 160. The key comes first so that comparing
/// nodes, the B-tree's hot path, reads two bytes of header at most.
#[derive(Clone)]
pub(crate) struct Node(Arc<[u8]>);

impl Node {
    /// Builds a node. `key` is the encoded key (see [`encode_key`]);
    /// `data` is `None` for null data.
    pub fn new(header: &Header, key: &[u8], data: Option<&[u8]>) -> Node {
        Node::build(header, [key, b"", b""], data)
    }

    /// Builds the node for a (valid) path.
    pub fn for_path(header: &Header, path: &str, data: Option<&[u8]>) -> Node {
        let p = Probe::path(path);
        Node::build(header, [p.head, p.sep, p.tail], data)
    }

    fn build(header: &Header, key: [&[u8]; 3], data: Option<&[u8]>) -> Node {
        let key_len = key[0].len() + key[1].len() + key[2].len();
        let mut flags = header.kind.tag();
        if data.is_none() {
            flags |= F_NULL_DATA;
        }
        let data = data.unwrap_or_default();
        let mut f = Fields {
            buf: [0; FIXED_LEN + 48],
            len: 0,
        };
        f.put(&header.czxid.to_le_bytes());
        f.put(&header.ctime.to_le_bytes());
        f.put(&header.acl.to_le_bytes());
        if header.num_children != 0 {
            flags |= F_CHILDREN;
            f.put(&header.num_children.to_le_bytes());
        }
        if header.mzxid != header.czxid {
            flags |= F_MZXID;
            f.put(&header.mzxid.to_le_bytes());
        }
        if header.mtime != header.ctime {
            flags |= F_MTIME;
            f.put(&header.mtime.to_le_bytes());
        }
        if header.pzxid != header.czxid {
            flags |= F_PZXID;
            f.put(&header.pzxid.to_le_bytes());
        }
        if (header.version, header.cversion, header.aversion) != (0, 0, 0) {
            flags |= F_VERSIONS;
            f.put(&header.version.to_le_bytes());
            f.put(&header.cversion.to_le_bytes());
            f.put(&header.aversion.to_le_bytes());
        }
        if tag_has_value(header.kind.tag()) {
            f.put(&header.kind.value().to_le_bytes());
        }
        debug_assert_eq!(
            f.len,
            FIXED_LEN + optional_len(flags),
            "fields and flags agree"
        );
        // Keys are paths, which a request frame bounds far below 4 GiB.
        let mut prefix = [0u8; 6];
        prefix[0] = flags;
        let mut plen = 1;
        let mut v = key_len as u32;
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                prefix[plen] = byte;
                plen += 1;
                break;
            }
            prefix[plen] = byte | 0x80;
            plen += 1;
        }
        // Gathered by memcpy into a buffer of the exact size, then copied
        // once into the Arc's allocation. Not collected into the Arc from
        // an iterator: unoptimized (a debug build) that is a loop over
        // every byte, which took 37 % of a debug observer's CPU while it
        // converted a 150 MB snapshot from a ZooKeeper leader.
        let len = plen + key_len + f.len + data.len();
        let mut buf = Vec::with_capacity(len);
        for part in [
            &prefix[..plen],
            key[0],
            key[1],
            key[2],
            &f.buf[..f.len],
            data,
        ] {
            buf.extend_from_slice(part);
        }
        Node(Arc::from(buf))
    }

    /// The same key and data with another header.
    pub fn with_header(&self, header: &Header) -> Node {
        Node::new(header, self.key(), self.nullable_data())
    }

    /// The same key and header with other data.
    pub fn with_data(&self, header: &Header, data: Option<&[u8]>) -> Node {
        Node::new(header, self.key(), data)
    }

    fn flags(&self) -> u8 {
        self.0[0]
    }

    fn i64_at(&self, off: usize) -> i64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.0[off..off + 8]);
        i64::from_le_bytes(b)
    }

    fn u32_at(&self, off: usize) -> u32 {
        let mut b = [0u8; 4];
        b.copy_from_slice(&self.0[off..off + 4]);
        u32::from_le_bytes(b)
    }

    /// Where the key starts, and its length.
    fn key_span(&self) -> (usize, usize) {
        let (mut len, mut shift, mut at) = (0usize, 0u32, 1usize);
        loop {
            let byte = self.0[at];
            at += 1;
            len |= ((byte & 0x7f) as usize) << shift;
            if byte & 0x80 == 0 {
                return (at, len);
            }
            shift += 7;
        }
    }

    /// Where the fixed fields (czxid, ctime, acl) start.
    fn fields_at(&self) -> usize {
        let (at, len) = self.key_span();
        at + len
    }

    /// Where the optional field `flag` is stored, if it is.
    fn optional_at(&self, flag: u8) -> Option<usize> {
        let flags = self.flags();
        if flags & flag == 0 {
            return None;
        }
        let before: usize = OPTIONALS
            .iter()
            .take_while(|(f, _)| *f != flag)
            .filter(|(f, _)| flags & f != 0)
            .map(|(_, n)| n)
            .sum();
        Some(self.fields_at() + FIXED_LEN + before)
    }

    pub fn key(&self) -> &[u8] {
        let (at, len) = self.key_span();
        &self.0[at..at + len]
    }

    /// The data's bytes: none for null data (whose length ZooKeeper's
    /// Stat also reports as 0).
    pub fn data(&self) -> &[u8] {
        &self.0[self.fields_at() + FIXED_LEN + optional_len(self.flags())..]
    }

    /// The data, `None` when it is null.
    pub fn nullable_data(&self) -> Option<&[u8]> {
        if self.flags() & F_NULL_DATA != 0 {
            None
        } else {
            Some(self.data())
        }
    }

    pub fn kind(&self) -> ZnodeType {
        let tag = self.flags() & TAG_MASK;
        let value = if tag_has_value(tag) {
            let at = self.fields_at() + FIXED_LEN + optional_len(self.flags()) - 8;
            self.i64_at(at)
        } else {
            0
        };
        // Only `Node::build` writes nodes, from a valid `ZnodeType`.
        ZnodeType::from_parts(tag, value).unwrap_or(ZnodeType::Persistent)
    }

    pub fn acl(&self) -> u32 {
        self.u32_at(self.fields_at() + 16)
    }

    pub fn num_children(&self) -> u32 {
        self.optional_at(F_CHILDREN)
            .map(|at| self.u32_at(at))
            .unwrap_or(0)
    }

    pub fn cversion(&self) -> i32 {
        self.optional_at(F_VERSIONS)
            .map(|at| self.u32_at(at + 4) as i32)
            .unwrap_or(0)
    }

    pub fn mtime(&self) -> i64 {
        match self.optional_at(F_MTIME) {
            Some(at) => self.i64_at(at),
            None => self.i64_at(self.fields_at() + 8),
        }
    }

    pub fn header(&self) -> Header {
        let base = self.fields_at();
        let czxid = self.i64_at(base);
        let ctime = self.i64_at(base + 8);
        let (version, cversion, aversion) = match self.optional_at(F_VERSIONS) {
            Some(at) => (
                self.u32_at(at) as i32,
                self.u32_at(at + 4) as i32,
                self.u32_at(at + 8) as i32,
            ),
            None => (0, 0, 0),
        };
        Header {
            czxid,
            mzxid: self
                .optional_at(F_MZXID)
                .map(|at| self.i64_at(at))
                .unwrap_or(czxid),
            pzxid: self
                .optional_at(F_PZXID)
                .map(|at| self.i64_at(at))
                .unwrap_or(czxid),
            ctime,
            mtime: self
                .optional_at(F_MTIME)
                .map(|at| self.i64_at(at))
                .unwrap_or(ctime),
            version,
            cversion,
            aversion,
            acl: self.u32_at(base + 16),
            num_children: self.num_children(),
            kind: self.kind(),
        }
    }

    /// Heap bytes this node holds (its allocation, without allocator slack).
    pub fn heap_size(&self) -> usize {
        self.0.len() + 2 * std::mem::size_of::<usize>()
    }

    /// Whether two handles share one allocation.
    #[cfg(test)]
    pub fn ptr_eq(&self, other: &Node) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl PartialEq for Node {
    fn eq(&self, other: &Node) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Node {}

impl PartialOrd for Node {
    fn partial_cmp(&self, other: &Node) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Nodes are ordered (and equal) by key only.
impl Ord for Node {
    fn cmp(&self, other: &Node) -> Ordering {
        self.key().cmp(other.key())
    }
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("path", &decode_key(self.key()))
            .field("header", &self.header())
            .field("data_len", &self.nullable_data().map(<[u8]>::len))
            .finish()
    }
}

/// A key given in up to three pieces, compared with node keys without
/// building it: lookups and range bounds allocate nothing.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Probe<'a> {
    head: &'a [u8],
    sep: &'a [u8],
    tail: &'a [u8],
}

impl<'a> Probe<'a> {
    /// The key of `path` (which must be a valid path).
    pub fn path(path: &'a str) -> Probe<'a> {
        if path == "/" {
            return Probe {
                head: b"",
                sep: b"",
                tail: b"",
            };
        }
        match path.rfind('/') {
            Some(i) => Probe {
                head: &path.as_bytes()[..i],
                sep: b"\0",
                tail: &path.as_bytes()[i + 1..],
            },
            // Not a path: a probe no key equals (no name contains NUL).
            None => Probe {
                head: b"",
                sep: b"\0\0",
                tail: path.as_bytes(),
            },
        }
    }

    /// `prefix` followed by one byte: with `prefix` the parent's "plain"
    /// path (`""` for the root), `\0`..`\x01` bounds its children and
    /// `/`..`0` its deeper descendants.
    pub fn prefix(prefix: &'a [u8], next: &'a [u8]) -> Probe<'a> {
        Probe {
            head: prefix,
            sep: next,
            tail: b"",
        }
    }

    fn cmp_key(&self, key: &[u8]) -> Ordering {
        let mut k = key;
        for part in [self.head, self.sep, self.tail] {
            let n = part.len().min(k.len());
            match part[..n].cmp(&k[..n]) {
                Ordering::Equal => {}
                o => return o,
            }
            if n < part.len() {
                return Ordering::Greater;
            }
            k = &k[n..];
        }
        if k.is_empty() {
            Ordering::Equal
        } else {
            Ordering::Less
        }
    }
}

impl Equivalent<Node> for Probe<'_> {
    fn equivalent(&self, key: &Node) -> bool {
        self.cmp_key(key.key()) == Ordering::Equal
    }
}

impl Comparable<Node> for Probe<'_> {
    fn compare(&self, key: &Node) -> Ordering {
        self.cmp_key(key.key())
    }
}

/// The "plain" form of a path used as a key prefix for its children: the
/// path itself, and `""` for the root.
pub(crate) fn plain(path: &str) -> &[u8] {
    if path == "/" {
        b""
    } else {
        path.as_bytes()
    }
}

/// The key of a valid path.
pub(crate) fn encode_key(path: &str) -> Vec<u8> {
    if path == "/" {
        return Vec::new();
    }
    let mut k = path.as_bytes().to_vec();
    if let Some(i) = path.rfind('/') {
        k[i] = 0;
    }
    k
}

/// The path of a key.
pub(crate) fn decode_key(key: &[u8]) -> String {
    if key.is_empty() {
        return "/".to_string();
    }
    let mut p = String::from_utf8_lossy(key).into_owned();
    if let Some(i) = p.find('\0') {
        p.replace_range(i..i + 1, "/");
    }
    p
}

/// The name (last component) of a non-root key.
pub(crate) fn key_name(key: &[u8]) -> &[u8] {
    match key.iter().position(|&b| b == 0) {
        Some(i) => &key[i + 1..],
        None => key,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_encode_decode_and_sort_parents_first_children_contiguous() {
        for p in ["/", "/a", "/a/b", "/a.b/c/d", "/zookeeper/quota"] {
            assert_eq!(decode_key(&encode_key(p)), p);
            assert_eq!(Probe::path(p).cmp_key(&encode_key(p)), Ordering::Equal);
        }
        let mut paths = vec![
            "/a/b/c", "/a", "/", "/a/b", "/a.x", "/a/c", "/b", "/a/b0", "/ab",
        ];
        paths.sort_by_key(|p| encode_key(p));
        // Parents before their children.
        for (i, p) in paths.iter().enumerate() {
            let parent = wazoo_proto::path::parent(p);
            if !parent.is_empty() {
                let j = paths.iter().position(|q| *q == parent).unwrap();
                assert!(j < i, "{parent} sorts after {p}: {paths:?}");
            }
        }
        // Children of /a contiguous and sorted by name.
        let kids: Vec<&str> = paths
            .iter()
            .copied()
            .filter(|p| wazoo_proto::path::parent(p) == "/a")
            .collect();
        assert_eq!(kids, vec!["/a/b", "/a/b0", "/a/c"]);
    }

    #[test]
    fn probes_order_like_the_keys_they_stand_for() {
        let keys: Vec<Vec<u8>> = ["/", "/a", "/a/b", "/a/bc", "/b"]
            .iter()
            .map(|p| encode_key(p))
            .collect();
        for p in ["/", "/a", "/a/b", "/a/bb", "/a/bc", "/b", "/0", "/a/a"] {
            let k = encode_key(p);
            for other in &keys {
                assert_eq!(
                    Probe::path(p).cmp_key(other),
                    k.as_slice().cmp(other),
                    "{p}"
                );
            }
        }
    }

    #[test]
    fn a_node_round_trips_its_header_key_and_data() {
        let h = Header {
            czxid: 1,
            mzxid: -2,
            pzxid: i64::MAX,
            ctime: i64::MIN,
            mtime: 5,
            version: -1,
            cversion: i32::MIN,
            aversion: 7,
            acl: u32::MAX,
            num_children: 3,
            kind: ZnodeType::Ttl { ttl_ms: MAX_TTL_MS },
        };
        let n = Node::new(&h, b"/a\0b", Some(&b"data"[..]));
        assert_eq!(n.header(), h);
        assert_eq!(n.key(), b"/a\0b");
        assert_eq!(n.data(), b"data");
        assert_eq!(
            (n.acl(), n.num_children(), n.cversion(), n.mtime()),
            (u32::MAX, 3, i32::MIN, 5)
        );
        assert_eq!(
            n.kind().persisted_ephemeral_owner(),
            0xFF00_00FF_FFFF_FFFFu64 as i64
        );
        assert_eq!(n.kind().client_ephemeral_owner(), 0);
    }

    /// Every combination of optional fields present or left out, every
    /// type, and key lengths on both sides of each varint byte boundary:
    /// the header, key and data read back as written.
    #[test]
    fn every_field_combination_and_key_length_round_trips() {
        let kinds = [
            ZnodeType::Persistent,
            ZnodeType::Ephemeral { owner: -5 },
            ZnodeType::Container,
            ZnodeType::Ttl { ttl_ms: 1 },
        ];
        let lens = [0usize, 1, 127, 128, 300, 16_383, 16_384, 70_000];
        for bits in 0u32..32 {
            for kind in kinds {
                for &len in &lens {
                    let on = |b: u32| bits & (1 << b) != 0;
                    let h = Header {
                        czxid: 10,
                        mzxid: if on(0) { 11 } else { 10 },
                        pzxid: if on(1) { 12 } else { 10 },
                        ctime: 1000,
                        mtime: if on(2) { 2000 } else { 1000 },
                        version: 0,
                        cversion: if on(3) { 4 } else { 0 },
                        aversion: 0,
                        acl: 9,
                        num_children: if on(4) { 2 } else { 0 },
                        kind,
                    };
                    let key = vec![b'k'; len];
                    let data = [bits as u8, 1, 2];
                    let n = Node::new(&h, &key, Some(&data[..]));
                    assert_eq!(n.header(), h, "bits {bits:05b}, key {len}");
                    assert_eq!(n.key(), &key[..]);
                    assert_eq!(n.data(), &data[..]);
                    assert_eq!(n.kind(), kind);
                    assert_eq!(n.mtime(), h.mtime);
                    assert_eq!(n.cversion(), h.cversion);
                    assert_eq!(n.num_children(), h.num_children);
                    assert_eq!(n.acl(), 9);
                    assert_eq!(n.with_header(&Header::zero(3)).data(), &data[..]);
                }
            }
        }
    }

    /// Null data (ZooKeeper Programmer's Guide, "ZooKeeper Data Model")
    /// is kept apart from empty data under every combination of fields,
    /// through a header change, and costs no byte.
    #[test]
    fn null_data_is_kept_apart_from_empty_data() {
        let kinds = [
            ZnodeType::Persistent,
            ZnodeType::Ephemeral { owner: 3 },
            ZnodeType::Container,
            ZnodeType::Ttl { ttl_ms: 9 },
        ];
        for kind in kinds {
            for versions in [0, 5] {
                let h = Header {
                    czxid: 1,
                    mzxid: 2,
                    version: versions,
                    num_children: 1,
                    kind,
                    ..Header::zero(4)
                };
                let null = Node::new(&h, b"\0n", None);
                let empty = Node::new(&h, b"\0n", Some(&b""[..]));
                assert_eq!(null.nullable_data(), None);
                assert_eq!(null.data(), b"");
                assert_eq!(empty.nullable_data(), Some(&b""[..]));
                assert_eq!((null.header(), null.kind()), (h, kind));
                assert_eq!(null.heap_size(), empty.heap_size());
                let moved = null.with_header(&Header::zero(8));
                assert_eq!(moved.nullable_data(), None);
                assert_eq!(moved.header(), Header::zero(8));
                assert_eq!(
                    null.with_data(&h, Some(&b"x"[..])).nullable_data(),
                    Some(&b"x"[..])
                );
                assert_eq!(empty.with_data(&h, None).nullable_data(), None);
            }
        }
    }

    /// A fresh leaf stores the fewest bytes besides its key and data.
    #[test]
    fn a_fresh_leaf_stores_only_the_fixed_fields() {
        let h = Header {
            czxid: 7,
            mzxid: 7,
            pzxid: 7,
            ctime: 99,
            mtime: 99,
            ..Header::zero(1)
        };
        let n = Node::for_path(&h, "/mem/b0000/n0000", Some(&[b'm'; 100][..]));
        assert_eq!(
            n.heap_size(),
            HEADER_LEN_MIN + 16 + 100 + 2 * std::mem::size_of::<usize>()
        );
        const { assert!(HEADER_LEN_MIN < HEADER_LEN_MAX) };
        assert_eq!(n.header(), h);
    }
}
