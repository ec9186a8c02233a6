//! The runner of the differential test: sends a generated sequence to two
//! systems over raw sockets and compares normalised replies, watch events
//! and the final tree.

use crate::common::read_frame;
use std::fmt::Write as _;
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use super::gen::{Gen, Step, SESSIONS};

/// Requests between two comparisons of the watch events received.
const DRAIN_EVERY: usize = 20;

/// One connection of one session, over a raw socket.
struct Conn {
    s: TcpStream,
    xid: i32,
}

/// Opens a connection: a new session (`session_id` 0) or the given one
/// re-attached; the connection, the session id and its password.
fn connect(addr: SocketAddr, session_id: i64, passwd: &[u8]) -> Option<(Conn, i64, Vec<u8>)> {
    connect_within(addr, session_id, passwd, Duration::from_secs(60))
}

/// [`connect`] whose handshake gives up after `handshake` (a retry opens
/// a new connection): a ZooKeeper 3.8 follower now and then never answers
/// a re-attach it has sent to its leader to revalidate (seen once in CI:
/// "Revalidating client", then nothing for a minute), and a new connection
/// asks again. Replies wait 60 s.
fn connect_within(
    addr: SocketAddr,
    session_id: i64,
    passwd: &[u8],
    handshake: Duration,
) -> Option<(Conn, i64, Vec<u8>)> {
    let (s, resp) =
        wazoo_testkit::raw::handshake(addr, session_id, passwd, 30_000, handshake).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(60))).ok()?;
    s.set_write_timeout(Some(Duration::from_secs(60))).ok()?;
    Some((Conn { s, xid: 0 }, resp.session_id, resp.passwd))
}

/// A jute reader that keeps null apart from empty.
struct R<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> R<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.b.get(self.pos..self.pos.checked_add(n)?)?;
        self.pos += n;
        Some(s)
    }
    fn i32(&mut self) -> Option<i32> {
        Some(i32::from_be_bytes(self.take(4)?.try_into().ok()?))
    }
    fn i64(&mut self) -> Option<i64> {
        Some(i64::from_be_bytes(self.take(8)?.try_into().ok()?))
    }
    fn bool(&mut self) -> Option<bool> {
        Some(self.take(1)?[0] != 0)
    }
    fn buf(&mut self) -> Option<Option<&'a [u8]>> {
        let n = self.i32()?;
        if n == -1 {
            return Some(None);
        }
        Some(Some(self.take(usize::try_from(n).ok()?)?))
    }
    fn string(&mut self) -> Option<String> {
        Some(match self.buf()? {
            None => "null".into(),
            Some(b) => show_bytes(b),
        })
    }
    fn strings(&mut self, sort: bool) -> Option<String> {
        let n = self.i32()?;
        if n == -1 {
            return Some("null".into());
        }
        let mut v = Vec::new();
        for _ in 0..n {
            v.push(self.string()?);
        }
        if sort {
            // Child order is unspecified (ZooKeeper's is a hash set's).
            v.sort();
        }
        Some(format!("[{}]", v.join(",")))
    }
    fn data(&mut self) -> Option<String> {
        Some(match self.buf()? {
            // Null data reads back as null, apart from empty ("[]").
            None => "null".into(),
            Some(b) if b.len() <= 16 => format!("{b:02x?}"),
            Some(b) => format!(
                "{} bytes, sum {}",
                b.len(),
                b.iter().map(|&x| x as u64).sum::<u64>()
            ),
        })
    }
    /// A Stat without zxids and times; the ephemeral owner as the index of
    /// its session in the sequence.
    fn stat(&mut self, sessions: &[i64]) -> Option<String> {
        let _czxid = self.i64()?;
        let _mzxid = self.i64()?;
        let _ctime = self.i64()?;
        let _mtime = self.i64()?;
        let version = self.i32()?;
        let cversion = self.i32()?;
        let aversion = self.i32()?;
        let owner = self.i64()?;
        let len = self.i32()?;
        let children = self.i32()?;
        let _pzxid = self.i64()?;
        let owner = if owner == 0 {
            "-".to_string()
        } else {
            match sessions.iter().position(|&s| s == owner) {
                Some(i) => format!("s{i}"),
                None => format!("unknown {owner:#x}"),
            }
        };
        Some(format!(
            "stat(v{version} cv{cversion} av{aversion} owner {owner} len {len} children {children})"
        ))
    }
    fn acls(&mut self) -> Option<String> {
        let n = self.i32()?;
        let mut v = Vec::new();
        for _ in 0..n {
            let perms = self.i32()?;
            let scheme = self.string()?;
            let id = self.string()?;
            v.push(format!("{scheme}:{id}:{perms}"));
        }
        // The ids an `auth` entry expands to come in the order of the
        // connection's identities, a hash set's order in ZooKeeper
        // (docs/COMPATIBILITY.md, "Orders of no meaning").
        v.sort();
        Some(format!("[{}]", v.join(",")))
    }
    fn rest(&self) -> &'a [u8] {
        &self.b[self.pos.min(self.b.len())..]
    }
}

