//! Reading a module's manifest from its custom section, before anything is
//! compiled or run, and validating it.

use super::error::LoadError;
use wazoo_sdk::abi::{self, Manifest, ABI_MAJOR, ABI_MINOR, MANIFEST_SECTION};

/// Largest manifest accepted.
const MAX_MANIFEST: usize = 64 * 1024;

fn leb_u32(b: &[u8], pos: &mut usize) -> Option<u32> {
    let mut result: u64 = 0;
    for shift in (0..35).step_by(7) {
        let byte = *b.get(*pos)?;
        *pos += 1;
        result |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return u32::try_from(result).ok();
        }
    }
    None
}

/// Every section of a core module, in order: its id and payload.
fn sections(bytes: &[u8]) -> Result<Vec<(u8, &[u8])>, LoadError> {
    let bad = |why: &str| LoadError::Invalid(format!("not a WebAssembly module: {why}"));
    if bytes.len() < 8 || &bytes[0..4] != b"\0asm" {
        return Err(bad("bad magic"));
    }
    if bytes[4..8] != [1, 0, 0, 0] {
        return Err(bad(
            "not a core module of binary version 1 (components are not supported)",
        ));
    }
    let mut out = Vec::new();
    let mut pos = 8;
    while pos < bytes.len() {
        let id = bytes[pos];
        pos += 1;
        let size =
            leb_u32(bytes, &mut pos).ok_or_else(|| bad("truncated section header"))? as usize;
        let end = pos
            .checked_add(size)
            .filter(|&e| e <= bytes.len())
            .ok_or_else(|| bad("truncated section"))?;
        out.push((id, &bytes[pos..end]));
        pos = end;
    }
    Ok(out)
}

/// The payloads of every custom section named `name`.
pub fn custom_sections<'a>(bytes: &'a [u8], name: &str) -> Result<Vec<&'a [u8]>, LoadError> {
    let bad = || LoadError::Invalid("not a WebAssembly module: bad custom section name".into());
    let mut out = Vec::new();
    for (id, payload) in sections(bytes)? {
        if id != 0 {
            continue;
        }
        let mut p = 0;
        let n = leb_u32(payload, &mut p).ok_or_else(bad)? as usize;
        let name_end = p
            .checked_add(n)
            .filter(|&e| e <= payload.len())
            .ok_or_else(bad)?;
        if &payload[p..name_end] == name.as_bytes() {
            out.push(&payload[name_end..]);
        }
    }
    Ok(out)
}

/// Whether the module has a start section (a function that runs when it is
/// instantiated).
pub fn has_start_function(bytes: &[u8]) -> Result<bool, LoadError> {
    const START: u8 = 8;
    Ok(sections(bytes)?.iter().any(|&(id, _)| id == START))
}

/// Reads and validates the manifest; refuses another ABI major.
pub fn read_manifest(bytes: &[u8]) -> Result<Manifest, LoadError> {
    let sections = custom_sections(bytes, MANIFEST_SECTION)?;
    let payload = match sections.as_slice() {
        [] => return Err(LoadError::NoManifest),
        [one] => *one,
        _ => {
            return Err(LoadError::BadManifest(
                "more than one manifest section".into(),
            ))
        }
    };
    if payload.len() > MAX_MANIFEST {
        return Err(LoadError::BadManifest(format!(
            "manifest of {} bytes (max {MAX_MANIFEST})",
            payload.len()
        )));
    }
    // Check the ABI version first, so a future manifest layout is refused as
    // a version mismatch rather than as garbage.
    #[derive(serde::Deserialize)]
    struct Version {
        abi: (u16, u16),
    }
    let v: Version = abi::decode(payload).map_err(|e| LoadError::BadManifest(e.to_string()))?;
    if v.abi.0 != ABI_MAJOR {
        return Err(LoadError::AbiVersion {
            major: v.abi.0,
            minor: v.abi.1,
        });
    }
    let m: Manifest = abi::decode(payload).map_err(|e| LoadError::BadManifest(e.to_string()))?;
    validate(&m)?;
    if m.abi.1 > ABI_MINOR {
        tracing::info!(module = %m.name, "module built for ABI 1.{} (host speaks 1.{ABI_MINOR})", m.abi.1);
    }
    Ok(m)
}

fn validate(m: &Manifest) -> Result<(), LoadError> {
    let bad = |s: String| Err(LoadError::BadManifest(s));
    let ident = |s: &str| {
        !s.is_empty()
            && s.len() <= 64
            && s.bytes()
                .all(|c| c.is_ascii_alphanumeric() || b"_-.".contains(&c))
    };
    if !ident(&m.name) {
        return bad(format!(
            "bad recipe name {:?} (1-64 of [A-Za-z0-9_.-])",
            m.name
        ));
    }
    if !semver_like(&m.version) {
        return bad(format!(
            "bad version {:?} (want semver MAJOR.MINOR.PATCH)",
            m.version
        ));
    }
    if m.methods.len() > 1024 {
        return bad("more than 1024 methods".into());
    }
    for meth in &m.methods {
        if !ident(meth) {
            return bad(format!("bad method name {meth:?}"));
        }
    }
    for p in &m.prefixes {
        let ok = p == "/"
            || (p.starts_with('/')
                && !p.ends_with('/')
                && p.len() <= 1024
                && p[1..]
                    .split('/')
                    .all(|c| !c.is_empty() && c != "." && c != ".."));
        if !ok {
            return bad(format!("bad path prefix {p:?}"));
        }
    }
    Ok(())
}

fn semver_like(v: &str) -> bool {
    let core = v.split(['-', '+']).next().unwrap_or("");
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit()))
        && v.len() <= 64
}
