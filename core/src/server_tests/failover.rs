//! What clients see across a failover, as the whole-member simulation
//! (`sim/`) found it: session expiry across a lost leadership (ZooKeeper
//! Programmer's Guide, "ZooKeeper Sessions": a session whose client is
//! gone expires), a re-attach to a member that has not applied the
//! session's creation yet, refusals that rest on txns a fallen leader may
//! lose, and the same outputs for the same inputs when every connection
//! closes.

use super::*;
use crate::txn::{Txn, TxnHeader, TxnRecord};
use wazoo_proto::jute::{Jute, Reader};
use wazoo_proto::{ConnectRequest, ConnectResponse, ErrorCode, Zxid};

const SESSION: i64 = 0x0200_0000_0000_0001;

fn at(ms: i64) -> Now {
    Now::same(ms)
}

/// The zxids of the closeSession txns for `SESSION` this leader proposes.
fn closes_proposed(s: &mut Server) -> Vec<Zxid> {
    s.take_outputs()
        .into_iter()
        .filter_map(|o| match o {
            Output::Propose { zxid, record } => {
                let r = TxnRecord::decode(&record).expect("a txn");
                (r.header.session_id == SESSION && r.txn == Txn::CloseSession).then_some(zxid)
            }
            _ => None,
        })
        .collect()
}

#[test]
fn a_session_whose_close_was_lost_with_the_leadership_expires_under_the_next_leader() {
    let mut s = Server::new(ServerConfig::default(), at(1_000_000));
    s.set_ensemble();
    s.handle(Input::Role(Role::Follower { leader: 2 }), at(1_000_000));
    let record = TxnRecord {
        header: TxnHeader {
            session_id: SESSION,
            cxid: 0,
            zxid: 0x1_0000_0001,
            time_ms: 0,
        },
        txn: Txn::CreateSession {
            timeout_ms: 4_000,
            verifier: None,
        },
    }
    .encode();
    s.handle(
        Input::Committed {
            zxid: Zxid(0x1_0000_0001),
            record,
        },
        at(1_000_000),
    );
    s.handle(Input::Role(Role::Leader { epoch: 2 }), at(1_000_000));
    // The join grants the new epoch's zxids (core::member).
    s.set_numbering(Numbering::Granted {
        next: Zxid::new(2, 1),
        room: 1_000,
    });
    let _ = s.take_outputs();
    // The client is gone: the leader expires the session...
    s.handle(Input::Tick, at(1_010_000));
    assert_eq!(closes_proposed(&mut s), vec![Zxid(0x2_0000_0001)]);
    // ...and loses its role before the close commits.
    s.handle(Input::Role(Role::Looking), at(1_010_000));
    s.handle(Input::Role(Role::Leader { epoch: 3 }), at(1_010_000));
    // The join grants the new epoch's zxids (core::member).
    s.set_numbering(Numbering::Granted {
        next: Zxid::new(3, 1),
        room: 1_000,
    });
    let _ = s.take_outputs();
    assert!(
        s.sessions().is_live(SESSION),
        "the close never committed: the session lives"
    );
    s.handle(Input::Tick, at(1_012_000));
    assert!(closes_proposed(&mut s).is_empty(), "a full timeout first");
    s.handle(Input::Tick, at(1_020_000));
    assert_eq!(
        closes_proposed(&mut s),
        vec![Zxid(0x3_0000_0001)],
        "the next leader expires it again"
    );
}

// The connections a role change closes are closed in id order, not in a
// hash map's order, so the same inputs give the same outputs and a seed
// of the simulation replays exactly.
#[test]
fn a_role_change_closes_every_connection_in_id_order() {
    let mut s = Server::new(ServerConfig::default(), at(1_000_000));
    s.set_ensemble();
    s.handle(Input::Role(Role::Follower { leader: 2 }), at(1_000_000));
    let conns: Vec<u64> = (0..64).map(|i| (i * 7919) % 1000 + 1).collect();
    for &conn in &conns {
        s.handle(
            Input::Connect {
                fresh_password: [0x5a; 16],
                conn,
                peer: None,
                req: ConnectRequest {
                    timeout_ms: 4_000,
                    passwd: vec![0; 16],
                    ..ConnectRequest::default()
                },
            },
            at(1_000_000),
        );
    }
    let _ = s.take_outputs();
    s.handle(Input::Role(Role::Looking), at(1_000_000));
    let closed: Vec<u64> = s
        .take_outputs()
        .into_iter()
        .filter_map(|o| match o {
            Output::Close { conn } => Some(conn),
            _ => None,
        })
        .collect();
    let mut sorted = conns.clone();
    sorted.sort_unstable();
    assert_eq!(closed, sorted);
}

