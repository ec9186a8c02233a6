//! Watches (ZooKeeper Programmer's Guide, "ZooKeeper Sessions", "ZooKeeper
//! Watches", "Persistent, Recursive Watches"), kept per connection as
//! ZooKeeper 3.8 keeps them.
//!
//! A watch belongs to the connection that set it, as in ZooKeeper (the
//! server-side connection is the Watcher): when the connection goes, so do
//! its watches, and the client re-registers them with setWatches after it
//! reconnects. A connection gets at most one event per change, however many
//! of its watches match.
//!
//! ZooKeeper 3.8's DataTree has two tables, data watches and child watches
//! (its `WatchManager`), and each holds ONE mode per (path, connection):
//! standard (one-shot), persistent or persistent recursive (its
//! `WatcherModeManager`). So:
//!
//! - getData and exists set a standard entry in the data table,
//!   getChildren one in the child table; addWatch (and setWatches'
//!   persistent lists) set the entry of both tables to its mode. A later
//!   watch on the same path by the same connection replaces the earlier
//!   one's mode in the tables it touches: `addWatch` recursive then
//!   `addWatch` persistent leaves a persistent watch only, and a getData
//!   watch on a persistently watched path turns its data entry one-shot.
//! - A change fires the entries of one table: created and data changed the
//!   data table's, children changed the child table's, deleted both. An
//!   entry on the path fires (a standard one is consumed); a recursive entry
//!   fires for its path and every descendant, except for children changed.
//! - removeWatches with Children or Data removes the connection's entry from
//!   that table, whatever its mode ("half" of a persistent watch); Any from
//!   both. checkWatches with Children or Data is true when any connection
//!   has an entry on the path in that table (ZooKeeper's
//!   `WatchManager.containsWatcher` looks the path up, not the connection).
//!
//! Everything observable is in connection order (no hash-map order).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use wazoo_proto::{EventType, WatcherType};

/// The connection a watch belongs to.
pub type ConnId = u64;

/// What a request asks to watch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// getData / exists: a one-shot entry in the data table.
    Data,
    /// getChildren: a one-shot entry in the child table.
    Child,
    /// addWatch PERSISTENT: a persistent entry in both tables.
    Persistent,
    /// addWatch PERSISTENT_RECURSIVE: a recursive entry in both tables.
    Recursive,
}

/// How one (path, connection) entry of a table fires: ZooKeeper's
/// `WatcherMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Fires once, for the path itself, and is consumed.
    Standard,
    /// Fires for the path itself, until removed.
    Persistent,
    /// Fires for the path and its descendants, but not for children
    /// changed, until removed.
    Recursive,
}

/// ZooKeeper's two watch tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Table {
    Data,
    Child,
}

/// One table: path -> connection -> mode.
#[derive(Debug, Default)]
struct Entries {
    by_path: HashMap<String, BTreeMap<ConnId, Mode>>,
    /// Number of recursive entries, to skip the ancestor walk when none.
    recursive: usize,
}

impl Entries {
    /// Sets the connection's mode on `path`; true if it had no entry there.
    fn set(&mut self, conn: ConnId, path: &str, mode: Mode) -> bool {
        let old = match self.by_path.get_mut(path) {
            Some(m) => m.insert(conn, mode),
            None => {
                self.by_path
                    .insert(path.to_string(), BTreeMap::from([(conn, mode)]));
                None
            }
        };
        if old == Some(Mode::Recursive) {
            self.recursive -= 1;
        }
        if mode == Mode::Recursive {
            self.recursive += 1;
        }
        old.is_none()
    }

    fn remove(&mut self, conn: ConnId, path: &str) -> bool {
        let Some(m) = self.by_path.get_mut(path) else {
            return false;
        };
        let Some(mode) = m.remove(&conn) else {
            return false;
        };
        if m.is_empty() {
            self.by_path.remove(path);
        }
        if mode == Mode::Recursive {
            self.recursive -= 1;
        }
        true
    }

    fn mode(&self, conn: ConnId, path: &str) -> Option<Mode> {
        self.by_path.get(path)?.get(&conn).copied()
    }

