//! What a client's connection may cost the server, through raw sockets to a
//! wazoo process: whatever way a client goes away its connection and its
//! place in maxClientCnxns are returned, and a client that does not read
//! holds a bounded amount of the server's memory (measured as the
//! process's resident set size). Each test stops by itself.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use wazoo_proto::frame;
use wazoo_proto::jute::{Jute, Reader};
use wazoo_proto::{
    Acl, AddWatchMode, ConnectRequest, CreateRequest, ErrorCode, ReplyHeader, Request,
};
use wazoo_testkit::{four_letter_word, free_port, ServerOptions, WazooServer};

/// How much the server's resident set may grow under each attack. Without
/// the bounds these grew by gigabytes within seconds.
const RSS_GROWTH_MAX_BYTES: u64 = 200 << 20;

fn start(opts: ServerOptions) -> WazooServer {
    WazooServer::start(opts.binary(env!("CARGO_BIN_EXE_wazoo")))
        .unwrap_or_else(|e| panic!("cannot start wazoo: {e:#}"))
}

fn rss_bytes(server: &WazooServer) -> u64 {
    let pid = server.pid().expect("the server runs");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/PID/status");
    kb << 10
}

fn request(xid: i32, req: &Request) -> Vec<u8> {
    let mut out = Vec::new();
    frame::write_request(&mut out, xid, req);
    out
}

fn get_data(path: &str) -> Request {
    Request::GetData {
        path: path.into(),
        watch: false,
    }
}

fn create(path: &str, data: Vec<u8>) -> Request {
    Request::Create(CreateRequest {
        path: path.into(),
        data: Some(data),
        acl: Acl::open_unsafe(),
        flags: 0,
        ttl: None,
    })
}

async fn read_frame(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).await.ok()?;
    let mut p = vec![0u8; i32::from_be_bytes(len) as usize];
    s.read_exact(&mut p).await.ok()?;
    Some(p)
}

fn reply_header(p: &[u8]) -> ReplyHeader {
    ReplyHeader::read(&mut Reader::new(p)).unwrap()
}

/// A new session on a new connection; `None` if the server closed the
/// connection instead of answering (maxClientCnxns).
async fn handshake(socket: TcpSocket, addr: SocketAddr, timeout_ms: i32) -> Option<TcpStream> {
    let mut s = socket.connect(addr).await.ok()?;
    s.set_nodelay(true).ok()?;
    let mut out = Vec::new();
    frame::write_record(
        &mut out,
        &ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: 0,
            timeout_ms,
            session_id: 0,
            passwd: vec![0; 16],
            read_only: Some(false),
        },
    );
    s.write_all(&out).await.ok()?;
    let reply = tokio::time::timeout(Duration::from_secs(10), read_frame(&mut s)).await;
    reply.ok().flatten().map(|_| s)
}

fn socket() -> TcpSocket {
    TcpSocket::new_v4().unwrap()
}

