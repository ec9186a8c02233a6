//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};

use wazoo_storage::Zxid;
use wazoo_storage::{LogOptions, Recovered, StorageError, TxnLog};

/// A deterministic body for `zxid`, of a length that varies with it.
pub fn body(zxid: u64) -> Vec<u8> {
    let len = (zxid % 37) as usize + 1;
    (0..len)
        .map(|i| (zxid as u8).wrapping_mul(31).wrapping_add(i as u8))
        .collect()
}

pub fn opts() -> LogOptions {
    LogOptions::default()
}

/// Options that roll a segment every few records.
pub fn small_segments() -> LogOptions {
    LogOptions {
        segment_bytes: 200,
        ..LogOptions::default()
    }
}

pub fn open(dir: &Path, opts: LogOptions) -> (TxnLog, Recovered) {
    TxnLog::open(dir, opts).expect("log opens")
}

/// Appends `body(z)` for each zxid, then syncs.
pub fn append_all(log: &mut TxnLog, zxids: impl IntoIterator<Item = u64>) {
    for z in zxids {
        log.append(Zxid(z), &body(z)).expect("append");
    }
    log.sync().expect("sync");
}

/// Every record of the log, in order.
pub fn records(log: &mut TxnLog) -> Vec<(u64, Vec<u8>)> {
    log.read_from(Zxid(0))
        .expect("read_from")
        .map(|r| r.map(|r| (r.zxid.0, r.body)))
        .collect::<Result<_, StorageError>>()
        .expect("records read back")
}

/// The model of what `append_all` wrote.
pub fn expected(zxids: impl IntoIterator<Item = u64>) -> Vec<(u64, Vec<u8>)> {
    zxids.into_iter().map(|z| (z, body(z))).collect()
}

/// Segment files in `dir`, oldest first.
pub fn segment_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("log."))
        })
        .collect();
    files.sort();
    files
}

/// Copies every file of `from` into a fresh temp dir.
pub fn copy_dir(from: &Path) -> tempfile::TempDir {
    let to = tempfile::tempdir().unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        fs::copy(entry.path(), to.path().join(entry.file_name())).unwrap();
    }
    to
}

/// A copy of the log directory `from` whose file `segment` (a path in
/// `from`) is cut to `len` bytes, as a crash mid-write leaves it; the cut
/// file's path in the copy.
pub fn copy_with_cut(from: &Path, segment: &Path, len: u64) -> (tempfile::TempDir, PathBuf) {
    let dir = copy_dir(from);
    let file = dir.path().join(segment.file_name().unwrap());
    fs::OpenOptions::new()
        .write(true)
        .open(&file)
        .unwrap()
        .set_len(len)
        .unwrap();
    (dir, file)
}

/// Flips one bit of the byte at `offset` of `path`.
pub fn flip_bit(path: &Path, offset: u64, bit: u8) {
    let mut bytes = fs::read(path).unwrap();
    bytes[offset as usize] ^= 1 << bit;
    fs::write(path, bytes).unwrap();
}

/// Byte offsets where each record of a segment starts (parsing our own
/// documented grammar: 8-byte header, then length-prefixed records).
pub fn record_offsets(path: &Path) -> Vec<u64> {
    let bytes = fs::read(path).unwrap();
    let mut offsets = Vec::new();
    let mut at = 8usize;
    while at + 16 <= bytes.len() {
        let len = u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        offsets.push(at as u64);
        at += 16 + len;
    }
    offsets
}
