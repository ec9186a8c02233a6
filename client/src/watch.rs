//! Watches on the client side: what the application holds (a one-shot
//! [`WatchReceiver`], a [`PersistentWatch`] stream) and the registry the
//! connection task keeps to route the server's notifications and to
//! re-register everything on reconnect.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::sync::{mpsc, oneshot};
use wazoo_proto::{EventType, KeeperState, WatcherType};

/// A watch event, as ZooKeeper's `WatchedEvent`: a node event (with the
/// node's path, relative to the chroot) or a session state change
/// (`event_type` `None`, no path).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchedEvent {
    pub event_type: EventType,
    pub state: KeeperState,
    pub path: Option<String>,
}

impl WatchedEvent {
    pub(crate) fn node(event_type: EventType, path: String) -> WatchedEvent {
        WatchedEvent {
            event_type,
            state: KeeperState::SyncConnected,
            path: Some(path),
        }
    }

    pub(crate) fn session(state: KeeperState) -> WatchedEvent {
        WatchedEvent {
            event_type: EventType::None,
            state,
            path: None,
        }
    }

    /// Whether this is a node event (not a session state change).
    pub fn is_node_event(&self) -> bool {
        self.event_type != EventType::None
    }
}

impl fmt::Display for WatchedEvent {
    /// ZooKeeper 3.8's `WatchedEvent.toString()`, as zkCli prints it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "WatchedEvent state:{:?} type:{:?} path:{}",
            self.state,
            self.event_type,
            self.path.as_deref().unwrap_or("null")
        )
    }
}

/// A one-shot watch (data, exists or child), set by a `*_w` call.
///
/// Await it for the one event that fires it: the node event, or, if the
/// watch can never fire any more, a session event whose state says why
/// (`Expired`, `AuthFailed`, `Closed`). Connection loss does not fire it:
/// the client re-registers the watch when it reconnects (setWatches), and
/// a change made meanwhile is delivered then.
///
/// The event is delivered before the result of any later call that
/// observes the change. Dropping the receiver forgets the watch on the
/// client (the server may still send its event; it is discarded).
#[derive(Debug)]
pub struct WatchReceiver {
    rx: oneshot::Receiver<WatchedEvent>,
}

impl WatchReceiver {
    pub(crate) fn new() -> (oneshot::Sender<WatchedEvent>, WatchReceiver) {
        let (tx, rx) = oneshot::channel();
        (tx, WatchReceiver { rx })
    }

    /// The event if it has fired already.
    pub fn try_recv(&mut self) -> Option<WatchedEvent> {
        match self.rx.try_recv() {
            Ok(ev) => Some(ev),
            Err(oneshot::error::TryRecvError::Empty) => None,
            Err(oneshot::error::TryRecvError::Closed) => {
                Some(WatchedEvent::session(KeeperState::Closed))
            }
        }
    }
}

impl Future for WatchReceiver {
    type Output = WatchedEvent;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<WatchedEvent> {
        Pin::new(&mut self.rx)
            .poll(cx)
            .map(|r| r.unwrap_or_else(|_| WatchedEvent::session(KeeperState::Closed)))
    }
}

/// A persistent or persistent-recursive watch set by
/// [`crate::Client::add_watch`]: a stream of every event on the path (and,
/// recursive, below it), in order, until it is removed.
///
/// Session changes are delivered too (event type `None`): `Disconnected`
/// means events may have been missed until the following `SyncConnected`
/// (the watch itself is re-registered on reconnect). The stream ends after
/// `PersistentWatchRemoved` or a terminal state (`Expired`, `AuthFailed`,
/// `Closed`).
#[derive(Debug)]
pub struct PersistentWatch {
    path: String,
    rx: mpsc::UnboundedReceiver<WatchedEvent>,
}

impl PersistentWatch {
    pub(crate) fn new(path: String) -> (mpsc::UnboundedSender<WatchedEvent>, PersistentWatch) {
        let (tx, rx) = mpsc::unbounded_channel();
        (tx, PersistentWatch { path, rx })
    }

    /// The watched path (relative to the chroot).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The next event; `None` once the watch is gone.
    pub async fn recv(&mut self) -> Option<WatchedEvent> {
        self.rx.recv().await
    }

    /// The next event if one is queued.
    pub fn try_recv(&mut self) -> Option<WatchedEvent> {
        self.rx.try_recv().ok()
    }

    /// The next node event, skipping session changes; `None` once the watch
    /// is gone.
    pub async fn next_node_event(&mut self) -> Option<WatchedEvent> {
        loop {
            let ev = self.rx.recv().await?;
            if ev.is_node_event() {
                return Some(ev);
            }
        }
    }
}

