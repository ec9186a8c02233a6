//! The pipeline's ensemble roles (docs/ARCHITECTURE.md, "The ensemble";
//! ZooKeeper Internals, "Atomic Broadcast").
//!
//! - The **leader** preps every write of the ensemble, its own clients' and
//!   those followers forward, against one view (committed tree + every
//!   outstanding change), and proposes the txns through ZAB. A forwarded
//!   write that fails in prep becomes an error txn, as in ZooKeeper, so the
//!   follower learns the outcome in order with the session's other writes.
//!   The leader alone expires global sessions (from the touches followers
//!   report; a member expires its local sessions itself)
//!   and reaps containers, and it tracks which member owns each session to
//!   answer SessionMoved.
//! - A **follower** (or observer) serves reads locally, forwards writes,
//!   new sessions and syncs to the leader, and answers each forwarded
//!   request when the committed txn carrying its (session, cxid) is applied
//!   here, building the reply from the txn and the tree.
//! - Every member applies every committed txn in zxid order.

use std::collections::HashSet;

use wazoo_proto::jute::Reader;
use wazoo_proto::{ConnectResponse, ErrorCode, OpCode, OpResult, Request, Response, Zxid};

use super::{
    session, AuthInfo, ConnId, DataTree, Origin, PeerMsg, PrepError, Queued, Reply, Role, Server,
    Txn, TxnHeader, TxnRecord, WriteKind,
};

/// The cxid of txns the leader starts itself (expiry, reaping), so they
/// never match a client's request.
pub(super) const INTERNAL_CXID: i32 = i32::MIN;

/// What a follower keeps of a forwarded write to build its reply.
#[derive(Debug, Clone)]
pub(crate) struct WriteMeta {
    op: OpCode,
    /// The opcode of each op of a multi (create vs create2 results differ).
    sub_ops: Vec<OpCode>,
    /// The request's path (`None`: it had none, or a sync's null path).
    path: Option<String>,
    /// A re-attach to a session this member did not know, asked of the
    /// leader (see `follower_revalidate`): answered with a handshake.
    revalidate: bool,
}

#[derive(Debug, Default)]
pub(crate) struct EnsembleState {
    touched: HashSet<i64>,
    claimed: Vec<i64>,
    /// Leader: the member each session is attached to.
    owners: std::collections::HashMap<i64, u64>,
}

impl EnsembleState {
    pub(super) fn claim(&mut self, session: i64) {
        self.claimed.push(session);
        self.touched.insert(session);
    }

    pub(super) fn touched(&mut self, session: i64) {
        self.touched.insert(session);
    }

    /// Leader (or standalone): the session is attached to this member.
    pub(super) fn owned_here(&mut self, session: i64, me: u64) {
        self.owners.insert(session, me);
    }

    pub(super) fn forget_owner(&mut self, session: i64) {
        self.owners.remove(&session);
    }
}

impl Server {
    // ----- follower side ---------------------------------------------------

    /// A new client session on a follower: the id is made here (this
    /// member's id in its top byte), the leader makes it a txn. The
    /// password stays here (the connection answers with it); the leader
    /// gets its verifier.
    pub(super) fn follower_new_session(
        &mut self,
        conn: ConnId,
        timeout: i32,
        verifier: session::Verifier,
    ) {
        let id = self.sessions.next_session_id();
        // A ZooKeeper leader's members know a password by its id only.
        let verifier = (!self.cfg.zookeeper_passwords).then_some(verifier);
        self.sessions.add(id, timeout, verifier, self.mono_ms);
        self.session_conn.insert(id, conn);
        let now = self.mono_ms;
        if let Some(c) = self.conns.get_mut(&conn) {
            if verifier.is_none() {
                c.password = session::zookeeper_password(id).to_vec();
            }
            c.session = id;
            c.queue.push_back(Queued::Write {
                xid: 0,
                zxid: Zxid::ZERO,
                started_ms: now,
                result: None,
                close_after: false,
                meta: Some(WriteMeta {
                    op: OpCode::CreateSession,
                    sub_ops: Vec::new(),
                    path: None,
                    revalidate: false,
                }),
            });
        }
        self.out
            .push(super::Output::ToLeader(PeerMsg::CreateSession {
                session: id,
                timeout_ms: timeout,
                verifier,
            }));
    }

