//! zoo.cfg: ZooKeeper's configuration file, read the way `QuorumPeerConfig`
//! reads it (a Java properties file, see [`properties`]), so an existing
//! file works unchanged.
//!
//! Layout: this file reads the keys into a [`Config`]; [`properties`] is
//! the file's grammar, [`tls`] the TLS keys, `keys.rs` the lists of known
//! keys behind [`unused_key_note`], and `tests.rs` the tests.

mod keys;
pub mod properties;
pub mod tls;

pub use keys::unused_key_note;

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};

pub use crate::core::quorum_config::MemberAddr;

/// A member of the ensemble, from a `server.N=host:quorum:election[:role][;client]`
/// line (with `multiAddress.enabled`, several `host:quorum:election` pairs
/// separated by `|`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSpec {
    pub id: u64,
    /// Its address pairs, in the order the line lists them (one without
    /// multiAddress).
    pub addrs: Vec<MemberAddr>,
    pub observer: bool,
    /// `[address:]port` after the `;`, if given.
    pub client_addr: Option<(Option<String>, u16)>,
}

impl ServerSpec {
    /// Member `id` from its entry in a membership.
    pub fn of(id: u64, e: crate::core::quorum_config::ServerEntry) -> ServerSpec {
        ServerSpec {
            id,
            addrs: e.addrs,
            observer: e.observer,
            client_addr: e.client,
        }
    }

    /// Every member of a membership, in id order.
    pub fn all_of(q: crate::core::quorum_config::QuorumConfig) -> Vec<ServerSpec> {
        q.servers
            .into_iter()
            .map(|(id, e)| ServerSpec::of(id, e))
            .collect()
    }
}

