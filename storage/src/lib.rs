//! Durable storage for wazoo: the transaction log and snapshots.
//!
//! This crate stores opaque byte records keyed by a `u64` zxid (ZooKeeper's
//! `epoch << 32 | counter`); it never interprets them. It provides
//!
//! - [`TxnLog`]: a segmented append-only log with a CRC per record, buffered
//!   appends and an explicit [`TxnLog::sync`] (fdatasync) so the caller can
//!   commit a batch with one fsync; [`TxnLog::truncate_after`] for ZAB's
//!   TRUNC; [`TxnLog::read_from`] / [`read_log`] to replay or send a DIFF;
//! - [`GroupCommitLog`]: a writer thread that owns a `TxnLog` and turns a
//!   stream of appends into group commits, reporting the durable zxid through
//!   a callback (no async runtime needed);
//! - snapshots written atomically with a CRC ([`write_snapshot`],
//!   [`latest_valid_snapshot`], [`read_snapshot`]), and the envelope that
//!   starts every snapshot payload (magic, version, zxid, sessions:
//!   [`write_snapshot_envelope`], [`read_snapshot_envelope`]);
//! - [`purge`] of old snapshots and of the log segments only they needed;
//! - [`write_snapshot_to`]: a snapshot file's bytes sent to a stream (a
//!   backup);
//! - [`zookeeper`]: reading Apache ZooKeeper's snapshots and logs (an
//!   import).
//!
//! Snapshots and logs may live in separate directories (ZooKeeper's
//! `dataDir` and `dataLogDir`) or share one.
//!
//! # Recovery contract
//!
//! A member recovers by loading the newest valid snapshot `S` and replaying
//! the log records with zxid `> S` on top of it:
//!
//! ```no_run
//! # fn main() -> Result<(), wazoo_storage::StorageError> {
//! use wazoo_storage::{latest_valid_snapshot, read_snapshot, LogOptions, TxnLog, Zxid};
//! let (mut log, _recovered) = TxnLog::open("/var/lib/wazoo/log", LogOptions::default())?;
//! let (snap_zxid, state) = match latest_valid_snapshot("/var/lib/wazoo/data")? {
//!     Some((zxid, path)) => (zxid, read_snapshot(path)?),
//!     None => (Zxid::ZERO, Vec::new()),
//! };
//! # let _ = state;
//! for record in log.read_from(snap_zxid)? {
//!     let record = record?;
//!     // apply record.body (zxid record.zxid) to the state machine
//! #   let _ = record;
//! }
//! # Ok(()) }
//! ```
//!
//! A snapshot `snapshot.<S>` holds the state exactly as of zxid `S`: wazoo
//! serializes an O(1) copy of the tree taken at `S` while writes go on (not
//! a fuzzy snapshot, as ZooKeeper's are), so recovery replays each record
//! after `S` exactly once and needs no idempotent replay. This crate does
//! not depend on that: it stores the snapshot's bytes and the log's records
//! as given. The log must keep every record after the oldest snapshot
//! recovery may use, which is what [`purge`] preserves.
//!
//! # On-disk grammar of the transaction log
//!
//! A log directory holds segment files named `log.<zxid>`, `<zxid>` being the
//! zxid of the segment's first record in 16 lower-case hex digits (unpadded
//! names such as ZooKeeper's `log.100000001` are read too). Segments are
//! ordered by that zxid. All integers are big-endian.
//!
//! ```text
//! Segment      := FileHeader Record*             (every segment but the last)
//! LastSegment  := FileHeader Record* Padding
//! FileHeader   := magic:"WZLG" version:u32(=1)                       8 bytes
//! Record       := length:u32 crc:u32 zxid:u64 body:byte[length]   16 + length
//! Padding      := 0x00*                 zero fill: the end of the log
//! ```
//!
//! - `crc` is the CRC32 (IEEE, as computed by `crc32fast`) of the 8 bytes of
//!   `zxid` followed by `body`. A corrupted `length` misframes the record and
//!   fails the check too.
//! - `zxid` is never 0, and zxids strictly increase within a segment and
//!   across segments; the first record of `log.<z>` has zxid `z`.
//! - The last segment ends at end of file or at a run of zero bytes reaching
//!   the end of the file (left by a file system that extended the file before
//!   the data reached the disk). This implementation does not preallocate; it
//!   truncates such a run off the last segment when opening. Any other
//!   segment was fsynced whole before the next one was created, so it ends
//!   at its last record; zeros there are corruption.
//!
//! # Crash safety
//!
//! The writer fsyncs a segment completely before it creates the next one, and
//! fsyncs a new segment's header (and the directory) before writing records
//! into it. So after a crash only the end of the last segment can hold a
//! partial write. [`TxnLog::open`] cuts off what a crash leaves there (a short
//! write under a header the writer wrote, a zero-filled end, a record whose
//! end never reached the disk, each with a `tracing::warn!`) and nothing
//! else: a record that is complete but fails its CRC, a garbled header whose
//! declared body runs past the end of the file (random bytes over complete
//! records), or any bad record with valid records after it, is reported
//! as [`StorageError::Corrupt`] (naming file, offset and zxid, and what an
//! operator can do) and the log refuses to open, because cutting there could
//! silently drop an acknowledged record. Apache ZooKeeper refuses to start on
//! such a record too. The precise rules, and why a crash cannot produce
//! anything else, are in the docs of the `recovery` module (`src/recovery.rs`).
//! [`LogOptions::truncate_corrupt_tail`] is the operator's way to accept the
//! loss instead: the log is cut at the first bad record.
//! A file named like a segment that is not one gives
//! [`StorageError::BadMagic`] or [`StorageError::UnsupportedVersion`].
//! Nothing read from disk can make this crate panic.
//!
//! Consequence worth knowing: if a crash lost an earlier sector of the last,
//! unsynced write while a later one reached the disk, recovery reports
//! corruption rather than guess. Such records were never acknowledged, so
//! the member can be wiped and resynced from the ensemble, or an operator who
//! has checked that the reported zxid was never committed may cut the
//! segment at the reported offset.

#![forbid(unsafe_code)]

mod envelope;
mod error;
mod fsutil;
mod group;
mod log;
mod purge;
mod reader;
mod recovery;
mod segment;
mod snapshot;
mod stream;
pub mod zookeeper;

pub use envelope::{
    read_snapshot_envelope, write_snapshot_envelope, EnvelopeError, SnapshotEnvelope,
    SNAPSHOT_MAGIC, SNAPSHOT_VERSION,
};
pub use error::{CorruptReason, Result, SnapshotDefect, StorageError};
pub use group::{DurabilityReport, GroupCommitLog, GroupCommitOptions, TryAppendError};
pub use log::{LogOptions, LogStats, TxnLog};
pub use purge::{purge, PurgeReport, MIN_SNAP_RETAIN_COUNT};
pub use reader::{read_log, LogIter, LogRecord};
pub use recovery::{Recovered, Repair, TailDefect};
pub use snapshot::{
    latest_valid_snapshot, list_snapshots, read_snapshot, verify_snapshot, write_snapshot,
};
pub use stream::write_snapshot_to;
/// The transaction id records and snapshots are keyed by (on disk, its
/// 64 bits as the format says; everywhere else, this type).
pub use wazoo_proto::Zxid;
