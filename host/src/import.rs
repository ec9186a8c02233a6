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