/// Everything wazoo reads from zoo.cfg, with ZooKeeper's defaults.
#[derive(Debug, Clone)]
pub struct Config {
    pub tick_time_ms: u32,
    pub init_limit: u32,
    pub sync_limit: u32,
    /// `wazoo.quorum.suspectMs` (default 750): the silence after which a
    /// follower abandons its leader, and from which the leader's lease is
    /// derived (`zab::Config::suspect_ms_max`); syncLimit x tickTime when
    /// that is shorter. It must be the same on every member.
    pub suspect_ms: u64,
    pub data_dir: PathBuf,
    pub data_log_dir: PathBuf,
    pub client_port: u16,
    pub client_port_address: Option<IpAddr>,
    pub max_client_cnxns: u32,
    /// `clientPortListenBacklog` (ZooKeeper's key, -1 by default): the
    /// listen backlog of the client ports when positive; otherwise
    /// wazoo's (1024).
    pub client_port_listen_backlog: i32,
    /// `maxCnxns` (ZooKeeper's key, 0 by default: no limit): the most
    /// connections a client port holds, from all addresses; one more is
    /// closed as soon as it is accepted, as ZooKeeper closes it.
    pub max_cnxns: u32,
    /// `clientTcpKeepAlive` (ZooKeeper's key, `false` by default): TCP
    /// keepalive on client connections.
    pub client_tcp_keepalive: bool,
    /// `tcpKeepAlive` (ZooKeeper's key, `false` by default): TCP keepalive
    /// on the links between members.
    pub quorum_tcp_keepalive: bool,
    pub min_session_timeout_ms: u32,
    pub max_session_timeout_ms: u32,
    pub snap_retain_count: u32,
    /// Hours between purges; 0 disables autopurge.
    pub purge_interval_hours: u32,
    /// Txns between snapshots (`snapCount`).
    pub snap_count: u64,
    /// `snapSizeLimitInKb`: a snapshot is also taken once the txns logged
    /// since the last one reach this many KiB; 0 (or a value at or below
    /// 0 in zoo.cfg) never.
    pub snap_size_limit_kb: u64,
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
    /// `wazoo.client.ioThreads`: threads that run the client connections'
    /// sockets, TLS and frame decoding, beside the member's thread, which
    /// then keeps the core loop alone. 0 (the default): the connections
    /// run on the member's thread, as one thread per member always did.
    pub client_io_threads: usize,
    /// `largeRequestMaxBytes` (ZooKeeper's key and default, 100 MiB): the
    /// bytes of client requests a member holds read and not yet answered,
    /// over all its connections; a request that would pass it closes its
    /// connection.
    pub large_request_max_bytes: u64,
    /// `largeRequestThreshold`: requests longer than this many bytes count
    /// towards `largeRequestMaxBytes`; -1 (the default) counts every one
    /// (ZooKeeper's -1 counts none: docs/COMPATIBILITY.md).
    pub large_request_threshold: i64,
    pub container_check_interval_ms: u64,
    pub container_max_per_minute: u32,
    /// `znode.container.maxNeverUsedIntervalMs` (ZooKeeper's key, 0 by
    /// default: never): how old a container that never had a child may
    /// get before the periodic check deletes it.
    pub container_max_never_used_ms: i64,
    pub enforce_quota: bool,
    /// `user:base64(sha1(user:password))` of the super user, if any.
    pub super_digest: Option<String>,
    pub servers: Vec<ServerSpec>,
    /// `group.N=a:b:c`: hierarchical quorums' groups (Administrator's
    /// Guide, "Cluster Options"); empty for majorities.
    pub groups: BTreeMap<u64, Vec<u64>>,
    /// `weight.N=W`: a member's weight in its group (1 when not given).
    pub weights: BTreeMap<u64, u64>,
    /// `oraclePath` (Administrator's Guide, "Oracle Quorum"): the file
    /// whose first character, `1` or not, lets one of two voters act as a
    /// quorum alone. Read before every tick ([`ask_oracle`]).
    pub oracle_path: Option<PathBuf>,
    /// `dynamicConfigFile`: where the `server.N` lines are when they are
    /// not in zoo.cfg (ZooKeeper Dynamic Reconfiguration, "Changes to
    /// Configuration Format"); read by [`Config::load`].
    pub dynamic_config_file: Option<PathBuf>,
    /// The version of the membership in `servers`: `version=` of the
    /// dynamic file, or the hexadecimal suffix of its name
    /// (`zoo.cfg.dynamic.100000000`), or 0 for `server.N` lines in zoo.cfg.
    pub config_version: i64,
    pub my_id: Option<u64>,
    pub plugins_dir: Option<PathBuf>,
    /// `wazoo.recipes.builtin`: whether the member loads the built-in
    /// recipe modules at start (default true).
    pub builtin_recipes: bool,
    /// `wazoo.peers=zookeeper`: the other members are Apache ZooKeeper
    /// 3.8 servers, whose quorum protocol this member speaks (as an
    /// observer or a follower; docs/MIGRATION.md). `wazoo` (the default): wazoo members.
    pub peers_zookeeper: bool,
    /// `peerType` (`observer` or `participant`), if set. As in ZooKeeper,
    /// the member's own `server.N` line decides; a differing peerType is
    /// warned about at start.
    pub peer_type_observer: Option<bool>,
    /// `digest.enabled` (default true): the tree digest log `hash` shows.
    pub digest_enabled: bool,
    /// Recipe sandbox limits (`recipe.*` keys).
    pub recipe: RecipeLimits,
    /// Port of the Prometheus metrics endpoint (`metricsProvider.httpPort`;
    /// 7000 when `metricsProvider.className` names ZooKeeper's Prometheus
    /// provider without a port, as ZooKeeper serves it).
    pub metrics_port: Option<u16>,
    pub metrics_host: Option<IpAddr>,
    /// The AdminServer (`admin.*` keys), when it is on (see
    /// [`AdminServerConfig`]).
    pub admin: Option<AdminServerConfig>,
    pub reconfig_enabled: bool,
    /// Serve read-only clients when cut off from the quorum
    /// (`readonlymode.enabled`, a system property in ZooKeeper).
    pub read_only_enabled: bool,
    /// `localSessionsEnabled` (ZooKeeper's default false): in an ensemble,
    /// new sessions are local to their member (docs/OPERATIONS.md, "Local
    /// sessions"); ignored standalone, as by ZooKeeper.
    pub local_sessions_enabled: bool,
    /// `localSessionsUpgradingEnabled` (default false): a local session's
    /// first ephemeral makes it global rather than failing.
    pub local_sessions_upgrading_enabled: bool,
    pub standalone_enabled: bool,
    /// `quorumListenOnAllIPs` (ZooKeeper's key, `false` by default): the
    /// quorum port listens on every address rather than the member's own
    /// in its `server.N` line.
    pub quorum_listen_on_all_ips: bool,
    /// `multiAddress.enabled` (default false): a `server.N` line may list
    /// several address pairs separated by `|` (docs/OPERATIONS.md,
    /// "Several addresses per member"); without it such a line is refused,
    /// as ZooKeeper refuses it.
    pub multi_address_enabled: bool,
    /// `observerMasterPort` (Administrator's Guide, "Cluster Options"),
    /// when set to a port: followers serve observers as their learner
    /// master and observers sync from a follower (docs/OPERATIONS.md,
    /// "Observers behind followers"). wazoo carries that session on the
    /// link the two members already share; nothing listens on the port.
    pub observer_master_port: Option<u16>,
    /// The secure client port and TLS between members (`secureClientPort`,
    /// `ssl.*`, `sslQuorum`, `ssl.quorum.*`).
    pub tls: tls::TlsConfig,
    /// SASL and enforced authentication (`authProvider.N=...SASLAuthenticationProvider`,
    /// `zookeeper.superUser`, `sessionRequireClientSASLAuth`, `enforce.auth.*`),
    /// and the users of `wazoo serve --jaas`.
    pub sasl: SaslConfig,
    /// Keys we read but do not act on, and keys we do not know: warned
    /// about at start. Secret values (see [`is_secret_key`]) are stored as
    /// `****`, so no log line, debug print or report can leak them.
    pub unknown: BTreeMap<String, String>,
    /// `wazoo serve --truncate-corrupt-log-tail` (never a zoo.cfg key, so it
    /// cannot stay on by accident): the operator accepts losing the records
    /// from the first corrupt one on, instead of the member refusing to
    /// start (`wazoo_storage::LogOptions::truncate_corrupt_tail`).
    pub truncate_corrupt_log_tail: bool,
    /// `forceSync` (ZooKeeper's key, `yes` by default): `no` writes the log
    /// without fdatasync (`wazoo_storage::LogOptions::force_sync`), so a
    /// machine crash may lose acknowledged writes; the member warns at start.
    pub force_sync: bool,
    /// `zookeeper.datadir.autocreate` (or `datadir.autocreate`, the
    /// spelling ZooKeeper's zoo.cfg turns into that system property; `true`
    /// by default): `false` makes a missing `<dataDir>/wazoo-v1` or
    /// `<dataLogDir>/wazoo-v1` stop the start rather than be created.
    pub data_dir_autocreate: bool,
    /// `audit.enable` (or `zookeeper.audit.enable`; `false` by default):
    /// write ZooKeeper's audit records (`crate::audit`).
    pub audit_enabled: bool,
    /// `wazoo.audit.file`: where the audit records go; default
    /// `<dataDir>/zookeeper_audit.log` (ZooKeeper names the file in its
    /// logback configuration).
    pub audit_file: Option<PathBuf>,
}

pub const DEFAULT_TICK_TIME_MS: u32 = 3000;

/// SASL and enforced client authentication, as ZooKeeper 3.8 reads them
/// (ZooKeeper Administrator's Guide, "Encryption, Authentication,
/// Authorization Options").
#[derive(Debug, Clone, Default)]
pub struct SaslConfig {
    /// `authProvider.N=org.apache.zookeeper.server.auth.SASLAuthenticationProvider`:
    /// the `sasl` ACL scheme is registered.
    pub provider: bool,
    /// `zookeeper.superUser`: the SASL user who is also `super`.
    pub super_user: Option<String>,
    /// The schemes a connection must have authenticated with before any
    /// request but auth and SASL is served; empty when enforcement is off.
    /// `sessionRequireClientSASLAuth=true` means `sasl`; otherwise
    /// `enforce.auth.enabled=true` with `enforce.auth.schemes`.
    pub enforce_schemes: Vec<String>,
    /// The JAAS `Server` section's users (`wazoo serve --jaas`); without
    /// it the SASL request is not served.
    pub users: Option<std::sync::Arc<crate::sasl::SaslUsers>>,
}

