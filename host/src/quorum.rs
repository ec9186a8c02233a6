//! Links between ensemble members.
//!
//! One TCP connection per pair of members carries everything between them:
//! ZAB's messages (election notifications and the quorum protocol) and the
//! pipeline's own (requests a follower forwards to the leader, session
//! touches). As in ZooKeeper's election connections, the member with the
//! higher id dials the lower one, so a pair never keeps two connections;
//! the dialer retries with a backoff when the link breaks. Only the quorum
//! port of a `server.N` line is used: elections travel on the same link,
//! so nothing listens on the election port.
//!
//! # Several addresses per member (`multiAddress.enabled`)
//!
//! A member may list several address pairs (`server.N=a:1:2|b:3:4`). It
//! listens on the quorum port of each of its own. A dialer connects to all
//! of the peer's quorum addresses at once and keeps the first connection
//! that is made (the others are dropped before their hello): the address
//! that answers first is the reachable one, as ZooKeeper's
//! `MultipleAddresses` picks a reachable address and its learner connects
//! to all of the leader's in parallel. When the link breaks, or falls
//! silent for [`LIVENESS`], the dialer dials all of them again, so the
//! link moves to an address that still works. Each dial comes from the
//! dialer's own address that shares the longest prefix with the target
//! ([`source_ip`]), so on a member with one address per network the
//! connection leaves on the matching network.
//!
//! Wire format of a link, big-endian:
//!
//! ```text
//! Hello  := magic:"WZQ1" version:u8 (=2) sender_id:u64 link_epoch:u64
//! Frame  := length:u32 kind:u8 payload:byte[length - 1]
//! kind   := 1 (ZAB message, `zab::Message` codec) | 2 (pipeline message)
//!         | 3 (keepalive, empty payload)
//! ```
//!
//! # Who may hold a link
//!
//! A hello proves nothing: anyone who reaches a quorum port can send one
//! claiming any id. Without cryptographic member authentication (quorum
//! TLS or SASL), a link is held by what the connection does, not by what
//! it claims:
//!
//! - The accepting member takes a hello only for an id in its
//!   configuration (the membership the last committed reconfig made, see
//!   [`Links::follow`]) that is higher than its own (lower ids are dialed, never
//!   accepted), and only from one of that member's configured addresses (the
//!   IPs of its `server.N` hosts, unless one is a wildcard). Dialers bind their
//!   socket to one of their own configured addresses, so the check holds for real
//!   members; on one host (all members on 127.0.0.1) it rules nothing out.
//! - **A connection that claims an id never displaces a live link with
//!   that id.** A link is live until its reader sees end of stream, a read
//!   error, a malformed frame, or nothing at all for [`LIVENESS`]: each side
//!   sends a keepalive after [`KEEPALIVE`] without writing, so a live peer
//!   is never silent that long. While the link is live, a new connection
//!   claiming its id is closed at once, before any of its frames is read.
//!   A restarted member's old connection ends with the old process (end of
//!   stream), or after [`LIVENESS`] if its host vanished; its dialer retries
//!   with a backoff until its new connection takes the free slot. The
//!   dialer's `link_epoch` is informational: a stranger could claim any.
//! - What remains without authentication: while a link is down, a stranger
//!   that wins the race to the free slot holds it for as long as it keeps
//!   it alive. It can never take a slot a live member holds.
//!
//! # TLS (`sslQuorum=true`)
//!
//! With quorum TLS every link is TLS from its first byte, the hello and
//! everything after it inside: the dialer presents its certificate and
//! checks the acceptor's against the quorum trust store (and its name
//! against the acceptor's configured host, unless
//! `ssl.quorum.hostnameVerification=false`); the acceptor requires the
//! dialer's certificate, checks it against the same trust store, and,
//! with hostname verification, that it is valid for the configured host
//! of the member the hello then claims. A stranger without a trusted
//! certificate cannot finish a handshake, so it can neither hold a free
//! slot nor speak for a member. The handshake runs within the hello's
//! bounds ([`HANDSHAKES_MAX`], [`HELLO_TIMEOUT`]).
//!
//! # Bounds
//!
//! - A hello must arrive within [`HELLO_TIMEOUT`]; at most
//!   [`HANDSHAKES_MAX`] connections (and [`HANDSHAKES_PER_IP_MAX`] per
//!   source IP) may be waiting for theirs; more are closed at once.
//! - A frame length is checked against [`MAX_FRAME`] before anything is
//!   allocated; the frame's buffer grows only as its bytes arrive, and the
//!   whole frame must arrive within [`LIVENESS`] plus one second per
//!   [`FRAME_RATE_MIN`] bytes, so a trickling sender pins neither memory nor
//!   a task.
//! - A malformed, unknown-kind or oversized frame closes that connection
//!   only; the member reports the link down to its core, as for any broken
//!   link, and its other links are untouched.
//! - Each link's outbound queue holds at most [`QUEUE_BYTES_MAX`] (one
//!   message larger than that, such as a snapshot, is admitted into a queue
//!   below the bound). A peer that does not drain its link past the bound
//!   has the link closed and the queue dropped; ZAB resynchronizes it when
//!   it reconnects.
//!
//! # Layout
//!
//! This file holds the links and their tasks; `wire.rs` the hello and
//! frame codec above, `outbox.rs` a link's bounded outbound queue, and
//! `tests.rs` the tests.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{mpsc, Notify, Semaphore};
use tokio::time::Instant;

