//! The two systems under test, started through wazoo-testkit, and what the
//! kernel says about their processes (resident memory, CPU time).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::Serialize;
use wazoo_testkit::{Flavor, ServerOptions, WazooServer, ZkServer};

/// `zoo.cfg` lines the bench adds for both systems (on top of testkit's
/// tickTime=2000, dataDir, clientPort, clientPortAddress=127.0.0.1,
/// 4lw.commands.whitelist=*, extendedTypesEnabled=true). Everything else is
/// each system's default.
pub const EXTRA_CFG: &[&str] = &[
    // Connection limit per client IP (default 60): every session of the bench
    // comes from 127.0.0.1, and `--sessions` may be large. Not a speed knob.
    "maxClientCnxns=0",
];

/// How to start the servers.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub wazoo_bin: PathBuf,
    /// JVM `-Xmx` value for ZooKeeper, e.g. `2g`.
    pub zk_heap: String,
    /// Extra zoo.cfg lines for every wazoo server (`--wazoo-cfg`).
    pub wazoo_cfg: Vec<String>,
    /// More `zoo.cfg` lines for both systems, after [`EXTRA_CFG`] (the
    /// payload curve's larger jute.maxbuffer); standalone servers only.
    pub extra_cfg: Vec<String>,
    /// More JVM options for ZooKeeper (`-Djute.maxbuffer=...`: ZooKeeper
    /// reads it as a system property, not from zoo.cfg).
    pub zk_jvm_args: Vec<String>,
    /// How long a standalone server may take to pass testkit's readiness
    /// check, at start and at a restart (a restart of a large tree is the
    /// recovery workload's figure: at least `--recovery-timeout-secs`).
    pub startup_timeout_secs: f64,
}

/// Raises this process's soft RLIMIT_NOFILE to its hard limit, so that
/// thousands of sessions fit; the servers it starts inherit it. Returns
/// the (soft, hard) limit now in force.
pub fn raise_nofile_limit() -> (u64, u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return (0, 0);
        }
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                lim = raised;
            }
        }
    }
    (lim.rlim_cur, lim.rlim_max)
}

/// A running server of either system. Dropping it kills it (testkit).
pub enum Server {
    Zookeeper(ZkServer),
    Wazoo(WazooServer),
}

impl Server {
    pub fn start(flavor: Flavor, cfg: &ServerConfig) -> Result<Server> {
        Server::start_with_plugins(flavor, cfg, None)
    }

    /// As [`Server::start`]; a wazoo server also gets `--plugins DIR`.
    pub fn start_with_plugins(
        flavor: Flavor,
        cfg: &ServerConfig,
        plugins: Option<&Path>,
    ) -> Result<Server> {
        let mut opts = ServerOptions::default()
            .startup_timeout(Duration::from_secs_f64(cfg.startup_timeout_secs.max(90.0)));
        for line in EXTRA_CFG {
            opts = opts.cfg(*line);
        }
        for line in &cfg.extra_cfg {
            opts = opts.cfg(line.as_str());
        }
        Ok(match flavor {
            Flavor::Zookeeper => {
                // testkit puts its own `-Xmx1g` first and our JVM options after
                // it; HotSpot takes the last -Xmx, so this one wins (the report
                // shows the MaxHeapSize the JVM actually runs with).
                let mut opts = opts.arg(format!("-Xmx{}", cfg.zk_heap));
                for a in &cfg.zk_jvm_args {
                    opts = opts.arg(a.as_str());
                }
                Server::Zookeeper(ZkServer::start_with(opts).context("starting Apache ZooKeeper")?)
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
                let server = WazooServer::start(opts).context("starting wazoo")?;
                if let Some(dir) = plugins {
                    wait_for_plugins(&[server.addr()], dir)?;
                }
                Server::Wazoo(server)
            }
        })
    }

