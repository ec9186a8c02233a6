//! BCFKS key stores, BouncyCastle's FIPS key store format, as the JDK's
//! keytool writes them with BouncyCastle's provider and ZooKeeper reads
//! them (`ssl.keyStore.type=BCFKS`, or a `.bcfks` file): private key
//! entries with their certificate chains, and certificate entries.
//!
//! The format (BouncyCastle's `BcFKSKeyStoreSpi` and its `ObjectStore`
//! ASN.1 classes), all DER:
//!
//! ```text
//! ObjectStore ::= SEQUENCE {
//!     storeData      EncryptedObjectStoreData (or a plain ObjectStoreData),
//!     integrityCheck PbkdMacIntegrityCheck }
//! EncryptedObjectStoreData ::= SEQUENCE {
//!     encryptionAlgorithm AlgorithmIdentifier (PBES2), encryptedContent OCTET STRING }
//! PbkdMacIntegrityCheck ::= SEQUENCE {
//!     macAlgorithm AlgorithmIdentifier (hmacWithSHA512),
//!     pbkdAlgorithm KeyDerivationFunc (PBKDF2 or scrypt), mac OCTET STRING }
//! ObjectStoreData ::= SEQUENCE {
//!     version INTEGER, integrityAlgorithm AlgorithmIdentifier,
//!     creationDate GeneralizedTime, lastModifiedDate GeneralizedTime,
//!     objectDataSequence SEQUENCE OF ObjectData, comment UTF8String OPTIONAL }
//! ObjectData ::= SEQUENCE {
//!     type INTEGER, identifier UTF8String, creationDate GeneralizedTime,
//!     lastModifiedDate GeneralizedTime, data OCTET STRING, comment UTF8String OPTIONAL }
//! ```
//!
//! An entry of type 0 is a certificate; types 1 and 3 are a private key:
//! `SEQUENCE { EncryptedPrivateKeyInfo, SEQUENCE OF Certificate }`; types 2
//! and 4 (secret keys) are not TLS material and are passed over. The store
//! and each private key are encrypted with PBES2: a PBKDF2 (HMAC-SHA512)
//! or scrypt key from the password, then AES-256-CCM or AES-256-KWP. Every
//! key derivation takes the password as PKCS#12 spells it (UTF-16BE and
//! two zero bytes) followed by its purpose spelled the same way
//! (`INTEGRITY_CHECK`, `STORE_ENCRYPTION`, `PRIVATE_KEY_ENCRYPTION`).
//! BouncyCastle's scrypt takes its block size `r` for the parallelization
//! `p` too (`SCrypt.generate(..., cost, blockSize, blockSize, ...)`), and
//! so does this reader, so that it opens the stores BouncyCastle writes.
//!
//! The file is an operator's input, read before anything in it is
//! trusted: the integrity check is verified (in constant time) before the
//! store is decrypted; DER lengths are checked against the file by the
//! `der` crate; and the work the file asks for is bounded: all its key
//! derivations together may take at most [`MAX_WORK`] PBKDF2 iterations
//! (an scrypt derivation counts `N·r·p`), and scrypt at most
//! [`MAX_SCRYPT_MEMORY`] bytes. A store past those bounds is refused by
//! name, as is one that does not parse, whose check does not match or that
//! uses an algorithm this reader does not know.

use aes_kw::KwpAes256;
use ccm::aead::Aead;
use ccm::consts::{U10, U11, U12, U13, U14, U16, U4, U6, U7, U8, U9};
use ccm::{Ccm, KeyInit};
use der::asn1::{AnyRef, ObjectIdentifier as Oid, OctetStringRef, Utf8StringRef};
use der::{Reader, SliceReader, Tag, Tagged};
use hmac::{Hmac, Mac};
use sha2::Sha512;

use super::JavaStore;

const PBES2: Oid = Oid::new_unwrap("1.2.840.113549.1.5.13");
const PBKDF2: Oid = Oid::new_unwrap("1.2.840.113549.1.5.12");
const SCRYPT: Oid = Oid::new_unwrap("1.3.6.1.4.1.11591.4.11");
const HMAC_SHA512: Oid = Oid::new_unwrap("1.2.840.113549.2.11");
const HMAC_SHA3_512: Oid = Oid::new_unwrap("2.16.840.1.101.3.4.2.16");
const AES256_CCM: Oid = Oid::new_unwrap("2.16.840.1.101.3.4.1.47");
const AES256_KWP: Oid = Oid::new_unwrap("2.16.840.1.101.3.4.1.48");

/// The most work one store's key derivations may ask for, in PBKDF2
/// iterations (an scrypt derivation counts `N·r·p`). keytool's stores ask
/// for 51 200 per derivation, three derivations for a store with one key.
pub const MAX_WORK: u64 = 8_000_000;
/// The most memory one scrypt derivation may take (`128·r·(N + p)`
/// bytes, `p` being `r`).
pub const MAX_SCRYPT_MEMORY: u64 = 64 << 20;
/// The longest MAC key a PBKDF2 or scrypt parameter set may ask for.
const MAX_MAC_KEY: u64 = 128;

/// Why a store is refused.
struct Fail(String);

impl From<der::Error> for Fail {
    fn from(e: der::Error) -> Self {
        Fail(format!("not well-formed DER ({e})"))
    }
}

fn fail<T>(why: impl Into<String>) -> Result<T, Fail> {
    Err(Fail(why.into()))
}