/// The AdminServer's HTTP endpoint (ZooKeeper Administrator's Guide, "The
/// AdminServer"): `admin.serverAddress`, `admin.serverPort`,
/// `admin.commandURL` and `admin.idleTimeout`, with ZooKeeper's defaults.
///
/// It is on unless `admin.enableServer=false`, as ZooKeeper's: by default
/// on every address, port 8080.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminServerConfig {
    pub addr: SocketAddr,
    /// Where the commands are, `/commands` by default; always starts with
    /// `/` and never ends with one.
    pub command_url: String,
    /// How long a connection may stay silent (ZooKeeper: 30000 ms).
    pub idle_timeout_ms: u64,
    /// `admin.snapshot.enabled` (ZooKeeper 3.9, default `true`): the
    /// `snapshot` command is served.
    pub snapshot_enabled: bool,
    /// `admin.restore.enabled` (ZooKeeper 3.9, default `true`): the
    /// `restore` command is served.
    pub restore_enabled: bool,
    /// `admin.rateLimiterIntervalInMS` (default 300000): at most one
    /// `snapshot`, and one `restore`, per this many milliseconds.
    pub rate_limit_ms: u64,
    /// TLS on the port (`admin.forceHttps`, `admin.portUnification`).
    pub tls: AdminTls,
    /// `admin.needClientAuth` (ZooKeeper 3.9): a TLS client must present a
    /// certificate the `ssl.quorum.*` trust store accepts.
    pub need_client_auth: bool,
}

/// TLS on the AdminServer's port, with the certificate of the `ssl.quorum.*`
/// key store, as ZooKeeper's AdminServer takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminTls {
    /// Plain HTTP (ZooKeeper's default).
    Off,
    /// `admin.forceHttps=true`: HTTPS only.
    Https,
    /// `admin.portUnification=true`: HTTPS and plain HTTP on the one port,
    /// told apart by the first byte.
    Unified,
}

/// ZooKeeper's AdminServer port.
pub const ADMIN_DEFAULT_PORT: u16 = 8080;

/// Reads the AdminServer's keys (in any case, with or without
/// `zookeeper.`, as [`feature_refusal`] matches them).
fn take_admin(kv: &mut BTreeMap<String, String>) -> Result<Option<AdminServerConfig>> {
    let mut take = |name: &str| -> Option<(String, String)> {
        let key = kv
            .keys()
            .find(|k| {
                let k = k.to_ascii_lowercase();
                k.strip_prefix("zookeeper.").unwrap_or(&k) == name
            })?
            .clone();
        kv.remove(&key).map(|v| (key, v.trim().to_string()))
    };
    let enable = take("admin.enableserver");
    let port = take("admin.serverport");
    let address = take("admin.serveraddress");
    let url = take("admin.commandurl");
    let idle = take("admin.idletimeout");
    let snapshot = take("admin.snapshot.enabled");
    let restore = take("admin.restore.enabled");
    let rate = take("admin.ratelimiterintervalinms");
    let force_https = take("admin.forcehttps");
    let unified = take("admin.portunification");
    let need_client_auth = take("admin.needclientauth");
    let on = match &enable {
        Some((_, v)) if v.eq_ignore_ascii_case("true") => true,
        Some((_, v)) if v.eq_ignore_ascii_case("false") => false,
        Some((k, v)) => bail!("{k}={v:?} must be true or false"),
        None => true,
    };
    if !on {
        return Ok(None);
    }
    let port = match port {
        None => ADMIN_DEFAULT_PORT,
        Some((k, v)) => v
            .parse::<u16>()
            .map_err(|_| anyhow!("{k}={v:?} is not a port number"))?,
    };
    let ip = match address {
        None => IpAddr::from([0, 0, 0, 0]),
        Some((k, v)) => v
            .parse::<IpAddr>()
            .map_err(|_| anyhow!("{k}={v:?} is not an IP address"))?,
    };
    let command_url = match url {
        None => "/commands".to_string(),
        Some((k, v)) => {
            let path = v.trim_end_matches('/');
            if !v.starts_with('/')
                || path.is_empty()
                || path.bytes().any(|b| b <= b' ' || b == b'?' || b == b'#')
            {
                bail!("{k}={v:?} must be a path such as /commands");
            }
            path.to_string()
        }
    };
    let idle_timeout_ms = match idle {
        None => 30_000,
        Some((k, v)) => match v.parse::<u64>() {
            Ok(ms) if ms > 0 => ms,
            _ => bail!("{k}={v:?} must be a positive number of milliseconds"),
        },
    };
    // `true` or `false`, `unset` when absent.
    let flag = |kv: Option<(String, String)>, unset: bool| -> Result<bool> {
        match kv {
            None => Ok(unset),
            Some((_, v)) if v.eq_ignore_ascii_case("true") => Ok(true),
            Some((_, v)) if v.eq_ignore_ascii_case("false") => Ok(false),
            Some((k, v)) => bail!("{k}={v:?} must be true or false"),
        }
    };
    let snapshot_enabled = flag(snapshot, true)?;
    let restore_enabled = flag(restore, true)?;
    let rate_limit_ms = match rate {
        None => 300_000,
        Some((k, v)) => v
            .parse::<u64>()
            .map_err(|_| anyhow!("{k}={v:?} must be a number of milliseconds"))?,
    };
    // ZooKeeper: forceHttps wins over portUnification.
    let tls = match (flag(force_https, false)?, flag(unified, false)?) {
        (true, _) => AdminTls::Https,
        (false, true) => AdminTls::Unified,
        (false, false) => AdminTls::Off,
    };
    Ok(Some(AdminServerConfig {
        addr: SocketAddr::new(ip, port),
        command_url,
        idle_timeout_ms,
        snapshot_enabled,
        restore_enabled,
        rate_limit_ms,
        tls,
        need_client_auth: flag(need_client_auth, false)?,
    }))
}

/// The Prometheus metrics provider class ZooKeeper's zoo.cfg names.
const PROMETHEUS_PROVIDER: &str =
    "org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider";

/// The SASL provider class ZooKeeper's zoo.cfg names.
const SASL_PROVIDER: &str = "org.apache.zookeeper.server.auth.SASLAuthenticationProvider";

