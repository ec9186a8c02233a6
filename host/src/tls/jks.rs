//! Java KeyStores (JKS), as the JDK's keytool writes them and ZooKeeper
//! reads them (`ssl.keyStore.type=JKS`, or a `.jks` file): private key
//! entries with their certificate chains, and trusted certificate entries.
//!
//! The format (the JDK's `JavaKeyStore`): a big-endian header (magic
//! `0xFEEDFEED`, version 1 or 2, entry count), the entries, and a SHA-1
//! digest over the password (UTF-16BE), the words "Mighty Aphrodite" and
//! everything before the digest. A private key is an
//! EncryptedPrivateKeyInfo whose algorithm is the JDK's own key protector
//! (OID 1.3.6.1.4.1.42.2.17.1.1): a 20-byte salt, the PKCS#8 key XORed
//! with a SHA-1 keystream of the password, and a SHA-1 check of the
//! password and the plain key. ZooKeeper protects the key with the store's
//! password, and so does keytool by default.
//!
//! The file is an operator's input: every length is checked against what
//! is left of the file before anything is allocated or read, and a store
//! that does not parse or whose digest does not match is an error naming
//! the problem.

use sha1::{Digest, Sha1};

use super::JavaStore;

const MAGIC: u32 = 0xFEED_FEED;
const TAG_PRIVATE_KEY: u32 = 1;
const TAG_TRUSTED_CERT: u32 = 2;
const DIGEST_LEN: usize = 20;
/// The JDK's key protector (`sun.security.provider.KeyProtector`).
const KEY_PROTECTOR_OID: &[u8] = &[0x2b, 0x06, 0x01, 0x04, 0x01, 0x2a, 0x02, 0x11, 0x01, 0x01];

/// Reads a JKS store, checking its digest with `password` and recovering
/// every private key with it.
pub fn read(bytes: &[u8], password: &str) -> Result<JavaStore, String> {
    let pw: Vec<u8> = password.encode_utf16().flat_map(u16::to_be_bytes).collect();
    if bytes.len() < 12 + DIGEST_LEN {
        return Err("too short for a JKS store".into());
    }
    let (body, digest) = bytes.split_at(bytes.len() - DIGEST_LEN);
    let mut r = Reader { b: body };
    if r.u32()? != MAGIC {
        return Err("not a JKS store (no 0xFEEDFEED magic)".into());
    }
    let version = r.u32()?;
    if version != 1 && version != 2 {
        return Err(format!("JKS version {version} (1 or 2 is read)"));
    }
    let want: [u8; DIGEST_LEN] = Sha1::new()
        .chain_update(&pw)
        .chain_update(b"Mighty Aphrodite")
        .chain_update(body)
        .finalize()
        .into();
    if want.as_slice() != digest {
        return Err("the password does not open it (its digest does not match)".into());
    }
    let count = r.u32()?;
    let mut store = JavaStore::default();
    for i in 0..count {
        let tag = r.u32()?;
        r.utf()?; // the alias
        r.take(8)?; // the creation time
        match tag {
            TAG_PRIVATE_KEY => {
                let protected = r.bytes_u32()?;
                let key = recover_key(protected, &pw).map_err(|e| format!("entry {i}: {e}"))?;
                let n = r.u32()?;
                let mut chain = Vec::new();
                for _ in 0..n {
                    chain.push(r.cert(version)?.to_vec());
                }
                store.keys.push((key, chain));
            }
            TAG_TRUSTED_CERT => store.trusted.push(r.cert(version)?.to_vec()),
            t => return Err(format!("entry {i} has tag {t} (1 or 2 is read)")),
        }
    }
    if !r.b.is_empty() {
        return Err(format!(
            "{} bytes after the last entry, before the digest",
            r.b.len()
        ));
    }
    Ok(store)
}

