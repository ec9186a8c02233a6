//! Client connections on I/O threads of their own (`wazoo.client.ioThreads`):
//! the sockets, TLS and frame decoding leave the member's thread, and what a
//! client sees must not change. Each test runs a member with two I/O
//! threads and checks one of ZooKeeper's client guarantees through it, over
//! raw frames (no client library's own ordering in the way).
//!
//! ZooKeeper Programmer's Guide, "ZooKeeper Sessions" and "ZooKeeper
//! Watches" ("Ordered updates", "a client will see a watch event for a
//! znode it is watching before seeing the new data for that znode"); the
//! Administrator's Guide, "Configuration Parameters" (`maxClientCnxns`).

mod common;

use std::io::Write;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use wazoo_proto::jute::{Jute, Reader};
use wazoo_proto::{frame, ReplyHeader, Request, Response};
use wazoo_testkit::{Flavor, ServerOptions, WazooServer};

fn start(extra: &[&str]) -> WazooServer {
    let mut opts: ServerOptions = common::options(Flavor::Wazoo).cfg("wazoo.client.ioThreads=2");
    for line in extra {
        opts = opts.cfg(*line);
    }
    WazooServer::start(opts).expect("start wazoo")
}

fn send(s: &mut std::net::TcpStream, xid: i32, req: &Request) {
    let mut out = Vec::new();
    frame::write_request(&mut out, xid, req);
    s.write_all(&out).expect("send a request");
}

/// The next frame: its header and the rest of its payload.
fn next(s: &mut std::net::TcpStream) -> (ReplyHeader, Vec<u8>) {
    let p = common::read_frame(s).expect("a frame");
    let mut r = Reader::new(&p);
    let h = ReplyHeader::read(&mut r).expect("a reply header");
    (h, r.rest().to_vec())
}

fn set(path: &str, data: Vec<u8>) -> Request {
    Request::SetData {
        path: path.into(),
        data: Some(data),
        version: -1,
    }
}

fn get(path: &str, watch: bool) -> Request {
    Request::GetData {
        path: path.into(),
        watch,
    }
}

fn data_of(body: &[u8]) -> Vec<u8> {
    match Response::read_body(wazoo_proto::OpCode::GetData, &mut Reader::new(body)) {
        Ok(Response::GetData { data, .. }) => data.unwrap_or_default(),
        other => panic!("a getData body: {other:?}"),
    }
}

/// "Ordered updates" and read-your-writes, pipelined: several sessions,
/// each on a connection of its own (dealt to both I/O threads), each sends
/// 1,500 requests without waiting (a setData of its own node, then a
/// getData of it, in turn). Every session gets its replies in its
/// requests' order, each getData shows the setData just before it, and the
/// zxids in the reply headers never go back.
#[test]
fn a_session_s_pipelined_replies_keep_its_order_through_io_threads() {
    let server = start(&[]);
    let addr = server.addr();
    let sessions = 6;
    for i in 0..sessions {
        common::raw_writes(addr, &[common::raw_create(&format!("/o{i}"), Some(b""))]);
    }
    let workers: Vec<_> = (0..sessions)
        .map(|i| {
            std::thread::spawn(move || {
                let path = format!("/o{i}");
                let mut s = common::raw_session(addr).expect("a session");
                let rounds = 750;
                let writer = {
                    let mut s = s.try_clone().expect("clone the socket");
                    let path = path.clone();
                    std::thread::spawn(move || {
                        for k in 0..rounds {
                            send(&mut s, 2 * k + 1, &set(&path, k.to_be_bytes().to_vec()));
                            send(&mut s, 2 * k + 2, &get(&path, false));
                        }
                    })
                };
                let mut last_zxid = 0;
                for k in 0..rounds {
                    let (h, _) = next(&mut s);
                    assert_eq!(
                        (h.xid, h.err),
                        (2 * k + 1, 0),
                        "session {i}: the setData {k}"
                    );
                    assert!(h.zxid >= last_zxid, "session {i}: the zxid went back");
                    last_zxid = h.zxid;
                    let (h, body) = next(&mut s);
                    assert_eq!(
                        (h.xid, h.err),
                        (2 * k + 2, 0),
                        "session {i}: the getData {k}"
                    );
                    assert!(h.zxid >= last_zxid, "session {i}: the zxid went back");
                    last_zxid = h.zxid;
                    assert_eq!(data_of(&body), k.to_be_bytes(), "session {i}: read {k}");
                }
                writer.join().expect("the writer");
            })
        })
        .collect();
    for w in workers {
        w.join().expect("a session's check");
    }
}