    /// ZooKeeper's `WatchManager.triggerWatch`: adds the connections whose
    /// entries fire to `out` and returns those whose standard entry on
    /// `path` was consumed.
    fn fire(&mut self, path: &str, event: EventType, out: &mut BTreeSet<ConnId>) -> Vec<ConnId> {
        let children_changed = event == EventType::NodeChildrenChanged;
        let mut consumed = Vec::new();
        if let Some(m) = self.by_path.get_mut(path) {
            for (&conn, &mode) in m.iter() {
                match mode {
                    Mode::Recursive if children_changed => {}
                    Mode::Recursive | Mode::Persistent => {
                        out.insert(conn);
                    }
                    Mode::Standard => {
                        out.insert(conn);
                        consumed.push(conn);
                    }
                }
            }
            for conn in &consumed {
                m.remove(conn);
            }
            if m.is_empty() {
                self.by_path.remove(path);
            }
        }
        if self.recursive > 0 && !children_changed {
            let mut p = path;
            while p != "/" && !p.is_empty() {
                p = wazoo_proto::path::parent(p);
                if let Some(m) = self.by_path.get(p) {
                    out.extend(
                        m.iter()
                            .filter(|(_, &mode)| mode == Mode::Recursive)
                            .map(|(&c, _)| c),
                    );
                }
            }
        }
        consumed
    }
}

#[derive(Debug, Default)]
pub struct WatchManager {
    data: Entries,
    child: Entries,
    /// Connection -> its entries, for closing a connection and the views.
    by_conn: HashMap<ConnId, BTreeSet<(Table, String)>>,
}

/// The tables a checkWatches or removeWatches of type `t` looks at, as
/// ZooKeeper's DataTree does (it has no case for the persistent types,
/// which its FinalRequestProcessor refuses before).
fn tables_for(t: WatcherType) -> &'static [Table] {
    match t {
        WatcherType::Children => &[Table::Child],
        WatcherType::Data => &[Table::Data],
        WatcherType::Any => &[Table::Child, Table::Data],
        WatcherType::Persistent | WatcherType::PersistentRecursive => &[],
    }
}

impl WatchManager {
    pub fn new() -> Self {
        Self::default()
    }

    fn table(&mut self, t: Table) -> &mut Entries {
        match t {
            Table::Data => &mut self.data,
            Table::Child => &mut self.child,
        }
    }

    fn table_ref(&self, t: Table) -> &Entries {
        match t {
            Table::Data => &self.data,
            Table::Child => &self.child,
        }
    }

    fn set(&mut self, conn: ConnId, path: &str, t: Table, mode: Mode) {
        if self.table(t).set(conn, path, mode) {
            self.by_conn
                .entry(conn)
                .or_default()
                .insert((t, path.to_string()));
        }
    }

    /// Forgets the connection's entry `(t, path)` in `by_conn`.
    fn unlink(&mut self, conn: ConnId, t: Table, path: &str) {
        if let Some(c) = self.by_conn.get_mut(&conn) {
            c.remove(&(t, path.to_string()));
            if c.is_empty() {
                self.by_conn.remove(&conn);
            }
        }
    }

    /// Sets a watch: the entries of the tables `kind` touches take its
    /// mode, replacing what the connection had there.
    pub fn add(&mut self, conn: ConnId, path: &str, kind: Kind) {
        match kind {
            Kind::Data => self.set(conn, path, Table::Data, Mode::Standard),
            Kind::Child => self.set(conn, path, Table::Child, Mode::Standard),
            Kind::Persistent | Kind::Recursive => {
                let mode = if kind == Kind::Persistent {
                    Mode::Persistent
                } else {
                    Mode::Recursive
                };
                // ZooKeeper's DataTree.addWatch: data table, then child.
                self.set(conn, path, Table::Data, mode);
                self.set(conn, path, Table::Child, mode);
            }
        }
    }

    /// removeWatches: removes the connection's entry on `path` from the
    /// tables of `t`, whatever its mode; true if there was one.
    pub fn remove(&mut self, conn: ConnId, path: &str, t: WatcherType) -> bool {
        let mut found = false;
        for &table in tables_for(t) {
            if self.table(table).remove(conn, path) {
                self.unlink(conn, table, path);
                found = true;
            }
        }
        found
    }

    /// checkWatches: true if any connection has an entry on `path` in the
    /// tables of `t` (ZooKeeper 3.8 does not look at whose it is).
    pub fn contains(&self, path: &str, t: WatcherType) -> bool {
        tables_for(t)
            .iter()
            .any(|&table| self.table_ref(table).by_path.contains_key(path))
    }

