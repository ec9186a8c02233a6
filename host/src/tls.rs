//! TLS for the secure client port and for the links between members, on
//! rustls (ring provider): loading ZooKeeper's key and trust stores (PEM,
//! PKCS12, JKS and BCFKS), building the rustls configurations from the `ssl.*` and
//! `ssl.quorum.*` keys (config/tls.rs), reloading them when the store
//! files change, and the x509 identity of a client certificate.
//!
//! The x509 identity is what ZooKeeper's X509AuthenticationProvider gives a
//! client whose certificate the trust store accepts: `x509:<subject DN>`,
//! the DN as Java's `X500Principal.getName()` spells it (RFC 2253), and
//! `super:<DN>` too when the DN is `X509AuthenticationProvider.superUser`.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex, RwLock};
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use wazoo_proto::Id;

use crate::config::tls::{ClientAuth, Store, StoreType, TlsConfig, TlsSettings, TlsVersion};
use crate::config::Config;

mod bcfks;
mod ec;
mod jks;

// ----- stores -------------------------------------------------------------

/// A store's password: from `passwordPath` if given (it takes precedence,
/// as in ZooKeeper 3.8), else `password`, else empty.
fn password(store: &Store, what: &str) -> Result<String> {
    if let Some(path) = &store.password_path {
        let p = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the {what} password file {}", path.display()))?;
        return Ok(p.trim_end_matches(['\r', '\n']).to_string());
    }
    Ok(store
        .password
        .as_ref()
        .map(|p| p.expose().to_string())
        .unwrap_or_default())
}

fn read(path: &Path, what: &str) -> Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("cannot read the {what} {}", path.display()))
}

/// What a Java key store (JKS or BCFKS) holds.
#[derive(Debug, Default)]
struct JavaStore {
    /// Private key entries: the PKCS#8 key and its certificate chain (DER),
    /// in the file's order.
    keys: Vec<(Vec<u8>, Vec<Vec<u8>>)>,
    /// Trusted certificate entries (DER).
    trusted: Vec<Vec<u8>>,
}

/// A JKS or BCFKS store opened with its password.
fn read_java_store(store: &Store, what: &str, bytes: &[u8]) -> Result<JavaStore> {
    let pw = password(store, what)?;
    let read = match store.kind {
        StoreType::Jks => jks::read,
        StoreType::Bcfks => bcfks::read,
        StoreType::Pem | StoreType::Pkcs12 => {
            bail!(
                "the {what} {} is not a Java key store",
                store.location.display()
            )
        }
    };
    let name = if store.kind == StoreType::Jks {
        "JKS"
    } else {
        "BCFKS"
    };
    read(bytes, &pw).map_err(|e| {
        anyhow!(
            "the {what} {} is not a {name} store this password opens: {e}",
            store.location.display()
        )
    })
}

/// The certificate chain and private key of a key store, the key as
/// rustls takes it.
fn load_key_store(
    store: &Store,
    what: &str,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
    let (certs, key) = stored_key(store, what)?;
    // keytool's EC keys lack the public key that ring wants.
    let key = ec::with_public_key(key)
        .map_err(|e| anyhow!("the {what} {}: {e}", store.location.display()))?;
    Ok((certs, key))
}

