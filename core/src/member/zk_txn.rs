//! ZooKeeper's txns and wazoo's, both ways: [`zk_txn`] reads what a
//! ZooKeeper leader proposes (a wazoo learner of a ZooKeeper ensemble),
//! [`to_zk_txn`] writes a wazoo txn as a ZooKeeper member would log and
//! apply it (what a wazoo member leading ZooKeeper members proposes, and
//! `DIFF` sends). Each is the other's inverse on the txns both have:
//! applied to ZooKeeper's tree model (`wazoo_storage::zookeeper::ZkTree`,
//! `DataTree.processTxn`'s rules), a txn and its round trip change the
//! tree alike (the property test below).

use wazoo_proto::{Acl, Id};
use wazoo_storage::zookeeper::{op, Create, CreateKind, ZkAcl, ZkTxn};

use crate::tree::DataTree;
use crate::txn::{CreateTxn, NodeKind, Txn};

/// One of ZooKeeper's stored ACL entries as wazoo's.
pub fn zk_acl(a: &ZkAcl) -> Acl {
    Acl {
        perms: a.perms,
        id: Id {
            scheme: a.scheme.clone(),
            id: a.id.clone(),
        },
    }
}

fn acl_of(list: &Option<Vec<ZkAcl>>) -> Vec<Acl> {
    match list {
        // ZooKeeper reads a null ACL vector as OPEN_ACL_UNSAFE.
        None => Acl::open_unsafe(),
        Some(l) => l.iter().map(zk_acl).collect(),
    }
}

/// ZooKeeper's txn (made for `session`) as wazoo's; the
/// tree is read only for a create without a parent cversion (ZooKeeper's
/// V0 create). Applying the result changes the tree as ZooKeeper's
/// `DataTree.processTxn` changes it.
pub fn zk_txn(txn: &ZkTxn, session: i64, tree: &DataTree) -> Result<Txn, String> {
    zk_txn_in(txn, session, tree, &mut Vec::new())
}

/// [`zk_txn`] inside a multi: `bumped` holds the parent cversions earlier
/// V0 creates of the multi set, which later ones build on (ZooKeeper
/// applies a multi's parts one after the other).
fn zk_txn_in(
    txn: &ZkTxn,
    session: i64,
    tree: &DataTree,
    bumped: &mut Vec<(String, i32)>,
) -> Result<Txn, String> {
    Ok(match txn {
        ZkTxn::CreateSession { timeout_ms } => Txn::CreateSession {
            timeout_ms: *timeout_ms,
            // ZooKeeper's password, derived from the id.
            verifier: None,
        },
        ZkTxn::CloseSession { .. } => Txn::CloseSession,
        ZkTxn::Create { create: c, .. } => {
            let (kind, ephemeral_owner) = match c.kind {
                CreateKind::Plain { ephemeral } => {
                    (NodeKind::Regular, if ephemeral { session } else { 0 })
                }
                CreateKind::Container => (NodeKind::Container, 0),
                CreateKind::Ttl { ttl_ms } => (NodeKind::Ttl { ttl_ms }, 0),
            };
            let parent_cversion = if c.parent_cversion == -1 {
                let parent = match c.path.rfind('/') {
                    Some(0) => "/",
                    Some(i) => &c.path[..i],
                    None => return Err(format!("create of {:?}: not a path", c.path)),
                };
                let before = bumped
                    .iter()
                    .rev()
                    .find(|(p, _)| p == parent)
                    .map(|(_, v)| *v)
                    .unwrap_or_else(|| tree.stored_cversion(parent).unwrap_or(0));
                bumped.push((parent.to_string(), before + 1));
                before + 1
            } else {
                c.parent_cversion
            };
            Txn::Create(CreateTxn {
                path: c.path.clone(),
                data: c.data.clone(),
                acl: acl_of(&c.acl),
                ephemeral_owner,
                parent_cversion,
                kind,
            })
        }
        ZkTxn::Delete { path } => Txn::Delete { path: path.clone() },
        ZkTxn::SetData {
            path,
            data,
            version,
        } => {
            // A reconfig's record is a setData of the config node too
            // (version -1, which the node then shows, as in ZooKeeper's).
            Txn::SetData {
                path: path.clone(),
                data: data.clone(),
                version: *version,
            }
        }
        ZkTxn::SetAcl { path, acl, version } => Txn::SetAcl {
            path: path.clone(),
            acl: acl_of(acl),
            aversion: *version,
        },
        ZkTxn::Check { path, .. } => Txn::Check { path: path.clone() },
        ZkTxn::Error { err } => Txn::Error { errs: vec![*err] },
        ZkTxn::Multi(ops) if ops.iter().any(|t| matches!(t, ZkTxn::Error { .. })) => {
            // A multi that failed: every op is an error txn, the code of
            // each the result the client gets for it.
            Txn::Error {
                errs: ops
                    .iter()
                    .map(|t| match t {
                        ZkTxn::Error { err } => *err,
                        _ => 0,
                    })
                    .collect(),
            }
        }
        ZkTxn::Multi(ops) => Txn::Multi(
            ops.iter()
                .map(|t| zk_txn_in(t, session, tree, bumped))
                .collect::<Result<_, _>>()?,
        ),
    })
}

