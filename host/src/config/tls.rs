//! The TLS keys of zoo.cfg: the secure client port (`secureClientPort`,
//! `ssl.*`) and TLS between members (`sslQuorum`, `ssl.quorum.*`), as the
//! ZooKeeper Administrator's Guide ("Encryption, Authentication,
//! Authorization Options") names them.
//!
//! [`refusal`] says which TLS keys and values wazoo does not implement
//! (they stop the start, by name); [`take`] removes the ones it does from
//! the key table and checks their values. Nothing here touches the disk:
//! the key and trust stores are read when the member starts (`crate::tls`).

use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Result};

/// A password from zoo.cfg: never shown, not even by `{:?}`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("****")
    }
}

/// The file formats of a key or trust store wazoo reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreType {
    /// PEM: a key store holds the private key and its certificate chain,
    /// a trust store the trusted certificates.
    Pem,
    Pkcs12,
    /// A Java KeyStore as the JDK's keytool writes it (`host/src/tls/jks.rs`).
    Jks,
    /// BouncyCastle's FIPS key store, as keytool writes it with
    /// BouncyCastle's provider (`host/src/tls/bcfks.rs`).
    Bcfks,
}

/// A key store or a trust store: `<prefix>.keyStore.*` or `<prefix>.trustStore.*`.
#[derive(Clone, Debug)]
pub struct Store {
    pub location: PathBuf,
    pub password: Option<Secret>,
    /// `passwordPath` (new in ZooKeeper 3.8.0): a file holding the
    /// password, which takes precedence over `password`.
    pub password_path: Option<PathBuf>,
    pub kind: StoreType,
}

/// `ssl.clientAuth`: whether the server asks for a client certificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    None,
    Want,
    Need,
}

/// The TLS versions wazoo speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TlsVersion {
    V12,
    V13,
}

/// One side's TLS settings: the client port's (`ssl.`) or the quorum's
/// (`ssl.quorum.`).
#[derive(Clone, Debug)]
pub struct TlsSettings {
    /// `ssl` or `ssl.quorum`, to name keys in errors.
    pub prefix: &'static str,
    pub key_store: Option<Store>,
    pub trust_store: Option<Store>,
    pub client_auth: ClientAuth,
    /// From `protocol` and `enabledProtocols`, never empty.
    pub versions: Vec<TlsVersion>,
    /// `ciphersuites`: IANA (and Java) names, all known to
    /// [`SUPPORTED_CIPHERSUITES`]; `None` takes rustls's defaults.
    pub ciphersuites: Option<Vec<String>>,
    pub hostname_verification: bool,
    /// `handshakeDetectionTimeoutMillis`: how long a TLS handshake may take.
    pub handshake_timeout_ms: u64,
}

/// Every TLS setting of a zoo.cfg.
#[derive(Clone, Debug, Default)]
pub struct TlsConfig {
    /// `secureClientPort` (with `secureClientPortAddress`): where TLS
    /// clients connect; `None` without a secure port.
    pub secure_client_addr: Option<SocketAddr>,
    /// The client port's TLS settings, when `secureClientPort` is set.
    pub client: Option<TlsSettings>,
    /// `client.certReload`: reload the client key and trust stores when
    /// their files change.
    pub client_cert_reload: bool,
    /// `X509AuthenticationProvider.superUser`: the subject of a client
    /// certificate that is the super user.
    pub x509_super_user: Option<String>,
    /// `sslQuorum`: TLS on every link between members.
    pub ssl_quorum: bool,
    /// The quorum's TLS settings, whenever `ssl.quorum.*` keys are given
    /// (with `sslQuorum=false` they are checked, not used: ZooKeeper's
    /// rolling upgrade to quorum TLS sets them first).
    pub quorum: Option<TlsSettings>,
    /// `sslQuorumReloadCertFiles`.
    pub quorum_cert_reload: bool,
}

/// The cipher suites wazoo can offer, by the IANA names Java uses too.
pub const SUPPORTED_CIPHERSUITES: &[&str] = &[
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
];

