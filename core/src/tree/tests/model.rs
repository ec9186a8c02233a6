//! The tree against a simple model: random ops applied to both, compared
//! after every step.

use super::*;
use proptest::prelude::*;
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq)]
struct MNode {
    /// `None`: null data.
    data: Option<Vec<u8>>,
    acl: Vec<Acl>,
    kind: ZnodeType,
    czxid: i64,
    mzxid: i64,
    pzxid: i64,
    ctime: i64,
    mtime: i64,
    version: i32,
    cversion: i32,
    aversion: i32,
}

/// The tree as a map of path -> node, with the rules written plainly.
#[derive(Debug, Clone)]
struct Model {
    nodes: BTreeMap<String, MNode>,
}

fn zero(acl: Vec<Acl>) -> MNode {
    MNode {
        data: Some(vec![]),
        acl,
        kind: ZnodeType::Persistent,
        czxid: 0,
        mzxid: 0,
        pzxid: 0,
        ctime: 0,
        mtime: 0,
        version: 0,
        cversion: 0,
        aversion: 0,
    }
}

impl Model {
    fn new() -> Model {
        let mut nodes = BTreeMap::new();
        for p in ["/", "/zookeeper", "/zookeeper/quota"] {
            nodes.insert(p.to_string(), zero(Acl::open_unsafe()));
        }
        let mut config = zero(Acl::read_unsafe());
        config.aversion = -1;
        nodes.insert("/zookeeper/config".into(), config);
        Model { nodes }
    }

    fn children(&self, p: &str) -> Vec<String> {
        self.nodes
            .keys()
            .filter(|k| k.as_str() != "/" && wazoo_proto::path::parent(k) == p)
            .map(|k| wazoo_proto::path::name(k).to_string())
            .collect()
    }
    fn stat(&self, p: &str) -> Stat {
        let n = &self.nodes[p];
        let kids = self.children(p).len() as i32;
        Stat {
            czxid: n.czxid,
            mzxid: n.mzxid,
            ctime: n.ctime,
            mtime: n.mtime,
            version: n.version,
            cversion: n.cversion.wrapping_mul(2).wrapping_sub(kids),
            aversion: n.aversion,
            ephemeral_owner: match n.kind {
                ZnodeType::Ephemeral { owner } => owner,
                _ => 0,
            },
            data_length: n.data.as_ref().map_or(0, Vec::len) as i32,
            num_children: kids,
            pzxid: n.pzxid,
        }
    }

    fn ephemerals(&self, s: i64) -> Vec<String> {
        self.nodes
            .iter()
            .filter(|(_, n)| n.kind == ZnodeType::Ephemeral { owner: s })
            .map(|(p, _)| p.clone())
            .collect()
    }

    fn apply(&mut self, h: &TxnHeader, txn: &Txn, tr: &mut Vec<Trigger>) -> Result<(), ()> {
        match txn {
            Txn::CreateSession { .. } => Ok(()),
            Txn::CloseSession => {
                for p in self.ephemerals(h.session_id) {
                    self.op(h, &Txn::Delete { path: p }, tr)?;
                }
                Ok(())
            }
            Txn::Multi(ops) => {
                let saved = self.clone();
                for op in ops {
                    if matches!(
                        op,
                        Txn::Multi(_) | Txn::CloseSession | Txn::CreateSession { .. }
                    ) || self.op(h, op, tr).is_err()
                    {
                        *self = saved;
                        return Err(());
                    }
                }
                Ok(())
            }
            op => self.op(h, op, tr),
        }
    }

