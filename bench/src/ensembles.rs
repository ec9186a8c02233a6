//! Replicated ensembles of both systems (testkit's [`ZkEnsemble`] and
//! [`WazooEnsemble`]), and what the kernel says about their member
//! processes.
//!
//! testkit's [`TestEnsemble`] has no pid accessor, so a member's process is
//! found by scanning /proc for the process whose command line names the
//! member's `zoo.cfg` (`<member dir>/zoo.cfg`, a unique temporary path; both
//! flavors pass it on the command line and run in that directory). The pid
//! changes when a member is restarted, so it is looked up each time.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use wazoo_testkit::{Flavor, ServerOptions, TestEnsemble, WazooEnsemble, ZkEnsemble};

use crate::servers::{describe_system, ServerConfig, SystemInfo, EXTRA_CFG};

/// A running ensemble of either system. Dropping it kills every member.
pub struct Ensemble {
    flavor: Flavor,
    inner: Box<dyn TestEnsemble>,
    /// `<member dir>/zoo.cfg` of each member, as on its command line.
    cfg_paths: Vec<PathBuf>,
}

impl Ensemble {
    /// Starts `n` members and waits until every one serves (blocking).
    pub fn start(flavor: Flavor, n: usize, cfg: &ServerConfig) -> Result<Ensemble> {
        Ensemble::start_with_plugins(flavor, n, cfg, None)
    }

    /// As [`Ensemble::start`]; wazoo members also get `--plugins DIR`.
    pub fn start_with_plugins(
        flavor: Flavor,
        n: usize,
        cfg: &ServerConfig,
        plugins: Option<&std::path::Path>,
    ) -> Result<Ensemble> {
        Ensemble::start_inner(flavor, n, cfg, plugins, false)
    }

    /// As [`Ensemble::start`], with the members reaching each other
    /// through the testkit's fault proxies ([`Ensemble::isolate`]).
    pub fn start_with_quorum_proxies(
        flavor: Flavor,
        n: usize,
        cfg: &ServerConfig,
    ) -> Result<Ensemble> {
        Ensemble::start_inner(flavor, n, cfg, None, true)
    }