use crate::core::zab::{Message, ServerId};
use crate::tls::{MaybeTls, QuorumTls};

mod outbox;
mod wire;

use outbox::{Outbox, OutboxState, Take};
pub use wire::{check_frame_len, decode_frame, Frame, Hello, LinkError, HELLO_LEN, MAX_FRAME};
use wire::{put_frame, KIND_APP, KIND_KEEPALIVE, KIND_ZAB};

/// A side that has written nothing for this long sends a keepalive.
pub const KEEPALIVE: Duration = Duration::from_millis(500);
/// A link on which nothing arrives for this long is dead.
pub const LIVENESS: Duration = Duration::from_secs(5);
/// How long an accepted connection has to send its hello.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a dial may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Connections waiting for their hello, in all and per source IP.
pub const HANDSHAKES_MAX: usize = 64;
pub const HANDSHAKES_PER_IP_MAX: usize = 16;
/// The slowest a frame may arrive, in bytes per second (after [`LIVENESS`]).
pub const FRAME_RATE_MIN: usize = 1 << 20;
/// The bytes a link's outbound queue may hold before the link is closed.
pub const QUEUE_BYTES_MAX: usize = 64 << 20;
/// The most bytes written to a socket in one batch.
const WRITE_BATCH_MAX: usize = 1 << 20;

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

impl LinkCmd {
    /// About the bytes this command puts on the wire, for the queue bound.
    fn size(&self) -> usize {
        match self {
            LinkCmd::Zab(m) => {
                let payload = match m {
                    Message::Snap { data, .. } => data.len(),
                    Message::Proposal { payload, .. } | Message::Inform { payload, .. } => {
                        payload.len()
                    }
                    _ => 0,
                };
                5 + 40 + payload
            }
            LinkCmd::App(p) => 5 + p.len(),
            LinkCmd::Close => 0,
        }
    }
}

/// Where the accept loop finds the link of the member a hello claims to
/// be: that member's configured IPs and the link's inbound queue. Shared,
/// because a reconfiguration adds and removes members while it runs.
type Inbound = Arc<Mutex<HashMap<ServerId, (Vec<IpAddr>, mpsc::Sender<MaybeTls>)>>>;

/// One quorum address of a member: what its `server.N` line names (the
/// host a TLS certificate must be valid for) and what that resolved to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct PeerAddr {
    pub host: String,
    pub addr: SocketAddr,
}

/// The links of one member, by peer id.
pub struct Links {
    me: ServerId,
    /// This member's own configured IPs (wildcards left out), which its
    /// dialers bind to ([`source_ip`]).
    local_ips: Vec<IpAddr>,
    outboxes: HashMap<ServerId, Arc<Outbox>>,
    /// Where each link dials (or, for an accepted link, the addresses the
    /// peer must come from): one per address pair of the peer's line.
    addrs: HashMap<ServerId, Vec<PeerAddr>>,
    inbound: Inbound,
    events: mpsc::Sender<LinkEvent>,
    tls: Option<Arc<QuorumTls>>,
    keepalive: bool,
}

