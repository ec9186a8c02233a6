//! ZooKeeper's DataTree as far as replaying its own snapshot and log needs:
//! the nodes with their stored stat, sessions, the ephemeral index, quota
//! bookkeeping and the tree digest, changed exactly as ZooKeeper 3.9's
//! `DataTree.processTxn` (with `FileTxnSnapLog.processTransaction` for the
//! session table) changes them.
//!
//! ZooKeeper's snapshots are fuzzy: a snapshot named after zxid S may hold
//! some effects of txns after S, and replay must tolerate that. So, as in
//! ZooKeeper, applying a txn is lenient: a create of a node that exists
//! fails (but a `create` still moves the parent's cversion and pzxid
//! forward, and replaces the existing node's ACL), a delete of a missing
//! node fails after moving the parent's pzxid, and a parent's cversion and
//! pzxid only ever move forward. The digest (ZooKeeper 3.6+'s `AdHash` of
//! per-node CRC-32s, `DigestCalculator`) is how replay is checked against
//! ZooKeeper's own: every log entry carries the digest of the tree after
//! it, and a snapshot the digest as of a zxid at or after its own.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use super::snap::ZkSnapshot;
use super::txn::{op, Create, CreateKind, TxnHeader, ZkTxn};
use super::{StatPersisted, ZkAcl};

/// `EphemeralType.CONTAINER_EPHEMERAL_OWNER`.
pub const CONTAINER_OWNER: i64 = i64::MIN;
/// The top byte of a TTL node's stored ephemeralOwner.
const EXTENDED_MASK: u64 = 0xFF00_0000_0000_0000;

/// Paths under this prefix are left out of the digest (`DigestCalculator`).
const DIGEST_EXCLUDED: &str = "/zookeeper/";
const QUOTA_ROOT: &str = "/zookeeper/quota";
const LIMIT_NODE: &str = "zookeeper_limits";
const STAT_NODE: &str = "zookeeper_stats";

/// What kind of node an ephemeralOwner encodes (`EphemeralType.get`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnerKind {
    Persistent,
    Ephemeral(i64),
    Container,
    Ttl(i64),
    /// An extended type this reader does not know.
    Unknown,
}

pub fn owner_kind(owner: i64) -> OwnerKind {
    if owner == 0 {
        OwnerKind::Persistent
    } else if owner == CONTAINER_OWNER {
        OwnerKind::Container
    } else if owner as u64 & EXTENDED_MASK == EXTENDED_MASK {
        // EXTENDED_BIT_TTL is 0 in bits 40..56; the TTL is the low 40 bits.
        if (owner >> 40) & 0xFFFF == 0 {
            OwnerKind::Ttl(owner & 0xFF_FFFF_FFFF)
        } else {
            OwnerKind::Unknown
        }
    } else {
        OwnerKind::Ephemeral(owner)
    }
}

/// One znode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZkNode {
    /// `None`: null data, as ZooKeeper's `DataNode.data` may be.
    pub data: Option<Vec<u8>>,
    pub acl: Arc<[ZkAcl]>,
    pub stat: StatPersisted,
    pub children: BTreeSet<String>,
}

/// Why a txn did not apply (ZooKeeper records it and goes on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnFailure {
    NoNode,
    NodeExists,
}

/// ZooKeeper's tree, keyed by path; the root is `/`.
#[derive(Debug, Clone)]
pub struct ZkTree {
    pub nodes: HashMap<String, ZkNode>,
    /// Session id -> timeout in ms.
    pub sessions: BTreeMap<i64, i32>,
    ephemerals: BTreeMap<i64, BTreeSet<String>>,
    /// Paths with a quota (ZooKeeper's `pTrie`).
    quotas: BTreeSet<String>,
    digest: u64,
    /// The last zxid applied.
    pub zxid: i64,
}

fn open_acl() -> Arc<[ZkAcl]> {
    Arc::from(vec![ZkAcl {
        perms: 31,
        scheme: "world".into(),
        id: "anyone".into(),
    }])
}

/// The length of node data, 0 for null (as ZooKeeper counts it).
fn data_len(data: &Option<Vec<u8>>) -> i64 {
    data.as_ref().map_or(0, Vec::len) as i64
}

/// The parent's path and the child's name; the root's children have `/`.
fn split(path: &str) -> Option<(&str, &str)> {
    let slash = path.rfind('/')?;
    let parent = if slash == 0 { "/" } else { &path[..slash] };
    Some((parent, &path[slash + 1..]))
}

