//! TLS with real clients, on Apache ZooKeeper 3.8 (the oracle) and wazoo
//! alike: the same zoo.cfg (secureClientPort, PKCS12 key and trust stores,
//! ssl.clientAuth=need) serves ZooKeeper's Java client (zkCli.sh over
//! Netty) and kazoo (`use_ssl`); the x509 ACL scheme matches the client
//! certificate's subject; a client without a certificate, and a plain
//! client on the secure port, are refused without disturbing anyone else.
//! On wazoo alone: certificates reload when their files change, and a
//! 3-member ensemble runs its links over TLS (ZooKeeper Administrator's
//! Guide, "Encryption, Authentication, Authorization Options" and
//! "Quorum TLS").
//!
//! Certificates are made at test time (rcgen; openssl and keytool for
//! PKCS12), in a temporary directory. Everything listens on loopback.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose,
};
use wazoo_testkit::{free_port, Flavor, MultiAddress, ServerOptions, TestEnsemble, WazooEnsemble};
use zookeeper_client::{Acls, CreateMode};

const PW: &str = "changeit";

/// A certificate authority that issues test certificates into a directory.
struct Ca {
    dir: PathBuf,
    issuer: CertifiedIssuer<'static, KeyPair>,
    name: String,
}

/// A certificate and its key, as PEM files and as a PKCS12 key store.
struct Leaf {
    cert_pem: PathBuf,
    key_pem: PathBuf,
    /// Key and certificate chain in one file: ZooKeeper's PEM key store.
    combined_pem: PathBuf,
    p12: PathBuf,
}

