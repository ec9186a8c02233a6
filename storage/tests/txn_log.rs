//! Behavior of `TxnLog`: appends, reopen, roll-over, truncation and
//! reading (recovery from damaged files: `txn_log_recovery.rs`).

mod common;

use std::fs;

use common::*;
use wazoo_storage::Zxid;
use wazoo_storage::{read_log, LogOptions, StorageError};

#[test]
fn appended_records_read_back_identically_before_and_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, recovered) = open(dir.path(), opts());
    assert_eq!(recovered.last_zxid.0, 0);
    assert_eq!(log.last_zxid().0, 0);
    append_all(&mut log, 1..=100);
    log.append(Zxid(101), b"").unwrap(); // an empty body is a valid record
    log.sync().unwrap();
    let mut want = expected(1..=100);
    want.push((101, Vec::new()));
    assert_eq!(records(&mut log), want);
    drop(log);

    let (mut log, recovered) = open(dir.path(), opts());
    assert_eq!(recovered.last_zxid.0, 101);
    assert_eq!(recovered.first_zxid.map(|z| z.0), Some(1));
    assert_eq!(recovered.records, 101);
    assert!(recovered.repairs.is_empty());
    assert_eq!(records(&mut log), want);
}

#[test]
fn open_creates_a_missing_directory_as_an_empty_log() {
    let dir = tempfile::tempdir().unwrap();
    let nested = dir.path().join("a/b/log");
    let (mut log, recovered) = open(&nested, opts());
    assert_eq!(recovered.records, 0);
    assert_eq!(log.first_zxid(), None);
    assert!(records(&mut log).is_empty());
    assert!(nested.is_dir());
}

#[test]
fn reopened_log_continues_after_the_last_zxid_in_a_new_segment() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = open(dir.path(), opts());
    append_all(&mut log, 1..=10);
    drop(log);
    let (mut log, _) = open(dir.path(), opts());
    assert_eq!(log.last_zxid().0, 10);
    let err = log.append(Zxid(10), b"again").unwrap_err();
    assert!(matches!(
        err,
        StorageError::ZxidNotIncreasing { last: 10, zxid: 10 }
    ));
    append_all(&mut log, 11..=20);
    drop(log);
    let files = segment_files(dir.path());
    assert_eq!(files.len(), 2, "{files:?}");
    assert!(files[1].ends_with("log.000000000000000b"));
    let (mut log, _) = open(dir.path(), opts());
    assert_eq!(records(&mut log), expected(1..=20));
}

#[test]
fn zxids_may_jump_across_epochs() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = open(dir.path(), opts());
    let zxids = [1, 2, 3, (1 << 32) | 1, (1 << 32) | 2, (7 << 32) | 1];
    append_all(&mut log, zxids);
    drop(log);
    let (mut log, _) = open(dir.path(), opts());
    assert_eq!(records(&mut log), expected(zxids));
}

#[test]
fn append_rejects_a_non_increasing_or_zero_zxid_without_writing() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = open(dir.path(), opts());
    assert!(matches!(
        log.append(Zxid(0), b"x"),
        Err(StorageError::ZxidNotIncreasing { last: 0, zxid: 0 })
    ));
    append_all(&mut log, [5]);
    assert!(matches!(
        log.append(Zxid(4), b"x"),
        Err(StorageError::ZxidNotIncreasing { last: 5, zxid: 4 })
    ));
    // The log is still usable after a rejected append.
    append_all(&mut log, [6]);
    assert_eq!(records(&mut log), expected([5, 6]));
}

#[test]
fn append_rejects_a_body_above_max_record_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let opts = LogOptions {
        max_record_bytes: 10,
        ..LogOptions::default()
    };
    let (mut log, _) = open(dir.path(), opts);
    log.append(Zxid(1), &[7; 10]).unwrap();
    let err = log.append(Zxid(2), &[7; 11]).unwrap_err();
    assert!(matches!(
        err,
        StorageError::RecordTooLarge { len: 11, max: 10 }
    ));
    log.append(Zxid(2), &[8; 3]).unwrap();
    log.sync().unwrap();
    assert_eq!(records(&mut log), vec![(1, vec![7; 10]), (2, vec![8; 3])]);
}

