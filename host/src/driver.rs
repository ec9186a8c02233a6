//! The core loop: the one I/O driver of a member's deterministic state
//! machine ([`crate::core::member::Member`]), standalone or in an ensemble.
//!
//! It takes events from the member's channels in batches (the log
//! writer's reports first), feeds each to the machine with the time, and
//! then carries out the machine's outputs in the one order the machine
//! gives them (docs/ARCHITECTURE.md, "The member"): bytes and closes to
//! connection writers (the bytes gathered per connection and handed over
//! after the batch's last output), records to the group-commit log, epochs, log
//! truncation and the leader's snapshot to disk before the next output,
//! messages to quorum links, snapshots to a writer thread.

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use tokio::sync::mpsc;

use crate::config::Config;
use crate::core::member::{Input as MemberInput, Member as CoreMember, Output};
use crate::core::server::{Input, SnapshotJob};
use crate::core::time::Now;
use crate::core::watch::ConnId;
use crate::member::{snap_dir, write_snapshot_payload, AdminContext, Clock, Event};
use crate::quorum::{LinkCmd, LinkEvent, Links};
use wazoo_proto::Zxid;
use wazoo_storage::{GroupCommitLog, GroupCommitOptions, TryAppendError, TxnLog};

/// Events handled in one batch at most before the outputs are carried out.
const BATCH_EVENTS_MAX: usize = 4096;

/// The time for a batch of events: read once per 32 events rather than per
/// event (reading the clock was 1.5 % of a member's time under write load);
/// a new batch starts with a fresh reading.
pub(crate) struct BatchClock<'c> {
    clock: &'c Clock,
    now: Now,
    left: u32,
}

impl<'c> BatchClock<'c> {
    pub(crate) fn new(clock: &'c Clock) -> Self {
        BatchClock {
            clock,
            now: Now::default(),
            left: 0,
        }
    }

    pub(crate) fn now(&mut self) -> Now {
        if self.left == 0 {
            self.now = self.clock.now();
            self.left = 32;
        }
        self.left -= 1;
        self.now
    }
}

