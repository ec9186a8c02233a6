//! Behavior of snapshots (atomic write, validation, fallback), purge, and
//! the recovery contract (newest valid snapshot + replay of later records).

mod common;

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

use common::*;
use wazoo_storage::Zxid;
use wazoo_storage::{
    latest_valid_snapshot, list_snapshots, purge, read_log, read_snapshot, verify_snapshot,
    write_snapshot, SnapshotDefect, StorageError, TxnLog, MIN_SNAP_RETAIN_COUNT,
};

fn payload(zxid: u64) -> Vec<u8> {
    format!("state as of {zxid:#x}").repeat(50).into_bytes()
}

fn snap(dir: &Path, zxid: u64) -> std::path::PathBuf {
    write_snapshot(dir, Zxid(zxid), |w| w.write_all(&payload(zxid))).unwrap()
}

#[test]
fn snapshot_round_trips_its_payload_and_is_named_after_its_zxid() {
    let dir = tempfile::tempdir().unwrap();
    let zxid = (3 << 32) | 17;
    let path = snap(dir.path(), zxid);
    assert_eq!(path.file_name().unwrap(), "snapshot.0000000300000011");
    assert_eq!(read_snapshot(&path).unwrap(), payload(zxid));
    assert_eq!(verify_snapshot(&path).unwrap().0, zxid);
    assert_eq!(
        latest_valid_snapshot(dir.path()).unwrap(),
        Some((Zxid(zxid), path))
    );
}

#[test]
fn empty_payload_and_payload_written_in_many_pieces_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let empty = write_snapshot(dir.path(), Zxid(1), |_| Ok(())).unwrap();
    assert_eq!(read_snapshot(&empty).unwrap(), Vec::<u8>::new());
    let pieces = write_snapshot(dir.path(), Zxid(2), |w| {
        for i in 0..10_000u32 {
            w.write_all(&i.to_be_bytes())?;
        }
        Ok(())
    })
    .unwrap();
    let want: Vec<u8> = (0..10_000u32).flat_map(|i| i.to_be_bytes()).collect();
    assert_eq!(read_snapshot(&pieces).unwrap(), want);
}

#[test]
fn missing_or_empty_snapshot_directory_has_no_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(latest_valid_snapshot(dir.path()).unwrap(), None);
    assert_eq!(
        latest_valid_snapshot(dir.path().join("nope")).unwrap(),
        None
    );
}

#[test]
fn failed_snapshot_writer_leaves_neither_snapshot_nor_temp_file() {
    let dir = tempfile::tempdir().unwrap();
    snap(dir.path(), 5);
    let err = write_snapshot(dir.path(), Zxid(9), |w| {
        w.write_all(b"half of the state")?;
        Err(io::Error::other("serializer failed"))
    })
    .unwrap_err();
    assert!(err.to_string().contains("serializer failed"), "{err}");
    let names: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec!["snapshot.0000000000000005"]);
    assert_eq!(
        latest_valid_snapshot(dir.path()).unwrap().unwrap().0,
        Zxid(5)
    );
}

#[test]
fn leftover_temp_file_of_a_crashed_snapshot_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let good = snap(dir.path(), 5);
    // A crash mid-write leaves a partial temp file with a newer zxid.
    fs::write(
        dir.path().join("snapshot.0000000000000009.tmp"),
        b"WZSN partial",
    )
    .unwrap();
    assert_eq!(
        latest_valid_snapshot(dir.path()).unwrap(),
        Some((Zxid(5), good))
    );
    assert_eq!(list_snapshots(dir.path()).unwrap().len(), 1);
}

#[test]
fn corrupted_newest_snapshot_falls_back_to_the_previous_valid_one() {
    let dir = tempfile::tempdir().unwrap();
    let older = snap(dir.path(), 5);
    let newer = snap(dir.path(), 9);
    flip_bit(&newer, 100, 3);
    assert!(matches!(
        read_snapshot(&newer),
        Err(StorageError::InvalidSnapshot {
            defect: SnapshotDefect::ChecksumMismatch { .. },
            ..
        })
    ));
    assert_eq!(
        latest_valid_snapshot(dir.path()).unwrap(),
        Some((Zxid(5), older))
    );
}

#[test]
fn snapshot_torn_at_any_length_is_detected_as_invalid() {
    let dir = tempfile::tempdir().unwrap();
    let path = snap(dir.path(), 9);
    let full = fs::read(&path).unwrap();
    for cut in 0..full.len() {
        fs::write(&path, &full[..cut]).unwrap();
        let err = verify_snapshot(&path).unwrap_err();
        assert!(
            matches!(err, StorageError::InvalidSnapshot { .. }),
            "cut {cut}: {err}"
        );
        assert!(read_snapshot(&path).is_err(), "cut {cut}");
    }
    fs::write(&path, &full).unwrap();
    assert_eq!(verify_snapshot(&path).unwrap().0, 9);
}

