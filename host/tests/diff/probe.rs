//! The malformed requests of the probe in `differential.rs`: each is sent
//! as raw bytes to a fresh session of ZooKeeper and of wazoo, and the two
//! outcomes must agree (docs/COMPATIBILITY.md, "Malformed requests").
//!
//! ZooKeeper Programmer's Guide, "The ZooKeeper Data Model" (path rules),
//! "ZooKeeper access control using ACLs", "ZooKeeper Watches".

use super::gen::{put_bool, put_buf, put_i32, put_i64};
use super::run::Probe;

/// An ACL entry: perms, scheme, id.
type AclEntry = (i32, &'static str, &'static str);

/// The probes whose outcomes differ on purpose, each with the reason
/// (docs/COMPATIBILITY.md, "Malformed requests").
pub const KNOWN: &[(&str, &str)] = &[
    (
        "check outside a multi",
        "ZooKeeper 3.8 never answers a check outside a multi that passes (its reply's null \
         stat throws) and logs a txn it cannot read back (ZOOKEEPER-2623); wazoo answers \
         Unimplemented and closes the connection, as ZooKeeper 3.9.3 and later do",
    ),
    (
        "check outside a multi that fails",
        "ZooKeeper 3.8 answers its error; wazoo answers Unimplemented and closes the \
         connection, as ZooKeeper 3.9.3 and later do for every check outside a multi \
         (ZOOKEEPER-2623)",
    ),
    (
        "check, null path",
        "ZooKeeper 3.8 answers BadArguments; wazoo answers Unimplemented and closes the \
         connection, as ZooKeeper 3.9.3 and later do for every check outside a multi \
         (ZOOKEEPER-2623)",
    ),
    (
        "multi, a create with a null path",
        "both answer MarshallingError; ZooKeeper's NullPointerException in prep leaves an \
         empty multi body after the header",
    ),
];

/// The fixtures every probe finds: `/probe`, `/probe/a` (data "d") and
/// `/probe/a/b`, as (opcode, body) requests.
pub fn setup() -> Vec<(i32, Vec<u8>)> {
    ["/probe", "/probe/a", "/probe/a/b"]
        .iter()
        .map(|p| (1, create(p.as_bytes(), Some(b"d"), &open_acl(), 0)))
        .collect()
}

fn path(b: &mut Vec<u8>, p: &[u8]) {
    put_buf(b, Some(p));
}

fn open_acl() -> Vec<(i32, &'static str, &'static str)> {
    vec![(31, "world", "anyone")]
}

fn acls(b: &mut Vec<u8>, acl: &[(i32, &str, &str)]) {
    put_i32(b, acl.len() as i32);
    for (perms, scheme, id) in acl {
        put_i32(b, *perms);
        put_buf(b, Some(scheme.as_bytes()));
        put_buf(b, Some(id.as_bytes()));
    }
}

fn create(p: &[u8], data: Option<&[u8]>, acl: &[(i32, &str, &str)], flags: i32) -> Vec<u8> {
    let mut b = Vec::new();
    path(&mut b, p);
    put_buf(&mut b, data);
    acls(&mut b, acl);
    put_i32(&mut b, flags);
    b
}

fn create_ttl(p: &[u8], flags: i32, ttl: i64) -> Vec<u8> {
    let mut b = create(p, Some(b"d"), &open_acl(), flags);
    put_i64(&mut b, ttl);
    b
}

fn path_watch(p: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    path(&mut b, p);
    put_bool(&mut b, false);
    b
}

fn path_only(p: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    path(&mut b, p);
    b
}

fn path_version(p: &[u8], version: i32) -> Vec<u8> {
    let mut b = Vec::new();
    path(&mut b, p);
    put_i32(&mut b, version);
    b
}

fn set_data(p: &[u8], version: i32) -> Vec<u8> {
    let mut b = Vec::new();
    path(&mut b, p);
    put_buf(&mut b, Some(b"x"));
    put_i32(&mut b, version);
    b
}

/// A multi (or multiRead) of (opcode, body) ops, ended as clients end it.
fn multi(ops: &[(i32, Vec<u8>)]) -> Vec<u8> {
    let mut b = Vec::new();
    for (op, body) in ops {
        put_i32(&mut b, *op);
        put_bool(&mut b, false);
        put_i32(&mut b, -1);
        b.extend_from_slice(body);
    }
    put_i32(&mut b, -1);
    put_bool(&mut b, true);
    put_i32(&mut b, -1);
    b
}

