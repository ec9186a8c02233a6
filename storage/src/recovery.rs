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
//!    ([`CorruptReason::DamagedLength`], corruption). The header must also be
//!    one the writer wrote (see below), or the declared length is no proof
//!    of anything: random bytes over complete records declare a length past
//!    the end of the file almost always.
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
//! In rules 1 and 3 the record's header is what the writer wrote: a crash
//! loses bytes (they read back as zeros), it does not invent them. So the
//! header must be one the writer could have written next: a body length no
//! larger than it accepts ([`LogOptions::max_record_bytes`]), and a zxid that
//! is the one the segment is named after (its first record) or is above the
//! previous record's by at most [`MAX_EPOCH_STEP`] epochs. Only where the run
//! of zeros ending the file starts inside the header (its end lost) is the
//! zxid not checked, as its lost bytes are unknown. A header that fails this
//! is [`CorruptReason::GarbledHeader`] when its body runs past the end of
//! the file (otherwise the record's own failure is reported): garbage over
//! the log, which may have replaced acknowledged records. Random bytes pass
//! with a probability of about 2^-24.
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
//!
//! # Accepting the loss
//!
//! [`LogOptions::truncate_corrupt_tail`] (`wazoo serve
//! --truncate-corrupt-log-tail`) is the operator's decision to lose records:
//! instead of failing, the open cuts the segment holding the first bad
//! record at its offset, deletes every later segment, logs both at WARN with
//! the bytes dropped, and reports [`Repair::TruncatedCorruption`]. Those
//! records may have been acknowledged, so this is never done by default.

use std::fs::{self, OpenOptions};
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::error::{CorruptReason, IoContext, Result, StorageError};
use crate::fsutil::{fsync_dir, list_zxid_files, ZxidFile};
use crate::log::LogOptions;
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

