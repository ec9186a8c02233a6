//! Prep: a write becomes a txn, checked against the committed tree plus
//! the outstanding changes of txns proposed and not applied yet (ZooKeeper's
//! PrepRequestProcessor and its ChangeRecords), numbered by the member's
//! zxid source ([`Numbering`]) and proposed or persisted.

use super::*;

/// A node's state as prep sees it: committed, or as outstanding changes
/// will leave it.
///
/// Like ZooKeeper's ChangeRecord it carries the full client-visible Stat, so
/// prep can also compute the per-op results of a multi (a setData's Stat
/// right after that op, not after the whole multi).
///
/// ZooKeeper stores a create-only child counter (the sequence counter) and
/// shows clients `2 * stored - numChildren` as cversion, so that deletes
/// count too; `stored_cversion` is that counter.
#[derive(Debug, Clone)]
pub(super) struct Record {
    pub(super) stat: Stat,
    pub(super) stored_cversion: i32,
    /// Shared with the tree's ACL table (or the txn's list): reading a
    /// record copies no ACL.
    pub(super) acl: std::sync::Arc<[Acl]>,
    /// The data outstanding writes leave, for recipe reads (`None`: the
    /// tree's data is current).
    pub(super) data: Option<std::sync::Arc<[u8]>>,
}

impl Record {
    /// Recomputes the client-visible cversion after a child count change.
    pub(super) fn refresh_cversion(&mut self) {
        self.stat.cversion = self
            .stored_cversion
            .wrapping_mul(2)
            .wrapping_sub(self.stat.num_children);
    }
}

/// Records a prep changed, by path (`None`: deleted).
pub(super) type Changes = Vec<(String, Option<Record>)>;

/// ZooKeeper's outstanding changes: the effect of txns proposed but not yet
/// applied, consulted before the tree.
#[derive(Debug, Default, Clone)]
pub(super) struct Outstanding {
    pub(super) map: HashMap<String, (Zxid, Option<Record>)>,
    pub(super) order: VecDeque<(Zxid, Vec<String>)>,
}

impl Outstanding {
    pub(super) fn get(&self, tree: &DataTree, path: &str) -> Option<Record> {
        if let Some((_, r)) = self.map.get(path) {
            return r.clone();
        }
        let node = tree.node(path)?;
        Some(Record {
            stat: node.stat.clone(),
            stored_cversion: node.stored_cversion,
            acl: node.acl,
            data: None,
        })
    }

    /// Whether the node is there, committed or as outstanding changes
    /// leave it: `get(..).is_some()` without building a record.
    pub(super) fn exists(&self, tree: &DataTree, path: &str) -> bool {
        match self.map.get(path) {
            Some((_, r)) => r.is_some(),
            None => tree.exists(path),
        }
    }

    pub(super) fn commit(&mut self, zxid: Zxid, changes: Vec<(String, Option<Record>)>) {
        let mut paths = Vec::with_capacity(changes.len());
        for (p, r) in changes {
            paths.push(p.clone());
            self.map.insert(p, (zxid, r));
        }
        self.order.push_back((zxid, paths));
    }

    /// Forgets changes that the tree now reflects.
    pub(super) fn applied(&mut self, zxid: Zxid) {
        while let Some((z, _)) = self.order.front() {
            if *z > zxid {
                break;
            }
            let (z, paths) = self.order.pop_front().expect("front exists");
            for p in paths {
                // One hash of the path: a later txn's change stays.
                if let std::collections::hash_map::Entry::Occupied(e) = self.map.entry(p) {
                    if e.get().0 == z {
                        e.remove();
                    }
                }
            }
        }
    }
}

/// Prep's state between txns.
#[derive(Debug)]
pub(super) struct PrepState {
    /// The changes of txns made and not applied yet, seen by later preps.
    pub(super) outstanding: Outstanding,
    /// Txns made here and not applied yet, in zxid order.
    pub(super) proposals: VecDeque<Proposal>,
    /// Where the next txn's zxid comes from.
    pub(super) numbering: Numbering,
    /// A [`Output::StepDown`] was emitted in this role.
    pub(super) stepping_down: bool,
}

impl Default for PrepState {
    fn default() -> Self {
        PrepState {
            outstanding: Outstanding::default(),
            proposals: VecDeque::new(),
            numbering: Numbering::Own,
            stepping_down: false,
        }
    }
}

/// A scratch view for prepping one request (or one whole multi): reads go
/// through it to the outstanding changes and the tree; writes stay in it
/// until the request as a whole succeeds.
pub(super) struct View<'a> {
    pub(super) tree: &'a DataTree,
    pub(super) outstanding: &'a Outstanding,
    pub(super) local: Local,
    /// The zxid and leader time the txn being prepped will carry.
    pub(super) zxid: Zxid,
    pub(super) time_ms: i64,
    /// A recipe step run off the member's thread records what it read
    /// here (see `recipes/offload.rs`); `None` for every other prep.
    pub(super) reads: Option<std::cell::RefCell<ReadSet>>,
    /// The ACL of the virtual node /zookeeper/recipes, where a client's
    /// prep sees it (the member runs recipes); `None` for recipe steps,
    /// which cannot reach it.
    pub(super) recipes_node: Option<&'a [Acl]>,
}

