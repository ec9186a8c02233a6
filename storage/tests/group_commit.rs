//! Behavior of `GroupCommitLog`: batching into few fsyncs, durability
//! reports, caller-contract errors and writer failures. No timing is used:
//! batching is forced deterministically by holding the writer inside its
//! first durability callback until every append is queued.

mod common;

use std::fs;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;

use common::*;
use wazoo_storage::Zxid;
use wazoo_storage::{
    DurabilityReport, GroupCommitLog, GroupCommitOptions, LogOptions, StorageError, TryAppendError,
};

/// A callback that forwards reports as owned values.
fn forward(tx: mpsc::Sender<Result<u64, String>>) -> impl FnMut(DurabilityReport<'_>) + Send {
    move |report| {
        let _ = tx.send(report.map(|z| z.0).map_err(|e| e.to_string()));
    }
}

#[test]
fn appends_from_several_threads_are_committed_in_at_most_two_fsync_batches() {
    const THREADS: u64 = 4;
    const PER_THREAD: u64 = 250;
    const TOTAL: u64 = THREADS * PER_THREAD;
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = open(dir.path(), opts());
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let (report_tx, report_rx) = mpsc::channel();
    let mut first = true;
    let on_durable = move |report: DurabilityReport<'_>| {
        if first {
            // Hold the writer here until every append has been queued, so
            // that all of them are waiting when it drains the queue next.
            first = false;
            release_rx.recv().unwrap();
        }
        report_tx
            .send(report.map(|z| z.0).map_err(|e| e.to_string()))
            .unwrap();
    };
    let gc_opts = GroupCommitOptions {
        queue_capacity: TOTAL as usize,
        ..GroupCommitOptions::default()
    };
    let gcl = Arc::new(GroupCommitLog::start(log, gc_opts, on_durable).unwrap());
    let stats = gcl.stats();

    // Zxids are handed out and queued under one lock, as the ZAB core does.
    let next_zxid = Arc::new(Mutex::new(0u64));
    let producers: Vec<_> = (0..THREADS)
        .map(|_| {
            let gcl = Arc::clone(&gcl);
            let next_zxid = Arc::clone(&next_zxid);
            thread::spawn(move || {
                for _ in 0..PER_THREAD {
                    let mut z = next_zxid.lock().unwrap();
                    *z += 1;
                    gcl.append(Zxid(*z), body(*z)).unwrap();
                }
            })
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    release_tx.send(()).unwrap();

    let mut reported = Vec::new();
    while reported.last() != Some(&TOTAL) {
        reported.push(report_rx.recv().unwrap().unwrap());
    }
    assert!(reported.windows(2).all(|w| w[0] < w[1]), "{reported:?}");
    assert!(reported.len() <= 2, "batches reported: {reported:?}");
    assert!(stats.commits() <= 2, "commits: {}", stats.commits());
    assert_eq!(stats.appends(), TOTAL);
    assert_eq!(gcl.durable_zxid().0, TOTAL);

    let gcl = Arc::into_inner(gcl).unwrap();
    let mut log = gcl.shutdown().unwrap();
    assert_eq!(records(&mut log), expected(1..=TOTAL));
    drop(log);
    let (mut log, _) = open(dir.path(), opts());
    assert_eq!(records(&mut log), expected(1..=TOTAL));
}

#[test]
fn every_append_is_reported_durable_in_increasing_order() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = open(dir.path(), small_segments());
    let (tx, rx) = mpsc::channel();
    let gcl = GroupCommitLog::start(log, GroupCommitOptions::default(), forward(tx)).unwrap();
    for z in 1..=300 {
        gcl.append(Zxid(z), body(z)).unwrap();
    }
    let mut last = 0;
    while last < 300 {
        let z = rx.recv().unwrap().unwrap();
        assert!(z > last);
        last = z;
    }
    let mut log = gcl.shutdown().unwrap();
    assert_eq!(records(&mut log), expected(1..=300));
}

#[test]
fn shutdown_commits_everything_still_queued() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = open(dir.path(), opts());
    let gcl = GroupCommitLog::start(log, GroupCommitOptions::default(), |_| {}).unwrap();
    for z in 1..=100 {
        gcl.append(Zxid(z), body(z)).unwrap();
    }
    let log = gcl.shutdown().unwrap();
    assert_eq!(log.durable_zxid().0, 100);
    drop(log);
    let (mut log, _) = open(dir.path(), opts());
    assert_eq!(records(&mut log), expected(1..=100));
}

