//! Exact-output tests of one [`Member`] driven by hand: consensus and the
//! pipeline joined, input by input, with the outputs in the order the
//! shell must carry them out.

mod follower;
mod reconfig;

use wazoo_proto::jute::{Jute, Reader};
use wazoo_proto::{
    Acl, ConnectRequest, ConnectResponse, CreateRequest, ReplyHeader, Request, Response, Zxid,
};
use wazoo_zab::{self as zab, Message, Notification, Peer, Restored, ServerState};

use crate::member::{Applied, Input, LoadedSnapshot, Member, Output, SnapshotCodec};
use crate::server::{self, Numbering, PeerMsg, Role, Server, ServerConfig, SnapshotJob};
use crate::session;
use crate::time::Now;
use crate::txn::{CreateTxn, NodeKind, Txn, TxnHeader, TxnRecord};

fn z(e: u32, c: u32) -> Zxid {
    Zxid::new(e, c)
}

/// Both clocks: the wall clock stays at 0 so txns are stamped 0 and
/// session ids are the member id in the top byte, then 0, 1, ...
fn at(mono_ms: i64) -> Now {
    Now {
        mono_ms,
        wall_ms: 0,
    }
}

/// A payload: the zxid, then the core's snapshot body (no sessions).
pub(crate) struct TestCodec;

impl SnapshotCodec for TestCodec {
    fn encode(&self, job: &SnapshotJob) -> Vec<u8> {
        let mut out = job.zxid.0.to_be_bytes().to_vec();
        crate::snapshot::write_snapshot_body(job, &mut out).unwrap();
        out
    }

    fn decode(&self, bytes: &[u8]) -> Result<LoadedSnapshot, String> {
        let (zxid, body) = bytes.split_at_checked(8).ok_or("short")?;
        let zxid = Zxid(u64::from_be_bytes(zxid.try_into().unwrap()));
        let (waits, tree) =
            crate::snapshot::read_snapshot_body(crate::snapshot::SNAPSHOT_FORMAT, body)
                .map_err(|e| e.to_string())?;
        Ok(LoadedSnapshot {
            zxid,
            sessions: Vec::new(),
            waits,
            tree,
        })
    }
}

/// One frame a connection was sent.
#[derive(Debug, PartialEq)]
enum Frame {
    Connect(ConnectResponse),
    /// A reply: its header and its body's bytes.
    Reply(ReplyHeader, Vec<u8>),
}

/// An output with its bytes decoded, to compare whole lists.
#[derive(Debug, PartialEq)]
enum Out {
    Send {
        conn: u64,
        frames: Vec<Frame>,
        replies: u32,
    },
    Close(u64),
    Persist(TxnRecord),
    AcceptedEpoch(u32),
    CurrentEpoch(u32),
    /// `Message::Proposal` with its txn decoded.
    Proposal(zab::ServerId, TxnRecord),
    Peer(zab::ServerId, Message),
    CloseLink(zab::ServerId),
    App(zab::ServerId, PeerMsg),
    Other(String),
}

fn record(bytes: &[u8]) -> TxnRecord {
    TxnRecord::decode(bytes).expect("a txn record")
}

fn frames(conn: u64, mut bytes: &[u8], handshaken: &mut Vec<u64>) -> Vec<Frame> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let n = wazoo_proto::frame::check(bytes, usize::MAX)
            .unwrap()
            .unwrap();
        let payload = &bytes[4..n];
        bytes = &bytes[n..];
        if !handshaken.contains(&conn) {
            handshaken.push(conn);
            out.push(Frame::Connect(
                ConnectResponse::from_bytes(payload).unwrap(),
            ));
        } else {
            let mut r = Reader::new(payload);
            let h = ReplyHeader::read(&mut r).unwrap();
            out.push(Frame::Reply(h, r.rest().to_vec()));
        }
    }
    out
}

/// A member and what its clients have been sent so far.
struct Harness {
    m: Member,
    now: i64,
    handshaken: Vec<u64>,
}

impl Harness {
    fn step(&mut self, input: Input) -> Vec<Out> {
        self.now += 1;
        self.m.handle(input, at(self.now));
        self.outs()
    }