impl Links {
    /// Ends the link to `peer`: no hello claiming its id is taken from
    /// now on.
    fn end(&mut self, peer: ServerId) {
        self.inbound
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&peer);
        self.addrs.remove(&peer);
        if let Some(o) = self.outboxes.remove(&peer) {
            o.lock().closed = true;
            o.wake.notify_one();
        }
    }

    /// Starts the link to `peer` at `addrs` (at least one; kept sorted,
    /// as their order means nothing: all are dialled at once).
    fn add(&mut self, peer: ServerId, mut addrs: Vec<PeerAddr>) {
        addrs.sort();
        let me = self.me;
        let outbox = Arc::new(Outbox {
            state: Mutex::new(OutboxState::default()),
            wake: Notify::new(),
        });
        self.outboxes.insert(peer, Arc::clone(&outbox));
        self.addrs.insert(peer, addrs.clone());
        // One accepted connection may wait for the link's task; more are
        // refused until it has taken or refused that one.
        let (in_tx, in_rx) = mpsc::channel(1);
        if me < peer {
            self.inbound
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(peer, (addrs.iter().map(|a| a.addr.ip()).collect(), in_tx));
        }
        let link = Link {
            me,
            peer,
            addrs,
            local_ips: self.local_ips.clone(),
            dialer: me > peer,
            outbox,
            inbound: in_rx,
            inbound_open: me < peer,
            events: self.events.clone(),
            tls: self.tls.clone(),
            keepalive: self.keepalive,
            refused: 0,
            refused_logged: None,
        };
        tokio::spawn(link.run());
    }

    /// Follows a membership a reconfig committed (ZooKeeper Dynamic
    /// Reconfiguration): starts links to members that joined, and ends
    /// those to members that left (no hello claiming their id is taken
    /// from then on). A joiner whose address does not resolve gets no
    /// link, and that is logged; the rest of the membership is followed.
    pub fn follow(&mut self, c: &crate::core::quorum_config::QuorumConfig) {
        if let Some(tls) = &self.tls {
            tls.set_member_hosts(
                c.servers
                    .iter()
                    .map(|(&id, s)| (id, s.addrs.iter().map(|a| a.host.clone()).collect()))
                    .collect(),
            );
        }
        let gone: Vec<ServerId> = self
            .outboxes
            .keys()
            .copied()
            .filter(|id| !c.servers.contains_key(id))
            .collect();
        for peer in gone {
            self.end(peer);
            tracing::info!(peer, "quorum link ended: the member left the ensemble");
        }
        for (&peer, s) in &c.servers {
            if peer == self.me {
                continue;
            }
            let mut addrs = resolve_quorum_addrs(peer, &s.addrs);
            // `/zookeeper/config` lists the pairs sorted by host, zoo.cfg
            // as the operator wrote them: the same addresses in another
            // order are no move.
            addrs.sort();
            if addrs.is_empty() {
                tracing::error!(
                    peer,
                    "cannot resolve any quorum address of a member: no link to it"
                );
            } else if self.addrs.get(&peer) != Some(&addrs) {
                // A member given new addresses is linked anew there
                // (ZooKeeper: remove and add it back in one reconfig).
                if self.outboxes.contains_key(&peer) {
                    self.end(peer);
                }
                tracing::info!(peer, addrs = ?addrs, "quorum link started: the member joined the ensemble or moved");
                self.add(peer, addrs);
            }
        }
    }

    /// Queues `cmd` for `to`, without waiting. Past [`QUEUE_BYTES_MAX`]
    /// queued, the link is reset instead (reported as [`LinkEvent::Down`]).
    pub fn send(&self, to: ServerId, cmd: LinkCmd) {
        if let Some(o) = self.outboxes.get(&to) {
            o.push(cmd);
        }
    }
}

impl Drop for Links {
    fn drop(&mut self) {
        for o in self.outboxes.values() {
            o.lock().closed = true;
            o.wake.notify_one();
        }
    }
}

