//! EC private keys as the JDK's keytool writes them: PKCS#8 whose
//! ECPrivateKey leaves out its optional public key (RFC 5915, section 3).
//! ring, under rustls, refuses such a key, so a key on P-256 or P-384 (the
//! curves ring signs on, and Java's defaults) gets its public key derived
//! from the private scalar and is re-encoded as a PKCS#8 v1 key with the
//! ECPrivateKey's `publicKey` filled in. The same holds for a SEC1 key
//! (`BEGIN EC PRIVATE KEY`, as `openssl ec -no_public` writes it) in a PEM
//! file. A key on any other curve is refused with the curve's name.
//!
//! Errors say what is wrong with the key, never anything of its bytes.

use pkcs8::der::asn1::ObjectIdentifier;
use pkcs8::der::Decode;
use pkcs8::{EncodePrivateKey, PrivateKeyInfoRef};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use sec1::{EcParameters, EcPrivateKey};

/// id-ecPublicKey (RFC 5480).
const EC_PUBLIC_KEY: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.2.1");
const P256: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.3.1.7");
const P384: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.132.0.34");

/// Curves a key may name that rustls's ring provider cannot sign on.
const OTHER_CURVES: [(&str, &str); 7] = [
    ("1.3.132.0.35", "P-521 (secp521r1)"),
    ("1.3.132.0.33", "P-224 (secp224r1)"),
    ("1.2.840.10045.3.1.1", "P-192 (secp192r1)"),
    ("1.3.132.0.10", "secp256k1"),
    ("1.3.36.3.3.2.8.1.1.7", "brainpoolP256r1"),
    ("1.3.36.3.3.2.8.1.1.11", "brainpoolP384r1"),
    ("1.3.36.3.3.2.8.1.1.13", "brainpoolP512r1"),
];

/// `key` as rustls's ring provider takes it: an EC key on P-256 or P-384
/// without its public key comes back as PKCS#8 with it; every other key
/// that is not EC, or that has its public key, comes back unchanged.
pub(super) fn with_public_key(
    key: PrivateKeyDer<'static>,
) -> Result<PrivateKeyDer<'static>, String> {
    let (curve, ec) = match &key {
        PrivateKeyDer::Pkcs8(der) => {
            let info = PrivateKeyInfoRef::try_from(der.secret_pkcs8_der())
                .map_err(|e| format!("its PKCS#8 private key is malformed ({e})"))?;
            if info.algorithm.oid != EC_PUBLIC_KEY {
                return Ok(key);
            }
            let curve = info
                .algorithm
                .parameters_oid()
                .map_err(|_| "its EC private key does not name its curve".to_string())?;
            let ec = EcPrivateKey::from_der(info.private_key.as_bytes())
                .map_err(|e| format!("its EC private key is malformed ({e})"))?;
            (curve, ec)
        }
        PrivateKeyDer::Sec1(der) => {
            let ec = EcPrivateKey::from_der(der.secret_sec1_der())
                .map_err(|e| format!("its EC private key is malformed ({e})"))?;
            let Some(EcParameters::NamedCurve(curve)) = ec.parameters else {
                return Err("its EC private key does not name its curve".to_string());
            };
            (curve, ec)
        }
        _ => return Ok(key),
    };
    let pkcs8 = match curve {
        P256 | P384 if ec.public_key.is_some() => return Ok(key),
        P256 => p256::SecretKey::from_slice(ec.private_key)
            .map_err(|_| "its EC private key is not a P-256 private key".to_string())?
            .to_pkcs8_der(),
        P384 => p384::SecretKey::from_slice(ec.private_key)
            .map_err(|_| "its EC private key is not a P-384 private key".to_string())?
            .to_pkcs8_der(),
        other => return Err(unsupported_curve(&other)),
    }
    .map_err(|e| format!("its EC private key cannot be re-encoded ({e})"))?;
    Ok(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
        pkcs8.as_bytes().to_vec(),
    )))
}

