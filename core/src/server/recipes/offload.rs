//! Recipe steps off the member's thread (docs/ARCHITECTURE.md, "Recipes",
//! "Where a step runs").
//!
//! With offloading on ([`Server::set_recipe_offload`]), prep first gives
//! the engine a try at the step within a small budget
//! ([`RecipeEngine::try_call`]: a twentieth of the fuel and one epoch tick
//! for the wasm runtime), which an ordinary step fits many times over, so
//! it costs what it cost before. A step that needs more is not run here:
//! prep emits a [`RecipeJob`] ([`Output::RecipeStep`]) holding an
//! O(1) copy of the prep view (the tree is a persistent map; the
//! outstanding changes are copied) and the shell runs it on a worker
//! ([`RecipeJob::run`]), which records every node the step read. The
//! result comes back as [`Input::RecipeStepDone`]; the pipeline then
//! checks the read set against the prep view as it is now (optimistic
//! concurrency): if every node the step read is unchanged, and every
//! quota check its writes made (with enforceQuota) answers the same
//! against the committed tree as it is now, the step's
//! txn is exactly what running it now would give (its stamps are moved to
//! the zxid and time the txn gets), and it is proposed. If not, the step
//! runs again against the new view, [`OFFLOADED_ATTEMPTS_MAX`] times at
//! most, and then once on the member's thread, which cannot conflict.
//!
//! A step that failed or changed nothing needs no check: what it read was
//! in the prep view when it started, and its reply still waits until
//! every txn proposed before it is applied. Callbacks always are checked
//! (they consume their wait).
//!
//! Order within a session is kept as ZooKeeper keeps it: while a call of
//! a session runs, its later requests (local, or forwarded by a follower)
//! wait here, and are served in order once its txn is proposed. A step
//! never runs against a module version other than the one its txn would
//! run: a deploy or undeploy prepped meanwhile makes it run again.

use std::collections::{HashMap, VecDeque};

use wazoo_proto::{ErrorCode, Request, Zxid};
use wazoo_sdk::abi::Reply;

use super::super::deploy::PluginOp;
use super::super::{
    ensemble::INTERNAL_CXID, fingerprint, AuthInfo, ConnId, Origin, Output, Outstanding, ReadSet,
    Server, ServerConfig, Txn, View,
};
use super::{run_engine, NodeCall, PrepHost, RecipeCall, Step, StepOutcome};
use crate::recipe::{error_reply, RecipeEngine, RecipeWait, WaitKey};
use crate::tree::DataTree;

/// How many times a step runs off the member's thread and finds what it
/// read changed before it runs on the member's thread instead.
pub const OFFLOADED_ATTEMPTS_MAX: u32 = 3;

/// What a step was asked to do, owned (it may run again).
#[derive(Debug, Clone)]
enum Work {
    Call {
        method: String,
        args: Vec<u8>,
        guid: String,
        node: Option<NodeCall>,
    },
    Callback(RecipeWait),
    /// Not a step: validating (compiling) a module to deploy, which the
    /// engine then remembers, so the deploy's prep validates it at once.
    Validate(Vec<u8>),
}

impl Work {
    fn step(&self) -> Step<'_> {
        match self {
            Work::Call {
                method,
                args,
                guid,
                node,
            } => Step::Call {
                method,
                args,
                guid,
                node: node.as_ref(),
            },
            Work::Callback(w) => Step::Callback(w),
            Work::Validate(_) => unreachable!("a validation is not a step"),
        }
    }
}

/// One recipe step for the shell to run on a worker thread, against the
/// copy of the prep view it carries; answer with
/// [`Input::RecipeStepDone`](super::super::Input::RecipeStepDone).
pub struct RecipeJob {
    id: u64,
    module: String,
    work: Work,
    session: i64,
    auth: AuthInfo,
    cfg: ServerConfig,
    tree: DataTree,
    outstanding: Outstanding,
    zxid: Zxid,
    time_ms: i64,
}

impl std::fmt::Debug for RecipeJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecipeJob")
            .field("id", &self.id)
            .field("module", &self.module)
            .field("session", &format_args!("0x{:x}", self.session))
            .field("zxid", &self.zxid)
            .finish()
    }
}

impl RecipeJob {
    /// The module the step runs.
    pub fn module(&self) -> &str {
        &self.module
    }