    /// checkWatches of a path that does not start with `/`, as ZooKeeper
    /// 3.8's WatchManager.containsWatcher walks it with PathParentIterator,
    /// which computes each next parent from the last `/` before it hands
    /// out the current path: `Err(())` where that walk fails (ZooKeeper
    /// answers MarshallingError). A path without any `/` fails at once; in
    /// a table holding a recursive entry the walk goes on to the parents
    /// and fails on the second step, unless the path itself is watched
    /// there. The tables are looked at in ZooKeeper's order.
    #[allow(clippy::result_unit_err)]
    pub fn contains_unrooted(&self, path: &str, t: WatcherType) -> Result<bool, ()> {
        for &table in tables_for(t) {
            if !path.contains('/') {
                return Err(());
            }
            let entries = self.table_ref(table);
            if entries.by_path.contains_key(path) {
                return Ok(true);
            }
            if entries.recursive > 0 {
                return Err(());
            }
        }
        Ok(false)
    }

    /// The mode of the connection's entry on `path` in table `t`.
    pub fn mode(&self, conn: ConnId, path: &str, t: Table) -> Option<Mode> {
        self.table_ref(t).mode(conn, path)
    }

    /// Drops every watch of a connection that went away.
    pub fn remove_conn(&mut self, conn: ConnId) {
        let Some(all) = self.by_conn.remove(&conn) else {
            return;
        };
        for (t, path) in all {
            self.table(t).remove(conn, &path);
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
        let tables: &[Table] = match event {
            EventType::NodeCreated | EventType::NodeDataChanged => &[Table::Data],
            EventType::NodeChildrenChanged => &[Table::Child],
            // ZooKeeper's DataTree.deleteNode: the data table, then the
            // child table without those already told.
            EventType::NodeDeleted => &[Table::Data, Table::Child],
            _ => return Vec::new(),
        };
        let mut out = BTreeSet::new();
        for &t in tables {
            for conn in self.table(t).fire(path, event, &mut out) {
                self.unlink(conn, t, path);
            }
        }
        out.into_iter().filter(|&c| may_read(c)).collect()
    }

    /// Number of watches in all: the entries of both tables, as
    /// ZooKeeper's `zk_watch_count` (a persistent watch counts twice).
    pub fn count(&self) -> usize {
        self.by_conn.values().map(BTreeSet::len).sum()
    }

    /// The `wchs` summary of the data table: connections with an entry
    /// there, paths, and entries. ZooKeeper 3.8's `wchs`, `wchc` and `wchp`
    /// show `dataWatches` alone (DataTree.dumpWatchesSummary and
    /// dumpWatches): exists, getData, persistent and recursive watches, no
    /// child watch.
    pub fn data_summary(&self) -> (usize, usize, usize) {
        let conns = self
            .by_conn
            .values()
            .filter(|s| s.iter().any(|(t, _)| *t == Table::Data))
            .count();
        let entries = self.data.by_path.values().map(BTreeMap::len).sum();
        (conns, self.data.by_path.len(), entries)
    }

    /// Connection -> its paths in the data table (the `wchc` view), sorted.
    pub fn by_connection(&self) -> Vec<(ConnId, Vec<String>)> {
        let mut v: Vec<(ConnId, Vec<String>)> = self
            .by_conn
            .iter()
            .map(|(c, s)| {
                let p: Vec<String> = s
                    .iter()
                    .filter(|(t, _)| *t == Table::Data)
                    .map(|(_, p)| p.clone())
                    .collect();
                (*c, p)
            })
            .filter(|(_, p)| !p.is_empty())
            .collect();
        v.sort();
        v
    }

    /// Path -> connections in the data table (the `wchp` view), sorted.
    pub fn by_path(&self) -> Vec<(String, Vec<ConnId>)> {
        let mut v: Vec<(String, Vec<ConnId>)> = self
            .data
            .by_path
            .iter()
            .map(|(p, s)| (p.clone(), s.keys().copied().collect()))
            .collect();
        v.sort();
        v
    }

    /// Number of connections holding watches (in either table).
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

    // Programmer's Guide, "Persistent, Recursive Watches".
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
        assert!(!w.contains("/", WatcherType::Any));
        assert_eq!(w.count(), 0);
        assert_eq!(w.conn_count(), 0);
    }

    #[test]
    fn remove_and_check_report_whether_a_watch_was_there() {
        let mut w = WatchManager::new();
        w.add(1, "/a", Kind::Data);
        assert!(w.contains("/a", WatcherType::Data));
        assert!(!w.contains("/a", WatcherType::Children));
        assert!(!w.remove(1, "/a", WatcherType::Children));
        assert!(w.remove(1, "/a", WatcherType::Data));
        assert!(!w.contains("/a", WatcherType::Any));
    }

