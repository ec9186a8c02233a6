//! A wazoo ensemble of processes on loopback, and [`TestEnsemble`], so an
//! ensemble test is written once and run against Apache ZooKeeper's
//! ensemble and wazoo's.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::config::{MultiAddress, ServerOptions, ZooCfg};
use crate::process::{ProcessSpec, ServerProcess, StartError};
use crate::zookeeper::server_mode;
use crate::{free_port, loopback, wazoo_bin, QuorumNet, ZkEnsemble};

/// What ensemble tests need of either system.
pub trait TestEnsemble: Send {
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn addr(&self, i: usize) -> SocketAddr;
    fn connect_string(&self) -> String {
        (0..self.len())
            .map(|i| self.addr(i).to_string())
            .collect::<Vec<_>>()
            .join(",")
    }
    /// `srvr`'s mode of member `i`, `None` when down or not serving.
    fn mode(&self, i: usize) -> Option<String> {
        server_mode(self.addr(i))
    }
    fn leader(&self) -> Option<usize> {
        (0..self.len()).find(|&i| self.mode(i).as_deref() == Some("leader"))
    }
    fn wait_for_leader(&self, timeout: Duration) -> anyhow::Result<usize> {
        crate::wait_for("an ensemble member in Mode: leader", timeout, || {
            self.leader()
        })
    }
    fn log_tail(&self, i: usize, lines: usize) -> String;
    /// Member `i`'s working directory (its zoo.cfg and data directory are
    /// in it; a relative path in zoo.cfg resolves against it on both
    /// servers).
    fn work_dir(&self, i: usize) -> std::path::PathBuf;
    /// SIGKILL member `i`.
    fn kill(&mut self, i: usize);
    /// Starts member `i` again on its ports and data and waits until it serves.
    fn restart(&mut self, i: usize) -> anyhow::Result<()>;
    /// The process id of member `i`, while it runs.
    fn pid(&self, i: usize) -> Option<u32>;
    /// Where member `i`'s AdminServer listens, if it serves one
    /// ([`ServerOptions::admin_server`](crate::ServerOptions::admin_server)).
    fn admin_addr(&self, i: usize) -> Option<SocketAddr>;
    /// Stops member `i` as SIGSTOP does (a hung process, a paused VM): its
    /// sockets stay open and nothing answers.
    fn pause(&mut self, i: usize) -> anyhow::Result<()> {
        signal(self.pid(i), "STOP")
    }
    /// Lets a paused member go on (SIGCONT).
    fn resume(&mut self, i: usize) -> anyhow::Result<()> {
        signal(self.pid(i), "CONT")
    }
    /// The proxies between the members, when started with
    /// `ServerOptions::quorum_proxies`.
    fn quorum_net(&self) -> Option<&QuorumNet>;
}

/// Sends `SIG<name>` to `pid` with kill(1).
fn signal(pid: Option<u32>, name: &str) -> anyhow::Result<()> {
    let pid = pid.ok_or_else(|| anyhow::anyhow!("no process to send SIG{name} to"))?;
    let status = std::process::Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status()?;
    anyhow::ensure!(status.success(), "kill -{name} {pid} failed: {status}");
    Ok(())
}

impl TestEnsemble for ZkEnsemble {
    fn len(&self) -> usize {
        ZkEnsemble::len(self)
    }
    fn addr(&self, i: usize) -> SocketAddr {
        ZkEnsemble::addr(self, i)
    }
    fn work_dir(&self, i: usize) -> std::path::PathBuf {
        let data = ZkEnsemble::data_dir(self, i);
        data.parent().unwrap_or(data).to_path_buf()
    }
    fn log_tail(&self, i: usize, lines: usize) -> String {
        ZkEnsemble::log_tail(self, i, lines)
    }
    fn kill(&mut self, i: usize) {
        ZkEnsemble::kill(self, i)
    }
    fn restart(&mut self, i: usize) -> anyhow::Result<()> {
        ZkEnsemble::restart(self, i)
    }
    fn pid(&self, i: usize) -> Option<u32> {
        ZkEnsemble::pid(self, i)
    }
    fn admin_addr(&self, i: usize) -> Option<SocketAddr> {
        ZkEnsemble::admin_addr(self, i)
    }
    fn quorum_net(&self) -> Option<&QuorumNet> {
        ZkEnsemble::quorum_net(self)
    }
}

/// One member's place in a generated ensemble: its id, client port,
/// directories (with `myid` written) and a zoo.cfg holding every
/// `server.N` line (extra cfg lines not applied yet).
pub(crate) struct MemberLayout {
    pub sid: usize,
    pub client_port: u16,
    pub member_dir: PathBuf,
    pub data_dir: PathBuf,
    pub observer: bool,
    pub cfg: ZooCfg,
}

