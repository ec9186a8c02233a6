//! Garbage over the last complete records of the log is corruption, not a
//! torn write: the records were fsynced and may have been acknowledged, so
//! the log refuses to open (naming file, offset and zxid) unless the operator
//! accepts the loss with `LogOptions::truncate_corrupt_tail`.
//!
//! Apache ZooKeeper 3.8 refuses to start on such a log too ("CRC check
//! failed", Administrator's Guide, "Data File Management": the transaction
//! log is what makes acknowledged writes durable).

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use common::*;
use wazoo_storage::{CorruptReason, LogOptions, Repair, StorageError, TailDefect, TxnLog, Zxid};

/// Zxids as an ensemble writes them: epoch 1, counters from 1.
fn zxids(n: u64) -> Vec<u64> {
    (1..=n).map(|c| (1 << 32) | c).collect()
}

/// A one-segment log of `n` records (all fsynced), and its segment.
fn build(n: u64) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = open(dir.path(), opts());
    append_all(&mut log, zxids(n));
    drop(log);
    let files = segment_files(dir.path());
    assert_eq!(files.len(), 1);
    (dir, files[0].clone())
}

/// splitmix64: seeded, reproducible garbage without a dependency.
fn garbage(seed: u64, len: usize) -> Vec<u8> {
    let mut state = seed;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        out.extend_from_slice(&(z ^ (z >> 31)).to_be_bytes());
    }
    out.truncate(len);
    out
}

/// Overwrites the last `k` records of `file` with garbage of the same length
/// (the file keeps its size); returns the offset of the first overwritten one.
fn overwrite_last_records(file: &Path, k: usize, seed: u64) -> u64 {
    let offsets = record_offsets(file);
    let from = offsets[offsets.len() - k];
    let mut bytes = fs::read(file).unwrap();
    let len = bytes.len() - from as usize;
    bytes[from as usize..].copy_from_slice(&garbage(seed, len));
    fs::write(file, bytes).unwrap();
    from
}

#[test]
fn random_bytes_over_the_last_records_refuse_the_open_naming_file_offset_and_the_override() {
    // The probe of the issue: 3 acknowledged records overwritten. Also 1 and
    // 2, and many seeds: a garbled header declares a length that runs past
    // the end of the file, which used to pass for a short write.
    let n = 40;
    let (source, seg) = build(n);
    for k in 1..=3 {
        for seed in 0..300 {
            let dir = copy_dir(source.path());
            let file = dir.path().join(seg.file_name().unwrap());
            let at = overwrite_last_records(&file, k, seed);
            let damaged = fs::read(&file).unwrap();
            let err = TxnLog::open(dir.path(), opts()).expect_err("must refuse");
            let msg = err.to_string();
            let StorageError::Corrupt {
                file: f, offset, ..
            } = &err
            else {
                panic!("k={k} seed={seed}: expected Corrupt, got {err:?}");
            };
            assert_eq!(f, &file, "k={k} seed={seed}");
            assert_eq!(*offset, at, "k={k} seed={seed}: {msg}");
            assert!(msg.contains(&file.display().to_string()), "{msg}");
            assert!(msg.contains(&format!("offset {at}")), "{msg}");
            assert!(msg.contains("--truncate-corrupt-log-tail"), "{msg}");
            assert_eq!(fs::read(&file).unwrap(), damaged, "file left untouched");
        }
    }
}

#[test]
fn a_garbled_header_whose_length_runs_past_the_end_is_named_garbled() {
    // The header of the last record declares a huge body and a zxid out of
    // nowhere: exactly what made the old rule call it a short write.
    let (dir, seg) = build(10);
    let at = record_offsets(&seg)[9];
    let mut bytes = fs::read(&seg).unwrap();
    let i = at as usize;
    bytes[i..i + 4].copy_from_slice(&0x7A3C_11F0u32.to_be_bytes());
    bytes[i + 8..i + 16].copy_from_slice(&0x9C4D_2E11_0B7A_55E3u64.to_be_bytes());
    fs::write(&seg, bytes).unwrap();
    match TxnLog::open(dir.path(), opts()).expect_err("must refuse") {
        StorageError::Corrupt {
            offset,
            zxid,
            reason: CorruptReason::GarbledHeader { len, previous, .. },
            ..
        } => {
            assert_eq!(offset, at);
            assert_eq!(zxid, Some(0x9C4D_2E11_0B7A_55E3));
            assert_eq!(len, 0x7A3C_11F0);
            assert_eq!(previous, (1 << 32) | 9);
        }
        other => panic!("expected a garbled header, got {other:?}"),
    }
}

