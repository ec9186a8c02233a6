//! zoo.cfg: ZooKeeper's `key=value` configuration file, read the way
//! `QuorumPeerConfig` reads it, so an existing file works unchanged.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};

/// A member of the ensemble, from a `server.N=host:quorum:election[:role][;client]` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSpec {
    pub id: u64,
    pub host: String,
    pub quorum_port: u16,
    pub election_port: u16,
    pub observer: bool,
    /// `[address:]port` after the `;`, if given.
    pub client_addr: Option<(Option<String>, u16)>,
}

/// Everything wazoo reads from zoo.cfg, with ZooKeeper's defaults.
#[derive(Debug, Clone)]
pub struct Config {
    pub tick_time_ms: u32,
    pub init_limit: u32,
    pub sync_limit: u32,
    pub data_dir: PathBuf,
    pub data_log_dir: PathBuf,
    pub client_port: u16,
    pub client_port_address: Option<IpAddr>,
    pub max_client_cnxns: u32,
    pub min_session_timeout_ms: u32,
    pub max_session_timeout_ms: u32,
    pub snap_retain_count: u32,
    /// Hours between purges; 0 disables autopurge.
    pub purge_interval_hours: u32,
    /// Txns between snapshots (`snapCount`).
    pub snap_count: u64,
    /// Four-letter words allowed; `*` allows all.
    pub four_letter_words: Vec<String>,
    pub extended_types_enabled: bool,
    pub max_buffer: usize,
    /// `wazoo.client.maxOutboundBytes`: unsent bytes (replies, watch events,
    /// recipe notifications) at which a client's connection is closed.
    /// Default: 8 x jute.maxbuffer.
    pub max_outbound_bytes: u64,
    /// `wazoo.client.maxUnsentReplyBytes`: unsent bytes at which a
    /// connection's replies wait and its requests are no longer read.
    /// Default: 2 x jute.maxbuffer.
    pub max_unsent_reply_bytes: u64,
    pub container_check_interval_ms: u64,
    pub container_max_per_minute: u32,
    pub enforce_quota: bool,
    /// `user:base64(sha1(user:password))` of the super user, if any.
    pub super_digest: Option<String>,
    pub servers: Vec<ServerSpec>,
    pub my_id: Option<u64>,
    pub plugins_dir: Option<PathBuf>,
    /// Recipe sandbox limits (`recipe.*` keys).
    pub recipe: RecipeLimits,
    /// Port of the Prometheus metrics endpoint (`metricsProvider.httpPort`).
    pub metrics_port: Option<u16>,
    pub metrics_host: Option<IpAddr>,
    pub reconfig_enabled: bool,
    /// Serve read-only clients when cut off from the quorum
    /// (`readonlymode.enabled`, a system property in ZooKeeper).
    pub read_only_enabled: bool,
    pub standalone_enabled: bool,
    /// Keys we read but do not act on, and keys we do not know: kept for
    /// `conf` and warned about at start.
    pub unknown: BTreeMap<String, String>,
}

pub const DEFAULT_TICK_TIME_MS: u32 = 3000;

/// The recipe sandbox's limits, from `recipe.*` keys; each has a default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecipeLimits {
    /// `recipe.fuel`: fuel (about one per wasm instruction) per call or callback.
    pub fuel: u64,
    /// `recipe.deadlineMs`: wall-clock deadline per call or callback.
    pub deadline_ms: u64,
    /// `recipe.memoryBytes`: linear memory cap per instance.
    pub memory_bytes: usize,
    /// `recipe.maxOps`: tree ops per call (also bounds the txn it makes).
    pub max_ops: usize,
    /// `recipe.maxNotifications`: notifications per call.
    pub max_notifications: usize,
    /// `recipe.maxReplyBytes`: size cap of a reply.
    pub max_reply_bytes: usize,
    /// `recipe.maxWaitsPerSession`: pending waits (callbacks) per session.
    pub max_waits_per_session: usize,
}

impl Default for RecipeLimits {
    fn default() -> Self {
        RecipeLimits {
            fuel: 10_000_000,
            deadline_ms: 100,
            memory_bytes: 16 << 20,
            max_ops: 1_000,
            max_notifications: 64,
            max_reply_bytes: 1 << 20,
            max_waits_per_session: 1_000,
        }
    }
}