    /// Runs the step with `engine` against the view it carries (on any
    /// thread: it touches nothing of the pipeline).
    pub fn run(self, engine: &mut dyn RecipeEngine) -> RecipeStepDone {
        if let Work::Validate(bytes) = &self.work {
            // The answer is the engine's to remember; a panic is a refusal
            // the deploy's prep then meets (it validates again).
            let _ =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| engine.validate(bytes)));
            return RecipeStepDone {
                id: self.id,
                outcome: StepOutcome::empty(Reply::Done(Vec::new())),
                reads: ReadSet::default(),
                saw_own_stamp: false,
                zxid: self.zxid,
                time_ms: self.time_ms,
            };
        }
        let host = PrepHost {
            cfg: &self.cfg,
            view: View {
                tree: &self.tree,
                outstanding: &self.outstanding,
                local: crate::server::prep::Local::default(),
                zxid: self.zxid,
                time_ms: self.time_ms,
                reads: Some(Default::default()),
                recipes_node: None,
            },
            auth: &self.auth,
            session: self.session,
            // run_engine sets the step's guid.
            guid: String::new(),
            module: &self.module,
            ops: Vec::new(),
            waits: Vec::new(),
            notes: Vec::new(),
            staged_bytes: 0,
            saw_own_stamp: false,
        };
        let mut host = host;
        // A worker must answer every step it takes (its session's later
        // requests wait for it): an engine that panics fails the step.
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run_engine(
                Some(engine),
                &mut host,
                &self.module,
                &self.work.step(),
                false,
            )
        }));
        let reply = run.ok().flatten().unwrap_or_else(|| {
            error_reply(
                ErrorCode::SystemError,
                format!("the recipe engine failed while running {:?}", self.module),
            )
        });
        let (outcome, reads, saw_own_stamp) = StepOutcome::of(host, reply);
        RecipeStepDone {
            id: self.id,
            outcome,
            reads: reads.unwrap_or_default(),
            saw_own_stamp,
            zxid: self.zxid,
            time_ms: self.time_ms,
        }
    }
}

/// A step a worker ran ([`RecipeJob::run`]).
pub struct RecipeStepDone {
    id: u64,
    outcome: StepOutcome,
    reads: ReadSet,
    saw_own_stamp: bool,
    /// The zxid and time the step's view stamped its changes with.
    zxid: Zxid,
    time_ms: i64,
}

impl std::fmt::Debug for RecipeStepDone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecipeStepDone")
            .field("id", &self.id)
            .field("reply", &self.outcome.reply)
            .field("ops", &self.outcome.ops.len())
            .field("reads", &self.reads.nodes.len())
            .finish()
    }
}

/// Where an offloaded step's result goes.
#[derive(Debug)]
enum From {
    /// A call from a connection of this member.
    Conn { conn: ConnId, xid: i32 },
    /// A call a follower forwarded.
    Remote { cxid: i32 },
    /// A read call (a getData) of a connection of this member, at the
    /// head of its line: it runs against the committed tree.
    ReadCall { conn: ConnId },
    /// The callback of a fired wait (in `running_callbacks` meanwhile).
    Callback(WaitKey),
    /// A client's deploy, served again once its module is validated (its
    /// session's later requests wait behind it).
    Deploy(Held),
    /// A plugins directory deploy, prepped again once its module is
    /// validated.
    Plugin(PluginOp),
}

/// A step in flight.
#[derive(Debug)]
struct Pending {
    from: From,
    session: i64,
    auth: AuthInfo,
    module: String,
    work: Work,
    /// Runs that found what they read changed.
    attempts: u32,
    /// [`Offload::deploy_gen`] when it was sent.
    deploy_gen: u64,
}

/// Why a client's request waits for a module to compile
/// ([`Server::compile_wait`]).
pub(in crate::server) enum CompileWait {
    /// A call of a module not served while deploys are being validated.
    Call,
    /// A deploy of these bytes, whose module a worker validates first.
    Deploy(Vec<u8>),
}

/// Where a deploy whose module is validated on a worker came from
/// ([`Server::offload_validation`]).
pub(in crate::server) enum DeployFrom {
    Client(Held),
    Plugin(PluginOp),
}

