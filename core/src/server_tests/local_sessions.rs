//! Local sessions (ZooKeeper Administrator's Guide, "Advanced
//! Configuration": `localSessionsEnabled`, `localSessionsUpgradingEnabled`):
//! a session local to the member it connected to is opened, closed and
//! expired there without a txn; its first ephemeral upgrades it (a
//! createSession ahead of the create), or fails with
//! EphemeralOnLocalSession when upgrading is off.

use super::*;
use crate::session;
use crate::txn::{Txn, TxnRecord};
use wazoo_proto::Request;

const LEADER: u64 = 2;

/// Member `server_id` of an ensemble in `role`, with local sessions on.
fn member(server_id: u64, role: Role, upgrading: bool) -> Harness {
    let mut h = Harness::new(ServerConfig {
        server_id,
        local_sessions: true,
        local_sessions_upgrading: upgrading,
        ..ServerConfig::default()
    });
    h.replicated = Some(Vec::new());
    h.server.set_ensemble();
    h.step(Input::Role(role));
    if let Role::Leader { epoch } = role {
        h.server.set_numbering(Numbering::Granted {
            next: Zxid::new(epoch, 1),
            room: 1_000,
        });
    }
    h
}

fn follower(upgrading: bool) -> Harness {
    member(1, Role::Follower { leader: LEADER }, upgrading)
}

fn leader(upgrading: bool) -> Harness {
    member(LEADER, Role::Leader { epoch: 1 }, upgrading)
}

/// What went to the other members since the last call.
fn replicated(h: &mut Harness) -> Vec<Output> {
    std::mem::take(h.replicated.as_mut().expect("an ensemble member"))
}

/// The txns a leader proposed since the last call, decoded.
fn proposed(h: &mut Harness) -> Vec<TxnRecord> {
    replicated(h)
        .into_iter()
        .map(|o| match o {
            Output::Propose { record, .. } => TxnRecord::decode(&record).expect("a txn"),
            other => panic!("a leader proposes, got {other:?}"),
        })
        .collect()
}

/// Commits (in order) what the leader proposed since the last call, and
/// returns those txns.
fn commit_proposed(h: &mut Harness) -> Vec<Txn> {
    let mut txns = Vec::new();
    for o in replicated(h) {
        let Output::Propose { zxid, record } = o else {
            panic!("a leader proposes, got {o:?}");
        };
        txns.push(TxnRecord::decode(&record).expect("a txn").txn);
        h.step(Input::Committed { zxid, record });
    }
    txns
}

/// What a follower sent its leader since the last call.
fn to_leader(h: &mut Harness) -> Vec<PeerMsg> {
    replicated(h)
        .into_iter()
        .map(|o| match o {
            Output::ToLeader(m) => m,
            other => panic!("a follower sends to its leader, got {other:?}"),
        })
        .collect()
}

fn body(req: &Request) -> Vec<u8> {
    let mut b = Vec::new();
    req.write_body(&mut b);
    b
}

fn forward(session: i64, cxid: i32, req: &Request, local: bool) -> PeerMsg {
    PeerMsg::Forward {
        session,
        cxid,
        auth: vec![wazoo_proto::Id::new("ip", "127.0.0.1")],
        op: req.opcode().code(),
        body: body(req),
        local,
    }
}

#[test]
fn a_local_session_opens_and_closes_with_no_txn_on_a_follower() {
    let mut h = follower(true);
    let r = h.connect(5);
    assert_ne!(r.session_id, 0, "answered at once");
    assert_eq!(r.session_id >> 56, 1, "this member's id in the top byte");
    assert_eq!(r.timeout_ms, 30_000);
    assert!(
        to_leader(&mut h).is_empty(),
        "the leader hears nothing of it"
    );
    assert!(h.server.sessions().is_local(r.session_id));
    // A persistent create goes to the leader, marked local.
    let req = create("/p", b"", CreateMode::Persistent);
    h.send(5, 7, req.clone());
    assert_eq!(
        to_leader(&mut h),
        vec![forward(r.session_id, 7, &req, true)]
    );
    // Its pings are not reported to the leader either.
    h.send(5, -2, Request::Ping);
    h.step(Input::Tick);
    assert!(to_leader(&mut h).is_empty(), "no touch reported");
    // The close ends it here.
    assert_eq!(err(h.call(5, Request::CloseSession)), ErrorCode::Ok);
    assert!(h.closed.contains(&5));
    assert!(to_leader(&mut h).is_empty(), "no closeSession forwarded");
    assert!(h.server.sessions().get(r.session_id).is_none());
}

