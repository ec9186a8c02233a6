//! The data tree (ZooKeeper Programmer's Guide, "Data Model"): znodes with data, ACLs and stat,
//! the ephemeral index, containers and TTL nodes, quotas, and snapshots.
//!
//! The write pipeline validates requests against the tree plus its
//! outstanding changes and turns them into [`Txn`]s that carry absolute
//! values; [`DataTree::apply`] applies them, deterministically, on every
//! member, and answers with the watch events they trigger. Reads answer from
//! the applied state.
//!
//! Storage is one persistent ordered set of nodes ([`imbl::OrdSet`]) keyed
//! so that a node's children are one contiguous, name-sorted run (see
//! `node.rs`): no per-node children set, one allocation per znode, and
//! [`DataTree::snapshot`] is an O(1) clone a background thread can serialize
//! while writes go on. Every change goes through one function (`set_node`)
//! that keeps the derived indexes (ephemerals per session, containers, TTL
//! nodes, quota roots, ACL reference counts, data size) in step, and that can
//! record an undo log, which is how a multi is all-or-nothing.
//!
//! Why not a persistent hash map of path -> node plus a children set per
//! node: measured with `imbl::HashMap`, that costs about 450 bytes per
//! 100-byte znode against about 270 for this layout, and getChildren would
//! still need sorting or a second structure.
//!
//! What the pipeline must agree with (ZooKeeper 3.8's rules, checked
//! against the Debian `zookeeper` 3.8 server):
//! - a node *stores* a cversion that counts the creates of its children
//!   only ([`DataTree::stored_cversion`]); a sequential create is named
//!   after it (see [`sequential_path`]) and its txn carries it plus one
//!   (wrapping) as `parent_cversion`;
//! - a delete sets the parent's pzxid but does not touch its cversion
//!   (`DataTree.deleteNode`; ZooKeeper's own test says "we only set the
//!   cversion on create"), so create, delete, create gives `...0000000000`
//!   then `...0000000001`;
//! - the Stat clients get reports cversion as `2 * stored - numChildren`
//!   (`DataNode.copyStat`: a fresh `/` says -1, `/zookeeper` -2), so never
//!   compute sequence numbers from [`Stat::cversion`];
//! - Stat.ephemeralOwner is the session for an ephemeral and 0 for
//!   everything else, containers and TTL nodes included
//!   (`getClientEphemeralOwner`); [`DataTree::node_type`] tells them apart.
//!   Ephemerals cannot have children;
//! - setACL changes aversion (from the txn) and nothing else, and fires no
//!   watch.
//!
//! Where this differs from ZooKeeper's `DataTree` on purpose:
//! - a txn that does not fit the tree is an error ([`ApplyError`]) and
//!   changes nothing, where ZooKeeper applies what it can (it needs leniency
//!   for its fuzzy snapshots; wazoo's snapshots are exact). Like ZooKeeper,
//!   the pipeline then records that error as the txn's result and goes on:
//!   the rules apply checks without looking at a node are [`check_txn`],
//!   which prep calls on every txn it produces, so only a prep bug can let
//!   such a txn be committed, and it never stops a member;
//! - the parent's cversion and pzxid are set from the txn unconditionally
//!   (ZooKeeper only moves them forward, again for fuzzy replay);
//! - loading a snapshot does not recompute quota stats nodes (they were
//!   exact when written; recomputing would make a restarted member differ
//!   from one that kept running).

mod acl_table;
mod build;
mod node;
mod quota;
mod snapshot;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::sync::Arc;

use wazoo_proto::path;
use wazoo_proto::{Acl, ErrorCode, EventType, Stat};

use super::txn::{CreateTxn, NodeKind, Txn, TxnHeader};
use acl_table::AclTable;
use node::{decode_key, key_name, plain, Header, Node, Probe};

pub use build::NodeSpec;
pub use node::{
    ttl_in_range, ZnodeType, CONTAINER_EPHEMERAL_OWNER, MAX_TTL_MS, TTL_EPHEMERAL_OWNER_MASK,
};
pub use quota::{limit_path, stat_path, StatsTrack, LIMIT_NODE, QUOTA_ROOT, STAT_NODE};
pub use snapshot::{SnapshotError, TreeSnapshot};

/// A watch event a txn triggers, in the order ZooKeeper triggers them.
#[derive(Debug, Clone)]
pub struct Trigger {
    pub path: String,
    pub event: EventType,
    /// The ACL a watcher needs READ on to be told: the node's own for
    /// created, changed and deleted (as it was when the event happened),
    /// the parent's for children-changed. ZooKeeper's DataTree passes the
    /// same lists to its WatchManager (the CVE-2024-23944 fix).
    pub acl: Arc<[Acl]>,
}

/// Triggers compare by the event they announce; the ACL rides along for
/// delivery and is checked where watches are delivered.
impl PartialEq for Trigger {
    fn eq(&self, other: &Trigger) -> bool {
        self.path == other.path && self.event == other.event
    }
}

impl Eq for Trigger {}

impl Trigger {
    fn new(path: &str, event: EventType, acl: Arc<[Acl]>) -> Trigger {
        Trigger {
            path: path.to_string(),
            event,
            acl,
        }
    }
}