/// The suffixes (after `ssl.` or `ssl.quorum.`, lower case) of the keys
/// [`take`] reads.
const SIDE_KEYS: &[&str] = &[
    "keystore.location",
    "keystore.password",
    "keystore.passwordpath",
    "keystore.type",
    "truststore.location",
    "truststore.password",
    "truststore.passwordpath",
    "truststore.type",
    "clientauth",
    "protocol",
    "enabledprotocols",
    "ciphersuites",
    "hostnameverification",
    "handshakedetectiontimeoutmillis",
    "crl",
    "ocsp",
];

/// A key as ZooKeeper matches it: lower case, without the `zookeeper.`
/// prefix (ZooKeeper turns a zoo.cfg key it does not parse into the system
/// property `zookeeper.<key>`, so both spellings configure one thing).
pub fn normalize(key: &str) -> String {
    let lower = key.to_ascii_lowercase();
    lower
        .strip_prefix("zookeeper.")
        .map(str::to_string)
        .unwrap_or(lower)
}

/// Whether a (normalized) key configures TLS: [`refusal`] decides it.
pub fn is_tls_key(k: &str) -> bool {
    is_implemented(k)
        || k == "client.portunification"
        || k == "portunification"
        || k.starts_with("ssl.")
}

/// Whether wazoo reads this (normalized) TLS key; its value may still be
/// refused by [`refusal`].
fn is_implemented(k: &str) -> bool {
    if matches!(
        k,
        "secureclientport"
            | "secureclientportaddress"
            | "client.certreload"
            | "sslquorum"
            | "sslquorumreloadcertfiles"
            | "ssl.authprovider"
            | "x509authenticationprovider.superuser"
    ) {
        return true;
    }
    let side = k
        .strip_prefix("ssl.quorum.")
        .or_else(|| k.strip_prefix("ssl."));
    side.is_some_and(|s| SIDE_KEYS.contains(&s))
}

/// Why wazoo refuses a TLS key or value, if it does: `None` for a key
/// that is not about TLS, or one wazoo implements with a value it accepts.
/// Values named in the reason are never secrets.
pub fn refusal(k: &str, v: &str) -> Option<String> {
    let v = v.trim();
    let off = v.eq_ignore_ascii_case("false");
    if !is_implemented(k) {
        return match k {
            "client.portunification" => (!off)
                .then(|| "TLS and plain clients on one port (only `false` is accepted; serve TLS on secureClientPort)".to_string()),
            "portunification" => (!off).then(|| {
                "TLS and plain quorum links on one port (only `false` is accepted)".to_string()
            }),
            _ if k.starts_with("ssl.quorum.") => Some("TLS between members: this key".to_string()),
            _ if k.starts_with("ssl.") => Some("TLS: this key".to_string()),
            _ => None,
        };
    }
    let side = k
        .strip_prefix("ssl.quorum.")
        .map(|s| ("ssl.quorum", s))
        .or_else(|| k.strip_prefix("ssl.").map(|s| ("ssl", s)));
    match side {
        Some((_, "keystore.type" | "truststore.type")) => store_type_refusal(v),
        Some((_, "ciphersuites")) => {
            let unknown: Vec<&str> = list(v)
                .filter(|s| !SUPPORTED_CIPHERSUITES.contains(s))
                .collect();
            (!unknown.is_empty()).then(|| {
                format!(
                    "cipher suites wazoo cannot offer: {} (it offers {})",
                    unknown.join(", "),
                    SUPPORTED_CIPHERSUITES.join(", ")
                )
            })
        }
        Some((_, "protocol" | "enabledprotocols")) => {
            let unknown: Vec<&str> = list(v).filter(|p| version(p).is_none()).collect();
            (!unknown.is_empty()).then(|| {
                format!(
                    "TLS versions wazoo does not speak: {} (only TLSv1.2 and TLSv1.3)",
                    unknown.join(", ")
                )
            })
        }
        Some(("ssl.quorum", "clientauth")) => (!v.eq_ignore_ascii_case("need")).then(|| {
            "members that need no certificate (wazoo checks every member's certificate; only `need` is accepted)".to_string()
        }),
        Some((_, "crl" | "ocsp")) => (!off)
            .then(|| "certificate revocation checks (only `false` is accepted)".to_string()),
        _ if k == "ssl.authprovider" => (!v.eq_ignore_ascii_case("x509"))
            .then(|| "an x509 authentication provider other than the built-in one (only `x509` is accepted)".to_string()),
        _ => None,
    }
}