/// What a node looked like to a step: `None` if absent. Every change to a
/// node moves its Stat (data: version and mzxid; ACL: aversion; children:
/// cversion, numChildren and pzxid; a delete and create again: czxid), so
/// equal fingerprints mean the step would read the same.
pub(super) type Fingerprint = Option<(Stat, i32)>;

/// What a step read from the view it started with: the nodes, by path,
/// and the answers of the quota checks its writes asked (those read the
/// committed tree's quota nodes, which no node read covers).
#[derive(Debug, Default, Clone)]
pub(super) struct ReadSet {
    pub(super) nodes: std::collections::BTreeMap<String, Fingerprint>,
    pub(super) quotas: Vec<(QuotaAsk, Result<(), ErrorCode>)>,
}

/// One quota check of a write (ZooKeeper's checkQuota, asked of the
/// committed tree as its PrepRequestProcessor asks it): a create of
/// `bytes`, or a setData to `bytes` (counted against the node's committed
/// length).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct QuotaAsk {
    pub(super) path: String,
    pub(super) bytes: i64,
    pub(super) create: bool,
}

impl QuotaAsk {
    /// The answer `tree` gives now.
    pub(super) fn answer(&self, tree: &DataTree) -> Result<(), ErrorCode> {
        quota_answer(tree, &self.path, self.bytes, self.create)
    }
}

fn quota_answer(tree: &DataTree, path: &str, bytes: i64, create: bool) -> Result<(), ErrorCode> {
    if create {
        tree.check_quota(path, bytes, 1)
    } else {
        let old = tree.stat(path).map(|s| s.data_length).unwrap_or(0) as i64;
        tree.check_quota(path, bytes - old, 0)
    }
}

/// A prep's own changes, in the order made, indexed by path: a lookup
/// or the final list costs O(log n), not a scan of every change, since one
/// txn may stage a great many (a session's close stages one delete per
/// ephemeral, and its parent each time: with a scan, closing a session
/// that held 60,000 ephemerals took 20 s, quadratic in their number).
#[derive(Debug, Default)]
pub(super) struct Local {
    list: Vec<(String, Option<Record>)>,
    /// Each path's latest change, and its first (whose place it keeps in
    /// the final list), as indexes into `list`.
    last: std::collections::BTreeMap<String, usize>,
    first: std::collections::BTreeMap<String, usize>,
}

impl Local {
    fn get(&self, path: &str) -> Option<&Option<Record>> {
        self.last.get(path).map(|&i| &self.list[i].1)
    }

    fn push(&mut self, path: &str, r: Option<Record>) {
        let i = self.list.len();
        self.last.insert(path.to_string(), i);
        self.first.entry(path.to_string()).or_insert(i);
        self.list.push((path.to_string(), r));
    }

    /// Every path changed (once each).
    pub(super) fn paths(&self) -> impl Iterator<Item = &str> {
        self.last.keys().map(String::as_str)
    }

    /// One change per path, its latest, in the order of each path's first
    /// change.
    fn into_changes(self) -> Vec<(String, Option<Record>)> {
        let Local {
            mut list,
            last,
            first,
        } = self;
        let mut order: Vec<(usize, usize)> = first.iter().map(|(p, &f)| (f, last[p])).collect();
        order.sort_unstable();
        order
            .into_iter()
            .map(|(_, l)| {
                let (p, r) = &mut list[l];
                (std::mem::take(p), r.take())
            })
            .collect()
    }
}

impl From<Vec<(String, Option<Record>)>> for Local {
    fn from(changes: Vec<(String, Option<Record>)>) -> Local {
        let mut local = Local::default();
        for (p, r) in changes {
            local.push(&p, r);
        }
        local
    }
}

pub(super) fn fingerprint(r: &Option<Record>) -> Fingerprint {
    r.as_ref().map(|r| (r.stat.clone(), r.stored_cversion))
}

