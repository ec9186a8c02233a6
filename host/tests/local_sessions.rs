//! Local sessions (ZooKeeper Administrator's Guide, "Advanced
//! Configuration": `localSessionsEnabled`, `localSessionsUpgradingEnabled`),
//! the same zoo.cfg on a 3-member ZooKeeper 3.8 ensemble and on wazoo's,
//! with raw frames (no client library in the way):
//!
//! - a new session is local to its member: no txn (the leader's zxid does
//!   not move when one opens and closes), `zk_local_sessions` counts it
//!   there, `zk_global_sessions` does not;
//! - its persistent writes are replicated as any session's;
//! - moved to another member before it is upgraded, it has expired;
//! - with upgrading, its first ephemeral makes it global (the ephemeral is
//!   seen on every member with the session as its owner, the session
//!   moves between members, and its close deletes the ephemeral
//!   everywhere); without, the ephemeral fails with
//!   EphemeralOnLocalSession (-120).

mod common;

use std::collections::HashMap;
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use wazoo_proto::{Acl, CreateMode, CreateRequest, ErrorCode, Request, Response, Stat};
use wazoo_testkit::{start_ensemble, Flavor, TestEnsemble};

fn ensemble(flavor: Flavor, upgrading: bool) -> Box<dyn TestEnsemble> {
    let mut o = common::ensemble_options(flavor).cfg("localSessionsEnabled=true");
    if upgrading {
        o = o.cfg("localSessionsUpgradingEnabled=true");
    }
    start_ensemble(flavor, 3, o)
        .unwrap_or_else(|e| panic!("cannot start a {flavor} ensemble: {e:#}"))
}

fn create(path: &str, mode: CreateMode) -> Request {
    Request::Create(CreateRequest {
        path: path.into(),
        data: Some(b"x".to_vec()),
        acl: Acl::open_unsafe(),
        flags: mode.flags(),
        ttl: None,
    })
}

/// `mntr`'s figures on `addr`, by key.
fn mntr(addr: SocketAddr) -> HashMap<String, String> {
    wazoo_testkit::four_letter_word(addr, "mntr")
        .expect("mntr")
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect()
}

fn sessions(addr: SocketAddr) -> (i64, i64) {
    let m = mntr(addr);
    let n = |k: &str| -> i64 {
        m.get(k)
            .unwrap_or_else(|| panic!("mntr has no {k}: {m:?}"))
            .parse()
            .unwrap()
    };
    (n("zk_local_sessions"), n("zk_global_sessions"))
}

/// The last zxid `srvr` shows on `addr`.
fn zxid(addr: SocketAddr) -> i64 {
    let srvr = wazoo_testkit::four_letter_word(addr, "srvr").expect("srvr");
    let hex = srvr
        .lines()
        .find_map(|l| l.strip_prefix("Zxid: 0x"))
        .unwrap_or_else(|| panic!("no Zxid in {srvr}"));
    i64::from_str_radix(hex.trim(), 16).unwrap()
}

/// Waits for the leader at `addr` to apply up to `want` (srvr's zxid),
/// and checks that it went no further. (A sync is a txn in wazoo, not in
/// ZooKeeper: no sync runs while a test counts zxids.)
fn wait_zxid(addr: SocketAddr, want: i64, what: &str) {
    let _ = wazoo_testkit::wait_for(what, Duration::from_secs(20), || {
        (zxid(addr) >= want).then_some(())
    });
    assert_eq!(zxid(addr), want, "{what}");
}

/// A new session on `addr`: its socket, id and password.
fn session(addr: SocketAddr) -> (TcpStream, i64, Vec<u8>) {
    let (s, r) = common::raw_handshake(addr, 0, &[]).expect("a session");
    assert_ne!(r.session_id, 0);
    (s, r.session_id, r.passwd)
}

/// Whether re-attaching to `id` on `addr` is accepted (false: the answer
/// ZooKeeper gives an expired session, timeout 0, or a close).
fn reattach(addr: SocketAddr, id: i64, passwd: &[u8]) -> Option<TcpStream> {
    let (s, r) = common::raw_handshake(addr, id, passwd)?;
    (r.timeout_ms != 0 && r.session_id == id).then_some(s)
}

/// `path`'s stat on member `addr` after a sync, read on a new session
/// (closed after).
fn stat_on(addr: SocketAddr, path: &str) -> Option<Stat> {
    let (mut s, _, _) = session(addr);
    let sync = Request::Sync {
        path: Some("/".into()),
    };
    assert_eq!(common::raw_call(&mut s, 1, &sync).0, 0);
    let exists = Request::Exists {
        path: path.into(),
        watch: false,
    };
    let stat = match common::raw_call(&mut s, 2, &exists) {
        (0, Some(Response::Stat(st))) => Some(st),
        (e, _) if e == ErrorCode::NoNode.code() => None,
        other => panic!("exists {path}: {other:?}"),
    };
    // Closed, so that it does not linger in the member's local sessions.
    close(&mut s, 3);
    stat
}

fn close(s: &mut TcpStream, xid: i32) {
    assert_eq!(common::raw_call(s, xid, &Request::CloseSession).0, 0);
}

/// Member `i`'s index among the others: (leader, a follower, the other).
fn roles(e: &dyn TestEnsemble) -> (usize, usize, usize) {
    let leader = e.wait_for_leader(Duration::from_secs(60)).unwrap();
    (leader, (leader + 1) % 3, (leader + 2) % 3)
}