/// The quorum addresses of a member's address pairs that resolve (those
/// that do not are logged and left out), in the order listed.
fn resolve_quorum_addrs(peer: ServerId, addrs: &[crate::config::MemberAddr]) -> Vec<PeerAddr> {
    addrs
        .iter()
        .filter_map(|a| {
            let addr = std::net::ToSocketAddrs::to_socket_addrs(&(a.host.as_str(), a.quorum_port))
                .ok()
                .and_then(|mut r| r.next());
            if addr.is_none() {
                tracing::warn!(peer, host = %a.host, port = a.quorum_port, "cannot resolve a member's quorum address");
            }
            addr.map(|addr| PeerAddr {
                host: a.host.clone(),
                addr,
            })
        })
        .collect()
}

/// The address a dial to `dest` leaves from: of this member's own
/// configured IPs (`local`) of `dest`'s family, the one sharing the
/// longest bit prefix with `dest` (the first listed on a tie), so that on a
/// member with one address per network the dial leaves on `dest`'s
/// network; none (the system chooses) when there is none of that family.
pub fn source_ip(local: &[IpAddr], dest: IpAddr) -> Option<IpAddr> {
    fn bits(ip: IpAddr) -> u128 {
        match ip {
            IpAddr::V4(a) => u128::from(u32::from(a)) << 96,
            IpAddr::V6(a) => u128::from(a),
        }
    }
    local
        .iter()
        .copied()
        .filter(|ip| ip.is_ipv4() == dest.is_ipv4())
        .enumerate()
        .max_by_key(|&(i, ip)| {
            (
                (bits(ip) ^ bits(dest)).leading_zeros(),
                std::cmp::Reverse(i),
            )
        })
        .map(|(_, ip)| ip)
}

/// How a member's links are made, from zoo.cfg.
#[derive(Default)]
pub struct LinkOptions {
    /// Listen on the quorum port of every address (`quorumListenOnAllIPs`);
    /// links are still dialled from a configured address.
    pub listen_on_all_ips: bool,
    /// TCP keepalive on every link, dialled or accepted (`tcpKeepAlive`),
    /// with the system's probe timing.
    pub keepalive: bool,
    /// Quorum TLS.
    pub tls: Option<Arc<QuorumTls>>,
}

/// Starts the links of member `me` to every other member in `peers` (id ->
/// its quorum addresses), listening on each of `listen` (this member's
/// own quorum addresses), made as `opts` says. Events go to `events`.
/// Fails, naming the address, if one of `listen` cannot be bound: as in
/// ZooKeeper, a member listens on all of its addresses or does not start.
pub async fn start(
    me: ServerId,
    listen: &[SocketAddr],
    peers: HashMap<ServerId, Vec<PeerAddr>>,
    events: mpsc::Sender<LinkEvent>,
    opts: LinkOptions,
) -> std::io::Result<Links> {
    let LinkOptions {
        listen_on_all_ips,
        keepalive,
        tls,
    } = opts;
    let mut binds: Vec<SocketAddr> = Vec::with_capacity(listen.len());
    for &own in listen {
        let bind = if listen_on_all_ips {
            let any: IpAddr = if own.is_ipv4() {
                Ipv4Addr::UNSPECIFIED.into()
            } else {
                Ipv6Addr::UNSPECIFIED.into()
            };
            SocketAddr::new(any, own.port())
        } else {
            own
        };
        if !binds.contains(&bind) {
            binds.push(bind);
        }
    }
    let mut listeners = Vec::with_capacity(binds.len());
    for bind in binds {
        let l = TcpListener::bind(bind)
            .await
            .map_err(|e| std::io::Error::new(e.kind(), format!("{bind}: {e}")))?;
        listeners.push(l);
    }
    let mut links = Links {
        me,
        local_ips: listen
            .iter()
            .map(|a| a.ip())
            .filter(|ip| !ip.is_unspecified())
            .collect(),
        outboxes: HashMap::new(),
        addrs: HashMap::new(),
        inbound: Inbound::default(),
        events,
        tls: tls.clone(),
        keepalive,
    };
    for (peer, addrs) in peers {
        if peer != me && !addrs.is_empty() {
            links.add(peer, addrs);
        }
    }
    // One bound on handshakes for all the member's listeners.
    let bounds = HandshakeBounds {
        handshakes: Arc::new(Semaphore::new(HANDSHAKES_MAX)),
        per_ip: Arc::new(Mutex::new(HashMap::new())),
    };
    for listener in listeners {
        tokio::spawn(accept_loop(
            listener,
            Arc::clone(&links.inbound),
            tls.clone(),
            keepalive,
            bounds.clone(),
        ));
    }
    Ok(links)
}

