//! The seeded generator of the differential test: a sequence of requests,
//! each already encoded as the bytes a client would send, so that invalid
//! arguments (null buffers, invalid UTF-8, out-of-range flags) reach the
//! server unfiltered.

/// How many sessions a sequence uses.
pub const SESSIONS: usize = 3;

/// jute.maxbuffer's default on both systems (0xfffff bytes).
const MAX_BUFFER: usize = 0xfffff;

pub use crate::common::Rng;

/// One step of a sequence.
#[derive(Clone, Debug)]
pub enum Step {
    /// A request on session `session`: opcode and body.
    Req {
        session: usize,
        op: i32,
        body: Vec<u8>,
        desc: String,
    },
    /// closeSession on `session`; the slot then gets a new session.
    Close { session: usize },
}

// --- jute encoding -------------------------------------------------------

pub fn put_i32(b: &mut Vec<u8>, v: i32) {
    b.extend_from_slice(&v.to_be_bytes());
}
pub fn put_i64(b: &mut Vec<u8>, v: i64) {
    b.extend_from_slice(&v.to_be_bytes());
}
pub fn put_bool(b: &mut Vec<u8>, v: bool) {
    b.push(v as u8);
}
/// A buffer or ustring; `None` is jute's null (length -1).
pub fn put_buf(b: &mut Vec<u8>, v: Option<&[u8]>) {
    match v {
        None => put_i32(b, -1),
        Some(v) => {
            put_i32(b, v.len() as i32);
            b.extend_from_slice(v);
        }
    }
}

/// A path as bytes (possibly invalid UTF-8), with a short description.
#[derive(Clone, Debug)]
pub struct P(pub Vec<u8>);

impl P {
    fn show(&self) -> String {
        let s = String::from_utf8_lossy(&self.0);
        if s.chars().count() > 60 {
            let head: String = s.chars().take(40).collect();
            format!("{head:?}..({} bytes)", self.0.len())
        } else {
            format!("{s:?}")
        }
    }
}

#[derive(Clone, Debug)]
pub struct Acl {
    perms: i32,
    scheme: &'static str,
    id: &'static str,
}

fn put_acls(b: &mut Vec<u8>, acls: &Option<Vec<Acl>>) {
    match acls {
        None => put_i32(b, -1),
        Some(v) => {
            put_i32(b, v.len() as i32);
            for a in v {
                put_i32(b, a.perms);
                put_buf(b, Some(a.scheme.as_bytes()));
                put_buf(b, Some(a.id.as_bytes()));
            }
        }
    }
}

fn show_acls(acls: &Option<Vec<Acl>>) -> String {
    match acls {
        None => "null".into(),
        Some(v) => {
            let parts: Vec<String> = v
                .iter()
                .map(|a| format!("{}:{}:{}", a.scheme, a.id, a.perms))
                .collect();
            format!("[{}]", parts.join(","))
        }
    }
}

// --- the generator -------------------------------------------------------

/// Generates the sequence of `ops` steps for `seed`, under the root
/// `/s<seed>` (which step 0 creates).
pub struct Gen {
    rng: Rng,
    root: String,
}

/// The names a path is made of: a small set, so requests collide.
const NAMES: &[&str] = &[
    "a",
    "b",
    "c",
    "a.b",
    "ü",
    "日本",
    "x y",
    "...",
    "-",
    "zookeeper",
    "a1",
];

/// Names that ZooKeeper's path rules refuse or that probe their edges:
/// "." and "..", control characters, C1 controls, the private-use area,
/// U+FFF0..U+FFFF, and supplementary-plane characters (a surrogate pair in
/// Java). Each is a valid UTF-8 string.
const ODD_NAMES: &[&str] = &[
    ".",
    "..",
    "\u{1}",
    "a\u{1f}",
    "\u{7f}",
    "\u{9f}",
    "\u{a0}",
    "\u{d7ff}",
    "\u{e000}",
    "\u{f8ff}",
    "\u{f900}",
    "\u{ffef}",
    "\u{fff0}",
    "\u{fffd}",
    "\u{ffff}",
    "😀",
    "\u{10000}",
    "\u{10ffff}",
    "a\0b",
    "\u{200b}",
    "\u{202e}",
];

