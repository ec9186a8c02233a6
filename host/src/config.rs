//! zoo.cfg: ZooKeeper's configuration file, read the way `QuorumPeerConfig`
//! reads it (a Java properties file, see [`properties`]), so an existing
//! file works unchanged.

pub mod properties;
pub mod tls;

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
    /// `largeRequestMaxBytes` (ZooKeeper's key and default, 100 MiB): the
    /// bytes of client requests a member holds read and not yet answered,
    /// over all its connections; a request that would pass it closes its
    /// connection.
    pub large_request_max_bytes: u64,
    /// `largeRequestThreshold`: requests of at least this many bytes count
    /// towards `largeRequestMaxBytes`; -1 (the default) counts every one.
    pub large_request_threshold: i64,
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
        let bytes = std::fs::read(path)
            .with_context(|| format!("cannot read config file {}", path.display()))?;
        let text = properties::decode(&bytes);
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

    /// Parses zoo.cfg text (without touching the disk). A malformed line
    /// is reported by its number, never echoed (it may hold a secret).
    pub fn parse(text: &str) -> Result<Config> {
        let kv = properties::parse(text)?
            .into_iter()
            .map(|(_, k, v)| (k, v))
            .collect();
        Config::from_map(kv)
    }

    fn from_map(mut kv: BTreeMap<String, String>) -> Result<Config> {
        check_security_keys(&kv)?;
        let tls = tls::take(&mut kv)?;
        let sasl = take_sasl(&mut kv)?;
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
        let large_request_max_bytes =
            take_num::<u64>(&mut kv, "largeRequestMaxBytes")?.unwrap_or(100 << 20);
        let large_request_threshold =
            take_num::<i64>(&mut kv, "largeRequestThreshold")?.unwrap_or(-1);
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
            large_request_max_bytes,
            large_request_threshold,
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
            format!("clientPortListenBacklog=-1"),
            format!("serverId={}", self.my_id.unwrap_or(0)),
        ];
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
        "admin.portunification" | "admin.forcehttps" | "admin.needclientauth" => {
            unless_false("TLS for the AdminServer")
        }
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
    let refused: Vec<String> = kv
        .iter()
        .filter_map(|(k, v)| security_refusal(k, v).map(|why| format!("  {k}: {why}")))
        .collect();
    if refused.is_empty() {
        return Ok(());
    }
    bail!(
        "refusing to start: zoo.cfg configures security that wazoo does not implement yet, and serving without it would leave the service open (see docs/SECURITY.md):\n{}",
        refused.join("\n")
    )
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

/// Every key wazoo reads: what "did you mean" suggests for a misspelled
/// key (`Config::from_map` takes exactly these).
const KEYS_READ: &[&str] = &[
    "4lw.commands.whitelist",
    "DigestAuthenticationProvider.superDigest",
    "autopurge.purgeInterval",
    "autopurge.snapRetainCount",
    "clientPort",
    "clientPortAddress",
    "dataDir",
    "dataLogDir",
    "enforceQuota",
    "extendedTypesEnabled",
    "initLimit",
    "jute.maxbuffer",
    "largeRequestMaxBytes",
    "largeRequestThreshold",
    "maxClientCnxns",
    "maxSessionTimeout",
    "metricsProvider.httpHost",
    "metricsProvider.httpPort",
    "minSessionTimeout",
    "plugins.dir",
    "readonlymode.enabled",
    "recipe.deadlineMs",
    "recipe.fuel",
    "recipe.maxNotifications",
    "recipe.maxOps",
    "recipe.maxReplyBytes",
    "recipe.maxWaitsPerSession",
    "recipe.memoryBytes",
    "reconfigEnabled",
    "snapCount",
    "standaloneEnabled",
    "syncLimit",
    "tickTime",
    "wazoo.client.maxOutboundBytes",
    "wazoo.client.maxUnsentReplyBytes",
    "znode.container.checkIntervalMs",
    "znode.container.maxPerMinute",
];