fn unsupported_curve(oid: &ObjectIdentifier) -> String {
    let oid = oid.to_string();
    let name = OTHER_CURVES
        .iter()
        .find(|(o, _)| *o == oid)
        .map_or_else(|| format!("the curve {oid}"), |(_, name)| name.to_string());
    format!("its EC private key is on {name}, which wazoo does not take: use P-256 or P-384")
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::process::Command;
    use std::sync::Arc;

    use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
    use rustls::crypto::{ring, CryptoProvider};
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
    use rustls::{
        ClientConfig, ClientConnection, DigitallySignedStruct, ServerConfig, ServerConnection,
        SignatureScheme,
    };

    use super::super::bcfks::tests::{bcprov, run, PW};
    use super::super::{load_key_store, stored_key};
    use super::*;
    use crate::config::tls::{Store, StoreType};

    /// A `kind` key store in `dir` holding one EC key on `curve` (keytool's
    /// `-groupname`) with its self-signed certificate, both made by keytool.
    fn keytool_ec_store(dir: &Path, kind: StoreType, curve: &str) -> Store {
        let (name, ext) = match kind {
            StoreType::Jks => ("JKS", "jks"),
            StoreType::Pkcs12 => ("PKCS12", "p12"),
            StoreType::Bcfks => ("BCFKS", "bcfks"),
            StoreType::Pem => unreachable!("keytool writes no PEM key store"),
        };
        let location = dir.join(format!("{curve}.{ext}"));
        let mut cmd = Command::new("keytool");
        cmd.args(["-genkeypair", "-alias", "server", "-keyalg", "EC"])
            .args(["-groupname", curve, "-dname", "CN=server"])
            .args(["-storetype", name, "-storepass", PW, "-keypass", PW])
            .arg("-keystore")
            .arg(&location);
        if kind == StoreType::Bcfks {
            cmd.args(["-providerpath", bcprov()]).args([
                "-providerclass",
                "org.bouncycastle.jce.provider.BouncyCastleProvider",
            ]);
        }
        run(&mut cmd);
        store(dir, location, kind)
    }

    fn store(dir: &Path, location: std::path::PathBuf, kind: StoreType) -> Store {
        let pw = dir.join("store.pw");
        std::fs::write(&pw, PW).unwrap();
        Store {
            location,
            password: None,
            password_path: Some(pw),
            kind,
        }
    }

    /// The key as stored has no public key, and ring refuses it: what
    /// this module is for.
    fn assert_stored_without_public_key(store: &Store) {
        let (_, key) = stored_key(store, "ssl.keyStore").unwrap();
        let ec = match &key {
            PrivateKeyDer::Pkcs8(der) => {
                let info = PrivateKeyInfoRef::try_from(der.secret_pkcs8_der()).unwrap();
                EcPrivateKey::from_der(info.private_key.as_bytes()).unwrap()
            }
            PrivateKeyDer::Sec1(der) => EcPrivateKey::from_der(der.secret_sec1_der()).unwrap(),
            _ => panic!("{} holds no EC key", store.location.display()),
        };
        assert!(ec.public_key.is_none(), "{}", store.location.display());
        assert!(ring::sign::any_supported_type(&key).is_err());
    }

    /// Accepts `cert` alone, and checks the server's handshake signature
    /// against the public key in it.
    #[derive(Debug)]
    struct SignedBy {
        cert: CertificateDer<'static>,
        provider: Arc<CryptoProvider>,
    }

    impl ServerCertVerifier for SignedBy {
        fn verify_server_cert(
            &self,
            end_entity: &CertificateDer<'_>,
            _: &[CertificateDer<'_>],
            _: &ServerName<'_>,
            _: &[u8],
            _: UnixTime,
        ) -> Result<ServerCertVerified, rustls::Error> {
            if end_entity.as_ref() != self.cert.as_ref() {
                return Err(rustls::Error::General("another certificate".into()));
            }
            Ok(ServerCertVerified::assertion())
        }

        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls12_signature(
                message,
                cert,
                dss,
                &self.provider.signature_verification_algorithms,
            )
        }

        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls13_signature(
                message,
                cert,
                dss,
                &self.provider.signature_verification_algorithms,
            )
        }

        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.provider
                .signature_verification_algorithms
                .supported_schemes()
        }
    }

    /// A TLS handshake in memory with a server on the key store's chain
    /// and key; the client verifies the server's signature with the
    /// certificate's public key.
    fn handshake(store: &Store) {
        let (certs, key) = load_key_store(store, "ssl.keyStore").unwrap();
        let provider = Arc::new(ring::default_provider());
        let server = ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(certs.clone(), key)
            .unwrap();
        let verifier = SignedBy {
            cert: certs[0].clone(),
            provider: Arc::clone(&provider),
        };
        let client = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth();
        let name = ServerName::try_from("server").unwrap();
        let mut c = ClientConnection::new(Arc::new(client), name).unwrap();
        let mut s = ServerConnection::new(Arc::new(server)).unwrap();
        for _ in 0..10 {
            if !c.is_handshaking() && !s.is_handshaking() {
                return;
            }
            let mut wire = Vec::new();
            c.write_tls(&mut wire).unwrap();
            let mut rd = &wire[..];
            while !rd.is_empty() {
                s.read_tls(&mut rd).unwrap();
                s.process_new_packets().unwrap();
            }
            wire.clear();
            s.write_tls(&mut wire).unwrap();
            let mut rd = &wire[..];
            while !rd.is_empty() {
                c.read_tls(&mut rd).unwrap();
                c.process_new_packets().unwrap();
            }
        }
        panic!("the handshake did not finish");
    }

    // ZooKeeper Administrator's Guide, "Encryption, Authentication,
    // Authorization Options" (ssl.keyStore.*): an EC key keytool
    // generates (`-genkeypair -keyalg EC`) in a JKS, PKCS12 or BCFKS
    // store serves TLS, on P-256 and on P-384.
    #[test]
    fn keytool_ec_keys_serve_tls_from_every_store_type() {
        let dir = tempfile::tempdir().unwrap();
        for (kind, curve) in [
            (StoreType::Jks, "secp256r1"),
            (StoreType::Pkcs12, "secp256r1"),
            (StoreType::Bcfks, "secp256r1"),
            (StoreType::Pkcs12, "secp384r1"),
        ] {
            let sub = dir.path().join(format!("{kind:?}-{curve}"));
            std::fs::create_dir(&sub).unwrap();
            let store = keytool_ec_store(&sub, kind, curve);
            assert_stored_without_public_key(&store);
            handshake(&store);
        }
    }

    // A key on a curve ring cannot sign on is refused, by the curve's name.
    #[test]
    fn a_keytool_ec_key_on_p521_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let store = keytool_ec_store(dir.path(), StoreType::Pkcs12, "secp521r1");
        let err = load_key_store(&store, "ssl.keyStore")
            .unwrap_err()
            .to_string();
        let named = format!("the ssl.keyStore {}", store.location.display());
        assert!(
            err.contains(&named) && err.contains("P-521 (secp521r1)") && err.contains("P-256"),
            "{err}"
        );
    }

    /// openssl on `args`, in `dir`.
    fn openssl(dir: &Path, args: &[&str]) {
        run(Command::new("openssl").current_dir(dir).args(args));
    }

    // ZooKeeper's PEM key store: an EC key without its public key, as
    // SEC1 (`openssl ec -no_public`) or as PKCS#8 made from that
    // (`openssl pkcs8 -topk8 -nocrypt`), serves TLS the same.
    #[test]
    fn pem_ec_keys_without_their_public_key_serve_tls() {
        let dir = tempfile::tempdir().unwrap();
        for curve in ["prime256v1", "secp384r1"] {
            let d = dir.path().join(curve);
            std::fs::create_dir(&d).unwrap();
            openssl(
                &d,
                &[
                    "ecparam", "-name", curve, "-genkey", "-noout", "-out", "full.key",
                ],
            );
            let cert = d.join("cert.pem");
            openssl(
                &d,
                &[
                    "req",
                    "-new",
                    "-x509",
                    "-key",
                    "full.key",
                    "-subj",
                    "/CN=server",
                    "-days",
                    "2",
                    "-out",
                    "cert.pem",
                ],
            );
            openssl(
                &d,
                &["ec", "-in", "full.key", "-no_public", "-out", "sec1.key"],
            );
            openssl(
                &d,
                &[
                    "pkcs8",
                    "-topk8",
                    "-nocrypt",
                    "-in",
                    "sec1.key",
                    "-out",
                    "pkcs8.key",
                ],
            );
            for key in ["sec1.key", "pkcs8.key"] {
                let pem = d.join(format!("{key}.pem"));
                let mut bytes = std::fs::read(d.join(key)).unwrap();
                bytes.extend(std::fs::read(&cert).unwrap());
                std::fs::write(&pem, bytes).unwrap();
                let store = store(&d, pem, StoreType::Pem);
                assert_stored_without_public_key(&store);
                handshake(&store);
            }
        }
    }
}
