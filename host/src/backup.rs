//! `wazoo backup` and `wazoo restore`, and the member's side of a backup
//! (docs/MIGRATION.md, "Backup and restore").
//!
//! A backup is a consistent snapshot of a running member at one zxid, sent
//! over its client port: the member takes the same O(1) copy of its tree
//! and sessions that its own snapshots start from, at the last zxid it
//! applied, and streams it in the format of its snapshot files while it
//! goes on serving. No access to the data directory is needed.
//!
//! The exchange, after the four bytes `bkup` open a connection (where a
//! four-letter word or a ConnectRequest would):
//!
//! ```text
//! request  := "bkup" length:u32 credentials[length]       (1 <= length <= 1024)
//! response := "WZBK" 0x00 snapshot-file-bytes EOF          (the backup)
//!           | "WZBK" 0x01 message(UTF-8) EOF                (refused)
//! ```
//!
//! Credentials are `user:password` of the digest scheme, and only the super
//! user (`zookeeper.DigestAuthenticationProvider.superDigest`) may take a
//! backup: a backup holds every node, whatever its ACL says, and the super
//! user is the one identity ZooKeeper lets read every node. A member
//! without a super user refuses every backup. ZooKeeper 3.9's admin
//! `snapshot` command is the precedent; it too needs authentication.
//!
//! Bounds: credentials are at most 1 KiB and must arrive within 10 s; one
//! backup runs at a time per process (a second is refused); the snapshot
//! goes out in 64 KiB chunks through a queue of four, and a receiver that
//! takes no chunk for 30 s is cut off, which releases the snapshot copy
//! (it keeps nodes that later writes replaced alive while it is held).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

use crate::config::Config;
use crate::core::server::SnapshotJob;
use crate::member::{read_snapshot_payload, write_snapshot_payload, Event};
use wazoo_proto::Zxid;

/// The opening word of a backup request on the client port.
pub const WORD: &[u8; 4] = b"bkup";
/// The first bytes of every answer.
pub const MAGIC: &[u8; 4] = b"WZBK";
const OK: u8 = 0;
const REFUSED: u8 = 1;
const MAX_CREDENTIALS: u32 = 1024;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the receiver may take one chunk (and the core loop to hand
/// over its snapshot copy).
const STALL_TIMEOUT: Duration = Duration::from_secs(30);
const CHUNK: usize = 64 << 10;
const QUEUED_CHUNKS: usize = 4;

/// Set while this process sends a backup.
static RUNNING: AtomicBool = AtomicBool::new(false);

/// Clears [`RUNNING`] when the backup ends, however it ends.
struct Running;

impl Running {
    fn acquire() -> Option<Running> {
        RUNNING
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .ok()
            .map(|_| Running)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        RUNNING.store(false, Ordering::Release);
    }
}

/// Whether `credentials` (`user:password`) are the configured super user's.
pub fn is_super(cfg: &Config, credentials: &[u8]) -> Result<(), &'static str> {
    let Some(expected) = cfg.super_digest.as_deref() else {
        return Err("backups are refused: this server has no super user (zookeeper.DigestAuthenticationProvider.superDigest)");
    };
    let text = std::str::from_utf8(credentials).map_err(|_| "malformed credentials")?;
    let (user, password) = text.split_once(':').ok_or("malformed credentials")?;
    if wazoo_client::digest_id(user, password) == expected {
        Ok(())
    } else {
        Err("backups are refused: not the super user")
    }
}

