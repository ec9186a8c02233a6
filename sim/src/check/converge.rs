//! Tree convergence: once the network heals and the ensemble is quiet,
//! every live member has applied the same zxid and holds the same tree as
//! the committed sequence builds (every znode's path, data, stat and ACL).

use wazoo_core::tree::DataTree;
use wazoo_proto::{Acl, Stat};

/// One znode as the listing shows it: path, data (`None`: null), stat, ACL.
pub type Listed = (String, Option<Vec<u8>>, Stat, Vec<Acl>);

/// Every znode, depth first, children in name order.
pub fn listing(tree: &DataTree) -> Vec<Listed> {
    let mut out = Vec::new();
    let mut stack = vec!["/".to_string()];
    while let Some(path) = stack.pop() {
        let Some((data, stat)) = tree.get_data(&path) else {
            continue;
        };
        let acl = tree.acl(&path).unwrap_or_default();
        let mut children = tree.children(&path).unwrap_or_default();
        children.sort();
        for c in children.into_iter().rev() {
            stack.push(if path == "/" {
                format!("/{c}")
            } else {
                format!("{path}/{c}")
            });
        }
        out.push((path, data, stat, acl));
    }
    out
}

/// `Ok` if `tree` equals `reference`; otherwise the first difference.
pub fn compare(who: &str, tree: &DataTree, reference: &DataTree) -> Result<(), String> {
    let (a, b) = (listing(tree), listing(reference));
    for (x, y) in a.iter().zip(&b) {
        if x != y {
            return Err(format!(
                "convergence: {who} has {:?} where the committed sequence has {:?}",
                (&x.0, &x.2),
                (&y.0, &y.2)
            ));
        }
    }
    if a.len() != b.len() {
        return Err(format!(
            "convergence: {who} has {} znodes, the committed sequence {}",
            a.len(),
            b.len()
        ));
    }
    Ok(())
}

/// A multi applies all of its ops or none: the clients' multis create
/// `/ma-<tag>` and `/mb-<tag>` together (or fail as a whole), so one never
/// exists without the other.
pub fn check_multis(tree: &DataTree) -> Result<(), String> {
    let names = tree.children("/").unwrap_or_default();
    for name in &names {
        for (mine, other) in [("ma-", "mb-"), ("mb-", "ma-")] {
            if let Some(tag) = name.strip_prefix(mine) {
                if !names.contains(&format!("{other}{tag}")) {
                    return Err(format!("multi: /{name} exists without /{other}{tag}"));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use wazoo_core::txn::{Txn, TxnHeader};

    #[test]
    fn a_different_tree_fails() {
        let a = DataTree::new();
        let mut b = DataTree::new();
        compare("a", &a, &b).unwrap();
        let hdr = TxnHeader {
            session_id: 1,
            cxid: 1,
            zxid: 1,
            time_ms: 0,
        };
        b.apply(
            &hdr,
            &Txn::SetData {
                path: "/zookeeper".into(),
                data: Some(vec![1]),
                version: 1,
            },
        )
        .unwrap();
        assert!(compare("a", &a, &b).is_err());
    }

    #[test]
    fn half_a_multi_fails() {
        let mut t = DataTree::new();
        let hdr = |zxid| TxnHeader {
            session_id: 1,
            cxid: 1,
            zxid,
            time_ms: 0,
        };
        let create = |path: &str| {
            Txn::Create(wazoo_core::txn::CreateTxn {
                path: path.into(),
                data: Some(vec![]),
                acl: wazoo_proto::Acl::open_unsafe(),
                ephemeral_owner: 0,
                parent_cversion: 1,
                kind: wazoo_core::txn::NodeKind::Regular,
            })
        };
        t.apply(&hdr(1), &create("/ma-1")).unwrap();
        assert!(check_multis(&t).is_err());
        t.apply(&hdr(2), &Txn::Multi(vec![create("/mb-1")]))
            .unwrap();
        check_multis(&t).unwrap();
    }
}
