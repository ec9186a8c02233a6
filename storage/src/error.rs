//! Typed errors of the storage layer.
//!
//! The variants separate what a caller acts on differently:
//!
//! - [`StorageError::Corrupt`], [`StorageError::BadMagic`],
//!   [`StorageError::UnsupportedVersion`], [`StorageError::DuplicateSegment`]:
//!   the on-disk log cannot be trusted; the member must not start, as
//!   ZooKeeper does not (an operator restores it from a backup, or, in an
//!   ensemble, the member is wiped and rejoins, resyncing with a SNAP).
//! - [`StorageError::InvalidSnapshot`]: one snapshot file is unusable; recovery
//!   skips it and falls back to an older one.
//! - [`StorageError::ZxidNotIncreasing`], [`StorageError::RecordTooLarge`],
//!   [`StorageError::RetainCountTooSmall`]: the caller broke a contract (a bug or
//!   a bad configuration); nothing was written.
//! - [`StorageError::Io`], [`StorageError::Poisoned`],
//!   [`StorageError::WriterStopped`]: the disk failed. After a failed write or
//!   fsync the state of the file is unknown, so the log refuses further writes
//!   (retrying an fsync after a failure can silently lose data).

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// Everything that can go wrong in the storage layer.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// An operating-system I/O error on `path`.
    #[error("I/O error on {}: {source}", path.display())]
    Io {
        /// The file or directory being accessed.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },

    /// A record failed validation and is not what a crash leaves at the end
    /// of the last segment (see the rules in the `recovery` module docs), so
    /// it may hold an acknowledged transaction. Recovery refuses to continue,
    /// as ZooKeeper refuses to start on a log record whose checksum fails.
    #[error(
        "transaction log is corrupt: {} at byte offset {offset}{}: {reason}. This is not the \
         torn end a crash leaves: the record may hold an acknowledged transaction, so it is not \
         cut, and wazoo refuses to start on this log, as ZooKeeper does. In an ensemble: stop \
         this member, move its data and log directories aside and start it empty; it resyncs \
         from the other members (keep the moved files for diagnosis). Standalone: restore them \
         from a backup, or accept losing every record from this offset on by starting once with \
         `wazoo serve --truncate-corrupt-log-tail` (docs/OPERATIONS.md, \"A damaged transaction \
         log\")",
        file.display(),
        describe_zxid(*zxid)
    )]
    Corrupt {
        /// The segment file.
        file: PathBuf,
        /// Byte offset of the bad record (or header) in `file`.
        offset: u64,
        /// The zxid in the bad record's header, if the header is complete
        /// (the header may itself be what is damaged).
        zxid: Option<u64>,
        /// What is wrong there.
        reason: CorruptReason,
    },

    /// A file named like a log segment does not start with the segment magic.
    #[error(
        "{} is not a wazoo transaction log segment (magic {found:02x?}, expected {expected:02x?})",
        file.display()
    )]
    BadMagic {
        /// The file.
        file: PathBuf,
        /// The first bytes found (fewer than four if the file is shorter).
        found: Vec<u8>,
        /// The magic this build writes.
        expected: [u8; 4],
    },

    /// A segment was written by an incompatible format version.
    #[error(
        "{} has format version {found}; this build reads version {supported}",
        file.display()
    )]
    UnsupportedVersion {
        /// The file.
        file: PathBuf,
        /// Version found in the header.
        found: u32,
        /// Version this build supports.
        supported: u32,
    },

    /// Two segment files name the same first zxid (e.g. `log.1` and
    /// `log.0000000000000001`).
    #[error(
        "two log segments start at zxid {zxid:#x}: {} and {}",
        first.display(),
        second.display()
    )]
    DuplicateSegment {
        /// The shared first zxid.
        zxid: u64,
        /// One file.
        first: PathBuf,
        /// The other file.
        second: PathBuf,
    },

    /// A snapshot file failed validation (torn, truncated, bit rot, wrong file).
    #[error("snapshot {} is invalid: {defect}", file.display())]
    InvalidSnapshot {
        /// The snapshot file.
        file: PathBuf,
        /// What is wrong with it.
        defect: SnapshotDefect,
    },

    /// Caller bug: zxids appended to the log must strictly increase.
    #[error("zxid {zxid:#x} is not greater than the last logged zxid {last:#x}")]
    ZxidNotIncreasing {
        /// The last zxid logged (or queued).
        last: u64,
        /// The offending zxid.
        zxid: u64,
    },

    /// Caller bug or misconfiguration: the record body exceeds the configured limit.
    #[error("record body of {len} bytes exceeds the limit of {max} bytes")]
    RecordTooLarge {
        /// The body length.
        len: usize,
        /// The configured maximum.
        max: u32,
    },

    /// Misconfiguration: purge must keep at least [`crate::MIN_SNAP_RETAIN_COUNT`] snapshots.
    #[error("snapshot retain count {given} is below the minimum of {min}")]
    RetainCountTooSmall {
        /// The count asked for.
        given: usize,
        /// The minimum.
        min: usize,
    },

    /// An earlier write or fsync failed; the log's on-disk state is unknown and
    /// it accepts no more operations. Reopen it to recover.
    #[error("the transaction log is unusable after an earlier I/O failure; reopen it to recover")]
    Poisoned,

    /// The group-commit writer thread has stopped (after an error, or shutdown).
    #[error("the group-commit writer thread has stopped")]
    WriterStopped,

    /// The group-commit writer thread could not be started.
    #[error("could not start the transaction log writer thread: {0}")]
    SpawnWriter(#[source] io::Error),

    /// The group-commit writer thread panicked (a panicking durability callback).
    #[error("the group-commit writer thread panicked")]
    WriterPanicked,
}

