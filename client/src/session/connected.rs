//! The session on a live connection: sends what the client asks, pings,
//! re-registers watches, probes for a read-write server while read-only,
//! and writes the socket without waiting.

use std::collections::VecDeque;
use std::io;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::sync::oneshot;
use tokio::time::Instant;
use tracing::info;
use wazoo_proto::{frame, xid, AuthPacket, KeeperState, OpCode, Request, SetWatches, SetWatches2};

use super::handshake::probe_read_write;
use super::{
    terminal_error, Command, Conn, End, Established, Outgoing, PathField, Pending, PendingKind,
    Probe, ReadBuf, Session, SessionState, Terminal, BATCH, COALESCE, MAX_IN_FLIGHT, READ_BUF,
    RO_PROBE_MAX, RO_PROBE_MIN, SET_WATCHES_MAX_LENGTH, WRITE_HIGH_WATER,
};
use crate::connect_string::HostPort;
use crate::error::{Error, Result};
use crate::watch::WatchPaths;

impl Session {
    pub(super) async fn serve(&mut self, est: Established, host: HostPort) -> End {
        let timeout = Duration::from_millis(est.resp.timeout_ms as u64);
        let read_only = est.resp.read_only == Some(true);
        self.negotiated = Some(timeout);
        self.session_id = est.resp.session_id;
        self.passwd = est.resp.passwd.clone();
        if !read_only {
            self.seen_rw = true;
        }
        {
            let mut info = self.shared.info.lock().unwrap_or_else(|e| e.into_inner());
            info.session_id = self.session_id;
            info.password = self.passwd.clone();
            info.timeout = timeout;
            info.server = Some(host.clone());
        }
        info!(
            server = %host,
            session = format_args!("0x{:x}", self.session_id),
            timeout_ms = est.resp.timeout_ms,
            read_only,
            "session established"
        );
        // ZooKeeper's client: read timeout 2/3 of the session timeout, a
        // ping when nothing was sent for half of that (a third of the
        // timeout), so a dead connection is noticed and replaced well
        // within the session timeout.
        let read_timeout = timeout * 2 / 3;
        let now = Instant::now();
        let mut c = Conn {
            stream: est.stream,
            host,
            wbuf: Vec::with_capacity(64 * 1024),
            wpos: 0,
            pending: VecDeque::new(),
            auth_pending: VecDeque::new(),
            last_send: now,
            last_recv: now,
            read_timeout,
            ping_interval: read_timeout / 2,
            read_only,
        };
        let mut rb = ReadBuf {
            buf: vec![0; READ_BUF.max(est.leftover.len())],
            start: 0,
            end: est.leftover.len(),
        };
        rb.buf[..est.leftover.len()].copy_from_slice(&est.leftover);

        // Credentials first, then the watches, then what was queued.
        let mut waiters: Vec<Option<oneshot::Sender<Result<()>>>> =
            (0..self.auth.len()).map(|_| None).collect();
        for (i, w) in self.auth_waiters.drain(..) {
            if let Some(slot) = waiters.get_mut(i) {
                if let Some(old) = slot.replace(w) {
                    let _ = old.send(Ok(()));
                }
            }
        }
        for ((scheme, auth), waiter) in self.auth.iter().zip(waiters) {
            write_auth(&mut c.wbuf, scheme, auth);
            c.auth_pending.push_back(waiter);
        }
        self.send_set_watches(&mut c);
        while let Some(o) = self.queued.pop_front() {
            self.send(&mut c, o);
        }

        let state = if read_only {
            SessionState::ConnectedReadOnly
        } else {
            SessionState::Connected
        };
        self.set_state(state, true);
        self.watches.state_change(
            state.keeper_state().unwrap_or(KeeperState::SyncConnected),
            false,
        );

        let end = self.serve_loop(&mut c, &mut rb).await;

        // ZooKeeper Programmer's Guide ("ZooKeeper Sessions"): pending
        // operations fail with ConnectionLoss when the connection drops (with
        // the terminal error if the client is dead).
        let err = match &end {
            End::Lost(_) => Error::ConnectionLoss,
            End::Terminal(t) => terminal_error(*t),
        };
        for p in c.pending.drain(..) {
            if let PendingKind::User { reply, .. } = p.kind {
                let _ = reply.send(Err(err.clone()));
            }
        }
        for w in c.auth_pending.drain(..).flatten() {
            let _ = w.send(Err(err.clone()));
        }
        let _ = c.stream.shutdown().await;
        match end {
            End::Lost(_) if self.closing => End::Terminal(Terminal::Closed),
            e => e,
        }
    }

