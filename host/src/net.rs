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
//!
//! Layout: this file holds the accept loops and a connection's reader and
//! writer; `limits.rs` the per-address counts and the request bytes
//! (`maxClientCnxns`, `largeRequestMaxBytes`), and `tests.rs` the tests.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, Notify, Semaphore};

use crate::config::Config;
use crate::core::server::{Input, SaslStep};
use crate::member::{ConnMsg, Event};
use crate::metrics::Metrics;
use crate::sasl::{DigestServer, SaslUsers, Step};
use crate::tls::ClientTls;
use wazoo_proto::frame::{self, ClientFrame};
use wazoo_proto::{ConnectRequest, OpCode};

mod frame_reader;
mod limits;
pub mod local_reads;

use limits::{ConnRequests, PerIp, Refused, RequestBytes};
use local_reads::{ConnLocal, LocalReads};

/// Requests one connection may have unanswered before we stop reading it.
pub const MAX_IN_FLIGHT: usize = 1000;

/// How long a new connection may take to send its ConnectRequest or its
/// four-letter word, and a four-letter word to be answered: ZooKeeper's
/// default `zookeeper.nio.sessionlessCnxnTimeout`.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a close the core asked for waits for the client to take what
/// was queued before it; a client that does not read loses the rest.
const CLOSE_FLUSH_TIMEOUT: Duration = Duration::from_secs(2);

/// How long the writer may hold its count of the reads the reader
/// answered before it reports them to the core (which touches the session).
const LOCAL_REPORT_EVERY: Duration = Duration::from_millis(200);

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
    /// Reads answered by the reader itself (with client I/O threads).
    local: ConnLocal,
}

/// The core loop's handle on one connection: its writer's queue, counted
/// in bytes. The queue itself has no fixed capacity; the core bounds what
/// it puts there (`wazoo.client.maxOutboundBytes`) from the writer's reports.
pub struct ConnTx {
    tx: mpsc::UnboundedSender<ConnMsg>,
    shared: Arc<ConnShared>,
    /// Replies the core loop gathered for this connection during one batch
    /// of outputs ([`ConnTx::gather`]), handed to the writer as one message
    /// at the batch's end ([`ConnTx::flush`]): one channel hand-off and one
    /// wake-up of the writer per connection and batch, not per reply.
    gathered: Vec<u8>,
    gathered_replies: u32,
    /// The identities with which the core allowed the connection's reads
    /// on its reader, handed over with what was gathered before
    /// (`Output::LocalReads`).
    gathered_allow: Option<Arc<crate::core::acl::AuthInfo>>,
}

impl ConnTx {
    fn new(tx: mpsc::UnboundedSender<ConnMsg>, shared: Arc<ConnShared>) -> ConnTx {
        ConnTx {
            tx,
            shared,
            gathered: Vec::new(),
            gathered_replies: 0,
            gathered_allow: None,
        }
    }

    fn nothing_gathered(&self) -> bool {
        self.gathered.is_empty() && self.gathered_replies == 0 && self.gathered_allow.is_none()
    }

    /// The core allowed the connection's reads on its reader with `auth`,
    /// from the next [`ConnTx::flush`] on; true if nothing was gathered
    /// before (the caller remembers to flush this connection).
    pub fn allow_local_reads(&mut self, auth: Arc<crate::core::acl::AuthInfo>) -> bool {
        let first = self.nothing_gathered();
        self.gathered_allow = Some(auth);
        first
    }

    /// Adds bytes holding `replies` replies to what goes to the writer at
    /// the next [`ConnTx::flush`]; true if nothing was gathered before
    /// (the caller remembers to flush this connection).
    pub fn gather(&mut self, bytes: Vec<u8>, replies: u32) -> bool {
        let first = self.nothing_gathered();
        if self.gathered.is_empty() {
            self.gathered = bytes;
        } else {
            self.gathered.extend_from_slice(&bytes);
        }
        self.gathered_replies += replies;
        first
    }

