//! Watch delivery as one client connection sees it (ZooKeeper
//! Programmer's Guide, "ZooKeeper Watches"): "a client will see a watch
//! event for a znode it is watching before seeing the new data that
//! corresponds to that znode", and events come in the order of the changes
//! that fired them.
//!
//! - Order: each event must match a trigger of the committed sequence
//!   (the [`Shadow`]'s) later than the one the previous event on this
//!   connection matched.
//! - Event before data: a read that shows a watched znode changed (another
//!   mzxid, or it appeared or vanished) since the read that set the watch
//!   must come after an event for that znode. For a persistent watch, the
//!   same between any two reads of a znode it covers.

use std::collections::BTreeMap;

use super::Shadow;

/// One connection's watches and the events it received.
#[derive(Default, Debug)]
pub struct ConnWatches {
    /// Next position in the shadow's `fired` an event may match.
    next: usize,
    /// One-shot data watches: path -> mzxid seen when set (0: absent).
    data: BTreeMap<String, i64>,
    /// Persistent watch roots: (path, recursive).
    persistent: Vec<(String, bool)>,
    /// Znodes a persistent watch covers: path -> (mzxid last read, events since).
    covered: BTreeMap<String, (i64, u32)>,
    pub events: u64,
}

impl ConnWatches {
    fn covers(&self, path: &str) -> bool {
        self.persistent.iter().any(|(root, recursive)| {
            path == root
                || (*recursive
                    && (root == "/"
                        || (path.starts_with(root.as_str())
                            && path.as_bytes().get(root.len()) == Some(&b'/'))))
        })
    }

    /// A watch event arrived.
    pub fn on_event(&mut self, shadow: &Shadow, path: &str, event: i32) -> Result<(), String> {
        self.events += 1;
        match shadow.next_fired(path, event, self.next) {
            Some(at) => self.next = at + 1,
            None => {
                return Err(format!(
                    "watches: event {event} on {path} matches no change after the previous event's (position {})",
                    self.next
                ))
            }
        }
        self.data.remove(path);
        if let Some(c) = self.covered.get_mut(path) {
            c.1 += 1;
        }
        Ok(())
    }

    /// A read of `path` answered with `mzxid` (0: no such node); `watch`
    /// if it set a data watch.
    pub fn on_read(&mut self, path: &str, mzxid: i64, watch: bool) -> Result<(), String> {
        if let Some(&seen) = self.data.get(path) {
            if seen != mzxid {
                return Err(format!(
                    "watches: a read of {path} shows mzxid 0x{mzxid:x} (watched at 0x{seen:x}) before the watch event"
                ));
            }
        }
        if self.covers(path) {
            if let Some(&(seen, events)) = self.covered.get(path) {
                if seen != mzxid && events == 0 {
                    return Err(format!(
                        "watches: a read of {path} shows mzxid 0x{mzxid:x} (read at 0x{seen:x}) with no event of its persistent watch"
                    ));
                }
            }
            self.covered.insert(path.to_string(), (mzxid, 0));
        }
        if watch {
            self.data.insert(path.to_string(), mzxid);
            // ZooKeeper 3.8 keeps one mode per path and connection in its
            // data table: a data watch on a persistently watched path
            // makes that part of it one-shot (core::watch).
            let before = self.persistent.len();
            self.persistent
                .retain(|(root, recursive)| *recursive || root != path);
            if self.persistent.len() != before && !self.covers(path) {
                self.covered.remove(path);
            }
        }
        Ok(())
    }

    /// A persistent watch was added (its reply came back).
    pub fn on_persistent(&mut self, path: &str, recursive: bool) {
        self.persistent.push((path.to_string(), recursive));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wazoo_core::txn::{CreateTxn, NodeKind, Txn, TxnHeader, TxnRecord};
    use wazoo_proto::{Acl, EventType, Id};
    use wazoo_zab::{Payload, Zxid};

    fn shadow_with_two_sets() -> Shadow {
        let mut s = Shadow::default();
        let mut apply = |zxid: u64, txn: Txn| {
            let rec = TxnRecord {
                header: TxnHeader {
                    session_id: 1,
                    cxid: 1,
                    zxid: Zxid(zxid).to_wire(),
                    time_ms: 0,
                },
                txn,
            };
            s.applied(1, Zxid(zxid), &Payload::from(rec.encode()))
                .unwrap();
        };
        apply(
            1,
            Txn::Create(CreateTxn {
                path: "/a".into(),
                data: Some(vec![]),
                acl: vec![Acl {
                    perms: 31,
                    id: Id::new("world", "anyone"),
                }],
                kind: NodeKind::Regular,
                ephemeral_owner: 0,
                parent_cversion: 1,
            }),
        );
        for z in [2, 3] {
            apply(
                z,
                Txn::SetData {
                    path: "/a".into(),
                    data: Some(vec![z as u8]),
                    version: z as i32 - 1,
                },
            );
        }
        s
    }

    #[test]
    fn events_in_order_pass_and_out_of_order_fail() {
        let s = shadow_with_two_sets();
        let changed = EventType::NodeDataChanged as i32;
        let mut w = ConnWatches::default();
        w.on_event(&s, "/a", changed).unwrap();
        w.on_event(&s, "/a", changed).unwrap();
        assert!(
            w.on_event(&s, "/a", changed).is_err(),
            "only two changes happened"
        );
        let mut w = ConnWatches::default();
        w.on_event(&s, "/a", EventType::NodeCreated as i32).unwrap();
        assert!(w.on_event(&s, "/", EventType::NodeCreated as i32).is_err());
    }

    #[test]
    fn new_data_before_the_event_fails() {
        let mut w = ConnWatches::default();
        w.on_read("/a", 0x1, true).unwrap();
        assert!(w.on_read("/a", 0x2, false).is_err());
        let mut w = ConnWatches::default();
        w.on_persistent("/", true);
        w.on_read("/a", 0x1, false).unwrap();
        assert!(w.on_read("/a", 0x3, false).is_err());
    }

    // Programmer's Guide, "Persistent, Recursive Watches", as ZooKeeper
    // 3.8 keeps them: a data watch on a persistently watched path makes
    // the data part one-shot, so a second change may come unannounced.
    #[test]
    fn a_data_watch_on_a_persistent_path_is_one_shot() {
        let s = shadow_with_two_sets();
        let changed = EventType::NodeDataChanged as i32;
        let mut w = ConnWatches::default();
        w.on_persistent("/a", false);
        w.on_read("/a", 0x1, true).unwrap();
        w.on_event(&s, "/a", changed).unwrap();
        w.on_read("/a", 0x2, false).unwrap();
        w.on_read("/a", 0x3, false).unwrap();
    }
}
