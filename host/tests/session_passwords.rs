//! Session passwords cannot be computed from session ids (ZooKeeper
//! Programmer's Guide, "ZooKeeper Sessions": a client re-attaches to its
//! session with the session's id and password).
//!
//! ZooKeeper derives a session's password from its id, and every client
//! sees ids (a node's `ephemeralOwner`, `cons`, `dump`): the hijack below
//! takes the id of another client's ephemeral node, computes ZooKeeper's
//! password and re-attaches. It succeeds on ZooKeeper 3.8 (the oracle,
//! proving the test can see a hijack) and fails on wazoo, standalone and
//! through another member of an ensemble, where the password is random
//! (docs/COMPATIBILITY.md, "Session passwords"). Sessions written before
//! passwords were random keep ZooKeeper's password across the upgrade.

mod common;

use std::net::TcpStream;
use std::time::Duration;

use common::Target;
use wazoo::core::session::zookeeper_password;
use wazoo_proto::{ConnectRequest, ConnectResponse, CreateMode, CreateRequest, Request, Response};
use wazoo_testkit::Flavor;

/// A handshake for `session_id` with `passwd` on a new socket to `addr`:
/// the socket and the server's answer, whatever it is (None if the server
/// closes without one).
fn handshake(addr: &str, session_id: i64, passwd: &[u8]) -> Option<(TcpStream, ConnectResponse)> {
    use std::io::Write;
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut out = Vec::new();
    wazoo_proto::frame::write_record(
        &mut out,
        &ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: 0,
            timeout_ms: 30_000,
            session_id,
            passwd: passwd.to_vec(),
            read_only: Some(false),
        },
    );
    s.write_all(&out).expect("send the handshake");
    let payload = common::read_frame(&mut s)?;
    let resp = <ConnectResponse as wazoo_proto::jute::Jute>::from_bytes(&payload).ok()?;
    Some((s, resp))
}

/// The addresses of a connect string.
fn members(hosts: &str) -> Vec<String> {
    hosts.split(',').map(str::to_string).collect()
}

/// The victim's session on `victim_addr` owns an ephemeral node; the
/// attacker reads its `ephemeralOwner` on `attacker_addr` and re-attaches
/// there with ZooKeeper's password for that id. Returns whether the
/// re-attach was accepted (a connect response with the session and a
/// timeout), after checking that a refusal is ZooKeeper's answer for a
/// wrong password (timeout 0: the client sees its session expired).
fn hijack(victim_addr: &str, attacker_addr: &str, node: &str) -> bool {
    let (mut victim, v) = handshake(victim_addr, 0, &[0; 16]).expect("the victim's session");
    assert!(v.session_id != 0 && v.timeout_ms > 0, "{v:?}");
    let create = Request::Create(CreateRequest {
        path: node.into(),
        data: Some(b"mine".to_vec()),
        acl: wazoo_proto::Acl::open_unsafe(),
        flags: CreateMode::Ephemeral as i32,
        ttl: None,
    });
    assert_eq!(
        common::raw_call(&mut victim, 1, &create).0,
        0,
        "create {node}"
    );

    // The attacker, a client of its own, sees the owner's session id.
    let mut reader = common::raw_session(attacker_addr).expect("the attacker's session");
    let exists = Request::Exists {
        path: node.into(),
        watch: false,
    };
    let owner = match common::raw_call(&mut reader, 1, &exists) {
        (0, Some(Response::Stat(stat))) => stat.ephemeral_owner,
        other => panic!("exists {node}: {other:?}"),
    };
    assert_eq!(owner, v.session_id, "ephemeralOwner shows the session id");

    let computed = zookeeper_password(owner);
    let accepted = match handshake(attacker_addr, owner, &computed) {
        Some((_, r)) if r.session_id == owner && r.timeout_ms > 0 => true,
        Some((_, r)) => {
            assert_eq!((r.session_id, r.timeout_ms), (0, 0), "refused as expired");
            false
        }
        None => panic!("the server closed without answering the handshake"),
    };
    if !accepted {
        // The refusal is the password's: the session's own password
        // re-attaches through the same member, and the node is still there.
        let (mut back, r) = handshake(attacker_addr, owner, &v.passwd).expect("an answer");
        assert_eq!((r.session_id, r.passwd), (owner, v.passwd.clone()));
        assert!(matches!(
            common::raw_call(&mut back, 1, &exists),
            (0, Some(_))
        ));
        let delete = Request::Delete {
            path: node.into(),
            version: -1,
        };
        assert_eq!(common::raw_call(&mut back, 2, &delete).0, 0);
    }
    accepted
}

// ZooKeeper Programmer's Guide, "ZooKeeper Sessions": the oracle. ZooKeeper
// 3.8 computes the password from the id, so the hijack re-attaches.
#[test]
fn zookeeper_lets_a_reader_of_ephemeral_owner_reattach_to_the_session() {
    let hosts = common::shared(Flavor::Zookeeper);
    assert!(
        hijack(&hosts, &hosts, "/hijack-zk"),
        "ZooKeeper's password is computed from the id: the hijack works there"
    );
}

