//! What the client port counts to hold its bounds: connections per
//! address (`maxClientCnxns`) and in all (`maxCnxns`), and the bytes of requests not yet
//! answered (`largeRequestMaxBytes`).

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::config::Config;
use crate::metrics::{LatencyBatch, Metrics};
use wazoo_proto::OpCode;

/// Connection counts of a client port: per address for maxClientCnxns,
/// and in all for maxCnxns.
#[derive(Default)]
pub(super) struct PerIp(Mutex<Counts>);

#[derive(Default)]
struct Counts {
    by_ip: HashMap<IpAddr, u32>,
    total: u32,
}

/// Why a connection was not counted in.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Refused {
    /// The port has `maxCnxns` connections.
    Total(u32),
    /// The address has `maxClientCnxns` connections.
    PerIp,
}

impl PerIp {
    /// Counts a connection from `ip`, unless the port already has
    /// `max_total` connections or the address `max_per_ip` (0: no limit;
    /// the total is checked first, as ZooKeeper's accept thread does); the
    /// counts are given back when the guard drops.
    pub(super) fn try_add(
        self: &Arc<Self>,
        ip: IpAddr,
        max_per_ip: u32,
        max_total: u32,
    ) -> Result<PerIpGuard, Refused> {
        let mut c = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if max_total > 0 && c.total >= max_total {
            return Err(Refused::Total(c.total));
        }
        let n = c.by_ip.entry(ip).or_insert(0);
        if max_per_ip > 0 && *n >= max_per_ip {
            return Err(Refused::PerIp);
        }
        *n += 1;
        c.total += 1;
        Ok(PerIpGuard {
            per_ip: Arc::clone(self),
            ip,
        })
    }

    fn remove(&self, ip: IpAddr) {
        let mut c = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = c.by_ip.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                c.by_ip.remove(&ip);
            }
            c.total -= 1;
        }
    }

    #[cfg(test)]
    pub(super) fn count(&self, ip: IpAddr) -> u32 {
        let c = self.0.lock().unwrap_or_else(|e| e.into_inner());
        c.by_ip.get(&ip).copied().unwrap_or(0)
    }
}

/// One connection's place in its address's count, given back on drop
/// (even if the connection's task panics).
pub(super) struct PerIpGuard {
    per_ip: Arc<PerIp>,
    ip: IpAddr,
}

impl Drop for PerIpGuard {
    fn drop(&mut self) {
        self.per_ip.remove(self.ip);
    }
}

/// Client requests read and not yet answered, in bytes, over every
/// connection of the member: ZooKeeper's `largeRequestMaxBytes`. Each
/// connection can hold [`MAX_IN_FLIGHT`] requests, each up to
/// jute.maxbuffer, so without this sixty connections of one address could
/// make the member hold sixty gigabytes of requests.
pub(super) struct RequestBytes {
    pub(super) in_flight: AtomicU64,
    pub(super) max: u64,
    /// Requests no longer than this are not counted (-1: all are).
    pub(super) threshold: i64,
}

impl RequestBytes {
    pub(super) fn of(cfg: &Config) -> RequestBytes {
        RequestBytes {
            in_flight: AtomicU64::new(0),
            max: cfg.large_request_max_bytes,
            threshold: cfg.large_request_threshold,
        }
    }

    /// The bytes a request of `len` bytes counts for.
    fn counted(&self, len: usize) -> u64 {
        if self.threshold < 0 || len as i64 > self.threshold {
            len as u64
        } else {
            0
        }
    }

    /// Takes `n` bytes, unless that would pass the bound.
    fn try_take(&self, n: u64) -> bool {
        self.in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |cur| {
                cur.checked_add(n).filter(|&total| total <= self.max)
            })
            .is_ok()
    }

    fn give_back(&self, n: u64) {
        let before = self.in_flight.fetch_sub(n, Ordering::AcqRel);
        debug_assert!(before >= n, "request bytes given back twice");
    }
}

/// One connection's part of [`RequestBytes`]: the counted bytes of each
/// unanswered request, in order (replies come back in request order),
/// with when its frame was read and whether it is a write, for the
/// latency metrics. What is left is given back when the connection ends.
pub(super) struct ConnRequests {
    global: Arc<RequestBytes>,
    state: Mutex<ConnState>,
    metrics: Arc<Metrics>,
}

/// What a connection's reader and writer share (on the member's one
/// thread, so the lock is never contended).
#[derive(Default)]
struct ConnState {
    pending: VecDeque<PendingRequest>,
    /// The latencies of the replies being recorded, kept for its room.
    latencies: LatencyBatch,
}

/// One unanswered request.
struct PendingRequest {
    bytes: u64,
    read_at: Instant,
    update: bool,
}

impl ConnRequests {
    pub(super) fn new(global: Arc<RequestBytes>, metrics: Arc<Metrics>) -> ConnRequests {
        ConnRequests {
            global,
            state: Mutex::default(),
            metrics,
        }
    }

    /// Counts a request frame (`payload`, after the length) read at
    /// `read_at` (the reader reads the clock once per read from the
    /// socket, not per frame); false if the member's bound would be passed
    /// (ZooKeeper then closes the connection).
    pub(super) fn admit(&self, payload: &[u8], read_at: Instant) -> bool {
        let n = self.global.counted(payload.len());
        if !self.global.try_take(n) {
            return false;
        }
        // The opcode follows the xid; an unreadable one counts as a read.
        let update = payload
            .get(4..8)
            .and_then(|b| OpCode::from_i32(i32::from_be_bytes([b[0], b[1], b[2], b[3]])))
            .is_some_and(OpCode::is_write);
        self.lock().pending.push_back(PendingRequest {
            bytes: n,
            read_at,
            update,
        });
        true
    }

    /// `replies` requests were answered (their replies are written): their
    /// bytes go back, and their latencies go to the metrics, together.
    pub(super) fn answered(&self, replies: usize) {
        if replies == 0 {
            return;
        }
        let now = Instant::now();
        let mut state = self.lock();
        let ConnState { pending, latencies } = &mut *state;
        let answered = replies.min(pending.len());
        let mut n = 0;
        for r in pending.drain(..answered) {
            n += r.bytes;
            latencies.add(r.update, now.saturating_duration_since(r.read_at));
        }
        self.metrics.observe_requests(latencies);
        latencies.clear();
        drop(state);
        self.global.give_back(n);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ConnState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for ConnRequests {
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        self.global
            .give_back(state.pending.drain(..).map(|r| r.bytes).sum());
    }
}
