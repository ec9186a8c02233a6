//! A connection's unsent bytes: what the core handed the shell and the
//! shell has not reported written. Replies wait past one bound, the
//! connection closes past the other, and the count is exact.
//!
//! ZooKeeper bounds neither; the bounds are wazoo's, so that a client that
//! stops reading cannot grow the member's memory (ZooKeeper Programmer's
//! Guide, "ZooKeeper Watches": a disconnected client gets no events until
//! it reconnects, which is what a closed slow reader sees).

use super::*;
use wazoo_proto::{AddWatchMode, AuthPacket};

fn bounded(reply_max: u64, outbound_max: u64) -> Harness {
    Harness::new(ServerConfig {
        max_unsent_reply_bytes: reply_max,
        max_outbound_bytes: outbound_max,
        ..ServerConfig::default()
    })
}

fn get_data(path: &str) -> Request {
    Request::GetData {
        path: path.into(),
        watch: false,
    }
}

fn replies(h: &Harness, conn: u64) -> Vec<i32> {
    h.sent
        .get(&conn)
        .into_iter()
        .flatten()
        .filter_map(|s| match s {
            Sent::Reply { xid, .. } => Some(*xid),
            _ => None,
        })
        .collect()
}

fn unsent(h: &Harness, conn: u64) -> Option<u64> {
    h.server
        .conns()
        .find(|(id, _)| **id == conn)
        .map(|(_, c)| c.unsent_bytes)
}

/// The stalled client takes everything it was sent.
fn read_all(h: &mut Harness, conn: u64) {
    let bytes = h.stalled.insert(conn, 0).unwrap_or(0);
    h.step(Input::Written { conn, bytes });
}

#[test]
fn pipelined_reads_wait_while_the_clients_unsent_bytes_are_over_the_bound() {
    let mut h = bounded(10_000, 1_000_000);
    h.connect(1);
    ok(h.call(1, create("/big", &[7u8; 4000], CreateMode::Persistent)));
    assert_eq!(
        unsent(&h, 1),
        Some(0),
        "a reading client has nothing unsent"
    );
    let before = replies(&h, 1).len();
    h.stalled.insert(1, 0);
    for xid in 1..=10 {
        h.send(1, xid, get_data("/big"));
    }
    // Each reply is ~4.1 kB: the third takes the unsent bytes past 10,000.
    assert_eq!(replies(&h, 1)[before..], [1, 2, 3]);
    let held = unsent(&h, 1).unwrap();
    assert_eq!(held, h.stalled[&1], "the core counts what the shell holds");
    assert!((10_000..10_000 + 4200).contains(&held), "{held}");
    assert_eq!(
        h.server.outstanding_requests(),
        7,
        "the rest wait, in order"
    );

    // A partial report below the bound lets one more out.
    *h.stalled.get_mut(&1).unwrap() -= 4000;
    h.step(Input::Written {
        conn: 1,
        bytes: 4000,
    });
    assert_eq!(replies(&h, 1)[before..], [1, 2, 3, 4]);
    assert_eq!(unsent(&h, 1), Some(h.stalled[&1]));
    while h.server.outstanding_requests() > 0 {
        read_all(&mut h, 1);
        assert_eq!(unsent(&h, 1), Some(h.stalled[&1]));
    }
    assert_eq!(replies(&h, 1)[before..], (1..=10).collect::<Vec<_>>());
    read_all(&mut h, 1);
    assert_eq!(unsent(&h, 1), Some(0));
    assert!(
        h.closed.is_empty(),
        "a slow reader of replies is not closed"
    );
}

/// A ping is answered at once (a deliberate difference from ZooKeeper,
/// see zk_divergences.rs), but not to a client that does not take its
/// replies: pinging without reading waits at the reply bound as reads do,
/// and never takes the connection to the outbound bound that closes it.
#[test]
fn pings_from_a_client_that_does_not_read_wait_at_the_reply_bound() {
    let mut h = bounded(1_000, 1_000_000);
    h.connect(1);
    h.stalled.insert(1, 0);
    let ping = wazoo_proto::xid::PING;
    for _ in 0..500 {
        h.send(1, ping, Request::Ping);
    }
    let held = unsent(&h, 1).unwrap();
    assert!(
        (1_000..1_100).contains(&held),
        "replies stop at the bound: {held}"
    );
    let answered = replies(&h, 1).len();
    assert!(answered < 100, "{answered} of 500 answered");
    while replies(&h, 1).len() < 500 {
        read_all(&mut h, 1);
    }
    read_all(&mut h, 1);
    assert_eq!(unsent(&h, 1), Some(0));
    assert!(h.closed.is_empty(), "a slow reader of pings is not closed");
}