/// A txn that does not fit the tree; the tree is left exactly as it was.
/// The pipeline checked it against the same state, so this is a prep bug:
/// the pipeline answers the write with [`ApplyError::code`] and goes on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    #[error("invalid path {path:?}: {reason}")]
    InvalidPath { path: String, reason: String },
    #[error("create {0}: the node already exists")]
    NodeExists(String),
    #[error("{0}: no such node")]
    NoNode(String),
    #[error("{0}: the parent does not exist")]
    NoParent(String),
    #[error("create {0}: the parent is ephemeral and cannot have children")]
    EphemeralParent(String),
    #[error("delete {0}: the node has children")]
    NotEmpty(String),
    #[error("the root cannot be deleted")]
    DeleteRoot,
    #[error("create {path}: {reason}")]
    BadCreate { path: String, reason: String },
    #[error("a {0} txn cannot be part of a multi")]
    NotInMulti(&'static str),
    #[error("{0}: an ACL list cannot be empty")]
    EmptyAcl(String),
    #[error("op {index} of a multi: {error}")]
    Multi {
        index: usize,
        error: Box<ApplyError>,
    },
}

impl ApplyError {
    /// The error code a client gets for a write whose txn this refuses,
    /// the one ZooKeeper's prep answers for the same fault.
    pub fn code(&self) -> ErrorCode {
        match self {
            ApplyError::InvalidPath { .. }
            | ApplyError::DeleteRoot
            | ApplyError::BadCreate { .. }
            | ApplyError::NotInMulti(_) => ErrorCode::BadArguments,
            ApplyError::NodeExists(_) => ErrorCode::NodeExists,
            ApplyError::NoNode(_) | ApplyError::NoParent(_) => ErrorCode::NoNode,
            ApplyError::EphemeralParent(_) => ErrorCode::NoChildrenForEphemerals,
            ApplyError::NotEmpty(_) => ErrorCode::NotEmpty,
            ApplyError::EmptyAcl(_) => ErrorCode::InvalidAcl,
            ApplyError::Multi { error, .. } => error.code(),
        }
    }
}

/// The rules a txn must meet whatever the tree holds: everything
/// [`DataTree::apply`] checks before it looks at a node (path rules, the
/// node kind and its owner, the TTL range, a non-empty ACL list, what may
/// stand inside a multi). The pipeline's prep calls this on every txn it
/// produces, for clients and recipes alike, so a committed txn can only be
/// refused by apply where the tree itself disagrees with prep's view.
pub fn check_txn(txn: &Txn) -> Result<(), ApplyError> {
    match txn {
        Txn::Multi(ops) => check_ops(ops),
        Txn::Recipe(r) => check_ops(&r.ops),
        Txn::CreateSession { .. }
        | Txn::CloseSession
        | Txn::Error { .. }
        | Txn::Noop
        | Txn::Deploy(_)
        | Txn::Undeploy { .. } => Ok(()),
        op => check_op(op),
    }
}

fn check_ops(ops: &[Txn]) -> Result<(), ApplyError> {
    for (index, op) in ops.iter().enumerate() {
        check_op(op).map_err(|e| ApplyError::Multi {
            index,
            error: Box::new(e),
        })?;
    }
    Ok(())
}

/// One op of a multi, or a single txn (see [`check_txn`]).
fn check_op(op: &Txn) -> Result<(), ApplyError> {
    match op {
        Txn::Create(c) => {
            check_path(&c.path)?;
            if c.path == "/" {
                return Err(ApplyError::NodeExists(c.path.clone()));
            }
            if c.acl.is_empty() {
                return Err(ApplyError::EmptyAcl(c.path.clone()));
            }
            created_kind(c).map(|_| ())
        }
        Txn::Delete { path } => {
            check_path(path)?;
            if path == "/" {
                return Err(ApplyError::DeleteRoot);
            }
            Ok(())
        }
        Txn::SetAcl { path, acl, .. } => {
            check_path(path)?;
            if acl.is_empty() {
                return Err(ApplyError::EmptyAcl(path.clone()));
            }
            Ok(())
        }
        Txn::SetData { path, .. } | Txn::Check { path } => check_path(path),
        Txn::CreateSession { .. } => Err(ApplyError::NotInMulti("createSession")),
        Txn::CloseSession => Err(ApplyError::NotInMulti("closeSession")),
        Txn::Multi(_) => Err(ApplyError::NotInMulti("multi")),
        Txn::Error { .. } => Err(ApplyError::NotInMulti("error")),
        Txn::Noop => Err(ApplyError::NotInMulti("noop")),
        Txn::Recipe(_) => Err(ApplyError::NotInMulti("recipe")),
        Txn::Deploy(_) | Txn::Undeploy { .. } => Err(ApplyError::NotInMulti("deploy")),
    }
}

/// The kind of node a create makes: a container or a TTL node has no
/// owner, and a TTL is within ZooKeeper's range.
fn created_kind(c: &CreateTxn) -> Result<ZnodeType, ApplyError> {
    let bad = |reason: &str| ApplyError::BadCreate {
        path: c.path.clone(),
        reason: reason.to_string(),
    };
    match (c.kind, c.ephemeral_owner) {
        (NodeKind::Regular, 0) => Ok(ZnodeType::Persistent),
        (NodeKind::Regular, owner) => Ok(ZnodeType::Ephemeral { owner }),
        (NodeKind::Container, 0) => Ok(ZnodeType::Container),
        (NodeKind::Ttl { ttl_ms }, 0) if ttl_in_range(ttl_ms) => Ok(ZnodeType::Ttl { ttl_ms }),
        (NodeKind::Ttl { .. }, 0) => Err(bad("the TTL is out of range")),
        (_, _) => Err(bad("containers and TTL nodes cannot be ephemeral")),
    }
}