impl View<'_> {
    pub(super) fn get(&self, path: &str) -> Option<Record> {
        if let Some(r) = self.local.get(path) {
            return r.clone();
        }
        let r = self.outstanding.get(self.tree, path);
        if let Some(reads) = &self.reads {
            reads
                .borrow_mut()
                .nodes
                .entry(path.to_string())
                .or_insert_with(|| fingerprint(&r));
        }
        r
    }

    /// The quota check of a create (of `bytes`) or a setData (to `bytes`)
    /// of `path` with enforceQuota on, recorded for a step run off the
    /// member's thread (checked again when it comes back).
    fn check_quota(&self, path: &str, bytes: i64, create: bool) -> Result<(), ErrorCode> {
        let answer = quota_answer(self.tree, path, bytes, create);
        if let Some(reads) = &self.reads {
            let ask = QuotaAsk {
                path: path.to_string(),
                bytes,
                create,
            };
            reads.borrow_mut().quotas.push((ask, answer));
        }
        answer
    }

    /// `get(path).is_some()`, recorded as `get` records it, without
    /// building a record when no read set is kept.
    pub(super) fn exists(&self, path: &str) -> bool {
        if self.reads.is_some() {
            return self.get(path).is_some();
        }
        if let Some(r) = self.local.get(path) {
            return r.is_some();
        }
        self.outstanding.exists(self.tree, path)
    }

    /// As `get`, without recording the read (a child listed under a node
    /// whose own read covers its children).
    pub(super) fn get_unrecorded(&self, path: &str) -> Option<Record> {
        if let Some(r) = self.local.get(path) {
            return r.clone();
        }
        self.outstanding.get(self.tree, path)
    }

    pub(super) fn set(&mut self, path: &str, r: Option<Record>) {
        self.local.push(path, r);
    }

    /// The changes made, the last write to a path winning.
    pub(super) fn into_changes(self) -> Vec<(String, Option<Record>)> {
        self.local.into_changes()
    }
}

pub(super) fn check_version(current: i32, expected: i32) -> Result<i32, ErrorCode> {
    if expected != -1 && expected != current {
        return Err(ErrorCode::BadVersion);
    }
    Ok(current.wrapping_add(1))
}

/// Reads look the path up as given (an invalid one is simply not there),
/// refusing only NUL, as ZooKeeper's FinalRequestProcessor does.
/// Reads do not validate their path in ZooKeeper: a path no node can
/// have is NoNode. One with a NUL is answered here, before any lookup.
pub(super) fn check_read_path(path: &str) -> Result<(), ErrorCode> {
    if path.contains('\0') {
        return Err(ErrorCode::NoNode);
    }
    Ok(())
}

pub(super) fn validate_path(path: &str) -> Result<(), ErrorCode> {
    wazoo_proto::path::validate(path, false).map_err(|_| ErrorCode::BadArguments)
}

