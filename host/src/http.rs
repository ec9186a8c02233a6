//! The HTTP/1.1 responder behind the member's two HTTP ports: the metrics
//! endpoint (`metricsProvider.httpPort`) and the AdminServer
//! (`admin.serverPort`).
//!
//! Deliberately small: one request per connection (each answer says
//! `Connection: close`), no chunked bodies, and every resource bounded: the
//! request head ([`Limits::head_max`] bytes, [`Limits::headers_max`]
//! header lines), the body ([`Limits::body_max`] in memory; with
//! [`Limits::body_file`], a larger one up to its `max` streamed to a
//! temporary file, never held whole in memory, within a deadline that
//! grows with its length), the time a connection
//! may stay silent ([`Limits::idle`]) and the connections open at once
//! ([`Limits::connections_max`]; one more is answered 503 and closed). A
//! request that is not HTTP gets a 400, and the connection is closed.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// What a connection may cost.
#[derive(Debug, Clone)]
pub struct Limits {
    /// The request line and headers, in bytes.
    pub head_max: usize,
    /// Header lines.
    pub headers_max: usize,
    /// A request body, in bytes.
    pub body_max: usize,
    /// How long a read may wait, and how long an answer may take to write.
    pub idle: Duration,
    /// Connections open at once.
    pub connections_max: usize,
    /// Where a body over [`Limits::body_max`] goes, if anywhere.
    pub body_file: Option<BodyFileLimits>,
}

/// A body too large for memory is written to a temporary file in `dir`
/// (`<prefix><pid>-<n>.partial`, removed once the request is answered),
/// up to `max` bytes; a larger one is refused with a 413 naming `max`.
#[derive(Debug, Clone)]
pub struct BodyFileLimits {
    pub dir: std::path::PathBuf,
    pub prefix: &'static str,
    pub max: u64,
    /// Names the bound in the 413's text (e.g. the command it is for).
    pub what: &'static str,
}

/// The slowest a body streamed to a file may arrive, on average, after
/// [`Limits::idle`]: a trickling sender cannot hold a connection for long.
const BODY_RATE_MIN: u64 = 64 << 10;

/// A request body in a temporary file, removed when the last handle goes.
#[derive(Debug, PartialEq, Eq)]
pub struct BodyFile {
    pub path: std::path::PathBuf,
    pub len: u64,
}

impl Drop for BodyFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            head_max: 8192,
            headers_max: 64,
            body_max: 0,
            idle: Duration::from_secs(5),
            connections_max: 64,
            body_file: None,
        }
    }
}

/// A request, its path and query percent-decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    /// `HTTP/1.0` rather than `HTTP/1.1`.
    pub http10: bool,
    pub path: String,
    /// `key=value` pairs of the query, in order (a key without `=` has an
    /// empty value).
    pub query: Vec<(String, String)>,
    /// Header names as sent; look them up with [`Request::header`].
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// A body over [`Limits::body_max`], written to a file
    /// ([`Limits::body_file`]); `body` is then empty.
    pub body_file: Option<Arc<BodyFile>>,
    /// The client's certificate (DER), when it came over TLS with one.
    pub peer_cert: Option<Vec<u8>>,
}

impl Request {
    /// The first header of this name (names match in any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// An answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
    /// A file of this many bytes to send as the body instead of `body`,
    /// read as it goes out, and removed once sent or not (a temporary
    /// file, such as a snapshot being streamed).
    pub temp_file: Option<(std::path::PathBuf, u64)>,
}

impl Response {
    pub fn new(status: u16, content_type: &'static str, body: impl Into<Vec<u8>>) -> Response {
        Response {
            status,
            content_type,
            headers: Vec::new(),
            body: body.into(),
            temp_file: None,
        }
    }

    /// A plain-text answer naming the status.
    pub fn status(status: u16) -> Response {
        Response::new(
            status,
            "text/plain; charset=utf-8",
            format!("{status} {}\n", reason(status)),
        )
    }

    fn to_bytes(&self) -> Vec<u8> {
        let len = self
            .temp_file
            .as_ref()
            .map_or(self.body.len() as u64, |(_, n)| *n);
        let mut head = format!(
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {len}\r\nConnection: close\r\n",
            self.status,
            reason(self.status),
            self.content_type,
        );
        for (k, v) in &self.headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        let mut out = head.into_bytes();
        out.extend_from_slice(&self.body);
        out
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Payload Too Large",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        _ => "",
    }
}