/// Why a log record (or segment) failed validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CorruptReason {
    /// The segment's file header is shorter than its fixed size.
    TruncatedFileHeader {
        /// Bytes present.
        available: u64,
    },
    /// Fewer than the 16 bytes of a record header remain.
    TruncatedRecordHeader {
        /// Bytes present.
        available: u64,
    },
    /// The declared body length runs past the end of the file.
    TruncatedBody {
        /// Declared body length.
        len: u32,
        /// Bytes present after the record header.
        available: u64,
    },
    /// The record's CRC matches a body of another length than the one its
    /// header declares: the length field is damaged.
    DamagedLength {
        /// Body length in the header.
        declared: u32,
        /// Body length under which the CRC matches.
        actual: u32,
    },
    /// The stored CRC does not match the record.
    ChecksumMismatch {
        /// CRC stored in the record header.
        stored: u32,
        /// CRC computed over (zxid, body).
        computed: u32,
    },
    /// A record header with zxid 0, which is never written.
    ZeroZxid,
    /// A zero-filled region (end of log) is followed by non-zero data.
    DataAfterZeroFill {
        /// Offset of the first non-zero byte.
        nonzero_at: u64,
    },
    /// A valid record whose zxid is not greater than the record before it.
    ZxidNotIncreasing {
        /// Zxid of the previous record.
        previous: u64,
        /// Zxid of this record.
        found: u64,
    },
    /// The first record of a segment does not have the zxid the file is named after.
    FirstZxidMismatch {
        /// Zxid from the file name.
        named: u64,
        /// Zxid of the first record.
        found: u64,
    },
    /// A segment that is not the last one holds no record.
    EmptySegment,
    /// A segment that is not the last one ends in zero fill. The writer
    /// fsyncs a segment whole before it starts the next and never zero-fills,
    /// so the zeros replaced data, possibly acknowledged records.
    ZeroFillInSealedSegment,
    /// A record header the writer could not have written as the next record
    /// (a body longer than the largest record it accepts, or a zxid that
    /// does not follow the previous one), in front of a body that runs past
    /// the end of the file. A crash leaves the real header there, so this is
    /// garbage over what may have been acknowledged records, not a short
    /// write.
    GarbledHeader {
        /// Body length in the header.
        len: u32,
        /// Zxid in the header.
        zxid: u64,
        /// Zxid of the last good record (0 if none).
        previous: u64,
    },
}