/// Reads a BCFKS store: checks its integrity with `password`, decrypts it
/// and every private key in it with the same password (as ZooKeeper opens
/// them).
pub fn read(bytes: &[u8], password: &str) -> Result<JavaStore, String> {
    read_store(bytes, password, MAX_WORK).map_err(|Fail(e)| e)
}

/// An AlgorithmIdentifier: its OID and its parameters, if any.
struct AlgId<'a> {
    oid: Oid,
    params: Option<AnyRef<'a>>,
}

fn alg_id<'a>(r: &mut SliceReader<'a>) -> Result<AlgId<'a>, Fail> {
    r.sequence(|r| {
        let oid = r.decode()?;
        let params = if r.is_finished() {
            None
        } else {
            Some(r.decode()?)
        };
        Ok(AlgId { oid, params })
    })
}

impl AlgId<'_> {
    /// Whether this is `oid` with no parameters, or NULL ones (as the
    /// HMAC algorithms have them).
    fn is(&self, oid: Oid) -> bool {
        self.oid == oid && self.params.is_none_or(|p| p.is_null())
    }
}

fn octets<'a>(r: &mut SliceReader<'a>) -> Result<&'a [u8], Fail> {
    Ok(r.decode::<&'a OctetStringRef>()?.as_bytes())
}

/// Skips an element, which must have tag `tag`.
fn skip(r: &mut SliceReader<'_>, tag: Tag) -> Result<(), Fail> {
    let any: AnyRef<'_> = r.decode()?;
    any.tag().assert_eq(tag)?;
    Ok(())
}

/// Skips an optional trailing comment.
fn skip_comment(r: &mut SliceReader<'_>) -> Result<(), Fail> {
    if !r.is_finished() {
        r.decode::<Utf8StringRef<'_>>()?;
    }
    Ok(())
}

/// `s` as BouncyCastle's `PKCS12PasswordToBytes` spells it: UTF-16BE and
/// two zero bytes, nothing for the empty string.
fn pkcs12_bytes(s: &str) -> Vec<u8> {
    if s.is_empty() {
        return Vec::new();
    }
    let mut b: Vec<u8> = s.encode_utf16().flat_map(u16::to_be_bytes).collect();
    b.extend([0, 0]);
    b
}

/// What a reader of one store is allowed to spend, and the password.
struct Opener {
    pw: Vec<u8>,
    work_left: u64,
}

/// [`read`], with `work` to spend on key derivations.
fn read_store(bytes: &[u8], password: &str, work: u64) -> Result<JavaStore, Fail> {
    let mut opener = Opener {
        pw: pkcs12_bytes(password),
        work_left: work,
    };
    let mut r = SliceReader::new(bytes)?;
    let (store_data, check) = r
        .sequence(|r| {
            let store_data = r.tlv_bytes()?;
            let check: AnyRef<'_> = r.decode()?;
            Ok::<_, Fail>((store_data, check))
        })
        .map_err(|Fail(e)| Fail(format!("not a BCFKS store: {e}")))?;
    if !r.is_finished() {
        return fail(format!(
            "{} bytes after the store",
            u32::from(r.remaining_len())
        ));
    }
    if check.tag() != Tag::Sequence {
        return fail(
            "its integrity check is a signature, not a password's HMAC (wazoo reads password-protected BCFKS stores, as ZooKeeper does)",
        );
    }
    let (mac_alg, kdf, mac) = check.sequence(|r| {
        let mac_alg = alg_id(r)?;
        let kdf = alg_id(r)?;
        let mac = octets(r)?;
        Ok::<_, Fail>((mac_alg, kdf, mac))
    })?;
    if mac_alg.oid == HMAC_SHA3_512 {
        return fail(
            "its integrity check is HMAC-SHA3-512 (HMAC-SHA512, keytool's default, is read)",
        );
    }
    if !mac_alg.is(HMAC_SHA512) {
        return fail(format!(
            "its integrity check is {} (HMAC-SHA512 is read)",
            mac_alg.oid
        ));
    }
    // The integrity check first: nothing in the store is looked at before
    // the password's HMAC over it matches.
    let key = opener.derive(&kdf, "INTEGRITY_CHECK", None)?;
    let mut hmac = <Hmac<Sha512> as KeyInit>::new_from_slice(&key)
        .map_err(|_| Fail("its HMAC key has an unusable length".into()))?;
    hmac.update(store_data);
    if hmac.verify_slice(mac).is_err() {
        return fail(
            "the password does not open it, or it is damaged (its HMAC-SHA512 integrity check does not match)",
        );
    }

    let data = SliceReader::new(store_data)?.decode::<AnyRef<'_>>()?;
    let plain = data.sequence(|r| {
        if Tag::peek(r)? == Tag::Integer {
            // An ObjectStoreData stored in the clear.
            return Ok::<_, Fail>(None);
        }
        let alg = alg_id(r)?;
        let content = octets(r)?;
        Ok(Some((alg, content)))
    })?;
    let decrypted;
    let object_store_data = match plain {
        None => store_data,
        Some((alg, content)) => {
            decrypted = opener.decrypt(&alg, "STORE_ENCRYPTION", content)?;
            &decrypted
        }
    };
    opener.entries(object_store_data, mac_alg.oid)
}

