//! [`TxnLog`]: the append side of the transaction log.
//!
//! Invariants kept on disk (recovery relies on them):
//!
//! 1. A segment is created with its file header written and fsynced, and the
//!    directory fsynced, before any record goes into it.
//! 2. A segment is fsynced completely before the next segment is created
//!    (roll-over, reopen and truncation all go through this), so only the
//!    last segment can ever end in a partial write.
//! 3. The first record of `log.<z>` has zxid `z`; zxids strictly increase
//!    within and across segments.
//! 4. After [`TxnLog::open`], appends always go to a new segment, named after
//!    the first zxid appended; an existing segment is never appended to.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

#[cfg(test)]
mod proptests;

use crate::error::{CorruptReason, IoContext, Result, StorageError};
use crate::fsutil::{fsync_dir, zxid_file_name, ZxidFile};
use crate::reader::LogIter;
use crate::recovery::{corrupt, recover, Recovered};
use crate::segment::{
    file_header, open_segment, record_header, Frame, HeaderState, RecordReader, FILE_HEADER_LEN,
    RECORD_HEADER_LEN, SEGMENT_PREFIX,
};
use crate::Zxid;

/// Tuning of a [`TxnLog`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogOptions {
    /// A segment is rolled over when the next record would take it past this
    /// size (a record larger than this gets a segment of its own). Default 64 MiB.
    pub segment_bytes: u64,
    /// Largest record body accepted by [`TxnLog::append`]. Default 16 MiB.
    pub max_record_bytes: u32,
    /// Size of the in-memory write buffer in front of the active segment.
    /// Default 256 KiB.
    pub write_buffer_bytes: usize,
    /// Accept losing records to a damaged log: instead of refusing to open
    /// on [`StorageError::Corrupt`], [`TxnLog::open`] cuts the segment at the
    /// first bad record and deletes every later segment
    /// ([`crate::Repair::TruncatedCorruption`], logged with `tracing::warn!`).
    /// Default `false`. Records dropped this way may have been acknowledged;
    /// this is the operator's decision (`wazoo serve
    /// --truncate-corrupt-log-tail`), never a default.
    pub truncate_corrupt_tail: bool,
    /// fdatasync the active segment on [`TxnLog::sync`] (ZooKeeper's
    /// `forceSync`). Default `true`. With `false` a sync only hands the
    /// buffered records to the OS: acknowledged writes may be lost when
    /// the machine crashes (not when only the process dies). A segment's
    /// creation and sealing are still made durable, so a crash can lose
    /// only the active segment's tail, which recovery treats as a torn
    /// write.
    pub force_sync: bool,
}

impl Default for LogOptions {
    fn default() -> Self {
        Self {
            segment_bytes: 64 * 1024 * 1024,
            max_record_bytes: 16 * 1024 * 1024,
            write_buffer_bytes: 256 * 1024,
            truncate_corrupt_tail: false,
            force_sync: true,
        }
    }
}

/// Counters of the log's disk work, shared with whoever asked for them
/// ([`TxnLog::stats`]); readable from any thread. Useful for metrics, and for
/// tests that check batching without measuring time.
#[derive(Debug, Default)]
pub struct LogStats {
    fsyncs: AtomicU64,
    commits: AtomicU64,
    appends: AtomicU64,
    commit_micros: AtomicU64,
}

impl LogStats {
    /// Every fsync/fdatasync issued on a segment or a directory (including
    /// those of segment creation, roll-over, recovery and truncation).
    pub fn fsyncs(&self) -> u64 {
        self.fsyncs.load(Ordering::Relaxed)
    }

    /// Calls of [`TxnLog::sync`] that had unsynced records and fsynced them:
    /// the number of group commits.
    pub fn commits(&self) -> u64 {
        self.commits.load(Ordering::Relaxed)
    }

    /// Records appended since the log was opened.
    pub fn appends(&self) -> u64 {
        self.appends.load(Ordering::Relaxed)
    }

    /// Time spent in group commits (flush and fdatasync), in microseconds.
    pub fn commit_micros(&self) -> u64 {
        self.commit_micros.load(Ordering::Relaxed)
    }

    fn count_fsyncs(&self, n: u64) {
        self.fsyncs.fetch_add(n, Ordering::Relaxed);
    }
}