/// How many epochs the zxid of a record may be ahead of the record before it
/// for its header to pass for one the writer wrote (see [`header_follows`]).
/// Each election that commits anything moves the epoch by one; a member that
/// was away for 65,536 elections resyncs by snapshot, whatever its log holds.
const MAX_EPOCH_STEP: u64 = 1 << 16;

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
    /// Corruption that is not a crash was cut off because the log was opened
    /// with [`LogOptions::truncate_corrupt_tail`]: the operator accepted
    /// losing every record from `offset` on, acknowledged ones included.
    TruncatedCorruption {
        /// The segment holding the first bad record.
        file: PathBuf,
        /// New length of the file: the offset of the first bad record.
        offset: u64,
        /// Bytes removed, from `file` and from the deleted later segments.
        dropped_bytes: u64,
        /// Later segments deleted (every record after a bad one is dropped).
        removed_segments: Vec<PathBuf>,
        /// The zxid in the bad record's header, if it was complete.
        zxid: Option<u64>,
        /// What was wrong at `offset`.
        reason: CorruptReason,
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
/// segment must not exist before they have). With
/// [`LogOptions::truncate_corrupt_tail`], corruption is cut off too (the
/// segment at its first bad record, every later segment deleted) instead of
/// refusing the open.
pub(crate) fn recover(dir: &Path, opts: &LogOptions) -> Result<RecoveredLog> {
    let mut files = list_segments(dir)?;
    let mut log = RecoveredLog {
        segments: Vec::with_capacity(files.len()),
        report: Recovered::default(),
        fsyncs: 0,
    };
    let max_len = opts.max_record_bytes;
    let mut prev_zxid = 0;
    let mut i = 0;
    while i < files.len() {
        let is_last = i + 1 == files.len();
        let scan = match scan_segment(&files[i], is_last, prev_zxid, max_len) {
            Err(StorageError::Corrupt {
                offset,
                zxid,
                reason,
                ..
            }) if opts.truncate_corrupt_tail && offset >= FILE_HEADER_LEN => {
                let later = files.split_off(i + 1);
                let repair = cut_corruption(&files[i].path, offset, zxid, reason, later)?;
                log.report.repairs.push(repair);
                log.fsyncs += 1;
                // The segment now ends at its last good record.
                scan_segment(&files[i], true, prev_zxid, max_len)?
            }
            other => other?,
        };
        let file = files[i].clone();
        i += 1;
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
/// `max_len` is the largest body the writer accepts.
fn scan_segment(
    file: &ZxidFile,
    is_last: bool,
    prev_zxid: u64,
    max_len: u32,
) -> Result<SegmentScan> {
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
            let next = NextRecord {
                prev_zxid: scan.last_zxid,
                named: (scan.records == 0).then_some(file.zxid),
                max_len,
            };
            match classify_tail(&tail, offset, &next, reason) {
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

/// What the writer could have written as the record after the last good one.
struct NextRecord {
    /// Zxid of the last good record (0 if none).
    prev_zxid: u64,
    /// The zxid the segment is named after, when no record of it is good yet
    /// (its first record has exactly that zxid).
    named: Option<u64>,
    /// Largest body the writer accepts.
    max_len: u32,
}

/// Whether a record header declaring `len` bytes and `zxid` is one the writer
/// could have written after the last good record: the body is no longer than
/// it accepts, and the zxid is the one the segment is named after (first
/// record) or is above the previous one by at most [`MAX_EPOCH_STEP`] epochs.
/// `zxid_intact` says whether all 8 bytes of the zxid are what was written
/// (not in a run of zeros a lost write may have left; zeros only lower the
/// value, so the length is checked either way). Random bytes pass with a
/// probability of about 2^-8 x 2^-16 (first record: 2^-8 x 2^-64).
fn header_follows(len: u32, zxid: u64, zxid_intact: bool, next: &NextRecord) -> bool {
    if len > next.max_len {
        return false;
    }
    if !zxid_intact {
        return true;
    }
    match next.named {
        Some(named) => zxid == named,
        None => zxid > next.prev_zxid && (zxid >> 32) <= (next.prev_zxid >> 32) + MAX_EPOCH_STEP,
    }
}

/// Decides whether the bad frame at `offset` of the last segment, followed by
/// `tail` (its bytes up to the end of the file), is what a crash leaves
/// (`Ok`, with what to report) or corruption (`Err`, with the reason to
/// report). `next` says what record could follow the last good one. The
/// rules are those of the module docs.
fn classify_tail(
    tail: &[u8],
    offset: u64,
    next: &NextRecord,
    reason: CorruptReason,
) -> std::result::Result<TailDefect, CorruptReason> {
    let prev_zxid = next.prev_zxid;
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
    let header_end = offset + RECORD_HEADER_LEN as u64;
    let zeros_from = offset + trailing_zeros_start(tail) as u64;
    // A crash leaves the header the writer wrote, or a prefix of it followed
    // by the zeros of a lost write. Anything else is garbage written over
    // the log, which may have replaced acknowledged records.
    let header_ours = header_follows(len, zxid, zeros_from >= header_end, next);
    let Some(body) = rest.get(..len as usize) else {
        // The declared body runs past the end of the file: a short write,
        // if the header is one the writer wrote.
        if !header_ours {
            return Err(CorruptReason::GarbledHeader {
                len,
                zxid,
                previous: prev_zxid,
            });
        }
        return Ok(TailDefect::Torn(reason));
    };
    // Complete in length, yet invalid. A crash explains it only if the run
    // of zeros that ends the file reaches back over a point where a lost
    // write can begin inside this record.
    let frame_end = header_end + u64::from(len);
    let lost_at_header_end = zeros_from <= header_end && header_end < frame_end;
    let lost_at_sector = zeros_from.next_multiple_of(SECTOR_BYTES) < frame_end;
    if (lost_at_header_end || lost_at_sector)
        && header_ours
        && !one_bit_from_valid(zxid, body, stored)
    {
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

/// Cuts `path` at the bad record at `offset` and deletes the `later`
/// segments (newest first, so a crash half way leaves a shorter log), at the
/// operator's request ([`LogOptions::truncate_corrupt_tail`]).
fn cut_corruption(
    path: &Path,
    offset: u64,
    zxid: Option<u64>,
    reason: CorruptReason,
    later: Vec<ZxidFile>,
) -> Result<Repair> {
    let file_len = fs::metadata(path).at(path)?.len();
    let mut dropped_bytes = file_len.saturating_sub(offset);
    let mut removed_segments = Vec::with_capacity(later.len());
    for seg in later.into_iter().rev() {
        dropped_bytes += fs::metadata(&seg.path).at(&seg.path)?.len();
        fs::remove_file(&seg.path).at(&seg.path)?;
        removed_segments.push(seg.path);
    }
    removed_segments.reverse();
    tracing::warn!(
        file = %path.display(),
        offset,
        zxid = zxid.map(|z| format!("{z:#x}")),
        dropped_bytes,
        removed_segments = removed_segments.len(),
        %reason,
        "truncating a CORRUPT transaction log at the first bad record as asked \
         (--truncate-corrupt-log-tail): {dropped_bytes} bytes dropped, from offset {offset} \
         and {} later segment(s); records in them may have been acknowledged",
        removed_segments.len()
    );
    let file = OpenOptions::new().write(true).open(path).at(path)?;
    file.set_len(offset).at(path)?;
    file.sync_all().at(path)?;
    Ok(Repair::TruncatedCorruption {
        file: path.to_path_buf(),
        offset,
        dropped_bytes,
        removed_segments,
        zxid,
        reason,
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