    /// A client re-attaches to a session this member does not know: it
    /// may not have applied the session's creation yet (the client was
    /// just on another member), so the leader decides, as ZooKeeper's
    /// follower revalidates a session with its leader. The leader answers
    /// with a no-op txn for the session if it lives, an error txn if not;
    /// once it is applied here (and with it every txn before, the
    /// session's creation and its password's verifier included) the
    /// password is checked and the handshake answered. Only then is the
    /// session claimed: a client that knows the id but not the password
    /// moves nothing.
    pub(super) fn follower_revalidate(&mut self, conn: ConnId, session: i64) {
        self.session_conn.insert(session, conn);
        let now = self.mono_ms;
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        c.queue.push_back(Queued::Write {
            xid: 0,
            zxid: Zxid::ZERO,
            started_ms: now,
            result: None,
            close_after: false,
            meta: Some(WriteMeta {
                op: OpCode::Sync,
                sub_ops: Vec::new(),
                path: Some("/".into()),
                revalidate: true,
            }),
        });
        self.out
            .push(super::Output::ToLeader(PeerMsg::Revalidate { session }));
    }

    /// Sends a client's write (or sync, or close) to the leader and queues
    /// its reply slot.
    pub(super) fn forward_write(&mut self, conn: ConnId, xid: i32, session: i64, req: Request) {
        let op = req.opcode();
        let sub_ops = match &req {
            Request::Multi(ops) => ops.iter().map(Request::opcode).collect(),
            _ => Vec::new(),
        };
        let path = req.path().map(str::to_string);
        let audit = self.audit_request(conn, session, &req);
        let mut body = Vec::new();
        req.write_body(&mut body);
        let now = self.mono_ms;
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let auth = c.auth.ids.clone();
        if let Some(a) = audit {
            // Kept apart from the connection: the write is recorded once
            // applied even if the client has gone by then.
            self.forwarded_audits.insert((session, xid), a);
        }
        c.queue.push_back(Queued::Write {
            xid,
            zxid: Zxid::ZERO,
            started_ms: now,
            result: None,
            close_after: op == OpCode::CloseSession,
            meta: Some(WriteMeta {
                op,
                sub_ops,
                path,
                revalidate: false,
            }),
        });
        let local = self.sessions.is_local(session);
        self.out.push(super::Output::ToLeader(PeerMsg::Forward {
            session,
            cxid: xid,
            auth,
            op: op.code(),
            body,
            local,
        }));
    }

    /// Reports session activity to the leader, which decides expiry.
    pub(super) fn report_touches(&mut self) {
        if self.ens.touched.is_empty() && self.ens.claimed.is_empty() {
            return;
        }
        let mut sessions: Vec<i64> = self.ens.touched.drain().collect();
        sessions.sort_unstable();
        let claimed = std::mem::take(&mut self.ens.claimed);
        self.out.push(super::Output::ToLeader(PeerMsg::Touch {
            sessions,
            claimed,
        }));
    }

    // ----- leader side -----------------------------------------------------