/// The kinds of watch the registry keeps (ZooKeeper's ZKWatchManager maps).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum WatchKind {
    Data,
    Exist,
    Child,
    Persistent,
    PersistentRecursive,
}

/// Where a watch's events go.
#[derive(Debug)]
pub(crate) enum WatchSink {
    Once(oneshot::Sender<WatchedEvent>),
    Stream(mpsc::UnboundedSender<WatchedEvent>),
}

impl WatchSink {
    fn is_closed(&self) -> bool {
        match self {
            WatchSink::Once(tx) => tx.is_closed(),
            WatchSink::Stream(tx) => tx.is_closed(),
        }
    }

    fn send(self, ev: WatchedEvent) {
        match self {
            WatchSink::Once(tx) => {
                let _ = tx.send(ev);
            }
            WatchSink::Stream(tx) => {
                let _ = tx.send(ev);
            }
        }
    }
}

/// The watches a client has set, by server path. Owned by the connection
/// task: no locks.
#[derive(Debug, Default)]
pub(crate) struct WatchRegistry {
    data: HashMap<String, Vec<WatchSink>>,
    exist: HashMap<String, Vec<WatchSink>>,
    child: HashMap<String, Vec<WatchSink>>,
    persistent: HashMap<String, Vec<mpsc::UnboundedSender<WatchedEvent>>>,
    recursive: HashMap<String, Vec<mpsc::UnboundedSender<WatchedEvent>>>,
}

/// The paths to re-register on reconnect.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct WatchPaths {
    pub data: Vec<String>,
    pub exist: Vec<String>,
    pub child: Vec<String>,
    pub persistent: Vec<String>,
    pub recursive: Vec<String>,
}

impl WatchPaths {
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
            && self.exist.is_empty()
            && self.child.is_empty()
            && self.persistent.is_empty()
            && self.recursive.is_empty()
    }
}

impl WatchRegistry {
    pub fn add(&mut self, kind: WatchKind, server_path: String, sink: WatchSink) {
        match (kind, sink) {
            (WatchKind::Data, s) => self.data.entry(server_path).or_default().push(s),
            (WatchKind::Exist, s) => self.exist.entry(server_path).or_default().push(s),
            (WatchKind::Child, s) => self.child.entry(server_path).or_default().push(s),
            (WatchKind::Persistent, WatchSink::Stream(tx)) => {
                self.persistent.entry(server_path).or_default().push(tx)
            }
            (WatchKind::PersistentRecursive, WatchSink::Stream(tx)) => {
                self.recursive.entry(server_path).or_default().push(tx)
            }
            (WatchKind::Persistent | WatchKind::PersistentRecursive, WatchSink::Once(_)) => {
                debug_assert!(false, "persistent watches deliver to streams")
            }
        }
    }

    /// Routes a node event from the server (ZooKeeper's
    /// `ZKWatchManager.materialize`). One-shot watches that fire are removed.
    pub fn trigger(&mut self, event_type: EventType, server_path: &str, client_path: &str) {
        let mut once: Vec<WatchSink> = Vec::new();
        match event_type {
            EventType::NodeCreated | EventType::NodeDataChanged => {
                once.extend(self.data.remove(server_path).unwrap_or_default());
                once.extend(self.exist.remove(server_path).unwrap_or_default());
            }
            EventType::NodeChildrenChanged => {
                once.extend(self.child.remove(server_path).unwrap_or_default());
            }
            EventType::NodeDeleted => {
                once.extend(self.data.remove(server_path).unwrap_or_default());
                once.extend(self.exist.remove(server_path).unwrap_or_default());
                once.extend(self.child.remove(server_path).unwrap_or_default());
            }
            _ => {}
        }
        let ev = WatchedEvent::node(event_type, client_path.to_string());
        for s in once {
            s.send(ev.clone());
        }
        if let Some(txs) = self.persistent.get_mut(server_path) {
            txs.retain(|tx| tx.send(ev.clone()).is_ok());
        }
        // Recursive watches never see NodeChildrenChanged (the server sends
        // none for them; a child event for a path is a plain persistent one).
        if event_type != EventType::NodeChildrenChanged && !self.recursive.is_empty() {
            let mut p = server_path;
            loop {
                if let Some(txs) = self.recursive.get_mut(p) {
                    txs.retain(|tx| tx.send(ev.clone()).is_ok());
                }
                if p == "/" {
                    break;
                }
                p = match wazoo_proto::path::parent(p) {
                    "" => break,
                    parent => parent,
                };
            }
        }
    }

