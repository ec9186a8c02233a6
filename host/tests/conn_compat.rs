//! How a connection ends after requests ZooKeeper refuses, through raw
//! sockets, run on both servers: Apache ZooKeeper 3.8 is the oracle.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;

use common::{read_frame, shared};
use wazoo_proto::frame;
use wazoo_proto::jute::{Jute, Reader};
use wazoo_proto::{AuthPacket, ErrorCode, ReplyHeader, Request};
use wazoo_testkit::Flavor;

fn handshake(hosts: &str) -> TcpStream {
    common::raw_session(hosts).expect("a session")
}

fn is_closed(s: &mut TcpStream) -> bool {
    let mut b = [0u8; 1];
    matches!(s.read(&mut b), Ok(0) | Err(_))
}

fn reply_header(p: &[u8]) -> ReplyHeader {
    ReplyHeader::read(&mut Reader::new(p)).unwrap()
}

fn exists_root(xid: i32) -> Vec<u8> {
    let mut out = Vec::new();
    frame::write_request(
        &mut out,
        xid,
        &Request::Exists {
            path: "/".into(),
            watch: false,
        },
    );
    out
}

fn auth(scheme: &str, credential: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    frame::write_request(
        &mut out,
        wazoo_proto::xid::AUTH,
        &Request::Auth(AuthPacket {
            auth_type: 0,
            scheme: scheme.into(),
            auth: credential.to_vec(),
        }),
    );
    out
}

// ZooKeeper 3.8's UnimplementedRequestProcessor answers an unknown opcode
// with Unimplemented and zxid -1, then closes the connection. (ZooKeeper
// answers it at once, so it may overtake, and lose, the replies to requests
// sent before it; wazoo answers it in order: docs/COMPATIBILITY.md.)
async fn an_unknown_opcode_is_answered_then_the_connection_closes(flavor: Flavor) {
    let hosts = shared(flavor);
    tokio::task::spawn_blocking(move || {
        let mut s = handshake(&hosts);
        s.write_all(&exists_root(4)).unwrap();
        let first = reply_header(&read_frame(&mut s).expect("the exists reply"));
        assert_eq!((first.xid, first.err), (4, 0), "{flavor}");
        let mut out = Vec::new();
        let at = frame::begin(&mut out);
        frame::put_i32(&mut out, 5);
        frame::put_i32(&mut out, 9999);
        frame::finish(&mut out, at);
        s.write_all(&out).unwrap();
        let h = reply_header(&read_frame(&mut s).expect("the unknown opcode's reply"));
        assert_eq!(h.xid, 5, "{flavor}");
        assert_eq!(h.err, ErrorCode::Unimplemented.code(), "{flavor}");
        assert_eq!(h.zxid, -1, "{flavor}");
        assert!(
            is_closed(&mut s),
            "{flavor}: the connection closes after it"
        );
    })
    .await
    .unwrap();
}

// ZooKeeper's IPAuthenticationProvider (ZooKeeper Programmer's Guide,
// "Builtin ACL Schemes", ip): `addauth ip` succeeds, with zxid 0, whatever
// it carries, and the connection goes on.
async fn addauth_ip_succeeds_and_the_connection_goes_on(flavor: Flavor) {
    let hosts = shared(flavor);
    tokio::task::spawn_blocking(move || {
        let mut s = handshake(&hosts);
        s.write_all(&auth("ip", b"10.9.8.7")).unwrap();
        let h = reply_header(&read_frame(&mut s).expect("the auth reply"));
        assert_eq!(
            (h.xid, h.zxid, h.err),
            (wazoo_proto::xid::AUTH, 0, 0),
            "{flavor}"
        );
        s.write_all(&exists_root(6)).unwrap();
        let h = reply_header(&read_frame(&mut s).expect("a reply after addauth ip"));
        assert_eq!((h.xid, h.err), (6, 0), "{flavor}");
    })
    .await
    .unwrap();
}

// A scheme the server has no provider for: AuthFailed, then the
// connection closes.
async fn addauth_with_an_unknown_scheme_fails_and_closes(flavor: Flavor) {
    let hosts = shared(flavor);
    tokio::task::spawn_blocking(move || {
        let mut s = handshake(&hosts);
        s.write_all(&auth("nosuchscheme", b"x")).unwrap();
        let h = reply_header(&read_frame(&mut s).expect("the auth reply"));
        assert_eq!(
            (h.xid, h.err),
            (wazoo_proto::xid::AUTH, ErrorCode::AuthFailed.code()),
            "{flavor}"
        );
        assert!(is_closed(&mut s), "{flavor}");
    })
    .await
    .unwrap();
}