/// Why a request was not read: the status to answer with, or none when
/// the peer went quiet or away (the connection is just closed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadError {
    Answer(u16),
    /// The body is longer than [`BodyFileLimits::max`] (a 413 naming it):
    /// nothing of it was read.
    TooLarge {
        max: u64,
        what: &'static str,
    },
    Gone,
}

/// Reads one request within `limits`.
pub async fn read_request(
    r: &mut (impl AsyncRead + Unpin),
    limits: &Limits,
) -> Result<Request, ReadError> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        if buf.len() >= limits.head_max {
            return Err(ReadError::Answer(431));
        }
        let want = chunk.len().min(limits.head_max + 4 - buf.len());
        match tokio::time::timeout(limits.idle, r.read(&mut chunk[..want])).await {
            Ok(Ok(0)) if buf.is_empty() => return Err(ReadError::Gone),
            Ok(Ok(0)) => return Err(ReadError::Answer(400)),
            Ok(Ok(n)) => buf.extend_from_slice(&chunk[..n]),
            Ok(Err(_)) => return Err(ReadError::Gone),
            Err(_) if buf.is_empty() => return Err(ReadError::Gone),
            Err(_) => return Err(ReadError::Answer(408)),
        }
    };
    if head_end > limits.head_max {
        return Err(ReadError::Answer(431));
    }
    let mut req = parse_head(&buf[..head_end], limits)?;
    let mut body = buf.split_off(head_end + 4);
    if req.header("transfer-encoding").is_some() {
        return Err(ReadError::Answer(501));
    }
    let len = match req.header("content-length") {
        None => 0,
        Some(v) => v
            .trim()
            .parse::<usize>()
            .map_err(|_| ReadError::Answer(400))?,
    };
    if len > limits.body_max {
        return match &limits.body_file {
            Some(f) if len as u64 <= f.max => {
                req.body_file = Some(Arc::new(
                    receive_file(r, body, len as u64, f, limits.idle).await?,
                ));
                Ok(req)
            }
            Some(f) => Err(ReadError::TooLarge {
                max: f.max,
                what: f.what,
            }),
            None => Err(ReadError::Answer(413)),
        };
    }
    while body.len() < len {
        let want = chunk.len().min(len - body.len());
        match tokio::time::timeout(limits.idle, r.read(&mut chunk[..want])).await {
            Ok(Ok(0)) => return Err(ReadError::Answer(400)),
            Ok(Ok(n)) => body.extend_from_slice(&chunk[..n]),
            Ok(Err(_)) => return Err(ReadError::Gone),
            Err(_) => return Err(ReadError::Answer(408)),
        }
    }
    body.truncate(len);
    req.body = body;
    Ok(req)
}

fn parse_head(head: &[u8], limits: &Limits) -> Result<Request, ReadError> {
    let bad = ReadError::Answer(400);
    let head = std::str::from_utf8(head).map_err(|_| bad)?;
    let mut lines = head.split("\r\n");
    let first = lines.next().ok_or(bad)?;
    let mut parts = first.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad);
    };
    let token = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
    };
    if !token(method) || !matches!(version, "HTTP/1.0" | "HTTP/1.1") || !target.starts_with('/') {
        return Err(bad);
    }
    let mut headers = Vec::new();
    for line in lines {
        if headers.len() == limits.headers_max {
            return Err(ReadError::Answer(431));
        }
        let (k, v) = line.split_once(':').ok_or(bad)?;
        if !token(k) {
            return Err(bad);
        }
        headers.push((k.to_string(), v.trim().to_string()));
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let path = percent_decode(path, false).ok_or(bad)?;
    let query = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            Some((percent_decode(k, true)?, percent_decode(v, true)?))
        })
        .collect::<Option<Vec<_>>>()
        .ok_or(bad)?;
    Ok(Request {
        method: method.to_string(),
        http10: version == "HTTP/1.0",
        path,
        query,
        headers,
        body: Vec::new(),
        body_file: None,
        peer_cert: None,
    })
}