/// The certificate chain and private key of a key store, as stored.
fn stored_key(
    store: &Store,
    what: &str,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
    let bytes = read(&store.location, what)?;
    let (certs, key) = match store.kind {
        StoreType::Pem => {
            if bytes
                .windows(b"ENCRYPTED PRIVATE KEY".len())
                .any(|w| w == b"ENCRYPTED PRIVATE KEY")
            {
                bail!(
                    "the {what} {} holds an encrypted PEM private key, which wazoo does not read: use an unencrypted PEM key or a PKCS12 store",
                    store.location.display()
                );
            }
            let certs = CertificateDer::pem_slice_iter(&bytes)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| anyhow!("the {what} {}: {e}", store.location.display()))?;
            let key = PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| {
                anyhow!(
                    "the {what} {} has no readable private key: {e}",
                    store.location.display()
                )
            })?;
            (certs, key)
        }
        StoreType::Pkcs12 => {
            let pw = password(store, what)?;
            let ks = p12_keystore::KeyStore::from_pkcs12(
                &bytes,
                &pw,
                p12_keystore::Pkcs12ImportPolicy::Strict,
            )
            .map_err(|e| {
                anyhow!(
                    "the {what} {} is not a PKCS12 store this password opens: {e}",
                    store.location.display()
                )
            })?;
            let (_, chain) = ks.private_key_chain().ok_or_else(|| {
                anyhow!(
                    "the {what} {} holds no private key with its certificate",
                    store.location.display()
                )
            })?;
            let certs = chain
                .certs()
                .iter()
                .map(|c| CertificateDer::from(c.as_der().to_vec()))
                .collect();
            let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(chain.key().as_der().to_vec()));
            (certs, key)
        }
        StoreType::Jks | StoreType::Bcfks => {
            // The first private key entry, as Java's key manager picks one
            // when the store has a single key (ZooKeeper's stores do).
            let (key, chain) = read_java_store(store, what, &bytes)?
                .keys
                .into_iter()
                .next()
                .ok_or_else(|| {
                    anyhow!(
                        "the {what} {} holds no private key with its certificate",
                        store.location.display()
                    )
                })?;
            let certs = chain.into_iter().map(CertificateDer::from).collect();
            (certs, PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key)))
        }
    };
    if certs.is_empty() {
        bail!(
            "the {what} {} holds no certificate",
            store.location.display()
        );
    }
    Ok((certs, key))
}

/// The trusted certificates of a trust store.
fn load_trust_store(store: &Store, what: &str) -> Result<RootCertStore> {
    let bytes = read(&store.location, what)?;
    let certs: Vec<CertificateDer<'static>> = match store.kind {
        StoreType::Pem => CertificateDer::pem_slice_iter(&bytes)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| anyhow!("the {what} {}: {e}", store.location.display()))?,
        StoreType::Pkcs12 => {
            let pw = password(store, what)?;
            // Every certificate in it, as Java's trust manager takes every
            // certificate entry of a trust store.
            let ks = p12_keystore::KeyStore::from_pkcs12(
                &bytes,
                &pw,
                p12_keystore::Pkcs12ImportPolicy::Relaxed,
            )
            .map_err(|e| {
                anyhow!(
                    "the {what} {} is not a PKCS12 store this password opens: {e}",
                    store.location.display()
                )
            })?;
            let mut certs = Vec::new();
            for (_, entry) in ks.entries() {
                match entry {
                    p12_keystore::KeyStoreEntry::Certificate(c) => {
                        certs.push(CertificateDer::from(c.as_der().to_vec()))
                    }
                    p12_keystore::KeyStoreEntry::PrivateKeyChain(chain) => certs.extend(
                        chain
                            .certs()
                            .iter()
                            .map(|c| CertificateDer::from(c.as_der().to_vec())),
                    ),
                    p12_keystore::KeyStoreEntry::Secret(_) => {}
                }
            }
            certs
        }
        StoreType::Jks | StoreType::Bcfks => {
            // Trusted certificate entries and the chains of key entries,
            // as for PKCS12 above.
            let java = read_java_store(store, what, &bytes)?;
            java.trusted
                .into_iter()
                .chain(java.keys.into_iter().flat_map(|(_, chain)| chain))
                .map(CertificateDer::from)
                .collect()
        }
    };
    let mut roots = RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(certs);
    if added == 0 {
        bail!(
            "the {what} {} holds no usable certificate",
            store.location.display()
        );
    }
    Ok(roots)
}

// ----- rustls configurations ----------------------------------------------

/// ring's provider with the cipher suites `ssl.ciphersuites` names (in its
/// order), or all of them.
fn provider(s: &TlsSettings) -> Result<Arc<CryptoProvider>> {
    let mut p = rustls::crypto::ring::default_provider();
    if let Some(names) = &s.ciphersuites {
        let all = p.cipher_suites.clone();
        let mut chosen = Vec::new();
        for name in names {
            let suite = all
                .iter()
                .find(|cs| format!("{:?}", cs.suite()) == *name)
                .ok_or_else(|| anyhow!("{}.ciphersuites: wazoo cannot offer {name}", s.prefix))?;
            chosen.push(*suite);
        }
        p.cipher_suites = chosen;
    }
    Ok(Arc::new(p))
}

