//! zkCli's output formats: stat, dates, ACLs, errors.

use std::fmt::Write as _;

use wazoo_proto::{perms, Acl, Stat};

use crate::error::Error;

/// zkCli's `StatPrinter`.
pub fn stat(s: &Stat) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "cZxid = 0x{:x}", s.czxid as u64);
    let _ = writeln!(out, "ctime = {}", java_date(s.ctime));
    let _ = writeln!(out, "mZxid = 0x{:x}", s.mzxid as u64);
    let _ = writeln!(out, "mtime = {}", java_date(s.mtime));
    let _ = writeln!(out, "pZxid = 0x{:x}", s.pzxid as u64);
    let _ = writeln!(out, "cversion = {}", s.cversion);
    let _ = writeln!(out, "dataVersion = {}", s.version);
    let _ = writeln!(out, "aclVersion = {}", s.aversion);
    let _ = writeln!(out, "ephemeralOwner = 0x{:x}", s.ephemeral_owner as u64);
    let _ = writeln!(out, "dataLength = {}", s.data_length);
    let _ = writeln!(out, "numChildren = {}", s.num_children);
    out
}

/// Java's `new Date(ms).toString()`, which zkCli's `StatPrinter` prints:
/// `Sat Nov 21 22:35:04 UTC 2026`, in the local time zone (`TZ`, else
/// `/etc/localtime`) with its abbreviation, as Java shows it.
pub fn java_date(ms: i64) -> String {
    java_date_in(ms, &jiff::tz::TimeZone::system())
}

/// [`java_date`] in the time zone `tz`. A time outside the range the
/// calendar library handles prints as Java's epoch milliseconds would not:
/// as the raw number, never a panic.
pub fn java_date_in(ms: i64, tz: &jiff::tz::TimeZone) -> String {
    match jiff::Timestamp::from_millisecond(ms) {
        Ok(t) => t
            .to_zoned_datetime(tz.clone())
            .strftime("%a %b %d %H:%M:%S %Z %Y")
            .to_string(),
        Err(_) => ms.to_string(),
    }
}

/// zkCli's `getPermString`: `cdrwa` order.
pub fn perm_string(p: i32) -> String {
    perms::letters(p)
}

/// Parses `cdrwa` letters.
pub fn parse_perms(s: &str) -> Result<i32, String> {
    let mut p = 0;
    for c in s.chars() {
        p |= match c {
            'r' => perms::READ,
            'w' => perms::WRITE,
            'c' => perms::CREATE,
            'd' => perms::DELETE,
            'a' => perms::ADMIN,
            other => return Err(format!("Unknown perm type: {other}")),
        };
    }
    Ok(p)
}

/// zkCli's `AclParser`: `scheme:id:perm[,scheme:id:perm...]`; the id is
/// everything between the first and the last colon (`digest:u:hash:r`).
pub fn parse_acl(s: &str) -> Result<Vec<Acl>, String> {
    let mut acl = Vec::new();
    for a in s.split(',') {
        let (Some(first), Some(last)) = (a.find(':'), a.rfind(':')) else {
            return Err(format!("{a} does not have the form scheme:id:perm"));
        };
        if first == last {
            return Err(format!("{a} does not have the form scheme:id:perm"));
        }
        acl.push(Acl::new(
            parse_perms(&a[last + 1..])?,
            &a[..first],
            &a[first + 1..last],
        ));
    }
    Ok(acl)
}

/// jute's CSV string escaping, as `Id.toString()` shows ids.
fn csv(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 1);
    out.push('\'');
    for c in s.chars() {
        match c {
            '\0' => out.push_str("%00"),
            '\n' => out.push_str("%0A"),
            '\r' => out.push_str("%0D"),
            ',' => out.push_str("%2C"),
            '}' => out.push_str("%7D"),
            '%' => out.push_str("%25"),
            c => out.push(c),
        }
    }
    out
}

/// zkCli's `getAcl` lines for one entry: `'world,'anyone` then `: cdrwa`.
pub fn acl_entry(a: &Acl) -> String {
    format!(
        "{},{}\n: {}\n",
        csv(&a.id.scheme),
        csv(&a.id.id),
        perm_string(a.perms)
    )
}

/// A Java `List.toString()`: `[a, b]`.
pub fn list<S: AsRef<str>>(items: &[S]) -> String {
    let mut s = String::from("[");
    for (i, x) in items.iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        s.push_str(x.as_ref());
    }
    s.push(']');
    s
}

