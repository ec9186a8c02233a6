//! The simulated world: members (each a [`Member`] with a [`Disk`] and a
//! clock of its own), the network, the clients, the faults, and the loop
//! that runs them in one thread on simulated time.
//!
//! A run has two phases. Chaos: clients work while faults strike (quorum
//! links reset, partitions, election notifications dropped, duplicated and
//! reordered, client connections reset, members crash, losing their
//! unsynced writes, and restart from disk, wall clocks step). Heal: the
//! faults stop, everything is reconnected and restarted, clients work a
//! little longer and then only ping; the run ends once one leader serves
//! everybody, every member has applied everything, and abandoned sessions
//! have had time to expire. Then the end-of-run checks.

use std::collections::BTreeMap;

use wazoo_core::local_reads::{LocalReadGate, ReadViews};
use wazoo_core::member::{Input as In, Output};
use wazoo_core::server::{Input, ServerConfig};
use wazoo_core::time::Now;
use wazoo_core::watch::ConnId;
use wazoo_proto::frame;
use wazoo_zab::{self as zab, Channel, Message, ServerId, ServerState, Zxid};

use crate::check::{sessions, Shadow};
use crate::client::{Act, Client, Ctx};
use crate::disk::Disk;
use crate::member::{encode_snapshot, Applied, Member, MemberConfig, Stored};
use crate::net::{Delivery, Down, Net, Up};
use crate::recipes::SimRecipes;
use crate::rng::Rng;
use crate::{Params, Summary};

mod end;
mod faults;

const TICK_MS: u64 = 100;
/// The wall clock's reading at simulated time zero.
const WALL_EPOCH_MS: i64 = 1_700_000_000_000;
const HEAL_MS_MAX: u64 = 60_000;

struct Node {
    id: ServerId,
    cfg: MemberConfig,
    member: Option<Member>,
    incarnation: u64,
    disk: Disk,
    fsync_in_flight: bool,
    /// Simulated time this incarnation started, and its monotonic origin.
    started_ms: u64,
    mono_base_ms: i64,
    /// Clock rate in parts per million of real time (skew).
    rate_ppm: i64,
    /// Wall clock offset from true time (skew, steps).
    wall_offset_ms: i64,
    /// With local reads: the published copy of the tree, and each client
    /// connection's gate (`wazoo_core::local_reads`), as the shell keeps
    /// them for its I/O threads.
    views: Option<ReadViews>,
    gates: BTreeMap<ConnId, LocalReadGate>,
}

impl Node {
    fn now(&self, at_ms: u64) -> Now {
        let elapsed = (at_ms - self.started_ms) as i64;
        Now {
            mono_ms: self.mono_base_ms + elapsed * self.rate_ppm / 1_000_000,
            wall_ms: WALL_EPOCH_MS + at_ms as i64 + self.wall_offset_ms,
        }
    }
}

#[derive(Debug)]
enum Event {
    Tick(ServerId),
    Fsync {
        id: ServerId,
        incarnation: u64,
        upto: u64,
    },
    SnapshotWritten {
        id: ServerId,
        incarnation: u64,
        zxid: Zxid,
        data: Vec<u8>,
    },
    /// Member `id` publishes its tree for local reads, late: the shell
    /// publishes right after a batch's hand-overs, and an I/O thread may
    /// answer from the older copy meanwhile.
    Publish {
        id: ServerId,
        incarnation: u64,
    },
    /// A simulated recipe worker finished a step of member `id`.
    StepDone {
        id: ServerId,
        incarnation: u64,
        done: Box<wazoo_core::server::RecipeStepDone>,
    },
    Restart(ServerId),
    /// A paused member (SIGSTOP) goes on (SIGCONT).
    Resume(ServerId),
    Fault,
    Heal,
    Client(usize),
}