// ZooKeeper Programmer's Guide, "Consistency Guarantees": writes are
// linearizable. A create refused because of another client's create that
// is proposed but not committed must not be answered before that create
// commits: if the leader fell first and the create were lost, the client
// would have been told NodeExists of a node that never existed. ZooKeeper
// logs the refusal as an error txn behind it; here the answer waits.
#[test]
fn a_refusal_resting_on_an_outstanding_write_waits_for_it() {
    let mut h = Harness::default();
    h.connect(1);
    h.connect(2);
    h.auto_sync = false;
    h.send(1, 1, create("/a", b"", CreateMode::Persistent));
    h.send(2, 1, create("/a", b"", CreateMode::Persistent));
    h.send(
        2,
        2,
        Request::Multi(vec![create("/a", b"", CreateMode::Persistent)]),
    );
    let replies = |h: &Harness| {
        h.sent[&2]
            .iter()
            .filter(|s| matches!(s, Sent::Reply { .. }))
            .count()
    };
    assert_eq!(replies(&h), 0, "nothing answered before /a is durable");
    h.sync();
    assert_eq!(replies(&h), 2);
    assert!(matches!(
        h.sent[&2][1],
        Sent::Reply { xid: 1, err, .. } if err == ErrorCode::NodeExists.code()
    ));
    // With nothing outstanding, a refusal is answered at once.
    h.send(2, 3, create("/a", b"", CreateMode::Persistent));
    assert_eq!(replies(&h), 3);
}

/// The password `SESSION` was created with (on another member).
const SESSION_PASSWORD: [u8; 16] = [0x33; 16];

/// `SESSION`'s creation, with its password's verifier.
fn create_session_txn() -> Txn {
    Txn::CreateSession {
        timeout_ms: 4_000,
        verifier: Some(crate::session::verifier(&SESSION_PASSWORD)),
    }
}

/// A follower gets a re-attach for `SESSION` with `passwd`, a session it
/// has not applied; returns what it asks of the leader (nothing goes to
/// the client before the leader answers).
fn reattach_to_a_follower_behind(s: &mut Server, passwd: &[u8]) -> Vec<PeerMsg> {
    s.set_ensemble();
    s.handle(Input::Role(Role::Follower { leader: 2 }), at(1_000_000));
    let _ = s.take_outputs();
    s.handle(
        Input::Connect {
            fresh_password: [0x5a; 16],
            conn: 5,
            peer: None,
            req: ConnectRequest {
                timeout_ms: 4_000,
                session_id: SESSION,
                passwd: passwd.to_vec(),
                ..ConnectRequest::default()
            },
        },
        at(1_000_000),
    );
    s.take_outputs()
        .into_iter()
        .map(|o| match o {
            Output::ToLeader(m) => m,
            other => panic!("nothing for the client before the leader answers: {other:?}"),
        })
        .collect()
}

fn commit(s: &mut Server, zxid: i64, cxid: i32, txn: Txn) -> Vec<Output> {
    let record = TxnRecord {
        header: TxnHeader {
            session_id: SESSION,
            cxid,
            zxid,
            time_ms: 0,
        },
        txn,
    }
    .encode();
    s.handle(
        Input::Committed {
            zxid: Zxid::from_wire(zxid),
            record,
        },
        at(1_000_000),
    );
    s.take_outputs()
}

