//! Recovery of a `TxnLog` from a torn or zero-filled tail (repaired) versus
//! corruption (refused, naming the file and the offset).

mod common;

use std::fs;
use std::path::Path;

use common::*;
use wazoo_storage::Zxid;
use wazoo_storage::{CorruptReason, LogOptions, Repair, StorageError, TailDefect, TxnLog};

fn open_err(dir: &Path, opts: LogOptions) -> StorageError {
    TxnLog::open(dir, opts).expect_err("open must fail")
}

/// Asserts that opening `dir` reports corruption in `file` at `offset`, with
/// a message naming the file and saying the log is corrupt.
fn assert_corrupt_at(dir: &Path, file: &Path, offset: u64) -> CorruptReason {
    let err = open_err(dir, small_segments());
    let msg = err.to_string();
    assert!(msg.contains("corrupt"), "message says corrupt: {msg}");
    assert!(
        msg.contains(&file.display().to_string()),
        "message names {}: {msg}",
        file.display()
    );
    match err {
        StorageError::Corrupt {
            file: f,
            offset: o,
            reason,
            ..
        } => {
            assert_eq!(f, file);
            assert_eq!(o, offset, "offset of the bad record ({reason})");
            reason
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

/// Builds a log of records 1..=`n` with small segments; returns its dir and
/// the last segment's path.
fn build_log(n: u64) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = open(dir.path(), small_segments());
    append_all(&mut log, 1..=n);
    drop(log);
    let files = segment_files(dir.path());
    assert!(files.len() >= 3, "test needs several segments");
    let last = files.last().unwrap().clone();
    assert!(
        record_offsets(&last).len() >= 2,
        "test needs several records in the last segment"
    );
    (dir, last)
}

/// Zxids of the records in all segments but the last, plus those of the
/// last segment (starting at `first_in_last`) that end at or before `cut`.
fn surviving(n: u64, last: &Path, cut: u64) -> Vec<u64> {
    let offsets = record_offsets(last);
    let len = fs::metadata(last).unwrap().len();
    let first_in_last = n + 1 - offsets.len() as u64;
    let mut ends: Vec<u64> = offsets[1..].to_vec();
    ends.push(len);
    let whole = ends.iter().filter(|&&end| end <= cut).count() as u64;
    (1..first_in_last + whole).collect()
}

#[test]
fn torn_tail_cut_at_every_byte_offset_of_the_last_segment_is_repaired_keeping_every_complete_record(
) {
    let n = 23;
    let (source, last) = build_log(n);
    let len = fs::metadata(&last).unwrap().len();
    for cut in 0..len {
        let (dir, _) = copy_with_cut(source.path(), &last, cut);
        let (mut log, recovered) = TxnLog::open(dir.path(), small_segments())
            .unwrap_or_else(|e| panic!("cut at {cut}: open failed: {e}"));
        let want = surviving(n, &last, cut);
        assert_eq!(records(&mut log), expected(want.clone()), "cut at {cut}");
        assert_eq!(log.last_zxid().0, *want.last().unwrap());
        let at_record_end = record_offsets(&last).contains(&cut);
        if !at_record_end {
            assert!(
                !recovered.repairs.is_empty(),
                "cut at {cut} reports a repair"
            );
        }
        // The repaired log accepts the lost records again.
        append_all(&mut log, want.len() as u64 + 1..=n);
        drop(log);
        let (mut log, recovered) = open(dir.path(), small_segments());
        assert!(recovered.repairs.is_empty());
        assert_eq!(
            records(&mut log),
            expected(1..=n),
            "cut at {cut}, rewritten"
        );
    }
}

/// Header end and record end of every record of `path`.
fn record_extents(path: &Path) -> Vec<(u64, u64, u64)> {
    let bytes = fs::read(path).unwrap();
    record_offsets(path)
        .into_iter()
        .map(|at| {
            let i = at as usize;
            let len = u32::from_be_bytes(bytes[i..i + 4].try_into().unwrap());
            (at, at + 16, at + 16 + u64::from(len))
        })
        .collect()
}

/// Replaces the bytes of `path` from `start` on with zeros and appends
/// `extra` more zeros (a file extended without its data).
fn zero_from(path: &Path, start: u64, extra: usize) {
    let mut bytes = fs::read(path).unwrap();
    bytes[start as usize..].fill(0);
    bytes.extend(vec![0u8; extra]);
    fs::write(path, bytes).unwrap();
}

#[test]
fn zero_fill_from_a_record_boundary_or_a_header_end_of_the_last_segment_is_cut() {
    let n = 23;
    let (source, last) = build_log(n);
    for (start, header_end, _) in record_extents(&last) {
        for (zeros_at, extra) in [(start, 100), (header_end, 0), (header_end, 100)] {
            let dir = copy_dir(source.path());
            let file = dir.path().join(last.file_name().unwrap());
            zero_from(&file, zeros_at, extra);
            let (mut log, recovered) = TxnLog::open(dir.path(), small_segments())
                .unwrap_or_else(|e| panic!("zeros from {zeros_at}: open failed: {e}"));
            assert_eq!(
                records(&mut log),
                expected(surviving(n, &last, start)),
                "zeros from {zeros_at}"
            );
            // Cutting the first record of the segment empties it: it is removed.
            let removed = [Repair::RemovedEmptySegment { file: file.clone() }];
            assert!(
                matches!(
                    &recovered.repairs[..],
                    [Repair::TruncatedTail { offset, cause: TailDefect::ZeroFill | TailDefect::LostWrite { .. }, .. }, rest @ ..]
                        if *offset == start && (rest.is_empty() || rest == removed)
                ),
                "zeros from {zeros_at}: {:?}",
                recovered.repairs
            );
            if file.exists() {
                assert_eq!(fs::metadata(&file).unwrap().len(), start);
            }
        }
    }
}

#[test]
fn zeros_from_inside_a_record_body_at_no_sector_boundary_are_corruption_and_the_file_is_untouched()
{
    // A crash loses whole sectors, or the data after the end of a write
    // call (a record end or a header end); zeros that start in the middle of
    // a body, in a segment shorter than a sector, are none of those.
    let (source, last) = build_log(23);
    assert!(fs::metadata(&last).unwrap().len() < 512);
    let before = fs::read(&last).unwrap();
    let mut checked = 0;
    for (start, header_end, end) in record_extents(&last) {
        let zeros_at = header_end + 1;
        if zeros_at >= end || before[header_end as usize] == 0 {
            continue; // no body byte to keep in front of the zeros
        }
        checked += 1;
        let dir = copy_dir(source.path());
        let file = dir.path().join(last.file_name().unwrap());
        zero_from(&file, zeros_at, 0);
        let damaged = fs::read(&file).unwrap();
        let reason = assert_corrupt_at(dir.path(), &file, start);
        assert!(
            matches!(reason, CorruptReason::ChecksumMismatch { .. }),
            "zeros from {zeros_at}: {reason}"
        );
        assert_eq!(fs::read(&file).unwrap(), damaged, "file left untouched");
    }
    assert!(checked >= 2, "the test damaged {checked} records");
}

/// A log whose last segment holds records of `body_len` bytes of non-zero
/// data, so that they span sector boundaries. Returns the dir, the last
/// segment and the extents of its records.
#[allow(clippy::type_complexity)]
fn log_with_large_records(
    body_len: usize,
    tail: &[u8],
) -> (tempfile::TempDir, std::path::PathBuf, Vec<(u64, u64, u64)>) {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = open(dir.path(), opts());
    for z in 1..=4u64 {
        let mut body: Vec<u8> = (0..body_len).map(|i| (i % 251) as u8 + 1).collect();
        body[0] = z as u8;
        if z == 4 {
            body.extend_from_slice(tail);
        }
        log.append(Zxid(z), &body).unwrap();
    }
    log.sync().unwrap();
    drop(log);
    let last = segment_files(dir.path()).pop().unwrap();
    let extents = record_extents(&last);
    (dir, last, extents)
}

#[test]
fn last_record_zero_filled_from_a_sector_boundary_on_is_a_lost_write_and_is_cut() {
    let (source, last, extents) = log_with_large_records(1500, &[]);
    let (start, header_end, end) = *extents.last().unwrap();
    let first_sector = header_end.next_multiple_of(512);
    assert!(first_sector + 512 < end, "the last record spans sectors");
    for zeros_at in [first_sector, first_sector + 512] {
        let dir = copy_dir(source.path());
        let file = dir.path().join(last.file_name().unwrap());
        zero_from(&file, zeros_at, 0);
        let (mut log, recovered) = TxnLog::open(dir.path(), opts())
            .unwrap_or_else(|e| panic!("zeros from {zeros_at}: {e}"));
        assert_eq!(
            recovered.repairs,
            vec![Repair::TruncatedTail {
                file: file.clone(),
                offset: start,
                dropped_bytes: end - start,
                cause: TailDefect::LostWrite {
                    zeros_from: zeros_at,
                    reason: match &recovered.repairs[0] {
                        Repair::TruncatedTail {
                            cause: TailDefect::LostWrite { reason, .. },
                            ..
                        } => reason.clone(),
                        other => panic!("zeros from {zeros_at}: {other:?}"),
                    },
                },
            }]
        );
        let zxids: Vec<u64> = records(&mut log).into_iter().map(|r| r.0).collect();
        assert_eq!(zxids, vec![1, 2, 3]);
    }
    // Zeros that start one byte past the last sector boundary of the record:
    // that sector was written, so they are not a lost write.
    let last_sector = (end - 1) / 512 * 512;
    assert!(last_sector > header_end && end - last_sector > 2);
    let dir = copy_dir(source.path());
    let file = dir.path().join(last.file_name().unwrap());
    zero_from(&file, last_sector + 1, 0);
    assert_corrupt_at(dir.path(), &file, start);
}

#[test]
fn bit_flip_in_a_last_record_that_ends_in_zero_sectors_is_still_corruption() {
    // A body that really ends in zeros across a sector boundary looks like a
    // lost write once damaged; a single flipped bit is told apart by the CRC.
    let (source, last, extents) = log_with_large_records(1500, &[0u8; 1100]);
    let (start, header_end, end) = *extents.last().unwrap();
    assert!(end - header_end >= 2600);
    for offset in [start + 9, header_end, header_end + 700, header_end + 1499] {
        let dir = copy_dir(source.path());
        let file = dir.path().join(last.file_name().unwrap());
        flip_bit(&file, offset, 3);
        assert_corrupt_at(dir.path(), &file, start);
    }
}

#[test]
fn zero_filled_tail_of_the_last_segment_is_truncated_and_reported() {
    let (dir, last) = build_log(23);
    let len = fs::metadata(&last).unwrap().len();
    let mut bytes = fs::read(&last).unwrap();
    bytes.extend([0u8; 4096]);
    fs::write(&last, bytes).unwrap();
    let (mut log, recovered) = open(dir.path(), small_segments());
    assert_eq!(
        recovered.repairs,
        vec![Repair::TruncatedTail {
            file: last.clone(),
            offset: len,
            dropped_bytes: 4096,
            cause: TailDefect::ZeroFill,
        }]
    );
    assert_eq!(fs::metadata(&last).unwrap().len(), len);
    assert_eq!(records(&mut log), expected(1..=23));
}

#[test]
fn zero_fill_at_the_end_of_a_segment_that_is_not_the_last_is_corruption() {
    // A segment is fsynced whole before the next one is created and is never
    // zero-filled, so zeros at its end replaced data: maybe its last records.
    let (source, _) = build_log(23);
    let first = segment_files(source.path())[0].clone();
    let offsets = record_offsets(&first);
    let len = fs::metadata(&first).unwrap().len();
    let last_record = *offsets.last().unwrap();
    for (zeros_at, extra) in [(len, 300), (last_record, 0)] {
        let dir = copy_dir(source.path());
        let file = dir.path().join(first.file_name().unwrap());
        zero_from(&file, zeros_at, extra);
        let damaged = fs::read(&file).unwrap();
        let reason = assert_corrupt_at(dir.path(), &file, zeros_at);
        assert_eq!(reason, CorruptReason::ZeroFillInSealedSegment);
        assert_eq!(fs::read(&file).unwrap(), damaged, "file left untouched");
    }
}

#[test]
fn flipped_bit_anywhere_in_the_complete_last_record_is_corruption_and_the_file_is_untouched() {
    // The record was fsynced, so it may have been acknowledged: cutting it
    // as if it were torn would lose a committed write. Apache ZooKeeper
    // refuses to start on it ("CRC check failed"), and so does wazoo. A flip
    // in the length field that makes the record seem to run past the end of
    // the file is recognized by the CRC matching the bytes that are there.
    let n = 23;
    let (source, last) = build_log(n);
    let start = *record_offsets(&last).last().unwrap();
    let len = fs::metadata(&last).unwrap().len();
    for offset in start..len {
        for bit in 0..8 {
            let dir = copy_dir(source.path());
            let file = dir.path().join(last.file_name().unwrap());
            flip_bit(&file, offset, bit);
            let damaged = fs::read(&file).unwrap();
            let reason = assert_corrupt_at(dir.path(), &file, start);
            assert!(
                matches!(
                    reason,
                    CorruptReason::ChecksumMismatch { .. } | CorruptReason::DamagedLength { .. }
                ),
                "bit {bit} of byte {offset}: {reason}"
            );
            assert_eq!(
                fs::read(&file).unwrap(),
                damaged,
                "bit {bit} of byte {offset}: file left untouched"
            );
        }
    }
}

#[test]
fn corruption_error_names_file_offset_zxid_and_what_an_operator_can_do() {
    let (dir, last) = build_log(23);
    let start = *record_offsets(&last).last().unwrap();
    flip_bit(&last, start + 20, 1);
    let err = open_err(dir.path(), small_segments());
    let msg = err.to_string();
    for needle in [
        last.display().to_string(),
        format!("byte offset {start}"),
        "record zxid 0x17".to_string(),
        "checksum mismatch".to_string(),
        "refuses to start".to_string(),
        "resyncs from the other members".to_string(),
        "restore".to_string(),
    ] {
        assert!(msg.contains(&needle), "message mentions {needle:?}: {msg}");
    }
    assert!(matches!(err, StorageError::Corrupt { zxid: Some(23), .. }));
}

#[test]
fn flipped_high_bit_of_the_last_record_length_is_a_damaged_length_not_a_short_write() {
    let (dir, last) = build_log(23);
    let start = *record_offsets(&last).last().unwrap();
    flip_bit(&last, start, 6); // length + 2^30: seems to run past the file
    let reason = assert_corrupt_at(dir.path(), &last, start);
    assert!(
        matches!(reason, CorruptReason::DamagedLength { declared, actual } if declared == actual | 1 << 30),
        "{reason}"
    );
}

#[test]
fn short_write_of_the_last_record_mid_header_or_mid_body_is_cut_and_reported() {
    let n = 23;
    let (source, last) = build_log(n);
    let (start, header_end, end) = *record_extents(&last).last().unwrap();
    for (cut, want_header) in [
        (start + 7, true),
        (header_end + (end - header_end) / 2, false),
    ] {
        let (dir, file) = copy_with_cut(source.path(), &last, cut);
        let (mut log, recovered) = open(dir.path(), small_segments());
        let [Repair::TruncatedTail {
            offset,
            dropped_bytes,
            cause: TailDefect::Torn(reason),
            ..
        }] = &recovered.repairs[..]
        else {
            panic!("cut at {cut}: {:?}", recovered.repairs);
        };
        assert_eq!((*offset, *dropped_bytes), (start, cut - start));
        if want_header {
            assert_eq!(
                *reason,
                CorruptReason::TruncatedRecordHeader { available: 7 }
            );
        } else {
            assert!(
                matches!(reason, CorruptReason::TruncatedBody { .. }),
                "{reason}"
            );
        }
        assert_eq!(records(&mut log), expected(1..n));
        assert_eq!(fs::metadata(&file).unwrap().len(), start);
    }
}

#[test]
fn flipped_bit_anywhere_in_a_middle_record_is_corruption_naming_file_and_offset() {
    let (source, last) = build_log(23);
    let offsets = record_offsets(&last);
    let (start, end) = (offsets[0], offsets[1]);
    for offset in start..end {
        for bit in 0..8 {
            let dir = copy_dir(source.path());
            let file = dir.path().join(last.file_name().unwrap());
            flip_bit(&file, offset, bit);
            assert_corrupt_at(dir.path(), &file, start);
        }
    }
}

#[test]
fn bad_record_at_the_end_of_a_non_last_segment_is_corruption() {
    let (source, _) = build_log(23);
    let first = segment_files(source.path())[0].clone();
    let last_record = *record_offsets(&first).last().unwrap();
    let len = fs::metadata(&first).unwrap().len();

    let dir = copy_dir(source.path());
    let file = dir.path().join(first.file_name().unwrap());
    flip_bit(&file, len - 1, 0);
    let reason = assert_corrupt_at(dir.path(), &file, last_record);
    assert!(
        matches!(reason, CorruptReason::ChecksumMismatch { .. }),
        "{reason}"
    );

    let (dir, file) = copy_with_cut(source.path(), &first, len - 1);
    let reason = assert_corrupt_at(dir.path(), &file, last_record);
    assert!(
        matches!(reason, CorruptReason::TruncatedBody { .. }),
        "{reason}"
    );
}

#[test]
fn garbage_after_the_records_of_the_last_segment_followed_by_a_valid_record_is_corruption() {
    let (dir, last) = build_log(23);
    let offsets = record_offsets(&last);
    let mut bytes = fs::read(&last).unwrap();
    // Overwrite the record header of the second-to-last record with zeros:
    // a zeroed hole in front of a valid record is not a torn tail.
    let at = offsets[offsets.len() - 2] as usize;
    bytes[at..at + 16].fill(0);
    fs::write(&last, bytes).unwrap();
    let reason = assert_corrupt_at(dir.path(), &last, at as u64);
    assert!(
        matches!(reason, CorruptReason::DataAfterZeroFill { .. }),
        "{reason}"
    );
}

#[test]
fn segment_whose_first_record_does_not_match_its_name_is_corruption() {
    let (dir, _) = build_log(23);
    let files = segment_files(dir.path());
    let renamed = dir.path().join("log.0000000000000002");
    fs::rename(&files[0], &renamed).unwrap();
    let reason = assert_corrupt_at(dir.path(), &renamed, 8);
    assert_eq!(
        reason,
        CorruptReason::FirstZxidMismatch { named: 2, found: 1 }
    );
}

#[test]
fn segments_out_of_zxid_order_are_corruption() {
    let (dir, _) = build_log(23);
    let files = segment_files(dir.path());
    // Duplicate the second segment's records under a later name.
    let later = dir.path().join(format!("log.{:016x}", 1000));
    fs::copy(&files[1], &later).unwrap();
    let err = open_err(dir.path(), small_segments());
    assert!(matches!(err, StorageError::Corrupt { .. }), "{err}");
}

#[test]
fn garbage_file_named_like_a_segment_is_a_bad_magic_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.0000000000000001");
    fs::write(&path, b"this is not a log segment at all").unwrap();
    let err = open_err(dir.path(), opts());
    assert!(
        matches!(&err, StorageError::BadMagic { file, .. } if *file == path),
        "{err}"
    );
    assert!(err.to_string().contains("log.0000000000000001"));

    fs::write(&path, b"ZK").unwrap(); // too short and not a header prefix
    assert!(matches!(
        open_err(dir.path(), opts()),
        StorageError::BadMagic { .. }
    ));
}

#[test]
fn segment_of_another_format_version_is_an_unsupported_version_error() {
    let (dir, _) = build_log(23);
    let first = segment_files(dir.path())[0].clone();
    let mut bytes = fs::read(&first).unwrap();
    bytes[4..8].copy_from_slice(&2u32.to_be_bytes());
    fs::write(&first, bytes).unwrap();
    let err = open_err(dir.path(), small_segments());
    assert!(
        matches!(
            err,
            StorageError::UnsupportedVersion {
                found: 2,
                supported: 1,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn files_not_named_like_segments_are_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = open(dir.path(), opts());
    append_all(&mut log, 1..=3);
    drop(log);
    for name in [
        "README",
        "log.notahex",
        "log.1.bak",
        "snapshot.1",
        "mylog.1",
    ] {
        fs::write(dir.path().join(name), b"garbage").unwrap();
    }
    fs::create_dir(dir.path().join("log.2")).unwrap();
    let (mut log, _) = open(dir.path(), opts());
    assert_eq!(records(&mut log), expected(1..=3));
}

#[test]
fn last_segment_with_a_torn_header_is_removed_but_an_earlier_one_is_corruption() {
    let (source, _) = build_log(23);
    for content in [&b""[..], b"WZ", b"WZLG\0\0", b"\0\0\0\0\0\0\0\0\0\0\0\0"] {
        let dir = copy_dir(source.path());
        let torn = dir.path().join(format!("log.{:016x}", 24));
        fs::write(&torn, content).unwrap();
        let (mut log, recovered) = open(dir.path(), small_segments());
        assert_eq!(
            recovered.repairs,
            vec![Repair::RemovedEmptySegment { file: torn.clone() }]
        );
        assert!(!torn.exists());
        assert_eq!(records(&mut log), expected(1..=23));
        append_all(&mut log, [24]);
    }
    let dir = copy_dir(source.path());
    let torn = dir.path().join("log.0000000000000000");
    fs::write(&torn, b"WZ").unwrap();
    let reason = assert_corrupt_at(dir.path(), &torn, 0);
    assert_eq!(reason, CorruptReason::TruncatedFileHeader { available: 2 });
}

#[test]
fn two_segments_naming_the_same_zxid_are_rejected() {
    let (dir, _) = build_log(23);
    let first = segment_files(dir.path())[0].clone();
    fs::copy(&first, dir.path().join("log.1")).unwrap();
    let err = open_err(dir.path(), small_segments());
    assert!(
        matches!(err, StorageError::DuplicateSegment { zxid: 1, .. }),
        "{err}"
    );
}

#[test]
fn unpadded_segment_names_are_read() {
    let (dir, _) = build_log(23);
    let files = segment_files(dir.path());
    let first = &files[0];
    fs::rename(first, dir.path().join("log.1")).unwrap();
    let (mut log, _) = open(dir.path(), small_segments());
    assert_eq!(records(&mut log), expected(1..=23));
}

#[test]
fn after_an_io_failure_the_log_refuses_further_operations() {
    let dir = tempfile::tempdir().unwrap();
    let log_dir = dir.path().join("log");
    let (mut log, _) = open(&log_dir, opts());
    fs::remove_dir_all(&log_dir).unwrap();
    assert!(matches!(
        log.append(Zxid(1), b"x"),
        Err(StorageError::Io { .. })
    ));
    assert!(matches!(
        log.append(Zxid(2), b"x"),
        Err(StorageError::Poisoned)
    ));
    assert!(matches!(log.sync(), Err(StorageError::Poisoned)));
    assert!(matches!(
        log.truncate_after(Zxid(0)),
        Err(StorageError::Poisoned)
    ));
    assert!(matches!(
        log.read_from(Zxid(0)),
        Err(StorageError::Poisoned)
    ));
}