fn node_digest(path: &str, n: &ZkNode) -> u64 {
    node_digest_of(path, n.data.as_deref().unwrap_or_default(), &n.stat)
}

/// `DigestCalculator.calculateDigest` (digest version 2): CRC-32 of the
/// path (the root's is empty), the data (null data as empty), and nine
/// fields of the stored stat; 0 under `/zookeeper/`. A tree's digest is
/// the wrapping sum of its nodes'.
pub fn node_digest_of(path: &str, data: &[u8], s: &StatPersisted) -> u64 {
    if path.starts_with(DIGEST_EXCLUDED) {
        return 0;
    }
    let mut h = crc32fast::Hasher::new();
    if path != "/" {
        h.update(path.as_bytes());
    }
    h.update(data);
    for v in [s.czxid, s.mzxid, s.pzxid, s.ctime, s.mtime] {
        h.update(&v.to_be_bytes());
    }
    for v in [s.version, s.cversion, s.aversion] {
        h.update(&v.to_be_bytes());
    }
    h.update(&s.ephemeral_owner.to_be_bytes());
    u64::from(h.finalize())
}

/// ZooKeeper's `StatsTrack` text, `count=N,bytes=M[,key=value...]`.
#[derive(Debug, Default)]
struct StatsTrack(Vec<(String, i64)>);

impl StatsTrack {
    fn parse(data: &[u8]) -> StatsTrack {
        let text = String::from_utf8_lossy(data);
        let mut kv = Vec::new();
        for pair in text.split(',').filter(|p| !p.is_empty()) {
            if let Some((k, v)) = pair.split_once('=') {
                if let Ok(v) = v.trim().parse::<i64>() {
                    kv.push((k.to_string(), v));
                }
            }
        }
        StatsTrack(kv)
    }

    /// Missing keys read as -1, as ZooKeeper's `getValue`.
    fn get(&self, k: &str) -> i64 {
        self.0
            .iter()
            .find(|(key, _)| key == k)
            .map_or(-1, |(_, v)| *v)
    }

    fn set(&mut self, k: &str, v: i64) {
        match self.0.iter_mut().find(|(key, _)| key == k) {
            Some(e) => e.1 = v,
            None => self.0.push((k.to_string(), v)),
        }
    }

    /// count and bytes first, then the other keys sorted, as ZooKeeper
    /// 3.7+'s `toString`.
    fn render(&self) -> Vec<u8> {
        let mut out = format!("count={},bytes={}", self.get("count"), self.get("bytes"));
        let mut rest: Vec<&(String, i64)> = self
            .0
            .iter()
            .filter(|(k, _)| k != "count" && k != "bytes")
            .collect();
        rest.sort();
        for (k, v) in rest {
            out.push_str(&format!(",{k}={v}"));
        }
        out.into_bytes()
    }
}

impl ZkTree {
    /// The tree a snapshot holds, as `DataTree.deserialize` builds it (quota
    /// stats recomputed by `setupQuota`), at the snapshot's zxid. Fails if a
    /// node names an ACL the snapshot does not define.
    pub fn from_snapshot(snap: &ZkSnapshot, zxid: i64) -> Result<ZkTree, String> {
        let mut lists: BTreeMap<i64, Arc<[ZkAcl]>> = BTreeMap::new();
        for (id, l) in &snap.acls {
            lists.insert(*id, Arc::from(l.clone()));
        }
        let open = open_acl();
        let mut t = ZkTree {
            nodes: HashMap::with_capacity(snap.nodes.len()),
            sessions: snap.sessions.iter().copied().collect(),
            ephemerals: BTreeMap::new(),
            quotas: BTreeSet::new(),
            digest: 0,
            zxid,
        };
        for n in &snap.nodes {
            let acl = if n.acl == -1 {
                open.clone()
            } else {
                lists
                    .get(&n.acl)
                    .cloned()
                    .ok_or_else(|| format!("node {:?} uses undefined ACL {}", n.path, n.acl))?
            };
            let path = if n.path.is_empty() {
                "/".to_string()
            } else {
                n.path.clone()
            };
            if let Some((parent, name)) = split(&path) {
                if path != "/" {
                    if let Some(p) = t.nodes.get_mut(parent) {
                        p.children.insert(name.to_string());
                    }
                }
            }
            if let OwnerKind::Ephemeral(owner) = owner_kind(n.stat.ephemeral_owner) {
                t.ephemerals.entry(owner).or_default().insert(path.clone());
            }
            let node = ZkNode {
                data: n.data.clone(),
                acl,
                stat: n.stat,
                children: BTreeSet::new(),
            };
            t.digest = t.digest.wrapping_add(node_digest(&path, &node));
            t.nodes.insert(path, node);
        }
        t.setup_quota();
        Ok(t)
    }