pub struct World {
    rng: Rng,
    /// Odd seeds run recipe steps on a simulated worker pool (each step
    /// done after a delay drawn from `step_rng`, in any order), even seeds
    /// in prep. A generator of its own, so even seeds replay as before.
    offload: bool,
    /// Plain reads are answered outside the pipeline, from the published
    /// copy of the tree, as the shell's client I/O threads answer them.
    local_reads: bool,
    step_rng: Rng,
    /// Draws each handshake's fresh session password (the shell's OS
    /// randomness); a generator of its own, so seeds replay as before.
    password_rng: Rng,
    params: Params,
    now_ms: u64,
    events: BTreeMap<(u64, u64), Event>,
    sequence: u64,
    net: Net,
    nodes: BTreeMap<ServerId, Node>,
    clients: Vec<Client>,
    pub shadow: Shadow,
    pub history: crate::check::linear::History,
    /// When each epoch's leader was established, for the lease check.
    leases: crate::check::leases::Leases,
    /// Members stopped like a process under SIGSTOP, with every input that
    /// reached them since, in order (what the kernel would buffer); they
    /// get no ticks until they go on.
    paused: BTreeMap<ServerId, Vec<In>>,
    history_seq: u64,
    next_conn: ConnId,
    counter_values: BTreeMap<(String, i64), usize>,
    chaos: bool,
    clients_work: bool,
    /// (leader, epoch) serving last, and since when.
    leader: Option<(ServerId, u32)>,
    leader_since_ms: u64,
    pub summary: Summary,
    trace: bool,
}

impl World {
    pub fn new(seed: u64, trace: bool) -> World {
        World::with_variant(seed, trace, crate::Variant::default())
    }

    /// The seed's world with what `variant` adds (observers, maybe behind
    /// followers). Without one it is exactly the seed's.
    pub fn with_variant(seed: u64, trace: bool, variant: crate::Variant) -> World {
        let mut rng = Rng::new(seed);
        let mut params = Params::draw(&mut rng);
        let n = params.members.len() as u64;
        params.observers = (n + 1..=n + variant.observers).collect();
        params.observer_master = variant.observer_master;
        let mut w = World {
            rng,
            offload: seed % 2 == 1,
            local_reads: variant.local_reads || seed % 3 == 2,
            step_rng: Rng::new(seed ^ 0x5a00_5a00_5a00_5a00),
            password_rng: Rng::new(seed ^ 0x0a55_0a55_0a55_0a55),
            now_ms: 0,
            events: BTreeMap::new(),
            sequence: 0,
            net: Net::default(),
            nodes: BTreeMap::new(),
            clients: Vec::new(),
            shadow: Shadow::default(),
            history: Default::default(),
            leases: Default::default(),
            paused: BTreeMap::new(),
            history_seq: 0,
            next_conn: 0,
            counter_values: BTreeMap::new(),
            chaos: true,
            clients_work: true,
            leader: None,
            leader_since_ms: 0,
            summary: Summary::default(),
            trace,
            params,
        };
        w.log(format!("params {:?}", w.params));
        let voters = w.params.members.clone();
        let observers = w.params.observers.clone();
        for &id in voters.iter().chain(&observers) {
            let mut z = zab::Config::new(id, voters.clone(), observers.clone());
            z.observer_master = w.params.observer_master;
            z.tick_ms = TICK_MS;
            z.init_limit_ticks = 10;
            z.sync_limit_ticks = 5;
            z.finalize_wait_ms = w.params.finalize_wait_ms;
            z.notification_interval_ms_min = 50;
            z.notification_interval_ms_max = 800;
            z.committed_log_max = w.params.committed_log_max;
            z.outstanding_proposals_max = w.params.outstanding_proposals_max;
            let server = ServerConfig {
                server_id: id,
                tick_ms: TICK_MS as u32,
                min_session_timeout_ms: 2 * TICK_MS as u32,
                max_session_timeout_ms: 20 * TICK_MS as u32,
                snap_count: w.params.snap_count,
                container_check_interval_ms: 1_000,
                ..ServerConfig::default()
            };
            let rate_ppm =
                1_000_000 + w.rng.range(0, 2 * w.params.skew_ppm) as i64 - w.params.skew_ppm as i64;
            let wall_offset_ms = w.rng.range(0, 20_000) as i64 - 10_000;
            w.nodes.insert(
                id,
                Node {
                    id,
                    cfg: MemberConfig { zab: z, server },
                    member: None,
                    incarnation: 0,
                    disk: Disk::default(),
                    fsync_in_flight: false,
                    started_ms: 0,
                    mono_base_ms: 0,
                    rate_ppm,
                    wall_offset_ms,
                    views: None,
                    gates: BTreeMap::new(),
                },
            );
            let phase = w.rng.range(0, TICK_MS / 2 - 1);
            w.schedule(phase, Event::Tick(id));
            w.start(id);
        }
        for c in 0..w.params.clients {
            let timeout = *w.rng.pick(&[600, 1_000, 1_600]);
            w.clients.push(Client::new(c, timeout));
            let at = w.rng.range(1, 200);
            w.schedule(at, Event::Client(c));
        }
        let gap = w.draw(w.params.fault_gap_ms);
        w.schedule(gap, Event::Fault);
        w
    }