    pub fn flavor(&self) -> Flavor {
        match self {
            Server::Zookeeper(_) => Flavor::Zookeeper,
            Server::Wazoo(_) => Flavor::Wazoo,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        match self {
            Server::Zookeeper(s) => s.addr(),
            Server::Wazoo(s) => s.addr(),
        }
    }

    pub fn pid(&self) -> Result<u32> {
        match self {
            Server::Zookeeper(s) => s.pid(),
            Server::Wazoo(s) => s.pid(),
        }
        .with_context(|| format!("{} is not running", self.flavor()))
    }

    pub fn is_running(&mut self) -> bool {
        match self {
            Server::Zookeeper(s) => s.is_running(),
            Server::Wazoo(s) => s.is_running(),
        }
    }

    pub fn log_tail(&self, lines: usize) -> String {
        match self {
            Server::Zookeeper(s) => s.log_tail(lines),
            Server::Wazoo(s) => s.log_tail(lines),
        }
    }

    /// kill -9 (and reap): no clean shutdown.
    pub fn kill(&mut self) {
        match self {
            Server::Zookeeper(s) => s.kill(),
            Server::Wazoo(s) => s.kill(),
        }
    }

    /// Starts the process again on the same port and data directory and
    /// waits until testkit's readiness check passes (blocking).
    pub fn restart(&mut self) -> Result<()> {
        match self {
            Server::Zookeeper(s) => s.restart(),
            Server::Wazoo(s) => s.restart(),
        }
    }

    /// The data directory (snapshots and, by default, the log).
    pub fn data_dir(&self) -> PathBuf {
        match self {
            Server::Zookeeper(s) => s.data_dir(),
            Server::Wazoo(s) => s.data_dir(),
        }
    }

    /// `mntr` as key -> value (empty if the server does not answer it).
    pub fn mntr(&self) -> BTreeMap<String, String> {
        mntr(self.addr())
    }

    /// What the report says about how this server runs.
    pub fn describe(&self, cfg: &ServerConfig) -> SystemInfo {
        describe_system(self.flavor(), self.addr(), self.pid().ok(), cfg, Vec::new())
    }
}

/// Bytes of every file under `dir` (recursively); 0 if it cannot be read.
pub fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(|e| e.ok())
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            Ok(_) => e.metadata().map(|m| m.len()).unwrap_or(0),
            Err(_) => 0,
        })
        .sum()
}

