//! Tests of the pipeline state machine, driven input by input with a fake
//! clock and a fake log: no sockets, no threads, no time.

use super::server::*;
use super::time::Now;
use wazoo_proto::Zxid;

mod apply_refusals;
mod audit;
mod clock;
mod deploy;
mod failover;
mod local_sessions;
mod outbound;
mod recipes;
mod recipes_offload;
// The same tests with recipe steps run off the member's thread.
#[allow(clippy::duplicate_mod)]
#[path = "server_tests/recipes.rs"]
mod recipes_offloaded;
mod restore;
mod sessions_watches;
mod zk_divergences;
use wazoo_proto::jute::{Jute, Reader};
use wazoo_proto::{
    Acl, ConnectRequest, ConnectResponse, CreateMode, CreateRequest, ErrorCode, EventType, OpCode,
    OpResult, ReplyHeader, Request, Response, WatcherEvent,
};

/// A frame the server sent, decoded.
#[derive(Debug, Clone, PartialEq)]
enum Sent {
    Connect(ConnectResponse),
    Reply {
        xid: i32,
        err: i32,
        body: Option<Response>,
    },
    Event(WatcherEvent),
    /// A recipe notification's payload.
    Recipe(Vec<u8>),
}

struct Harness {
    server: Server,
    /// The monotonic clock.
    now: i64,
    /// How far the wall clock is set from the monotonic one.
    wall_step_ms: i64,
    /// Txns persisted but not yet reported durable.
    unsynced: Vec<Zxid>,
    /// Frames per connection, in order, and whether it was closed.
    sent: std::collections::HashMap<u64, Vec<Sent>>,
    closed: Vec<u64>,
    /// The opcode of each xid in flight per connection, to decode replies.
    ops: std::collections::HashMap<(u64, i32), OpCode>,
    handshaken: std::collections::HashSet<u64>,
    auto_sync: bool,
    /// Connections whose client does not read, with the bytes it has not
    /// taken; every other client takes what it is sent at once (the
    /// harness reports it written).
    stalled: std::collections::HashMap<u64, u64>,
    /// With offloaded recipe steps: the engine that runs them as soon as
    /// they are sent (a worker pool with no delay); without one they wait
    /// in `steps` for the test to run them.
    step_engine: Option<Box<dyn crate::recipe::RecipeEngine>>,
    steps: Vec<RecipeJob>,
    /// Audit records, in the order they came out.
    audits: Vec<crate::audit::AuditRecord>,
    /// An ensemble member's outputs to the other members (proposals, what
    /// goes to the leader), in order; `None`: standalone, where any is a bug.
    replicated: Option<Vec<Output>>,
    /// The zxids of the snapshots asked for, in order.
    snapshots: Vec<Zxid>,
    /// Restores applied or refused: (token, zxid, error).
    restored: Vec<(u64, Zxid, Option<String>)>,
}

impl Harness {
    fn new(cfg: ServerConfig) -> Harness {
        Harness {
            server: Server::new(cfg, Now::same(1_000_000)),
            now: 1_000_000,
            wall_step_ms: 0,
            unsynced: Vec::new(),
            sent: Default::default(),
            closed: Vec::new(),
            ops: Default::default(),
            handshaken: Default::default(),
            auto_sync: true,
            stalled: Default::default(),
            step_engine: None,
            steps: Vec::new(),
            audits: Vec::new(),
            replicated: None,
            snapshots: Vec::new(),
            restored: Vec::new(),
        }
    }

    fn default() -> Harness {
        Harness::new(ServerConfig {
            extended_types_enabled: true,
            ..ServerConfig::default()
        })
    }

    fn step(&mut self, input: Input) {
        self.server.handle(input, self.clocks());
        self.collect();
        if self.auto_sync {
            self.sync();
        }
    }

    fn clocks(&self) -> Now {
        Now {
            mono_ms: self.now,
            wall_ms: self.now + self.wall_step_ms,
        }
    }