// ZooKeeper Programmer's Guide, sessions: a session expires when the server
// hears nothing from its client for the timeout. A client that takes what
// it is sent is heard, even while its own requests wait unread.
#[test]
fn a_session_whose_client_takes_its_bytes_does_not_expire() {
    let mut h = bounded(10_000, 1_000_000);
    let session = h.connect_with(1, 0, vec![0; 16], 10_000).session_id;
    h.connect(2);
    ok(h.call(
        1,
        Request::AddWatch {
            path: "/".into(),
            mode: AddWatchMode::PersistentRecursive as i32,
        },
    ));
    // Client 1 sends nothing more (its pings wait unread behind the
    // bound) but takes the events client 2's writes bring it.
    h.stalled.insert(1, 0);
    for i in 0..6 {
        h.now += 5_000;
        ok(h.call(2, create(&format!("/n{i}"), b"", CreateMode::Persistent)));
        read_all(&mut h, 1);
        h.step(Input::Tick);
    }
    assert!(h.server.sessions().is_live(session), "30 s later");
    // One that takes nothing expires.
    for _ in 0..4 {
        h.now += 5_000;
        h.step(Input::Tick);
    }
    assert!(!h.server.sessions().is_live(session));
}

#[test]
fn a_client_that_does_not_read_its_watch_events_is_closed_past_the_outbound_bound() {
    let mut h = bounded(2_000, 20_000);
    h.connect(1);
    h.connect(2);
    let session1 = h
        .server
        .conns()
        .find(|(id, _)| **id == 1)
        .unwrap()
        .1
        .session;
    ok(h.call(
        1,
        Request::AddWatch {
            path: "/".into(),
            mode: AddWatchMode::PersistentRecursive as i32,
        },
    ));
    h.stalled.insert(1, 0);
    let mut created = 0;
    while !h.closed.contains(&1) {
        assert!(created < 1000, "never closed");
        ok(h.call(
            2,
            create(&format!("/n{created}"), b"", CreateMode::Persistent),
        ));
        created += 1;
    }
    // Every event sent counts; the one that would pass the bound is not sent.
    let events = h.events(1).len() as u64;
    assert!(events > 100, "{events} events before the close");
    assert!(h.stalled[&1] <= 20_000, "{} bytes queued", h.stalled[&1]);
    assert!(
        unsent(&h, 1).is_none(),
        "the connection's state is gone at once"
    );
    assert!(
        h.server
            .watches()
            .by_connection()
            .iter()
            .all(|(c, _)| *c != 1),
        "its watches too"
    );
    // Nothing more is queued for it, and the writer is unaffected.
    ok(h.call(2, create("/after", b"", CreateMode::Persistent)));
    assert_eq!(h.events(1).len() as u64, events);
    // The session is not ended: its client may reconnect.
    assert!(h.server.sessions().is_live(session1));
    // The shell's report of the close changes nothing more.
    h.step(Input::Closed { conn: 1 });
    h.step(Input::Written { conn: 1, bytes: 1 });
}

// ZooKeeper 3.8's UnimplementedRequestProcessor: Unimplemented with zxid
// -1, then the connection closes (checked against it in tests/conn_compat.rs).
#[test]
fn an_unknown_opcode_is_answered_in_order_then_the_connection_closes() {
    let mut h = Harness::default();
    h.connect(1);
    h.auto_sync = false;
    h.send(1, 1, create("/a", b"", CreateMode::Persistent));
    h.step(Input::Unknown {
        conn: 1,
        xid: 2,
        op: 9999,
    });
    h.send(1, 3, get_data("/a"));
    assert!(h.closed.is_empty(), "the reply before it is not sent yet");
    h.sync();
    let frames = &h.sent[&1];
    let tail: Vec<(i32, i32)> = frames
        .iter()
        .filter_map(|s| match s {
            Sent::Reply { xid, err, .. } => Some((*xid, *err)),
            _ => None,
        })
        .collect();
    assert_eq!(tail, [(1, 0), (2, ErrorCode::Unimplemented.code())]);
    assert_eq!(h.closed, [1]);
}