    fn draw(&mut self, (lo, hi): (u64, u64)) -> u64 {
        self.rng.range(lo, hi)
    }

    fn log(&self, line: String) {
        if self.trace {
            eprintln!("[{:>6}ms] {line}", self.now_ms);
        }
    }

    fn schedule(&mut self, delay_ms: u64, event: Event) {
        self.sequence += 1;
        self.events
            .insert((self.now_ms + delay_ms, self.sequence), event);
    }

    // ---- members -----------------------------------------------------------

    fn start(&mut self, id: ServerId) {
        let now_ms = self.now_ms;
        let base = self.rng.range(0, 10_000) as i64;
        let node = self.nodes.get_mut(&id).expect("node");
        node.incarnation += 1;
        node.started_ms = now_ms;
        node.mono_base_ms = base;
        node.fsync_in_flight = false;
        let snapshot = node.disk.latest_snapshot();
        let snap_zxid = snapshot.map_or(Zxid::ZERO, |s| s.0);
        let stored = Stored {
            accepted_epoch: node.disk.accepted_epoch,
            current_epoch: node.disk.current_epoch,
            snapshot: snapshot.map(|s| s.1.as_slice()),
            log: node.disk.log_after(snap_zxid),
        };
        let now = node.now(now_ms);
        let mut member = Member::recover(&node.cfg, stored, Box::new(SimRecipes), now)
            .unwrap_or_else(|e| panic!("member {id} does not recover: {e}"));
        if self.offload {
            member.offload_recipe_steps();
        }
        node.member = Some(member);
        if let Err(e) = self.shadow.member_at(id, snap_zxid) {
            panic!("{e}");
        }
        self.log(format!("start {id} from snapshot {snap_zxid:?}"));
        self.after_input(id);
    }

    /// A paused member goes on: it handles what reached it meanwhile, in
    /// order, at the time it goes on (its clock moved all along).
    fn resume(&mut self, id: ServerId) {
        let Some(held) = self.paused.remove(&id) else {
            return;
        };
        self.net.resume_reading(id);
        self.log(format!("{id} goes on, {} inputs held", held.len()));
        for input in held {
            self.input(id, input);
        }
    }

    fn crash(&mut self, id: ServerId) {
        self.paused.remove(&id);
        self.net.resume_reading(id);
        let node = self.nodes.get_mut(&id).expect("node");
        let Some(m) = node.member.take() else { return };
        node.views = None;
        node.gates.clear();
        self.summary.elections += m.peer().stats().elections;
        let lost = node.disk.crash();
        node.fsync_in_flight = false;
        self.summary.crashes += 1;
        self.summary.lost_writes += lost as u64;
        let others: Vec<ServerId> = self.nodes.keys().copied().filter(|&o| o != id).collect();
        for other in others {
            let at = self.now_ms + self.rng.range(1, 20);
            self.net.reset(id, other, [false, true], at);
        }
        let at = self.now_ms + self.rng.range(1, 20);
        self.net.crash(id, at);
        self.log(format!("crash {id}, {lost} unsynced log records lost"));
    }

    /// Hands `input` to member `id` and carries out everything it causes.
    fn input(&mut self, id: ServerId, input: In) {
        if let Some(held) = self.paused.get_mut(&id) {
            if !matches!(input, In::Tick) {
                held.push(input);
            }
            return;
        }
        let mut queue = std::collections::VecDeque::from([input]);
        while let Some(input) = queue.pop_front() {
            let now_ms = self.now_ms;
            let node = self.nodes.get_mut(&id).expect("node");
            let now = node.now(now_ms);
            let Some(m) = node.member.as_mut() else {
                return;
            };
            if self.trace && !matches!(input, In::Tick) {
                eprintln!("[{now_ms:>6}ms] {id} <- {input:?}");
            }
            if let Err(e) = m.handle(input, now) {
                panic!("member {id} stopped: {e}");
            }
            self.carry_out(id, &mut queue);
        }
        self.after_input(id);
    }