/// A string or path as sent: UTF-8 shown as text, anything else (CESU-8
/// surrogates, as both servers write a supplementary character) as bytes.
fn show_bytes(b: &[u8]) -> String {
    match std::str::from_utf8(b) {
        Ok(s) if s.len() <= 80 => format!("{s:?}"),
        Ok(s) => format!(
            "{} chars {:?}..",
            s.chars().count(),
            s.chars().take(30).collect::<String>()
        ),
        Err(_) => format!("bytes{b:02x?}"),
    }
}

/// The body of a reply to `op`, normalised; None if it does not decode.
fn decode_body(op: i32, r: &mut R<'_>, sessions: &[i64]) -> Option<String> {
    Some(match op {
        1 => r.string()?,
        15 | 19 | 21 => format!("{} {}", r.string()?, r.stat(sessions)?),
        3 | 5 | 7 => r.stat(sessions)?,
        4 => format!("{} {}", r.data()?, r.stat(sessions)?),
        6 => format!("{} {}", r.acls()?, r.stat(sessions)?),
        8 => r.strings(true)?,
        12 => format!("{} {}", r.strings(true)?, r.stat(sessions)?),
        9 => r.string()?,
        14 | 22 => {
            let mut out = Vec::new();
            loop {
                let t = r.i32()?;
                let done = r.bool()?;
                let err = r.i32()?;
                if done {
                    break;
                }
                out.push(match t {
                    -1 => format!("error {}", r.i32()?),
                    1 => format!("create {}", r.string()?),
                    15 | 19 | 21 => format!("create2 {} {}", r.string()?, r.stat(sessions)?),
                    2 => "delete".into(),
                    13 => "check".into(),
                    5 => format!("setData {}", r.stat(sessions)?),
                    8 => format!("children {}", r.strings(true)?),
                    4 => format!("data {} {}", r.data()?, r.stat(sessions)?),
                    _ => format!("op {t} err {err}"),
                });
                if out.len() > 1000 {
                    return None;
                }
            }
            format!("[{}]", out.join("; "))
        }
        104 => r.i32()?.to_string(),
        103 => r.strings(true)?,
        107 => {
            let n = r.i32()?;
            let mut v = Vec::new();
            for _ in 0..n {
                v.push(format!("{}:{}", r.string()?, r.string()?));
            }
            // A hash set's order in ZooKeeper (docs/COMPATIBILITY.md,
            // "Orders of no meaning").
            v.sort();
            format!("[{}]", v.join(","))
        }
        _ => String::new(),
    })
}

/// One system under test: its members, a connection per session slot, and
/// what it has sent so far.
struct System {
    name: &'static str,
    members: Vec<SocketAddr>,
    conns: Vec<Option<Conn>>,
    /// (session id, password) of each slot's current session.
    slot: Vec<(i64, Vec<u8>)>,
    /// Every session the sequence opened, in order: ephemeral owners are
    /// shown as an index into this.
    sessions: Vec<i64>,
    /// Watch events per slot since the last comparison.
    events: Vec<Vec<String>>,
    /// Sync before every request (ensembles: sessions sit on different
    /// members).
    sync_first: bool,
    /// Set when ZooKeeper, the oracle, took longer than [`ORACLE_STALL`]
    /// to answer a request or a re-attach (see [`Outcome::OracleStalled`]).
    stalled: Option<String>,
}

/// Longer than this for a ZooKeeper reply is a stall of the oracle: the
/// other system's sessions, idle meanwhile, may expire (the raw sessions
/// send no pings), and the sequence compares nothing more.
const ORACLE_STALL: Duration = Duration::from_secs(20);

impl System {
    fn new(name: &'static str, members: &[SocketAddr]) -> System {
        System::with_slots(name, members, SESSIONS)
    }

