//! Connections: handshakes and sessions, requests as they arrive, the
//! per-connection FIFO of replies, and the bytes handed to the shell
//! (bounded per connection: a client that does not read is closed).

use super::*;

/// The capacity a connection's send buffer starts with: a getData reply of
/// a 100-byte node is about 200 bytes.
const SEND_BUF_START_BYTES: usize = 256;

/// Bytes queued per connection during one input, flushed as one send per
/// connection, in the order connections were first written to.
#[derive(Debug, Default)]
pub(super) struct SendBufs {
    pub(super) bufs: crate::id_hash::IdMap<ConnId, (Vec<u8>, u32)>,
    pub(super) order: Vec<ConnId>,
}

impl Server {
    /// Turns the bytes queued this step into sends, counting them as
    /// unsent; a connection they would take past
    /// [`ServerConfig::max_outbound_bytes`] is closed instead.
    pub(super) fn flush_sends(&mut self) {
        let mut over = Vec::new();
        for conn in std::mem::take(&mut self.sends.order) {
            let Some((bytes, replies)) = self.sends.bufs.remove(&conn) else {
                continue;
            };
            if bytes.is_empty() {
                continue;
            }
            if let Some(c) = self.conns.get_mut(&conn) {
                c.unsent_bytes += bytes.len() as u64;
                if c.unsent_bytes > self.cfg.max_outbound_bytes {
                    over.push((conn, c.unsent_bytes));
                    continue;
                }
            }
            self.out.push(Output::Send {
                conn,
                bytes,
                replies,
            });
        }
        for (conn, unsent) in over {
            self.close_slow_reader(conn, unsent);
        }
    }

    /// A client that does not take what it is sent (its watch events keep
    /// coming while it does not read): its connection is closed and its
    /// state dropped now, so nothing more is queued for it. What it was
    /// sent before stays sent; what pushed it over the bound is dropped.
    pub(super) fn close_slow_reader(&mut self, conn: ConnId, unsent: u64) {
        tracing::warn!(
            conn,
            unsent,
            max = self.cfg.max_outbound_bytes,
            "closing a connection whose client does not read what it is sent"
        );
        self.out.push(Output::Close { conn });
        self.on_closed(conn);
    }

