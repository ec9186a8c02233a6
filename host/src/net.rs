//! The client port: one task per connection, running its reader and its
//! writer until either ends, then telling the core the connection is gone.
//!
//! The reader checks each frame's length against jute.maxbuffer before
//! reading it (a larger one closes the connection, as ZooKeeper does),
//! decodes it and hands it to the core loop. The writer coalesces whatever
//! the core queued into one socket write. A connection may have at most
//! [`MAX_IN_FLIGHT`] requests unanswered, and its reader also stops while
//! the bytes queued for it reach `wazoo.client.maxUnsentReplyBytes`, so a
//! client that does not read its replies cannot make the server queue
//! without bound. The core counts the same bytes (the writer reports what
//! it wrote, [`Input::Written`]): it holds back replies past that bound and
//! closes a connection past `wazoo.client.maxOutboundBytes` (watch events
//! keep coming to a client that does not read).
//!
//! The secure client port (`secureClientPort`) runs the same connection
//! after a TLS handshake (`crate::tls`), bounded in time; a connection
//! that fails its handshake (a plain client, a certificate the trust store
//! refuses) is closed alone. The identities its client certificate proves
//! reach the core right after its Connect ([`Input::Authenticated`]). Both
//! ports share the member's `largeRequestMaxBytes`; each counts its own
//! connections per address, as ZooKeeper's two connection factories do.
//!
//! Whichever way a connection ends (end of stream, a reset, a failed write,
//! a close the core asked for, no handshake in time), the task ends, the
//! core gets [`Input::Closed`] and the per-address count is returned.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, Notify, Semaphore};

use crate::config::Config;
use crate::core::server::{Input, SaslStep};
use crate::member::{ConnMsg, Event};
use crate::metrics::Metrics;
use crate::sasl::{DigestServer, SaslUsers, Step};
use crate::tls::ClientTls;
use wazoo_proto::frame::{self, ClientFrame};
use wazoo_proto::{ConnectRequest, Jute, OpCode};

/// Requests one connection may have unanswered before we stop reading it.
pub const MAX_IN_FLIGHT: usize = 1000;

/// How long a new connection may take to send its ConnectRequest or its
/// four-letter word, and a four-letter word to be answered: ZooKeeper's
/// default `zookeeper.nio.sessionlessCnxnTimeout`.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a close the core asked for waits for the client to take what
/// was queued before it; a client that does not read loses the rest.
const CLOSE_FLUSH_TIMEOUT: Duration = Duration::from_secs(2);

/// The writer reports what it wrote to the core once this much (or the
/// unsent-reply bound, if smaller) has accumulated, not after every write.
const WRITTEN_REPORT_BYTES: usize = 64 << 10;

/// The writer's coalescing buffer: it gathers up to this before writing,
/// and a larger buffer is not kept once written.
const COALESCE_BYTES: usize = 1 << 20;

/// The four-letter words ZooKeeper knows; the first four bytes of a new
/// connection equal to one of these are a command, not a frame length.
pub const FOUR_LETTER_WORDS: [&str; 19] = [
    "conf", "cons", "crst", "dump", "envi", "gtmk", "ruok", "stmk", "srst", "srvr", "stat", "wchc",
    "wchp", "wchs", "mntr", "isro", "hash", "dirs", "recp",
];

static NEXT_CONN: AtomicU64 = AtomicU64::new(1);

/// Per-address connection counts for maxClientCnxns.
#[derive(Default)]
struct PerIp(Mutex<HashMap<IpAddr, u32>>);

impl PerIp {
    /// Counts a connection from `ip`, unless that would exceed `max`; the
    /// count is returned when the guard drops.
    fn try_add(self: &Arc<Self>, ip: IpAddr, max: u32) -> Option<PerIpGuard> {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let n = m.entry(ip).or_insert(0);
        if max > 0 && *n >= max {
            return None;
        }
        *n += 1;
        Some(PerIpGuard {
            per_ip: Arc::clone(self),
            ip,
        })
    }

    fn remove(&self, ip: IpAddr) {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = m.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                m.remove(&ip);
            }
        }
    }

    #[cfg(test)]
    fn count(&self, ip: IpAddr) -> u32 {
        let m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        m.get(&ip).copied().unwrap_or(0)
    }
}

