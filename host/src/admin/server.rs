//! The AdminServer's HTTP port (ZooKeeper Administrator's Guide, "The
//! AdminServer"): `GET <admin.commandURL>/<command>` answers the command
//! ([`super::commands`]) as JSON, `GET <admin.commandURL>` lists the
//! commands as links, as ZooKeeper 3.8's Jetty servlet does. A command
//! runs on the member's core loop, between two batches, as a four-letter
//! word does.
//!
//! Statuses are ZooKeeper's: 200 for every command, an unknown one
//! included (its `error` says so); 404 outside the command URL; 405 for a
//! method other than GET (400 in HTTP/1.0, as Java's `HttpServlet`
//! answers); 403 for TRACE. Bounds: [`crate::http`]'s, with
//! `admin.idleTimeout` as the time a connection may stay silent.
//!
//! ZooKeeper 3.9's `snapshot` (`GET <commandURL>/snapshot?streaming=true`):
//! the asker must be authorized (`Authorization: digest user:password`
//! with every permission on `/`; 401 or 403 otherwise), one is allowed per
//! `admin.rateLimiterIntervalInMS` (429 otherwise), and the answer is the
//! member's state at its last applied zxid, in the format of its snapshot
//! files (what `wazoo backup` takes and `wazoo restore` installs), with
//! the headers `last_zxid` and `snapshot_size`. It is written to a
//! temporary file in the snapshot directory first (so its size is known
//! before it is sent, as ZooKeeper's is), which is removed once sent.
//!
//! ZooKeeper 3.9's `restore` (`POST <commandURL>/restore`, alias `rest`;
//! the body is what `snapshot` streams): the same authorization, one per
//! `admin.rateLimiterIntervalInMS` (its own limiter, as ZooKeeper's), 503
//! with `admin.restore.enabled=false`. The body is written to a temporary
//! file in the snapshot directory as it arrives (at most
//! [`RESTORE_BYTES_MAX`]; a longer one is a 413 naming the bound, a cut or
//! stalled one a 400 or 408, none of which reaches the member), then read
//! and checked whole on a blocking thread: the file's checksum, the
//! envelope, the body, and the tree's invariants. Only then does the core
//! loop get it, as a txn every member applies (`core::server::restore`);
//! the answer is ZooKeeper's `last_zxid`, here the zxid the restore was
//! applied at. A snapshot that does not check out is a 500 with the
//! reason in `error` (ZooKeeper's status for a failed restore), and
//! nothing changed.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use tokio::sync::{mpsc, oneshot};

use crate::config::AdminServerConfig;
use crate::http::{Limits, Request, Response};
use crate::member::Event;

/// How long a command may wait for the core loop.
const ANSWER_WAIT: Duration = Duration::from_secs(10);

/// How long a restore may wait to be applied (committed, in an ensemble).
const RESTORE_WAIT: Duration = Duration::from_secs(60);

/// The longest snapshot `restore` takes: the core's bound on what one
/// restore txn carries (it is one log record).
pub const RESTORE_BYTES_MAX: u64 = crate::core::server::RESTORE_BYTES_MAX as u64;

/// The prefix of a restore body's temporary file.
const RESTORE_PREFIX: &str = "admin-restore-";

/// Connections the AdminServer holds open at once.
const CONNECTIONS_MAX: usize = 32;

/// What the HTTP side keeps between requests.
struct Shared {
    url: String,
    events: mpsc::Sender<Event>,
    /// Where a streamed snapshot is written first.
    snap_dir: PathBuf,
    rate_limit: Duration,
    /// When the last `snapshot` was allowed.
    last_snapshot: Mutex<Option<Instant>>,
    /// When the last `restore` was allowed.
    last_restore: Mutex<Option<Instant>>,
}

/// Binds the AdminServer's port and serves it on the member's runtime.
pub fn start(
    cfg: &AdminServerConfig,
    tls: Option<crate::http::Tls>,
    snap_dir: PathBuf,
    events: mpsc::Sender<Event>,
) -> Result<SocketAddr> {
    let bind = || -> std::io::Result<tokio::net::TcpListener> {
        let l = std::net::TcpListener::bind(cfg.addr)?;
        l.set_nonblocking(true)?;
        tokio::net::TcpListener::from_std(l)
    };
    let listener = bind().with_context(|| {
        format!(
            "cannot start the AdminServer on {} (admin.serverAddress, admin.serverPort; admin.enableServer=false turns it off)",
            cfg.addr
        )
    })?;
    let addr = listener.local_addr()?;
    remove_leftovers(&snap_dir);
    let limits = Limits {
        idle: Duration::from_millis(cfg.idle_timeout_ms),
        connections_max: CONNECTIONS_MAX,
        body_file: Some(crate::http::BodyFileLimits {
            dir: snap_dir.clone(),
            prefix: RESTORE_PREFIX,
            max: RESTORE_BYTES_MAX,
            what: "the restore command",
        }),
        ..Limits::default()
    };
    let url = cfg.command_url.clone();
    let scheme = if tls.is_some() { "https" } else { "http" };
    tracing::info!(%addr, command_url = %url, "AdminServer on {scheme}://{addr}{url}");
    let shared = Arc::new(Shared {
        url,
        events,
        snap_dir,
        rate_limit: Duration::from_millis(cfg.rate_limit_ms),
        last_snapshot: Mutex::new(None),
        last_restore: Mutex::new(None),
    });
    crate::http::serve(listener, limits, tls, move |req, peer| {
        let shared = Arc::clone(&shared);
        async move { route(&shared, req, peer).await }
    });
    Ok(addr)
}