fn versions(s: &TlsSettings) -> Vec<&'static rustls::SupportedProtocolVersion> {
    s.versions
        .iter()
        .map(|v| match v {
            TlsVersion::V12 => &rustls::version::TLS12,
            TlsVersion::V13 => &rustls::version::TLS13,
        })
        .collect()
}

fn key_store_of(s: &TlsSettings) -> Result<&Store> {
    s.key_store
        .as_ref()
        .ok_or_else(|| anyhow!("{}.keyStore.location is not set", s.prefix))
}

fn trust_store_of(s: &TlsSettings) -> Result<&Store> {
    s.trust_store
        .as_ref()
        .ok_or_else(|| anyhow!("{}.trustStore.location is not set", s.prefix))
}

/// The server side of `s`: its key store, and the client certificates it
/// asks for (`clientAuth`) checked against its trust store.
fn server_config(s: &TlsSettings) -> Result<ServerConfig> {
    let provider = provider(s)?;
    let (certs, key) = load_key_store(key_store_of(s)?, &format!("{}.keyStore", s.prefix))?;
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&versions(s))
        .map_err(|e| {
            anyhow!(
                "{}.enabledProtocols and {}.ciphersuites: {e}",
                s.prefix,
                s.prefix
            )
        })?;
    let builder = match s.client_auth {
        ClientAuth::None => builder.with_no_client_auth(),
        auth => {
            let roots = load_trust_store(trust_store_of(s)?, &format!("{}.trustStore", s.prefix))?;
            let v = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let v = if auth == ClientAuth::Want {
                v.allow_unauthenticated()
            } else {
                v
            };
            builder.with_client_cert_verifier(v.build()?)
        }
    };
    builder
        .with_single_cert(certs, key)
        .map_err(|e| anyhow!("{}.keyStore: {e}", s.prefix))
}

/// The AdminServer's TLS (`admin.forceHttps`, `admin.portUnification`):
/// the `ssl.quorum.*` key store's certificate, as ZooKeeper's AdminServer
/// takes it; with `need_client_auth` (`admin.needClientAuth`) a client
/// must present a certificate the `ssl.quorum.*` trust store accepts,
/// otherwise none is asked for.
pub fn admin_server_config(cfg: &Config, need_client_auth: bool) -> Result<Arc<ServerConfig>> {
    let mut s = cfg
        .tls
        .quorum
        .clone()
        .ok_or_else(|| anyhow!("the AdminServer's TLS needs ssl.quorum.keyStore.location"))?;
    s.client_auth = if need_client_auth {
        ClientAuth::Need
    } else {
        ClientAuth::None
    };
    Ok(Arc::new(server_config(&s)?))
}

/// The dialing side of a quorum link: presents the member's certificate,
/// checks the peer's against the trust store, and its name too unless
/// `hostnameVerification` is false.
fn client_config(s: &TlsSettings) -> Result<ClientConfig> {
    let provider = provider(s)?;
    let (certs, key) = load_key_store(key_store_of(s)?, &format!("{}.keyStore", s.prefix))?;
    let roots = load_trust_store(trust_store_of(s)?, &format!("{}.trustStore", s.prefix))?;
    let verifier =
        WebPkiServerVerifier::builder_with_provider(Arc::new(roots), Arc::clone(&provider))
            .build()?;
    let builder = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions(s))
        .map_err(|e| {
            anyhow!(
                "{}.enabledProtocols and {}.ciphersuites: {e}",
                s.prefix,
                s.prefix
            )
        })?;
    let builder = if s.hostname_verification {
        builder.with_webpki_verifier(verifier)
    } else {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyName(verifier)))
    };
    builder
        .with_client_auth_cert(certs, key)
        .map_err(|e| anyhow!("{}.keyStore: {e}", s.prefix))
}

/// `ssl.quorum.hostnameVerification=false`: the peer's chain is checked
/// against the trust store as ever; only the name in it is not.
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        use rustls::CertificateError::{NotValidForName, NotValidForNameContext};
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                NotValidForName | NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            r => r,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

