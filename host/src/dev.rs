//! `wazoo dev`: a local playground, a 3-member ensemble in one process on
//! 127.0.0.1 (clients on 2181-2183, quorum links on 2888-2890 and
//! 3888-3890, Prometheus metrics on 7000-7002), data under
//! `DATA_DIR/m1..m3` (kept across runs), the built-in recipes deployed from
//! `DATA_DIR/plugins`, and a super user whose password it makes once,
//! keeps in `DATA_DIR/super-password` and prints, so that `addauth digest
//! super:PASSWORD` lets a shell deploy its own modules.
//!
//! `--set KEY=VALUE` gives any zoo.cfg key to all three members (the last
//! one given wins). A port key (`clientPort`, `secureClientPort`,
//! `metricsProvider.httpPort`) is the first member's port; the second and
//! third take the next two. Keys that would split the ensemble apart
//! (`dataDir`, `dataLogDir`, `server.N`, `dynamicConfigFile`) are refused:
//! `--data-dir`, `--quorum-port` and `--election-port` set those.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::config::Config;

/// Members of the dev ensemble.
pub const MEMBERS: u16 = 3;

/// The super user's name (ZooKeeper's `superDigest` names it `super`).
pub const SUPER_USER: &str = "super";

/// What `wazoo dev` was asked for.
#[derive(Debug, Clone)]
pub struct DevOptions {
    pub data_dir: PathBuf,
    /// `--set KEY=VALUE`, in order.
    pub sets: Vec<(String, String)>,
    /// The first member's quorum port (the others take the next two).
    pub quorum_port: u16,
    /// The first member's election port (the others take the next two).
    pub election_port: u16,
}

impl DevOptions {
    /// `data_dir` with the default ports and no `--set`.
    pub fn new(data_dir: impl Into<PathBuf>) -> DevOptions {
        DevOptions {
            data_dir: data_dir.into(),
            sets: Vec::new(),
            quorum_port: 2888,
            election_port: 3888,
        }
    }