async fn route(shared: &Shared, req: Request, peer: SocketAddr) -> Response {
    let url = shared.url.as_str();
    if req.method == "TRACE" {
        return Response::status(403);
    }
    let rest = match req.path.strip_prefix(url) {
        Some("") => "",
        Some(r) if r.starts_with('/') => &r[1..],
        _ => return Response::status(404),
    };
    let post = super::commands::primary_name(rest)
        .is_some_and(|p| super::commands::POST_COMMANDS.contains(&p));
    if req.method != if post { "POST" } else { "GET" } {
        // As Java's HttpServlet answers a method it does not serve.
        return Response::status(if req.http10 { 400 } else { 405 });
    }
    if rest.is_empty() {
        let mut body = String::new();
        for name in super::commands::primary_names() {
            body.push_str(&format!("<a href=\"{url}/{name}\">{name}</a>\n<br/>\n"));
        }
        return Response::new(200, "text/html; charset=utf-8", body);
    }
    let (tx, rx) = oneshot::channel();
    let authorization = req.header("authorization").map(str::to_string);
    let body_file = req.body_file.clone();
    let streaming = req
        .query
        .iter()
        .find(|(k, _)| k == "streaming")
        .is_none_or(|(_, v)| v.eq_ignore_ascii_case("true"));
    let asked = shared
        .events
        .send(Event::AdminCommand {
            name: rest.to_string(),
            kwargs: req.query,
            authorization,
            ip: peer.ip(),
            cert: req.peer_cert,
            reply: tx,
        })
        .await;
    let answer = match asked {
        Ok(()) => tokio::time::timeout(ANSWER_WAIT, rx).await,
        Err(_) => return Response::status(503),
    };
    let Ok(Ok(mut answer)) = answer else {
        return Response::status(503);
    };
    if answer.restore {
        return restore(shared, body_file, answer.json, peer).await;
    }
    let Some(job) = answer.snapshot.take() else {
        return json(answer.status, &answer.json);
    };
    if !shared.allow_snapshot() {
        tracing::warn!(%peer, "AdminServer snapshot request was rate limited");
        return json(429, &answer.json);
    }
    snapshot(shared, job, streaming, &answer.json, peer).await
}

/// The prefix of a streamed snapshot's temporary file.
const TEMP_PREFIX: &str = "admin-snapshot-";

/// Removes the temporary files of snapshots a previous run of the member
/// did not finish sending (it stopped mid-stream).
fn remove_leftovers(snap_dir: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(snap_dir) else {
        return;
    };
    for e in entries.filter_map(|e| e.ok()) {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if (name.starts_with(TEMP_PREFIX) || name.starts_with(RESTORE_PREFIX))
            && name.ends_with(".partial")
        {
            match std::fs::remove_file(e.path()) {
                Ok(()) => {
                    tracing::info!(file = %e.path().display(), "removed an unfinished AdminServer snapshot")
                }
                Err(err) => {
                    tracing::warn!(file = %e.path().display(), "cannot remove an unfinished AdminServer snapshot: {err}")
                }
            }
        }
    }
}

fn json(status: u16, v: &serde_json::Value) -> Response {
    let body = serde_json::to_string_pretty(v).unwrap_or_default();
    Response::new(status, "application/json", body)
}

impl Shared {
    fn allow_snapshot(&self) -> bool {
        self.allow(&self.last_snapshot)
    }

    fn allow_restore(&self) -> bool {
        self.allow(&self.last_restore)
    }

    /// ZooKeeper's `RateLimiter(1, interval)`: one in each interval.
    fn allow(&self, last: &Mutex<Option<Instant>>) -> bool {
        let mut last = last.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        if last.is_some_and(|t| now.duration_since(t) <= self.rate_limit) {
            return false;
        }
        *last = Some(now);
        true
    }
}