/// The member's side: answers one `bkup` request on a client connection
/// whose first four bytes were [`WORD`].
pub async fn serve(
    mut rd: impl tokio::io::AsyncRead + Unpin,
    mut wr: impl tokio::io::AsyncWrite + Unpin,
    core: &mpsc::Sender<Event>,
    cfg: &Config,
    peer: std::net::SocketAddr,
) {
    let request = async {
        let len = rd.read_u32().await.ok()?;
        if len == 0 || len > MAX_CREDENTIALS {
            return None;
        }
        let mut creds = vec![0u8; len as usize];
        rd.read_exact(&mut creds).await.ok()?;
        Some(creds)
    };
    let creds = match tokio::time::timeout(REQUEST_TIMEOUT, request).await {
        Ok(Some(c)) => c,
        _ => return refuse(wr, peer, "malformed backup request").await,
    };
    if let Err(why) = is_super(cfg, &creds) {
        return refuse(wr, peer, why).await;
    }
    let Some(_running) = Running::acquire() else {
        return refuse(
            wr,
            peer,
            "a backup is already running; try again when it ends",
        )
        .await;
    };
    let (tx, rx) = oneshot::channel();
    if core.send(Event::Backup { reply: tx }).await.is_err() {
        return;
    }
    let job = match tokio::time::timeout(STALL_TIMEOUT, rx).await {
        Ok(Ok(job)) => job,
        _ => return refuse(wr, peer, "the member is shutting down").await,
    };
    let zxid = job.zxid;
    let (chunks_tx, mut chunks) = mpsc::channel::<Vec<u8>>(QUEUED_CHUNKS);
    let writer = tokio::task::spawn_blocking(move || serialize(job, chunks_tx));
    let mut sent = 0u64;
    let mut ok = wr.write_all(MAGIC).await.is_ok() && wr.write_all(&[OK]).await.is_ok();
    while ok {
        match chunks.recv().await {
            Some(c) => {
                ok = matches!(
                    tokio::time::timeout(STALL_TIMEOUT, wr.write_all(&c)).await,
                    Ok(Ok(()))
                );
                sent += c.len() as u64;
            }
            None => break,
        }
    }
    // Dropping the queue stops the serializer if the receiver went away.
    drop(chunks);
    let serialized = writer.await.map_err(|e| e.to_string()).and_then(|r| r);
    match (ok, serialized) {
        (true, Ok(())) => {
            let _ = wr.shutdown().await;
            tracing::info!(%peer, zxid = format!("0x{zxid:x}"), bytes = sent, "backup sent");
        }
        (_, Err(e)) => tracing::warn!(%peer, "backup failed: {e}"),
        (false, _) => {
            tracing::warn!(%peer, bytes = sent, "backup receiver went away or stalled; cut off")
        }
    }
}

async fn refuse(mut wr: impl tokio::io::AsyncWrite + Unpin, peer: std::net::SocketAddr, why: &str) {
    tracing::warn!(%peer, "backup refused: {why}");
    let mut answer = Vec::with_capacity(5 + why.len());
    answer.extend_from_slice(MAGIC);
    answer.push(REFUSED);
    answer.extend_from_slice(why.as_bytes());
    let _ = tokio::time::timeout(REQUEST_TIMEOUT, wr.write_all(&answer)).await;
    let _ = wr.shutdown().await;
}

/// Serializes the snapshot file's bytes into the chunk queue (blocking).
fn serialize(job: SnapshotJob, tx: mpsc::Sender<Vec<u8>>) -> Result<(), String> {
    struct Chunks {
        tx: mpsc::Sender<Vec<u8>>,
        buf: Vec<u8>,
    }
    impl Chunks {
        fn send(&mut self) -> std::io::Result<()> {
            let full = std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK));
            self.tx
                .blocking_send(full)
                .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "receiver gone"))
        }
    }
    impl Write for Chunks {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            let n = b.len().min(CHUNK - self.buf.len());
            self.buf.extend_from_slice(&b[..n]);
            if self.buf.len() == CHUNK {
                self.send()?;
            }
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            if self.buf.is_empty() {
                Ok(())
            } else {
                self.send()
            }
        }
    }
    let mut out = Chunks {
        tx,
        buf: Vec::with_capacity(CHUNK),
    };
    wazoo_storage::write_snapshot_to(&mut out, job.zxid, |w| write_snapshot_payload(&job, w))
        .map_err(|e| e.to_string())
}

