//! A test harness for recipes (native targets only): `cargo test` runs a
//! recipe's own Rust code against a simulated ZooKeeper tree, with no
//! server and no wasm. Calls and callbacks run as the host runs them: a
//! step's writes apply all or none (an `Err` or an error reply discards
//! them), a step that answers `Done` keeps no watch, one that answers
//! `Wait { token }` must have registered a watch with that token, and a
//! fired watch runs the recipe's `on_watch` as the waiting caller, whose
//! `Done` or error ends the wait with a `Finished` the test can read.
//! Client writes (create, set, delete, a session's end with its ephemerals)
//! fire watches too.
//!
//! Time: a recipe has no clock import; it learns the time by writing a node
//! and reading the write's `mtime`, which the leader stamps with its clock
//! (docs/RECIPES.md, "Time in a recipe"). The harness stamps every write's
//! `ctime`/`mtime` with its own clock, which starts at 0 and moves only
//! when the test moves it: [`Harness::set_now_ms`], [`Harness::advance_ms`].
//!
//! ```ignore
//! #[cfg(test)]
//! mod tests {
//!     use wazoo_sdk::testing::{done, Harness};
//!
//!     #[test]
//!     fn the_second_acquirer_waits_for_the_first() {
//!         let mut h = Harness::new(wazoo_sdk::this_recipe!());
//!         let (a, b) = (h.session(), h.session());
//!         h.create("/locks", b"");
//!         let r = h.call(a, "acquire", &Args { path: "/locks/x".into() });
//!         assert!(done::<bool>(&r));
//!         assert!(h.call(b, "acquire", &Args { path: "/locks/x".into() }).is_wait());
//!         h.close_session(a); // its lock node goes, b's wait is called back
//!         assert_eq!(h.finished(b).len(), 1);
//!     }
//! }
//! ```
//!
//! What it does not simulate: ACLs (every step may do anything inside its
//! prefixes), sessions expiring by themselves, the limits on fuel, time
//! and memory (those are the runtime's: `wazoo recipe run` uses them), and
//! more than one member.

use std::cell::RefCell;
use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::abi::{
    self, AuthId, CallerInfo, CreateMode, NodeStat, OpOk, OpResult, Reply, TreeOp, WatchEvent,
};
use crate::{code, Ctx, Fired, Result};

/// What the `recipe!` macro declares, for the harness (see
/// [`this_recipe!`](crate::this_recipe)).
#[derive(Clone, Copy)]
pub struct Recipe {
    pub name: &'static str,
    pub prefixes: &'static [&'static str],
    pub methods: &'static [&'static str],
    #[doc(hidden)]
    pub call: fn(&mut Ctx, &str, &[u8]) -> Result<Reply>,
    #[doc(hidden)]
    pub on_watch: Option<fn(&mut Ctx, Fired) -> Result<Reply>>,
}

/// A simulated node.
#[derive(Debug, Clone)]
struct Node {
    data: Vec<u8>,
    stat: NodeStat,
}

/// A watch a step registered with a token.
#[derive(Debug, Clone)]
struct Wait {
    session: i64,
    token: String,
    path: String,
    child: bool,
    guid: String,
}

/// What a step is doing, reachable from the SDK's host calls.
struct Step {
    nodes: BTreeMap<String, Node>,
    zxid: i64,
    /// The harness's clock: the ctime and mtime of this step's writes.
    now_ms: i64,
    session: i64,
    guid: String,
    prefixes: &'static [&'static str],
    waits: Vec<Wait>,
    notes: Vec<(i64, Vec<u8>)>,
    events: Vec<(String, WatchEvent)>,
    /// A path outside the prefixes: the whole step fails.
    outside: Option<String>,
}

thread_local! {
    static STEP: RefCell<Option<Step>> = const { RefCell::new(None) };
}

