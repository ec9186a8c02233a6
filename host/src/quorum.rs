//! Links between ensemble members.
//!
//! One TCP connection per pair of members carries everything between them:
//! ZAB's messages (election notifications and the quorum protocol) and the
//! pipeline's own (requests a follower forwards to the leader, session
//! touches). As in ZooKeeper's election connections, the member with the
//! higher id dials the lower one, so a pair never keeps two connections;
//! the dialer retries with a backoff when the link breaks.
//!
//! Wire format of a link, big-endian:
//!
//! ```text
//! Hello  := magic:"WZQ1" version:u8 sender_id:u64 link_epoch:u64
//! Frame  := length:u32 kind:u8 payload:byte[length - 1]
//! kind   := 1 (ZAB message, `zab::Message` codec) | 2 (pipeline message)
//! ```
//!
//! A frame over [`MAX_FRAME`] or a hello that does not match closes the
//! link: a peer's bytes are as untrusted as a client's.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use crate::core::zab::{Message, ServerId};

const MAGIC: &[u8; 4] = b"WZQ1";
const VERSION: u8 = 1;
/// The largest frame a peer may send (a snapshot travels in one frame).
pub const MAX_FRAME: usize = 1 << 30;

const KIND_ZAB: u8 = 1;
const KIND_APP: u8 = 2;

/// What a link delivers to the member's core.
#[derive(Debug)]
pub enum LinkEvent {
    Zab {
        from: ServerId,
        msg: Message,
    },
    App {
        from: ServerId,
        payload: Vec<u8>,
    },
    /// The link with `peer` broke (not reported for a link we closed).
    Down {
        peer: ServerId,
    },
}

/// What the core asks of a link.
#[derive(Debug)]
pub enum LinkCmd {
    Zab(Message),
    App(Vec<u8>),
    /// Drop the link and what is in flight; the dialer reconnects.
    Close,
}

/// The links of one member, by peer id.
pub struct Links {
    senders: HashMap<ServerId, mpsc::UnboundedSender<LinkCmd>>,
}

impl Links {
    pub fn send(&self, to: ServerId, cmd: LinkCmd) {
        if let Some(tx) = self.senders.get(&to) {
            let _ = tx.send(cmd);
        }
    }
}

/// Starts the links of member `me` to every other member in `peers` (id ->
/// quorum address), listening on `listen`. Events go to `events`.
pub async fn start(
    me: ServerId,
    listen: SocketAddr,
    peers: HashMap<ServerId, SocketAddr>,
    events: mpsc::Sender<LinkEvent>,
) -> std::io::Result<Links> {
    let listener = TcpListener::bind(listen).await?;
    let mut senders = HashMap::new();
    let mut inbound: HashMap<ServerId, mpsc::UnboundedSender<TcpStream>> = HashMap::new();
    for (&peer, &addr) in &peers {
        if peer == me {
            continue;
        }
        let (tx, rx) = mpsc::unbounded_channel();
        senders.insert(peer, tx);
        let (in_tx, in_rx) = mpsc::unbounded_channel();
        if me < peer {
            inbound.insert(peer, in_tx);
        }
        tokio::spawn(run_link(
            me,
            peer,
            addr,
            me > peer,
            rx,
            in_rx,
            events.clone(),
        ));
    }
    tokio::spawn(accept_loop(listener, inbound));
    Ok(Links { senders })
}

async fn accept_loop(
    listener: TcpListener,
    inbound: HashMap<ServerId, mpsc::UnboundedSender<TcpStream>>,
) {
    loop {
        let Ok((mut s, addr)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let inbound = inbound.clone();
        tokio::spawn(async move {
            let _ = s.set_nodelay(true);
            let mut hello = [0u8; 4 + 1 + 8 + 8];
            let read = tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut hello)).await;
            if !matches!(read, Ok(Ok(_))) || &hello[..4] != MAGIC || hello[4] != VERSION {
                tracing::warn!(%addr, "rejected a quorum connection: bad hello");
                return;
            }
            let peer = u64::from_be_bytes(hello[5..13].try_into().expect("8 bytes"));
            match inbound.get(&peer) {
                Some(tx) => {
                    let _ = tx.send(s);
                }
                None => {
                    tracing::warn!(%addr, peer, "rejected a quorum connection from an unknown or lower-ranked member")
                }
            }
        });
    }
}

static LINK_EPOCH: AtomicU64 = AtomicU64::new(1);