impl Config {
    /// Reads and validates a zoo.cfg file, and `myid` from its dataDir.
    pub fn load(path: &Path) -> Result<Config> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read config file {}", path.display()))?;
        let mut cfg = Config::parse(&text)
            .with_context(|| format!("invalid config file {}", path.display()))?;
        if !cfg.servers.is_empty() {
            let myid_path = cfg.data_dir.join("myid");
            if let Ok(s) = std::fs::read_to_string(&myid_path) {
                let id = s.trim().parse::<u64>().map_err(|_| {
                    anyhow!(
                        "{}: myid must be a number, got {:?}",
                        myid_path.display(),
                        s.trim()
                    )
                })?;
                cfg.my_id = Some(id);
            }
        }
        Ok(cfg)
    }

    /// Parses zoo.cfg text (without touching the disk).
    pub fn parse(text: &str) -> Result<Config> {
        let mut kv = BTreeMap::new();
        for (n, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((k, v)) = line.split_once('=') else {
                bail!("line {}: expected key=value, got {line:?}", n + 1);
            };
            kv.insert(k.trim().to_string(), v.trim().to_string());
        }
        Config::from_map(kv)
    }

    fn from_map(mut kv: BTreeMap<String, String>) -> Result<Config> {
        let tick = take_num::<u32>(&mut kv, "tickTime")?.unwrap_or(DEFAULT_TICK_TIME_MS);
        if tick == 0 {
            bail!("tickTime must be positive");
        }
        let data_dir = kv
            .remove("dataDir")
            .map(PathBuf::from)
            .ok_or_else(|| anyhow!("dataDir is not set"))?;
        let data_log_dir = kv
            .remove("dataLogDir")
            .map(PathBuf::from)
            .unwrap_or_else(|| data_dir.clone());
        let min_to = take_num::<u32>(&mut kv, "minSessionTimeout")?.unwrap_or(tick * 2);
        let max_to = take_num::<u32>(&mut kv, "maxSessionTimeout")?.unwrap_or(tick * 20);
        if min_to > max_to {
            bail!(
                "minSessionTimeout ({min_to}) must not be larger than maxSessionTimeout ({max_to})"
            );
        }
        let client_port_address = match kv.remove("clientPortAddress") {
            None => None,
            Some(a) => Some(
                a.parse::<IpAddr>()
                    .map_err(|_| anyhow!("clientPortAddress {a:?} is not an IP address"))?,
            ),
        };
        let mut servers = Vec::new();
        for key in kv.keys().cloned().collect::<Vec<_>>() {
            if let Some(id) = key.strip_prefix("server.") {
                let id: u64 = id
                    .parse()
                    .map_err(|_| anyhow!("{key}: server id must be a number"))?;
                let v = kv.remove(&key).unwrap_or_default();
                servers.push(parse_server(id, &v).with_context(|| format!("{key}={v}"))?);
            }
        }
        servers.sort_by_key(|s| s.id);
        let four = kv
            .remove("4lw.commands.whitelist")
            .unwrap_or_else(|| "srvr".to_string());
        let metrics_port = take_num::<u16>(&mut kv, "metricsProvider.httpPort")?;
        let metrics_host = match kv.remove("metricsProvider.httpHost") {
            None => None,
            Some(a) => Some(
                a.parse::<IpAddr>()
                    .map_err(|_| anyhow!("metricsProvider.httpHost {a:?} is not an IP address"))?,
            ),
        };
        let max_buffer = take_num::<usize>(&mut kv, "jute.maxbuffer")?
            .unwrap_or(wazoo_proto::DEFAULT_MAX_BUFFER);
        let max_unsent_reply_bytes = take_num::<u64>(&mut kv, "wazoo.client.maxUnsentReplyBytes")?
            .unwrap_or(2 * max_buffer as u64);
        let max_outbound_bytes = take_num::<u64>(&mut kv, "wazoo.client.maxOutboundBytes")?
            .unwrap_or(8 * max_buffer as u64);
        if max_unsent_reply_bytes == 0 || max_outbound_bytes <= max_unsent_reply_bytes {
            bail!(
                "wazoo.client.maxUnsentReplyBytes ({max_unsent_reply_bytes}) must be positive and \
                 less than wazoo.client.maxOutboundBytes ({max_outbound_bytes}), with room for the \
                 largest reply between them"
            );
        }
        let super_digest = kv
            .remove("DigestAuthenticationProvider.superDigest")
            .or_else(|| kv.remove("zookeeper.DigestAuthenticationProvider.superDigest"));
        let enforce_quota = take_bool(&mut kv, "enforceQuota")?
            .or(take_bool(&mut kv, "zookeeper.enforceQuota")?)
            .unwrap_or(false);
        let d = RecipeLimits::default();
        let recipe = RecipeLimits {
            fuel: take_num(&mut kv, "recipe.fuel")?.unwrap_or(d.fuel),
            deadline_ms: take_num(&mut kv, "recipe.deadlineMs")?.unwrap_or(d.deadline_ms),
            memory_bytes: take_num(&mut kv, "recipe.memoryBytes")?.unwrap_or(d.memory_bytes),
            max_ops: take_num(&mut kv, "recipe.maxOps")?.unwrap_or(d.max_ops),
            max_notifications: take_num(&mut kv, "recipe.maxNotifications")?
                .unwrap_or(d.max_notifications),
            max_reply_bytes: take_num(&mut kv, "recipe.maxReplyBytes")?
                .unwrap_or(d.max_reply_bytes),
            max_waits_per_session: take_num(&mut kv, "recipe.maxWaitsPerSession")?
                .unwrap_or(d.max_waits_per_session),
        };
        if recipe.fuel == 0 || recipe.deadline_ms == 0 || recipe.memory_bytes < (64 << 10) {
            bail!("recipe.fuel and recipe.deadlineMs must be positive and recipe.memoryBytes at least 65536 (one wasm page)");
        }
        let cfg = Config {
            recipe,
            tick_time_ms: tick,
            init_limit: take_num(&mut kv, "initLimit")?.unwrap_or(10),
            sync_limit: take_num(&mut kv, "syncLimit")?.unwrap_or(5),
            data_dir,
            data_log_dir,
            client_port: take_num(&mut kv, "clientPort")?.unwrap_or(2181),
            client_port_address,
            max_client_cnxns: take_num(&mut kv, "maxClientCnxns")?.unwrap_or(60),
            min_session_timeout_ms: min_to,
            max_session_timeout_ms: max_to,
            snap_retain_count: take_num::<u32>(&mut kv, "autopurge.snapRetainCount")?
                .unwrap_or(3)
                .max(3),
            purge_interval_hours: take_num(&mut kv, "autopurge.purgeInterval")?.unwrap_or(0),
            snap_count: take_num(&mut kv, "snapCount")?.unwrap_or(100_000).max(2),
            four_letter_words: four
                .split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect(),
            extended_types_enabled: take_bool(&mut kv, "extendedTypesEnabled")?
                .or(take_bool(&mut kv, "zookeeper.extendedTypesEnabled")?)
                .unwrap_or(false),
            max_buffer,
            max_outbound_bytes,
            max_unsent_reply_bytes,
            container_check_interval_ms: take_num(&mut kv, "znode.container.checkIntervalMs")?
                .unwrap_or(60_000),
            container_max_per_minute: take_num(&mut kv, "znode.container.maxPerMinute")?
                .unwrap_or(10_000),
            enforce_quota,
            super_digest,
            servers,
            my_id: None,
            plugins_dir: kv.remove("plugins.dir").map(PathBuf::from),
            metrics_port,
            metrics_host,
            reconfig_enabled: take_bool(&mut kv, "reconfigEnabled")?.unwrap_or(false),
            read_only_enabled: take_bool(&mut kv, "readonlymode.enabled")?
                .or(take_bool(&mut kv, "zookeeper.readonlymode.enabled")?)
                .unwrap_or(false),
            standalone_enabled: take_bool(&mut kv, "standaloneEnabled")?.unwrap_or(true),
            unknown: kv,
        };
        Ok(cfg)
    }

    /// Whether this config describes an ensemble rather than one member.
    pub fn is_ensemble(&self) -> bool {
        !self.servers.is_empty()
    }

    /// Where clients connect.
    pub fn client_addr(&self) -> SocketAddr {
        let ip = self
            .client_port_address
            .unwrap_or(IpAddr::from([0, 0, 0, 0]));
        SocketAddr::new(ip, self.client_port)
    }

    /// Whether a four-letter word may run.
    pub fn four_letter_allowed(&self, word: &str) -> bool {
        self.four_letter_words.iter().any(|w| w == "*" || w == word)
    }

    /// The negotiated session timeout for a requested one.
    pub fn negotiate_timeout(&self, requested_ms: i32) -> i32 {
        let r = requested_ms.max(0) as u32;
        r.clamp(self.min_session_timeout_ms, self.max_session_timeout_ms) as i32
    }

    /// Lines for the `conf` four-letter word.
    pub fn conf_lines(&self) -> Vec<String> {
        let mut v = vec![
            format!("clientPort={}", self.client_port),
            format!("dataDir={}", self.data_dir.join("version-2").display()),
            format!("dataDirSize=0"),
            format!(
                "dataLogDir={}",
                self.data_log_dir.join("version-2").display()
            ),
            format!("dataLogSize=0"),
            format!("tickTime={}", self.tick_time_ms),
            format!("maxClientCnxns={}", self.max_client_cnxns),
            format!("minSessionTimeout={}", self.min_session_timeout_ms),
            format!("maxSessionTimeout={}", self.max_session_timeout_ms),
            format!("clientPortListenBacklog=-1"),
            format!("serverId={}", self.my_id.unwrap_or(0)),
        ];
        if let Some(a) = self.client_port_address {
            v.insert(1, format!("secureClientPortAddress={a}"));
        }
        if self.is_ensemble() {
            v.push(format!("initLimit={}", self.init_limit));
            v.push(format!("syncLimit={}", self.sync_limit));
            for s in &self.servers {
                v.push(format!(
                    "server.{}={}:{}:{}:{}",
                    s.id,
                    s.host,
                    s.quorum_port,
                    s.election_port,
                    if s.observer {
                        "observer"
                    } else {
                        "participant"
                    }
                ));
            }
        }
        v
    }
}