#[test]
fn a_local_session_opens_and_closes_with_no_txn_on_the_leader() {
    let mut h = leader(true);
    let r = h.connect(5);
    assert_eq!(r.session_id >> 56, LEADER as i64);
    assert!(proposed(&mut h).is_empty(), "no createSession proposed");
    h.send(5, 7, create("/p", b"", CreateMode::Persistent));
    assert_eq!(
        commit_proposed(&mut h)
            .iter()
            .map(|t| matches!(t, Txn::Create(_)))
            .collect::<Vec<_>>(),
        vec![true],
        "the create alone"
    );
    assert!(h.server.tree().stat("/p").is_some());
    assert_eq!(err(h.call(5, Request::CloseSession)), ErrorCode::Ok);
    assert!(proposed(&mut h).is_empty(), "no closeSession proposed");
    assert!(h.server.sessions().is_empty());
    assert!(h.server.snapshot_job().sessions.is_empty());
}

#[test]
fn the_first_ephemeral_of_a_local_session_on_a_follower_goes_behind_its_createsession() {
    let mut h = follower(true);
    let r = h.connect(5);
    let id = r.session_id;
    let eph = create("/e", b"", CreateMode::Ephemeral);
    h.send(5, 7, eph.clone());
    assert_eq!(
        to_leader(&mut h),
        vec![
            PeerMsg::CreateSession {
                session: id,
                timeout_ms: 30_000,
                verifier: Some(session::verifier(&r.passwd)),
            },
            forward(id, 7, &eph, false),
        ],
        "the session's createSession first, then the create as a global session's"
    );
    assert!(!h.server.sessions().is_local(id));
    // Global now: its next ephemeral goes alone, its close to the leader.
    let eph2 = create("/e2", b"", CreateMode::EphemeralSequential);
    h.send(5, 8, eph2.clone());
    assert_eq!(to_leader(&mut h), vec![forward(id, 8, &eph2, false)]);
    h.send(5, 9, Request::CloseSession);
    assert_eq!(
        to_leader(&mut h),
        vec![forward(id, 9, &Request::CloseSession, false)]
    );
}

#[test]
fn the_first_ephemeral_of_a_local_session_on_the_leader_proposes_createsession_then_create() {
    let mut h = leader(true);
    let r = h.connect(5);
    let id = r.session_id;
    // A multi holding an ephemeral create upgrades too.
    let multi = Request::Multi(vec![
        create("/m", b"", CreateMode::Persistent),
        create("/m/e", b"", CreateMode::Ephemeral),
    ]);
    h.send(5, 7, multi);
    let txns = proposed(&mut h);
    assert_eq!(txns.len(), 2, "{txns:?}");
    assert_eq!(txns[0].header.session_id, id);
    assert_eq!(
        txns[0].txn,
        Txn::CreateSession {
            timeout_ms: 30_000,
            verifier: Some(session::verifier(&r.passwd)),
        }
    );
    assert!(matches!(txns[1].txn, Txn::Multi(_)));
    for rec in txns {
        let zxid = Zxid::from_wire(rec.header.zxid);
        h.step(Input::Committed {
            zxid,
            record: rec.encode(),
        });
    }
    assert!(matches!(
        h.sent[&5].last(),
        Some(Sent::Reply { err: 0, .. })
    ));
    assert_eq!(h.server.tree().ephemerals(id), vec!["/m/e".to_string()]);
    assert_eq!(
        h.server
            .snapshot_job()
            .sessions
            .iter()
            .map(|s| s.id)
            .collect::<Vec<_>>(),
        vec![id],
        "a global session now"
    );
    // Its close is a txn that deletes the ephemeral.
    h.send(5, 8, Request::CloseSession);
    assert_eq!(commit_proposed(&mut h), vec![Txn::CloseSession]);
    assert!(h.server.tree().stat("/m/e").is_none());
    assert!(h.server.tree().stat("/m").is_some());
}