    /// The tree digest (`NodeHashMapImpl.getDigest`).
    pub fn digest(&self) -> i64 {
        self.digest as i64
    }

    /// Paths of the ephemerals of sessions that are not in the session
    /// table: ZooKeeper deletes them when it loads its database
    /// (`ZooKeeperServer.loadData`, "Clean up dead sessions").
    pub fn kill_dead_sessions(&mut self) -> Vec<i64> {
        let dead: Vec<i64> = self
            .ephemerals
            .keys()
            .filter(|s| !self.sessions.contains_key(s))
            .copied()
            .collect();
        for &s in &dead {
            let zxid = self.zxid;
            self.kill_session(s, zxid, None);
        }
        dead
    }

    // ----- the digest around changes (NodeHashMapImpl.preChange/postChange)

    fn modify(&mut self, path: &str, f: impl FnOnce(&mut ZkNode)) -> bool {
        let Some(n) = self.nodes.get_mut(path) else {
            return false;
        };
        let before = node_digest(path, n);
        f(n);
        let after = node_digest(path, n);
        self.digest = self.digest.wrapping_sub(before).wrapping_add(after);
        true
    }

    fn put(&mut self, path: &str, n: ZkNode) {
        self.digest = self.digest.wrapping_add(node_digest(path, &n));
        if let Some(old) = self.nodes.insert(path.to_string(), n) {
            self.digest = self.digest.wrapping_sub(node_digest(path, &old));
        }
    }

    fn remove(&mut self, path: &str) -> Option<ZkNode> {
        let old = self.nodes.remove(path)?;
        self.digest = self.digest.wrapping_sub(node_digest(path, &old));
        Some(old)
    }

    // ----- quotas

    /// `getMaxPrefixWithQuota`: the deepest quota path covering `path`,
    /// the root excepted.
    fn quota_prefix(&self, path: &str) -> Option<String> {
        let mut best: Option<&String> = None;
        for q in &self.quotas {
            let covers =
                path == q || (path.starts_with(q.as_str()) && path[q.len()..].starts_with('/'));
            if q != "/" && covers && best.is_none_or(|b| q.len() > b.len()) {
                best = Some(q);
            }
        }
        best.cloned()
    }

    fn stat_path(path: &str) -> String {
        format!("{QUOTA_ROOT}{path}/{STAT_NODE}")
    }

    /// `updateQuotaStat`: adds to the counters of the quota on `prefix`.
    fn update_quota_stat(&mut self, prefix: &str, bytes: i64, count: i64) {
        let sp = Self::stat_path(prefix);
        if let Some(n) = self.nodes.get_mut(&sp) {
            let mut st = StatsTrack::parse(n.data.as_deref().unwrap_or_default());
            st.set("count", st.get("count").wrapping_add(count));
            st.set("bytes", st.get("bytes").wrapping_add(bytes));
            n.data = Some(st.render());
        }
    }

    /// `updateQuotaForPath`: recounts the subtree of `path` into its stat
    /// node (a fresh StatsTrack: count and bytes only).
    fn update_quota_for_path(&mut self, path: &str) {
        let (mut count, mut bytes) = (0i64, 0i64);
        let mut stack = vec![path.to_string()];
        while let Some(p) = stack.pop() {
            let Some(n) = self.nodes.get(&p) else {
                continue;
            };
            count += 1;
            bytes += data_len(&n.data);
            for c in &n.children {
                stack.push(if p == "/" {
                    format!("/{c}")
                } else {
                    format!("{p}/{c}")
                });
            }
        }
        let sp = Self::stat_path(path);
        let mut st = StatsTrack::default();
        st.set("count", count);
        st.set("bytes", bytes);
        self.modify(&sp, |n| n.data = Some(st.render()));
    }