/// Reads a body of `len` bytes (`first` of them already read) into a new
/// temporary file in `f.dir`, written on a blocking thread a few chunks
/// behind the socket. Each read waits at most `idle`, the whole body at
/// most `idle` plus `len` at [`BODY_RATE_MIN`]: a body cut short is a
/// 400, a stalled or trickling one a 408, and the file is removed.
async fn receive_file(
    r: &mut (impl AsyncRead + Unpin),
    mut first: Vec<u8>,
    len: u64,
    f: &BodyFileLimits,
    idle: Duration,
) -> Result<BodyFile, ReadError> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let path = f
        .dir
        .join(format!("{}{}-{n}.partial", f.prefix, std::process::id()));
    first.truncate(len as usize);
    let file = BodyFile { path, len };
    let (tx, mut chunks) = tokio::sync::mpsc::channel::<Vec<u8>>(4);
    let p = file.path.clone();
    let writer = tokio::task::spawn_blocking(move || -> std::io::Result<()> {
        use std::io::Write as _;
        let mut out = std::io::BufWriter::new(std::fs::File::create(&p)?);
        while let Some(c) = chunks.blocking_recv() {
            out.write_all(&c)?;
        }
        out.flush()
    });
    let deadline = tokio::time::Instant::now() + idle + Duration::from_secs(len / BODY_RATE_MIN);
    let read = async {
        let mut got = first.len() as u64;
        if !first.is_empty() && tx.send(first).await.is_err() {
            return Err(ReadError::Answer(500));
        }
        while got < len {
            let mut buf = vec![0u8; (64u64 << 10).min(len - got) as usize];
            let n = match tokio::time::timeout(idle, r.read(&mut buf)).await {
                Ok(Ok(0)) => return Err(ReadError::Answer(400)),
                Ok(Ok(n)) => n,
                Ok(Err(_)) => return Err(ReadError::Gone),
                Err(_) => return Err(ReadError::Answer(408)),
            };
            buf.truncate(n);
            got += n as u64;
            if tx.send(buf).await.is_err() {
                return Err(ReadError::Answer(500));
            }
        }
        Ok(())
    };
    let read = match tokio::time::timeout_at(deadline, read).await {
        Ok(r) => r,
        Err(_) => Err(ReadError::Answer(408)),
    };
    drop(tx);
    let written = writer.await;
    match (read, written) {
        (Err(e), _) => Err(e),
        (Ok(()), Ok(Ok(()))) => Ok(file),
        (Ok(()), Ok(Err(e))) => {
            tracing::warn!(file = %file.path.display(), "cannot store a request body: {e}");
            Err(ReadError::Answer(500))
        }
        (Ok(()), Err(e)) => {
            tracing::warn!("cannot store a request body: {e}");
            Err(ReadError::Answer(500))
        }
    }
}

/// `%XX` decoded (and `+` as a space in a query); `None` if malformed or
/// not UTF-8.
fn percent_decode(s: &str, plus_is_space: bool) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hex = s.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// TLS on a port: the server's configuration, and whether plain HTTP is
/// served on the same port too (told apart by the first byte, 0x16 for a
/// TLS handshake).
#[derive(Clone)]
pub struct Tls {
    pub config: Arc<rustls::ServerConfig>,
    pub unified: bool,
}

/// HSTS, as ZooKeeper's Jetty adds it to answers over TLS (one day).
const HSTS: &str = "max-age=86400; includeSubDomains";

/// Answers one connection: reads its request, asks `handle`, writes the
/// answer and closes. `secure`: it came over TLS.
pub async fn answer<S, H, F>(
    mut stream: S,
    peer: SocketAddr,
    limits: Limits,
    secure: bool,
    peer_cert: Option<Vec<u8>>,
    handle: H,
) where
    S: AsyncRead + AsyncWrite + Unpin,
    H: FnOnce(Request, SocketAddr) -> F,
    F: Future<Output = Response>,
{
    let mut unread = false;
    let mut resp = match read_request(&mut stream, &limits).await {
        Ok(mut req) => {
            req.peer_cert = peer_cert;
            handle(req, peer).await
        }
        Err(ReadError::Answer(status)) => Response::status(status),
        Err(ReadError::TooLarge { max, what }) => {
            unread = true;
            Response::new(
                413,
                "text/plain; charset=utf-8",
                format!("413 Payload Too Large: {what} takes a body of at most {max} bytes\n"),
            )
        }
        Err(ReadError::Gone) => return,
    };
    if secure {
        resp.headers
            .push(("Strict-Transport-Security", HSTS.to_string()));
    }
    let sent = tokio::time::timeout(limits.idle, stream.write_all(&resp.to_bytes())).await;
    if let Some((path, len)) = &resp.temp_file {
        if matches!(sent, Ok(Ok(()))) {
            if let Err(e) = send_file(&mut stream, path, *len, limits.idle).await {
                tracing::warn!(%peer, "HTTP body not sent: {e}");
            }
        }
        let _ = std::fs::remove_file(path);
    }
    let _ = tokio::time::timeout(limits.idle, stream.shutdown()).await;
    if unread {
        // A body left unread would make closing send a reset, which can
        // discard the answer before the client reads it: what the client
        // still sends is read and dropped, for a bounded time.
        let drain = async {
            let mut sink = [0u8; 8192];
            while let Ok(Ok(n)) = tokio::time::timeout(limits.idle, stream.read(&mut sink)).await {
                if n == 0 {
                    break;
                }
            }
        };
        let _ = tokio::time::timeout(LINGER, drain).await;
    }
}