#[test]
fn segments_roll_over_at_the_configured_size_and_are_named_after_their_first_zxid() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = open(dir.path(), small_segments());
    append_all(&mut log, 1..=40);
    log.append(Zxid(41), &[1; 500]).unwrap(); // larger than a segment: gets its own
    append_all(&mut log, 42..=43);
    let files = segment_files(dir.path());
    assert!(files.len() > 5, "rolled into several segments: {files:?}");
    assert_eq!(log.segment_paths(), files);
    let mut prev_first = 0;
    for file in &files {
        let len = fs::metadata(file).unwrap().len();
        let offsets = record_offsets(file);
        let bytes = fs::read(file).unwrap();
        let first = u64::from_be_bytes(bytes[16..24].try_into().unwrap());
        let name = file.file_name().unwrap().to_str().unwrap();
        assert_eq!(name, format!("log.{first:016x}"));
        assert!(first > prev_first);
        prev_first = first;
        assert!(
            len <= 200 || offsets.len() == 1,
            "{name} is {len} bytes with {} records",
            offsets.len()
        );
    }
    let big = dir.path().join(format!("log.{:016x}", 41));
    assert_eq!(record_offsets(&big).len(), 1);
    drop(log);
    let (mut log, recovered) = open(dir.path(), small_segments());
    assert_eq!(recovered.segments, files.len());
    let mut want = expected(1..=40);
    want.push((41, vec![1; 500]));
    want.extend(expected(42..=43));
    assert_eq!(records(&mut log), want);
}

#[test]
fn sync_issues_one_commit_per_batch_and_none_when_nothing_is_pending() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = open(dir.path(), opts());
    let stats = log.stats();
    append_all(&mut log, 1..=50);
    assert_eq!(stats.commits(), 1);
    assert_eq!(stats.appends(), 50);
    log.sync().unwrap();
    assert_eq!(stats.commits(), 1);
    assert_eq!(log.durable_zxid().0, 50);
    log.append(Zxid(51), b"x").unwrap();
    assert_eq!(log.durable_zxid().0, 50);
    log.sync().unwrap();
    assert_eq!(stats.commits(), 2);
    assert_eq!(log.durable_zxid().0, 51);
}

#[test]
fn read_from_returns_only_records_after_the_given_zxid_across_segments() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = open(dir.path(), small_segments());
    append_all(&mut log, (1..=60).map(|z| z * 2));
    for from in [0, 1, 2, 3, 57, 58, 100, 119, 120, 1000] {
        let got: Vec<u64> = log
            .read_from(Zxid(from))
            .unwrap()
            .map(|r| r.unwrap().zxid.0)
            .collect();
        let want: Vec<u64> = (1..=60).map(|z| z * 2).filter(|&z| z > from).collect();
        assert_eq!(got, want, "from {from}");
    }
}

#[test]
fn read_from_includes_buffered_unsynced_records() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = open(dir.path(), opts());
    append_all(&mut log, 1..=3);
    log.append(Zxid(4), &body(4)).unwrap();
    assert_eq!(records(&mut log), expected(1..=4));
}

#[test]
fn read_log_stops_at_up_to_zxid_while_later_records_are_still_buffered() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = open(dir.path(), small_segments());
    append_all(&mut log, 1..=30);
    for z in 31..=35 {
        log.append(Zxid(z), &body(z)).unwrap();
    }
    // A roll-over syncs the finished segment, so a few of 31..=35 may be durable.
    let durable = log.durable_zxid().0;
    assert!((30..35).contains(&durable), "durable {durable}");
    let all: Vec<_> = read_log(dir.path(), Zxid(0), Zxid(durable))
        .unwrap()
        .map(|r| r.map(|r| (r.zxid.0, r.body)).unwrap())
        .collect();
    assert_eq!(all, expected(1..=durable));
    let middle: Vec<u64> = read_log(dir.path(), Zxid(10), Zxid(20))
        .unwrap()
        .map(|r| r.unwrap().zxid.0)
        .collect();
    assert_eq!(middle, (11..=20).collect::<Vec<_>>());
    assert_eq!(read_log(dir.path(), Zxid(20), Zxid(20)).unwrap().count(), 0);
}