/// The `tree` host call, natively: answered by the running step's tree.
pub(crate) fn tree(req: &[u8]) -> Vec<u8> {
    let ops: Vec<TreeOp> = abi::decode(req).expect("the SDK encodes tree ops");
    let results: Vec<OpResult> = STEP.with(|s| {
        let mut s = s.borrow_mut();
        let step = s.as_mut().expect(NO_STEP);
        ops.iter().map(|op| step.op(op)).collect()
    });
    abi::encode(&results).expect("encode results")
}

/// The `notify` host call, natively.
pub(crate) fn notify(session: i64, payload: &[u8]) -> i32 {
    STEP.with(|s| {
        let mut s = s.borrow_mut();
        let step = s.as_mut().expect(NO_STEP);
        step.notes.push((session, payload.to_vec()));
        0
    })
}

/// Whether a step of the harness is running on this thread.
pub(crate) fn in_step() -> bool {
    STEP.with(|s| s.borrow().is_some())
}

const NO_STEP: &str =
    "wazoo-sdk: host calls run only inside the wazoo runtime, or in a testing::Harness step";

fn within(path: &str, prefixes: &[&str]) -> bool {
    prefixes.iter().any(|p| {
        *p == "/" || path == *p || path.strip_prefix(p).is_some_and(|r| r.starts_with('/'))
    })
}