    /// The value given by `--set` for `key` (the last one given).
    pub fn set_value(&self, key: &str) -> Option<&str> {
        self.sets
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Where the built-in recipes go and which the members watch:
    /// `plugins.dir` if `--set` gives it, else `DATA_DIR/plugins`.
    pub fn plugins_dir(&self) -> PathBuf {
        self.set_value("plugins.dir")
            .map(PathBuf::from)
            .unwrap_or_else(|| self.data_dir.join("plugins"))
    }
}

/// Keys whose value is the first member's port; member N takes value+N-1.
const PORT_KEYS: [&str; 4] = [
    "clientPort",
    "secureClientPort",
    "metricsProvider.httpPort",
    "admin.serverPort",
];

/// One `--set` argument: `KEY=VALUE` (the value may be empty and may hold
/// `=`); the keys that would split the ensemble are refused.
pub fn parse_set(arg: &str) -> Result<(String, String)> {
    let Some((key, value)) = arg.split_once('=') else {
        bail!("--set {arg:?}: expected KEY=VALUE, a zoo.cfg key and its value");
    };
    let key = key.trim();
    if key.is_empty() {
        bail!("--set {arg:?}: the key is empty");
    }
    let why = match key {
        "dataDir" | "dataLogDir" => Some("--data-dir sets where the members keep their data"),
        "dynamicConfigFile" => Some("the dev ensemble's membership is server.1 to server.3"),
        k if k.starts_with("server.") => {
            Some("the dev ensemble's membership is fixed; --quorum-port and --election-port move its ports")
        }
        _ => None,
    };
    if let Some(why) = why {
        bail!("--set {key}: not for `wazoo dev` ({why})");
    }
    if PORT_KEYS.contains(&key) {
        let port: u16 = value
            .trim()
            .parse()
            .with_context(|| format!("--set {key}={value}: a port number"))?;
        if port.checked_add(MEMBERS - 1).is_none() {
            bail!("--set {key}={value}: the three members take this port and the next two");
        }
    }
    Ok((key.to_string(), value.to_string()))
}

/// The first member's port for `key`: `--set`'s, or `default`.
fn base_port(o: &DevOptions, key: &str, default: u16) -> u16 {
    o.set_value(key)
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// The client port of member `id` (1-based).
pub fn client_port(o: &DevOptions, id: u16) -> u16 {
    base_port(o, "clientPort", 2181) + id - 1
}

/// The metrics port of member `id` (1-based).
pub fn metrics_port(o: &DevOptions, id: u16) -> u16 {
    base_port(o, "metricsProvider.httpPort", 7000) + id - 1
}

/// The AdminServer port of member `id` (1-based).
pub fn admin_port(o: &DevOptions, id: u16) -> u16 {
    base_port(o, "admin.serverPort", 8080) + id - 1
}

/// The zoo.cfg keys of member `id` (1-based): the playground's defaults,
/// then `--set`'s, port keys shifted by the member's place.
pub fn member_keys(
    o: &DevOptions,
    id: u16,
    super_digest: Option<&str>,
) -> BTreeMap<String, String> {
    let dir = o.data_dir.join(format!("m{id}"));
    let mut kv: BTreeMap<String, String> = [
        ("tickTime", "2000".to_string()),
        ("initLimit", "10".into()),
        ("syncLimit", "5".into()),
        ("dataDir", dir.display().to_string()),
        ("clientPortAddress", "127.0.0.1".into()),
        ("4lw.commands.whitelist", "*".into()),
        ("extendedTypesEnabled", "true".into()),
        ("metricsProvider.httpHost", "127.0.0.1".into()),
        ("admin.serverAddress", "127.0.0.1".into()),
        ("plugins.dir", o.plugins_dir().display().to_string()),
        // The directory holds the built-ins: they are deployed from it,
        // not loaded a second time on the side.
        ("wazoo.recipes.builtin", "false".into()),
        // One compiled-module cache for the three: each module compiles
        // once, not once per member.
        (
            "recipe.cacheDir",
            o.data_dir.join("recipe-cache").display().to_string(),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    if let Some(d) = super_digest {
        kv.insert(
            "DigestAuthenticationProvider.superDigest".into(),
            d.to_string(),
        );
    }
    for (k, v) in &o.sets {
        kv.insert(k.clone(), v.clone());
    }
    kv.insert("clientPort".into(), client_port(o, id).to_string());
    kv.insert(
        "metricsProvider.httpPort".into(),
        metrics_port(o, id).to_string(),
    );
    kv.insert("admin.serverPort".into(), admin_port(o, id).to_string());
    if o.set_value("secureClientPort").is_some() {
        let p = base_port(o, "secureClientPort", 0) + id - 1;
        kv.insert("secureClientPort".into(), p.to_string());
    }
    for peer in 1..=MEMBERS {
        kv.insert(
            format!("server.{peer}"),
            format!(
                "127.0.0.1:{}:{};{}",
                o.quorum_port + peer - 1,
                o.election_port + peer - 1,
                client_port(o, peer)
            ),
        );
    }
    kv
}

/// The super user's password: the one kept in `DATA_DIR/super-password`,
/// or a new random one written there (readable by its owner only).
pub fn super_password(data_dir: &Path) -> Result<String> {
    let file = data_dir.join("super-password");
    if let Ok(s) = std::fs::read_to_string(&file) {
        let pw = s.trim();
        if !pw.is_empty() && !pw.contains(':') {
            return Ok(pw.to_string());
        }
    }
    let mut bytes = [0u8; 12];
    getrandom::getrandom(&mut bytes)
        .map_err(|e| anyhow::anyhow!("no randomness for the super user's password: {e}"))?;
    let pw: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    std::fs::create_dir_all(data_dir)
        .with_context(|| format!("cannot create {}", data_dir.display()))?;
    write_private(&file, format!("{pw}\n").as_bytes())
        .with_context(|| format!("cannot write {}", file.display()))?;
    Ok(pw)
}

#[cfg(unix)]
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(bytes)
}

#[cfg(not(unix))]
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::write(path, bytes)
}

/// The members' configs, and the super user's password when `wazoo dev`
/// made it (`None` when `--set` gave a `superDigest`).
pub fn member_configs(o: &DevOptions) -> Result<(Vec<Config>, Option<String>)> {
    let given = o
        .set_value("DigestAuthenticationProvider.superDigest")
        .or_else(|| o.set_value("zookeeper.DigestAuthenticationProvider.superDigest"))
        .is_some();
    let password = if given {
        None
    } else {
        Some(super_password(&o.data_dir)?)
    };
    let digest = password
        .as_ref()
        .map(|pw| crate::core::acl::digest_id(&format!("{SUPER_USER}:{pw}")));
    let mut cfgs = Vec::new();
    for id in 1..=MEMBERS {
        let kv = member_keys(o, id, digest.as_deref());
        let mut cfg = Config::from_pairs(kv)
            .with_context(|| format!("the config of member {id} (with --set's keys)"))?;
        cfg.my_id = Some(u64::from(id));
        cfgs.push(cfg);
    }
    Ok((cfgs, password))
}

/// What `wazoo dev` prints once the members serve: where they are, the
/// recipes, the super user, the metrics, and the `wazoo cli` command with
/// this binary's path (so the README's `wazoo cli` lines work without
/// `wazoo` on PATH).
pub fn banner(o: &DevOptions, builtins: usize, password: Option<&str>, exe: &Path) -> String {
    let servers: Vec<String> = (1..=MEMBERS)
        .map(|id| format!("127.0.0.1:{}", client_port(o, id)))
        .collect();
    let servers = servers.join(",");
    let mut s = format!(
        "wazoo dev: 3 members serving on {servers} (data in {})\n",
        o.data_dir.display()
    );
    s.push_str(&format!(
        "recipes: {builtins} built-in modules in {} (drop more .wasm files there)\n",
        o.plugins_dir().display()
    ));
    match password {
        Some(pw) => s.push_str(&format!(
            "super user: {SUPER_USER}, password {pw} (kept in {}); in the shell: addauth digest {SUPER_USER}:{pw}, then deploy FILE.wasm\n",
            o.data_dir.join("super-password").display()
        )),
        None => s.push_str("super user: as --set DigestAuthenticationProvider.superDigest gives it\n"),
    }
    let metrics: Vec<String> = (1..=MEMBERS)
        .map(|id| format!("http://127.0.0.1:{}/metrics", metrics_port(o, id)))
        .collect();
    s.push_str(&format!("metrics: {}\n", metrics.join(" ")));
    let admin = member_keys(o, 1, None);
    if admin.get("admin.enableServer").map(String::as_str) != Some("false") {
        let urls: Vec<String> = (1..=MEMBERS)
            .map(|id| format!("http://127.0.0.1:{}/commands", admin_port(o, id)))
            .collect();
        s.push_str(&format!("AdminServer: {}\n", urls.join(" ")));
    }
    s.push_str(&format!(
        "wazoo cli: {} cli --server {servers}\n",
        exe.display()
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(sets: &[&str]) -> DevOptions {
        let mut o = DevOptions::new("/d");
        o.sets = sets.iter().map(|s| parse_set(s).unwrap()).collect();
        o
    }

    #[test]
    fn a_set_key_reaches_all_three_members_and_port_keys_shift_per_member() {
        let o = opts(&[
            "maxClientCnxns=7",
            "clientPort=12181",
            "metricsProvider.httpPort=17000",
            "maxClientCnxns=9",
        ]);
        for id in 1..=MEMBERS {
            let kv = member_keys(&o, id, Some("super:x"));
            assert_eq!(kv["maxClientCnxns"], "9", "the last --set wins");
            assert_eq!(kv["clientPort"], (12180 + id).to_string());
            assert_eq!(kv["metricsProvider.httpPort"], (16999 + id).to_string());
            assert_eq!(
                kv["server.3"], "127.0.0.1:2890:3890;12183",
                "the membership names the shifted client ports"
            );
            assert_eq!(kv["dataDir"], format!("/d/m{id}"));
            assert_eq!(kv["DigestAuthenticationProvider.superDigest"], "super:x");
        }
    }

    #[test]
    fn the_defaults_are_zookeepers_ports_with_metrics_on_7000() {
        let kv = member_keys(&DevOptions::new("/d"), 2, None);
        assert_eq!(kv["clientPort"], "2182");
        assert_eq!(kv["metricsProvider.httpPort"], "7001");
        assert_eq!(kv["admin.serverPort"], "8081");
        assert_eq!(kv["admin.serverAddress"], "127.0.0.1");
        assert_eq!(kv["server.1"], "127.0.0.1:2888:3888;2181");
        assert_eq!(kv["plugins.dir"], "/d/plugins");
        assert!(!kv.contains_key("secureClientPort"));
    }

    #[test]
    fn set_refuses_keys_that_would_split_the_ensemble_and_bad_ports() {
        for bad in [
            "dataDir=/x",
            "server.4=127.0.0.1:1:2",
            "dynamicConfigFile=/x",
            "clientPort=http",
            "clientPort=65534",
            "noequals",
            "=v",
        ] {
            assert!(parse_set(bad).is_err(), "{bad}");
        }
        assert_eq!(
            parse_set("a.b=c=d").unwrap(),
            ("a.b".to_string(), "c=d".to_string())
        );
    }

    #[test]
    fn the_super_password_is_made_once_and_kept() {
        let dir = std::env::temp_dir().join(format!("wazoo-dev-pw-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let pw = super_password(&dir).unwrap();
        assert_eq!(pw.len(), 24);
        assert_eq!(super_password(&dir).unwrap(), pw);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.join("super-password"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