    fn sync(&mut self) {
        while let Some(&z) = self.unsynced.last() {
            self.unsynced.clear();
            self.server
                .handle(Input::Durable { zxid: z }, self.clocks());
            self.collect();
        }
    }

    fn collect(&mut self) {
        loop {
            let mut written = Vec::new();
            for out in self.server.take_outputs() {
                match out {
                    Output::Persist { zxid, .. } => self.unsynced.push(zxid),
                    Output::Send { conn, bytes, .. } => {
                        self.decode(conn, &bytes);
                        match self.stalled.get_mut(&conn) {
                            Some(held) => *held += bytes.len() as u64,
                            None => written.push((conn, bytes.len() as u64)),
                        }
                    }
                    Output::Close { conn } => self.closed.push(conn),
                    // A shell with client I/O threads acts on it.
                    Output::LocalReads { .. } => {}
                    Output::Snapshot(job) => self.snapshots.push(job.zxid),
                    Output::Audit(r) => self.audits.push(*r),
                    Output::RecipeStep(job) => self.steps.push(*job),
                    Output::Restored { token, zxid, error } => {
                        self.restored.push((token, zxid, error))
                    }
                    o @ (Output::Propose { .. } | Output::ToLeader(_)) => {
                        match &mut self.replicated {
                            Some(r) => r.push(o),
                            None => panic!("a standalone member never replicates"),
                        }
                    }
                    Output::StepDown { .. } | Output::Reconfigured(_) => {
                        panic!("a standalone member never replicates")
                    }
                }
            }
            let mut done = Vec::new();
            if let Some(engine) = self.step_engine.as_mut() {
                for job in std::mem::take(&mut self.steps) {
                    done.push(job.run(engine.as_mut()));
                }
            }
            if written.is_empty() && done.is_empty() {
                return;
            }
            for d in done {
                self.server
                    .handle(Input::RecipeStepDone(Box::new(d)), self.clocks());
            }
            for (conn, bytes) in written {
                self.server
                    .handle(Input::Written { conn, bytes }, self.clocks());
            }
        }
    }

    fn decode(&mut self, conn: u64, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let n = wazoo_proto::frame::check(bytes, usize::MAX)
                .unwrap()
                .unwrap();
            let payload = &bytes[4..n];
            bytes = &bytes[n..];
            let sent = if !self.handshaken.contains(&conn) {
                self.handshaken.insert(conn);
                Sent::Connect(ConnectResponse::from_bytes(payload).unwrap())
            } else {
                let mut r = Reader::new(payload);
                let h = ReplyHeader::read(&mut r).unwrap();
                if h.xid == -1 {
                    Sent::Event(WatcherEvent::read(&mut r).unwrap())
                } else if h.xid == wazoo_proto::xid::RECIPE_NOTIFICATION {
                    Sent::Recipe(r.read_buffer().unwrap())
                } else {
                    let op = self.ops.remove(&(conn, h.xid)).unwrap_or(OpCode::Ping);
                    // A body after an error code only where ZooKeeper
                    // writes one too (a failed SASL step).
                    let body = (h.err == 0 || r.remaining() > 0)
                        .then(|| Response::read_body(op, &mut r).unwrap());
                    Sent::Reply {
                        xid: h.xid,
                        err: h.err,
                        body,
                    }
                }
            };
            self.sent.entry(conn).or_default().push(sent);
        }
    }

    fn connect(&mut self, conn: u64) -> ConnectResponse {
        self.connect_with(conn, 0, vec![0; 16], 30_000)
    }

    fn connect_with(
        &mut self,
        conn: u64,
        session: i64,
        passwd: Vec<u8>,
        timeout: i32,
    ) -> ConnectResponse {
        self.step(Input::Connect {
            conn,
            fresh_password: [0x40 | conn as u8; 16],
            peer: Some("127.0.0.1:5000".parse().unwrap()),
            req: ConnectRequest {
                protocol_version: 0,
                last_zxid_seen: 0,
                timeout_ms: timeout,
                session_id: session,
                passwd,
                read_only: Some(false),
            },
        });
        match self.sent.get(&conn).and_then(|v| v.first()).cloned() {
            Some(Sent::Connect(r)) => r,
            other => panic!("expected a connect response, got {other:?}"),
        }
    }

    fn send(&mut self, conn: u64, xid: i32, req: Request) {
        self.ops.insert((conn, xid), req.opcode());
        self.step(Input::Request { conn, xid, req });
    }

    /// Sends a request and returns its reply (error code, body).
    fn call(&mut self, conn: u64, req: Request) -> (i32, Option<Response>) {
        let xid = 1000 + self.sent.get(&conn).map_or(0, |v| v.len() as i32);
        self.send(conn, xid, req);
        let frames = self.sent.get(&conn).cloned().unwrap_or_default();
        for f in frames.iter().rev() {
            if let Sent::Reply { xid: x, err, body } = f {
                if *x == xid {
                    return (*err, body.clone());
                }
            }
        }
        panic!("no reply to xid {xid}; frames: {frames:?}");
    }

    /// Adds `digest` auth (`user:password`) to a connection.
    fn digest_auth(&mut self, conn: u64, user_password: &str) {
        self.send(
            conn,
            wazoo_proto::xid::AUTH,
            Request::Auth(wazoo_proto::AuthPacket {
                auth_type: 0,
                scheme: "digest".into(),
                auth: user_password.as_bytes().to_vec(),
            }),
        );
    }

    fn events(&self, conn: u64) -> Vec<(EventType, String)> {
        self.sent
            .get(&conn)
            .into_iter()
            .flatten()
            .filter_map(|s| match s {
                Sent::Event(e) => {
                    Some((EventType::from_i32(e.event_type).unwrap(), e.path.clone()))
                }
                _ => None,
            })
            .collect()
    }
}

