//! Snapshots: the serialized state machine at some zxid, written atomically
//! and checksummed. The payload is opaque to this crate.
//!
//! # Fuzzy snapshots and recovery
//!
//! As in ZooKeeper, a snapshot is *fuzzy*: the state machine keeps applying
//! transactions while it is serialized, so `snapshot.<S>` (named after the
//! last zxid applied when serialization *started*) may already contain the
//! effects of some transactions after `S`. Recovery is therefore:
//!
//! 1. `S` = [`latest_valid_snapshot`]; load it with [`read_snapshot`];
//! 2. replay every log record with zxid `> S`, in order
//!    ([`crate::TxnLog::read_from`]`(S)`).
//!
//! Replaying a transaction the snapshot already contains must be harmless:
//! the state machine's transactions are idempotent when applied in zxid
//! order on top of a fuzzy snapshot (ZooKeeper's `DataTree` relies on the
//! same property). This crate never interprets payloads or records.
//!
//! # File format
//!
//! ```text
//! snapshot.<zxid, 16 hex digits>:
//!   magic      4 bytes  "WZSN"
//!   version    u32 BE   1
//!   zxid       u64 BE   same as the file name
//!   payload    ...      whatever the caller wrote
//!   length     u64 BE   payload length
//!   crc        u32 BE   CRC32 of magic, version, zxid and payload
//!   end magic  4 bytes  "WZSE"
//! ```
//!
//! A snapshot is written to `snapshot.<zxid>.tmp`, fsynced, renamed into place
//! and the directory fsynced. A crash leaves at worst a `.tmp` file, which
//! readers ignore and [`crate::purge`] removes; a torn or bit-rotten snapshot
//! fails the trailer or CRC check and is skipped by [`latest_valid_snapshot`].

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::error::{IoContext, Result, SnapshotDefect, StorageError};
use crate::fsutil::{fsync_dir, list_zxid_files, parse_zxid_file_name, read_full, zxid_file_name};
use crate::Zxid;

/// File name prefix of snapshots: `snapshot.<zxid, 16 hex digits>`.
pub(crate) const SNAPSHOT_PREFIX: &str = "snapshot.";
/// Suffix of a snapshot being written.
pub(crate) const TMP_SUFFIX: &str = ".tmp";
const MAGIC: [u8; 4] = *b"WZSN";
const END_MAGIC: [u8; 4] = *b"WZSE";
const VERSION: u32 = 1;
pub(crate) const HEADER_LEN: u64 = 16;
const TRAILER_LEN: u64 = 16;