    // Programmer's Guide, "Persistent, Recursive Watches", as ZooKeeper
    // 3.8 keeps them (WatcherModeManager): one mode per path and connection
    // in each table, so a later addWatch replaces the earlier one's mode.
    // A recursive watch made persistent no longer sees descendants.
    #[test]
    fn a_later_add_watch_replaces_the_earlier_mode() {
        let mut w = WatchManager::new();
        w.add(1, "/p", Kind::Recursive);
        w.add(1, "/p", Kind::Persistent);
        assert_eq!(w.mode(1, "/p", Table::Data), Some(Mode::Persistent));
        assert_eq!(w.mode(1, "/p", Table::Child), Some(Mode::Persistent));
        assert!(w.trigger("/p/c2", EventType::NodeCreated, all).is_empty());
        assert_eq!(
            w.trigger("/p", EventType::NodeChildrenChanged, all),
            vec![1]
        );
        // And back: recursive again sees descendants, not children changed.
        w.add(1, "/p", Kind::Recursive);
        assert_eq!(w.trigger("/p/c2", EventType::NodeCreated, all), vec![1]);
        assert!(w
            .trigger("/p", EventType::NodeChildrenChanged, all)
            .is_empty());
        assert_eq!(w.count(), 2, "one entry per table");
    }

    // Programmer's Guide, "ZooKeeper Watches" and "Persistent, Recursive
    // Watches": a getData (or exists) watch on a persistently watched path
    // turns the data table's entry one-shot; the child table's stays.
    #[test]
    fn a_data_watch_makes_the_data_half_of_a_persistent_watch_one_shot() {
        let mut w = WatchManager::new();
        w.add(1, "/p", Kind::Persistent);
        w.add(1, "/p", Kind::Data);
        assert_eq!(w.mode(1, "/p", Table::Data), Some(Mode::Standard));
        assert_eq!(w.trigger("/p", EventType::NodeDataChanged, all), vec![1]);
        assert!(w.trigger("/p", EventType::NodeDataChanged, all).is_empty());
        for _ in 0..2 {
            assert_eq!(
                w.trigger("/p", EventType::NodeChildrenChanged, all),
                vec![1]
            );
        }
        // The child table's persistent entry still reports the deletion.
        assert_eq!(w.trigger("/p", EventType::NodeDeleted, all), vec![1]);
    }

    // Programmer's Guide, "ZooKeeper Watches": a getChildren watch turned
    // recursive by addWatch no longer fires for children changed.
    #[test]
    fn a_recursive_watch_replaces_a_child_watch() {
        let mut w = WatchManager::new();
        w.add(1, "/w", Kind::Child);
        w.add(1, "/w", Kind::Recursive);
        assert!(w
            .trigger("/w", EventType::NodeChildrenChanged, all)
            .is_empty());
        assert_eq!(w.trigger("/w/a", EventType::NodeCreated, all), vec![1]);
    }

    // Programmer's Guide, "Remove Watches" (removeWatches with
    // WatcherType Children or Data): ZooKeeper 3.8 removes the entry of
    // that table only, so a persistent watch loses half of what it sees.
    #[test]
    fn remove_of_children_or_data_removes_half_a_persistent_watch() {
        let mut w = WatchManager::new();
        w.add(1, "/r", Kind::Persistent);
        assert!(w.remove(1, "/r", WatcherType::Children));
        assert!(!w.remove(1, "/r", WatcherType::Children));
        assert!(w
            .trigger("/r", EventType::NodeChildrenChanged, all)
            .is_empty());
        assert_eq!(w.trigger("/r", EventType::NodeDataChanged, all), vec![1]);
        assert!(w.remove(1, "/r", WatcherType::Any));
        assert!(w.trigger("/r", EventType::NodeDataChanged, all).is_empty());
        assert!(!w.remove(1, "/r", WatcherType::Any));
        assert_eq!(w.count(), 0);
    }

    // As above for a recursive watch: with its data half removed, only the
    // child table's recursive entry is left, which hears of deletions.
    #[test]
    fn a_recursive_watch_without_its_data_half_hears_only_deletions() {
        let mut w = WatchManager::new();
        w.add(1, "/t", Kind::Recursive);
        assert!(w.remove(1, "/t", WatcherType::Data));
        assert!(w.trigger("/t/a", EventType::NodeCreated, all).is_empty());
        assert!(w
            .trigger("/t/a", EventType::NodeDataChanged, all)
            .is_empty());
        assert_eq!(w.trigger("/t/a", EventType::NodeDeleted, all), vec![1]);
        assert_eq!(w.trigger("/t", EventType::NodeDeleted, all), vec![1]);
    }