// ----- reloading ----------------------------------------------------------

/// A configuration built from store files, rebuilt when they change (if
/// reloading is on). A rebuild that fails (a file half written, a wrong
/// password) is logged and the last good configuration stays.
pub struct Reloading<T> {
    current: RwLock<Arc<T>>,
    watcher: Mutex<Option<notify::RecommendedWatcher>>,
}

impl<T: Send + Sync + 'static> Reloading<T> {
    /// Builds the configuration once (an error stops the start), and with
    /// `reload` watches the directories of `files` for changes to them.
    pub fn new(
        what: &'static str,
        files: Vec<PathBuf>,
        reload: bool,
        build: impl Fn() -> Result<T> + Send + Sync + 'static,
    ) -> Result<Arc<Reloading<T>>> {
        let this = Arc::new(Reloading {
            current: RwLock::new(Arc::new(build()?)),
            watcher: Mutex::new(None),
        });
        if !reload {
            return Ok(this);
        }
        use notify::Watcher;
        let weak = Arc::downgrade(&this);
        let watched = files.clone();
        let mut watcher = notify::recommended_watcher(move |ev: notify::Result<notify::Event>| {
            let Ok(ev) = ev else { return };
            if matches!(ev.kind, notify::EventKind::Access(_)) {
                return;
            }
            let ours = ev.paths.iter().any(|p| {
                watched
                    .iter()
                    .any(|w| p == w || (p.file_name() == w.file_name() && p.parent() == w.parent()))
            });
            let Some(this) = weak.upgrade() else { return };
            if !ours {
                return;
            }
            match build() {
                Ok(cfg) => {
                    *this.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(cfg);
                    tracing::info!("reloaded the {what} certificates");
                }
                Err(e) => {
                    tracing::warn!("kept the previous {what} certificates: reloading failed: {e:#}")
                }
            }
        })
        .context("cannot watch the certificate files")?;
        let mut dirs: Vec<PathBuf> = files
            .iter()
            .map(|f| match f.parent() {
                Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
                _ => PathBuf::from("."),
            })
            .collect();
        dirs.sort();
        dirs.dedup();
        for d in dirs {
            watcher
                .watch(&d, notify::RecursiveMode::NonRecursive)
                .with_context(|| format!("cannot watch {} for certificate changes", d.display()))?;
        }
        *this.watcher.lock().unwrap_or_else(|e| e.into_inner()) = Some(watcher);
        Ok(this)
    }

    /// The configuration new connections use.
    pub fn get(&self) -> Arc<T> {
        Arc::clone(&self.current.read().unwrap_or_else(|e| e.into_inner()))
    }
}

fn store_files(s: &TlsSettings) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for st in [&s.key_store, &s.trust_store].into_iter().flatten() {
        files.push(st.location.clone());
        files.extend(st.password_path.clone());
    }
    files
}

// ----- the secure client port ---------------------------------------------

/// What the secure client port needs: its rustls configuration (reloaded
/// on `client.certReload`), the handshake bound, and the x509 super user.
pub struct ClientTls {
    config: Arc<Reloading<ServerConfig>>,
    pub handshake_timeout: Duration,
    super_user: Option<String>,
}

impl ClientTls {
    /// The secure port's TLS, if zoo.cfg sets `secureClientPort`; reads
    /// the stores now, so a wrong file or password stops the start.
    pub fn load(cfg: &TlsConfig) -> Result<Option<Arc<ClientTls>>> {
        let Some(s) = cfg.client.clone() else {
            return Ok(None);
        };
        let files = store_files(&s);
        let timeout = Duration::from_millis(s.handshake_timeout_ms);
        let config = Reloading::new("client TLS", files, cfg.client_cert_reload, move || {
            server_config(&s)
        })?;
        Ok(Some(Arc::new(ClientTls {
            config,
            handshake_timeout: timeout,
            super_user: cfg.x509_super_user.clone(),
        })))
    }