#[test]
fn snapshot_with_any_flipped_bit_is_detected_as_invalid() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_snapshot(dir.path(), Zxid(9), |w| w.write_all(b"small state")).unwrap();
    let len = fs::metadata(&path).unwrap().len();
    for offset in 0..len {
        for bit in 0..8 {
            flip_bit(&path, offset, bit);
            assert!(
                verify_snapshot(&path).is_err(),
                "bit {bit} of byte {offset}"
            );
            assert!(read_snapshot(&path).is_err(), "bit {bit} of byte {offset}");
            flip_bit(&path, offset, bit);
        }
    }
    assert_eq!(read_snapshot(&path).unwrap(), b"small state");
}

#[test]
fn snapshot_renamed_to_another_zxid_is_invalid() {
    let dir = tempfile::tempdir().unwrap();
    let path = snap(dir.path(), 9);
    let renamed = dir.path().join("snapshot.000000000000000a");
    fs::rename(&path, &renamed).unwrap();
    assert!(matches!(
        verify_snapshot(&renamed),
        Err(StorageError::InvalidSnapshot {
            defect: SnapshotDefect::ZxidMismatch {
                named: 10,
                header: 9
            },
            ..
        })
    ));
    assert_eq!(latest_valid_snapshot(dir.path()).unwrap(), None);
}

#[test]
fn garbage_file_named_like_a_snapshot_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let good = snap(dir.path(), 5);
    fs::write(
        dir.path().join("snapshot.0000000000000009"),
        vec![0xAB; 100],
    )
    .unwrap();
    fs::write(dir.path().join("snapshot.000000000000000a"), b"").unwrap();
    assert_eq!(
        latest_valid_snapshot(dir.path()).unwrap(),
        Some((Zxid(5), good))
    );
}

#[test]
fn rewriting_a_snapshot_with_the_same_zxid_replaces_it() {
    let dir = tempfile::tempdir().unwrap();
    write_snapshot(dir.path(), Zxid(5), |w| w.write_all(b"first")).unwrap();
    let path = write_snapshot(dir.path(), Zxid(5), |w| w.write_all(b"second")).unwrap();
    assert_eq!(read_snapshot(path).unwrap(), b"second");
}

#[test]
fn purge_refuses_a_retain_count_below_three() {
    let dir = tempfile::tempdir().unwrap();
    let err = purge(dir.path(), dir.path(), 2).unwrap_err();
    assert!(matches!(
        err,
        StorageError::RetainCountTooSmall {
            given: 2,
            min: MIN_SNAP_RETAIN_COUNT
        }
    ));
}

/// A log in `log_dir` with records 1..=60 in several segments, and snapshots
/// at 10, 20, ..., 50 in `snap_dir`.
fn build_data(snap_dir: &Path, log_dir: &Path) -> Vec<u64> {
    let (mut log, _) = open(log_dir, small_segments());
    append_all(&mut log, 1..=60);
    for zxid in [10, 20, 30, 40, 50] {
        snap(snap_dir, zxid);
    }
    log.segment_paths()
        .iter()
        .map(|p| u64::from_str_radix(&p.file_name().unwrap().to_str().unwrap()[4..], 16).unwrap())
        .collect()
}

fn check_purge_keeps_what_recovery_needs(snap_dir: &Path, log_dir: &Path) {
    let firsts = build_data(snap_dir, log_dir);
    fs::write(snap_dir.join("snapshot.0000000000000003.tmp"), b"stale").unwrap();
    fs::write(
        snap_dir.join("snapshot.0000000000000063.tmp"),
        b"in progress",
    )
    .unwrap();

    let report = purge(snap_dir, log_dir, 3).unwrap();

    assert_eq!(report.oldest_kept_snapshot, Some(Zxid(30)));
    let kept: Vec<u64> = list_snapshots(snap_dir)
        .unwrap()
        .iter()
        .map(|s| s.0 .0)
        .collect();
    assert_eq!(kept, vec![30, 40, 50]);
    assert!(!snap_dir.join("snapshot.0000000000000003.tmp").exists());
    assert!(snap_dir.join("snapshot.0000000000000063.tmp").exists());
    // The segment holding the records right after 30 and all later ones stay.
    let needed_from = *firsts.iter().filter(|&&f| f <= 30).max().unwrap();
    let remaining: Vec<u64> = segment_files(log_dir)
        .iter()
        .map(|p| u64::from_str_radix(&p.file_name().unwrap().to_str().unwrap()[4..], 16).unwrap())
        .collect();
    let want: Vec<u64> = firsts
        .iter()
        .copied()
        .filter(|&f| f >= needed_from)
        .collect();
    assert_eq!(remaining, want);
    assert_eq!(report.removed_segments.len(), firsts.len() - want.len());
    assert!(!report.removed_segments.is_empty());
    // Recovery from the oldest kept snapshot still replays every later record.
    let replay: Vec<u64> = read_log(log_dir, Zxid(30), Zxid(60))
        .unwrap()
        .map(|r| r.unwrap().zxid.0)
        .collect();
    assert_eq!(replay, (31..=60).collect::<Vec<_>>());
    let (mut log, _) = open(log_dir, small_segments());
    let all: Vec<u64> = records(&mut log).iter().map(|r| r.0).collect();
    assert_eq!(all, (needed_from..=60).collect::<Vec<_>>());
}