/// A request that waits behind its session's call in flight.
#[derive(Debug)]
pub(in crate::server) enum Held {
    Local {
        conn: ConnId,
        xid: i32,
        req: Request,
    },
    Remote {
        from: u64,
        cxid: i32,
        auth: AuthInfo,
        op: i32,
        body: Vec<u8>,
        /// The session is local to `from` (see `leader_forwarded`).
        local: bool,
    },
}

/// The pipeline's side of offloading.
#[derive(Debug, Default)]
pub(in crate::server) struct Offload {
    enabled: bool,
    next_id: u64,
    jobs: HashMap<u64, Pending>,
    /// Sessions with a call in flight, and the requests that wait behind
    /// it, in order. Bounded: a connection has at most as many requests
    /// unanswered as the shell lets it send.
    held: HashMap<i64, VecDeque<Held>>,
    /// Moves whenever the modules the engine serves may change.
    pub(in crate::server) deploy_gen: u64,
    /// Steps sent to a worker (first runs; not validations).
    sent: u64,
    /// Steps that ran again because what they read changed.
    reruns: u64,
    /// Steps that ran on the member's thread after
    /// [`OFFLOADED_ATTEMPTS_MAX`] conflicts.
    ran_here: u64,
    /// Deploys whose module a worker is validating: the name each one's
    /// manifest gives ("" if the engine cannot tell before compiling).
    validating: Vec<String>,
    /// Sessions whose call of a module not served waits (first in its
    /// session's line) while a deploy of that name is being validated:
    /// the module may be the one coming (the plugins directory's, at a
    /// start).
    behind_validation: Vec<i64>,
}

impl Offload {
    /// A role change or a SNAP: results of steps sent before are ignored
    /// (their view is gone), and what waited behind them with them (the
    /// connections close; forwarded requests are the follower's to retry);
    /// read calls excepted.
    pub(in crate::server) fn forget(&mut self) {
        // A read call's result stays good: it read committed state at its
        // turn, and its connection's line waits for it (if the change
        // closed the connection, the answer goes nowhere).
        self.jobs
            .retain(|_, p| matches!(p.from, From::ReadCall { .. }));
        self.held.clear();
        self.validating.clear();
        self.behind_validation.clear();
    }
}

impl Server {
    /// Runs recipe steps off the member's thread: prep emits
    /// [`Output::RecipeStep`] and the shell answers each with
    /// [`Input::RecipeStepDone`](super::super::Input::RecipeStepDone).
    /// Off (the default), steps run in prep, on the thread that drives the
    /// pipeline.
    pub fn set_recipe_offload(&mut self, on: bool) {
        self.offload.enabled = on;
    }

    /// Steps sent to the shell and not answered yet.
    pub fn recipe_steps_in_flight(&self) -> usize {
        self.offload.jobs.len()
    }

    /// Steps sent to a worker because their first try on this thread did
    /// not fit its budget (or a module was compiling).
    pub fn recipe_steps_offloaded(&self) -> u64 {
        self.offload.sent
    }

    /// Offloaded steps that ran again because what they read had changed,
    /// and of those, how many then ran on the member's thread.
    pub fn recipe_step_reruns(&self) -> (u64, u64) {
        (self.offload.reruns, self.offload.ran_here)
    }

    /// Whether steps go to the shell.
    pub(in crate::server) fn offloads(&self) -> bool {
        self.offload.enabled && self.recipes.is_some()
    }

    /// Holds a request of `session` if a call of it is in flight; gives it
    /// back otherwise.
    pub(in crate::server) fn hold_behind_step(&mut self, session: i64, h: Held) -> Option<Held> {
        match self.offload.held.get_mut(&session) {
            Some(q) => {
                q.push_back(h);
                None
            }
            None => Some(h),
        }
    }

    /// A call (local: `conn` and `xid`; forwarded: `conn` None) goes to a
    /// worker.
    pub(in crate::server) fn offload_call(
        &mut self,
        conn: Option<ConnId>,
        xid: i32,
        session: i64,
        auth: &AuthInfo,
        call: RecipeCall<'_>,
    ) {
        self.offload.sent += 1;
        let from = match conn {
            Some(conn) => From::Conn { conn, xid },
            None => From::Remote { cxid: xid },
        };
        self.offload.held.entry(session).or_default();
        self.dispatch(Pending {
            from,
            session,
            auth: auth.clone(),
            module: call.module.to_string(),
            work: Work::Call {
                method: call.method.to_string(),
                args: call.args.into_owned(),
                guid: call.guid,
                node: call.node,
            },
            attempts: 0,
            deploy_gen: 0,
        });
    }

