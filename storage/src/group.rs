//! [`GroupCommitLog`]: a dedicated thread that owns a [`TxnLog`] and commits
//! in groups.
//!
//! One fsync costs milliseconds (about 4 ms on the reference machines); one
//! fsync per write would cap a member at a few hundred writes per second. The
//! writer thread instead blocks for the first queued append, then drains
//! everything else already queued (up to [`GroupCommitOptions::max_batch_bytes`]),
//! writes it all, fsyncs once and reports the highest durable zxid. Appends
//! that arrive while an fsync is in flight form the next batch, so the batch
//! size grows with the load and throughput is not bounded by fsync latency.
//!
//! The durability callback runs on the writer thread. It must not block (that
//! delays the next commit, and if it waits for a thread that is itself waiting
//! for room in this queue, the two deadlock); to hand the zxid to async code,
//! send it through a channel that never blocks the sender, e.g. a tokio
//! `UnboundedSender<u64>` or a `std::sync::mpsc::Sender<u64>` (reports come
//! at most one per fsync, so the receiver bounds them by draining). A caller
//! that must not block its own thread appends with
//! [`GroupCommitLog::try_append`]. This crate does not depend on tokio.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};

use crate::error::{Result, StorageError};
use crate::log::{LogStats, TxnLog};
use crate::Zxid;

/// Tuning of a [`GroupCommitLog`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupCommitOptions {
    /// Appends that may wait in the queue; [`GroupCommitLog::append`] blocks
    /// (and [`GroupCommitLog::try_append`] fails) when it is full. Default 65536.
    pub queue_capacity: usize,
    /// A batch stops draining the queue once it holds this many body bytes, so
    /// that acknowledgements keep flowing under a flood. Default 16 MiB.
    pub max_batch_bytes: usize,
    /// Fault hook: the writer sleeps this long before every fsync, as a slow
    /// disk would make it wait. Only with the `fault-hooks` feature.
    #[cfg(feature = "fault-hooks")]
    pub sync_delay: Option<std::time::Duration>,
}

impl Default for GroupCommitOptions {
    fn default() -> Self {
        Self {
            queue_capacity: 65536,
            max_batch_bytes: 16 * 1024 * 1024,
            #[cfg(feature = "fault-hooks")]
            sync_delay: None,
        }
    }
}

/// What the writer thread reports after each batch: `Ok(zxid)` when every
/// record up to `zxid` is durable, or `Err` once, when the writer failed and
/// stopped (nothing queued after the last `Ok` is durable then).
pub type DurabilityReport<'a> = std::result::Result<Zxid, &'a StorageError>;

/// Why [`GroupCommitLog::try_append`] did not queue a record.
#[derive(Debug, thiserror::Error)]
pub enum TryAppendError {
    /// The queue is full; the body is handed back.
    #[error("the group-commit queue is full")]
    Full(Vec<u8>),
    /// The append was refused (see [`GroupCommitLog::append`]).
    #[error(transparent)]
    Refused(#[from] StorageError),
}

type Append = (u64, Vec<u8>);

/// What the appenders share: the queue and the last zxid queued.
struct Queue {
    tx: Option<SyncSender<Append>>,
    last_queued: u64,
}

/// A [`TxnLog`] owned by a writer thread that batches appends into group
/// commits. Share it between threads by reference or in an `Arc`.
pub struct GroupCommitLog {
    queue: Mutex<Queue>,
    max_record_bytes: u32,
    writer: Option<JoinHandle<Result<TxnLog>>>,
    stats: Arc<LogStats>,
    durable: Arc<AtomicU64>,
}

impl std::fmt::Debug for GroupCommitLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupCommitLog")
            .field("durable_zxid", &format_args!("{:#x}", self.durable_zxid()))
            .field("running", &self.writer.is_some())
            .finish()
    }
}