    /// A session state change: persistent watches hear of it; on a terminal
    /// state every watch is told and dropped.
    pub fn state_change(&mut self, state: KeeperState, terminal: bool) {
        let ev = WatchedEvent::session(state);
        for txs in self
            .persistent
            .values_mut()
            .chain(self.recursive.values_mut())
        {
            txs.retain(|tx| tx.send(ev.clone()).is_ok());
        }
        if terminal {
            for (_, sinks) in self
                .data
                .drain()
                .chain(self.exist.drain())
                .chain(self.child.drain())
            {
                for s in sinks {
                    s.send(ev.clone());
                }
            }
            self.persistent.clear();
            self.recursive.clear();
        }
    }

    /// Whether a watch of type `ty` is set on `server_path`.
    pub fn contains(&self, server_path: &str, ty: WatcherType) -> bool {
        let has = |m: &HashMap<String, Vec<WatchSink>>| {
            m.get(server_path)
                .is_some_and(|v| v.iter().any(|s| !s.is_closed()))
        };
        let has_stream = |m: &HashMap<String, Vec<mpsc::UnboundedSender<WatchedEvent>>>| {
            m.get(server_path)
                .is_some_and(|v| v.iter().any(|s| !s.is_closed()))
        };
        match ty {
            WatcherType::Data => has(&self.data) || has(&self.exist),
            WatcherType::Children => has(&self.child),
            WatcherType::Persistent => has_stream(&self.persistent),
            WatcherType::PersistentRecursive => has_stream(&self.recursive),
            WatcherType::Any => {
                has(&self.data)
                    || has(&self.exist)
                    || has(&self.child)
                    || has_stream(&self.persistent)
                    || has_stream(&self.recursive)
            }
        }
    }

    /// Removes the watches of type `ty` on `server_path`, telling each
    /// (`DataWatchRemoved`, `ChildWatchRemoved`, `PersistentWatchRemoved`).
    /// Returns whether any was removed.
    pub fn remove(&mut self, server_path: &str, ty: WatcherType, client_path: &str) -> bool {
        let mut removed = false;
        let any = ty == WatcherType::Any;
        let mut tell = |sinks: Option<Vec<WatchSink>>, et: EventType| {
            for s in sinks.unwrap_or_default() {
                removed = true;
                s.send(WatchedEvent::node(et, client_path.to_string()));
            }
        };
        if any || ty == WatcherType::Data {
            tell(self.data.remove(server_path), EventType::DataWatchRemoved);
            tell(self.exist.remove(server_path), EventType::DataWatchRemoved);
        }
        if any || ty == WatcherType::Children {
            tell(self.child.remove(server_path), EventType::ChildWatchRemoved);
        }
        let mut tell_streams = |txs: Option<Vec<mpsc::UnboundedSender<WatchedEvent>>>| {
            for tx in txs.unwrap_or_default() {
                removed = true;
                let _ = tx.send(WatchedEvent::node(
                    EventType::PersistentWatchRemoved,
                    client_path.to_string(),
                ));
            }
        };
        if any || ty == WatcherType::Persistent {
            tell_streams(self.persistent.remove(server_path));
        }
        if any || ty == WatcherType::PersistentRecursive {
            tell_streams(self.recursive.remove(server_path));
        }
        removed
    }