/// Lays out an `n`-member ensemble under `root` on free loopback ports; the
/// last `opts.observers` members are observers. `client_in_server_lines`
/// appends `;clientPort` to the `server.N` lines.
pub(crate) fn layout(
    root: &Path,
    n: usize,
    opts: &ServerOptions,
    client_in_server_lines: bool,
) -> anyhow::Result<(Vec<MemberLayout>, Option<QuorumNet>)> {
    let ports: Vec<(u16, u16, u16)> = (0..n)
        .map(|_| (free_port(), free_port(), free_port()))
        .collect();
    anyhow::ensure!(
        opts.multi_address.is_none() || (!opts.quorum_proxies && n <= 253),
        "multi_address: at most 253 members, and no quorum proxies"
    );
    anyhow::ensure!(
        !opts.distinct_loopback
            || (!opts.quorum_proxies && opts.multi_address.is_none() && n <= 254),
        "distinct_loopback: at most 254 members, no quorum proxies, one address each"
    );
    let host = |j: usize| {
        if opts.distinct_loopback {
            format!("127.0.0.{}", j + 1)
        } else {
            "127.0.0.1".to_string()
        }
    };
    // With multi_address: each member's second pair, on 127.0.0.(i + 2),
    // and ports nothing listens on for FirstUnreachable.
    let second: Vec<(u16, u16)> = (0..n).map(|_| (free_port(), free_port())).collect();
    let dead: Vec<(u16, u16)> = (0..n).map(|_| (free_port(), free_port())).collect();
    let first_observer = n - opts.observers.min(n);
    // Member j's line as member `seen_by` lists it.
    let line = |j: usize, seen_by: usize| {
        let (client, quorum, election) = ports[j];
        let role = if j >= first_observer { ":observer" } else { "" };
        let client = if client_in_server_lines {
            format!(";{client}")
        } else {
            String::new()
        };
        let pairs = match opts.multi_address {
            None => format!("{}:{quorum}:{election}", host(j)),
            Some(how) => {
                let (q, e) = if how == MultiAddress::FirstUnreachable && seen_by != j {
                    dead[j]
                } else {
                    (quorum, election)
                };
                let (q2, e2) = second[j];
                format!("127.0.0.1:{q}:{e}|127.0.0.{}:{q2}:{e2}", j + 2)
            }
        };
        format!("{pairs}{role}{client}")
    };
    let mut net = opts.quorum_proxies.then(QuorumNet::default);
    let mut out = Vec::with_capacity(n);
    for (i, &(client_port, _, _)) in ports.iter().enumerate() {
        let sid = i + 1;
        let member_dir = root.join(format!("member-{sid}"));
        let data_dir = member_dir.join("data");
        std::fs::create_dir_all(&data_dir)?;
        std::fs::write(data_dir.join("myid"), format!("{sid}\n"))?;
        let mut cfg = ZooCfg::base(opts, &data_dir, client_port);
        cfg.set("initLimit", "10");
        cfg.set("syncLimit", "5");
        if opts.multi_address.is_some() {
            cfg.set("multiAddress.enabled", "true");
        }
        for j in 0..n {
            cfg.set(format!("server.{}", j + 1), line(j, i));
        }
        if let Some(net) = &mut net {
            // Member i reaches every other member j through proxies of its
            // own: its server.j line names them (its own line stays real,
            // it listens there).
            for (j, &(client, quorum, election)) in ports.iter().enumerate() {
                if j == i {
                    continue;
                }
                let q = net.add(i, j, loopback(quorum))?.port();
                let e = net.add(i, j, loopback(election))?.port();
                let role = if j >= first_observer { ":observer" } else { "" };
                let client = if client_in_server_lines {
                    format!(";{client}")
                } else {
                    String::new()
                };
                cfg.set(
                    format!("server.{}", j + 1),
                    format!("127.0.0.1:{q}:{e}{role}{client}"),
                );
            }
        }
        out.push(MemberLayout {
            sid,
            client_port,
            member_dir,
            data_dir,
            observer: i >= first_observer,
            cfg,
        });
    }
    Ok((out, net))
}

struct Member {
    process: ServerProcess,
    client_port: u16,
    admin: Option<SocketAddr>,
    data_dir: PathBuf,
}

/// `n` wazoo members (`wazoo serve` with `server.N` lines and `myid`), each
/// with its own client and quorum port and data directory. Member `i` has
/// `myid` `i + 1`. Killed when dropped.
pub struct WazooEnsemble {
    members: Vec<Member>,
    startup_timeout: Duration,
    net: Option<QuorumNet>,
    _dir: TempDir,
}

impl WazooEnsemble {
    pub fn start(n: usize, opts: ServerOptions) -> anyhow::Result<WazooEnsemble> {
        anyhow::ensure!(
            (2..=254).contains(&n),
            "ensemble size must be 2..=254, got {n}"
        );
        let binary = match &opts.binary {
            Some(p) => p.clone(),
            None => wazoo_bin()?,
        };
        let mut last_error = String::new();
        for _ in 0..3 {
            let mut e = WazooEnsemble::spawn(n, &opts, &binary)?;
            match e.wait_all_serving() {
                Ok(()) => return Ok(e),
                Err(err) if err.address_in_use => last_error = err.message,
                Err(err) => anyhow::bail!(err.message),
            }
        }
        anyhow::bail!("wazoo ensemble failed to start 3 times: {last_error}")
    }