fn set_watches(op: i32, lists: &[&[&[u8]]]) -> (i32, Vec<u8>) {
    let mut b = Vec::new();
    put_i64(&mut b, 0);
    for list in lists {
        put_i32(&mut b, list.len() as i32);
        for p in *list {
            put_buf(&mut b, Some(p));
        }
    }
    (op, b)
}

/// A whole frame: length, then `payload` as it is.
fn frame(payload: &[u8]) -> Vec<u8> {
    let mut f = (payload.len() as i32).to_be_bytes().to_vec();
    f.extend_from_slice(payload);
    f
}

/// The paths that no node may have, with a name for each.
const BAD_PATHS: &[(&str, &[u8])] = &[
    ("empty", b""),
    ("relative", b"probe/a"),
    ("trailing slash", b"/probe/a/"),
    ("double slash", b"/probe//a"),
    ("dot", b"/probe/./a"),
    ("dot-dot", b"/probe/a/.."),
    ("null byte", b"/probe/a\0x"),
    ("invalid UTF-8", b"/probe/\xff\xfe"),
    ("CESU-8 surrogates", b"/probe/\xed\xa0\xbd\xed\xb8\x80"),
    ("supplementary character", "/probe/\u{1F600}".as_bytes()),
];

/// Every probe: (description, opcode, body, raw frame instead).
pub fn probes() -> Vec<Probe> {
    let mut v: Vec<(String, i32, Vec<u8>)> = Vec::new();
    // Before any connection has held a recursive watch (see the
    // "checkWatches" probes below and docs/COMPATIBILITY.md).
    for (name, p) in [
        ("relative", &b"probe"[..]),
        ("null", b""),
        ("inner slash only", b"probe/a"),
    ] {
        let mut b = if name == "null" {
            (-1i32).to_be_bytes().to_vec()
        } else {
            path_only(p)
        };
        put_i32(&mut b, 3);
        v.push((
            format!("checkWatches, {name} path, no recursive watch ever held"),
            17,
            b,
        ));
    }
    for (name, p) in BAD_PATHS {
        v.push((format!("exists, {name} path"), 3, path_watch(p)));
        v.push((format!("getData, {name} path"), 4, path_watch(p)));
        v.push((format!("getChildren2, {name} path"), 12, path_watch(p)));
        v.push((format!("getACL, {name} path"), 6, path_only(p)));
        v.push((format!("sync, {name} path"), 9, path_only(p)));
        v.push((
            format!("create, {name} path"),
            1,
            create(p, Some(b"d"), &open_acl(), 0),
        ));
        v.push((format!("delete, {name} path"), 2, path_version(p, -1)));
        v.push((format!("setData, {name} path"), 5, set_data(p, -1)));
    }
    // Lengths out of range.
    for (name, len) in [("negative", -5), ("huge", i32::MAX), ("past the frame", 64)] {
        let mut b = Vec::new();
        put_i32(&mut b, len);
        b.extend_from_slice(b"/probe");
        put_bool(&mut b, false);
        v.push((format!("exists, {name} path length"), 3, b.clone()));
        let mut b = Vec::new();
        path(&mut b, b"/probe/a");
        put_i32(&mut b, len);
        b.extend_from_slice(b"xx");
        put_i32(&mut b, -1);
        v.push((format!("setData, {name} data length"), 5, b));
        let mut b = Vec::new();
        path(&mut b, b"/probe/n");
        put_buf(&mut b, Some(b"d"));
        put_i32(&mut b, len);
        put_i32(&mut b, 0);
        v.push((format!("create, {name} ACL count"), 1, b));
    }
    let null_path = || {
        let mut b = Vec::new();
        put_i32(&mut b, -1);
        b
    };
    for (name, op, tail) in [
        ("exists", 3, &[0u8][..]),
        ("getData", 4, &[0u8]),
        ("getChildren", 8, &[0u8]),
        ("getChildren2", 12, &[0u8]),
        ("getACL", 6, &[]),
        ("sync", 9, &[]),
        ("getAllChildrenNumber", 104, &[]),
        ("delete", 2, &[0xff, 0xff, 0xff, 0xff]),
        ("check", 13, &[0xff, 0xff, 0xff, 0xff]),
        ("getEphemerals", 103, &[]),
        ("addWatch", 106, &[0, 0, 0, 0]),
        ("checkWatches", 17, &[0, 0, 0, 3]),
        ("removeWatches", 18, &[0, 0, 0, 3]),
    ] {
        let mut b = null_path();
        b.extend_from_slice(tail);
        v.push((format!("{name}, null path"), op, b));
    }
    let create_body = create(b"/x", Some(b"d"), &open_acl(), 0);
    for (name, op) in [("create", 1), ("createContainer", 19)] {
        let mut b = null_path();
        b.extend_from_slice(&create_body[6..]);
        v.push((format!("{name}, null path"), op, b));
    }
    let mut b = null_path();
    b.extend_from_slice(&set_data(b"/x", -1)[6..]);
    v.push(("setData, null path".into(), 5, b));
    let mut b = null_path();
    acls(&mut b, &open_acl());
    put_i32(&mut b, -1);
    v.push(("setACL, null path".into(), 7, b));
    v.push(("setWatches, a null path".into(), 101, {
        let mut b = Vec::new();
        put_i64(&mut b, 0);
        for _ in 0..3 {
            put_i32(&mut b, 1);
            put_i32(&mut b, -1);
        }
        b
    }));
    v.push((
        "multi, a create with a null path".into(),
        14,
        multi(&[(1, {
            let mut b = null_path();
            b.extend_from_slice(&create_body[6..]);
            b
        })]),
    ));
    v.push(("getAllChildrenNumber, root".into(), 104, path_only(b"/")));
    // Truncated records.
    v.push(("exists, no body".into(), 3, Vec::new()));
    v.push(("exists, no watch flag".into(), 3, path_only(b"/probe")));
    v.push(("getData, half a path".into(), 4, {
        let mut b = Vec::new();
        put_i32(&mut b, 10);
        b.extend_from_slice(b"/pr");
        b
    }));
    v.push(("setData, no version".into(), 5, {
        let mut b = Vec::new();
        path(&mut b, b"/probe/a");
        put_buf(&mut b, Some(b"x"));
        b
    }));
    v.push(("create, no flags".into(), 1, {
        let mut b = Vec::new();
        path(&mut b, b"/probe/n");
        put_buf(&mut b, Some(b"d"));
        acls(&mut b, &open_acl());
        b
    }));
    v.push((
        "createTTL, no TTL".into(),
        21,
        create(b"/probe/t", Some(b"d"), &open_acl(), 5),
    ));
    v.push(("exists, trailing bytes".into(), 3, {
        let mut b = path_watch(b"/probe");
        b.extend_from_slice(b"junk");
        b
    }));
    // ACLs.
    let acl_cases: &[(&str, Vec<AclEntry>)] = &[
        ("empty ACL list", vec![]),
        ("unknown ACL scheme", vec![(31, "nosuch", "x")]),
        ("world ACL with another id", vec![(31, "world", "someone")]),
        ("zero perms", vec![(0, "world", "anyone")]),
        ("perms past ALL", vec![(0x7fff, "world", "anyone")]),
        ("negative perms", vec![(-1, "world", "anyone")]),
        ("ip ACL that is no address", vec![(31, "ip", "not-an-ip")]),
        ("ip ACL with a bad mask", vec![(31, "ip", "10.0.0.0/99")]),
        (
            "digest ACL without a colon",
            vec![(31, "digest", "nocolon")],
        ),
        ("auth ACL unauthenticated", vec![(31, "auth", "")]),
    ];
    for (name, acl) in acl_cases {
        v.push((
            format!("create, {name}"),
            1,
            create(b"/probe/acl", Some(b"d"), acl, 0),
        ));
        let mut b = Vec::new();
        path(&mut b, b"/probe/a/b");
        acls(&mut b, acl);
        put_i32(&mut b, -1);
        v.push((format!("setACL, {name}"), 7, b));
    }
    // Versions and flags.
    v.push(("setData, version -2".into(), 5, set_data(b"/probe/a", -2)));
    v.push((
        "delete, version -7".into(),
        2,
        path_version(b"/probe/a/b", -7),
    ));
    v.push((
        "setData, version i32::MAX".into(),
        5,
        set_data(b"/probe/a", i32::MAX),
    ));
    for (name, flags) in [
        ("unknown create flags 7", 7),
        ("negative create flags", -1),
        ("create flags 99", 99),
    ] {
        v.push((
            format!("create, {name}"),
            1,
            create(b"/probe/f", Some(b"d"), &open_acl(), flags),
        ));
    }
    v.push((
        "create, sequential under a missing parent".into(),
        1,
        create(b"/probe/none/s", Some(b"d"), &open_acl(), 2),
    ));
    v.push((
        "create, sequential with a trailing slash".into(),
        1,
        create(b"/probe/a/", Some(b"d"), &open_acl(), 2),
    ));
    v.push((
        "createContainer, sequential flags".into(),
        19,
        create(b"/probe/c", Some(b"d"), &open_acl(), 2),
    ));
    v.push((
        "createContainer, ephemeral-sequential flags".into(),
        19,
        create(b"/probe/ce", Some(b"d"), &open_acl(), 3),
    ));
    v.push((
        "createContainer, empty data".into(),
        19,
        create(b"/probe/cd", None, &open_acl(), 4),
    ));
    v.push((
        "create2, container flags".into(),
        15,
        create(b"/probe/c2", Some(b"d"), &open_acl(), 4),
    ));
    v.push((
        "create2, TTL flags".into(),
        15,
        create(b"/probe/t2", Some(b"d"), &open_acl(), 5),
    ));
    for (name, flags, ttl) in [
        ("TTL 0", 5, 0),
        ("TTL -1", 5, -1),
        ("TTL past the maximum", 5, 1 << 40),
        ("ephemeral flags", 1, 1000),
        ("container flags", 4, 1000),
        ("sequential TTL flags", 6, 1000),
    ] {
        v.push((
            format!("createTTL, {name}"),
            21,
            create_ttl(b"/probe/ttl", flags, ttl),
        ));
    }
    // Multi.
    v.push(("multi, empty".into(), 14, multi(&[])));
    for (name, op, flags) in [
        ("create op with unknown flags", 1, 7),
        ("create op with TTL flags", 1, 5),
        ("create op with container flags", 1, 4),
        ("createContainer op with ephemeral flags", 19, 1),
        ("createContainer op with persistent flags", 19, 0),
    ] {
        let p = format!("/probe/m{op}f{flags}");
        v.push((
            format!("multi, {name}"),
            14,
            multi(&[(op, create(p.as_bytes(), Some(b"d"), &open_acl(), flags))]),
        ));
    }
    v.push((
        "multi, createTTL op with TTL flags".into(),
        14,
        multi(&[(21, create_ttl(b"/probe/mttl", 5, 1000))]),
    ));
    v.push((
        "multi, createTTL op with persistent flags".into(),
        14,
        multi(&[(21, create_ttl(b"/probe/mttl0", 0, 1000))]),
    ));
    v.push(("multi, nested multi".into(), 14, {
        let inner = multi(&[(13, path_version(b"/probe", -1))]);
        multi(&[(14, inner)])
    }));
    v.push((
        "multi, a getData op".into(),
        14,
        multi(&[(4, path_watch(b"/probe"))]),
    ));
    v.push((
        "multi, an unknown op".into(),
        14,
        multi(&[(77, path_only(b"/probe"))]),
    ));
    v.push((
        "multi, a check with a bad path".into(),
        14,
        multi(&[(13, path_version(b"/probe/", -1))]),
    ));
    v.push(("multi, no end header".into(), 14, {
        let mut b = Vec::new();
        put_i32(&mut b, 13);
        put_bool(&mut b, false);
        put_i32(&mut b, -1);
        b.extend_from_slice(&path_version(b"/probe", -1));
        b
    }));
    v.push(("multi, garbage op body".into(), 14, {
        let mut b = Vec::new();
        put_i32(&mut b, 2);
        put_bool(&mut b, false);
        put_i32(&mut b, -1);
        put_i32(&mut b, 1000);
        b
    }));
    v.push((
        "multiRead, a write".into(),
        22,
        multi(&[(2, path_version(b"/probe/a/b", -1))]),
    ));
    v.push((
        "multiRead, a read, then a write".into(),
        22,
        multi(&[
            (4, path_watch(b"/probe")),
            (2, path_version(b"/probe/none", -1)),
        ]),
    ));
    v.push((
        "multiRead, a read that fails, then a write".into(),
        22,
        multi(&[
            (4, path_watch(b"/probe/none")),
            (2, path_version(b"/probe/none", -1)),
        ]),
    ));
    v.push((
        "multiRead, a check".into(),
        22,
        multi(&[(13, path_version(b"/probe", -1))]),
    ));
    v.push((
        "multiRead, a read of a bad path".into(),
        22,
        multi(&[(4, path_watch(b"probe"))]),
    ));
    v.push((
        "check outside a multi".into(),
        13,
        path_version(b"/probe", -1),
    ));
    v.push((
        "check outside a multi that fails".into(),
        13,
        path_version(b"/probe", 7),
    ));
    // Watches.
    for (name, p) in [
        ("empty", &b""[..]),
        ("relative", b"probe"),
        ("trailing slash", b"/probe/"),
    ] {
        let (op, b) = set_watches(101, &[&[p], &[p], &[p]]);
        v.push((format!("setWatches, {name} path"), op, b));
        let (op, b) = set_watches(105, &[&[p], &[p], &[p], &[p], &[p]]);
        v.push((format!("setWatches2, {name} path"), op, b));
        let mut b = path_only(p);
        put_i32(&mut b, 0);
        v.push((format!("addWatch, {name} path"), 106, b));
        let mut b = path_only(p);
        put_i32(&mut b, 3);
        v.push((format!("checkWatches, {name} path"), 17, b));
    }
    let mut b = path_only(b"probe/a");
    put_i32(&mut b, 3);
    v.push((
        "checkWatches, inner slash only, after recursive watches were held".into(),
        17,
        b,
    ));
    let mut b = path_only(b"/probe");
    put_i32(&mut b, 7);
    v.push(("addWatch, unknown mode".into(), 106, b));
    let mut b = path_only(b"/probe");
    put_i32(&mut b, 9);
    v.push(("removeWatches, unknown type".into(), 18, b));
    v.push(("setWatches, negative count".into(), 101, {
        let mut b = Vec::new();
        put_i64(&mut b, 0);
        for _ in 0..3 {
            put_i32(&mut b, -3);
        }
        b
    }));
    // Other opcodes.
    v.push((
        "getEphemerals, relative prefix".into(),
        103,
        path_only(b"probe"),
    ));
    v.push((
        "getAllChildrenNumber, empty path".into(),
        104,
        path_only(b""),
    ));
    v.push((
        "deleteContainer of a persistent node".into(),
        20,
        path_only(b"/probe/a/b"),
    ));
    v.push(("auth, unknown scheme".into(), 100, {
        let mut b = Vec::new();
        put_i32(&mut b, 0);
        put_buf(&mut b, Some(b"nosuch"));
        put_buf(&mut b, Some(b"x"));
        b
    }));
    v.push(("auth, digest without a colon".into(), 100, {
        let mut b = Vec::new();
        put_i32(&mut b, 0);
        put_buf(&mut b, Some(b"digest"));
        put_buf(&mut b, Some(b"nocolon"));
        b
    }));
    v.push(("unknown opcode 9999".into(), 9999, Vec::new()));
    v.push(("opcode -1 (error)".into(), -1, Vec::new()));
    v.push(("opcode 102 (SASL) without SASL".into(), 102, {
        let mut b = Vec::new();
        put_buf(&mut b, Some(b"token"));
        b
    }));
    v.push(("opcode 16 (reconfig) standalone".into(), 16, {
        let mut b = Vec::new();
        put_buf(&mut b, None);
        put_buf(&mut b, None);
        put_buf(&mut b, None);
        put_i64(&mut b, -1);
        b
    }));
    v.push(("opcode 0 (notification)".into(), 0, Vec::new()));
    v.push(("opcode -10 (createSession)".into(), -10, Vec::new()));
    let mut out: Vec<Probe> = v.into_iter().map(|(d, op, b)| (d, op, b, None)).collect();
    // Frames too short for a request header.
    let mut payload = Vec::new();
    put_i32(&mut payload, 1);
    put_i32(&mut payload, 22);
    payload.extend_from_slice(&multi(&[
        (4, path_watch(b"/probe/none")),
        (2, path_version(b"/probe/none", -1)),
    ]));
    out.push((
        "multiRead, a read that fails, then a write (raw)".into(),
        0,
        Vec::new(),
        Some(frame(&payload)),
    ));
    out.push(("frame of 0 bytes".into(), 0, Vec::new(), Some(frame(&[]))));
    out.push((
        "frame of 4 bytes (an xid alone)".into(),
        0,
        Vec::new(),
        Some(frame(&7i32.to_be_bytes())),
    ));
    out
}