/// The segment being appended to.
struct Active {
    path: PathBuf,
    out: BufWriter<File>,
    /// Bytes written, including those still in `out`'s buffer.
    len: u64,
    /// Bytes known to be on disk.
    synced_len: u64,
    records: u64,
}

/// An append-only, segmented, checksummed transaction log in one directory.
///
/// Records are opaque bodies keyed by strictly increasing zxids. Appends are
/// buffered; [`TxnLog::sync`] makes everything appended so far durable with a
/// single fdatasync, so a caller commits a whole batch at once (see
/// [`crate::GroupCommitLog`] for a thread that does this continuously).
///
/// Dropping the log flushes its buffer to the operating system but does not
/// fsync: records appended after the last `sync` may be lost in a crash.
pub struct TxnLog {
    dir: PathBuf,
    opts: LogOptions,
    /// All segments on disk, oldest first; the active one, if any, is last.
    segments: Vec<ZxidFile>,
    active: Option<Active>,
    last_zxid: u64,
    durable_zxid: u64,
    poisoned: bool,
    stats: Arc<LogStats>,
}

impl std::fmt::Debug for TxnLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TxnLog")
            .field("dir", &self.dir)
            .field("segments", &self.segments.len())
            .field("last_zxid", &format_args!("{:#x}", self.last_zxid))
            .field("durable_zxid", &format_args!("{:#x}", self.durable_zxid))
            .field("poisoned", &self.poisoned)
            .finish()
    }
}

impl TxnLog {
    /// Opens (creating if needed) the log in `dir`, validating every record.
    ///
    /// What a crash during a write leaves at the very end of the last segment
    /// (a short write, zero fill, a record whose end never reached the disk)
    /// is cut off with a `tracing::warn!` and listed in
    /// [`Recovered::repairs`]. Any other bad record, in particular a complete
    /// last record whose CRC fails, fails with [`StorageError::Corrupt`] and
    /// changes nothing on disk (the rules are in the `recovery` module); a
    /// file named `log.<hex>` that is not a
    /// segment with [`StorageError::BadMagic`] or
    /// [`StorageError::UnsupportedVersion`]. Other files in `dir` are ignored,
    /// so the directory may be shared with snapshots.
    pub fn open(dir: impl AsRef<Path>, opts: LogOptions) -> Result<(TxnLog, Recovered)> {
        let dir = dir.as_ref().to_path_buf();
        fs::create_dir_all(&dir).at(&dir)?;
        let recovered = recover(&dir, &opts)?;
        let stats = Arc::new(LogStats::default());
        stats.count_fsyncs(recovered.fsyncs);
        let last_zxid = recovered.report.last_zxid.0;
        let log = TxnLog {
            dir,
            opts,
            segments: recovered.segments,
            active: None,
            last_zxid,
            durable_zxid: last_zxid,
            poisoned: false,
            stats,
        };
        Ok((log, recovered.report))
    }

    /// The directory of the log.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The options the log was opened with.
    pub fn options(&self) -> &LogOptions {
        &self.opts
    }

    /// Zxid of the last record appended (durable or not); 0 if the log is empty.
    pub fn last_zxid(&self) -> Zxid {
        Zxid(self.last_zxid)
    }

    /// Zxid of the last record known to be on disk; 0 if none.
    pub fn durable_zxid(&self) -> Zxid {
        Zxid(self.durable_zxid)
    }

    /// Zxid of the oldest record in the log, if any (as known to this handle:
    /// a concurrent [`crate::purge`] may have removed older segments since).
    pub fn first_zxid(&self) -> Option<Zxid> {
        self.segments.first().map(|s| Zxid(s.zxid))
    }

    /// Paths of the segment files, oldest first.
    pub fn segment_paths(&self) -> Vec<PathBuf> {
        self.segments.iter().map(|s| s.path.clone()).collect()
    }

    /// The log's counters.
    pub fn stats(&self) -> Arc<LogStats> {
        Arc::clone(&self.stats)
    }