    fn outs(&mut self) -> Vec<Out> {
        let outs = self.m.take_outputs();
        outs.into_iter()
            // A hint for a shell with client I/O threads (the pipeline's
            // tests and the simulation cover it); these lists are about
            // the order of everything else.
            .filter(|o| !matches!(o, Output::LocalReads { .. }))
            .map(|o| match o {
                Output::Send {
                    conn,
                    bytes,
                    replies,
                } => Out::Send {
                    conn,
                    frames: frames(conn, &bytes, &mut self.handshaken),
                    replies,
                },
                Output::Close { conn } => Out::Close(conn),
                Output::Persist { zxid, record: r } => {
                    let r = record(&r);
                    assert_eq!(Zxid::from_wire(r.header.zxid), zxid);
                    Out::Persist(r)
                }
                Output::StoreAcceptedEpoch { epoch } => Out::AcceptedEpoch(epoch),
                Output::StoreCurrentEpoch { epoch } => Out::CurrentEpoch(epoch),
                Output::SendPeer {
                    to,
                    msg: Message::Proposal { zxid, payload },
                } => {
                    let r = record(&payload);
                    assert_eq!(Zxid::from_wire(r.header.zxid), zxid);
                    Out::Proposal(to, r)
                }
                Output::SendPeer { to, msg } => Out::Peer(to, msg),
                Output::CloseLink { peer } => Out::CloseLink(peer),
                Output::SendApp { to, msg } => Out::App(to, msg),
                other => Out::Other(format!("{other:?}")),
            })
            .collect()
    }

    fn client(&mut self, input: server::Input) -> Vec<Out> {
        self.step(Input::Client(input))
    }

    fn zab(&mut self, from: zab::ServerId, msg: Message) -> Vec<Out> {
        self.step(Input::Zab { from, msg })
    }

    fn connect(&mut self, conn: u64) -> Vec<Out> {
        self.client(server::Input::Connect {
            fresh_password: FRESH_PASSWORD,
            conn,
            peer: None,
            req: ConnectRequest {
                protocol_version: 0,
                last_zxid_seen: 0,
                timeout_ms: 30_000,
                session_id: 0,
                passwd: vec![0; 16],
                read_only: None,
            },
        })
    }

    fn request(&mut self, conn: u64, xid: i32, req: Request) -> Vec<Out> {
        self.client(server::Input::Request { conn, xid, req })
    }

    fn state(&self) -> ServerState {
        self.m.peer().expect("an ensemble member").state()
    }
}

fn zab_cfg(me: zab::ServerId, outstanding_proposals_max: usize) -> zab::Config {
    let mut c = zab::Config::new(me, vec![1, 2, 3], vec![]);
    c.tick_ms = 100;
    c.init_limit_ticks = 10;
    c.sync_limit_ticks = 5;
    c.finalize_wait_ms = 0;
    c.outstanding_proposals_max = outstanding_proposals_max;
    c
}

fn member(me: zab::ServerId, outstanding_proposals_max: usize) -> Harness {
    member_with(
        ServerConfig {
            server_id: me,
            ..ServerConfig::default()
        },
        outstanding_proposals_max,
    )
}

fn member_with(scfg: ServerConfig, outstanding_proposals_max: usize) -> Harness {
    let me = scfg.server_id;
    let restored = Restored {
        accepted_epoch: 1,
        current_epoch: 1,
        ..Restored::empty()
    };
    let peer = Peer::new(zab_cfg(me, outstanding_proposals_max), restored, 0).unwrap();
    let server = Server::new(scfg, at(0));
    let mut h = Harness {
        m: Member::new(server, peer, Box::new(TestCodec), at(0)),
        now: 0,
        handshaken: Vec::new(),
    };
    h.outs();
    assert_eq!(h.m.server().role(), Role::Looking);
    // A restarted voter acknowledges no epoch, its own included, within
    // its promise to the leader it may have followed (syncLimit x tickTime
    // here): the tests start after it.
    h.now = 500;
    h
}