// ZooKeeper's IPAuthenticationProvider: `addauth ip` succeeds and the
// connection stays (checked against ZooKeeper 3.8 in tests/conn_compat.rs).
#[test]
fn addauth_ip_succeeds_and_keeps_the_connection() {
    let mut h = Harness::default();
    h.connect(1);
    h.send(
        1,
        wazoo_proto::xid::AUTH,
        Request::Auth(AuthPacket {
            auth_type: 0,
            scheme: "ip".into(),
            auth: b"10.1.2.3".to_vec(),
        }),
    );
    match h.sent[&1].last() {
        Some(Sent::Reply { err, .. }) => assert_eq!(*err, 0),
        other => panic!("{other:?}"),
    }
    assert!(h.closed.is_empty());
    let ids = &h.server.conns().next().unwrap().1.auth.ids;
    assert_eq!(ids.len(), 1, "{ids:?}");
    assert_eq!(
        (ids[0].scheme.as_str(), ids[0].id.as_str()),
        ("ip", "127.0.0.1")
    );
    // Another scheme it does not know still fails and closes, as ZooKeeper.
    h.send(
        1,
        wazoo_proto::xid::AUTH,
        Request::Auth(AuthPacket {
            auth_type: 0,
            scheme: "nope".into(),
            auth: vec![],
        }),
    );
    assert_eq!(h.closed, [1]);
}

// ZooKeeper Administrator's Guide, "Encryption, Authentication,
// Authorization Options" (sessionRequireClientSASLAuth): a connection
// without a SASL identity has its request refused with
// SessionClosedRequireSaslAuth and is closed; one that authenticated
// through the SASL exchange is served.
#[test]
fn enforced_sasl_refuses_unauthenticated_requests_and_serves_authenticated_ones() {
    let mut h = Harness::new(ServerConfig {
        enforce_auth_schemes: vec!["sasl".into()],
        ..ServerConfig::default()
    });
    h.connect(1);
    let r = h.call(
        1,
        Request::Exists {
            path: "/".into(),
            watch: false,
        },
    );
    assert_eq!(r.0, ErrorCode::SessionClosedRequireSaslAuth.code());
    assert_eq!(h.closed, [1]);

    h.connect(2);
    h.step(Input::Sasl {
        conn: 2,
        xid: 1,
        step: crate::server::SaslStep::Done {
            token: b"rspauth=x".to_vec(),
            ids: vec![wazoo_proto::Id::new("sasl", "alice")],
        },
    });
    let ids = &h.server.conns().find(|c| *c.0 == 2).unwrap().1.auth.ids;
    assert!(
        ids.iter().any(|i| i.scheme == "sasl" && i.id == "alice"),
        "{ids:?}"
    );
    let r = h.call(
        2,
        Request::Exists {
            path: "/".into(),
            watch: false,
        },
    );
    assert_eq!(r.0, 0);
    assert_eq!(h.closed, [1]);

    // A failed exchange is answered and closes the connection. The answer
    // is ZooKeeper's: the code (SessionClosedRequireSaslAuth where SASL is
    // required, else AuthFailed) with a null token as its body, which the
    // Java client reads to report the failure rather than a lost connection.
    h.connect(3);
    h.ops.insert((3, 1), OpCode::Sasl);
    h.step(Input::Sasl {
        conn: 3,
        xid: 1,
        step: crate::server::SaslStep::Failed,
    });
    assert_eq!(
        h.sent[&3].last(),
        Some(&Sent::Reply {
            xid: 1,
            err: ErrorCode::SessionClosedRequireSaslAuth.code(),
            body: Some(Response::Sasl(None)),
        })
    );
    assert_eq!(h.closed, [1, 3]);
}