#[test]
fn caller_contract_violations_are_refused_at_append_and_the_writer_keeps_running() {
    let dir = tempfile::tempdir().unwrap();
    let log_opts = LogOptions {
        max_record_bytes: 64,
        ..LogOptions::default()
    };
    let (mut log, _) = open(dir.path(), log_opts);
    append_all(&mut log, [1, 2]);
    let gcl = GroupCommitLog::start(log, GroupCommitOptions::default(), |_| {}).unwrap();
    assert!(matches!(
        gcl.append(Zxid(2), vec![1]),
        Err(StorageError::ZxidNotIncreasing { last: 2, zxid: 2 })
    ));
    gcl.append(Zxid(3), body(3)).unwrap();
    assert!(matches!(
        gcl.append(Zxid(3), vec![1]),
        Err(StorageError::ZxidNotIncreasing { last: 3, zxid: 3 })
    ));
    assert!(matches!(
        gcl.append(Zxid(4), vec![0; 65]),
        Err(StorageError::RecordTooLarge { len: 65, max: 64 })
    ));
    assert!(matches!(
        gcl.try_append(Zxid(4), vec![0; 65]),
        Err(TryAppendError::Refused(StorageError::RecordTooLarge { .. }))
    ));
    gcl.try_append(Zxid(4), body(4)).unwrap();
    let mut log = gcl.shutdown().unwrap();
    assert_eq!(records(&mut log), expected(1..=4));
}

#[test]
fn try_append_hands_the_body_back_when_the_queue_is_full() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = open(dir.path(), opts());
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let (entered_tx, entered_rx) = mpsc::channel::<()>();
    let mut first = true;
    let on_durable = move |_: DurabilityReport<'_>| {
        if first {
            first = false;
            entered_tx.send(()).unwrap();
            release_rx.recv().unwrap();
        }
    };
    let gc_opts = GroupCommitOptions {
        queue_capacity: 2,
        ..GroupCommitOptions::default()
    };
    let gcl = GroupCommitLog::start(log, gc_opts, on_durable).unwrap();
    gcl.append(Zxid(1), body(1)).unwrap();
    entered_rx.recv().unwrap(); // the writer is parked in its callback
    gcl.try_append(Zxid(2), body(2)).unwrap();
    gcl.try_append(Zxid(3), body(3)).unwrap();
    match gcl.try_append(Zxid(4), body(4)) {
        Err(TryAppendError::Full(b)) => assert_eq!(b, body(4)),
        other => panic!("expected Full, got {other:?}"),
    }
    release_tx.send(()).unwrap();
    gcl.append(Zxid(4), body(4)).unwrap(); // zxid 4 was not consumed by the failed try
    let mut log = gcl.shutdown().unwrap();
    assert_eq!(records(&mut log), expected(1..=4));
}

#[test]
fn writer_io_failure_is_reported_to_the_callback_and_later_appends_fail() {
    let dir = tempfile::tempdir().unwrap();
    let log_dir = dir.path().join("log");
    let (log, _) = open(&log_dir, opts());
    // The first append must create a segment; without its directory it fails.
    fs::remove_dir_all(&log_dir).unwrap();
    let (tx, rx) = mpsc::channel();
    let gcl = GroupCommitLog::start(log, GroupCommitOptions::default(), forward(tx)).unwrap();
    gcl.append(Zxid(1), body(1)).unwrap();
    let report = rx.recv().unwrap();
    let message = report.expect_err("the writer reports its failure");
    assert!(message.contains("I/O error"), "{message}");
    assert!(matches!(
        gcl.append(Zxid(2), body(2)),
        Err(StorageError::WriterStopped)
    ));
    assert!(matches!(
        gcl.try_append(Zxid(2), body(2)),
        Err(TryAppendError::Refused(StorageError::WriterStopped))
    ));
    assert!(matches!(gcl.shutdown(), Err(StorageError::Io { .. })));
}

#[test]
fn a_panicking_callback_surfaces_as_writer_panicked() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = open(dir.path(), opts());
    let gcl = GroupCommitLog::start(log, GroupCommitOptions::default(), |_| {
        panic!("callback bug (expected by this test)")
    })
    .unwrap();
    gcl.append(Zxid(1), body(1)).unwrap();
    assert!(matches!(gcl.shutdown(), Err(StorageError::WriterPanicked)));
}

#[test]
fn dropping_the_last_handle_inside_the_callback_neither_deadlocks_nor_panics() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = open(dir.path(), opts());
    let slot: Arc<Mutex<Option<Arc<GroupCommitLog>>>> = Arc::default();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let callback_slot = Arc::clone(&slot);
    let on_durable = move |_: DurabilityReport<'_>| {
        go_rx.recv().unwrap();
        // Drops the last handle on the writer thread itself.
        drop(callback_slot.lock().unwrap().take());
        done_tx.send(()).unwrap();
    };
    let gcl =
        Arc::new(GroupCommitLog::start(log, GroupCommitOptions::default(), on_durable).unwrap());
    *slot.lock().unwrap() = Some(Arc::clone(&gcl));
    gcl.append(Zxid(1), body(1)).unwrap();
    drop(gcl);
    go_tx.send(()).unwrap();
    done_rx
        .recv()
        .expect("the callback finished after dropping the handle");
    let (mut log, _) = open(dir.path(), opts());
    assert_eq!(records(&mut log), expected([1]));
}
