//! Recipe calls and callbacks in the pipeline (docs/ARCHITECTURE.md,
//! "Recipes"; docs/RECIPES.md, "Watches and callbacks").
//!
//! - A call runs on the leader (or the standalone member) against the prep
//!   view: in prep, or on a worker of the shell against a copy of it and
//!   checked when it comes back (`recipes/offload.rs`). Its writes,
//!   watch registrations and notifications become one [`RecipeTxn`]; its
//!   reply travels in that txn, so the member holding the caller's
//!   connection answers it when the txn is applied there. A call that
//!   fails or changes nothing gets no txn of its own (forwarded: a txn
//!   that only carries the reply); its reply waits until every txn before
//!   it is applied.
//! - Every member applies a recipe txn the same way: tree ops (all or
//!   none), then watches, then the wait table (consumed, then new waits),
//!   then the notifications to the sessions it holds.
//! - Waits fire when an applied txn triggers their path; the leader then
//!   owes their callbacks and runs each as a step of its own, whose txn
//!   consumes the wait. Which callbacks are owed is part of the replicated
//!   wait table, so a new leader runs the ones the old one did not finish.
//!
//! `recipes/prep_host.rs` holds `PrepHost`, the
//! [`RecipeHost`](crate::recipe::RecipeHost) a step runs against (the prep
//! view, staging the step's writes, watches and notifications).

use std::sync::Arc;

use wazoo_proto::{ErrorCode, Request, Response};
use wazoo_sdk::abi::{self, AuthId, CallerInfo, Notification, Reply, WatchRequest};

use super::{
    ApplyError, AuthInfo, Changes, ConnId, Origin, ReadSet, Server, ServerConfig, Stat, Txn, View,
    WriteKind,
};
use crate::recipe::{
    error_reply, render_report, ModuleReport, RecipeEngine, RecipeTxn, RecipeWait, WaitKey,
};

pub(super) mod node_calls;
mod offload;
mod prep_host;

use node_calls::NodeCall;
pub(super) use offload::{DeployFrom, Held, Offload};
pub use offload::{RecipeJob, RecipeStepDone};
use prep_host::PrepHost;

/// The virtual node showing what recipe modules are loaded.
pub const RECIPES_NODE: &str = "/zookeeper/recipes";

/// A client's recipe call.
#[derive(Clone)]
pub(super) struct RecipeCall<'a> {
    pub module: &'a str,
    pub method: &'a str,
    pub args: std::borrow::Cow<'a, [u8]>,
    /// The call's guid (see [`call_guid`]).
    pub guid: String,
    /// A call made by a create under /zookeeper/calls: its call node.
    pub node: Option<NodeCall>,
}

/// The `caller_guid` of a call: the one its client sent (the same for every
/// retry of the call), or, from a client that sends none, one made for
/// this request alone: the session id as 16 hex digits, `-`, and the
/// request's xid as 8 (distinct per call, not stable across retries).
pub(super) fn call_guid(sent: &str, session: i64, xid: i32) -> String {
    if sent.is_empty() {
        format!("{session:016x}-{xid:08x}")
    } else {
        sent.to_string()
    }
}

/// What became of a read call at its turn ([`Server::serve_read_call`]).
pub(super) enum ReadCallRun {
    Answered(Result<Response, ErrorCode>),
    /// Its step runs on a worker (this job); the reply comes with it.
    Offloaded(u64),
}

/// What a recipe step was asked to do.
enum Step<'a> {
    Call {
        method: &'a str,
        args: &'a [u8],
        guid: &'a str,
        node: Option<&'a NodeCall>,
    },
    Callback(&'a RecipeWait),
}

/// What one step did, before it becomes a txn (see `finish_step`).
struct StepOutcome {
    reply: Reply,
    ops: Vec<Txn>,
    waits: Vec<RecipeWait>,
    notes: Vec<(i64, Vec<u8>)>,
    /// The view changes of `ops`.
    changes: Changes,
}

impl StepOutcome {
    /// Nothing staged: only `reply`.
    fn empty(reply: Reply) -> StepOutcome {
        StepOutcome {
            reply,
            ops: Vec::new(),
            waits: Vec::new(),
            notes: Vec::new(),
            changes: Vec::new(),
        }
    }

    /// What `host` staged, with the step's reply; and what it read, if it
    /// recorded its reads.
    fn of(host: PrepHost<'_, '_>, reply: Reply) -> (StepOutcome, Option<ReadSet>, bool) {
        let PrepHost {
            mut view,
            ops,
            waits,
            notes,
            saw_own_stamp,
            ..
        } = host;
        let reads = view.reads.take().map(|r| r.into_inner());
        let outcome = StepOutcome {
            reply,
            ops,
            waits,
            notes,
            changes: view.into_changes(),
        };
        (outcome, reads, saw_own_stamp)
    }
}