    /// A read call at the head of `conn`'s line goes to a worker, against
    /// the committed tree as it is now; returns the job's id, which the
    /// line's head waits for ([`Server::read_call_done`]).
    #[allow(clippy::too_many_arguments)]
    pub(in crate::server) fn offload_read_call(
        &mut self,
        conn: ConnId,
        session: i64,
        auth: &AuthInfo,
        module: String,
        method: String,
        args: Vec<u8>,
        guid: String,
    ) -> u64 {
        self.offload.sent += 1;
        let id = self.offload.next_id;
        self.dispatch(Pending {
            from: From::ReadCall { conn },
            session,
            auth: auth.clone(),
            module,
            work: Work::Call {
                method,
                args,
                guid,
                node: None,
            },
            attempts: 0,
            deploy_gen: 0,
        });
        id
    }

    /// A fired wait's callback goes to a worker (its key is already in
    /// `running_callbacks`).
    pub(in crate::server) fn offload_callback(
        &mut self,
        key: WaitKey,
        auth: AuthInfo,
        wait: RecipeWait,
    ) {
        self.offload.sent += 1;
        self.dispatch(Pending {
            from: From::Callback(key),
            session: wait.session,
            auth,
            module: wait.module.clone(),
            work: Work::Callback(wait),
            attempts: 0,
            deploy_gen: 0,
        });
    }

    /// Whether a client's request (local or forwarded) must wait for a
    /// module to compile, and why: the same check for both paths.
    pub(in crate::server) fn compile_wait(
        &mut self,
        auth: &AuthInfo,
        req: &Request,
    ) -> Option<CompileWait> {
        let called = match req {
            Request::RecipeCall { module, .. } => Some(module.as_str()),
            _ => super::node_calls::called_module(req),
        };
        if let Some(module) = called {
            return self
                .call_waits_for_validation(module)
                .then_some(CompileWait::Call);
        }
        let bytes = Server::deploy_bytes(req)?;
        self.validate_off_thread(auth, bytes)
            .then(|| CompileWait::Deploy(bytes.to_vec()))
    }

    /// Makes `held` (the request [`Self::compile_wait`] named) wait.
    pub(in crate::server) fn wait_for_compile(
        &mut self,
        session: i64,
        auth: &AuthInfo,
        wait: CompileWait,
        held: Held,
    ) {
        match wait {
            CompileWait::Call => self.hold_for_validation(session, held),
            CompileWait::Deploy(bytes) => {
                self.offload_validation(session, auth, bytes, DeployFrom::Client(held))
            }
        }
    }

    /// Whether a deploy of `bytes` by `auth` is to wait for its module
    /// to be validated on a worker ([`Server::offload_validation`]):
    /// steps run off this thread, the deploy passes the checks made before
    /// validating (permission, size: a refused one never costs a compile),
    /// and the engine would have to compile the module to validate it.
    pub(in crate::server) fn validate_off_thread(&mut self, auth: &AuthInfo, bytes: &[u8]) -> bool {
        self.offloads()
            && self.deploy_allowed(auth, bytes)
            && self
                .recipes
                .as_mut()
                .is_some_and(|e| !e.validates_quickly(bytes))
    }

    /// Validates a deploy's module on a worker; the deploy is served again
    /// when that is done (a client's: first in its session's line, whose
    /// later requests wait behind it; a plugins directory's: prepped
    /// again), and then validates at once.
    pub(in crate::server) fn offload_validation(
        &mut self,
        session: i64,
        auth: &AuthInfo,
        bytes: Vec<u8>,
        from: DeployFrom,
    ) {
        let from = match from {
            DeployFrom::Client(held) => {
                self.offload.held.entry(session).or_default();
                From::Deploy(held)
            }
            DeployFrom::Plugin(op) => From::Plugin(op),
        };
        let name = self
            .recipes
            .as_ref()
            .and_then(|e| e.deploy_name(&bytes))
            .unwrap_or_default();
        self.offload.validating.push(name.clone());
        tracing::debug!(
            bytes = bytes.len(),
            "validating a module to deploy on a recipe worker"
        );
        self.dispatch(Pending {
            from,
            session,
            auth: auth.clone(),
            module: name,
            work: Work::Validate(bytes),
            attempts: 0,
            deploy_gen: 0,
        });
    }