fn parent_of(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

fn valid_path(path: &str) -> bool {
    path.starts_with('/')
        && (path == "/" || (!path.ends_with('/') && !path.contains("//")))
        && !path.contains('\0')
}

impl Step {
    fn op(&mut self, op: &TreeOp) -> OpResult {
        let path = op.path();
        if !valid_path(path) {
            return Err(code::BAD_ARGUMENTS);
        }
        if !within(path, self.prefixes) {
            self.outside.get_or_insert_with(|| path.to_string());
            return Err(code::NO_AUTH);
        }
        match op {
            TreeOp::Get { watch, .. } => {
                let r = self.node(path).map(|n| OpOk::Data {
                    data: n.data.clone(),
                    stat: n.stat,
                });
                if r.is_ok() {
                    self.watch(path, watch.as_deref(), false);
                }
                r
            }
            TreeOp::Exists { watch, .. } => {
                let stat = self.nodes.get(path).map(|n| n.stat);
                self.watch(path, watch.as_deref(), false);
                Ok(OpOk::Exists { stat })
            }
            TreeOp::Children { watch, .. } => {
                self.node(path)?;
                let children = children_of(&self.nodes, path);
                self.watch(path, watch.as_deref(), true);
                Ok(OpOk::Children { children })
            }
            TreeOp::Create { data, mode, .. } => {
                let owner = match mode {
                    CreateMode::Ephemeral | CreateMode::EphemeralSequential => self.session,
                    _ => 0,
                };
                let (z, now) = (&mut self.zxid, self.now_ms);
                create(&mut self.nodes, z, now, path, data, *mode, owner).map(|(p, events)| {
                    self.events.extend(events);
                    OpOk::Created { path: p }
                })
            }
            TreeOp::Set { data, version, .. } => {
                let (z, now) = (&mut self.zxid, self.now_ms);
                set(&mut self.nodes, z, now, path, data, *version).map(|(stat, e)| {
                    self.events.extend(e);
                    OpOk::Stat { stat }
                })
            }
            TreeOp::Delete { version, .. } => {
                delete(&mut self.nodes, &mut self.zxid, path, *version).map(|e| {
                    self.events.extend(e);
                    OpOk::Done
                })
            }
            TreeOp::Check { version, .. } => {
                let n = self.node(path)?;
                if *version != -1 && n.stat.version != *version {
                    return Err(code::BAD_VERSION);
                }
                Ok(OpOk::Done)
            }
        }
    }

    fn node(&self, path: &str) -> std::result::Result<&Node, i32> {
        self.nodes.get(path).ok_or(code::NO_NODE)
    }

    fn watch(&mut self, path: &str, token: Option<&str>, child: bool) {
        if let Some(token) = token {
            self.waits.retain(|w| w.token != token);
            self.waits.push(Wait {
                session: self.session,
                token: token.to_string(),
                path: path.to_string(),
                child,
                guid: self.guid.clone(),
            });
        }
    }
}

fn children_of(nodes: &BTreeMap<String, Node>, path: &str) -> Vec<String> {
    let prefix = if path == "/" {
        "/".to_string()
    } else {
        format!("{path}/")
    };
    nodes
        .range(prefix.clone()..)
        .take_while(|(p, _)| p.starts_with(&prefix))
        .filter(|(p, _)| !p[prefix.len()..].contains('/') && p.len() > prefix.len())
        .map(|(p, _)| p[prefix.len()..].to_string())
        .collect()
}

type Events = Vec<(String, WatchEvent)>;

fn create(
    nodes: &mut BTreeMap<String, Node>,
    zxid: &mut i64,
    now_ms: i64,
    path: &str,
    data: &[u8],
    mode: CreateMode,
    owner: i64,
) -> std::result::Result<(String, Events), i32> {
    if path == "/" {
        return Err(code::NODE_EXISTS);
    }
    let parent = parent_of(path).to_string();
    let p = nodes.get(&parent).ok_or(code::NO_NODE)?;
    if p.stat.ephemeral_owner != 0 {
        return Err(code::NO_CHILDREN_FOR_EPHEMERALS);
    }
    let path = if mode.is_sequential() {
        format!("{path}{:010}", p.stat.cversion)
    } else {
        path.to_string()
    };
    if nodes.contains_key(&path) {
        return Err(code::NODE_EXISTS);
    }
    *zxid += 1;
    let z = *zxid;
    let p = nodes.get_mut(&parent).expect("checked");
    p.stat.cversion += 1;
    p.stat.num_children += 1;
    p.stat.pzxid = z;
    nodes.insert(
        path.clone(),
        Node {
            data: data.to_vec(),
            stat: NodeStat {
                czxid: z,
                mzxid: z,
                ctime: now_ms,
                mtime: now_ms,
                ephemeral_owner: owner,
                data_length: data.len() as i32,
                pzxid: z,
                ..NodeStat::default()
            },
        },
    );
    let events = vec![
        (path.clone(), WatchEvent::Created),
        (parent, WatchEvent::ChildrenChanged),
    ];
    Ok((path, events))
}

fn set(
    nodes: &mut BTreeMap<String, Node>,
    zxid: &mut i64,
    now_ms: i64,
    path: &str,
    data: &[u8],
    version: i32,
) -> std::result::Result<(NodeStat, Events), i32> {
    let n = nodes.get_mut(path).ok_or(code::NO_NODE)?;
    if version != -1 && n.stat.version != version {
        return Err(code::BAD_VERSION);
    }
    *zxid += 1;
    n.data = data.to_vec();
    n.stat.version += 1;
    n.stat.mzxid = *zxid;
    n.stat.mtime = now_ms;
    n.stat.data_length = data.len() as i32;
    Ok((n.stat, vec![(path.to_string(), WatchEvent::DataChanged)]))
}

fn delete(
    nodes: &mut BTreeMap<String, Node>,
    zxid: &mut i64,
    path: &str,
    version: i32,
) -> std::result::Result<Events, i32> {
    if path == "/" {
        return Err(code::BAD_ARGUMENTS);
    }
    let n = nodes.get(path).ok_or(code::NO_NODE)?;
    if version != -1 && n.stat.version != version {
        return Err(code::BAD_VERSION);
    }
    if n.stat.num_children > 0 {
        return Err(code::NOT_EMPTY);
    }
    nodes.remove(path);
    *zxid += 1;
    let parent = parent_of(path).to_string();
    if let Some(p) = nodes.get_mut(&parent) {
        p.stat.cversion += 1;
        p.stat.num_children -= 1;
        p.stat.pzxid = *zxid;
    }
    Ok(vec![
        (path.to_string(), WatchEvent::Deleted),
        (parent, WatchEvent::ChildrenChanged),
    ])
}

/// What a step answered, with what it left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub reply: Reply,
    /// Tree events its writes made (path, event), in order.
    pub events: Vec<(String, WatchEvent)>,
}

impl Outcome {
    pub fn is_wait(&self) -> bool {
        matches!(self.reply, Reply::Wait { .. })
    }