/// "ZooKeeper Watches": a client sees the event of a watch before the data
/// that fired it. A watcher sets a data watch and then reads the node over
/// and over, pipelined, while another session changes it: in the watcher's
/// stream the event comes before the first reply that shows the new data.
/// 100 rounds, the two sessions on different I/O threads.
#[test]
fn a_watch_event_comes_before_the_data_that_fired_it_through_io_threads() {
    let server = start(&[]);
    let addr = server.addr();
    common::raw_writes(addr, &[common::raw_create("/w", Some(b"0"))]);
    let mut watcher = common::raw_session(addr).expect("the watcher");
    let mut writer = common::raw_session(addr).expect("the writer");
    let mut xid = 0;
    for round in 1..=100u32 {
        xid += 1;
        let (err, _) = common::raw_call(&mut watcher, xid, &get("/w", true));
        assert_eq!(err, 0);
        let value = round.to_string().into_bytes();
        // The reads go out before the write, and go on after it.
        let reads = 40;
        let first = xid + 1;
        for i in 0..reads {
            send(&mut watcher, first + i, &get("/w", false));
            if i == reads / 4 {
                send(&mut writer, round as i32, &set("/w", value.clone()));
            }
        }
        xid += reads;
        let (h, _) = next(&mut writer);
        assert_eq!((h.xid, h.err), (round as i32, 0));
        let mut event_seen = false;
        let mut answered = 0;
        while answered < reads {
            let (h, body) = next(&mut watcher);
            if h.xid == -1 {
                assert!(!event_seen, "round {round}: two events for one watch");
                event_seen = true;
                continue;
            }
            assert_eq!(
                h.xid,
                first + answered,
                "round {round}: replies out of order"
            );
            answered += 1;
            if data_of(&body) == value {
                assert!(
                    event_seen,
                    "round {round}: the new data came before the watch's event"
                );
            }
        }
        if !event_seen {
            // Every read came before the write: the event follows.
            let (h, _) = next(&mut watcher);
            assert_eq!(h.xid, -1, "round {round}: the watch's event");
        }
    }
}

/// `maxClientCnxns` counts connections on I/O threads as on the member's
/// thread, and a connection that ends there gives its place back; the
/// four-letter words answer on them; the member stops promptly with them.
#[test]
fn connections_on_io_threads_are_counted_reclaimed_and_served_four_letter_words() {
    let mut server = start(&["maxClientCnxns=4"]);
    let addr: SocketAddr = server.addr();
    // The two I/O threads run, beside the member's.
    let pid = server.pid().expect("the server's pid");
    let mut names: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("the server's threads")
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|n| n.trim().to_string())
        .filter(|n| n.starts_with("wazoo-client"))
        .collect();
    names.sort();
    assert_eq!(names, ["wazoo-client-0", "wazoo-client-1"]);
    let held: Vec<_> = (0..4)
        .map(|_| common::raw_session(addr).expect("a session within maxClientCnxns"))
        .collect();
    assert!(
        common::raw_session(addr).is_none(),
        "a fifth connection from one address passes maxClientCnxns=4"
    );
    drop(held);
    // The places come back once the I/O threads see the connections end.
    let deadline = Instant::now() + Duration::from_secs(10);
    let again: Vec<_> = loop {
        let s: Vec<_> = (0..4).filter_map(|_| common::raw_session(addr)).collect();
        if s.len() == 4 {
            break s;
        }
        drop(s);
        assert!(
            Instant::now() < deadline,
            "the closed connections' places came back"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    drop(again);
    std::thread::sleep(Duration::from_millis(300));
    let ruok = wazoo_testkit::four_letter_word(addr, "ruok").expect("ruok");
    assert_eq!(ruok, "imok");
    let started = Instant::now();
    let status = server.stop(Duration::from_secs(10));
    assert!(status.is_some(), "the member stopped on SIGTERM");
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "stopping took {:?}",
        started.elapsed()
    );
}