    fn op(&mut self, h: &TxnHeader, txn: &Txn, tr: &mut Vec<Trigger>) -> Result<(), ()> {
        match txn {
            Txn::Create(c) => {
                let kind = match (c.kind, c.ephemeral_owner) {
                    (NodeKind::Regular, 0) => ZnodeType::Persistent,
                    (NodeKind::Regular, owner) => ZnodeType::Ephemeral { owner },
                    (NodeKind::Container, 0) => ZnodeType::Container,
                    (NodeKind::Ttl { ttl_ms }, 0) if ttl_ms > 0 && ttl_ms <= MAX_TTL_MS => {
                        ZnodeType::Ttl { ttl_ms }
                    }
                    _ => return Err(()),
                };
                let p = c.path.as_str();
                if p == "/" || wazoo_proto::path::validate(p, false).is_err() {
                    return Err(());
                }
                let parent = wazoo_proto::path::parent(p);
                match self.nodes.get(parent) {
                    Some(pn) if !matches!(pn.kind, ZnodeType::Ephemeral { .. }) => {}
                    _ => return Err(()),
                }
                if self.nodes.contains_key(p) {
                    return Err(());
                }
                self.nodes.insert(
                    p.to_string(),
                    MNode {
                        data: c.data.clone(),
                        acl: c.acl.clone(),
                        kind,
                        czxid: h.zxid,
                        mzxid: h.zxid,
                        pzxid: h.zxid,
                        ctime: h.time_ms,
                        mtime: h.time_ms,
                        version: 0,
                        cversion: 0,
                        aversion: 0,
                    },
                );
                let pn = self.nodes.get_mut(parent).unwrap();
                pn.cversion = c.parent_cversion;
                pn.pzxid = h.zxid;
                tr.push(trig(p, EventType::NodeCreated));
                tr.push(trig(parent, EventType::NodeChildrenChanged));
            }
            Txn::Delete { path: p } => {
                if p == "/" || !self.nodes.contains_key(p) || !self.children(p).is_empty() {
                    return Err(());
                }
                self.nodes.remove(p);
                let parent = wazoo_proto::path::parent(p);
                self.nodes.get_mut(parent).unwrap().pzxid = h.zxid;
                tr.push(trig(p, EventType::NodeDeleted));
                tr.push(trig(parent, EventType::NodeChildrenChanged));
            }
            Txn::SetData {
                path: p,
                data,
                version,
            } => {
                let n = self.nodes.get_mut(p).ok_or(())?;
                n.data = data.clone();
                n.version = *version;
                n.mzxid = h.zxid;
                n.mtime = h.time_ms;
                tr.push(trig(p, EventType::NodeDataChanged));
            }
            Txn::SetAcl {
                path: p,
                acl,
                aversion,
            } => {
                let n = self.nodes.get_mut(p).ok_or(())?;
                n.acl = acl.clone();
                n.aversion = *aversion;
            }
            Txn::Check { path: p } => {
                self.nodes.get(p).ok_or(())?;
            }
            _ => return Err(()),
        }
        Ok(())
    }
}

/// Where an op points: mostly at a node the model has (by index), else
/// at a path built from a few names, which may or may not exist.
#[derive(Debug, Clone)]
struct Target {
    existing: bool,
    index: usize,
    parts: Vec<u8>,
}

impl Target {
    fn resolve(&self, m: &Model) -> String {
        if self.existing {
            let keys: Vec<&String> = m.nodes.keys().collect();
            return keys[self.index % keys.len()].clone();
        }
        path_of(&self.parts)
    }
}

/// An op as generated; turned into a txn against the model's state,
/// the way a pipeline would (but without checking that it fits).
#[derive(Debug, Clone)]
enum Op {
    Create {
        parent: Target,
        name: u8,
        seq: bool,
        kind: u8,
        session: u8,
        data: Option<Vec<u8>>,
        acl: u8,
    },
    Delete(Target),
    SetData(Target, Option<Vec<u8>>),
    SetAcl(Target, u8),
    Check(Target),
    Close(u8),
    Multi(Vec<Op>),
    Reload,
    Freeze,
}

const NAMES: [&str; 4] = ["a", "b", "c", "zookeeper"];

fn path_of(parts: &[u8]) -> String {
    if parts.is_empty() {
        return "/".into();
    }
    parts
        .iter()
        .map(|&c| NAMES[c as usize % 4])
        .fold(String::new(), |p, n| format!("{p}/{n}"))
}

fn acl_of(i: u8) -> Vec<Acl> {
    match i % 3 {
        0 => Acl::open_unsafe(),
        1 => Acl::read_unsafe(),
        _ => vec![
            Acl::new(perms::ALL, "digest", "u:x"),
            Acl::new(perms::READ, "ip", "10.0.0.0/8"),
        ],
    }
}

fn session(i: u8) -> i64 {
    i64::from(i % 3) + 1
}

fn to_txn(m: &Model, op: &Op) -> Txn {
    match op {
        Op::Create {
            parent,
            name,
            seq,
            kind,
            session: s,
            data,
            acl,
        } => {
            let parent = parent.resolve(m);
            let cv = m.nodes.get(&parent).map_or(0, |n| n.cversion);
            let name = NAMES[*name as usize % 4];
            let mut p = wazoo_proto::path::join(&parent, name);
            if *seq {
                p = sequential_path(&format!("{p}-"), cv);
            }
            let (owner, kind) = match kind % 5 {
                0 | 1 => (0, NodeKind::Regular),
                2 => (session(*s), NodeKind::Regular),
                3 => (0, NodeKind::Container),
                _ => (0, NodeKind::Ttl { ttl_ms: 100 }),
            };
            Txn::Create(CreateTxn {
                path: p,
                data: data.clone(),
                acl: acl_of(*acl),
                ephemeral_owner: owner,
                parent_cversion: cv.wrapping_add(1),
                kind,
            })
        }
        Op::Delete(t) => Txn::Delete { path: t.resolve(m) },
        Op::SetData(t, data) => {
            let p = t.resolve(m);
            let v = m.nodes.get(&p).map_or(0, |n| n.version + 1);
            Txn::SetData {
                path: p,
                data: data.clone(),
                version: v,
            }
        }
        Op::SetAcl(t, a) => {
            let p = t.resolve(m);
            let v = m.nodes.get(&p).map_or(0, |n| n.aversion + 1);
            Txn::SetAcl {
                path: p,
                acl: acl_of(*a),
                aversion: v,
            }
        }
        Op::Check(t) => Txn::Check { path: t.resolve(m) },
        Op::Close(_) => Txn::CloseSession,
        Op::Multi(ops) => {
            // Later ops see the model as the earlier ones leave it.
            let mut scratch = m.clone();
            let mut txns = Vec::new();
            for (i, o) in ops.iter().enumerate() {
                let t = to_txn(&scratch, o);
                let h = hdr(1, i as i64);
                let _ = scratch.apply(&h, &t, &mut Vec::new());
                txns.push(t);
            }
            Txn::Multi(txns)
        }
        Op::Reload | Op::Freeze => Txn::Check { path: "/".into() },
    }
}

