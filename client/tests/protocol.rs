//! Client behaviors that need a server to misbehave or to be something a
//! single Apache ZooKeeper is not (read-only, wazoo's recipe extension): a
//! scripted fake server on loopback speaks the wire protocol.

mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::within;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use wazoo_client::{Client, ClientOptions, Error, SessionState};
use wazoo_proto::frame::{self, ClientFrame};
use wazoo_proto::jute::{Jute, Writer};
use wazoo_proto::{xid, ConnectRequest, ConnectResponse, ReplyHeader, Request, Response, Stat};

/// What a fake server saw and how it behaves.
#[derive(Default)]
struct Fake {
    read_only: bool,
    /// Refuse (close) every connection while false; `isro` says `rw` once
    /// it is true.
    serving: AtomicBool,
    connects: Mutex<Vec<ConnectRequest>>,
    pings: AtomicUsize,
}

async fn start_fake(read_only: bool, serving: bool) -> (SocketAddr, Arc<Fake>) {
    let fake = Arc::new(Fake {
        read_only,
        serving: AtomicBool::new(serving),
        ..Fake::default()
    });
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let f = fake.clone();
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            let f = f.clone();
            tokio::spawn(async move {
                let _ = serve(s, f).await;
            });
        }
    });
    (addr, fake)
}

fn reply(out: &mut Vec<u8>, xid: i32, err: i32, body: &Response) {
    frame::write_reply(out, xid, 100, err, body);
}

async fn serve(mut s: TcpStream, fake: Arc<Fake>) -> anyhow::Result<()> {
    let mut buf = vec![0u8; 1 << 16];
    let mut len = 0;
    let mut session_id = 0;
    loop {
        let n = s.read(&mut buf[len..]).await?;
        if n == 0 {
            return Ok(());
        }
        len += n;
        if session_id == 0 && len >= 4 && &buf[..4] == b"isro" {
            let rw = fake.serving.load(Ordering::SeqCst) && !fake.read_only;
            s.write_all(if rw { b"rw" } else { b"ro" }).await?;
            return Ok(());
        }
        if !fake.serving.load(Ordering::SeqCst) {
            return Ok(());
        }
        let mut out = Vec::new();
        let mut at = 0;
        while let Some(size) = frame::check(&buf[at..len], 1 << 20)? {
            let payload = buf[at + 4..at + size].to_vec();
            at += size;
            if session_id == 0 {
                let req = ConnectRequest::from_bytes(&payload)?;
                session_id = if req.session_id != 0 {
                    req.session_id
                } else {
                    0x5eed
                };
                fake.connects.lock().unwrap().push(req.clone());
                frame::write_record(
                    &mut out,
                    &ConnectResponse {
                        protocol_version: 0,
                        timeout_ms: req.timeout_ms,
                        session_id,
                        passwd: vec![1; 16],
                        read_only: Some(fake.read_only),
                    },
                );
                continue;
            }
            let ClientFrame::Request { xid, req } = frame::decode_client_frame(&payload)? else {
                continue;
            };
            match req {
                Request::Ping => {
                    fake.pings.fetch_add(1, Ordering::SeqCst);
                    reply(&mut out, xid::PING, 0, &Response::Empty);
                }
                Request::RecipeCall {
                    module,
                    method,
                    args,
                    ..
                } => {
                    // A notification first, then the reply: the client must
                    // hand them over in that order.
                    let at = frame::begin(&mut out);
                    ReplyHeader {
                        xid: xid::RECIPE_NOTIFICATION,
                        zxid: 99,
                        err: 0,
                    }
                    .write(&mut out);
                    out.write_buffer(format!("{module}.{method}").as_bytes());
                    frame::finish(&mut out, at);
                    let mut back = args.clone();
                    back.reverse();
                    reply(&mut out, xid, 0, &Response::Recipe(back));
                }
                Request::Exists { path, .. } if path == "/moved" => {
                    // ZooKeeper Programmer's Guide, "SessionMovedException":
                    // the old server answers SessionMoved and closes the
                    // connection.
                    reply(&mut out, xid, -118, &Response::Empty);
                    s.write_all(&out).await?;
                    return Ok(());
                }
                Request::GetData { .. } => reply(
                    &mut out,
                    xid,
                    0,
                    &Response::GetData {
                        data: Some(b"d".to_vec()),
                        stat: Stat::default(),
                    },
                ),
                Request::CloseSession => {
                    reply(&mut out, xid, 0, &Response::Empty);
                    s.write_all(&out).await?;
                    return Ok(());
                }
                Request::SetData { .. } if fake.read_only => {
                    reply(&mut out, xid, -119, &Response::Empty)
                }
                _ => reply(&mut out, xid, -6, &Response::Empty),
            }
        }
        buf.copy_within(at..len, 0);
        len -= at;
        s.write_all(&out).await?;
    }
}