fn create(path: &str, data: &[u8], mode: CreateMode) -> Request {
    Request::Create(CreateRequest {
        path: path.into(),
        data: Some(data.to_vec()),
        acl: Acl::open_unsafe(),
        flags: mode.flags(),
        ttl: None,
    })
}

fn ok(r: (i32, Option<Response>)) -> Response {
    assert_eq!(
        r.0,
        0,
        "expected success, got {:?}",
        ErrorCode::from_i32(r.0)
    );
    r.1.expect("body")
}

fn err(r: (i32, Option<Response>)) -> ErrorCode {
    ErrorCode::from_i32(r.0).unwrap()
}

#[test]
fn a_new_session_gets_an_id_password_and_negotiated_timeout() {
    let mut h = Harness::default();
    let r = h.connect_with(1, 0, vec![0; 16], 1_000_000);
    assert_ne!(r.session_id, 0);
    assert_eq!(r.passwd.len(), 16);
    assert_eq!(r.timeout_ms, 40_000, "clamped to maxSessionTimeout");
}

#[test]
fn create_then_get_returns_the_data_and_a_full_stat() {
    let mut h = Harness::default();
    h.connect(1);
    assert_eq!(
        ok(h.call(1, create("/a", b"hello", CreateMode::Persistent))),
        Response::Create { path: "/a".into() }
    );
    match ok(h.call(
        1,
        Request::GetData {
            path: "/a".into(),
            watch: false,
        },
    )) {
        Response::GetData { data, stat } => {
            assert_eq!(data.as_deref(), Some(&b"hello"[..]));
            assert_eq!(stat.data_length, 5);
            assert_eq!(stat.version, 0);
            assert_eq!(stat.czxid, stat.mzxid);
            assert_eq!(stat.czxid, stat.pzxid);
        }
        other => panic!("{other:?}"),
    }
}