fn target() -> impl Strategy<Value = Target> {
    (
        proptest::bool::weighted(0.8),
        any::<usize>(),
        proptest::collection::vec(0u8..4, 0..4),
    )
        .prop_map(|(existing, index, parts)| Target {
            existing,
            index,
            parts,
        })
}

/// Null data too (ZooKeeper Programmer's Guide, "ZooKeeper Data Model").
fn data() -> impl Strategy<Value = Option<Vec<u8>>> {
    proptest::option::weighted(0.8, proptest::collection::vec(any::<u8>(), 0..8))
}

fn leaf_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (target(), any::<u8>(), proptest::bool::weighted(0.3), any::<u8>(), any::<u8>(), data(), any::<u8>())
            .prop_map(|(parent, name, seq, kind, session, data, acl)| Op::Create { parent, name, seq, kind, session, data, acl }),
        2 => target().prop_map(Op::Delete),
        2 => (target(), data()).prop_map(|(t, d)| Op::SetData(t, d)),
        1 => (target(), any::<u8>()).prop_map(|(t, a)| Op::SetAcl(t, a)),
        1 => target().prop_map(Op::Check),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        12 => leaf_op(),
        1 => any::<u8>().prop_map(Op::Close),
        3 => proptest::collection::vec(leaf_op(), 0..4).prop_map(Op::Multi),
        1 => Just(Op::Reload),
        1 => Just(Op::Freeze),
    ]
}

fn assert_same(t: &DataTree, m: &Model) {
    t.check_invariants().unwrap();
    assert_eq!(t.node_count(), m.nodes.len());
    for (p, n) in &m.nodes {
        let v = t.node(p).unwrap_or_else(|| panic!("{p} missing"));
        assert_eq!(v.stat, m.stat(p), "{p}");
        assert_eq!(v.stored_cversion, n.cversion, "{p}");
        assert_eq!(v.nullable_data(), n.data.as_deref(), "{p}");
        assert_eq!(&*v.acl, n.acl.as_slice(), "{p}");
        assert_eq!(v.kind, n.kind, "{p}");
        assert_eq!(t.children(p).unwrap(), m.children(p), "{p}");
    }
    for s in 1..=3 {
        assert_eq!(t.ephemerals(s), m.ephemerals(s), "session {s}");
    }
    let with: Vec<i64> = (1..=3).filter(|&s| !m.ephemerals(s).is_empty()).collect();
    assert_eq!(t.sessions_with_ephemerals(), with);
    assert_eq!(t.all_children_number("/"), Some(m.nodes.len() as i32 - 1));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn random_txns_match_a_simple_model(ops in proptest::collection::vec(op(), 1..80)) {
        let mut tree = DataTree::new();
        let mut m = Model::new();
        let mut frozen: Option<(TreeSnapshot, Model)> = None;
        for (i, op) in ops.iter().enumerate() {
            let zxid = i as i64 + 1;
            match op {
                Op::Reload => {
                    let back = reload(&tree);
                    prop_assert!(back == tree);
                    tree = back;
                    continue;
                }
                Op::Freeze => {
                    frozen = Some((tree.snapshot(), m.clone()));
                    continue;
                }
                _ => {}
            }
            let sess = match op { Op::Close(s) => session(*s), _ => 1 };
            let txn = to_txn(&m, op);
            let h = TxnHeader { session_id: sess, cxid: 0, zxid, time_ms: zxid * 10 };
            let mut want = Vec::new();
            let before = tree.clone();
            let expect_ok = m.apply(&h, &txn, &mut want).is_ok();
            match tree.apply(&h, &txn) {
                Ok(got) => {
                    prop_assert!(expect_ok, "tree applied what the model refused: {txn:?}");
                    prop_assert_eq!(got, want);
                }
                Err(e) => {
                    prop_assert!(!expect_ok, "tree refused {txn:?}: {e}");
                    prop_assert!(tree == before);
                }
            }
            assert_same(&tree, &m);
        }
        if let Some((snap, m)) = frozen {
            let mut b = Vec::new();
            snap.write_to(&mut b).unwrap();
            let t = DataTree::read_from(&mut b.as_slice()).unwrap();
            assert_same(&t, &m);
        }
    }
}