    pub(super) fn on_peer(&mut self, from: u64, msg: PeerMsg) {
        if !matches!(self.role, Role::Leader { .. }) {
            // A stale message for a leader we no longer are: the follower
            // fails its pending requests when its role changes.
            return;
        }
        match msg {
            PeerMsg::CreateSession {
                session,
                timeout_ms,
                verifier,
            } => {
                if !self.can_propose() {
                    return;
                }
                self.sessions
                    .add(session, timeout_ms, verifier, self.mono_ms);
                self.ens.owners.insert(session, from);
                self.propose_create_session(session, timeout_ms, verifier);
            }
            PeerMsg::Revalidate { session } => {
                // Ordered behind every txn proposed before it, as a sync;
                // the follower checks the password once it is applied.
                if !self.can_propose() {
                    return;
                }
                // A session local to this member cannot move (ZooKeeper's
                // leader validates global sessions only).
                if self.sessions.is_live(session) && !self.sessions.is_local(session) {
                    self.propose(
                        Origin::Remote,
                        0,
                        session,
                        Txn::Noop,
                        Vec::new(),
                        None,
                        false,
                    );
                } else {
                    self.propose_error(session, 0, vec![ErrorCode::SessionExpired.code()]);
                }
            }
            PeerMsg::Touch { sessions, claimed } => {
                for s in sessions {
                    self.sessions.touch(s, self.mono_ms);
                }
                // Only sessions the leader knows: a claim of an unknown id
                // (a re-attach being revalidated, or junk) leaves nothing.
                for s in claimed {
                    if self.sessions.get(s).is_some() {
                        self.ens.owners.insert(s, from);
                    }
                }
            }
            PeerMsg::Forward {
                session,
                cxid,
                auth,
                op,
                body,
                local,
            } => {
                let auth = AuthInfo { ids: auth };
                self.leader_forwarded(from, session, cxid, auth, op, &body, local)
            }
            PeerMsg::Plugin(op) => self.prep_plugin(op),
            PeerMsg::Restore(r) => self.prep_restore(r),
        }
    }

    /// Leader: a session's createSession txn, for a session added to the
    /// table already (a follower's new or upgraded session, or one of its
    /// own upgraded); no client of this member waits for it.
    pub(super) fn propose_create_session(
        &mut self,
        session: i64,
        timeout_ms: i32,
        verifier: Option<session::Verifier>,
    ) {
        let txn = Txn::CreateSession {
            timeout_ms,
            verifier,
        };
        self.propose(Origin::Remote, 0, session, txn, Vec::new(), None, false);
    }

    pub(super) fn propose_error(&mut self, session: i64, cxid: i32, errs: Vec<i32>) {
        self.propose(
            Origin::Remote,
            cxid,
            session,
            Txn::Error { errs },
            Vec::new(),
            None,
            false,
        );
    }