/// Writes `snapshot.<zxid>` in `dir` atomically; returns its path.
///
/// `write_payload` streams the serialized state into the writer it is given.
/// If it (or any write) fails, no snapshot appears and the temporary file is
/// removed. An existing snapshot with the same zxid is replaced atomically.
pub fn write_snapshot<F>(dir: impl AsRef<Path>, zxid: Zxid, write_payload: F) -> Result<PathBuf>
where
    F: FnOnce(&mut dyn Write) -> io::Result<()>,
{
    let dir = dir.as_ref();
    fs::create_dir_all(dir).at(dir)?;
    let zxid = zxid.0;
    let name = zxid_file_name(SNAPSHOT_PREFIX, zxid);
    let path = dir.join(&name);
    let tmp = dir.join(format!("{name}{TMP_SUFFIX}"));
    if let Err(e) = write_tmp(&tmp, zxid, write_payload) {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    fs::rename(&tmp, &path).at(&path)?;
    fsync_dir(dir)?;
    Ok(path)
}

/// Writes header, payload and trailer to `tmp` and fsyncs it.
fn write_tmp<F>(tmp: &Path, zxid: u64, write_payload: F) -> Result<()>
where
    F: FnOnce(&mut dyn Write) -> io::Result<()>,
{
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(tmp)
        .at(tmp)?;
    let mut out = CrcWriter::new(BufWriter::new(file));
    out.write_all(&header(zxid)).at(tmp)?;
    write_payload(&mut out).at(tmp)?;
    let payload_len = out.written - HEADER_LEN;
    let (mut inner, crc) = out.finish();
    inner.write_all(&trailer(payload_len, crc)).at(tmp)?;
    let file = inner.into_inner().map_err(|e| e.into_error()).at(tmp)?;
    file.sync_all().at(tmp)
}

/// Reads a whole snapshot, verifies it, and returns its payload.
pub fn read_snapshot(path: impl AsRef<Path>) -> Result<Vec<u8>> {
    let path = path.as_ref();
    let mut data = Vec::new();
    File::open(path)
        .and_then(|mut f| f.read_to_end(&mut data))
        .at(path)?;
    let invalid = |defect| invalid(path, defect);
    let len = data.len() as u64;
    if len < HEADER_LEN + TRAILER_LEN {
        return Err(invalid(SnapshotDefect::TooShort { len }));
    }
    let (head, rest) = data.split_at(HEADER_LEN as usize);
    let (payload, tail) = rest.split_at(rest.len() - TRAILER_LEN as usize);
    let zxid = parse_header(head).map_err(invalid)?;
    check_name(path, zxid)?;
    let (stored_len, stored_crc) = parse_trailer(tail).map_err(invalid)?;
    check_length(stored_len, payload.len() as u64).map_err(invalid)?;
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(head);
    hasher.update(payload);
    check_crc(stored_crc, hasher.finalize()).map_err(invalid)?;
    data.truncate(data.len() - TRAILER_LEN as usize);
    data.drain(..HEADER_LEN as usize);
    Ok(data)
}

/// Verifies a snapshot without keeping it in memory; returns its zxid.
/// Fails with [`StorageError::InvalidSnapshot`] if it is torn or damaged.
pub fn verify_snapshot(path: impl AsRef<Path>) -> Result<Zxid> {
    let path = path.as_ref();
    let invalid = |defect| invalid(path, defect);
    let mut file = File::open(path).at(path)?;
    let len = file.metadata().at(path)?.len();
    if len < HEADER_LEN + TRAILER_LEN {
        return Err(invalid(SnapshotDefect::TooShort { len }));
    }
    let mut head = [0u8; HEADER_LEN as usize];
    file.read_exact(&mut head).at(path)?;
    let zxid = parse_header(&head).map_err(invalid)?;
    check_name(path, zxid)?;
    let mut tail = [0u8; TRAILER_LEN as usize];
    file.seek(SeekFrom::Start(len - TRAILER_LEN)).at(path)?;
    file.read_exact(&mut tail).at(path)?;
    let (stored_len, stored_crc) = parse_trailer(&tail).map_err(invalid)?;
    check_length(stored_len, len - HEADER_LEN - TRAILER_LEN).map_err(invalid)?;
    file.seek(SeekFrom::Start(0)).at(path)?;
    let computed = crc_of_prefix(file, len - TRAILER_LEN).at(path)?;
    check_crc(stored_crc, computed).map_err(invalid)?;
    Ok(Zxid(zxid))
}

/// The valid snapshot with the highest zxid in `dir`, if any. Invalid ones
/// are skipped with a `tracing::warn!`, falling back to older snapshots;
/// `.tmp` leftovers are ignored. A missing directory has no snapshot.
pub fn latest_valid_snapshot(dir: impl AsRef<Path>) -> Result<Option<(Zxid, PathBuf)>> {
    for (zxid, path) in list_snapshots(dir)?.into_iter().rev() {
        match verify_snapshot(&path) {
            Ok(_) => return Ok(Some((zxid, path))),
            Err(error) if is_skippable(&error) => {
                tracing::warn!(file = %path.display(), %error, "skipping invalid snapshot; falling back to an older one");
            }
            Err(error) => return Err(error),
        }
    }
    Ok(None)
}

/// The snapshot files in `dir` (valid or not), oldest first, with the zxids
/// their names carry.
pub fn list_snapshots(dir: impl AsRef<Path>) -> Result<Vec<(Zxid, PathBuf)>> {
    let files = list_zxid_files(dir.as_ref(), SNAPSHOT_PREFIX, |_| {})?;
    Ok(files.into_iter().map(|f| (Zxid(f.zxid), f.path)).collect())
}

/// Errors that make one snapshot unusable without making the others suspect:
/// a bad file, or a file that vanished (a concurrent purge).
pub(crate) fn is_skippable(error: &StorageError) -> bool {
    match error {
        StorageError::InvalidSnapshot { .. } => true,
        StorageError::Io { source, .. } => source.kind() == io::ErrorKind::NotFound,
        _ => false,
    }
}

fn invalid(path: &Path, defect: SnapshotDefect) -> StorageError {
    StorageError::InvalidSnapshot {
        file: path.to_path_buf(),
        defect,
    }
}

pub(crate) fn header(zxid: u64) -> [u8; HEADER_LEN as usize] {
    let mut h = [0u8; HEADER_LEN as usize];
    h[..4].copy_from_slice(&MAGIC);
    h[4..8].copy_from_slice(&VERSION.to_be_bytes());
    h[8..].copy_from_slice(&zxid.to_be_bytes());
    h
}

pub(crate) fn trailer(payload_len: u64, crc: u32) -> [u8; TRAILER_LEN as usize] {
    let mut t = [0u8; TRAILER_LEN as usize];
    t[..8].copy_from_slice(&payload_len.to_be_bytes());
    t[8..12].copy_from_slice(&crc.to_be_bytes());
    t[12..].copy_from_slice(&END_MAGIC);
    t
}

/// Returns the zxid of a header (16 bytes).
fn parse_header(h: &[u8]) -> std::result::Result<u64, SnapshotDefect> {
    if h[..4] != MAGIC {
        return Err(SnapshotDefect::BadMagic);
    }
    let version = u32::from_be_bytes([h[4], h[5], h[6], h[7]]);
    if version != VERSION {
        return Err(SnapshotDefect::UnsupportedVersion { found: version });
    }
    Ok(be_u64(&h[8..16]))
}

/// Returns (payload length, crc) of a trailer (16 bytes).
fn parse_trailer(t: &[u8]) -> std::result::Result<(u64, u32), SnapshotDefect> {
    if t[12..16] != END_MAGIC {
        return Err(SnapshotDefect::BadTrailer);
    }
    let crc = u32::from_be_bytes([t[8], t[9], t[10], t[11]]);
    Ok((be_u64(&t[..8]), crc))
}

fn be_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

fn check_length(stored: u64, actual: u64) -> std::result::Result<(), SnapshotDefect> {
    if stored == actual {
        Ok(())
    } else {
        Err(SnapshotDefect::LengthMismatch { stored, actual })
    }
}

fn check_crc(stored: u32, computed: u32) -> std::result::Result<(), SnapshotDefect> {
    if stored == computed {
        Ok(())
    } else {
        Err(SnapshotDefect::ChecksumMismatch { stored, computed })
    }
}

/// A snapshot renamed to another zxid would make recovery replay from the
/// wrong point: the header must agree with a `snapshot.<hex>` name.
fn check_name(path: &Path, header_zxid: u64) -> Result<()> {
    let named = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| parse_zxid_file_name(n, SNAPSHOT_PREFIX));
    match named {
        Some(named) if named != header_zxid => Err(invalid(
            path,
            SnapshotDefect::ZxidMismatch {
                named,
                header: header_zxid,
            },
        )),
        _ => Ok(()),
    }
}

/// CRC32 of the first `len` bytes of `file`, streamed.
fn crc_of_prefix(file: File, len: u64) -> io::Result<u32> {
    let mut reader = BufReader::new(file).take(len);
    let mut hasher = crc32fast::Hasher::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = read_full(&mut reader, &mut chunk)?;
        hasher.update(&chunk[..n]);
        if n < chunk.len() {
            return Ok(hasher.finalize());
        }
    }
}

/// A writer that checksums and counts what goes through it.
pub(crate) struct CrcWriter<W> {
    inner: W,
    hasher: crc32fast::Hasher,
    pub(crate) written: u64,
}

impl<W: Write> CrcWriter<W> {
    pub(crate) fn new(inner: W) -> Self {
        Self {
            inner,
            hasher: crc32fast::Hasher::new(),
            written: 0,
        }
    }

    pub(crate) fn finish(self) -> (W, u32) {
        (self.inner, self.hasher.finalize())
    }
}

impl<W: Write> Write for CrcWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}