    /// Hands what was gathered to the writer (nothing if nothing was);
    /// fails once the connection is gone. `seq`: with reads on the I/O
    /// threads, the published tree it was made from, passed through the
    /// connection's gate (net/local_reads.rs, rule 2); None without them.
    pub fn flush(&mut self, seq: Option<u64>) -> Result<(), mpsc::error::SendError<ConnMsg>> {
        if self.nothing_gathered() {
            return Ok(());
        }
        let bytes = std::mem::take(&mut self.gathered);
        let replies = std::mem::take(&mut self.gathered_replies);
        let allow = self.gathered_allow.take();
        let send = || {
            if bytes.is_empty() && replies == 0 {
                return Ok(());
            }
            self.shared
                .queued_bytes
                .fetch_add(bytes.len(), Ordering::AcqRel);
            self.tx.send(ConnMsg::Bytes {
                bytes,
                replies,
                local: false,
            })
        };
        match seq {
            Some(seq) => self.shared.local.hand_over(seq, replies, allow, send),
            None => send(),
        }
    }

    /// Hands what was gathered to the writer, then closes the connection
    /// once it is written; its reader answers no more reads itself.
    pub fn close(&mut self) -> Result<(), mpsc::error::SendError<ConnMsg>> {
        self.shared.local.stop();
        let _ = self.flush(Some(u64::MAX));
        self.shared.close_requested.notify_one();
        self.tx.send(ConnMsg::Close)
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
/// With `wazoo.client.ioThreads` > 0 the connections run on that many
/// threads of their own ([`ClientIo`]); the accept loops stay here.
pub fn spawn_accept_loops(
    plain: TcpListener,
    secure: Option<(TcpListener, Arc<ClientTls>)>,
    core: mpsc::Sender<Event>,
    cfg: Arc<Config>,
    metrics: Arc<Metrics>,
    local_reads: Option<Arc<LocalReads>>,
) -> std::io::Result<()> {
    let request_bytes = Arc::new(RequestBytes::of(&cfg));
    let io = match cfg.client_io_threads {
        0 => None,
        n => Some(Arc::new(ClientIo::start(n, cfg.my_id)?)),
    };
    if let Some((listener, tls)) = secure {
        tokio::spawn(accept_loop(
            listener,
            Some(tls),
            core.clone(),
            Arc::clone(&cfg),
            Arc::clone(&request_bytes),
            Arc::clone(&metrics),
            io.clone(),
            local_reads.clone(),
        ));
    }
    tokio::spawn(accept_loop(
        plain,
        None,
        core,
        cfg,
        request_bytes,
        metrics,
        io,
        local_reads,
    ));
    Ok(())
}

/// The client I/O threads (`wazoo.client.ioThreads`): each runs a
/// single-threaded runtime, and accepted connections are dealt to them in
/// turn. A connection's reader, writer and TLS then cost the member's
/// thread nothing: it receives decoded requests and hands back reply bytes,
/// over the same channels as when everything runs on it, so the core's
/// order (a session's replies in its requests' order, an event before the
/// data that fired it) is unchanged. The threads end when the accept loops
/// drop their handle, that is with the member's runtime.
pub(crate) struct ClientIo {
    handles: Vec<tokio::runtime::Handle>,
    next: AtomicUsize,
    /// Dropped with the last accept loop: each thread then stops.
    _stop: Vec<oneshot::Sender<()>>,
}

impl ClientIo {
    fn start(threads: usize, my_id: Option<u64>) -> std::io::Result<ClientIo> {
        let mut handles = Vec::with_capacity(threads);
        let mut stop = Vec::with_capacity(threads);
        for i in 0..threads {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            handles.push(rt.handle().clone());
            let (stop_tx, stop_rx) = oneshot::channel::<()>();
            stop.push(stop_tx);
            let name = match my_id {
                Some(id) => format!("wazoo-client-{id}-{i}"),
                None => format!("wazoo-client-{i}"),
            };
            std::thread::Builder::new().name(name).spawn(move || {
                rt.block_on(async move {
                    let _ = stop_rx.await;
                });
                // Its connections' tasks are dropped with it (their
                // sockets close); a blocking task (a backup being read)
                // is not waited for long.
                rt.shutdown_timeout(Duration::from_secs(1));
            })?;
        }
        Ok(ClientIo {
            handles,
            next: AtomicUsize::new(0),
            _stop: stop,
        })
    }

    /// The runtime of the next connection, in turn.
    fn next(&self) -> &tokio::runtime::Handle {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.handles.len();
        &self.handles[i]
    }
}

#[allow(clippy::too_many_arguments)]
async fn accept_loop(
    listener: TcpListener,
    tls: Option<Arc<ClientTls>>,
    core: mpsc::Sender<Event>,
    cfg: Arc<Config>,
    request_bytes: Arc<RequestBytes>,
    metrics: Arc<Metrics>,
    io: Option<Arc<ClientIo>>,
    local_reads: Option<Arc<LocalReads>>,
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
        let guard = match per_ip.try_add(peer.ip(), cfg.max_client_cnxns, cfg.max_cnxns) {
            Ok(guard) => guard,
            Err(Refused::Total(n)) => {
                tracing::warn!("too many connections {n} - max is {}", cfg.max_cnxns);
                drop(stream);
                continue;
            }
            Err(Refused::PerIp) => {
                tracing::warn!(
                    "too many connections from {} - max is {}",
                    peer.ip(),
                    cfg.max_client_cnxns
                );
                drop(stream);
                continue;
            }
        };
        if cfg.client_tcp_keepalive {
            if let Err(e) = set_keepalive(&stream) {
                tracing::warn!(%peer, "cannot turn TCP keepalive on: {e}");
            }
        }
        let _ = stream.set_nodelay(true);
        let (core, cfg, tls) = (core.clone(), Arc::clone(&cfg), tls.clone());
        let local = local_reads.clone();
        let requests = ConnRequests::new(Arc::clone(&request_bytes), Arc::clone(&metrics));
        let Some(io) = &io else {
            tokio::spawn(async move {
                serve_conn(stream, peer, tls, core, cfg, requests, local).await;
                drop(guard);
            });
            continue;
        };
        // To another thread's runtime: the socket leaves this one's reactor.
        let stream = match stream.into_std() {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(%peer, "cannot hand a client connection to an I/O thread: {e}");
                continue;
            }
        };
        io.next().spawn(async move {
            match tokio::net::TcpStream::from_std(stream) {
                Ok(stream) => serve_conn(stream, peer, tls, core, cfg, requests, local).await,
                Err(e) => tracing::warn!(%peer, "cannot serve a client connection: {e}"),
            }
            drop(guard);
        });
    }
}