fn vote(leader: zab::ServerId, state: ServerState) -> Message {
    Message::Notification(Notification {
        leader,
        zxid: Zxid::ZERO,
        peer_epoch: 1,
        election_epoch: 1,
        state,
    })
}

/// Member 3 of {1,2,3} elected with member 1's vote, through discovery
/// and sync with 1, leading epoch 2 (ZooKeeper Internals, "Atomic
/// Broadcast": the epoch is established once a quorum acknowledged
/// NEWLEADER).
fn leader(outstanding_proposals_max: usize) -> Harness {
    leader_from(member(3, outstanding_proposals_max))
}

/// [`leader`] from member 3's harness `h`.
fn leader_from(mut h: Harness) -> Harness {
    h.zab(1, vote(3, ServerState::Looking));
    assert_eq!(h.state(), ServerState::Leading);
    let info = Message::FollowerInfo {
        accepted_epoch: 1,
        last_zxid: Zxid::ZERO,
        observer: false,
    };
    assert_eq!(
        h.zab(1, info),
        vec![
            Out::AcceptedEpoch(2),
            Out::Peer(
                1,
                Message::LeaderInfo {
                    epoch: 2,
                    confirmed: false
                }
            ),
        ]
    );
    let ack = Message::AckEpoch {
        epoch: 2,
        current_epoch: 1,
        last_zxid: Zxid::ZERO,
    };
    assert_eq!(
        h.zab(1, ack),
        vec![
            Out::CurrentEpoch(2),
            Out::Peer(1, Message::Diff),
            Out::Peer(
                1,
                Message::NewLeader {
                    epoch: 2,
                    zxid: Zxid::ZERO
                }
            ),
        ]
    );
    assert_eq!(
        h.zab(1, Message::AckNewLeader { epoch: 2 }),
        vec![Out::Peer(1, Message::UpToDate)]
    );
    assert_eq!(h.m.server().role(), Role::Leader { epoch: 2 });
    h
}

fn header(session_id: i64, cxid: i32, zxid: Zxid) -> TxnHeader {
    TxnHeader {
        session_id,
        cxid,
        zxid: zxid.to_wire(),
        time_ms: 0,
    }
}

/// The password the shell's randomness gives every new session here.
const FRESH_PASSWORD: [u8; 16] = [0x5a; 16];

fn create_session(session: i64, zxid: Zxid) -> TxnRecord {
    TxnRecord {
        header: header(session, 0, zxid),
        txn: Txn::CreateSession {
            timeout_ms: 30_000,
            verifier: Some(session::verifier(&FRESH_PASSWORD)),
        },
    }
}

fn create(path: &str) -> Request {
    Request::Create(CreateRequest {
        path: path.into(),
        data: Some(b"x".to_vec()),
        acl: Acl::open_unsafe(),
        flags: 0,
        ttl: None,
    })
}

fn connected(session: i64) -> Frame {
    Frame::Connect(ConnectResponse {
        protocol_version: 0,
        timeout_ms: 30_000,
        session_id: session,
        passwd: FRESH_PASSWORD.to_vec(),
        read_only: None,
    })
}

/// A reply frame as the pipeline writes it.
fn reply(xid: i32, zxid: Zxid, err: i32, body: &Response) -> Frame {
    let mut bytes = Vec::new();
    wazoo_proto::frame::write_reply(&mut bytes, xid, zxid.to_wire(), err, body);
    let mut r = Reader::new(&bytes[4..]);
    let h = ReplyHeader::read(&mut r).unwrap();
    Frame::Reply(h, r.rest().to_vec())
}

/// The leader's session for connection 1, committed at 2:1: proposed,
/// durable here, acknowledged by 1, then answered and committed.
fn leader_with_session(outstanding_proposals_max: usize) -> (Harness, i64) {
    leader_with_session_from(leader(outstanding_proposals_max))
}