/// Runs one step with `engine` against `host` (the caller's identity is
/// the one `host` checks ACLs with). `quick`: only the engine's first try
/// within its small budget (`None` if the step needs more).
fn run_engine(
    engine: Option<&mut (dyn RecipeEngine + '_)>,
    host: &mut PrepHost<'_, '_>,
    module: &str,
    step: &Step<'_>,
    quick: bool,
) -> Option<Reply> {
    let guid = match step {
        Step::Call { guid, .. } => guid,
        Step::Callback(w) => w.guid.as_str(),
    };
    let caller = caller_info(host.session, guid, host.auth);
    host.guid = caller.guid.clone();
    match (engine, step) {
        (None, _) => Some(error_reply(
            ErrorCode::Unimplemented,
            "recipes are not enabled on this server (start it with --plugins DIR)",
        )),
        (Some(e), Step::Call { method, args, .. }) if quick => {
            e.try_call(module, method, args, &caller, host)
        }
        (Some(e), Step::Call { method, args, .. }) => {
            Some(e.call(module, method, args, &caller, host))
        }
        (Some(e), Step::Callback(w)) => {
            let (path, event) = w.fired.clone().expect("only fired waits are called back");
            let req = WatchRequest {
                token: w.token.clone(),
                path,
                event,
                caller,
            };
            if quick {
                e.try_on_watch(module, &req, host)
            } else {
                Some(e.on_watch(module, &req, host))
            }
        }
    }
}

/// The guid of a wait recorded without one: its session's id as 16 hex
/// digits (what every step was told before per-call guids).
pub(crate) fn guid_of(session: i64) -> String {
    format!("{session:016x}")
}

/// What a step is told about its caller: the session, the call's guid (for
/// a callback, the guid of the call that registered the wait), and the
/// identities the step's ACL checks use (`auth`: the calling connection's,
/// or for a callback those recorded with its wait).
pub(crate) fn caller_info(session: i64, guid: &str, auth: &AuthInfo) -> CallerInfo {
    CallerInfo {
        session,
        guid: if guid.is_empty() {
            guid_of(session)
        } else {
            guid.to_string()
        },
        ids: auth
            .ids
            .iter()
            .map(|i| AuthId {
                scheme: i.scheme.clone(),
                id: i.id.clone(),
            })
            .collect(),
    }
}

/// The error code a failed step's reply (MessagePack) carries, for a
/// call made by a create, which fails with it.
fn failed_code(reply: &[u8]) -> ErrorCode {
    match abi::decode::<Reply>(reply) {
        Ok(Reply::Error { code, .. }) => {
            ErrorCode::from_i32(code).unwrap_or(ErrorCode::SystemError)
        }
        _ => ErrorCode::SystemError,
    }
}

fn encode<T: serde::Serialize>(v: &T) -> Vec<u8> {
    abi::encode(v).expect("ABI types always encode")
}

/// What a recipe txn the tree refused does instead (see
/// `Server::apply_txn`): no tree op and no new wait; the waits it consumed
/// or cancelled end, each consumed one with an error `Finished` for its
/// session, and a call's caller is answered the error. Every member
/// derives the same from the same txn.
pub(super) fn refused_step(rt: &RecipeTxn, e: &ApplyError) -> RecipeTxn {
    let reply = error_reply(e.code(), format!("the step's writes do not apply: {e}"));
    let finished = |token: &String| Notification::Finished {
        module: rt.module.clone(),
        token: token.clone(),
        reply: reply.clone(),
    };
    RecipeTxn {
        module: rt.module.clone(),
        ops: Vec::new(),
        consumed: rt.consumed.clone(),
        cancelled: rt.cancelled.clone(),
        waits: Vec::new(),
        notifications: rt
            .consumed
            .iter()
            .map(|(session, token)| (*session, encode(&finished(token))))
            .collect(),
        reply: if rt.reply.is_empty() {
            Vec::new()
        } else {
            encode(&reply)
        },
    }
}

impl Server {
    /// Gives the pipeline a recipe engine (the shell's wasm runtime).
    pub fn set_recipe_engine(&mut self, engine: Box<dyn RecipeEngine>) {
        self.recipes = Some(engine);
        self.rescan_waits = true;
        // A new engine serves nothing yet: tell it the deployed modules.
        self.deploys.installed.clear();
        self.sync_engine();
        if self.role.decides() {
            self.seed_recipe_counters();
        }
    }

    /// The replicated table of recipe waits.
    pub fn recipe_waits(&self) -> &crate::recipe::RecipeWaits {
        &self.waits
    }

    /// The loaded modules and their counters; `None` without an engine.
    pub fn recipe_modules(&self) -> Option<Vec<ModuleReport>> {
        self.recipes
            .as_ref()
            .map(|e| self.ensemble_reports(e.modules()))
    }

    /// The text of `recp` and /zookeeper/recipes; `None` without an engine.
    pub fn recipes_report(&self) -> Option<String> {
        Some(render_report(&self.recipe_modules()?, &self.waits))
    }

    /// The Stat of the virtual node /zookeeper/recipes: its data's
    /// length and its ACL's aversion; `None` without an engine.
    pub(super) fn recipes_node_stat(&self) -> Option<Stat> {
        let data = self.recipes_report()?;
        Some(Stat {
            data_length: data.len() as i32,
            aversion: self.waits.recipes_acl.aversion,
            ..Stat::default()
        })
    }

    /// Reads of the virtual node /zookeeper/recipes (what is loaded, as
    /// `recp` shows it), present when recipes are enabled, by a client
    /// with `auth`. Its ACL is the replicated one deploying is checked
    /// against ([`crate::recipe::RecipesAcl`]): getData and getChildren
    /// need READ in it, getACL READ or ADMIN (digests masked without
    /// ADMIN), as for any node. Its only write is setACL (`deploy.rs`),
    /// besides deploys and undeploys; it is not in the tree, so any other
    /// write to it fails as for any missing node.
    pub(super) fn recipes_node_read(
        &self,
        auth: &AuthInfo,
        req: &Request,
    ) -> Option<Result<Response, ErrorCode>> {
        self.recipes.as_ref()?;
        let path = match req {
            Request::Exists { path, .. }
            | Request::GetData { path, .. }
            | Request::GetChildren { path, .. }
            | Request::GetChildren2 { path, .. }
            | Request::GetAcl { path } => path,
            _ => return None,
        };
        if path != RECIPES_NODE {
            return None;
        }
        let acl = &self.waits.recipes_acl.acl;
        if let Request::GetAcl { .. } = req {
            return Some(
                super::reads::acl_reply(acl, auth).map(|acl| Response::GetAcl {
                    acl,
                    stat: self.recipes_node_stat().unwrap_or_default(),
                }),
            );
        }
        if !matches!(req, Request::Exists { .. }) {
            if let Err(e) = super::acl::check(acl, wazoo_proto::perms::READ, auth) {
                return Some(Err(e));
            }
        }
        let data = self.recipes_report()?.into_bytes();
        let stat = self.recipes_node_stat()?;
        Some(Ok(match req {
            Request::Exists { .. } => Response::Stat(stat),
            Request::GetData { .. } => Response::GetData {
                data: Some(data),
                stat,
            },
            Request::GetChildren { .. } => Response::GetChildren {
                children: Vec::new(),
            },
            _ => Response::GetChildren2 {
                children: Vec::new(),
                stat,
            },
        }))
    }

    /// The recipe call `req` makes: a native call, or, on a member that
    /// runs recipes, a create under /zookeeper/calls (`node_calls`); an
    /// error for a create there that is no valid call. `None` for any
    /// other request.
    pub(super) fn recipe_call_of<'a>(
        &self,
        req: &'a Request,
        session: i64,
        xid: i32,
    ) -> Option<Result<RecipeCall<'a>, ErrorCode>> {
        if let Request::RecipeCall {
            module,
            method,
            args,
            guid,
        } = req
        {
            return Some(Ok(RecipeCall {
                module,
                method,
                args: std::borrow::Cow::Borrowed(args),
                guid: call_guid(guid, session, xid),
                node: None,
            }));
        }
        self.recipes.as_ref()?;
        Some(node_calls::parse(req)?.map(|p| RecipeCall {
            module: p.module,
            method: p.method,
            args: std::borrow::Cow::Owned(p.args),
            guid: call_guid(p.guid.unwrap_or_default(), session, xid),
            node: Some(p.node),
        }))
    }

    /// A recipe call from one of this member's connections, on the member
    /// that decides (leader or standalone).
    pub(super) fn local_recipe_call(
        &mut self,
        conn: ConnId,
        xid: i32,
        session: i64,
        auth: &AuthInfo,
        call: RecipeCall<'_>,
    ) {
        let node_op = call.node.as_ref().map(|n| n.op);
        let (rt, changes) = if self.offloads() {
            match self.prep_call_quick(auth, session, &call) {
                Some(done) => done,
                None => return self.offload_call(Some(conn), xid, session, auth, call),
            }
        } else {
            self.prep_call(auth, session, call)
        };
        self.commit_local_call(conn, xid, session, rt, changes, node_op);
    }

    /// A local call's step is done: its txn, or its reply. `node_op`: the
    /// opcode of the create that made the call, answered as that create.
    fn commit_local_call(
        &mut self,
        conn: ConnId,
        xid: i32,
        session: i64,
        rt: RecipeTxn,
        changes: Changes,
        node_op: Option<wazoo_proto::OpCode>,
    ) {
        if let Some(op) = node_op {
            let Some(path) = node_calls::created_call_node(&rt.ops).map(str::to_string) else {
                // Failed: the create fails with the call's error.
                let d = self.error_after_outstanding(failed_code(&rt.reply));
                return self.push_deferred(conn, xid, d);
            };
            return self.propose(
                Origin::Conn(conn),
                xid,
                session,
                Txn::Recipe(Box::new(rt)),
                changes,
                Some(WriteKind::Create { op, path }),
                false,
            );
        }
        if rt.is_empty() {
            // Read-only or failed: no txn. The reply waits until what the
            // step read is committed (every txn proposed before it, if any:
            // right after an election `last_proposed` is the new epoch's
            // base, which no txn carries, so waiting for it would wait for
            // the epoch's first write).
            let d = self.reply_after_outstanding(Response::Recipe(rt.reply));
            return self.push_deferred(conn, xid, d);
        }
        let reply = rt.reply.clone();
        self.propose(
            Origin::Conn(conn),
            xid,
            session,
            Txn::Recipe(Box::new(rt)),
            changes,
            Some(WriteKind::Recipe(reply)),
            false,
        );
    }

    /// A recipe call another member forwarded: always a txn, which carries
    /// the reply back to that member.
    pub(super) fn remote_recipe_call(
        &mut self,
        cxid: i32,
        session: i64,
        auth: &AuthInfo,
        call: RecipeCall<'_>,
    ) {
        let node = call.node.is_some();
        let (rt, changes) = if self.offloads() {
            match self.prep_call_quick(auth, session, &call) {
                Some(done) => done,
                None => return self.offload_call(None, cxid, session, auth, call),
            }
        } else {
            self.prep_call(auth, session, call)
        };
        self.propose_remote_call(cxid, session, rt, changes, node);
    }

    /// A forwarded call's step is done: its txn carries the reply to the
    /// follower; a call made by a create that failed is an error txn, as
    /// a failed create is.
    pub(super) fn propose_remote_call(
        &mut self,
        cxid: i32,
        session: i64,
        rt: RecipeTxn,
        changes: Changes,
        node: bool,
    ) {
        if node && node_calls::created_call_node(&rt.ops).is_none() {
            let code = failed_code(&rt.reply).code();
            return self.propose_error(session, cxid, vec![code]);
        }
        self.propose(
            Origin::Remote,
            cxid,
            session,
            Txn::Recipe(Box::new(rt)),
            changes,
            None,
            false,
        );
    }

    /// A getData that is a read call (`node_calls::read_call`), at its turn
    /// in its connection's line: `None` for any other request. Its step
    /// runs against the committed tree, on this member, as the caller's
    /// identities; first within the engine's small budget, then (steps run
    /// off this thread) on a worker when `may_offload`, or else fails with
    /// ThrottledOp (inside a multiRead, whose ops answer at once).
    pub(super) fn serve_read_call(
        &mut self,
        conn: ConnId,
        xid: i32,
        req: &Request,
        may_offload: bool,
    ) -> Option<ReadCallRun> {
        let Request::GetData { path, .. } = req else {
            return None;
        };
        self.recipes.as_ref()?;
        let call = node_calls::read_call(path)?;
        let Some(c) = self.conns.get(&conn) else {
            return Some(ReadCallRun::Answered(Err(ErrorCode::ConnectionLoss)));
        };
        let (session, auth) = (c.session, c.auth.clone());
        let args = match node_calls::read_args_to_msgpack(call.args) {
            Ok(a) => a,
            Err(e) => return Some(ReadCallRun::Answered(Err(e))),
        };
        let guid = call_guid("", session, xid);
        let step = Step::Call {
            method: call.method,
            args: &args,
            guid: &guid,
            node: None,
        };
        let quick = self.offloads();
        let ran = self.step_against(&auth, session, call.module, &step, quick, true);
        Some(match ran {
            Some(o) => ReadCallRun::Answered(self.read_call_response(&o)),
            None if may_offload => {
                let module = call.module.to_string();
                let method = call.method.to_string();
                ReadCallRun::Offloaded(
                    self.offload_read_call(conn, session, &auth, module, method, args, guid),
                )
            }
            None => ReadCallRun::Answered(Err(ErrorCode::ThrottledOp)),
        })
    }

    /// What a getData that made a read call answers, for what its step
    /// did: the call node's JSON, or an error (NotReadOnly if it asked to
    /// change anything: nothing of it applies).
    fn read_call_response(&self, o: &StepOutcome) -> Result<Response, ErrorCode> {
        let changed = !o.ops.is_empty() || !o.notes.is_empty();
        let data = node_calls::read_result(&o.reply, changed)?;
        // As a call node's data would be bounded.
        super::prep::check_data_size(&self.cfg, Some(&data))
            .map_err(|_| ErrorCode::BadArguments)?;
        let stat = Stat {
            data_length: data.len() as i32,
            ..Stat::default()
        };
        Ok(Response::GetData {
            data: Some(data),
            stat,
        })
    }

    /// A call's first try on this thread (see `try_step_here`).
    fn prep_call_quick(
        &mut self,
        auth: &AuthInfo,
        session: i64,
        call: &RecipeCall<'_>,
    ) -> Option<(RecipeTxn, Changes)> {
        let step = Step::Call {
            method: call.method,
            args: &call.args,
            guid: &call.guid,
            node: call.node.as_ref(),
        };
        let outcome = self.try_step_here(auth, session, call.module, &step)?;
        Some(self.finish_step(auth, session, call.module, &step, outcome))
    }

    fn prep_call(
        &mut self,
        auth: &AuthInfo,
        session: i64,
        call: RecipeCall<'_>,
    ) -> (RecipeTxn, Changes) {
        let step = Step::Call {
            method: call.method,
            args: &call.args,
            guid: &call.guid,
            node: call.node.as_ref(),
        };
        self.prep_recipe(auth, session, call.module, step)
    }

    /// Runs one step against the prep view and turns its outcome into a
    /// txn (and the view changes its ops make).
    fn prep_recipe(
        &mut self,
        auth: &AuthInfo,
        session: i64,
        module: &str,
        step: Step<'_>,
    ) -> (RecipeTxn, Changes) {
        let outcome = self.run_step_here(auth, session, module, &step);
        self.finish_step(auth, session, module, &step, outcome)
    }

    /// Runs one step on this thread against the prep view.
    fn run_step_here(
        &mut self,
        auth: &AuthInfo,
        session: i64,
        module: &str,
        step: &Step<'_>,
    ) -> StepOutcome {
        self.step_against(auth, session, module, step, false, false)
            .expect("a full run always answers")
    }

    /// The engine's first try at a step on this thread, within its small
    /// budget: `None` if the step needs more (it then goes to a worker).
    fn try_step_here(
        &mut self,
        auth: &AuthInfo,
        session: i64,
        module: &str,
        step: &Step<'_>,
    ) -> Option<StepOutcome> {
        self.step_against(auth, session, module, step, true, false)
    }

    /// Runs one step on this thread (`quick`: the engine's first try only)
    /// against the prep view, or with `committed_only` against the
    /// committed tree alone (a read call).
    fn step_against(
        &mut self,
        auth: &AuthInfo,
        session: i64,
        module: &str,
        step: &Step<'_>,
        quick: bool,
        committed_only: bool,
    ) -> Option<StepOutcome> {
        let mut engine = self.recipes.take();
        // Empty: no allocation.
        let no_changes = super::Outstanding::default();
        let (outstanding, zxid) = if committed_only {
            (&no_changes, self.last_applied.next())
        } else {
            (&self.prep.outstanding, self.prep_zxid())
        };
        let mut host = PrepHost {
            cfg: &self.cfg,
            view: View {
                tree: &self.tree,
                outstanding,
                local: super::prep::Local::default(),
                zxid,
                time_ms: self.wall_ms,
                reads: None,
                recipes_node: None,
            },
            auth,
            session,
            guid: String::new(),
            module,
            ops: Vec::new(),
            waits: Vec::new(),
            notes: Vec::new(),
            staged_bytes: 0,
            saw_own_stamp: false,
        };
        let reply = run_engine(engine.as_deref_mut(), &mut host, module, step, quick);
        self.recipes = engine;
        Some(StepOutcome::of(host, reply?).0)
    }

    /// Turns what a step did into its txn (and the view changes its ops
    /// make), checking its waits against the wait table as it is now. A
    /// call made by a create gets its call node in the same txn; a wait of
    /// such a call ends by setting that node's data, not by a notification.
    fn finish_step(
        &mut self,
        auth: &AuthInfo,
        session: i64,
        module: &str,
        step: &Step<'_>,
        outcome: StepOutcome,
    ) -> (RecipeTxn, Changes) {
        let StepOutcome {
            reply,
            ops,
            waits,
            mut notes,
            changes,
        } = outcome;
        let consumed = match step {
            Step::Call { .. } => Vec::new(),
            Step::Callback(w) => vec![(w.session, w.token.clone())],
        };
        let mut reply = match reply {
            Reply::Wait { token } => self.check_wait(session, module, &token, &waits, step),
            r => r,
        };
        let (mut ops, mut waits, mut changes) = match reply {
            // A failed step changes nothing of what it staged.
            Reply::Error { .. } => {
                notes.clear();
                (Vec::new(), Vec::new(), Vec::new())
            }
            // A finished step waits on nothing: watches it registered on
            // the way (an exists that found the node gone) are dropped.
            Reply::Done(_) => (ops, Vec::new(), changes),
            Reply::Wait { .. } => (ops, waits, changes),
        };
        let call_node = match step {
            Step::Call {
                node: Some(call), ..
            } if !matches!(reply, Reply::Error { .. }) => {
                let data = node_calls::result_data(&reply);
                let mut view = self.view_after(std::mem::take(&mut changes));
                match node_calls::stage_call_node(&self.cfg, &mut view, auth, session, call, &data)
                {
                    Ok((created, path)) => {
                        ops.extend(created);
                        changes = view.into_changes();
                        path
                    }
                    // The call node cannot be made: the call fails, and
                    // nothing of it applies.
                    Err(code) => {
                        reply = error_reply(code, "the call node cannot be created");
                        (ops, waits) = (Vec::new(), Vec::new());
                        notes.clear();
                        String::new()
                    }
                }
            }
            Step::Callback(w) => w.call_node.clone(),
            Step::Call { .. } => String::new(),
        };
        for w in &mut waits {
            w.call_node.clone_from(&call_node);
        }
        let mut rt = RecipeTxn {
            module: module.to_string(),
            ops,
            consumed,
            cancelled: Vec::new(),
            waits,
            notifications: notes,
            reply: Vec::new(),
        };
        match step {
            Step::Call { .. } => rt.reply = encode(&reply),
            Step::Callback(_) if matches!(reply, Reply::Wait { .. }) => {}
            Step::Callback(w) if !w.call_node.is_empty() => {
                let mut view = self.view_after(std::mem::take(&mut changes));
                let set =
                    node_calls::stage_result(&self.cfg, &mut view, w.session, &w.call_node, &reply);
                rt.ops.extend(set);
                changes = view.into_changes();
            }
            Step::Callback(w) => {
                rt.notifications.push((
                    w.session,
                    encode(&Notification::Finished {
                        module: module.to_string(),
                        token: w.token.clone(),
                        reply,
                    }),
                ));
            }
        }
        (rt, changes)
    }

    /// The prep view with `changes` (a step's) made in it, for staging
    /// more of the same txn.
    fn view_after(&self, changes: Changes) -> View<'_> {
        View {
            tree: &self.tree,
            outstanding: &self.prep.outstanding,
            local: super::prep::Local::from(changes),
            zxid: self.prep_zxid(),
            time_ms: self.wall_ms,
            reads: None,
            recipes_node: None,
        }
    }

    /// A step that answers `Wait` must leave a watch registered with that
    /// token, and a session may not pile up waits without bound.
    fn check_wait(
        &self,
        session: i64,
        module: &str,
        token: &str,
        staged: &[RecipeWait],
        step: &Step<'_>,
    ) -> Reply {
        let key = WaitKey::new(session, module, token);
        let consumed_here = matches!(step, Step::Callback(w) if w.token == token);
        let existing = self
            .waits
            .get(&key)
            .is_some_and(|w| w.fired.is_none() && !consumed_here);
        if !existing && !staged.iter().any(|w| w.token == token) {
            return error_reply(
                ErrorCode::BadArguments,
                format!("recipe {module:?} answered Wait {{ token: {token:?} }} but registered no watch with that token"),
            );
        }
        let new = staged
            .iter()
            .filter(|w| self.waits.get(&w.key()).is_none())
            .count();
        let max = self.cfg.max_recipe_waits_per_session;
        if self.waits.count_for(session) + new > max {
            return error_reply(
                ErrorCode::ThrottledOp,
                format!("session 0x{session:x} has too many pending recipe waits (limit {max})"),
            );
        }
        Reply::Wait {
            token: token.to_string(),
        }
    }

    /// Applies a recipe txn's wait table changes and delivers its
    /// notifications to the sessions held here (after its changes and their
    /// watch events, which `apply_txn` sent first).
    pub(super) fn apply_recipe_effects(
        &mut self,
        session: i64,
        zxid: wazoo_proto::Zxid,
        rt: &RecipeTxn,
    ) {
        for (s, token) in &rt.consumed {
            let key = WaitKey::new(*s, rt.module.clone(), token.clone());
            self.running_callbacks.remove(&key);
            if self.waits.get(&key).is_some_and(|w| w.fired.is_some()) {
                self.waits.remove(&key);
            }
        }
        for (s, token) in &rt.cancelled {
            let key = WaitKey::new(*s, rt.module.clone(), token.clone());
            self.running_callbacks.remove(&key);
            self.waits.remove(&key);
        }
        for w in &rt.waits {
            let mut w = w.clone();
            w.session = session;
            w.module = rt.module.clone();
            w.fired = None;
            if self.sessions.get(session).is_some() {
                self.waits.register(w);
            }
        }
        for (to, payload) in &rt.notifications {
            // A wait's end is kept, to be sent again if the session was
            // away (see `redeliver_recipe_results`).
            if let Ok(Notification::Finished { module, token, .. }) =
                abi::decode::<Notification>(payload)
            {
                let max = self.cfg.max_recipe_waits_per_session;
                self.waits.keep_result(
                    WaitKey::new(*to, module, token),
                    zxid,
                    payload.clone(),
                    max,
                );
            }
            let Some(&conn) = self.session_conn.get(to) else {
                continue;
            };
            // Only a connection that asked for wazoo's frames gets one.
            if !self.conns.get(&conn).is_some_and(|c| c.native_recipes) {
                continue;
            }
            let buf = self.send_buf(conn);
            wazoo_proto::frame::write_recipe_notification(buf, zxid.to_wire(), payload);
            self.stats.packets_sent += 1;
        }
    }

    /// A session re-attached on `conn`: the `Finished` notifications of its
    /// waits that ended are sent again (one pushed while the client was
    /// away would be lost otherwise); clients ignore those they are not
    /// waiting for.
    pub(super) fn redeliver_recipe_results(&mut self, session: i64, conn: ConnId) {
        if !self.waits.has_native_for(session) {
            return;
        }
        if let Some(c) = self.conns.get_mut(&conn) {
            c.native_recipes = true;
        }
        let payloads: Vec<Vec<u8>> = self
            .waits
            .results_of(session)
            .into_iter()
            .map(<[u8]>::to_vec)
            .collect();
        let zxid = self.last_applied;
        for p in payloads {
            wazoo_proto::frame::write_recipe_notification(self.send_buf(conn), zxid.to_wire(), &p);
            self.stats.packets_sent += 1;
        }
    }

    /// Leader: runs the callbacks owed (and, after a role change or a new
    /// engine, every fired wait of the replicated table).
    pub(super) fn run_owed_callbacks(&mut self) {
        if !self.role.decides() || self.recipes.is_none() {
            return;
        }
        if std::mem::take(&mut self.rescan_waits) {
            self.owed_callbacks.extend(self.waits.fired());
        }
        loop {
            // Callbacks of waits a proposed txn will fire come first (see
            // `find_prefired`); then those owed by applied txns.
            let (key, w) = if let Some((key, path, event)) = self.prefired.pop_front() {
                // The same wait registered again by a txn still in flight:
                // the table's registration is the one that txn replaces,
                // and a callback of it would answer the earlier call. The
                // firing txn, once applied, fires the new registration,
                // which is then called back as owed.
                if self.registration_in_flight(&key) {
                    continue;
                }
                let Some(mut w) = self.waits.get(&key).cloned() else {
                    continue;
                };
                if w.fired.is_none() {
                    w.fired = Some((path, event));
                }
                (key, w)
            } else if let Some(key) = self.owed_callbacks.pop_front() {
                let Some(w) = self.waits.get(&key).cloned() else {
                    continue;
                };
                if w.fired.is_none() {
                    continue;
                }
                (key, w)
            } else {
                break;
            };
            if self.running_callbacks.contains(&key) || !self.sessions.is_live(w.session) {
                continue;
            }
            let auth = AuthInfo {
                ids: w.auth.clone(),
            };
            let (rt, changes) = if self.offloads() {
                let step = Step::Callback(&w);
                match self.try_step_here(&auth, w.session, &w.module, &step) {
                    Some(outcome) => self.finish_step(&auth, w.session, &w.module, &step, outcome),
                    None => {
                        self.running_callbacks.insert(key.clone());
                        self.offload_callback(key, auth, w);
                        continue;
                    }
                }
            } else {
                self.prep_recipe(&auth, w.session, &w.module, Step::Callback(&w))
            };
            self.running_callbacks.insert(key);
            self.propose(
                Origin::Internal,
                super::ensemble::INTERNAL_CXID,
                w.session,
                Txn::Recipe(Box::new(rt)),
                changes,
                None,
                false,
            );
        }
    }

    /// Whether a txn proposed and not yet applied registers the wait `key`
    /// (again): its session's recipe txn of that module naming the token.
    fn registration_in_flight(&self, key: &WaitKey) -> bool {
        self.prep.proposals.iter().any(|p| {
            p.record.header.session_id == key.session
                && matches!(&p.record.txn, Txn::Recipe(rt)
                    if rt.module == key.module && rt.waits.iter().any(|w| w.token == key.token))
        })
    }

    /// Leader, in `propose`: the waits the txn being proposed will fire
    /// (from its prep changes: a node created, deleted or its data set; a
    /// child created or deleted), so their callbacks are prepped right
    /// behind it (their view includes it) instead of after it is applied:
    /// a handoff costs one commit round, not two. Applying the txn still
    /// marks them fired (and a new leader runs what was not proposed); a
    /// wait it would fire that this misses is called back after the apply.
    pub(super) fn find_prefired(&mut self, changes: &Changes) {
        use wazoo_proto::EventType as E;
        if !self.role.decides() || self.recipes.is_none() || self.waits.is_empty() {
            return;
        }
        let mut events: Vec<(String, E)> = Vec::new();
        for (path, new) in changes {
            let old = self.prep.outstanding.get(&self.tree, path);
            let parent = || wazoo_proto::path::parent(path).to_string();
            match (&old, new) {
                (None, Some(_)) => {
                    events.push((path.clone(), E::NodeCreated));
                    events.push((parent(), E::NodeChildrenChanged));
                }
                (Some(_), None) => {
                    events.push((path.clone(), E::NodeDeleted));
                    events.push((parent(), E::NodeChildrenChanged));
                }
                (Some(o), Some(n)) if o.stat.version != n.stat.version => {
                    events.push((path.clone(), E::NodeDataChanged));
                }
                _ => {}
            }
        }
        for (path, event) in events {
            for (key, seen) in self.waits.matching(&path, event) {
                self.prefired.push_back((key, path.clone(), seen));
            }
        }
    }

    /// Leader, every tick: waits on a module no longer loaded end.
    pub(super) fn end_waits_of_unloaded_modules(&mut self) {
        let Some(engine) = &self.recipes else {
            return;
        };
        if !self.role.decides() {
            return;
        }
        let gone: Vec<String> = self
            .waits
            .modules()
            .into_iter()
            .filter(|m| !engine.has_module(m))
            .map(str::to_string)
            .collect();
        for m in gone {
            self.recipe_module_unloaded(&m);
        }
    }

    /// Leader: a module was unloaded; every wait on it ends with an error
    /// sent to its session.
    pub fn recipe_module_unloaded(&mut self, module: &str) {
        if !self.role.decides() {
            return;
        }
        for key in self.waits.of_module(module) {
            if self.running_callbacks.contains(&key) {
                continue;
            }
            let WaitKey { session, token, .. } = key.clone();
            let reply = error_reply(
                ErrorCode::Unimplemented,
                format!("recipe module {module:?} was unloaded while this call waited"),
            );
            let call_node = self
                .waits
                .get(&key)
                .map(|w| w.call_node.clone())
                .unwrap_or_default();
            // A call made by a create learns it from its call node.
            let (ops, notifications, changes) = if call_node.is_empty() {
                let note = Notification::Finished {
                    module: module.to_string(),
                    token: token.clone(),
                    reply,
                };
                (Vec::new(), vec![(session, encode(&note))], Vec::new())
            } else {
                let mut view = self.view_after(Vec::new());
                let set =
                    node_calls::stage_result(&self.cfg, &mut view, session, &call_node, &reply);
                (set.into_iter().collect(), Vec::new(), view.into_changes())
            };
            let rt = RecipeTxn {
                module: module.to_string(),
                ops,
                consumed: Vec::new(),
                cancelled: vec![(session, token)],
                waits: Vec::new(),
                notifications,
                reply: Vec::new(),
            };
            self.running_callbacks.insert(key);
            self.propose(
                Origin::Internal,
                super::ensemble::INTERNAL_CXID,
                session,
                Txn::Recipe(Box::new(rt)),
                changes,
                None,
                false,
            );
        }
    }
}