    /// Whether a plugins directory deploy of `bytes` waits for a worker
    /// to validate its module.
    pub(in crate::server) fn plugin_deploy_in_flight(&self, bytes: &[u8]) -> bool {
        self.offload.jobs.values().any(|p| {
            matches!(&p.from, From::Plugin(PluginOp::Deploy { bytes: b, .. }) if b[..] == bytes[..])
        })
    }

    /// Whether a call of `module` is to wait for the deploys being
    /// validated: one of them brings the module (or may: its engine
    /// cannot name it before compiling), which is not served now (the
    /// plugins directory deploys its modules as a member starts: a first
    /// call must not find them missing). A call of any other module
    /// missing is answered at once.
    fn call_waits_for_validation(&self, module: &str) -> bool {
        self.offload
            .validating
            .iter()
            .any(|n| n.is_empty() || n == module)
            && self.recipes.as_ref().is_some_and(|e| !e.has_module(module))
    }

    /// Holds a call of `session` (see [`Self::call_waits_for_validation`])
    /// until the next validation is done, when it is served again (and
    /// may wait again); its session's later requests wait behind it.
    fn hold_for_validation(&mut self, session: i64, call: Held) {
        self.hold_first(session, call);
        if !self.offload.behind_validation.contains(&session) {
            self.offload.behind_validation.push(session);
        }
    }

    /// Puts `h` first in the line of `session`'s held requests.
    fn hold_first(&mut self, session: i64, h: Held) {
        self.offload.held.entry(session).or_default().push_front(h);
    }

    fn dispatch(&mut self, mut p: Pending) {
        let id = self.offload.next_id;
        self.offload.next_id += 1;
        p.deploy_gen = self.offload.deploy_gen;
        // A read call reads the committed tree alone.
        let read_call = matches!(p.from, From::ReadCall { .. });
        let job = RecipeJob {
            id,
            module: p.module.clone(),
            work: p.work.clone(),
            session: p.session,
            auth: p.auth.clone(),
            cfg: self.cfg.clone(),
            tree: self.tree.read_only_copy(),
            outstanding: Outstanding {
                map: if read_call {
                    Default::default()
                } else {
                    self.prep.outstanding.map.clone()
                },
                order: Default::default(),
            },
            zxid: if read_call {
                self.last_applied.next()
            } else {
                self.prep_zxid()
            },
            time_ms: self.wall_ms,
        };
        self.offload.jobs.insert(id, p);
        self.out.push(Output::RecipeStep(Box::new(job)));
    }

    /// A worker ran a step.
    pub(in crate::server) fn on_step_done(&mut self, done: RecipeStepDone) {
        let Some(mut p) = self.offload.jobs.remove(&done.id) else {
            return; // sent before a role change or a SNAP
        };
        if let From::ReadCall { conn } = p.from {
            // Any member: it read committed state, and is answered as it ran.
            let r = self.read_call_response(&done.outcome);
            return self.read_call_done(conn, done.id, r);
        }
        assert!(
            self.role.decides(),
            "steps in flight are forgotten when the member stops deciding"
        );
        if matches!(p.from, From::Deploy(_) | From::Plugin(_)) {
            let at = self.offload.validating.iter().position(|n| *n == p.module);
            self.offload
                .validating
                .remove(at.expect("every validation in flight is listed"));
            match p.from {
                From::Deploy(held) => {
                    // First in its session's line again, then served in order.
                    self.hold_first(p.session, held);
                    self.release_session(p.session);
                }
                From::Plugin(op) => self.prep_plugin(op),
                _ => unreachable!("matched above"),
            }
            // The calls that waited are served again: each waits on if
            // another validation in flight may still bring its module.
            for session in std::mem::take(&mut self.offload.behind_validation) {
                self.release_session(session);
            }
            return;
        }
        let outcome = if !self.sessions.is_live(p.session) {
            if let From::Callback(key) = &p.from {
                // The session's end drops its waits.
                self.running_callbacks.remove(key);
                return;
            }
            StepOutcome::empty(error_reply(
                ErrorCode::SessionExpired,
                "the session ended while its recipe call ran",
            ))
        } else if self.still_current(&p, &done) {
            self.restamp(done)
        } else {
            p.attempts += 1;
            self.offload.reruns += 1;
            if p.attempts < OFFLOADED_ATTEMPTS_MAX {
                tracing::debug!(module = %p.module, attempts = p.attempts, "a recipe step read nodes that changed while it ran; running it again");
                return self.dispatch(p);
            }
            // It keeps losing the race: this once on this thread, against
            // the view as it is, where nothing can change under it.
            self.offload.ran_here += 1;
            tracing::info!(module = %p.module, attempts = p.attempts, "a recipe step kept reading nodes that changed while it ran; running it on the member's thread");
            let step = p.work.step();
            self.run_step_here(&p.auth, p.session, &p.module, &step)
        };
        let step = p.work.step();
        let (rt, changes) = self.finish_step(&p.auth, p.session, &p.module, &step, outcome);
        let node_op = match &p.work {
            Work::Call { node, .. } => node.as_ref().map(|n| n.op),
            _ => None,
        };
        match p.from {
            From::Conn { conn, xid } => {
                self.commit_local_call(conn, xid, p.session, rt, changes, node_op);
                self.release_session(p.session);
            }
            From::Remote { cxid } => {
                self.propose_remote_call(cxid, p.session, rt, changes, node_op.is_some());
                self.release_session(p.session);
            }
            From::Deploy(_) | From::Plugin(_) | From::ReadCall { .. } => {
                unreachable!("served above")
            }
            From::Callback(_) => self.propose(
                Origin::Internal,
                INTERNAL_CXID,
                p.session,
                Txn::Recipe(Box::new(rt)),
                changes,
                None,
                false,
            ),
        }
    }