#[test]
fn truncate_after_drops_later_records_durably_and_appending_continues() {
    let source = tempfile::tempdir().unwrap();
    let (mut log, _) = open(source.path(), small_segments());
    append_all(&mut log, 1..=30);
    let firsts: Vec<u64> = log
        .segment_paths()
        .iter()
        .map(|p| u64::from_str_radix(&p.file_name().unwrap().to_str().unwrap()[4..], 16).unwrap())
        .collect();
    drop(log);
    let boundary = firsts[2];
    let points = [
        0,
        1,
        5,
        boundary - 1,
        boundary,
        boundary + 1,
        17,
        29,
        30,
        31,
        1000,
    ];
    for t in points {
        let dir = copy_dir(source.path());
        let (mut log, _) = open(dir.path(), small_segments());
        log.truncate_after(Zxid(t)).unwrap();
        let kept = t.min(30);
        assert_eq!(log.last_zxid().0, kept, "truncate_after({t})");
        assert_eq!(log.durable_zxid().0, kept);
        assert_eq!(records(&mut log), expected(1..=kept), "truncate_after({t})");
        for file in segment_files(dir.path()) {
            let first = u64::from_str_radix(&file.file_name().unwrap().to_str().unwrap()[4..], 16);
            assert!(first.unwrap() <= t, "segment {file:?} starts after {t}");
        }
        // Appends continue, with new zxids and new bodies, after the cut.
        for z in kept + 1..=kept + 3 {
            log.append(Zxid(z), b"new history").unwrap();
        }
        log.sync().unwrap();
        drop(log);
        let (mut log, recovered) = open(dir.path(), small_segments());
        assert!(recovered.repairs.is_empty());
        let mut want = expected(1..=kept);
        want.extend((kept + 1..=kept + 3).map(|z| (z, b"new history".to_vec())));
        assert_eq!(
            records(&mut log),
            want,
            "after truncate_after({t}) and reopen"
        );
    }
}

#[test]
fn truncate_after_discards_buffered_records_above_the_cut_too() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = open(dir.path(), opts());
    append_all(&mut log, 1..=5);
    for z in 6..=9 {
        log.append(Zxid(z), &body(z)).unwrap();
    }
    log.truncate_after(Zxid(7)).unwrap();
    assert_eq!(records(&mut log), expected(1..=7));
    drop(log);
    let (mut log, _) = open(dir.path(), opts());
    assert_eq!(records(&mut log), expected(1..=7));
}

// ZooKeeper Administrator's Guide, "Advanced Configuration", forceSync:
// with `no`, a sync hands the records to the OS without fdatasync (and
// counts no group commit, as ZooKeeper records no fsync time); the records
// are still readable, and still there after a reopen (the process, not the
// machine, went away).
#[test]
fn without_force_sync_a_sync_writes_the_records_out_without_fdatasync() {
    let dir = tempfile::tempdir().unwrap();
    let no_sync = LogOptions {
        force_sync: false,
        ..opts()
    };
    let (mut log, _) = open(dir.path(), no_sync.clone());
    let stats = log.stats();
    // The first record creates the segment, which is synced.
    append_all(&mut log, 1..=1);
    let fsyncs_with_segment = stats.fsyncs();
    append_all(&mut log, 2..=3);
    log.sync().unwrap();
    assert_eq!(stats.commits(), 0, "no group commit counted");
    assert_eq!(stats.fsyncs(), fsyncs_with_segment, "no fdatasync issued");
    assert_eq!(log.durable_zxid().0, 3, "handed to the OS");
    drop(log);
    let (mut log, recovered) = open(dir.path(), no_sync);
    assert_eq!(recovered.last_zxid.0, 3);
    assert_eq!(records(&mut log), expected(1..=3));

    // The default syncs.
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = open(dir.path(), opts());
    append_all(&mut log, 1..=3);
    log.sync().unwrap();
    assert_eq!(log.stats().commits(), 1);
}