    /// Buffers one record. It is durable after the next successful
    /// [`TxnLog::sync`] (or a roll-over, which syncs the finished segment).
    ///
    /// Fails without writing anything with [`StorageError::ZxidNotIncreasing`]
    /// if `zxid` is not above [`TxnLog::last_zxid`] (zxid 0 never is), and with
    /// [`StorageError::RecordTooLarge`] if the body exceeds
    /// [`LogOptions::max_record_bytes`].
    pub fn append(&mut self, zxid: Zxid, body: &[u8]) -> Result<()> {
        let zxid = zxid.0;
        self.check_usable()?;
        self.check_append(zxid, body.len())?;
        self.guarded(|log| log.append_unchecked(zxid, body))
    }

    /// Writes out everything buffered and fdatasyncs it: on success every
    /// record appended so far is durable. Does nothing when nothing is pending.
    pub fn sync(&mut self) -> Result<()> {
        self.check_usable()?;
        self.guarded(Self::sync_active)
    }

    /// Durably drops every record with a zxid above `zxid` (ZAB's TRUNC).
    /// Segments that start after `zxid` are deleted (newest first, so a crash
    /// half way leaves a valid, shorter-or-equal log); the segment holding
    /// `zxid` is cut after it and fsynced. Records up to `zxid` are durable
    /// afterwards (when nothing is above `zxid` this is just a [`TxnLog::sync`]).
    /// Appends continue in a new segment.
    pub fn truncate_after(&mut self, zxid: Zxid) -> Result<()> {
        let zxid = zxid.0;
        self.check_usable()?;
        if zxid >= self.last_zxid {
            return self.sync();
        }
        self.guarded(|log| log.truncate_unchecked(zxid))
    }

    /// Iterates over the records with a zxid above `from_zxid`, up to
    /// [`TxnLog::last_zxid`] as of this call, in order. Buffered records are
    /// written out (not fsynced) first so that they are included. Recovery
    /// replays `read_from(snapshot_zxid)`.
    pub fn read_from(&mut self, from_zxid: Zxid) -> Result<LogIter> {
        self.check_usable()?;
        self.guarded(|log| match &mut log.active {
            Some(active) => active.out.flush().at(&active.path),
            None => Ok(()),
        })?;
        LogIter::over(&self.segments, from_zxid.0, self.last_zxid)
    }

    fn check_usable(&self) -> Result<()> {
        if self.poisoned {
            Err(StorageError::Poisoned)
        } else {
            Ok(())
        }
    }

    fn check_append(&self, zxid: u64, len: usize) -> Result<()> {
        if zxid <= self.last_zxid {
            return Err(StorageError::ZxidNotIncreasing {
                last: self.last_zxid,
                zxid,
            });
        }
        if len > self.opts.max_record_bytes as usize {
            return Err(StorageError::RecordTooLarge {
                len,
                max: self.opts.max_record_bytes,
            });
        }
        Ok(())
    }

    /// Runs a step that does disk I/O; if it fails the on-disk state is
    /// unknown, so the log refuses everything afterwards.
    fn guarded<T>(&mut self, step: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        let result = step(self);
        if result.is_err() {
            self.poisoned = true;
        }
        result
    }