/// The PKCS#8 key inside an EncryptedPrivateKeyInfo sealed by the JDK's
/// key protector.
fn recover_key(der: &[u8], pw: &[u8]) -> Result<Vec<u8>, String> {
    let mut outer = Der::new(der).sequence()?;
    let mut alg = outer.sequence()?;
    if alg.tlv(0x06)? != KEY_PROTECTOR_OID {
        return Err("its private key is not sealed by the JDK's key protector".into());
    }
    let sealed = outer.tlv(0x04)?;
    if sealed.len() < 2 * DIGEST_LEN {
        return Err("its sealed private key is too short".into());
    }
    let (salt, rest) = sealed.split_at(DIGEST_LEN);
    let (enc, check) = rest.split_at(rest.len() - DIGEST_LEN);
    let plain = keystream_xor(enc, pw, salt.try_into().expect("20 bytes"));
    let got: [u8; DIGEST_LEN] = Sha1::new()
        .chain_update(pw)
        .chain_update(&plain)
        .finalize()
        .into();
    if got.as_slice() != check {
        return Err("its private key does not open with the store's password".into());
    }
    Ok(plain)
}

/// `data` XORed with the key protector's keystream: SHA-1 blocks, each of
/// the password and the block before, the first after `salt`.
fn keystream_xor(data: &[u8], pw: &[u8], salt: [u8; DIGEST_LEN]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len());
    let mut block = salt;
    for chunk in data.chunks(DIGEST_LEN) {
        block = Sha1::new()
            .chain_update(pw)
            .chain_update(block)
            .finalize()
            .into();
        out.extend(chunk.iter().zip(block).map(|(c, k)| c ^ k));
    }
    out
}

/// Big-endian fields of the store, each checked against what is left.
struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if n > self.b.len() {
            return Err(format!(
                "truncated: a field of {n} bytes where {} are left",
                self.b.len()
            ));
        }
        let (head, rest) = self.b.split_at(n);
        self.b = rest;
        Ok(head)
    }

    fn u32(&mut self) -> Result<u32, String> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A Java `writeUTF` string (u16 length, modified UTF-8), unread.
    fn utf(&mut self) -> Result<&'a [u8], String> {
        let b = self.take(2)?;
        self.take(usize::from(u16::from_be_bytes([b[0], b[1]])))
    }

    fn bytes_u32(&mut self) -> Result<&'a [u8], String> {
        let n = self.u32()?;
        self.take(n as usize)
    }

    /// A certificate: its type (version 2 only), then its encoding.
    fn cert(&mut self, version: u32) -> Result<&'a [u8], String> {
        if version == 2 {
            let kind = self.utf()?;
            if kind != b"X.509" {
                return Err(format!(
                    "a certificate of type {:?} (X.509 is read)",
                    String::from_utf8_lossy(kind)
                ));
            }
        }
        self.bytes_u32()
    }
}

/// Just enough DER for an EncryptedPrivateKeyInfo: definite lengths, one
/// tag at a time.
struct Der<'a> {
    b: &'a [u8],
}

impl<'a> Der<'a> {
    fn new(b: &'a [u8]) -> Self {
        Der { b }
    }