/// The connections waiting for their hello, over all of a member's
/// listeners: in all ([`HANDSHAKES_MAX`]) and per source IP.
#[derive(Clone)]
struct HandshakeBounds {
    handshakes: Arc<Semaphore>,
    per_ip: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

/// Counts a source IP's connections waiting for their hello.
struct IpSlot {
    ip: IpAddr,
    table: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

impl IpSlot {
    fn take(table: &Arc<Mutex<HashMap<IpAddr, usize>>>, ip: IpAddr) -> Option<IpSlot> {
        let mut t = table.lock().unwrap_or_else(|e| e.into_inner());
        let n = t.entry(ip).or_insert(0);
        if *n >= HANDSHAKES_PER_IP_MAX {
            return None;
        }
        *n += 1;
        Some(IpSlot {
            ip,
            table: Arc::clone(table),
        })
    }
}

impl Drop for IpSlot {
    fn drop(&mut self) {
        let mut t = self.table.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = t.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                t.remove(&self.ip);
            }
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    inbound: Inbound,
    tls: Option<Arc<QuorumTls>>,
    keepalive: bool,
    bounds: HandshakeBounds,
) {
    let HandshakeBounds { handshakes, per_ip } = bounds;
    loop {
        let Ok((s, addr)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let Ok(permit) = Arc::clone(&handshakes).try_acquire_owned() else {
            tracing::debug!(%addr, "refused a quorum connection: too many handshakes");
            continue;
        };
        let Some(slot) = IpSlot::take(&per_ip, addr.ip()) else {
            tracing::debug!(%addr, "refused a quorum connection: too many handshakes from its IP");
            continue;
        };
        let inbound = Arc::clone(&inbound);
        let tls = tls.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let _slot = slot;
            handshake(s, addr, &inbound, tls.as_deref(), keepalive).await;
        });
    }
}

/// Runs the TLS handshake (with quorum TLS), reads a connection's hello and
/// hands it to the link of the member it claims to be, if that member may
/// dial us from that address (and, with TLS, its certificate may speak for
/// that member).
async fn handshake(
    s: TcpStream,
    addr: SocketAddr,
    inbound: &Inbound,
    tls: Option<&QuorumTls>,
    keepalive: bool,
) {
    link_socket_options(&s, addr, keepalive);
    let mut s = match tls {
        None => MaybeTls::Plain(s),
        Some(tls) => match tls.accept(s).await {
            Ok(s) => s,
            Err(e) => {
                tracing::info!(%addr, "refused a quorum connection: TLS handshake failed: {e}");
                return;
            }
        },
    };
    let mut hello = [0u8; HELLO_LEN];
    match tokio::time::timeout(HELLO_TIMEOUT, s.read_exact(&mut hello)).await {
        Ok(Ok(_)) => {}
        Ok(Err(_)) => return,
        Err(_) => {
            tracing::debug!(%addr, "closed a quorum connection: no hello in time");
            return;
        }
    }
    let hello = match Hello::decode(&hello) {
        Ok(h) => h,
        Err(e) => {
            tracing::debug!(%addr, "refused a quorum connection: {e}");
            return;
        }
    };
    let peer = hello.sender;
    let found = inbound
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&peer)
        .cloned();
    let Some((ips, tx)) = found else {
        tracing::debug!(%addr, peer, "refused a quorum connection from an unknown or lower-ranked member");
        return;
    };
    if !ips.iter().any(|ip| ip.is_unspecified() || *ip == addr.ip()) {
        tracing::debug!(%addr, peer, configured = ?ips, "refused a quorum connection: not from one of the member's addresses");
        return;
    }
    if let Some(Err(e)) = tls.map(|t| t.check_member(&s, peer)) {
        tracing::warn!(%addr, peer, "refused a quorum connection: {e}");
        return;
    }
    if tx.try_send(s).is_err() {
        tracing::debug!(%addr, peer, "refused a quorum connection: another one is waiting");
    }
}

/// The options of every link's socket, dialled or accepted: no Nagle, and
/// TCP keepalive with `tcpKeepAlive`.
fn link_socket_options(s: &TcpStream, addr: SocketAddr, keepalive: bool) {
    let _ = s.set_nodelay(true);
    if keepalive {
        if let Err(e) = crate::net::set_keepalive(s) {
            tracing::debug!(%addr, "cannot turn TCP keepalive on for a quorum link: {e}");
        }
    }
}

