//! Purging old snapshots and the log segments only they needed (ZooKeeper's
//! `autopurge` / `PurgeTxnLog`).
//!
//! Recovery needs one valid snapshot `S` plus every record after `S`. Purge
//! keeps the newest `keep_count` *valid* snapshots (invalid ones do not count,
//! so bit rot never leaves fewer good snapshots than asked for) and, for the
//! oldest kept one `S`, the segment that may hold the records right after `S`
//! (the newest segment starting at or before `S`) and every later segment.
//! Everything older is deleted. If fewer than `keep_count` valid snapshots
//! exist, nothing is deleted.
//!
//! Purge is safe to run while a [`crate::TxnLog`] or [`crate::GroupCommitLog`]
//! appends (it never deletes the newest segment) and while a snapshot is being
//! written (it deletes only `.tmp` files older than the oldest kept snapshot).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::error::{IoContext, Result, StorageError};
use crate::fsutil::{fsync_dir, parse_zxid_file_name};
use crate::recovery::list_segments;
use crate::snapshot::{is_skippable, list_snapshots, verify_snapshot, SNAPSHOT_PREFIX, TMP_SUFFIX};
use crate::Zxid;

/// The smallest `keep_count` [`purge`] accepts, as ZooKeeper's
/// `autopurge.snapRetainCount`.
pub const MIN_SNAP_RETAIN_COUNT: usize = 3;

/// What [`purge`] deleted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PurgeReport {
    /// Zxid of the oldest snapshot kept, if enough valid snapshots existed to purge.
    pub oldest_kept_snapshot: Option<Zxid>,
    /// Snapshot files deleted (valid or not), including stale `.tmp` leftovers.
    pub removed_snapshots: Vec<PathBuf>,
    /// Log segments deleted.
    pub removed_segments: Vec<PathBuf>,
}

/// Keeps the newest `keep_count` valid snapshots in `snap_dir` and the log
/// segments in `log_dir` needed to replay from the oldest of them; deletes the
/// rest. The two directories may be the same.
///
/// Fails with [`StorageError::RetainCountTooSmall`] if `keep_count` is below
/// [`MIN_SNAP_RETAIN_COUNT`].
pub fn purge(
    snap_dir: impl AsRef<Path>,
    log_dir: impl AsRef<Path>,
    keep_count: usize,
) -> Result<PurgeReport> {
    let (snap_dir, log_dir) = (snap_dir.as_ref(), log_dir.as_ref());
    if keep_count < MIN_SNAP_RETAIN_COUNT {
        return Err(StorageError::RetainCountTooSmall {
            given: keep_count,
            min: MIN_SNAP_RETAIN_COUNT,
        });
    }
    let mut report = PurgeReport::default();
    let Some(oldest_kept) = oldest_kept_snapshot(snap_dir, keep_count)? else {
        tracing::info!(
            keep_count,
            "fewer valid snapshots than the retain count; purging nothing"
        );
        return Ok(report);
    };
    report.oldest_kept_snapshot = Some(oldest_kept);
    report.removed_snapshots = remove_snapshots_before(snap_dir, oldest_kept)?;
    report.removed_segments = remove_segments_before(log_dir, oldest_kept)?;
    tracing::info!(
        oldest_kept = %oldest_kept,
        snapshots = report.removed_snapshots.len(),
        segments = report.removed_segments.len(),
        "purged old snapshots and log segments"
    );
    Ok(report)
}

/// Zxid of the `keep_count`-th newest valid snapshot, if there are that many.
fn oldest_kept_snapshot(snap_dir: &Path, keep_count: usize) -> Result<Option<Zxid>> {
    let mut valid = 0;
    for (zxid, path) in list_snapshots(snap_dir)?.into_iter().rev() {
        match verify_snapshot(&path) {
            Ok(_) => valid += 1,
            Err(error) if is_skippable(&error) => {
                tracing::warn!(file = %path.display(), %error, "invalid snapshot does not count towards the retain count");
            }
            Err(error) => return Err(error),
        }
        if valid == keep_count {
            return Ok(Some(zxid));
        }
    }
    Ok(None)
}

/// Deletes snapshots (and `.tmp` leftovers) with a zxid below `oldest_kept`.
fn remove_snapshots_before(snap_dir: &Path, oldest_kept: Zxid) -> Result<Vec<PathBuf>> {
    let mut doomed: Vec<PathBuf> = list_snapshots(snap_dir)?
        .into_iter()
        .filter(|(zxid, _)| *zxid < oldest_kept)
        .map(|(_, path)| path)
        .collect();
    doomed.extend(stale_tmp_files(snap_dir, oldest_kept.0)?);
    remove_all(snap_dir, doomed)
}

/// `snapshot.<zxid>.tmp` files with a zxid below `oldest_kept`: leftovers of
/// a crash, since a snapshot being written now has a newer zxid.
fn stale_tmp_files(snap_dir: &Path, oldest_kept: u64) -> Result<Vec<PathBuf>> {
    let mut stale = Vec::new();
    for entry in fs::read_dir(snap_dir).at(snap_dir)? {
        let entry = entry.at(snap_dir)?;
        let name = entry.file_name();
        let zxid = name
            .to_str()
            .and_then(|n| n.strip_suffix(TMP_SUFFIX))
            .and_then(|n| parse_zxid_file_name(n, SNAPSHOT_PREFIX));
        if zxid.is_some_and(|z| z < oldest_kept) {
            stale.push(entry.path());
        }
    }
    Ok(stale)
}

/// Deletes the segments older than the newest one starting at or before
/// `snapshot_zxid`.
fn remove_segments_before(log_dir: &Path, snapshot_zxid: Zxid) -> Result<Vec<PathBuf>> {
    let snapshot_zxid = snapshot_zxid.0;
    let segments = list_segments(log_dir)?;
    let needed_from = segments
        .iter()
        .rposition(|s| s.zxid <= snapshot_zxid)
        .unwrap_or(0);
    let doomed = segments[..needed_from]
        .iter()
        .map(|s| s.path.clone())
        .collect();
    remove_all(log_dir, doomed)
}

/// Deletes `paths` (already-missing ones are fine) and fsyncs `dir`.
fn remove_all(dir: &Path, paths: Vec<PathBuf>) -> Result<Vec<PathBuf>> {
    for path in &paths {
        match fs::remove_file(path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e).at(path),
            _ => {}
        }
    }
    if !paths.is_empty() {
        fsync_dir(dir)?;
    }
    Ok(paths)
}