/// How long an answer sent before its request's body was read waits for
/// the client to take it (see `answer`).
const LINGER: Duration = Duration::from_secs(10);

/// Copies `len` bytes of `path` to `w`, each write within `idle`.
async fn send_file(
    w: &mut (impl AsyncWrite + Unpin),
    path: &std::path::Path,
    len: u64,
    idle: Duration,
) -> std::io::Result<()> {
    // The file is read on a blocking thread, a few chunks ahead.
    let (tx, mut chunks) = tokio::sync::mpsc::channel::<std::io::Result<Vec<u8>>>(4);
    let path = path.to_path_buf();
    let reader = tokio::task::spawn_blocking(move || {
        use std::io::Read as _;
        let mut f = match std::fs::File::open(&path) {
            Ok(f) => f,
            Err(e) => return drop(tx.blocking_send(Err(e))),
        };
        let mut left = len;
        while left > 0 {
            let mut buf = vec![0u8; (64u64 << 10).min(left) as usize];
            let r = f.read(&mut buf).and_then(|n| match n {
                0 => Err(std::io::ErrorKind::UnexpectedEof.into()),
                n => Ok(n),
            });
            let failed = r.is_err();
            let sent = tx.blocking_send(r.map(|n| {
                buf.truncate(n);
                left -= n as u64;
                buf
            }));
            if failed || sent.is_err() {
                return;
            }
        }
    });
    let mut result = Ok(());
    while let Some(chunk) = chunks.recv().await {
        let sent = match chunk {
            Ok(c) => tokio::time::timeout(idle, w.write_all(&c))
                .await
                .unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into())),
            Err(e) => Err(e),
        };
        if let Err(e) = sent {
            result = Err(e);
            break;
        }
    }
    // Dropping the queue stops the reader if the receiver went away.
    drop(chunks);
    let _ = reader.await;
    result
}

