//! One connection pipelining getData on a 100-byte node:
//! `cargo run --release -p wazoo-examples --example bench -- SERVER [requests] [in-flight]`.
//!
//! SERVER `fake` runs an in-process stub server that answers every getData
//! at once, to measure the client alone. A fourth argument
//! `zookeeper-client` runs the same load through the `zookeeper-client`
//! crate instead, for comparison. Prints requests/s: a figure to report,
//! not a test.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use wazoo_client::{Acl, Client, ClientOptions, CreateMode, Error};
use wazoo_proto::jute::{Jute, Reader};
use wazoo_proto::{frame, ConnectRequest, ConnectResponse, RequestHeader, Response, Stat};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut server = args
        .first()
        .cloned()
        .unwrap_or_else(|| "127.0.0.1:2181".into());
    let total: u64 = args
        .get(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(200_000);
    let in_flight: u64 = args.get(2).map(|s| s.parse()).transpose()?.unwrap_or(256);
    if server == "fake" {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        server = listener.local_addr()?.to_string();
        tokio::spawn(async move {
            while let Ok((s, _)) = listener.accept().await {
                tokio::spawn(stub(s));
            }
        });
    }

    if args.get(3).map(String::as_str) == Some("zookeeper-client") {
        return other_crate(&server, total, in_flight).await;
    }
    let (zk, _events) = Client::connect(&server, ClientOptions::default()).await?;
    match zk
        .create(
            "/bench",
            &[7u8; 100],
            &Acl::open_unsafe(),
            CreateMode::Persistent,
        )
        .await
    {
        Ok(_) | Err(Error::NodeExists) => {}
        Err(e) => return Err(e.into()),
    }
    for _ in 0..1000 {
        zk.get_data("/bench").await?;
    }
    let next = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..in_flight {
        let zk = zk.clone();
        let next = next.clone();
        workers.push(tokio::spawn(async move {
            while next.fetch_add(1, Ordering::Relaxed) < total {
                zk.get_data("/bench").await?;
            }
            Ok::<(), Error>(())
        }));
    }
    for w in workers {
        w.await??;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{total} getData in {secs:.2} s with {in_flight} in flight: {:.0} requests/s",
        total as f64 / secs
    );
    zk.close().await?;
    Ok(())
}

async fn other_crate(server: &str, total: u64, in_flight: u64) -> anyhow::Result<()> {
    let zk = zookeeper_client::Client::connect(server).await?;
    let opts =
        zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    match zk.create("/bench", &[7u8; 100], &opts).await {
        Ok(_) | Err(zookeeper_client::Error::NodeExists) => {}
        Err(e) => return Err(e.into()),
    }
    for _ in 0..1000 {
        zk.get_data("/bench").await?;
    }
    let next = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..in_flight {
        let zk = zk.clone();
        let next = next.clone();
        workers.push(tokio::spawn(async move {
            while next.fetch_add(1, Ordering::Relaxed) < total {
                zk.get_data("/bench").await?;
            }
            Ok::<(), zookeeper_client::Error>(())
        }));
    }
    for w in workers {
        w.await??;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "zookeeper-client: {total} getData in {secs:.2} s with {in_flight} in flight: {:.0} requests/s",
        total as f64 / secs
    );
    Ok(())
}

/// A stub server: a handshake, then every request answered at once (a
/// 100-byte getData reply for everything, which the bench only asks for;
/// create gets a create reply).
async fn stub(mut s: TcpStream) -> anyhow::Result<()> {
    s.set_nodelay(true)?;
    let mut buf = vec![0u8; 1 << 16];
    let mut len = 0;
    let mut handshaken = false;
    let mut out = Vec::with_capacity(1 << 16);
    loop {
        let n = s.read(&mut buf[len..]).await?;
        if n == 0 {
            return Ok(());
        }
        len += n;
        let mut at = 0;
        while let Some(size) = frame::check(&buf[at..len], 1 << 20)? {
            let payload = &buf[at + 4..at + size];
            at += size;
            if !handshaken {
                let req = ConnectRequest::from_bytes(payload)?;
                frame::write_record(
                    &mut out,
                    &ConnectResponse {
                        protocol_version: 0,
                        timeout_ms: req.timeout_ms,
                        session_id: 1,
                        passwd: vec![0; 16],
                        read_only: Some(false),
                    },
                );
                handshaken = true;
                continue;
            }
            let h = RequestHeader::read(&mut Reader::new(payload))?;
            let body = match h.op {
                1 => Response::Create {
                    path: "/bench".into(),
                },
                15 => Response::Create2 {
                    path: "/bench".into(),
                    stat: Stat::default(),
                },
                4 => Response::GetData {
                    data: Some(vec![7; 100]),
                    stat: Stat::default(),
                },
                _ => Response::Empty,
            };
            frame::write_reply(&mut out, h.xid, 1, 0, &body);
        }
        buf.copy_within(at..len, 0);
        len -= at;
        if len == buf.len() {
            buf.resize(len * 2, 0);
        }
        s.write_all(&out).await?;
        out.clear();
    }
}