impl Opener {
    /// The entries of an ObjectStoreData.
    fn entries(&mut self, der: &[u8], integrity: Oid) -> Result<JavaStore, Fail> {
        let mut r = SliceReader::new(der)?;
        let (version, alg, objects) = r.sequence(|r| {
            let version: u64 = r.decode()?;
            let alg = alg_id(r)?;
            skip(r, Tag::GeneralizedTime)?;
            skip(r, Tag::GeneralizedTime)?;
            let objects: AnyRef<'_> = r.decode()?;
            skip_comment(r)?;
            Ok::<_, Fail>((version, alg, objects))
        })?;
        r.finish()?;
        if version != 1 {
            return fail(format!("its store data is version {version} (1 is read)"));
        }
        if !alg.is(integrity) {
            return fail("its store data names another integrity algorithm than its check");
        }
        let mut store = JavaStore::default();
        objects.sequence(|r| {
            let mut i = 0;
            while !r.is_finished() {
                self.entry(r, &mut store)
                    .map_err(|Fail(e)| Fail(format!("entry {i}: {e}")))?;
                i += 1;
            }
            Ok::<_, Fail>(())
        })?;
        Ok(store)
    }

    /// One ObjectData, added to `store`.
    fn entry(&mut self, r: &mut SliceReader<'_>, store: &mut JavaStore) -> Result<(), Fail> {
        let (kind, data) = r.sequence(|r| {
            let kind: u64 = r.decode()?;
            r.decode::<Utf8StringRef<'_>>()?; // the alias
            skip(r, Tag::GeneralizedTime)?;
            skip(r, Tag::GeneralizedTime)?;
            let data = octets(r)?;
            skip_comment(r)?;
            Ok::<_, Fail>((kind, data))
        })?;
        match kind {
            0 => {
                let mut c = SliceReader::new(data)?;
                let cert = c.tlv_bytes()?;
                c.finish()?;
                store.trusted.push(cert.to_vec());
            }
            1 | 3 => {
                let mut k = SliceReader::new(data)?;
                let (alg, encrypted, chain) = k.sequence(|r| {
                    let (alg, encrypted) = r.sequence(|r| {
                        let alg = alg_id(r)?;
                        let encrypted = octets(r)?;
                        Ok::<_, Fail>((alg, encrypted))
                    })?;
                    let chain = r.sequence(|r| {
                        let mut chain = Vec::new();
                        while !r.is_finished() {
                            chain.push(r.tlv_bytes()?.to_vec());
                        }
                        Ok::<_, Fail>(chain)
                    })?;
                    Ok::<_, Fail>((alg, encrypted, chain))
                })?;
                k.finish()?;
                let key = self
                    .decrypt(&alg, "PRIVATE_KEY_ENCRYPTION", encrypted)
                    .map_err(|Fail(e)| Fail(format!("its private key: {e}")))?;
                store.keys.push((key, chain));
            }
            2 | 4 => {} // a secret key: nothing TLS uses
            t => return fail(format!("type {t} (0 to 4 are read)")),
        }
        Ok(())
    }

    /// Data encrypted with PBES2 (`alg`) under a key derived for `purpose`.
    fn decrypt(&mut self, alg: &AlgId<'_>, purpose: &str, data: &[u8]) -> Result<Vec<u8>, Fail> {
        if alg.oid != PBES2 {
            return fail(format!("encrypted with {} (PBES2 is read)", alg.oid));
        }
        let params = alg
            .params
            .ok_or_else(|| Fail("PBES2 without its parameters".into()))?;
        let (kdf, scheme) = params.sequence(|r| {
            let kdf = alg_id(r)?;
            let scheme = alg_id(r)?;
            Ok::<_, Fail>((kdf, scheme))
        })?;
        let ccm = match scheme.oid {
            AES256_CCM => {
                let p = scheme
                    .params
                    .ok_or_else(|| Fail("AES-CCM without its parameters".into()))?;
                Some(p.sequence(|r| {
                    let nonce = octets(r)?;
                    let tag_len: u64 = if r.is_finished() { 12 } else { r.decode()? };
                    Ok::<_, Fail>((nonce, tag_len))
                })?)
            }
            AES256_KWP => None,
            other => {
                return fail(format!(
                    "encrypted with {other} (AES-256-CCM and AES-256-KWP are read)"
                ))
            }
        };
        let key: [u8; 32] = self
            .derive(&kdf, purpose, Some(32))?
            .try_into()
            .map_err(|_| Fail("its AES-256 key is not 32 bytes long".into()))?;
        let plain = match ccm {
            Some((nonce, tag_len)) => ccm_open(&key, nonce, tag_len, data)?,
            None => {
                let mut out = vec![0; data.len().saturating_sub(8)];
                let n = KwpAes256::new(&key.into())
                    .unwrap_key(data, &mut out)
                    .map_err(|_| Fail("it does not decrypt with the password (AES-KWP)".into()))?
                    .len();
                out.truncate(n);
                out
            }
        };
        Ok(plain)
    }

