//! A member's simulated disk: the two epoch files, the snapshots and the
//! transaction log. A crash keeps exactly what was reported durable: the
//! epoch files and snapshots (written with an fsync before they count) and
//! the log up to the last completed fsync; the unsynced tail is lost.

use wazoo_zab::{Payload, Zxid};

#[derive(Clone, Debug)]
struct Entry {
    zxid: Zxid,
    payload: Payload,
    /// Append sequence number, to match fsync completions.
    seq: u64,
    durable: bool,
}

#[derive(Clone, Debug, Default)]
pub struct Disk {
    pub accepted_epoch: u32,
    pub current_epoch: u32,
    /// Durable snapshots, ascending by zxid: (zxid, payload).
    snapshots: Vec<(Zxid, Vec<u8>)>,
    log: Vec<Entry>,
    appended: u64,
}

/// How many snapshots a disk keeps (ZooKeeper's snapRetainCount is 3).
const SNAPSHOTS_KEPT: usize = 3;

impl Disk {
    /// Appends a record (not yet durable); returns its sequence number.
    pub fn append(&mut self, zxid: Zxid, payload: Payload) -> u64 {
        let last = self
            .log
            .last()
            .map_or(self.snapshot_zxid(), |e| e.zxid.max(self.snapshot_zxid()));
        assert!(zxid > last, "log append {zxid:?} after {last:?}");
        self.appended += 1;
        self.log.push(Entry {
            zxid,
            payload,
            seq: self.appended,
            durable: false,
        });
        self.appended
    }

    pub fn appended(&self) -> u64 {
        self.appended
    }

    pub fn has_unsynced(&self) -> bool {
        self.log.iter().any(|e| !e.durable)
    }

    /// An fsync that started after append `upto` completed.
    pub fn synced(&mut self, upto: u64) {
        for e in self.log.iter_mut().filter(|e| e.seq <= upto) {
            e.durable = true;
        }
        let n = self.log.partition_point(|e| e.durable);
        assert!(
            self.log[n..].iter().all(|e| !e.durable),
            "durable log entries after an unsynced one"
        );
    }

    /// The zxid the log is durable up to (the snapshot's if nothing is).
    pub fn durable_zxid(&self) -> Zxid {
        let n = self.log.partition_point(|e| e.durable);
        if n == 0 {
            self.snapshot_zxid()
        } else {
            self.log[n - 1].zxid
        }
    }

    pub fn truncate_after(&mut self, after: Zxid) {
        self.log.retain(|e| e.zxid <= after);
    }

    /// A snapshot from the leader: stored, and the whole log dropped.
    pub fn install_snapshot(&mut self, zxid: Zxid, data: Vec<u8>) {
        self.store_snapshot(zxid, data);
        self.log.clear();
    }

    /// A snapshot the background writer finished.
    pub fn store_snapshot(&mut self, zxid: Zxid, data: Vec<u8>) {
        self.snapshots.retain(|s| s.0 != zxid);
        self.snapshots.push((zxid, data));
        self.snapshots.sort_by_key(|s| s.0);
        if self.snapshots.len() > SNAPSHOTS_KEPT {
            self.snapshots.remove(0);
        }
    }

    pub fn snapshot_zxid(&self) -> Zxid {
        self.snapshots.last().map_or(Zxid::ZERO, |s| s.0)
    }

    /// The newest snapshot, as recovery loads it.
    pub fn latest_snapshot(&self) -> Option<&(Zxid, Vec<u8>)> {
        self.snapshots.last()
    }

    /// The log after `zxid`, as recovery reads it.
    pub fn log_after(&self, zxid: Zxid) -> Vec<(Zxid, Payload)> {
        self.log
            .iter()
            .filter(|e| e.zxid > zxid)
            .map(|e| (e.zxid, e.payload.clone()))
            .collect()
    }

    /// A crash: the unsynced tail of the log is gone. Returns how many
    /// records were lost.
    pub fn crash(&mut self) -> usize {
        let kept = self.log.partition_point(|e| e.durable);
        let lost = self.log.len() - kept;
        self.log.truncate(kept);
        lost
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crash_keeps_only_what_was_synced() {
        let mut d = Disk::default();
        let p = Payload::from(vec![1u8]);
        d.append(Zxid::new(1, 1), p.clone());
        let s = d.append(Zxid::new(1, 2), p.clone());
        d.append(Zxid::new(1, 3), p.clone());
        d.synced(s);
        assert_eq!(d.durable_zxid(), Zxid::new(1, 2));
        assert_eq!(d.crash(), 1);
        assert_eq!(d.log_after(Zxid::ZERO).len(), 2);
        d.install_snapshot(Zxid::new(2, 5), vec![9]);
        assert_eq!(d.durable_zxid(), Zxid::new(2, 5));
        assert!(d.log_after(Zxid::ZERO).is_empty());
    }
}
