//! What the server sends: reads the socket, cuts frames, and routes
//! replies, watch events and recipe notifications.

use std::io;

use tokio::time::Instant;
use tracing::warn;
use wazoo_proto::jute::{Jute, Reader};
use wazoo_proto::{frame, xid, EventType, ReplyHeader, Response, WatcherEvent};

use super::{
    Conn, End, Pending, PendingKind, ReadBuf, RecipeNotification, Session, Terminal, READ_BUF,
};
use crate::connect_string::to_client;
use crate::error::Error;
use crate::watch::WatchKind;

impl Session {
    /// Reads what the socket has and handles every whole frame.
    pub(super) fn read(
        &mut self,
        c: &mut Conn,
        rb: &mut ReadBuf,
    ) -> std::result::Result<Option<End>, String> {
        let mut got = false;
        loop {
            if rb.end == rb.buf.len() {
                if rb.start > 0 {
                    rb.buf.copy_within(rb.start..rb.end, 0);
                    rb.end -= rb.start;
                    rb.start = 0;
                } else {
                    let n = rb.buf.len() * 2;
                    rb.buf.resize(n, 0);
                }
            }
            match c.stream.try_read(&mut rb.buf[rb.end..]) {
                Ok(0) => return Err(format!("{} closed the connection", c.host)),
                Ok(n) => {
                    got = true;
                    rb.end += n;
                    if rb.end < rb.buf.len() {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(format!("read failed: {e}")),
            }
        }
        if got {
            c.last_recv = Instant::now();
        }
        self.parse_frames(c, rb)
    }

    pub(super) fn parse_frames(
        &mut self,
        c: &mut Conn,
        rb: &mut ReadBuf,
    ) -> std::result::Result<Option<End>, String> {
        loop {
            match frame::check(&rb.buf[rb.start..rb.end], self.cfg.max_frame_len) {
                Ok(Some(n)) => {
                    let payload = &rb.buf[rb.start + 4..rb.start + n];
                    rb.start += n;
                    if let Some(end) = self.on_frame(c, payload)? {
                        return Ok(Some(end));
                    }
                }
                Ok(None) => break,
                Err(e) => return Err(format!("bad frame from the server: {e}")),
            }
        }
        if rb.start == rb.end {
            rb.start = 0;
            rb.end = 0;
            if rb.buf.len() > 4 * READ_BUF {
                rb.buf = vec![0; READ_BUF];
            }
        }
        Ok(None)
    }

    fn on_frame(
        &mut self,
        c: &mut Conn,
        payload: &[u8],
    ) -> std::result::Result<Option<End>, String> {
        let mut r = Reader::new(payload);
        let h = ReplyHeader::read(&mut r).map_err(|e| format!("bad reply header: {e}"))?;
        match h.xid {
            xid::PING => Ok(None),
            xid::AUTH => {
                let waiter = c.auth_pending.pop_front().flatten();
                if h.err == 0 {
                    if let Some(w) = waiter {
                        let _ = w.send(Ok(()));
                    }
                    Ok(None)
                } else {
                    // ZooKeeper Programmer's Guide ("ZooKeeper Sessions"):
                    // authentication failure is unrecoverable.
                    warn!(err = h.err, "authentication failed");
                    if let Some(w) = waiter {
                        let _ = w.send(Err(Error::AuthFailed));
                    }
                    Ok(Some(End::Terminal(Terminal::AuthFailed)))
                }
            }
            xid::NOTIFICATION => {
                let ev = WatcherEvent::read(&mut r).map_err(|e| format!("bad watch event: {e}"))?;
                self.on_notification(ev);
                Ok(None)
            }
            xid::RECIPE_NOTIFICATION => {
                let payload = r
                    .read_buffer()
                    .map_err(|e| format!("bad recipe notification: {e}"))?;
                let n = RecipeNotification {
                    zxid: h.zxid,
                    payload,
                };
                self.recipe_subs.retain(|tx| tx.send(n.clone()).is_ok());
                Ok(None)
            }
            _ => {
                let Some(p) = c.pending.pop_front() else {
                    return Err(format!("reply with xid {} but nothing is pending", h.xid));
                };
                if p.xid != h.xid {
                    let expected = p.xid;
                    c.pending.push_front(p);
                    return Err(format!(
                        "xid out of order: got {}, expected {expected}",
                        h.xid
                    ));
                }
                if h.zxid > self.last_zxid {
                    self.last_zxid = h.zxid;
                }
                self.on_reply(p, h.err, &mut r)
            }
        }
    }

    fn on_reply(
        &mut self,
        p: Pending,
        err: i32,
        r: &mut Reader<'_>,
    ) -> std::result::Result<Option<End>, String> {
        match p.kind {
            PendingKind::SetWatches => {
                if err != 0 {
                    warn!(err, "the server refused to re-register watches");
                }
                Ok(None)
            }
            PendingKind::Close => Ok(Some(End::Terminal(Terminal::Closed))),
            PendingKind::User {
                reply,
                watch,
                removal,
            } => {
                let result = match Error::from_code(err) {
                    Some(e) => Err(e),
                    None => match Response::read_body(p.op, r) {
                        Ok(resp) => Ok(resp),
                        Err(e) => {
                            let _ = reply.send(Err(Error::MarshallingError));
                            return Err(format!("undecodable {:?} reply: {e}", p.op));
                        }
                    },
                };
                if let Some(w) = watch {
                    // ZooKeeper's client: exists registers a data watch if
                    // the node exists, an exist watch if it does not; other
                    // reads register only on success.
                    let kind = match (&result, w.kind) {
                        (Ok(_), WatchKind::Exist) => Some(WatchKind::Data),
                        (Ok(_), k) => Some(k),
                        (Err(Error::NoNode), WatchKind::Exist) => Some(WatchKind::Exist),
                        _ => None,
                    };
                    if let Some(kind) = kind {
                        self.watches.add(kind, w.path, w.sink);
                    }
                }
                if let (Some(rm), Ok(_)) = (removal, &result) {
                    self.watches.remove(&rm.path, rm.ty, &rm.client_path);
                }
                let moved = matches!(result, Err(Error::SessionMoved));
                let _ = reply.send(result);
                if moved {
                    // ZooKeeper Programmer's Guide, "SessionMovedException":
                    // this connection is stale (the session lives on another
                    // server); the old server closes it, and the client
                    // reconnects.
                    return Ok(Some(End::Lost("session moved to another server".into())));
                }
                Ok(None)
            }
        }
    }

    fn on_notification(&mut self, ev: WatcherEvent) {
        let Some(et) = EventType::from_i32(ev.event_type) else {
            warn!(event_type = ev.event_type, "unknown watch event type");
            return;
        };
        if et == EventType::None {
            return;
        }
        let client_path = to_client(self.cfg.chroot.as_ref(), &ev.path);
        self.watches.trigger(et, &ev.path, client_path);
    }
}
