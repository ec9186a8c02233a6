//! Opening a log directory: list the segments, validate every record, repair
//! what a crash leaves at the end of the last segment, refuse anything else.
//!
//! # Crash or corruption
//!
//! A defect that a crash during a write can produce is cut off (the file is
//! truncated back to the end of its last good record, durably, with a
//! `tracing::warn!`, and listed in [`Recovered::repairs`]): the bytes were
//! never fsynced, so no client was told they were committed. Any other
//! defect may sit in a record that was fsynced and acknowledged; cutting it
//! would silently lose a committed transaction, so [`crate::TxnLog::open`]
//! fails with [`StorageError::Corrupt`] and leaves every file untouched.
//! Apache ZooKeeper 3.8 draws the same line: its log reader takes a record
//! cut short, a zero length (its preallocated zero fill) or a missing
//! end-of-record byte as the end of the log ("Last transaction was
//! partial."), and stops with "CRC check failed" on a complete record whose
//! checksum fails, so the server does not start.
//!
//! What the writer does, which bounds what a crash can leave:
//!
//! - It fsyncs a segment completely before it creates the next one, and
//!   creates a segment with its header already fsynced (see [`crate::TxnLog`]),
//!   so only the *last* segment can end in an unsynced write, and only at
//!   its *end*.
//! - It only appends, and never preallocates or zero-fills: the file grows
//!   with the data, a record being framed as a 16-byte header (body length,
//!   CRC, zxid) followed by the body. Its buffered writer hands records to
//!   the kernel in `write` calls that end at a record's end or, when a body
//!   does not fit the buffer, right after the record's header.
//! - After a process crash the page cache holds a prefix of what was
//!   written. After a power failure, pages of the unsynced write may be lost
//!   in any order, a disk writes a sector (512 bytes, or a multiple) all or
//!   nothing, and a file system may persist the new file size before the
//!   data (ext4 with `data=writeback` can): the lost part then reads back
//!   as zeros on file systems that never expose stale blocks; one that shows
//!   old data from elsewhere instead produces garbage, which is reported as
//!   corruption.
//!
//! So, at the end of the last segment, after its last good record, these are
//! a crash and are cut:
//!
//! 1. **A short write**: fewer than 16 bytes of a record header before the
//!    end of the file, or a header whose declared body runs past the end of
//!    the file, unless the record's CRC matches its bytes under a length
//!    one bit away from the declared one or ending exactly at the end of the
//!    file: then the record is complete and its length field is damaged
//!    ([`CorruptReason::DamagedLength`], corruption).
//! 2. **Zero fill**: nothing but zero bytes from the record boundary to the
//!    end of the file (a file extended without its data; a preallocating
//!    writer would leave the same).
//! 3. **A lost write inside a record** ([`TailDefect::LostWrite`]): a record
//!    whose declared length is present but that fails its CRC (or has zxid
//!    0), where the run of zeros that ends the file starts at or before the
//!    end of its header or a sector boundary inside it, and lasts to the end
//!    of the file. Those are the points where the lost part of a write can
//!    begin: a sector or page boundary, or the end of a `write` call. The
//!    record must also not be one flipped bit away from a valid one (a
//!    single-bit error is bit rot, and CRC-32 locates it unambiguously).
//!
//! And in every case no valid record (correct CRC, zxid above the last good
//! one) may start anywhere after the defect: one would prove that the
//! defect is in the middle of the log.
//!
//! Everything else is corruption. In particular a record that is complete
//! (its declared length is present) and fails its CRC without ending in such
//! a run of zeros, a zero-filled region followed by data, and any defect in
//! a segment that is not the last, zero fill included (such a segment was
//! fsynced whole before the next one was created, so zeros in it replaced
//! data that may have been records).
//!
//! What this costs: rule 3 cannot tell a lost write from a record whose body
//! really ends in zeros across a sector boundary and has been damaged in more
//! than one bit elsewhere; such a record is cut. And a power failure that
//! loses a middle sector of the last write while a later one reaches the disk
//! is reported as corruption (the member refuses to start) although that
//! write was never acknowledged; an operator then wipes the member and lets
//! it resync, or cuts the file at the reported offset after checking that the
//! record's zxid was never committed.

use std::fs::{self, OpenOptions};
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::error::{CorruptReason, IoContext, Result, StorageError};
use crate::fsutil::{fsync_dir, list_zxid_files, ZxidFile};
use crate::segment::{
    header_at, length_matching_crc, one_bit_from_valid, open_segment, trailing_zeros_start,
    valid_record_follows, Frame, HeaderProblem, HeaderState, OpenSegment, RecordReader,
    FILE_HEADER_LEN, RECORD_HEADER_LEN, SEGMENT_PREFIX,
};
use crate::Zxid;

/// The smallest unit a disk writes all or nothing of (512 bytes, the
/// smallest sector size in use; pages and file system blocks are multiples
/// of it, and files are laid out in whole blocks, so file offsets that are
/// multiples of it are sector boundaries on the device).
const SECTOR_BYTES: u64 = 512;

/// What [`crate::TxnLog::open`] found and repaired.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovered {
    /// Zxid of the oldest record in the log, if any.
    pub first_zxid: Option<Zxid>,
    /// Zxid of the newest record in the log, 0 if the log is empty.
    pub last_zxid: Zxid,
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

