//! A participant of a ZooKeeper ensemble (phase 2): the election port's
//! connections, kept as ZooKeeper's `QuorumCnxManager` keeps them, and the
//! link to the leader the core's election decides on.
//!
//! - One connection per other voter, and it survives only if the larger
//!   id opened it: a connection from a smaller id is closed and dialled
//!   back; a dial to a larger id makes it dial back.
//! - Each connection carries the core's notifications for that member
//!   (the last one is sent again on a new connection, as ZooKeeper's
//!   `lastMessageSent`), and every notification that arrives goes to the
//!   core (`ZkInput::Vote`).

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use super::{accept_election, read_votes, Layout, Link, Queued, ZkCmd};
use crate::core::member::ZkInput;
use crate::member::Event;
use wazoo_zkquorum::{election::encode_frame, InitialMessage, Notification};

/// How long a dial to another member's election port may take.
const DIAL_WAIT: Duration = Duration::from_secs(5);
/// Frames queued for one connection at most; more are dropped (the core
/// sends its vote again).
const FRAMES_QUEUED_MAX: usize = 64;
/// How long the connection handshake of an accepted connection may take.
const HANDSHAKE_WAIT: Duration = Duration::from_secs(5);

/// The election port's connections.
#[derive(Clone)]
pub(super) struct VoteHub {
    inner: Arc<Mutex<Hub>>,
    events: mpsc::Sender<Event>,
}

struct Hub {
    my_id: u64,
    my_election: SocketAddr,
    /// Voters' election addresses.
    addrs: BTreeMap<u64, SocketAddr>,
    /// The live connection to each member: its frames queue, and a number
    /// that tells it from a later one.
    conns: BTreeMap<u64, (mpsc::Sender<Vec<u8>>, u64)>,
    next_conn: u64,
    /// The last frame for each member.
    last: BTreeMap<u64, Vec<u8>>,
    dialing: BTreeSet<u64>,
}