static LINK_EPOCH: AtomicU64 = AtomicU64::new(1);

/// Connects to `addr` from `local` (our configured address, so the
/// peer's address check holds), within [`CONNECT_TIMEOUT`].
async fn connect_from(addr: SocketAddr, local: Option<IpAddr>) -> Option<TcpStream> {
    let sock = if addr.is_ipv4() {
        TcpSocket::new_v4()
    } else {
        TcpSocket::new_v6()
    }
    .ok()?;
    if let Some(ip) = local {
        if let Err(e) = sock.bind(SocketAddr::new(ip, 0)) {
            tracing::debug!(%ip, "cannot bind the quorum dialer: {e}");
        }
    }
    tokio::time::timeout(CONNECT_TIMEOUT, sock.connect(addr))
        .await
        .ok()?
        .ok()
}

/// Connects to every one of `addrs` at once and keeps the first
/// connection made, with the address it reached; the others are dropped
/// (before any hello, so the peer closes them as connections that sent
/// none). None if no address answers within [`CONNECT_TIMEOUT`].
async fn connect_any(addrs: &[PeerAddr], local_ips: &[IpAddr]) -> Option<(TcpStream, PeerAddr)> {
    if let [only] = addrs {
        let s = connect_from(only.addr, source_ip(local_ips, only.addr.ip())).await?;
        return Some((s, only.clone()));
    }
    let mut tries = tokio::task::JoinSet::new();
    for a in addrs {
        let a = a.clone();
        let local = source_ip(local_ips, a.addr.ip());
        tries.spawn(async move { connect_from(a.addr, local).await.map(|s| (s, a)) });
    }
    while let Some(done) = tries.join_next().await {
        if let Ok(Some(won)) = done {
            // Dropping the set aborts the dials still running.
            return Some(won);
        }
    }
    None
}

/// Dials member `peer` at one of `addrs` ([`connect_any`]), runs the TLS
/// handshake with it (with quorum TLS, checking its certificate against
/// the host the reached address was named by) and sends the hello.
async fn dial(
    me: ServerId,
    peer: ServerId,
    addrs: &[PeerAddr],
    local_ips: &[IpAddr],
    tls: Option<&QuorumTls>,
    keepalive: bool,
) -> Option<(MaybeTls, SocketAddr)> {
    let (s, reached) = connect_any(addrs, local_ips).await?;
    let addr = reached.addr;
    link_socket_options(&s, addr, keepalive);
    let mut s = match tls {
        None => MaybeTls::Plain(s),
        Some(tls) => match tls.connect(s, &reached.host).await {
            Ok(s) => s,
            Err(e) => {
                tracing::info!(peer, %addr, "quorum TLS handshake failed: {e}");
                return None;
            }
        },
    };
    let hello = Hello {
        sender: me,
        link_epoch: LINK_EPOCH.fetch_add(1, Ordering::Relaxed),
    };
    let sent = async {
        s.write_all(&hello.encode()).await?;
        s.flush().await
    };
    match tokio::time::timeout(CONNECT_TIMEOUT, sent).await {
        Ok(Ok(())) => Some((s, addr)),
        _ => None,
    }
}

/// How a connection ended.
#[derive(Debug, PartialEq, Eq)]
enum End {
    /// The core asked to close it, or the member is stopping.
    ByUs,
    /// It broke, or the peer sent something malformed.
    Broken,
    /// The peer did not drain its queue.
    Overflowed,
}

/// One link, kept alive by its task.
struct Link {
    me: ServerId,
    peer: ServerId,
    /// The peer's quorum addresses (the dialer tries them all).
    addrs: Vec<PeerAddr>,
    local_ips: Vec<IpAddr>,
    dialer: bool,
    outbox: Arc<Outbox>,
    /// Connections that claim to be `peer` (never any on the dialing side).
    inbound: mpsc::Receiver<MaybeTls>,
    /// False once `inbound` is closed (from the start on the dialing side).
    inbound_open: bool,
    events: mpsc::Sender<LinkEvent>,
    tls: Option<Arc<QuorumTls>>,
    keepalive: bool,
    /// Connections refused because the link was live, and when that was
    /// last logged (so an attack does not flood the log).
    refused: u64,
    refused_logged: Option<Instant>,
}