    fn with_slots(name: &'static str, members: &[SocketAddr], slots: usize) -> System {
        let mut s = System {
            name,
            members: members.to_vec(),
            conns: (0..slots).map(|_| None).collect(),
            slot: vec![(0, Vec::new()); slots],
            sessions: Vec::new(),
            events: vec![Vec::new(); slots],
            sync_first: members.len() > 1,
            stalled: None,
        };
        for i in 0..slots {
            s.open(i);
        }
        s
    }

    fn member(&self, slot: usize) -> SocketAddr {
        self.members[slot % self.members.len()]
    }

    /// A new session in `slot` (retrying while a member is not serving).
    fn open(&mut self, slot: usize) {
        let addr = self.member(slot);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some((c, id, pw)) = connect(addr, 0, &[]) {
                self.conns[slot] = Some(c);
                self.slot[slot] = (id, pw);
                self.sessions.push(id);
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{}: no session on {addr} within 30 s",
                self.name
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The slot's connection, re-attaching its session if the server
    /// closed the previous one. `None`: ZooKeeper did not re-attach it in
    /// time (a stall of the oracle, recorded); wazoo failing to is a
    /// failure of the test.
    fn conn(&mut self, slot: usize) -> Option<&mut Conn> {
        if self.conns[slot].is_none() {
            let addr = self.member(slot);
            let (id, pw) = self.slot[slot].clone();
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                if let Some((c, got, _)) = connect_within(addr, id, &pw, Duration::from_secs(5)) {
                    assert_eq!(got, id, "{}: re-attached to another session", self.name);
                    self.conns[slot] = Some(c);
                    break;
                }
                if Instant::now() >= deadline && self.name == "zookeeper" {
                    self.stalled = Some(format!(
                        "zookeeper did not re-attach session {id:#x} on {addr} within 30 s"
                    ));
                    return None;
                }
                assert!(
                    Instant::now() < deadline,
                    "{}: cannot re-attach session {id:#x} on {addr}",
                    self.name
                );
                std::thread::sleep(Duration::from_millis(200));
            }
        }
        self.conns[slot].as_mut()
    }

    /// Sends one request and returns its normalised reply ("closed" if
    /// the connection closed instead); watch events met on the way are
    /// recorded. A ZooKeeper reply slower than [`ORACLE_STALL`] is
    /// recorded as a stall.
    fn call(&mut self, slot: usize, op: i32, body: &[u8]) -> String {
        let started = Instant::now();
        let reply = self.call_once(slot, op, body);
        if self.name == "zookeeper" && started.elapsed() > ORACLE_STALL && self.stalled.is_none() {
            self.stalled = Some(format!(
                "zookeeper took {:?} to answer opcode {op} on slot {slot} ({reply})",
                started.elapsed()
            ));
        }
        reply
    }

    fn call_once(&mut self, slot: usize, op: i32, body: &[u8]) -> String {
        if body.len() > 1_000_000 {
            // The server may close the connection on a frame this large,
            // and a close with unread bytes may discard what was in flight
            // to us: read the events already sent first (a ping).
            self.call(slot, 11, &[]);
        }
        let Some(c) = self.conn(slot) else {
            return "stalled".into();
        };
        let xid = if op == 11 {
            -2
        } else if op == 100 {
            -4
        } else {
            c.xid += 1;
            c.xid
        };
        let mut out = Vec::with_capacity(body.len() + 12);
        out.extend_from_slice(&((body.len() + 8) as i32).to_be_bytes());
        out.extend_from_slice(&xid.to_be_bytes());
        out.extend_from_slice(&op.to_be_bytes());
        out.extend_from_slice(body);
        if c.s.write_all(&out).is_err() {
            return self.closed(slot);
        }
        loop {
            let Some(p) = read_frame(&mut self.conns[slot].as_mut().unwrap().s) else {
                return self.closed(slot);
            };
            let mut r = R { b: &p, pos: 0 };
            let (Some(rx), Some(_zxid), Some(err)) = (r.i32(), r.i64(), r.i32()) else {
                return format!("short header {p:02x?}");
            };
            if rx == -1 {
                let ev = match (r.i32(), r.i32(), r.string()) {
                    (Some(t), Some(st), Some(path)) => format!("event {t} state {st} {path}"),
                    _ => format!("bad event {p:02x?}"),
                };
                self.events[slot].push(ev);
                continue;
            }
            if rx != xid {
                continue;
            }
            let mut out = format!("err {err}");
            if err == 0 || matches!(op, 14 | 22) {
                match decode_body(op, &mut r, &self.sessions) {
                    Some(b) if !b.is_empty() => {
                        out.push(' ');
                        out.push_str(&b);
                    }
                    Some(_) => {}
                    None => {
                        let _ = write!(out, " undecodable body {:02x?}", r.rest());
                        return out;
                    }
                }
            }
            if !r.rest().is_empty() {
                let _ = write!(out, " rest {:02x?}", r.rest());
            }
            return out;
        }
    }

    fn closed(&mut self, slot: usize) -> String {
        self.conns[slot] = None;
        "connection closed".into()
    }

    fn close_session(&mut self, slot: usize) -> String {
        let reply = self.call(slot, -11, &[]);
        self.conns[slot] = None;
        self.open(slot);
        self.events[slot].push("(new session)".into());
        reply
    }

    /// A sync on every slot, so that every event caused so far has
    /// arrived; then the events gathered since the last drain.
    fn drain(&mut self, root: &str) -> Vec<Vec<String>> {
        for slot in 0..SESSIONS {
            let mut b = Vec::new();
            b.extend_from_slice(&(root.len() as i32).to_be_bytes());
            b.extend_from_slice(root.as_bytes());
            self.call(slot, 9, &b);
        }
        std::mem::replace(&mut self.events, vec![Vec::new(); SESSIONS])
    }

    fn step(&mut self, step: &Step, root: &str) -> String {
        match step {
            Step::Req {
                session, op, body, ..
            } => {
                if self.sync_first {
                    let mut b = Vec::new();
                    b.extend_from_slice(&(root.len() as i32).to_be_bytes());
                    b.extend_from_slice(root.as_bytes());
                    self.call(*session, 9, &b);
                }
                self.call(*session, *op, body)
            }
            Step::Close { session } => self.close_session(*session),
        }
    }

    /// Every node under `root` (and the top level but /zookeeper), read
    /// by a super user: path, data, stat, ACL, children.
    fn tree(&mut self, root: &str) -> Vec<String> {
        let (mut c, _, _) = connect(self.members[0], 0, &[]).expect("a session for the tree walk");
        let mut xid = 0i32;
        let mut call = |op: i32, body: &[u8]| -> (i32, Vec<u8>) {
            xid += 1;
            let x = if op == 100 { -4 } else { xid };
            let mut out = Vec::new();
            out.extend_from_slice(&((body.len() + 8) as i32).to_be_bytes());
            out.extend_from_slice(&x.to_be_bytes());
            out.extend_from_slice(&op.to_be_bytes());
            out.extend_from_slice(body);
            c.s.write_all(&out).expect("send during the tree walk");
            loop {
                let p = read_frame(&mut c.s).expect("a reply during the tree walk");
                let mut r = R { b: &p, pos: 0 };
                let rx = r.i32().unwrap();
                let _ = r.i64();
                let err = r.i32().unwrap();
                if rx == x {
                    return (err, r.rest().to_vec());
                }
            }
        };
        let mut auth = Vec::new();
        auth.extend_from_slice(&0i32.to_be_bytes());
        for s in [&b"digest"[..], b"super:test"] {
            auth.extend_from_slice(&(s.len() as i32).to_be_bytes());
            auth.extend_from_slice(s);
        }
        call(100, &auth);
        let path_body = |p: &str, watch: Option<bool>| {
            let mut b = (p.len() as i32).to_be_bytes().to_vec();
            b.extend_from_slice(p.as_bytes());
            if let Some(w) = watch {
                b.push(w as u8);
            }
            b
        };
        call(9, &path_body("/", None));
        let mut out = Vec::new();
        let (_, top) = call(8, &path_body("/", Some(false)));
        let mut r = R { b: &top, pos: 0 };
        out.push(format!(
            "/ children {}",
            r.strings(true).unwrap_or_default()
        ));
        let mut todo = vec![root.to_string()];
        while let Some(p) = todo.pop() {
            let (e1, d) = call(4, &path_body(&p, Some(false)));
            let (e2, a) = call(6, &path_body(&p, None));
            let (e3, ch) = call(8, &path_body(&p, Some(false)));
            let data = decode_body(4, &mut R { b: &d, pos: 0 }, &self.sessions);
            let acl = decode_body(6, &mut R { b: &a, pos: 0 }, &self.sessions);
            let mut names = Vec::new();
            let mut r = R { b: &ch, pos: 0 };
            if e3 == 0 {
                let n = r.i32().unwrap_or(0);
                for _ in 0..n {
                    match r.buf() {
                        Some(Some(b)) => names.push(String::from_utf8_lossy(b).into_owned()),
                        _ => break,
                    }
                }
            }
            names.sort();
            out.push(format!(
                "{p:?}: data err {e1} {} acl err {e2} {} children {names:?}",
                data.unwrap_or_default(),
                acl.unwrap_or_default()
            ));
            for n in names.iter().rev() {
                todo.push(format!("{p}/{n}"));
            }
        }
        let _ = call(-11, &[]);
        out
    }
}

/// Sends `ops` generated requests of `seed` to both systems; the first
/// divergence, described, as the error.
/// Why a sequence did not compare equal.
#[derive(Debug)]
pub enum Outcome {
    /// The systems differ: what, where, and the requests before.
    Diverged(String),
    /// ZooKeeper 3.8 took more than [`ORACLE_STALL`] to answer a request or
    /// a re-attach. Seen a few times in a hundred runs of an ensemble
    /// sequence on a loaded machine, always on a session opened a moment
    /// before on the same member, and only ended by that session's
    /// expiry: a stall of the oracle, after which nothing is comparable.
    OracleStalled(String),
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Diverged(d) => f.write_str(d),
            Outcome::OracleStalled(why) => write!(f, "the oracle stalled: {why}"),
        }
    }
}