fn store_type_refusal(v: &str) -> Option<String> {
    match v.to_ascii_uppercase().as_str() {
        "PEM" | "PKCS12" | "JKS" | "BCFKS" | "" => None,
        _ => Some("a store type other than PEM, PKCS12, JKS or BCFKS".to_string()),
    }
}

fn list(v: &str) -> impl Iterator<Item = &str> {
    v.split(',').map(str::trim).filter(|s| !s.is_empty())
}

fn version(name: &str) -> Option<TlsVersion> {
    match name {
        "TLSv1.2" => Some(TlsVersion::V12),
        "TLSv1.3" => Some(TlsVersion::V13),
        _ => None,
    }
}

/// Removes every TLS key wazoo implements from `kv` (in either spelling
/// and any case) and checks their values. [`refusal`] has already refused
/// what wazoo does not implement.
pub fn take(kv: &mut BTreeMap<String, String>) -> Result<TlsConfig> {
    let mut keys: BTreeMap<String, (String, String)> = BTreeMap::new();
    for key in kv.keys().cloned().collect::<Vec<_>>() {
        let k = normalize(&key);
        if !is_implemented(&k) {
            continue;
        }
        let v = kv.remove(&key).unwrap_or_default();
        if let Some((other, _)) = keys.get(&k) {
            bail!("{other} and {key} configure the same thing; give one of them");
        }
        keys.insert(k, (key, v));
    }
    let get = |k: &str| keys.get(k).map(|(key, v)| (key.as_str(), v.as_str()));
    let flag = |k: &str| -> Result<bool> {
        match get(k) {
            None => Ok(false),
            Some((_, v)) if v.eq_ignore_ascii_case("true") => Ok(true),
            Some((_, v)) if v.eq_ignore_ascii_case("false") => Ok(false),
            Some((key, v)) => bail!("{key}={v:?} must be true or false"),
        }
    };

    let mut cfg = TlsConfig {
        client_cert_reload: flag("client.certreload")?,
        ssl_quorum: flag("sslquorum")?,
        quorum_cert_reload: flag("sslquorumreloadcertfiles")?,
        x509_super_user: get("x509authenticationprovider.superuser")
            .map(|(_, v)| v.to_string())
            .filter(|v| !v.is_empty()),
        ..TlsConfig::default()
    };
    let port = match get("secureclientport") {
        None => None,
        Some((key, v)) => Some(
            v.parse::<u16>()
                .map_err(|_| anyhow!("{key} {v:?} is not a port number"))?,
        ),
    };
    let address = match get("secureclientportaddress") {
        None => None,
        Some((key, v)) => Some(
            v.parse::<IpAddr>()
                .map_err(|_| anyhow!("{key} {v:?} is not an IP address"))?,
        ),
    };
    match (port, address) {
        // ZooKeeper's QuorumPeerConfig: an address without a port is an error.
        (None, Some(_)) => bail!("secureClientPortAddress is set but secureClientPort is not set"),
        (None, None) => {}
        (Some(port), address) => {
            let ip = address.unwrap_or(IpAddr::from([0, 0, 0, 0]));
            cfg.secure_client_addr = Some(SocketAddr::new(ip, port));
            let side = side(&keys, "ssl")?;
            if side.key_store.is_none() {
                bail!("secureClientPort is set but ssl.keyStore.location is not: the secure port needs the server's key and certificate");
            }
            if side.client_auth != ClientAuth::None && side.trust_store.is_none() {
                bail!("ssl.clientAuth is `want` or `need` (`need` by default) but ssl.trustStore.location is not set: wazoo has no default trust store to check client certificates against");
            }
            cfg.client = Some(side);
        }
    }
    let quorum_given = keys.keys().any(|k| k.starts_with("ssl.quorum."));
    if cfg.ssl_quorum || quorum_given {
        let side = side(&keys, "ssl.quorum")?;
        if cfg.ssl_quorum && (side.key_store.is_none() || side.trust_store.is_none()) {
            bail!("sslQuorum=true needs ssl.quorum.keyStore.location and ssl.quorum.trustStore.location: every member presents a certificate and checks the others'");
        }
        cfg.quorum = Some(side);
    }
    Ok(cfg)
}