/// One of wazoo's ACL entries as ZooKeeper stores it.
pub fn to_zk_acl(a: &Acl) -> ZkAcl {
    ZkAcl {
        perms: a.perms,
        scheme: a.id.scheme.clone(),
        id: a.id.id.clone(),
    }
}

/// A wazoo txn with no ZooKeeper form: wazoo's own (recipe modules, their
/// counters, restores), or a session whose password ZooKeeper members
/// could not check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoZkForm(pub String);

impl std::fmt::Display for NoZkForm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// wazoo's txn (made for `session`) as ZooKeeper's, with the opcode its
/// header carries. `tree` is the state before the txn: a closeSession
/// lists the session's ephemerals, as ZooKeeper 3.6+ leaders do
/// (`CloseSessionTxn.paths2Delete`). A recipe step is its tree ops as one
/// multi (its waits and replies are wazoo's own and stay out); a failed
/// write is an error txn, a failed multi (more than one code) a multi of
/// error txns. A create is logged as `create2`, a container's and a TTL
/// node's under their own opcodes; a reconfig as a setData of
/// `/zookeeper/config` under `reconfig`, version -1.
pub fn to_zk_txn(txn: &Txn, session: i64, tree: &DataTree) -> Result<(i32, ZkTxn), NoZkForm> {
    Ok(match txn {
        Txn::CreateSession {
            timeout_ms,
            verifier,
        } => {
            if verifier.is_some() {
                return Err(NoZkForm(format!(
                    "session {session:#x} has a random password, which ZooKeeper members cannot check"
                )));
            }
            (
                op::CREATE_SESSION,
                ZkTxn::CreateSession {
                    timeout_ms: *timeout_ms,
                },
            )
        }
        Txn::CloseSession => (
            op::CLOSE_SESSION,
            ZkTxn::CloseSession {
                paths: Some(tree.ephemerals(session)),
            },
        ),
        Txn::Create(c) => {
            let (code, kind) = match c.kind {
                NodeKind::Regular => {
                    let ephemeral = c.ephemeral_owner != 0;
                    if ephemeral && c.ephemeral_owner != session {
                        return Err(NoZkForm(format!(
                            "create of {}: an ephemeral owned by {:#x}, not by the txn's session {session:#x}",
                            c.path, c.ephemeral_owner
                        )));
                    }
                    (op::CREATE2, CreateKind::Plain { ephemeral })
                }
                NodeKind::Container => (op::CREATE_CONTAINER, CreateKind::Container),
                NodeKind::Ttl { ttl_ms } => (op::CREATE_TTL, CreateKind::Ttl { ttl_ms }),
            };
            (
                code,
                ZkTxn::Create {
                    op: code,
                    create: Create {
                        path: c.path.clone(),
                        data: c.data.clone(),
                        acl: Some(c.acl.iter().map(to_zk_acl).collect()),
                        parent_cversion: c.parent_cversion,
                        kind,
                    },
                },
            )
        }
        Txn::Delete { path } => (op::DELETE, ZkTxn::Delete { path: path.clone() }),
        Txn::SetData {
            path,
            data,
            version,
        } => (
            op::SET_DATA,
            ZkTxn::SetData {
                path: path.clone(),
                data: data.clone(),
                version: *version,
            },
        ),
        Txn::SetAcl {
            path,
            acl,
            aversion,
        } => (
            op::SET_ACL,
            ZkTxn::SetAcl {
                path: path.clone(),
                acl: Some(acl.iter().map(to_zk_acl).collect()),
                version: *aversion,
            },
        ),
        Txn::Check { path } => {
            // ZooKeeper's CheckVersionTxn holds the version checked, which
            // no member reads when it applies it.
            let version = tree.stat(path).map_or(-1, |s| s.version);
            (
                op::CHECK,
                ZkTxn::Check {
                    path: path.clone(),
                    version,
                },
            )
        }
        Txn::Error { errs } if errs.len() == 1 => (op::ERROR, ZkTxn::Error { err: errs[0] }),
        Txn::Error { errs } => (
            op::MULTI,
            ZkTxn::Multi(errs.iter().map(|&err| ZkTxn::Error { err }).collect()),
        ),
        Txn::Multi(ops) => (op::MULTI, multi_of(ops, session, tree)?),
        Txn::Recipe(r) => (op::MULTI, multi_of(&r.ops, session, tree)?),
        Txn::Reconfig { data } => (
            op::RECONFIG,
            ZkTxn::SetData {
                path: "/zookeeper/config".into(),
                data: Some(data.clone()),
                version: -1,
            },
        ),
        Txn::Noop => {
            return Err(NoZkForm(
                "a no-op (ZooKeeper orders a sync without a txn)".into(),
            ))
        }
        Txn::Deploy(_)
        | Txn::Undeploy { .. }
        | Txn::RecipeCounters(_)
        | Txn::SetRecipesAcl { .. } => {
            return Err(NoZkForm(
                "a recipe module's txn is wazoo's own: ZooKeeper members cannot apply it".into(),
            ))
        }
        Txn::Restore(_) => {
            return Err(NoZkForm(
                "a restore replaces the whole state: ZooKeeper members are synced afresh instead"
                    .into(),
            ))
        }
    })
}

