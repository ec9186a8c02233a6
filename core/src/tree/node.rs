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
//! A node is an `Arc<[u8]>`: a fixed header (little-endian, see the `OFF_*`
//! constants), the key, then the data. One allocation per znode and no
//! separate children set keep a znode of 100 bytes at about 270 bytes of
//! resident memory, set overhead and allocator slack included (the
//! `memory_per_node` test; Apache ZooKeeper 3.8 holds about 440 bytes of
//! live heap per such znode and, with default JVM settings, 1.6 GB of RSS
//! for a million). Nodes are immutable: a change builds a new node and
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

const OFF_CZXID: usize = 0;
const OFF_MZXID: usize = 8;
const OFF_PZXID: usize = 16;
const OFF_CTIME: usize = 24;
const OFF_MTIME: usize = 32;
const OFF_KIND_VALUE: usize = 40;
const OFF_VERSION: usize = 48;
const OFF_CVERSION: usize = 52;
const OFF_AVERSION: usize = 56;
const OFF_ACL: usize = 60;
const OFF_NUM_CHILDREN: usize = 64;
const OFF_KEY_LEN: usize = 68;
const OFF_KIND_TAG: usize = 72;
/// Bytes before the key.
pub(crate) const HEADER_LEN: usize = 73;

/// One znode: header, key and data in a single shared allocation.
#[derive(Clone)]
pub(crate) struct Node(Arc<[u8]>);

impl Node {
    /// Builds a node. `key` is the encoded key (see [`encode_key`]).
    pub fn new(header: &Header, key: &[u8], data: &[u8]) -> Node {
        Node::build(header, [key, b"", b""], data)
    }

    /// Builds the node for a (valid) path.
    pub fn for_path(header: &Header, path: &str, data: &[u8]) -> Node {
        let p = Probe::path(path);
        Node::build(header, [p.head, p.sep, p.tail], data)
    }

    fn build(header: &Header, key: [&[u8]; 3], data: &[u8]) -> Node {
        let key_len = key[0].len() + key[1].len() + key[2].len();
        let mut h = [0u8; HEADER_LEN];
        h[OFF_CZXID..OFF_CZXID + 8].copy_from_slice(&header.czxid.to_le_bytes());
        h[OFF_MZXID..OFF_MZXID + 8].copy_from_slice(&header.mzxid.to_le_bytes());
        h[OFF_PZXID..OFF_PZXID + 8].copy_from_slice(&header.pzxid.to_le_bytes());
        h[OFF_CTIME..OFF_CTIME + 8].copy_from_slice(&header.ctime.to_le_bytes());
        h[OFF_MTIME..OFF_MTIME + 8].copy_from_slice(&header.mtime.to_le_bytes());
        h[OFF_KIND_VALUE..OFF_KIND_VALUE + 8].copy_from_slice(&header.kind.value().to_le_bytes());
        h[OFF_VERSION..OFF_VERSION + 4].copy_from_slice(&header.version.to_le_bytes());
        h[OFF_CVERSION..OFF_CVERSION + 4].copy_from_slice(&header.cversion.to_le_bytes());
        h[OFF_AVERSION..OFF_AVERSION + 4].copy_from_slice(&header.aversion.to_le_bytes());
        h[OFF_ACL..OFF_ACL + 4].copy_from_slice(&header.acl.to_le_bytes());
        h[OFF_NUM_CHILDREN..OFF_NUM_CHILDREN + 4]
            .copy_from_slice(&header.num_children.to_le_bytes());
        // Keys are paths, which a request frame bounds far below 4 GiB.
        h[OFF_KEY_LEN..OFF_KEY_LEN + 4].copy_from_slice(&(key_len as u32).to_le_bytes());
        h[OFF_KIND_TAG] = header.kind.tag();
        // One allocation, zeroed, then filled by memcpy: much faster than
        // collecting bytes one by one, and no intermediate buffer.
        let len = HEADER_LEN + key_len + data.len();
        let mut buf: Arc<[u8]> = std::iter::repeat_n(0u8, len).collect();
        if let Some(b) = Arc::get_mut(&mut buf) {
            let mut at = 0;
            for part in [&h[..], key[0], key[1], key[2], data] {
                b[at..at + part.len()].copy_from_slice(part);
                at += part.len();
            }
        }
        Node(buf)
    }

    /// The same key and data with another header.
    pub fn with_header(&self, header: &Header) -> Node {
        Node::new(header, self.key(), self.data())
    }

    /// The same key and header with other data.
    pub fn with_data(&self, header: &Header, data: &[u8]) -> Node {
        Node::new(header, self.key(), data)
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

    fn key_len(&self) -> usize {
        self.u32_at(OFF_KEY_LEN) as usize
    }

    pub fn key(&self) -> &[u8] {
        &self.0[HEADER_LEN..HEADER_LEN + self.key_len()]
    }

    pub fn data(&self) -> &[u8] {
        &self.0[HEADER_LEN + self.key_len()..]
    }

    pub fn kind(&self) -> ZnodeType {
        // Only `Node::new` writes nodes, from a valid `ZnodeType`.
        ZnodeType::from_parts(self.0[OFF_KIND_TAG], self.i64_at(OFF_KIND_VALUE))
            .unwrap_or(ZnodeType::Persistent)
    }

    pub fn acl(&self) -> u32 {
        self.u32_at(OFF_ACL)
    }

    pub fn num_children(&self) -> u32 {
        self.u32_at(OFF_NUM_CHILDREN)
    }

    pub fn cversion(&self) -> i32 {
        self.u32_at(OFF_CVERSION) as i32
    }

    pub fn mtime(&self) -> i64 {
        self.i64_at(OFF_MTIME)
    }

    pub fn header(&self) -> Header {
        Header {
            czxid: self.i64_at(OFF_CZXID),
            mzxid: self.i64_at(OFF_MZXID),
            pzxid: self.i64_at(OFF_PZXID),
            ctime: self.i64_at(OFF_CTIME),
            mtime: self.i64_at(OFF_MTIME),
            version: self.u32_at(OFF_VERSION) as i32,
            cversion: self.u32_at(OFF_CVERSION) as i32,
            aversion: self.u32_at(OFF_AVERSION) as i32,
            acl: self.acl(),
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
            .field("data_len", &self.data().len())
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
        let n = Node::new(&h, b"/a\0b", b"data");
        assert_eq!(n.header(), h);
        assert_eq!(n.key(), b"/a\0b");
        assert_eq!(n.data(), b"data");
        assert_eq!(
            n.kind().persisted_ephemeral_owner(),
            0xFF00_00FF_FFFF_FFFFu64 as i64
        );
        assert_eq!(n.kind().client_ephemeral_owner(), 0);
    }
}