    /// A key for `purpose` from the password, as `kdf` says; `default_len`
    /// when `kdf` names no length.
    fn derive(
        &mut self,
        kdf: &AlgId<'_>,
        purpose: &str,
        default_len: Option<u64>,
    ) -> Result<Vec<u8>, Fail> {
        let input = [self.pw.as_slice(), &pkcs12_bytes(purpose)].concat();
        let params = kdf
            .params
            .ok_or_else(|| Fail("a key derivation without its parameters".into()))?;
        let len = |given: Option<u64>| -> Result<usize, Fail> {
            let len = given.or(default_len).ok_or_else(|| {
                Fail("a key derivation that names no key length for the HMAC".into())
            })?;
            if len == 0 || len > MAX_MAC_KEY || default_len.is_some_and(|d| d != len) {
                return fail(format!("a derived key of {len} bytes"));
            }
            Ok(len as usize)
        };
        match kdf.oid {
            PBKDF2 => {
                let (salt, iterations, key_len, prf) = params.sequence(|r| {
                    if Tag::peek(r)? != Tag::OctetString {
                        return fail(
                            "PBKDF2 with a salt from another source (an octet string is read)",
                        );
                    }
                    let salt = octets(r)?;
                    let iterations: u64 = r.decode()?;
                    let key_len: Option<u64> = if Tag::peek(r).ok() == Some(Tag::Integer) {
                        Some(r.decode()?)
                    } else {
                        None
                    };
                    let prf = if r.is_finished() {
                        None
                    } else {
                        Some(alg_id(r)?)
                    };
                    Ok::<_, Fail>((salt, iterations, key_len, prf))
                })?;
                match prf {
                    Some(p) if p.is(HMAC_SHA512) => {}
                    None => return fail("PBKDF2 with HMAC-SHA1 (BCFKS uses HMAC-SHA512)"),
                    Some(p) => return fail(format!("PBKDF2 with {} (HMAC-SHA512 is read)", p.oid)),
                }
                if iterations == 0 {
                    return fail("PBKDF2 with 0 iterations");
                }
                self.spend(iterations, "PBKDF2 iterations")?;
                let mut out = vec![0; len(key_len)?];
                pbkdf2::pbkdf2_hmac::<Sha512>(&input, salt, iterations as u32, &mut out);
                Ok(out)
            }
            SCRYPT => {
                let (salt, n, r, key_len) = params.sequence(|r| {
                    let salt = octets(r)?;
                    let n: u64 = r.decode()?;
                    let block: u64 = r.decode()?;
                    let _parallel: u64 = r.decode()?; // unused: see the module docs
                    let key_len: Option<u64> = if r.is_finished() {
                        None
                    } else {
                        Some(r.decode()?)
                    };
                    Ok::<_, Fail>((salt, n, block, key_len))
                })?;
                if n < 2 || !n.is_power_of_two() || r == 0 {
                    return fail(format!("scrypt with cost {n} and block size {r}"));
                }
                // scrypt's N blocks of 128·r bytes, and its p (= r) lanes.
                let memory = n.saturating_add(r).saturating_mul(r).saturating_mul(128);
                if memory > MAX_SCRYPT_MEMORY {
                    return fail(format!(
                        "scrypt with cost {n} and block size {r} needs {memory} bytes; wazoo allows at most {MAX_SCRYPT_MEMORY}"
                    ));
                }
                self.spend(n.saturating_mul(r).saturating_mul(r), "scrypt work (N·r·p)")?;
                let params = scrypt::Params::new(n.trailing_zeros() as u8, r as u32, r as u32)
                    .map_err(|_| Fail(format!("scrypt with cost {n} and block size {r}")))?;
                let mut out = vec![0; len(key_len)?];
                scrypt::scrypt(&input, salt, &params, &mut out)
                    .map_err(|_| Fail("scrypt refused its key length".into()))?;
                Ok(out)
            }
            other => fail(format!(
                "a key derivation by {other} (PBKDF2 and scrypt are read)"
            )),
        }
    }

    /// Takes `work` from what the store may still ask for.
    fn spend(&mut self, work: u64, what: &str) -> Result<(), Fail> {
        if work > self.work_left {
            return fail(format!(
                "its key derivations ask for more {what} than wazoo allows for a store ({MAX_WORK} PBKDF2 iterations in all)"
            ));
        }
        self.work_left -= work;
        Ok(())
    }
}