/// [`leader_with_session`] from leader `h`.
fn leader_with_session_from(mut h: Harness) -> (Harness, i64) {
    let session = 3 << 56;
    assert_eq!(
        h.connect(1),
        vec![
            Out::Persist(create_session(session, z(2, 1))),
            Out::Proposal(1, create_session(session, z(2, 1))),
        ]
    );
    assert!(h.step(Input::Durable { zxid: z(2, 1) }).is_empty());
    // ZooKeeper Internals, "Atomic Broadcast": delivered once a quorum (the
    // leader and 1) logged it; the client hears before the COMMIT goes out,
    // in the order consensus delivered and committed.
    assert_eq!(
        h.zab(1, Message::Ack { zxid: z(2, 1) }),
        vec![
            Out::Send {
                conn: 1,
                frames: vec![connected(session)],
                replies: 0
            },
            Out::Peer(1, Message::Commit { zxid: z(2, 1) }),
        ]
    );
    (h, session)
}

fn create_txn(session: i64, xid: i32, zxid: Zxid, path: &str, parent_cversion: i32) -> TxnRecord {
    TxnRecord {
        header: header(session, xid, zxid),
        txn: Txn::Create(CreateTxn {
            path: path.into(),
            data: Some(b"x".to_vec()),
            acl: Acl::open_unsafe(),
            ephemeral_owner: 0,
            parent_cversion,
            kind: NodeKind::Regular,
        }),
    }
}

#[test]
fn a_leader_proposes_a_write_and_answers_it_once_a_quorum_has_it() {
    let (mut h, session) = leader_with_session(100);
    let create_a = create_txn(session, 7, z(2, 2), "/a", 1);
    assert_eq!(
        h.request(1, 7, create("/a")),
        vec![Out::Persist(create_a.clone()), Out::Proposal(1, create_a),]
    );
    assert!(h.zab(1, Message::Ack { zxid: z(2, 2) }).is_empty());
    assert_eq!(
        h.step(Input::Durable { zxid: z(2, 2) }),
        vec![
            Out::Send {
                conn: 1,
                frames: vec![reply(
                    7,
                    z(2, 2),
                    0,
                    &Response::Create { path: "/a".into() }
                )],
                replies: 1
            },
            Out::Peer(1, Message::Commit { zxid: z(2, 2) }),
        ]
    );
    assert_eq!(h.m.server().last_zxid(), z(2, 2));
}

// The journal an observer asks for (the simulation's checkers) lists each
// txn consensus delivered, once, when it is delivered, and changes no
// output: the same steps give the same outputs as in the test above.
#[test]
fn the_applied_journal_lists_each_delivered_txn_once_and_changes_no_output() {
    let (mut h, session) = leader_with_session(100);
    assert!(h.m.take_applied().is_empty(), "no journal until asked for");
    h.m.observe_applied();
    let create_a = create_txn(session, 7, z(2, 2), "/a", 1);
    assert_eq!(
        h.request(1, 7, create("/a")),
        vec![
            Out::Persist(create_a.clone()),
            Out::Proposal(1, create_a.clone())
        ]
    );
    assert!(h.zab(1, Message::Ack { zxid: z(2, 2) }).is_empty());
    assert!(h.m.take_applied().is_empty(), "proposed, not delivered yet");
    assert_eq!(h.step(Input::Durable { zxid: z(2, 2) }).len(), 2);
    assert_eq!(
        h.m.take_applied(),
        vec![Applied::Txn {
            zxid: z(2, 2),
            record: zab::Payload::from(create_a.encode()),
        }]
    );
    assert!(h.m.take_applied().is_empty(), "taken once");
}

