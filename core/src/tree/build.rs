//! Building a tree from a list of nodes given with every stored field: how
//! a tree that another server made (an Apache ZooKeeper snapshot and log,
//! read by `wazoo import`) becomes a [`DataTree`].
//!
//! The nodes may come in any order; each is checked as a snapshot's node is
//! (a valid path, a persistent root, a parent that exists and is not
//! ephemeral, a TTL in range), numChildren is counted, and the finished tree
//! must pass [`DataTree::check_invariants`]. What is stored is taken as
//! given: the stored cversion (ZooKeeper's `StatPersisted.cversion`, which
//! counts child creates and names sequential children), pzxid, versions and
//! times, so the tree answers with the Stat the other server answered with.

use wazoo_proto::{path, Acl};

use super::node::{encode_key, Header, Node, ZnodeType};
use super::DataTree;

/// One node to build a tree from: its path and every field the tree stores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSpec {
    pub path: String,
    pub kind: ZnodeType,
    pub czxid: i64,
    pub mzxid: i64,
    pub pzxid: i64,
    pub ctime: i64,
    pub mtime: i64,
    pub version: i32,
    /// The stored cversion (see [`DataTree::stored_cversion`]), not the one
    /// a Stat reports.
    pub stored_cversion: i32,
    pub aversion: i32,
    pub acl: Vec<Acl>,
    /// `None` for null data.
    pub data: Option<Vec<u8>>,
}

impl DataTree {
    /// The tree holding exactly `nodes`, which must include the root. Fails
    /// with a message naming the first node that cannot be placed.
    pub fn from_nodes(mut nodes: Vec<NodeSpec>) -> Result<DataTree, String> {
        for n in &nodes {
            path::validate(&n.path, false).map_err(|e| format!("{}: {e}", n.path))?;
            if let ZnodeType::Ttl { ttl_ms } = n.kind {
                if !super::ttl_in_range(ttl_ms) {
                    return Err(format!("{}: TTL {ttl_ms} ms is out of range", n.path));
                }
            }
            if let ZnodeType::Ephemeral { owner: 0 } = n.kind {
                return Err(format!("{}: an ephemeral node without an owner", n.path));
            }
        }
        // Key order puts every parent before its children.
        nodes.sort_by_cached_key(|n| encode_key(&n.path));
        match nodes.first() {
            Some(root) if root.path == "/" => {
                if root.kind != ZnodeType::Persistent {
                    return Err("the root is not a persistent node".into());
                }
            }
            _ => return Err("there is no root node".into()),
        }
        let keys: Vec<Vec<u8>> = nodes.iter().map(|n| encode_key(&n.path)).collect();
        if let Some(w) = keys.windows(2).position(|w| w[0] == w[1]) {
            return Err(format!("{} is given twice", nodes[w].path));
        }
        let mut kids = vec![0u32; nodes.len()];
        for (i, n) in nodes.iter().enumerate().skip(1) {
            let parent = encode_key(path::parent(&n.path));
            let pi = keys
                .binary_search(&parent)
                .map_err(|_| format!("{}: the parent is missing", n.path))?;
            if matches!(nodes[pi].kind, ZnodeType::Ephemeral { .. }) {
                return Err(format!("{}: the parent is ephemeral", n.path));
            }
            kids[pi] = kids[pi]
                .checked_add(1)
                .ok_or_else(|| format!("{}: too many children", nodes[pi].path))?;
            debug_assert!(pi < i, "a parent sorts before its child");
        }
        let mut t = DataTree::empty();
        for ((n, key), num_children) in nodes.into_iter().zip(keys).zip(kids) {
            // The table stores each distinct list once.
            let acl = t.acls.intern(&n.acl);
            let h = Header {
                czxid: n.czxid,
                mzxid: n.mzxid,
                pzxid: n.pzxid,
                ctime: n.ctime,
                mtime: n.mtime,
                version: n.version,
                cversion: n.stored_cversion,
                aversion: n.aversion,
                acl,
                num_children,
                kind: n.kind,
            };
            t.set_node(&n.path, Some(Node::new(&h, &key, n.data.as_deref())));
        }
        t.acls.purge();
        t.check_invariants()?;
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wazoo_proto::Id;

    fn spec(path: &str, kind: ZnodeType, data: &[u8]) -> NodeSpec {
        NodeSpec {
            path: path.into(),
            kind,
            czxid: 3,
            mzxid: 4,
            pzxid: 5,
            ctime: 6,
            mtime: 7,
            version: 8,
            stored_cversion: 9,
            aversion: 10,
            acl: Acl::open_unsafe(),
            data: Some(data.to_vec()),
        }
    }

    #[test]
    fn nodes_in_any_order_build_the_tree_with_every_stored_field() {
        let digest = vec![Acl {
            perms: 31,
            id: Id {
                scheme: "digest".into(),
                id: "u:x".into(),
            },
        }];
        let mut a = spec("/a", ZnodeType::Container, b"");
        a.acl = digest.clone();
        let nodes = vec![
            spec("/a/e", ZnodeType::Ephemeral { owner: 77 }, b"e"),
            spec("/t", ZnodeType::Ttl { ttl_ms: 500 }, b"t"),
            a,
            spec("/", ZnodeType::Persistent, b""),
        ];
        let t = DataTree::from_nodes(nodes).unwrap();
        let a = t.node("/a").unwrap();
        assert_eq!(a.kind, ZnodeType::Container);
        assert_eq!(&*a.acl, &digest[..]);
        assert_eq!(a.stored_cversion, 9);
        // ZooKeeper's copyStat: cversion = 2 * stored - numChildren.
        assert_eq!(a.stat.cversion, 17);
        assert_eq!(a.stat.num_children, 1);
        assert_eq!(
            (a.stat.czxid, a.stat.mzxid, a.stat.pzxid),
            (3, 4, 5),
            "zxids as given"
        );
        assert_eq!(t.ephemerals(77), vec!["/a/e".to_string()]);
        assert_eq!(t.node_type("/t"), Some(ZnodeType::Ttl { ttl_ms: 500 }));
        assert_eq!(t.stat("/").unwrap().num_children, 2);
    }

    #[test]
    fn a_node_without_its_parent_or_under_an_ephemeral_is_refused() {
        let root = spec("/", ZnodeType::Persistent, b"");
        let err =
            DataTree::from_nodes(vec![root.clone(), spec("/a/b", ZnodeType::Persistent, b"")])
                .unwrap_err();
        assert!(err.contains("/a/b: the parent is missing"), "{err}");
        let err = DataTree::from_nodes(vec![
            root.clone(),
            spec("/e", ZnodeType::Ephemeral { owner: 1 }, b""),
            spec("/e/c", ZnodeType::Persistent, b""),
        ])
        .unwrap_err();
        assert!(err.contains("the parent is ephemeral"), "{err}");
        let err = DataTree::from_nodes(vec![spec("/a", ZnodeType::Persistent, b"")]).unwrap_err();
        assert!(err.contains("no root"), "{err}");
        let err = DataTree::from_nodes(vec![root.clone(), root]).unwrap_err();
        assert!(err.contains("twice"), "{err}");
    }
}