#[test]
fn purge_keeps_newest_snapshots_and_the_segments_to_replay_from_the_oldest_kept_separate_dirs() {
    let dir = tempfile::tempdir().unwrap();
    check_purge_keeps_what_recovery_needs(&dir.path().join("data"), &dir.path().join("datalog"));
}

#[test]
fn purge_keeps_newest_snapshots_and_the_segments_to_replay_from_the_oldest_kept_shared_dir() {
    let dir = tempfile::tempdir().unwrap();
    check_purge_keeps_what_recovery_needs(dir.path(), dir.path());
}

#[test]
fn purge_does_not_count_invalid_snapshots_towards_the_retain_count() {
    let dir = tempfile::tempdir().unwrap();
    let (snap_dir, log_dir) = (dir.path().join("data"), dir.path().join("log"));
    build_data(&snap_dir, &log_dir);
    let newest = snap_dir.join("snapshot.0000000000000032"); // zxid 50
    flip_bit(&newest, 20, 0);
    let report = purge(&snap_dir, &log_dir, 3).unwrap();
    assert_eq!(report.oldest_kept_snapshot, Some(Zxid(20)));
    let kept: Vec<u64> = list_snapshots(&snap_dir)
        .unwrap()
        .iter()
        .map(|s| s.0 .0)
        .collect();
    assert_eq!(kept, vec![20, 30, 40, 50]);
}

#[test]
fn purge_deletes_nothing_while_fewer_valid_snapshots_than_the_retain_count_exist() {
    let dir = tempfile::tempdir().unwrap();
    let (snap_dir, log_dir) = (dir.path().join("data"), dir.path().join("log"));
    build_data(&snap_dir, &log_dir);
    let segments = segment_files(&log_dir);
    let report = purge(&snap_dir, &log_dir, 6).unwrap();
    assert_eq!(report.oldest_kept_snapshot, None);
    assert!(report.removed_snapshots.is_empty() && report.removed_segments.is_empty());
    assert_eq!(list_snapshots(&snap_dir).unwrap().len(), 5);
    assert_eq!(segment_files(&log_dir), segments);
}

#[test]
fn purge_while_a_log_is_open_leaves_it_appendable_and_readable() {
    let dir = tempfile::tempdir().unwrap();
    let (snap_dir, log_dir) = (dir.path().join("data"), dir.path().join("log"));
    build_data(&snap_dir, &log_dir);
    let (mut log, _) = open(&log_dir, small_segments());
    let iter = log.read_from(Zxid(0)).unwrap(); // opened before the purge
    purge(&snap_dir, &log_dir, 3).unwrap();
    let before: Vec<u64> = iter.map(|r| r.unwrap().zxid.0).collect();
    assert_eq!(before, (1..=60).collect::<Vec<_>>());
    append_all(&mut log, 61..=70);
    let after: Vec<u64> = log
        .read_from(Zxid(30))
        .unwrap()
        .map(|r| r.unwrap().zxid.0)
        .collect();
    assert_eq!(after, (31..=70).collect::<Vec<_>>());
}

/// A toy state machine: the state is the sum of the records' first bytes,
/// serialized as 8 bytes. Applying record z sets `applied = z`, so replaying
/// a record the fuzzy snapshot already contains is idempotent.
#[derive(Debug, Default, PartialEq)]
struct Machine {
    applied: u64,
    total: u64,
}

impl Machine {
    fn apply(&mut self, zxid: u64, body: &[u8]) {
        if zxid > self.applied {
            self.total += u64::from(body[0]);
            self.applied = zxid;
        }
    }
    fn encode(&self) -> Vec<u8> {
        [self.applied.to_be_bytes(), self.total.to_be_bytes()].concat()
    }
    fn decode(b: &[u8]) -> Self {
        Machine {
            applied: u64::from_be_bytes(b[..8].try_into().unwrap()),
            total: u64::from_be_bytes(b[8..].try_into().unwrap()),
        }
    }
}