// ZooKeeper Programmer's Guide, "ZooKeeper Sessions": on wazoo the password
// is random, so the computed one is refused as a wrong password is.
#[test]
fn a_standalone_wazoo_refuses_the_password_computed_from_the_id() {
    let hosts = common::shared(Flavor::Wazoo);
    assert!(!hijack(&hosts, &hosts, "/hijack-standalone"));
}

// ZooKeeper Programmer's Guide, "ZooKeeper Sessions": a client moves to
// another server of the ensemble with its id and password. The attacker
// re-attaches through each other member: every member knows the session's
// verifier (replicated with its creation) and refuses the computed password.
#[test]
fn every_member_of_a_wazoo_ensemble_refuses_the_password_computed_from_the_id() {
    let hosts = common::shared(Target {
        flavor: Flavor::Wazoo,
        ensemble: true,
    });
    let m = members(&hosts);
    assert_eq!(m.len(), 3, "{hosts}");
    for (i, victim) in m.iter().enumerate() {
        let attacker = &m[(i + 1) % m.len()];
        assert!(
            !hijack(victim, attacker, &format!("/hijack-ensemble-{i}")),
            "a session on {victim} hijacked through {attacker}"
        );
    }
}

// ZooKeeper Programmer's Guide, "ZooKeeper Sessions": sessions survive a
// restart. A data directory written before passwords were random (a
// version 4 snapshot, whose sessions have no verifier, and a logged
// createSession of the old encoding) loads, and its sessions' clients
// re-attach with the passwords they hold, ZooKeeper's.
#[test]
fn sessions_of_an_old_format_data_dir_reattach_with_their_passwords() {
    use wazoo::core::server::SnapshotJob;
    use wazoo::core::txn::{Txn, TxnHeader, TxnRecord};
    use wazoo_storage::{LogOptions, TxnLog, Zxid};

    let mut server = wazoo_testkit::WazooServer::start(common::options(Flavor::Wazoo))
        .unwrap_or_else(|e| panic!("cannot start wazoo: {e:#}"));
    server.kill();
    let dir = server.data_dir().join(wazoo::member::DATA_SUBDIR);
    std::fs::remove_dir_all(&dir).expect("remove the new data");
    let (snapped, logged) = (0x0100_0000_0000_00a1_i64, 0x0100_0000_0000_00b2_i64);

    // The snapshot at zxid 5: envelope version 4 (sessions: id and timeout
    // only), then the body, which format 5 lays out as 4.
    let tree = wazoo::core::tree::DataTree::new();
    let job = SnapshotJob {
        zxid: Zxid(5),
        tree: tree.snapshot(),
        waits: Default::default(),
        sessions: Vec::new(),
    };
    wazoo_storage::write_snapshot(&dir, Zxid(5), |w| {
        w.write_all(wazoo_storage::SNAPSHOT_MAGIC)?;
        w.write_all(&4u32.to_be_bytes())?;
        w.write_all(&5u64.to_be_bytes())?;
        w.write_all(&1u64.to_be_bytes())?;
        w.write_all(&snapped.to_be_bytes())?;
        w.write_all(&30_000i32.to_be_bytes())?;
        wazoo::core::snapshot::write_snapshot_body(&job, w)
    })
    .expect("write the old snapshot");

    // The log after it: a createSession as wazoo logged it before (tag 1,
    // the timeout alone: a txn without a verifier encodes so).
    let record = TxnRecord {
        header: TxnHeader {
            session_id: logged,
            cxid: 0,
            zxid: 6,
            time_ms: 1_700_000_000_000,
        },
        txn: Txn::CreateSession {
            timeout_ms: 30_000,
            verifier: None,
        },
    }
    .encode();
    assert_eq!(&record[28..32], &1i32.to_be_bytes(), "the old tag");
    let (mut log, _) = TxnLog::open(&dir, LogOptions::default()).expect("open the log");
    log.append(Zxid(6), &record).expect("append");
    log.sync().expect("sync");
    drop(log);

    server
        .restart()
        .unwrap_or_else(|e| panic!("wazoo does not load the old data dir: {e:#}"));
    let addr = server.addr().to_string();
    for id in [snapped, logged] {
        let r = handshake(&addr, id, &[7; 16]).expect("an answer").1;
        assert_eq!((r.session_id, r.timeout_ms), (0, 0), "a wrong password");
        let zk = zookeeper_password(id);
        let r = handshake(&addr, id, &zk).expect("an answer").1;
        assert_eq!(
            (r.session_id, r.timeout_ms > 0, r.passwd),
            (id, true, zk.to_vec()),
            "session 0x{id:x} keeps its password"
        );
    }
}