    fn after_input(&mut self, id: ServerId) {
        let mut q = std::collections::VecDeque::new();
        self.carry_out(id, &mut q);
        assert!(q.is_empty(), "follow-up inputs outside `input`");
        let node = &self.nodes[&id];
        let Some(m) = &node.member else { return };
        m.peer().validate();
        let stats = m.peer().stats();
        assert_eq!(
            stats.protocol_violations, 0,
            "member {id}: protocol violation: {:?}",
            stats.last_violation
        );
        if let Err(e) = sessions::check_member(id, m.server()) {
            panic!("{e}");
        }
        let status = m.peer().status();
        assert!(
            status.accepted_epoch == node.disk.accepted_epoch
                && status.current_epoch == node.disk.current_epoch,
            "member {id}: epochs in memory and on disk differ"
        );
        if status.state == ServerState::Leading && status.serving {
            self.leases
                .established(status.current_epoch, id, self.now_ms);
            let now_leading = Some((id, status.current_epoch));
            if self.leader != now_leading {
                self.leader = now_leading;
                self.leader_since_ms = self.now_ms;
                self.summary.leaders += 1;
                self.log(format!("{id} leads epoch {}", status.current_epoch));
            }
        }
    }

    fn carry_out(&mut self, id: ServerId, follow: &mut std::collections::VecDeque<In>) {
        let node = self.nodes.get_mut(&id).expect("node");
        let Some(m) = node.member.as_mut() else {
            return;
        };
        if self.local_reads && node.views.is_none() {
            node.views = Some(ReadViews::start(m.server()));
        }
        let outputs = m.take_outputs();
        let applied = m.take_applied();
        // What each connection is handed in this batch (local reads).
        let mut handed: BTreeMap<ConnId, (u32, Option<std::sync::Arc<_>>)> = BTreeMap::new();
        for out in outputs {
            if self.trace {
                eprintln!("[{:>6}ms] {id} -> {out:?}", self.now_ms);
            }
            if self.local_reads {
                match &out {
                    Output::Send { conn, replies, .. } => {
                        handed.entry(*conn).or_default().0 += replies
                    }
                    Output::LocalReads { conn, auth } => {
                        handed.entry(*conn).or_default().1 = Some(auth.clone())
                    }
                    Output::Close { conn } => {
                        if let Some(g) = self.nodes.get_mut(&id).expect("node").gates.get_mut(conn)
                        {
                            g.stop();
                        }
                    }
                    _ => {}
                }
            }
            self.io(id, out, follow);
        }
        // The batch's hand-overs, stamped with the copy of the tree they
        // were made from, then that copy published (rule 2): at once, or a
        // few milliseconds later (the window an I/O thread may see).
        let late = self.local_reads && self.rng.chance(300);
        let node = self.nodes.get_mut(&id).expect("node");
        if let (Some(m), Some(views)) = (&node.member, &mut node.views) {
            let seq = views.seq_of_now(m.server());
            for (conn, (replies, allow)) in handed {
                if let Some(g) = node.gates.get_mut(&conn) {
                    g.handed_over(seq, replies, allow);
                }
            }
            if !late {
                views.publish(m.server());
            } else if seq > views.current().seq {
                let incarnation = node.incarnation;
                let after = self.rng.range(1, 10);
                self.schedule(after, Event::Publish { id, incarnation });
            }
        }
        for a in applied {
            let r = match a {
                Applied::Txn { zxid, record } => self.shadow.applied(id, zxid, &record),
                Applied::Snapshot { zxid } => self.shadow.member_at(id, zxid),
            };
            if let Err(e) = r {
                panic!("{e}");
            }
        }
    }