/// A multi's ops as ZooKeeper's MultiTxn parts. The ops apply in order, so
/// a check or a closeSession inside sees the tree as the ops before it
/// left it only in wazoo; ZooKeeper reads neither field when it applies
/// them, so the tree before the multi serves.
fn multi_of(ops: &[Txn], session: i64, tree: &DataTree) -> Result<ZkTxn, NoZkForm> {
    let parts = ops
        .iter()
        .map(|t| match t {
            // ZooKeeper's MultiTxn has no setACL part.
            Txn::Create(_) | Txn::Delete { .. } | Txn::SetData { .. } | Txn::Check { .. } => {
                to_zk_txn(t, session, tree).map(|(_, z)| z)
            }
            other => Err(NoZkForm(format!("{other:?} inside a multi"))),
        })
        .collect::<Result<_, _>>()?;
    Ok(ZkTxn::Multi(parts))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txn::TxnHeader;
    use proptest::prelude::*;
    use wazoo_storage::zookeeper::{
        decode_entry, encode_entry, SnapNode, StatPersisted, TxnEntry, TxnHeader as ZkHeader,
        ZkSnapshot, ZkTree,
    };

    /// ZooKeeper's tree model as `DataTree::new()` starts.
    fn zk_fresh() -> ZkTree {
        let acl = |perms| ZkAcl {
            perms,
            scheme: "world".into(),
            id: "anyone".into(),
        };
        let node = |path: &str, acl, aversion| SnapNode {
            path: path.into(),
            data: Some(Vec::new()),
            acl,
            stat: StatPersisted {
                aversion,
                ..Default::default()
            },
        };
        let snap = ZkSnapshot {
            dbid: -1,
            sessions: Vec::new(),
            acls: [(1, vec![acl(31)]), (2, vec![acl(1)])].into(),
            nodes: vec![
                node("", 1, 0),
                node("/zookeeper", 1, 0),
                node("/zookeeper/quota", 1, 0),
                node("/zookeeper/config", 2, -1),
            ],
            digest: None,
            last_processed_zxid: None,
        };
        ZkTree::from_snapshot(&snap, 0).unwrap()
    }

    const PATHS: [&str; 6] = ["/a", "/a/b", "/c", "/a/b/c", "/c/d", "/zookeeper/x"];

    fn arb_acl() -> impl Strategy<Value = Option<Vec<ZkAcl>>> {
        prop_oneof![
            Just(None),
            Just(Some(vec![ZkAcl {
                perms: 31,
                scheme: "world".into(),
                id: "anyone".into()
            }])),
            Just(Some(vec![
                ZkAcl {
                    perms: 1,
                    scheme: "world".into(),
                    id: "anyone".into()
                },
                ZkAcl {
                    perms: 31,
                    scheme: "digest".into(),
                    id: "u:h=".into()
                }
            ])),
        ]
    }

    /// One ZooKeeper txn, as a ZooKeeper leader makes them (a create
    /// under the opcode `to_zk_txn` picks for its kind).
    fn arb_op() -> impl Strategy<Value = ZkTxn> {
        let path = prop::sample::select(PATHS.to_vec()).prop_map(str::to_string);
        let data = prop_oneof![
            Just(None),
            Just(Some(Vec::new())),
            Just(Some(b"xy".to_vec()))
        ];
        let kind = prop_oneof![
            any::<bool>().prop_map(|ephemeral| CreateKind::Plain { ephemeral }),
            Just(CreateKind::Container),
            (1i64..100_000).prop_map(|ttl_ms| CreateKind::Ttl { ttl_ms }),
        ];
        prop_oneof![
            // The parent's cversion as ZooKeeper's V0 create leaves it to
            // the member (its own plus one), which is what a leader's
            // prep puts in: a generated one could go backwards.
            (path.clone(), data.clone(), arb_acl(), Just(-1), kind).prop_map(
                |(path, data, acl, parent_cversion, kind)| {
                    let op = match kind {
                        CreateKind::Plain { .. } => op::CREATE2,
                        CreateKind::Container => op::CREATE_CONTAINER,
                        CreateKind::Ttl { .. } => op::CREATE_TTL,
                    };
                    ZkTxn::Create {
                        op,
                        create: Create {
                            path,
                            data,
                            acl,
                            parent_cversion,
                            kind,
                        },
                    }
                }
            ),
            path.clone().prop_map(|path| ZkTxn::Delete { path }),
            (path.clone(), data, 0i32..5).prop_map(|(path, data, version)| ZkTxn::SetData {
                path,
                data,
                version
            }),
            (path, arb_acl(), 0i32..5).prop_map(|(path, acl, version)| ZkTxn::SetAcl {
                path,
                acl,
                version
            }),
        ]
    }

    fn arb_txn() -> impl Strategy<Value = ZkTxn> {
        prop_oneof![
            10 => arb_op(),
            // ZooKeeper's MultiTxn has no setACL part.
            3 => prop::collection::vec(
                arb_op().prop_filter("no setACL in a multi", |t| !matches!(t, ZkTxn::SetAcl { .. })),
                1..4,
            )
            .prop_map(ZkTxn::Multi),
            1 => (1i32..60_000).prop_map(|timeout_ms| ZkTxn::CreateSession { timeout_ms }),
            1 => Just(ZkTxn::CloseSession { paths: None }),
            1 => (-120i32..-1).prop_map(|err| ZkTxn::Error { err }),
            1 => prop::collection::vec(-120i32..0, 2..4)
                .prop_map(|errs| ZkTxn::Multi(errs.into_iter().map(|err| ZkTxn::Error { err }).collect())),
        ]
    }

    fn header_op(txn: &ZkTxn) -> i32 {
        match txn {
            ZkTxn::Create { op, .. } => *op,
            ZkTxn::CreateSession { .. } => op::CREATE_SESSION,
            ZkTxn::CloseSession { .. } => op::CLOSE_SESSION,
            ZkTxn::Delete { .. } => op::DELETE,
            ZkTxn::SetData { .. } => op::SET_DATA,
            ZkTxn::SetAcl { .. } => op::SET_ACL,
            ZkTxn::Check { .. } => op::CHECK,
            ZkTxn::Error { .. } => op::ERROR,
            ZkTxn::Multi(_) => op::MULTI,
        }
    }

    // ZooKeeper Internals, "Atomic Broadcast": what a wazoo member leading
    // ZooKeeper members proposes must change their trees exactly as the
    // txn changes its own. A ZooKeeper txn read as wazoo's (`zk_txn`) and
    // written back (`to_zk_txn`) changes ZooKeeper's tree model as the
    // original does, txn after txn, and wazoo's own tree alike (the same
    // digest); the header's opcode is the original's.
    proptest! {
        #[test]
        fn a_txn_read_as_wazoos_and_written_back_changes_zookeepers_tree_alike(
            steps in prop::collection::vec((arb_txn(), 1i64..4), 1..40)
        ) {
            let (mut original, mut round_trip, mut wazoo) = (zk_fresh(), zk_fresh(), DataTree::new());
            prop_assert_eq!(original.digest(), wazoo.digest(), "the same start");
            for (n, (txn, session)) in steps.into_iter().enumerate() {
                let zxid = (1i64 << 32) | (n as i64 + 1);
                let header = |op| ZkHeader { client_id: session, cxid: n as i32, zxid, time: 1000 + n as i64, op };
                let ours = zk_txn(&txn, session, &wazoo).unwrap();
                let (code, back) = to_zk_txn(&ours, session, &wazoo).unwrap();
                prop_assert_eq!(code, header_op(&txn), "{:?} -> {:?}", txn, back);
                let hdr = TxnHeader { session_id: session, cxid: n as i32, zxid, time_ms: 1000 + n as i64 };
                if wazoo.apply(&hdr, &ours).is_err() {
                    // Not a txn a leader proposes (its prep would have
                    // refused the request): left out of every tree.
                    continue;
                }
                // In ZooKeeper's bytes, as a PROPOSAL or DIFF carries it.
                let entry = TxnEntry { header: header(code), txn: back.clone(), digest: None };
                let decoded = decode_entry(&encode_entry(&entry), 0).unwrap();
                prop_assert_eq!(&decoded, &entry);
                original.apply(&header(header_op(&txn)), &txn);
                round_trip.apply(&header(code), &back);
                prop_assert_eq!(original.digest(), round_trip.digest(), "after {:?} as {:?}", txn, back);
                prop_assert_eq!(&original.sessions, &round_trip.sessions);
                prop_assert_eq!(original.digest(), wazoo.digest(), "wazoo's tree after {:?}", txn);
            }
        }
    }

    // A txn with no ZooKeeper form is refused by name, never sent as
    // something else.
    #[test]
    fn wazoos_own_txns_have_no_zookeeper_form() {
        let tree = DataTree::new();
        for txn in [
            Txn::Noop,
            Txn::Undeploy {
                name: "lock".into(),
            },
            Txn::CreateSession {
                timeout_ms: 10_000,
                verifier: Some([1; 32]),
            },
        ] {
            let err = to_zk_txn(&txn, 1, &tree).unwrap_err();
            assert!(!err.0.is_empty(), "{txn:?}");
        }
        let other = Txn::Create(CreateTxn {
            path: "/e".into(),
            data: None,
            acl: Acl::open_unsafe(),
            ephemeral_owner: 2,
            parent_cversion: 1,
            kind: NodeKind::Regular,
        });
        assert!(to_zk_txn(&other, 1, &tree)
            .unwrap_err()
            .0
            .contains("owned by 0x2"));
    }
}