fn run(cmd: &mut Command) {
    let out = cmd.output().expect("the tool runs");
    assert!(
        out.status.success(),
        "{cmd:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Ca {
    fn new(dir: &Path, name: &str) -> Ca {
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name = DistinguishedName::new();
        p.distinguished_name.push(DnType::CommonName, name);
        p.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().unwrap();
        // The CA's key too, for openssl to sign keytool's requests with.
        std::fs::write(dir.join(format!("{name}.key")), key.serialize_pem()).unwrap();
        let issuer = CertifiedIssuer::self_signed(p, key).unwrap();
        std::fs::write(dir.join(format!("{name}.pem")), issuer.pem()).unwrap();
        Ca {
            dir: dir.to_path_buf(),
            issuer,
            name: name.to_string(),
        }
    }

    fn pem(&self) -> PathBuf {
        self.dir.join(format!("{}.pem", self.name))
    }

    /// A PKCS12 trust store holding this CA, made by keytool (so Java
    /// reads it as a trust store).
    fn trust_p12(&self) -> PathBuf {
        self.trust_store("PKCS12", "p12")
    }

    /// The same trust as a JKS store.
    fn trust_jks(&self) -> PathBuf {
        self.trust_store("JKS", "jks")
    }

    /// The same trust as a BCFKS store.
    fn trust_bcfks(&self) -> PathBuf {
        self.trust_store("BCFKS", "bcfks")
    }

    fn trust_store(&self, store_type: &str, ext: &str) -> PathBuf {
        let out = self.dir.join(format!("{}-trust.{ext}", self.name));
        if !out.exists() {
            run(Command::new("keytool")
                .args(["-importcert", "-noprompt", "-storetype", store_type])
                .args(["-alias", "ca", "-file"])
                .arg(self.pem())
                .arg("-keystore")
                .arg(&out)
                .args(["-storepass", PW])
                .args(provider_for(store_type)));
        }
        out
    }

    /// A JKS key store whose EC key (P-256) keytool generates itself, as
    /// keytool stores it (PKCS#8 without the public key), with a
    /// certificate this CA issues for it like `issue`'s: keytool's request
    /// signed by openssl, and the chain imported back by keytool.
    fn keytool_ec_jks(&self, file: &str, cn: &str) -> PathBuf {
        let d = &self.dir;
        let ks = d.join(format!("{file}-ec.jks"));
        let keytool = || {
            let mut cmd = Command::new("keytool");
            cmd.arg("-keystore").arg(&ks).args([
                "-storetype",
                "JKS",
                "-storepass",
                PW,
                "-keypass",
                PW,
            ]);
            cmd
        };
        run(keytool()
            .args(["-genkeypair", "-alias", file, "-keyalg", "EC"])
            .args(["-groupname", "secp256r1"])
            .args(["-dname", &format!("CN={cn},O=wazoo-test")]));
        let csr = d.join(format!("{file}-ec.csr"));
        run(keytool()
            .args(["-certreq", "-alias", file, "-file"])
            .arg(&csr));
        let ext = d.join(format!("{file}-ec.ext"));
        std::fs::write(
            &ext,
            "subjectAltName=DNS:localhost,IP:127.0.0.1\n\
             extendedKeyUsage=serverAuth,clientAuth\n\
             keyUsage=digitalSignature\n",
        )
        .unwrap();
        let crt = d.join(format!("{file}-ec.crt"));
        run(Command::new("openssl")
            .args(["x509", "-req", "-days", "2", "-in"])
            .arg(&csr)
            .arg("-CA")
            .arg(self.pem())
            .arg("-CAkey")
            .arg(d.join(format!("{}.key", self.name)))
            .arg("-extfile")
            .arg(&ext)
            .arg("-out")
            .arg(&crt));
        run(keytool()
            .args(["-importcert", "-noprompt", "-alias", "ca", "-file"])
            .arg(self.pem()));
        run(keytool()
            .args(["-importcert", "-noprompt", "-alias", file, "-file"])
            .arg(&crt));
        ks
    }

    /// A certificate for `file` with subject `O=wazoo-test, CN=<cn>`,
    /// valid for localhost and 127.0.0.1, for servers and clients.
    fn issue(&self, file: &str, cn: &str) -> Leaf {
        self.issue_for(file, cn, &["localhost", "127.0.0.1"])
    }

    /// [`Ca::issue`], valid for `names` only.
    fn issue_for(&self, file: &str, cn: &str, names: &[&str]) -> Leaf {
        let mut p = CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
            .unwrap();
        p.distinguished_name = DistinguishedName::new();
        p.distinguished_name
            .push(DnType::OrganizationName, "wazoo-test");
        p.distinguished_name.push(DnType::CommonName, cn);
        p.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        p.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        let key = KeyPair::generate().unwrap();
        let cert = p.signed_by(&key, &self.issuer).unwrap();
        let d = &self.dir;
        let leaf = Leaf {
            cert_pem: d.join(format!("{file}.crt")),
            key_pem: d.join(format!("{file}.key")),
            combined_pem: d.join(format!("{file}.pem")),
            p12: d.join(format!("{file}.p12")),
        };
        std::fs::write(&leaf.cert_pem, cert.pem()).unwrap();
        std::fs::write(&leaf.key_pem, key.serialize_pem()).unwrap();
        std::fs::write(
            &leaf.combined_pem,
            format!("{}{}", key.serialize_pem(), cert.pem()),
        )
        .unwrap();
        run(Command::new("openssl")
            .args(["pkcs12", "-export", "-name", file])
            .arg("-in")
            .arg(&leaf.cert_pem)
            .arg("-inkey")
            .arg(&leaf.key_pem)
            .arg("-out")
            .arg(&leaf.p12)
            .args(["-passout", &format!("pass:{PW}")]));
        leaf
    }
}

/// Test PKI: a CA, the server's certificate, two clients (alice and
/// bob) and a stranger (mallory) whose CA nobody trusts.
struct Pki {
    _dir: tempfile::TempDir,
    ca: Ca,
    server: Leaf,
    alice: Leaf,
    bob: Leaf,
    mallory: Leaf,
}

fn pki() -> Pki {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ca");
    let rogue = Ca::new(dir.path(), "rogue");
    Pki {
        server: ca.issue("server", "server"),
        alice: ca.issue("alice", "alice"),
        bob: ca.issue("bob", "bob"),
        mallory: rogue.issue("mallory", "alice"),
        ca,
        _dir: dir,
    }
}

/// A leaf's PKCS12 store converted by keytool to a `store_type` store
/// (JKS or BCFKS), in a file named with `ext`.
fn converted(leaf: &Leaf, store_type: &str, ext: &str) -> PathBuf {
    let out = leaf.p12.with_extension(ext);
    if !out.exists() {
        run(Command::new("keytool")
            .args(["-importkeystore", "-noprompt", "-srcstoretype", "PKCS12"])
            .arg("-srckeystore")
            .arg(&leaf.p12)
            .args(["-srcstorepass", PW, "-deststoretype", store_type])
            .arg("-destkeystore")
            .arg(&out)
            .args(["-deststorepass", PW, "-destkeypass", PW])
            .args(provider_for(store_type)));
    }
    out
}

fn jks_of(leaf: &Leaf) -> PathBuf {
    converted(leaf, "JKS", "jks")
}

fn bcfks_of(leaf: &Leaf) -> PathBuf {
    converted(leaf, "BCFKS", "bcfks")
}

/// BouncyCastle's provider (Debian's libbcprov-java): it brings the
/// BCFKS key store type to keytool and to ZooKeeper.
const BCPROV: &str = "/usr/share/java/bcprov.jar";
const BC_PROVIDER_CLASS: &str = "org.bouncycastle.jce.provider.BouncyCastleProvider";

fn bcprov() -> &'static str {
    assert!(
        Path::new(BCPROV).is_file(),
        "{BCPROV} is missing: install the Debian package libbcprov-java (scripts/setup.sh does); \
         BouncyCastle's provider is what writes and reads BCFKS stores"
    );
    BCPROV
}

