//! Apache ZooKeeper 3.8 from the Debian package `zookeeper`, run as a child
//! JVM: `java -cp <conf dir>:<jars> org.apache.zookeeper.server.quorum.QuorumPeerMain <zoo.cfg>`.
//!
//! Where the package puts things (Debian 12, `zookeeper` 3.8.0-11):
//! * `/usr/share/java/zookeeper.jar` (+ `zookeeper-jute.jar`); its manifest
//!   `Class-Path` names every runtime dependency in `/usr/share/java`
//!   (netty, jetty, jackson, commons-*, metrics, snappy, slf4j-api).
//! * No SLF4J binding is on that manifest: the package's own scripts log
//!   nothing unless one is added. The harness adds `slf4j-log4j12.jar` and
//!   `log4j-1.2.jar` (package `liblog4j1.2-java`, a dependency of
//!   `libzookeeper-java`) and a generated `log4j.properties` whose console
//!   appender writes to the process's stdout, which goes to `zookeeper.log`
//!   in the server's temporary directory.
//! * `/etc/zookeeper/conf` (example cfg, log4j.properties) and the scripts in
//!   `/usr/share/zookeeper/bin` are not used.
//!
//! `ZOOKEEPER_CLASSPATH` (colon-separated) overrides the jar search;
//! `ZOOKEEPER_HOME` points at an upstream tarball instead (its `lib/*.jar`,
//! which log through logback; a `logback.xml` is generated as well).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use tempfile::TempDir;

use crate::config::{ServerOptions, ZooCfg};
use crate::process::{ProcessSpec, ServerProcess, StartError};
use crate::{four_letter_word, free_port, loopback};

const MAIN_CLASS: &str = "org.apache.zookeeper.server.quorum.QuorumPeerMain";
const DEBIAN_JAVA_DIR: &str = "/usr/share/java";
/// Attempts when a port turned out to be taken by another process.
const START_ATTEMPTS: usize = 3;

/// The jars to run an Apache ZooKeeper server with (see the module docs).
pub fn zookeeper_classpath() -> anyhow::Result<Vec<PathBuf>> {
    if let Ok(cp) = std::env::var("ZOOKEEPER_CLASSPATH") {
        return Ok(std::env::split_paths(&cp).collect());
    }
    if let Ok(home) = std::env::var("ZOOKEEPER_HOME") {
        let lib = Path::new(&home).join("lib");
        let mut jars: Vec<PathBuf> = std::fs::read_dir(&lib)
            .with_context(|| format!("ZOOKEEPER_HOME is set but {} is unreadable", lib.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "jar"))
            .collect();
        jars.sort();
        return Ok(jars);
    }
    let java_dir = Path::new(DEBIAN_JAVA_DIR);
    let server_jar = java_dir.join("zookeeper.jar");
    if !server_jar.is_file() {
        anyhow::bail!(
            "Apache ZooKeeper not found: {} is missing. Install the Debian package \
             `zookeeper` (scripts/setup.sh does), or set ZOOKEEPER_CLASSPATH / ZOOKEEPER_HOME",
            server_jar.display()
        );
    }
    let mut jars = vec![server_jar, java_dir.join("zookeeper-jute.jar")];
    jars.extend(netty_jars_debian_omits());
    // The servlet API, which the Jetty AdminServer loads and the Class-Path
    // of Debian's zookeeper.jar does not list (package
    // libservlet-api-java): without it ZooKeeper logs "Unable to load
    // jetty" and serves no AdminServer.
    let servlet = java_dir.join("servlet-api.jar");
    if servlet.is_file() {
        jars.push(servlet);
    }
    // BouncyCastle's provider (package libbcprov-java), which brings the
    // BCFKS key store type: on the classpath it is only loadable; a test
    // that needs it registers it (`-Djava.security.properties`).
    let bcprov = java_dir.join("bcprov.jar");
    if bcprov.is_file() {
        jars.push(bcprov);
    }
    let log4j_binding = [
        java_dir.join("slf4j-log4j12.jar"),
        java_dir.join("log4j-1.2.jar"),
    ];
    if log4j_binding.iter().all(|j| j.is_file()) {
        jars.extend(log4j_binding);
    }
    Ok(jars)
}