fn handshake(out: &[Output]) -> Option<ConnectResponse> {
    out.iter().find_map(|o| match o {
        Output::Send { conn: 5, bytes, .. } => {
            ConnectResponse::read(&mut Reader::new(&bytes[4..])).ok()
        }
        _ => None,
    })
}

// ZooKeeper Programmer's Guide, "ZooKeeper Sessions": a client that moves
// to another server keeps its session. The session was created through
// another member a moment ago and this follower has not applied it yet:
// it asks the leader (ZooKeeper's follower revalidates with its leader)
// instead of telling the client its session expired, and answers once the
// leader's answer, and the session's creation before it, are applied: the
// password is checked then, and only then is the session claimed here.
#[test]
fn a_reattach_to_a_follower_that_has_not_applied_the_session_yet_keeps_it() {
    let mut s = Server::new(ServerConfig::default(), at(1_000_000));
    let asked = reattach_to_a_follower_behind(&mut s, &SESSION_PASSWORD);
    assert_eq!(asked, vec![PeerMsg::Revalidate { session: SESSION }]);
    let out = commit(&mut s, 0x1_0000_0001, 0, create_session_txn());
    let r = handshake(&out).expect("the creation answers the re-attach");
    assert_eq!((r.session_id, r.timeout_ms), (SESSION, 4_000));
    assert_eq!(r.passwd, SESSION_PASSWORD);
    assert!(!out.iter().any(|o| matches!(o, Output::Close { .. })));
    assert!(out.iter().any(|o| matches!(o,
        Output::ToLeader(PeerMsg::Touch { claimed, .. }) if claimed == &[SESSION])));
}

// ZooKeeper Programmer's Guide, "ZooKeeper Sessions": a re-attach needs
// the session's password. ZooKeeper's, computed from the id (which every
// reader sees in ephemeralOwner), is not it: the follower that has not
// applied the session yet answers as for an expired session once it has,
// and claims nothing, so the session's owner keeps it.
#[test]
fn a_reattach_to_a_follower_behind_with_the_computed_password_is_refused() {
    let mut s = Server::new(ServerConfig::default(), at(1_000_000));
    let hijack = crate::session::zookeeper_password(SESSION);
    reattach_to_a_follower_behind(&mut s, &hijack);
    let out = commit(&mut s, 0x1_0000_0001, 0, create_session_txn());
    let r = handshake(&out).expect("an answer");
    assert_eq!((r.session_id, r.timeout_ms), (0, 0));
    assert!(out.iter().any(|o| matches!(o, Output::Close { conn: 5 })));
    assert!(!out
        .iter()
        .any(|o| matches!(o, Output::ToLeader(PeerMsg::Touch { .. }))));
    assert!(s.sessions().is_live(SESSION), "the session lives on");
}

#[test]
fn a_reattach_the_leader_refuses_is_told_the_session_expired() {
    let mut s = Server::new(ServerConfig::default(), at(1_000_000));
    reattach_to_a_follower_behind(&mut s, &SESSION_PASSWORD);
    let out = commit(
        &mut s,
        0x1_0000_0001,
        0,
        Txn::Error {
            errs: vec![ErrorCode::SessionExpired.code()],
        },
    );
    let r = handshake(&out).expect("an answer");
    assert_eq!((r.session_id, r.timeout_ms), (0, 0));
    assert!(out.iter().any(|o| matches!(o, Output::Close { conn: 5 })));
}

/// A member that has just become the leader of epoch 1, its outputs taken.
fn leader_of_epoch_1() -> Server {
    let mut s = Server::new(ServerConfig::default(), at(1_000_000));
    s.set_ensemble();
    s.handle(Input::Role(Role::Leader { epoch: 1 }), at(1_000_000));
    // The join grants the new epoch's zxids (core::member).
    s.set_numbering(Numbering::Granted {
        next: Zxid::new(1, 1),
        room: 1_000,
    });
    let _ = s.take_outputs();
    s
}