/// `mntr` of the server at `addr` as key -> value (empty if it does not answer).
pub fn mntr(addr: SocketAddr) -> BTreeMap<String, String> {
    wazoo_testkit::four_letter_word(addr, "mntr")
        .map(|text| {
            text.lines()
                .filter_map(|l| {
                    let (k, v) = l.split_once('\t')?;
                    Some((k.trim().to_string(), v.trim().to_string()))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The version line of `srvr`.
pub fn version(addr: SocketAddr) -> String {
    wazoo_testkit::four_letter_word(addr, "srvr")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.to_ascii_lowercase().contains("version"))
                .map(|l| l.trim().to_string())
        })
        .unwrap_or_else(|| "(srvr gave no version)".to_string())
}

/// What the report says about how a server (or ensemble member `pid`,
/// answering on `addr`) of `flavor` runs; `extra_notes` go after the
/// zoo.cfg note.
pub fn describe_system(
    flavor: Flavor,
    addr: SocketAddr,
    pid: Option<u32>,
    cfg: &ServerConfig,
    extra_notes: Vec<String>,
) -> SystemInfo {
    let cmdline = pid.map(read_cmdline).unwrap_or_default();
    let mut notes = vec![format!(
        "zoo.cfg: testkit's tickTime=2000, dataDir in /tmp, 127.0.0.1 only; bench adds {}; \
         everything else (snapCount, fsync, autopurge, ...) left at the server's default",
        EXTRA_CFG
            .iter()
            .map(|l| l.to_string())
            .chain(cfg.extra_cfg.iter().cloned())
            .collect::<Vec<_>>()
            .join(", ")
    )];
    notes.extend(extra_notes);
    let (program, jvm_flags, max_heap) = match flavor {
        Flavor::Zookeeper => {
            let flags: Vec<String> = cmdline
                .iter()
                .filter(|a| a.starts_with("-X") && !a.starts_with("-Xlog"))
                .cloned()
                .collect();
            let max_heap = pid.and_then(jvm_max_heap);
            notes.push(
                "ZooKeeper defaults: snapCount=100000, forceSync=yes (fsync before ack, \
                 group commit), globalOutstandingLimit=1000, JVM's default GC"
                    .to_string(),
            );
            (
                cmdline.first().cloned().unwrap_or_else(|| "java".into()),
                flags,
                max_heap,
            )
        }
        Flavor::Wazoo => {
            notes.push(format!(
                "binary {} ({})",
                cfg.wazoo_bin.display(),
                if is_debug_build(&cfg.wazoo_bin) {
                    "DEBUG build: figures are not meaningful"
                } else {
                    "release build expected"
                }
            ));
            (cfg.wazoo_bin.display().to_string(), Vec::new(), None)
        }
    };
    SystemInfo {
        name: flavor.name().to_string(),
        version: version(addr),
        program,
        jvm_flags,
        jvm_max_heap_bytes: max_heap,
        notes,
    }
}

/// Whether a wazoo binary path looks like a debug build (`.../debug/wazoo`).
pub fn is_debug_build(path: &Path) -> bool {
    path.components().any(|c| c.as_os_str() == "debug")
}

/// Static facts about one system in this run.
#[derive(Clone, Debug, Serialize)]
pub struct SystemInfo {
    pub name: String,
    pub version: String,
    pub program: String,
    /// ZooKeeper: the -X options on the JVM command line (testkit's, then ours).
    pub jvm_flags: Vec<String>,
    /// ZooKeeper: MaxHeapSize as the running JVM reports it (jcmd), if jcmd works.
    pub jvm_max_heap_bytes: Option<u64>,
    pub notes: Vec<String>,
}

pub fn read_cmdline(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|s| !s.is_empty())
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// `jcmd <pid> <command...>`'s output, bounded to 30 s; `None` if jcmd is
/// missing or fails.
pub fn jcmd(pid: u32, command: &[&str]) -> Option<String> {
    let mut child = Command::new("jcmd")
        .arg(pid.to_string())
        .args(command)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let out = child.wait_with_output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// MaxHeapSize of a running JVM (`jcmd <pid> VM.flags`).
fn jvm_max_heap(pid: u32) -> Option<u64> {
    jcmd(pid, &["VM.flags"])?
        .split_whitespace()
        .find_map(|f| f.strip_prefix("-XX:MaxHeapSize="))
        .and_then(|v| v.parse().ok())
}

/// Bytes of the JVM heap in use (`jcmd <pid> GC.heap_info`, the first
/// `used NNNK` figure: the whole heap).
pub fn jvm_heap_used(pid: u32) -> Option<u64> {
    let text = jcmd(pid, &["GC.heap_info"])?;
    let at = text.find("used ")?;
    let rest = &text[at + 5..];
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    let unit = rest[digits.len()..].chars().next()?;
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        'K' => n * 1024,
        'M' => n * 1024 * 1024,
        'G' => n * 1024 * 1024 * 1024,
        _ => n,
    })
}

/// A `VmRSS:`-style field of /proc/<pid>/status, in bytes.
pub fn proc_status_bytes(pid: u32, field: &str) -> Result<u64> {
    let path = format!("/proc/{pid}/status");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix(field).and_then(|r| r.strip_prefix(':')) {
            let kib: u64 = rest
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse()
                .with_context(|| format!("parsing {field} in {path}: {line:?}"))?;
            return Ok(kib * 1024);
        }
    }
    bail!("{path} has no {field} line")
}

/// User + system CPU seconds of a process (all its threads) so far; `None`
/// means this process.
pub fn cpu_secs(pid: Option<u32>) -> Result<f64> {
    let path = match pid {
        Some(pid) => format!("/proc/{pid}/stat"),
        None => "/proc/self/stat".to_string(),
    };
    stat_cpu_secs(&path)
}

/// CPU seconds (user + system) of the threads of process `pid` whose name
/// starts with `prefix` (wazoo names its member threads `wazoo-member`).
pub fn threads_cpu_secs(pid: u32, prefix: &str) -> Result<f64> {
    let dir = format!("/proc/{pid}/task");
    let mut secs = 0.0;
    for task in std::fs::read_dir(&dir).with_context(|| format!("reading {dir}"))? {
        let task = task?.path();
        // A thread that ended between the listing and the read is skipped.
        let Ok(comm) = std::fs::read_to_string(task.join("comm")) else {
            continue;
        };
        if comm.trim_end().starts_with(prefix) {
            if let Ok(s) = stat_cpu_secs(&task.join("stat").display().to_string()) {
                secs += s;
            }
        }
    }
    Ok(secs)
}

/// utime + stime of a `/proc/.../stat` file, in seconds.
fn stat_cpu_secs(path: &str) -> Result<f64> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
    // The command name (field 2) may hold spaces and parentheses: fields are
    // counted after the last ')'. utime and stime are fields 14 and 15.
    let after = &text[text.rfind(')').context("malformed stat")? + 1..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| -> Result<u64> {
        fields
            .get(i)
            .context("short stat line")?
            .parse::<u64>()
            .context("parsing stat ticks")
    };
    let (utime, stime) = (ticks(11)?, ticks(12)?);
    Ok((utime + stime) as f64 / clock_ticks_per_sec())
}

