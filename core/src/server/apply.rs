//! Apply: committed txns change the tree and the session table in zxid
//! order, fire watches and recipe waits, and fill in the replies waiting
//! for them; ticks expire sessions and reap containers and TTL nodes
//! through txns like any write.

use super::*;

/// ZooKeeper's `DataTree.DIGEST_LOG_INTERVAL` and `DIGEST_LOG_LIMIT`.
const DIGEST_LOG_INTERVAL: i64 = 128;
const DIGEST_LOG_LIMIT: usize = 1024;

impl Server {
    pub(super) fn on_tick(&mut self) {
        self.end_waits_of_unloaded_modules();
        // Local sessions expire where they live, whatever the role
        // (ZooKeeper's LocalSessionTracker runs on every server).
        for id in self.sessions.expire_local(self.mono_ms) {
            self.stats.sessions_expired += 1;
            tracing::info!("expiring local session 0x{id:x}");
            self.end_local_session(id);
        }
        if self.role.forwards() {
            self.report_touches();
            return;
        }
        if !self.role.decides() {
            return;
        }
        self.commit_recipe_counters();
        for id in self.sessions.expire(self.mono_ms) {
            self.stats.sessions_expired += 1;
            tracing::info!("expiring session 0x{id:x}");
            let changes = self.close_session_changes(id);
            self.propose(
                Origin::Internal,
                ensemble::INTERNAL_CXID,
                id,
                Txn::CloseSession,
                changes,
                None,
                false,
            );
        }
        if self.mono_ms >= self.next_container_check_ms {
            self.next_container_check_ms =
                self.mono_ms + self.cfg.container_check_interval_ms as i64;
            self.reap_containers();
        }
    }

    /// ZooKeeper's ContainerManager: delete empty containers (that once had
    /// children, or never had one for `container_max_never_used_ms`) and
    /// expired TTL nodes, through the pipeline like any write.
    ///
    /// A TTL node's age is the wall time a txn would be stamped with now
    /// minus its mtime, as ZooKeeper's `getElapsed` computes it: a step of
    /// the wall clock forward ages TTL nodes as it does in ZooKeeper (no
    /// more: the check's interval runs on the monotonic clock), a step back
    /// delays their expiry until the wall clock passes the last stamp.
    pub(super) fn reap_containers(&mut self) {
        let candidates = self
            .tree
            .reapable_with(self.wall_ms, self.cfg.container_max_never_used_ms);
        let limit = self.cfg.container_max_per_minute.max(1) as usize;
        for path in candidates.into_iter().take(limit) {
            let Some(r) = self.prep.outstanding.get(&self.tree, &path) else {
                continue;
            };
            if r.stat.num_children != 0 {
                continue;
            }
            let parent = wazoo_proto::path::parent(&path).to_string();
            let Some(pr) = self.prep.outstanding.get(&self.tree, &parent) else {
                continue;
            };
            let mut pnew = pr.clone();
            pnew.stat.num_children -= 1;
            pnew.refresh_cversion();
            pnew.stat.pzxid = self.prep_zxid().to_wire();
            let changes = vec![(path.clone(), None), (parent, Some(pnew))];
            tracing::debug!("reaping {path}");
            self.propose(
                Origin::Internal,
                ensemble::INTERNAL_CXID,
                0,
                Txn::Delete { path },
                changes,
                None,
                false,
            );
        }
    }

    pub(super) fn on_durable(&mut self, zxid: Zxid) {
        while self
            .prep
            .proposals
            .front()
            .is_some_and(|p| p.zxid() <= zxid)
        {
            let p = self.prep.proposals.pop_front().expect("front exists");
            self.apply(p);
        }
    }