    /// Whether the txn the step makes is the one running it now would
    /// make: the same module version, the same nodes read, and no stamp of
    /// its own shown to the step that its txn will not carry.
    fn still_current(&self, p: &Pending, done: &RecipeStepDone) -> bool {
        let o = &done.outcome;
        let callback = matches!(p.from, From::Callback(_));
        let read_only = matches!(o.reply, Reply::Error { .. })
            || (o.ops.is_empty() && o.waits.is_empty() && o.notes.is_empty());
        if read_only && !callback {
            return true;
        }
        if p.deploy_gen != self.offload.deploy_gen {
            return false;
        }
        if done.saw_own_stamp && (done.zxid != self.prep_zxid() || done.time_ms != self.wall_ms) {
            return false;
        }
        // The quota checks its writes asked must answer as they did: an
        // in-place step asks them of the committed tree as it is now.
        done.reads
            .nodes
            .iter()
            .all(|(path, fp)| fingerprint(&self.prep.outstanding.get(&self.tree, path)) == *fp)
            && done
                .reads
                .quotas
                .iter()
                .all(|(ask, answer)| ask.answer(&self.tree) == *answer)
    }

    /// The step's view changes with its stamps (zxid, time) moved to those
    /// the txn gets now. Only the fields the step itself stamped carry its
    /// zxid (nothing else had it), and a time goes with its zxid.
    fn restamp(&self, done: RecipeStepDone) -> StepOutcome {
        let mut o = done.outcome;
        let (old, new) = (done.zxid.to_wire(), self.prep_zxid().to_wire());
        let time = self.wall_ms;
        if old == new && done.time_ms == time {
            return o;
        }
        for (_, r) in o.changes.iter_mut() {
            let Some(r) = r else { continue };
            let s = &mut r.stat;
            if s.czxid == old {
                s.czxid = new;
                s.ctime = time;
            }
            if s.mzxid == old {
                s.mzxid = new;
                s.mtime = time;
            }
            if s.pzxid == old {
                s.pzxid = new;
            }
        }
        o
    }

    /// The call of `session` is done: the requests that waited behind it
    /// are served, in order, until one of them is a call that goes to a
    /// worker in turn.
    fn release_session(&mut self, session: i64) {
        let Some(mut q) = self.offload.held.remove(&session) else {
            return;
        };
        while let Some(h) = q.pop_front() {
            match h {
                Held::Local { conn, xid, req } => self.serve_request(conn, xid, req),
                Held::Remote {
                    from,
                    cxid,
                    auth,
                    op,
                    body,
                    local,
                } => self.leader_forwarded(from, session, cxid, auth, op, &body, local),
            }
            if let Some(again) = self.offload.held.get_mut(&session) {
                again.extend(q);
                return;
            }
        }
    }
}