    /// `setupQuota`/`traverseNode`: every leaf under /zookeeper/quota named
    /// `.../zookeeper_limits` marks a quota and gets its stats recounted.
    fn setup_quota(&mut self) {
        let suffix = format!("/{LIMIT_NODE}");
        let mut limits: Vec<String> = self
            .nodes
            .iter()
            .filter(|(p, n)| {
                p.starts_with(QUOTA_ROOT) && p.ends_with(&suffix) && n.children.is_empty()
            })
            .map(|(p, _)| p.clone())
            .collect();
        limits.sort();
        for p in limits {
            // ZooKeeper cuts at the first "/zookeeper_limits".
            let Some(end) = p.find(&suffix) else { continue };
            if end < QUOTA_ROOT.len() {
                continue;
            }
            let real = p[QUOTA_ROOT.len()..end].to_string();
            self.update_quota_for_path(&real);
            self.quotas.insert(real);
        }
    }

    // ----- txns (DataTree.processTxn)

    /// Applies one whole txn (not a multi's part) the way ZooKeeper replays
    /// it, session table included. Failures are ZooKeeper's: recorded and
    /// ignored.
    pub fn apply(&mut self, h: &TxnHeader, txn: &ZkTxn) {
        match txn {
            ZkTxn::CreateSession { timeout_ms } => {
                self.sessions.insert(h.client_id, *timeout_ms);
            }
            ZkTxn::CloseSession { .. } => {
                self.sessions.remove(&h.client_id);
            }
            _ => {}
        }
        let _ = self.process(h, h.op, txn);
        if h.zxid > self.zxid {
            self.zxid = h.zxid;
        }
    }

    fn process(&mut self, h: &TxnHeader, op: i32, txn: &ZkTxn) -> Result<(), TxnFailure> {
        let result = match txn {
            ZkTxn::Create { create, .. } => self.create_node(h, create),
            ZkTxn::Delete { path } => self.delete_node(path, h.zxid),
            ZkTxn::SetData {
                path,
                data,
                version,
            } => self.set_data(path, data, *version, h.zxid, h.time),
            ZkTxn::SetAcl { path, acl, version } => {
                let acl = acl.clone().map_or_else(open_acl, Arc::from);
                if self.modify(path, |n| {
                    n.stat.aversion = *version;
                    n.acl = acl;
                }) {
                    Ok(())
                } else {
                    Err(TxnFailure::NoNode)
                }
            }
            ZkTxn::CloseSession { paths } => {
                self.kill_session(h.client_id, h.zxid, paths.as_deref());
                Ok(())
            }
            ZkTxn::CreateSession { .. } | ZkTxn::Error { .. } | ZkTxn::Check { .. } => Ok(()),
            ZkTxn::Multi(subs) => {
                let failed = subs.iter().any(|s| matches!(s, ZkTxn::Error { .. }));
                let mut first_err = Ok(());
                for sub in subs {
                    if failed {
                        // A failed multi applies none of its parts.
                        continue;
                    }
                    let sub_op = match sub {
                        ZkTxn::Create { op, .. } => *op,
                        _ => 0,
                    };
                    let r = self.process(h, sub_op, sub);
                    if first_err.is_ok() {
                        first_err = r;
                    }
                }
                first_err
            }
        };
        // A `create` (only that opcode) of a node that exists still moves
        // the parent's cversion and pzxid: the node may have been deleted
        // and created again by another session within the fuzzy range.
        if let (Err(TxnFailure::NodeExists), ZkTxn::Create { create, .. }) = (result, txn) {
            if op == op::CREATE {
                if let Some((parent, _)) = split(&create.path) {
                    let zxid = h.zxid;
                    let wanted = create.parent_cversion;
                    self.modify(parent, |p| {
                        let v = if wanted == -1 {
                            p.stat.cversion.wrapping_add(1)
                        } else {
                            wanted
                        };
                        if v > p.stat.cversion {
                            p.stat.cversion = v;
                            p.stat.pzxid = zxid;
                        }
                    });
                }
            }
        }
        result
    }