fn wait_sessions(addr: SocketAddr, what: &str, want: impl Fn((i64, i64)) -> bool) {
    wazoo_testkit::wait_for(what, Duration::from_secs(20), || {
        want(sessions(addr)).then_some(())
    })
    .unwrap_or_else(|e| panic!("{e:#}: {:?}", sessions(addr)));
}

fn upgrading(flavor: Flavor) {
    let e = ensemble(flavor, true);
    let (leader, f, other) = roles(e.as_ref());
    let (la, fa, oa) = (e.addr(leader), e.addr(f), e.addr(other));
    let (_, global0) = sessions(la);
    let z0 = zxid(la);

    // A local session opens and closes on a follower: no txn.
    let (mut s, id, _) = session(fa);
    assert_eq!(sessions(fa).0, 1, "{flavor}: local on its member");
    assert_eq!(
        sessions(la),
        (0, global0),
        "{flavor}: the leader has no trace"
    );
    close(&mut s, 1);
    assert_eq!(zxid(la), z0, "{flavor}: opening and closing logged nothing");
    assert!(reattach(fa, id, &[0; 16]).is_none(), "{flavor}: closed");
    // (wazoo asks the leader about a session a follower does not know
    // with a txn, ZooKeeper without: the count starts again here.)
    let z0 = zxid(la);

    // Its persistent create is replicated like any write.
    let (mut s, id, pw) = session(fa);
    assert_eq!(zxid(la), z0, "{flavor}: opening logged nothing");
    assert_eq!(
        common::raw_call(&mut s, 1, &create("/lsp", CreateMode::Persistent)).0,
        0
    );
    wait_zxid(la, z0 + 1, &format!("{flavor}: the create alone"));
    assert!(stat_on(oa, "/lsp").is_some(), "{flavor}");
    // Not known elsewhere: moved to another member, it has expired.
    assert!(
        reattach(oa, id, &pw).is_none(),
        "{flavor}: a local session does not move"
    );

    // Its first ephemeral upgrades it.
    let (err, _) = common::raw_call(&mut s, 2, &create("/lse", CreateMode::Ephemeral));
    assert_eq!(err, 0, "{flavor}: the ephemeral create");
    wait_sessions(fa, "the session to be global", |(l, _)| l == 0);
    wait_sessions(la, "the leader to know it", |(_, g)| g == global0 + 1);
    let owner = stat_on(oa, "/lse").map(|st| st.ephemeral_owner);
    assert_eq!(owner, Some(id), "{flavor}: owned by the upgraded session");
    // A global session moves; its close ends the ephemeral everywhere.
    let mut moved = reattach(oa, id, &pw).expect("a global session moves");
    close(&mut moved, 1);
    for a in [la, fa, oa] {
        assert!(stat_on(a, "/lse").is_none(), "{flavor}: /lse on {a}");
    }
    wait_sessions(la, "the close to commit", |(_, g)| g == global0);

    // On the leader alike.
    let (mut s, id, _) = session(la);
    assert_eq!(sessions(la).0, 1, "{flavor}: local on the leader");
    let z1 = zxid(la);
    let seq = create("/lse2", CreateMode::EphemeralSequential);
    let Some(Response::Create { path }) = common::raw_call(&mut s, 1, &seq).1 else {
        panic!("{flavor}: the ephemeral sequential create");
    };
    wait_zxid(
        la,
        z1 + 2,
        &format!("{flavor}: createSession, then the create"),
    );
    assert_eq!(sessions(la), (0, global0 + 1), "{flavor}: upgraded");
    assert_eq!(stat_on(la, &path).map(|st| st.ephemeral_owner), Some(id));
}

fn not_upgrading(flavor: Flavor) {
    let e = ensemble(flavor, false);
    let (leader, f, _) = roles(e.as_ref());
    let la = e.addr(leader);
    let (_, global0) = sessions(la);
    for (who, a) in [("leader", la), ("follower", e.addr(f))] {
        // (ZooKeeper logs an error txn for the refused ephemeral, wazoo
        // nothing: the zxid is compared only before any write.)
        let z0 = zxid(la);
        let (mut s, _, _) = session(a);
        assert_eq!(
            zxid(la),
            z0,
            "{flavor}: opening on the {who} logged nothing"
        );
        let eph = create(&format!("/e-{who}"), CreateMode::Ephemeral);
        let (err, _) = common::raw_call(&mut s, 1, &eph);
        assert_eq!(
            ErrorCode::from_i32(err),
            Some(ErrorCode::EphemeralOnLocalSession),
            "{flavor}: an ephemeral on the {who}'s local session"
        );
        let p = create(&format!("/p-{who}"), CreateMode::Persistent);
        assert_eq!(common::raw_call(&mut s, 2, &p).0, 0, "{flavor}");
        assert_eq!(sessions(a).0, 1, "{flavor}: still local on the {who}");
        close(&mut s, 3);
        assert!(stat_on(la, &format!("/p-{who}")).is_some());
        assert!(
            stat_on(la, &format!("/e-{who}")).is_none(),
            "{flavor}: {who}"
        );
        assert_eq!(sessions(la).1, global0, "{flavor}: no global session");
    }
}

#[test]
fn zookeeper_upgrades_a_local_session_on_its_first_ephemeral() {
    upgrading(Flavor::Zookeeper);
}

#[test]
fn wazoo_upgrades_a_local_session_on_its_first_ephemeral() {
    upgrading(Flavor::Wazoo);
}

#[test]
fn zookeeper_refuses_an_ephemeral_on_a_local_session_without_upgrading() {
    not_upgrading(Flavor::Zookeeper);
}

#[test]
fn wazoo_refuses_an_ephemeral_on_a_local_session_without_upgrading() {
    not_upgrading(Flavor::Wazoo);
}
