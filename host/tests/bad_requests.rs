//! Bad write requests sent to a 3-member ensemble, through raw frames (so
//! no client library checks them first): each gets ZooKeeper's error code,
//! none becomes a txn that a member cannot apply, and every member still
//! serves writes afterwards and after the whole ensemble restarts.
//! Runs against Apache ZooKeeper's ensemble and wazoo's alike.
//!
//! ZooKeeper Programmer's Guide, "Data Model" (path rules, ephemeral nodes,
//! TTL nodes) and "ZooKeeper access control using ACLs"; ZooKeeper
//! Internals, "Atomic Broadcast" (a committed txn is applied by every
//! member).

mod common;

use std::io::Write;
use std::net::{SocketAddr, TcpStream};

use common::read_frame;
use std::time::{Duration, Instant};

use wazoo_proto::jute::{Jute, Reader};
use wazoo_proto::{
    frame, Acl, CreateMode, CreateRequest, ErrorCode, Id, OpCode, OpResult, ReplyHeader, Request,
    Response,
};
use wazoo_testkit::{start_ensemble, Flavor, TestEnsemble};

/// A session on one member over a raw socket.
struct Raw {
    s: TcpStream,
    xid: i32,
}

impl Raw {
    fn connect(addr: SocketAddr) -> Raw {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match Raw::try_connect(addr) {
                Some(r) => return r,
                None if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(200)),
                None => panic!("no session on {addr} within 20 s"),
            }
        }
    }

    fn try_connect(addr: SocketAddr) -> Option<Raw> {
        common::raw_session(addr).map(|s| Raw { s, xid: 0 })
    }

    /// Sends one request and returns its reply's error code.
    fn send(&mut self, req: &Request) -> i32 {
        self.send_for_body(req).0
    }

    /// Sends one request; its reply's error code and body.
    fn send_for_body(&mut self, req: &Request) -> (i32, Vec<u8>) {
        self.xid += 1;
        let mut out = Vec::new();
        frame::write_request(&mut out, self.xid, req);
        self.s.write_all(&out).expect("send a request");
        loop {
            let p = read_frame(&mut self.s).expect("a reply before the connection closes");
            let mut r = Reader::new(&p);
            let h = ReplyHeader::read(&mut r).unwrap();
            if h.xid == self.xid {
                return (h.err, r.rest().to_vec());
            }
        }
    }
}

fn create(path: &str, mode: CreateMode, acl: Vec<Acl>, ttl: Option<i64>) -> CreateRequest {
    CreateRequest {
        path: path.into(),
        data: Some(b"d".to_vec()),
        acl,
        flags: mode.flags(),
        ttl,
    }
}

fn ttl_create(path: &str, ttl: i64) -> Request {
    Request::CreateTtl(create(
        path,
        CreateMode::PersistentWithTtl,
        Acl::open_unsafe(),
        Some(ttl),
    ))
}

/// The bad requests, each with the code ZooKeeper 3.8 answers.
fn bad_requests() -> Vec<(&'static str, Request, ErrorCode)> {
    let open = Acl::open_unsafe;
    vec![
        // The poison txn of old: a TTL one past EphemeralType.TTL's maximum.
        (
            "ttl 2^40",
            ttl_create("/bad/ttl", 1 << 40),
            ErrorCode::BadArguments,
        ),
        ("ttl 0", ttl_create("/bad/ttl", 0), ErrorCode::BadArguments),
        (
            "ttl -5",
            ttl_create("/bad/ttl", -5),
            ErrorCode::BadArguments,
        ),
        // ZooKeeper looks the parent ("/bad/") up before it checks the
        // path: NoNode.
        (
            "empty node name",
            Request::Create(create("/bad//x", CreateMode::Persistent, open(), None)),
            ErrorCode::NoNode,
        ),
        (
            "relative path",
            Request::Create(create("/bad/..", CreateMode::Persistent, open(), None)),
            ErrorCode::BadArguments,
        ),
        (
            "trailing slash",
            Request::Create(create("/bad/", CreateMode::Persistent, open(), None)),
            ErrorCode::BadArguments,
        ),
        (
            "empty ACL list",
            Request::Create(create("/bad/x", CreateMode::Persistent, vec![], None)),
            ErrorCode::InvalidAcl,
        ),
        (
            "unknown ACL scheme",
            Request::Create(create(
                "/bad/x",
                CreateMode::Persistent,
                vec![Acl {
                    perms: 31,
                    id: Id::new("nosuch", "x"),
                }],
                None,
            )),
            ErrorCode::InvalidAcl,
        ),
        (
            "child of an ephemeral",
            Request::Create(create("/bad/eph/x", CreateMode::Persistent, open(), None)),
            ErrorCode::NoChildrenForEphemerals,
        ),
        (
            "setACL with no entries",
            Request::SetAcl {
                path: "/bad".into(),
                acl: vec![],
                version: -1,
            },
            ErrorCode::InvalidAcl,
        ),
        // ZooKeeper Administrator's Guide, "Quotas": with enforceQuota, a
        // create past a hard limit fails.
        (
            "past a hard quota",
            Request::Create(create("/bad/q/two", CreateMode::Persistent, open(), None)),
            ErrorCode::QuotaExceeded,
        ),
        (
            "multi with a bad TTL",
            Request::Multi(vec![
                Request::Create(create("/bad/m1", CreateMode::Persistent, open(), None)),
                ttl_create("/bad/m2", 1 << 40),
            ]),
            ErrorCode::BadArguments,
        ),
    ]
}