/// CPU seconds the whole machine has spent so far (all CPUs, /proc/stat):
/// (user + nice + system + steal, irq + softirq). Softirq is mostly the
/// loopback network processing of the benchmark's own traffic, which no
/// process is charged for.
pub fn machine_busy_secs() -> Result<(f64, f64)> {
    let text = std::fs::read_to_string("/proc/stat").context("reading /proc/stat")?;
    let line = text
        .lines()
        .find(|l| l.starts_with("cpu "))
        .context("/proc/stat has no cpu line")?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    let at = |i: usize| v.get(i).copied().unwrap_or(0);
    // user nice system idle iowait irq softirq steal
    let hz = clock_ticks_per_sec();
    let tasks = at(0) + at(1) + at(2) + at(7);
    let irq = at(5) + at(6);
    Ok((tasks as f64 / hz, irq as f64 / hz))
}

fn clock_ticks_per_sec() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as f64
    } else {
        100.0
    }
}

/// Finds the wazoo binary to benchmark: `--wazoo-bin`, `$WAZOO_BIN`, then
/// the release build of this workspace.
pub fn find_wazoo_bin(explicit: Option<PathBuf>) -> Result<PathBuf> {
    // Absolute: testkit starts servers in their own directories, where a
    // relative path such as target/debug/wazoo would not resolve.
    let absolute = |path: PathBuf| -> Result<PathBuf> {
        std::fs::canonicalize(&path).with_context(|| format!("resolving {}", path.display()))
    };
    if let Some(path) = explicit {
        if !path.is_file() {
            bail!("--wazoo-bin {} is not a file", path.display());
        }
        return absolute(path);
    }
    if let Some(path) = std::env::var_os("WAZOO_BIN") {
        let path = PathBuf::from(path);
        if !path.is_file() {
            bail!("WAZOO_BIN={} is not a file", path.display());
        }
        return absolute(path);
    }
    let mut candidates = Vec::new();
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        candidates.push(PathBuf::from(dir).join("release").join("wazoo"));
    }
    if let Ok(exe) = std::env::current_exe() {
        if let Some(dir) = exe.parent().filter(|d| d.ends_with("release")) {
            candidates.push(dir.join("wazoo"));
        }
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("bench lives inside the workspace");
    candidates.push(workspace.join("target").join("release").join("wazoo"));
    if let Some(found) = candidates.iter().find(|p| p.is_file()) {
        return absolute(found.clone());
    }
    let tried: Vec<String> = candidates.iter().map(|p| p.display().to_string()).collect();
    bail!(
        "no release build of the wazoo server found (tried {}).\n\
         Build it first:  cargo build --release -p wazoo\n\
         or point at a binary with --wazoo-bin PATH (or WAZOO_BIN=PATH)",
        tried.join(", ")
    )
}

/// Waits until every member at `addrs` serves the module of each
/// `NAME.wasm` in the plugins directory `dir`, compiled
/// (`wazoo_testkit::wait_for_recipes`, 180 s in all): the member deploys
/// them as it starts, once the leader has compiled them, and every member
/// compiles its copy (seconds each for a debug build, on a thread below
/// the member's priority); a measured window must not begin before.
pub fn wait_for_plugins(addrs: &[SocketAddr], dir: &Path) -> Result<()> {
    let mut names = Vec::new();
    for e in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = e?.path();
        if path.extension().is_some_and(|x| x == "wasm") {
            if let Some(stem) = path.file_stem() {
                names.push(stem.to_string_lossy().into_owned());
            }
        }
    }
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let deadline = Instant::now() + Duration::from_secs(180);
    for &addr in addrs {
        let left = deadline.saturating_duration_since(Instant::now());
        wazoo_testkit::wait_for_recipes(addr, &names, left)
            .with_context(|| format!("the modules of {}", dir.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_rss_and_cpu() {
        let pid = std::process::id();
        assert!(proc_status_bytes(pid, "VmRSS").unwrap() > 0);
        assert!(cpu_secs(None).unwrap() >= 0.0);
        assert!(cpu_secs(Some(pid)).unwrap() >= 0.0);
        assert!(machine_busy_secs().unwrap().0 > 0.0);
        assert!(proc_status_bytes(pid, "NoSuchField").is_err());
    }
}
