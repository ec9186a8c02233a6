//! `wazoo import` (an Apache ZooKeeper data directory in) and `wazoo
//! restore` (a backup in): both end in a fresh member data directory that
//! holds one wazoo snapshot and an empty log, which `wazoo serve` loads as
//! it loads its own (docs/MIGRATION.md).
//!
//! Reading ZooKeeper's files and replaying them as ZooKeeper does is
//! `wazoo_storage::zookeeper`; here its tree becomes wazoo's
//! ([`DataTree::from_nodes`]), and the snapshot goes through the same
//! writer as the member's own snapshots ([`write_snapshot_payload`]).

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};

use crate::config::Config;
use crate::core::member::LoadedSnapshot;
use crate::core::recipe::RecipeWaits;
use crate::core::server::SnapshotJob;
use crate::core::tree::{DataTree, NodeSpec, ZnodeType};
use crate::member::{log_dir, read_snapshot_payload, snap_dir, write_snapshot_payload};
use wazoo_proto::{SessionRecord, Zxid};
use wazoo_storage::zookeeper::{self, OwnerKind, ZkLoaded, ZkTree};

/// Refuses to write into a member whose wazoo directories hold anything:
/// an import or restore must never mix with (or overwrite) existing state.
pub fn ensure_empty(cfg: &Config) -> Result<()> {
    for dir in [snap_dir(cfg), log_dir(cfg)] {
        match std::fs::read_dir(&dir) {
            Ok(mut entries) => {
                if entries.next().is_some() {
                    bail!(
                        "{} is not empty: refusing to overwrite a wazoo data directory (move it aside first)",
                        dir.display()
                    );
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", dir.display())),
        }
    }
    Ok(())
}

/// Where an installed state went.
#[derive(Debug)]
pub struct Installed {
    pub snapshot: PathBuf,
    pub zxid: Zxid,
    pub nodes: usize,
    pub sessions: usize,
    pub epoch: u32,
}

/// Writes `tree` as of `zxid` as the member's only snapshot, creates its
/// empty log directory, and sets the consensus epochs (`acceptedEpoch`,
/// `currentEpoch`) to at least the zxid's epoch, so that an ensemble member
/// starts from the history it holds. The snapshot is read back and checked
/// before this returns.
pub fn install(
    cfg: &Config,
    zxid: Zxid,
    tree: DataTree,
    sessions: Vec<SessionRecord>,
    waits: RecipeWaits,
    min_epoch: u32,
) -> Result<Installed> {
    ensure_empty(cfg)?;
    let sdir = snap_dir(cfg);
    let ldir = log_dir(cfg);
    std::fs::create_dir_all(&ldir).with_context(|| format!("cannot create {}", ldir.display()))?;
    let nodes = tree.node_count();
    let n_sessions = sessions.len();
    let job = SnapshotJob {
        zxid,
        tree: tree.snapshot(),
        waits,
        sessions,
    };
    let path = wazoo_storage::write_snapshot(&sdir, zxid, |w| write_snapshot_payload(&job, w))
        .with_context(|| format!("cannot write a snapshot into {}", sdir.display()))?;
    let epoch = zxid.epoch().max(min_epoch);
    for name in ["acceptedEpoch", "currentEpoch"] {
        crate::driver::write_epoch(&sdir, name, epoch)
            .with_context(|| format!("cannot write {}/{name}", sdir.display()))?;
    }
    let back = wazoo_storage::read_snapshot(&path)?;
    let LoadedSnapshot {
        zxid: z,
        sessions: s,
        tree: t,
        ..
    } = read_snapshot_payload(&back).with_context(|| {
        format!(
            "the snapshot just written ({}) does not load",
            path.display()
        )
    })?;
    if z != zxid || s.len() != n_sessions || t.node_count() != nodes {
        bail!(
            "the snapshot just written ({}) reads back differently",
            path.display()
        );
    }
    Ok(Installed {
        snapshot: path,
        zxid,
        nodes,
        sessions: n_sessions,
        epoch,
    })
}

/// ZooKeeper's tree as wazoo's: every stored field as it is (the stored
/// cversion included, so sequence numbers go on where they were), ACL
/// lists, and the node kinds that ZooKeeper encodes in ephemeralOwner.
pub fn convert(zk: &ZkTree) -> Result<DataTree> {
    let mut specs = Vec::with_capacity(zk.nodes.len());
    for (path, n) in &zk.nodes {
        let kind = match zookeeper::owner_kind(n.stat.ephemeral_owner) {
            OwnerKind::Persistent => ZnodeType::Persistent,
            OwnerKind::Ephemeral(owner) => ZnodeType::Ephemeral { owner },
            OwnerKind::Container => ZnodeType::Container,
            OwnerKind::Ttl(ttl_ms) => ZnodeType::Ttl { ttl_ms },
            OwnerKind::Unknown => bail!(
                "{path}: ephemeralOwner {:#x} is an extended node type wazoo does not know",
                n.stat.ephemeral_owner
            ),
        };
        specs.push(NodeSpec {
            path: path.clone(),
            kind,
            czxid: n.stat.czxid,
            mzxid: n.stat.mzxid,
            pzxid: n.stat.pzxid,
            ctime: n.stat.ctime,
            mtime: n.stat.mtime,
            version: n.stat.version,
            stored_cversion: n.stat.cversion,
            aversion: n.stat.aversion,
            acl: n.acl.iter().map(crate::core::member::zk_acl).collect(),
            data: n.data.clone(),
        });
    }
    let tree = DataTree::from_nodes(specs)
        .map_err(|e| anyhow!("ZooKeeper's tree does not fit wazoo's: {e}"))?;
    // Every stored field carried over: the digests agree.
    if tree.digest() != zk.digest() {
        bail!(
            "the converted tree's digest {} differs from ZooKeeper's {}: a stat field was not carried over",
            tree.digest(),
            zk.digest()
        );
    }
    Ok(tree)
}

/// wazoo's tree and sessions as a ZooKeeper snapshot at `zxid`: the inverse
/// of [`convert`] and [`sessions_of`]. Every stored field as it is, the
/// node kinds encoded in ephemeralOwner as ZooKeeper encodes them, each
/// distinct ACL list once in the ACL map (ids from 1, as ZooKeeper's
/// reference-counted cache numbers them), nodes parent first, and the
/// tree's digest. The converted tree is read back as ZooKeeper would read
/// it, and its digest must be wazoo's: no stat field may be lost.
pub fn to_zookeeper(
    tree: &DataTree,
    sessions: &[SessionRecord],
    zxid: Zxid,
) -> Result<zookeeper::ZkSnapshot> {
    let mut acls: std::collections::BTreeMap<i64, Vec<zookeeper::ZkAcl>> = Default::default();
    let mut acl_ids: std::collections::HashMap<Vec<zookeeper::ZkAcl>, i64> = Default::default();
    let mut nodes = Vec::with_capacity(tree.node_count());
    let mut stack = vec!["/".to_string()];
    while let Some(path) = stack.pop() {
        let n = tree
            .node(&path)
            .ok_or_else(|| anyhow!("{path} is listed as a child but is not in the tree"))?;
        let list: Vec<zookeeper::ZkAcl> =
            n.acl.iter().map(crate::core::member::to_zk_acl).collect();
        let next = acl_ids.len() as i64 + 1;
        let acl = *acl_ids.entry(list.clone()).or_insert_with(|| {
            acls.insert(next, list);
            next
        });
        let st = &n.stat;
        nodes.push(zookeeper::SnapNode {
            path: if path == "/" {
                String::new()
            } else {
                path.clone()
            },
            data: n.nullable_data().map(<[u8]>::to_vec),
            acl,
            stat: zookeeper::StatPersisted {
                czxid: st.czxid,
                mzxid: st.mzxid,
                ctime: st.ctime,
                mtime: st.mtime,
                version: st.version,
                cversion: n.stored_cversion,
                aversion: st.aversion,
                ephemeral_owner: n.kind.persisted_ephemeral_owner(),
                pzxid: st.pzxid,
            },
        });
        let mut children = tree.children(&path).unwrap_or_default();
        // Popped in name order: the file reads in a stable order.
        children.sort_unstable_by(|a, b| b.cmp(a));
        let prefix = if path == "/" { "" } else { path.as_str() };
        stack.extend(children.into_iter().map(|c| format!("{prefix}/{c}")));
    }
    let mut snap = zookeeper::ZkSnapshot {
        // What ZooKeeper's FileSnap writes.
        dbid: -1,
        sessions: sessions.iter().map(|s| (s.id, s.timeout_ms)).collect(),
        acls,
        nodes,
        digest: None,
        last_processed_zxid: None,
    };
    let back = ZkTree::from_snapshot(&snap, zxid.to_wire())
        .map_err(|e| anyhow!("the tree does not read back as ZooKeeper's: {e}"))?;
    if back.digest() != tree.digest() {
        bail!(
            "the converted tree's digest {} differs from wazoo's {}: a stat field was not carried over",
            back.digest(),
            tree.digest()
        );
    }
    snap.digest = Some(zookeeper::ZxidDigest {
        zxid: zxid.to_wire(),
        // DigestCalculator.DIGEST_VERSION, what ZooKeeper 3.6.3 to 3.9 write.
        version: 2,
        digest: tree.digest(),
    });
    Ok(snap)
}

/// ZooKeeper's sessions, with its passwords, computed from their ids: no
/// verifier, so their clients re-attach with the passwords they hold.
pub fn sessions_of(zk: &ZkTree) -> Vec<SessionRecord> {
    zk.sessions
        .iter()
        .map(|(&id, &timeout_ms)| SessionRecord {
            id,
            timeout_ms,
            verifier: None,
        })
        .collect()
}

/// What `wazoo import` did.
#[derive(Debug)]
pub struct ImportReport {
    pub loaded: ZkLoaded,
    pub installed: Installed,
}

/// Imports ZooKeeper's data directory (and log directory) into the member
/// `cfg` configures.
pub fn import(cfg: &Config, zk_data: &Path, zk_log: Option<&Path>) -> Result<ImportReport> {
    // Checked first, and again when writing: a long read must not end in
    // a refusal that was known at the start.
    ensure_empty(cfg)?;
    let loaded = zookeeper::load_data_dir(zk_data, zk_log)?;
    let tree = convert(&loaded.tree)?;
    let sessions = sessions_of(&loaded.tree);
    let min_epoch = loaded
        .accepted_epoch
        .unwrap_or(0)
        .max(loaded.current_epoch.unwrap_or(0));
    let installed = install(
        cfg,
        Zxid::from_wire(loaded.tree.zxid),
        tree,
        sessions,
        RecipeWaits::default(),
        min_epoch,
    )?;
    Ok(ImportReport { loaded, installed })
}

/// `wazoo import`: imports and prints what it did.
pub fn run_import(config: &Path, zk_data: &Path, zk_log: Option<&Path>) -> Result<()> {
    let cfg = Config::load(config)?;
    let r = import(&cfg, zk_data, zk_log)?;
    for w in &r.loaded.warnings {
        eprintln!("warning: {w}");
    }
    if !r.loaded.dead_sessions.is_empty() {
        eprintln!(
            "note: deleted the ephemerals of {} session(s) that had ended, as ZooKeeper does on start",
            r.loaded.dead_sessions.len()
        );
    }
    println!(
        "imported {} (zxid 0x{:x}) plus {} logged txn(s): {} znodes, {} session(s), last zxid 0x{:x}; {} digest(s) checked",
        r.loaded.snapshot.display(),
        r.loaded.snapshot_zxid,
        r.loaded.replayed,
        r.installed.nodes,
        r.installed.sessions,
        r.installed.zxid,
        r.loaded.digests_matched,
    );
    println!(
        "wrote {} (epoch {}); start the member with: wazoo serve --config {}",
        r.installed.snapshot.display(),
        r.installed.epoch,
        config.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use wazoo_proto::{Acl, Id};

    fn spec(path: &str, kind: ZnodeType, acl: Vec<Acl>, data: Option<&[u8]>, z: i64) -> NodeSpec {
        NodeSpec {
            path: path.into(),
            kind,
            czxid: z,
            mzxid: z + 1,
            pzxid: z + 2,
            ctime: 1_700_000_000_000 + z,
            mtime: 1_700_000_000_500 + z,
            version: z as i32 % 7,
            stored_cversion: z as i32 % 5,
            aversion: z as i32 % 3,
            acl,
            data: data.map(<[u8]>::to_vec),
        }
    }

    // ZooKeeper Administrator's Guide, "The Data Directory", and
    // Programmer's Guide, "Data Model": a wazoo tree written as ZooKeeper's
    // snapshot and read back as an import reads ZooKeeper's is the same
    // tree: every stored field, null data apart from empty, the node kinds
    // ephemeralOwner encodes, each ACL list once, and the sessions.
    #[test]
    fn a_tree_written_as_zookeepers_snapshot_reads_back_the_same() {
        let open = Acl::open_unsafe();
        let digest = vec![Acl {
            perms: 31,
            id: Id::new("digest", "alice:abc="),
        }];
        let session = 0x100_0000_0000_0001;
        let tree = DataTree::from_nodes(vec![
            spec("/", ZnodeType::Persistent, open.clone(), Some(b""), 0),
            spec(
                "/zookeeper",
                ZnodeType::Persistent,
                open.clone(),
                Some(b""),
                0,
            ),
            spec(
                "/zookeeper/quota",
                ZnodeType::Persistent,
                open.clone(),
                Some(b""),
                0,
            ),
            spec("/a", ZnodeType::Persistent, digest.clone(), None, 3),
            spec("/a/b", ZnodeType::Persistent, digest.clone(), Some(b""), 4),
            spec(
                "/a/b/c",
                ZnodeType::Ephemeral { owner: session },
                open.clone(),
                Some(b"x"),
                5,
            ),
            spec(
                "/box",
                ZnodeType::Container,
                open.clone(),
                Some(&[0, 255]),
                6,
            ),
            spec(
                "/t",
                ZnodeType::Ttl { ttl_ms: 3_600_000 },
                open.clone(),
                Some(b"t"),
                7,
            ),
        ])
        .unwrap();
        let sessions = vec![SessionRecord {
            id: session,
            timeout_ms: 30_000,
            verifier: Some([7; wazoo_proto::VERIFIER_LEN]),
        }];
        let zxid = Zxid::new(3, 9);
        let snap = to_zookeeper(&tree, &sessions, zxid).unwrap();
        assert_eq!(
            snap.acls.len(),
            2,
            "each distinct ACL list once: {:?}",
            snap.acls
        );
        assert_eq!(
            snap.nodes[0].path, "",
            "the root first, as ZooKeeper names it"
        );
        assert_eq!(snap.sessions, vec![(session, 30_000)]);
        let d = snap.digest.expect("a digest");
        assert_eq!(
            (d.zxid, d.version, d.digest),
            (zxid.to_wire(), 2, tree.digest())
        );

        let parsed = zookeeper::parse_snapshot(&zookeeper::encode_snapshot(&snap)).unwrap();
        let zk = ZkTree::from_snapshot(&parsed, zxid.to_wire()).unwrap();
        let back = convert(&zk).unwrap();
        assert_eq!(back.node_count(), tree.node_count());
        for path in [
            "/",
            "/zookeeper",
            "/zookeeper/quota",
            "/a",
            "/a/b",
            "/a/b/c",
            "/box",
            "/t",
        ] {
            let (w, b) = (tree.node(path).unwrap(), back.node(path).unwrap());
            assert_eq!(w.stat, b.stat, "{path}: stat");
            assert_eq!(
                w.stored_cversion, b.stored_cversion,
                "{path}: stored cversion"
            );
            assert_eq!((w.kind, &w.acl), (b.kind, &b.acl), "{path}: kind and ACL");
            assert_eq!(w.nullable_data(), b.nullable_data(), "{path}: data");
        }
        assert_eq!(back.digest(), tree.digest());
        assert_eq!(back.node("/a").unwrap().nullable_data(), None);
        assert_eq!(back.node("/a/b").unwrap().nullable_data(), Some(&b""[..]));
        let ids: Vec<i64> = sessions_of(&zk).iter().map(|s| s.id).collect();
        assert_eq!(ids, vec![session]);
    }
}