/// Writes through every member, and reads the write back on each.
fn every_member_writes(e: &dyn TestEnsemble, tag: &str) {
    for i in 0..e.len() {
        let mut r = Raw::connect(e.addr(i));
        let path = format!("/bad/{tag}-{i}");
        let req = Request::Create(create(
            &path,
            CreateMode::Persistent,
            Acl::open_unsafe(),
            None,
        ));
        assert_eq!(r.send(&req), 0, "member {i} serves writes ({tag})");
        let sync = Request::Sync {
            path: Some(path.clone()),
        };
        assert_eq!(r.send(&sync), 0);
        let exists = Request::Exists { path, watch: false };
        assert_eq!(r.send(&exists), 0, "member {i} reads its write ({tag})");
    }
}

fn absent_everywhere(e: &dyn TestEnsemble, paths: &[&str]) {
    for i in 0..e.len() {
        let mut r = Raw::connect(e.addr(i));
        assert_eq!(
            r.send(&Request::Sync {
                path: Some("/".into())
            }),
            0
        );
        for p in paths {
            let exists = Request::Exists {
                path: p.to_string(),
                watch: false,
            };
            assert_eq!(
                r.send(&exists),
                ErrorCode::NoNode.code(),
                "{p} must not exist on member {i}"
            );
        }
    }
}

/// Creates `/bad/q` with a hard quota of two nodes (itself and one child),
/// the way zkCli's `setquota -N` lays it out.
fn hard_quota_of_two(r: &mut Raw) {
    let open = Acl::open_unsafe;
    for (path, data) in [
        ("/bad/q", ""),
        ("/zookeeper/quota/bad", ""),
        ("/zookeeper/quota/bad/q", ""),
        (
            "/zookeeper/quota/bad/q/zookeeper_limits",
            "count=-1,bytes=-1,countHardLimit=2",
        ),
        ("/zookeeper/quota/bad/q/zookeeper_stats", "count=1,bytes=0"),
        ("/bad/q/one", ""),
    ] {
        let mut c = create(path, CreateMode::Persistent, open(), None);
        c.data = Some(data.as_bytes().to_vec());
        assert_eq!(r.send(&Request::Create(c)), 0, "creating {path}");
    }
}

fn bad_requests_leave_every_member_serving(flavor: Flavor) {
    let opts = match flavor {
        Flavor::Wazoo => common::ensemble_options(flavor).cfg("enforceQuota=true"),
        Flavor::Zookeeper => common::ensemble_options(flavor).arg("-Dzookeeper.enforceQuota=true"),
    };
    let mut e = start_ensemble(flavor, 3, opts)
        .unwrap_or_else(|err| panic!("cannot start a {flavor} ensemble: {err:#}"));
    let mut r = Raw::connect(e.addr(0));
    let setup = Request::Create(create(
        "/bad",
        CreateMode::Persistent,
        Acl::open_unsafe(),
        None,
    ));
    assert_eq!(r.send(&setup), 0);
    let eph = Request::Create(create(
        "/bad/eph",
        CreateMode::Ephemeral,
        Acl::open_unsafe(),
        None,
    ));
    assert_eq!(r.send(&eph), 0);
    hard_quota_of_two(&mut r);

    // Each bad request through each member in turn: followers forward to
    // the leader, whose prep must refuse it.
    for (n, (what, req, want)) in bad_requests().into_iter().enumerate() {
        let member = n % e.len();
        let mut c = if member == 0 {
            None
        } else {
            Some(Raw::connect(e.addr(member)))
        };
        let conn = c.as_mut().unwrap_or(&mut r);
        let (got, body) = conn.send_for_body(&req);
        if let Request::Multi(ops) = &req {
            // ZooKeeper answers a failed multi with per-op results: OK
            // before the failing op, its error, RuntimeInconsistency after.
            assert_eq!(got, 0, "{flavor}: {what}");
            let results = match Response::read_body(OpCode::Multi, &mut Reader::new(&body)) {
                Ok(Response::Multi(results)) => results,
                other => panic!("{flavor}: {what}: not a multi response: {other:?}"),
            };
            let errs: Vec<i32> = results
                .iter()
                .map(|r| match r {
                    OpResult::Error { err } => *err,
                    other => panic!("{flavor}: {what}: an op succeeded: {other:?}"),
                })
                .collect();
            assert_eq!(errs.len(), ops.len());
            assert_eq!(errs.last(), Some(&want.code()), "{flavor}: {what}");
        } else {
            assert_eq!(got, want.code(), "{flavor}: {what} (via member {member})");
        }
        every_member_writes(e.as_ref(), &format!("after-{n}"));
    }
    drop(r);
    absent_everywhere(
        e.as_ref(),
        &[
            "/bad/ttl",
            "/bad/x",
            "/bad/m1",
            "/bad/m2",
            "/bad/eph/x",
            "/bad/q/two",
        ],
    );

    // Every member restarts from its own log and snapshot, and serves.
    for i in 0..e.len() {
        e.restart(i)
            .unwrap_or_else(|err| panic!("{flavor}: member {i} restarts: {err:#}"));
    }
    e.wait_for_leader(Duration::from_secs(30))
        .unwrap_or_else(|err| panic!("{flavor}: a leader after the restart: {err:#}"));
    every_member_writes(e.as_ref(), "after-restart");
    absent_everywhere(e.as_ref(), &["/bad/ttl", "/bad/x", "/bad/m1", "/bad/m2"]);
}

#[test]
fn bad_requests_leave_every_wazoo_member_serving() {
    bad_requests_leave_every_member_serving(Flavor::Wazoo);
}

#[test]
fn bad_requests_leave_every_zookeeper_member_serving() {
    bad_requests_leave_every_member_serving(Flavor::Zookeeper);
}