/// Keeps one link alive: dials (or waits for the peer to dial), then pumps
/// frames both ways until it breaks or the core closes it; then again.
async fn run_link(
    me: ServerId,
    peer: ServerId,
    addr: SocketAddr,
    dialer: bool,
    mut cmds: mpsc::UnboundedReceiver<LinkCmd>,
    mut inbound: mpsc::UnboundedReceiver<TcpStream>,
    events: mpsc::Sender<LinkEvent>,
) {
    let mut backoff = Duration::from_millis(20);
    loop {
        let stream = if dialer {
            match TcpStream::connect(addr).await {
                Ok(mut s) => {
                    let _ = s.set_nodelay(true);
                    let mut hello = Vec::with_capacity(21);
                    hello.extend_from_slice(MAGIC);
                    hello.push(VERSION);
                    hello.extend_from_slice(&me.to_be_bytes());
                    hello.extend_from_slice(
                        &LINK_EPOCH.fetch_add(1, Ordering::Relaxed).to_be_bytes(),
                    );
                    if s.write_all(&hello).await.is_err() {
                        None
                    } else {
                        Some(s)
                    }
                }
                Err(_) => None,
            }
        } else {
            // Wait for the peer to dial; drop commands meanwhile (the link
            // is down, so what they carry is lost, as on a broken link).
            loop {
                tokio::select! {
                    s = inbound.recv() => break s,
                    c = cmds.recv() => if c.is_none() { return },
                }
            }
        };
        let Some(stream) = stream else {
            // Drain what was queued for a link that is not there.
            while cmds.try_recv().is_ok() {}
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_millis(1000));
            continue;
        };
        backoff = Duration::from_millis(20);
        tracing::debug!(me, peer, "quorum link up");
        let closed_by_us = pump(peer, stream, &mut cmds, &mut inbound, &events).await;
        if !closed_by_us && events.send(LinkEvent::Down { peer }).await.is_err() {
            return;
        }
        tracing::debug!(me, peer, closed_by_us, "quorum link down");
    }
}

/// Pumps one connection; returns true if the core asked to close it.
async fn pump(
    peer: ServerId,
    stream: TcpStream,
    cmds: &mut mpsc::UnboundedReceiver<LinkCmd>,
    inbound: &mut mpsc::UnboundedReceiver<TcpStream>,
    events: &mpsc::Sender<LinkEvent>,
) -> bool {
    let (rd, mut wr) = stream.into_split();
    let reader_events = events.clone();
    let mut reader = tokio::spawn(read_frames(peer, rd, reader_events));
    let mut buf = Vec::with_capacity(64 * 1024);
    // The dialing side never gets inbound connections (its channel is closed).
    let mut inbound_open = true;
    loop {
        tokio::select! {
            _ = &mut reader => return false,
            // A newer connection from the peer replaces this one.
            s = inbound.recv(), if inbound_open => {
                let Some(s) = s else {
                    inbound_open = false;
                    continue;
                };
                reader.abort();
                let _ = (&mut reader).await;
                tracing::debug!(peer, "peer reconnected; replacing the link");
                let _ = events.send(LinkEvent::Down { peer }).await;
                return Box::pin(pump(peer, s, cmds, inbound, events)).await;
            }
            cmd = cmds.recv() => {
                let Some(cmd) = cmd else {
                    reader.abort();
                    let _ = (&mut reader).await;
                    return true;
                };
                let mut close = false;
                encode(cmd, &mut buf, &mut close);
                while !close && buf.len() < (1 << 20) {
                    match cmds.try_recv() {
                        Ok(c) => encode(c, &mut buf, &mut close),
                        Err(_) => break,
                    }
                }
                if !buf.is_empty() && wr.write_all(&buf).await.is_err() {
                    reader.abort();
                    let _ = (&mut reader).await;
                    return false;
                }
                buf.clear();
                if close {
                    reader.abort();
                    let _ = (&mut reader).await;
                    let _ = wr.shutdown().await;
                    return true;
                }
            }
        }
    }
}

fn encode(cmd: LinkCmd, buf: &mut Vec<u8>, close: &mut bool) {
    let (kind, payload) = match cmd {
        LinkCmd::Zab(m) => (KIND_ZAB, m.to_bytes()),
        LinkCmd::App(p) => (KIND_APP, p),
        LinkCmd::Close => {
            *close = true;
            return;
        }
    };
    buf.extend_from_slice(&((payload.len() + 1) as u32).to_be_bytes());
    buf.push(kind);
    buf.extend_from_slice(&payload);
}

async fn read_frames(
    peer: ServerId,
    rd: tokio::net::tcp::OwnedReadHalf,
    events: mpsc::Sender<LinkEvent>,
) {
    let mut rd = tokio::io::BufReader::with_capacity(256 * 1024, rd);
    loop {
        let mut len = [0u8; 4];
        if rd.read_exact(&mut len).await.is_err() {
            return;
        }
        let len = u32::from_be_bytes(len) as usize;
        if len == 0 || len > MAX_FRAME {
            tracing::warn!(peer, len, "closing the quorum link: bad frame length");
            return;
        }
        let mut frame = vec![0u8; len];
        if rd.read_exact(&mut frame).await.is_err() {
            return;
        }
        let ev = match frame[0] {
            KIND_ZAB => match Message::decode(&frame[1..]) {
                Ok(msg) => LinkEvent::Zab { from: peer, msg },
                Err(e) => {
                    tracing::warn!(peer, "closing the quorum link: undecodable message: {e}");
                    return;
                }
            },
            KIND_APP => LinkEvent::App {
                from: peer,
                payload: frame[1..].to_vec(),
            },
            k => {
                tracing::warn!(peer, k, "closing the quorum link: unknown frame kind");
                return;
            }
        };
        if events.send(ev).await.is_err() {
            return;
        }
    }
}

/// Shared handle type for tests and the member.
pub type SharedLinks = Arc<Links>;