    fn start_inner(
        flavor: Flavor,
        n: usize,
        cfg: &ServerConfig,
        plugins: Option<&std::path::Path>,
        quorum_proxies: bool,
    ) -> Result<Ensemble> {
        let mut opts = ServerOptions::default().startup_timeout(Duration::from_secs(120));
        if quorum_proxies {
            opts = opts.quorum_proxies();
        }
        for line in EXTRA_CFG {
            opts = opts.cfg(*line);
        }
        let (inner, data_dirs): (Box<dyn TestEnsemble>, Vec<PathBuf>) = match flavor {
            Flavor::Zookeeper => {
                // As standalone: testkit's -Xmx1g comes first, ours wins.
                let opts = opts.arg(format!("-Xmx{}", cfg.zk_heap));
                let e = ZkEnsemble::start_with(n, opts)
                    .context("starting an Apache ZooKeeper ensemble")?;
                let dirs = (0..n).map(|i| e.data_dir(i).to_path_buf()).collect();
                (Box::new(e), dirs)
            }
            Flavor::Wazoo => {
                let mut opts = opts.binary(&cfg.wazoo_bin);
                if plugins.is_some() {
                    // The recipe workloads deploy what they run from the
                    // plugins directory: the ten built-ins would only
                    // compile (below the member's priority) into the first
                    // measured rounds.
                    opts = opts.cfg("wazoo.recipes.builtin=false");
                }
                for line in &cfg.wazoo_cfg {
                    opts = opts.cfg(line.clone());
                }
                if let Some(dir) = plugins {
                    opts = opts.arg("--plugins").arg(dir.display().to_string());
                }
                let e = WazooEnsemble::start(n, opts).context("starting a wazoo ensemble")?;
                if let Some(dir) = plugins {
                    let addrs: Vec<_> = (0..n).map(|i| e.addr(i)).collect();
                    crate::servers::wait_for_plugins(&addrs, dir)?;
                }
                let dirs = (0..n).map(|i| e.data_dir(i).to_path_buf()).collect();
                (Box::new(e), dirs)
            }
        };
        let cfg_paths = data_dirs
            .iter()
            .map(|d| {
                d.parent()
                    .map(|m| m.join("zoo.cfg"))
                    .context("a member's data dir has no parent")
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Ensemble {
            flavor,
            inner,
            cfg_paths,
        })
    }

    pub fn flavor(&self) -> Flavor {
        self.flavor
    }

    pub fn len(&self) -> usize {
        self.inner.len()
    }

    pub fn addr(&self, i: usize) -> SocketAddr {
        self.inner.addr(i)
    }

    pub fn addrs(&self) -> Vec<SocketAddr> {
        (0..self.len()).map(|i| self.addr(i)).collect()
    }

    /// Every member, `127.0.0.1:p1,127.0.0.1:p2,...`.
    pub fn connect_string(&self) -> String {
        self.inner.connect_string()
    }

    /// The member reporting `Mode: leader` (blocking, a `srvr` per member).
    pub fn leader(&self) -> Option<usize> {
        self.inner.leader()
    }

    pub fn wait_for_leader(&self, timeout: Duration) -> Result<usize> {
        self.inner.wait_for_leader(timeout)
    }

    /// Each member's `srvr` mode (`None` when down or not serving).
    pub fn modes(&self) -> Vec<Option<String>> {
        (0..self.len()).map(|i| self.inner.mode(i)).collect()
    }

    pub fn log_tail(&self, i: usize, lines: usize) -> String {
        self.inner.log_tail(i, lines)
    }

    /// SIGKILL member `i` (and reap it).
    pub fn kill(&mut self, i: usize) {
        self.inner.kill(i)
    }

    /// Starts member `i` again and waits until it serves (blocking).
    pub fn restart(&mut self, i: usize) -> Result<()> {
        self.inner.restart(i)
    }

    /// Stops member `i` with SIGSTOP: its sockets stay open, nothing
    /// answers. [`Ensemble::resume`] lets it go on.
    pub fn pause(&mut self, i: usize) -> Result<()> {
        self.signal(i, "STOP")
    }

    pub fn resume(&mut self, i: usize) -> Result<()> {
        self.signal(i, "CONT")
    }

    fn signal(&self, i: usize, name: &str) -> Result<()> {
        let pid = self
            .pid(i)
            .with_context(|| format!("{} member {} has no process", self.flavor, i + 1))?;
        let status = std::process::Command::new("kill")
            .arg(format!("-{name}"))
            .arg(pid.to_string())
            .status()?;
        anyhow::ensure!(status.success(), "kill -{name} {pid}: {status}");
        Ok(())
    }

    /// Cuts member `i` off from the others silently (its quorum links stay
    /// open and carry nothing); needs [`Ensemble::start_with_quorum_proxies`].
    pub fn isolate(&self, i: usize) -> Result<()> {
        self.inner
            .quorum_net()
            .context("the ensemble was started without quorum proxies")?
            .isolate(i);
        Ok(())
    }

    /// Undoes [`Ensemble::isolate`]: held bytes go through.
    pub fn heal(&self) -> Result<()> {
        self.inner
            .quorum_net()
            .context("the ensemble was started without quorum proxies")?
            .heal();
        Ok(())
    }

    /// The pid of member `i`'s process, if it runs.
    pub fn pid(&self, i: usize) -> Option<u32> {
        find_pid_by_arg(&self.cfg_paths[i].display().to_string())
    }

    /// Every member's pid; an error names the member that has none.
    pub fn pids(&self) -> Result<Vec<u32>> {
        (0..self.len())
            .map(|i| {
                self.pid(i).with_context(|| {
                    format!(
                        "{} member {} has no process (not running?)",
                        self.flavor,
                        i + 1
                    )
                })
            })
            .collect()
    }

    /// What the report says about how this ensemble runs.
    pub fn describe(&self, cfg: &ServerConfig) -> SystemInfo {
        let modes = self.modes();
        let members: Vec<String> = (0..self.len())
            .map(|i| {
                format!(
                    "member {} on {} ({}, pid {})",
                    i + 1,
                    self.addr(i),
                    modes[i].as_deref().unwrap_or("not serving"),
                    self.pid(i)
                        .map(|p| p.to_string())
                        .unwrap_or_else(|| "?".into())
                )
            })
            .collect();
        let notes = vec![format!(
            "{} members on loopback (initLimit=10, syncLimit=5, testkit's settings): {}",
            self.len(),
            members.join("; ")
        )];
        describe_system(self.flavor, self.addr(0), self.pid(0), cfg, notes)
    }
}

/// The pid of a process whose command line has an argument equal to `arg`
/// (the first found; there is one, the path being a unique temporary one).
pub fn find_pid_by_arg(arg: &str) -> Option<u32> {
    let me = std::process::id();
    for entry in std::fs::read_dir("/proc").ok()? {
        let Ok(entry) = entry else { continue };
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        if cmdline.split(|&c| c == 0).any(|a| a == arg.as_bytes()) && !is_zombie(pid) {
            return Some(pid);
        }
    }
    None
}

fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let after = &s[s.rfind(')')? + 1..];
            after.split_whitespace().next().map(|st| st == "Z")
        })
        .unwrap_or(true)
}

/// `srvr`'s `Mode:` with a short timeout (the election poller asks every
/// few milliseconds and must not hang on a member that does not answer).
pub fn quick_mode(addr: SocketAddr, timeout: Duration) -> Option<String> {
    let mut s = TcpStream::connect_timeout(&addr, timeout).ok()?;
    s.set_read_timeout(Some(timeout)).ok()?;
    s.set_write_timeout(Some(timeout)).ok()?;
    s.write_all(b"srvr").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("Mode: "))
        .map(|m| m.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_process_by_argument() {
        // `sh -c CMD NAME` keeps NAME on its command line (as $0).
        let marker = format!("/tmp/wazoo-bench-test-marker-{}", std::process::id());
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30; true", &marker])
            .spawn()
            .expect("sh runs");
        let found = (0..100).find_map(|_| {
            std::thread::sleep(Duration::from_millis(10));
            find_pid_by_arg(&marker)
        });
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(found, Some(child.id()));
        assert_eq!(find_pid_by_arg("/no/such/argument/anywhere"), None);
    }
}