impl Gen {
    pub fn new(seed: u64) -> Gen {
        Gen {
            rng: Rng::new(seed),
            root: format!("/s{seed}"),
        }
    }

    pub fn root(&self) -> &str {
        &self.root
    }

    /// The steps of the sequence (the first creates the root).
    pub fn steps(&mut self, n: usize) -> Vec<Step> {
        let mut out = Vec::with_capacity(n + 1);
        let mut body = Vec::new();
        put_buf(&mut body, Some(self.root.as_bytes()));
        put_buf(&mut body, Some(b""));
        put_acls(
            &mut body,
            &Some(vec![Acl {
                perms: 31,
                scheme: "world",
                id: "anyone",
            }]),
        );
        put_i32(&mut body, 0);
        out.push(Step::Req {
            session: 0,
            op: 1,
            body,
            desc: format!("create {}", self.root),
        });
        for _ in 0..n {
            out.push(self.step());
        }
        out
    }

    /// A valid path under the root: 1..=3 components from NAMES.
    fn valid_path(&mut self) -> String {
        let depth = 1 + self.rng.below(3);
        let mut p = self.root.clone();
        for _ in 0..depth {
            p.push('/');
            p.push_str(self.rng.pick(NAMES));
            if self.rng.chance(40) {
                break;
            }
        }
        p
    }

    fn path(&mut self) -> P {
        match self.rng.below(100) {
            0..=79 => P(self.valid_path().into_bytes()),
            80..=89 => {
                let mut p = if self.rng.chance(50) {
                    self.root.clone()
                } else {
                    self.valid_path()
                };
                p.push('/');
                p.push_str(self.rng.pick(ODD_NAMES));
                P(p.into_bytes())
            }
            90 => P(Vec::new()),
            91 => P(format!("{}/", self.valid_path()).into_bytes()),
            92 => P(self.valid_path().replacen('/', "//", 2).into_bytes()),
            93 => P(self.valid_path().as_bytes()[1..].to_vec()),
            94 => P(b"/".to_vec()),
            95 => {
                // Invalid UTF-8: a stray continuation byte, a truncated
                // sequence, an encoded surrogate (CESU-8), an overlong '/'.
                let mut p = format!("{}/", self.root).into_bytes();
                let bad: &[&[u8]] = &[b"\x80", b"\xe6\x97", b"\xed\xa0\x80", b"\xc0\xaf", b"\xff"];
                p.extend_from_slice(self.rng.pick(bad));
                P(p)
            }
            96 => {
                // A long name: node names have no length limit of their own.
                let n = self.rng.pick(&[
                    255usize,
                    256,
                    1024,
                    4096,
                    65_536,
                    MAX_BUFFER - 100,
                    MAX_BUFFER,
                ]);
                P(format!("{}/{}", self.root, "n".repeat(n)).into_bytes())
            }
            _ => P(format!("{}/{}", self.valid_path(), self.rng.pick(NAMES)).into_bytes()),
        }
    }

    fn data(&mut self) -> (Option<Vec<u8>>, String) {
        match self.rng.below(100) {
            0..=9 => (None, "null".into()),
            10..=24 => (Some(Vec::new()), "empty".into()),
            25..=98 => {
                let n = 1 + self.rng.below(64);
                let v: Vec<u8> = (0..n).map(|_| self.rng.next() as u8).collect();
                (Some(v), format!("{n} bytes"))
            }
            _ => {
                // Near jute.maxbuffer: the frame holding it is at most a
                // few hundred bytes larger than the data, so some of these
                // fit and some do not.
                let n = self.rng.pick(&[
                    MAX_BUFFER - 4096,
                    MAX_BUFFER - 200,
                    MAX_BUFFER - 60,
                    MAX_BUFFER - 30,
                    MAX_BUFFER,
                    MAX_BUFFER + 1,
                ]);
                (Some(vec![b'z'; n]), format!("{n} bytes"))
            }
        }
    }