#[test]
fn recovery_from_newest_valid_fuzzy_snapshot_plus_replay_rebuilds_the_state() {
    let dir = tempfile::tempdir().unwrap();
    let (snap_dir, log_dir) = (dir.path().join("data"), dir.path().join("log"));
    let (mut log, _) = open(&log_dir, small_segments());
    let mut live = Machine::default();
    for z in 1..=100u64 {
        log.append(Zxid(z), &body(z)).unwrap();
        live.apply(z, &body(z));
        if z == 40 {
            // Fuzzy: named after 40 but taken after 43 was applied.
            let mut fuzzy = Machine::default();
            for y in 1..=43 {
                fuzzy.apply(y, &body(y));
            }
            write_snapshot(&snap_dir, Zxid(40), |w| w.write_all(&fuzzy.encode())).unwrap();
        }
        if z == 70 {
            write_snapshot(&snap_dir, Zxid(70), |w| w.write_all(&live.encode())).unwrap();
        }
    }
    log.sync().unwrap();
    drop(log);
    // The newest snapshot rots: recovery must fall back to the fuzzy one.
    flip_bit(&snap_dir.join("snapshot.0000000000000046"), 17, 1);

    let (mut log, _) = TxnLog::open(&log_dir, small_segments()).unwrap();
    let (snap_zxid, path) = latest_valid_snapshot(&snap_dir).unwrap().unwrap();
    assert_eq!(snap_zxid, Zxid(40));
    let mut recovered = Machine::decode(&read_snapshot(path).unwrap());
    for record in log.read_from(snap_zxid).unwrap() {
        let record = record.unwrap();
        recovered.apply(record.zxid.0, &record.body);
    }
    assert_eq!(recovered, live);
}

#[test]
fn snapshot_write_is_atomic_with_respect_to_a_crash_between_temp_and_rename() {
    // Simulate the state after a crash before the rename: only a complete
    // temp file exists. It must not be taken for a snapshot.
    let dir = tempfile::tempdir().unwrap();
    let path = snap(dir.path(), 9);
    let tmp = dir.path().join("snapshot.0000000000000009.tmp");
    fs::rename(&path, &tmp).unwrap();
    assert_eq!(latest_valid_snapshot(dir.path()).unwrap(), None);
    // A later snapshot at the same zxid overwrites the leftover temp file.
    OpenOptions::new()
        .append(true)
        .open(&tmp)
        .unwrap()
        .write_all(b"junk")
        .unwrap();
    let path = snap(dir.path(), 9);
    assert!(!tmp.exists());
    assert_eq!(read_snapshot(path).unwrap(), payload(9));
}

#[test]
fn after_purge_every_fallback_snapshot_is_covered_by_the_log_and_none_left_is_detectable() {
    // A snapshot whose checksum fails is never loaded; recovery falls back to
    // an older valid one, which is only usable if the log still holds every
    // record after it. Purge keeps the log from its oldest kept valid
    // snapshot, so each fallback a rotting disk can force stays covered; once
    // no valid snapshot is left, the log visibly does not start at zxid 1,
    // which a caller must refuse rather than start from an empty state.
    let dir = tempfile::tempdir().unwrap();
    let (snap_dir, log_dir) = (dir.path().join("data"), dir.path().join("log"));
    build_data(&snap_dir, &log_dir);
    purge(&snap_dir, &log_dir, 3).unwrap();
    for (rotten, fallback) in [(50, Some(40)), (40, Some(30)), (30, None)] {
        flip_bit(&snap_dir.join(format!("snapshot.{rotten:016x}")), 30, 2);
        let (mut log, recovered) = open(&log_dir, small_segments());
        let first = recovered.first_zxid.map(|z| z.0).unwrap();
        match latest_valid_snapshot(&snap_dir).unwrap() {
            Some((zxid, path)) => {
                let zxid = zxid.0;
                assert_eq!(Some(zxid), fallback, "after {rotten} rotted");
                assert_eq!(read_snapshot(&path).unwrap(), payload(zxid));
                assert!(first <= zxid + 1, "log starts at {first}, snapshot {zxid}");
                let replay: Vec<u64> = log
                    .read_from(Zxid(zxid))
                    .unwrap()
                    .map(|r| r.unwrap().zxid.0)
                    .collect();
                assert_eq!(replay, (zxid + 1..=60).collect::<Vec<_>>());
            }
            None => {
                assert_eq!(fallback, None, "after {rotten} rotted");
                assert!(first > 1, "the purged log no longer starts at zxid 1");
            }
        }
        let rotten_path = snap_dir.join(format!("snapshot.{rotten:016x}"));
        assert!(
            matches!(
                read_snapshot(&rotten_path),
                Err(StorageError::InvalidSnapshot { .. })
            ),
            "a snapshot whose checksum fails is never loaded"
        );
    }
}