    /// Applies a committed txn to the tree and the session table and fires
    /// its watches: what every member does with every txn, in zxid order.
    ///
    /// A txn the tree refuses ([`ApplyError`]) changes no node, fires no
    /// watch and registers no recipe wait, and its outcome is that error,
    /// as ZooKeeper's `DataTree.processTxn` records one in its result:
    /// every member applies the same txns to the same tree, so every member
    /// refuses it alike and the replicas stay equal. It never stops the
    /// member, nor a restart that replays it from the log. Prep refuses
    /// everything apply would (`check_txn`), so this is a prep bug showing,
    /// logged as one; the returned error is what the client is answered.
    pub(super) fn apply_txn(
        &mut self,
        hdr: &TxnHeader,
        txn: &Txn,
    ) -> Result<Option<ApplyError>, String> {
        let zxid = Zxid::from_wire(hdr.zxid);
        if zxid <= self.last_applied {
            return Err(format!(
                "txn {zxid} arrived after {}: txns apply in zxid order",
                self.last_applied
            ));
        }
        if let Txn::Restore(r) = txn {
            self.apply_restore(hdr, r);
        }
        let (triggers, refused) = match self.tree.apply(hdr, txn) {
            Ok(triggers) => (triggers, None),
            Err(e) => {
                self.stats.txns_refused += 1;
                tracing::error!(
                    zxid = %zxid,
                    "a committed txn does not fit the tree; it changes nothing and its \
                     request fails (prep should have refused it): {e}"
                );
                (Vec::new(), Some(e))
            }
        };
        self.last_applied = zxid;
        // A restore's digest is kept too: `hash` then shows every member
        // holding the same restored tree.
        let logged = zxid.to_wire() % DIGEST_LOG_INTERVAL == 0 || matches!(txn, Txn::Restore(_));
        if self.cfg.digest_enabled && logged {
            self.digest_log.push_back((zxid, self.tree.digest()));
            if self.digest_log.len() > DIGEST_LOG_LIMIT {
                self.digest_log.pop_front();
            }
        }
        self.prep.outstanding.applied(zxid);
        self.stats.txns_applied += 1;
        if matches!(txn, Txn::Restore(_)) {
            // A restart loads the restored state rather than replaying it.
            self.txns_since_snapshot = 0;
            self.bytes_since_snapshot = 0;
            self.out
                .push(Output::Snapshot(Box::new(self.snapshot_job())));
        }
        match txn {
            Txn::CreateSession {
                timeout_ms,
                verifier,
            } => {
                tracing::debug!(
                    "session 0x{:x} opened, timeout {timeout_ms} ms",
                    hdr.session_id
                );
                self.sessions
                    .add(hdr.session_id, *timeout_ms, *verifier, self.mono_ms);
            }
            Txn::CloseSession => {
                tracing::debug!("session 0x{:x} closed", hdr.session_id);
                self.sessions.remove(hdr.session_id);
                self.ens.forget_owner(hdr.session_id);
            }
            _ => {}
        }
        let decides = self.role.decides();
        for t in triggers {
            self.notify(&t.path, t.event, &t.acl);
            let fired = self.waits.trigger(&t.path, t.event);
            if decides {
                self.owed_callbacks.extend(fired);
            }
        }
        match txn {
            // The session's waits end with it (its own ephemerals' deletes
            // fired other sessions' waits above).
            Txn::CloseSession => self.waits.drop_session(hdr.session_id),
            Txn::Recipe(r) => match &refused {
                None => self.apply_recipe_effects(hdr.session_id, zxid, r),
                Some(e) => {
                    let failed = recipes::refused_step(r, e);
                    self.apply_recipe_effects(hdr.session_id, zxid, &failed)
                }
            },
            Txn::Deploy(_) | Txn::Undeploy { .. } => self.apply_deploy(zxid, txn),
            Txn::Reconfig { data } if refused.is_none() => self.activate_config(data),
            Txn::RecipeCounters(c) => self.apply_recipe_counters(c),
            Txn::SetRecipesAcl { acl, aversion } => {
                self.apply_recipes_acl(zxid, acl, *aversion, refused.is_none())
            }
            _ => {}
        }
        Ok(refused)
    }

    /// The answer to a write whose committed txn the tree refused (see
    /// `apply_txn`): the error, in the shape the request's answer takes.
    pub(super) fn refused_reply(txn: &Txn, e: &ApplyError) -> Reply {
        match (txn, e) {
            (Txn::Multi(ops), ApplyError::Multi { index, error }) => Reply::Frame(
                ErrorCode::Ok,
                Response::Multi(multi_failure(ops.len(), *index, error.code())),
            ),
            (Txn::Recipe(r), e) => Reply::Frame(
                ErrorCode::Ok,
                Response::Recipe(recipes::refused_step(r, e).reply),
            ),
            (_, e) => Reply::Frame(e.code(), Response::Empty),
        }
    }

    /// Applies a txn this member proposed and answers the request it came
    /// from, if it came from one of this member's connections.
    pub(super) fn apply(&mut self, p: Proposal) {
        let hdr = p.record.header.clone();
        let zxid = p.zxid();
        let refused = match self.apply_live(&hdr, &p.record.txn) {
            Ok(refused) => refused,
            Err(e) => return self.fail(format!("invariant broken by a prepped txn: {e}")),
        };
        if let Some(a) = &p.audit {
            self.audit_applied(a, &p.record.txn, refused.is_some());
        }
        if matches!(p.record.txn, Txn::CloseSession) {
            if let Some(conn) = self.session_conn.remove(&hdr.session_id) {
                if !matches!(p.origin, Origin::Conn(c) if c == conn) {
                    self.close_conn(conn);
                }
            }
        }
        if let Origin::Conn(conn) = p.origin {
            let result = match &refused {
                None => p.kind.map(|k| self.result_of(k)),
                Some(e) => p.kind.map(|_| Self::refused_reply(&p.record.txn, e)),
            };
            if let Some(c) = self.conns.get_mut(&conn) {
                let head = c.queue.iter_mut().find(
                    |q| matches!(q, Queued::Write { zxid: z, result: None, .. } if *z == zxid),
                );
                if let Some(Queued::Write { result: r, .. }) = head {
                    *r = result;
                }
            }
            self.drain(conn);
        }
        self.after_apply();
    }