    fn version(&mut self) -> i32 {
        self.rng
            .pick(&[-1, -1, -1, 0, 0, 1, 2, 3, -2, i32::MAX, i32::MIN])
    }

    fn acls(&mut self) -> Option<Vec<Acl>> {
        let r = self.rng.below(100);
        if r < 55 {
            return Some(vec![Acl {
                perms: 31,
                scheme: "world",
                id: "anyone",
            }]);
        }
        if r < 58 {
            return None;
        }
        if r < 62 {
            return Some(Vec::new());
        }
        let n = 1 + self.rng.below(3);
        let ids: &[(&str, &str)] = &[
            ("world", "anyone"),
            ("world", "anyone"),
            ("world", "someone"),
            ("auth", ""),
            ("auth", "x"),
            ("digest", "super:D/InIHSb7yEEbrWz8b9l71RjZJU="),
            ("digest", "user:x"),
            ("digest", "nocolon"),
            ("ip", "127.0.0.1"),
            ("ip", "10.0.0.0/8"),
            ("ip", "127.0.0.1/33"),
            ("ip", "not-an-ip"),
            ("sasl", "someone"),
            ("x509", "CN=x"),
            ("foo", "bar"),
            ("", ""),
        ];
        Some(
            (0..n)
                .map(|_| {
                    let (scheme, id) = self.rng.pick(ids);
                    let perms = if self.rng.chance(70) {
                        self.rng.below(32) as i32
                    } else {
                        self.rng
                            .pick(&[31, 32, 33, 63, 255, -1, i32::MAX, i32::MIN])
                    };
                    Acl { perms, scheme, id }
                })
                .collect(),
        )
    }

    /// Create flags for a create (op 1) or create2 (op 15): mostly the
    /// four plain modes, now and then the container or a TTL mode (the
    /// opcode, or inside a multi the flags, decide what is made) or an
    /// unknown number.
    fn flags(&mut self) -> i32 {
        match self.rng.below(100) {
            0..=89 => self.rng.below(4) as i32,
            90..=95 => self.rng.pick(&[4, 5, 6]),
            _ => self.rng.pick(&[-1, 7, 8, 16, 100, i32::MAX, i32::MIN]),
        }
    }

    fn ttl(&mut self) -> i64 {
        self.rng.pick(&[
            -1,
            0,
            1,
            1000,
            3_600_000,
            (1i64 << 40) - 1,
            1i64 << 40,
            i64::MAX,
            i64::MIN,
        ])
    }

    /// A create-like body: (opcode, body, description).
    fn create(&mut self) -> (i32, Vec<u8>, String) {
        let op = self.rng.pick(&[1, 1, 15, 15, 19, 21]);
        let path = self.path();
        let (data, dd) = self.data();
        let acls = self.acls();
        let flags = match op {
            19 if self.rng.chance(85) => 4,
            21 if self.rng.chance(85) => self.rng.pick(&[5, 6]),
            _ => self.flags(),
        };
        let mut b = Vec::new();
        put_buf(&mut b, Some(&path.0));
        put_buf(&mut b, data.as_deref());
        put_acls(&mut b, &acls);
        put_i32(&mut b, flags);
        let mut desc = format!(
            "create(op {op}) {} data={dd} acl={} flags={flags}",
            path.show(),
            show_acls(&acls)
        );
        if op == 21 {
            let mut ttl = self.ttl();
            // A non-TTL mode with a negative TTL breaks ZooKeeper's
            // apply (docs/COMPATIBILITY.md, "Not fixed"): not sent.
            if !matches!(flags, 5 | 6) && ttl < 0 {
                ttl = self.rng.pick(&[1, 1000, i64::MAX]);
            }
            put_i64(&mut b, ttl);
            desc.push_str(&format!(" ttl={ttl}"));
        }
        (op, b, desc)
    }

    fn path_version(&mut self, op: i32, name: &str) -> (i32, Vec<u8>, String) {
        let p = self.path();
        let v = self.version();
        let mut b = Vec::new();
        put_buf(&mut b, Some(&p.0));
        put_i32(&mut b, v);
        (op, b, format!("{name} {} v={v}", p.show()))
    }

