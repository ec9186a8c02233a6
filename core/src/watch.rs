//! Watches (ZooKeeper Programmer's Guide, "ZooKeeper Sessions", "ZooKeeper Watches"): one-shot data, exists and child
//! watches, persistent and persistent-recursive watches, per connection.
//!
//! A watch belongs to the connection that set it, as in ZooKeeper (the
//! server-side connection is the Watcher): when the connection goes, so do
//! its watches, and the client re-registers them with setWatches after it
//! reconnects. A connection gets at most one event per change, however many
//! of its watches match.

use std::collections::{BTreeSet, HashMap, HashSet};

use wazoo_proto::{EventType, WatcherType};

/// The connection a watch belongs to.
pub type ConnId = u64;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// getData / exists: fires on created, changed, deleted.
    Data,
    /// getChildren: fires on children changed and deleted.
    Child,
    /// addWatch PERSISTENT: every event on the path, until removed.
    Persistent,
    /// addWatch PERSISTENT_RECURSIVE: every event but children-changed on
    /// the path and every descendant, until removed.
    Recursive,
}

#[derive(Debug, Default)]
pub struct WatchManager {
    by_path: HashMap<Kind, HashMap<String, BTreeSet<ConnId>>>,
    by_conn: HashMap<ConnId, HashSet<(Kind, String)>>,
    /// Number of recursive watches, to skip the ancestor walk when none.
    recursive_count: usize,
}

const KINDS: [Kind; 4] = [Kind::Data, Kind::Child, Kind::Persistent, Kind::Recursive];

impl WatchManager {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn add(&mut self, conn: ConnId, path: &str, kind: Kind) {
        let set = self
            .by_path
            .entry(kind)
            .or_default()
            .entry(path.to_string())
            .or_default();
        if set.insert(conn) {
            if kind == Kind::Recursive {
                self.recursive_count += 1;
            }
            self.by_conn
                .entry(conn)
                .or_default()
                .insert((kind, path.to_string()));
        }
    }

    fn remove_one(&mut self, conn: ConnId, path: &str, kind: Kind) -> bool {
        let Some(paths) = self.by_path.get_mut(&kind) else {
            return false;
        };
        let Some(set) = paths.get_mut(path) else {
            return false;
        };
        if !set.remove(&conn) {
            return false;
        }
        if set.is_empty() {
            paths.remove(path);
        }
        if kind == Kind::Recursive {
            self.recursive_count -= 1;
        }
        if let Some(c) = self.by_conn.get_mut(&conn) {
            c.remove(&(kind, path.to_string()));
            if c.is_empty() {
                self.by_conn.remove(&conn);
            }
        }
        true
    }

    fn has(&self, conn: ConnId, path: &str, kind: Kind) -> bool {
        self.by_path
            .get(&kind)
            .and_then(|p| p.get(path))
            .is_some_and(|s| s.contains(&conn))
    }

