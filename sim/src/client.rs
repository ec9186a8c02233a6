//! A simulated client: speaks ZooKeeper's client protocol to one member
//! at a time (decoded requests up, reply frames down, decoded here with
//! wazoo-proto), as a ZooKeeper client library would: a session it keeps
//! across connections (reconnecting to another member with the same id
//! and password), pings, a read timeout of two thirds of the session
//! timeout, and a fresh session when told the old one expired.
//!
//! Its workload: register writes (the linearizability history), reads
//! that set watches, persistent watches, ephemerals, multis, and recipe
//! calls (a lock and a counter, with waits); now and then it moves to
//! another member, goes away for a while, closes its session or abandons
//! it.

use std::collections::BTreeMap;

use wazoo_core::watch::ConnId;
use wazoo_proto::jute::{Jute, Reader};
use wazoo_proto::{
    frame, xid, Acl, ConnectRequest, ConnectResponse, CreateRequest, ErrorCode, OpCode,
    ReplyHeader, Request, Response, WatcherEvent,
};
use wazoo_sdk::abi::{self, Notification, Reply};
use wazoo_zab::ServerId;

use crate::check::linear::{History, RegOp, RegResult};
use crate::check::watches::ConnWatches;
use crate::check::Shadow;
use crate::net::{Down, Up};
use crate::rng::Rng;

/// What a client asks the world to do.
#[derive(Debug)]
pub enum Act {
    Open { conn: ConnId, member: ServerId },
    Send { conn: ConnId, up: Up },
    Close { conn: ConnId },
}

/// What a client needs from the world for one step.
pub struct Ctx<'a> {
    pub rng: &'a mut Rng,
    pub now_ms: u64,
    /// The history's logical clock: strictly increasing across the run.
    pub seq: &'a mut u64,
    pub members: &'a [ServerId],
    pub history: &'a mut History,
    pub shadow: &'a Shadow,
    pub next_conn: &'a mut ConnId,
    pub acts: Vec<Act>,
    /// Counter values recipe calls answered: (counter, value) -> client.
    pub counter_values: &'a mut BTreeMap<(String, i64), usize>,
    pub register_keys: u64,
}

impl Ctx<'_> {
    fn tick(&mut self) -> u64 {
        *self.seq += 1;
        *self.seq
    }
}

#[derive(Clone, Debug)]
struct Session {
    id: i64,
    passwd: Vec<u8>,
    timeout_ms: i32,
}

#[derive(Debug)]
struct Conn {
    id: ConnId,
    member: ServerId,
    established: bool,
    buf: Vec<u8>,
    opened_ms: u64,
    last_recv_ms: u64,
    last_send_ms: u64,
    watches: ConnWatches,
    persistent_added: bool,
}

#[derive(Debug)]
enum Kind {
    Reg(usize),
    /// A read, with or without a data watch (exists sets one on a
    /// missing node too, getData does not). Without one it may be answered
    /// outside the pipeline (`wazoo_core::local_reads`).
    Read {
        path: String,
        exists: bool,
        watch: bool,
    },
    Children,
    Other,
    Recipe {
        module: String,
        method: String,
    },
    AddWatch {
        path: String,
        recursive: bool,
    },
    CloseSession,
}

#[derive(Debug, Default)]
pub struct ClientStats {
    pub sessions: u64,
    pub expired: u64,
    pub reconnects: u64,
    pub replies: u64,
    pub events: u64,
    pub recipe_done: u64,
    pub recipe_waits: u64,
    pub recipe_finished: u64,
}