/// Reads one side's keys (`prefix` is `ssl` or `ssl.quorum`).
fn side(keys: &BTreeMap<String, (String, String)>, prefix: &'static str) -> Result<TlsSettings> {
    let get = |suffix: &str| {
        keys.get(&format!("{prefix}.{suffix}"))
            .map(|(key, v)| (key.as_str(), v.as_str()))
    };
    // `name` is the lower-case key part, `shown` ZooKeeper's spelling.
    let store = |name: &str, shown: &str| -> Result<Option<Store>> {
        let Some((key, location)) = get(&format!("{name}.location")) else {
            return Ok(None);
        };
        if location.is_empty() {
            return Ok(None);
        }
        let kind = match get(&format!("{name}.type")).map(|(_, t)| t.to_ascii_uppercase()) {
            Some(t) if t == "PEM" => StoreType::Pem,
            Some(t) if t == "PKCS12" => StoreType::Pkcs12,
            Some(t) if t == "JKS" => StoreType::Jks,
            Some(t) if t == "BCFKS" => StoreType::Bcfks,
            // Unset (or empty): from the file name, as ZooKeeper's
            // KeyStoreFileType.fromFilename.
            _ => type_from_file_name(Path::new(location)).ok_or_else(|| {
                anyhow!("{key}: cannot tell the store's type from its file name (.pem, .p12, .pfx, .jks or .bcfks); set {prefix}.{shown}.type to PEM, PKCS12, JKS or BCFKS")
            })?,
        };
        Ok(Some(Store {
            location: PathBuf::from(location),
            password: get(&format!("{name}.password")).map(|(_, p)| Secret(p.to_string())),
            password_path: get(&format!("{name}.passwordpath"))
                .filter(|(_, p)| !p.is_empty())
                .map(|(_, p)| PathBuf::from(p)),
            kind,
        }))
    };
    let client_auth = match get("clientauth").map(|(k, v)| (k, v.to_ascii_lowercase())) {
        None => ClientAuth::Need,
        Some((_, v)) if v == "need" || v.is_empty() => ClientAuth::Need,
        Some((_, v)) if v == "want" => ClientAuth::Want,
        Some((_, v)) if v == "none" => ClientAuth::None,
        Some((key, v)) => bail!("{key}={v:?} must be none, want or need"),
    };
    // ZooKeeper Administrator's Guide: `protocol` defaults to TLSv1.3 (on
    // Java runtimes that have it), and `enabledProtocols` to TLSv1.3 and
    // TLSv1.2 with protocol TLSv1.3, TLSv1.2 alone with TLSv1.2.
    let protocol = match get("protocol") {
        None => TlsVersion::V13,
        Some((key, v)) => {
            version(v.trim()).ok_or_else(|| anyhow!("{key}={v:?} must be TLSv1.2 or TLSv1.3"))?
        }
    };
    let mut versions: Vec<TlsVersion> = match get("enabledprotocols") {
        Some((_, v)) if !v.trim().is_empty() => list(v).filter_map(version).collect(),
        _ if protocol == TlsVersion::V13 => vec![TlsVersion::V13, TlsVersion::V12],
        _ => vec![TlsVersion::V12],
    };
    versions.sort();
    versions.dedup();
    let ciphersuites = get("ciphersuites")
        .map(|(_, v)| list(v).map(str::to_string).collect::<Vec<_>>())
        .filter(|l| !l.is_empty());
    let hostname_verification = match get("hostnameverification") {
        None => true,
        Some((_, v)) if v.eq_ignore_ascii_case("true") => true,
        Some((_, v)) if v.eq_ignore_ascii_case("false") => false,
        Some((key, v)) => bail!("{key}={v:?} must be true or false"),
    };
    let handshake_timeout_ms = match get("handshakedetectiontimeoutmillis") {
        None => 5000,
        Some((key, v)) => v
            .parse::<u64>()
            .ok()
            .filter(|&ms| ms > 0)
            .ok_or_else(|| anyhow!("{key}={v:?} must be a positive number"))?,
    };
    Ok(TlsSettings {
        prefix,
        key_store: store("keystore", "keyStore")?,
        trust_store: store("truststore", "trustStore")?,
        client_auth,
        versions,
        ciphersuites,
        hostname_verification,
        handshake_timeout_ms,
    })
}