impl RecipeTxn {
    /// Nothing to replicate and nothing to say but the reply.
    fn is_empty(&self) -> bool {
        self.ops.is_empty()
            && self.consumed.is_empty()
            && self.cancelled.is_empty()
            && self.waits.is_empty()
            && self.notifications.is_empty()
    }
}

/// Data carried by prep records so a recipe reads what outstanding writes
/// will leave (`None`: the tree's data is current). Recipes read null data
/// as empty.
pub(super) fn record_data(data: Option<&[u8]>) -> Option<Arc<[u8]>> {
    Some(Arc::from(data.unwrap_or_default()))
}

/// What one recipe call does to a tree, without a pipeline: the reply and
/// what the step staged (`wazoo recipe run` prints it).
#[derive(Debug, Clone)]
pub struct DryRun {
    pub reply: Reply,
    /// The tree ops the step's txn would carry (empty when it failed).
    pub ops: Vec<Txn>,
    /// The watches it registered with a callback.
    pub waits: Vec<RecipeWait>,
    /// (session, encoded [`Notification`]) it would send.
    pub notifications: Vec<(i64, Vec<u8>)>,
}

/// Runs `method` of `module` once against `tree` alone (no outstanding
/// changes), as prep runs a call: the same host (ACLs with `auth`, the
/// `jute.maxbuffer` bound on what is staged, sequence numbers, ephemeral
/// owners), with `zxid` and `time_ms` as the txn's. The tree is not
/// changed. What a failed step staged is discarded, as prep discards it.
#[allow(clippy::too_many_arguments)]
pub fn dry_run_call(
    cfg: &ServerConfig,
    tree: &crate::tree::DataTree,
    engine: &mut dyn RecipeEngine,
    auth: &AuthInfo,
    caller: &CallerInfo,
    module: &str,
    method: &str,
    args: &[u8],
    zxid: wazoo_proto::Zxid,
    time_ms: i64,
) -> DryRun {
    let outstanding = super::prep::Outstanding::default();
    let mut host = PrepHost {
        cfg,
        view: View {
            tree,
            outstanding: &outstanding,
            local: super::prep::Local::default(),
            zxid,
            time_ms,
            reads: None,
            recipes_node: None,
        },
        auth,
        session: caller.session,
        guid: caller.guid.clone(),
        module,
        ops: Vec::new(),
        waits: Vec::new(),
        notes: Vec::new(),
        staged_bytes: 0,
        saw_own_stamp: false,
    };
    // The step is told the identities its ACL checks use.
    let caller = CallerInfo {
        ids: caller_info(caller.session, &caller.guid, auth).ids,
        ..caller.clone()
    };
    let reply = engine.call(module, method, args, &caller, &mut host);
    if matches!(reply, Reply::Error { .. }) {
        return DryRun {
            reply,
            ops: Vec::new(),
            waits: Vec::new(),
            notifications: Vec::new(),
        };
    }
    DryRun {
        reply,
        ops: host.ops,
        waits: host.waits,
        notifications: host.notes,
    }
}