    /// A committed configuration becomes the active one (ZooKeeper
    /// activates a reconfig on commit): consensus and the links are told.
    /// A standalone member (which a reconfig txn reaches only through a
    /// log it was given) keeps the node's text and nothing else.
    fn activate_config(&mut self, data: &[u8]) {
        if self.quorum.is_none() {
            return;
        }
        let parsed = std::str::from_utf8(data)
            .map_err(|e| e.to_string())
            .and_then(crate::quorum_config::QuorumConfig::parse);
        match parsed {
            Ok(c) => {
                tracing::info!(
                    version = format!("{:x}", c.version),
                    "new configuration active"
                );
                self.quorum = Some(c.clone());
                self.out.push(Output::Reconfigured(c));
            }
            // Prep rendered it: a bug, and every member sees it alike.
            Err(e) => tracing::error!("a committed configuration does not parse: {e}"),
        }
    }

    /// Counts txns towards the next snapshot; sends replies (and audit
    /// records) that waited for this txn.
    pub(super) fn after_apply(&mut self) {
        if !self.audit_after.is_empty() {
            self.release_audits();
        }
        if !self.after_waiters.is_empty() {
            let applied = self.last_applied;
            let (ready, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.after_waiters)
                .into_iter()
                .partition(|(z, _)| *z <= applied);
            self.after_waiters = rest;
            for (_, conn) in ready {
                self.drain(conn);
            }
        }
        self.txns_since_snapshot += 1;
        let limit = self.cfg.snap_size_limit_bytes;
        if self.txns_since_snapshot >= self.cfg.snap_count
            || (limit > 0 && self.bytes_since_snapshot >= limit)
        {
            self.txns_since_snapshot = 0;
            self.bytes_since_snapshot = 0;
            self.out
                .push(Output::Snapshot(Box::new(self.snapshot_job())));
        }
    }

    /// A consistent snapshot of the applied state.
    pub fn snapshot_job(&self) -> SnapshotJob {
        SnapshotJob {
            zxid: self.last_applied,
            tree: self.tree.snapshot(),
            waits: self.waits.clone(),
            sessions: self.sessions.records(),
        }
    }

    /// Sends `event` on `path` to the connections watching it that may
    /// READ `acl` (the node's, or the parent's for children-changed), as
    /// ZooKeeper checks each watcher's auth info before it delivers. A super
    /// user reads everything; a gone connection reads nothing.
    pub(super) fn notify(&mut self, path: &str, event: EventType, acl: &[Acl]) {
        let conns_now = &self.conns;
        let conns = self.watches.trigger(path, event, |conn| {
            conns_now
                .get(&conn)
                .is_some_and(|c| acl::check(acl, perms::READ, &c.auth).is_ok())
        });
        if conns.is_empty() {
            return;
        }
        let ev = WatcherEvent {
            event_type: event as i32,
            state: KeeperState::SyncConnected as i32,
            path: path.to_string(),
        };
        for conn in conns {
            if !self.conns.contains_key(&conn) {
                continue;
            }
            frame::write_notification(self.send_buf(conn), NOTIFICATION_ZXID, &ev);
            self.stats.packets_sent += 1;
        }
    }

    pub(super) fn stat_or_default(&self, path: &str) -> Stat {
        if path == recipes::RECIPES_NODE {
            if let Some(stat) = self.recipes_node_stat() {
                return stat;
            }
        }
        self.tree.stat(path).unwrap_or_default()
    }

    pub(super) fn created_result(&self, op: OpCode, path: &str) -> Response {
        match op {
            OpCode::Create => Response::Create {
                path: path.to_string(),
            },
            _ => Response::Create2 {
                path: path.to_string(),
                stat: self.stat_or_default(path),
            },
        }
    }

    pub(super) fn result_of(&self, kind: WriteKind) -> Reply {
        let r = match kind {
            WriteKind::Connect {
                session,
                timeout_ms,
                read_only_byte,
                password,
            } => {
                return Reply::Connect(ConnectResponse {
                    protocol_version: 0,
                    timeout_ms,
                    session_id: session,
                    passwd: password.to_vec(),
                    read_only: read_only_byte.then_some(false),
                })
            }
            WriteKind::Create { op, path } => self.created_result(op, &path),
            WriteKind::Delete | WriteKind::CloseSession => Response::Empty,
            WriteKind::Recipe(reply) => Response::Recipe(reply),
            WriteKind::Reconfig => {
                let (data, stat) = self
                    .tree
                    .get_data(reconfig::CONFIG_NODE)
                    .unwrap_or_default();
                Response::GetData { data, stat }
            }
            WriteKind::SetData { path } | WriteKind::SetAcl { path } => {
                Response::Stat(self.stat_or_default(&path))
            }
            WriteKind::Multi(kinds) => Response::Multi(
                kinds
                    .into_iter()
                    .map(|k| match k {
                        // ZooKeeper answers a create2 inside a multi as a
                        // create: the path without a stat.
                        MultiKind::Create { op, path, stat } => match op {
                            OpCode::Create | OpCode::Create2 => OpResult::Create { path },
                            _ => OpResult::Create2 { path, stat },
                        },
                        MultiKind::Delete => OpResult::Delete,
                        MultiKind::SetData { stat } => OpResult::SetData { stat },
                        MultiKind::Check => OpResult::Check,
                    })
                    .collect(),
            ),
        };
        Reply::Frame(ErrorCode::Ok, r)
    }
}