/// keytool's arguments for a store of `store_type`: BouncyCastle's
/// provider for BCFKS, nothing for the JDK's own types.
fn provider_for(store_type: &str) -> Vec<&'static str> {
    match store_type {
        "BCFKS" => vec![
            "-providerpath",
            bcprov(),
            "-providerclass",
            BC_PROVIDER_CLASS,
        ],
        _ => vec![],
    }
}

/// The JVM arguments that register BouncyCastle's provider in a ZooKeeper
/// server (the testkit puts bcprov.jar on its classpath), through a
/// security properties file in `dir` that adds it after the JDK's twelve.
fn zookeeper_bc_provider(dir: &Path) -> String {
    bcprov();
    let file = dir.join("bc.java.security");
    std::fs::write(&file, format!("security.provider.13={BC_PROVIDER_CLASS}\n")).unwrap();
    format!("-Djava.security.properties={}", file.display())
}

/// The server's key and trust store formats.
#[derive(Clone, Copy, Debug)]
enum Stores {
    Pkcs12,
    /// JKS, as most ZooKeeper TLS setups have them (the type from the
    /// `.jks` file name, as ZooKeeper's KeyStoreFileType tells it).
    Jks,
    /// BCFKS, BouncyCastle's FIPS key store (the type from the `.bcfks`
    /// file name).
    Bcfks,
    /// JKS, with an EC key keytool generated itself (stored without its
    /// public key).
    JksKeytoolEc,
}

/// The zoo.cfg lines of a secure client port with `stores`.
fn secure_port_cfg(opts: ServerOptions, pki: &Pki, port: u16, stores: Stores) -> ServerOptions {
    let (key, trust) = match stores {
        Stores::Pkcs12 => (pki.server.p12.clone(), pki.ca.trust_p12()),
        Stores::Jks => (jks_of(&pki.server), pki.ca.trust_jks()),
        Stores::Bcfks => (bcfks_of(&pki.server), pki.ca.trust_bcfks()),
        Stores::JksKeytoolEc => (
            pki.ca.keytool_ec_jks("server", "server"),
            pki.ca.trust_jks(),
        ),
    };
    [
        format!("secureClientPort={port}"),
        "secureClientPortAddress=127.0.0.1".to_string(),
        "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory".to_string(),
        format!("ssl.keyStore.location={}", key.display()),
        format!("ssl.keyStore.password={PW}"),
        format!("ssl.trustStore.location={}", trust.display()),
        format!("ssl.trustStore.password={PW}"),
        "ssl.clientAuth=need".to_string(),
    ]
    .into_iter()
    .fold(opts, |o, line| o.cfg(line))
}

