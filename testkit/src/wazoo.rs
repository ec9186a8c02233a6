//! The `wazoo` server binary of this workspace, run as a child process:
//! `wazoo serve --config <dir>/zoo.cfg`, logging to `<dir>/wazoo.log`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Duration;

use tempfile::TempDir;

use crate::config::{ServerOptions, ZooCfg};
use crate::process::{ProcessSpec, ServerProcess, StartError};
use crate::{four_letter_word, free_port, loopback};

const START_ATTEMPTS: usize = 3;

/// Where the `wazoo` binary is, in this order:
/// 1. `$WAZOO_BIN`;
/// 2. `$CARGO_TARGET_DIR/debug/wazoo`;
/// 3. the cargo profile directory of the running test binary (a test runs
///    from `<target>/<profile>/deps/`, the binary sits in `<target>/<profile>/`);
/// 4. `<workspace>/target/debug/wazoo`.
///
/// The test binary does not build it: `cargo build` (or `scripts/test.sh`,
/// which runs `cargo build --workspace --all-targets`) must have run first.
pub fn wazoo_bin() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("WAZOO_BIN") {
        let path = PathBuf::from(path);
        anyhow::ensure!(
            path.is_file(),
            "WAZOO_BIN={} does not name a file",
            path.display()
        );
        return Ok(path);
    }
    let mut candidates = Vec::new();
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        candidates.push(PathBuf::from(dir).join("debug").join("wazoo"));
    }
    if let Ok(exe) = std::env::current_exe() {
        if let Some(dir) = exe.parent() {
            if dir.file_name().is_some_and(|n| n == "deps") {
                if let Some(profile_dir) = dir.parent() {
                    candidates.push(profile_dir.join("wazoo"));
                }
            }
            candidates.push(dir.join("wazoo"));
        }
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("testkit lives inside the workspace");
    candidates.push(workspace.join("target").join("debug").join("wazoo"));

    if let Some(found) = candidates.iter().find(|p| p.is_file()) {
        return Ok(found.clone());
    }
    let tried: Vec<String> = candidates.iter().map(|p| p.display().to_string()).collect();
    anyhow::bail!(
        "the wazoo binary was not found (tried {}); run `cargo build -p wazoo` (or \
         `cargo build --workspace --all-targets`) first, or set WAZOO_BIN",
        tried.join(", ")
    )
}

/// A `wazoo` server on a free loopback port with its own data directory.
///
/// Killed (SIGKILL) when dropped; [`kill`](Self::kill) + [`restart`](Self::restart)
/// brings it back on the same port and data directory, as durability tests need.
pub struct WazooServer {
    // Declared before `dir`: the process dies before its directory goes.
    process: ServerProcess,
    port: u16,
    admin: Option<SocketAddr>,
    startup_timeout: Duration,
    dir: TempDir,
}

impl WazooServer {
    /// Starts `wazoo serve --config <generated zoo.cfg>` and waits until
    /// `ruok` answers `imok`.
    pub fn start(opts: ServerOptions) -> anyhow::Result<WazooServer> {
        let binary = match &opts.binary {
            Some(path) => path.clone(),
            None => wazoo_bin()?,
        };
        let mut last_error = String::new();
        for _ in 0..START_ATTEMPTS {
            let dir = tempfile::Builder::new().prefix("wazoo-server-").tempdir()?;
            let data_dir = dir.path().join("data");
            std::fs::create_dir(&data_dir)?;
            let port = free_port();
            let mut cfg = ZooCfg::base(&opts, &data_dir, port);
            cfg.set_wazoo_defaults();
            cfg.apply_extra(&opts.extra_cfg)?;
            let cfg_path = dir.path().join("zoo.cfg");
            std::fs::write(&cfg_path, cfg.render())?;

            let mut args = vec![
                "serve".to_string(),
                "--config".to_string(),
                cfg_path.display().to_string(),
            ];
            args.extend(opts.extra_args.iter().cloned());
            let mut env = vec![("RUST_BACKTRACE".to_string(), "1".to_string())];
            if std::env::var_os("RUST_LOG").is_none() {
                env.push(("RUST_LOG".to_string(), "info".to_string()));
            }
            env.extend(opts.env.iter().cloned());
            let spec = ProcessSpec {
                name: "wazoo".to_string(),
                program: binary.clone(),
                args,
                env,
                cwd: dir.path().to_path_buf(),
                log: dir.path().join("wazoo.log"),
            };
            let mut server = WazooServer {
                process: ServerProcess::spawn(spec)?,
                port,
                admin: cfg.admin_addr(),
                startup_timeout: opts.startup_timeout,
                dir,
            };
            match server.wait_imok() {
                Ok(()) => return Ok(server),
                Err(e) if e.address_in_use => last_error = e.message,
                Err(e) => anyhow::bail!(e.message),
            }
        }
        anyhow::bail!("wazoo failed to start {START_ATTEMPTS} times: {last_error}")
    }

    fn wait_imok(&mut self) -> Result<(), StartError> {
        let addr = self.addr();
        self.process
            .wait_ready(addr, self.startup_timeout, "ruok -> imok", || {
                four_letter_word(addr, "ruok").is_ok_and(|a| a == "imok")
            })
    }

    pub fn addr(&self) -> SocketAddr {
        loopback(self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Where its AdminServer listens ([`ServerOptions::admin_server`]).
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin
    }

    /// `127.0.0.1:<port>`, for any ZooKeeper client.
    pub fn connect_string(&self) -> String {
        self.addr().to_string()
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    pub fn config_path(&self) -> PathBuf {
        self.dir.path().join("zoo.cfg")
    }

    pub fn log_path(&self) -> &Path {
        self.process.log_path()
    }

    pub fn log_tail(&self, lines: usize) -> String {
        self.process.log_tail(lines)
    }

    pub fn pid(&self) -> Option<u32> {
        self.process.pid()
    }

    pub fn is_running(&mut self) -> bool {
        self.process.is_running()
    }

    /// kill -9: the process gets no chance to flush or clean up.
    pub fn kill(&mut self) {
        self.process.kill();
    }

    /// SIGTERM, then SIGKILL if it has not exited within `grace`. Returns the
    /// exit status if it exited by itself.
    pub fn stop(&mut self, grace: Duration) -> Option<ExitStatus> {
        self.process.terminate(grace)
    }

    /// Starts the server again on the same port and data directory (killing
    /// it first if it runs) and waits for `imok`.
    pub fn restart(&mut self) -> anyhow::Result<()> {
        self.process.kill();
        self.process.respawn()?;
        self.wait_imok().map_err(|e| anyhow::anyhow!(e.message))
    }

    /// [`restart`](Self::restart) with `extra` appended to the `wazoo serve`
    /// arguments of this start only (a later restart runs without them).
    pub fn restart_with_args(&mut self, extra: &[&str]) -> anyhow::Result<()> {
        self.process.kill();
        self.process.respawn_with(extra)?;
        self.wait_imok().map_err(|e| anyhow::anyhow!(e.message))
    }
}