pub struct Client {
    pub id: usize,
    session: Option<Session>,
    conn: Option<Conn>,
    last_member: Option<ServerId>,
    /// Not connected before this time (away, or backing off).
    retry_at_ms: u64,
    next_xid: i32,
    last_zxid: i64,
    pending: BTreeMap<i32, (OpCode, Kind)>,
    timeout_ms: i32,
    next_value: u64,
    ephemerals: u64,
    lock: Option<String>,
    /// Recipe results seen per (module, token): a redelivery must match.
    finished: BTreeMap<(String, String), Reply>,
    /// Sessions this client walked away from without closing: (id, when, timeout).
    pub abandoned: Vec<(i64, u64, i32)>,
    /// Sessions a member's handshake said were expired, with the time the
    /// client asked (for the world to check against the leader); taken by
    /// the world after each step.
    pub told_expired: Vec<(i64, u64)>,
    /// Once false, the client only keeps its session (connects, pings).
    pub working: bool,
    pub stats: ClientStats,
}

const MAX_FRAME: usize = wazoo_proto::DEFAULT_MAX_BUFFER;

fn code(err: i32) -> Option<ErrorCode> {
    ErrorCode::from_i32(err)
}

impl Client {
    pub fn new(id: usize, timeout_ms: i32) -> Client {
        Client {
            id,
            session: None,
            conn: None,
            last_member: None,
            retry_at_ms: 0,
            next_xid: 1,
            last_zxid: 0,
            pending: BTreeMap::new(),
            timeout_ms,
            next_value: 0,
            ephemerals: 0,
            lock: None,
            finished: BTreeMap::new(),
            abandoned: Vec::new(),
            told_expired: Vec::new(),
            working: true,
            stats: ClientStats::default(),
        }
    }

    pub fn session_id(&self) -> Option<i64> {
        self.session.as_ref().map(|s| s.id)
    }

    /// Connected, with every request answered.
    pub fn settled(&self) -> bool {
        self.conn.as_ref().is_some_and(|c| c.established) && self.pending.is_empty()
    }

    /// Requests not answered yet: (xid, opcode).
    pub fn pending(&self) -> Vec<(i32, OpCode)> {
        self.pending.iter().map(|(x, (op, _))| (*x, *op)).collect()
    }

    pub fn conn_id(&self) -> Option<ConnId> {
        self.conn.as_ref().map(|c| c.id)
    }

    fn send(&mut self, ctx: &mut Ctx<'_>, req: Request, kind: Kind) -> i32 {
        let conn = self.conn.as_mut().expect("connected");
        let x = self.next_xid;
        self.next_xid += 1;
        conn.last_send_ms = ctx.now_ms;
        self.pending.insert(x, (req.opcode(), kind));
        ctx.acts.push(Act::Send {
            conn: conn.id,
            up: Up::Request { xid: x, req },
        });
        x
    }

    /// Drops the connection (the client's side); what was pending is lost
    /// (register writes stay unknown in the history).
    fn drop_conn(&mut self, ctx: &mut Ctx<'_>, tell: bool) {
        if let Some(c) = self.conn.take() {
            self.last_member = Some(c.member);
            if tell {
                ctx.acts.push(Act::Close { conn: c.id });
            }
        }
        self.pending.clear();
    }

    /// One step of the client's own: connect, time out, ping, or work.
    pub fn poll(&mut self, ctx: &mut Ctx<'_>) {
        let now = ctx.now_ms;
        let timeout = self
            .session
            .as_ref()
            .map_or(self.timeout_ms, |s| s.timeout_ms) as u64;
        let Some(conn) = &self.conn else {
            if now >= self.retry_at_ms {
                self.connect(ctx);
            }
            return;
        };
        // ZooKeeper's client: a read timeout of 2/3 of the session timeout
        // (the connect timeout is the same here).
        if now.saturating_sub(conn.last_recv_ms.max(conn.opened_ms)) > timeout * 2 / 3 {
            self.drop_conn(ctx, true);
            self.stats.reconnects += 1;
            self.connect(ctx);
            return;
        }
        if !conn.established {
            return;
        }
        if now.saturating_sub(conn.last_send_ms) > timeout / 3 {
            self.send(ctx, Request::Ping, Kind::Other);
        }
        if self.working && self.pending.len() < 4 {
            self.work(ctx);
        }
    }