    pub fn is_error(&self) -> bool {
        matches!(self.reply, Reply::Error { .. })
    }

    /// The error code of an error reply.
    pub fn error_code(&self) -> Option<i32> {
        match &self.reply {
            Reply::Error { code, .. } => Some(*code),
            _ => None,
        }
    }
}

/// The decoded value of a `Done` reply; panics on anything else.
pub fn done<T: DeserializeOwned>(o: &Outcome) -> T {
    match &o.reply {
        Reply::Done(v) => abi::decode(v).expect("the Done value decodes as the type asked"),
        other => panic!("expected Done, got {other:?}"),
    }
}

/// Callbacks the harness runs in a row at most before it decides the recipe
/// loops (each callback's writes can fire more watches).
const CALLBACKS_MAX: usize = 10_000;

/// A simulated tree and the waits of a recipe's calls (see the module docs).
pub struct Harness {
    recipe: Recipe,
    nodes: BTreeMap<String, Node>,
    zxid: i64,
    /// The clock stamping writes' ctime and mtime, in ms.
    now_ms: i64,
    waits: Vec<Wait>,
    /// (session, token, reply) of every wait that ended.
    finished: Vec<(i64, String, Reply)>,
    /// Notifications the steps sent, by session.
    messages: Vec<(i64, Vec<u8>)>,
    /// Fired waits whose callback has not run yet: (wait, path, event).
    pending: Vec<(Wait, String, WatchEvent)>,
    next_session: i64,
    calls: u64,
}

impl Harness {
    /// A harness for the recipe `recipe!` declared in this crate
    /// (`wazoo_sdk::this_recipe!()`), over a tree holding only `/`.
    pub fn new(recipe: Recipe) -> Harness {
        let mut nodes = BTreeMap::new();
        nodes.insert(
            "/".to_string(),
            Node {
                data: Vec::new(),
                stat: NodeStat::default(),
            },
        );
        Harness {
            recipe,
            nodes,
            zxid: 0,
            now_ms: 0,
            waits: Vec::new(),
            finished: Vec::new(),
            messages: Vec::new(),
            pending: Vec::new(),
            next_session: 0x1000_0000_0000,
            calls: 0,
        }
    }

    /// The harness's clock, ms: the `ctime`/`mtime` the next write gets
    /// (a step's and a client's alike), as the leader stamps a write with
    /// its clock. It starts at 0 and moves only when the test moves it.
    pub fn now_ms(&self) -> i64 {
        self.now_ms
    }

    /// Sets the clock (it may go back, as a new leader's clock may).
    pub fn set_now_ms(&mut self, ms: i64) {
        self.now_ms = ms;
    }

    /// Moves the clock `ms` forward.
    pub fn advance_ms(&mut self, ms: i64) {
        self.now_ms = self.now_ms.saturating_add(ms);
    }

    /// A new session id.
    pub fn session(&mut self) -> i64 {
        self.next_session += 1;
        self.next_session
    }

    /// Calls `method` with `args` (encoded as a client sends them) as
    /// `session`, then runs the callbacks its writes made due.
    pub fn call<A: Serialize + ?Sized>(&mut self, session: i64, method: &str, args: &A) -> Outcome {
        let args = abi::encode(args).expect("encode the arguments");
        self.call_raw(session, method, &args)
    }

    /// [`Harness::call`] with MessagePack arguments as they are.
    pub fn call_raw(&mut self, session: i64, method: &str, args: &[u8]) -> Outcome {
        self.calls += 1;
        let guid = format!("{session:016x}-test-{}", self.calls);
        let call = self.recipe.call;
        let method = method.to_string();
        let args = args.to_vec();
        let o = self.step(session, guid, None, move |cx| call(cx, &method, &args));
        self.run_callbacks();
        o
    }

    /// Creates a node as a client would (persistent; `ephemeral_owner`
    /// 0), firing watches. Panics if ZooKeeper would refuse it.
    pub fn create(&mut self, path: &str, data: &[u8]) {
        self.client_create(path, data, CreateMode::Persistent, 0)
    }

