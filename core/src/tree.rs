//! The data tree (ZooKeeper Programmer's Guide, "Data Model"): znodes with data, ACLs and stat,
//! the ephemeral index, containers and TTL nodes, quotas, and snapshots.
//!
//! The write pipeline validates requests against the tree plus its
//! outstanding changes and turns them into [`Txn`](crate::txn::Txn)s that carry absolute
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
//! 100-byte znode against about 250 for this layout, and getChildren would
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
//!
//! Layout: this file holds the tree, its reads, quotas and `set_node`;
//! `check` the rules a txn meets whatever the tree holds ([`check_txn`],
//! [`ApplyError`]); `apply` applying txns; `invariants` the whole-state
//! check; `node` the node encoding and keys; `acl_table` the shared ACL
//! lists; `quota` ZooKeeper's quota nodes; `snapshot` the snapshot codec.

mod acl_table;
mod apply;
mod build;
mod check;
mod invariants;
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

use acl_table::AclTable;
use node::{key_name, plain, Header, Node, Probe};

pub use build::NodeSpec;
pub use check::{check_txn, ApplyError};
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
    /// The data's bytes (none for null data).
    pub fn data(&self) -> &[u8] {
        self.node.data()
    }

    /// The data, `None` when it is null.
    pub fn nullable_data(&self) -> Option<&[u8]> {
        self.node.nullable_data()
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

/// What getData answers: the data (`None` when it is null) and the stat.
pub type DataAndStat = (Option<Vec<u8>>, Stat);

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
    /// ZooKeeper's tree digest: the wrapping sum of every node's
    /// (`node_digest`), kept as nodes change.
    digest: u64,
    /// Set while a multi (or a session close) applies.
    undo: Option<Undo>,
}

/// One node's part of the tree digest: ZooKeeper's, over its stored stat
/// (the stored cversion and ephemeralOwner).
fn node_digest(p: &str, n: &Node) -> u64 {
    let h = n.header();
    let stat = wazoo_storage::zookeeper::StatPersisted {
        czxid: h.czxid,
        mzxid: h.mzxid,
        ctime: h.ctime,
        mtime: h.mtime,
        version: h.version,
        cversion: h.cversion,
        aversion: h.aversion,
        ephemeral_owner: h.kind.persisted_ephemeral_owner(),
        pzxid: h.pzxid,
    };
    wazoo_storage::zookeeper::node_digest_of(p, n.data(), &stat)
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
                a.key() == b.key() && ha == hb && a.nullable_data() == b.nullable_data() && same_acl
            })
    }
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
            digest: 0,
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
            t.set_node(p, Some(Node::for_path(&h, p, Some(&[]))));
        }
        t.acls.purge();
        t
    }

    /// A copy for reads only, in O(1) (but for the set of quota roots,
    /// usually empty): the nodes and ACL lists are persistent maps shared
    /// with this tree. The indexes only writes use (ephemerals, containers,
    /// TTL nodes, ACL reference counts) are left out, so the copy must
    /// never be written to: a recipe step that runs off the member's
    /// thread reads it (docs/ARCHITECTURE.md, "Recipes").
    pub fn read_only_copy(&self) -> DataTree {
        DataTree {
            nodes: self.nodes.clone(),
            acls: self.acls.read_only_copy(),
            quotas: self.quotas.clone(),
            data_size: self.data_size,
            digest: self.digest,
            ..DataTree::empty()
        }
    }

    /// Whether the two trees share their nodes (one is a copy of the
    /// other, [`DataTree::read_only_copy`], and neither changed since).
    pub fn same_nodes(&self, other: &DataTree) -> bool {
        self.nodes.ptr_eq(&other.nodes)
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

    /// getData: a copy of the data (`None` when it is null, as ZooKeeper
    /// answers it) and the stat.
    pub fn get_data(&self, p: &str) -> Option<DataAndStat> {
        let n = self.get(p)?;
        Some((n.nullable_data().map(<[u8]>::to_vec), Self::stat_of(n)))
    }

    /// getData behind a check of the node's ACL (`check`'s error is given
    /// back as is), with one lookup for both: `None` if there is no node.
    pub fn get_data_checked<E>(
        &self,
        p: &str,
        check: impl FnOnce(&[Acl]) -> Result<(), E>,
    ) -> Option<Result<DataAndStat, E>> {
        let n = self.get(p)?;
        Some(
            check(&self.acl_of(n))
                .map(|()| (n.nullable_data().map(<[u8]>::to_vec), Self::stat_of(n))),
        )
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
    /// ZooKeeper's digest of the tree (`DataTree.getTreeDigest`, digest
    /// version 2): what its `TxnDigest` and `hash` carry, to compare a
    /// tree with a ZooKeeper member's.
    pub fn digest(&self) -> i64 {
        self.digest as i64
    }

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
        self.set_node(&sp, Some(n.with_data(&n.header(), Some(data.as_bytes()))));
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
        self.set_node(&sp, Some(n.with_data(&n.header(), Some(data.as_bytes()))));
    }

    /// Sets `/zookeeper/config` to the ensemble's configuration text, as
    /// ZooKeeper's `ZKDatabase.initConfigInZKDatabase` and its reconfig
    /// txn do (`DataTree.setData(CONFIG_NODE, data, -1, version, time)`):
    /// mzxid is the configuration's version and the data version stays -1.
    /// Every tree has the node ([`DataTree::new`]; clients cannot delete
    /// it); one without it changes nothing.
    pub fn set_config_node(&mut self, data: &[u8], version: i64, mtime: i64) {
        const CONFIG: &str = "/zookeeper/config";
        let Some(mut h) = self.get(CONFIG).map(Node::header) else {
            return;
        };
        h.mzxid = version;
        h.mtime = mtime;
        h.version = -1;
        self.set_node(CONFIG, Some(Node::for_path(&h, CONFIG, Some(data))));
    }

    /// Applies a reconfig txn: the configuration text into
    /// `/zookeeper/config`, version the txn's zxid, and the node's data
    /// watches fire (ZooKeeper's reconfig txn is a setData of the node).
    fn reconfig(&mut self, hdr: &crate::txn::TxnHeader, data: &[u8], triggers: &mut Vec<Trigger>) {
        const CONFIG: &str = "/zookeeper/config";
        self.set_config_node(data, hdr.zxid, hdr.time_ms);
        if let Some(n) = self.get(CONFIG).cloned() {
            let acl = self.acl_of(&n);
            triggers.push(Trigger::new(CONFIG, EventType::NodeDataChanged, acl));
        }
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
        self.digest = self
            .digest
            .wrapping_add(new.map_or(0, |n| node_digest(p, n)))
            .wrapping_sub(old.map_or(0, |n| node_digest(p, n)));
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

    /// Bytes of heap the nodes themselves hold (allocator slack and the
    /// set's own structure not included).
    pub fn node_heap_bytes(&self) -> usize {
        self.nodes.iter().map(Node::heap_size).sum()
    }
}
