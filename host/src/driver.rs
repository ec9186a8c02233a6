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
//! messages to quorum links, snapshots to a writer thread. The state an
//! observer of ZooKeeper installs by a sync goes to that writer thread
//! too, and the records logged after it wait until it is durable
//! ([`LogFeed::hold_after`]).

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
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
///
/// Records after a state a sync installed wait here too, held back from
/// the writer, until that state's snapshot is durable
/// ([`LogFeed::hold_after`], [`LogFeed::release`]).
#[derive(Default)]
pub(crate) struct LogFeed {
    backlog: VecDeque<(Zxid, Vec<u8>)>,
    held: Option<Held>,
}

/// Records logged after an installed state whose snapshot is still being
/// written: on disk, a txn after its zxid without that snapshot under it
/// would follow a state that is not there (a restart would replay it onto
/// the older snapshot and log).
struct Held {
    /// Which installed state (the snapshot writer's count).
    seq: u64,
    after: Zxid,
    records: VecDeque<(Zxid, Vec<u8>)>,
}

impl LogFeed {
    /// Hands a record to the writer, or keeps it while the writer is behind
    /// or the snapshot it follows is not durable yet.
    pub(crate) fn append(&mut self, log: &GroupCommitLog, zxid: Zxid, body: Vec<u8>) -> Result<()> {
        if let Some(held) = &mut self.held {
            debug_assert!(
                zxid > held.after,
                "{zxid} logged after the state at {}",
                held.after
            );
            held.records.push_back((zxid, body));
            return Ok(());
        }
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

    /// Hands every record waiting for room to the writer, waiting for
    /// room (before the writer is stopped; it never waits for this thread,
    /// so this ends). Records held behind an installed state's snapshot
    /// stay held: at shutdown they are dropped, as a crash drops them.
    pub(crate) fn flush(&mut self, log: &GroupCommitLog) -> Result<()> {
        while let Some((zxid, body)) = self.backlog.pop_front() {
            log.append(zxid, body)?;
        }
        Ok(())
    }

    /// From now on, holds every record back from the writer until
    /// [`LogFeed::release`] of `seq`: they follow the state at `after`,
    /// installed by a sync, whose snapshot is being written. Records held
    /// after an earlier installed state are dropped: this one replaces it.
    pub(crate) fn hold_after(&mut self, seq: u64, after: Zxid) {
        if let Some(old) = self.held.take() {
            tracing::info!(
                dropped = old.records.len(),
                "the state installed at {} is replaced by the one at {after} before its snapshot was durable",
                old.after
            );
        }
        self.held = Some(Held {
            seq,
            after,
            records: VecDeque::new(),
        });
    }

    /// Drops the records not yet given to the writer that come after
    /// `after` (a truncation of the log: they must not reach it later).
    /// Held ones count too: a record held behind an installed state and
    /// released after the log was cut back would come back on disk, and a
    /// restart would replay it.
    pub(crate) fn truncate_after(&mut self, after: Zxid) {
        self.backlog.retain(|(z, _)| *z <= after);
        if let Some(held) = &mut self.held {
            held.records.retain(|(z, _)| *z <= after);
        }
    }

    /// Whether records are held behind the `seq`-th installed state.
    pub(crate) fn holds_for(&self, seq: u64) -> bool {
        self.held.as_ref().is_some_and(|h| h.seq == seq)
    }

    /// The `seq`-th installed state's snapshot is durable: its held records
    /// go to the writer ([`LogFeed::pump`]), after those waiting for room.
    /// False (nothing released) if a later installed state replaced it.
    pub(crate) fn release(&mut self, seq: u64) -> bool {
        if !self.holds_for(seq) {
            return false;
        }
        let held = self.held.take().expect("checked");
        self.backlog.extend(held.records);
        true
    }

    /// Whether the core loop should stop taking client work until the
    /// writer catches up (or the held records' snapshot is durable).
    pub(crate) fn over_limit(&self) -> bool {
        let held = self.held.as_ref().map_or(0, |h| h.records.len());
        self.backlog.len() + held >= LOG_BACKLOG_MAX
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

/// Writes an epoch file durably (see [`write_durably`]).
pub(crate) fn write_epoch(dir: &Path, name: &str, epoch: u32) -> std::io::Result<()> {
    write_durably(dir, name, epoch.to_string().as_bytes())
}

/// Writes `dir/name` whole or not at all: a temp file `name.tmp`, fsync,
/// rename, fsync of the directory.
pub(crate) fn write_durably(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = dir.join(format!("{name}.tmp"));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
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
    /// Writes snapshots on a thread of its own, one at a time.
    pub snapshots: SnapshotWriter,
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
        let snapshots = SnapshotWriter::new(snap_dir(&cfg), durable_tx.clone());
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
            snapshots,
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
                    Event::SnapshotInstalled { seq, result } => self.installed(seq, result)?,
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
                let seq = self.publisher.as_ref().map(|p| p.seq_of_now(server));
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
    /// the published tree `seq` (with reads on the I/O threads).
    fn flush_gathered(&mut self, seq: Option<u64>) {
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
        let mut log = self.stop_log()?;
        f(&mut log)?;
        self.start_log(log)
    }

    /// Stops the log writer, after handing it every record waiting for
    /// room (held ones stay held), and returns the log.
    fn stop_log(&mut self) -> Result<TxnLog> {
        let group = self.log.take().expect("the log is running");
        self.feed.flush(&group)?;
        Ok(group.shutdown()?)
    }

    /// Starts the log writer on `log`, reporting durability to the core.
    fn start_log(&mut self, log: TxnLog) -> Result<()> {
        self.log = Some(GroupCommitLog::start(
            log,
            self.group_commit.clone(),
            durable_callback(self.durable_tx.clone()),
        )?);
        Ok(())
    }

    /// A participant of a ZooKeeper ensemble reloads its state as of
    /// `upto` (`Output::ZkReload`): the log is cut back (records not yet
    /// written too), snapshots past `upto` are removed, and the state the
    /// newest snapshot and the log give, as at a start, is reported to the
    /// member ahead of other events.
    fn reload(&mut self, upto: Zxid) -> Result<()> {
        self.feed.truncate_after(upto);
        let mut log = self.stop_log()?;
        log.truncate_after(upto)?;
        // Closed: the recovery below opens it again, as a start does.
        drop(log);
        remove_later_snapshots(&snap_dir(&self.cfg), upto)?;
        let (tree, sessions, zxid, log) = match crate::member::recover(&self.cfg, self.clock.now())
        {
            Ok((server, log)) => {
                let (tree, sessions, zxid) = server.into_state();
                (tree, sessions, zxid, log)
            }
            Err(e) => {
                // The member syncs from nothing instead (the core
                // sees a state that is not at `upto`).
                tracing::warn!("cannot reload the state as of {upto} from disk: {e:#}");
                let (log, _) = crate::member::open_log(&self.cfg)?;
                (
                    crate::core::tree::DataTree::new(),
                    Vec::new(),
                    Zxid::ZERO,
                    log,
                )
            }
        };
        self.start_log(log)?;
        let reloaded = Event::Zk(crate::core::member::ZkInput::Reloaded {
            tree: Box::new(tree),
            sessions,
            zxid,
        });
        // The writer's reports go first: this one comes before anything
        // else the member handles next.
        let _ = self.durable_tx.send(reloaded);
        Ok(())
    }

    /// The `seq`-th installed state's snapshot is durable (and every later
    /// one is gone): the log, which holds nothing after its zxid, is
    /// emptied, and the records held behind it go to the writer. If a
    /// later installed state replaced it meanwhile, its own report does
    /// this. A snapshot that cannot be written stops the member, as a log
    /// that cannot be.
    fn installed(&mut self, seq: u64, result: std::result::Result<Zxid, String>) -> Result<()> {
        let zxid = result.map_err(|e| anyhow!("cannot store the state the sync installed: {e}"))?;
        if !self.feed.holds_for(seq) {
            tracing::debug!(
                "the snapshot at {zxid} is durable; a later installed state replaced it"
            );
            return Ok(());
        }
        self.with_log(|log| log.truncate_after(Zxid::ZERO))?;
        self.feed.release(seq);
        if self.zk.is_some() {
            // A participant of a ZooKeeper ensemble acknowledges NEWLEADER
            // only once the state it installed is stored.
            let now = self.clock.now();
            self.member.handle(
                MemberInput::Zk(crate::core::member::ZkInput::Stored { zxid }),
                now,
            );
        }
        tracing::info!(
            "the snapshot of the state installed at {zxid} is durable; logging what followed it"
        );
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
            Output::Truncate { after } => {
                self.feed.truncate_after(after);
                self.with_log(|log| log.truncate_after(after))?
            }
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
                remove_later_snapshots(&sdir, zxid)?;
                self.with_log(|log| log.truncate_after(Zxid::ZERO))?;
            }
            Output::StoreInstalled(job) => {
                // The txns logged after the installed state's zxid are of
                // the state it replaces; dropped before its snapshot can
                // be durable, so that a restart never replays them onto
                // it. Until then the older snapshots and the log up to
                // the zxid stay: a crash restarts from them.
                let zxid = job.zxid;
                self.with_log(|log| log.truncate_after(zxid))?;
                let seq = self.snapshots.install(*job)?;
                self.feed.hold_after(seq, zxid);
            }
            Output::WriteSnapshot(job) => self.snapshots.write(*job),
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
            Output::ZkReload { upto } => self.reload(upto)?,
            Output::SendVote { to, n } => {
                if let Some(zk) = &self.zk {
                    zk.send(crate::zk_observer::ZkCmd::Vote { to, n });
                }
            }
            Output::ZkFollow { leader } => {
                if let Some(zk) = &self.zk {
                    zk.send(crate::zk_observer::ZkCmd::Follow { leader });
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

/// Removes every snapshot in `dir` named by a zxid after `zxid`: a state
/// installed at `zxid` replaces everything stored before it, and a later
/// snapshot (an observer of ZooKeeper dropping its state to be synced
/// afresh, or one of the replaced state written meanwhile) would otherwise
/// be the one a restart loads.
fn remove_later_snapshots(dir: &Path, zxid: Zxid) -> Result<()> {
    for (z, path) in wazoo_storage::list_snapshots(dir)? {
        if z > zxid {
            std::fs::remove_file(&path)
                .with_context(|| format!("cannot remove {}", path.display()))?;
        }
    }
    Ok(())
}

/// What the snapshot writer thread is given.
enum SnapshotWrite {
    /// The pipeline's own snapshot (every snapCount txns).
    Pipeline(SnapshotJob),
    /// The state a sync installed, the `seq`-th: reported when durable.
    Installed { seq: u64, job: SnapshotJob },
}

/// The member's snapshot writer: one thread, started with the first
/// snapshot, writes them one at a time in the order they are given. The
/// pipeline's own are skipped while another is queued or being written;
/// an installed state's never is, and its report comes to the core loop
/// as `Event::SnapshotInstalled` (on the log writer's report channel).
pub(crate) struct SnapshotWriter {
    dir: PathBuf,
    reports: mpsc::UnboundedSender<Event>,
    jobs: Option<std::sync::mpsc::Sender<SnapshotWrite>>,
    /// Writes queued or running.
    pending: Arc<AtomicUsize>,
    /// Installed states handed over so far.
    installs: u64,
}

impl SnapshotWriter {
    pub(crate) fn new(dir: PathBuf, reports: mpsc::UnboundedSender<Event>) -> SnapshotWriter {
        SnapshotWriter {
            dir,
            reports,
            jobs: None,
            pending: Arc::default(),
            installs: 0,
        }
    }

    /// Writes the pipeline's snapshot in the background; skipped if a
    /// snapshot is queued or being written.
    pub(crate) fn write(&mut self, job: SnapshotJob) {
        if self.pending.load(Ordering::Acquire) > 0 {
            tracing::warn!("a snapshot is still being written; skipping this one");
            return;
        }
        if let Err(e) = self.send(SnapshotWrite::Pipeline(job)) {
            tracing::error!("{e:#}");
        }
    }

    /// Writes an installed state's snapshot after whatever is being
    /// written, then removes every snapshot named by a later zxid, and
    /// reports it; returns its number for the report.
    pub(crate) fn install(&mut self, job: SnapshotJob) -> Result<u64> {
        self.installs += 1;
        let seq = self.installs;
        self.send(SnapshotWrite::Installed { seq, job })?;
        Ok(seq)
    }

    fn send(&mut self, write: SnapshotWrite) -> Result<()> {
        if self.jobs.is_none() {
            let (tx, rx) = std::sync::mpsc::channel();
            let (dir, pending) = (self.dir.clone(), Arc::clone(&self.pending));
            let reports = self.reports.clone();
            std::thread::Builder::new()
                .name("wazoo-snapshot".into())
                .spawn(move || write_snapshots(&dir, rx, &pending, &reports))
                .context("cannot start the snapshot thread")?;
            self.jobs = Some(tx);
        }
        self.pending.fetch_add(1, Ordering::AcqRel);
        let sent = self.jobs.as_ref().expect("started").send(write);
        if sent.is_err() {
            self.pending.fetch_sub(1, Ordering::AcqRel);
            self.jobs = None;
            bail!("the snapshot thread is gone");
        }
        Ok(())
    }
}

/// The snapshot writer thread: until the member drops its side.
fn write_snapshots(
    dir: &Path,
    jobs: std::sync::mpsc::Receiver<SnapshotWrite>,
    pending: &AtomicUsize,
    reports: &mpsc::UnboundedSender<Event>,
) {
    for write in jobs {
        let started = std::time::Instant::now();
        match write {
            SnapshotWrite::Pipeline(job) => {
                let r = wazoo_storage::write_snapshot(dir, job.zxid, |w| {
                    write_snapshot_payload(&job, w)
                });
                match r {
                    Ok(p) => tracing::info!(
                        path = %p.display(),
                        elapsed_ms = started.elapsed().as_millis() as u64,
                        "snapshot written"
                    ),
                    Err(e) => tracing::error!("snapshot at {} failed: {e}", job.zxid),
                }
            }
            SnapshotWrite::Installed { seq, job } => {
                let zxid = job.zxid;
                let r =
                    wazoo_storage::write_snapshot(dir, zxid, |w| write_snapshot_payload(&job, w))
                        .map_err(anyhow::Error::from)
                        .and_then(|p| {
                            remove_later_snapshots(dir, zxid)?;
                            Ok(p)
                        });
                let result = match r {
                    Ok(p) => {
                        tracing::info!(
                            path = %p.display(),
                            elapsed_ms = started.elapsed().as_millis() as u64,
                            "snapshot of the installed state written"
                        );
                        Ok(zxid)
                    }
                    Err(e) => Err(format!("{e:#}")),
                };
                // The core may be gone at shutdown; nothing to do then.
                let _ = reports.send(Event::SnapshotInstalled { seq, result });
            }
        }
        pending.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::core::server::Server;
    use wazoo_storage::LogOptions;

    fn z(epoch: u64, counter: u64) -> Zxid {
        Zxid((epoch << 32) | counter)
    }

    /// A log writer on a fresh directory, reporting on `tx`.
    fn group_log(dir: &Path, tx: mpsc::UnboundedSender<Event>) -> GroupCommitLog {
        let (log, _) = TxnLog::open(dir, LogOptions::default()).unwrap();
        GroupCommitLog::start(log, GroupCommitOptions::default(), durable_callback(tx)).unwrap()
    }

    /// The zxids `log` holds, in order.
    fn logged_zxids(mut log: TxnLog) -> Vec<Zxid> {
        log.read_from(Zxid::ZERO)
            .unwrap()
            .map(|r| r.unwrap().zxid)
            .collect()
    }

    fn wait_durable(log: &GroupCommitLog, zxid: Zxid) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while log.durable_zxid() < zxid {
            assert!(Instant::now() < deadline, "{zxid} never became durable");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    // ZooKeeper Internals, "Atomic Broadcast": a learner's log after a
    // snapshot continues that snapshot. Records after an installed state
    // are held back from the writer until its snapshot is durable, in
    // order; a later installed state drops the records of the one it
    // replaces, whose own release then does nothing; a shutdown (or a
    // crash) leaves held records unwritten; and they count towards the
    // backlog that stops the member taking client work.
    #[test]
    fn records_after_an_installed_state_wait_for_its_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let (tx, _reports) = mpsc::unbounded_channel();
        let group = group_log(dir.path(), tx);
        let mut feed = LogFeed::default();
        feed.append(&group, z(1, 1), vec![1]).unwrap();
        feed.hold_after(1, z(1, 5));
        feed.append(&group, z(1, 6), vec![6]).unwrap();
        feed.hold_after(2, z(2, 9));
        for c in 10..=12 {
            feed.append(&group, z(2, c), vec![c as u8]).unwrap();
        }
        feed.flush(&group).unwrap();
        wait_durable(&group, z(1, 1));
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(group.durable_zxid(), z(1, 1), "held records reach no disk");
        assert!(!feed.release(1), "the replaced state releases nothing");
        assert!(feed.holds_for(2));
        assert!(feed.release(2));
        assert!(!feed.holds_for(2) && !feed.release(2));
        feed.pump(&group).unwrap();
        wait_durable(&group, z(2, 12));
        let logged = logged_zxids(group.shutdown().unwrap());
        assert_eq!(logged, vec![z(1, 1), z(2, 10), z(2, 11), z(2, 12)]);

        let mut feed = LogFeed::default();
        feed.hold_after(1, Zxid::ZERO);
        let (log, _) =
            TxnLog::open(tempfile::tempdir().unwrap().path(), LogOptions::default()).unwrap();
        let (tx, _reports) = mpsc::unbounded_channel();
        let group = GroupCommitLog::start(log, GroupCommitOptions::default(), durable_callback(tx))
            .unwrap();
        for c in 1..=LOG_BACKLOG_MAX as u64 {
            assert!(!feed.over_limit());
            feed.append(&group, z(1, c), Vec::new()).unwrap();
        }
        assert!(feed.over_limit(), "held records count towards the backlog");
        group.shutdown().unwrap();
    }

    // ZooKeeper Internals, "Atomic Broadcast" (a leader's TRUNC cuts a
    // learner's log back): a truncation drops the records held behind an
    // installed state's snapshot as well, so that its release does not
    // put a truncated proposal back on disk for a restart to replay.
    #[test]
    fn a_truncation_drops_the_held_records_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let (tx, _reports) = mpsc::unbounded_channel();
        let group = group_log(dir.path(), tx);
        let mut feed = LogFeed::default();
        feed.hold_after(1, z(1, 5));
        for c in 6..=9 {
            feed.append(&group, z(1, c), vec![c as u8]).unwrap();
        }
        feed.truncate_after(z(1, 7));
        feed.append(&group, z(2, 1), vec![21]).unwrap();
        assert!(feed.release(1));
        feed.pump(&group).unwrap();
        wait_durable(&group, z(2, 1));
        let logged = logged_zxids(group.shutdown().unwrap());
        assert_eq!(logged, vec![z(1, 6), z(1, 7), z(2, 1)]);
    }

    // ZooKeeper Internals, "Atomic Broadcast", as ZooKeeper's learner
    // takes a TRUNC below what it applied: the shell cuts the log back
    // to the TRUNC's zxid, recovers the state as of it from disk, and
    // reports it to the member ahead of other events.
    #[test]
    fn a_reload_cuts_the_log_back_and_reports_the_state_as_of_the_truncation() {
        use crate::core::txn::{CreateTxn, NodeKind, Txn, TxnHeader, TxnRecord};
        let dir = tempfile::tempdir().unwrap();
        let cfg = Config::parse(&format!("dataDir={}\n", dir.path().display())).unwrap();
        let (_, ldir) = crate::member::make_data_dirs(&cfg).unwrap();
        let (tx, mut reports) = mpsc::unbounded_channel();
        let group = group_log(&ldir, tx.clone());
        for c in 1..=5u64 {
            let record = TxnRecord {
                header: TxnHeader {
                    session_id: 0,
                    cxid: 0,
                    zxid: z(1, c).to_wire(),
                    time_ms: 0,
                },
                txn: Txn::Create(CreateTxn {
                    path: format!("/n{c}"),
                    data: None,
                    acl: wazoo_proto::Acl::open_unsafe(),
                    ephemeral_owner: 0,
                    parent_cversion: c as i32,
                    kind: NodeKind::Regular,
                }),
            };
            group.append(z(1, c), record.encode()).unwrap();
        }
        wait_durable(&group, z(1, 5));
        let now = Now::default();
        let member = CoreMember::standalone(Server::new(Default::default(), now));
        let mut d = Driver::new(
            member,
            cfg,
            Clock::system(),
            group,
            tx,
            GroupCommitOptions::default(),
            None,
            None,
        );
        d.carry_out(Output::ZkReload { upto: z(1, 3) }).unwrap();
        let (tree, zxid) = loop {
            match reports.blocking_recv().expect("the reload reports") {
                Event::Zk(crate::core::member::ZkInput::Reloaded { tree, zxid, .. }) => {
                    break (tree, zxid)
                }
                Event::Durable(_) => {}
                _ => panic!("an unexpected report"),
            }
        };
        assert_eq!(zxid, z(1, 3));
        assert!(
            tree.exists("/n3") && !tree.exists("/n4"),
            "the state as of 1:3"
        );
        let logged = logged_zxids(d.log.take().unwrap().shutdown().unwrap());
        assert_eq!(
            logged,
            vec![z(1, 1), z(1, 2), z(1, 3)],
            "the log is cut back"
        );
    }

    /// How far an observer of ZooKeeper got with a state a sync installed
    /// when it crashed.
    #[derive(Clone, Copy, Debug)]
    enum CrashAt {
        /// Its snapshot not yet durable (the writer thread writes it
        /// elsewhere, so the data directory never gets it).
        BeforeDurable,
        /// Its snapshot durable, the writer's report not yet taken.
        DurableNotReported,
        /// The report taken and the held records logged.
        Reported,
    }

    /// An observer whose data directory holds a snapshot at `old_snap` and
    /// a log of txns 1 to 8 of epoch 1, installs the state at `installed`
    /// (by SNAP, or 0 to start afresh), logs `after` behind it, and
    /// crashes at `at`. Returns the snapshot a restart loads and the txns
    /// it replays after it.
    fn crash_after_install(
        old_snap: Zxid,
        installed: Zxid,
        after: &[Zxid],
        at: CrashAt,
    ) -> (Zxid, Vec<Zxid>) {
        let dir = tempfile::tempdir().unwrap();
        let cfg = Config::parse(&format!(
            "dataDir={}
",
            dir.path().display()
        ))
        .unwrap();
        let (sdir, ldir) = crate::member::make_data_dirs(&cfg).unwrap();
        let now = Now::default();
        let job = |zxid| SnapshotJob {
            zxid,
            ..Server::new(Default::default(), now).snapshot_job()
        };
        wazoo_storage::write_snapshot(&sdir, old_snap, |w| {
            write_snapshot_payload(&job(old_snap), w)
        })
        .unwrap();
        let (tx, mut reports) = mpsc::unbounded_channel();
        let group = group_log(&ldir, tx.clone());
        for c in 1..=8 {
            group.append(z(1, c), vec![c as u8]).unwrap();
        }
        wait_durable(&group, z(1, 8));
        let member = CoreMember::standalone(Server::new(Default::default(), now));
        let opts = GroupCommitOptions::default();
        let mut d = Driver::new(
            member,
            cfg,
            Clock::system(),
            group,
            tx.clone(),
            opts,
            None,
            None,
        );
        let elsewhere = tempfile::tempdir().unwrap();
        if let CrashAt::BeforeDurable = at {
            d.snapshots = SnapshotWriter::new(elsewhere.path().to_path_buf(), tx);
        }
        d.carry_out(Output::StoreInstalled(Box::new(job(installed))))
            .unwrap();
        for &zxid in after {
            d.carry_out(Output::Persist {
                zxid,
                record: vec![1],
            })
            .unwrap();
        }
        let (seq, result) = loop {
            match reports.blocking_recv().expect("the writer reports") {
                Event::SnapshotInstalled { seq, result } => break (seq, result),
                Event::Durable(_) => {}
                _ => panic!("an unexpected report"),
            }
        };
        assert_eq!(result, Ok(installed));
        if let CrashAt::Reported = at {
            d.installed(seq, result).unwrap();
        }
        let group = d.log.take().unwrap();
        d.feed.pump(&group).unwrap();
        if let (CrashAt::Reported, Some(&last)) = (at, after.last()) {
            wait_durable(&group, last);
        }
        // The crash: what the writer was handed is on disk (more than a
        // crash keeps); what the feed holds is lost.
        let mut log = group.shutdown().unwrap();
        let (snap, _) = wazoo_storage::latest_valid_snapshot(&sdir)
            .unwrap()
            .expect("a snapshot");
        let replayed: Vec<Zxid> = log
            .read_from(snap)
            .unwrap()
            .map(|r| r.unwrap().zxid)
            .collect();
        assert_eq!(
            crate::ensemble_member::log_gap_after_snapshot(snap, replayed.first().copied()),
            None,
            "{at:?}: the log continues the snapshot"
        );
        (snap, replayed)
    }

    // Administrator's Guide, "Cluster Options", initLimit; ZooKeeper
    // Internals, "Atomic Broadcast". An observer of ZooKeeper writes the
    // state SNAP brought in the background; wherever it crashes, a restart
    // finds either the state stored before (and is synced again) or the
    // installed one with exactly the txns logged after it: never a txn of
    // one state replayed onto the other.
    #[test]
    fn a_crash_around_an_installed_snapshot_restarts_from_a_whole_state() {
        let (old, installed) = (z(1, 3), z(2, 20));
        let after = [z(2, 21), z(2, 22)];
        let old_log: Vec<Zxid> = (4..=8).map(|c| z(1, c)).collect();
        assert_eq!(
            crash_after_install(old, installed, &after, CrashAt::BeforeDurable),
            (old, old_log),
            "the state stored before, whole"
        );
        assert_eq!(
            crash_after_install(old, installed, &after, CrashAt::DurableNotReported),
            (installed, vec![]),
            "the installed state, nothing held logged"
        );
        assert_eq!(
            crash_after_install(old, installed, &after, CrashAt::Reported),
            (installed, after.to_vec()),
            "the installed state and what followed it"
        );
    }

    // The same when the observer drops its state to be synced afresh (the
    // empty state at 0, below what it stored): the log after 0 goes at
    // once, so the older snapshot comes back alone, and once the empty
    // state is durable every later snapshot is gone.
    #[test]
    fn a_crash_around_starting_afresh_restarts_from_a_whole_state() {
        let old = z(1, 6);
        let after = [z(2, 1)];
        assert_eq!(
            crash_after_install(old, Zxid::ZERO, &after, CrashAt::BeforeDurable),
            (old, vec![]),
            "the older snapshot alone"
        );
        assert_eq!(
            crash_after_install(old, Zxid::ZERO, &after, CrashAt::DurableNotReported),
            (Zxid::ZERO, vec![]),
        );
        assert_eq!(
            crash_after_install(old, Zxid::ZERO, &after, CrashAt::Reported),
            (Zxid::ZERO, after.to_vec()),
        );
    }

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