/// One connection's place in its address's count, given back on drop
/// (even if the connection's task panics).
struct PerIpGuard {
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
struct RequestBytes {
    in_flight: AtomicU64,
    max: u64,
    /// Requests smaller than this are not counted (-1: all are).
    threshold: i64,
}

impl RequestBytes {
    fn of(cfg: &Config) -> RequestBytes {
        RequestBytes {
            in_flight: AtomicU64::new(0),
            max: cfg.large_request_max_bytes,
            threshold: cfg.large_request_threshold,
        }
    }

    /// The bytes a request of `len` bytes counts for.
    fn counted(&self, len: usize) -> u64 {
        if self.threshold < 0 || len as i64 >= self.threshold {
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
struct ConnRequests {
    global: Arc<RequestBytes>,
    sizes: Mutex<std::collections::VecDeque<PendingRequest>>,
    metrics: Arc<Metrics>,
}

/// One unanswered request.
struct PendingRequest {
    bytes: u64,
    read_at: Instant,
    update: bool,
}

impl ConnRequests {
    fn new(global: Arc<RequestBytes>, metrics: Arc<Metrics>) -> ConnRequests {
        ConnRequests {
            global,
            sizes: Mutex::default(),
            metrics,
        }
    }

    /// Counts a request frame (`payload`, after the length) just read;
    /// false if the member's bound would be passed (ZooKeeper then closes
    /// the connection).
    fn admit(&self, payload: &[u8]) -> bool {
        let n = self.global.counted(payload.len());
        if !self.global.try_take(n) {
            return false;
        }
        // The opcode follows the xid; an unreadable one counts as a read.
        let update = payload
            .get(4..8)
            .and_then(|b| OpCode::from_i32(i32::from_be_bytes([b[0], b[1], b[2], b[3]])))
            .is_some_and(OpCode::is_write);
        self.sizes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back(PendingRequest {
                bytes: n,
                read_at: Instant::now(),
                update,
            });
        true
    }

    /// `replies` requests were answered (their replies are written): their
    /// bytes go back, and their latencies go to the metrics.
    fn answered(&self, replies: usize) {
        if replies == 0 {
            return;
        }
        let now = Instant::now();
        let mut sizes = self.sizes.lock().unwrap_or_else(|e| e.into_inner());
        let answered = replies.min(sizes.len());
        let mut n = 0;
        for r in sizes.drain(..answered) {
            n += r.bytes;
            self.metrics
                .observe_request(r.update, now.saturating_duration_since(r.read_at));
        }
        drop(sizes);
        self.global.give_back(n);
    }
}

impl Drop for ConnRequests {
    fn drop(&mut self) {
        let sizes = self.sizes.get_mut().unwrap_or_else(|e| e.into_inner());
        self.global
            .give_back(sizes.drain(..).map(|r| r.bytes).sum());
    }
}

/// A connection's unanswered requests, counted twice: at most
/// [`MAX_IN_FLIGHT`] of them, and their bytes within the member's
/// `largeRequestMaxBytes`. The reader takes both, the writer gives both
/// back as it writes replies.
struct Unanswered {
    permits: Semaphore,
    bytes: ConnRequests,
}

/// What a connection's reader, writer and the core loop share.
#[derive(Default)]
struct ConnShared {
    /// Bytes handed to the writer and not yet written to the socket.
    queued_bytes: AtomicUsize,
    /// The writer wrote something: wakes a reader waiting for room.
    written: Notify,
    /// The core asked to close the connection.
    close_requested: Notify,
}

/// The core loop's handle on one connection: its writer's queue, counted
/// in bytes. The queue itself has no fixed capacity; the core bounds what
/// it puts there (`wazoo.client.maxOutboundBytes`) from the writer's reports.
pub struct ConnTx {
    tx: mpsc::UnboundedSender<ConnMsg>,
    shared: Arc<ConnShared>,
}

impl ConnTx {
    /// Queues bytes (or a close) for the connection's writer; fails once
    /// the connection is gone.
    pub fn send(&self, msg: ConnMsg) -> Result<(), mpsc::error::SendError<ConnMsg>> {
        match &msg {
            ConnMsg::Bytes { bytes, .. } => {
                self.shared
                    .queued_bytes
                    .fetch_add(bytes.len(), Ordering::AcqRel);
            }
            ConnMsg::Close => self.shared.close_requested.notify_one(),
        }
        self.tx.send(msg)
    }
}

/// A connection's byte bounds, from zoo.cfg.
#[derive(Clone, Copy)]
struct Bounds {
    /// jute.maxbuffer: the largest frame read.
    max_frame: usize,
    /// The reader waits while this many bytes are queued for the writer.
    unsent_reply_bytes: usize,
    /// The writer reports written bytes to the core in chunks of this.
    written_report_bytes: usize,
}

impl Bounds {
    fn of(cfg: &Config) -> Bounds {
        let unsent = usize::try_from(cfg.max_unsent_reply_bytes).unwrap_or(usize::MAX);
        Bounds {
            max_frame: cfg.max_buffer,
            unsent_reply_bytes: unsent,
            // Never more than the bound: a core holding replies back at the
            // bound must hear that the writer emptied its queue.
            written_report_bytes: WRITTEN_REPORT_BYTES.min(unsent).max(1),
        }
    }
}

/// Serves the client port, and the secure client port if there is one.
pub fn spawn_accept_loops(
    plain: TcpListener,
    secure: Option<(TcpListener, Arc<ClientTls>)>,
    core: mpsc::Sender<Event>,
    cfg: Arc<Config>,
    metrics: Arc<Metrics>,
) {
    let request_bytes = Arc::new(RequestBytes::of(&cfg));
    if let Some((listener, tls)) = secure {
        tokio::spawn(accept_loop(
            listener,
            Some(tls),
            core.clone(),
            Arc::clone(&cfg),
            Arc::clone(&request_bytes),
            Arc::clone(&metrics),
        ));
    }
    tokio::spawn(accept_loop(plain, None, core, cfg, request_bytes, metrics));
}

async fn accept_loop(
    listener: TcpListener,
    tls: Option<Arc<ClientTls>>,
    core: mpsc::Sender<Event>,
    cfg: Arc<Config>,
    request_bytes: Arc<RequestBytes>,
    metrics: Arc<Metrics>,
) {
    let per_ip = Arc::new(PerIp::default());
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let Some(guard) = per_ip.try_add(peer.ip(), cfg.max_client_cnxns) else {
            tracing::warn!(
                "too many connections from {} - max is {}",
                peer.ip(),
                cfg.max_client_cnxns
            );
            drop(stream);
            continue;
        };
        let (core, cfg, tls) = (core.clone(), Arc::clone(&cfg), tls.clone());
        let requests = ConnRequests::new(Arc::clone(&request_bytes), Arc::clone(&metrics));
        tokio::spawn(async move {
            let _ = stream.set_nodelay(true);
            match tls {
                None => {
                    let (rd, wr) = stream.into_split();
                    handle(rd, wr, peer, core, cfg, requests, Vec::new()).await;
                }
                Some(tls) => match tls.accept(stream).await {
                    Ok((stream, ids)) => {
                        let (rd, wr) = tokio::io::split(stream);
                        handle(rd, wr, peer, core, cfg, requests, ids).await;
                    }
                    Err(e) => {
                        tracing::info!(%peer, "closing a secure client connection: TLS handshake failed: {e}");
                    }
                },
            }
            drop(guard);
        });
    }
}

/// What a new connection opens with.
enum Opening {
    Word(&'static str),
    /// wazoo's backup request (`crate::backup`).
    Backup,
    Connect(ConnectRequest),
}

/// Reads a new connection's first frame: a four-letter word or a
/// ConnectRequest (`None`: neither, close).
async fn read_opening(
    rd: &mut (impl AsyncRead + Unpin),
    peer: SocketAddr,
    max: usize,
) -> Option<Opening> {
    let mut head = [0u8; 4];
    rd.read_exact(&mut head).await.ok()?;
    if let Some(word) = FOUR_LETTER_WORDS.iter().find(|w| w.as_bytes() == head) {
        return Some(Opening::Word(word));
    }
    if &head == crate::backup::WORD {
        return Some(Opening::Backup);
    }
    let payload = read_payload(rd, head, max).await?;
    match ConnectRequest::from_bytes(&payload) {
        Ok(req) => Some(Opening::Connect(req)),
        Err(_) => {
            tracing::debug!(%peer, "malformed connect request; closing");
            None
        }
    }
}

/// Runs one connection (plain or TLS, split into its halves); `ids` are
/// the identities its transport proved.
async fn handle<R, W>(
    mut rd: R,
    wr: W,
    peer: SocketAddr,
    core: mpsc::Sender<Event>,
    cfg: Arc<Config>,
    requests: ConnRequests,
    ids: Vec<wazoo_proto::Id>,
) where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let unanswered = Arc::new(Unanswered {
        permits: Semaphore::new(MAX_IN_FLIGHT),
        bytes: requests,
    });
    let bounds = Bounds::of(&cfg);
    let req = match tokio::time::timeout(
        HANDSHAKE_TIMEOUT,
        read_opening(&mut rd, peer, bounds.max_frame),
    )
    .await
    {
        Err(_) => {
            tracing::debug!(%peer, "no handshake in {HANDSHAKE_TIMEOUT:?}; closing");
            return;
        }
        Ok(None) => return,
        Ok(Some(Opening::Word(word))) => {
            let answered = four_letter(word, wr, &core, &cfg);
            if tokio::time::timeout(HANDSHAKE_TIMEOUT, answered)
                .await
                .is_err()
            {
                tracing::debug!(%peer, word, "four-letter word not taken in time; closing");
            }
            return;
        }
        Ok(Some(Opening::Backup)) => {
            crate::backup::serve(rd, wr, &core, &cfg, peer).await;
            return;
        }
        Ok(Some(Opening::Connect(req))) => req,
    };
    let conn = NEXT_CONN.fetch_add(1, Ordering::Relaxed);
    let (tx, rx) = mpsc::unbounded_channel();
    let shared = Arc::new(ConnShared::default());
    let tx = ConnTx {
        tx,
        shared: Arc::clone(&shared),
    };
    if core.send(Event::Register { conn, tx }).await.is_err() {
        return;
    }
    if core
        .send(Event::Input(Input::Connect {
            conn,
            peer: Some(peer),
            req,
        }))
        .await
        .is_err()
    {
        return;
    }
    if !ids.is_empty()
        && core
            .send(Event::Input(Input::Authenticated { conn, ids }))
            .await
            .is_err()
    {
        return;
    }
    let mut writer = tokio::spawn(write_loop(
        conn,
        wr,
        rx,
        Arc::clone(&unanswered),
        Arc::clone(&shared),
        core.clone(),
        bounds,
    ));
    let mut sasl = SaslConn::of(&cfg);
    let reader = read_loop(conn, rd, &core, bounds, &unanswered, &shared, &mut sasl);
    let close_deadline = async {
        shared.close_requested.notified().await;
        tokio::time::sleep(CLOSE_FLUSH_TIMEOUT).await;
    };
    // The first of the three to end ends the connection: a reader parked
    // on a full connection must not outlive a writer that failed.
    tokio::select! {
        () = reader => {}
        _ = &mut writer => {}
        () = close_deadline => {
            tracing::debug!(conn, "the client did not take its last replies in time; closing");
        }
    }
    writer.abort();
    let _ = core.send(Event::Input(Input::Closed { conn })).await;
}

/// Reads one frame's payload given its already-read length prefix.
async fn read_payload(
    rd: &mut (impl AsyncReadExt + Unpin),
    head: [u8; 4],
    max: usize,
) -> Option<Vec<u8>> {
    let len = match frame::check(&head, max) {
        Err(e) => {
            tracing::info!("closing connection: {e}");
            return None;
        }
        Ok(_) => i32::from_be_bytes(head) as usize,
    };
    let mut payload = vec![0u8; len];
    rd.read_exact(&mut payload).await.ok()?;
    Some(payload)
}

/// Waits until the bytes queued for the writer are under the bound.
async fn room_for_replies(shared: &ConnShared, max: usize) {
    while shared.queued_bytes.load(Ordering::Acquire) >= max {
        shared.written.notified().await;
    }
}

async fn read_loop(
    conn: u64,
    rd: impl AsyncRead + Unpin,
    core: &mpsc::Sender<Event>,
    bounds: Bounds,
    unanswered: &Unanswered,
    shared: &ConnShared,
    sasl: &mut SaslConn,
) {
    let max = bounds.max_frame;
    let mut rd = tokio::io::BufReader::with_capacity(64 * 1024, rd);
    let mut batch: Vec<Input> = Vec::new();
    loop {
        // Read nothing while the client has not taken its replies...
        room_for_replies(shared, bounds.unsent_reply_bytes).await;
        // ...then wait for one whole frame...
        let mut head = [0u8; 4];
        if rd.read_exact(&mut head).await.is_err() {
            return;
        }
        let Some(payload) = read_payload(&mut rd, head, max).await else {
            return;
        };
        match unanswered.permits.acquire().await {
            Ok(p) => p.forget(),
            Err(_) => return,
        }
        if !unanswered.bytes.admit(&payload) {
            over_request_bytes(conn);
            return;
        }
        let Some(input) = decode_input(conn, &payload, sasl) else {
            return;
        };
        batch.push(input);
        // ...then take every whole frame already buffered, without waiting,
        // so a pipelining client costs one hand-off per read, not per request.
        loop {
            if shared.queued_bytes.load(Ordering::Acquire) >= bounds.unsent_reply_bytes {
                break;
            }
            let buffered = rd.buffer();
            let n = match frame::check(buffered, max) {
                Ok(Some(n)) => n,
                Ok(None) => break,
                Err(e) => {
                    tracing::info!("closing connection: {e}");
                    let _ = core.send(Event::Inputs(std::mem::take(&mut batch))).await;
                    return;
                }
            };
            let Ok(p) = unanswered.permits.try_acquire() else {
                break;
            };
            p.forget();
            if !unanswered.bytes.admit(&buffered[4..n]) {
                over_request_bytes(conn);
                let _ = core.send(Event::Inputs(std::mem::take(&mut batch))).await;
                return;
            }
            let input = decode_input(conn, &buffered[4..n], sasl);
            rd.consume(n);
            match input {
                Some(i) => batch.push(i),
                None => {
                    let _ = core.send(Event::Inputs(std::mem::take(&mut batch))).await;
                    return;
                }
            }
        }
        let ev = if batch.len() == 1 {
            Event::Input(batch.pop().expect("one input"))
        } else {
            Event::Inputs(std::mem::take(&mut batch))
        };
        if core.send(ev).await.is_err() {
            return;
        }
    }
}

fn over_request_bytes(conn: u64) {
    tracing::info!(
        conn,
        "closing connection: its request would pass largeRequestMaxBytes, the bytes of \
         requests the member holds unanswered"
    );
}

/// A connection's side of SASL: the JAAS users (none: the SASL request is
/// not served, as without `--jaas`), the super user, and the exchange.
struct SaslConn {
    users: Option<Arc<SaslUsers>>,
    super_user: Option<String>,
    server: DigestServer,
}

impl SaslConn {
    fn of(cfg: &Config) -> SaslConn {
        SaslConn {
            users: cfg.sasl.users.clone(),
            super_user: cfg.sasl.super_user.clone(),
            server: DigestServer::new(),
        }
    }

    /// Runs one SASL request (a `GetSASLRequest`: one jute buffer, the
    /// client's token) through the exchange. Any failure (a malformed
    /// body, a wrong password, a token after the end) fails the exchange;
    /// the core answers it and closes the connection.
    fn step(&mut self, conn: u64, body: &[u8], users: &SaslUsers) -> SaslStep {
        let token = match body
            .get(..4)
            .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        {
            // jute's null buffer is an empty token.
            Some(len) if len < 0 => &[][..],
            Some(len) => match body.get(4..4 + len as usize) {
                Some(t) => t,
                None => {
                    tracing::info!(conn, "SASL authentication failed: a malformed SASL request");
                    return SaslStep::Failed;
                }
            },
            None => {
                tracing::info!(conn, "SASL authentication failed: a malformed SASL request");
                return SaslStep::Failed;
            }
        };
        let mut nonce_err = None;
        let step = self.server.step(token, users, || {
            crate::sasl::random_nonce().unwrap_or_else(|e| {
                nonce_err = Some(e);
                String::new()
            })
        });
        if let Some(e) = nonce_err {
            tracing::error!(conn, "SASL authentication failed: {e}");
            return SaslStep::Failed;
        }
        match step {
            Ok(Step::Challenge(token)) => SaslStep::Continue(token),
            Ok(Step::Done { token, user }) => {
                tracing::info!(conn, user, "SASL authentication succeeded");
                let mut ids = vec![wazoo_proto::Id::new("sasl", &user)];
                if self.super_user.as_deref() == Some(user.as_str()) {
                    ids.push(wazoo_proto::Id::new("super", ""));
                }
                SaslStep::Done { token, ids }
            }
            Err(e) => {
                tracing::info!(conn, "SASL authentication failed: {e}");
                SaslStep::Failed
            }
        }
    }
}

/// Decodes one request frame's payload; `None` closes the connection.
fn decode_input(conn: u64, payload: &[u8], sasl: &mut SaslConn) -> Option<Input> {
    if let (Some(users), Some(head)) = (sasl.users.clone(), payload.get(..8)) {
        let op = i32::from_be_bytes([head[4], head[5], head[6], head[7]]);
        if op == OpCode::Sasl as i32 {
            let xid = i32::from_be_bytes([head[0], head[1], head[2], head[3]]);
            let step = sasl.step(conn, &payload[8..], &users);
            return Some(Input::Sasl { conn, xid, step });
        }
    }
    Some(match frame::decode_client_frame(payload) {
        Ok(ClientFrame::Request { xid, req }) => Input::Request { conn, xid, req },
        Ok(ClientFrame::Unknown { xid, op }) => Input::Unknown { conn, xid, op },
        Err(e) if payload.len() >= 8 => {
            let xid = i32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]);
            tracing::debug!(conn, "malformed request body: {e}");
            Input::Malformed { conn, xid }
        }
        Err(e) => {
            tracing::debug!(conn, "malformed request header, closing: {e}");
            return None;
        }
    })
}

async fn write_loop(
    conn: u64,
    mut wr: impl AsyncWrite + Unpin,
    mut rx: mpsc::UnboundedReceiver<ConnMsg>,
    unanswered: Arc<Unanswered>,
    shared: Arc<ConnShared>,
    core: mpsc::Sender<Event>,
    bounds: Bounds,
) {
    let mut buf = Vec::with_capacity(64 * 1024);
    // Written but not yet reported to the core.
    let mut unreported = 0usize;
    while let Some(msg) = rx.recv().await {
        let mut close = false;
        let mut replies = 0usize;
        let mut push = |m: ConnMsg, buf: &mut Vec<u8>| match m {
            ConnMsg::Bytes { bytes, replies: r } => {
                if buf.is_empty() {
                    *buf = bytes;
                } else {
                    buf.extend_from_slice(&bytes);
                }
                replies += r as usize;
                false
            }
            ConnMsg::Close => true,
        };
        close |= push(msg, &mut buf);
        while !close && buf.len() < COALESCE_BYTES {
            match rx.try_recv() {
                Ok(m) => close |= push(m, &mut buf),
                Err(_) => break,
            }
        }
        if !buf.is_empty() {
            // The flush pushes out what TLS buffered (a no-op on TCP).
            if wr.write_all(&buf).await.is_err() || wr.flush().await.is_err() {
                return;
            }
            shared.queued_bytes.fetch_sub(buf.len(), Ordering::AcqRel);
            shared.written.notify_one();
            unreported += buf.len();
            if buf.capacity() > COALESCE_BYTES {
                buf = Vec::with_capacity(64 * 1024);
            } else {
                buf.clear();
            }
        }
        unanswered.bytes.answered(replies);
        unanswered.permits.add_permits(replies);
        if close {
            let _ = wr.shutdown().await;
            return;
        }
        if unreported >= bounds.written_report_bytes {
            let written = Input::Written {
                conn,
                bytes: unreported as u64,
            };
            if core.send(Event::Input(written)).await.is_err() {
                return;
            }
            unreported = 0;
        }
    }
}

async fn four_letter(
    word: &'static str,
    mut wr: impl AsyncWrite + Unpin,
    core: &mpsc::Sender<Event>,
    cfg: &Config,
) {
    let text = if !cfg.four_letter_allowed(word) {
        format!("{word} is not executed because it is not in the whitelist.\n")
    } else {
        let (tx, rx) = oneshot::channel();
        if core
            .send(Event::Admin {
                word: word.to_string(),
                reply: tx,
            })
            .await
            .is_err()
        {
            return;
        }
        match rx.await {
            Ok(t) => t,
            Err(_) => return,
        }
    };
    let _ = wr.write_all(text.as_bytes()).await;
    let _ = wr.flush().await;
    let _ = wr.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request_bytes(max: u64, threshold: i64) -> Arc<RequestBytes> {
        Arc::new(RequestBytes {
            in_flight: AtomicU64::new(0),
            max,
            threshold,
        })
    }

    // ZooKeeper Administrator's Guide, "Advanced Configuration",
    // largeRequestMaxBytes: the bytes of requests in flight over all
    // connections are bounded; a request that would pass the bound is
    // refused (its connection closes), and answered requests give theirs
    // back, as does a connection that ends.
    #[test]
    fn request_bytes_are_bounded_over_connections_and_always_given_back() {
        let global = request_bytes(1000, -1);
        let a = ConnRequests::new(Arc::clone(&global), Metrics::new());
        let b = ConnRequests::new(Arc::clone(&global), Metrics::new());
        assert!(a.admit(&[0; 400]) && a.admit(&[0; 300]));
        assert!(!b.admit(&[0; 301]), "700 + 301 would pass 1000");
        assert!(b.admit(&[0; 300]));
        assert_eq!(global.in_flight.load(Ordering::SeqCst), 1000);
        a.answered(1);
        assert_eq!(
            global.in_flight.load(Ordering::SeqCst),
            600,
            "the first (400) went back"
        );
        drop(b);
        assert_eq!(
            global.in_flight.load(Ordering::SeqCst),
            300,
            "b's went back when it ended"
        );
        a.answered(5);
        assert_eq!(global.in_flight.load(Ordering::SeqCst), 0);

        // Below largeRequestThreshold a request is not counted.
        let global = request_bytes(1000, 500);
        let c = ConnRequests::new(Arc::clone(&global), Metrics::new());
        assert!(c.admit(&[0; 499]) && c.admit(&[0; 999]));
        assert!(!c.admit(&[0; 500]));
        assert_eq!(global.in_flight.load(Ordering::SeqCst), 999);
        c.answered(2);
        assert_eq!(global.in_flight.load(Ordering::SeqCst), 0);
    }

    // ZooKeeper Administrator's Guide, maxClientCnxns: a limit per address.
    #[test]
    fn a_connections_place_in_its_address_count_is_returned_when_it_ends() {
        let per_ip = Arc::new(PerIp::default());
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let a = per_ip.try_add(ip, 2).expect("first");
        let b = per_ip.try_add(ip, 2).expect("second");
        assert!(per_ip.try_add(ip, 2).is_none(), "the third is refused");
        assert!(per_ip.try_add("127.0.0.2".parse().unwrap(), 2).is_some());
        drop(a);
        assert_eq!(per_ip.count(ip), 1);
        let c = per_ip.try_add(ip, 2).expect("room again");
        drop((b, c));
        assert_eq!(per_ip.count(ip), 0);
        assert!(per_ip.try_add(ip, 0).is_some(), "0 means no limit");
    }

    #[test]
    fn the_writer_report_never_exceeds_the_unsent_reply_bound() {
        let mut cfg = Config::parse("dataDir=/d\n").unwrap();
        assert_eq!(Bounds::of(&cfg).written_report_bytes, WRITTEN_REPORT_BYTES);
        cfg.max_unsent_reply_bytes = 1000;
        assert_eq!(Bounds::of(&cfg).written_report_bytes, 1000);
        assert_eq!(Bounds::of(&cfg).unsent_reply_bytes, 1000);
    }

    #[tokio::test]
    async fn bytes_sent_to_a_connection_count_as_queued_until_written() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let shared = Arc::new(ConnShared::default());
        let conn = ConnTx {
            tx,
            shared: Arc::clone(&shared),
        };
        conn.send(ConnMsg::Bytes {
            bytes: vec![0; 300],
            replies: 1,
        })
        .unwrap();
        conn.send(ConnMsg::Close).unwrap();
        assert_eq!(shared.queued_bytes.load(Ordering::Acquire), 300);
        // The close request is remembered for the connection's task.
        shared.close_requested.notified().await;
        assert!(matches!(rx.recv().await, Some(ConnMsg::Bytes { .. })));
        drop(rx);
        assert!(conn.send(ConnMsg::Close).is_err(), "the connection is gone");
    }
}