/// Serves `listener` until the runtime stops: each connection on a task
/// of its own, [`Limits::connections_max`] at once, over `tls` if given
/// (the handshake within [`Limits::idle`]).
pub fn serve<H, F>(listener: TcpListener, limits: Limits, tls: Option<Tls>, handle: H)
where
    H: Fn(Request, SocketAddr) -> F + Clone + Send + 'static,
    F: Future<Output = Response> + Send,
{
    let open = Arc::new(Semaphore::new(limits.connections_max));
    tokio::spawn(async move {
        loop {
            let Ok((stream, peer)) = listener.accept().await else {
                // Out of descriptors, most likely: let some close.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            let Ok(permit) = Arc::clone(&open).try_acquire_owned() else {
                // Told without waiting (a fresh socket's send buffer takes
                // it), and closed.
                let _ = stream.try_write(&Response::status(503).to_bytes());
                drop(stream);
                continue;
            };
            let (handle, tls, limits) = (handle.clone(), tls.clone(), limits.clone());
            tokio::spawn(async move {
                match tls {
                    None => answer(stream, peer, limits, false, None, handle).await,
                    Some(tls) => {
                        let is_tls = if tls.unified {
                            let mut first = [0u8; 1];
                            match tokio::time::timeout(limits.idle, stream.peek(&mut first)).await {
                                Ok(Ok(1)) => first[0] == 0x16,
                                _ => return,
                            }
                        } else {
                            true
                        };
                        if !is_tls {
                            answer(stream, peer, limits, false, None, handle).await;
                        } else {
                            let acceptor = tokio_rustls::TlsAcceptor::from(tls.config);
                            match tokio::time::timeout(limits.idle, acceptor.accept(stream)).await {
                                Ok(Ok(s)) => {
                                    let cert = s
                                        .get_ref()
                                        .1
                                        .peer_certificates()
                                        .and_then(|c| c.first())
                                        .map(|c| c.as_ref().to_vec());
                                    answer(s, peer, limits, true, cert, handle).await
                                }
                                _ => tracing::debug!(%peer, "no TLS handshake"),
                            }
                        }
                    }
                }
                drop(permit);
            });
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read(bytes: &[u8], limits: Limits) -> Result<Request, ReadError> {
        let mut r = bytes;
        read_request(&mut r, &limits).await
    }

    // A body over the in-memory bound goes to a file up to its own bound
    // (and the file goes when the request does); a longer one is refused
    // by name before any of it is read, a short one is a 400.
    #[tokio::test]
    async fn a_large_body_is_streamed_to_a_file_within_its_bound() {
        let dir = tempfile::tempdir().unwrap();
        let limits = Limits {
            body_file: Some(BodyFileLimits {
                dir: dir.path().to_path_buf(),
                prefix: "body-",
                max: 100_000,
                what: "restore",
            }),
            ..Limits::default()
        };
        let body: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
        let mut req = b"POST /x HTTP/1.1\r\nContent-Length: 100000\r\n\r\n".to_vec();
        req.extend_from_slice(&body);
        let r = read(&req, limits.clone()).await.unwrap();
        assert!(r.body.is_empty());
        let f = r.body_file.clone().unwrap();
        assert_eq!(f.len, 100_000);
        assert_eq!(std::fs::read(&f.path).unwrap(), body);
        let path = f.path.clone();
        drop((r, f));
        assert!(!path.exists(), "the file goes with the request");
        assert_eq!(
            read(
                b"POST /x HTTP/1.1\r\nContent-Length: 100001\r\n\r\nabc",
                limits.clone()
            )
            .await,
            Err(ReadError::TooLarge {
                max: 100_000,
                what: "restore"
            })
        );
        assert_eq!(
            read(&req[..req.len() - 1], limits).await,
            Err(ReadError::Answer(400))
        );
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "nothing is left of a refused body"
        );
    }

    // RFC 9112 (HTTP/1.1), "Request Line" and "Field Syntax": a request
    // is read with its query decoded; anything else is a 400, a head or
    // body over the limits a 431 or 413, never a panic.
    #[tokio::test]
    async fn requests_are_read_within_their_limits() {
        let r = read(
            b"GET /commands/stat%20x?traceMask=5&a+b=c%2F HTTP/1.1\r\nHost: x\r\nAuthorization: digest u:p\r\n\r\n",
            Limits::default(),
        )
        .await
        .unwrap();
        assert_eq!(r.method, "GET");
        assert_eq!(r.path, "/commands/stat x");
        assert_eq!(
            r.query,
            vec![
                ("traceMask".into(), "5".into()),
                ("a b".into(), "c/".into())
            ]
        );
        assert_eq!(r.header("authorization"), Some("digest u:p"));

        for bad in [
            &b"GET\r\n\r\n"[..],
            b"GET /x HTTP/2.0\r\n\r\n",
            b"GET x HTTP/1.1\r\n\r\n",
            b"GET /%zz HTTP/1.1\r\n\r\n",
            b"GET /x HTTP/1.1\r\nno colon\r\n\r\n",
            b"G(T /x HTTP/1.1\r\n\r\n",
            b"GET /x HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
            b"\xff\xfe HTTP/1.1\r\n\r\n",
            b"GET /x HTTP/1.1\r\n",
        ] {
            assert_eq!(
                read(bad, Limits::default()).await,
                Err(ReadError::Answer(400)),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let long = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(9000));
        assert_eq!(
            read(long.as_bytes(), Limits::default()).await,
            Err(ReadError::Answer(431))
        );
        let many: String = (0..70).map(|i| format!("h{i}: v\r\n")).collect();
        let many = format!("GET / HTTP/1.1\r\n{many}\r\n");
        assert_eq!(
            read(many.as_bytes(), Limits::default()).await,
            Err(ReadError::Answer(431))
        );
        assert_eq!(
            read(
                b"POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\n0123456789",
                Limits::default()
            )
            .await,
            Err(ReadError::Answer(413))
        );
        let limits = Limits {
            body_max: 10,
            ..Limits::default()
        };
        let r = read(
            b"POST / HTTP/1.1\r\nContent-Length: 4\r\n\r\nabcdEXTRA",
            limits.clone(),
        )
        .await
        .unwrap();
        assert_eq!(r.body, b"abcd");
        assert_eq!(
            read(
                b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
                limits.clone()
            )
            .await,
            Err(ReadError::Answer(501))
        );
        assert_eq!(read(b"", limits).await, Err(ReadError::Gone));
    }
}