    fn connect(&mut self, ctx: &mut Ctx<'_>) {
        *ctx.next_conn += 1;
        let id = *ctx.next_conn;
        // Another member than the last one, as a client library moves on.
        let others: Vec<ServerId> = ctx
            .members
            .iter()
            .copied()
            .filter(|&m| Some(m) != self.last_member)
            .collect();
        let member = *ctx.rng.pick(&others);
        let (session_id, passwd) = match &self.session {
            Some(s) => (s.id, s.passwd.clone()),
            None => (0, vec![0; 16]),
        };
        ctx.acts.push(Act::Open { conn: id, member });
        ctx.acts.push(Act::Send {
            conn: id,
            up: Up::Connect(ConnectRequest {
                protocol_version: 0,
                last_zxid_seen: self.last_zxid,
                timeout_ms: self.timeout_ms,
                session_id,
                passwd,
                read_only: None,
            }),
        });
        self.conn = Some(Conn {
            id,
            member,
            established: false,
            buf: Vec::new(),
            opened_ms: ctx.now_ms,
            last_recv_ms: ctx.now_ms,
            last_send_ms: ctx.now_ms,
            watches: ConnWatches::default(),
            persistent_added: false,
        });
    }

    /// The session is gone (expired or closed): start over without it.
    fn lose_session(&mut self, ctx: &mut Ctx<'_>) {
        self.session = None;
        self.lock = None;
        self.drop_conn(ctx, true);
        self.retry_at_ms = ctx.now_ms + ctx.rng.range(1, 50);
    }

    /// Bytes or the end of stream from the member.
    pub fn on_down(&mut self, ctx: &mut Ctx<'_>, conn: ConnId, down: Down) -> Result<(), String> {
        if self.conn_id() != Some(conn) {
            return Ok(()); // a connection this client already left
        }
        match down {
            Down::Closed => {
                self.drop_conn(ctx, false);
                self.retry_at_ms = ctx.now_ms + ctx.rng.range(1, 100);
                Ok(())
            }
            Down::Bytes(bytes) | Down::Local(bytes) => {
                let c = self.conn.as_mut().expect("connected");
                c.buf.extend_from_slice(&bytes);
                c.last_recv_ms = ctx.now_ms;
                loop {
                    let Some(c) = self.conn.as_mut() else {
                        return Ok(());
                    };
                    let len = match frame::check(&c.buf, MAX_FRAME) {
                        Ok(Some(len)) => len,
                        Ok(None) => return Ok(()),
                        Err(e) => return Err(format!("client {}: bad frame: {e}", self.id)),
                    };
                    let payload: Vec<u8> = c.buf.drain(..len).skip(4).collect();
                    self.on_frame(ctx, &payload)?;
                }
            }
        }
    }