pub fn compare(
    zk: &[SocketAddr],
    wazoo: &[SocketAddr],
    seed: u64,
    ops: usize,
    verbose: bool,
) -> Result<(), Outcome> {
    let mut stall = None;
    let compared = compare_until_stall(zk, wazoo, seed, ops, verbose, &mut stall);
    match stall {
        Some(why) => Err(Outcome::OracleStalled(why)),
        None => compared.map_err(Outcome::Diverged),
    }
}

/// [`compare`]; stops with `Ok` and `stall` set when ZooKeeper stalls.
fn compare_until_stall(
    zk: &[SocketAddr],
    wazoo: &[SocketAddr],
    seed: u64,
    ops: usize,
    verbose: bool,
    stall: &mut Option<String>,
) -> Result<(), String> {
    let mut gen = Gen::new(seed);
    let steps = gen.steps(ops);
    let root = gen.root().to_string();
    let mut a = System::new("zookeeper", zk);
    let mut b = System::new("wazoo", wazoo);
    let describe = |i: usize| -> String {
        match &steps[i] {
            Step::Req { session, desc, .. } => format!("#{i} s{session}: {desc}"),
            Step::Close { session } => format!("#{i} s{session}: closeSession"),
        }
    };
    let history = |i: usize| -> String {
        (i.saturating_sub(DRAIN_EVERY)..=i)
            .map(|j| format!("  {}\n", describe(j)))
            .collect()
    };
    let mut window_had_close = false;
    for (i, step) in steps.iter().enumerate() {
        let ra = a.step(step, &root);
        if let Some(why) = a.stalled.take() {
            *stall = Some(format!("{why}, at {}", describe(i)));
            return Ok(());
        }
        let rb = b.step(step, &root);
        if verbose {
            println!("{}\n  zookeeper: {ra}\n  wazoo:     {rb}", describe(i));
        }
        if ra != rb {
            return Err(format!(
                "reply to {}\n  zookeeper: {ra}\n  wazoo:     {rb}\nrecent requests:\n{}",
                describe(i),
                history(i)
            ));
        }
        // A closed session's ephemerals go in an order of each server's
        // own: the events of a window with a closeSession are compared as
        // sets.
        window_had_close |= matches!(step, Step::Close { .. });
        if (i + 1) % DRAIN_EVERY == 0 || i + 1 == steps.len() {
            let mut ea = a.drain(&root);
            if let Some(why) = a.stalled.take() {
                *stall = Some(format!("{why}, in the sync after {}", describe(i)));
                return Ok(());
            }
            let mut eb = b.drain(&root);
            if std::mem::take(&mut window_had_close) {
                ea.iter_mut().chain(eb.iter_mut()).for_each(|e| e.sort());
            }
            for s in 0..SESSIONS {
                if ea[s] != eb[s] {
                    return Err(format!(
                        "watch events of session slot {s} up to {}\n  zookeeper: {:?}\n  wazoo:     {:?}\nrecent requests:\n{}",
                        describe(i),
                        ea[s],
                        eb[s],
                        history(i)
                    ));
                }
            }
        }
    }
    let ta = a.tree(&root);
    let tb = b.tree(&root);
    for (x, y) in ta.iter().zip(tb.iter()) {
        if x != y {
            return Err(format!("final tree\n  zookeeper: {x}\n  wazoo:     {y}"));
        }
    }
    if ta.len() != tb.len() {
        return Err(format!(
            "final tree: zookeeper has {} nodes, wazoo {}",
            ta.len(),
            tb.len()
        ));
    }
    // Leave the servers clean of this sequence's sessions.
    for slot in 0..SESSIONS {
        a.call(slot, -11, &[]);
        b.call(slot, -11, &[]);
    }
    Ok(())
}