#[test]
fn a_short_write_of_a_record_in_a_new_epoch_is_still_cut() {
    // A real torn write has the header the writer wrote: its zxid follows
    // the previous one (here the first of the next epoch), its length is one
    // the writer accepts.
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = open(dir.path(), opts());
    append_all(&mut log, zxids(5));
    log.append(Zxid((2 << 32) | 1), &[9u8; 100]).unwrap();
    log.sync().unwrap();
    drop(log);
    let seg = segment_files(dir.path())[0].clone();
    let last = *record_offsets(&seg).last().unwrap();
    let f = fs::OpenOptions::new().write(true).open(&seg).unwrap();
    f.set_len(last + 16 + 40).unwrap();
    drop(f);
    let (mut log, recovered) = open(dir.path(), opts());
    assert!(matches!(
        recovered.repairs.as_slice(),
        [Repair::TruncatedTail {
            offset,
            cause: TailDefect::Torn(CorruptReason::TruncatedBody { .. }),
            ..
        }] if *offset == last
    ));
    assert_eq!(records(&mut log), expected(zxids(5)));
}

fn accept_loss() -> LogOptions {
    LogOptions {
        truncate_corrupt_tail: true,
        ..LogOptions::default()
    }
}

#[test]
fn with_truncate_corrupt_tail_the_log_is_cut_at_the_first_bad_record_and_keeps_the_rest() {
    let n = 40;
    let (dir, seg) = build(n);
    let size = fs::metadata(&seg).unwrap().len();
    let at = overwrite_last_records(&seg, 3, 7);
    let (mut log, recovered) = open(dir.path(), accept_loss());
    match recovered.repairs.as_slice() {
        [Repair::TruncatedCorruption {
            file,
            offset,
            dropped_bytes,
            removed_segments,
            ..
        }] => {
            assert_eq!(file, &seg);
            assert_eq!(*offset, at);
            assert_eq!(*dropped_bytes, size - at);
            assert!(removed_segments.is_empty());
        }
        other => panic!("expected one TruncatedCorruption, got {other:?}"),
    }
    assert_eq!(recovered.last_zxid, Zxid((1 << 32) | (n - 3)));
    assert_eq!(records(&mut log), expected(zxids(n - 3)));
    assert_eq!(fs::metadata(&seg).unwrap().len(), at);
    // The log goes on from there, and opens without the option afterwards.
    log.append(Zxid((1 << 32) | (n - 2)), b"again").unwrap();
    log.sync().unwrap();
    drop(log);
    let (_, again) = open(dir.path(), opts());
    assert!(again.repairs.is_empty());
    assert_eq!(again.last_zxid, Zxid((1 << 32) | (n - 2)));
}

#[test]
fn with_truncate_corrupt_tail_corruption_in_an_earlier_segment_drops_every_later_one() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = open(dir.path(), small_segments());
    append_all(&mut log, 1..=23);
    drop(log);
    let files = segment_files(dir.path());
    assert!(files.len() >= 3);
    let middle = &files[1];
    let bad = record_offsets(middle)[1];
    flip_bit(middle, bad + 20, 3);
    // Refused without the option...
    assert!(matches!(
        TxnLog::open(dir.path(), small_segments()),
        Err(StorageError::Corrupt { .. })
    ));
    // ...cut with it: the middle segment at its bad record, the rest deleted.
    let opts = LogOptions {
        truncate_corrupt_tail: true,
        ..small_segments()
    };
    let (mut log, recovered) = open(dir.path(), opts);
    let [Repair::TruncatedCorruption {
        file,
        offset,
        removed_segments,
        ..
    }] = recovered.repairs.as_slice()
    else {
        panic!("expected one TruncatedCorruption: {:?}", recovered.repairs);
    };
    assert_eq!((file, *offset), (middle, bad));
    assert_eq!(removed_segments.as_slice(), &files[2..]);
    assert_eq!(segment_files(dir.path()), &files[..2]);
    let kept = records(&mut log);
    let first_of_middle = kept.len() as u64;
    assert_eq!(kept, expected(1..=first_of_middle));
    assert_eq!(
        record_offsets(middle).len(),
        1,
        "the middle segment keeps the record before the bad one"
    );
}