// A recipe call that changes nothing is answered once what it read is
// committed: every txn proposed before it. Right after an election no txn
// of the new epoch is proposed yet, and there is nothing to wait for; the
// answer must not wait for the epoch's first write.
#[test]
fn a_recipe_call_that_writes_nothing_right_after_an_election_is_answered() {
    let mut s = leader_of_epoch_1();
    let connect = |s: &mut Server, conn: u64, session_id: i64| {
        s.handle(
            Input::Connect {
                fresh_password: [0x5a; 16],
                conn,
                peer: None,
                req: ConnectRequest {
                    timeout_ms: 4_000,
                    session_id,
                    passwd: vec![0x5a; 16],
                    ..ConnectRequest::default()
                },
            },
            at(1_000_000),
        );
        s.take_outputs()
    };
    // A session, committed in epoch 1.
    let out = connect(&mut s, 1, 0);
    let (zxid, record) = out
        .into_iter()
        .find_map(|o| match o {
            Output::Propose { zxid, record } => Some((zxid, record)),
            _ => None,
        })
        .expect("createSession proposed");
    s.handle(Input::Committed { zxid, record }, at(1_000_000));
    let session = s.sessions().all()[0].id;
    // A new epoch, and the client back.
    s.handle(Input::Role(Role::Looking), at(1_000_000));
    s.handle(Input::Role(Role::Leader { epoch: 2 }), at(1_000_000));
    // The join grants the new epoch's zxids (core::member).
    s.set_numbering(Numbering::Granted {
        next: Zxid::new(2, 1),
        room: 1_000,
    });
    let _ = s.take_outputs();
    assert!(handshake_on(&connect(&mut s, 2, session), 2).is_some());
    s.handle(
        Input::Request {
            conn: 2,
            xid: 1,
            req: wazoo_proto::Request::RecipeCall {
                module: "none".into(),
                method: "m".into(),
                args: Vec::new(),
                guid: String::new(),
            },
        },
        at(1_000_000),
    );
    let answered = s
        .take_outputs()
        .iter()
        .any(|o| matches!(o, Output::Send { conn: 2, .. }));
    assert!(answered, "the call is answered without waiting for a write");
}

fn handshake_on(out: &[Output], conn: u64) -> Option<ConnectResponse> {
    out.iter().find_map(|o| match o {
        Output::Send { conn: c, bytes, .. } if *c == conn => {
            ConnectResponse::read(&mut Reader::new(&bytes[4..])).ok()
        }
        _ => None,
    })
}

// ZooKeeper Programmer's Guide, "ZooKeeper Sessions": the leader answers a
// follower's revalidation of a session with a txn for the session, a no-op
// if it lives and SessionExpired if not; the password is the follower's to
// check, so the leader's answer carries none and decides nothing else.
#[test]
fn a_leader_answers_a_revalidation_with_a_txn_for_the_session() {
    let mut s = leader_of_epoch_1();
    let create = PeerMsg::CreateSession {
        session: SESSION,
        timeout_ms: 4_000,
        verifier: Some(crate::session::verifier(&SESSION_PASSWORD)),
    };
    let proposed = |s: &mut Server, msg: PeerMsg| -> Vec<TxnRecord> {
        s.handle(Input::Peer { from: 2, msg }, at(1_000_000));
        s.take_outputs()
            .into_iter()
            .filter_map(|o| match o {
                Output::Propose { record, .. } => Some(TxnRecord::decode(&record).unwrap()),
                _ => None,
            })
            .collect()
    };
    let created = proposed(&mut s, create);
    assert_eq!(created.len(), 1);
    assert_eq!(created[0].txn, create_session_txn());
    let live = proposed(&mut s, PeerMsg::Revalidate { session: SESSION });
    assert_eq!(live.len(), 1);
    assert_eq!(
        (live[0].header.session_id, live[0].header.cxid),
        (SESSION, 0)
    );
    assert_eq!(live[0].txn, Txn::Noop);
    let unknown = proposed(
        &mut s,
        PeerMsg::Revalidate {
            session: SESSION + 1,
        },
    );
    assert_eq!(unknown.len(), 1);
    assert_eq!(
        unknown[0].txn,
        Txn::Error {
            errs: vec![ErrorCode::SessionExpired.code()]
        }
    );
}