/// Keys of ZooKeeper 3.8's zoo.cfg (Administrator's Guide, "Configuration
/// Parameters") that wazoo accepts and does not use: tuning for ZooKeeper's
/// own JVM, threads, caches and admin server. (Security keys are not here:
/// those wazoo does not implement stop the start.)
const ZOOKEEPER_KEYS_NOT_USED: &[&str] = &[
    "admin.commandURL",
    "admin.enableServer",
    "admin.idleTimeout",
    "admin.serverAddress",
    "admin.serverPort",
    "audit.enable",
    "clientTcpKeepAlive",
    "cnxTimeout",
    "commitLogCount",
    "connectToLearnerMasterLimit",
    "digest.enabled",
    "dynamicConfigFile",
    "electionAlg",
    "electionPortBindRetry",
    "emulate353TTLNodes",
    "forceSync",
    "fsync.warningthresholdms",
    "globalOutstandingLimit",
    "leaderServes",
    "localSessionsEnabled",
    "localSessionsUpgradingEnabled",
    "maxCnxns",
    "maxGetChildrenResponseCacheSize",
    "maxResponseCacheSize",
    "metricsProvider.className",
    "metricsProvider.exportJvmInfo",
    "multiAddress.enabled",
    "multiAddress.reachabilityCheckEnabled",
    "multiAddress.reachabilityCheckTimeoutMs",
    "observer.election.DelayMs",
    "observer.reconnectDelayMs",
    "observerMasterPort",
    "preAllocSize",
    "quorumCnxnTimeoutMs",
    "quorumListenOnAllIPs",
    "requestThrottleLimit",
    "serverCnxnFactory",
    "snapSizeLimitInKb",
    "snapshot.trust.empty",
    "syncEnabled",
    "tcpKeepAlive",
    "txnLogSizeLimitInKb",
    "znode.container.maxNeverUsedIntervalMs",
];

