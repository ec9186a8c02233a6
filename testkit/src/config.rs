//! Server options and `zoo.cfg` generation, shared by both flavors.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// Options for starting a server of either flavor.
///
/// `ServerOptions::default()` gives ZooKeeper's own defaults (tickTime 2000,
/// so sessions may last 4 s to 40 s). Builder methods exist for the common
/// knobs; `cfg` adds any `zoo.cfg` line.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// `tickTime` in milliseconds.
    pub tick_time_ms: u32,
    /// `minSessionTimeout` in milliseconds (server default: 2 ticks).
    pub min_session_timeout_ms: Option<u32>,
    /// `maxSessionTimeout` in milliseconds (server default: 20 ticks).
    pub max_session_timeout_ms: Option<u32>,
    /// Extra `key=value` lines for `zoo.cfg`. A key that the harness also
    /// sets replaces the harness's value.
    pub extra_cfg: Vec<String>,
    /// How long to wait for the server to answer `ruok` with `imok`.
    pub startup_timeout: Duration,
    /// Extra environment variables for the server process.
    pub env: Vec<(String, String)>,
    /// Extra command-line arguments (wazoo: appended after
    /// `serve --config <cfg>`; ZooKeeper: JVM options before the main class).
    pub extra_args: Vec<String>,
    /// wazoo only: the binary to run, overriding the search of [`crate::wazoo_bin`]
    /// (for example `env!("CARGO_BIN_EXE_wazoo")` in the host crate's own tests).
    pub binary: Option<PathBuf>,
    /// Ensembles only: how many of the members (the last ones) are
    /// observers rather than participants.
    pub observers: usize,
    /// Ensembles only: members reach each other through fault proxies
    /// (`isolate`, `heal`; see `QuorumNet`).
    pub quorum_proxies: bool,
    /// Ensembles only: directories created in each member's working
    /// directory before it starts, for per-member relative paths (such as
    /// `--plugins plugins`: each member its own plugins directory).
    pub member_dirs: Vec<String>,
    /// Each server or member serves the AdminServer on a free loopback
    /// port (`admin.serverPort`); `admin_addr` says where.
    pub admin_server: bool,
    /// Ensembles only: every member lists two address pairs
    /// (`multiAddress.enabled=true`; ZooKeeper 3.8 also gets the system
    /// property `zookeeper.multiAddress.enabled=true`, without which it
    /// refuses the lines whatever zoo.cfg says).
    pub multi_address: Option<MultiAddress>,
    /// Ensembles only: member `i` (0-based) has its quorum and election
    /// ports on 127.0.0.`i + 1` rather than all on 127.0.0.1, so every
    /// member can listen on the same port number of its own address (as
    /// ZooKeeper's followers do on `observerMasterPort`). Not with quorum
    /// proxies or several addresses.
    pub distinct_loopback: bool,
}

/// The two address pairs of each member with
/// [`ServerOptions::multi_address`]: member `i` (0-based) is on 127.0.0.1
/// and on 127.0.0.`i + 2`, each pair with ports of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MultiAddress {
    /// Both pairs reach the member.
    Working,
    /// In the other members' zoo.cfg, each member's first pair (on
    /// 127.0.0.1) names ports nothing listens on: only the second pair
    /// reaches it. Its own zoo.cfg lists its real pairs, where it listens.
    FirstUnreachable,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            tick_time_ms: 2000,
            min_session_timeout_ms: None,
            max_session_timeout_ms: None,
            extra_cfg: Vec::new(),
            startup_timeout: Duration::from_secs(30),
            env: Vec::new(),
            extra_args: Vec::new(),
            binary: None,
            observers: 0,
            quorum_proxies: false,
            member_dirs: Vec::new(),
            admin_server: false,
            multi_address: None,
            distinct_loopback: false,
        }
    }
}

impl ServerOptions {
    pub fn tick_time_ms(mut self, ms: u32) -> Self {
        self.tick_time_ms = ms;
        self
    }

    pub fn session_timeouts_ms(mut self, min: u32, max: u32) -> Self {
        self.min_session_timeout_ms = Some(min);
        self.max_session_timeout_ms = Some(max);
        self
    }

    /// Adds a `zoo.cfg` line such as `"snapCount=100"`.
    pub fn cfg(mut self, line: impl Into<String>) -> Self {
        self.extra_cfg.push(line.into());
        self
    }