    fn on_frame(&mut self, ctx: &mut Ctx<'_>, payload: &[u8]) -> Result<(), String> {
        let mut r = Reader::new(payload);
        let c = self.conn.as_mut().expect("connected");
        if !c.established {
            let resp = ConnectResponse::read(&mut r)
                .map_err(|e| format!("client {}: bad connect response: {e}", self.id))?;
            if resp.timeout_ms <= 0 {
                // ZooKeeper Programmer's Guide, "ZooKeeper Sessions": the
                // session expired; the client must start a new one.
                if let Some(s) = &self.session {
                    // It may expire only now (if it was not expired yet).
                    self.abandoned.push((s.id, ctx.now_ms, s.timeout_ms));
                    self.told_expired.push((s.id, c.opened_ms));
                }
                self.stats.expired += 1;
                self.lose_session(ctx);
                return Ok(());
            }
            if let Some(s) = &self.session {
                if s.id != resp.session_id {
                    return Err(format!(
                        "client {}: reconnected with session 0x{:x}, got 0x{:x}",
                        self.id, s.id, resp.session_id
                    ));
                }
            } else {
                self.stats.sessions += 1;
            }
            self.session = Some(Session {
                id: resp.session_id,
                passwd: resp.passwd,
                timeout_ms: resp.timeout_ms,
            });
            c.established = true;
            return Ok(());
        }
        let h = ReplyHeader::read(&mut r).map_err(|e| format!("bad reply header: {e}"))?;
        let seen_before = self.last_zxid;
        if h.xid != xid::NOTIFICATION && h.zxid > self.last_zxid {
            self.last_zxid = h.zxid;
        }
        match h.xid {
            xid::NOTIFICATION => {
                let ev = WatcherEvent::read(&mut r).map_err(|e| format!("bad event: {e}"))?;
                if ev.event_type > 0 {
                    self.stats.events += 1;
                    c.watches.on_event(ctx.shadow, &ev.path, ev.event_type)?;
                }
                Ok(())
            }
            xid::RECIPE_NOTIFICATION => {
                let buf = r.read_buffer().map_err(|e| e.to_string())?;
                let n: Notification =
                    abi::decode(&buf).map_err(|e| format!("bad recipe notification: {e}"))?;
                if let Notification::Finished {
                    module,
                    token,
                    reply,
                } = n
                {
                    self.on_finished(module, token, reply)?;
                }
                Ok(())
            }
            x => {
                let Some((op, kind)) = self.pending.remove(&x) else {
                    return Ok(()); // a ping's answer
                };
                // ZooKeeper Programmer's Guide, "ZooKeeper Sessions": a
                // session's requests are answered in the order sent (but
                // pings, which wazoo answers at once: docs/COMPATIBILITY.md).
                let earlier = self
                    .pending
                    .range(..x)
                    .rfind(|(_, (o, _))| *o != OpCode::Ping)
                    .filter(|_| op != OpCode::Ping);
                if let Some((&earlier, (eop, _))) = earlier {
                    return Err(format!(
                        "client {}: the reply to xid {x} ({op:?}) came before the one to xid {earlier} ({eop:?})",
                        self.id
                    ));
                }
                // A read never shows an older state than the session saw.
                if matches!(kind, Kind::Read { .. }) && h.zxid < seen_before {
                    return Err(format!(
                        "client {}: a read of xid {x} answered at zxid 0x{:x}, after 0x{seen_before:x} was seen",
                        self.id, h.zxid
                    ));
                }
                self.stats.replies += 1;
                let body = if h.err == 0 {
                    Some(Response::read_body(op, &mut r).map_err(|e| format!("bad reply: {e}"))?)
                } else {
                    None
                };
                self.on_reply(ctx, kind, h.err, body)
            }
        }
    }

    fn on_finished(&mut self, module: String, token: String, reply: Reply) -> Result<(), String> {
        let key = (module, token);
        if let Some(before) = self.finished.get(&key) {
            if *before != reply {
                return Err(format!(
                    "recipe waits: client {} was told {key:?} ended twice, with {before:?} and {reply:?}",
                    self.id
                ));
            }
            return Ok(());
        }
        self.stats.recipe_finished += 1;
        if key.0 == "lock" {
            if let Reply::Done(path) = &reply {
                self.lock = Some(String::from_utf8_lossy(path).into_owned());
            }
        }
        self.finished.insert(key, reply);
        Ok(())
    }