fn quick() -> ClientOptions {
    ClientOptions::default()
        .session_timeout(Duration::from_secs(3))
        .reconnect_delay(Duration::from_millis(10), Duration::from_millis(100))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recipe_call_returns_the_reply_after_the_notifications_it_caused() {
    let (addr, _fake) = start_fake(false, true).await;
    let (zk, _e) = within("connect", Client::connect(&addr.to_string(), quick()))
        .await
        .unwrap();
    let mut notes = zk.recipe_notifications();
    let reply = zk.recipe_call("lock", "acquire", &[1, 2, 3]).await.unwrap();
    assert_eq!(reply, vec![3, 2, 1]);
    let n = notes
        .try_recv()
        .expect("the notification precedes the reply");
    assert_eq!(
        (n.zxid, n.payload.as_slice()),
        (99, b"lock.acquire".as_slice())
    );
    zk.close().await.unwrap();
    assert_eq!(within("end of notifications", notes.recv()).await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_moved_fails_the_call_and_the_client_reconnects_with_its_session() {
    // ZooKeeper Programmer's Guide, "SessionMovedException": the request fails,
    // the old connection is closed, the client re-establishes the session.
    let (addr, fake) = start_fake(false, true).await;
    let (zk, mut events) = within("connect", Client::connect(&addr.to_string(), quick()))
        .await
        .unwrap();
    assert_eq!(zk.exists("/moved").await, Err(Error::SessionMoved));
    within(
        "reconnect",
        events.wait_for(|s| s == SessionState::Disconnected),
    )
    .await;
    within("reconnect", events.wait_for(|s| s.is_connected())).await;
    let connects = fake.connects.lock().unwrap().clone();
    assert_eq!(connects.len(), 2);
    assert_eq!(connects[1].session_id, 0x5eed, "same session");
    assert_eq!(connects[1].passwd, vec![1; 16], "with its password");
    assert_eq!(connects[1].last_zxid_seen, 100, "and the last zxid seen");
    assert_eq!(zk.get_data("/x").await.unwrap().0, b"d");
    zk.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_server_gives_connected_read_only_until_a_read_write_server_is_found() {
    // ZooKeeper Programmer's Guide, "Session States": the connected read-only
    // state; the client keeps looking for a read-write server and moves to it.
    // A session made on a read-only server is not presented to the read-write
    // one (session id 0), as in ZooKeeper's client.
    let (ro, _ro_fake) = start_fake(true, true).await;
    let (rw, rw_fake) = start_fake(false, false).await;
    let cs = format!("{ro},{rw}");
    let (zk, mut events) = Client::start(&cs, quick().read_only(true)).unwrap();
    assert_eq!(
        within("read-only", events.wait_for(|s| s.is_connected())).await,
        Some(SessionState::ConnectedReadOnly)
    );
    assert_eq!(zk.get_data("/x").await.unwrap().0, b"d");
    assert_eq!(zk.set_data("/x", b"", None).await, Err(Error::NotReadOnly));
    rw_fake.serving.store(true, Ordering::SeqCst);
    assert_eq!(
        within(
            "the move to the read-write server",
            events.wait_for(|s| s == SessionState::Connected)
        )
        .await,
        Some(SessionState::Connected)
    );
    assert_eq!(zk.connected_server().unwrap().to_string(), rw.to_string());
    let connects = rw_fake.connects.lock().unwrap().clone();
    assert_eq!(connects.last().unwrap().session_id, 0);
    assert_eq!(connects.last().unwrap().read_only, Some(true));
    zk.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_client_sends_pings() {
    // ZooKeeper Programmer's Guide, "Client Heartbeat": the client sends PINGs
    // when idle.
    let (addr, fake) = start_fake(false, true).await;
    let (zk, _e) = within(
        "connect",
        Client::connect(
            &addr.to_string(),
            quick().session_timeout(Duration::from_millis(900)),
        ),
    )
    .await
    .unwrap();
    within("three pings", async {
        while fake.pings.load(Ordering::SeqCst) < 3 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert_eq!(zk.state(), SessionState::Connected);
    zk.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_ops_fail_with_the_servers_code_and_the_connection_stays() {
    let (addr, fake) = start_fake(false, true).await;
    let (zk, _e) = within("connect", Client::connect(&addr.to_string(), quick()))
        .await
        .unwrap();
    assert_eq!(zk.who_am_i().await, Err(Error::Unimplemented));
    assert_eq!(zk.get_data("/x").await.unwrap().0, b"d");
    assert_eq!(fake.connects.lock().unwrap().len(), 1);
    zk.close().await.unwrap();
}