    fn append_unchecked(&mut self, zxid: u64, body: &[u8]) -> Result<()> {
        let frame_len = RECORD_HEADER_LEN as u64 + body.len() as u64;
        if self.should_roll(frame_len) {
            self.seal_active()?;
        }
        let active = match self.active.take() {
            Some(active) => active,
            None => self.create_segment(zxid)?,
        };
        let active = self.active.insert(active);
        let header = record_header(zxid, body);
        active.out.write_all(&header).at(&active.path)?;
        active.out.write_all(body).at(&active.path)?;
        active.len += frame_len;
        active.records += 1;
        self.last_zxid = zxid;
        self.stats.appends.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn should_roll(&self, frame_len: u64) -> bool {
        self.active
            .as_ref()
            .is_some_and(|a| a.records > 0 && a.len + frame_len > self.opts.segment_bytes)
    }

    /// Writes out and fsyncs the active segment and closes it.
    fn seal_active(&mut self) -> Result<()> {
        self.write_out_active(true)?;
        self.active = None;
        Ok(())
    }

    /// Creates `log.<zxid>` with its header on disk (invariant 1).
    fn create_segment(&mut self, zxid: u64) -> Result<Active> {
        let path = self.dir.join(zxid_file_name(SEGMENT_PREFIX, zxid));
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .at(&path)?;
        file.write_all(&file_header()).at(&path)?;
        file.sync_data().at(&path)?;
        fsync_dir(&self.dir)?;
        self.stats.count_fsyncs(2);
        self.segments.push(ZxidFile {
            zxid,
            path: path.clone(),
        });
        Ok(Active {
            path,
            out: BufWriter::with_capacity(self.opts.write_buffer_bytes, file),
            len: FILE_HEADER_LEN,
            synced_len: FILE_HEADER_LEN,
            records: 0,
        })
    }

    fn sync_active(&mut self) -> Result<()> {
        self.write_out_active(self.opts.force_sync)
    }

    /// Writes out the active segment's buffer and, when `durable`,
    /// fdatasyncs it (counted as a group commit).
    fn write_out_active(&mut self, durable: bool) -> Result<()> {
        if let Some(active) = &mut self.active {
            if !durable {
                active.out.flush().at(&active.path)?;
            } else if active.synced_len < active.len {
                let started = std::time::Instant::now();
                active.out.flush().at(&active.path)?;
                active.out.get_ref().sync_data().at(&active.path)?;
                active.synced_len = active.len;
                self.stats.count_fsyncs(1);
                self.stats.commits.fetch_add(1, Ordering::Relaxed);
                self.stats
                    .commit_micros
                    .fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
            }
        }
        self.durable_zxid = self.last_zxid;
        Ok(())
    }

    fn truncate_unchecked(&mut self, zxid: u64) -> Result<()> {
        if let Some(mut active) = self.active.take() {
            active.out.flush().at(&active.path)?;
        }
        self.remove_segments_after(zxid)?;
        self.last_zxid = match self.segments.last() {
            Some(seg) => cut_segment_after(seg, zxid, &self.stats)?,
            None => 0,
        };
        self.durable_zxid = self.last_zxid;
        Ok(())
    }

    /// Deletes, newest first, the segments whose first zxid is above `zxid`.
    fn remove_segments_after(&mut self, zxid: u64) -> Result<()> {
        let mut removed = false;
        while let Some(seg) = self.segments.last() {
            if seg.zxid <= zxid {
                break;
            }
            match fs::remove_file(&seg.path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e).at(&seg.path),
                _ => {}
            }
            self.segments.pop();
            removed = true;
        }
        if removed {
            fsync_dir(&self.dir)?;
            self.stats.count_fsyncs(1);
        }
        Ok(())
    }

    /// Test hook: simulates a crash. Whatever is still in the write buffer is
    /// lost; returns the active segment and how much of it was fsynced (bytes
    /// past that may be lost too, which the caller simulates by cutting it).
    #[cfg(test)]
    pub(crate) fn crash(mut self) -> Option<(PathBuf, u64)> {
        let active = self.active.take()?;
        let (file, _lost_buffer) = active.out.into_parts();
        drop(file);
        Some((active.path, active.synced_len))
    }
}

/// Cuts `seg` right after the record with the largest zxid `<= zxid` and
/// fsyncs it; returns that zxid.
fn cut_segment_after(seg: &ZxidFile, zxid: u64, stats: &LogStats) -> Result<u64> {
    let path = &seg.path;
    let opened = open_segment(path)?;
    if let HeaderState::Invalid(problem) = opened.header {
        return Err(problem.into_error(path));
    }
    let mut file = opened.file;
    file.seek(SeekFrom::Start(FILE_HEADER_LEN)).at(path)?;
    let mut reader = RecordReader::new(BufReader::new(file), FILE_HEADER_LEN, opened.len);
    let mut kept = None;
    let cut_at = loop {
        match reader.next_frame().at(path)? {
            Frame::Record { offset, zxid: z } if z > zxid => break offset,
            Frame::Record { zxid: z, .. } => kept = Some(z),
            Frame::End | Frame::ZeroFill { .. } => break reader.valid_end(),
            Frame::Bad {
                offset,
                zxid,
                reason,
            } => return Err(corrupt(path, offset, zxid, reason)),
        }
    };
    let Some(kept) = kept else {
        return Err(corrupt(
            path,
            FILE_HEADER_LEN,
            None,
            CorruptReason::EmptySegment,
        ));
    };
    let file = OpenOptions::new().write(true).open(path).at(path)?;
    file.set_len(cut_at).at(path)?;
    file.sync_all().at(path)?;
    stats.count_fsyncs(1);
    Ok(kept)
}
