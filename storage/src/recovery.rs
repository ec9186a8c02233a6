//! Opening a log directory: list the segments, validate every record, repair
//! a crash-torn tail of the last segment, refuse anything else.
//!
//! The rule that separates a crash from corruption: the writer fsyncs a
//! segment completely before it creates the next one, and creates a segment
//! with its header already fsynced. So after a crash only the *last* segment
//! can end in a partial write, and only at its *end*. A bad frame is a torn
//! tail when it is in the last segment and no valid record (CRC-correct, zxid
//! above the last good one) starts anywhere after it; then the file is cut
//! back to the last good record. A bad frame anywhere else would lose records
//! that were there, so it is reported as [`StorageError::Corrupt`].

use std::fs::{self, OpenOptions};
use std::io::{BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::error::{CorruptReason, IoContext, Result, StorageError};
use crate::fsutil::{fsync_dir, list_zxid_files, ZxidFile};
use crate::segment::{
    open_segment, valid_record_follows, Frame, HeaderProblem, HeaderState, OpenSegment,
    RecordReader, FILE_HEADER_LEN, SEGMENT_PREFIX,
};

/// What [`crate::TxnLog::open`] found and repaired.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovered {
    /// Zxid of the oldest record in the log, if any.
    pub first_zxid: Option<u64>,
    /// Zxid of the newest record in the log, 0 if the log is empty.
    pub last_zxid: u64,
    /// Number of valid records.
    pub records: u64,
    /// Number of segment files holding them.
    pub segments: usize,
    /// Repairs of a crash-torn tail (each also logged with `tracing::warn!`).
    pub repairs: Vec<Repair>,
}

/// A repair recovery made to the end of the log after a crash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Repair {
    /// The last segment was cut back to `offset`, dropping a partial write.
    TruncatedTail {
        /// The segment.
        file: PathBuf,
        /// New length of the file: the end of its last valid record.
        offset: u64,
        /// Bytes removed.
        dropped_bytes: u64,
        /// What was found at `offset`.
        cause: TailDefect,
    },
    /// The last segment held no complete record (a crash while it was being
    /// created or before its first record reached the disk) and was deleted.
    RemovedEmptySegment {
        /// The deleted file.
        file: PathBuf,
    },
}

/// What ended the log at a repaired tail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TailDefect {
    /// Zero bytes up to the end of the file.
    ZeroFill,
    /// A partial or checksum-failing record.
    Torn(CorruptReason),
}

/// The validated state of a log directory.
pub(crate) struct RecoveredLog {
    pub(crate) segments: Vec<ZxidFile>,
    pub(crate) report: Recovered,
    /// Fsyncs issued while repairing and making the recovered log durable.
    pub(crate) fsyncs: u64,
}

/// Lists the segment files of `dir` in zxid order, rejecting two files that
/// name the same zxid.
pub(crate) fn list_segments(dir: &Path) -> Result<Vec<ZxidFile>> {
    let segments = list_zxid_files(dir, SEGMENT_PREFIX, |path| {
        tracing::warn!(file = %path.display(), "ignoring file that is not named log.<hex zxid>");
    })?;
    for pair in segments.windows(2) {
        if pair[0].zxid == pair[1].zxid {
            return Err(StorageError::DuplicateSegment {
                zxid: pair[0].zxid,
                first: pair[0].path.clone(),
                second: pair[1].path.clone(),
            });
        }
    }
    Ok(segments)
}

/// Validates every segment of `dir`, repairs a torn tail of the last one and
/// fsyncs what remains of the last segment (records read back from the page
/// cache after a process crash may not have reached the disk yet; the next
/// segment must not exist before they have).
pub(crate) fn recover(dir: &Path) -> Result<RecoveredLog> {
    let files = list_segments(dir)?;
    let count = files.len();
    let mut log = RecoveredLog {
        segments: Vec::with_capacity(count),
        report: Recovered::default(),
        fsyncs: 0,
    };
    let mut prev_zxid = 0;
    for (i, file) in files.into_iter().enumerate() {
        let is_last = i + 1 == count;
        let scan = scan_segment(&file, is_last, prev_zxid)?;
        if let Some(tail) = scan.torn_tail {
            log.report.repairs.push(cut_tail(&file.path, tail)?);
            log.fsyncs += 1;
        }
        if scan.records == 0 {
            log.report.repairs.push(remove_empty(&file.path)?);
            continue;
        }
        prev_zxid = scan.last_zxid;
        log.report.records += scan.records;
        log.segments.push(file);
    }
    if !log.report.repairs.is_empty() {
        fsync_dir(dir)?;
        log.fsyncs += 1;
    }
    if let Some(last) = log.segments.last() {
        fsync_file(&last.path)?;
        log.fsyncs += 1;
    }
    log.report.first_zxid = log.segments.first().map(|s| s.zxid);
    log.report.last_zxid = prev_zxid;
    log.report.segments = log.segments.len();
    Ok(log)
}

/// Result of validating one segment.
struct SegmentScan {
    records: u64,
    last_zxid: u64,
    /// Set when the segment (the last one) ends in a partial write to cut off.
    torn_tail: Option<TornTail>,
}