impl fmt::Display for CorruptReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TruncatedFileHeader { available } => {
                write!(f, "file header truncated ({available} bytes present)")
            }
            Self::TruncatedRecordHeader { available } => {
                write!(
                    f,
                    "record header truncated ({available} of 16 bytes present)"
                )
            }
            Self::TruncatedBody { len, available } => write!(
                f,
                "record body truncated (declares {len} bytes, {available} present)"
            ),
            Self::DamagedLength { declared, actual } => write!(
                f,
                "damaged length field (declares {declared} bytes, but the checksum matches a body of {actual})"
            ),
            Self::ChecksumMismatch { stored, computed } => write!(
                f,
                "checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
            ),
            Self::ZeroZxid => write!(f, "record header with zxid 0"),
            Self::DataAfterZeroFill { nonzero_at } => write!(
                f,
                "zero-filled end of log followed by non-zero data at offset {nonzero_at}"
            ),
            Self::ZxidNotIncreasing { previous, found } => write!(
                f,
                "zxid {found:#x} does not follow the previous record's zxid {previous:#x}"
            ),
            Self::FirstZxidMismatch { named, found } => write!(
                f,
                "first record has zxid {found:#x} but the file is named after {named:#x}"
            ),
            Self::EmptySegment => write!(f, "segment holds no record but is not the last one"),
            Self::ZeroFillInSealedSegment => write!(
                f,
                "zero fill in a segment that is not the last one (records may have been there)"
            ),
            Self::GarbledHeader {
                len,
                zxid,
                previous,
            } => write!(
                f,
                "garbled record header (declares {len} bytes and zxid {zxid:#x} after zxid \
                 {previous:#x}; the writer never wrote such a header, so this is not a torn write)"
            ),
        }
    }
}

/// Why a snapshot file failed validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SnapshotDefect {
    /// The file is shorter than header plus trailer.
    TooShort {
        /// File length.
        len: u64,
    },
    /// The header magic is wrong.
    BadMagic,
    /// The header names an unsupported format version.
    UnsupportedVersion {
        /// Version found.
        found: u32,
    },
    /// The trailer's end magic is missing: the file is torn or truncated.
    BadTrailer,
    /// The payload length in the trailer does not match the file length.
    LengthMismatch {
        /// Payload length stored in the trailer.
        stored: u64,
        /// Payload length implied by the file size.
        actual: u64,
    },
    /// The CRC over header and payload does not match.
    ChecksumMismatch {
        /// CRC stored in the trailer.
        stored: u32,
        /// CRC computed.
        computed: u32,
    },
    /// The zxid in the header differs from the one in the file name.
    ZxidMismatch {
        /// Zxid from the file name.
        named: u64,
        /// Zxid from the header.
        header: u64,
    },
}

impl fmt::Display for SnapshotDefect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooShort { len } => write!(f, "file too short ({len} bytes)"),
            Self::BadMagic => write!(f, "not a wazoo snapshot (bad magic)"),
            Self::UnsupportedVersion { found } => {
                write!(f, "unsupported snapshot format version {found}")
            }
            Self::BadTrailer => write!(f, "trailer missing (torn or truncated write)"),
            Self::LengthMismatch { stored, actual } => write!(
                f,
                "payload length mismatch (trailer says {stored}, file holds {actual})"
            ),
            Self::ChecksumMismatch { stored, computed } => write!(
                f,
                "checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
            ),
            Self::ZxidMismatch { named, header } => write!(
                f,
                "file is named after zxid {named:#x} but its header says {header:#x}"
            ),
        }
    }
}

/// ` (record zxid 0x…)` when the bad record's header holds one.
fn describe_zxid(zxid: Option<u64>) -> String {
    zxid.map(|z| format!(" (record zxid {z:#x})"))
        .unwrap_or_default()
}

/// Result alias for this crate.
pub type Result<T, E = StorageError> = std::result::Result<T, E>;

/// Attaches the path to an [`io::Error`].
pub(crate) trait IoContext<T> {
    fn at(self, path: &Path) -> Result<T>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn at(self, path: &Path) -> Result<T> {
        self.map_err(|source| StorageError::Io {
            path: path.to_path_buf(),
            source,
        })
    }
}