// ZooKeeper Programmer's Guide, "Data Model", "Sequence Nodes -- Unique Naming": %010d of the parent's counter.
#[test]
fn sequential_names_use_the_parents_cversion_with_ten_digits() {
    let mut h = Harness::default();
    h.connect(1);
    ok(h.call(1, create("/q", b"", CreateMode::Persistent)));
    ok(h.call(1, create("/q/x", b"", CreateMode::Persistent)));
    let r = ok(h.call(1, create("/q/item-", b"", CreateMode::PersistentSequential)));
    assert_eq!(
        r,
        Response::Create {
            path: "/q/item-0000000001".into()
        }
    );
    ok(h.call(
        1,
        Request::Delete {
            path: "/q/x".into(),
            version: -1,
        },
    ));
    let r = ok(h.call(1, create("/q/item-", b"", CreateMode::PersistentSequential)));
    // ZooKeeper's counter counts creates only: a delete does not move it,
    // though the cversion clients see (2 * counter - numChildren) does.
    assert_eq!(
        r,
        Response::Create {
            path: "/q/item-0000000002".into()
        }
    );
    match ok(h.call(
        1,
        Request::Exists {
            path: "/q".into(),
            watch: false,
        },
    )) {
        Response::Stat(st) => assert_eq!((st.cversion, st.num_children), (4, 2)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn writes_in_flight_are_seen_by_later_prep_before_they_are_durable() {
    let mut h = Harness::default();
    h.connect(1);
    h.auto_sync = false;
    h.send(1, 1, create("/a", b"", CreateMode::Persistent));
    h.send(1, 2, create("/a/b", b"", CreateMode::Persistent));
    h.send(1, 3, create("/a", b"", CreateMode::Persistent));
    assert_eq!(
        h.sent[&1].len(),
        1,
        "nothing answered before the log is durable"
    );
    h.sync();
    let replies: Vec<(i32, i32)> = h.sent[&1]
        .iter()
        .filter_map(|s| match s {
            Sent::Reply { xid, err, .. } => Some((*xid, *err)),
            _ => None,
        })
        .collect();
    assert_eq!(
        replies,
        vec![(1, 0), (2, 0), (3, ErrorCode::NodeExists.code())],
        "replies leave in request order, the error after the writes before it"
    );
}

#[test]
fn a_read_behind_a_write_of_the_same_session_sees_it() {
    let mut h = Harness::default();
    h.connect(1);
    h.auto_sync = false;
    h.send(1, 1, create("/a", b"v", CreateMode::Persistent));
    h.send(
        1,
        2,
        Request::Exists {
            path: "/a".into(),
            watch: false,
        },
    );
    h.sync();
    match h.sent[&1].last() {
        Some(Sent::Reply { xid: 2, err: 0, .. }) => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn delete_and_set_data_check_versions() {
    let mut h = Harness::default();
    h.connect(1);
    ok(h.call(1, create("/a", b"", CreateMode::Persistent)));
    let set = |v| Request::SetData {
        path: "/a".into(),
        data: Some(b"x".to_vec()),
        version: v,
    };
    assert_eq!(err(h.call(1, set(5))), ErrorCode::BadVersion);
    match ok(h.call(1, set(0))) {
        Response::Stat(s) => assert_eq!(s.version, 1),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        err(h.call(
            1,
            Request::Delete {
                path: "/a".into(),
                version: 0
            }
        )),
        ErrorCode::BadVersion
    );
    ok(h.call(
        1,
        Request::Delete {
            path: "/a".into(),
            version: 1,
        },
    ));
    assert_eq!(
        err(h.call(
            1,
            Request::Delete {
                path: "/a".into(),
                version: -1
            }
        )),
        ErrorCode::NoNode
    );
}

#[test]
fn tree_rules_give_zookeepers_errors() {
    let mut h = Harness::default();
    h.connect(1);
    assert_eq!(
        err(h.call(1, create("/a/b", b"", CreateMode::Persistent))),
        ErrorCode::NoNode
    );
    assert_eq!(
        err(h.call(1, create("a", b"", CreateMode::Persistent))),
        ErrorCode::BadArguments
    );
    // The parent is looked up before the final path is validated, as in
    // ZooKeeper's PrepRequestProcessor: "/a/" under a missing "/a" is NoNode.
    assert_eq!(
        err(h.call(1, create("/a/", b"", CreateMode::Persistent))),
        ErrorCode::NoNode
    );
    ok(h.call(1, create("/a", b"", CreateMode::Persistent)));
    assert_eq!(
        err(h.call(1, create("/a/", b"", CreateMode::Persistent))),
        ErrorCode::BadArguments
    );
    ok(h.call(1, create("/e", b"", CreateMode::Ephemeral)));
    assert_eq!(
        err(h.call(1, create("/e/c", b"", CreateMode::Persistent))),
        ErrorCode::NoChildrenForEphemerals
    );
    ok(h.call(1, create("/p", b"", CreateMode::Persistent)));
    ok(h.call(1, create("/p/c", b"", CreateMode::Persistent)));
    assert_eq!(
        err(h.call(
            1,
            Request::Delete {
                path: "/p".into(),
                version: -1
            }
        )),
        ErrorCode::NotEmpty
    );
    assert_eq!(
        err(h.call(
            1,
            Request::Delete {
                path: "/zookeeper".into(),
                version: -1
            }
        )),
        ErrorCode::BadArguments
    );
    assert_eq!(
        err(h.call(1, Request::Reconfig(Default::default()))),
        ErrorCode::ReconfigDisabled
    );
}

/// ZooKeeper Dynamic Reconfiguration, "Enabling Dynamic Reconfiguration":
/// a standalone server has no membership to change, even with
/// `reconfigEnabled=true` and a `/zookeeper/config` it was given (an
/// imported ZooKeeper tree): Unimplemented, as ZooKeeper's standalone
/// server answers, and nothing changes.
#[test]
fn a_standalone_server_refuses_reconfig_whatever_its_config_node_holds() {
    let mut tree = crate::tree::DataTree::new();
    let imported = b"server.1=127.0.0.1:2888:3888:participant\nserver.2=127.0.0.1:2889:3889:participant\nversion=100000000";
    tree.set_config_node(imported, 0x1_0000_0000, 0);
    let cfg = ServerConfig {
        reconfig_enabled: true,
        super_digest: Some(crate::acl::digest_id("super:pw")),
        ..ServerConfig::default()
    };
    let mut h = Harness::default();
    h.server = Server::recovered(
        cfg,
        tree,
        Vec::new(),
        Default::default(),
        Zxid::ZERO,
        Now::same(1_000_000),
    );
    h.connect(1);
    h.digest_auth(1, "super:pw");
    let remove = Request::Reconfig(wazoo_proto::ReconfigRequest {
        leaving_servers: Some("2".into()),
        cur_config_id: -1,
        ..Default::default()
    });
    assert_eq!(err(h.call(1, remove)), ErrorCode::Unimplemented);
    assert_eq!(
        h.server.tree().get_data("/zookeeper/config").unwrap().0,
        Some(imported.to_vec())
    );
}

#[test]
fn multi_is_all_or_nothing_with_zookeepers_per_op_results() {
    let mut h = Harness::default();
    h.connect(1);
    let r = ok(h.call(
        1,
        Request::Multi(vec![
            create("/m", b"", CreateMode::Persistent),
            create("/m/x", b"", CreateMode::Persistent),
            Request::Delete {
                path: "/nope".into(),
                version: -1,
            },
            create("/m/y", b"", CreateMode::Persistent),
        ]),
    ));
    assert_eq!(
        r,
        Response::Multi(vec![
            OpResult::Error { err: 0 },
            OpResult::Error { err: 0 },
            OpResult::Error {
                err: ErrorCode::NoNode.code()
            },
            OpResult::Error {
                err: ErrorCode::RuntimeInconsistency.code()
            },
        ])
    );
    assert_eq!(
        err(h.call(
            1,
            Request::Exists {
                path: "/m".into(),
                watch: false
            }
        )),
        ErrorCode::NoNode
    );
    let r = ok(h.call(
        1,
        Request::Multi(vec![
            create("/m", b"", CreateMode::Persistent),
            create("/m/x", b"", CreateMode::Persistent),
            Request::Check {
                path: "/m".into(),
                version: 0,
            },
            Request::SetData {
                path: "/m".into(),
                data: Some(b"d".to_vec()),
                version: 0,
            },
        ]),
    ));
    match r {
        Response::Multi(rs) => {
            assert_eq!(rs[0], OpResult::Create { path: "/m".into() });
            assert_eq!(rs[2], OpResult::Check);
            assert!(matches!(rs[3], OpResult::SetData { .. }));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn acl_digest_protects_reads_and_auth_opens_them() {
    let mut h = Harness::default();
    h.connect(1);
    h.connect(2);
    let id = crate::acl::digest_id("alice:secret");
    let acl = vec![Acl::new(wazoo_proto::perms::ALL, "digest", &id)];
    ok(h.call(
        1,
        Request::Create(CreateRequest {
            path: "/s".into(),
            data: Some(b"x".to_vec()),
            acl,
            flags: 0,
            ttl: None,
        }),
    ));
    assert_eq!(
        err(h.call(
            2,
            Request::GetData {
                path: "/s".into(),
                watch: false
            }
        )),
        ErrorCode::NoAuth
    );
    h.digest_auth(2, "alice:secret");
    ok(h.call(
        2,
        Request::GetData {
            path: "/s".into(),
            watch: false,
        },
    ));
}

#[test]
fn ttl_nodes_need_extended_types() {
    let mut h = Harness::new(ServerConfig::default());
    h.connect(1);
    let req = Request::CreateTtl(CreateRequest {
        path: "/t".into(),
        data: Some(vec![]),
        acl: Acl::open_unsafe(),
        flags: CreateMode::PersistentWithTtl.flags(),
        ttl: Some(1000),
    });
    assert_eq!(err(h.call(1, req)), ErrorCode::Unimplemented);
}

// ZooKeeper Programmer's Guide, "Data Model", "Container Nodes": deleted by the server once their last child goes.
#[test]
fn an_emptied_container_is_reaped_by_the_periodic_check() {
    let mut h = Harness::new(ServerConfig {
        container_check_interval_ms: 1000,
        extended_types_enabled: true,
        ..ServerConfig::default()
    });
    h.connect(1);
    let c = Request::CreateContainer(CreateRequest {
        path: "/c".into(),
        data: Some(vec![]),
        acl: Acl::open_unsafe(),
        flags: CreateMode::Container.flags(),
        ttl: None,
    });
    ok(h.call(1, c));
    ok(h.call(1, create("/c/x", b"", CreateMode::Persistent)));
    h.now += 2000;
    h.step(Input::Tick);
    ok(h.call(
        1,
        Request::Exists {
            path: "/c".into(),
            watch: false,
        },
    ));
    ok(h.call(
        1,
        Request::Delete {
            path: "/c/x".into(),
            version: -1,
        },
    ));
    h.now += 2000;
    h.step(Input::Tick);
    assert_eq!(
        err(h.call(
            1,
            Request::Exists {
                path: "/c".into(),
                watch: false
            }
        )),
        ErrorCode::NoNode
    );
}

// ZooKeeper Administrator's Guide, "Performance Tuning Options",
// znode.container.maxNeverUsedIntervalMs: a container that never had a
// child is deleted once it is older than the interval; 0 keeps it.
#[test]
fn a_container_that_never_had_a_child_is_reaped_after_the_never_used_interval() {
    for (never_used_ms, reaped) in [(0, false), (5_000, true)] {
        let mut h = Harness::new(ServerConfig {
            container_check_interval_ms: 1000,
            container_max_never_used_ms: never_used_ms,
            ..ServerConfig::default()
        });
        h.connect(1);
        ok(h.call(
            1,
            Request::CreateContainer(CreateRequest {
                path: "/c".into(),
                data: Some(vec![]),
                acl: Acl::open_unsafe(),
                flags: CreateMode::Container.flags(),
                ttl: None,
            }),
        ));
        let exists = |h: &mut Harness| {
            h.call(
                1,
                Request::Exists {
                    path: "/c".into(),
                    watch: false,
                },
            )
        };
        h.now += 3000;
        h.step(Input::Tick);
        ok(exists(&mut h));
        h.now += 3000;
        h.step(Input::Tick);
        if reaped {
            assert_eq!(err(exists(&mut h)), ErrorCode::NoNode, "{never_used_ms}");
        } else {
            ok(exists(&mut h));
        }
    }
}

#[test]
fn set_watches_reports_what_was_missed_since_the_relative_zxid() {
    let mut h = Harness::default();
    h.connect(1);
    ok(h.call(1, create("/a", b"", CreateMode::Persistent)));
    let z = h.server.last_zxid();
    ok(h.call(
        1,
        Request::SetData {
            path: "/a".into(),
            data: Some(b"x".to_vec()),
            version: -1,
        },
    ));
    h.connect(2);
    h.call(
        2,
        Request::SetWatches(wazoo_proto::SetWatches {
            relative_zxid: z.to_wire(),
            data_watches: vec!["/a".into(), "/gone".into()],
            exist_watches: vec![],
            child_watches: vec![],
        }),
    );
    assert_eq!(
        h.events(2),
        vec![
            (EventType::NodeDataChanged, "/a".into()),
            (EventType::NodeDeleted, "/gone".into())
        ]
    );
}

#[test]
fn unknown_opcodes_get_unimplemented_and_bad_bodies_marshalling_error() {
    let mut h = Harness::default();
    h.connect(1);
    h.step(Input::Malformed { conn: 1, xid: 8 });
    h.step(Input::Unknown {
        conn: 1,
        xid: 7,
        op: 999,
    });
    let tail: Vec<_> = h.sent[&1].iter().skip(1).cloned().collect();
    assert_eq!(
        tail,
        vec![
            Sent::Reply {
                xid: 8,
                err: ErrorCode::MarshallingError.code(),
                body: None
            },
            Sent::Reply {
                xid: 7,
                err: ErrorCode::Unimplemented.code(),
                body: None
            },
        ]
    );
    // As ZooKeeper, an unknown opcode then closes the connection.
    assert_eq!(h.closed, [1]);
}

/// A check is an op of a multi only ("Programmer's Guide, Transactions":
/// multi's ops). Alone it is answered as an unknown opcode, as ZooKeeper
/// 3.9.3 and later answer it (ZOOKEEPER-2623): Unimplemented, then the
/// connection closes; the session stays, and nothing is written.
#[test]
fn a_check_outside_a_multi_is_an_unknown_opcode() {
    let mut h = Harness::default();
    h.connect(1);
    let zxid = h.server.last_zxid();
    h.send(
        1,
        5,
        Request::Check {
            path: "/".into(),
            version: -1,
        },
    );
    let last = h.sent[&1].last().cloned();
    assert_eq!(
        last,
        Some(Sent::Reply {
            xid: 5,
            err: ErrorCode::Unimplemented.code(),
            body: None
        })
    );
    assert_eq!(h.closed, [1]);
    assert_eq!(h.server.last_zxid(), zxid, "a lone check writes nothing");
}

#[test]
fn a_client_ahead_of_the_server_is_refused() {
    let mut h = Harness::default();
    h.step(Input::Connect {
        fresh_password: [0x5a; 16],
        conn: 9,
        peer: None,
        req: ConnectRequest {
            last_zxid_seen: 1 << 40,
            timeout_ms: 30_000,
            passwd: vec![0; 16],
            read_only: Some(false),
            ..Default::default()
        },
    });
    assert!(h.closed.contains(&9));
    assert!(!h.sent.contains_key(&9), "no handshake reply");
}

/// ZooKeeper Programmer's Guide, "ZooKeeper Sessions": the server negotiates
/// a session's timeout within its min/max bounds, and a read-only session
/// (a member without a quorum, read-only mode) is no exception. Its reply
/// once carried 0, which a client takes as a session already gone.
#[test]
fn a_read_only_session_gets_a_negotiated_timeout() {
    let mut h = Harness::new(ServerConfig {
        read_only_enabled: true,
        ..ServerConfig::default()
    });
    h.step(Input::Role(Role::Looking));
    for (conn, asked, got) in [(1, 15_000, 15_000), (2, 10, 4_000), (3, 900_000, 40_000)] {
        h.step(Input::Connect {
            fresh_password: [0x5a; 16],
            conn,
            peer: None,
            req: ConnectRequest {
                timeout_ms: asked,
                passwd: vec![0; 16],
                read_only: Some(true),
                ..Default::default()
            },
        });
        match h.sent.get(&conn).and_then(|v| v.first()) {
            Some(Sent::Connect(r)) => {
                assert_eq!(r.read_only, Some(true), "a read-only session");
                assert_eq!(r.timeout_ms, got, "asked for {asked} ms");
            }
            other => panic!("expected a connect response, got {other:?}"),
        }
    }
}

// ZooKeeper Administrator's Guide, "digest.enabled": the tree's digest is
// logged after every 128th zxid (ZooKeeper's digest log, which `hash`
// prints), and not at all with the key off; the digest the tree keeps as
// it changes is the one computed from its nodes.
#[test]
fn the_digest_is_logged_every_128_zxids_unless_digests_are_off() {
    for enabled in [true, false] {
        let mut h = Harness::new(ServerConfig {
            digest_enabled: enabled,
            ..ServerConfig::default()
        });
        h.connect(1);
        // The session's creation is zxid 1; 127 creates reach zxid 128.
        for i in 0..127 {
            ok(h.call(1, create(&format!("/n{i}"), b"x", CreateMode::Persistent)));
        }
        h.server.tree().check_invariants().unwrap();
        let log: Vec<_> = h.server.digest_log().collect();
        if enabled {
            assert_eq!(log, vec![(Zxid::from_wire(128), h.server.tree().digest())]);
        } else {
            assert!(log.is_empty());
        }
        ok(h.call(1, create("/last", b"", CreateMode::Persistent)));
        assert_eq!(h.server.digest_log().count(), usize::from(enabled));
    }
}

// Administrator's Guide, "Advanced Configuration", snapCount and
// snapSizeLimitInKb: a snapshot is taken after snapCount txns, or once
// the txns logged since the last one reach the size limit, whichever
// comes first; a limit of 0 takes none by size.
#[test]
fn a_snapshot_is_taken_by_the_logs_size_as_well_as_by_its_count() {
    let by_size = |limit: u64| {
        let mut h = Harness::new(ServerConfig {
            snap_count: 1_000,
            snap_size_limit_bytes: limit,
            ..ServerConfig::default()
        });
        h.connect(1);
        for i in 0..20 {
            let path = format!("/n{i}");
            ok(h.call(1, create(&path, &[7u8; 500], CreateMode::Persistent)));
        }
        h.snapshots.len()
    };
    // Each create logs a little over 500 bytes: 20 of them over 10,000.
    let n = by_size(2_000);
    assert!(
        (4..=6).contains(&n),
        "about one snapshot per 2,000 bytes: {n}"
    );
    assert_eq!(by_size(0), 0, "no limit: snapCount alone, not reached");
    let mut h = Harness::new(ServerConfig {
        snap_count: 5,
        snap_size_limit_bytes: 0,
        ..ServerConfig::default()
    });
    h.connect(1);
    for i in 0..20 {
        ok(h.call(1, create(&format!("/m{i}"), b"", CreateMode::Persistent)));
    }
    assert_eq!(h.snapshots.len(), 4, "every 5 txns: {:?}", h.snapshots);
}

// Administrator's Guide, "Advanced Configuration", snapCount: the count
// is of txns logged since the last snapshot, the ones a restart replayed
// included; a member restarted more often than every snapCount txns still
// takes snapshots, and its log and replay stop growing.
#[test]
fn replayed_txns_count_towards_the_next_snapshot() {
    let mut h = Harness::new(ServerConfig {
        snap_count: 5,
        snap_size_limit_bytes: 0,
        ..ServerConfig::default()
    });
    h.server.count_replayed(4, 400);
    h.connect(1);
    assert_eq!(
        h.snapshots.len(),
        1,
        "4 replayed and a session's txn make 5"
    );
}