/// A session, retrying while the server refuses the connection: a place
/// in maxClientCnxns that is never returned makes this fail.
async fn session(addr: SocketAddr, timeout_ms: i32) -> TcpStream {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(s) = handshake(socket(), addr, timeout_ms).await {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "the server refused connections from 127.0.0.1 for 30 s: a closed \
             connection's place in maxClientCnxns was not returned"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Sends one request and reads its reply (on a connection with nothing
/// else in flight).
async fn call(s: &mut TcpStream, xid: i32, req: &Request) -> Vec<u8> {
    s.write_all(&request(xid, req)).await.unwrap();
    loop {
        let p = tokio::time::timeout(Duration::from_secs(20), read_frame(s))
            .await
            .expect("a reply within 20 s")
            .expect("the connection stays open");
        let h = reply_header(&p);
        if h.xid == xid {
            assert_eq!(h.err, 0, "{:?}", ErrorCode::from_i32(h.err));
            return p;
        }
    }
}

/// The client connections `cons` lists (those with a session: `cons`
/// also lists the connection asking, as ZooKeeper does); `usize::MAX` when
/// the `cons` connection itself is refused (every place still taken), so
/// `eventually` asks again.
fn cons_count(addr: SocketAddr) -> usize {
    let Ok(listing) = four_letter_word(addr, "cons") else {
        return usize::MAX;
    };
    listing
        .lines()
        .filter(|l| l.contains("(queued=") && l.contains(",sid="))
        .count()
}

fn metric(port: u16, name: &str) -> f64 {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{name} not in:\n{text}"))
}

/// Polls `f` until it returns `want` (bounded).
async fn eventually<T: PartialEq + std::fmt::Debug + Send + 'static>(
    what: &str,
    want: T,
    f: impl Fn() -> T + Send + Sync + Clone + 'static,
) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let g = f.clone();
        let got = tokio::task::spawn_blocking(g).await.unwrap();
        if got == want {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: {got:?}, want {want:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// How a client of the reclaim test goes away after its burst.
#[derive(Clone, Copy, Debug)]
enum Leaving {
    /// close(2) after shutdown(2) (with replies unread: the kernel resets).
    Shutdown,
    /// SO_LINGER 0: a reset at once.
    Reset,
    /// Half-close: the client sends FIN and keeps its end, unread.
    HalfClose,
    /// Silence: the socket stays open and nothing is read or sent, so only
    /// the session's expiry can tell the server the client is gone.
    Vanish,
}

// ZooKeeper Administrator's Guide, maxClientCnxns: a limit per address,
// so a connection whose place is not returned locks its address out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_go_away_mid_burst_give_back_their_connections() {
    const MAX_CNXNS: usize = 10;
    const CLIENTS: usize = 100;
    let metrics_port = free_port();
    let server = start(
        ServerOptions::default()
            .session_timeouts_ms(2_000, 20_000)
            .cfg(format!("maxClientCnxns={MAX_CNXNS}"))
            .cfg(format!("metricsProvider.httpPort={metrics_port}"))
            .cfg("metricsProvider.httpHost=127.0.0.1"),
    );
    let addr = server.addr();
    let mut setup = session(addr, 20_000).await;
    // Replies large enough that a burst fills the sockets.
    call(&mut setup, 1, &create("/big", vec![7u8; 64 << 10])).await;
    drop(setup);

    let started = Instant::now();
    let mut kept = Vec::new();
    for wave in 0..CLIENTS / MAX_CNXNS {
        let mut tasks = Vec::new();
        for i in 0..MAX_CNXNS {
            let n = wave * MAX_CNXNS + i;
            // The last wave's first half vanishes; the rest cycle through
            // the ways a socket can close.
            let leaving = match n % 3 {
                _ if wave == CLIENTS / MAX_CNXNS - 1 && i < MAX_CNXNS / 2 => Leaving::Vanish,
                0 => Leaving::Shutdown,
                1 => Leaving::Reset,
                _ => Leaving::HalfClose,
            };
            tasks.push(tokio::spawn(async move {
                let mut s = session(addr, 2_000).await;
                let burst: Vec<u8> = (0..1_000 + 50 * (n as i32 % 10))
                    .flat_map(|xid| request(xid + 1, &get_data("/big")))
                    .collect();
                s.write_all(&burst).await.unwrap();
                // Take a few replies, so the close lands mid-burst.
                for _ in 0..n % 4 {
                    read_frame(&mut s).await.expect("a reply");
                }
                match leaving {
                    Leaving::Shutdown => {
                        let _ = s.shutdown().await;
                        None
                    }
                    Leaving::Reset => {
                        s.set_zero_linger().unwrap();
                        None
                    }
                    Leaving::HalfClose => {
                        let _ = s.shutdown().await;
                        Some(s)
                    }
                    Leaving::Vanish => Some(s),
                }
            }));
        }
        for t in tasks {
            kept.extend(t.await.unwrap());
        }
    }
    println!(
        "{CLIENTS} clients went away in {:?}; {} sockets kept open",
        started.elapsed(),
        kept.len()
    );

    // Every place is given back, to the same address: MAX_CNXNS - 1
    // sessions at once, then `cons` (a connection too) sees just them.
    let mut fresh = Vec::new();
    for _ in 0..MAX_CNXNS - 1 {
        fresh.push(session(addr, 20_000).await);
    }
    eventually("connections listed by cons", MAX_CNXNS - 1, move || {
        cons_count(addr)
    })
    .await;
    fresh.push(session(addr, 20_000).await);
    assert!(
        handshake(socket(), addr, 20_000).await.is_none(),
        "the limit still holds: one more than maxClientCnxns is refused"
    );
    // And they work.
    for (i, s) in fresh.iter_mut().enumerate() {
        call(s, 1, &get_data("/big")).await;
        if i == 0 {
            call(s, 2, &create("/after", vec![])).await;
        }
    }
    drop(fresh);
    drop(kept);
    eventually("num_alive_connections", 0.0, move || {
        metric(metrics_port, "num_alive_connections")
    })
    .await;
    eventually("connections listed by cons", 0, move || cons_count(addr)).await;
}

/// Ten watchers of everything that never read their events, while the
/// writer sets a node flat out (100 requests in flight) until every watcher
/// is closed (bounded: 60 s), checking that the server's RSS stays under
/// `rss_max`. Returns the writes done and the peak RSS.
async fn flood(
    server: &WazooServer,
    writer: &mut TcpStream,
    node: &str,
    xid: &mut i32,
    rss_max: u64,
) -> (u64, u64) {
    const WATCHERS: usize = 10;
    let addr = server.addr();
    let mut watchers = Vec::new();
    for _ in 0..WATCHERS {
        let sock = socket();
        // A small receive buffer, so the kernel holds little for it.
        sock.set_recv_buffer_size(4096).unwrap();
        // Sessions that outlast the test: only the bound closes them.
        let mut s = handshake(sock, addr, 120_000).await.expect("a session");
        let watch = Request::AddWatch {
            path: "/".into(),
            mode: AddWatchMode::PersistentRecursive as i32,
        };
        call(&mut s, 1, &watch).await;
        watchers.push(s);
    }
    let started = Instant::now();
    let mut peak = 0;
    let mut writes = 0u64;
    loop {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "watchers still connected after {writes} writes in 60 s"
        );
        let batch: Vec<u8> = (0..100)
            .flat_map(|i| {
                let req = Request::SetData {
                    path: node.to_string(),
                    data: Some(vec![1; 100]),
                    version: -1,
                };
                request(*xid + i, &req)
            })
            .collect();
        writer.write_all(&batch).await.unwrap();
        for i in 0..100 {
            let p = tokio::time::timeout(Duration::from_secs(20), read_frame(writer))
                .await
                .expect("the writer is answered within 20 s")
                .expect("the writer's connection stays open");
            let h = reply_header(&p);
            assert_eq!((h.xid, h.err), (*xid + i, 0), "the writer keeps working");
        }
        *xid += 100;
        writes += 100;
        peak = peak.max(rss_bytes(server));
        assert!(
            peak < rss_max,
            "RSS reached {} MB after {writes} writes",
            peak >> 20
        );
        if writes.is_multiple_of(1000) {
            let n = tokio::task::spawn_blocking(move || cons_count(addr));
            if n.await.unwrap() == 1 {
                break;
            }
        }
    }
    // Every watcher was closed: reading what it was sent ends at the close.
    for (i, mut s) in watchers.into_iter().enumerate() {
        let end = tokio::time::timeout(Duration::from_secs(20), async {
            let mut buf = vec![0u8; 1 << 16];
            loop {
                match s.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
            }
        })
        .await;
        assert!(end.is_ok(), "watcher {i} was not closed");
    }
    eventually("connections listed by cons", 1, move || cons_count(addr)).await;
    (writes, peak)
}

// A client with a persistent recursive watch (ZooKeeper Programmer's
// Guide, "Persistent, Recursive Watches") that never reads its events is
// closed once its unsent bytes pass wazoo.client.maxOutboundBytes; the
// server's memory stays flat, also when the attack is repeated, and the
// writer keeps working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_do_not_read_their_watch_events_are_closed_and_memory_stays_flat() {
    let server = start(ServerOptions::default().session_timeouts_ms(4_000, 120_000));
    let mut writer = session(server.addr(), 120_000).await;
    // A long path makes every event ~2 kB.
    let node = format!("/{}", "w".repeat(2_000));
    call(&mut writer, 1, &create(&node, vec![])).await;
    let before = rss_bytes(&server);
    let mut xid = 10;
    for round in 1..=2 {
        let started = Instant::now();
        let rss_max = before + RSS_GROWTH_MAX_BYTES;
        let (writes, peak) = flood(&server, &mut writer, &node, &mut xid, rss_max).await;
        println!(
            "round {round}: {writes} writes in {:?}; RSS before {} MB, peak {} MB",
            started.elapsed(),
            before >> 20,
            peak >> 20,
        );
    }
    call(&mut writer, xid, &get_data(&node)).await;
}

// Connections that pipeline getData of a 1 MB node without reading hold
// about wazoo.client.maxUnsentReplyBytes each, not a reply per request in
// flight; a client that then reads gets every reply, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_large_reads_that_are_not_read_hold_bounded_memory() {
    large_reads_not_read(ServerOptions::default()).await;
}