    /// A follower's forwarded request. `local`: the session is local to
    /// that follower, so this member does not know it (ZooKeeper's leader
    /// lets through a session it does not know when local sessions are
    /// on); such a session may not own ephemerals or recipe calls (the
    /// follower upgrades it first).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn leader_forwarded(
        &mut self,
        from: u64,
        session: i64,
        cxid: i32,
        auth: AuthInfo,
        op: i32,
        body: &[u8],
        local: bool,
    ) {
        let held = super::recipes::Held::Remote {
            from,
            cxid,
            auth,
            op,
            body: body.to_vec(),
            local,
        };
        let Some(super::recipes::Held::Remote { auth, .. }) = self.hold_behind_step(session, held)
        else {
            return; // behind a call of the session still running
        };
        let req = match Request::read_body(op, &mut Reader::client(body)) {
            Ok(Some(r)) => r,
            Ok(None) => {
                return self.propose_error(session, cxid, vec![ErrorCode::Unimplemented.code()])
            }
            Err(_) => {
                return self.propose_error(session, cxid, vec![ErrorCode::MarshallingError.code()])
            }
        };
        let n_ops = match &req {
            Request::Multi(ops) => ops.len(),
            _ => 1,
        };
        let fail = |code: ErrorCode| -> Vec<i32> {
            if matches!(req, Request::Multi(_)) {
                // Every op of a multi refused for a session-level reason.
                vec![code.code(); n_ops.max(1)]
            } else {
                vec![code.code()]
            }
        };
        if local && self.needs_global_session(&req) {
            let errs = fail(ErrorCode::EphemeralOnLocalSession);
            return self.propose_error(session, cxid, errs);
        }
        if !local && !self.sessions.is_live(session) {
            let errs = fail(ErrorCode::SessionExpired);
            return self.propose_error(session, cxid, errs);
        }
        if !local && self.ens.owners.get(&session).is_some_and(|&o| o != from) {
            // ZooKeeper Programmer's Guide, "ZooKeeper Sessions": the session has moved to another server.
            let errs = fail(ErrorCode::SessionMoved);
            return self.propose_error(session, cxid, errs);
        }
        if let Some(wait) = self.compile_wait(&auth, &req) {
            let held = super::recipes::Held::Remote {
                from,
                cxid,
                auth: auth.clone(),
                op,
                body: body.to_vec(),
                local,
            };
            return self.wait_for_compile(session, &auth, wait, held);
        }
        match self.recipe_call_of(&req, session, cxid) {
            Some(Ok(call)) => return self.remote_recipe_call(cxid, session, &auth, call),
            Some(Err(code)) => return self.propose_error(session, cxid, vec![code.code()]),
            None => {}
        }
        match req {
            Request::CloseSession => {
                if !self.can_propose() {
                    return;
                }
                self.sessions.set_closing(session);
                let changes = self.close_session_changes(session);
                self.propose(
                    Origin::Remote,
                    cxid,
                    session,
                    Txn::CloseSession,
                    changes,
                    None,
                    false,
                );
            }
            Request::Sync { .. } => {
                self.propose(
                    Origin::Remote,
                    cxid,
                    session,
                    Txn::Noop,
                    Vec::new(),
                    None,
                    false,
                );
            }
            req => match self.prep_write(&auth, session, &req) {
                Ok((txn, changes, _kind)) => {
                    self.propose(Origin::Remote, cxid, session, txn, changes, None, false)
                }
                Err(PrepError::Code(code)) => self.propose_error(session, cxid, vec![code.code()]),
                Err(PrepError::Done) => self.propose_error(session, cxid, vec![0]),
                Err(PrepError::MultiFailed(results)) => {
                    let errs = results
                        .iter()
                        .map(|r| match r {
                            OpResult::Error { err } => *err,
                            _ => 0,
                        })
                        .collect();
                    self.propose_error(session, cxid, errs)
                }
            },
        }
    }

    // ----- every member ----------------------------------------------------

    /// A committed txn from ZAB. The leader's own proposals are at the
    /// front of its queue; anything else is decoded and applied here.
    pub(super) fn on_committed(&mut self, zxid: Zxid, record: &[u8]) {
        // Every member logs what it commits (the leader and followers
        // through consensus, an observer of ZooKeeper after applying it).
        self.bytes_since_snapshot += record.len() as u64;
        if self
            .prep
            .proposals
            .front()
            .is_some_and(|p| p.zxid() == zxid)
        {
            let p = self.prep.proposals.pop_front().expect("front exists");
            self.apply(p);
            return;
        }
        match TxnRecord::decode(record) {
            Ok(rec) if Zxid::from_wire(rec.header.zxid) == zxid => self.apply_committed(rec),
            Ok(rec) => self.fail(format!(
                "committed txn {zxid} carries zxid 0x{:x}",
                rec.header.zxid
            )),
            Err(e) => self.fail(format!("committed txn {zxid} does not decode: {e}")),
        }
    }

    pub(super) fn fail(&mut self, why: String) {
        tracing::error!("{why}");
        if self.fatal.is_none() {
            self.fatal = Some(why);
        }
    }

    /// Applies a committed txn this member did not propose, and answers the
    /// local client whose forwarded request it carries.
    fn apply_committed(&mut self, rec: TxnRecord) {
        let hdr = rec.header.clone();
        if Zxid::from_wire(hdr.zxid) <= self.last_applied {
            return;
        }
        let pre = matches!(rec.txn, Txn::Multi(_)).then(|| self.tree.clone());
        let refused = match self.apply_live(&hdr, &rec.txn) {
            Ok(refused) => refused,
            Err(e) => return self.fail(format!("committed {e}")),
        };
        if let Some(a) = self.forwarded_audits.remove(&(hdr.session_id, hdr.cxid)) {
            self.audit_applied(&a, &rec.txn, refused.is_some());
        }
        self.answer_forwarded(&hdr, &rec.txn, refused, pre.as_ref());
        self.after_apply();
    }

    /// A ZooKeeper leader's answer to a forwarded sync or re-attach, which
    /// its learners get on the quorum stream instead of in a txn.
    pub(super) fn on_answered(&mut self, session: i64, cxid: i32, txn: Txn) {
        let hdr = TxnHeader {
            session_id: session,
            cxid,
            zxid: self.last_applied.to_wire(),
            time_ms: self.wall_ms,
        };
        self.answer_forwarded(&hdr, &txn, None, None);
    }

    /// Answers the local client whose forwarded request `txn` (applied
    /// now, or refused by the tree with `refused`) carries, if any.
    fn answer_forwarded(
        &mut self,
        hdr: &TxnHeader,
        txn: &Txn,
        refused: Option<crate::tree::ApplyError>,
        pre: Option<&DataTree>,
    ) {
        if let Some(&conn) = self.session_conn.get(&hdr.session_id) {
            // A createSession answers only a handshake (a new session's or
            // a re-attach's): an upgrade's (cxid 0) must not answer a
            // request the client numbered 0.
            let create_session = matches!(txn, Txn::CreateSession { .. });
            let slot = self.conns.get(&conn).and_then(|c| {
                c.queue.iter().position(|q| {
                    matches!(q, Queued::Write { xid, result: None, meta: Some(m), .. }
                        if *xid == hdr.cxid
                            && (!create_session || m.op == OpCode::CreateSession || m.revalidate))
                })
            });
            let moved = matches!(txn, Txn::Error { errs }
                if errs.first() == Some(&ErrorCode::SessionMoved.code()));
            match slot {
                // ZooKeeper Programmer's Guide, "ZooKeeper Sessions": "the old server detects that the session has
                // moved, and closes the client connection" (no reply).
                Some(_) if moved => self.close_conn(conn),
                Some(i) => {
                    let meta = match &self.conns[&conn].queue[i] {
                        Queued::Write { meta: Some(m), .. } => m.clone(),
                        _ => unreachable!("position matched a forwarded write"),
                    };
                    let reply = match &refused {
                        None => self.reply_from_txn(conn, &meta, hdr, txn, pre),
                        Some(e) => Self::refused_reply(txn, e),
                    };
                    if meta.revalidate && matches!(&reply, Reply::Connect(r) if r.timeout_ms != 0) {
                        // The password is right: the session moves here,
                        // claimed before the client can send a write (the
                        // link to the leader is FIFO).
                        self.ens.claim(hdr.session_id);
                        self.report_touches();
                    }
                    if let Some(Queued::Write { result, .. }) =
                        self.conns.get_mut(&conn).and_then(|c| c.queue.get_mut(i))
                    {
                        *result = Some(reply);
                    }
                    self.drain(conn);
                }
                None if matches!(txn, Txn::CloseSession) => {
                    // Expired or closed elsewhere: its connection here goes.
                    self.session_conn.remove(&hdr.session_id);
                    self.close_conn(conn);
                }
                None => {}
            }
        }
    }

    fn reply_from_txn(
        &self,
        conn: ConnId,
        meta: &WriteMeta,
        hdr: &TxnHeader,
        txn: &Txn,
        pre: Option<&DataTree>,
    ) -> Reply {
        if meta.revalidate {
            // Every txn the leader committed before its answer is applied.
            let c = &self.conns[&conn];
            let id = hdr.session_id;
            let live = !matches!(txn, Txn::Error { .. })
                && self.sessions.is_live(id)
                && self.sessions.password_matches(id, &c.password);
            return Reply::Connect(ConnectResponse {
                protocol_version: 0,
                timeout_ms: if live { c.timeout_ms } else { 0 },
                session_id: if live { id } else { 0 },
                passwd: if live {
                    c.password.clone()
                } else {
                    vec![0; session::PASSWORD_LEN]
                },
                read_only: c.read_only_byte.then_some(false),
            });
        }
        if meta.op == OpCode::CreateSession {
            let c = &self.conns[&conn];
            return Reply::Connect(ConnectResponse {
                protocol_version: 0,
                timeout_ms: c.timeout_ms,
                session_id: hdr.session_id,
                passwd: c.password.clone(),
                read_only: c.read_only_byte.then_some(false),
            });
        }
        let ok = |r| Reply::Frame(ErrorCode::Ok, r);
        match txn {
            // A multi failed as a whole (see prep_multi): the code alone.
            Txn::Error { errs }
                if meta.op == OpCode::Multi
                    && errs.as_slice() == [ErrorCode::MarshallingError.code()] =>
            {
                Reply::Frame(ErrorCode::MarshallingError, Response::Empty)
            }
            Txn::Error { errs } if meta.op == OpCode::Multi => ok(Response::Multi(
                errs.iter().map(|&err| OpResult::Error { err }).collect(),
            )),
            Txn::Error { errs } => {
                let code = errs
                    .first()
                    .and_then(|&e| ErrorCode::from_i32(e))
                    .unwrap_or(ErrorCode::SystemError);
                Reply::Frame(code, Response::Empty)
            }
            // A call made by a create (`recipes::node_calls`) is answered
            // as that create: the call node's path.
            Txn::Recipe(r) if matches!(meta.op, OpCode::Create | OpCode::Create2) => {
                match super::recipes::node_calls::created_call_node(&r.ops) {
                    Some(path) => ok(self.created_result(meta.op, path)),
                    None => Reply::Frame(ErrorCode::SystemError, Response::Empty),
                }
            }
            Txn::Recipe(r) => ok(Response::Recipe(r.reply.clone())),
            Txn::Deploy(_) | Txn::SetRecipesAcl { .. } => ok(Response::Stat(
                self.stat_or_default(super::recipes::RECIPES_NODE),
            )),
            Txn::Noop => ok(Response::Sync {
                path: meta.path.clone(),
            }),
            Txn::Reconfig { .. } => {
                let (data, stat) = self
                    .tree
                    .get_data(super::reconfig::CONFIG_NODE)
                    .unwrap_or_default();
                ok(Response::GetData { data, stat })
            }
            Txn::Create(c) => ok(self.created_result(meta.op, &c.path)),
            // A ZooKeeper leader's reconfig txn is a setData of the config
            // node, answered as a reconfig: the new config and its stat.
            Txn::SetData { path, .. }
                if meta.op == OpCode::Reconfig && path == super::reconfig::CONFIG_NODE =>
            {
                let (data, stat) = self.tree.get_data(path).unwrap_or_default();
                ok(Response::GetData { data, stat })
            }
            Txn::SetData { path, .. } | Txn::SetAcl { path, .. } => {
                ok(Response::Stat(self.stat_or_default(path)))
            }
            Txn::Multi(ops) => {
                let mut scratch = pre.cloned().unwrap_or_else(|| self.tree.clone());
                let mut results = Vec::with_capacity(ops.len());
                for (i, op) in ops.iter().enumerate() {
                    let _ = scratch.apply(hdr, op);
                    let sub = meta.sub_ops.get(i).copied().unwrap_or(OpCode::Create2);
                    results.push(match op {
                        // A create2 in a multi is answered as a create, as
                        // ZooKeeper does.
                        Txn::Create(c) if matches!(sub, OpCode::Create | OpCode::Create2) => {
                            OpResult::Create {
                                path: c.path.clone(),
                            }
                        }
                        Txn::Create(c) => OpResult::Create2 {
                            path: c.path.clone(),
                            stat: scratch.stat(&c.path).unwrap_or_default(),
                        },
                        Txn::SetData { path, .. } => OpResult::SetData {
                            stat: scratch.stat(path).unwrap_or_default(),
                        },
                        Txn::Check { .. } => OpResult::Check,
                        _ => OpResult::Delete,
                    });
                }
                ok(Response::Multi(results))
            }
            _ => ok(Response::Empty),
        }
    }

    pub(super) fn on_role(&mut self, role: Role) {
        let was = self.role;
        if role != was {
            tracing::info!(from = was.mode(), to = role.mode(), "role change");
        }
        if role == Role::Looking || (was != Role::Looking && role != was) {
            // ZooKeeper closes every client connection when a server stops
            // serving; clients reconnect (to this or another member) and
            // keep their sessions.
            let mut conns: Vec<ConnId> = self
                .conns
                .iter()
                .filter(|(_, c)| !c.closing)
                .map(|(id, _)| *id)
                .collect();
            conns.sort_unstable(); // the same inputs give the same outputs
            for c in conns {
                self.close_conn(c);
            }
        }
        self.prep.proposals.clear();
        self.prep.outstanding = Default::default();
        self.offload.forget();
        self.forget_deploys_in_flight();
        self.ens = EnsembleState::default();
        // Callbacks the old role proposed may be lost: a leader looks at
        // the whole (replicated) table again.
        self.owed_callbacks.clear();
        self.prefired.clear();
        self.running_callbacks.clear();
        self.after_waiters.clear();
        // Refusals whose replies go with the proposals they waited for,
        // and forwarded writes whose requests this member forgets.
        self.audit_after.clear();
        self.forwarded_audits.clear();
        self.rescan_waits = true;
        // Local sessions (read-only ones too) end with the role, as
        // ZooKeeper's next server starts with empty trackers: a client
        // that comes back with one is told it expired.
        for id in self.sessions.remove_local_all() {
            self.end_local_session(id);
        }
        self.prep.stepping_down = false;
        // Closes (expiry or closeSession) went with the proposals: until
        // one commits, the session lives, and a leader expires it anew.
        self.sessions.reopen_closing(self.mono_ms);
        if let Role::Leader { .. } = role {
            // Sessions get a full timeout from the new leader, as in
            // ZooKeeper (the old leader's deadlines are gone with it).
            let ids: Vec<(i64, i32)> = self
                .sessions
                .all()
                .iter()
                .map(|s| (s.id, s.timeout_ms))
                .collect();
            for (id, _) in ids {
                self.sessions.touch(id, self.mono_ms);
            }
        }
        self.role = role;
        if role.decides() {
            self.seed_recipe_counters();
        }
        self.plugins_role_changed();
    }

    /// What a session's close will delete, as outstanding changes (as
    /// ZooKeeper's prep does): its ephemerals, committed or in flight, go
    /// from the view at once, so a write or a recipe step prepped before
    /// the close applies does not see them (a recipe would otherwise watch
    /// a node already gone).
    pub(super) fn close_session_changes(&self, session: i64) -> super::Changes {
        let mut view = self.prep_view();
        let zxid = view.zxid;
        let mut paths: std::collections::BTreeSet<String> =
            self.tree.ephemerals(session).into_iter().collect();
        for (p, (_, r)) in &self.prep.outstanding.map {
            if r.as_ref()
                .is_some_and(|r| r.stat.ephemeral_owner == session)
            {
                paths.insert(p.clone());
            }
        }
        for p in paths {
            if view
                .get(&p)
                .is_none_or(|r| r.stat.ephemeral_owner != session)
            {
                continue;
            }
            let parent_path = wazoo_proto::path::parent(&p);
            if let Some(mut parent) = view.get(parent_path) {
                parent.stat.num_children -= 1;
                parent.refresh_cversion();
                parent.stat.pzxid = zxid.to_wire();
                view.set(parent_path, Some(parent));
            }
            view.set(&p, None);
        }
        view.into_changes()
    }

    /// The shared prep of a write (local or forwarded).
    pub(super) fn prep_write(
        &mut self,
        auth: &AuthInfo,
        session: i64,
        req: &Request,
    ) -> Result<(Txn, super::Changes, WriteKind), PrepError> {
        if let Some(r) = self.prep_deploy(auth, req) {
            return r.map(|(t, k)| (t, Vec::new(), k)).map_err(PrepError::Code);
        }
        if let Request::Reconfig(r) = req {
            let (me, synced) = (self.cfg.server_id, &self.synced_learners);
            let ensemble = self.quorum.is_some();
            let mut view = self.prep_view();
            let txn =
                super::reconfig::prep_reconfig(&self.cfg, &mut view, auth, r, ensemble, me, synced)
                    .map_err(PrepError::Code)?;
            return Ok((txn, view.into_changes(), WriteKind::Reconfig));
        }
        let mut view = self.prep_view();
        let prepped = super::prep_request(&self.cfg, &mut view, auth, session, req);
        prepped.map(|(t, k)| (t, view.into_changes(), k))
    }
}