    async fn serve_loop(&mut self, c: &mut Conn, rb: &mut ReadBuf) -> End {
        let mut probe: Option<Probe> = None;
        let mut probe_wait = RO_PROBE_MIN;
        let mut probe_at = Instant::now() + probe_wait;
        let mut probe_next = 0usize;
        let can_probe = c.read_only && self.hosts.len() > 1;

        let timer = tokio::time::sleep_until(next_deadline(c, can_probe.then_some(probe_at)));
        tokio::pin!(timer);

        // Frames that arrived with the handshake.
        match self.parse_frames(c, rb) {
            Ok(Some(end)) => return end,
            Ok(None) => {}
            Err(e) => return End::Lost(e),
        }
        loop {
            if let Err(e) = flush(c) {
                return End::Lost(format!("write failed: {e}"));
            }
            let accepting = !self.closing
                && c.wbuf.len() - c.wpos < WRITE_HIGH_WATER
                && c.pending.len() < MAX_IN_FLIGHT;
            let want_write = c.wpos < c.wbuf.len();
            tokio::select! {
                biased;
                r = c.stream.readable() => {
                    if let Err(e) = r {
                        return End::Lost(format!("read failed: {e}"));
                    }
                    match self.read(c, rb) {
                        Ok(None) => {}
                        Ok(Some(end)) => return end,
                        Err(e) => return End::Lost(e),
                    }
                }
                r = c.stream.writable(), if want_write => {
                    if let Err(e) = r {
                        return End::Lost(format!("write failed: {e}"));
                    }
                }
                cmd = self.rx.recv(), if accepting => {
                    let mut cmd = cmd;
                    let mut n = 0;
                    let mut yielded = false;
                    loop {
                        match cmd {
                            None => {
                                // Every handle was dropped: close the session.
                                self.begin_close(c);
                                break;
                            }
                            Some(cmd) => {
                                if let Some(end) = self.command_connected(c, cmd) {
                                    return end;
                                }
                            }
                        }
                        n += 1;
                        if n >= BATCH || self.closing || c.wbuf.len() - c.wpos >= WRITE_HIGH_WATER {
                            break;
                        }
                        cmd = match self.rx.try_recv() {
                            Ok(x) => Some(x),
                            Err(_) if !yielded && c.wbuf.len() - c.wpos < COALESCE => {
                                // Let the callers that are running queue
                                // more before this batch is written: one
                                // write for many requests.
                                yielded = true;
                                tokio::task::yield_now().await;
                                match self.rx.try_recv() {
                                    Ok(x) => Some(x),
                                    Err(_) => break,
                                }
                            }
                            Err(_) => break,
                        };
                    }
                }
                found = poll_probe(&mut probe), if probe.is_some() => {
                    probe = None;
                    if let Some(rw) = found {
                        info!(server = %rw, "found a read-write server; moving to it");
                        self.rw_server = Some(rw);
                        return End::Lost("leaving the read-only server".into());
                    }
                    probe_wait = (probe_wait * 2).min(RO_PROBE_MAX);
                    probe_at = Instant::now() + probe_wait;
                    timer.as_mut().reset(next_deadline(c, Some(probe_at)));
                }
                () = &mut timer => {
                    let now = Instant::now();
                    if now.duration_since(c.last_recv) >= c.read_timeout {
                        return End::Lost(format!(
                            "no answer from {} for {} ms",
                            c.host,
                            now.duration_since(c.last_recv).as_millis()
                        ));
                    }
                    if now.duration_since(c.last_send) >= c.ping_interval {
                        frame::write_request(&mut c.wbuf, xid::PING, &Request::Ping);
                        // Counts as sent: the deadline moves on.
                        c.last_send = now;
                    }
                    if can_probe && probe.is_none() && now >= probe_at {
                        let others: Vec<HostPort> = self
                            .hosts
                            .servers()
                            .iter()
                            .filter(|h| **h != c.host)
                            .cloned()
                            .collect();
                        if !others.is_empty() {
                            let h = others[probe_next % others.len()].clone();
                            probe_next += 1;
                            probe = Some(Box::pin(probe_read_write(h, self.connect_timeout())));
                        }
                        probe_at = now + RO_PROBE_MAX;
                    }
                    let probe_deadline = (can_probe && probe.is_none()).then_some(probe_at);
                    timer.as_mut().reset(next_deadline(c, probe_deadline));
                }
            }
        }
    }

    fn command_connected(&mut self, c: &mut Conn, cmd: Command) -> Option<End> {
        match cmd {
            Command::Request(o) => {
                if let Some(o) = self.precheck(o) {
                    self.send(c, o);
                }
            }
            Command::Auth {
                scheme,
                auth,
                reply,
            } => {
                self.add_auth_entry(scheme.clone(), auth.clone());
                write_auth(&mut c.wbuf, &scheme, &auth);
                c.auth_pending.push_back(Some(reply));
            }
            Command::UpdateServers { hosts, reply } => {
                let moved = self.hosts.update(hosts, Some(&c.host), &mut self.rng);
                let _ = reply.send(Ok(moved));
                if moved {
                    return Some(End::Lost(
                        "server list updated: rebalancing to another server".into(),
                    ));
                }
            }
            Command::RemoveWatchesLocal { removal, reply } => self.remove_local(removal, reply),
            Command::SubscribeRecipe(tx) => self.recipe_subs.push(tx),
            Command::Close { reply } => {
                self.close_replies.push(reply);
                self.begin_close(c);
            }
        }
        None
    }