/// Opens AES-256-CCM `data` (ciphertext and tag) with a `nonce` of 7 to
/// 13 bytes and a tag of `tag_len` bytes (4 to 16, even).
fn ccm_open(key: &[u8; 32], nonce: &[u8], tag_len: u64, data: &[u8]) -> Result<Vec<u8>, Fail> {
    fn open<M, N>(key: &[u8; 32], nonce: &[u8], data: &[u8]) -> Result<Vec<u8>, Fail>
    where
        M: ccm::aead::array::ArraySize + ccm::TagSize,
        N: ccm::aead::array::ArraySize + ccm::NonceSize,
    {
        let cipher = Ccm::<aes::Aes256, M, N>::new(&(*key).into());
        let nonce = ccm::Nonce::<N>::try_from(nonce)
            .map_err(|_| Fail("AES-CCM with a nonce of the wrong length".into()))?;
        cipher.decrypt(&nonce, data).map_err(|_| {
            Fail("it does not decrypt with the password (its AES-CCM tag does not match)".into())
        })
    }
    macro_rules! by_tag {
        ($n:ty) => {
            match tag_len {
                4 => open::<U4, $n>(key, nonce, data),
                6 => open::<U6, $n>(key, nonce, data),
                8 => open::<U8, $n>(key, nonce, data),
                10 => open::<U10, $n>(key, nonce, data),
                12 => open::<U12, $n>(key, nonce, data),
                14 => open::<U14, $n>(key, nonce, data),
                16 => open::<U16, $n>(key, nonce, data),
                t => fail(format!("AES-CCM with a {t}-byte tag")),
            }
        };
    }
    match nonce.len() {
        7 => by_tag!(U7),
        8 => by_tag!(U8),
        9 => by_tag!(U9),
        10 => by_tag!(U10),
        11 => by_tag!(U11),
        12 => by_tag!(U12),
        13 => by_tag!(U13),
        n => fail(format!("AES-CCM with a {n}-byte nonce")),
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use std::path::{Path, PathBuf};
    use std::process::Command;

    // ----- stores written here, with cheap key derivations ---------------

    fn tlv(tag: u8, contents: &[u8]) -> Vec<u8> {
        let mut v = vec![tag];
        let n = contents.len();
        if n < 0x80 {
            v.push(n as u8);
        } else {
            let len = (n as u32).to_be_bytes();
            let skip = len.iter().take_while(|&&b| b == 0).count();
            v.push(0x80 | (4 - skip) as u8);
            v.extend(&len[skip..]);
        }
        v.extend(contents);
        v
    }

    fn seq(parts: &[Vec<u8>]) -> Vec<u8> {
        tlv(0x30, &parts.concat())
    }

    fn oid(o: &Oid) -> Vec<u8> {
        tlv(0x06, o.as_bytes())
    }

    fn int(n: u64) -> Vec<u8> {
        let b = n.to_be_bytes();
        let mut skip = b.iter().take_while(|&&x| x == 0).count().min(7);
        if b[skip] & 0x80 != 0 {
            skip -= 1; // a leading zero keeps it positive
        }
        tlv(0x02, &b[skip..])
    }

    fn octs(b: &[u8]) -> Vec<u8> {
        tlv(0x04, b)
    }

    fn time() -> Vec<u8> {
        tlv(0x18, b"20260101000000Z")
    }

    fn hmac_sha512() -> Vec<u8> {
        seq(&[oid(&HMAC_SHA512), tlv(0x05, &[])])
    }

    #[derive(Clone, Copy)]
    enum Kdf {
        Pbkdf2(u64),
        Scrypt { n: u64, r: u64 },
    }

    #[derive(Clone, Copy)]
    enum Enc {
        Ccm,
        Kwp,
    }

    /// A KeyDerivationFunc and the key it gives for `purpose`, computed
    /// here with the crates directly.
    fn kdf(k: Kdf, pw: &str, purpose: &str, len: usize) -> (Vec<u8>, Vec<u8>) {
        let salt = [9u8; 16];
        let input = [pkcs12_bytes(pw), pkcs12_bytes(purpose)].concat();
        let mut key = vec![0; len];
        let alg = match k {
            Kdf::Pbkdf2(iterations) => {
                pbkdf2::pbkdf2_hmac::<Sha512>(&input, &salt, iterations as u32, &mut key);
                seq(&[
                    oid(&PBKDF2),
                    seq(&[octs(&salt), int(iterations), int(len as u64), hmac_sha512()]),
                ])
            }
            Kdf::Scrypt { n, r } => {
                let p = scrypt::Params::new(n.trailing_zeros() as u8, r as u32, r as u32).unwrap();
                scrypt::scrypt(&input, &salt, &p, &mut key).unwrap();
                seq(&[
                    oid(&SCRYPT),
                    seq(&[octs(&salt), int(n), int(r), int(1), int(len as u64)]),
                ])
            }
        };
        (alg, key)
    }

    /// A PBES2 AlgorithmIdentifier and `plain` encrypted under it.
    fn encrypt(k: Kdf, e: Enc, pw: &str, purpose: &str, plain: &[u8]) -> (Vec<u8>, Vec<u8>) {
        let (kdf_alg, key) = kdf(k, pw, purpose, 32);
        let key: [u8; 32] = key.try_into().unwrap();
        let (scheme, ct) = match e {
            Enc::Ccm => {
                let nonce = [3u8; 12];
                let c = Ccm::<aes::Aes256, U8, U12>::new(&key.into());
                let ct = c.encrypt(&nonce.into(), plain).unwrap();
                (seq(&[oid(&AES256_CCM), seq(&[octs(&nonce), int(8)])]), ct)
            }
            Enc::Kwp => {
                let mut buf = vec![0; plain.len().div_ceil(8) * 8 + 8];
                let n = KwpAes256::new(&key.into())
                    .wrap_key(plain, &mut buf)
                    .unwrap()
                    .len();
                buf.truncate(n);
                (seq(&[oid(&AES256_KWP)]), buf)
            }
        };
        (seq(&[oid(&PBES2), seq(&[kdf_alg, scheme])]), ct)
    }

    fn object(kind: u64, data: &[u8]) -> Vec<u8> {
        seq(&[int(kind), tlv(0x0c, b"alias"), time(), time(), octs(data)])
    }

    fn cert_entry(cert: &[u8]) -> Vec<u8> {
        object(0, cert)
    }

    fn key_entry(k: Kdf, e: Enc, pw: &str, pkcs8: &[u8], chain: &[Vec<u8>]) -> Vec<u8> {
        let (alg, ct) = encrypt(k, e, pw, "PRIVATE_KEY_ENCRYPTION", pkcs8);
        object(1, &seq(&[seq(&[alg, octs(&ct)]), seq(chain)]))
    }

    /// A store as BouncyCastle writes it, of `entries`.
    fn store(k: Kdf, e: Enc, pw: &str, entries: &[Vec<u8>]) -> Vec<u8> {
        let data = seq(&[int(1), hmac_sha512(), time(), time(), seq(entries)]);
        let (alg, ct) = encrypt(k, e, pw, "STORE_ENCRYPTION", &data);
        let sealed = seq(&[alg, octs(&ct)]);
        let (mac_kdf, mac_key) = kdf(k, pw, "INTEGRITY_CHECK", 64);
        let mut mac = <Hmac<Sha512> as KeyInit>::new_from_slice(&mac_key).unwrap();
        mac.update(&sealed);
        let tag = mac.finalize().into_bytes();
        seq(&[sealed, seq(&[hmac_sha512(), mac_kdf, octs(&tag)])])
    }

    /// Stand-ins for DER certificates and a PKCS#8 key (the parser takes
    /// them as elements; rustls reads them later).
    fn sample(n: u8, len: usize) -> Vec<u8> {
        tlv(0x30, &vec![n; len])
    }

    fn sample_store(k: Kdf, e: Enc, pw: &str) -> Vec<u8> {
        let chain = vec![sample(1, 300), sample(2, 20)];
        store(
            k,
            e,
            pw,
            &[
                key_entry(k, e, pw, &sample(7, 130), &chain),
                cert_entry(&sample(3, 40)),
                object(2, b"a secret key, passed over"),
            ],
        )
    }

    // Every encryption and key derivation BouncyCastle writes: the keys
    // and certificates come back with the password, and nothing without.
    #[test]
    fn stores_read_back_with_the_right_password_only() {
        for k in [Kdf::Pbkdf2(3), Kdf::Scrypt { n: 4, r: 2 }] {
            for e in [Enc::Ccm, Enc::Kwp] {
                let b = sample_store(k, e, "pässword");
                let s = read(&b, "pässword").unwrap();
                assert_eq!(
                    s.keys,
                    vec![(sample(7, 130), vec![sample(1, 300), sample(2, 20)])]
                );
                assert_eq!(s.trusted, vec![sample(3, 40)]);
                let err = read(&b, "password").unwrap_err();
                assert!(err.contains("password does not open it"), "{err}");
            }
        }
        // The empty password is spelled as no bytes at all.
        let b = sample_store(Kdf::Pbkdf2(1), Enc::Ccm, "");
        assert_eq!(read(&b, "").unwrap().keys.len(), 1);
    }

    /// Every prefix and every one-byte change of a store is an error,
    /// never a panic or a huge allocation: the HMAC covers the store data,
    /// and a change in the check itself changes its key or its value.
    #[test]
    fn truncated_or_damaged_stores_are_errors() {
        for e in [Enc::Ccm, Enc::Kwp] {
            let b = sample_store(Kdf::Pbkdf2(1), e, "pw");
            for n in 0..b.len() {
                assert!(read(&b[..n], "pw").is_err(), "prefix of {n} bytes");
            }
            for i in 0..b.len() {
                for flip in [0x01, 0x80, 0xff] {
                    let mut bad = b.clone();
                    bad[i] ^= flip;
                    assert!(read(&bad, "pw").is_err(), "byte {i} ^ {flip:#x}");
                }
            }
            let mut longer = b.clone();
            longer.push(0);
            let err = read(&longer, "pw").unwrap_err();
            assert!(err.contains("after the store"), "{err}");
        }
    }

    /// `b` with its integrity check replaced by `check`.
    fn with_check(b: &[u8], check: Vec<u8>) -> Vec<u8> {
        let mut r = SliceReader::new(b).unwrap();
        let sealed = r
            .sequence(|r| {
                let sealed = r.tlv_bytes()?;
                r.tlv_bytes()?;
                Ok::<_, der::Error>(sealed)
            })
            .unwrap();
        seq(&[sealed.to_vec(), check])
    }

    // A store may not make its reader spin or allocate without bound:
    // past the bounds it is refused by name, before the work is done.
    #[test]
    fn costly_key_derivations_are_refused_by_name() {
        let b = sample_store(Kdf::Pbkdf2(1), Enc::Ccm, "pw");
        let pbkdf2 = seq(&[
            oid(&PBKDF2),
            seq(&[octs(&[1; 16]), int(MAX_WORK + 1), int(64), hmac_sha512()]),
        ]);
        let err = read(
            &with_check(&b, seq(&[hmac_sha512(), pbkdf2, octs(&[0; 64])])),
            "pw",
        )
        .unwrap_err();
        assert!(err.contains("PBKDF2 iterations"), "{err}");
        // 128·r·(N + p) = 128 MiB and 8 KiB: refused before scrypt
        // allocates it.
        let scrypt = seq(&[
            oid(&SCRYPT),
            seq(&[octs(&[1; 16]), int(1 << 17), int(8), int(1), int(64)]),
        ]);
        let err = read(
            &with_check(&b, seq(&[hmac_sha512(), scrypt, octs(&[0; 64])])),
            "pw",
        )
        .unwrap_err();
        assert!(
            err.contains("scrypt") && err.contains("134225920 bytes"),
            "{err}"
        );
        // A small N with a large block size: its p = r lanes are what cost.
        let lanes = seq(&[
            oid(&SCRYPT),
            seq(&[octs(&[1; 16]), int(2), int(2000), int(1), int(64)]),
        ]);
        let err = read(
            &with_check(&b, seq(&[hmac_sha512(), lanes, octs(&[0; 64])])),
            "pw",
        )
        .unwrap_err();
        assert!(err.contains("512512000 bytes"), "{err}");
        // The budget is for the whole store: its three derivations of 5
        // iterations fit in 15, not in 14.
        let b = sample_store(Kdf::Pbkdf2(5), Enc::Ccm, "pw");
        assert!(read_store(&b, "pw", 15).is_ok());
        let Err(Fail(err)) = read_store(&b, "pw", 14) else {
            panic!("a budget of 14 opened a store that needs 15")
        };
        assert!(
            err.contains("entry 0") && err.contains("PBKDF2 iterations"),
            "{err}"
        );
    }

    #[test]
    fn algorithms_it_does_not_read_are_named() {
        let b = sample_store(Kdf::Pbkdf2(1), Enc::Ccm, "pw");
        // The signature form of the integrity check: [0], not a SEQUENCE.
        let err = read(&with_check(&b, tlv(0xa0, &[])), "pw").unwrap_err();
        assert!(err.contains("signature"), "{err}");
        let (mac_kdf, _) = kdf(Kdf::Pbkdf2(1), "pw", "INTEGRITY_CHECK", 64);
        let sha3 = seq(&[oid(&HMAC_SHA3_512), tlv(0x05, &[])]);
        let err = read(&with_check(&b, seq(&[sha3, mac_kdf, octs(&[0; 64])])), "pw").unwrap_err();
        assert!(err.contains("HMAC-SHA3-512"), "{err}");
        let sha1_prf = seq(&[oid(&PBKDF2), seq(&[octs(&[1; 16]), int(1), int(64)])]);
        let err = read(
            &with_check(&b, seq(&[hmac_sha512(), sha1_prf, octs(&[0; 64])])),
            "pw",
        )
        .unwrap_err();
        assert!(err.contains("HMAC-SHA1"), "{err}");
    }

    // ----- stores made by the JDK's keytool with BouncyCastle's provider ---

    const BCPROV: &str = "/usr/share/java/bcprov.jar";
    pub(in crate::tls) const PW: &str = "changeit";

    pub(in crate::tls) fn bcprov() -> &'static str {
        assert!(
            Path::new(BCPROV).is_file(),
            "{BCPROV} is missing: install the Debian package libbcprov-java (scripts/setup.sh does); \
             BouncyCastle's provider is what writes BCFKS stores"
        );
        BCPROV
    }

    pub(in crate::tls) fn run(cmd: &mut Command) -> Vec<u8> {
        let out = cmd.output().unwrap_or_else(|e| {
            panic!(
                "{cmd:?} cannot run ({e}): install a Java runtime with keytool \
                 (the Debian package zookeeper brings one; scripts/setup.sh installs it)"
            )
        });
        assert!(
            out.status.success(),
            "{cmd:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    }

    /// keytool on a BCFKS store at `store`, with BouncyCastle's provider.
    fn keytool(store: &Path, args: &[&str]) -> Vec<u8> {
        run(Command::new("keytool")
            .args(args)
            .arg("-keystore")
            .arg(store)
            .args(["-storepass", PW, "-storetype", "BCFKS", "-providerpath"])
            .arg(bcprov())
            .args([
                "-providerclass",
                "org.bouncycastle.jce.provider.BouncyCastleProvider",
            ]))
    }

    /// A key store with two RSA keys (self-signed), and a trust store with
    /// the first one's certificate, made by keytool in `dir`; and that
    /// certificate (DER). (keytool's EC keys, in BCFKS and the other store
    /// types, are tested in tls/ec.rs.)
    fn keytool_stores(dir: &Path) -> (PathBuf, PathBuf, Vec<u8>) {
        let ks = dir.join("server.bcfks");
        let ts = dir.join("trust.bcfks");
        for (alias, alg) in [("server", "RSA"), ("second", "RSA")] {
            let dname = format!("CN={alias}");
            let args = [
                "-genkeypair",
                "-alias",
                alias,
                "-keyalg",
                alg,
                "-keypass",
                PW,
            ];
            keytool(&ks, &[&args[..], &["-dname", &dname]].concat());
        }
        let pem = keytool(&ks, &["-exportcert", "-rfc", "-alias", "server"]);
        let pem_path = dir.join("server.pem");
        std::fs::write(&pem_path, &pem).unwrap();
        keytool(
            &ts,
            &[
                "-importcert",
                "-noprompt",
                "-alias",
                "ca",
                "-file",
                pem_path.to_str().unwrap(),
            ],
        );
        let cert = rustls::pki_types::CertificateDer::from_pem_slice(&pem).unwrap();
        (ks, ts, cert.to_vec())
    }

    /// The keys of `store` are PKCS#8 keys rustls can sign with, each
    /// with a one-certificate chain, one of them `cert`.
    fn assert_usable_keys(store: &JavaStore, n: usize, cert: &[u8]) {
        use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
        assert_eq!(store.keys.len(), n);
        for (key, chain) in &store.keys {
            assert_eq!(chain.len(), 1);
            let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.clone()));
            rustls::crypto::ring::sign::any_supported_type(&key).unwrap();
        }
        assert!(store.keys.iter().any(|(_, chain)| chain[0] == cert));
    }

    use rustls::pki_types::pem::PemObject;

    // keytool's BCFKS stores (PBKDF2 with HMAC-SHA512, AES-256-CCM, an
    // HMAC-SHA512 check): the keys and chains of a key store, the
    // certificate of a trust store; a wrong password and a flipped byte
    // are errors that say so.
    #[test]
    fn keytool_made_stores_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let (ks, ts, cert) = keytool_stores(dir.path());
        let bytes = std::fs::read(&ks).unwrap();
        let store = read(&bytes, PW).unwrap();
        assert_usable_keys(&store, 2, &cert);
        assert!(store.trusted.is_empty());
        let trust = read(&std::fs::read(&ts).unwrap(), PW).unwrap();
        assert_eq!(trust.trusted, vec![cert]);
        assert!(trust.keys.is_empty());

        let err = read(&bytes, "changeme").unwrap_err();
        assert!(err.contains("password does not open it"), "{err}");
        for at in [bytes.len() / 3, bytes.len() / 2, bytes.len() - 1] {
            let mut bad = bytes.clone();
            bad[at] ^= 0x01;
            let err = read(&bad, PW).unwrap_err();
            assert!(err.contains("does not match"), "byte {at}: {err}");
        }
    }

    // Where the member loads its stores: a wrong password, or a damaged
    // file, is an error that names the key, the file and the problem.
    #[test]
    fn a_store_that_does_not_open_names_its_file_and_why() {
        use crate::config::tls::{Store, StoreType};
        let dir = tempfile::tempdir().unwrap();
        let (ks, ts, _) = keytool_stores(dir.path());
        // The password from a file (`passwordPath`), as operators keep it.
        let store = |location: &Path, password: &str| {
            let file = dir.path().join(format!("{password}.pw"));
            std::fs::write(&file, format!("{password}\n")).unwrap();
            Store {
                location: location.to_path_buf(),
                password: None,
                password_path: Some(file),
                kind: StoreType::Bcfks,
            }
        };
        assert!(super::super::load_key_store(&store(&ks, PW), "ssl.keyStore").is_ok());
        assert!(super::super::load_trust_store(&store(&ts, PW), "ssl.trustStore").is_ok());
        let err = super::super::load_key_store(&store(&ks, "wrong"), "ssl.quorum.keyStore")
            .unwrap_err()
            .to_string();
        let named = format!(
            "the ssl.quorum.keyStore {} is not a BCFKS store",
            ks.display()
        );
        assert!(
            err.contains(&named) && err.contains("password does not open it"),
            "{err}"
        );
        let mut bytes = std::fs::read(&ts).unwrap();
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0x40;
        std::fs::write(&ts, bytes).unwrap();
        let err = super::super::load_trust_store(&store(&ts, PW), "ssl.trustStore")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&ts.display().to_string()) && err.contains("damaged"),
            "{err}"
        );
    }

    /// Rewrites a BCFKS store with BouncyCastle's own API, as an operator
    /// may have it: the store encrypted with AES-256-KWP, its keys derived
    /// by scrypt (cost 1024, block size 8).
    const REWRITE_JAVA: &str = r#"