    fn kinds_for(t: WatcherType) -> &'static [Kind] {
        match t {
            WatcherType::Children => &[Kind::Child],
            WatcherType::Data => &[Kind::Data],
            WatcherType::Any => &KINDS,
            WatcherType::Persistent => &[Kind::Persistent],
            WatcherType::PersistentRecursive => &[Kind::Recursive],
        }
    }

    /// removeWatches: true if any watch of that type was there.
    pub fn remove(&mut self, conn: ConnId, path: &str, t: WatcherType) -> bool {
        let mut found = false;
        for &k in Self::kinds_for(t) {
            found |= self.remove_one(conn, path, k);
        }
        found
    }

    /// checkWatches: true if a watch of that type is there.
    pub fn contains(&self, conn: ConnId, path: &str, t: WatcherType) -> bool {
        Self::kinds_for(t).iter().any(|&k| self.has(conn, path, k))
    }

    /// Drops every watch of a connection that went away.
    pub fn remove_conn(&mut self, conn: ConnId) {
        let Some(all) = self.by_conn.remove(&conn) else {
            return;
        };
        for (kind, path) in all {
            if let Some(paths) = self.by_path.get_mut(&kind) {
                if let Some(set) = paths.get_mut(&path) {
                    set.remove(&conn);
                    if set.is_empty() {
                        paths.remove(&path);
                    }
                }
            }
            if kind == Kind::Recursive {
                self.recursive_count -= 1;
            }
        }
    }

    fn take_one_shot(&mut self, path: &str, kind: Kind, out: &mut BTreeSet<ConnId>) {
        let Some(set) = self.by_path.get_mut(&kind).and_then(|p| p.remove(path)) else {
            return;
        };
        for conn in set {
            if let Some(c) = self.by_conn.get_mut(&conn) {
                c.remove(&(kind, path.to_string()));
                if c.is_empty() {
                    self.by_conn.remove(&conn);
                }
            }
            out.insert(conn);
        }
    }

    fn peek(&self, path: &str, kind: Kind, out: &mut BTreeSet<ConnId>) {
        if let Some(set) = self.by_path.get(&kind).and_then(|p| p.get(path)) {
            out.extend(set.iter().copied());
        }
    }

    /// The connections to notify of `event` on `path`, one-shot watches
    /// consumed, each connection once, in connection order.
    ///
    /// `may_read(conn)` says whether the connection may READ the node the
    /// event is about (the trigger's ACL). A connection that may not is
    /// told nothing, whatever kind of watch matched: standard, persistent
    /// or recursive. Its one-shot watches are consumed all the same. This
    /// is what ZooKeeper does since its fix for CVE-2024-23944 (3.8.4,
    /// 3.9.2): `WatchManager.triggerWatch` removes the one-shot watchers
    /// first, then each connection checks READ on the ACL before it sends.
    pub fn trigger(
        &mut self,
        path: &str,
        event: EventType,
        mut may_read: impl FnMut(ConnId) -> bool,
    ) -> Vec<ConnId> {
        let mut conns = self.matching(path, event);
        conns.retain(|&c| may_read(c));
        conns
    }

    fn matching(&mut self, path: &str, event: EventType) -> Vec<ConnId> {
        let mut out = BTreeSet::new();
        match event {
            EventType::NodeCreated | EventType::NodeDataChanged => {
                self.take_one_shot(path, Kind::Data, &mut out);
            }
            EventType::NodeDeleted => {
                self.take_one_shot(path, Kind::Data, &mut out);
                self.take_one_shot(path, Kind::Child, &mut out);
            }
            EventType::NodeChildrenChanged => {
                self.take_one_shot(path, Kind::Child, &mut out);
            }
            _ => return Vec::new(),
        }
        self.peek(path, Kind::Persistent, &mut out);
        if event != EventType::NodeChildrenChanged && self.recursive_count > 0 {
            let mut p = path;
            loop {
                self.peek(p, Kind::Recursive, &mut out);
                if p == "/" {
                    break;
                }
                p = wazoo_proto::path::parent(p);
                if p.is_empty() {
                    break;
                }
            }
        }
        out.into_iter().collect()
    }

    /// Number of watches in all.
    pub fn count(&self) -> usize {
        self.by_conn.values().map(HashSet::len).sum()
    }

    /// Number of distinct watched paths.
    pub fn path_count(&self) -> usize {
        let mut paths: HashSet<&str> = HashSet::new();
        for m in self.by_path.values() {
            paths.extend(m.keys().map(String::as_str));
        }
        paths.len()
    }

    /// Connection -> watched paths (the `wchc` view), sorted.
    pub fn by_connection(&self) -> Vec<(ConnId, Vec<String>)> {
        let mut v: Vec<(ConnId, Vec<String>)> = self
            .by_conn
            .iter()
            .map(|(c, s)| {
                let mut p: Vec<String> = s.iter().map(|(_, p)| p.clone()).collect();
                p.sort();
                p.dedup();
                (*c, p)
            })
            .collect();
        v.sort();
        v
    }

    /// Path -> connections (the `wchp` view), sorted.
    pub fn by_path(&self) -> Vec<(String, Vec<ConnId>)> {
        let mut m: HashMap<String, BTreeSet<ConnId>> = HashMap::new();
        for paths in self.by_path.values() {
            for (p, s) in paths {
                m.entry(p.clone()).or_default().extend(s.iter().copied());
            }
        }
        let mut v: Vec<(String, Vec<ConnId>)> = m
            .into_iter()
            .map(|(p, s)| (p, s.into_iter().collect()))
            .collect();
        v.sort();
        v
    }

    /// Number of connections holding watches.
    pub fn conn_count(&self) -> usize {
        self.by_conn.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(_: ConnId) -> bool {
        true
    }

    // ZooKeeper Programmer's Guide, "ZooKeeper Sessions", "ZooKeeper Watches": a watch is a one-time trigger.
    #[test]
    fn one_shot_data_watch_fires_once() {
        let mut w = WatchManager::new();
        w.add(1, "/a", Kind::Data);
        assert_eq!(w.trigger("/a", EventType::NodeDataChanged, all), vec![1]);
        assert!(w.trigger("/a", EventType::NodeDataChanged, all).is_empty());
        assert_eq!(w.count(), 0);
    }

    #[test]
    fn delete_fires_data_and_child_watches_once_per_connection() {
        let mut w = WatchManager::new();
        w.add(1, "/a", Kind::Data);
        w.add(1, "/a", Kind::Child);
        w.add(2, "/a", Kind::Child);
        assert_eq!(w.trigger("/a", EventType::NodeDeleted, all), vec![1, 2]);
        assert_eq!(w.count(), 0);
    }

    #[test]
    fn child_watch_ignores_data_changes() {
        let mut w = WatchManager::new();
        w.add(1, "/a", Kind::Child);
        assert!(w.trigger("/a", EventType::NodeDataChanged, all).is_empty());
        assert_eq!(
            w.trigger("/a", EventType::NodeChildrenChanged, all),
            vec![1]
        );
    }

    #[test]
    fn persistent_watches_stay_and_recursive_ones_skip_child_events() {
        let mut w = WatchManager::new();
        w.add(1, "/a", Kind::Persistent);
        w.add(2, "/a", Kind::Recursive);
        assert_eq!(w.trigger("/a", EventType::NodeDataChanged, all), vec![1, 2]);
        assert_eq!(w.trigger("/a", EventType::NodeDataChanged, all), vec![1, 2]);
        assert_eq!(
            w.trigger("/a", EventType::NodeChildrenChanged, all),
            vec![1]
        );
        assert_eq!(w.trigger("/a/b/c", EventType::NodeCreated, all), vec![2]);
        assert!(w.remove(2, "/a", WatcherType::Any));
        assert!(w.trigger("/a/b/c", EventType::NodeCreated, all).is_empty());
    }

    #[test]
    fn closing_a_connection_drops_its_watches() {
        let mut w = WatchManager::new();
        w.add(1, "/a", Kind::Data);
        w.add(1, "/", Kind::Recursive);
        w.add(2, "/a", Kind::Data);
        w.remove_conn(1);
        assert_eq!(w.trigger("/a", EventType::NodeDataChanged, all), vec![2]);
        assert!(!w.contains(1, "/", WatcherType::Any));
    }

    #[test]
    fn remove_and_check_report_whether_a_watch_was_there() {
        let mut w = WatchManager::new();
        w.add(1, "/a", Kind::Data);
        assert!(w.contains(1, "/a", WatcherType::Data));
        assert!(!w.contains(1, "/a", WatcherType::Children));
        assert!(!w.remove(1, "/a", WatcherType::Children));
        assert!(w.remove(1, "/a", WatcherType::Data));
        assert!(!w.contains(1, "/a", WatcherType::Any));
    }

    // ZooKeeper Programmer's Guide, "ZooKeeper Watches" and "ACL
    // Permissions": an event reaches only connections that may READ the
    // node it is about (ZooKeeper's fix for CVE-2024-23944).
    #[test]
    fn events_reach_only_connections_that_may_read_the_node() {
        let mut w = WatchManager::new();
        w.add(1, "/p", Kind::Recursive);
        w.add(2, "/p", Kind::Recursive);
        w.add(1, "/p/s", Kind::Data);
        w.add(2, "/p/s", Kind::Data);
        w.add(2, "/p/s", Kind::Persistent);
        let only_1 = |c: ConnId| c == 1;
        assert_eq!(w.trigger("/p/s", EventType::NodeCreated, only_1), vec![1]);
        // Connection 2's one-shot watch was consumed though nothing was
        // sent; its persistent and recursive watches stay.
        assert!(!w.contains(2, "/p/s", WatcherType::Data));
        assert!(w.contains(2, "/p/s", WatcherType::Persistent));
        assert!(w.contains(2, "/p", WatcherType::PersistentRecursive));
        assert_eq!(
            w.trigger("/p/s", EventType::NodeDataChanged, all),
            vec![1, 2]
        );
        assert!(w
            .trigger("/p/s", EventType::NodeDeleted, |_| false)
            .is_empty());
    }
}
