//! The audit log file (`audit.enable=true`; ZooKeeper Audit Logging): the
//! records the core makes ([`crate::core::audit`]), stamped with the time
//! and written as ZooKeeper's default logback pattern for its audit
//! logger writes them (`%d{ISO8601} %p %c{2}: %m%n`):
//!
//! ```text
//! 2026-11-28 19:02:11,507 INFO audit.Slf4jAuditLogger: session=0x1000c2a6f4d0000 <TAB> user=127.0.0.1 <TAB> ip=127.0.0.1 <TAB> operation=create <TAB> znode=/a <TAB> znode_type=persistent <TAB> result=success
//! ```
//!
//! (Fields separated by tabs, shown `<TAB>` here; `ERROR` for a failure,
//! as ZooKeeper's `Slf4jAuditLogger` logs one; the time in UTC.) The file
//! is `wazoo.audit.file`, or `<dataDir>/zookeeper_audit.log`; it is opened
//! for appending, so an external rotation that truncates it (logrotate's
//! `copytruncate`) works; one that moves it away needs a restart for the
//! member to open a new file.
//!
//! Nothing is lost silently: the member writes the records of a batch of
//! outputs before it hands the batch's replies to their connections, and
//! a record it cannot write (a full disk, an I/O error) stops the member
//! with an error naming the file; no reply of that batch is sent. Memory
//! is bounded: records wait in a buffer of at most
//! [`AUDIT_BUFFER_BYTES_MAX`] (plus one record), written out when it is
//! full and at the end of every batch.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::config::Config;
use crate::core::audit::{AuditOp, AuditRecord, AuditResult};

/// The buffered records written out at once at most.
pub(crate) const AUDIT_BUFFER_BYTES_MAX: usize = 64 << 10;

/// The audit log's file name in dataDir when `wazoo.audit.file` is not set
/// (the name ZooKeeper's sample logback configuration gives it).
pub const DEFAULT_AUDIT_FILE: &str = "zookeeper_audit.log";

/// An open audit log.
pub(crate) struct AuditLog {
    path: PathBuf,
    file: File,
    buf: Vec<u8>,
    /// The user of the server's own records (serverStart, serverStop,
    /// ephemeral cleanup): the user the process runs as, as ZooKeeper
    /// logs its system user when it has no SASL login of its own.
    server_user: String,
    /// A write failed: the member stops, and sends none of the replies
    /// its batch made.
    failed: bool,
}

/// Where zoo.cfg puts the audit log, if audit is on.
pub fn audit_path(cfg: &Config) -> Option<PathBuf> {
    cfg.audit_enabled.then(|| {
        cfg.audit_file
            .clone()
            .unwrap_or_else(|| cfg.data_dir.join(DEFAULT_AUDIT_FILE))
    })
}

impl AuditLog {
    /// Opens the audit log zoo.cfg asks for and writes its serverStart
    /// record; none when audit is off. A file that cannot be opened or
    /// written stops the start, naming it.
    pub(crate) fn start(cfg: &Config, wall_ms: i64) -> Result<Option<AuditLog>> {
        let Some(path) = audit_path(cfg) else {
            return Ok(None);
        };
        let mut log = AuditLog::open(&path, process_user())?;
        log.server(AuditOp::ServerStart, AuditResult::Success, wall_ms)?;
        tracing::info!(path = %path.display(), "audit log enabled");
        Ok(Some(log))
    }

    fn open(path: &Path, server_user: String) -> Result<AuditLog> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| {
                format!(
                    "cannot open the audit log {} (audit.enable=true; the file is \
                     wazoo.audit.file, or {DEFAULT_AUDIT_FILE} in dataDir)",
                    path.display()
                )
            })?;
        Ok(AuditLog {
            path: path.to_path_buf(),
            file,
            buf: Vec::with_capacity(AUDIT_BUFFER_BYTES_MAX),
            server_user,
            failed: false,
        })
    }

    /// Adds a record, written out once the buffer is full or at
    /// [`AuditLog::flush`].
    pub(crate) fn record(&mut self, r: &AuditRecord, wall_ms: i64) -> Result<()> {
        self.buf
            .extend_from_slice(line(r, &self.server_user, wall_ms).as_bytes());
        if self.buf.len() >= AUDIT_BUFFER_BYTES_MAX {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes out every buffered record.
    pub(crate) fn flush(&mut self) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let written = self.file.write_all(&self.buf);
        self.buf.clear();
        self.failed |= written.is_err();
        written.with_context(|| {
            format!(
                "cannot write the audit log {}: stopping, as no audited operation may go \
                 unrecorded (free space or fix the file, then restart the member)",
                self.path.display()
            )
        })
    }

    /// Whether a write failed (the member is stopping).
    pub(crate) fn failed(&self) -> bool {
        self.failed
    }

    /// A record of the server itself, written at once.
    pub(crate) fn server(&mut self, op: AuditOp, result: AuditResult, wall_ms: i64) -> Result<()> {
        self.record(&AuditRecord::server(op, result), wall_ms)?;
        self.flush()
    }
}