    // Programmer's Guide, "Remove Watches" (checkWatches): ZooKeeper 3.8's
    // WatchManager.containsWatcher finds an entry on the path in the
    // table, any connection's, and a persistent watch is in both tables.
    #[test]
    fn check_finds_any_connections_entry_in_the_table() {
        let mut w = WatchManager::new();
        w.add(1, "/a", Kind::Data);
        w.add(2, "/b", Kind::Persistent);
        for t in [WatcherType::Data, WatcherType::Any] {
            assert!(w.contains("/a", t), "{t:?}");
        }
        assert!(!w.contains("/a", WatcherType::Children));
        for t in [WatcherType::Children, WatcherType::Data, WatcherType::Any] {
            assert!(w.contains("/b", t), "{t:?}");
        }
        // The persistent types match no table (ZooKeeper refuses them
        // before it looks).
        for t in [WatcherType::Persistent, WatcherType::PersistentRecursive] {
            assert!(!w.contains("/b", t), "{t:?}");
            assert!(!w.remove(2, "/b", t), "{t:?}");
        }
        // Removing is the asking connection's: 1 has nothing on /b.
        assert!(!w.remove(1, "/b", WatcherType::Any));
        assert!(w.remove(2, "/b", WatcherType::Children));
        assert!(!w.contains("/b", WatcherType::Children));
        assert!(w.contains("/b", WatcherType::Data));
    }

    // ZooKeeper 3.8's checkWatches of a path without a leading `/`
    // (Programmer's Guide, "ZooKeeper Watches"): its ancestor walk fails
    // at once without any `/`, and on the second step (taken while the
    // table holds a recursive watch) for `a/b`, unless `a/b` itself is
    // watched there.
    #[test]
    fn an_unrooted_check_fails_where_zookeepers_walk_does() {
        let mut w = WatchManager::new();
        assert_eq!(w.contains_unrooted("a", WatcherType::Any), Err(()));
        assert_eq!(w.contains_unrooted("a/b", WatcherType::Any), Ok(false));
        w.add(1, "a/b", Kind::Data);
        assert_eq!(w.contains_unrooted("a/b", WatcherType::Data), Ok(true));
        w.add(2, "/r", Kind::Recursive);
        assert_eq!(w.contains_unrooted("a/c", WatcherType::Data), Err(()));
        assert_eq!(w.contains_unrooted("a/b", WatcherType::Data), Ok(true));
        // Any looks at the child table first, which has no `a/b`.
        assert_eq!(w.contains_unrooted("a/b", WatcherType::Any), Err(()));
        w.remove_conn(2);
        assert_eq!(w.contains_unrooted("a/c", WatcherType::Any), Ok(false));
    }

    // The `wchc`/`wchp`/`wchs` views: the data table alone, sorted, as
    // ZooKeeper 3.8's (Administrator's Guide, "The Four Letter Words").
    #[test]
    fn views_list_the_data_table_in_order() {
        let mut w = WatchManager::new();
        w.add(3, "/b", Kind::Child);
        w.add(1, "/b", Kind::Persistent);
        w.add(1, "/a", Kind::Data);
        w.add(2, "/c", Kind::Child);
        assert_eq!(w.count(), 5);
        assert_eq!(w.conn_count(), 3);
        assert_eq!(w.data_summary(), (1, 2, 2));
        assert_eq!(
            w.by_connection(),
            vec![(1, vec!["/a".to_string(), "/b".to_string()])]
        );
        assert_eq!(
            w.by_path(),
            vec![("/a".to_string(), vec![1]), ("/b".to_string(), vec![1])]
        );
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
        w.add(3, "/p/s", Kind::Persistent);
        let not_2 = |c: ConnId| c != 2;
        assert_eq!(w.trigger("/p/s", EventType::NodeCreated, not_2), vec![1, 3]);
        // Connection 2's one-shot watch was consumed though nothing was
        // sent; the persistent and recursive watches stay.
        assert_eq!(w.mode(2, "/p/s", Table::Data), None);
        assert_eq!(w.mode(3, "/p/s", Table::Data), Some(Mode::Persistent));
        assert_eq!(w.mode(2, "/p", Table::Data), Some(Mode::Recursive));
        assert_eq!(
            w.trigger("/p/s", EventType::NodeDataChanged, all),
            vec![1, 2, 3]
        );
        assert!(w
            .trigger("/p/s", EventType::NodeDeleted, |_| false)
            .is_empty());
    }
}