/// zkCli's standard output without its connection chatter: the first line
/// `Connecting to ...`, and the watcher thread's `WATCHER::` and
/// `WatchedEvent state:SyncConnected ...` lines.
///
/// zkCli prints each of those with its own `println("\n" + line)` from the
/// watcher thread while its main thread prints the command's answer line by
/// line, so they may come before the answer or between two of its lines; a
/// `println` is never split. Each is removed once, wherever it is.
pub fn zkcli_stdout(raw: &str) -> String {
    let mut out = match raw.strip_prefix("Connecting to ") {
        Some(rest) => rest
            .split_once('\n')
            .map(|(_, r)| r)
            .unwrap_or("")
            .to_string(),
        None => raw.to_string(),
    };
    for line in [
        "\nWATCHER::\n",
        "\nWatchedEvent state:SyncConnected type:None path:null\n",
    ] {
        if let Some(i) = out.find(line) {
            out.replace_range(i..i + line.len(), "");
        }
    }
    out
}

/// The Netty jars the Netty connection factory and client socket
/// (`NettyServerCnxnFactory`, `ClientCnxnSocketNetty`, which TLS needs)
/// load and that the Class-Path of Debian's zookeeper.jar does not list
/// (netty-codec above all), where they are installed.
pub fn netty_jars_debian_omits() -> Vec<PathBuf> {
    [
        "netty-codec.jar",
        "netty-resolver.jar",
        "netty-transport-native-unix-common.jar",
    ]
    .iter()
    .map(|j| Path::new(DEBIAN_JAVA_DIR).join(j))
    .filter(|p| p.is_file())
    .collect()
}

fn java_binary() -> PathBuf {
    if let Ok(java) = std::env::var("JAVA") {
        return PathBuf::from(java);
    }
    if let Ok(home) = std::env::var("JAVA_HOME") {
        let java = Path::new(&home).join("bin/java");
        if java.is_file() {
            return java;
        }
    }
    PathBuf::from("java")
}

/// The audit log's file name in the server's directory (where
/// `zookeeper.log.dir` points): ZooKeeper's audit logger is routed there,
/// as ZooKeeper's sample logback configuration does (ZooKeeper Audit
/// Logging, "ZooKeeper Audit Log Configuration"). It holds records only
/// when zoo.cfg sets `audit.enable=true`.
pub const ZK_AUDIT_LOG: &str = "zookeeper_audit.log";

const LOG4J_PROPERTIES: &str = "\
log4j.rootLogger=INFO, CONSOLE
log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender
log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout
log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} %-5p [%t:%C{1}@%L] - %m%n
log4j.logger.org.apache.zookeeper.audit.Slf4jAuditLogger=INFO, AUDIT
log4j.additivity.org.apache.zookeeper.audit.Slf4jAuditLogger=false
log4j.appender.AUDIT=org.apache.log4j.FileAppender
log4j.appender.AUDIT.File=${zookeeper.log.dir}/zookeeper_audit.log
log4j.appender.AUDIT.layout=org.apache.log4j.PatternLayout
log4j.appender.AUDIT.layout.ConversionPattern=%d{ISO8601} %p %c{2}: %m%n
";

const LOGBACK_XML: &str = r#"<configuration>
  <appender name="CONSOLE" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>%d{ISO8601} %-5p [%t:%C{1}@%L] - %m%n</pattern></encoder>
  </appender>
  <appender name="AUDIT" class="ch.qos.logback.core.FileAppender">
    <file>${zookeeper.log.dir}/zookeeper_audit.log</file>
    <encoder><pattern>%d{ISO8601} %p %c{2}: %m%n</pattern></encoder>
  </appender>
  <logger name="org.apache.zookeeper.audit.Slf4jAuditLogger" additivity="false" level="INFO">
    <appender-ref ref="AUDIT"/>
  </logger>
  <root level="INFO"><appender-ref ref="CONSOLE"/></root>
</configuration>
"#;