/// Records `serverStart` `failure`, as ZooKeeper does when its start
/// fails: best effort (the file may be why it failed), never an error.
pub(crate) fn start_failed(path: &Path) {
    let wall_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let written = AuditLog::open(path, process_user())
        .and_then(|mut log| log.server(AuditOp::ServerStart, AuditResult::Failure, wall_ms));
    if let Err(e) = written {
        tracing::warn!("cannot record the failed start in the audit log: {e:#}");
    }
}

/// One line of the audit log: the time, the level, the logger and the
/// record, as ZooKeeper's default pattern writes them.
pub fn line(r: &AuditRecord, server_user: &str, wall_ms: i64) -> String {
    let level = if r.result == AuditResult::Failure {
        "ERROR"
    } else {
        "INFO"
    };
    format!(
        "{} {level} audit.Slf4jAuditLogger: {}\n",
        iso8601_utc(wall_ms),
        r.line(server_user)
    )
}

/// `yyyy-MM-dd HH:mm:ss,SSS` in UTC (logback's `ISO8601` date format).
pub fn iso8601_utc(wall_ms: i64) -> String {
    let ms = wall_ms.rem_euclid(1000);
    let secs = wall_ms.div_euclid(1000);
    let (days, day_secs) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02},{ms:03}",
        day_secs / 3600,
        day_secs % 3600 / 60,
        day_secs % 60
    )
}

/// The name of the user the process runs as (Java's `user.name`), or
/// `<NA>` as Java says when it has none.
pub fn process_user() -> String {
    // SAFETY: getpwuid_r writes into the buffers given, whose sizes it is
    // told; the name it points to lives in `buf`, read before it goes.
    unsafe {
        let uid = libc::getuid();
        let mut pwd: libc::passwd = std::mem::zeroed();
        let mut buf = vec![0 as libc::c_char; 4096];
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        let rc = libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut result);
        if rc == 0 && !result.is_null() && !pwd.pw_name.is_null() {
            let name = std::ffi::CStr::from_ptr(pwd.pw_name).to_string_lossy();
            if !name.is_empty() {
                return name.into_owned();
            }
        }
    }
    std::env::var("USER").unwrap_or_else(|_| "<NA>".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    // ZooKeeper Audit Logging, "ZooKeeper Audit Log Configuration": the
    // default pattern `%d{ISO8601} %p %c{2}: %m%n`.
    #[test]
    fn a_line_is_the_time_level_logger_and_record_as_zookeepers_pattern_writes_them() {
        let start = AuditRecord::server(AuditOp::ServerStart, AuditResult::Success);
        assert_eq!(
            line(&start, "zk", 1_795_892_531_507),
            "2026-11-28 19:02:11,507 INFO audit.Slf4jAuditLogger: \
             user=zk\toperation=serverStart\tresult=success\n"
        );
        let failed = AuditRecord::server(AuditOp::ServerStart, AuditResult::Failure);
        assert!(line(&failed, "zk", 0).starts_with("1970-01-01 00:00:00,000 ERROR audit."));
    }

    #[test]
    fn timestamps_are_civil_utc_dates() {
        assert_eq!(iso8601_utc(951_782_400_000), "2000-02-29 00:00:00,000");
        assert_eq!(iso8601_utc(-1), "1969-12-31 23:59:59,999");
        assert_eq!(iso8601_utc(4_102_444_799_999), "2099-12-31 23:59:59,999");
    }

    #[test]
    fn the_server_user_is_the_processs() {
        assert!(!process_user().is_empty());
    }

    // A full disk is an error that names the file, never a record lost
    // quietly (/dev/full answers every write with ENOSPC).
    #[test]
    fn a_write_to_a_full_disk_is_an_error_naming_the_file() {
        let mut log = AuditLog::open(Path::new("/dev/full"), "zk".into()).unwrap();
        let r = AuditRecord::server(AuditOp::ServerStop, AuditResult::Invoked);
        log.record(&r, 0).unwrap();
        let e = format!("{:#}", log.flush().unwrap_err());
        assert!(e.contains("/dev/full"), "{e}");
        assert!(e.contains("No space left on device"), "{e}");
    }

    #[test]
    fn records_wait_in_a_bounded_buffer_and_are_written_when_it_fills() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let mut log = AuditLog::open(&path, "zk".into()).unwrap();
        let r = AuditRecord::server(AuditOp::ServerStart, AuditResult::Success);
        let one = line(&r, "zk", 0).len();
        let mut n = 0;
        while std::fs::metadata(&path).unwrap().len() == 0 {
            log.record(&r, 0).unwrap();
            n += 1;
            assert!(
                log.buf.len() < AUDIT_BUFFER_BYTES_MAX,
                "never over the bound"
            );
        }
        assert_eq!(n, AUDIT_BUFFER_BYTES_MAX.div_ceil(one));
        log.flush().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), n);
    }

    #[test]
    fn a_file_that_cannot_be_opened_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let not_a_dir = dir.path().join("file");
        std::fs::write(&not_a_dir, b"").unwrap();
        let path = not_a_dir.join("audit.log");
        let e = format!(
            "{:#}",
            AuditLog::open(&path, "zk".into()).err().expect("refused")
        );
        assert!(e.contains(&path.display().to_string()), "{e}");
        assert!(e.contains("audit.enable"), "{e}");
    }
}