/// One node as a read sees it. The data is shared with the tree, not copied.
#[derive(Clone)]
pub struct NodeView {
    /// The Stat clients see (see [`DataTree::stat`]).
    pub stat: Stat,
    /// The stored cversion (see [`DataTree::stored_cversion`]).
    pub stored_cversion: i32,
    pub acl: Arc<[Acl]>,
    pub kind: ZnodeType,
    node: Node,
}

impl NodeView {
    pub fn data(&self) -> &[u8] {
        self.node.data()
    }
}

impl std::fmt::Debug for NodeView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeView")
            .field("stat", &self.stat)
            .field("acl", &self.acl)
            .field("kind", &self.kind)
            .field("data", &String::from_utf8_lossy(self.data()))
            .finish()
    }
}

/// The name a sequential create gets (ZooKeeper Programmer's Guide, "Data Model", "Sequence Nodes -- Unique
/// Naming"): the requested path followed by the parent's cversion *before*
/// the create, `%010d`. The counter is a signed 32-bit int, so past
/// 2147483647 it wraps and the name becomes `<path>-2147483648`.
pub fn sequential_path(requested: &str, parent_cversion: i32) -> String {
    format!("{requested}{parent_cversion:010}")
}

/// Undo log of a multi: each changed path with the node it had before.
type Undo = Vec<(Box<str>, Option<Node>)>;

/// The replicated tree of znodes.
#[derive(Clone)]
pub struct DataTree {
    nodes: imbl::OrdSet<Node>,
    acls: AclTable,
    /// Session -> its ephemeral paths (ZooKeeper Programmer's Guide, "Data Model", "Ephemeral Nodes").
    ephemerals: BTreeMap<i64, BTreeSet<Box<str>>>,
    containers: BTreeSet<Box<str>>,
    ttls: BTreeSet<Box<str>>,
    /// Paths that have a `zookeeper_limits` node (ZooKeeper's `pTrie`).
    quotas: BTreeSet<Box<str>>,
    /// Sum of path length and data length over all nodes.
    data_size: i64,
    /// Set while a multi (or a session close) applies.
    undo: Option<Undo>,
}

impl Default for DataTree {
    fn default() -> Self {
        DataTree::new()
    }
}

impl std::fmt::Debug for DataTree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataTree")
            .field("nodes", &self.nodes.len())
            .field("approximate_data_size", &self.data_size)
            .field("acl_lists", &self.acls.len())
            .finish()
    }
}

/// Two trees are equal when they hold the same nodes with the same stat,
/// data and ACL lists (internal ACL ids may differ).
impl PartialEq for DataTree {
    fn eq(&self, other: &DataTree) -> bool {
        self.nodes.len() == other.nodes.len()
            && self.data_size == other.data_size
            && self.nodes.iter().zip(other.nodes.iter()).all(|(a, b)| {
                let (mut ha, mut hb) = (a.header(), b.header());
                let same_acl = self.acls.get(ha.acl) == other.acls.get(hb.acl);
                ha.acl = 0;
                hb.acl = 0;
                a.key() == b.key() && ha == hb && a.data() == b.data() && same_acl
            })
    }
}

/// The check of a path a txn carries.
fn check_path(p: &str) -> Result<(), ApplyError> {
    path::validate(p, false).map_err(|reason| ApplyError::InvalidPath {
        path: p.to_string(),
        reason,
    })
}

impl DataTree {
    /// A tree with nothing, not even the root (snapshot loading).
    fn empty() -> DataTree {
        DataTree {
            nodes: imbl::OrdSet::new(),
            acls: AclTable::default(),
            ephemerals: BTreeMap::new(),
            containers: BTreeSet::new(),
            ttls: BTreeSet::new(),
            quotas: BTreeSet::new(),
            data_size: 0,
            undo: None,
        }
    }

    /// The tree of a fresh ZooKeeper 3.8 standalone server: `/`,
    /// `/zookeeper`, `/zookeeper/quota` and `/zookeeper/config`, every stat
    /// field zero and no data. All are `world:anyone` with every permission
    /// except `/zookeeper/config`, which is read-only for `world:anyone`
    /// (ZOOKEEPER-2014) and, because ZooKeeper installs that ACL with
    /// `setACL(path, READ_ACL_UNSAFE, -1)`, has aversion -1.
    pub fn new() -> DataTree {
        let mut t = DataTree::empty();
        let open = t.acls.intern(&Acl::open_unsafe());
        let read = t.acls.intern(&Acl::read_unsafe());
        let mut root = Header::zero(open);
        root.num_children = 1;
        let mut zk = Header::zero(open);
        zk.num_children = 2;
        let mut config = Header::zero(read);
        config.aversion = -1;
        for (p, h) in [
            ("/", root),
            ("/zookeeper", zk),
            (QUOTA_ROOT, Header::zero(open)),
            ("/zookeeper/config", config),
        ] {
            t.set_node(p, Some(Node::for_path(&h, p, &[])));
        }
        t.acls.purge();
        t
    }

    // ----- reads -----------------------------------------------------------

    fn get(&self, p: &str) -> Option<&Node> {
        if !p.starts_with('/') {
            return None;
        }
        self.nodes.get(&Probe::path(p))
    }