    /// Carries out one output of member `id`, as the shell's driver does:
    /// epochs, truncation and an installed snapshot are on the disk before
    /// the next output; a `Persist` becomes durable when its fsync ends.
    fn io(&mut self, id: ServerId, out: Output, follow: &mut std::collections::VecDeque<In>) {
        let now_ms = self.now_ms;
        match out {
            Output::SendPeer { to, msg } => self.send_zab(id, to, msg),
            Output::SendApp { to, msg } => {
                let at = now_ms + self.draw(self.params.quorum_delay_ms);
                self.net.send_quorum(id, to, true, msg.encode(), at);
            }
            Output::CloseLink { peer } => {
                let at = now_ms + self.rng.range(1, 20);
                self.net.reset(id, peer, [false, true], at);
            }
            // The simulated clients never reconfigure; the network links
            // every member it was built with.
            Output::Reconfigured(_) => {}
            // The simulation runs without audit records.
            Output::Audit(_) => {}
            // Nor does it ask for restores (the AdminServer's).
            Output::Restored { .. } => {}
            // Its members are wazoo's: none observes a ZooKeeper ensemble.
            Output::SendZk(_)
            | Output::CloseZk
            | Output::ZkMembership(_)
            | Output::SendVote { .. }
            | Output::ZkReload { .. }
            | Output::ZkFollow { .. }
            | Output::StoreInstalled(_) => {
                unreachable!("a simulated member observes no ZooKeeper ensemble")
            }
            Output::StoreAcceptedEpoch { epoch } => {
                let d = &mut self.nodes.get_mut(&id).expect("node").disk;
                assert!(
                    epoch > d.accepted_epoch,
                    "member {id}: acceptedEpoch goes back"
                );
                d.accepted_epoch = epoch;
            }
            Output::StoreCurrentEpoch { epoch } => {
                let d = &mut self.nodes.get_mut(&id).expect("node").disk;
                assert!(
                    epoch > d.current_epoch && epoch <= d.accepted_epoch,
                    "member {id}: currentEpoch {epoch}"
                );
                d.current_epoch = epoch;
            }
            Output::Persist { zxid, record } => {
                let status = self.nodes[&id].member.as_ref().map(|m| m.peer().status());
                if let Some(s) = status {
                    if s.state == ServerState::Leading && s.current_epoch == zxid.epoch() {
                        if let Err(e) = self.leases.served(zxid.epoch(), id, self.now_ms) {
                            panic!("{e}");
                        }
                    }
                }
                self.nodes
                    .get_mut(&id)
                    .expect("node")
                    .disk
                    .append(zxid, record.into());
                self.start_fsync(id);
            }
            Output::Truncate { after } => self
                .nodes
                .get_mut(&id)
                .expect("node")
                .disk
                .truncate_after(after),
            Output::InstallSnapshot { zxid, data } => {
                self.summary.snaps += 1;
                self.nodes
                    .get_mut(&id)
                    .expect("node")
                    .disk
                    .install_snapshot(zxid, data.to_vec())
            }
            Output::WriteSnapshot(job) => {
                let (zxid, data) = (job.zxid, encode_snapshot(&job));
                let incarnation = self.nodes[&id].incarnation;
                let after = self.rng.range(5, 200);
                self.schedule(
                    after,
                    Event::SnapshotWritten {
                        id,
                        incarnation,
                        zxid,
                        data,
                    },
                );
            }
            Output::RecipeStep(job) => {
                let done = Box::new(job.run(&mut SimRecipes));
                let incarnation = self.nodes[&id].incarnation;
                let after = self.step_rng.range(0, 40);
                self.schedule(
                    after,
                    Event::StepDone {
                        id,
                        incarnation,
                        done,
                    },
                );
            }
            Output::Send { conn, bytes, .. } => {
                let at = now_ms + self.draw(self.params.client_delay_ms);
                self.net.to_client(conn, Down::Bytes(bytes), at);
            }
            // Carried out in `carry_out`.
            Output::LocalReads { .. } => {}
            Output::Close { conn } => {
                let at = now_ms + self.draw(self.params.client_delay_ms);
                self.net.to_client(conn, Down::Closed, at);
                // The shell tells its core once the connection is gone.
                follow.push_back(In::Client(Input::Closed { conn }));
            }
        }
    }

    fn send_zab(&mut self, from: ServerId, to: ServerId, msg: Message) {
        let bytes = msg.to_bytes();
        match msg.channel() {
            Channel::Election => {
                if self.chaos && self.rng.chance(self.params.election_drop_per_mille) {
                    return;
                }
                let copies = if self.chaos && self.rng.chance(self.params.election_dup_per_mille) {
                    2
                } else {
                    1
                };
                for _ in 0..copies {
                    let at = self.now_ms + self.rng.range(1, 30);
                    self.net.send_datagram(from, to, bytes.clone(), at);
                }
            }
            Channel::Quorum => {
                let at = self.now_ms + self.draw(self.params.quorum_delay_ms);
                self.net.send_quorum(from, to, false, bytes, at);
            }
        }
    }

    fn start_fsync(&mut self, id: ServerId) {
        let latency = self.draw(self.params.fsync_ms);
        let node = self.nodes.get_mut(&id).expect("node");
        if node.fsync_in_flight || !node.disk.has_unsynced() {
            return;
        }
        node.fsync_in_flight = true;
        let (incarnation, upto) = (node.incarnation, node.disk.appended());
        self.schedule(
            latency,
            Event::Fsync {
                id,
                incarnation,
                upto,
            },
        );
    }