#[test]
fn without_upgrading_an_ephemeral_on_a_local_session_fails_with_ephemeral_on_local_session() {
    for mut h in [follower(false), leader(false)] {
        let r = h.connect(5);
        for req in [
            create("/e", b"", CreateMode::Ephemeral),
            create("/e", b"", CreateMode::EphemeralSequential),
            Request::Multi(vec![create("/e", b"", CreateMode::Ephemeral)]),
        ] {
            assert_eq!(err(h.call(5, req)), ErrorCode::EphemeralOnLocalSession);
        }
        assert!(replicated(&mut h).is_empty(), "nothing replicated");
        assert!(h.server.sessions().is_local(r.session_id), "still local");
        // A container or a TTL node is no ephemeral: no upgrade needed.
        h.send(5, 9, create("/c", b"", CreateMode::Container));
        assert_eq!(replicated(&mut h).len(), 1, "the create goes on");
    }
}

#[test]
fn a_local_session_expires_on_its_member_and_nothing_replicated_changes() {
    let mut h = follower(true);
    let r = h.connect_with(5, 0, vec![0; 16], 4_000);
    assert!(h.server.sessions().is_local(r.session_id));
    h.now += 3_000;
    h.step(Input::Tick);
    assert!(!h.closed.contains(&5), "not before its timeout");
    h.now += 4_000;
    h.step(Input::Tick);
    assert!(h.closed.contains(&5), "its connection is closed");
    assert!(h.server.sessions().get(r.session_id).is_none());
    assert_eq!(h.server.stats.sessions_expired, 1);
    assert!(to_leader(&mut h).is_empty(), "no closeSession, no touch");
    // A client coming back with it is unknown here: the leader is asked,
    // as for any session this member does not know (and answers that it
    // expired, see the next test).
    h.step(Input::Connect {
        conn: 6,
        fresh_password: [1; 16],
        peer: None,
        req: ConnectRequest {
            timeout_ms: 4_000,
            session_id: r.session_id,
            passwd: r.passwd.clone(),
            ..ConnectRequest::default()
        },
    });
    assert_eq!(
        to_leader(&mut h),
        vec![PeerMsg::Revalidate {
            session: r.session_id
        }]
    );
}

#[test]
fn a_global_session_on_a_follower_is_not_expired_there() {
    let mut h = follower(true);
    let r = h.connect_with(5, 0, vec![0; 16], 4_000);
    h.send(5, 7, create("/e", b"", CreateMode::Ephemeral));
    let _ = to_leader(&mut h);
    h.now += 60_000;
    h.step(Input::Tick);
    assert!(!h.closed.contains(&5), "upgraded: the leader expires it");
    assert!(h.server.sessions().is_live(r.session_id));
}

#[test]
fn a_local_session_reattaches_where_it_lives_and_nowhere_else() {
    let mut h = follower(true);
    let r = h.connect(5);
    let id = r.session_id;
    // The same member: it moves to the new connection, the leader hears
    // no claim.
    let again = h.connect_with(6, id, r.passwd.clone(), 30_000);
    assert_eq!(again.session_id, id);
    assert!(h.closed.contains(&5));
    assert!(to_leader(&mut h).is_empty());
    // The leader refuses to revalidate a session local to it, so it
    // cannot move to a follower.
    let mut l = leader(true);
    let lr = l.connect(5);
    l.step(Input::Peer {
        from: 1,
        msg: PeerMsg::Revalidate {
            session: lr.session_id,
        },
    });
    let txns = proposed(&mut l);
    assert_eq!(txns.len(), 1);
    assert_eq!(
        txns[0].txn,
        Txn::Error {
            errs: vec![ErrorCode::SessionExpired.code()]
        }
    );
}