/// Runs ZooKeeper's Java client (`ZooKeeperMain`, what zkCli.sh runs)
/// over TLS as `leaf` against `addr` with one command; its output.
/// zkCli.sh itself cannot be used: its fixed classpath (Debian's
/// zookeeper.jar) lacks netty-codec, which the Netty client socket needs.
fn zkcli(addr: SocketAddr, leaf: &Leaf, pki: &Pki, cmd: &[&str]) -> String {
    let mut classpath = vec![PathBuf::from("/usr/share/java/zookeeper.jar")];
    classpath.extend(wazoo_testkit::netty_jars_debian_omits());
    let classpath = std::env::join_paths(classpath).unwrap();
    let out = Command::new("timeout")
        .arg("60")
        .arg("java")
        .arg("-cp")
        .arg(classpath)
        .arg("-Dzookeeper.client.secure=true")
        .arg("-Dzookeeper.clientCnxnSocket=org.apache.zookeeper.ClientCnxnSocketNetty")
        .arg(format!(
            "-Dzookeeper.ssl.keyStore.location={}",
            leaf.p12.display()
        ))
        .arg(format!("-Dzookeeper.ssl.keyStore.password={PW}"))
        .arg(format!(
            "-Dzookeeper.ssl.trustStore.location={}",
            pki.ca.trust_p12().display()
        ))
        .arg(format!("-Dzookeeper.ssl.trustStore.password={PW}"))
        .arg("org.apache.zookeeper.ZooKeeperMain")
        .args(["-server", &addr.to_string()])
        .args(cmd)
        .output()
        .expect("java runs");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// kazoo over TLS: each scenario prints one `name: result` line.
const KAZOO_SCRIPT: &str = r#"
import sys
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import make_acl
secure, plain, ca, alice_crt, alice_key, bob_crt, bob_key, root = sys.argv[1:9]

def client(hosts, **kw):
    zk = KazooClient(hosts=hosts, timeout=10, connection_retry={"max_tries": 0}, **kw)
    zk.start(timeout=10)
    return zk

def tls(crt, key):
    return client(secure, use_ssl=True, verify_certs=True, ca=ca, certfile=crt, keyfile=key)

alice = tls(alice_crt, alice_key)
alice.create(root + "-kazoo", b"over tls")
print("kazoo create and get:", alice.get(root + "-kazoo")[0].decode())
alice.create(root + "-x509", b"alice's", acl=[make_acl("x509", "CN=alice,O=wazoo-test", all=True)])
print("x509 owner reads:", alice.get(root + "-x509")[0].decode())
bob = tls(bob_crt, bob_key)
try:
    bob.get(root + "-x509")
    print("x509 other reads: allowed")
except NoAuthError:
    print("x509 other reads: NoAuth")
bob.stop()
try:
    client(secure, use_ssl=True, verify_certs=True, ca=ca)
    print("no certificate: connected")
except Exception as e:
    print("no certificate: refused")
p = client(plain)
p.create(root + "-plain", b"plain")
print("plain port:", p.get(root + "-plain")[0].decode(), p.get(root + "-kazoo")[0].decode())
p.stop()
alice.stop()
"#;

fn kazoo(secure: SocketAddr, plain: SocketAddr, pki: &Pki, root: &str) -> String {
    let out = Command::new("timeout")
        .arg("120")
        .arg("python3")
        .arg("-c")
        .arg(KAZOO_SCRIPT)
        .arg(secure.to_string())
        .arg(plain.to_string())
        .arg(pki.ca.pem())
        .arg(&pki.alice.cert_pem)
        .arg(&pki.alice.key_pem)
        .arg(&pki.bob.cert_pem)
        .arg(&pki.bob.key_pem)
        .arg(root)
        .output()
        .expect("python3 runs");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A plain client that speaks ZooKeeper's protocol to the secure port:
/// whatever comes back, the connection must end within the handshake
/// bound, and never with a ConnectResponse.
fn plain_client_on_the_secure_port_is_closed(secure: SocketAddr) {
    let mut s = TcpStream::connect(secure).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut frame = Vec::new();
    wazoo_proto::frame::write_record(
        &mut frame,
        &wazoo_proto::ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: 0,
            timeout_ms: 30_000,
            session_id: 0,
            passwd: vec![0; 16],
            read_only: Some(false),
        },
    );
    let _ = s.write_all(&frame);
    let mut got = Vec::new();
    let started = Instant::now();
    let mut buf = [0u8; 512];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => {
                assert!(
                    !matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ),
                    "the plain connection was not closed in {:?}",
                    started.elapsed()
                );
                break;
            }
        }
    }
    assert!(
        got.is_empty() || got[0] == 0x15,
        "only a TLS alert comes back, not a session: {got:?}"
    );
}