impl VoteHub {
    fn new(layout: &Layout, events: mpsc::Sender<Event>) -> VoteHub {
        let hub = VoteHub {
            inner: Arc::new(Mutex::new(Hub {
                my_id: layout.my_id,
                my_election: layout.my_election,
                addrs: BTreeMap::new(),
                conns: BTreeMap::new(),
                next_conn: 0,
                last: BTreeMap::new(),
                dialing: BTreeSet::new(),
            })),
            events,
        };
        hub.set_layout(layout);
        hub
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Hub> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The voters' addresses from a new membership.
    pub(super) fn set_layout(&self, layout: &Layout) {
        let mut h = self.lock();
        h.addrs = layout
            .voters
            .iter()
            .map(|(id, (election, _))| (*id, *election))
            .collect();
    }

    /// Sends `n` to member `to`, on its connection, or on one dialled now.
    pub(super) fn send(&self, to: u64, n: &Notification) {
        let frame = encode_frame(&n.encode());
        let mut h = self.lock();
        if to == h.my_id {
            return;
        }
        h.last.insert(to, frame.clone());
        if let Some((tx, _)) = h.conns.get(&to) {
            match tx.try_send(frame) {
                Ok(()) => return,
                Err(mpsc::error::TrySendError::Full(_)) => return,
                Err(mpsc::error::TrySendError::Closed(_)) => {
                    h.conns.remove(&to);
                }
            }
        }
        drop(h);
        self.dial(to);
    }

    /// Dials member `to`'s election port (at most one dial at a time).
    fn dial(&self, to: u64) {
        let (addr, hello) = {
            let mut h = self.lock();
            let Some(&addr) = h.addrs.get(&to) else {
                return;
            };
            if !h.dialing.insert(to) {
                return;
            }
            (
                addr,
                InitialMessage::new(h.my_id as i64, h.my_election.to_string()),
            )
        };
        let hub = self.clone();
        tokio::spawn(async move {
            let stream = tokio::time::timeout(DIAL_WAIT, TcpStream::connect(addr)).await;
            hub.lock().dialing.remove(&to);
            let Ok(Ok(mut s)) = stream else {
                tracing::debug!(to, %addr, "cannot reach the member's election port");
                return;
            };
            let _ = s.set_nodelay(true);
            if s.write_all(&hello.encode()).await.is_err() {
                return;
            }
            // A larger id closes this one and dials back.
            hub.serve(to, s, Vec::new()).await;
        });
    }

    /// Carries frames both ways on the connection with member `sid` until
    /// it ends or a later one replaces it.
    async fn serve(&self, sid: u64, s: TcpStream, read_ahead: Vec<u8>) {
        let (tx, mut rx) = mpsc::channel::<Vec<u8>>(FRAMES_QUEUED_MAX);
        let seq = {
            let mut h = self.lock();
            h.next_conn += 1;
            let seq = h.next_conn;
            if let Some(f) = h.last.get(&sid) {
                let _ = tx.try_send(f.clone());
            }
            h.conns.insert(sid, (tx, seq));
            seq
        };
        let (rd, mut wr) = s.into_split();
        let events = self.events.clone();
        let reader = read_votes(rd, read_ahead, sid, None, move |mut n| {
            // The election reads no config (a vote may carry up to 512 KiB
            // of it): votes queued for the core stay small, however fast a
            // member sends them.
            n.config = None;
            let events = events.clone();
            async move {
                events
                    .send(Event::Zk(ZkInput::Vote { from: sid, n }))
                    .await
                    .is_ok()
            }
        });
        let writer = async move {
            while let Some(f) = rx.recv().await {
                if wr.write_all(&f).await.is_err() {
                    return;
                }
            }
        };
        tokio::select! {
            _ = reader => {}
            _ = writer => {}
        }
        let mut h = self.lock();
        if h.conns.get(&sid).is_some_and(|(_, s)| *s == seq) {
            h.conns.remove(&sid);
        }
    }

    /// Connections to this member's election port.
    async fn accept(self, listener: TcpListener) {
        let events = self.events.clone();
        accept_election(
            listener,
            HANDSHAKE_WAIT,
            move || events.is_closed(),
            move |s, sid, rest| {
                let hub = self.clone();
                async move {
                    let my_id = hub.lock().my_id;
                    if sid == my_id {
                        return;
                    }
                    if sid < my_id {
                        // ZooKeeper's rule: the larger id keeps the
                        // connection it opened; this one is closed and
                        // dialled back.
                        drop(s);
                        hub.dial(sid);
                        return;
                    }
                    let _ = s.set_nodelay(true);
                    // Frames that came with the handshake are read first:
                    // a voter sends its vote right after it.
                    hub.serve(sid, s, rest).await;
                }
            },
        )
        .await
    }
}

/// The participant's loop: votes to and from the election port, and the
/// link to each leader the core elects.
pub(super) async fn participant_loop(
    mut layout: Layout,
    election: TcpListener,
    mut cmds: mpsc::UnboundedReceiver<ZkCmd>,
    queue: Arc<Queued>,
    events: mpsc::Sender<Event>,
) {
    let hub = VoteHub::new(&layout, events.clone());
    tokio::spawn(hub.clone().accept(election));
    while let Some(cmd) = cmds.recv().await {
        match cmd {
            ZkCmd::Vote { to, n } => hub.send(to, &n),
            ZkCmd::Membership(text) => {
                layout.adopt(&text);
                hub.set_layout(&layout);
            }
            // Stale: for a link that ended.
            ZkCmd::Send(b) => {
                queue
                    .bytes
                    .fetch_sub(b.len(), std::sync::atomic::Ordering::AcqRel);
            }
            ZkCmd::Close => {}
            ZkCmd::Follow { leader } => {
                queue
                    .overflowed
                    .store(false, std::sync::atomic::Ordering::Release);
                let Some(&(_, quorum_addr)) = layout.voters.get(&leader) else {
                    tracing::warn!(leader, "the elected leader is not a voter here");
                    if events.send(Event::Zk(ZkInput::Down)).await.is_err() {
                        return;
                    }
                    continue;
                };
                let link = Link {
                    cmds: &mut cmds,
                    queue: &queue,
                    events: &events,
                    layout: &mut layout,
                    hub: Some(&hub),
                };
                if link.run(leader, quorum_addr, DIAL_WAIT).await.is_err() {
                    return;
                }
                // The core looks for a leader again.
                if events.send(Event::Zk(ZkInput::Down)).await.is_err() {
                    return;
                }
            }
        }
    }
}