    fn set_data(&mut self) -> (i32, Vec<u8>, String) {
        let p = self.path();
        let (data, dd) = self.data();
        let v = self.version();
        let mut b = Vec::new();
        put_buf(&mut b, Some(&p.0));
        put_buf(&mut b, data.as_deref());
        put_i32(&mut b, v);
        (5, b, format!("setData {} data={dd} v={v}", p.show()))
    }

    /// A path for a read, which ZooKeeper does not validate ("" reads
    /// as the root, as in ZooKeeper's DataTree).
    fn read_path(&mut self) -> P {
        self.path()
    }

    fn path_watch(&mut self, op: i32, name: &str) -> (i32, Vec<u8>, String) {
        let p = self.read_path();
        let w = self.rng.chance(50);
        let mut b = Vec::new();
        put_buf(&mut b, Some(&p.0));
        put_bool(&mut b, w);
        (op, b, format!("{name} {} watch={w}", p.show()))
    }

    fn path_only(&mut self, op: i32, name: &str) -> (i32, Vec<u8>, String) {
        let p = if op == 104 && self.rng.chance(5) {
            P(b"/".to_vec())
        } else if matches!(op, 6 | 104) {
            self.read_path()
        } else {
            self.path()
        };
        let mut b = Vec::new();
        put_buf(&mut b, Some(&p.0));
        (op, b, format!("{name} {}", p.show()))
    }

    fn path_int(&mut self, op: i32, name: &str, values: &[i32]) -> (i32, Vec<u8>, String) {
        let p = self.path();
        let v = self.rng.pick(values);
        let mut b = Vec::new();
        put_buf(&mut b, Some(&p.0));
        put_i32(&mut b, v);
        (op, b, format!("{name} {} {v}", p.show()))
    }

    /// A multi (14) of write ops or a multiRead (22) of read ops, now and
    /// then with an op of the other kind or an unknown one inside.
    fn multi(&mut self, read: bool) -> (i32, Vec<u8>, String) {
        let n = self.rng.below(6);
        let mut b = Vec::new();
        let mut descs = Vec::new();
        for _ in 0..n {
            let (op, body, d) = if read {
                // Now and then a write, which stops the multiRead.
                match self.rng.below(20) {
                    0..=9 => self.path_watch(4, "getData"),
                    10..=18 => self.path_watch(8, "getChildren"),
                    _ => self.write_op(),
                }
            } else {
                match self.rng.below(20) {
                    0..=18 => self.write_op(),
                    _ => self.path_watch(4, "getData"),
                }
            };
            put_i32(&mut b, op);
            put_bool(&mut b, false);
            put_i32(&mut b, -1);
            b.extend_from_slice(&body);
            descs.push(d);
        }
        put_i32(&mut b, -1);
        put_bool(&mut b, true);
        put_i32(&mut b, -1);
        let (op, name) = if read {
            (22, "multiRead")
        } else {
            (14, "multi")
        };
        (op, b, format!("{name} [{}]", descs.join("; ")))
    }

    fn write_op(&mut self) -> (i32, Vec<u8>, String) {
        match self.rng.below(10) {
            0..=3 => self.create(),
            4..=5 => self.path_version(2, "delete"),
            6..=7 => self.set_data(),
            _ => self.path_version(13, "check"),
        }
    }

    fn set_watches(&mut self) -> (i32, Vec<u8>, String) {
        let v2 = self.rng.chance(50);
        let rel = self.rng.pick(&[0i64, i64::MAX]);
        let lists = if v2 { 5 } else { 3 };
        let mut b = Vec::new();
        put_i64(&mut b, rel);
        let mut descs = Vec::new();
        for _ in 0..lists {
            let n = self.rng.below(3);
            put_i32(&mut b, n as i32);
            let mut l = Vec::new();
            for _ in 0..n {
                let p = if self.rng.chance(90) {
                    P(self.valid_path().into_bytes())
                } else {
                    self.read_path()
                };
                put_buf(&mut b, Some(&p.0));
                l.push(p.show());
            }
            descs.push(format!("[{}]", l.join(",")));
        }
        let (op, name) = if v2 {
            (105, "setWatches2")
        } else {
            (101, "setWatches")
        };
        (op, b, format!("{name} rel={rel} {}", descs.join(" ")))
    }