/// The secure port scenarios, on one flavor, with the server's stores
/// in `stores`.
fn secure_port_with_real_clients(flavor: Flavor, stores: Stores) {
    let pki = pki();
    let secure = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let mut opts = common::options(flavor);
    if let (Flavor::Zookeeper, Stores::Bcfks) = (flavor, stores) {
        opts = opts.arg(zookeeper_bc_provider(&pki.ca.dir));
    }
    let server = flavor
        .start_with(secure_port_cfg(opts, &pki, secure.port(), stores))
        .unwrap_or_else(|e| panic!("{} starts: {e:#}", flavor.name()));
    let plain = server.addr();
    let root = format!("/tls-{}", flavor.name());

    // A silent plain connection on the secure port stalls nobody. (The
    // secure port may open a moment after the plain one: ZooKeeper starts
    // its secure connection factory second.)
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let silent = loop {
        match TcpStream::connect(secure) {
            Ok(s) => break s,
            Err(e) if std::time::Instant::now() < deadline => {
                eprintln!("{flavor:?}: secure port not open yet: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => panic!("{flavor:?}: the secure port never opened: {e}"),
        }
    };

    let created = zkcli(secure, &pki.alice, &pki, &["create", &root, "from-zkcli"]);
    assert!(
        created.contains(&format!("Created {root}")),
        "{flavor:?}: {created}"
    );
    let read = zkcli(secure, &pki.bob, &pki, &["get", &root]);
    assert!(read.contains("from-zkcli"), "{flavor:?}: {read}");

    let out = kazoo(secure, plain, &pki, &root);
    for line in [
        "kazoo create and get: over tls",
        "x509 owner reads: alice's",
        "x509 other reads: NoAuth",
        "no certificate: refused",
        "plain port: plain over tls",
    ] {
        assert!(out.contains(line), "{flavor:?}: {line:?} in {out}");
    }
    plain_client_on_the_secure_port_is_closed(secure);
    drop(silent);
}

// ZooKeeper Administrator's Guide, "Encryption, Authentication,
// Authorization Options" (secureClientPort, ssl.keyStore.*,
// ssl.trustStore.*, ssl.clientAuth) and ZooKeeper Programmer's Guide,
// "Built-in ACL Schemes" (x509).
#[test]
fn zookeeper_serves_real_clients_over_tls() {
    secure_port_with_real_clients(Flavor::Zookeeper, Stores::Pkcs12);
}

#[test]
fn wazoo_serves_real_clients_over_tls() {
    secure_port_with_real_clients(Flavor::Wazoo, Stores::Pkcs12);
}

// The same zoo.cfg with JKS key and trust stores made by the JDK's
// keytool: ZooKeeper reads them, and so does wazoo.
#[test]
fn zookeeper_serves_real_clients_over_tls_with_jks_stores() {
    secure_port_with_real_clients(Flavor::Zookeeper, Stores::Jks);
}

#[test]
fn wazoo_serves_real_clients_over_tls_with_jks_stores() {
    secure_port_with_real_clients(Flavor::Wazoo, Stores::Jks);
}

// The same zoo.cfg with BCFKS key and trust stores made by keytool with
// BouncyCastle's provider: ZooKeeper reads them (with that provider
// registered, as a FIPS deployment has it), and so does wazoo.
#[test]
fn zookeeper_serves_real_clients_over_tls_with_bcfks_stores() {
    secure_port_with_real_clients(Flavor::Zookeeper, Stores::Bcfks);
}

#[test]
fn wazoo_serves_real_clients_over_tls_with_bcfks_stores() {
    secure_port_with_real_clients(Flavor::Wazoo, Stores::Bcfks);
}

// The same zoo.cfg with a JKS key store whose EC key keytool generated
// itself (PKCS#8 without the public key): ZooKeeper serves with it, and so
// does wazoo.
#[test]
fn zookeeper_serves_real_clients_over_tls_with_a_keytool_ec_key() {
    secure_port_with_real_clients(Flavor::Zookeeper, Stores::JksKeytoolEc);
}

#[test]
fn wazoo_serves_real_clients_over_tls_with_a_keytool_ec_key() {
    secure_port_with_real_clients(Flavor::Wazoo, Stores::JksKeytoolEc);
}

// ----- certificate reload -------------------------------------------------

/// A rustls client that trusts `ca` and presents `leaf`.
fn rustls_client(ca: &Path, leaf: &Leaf) -> Arc<rustls::ClientConfig> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let certs = CertificateDer::pem_file_iter(&leaf.cert_pem)
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(&leaf.key_pem).unwrap();
    Arc::new(
        rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_client_auth_cert(certs, key)
        .unwrap(),
    )
}

/// The subject CN of the certificate the server at `addr` presents.
async fn server_certificate_cn(addr: SocketAddr, client: Arc<rustls::ClientConfig>) -> String {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let s = tokio_rustls::TlsConnector::from(client)
        .connect(name, tcp)
        .await
        .expect("TLS handshake");
    let der = s.get_ref().1.peer_certificates().unwrap()[0].clone();
    let ids = wazoo::tls::x509_ids(&der, None).unwrap();
    ids[0].id.clone()
}

// ZooKeeper Administrator's Guide, "client.certReload": the key and trust
// stores are reloaded when their files change; new connections get the
// new certificate. (ZooKeeper 3.8.1; Debian's 3.8.0 predates it, so this
// runs on wazoo alone.)
#[tokio::test(flavor = "multi_thread")]
async fn a_replaced_certificate_is_served_to_new_connections() {
    let pki = pki();
    let dir = tempfile::tempdir().unwrap();
    let keystore = dir.path().join("server.pem");
    std::fs::copy(&pki.server.combined_pem, &keystore).unwrap();
    let secure = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let opts = common::options(Flavor::Wazoo)
        .cfg(format!("secureClientPort={}", secure.port()))
        .cfg("secureClientPortAddress=127.0.0.1")
        .cfg(format!("ssl.keyStore.location={}", keystore.display()))
        .cfg(format!(
            "ssl.trustStore.location={}",
            pki.ca.pem().display()
        ))
        .cfg("client.certReload=true");
    let _server = Flavor::Wazoo.start_with(opts).unwrap();
    let client = rustls_client(&pki.ca.pem(), &pki.alice);
    assert_eq!(
        server_certificate_cn(secure, Arc::clone(&client)).await,
        "CN=server,O=wazoo-test"
    );

    let renewed = pki.ca.issue("server-renewed", "server-renewed");
    // Replaced the way operators do: written aside, then renamed over.
    let tmp = dir.path().join("server.pem.new");
    std::fs::copy(&renewed.combined_pem, &tmp).unwrap();
    std::fs::rename(&tmp, &keystore).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let cn = server_certificate_cn(secure, Arc::clone(&client)).await;
        if cn == "CN=server-renewed,O=wazoo-test" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still served {cn} after the files changed"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

// ----- quorum TLS ---------------------------------------------------------

fn member_cfg_path(e: &WazooEnsemble, i: usize) -> PathBuf {
    e.data_dir(i).parent().unwrap().join("zoo.cfg")
}

/// The quorum port of member `i` (from its `server.N` line).
fn quorum_port(e: &WazooEnsemble, i: usize) -> u16 {
    let cfg = std::fs::read_to_string(member_cfg_path(e, i)).unwrap();
    let myid: u64 = std::fs::read_to_string(e.data_dir(i).join("myid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let line = cfg
        .lines()
        .find(|l| l.starts_with(&format!("server.{myid}=")))
        .unwrap();
    let addr = line.split_once('=').unwrap().1;
    addr.split(':').nth(1).unwrap().parse().unwrap()
}

/// Whatever a connection to `addr` that sends `bytes` gets back before it
/// is closed (within 15 s).
fn send_and_read_to_end(addr: SocketAddr, bytes: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    let _ = s.write_all(bytes);
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return got,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => {
                assert!(
                    !matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ),
                    "the quorum port kept a stranger's connection open"
                );
                return got;
            }
        }
    }
}

/// A wazoo ensemble's options for quorum TLS with `member`'s certificate
/// on every member and `pki`'s CA as the trust store.
fn tls_quorum_options(pki: &Pki, member: &Leaf) -> ServerOptions {
    common::ensemble_options(Flavor::Wazoo)
        .cfg("sslQuorum=true")
        .cfg(format!(
            "ssl.quorum.keyStore.location={}",
            member.p12.display()
        ))
        .cfg(format!("ssl.quorum.keyStore.password={PW}"))
        .cfg(format!(
            "ssl.quorum.trustStore.location={}",
            pki.ca.pem().display()
        ))
        .startup_timeout(Duration::from_secs(25))
}

/// A node created through member 0 is read on member 2.
async fn replicates(e: &WazooEnsemble, path: &str) {
    let a = common::connect(&e.addr(0).to_string()).await;
    a.create(
        path,
        b"replicated",
        &CreateMode::Persistent.with_acls(Acls::anyone_all()),
    )
    .await
    .unwrap();
    let c = common::connect(&e.addr(2).to_string()).await;
    c.sync(path).await.unwrap();
    assert_eq!(c.get_data(path).await.unwrap().0, b"replicated");
}

// ZooKeeper Administrator's Guide, "Quorum TLS": with sslQuorum=true the
// members elect and replicate over TLS; a member whose certificate the
// quorum trust store does not accept cannot join, and a stranger cannot
// complete a handshake on a quorum port.
#[tokio::test(flavor = "multi_thread")]
async fn a_tls_quorum_elects_replicates_and_keeps_strangers_out() {
    let pki = pki();
    let member = pki.ca.issue("member", "member");
    let opts = tls_quorum_options(&pki, &member);
    let mut e = WazooEnsemble::start(3, opts).expect("a TLS quorum elects a leader");
    replicates(&e, "/over-tls").await;

    // A stranger: a plain hello, then raw garbage, on a quorum port.
    let q = SocketAddr::from(([127, 0, 0, 1], quorum_port(&e, 0)));
    let mut hello = b"WZQ1".to_vec();
    hello.push(2);
    hello.extend_from_slice(&3u64.to_be_bytes());
    hello.extend_from_slice(&1u64.to_be_bytes());
    let got = send_and_read_to_end(q, &hello);
    assert!(
        got.is_empty() || got[0] == 0x15,
        "only a TLS alert: {got:?}"
    );
    // A stranger with a certificate from a CA the quorum does not trust.
    let rogue = rustls_client(&pki.ca.pem(), &pki.mallory);
    let tcp = tokio::net::TcpStream::connect(q).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let refused = match tokio_rustls::TlsConnector::from(rogue)
        .connect(name, tcp)
        .await
    {
        Err(_) => true,
        Ok(mut s) => {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            // TLS 1.3: the server refuses the certificate after the
            // client's side of the handshake is done; the first read says so.
            let _ = s.write_all(&hello).await;
            let mut b = [0u8; 16];
            matches!(
                tokio::time::timeout(Duration::from_secs(15), s.read(&mut b)).await,
                Ok(Ok(0) | Err(_))
            )
        }
    };
    assert!(
        refused,
        "a stranger's certificate completed a quorum handshake"
    );

    // A member whose own certificate the others do not trust cannot join.
    e.kill(2);
    let cfg_path = member_cfg_path(&e, 2);
    let cfg = std::fs::read_to_string(&cfg_path).unwrap();
    let cfg = cfg.replace(
        &format!("ssl.quorum.keyStore.location={}", member.p12.display()),
        &format!("ssl.quorum.keyStore.location={}", pki.mallory.p12.display()),
    );
    std::fs::write(&cfg_path, cfg).unwrap();
    let joined = e.restart(2);
    assert!(
        joined.is_err(),
        "a member with an untrusted certificate joined: {}",
        e.log_tail(2, 20)
    );
    assert!(
        e.log_tail(0, 400).contains("TLS handshake failed")
            || e.log_tail(1, 400).contains("TLS handshake failed"),
        "the members refused its handshakes: {}",
        e.log_tail(0, 40)
    );
    // The two trusted members go on.
    let a = common::connect(&e.addr(0).to_string()).await;
    a.set_data("/over-tls", b"still replicated", None)
        .await
        .unwrap();
    let b = common::connect(&e.addr(1).to_string()).await;
    b.sync("/over-tls").await.unwrap();
    assert_eq!(
        b.get_data("/over-tls").await.unwrap().0,
        b"still replicated"
    );
}

// ZooKeeper Administrator's Guide, "Quorum TLS" and "Cluster Options"
// (multiAddress.enabled): members with two addresses each, the first of
// which the other members cannot reach, and a certificate valid for the
// second addresses only (127.0.0.2 to 127.0.0.4, not 127.0.0.1): a dialer
// checks the certificate against the host of the address it reached, an
// acceptor against any host of the member's line, so the quorum forms
// over the second addresses, with hostname verification on.
#[tokio::test(flavor = "multi_thread")]
async fn a_tls_quorum_of_members_with_two_addresses_checks_the_reached_host() {
    let pki = pki();
    let member = pki
        .ca
        .issue_for("member", "member", &["127.0.0.2", "127.0.0.3", "127.0.0.4"]);
    let opts = tls_quorum_options(&pki, &member)
        .multi_address(MultiAddress::FirstUnreachable)
        .cfg("ssl.quorum.hostnameVerification=true");
    let e = WazooEnsemble::start(3, opts).expect("a TLS quorum over the second addresses");
    replicates(&e, "/two-addresses").await;
}

// ZooKeeper Administrator's Guide, "Quorum TLS" and admin.forceHttps:
// BCFKS stores serve the links between members and the AdminServer as
// PKCS12 ones do (the type named by ssl.quorum.*.type this time).
#[tokio::test(flavor = "multi_thread")]
async fn a_tls_quorum_and_its_admin_port_run_on_bcfks_stores() {
    let pki = pki();
    let member = pki.ca.issue("member", "member");
    let opts = common::ensemble_options(Flavor::Wazoo)
        .admin_server()
        .cfg("admin.forceHttps=true")
        .cfg("sslQuorum=true")
        .cfg(format!(
            "ssl.quorum.keyStore.location={}",
            bcfks_of(&member).display()
        ))
        .cfg(format!("ssl.quorum.keyStore.password={PW}"))
        .cfg("ssl.quorum.keyStore.type=BCFKS")
        .cfg(format!(
            "ssl.quorum.trustStore.location={}",
            pki.ca.trust_bcfks().display()
        ))
        .cfg(format!("ssl.quorum.trustStore.password={PW}"))
        .cfg("ssl.quorum.trustStore.type=BCFKS")
        // A member opens the stores a few times as it starts (its quorum
        // server and client sides, the AdminServer), each open some
        // 51 200-iteration PBKDF2 derivations: well under a second in a
        // release build, several in this debug one on a busy machine.
        .startup_timeout(Duration::from_secs(60));
    let e = WazooEnsemble::start(3, opts).expect("a TLS quorum on BCFKS stores elects a leader");
    replicates(&e, "/over-bcfks").await;

    let admin = e.admin_addr(1).expect("the AdminServer is on");
    let out = Command::new("curl")
        .args(["-sS", "-i", "--max-time", "10", "--cacert"])
        .arg(pki.ca.pem())
        .arg("--resolve")
        .arg(format!("localhost:{}:127.0.0.1", admin.port()))
        .arg(format!("https://localhost:{}/commands/ruok", admin.port()))
        .output()
        .expect("curl runs");
    let answer = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && answer.starts_with("HTTP/1.1 200"),
        "https with the BCFKS store's certificate: {answer}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