struct TornTail {
    offset: u64,
    file_len: u64,
    cause: TailDefect,
}

/// Validates one segment. `prev_zxid` is the zxid of the last record of the
/// previous segment (0 for the first).
fn scan_segment(file: &ZxidFile, is_last: bool, prev_zxid: u64) -> Result<SegmentScan> {
    let path = &file.path;
    let OpenSegment {
        file: mut handle,
        len,
        header,
    } = open_segment(path)?;
    match header {
        HeaderState::Valid => {}
        HeaderState::Invalid(HeaderProblem::TornCreation { .. }) if is_last => {
            // Created but its header never reached the disk: no record in it.
            return Ok(SegmentScan {
                records: 0,
                last_zxid: prev_zxid,
                torn_tail: None,
            });
        }
        HeaderState::Invalid(problem) => return Err(problem.into_error(path)),
    }
    handle.seek(SeekFrom::Start(FILE_HEADER_LEN)).at(path)?;
    let mut reader = RecordReader::new(BufReader::new(handle), FILE_HEADER_LEN, len);
    let mut scan = SegmentScan {
        records: 0,
        last_zxid: prev_zxid,
        torn_tail: None,
    };
    let end = loop {
        match reader.next_frame().at(path)? {
            Frame::Record { offset, zxid } => {
                check_order(file, scan.records, scan.last_zxid, offset, zxid)?;
                scan.last_zxid = zxid;
                scan.records += 1;
            }
            other => break other,
        }
    };
    let torn_at = |offset, cause| TornTail {
        offset,
        file_len: len,
        cause,
    };
    match end {
        Frame::Record { .. } | Frame::End => {}
        Frame::ZeroFill { offset } => {
            // Zeros to the end of the file are the end of the log. In the last
            // segment they are cut off so that the file ends at its last record.
            if is_last {
                scan.torn_tail = Some(torn_at(offset, TailDefect::ZeroFill));
            }
        }
        Frame::Bad { offset, reason } => {
            let mut inner = reader.into_inner();
            let tail =
                is_last && !valid_record_follows(&mut inner, offset, scan.last_zxid).at(path)?;
            if !tail {
                return Err(corrupt(path, offset, reason));
            }
            scan.torn_tail = Some(torn_at(offset, TailDefect::Torn(reason)));
        }
    }
    if scan.records == 0 && !is_last {
        return Err(corrupt(path, FILE_HEADER_LEN, CorruptReason::EmptySegment));
    }
    Ok(scan)
}

/// Checks that the `index`-th valid record of `file` is in order.
fn check_order(file: &ZxidFile, index: u64, prev: u64, offset: u64, zxid: u64) -> Result<()> {
    if index == 0 && zxid != file.zxid {
        let reason = CorruptReason::FirstZxidMismatch {
            named: file.zxid,
            found: zxid,
        };
        return Err(corrupt(&file.path, offset, reason));
    }
    if zxid <= prev {
        let reason = CorruptReason::ZxidNotIncreasing {
            previous: prev,
            found: zxid,
        };
        return Err(corrupt(&file.path, offset, reason));
    }
    Ok(())
}

pub(crate) fn corrupt(path: &Path, offset: u64, reason: CorruptReason) -> StorageError {
    StorageError::Corrupt {
        file: path.to_path_buf(),
        offset,
        reason,
    }
}

/// Cuts the last segment back to the end of its last valid record, durably.
fn cut_tail(path: &Path, tail: TornTail) -> Result<Repair> {
    let dropped_bytes = tail.file_len.saturating_sub(tail.offset);
    match &tail.cause {
        TailDefect::ZeroFill => tracing::warn!(
            file = %path.display(),
            offset = tail.offset,
            dropped_bytes,
            "transaction log ends in zero fill; truncating it to the last record"
        ),
        TailDefect::Torn(reason) => tracing::warn!(
            file = %path.display(),
            offset = tail.offset,
            dropped_bytes,
            %reason,
            "truncating a torn record at the tail of the transaction log (crash during a write)"
        ),
    }
    let file = OpenOptions::new().write(true).open(path).at(path)?;
    file.set_len(tail.offset).at(path)?;
    file.sync_all().at(path)?;
    Ok(Repair::TruncatedTail {
        file: path.to_path_buf(),
        offset: tail.offset,
        dropped_bytes,
        cause: tail.cause,
    })
}

/// Deletes a last segment that holds no record.
fn remove_empty(path: &Path) -> Result<Repair> {
    tracing::warn!(
        file = %path.display(),
        "removing a transaction log segment with no complete record (crash while it was started)"
    );
    fs::remove_file(path).at(path)?;
    Ok(Repair::RemovedEmptySegment {
        file: path.to_path_buf(),
    })
}

/// Fsyncs a file through a read-only handle (fsync does not need write access).
pub(crate) fn fsync_file(path: &Path) -> Result<()> {
    fs::File::open(path).and_then(|f| f.sync_all()).at(path)
}