/// Writes `zoo.cfg` and the logging configs into `conf_dir` and returns how
/// to launch a ZooKeeper server on them.
fn zookeeper_spec(
    name: String,
    conf_dir: &Path,
    cfg: &ZooCfg,
    opts: &ServerOptions,
) -> anyhow::Result<ProcessSpec> {
    let cfg_path = conf_dir.join("zoo.cfg");
    std::fs::write(&cfg_path, cfg.render())?;
    std::fs::write(conf_dir.join("log4j.properties"), LOG4J_PROPERTIES)?;
    std::fs::write(conf_dir.join("logback.xml"), LOGBACK_XML)?;

    let mut classpath = vec![conf_dir.to_path_buf()];
    classpath.extend(zookeeper_classpath()?);
    let classpath = std::env::join_paths(classpath)?
        .to_string_lossy()
        .into_owned();

    let mut args = vec![
        "-Xmx1g".to_string(),
        format!("-Dzookeeper.log.dir={}", conf_dir.display()),
        "-Dzookeeper.root.logger=INFO,CONSOLE".to_string(),
        format!(
            "-Dlog4j.configuration=file:{}/log4j.properties",
            conf_dir.display()
        ),
        format!(
            "-Dlogback.configurationFile={}/logback.xml",
            conf_dir.display()
        ),
        "-Dzookeeper.jmx.log4j.disable=true".to_string(),
    ];
    if !opts.admin_server {
        args.push("-Dzookeeper.admin.enableServer=false".to_string());
    }
    if opts.multi_address.is_some() {
        // ZooKeeper 3.8's QuorumServer reads only the system property when
        // it parses a line with `|`; zoo.cfg's key alone is not enough.
        args.push("-Dzookeeper.multiAddress.enabled=true".to_string());
    }
    args.extend(opts.extra_args.iter().cloned());
    args.extend(["-cp".to_string(), classpath, MAIN_CLASS.to_string()]);
    args.push(cfg_path.display().to_string());

    Ok(ProcessSpec {
        name,
        program: java_binary(),
        args,
        env: opts.env.clone(),
        cwd: conf_dir.to_path_buf(),
        log: conf_dir.join("zookeeper.log"),
    })
}

/// The `Mode:` line of `srvr` (`standalone`, `leader`, `follower`, `observer`),
/// or `None` while the server is not serving.
pub(crate) fn server_mode(addr: SocketAddr) -> Option<String> {
    let srvr = four_letter_word(addr, "srvr").ok()?;
    srvr.lines()
        .find_map(|l| l.strip_prefix("Mode: "))
        .map(|m| m.trim().to_string())
}

fn is_imok(addr: SocketAddr) -> bool {
    four_letter_word(addr, "ruok").is_ok_and(|a| a == "imok")
}

/// A standalone Apache ZooKeeper server on a free loopback port.
///
/// Killed (SIGKILL) when dropped; its temporary directory (data, `zoo.cfg`,
/// `zookeeper.log`) is removed after that.
pub struct ZkServer {
    // Declared before `dir`: the process dies before its directory goes.
    process: ServerProcess,
    port: u16,
    admin: Option<SocketAddr>,
    startup_timeout: Duration,
    dir: TempDir,
}

impl ZkServer {
    /// Starts a server with [`ServerOptions::default()`].
    pub fn start() -> anyhow::Result<ZkServer> {
        ZkServer::start_with(ServerOptions::default())
    }

    /// Starts a server and waits until `ruok` answers `imok` and `srvr`
    /// reports `Mode: standalone`.
    pub fn start_with(opts: ServerOptions) -> anyhow::Result<ZkServer> {
        let mut last_error = String::new();
        for _ in 0..START_ATTEMPTS {
            let dir = tempfile::Builder::new().prefix("wazoo-zk-").tempdir()?;
            let data_dir = dir.path().join("data");
            std::fs::create_dir(&data_dir)?;
            let port = free_port();
            let mut cfg = ZooCfg::base(&opts, &data_dir, port);
            cfg.apply_extra(&opts.extra_cfg)?;
            let spec = zookeeper_spec("zookeeper".into(), dir.path(), &cfg, &opts)?;
            let mut server = ZkServer {
                process: ServerProcess::spawn(spec)?,
                port,
                admin: cfg.admin_addr(),
                startup_timeout: opts.startup_timeout,
                dir,
            };
            match server.wait_serving() {
                Ok(()) => return Ok(server),
                Err(e) if e.address_in_use => last_error = e.message,
                Err(e) => anyhow::bail!(e.message),
            }
        }
        anyhow::bail!("ZooKeeper failed to start {START_ATTEMPTS} times: {last_error}")
    }