    /// Drops watches nobody listens to any more, then lists the paths to
    /// re-register.
    pub fn paths(&mut self) -> WatchPaths {
        fn live<T>(m: &mut HashMap<String, Vec<T>>, closed: impl Fn(&T) -> bool) -> Vec<String> {
            m.retain(|_, v| {
                v.retain(|s| !closed(s));
                !v.is_empty()
            });
            let mut p: Vec<String> = m.keys().cloned().collect();
            p.sort();
            p
        }
        WatchPaths {
            data: live(&mut self.data, WatchSink::is_closed),
            exist: live(&mut self.exist, WatchSink::is_closed),
            child: live(&mut self.child, WatchSink::is_closed),
            persistent: live(&mut self.persistent, mpsc::UnboundedSender::is_closed),
            recursive: live(&mut self.recursive, mpsc::UnboundedSender::is_closed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn once(reg: &mut WatchRegistry, kind: WatchKind, path: &str) -> WatchReceiver {
        let (tx, rx) = WatchReceiver::new();
        reg.add(kind, path.to_string(), WatchSink::Once(tx));
        rx
    }

    fn stream(reg: &mut WatchRegistry, kind: WatchKind, path: &str) -> PersistentWatch {
        let (tx, rx) = PersistentWatch::new(path.to_string());
        reg.add(kind, path.to_string(), WatchSink::Stream(tx));
        rx
    }

    #[test]
    fn one_shot_watches_fire_once_on_the_matching_events() {
        let mut reg = WatchRegistry::default();
        let mut data = once(&mut reg, WatchKind::Data, "/a");
        let mut exist = once(&mut reg, WatchKind::Exist, "/b");
        let mut child = once(&mut reg, WatchKind::Child, "/a");
        reg.trigger(EventType::NodeDataChanged, "/a", "/a");
        assert_eq!(
            data.try_recv(),
            Some(WatchedEvent::node(EventType::NodeDataChanged, "/a".into()))
        );
        assert_eq!(child.try_recv(), None, "a data change is not a child event");
        reg.trigger(EventType::NodeCreated, "/b", "/b");
        assert_eq!(exist.try_recv().unwrap().event_type, EventType::NodeCreated);
        reg.trigger(EventType::NodeDeleted, "/a", "/a");
        assert_eq!(child.try_recv().unwrap().event_type, EventType::NodeDeleted);
        assert!(reg.paths().is_empty(), "fired watches are gone");
    }

    #[test]
    fn recursive_watches_see_descendants_but_not_child_events() {
        let mut reg = WatchRegistry::default();
        let mut rec = stream(&mut reg, WatchKind::PersistentRecursive, "/app");
        let mut per = stream(&mut reg, WatchKind::Persistent, "/app");
        reg.trigger(EventType::NodeCreated, "/app/x/y", "/x/y");
        reg.trigger(EventType::NodeChildrenChanged, "/app", "/");
        reg.trigger(EventType::NodeDataChanged, "/app", "/");
        assert_eq!(
            rec.try_recv(),
            Some(WatchedEvent::node(EventType::NodeCreated, "/x/y".into()))
        );
        assert_eq!(
            rec.try_recv().unwrap().event_type,
            EventType::NodeDataChanged
        );
        assert_eq!(rec.try_recv(), None);
        assert_eq!(
            per.try_recv().unwrap().event_type,
            EventType::NodeChildrenChanged
        );
        assert_eq!(
            per.try_recv().unwrap().event_type,
            EventType::NodeDataChanged
        );
        let paths = reg.paths();
        assert_eq!(paths.persistent, vec!["/app".to_string()]);
        assert_eq!(paths.recursive, vec!["/app".to_string()]);
    }

    #[test]
    fn terminal_state_fires_every_watch_and_ends_streams() {
        let mut reg = WatchRegistry::default();
        let data = once(&mut reg, WatchKind::Data, "/a");
        let mut per = stream(&mut reg, WatchKind::Persistent, "/a");
        reg.state_change(KeeperState::Disconnected, false);
        assert_eq!(
            per.try_recv(),
            Some(WatchedEvent::session(KeeperState::Disconnected))
        );
        reg.state_change(KeeperState::Expired, true);
        let mut data = data;
        assert_eq!(
            data.try_recv(),
            Some(WatchedEvent::session(KeeperState::Expired))
        );
        assert_eq!(per.try_recv().unwrap().state, KeeperState::Expired);
        assert!(reg.paths().is_empty());
    }

    #[test]
    fn remove_tells_the_removed_watches_and_dropped_receivers_are_not_reregistered() {
        let mut reg = WatchRegistry::default();
        let mut data = once(&mut reg, WatchKind::Data, "/a");
        let dropped = once(&mut reg, WatchKind::Child, "/b");
        drop(dropped);
        assert!(reg.contains("/a", WatcherType::Data));
        assert!(!reg.contains("/a", WatcherType::Children));
        assert!(!reg.contains("/b", WatcherType::Children));
        assert!(reg.remove("/a", WatcherType::Any, "/a"));
        assert_eq!(
            data.try_recv().unwrap().event_type,
            EventType::DataWatchRemoved
        );
        assert!(reg.paths().is_empty());
    }

    #[test]
    fn watched_event_prints_like_zookeeper() {
        let ev = WatchedEvent::node(EventType::NodeDataChanged, "/a".into());
        assert_eq!(
            ev.to_string(),
            "WatchedEvent state:SyncConnected type:NodeDataChanged path:/a"
        );
        assert_eq!(
            WatchedEvent::session(KeeperState::Expired).to_string(),
            "WatchedEvent state:Expired type:None path:null"
        );
    }
}