/// A connect frame: ConnectRequest's fields, then `tail` as it is.
fn connect_frame(tail: &[u8]) -> Vec<u8> {
    let mut payload = Vec::new();
    frame::put_i32(&mut payload, 0); // protocolVersion
    payload.extend_from_slice(&0i64.to_be_bytes()); // lastZxidSeen
    frame::put_i32(&mut payload, 30_000); // timeOut
    payload.extend_from_slice(&0i64.to_be_bytes()); // sessionId
    frame::put_i32(&mut payload, 16);
    payload.extend_from_slice(&[0; 16]); // passwd
    payload.extend_from_slice(tail);
    let mut out = (payload.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(&payload);
    out
}

// ZooKeeper 3.8's processConnectRequest reads the ConnectRequest record,
// then the readOnly byte if there is one, and nothing more: bytes after
// them are ignored and the session is made (ZooKeeper Programmer's Guide,
// "ZooKeeper Sessions"). A frame that ends before the password is refused.
async fn a_connect_frame_with_trailing_bytes_makes_a_session(flavor: Flavor) {
    let hosts = shared(flavor);
    tokio::task::spawn_blocking(move || {
        for (what, tail) in [
            ("no readOnly byte", &[][..]),
            ("readOnly and 7 more bytes", &[0, 1, 2, 3, 4, 5, 6, 7][..]),
            ("readOnly and a whole record more", &[0; 40][..]),
        ] {
            let mut s = TcpStream::connect(&hosts).unwrap();
            s.set_read_timeout(Some(std::time::Duration::from_secs(20)))
                .unwrap();
            s.write_all(&connect_frame(tail)).unwrap();
            let p = read_frame(&mut s).unwrap_or_else(|| panic!("{flavor}, {what}: no answer"));
            let resp = wazoo_proto::ConnectResponse::from_bytes(&p).unwrap();
            assert_ne!(resp.session_id, 0, "{flavor}, {what}: a session");
            s.write_all(&exists_root(1)).unwrap();
            let h = reply_header(&read_frame(&mut s).expect("the exists reply"));
            assert_eq!((h.xid, h.err), (1, 0), "{flavor}, {what}");
        }
        // Cut inside the password: no session, the connection closes.
        let mut s = TcpStream::connect(&hosts).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(20)))
            .unwrap();
        let mut cut = connect_frame(&[]);
        cut.truncate(cut.len() - 4);
        let len = (cut.len() - 4) as i32;
        cut[..4].copy_from_slice(&len.to_be_bytes());
        s.write_all(&cut).unwrap();
        assert!(is_closed(&mut s), "{flavor}: a cut connect frame");
    })
    .await
    .unwrap();
}

on_both!(
    a_connect_frame_with_trailing_bytes_makes_a_session,
    an_unknown_opcode_is_answered_then_the_connection_closes,
    addauth_ip_succeeds_and_the_connection_goes_on,
    addauth_with_an_unknown_scheme_fails_and_closes,
);

// ZooKeeper Administrator's Guide, "Advanced Configuration", maxCnxns: a
// limit on all the connections of a client port. ZooKeeper 3.8 closes one
// more as soon as it accepts it, before the ConnectRequest is answered,
// and takes a new one once a connection has gone.
#[test]
fn a_connection_past_max_cnxns_is_closed_and_room_comes_back_when_one_goes() {
    for flavor in [Flavor::Zookeeper, Flavor::Wazoo] {
        let server = flavor
            .start_with(common::options(flavor).cfg("maxCnxns=2"))
            .unwrap_or_else(|e| panic!("cannot start {flavor}: {e:#}"));
        let addr = server.addr();
        let first = common::raw_session(addr).expect("the first session");
        let _second = common::raw_session(addr).expect("the second session");
        assert!(
            common::raw_session(addr).is_none(),
            "{flavor}: a third connection is closed"
        );
        drop(first);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while common::raw_session(addr).is_none() {
            assert!(
                std::time::Instant::now() < deadline,
                "{flavor}: no room 20 s after a connection closed"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}

/// The TCP timer of the server's end of the loopback connection from
/// `client_port` to `server_port`, from /proc/net/tcp and tcp6 (Java
/// listens on IPv6 too): 2 while keepalive is armed on an idle
/// connection, 0 without it.
fn server_side_timer(server_port: u16, client_port: u16) -> Option<u32> {
    let table = ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .collect::<String>();
    let local = format!(":{server_port:04X}");
    let remote = format!(":{client_port:04X}");
    table.lines().find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        (f.get(1)?.ends_with(&local) && f.get(2)?.ends_with(&remote))
            .then(|| u32::from_str_radix(f.get(5)?.split(':').next()?, 16).ok())
            .flatten()
    })
}

// ZooKeeper Administrator's Guide, "Cluster Options", clientTcpKeepAlive:
// the server turns TCP keepalive on for client connections; without it
// they have none.
#[test]
fn client_tcp_keep_alive_arms_keepalive_on_the_servers_end_of_a_connection() {
    for flavor in [Flavor::Zookeeper, Flavor::Wazoo] {
        for on in [false, true] {
            let server = flavor
                .start_with(common::options(flavor).cfg(format!("clientTcpKeepAlive={on}")))
                .unwrap_or_else(|e| panic!("cannot start {flavor}: {e:#}"));
            let addr = server.addr();
            let s = common::raw_session(addr).expect("a session");
            let client_port = s.local_addr().unwrap().port();
            // Idle, so no retransmit timer hides the keepalive one.
            std::thread::sleep(std::time::Duration::from_millis(300));
            let timer = server_side_timer(addr.port(), client_port);
            assert_eq!(
                timer,
                Some(if on { 2 } else { 0 }),
                "{flavor}, clientTcpKeepAlive={on}"
            );
        }
    }
}
