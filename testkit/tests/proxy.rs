//! The fault-injecting proxy, against a tiny echo server.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::thread::JoinHandle;
use std::time::Duration;

use wazoo_testkit::{wait_for, Proxy};

const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// Echoes every connection, each reply prefixed with `tag`. Stops when dropped.
struct EchoServer {
    addr: SocketAddr,
    thread: Option<JoinHandle<()>>,
}

impl EchoServer {
    fn start(tag: &'static [u8]) -> EchoServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { return };
                let mut first = [0u8; 4];
                if conn.peek(&mut first).ok() == Some(4) && &first == b"STOP" {
                    return;
                }
                std::thread::spawn(move || {
                    let mut buf = [0u8; 1024];
                    while let Ok(n) = conn.read(&mut buf) {
                        if n == 0 {
                            break;
                        }
                        let mut reply = tag.to_vec();
                        reply.extend_from_slice(&buf[..n]);
                        if conn.write_all(&reply).is_err() {
                            break;
                        }
                    }
                });
            }
        });
        EchoServer {
            addr,
            thread: Some(thread),
        }
    }
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        if let Ok(mut s) = TcpStream::connect(self.addr) {
            let _ = s.write_all(b"STOP");
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect_timeout(&addr, IO_TIMEOUT).unwrap();
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    s
}

fn roundtrip(stream: &mut TcpStream, msg: &[u8], expected: &[u8]) {
    stream.write_all(msg).unwrap();
    let mut got = vec![0u8; expected.len()];
    stream.read_exact(&mut got).unwrap();
    assert_eq!(got, expected);
}

fn assert_reset(e: &std::io::Error) {
    assert!(
        matches!(
            e.kind(),
            ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted
        ),
        "expected EOF or reset, got {e}"
    );
}

/// The connection is closed: the next read sees EOF or a reset.
fn assert_closed(stream: &mut TcpStream) {
    let mut buf = [0u8; 16];
    match stream.read(&mut buf) {
        Ok(0) => {}
        Ok(n) => panic!("expected a closed connection, read {n} bytes"),
        Err(e) => assert_reset(&e),
    }
}

/// A proxy that refuses (cut, or its upstream is down) accepts a
/// connection and closes or resets it at once, so a reset can surface on
/// the first call after connect (setting the read timeout), not only on
/// the read.
fn assert_refused(addr: SocketAddr) {
    let mut s = match TcpStream::connect_timeout(&addr, IO_TIMEOUT) {
        Ok(s) => s,
        Err(e) => return assert_reset(&e),
    };
    if let Err(e) = s.set_read_timeout(Some(IO_TIMEOUT)) {
        return assert_reset(&e);
    }
    assert_closed(&mut s);
}

#[test]
fn proxy_forwards_bytes_both_ways() {
    let echo = EchoServer::start(b"A:");
    let proxy = Proxy::start(echo.addr).unwrap();
    let mut client = connect(proxy.addr());
    roundtrip(&mut client, b"hello", b"A:hello");
    roundtrip(&mut client, b"again", b"A:again");
    assert_eq!(proxy.accepted_connections(), 1);
    assert_eq!(proxy.active_connections(), 1);
}

#[test]
fn cut_closes_open_connections_and_refuses_new_ones_until_restore() {
    let echo = EchoServer::start(b"A:");
    let proxy = Proxy::start(echo.addr).unwrap();
    let mut client = connect(proxy.addr());
    roundtrip(&mut client, b"before", b"A:before");

    proxy.cut();
    assert_closed(&mut client);
    assert_refused(proxy.addr());

    proxy.restore();
    let mut again = connect(proxy.addr());
    roundtrip(&mut again, b"after", b"A:after");
}

#[test]
fn blackhole_holds_bytes_until_restore() {
    let echo = EchoServer::start(b"A:");
    let proxy = Proxy::start(echo.addr).unwrap();
    let mut client = connect(proxy.addr());
    roundtrip(&mut client, b"one", b"A:one");

    proxy.blackhole();
    client.write_all(b"two").unwrap();
    // Nothing may come back while blackholed (a correct proxy never
    // answers here, so the short wait cannot fail spuriously).
    client
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut buf = [0u8; 8];
    let err = client
        .read(&mut buf)
        .expect_err("bytes passed a blackholed proxy");
    assert!(
        matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
        "{err}"
    );

    proxy.restore();
    client.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    let mut got = [0u8; 5];
    client.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"A:two");
}

#[test]
fn set_target_sends_new_connections_to_the_new_server() {
    let first = EchoServer::start(b"A:");
    let second = EchoServer::start(b"B:");
    let proxy = Proxy::start(first.addr).unwrap();
    let mut old = connect(proxy.addr());
    roundtrip(&mut old, b"x", b"A:x");

    proxy.set_target(second.addr);
    assert_eq!(proxy.target(), second.addr);
    let mut new = connect(proxy.addr());
    roundtrip(&mut new, b"y", b"B:y");
    // Open connections keep their server until cut.
    roundtrip(&mut old, b"z", b"A:z");
}

#[test]
fn unreachable_target_resets_the_client_connection() {
    let dead = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let proxy = Proxy::start(dead).unwrap();
    assert_refused(proxy.addr());
}

#[test]
fn dropping_the_proxy_closes_its_connections() {
    let echo = EchoServer::start(b"A:");
    let proxy = Proxy::start(echo.addr).unwrap();
    let mut client = connect(proxy.addr());
    roundtrip(&mut client, b"hi", b"A:hi");
    wait_for("the proxy to count its connection", IO_TIMEOUT, || {
        (proxy.active_connections() == 1).then_some(())
    })
    .unwrap();
    drop(proxy);
    assert_closed(&mut client);
}

#[test]
fn server_closing_its_side_reaches_the_client_after_its_last_bytes() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let server_addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        conn.write_all(b"bye").unwrap();
        // Dropping `conn` closes the server's side.
    });
    let proxy = Proxy::start(server_addr).unwrap();
    let mut client = connect(proxy.addr());
    let mut got = Vec::new();
    client.read_to_end(&mut got).unwrap();
    assert_eq!(got, b"bye");
    server.join().unwrap();
}