    /// Creates an ephemeral node of `session`, as that client would.
    pub fn create_ephemeral(&mut self, session: i64, path: &str, data: &[u8]) {
        self.client_create(path, data, CreateMode::Ephemeral, session)
    }

    fn client_create(&mut self, path: &str, data: &[u8], mode: CreateMode, owner: i64) {
        let (_, events) = create(
            &mut self.nodes,
            &mut self.zxid,
            self.now_ms,
            path,
            data,
            mode,
            owner,
        )
        .unwrap_or_else(|c| panic!("create {path}: {}", code::name(c)));
        self.fire(&events);
        self.run_callbacks();
    }

    /// Sets a node's data as a client would (any version), firing watches.
    pub fn set(&mut self, path: &str, data: &[u8]) {
        let (_, events) = set(&mut self.nodes, &mut self.zxid, self.now_ms, path, data, -1)
            .unwrap_or_else(|c| panic!("set {path}: {}", code::name(c)));
        self.fire(&events);
        self.run_callbacks();
    }

    /// Deletes a node as a client would (any version), firing watches.
    pub fn delete(&mut self, path: &str) {
        let events = delete(&mut self.nodes, &mut self.zxid, path, -1)
            .unwrap_or_else(|c| panic!("delete {path}: {}", code::name(c)));
        self.fire(&events);
        self.run_callbacks();
    }

