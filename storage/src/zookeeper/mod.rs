//! Reading an Apache ZooKeeper (3.5 to 3.9) data directory: its snapshots
//! and transaction logs in the `version-2` format, for `wazoo import`.
//! The same encodings travel in ZooKeeper's quorum protocol (a txn in a
//! PROPOSAL or INFORM, the snapshot a leader streams after SNAP), so this
//! module also writes txns ([`encode_entry`]) and reads and writes that
//! snapshot stream ([`parse_sync_snapshot`]) for `wazoo-zkquorum`.
//!
//! [`load_data_dir`] does what a ZooKeeper server does when it starts on
//! that directory (`FileTxnSnapLog.restore`): it takes the newest snapshot
//! that is valid, replays the logged txns after it, and deletes the
//! ephemerals of sessions that are gone. The result is ZooKeeper's tree
//! ([`ZkTree`]: every node with its data, ACL and stored stat, the session
//! table, the last zxid), which the host turns into wazoo's own snapshot.
//!
//! Validity, as ZooKeeper judges it and a little stricter:
//! - a snapshot must pass its Adler-32 seals, and where it carries a digest
//!   (3.6+), the tree replayed to that digest's zxid must match it; a
//!   snapshot that fails is skipped for the next older one, as ZooKeeper
//!   skips it;
//! - a log entry must pass its Adler-32; what a crash leaves at the end of
//!   a file (a short entry, a missing end marker, zeros) ends that file as
//!   in ZooKeeper, with a warning; a complete entry that fails its checksum
//!   or does not decode is corruption, and the import is refused with the
//!   file and offset;
//! - every log entry's digest (3.6+) is compared with the replayed tree's,
//!   which checks this reader's replay against ZooKeeper's own;
//! - zxids must increase, without a gap inside an epoch (a gap means lost
//!   txns, which ZooKeeper would replay past silently).
//!
//! Everything here reads bytes from disk as untrusted input: lengths are
//! checked against the bytes left before anything is allocated, and no
//! input makes it panic. Compressed snapshots (`snapshot.*.gz`,
//! `.snappy`) are decompressed first, within a bound ([`compressed`]).

mod compressed;
mod jute;
mod snap;
mod tree;
mod txn;
mod txnlog;

use std::fs;
use std::path::{Path, PathBuf};

pub use snap::{
    encode_snapshot, encode_sync_snapshot, parse_snapshot, parse_sync_snapshot, SnapNode,
    SyncSnapshot, ZkSnapshot, ZxidDigest, SNAP_MAGIC, SYNC_SNAPSHOT_SIGNATURE,
};
pub use tree::{node_digest_of, owner_kind, OwnerKind, ZkNode, ZkTree, CONTAINER_OWNER};
pub use txn::{
    decode_entry, encode_entry, op, Create, CreateKind, TxnDigest, TxnEntry, TxnHeader, ZkTxn,
};
pub use txnlog::{parse_log, LogEnd, LogEntry, LogFile, LOG_MAGIC};

/// The digest version this reader computes (`DigestCalculator`'s
/// `DIGEST_VERSION`); digests of another version are not compared, as in
/// ZooKeeper.
pub const DIGEST_VERSION: i32 = 2;
/// How many snapshots are tried, newest first (ZooKeeper tries 100).
const MAX_SNAPSHOTS_TRIED: usize = 100;

/// `StatPersisted`: the stat fields ZooKeeper stores for a node. `cversion`
/// counts child creates; `ephemeralOwner` encodes containers and TTL nodes
/// (see [`owner_kind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StatPersisted {
    pub czxid: i64,
    pub mzxid: i64,
    pub ctime: i64,
    pub mtime: i64,
    pub version: i32,
    pub cversion: i32,
    pub aversion: i32,
    pub ephemeral_owner: i64,
    pub pzxid: i64,
}

/// One ACL entry as ZooKeeper stores it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ZkAcl {
    pub perms: i32,
    pub scheme: String,
    pub id: String,
}

/// Bytes that do not follow the format, at an offset of their file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} at offset {offset}")]
pub struct FormatError {
    pub offset: u64,
    pub what: String,
}