/// Takes the SASL and enforced-authentication keys, in either spelling
/// (`key` or `zookeeper.key`) and any case, as [`security_refusal`]
/// matches them: a key it lets through is always acted on here.
fn take_sasl(kv: &mut BTreeMap<String, String>) -> Result<SaslConfig> {
    let mut cfg = SaslConfig::default();
    let mut require_sasl = false;
    let mut enforce = false;
    let mut schemes: Vec<String> = Vec::new();
    for key in kv.keys().cloned().collect::<Vec<_>>() {
        let lower = key.to_ascii_lowercase();
        let k = lower.strip_prefix("zookeeper.").unwrap_or(&lower);
        let flag = |v: &str| -> Result<bool> {
            match v.trim() {
                v if v.eq_ignore_ascii_case("true") => Ok(true),
                v if v.eq_ignore_ascii_case("false") => Ok(false),
                v => bail!("{key}={v:?} must be true or false"),
            }
        };
        match k {
            "sessionrequireclientsaslauth" => {
                let v = kv.remove(&key).unwrap_or_default();
                require_sasl |= flag(&v)?;
            }
            "enforce.auth.enabled" => {
                let v = kv.remove(&key).unwrap_or_default();
                enforce |= flag(&v)?;
            }
            "enforce.auth.schemes" => {
                let v = kv.remove(&key).unwrap_or_default();
                schemes.extend(
                    v.split(',')
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                        .map(String::from),
                );
            }
            "superuser" => cfg.super_user = kv.remove(&key).map(|v| v.trim().to_string()),
            _ if k.starts_with("authprovider.") && kv[&key].trim() == SASL_PROVIDER => {
                kv.remove(&key);
                cfg.provider = true;
            }
            _ => {}
        }
    }
    // As ZooKeeper's AuthenticationHelper: sessionRequireClientSASLAuth
    // wins over enforce.auth.*, and every enforced scheme must have its
    // provider, or the server does not start.
    if require_sasl {
        cfg.enforce_schemes = vec!["sasl".to_string()];
    } else if enforce {
        if schemes.is_empty() {
            bail!("enforce.auth.enabled is true: enforce.auth.schemes must be configured");
        }
        cfg.enforce_schemes = schemes;
    }
    for s in &cfg.enforce_schemes {
        let known = matches!(s.as_str(), "digest" | "ip" | "x509") || (s == "sasl" && cfg.provider);
        if !known {
            bail!(
                "authentication scheme {s} is not available (enforced authentication needs its \
                 provider; `sasl` needs authProvider.N={SASL_PROVIDER})"
            );
        }
    }
    Ok(cfg)
}

/// ZooKeeper's audit logger class, the one `audit.impl.class` may name.
const AUDIT_LOGGER: &str = "org.apache.zookeeper.audit.Slf4jAuditLogger";

/// Takes `audit.enable` and `audit.impl.class` in either spelling and any
/// case, as [`feature_refusal`] matches them: whether audit records are
/// written. `audit.impl.class` may only name ZooKeeper's own logger
/// (`feature_refusal` refuses any other class).
fn take_audit(kv: &mut BTreeMap<String, String>) -> Result<bool> {
    let mut enabled = false;
    for key in kv.keys().cloned().collect::<Vec<_>>() {
        let lower = key.to_ascii_lowercase();
        match lower.strip_prefix("zookeeper.").unwrap_or(&lower) {
            "audit.enable" => {
                let v = kv.remove(&key).unwrap_or_default();
                enabled |= match v.trim() {
                    v if v.eq_ignore_ascii_case("true") => true,
                    v if v.eq_ignore_ascii_case("false") => false,
                    v => bail!("{key}={v:?} must be true or false"),
                };
            }
            "audit.impl.class" => {
                kv.remove(&key);
            }
            _ => {}
        }
    }
    Ok(enabled)
}

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
    /// `recipe.workers`: threads that run recipe steps off the member's
    /// thread; 0 runs them on the member's thread. `None` (unset): one
    /// fewer than the cores, at least one ([`RecipeLimits::worker_threads`]).
    pub workers: Option<usize>,
    /// `recipe.cacheDir`: where compiled modules are cached (by content
    /// hash and engine settings). Default: `recipe-cache` beside the
    /// snapshots. Members that share one (`wazoo dev`'s three) compile a
    /// module once between them.
    pub cache_dir: Option<PathBuf>,
}

impl RecipeLimits {
    /// How many recipe worker threads to start (0: none, steps run on the
    /// member's thread).
    pub fn worker_threads(&self) -> usize {
        self.workers.unwrap_or_else(|| {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            cores.saturating_sub(1).max(1)
        })
    }
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
            workers: None,
            cache_dir: None,
        }
    }
}

impl Config {
    /// ZooKeeper's warning when `peerType` and the member's own server
    /// line disagree (QuorumPeerConfig: the server line wins).
    pub fn warn_peer_type_mismatch(&self, my_id: u64) {
        let line = self
            .servers
            .iter()
            .find(|s| s.id == my_id)
            .map(|s| s.observer);
        if let (Some(line), Some(said)) = (line, self.peer_type_observer) {
            if line != said {
                let name = |o: bool| if o { "observer" } else { "participant" };
                tracing::warn!(
                    "peerType={} but server.{my_id} says {}: the server line decides, as in ZooKeeper",
                    name(said),
                    name(line)
                );
            }
        }
    }

    /// Reads and validates a zoo.cfg file, and `myid` from its dataDir.
    pub fn load(path: &Path) -> Result<Config> {
        let bytes = std::fs::read(path)
            .with_context(|| format!("cannot read config file {}", path.display()))?;
        let text = properties::decode(&bytes);
        let mut cfg = Config::parse(&text)
            .with_context(|| format!("invalid config file {}", path.display()))?;
        if let Some(dynamic) = cfg.dynamic_config_file.clone() {
            cfg.load_dynamic(&dynamic)
                .with_context(|| format!("invalid dynamic config file {}", dynamic.display()))?;
        }
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

    /// Reads the `server.N` lines and version of a dynamic configuration
    /// file. ZooKeeper 3.5+ writes zoo.cfg this way once reconfiguration
    /// is on: the membership in `zoo.cfg.dynamic.<version>`, named by
    /// `dynamicConfigFile`. Membership in both files is refused: which one
    /// holds would be a guess.
    fn load_dynamic(&mut self, path: &Path) -> Result<()> {
        if !self.servers.is_empty() || !self.groups.is_empty() || !self.weights.is_empty() {
            bail!("zoo.cfg has server.N, group.N or weight.N lines and names a dynamicConfigFile: keep one of the two");
        }
        let bytes =
            std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        let text = properties::decode(&bytes);
        let q = crate::core::quorum_config::QuorumConfig::parse(&text).map_err(|e| anyhow!(e))?;
        if !self.multi_address_enabled {
            q.check_single_addresses().map_err(|e| anyhow!(e))?;
        }
        let from_name = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.rsplit_once(".dynamic."))
            .and_then(|(_, v)| i64::from_str_radix(v, 16).ok());
        self.config_version = if q.version != 0 {
            q.version
        } else {
            from_name.unwrap_or(0)
        };
        self.set_membership(q);
        if self.servers.is_empty() {
            bail!("no server.N line");
        }
        self.check_hierarchy()
    }