/// zkCli's messages for failed commands (`CliWrapperException`).
pub fn error(e: &Error, path: &str) -> String {
    match e.root() {
        Error::NoNode => format!("Node does not exist: {path}"),
        Error::NoChildrenForEphemerals => format!("Ephemerals cannot have children: {path}"),
        Error::NodeExists => format!("Node already exists: {path}"),
        Error::NotEmpty => format!("Node not empty: {path}"),
        Error::NotReadOnly => format!("Not a read-only call: {path}"),
        Error::InvalidAcl => format!("Acl is not valid : {path}"),
        Error::NoAuth => format!("Insufficient permission : {path}"),
        Error::BadArguments(m) if !m.is_empty() => m.clone(),
        Error::BadArguments(_) => format!("Arguments are not valid : {path}"),
        Error::BadVersion => format!("version No is not valid : {path}"),
        Error::ReconfigInProgress => {
            "Another reconfiguration is in progress -- concurrent reconfigs not supported (yet)"
                .to_string()
        }
        Error::NewConfigNoQuorum => "No quorum of new config is connected and up-to-date with \
             the leader of last committed config - try invoking reconfiguration after new \
             servers are connected and synced"
            .to_string(),
        Error::Closed => "the session is closed (use connect)".to_string(),
        other => {
            let p = if path.is_empty() {
                String::new()
            } else {
                format!(" for {path}")
            };
            format!("KeeperErrorCode = {other}{p}")
        }
    }
}

/// Data as zkCli prints it: UTF-8 (lossy), and `null` for null data.
pub fn data(d: Option<&[u8]>) -> String {
    match d {
        Some(d) => String::from_utf8_lossy(d).into_owned(),
        None => "null".to_string(),
    }
}

/// Bytes as text if they are printable UTF-8, else `0x` hex.
pub fn text_or_hex(b: &[u8]) -> String {
    match std::str::from_utf8(b) {
        Ok(s) if s.chars().all(|c| !c.is_control() || c == '\n' || c == '\t') => s.to_string(),
        _ => hex(b),
    }
}

/// `0x`-prefixed hex.
pub fn hex(b: &[u8]) -> String {
    let mut s = String::from("0x");
    for x in b {
        let _ = write!(s, "{x:02x}");
    }
    s
}

/// `0x`-prefixed hex to bytes.
pub fn parse_hex(s: &str) -> Result<Vec<u8>, String> {
    let h = s.strip_prefix("0x").unwrap_or(s);
    if h.len() & 1 == 1 {
        return Err(format!("odd number of hex digits in {s}"));
    }
    (0..h.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&h[i..i + 2], 16).map_err(|_| format!("bad hex in {s}")))
        .collect()
}

/// A JSON value as MessagePack (maps keep their field names, as the recipe
/// ABI's structs expect).
pub fn json_to_msgpack(s: &str) -> Result<Vec<u8>, String> {
    let v: serde_json::Value =
        serde_json::from_str(s).map_err(|e| format!("arguments are not JSON: {e}"))?;
    rmp_serde::to_vec_named(&v).map_err(|e| format!("cannot encode arguments: {e}"))
}