    fn begin_close(&mut self, c: &mut Conn) {
        if self.closing {
            return;
        }
        self.closing = true;
        let xid = self.next_xid();
        frame::write_request(&mut c.wbuf, xid, &Request::CloseSession);
        c.pending.push_back(Pending {
            xid,
            op: OpCode::CloseSession,
            kind: PendingKind::Close,
        });
    }

    fn send(&mut self, c: &mut Conn, o: Outgoing) {
        let xid = self.next_xid();
        frame::write_request(&mut c.wbuf, xid, &o.req);
        c.pending.push_back(Pending {
            xid,
            op: o.req.opcode(),
            kind: PendingKind::User {
                reply: o.reply,
                watch: o.watch,
                removal: o.removal,
            },
        });
    }

    /// Re-registers every watch the application still holds, relative to the
    /// last zxid seen, so that the server fires at once those whose node
    /// changed while the client was away (ZooKeeper Programmer's Guide,
    /// "ZooKeeper Watches": nothing is missed).
    fn send_set_watches(&mut self, c: &mut Conn) {
        let paths = self.watches.paths();
        if paths.is_empty() {
            return;
        }
        let with_persistent = !paths.persistent.is_empty() || !paths.recursive.is_empty();
        let mut batch = WatchPaths::default();
        let mut len = 0usize;
        let lists: [(PathField, Vec<String>); 5] = [
            (|b| &mut b.data, paths.data),
            (|b| &mut b.exist, paths.exist),
            (|b| &mut b.child, paths.child),
            (|b| &mut b.persistent, paths.persistent),
            (|b| &mut b.recursive, paths.recursive),
        ];
        for (field, list) in lists {
            for p in list {
                if len + p.len() > SET_WATCHES_MAX_LENGTH && !batch.is_empty() {
                    let full = std::mem::take(&mut batch);
                    self.write_set_watches(c, full, with_persistent);
                    len = 0;
                }
                len += p.len();
                field(&mut batch).push(p);
            }
        }
        if !batch.is_empty() {
            self.write_set_watches(c, batch, with_persistent);
        }
    }

    fn write_set_watches(&mut self, c: &mut Conn, b: WatchPaths, with_persistent: bool) {
        let req = if with_persistent {
            Request::SetWatches2(SetWatches2 {
                relative_zxid: self.last_zxid,
                data_watches: b.data,
                exist_watches: b.exist,
                child_watches: b.child,
                persistent_watches: b.persistent,
                persistent_recursive_watches: b.recursive,
            })
        } else {
            Request::SetWatches(SetWatches {
                relative_zxid: self.last_zxid,
                data_watches: b.data,
                exist_watches: b.exist,
                child_watches: b.child,
            })
        };
        frame::write_request(&mut c.wbuf, xid::SET_WATCHES, &req);
        c.pending.push_back(Pending {
            xid: xid::SET_WATCHES,
            op: req.opcode(),
            kind: PendingKind::SetWatches,
        });
    }
}

fn write_auth(out: &mut Vec<u8>, scheme: &str, auth: &[u8]) {
    frame::write_request(
        out,
        xid::AUTH,
        &Request::Auth(AuthPacket {
            auth_type: 0,
            scheme: scheme.to_string(),
            auth: auth.to_vec(),
        }),
    );
}

/// Writes what the socket takes now; never waits.
fn flush(c: &mut Conn) -> io::Result<()> {
    let mut wrote = false;
    while c.wpos < c.wbuf.len() {
        match c.stream.try_write(&c.wbuf[c.wpos..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                c.wpos += n;
                wrote = true;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    if wrote {
        c.last_send = Instant::now();
    }
    if c.wpos == c.wbuf.len() {
        c.wbuf.clear();
        c.wpos = 0;
        if c.wbuf.capacity() > 2 * WRITE_HIGH_WATER {
            c.wbuf = Vec::with_capacity(64 * 1024);
        }
    }
    Ok(())
}

fn next_deadline(c: &Conn, probe_at: Option<Instant>) -> Instant {
    let d = (c.last_send + c.ping_interval).min(c.last_recv + c.read_timeout);
    match probe_at {
        Some(p) => d.min(p),
        None => d,
    }
}

async fn poll_probe(p: &mut Option<Probe>) -> Option<HostPort> {
    match p.as_mut() {
        Some(f) => f.await,
        None => std::future::pending().await,
    }
}