    /// Runs the server side of a TLS handshake on `tcp` (within the
    /// handshake bound) and returns the stream with the identities its
    /// client certificate proves (none without one).
    pub async fn accept(
        &self,
        tcp: TcpStream,
    ) -> io::Result<(tokio_rustls::server::TlsStream<TcpStream>, Vec<Id>)> {
        let acceptor = tokio_rustls::TlsAcceptor::from(self.config.get());
        let stream = tokio::time::timeout(self.handshake_timeout, acceptor.accept(tcp))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no TLS handshake in time"))??;
        let ids = match stream.get_ref().1.peer_certificates() {
            Some([cert, ..]) => x509_ids(cert, self.super_user.as_deref()).map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("client certificate: {e}"),
                )
            })?,
            _ => Vec::new(),
        };
        Ok((stream, ids))
    }
}

/// Reads the secure client port's stores and binds it, if zoo.cfg sets
/// `secureClientPort`. Runs inside the member's runtime.
pub fn bind_secure_client_port(
    cfg: &Config,
) -> Result<Option<(tokio::net::TcpListener, Arc<ClientTls>)>> {
    let (Some(addr), Some(tls)) = (cfg.tls.secure_client_addr, ClientTls::load(&cfg.tls)?) else {
        return Ok(None);
    };
    let listener = crate::member::client_listener(addr, cfg.client_port_listen_backlog)
        .with_context(|| format!("cannot listen on the secure client port {addr}"))?;
    tracing::info!(%addr, "serving TLS clients on the secure client port");
    Ok(Some((listener, tls)))
}

/// The identities a trusted client certificate gives, as ZooKeeper's
/// X509AuthenticationProvider: `x509:<subject DN>`, and `super:<DN>` when
/// the DN is the configured super user.
pub fn x509_ids(cert: &CertificateDer<'_>, super_user: Option<&str>) -> Result<Vec<Id>> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref())
        .map_err(|e| anyhow!("unreadable certificate: {e}"))?;
    let dn = rfc2253(parsed.subject());
    let mut ids = vec![Id::new("x509", &dn)];
    if super_user == Some(dn.as_str()) {
        ids.push(Id::new("super", &dn));
    }
    Ok(ids)
}

/// A name as Java's `X500Principal.getName()` writes it (RFC 2253): the
/// RDNs last first, separated by `,`, the values of a multi-valued RDN by
/// `+`; the keywords Java knows for RFC 2253 (CN, C, L, ST, O, OU, STREET,
/// DC, UID) by name and others as dotted OIDs; a string value escaped, and
/// a value that is not a string (or an attribute without a keyword) as `#`
/// and the hex of its DER encoding.
pub fn rfc2253(name: &x509_parser::x509::X509Name<'_>) -> String {
    let rdns: Vec<String> = name
        .iter()
        .map(|rdn| {
            rdn.iter()
                .map(|ava| {
                    let oid = ava.attr_type().to_id_string();
                    let keyword = match oid.as_str() {
                        "2.5.4.3" => Some("CN"),
                        "2.5.4.6" => Some("C"),
                        "2.5.4.7" => Some("L"),
                        "2.5.4.8" => Some("ST"),
                        "2.5.4.10" => Some("O"),
                        "2.5.4.11" => Some("OU"),
                        "2.5.4.9" => Some("STREET"),
                        "0.9.2342.19200300.100.1.25" => Some("DC"),
                        "0.9.2342.19200300.100.1.1" => Some("UID"),
                        _ => None,
                    };
                    match (keyword, ava.as_str()) {
                        (Some(k), Ok(v)) => format!("{k}={}", escape_rfc2253(v)),
                        (k, _) => {
                            use x509_parser::asn1_rs::ToDer;
                            let der = ava.attr_value().to_der_vec().unwrap_or_default();
                            let hex: String = der.iter().map(|b| format!("{b:02x}")).collect();
                            format!("{}=#{hex}", k.map_or(oid.clone(), str::to_string))
                        }
                    }
                })
                .collect::<Vec<_>>()
                .join("+")
        })
        .collect();
    rdns.into_iter().rev().collect::<Vec<_>>().join(",")
}

/// Java's AVA.toRFC2253String escaping: a backslash before `,=+<>#;"\`,
/// and before a leading or trailing space.
fn escape_rfc2253(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    let n = v.chars().count();
    for (i, c) in v.chars().enumerate() {
        if ",=+<>#;\"\\".contains(c) || (c == ' ' && (i == 0 || i + 1 == n)) {
            out.push('\\');
        }
        if c == '\0' {
            out.push_str("\\00");
            continue;
        }
        out.push(c);
    }
    out
}