/// The same when the reads are answered by the client I/O threads
/// themselves (`wazoo.client.ioThreads`, docs/ARCHITECTURE.md, "Reads on
/// I/O threads"): their replies count against the same bound, and the
/// session lives on while its queue stays full.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_large_reads_answered_on_io_threads_that_are_not_read_hold_bounded_memory() {
    large_reads_not_read(ServerOptions::default().cfg("wazoo.client.ioThreads=2")).await;
}

async fn large_reads_not_read(opts: ServerOptions) {
    const CONNS: usize = 3;
    const READS: i32 = 1_000;
    let server = start(opts);
    let addr = server.addr();
    let mut setup = session(addr, 20_000).await;
    call(&mut setup, 1, &create("/big", vec![9u8; 1_000_000])).await;
    let before = rss_bytes(&server);

    let burst: Vec<u8> = (1..=READS)
        .flat_map(|xid| request(xid, &get_data("/big")))
        .collect();
    let mut conns = Vec::new();
    for _ in 0..CONNS {
        let mut s = session(addr, 30_000).await;
        s.write_all(&burst).await.unwrap();
        conns.push(s);
    }
    // Give the server time to answer all it would.
    let mut peak = before;
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        peak = peak.max(rss_bytes(&server));
    }
    println!(
        "RSS before {} MB, peak {} MB while {CONNS} x {READS} reads of 1 MB were not read",
        before >> 20,
        peak >> 20
    );
    assert!(
        peak < before + RSS_GROWTH_MAX_BYTES,
        "RSS grew from {} MB to {} MB",
        before >> 20,
        peak >> 20
    );
    // Others are served meanwhile.
    call(&mut setup, 2, &get_data("/zookeeper")).await;

    // Reading resumes the replies where they stopped, in order.
    let s = &mut conns[0];
    let mut got = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while got < READS {
        assert!(Instant::now() < deadline, "only {got} replies in 60 s");
        let p = tokio::time::timeout(Duration::from_secs(20), read_frame(s))
            .await
            .expect("the replies resume")
            .expect("the connection stays open");
        let h = reply_header(&p);
        got += 1;
        assert_eq!((h.xid, h.err), (got, 0));
        assert!(p.len() > 1_000_000, "a whole reply: {} bytes", p.len());
    }
}