    fn on_reply(
        &mut self,
        ctx: &mut Ctx<'_>,
        kind: Kind,
        err: i32,
        body: Option<Response>,
    ) -> Result<(), String> {
        if code(err) == Some(ErrorCode::SessionExpired) {
            if let Some(s) = &self.session {
                self.abandoned.push((s.id, ctx.now_ms, s.timeout_ms));
            }
            self.stats.expired += 1;
            self.lose_session(ctx);
            return Ok(());
        }
        let c = self.conn.as_mut().expect("connected");
        match kind {
            Kind::Reg(index) => {
                let result = match (code(err), &body) {
                    (_, Some(Response::Stat(stat))) => Some(RegResult::Ok {
                        version: stat.version,
                    }),
                    (_, Some(_)) => Some(RegResult::Ok { version: 0 }),
                    (Some(ErrorCode::NoNode), _) => Some(RegResult::NoNode),
                    (Some(ErrorCode::NodeExists), _) => Some(RegResult::NodeExists),
                    (Some(ErrorCode::BadVersion), _) => Some(RegResult::BadVersion),
                    _ => None, // outcome unknown
                };
                if let Some(r) = result {
                    let at = ctx.tick();
                    ctx.history.respond(index, r, at);
                }
            }
            Kind::Read {
                path,
                exists,
                watch,
            } => match (code(err), body) {
                (_, Some(Response::GetData { stat, .. } | Response::Stat(stat))) => {
                    c.watches.on_read(&path, stat.mzxid, watch)?;
                }
                (Some(ErrorCode::NoNode), _) => c.watches.on_read(&path, 0, exists && watch)?,
                _ => {}
            },
            Kind::AddWatch { path, recursive } => {
                if err == 0 {
                    c.watches.on_persistent(&path, recursive);
                }
            }
            Kind::Recipe { module, method } => {
                if let Some(Response::Recipe(bytes)) = body {
                    let reply: Reply =
                        abi::decode(&bytes).map_err(|e| format!("bad recipe reply: {e}"))?;
                    match reply {
                        Reply::Done(v) => {
                            self.stats.recipe_done += 1;
                            let v = String::from_utf8_lossy(&v).into_owned();
                            if (module.as_str(), method.as_str()) == ("counter", "incr") {
                                let value: i64 = v.parse().unwrap_or(-1);
                                crate::check::recipes::record_counter(
                                    ctx.counter_values,
                                    "c",
                                    value,
                                    self.id,
                                )?;
                            }
                            if (module.as_str(), method.as_str()) == ("lock", "acquire") {
                                self.lock = Some(v);
                            }
                        }
                        Reply::Wait { .. } => self.stats.recipe_waits += 1,
                        Reply::Error { .. } => {}
                    }
                }
            }
            Kind::CloseSession => {
                if err == 0 {
                    self.lose_session(ctx);
                }
            }
            Kind::Children | Kind::Other => {}
        }
        Ok(())
    }

    fn key(&self, ctx: &mut Ctx<'_>) -> String {
        format!("/k{}", ctx.rng.below(ctx.register_keys))
    }