import java.io.*;
import java.security.*;
import java.util.*;
import org.bouncycastle.jcajce.BCFKSLoadStoreParameter;
import org.bouncycastle.crypto.util.ScryptConfig;

public class Rewrite {
    public static void main(String[] a) throws Exception {
        Provider bc = new org.bouncycastle.jce.provider.BouncyCastleProvider();
        char[] pw = a[2].toCharArray();
        KeyStore src = KeyStore.getInstance("BCFKS", bc);
        try (InputStream in = new FileInputStream(a[0])) { src.load(in, pw); }
        KeyStore dst = KeyStore.getInstance("BCFKS", bc);
        dst.load(null, null);
        for (String alias : Collections.list(src.aliases())) {
            if (src.isKeyEntry(alias)) {
                dst.setKeyEntry(alias, src.getKey(alias, pw), pw, src.getCertificateChain(alias));
            } else {
                dst.setCertificateEntry(alias, src.getCertificate(alias));
            }
        }
        try (OutputStream out = new FileOutputStream(a[1])) {
            dst.store(new BCFKSLoadStoreParameter.Builder(out, pw)
                .withStoreEncryptionAlgorithm(BCFKSLoadStoreParameter.EncryptionAlgorithm.AES256_KWP)
                .withStorePBKDFConfig(new ScryptConfig.Builder(1024, 8, 1).build())
                .build());
        }
    }
}
"#;

    // BouncyCastle's other store settings (AES-256-KWP, scrypt), written
    // by BouncyCastle itself: read the same.
    #[test]
    fn bouncycastle_stores_with_kwp_and_scrypt_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let (ks, _, cert) = keytool_stores(dir.path());
        let source = dir.path().join("Rewrite.java");
        std::fs::write(&source, REWRITE_JAVA).unwrap();
        let out = dir.path().join("rewritten.bcfks");
        run(Command::new("java")
            .arg("-cp")
            .arg(bcprov())
            .arg(&source)
            .arg(&ks)
            .arg(&out)
            .arg(PW));
        let bytes = std::fs::read(&out).unwrap();
        assert!(bytes.windows(oid(&SCRYPT).len()).any(|w| w == oid(&SCRYPT)));
        assert!(bytes
            .windows(oid(&AES256_KWP).len())
            .any(|w| w == oid(&AES256_KWP)));
        assert_usable_keys(&read(&bytes, PW).unwrap(), 2, &cert);
        let err = read(&bytes, "changeme").unwrap_err();
        assert!(err.contains("password does not open it"), "{err}");
    }
}