// ZooKeeper Internals, "Atomic Broadcast": a leader that cannot carry a
// proposal gives up leading, and ZooKeeper Programmer's Guide, "ZooKeeper
// Sessions": its clients lose the connection and reconnect elsewhere.
// The refused write gets no reply, no txn, no proposal: nothing of it
// reaches the log, a follower or a later prep.
#[test]
fn a_write_consensus_refuses_changes_nothing_and_the_leader_steps_down() {
    let (mut h, session) = leader_with_session(1);
    let create_a = create_txn(session, 7, z(2, 2), "/a", 1);
    assert_eq!(
        h.request(1, 7, create("/a")),
        vec![Out::Persist(create_a.clone()), Out::Proposal(1, create_a),]
    );
    // 2:2 awaits a quorum and the window holds one: /b is refused.
    let outs = h.request(1, 8, create("/b"));
    assert_eq!(h.state(), ServerState::Looking);
    assert_eq!(h.m.server().role(), Role::Looking);
    let looking = |to| {
        Out::Peer(
            to,
            Message::Notification(Notification {
                leader: 3,
                zxid: z(2, 2),
                peer_epoch: 2,
                election_epoch: 2,
                state: ServerState::Looking,
            }),
        )
    };
    assert_eq!(
        outs,
        vec![Out::CloseLink(1), Out::Close(1), looking(1), looking(2)]
    );
    assert!(h.m.fatal().is_none(), "a refusal never stops the member");
    // The client reconnects to another member: this one serves no one
    // until it has a role again.
    assert_eq!(h.connect(2), vec![Out::Close(2)]);
}

// A new session is a txn too: one the leader cannot propose is not added
// to the session table, the connection is closed unanswered, and the
// leader steps down.
#[test]
fn a_new_session_consensus_refuses_is_closed_unanswered() {
    let (mut h, _) = leader_with_session(1);
    h.request(1, 7, create("/a"));
    let outs = h.connect(2);
    assert_eq!(
        &outs[..3],
        &[Out::Close(2), Out::CloseLink(1), Out::Close(1)]
    );
    assert_eq!(h.m.server().sessions().len(), 1, "only the committed one");
    assert_eq!(h.state(), ServerState::Looking);
}

// Backpressure is a role change, never a stop: the member elects again,
// leads a new epoch, and its txns are numbered by consensus from there.
#[test]
fn backpressure_never_stops_the_member_it_leads_again() {
    let (mut h, _) = leader_with_session(1);
    h.request(1, 7, create("/a"));
    h.request(1, 8, create("/b"));
    assert_eq!(h.state(), ServerState::Looking);
    let vote = Message::Notification(Notification {
        leader: 3,
        zxid: z(2, 2),
        peer_epoch: 2,
        election_epoch: 2,
        state: ServerState::Looking,
    });
    h.zab(1, vote);
    assert_eq!(h.state(), ServerState::Leading);
    // Its own log holds 2:2 durably before it vouches for it.
    h.step(Input::Durable { zxid: z(2, 2) });
    let info = Message::FollowerInfo {
        accepted_epoch: 2,
        last_zxid: z(2, 1),
        observer: false,
    };
    h.zab(1, info);
    let ack = Message::AckEpoch {
        epoch: 3,
        current_epoch: 2,
        last_zxid: z(2, 1),
    };
    h.zab(1, ack);
    h.zab(1, Message::AckNewLeader { epoch: 3 });
    assert_eq!(h.m.server().role(), Role::Leader { epoch: 3 });
    let outs = h.connect(3);
    let session = (3 << 56) + 1;
    assert_eq!(
        outs,
        vec![
            Out::Persist(create_session(session, z(3, 1))),
            Out::Proposal(1, create_session(session, z(3, 1))),
        ]
    );
    assert!(h.m.fatal().is_none());
}

// The order of a role change against what was pending: a tick that costs
// the leader its quorum (ZooKeeper Internals, "Atomic Broadcast": a leader
// that does not hear from a quorum abandons its epoch; here its lease ran
// out, docs/ARCHITECTURE.md, "Timing model")
// reaches the pipeline before the pipeline's own tick, so the expired
// session is not closed by a leader that no longer leads; the link goes,
// then the client connection, then the election starts.
#[test]
fn a_role_change_reaches_the_pipeline_in_its_place() {
    let (mut h, _) = leader_with_session(100);
    // Far past both the session's timeout and syncLimit.
    h.now = 100_000;
    let outs = h.step(Input::Tick);
    let looking = |to| {
        Out::Peer(
            to,
            Message::Notification(Notification {
                leader: 3,
                zxid: z(2, 1),
                peer_epoch: 2,
                election_epoch: 2,
                state: ServerState::Looking,
            }),
        )
    };
    assert_eq!(
        outs,
        vec![Out::CloseLink(1), Out::Close(1), looking(1), looking(2)]
    );
    assert_eq!(h.m.server().sessions().len(), 1, "no expiry was proposed");
}