/// A bad value is refused by name at start.
#[test]
fn a_bad_io_thread_count_is_refused_by_name() {
    for bad in ["wazoo.client.ioThreads=-1", "wazoo.client.ioThreads=100000"] {
        let opts = common::options(Flavor::Wazoo)
            .cfg(bad)
            .startup_timeout(Duration::from_secs(10));
        let err = match WazooServer::start(opts) {
            Ok(_) => panic!("{bad} was taken"),
            Err(e) => format!("{e:#}"),
        };
        assert!(err.contains("wazoo.client.ioThreads"), "{bad}: {err}");
    }
}

/// The reads the I/O threads answer themselves (from the member's published
/// tree) count as the session's activity, as every request does in
/// ZooKeeper ("ZooKeeper Sessions": a session is kept alive by the
/// client's requests, pings only when it is idle): a client that only
/// reads, with no ping, for several session timeouts keeps its session.
/// And they are counted (`wazoo_reads_on_io_threads_total`).
#[test]
fn reads_answered_on_io_threads_keep_the_session_alive_and_are_counted() {
    let metrics_port = wazoo_testkit::free_port();
    let opts = common::options(Flavor::Wazoo)
        .cfg("wazoo.client.ioThreads=2")
        .tick_time_ms(250)
        .session_timeouts_ms(500, 60_000)
        .cfg(format!("metricsProvider.httpPort={metrics_port}"));
    let server = WazooServer::start(opts).expect("start wazoo");
    let addr = server.addr();
    common::raw_writes(addr, &[common::raw_create("/alive", Some(b"x"))]);
    let (mut s, resp) = wazoo_testkit::raw::handshake(addr, 0, &[], 600, Duration::from_secs(10))
        .expect("a session");
    assert!(resp.timeout_ms <= 600, "negotiated {}", resp.timeout_ms);
    // Four session timeouts of reads, 50 ms apart, and no ping.
    let until = Instant::now() + Duration::from_millis(4 * resp.timeout_ms as u64);
    let mut xid = 0;
    while Instant::now() < until {
        xid += 1;
        send(&mut s, xid, &get("/alive", false));
        let (h, body) = next(&mut s);
        assert_eq!((h.xid, h.err), (xid, 0), "read {xid}: the session lives");
        assert_eq!(data_of(&body), b"x");
        std::thread::sleep(Duration::from_millis(50));
    }
    let text = common::get_metrics(metrics_port);
    let answered: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("wazoo_reads_on_io_threads_total "))
        .expect("the counter is exported")
        .trim()
        .parse()
        .expect("a number");
    assert!(
        answered >= (xid / 2) as f64,
        "{answered} of {xid} reads answered on the I/O threads"
    );
}

/// "ZooKeeper access control using ACLs": a read answered on an I/O
/// thread checks the node's ACL against the connection's identities as
/// they are when it is read: NoAuth before `addauth`, the data after.
#[test]
fn a_read_on_an_io_thread_checks_the_connection_s_current_identities() {
    let server = start(&[]);
    let addr = server.addr();
    let auth = |xid| {
        (
            xid,
            Request::Auth(wazoo_proto::AuthPacket {
                auth_type: 0,
                scheme: "digest".into(),
                auth: b"reader:secret".to_vec(),
            }),
        )
    };
    let mut owner = common::raw_session(addr).expect("the owner");
    let (xid, req) = auth(1);
    assert_eq!(common::raw_call(&mut owner, xid, &req).0, 0);
    let create = Request::Create(wazoo_proto::CreateRequest {
        path: "/secret".into(),
        data: Some(b"s3".to_vec()),
        acl: vec![wazoo_proto::Acl {
            perms: wazoo_proto::perms::ALL,
            id: wazoo_proto::Id::new("auth", ""),
        }],
        flags: 0,
        ttl: None,
    });
    assert_eq!(common::raw_call(&mut owner, 2, &create).0, 0);
    let mut reader = common::raw_session(addr).expect("the reader");
    let no_auth = wazoo_proto::ErrorCode::NoAuth.code();
    for xid in 1..=20 {
        let (err, _) = common::raw_call(&mut reader, xid, &get("/secret", false));
        assert_eq!(err, no_auth, "read {xid} before addauth");
    }
    let (xid, req) = auth(21);
    assert_eq!(common::raw_call(&mut reader, xid, &req).0, 0);
    for xid in 22..=40 {
        match common::raw_call(&mut reader, xid, &get("/secret", false)) {
            (0, Some(Response::GetData { data, .. })) => {
                assert_eq!(data.as_deref(), Some(&b"s3"[..]))
            }
            other => panic!("read {xid} after addauth: {other:?}"),
        }
    }
}