    /// The shell wrote some of a connection's bytes: replies that waited
    /// for room go out, and the session is touched.
    pub(super) fn on_written(&mut self, conn: ConnId, bytes: u64) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        debug_assert!(
            bytes <= c.unsent_bytes,
            "connection {conn}: {bytes} bytes reported written, only {} unsent",
            c.unsent_bytes
        );
        if bytes > c.unsent_bytes {
            tracing::error!(
                conn,
                bytes,
                unsent = c.unsent_bytes,
                "more bytes reported written than were sent; counting none unsent"
            );
        }
        c.unsent_bytes = c.unsent_bytes.saturating_sub(bytes);
        // A client taking what it is sent is alive, also while its own
        // requests (pings too) wait unread behind the bound.
        let session = c.session;
        if session != 0 && bytes > 0 {
            self.touch_session(session);
        }
        self.drain(conn);
    }

    /// The session showed activity here: its deadline moves, and a
    /// follower reports it to the leader, which expires global sessions
    /// (a local one is this member's alone to expire).
    pub(super) fn touch_session(&mut self, session: i64) {
        self.sessions.touch(session, self.mono_ms);
        if self.role.forwards() && !self.sessions.is_local(session) {
            self.ens.touched(session);
        }
    }

    /// Whether new sessions are local to this member
    /// (`localSessionsEnabled`; ZooKeeper ignores it standalone).
    pub(super) fn local_sessions_on(&self) -> bool {
        self.cfg.local_sessions && self.role != Role::Standalone
    }

    /// A new local session (ZooKeeper's LocalSessionTracker): the member
    /// answers the handshake at once; nothing is logged or replicated.
    fn connect_local(&mut self, conn: ConnId, mut c: Conn, password: [u8; session::PASSWORD_LEN]) {
        let id = self.new_local_session(&mut c, password);
        let read_only = c.read_only_byte.then_some(false);
        self.attach_answered(conn, c, id, read_only);
    }

    /// Adds a local session with `password` for connection `c`.
    fn new_local_session(&mut self, c: &mut Conn, password: [u8; session::PASSWORD_LEN]) -> i64 {
        let id = self.sessions.next_session_id();
        let verifier = session::verifier(&password);
        self.sessions
            .add_local(id, c.timeout_ms, Some(verifier), self.mono_ms);
        c.password = password.to_vec();
        id
    }

    /// Attaches connection `c` to session `id` and answers its handshake
    /// now, with `c`'s password (`read_only`: the answer's flag).
    fn attach_answered(&mut self, conn: ConnId, mut c: Conn, id: i64, read_only: Option<bool>) {
        c.session = id;
        let resp = ConnectResponse {
            protocol_version: 0,
            timeout_ms: c.timeout_ms,
            session_id: id,
            passwd: c.password.clone(),
            read_only,
        };
        self.conns.insert(conn, c);
        self.session_conn.insert(id, conn);
        self.send_connect_response(conn, &resp);
    }

    /// A local session ends (closed by its client, expired, or dropped
    /// with the role): it leaves the table, its connection is closed, and
    /// nothing is logged (it owns no ephemeral: its first one would have
    /// made it global).
    pub(super) fn end_local_session(&mut self, session: i64) {
        self.sessions.remove(session);
        if let Some(conn) = self.session_conn.remove(&session) {
            if self.conns.get(&conn).is_some_and(|c| !c.closing) {
                self.close_conn(conn);
            }
        }
    }

    /// Whether `req` needs a global session: an ephemeral create (alone or
    /// in a multi, as ZooKeeper's `checkUpgradeSession` looks for one), or
    /// a recipe call, whose waits and results the replicated table keeps
    /// by session until the session's closeSession txn.
    pub(super) fn needs_global_session(&self, req: &Request) -> bool {
        let ephemeral = |r: &Request| {
            matches!(r, Request::Create(c) | Request::Create2(c)
                if CreateMode::from_flags(c.flags).is_some_and(|m| m.is_ephemeral()))
        };
        match req {
            Request::Multi(ops) => ops.iter().any(ephemeral),
            Request::RecipeCall { .. } => true,
            r => ephemeral(r) || self.recipe_call_of(r, 0, 0).is_some(),
        }
    }

    /// A local session's request that needs a global session: upgraded
    /// first (`localSessionsUpgradingEnabled`, ZooKeeper's
    /// `makeUpgradeRequest`: its createSession goes ahead of the request),
    /// or refused with EphemeralOnLocalSession. False: the request is not
    /// to be served now (answered with the error, or the leader cannot
    /// propose and steps down).
    fn upgrade_for(&mut self, conn: ConnId, xid: i32, session: i64) -> bool {
        if !self.cfg.local_sessions_upgrading {
            self.push_deferred(
                conn,
                xid,
                Deferred::Error(ErrorCode::EphemeralOnLocalSession),
            );
            return false;
        }
        let Some(s) = self.sessions.get(session) else {
            return false;
        };
        let (timeout_ms, verifier) = (s.timeout_ms, s.verifier);
        if self.role.forwards() {
            self.sessions.upgrade(session);
            tracing::info!("upgrading session 0x{session:x}");
            self.out.push(Output::ToLeader(PeerMsg::CreateSession {
                session,
                timeout_ms,
                verifier,
            }));
            return true;
        }
        if !self.can_propose() {
            return false;
        }
        self.sessions.upgrade(session);
        tracing::info!("upgrading session 0x{session:x}");
        self.ens.owned_here(session, self.cfg.server_id);
        self.propose_create_session(session, timeout_ms, verifier);
        true
    }

    pub(super) fn send_buf(&mut self, conn: ConnId) -> &mut Vec<u8> {
        &mut self.send_entry(conn).0
    }

    pub(super) fn send_entry(&mut self, conn: ConnId) -> &mut (Vec<u8>, u32) {
        if !self.sends.bufs.contains_key(&conn) {
            self.sends.order.push(conn);
        }
        // Room for a typical reply (a header, a small payload and a Stat)
        // from the start, rather than growing it field by field.
        self.sends
            .bufs
            .entry(conn)
            .or_insert_with(|| (Vec::with_capacity(SEND_BUF_START_BYTES), 0))
    }

    pub(super) fn close_conn(&mut self, conn: ConnId) {
        self.flush_sends();
        self.out.push(Output::Close { conn });
        if let Some(c) = self.conns.get_mut(&conn) {
            c.closing = true;
        }
    }

    /// A four-letter word read: ZooKeeper counts it as a packet received
    /// (`Received:` in srvr and stat, zk_packets_received in mntr).
    /// An observer of ZooKeeper found its tree's digest differing from
    /// the leader's after a txn (`digest_mismatches_count`).
    pub(crate) fn count_digest_mismatch(&mut self) {
        self.stats.digest_mismatches += 1;
    }

    pub fn count_four_letter_word(&mut self) {
        self.stats.packets_received += 1;
    }

    /// A four-letter word's answer of `len` bytes sent: ZooKeeper counts a
    /// packet sent per buffer it writes, and its writer hands the answer
    /// over in runs of 8,192 characters (a BufferedWriter's), so one
    /// packet per 8,192 bytes begun.
    pub fn count_four_letter_answer(&mut self, len: usize) {
        self.stats.packets_sent += len.div_ceil(8192) as u64;
    }

    pub(super) fn count_received(&mut self, conn: ConnId) {
        self.stats.packets_received += 1;
        if let Some(c) = self.conns.get_mut(&conn) {
            c.packets_received += 1;
        }
    }

    pub(super) fn on_connect(
        &mut self,
        conn: ConnId,
        peer: Option<SocketAddr>,
        req: ConnectRequest,
        fresh_password: [u8; session::PASSWORD_LEN],
    ) {
        self.stats.packets_received += 1;
        let read_only_byte = req.read_only.is_some();
        let mut c = Conn {
            session: 0,
            password: Vec::new(),
            timeout_ms: 0,
            auth: std::sync::Arc::new(AuthInfo::for_addr(peer.map(|p| p.ip()))),
            peer,
            read_only_byte,
            read_only: false,
            queue: VecDeque::new(),
            unsent_bytes: 0,
            native_recipes: false,
            established: false,
            closing: false,
            packets_received: 1,
            packets_sent: 0,
            last_zxid: self.last_applied.to_wire(),
            connected_at_ms: self.wall_ms,
            last_latency_ms: 0,
            min_latency_ms: i64::MAX,
            max_latency_ms: 0,
            total_latency_ms: 0,
        };
        // Negotiated for read-only sessions too (ZooKeeper Programmer's
        // Guide, "ZooKeeper Sessions": the server's min/max bounds).
        let timeout = (req.timeout_ms.max(0) as u32).clamp(
            self.cfg.min_session_timeout_ms,
            self.cfg.max_session_timeout_ms,
        ) as i32;
        c.timeout_ms = timeout;
        if !self.role.serves_clients() {
            if self.cfg.read_only_enabled && req.read_only == Some(true) {
                return self.connect_read_only(conn, c, &req, fresh_password);
            }
            self.conns.insert(conn, c);
            self.close_conn(conn);
            return;
        }
        if Zxid::from_wire(req.last_zxid_seen) > self.last_applied {
            // ZooKeeper Programmer's Guide, "ZooKeeper Sessions": a client that has seen a newer zxid must not connect
            // to a server that is behind it. ZooKeeper closes without reply.
            tracing::info!(
                "refusing session for client that has seen zxid 0x{:x}, our last zxid is 0x{:x}",
                req.last_zxid_seen,
                self.last_applied
            );
            self.conns.insert(conn, c);
            self.close_conn(conn);
            return;
        }
        if req.session_id == 0 && self.local_sessions_on() {
            return self.connect_local(conn, c, fresh_password);
        }
        if req.session_id == 0 && self.role.forwards() {
            c.password = fresh_password.to_vec();
            self.conns.insert(conn, c);
            self.follower_new_session(conn, timeout, session::verifier(&fresh_password));
            return;
        }
        if req.session_id == 0 {
            if !self.can_propose() {
                self.conns.insert(conn, c);
                self.close_conn(conn);
                return;
            }
            let id = self.sessions.next_session_id();
            let verifier = session::verifier(&fresh_password);
            c.session = id;
            c.password = fresh_password.to_vec();
            self.conns.insert(conn, c);
            self.session_conn.insert(id, conn);
            self.sessions.add(id, timeout, Some(verifier), self.mono_ms);
            self.ens.owned_here(id, self.cfg.server_id);
            let kind = WriteKind::Connect {
                session: id,
                timeout_ms: timeout,
                read_only_byte,
                password: fresh_password,
            };
            self.propose(
                Origin::Conn(conn),
                0,
                id,
                Txn::CreateSession {
                    timeout_ms: timeout,
                    verifier: Some(verifier),
                },
                Vec::new(),
                Some(kind),
                false,
            );
            return;
        }
        let id = req.session_id;
        c.password = req.passwd.clone();
        if self.role.forwards() && self.sessions.get(id).is_none() {
            // The password is checked once the session is known here.
            c.session = id;
            self.conns.insert(conn, c);
            self.follower_revalidate(conn, id);
            return;
        }
        let valid = self.sessions.password_matches(id, &req.passwd)
            && self.sessions.is_live(id)
            && self.sessions.touch(id, self.mono_ms);
        if valid && self.sessions.is_local(id) {
            // A local session re-attaching where it lives: the leader
            // knows nothing of it.
        } else if valid && self.role.forwards() {
            // Tell the leader now: the claim must reach it before any write
            // this connection forwards (the link is FIFO).
            self.ens.claim(id);
            self.report_touches();
        } else if valid {
            self.ens.owned_here(id, self.cfg.server_id);
        }
        c.session = if valid { id } else { 0 };
        self.conns.insert(conn, c);
        if !valid {
            self.push_deferred(conn, 0, Deferred::InvalidConnect { read_only_byte });
            return;
        }
        // Re-attach: the session moves here; its old connection is closed.
        if let Some(old) = self.session_conn.insert(id, conn) {
            if old != conn && self.conns.contains_key(&old) {
                tracing::debug!("session 0x{id:x} moved from connection {old} to {conn}");
                self.close_conn(old);
            }
        }
        let resp = ConnectResponse {
            protocol_version: 0,
            timeout_ms: timeout,
            session_id: id,
            passwd: req.passwd.clone(),
            read_only: read_only_byte.then_some(false),
        };
        self.send_connect_response(conn, &resp);
        self.redeliver_recipe_results(id, conn);
    }

    /// ZooKeeper Programmer's Guide, "ZooKeeper Sessions" / ZooKeeper's read-only mode: a member without a quorum
    /// serves reads to clients that allow it. Its sessions are local (not
    /// replicated) and every write gets NotReadOnly; when the quorum is
    /// back, the connection is closed and the client finds a read-write
    /// server.
    pub(super) fn connect_read_only(
        &mut self,
        conn: ConnId,
        mut c: Conn,
        req: &ConnectRequest,
        fresh_password: [u8; session::PASSWORD_LEN],
    ) {
        let id =
            if req.session_id != 0 && self.sessions.password_matches(req.session_id, &req.passwd) {
                c.password = req.passwd.clone();
                req.session_id
            } else {
                self.new_local_session(&mut c, fresh_password)
            };
        c.read_only = true;
        self.attach_answered(conn, c, id, Some(true));
    }

    /// Whether this member serves read-only clients now.
    pub fn in_read_only_mode(&self) -> bool {
        self.role == Role::Looking && self.cfg.read_only_enabled
    }

    pub(super) fn send_connect_response(&mut self, conn: ConnId, resp: &ConnectResponse) {
        frame::write_record(self.send_buf(conn), resp);
        self.stats.packets_sent += 1;
        if let Some(c) = self.conns.get_mut(&conn) {
            c.established = true;
            c.packets_sent += 1;
        }
        if resp.session_id != 0 {
            self.allow_local_reads(conn);
        }
    }

    /// Tells the shell it may answer the connection's plain reads itself
    /// ([`Output::LocalReads`]), with its identities as they are now: once
    /// its session is established, if enforced authentication lets it be
    /// served (a connection it would refuse is answered and closed here).
    pub(super) fn allow_local_reads(&mut self, conn: ConnId) {
        let Some(c) = self.conns.get(&conn) else {
            return;
        };
        let schemes = &self.cfg.enforce_auth_schemes;
        let enforced_ok =
            schemes.is_empty() || c.auth.ids.iter().any(|id| schemes.contains(&id.scheme));
        if c.established && c.session != 0 && !c.closing && enforced_ok {
            let auth = c.auth.clone();
            // After what was sent before it, in the list too.
            self.flush_sends();
            self.out.push(Output::LocalReads { conn, auth });
        }
    }

    /// Reads the shell answered for the connection (see
    /// [`Input::LocalReads`]): counted, and its session touched.
    pub(super) fn on_local_reads(&mut self, conn: ConnId, reads: u64) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        c.packets_received += reads;
        c.packets_sent += reads;
        let (session, closing) = (c.session, c.closing);
        self.stats.packets_received += reads;
        self.stats.packets_sent += reads;
        self.stats.local_reads += reads;
        if session != 0 && !closing {
            self.touch_session(session);
        }
    }

    pub(super) fn on_closed(&mut self, conn: ConnId) {
        let Some(c) = self.conns.remove(&conn) else {
            return;
        };
        self.watches.remove_conn(conn);
        self.sends.bufs.remove(&conn);
        if c.session != 0 && self.session_conn.get(&c.session) == Some(&conn) {
            self.session_conn.remove(&c.session);
        }
    }

    pub(super) fn on_request(&mut self, conn: ConnId, xid: i32, req: Request) {
        self.count_received(conn);
        self.serve_request(conn, xid, req);
    }

    /// A request, once received (or once the call it waited behind is
    /// done, see `recipes/offload.rs`).
    pub(super) fn serve_request(&mut self, conn: ConnId, xid: i32, req: Request) {
        let Some(c) = self.conns.get(&conn) else {
            return;
        };
        // Requests pipelined behind the handshake queue behind its reply.
        if c.session == 0 || c.closing {
            return;
        }
        let session = c.session;
        self.touch_session(session);
        // A ping is answered at once, neither held behind a call of the
        // session nor queued behind its requests, where ZooKeeper queues
        // it like a read: a recipe call may wait seconds (for its module
        // to compile, its step to run) before it is proposed, and its
        // client, hearing nothing, would drop the connection after 2/3 of
        // the session timeout. A ping orders nothing: clients match its
        // reply by its xid.
        // A client that does not take its replies gets none at once: its
        // pings wait in line as reads do, so that pinging without reading
        // cannot grow its unsent bytes past the reply bound.
        if matches!(req, Request::Ping) {
            if !self.auth_enforced_ok(conn, xid) {
                return;
            }
            if self.reply_room(conn) {
                self.send_reply(conn, xid, 0, &Response::Empty);
            } else {
                self.push_deferred(conn, xid, Deferred::Read(req));
            }
            return;
        }
        if matches!(req, Request::RecipeCall { .. }) {
            if let Some(c) = self.conns.get_mut(&conn) {
                c.native_recipes = true;
            }
        }
        // Behind a call of the session still running: served after it.
        let held = recipes::Held::Local { conn, xid, req };
        let Some(recipes::Held::Local { req, .. }) = self.hold_behind_step(session, held) else {
            return;
        };
        if !matches!(req, Request::Auth(_)) && !self.auth_enforced_ok(conn, xid) {
            return;
        }
        match req {
            Request::Auth(pkt) => self.on_auth(conn, xid, pkt),
            Request::CloseSession
                if self.sessions.is_local(session)
                    || self.conns.get(&conn).is_some_and(|c| c.read_only) =>
            {
                // A local (or read-only) session just ends: no txn.
                self.sessions.remove(session);
                self.session_conn.remove(&session);
                self.send_reply(conn, xid, 0, &Response::Empty);
                self.close_conn(conn);
            }
            Request::CloseSession if self.role.forwards() => {
                self.forward_write(conn, xid, session, Request::CloseSession)
            }
            Request::Sync { .. } if self.role.forwards() => {
                self.forward_write(conn, xid, session, req)
            }
            Request::CloseSession => {
                if !self.can_propose() {
                    return;
                }
                self.sessions.set_closing(session);
                let changes = self.close_session_changes(session);
                self.propose(
                    Origin::Conn(conn),
                    xid,
                    session,
                    Txn::CloseSession,
                    changes,
                    Some(WriteKind::CloseSession),
                    true,
                );
            }
            // An op of a multi only: as an unknown opcode (the shell's
            // decoder already answers it so; this is for in-process callers).
            Request::Check { .. } => self.push_deferred(conn, xid, Deferred::Unimplemented),
            req if self.conns.get(&conn).is_some_and(|c| c.read_only)
                && (req.opcode().is_write() || matches!(req, Request::Sync { .. })) =>
            {
                self.push_deferred(conn, xid, Deferred::Error(ErrorCode::NotReadOnly))
            }
            req if req.opcode().is_write() => {
                if self.sessions.is_local(session)
                    && self.needs_global_session(&req)
                    && !self.upgrade_for(conn, xid, session)
                {
                    return;
                }
                self.on_write(conn, xid, session, req)
            }
            req => self.push_deferred(conn, xid, Deferred::Read(req)),
        }
    }

    /// Whether the connection may be served under enforced authentication;
    /// if not, it is answered and closed as ZooKeeper 3.8's
    /// AuthenticationHelper.enforceAuthentication does: the reply carries
    /// SessionClosedRequireSaslAuth and zxid 0, then the session closes.
    fn auth_enforced_ok(&mut self, conn: ConnId, xid: i32) -> bool {
        let schemes = &self.cfg.enforce_auth_schemes;
        if schemes.is_empty() {
            return true;
        }
        let Some(c) = self.conns.get(&conn) else {
            return false;
        };
        if c.auth.ids.iter().any(|id| schemes.contains(&id.scheme)) {
            return true;
        }
        tracing::info!(
            conn,
            "closing a connection not authenticated with any of the enforced schemes {schemes:?}"
        );
        let code = ErrorCode::SessionClosedRequireSaslAuth.code();
        self.send_reply_at(conn, xid, 0, code, &Response::Empty);
        self.close_conn(conn);
        false
    }

    /// A SASL step the shell ran. ZooKeeper answers it at once, outside
    /// the request pipeline, with zxid 0; a failure is AuthFailed (or
    /// SessionClosedRequireSaslAuth when SASL is enforced) and closes the
    /// connection (ZooKeeper Administrator's Guide, "Encryption,
    /// Authentication, Authorization Options").
    pub(super) fn on_sasl(&mut self, conn: ConnId, xid: i32, step: crate::server::SaslStep) {
        use crate::server::SaslStep;
        self.count_received(conn);
        let Some(c) = self.conns.get(&conn) else {
            return;
        };
        if c.session == 0 || c.closing {
            return;
        }
        let session = c.session;
        self.touch_session(session);
        match step {
            SaslStep::Continue(token) => {
                self.send_reply_at(conn, xid, 0, 0, &Response::Sasl(Some(token)))
            }
            SaslStep::NoServer => self.send_reply_at(conn, xid, 0, 0, &Response::Sasl(None)),
            SaslStep::Done { token, ids } => {
                if let Some(c) = self.conns.get_mut(&conn) {
                    for id in ids {
                        std::sync::Arc::make_mut(&mut c.auth).add(id);
                    }
                }
                self.send_reply_at(conn, xid, 0, 0, &Response::Sasl(Some(token)));
                self.allow_local_reads(conn);
            }
            SaslStep::Failed => {
                let code = if self.cfg.enforce_auth_schemes.iter().any(|s| s == "sasl") {
                    ErrorCode::SessionClosedRequireSaslAuth
                } else {
                    ErrorCode::AuthFailed
                };
                // As ZooKeeper's processSasl: the code with a null token
                // as the body, then the connection closes.
                self.send_reply_frame(conn, 0, |out| {
                    frame::write_reply_with_body(out, xid, 0, code.code(), &Response::Sasl(None))
                });
                self.close_conn(conn);
            }
        }
    }

    /// Auth is handled at once, as ZooKeeper's connection thread does; the
    /// reply echoes the request's xid (clients send -4 or an ordinary xid).
    pub(super) fn on_auth(&mut self, conn: ConnId, xid: i32, pkt: wazoo_proto::AuthPacket) {
        let super_digest = self.cfg.super_digest.clone();
        let ids = if pkt.scheme == "ip" {
            // ZooKeeper's IPAuthenticationProvider accepts `addauth ip`
            // whatever it carries, and adds the address the connection
            // comes from (an identity every connection already has).
            let peer = self.conns.get(&conn).and_then(|c| c.peer);
            Ok(peer
                .map(|p| wazoo_proto::Id::new("ip", &p.ip().to_string()))
                .into_iter()
                .collect())
        } else {
            acl::authenticate(&pkt.scheme, &pkt.auth, super_digest.as_deref())
        };
        match ids {
            Ok(ids) => {
                if let Some(c) = self.conns.get_mut(&conn) {
                    for id in ids {
                        std::sync::Arc::make_mut(&mut c.auth).add(id);
                    }
                }
                // ZooKeeper's auth reply carries zxid 0.
                self.send_reply_at(conn, xid, 0, 0, &Response::Empty);
                self.allow_local_reads(conn);
            }
            Err(code) => {
                tracing::info!("authentication with scheme {:?} failed", pkt.scheme);
                self.send_reply_at(conn, xid, 0, code.code(), &Response::Empty);
                self.close_conn(conn);
            }
        }
    }

    pub(super) fn enqueue_error(&mut self, conn: ConnId, xid: i32, err: ErrorCode) {
        if self
            .conns
            .get(&conn)
            .is_some_and(|c| c.session != 0 && !c.closing)
        {
            self.push_deferred(conn, xid, Deferred::Error(err));
        }
    }

    pub(super) fn push_deferred(&mut self, conn: ConnId, xid: i32, req: Deferred) {
        let now = self.mono_ms;
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        if let Deferred::After { zxid, .. } | Deferred::ErrorAfter { zxid, .. } = &req {
            if *zxid > self.last_applied {
                self.after_waiters.push((*zxid, conn));
            }
        }
        c.queue.push_back(Queued::Deferred {
            xid,
            started_ms: now,
            req,
        });
        self.drain(conn);
    }

    /// A read call's step that ran on a worker is done: the head of its
    /// connection's line, which waited for it, is answered.
    pub(super) fn read_call_done(
        &mut self,
        conn: ConnId,
        job: u64,
        result: Result<Response, ErrorCode>,
    ) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        if let Some(Queued::Deferred {
            req: Deferred::ReadCall { job: j, reply },
            ..
        }) = c.queue.front_mut()
        {
            if *j == job {
                *reply = Some(result);
                self.drain(conn);
            }
        }
    }

    pub(super) fn send_reply(&mut self, conn: ConnId, xid: i32, err: i32, body: &Response) {
        self.send_reply_at(conn, xid, self.last_applied.to_wire(), err, body)
    }

    pub(super) fn send_reply_at(
        &mut self,
        conn: ConnId,
        xid: i32,
        zxid: i64,
        err: i32,
        body: &Response,
    ) {
        self.send_reply_frame(conn, zxid, |out| {
            frame::write_reply(out, xid, zxid, err, body)
        });
    }

    /// Queues one reply frame written by `write`, and counts it.
    fn send_reply_frame(&mut self, conn: ConnId, zxid: i64, write: impl FnOnce(&mut Vec<u8>)) {
        let entry = self.send_entry(conn);
        write(&mut entry.0);
        entry.1 += 1;
        self.stats.packets_sent += 1;
        if let Some(c) = self.conns.get_mut(&conn) {
            c.packets_sent += 1;
            c.last_zxid = zxid;
        }
    }

    pub(super) fn record_latency(&mut self, conn: ConnId, started_ms: i64) {
        let l = (self.mono_ms - started_ms).max(0);
        let s = &mut self.stats;
        if s.requests_completed == 0 || l < s.min_latency_ms {
            s.min_latency_ms = l;
        }
        s.max_latency_ms = s.max_latency_ms.max(l);
        s.total_latency_ms += l;
        s.requests_completed += 1;
        if s.latency_samples_ms.len() < LATENCY_SAMPLES_MAX {
            s.latency_samples_ms.push(l);
        }
        if let Some(c) = self.conns.get_mut(&conn) {
            c.last_latency_ms = l;
            c.min_latency_ms = c.min_latency_ms.min(l);
            c.max_latency_ms = c.max_latency_ms.max(l);
            c.total_latency_ms += l;
        }
    }

    /// Whether the connection's unsent bytes (including this step's) are
    /// under [`ServerConfig::max_unsent_reply_bytes`], so that a reply may
    /// go out now.
    fn reply_room(&self, conn: ConnId) -> bool {
        let Some(c) = self.conns.get(&conn) else {
            return false;
        };
        let this_step = self
            .sends
            .bufs
            .get(&conn)
            .map_or(0, |(b, _)| b.len() as u64);
        c.unsent_bytes + this_step < self.cfg.max_unsent_reply_bytes
    }

    /// Sends every reply at the head of the connection's queue that is
    /// ready, while the connection's unsent bytes (including this step's)
    /// are under [`ServerConfig::max_unsent_reply_bytes`]; past that the
    /// rest waits for [`Input::Written`].
    pub(super) fn drain(&mut self, conn: ConnId) {
        loop {
            let Some(c) = self.conns.get_mut(&conn) else {
                return;
            };
            // Nothing queued after a close would be written.
            if c.closing {
                return;
            }
            if !self.reply_room(conn) {
                return;
            }
            let Some(c) = self.conns.get_mut(&conn) else {
                return;
            };
            let ready = match c.queue.front() {
                None => return,
                Some(Queued::Write { result, .. }) => result.is_some(),
                Some(Queued::Deferred {
                    req: Deferred::After { zxid, .. } | Deferred::ErrorAfter { zxid, .. },
                    ..
                }) => *zxid <= self.last_applied,
                Some(Queued::Deferred {
                    req: Deferred::ReadCall { reply, .. },
                    ..
                }) => reply.is_some(),
                Some(Queued::Deferred { .. }) => true,
            };
            if !ready {
                return;
            }
            let item = c.queue.pop_front().expect("front exists");
            match item {
                Queued::Write {
                    xid,
                    result,
                    started_ms,
                    close_after,
                    zxid,
                    meta: _,
                } => {
                    let _ = zxid;
                    let (err, body) = match result.expect("ready") {
                        Reply::Connect(resp) => {
                            self.send_connect_response(conn, &resp);
                            if resp.timeout_ms == 0 {
                                // A re-attach the leader refused: closed,
                                // as `Deferred::InvalidConnect` is.
                                self.close_conn(conn);
                                return;
                            }
                            self.redeliver_recipe_results(resp.session_id, conn);
                            continue;
                        }
                        Reply::Frame(err, body) => (err, body),
                    };
                    self.send_reply(conn, xid, err.code(), &body);
                    self.record_latency(conn, started_ms);
                    if close_after {
                        self.close_conn(conn);
                        return;
                    }
                }
                Queued::Deferred {
                    xid,
                    started_ms,
                    req,
                } => match req {
                    Deferred::Error(code) | Deferred::ErrorAfter { code, .. } => {
                        self.send_reply(conn, xid, code.code(), &Response::Empty);
                        self.record_latency(conn, started_ms);
                    }
                    Deferred::Unimplemented => {
                        // ZooKeeper's UnimplementedRequestProcessor: the
                        // reply carries zxid -1, then the connection closes.
                        let code = ErrorCode::Unimplemented.code();
                        self.send_reply_at(conn, xid, -1, code, &Response::Empty);
                        self.record_latency(conn, started_ms);
                        self.close_conn(conn);
                        return;
                    }
                    Deferred::Reply(body) | Deferred::After { body, .. } => {
                        self.send_reply(conn, xid, 0, &body);
                        self.record_latency(conn, started_ms);
                    }
                    Deferred::InvalidConnect { read_only_byte } => {
                        let resp = ConnectResponse {
                            protocol_version: 0,
                            timeout_ms: 0,
                            session_id: 0,
                            passwd: vec![0; session::PASSWORD_LEN],
                            read_only: read_only_byte.then_some(false),
                        };
                        frame::write_record(self.send_buf(conn), &resp);
                        self.stats.packets_sent += 1;
                        self.close_conn(conn);
                        return;
                    }
                    Deferred::ReadCall { reply, .. } => {
                        let (err, body) = match reply.expect("ready") {
                            Ok(body) => (ErrorCode::Ok, body),
                            Err(e) => (e, Response::Empty),
                        };
                        self.send_reply(conn, xid, err.code(), &body);
                        self.record_latency(conn, started_ms);
                    }
                    Deferred::Read(req) => {
                        let (err, body) = match self.serve_read_call(conn, xid, &req, true) {
                            None => self.read(conn, req),
                            Some(recipes::ReadCallRun::Answered(Ok(body))) => (ErrorCode::Ok, body),
                            Some(recipes::ReadCallRun::Answered(Err(e))) => (e, Response::Empty),
                            Some(recipes::ReadCallRun::Offloaded(job)) => {
                                // The line waits for it.
                                if let Some(c) = self.conns.get_mut(&conn) {
                                    c.queue.push_front(Queued::Deferred {
                                        xid,
                                        started_ms,
                                        req: Deferred::ReadCall { job, reply: None },
                                    });
                                }
                                return;
                            }
                        };
                        if err != ErrorCode::Ok && matches!(body, Response::Multi(_)) {
                            // A multiRead stopped by a write: ZooKeeper sends
                            // the results it had with the error.
                            let zxid = self.last_applied.to_wire();
                            self.send_reply_frame(conn, zxid, |out| {
                                frame::write_reply_with_body(out, xid, zxid, err.code(), &body)
                            });
                        } else {
                            self.send_reply(conn, xid, err.code(), &body);
                        }
                        self.record_latency(conn, started_ms);
                    }
                },
            }
        }
    }
}