impl GroupCommitLog {
    /// Moves `log` to a new writer thread. `on_durable` is called on that
    /// thread after every batch (see [`DurabilityReport`]).
    pub fn start<F>(log: TxnLog, opts: GroupCommitOptions, on_durable: F) -> Result<Self>
    where
        F: FnMut(DurabilityReport<'_>) + Send + 'static,
    {
        let (tx, rx) = mpsc::sync_channel(opts.queue_capacity);
        let last = log.last_zxid().0;
        let max_record_bytes = log.options().max_record_bytes;
        let stats = log.stats();
        let durable = Arc::new(AtomicU64::new(log.durable_zxid().0));
        let writer = Writer {
            log,
            rx,
            max_batch_bytes: opts.max_batch_bytes,
            durable: Arc::clone(&durable),
            #[cfg(feature = "fault-hooks")]
            sync_delay: opts.sync_delay,
        };
        let spawned = thread::Builder::new()
            .name("wazoo-txnlog".into())
            .spawn(move || writer.run(on_durable));
        let writer = spawned.map_err(StorageError::SpawnWriter)?;
        Ok(Self {
            queue: Mutex::new(Queue {
                tx: Some(tx),
                last_queued: last,
            }),
            max_record_bytes,
            writer: Some(writer),
            stats,
            durable,
        })
    }

    /// Queues a record, blocking while the queue is full. Zxids must strictly
    /// increase across all callers; the check and the enqueue are atomic, so
    /// queue order is zxid order.
    ///
    /// Fails with [`StorageError::ZxidNotIncreasing`] or
    /// [`StorageError::RecordTooLarge`] for a caller bug (the writer keeps
    /// running), or [`StorageError::WriterStopped`] once the writer has failed.
    pub fn append(&self, zxid: Zxid, body: Vec<u8>) -> Result<()> {
        let zxid = zxid.0;
        let mut queue = self.lock_queue();
        let tx = self.admit(&queue, zxid, body.len())?;
        tx.send((zxid, body))
            .map_err(|_| StorageError::WriterStopped)?;
        queue.last_queued = zxid;
        Ok(())
    }

    /// Like [`GroupCommitLog::append`] but never blocks: a full queue gives
    /// the body back in [`TryAppendError::Full`]. For callers on an async
    /// runtime that must not block a worker thread.
    pub fn try_append(&self, zxid: Zxid, body: Vec<u8>) -> Result<(), TryAppendError> {
        let zxid = zxid.0;
        let mut queue = self.lock_queue();
        let tx = self.admit(&queue, zxid, body.len())?;
        match tx.try_send((zxid, body)) {
            Ok(()) => {
                queue.last_queued = zxid;
                Ok(())
            }
            Err(TrySendError::Full((_, body))) => Err(TryAppendError::Full(body)),
            Err(TrySendError::Disconnected(_)) => Err(StorageError::WriterStopped.into()),
        }
    }

    /// The highest zxid known to be durable (as last reported to the callback).
    pub fn durable_zxid(&self) -> Zxid {
        Zxid(self.durable.load(Ordering::Acquire))
    }

    /// The log's counters (fsyncs, commits), readable while the writer runs.
    pub fn stats(&self) -> Arc<LogStats> {
        Arc::clone(&self.stats)
    }

    /// Stops accepting appends, lets the writer commit everything queued, and
    /// gives the log back; or returns the error that stopped the writer.
    pub fn shutdown(mut self) -> Result<TxnLog> {
        self.stop()
    }

    fn stop(&mut self) -> Result<TxnLog> {
        self.lock_queue().tx = None;
        let Some(writer) = self.writer.take() else {
            return Err(StorageError::WriterStopped);
        };
        if writer.thread().id() == thread::current().id() {
            // Dropped from its own durability callback: the writer cannot
            // wait for itself. It exits once the queue is closed and drained.
            return Err(StorageError::WriterStopped);
        }
        writer.join().unwrap_or(Err(StorageError::WriterPanicked))
    }

    fn lock_queue(&self) -> MutexGuard<'_, Queue> {
        // The lock guards no invariant a panic could break half way.
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Checks an append against the caller's contract; returns the sender.
    fn admit<'q>(&self, queue: &'q Queue, zxid: u64, len: usize) -> Result<&'q SyncSender<Append>> {
        if zxid <= queue.last_queued {
            return Err(StorageError::ZxidNotIncreasing {
                last: queue.last_queued,
                zxid,
            });
        }
        if len > self.max_record_bytes as usize {
            return Err(StorageError::RecordTooLarge {
                len,
                max: self.max_record_bytes,
            });
        }
        queue.tx.as_ref().ok_or(StorageError::WriterStopped)
    }
}

impl Drop for GroupCommitLog {
    /// Commits what is queued and waits for the writer (use
    /// [`GroupCommitLog::shutdown`] to see errors). Blocks while the
    /// durability callback blocks.
    fn drop(&mut self) {
        if self.writer.is_some() {
            if let Err(error) = self.stop() {
                tracing::error!(%error, "transaction log writer stopped with an error");
            }
        }
    }
}

/// The writer thread's state.
struct Writer {
    log: TxnLog,
    rx: Receiver<Append>,
    max_batch_bytes: usize,
    durable: Arc<AtomicU64>,
    #[cfg(feature = "fault-hooks")]
    sync_delay: Option<std::time::Duration>,
}

impl Writer {
    fn run(mut self, mut on_durable: impl FnMut(DurabilityReport<'_>)) -> Result<TxnLog> {
        while let Ok(first) = self.rx.recv() {
            if let Err(error) = self.commit_batch(first) {
                tracing::error!(%error, "transaction log writer failed; no further appends are accepted");
                // Close the queue before reporting, so that an append made
                // after the report fails instead of queueing into the void.
                drop(self.rx);
                on_durable(Err(&error));
                return Err(error);
            }
            let durable = self.log.durable_zxid();
            self.durable.store(durable.0, Ordering::Release);
            on_durable(Ok(durable));
        }
        Ok(self.log)
    }

    /// Appends `first` and everything already queued behind it, then syncs once.
    fn commit_batch(&mut self, first: Append) -> Result<()> {
        let mut bytes = first.1.len();
        self.log.append(Zxid(first.0), &first.1)?;
        while bytes < self.max_batch_bytes {
            let Ok((zxid, body)) = self.rx.try_recv() else {
                break;
            };
            bytes += body.len();
            self.log.append(Zxid(zxid), &body)?;
        }
        #[cfg(feature = "fault-hooks")]
        if let Some(delay) = self.sync_delay {
            thread::sleep(delay);
        }
        self.log.sync()
    }
}