/// A MessagePack value as JSON; a top-level binary value as a JSON string
/// when it is printable UTF-8, else as 0x-hex of its bytes; anything else
/// without a JSON form as 0x-hex of the MessagePack.
pub fn msgpack_display(b: &[u8]) -> String {
    #[derive(serde::Deserialize)]
    struct Bin(#[serde(with = "wazoo_sdk::abi::bytes")] Vec<u8>);
    if let Ok(v) = rmp_serde::from_slice::<serde_json::Value>(b) {
        return v.to_string();
    }
    match rmp_serde::from_slice::<Bin>(b) {
        Ok(Bin(bytes)) => match std::str::from_utf8(&bytes) {
            Ok(s) if !s.chars().any(|c| c.is_control() && c != '\n' && c != '\t') => {
                serde_json::Value::String(s.to_string()).to_string()
            }
            _ => hex(&bytes),
        },
        Err(_) => hex(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_print_like_java_date_to_string() {
        let utc = jiff::tz::TimeZone::UTC;
        assert_eq!(java_date_in(0, &utc), "Thu Jan 01 00:00:00 UTC 1970");
        // 2026-11-21T22:35:04Z
        assert_eq!(
            java_date_in(1_795_300_504_000, &utc),
            "Sat Nov 21 22:35:04 UTC 2026"
        );
        assert_eq!(
            java_date_in(951_782_400_000, &utc),
            "Tue Feb 29 00:00:00 UTC 2000"
        );
        // Local time with the zone's abbreviation, summer time included.
        let paris = jiff::tz::TimeZone::get("Europe/Paris").unwrap();
        assert_eq!(
            java_date_in(1_795_300_504_000, &paris),
            "Sat Nov 21 23:35:04 CET 2026"
        );
        assert_eq!(
            java_date_in(1_783_000_000_000, &paris),
            "Thu Jul 02 15:46:40 CEST 2026"
        );
        let kolkata = jiff::tz::TimeZone::get("Asia/Kolkata").unwrap();
        assert_eq!(java_date_in(0, &kolkata), "Thu Jan 01 05:30:00 IST 1970");
        // Out of range: a number, not a panic.
        assert_eq!(java_date_in(i64::MAX, &utc), i64::MAX.to_string());
    }

    #[test]
    fn stat_prints_like_zkcli() {
        let s = Stat {
            czxid: 2,
            mzxid: 3,
            ctime: 0,
            mtime: 0,
            version: 1,
            cversion: 4,
            aversion: 0,
            ephemeral_owner: -1,
            data_length: 5,
            num_children: 6,
            pzxid: 0x1a,
        };
        let epoch = java_date(0);
        let want = format!(
            "cZxid = 0x2\nctime = {epoch}\nmZxid = 0x3\n\
                    mtime = {epoch}\npZxid = 0x1a\ncversion = 4\n\
                    dataVersion = 1\naclVersion = 0\nephemeralOwner = 0xffffffffffffffff\n\
                    dataLength = 5\nnumChildren = 6\n"
        );
        assert_eq!(stat(&s), want);
    }

    #[test]
    fn acls_parse_and_print_like_zkcli() {
        let acl = parse_acl("world:anyone:cdrwa,digest:bob:X/y=:rw,ip:10.0.0.1:r").unwrap();
        assert_eq!(acl[0], Acl::new(perms::ALL, "world", "anyone"));
        assert_eq!(
            acl[1],
            Acl::new(perms::READ | perms::WRITE, "digest", "bob:X/y=")
        );
        assert_eq!(acl[2], Acl::new(perms::READ, "ip", "10.0.0.1"));
        assert_eq!(acl_entry(&acl[0]), "'world,'anyone\n: cdrwa\n");
        assert!(parse_acl("world:anyone").is_err());
        assert!(parse_acl("world:anyone:x").is_err());
    }

    #[test]
    fn errors_read_like_zkcli() {
        assert_eq!(error(&Error::NoNode, "/x"), "Node does not exist: /x");
        assert_eq!(error(&Error::NodeExists, "/x"), "Node already exists: /x");
        assert_eq!(
            error(&Error::ConnectionLoss, "/x"),
            "KeeperErrorCode = ConnectionLoss for /x"
        );
        // reconfig names no path: ZooKeeper's messages for its refusals.
        assert_eq!(
            error(&Error::ReconfigDisabled, ""),
            "KeeperErrorCode = Reconfig is disabled"
        );
        assert_eq!(
            error(&Error::Unimplemented, ""),
            "KeeperErrorCode = Unimplemented"
        );
    }

    #[test]
    fn hex_and_text() {
        assert_eq!(parse_hex("0x0aff").unwrap(), vec![10, 255]);
        assert!(parse_hex("0xabc").is_err());
        assert_eq!(text_or_hex(b"hi"), "hi");
        assert_eq!(text_or_hex(&[0, 1]), "0x0001");
        assert_eq!(list(&["a", "b"]), "[a, b]");
    }

    #[test]
    fn recipe_values_go_from_json_to_msgpack_and_back() {
        let b = super::json_to_msgpack(r#"{"name":"s","by":4}"#).unwrap();
        assert_eq!(super::msgpack_display(&b), r#"{"by":4,"name":"s"}"#);
        assert!(super::json_to_msgpack("{nope")
            .unwrap_err()
            .contains("not JSON"));
        // Binary: as a string when it is printable UTF-8, else its bytes in hex.
        assert_eq!(super::msgpack_display(&[0xc4, 0x01, 0xff]), "0xff");
        assert_eq!(super::msgpack_display(&[0xc4, 0x02, b'h', b'i']), "\"hi\"");
    }
}