    /// Takes the members, groups and weights of `q` (its version is the
    /// caller's to set).
    pub fn set_membership(&mut self, q: crate::core::quorum_config::QuorumConfig) {
        self.groups = q.groups.clone();
        self.weights = q.weights.clone();
        self.servers = ServerSpec::all_of(q);
    }

    /// The membership as `/zookeeper/config` shows it.
    pub fn quorum_config(&self) -> crate::core::quorum_config::QuorumConfig {
        use crate::core::quorum_config::{QuorumConfig, ServerEntry};
        QuorumConfig {
            servers: self
                .servers
                .iter()
                .map(|s| {
                    let e = ServerEntry {
                        addrs: s.addrs.clone(),
                        observer: s.observer,
                        client: s.client_addr.clone(),
                    };
                    (s.id, e)
                })
                .collect(),
            groups: self.groups.clone(),
            weights: self.weights.clone(),
            version: self.config_version,
        }
    }

    /// Parses zoo.cfg text (without touching the disk). A malformed line
    /// is reported by its number, never echoed (it may hold a secret).
    pub fn parse(text: &str) -> Result<Config> {
        let kv = properties::parse(text)?
            .into_iter()
            .map(|(_, k, v)| (k, v))
            .collect();
        Config::from_map(kv)
    }

    /// A config from zoo.cfg keys and values, as if read from a file
    /// holding them (`wazoo dev` builds its members' this way, with no
    /// escaping to get wrong).
    pub fn from_pairs(kv: BTreeMap<String, String>) -> Result<Config> {
        Config::from_map(kv)
    }

