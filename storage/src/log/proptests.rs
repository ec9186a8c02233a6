//! Model-based property test: random sequences of append, sync, reopen,
//! crash (losing unsynced bytes, possibly tearing a record), truncate and
//! read are checked against a `Vec` of records.

use crate::Zxid;
use std::fs::{self, OpenOptions};
use std::path::Path;

use proptest::prelude::*;

use super::{LogOptions, TxnLog};

#[derive(Debug, Clone)]
enum Op {
    /// Append a record `gap` above the last zxid with a body of `len` bytes.
    Append {
        gap: u64,
        len: usize,
    },
    Sync,
    /// Clean close (buffer flushed to the OS, no fsync) and reopen.
    Reopen,
    /// Crash: the write buffer is lost and the active segment is cut at a
    /// point between its fsynced length and its length (`cut` is a fraction).
    Crash {
        cut: u16,
    },
    TruncateAfter {
        pick: u16,
    },
    ReadFrom {
        pick: u16,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let gap = prop_oneof![9 => 1u64..4, 1 => Just(1u64 << 32)];
    prop_oneof![
        8 => (gap, 0usize..90).prop_map(|(gap, len)| Op::Append { gap, len }),
        3 => Just(Op::Sync),
        1 => Just(Op::Reopen),
        2 => any::<u16>().prop_map(|cut| Op::Crash { cut }),
        1 => any::<u16>().prop_map(|pick| Op::TruncateAfter { pick }),
        1 => any::<u16>().prop_map(|pick| Op::ReadFrom { pick }),
    ]
}

fn options() -> LogOptions {
    LogOptions {
        segment_bytes: 300,
        max_record_bytes: 1024,
        // Tiny buffer: partial flushes leave half-written records on disk.
        write_buffer_bytes: 40,
        truncate_corrupt_tail: false,
        force_sync: true,
    }
}

#[derive(Default)]
struct Model {
    records: Vec<(u64, Vec<u8>)>,
    /// How many of `records` are known durable.
    durable: usize,
    salt: u8,
}

impl Model {
    fn last(&self) -> u64 {
        self.records.last().map_or(0, |r| r.0)
    }

    /// A zxid chosen by `pick`: one of the records' zxids, one just below it,
    /// or one above the last.
    fn zxid_at(&self, pick: u16) -> u64 {
        let i = pick as usize % (self.records.len() + 1);
        match self.records.get(i) {
            None => self.last() + 5,
            Some(r) if pick & 1 == 0 => r.0,
            Some(r) => r.0 - 1,
        }
    }

    fn after(&self, zxid: u64) -> Vec<(u64, Vec<u8>)> {
        self.records
            .iter()
            .filter(|r| r.0 > zxid)
            .cloned()
            .collect()
    }
}

fn read_all(log: &mut TxnLog, from: u64) -> Vec<(u64, Vec<u8>)> {
    log.read_from(Zxid(from))
        .expect("read_from")
        .map(|r| r.map(|r| (r.zxid.0, r.body)).expect("valid record"))
        .collect()
}

fn reopen(dir: &Path) -> TxnLog {
    TxnLog::open(dir, options()).expect("reopen").0
}

/// Simulates a crash of `log` and reopens.
fn crash(log: TxnLog, dir: &Path, cut: u16) -> TxnLog {
    if let Some((path, synced)) = log.crash() {
        let len = fs::metadata(&path).expect("segment exists").len();
        let at = synced + (len - synced) * u64::from(cut) / u64::from(u16::MAX);
        let file = OpenOptions::new()
            .write(true)
            .open(&path)
            .expect("open segment");
        file.set_len(at).expect("cut segment");
    }
    reopen(dir)
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut log = reopen(dir.path());
    let mut model = Model::default();
    for op in ops {
        match op {
            Op::Append { gap, len } => {
                let zxid = model.last() + gap;
                model.salt = model.salt.wrapping_add(1);
                let body: Vec<u8> = (0..len).map(|i| model.salt.wrapping_add(i as u8)).collect();
                log.append(Zxid(zxid), &body).expect("append");
                model.records.push((zxid, body));
            }
            Op::Sync => {
                log.sync().expect("sync");
                model.durable = model.records.len();
                prop_assert_eq!(log.durable_zxid().0, model.last());
            }
            Op::Reopen => {
                drop(log);
                let (reopened, recovered) = TxnLog::open(dir.path(), options()).expect("reopen");
                log = reopened;
                prop_assert!(recovered.repairs.is_empty(), "{:?}", recovered.repairs);
                prop_assert_eq!(read_all(&mut log, 0), model.records.clone());
                model.durable = model.records.len();
            }
            Op::Crash { cut } => {
                log = crash(log, dir.path(), cut);
                let got = read_all(&mut log, 0);
                prop_assert!(got.len() >= model.durable, "lost durable records");
                prop_assert_eq!(&got[..], &model.records[..got.len()]);
                model.records.truncate(got.len());
                model.durable = got.len();
            }
            Op::TruncateAfter { pick } => {
                let zxid = model.zxid_at(pick);
                log.truncate_after(Zxid(zxid)).expect("truncate_after");
                model.records.retain(|r| r.0 <= zxid);
                model.durable = model.records.len();
                prop_assert_eq!(log.durable_zxid().0, model.last());
            }
            Op::ReadFrom { pick } => {
                let from = model.zxid_at(pick);
                prop_assert_eq!(read_all(&mut log, from), model.after(from));
            }
        }
        prop_assert_eq!(log.last_zxid().0, model.last());
    }
    drop(log);
    let mut log = reopen(dir.path());
    prop_assert_eq!(read_all(&mut log, 0), model.records);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn random_append_sync_reopen_crash_truncate_sequences_match_a_vec_model(
        ops in prop::collection::vec(op(), 1..60)
    ) {
        run(ops)?;
    }
}