    /// The Stat clients see, as ZooKeeper 3.8's `DataNode.copyStat` builds it
    /// from the stored fields: cversion is reported as `2 * stored -
    /// numChildren` (the stored value counts creates; "for every create
    /// there is a delete except for the children still present"), and
    /// ephemeralOwner is 0 for containers and TTL nodes.
    fn stat_of(n: &Node) -> Stat {
        let h = n.header();
        let num_children = h.num_children as i32;
        Stat {
            czxid: h.czxid,
            mzxid: h.mzxid,
            ctime: h.ctime,
            mtime: h.mtime,
            version: h.version,
            cversion: h.cversion.wrapping_mul(2).wrapping_sub(num_children),
            aversion: h.aversion,
            ephemeral_owner: h.kind.client_ephemeral_owner(),
            data_length: n.data().len() as i32,
            num_children,
            pzxid: h.pzxid,
        }
    }

    fn acl_of(&self, n: &Node) -> Arc<[Acl]> {
        // Every node's ACL id is in the table (check_invariants).
        self.acls
            .get(n.acl())
            .cloned()
            .unwrap_or_else(|| Arc::from(Vec::new()))
    }

    /// Data, ACL and stat of a node.
    pub fn node(&self, p: &str) -> Option<NodeView> {
        let n = self.get(p)?;
        Some(NodeView {
            stat: Self::stat_of(n),
            stored_cversion: n.cversion(),
            acl: self.acl_of(n),
            kind: n.kind(),
            node: n.clone(),
        })
    }

    /// getData: a copy of the data and the stat.
    pub fn get_data(&self, p: &str) -> Option<(Vec<u8>, Stat)> {
        let n = self.get(p)?;
        Some((n.data().to_vec(), Self::stat_of(n)))
    }

    /// The stat of a node as clients see it, with dataLength and numChildren
    /// (ZooKeeper Programmer's Guide, "Data Model", "ZooKeeper Stat Structure"), and ZooKeeper 3.8's two
    /// reporting quirks: cversion is `2 * stored - numChildren`, and
    /// ephemeralOwner is 0 for containers and TTL nodes.
    pub fn stat(&self, p: &str) -> Option<Stat> {
        self.get(p).map(Self::stat_of)
    }

    /// The cversion as stored: how many children were ever created under
    /// the node. This, not [`Stat::cversion`], is the counter a sequential
    /// create names its node with and increments (see [`sequential_path`]).
    pub fn stored_cversion(&self, p: &str) -> Option<i32> {
        self.get(p).map(Node::cversion)
    }

    pub fn exists(&self, p: &str) -> bool {
        self.get(p).is_some()
    }

    /// What a node is: persistent, ephemeral (with its owner), container or TTL.
    pub fn node_type(&self, p: &str) -> Option<ZnodeType> {
        self.get(p).map(Node::kind)
    }

    /// A copy of the node's ACL list.
    pub fn acl(&self, p: &str) -> Option<Vec<Acl>> {
        self.get(p).map(|n| self.acl_of(n).to_vec())
    }

    /// The node's ACL list, shared with the tree's ACL cache (no copy).
    pub fn acl_shared(&self, p: &str) -> Option<Arc<[Acl]>> {
        self.get(p).map(|n| self.acl_of(n))
    }

