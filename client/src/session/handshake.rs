//! Opening a connection: the session handshake, and the read-write probe.

use std::io;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use wazoo_proto::jute::Jute;
use wazoo_proto::{frame, ConnectRequest, ConnectResponse};

use super::Established;
use crate::connect_string::HostPort;

/// Asks a server whether it serves writes (`isro` answers `rw` or `ro`), as
/// ZooKeeper's client does while it is connected read-only.
pub(super) async fn probe_read_write(host: HostPort, timeout: Duration) -> Option<HostPort> {
    let ask = async {
        let mut s = TcpStream::connect((host.host.as_str(), host.port))
            .await
            .ok()?;
        s.write_all(b"isro").await.ok()?;
        let mut answer = Vec::new();
        s.read_to_end(&mut answer).await.ok()?;
        Some(answer == b"rw")
    };
    match tokio::time::timeout(timeout, ask).await {
        Ok(Some(true)) => Some(host),
        _ => None,
    }
}

/// Connects and does the session handshake (ConnectRequest / Response).
pub(super) async fn establish(
    host: HostPort,
    req: ConnectRequest,
    timeout: Duration,
    max_frame: usize,
) -> io::Result<Established> {
    let attempt = async {
        let mut stream = TcpStream::connect((host.host.as_str(), host.port)).await?;
        stream.set_nodelay(true)?;
        let mut out = Vec::with_capacity(64);
        frame::write_record(&mut out, &req);
        stream.write_all(&out).await?;
        let mut buf = vec![0u8; 256];
        let mut len = 0;
        loop {
            match frame::check(&buf[..len], max_frame) {
                Ok(Some(n)) => {
                    let resp = ConnectResponse::from_bytes(&buf[4..n])
                        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                    let leftover = buf[n..len].to_vec();
                    return Ok(Established {
                        stream,
                        resp,
                        leftover,
                    });
                }
                Ok(None) => {}
                Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, e)),
            }
            if len == buf.len() {
                buf.resize(len * 2, 0);
            }
            let n = stream.read(&mut buf[len..]).await?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the server closed the connection during the handshake",
                ));
            }
            len += n;
        }
    };
    match tokio::time::timeout(timeout, attempt).await {
        Ok(r) => r,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("no handshake within {} ms", timeout.as_millis()),
        )),
    }
}