// A standalone member is the pipeline alone: it persists its own txns,
// numbered after the last one, and answers once they are durable.
#[test]
fn a_standalone_member_persists_then_answers() {
    let mut h = Harness {
        m: Member::standalone(Server::new(
            ServerConfig {
                server_id: 1,
                ..ServerConfig::default()
            },
            at(0),
        )),
        now: 0,
        handshaken: Vec::new(),
    };
    let session = 1 << 56;
    let outs = h.connect(1);
    assert_eq!(outs, vec![Out::Persist(create_session(session, Zxid(1)))]);
    assert_eq!(
        h.step(Input::Durable { zxid: Zxid(1) }),
        vec![Out::Send {
            conn: 1,
            frames: vec![connected(session)],
            replies: 0
        }]
    );
    assert_eq!(
        h.request(1, 7, create("/a")),
        vec![Out::Persist(create_txn(session, 7, Zxid(2), "/a", 1))]
    );
    assert!(h.m.peer().is_none());
}

// The pipeline alone, numbered by hand: a txn refused for want of a zxid
// leaves nothing a later prep sees (ZooKeeper's outstanding changes hold
// only txns that were proposed), and its request is never answered.
#[test]
fn a_refused_txn_leaves_nothing_for_later_preps() {
    let mut s = Server::new(
        ServerConfig {
            server_id: 3,
            ..ServerConfig::default()
        },
        at(0),
    );
    s.set_ensemble();
    s.handle(server::Input::Role(Role::Leader { epoch: 2 }), at(1));
    let session = 3 << 56;
    s.set_numbering(Numbering::Granted {
        next: z(2, 1),
        room: 1,
    });
    s.handle(
        server::Input::Connect {
            fresh_password: FRESH_PASSWORD,
            conn: 1,
            peer: None,
            req: ConnectRequest {
                protocol_version: 0,
                last_zxid_seen: 0,
                timeout_ms: 30_000,
                session_id: 0,
                passwd: vec![0; 16],
                read_only: None,
            },
        },
        at(2),
    );
    let rec = create_session(session, z(2, 1));
    let outs = s.take_outputs();
    assert!(
        matches!(&outs[..], [server::Output::Propose { zxid, record }]
            if *zxid == z(2, 1) && *record == rec.encode()),
        "{outs:?}"
    );
    s.handle(
        server::Input::Committed {
            zxid: z(2, 1),
            record: rec.encode(),
        },
        at(3),
    );
    s.take_outputs();

    s.set_numbering(Numbering::Refused("too many outstanding proposals".into()));
    let req = |xid| server::Input::Request {
        conn: 1,
        xid,
        req: create("/b"),
    };
    s.handle(req(8), at(4));
    let outs = s.take_outputs();
    assert!(
        matches!(&outs[..], [server::Output::StepDown { why }] if why == "too many outstanding proposals"),
        "{outs:?}"
    );
    // Had consensus room again, the same create preps as if the refused
    // one never happened: /b is not there and the parent's counter is
    // where the committed state left it.
    s.set_numbering(Numbering::Granted {
        next: z(2, 2),
        room: 1,
    });
    s.handle(req(9), at(5));
    let b = create_txn(session, 9, z(2, 2), "/b", 1);
    let outs = s.take_outputs();
    assert!(
        matches!(&outs[..], [server::Output::Propose { zxid, record }]
            if *zxid == z(2, 2) && *record == b.encode()),
        "{outs:?}"
    );
    s.handle(
        server::Input::Committed {
            zxid: z(2, 2),
            record: b.encode(),
        },
        at(6),
    );
    let outs = s.take_outputs();
    let mut sent = Vec::new();
    for o in outs {
        if let server::Output::Send { bytes, .. } = o {
            sent.extend(frames(1, &bytes, &mut vec![1]));
        }
    }
    assert_eq!(
        sent,
        vec![reply(
            9,
            z(2, 2),
            0,
            &Response::Create { path: "/b".into() }
        )],
        "only the proposed create is answered"
    );
}