    fn child_nodes<'a>(&'a self, prefix: &'a [u8]) -> impl Iterator<Item = &'a Node> + 'a {
        self.nodes.range((
            Bound::Included(Probe::prefix(prefix, b"\0")),
            Bound::Excluded(Probe::prefix(prefix, b"\x01")),
        ))
    }

    fn deeper_nodes<'a>(&'a self, prefix: &'a [u8]) -> impl Iterator<Item = &'a Node> + 'a {
        self.nodes.range((
            Bound::Included(Probe::prefix(prefix, b"/")),
            Bound::Excluded(Probe::prefix(prefix, b"0")),
        ))
    }

    /// The names of a node's children, sorted.
    pub fn children(&self, p: &str) -> Option<Vec<String>> {
        self.get(p)?;
        Some(
            self.child_nodes(plain(p))
                .map(|c| String::from_utf8_lossy(key_name(c.key())).into_owned())
                .collect(),
        )
    }

    /// getChildren2: the sorted children and the stat.
    pub fn children_with_stat(&self, p: &str) -> Option<(Vec<String>, Stat)> {
        let stat = self.stat(p)?;
        Some((self.children(p)?, stat))
    }

    /// getAllChildrenNumber: how many nodes are below `p`, at any depth.
    pub fn all_children_number(&self, p: &str) -> Option<i32> {
        self.get(p)?;
        let n = if p == "/" {
            self.nodes.len() - 1
        } else {
            self.child_nodes(plain(p)).count() + self.deeper_nodes(plain(p)).count()
        };
        Some(i32::try_from(n).unwrap_or(i32::MAX))
    }

    /// The ephemeral nodes a session owns, sorted (getEphemerals).
    pub fn ephemerals(&self, session_id: i64) -> Vec<String> {
        self.ephemerals
            .get(&session_id)
            .map(|s| s.iter().map(|p| p.to_string()).collect())
            .unwrap_or_default()
    }

    /// Every session that owns at least one ephemeral, ascending.
    pub fn sessions_with_ephemerals(&self) -> Vec<i64> {
        self.ephemerals.keys().copied().collect()
    }

    /// How many ephemeral nodes exist.
    pub fn ephemeral_count(&self) -> usize {
        self.ephemerals.values().map(BTreeSet::len).sum()
    }

    /// Number of znodes, the root included. (ZooKeeper's `zk_znode_count`
    /// is one more: its map holds the root twice, as `""` and `"/"`.)
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// ZooKeeper's `approximateDataSize`: the sum over all nodes of the
    /// path length plus the data length (bytes of UTF-8; Java counts UTF-16
    /// units, the same for ASCII paths). A fresh tree has 44.
    pub fn approximate_data_size(&self) -> u64 {
        self.data_size.max(0) as u64
    }

    /// Distinct ACL lists in use.
    pub fn acl_cache_size(&self) -> usize {
        self.acls.len()
    }

    /// Containers and TTL nodes the server should delete now, sorted: ZooKeeper's
    /// `ContainerManager.getCandidates` (ZooKeeper Programmer's Guide, "Data Model", "Container Nodes", "TTL
    /// Nodes"). A container qualifies when it has no children and its
    /// cversion is above 0 (it had children once, so a new one is not
    /// reaped before it is used); a TTL node when it has no children and
    /// `now_ms - mtime > ttl`. The pipeline re-checks before deleting.
    pub fn reapable(&self, now_ms: i64) -> Vec<String> {
        self.reapable_with(now_ms, 0)
    }

    /// [`reapable`](Self::reapable) with ZooKeeper's
    /// `znode.container.maxNeverUsedIntervalMs` (0, the default, turns it
    /// off): a container that never had a child also qualifies once
    /// `now_ms - mtime` exceeds it.
    pub fn reapable_with(&self, now_ms: i64, max_never_used_ms: i64) -> Vec<String> {
        let mut out = Vec::new();
        for p in &self.containers {
            if let Some(n) = self.get(p) {
                if n.num_children() != 0 {
                    continue;
                }
                let never_used_expired =
                    max_never_used_ms != 0 && now_ms.saturating_sub(n.mtime()) > max_never_used_ms;
                if n.cversion() > 0 || never_used_expired {
                    out.push(p.to_string());
                }
            }
        }
        for p in &self.ttls {
            if let Some(n) = self.get(p) {
                if let ZnodeType::Ttl { ttl_ms } = n.kind() {
                    if n.num_children() == 0 && now_ms.saturating_sub(n.mtime()) > ttl_ms {
                        out.push(p.to_string());
                    }
                }
            }
        }
        out.sort();
        out
    }

    // ----- quotas ----------------------------------------------------------

    /// `getMaxPrefixWithQuota`: the deepest path at or above `p` that has a
    /// quota (never `/`).
    pub fn quota_root_of(&self, p: &str) -> Option<&str> {
        if self.quotas.is_empty() || !p.starts_with('/') {
            return None;
        }
        let mut cur = p;
        while cur.len() > 1 {
            if let Some(q) = self.quotas.get(cur) {
                return Some(&**q);
            }
            cur = path::parent(cur);
        }
        None
    }

    /// ZooKeeper's `checkQuota` for a create (`count_delta` 1) or a setData
    /// (`count_delta` 0) of `p`, changing its subtree's data by
    /// `bytes_delta`: `QuotaExceeded` when a *hard* limit
    /// (`countHardLimit`, `byteHardLimit`) would be passed. Soft limits
    /// (`count`, `bytes`) only warrant a log line in ZooKeeper and pass here.
    pub fn check_quota(
        &self,
        p: &str,
        bytes_delta: i64,
        count_delta: i64,
    ) -> Result<(), ErrorCode> {
        let Some(root) = self.quota_root_of(p) else {
            return Ok(());
        };
        let Some(limits) = self.get(&limit_path(root)) else {
            return Ok(());
        };
        let limits = StatsTrack::parse(limits.data());
        let check_count =
            count_delta != 0 && (limits.count() > -1 || limits.count_hard_limit() > -1);
        let check_bytes =
            bytes_delta != 0 && (limits.bytes() > -1 || limits.byte_hard_limit() > -1);
        if !check_count && !check_bytes {
            return Ok(());
        }
        let Some(stats) = self.get(&stat_path(root)) else {
            return Ok(());
        };
        let current = StatsTrack::parse(stats.data());
        if check_count
            && limits.count_hard_limit() > -1
            && current.count().saturating_add(count_delta) > limits.count_hard_limit()
        {
            return Err(ErrorCode::QuotaExceeded);
        }
        if check_bytes
            && limits.byte_hard_limit() > -1
            && current.bytes().saturating_add(bytes_delta) > limits.byte_hard_limit()
        {
            return Err(ErrorCode::QuotaExceeded);
        }
        Ok(())
    }

    /// `updateQuotaStat`: adds to the counters of the quota on `root`.
    fn update_quota_stat(&mut self, root: &str, bytes_diff: i64, count_diff: i64) {
        let sp = stat_path(root);
        let Some(n) = self.get(&sp).cloned() else {
            return;
        };
        let mut st = StatsTrack::parse(n.data());
        st.set_count(st.count().saturating_add(count_diff));
        st.set_bytes(st.bytes().saturating_add(bytes_diff));
        let data = st.to_string();
        self.set_node(&sp, Some(n.with_data(&n.header(), data.as_bytes())));
    }

    /// `updateQuotaForPath`: recounts the subtree of `root` (the root
    /// included) into its stats node, when the stats node is created.
    fn update_quota_for_path(&mut self, root: &str) {
        let (mut count, mut bytes) = (0i64, 0i64);
        if let Some(n) = self.get(root) {
            count = 1;
            bytes = n.data().len() as i64;
            for d in self
                .child_nodes(plain(root))
                .chain(self.deeper_nodes(plain(root)))
            {
                count += 1;
                bytes += d.data().len() as i64;
            }
        }
        let sp = stat_path(root);
        let Some(n) = self.get(&sp).cloned() else {
            return;
        };
        let mut st = StatsTrack::default();
        st.set_count(count);
        st.set_bytes(bytes);
        let data = st.to_string();
        self.set_node(&sp, Some(n.with_data(&n.header(), data.as_bytes())));
    }

    // ----- the one place nodes change ----------------------------------------

    /// Replaces (or removes) the node at `p`, keeping every derived index in
    /// step, and records the old node when a multi is applying.
    fn set_node(&mut self, p: &str, new: Option<Node>) {
        let old = match &new {
            Some(n) => self.nodes.insert(n.clone()),
            None => self.nodes.remove(&Probe::path(p)),
        };
        self.reindex(p, old.as_ref(), new.as_ref());
        if let Some(u) = &mut self.undo {
            u.push((p.into(), old));
        }
    }

    /// `set_node` for a path that must not exist yet: one traversal of the
    /// set instead of a lookup and an insert. Returns false (and changes
    /// nothing) if the path exists.
    fn insert_new(&mut self, p: &str, n: Node) -> bool {
        if let Some(old) = self.nodes.insert(n.clone()) {
            self.nodes.insert(old);
            return false;
        }
        self.reindex(p, None, Some(&n));
        if let Some(u) = &mut self.undo {
            u.push((p.into(), None));
        }
        true
    }

    fn reindex(&mut self, p: &str, old: Option<&Node>, new: Option<&Node>) {
        let size = |n: &Node| (p.len() + n.data().len()) as i64;
        self.data_size += new.map_or(0, size) - old.map_or(0, size);
        let (old_acl, new_acl) = (old.map(Node::acl), new.map(Node::acl));
        if old_acl != new_acl {
            if let Some(a) = new_acl {
                self.acls.add_ref(a);
            }
            if let Some(a) = old_acl {
                self.acls.release(a);
            }
        }
        let (old_kind, new_kind) = (old.map(Node::kind), new.map(Node::kind));
        if old_kind != new_kind {
            match old_kind {
                Some(ZnodeType::Ephemeral { owner }) => {
                    if let Some(s) = self.ephemerals.get_mut(&owner) {
                        s.remove(p);
                        if s.is_empty() {
                            self.ephemerals.remove(&owner);
                        }
                    }
                }
                Some(ZnodeType::Container) => {
                    self.containers.remove(p);
                }
                Some(ZnodeType::Ttl { .. }) => {
                    self.ttls.remove(p);
                }
                Some(ZnodeType::Persistent) | None => {}
            }
            match new_kind {
                Some(ZnodeType::Ephemeral { owner }) => {
                    self.ephemerals.entry(owner).or_default().insert(p.into());
                }
                Some(ZnodeType::Container) => {
                    self.containers.insert(p.into());
                }
                Some(ZnodeType::Ttl { .. }) => {
                    self.ttls.insert(p.into());
                }
                Some(ZnodeType::Persistent) | None => {}
            }
        }
        if old.is_some() != new.is_some() && p.starts_with(QUOTA_ROOT) {
            if let Some(target) = quota::quota_target(path::parent(p), path::name(p), LIMIT_NODE) {
                if new.is_some() {
                    self.quotas.insert(target.into());
                } else {
                    self.quotas.remove(target);
                }
            }
        }
    }

    // ----- apply -------------------------------------------------------------

    /// Applies a txn and returns the watch events it triggers, in order
    /// (create: NodeCreated on the path, then NodeChildrenChanged on the
    /// parent; delete: NodeDeleted, then NodeChildrenChanged on the parent;
    /// setData: NodeDataChanged; setACL, check and session txns: none; a
    /// multi: its ops' events in op order; closeSession: the deletes of the
    /// session's ephemerals, in path order).
    ///
    /// A txn that does not fit leaves the tree unchanged; a multi applies all
    /// of its ops or none.
    pub fn apply(&mut self, hdr: &TxnHeader, txn: &Txn) -> Result<Vec<Trigger>, ApplyError> {
        let mut triggers = Vec::new();
        let result = match txn {
            Txn::Multi(ops) => self.atomically(|t| t.apply_all(hdr, ops, &mut triggers)),
            Txn::Recipe(r) => self.atomically(|t| t.apply_all(hdr, &r.ops, &mut triggers)),
            Txn::CloseSession => self.atomically(|t| t.close_session(hdr, &mut triggers)),
            // The tree is not touched: the pipeline keeps the deployed
            // modules (see `crate::recipe::DeployedModules`).
            Txn::CreateSession { .. }
            | Txn::Error { .. }
            | Txn::Noop
            | Txn::Deploy(_)
            | Txn::Undeploy { .. } => Ok(()),
            op => self.apply_op(hdr, op, &mut triggers),
        };
        self.acls.purge();
        result.map(|()| triggers)
    }

    /// The ops of a multi (or a recipe step), in order; the caller rolls
    /// back on error.
    fn apply_all(
        &mut self,
        hdr: &TxnHeader,
        ops: &[Txn],
        triggers: &mut Vec<Trigger>,
    ) -> Result<(), ApplyError> {
        for (index, op) in ops.iter().enumerate() {
            self.apply_op(hdr, op, triggers)
                .map_err(|e| ApplyError::Multi {
                    index,
                    error: Box::new(e),
                })?;
        }
        Ok(())
    }

    /// Runs `f` with an undo log; if it fails, rolls every change back.
    fn atomically(
        &mut self,
        f: impl FnOnce(&mut DataTree) -> Result<(), ApplyError>,
    ) -> Result<(), ApplyError> {
        self.undo = Some(Vec::new());
        let result = f(self);
        let undo = self.undo.take().unwrap_or_default();
        if result.is_err() {
            for (p, old) in undo.into_iter().rev() {
                self.set_node(&p, old);
            }
        }
        result
    }

    /// One op of a multi, or a single txn. Checks everything before
    /// changing anything, so a failing op changes nothing itself.
    fn apply_op(
        &mut self,
        hdr: &TxnHeader,
        op: &Txn,
        triggers: &mut Vec<Trigger>,
    ) -> Result<(), ApplyError> {
        check_op(op)?;
        match op {
            Txn::Create(c) => self.create(hdr, c, triggers),
            Txn::Delete { path } => self.delete(hdr, path, triggers),
            Txn::SetData {
                path,
                data,
                version,
            } => self.set_data(hdr, path, data, *version, triggers),
            Txn::SetAcl {
                path,
                acl,
                aversion,
            } => self.set_acl(path, acl, *aversion),
            Txn::Check { path } => {
                self.get(path)
                    .ok_or_else(|| ApplyError::NoNode(path.clone()))?;
                Ok(())
            }
            Txn::CreateSession { .. }
            | Txn::CloseSession
            | Txn::Multi(_)
            | Txn::Error { .. }
            | Txn::Noop
            | Txn::Recipe(_)
            | Txn::Deploy(_)
            | Txn::Undeploy { .. } => unreachable!("check_op refuses {op:?} as an op"),
        }
    }

    fn create(
        &mut self,
        hdr: &TxnHeader,
        c: &CreateTxn,
        triggers: &mut Vec<Trigger>,
    ) -> Result<(), ApplyError> {
        let p = c.path.as_str();
        let kind = created_kind(c)?;
        let parent_path = path::parent(p);
        let parent = self
            .get(parent_path)
            .cloned()
            .ok_or_else(|| ApplyError::NoParent(c.path.clone()))?;
        if matches!(parent.kind(), ZnodeType::Ephemeral { .. }) {
            return Err(ApplyError::EphemeralParent(c.path.clone()));
        }

        // (An ACL list interned for a create that then fails is purged.)
        let acl = self.acls.intern(&c.acl);
        let h = Header {
            czxid: hdr.zxid,
            mzxid: hdr.zxid,
            pzxid: hdr.zxid,
            ctime: hdr.time_ms,
            mtime: hdr.time_ms,
            version: 0,
            cversion: 0,
            aversion: 0,
            acl,
            num_children: 0,
            kind,
        };
        if !self.insert_new(p, Node::for_path(&h, p, &c.data)) {
            return Err(ApplyError::NodeExists(c.path.clone()));
        }
        let mut ph = parent.header();
        ph.cversion = c.parent_cversion;
        ph.pzxid = hdr.zxid;
        ph.num_children = ph.num_children.saturating_add(1);
        self.set_node(parent_path, Some(parent.with_header(&ph)));

        if let Some(root) = quota::quota_target(parent_path, path::name(p), STAT_NODE) {
            self.update_quota_for_path(root);
        }
        if let Some(root) = self.quota_root_of(p).map(str::to_string) {
            self.update_quota_stat(&root, c.data.len() as i64, 1);
        }
        let parent_acl = self.acl_of(&parent);
        triggers.push(Trigger::new(
            p,
            EventType::NodeCreated,
            self.acl_shared(p)
                .unwrap_or_else(|| Arc::from(c.acl.clone())),
        ));
        triggers.push(Trigger::new(
            parent_path,
            EventType::NodeChildrenChanged,
            parent_acl,
        ));
        Ok(())
    }

    fn delete(
        &mut self,
        hdr: &TxnHeader,
        p: &str,
        triggers: &mut Vec<Trigger>,
    ) -> Result<(), ApplyError> {
        check_path(p)?;
        if p == "/" {
            return Err(ApplyError::DeleteRoot);
        }
        let node = self
            .get(p)
            .ok_or_else(|| ApplyError::NoNode(p.to_string()))?;
        if node.num_children() > 0 {
            return Err(ApplyError::NotEmpty(p.to_string()));
        }
        let data_len = node.data().len() as i64;
        let node_acl = self.acl_of(node);
        let parent_path = path::parent(p);
        let parent = self
            .get(parent_path)
            .cloned()
            .ok_or_else(|| ApplyError::NoParent(p.to_string()))?;

        self.set_node(p, None);
        // ZooKeeper 3.8 moves the parent's pzxid on a delete but not its
        // cversion: only creates count for the sequence counter.
        let mut ph = parent.header();
        ph.pzxid = hdr.zxid;
        ph.num_children = ph.num_children.saturating_sub(1);
        self.set_node(parent_path, Some(parent.with_header(&ph)));

        if let Some(root) = self.quota_root_of(p).map(str::to_string) {
            self.update_quota_stat(&root, -data_len, -1);
        }
        let parent_acl = self.acl_of(&parent);
        triggers.push(Trigger::new(p, EventType::NodeDeleted, node_acl));
        triggers.push(Trigger::new(
            parent_path,
            EventType::NodeChildrenChanged,
            parent_acl,
        ));
        Ok(())
    }

    fn set_data(
        &mut self,
        hdr: &TxnHeader,
        p: &str,
        data: &[u8],
        version: i32,
        triggers: &mut Vec<Trigger>,
    ) -> Result<(), ApplyError> {
        let node = self
            .get(p)
            .cloned()
            .ok_or_else(|| ApplyError::NoNode(p.to_string()))?;
        let mut h = node.header();
        h.mzxid = hdr.zxid;
        h.mtime = hdr.time_ms;
        h.version = version;
        let diff = data.len() as i64 - node.data().len() as i64;
        self.set_node(p, Some(node.with_data(&h, data)));
        if let Some(root) = self.quota_root_of(p).map(str::to_string) {
            self.update_quota_stat(&root, diff, 0);
        }
        let acl = self.acl_of(&node);
        triggers.push(Trigger::new(p, EventType::NodeDataChanged, acl));
        Ok(())
    }

    fn set_acl(&mut self, p: &str, acl: &[Acl], aversion: i32) -> Result<(), ApplyError> {
        let node = self
            .get(p)
            .cloned()
            .ok_or_else(|| ApplyError::NoNode(p.to_string()))?;
        let mut h = node.header();
        h.acl = self.acls.intern(acl);
        h.aversion = aversion;
        self.set_node(p, Some(node.with_header(&h)));
        Ok(())
    }

    /// Deletes every ephemeral of the session, in path order.
    fn close_session(
        &mut self,
        hdr: &TxnHeader,
        triggers: &mut Vec<Trigger>,
    ) -> Result<(), ApplyError> {
        let paths: Vec<Box<str>> = self
            .ephemerals
            .get(&hdr.session_id)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default();
        for p in paths {
            self.delete(hdr, &p, triggers)?;
        }
        Ok(())
    }

    // ----- snapshots -----------------------------------------------------------

    /// The applied state as of now, in O(1): it shares every node with the
    /// tree, which copies on write from then on.
    pub fn snapshot(&self) -> TreeSnapshot {
        TreeSnapshot::new(self.nodes.clone(), self.acls.lists())
    }

    /// Reads a tree written by [`TreeSnapshot::write_to`]. Never panics:
    /// lengths are bounded, structure is checked, and the checksum must match.
    pub fn read_from(r: &mut dyn std::io::Read) -> Result<DataTree, SnapshotError> {
        snapshot::read(r)
    }

    // ----- invariants -------------------------------------------------------

    /// Checks every invariant the tree keeps; the first violation is
    /// described in the error. O(n log n): for tests and diagnostics.
    pub fn check_invariants(&self) -> Result<(), String> {
        if self.undo.is_some() {
            return Err("an undo log is left over from an apply".into());
        }
        if self.get("/").is_none() {
            return Err("the root is missing".into());
        }
        let mut prev: Option<&Node> = None;
        let mut acl_refs: BTreeMap<u32, u64> = BTreeMap::new();
        let mut data_size = 0i64;
        let mut ephemerals: BTreeMap<i64, BTreeSet<Box<str>>> = BTreeMap::new();
        let mut containers = BTreeSet::new();
        let mut ttls = BTreeSet::new();
        let mut quotas = BTreeSet::new();
        for n in self.nodes.iter() {
            if let Some(prev) = prev {
                if prev.key() >= n.key() {
                    return Err(format!("keys out of order: {prev:?} then {n:?}"));
                }
            }
            prev = Some(n);
            let p = decode_key(n.key());
            check_path(&p).map_err(|e| e.to_string())?;
            if node::encode_key(&p) != n.key() {
                return Err(format!("{p}: key does not encode its path"));
            }
            if p != "/" {
                let parent = self
                    .get(path::parent(&p))
                    .ok_or_else(|| format!("{p}: the parent is missing"))?;
                if matches!(parent.kind(), ZnodeType::Ephemeral { .. }) {
                    return Err(format!("{p}: the parent is ephemeral"));
                }
            }
            let kids = self.child_nodes(plain(&p)).count();
            if kids != n.num_children() as usize {
                return Err(format!(
                    "{p}: numChildren is {} but it has {kids} children",
                    n.num_children()
                ));
            }
            if self.acls.get(n.acl()).is_none() {
                return Err(format!("{p}: ACL id {} is not in the table", n.acl()));
            }
            *acl_refs.entry(n.acl()).or_insert(0) += 1;
            data_size += (p.len() + n.data().len()) as i64;
            match n.kind() {
                ZnodeType::Ephemeral { owner } => {
                    ephemerals
                        .entry(owner)
                        .or_default()
                        .insert(p.as_str().into());
                }
                ZnodeType::Container => {
                    containers.insert(Box::<str>::from(p.as_str()));
                }
                ZnodeType::Ttl { .. } => {
                    ttls.insert(Box::<str>::from(p.as_str()));
                }
                ZnodeType::Persistent => {}
            }
            if p != "/" {
                if let Some(t) = quota::quota_target(path::parent(&p), path::name(&p), LIMIT_NODE) {
                    quotas.insert(Box::<str>::from(t));
                }
            }
        }
        if data_size != self.data_size {
            return Err(format!(
                "approximate data size is {} but the nodes add up to {data_size}",
                self.data_size
            ));
        }
        if ephemerals != self.ephemerals {
            return Err(format!(
                "ephemeral index {:?} differs from the nodes' {ephemerals:?}",
                self.ephemerals
            ));
        }
        if containers != self.containers {
            return Err(format!(
                "container index {:?} differs from the nodes' {containers:?}",
                self.containers
            ));
        }
        if ttls != self.ttls {
            return Err(format!(
                "TTL index {:?} differs from the nodes' {ttls:?}",
                self.ttls
            ));
        }
        if quotas != self.quotas {
            return Err(format!(
                "quota index {:?} differs from the limit nodes' {quotas:?}",
                self.quotas
            ));
        }
        self.acls.check(&acl_refs)
    }

    /// Bytes of heap the nodes themselves hold (allocator slack and the
    /// set's own structure not included).
    pub fn node_heap_bytes(&self) -> usize {
        self.nodes.iter().map(Node::heap_size).sum()
    }
}