    fn from_map(mut kv: BTreeMap<String, String>) -> Result<Config> {
        check_security_keys(&kv)?;
        check_feature_keys(&kv)?;
        let tls = tls::take(&mut kv)?;
        let sasl = take_sasl(&mut kv)?;
        let audit_enabled = take_audit(&mut kv)?;
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
        let multi_address_enabled = take_bool(&mut kv, "multiAddress.enabled")?
            .or(take_bool(&mut kv, "zookeeper.multiAddress.enabled")?)
            .unwrap_or(false);
        let (groups, weights) = take_hierarchy(&mut kv)?;
        let four = kv
            .remove("4lw.commands.whitelist")
            .unwrap_or_else(|| "srvr".to_string());
        // ZooKeeper's Prometheus provider serves on port 7000 unless told
        // otherwise; any provider but it and the default one is refused
        // (`feature_refusal`).
        let prometheus = kv
            .remove("metricsProvider.className")
            .is_some_and(|c| c.trim() == PROMETHEUS_PROVIDER);
        let metrics_port =
            take_num::<u16>(&mut kv, "metricsProvider.httpPort")?.or(prometheus.then_some(7000));
        let metrics_host = match kv.remove("metricsProvider.httpHost") {
            None => None,
            Some(a) => Some(
                a.parse::<IpAddr>()
                    .map_err(|_| anyhow!("metricsProvider.httpHost {a:?} is not an IP address"))?,
            ),
        };
        let admin = take_admin(&mut kv)?;
        if let Some(a) = &admin {
            let key_store = tls.quorum.as_ref().and_then(|q| q.key_store.as_ref());
            if a.tls != AdminTls::Off && key_store.is_none() {
                bail!("admin.forceHttps and admin.portUnification need ssl.quorum.keyStore.location: the AdminServer takes its certificate from the ssl.quorum.* key store, as ZooKeeper's does");
            }
            let trust_store = tls.quorum.as_ref().and_then(|q| q.trust_store.as_ref());
            if a.need_client_auth && (a.tls == AdminTls::Off || trust_store.is_none()) {
                bail!("admin.needClientAuth=true needs admin.forceHttps or admin.portUnification, and ssl.quorum.trustStore.location (the client certificates are checked against it)");
            }
        }
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
        let client_io_threads = take_num::<usize>(&mut kv, "wazoo.client.ioThreads")?.unwrap_or(0);
        if client_io_threads > MAX_CLIENT_IO_THREADS {
            bail!(
                "wazoo.client.ioThreads ({client_io_threads}) is more than {MAX_CLIENT_IO_THREADS}"
            );
        }
        let suspect_ms = take_num::<u64>(&mut kv, "wazoo.quorum.suspectMs")?
            .unwrap_or(crate::core::zab::SUSPECT_MS_MAX_DEFAULT);
        if !(1..=3_600_000).contains(&suspect_ms) {
            bail!("wazoo.quorum.suspectMs ({suspect_ms}) must be from 1 to 3600000 milliseconds");
        }
        let large_request_max_bytes =
            take_num::<u64>(&mut kv, "largeRequestMaxBytes")?.unwrap_or(100 << 20);
        let large_request_threshold =
            take_num::<i64>(&mut kv, "largeRequestThreshold")?.unwrap_or(-1);
        if large_request_threshold == 0 || large_request_threshold < -1 {
            bail!("largeRequestThreshold ({large_request_threshold}) must be -1 or positive");
        }
        if large_request_max_bytes < max_buffer as u64 {
            bail!(
                "largeRequestMaxBytes ({large_request_max_bytes}) must be at least jute.maxbuffer \
                 ({max_buffer}), or the largest request could never be read"
            );
        }
        let super_digest = kv
            .remove("DigestAuthenticationProvider.superDigest")
            .or_else(|| kv.remove("zookeeper.DigestAuthenticationProvider.superDigest"));
        let enforce_quota = take_bool(&mut kv, "enforceQuota")?
            .or(take_bool(&mut kv, "zookeeper.enforceQuota")?)
            .unwrap_or(false);
        let container_max_never_used_ms =
            take_num::<i64>(&mut kv, "znode.container.maxNeverUsedIntervalMs")?.unwrap_or(0);
        if container_max_never_used_ms < 0 {
            bail!("znode.container.maxNeverUsedIntervalMs ({container_max_never_used_ms}) must be 0 (never) or positive");
        }
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
            workers: take_num(&mut kv, "recipe.workers")?,
            cache_dir: kv.remove("recipe.cacheDir").map(PathBuf::from),
        };
        if recipe.workers.is_some_and(|n| n > 64) {
            bail!("recipe.workers must be at most 64");
        }
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
            client_tcp_keepalive: take_bool(&mut kv, "clientTcpKeepAlive")?
                .or(take_bool(&mut kv, "zookeeper.clientTcpKeepAlive")?)
                .unwrap_or(false),
            quorum_tcp_keepalive: take_bool(&mut kv, "tcpKeepAlive")?
                .or(take_bool(&mut kv, "zookeeper.tcpKeepAlive")?)
                .unwrap_or(false),
            max_cnxns: take_num(&mut kv, "maxCnxns")?.unwrap_or(0),
            client_port_listen_backlog: take_num(&mut kv, "clientPortListenBacklog")?.unwrap_or(-1),
            min_session_timeout_ms: min_to,
            max_session_timeout_ms: max_to,
            snap_retain_count: take_num::<u32>(&mut kv, "autopurge.snapRetainCount")?
                .unwrap_or(3)
                .max(3),
            purge_interval_hours: take_num(&mut kv, "autopurge.purgeInterval")?.unwrap_or(0),
            snap_count: take_num(&mut kv, "snapCount")?.unwrap_or(100_000).max(2),
            snap_size_limit_kb: take_num::<i64>(&mut kv, "snapSizeLimitInKb")?
                .or(take_num(&mut kv, "zookeeper.snapSizeLimitInKb")?)
                .unwrap_or(SNAP_SIZE_LIMIT_KB_DEFAULT)
                .max(0) as u64,
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
            client_io_threads,
            large_request_max_bytes,
            large_request_threshold,
            container_check_interval_ms: take_num(&mut kv, "znode.container.checkIntervalMs")?
                .unwrap_or(60_000),
            container_max_per_minute: take_num(&mut kv, "znode.container.maxPerMinute")?
                .unwrap_or(10_000),
            container_max_never_used_ms,
            enforce_quota,
            super_digest,
            servers,
            groups,
            weights,
            oracle_path: kv.remove("oraclePath").map(PathBuf::from),
            dynamic_config_file: kv.remove("dynamicConfigFile").map(PathBuf::from),
            config_version: 0,
            my_id: None,
            plugins_dir: kv.remove("plugins.dir").map(PathBuf::from),
            truncate_corrupt_log_tail: false,
            force_sync: take_yes_no(&mut kv, "forceSync")?.unwrap_or(true),
            data_dir_autocreate: take_bool(&mut kv, "zookeeper.datadir.autocreate")?
                .or(take_bool(&mut kv, "datadir.autocreate")?)
                .unwrap_or(true),
            builtin_recipes: take_bool(&mut kv, "wazoo.recipes.builtin")?.unwrap_or(true),
            digest_enabled: take_bool(&mut kv, "digest.enabled")?
                .or(take_bool(&mut kv, "zookeeper.digest.enabled")?)
                .unwrap_or(true),
            peer_type_observer: match kv.remove("peerType").as_deref().map(str::trim) {
                None => None,
                Some("observer") => Some(true),
                Some("participant") => Some(false),
                Some(other) => bail!("peerType={other}: a member is an `observer` or a `participant`"),
            },
            peers_zookeeper: match kv.remove("wazoo.peers").as_deref().map(str::trim) {
                None | Some("wazoo") => false,
                Some("zookeeper") => true,
                Some(other) => bail!(
                    "wazoo.peers={other}: the other members are either `wazoo` (the default) or `zookeeper`"
                ),
            },
            audit_enabled,
            audit_file: kv.remove("wazoo.audit.file").map(PathBuf::from),
            suspect_ms,
            metrics_port,
            metrics_host,
            admin,
            reconfig_enabled: take_bool(&mut kv, "reconfigEnabled")?.unwrap_or(false),
            read_only_enabled: take_bool(&mut kv, "readonlymode.enabled")?
                .or(take_bool(&mut kv, "zookeeper.readonlymode.enabled")?)
                .unwrap_or(false),
            local_sessions_enabled: take_bool(&mut kv, "localSessionsEnabled")?.unwrap_or(false),
            local_sessions_upgrading_enabled: take_bool(&mut kv, "localSessionsUpgradingEnabled")?
                .unwrap_or(false),
            standalone_enabled: take_bool(&mut kv, "standaloneEnabled")?.unwrap_or(true),
            quorum_listen_on_all_ips: take_bool(&mut kv, "quorumListenOnAllIPs")?.unwrap_or(false),
            multi_address_enabled,
            // ZooKeeper runs no learner master for 0 (or less).
            observer_master_port: match kv.remove("observerMasterPort") {
                None => None,
                Some(v) => match v.trim().parse::<i64>() {
                    Ok(n) if n <= 0 => None,
                    Ok(n) => Some(u16::try_from(n).map_err(|_| {
                        anyhow!("observerMasterPort={n} is not a port (1 to 65535)")
                    })?),
                    Err(_) => bail!("observerMasterPort={v:?} is not a number"),
                },
            },
            tls,
            sasl,
            unknown: kv
                .into_iter()
                .map(|(k, v)| {
                    let v = redact(&k, &v).to_string();
                    (k, v)
                })
                .collect(),
        };
        if cfg.is_ensemble() {
            cfg.check_hierarchy()?;
            if !cfg.multi_address_enabled {
                cfg.quorum_config()
                    .check_single_addresses()
                    .map_err(|e| anyhow!(e))?;
            }
        }
        Ok(cfg)
    }

    /// ZooKeeper's `QuorumHierarchical` checks of `group.N` and
    /// `weight.N` against the members (every participant in exactly one
    /// group, and so on), as a start error.
    fn check_hierarchy(&self) -> Result<()> {
        if self.oracle_path.is_some() && !self.groups.is_empty() {
            bail!("oraclePath and group.N are both set: ZooKeeper would decide quorums by majority and the oracle, ignoring the groups; keep one of the two");
        }
        self.quorum_config()
            .quorum_rule()
            .map(|_| ())
            .map_err(|e| anyhow!("hierarchical quorums (group.N, weight.N): {e}"))
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
            // -1 without a secure port, as ZooKeeper prints it.
            format!(
                "secureClientPort={}",
                self.tls
                    .secure_client_addr
                    .map_or(-1, |a| i32::from(a.port()))
            ),
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
            format!(
                "clientPortListenBacklog={}",
                self.client_port_listen_backlog
            ),
            format!("serverId={}", self.my_id.unwrap_or(0)),
        ];
        if self.is_ensemble() {
            v.push(format!("initLimit={}", self.init_limit));
            v.push(format!("syncLimit={}", self.sync_limit));
            for s in &self.servers {
                let addrs: Vec<String> = s
                    .addrs
                    .iter()
                    .map(|a| format!("{}:{}:{}", a.host, a.quorum_port, a.election_port))
                    .collect();
                v.push(format!(
                    "server.{}={}:{}",
                    s.id,
                    addrs.join("|"),
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

/// What a value shown next to `key` looks like: `****` for a secret.
pub fn redact<'a>(key: &str, value: &'a str) -> &'a str {
    if is_secret_key(key) {
        "****"
    } else {
        value
    }
}

/// Whether a key's value is a secret that must never be shown: any key
/// naming a password (`ssl.keyStore.password`, ...) or a secret, in any
/// case.
pub fn is_secret_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    k.contains("password") || k.contains("secret")
}

/// Why wazoo refuses a security key it does not implement: the mechanism
/// the key configures.
fn security_refusal(key: &str, value: &str) -> Option<String> {
    // ZooKeeper turns a zoo.cfg key it does not parse itself into the
    // system property `zookeeper.<key>`, so both spellings configure the
    // same thing. Keys are matched in any case: a key that would be
    // ignored for its case is refused rather than guessed at.
    let lower = key.to_ascii_lowercase();
    let k = lower.strip_prefix("zookeeper.").unwrap_or(&lower);
    let v = value.trim();
    let off = v.eq_ignore_ascii_case("false");
    let unless_false = |what: &str| (!off).then(|| format!("{what} (only `false` is accepted)"));
    let always = |what: &str| Some(what.to_string());
    if tls::is_tls_key(k) {
        return tls::refusal(k, v);
    }
    match k {
        "client.secure" => unless_false("TLS for clients"),
        // admin.forceHttps, admin.portUnification and admin.needClientAuth
        // are read (`take_admin`).
        // Implemented (`take_sasl`): sessionRequireClientSASLAuth,
        // enforce.auth.*, superUser, the SASL authProvider.
        "sessionrequireclientsaslauth" | "enforce.auth.enabled" | "enforce.auth.schemes" => None,
        // The JAAS section ZooKeeper's server reads; wazoo reads `Server`.
        "sasl.serverconfig" => (v != "Server")
            .then(|| "a JAAS section other than `Server` (only `Server` is accepted)".to_string()),
        "requireclientauthscheme" => always("enforced client authentication"),
        "allowsaslfailedclients" => unless_false("SASL authentication"),
        "quorum.auth.enablesasl"
        | "quorum.auth.learnerrequiresasl"
        | "quorum.auth.serverrequiresasl" => unless_false("SASL between members"),
        _ if k.starts_with("quorum.auth.") => always("SASL between members"),
        _ if k.starts_with("kerberos.") => always("Kerberos (GSSAPI) authentication"),
        _ if k.starts_with("sasl.") || k == "jaasloginrenew" || k.starts_with("java.security.") => {
            always("SASL authentication (JAAS)")
        }
        "superuser" => None,
        "ensembleauthname" => always("ensemble authentication"),
        // Read by ZooKeeper's AdminServer, which wazoo does not have.
        "ipauthenticationprovider.usexforwardedfor" => {
            unless_false("taking a client's address from X-Forwarded-For")
        }
        "fips-mode" => unless_false("FIPS mode (wazoo's TLS library is not FIPS-validated)"),
        _ if k.starts_with("authprovider.") => {
            // The digest, ip and x509 providers are built in (x509 serves
            // the secure client port); naming them again changes nothing.
            // The SASL provider registers the `sasl` scheme (`take_sasl`).
            // Any other provider (a custom class) is authentication wazoo
            // does not have.
            let builtin = [
                "org.apache.zookeeper.server.auth.DigestAuthenticationProvider",
                "org.apache.zookeeper.server.auth.IPAuthenticationProvider",
                "org.apache.zookeeper.server.auth.X509AuthenticationProvider",
                SASL_PROVIDER,
            ];
            (!builtin.contains(&v)).then(|| "an authentication provider".to_string())
        }
        "digestauthenticationprovider.enabled" => (!v.eq_ignore_ascii_case("true"))
            .then(|| "turning digest authentication off (only `true` is accepted)".to_string()),
        "digestauthenticationprovider.digestalg" => (!(v.eq_ignore_ascii_case("SHA1")
            || v.eq_ignore_ascii_case("SHA-1")))
        .then(|| "a digest algorithm other than SHA1 (only `SHA1` is accepted)".to_string()),
        // ZooKeeper skips every ACL check when this is `yes`.
        "skipacl" => (v != "no").then(|| {
            "turning ACL checks off (wazoo always checks ACLs; only `no` is accepted)".to_string()
        }),
        _ => None,
    }
}

/// Fails closed: every security key wazoo does not implement stops the
/// start, all named in one error (never with their values), so that an
/// operator never gets an open service from a secured zoo.cfg. The keys
/// are those of the ZooKeeper Administrator's Guide, "Encryption,
/// Authentication, Authorization Options" and "Communication using the
/// Netty framework" (docs/SECURITY.md lists them).
fn check_security_keys(kv: &BTreeMap<String, String>) -> Result<()> {
    refuse_keys(
        kv,
        security_refusal,
        "zoo.cfg configures security that wazoo does not implement yet, and serving without it would leave the service open (see docs/SECURITY.md)",
    )
}

/// Fails naming every key of `kv` that `why` refuses (never their values),
/// one a line under `what`.
fn refuse_keys(
    kv: &BTreeMap<String, String>,
    why: impl Fn(&str, &str) -> Option<String>,
    what: &str,
) -> Result<()> {
    let refused: Vec<String> = kv
        .iter()
        .filter_map(|(k, v)| why(k, v).map(|why| format!("  {k}: {why}")))
        .collect();
    if refused.is_empty() {
        return Ok(());
    }
    bail!("refusing to start: {what}:\n{}", refused.join("\n"))
}

/// Why wazoo refuses a zoo.cfg key that asks for a ZooKeeper feature it
/// does not implement yet (docs/OPERATIONS.md, "ZooKeeper features not
/// implemented"): serving without the feature would give the operator
/// something other than what the file says, such as global sessions where
/// it asks for local ones, or audit records in a format other than the
/// one asked for. Keys are matched as [`security_refusal`] matches
/// them (any case, with or without `zookeeper.`).
/// ZooKeeper's default `snapSizeLimitInKb`: 4 GiB of log.
const SNAP_SIZE_LIMIT_KB_DEFAULT: i64 = 4 * 1024 * 1024;

fn feature_refusal(key: &str, value: &str) -> Option<String> {
    let lower = key.to_ascii_lowercase();
    let k = lower.strip_prefix("zookeeper.").unwrap_or(&lower);
    let v = value.trim();
    let unless_false = |what: &str| {
        (!v.eq_ignore_ascii_case("false")).then(|| format!("{what} (only `false` is accepted)"))
    };
    let unless_true = |what: &str| {
        (!v.eq_ignore_ascii_case("true")).then(|| format!("{what} (only `true` is accepted)"))
    };
    // A number that leaves the feature off (ZooKeeper's default).
    let unless_num =
        |off: &str, what: &str| (v != off).then(|| format!("{what} (only `{off}` is accepted)"));
    match k {
        "leaderserves" => (v != "yes")
            .then(|| "a leader that serves no clients (only `yes` is accepted)".to_string()),
        "electionalg" => (v != "3").then(|| {
            "an election algorithm other than fast leader election (only `3` is accepted)"
                .to_string()
        }),
        "syncenabled" => unless_true("observers that keep no log or snapshots"),
        "emulate353ttlnodes" => unless_false("ZooKeeper 3.5.3's encoding of TTL nodes"),
        "connectionmaxtokens" => unless_num("0", "connection throttling"),
        "requestthrottlelimit" => unless_num("0", "request throttling"),
        "throttledopwaittime" => unless_num("0", "failing requests that waited too long"),
        "enableeageraclcheck" => {
            unless_false("checking ACLs where a write arrives, before it is forwarded")
        }
        "snapshot.compression.method" => (!v.is_empty())
            .then(|| "compressed snapshots (only an empty value is accepted)".to_string()),
        "snapshot.trust.empty" => unless_false("starting from logs without a snapshot"),
        "audit.impl.class" => (v != AUDIT_LOGGER).then(|| {
            format!("an audit logger other than ZooKeeper's (only `{AUDIT_LOGGER}` is accepted)")
        }),
        "outstandinghandshake.limit" => v.parse::<i64>().map_or(true, |n| n > 0).then(|| {
            "a cap on TLS handshakes in progress (only 0 or below, no cap, is accepted)".to_string()
        }),
        "netty.server.earlydropsecureconnectionhandshakes" => {
            unless_false("dropping TLS connections before the member has started")
        }
        "metricsprovider.classname" => (!matches!(
            v,
            PROMETHEUS_PROVIDER | "org.apache.zookeeper.metrics.impl.DefaultMetricsProvider"
        ))
        .then(|| "a metrics provider other than ZooKeeper's Prometheus one".to_string()),
        "db.autocreate" => unless_true("db existence validation"),
        _ => None,
    }
}

/// Refuses, all named in one error, the keys of [`feature_refusal`].
/// `group.N` and `weight.N` (Administrator's Guide, "Cluster Options"),
/// taken out of `kv`. Whether they make a valid hierarchy of the members
/// is checked once the members are known (`QuorumConfig::quorum_rule`).
#[allow(clippy::type_complexity)]
fn take_hierarchy(
    kv: &mut BTreeMap<String, String>,
) -> Result<(BTreeMap<u64, Vec<u64>>, BTreeMap<u64, u64>)> {
    use crate::core::quorum_config::{parse_group_line, parse_weight_line};
    let (mut groups, mut weights) = (BTreeMap::new(), BTreeMap::new());
    for key in kv.keys().cloned().collect::<Vec<_>>() {
        if let Some(gid) = key.strip_prefix("group.") {
            let v = kv.remove(&key).unwrap_or_default();
            let (gid, members) = parse_group_line(gid, &v).map_err(|e| anyhow!(e))?;
            if groups.insert(gid, members).is_some() {
                bail!("group.{gid} is given twice");
            }
        } else if let Some(id) = key.strip_prefix("weight.") {
            let v = kv.remove(&key).unwrap_or_default();
            let (id, w) = parse_weight_line(id, &v).map_err(|e| anyhow!(e))?;
            if weights.insert(id, w).is_some() {
                bail!("weight.{id} is given twice");
            }
        }
    }
    Ok((groups, weights))
}

/// ZooKeeper's `QuorumOracleMaj.askOracle`: whether the file's first
/// character is `1`; a file that cannot be read (missing, a directory,
/// unreadable) says no.
pub fn ask_oracle(path: &Path) -> bool {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut first = [0u8; 1];
    // Non-blocking: a FIFO put at the path (with no writer) must not hold
    // the member's thread, which asks before every tick; it reads as no
    // byte, so "no". A regular file reads as always.
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .and_then(|mut f| f.read(&mut first))
        .is_ok_and(|n| n == 1 && first[0] == b'1')
}

fn check_feature_keys(kv: &BTreeMap<String, String>) -> Result<()> {
    refuse_keys(
        kv,
        feature_refusal,
        "zoo.cfg asks for ZooKeeper features that wazoo does not implement yet (see docs/OPERATIONS.md, \"ZooKeeper features not implemented\")",
    )
}

/// The most client I/O threads a member starts (`wazoo.client.ioThreads`).
pub const MAX_CLIENT_IO_THREADS: usize = 256;

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

/// A ZooKeeper `yes`/`no` key. ZooKeeper's `forceSync` syncs unless the
/// value is exactly `no`, so `forceSync=false` syncs, against what its
/// writer meant; wazoo refuses anything but the two words, naming the key.
fn take_yes_no(kv: &mut BTreeMap<String, String>, key: &str) -> Result<Option<bool>> {
    match kv.remove(key).as_deref() {
        None => Ok(None),
        Some("yes") => Ok(Some(true)),
        Some("no") => Ok(Some(false)),
        Some(v) => bail!("{key}={v:?} must be yes or no"),
    }
}

/// `host:quorumPort:electionPort[:participant|observer][;[clientAddr:]clientPort]`,
/// read by the same rules as the membership a reconfig names
/// (`wazoo_core::quorum_config`).
fn parse_server(id: u64, v: &str) -> Result<ServerSpec> {
    let e = crate::core::quorum_config::parse_server_entry(v).map_err(|e| anyhow!(e))?;
    Ok(ServerSpec::of(id, e))
}

#[cfg(test)]
mod tests;