    /// The session ends (closed or expired): its ephemeral nodes are
    /// deleted (firing other sessions' watches) and its waits dropped.
    pub fn close_session(&mut self, session: i64) {
        let mine: Vec<String> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.stat.ephemeral_owner == session)
            .map(|(p, _)| p.clone())
            .collect();
        let mut events = Vec::new();
        for p in mine {
            events.extend(delete(&mut self.nodes, &mut self.zxid, &p, -1).unwrap_or_default());
        }
        self.waits.retain(|w| w.session != session);
        self.pending.retain(|(w, _, _)| w.session != session);
        self.fire(&events);
        self.run_callbacks();
    }

    /// A node's data, if it exists.
    pub fn data(&self, path: &str) -> Option<&[u8]> {
        self.nodes.get(path).map(|n| n.data.as_slice())
    }

    /// A node's stat, if it exists.
    pub fn stat(&self, path: &str) -> Option<&NodeStat> {
        self.nodes.get(path).map(|n| &n.stat)
    }

    /// A node's children, sorted.
    pub fn children(&self, path: &str) -> Vec<String> {
        let mut c = children_of(&self.nodes, path);
        c.sort();
        c
    }

    /// The tokens `session` waits on.
    pub fn waiting(&self, session: i64) -> Vec<String> {
        self.waits
            .iter()
            .filter(|w| w.session == session)
            .map(|w| w.token.clone())
            .collect()
    }

    /// The waits of `session` that ended since the last look, as (token,
    /// reply): what the client's `Finished` notifications carry.
    pub fn finished(&mut self, session: i64) -> Vec<(String, Reply)> {
        let (mine, rest) = std::mem::take(&mut self.finished)
            .into_iter()
            .partition(|(s, _, _)| *s == session);
        self.finished = rest;
        mine.into_iter().map(|(_, t, r)| (t, r)).collect()
    }

    /// The notifications steps sent to `session` since the last look.
    pub fn messages(&mut self, session: i64) -> Vec<Vec<u8>> {
        let (mine, rest) = std::mem::take(&mut self.messages)
            .into_iter()
            .partition(|(s, _)| *s == session);
        self.messages = rest;
        mine.into_iter().map(|(_, m)| m).collect()
    }

    /// Runs one step: the recipe's code against a copy of the tree; its
    /// changes are kept only if it succeeds.
    fn step(
        &mut self,
        session: i64,
        guid: String,
        consumed: Option<String>,
        run: impl FnOnce(&mut Ctx) -> Result<Reply>,
    ) -> Outcome {
        assert!(!in_step(), "a harness step inside another step");
        STEP.with(|s| {
            *s.borrow_mut() = Some(Step {
                nodes: self.nodes.clone(),
                zxid: self.zxid,
                now_ms: self.now_ms,
                session,
                guid: guid.clone(),
                prefixes: self.recipe.prefixes,
                waits: Vec::new(),
                notes: Vec::new(),
                events: Vec::new(),
                outside: None,
            })
        });
        let mut cx = Ctx::new(CallerInfo {
            session,
            guid,
            ids: Vec::<AuthId>::new(),
        });
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(&mut cx)));
        let step = STEP
            .with(|s| s.borrow_mut().take())
            .expect("the step's state");
        let reply = match r {
            Ok(Ok(reply)) => reply,
            Ok(Err(e)) => Reply::Error {
                code: e.code,
                message: e.message,
            },
            Err(panic) => Reply::Error {
                code: code::SYSTEM_ERROR,
                message: format!(
                    "recipe panicked: {}",
                    panic
                        .downcast_ref::<String>()
                        .map(String::as_str)
                        .or_else(|| panic.downcast_ref::<&str>().copied())
                        .unwrap_or("?")
                ),
            },
        };
        let reply = match (&step.outside, reply) {
            (Some(p), _) => Reply::Error {
                code: code::NO_AUTH,
                message: format!(
                    "path {p} is outside the module's prefixes {:?}",
                    self.recipe.prefixes
                ),
            },
            (None, Reply::Wait { token }) if !step.waits.iter().any(|w| w.token == token) => {
                Reply::Error {
                    code: code::BAD_ARGUMENTS,
                    message: format!("Wait({token:?}) without a watch registered with that token"),
                }
            }
            (None, r) => r,
        };
        if let Some(token) = consumed {
            self.waits
                .retain(|w| !(w.session == session && w.token == token));
        }
        if matches!(reply, Reply::Error { .. }) {
            return Outcome {
                reply,
                events: Vec::new(),
            };
        }
        self.nodes = step.nodes;
        self.zxid = step.zxid;
        self.messages.extend(step.notes);
        if matches!(reply, Reply::Wait { .. }) {
            for w in step.waits {
                self.waits
                    .retain(|x| !(x.session == w.session && x.token == w.token));
                self.waits.push(w);
            }
        }
        self.fire(&step.events);
        Outcome {
            reply,
            events: step.events,
        }
    }

    /// Marks the waits the events trigger fired (one-shot).
    fn fire(&mut self, events: &[(String, WatchEvent)]) {
        for (path, event) in events {
            for w in &mut self.waits {
                let hit = &w.path == path
                    && match event {
                        WatchEvent::Created | WatchEvent::DataChanged => !w.child,
                        WatchEvent::ChildrenChanged => w.child,
                        WatchEvent::Deleted => true,
                    };
                if hit && !w.token.is_empty() {
                    self.pending.push((w.clone(), path.clone(), *event));
                    w.token.clear();
                }
            }
            self.waits.retain(|w| !w.token.is_empty());
        }
    }

    /// Runs the callbacks of fired waits, in the order they fired, until
    /// none is due.
    fn run_callbacks(&mut self) {
        let mut n = 0;
        while !self.pending.is_empty() {
            let (w, path, event) = self.pending.remove(0);
            n += 1;
            assert!(
                n <= CALLBACKS_MAX,
                "more than {CALLBACKS_MAX} callbacks in a row: the recipe loops"
            );
            let reply = match self.recipe.on_watch {
                None => Reply::Error {
                    code: code::UNIMPLEMENTED,
                    message: "the recipe has no on_watch".into(),
                },
                Some(handler) => {
                    let fired = Fired {
                        token: w.token.clone(),
                        path,
                        event,
                    };
                    self.step(
                        w.session,
                        w.guid.clone(),
                        Some(w.token.clone()),
                        move |cx| handler(cx, fired),
                    )
                    .reply
                }
            };
            if !matches!(reply, Reply::Wait { .. }) {
                self.finished.push((w.session, w.token, reply));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Error, Step};

    fn write_then(cx: &mut Ctx, method: &str, _args: &[u8]) -> Result<Reply> {
        cx.create("/made", b"v", CreateMode::Persistent)?;
        match method {
            "fail" => Err(Error::bad_arguments("changed my mind")),
            "wait" => {
                cx.exists_watch("/gone", "t")?;
                Ok(Reply::Wait { token: "t".into() })
            }
            "outside" => {
                cx.create("/elsewhere", b"", CreateMode::Persistent)?;
                Ok(Reply::Done(Vec::new()))
            }
            // The time as a recipe learns it: write, read the write's mtime.
            "now" => {
                let stat = cx.set("/made", b"", -1)?;
                Ok(Reply::Done(abi::encode(&stat.mtime).unwrap()))
            }
            _ => Ok(Reply::Done(Vec::new())),
        }
    }

    fn on_watch(cx: &mut Ctx, f: Fired) -> Result<Reply> {
        crate::rt::invoke_watch(cx, f, |cx, f| {
            cx.create("/callback", f.path.as_bytes(), CreateMode::Persistent)?;
            Ok(Step::Done(cx.caller_guid().to_string()))
        })
    }

    fn recipe() -> Recipe {
        Recipe {
            name: "t",
            prefixes: &["/made", "/gone", "/callback"],
            methods: &["ok", "fail", "wait", "outside", "now"],
            call: write_then,
            on_watch: Some(on_watch),
        }
    }

    #[test]
    fn a_failed_step_applies_nothing_and_a_path_outside_the_prefixes_fails_the_step() {
        let mut h = Harness::new(recipe());
        let s = h.session();
        let r = h.call_raw(s, "fail", &[]);
        assert_eq!(r.error_code(), Some(code::BAD_ARGUMENTS));
        assert!(
            h.data("/made").is_none(),
            "the failed step's create is discarded"
        );
        let r = h.call_raw(s, "outside", &[]);
        assert_eq!(r.error_code(), Some(code::NO_AUTH));
        assert!(h.data("/made").is_none());
        assert!(!h.call_raw(s, "ok", &[]).is_error());
        assert_eq!(h.data("/made"), Some(&b"v"[..]));
    }

    #[test]
    fn writes_are_stamped_with_the_clock_the_test_sets_and_advances() {
        let mut h = Harness::new(recipe());
        let s = h.session();
        assert_eq!(h.now_ms(), 0);
        h.set_now_ms(1_700_000_000_000);
        h.create("/gone", b"");
        assert_eq!(h.stat("/gone").unwrap().ctime, 1_700_000_000_000);
        h.advance_ms(1_500);
        let now: i64 = done(&h.call_raw(s, "now", &[]));
        assert_eq!(
            now, 1_700_000_001_500,
            "the step's write has the clock's time"
        );
        let made = *h.stat("/made").unwrap();
        assert_eq!((made.ctime, made.mtime), (now, now));
        h.advance_ms(250);
        h.set("/made", b"x");
        let made = *h.stat("/made").unwrap();
        assert_eq!(
            (made.ctime, made.mtime),
            (now, now + 250),
            "a client's set moves mtime, not ctime"
        );
        // A read is not stamped: only writes carry the time.
        assert_eq!(h.now_ms(), 1_700_000_001_750);
    }

    #[test]
    fn a_fired_watch_runs_the_callback_with_the_registering_calls_guid() {
        let mut h = Harness::new(recipe());
        let s = h.session();
        h.create("/gone", b"");
        assert!(h.call_raw(s, "wait", &[]).is_wait());
        assert_eq!(h.waiting(s), vec!["t".to_string()]);
        h.delete("/gone");
        let f = h.finished(s);
        assert_eq!(f.len(), 1);
        let guid: String = match &f[0].1 {
            Reply::Done(v) => abi::decode(v).unwrap(),
            other => panic!("{other:?}"),
        };
        assert!(guid.starts_with(&format!("{s:016x}-")), "{guid}");
        assert_eq!(h.data("/callback"), Some(&b"/gone"[..]));
        assert!(h.waiting(s).is_empty(), "one-shot");
    }
}