/// `wazoo backup`: takes a backup from `server` into `out` (written as
/// `out.partial`, checked, then renamed). Returns the backup's zxid.
pub fn backup(server: &str, out: &Path, credentials: &str) -> Result<Zxid> {
    use std::net::ToSocketAddrs;
    let addr = server
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve {server}"))?
        .next()
        .ok_or_else(|| anyhow!("{server} resolves to no address"))?;
    let mut s = TcpStream::connect_timeout(&addr, REQUEST_TIMEOUT)
        .with_context(|| format!("cannot connect to {server}"))?;
    s.set_read_timeout(Some(STALL_TIMEOUT))?;
    s.set_write_timeout(Some(REQUEST_TIMEOUT))?;
    let creds = credentials.as_bytes();
    if creds.is_empty() || creds.len() > MAX_CREDENTIALS as usize {
        bail!("credentials must be user:password, at most {MAX_CREDENTIALS} bytes");
    }
    let mut request = WORD.to_vec();
    request.extend_from_slice(&(creds.len() as u32).to_be_bytes());
    request.extend_from_slice(creds);
    s.write_all(&request)?;
    let mut head = [0u8; 5];
    s.read_exact(&mut head)
        .with_context(|| format!("{server} closed the connection: not a wazoo member?"))?;
    if &head[..4] != MAGIC {
        bail!("{server} does not answer backups (not a wazoo member?)");
    }
    if head[4] != OK {
        let mut why = String::new();
        let _ = s.take(4096).read_to_string(&mut why);
        bail!("{server}: {why}");
    }
    let partial = out.with_extension("partial");
    let result = (|| -> Result<Zxid> {
        let mut f = std::fs::File::create(&partial)
            .with_context(|| format!("cannot create {}", partial.display()))?;
        std::io::copy(&mut s, &mut f).context("the backup was cut off")?;
        f.sync_all()?;
        let bytes = wazoo_storage::read_snapshot(&partial)
            .map_err(|e| anyhow!("the backup received does not check out: {e}"))?;
        let zxid = read_snapshot_payload(&bytes)?.zxid;
        std::fs::rename(&partial, out)
            .with_context(|| format!("cannot rename to {}", out.display()))?;
        Ok(zxid)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    result
}

/// The credentials `wazoo backup` uses: `--auth`, else `$WAZOO_BACKUP_AUTH`.
pub fn credentials(auth: Option<String>) -> Result<String> {
    auth.or_else(|| std::env::var("WAZOO_BACKUP_AUTH").ok())
        .ok_or_else(|| {
            anyhow!("a backup needs the super user's credentials: --auth user:password or WAZOO_BACKUP_AUTH")
        })
}

/// `wazoo backup` with its output.
pub fn run_backup(server: &str, out: &Path, auth: Option<String>) -> Result<()> {
    let creds = credentials(auth)?;
    let zxid = backup(server, out, &creds)?;
    println!(
        "backup of {server} at zxid 0x{zxid:x} written to {}",
        out.display()
    );
    Ok(())
}

/// A backup file, checked and loaded.
fn load_backup(from: &Path) -> Result<crate::core::member::LoadedSnapshot> {
    let bytes = wazoo_storage::read_snapshot(from)
        .map_err(|e| anyhow!("{} is not a usable backup: {e}", from.display()))?;
    read_snapshot_payload(&bytes).with_context(|| format!("{} does not load", from.display()))
}

/// `wazoo restore`: writes the member `config` configures from a backup.
pub fn run_restore(from: &Path, config: &Path) -> Result<()> {
    let cfg = Config::load(config)?;
    crate::import::ensure_empty(&cfg)?;
    let loaded = load_backup(from)?;
    let zxid = loaded.zxid;
    let installed =
        crate::import::install(&cfg, zxid, loaded.tree, loaded.sessions, loaded.waits, 0)?;
    println!(
        "restored {} (zxid 0x{zxid:x}): {} znodes, {} session(s) into {}; start the member with: wazoo serve --config {}",
        from.display(),
        installed.nodes,
        installed.sessions,
        installed.snapshot.display(),
        config.display()
    );
    Ok(())
}

/// `wazoo restore --zookeeper-data DIR`: writes Apache ZooKeeper's data
/// directory from a backup, the way back from wazoo (docs/MIGRATION.md,
/// "Back to ZooKeeper"): `DIR/version-2/snapshot.<zxid>` in ZooKeeper's
/// own format (with the tree's digest) and the epoch files, which
/// ZooKeeper 3.5 to 3.9 load as their own. `DIR` must hold no snapshot,
/// log or epoch file: nothing of ZooKeeper's is ever overwritten. The
/// file is written whole under a temporary name, synced, then renamed.
pub fn run_restore_to_zookeeper(from: &Path, zk_data: &Path) -> Result<()> {
    let v2 = zk_data.join("version-2");
    ensure_no_zookeeper_data(&v2)?;
    let loaded = load_backup(from)?;
    let zxid = loaded.zxid;
    let snap = crate::import::to_zookeeper(&loaded.tree, &loaded.sessions, zxid)?;
    let file = wazoo_storage::zookeeper::encode_snapshot(&snap);
    std::fs::create_dir_all(&v2).with_context(|| format!("cannot create {}", v2.display()))?;
    // Checked again: a directory filled meanwhile is not written into.
    ensure_no_zookeeper_data(&v2)?;
    let name = format!("snapshot.{:x}", zxid.to_wire());
    if let Err(e) = crate::driver::write_durably(&v2, &name, &file) {
        // ZooKeeper would take a leftover `snapshot.<zxid>.tmp` for a
        // snapshot of an unknown compression.
        let _ = std::fs::remove_file(v2.join(format!("{name}.tmp")));
        return Err(e).with_context(|| format!("cannot write {}", v2.join(&name).display()));
    }
    for epoch_file in ["acceptedEpoch", "currentEpoch"] {
        crate::driver::write_epoch(&v2, epoch_file, zxid.epoch())
            .with_context(|| format!("cannot write {}/{epoch_file}", v2.display()))?;
    }
    // Read back as an import reads ZooKeeper's directory.
    let back = wazoo_storage::zookeeper::load_data_dir(zk_data, None).with_context(|| {
        format!(
            "the ZooKeeper data directory just written ({}) does not load",
            zk_data.display()
        )
    })?;
    if back.tree.zxid != zxid.to_wire() || back.tree.digest() != loaded.tree.digest() {
        bail!(
            "the ZooKeeper snapshot just written ({}) reads back differently",
            v2.join(&name).display()
        );
    }
    println!(
        "restored {} (zxid 0x{:x}) for Apache ZooKeeper: {} znodes, {} session(s) into {}; start ZooKeeper with dataDir={}",
        from.display(),
        zxid.to_wire(),
        snap.nodes.len(),
        snap.sessions.len(),
        v2.join(&name).display(),
        zk_data.display()
    );
    Ok(())
}

/// Refuses a ZooKeeper `version-2` directory that holds a snapshot, a log
/// or an epoch file.
fn ensure_no_zookeeper_data(v2: &Path) -> Result<()> {
    let entries = match std::fs::read_dir(v2) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", v2.display())),
    };
    for e in entries {
        let e = e.with_context(|| format!("cannot read {}", v2.display()))?;
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("snapshot.")
            || name.starts_with("log.")
            || name == "acceptedEpoch"
            || name == "currentEpoch"
        {
            bail!(
                "{} holds ZooKeeper data ({name}): refusing to overwrite it (move it aside first)",
                v2.display()
            );
        }
    }
    Ok(())
}