/// One accepted connection, plain or inside TLS, until it ends.
async fn serve_conn(
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    tls: Option<Arc<ClientTls>>,
    core: mpsc::Sender<Event>,
    cfg: Arc<Config>,
    requests: ConnRequests,
    local: Option<Arc<LocalReads>>,
) {
    match tls {
        None => {
            let (rd, wr) = stream.into_split();
            handle(rd, wr, peer, core, cfg, requests, Vec::new(), local).await;
        }
        Some(tls) => match tls.accept(stream).await {
            Ok((stream, ids)) => {
                let (rd, wr) = tokio::io::split(stream);
                handle(rd, wr, peer, core, cfg, requests, ids, local).await;
            }
            Err(e) => {
                tracing::info!(%peer, "closing a secure client connection: TLS handshake failed: {e}");
            }
        },
    }
}

/// Turns TCP keepalive on for an accepted client connection
/// (`clientTcpKeepAlive`), with the system's probe timing, as ZooKeeper's
/// `Socket.setKeepAlive(true)` does; also quorum links (`tcpKeepAlive`).
pub(crate) fn set_keepalive(stream: &tokio::net::TcpStream) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let on: libc::c_int = 1;
    // SAFETY: the descriptor is open for the duration of the call (the
    // stream is borrowed), and the option value is a c_int of the given
    // length.
    let r = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_KEEPALIVE,
            std::ptr::addr_of!(on).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
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
    match ConnectRequest::from_frame(&payload) {
        Ok(req) => Some(Opening::Connect(req)),
        Err(_) => {
            tracing::debug!(%peer, "malformed connect request; closing");
            None
        }
    }
}