// A connection that never sends its ConnectRequest is closed after 10 s,
// as ZooKeeper's sessionless connections are (its default
// zookeeper.nio.sessionlessCnxnTimeout), so silent sockets cannot hold an
// address's places in maxClientCnxns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_never_sends_its_handshake_is_closed() {
    let server = start(ServerOptions::default().cfg("maxClientCnxns=2"));
    let addr = server.addr();
    let started = Instant::now();
    let mut silent = Vec::new();
    for _ in 0..2 {
        silent.push(TcpStream::connect(addr).await.unwrap());
    }
    // Accepted and counted before it is refused: retry until refused.
    let deadline = Instant::now() + Duration::from_secs(5);
    while let Some(s) = handshake(socket(), addr, 20_000).await {
        drop(s);
        assert!(Instant::now() < deadline, "maxClientCnxns=2 never refused");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for (i, s) in silent.iter_mut().enumerate() {
        let mut b = [0u8; 1];
        let r = tokio::time::timeout(Duration::from_secs(30), s.read(&mut b)).await;
        assert!(
            matches!(r, Ok(Ok(0) | Err(_))),
            "silent connection {i} still open after {:?}: {r:?}",
            started.elapsed()
        );
    }
    assert!(
        started.elapsed() >= Duration::from_secs(9),
        "{:?}",
        started.elapsed()
    );
    let mut s = session(addr, 20_000).await;
    call(&mut s, 1, &get_data("/zookeeper")).await;
}