    fn wait_serving(&mut self) -> Result<(), StartError> {
        let addr = self.addr();
        self.process.wait_ready(
            addr,
            self.startup_timeout,
            "ruok -> imok and srvr -> Mode",
            || is_imok(addr) && server_mode(addr).is_some(),
        )
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

    /// Where the audit records go (with `audit.enable=true`).
    pub fn audit_log_path(&self) -> PathBuf {
        self.dir.path().join(ZK_AUDIT_LOG)
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

    /// SIGKILL (kill -9): no clean shutdown. Restart with [`restart`](Self::restart).
    pub fn kill(&mut self) {
        self.process.kill();
    }

    /// Starts the server again on the same port and data directory (killing
    /// it first if it runs) and waits until it serves.
    pub fn restart(&mut self) -> anyhow::Result<()> {
        self.process.kill();
        self.process.respawn()?;
        self.wait_serving().map_err(|e| anyhow::anyhow!(e.message))
    }
}

/// One member of a [`ZkEnsemble`].
struct Member {
    process: ServerProcess,
    client_port: u16,
    admin: Option<SocketAddr>,
    data_dir: PathBuf,
}

/// A ZooKeeper ensemble of `n` members on loopback, each with its own
/// client, quorum and election port and data directory.
///
/// Members are addressed by index `0..n`; member `i` has `myid` `i + 1`.
pub struct ZkEnsemble {
    members: Vec<Member>,
    startup_timeout: Duration,
    net: Option<crate::QuorumNet>,
    // Declared last: removed after every member is killed.
    _dir: TempDir,
}

impl ZkEnsemble {
    /// Starts `n` members with [`ServerOptions::default()`].
    pub fn start(n: usize) -> anyhow::Result<ZkEnsemble> {
        ZkEnsemble::start_with(n, ServerOptions::default())
    }

    /// Starts `n` members and waits until every one serves as leader or
    /// follower (with `n == 1` it runs standalone).
    pub fn start_with(n: usize, opts: ServerOptions) -> anyhow::Result<ZkEnsemble> {
        anyhow::ensure!(
            (1..=254).contains(&n),
            "ensemble size must be 1..=254, got {n}"
        );
        let mut last_error = String::new();
        for _ in 0..START_ATTEMPTS {
            let mut ensemble = ZkEnsemble::spawn(n, &opts)?;
            match ensemble.wait_all_serving() {
                Ok(()) => return Ok(ensemble),
                Err(e) if e.address_in_use => last_error = e.message,
                Err(e) => anyhow::bail!(e.message),
            }
        }
        anyhow::bail!("ZooKeeper ensemble failed to start {START_ATTEMPTS} times: {last_error}")
    }

    fn spawn(n: usize, opts: &ServerOptions) -> anyhow::Result<ZkEnsemble> {
        let dir = tempfile::Builder::new()
            .prefix("wazoo-zk-ensemble-")
            .tempdir()?;
        let mut members = Vec::with_capacity(n);
        let (layouts, net) = crate::ensemble::layout(dir.path(), n, opts, false)?;
        for m in layouts {
            let crate::ensemble::MemberLayout {
                sid,
                client_port,
                member_dir,
                data_dir,
                observer,
                mut cfg,
            } = m;
            let i = sid - 1;
            if observer {
                cfg.set("peerType", "observer");
            }
            cfg.apply_extra(&opts.extra_cfg)?;
            let spec = zookeeper_spec(format!("zookeeper member {i}"), &member_dir, &cfg, opts)?;
            members.push(Member {
                process: ServerProcess::spawn(spec)?,
                client_port,
                admin: cfg.admin_addr(),
                data_dir,
            });
        }
        Ok(ZkEnsemble {
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
        let addr = self.addr(i);
        self.members[i].process.wait_ready(
            addr,
            timeout,
            "srvr -> Mode: leader/follower/standalone",
            || {
                server_mode(addr).is_some_and(|m| {
                    matches!(
                        m.as_str(),
                        "leader" | "follower" | "observer" | "standalone"
                    )
                })
            },
        )
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Where member `i`'s AdminServer listens ([`ServerOptions::admin_server`]).
    pub fn admin_addr(&self, i: usize) -> Option<SocketAddr> {
        self.members[i].admin
    }

    /// Client address of member `i`.
    pub fn addr(&self, i: usize) -> SocketAddr {
        loopback(self.members[i].client_port)
    }

    pub fn addrs(&self) -> Vec<SocketAddr> {
        (0..self.len()).map(|i| self.addr(i)).collect()
    }

    /// All members, `127.0.0.1:p1,127.0.0.1:p2,...`.
    pub fn connect_string(&self) -> String {
        self.addrs()
            .iter()
            .map(SocketAddr::to_string)
            .collect::<Vec<_>>()
            .join(",")
    }

    pub fn data_dir(&self, i: usize) -> &Path {
        &self.members[i].data_dir
    }

    /// Member `i`'s `zoo.cfg`, as the harness wrote it (its `server.N`
    /// lines name every member's quorum and election ports, which a test
    /// speaking the quorum protocol needs).
    pub fn config_path(&self, i: usize) -> PathBuf {
        self.members[i]
            .data_dir
            .parent()
            .map_or_else(|| PathBuf::from("zoo.cfg"), |d| d.join("zoo.cfg"))
    }

    /// Where member `i`'s audit records go (with `audit.enable=true`).
    pub fn audit_log_path(&self, i: usize) -> PathBuf {
        self.members[i]
            .data_dir
            .parent()
            .expect("a member's data directory is in its own directory")
            .join(ZK_AUDIT_LOG)
    }

    pub fn log_tail(&self, i: usize, lines: usize) -> String {
        self.members[i].process.log_tail(lines)
    }

    /// The member's `srvr` mode (`leader`, `follower`, ...), `None` if it is
    /// down or not serving.
    pub fn mode(&self, i: usize) -> Option<String> {
        server_mode(self.addr(i))
    }

    /// The index of the member that currently reports `Mode: leader`.
    pub fn leader(&self) -> Option<usize> {
        (0..self.len()).find(|&i| self.mode(i).as_deref() == Some("leader"))
    }

    /// Waits (bounded) until some member reports `Mode: leader`.
    pub fn wait_for_leader(&self, timeout: Duration) -> anyhow::Result<usize> {
        crate::wait_for(
            "a ZooKeeper ensemble member in Mode: leader",
            timeout,
            || self.leader(),
        )
    }

    pub fn is_running(&mut self, i: usize) -> bool {
        self.members[i].process.is_running()
    }

    /// SIGKILL member `i`.
    pub fn kill(&mut self, i: usize) {
        self.members[i].process.kill();
    }

    /// The process id of member `i` (the JVM), while it runs.
    pub fn pid(&self, i: usize) -> Option<u32> {
        self.members[i].process.pid()
    }

    /// The proxies between the members, when started with
    /// `ServerOptions::quorum_proxies`.
    pub fn quorum_net(&self) -> Option<&crate::QuorumNet> {
        self.net.as_ref()
    }

    /// Starts member `i` again on its ports and data directory and waits
    /// until it serves (which needs a quorum of members up).
    pub fn restart(&mut self, i: usize) -> anyhow::Result<()> {
        self.members[i].process.kill();
        self.members[i].process.respawn()?;
        self.wait_member_serving(i, self.startup_timeout)
            .map_err(|e| anyhow::anyhow!(e.message))
    }
}

#[cfg(test)]
mod tests {
    use super::zkcli_stdout;

    const STAT: &str = "cZxid = 0x2\nctime = Sat Nov 28 04:18:01 EST 2026\nmZxid = 0x2\n";

    #[test]
    fn zkcli_stdout_drops_the_connection_lines_before_the_answer() {
        let raw = format!(
            "Connecting to 127.0.0.1:1\n\nWATCHER::\n\nWatchedEvent state:SyncConnected type:None path:null\n{STAT}"
        );
        assert_eq!(zkcli_stdout(&raw), STAT);
    }

    #[test]
    fn zkcli_stdout_drops_watcher_lines_printed_in_the_middle_of_the_answer() {
        // As CI saw once: the first answer line before the watcher's event.
        let raw = "Connecting to 127.0.0.1:1\n\nWATCHER::\ncZxid = 0x2\n\nWatchedEvent state:SyncConnected type:None path:null\nctime = Sat Nov 28 04:18:01 EST 2026\nmZxid = 0x2\n";
        assert_eq!(zkcli_stdout(raw), STAT);
    }

    #[test]
    fn zkcli_stdout_keeps_empty_lines_of_the_answer() {
        let raw = "Connecting to a:1\n\nWATCHER::\n\nWatchedEvent state:SyncConnected type:None path:null\n\n";
        assert_eq!(zkcli_stdout(raw), "\n");
    }
}