fn take_num<T: std::str::FromStr>(
    kv: &mut BTreeMap<String, String>,
    key: &str,
) -> Result<Option<T>> {
    match kv.remove(key) {
        None => Ok(None),
        Some(v) => v
            .parse::<T>()
            .map(Some)
            .map_err(|_| anyhow!("{key}={v:?} is not a valid number")),
    }
}

fn take_bool(kv: &mut BTreeMap<String, String>, key: &str) -> Result<Option<bool>> {
    match kv.remove(key).as_deref() {
        None => Ok(None),
        Some(v) if v.eq_ignore_ascii_case("true") => Ok(Some(true)),
        Some(v) if v.eq_ignore_ascii_case("false") => Ok(Some(false)),
        Some(v) => bail!("{key}={v:?} must be true or false"),
    }
}

fn parse_port(s: &str, what: &str) -> Result<u16> {
    s.trim()
        .parse::<u16>()
        .map_err(|_| anyhow!("{what} {s:?} is not a port number"))
}

/// `host:quorumPort:electionPort[:participant|observer][;[clientAddr:]clientPort]`
fn parse_server(id: u64, v: &str) -> Result<ServerSpec> {
    let (addr, client) = match v.split_once(';') {
        Some((a, c)) => (a, Some(c)),
        None => (v, None),
    };
    let parts: Vec<&str> = addr.split(':').collect();
    if parts.len() < 3 || parts.len() > 4 {
        bail!("expected host:quorumPort:electionPort[:participant|observer]");
    }
    let observer = match parts.get(3).map(|s| s.trim()) {
        None | Some("participant") => false,
        Some("observer") => true,
        Some(r) => bail!("unknown role {r:?} (participant or observer)"),
    };
    let client_addr = match client {
        None => None,
        Some(c) => Some(match c.rsplit_once(':') {
            Some((h, p)) => (Some(h.to_string()), parse_port(p, "client port")?),
            None => (None, parse_port(c, "client port")?),
        }),
    };
    Ok(ServerSpec {
        id,
        host: parts[0].trim().to_string(),
        quorum_port: parse_port(parts[1], "quorum port")?,
        election_port: parse_port(parts[2], "election port")?,
        observer,
        client_addr,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_minimal_standalone_config_gets_zookeeper_defaults() {
        let c = Config::parse("dataDir=/tmp/zk\nclientPort=2181\n").unwrap();
        assert_eq!(c.tick_time_ms, 3000);
        assert_eq!(c.min_session_timeout_ms, 6000, "2 x tickTime");
        assert_eq!(c.max_session_timeout_ms, 60000, "20 x tickTime");
        assert_eq!(c.max_client_cnxns, 60);
        assert_eq!(c.data_log_dir, PathBuf::from("/tmp/zk"));
        assert_eq!(c.four_letter_words, vec!["srvr"]);
        assert!(!c.is_ensemble());
        assert_eq!(c.max_buffer, 0xfffff);
    }

    #[test]
    fn session_timeouts_are_negotiated_into_the_configured_range() {
        let c = Config::parse("tickTime=2000\ndataDir=/d\n").unwrap();
        assert_eq!(c.negotiate_timeout(1000), 4000);
        assert_eq!(c.negotiate_timeout(10_000), 10_000);
        assert_eq!(c.negotiate_timeout(1_000_000), 40_000);
        assert_eq!(c.negotiate_timeout(-5), 4000);
    }

    #[test]
    fn server_lines_parse_roles_and_client_ports() {
        let c = Config::parse(
            "dataDir=/d\nserver.1=127.0.0.1:2888:3888\nserver.3=h3:1:2:observer;2183\nserver.2=h2:1:2:participant;0.0.0.0:2182\n",
        )
        .unwrap();
        assert_eq!(c.servers.len(), 3);
        assert_eq!(c.servers[0].id, 1);
        assert_eq!(
            c.servers[1].client_addr,
            Some((Some("0.0.0.0".into()), 2182))
        );
        assert!(c.servers[2].observer);
        assert_eq!(c.servers[2].client_addr, Some((None, 2183)));
    }

    #[test]
    fn bad_values_are_named_in_the_error() {
        let e = Config::parse("dataDir=/d\ntickTime=abc\n").unwrap_err();
        assert!(format!("{e:#}").contains("tickTime"), "{e:#}");
        let e = Config::parse("clientPort=1\n").unwrap_err();
        assert!(format!("{e:#}").contains("dataDir"), "{e:#}");
        let e = Config::parse("dataDir=/d\nserver.1=h:1\n").unwrap_err();
        assert!(format!("{e:#}").contains("server.1"), "{e:#}");
        let e = Config::parse("dataDir=/d\njunk line\n").unwrap_err();
        assert!(format!("{e:#}").contains("line 2"), "{e:#}");
    }

    #[test]
    fn client_byte_bounds_default_to_multiples_of_jute_maxbuffer() {
        let c = Config::parse("dataDir=/d\n").unwrap();
        assert_eq!(c.max_unsent_reply_bytes, 2 * 0xfffff);
        assert_eq!(c.max_outbound_bytes, 8 * 0xfffff);
        let c = Config::parse("dataDir=/d\njute.maxbuffer=4000000\n").unwrap();
        assert_eq!(c.max_outbound_bytes, 32_000_000);
        let c = Config::parse(
            "dataDir=/d\nwazoo.client.maxOutboundBytes=3000\nwazoo.client.maxUnsentReplyBytes=1000\n",
        )
        .unwrap();
        assert_eq!(
            (c.max_outbound_bytes, c.max_unsent_reply_bytes),
            (3000, 1000)
        );
        assert!(!c.unknown.contains_key("wazoo.client.maxOutboundBytes"));
        let e = Config::parse("dataDir=/d\nwazoo.client.maxOutboundBytes=1000\n").unwrap_err();
        assert!(
            format!("{e:#}").contains("wazoo.client.maxOutboundBytes"),
            "{e:#}"
        );
    }

    #[test]
    fn unknown_keys_are_kept_not_fatal() {
        let c = Config::parse("dataDir=/d\nfoo.bar=1\n").unwrap();
        assert_eq!(c.unknown.get("foo.bar").map(String::as_str), Some("1"));
    }
}