/// What to tell an operator about a zoo.cfg key wazoo did not use: a
/// ZooKeeper key it ignores on purpose, or an unknown one with the closest
/// key wazoo reads (a misspelling is the likely cause).
pub fn unused_key_note(key: &str) -> String {
    let per_member = ["server.", "group.", "weight."].iter().any(|p| {
        key.strip_prefix(p)
            .is_some_and(|n| n.parse::<u64>().is_ok())
    });
    if ZOOKEEPER_KEYS_NOT_USED.contains(&key) || per_member {
        return format!("zoo.cfg key {key} is a ZooKeeper key that wazoo does not use");
    }
    let folded = key.to_ascii_lowercase();
    let closest = KEYS_READ
        .iter()
        .chain(ZOOKEEPER_KEYS_NOT_USED)
        .map(|k| (strsim::jaro_winkler(&folded, &k.to_ascii_lowercase()), *k))
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .filter(|(score, _)| *score >= 0.85);
    match closest {
        Some((_, k)) => format!("zoo.cfg key {key} is unknown; did you mean {k}?"),
        None => format!("zoo.cfg key {key} is unknown"),
    }
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
        let e = Config::parse("dataDir=/d\nkey=\\u00zz\n").unwrap_err();
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

    // ZooKeeper Administrator's Guide, "Configuration Parameters": a
    // misspelled key is not an error, but the warning says what was meant.
    #[test]
    fn an_unknown_key_gets_the_closest_known_key() {
        assert_eq!(
            unused_key_note("tickTme"),
            "zoo.cfg key tickTme is unknown; did you mean tickTime?"
        );
        assert_eq!(
            unused_key_note("maxclientcnxns"),
            "zoo.cfg key maxclientcnxns is unknown; did you mean maxClientCnxns?"
        );
        assert_eq!(
            unused_key_note("autopurge.purgeIntreval"),
            "zoo.cfg key autopurge.purgeIntreval is unknown; did you mean autopurge.purgeInterval?"
        );
        assert_eq!(
            unused_key_note("admin.serverPort"),
            "zoo.cfg key admin.serverPort is a ZooKeeper key that wazoo does not use"
        );
        assert_eq!(unused_key_note("zzz.qqq"), "zoo.cfg key zzz.qqq is unknown");
        // Every key wazoo reads is one from_map takes: none is left over.
        let text: String = KEYS_READ
            .iter()
            .map(|k| format!("{k}={}\n", sample_value(k)))
            .collect();
        let c = Config::parse(&text).unwrap();
        assert!(c.unknown.is_empty(), "{:?}", c.unknown);
    }

    fn sample_value(key: &str) -> &'static str {
        match key {
            "dataDir" | "dataLogDir" | "plugins.dir" => "/d",
            "clientPortAddress" | "metricsProvider.httpHost" => "127.0.0.1",
            "DigestAuthenticationProvider.superDigest" => "super:x",
            "recipe.memoryBytes" => "65536",
            "wazoo.client.maxUnsentReplyBytes" => "2097152",
            "wazoo.client.maxOutboundBytes" => "8388608",
            _ if key.ends_with("Enabled") || key.ends_with("enabled") || key == "enforceQuota" => {
                "false"
            }
            _ => "7",
        }
    }

    /// `dataDir=/d` plus one line; the error text if it is refused.
    fn refusal(line: &str) -> Option<String> {
        Config::parse(&format!("dataDir=/d\n{line}\n"))
            .err()
            .map(|e| format!("{e:#}"))
    }

    // ZooKeeper Administrator's Guide, "Encryption, Authentication,
    // Authorization Options": every key that configures TLS, SASL,
    // Kerberos, x509 or enforced authentication stops the start, and the
    // error names it.
    #[test]
    fn every_security_key_wazoo_does_not_implement_is_refused_by_name() {
        let refused = [
            // TLS that wazoo does not implement (config/tls.rs has the rest).
            "client.secure=true",
            "client.portUnification=true",
            "portUnification=true",
            "ssl.keyStore.location=/k.jks",
            "ssl.keyStore.type=JKS",
            "ssl.trustStore.location=/t.jks",
            "ssl.ciphersuites=TLS_RSA_WITH_AES_128_CBC_SHA",
            "ssl.enabledProtocols=TLSv1",
            "ssl.authProvider=custom",
            "ssl.sslProvider=OpenSSL",
            "ssl.context.supplier.class=com.example.Supplier",
            "ssl.quorum.keyStore.location=/k.jks",
            "ssl.quorum.clientAuth=none",
            "zookeeper.ssl.keyStore.location=/k.jks",
            "admin.portUnification=true",
            "admin.forceHttps=true",
            "admin.needClientAuth=true",
            "requireClientAuthScheme=sasl",
            "allowSaslFailedClients=true",
            "quorum.auth.enableSasl=true",
            "quorum.auth.learnerRequireSasl=true",
            "quorum.auth.serverRequireSasl=true",
            "quorum.auth.learner.saslLoginContext=QuorumLearner",
            "quorum.auth.server.saslLoginContext=QuorumServer",
            "quorum.auth.kerberos.servicePrincipal=zkquorum/_HOST",
            "kerberos.removeHostFromPrincipal=true",
            "kerberos.removeRealmFromPrincipal=true",
            "kerberos.canonicalizeHostNames=true",
            "jaasLoginRenew=3600000",
            "zookeeper.sasl.serverconfig=QuorumServer",
            "java.security.auth.login.config=/jaas.conf",
            "ensembleAuthName=prod",
            "zookeeper.authProvider.2=com.example.Custom",
            "DigestAuthenticationProvider.enabled=false",
            "DigestAuthenticationProvider.digestAlg=SHA3-256",
            "skipACL=yes",
            // A value that is not the accepted "off" spelling is refused,
            // not guessed at.
            "client.portUnification=maybe",
            "PORTUNIFICATION=true",
        ];
        for line in refused {
            let key = line.split('=').next().unwrap();
            let err = refusal(line).unwrap_or_else(|| panic!("{line} was accepted"));
            assert!(err.contains(key), "{line}: the error names the key: {err}");
            assert!(err.contains("docs/SECURITY.md"), "{err}");
        }
    }

    // A typical zoo.cfg that turns the secure features off explicitly still
    // starts: those values are what wazoo does.
    #[test]
    fn security_switches_set_to_off_are_accepted() {
        let accepted = [
            "sslQuorum=false",
            "portUnification=false",
            "sslQuorumReloadCertFiles=false",
            "client.secure=false",
            "client.portUnification=false",
            "client.certReload=false",
            "admin.forceHttps=false",
            "sessionRequireClientSASLAuth=false",
            "enforce.auth.enabled=false",
            "enforce.auth.enabled=FALSE",
            "enforce.auth.schemes=sasl",
            "allowSaslFailedClients=false",
            "quorum.auth.enableSasl=false",
            "quorum.auth.learnerRequireSasl=false",
            "quorum.auth.serverRequireSasl=false",
            "zookeeper.quorum.auth.enableSasl=false",
            "authProvider.1=org.apache.zookeeper.server.auth.DigestAuthenticationProvider",
            "authProvider.ip=org.apache.zookeeper.server.auth.IPAuthenticationProvider",
            "DigestAuthenticationProvider.enabled=true",
            "DigestAuthenticationProvider.digestAlg=SHA1",
            "skipACL=no",
            "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
            "authProvider.x509=org.apache.zookeeper.server.auth.X509AuthenticationProvider",
            "X509AuthenticationProvider.superUser=CN=admin",
            "ssl.authProvider=x509",
            "ssl.quorum.hostnameVerification=false",
        ];
        for line in accepted {
            if let Some(err) = refusal(line) {
                panic!("{line} was refused: {err}");
            }
        }
        let all = format!("dataDir=/d\n{}\n", accepted.join("\n"));
        Config::parse(&all).expect("all of them at once");
    }

    // ZooKeeper Administrator's Guide, "Encryption, Authentication,
    // Authorization Options", and ZooKeeper 3.8's AuthenticationHelper:
    // sessionRequireClientSASLAuth means `sasl`, enforce.auth.* names the
    // schemes, and an enforced scheme without its provider stops the start.
    #[test]
    fn sasl_and_enforced_authentication_keys_are_read_as_zookeeper_reads_them() {
        let sasl = |text: &str| Config::parse(&format!("dataDir=/d\n{text}")).map(|c| c.sasl);
        let provider =
            "authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider\n";
        let off = sasl("").unwrap();
        assert!(!off.provider && off.enforce_schemes.is_empty() && off.super_user.is_none());
        let c = sasl(&format!(
            "{provider}sessionRequireClientSASLAuth=true\nenforce.auth.schemes=digest\n"
        ))
        .unwrap();
        assert!(c.provider);
        assert_eq!(c.enforce_schemes, ["sasl"]);
        let c = sasl(&format!("{provider}zookeeper.enforce.auth.enabled=TRUE\nenforce.auth.schemes=sasl, digest\nzookeeper.superUser=admin\n")).unwrap();
        assert_eq!(c.enforce_schemes, ["sasl", "digest"]);
        assert_eq!(c.super_user.as_deref(), Some("admin"));
        let c = sasl("enforce.auth.enabled=false\nenforce.auth.schemes=sasl\n").unwrap();
        assert!(c.enforce_schemes.is_empty());
        for (bad, why) in [
            (
                "sessionRequireClientSASLAuth=true\n",
                "scheme sasl is not available",
            ),
            (
                "enforce.auth.enabled=true\n",
                "enforce.auth.schemes must be configured",
            ),
            (
                "enforce.auth.enabled=true\nenforce.auth.schemes=kerberos\n",
                "scheme kerberos",
            ),
            ("enforce.auth.enabled=yes\n", "must be true or false"),
        ] {
            let err = format!("{:#}", sasl(bad).unwrap_err());
            assert!(err.contains(why), "{bad}: {err}");
        }
    }

    #[test]
    fn every_refused_key_is_named_in_one_error_without_its_value() {
        let err = format!(
            "{:#}",
            Config::parse(
                "dataDir=/d\nssl.keyStore.location=/etc/k.jks\nssl.trustStore.location=/etc/t.jks\nssl.keyStore.password=hunter2\njaasLoginRenew=1\n"
            )
            .unwrap_err()
        );
        for key in [
            "ssl.keyStore.location",
            "ssl.trustStore.location",
            "jaasLoginRenew",
        ] {
            assert!(err.contains(key), "{key} named: {err}");
        }
        assert!(!err.contains("hunter2"), "{err}");
        assert!(!err.contains("/etc/k.jks"), "{err}");
    }

    // No secret in a log line or in `conf`: a key naming a password or a
    // secret keeps its value as `****` from the moment it is read.
    #[test]
    fn secret_values_are_redacted_everywhere_keys_are_echoed() {
        let c =
            Config::parse("dataDir=/d\nmy.db.Password=hunter2\nclient.secret=s3cr3t\nfoo=bar\n")
                .unwrap();
        assert_eq!(c.unknown["my.db.Password"], "****");
        assert_eq!(c.unknown["client.secret"], "****");
        assert_eq!(c.unknown["foo"], "bar", "only secrets are hidden");
        let shown = format!("{c:?}\n{}", c.conf_lines().join("\n"));
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(!shown.contains("s3cr3t"), "{shown}");
        assert_eq!(redact("ssl.quorum.trustStore.PASSWORD", "x"), "****");
        let e = format!(
            "{:#}",
            Config::parse("dataDir=/d\nssl.context.supplier.password hunter2\n").unwrap_err()
        );
        assert!(
            e.contains("ssl.context.supplier.password") && !e.contains("hunter2"),
            "{e}"
        );
        let e = format!(
            "{:#}",
            Config::parse("dataDir=/d\nssl.keyStore.password=hunter2\\u12\n").unwrap_err()
        );
        assert!(e.contains("line 2") && !e.contains("hunter2"), "{e}");
        // `conf` says there is no secure port, as ZooKeeper does without one.
        assert_eq!(c.conf_lines()[1], "secureClientPort=-1");
        assert_eq!(redact("clientPort", "2181"), "2181");
    }
}
