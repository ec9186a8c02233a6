//! Bad input on the wire, through raw sockets: ZooKeeper's
//! answer or a closed connection, never a crash. Each case runs on both.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::{read_frame, shared};
use wazoo_proto::frame;
use wazoo_proto::jute::{Jute, Reader};
use wazoo_proto::{ReplyHeader, Request};

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

async fn oversized_frame_closes_the_connection(flavor: wazoo_testkit::Flavor) {
    let hosts = shared(flavor);
    tokio::task::spawn_blocking(move || {
        let mut s = handshake(&hosts);
        s.write_all(&(2_000_000i32).to_be_bytes()).unwrap();
        assert!(
            is_closed(&mut s),
            "{flavor}: a frame over jute.maxbuffer closes the connection"
        );
    })
    .await
    .unwrap();
}

async fn unknown_opcode_gets_unimplemented(flavor: wazoo_testkit::Flavor) {
    let hosts = shared(flavor);
    tokio::task::spawn_blocking(move || {
        let mut s = handshake(&hosts);
        let mut out = Vec::new();
        let at = frame::begin(&mut out);
        frame::put_i32(&mut out, 5);
        frame::put_i32(&mut out, 9999);
        frame::finish(&mut out, at);
        s.write_all(&out).unwrap();
        let p = read_frame(&mut s).expect("a reply");
        let h = reply_header(&p);
        assert_eq!(h.xid, 5);
        assert_eq!(
            h.err,
            wazoo_proto::ErrorCode::Unimplemented.code(),
            "{flavor}"
        );
    })
    .await
    .unwrap();
}

async fn pipelined_requests_are_answered_in_order(flavor: wazoo_testkit::Flavor) {
    let hosts = shared(flavor);
    tokio::task::spawn_blocking(move || {
        let mut s = handshake(&hosts);
        let mut out = Vec::new();
        for xid in 1..=50 {
            frame::write_request(
                &mut out,
                xid,
                &Request::Exists {
                    path: "/zookeeper".into(),
                    watch: false,
                },
            );
        }
        s.write_all(&out).unwrap();
        for xid in 1..=50 {
            let p = read_frame(&mut s).expect("a reply");
            assert_eq!(reply_header(&p).xid, xid, "{flavor}");
        }
    })
    .await
    .unwrap();
}

async fn garbage_connect_request_closes_the_connection(flavor: wazoo_testkit::Flavor) {
    let hosts = shared(flavor);
    tokio::task::spawn_blocking(move || {
        let mut s = TcpStream::connect(&hosts).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(&[0, 0, 0, 3, 1, 2, 3]).unwrap();
        assert!(is_closed(&mut s), "{flavor}");
        // The server is still fine.
        let addr: std::net::SocketAddr = hosts.parse().unwrap();
        assert_eq!(
            wazoo_testkit::four_letter_word(addr, "ruok").unwrap(),
            "imok"
        );
    })
    .await
    .unwrap();
}

on_both!(
    oversized_frame_closes_the_connection,
    unknown_opcode_gets_unimplemented,
    pipelined_requests_are_answered_in_order,
    garbage_connect_request_closes_the_connection,
);