/// ZooKeeper's KeyStoreFileType.fromFilename, for the types wazoo reads.
fn type_from_file_name(path: &Path) -> Option<StoreType> {
    let ext = path.extension()?.to_str()?.to_ascii_lowercase();
    match ext.as_str() {
        "pem" => Some(StoreType::Pem),
        "p12" | "pfx" => Some(StoreType::Pkcs12),
        "jks" => Some(StoreType::Jks),
        "bcfks" => Some(StoreType::Bcfks),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<TlsConfig> {
        let mut kv: BTreeMap<String, String> = crate::config::properties::parse(text)
            .unwrap()
            .into_iter()
            .map(|(_, k, v)| (k, v))
            .collect();
        for (k, v) in &kv {
            if let Some(why) = refusal(&normalize(k), v) {
                bail!("refused {k}: {why}");
            }
        }
        let cfg = take(&mut kv)?;
        assert!(kv.is_empty(), "every TLS key was taken: {kv:?}");
        Ok(cfg)
    }

    // ZooKeeper Administrator's Guide, "Encryption, Authentication,
    // Authorization Options": the secure port with its key and trust
    // stores, the type from the file name, clientAuth `need` by default,
    // TLSv1.3 and TLSv1.2.
    #[test]
    fn a_secure_client_port_with_zookeepers_defaults() {
        let c = parse(
            "secureClientPort=2281\nssl.keyStore.location=/k/server.p12\nssl.keyStore.password=pw\n\
             zookeeper.ssl.trustStore.location=/k/ca.PEM\n",
        )
        .unwrap();
        assert_eq!(c.secure_client_addr, Some("0.0.0.0:2281".parse().unwrap()));
        let s = c.client.unwrap();
        let ks = s.key_store.unwrap();
        assert_eq!(ks.kind, StoreType::Pkcs12);
        assert_eq!(ks.password.as_ref().map(Secret::expose), Some("pw"));
        assert!(!format!("{ks:?}").contains("pw\""), "{ks:?}");
        assert_eq!(s.trust_store.unwrap().kind, StoreType::Pem);
        assert_eq!(s.client_auth, ClientAuth::Need);
        assert_eq!(s.versions, vec![TlsVersion::V12, TlsVersion::V13]);
        assert!(s.hostname_verification);
        assert!(c.quorum.is_none() && !c.ssl_quorum);
    }

    #[test]
    fn protocols_ciphersuites_and_client_auth_are_read() {
        let c = parse(
            "secureClientPort=2281\nsecureClientPortAddress=127.0.0.1\nssl.keyStore.location=/k.pem\n\
             ssl.clientAuth=none\nssl.protocol=TLSv1.2\nssl.ciphersuites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_AES_128_GCM_SHA256\n",
        )
        .unwrap();
        assert_eq!(
            c.secure_client_addr,
            Some("127.0.0.1:2281".parse().unwrap())
        );
        let s = c.client.unwrap();
        assert_eq!(s.client_auth, ClientAuth::None);
        assert_eq!(s.versions, vec![TlsVersion::V12]);
        assert_eq!(
            s.ciphersuites.unwrap(),
            vec![
                "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
                "TLS_AES_128_GCM_SHA256"
            ]
        );
    }

    // What wazoo cannot honour is refused by name, never silently dropped.
    #[test]
    fn what_wazoo_cannot_honour_is_refused_by_name() {
        for (line, says) in [
            ("ssl.keyStore.type=BKS", "BCFKS"),
            (
                "ssl.ciphersuites=TLS_RSA_WITH_AES_128_CBC_SHA",
                "TLS_RSA_WITH_AES_128_CBC_SHA",
            ),
            ("ssl.enabledProtocols=TLSv1.1", "TLSv1.1"),
            ("ssl.quorum.clientAuth=want", "need"),
            ("ssl.crl=true", "revocation"),
            ("ssl.authProvider=custom", "x509"),
            ("ssl.context.supplier.class=com.example.Ctx", "TLS"),
            ("client.portUnification=true", "secureClientPort"),
            ("portUnification=true", "one port"),
        ] {
            let err = format!("{:#}", parse(line).unwrap_err());
            assert!(err.contains(says), "{line}: {err}");
        }
        for line in [
            "ssl.keyStore.type=PKCS12",
            "ssl.keyStore.type=JKS",
            "ssl.trustStore.location=/k/ca.jks",
            "ssl.keyStore.type=BCFKS",
            "ssl.quorum.trustStore.type=bcfks",
            "ssl.keyStore.location=/k/server.bcfks",
            "ssl.crl=false",
            "ssl.authProvider=x509",
        ] {
            assert!(parse(line).is_ok(), "{line}");
        }
    }

    #[test]
    fn missing_stores_and_unknown_file_types_are_errors_that_name_the_key() {
        let err = parse("secureClientPort=2281\n").unwrap_err().to_string();
        assert!(err.contains("ssl.keyStore.location"), "{err}");
        let err = parse("secureClientPort=2281\nssl.keyStore.location=/k.pem\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("ssl.trustStore.location"), "{err}");
        let err =
            parse("secureClientPort=2281\nssl.keyStore.location=/k.key\nssl.clientAuth=none\n")
                .unwrap_err()
                .to_string();
        assert!(err.contains("ssl.keyStore.type"), "{err}");
        let err = parse("secureClientPortAddress=127.0.0.1\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("secureClientPort is not set"), "{err}");
        let err = parse("sslQuorum=true\n").unwrap_err().to_string();
        assert!(err.contains("ssl.quorum.keyStore.location"), "{err}");
    }

    // ZooKeeper Administrator's Guide, "Upgrading existing non-TLS cluster
    // with no downtime": the ssl.quorum keys come first, with sslQuorum
    // still false.
    #[test]
    fn quorum_keys_are_accepted_before_ssl_quorum_is_turned_on() {
        let text = "ssl.quorum.keyStore.location=/k/m1.p12\nssl.quorum.keyStore.password=pw\n\
                    ssl.quorum.trustStore.location=/k/ca.p12\nssl.quorum.trustStore.password=pw\n\
                    ssl.quorum.hostnameVerification=false\n";
        let c = parse(&format!("sslQuorum=false\n{text}")).unwrap();
        assert!(!c.ssl_quorum);
        assert!(!c.quorum.as_ref().unwrap().hostname_verification);
        let c = parse(&format!(
            "sslQuorum=true\nsslQuorumReloadCertFiles=true\n{text}"
        ))
        .unwrap();
        assert!(c.ssl_quorum && c.quorum_cert_reload);
        assert_eq!(c.quorum.unwrap().client_auth, ClientAuth::Need);
    }

    // ZooKeeper's X509Util and KeyStoreFileType: a BCFKS store is named by
    // its type or by a `.bcfks` file name, on the client port and between
    // members alike.
    #[test]
    fn bcfks_stores_are_typed_by_name_or_by_file_name() {
        let c = parse(
            "secureClientPort=2281\nssl.keyStore.location=/k/server.bcfks\n\
             ssl.trustStore.location=/k/ca.store\nssl.trustStore.type=bcfks\n\
             sslQuorum=true\nssl.quorum.keyStore.location=/k/m1.BCFKS\n\
             ssl.quorum.trustStore.location=/k/ca.p12\nssl.quorum.trustStore.type=BCFKS\n",
        )
        .unwrap();
        let client = c.client.unwrap();
        let quorum = c.quorum.unwrap();
        for store in [
            client.key_store.unwrap(),
            client.trust_store.unwrap(),
            quorum.key_store.unwrap(),
            quorum.trust_store.unwrap(),
        ] {
            assert_eq!(store.kind, StoreType::Bcfks, "{store:?}");
        }
    }
}
