//! The client port: one reader and one writer task per connection.
//!
//! The reader checks each frame's length against jute.maxbuffer before
//! reading it (a larger one closes the connection, as ZooKeeper does),
//! decodes it and hands it to the core loop. The writer coalesces whatever
//! the core queued into one socket write. A connection may have at most
//! [`MAX_IN_FLIGHT`] requests unanswered; past that its reader stops reading,
//! so a client that does not read its replies cannot make the server queue
//! without bound.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, Semaphore};

use crate::config::Config;
use crate::core::server::Input;
use crate::member::{ConnMsg, Event};
use wazoo_proto::frame::{self, ClientFrame};
use wazoo_proto::{ConnectRequest, Jute};

/// Requests one connection may have unanswered before we stop reading it.
pub const MAX_IN_FLIGHT: usize = 1000;

/// The four-letter words ZooKeeper knows; the first four bytes of a new
/// connection equal to one of these are a command, not a frame length.
pub const FOUR_LETTER_WORDS: [&str; 18] = [
    "conf", "cons", "crst", "dump", "envi", "gtmk", "ruok", "stmk", "srst", "srvr", "stat", "wchc",
    "wchp", "wchs", "mntr", "isro", "hash", "dirs",
];

static NEXT_CONN: AtomicU64 = AtomicU64::new(1);

/// Per-address connection counts for maxClientCnxns.
#[derive(Default)]
struct PerIp(Mutex<HashMap<IpAddr, u32>>);

impl PerIp {
    fn try_add(&self, ip: IpAddr, max: u32) -> bool {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let n = m.entry(ip).or_insert(0);
        if max > 0 && *n >= max {
            return false;
        }
        *n += 1;
        true
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
}

pub async fn accept_loop(listener: TcpListener, core: mpsc::Sender<Event>, cfg: Arc<Config>) {
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
        if !per_ip.try_add(peer.ip(), cfg.max_client_cnxns) {
            tracing::warn!(
                "too many connections from {} - max is {}",
                peer.ip(),
                cfg.max_client_cnxns
            );
            drop(stream);
            continue;
        }
        let (core, cfg, per_ip) = (core.clone(), Arc::clone(&cfg), Arc::clone(&per_ip));
        tokio::spawn(async move {
            handle(stream, peer, core, cfg).await;
            per_ip.remove(peer.ip());
        });
    }
}

async fn handle(stream: TcpStream, peer: SocketAddr, core: mpsc::Sender<Event>, cfg: Arc<Config>) {
    let _ = stream.set_nodelay(true);
    let (mut rd, wr) = stream.into_split();
    let mut head = [0u8; 4];
    if rd.read_exact(&mut head).await.is_err() {
        return;
    }
    if let Ok(word) = std::str::from_utf8(&head) {
        if FOUR_LETTER_WORDS.contains(&word) {
            four_letter(word, wr, &core, &cfg).await;
            return;
        }
    }
    let max = cfg.max_buffer;
    let Some(payload) = read_payload(&mut rd, head, max).await else {
        return;
    };
    let Ok(req) = ConnectRequest::from_bytes(&payload) else {
        tracing::debug!(%peer, "malformed connect request; closing");
        return;
    };
    let conn = NEXT_CONN.fetch_add(1, Ordering::Relaxed);
    let (tx, rx) = mpsc::unbounded_channel();
    let permits = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
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
    let writer = tokio::spawn(write_loop(wr, rx, Arc::clone(&permits)));
    read_loop(conn, rd, &core, max, permits).await;
    let _ = core.send(Event::Input(Input::Closed { conn })).await;
    writer.abort();
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

async fn read_loop(
    conn: u64,
    rd: tokio::net::tcp::OwnedReadHalf,
    core: &mpsc::Sender<Event>,
    max: usize,
    permits: Arc<Semaphore>,
) {
    let mut rd = tokio::io::BufReader::with_capacity(64 * 1024, rd);
    let mut batch: Vec<Input> = Vec::new();
    loop {
        // Wait for one whole frame...
        let mut head = [0u8; 4];
        if rd.read_exact(&mut head).await.is_err() {
            return;
        }
        let Some(payload) = read_payload(&mut rd, head, max).await else {
            return;
        };
        match permits.acquire().await {
            Ok(p) => p.forget(),
            Err(_) => return,
        }
        let Some(input) = decode_input(conn, &payload) else {
            return;
        };
        batch.push(input);
        // ...then take every whole frame already buffered, without waiting,
        // so a pipelining client costs one hand-off per read, not per request.
        loop {
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
            let Ok(p) = permits.try_acquire() else {
                break;
            };
            p.forget();
            let input = decode_input(conn, &buffered[4..n]);
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

/// Decodes one request frame's payload; `None` closes the connection.
fn decode_input(conn: u64, payload: &[u8]) -> Option<Input> {
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
    mut wr: tokio::net::tcp::OwnedWriteHalf,
    mut rx: mpsc::UnboundedReceiver<ConnMsg>,
    permits: Arc<Semaphore>,
) {
    let mut buf = Vec::with_capacity(64 * 1024);
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
        while !close && buf.len() < 1 << 20 {
            match rx.try_recv() {
                Ok(m) => close |= push(m, &mut buf),
                Err(_) => break,
            }
        }
        if !buf.is_empty() {
            if wr.write_all(&buf).await.is_err() {
                return;
            }
            buf.clear();
        }
        permits.add_permits(replies);
        if close {
            let _ = wr.shutdown().await;
            return;
        }
    }
}

async fn four_letter(
    word: &str,
    mut wr: tokio::net::tcp::OwnedWriteHalf,
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
    let _ = wr.shutdown().await;
}