    fn step(&mut self) -> Step {
        let session = self.rng.below(SESSIONS);
        let (op, body, desc) = match self.rng.below(200) {
            0..=39 => self.create(),
            40..=54 => self.path_version(2, "delete"),
            55..=64 => self.path_watch(3, "exists"),
            65..=79 => self.path_watch(4, "getData"),
            80..=94 => self.set_data(),
            95..=99 => self.path_only(6, "getACL"),
            100..=107 => {
                let p = self.path();
                let acls = self.acls();
                let v = self.version();
                let mut b = Vec::new();
                put_buf(&mut b, Some(&p.0));
                put_acls(&mut b, &acls);
                put_i32(&mut b, v);
                (
                    7,
                    b,
                    format!("setACL {} {} v={v}", p.show(), show_acls(&acls)),
                )
            }
            108..=115 => self.path_watch(8, "getChildren"),
            116..=121 => self.path_watch(12, "getChildren2"),
            122..=123 => self.path_only(9, "sync"),
            // No check outside a multi: wazoo answers it as ZooKeeper 3.9.3
            // does, not as 3.8 (ZOOKEEPER-2623; the probe covers it).
            124..=125 => self.path_watch(3, "exists"),
            126..=139 => self.multi(false),
            140..=145 => self.multi(true),
            146..=157 => {
                let (op, name) = if self.rng.chance(40) {
                    (17, "checkWatches")
                } else {
                    (18, "removeWatches")
                };
                // Children (1) and Data (2) also match (and remove half of)
                // a persistent watch, as in ZooKeeper 3.8 (core::watch).
                let types: &[i32] = &[1, 1, 2, 2, 3, 3, 0, 4, 5, 6, -1];
                self.path_int(op, name, types)
            }
            158..=167 => {
                let p = self.read_path();
                let mode = if self.rng.chance(90) {
                    self.rng.pick(&[0, 1])
                } else {
                    self.rng.pick(&[2, 3, -1, i32::MAX])
                };
                let mut b = Vec::new();
                put_buf(&mut b, Some(&p.0));
                put_i32(&mut b, mode);
                (106, b, format!("addWatch {} {mode}", p.show()))
            }
            168..=171 => self.set_watches(),
            172..=174 => {
                let prefix = if self.rng.chance(70) {
                    P(self.valid_path().into_bytes())
                } else {
                    self.path()
                };
                let mut b = Vec::new();
                put_buf(&mut b, Some(&prefix.0));
                (103, b, format!("getEphemerals {}", prefix.show()))
            }
            175..=177 => self.path_only(104, "getAllChildrenNumber"),
            178 => (107, Vec::new(), "whoAmI".into()),
            179..=182 => {
                // addauth digest: the super user, a plain user.
                let who = self.rng.pick(&["super:test", "user:x", "user:y"]);
                let mut b = Vec::new();
                put_i32(&mut b, 0);
                put_buf(&mut b, Some(b"digest"));
                put_buf(&mut b, Some(who.as_bytes()));
                (100, b, format!("addauth digest {who}"))
            }
            183..=184 => return Step::Close { session },
            185 => self.path_only(20, "deleteContainer"),
            186 => {
                // reconfig: off on both (standalone, reconfigEnabled unset).
                let mut b = Vec::new();
                let joining = self.rng.pick(&["", "server.9=127.0.0.1:1:2;3"]);
                put_buf(&mut b, Some(joining.as_bytes()));
                put_buf(&mut b, Some(b""));
                put_buf(&mut b, None);
                put_i64(&mut b, -1);
                (16, b, format!("reconfig joining={joining:?}"))
            }
            187 => (11, Vec::new(), "ping".into()),
            _ => self.create(),
        };
        Step::Req {
            session,
            op,
            body,
            desc,
        }
    }
}