    /// Picks one thing to do.
    fn work(&mut self, ctx: &mut Ctx<'_>) {
        let roll = ctx.rng.below(1000);
        match roll {
            0..=299 => self.register_write(ctx),
            300..=449 => {
                let path = self.key(ctx);
                let exists = ctx.rng.chance(500);
                let watch = roll < 400;
                let req = if exists {
                    Request::Exists {
                        path: path.clone(),
                        watch,
                    }
                } else {
                    Request::GetData {
                        path: path.clone(),
                        watch,
                    }
                };
                self.send(
                    ctx,
                    req,
                    Kind::Read {
                        path,
                        exists,
                        watch,
                    },
                );
            }
            450..=499 => {
                self.send(
                    ctx,
                    Request::GetChildren {
                        path: "/".into(),
                        watch: true,
                    },
                    Kind::Children,
                );
            }
            500..=599 => {
                self.ephemerals += 1;
                let path = format!("/e-{}-{}", self.id, self.ephemerals);
                let req = if ctx.rng.chance(700) {
                    Request::Create(CreateRequest {
                        path,
                        data: Some(vec![1]),
                        acl: Acl::open_unsafe(),
                        flags: 1,
                        ttl: None,
                    })
                } else {
                    let n = ctx.rng.range(1, self.ephemerals);
                    Request::Delete {
                        path: format!("/e-{}-{n}", self.id),
                        version: -1,
                    }
                };
                self.send(ctx, req, Kind::Other);
            }
            600..=649 => {
                self.next_value += 1;
                let tag = format!("{}-{}", self.id, self.next_value);
                let create = |p: String| {
                    // Null data, which every member keeps null (ZooKeeper
                    // Programmer's Guide, "ZooKeeper Data Model").
                    Request::Create(CreateRequest {
                        path: p,
                        data: None,
                        acl: Acl::open_unsafe(),
                        flags: 0,
                        ttl: None,
                    })
                };
                let mut ops = vec![create(format!("/ma-{tag}")), create(format!("/mb-{tag}"))];
                if ctx.rng.chance(300) {
                    // A multi that must fail as a whole.
                    ops.push(Request::Check {
                        path: "/".into(),
                        version: 1_000_000,
                    });
                }
                self.send(ctx, Request::Multi(ops), Kind::Other);
            }
            650..=749 => self.recipe(ctx),
            750..=769 => {
                let c = self.conn.as_mut().expect("connected");
                if !c.persistent_added {
                    c.persistent_added = true;
                    let (path, recursive) = if ctx.rng.chance(500) {
                        ("/".to_string(), true)
                    } else {
                        (self.key(ctx), false)
                    };
                    self.send(
                        ctx,
                        Request::AddWatch {
                            path: path.clone(),
                            mode: recursive as i32,
                        },
                        Kind::AddWatch { path, recursive },
                    );
                }
            }
            770..=789 => {
                // Move to another member, keeping the session.
                self.drop_conn(ctx, true);
                self.stats.reconnects += 1;
                self.connect(ctx);
            }
            790..=794 => {
                // Go away for a while: the session may expire meanwhile.
                let t = self
                    .session
                    .as_ref()
                    .map_or(self.timeout_ms, |s| s.timeout_ms) as u64;
                let tell = ctx.rng.chance(500);
                self.drop_conn(ctx, tell);
                self.retry_at_ms = ctx.now_ms + ctx.rng.range(t / 2, t * 2);
            }
            795..=796 => {
                self.send(ctx, Request::CloseSession, Kind::CloseSession);
            }
            797 => {
                // Crash: the session is abandoned without a close.
                if let Some(s) = self.session.take() {
                    self.abandoned.push((s.id, ctx.now_ms, s.timeout_ms));
                }
                self.lock = None;
                let tell = ctx.rng.chance(500);
                self.drop_conn(ctx, tell);
                self.retry_at_ms = ctx.now_ms + ctx.rng.range(10, 500);
            }
            _ => {}
        }
    }

    fn register_write(&mut self, ctx: &mut Ctx<'_>) {
        let path = self.key(ctx);
        self.next_value += 1;
        let value = (self.id as u64) << 32 | self.next_value;
        let version = if ctx.rng.chance(500) {
            -1
        } else {
            ctx.rng.range(0, 4) as i32
        };
        let (op, req) = match ctx.rng.below(10) {
            0..=2 => (
                RegOp::Create { value },
                Request::Create(CreateRequest {
                    path: path.clone(),
                    data: Some(value.to_be_bytes().to_vec()),
                    acl: Acl::open_unsafe(),
                    flags: 0,
                    ttl: None,
                }),
            ),
            3..=7 => (
                RegOp::Set { value, version },
                Request::SetData {
                    path: path.clone(),
                    data: Some(value.to_be_bytes().to_vec()),
                    version,
                },
            ),
            _ => (
                RegOp::Delete { version },
                Request::Delete {
                    path: path.clone(),
                    version,
                },
            ),
        };
        let at = ctx.tick();
        let index = ctx.history.invoke(&path, self.id, op, at);
        self.send(ctx, req, Kind::Reg(index));
    }

    fn recipe(&mut self, ctx: &mut Ctx<'_>) {
        let (module, method, arg) = match ctx.rng.below(4) {
            0 => ("counter", "incr", "c".to_string()),
            1 => {
                self.next_value += 1;
                let target = ctx.rng.range(1, 30);
                (
                    "counter",
                    "await",
                    format!("c|{target}|{}-{}", self.id, self.next_value),
                )
            }
            _ => match self.lock.take() {
                Some(path) => ("lock", "release", path),
                None => ("lock", "acquire", format!("l{}", ctx.rng.below(2))),
            },
        };
        self.send(
            ctx,
            Request::RecipeCall {
                module: module.into(),
                method: method.into(),
                args: arg.into_bytes(),
                guid: String::new(),
            },
            Kind::Recipe {
                module: module.into(),
                method: method.into(),
            },
        );
    }
}
