//! Compile-time MessagePack encoding of the [`Manifest`](crate::abi::Manifest),
//! so `recipe!` can place it in a custom section as a plain byte array.

/// Encodes (or, with `out` empty, only measures) the manifest; returns its length.
pub const fn encode_into(
    out: &mut [u8],
    name: &str,
    version: &str,
    methods: &[&str],
    prefixes: &[&str],
    on_watch: bool,
) -> usize {
    let mut p = 0;
    p = byte(out, p, 0x80 | 6); // fixmap, 6 entries
    p = str(out, p, "abi");
    p = byte(out, p, 0x92); // fixarray of 2
    p = uint(out, p, crate::abi::ABI_MAJOR);
    p = uint(out, p, crate::abi::ABI_MINOR);
    p = str(out, p, "name");
    p = str(out, p, name);
    p = str(out, p, "version");
    p = str(out, p, version);
    p = str(out, p, "methods");
    p = strs(out, p, methods);
    p = str(out, p, "prefixes");
    p = strs(out, p, prefixes);
    p = str(out, p, "on_watch");
    byte(out, p, if on_watch { 0xc3 } else { 0xc2 })
}

/// The encoded length.
pub const fn encoded_len(
    name: &str,
    version: &str,
    methods: &[&str],
    prefixes: &[&str],
    on_watch: bool,
) -> usize {
    encode_into(&mut [], name, version, methods, prefixes, on_watch)
}

/// The encoded bytes; `N` must be [`encoded_len`] of the same arguments.
pub const fn encode<const N: usize>(
    name: &str,
    version: &str,
    methods: &[&str],
    prefixes: &[&str],
    on_watch: bool,
) -> [u8; N] {
    let mut out = [0u8; N];
    let n = encode_into(&mut out, name, version, methods, prefixes, on_watch);
    assert!(n == N, "manifest length mismatch");
    out
}

const fn byte(out: &mut [u8], p: usize, b: u8) -> usize {
    if !out.is_empty() {
        out[p] = b;
    }
    p + 1
}

const fn uint(out: &mut [u8], p: usize, v: u16) -> usize {
    if v < 128 {
        byte(out, p, v as u8)
    } else {
        let p = byte(out, p, 0xcd);
        let p = byte(out, p, (v >> 8) as u8);
        byte(out, p, v as u8)
    }
}

const fn str(out: &mut [u8], mut p: usize, s: &str) -> usize {
    let b = s.as_bytes();
    let n = b.len();
    if n < 32 {
        p = byte(out, p, 0xa0 | n as u8);
    } else if n < 256 {
        p = byte(out, p, 0xd9);
        p = byte(out, p, n as u8);
    } else {
        assert!(n < 65536, "manifest string too long");
        p = byte(out, p, 0xda);
        p = byte(out, p, (n >> 8) as u8);
        p = byte(out, p, n as u8);
    }
    let mut i = 0;
    while i < n {
        p = byte(out, p, b[i]);
        i += 1;
    }
    p
}

const fn strs(out: &mut [u8], mut p: usize, list: &[&str]) -> usize {
    let n = list.len();
    if n < 16 {
        p = byte(out, p, 0x90 | n as u8);
    } else {
        assert!(n < 65536, "manifest list too long");
        p = byte(out, p, 0xdc);
        p = byte(out, p, (n >> 8) as u8);
        p = byte(out, p, n as u8);
    }
    let mut i = 0;
    while i < n {
        p = str(out, p, list[i]);
        i += 1;
    }
    p
}

#[cfg(test)]
mod tests {
    use crate::abi::{Manifest, ABI_MAJOR, ABI_MINOR};

    #[test]
    fn const_manifest_decodes_with_serde() {
        const M: &[&str] = &[
            "acquire",
            "release",
            "a_method_name_longer_than_thirty_two_bytes",
        ];
        const P: &[&str] = &["/locks", "/x"];
        const N: usize = super::encoded_len("lock", "1.2.3", M, P, true);
        let b: [u8; N] = super::encode::<N>("lock", "1.2.3", M, P, true);
        let m: Manifest = rmp_serde::from_slice(&b).unwrap();
        assert_eq!(
            m,
            Manifest {
                abi: (ABI_MAJOR, ABI_MINOR),
                name: "lock".into(),
                version: "1.2.3".into(),
                methods: M.iter().map(|s| s.to_string()).collect(),
                prefixes: P.iter().map(|s| s.to_string()).collect(),
                on_watch: true,
            }
        );
    }
}