impl Link {
    /// Dials (or waits for the peer to dial), then pumps frames both ways
    /// until the connection ends; then again.
    async fn run(mut self) {
        let mut backoff = Duration::from_millis(20);
        loop {
            // What was queued while no connection was up is lost, as on a
            // broken link.
            if !self.outbox.discard() {
                return;
            }
            let stream = if self.dialer {
                dial(
                    self.me,
                    self.peer,
                    &self.addrs,
                    &self.local_ips,
                    self.tls.as_deref(),
                    self.keepalive,
                )
                .await
                .map(|(s, addr)| {
                    tracing::debug!(me = self.me, peer = self.peer, %addr, "quorum link dialled");
                    s
                })
            } else {
                loop {
                    tokio::select! {
                        s = self.inbound.recv() => match s {
                            Some(s) => break Some(s),
                            None => return,
                        },
                        _ = self.outbox.wake.notified() => if !self.outbox.discard() { return },
                    }
                }
            };
            let Some(stream) = stream else {
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_millis(1000));
                continue;
            };
            backoff = Duration::from_millis(20);
            tracing::debug!(me = self.me, peer = self.peer, "quorum link up");
            let end = self.pump(stream).await;
            let peer = self.peer;
            match end {
                End::ByUs => {}
                End::Broken => {}
                End::Overflowed => tracing::warn!(
                    peer,
                    "closing the quorum link: the peer did not drain {QUEUE_BYTES_MAX} queued bytes"
                ),
            }
            if end != End::ByUs && self.events.send(LinkEvent::Down { peer }).await.is_err() {
                return;
            }
            tracing::debug!(me = self.me, peer, ?end, "quorum link down");
        }
    }

    /// A connection claiming this link's peer arrived while the link is up.
    fn on_inbound(&mut self, s: Option<MaybeTls>) {
        match s {
            Some(s) => self.refuse(s),
            // The dialing side has no inbound connections: its channel is
            // closed from the start.
            None => self.inbound_open = false,
        }
    }

    /// Closes a connection that claims this link's peer while the link is
    /// live: a claim never displaces a live link.
    fn refuse(&mut self, s: MaybeTls) {
        self.refused += 1;
        let now = Instant::now();
        if self
            .refused_logged
            .is_none_or(|t| now.duration_since(t) >= Duration::from_secs(10))
        {
            tracing::warn!(
                peer = self.peer,
                from = ?s.tcp().peer_addr().ok(),
                refused = self.refused,
                "refused a quorum connection claiming a member whose link is live"
            );
            self.refused_logged = Some(now);
        }
    }

    /// Pumps one connection until it ends.
    async fn pump(&mut self, stream: MaybeTls) -> End {
        match stream {
            MaybeTls::Plain(s) => {
                let (rd, wr) = s.into_split();
                self.pump_halves(rd, wr).await
            }
            MaybeTls::Tls(t) => {
                let (rd, wr) = tokio::io::split(*t);
                self.pump_halves(rd, wr).await
            }
        }
    }

    async fn pump_halves(
        &mut self,
        rd: impl AsyncRead + Unpin + Send + 'static,
        mut wr: impl AsyncWrite + Unpin,
    ) -> End {
        let mut reader = tokio::spawn(read_frames(self.peer, rd, self.events.clone()));
        let end = self.write_loop(&mut wr, &mut reader).await;
        // A finished reader's handle may already have been polled to its end.
        if !reader.is_finished() {
            reader.abort();
            let _ = (&mut reader).await;
        }
        if end == End::ByUs {
            let _ = tokio::time::timeout(Duration::from_millis(100), wr.shutdown()).await;
        }
        end
    }

    async fn write_loop(
        &mut self,
        wr: &mut (impl AsyncWrite + Unpin),
        reader: &mut tokio::task::JoinHandle<()>,
    ) -> End {
        let mut buf = Vec::with_capacity(64 * 1024);
        let mut last_write = Instant::now();
        loop {
            let cmds = match self.outbox.take() {
                Take::Closed => return End::ByUs,
                Take::Overflowed => return End::Overflowed,
                Take::Cmds(c) => c,
            };
            let mut close = false;
            for cmd in cmds {
                match cmd {
                    LinkCmd::Zab(m) => put_frame(&mut buf, KIND_ZAB, &m.to_bytes()),
                    LinkCmd::App(p) => put_frame(&mut buf, KIND_APP, &p),
                    LinkCmd::Close => {
                        close = true;
                        break;
                    }
                }
            }
            if buf.is_empty() && !close {
                // Biased: a connection that just ended is seen as ended
                // before a new one claiming its peer is looked at.
                tokio::select! {
                    biased;
                    _ = &mut *reader => return End::Broken,
                    s = self.inbound.recv(), if self.inbound_open => self.on_inbound(s),
                    _ = self.outbox.wake.notified() => {}
                    _ = tokio::time::sleep_until(last_write + KEEPALIVE) => {
                        put_frame(&mut buf, KIND_KEEPALIVE, &[]);
                    }
                }
            }
            let mut written = 0;
            while written < buf.len() {
                tokio::select! {
                    biased;
                    _ = &mut *reader => return End::Broken,
                    n = wr.write(&buf[written..]) => match n {
                        Ok(0) | Err(_) => return End::Broken,
                        Ok(n) => written += n,
                    },
                    s = self.inbound.recv(), if self.inbound_open => self.on_inbound(s),
                    _ = self.outbox.wake.notified() => if self.outbox.is_overflowed() {
                        return End::Overflowed;
                    },
                }
            }
            if written > 0 {
                // What TLS buffered goes out now (a no-op on TCP).
                loop {
                    tokio::select! {
                        biased;
                        _ = &mut *reader => return End::Broken,
                        r = wr.flush() => match r {
                            Ok(()) => break,
                            Err(_) => return End::Broken,
                        },
                        s = self.inbound.recv(), if self.inbound_open => self.on_inbound(s),
                        _ = self.outbox.wake.notified() => if self.outbox.is_overflowed() {
                            return End::Overflowed;
                        },
                    }
                }
                last_write = Instant::now();
            }
            buf.clear();
            buf.shrink_to(WRITE_BATCH_MAX);
            if close {
                return End::ByUs;
            }
        }
    }
}

