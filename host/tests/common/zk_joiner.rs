//! A wazoo member that joins a running Apache ZooKeeper ensemble, for the
//! mixed-ensemble tests (host/tests/zk_observer.rs, host/tests/cli.rs).

/// A wazoo member joining a running Apache ZooKeeper ensemble
/// (`wazoo.peers=zookeeper`; docs/MIGRATION.md, "Live migration"): a
/// process started with a hand-written zoo.cfg and myid, killed when
/// dropped.
pub struct ZkJoiner {
    pub child: std::process::Child,
    pub log: std::path::PathBuf,
    pub cfg: std::path::PathBuf,
    pub runs: u32,
    _dir: tempfile::TempDir,
}

impl ZkJoiner {
    /// An observer whose zoo.cfg takes the ZooKeeper members' settings
    /// and server lines from `zk_cfg`, as an operator copies them.
    pub fn start(
        zk_cfg: &std::path::Path,
        my_id: u64,
        client_port: u16,
        extra: &[String],
    ) -> ZkJoiner {
        let zk_text = std::fs::read_to_string(zk_cfg).unwrap();
        let lines: Vec<String> = zk_text
            .lines()
            .filter(|l| {
                let key = l.split('=').next().unwrap_or_default().trim();
                key.starts_with("server.")
                    || ["tickTime", "initLimit", "syncLimit", "maxSessionTimeout"].contains(&key)
            })
            .map(str::to_string)
            .collect();
        ZkJoiner::start_with(&lines, my_id, client_port, extra)
    }

    pub fn start_with(
        lines: &[String],
        my_id: u64,
        client_port: u16,
        extra: &[String],
    ) -> ZkJoiner {
        let dir = tempfile::Builder::new()
            .prefix("wazoo-zk-observer-")
            .tempdir()
            .unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir(&data).unwrap();
        std::fs::write(data.join("myid"), my_id.to_string()).unwrap();
        let mut cfg = String::new();
        for l in lines {
            cfg.push_str(l);
            cfg.push('\n');
        }
        cfg.push_str(&format!(
            "dataDir={}\nclientPort={client_port}\nclientPortAddress=127.0.0.1\nwazoo.peers=zookeeper\nadmin.enableServer=false\nminSessionTimeout=1000\n4lw.commands.whitelist=*\n",
            data.display()
        ));
        let mine = format!("server.{my_id}=");
        if lines
            .iter()
            .any(|l| l.starts_with(&mine) && l.contains(":observer"))
        {
            cfg.push_str("peerType=observer\n");
        }
        for l in extra {
            cfg.push_str(l);
            cfg.push('\n');
        }
        let cfg_path = dir.path().join("zoo.cfg");
        std::fs::write(&cfg_path, cfg).unwrap();
        let log = dir.path().join("wazoo.log");
        ZkJoiner {
            child: spawn(&cfg_path, &log),
            log,
            cfg: cfg_path,
            runs: 1,
            _dir: dir,
        }
    }

    /// Kills the process (no clean shutdown) and starts it again on the
    /// same data directory, logging to a file of its own.
    pub fn restart(&mut self) {
        self.kill();
        self.start_again();
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn start_again(&mut self) {
        self.runs += 1;
        self.log = self.log.with_file_name(format!("wazoo-{}.log", self.runs));
        self.child = spawn(&self.cfg, &self.log);
    }

    /// Every run's log lines about elections, links and syncs.
    pub fn sync_history(&self) -> String {
        let mut out = String::new();
        for run in 1..=self.runs {
            let name = if run == 1 {
                "wazoo.log".to_string()
            } else {
                format!("wazoo-{run}.log")
            };
            out.push_str(&format!("--- run {run}\n"));
            let text = std::fs::read_to_string(self.log.with_file_name(name)).unwrap_or_default();
            for l in text.lines().filter(|l| {
                [
                    "elected",
                    "syncs this member",
                    "link to the ZooKeeper",
                    "connected to",
                    "dropping",
                    "leaving",
                    "recovered",
                    "following in",
                    "truncat",
                    "reload",
                ]
                .iter()
                .any(|k| l.contains(k))
            }) {
                out.push_str(l);
                out.push('\n');
            }
        }
        out
    }

    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// Waits until `srvr` on `addr` says it observes.
    pub fn wait_observing(&mut self, addr: std::net::SocketAddr) {
        self.wait_mode(addr, "observer")
    }

    /// Waits until `srvr` on `addr` says `Mode: {mode}`.
    pub fn wait_mode(&mut self, addr: std::net::SocketAddr, mode: &str) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let want = format!("Mode: {mode}");
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("the wazoo member exited ({status}):\n{}", self.log_tail());
            }
            if wazoo_testkit::four_letter_word(addr, "srvr").is_ok_and(|s| s.contains(&want)) {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the wazoo member did not reach {want} within 60 s:\n{}",
                self.log_tail()
            );
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }
}

fn spawn(cfg: &std::path::Path, log: &std::path::Path) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_wazoo"))
        .args(["serve", "--config"])
        .arg(cfg)
        .env(
            "RUST_LOG",
            std::env::var("OBS_LOG").unwrap_or("info".into()),
        )
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap()
}

impl Drop for ZkJoiner {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