    // ---- clients -----------------------------------------------------------

    fn with_client(
        &mut self,
        c: usize,
        f: impl FnOnce(&mut Client, &mut Ctx<'_>) -> Result<(), String>,
    ) {
        let members: Vec<ServerId> = self.nodes.keys().copied().collect();
        let mut ctx = Ctx {
            rng: &mut self.rng,
            now_ms: self.now_ms,
            seq: &mut self.history_seq,
            members: &members,
            history: &mut self.history,
            shadow: &self.shadow,
            next_conn: &mut self.next_conn,
            acts: Vec::new(),
            counter_values: &mut self.counter_values,
            register_keys: self.params.register_keys,
        };
        if let Err(e) = f(&mut self.clients[c], &mut ctx) {
            panic!("{e}");
        }
        let acts = std::mem::take(&mut ctx.acts);
        for (session, asked_ms) in std::mem::take(&mut self.clients[c].told_expired) {
            self.check_told_expired(c, session, asked_ms);
        }
        for act in acts {
            let at = self.now_ms + self.draw(self.params.client_delay_ms);
            match act {
                Act::Open { conn, member } => {
                    self.net.open(conn, c, member);
                    if self.nodes[&member].member.is_none() {
                        self.net.reset_client(conn, at); // refused
                    }
                }
                Act::Send { conn, up } => self.net.to_member(conn, up, at),
                Act::Close { conn } => self.net.client_close(conn, at),
            }
        }
    }

    /// A member's handshake told a client its session expired: the leader
    /// must not hold it live (see `sessions::check_told_expired`).
    fn check_told_expired(&mut self, client: usize, session: i64, asked_ms: u64) {
        let Some((leader, _)) = self.leader else {
            return;
        };
        let Some(m) = self.nodes[&leader].member.as_ref() else {
            return;
        };
        if m.peer().state() != ServerState::Leading {
            return;
        }
        let before = self.leader_since_ms < asked_ms;
        if let Err(e) = sessions::check_told_expired(leader, m.server(), before, session) {
            panic!(
                "{e} (client {client}, asked at {asked_ms} ms); committed: created {}, closed at {:?}",
                self.shadow.opened.contains(&session),
                self.shadow.closed.get(&session)
            );
        }
    }

    /// A read answered outside the pipeline, as the shell's reader does
    /// with client I/O threads, if the gate lets it; else the request is
    /// counted as handed to the pipeline. A paused member answers nothing
    /// (its I/O threads are stopped with it).
    /// `req` None: a request that did not decode, for the pipeline.
    fn answer_locally(
        &mut self,
        member: ServerId,
        conn: ConnId,
        xid: i32,
        req: Option<&wazoo_proto::Request>,
    ) -> bool {
        if !self.local_reads {
            return false;
        }
        let paused = self.paused.contains_key(&member);
        let node = self.nodes.get_mut(&member).expect("node");
        let (Some(views), Some(gate)) = (&node.views, node.gates.get_mut(&conn)) else {
            return false;
        };
        let answered = req
            .filter(|_| !paused)
            .and_then(|req| gate.answer(views.current(), xid, req));
        let Some(bytes) = answered else {
            gate.to_pipeline();
            return false;
        };
        self.summary.local_reads += 1;
        let at = self.now_ms + self.draw(self.params.client_delay_ms);
        self.net.to_client(conn, Down::Local(bytes), at);
        // The shell reports them in batches; one at a time here.
        self.input(member, In::Client(Input::LocalReads { conn, reads: 1 }));
        true
    }

    fn deliver_up(&mut self, member: ServerId, conn: ConnId, up: Up) {
        if self.local_reads {
            let node = self.nodes.get_mut(&member).expect("node");
            if node.member.is_some() {
                match &up {
                    Up::Connect(_) => {
                        node.gates.insert(conn, LocalReadGate::default());
                    }
                    // Counted in `answer_locally`.
                    Up::Request { .. } => {}
                    Up::Closed => {
                        node.gates.remove(&conn);
                    }
                }
            }
        }
        let input = match up {
            Up::Connect(req) => {
                let mut fresh_password = [0u8; wazoo_core::session::PASSWORD_LEN];
                for chunk in fresh_password.chunks_mut(8) {
                    let n = chunk.len();
                    chunk.copy_from_slice(&self.password_rng.next_u64().to_be_bytes()[..n]);
                }
                Input::Connect {
                    conn,
                    peer: None,
                    req,
                    fresh_password,
                }
            }
            Up::Request { xid, req } => {
                // Through the wire format, as the shell's reader decodes it.
                let mut bytes = Vec::new();
                frame::write_request(&mut bytes, xid, &req);
                match frame::decode_client_frame(&bytes[4..]) {
                    Ok(frame::ClientFrame::Request { xid, req }) => {
                        if self.answer_locally(member, conn, xid, Some(&req)) {
                            return;
                        }
                        Input::Request { conn, xid, req }
                    }
                    Ok(frame::ClientFrame::Unknown { xid, op }) => {
                        self.answer_locally(member, conn, xid, None);
                        Input::Unknown { conn, xid, op }
                    }
                    Err(_) => {
                        self.answer_locally(member, conn, xid, None);
                        Input::Malformed { conn, xid }
                    }
                }
            }
            Up::Closed => Input::Closed { conn },
        };
        self.input(member, In::Client(input));
    }

    // ---- events ------------------------------------------------------------

    fn on_event(&mut self, event: Event) {
        match event {
            Event::Tick(id) => {
                self.schedule(TICK_MS / 2, Event::Tick(id));
                self.input(id, In::Tick);
            }
            Event::Fsync {
                id,
                incarnation,
                upto,
            } => {
                let node = self.nodes.get_mut(&id).expect("node");
                if node.incarnation != incarnation || node.member.is_none() {
                    return;
                }
                node.fsync_in_flight = false;
                node.disk.synced(upto);
                let zxid = node.disk.durable_zxid();
                self.input(id, In::Durable { zxid });
                self.start_fsync(id);
            }
            Event::SnapshotWritten {
                id,
                incarnation,
                zxid,
                data,
            } => {
                let node = self.nodes.get_mut(&id).expect("node");
                if node.incarnation == incarnation && node.member.is_some() {
                    node.disk.store_snapshot(zxid, data);
                }
            }
            Event::Resume(id) => self.resume(id),
            Event::Publish { id, incarnation } => {
                let node = self.nodes.get_mut(&id).expect("node");
                if let (true, Some(m), Some(views)) = (
                    node.incarnation == incarnation,
                    &node.member,
                    &mut node.views,
                ) {
                    views.publish(m.server());
                }
            }
            Event::StepDone {
                id,
                incarnation,
                done,
            } => {
                let node = &self.nodes[&id];
                if node.incarnation == incarnation && node.member.is_some() {
                    self.input(id, In::Client(Input::RecipeStepDone(done)));
                }
            }
            Event::Restart(id) => {
                if self.nodes[&id].member.is_none() {
                    self.start(id);
                }
            }
            Event::Fault => {
                if self.chaos {
                    self.fault();
                    let gap = self.draw(self.params.fault_gap_ms);
                    self.schedule(gap, Event::Fault);
                }
            }
            Event::Heal => {
                self.net.heal_all();
                self.log("heal".into());
            }
            Event::Client(c) => {
                self.clients[c].working = self.clients_work;
                self.with_client(c, |cl, ctx| {
                    cl.poll(ctx);
                    Ok(())
                });
                let gap = self.draw(self.params.client_gap_ms);
                self.schedule(gap, Event::Client(c));
            }
        }
    }

    // ---- the loop ----------------------------------------------------------

    /// Runs the next event; false when nothing is left.
    fn step(&mut self) -> bool {
        self.summary.steps += 1;
        let net_at = self.net.next_time();
        let event_at = self.events.keys().next().map(|k| k.0);
        let use_net = match (net_at, event_at) {
            (Some(n), Some(e)) => n <= e,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return false,
        };
        if !use_net {
            let (key, event) = self.events.pop_first().expect("an event");
            self.now_ms = self.now_ms.max(key.0);
            self.on_event(event);
            return true;
        }
        self.now_ms = self.now_ms.max(net_at.expect("net time"));
        match self.net.pop(self.now_ms) {
            Some(Delivery::Zab { from, to, bytes }) => {
                if self.nodes[&to].member.is_none() {
                    // Connection refused: the sender finds out.
                    let at = self.now_ms + self.rng.range(1, 20);
                    self.net.reset(from, to, [true, false], at);
                    return true;
                }
                let msg = Message::decode(&bytes).expect("our own encoding decodes");
                self.input(to, In::Zab { from, msg });
            }
            Some(Delivery::App { from, to, bytes }) => self.input(
                to,
                In::App {
                    from,
                    payload: bytes,
                },
            ),
            Some(Delivery::Disconnected { to, peer }) => self.input(to, In::LinkDown { peer }),
            Some(Delivery::Notification { from, to, bytes }) => {
                let msg = Message::decode(&bytes).expect("our own encoding decodes");
                self.input(to, In::Zab { from, msg });
            }
            Some(Delivery::ToMember { member, conn, up }) => self.deliver_up(member, conn, up),
            Some(Delivery::ToClient { client, conn, down }) => {
                let written = match &down {
                    Down::Bytes(b) if self.clients[client].conn_id() == Some(conn) => b.len(),
                    _ => 0,
                };
                let member = self.net_member_of(conn);
                let down = match down {
                    Down::Local(bytes) => Down::Bytes(bytes),
                    down => down,
                };
                self.with_client(client, |cl, ctx| cl.on_down(ctx, conn, down));
                // The client read them: the member's socket has room again.
                if let (Some(member), true) = (member, written > 0) {
                    self.input(
                        member,
                        In::Client(Input::Written {
                            conn,
                            bytes: written as u64,
                        }),
                    );
                }
            }
            Some(Delivery::Nothing) | None => {}
        }
        true
    }

    fn net_member_of(&self, conn: ConnId) -> Option<ServerId> {
        self.net.member_of(conn)
    }

    pub fn run(&mut self) {
        while self.now_ms < self.params.chaos_ms {
            assert!(self.step(), "the simulation ran dry");
        }
        self.chaos = false;
        self.net.heal_all();
        let paused: Vec<ServerId> = self.paused.keys().copied().collect();
        for id in paused {
            self.resume(id);
        }
        let heal_at = self.now_ms;
        self.log("---- heal everything ----".into());
        let down: Vec<ServerId> = self
            .nodes
            .values()
            .filter(|n| n.member.is_none())
            .map(|n| n.id)
            .collect();
        for id in down {
            self.start(id);
        }
        let timeout_max = 20 * TICK_MS;
        loop {
            assert!(self.step(), "the simulation ran dry");
            if self.clients_work && self.now_ms >= heal_at + self.params.work_after_heal_ms {
                self.clients_work = false;
            }
            if !self.clients_work
                && self.now_ms >= self.leader_since_ms + 2 * timeout_max + 4 * TICK_MS
                && self.quiescent()
            {
                break;
            }
            assert!(
                self.now_ms < heal_at + HEAL_MS_MAX,
                "liveness: no single leader serving everybody {HEAL_MS_MAX} ms after healing:{}",
                self.describe()
            );
        }
        self.final_checks();
    }

    fn describe(&self) -> String {
        let mut out = String::new();
        for c in &self.clients {
            out.push_str(&format!(
                "\n  client {}: session {:?} on {:?}, waiting for {:?}",
                c.id,
                c.session_id(),
                c.conn_id().and_then(|conn| self.net.member_of(conn)),
                c.pending()
            ));
        }
        for n in self.nodes.values() {
            match &n.member {
                Some(m) => out.push_str(&format!(
                    "\n  {}: {:?} applied {:?}",
                    n.id,
                    m.peer().status(),
                    m.server().last_zxid()
                )),
                None => out.push_str(&format!("\n  {}: down", n.id)),
            }
        }
        out
    }

    /// One leader serves everybody; all have applied all it proposed.
    fn quiescent(&self) -> bool {
        let leaders: Vec<&Node> = self
            .nodes
            .values()
            .filter(|n| {
                n.member
                    .as_ref()
                    .is_some_and(|m| m.peer().state() == ServerState::Leading)
            })
            .collect();
        let [leader] = leaders[..] else { return false };
        let lm = leader.member.as_ref().expect("live");
        let ls = lm.peer().status();
        if !ls.serving
            || ls.committed_zxid != ls.last_zxid
            || lm.server().pending_txns() != 0
            || lm.server().recipe_steps_in_flight() != 0
            || lm.server().last_zxid() != ls.committed_zxid
        {
            return false;
        }
        self.clients.iter().all(Client::settled)
            && self.nodes.values().all(|n| {
                n.member.as_ref().is_some_and(|m| {
                    let s = m.peer().status();
                    s.serving
                        && s.leader == Some(leader.id)
                        && m.server().last_zxid() == ls.committed_zxid
                })
            })
    }
}