/// Writes the snapshot to a temporary file and answers with it (or, with
/// `streaming=false`, with its zxid and size only, as ZooKeeper does).
async fn snapshot(
    shared: &Shared,
    job: crate::core::server::SnapshotJob,
    streaming: bool,
    json_answer: &serde_json::Value,
    peer: SocketAddr,
) -> Response {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let path = shared
        .snap_dir
        .join(format!("{TEMP_PREFIX}{}-{n}.partial", std::process::id()));
    let zxid = job.zxid;
    let p = path.clone();
    let written = tokio::task::spawn_blocking(move || -> std::io::Result<u64> {
        use std::io::Write as _;
        let mut w = std::io::BufWriter::new(std::fs::File::create(&p)?);
        wazoo_storage::write_snapshot_to(&mut w, job.zxid, |w| {
            crate::member::write_snapshot_payload(&job, w)
        })?;
        w.flush()?;
        drop(w);
        Ok(std::fs::metadata(&p)?.len())
    })
    .await;
    let size = match written {
        Ok(Ok(size)) => size,
        Ok(Err(e)) => {
            tracing::warn!(%peer, "AdminServer snapshot failed: {e}");
            let _ = std::fs::remove_file(&path);
            return json(500, json_answer);
        }
        Err(e) => {
            tracing::warn!(%peer, "AdminServer snapshot failed: {e}");
            let _ = std::fs::remove_file(&path);
            return json(500, json_answer);
        }
    };
    tracing::info!(%peer, zxid = format!("0x{:x}", zxid.0), bytes = size, streaming, "AdminServer snapshot");
    let headers = vec![
        ("last_zxid", format!("0x{:x}", zxid.0)),
        ("snapshot_size", size.to_string()),
    ];
    if !streaming {
        let _ = std::fs::remove_file(&path);
        let mut r = json(200, json_answer);
        r.headers = headers;
        return r;
    }
    let mut r = Response::new(200, "application/octet-stream", Vec::new());
    r.headers = headers;
    r.temp_file = Some((path, size));
    r
}

/// `restore`, the asker authorized: the body (in its temporary file) is
/// checked whole, off the member's thread, then handed to the core loop
/// as a txn; answered once it is applied (see the module doc).
async fn restore(
    shared: &Shared,
    body: Option<Arc<crate::http::BodyFile>>,
    json_answer: serde_json::Value,
    peer: SocketAddr,
) -> Response {
    let fail = |status: u16, why: String| {
        let mut v = json_answer.clone();
        v["error"] = why.into();
        json(status, &v)
    };
    // ZooKeeper's order: no body (400), then the rate limit (429).
    let Some(body) = body else {
        return fail(
            400,
            "the request has no body: POST the snapshot that GET <commandURL>/snapshot streams"
                .into(),
        );
    };
    if !shared.allow_restore() {
        tracing::warn!(%peer, "AdminServer restore request was rate limited");
        return json(429, &json_answer);
    }
    let checked = tokio::task::spawn_blocking(move || check_restore(&body.path)).await;
    let txn = match checked {
        Ok(Ok(txn)) => txn,
        Ok(Err(why)) => {
            tracing::warn!(%peer, "AdminServer restore refused: {why}");
            return fail(500, why);
        }
        Err(e) => return fail(500, format!("the snapshot could not be checked: {e}")),
    };
    let snapshot_zxid = txn.snapshot_zxid;
    let (tx, rx) = oneshot::channel();
    if shared
        .events
        .send(Event::Restore { txn, reply: tx })
        .await
        .is_err()
    {
        return fail(503, "the member is shutting down".into());
    }
    match tokio::time::timeout(RESTORE_WAIT, rx).await {
        Ok(Ok(Ok(zxid))) => {
            tracing::info!(%peer, zxid = format!("0x{:x}", zxid.0), snapshot_zxid = format!("0x{snapshot_zxid:x}"), "AdminServer restore applied");
            let mut v = json_answer;
            v["last_zxid"] = zxid.to_wire().into();
            json(200, &v)
        }
        Ok(Ok(Err(why))) => {
            tracing::warn!(%peer, "AdminServer restore not applied: {why}");
            fail(500, why)
        }
        Ok(Err(_)) => fail(503, "the member is shutting down".into()),
        Err(_) => fail(
            503,
            format!(
                "the restore was not applied within {} s (no leader?); it may still be",
                RESTORE_WAIT.as_secs()
            ),
        ),
    }
}

/// Reads and checks a snapshot file's bytes (checksum, envelope, body,
/// the tree's invariants) and makes the restore txn of them (its token
/// is the core loop's to set).
fn check_restore(path: &std::path::Path) -> Result<Box<crate::core::txn::RestoreTxn>, String> {
    let payload = wazoo_storage::read_snapshot(path).map_err(|e| {
        format!("not a wazoo snapshot (what GET <commandURL>/snapshot streams): {e}")
    })?;
    let envelope = wazoo_storage::read_snapshot_envelope(&payload)
        .map_err(|e| format!("the snapshot does not load: {e}"))?;
    let (_, tree) = crate::core::snapshot::read_snapshot_body(envelope.version, envelope.body)
        .map_err(|e| format!("the snapshot does not load: {e}"))?;
    tree.check_invariants()
        .map_err(|e| format!("the snapshot's tree is not consistent: {e}"))?;
    Ok(Box::new(crate::core::txn::RestoreTxn {
        token: 0,
        snapshot_zxid: envelope.zxid.to_wire(),
        body_version: envelope.version,
        sessions: envelope.sessions,
        body: Arc::from(envelope.body),
    }))
}

#[cfg(test)]
mod tests {
    // A restore is one log record: the largest the command takes, with
    // the txn's own fields, fits the log's record bound.
    #[test]
    fn the_largest_restore_fits_one_log_record() {
        let record_max = wazoo_storage::LogOptions::default().max_record_bytes as u64;
        assert!(super::RESTORE_BYTES_MAX + 1024 <= record_max);
    }
}