    fn create_node(&mut self, h: &TxnHeader, c: &Create) -> Result<(), TxnFailure> {
        let Some((parent, name)) = split(&c.path) else {
            return Err(TxnFailure::NoNode);
        };
        if name.is_empty() || !self.nodes.contains_key(parent) {
            return Err(TxnFailure::NoNode);
        }
        let acl: Arc<[ZkAcl]> = c.acl.clone().map_or_else(open_acl, Arc::from);
        if let Some(existing) = self.nodes.get_mut(&c.path) {
            existing.acl = acl;
            return Err(TxnFailure::NodeExists);
        }
        let owner = match c.kind {
            CreateKind::Plain { ephemeral: true } => h.client_id,
            CreateKind::Plain { ephemeral: false } => 0,
            CreateKind::Container => CONTAINER_OWNER,
            CreateKind::Ttl { ttl_ms } => (EXTENDED_MASK as i64) | (ttl_ms & 0xFF_FFFF_FFFF),
        };
        let zxid = h.zxid;
        let wanted = c.parent_cversion;
        let child = name.to_string();
        self.modify(parent, |p| {
            let v = if wanted == -1 {
                p.stat.cversion.wrapping_add(1)
            } else {
                wanted
            };
            if v > p.stat.cversion {
                p.stat.cversion = v;
                p.stat.pzxid = zxid;
            }
            p.children.insert(child);
        });
        let node = ZkNode {
            data: c.data.clone(),
            acl,
            stat: StatPersisted {
                czxid: zxid,
                mzxid: zxid,
                ctime: h.time,
                mtime: h.time,
                version: 0,
                cversion: 0,
                aversion: 0,
                ephemeral_owner: owner,
                pzxid: zxid,
            },
            children: BTreeSet::new(),
        };
        self.put(&c.path, node);
        if let OwnerKind::Ephemeral(s) = owner_kind(owner) {
            self.ephemerals.entry(s).or_default().insert(c.path.clone());
        }
        if let Some(real) = parent.strip_prefix(QUOTA_ROOT) {
            let real = real.to_string();
            if name == LIMIT_NODE {
                self.quotas.insert(real.clone());
            }
            if name == STAT_NODE {
                self.update_quota_for_path(&real);
            }
        }
        if let Some(prefix) = self.quota_prefix(&c.path) {
            self.update_quota_stat(&prefix, data_len(&c.data), 1);
        }
        Ok(())
    }

    fn delete_node(&mut self, path: &str, zxid: i64) -> Result<(), TxnFailure> {
        let Some((parent, name)) = split(path) else {
            return Err(TxnFailure::NoNode);
        };
        // The parent's pzxid moves even if the child is already gone (it
        // may have been deleted within the fuzzy range).
        let name_owned = name.to_string();
        if !self.modify(parent, |p| {
            p.children.remove(&name_owned);
            if zxid > p.stat.pzxid {
                p.stat.pzxid = zxid;
            }
        }) {
            return Err(TxnFailure::NoNode);
        }
        let Some(node) = self.remove(path) else {
            return Err(TxnFailure::NoNode);
        };
        if let OwnerKind::Ephemeral(s) = owner_kind(node.stat.ephemeral_owner) {
            if let Some(set) = self.ephemerals.get_mut(&s) {
                set.remove(path);
                if set.is_empty() {
                    self.ephemerals.remove(&s);
                }
            }
        }
        if parent.starts_with(QUOTA_ROOT) && name == LIMIT_NODE {
            self.quotas.remove(&parent[QUOTA_ROOT.len()..]);
        }
        if let Some(prefix) = self.quota_prefix(path) {
            self.update_quota_stat(&prefix, -data_len(&node.data), -1);
        }
        Ok(())
    }

    fn set_data(
        &mut self,
        path: &str,
        data: &Option<Vec<u8>>,
        version: i32,
        zxid: i64,
        time: i64,
    ) -> Result<(), TxnFailure> {
        let mut old_len = 0i64;
        if !self.modify(path, |n| {
            old_len = data_len(&n.data);
            n.data = data.clone();
            n.stat.mtime = time;
            n.stat.mzxid = zxid;
            n.stat.version = version;
        }) {
            return Err(TxnFailure::NoNode);
        }
        if let Some(prefix) = self.quota_prefix(path) {
            self.update_quota_stat(&prefix, data_len(data) - old_len, 0);
        }
        Ok(())
    }

    /// `killSession`: deletes the paths the txn names, then whatever else
    /// the session still owns.
    fn kill_session(&mut self, session: i64, zxid: i64, in_txn: Option<&[String]>) {
        let mut local = self.ephemerals.remove(&session);
        if let Some(paths) = in_txn {
            for p in paths {
                let _ = self.delete_node(p, zxid);
                if let Some(l) = &mut local {
                    l.remove(p);
                }
            }
        }
        for p in local.into_iter().flatten() {
            let _ = self.delete_node(&p, zxid);
        }
    }
}