/// The group-commit callback: durability reports go to the core loop, on a
/// channel of their own that never blocks the writer. The writer thus never
/// waits for the member thread (which may be waiting for room in the
/// writer's queue: the two would deadlock); reports come at most one per
/// fsync and the core loop takes them before anything else.
pub(crate) fn durable_callback(
    tx: mpsc::UnboundedSender<Event>,
) -> impl FnMut(wazoo_storage::DurabilityReport<'_>) + Send + 'static {
    move |report| {
        let ev = match report {
            Ok(zxid) => Event::Durable(zxid),
            Err(e) => Event::LogFailed(e.to_string()),
        };
        // The core may be gone at shutdown; nothing to do then.
        let _ = tx.send(ev);
    }
}

/// Records the writer's queue had no room for, beyond which the core loop
/// stops taking new events (client work) and only takes the writer's
/// reports until it is back under.
pub(crate) const LOG_BACKLOG_MAX: usize = 65536;

/// The member thread's side of the hand-off to the log writer. The member
/// never blocks on the writer's queue: a slow disk must not stop it from
/// answering reads and pings, nor deadlock it against the writer. A record
/// the queue has no room for waits here, in zxid order, and moves on when
/// the writer reports progress ([`LogFeed::pump`]).
#[derive(Default)]
pub(crate) struct LogFeed {
    backlog: VecDeque<(Zxid, Vec<u8>)>,
}

impl LogFeed {
    /// Hands a record to the writer, or keeps it while the writer is behind.
    pub(crate) fn append(&mut self, log: &GroupCommitLog, zxid: Zxid, body: Vec<u8>) -> Result<()> {
        if self.backlog.is_empty() {
            match log.try_append(zxid, body) {
                Ok(()) => return Ok(()),
                Err(TryAppendError::Full(body)) => {
                    tracing::debug!("the log writer is behind; holding {zxid}");
                    self.backlog.push_back((zxid, body));
                    return Ok(());
                }
                Err(TryAppendError::Refused(e)) => return Err(e.into()),
            }
        }
        self.backlog.push_back((zxid, body));
        Ok(())
    }

    /// Moves held records to the writer while its queue has room.
    pub(crate) fn pump(&mut self, log: &GroupCommitLog) -> Result<()> {
        while let Some((zxid, body)) = self.backlog.pop_front() {
            match log.try_append(zxid, body) {
                Ok(()) => {}
                Err(TryAppendError::Full(body)) => {
                    self.backlog.push_front((zxid, body));
                    break;
                }
                Err(TryAppendError::Refused(e)) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Hands every held record to the writer, waiting for room (before the
    /// writer is stopped; it never waits for this thread, so this ends).
    pub(crate) fn flush(&mut self, log: &GroupCommitLog) -> Result<()> {
        while let Some((zxid, body)) = self.backlog.pop_front() {
            log.append(zxid, body)?;
        }
        Ok(())
    }

    /// Whether the core loop should stop taking client work until the
    /// writer catches up.
    pub(crate) fn over_limit(&self) -> bool {
        self.backlog.len() >= LOG_BACKLOG_MAX
    }
}

/// The next event for a core loop: the writer's reports first; other
/// events only while the log is not too far behind. None: stop.
async fn next_event(
    rx: &mut mpsc::Receiver<Event>,
    durable_rx: &mut mpsc::UnboundedReceiver<Event>,
    feed: &LogFeed,
) -> Option<Event> {
    tokio::select! {
        biased;
        Some(ev) = durable_rx.recv() => Some(ev),
        ev = rx.recv(), if !feed.over_limit() => ev,
        else => None,
    }
}

/// The next event of a batch already started, without waiting.
fn try_next_event(
    rx: &mut mpsc::Receiver<Event>,
    durable_rx: &mut mpsc::UnboundedReceiver<Event>,
    feed: &LogFeed,
) -> Option<Event> {
    if let Ok(ev) = durable_rx.try_recv() {
        return Some(ev);
    }
    if feed.over_limit() {
        return None;
    }
    rx.try_recv().ok()
}

/// Reads an epoch file (`acceptedEpoch`, `currentEpoch`); 0 if absent.
pub(crate) fn read_epoch(dir: &Path, name: &str) -> Result<u32> {
    let p = dir.join(name);
    match std::fs::read_to_string(&p) {
        Ok(s) => s
            .trim()
            .parse()
            .map_err(|_| anyhow!("{}: not an epoch number: {:?}", p.display(), s.trim())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", p.display())),
    }
}

/// Writes an epoch file durably (temp file, fsync, rename, fsync dir).
pub(crate) fn write_epoch(dir: &Path, name: &str, epoch: u32) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = dir.join(format!("{name}.tmp"));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(epoch.to_string().as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, dir.join(name))?;
    std::fs::File::open(dir)?.sync_all()
}

/// A member's machine and everything its outputs go to.
pub(crate) struct Driver {
    pub member: CoreMember,
    /// The log writer; taken while the log is truncated.
    pub log: Option<GroupCommitLog>,
    /// Quorum links; none when standalone.
    pub links: Option<Links>,
    /// The link to a ZooKeeper leader, when observing a ZooKeeper ensemble.
    pub zk: Option<crate::zk_observer::ZkLink>,
    pub cfg: Config,
    pub clock: Clock,
    /// Where a restarted log writer reports (see `with_log`).
    pub durable_tx: mpsc::UnboundedSender<Event>,
    pub group_commit: GroupCommitOptions,
    /// Records the log writer's queue had no room for yet.
    pub feed: LogFeed,
    pub conns: HashMap<ConnId, crate::net::ConnTx>,
    /// With client I/O threads: publishes the tree their readers answer
    /// plain reads from (net/local_reads.rs).
    pub publisher: Option<crate::net::local_reads::Publisher>,
    /// Connections with replies gathered during this batch of outputs, to
    /// hand to their writers once the batch is carried out.
    pub gathered: Vec<ConnId>,
    /// A snapshot is being written (one at a time).
    pub snapshot_busy: Arc<AtomicBool>,
    /// Runs recipe steps off this thread; none when steps run in prep.
    pub recipe_pool: Option<crate::recipe_pool::RecipePool>,
    /// The audit log (`audit.enable`), its serverStart written.
    pub audit: Option<crate::audit::AuditLog>,
    /// AdminServer restores asked of this member and not applied yet, by
    /// token (`Output::Restored` answers them).
    restores: Restores,
}

/// The AdminServer's restores waiting for their txn (see
/// `crate::admin::server`): each gets a token unique to this member (its
/// id in the top 16 bits), which its txn carries through the log.
#[derive(Default)]
struct Restores {
    next: u64,
    waiting: std::collections::BTreeMap<u64, tokio::sync::oneshot::Sender<Result<Zxid, String>>>,
}

/// Restores waiting at once: the rate limit lets one through per
/// interval, so more only stay when their askers gave up.
const RESTORES_WAITING_MAX: usize = 16;

impl Restores {
    fn add(
        &mut self,
        my_id: u64,
        reply: tokio::sync::oneshot::Sender<Result<Zxid, String>>,
    ) -> u64 {
        self.waiting.retain(|_, r| !r.is_closed());
        while self.waiting.len() >= RESTORES_WAITING_MAX {
            self.waiting.pop_first();
        }
        self.next += 1;
        let token = (my_id << 48) | (self.next & ((1 << 48) - 1));
        self.waiting.insert(token, reply);
        token
    }

    /// A restore was applied or refused: its asker, if it was asked here.
    fn done(&mut self, token: u64, result: Result<Zxid, String>) {
        if let Some(reply) = self.waiting.remove(&token) {
            let _ = reply.send(result);
        }
    }
}

impl Driver {
    /// A driver for `member`, writing its log through `log`; no quorum
    /// links and no ZooKeeper leader (an ensemble member or an observer of
    /// ZooKeeper sets `links` or `zk`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        member: CoreMember,
        cfg: Config,
        clock: Clock,
        log: GroupCommitLog,
        durable_tx: mpsc::UnboundedSender<Event>,
        group_commit: GroupCommitOptions,
        audit: Option<crate::audit::AuditLog>,
        recipe_pool: Option<crate::recipe_pool::RecipePool>,
    ) -> Driver {
        Driver {
            member,
            log: Some(log),
            links: None,
            zk: None,
            cfg,
            clock,
            durable_tx,
            group_commit,
            feed: LogFeed::default(),
            conns: HashMap::new(),
            gathered: Vec::new(),
            publisher: None,
            snapshot_busy: Arc::default(),
            recipe_pool,
            audit,
            restores: Restores::default(),
        }
    }

    /// Runs until shutdown or a failure, then closes every connection and
    /// stops the log writer (after handing it what it holds, unless the
    /// log failed).
    pub(crate) async fn run(
        mut self,
        mut rx: mpsc::Receiver<Event>,
        mut durable_rx: mpsc::UnboundedReceiver<Event>,
        ctx: Arc<AdminContext>,
    ) -> Result<()> {
        self.publisher = ctx
            .local_reads
            .clone()
            .map(|shared| crate::net::local_reads::Publisher::start(shared, self.member.server()));
        let result = self.run_inner(&mut rx, &mut durable_rx, &ctx).await;
        if let Err(e) = &result {
            tracing::error!("stopping: {e:#}");
        }
        if let Some(audit) = &mut self.audit {
            // As ZooKeeper's shutdown hook: logged before the member has
            // stopped, hence "invoked".
            let stop = crate::core::audit::AuditOp::ServerStop;
            let invoked = crate::core::audit::AuditResult::Invoked;
            if let Err(e) = audit.server(stop, invoked, self.clock.now().wall_ms) {
                tracing::error!("{e:#}");
            }
        }
        for tx in self.conns.values_mut() {
            let _ = tx.close();
        }
        if let Some(log) = self.log.take() {
            if result.is_ok() {
                if let Err(e) = self.feed.flush(&log) {
                    tracing::warn!("closing the transaction log: {e}");
                }
            }
            if let Err(e) = log.shutdown() {
                tracing::warn!("closing the transaction log: {e}");
            }
        }
        result
    }

    async fn run_inner(
        &mut self,
        rx: &mut mpsc::Receiver<Event>,
        durable_rx: &mut mpsc::UnboundedReceiver<Event>,
        ctx: &AdminContext,
    ) -> Result<()> {
        while let Some(ev) = next_event(rx, durable_rx, &self.feed).await {
            let batch_clock = self.clock.clone();
            let mut clock = BatchClock::new(&batch_clock);
            let mut next = Some(ev);
            let mut handled = 0;
            while let Some(ev) = next.take() {
                let now = clock.now();
                match ev {
                    Event::Register { conn, tx } => {
                        self.conns.insert(conn, tx);
                    }
                    Event::Input(input) => self.client_input(input, now),
                    Event::Inputs(inputs) => {
                        for input in inputs {
                            self.client_input(input, now);
                        }
                    }
                    Event::Durable(zxid) => self.member.handle(MemberInput::Durable { zxid }, now),
                    Event::Link(LinkEvent::Zab { from, msg }) => {
                        self.member.handle(MemberInput::Zab { from, msg }, now)
                    }
                    Event::Zk(z) => self.member.handle(MemberInput::Zk(z), now),
                    Event::Link(LinkEvent::Down { peer }) => {
                        self.member.handle(MemberInput::LinkDown { peer }, now)
                    }
                    Event::Link(LinkEvent::App { from, payload }) => {
                        self.member.handle(MemberInput::App { from, payload }, now)
                    }
                    Event::Admin {
                        word,
                        allowed,
                        peer,
                        reply,
                    } => {
                        // ZooKeeper counts a four-letter word as a packet
                        // received (NIOServerCnxn.checkFourLetterWord),
                        // before it runs and whether or not it may.
                        self.member.server_mut().count_four_letter_word();
                        let text = if allowed {
                            crate::admin::resets_stats(&word, self.member.server_mut());
                            let leader = self.member.peer().and_then(|p| p.leader_report());
                            crate::admin::four_letter(
                                &word,
                                self.member.server(),
                                ctx,
                                crate::admin::Asker {
                                    peer,
                                    others: self.conns.len(),
                                },
                                leader,
                            )
                        } else {
                            format!("{word} is not executed because it is not in the whitelist.\n")
                        };
                        self.member
                            .server_mut()
                            .count_four_letter_answer(text.len());
                        let _ = reply.send(text);
                    }
                    Event::AdminCommand {
                        name,
                        kwargs,
                        authorization,
                        ip,
                        cert,
                        reply,
                    } => {
                        let serving = {
                            let s = self.member.server();
                            s.in_read_only_mode() || s.role().serves_clients()
                        };
                        if let (Some(primary), true) =
                            (crate::admin::commands::primary_name(&name), serving)
                        {
                            crate::admin::resets_stats(primary, self.member.server_mut());
                        }
                        let answer = crate::admin::commands::run(
                            &name,
                            &kwargs,
                            &crate::admin::commands::Asker {
                                authorization: authorization.as_deref(),
                                ip,
                                cert: cert.as_deref(),
                            },
                            self.member.server(),
                            &crate::admin::commands::Context {
                                admin: ctx,
                                peer: self.member.peer(),
                                conns: self.conns.len(),
                            },
                        );
                        let _ = reply.send(answer);
                    }
                    Event::Backup { reply } => {
                        let _ = reply.send(self.member.server().snapshot_job());
                    }
                    Event::Restore { mut txn, reply } => {
                        txn.token = self.restores.add(self.cfg.my_id.unwrap_or(0), reply);
                        let input = crate::core::server::Input::Restore(txn);
                        self.member.handle(MemberInput::Client(input), now);
                    }
                    Event::LogFailed(e) => bail!("transaction log failed: {e}"),
                    Event::Shutdown => return Ok(()),
                }
                handled += 1;
                if handled < BATCH_EVENTS_MAX {
                    next = try_next_event(rx, durable_rx, &self.feed);
                }
            }
            // A member whose state can no longer be trusted sends, stores
            // and answers nothing more.
            if let Some(why) = self.member.fatal() {
                bail!("{why}");
            }
            // Held records first: they come before anything proposed now.
            if let Some(log) = &self.log {
                self.feed.pump(log)?;
            }
            let mut carried = Ok(());
            for out in self.member.take_outputs() {
                carried = self.carry_out(out);
                if carried.is_err() {
                    break;
                }
            }
            // The batch's audit records are written before its replies go:
            // a client is never answered for a write whose record was not
            // written (the member stops instead, sending none of them).
            if let (Ok(()), Some(audit)) = (&carried, &mut self.audit) {
                carried = audit.flush();
            }
            if !self.audit.as_ref().is_some_and(|a| a.failed()) {
                // With reads on the I/O threads: the hand-overs are stamped
                // with the tree they were made from, which is published
                // after them (net/local_reads.rs, rule 2).
                let server = self.member.server();
                let seq = self.publisher.as_ref().map_or(0, |p| p.seq_of_now(server));
                self.flush_gathered(seq);
                if let Some(p) = &mut self.publisher {
                    p.publish(self.member.server());
                }
            }
            carried?;
            ctx.metrics
                .update(self.member.server_mut(), self.conns.len(), &ctx.log_stats);
            if let Some(peer) = self.member.peer() {
                ctx.metrics.set_consensus(peer);
            }
            // Recipe calls of this batch left their upkeep for now (the
            // member's thread defers it: crate::plugin::defer_call_upkeep):
            // let the connections' writers send the batch's replies first,
            // then drop the calls' stores and make the next instance.
            if crate::plugin::call_upkeep_waiting() {
                tokio::task::yield_now().await;
                crate::plugin::call_upkeep();
            }
        }
        Ok(())
    }

    /// Hands every connection's gathered replies to its writer, made from
    /// the published tree `seq`.
    fn flush_gathered(&mut self, seq: u64) {
        for conn in self.gathered.drain(..) {
            if let Some(tx) = self.conns.get_mut(&conn) {
                let _ = tx.flush(seq);
            }
        }
    }

    fn client_input(&mut self, input: Input, now: Now) {
        if let Input::Closed { conn } = &input {
            self.conns.remove(conn);
        }
        let input = match input {
            Input::Tick => {
                if let Some(path) = &self.cfg.oracle_path {
                    self.member.on_oracle(crate::config::ask_oracle(path), now);
                }
                MemberInput::Tick
            }
            input => MemberInput::Client(input),
        };
        self.member.handle(input, now);
    }

    /// Stops the log writer (after handing it every held record, which
    /// come before what `f` does), runs `f` on the log, and starts it again.
    fn with_log(&mut self, f: impl FnOnce(&mut TxnLog) -> wazoo_storage::Result<()>) -> Result<()> {
        let group = self.log.take().expect("the log is running");
        self.feed.flush(&group)?;
        let mut log = group.shutdown()?;
        f(&mut log)?;
        self.log = Some(GroupCommitLog::start(
            log,
            self.group_commit.clone(),
            durable_callback(self.durable_tx.clone()),
        )?);
        Ok(())
    }

    fn link(&self, to: u64, cmd: LinkCmd) {
        match &self.links {
            Some(links) => links.send(to, cmd),
            None => tracing::error!("a standalone member has no quorum links"),
        }
    }

    /// Carries out one output; storage outputs are durable when this
    /// returns.
    ///
    /// Replies are gathered per connection and go to the writers after the
    /// batch's last output ([`Driver::flush_gathered`]): later than their
    /// place in the order, never earlier, so whatever the machine put
    /// before a reply (a persist, a disk write) still comes first. A close
    /// hands the connection's gathered replies over first.
    fn carry_out(&mut self, out: Output) -> Result<()> {
        match out {
            Output::Send {
                conn,
                bytes,
                replies,
            } => {
                if let Some(tx) = self.conns.get_mut(&conn) {
                    if tx.gather(bytes, replies) {
                        self.gathered.push(conn);
                    }
                }
            }
            Output::Close { conn } => {
                // The replies it hands over come after the audit records
                // made before them.
                if let Some(audit) = &mut self.audit {
                    audit.flush()?;
                }
                if let Some(tx) = self.conns.get_mut(&conn) {
                    let _ = tx.close();
                }
            }
            Output::LocalReads { conn, auth } => {
                if self.publisher.is_some() {
                    if let Some(tx) = self.conns.get_mut(&conn) {
                        if tx.allow_local_reads(auth) {
                            self.gathered.push(conn);
                        }
                    }
                }
            }
            Output::Persist { zxid, record } => {
                let log = self.log.as_ref().expect("the log is running");
                self.feed
                    .append(log, zxid, record)
                    .context("cannot append to the transaction log")?
            }
            Output::Truncate { after } => self.with_log(|log| log.truncate_after(after))?,
            Output::StoreAcceptedEpoch { epoch } => {
                let sdir = snap_dir(&self.cfg);
                write_epoch(&sdir, "acceptedEpoch", epoch)
                    .with_context(|| format!("cannot store acceptedEpoch in {}", sdir.display()))?
            }
            Output::StoreCurrentEpoch { epoch } => {
                let sdir = snap_dir(&self.cfg);
                write_epoch(&sdir, "currentEpoch", epoch)
                    .with_context(|| format!("cannot store currentEpoch in {}", sdir.display()))?
            }
            Output::InstallSnapshot { zxid, data } => {
                let sdir = snap_dir(&self.cfg);
                wazoo_storage::write_snapshot(&sdir, zxid, |w| {
                    std::io::Write::write_all(w, &data)
                })?;
                // The installed state replaces everything stored before
                // it: a snapshot named by a later zxid (an observer of
                // ZooKeeper dropping its state to be synced afresh) would
                // otherwise be the one a restart loads.
                for (z, path) in wazoo_storage::list_snapshots(&sdir)? {
                    if z > zxid {
                        std::fs::remove_file(&path)
                            .with_context(|| format!("cannot remove {}", path.display()))?;
                    }
                }
                self.with_log(|log| log.truncate_after(Zxid::ZERO))?;
            }
            Output::WriteSnapshot(job) => {
                start_snapshot(&self.cfg, *job, Arc::clone(&self.snapshot_busy))
            }
            Output::SendPeer { to, msg } => self.link(to, LinkCmd::Zab(msg)),
            Output::CloseLink { peer } => self.link(peer, LinkCmd::Close),
            Output::SendApp { to, msg } => self.link(to, LinkCmd::App(msg.encode())),
            Output::SendZk(p) => {
                if let Some(zk) = &self.zk {
                    zk.send(crate::zk_observer::ZkCmd::Send(p.to_bytes()));
                }
            }
            Output::ZkMembership(text) => {
                if let Some(zk) = &self.zk {
                    zk.send(crate::zk_observer::ZkCmd::Membership(text));
                }
            }
            Output::CloseZk => {
                if let Some(zk) = &self.zk {
                    zk.send(crate::zk_observer::ZkCmd::Close);
                }
            }
            Output::Reconfigured(c) => {
                let sdir = snap_dir(&self.cfg);
                crate::ensemble_member::store_membership(&sdir, &c).with_context(|| {
                    format!("cannot store the new membership in {}", sdir.display())
                })?;
                if let Some(links) = &mut self.links {
                    links.follow(&c);
                }
            }
            Output::Audit(record) => match &mut self.audit {
                Some(audit) => audit.record(&record, self.clock.now().wall_ms)?,
                None => tracing::error!("an audit record was made, but no audit log is open"),
            },
            Output::Restored { token, zxid, error } => {
                self.restores.done(token, error.map_or(Ok(zxid), Err))
            }
            Output::RecipeStep(job) => match &self.recipe_pool {
                Some(pool) => pool.run(*job),
                None => bail!("a recipe step was offloaded, but no recipe worker runs"),
            },
        }
        Ok(())
    }
}

/// Writes a snapshot on a background thread; skipped if one is running.
fn start_snapshot(cfg: &Config, job: SnapshotJob, busy: Arc<AtomicBool>) {
    if busy.swap(true, Ordering::AcqRel) {
        tracing::warn!("a snapshot is still being written; skipping this one");
        return;
    }
    let dir = snap_dir(cfg);
    let spawned = std::thread::Builder::new()
        .name("wazoo-snapshot".into())
        .spawn(move || {
            let started = std::time::Instant::now();
            let r =
                wazoo_storage::write_snapshot(&dir, job.zxid, |w| write_snapshot_payload(&job, w));
            match r {
                Ok(p) => tracing::info!(
                    path = %p.display(),
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "snapshot written"
                ),
                Err(e) => tracing::error!("snapshot at {} failed: {e}", job.zxid),
            }
            busy.store(false, Ordering::Release);
        });
    if let Err(e) = spawned {
        tracing::error!("cannot start the snapshot thread: {e}");
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use wazoo_storage::LogOptions;

    /// A slow disk: the member thread hands records over without ever
    /// waiting for the writer, and the writer commits them all while the
    /// member reads none of its reports (it never waits for the member).
    #[test]
    fn a_slow_log_writer_neither_blocks_the_member_nor_waits_for_it() {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = TxnLog::open(dir.path(), LogOptions::default()).unwrap();
        let (tx, mut reports) = mpsc::unbounded_channel();
        let opts = GroupCommitOptions {
            queue_capacity: 2,
            sync_delay: Some(Duration::from_millis(100)),
            ..GroupCommitOptions::default()
        };
        let group = GroupCommitLog::start(log, opts, durable_callback(tx)).unwrap();
        let mut feed = LogFeed::default();
        for zxid in 1..=40u64 {
            feed.append(&group, Zxid(zxid), vec![7; 16]).unwrap();
        }
        assert!(
            !feed.backlog.is_empty(),
            "a queue of 2 behind a 100 ms fsync cannot have taken 40 records"
        );
        // The member keeps pumping as a core loop does after every batch,
        // but does not read a single report until the end.
        let deadline = Instant::now() + Duration::from_secs(60);
        while group.durable_zxid() < Zxid(40) {
            assert!(
                Instant::now() < deadline,
                "the writer stopped making progress"
            );
            feed.pump(&group).unwrap();
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(feed.backlog.is_empty());
        let mut last = Zxid::ZERO;
        while let Ok(ev) = reports.try_recv() {
            match ev {
                Event::Durable(zxid) => last = zxid,
                _ => panic!("unexpected report"),
            }
        }
        assert_eq!(last, Zxid(40), "the last report covers every record");
        group.shutdown().unwrap();
    }
}