/// What ended the log at a repaired tail (see the module docs for why each
/// is a crash and not corruption).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TailDefect {
    /// Zero bytes from a record boundary up to the end of the file.
    ZeroFill,
    /// A short write: the file ends inside a record's header or body
    /// ([`CorruptReason::TruncatedRecordHeader`] or
    /// [`CorruptReason::TruncatedBody`]).
    Torn(CorruptReason),
    /// A record whose declared length is present but whose bytes from
    /// `zeros_from` to the end of the file are zero, where the zeros cover
    /// the end of its header or a sector boundary inside it: the file size
    /// reached the disk, part of the unsynced write did not.
    LostWrite {
        /// Offset of the first byte of the run of zeros that ends the file.
        zeros_from: u64,
        /// The validation failure (a checksum mismatch, or a zero zxid).
        reason: CorruptReason,
    },
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
    log.report.first_zxid = log.segments.first().map(|s| Zxid(s.zxid));
    log.report.last_zxid = Zxid(prev_zxid);
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
        Frame::ZeroFill { offset } if is_last => {
            // Zeros to the end of the file are the end of the log; they are
            // cut off so that the file ends at its last record.
            scan.torn_tail = Some(torn_at(offset, TailDefect::ZeroFill));
        }
        Frame::ZeroFill { offset } => {
            // A sealed segment was fsynced whole and never zero-filled: zeros
            // there are damage, and may have replaced acknowledged records.
            let reason = CorruptReason::ZeroFillInSealedSegment;
            return Err(corrupt(path, offset, None, reason));
        }
        Frame::Bad {
            offset,
            zxid,
            reason,
        } => {
            if !is_last {
                return Err(corrupt(path, offset, zxid, reason));
            }
            let mut tail = Vec::new();
            let mut inner = reader.into_inner();
            inner.seek(SeekFrom::Start(offset)).at(path)?;
            inner.read_to_end(&mut tail).at(path)?;
            match classify_tail(&tail, offset, scan.last_zxid, reason) {
                Ok(cause) => scan.torn_tail = Some(torn_at(offset, cause)),
                Err(reason) => return Err(corrupt(path, offset, zxid, reason)),
            }
        }
    }
    if scan.records == 0 && !is_last {
        return Err(corrupt(
            path,
            FILE_HEADER_LEN,
            None,
            CorruptReason::EmptySegment,
        ));
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
        return Err(corrupt(&file.path, offset, Some(zxid), reason));
    }
    if zxid <= prev {
        let reason = CorruptReason::ZxidNotIncreasing {
            previous: prev,
            found: zxid,
        };
        return Err(corrupt(&file.path, offset, Some(zxid), reason));
    }
    Ok(())
}

/// The error for a bad record at `offset` of `path`; `zxid` is the one its
/// header holds, if it has a complete header.
pub(crate) fn corrupt(
    path: &Path,
    offset: u64,
    zxid: Option<u64>,
    reason: CorruptReason,
) -> StorageError {
    StorageError::Corrupt {
        file: path.to_path_buf(),
        offset,
        zxid,
        reason,
    }
}

/// Decides whether the bad frame at `offset` of the last segment, followed by
/// `tail` (its bytes up to the end of the file), is what a crash leaves
/// (`Ok`, with what to report) or corruption (`Err`, with the reason to
/// report). `prev_zxid` is the zxid of the last good record. The rules are
/// those of the module docs.
fn classify_tail(
    tail: &[u8],
    offset: u64,
    prev_zxid: u64,
    reason: CorruptReason,
) -> std::result::Result<TailDefect, CorruptReason> {
    if matches!(reason, CorruptReason::DataAfterZeroFill { .. })
        || valid_record_follows(tail, prev_zxid)
    {
        return Err(reason);
    }
    let Some((len, stored, zxid)) = header_at(tail) else {
        // Fewer than 16 bytes, not all zero: a short write of the header.
        return Ok(TailDefect::Torn(reason));
    };
    let rest = &tail[RECORD_HEADER_LEN..];
    if let Some(actual) = length_matching_crc(len, stored, zxid, rest) {
        return Err(CorruptReason::DamagedLength {
            declared: len,
            actual,
        });
    }
    let Some(body) = rest.get(..len as usize) else {
        // The declared body runs past the end of the file: a short write.
        return Ok(TailDefect::Torn(reason));
    };
    // Complete in length, yet invalid. A crash explains it only if the run
    // of zeros that ends the file reaches back over a point where a lost
    // write can begin inside this record.
    let header_end = offset + RECORD_HEADER_LEN as u64;
    let frame_end = header_end + u64::from(len);
    let zeros_from = offset + trailing_zeros_start(tail) as u64;
    let lost_at_header_end = zeros_from <= header_end && header_end < frame_end;
    let lost_at_sector = zeros_from.next_multiple_of(SECTOR_BYTES) < frame_end;
    if (lost_at_header_end || lost_at_sector) && !one_bit_from_valid(zxid, body, stored) {
        return Ok(TailDefect::LostWrite { zeros_from, reason });
    }
    Err(reason)
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
            "truncating a short write at the tail of the transaction log (crash during a write)"
        ),
        TailDefect::LostWrite { zeros_from, reason } => tracing::warn!(
            file = %path.display(),
            offset = tail.offset,
            dropped_bytes,
            zeros_from,
            %reason,
            "truncating a record whose end never reached the disk (zero-filled from {zeros_from}; crash during a write)"
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
