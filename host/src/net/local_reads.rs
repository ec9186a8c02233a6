//! Reads answered on the client I/O threads (`wazoo.client.ioThreads`),
//! from a copy of the tree the core loop publishes, without a round trip
//! through the member's thread. The rules are the core's
//! ([`crate::core::local_reads`]); this holds them across threads: the
//! published copy behind a read-write lock, and each connection's gate
//! behind a mutex that the core loop's hand-over and the reader's answer
//! both take (rule 3).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use tokio::sync::mpsc;

use crate::core::acl::AuthInfo;
use crate::core::local_reads::{LocalReadGate, ReadView, ReadViews};
use crate::core::server::Server;
use crate::member::ConnMsg;
use wazoo_proto::Request;

/// The member's published copy of the tree, shared by the core loop (which
/// publishes) and the I/O threads (which answer from it).
#[derive(Default)]
pub struct LocalReads {
    current: RwLock<Option<Arc<ReadView>>>,
    /// The sequence number of `current`: a reader whose copy has it needs
    /// no lock and no reference count (a plain load of a line that changes
    /// once a batch, where the lock and the count are written by every
    /// read on every core).
    seq: AtomicU64,
}

impl LocalReads {
    /// Reads on I/O threads when the member has them.
    pub(crate) fn of(cfg: &crate::config::Config) -> Option<Arc<LocalReads>> {
        (cfg.client_io_threads > 0).then(|| Arc::new(LocalReads::default()))
    }

    fn current(&self) -> Option<Arc<ReadView>> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn set(&self, view: Arc<ReadView>) {
        let seq = view.seq;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Some(view);
        self.seq.store(seq, Ordering::Release);
    }

    /// The published copy, through the reader's own `cache`: taken from
    /// the shared slot only when a newer one was published.
    fn current_cached<'a>(&self, cache: &'a mut Option<Arc<ReadView>>) -> Option<&'a ReadView> {
        let published = self.seq.load(Ordering::Acquire);
        if cache.as_ref().is_none_or(|v| v.seq < published) {
            *cache = self.current();
        }
        cache.as_deref()
    }
}

/// The core loop's side: publishes a new copy after a batch that changed
/// the tree.
pub(crate) struct Publisher {
    shared: Arc<LocalReads>,
    views: ReadViews,
}

impl Publisher {
    /// Publishes the server's tree as it is (copy 1).
    pub(crate) fn start(shared: Arc<LocalReads>, server: &Server) -> Publisher {
        let views = ReadViews::start(server);
        shared.set(views.current().clone());
        Publisher { shared, views }
    }

    /// What this batch's hand-overs are stamped with.
    pub(crate) fn seq_of_now(&self, server: &Server) -> u64 {
        self.views.seq_of_now(server)
    }

    /// Publishes the tree as it is now, if a node changed.
    pub(crate) fn publish(&mut self, server: &Server) {
        if let Some(view) = self.views.publish(server) {
            self.shared.set(view);
        }
    }
}

/// A connection's gate, shared by its reader and the core loop.
#[derive(Default)]
pub(crate) struct ConnLocal {
    gate: Mutex<LocalReadGate>,
}

impl ConnLocal {
    fn lock(&self) -> std::sync::MutexGuard<'_, LocalReadGate> {
        self.gate.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The reader hands a request to the core.
    pub(crate) fn to_core(&self) {
        self.lock().to_pipeline();
    }

    /// The core loop hands the connection `replies` replies (and maybe
    /// events) made from copy `seq`, queued by `send`, with the core's
    /// permission `allow` if one was gathered with them; all under the
    /// lock.
    pub(crate) fn hand_over<T>(
        &self,
        seq: u64,
        replies: u32,
        allow: Option<Arc<AuthInfo>>,
        send: impl FnOnce() -> T,
    ) -> T {
        let mut gate = self.lock();
        let sent = send();
        gate.handed_over(seq, replies, allow);
        sent
    }

    /// The connection is closing: no more reads are answered here.
    pub(crate) fn stop(&self) {
        self.lock().stop();
    }

    /// Answers `req` here if the rules allow it, queueing its reply under
    /// the lock (true); false hands it to the core.
    /// `cache`: the reader's copy of the published tree.
    pub(crate) fn try_answer(
        &self,
        reads: &LocalReads,
        cache: &mut Option<Arc<ReadView>>,
        xid: i32,
        req: &Request,
        tx: &mpsc::UnboundedSender<ConnMsg>,
        queued_bytes: &AtomicUsize,
    ) -> bool {
        let gate = self.lock();
        let Some(view) = reads.current_cached(cache) else {
            return false;
        };
        let Some(bytes) = gate.answer(view, xid, req) else {
            return false;
        };
        queued_bytes.fetch_add(bytes.len(), Ordering::AcqRel);
        let _ = tx.send(ConnMsg::Bytes {
            bytes,
            replies: 1,
            local: true,
        });
        true
    }
}