/// Runs one connection (plain or TLS, split into its halves); `ids` are
/// the identities its transport proved.
#[allow(clippy::too_many_arguments)]
async fn handle<R, W>(
    mut rd: R,
    wr: W,
    peer: SocketAddr,
    core: mpsc::Sender<Event>,
    cfg: Arc<Config>,
    requests: ConnRequests,
    ids: Vec<wazoo_proto::Id>,
    local_reads: Option<Arc<LocalReads>>,
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
            let answered = async {
                four_letter(word, peer, wr, &core, &cfg).await;
                drain_until_closed(&mut rd).await;
            };
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
    // The password of the session this handshake may create: randomness
    // is the shell's input to the core (docs/ARCHITECTURE.md, "Sessions").
    let mut fresh_password = [0u8; crate::core::session::PASSWORD_LEN];
    if let Err(e) = getrandom::getrandom(&mut fresh_password) {
        tracing::error!(%peer, "no randomness for a session password: {e}; closing");
        return;
    }
    let conn = NEXT_CONN.fetch_add(1, Ordering::Relaxed);
    let (tx, rx) = mpsc::unbounded_channel();
    let shared = Arc::new(ConnShared::default());
    // The reader queues the replies of the reads it answers itself.
    let local = local_reads.map(|reads| (reads, tx.clone()));
    let tx = ConnTx::new(tx, Arc::clone(&shared));
    if core.send(Event::Register { conn, tx }).await.is_err() {
        return;
    }
    if core
        .send(Event::Input(Input::Connect {
            conn,
            peer: Some(peer),
            req,
            fresh_password,
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
    let reader = read_loop(
        conn,
        rd,
        &core,
        bounds,
        &unanswered,
        &shared,
        &mut sasl,
        local.as_ref(),
    );
    tokio::pin!(reader);
    let close_deadline = async {
        shared.close_requested.notified().await;
        tokio::time::sleep(CLOSE_FLUSH_TIMEOUT).await;
    };
    // The first of the three to end ends the connection: a reader parked
    // on a full connection must not outlive a writer that failed.
    tokio::select! {
        () = &mut reader => {}
        _ = &mut writer => {
            // The writer sent its last replies and its FIN (a close the
            // core asked for, such as after AuthFailed). Read on until the
            // client closes its side, for at most CLOSE_FLUSH_TIMEOUT:
            // dropping the socket with its bytes unread would make the
            // kernel send a reset, which can discard those replies before
            // the client reads them (as `drain_until_closed` avoids for
            // four-letter words). What it reads goes to a connection the
            // core is closing, which serves nothing more.
            let _ = tokio::time::timeout(CLOSE_FLUSH_TIMEOUT, &mut reader).await;
        }
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

/// The connection's reads answered on its own thread (with client I/O
/// threads): the published tree, and the writer's queue for their replies.
type Local = (Arc<LocalReads>, mpsc::UnboundedSender<ConnMsg>);

#[allow(clippy::too_many_arguments)]
async fn read_loop(
    conn: u64,
    rd: impl AsyncRead + Unpin,
    core: &mpsc::Sender<Event>,
    bounds: Bounds,
    unanswered: &Unanswered,
    shared: &ConnShared,
    sasl: &mut SaslConn,
    local: Option<&Local>,
) {
    // The reader's copy of the published tree, dropped whenever it waits
    // for its client: an idle connection must not keep an old tree alive.
    let mut view_cache = None;
    // A request the reader answers itself, or hands to the core (in order,
    // behind what it gathered).
    let take = |input: Input, batch: &mut Vec<Input>, view_cache: &mut Option<_>| {
        if let Some((reads, tx)) = local {
            if let (true, Input::Request { xid, req, .. }) = (batch.is_empty(), &input) {
                if shared
                    .local
                    .try_answer(reads, view_cache, *xid, req, tx, &shared.queued_bytes)
                {
                    return;
                }
            }
            shared.local.to_core();
        }
        batch.push(input);
    };
    let max = bounds.max_frame;
    let mut rd = frame_reader::FrameReader::new(rd);
    let mut batch: Vec<Input> = Vec::new();
    loop {
        if !matches!(frame::check(rd.buffer(), max), Ok(Some(_))) {
            // About to wait for the client.
            view_cache = None;
        }
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
        // The frames already buffered behind this one arrived with it.
        let read_at = Instant::now();
        match unanswered.permits.acquire().await {
            Ok(p) => p.forget(),
            Err(_) => return,
        }
        if !unanswered.bytes.admit(&payload, read_at) {
            over_request_bytes(conn);
            return;
        }
        let Some(input) = decode_input(conn, &payload, sasl) else {
            return;
        };
        take(input, &mut batch, &mut view_cache);
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
            if !unanswered.bytes.admit(&buffered[4..n], read_at) {
                over_request_bytes(conn);
                let _ = core.send(Event::Inputs(std::mem::take(&mut batch))).await;
                return;
            }
            let input = decode_input(conn, &buffered[4..n], sasl);
            rd.consume(n);
            match input {
                Some(i) => take(i, &mut batch, &mut view_cache),
                None => {
                    let _ = core.send(Event::Inputs(std::mem::take(&mut batch))).await;
                    return;
                }
            }
        }
        let ev = match batch.len() {
            // Every request was answered here.
            0 => continue,
            1 => Event::Input(batch.pop().expect("one input")),
            _ => Event::Inputs(std::mem::take(&mut batch)),
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
    if sasl.users.is_none() && payload.get(4..8) == Some(&(OpCode::Sasl as i32).to_be_bytes()[..]) {
        let xid = i32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]);
        let step = SaslStep::NoServer;
        return Some(Input::Sasl { conn, xid, step });
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
    // No buffer of its own while idle: the first message's bytes become it.
    let mut buf = Vec::new();
    // Written but not yet reported to the core (its bytes; the reads
    // answered by the reader, which the core never saw).
    let mut unreported = 0usize;
    let mut local_unreported = 0u64;
    let mut local_reported_at = Instant::now();
    loop {
        // Reads answered by the reader are reported within
        // LOCAL_REPORT_EVERY: when due, whether the queue is busy or not,
        // and also when the connection goes quiet (the wait below ends).
        if local_unreported > 0 && local_reported_at.elapsed() >= LOCAL_REPORT_EVERY {
            let reads = std::mem::take(&mut local_unreported);
            local_reported_at = Instant::now();
            let ev = Event::Input(Input::LocalReads { conn, reads });
            if core.send(ev).await.is_err() {
                return;
            }
        }
        let msg = if local_unreported == 0 {
            rx.recv().await
        } else {
            let wait = LOCAL_REPORT_EVERY.saturating_sub(local_reported_at.elapsed());
            match tokio::time::timeout(wait, rx.recv()).await {
                Ok(msg) => msg,
                // Due now: reported above.
                Err(_) => continue,
            }
        };
        let Some(msg) = msg else {
            return;
        };
        let mut close = false;
        let mut replies = 0usize;
        let mut core_bytes = 0usize;
        let mut push = |m: ConnMsg, buf: &mut Vec<u8>| match m {
            ConnMsg::Bytes {
                bytes,
                replies: r,
                local,
            } => {
                if local {
                    local_unreported += u64::from(r);
                } else {
                    core_bytes += bytes.len();
                }
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
            unreported += core_bytes;
            // A large reply's buffer is not kept for the small ones.
            if buf.capacity() > WRITTEN_REPORT_BYTES {
                buf = Vec::new();
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

/// Reads and drops what a four-letter word's client still sends (the
/// newline of `echo ruok | nc`, or anything else) until it closes its
/// side, after the answer and our FIN went out. Closing a socket with
/// unread bytes makes the kernel send a reset instead of a FIN, and a
/// reset discards the answer the client has not read yet: ZooKeeper's NIO
/// server reads the rest of the request before it closes, so its answer
/// always arrives. The caller bounds this in time; the bytes are dropped
/// as they come, so a client that keeps sending costs no memory.
async fn drain_until_closed(rd: &mut (impl AsyncRead + Unpin)) {
    let mut scratch = [0u8; 512];
    while let Ok(n) = rd.read(&mut scratch).await {
        if n == 0 {
            return;
        }
    }
}

async fn four_letter(
    word: &'static str,
    peer: SocketAddr,
    mut wr: impl AsyncWrite + Unpin,
    core: &mpsc::Sender<Event>,
    cfg: &Config,
) {
    let (tx, rx) = oneshot::channel();
    if core
        .send(Event::Admin {
            word: word.to_string(),
            allowed: cfg.four_letter_allowed(word),
            peer,
            reply: tx,
        })
        .await
        .is_err()
    {
        return;
    }
    let Ok(text) = rx.await else {
        return;
    };
    let _ = wr.write_all(text.as_bytes()).await;
    let _ = wr.flush().await;
    let _ = wr.shutdown().await;
}

#[cfg(test)]
mod tests;