// ----- quorum links -------------------------------------------------------

/// TLS on the links between members (`sslQuorum=true`): both sides present
/// their certificate and check the other's against the quorum trust store.
pub struct QuorumTls {
    server: Arc<Reloading<ServerConfig>>,
    client: Arc<Reloading<ClientConfig>>,
    pub handshake_timeout: Duration,
    hostname_verification: bool,
    /// Each member's configured hosts (`server.N`, one per address
    /// pair), one of which its certificate must carry when hostnames are
    /// verified. A reconfig changes them ([`QuorumTls::set_member_hosts`]).
    hosts: std::sync::RwLock<HashMap<u64, Vec<String>>>,
}

impl QuorumTls {
    /// The quorum's TLS if zoo.cfg sets `sslQuorum=true`. With `ssl.quorum.*`
    /// keys and `sslQuorum=false` the stores are read (a mistake shows now,
    /// not at the upgrade's next step) but links stay plain.
    pub fn load(cfg: &Config) -> Result<Option<Arc<QuorumTls>>> {
        let Some(s) = cfg.tls.quorum.clone() else {
            return Ok(None);
        };
        if !cfg.tls.ssl_quorum {
            if s.key_store.is_some() {
                server_config(&s)?;
            }
            tracing::info!("ssl.quorum keys are set and sslQuorum=false: quorum links stay plain");
            return Ok(None);
        }
        let reload = cfg.tls.quorum_cert_reload;
        let files = store_files(&s);
        let s2 = s.clone();
        let server = Reloading::new("quorum TLS", files.clone(), reload, move || {
            server_config(&s2)
        })?;
        let s3 = s.clone();
        let client = Reloading::new("quorum TLS", files, reload, move || client_config(&s3))?;
        Ok(Some(Arc::new(QuorumTls {
            server,
            client,
            handshake_timeout: Duration::from_millis(s.handshake_timeout_ms),
            hostname_verification: s.hostname_verification,
            hosts: std::sync::RwLock::new(
                cfg.servers
                    .iter()
                    .map(|m| (m.id, m.addrs.iter().map(|a| a.host.clone()).collect()))
                    .collect(),
            ),
        })))
    }

    /// The accepting side's handshake: the dialer must present a
    /// certificate the quorum trust store accepts.
    pub async fn accept(&self, tcp: TcpStream) -> io::Result<MaybeTls> {
        let acceptor = tokio_rustls::TlsAcceptor::from(self.server.get());
        let s = tokio::time::timeout(self.handshake_timeout, acceptor.accept(tcp))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no TLS handshake in time"))??;
        Ok(MaybeTls::Tls(Box::new(tokio_rustls::TlsStream::Server(s))))
    }

    /// Whether the accepted connection's certificate may speak for
    /// member `id`: with hostname verification, it must be valid for one
    /// of the member's configured hosts (ZooKeeper checks the dialer's
    /// address instead; the configured host binds the certificate to the
    /// member it claims to be).
    pub fn check_member(&self, s: &MaybeTls, id: u64) -> Result<(), String> {
        if !self.hostname_verification {
            return Ok(());
        }
        let MaybeTls::Tls(t) = s else {
            return Err("not a TLS connection".into());
        };
        let Some([cert, ..]) = t.get_ref().1.peer_certificates() else {
            return Err("no certificate".into());
        };
        let hosts = self
            .hosts
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&id)
            .cloned()
            .ok_or_else(|| format!("member {id} is not configured"))?;
        let parsed = rustls::server::ParsedCertificate::try_from(cert)
            .map_err(|e| format!("certificate: {e}"))?;
        let mut why = Vec::with_capacity(hosts.len());
        for host in &hosts {
            let checked = ServerName::try_from(host.as_str())
                .map_err(|e| e.to_string())
                .and_then(|name| {
                    rustls::client::verify_server_name(&parsed, &name).map_err(|e| e.to_string())
                });
            match checked {
                Ok(()) => return Ok(()),
                Err(e) => why.push(format!("{host}: {e}")),
            }
        }
        Err(format!(
            "certificate not valid for any of member {id}'s hosts ({})",
            why.join("; ")
        ))
    }

    /// A reconfig committed: the members and their hosts are these now.
    pub fn set_member_hosts(&self, hosts: HashMap<u64, Vec<String>>) {
        *self.hosts.write().unwrap_or_else(|e| e.into_inner()) = hosts;
    }

    /// The dialing side's handshake with a member reached at an address
    /// named by `host` (the name its certificate must carry).
    pub async fn connect(&self, tcp: TcpStream, host: &str) -> io::Result<MaybeTls> {
        let name = ServerName::try_from(host.to_string())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let connector = tokio_rustls::TlsConnector::from(self.client.get());
        let s = tokio::time::timeout(self.handshake_timeout, connector.connect(name, tcp))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no TLS handshake in time"))??;
        Ok(MaybeTls::Tls(Box::new(tokio_rustls::TlsStream::Client(s))))
    }
}

