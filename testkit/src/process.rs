//! Child server processes: spawned so they die with the test process, logged
//! to a file, killed on drop.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// What to run; kept so the same process can be started again.
#[derive(Clone, Debug)]
pub(crate) struct ProcessSpec {
    /// Short name for messages, e.g. "zookeeper" or "wazoo member 2".
    pub name: String,
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    /// stdout and stderr are appended here (across restarts).
    pub log: PathBuf,
}

/// A running (or killed) server process.
pub(crate) struct ServerProcess {
    spec: ProcessSpec,
    child: Option<Child>,
}

impl ServerProcess {
    pub(crate) fn spawn(spec: ProcessSpec) -> anyhow::Result<ServerProcess> {
        let mut process = ServerProcess { spec, child: None };
        process.respawn()?;
        Ok(process)
    }

    /// Like [`respawn`](Self::respawn), with `extra` appended to the
    /// arguments of this start only.
    pub(crate) fn respawn_with(&mut self, extra: &[&str]) -> anyhow::Result<()> {
        let saved = self.spec.args.clone();
        self.spec.args.extend(extra.iter().map(|a| a.to_string()));
        let result = self.respawn();
        self.spec.args = saved;
        result
    }

    /// Starts the process again (after [`kill`](Self::kill)); a no-op while it runs.
    pub(crate) fn respawn(&mut self) -> anyhow::Result<()> {
        if self.is_running() {
            return Ok(());
        }
        let spec = &self.spec;
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&spec.log)
            .map_err(|e| anyhow::anyhow!("cannot open log file {}: {e}", spec.log.display()))?;
        let mut cmd = Command::new(&spec.program);
        cmd.args(&spec.args)
            .current_dir(&spec.cwd)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        for (k, v) in &spec.env {
            cmd.env(k, v);
        }
        let child = spawn_tied_to_this_process(cmd).map_err(|e| {
            anyhow::anyhow!(
                "cannot start {} ({} {}): {e}",
                spec.name,
                spec.program.display(),
                spec.args.join(" ")
            )
        })?;
        self.child = Some(child);
        Ok(())
    }

    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub(crate) fn log_path(&self) -> &Path {
        &self.spec.log
    }

    /// The exit status if the process has exited (it is then reaped).
    pub(crate) fn exit_status(&mut self) -> Option<ExitStatus> {
        let child = self.child.as_mut()?;
        match child.try_wait() {
            Ok(Some(status)) => {
                self.child = None;
                Some(status)
            }
            Ok(None) | Err(_) => None,
        }
    }

    pub(crate) fn is_running(&mut self) -> bool {
        self.child.is_some() && self.exit_status().is_none()
    }

    /// SIGKILL and reap. Safe to call when it is not running.
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM, wait up to `grace` for it to exit, then SIGKILL.
    /// Returns the exit status if it exited on its own.
    pub(crate) fn terminate(&mut self, grace: Duration) -> Option<ExitStatus> {
        let mut child = self.child.take()?;
        // SAFETY: plain kill(2) on our own child's pid, which is not reaped yet.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        None
    }

    /// The last `lines` lines of the log, for error messages.
    pub(crate) fn log_tail(&self, lines: usize) -> String {
        log_tail(&self.spec.log, lines)
    }

    /// Waits until `ready()` holds, the process exits, or `timeout` passes.
    /// On failure the process is killed and the error carries the log tail.
    pub(crate) fn wait_ready(
        &mut self,
        addr: SocketAddr,
        timeout: Duration,
        what: &str,
        mut ready: impl FnMut() -> bool,
    ) -> Result<(), StartError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.exit_status() {
                let tail = self.log_tail(40);
                return Err(StartError {
                    address_in_use: mentions_address_in_use(&tail),
                    message: format!(
                        "{} exited ({status}) before {what} on {addr}; log {}:\n{tail}",
                        self.spec.name,
                        self.spec.log.display()
                    ),
                });
            }
            if ready() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                self.kill();
                let tail = self.log_tail(40);
                return Err(StartError {
                    address_in_use: mentions_address_in_use(&tail),
                    message: format!(
                        "{} did not reach \"{what}\" on {addr} within {timeout:?} (killed it); log {}:\n{tail}",
                        self.spec.name,
                        self.spec.log.display()
                    ),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if std::thread::panicking() && self.child.is_some() {
            eprintln!(
                "--- {} log tail ({}) ---\n{}",
                self.spec.name,
                self.spec.log.display(),
                self.log_tail(30)
            );
        }
        self.kill();
    }
}

/// A failed start; `address_in_use` says a retry on other ports may work.
#[derive(Debug)]
pub(crate) struct StartError {
    pub address_in_use: bool,
    pub message: String,
}

fn mentions_address_in_use(log: &str) -> bool {
    log.contains("Address already in use") || log.contains("AddrInUse")
}

/// The last `lines` lines of a file (reads at most its last 64 KiB).
pub(crate) fn log_tail(path: &Path, lines: usize) -> String {
    let read = || -> io::Result<String> {
        let mut file = File::open(path)?;
        let len = file.metadata()?.len();
        file.seek(SeekFrom::Start(len.saturating_sub(64 * 1024)))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };
    match read() {
        Ok(text) => {
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(e) => format!("(cannot read {}: {e})", path.display()),
    }
}

type SpawnRequest = (Command, mpsc::Sender<io::Result<Child>>);

/// Spawns `cmd` so that the kernel SIGKILLs it if this test process dies
/// (`PR_SET_PDEATHSIG`), whatever way it dies: a test binary that is killed
/// or aborts leaves no server behind.
///
/// The death signal fires when the *thread* that forked the child exits, not
/// the process, and test harnesses run each test on its own short-lived
/// thread. So every child is forked by one spawner thread that lives as long
/// as the process.
fn spawn_tied_to_this_process(cmd: Command) -> io::Result<Child> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("testkit-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(spawn_with_death_signal(&mut cmd));
                }
            })
            .expect("cannot start the testkit spawner thread");
        Mutex::new(tx)
    });
    let (reply_tx, reply_rx) = mpsc::channel();
    spawner
        .lock()
        .unwrap()
        .send((cmd, reply_tx))
        .map_err(|_| io::Error::other("testkit spawner thread is gone"))?;
    reply_rx
        .recv()
        .map_err(|_| io::Error::other("testkit spawner thread dropped the request"))?
}

fn spawn_with_death_signal(cmd: &mut Command) -> io::Result<Child> {
    // SAFETY: getpid is async-signal-safe and has no preconditions.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the closure runs in the forked child before exec and only
    // calls the async-signal-safe prctl(2) and getppid(2).
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The parent may have died between fork and prctl.
            if libc::getppid() != parent {
                return Err(io::Error::other("test process exited during spawn"));
            }
            Ok(())
        });
    }
    cmd.spawn()
}