impl Server {
    /// A view for prepping the next txn: the committed tree plus the
    /// outstanding changes, at the zxid after the last one proposed.
    pub(super) fn prep_view(&self) -> View<'_> {
        View {
            tree: &self.tree,
            outstanding: &self.prep.outstanding,
            local: Local::default(),
            zxid: self.prep_zxid(),
            time_ms: self.wall_ms,
            reads: None,
            recipes_node: self
                .recipes
                .is_some()
                .then(|| &self.prep_recipes_acl().acl[..]),
        }
    }

    /// The zxid of the last txn this member made that is not applied yet,
    /// or else of the last txn applied.
    pub(super) fn last_proposed(&self) -> Zxid {
        self.prep
            .proposals
            .back()
            .map_or(self.last_applied, |p| Zxid::from_wire(p.record.header.zxid))
    }

    /// The zxid the next txn gets, if consensus takes one now.
    pub(super) fn next_zxid(&self) -> Option<Zxid> {
        match &self.prep.numbering {
            Numbering::Own => Some(self.last_proposed().next()),
            Numbering::Granted { next, room } if *room > 0 => Some(*next),
            Numbering::Granted { .. } | Numbering::Refused(_) => None,
        }
    }

    /// The zxid a prep stamps into what it changes: the next txn's. Without
    /// one, the txn prepped is refused in `propose` and the prep discarded.
    pub(super) fn prep_zxid(&self) -> Zxid {
        self.next_zxid().unwrap_or(self.last_proposed().next())
    }

    /// Takes the next txn's zxid, if consensus takes one now.
    pub(super) fn take_zxid(&mut self) -> Option<Zxid> {
        let zxid = self.next_zxid()?;
        assert!(
            zxid > self.last_proposed(),
            "txns are numbered in order: {zxid} after {}",
            self.last_proposed()
        );
        if let Numbering::Granted { next, room } = &mut self.prep.numbering {
            *next = next.next();
            *room -= 1;
        }
        Some(zxid)
    }

    /// Ensemble: where the next txns' zxids come from (see [`Numbering`]).
    /// The join sets it from consensus before every input.
    pub fn set_numbering(&mut self, numbering: Numbering) {
        self.prep.numbering = numbering;
    }

    /// Whether a txn can be made now; if not, the leader steps down (see
    /// [`Output::StepDown`]). Checked before a write has effects of its own
    /// beside its txn (a new session in the table, a closing session).
    pub(super) fn can_propose(&mut self) -> bool {
        if self.next_zxid().is_some() {
            return true;
        }
        self.refuse_proposal();
        false
    }

    /// Consensus takes no more txns: nothing of the one at hand becomes
    /// visible, and the member asks to stop leading (once per role).
    pub(super) fn refuse_proposal(&mut self) {
        if self.prep.stepping_down {
            return;
        }
        self.prep.stepping_down = true;
        let why = match &self.prep.numbering {
            Numbering::Refused(why) => why.clone(),
            Numbering::Granted { .. } => "consensus takes no more proposals now".to_string(),
            Numbering::Own => unreachable!("a member that numbers its own txns never refuses"),
        };
        tracing::warn!("a txn was refused ({why}): leaving leadership for an election");
        self.out.push(Output::StepDown { why });
    }

    pub(super) fn on_write(&mut self, conn: ConnId, xid: i32, session: i64, req: Request) {
        if self.role.forwards() {
            self.forward_write(conn, xid, session, req);
            return;
        }
        let audit = self.audit_request(conn, session, &req);
        if !self.sessions.is_live(session) {
            self.audit_refused(audit);
            self.push_deferred(conn, xid, Deferred::Error(ErrorCode::SessionExpired));
            return;
        }
        let auth = self
            .conns
            .get(&conn)
            .map(|c| c.auth.clone())
            .unwrap_or_default();
        if let Some(wait) = self.compile_wait(&auth, &req) {
            let held = recipes::Held::Local { conn, xid, req };
            return self.wait_for_compile(session, &auth, wait, held);
        }
        match self.recipe_call_of(&req, session, xid) {
            Some(Ok(call)) => return self.local_recipe_call(conn, xid, session, &auth, call),
            Some(Err(code)) => {
                let d = self.error_after_outstanding(code);
                return self.push_deferred(conn, xid, d);
            }
            None => {}
        }
        let prepped = self.prep_write(&auth, session, &req);
        match prepped {
            Ok((txn, changes, kind)) => {
                let proposed = self.prep.proposals.len();
                self.propose(
                    Origin::Conn(conn),
                    xid,
                    session,
                    txn,
                    changes,
                    Some(kind),
                    false,
                );
                if self.prep.proposals.len() > proposed {
                    if let Some(p) = self.prep.proposals.back_mut() {
                        p.audit = audit;
                    }
                }
            }
            // A refusal may rest on changes
            // proposed and not yet applied: its answer waits until they
            // are, as ZooKeeper's does behind the error txn it logs.
            // Answered at once, it could tell of a change that a leader's
            // fall then loses, and the client would have seen a state the
            // ensemble never had (found by the whole-member simulation).
            Err(PrepError::Code(code)) => {
                self.audit_refused(audit);
                let d = self.error_after_outstanding(code);
                self.push_deferred(conn, xid, d)
            }
            Err(PrepError::Done) => {
                let d = self.reply_after_outstanding(Response::Empty);
                self.push_deferred(conn, xid, d)
            }
            // A failed multi is answered with per-op results and no txn.
            Err(PrepError::MultiFailed(results)) => {
                self.audit_refused(audit);
                let d = self.reply_after_outstanding(Response::Multi(results));
                self.push_deferred(conn, xid, d)
            }
        }
    }

    /// The last txn proposed and not yet applied, if any.
    pub(super) fn last_outstanding(&self) -> Option<Zxid> {
        self.prep
            .proposals
            .back()
            .map(|p| Zxid::from_wire(p.record.header.zxid))
    }

    /// The error `code` now, or once every txn proposed so far is applied.
    pub(super) fn error_after_outstanding(&self, code: ErrorCode) -> Deferred {
        match self.last_outstanding() {
            Some(zxid) => Deferred::ErrorAfter { zxid, code },
            None => Deferred::Error(code),
        }
    }

    /// `body` now, or once every txn proposed so far is applied.
    pub(super) fn reply_after_outstanding(&self, body: Response) -> Deferred {
        match self.last_outstanding() {
            Some(zxid) => Deferred::After { zxid, body },
            None => Deferred::Reply(body),
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn propose(
        &mut self,
        origin: Origin,
        xid: i32,
        session: i64,
        txn: Txn,
        changes: Vec<(String, Option<Record>)>,
        kind: Option<WriteKind>,
        close_after: bool,
    ) {
        let Some(zxid) = self.take_zxid() else {
            return self.refuse_proposal();
        };
        let record = TxnRecord {
            header: TxnHeader {
                session_id: session,
                cxid: xid,
                zxid: zxid.to_wire(),
                time_ms: self.wall_ms,
            },
            txn,
        };
        self.find_prefired(&changes);
        self.prep.outstanding.commit(zxid, changes);
        if matches!(self.role, Role::Leader { .. }) {
            self.out.push(Output::Propose {
                zxid,
                record: record.encode(),
            });
        } else {
            let record = record.encode();
            self.bytes_since_snapshot += record.len() as u64;
            self.out.push(Output::Persist { zxid, record });
        }
        if let Origin::Conn(conn) = origin {
            let now = self.mono_ms;
            if let Some(c) = self.conns.get_mut(&conn) {
                c.queue.push_back(Queued::Write {
                    xid,
                    zxid,
                    started_ms: now,
                    result: None,
                    close_after,
                    meta: None,
                });
            }
        }
        let deploy = matches!(
            record.txn,
            Txn::Deploy(_) | Txn::Undeploy { .. } | Txn::SetRecipesAcl { .. }
        );
        if deploy {
            let txn = record.txn.clone();
            self.prep.proposals.push_back(Proposal {
                record,
                origin,
                kind,
                audit: None,
            });
            return self.deploy_proposed(zxid, &txn);
        }
        self.prep.proposals.push_back(Proposal {
            record,
            origin,
            kind,
            audit: None,
        });
    }
}

/// Preps one write request against `view` (ZooKeeper's pRequest2Txn).
pub(super) fn prep_request(
    cfg: &ServerConfig,
    view: &mut View<'_>,
    auth: &AuthInfo,
    session: i64,
    req: &Request,
) -> Result<(Txn, WriteKind), PrepError> {
    match req {
        Request::Multi(ops) => {
            let zxid = view.zxid;
            prep_multi(cfg, view, auth, session, zxid, ops).map(|(t, k)| (t, WriteKind::Multi(k)))
        }
        Request::Reconfig(_) => Err(PrepError::Code(if cfg.reconfig_enabled {
            ErrorCode::Unimplemented
        } else {
            ErrorCode::ReconfigDisabled
        })),
        // A check is an op of a multi only (the shell answers one outside
        // a multi as an unknown opcode; this is for a member of an older
        // version that forwarded one).
        Request::Check { .. } => Err(PrepError::Code(ErrorCode::Unimplemented)),
        op => prep_single(cfg, view, auth, session, op)
            .map_err(PrepError::Code)
            .and_then(|(t, k)| match k {
                Some(k) => Ok((t, k)),
                None => Err(PrepError::Done),
            }),
    }
}

pub(super) enum PrepError {
    Code(ErrorCode),
    /// Nothing to write; answer OK.
    Done,
    MultiFailed(Vec<OpResult>),
}

pub(super) fn prep_check(
    view: &mut View<'_>,
    auth: &AuthInfo,
    path: &str,
    version: i32,
) -> Result<(), ErrorCode> {
    validate_path(path)?;
    let r = view.get(path).ok_or(ErrorCode::NoNode)?;
    acl::check(&r.acl, perms::READ, auth)?;
    check_version(r.stat.version, version)?;
    Ok(())
}

/// Preps one write. `Ok((txn, None))` never happens; a kind is always given.
pub(super) fn prep_single(
    cfg: &ServerConfig,
    view: &mut View<'_>,
    auth: &AuthInfo,
    session: i64,
    req: &Request,
) -> Result<(Txn, Option<WriteKind>), ErrorCode> {
    match req {
        Request::Create(c)
        | Request::Create2(c)
        | Request::CreateContainer(c)
        | Request::CreateTtl(c) => {
            let op = req.opcode();
            let (txn, path) = prep_create(cfg, view, auth, session, op, c)?;
            Ok((txn, Some(WriteKind::Create { op, path })))
        }
        Request::Delete { path, version } => {
            prep_delete(view, auth, session, path, *version)?;
            Ok((Txn::Delete { path: path.clone() }, Some(WriteKind::Delete)))
        }
        // ZooKeeper reads a deleteContainer's body as a bare path (servers
        // send it so); a client's jute string starts with its length, whose
        // NUL bytes make the path BadArguments. Its reaper does not come
        // this way in wazoo, so a client's deleteContainer deletes nothing.
        Request::DeleteContainer { .. } => Err(ErrorCode::BadArguments),
        Request::SetData {
            path,
            data,
            version,
        } => {
            let txn = prep_set_data(cfg, view, auth, path, data.as_deref(), *version)?;
            Ok((txn, Some(WriteKind::SetData { path: path.clone() })))
        }
        Request::SetAcl { path, acl, version } => {
            validate_path(path)?;
            let fixed = acl::fixup(acl, auth, cfg.acl_schemes)?;
            let mut r = view.get(path).ok_or(ErrorCode::NoNode)?;
            acl::check(&r.acl, perms::ADMIN, auth)?;
            if recipes::node_calls::under_calls(path) {
                return Err(ErrorCode::NoAuth);
            }
            let aversion = check_version(r.stat.aversion, *version)?;
            let txn = checked(Txn::SetAcl {
                path: path.clone(),
                acl: fixed.clone(),
                aversion,
            })?;
            r.stat.aversion = aversion;
            r.acl = fixed.into();
            view.set(path, Some(r));
            Ok((txn, Some(WriteKind::SetAcl { path: path.clone() })))
        }
        _ => Err(ErrorCode::Unimplemented),
    }
}

pub(super) fn prep_create(
    cfg: &ServerConfig,
    view: &mut View<'_>,
    auth: &AuthInfo,
    session: i64,
    op: OpCode,
    c: &wazoo_proto::CreateRequest,
) -> Result<(Txn, String), ErrorCode> {
    let mode = CreateMode::from_flags(c.flags).ok_or(ErrorCode::BadArguments)?;
    let ttl = c.ttl.unwrap_or(-1);
    if mode.is_ttl() && !cfg.extended_types_enabled {
        return Err(ErrorCode::Unimplemented);
    }
    // ZooKeeper's validateTTL: a TTL mode needs 0 < ttl <= max; any other
    // mode must not carry one.
    if mode.is_ttl() {
        if !crate::tree::ttl_in_range(ttl) {
            return Err(ErrorCode::BadArguments);
        }
    } else if ttl >= 0 {
        return Err(ErrorCode::BadArguments);
    }
    let path = &c.path;
    let last_slash = path.rfind('/').ok_or(ErrorCode::BadArguments)?;
    if path.contains('\0') {
        return Err(ErrorCode::BadArguments);
    }
    let acl = acl::fixup(&c.acl, auth, cfg.acl_schemes)?;
    let parent_path = if last_slash == 0 {
        "/"
    } else {
        &path[..last_slash]
    };
    if parent_path.is_empty() {
        return Err(ErrorCode::BadArguments);
    }
    if let Some(acl) = view.recipes_node {
        // /zookeeper/recipes is no node of the tree, yet it exists: it
        // cannot be created again (below), and it has no children but the
        // deployed modules' names, which setData on it makes. A child is
        // refused as a create under ZooKeeper's /zookeeper/config is, for
        // want of CREATE in its ACL; even for a caller who has it.
        if parent_path == super::recipes::RECIPES_NODE {
            acl::check(acl, perms::CREATE, auth)?;
            return Err(ErrorCode::BadArguments);
        }
    }
    // A node there is made by a call alone (a create outside a multi, on a
    // member that runs recipes: `recipes::node_calls`).
    if recipes::node_calls::under_calls(path) {
        return Err(ErrorCode::BadArguments);
    }
    let parent = view.get(parent_path).ok_or(ErrorCode::NoNode)?;
    acl::check(&parent.acl, perms::CREATE, auth)?;
    let final_path = if mode.is_sequential() {
        crate::tree::sequential_path(path, parent.stored_cversion)
    } else {
        path.clone()
    };
    validate_path(&final_path)?;
    if final_path == "/" {
        return Err(ErrorCode::NodeExists);
    }
    if view.exists(&final_path)
        || (view.recipes_node.is_some() && final_path == super::recipes::RECIPES_NODE)
    {
        return Err(ErrorCode::NodeExists);
    }
    if parent.stat.ephemeral_owner != 0 {
        return Err(ErrorCode::NoChildrenForEphemerals);
    }
    let data = c.data.as_deref();
    check_data_size(cfg, data)?;
    if cfg.enforce_quota {
        view.check_quota(&final_path, data_len(data), true)?;
    }
    // What the node is comes from the opcode, as the txn ZooKeeper
    // applies does (CreateContainerTxn, CreateTTLTxn, or CreateTxn with
    // its ephemeral flag); the flags only add the sequence and, for a
    // create or create2, make it ephemeral. So createContainer with
    // ephemeral flags makes a container, and create with the container
    // flag a persistent node. (Inside a multi the flags chose the opcode:
    // wazoo_proto's multi decoding.)
    let (kind, owner) = match op {
        OpCode::CreateContainer => (NodeKind::Container, 0),
        OpCode::CreateTtl if mode.is_ttl() => (NodeKind::Ttl { ttl_ms: ttl }, 0),
        _ => (
            NodeKind::Regular,
            if mode.is_ephemeral() { session } else { 0 },
        ),
    };
    let txn = stage_new_node(
        view,
        parent_path,
        parent,
        &final_path,
        data,
        acl,
        owner,
        kind,
    )?;
    Ok((txn, final_path))
}

/// Stages, in `view`, the create of `path` under `parent` (its record, at
/// `parent_path`) once every check of the create passed: the txn (checked
/// as apply will check it), the parent's counters and the new node's
/// record. `owner`: the ephemeral owner, 0 for any other node (containers
/// and TTL nodes too, as clients see them).
#[allow(clippy::too_many_arguments)]
pub(super) fn stage_new_node(
    view: &mut View<'_>,
    parent_path: &str,
    mut parent: Record,
    path: &str,
    data: Option<&[u8]>,
    acl: Vec<Acl>,
    owner: i64,
    kind: NodeKind,
) -> Result<Txn, ErrorCode> {
    let new_cversion = parent.stored_cversion.wrapping_add(1);
    // The new node's record shares the parent's list when the two are the
    // same (the usual case), so that it copies no ACL.
    let record_acl: std::sync::Arc<[Acl]> = if *parent.acl == *acl {
        parent.acl.clone()
    } else {
        acl.as_slice().into()
    };
    let txn = checked(Txn::Create(CreateTxn {
        path: path.to_string(),
        data: data.map(<[u8]>::to_vec),
        acl,
        ephemeral_owner: owner,
        parent_cversion: new_cversion,
        kind,
    }))?;
    // Nothing below fails: the view changes only for a create that passed.
    parent.stored_cversion = new_cversion;
    parent.stat.num_children += 1;
    parent.refresh_cversion();
    parent.stat.pzxid = view.zxid.to_wire();
    view.set(parent_path, Some(parent));
    let zxid = view.zxid.to_wire();
    let stat = Stat {
        czxid: zxid,
        mzxid: zxid,
        ctime: view.time_ms,
        mtime: view.time_ms,
        ephemeral_owner: owner,
        data_length: data_len(data) as i32,
        pzxid: zxid,
        ..Stat::default()
    };
    view.set(
        path,
        Some(Record {
            stat,
            stored_cversion: 0,
            acl: record_acl,
            data: recipes::record_data(data),
        }),
    );
    Ok(txn)
}

/// Prep's half of the rules prep and apply share ([`check_txn`]): a txn
/// apply would refuse is refused here, with the code ZooKeeper answers.
pub(super) fn checked(txn: Txn) -> Result<Txn, ErrorCode> {
    check_txn(&txn).map_err(|e| e.code())?;
    Ok(txn)
}

/// The length of node data as a Stat's dataLength counts it: 0 for null.
fn data_len(data: Option<&[u8]>) -> i64 {
    data.map_or(0, <[u8]>::len) as i64
}

/// Node data over `jute.maxbuffer` is refused: no client can send it, and
/// no recipe may write it (no client could read it back).
pub(super) fn check_data_size(cfg: &ServerConfig, data: Option<&[u8]>) -> Result<(), ErrorCode> {
    if data_len(data) > cfg.max_buffer_bytes as i64 {
        return Err(ErrorCode::BadArguments);
    }
    Ok(())
}

pub(super) fn prep_delete(
    view: &mut View<'_>,
    auth: &AuthInfo,
    session: i64,
    path: &str,
    version: i32,
) -> Result<(), ErrorCode> {
    // ZooKeeper checks a delete's path only for a '/' and a NUL (its
    // getParentPathAndValidate): any other invalid path names no node, so
    // it is NoNode (or NoAuth on the parent), not BadArguments. No node
    // with an invalid path exists, so nothing invalid gets past the lookup.
    let Some(last_slash) = path.rfind('/') else {
        return Err(ErrorCode::BadArguments);
    };
    if path.contains('\0') || SPECIAL_PATHS.contains(&path) {
        return Err(ErrorCode::BadArguments);
    }
    let parent_path = if last_slash == 0 {
        "/"
    } else {
        &path[..last_slash]
    };
    let mut parent = view.get(parent_path).ok_or(ErrorCode::NoNode)?;
    if recipes::node_calls::under_calls(path) {
        // A call node goes with its session or by its owner's hand alone.
        recipes::node_calls::check_client_delete(view, session, path)?;
    } else {
        acl::check(&parent.acl, perms::DELETE, auth)?;
    }
    let node = view.get(path).ok_or(ErrorCode::NoNode)?;
    check_version(node.stat.version, version)?;
    if node.stat.num_children > 0 {
        return Err(ErrorCode::NotEmpty);
    }
    checked(Txn::Delete {
        path: path.to_string(),
    })?;
    // A delete moves pzxid but not the stored (sequence) counter.
    parent.stat.num_children -= 1;
    parent.refresh_cversion();
    parent.stat.pzxid = view.zxid.to_wire();
    view.set(parent_path, Some(parent));
    view.set(path, None);
    Ok(())
}

pub(super) fn prep_set_data(
    cfg: &ServerConfig,
    view: &mut View<'_>,
    auth: &AuthInfo,
    path: &str,
    data: Option<&[u8]>,
    version: i32,
) -> Result<Txn, ErrorCode> {
    validate_path(path)?;
    let r = view.get(path).ok_or(ErrorCode::NoNode)?;
    acl::check(&r.acl, perms::WRITE, auth)?;
    // A call node's data is its result: the server's alone to write.
    if recipes::node_calls::under_calls(path) {
        return Err(ErrorCode::NoAuth);
    }
    if cfg.enforce_quota {
        view.check_quota(path, data_len(data), false)?;
    }
    check_data_size(cfg, data)?;
    let v = check_version(r.stat.version, version)?;
    stage_set_data(view, path, r, data, v)
}

/// Stages, in `view`, a setData of `path` (its record `r`) to `data` as
/// version `version`, once every check of the write passed: the txn
/// (checked as apply will check it) and the node's new record.
pub(super) fn stage_set_data(
    view: &mut View<'_>,
    path: &str,
    mut r: Record,
    data: Option<&[u8]>,
    version: i32,
) -> Result<Txn, ErrorCode> {
    let txn = checked(Txn::SetData {
        path: path.to_string(),
        data: data.map(<[u8]>::to_vec),
        version,
    })?;
    r.stat.version = version;
    r.stat.mzxid = view.zxid.to_wire();
    r.stat.mtime = view.time_ms;
    r.stat.data_length = data_len(data) as i32;
    r.data = recipes::record_data(data);
    view.set(path, Some(r));
    Ok(txn)
}

/// ZooKeeper's per-op results of a multi whose op `failed` failed with
/// `code`: OK for the ops before it, its error, then RuntimeInconsistency.
pub(super) fn multi_failure(ops: usize, failed: usize, code: ErrorCode) -> Vec<OpResult> {
    (0..ops)
        .map(|j| OpResult::Error {
            err: match j.cmp(&failed) {
                std::cmp::Ordering::Less => 0,
                std::cmp::Ordering::Equal => code.code(),
                std::cmp::Ordering::Greater => ErrorCode::RuntimeInconsistency.code(),
            },
        })
        .collect()
}

/// Preps a multi: every op against the state the previous ops leave. On
/// failure, ZooKeeper's per-op results: OK for ops before the failing one,
/// its error, then RuntimeInconsistency for the rest.
pub(super) fn prep_multi(
    cfg: &ServerConfig,
    view: &mut View<'_>,
    auth: &AuthInfo,
    session: i64,
    _zxid: Zxid,
    ops: &[Request],
) -> Result<(Txn, Vec<MultiKind>), PrepError> {
    let mut txns = Vec::with_capacity(ops.len());
    let mut kinds = Vec::with_capacity(ops.len());
    for (i, op) in ops.iter().enumerate() {
        // A create with TTL flags and no TTL (wazoo_proto's multi
        // decoding): ZooKeeper's prep fails the whole multi on it with
        // MarshallingError (a ClassCastException), once the ops before it
        // passed.
        if matches!(op, Request::CreateTtl(c) if c.ttl.is_none()) {
            return Err(PrepError::Code(ErrorCode::MarshallingError));
        }
        let res = match op {
            Request::Check { path, version } => prep_check(view, auth, path, *version)
                .map(|_| (Txn::Check { path: path.clone() }, MultiKind::Check)),
            _ => prep_single(cfg, view, auth, session, op).map(|(t, k)| {
                // The op's result as of right after it, as ZooKeeper reports it.
                let stat_now = |p: &str| view.get(p).map(|r| r.stat).unwrap_or_default();
                let mk = match k {
                    Some(WriteKind::Create { op, path }) => MultiKind::Create {
                        op,
                        stat: stat_now(&path),
                        path,
                    },
                    Some(WriteKind::SetData { path }) => MultiKind::SetData {
                        stat: stat_now(&path),
                    },
                    _ => MultiKind::Delete,
                };
                (t, mk)
            }),
        };
        match res {
            Ok((t, k)) => {
                txns.push(t);
                kinds.push(k);
            }
            Err(code) => return Err(PrepError::MultiFailed(multi_failure(ops.len(), i, code))),
        }
    }
    Ok((Txn::Multi(txns), kinds))
}

#[cfg(test)]
mod local_tests {
    use super::*;

    fn rec(version: i32) -> Option<Record> {
        Some(Record {
            stat: Stat {
                version,
                ..Stat::default()
            },
            stored_cversion: 0,
            acl: Vec::new().into(),
            data: None,
        })
    }

    /// A prep's changes: a lookup sees a path's latest change, and the
    /// final list has one change per path, its latest, in the order of
    /// each path's first change (what apply and the followers see).
    #[test]
    fn the_latest_change_of_each_path_wins_in_first_change_order() {
        let mut l = Local::default();
        l.push("/a", rec(1));
        l.push("/b", rec(1));
        l.push("/a", None);
        l.push("/c", rec(3));
        l.push("/a", rec(2));
        assert_eq!(
            l.get("/a").cloned().flatten().map(|r| r.stat.version),
            Some(2)
        );
        assert!(l.get("/x").is_none());
        assert_eq!(l.paths().collect::<Vec<_>>(), ["/a", "/b", "/c"]);
        let out: Vec<(String, Option<i32>)> = l
            .into_changes()
            .into_iter()
            .map(|(p, r)| (p, r.map(|r| r.stat.version)))
            .collect();
        assert_eq!(
            out,
            [
                ("/a".to_string(), Some(2)),
                ("/b".to_string(), Some(1)),
                ("/c".to_string(), Some(3))
            ]
        );
    }
}