/// A quorum connection: plain TCP, or TLS on TCP.
pub enum MaybeTls {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::TlsStream<TcpStream>>),
}

impl MaybeTls {
    pub fn tcp(&self) -> &TcpStream {
        match self {
            MaybeTls::Plain(s) => s,
            MaybeTls::Tls(t) => t.get_ref().0,
        }
    }
}

impl AsyncRead for MaybeTls {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_read(cx, buf),
            MaybeTls::Tls(t) => Pin::new(t.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for MaybeTls {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_write(cx, buf),
            MaybeTls::Tls(t) => Pin::new(t.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_flush(cx),
            MaybeTls::Tls(t) => Pin::new(t.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_shutdown(cx),
            MaybeTls::Tls(t) => Pin::new(t.as_mut()).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subject_of(params: rcgen::CertificateParams) -> String {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        let ids = x509_ids(cert.der(), None).unwrap();
        assert_eq!(ids[0].scheme, "x509");
        ids[0].id.clone()
    }

    // ZooKeeper Programmer's Guide, "Built-in ACL Schemes": x509 uses the
    // client certificate's subject as X500Principal.getName() writes it:
    // RFC 2253, last RDN first, no spaces.
    #[test]
    fn the_x509_id_is_the_subject_as_java_writes_it() {
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name = rcgen::DistinguishedName::new();
        p.distinguished_name.push(rcgen::DnType::CountryName, "DE");
        p.distinguished_name
            .push(rcgen::DnType::OrganizationName, "Acme, Inc.");
        p.distinguished_name
            .push(rcgen::DnType::CommonName, "alice");
        assert_eq!(subject_of(p), "CN=alice,O=Acme\\, Inc.,C=DE");
    }

    #[test]
    fn rfc2253_escapes_and_unknown_attributes_as_java_does() {
        assert_eq!(
            escape_rfc2253(" a+b=c#<>;\"\\ "),
            "\\ a\\+b\\=c\\#\\<\\>\\;\\\"\\\\\\ "
        );
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name = rcgen::DistinguishedName::new();
        // emailAddress has no RFC 2253 keyword in Java: OID=#DER.
        p.distinguished_name.push(
            rcgen::DnType::CustomDnType(vec![1, 2, 840, 113549, 1, 9, 1]),
            rcgen::DnValue::Ia5String("a@b".try_into().unwrap()),
        );
        p.distinguished_name.push(rcgen::DnType::CommonName, "bob");
        assert_eq!(subject_of(p), "CN=bob,1.2.840.113549.1.9.1=#1603614062");
    }

    #[test]
    fn the_super_user_certificate_is_also_super() {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name = rcgen::DistinguishedName::new();
        p.distinguished_name
            .push(rcgen::DnType::CommonName, "admin");
        let cert = p.self_signed(&key).unwrap();
        let ids = x509_ids(cert.der(), Some("CN=admin")).unwrap();
        assert_eq!(
            ids,
            vec![Id::new("x509", "CN=admin"), Id::new("super", "CN=admin")]
        );
        assert_eq!(x509_ids(cert.der(), Some("CN=other")).unwrap().len(), 1);
    }
}