/// Why a ZooKeeper data directory cannot be imported.
#[derive(Debug, thiserror::Error)]
pub enum ZkImportError {
    #[error("cannot read {}: {source}", file.display())]
    Io {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {what} at offset {offset}", file.display())]
    Corrupt {
        file: PathBuf,
        offset: u64,
        what: String,
    },
    #[error("{0}")]
    Refused(String),
}

/// ZooKeeper's state, loaded, and how it was loaded.
#[derive(Debug)]
pub struct ZkLoaded {
    pub tree: ZkTree,
    /// The snapshot the state starts from, and its zxid.
    pub snapshot: PathBuf,
    pub snapshot_zxid: i64,
    /// Log entries replayed on top of the snapshot.
    pub replayed: u64,
    /// Digests that were compared and matched (the snapshot's and the log
    /// entries').
    pub digests_matched: u64,
    /// Sessions whose ephemerals were deleted because the session table
    /// no longer has them.
    pub dead_sessions: Vec<i64>,
    /// The `acceptedEpoch` and `currentEpoch` files of the data directory.
    pub accepted_epoch: Option<u32>,
    pub current_epoch: Option<u32>,
    /// What was tolerated: skipped snapshots, torn log tails.
    pub warnings: Vec<String>,
}

/// `dir/version-2` if it exists, else `dir` itself (given the version-2
/// directory directly).
pub fn version2_dir(dir: &Path) -> PathBuf {
    let v2 = dir.join("version-2");
    if v2.is_dir() {
        v2
    } else {
        dir.to_path_buf()
    }
}

/// `Util.getZxidFromName`: `prefix.<hex>[.suffix]`.
fn zxid_from_name(name: &str, prefix: &str) -> Option<(i64, Option<String>)> {
    let mut parts = name.split('.');
    if parts.next()? != prefix {
        return None;
    }
    // As `Long.parseLong(hex, 16)`: a name past i64's range is no txn
    // file's (not one wrapped to a negative zxid); nor is a signed one.
    let hex = parts.next()?;
    if hex.starts_with(['-', '+']) {
        return None;
    }
    let zxid = i64::from_str_radix(hex, 16).ok()?;
    let suffix = parts.next_back().map(str::to_string);
    Some((zxid, suffix))
}

/// (zxid, suffix, path) of the files named `prefix.<hex>...` in `dir`,
/// ordered by zxid.
fn list(dir: &Path, prefix: &str) -> Result<Vec<(i64, Option<String>, PathBuf)>, ZkImportError> {
    let io = |source| ZkImportError::Io {
        file: dir.to_path_buf(),
        source,
    };
    let mut out = Vec::new();
    for e in fs::read_dir(dir).map_err(io)? {
        let e = e.map_err(io)?;
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some((z, suffix)) = zxid_from_name(name, prefix) {
            out.push((z, suffix, e.path()));
        }
    }
    out.sort_by_key(|(z, _, _)| *z);
    Ok(out)
}

fn read(file: &Path) -> Result<Vec<u8>, ZkImportError> {
    fs::read(file).map_err(|source| ZkImportError::Io {
        file: file.to_path_buf(),
        source,
    })
}

fn read_epoch(dir: &Path, name: &str) -> Option<u32> {
    fs::read_to_string(dir.join(name)).ok()?.trim().parse().ok()
}

/// Why one snapshot cannot be used; the next older one is tried.
struct SnapshotUnusable(String);

/// Loads a ZooKeeper data directory (`dataDir`, or its `version-2`) and,
/// if the logs live elsewhere, its `dataLogDir`.
pub fn load_data_dir(data_dir: &Path, log_dir: Option<&Path>) -> Result<ZkLoaded, ZkImportError> {
    let snap_dir = version2_dir(data_dir);
    let log_dir = log_dir.map_or_else(|| snap_dir.clone(), version2_dir);
    let snapshots = list(&snap_dir, "snapshot")?;
    let logs: Vec<(i64, PathBuf)> = list(&log_dir, "log")?
        .into_iter()
        .filter(|(_, suffix, _)| suffix.is_none())
        .map(|(z, _, p)| (z, p))
        .collect();
    if snapshots.is_empty() {
        return Err(ZkImportError::Refused(format!(
            "{} holds no ZooKeeper snapshot (snapshot.<zxid>); ZooKeeper writes one when it starts, so this is not a ZooKeeper data directory{}",
            snap_dir.display(),
            if logs.is_empty() { "" } else { ", or its snapshots were removed" }
        )));
    }
    let mut warnings = Vec::new();
    for (zxid, suffix, path) in snapshots.into_iter().rev().take(MAX_SNAPSHOTS_TRIED) {
        let mut bytes = read(&path)?;
        if let Some(s) = suffix {
            match compressed::decompress(&s, &bytes) {
                Ok(b) => bytes = b,
                Err(e) => {
                    warnings.push(format!("skipped snapshot {}: {e}", path.display()));
                    continue;
                }
            }
        }
        let snap = match parse_snapshot(&bytes) {
            Ok(s) => s,
            Err(e) => {
                warnings.push(format!("skipped invalid snapshot {}: {e}", path.display()));
                continue;
            }
        };
        drop(bytes);
        match replay(&snap, zxid, &logs, &mut warnings)? {
            Ok((mut tree, replayed, digests_matched)) => {
                let dead_sessions = tree.kill_dead_sessions();
                return Ok(ZkLoaded {
                    tree,
                    snapshot: path,
                    snapshot_zxid: zxid,
                    replayed,
                    digests_matched,
                    dead_sessions,
                    accepted_epoch: read_epoch(&snap_dir, "acceptedEpoch"),
                    current_epoch: read_epoch(&snap_dir, "currentEpoch"),
                    warnings,
                });
            }
            Err(SnapshotUnusable(why)) => {
                warnings.push(format!("skipped snapshot {}: {why}", path.display()));
            }
        }
    }
    Err(ZkImportError::Refused(format!(
        "no usable snapshot in {}:\n  {}",
        snap_dir.display(),
        warnings.join("\n  ")
    )))
}

/// Replays the logs after snapshot `snap` (named `snap_zxid`). The outer
/// error refuses the import (a corrupt log); the inner one only this
/// snapshot.
#[allow(clippy::type_complexity)]
fn replay(
    snap: &ZkSnapshot,
    snap_zxid: i64,
    logs: &[(i64, PathBuf)],
    warnings: &mut Vec<String>,
) -> Result<Result<(ZkTree, u64, u64), SnapshotUnusable>, ZkImportError> {
    let mut tree = match ZkTree::from_snapshot(snap, snap_zxid) {
        Ok(t) => t,
        Err(e) => return Ok(Err(SnapshotUnusable(e))),
    };
    let mut matched = 0u64;
    // The snapshot's digest is checked when replay reaches its zxid; until
    // then the tree is fuzzy and the entries' digests are not compared.
    let mut pending = snap
        .digest
        .filter(|d| d.zxid > 0 && d.zxid >= snap_zxid && d.version == DIGEST_VERSION);
    if let Some(d) = pending.filter(|d| d.zxid == snap_zxid) {
        if tree.digest() != d.digest {
            return Ok(Err(SnapshotUnusable(format!(
                "its tree does not match its digest ({:#x}, computed {:#x})",
                d.digest,
                tree.digest()
            ))));
        }
        matched += 1;
        pending = None;
    }
    // FileTxnLog.getLogFiles: the newest log starting at or before the
    // snapshot, and every later one.
    let start = logs.iter().rposition(|(z, _)| *z <= snap_zxid).unwrap_or(0);
    let mut last = snap_zxid;
    let mut replayed = 0u64;
    let n_logs = logs.len();
    for (i, (_, file)) in logs.iter().enumerate().skip(start) {
        let bytes = read(file)?;
        let parsed = parse_log(&bytes).map_err(|e| ZkImportError::Corrupt {
            file: file.clone(),
            offset: e.offset,
            what: e.what,
        })?;
        drop(bytes);
        if let LogEnd::Torn {
            offset,
            reason,
            trailing_nonzero,
        } = &parsed.end
        {
            warnings.push(format!(
                "{}: the log ends at offset {offset} ({reason}{}), as a crash during a write leaves it; {}",
                file.display(),
                if *trailing_nonzero > 0 {
                    format!("; {trailing_nonzero} non-zero bytes after it ignored")
                } else {
                    String::new()
                },
                if i + 1 == n_logs {
                    "the txns after it were never acknowledged"
                } else {
                    "reading goes on with the next log file, as ZooKeeper does"
                }
            ));
        }
        for LogEntry { offset, entry } in parsed.entries {
            let z = entry.header.zxid;
            if z <= snap_zxid {
                continue;
            }
            let corrupt = |what: String| ZkImportError::Corrupt {
                file: file.clone(),
                offset,
                what,
            };
            if z <= last {
                return Err(corrupt(format!(
                    "txn 0x{z:x} comes after 0x{last:x}: the log is out of order"
                )));
            }
            if z >> 32 == last >> 32 && z != last + 1 {
                return Err(corrupt(format!(
                    "txn 0x{z:x} follows 0x{last:x}: the txns between them are missing"
                )));
            }
            tree.apply(&entry.header, &entry.txn);
            last = z;
            replayed += 1;
            if let Some(d) = pending {
                if z == d.zxid {
                    if tree.digest() != d.digest {
                        return Ok(Err(SnapshotUnusable(format!(
                            "replayed to 0x{z:x}, its tree does not match its digest ({:#x}, computed {:#x})",
                            d.digest,
                            tree.digest()
                        ))));
                    }
                    matched += 1;
                    pending = None;
                }
                continue;
            }
            if let Some(d) = entry.digest.filter(|d| d.version == DIGEST_VERSION) {
                if tree.digest() != d.tree_digest {
                    return Ok(Err(SnapshotUnusable(format!(
                        "after txn 0x{z:x} ({} at offset {offset}) the tree does not match the digest ZooKeeper logged ({:#x}, computed {:#x})",
                        file.display(),
                        d.tree_digest,
                        tree.digest()
                    ))));
                }
                matched += 1;
            }
        }
    }
    if let Some(d) = pending {
        return Ok(Err(SnapshotUnusable(format!(
            "its digest is as of txn 0x{:x}, which the logs do not reach (they end at 0x{last:x})",
            d.zxid
        ))));
    }
    Ok(Ok((tree, replayed, matched)))
}

#[cfg(test)]
mod tests;