    /// The contents of the next element, which must have tag `tag`.
    fn tlv(&mut self, tag: u8) -> Result<&'a [u8], String> {
        let bad = || "its private key is not a well-formed EncryptedPrivateKeyInfo".to_string();
        let (&t, rest) = self.b.split_first().ok_or_else(bad)?;
        if t != tag {
            return Err(bad());
        }
        let (&first, mut rest) = rest.split_first().ok_or_else(bad)?;
        let len = if first < 0x80 {
            usize::from(first)
        } else {
            let n = usize::from(first & 0x7f);
            if n == 0 || n > 4 || rest.len() < n {
                return Err(bad());
            }
            let (len_bytes, after) = rest.split_at(n);
            rest = after;
            len_bytes
                .iter()
                .fold(0usize, |a, &b| (a << 8) | usize::from(b))
        };
        if len > rest.len() {
            return Err(bad());
        }
        let (contents, after) = rest.split_at(len);
        self.b = after;
        Ok(contents)
    }

    fn sequence(&mut self) -> Result<Der<'a>, String> {
        self.tlv(0x30).map(Der::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store with one trusted certificate entry, written as the JDK
    /// writes it (version 2), whose certificate claims `declared_len`
    /// bytes, sealed with `password`.
    fn trusted_store_claiming(password: &str, cert: &[u8], declared_len: u32) -> Vec<u8> {
        let mut b = Vec::new();
        for n in [MAGIC, 2, 1, TAG_TRUSTED_CERT] {
            b.extend(n.to_be_bytes());
        }
        b.extend(2u16.to_be_bytes());
        b.extend(b"ca");
        b.extend(0u64.to_be_bytes());
        b.extend(5u16.to_be_bytes());
        b.extend(b"X.509");
        b.extend(declared_len.to_be_bytes());
        b.extend(cert);
        let pw: Vec<u8> = password.encode_utf16().flat_map(u16::to_be_bytes).collect();
        let d = Sha1::new()
            .chain_update(&pw)
            .chain_update(b"Mighty Aphrodite")
            .chain_update(&b)
            .finalize();
        b.extend(d);
        b
    }

    fn trusted_store(password: &str, cert: &[u8]) -> Vec<u8> {
        trusted_store_claiming(password, cert, cert.len() as u32)
    }

    #[test]
    fn a_trusted_certificate_entry_reads_back_with_the_right_password_only() {
        let store = trusted_store("changeit", b"not really DER");
        let s = read(&store, "changeit").unwrap();
        assert_eq!(s.trusted, vec![b"not really DER".to_vec()]);
        assert!(s.keys.is_empty());
        let e = read(&store, "wrong").unwrap_err();
        assert!(e.contains("password"), "{e}");
    }

    /// A key sealed as the JDK's key protector seals it, from `salt`.
    fn seal(plain: &[u8], pw: &[u8], salt: [u8; 20]) -> Vec<u8> {
        let mut out = salt.to_vec();
        out.extend(keystream_xor(plain, pw, salt));
        out.extend(Sha1::new().chain_update(pw).chain_update(plain).finalize());
        out
    }

    fn der(tag: u8, contents: &[u8]) -> Vec<u8> {
        let mut v = vec![tag];
        if contents.len() < 0x80 {
            v.push(contents.len() as u8);
        } else {
            v.push(0x82);
            v.extend((contents.len() as u16).to_be_bytes());
        }
        v.extend(contents);
        v
    }

    #[test]
    fn a_sealed_private_key_is_recovered_and_a_wrong_check_refused() {
        let pw: Vec<u8> = "pw".encode_utf16().flat_map(u16::to_be_bytes).collect();
        let plain: Vec<u8> = (0..=200u8).collect(); // more than one block, not a multiple
        let sealed = seal(&plain, &pw, [7; 20]);
        let alg = der(
            0x30,
            &[der(0x06, KEY_PROTECTOR_OID), vec![0x05, 0x00]].concat(),
        );
        let info = der(0x30, &[alg.clone(), der(0x04, &sealed)].concat());
        assert_eq!(recover_key(&info, &pw).unwrap(), plain);
        let other: Vec<u8> = "px".encode_utf16().flat_map(u16::to_be_bytes).collect();
        assert!(recover_key(&info, &other).is_err());
    }

    /// Every prefix and every one-byte change of a store is an error or a
    /// store, never a panic or a huge allocation.
    #[test]
    fn truncated_or_damaged_stores_are_errors() {
        let store = trusted_store("changeit", &[0x30; 64]);
        for n in 0..store.len() {
            assert!(
                read(&store[..n], "changeit").is_err(),
                "prefix of {n} bytes"
            );
        }
        for i in 0..store.len() {
            let mut bad = store.clone();
            bad[i] ^= 0xff;
            let _ = read(&bad, "changeit");
        }
        // A huge length with a matching digest: refused as truncated.
        let b = trusted_store_claiming("changeit", b"", u32::MAX);
        let e = read(&b, "changeit").unwrap_err();
        assert!(e.contains("truncated"), "{e}");
    }
}