    fn spawn(n: usize, opts: &ServerOptions, binary: &Path) -> anyhow::Result<WazooEnsemble> {
        let dir = tempfile::Builder::new()
            .prefix("wazoo-ensemble-")
            .tempdir()?;
        let mut members = Vec::with_capacity(n);
        let (layouts, net) = layout(dir.path(), n, opts, true)?;
        for m in layouts {
            let MemberLayout {
                sid,
                client_port,
                member_dir,
                data_dir,
                mut cfg,
                ..
            } = m;
            cfg.set_wazoo_defaults();
            cfg.apply_extra(&opts.extra_cfg)?;
            let cfg_path = member_dir.join("zoo.cfg");
            std::fs::write(&cfg_path, cfg.render())?;
            for d in &opts.member_dirs {
                std::fs::create_dir_all(member_dir.join(d))?;
            }
            let mut args = vec![
                "serve".to_string(),
                "--config".to_string(),
                cfg_path.display().to_string(),
            ];
            args.extend(opts.extra_args.iter().cloned());
            let mut env = vec![("RUST_BACKTRACE".to_string(), "1".to_string())];
            env.extend(opts.env.iter().cloned());
            let spec = ProcessSpec {
                name: format!("wazoo member {sid}"),
                program: binary.to_path_buf(),
                args,
                env,
                cwd: member_dir.clone(),
                log: member_dir.join("wazoo.log"),
            };
            members.push(Member {
                process: ServerProcess::spawn(spec)?,
                client_port,
                admin: cfg.admin_addr(),
                data_dir,
            });
        }
        Ok(WazooEnsemble {
            members,
            startup_timeout: opts.startup_timeout,
            net,
            _dir: dir,
        })
    }

    fn wait_all_serving(&mut self) -> Result<(), StartError> {
        let deadline = Instant::now() + self.startup_timeout;
        for i in 0..self.members.len() {
            self.wait_member_serving(i, deadline.saturating_duration_since(Instant::now()))?;
        }
        Ok(())
    }

    fn wait_member_serving(&mut self, i: usize, timeout: Duration) -> Result<(), StartError> {
        let addr = loopback(self.members[i].client_port);
        self.members[i].process.wait_ready(
            addr,
            timeout,
            "srvr -> Mode: leader/follower/observer",
            || {
                server_mode(addr)
                    .is_some_and(|m| matches!(m.as_str(), "leader" | "follower" | "observer"))
            },
        )
    }

    pub fn data_dir(&self, i: usize) -> &Path {
        &self.members[i].data_dir
    }

    /// Member `i`'s working directory (relative paths in its arguments
    /// resolve against it).
    pub fn member_dir(&self, i: usize) -> &Path {
        self.members[i]
            .data_dir
            .parent()
            .expect("a member's data directory is in its working directory")
    }

    /// Starts every member again on its data directory (killing those that
    /// run) and waits until all serve: for a test that rewrote the members'
    /// data while they were down, where one member alone cannot serve.
    pub fn restart_all(&mut self) -> anyhow::Result<()> {
        for m in &mut self.members {
            m.process.kill();
        }
        for m in &mut self.members {
            m.process.respawn()?;
        }
        self.wait_all_serving()
            .map_err(|e| anyhow::anyhow!(e.message))
    }
}

impl TestEnsemble for WazooEnsemble {
    fn len(&self) -> usize {
        self.members.len()
    }
    fn addr(&self, i: usize) -> SocketAddr {
        loopback(self.members[i].client_port)
    }
    fn work_dir(&self, i: usize) -> std::path::PathBuf {
        WazooEnsemble::member_dir(self, i).to_path_buf()
    }
    fn log_tail(&self, i: usize, lines: usize) -> String {
        self.members[i].process.log_tail(lines)
    }
    fn kill(&mut self, i: usize) {
        self.members[i].process.kill();
    }
    fn restart(&mut self, i: usize) -> anyhow::Result<()> {
        self.members[i].process.kill();
        self.members[i].process.respawn()?;
        self.wait_member_serving(i, self.startup_timeout)
            .map_err(|e| anyhow::anyhow!(e.message))
    }
    fn pid(&self, i: usize) -> Option<u32> {
        self.members[i].process.pid()
    }
    fn admin_addr(&self, i: usize) -> Option<SocketAddr> {
        self.members[i].admin
    }
    fn quorum_net(&self) -> Option<&QuorumNet> {
        self.net.as_ref()
    }
}

/// Starts an `n`-member ensemble of `flavor`.
pub fn start_ensemble(
    flavor: crate::Flavor,
    n: usize,
    opts: ServerOptions,
) -> anyhow::Result<Box<dyn TestEnsemble>> {
    Ok(match flavor {
        crate::Flavor::Zookeeper => Box::new(ZkEnsemble::start_with(n, opts)?),
        crate::Flavor::Wazoo => Box::new(WazooEnsemble::start(n, opts)?),
    })
}