/// One probe: its description, opcode and body, or a whole raw frame to
/// send instead.
pub type Probe = (String, i32, Vec<u8>, Option<Vec<u8>>);

/// What one request does to a fresh session on `addr`: its normalised
/// reply (or "connection closed"), then whether the connection is still
/// open (a ping answered) or closed after it. `frame`, when given, is sent
/// as it is instead of the frame built from `op` and `body`.
fn probe_one(
    name: &'static str,
    addr: SocketAddr,
    op: i32,
    body: &[u8],
    frame: Option<&[u8]>,
) -> String {
    let mut sys = System::with_slots(name, &[addr], 1);
    if let Some(c) = sys.conns[0].as_mut() {
        c.s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    }
    let reply = match frame {
        None => sys.call(0, op, body),
        Some(f) => {
            let c = sys.conns[0].as_mut().unwrap();
            if c.s.write_all(f).is_err() {
                sys.closed(0)
            } else {
                match read_frame(&mut c.s) {
                    None => sys.closed(0),
                    Some(p) => {
                        let mut r = R { b: &p, pos: 0 };
                        match (r.i32(), r.i64(), r.i32()) {
                            (Some(x), Some(_), Some(err)) => {
                                format!("xid {x} err {err} body {:02x?}", r.rest())
                            }
                            _ => format!("short header {p:02x?}"),
                        }
                    }
                }
            }
        }
    };
    if sys.conns[0].is_none() {
        // A closed connection: is its session still there to re-attach?
        let (id, pw) = sys.slot[0].clone();
        return match connect(addr, id, &pw) {
            Some((mut c, got, _)) if got == id => {
                let mut close = Vec::new();
                close.extend_from_slice(&8i32.to_be_bytes());
                close.extend_from_slice(&1i32.to_be_bytes());
                close.extend_from_slice(&(-11i32).to_be_bytes());
                let _ = c.s.write_all(&close);
                let _ = read_frame(&mut c.s);
                format!("{reply}, session kept")
            }
            _ => format!("{reply}, session gone"),
        };
    }
    // A ping answered: the connection goes on.
    let c = sys.conns[0].as_mut().unwrap();
    let mut ping = Vec::new();
    ping.extend_from_slice(&8i32.to_be_bytes());
    ping.extend_from_slice(&(-2i32).to_be_bytes());
    ping.extend_from_slice(&11i32.to_be_bytes());
    let open = c.s.write_all(&ping).is_ok()
        && std::iter::from_fn(|| read_frame(&mut c.s))
            .take(20)
            .any(|p| p.get(..4) == Some(&(-2i32).to_be_bytes()[..]));
    if open {
        sys.call(0, -11, &[]);
        format!("{reply}, then open")
    } else {
        format!("{reply}, then closed")
    }
}

/// Sends each probe (description, opcode, body, raw frame) to a fresh
/// session of each system, in order, after `setup` (requests on one
/// session of each); the probes whose outcomes differ, described.
pub fn probe(
    zk: SocketAddr,
    wazoo: SocketAddr,
    setup: &[(i32, Vec<u8>)],
    probes: &[Probe],
) -> Vec<String> {
    for (name, addr) in [("zookeeper", zk), ("wazoo", wazoo)] {
        let mut sys = System::with_slots(name, &[addr], 1);
        for (op, body) in setup {
            let r = sys.call(0, *op, body);
            assert!(r.starts_with("err 0"), "{name}: setup request {op}: {r}");
        }
        sys.call(0, -11, &[]);
    }
    let mut diffs = Vec::new();
    for (desc, op, body, frame) in probes {
        let a = probe_one("zookeeper", zk, *op, body, frame.as_deref());
        let b = probe_one("wazoo", wazoo, *op, body, frame.as_deref());
        println!("{desc}\n  zookeeper: {a}\n  wazoo:     {b}");
        if a != b {
            diffs.push(format!("{desc}\n  zookeeper: {a}\n  wazoo:     {b}"));
        }
    }
    diffs
}