async fn read_frames(peer: ServerId, rd: impl AsyncRead + Unpin, events: mpsc::Sender<LinkEvent>) {
    let mut rd = tokio::io::BufReader::with_capacity(256 * 1024, rd);
    loop {
        let mut len = [0u8; 4];
        match tokio::time::timeout(LIVENESS, rd.read_exact(&mut len)).await {
            Ok(Ok(_)) => {}
            Ok(Err(_)) => return,
            Err(_) => {
                tracing::warn!(
                    peer,
                    "closing the quorum link: nothing received for {LIVENESS:?}"
                );
                return;
            }
        }
        let len = u32::from_be_bytes(len) as usize;
        if let Err(e) = check_frame_len(len) {
            tracing::warn!(peer, "closing the quorum link: {e}");
            return;
        }
        // The buffer grows as the bytes arrive, never ahead of them.
        let mut frame = Vec::with_capacity(len.min(64 * 1024));
        let deadline = LIVENESS + Duration::from_secs((len / FRAME_RATE_MIN) as u64);
        let mut body = (&mut rd).take(len as u64);
        match tokio::time::timeout(deadline, body.read_to_end(&mut frame)).await {
            Ok(Ok(n)) if n == len => {}
            Ok(_) => return,
            Err(_) => {
                tracing::warn!(
                    peer,
                    len,
                    "closing the quorum link: a frame arrived too slowly"
                );
                return;
            }
        }
        let ev = match decode_frame(&frame) {
            Ok(Frame::Zab(msg)) => LinkEvent::Zab { from: peer, msg },
            Ok(Frame::App(payload)) => LinkEvent::App {
                from: peer,
                payload,
            },
            Ok(Frame::Keepalive) => continue,
            Err(e) => {
                tracing::warn!(peer, "closing the quorum link: {e}");
                return;
            }
        };
        drop(frame);
        if events.send(ev).await.is_err() {
            return;
        }
    }
}

/// Shared handle type for tests and the member.
pub type SharedLinks = Arc<Links>;

#[cfg(test)]
mod tests;