#[test]
fn the_leader_takes_a_followers_local_session_writes_but_no_ephemeral_of_it() {
    let mut l = leader(true);
    let id = (1i64 << 56) | 9; // a follower's, unknown here
    let p = create("/p", b"", CreateMode::Persistent);
    l.step(Input::Peer {
        from: 1,
        msg: forward(id, 3, &p, true),
    });
    let e = create("/e", b"", CreateMode::Ephemeral);
    l.step(Input::Peer {
        from: 1,
        msg: forward(id, 4, &e, true),
    });
    // The same write from a session said to be global is refused.
    l.step(Input::Peer {
        from: 1,
        msg: forward(id, 5, &create("/q", b"", CreateMode::Persistent), false),
    });
    let txns: Vec<Txn> = proposed(&mut l).into_iter().map(|r| r.txn).collect();
    assert_eq!(txns.len(), 3);
    assert!(matches!(&txns[0], Txn::Create(c) if c.path == "/p"));
    assert_eq!(
        txns[1],
        Txn::Error {
            errs: vec![ErrorCode::EphemeralOnLocalSession.code()]
        }
    );
    assert_eq!(
        txns[2],
        Txn::Error {
            errs: vec![ErrorCode::SessionExpired.code()]
        }
    );
}

#[test]
fn a_role_change_ends_local_sessions() {
    let mut h = follower(true);
    let local = h.connect(5).session_id;
    h.step(Input::Role(Role::Looking));
    assert!(h.server.sessions().get(local).is_none());
    assert!(h.closed.contains(&5));
    assert_eq!(h.server.sessions().local_len(), 0);
}

#[test]
fn standalone_ignores_local_sessions_as_zookeeper_does() {
    let mut h = Harness::new(ServerConfig {
        local_sessions: true,
        ..ServerConfig::default()
    });
    let r = h.connect(5);
    assert!(!h.server.sessions().is_local(r.session_id));
    assert_eq!(h.server.snapshot_job().sessions.len(), 1, "logged");
}

// The upgrade's createSession carries cxid 0, as a handshake's does: when
// it commits on the follower, it answers no request, not even one the
// client numbered 0 (that one waits for its own txn).
#[test]
fn an_upgrades_createsession_answers_no_request_of_the_session() {
    let mut h = follower(true);
    let r = h.connect(5);
    h.send(5, 0, create("/e", b"", CreateMode::Ephemeral));
    assert_eq!(to_leader(&mut h).len(), 2);
    let frames = h.sent[&5].len();
    let rec = TxnRecord {
        header: crate::txn::TxnHeader {
            session_id: r.session_id,
            cxid: 0,
            zxid: Zxid::new(1, 1).to_wire(),
            time_ms: 0,
        },
        txn: Txn::CreateSession {
            timeout_ms: 30_000,
            verifier: Some(session::verifier(&r.passwd)),
        },
    };
    h.step(Input::Committed {
        zxid: Zxid::new(1, 1),
        record: rec.encode(),
    });
    assert_eq!(h.sent[&5].len(), frames, "no reply yet");
    assert!(h.server.sessions().is_live(r.session_id));
    assert!(!h.server.sessions().is_local(r.session_id));
}

// wazoo's recipe calls keep their waits and results in the replicated
// table by session until its closeSession txn: a local session's call
// upgrades it first, or fails as an ephemeral would.
#[test]
fn a_recipe_call_needs_a_global_session() {
    let call = Request::RecipeCall {
        module: "latch".into(),
        method: "wait".into(),
        args: Vec::new(),
        guid: String::new(),
    };
    let mut h = follower(true);
    let id = h.connect(5).session_id;
    h.send(5, 7, call.clone());
    let sent = to_leader(&mut h);
    assert!(
        matches!(sent.as_slice(), [PeerMsg::CreateSession { session, .. }, PeerMsg::Forward { local: false, .. }] if *session == id),
        "{sent:?}"
    );
    let mut h = follower(false);
    h.connect(5);
    assert_eq!(err(h.call(5, call)), ErrorCode::EphemeralOnLocalSession);
    assert!(to_leader(&mut h).is_empty());
}