    pub fn startup_timeout(mut self, timeout: Duration) -> Self {
        self.startup_timeout = timeout;
        self
    }

    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.extra_args.push(arg.into());
        self
    }

    /// Ensembles only: create `dir` in each member's working directory
    /// before it starts (see [`ServerOptions::member_dirs`]).
    pub fn member_dir(mut self, dir: impl Into<String>) -> Self {
        self.member_dirs.push(dir.into());
        self
    }

    /// Ensembles only: make the last `n` members observers.
    pub fn observers(mut self, n: usize) -> Self {
        self.observers = n;
        self
    }

    /// Ensembles only: route the members' quorum and election connections
    /// through fault proxies, so a test can partition a member silently.
    pub fn quorum_proxies(mut self) -> Self {
        self.quorum_proxies = true;
        self
    }

    /// Ensembles only: give every member two address pairs (see
    /// [`ServerOptions::multi_address`]).
    pub fn multi_address(mut self, how: MultiAddress) -> Self {
        self.multi_address = Some(how);
        self
    }

    /// Ensembles only: each member on a loopback address of its own (see
    /// [`ServerOptions::distinct_loopback`]).
    pub fn distinct_loopback(mut self) -> Self {
        self.distinct_loopback = true;
        self
    }

    /// Serve the AdminServer (see [`ServerOptions::admin_server`]).
    pub fn admin_server(mut self) -> Self {
        self.admin_server = true;
        self
    }

    pub fn binary(mut self, path: impl Into<PathBuf>) -> Self {
        self.binary = Some(path.into());
        self
    }
}

/// An ordered `zoo.cfg`: later `set`s of a key replace its earlier value in place.
#[derive(Debug, Default)]
pub(crate) struct ZooCfg {
    entries: Vec<(String, String)>,
}

impl ZooCfg {
    /// The keys every test server gets, in both flavors.
    pub(crate) fn base(opts: &ServerOptions, data_dir: &Path, client_port: u16) -> ZooCfg {
        let mut cfg = ZooCfg::default();
        cfg.set("tickTime", opts.tick_time_ms.to_string());
        cfg.set("dataDir", data_dir.display().to_string());
        cfg.set("clientPort", client_port.to_string());
        cfg.set("clientPortAddress", "127.0.0.1");
        cfg.set("4lw.commands.whitelist", "*");
        cfg.set("extendedTypesEnabled", "true");
        if let Some(ms) = opts.min_session_timeout_ms {
            cfg.set("minSessionTimeout", ms.to_string());
        }
        if let Some(ms) = opts.max_session_timeout_ms {
            cfg.set("maxSessionTimeout", ms.to_string());
        }
        if opts.admin_server {
            cfg.set("admin.enableServer", "true");
            cfg.set("admin.serverAddress", "127.0.0.1");
            cfg.set("admin.serverPort", crate::free_port().to_string());
        } else {
            // On by default on port 8080, in ZooKeeper and wazoo alike:
            // test servers side by side would contend for it.
            cfg.set("admin.enableServer", "false");
        }
        cfg
    }

    /// The value of `key`, if set.
    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Where the AdminServer listens, if this config serves one.
    pub(crate) fn admin_addr(&self) -> Option<std::net::SocketAddr> {
        if self.get("admin.enableServer") != Some("true") {
            return None;
        }
        let port = self.get("admin.serverPort")?.parse().ok()?;
        Some(crate::loopback(port))
    }

    /// What a wazoo test server gets beside [`ZooCfg::base`]: no built-in
    /// recipe modules (compiling them at every start would slow each test by
    /// seconds; a test that wants them sets `wazoo.recipes.builtin=true`).
    pub(crate) fn set_wazoo_defaults(&mut self) {
        self.set("wazoo.recipes.builtin", "false");
    }

    pub(crate) fn set(&mut self, key: impl Into<String>, value: impl Into<String>) {
        let (key, value) = (key.into(), value.into());
        match self.entries.iter_mut().find(|(k, _)| *k == key) {
            Some(entry) => entry.1 = value,
            None => self.entries.push((key, value)),
        }
    }

    /// Applies the user's extra lines (`key=value`; blank lines and `#` comments are ignored).
    pub(crate) fn apply_extra(&mut self, lines: &[String]) -> anyhow::Result<()> {
        for line in lines {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((key, value)) = line.split_once('=') else {
                anyhow::bail!("extra zoo.cfg line {line:?} is not of the form key=value");
            };
            self.set(key.trim(), value.trim());
        }
        Ok(())
    }

    pub(crate) fn render(&self) -> String {
        let mut out = String::from("# written by wazoo-testkit\n");
        for (k, v) in &self.entries {
            out.push_str(&format!("{k}={v}\n"));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extra_lines_replace_harness_keys_and_append_new_ones() {
        let opts = ServerOptions::default()
            .tick_time_ms(100)
            .cfg("tickTime=250")
            .cfg("snapCount=10");
        let mut cfg = ZooCfg::base(&opts, Path::new("/tmp/d"), 1234);
        cfg.apply_extra(&opts.extra_cfg).unwrap();
        let text = cfg.render();
        assert!(text.contains("tickTime=250\n"), "{text}");
        assert!(!text.contains("tickTime=100"), "{text}");
        assert!(text.ends_with("snapCount=10\n"), "{text}");
        assert!(text.contains("clientPortAddress=127.0.0.1\n"), "{text}");
    }

    #[test]
    fn malformed_extra_line_is_an_error() {
        let mut cfg = ZooCfg::default();
        assert!(cfg.apply_extra(&["no equals sign".to_string()]).is_err());
    }
}
