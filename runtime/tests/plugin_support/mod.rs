//! Shared helpers of the plugin_* tests: an in-memory tree that implements
//! `RecipeHost` (a TEST DOUBLE for the request pipeline's prep view, not the
//! real integration), WAT module builders and the SDK-built recipes.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::OnceLock;
use wazoo_proto::ErrorCode;
use wazoo_runtime::abi::{
    self, AclEntry, CreateMode, Manifest, NodeStat, Reply, ABI_MAJOR, ABI_MINOR,
};
use wazoo_runtime::RecipeHost;

/// TEST DOUBLE of the pipeline's prep view: a plain tree applied in place.
/// Tests clone it before a call and keep the clone only if the call
/// succeeded, which is what "staged, one txn or nothing" means.
#[derive(Clone, Debug, Default)]
pub struct MemTree {
    pub nodes: BTreeMap<String, (Vec<u8>, NodeStat)>,
    pub session: i64,
    pub zxid: i64,
    /// (path, token, is_child_watch)
    pub watches: Vec<(String, String, bool)>,
    pub notifications: Vec<(i64, Vec<u8>)>,
    pub seq: BTreeMap<String, i32>,
    /// The ACL each node was created with, as the guest gave it (MemTree
    /// checks none: the core's prep host does).
    pub acls: BTreeMap<String, Option<Vec<AclEntry>>>,
}

fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

impl MemTree {
    pub fn new(session: i64) -> MemTree {
        let mut t = MemTree {
            session,
            ..Default::default()
        };
        t.nodes
            .insert("/".into(), (Vec::new(), NodeStat::default()));
        t
    }
    fn children_of(&self, path: &str) -> Vec<String> {
        let prefix = if path == "/" {
            "/".to_string()
        } else {
            format!("{path}/")
        };
        self.nodes
            .keys()
            .filter(|k| {
                k.len() > prefix.len() && k.starts_with(&prefix) && !k[prefix.len()..].contains('/')
            })
            .map(|k| k[prefix.len()..].to_string())
            .collect()
    }
    fn valid(path: &str) -> Result<(), ErrorCode> {
        if !path.starts_with('/') || (path.len() > 1 && path.ends_with('/')) || path.contains("//")
        {
            return Err(ErrorCode::BadArguments);
        }
        Ok(())
    }
    pub fn data(&self, path: &str) -> Option<&[u8]> {
        self.nodes.get(path).map(|(d, _)| d.as_slice())
    }
}

impl RecipeHost for MemTree {
    fn get(&mut self, path: &str, watch: Option<&str>) -> Result<(Vec<u8>, NodeStat), ErrorCode> {
        Self::valid(path)?;
        let r = self.nodes.get(path).cloned().ok_or(ErrorCode::NoNode)?;
        if let Some(t) = watch {
            self.watches.push((path.into(), t.into(), false));
        }
        Ok(r)
    }
    fn children(&mut self, path: &str, watch: Option<&str>) -> Result<Vec<String>, ErrorCode> {
        Self::valid(path)?;
        if !self.nodes.contains_key(path) {
            return Err(ErrorCode::NoNode);
        }
        if let Some(t) = watch {
            self.watches.push((path.into(), t.into(), true));
        }
        Ok(self.children_of(path))
    }
    fn exists(&mut self, path: &str, watch: Option<&str>) -> Result<Option<NodeStat>, ErrorCode> {
        Self::valid(path)?;
        if let Some(t) = watch {
            self.watches.push((path.into(), t.into(), false));
        }
        Ok(self.nodes.get(path).map(|(_, s)| *s))
    }
    fn create(
        &mut self,
        path: &str,
        data: &[u8],
        mode: CreateMode,
        acl: Option<&[AclEntry]>,
    ) -> Result<String, ErrorCode> {
        Self::valid(path)?;
        let p = parent(path).to_string();
        if !self.nodes.contains_key(&p) {
            return Err(ErrorCode::NoNode);
        }
        let path = if mode.is_sequential() {
            let n = self.seq.entry(p.clone()).or_insert(0);
            *n += 1;
            format!("{path}{:010}", *n - 1)
        } else {
            path.to_string()
        };
        if self.nodes.contains_key(&path) {
            return Err(ErrorCode::NodeExists);
        }
        self.acls.insert(path.clone(), acl.map(<[_]>::to_vec));
        self.zxid += 1;
        let stat = NodeStat {
            czxid: self.zxid,
            mzxid: self.zxid,
            pzxid: self.zxid,
            ephemeral_owner: if mode.is_ephemeral() { self.session } else { 0 },
            data_length: data.len() as i32,
            ..Default::default()
        };
        self.nodes.insert(path.clone(), (data.to_vec(), stat));
        let ps = &mut self.nodes.get_mut(&p).unwrap().1;
        ps.cversion += 1;
        ps.num_children += 1;
        Ok(path)
    }
    fn set(&mut self, path: &str, data: &[u8], version: i32) -> Result<NodeStat, ErrorCode> {
        Self::valid(path)?;
        self.zxid += 1;
        let zxid = self.zxid;
        let (d, s) = self.nodes.get_mut(path).ok_or(ErrorCode::NoNode)?;
        if version != -1 && version != s.version {
            return Err(ErrorCode::BadVersion);
        }
        *d = data.to_vec();
        s.version += 1;
        s.mzxid = zxid;
        s.data_length = data.len() as i32;
        Ok(*s)
    }
    fn delete(&mut self, path: &str, version: i32) -> Result<(), ErrorCode> {
        Self::valid(path)?;
        let s = self.nodes.get(path).ok_or(ErrorCode::NoNode)?.1;
        if version != -1 && version != s.version {
            return Err(ErrorCode::BadVersion);
        }
        if !self.children_of(path).is_empty() {
            return Err(ErrorCode::NotEmpty);
        }
        self.nodes.remove(path);
        let ps = &mut self.nodes.get_mut(parent(path)).unwrap().1;
        ps.cversion += 1;
        ps.num_children -= 1;
        Ok(())
    }
    fn check(&mut self, path: &str, version: i32) -> Result<(), ErrorCode> {
        let s = self.nodes.get(path).ok_or(ErrorCode::NoNode)?.1;
        if version != -1 && version != s.version {
            return Err(ErrorCode::BadVersion);
        }
        Ok(())
    }
    fn notify(&mut self, session: i64, payload: &[u8]) -> Result<(), ErrorCode> {
        self.notifications.push((session, payload.to_vec()));
        Ok(())
    }
}

/// MessagePack of a value (the ABI encoding).
pub fn mp<T: serde::Serialize + ?Sized>(v: &T) -> Vec<u8> {
    abi::encode(v).unwrap()
}

/// Decodes a `Reply::Done` value.
pub fn done<T: serde::de::DeserializeOwned>(r: &Reply) -> T {
    match r {
        Reply::Done(v) => abi::decode(v).unwrap(),
        other => panic!("expected Done, got {other:?}"),
    }
}

/// Escapes bytes for a WAT string literal.
pub fn wat_bytes(b: &[u8]) -> String {
    b.iter().map(|x| format!("\\{x:02x}")).collect()
}

pub fn manifest(name: &str, version: &str, methods: &[&str], prefixes: &[&str]) -> Manifest {
    Manifest {
        abi: (ABI_MAJOR, ABI_MINOR),
        name: name.into(),
        version: version.into(),
        methods: methods.iter().map(|s| s.to_string()).collect(),
        prefixes: prefixes.iter().map(|s| s.to_string()).collect(),
        on_watch: false,
    }
}

/// A hand-written module: a bump allocator, `memory` (2 pages), a data
/// segment at 1024 holding `data`, the manifest, `extra` items (imports go
/// there too: WAT allows them anywhere) and `call` with `body`.
/// `$DATA_LEN` in the body is replaced by `data.len()`.
pub fn wat_module(m: &Manifest, extra: &str, body: &str, data: &[u8]) -> Vec<u8> {
    let body = body.replace("$DATA_LEN", &data.len().to_string());
    let text = format!(
        r#"(module
  {extra}
  (memory (export "memory") 2)
  (global $bump (mut i32) (i32.const 65536))
  (func $alloc (export "alloc") (param $n i32) (result i32)
    (local $p i32)
    (local.set $p (global.get $bump))
    (global.set $bump (i32.add (global.get $bump) (local.get $n)))
    (local.get $p))
  (func (export "call") (param $ptr i32) (param $len i32) (result i64)
    {body})
  (data (i32.const 1024) "{data}")
  (@custom "wazoo:recipe" "{manifest}")
)"#,
        data = wat_bytes(data),
        manifest = wat_bytes(&mp(m)),
    );
    wat::parse_str(&text).unwrap_or_else(|e| panic!("bad WAT: {e}\n{text}"))
}

/// The body returning the data segment (at 1024) as the reply.
pub const RETURN_DATA: &str =
    "(i64.or (i64.shl (i64.const 1024) (i64.const 32)) (i64.const $DATA_LEN))";

/// A well-behaved WAT module answering every call with `Done(value)`.
pub fn good_module(name: &str, version: &str, value: &str) -> Vec<u8> {
    let reply = mp(&Reply::Done(mp(value)));
    wat_module(
        &manifest(name, version, &["get"], &[]),
        "",
        RETURN_DATA,
        &reply,
    )
}

/// The built-in recipe modules (docs/BUILTIN_RECIPES.md), as named in
/// recipes-wasm/ (NAME.wasm).
pub const BUILTIN_MODULES: &[&str] = &[
    "lock",
    "rwlock",
    "semaphore",
    "queue",
    "barrier",
    "double_barrier",
    "twophase",
    "election",
    "group",
];

/// Builds the recipes in recipes-wasm/ (once per test process) and returns
/// the directory holding NAME.wasm.
pub fn recipes_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap()
            .to_path_buf();
        let out = repo.join("target").join("recipes-test");
        let status = std::process::Command::new("bash")
            .arg(repo.join("scripts/build-recipes.sh"))
            .arg(&out)
            .status()
            .expect("run scripts/build-recipes.sh");
        assert!(
            status.success(),
            "scripts/build-recipes.sh failed (is the wasm32-unknown-unknown target installed?)"
        );
        out
    })
    .clone()
}

pub fn recipe_bytes(name: &str) -> Vec<u8> {
    std::fs::read(recipes_dir().join(format!("{name}.wasm"))).unwrap()
}

/// A host that tells the test (over `.0`) when the guest made its first
/// tree op (an `exists`), then holds the guest there until the test sends
/// on the other end of `.1`. Reads answer `NoNode`, writes `Unimplemented`.
pub struct HoldAtExists(
    pub std::sync::mpsc::Sender<()>,
    pub std::sync::mpsc::Receiver<()>,
);

impl RecipeHost for HoldAtExists {
    fn get(&mut self, _: &str, _: Option<&str>) -> Result<(Vec<u8>, NodeStat), ErrorCode> {
        Err(ErrorCode::NoNode)
    }
    fn children(&mut self, _: &str, _: Option<&str>) -> Result<Vec<String>, ErrorCode> {
        Err(ErrorCode::NoNode)
    }
    fn exists(&mut self, _: &str, _: Option<&str>) -> Result<Option<NodeStat>, ErrorCode> {
        let _ = self.0.send(());
        let _ = self.1.recv();
        Ok(None)
    }
    fn create(
        &mut self,
        _: &str,
        _: &[u8],
        _: CreateMode,
        _: Option<&[AclEntry]>,
    ) -> Result<String, ErrorCode> {
        Err(ErrorCode::Unimplemented)
    }
    fn set(&mut self, _: &str, _: &[u8], _: i32) -> Result<NodeStat, ErrorCode> {
        Err(ErrorCode::Unimplemented)
    }
    fn delete(&mut self, _: &str, _: i32) -> Result<(), ErrorCode> {
        Err(ErrorCode::Unimplemented)
    }
    fn check(&mut self, _: &str, _: i32) -> Result<(), ErrorCode> {
        Err(ErrorCode::Unimplemented)
    }
    fn notify(&mut self, _: i64, _: &[u8]) -> Result<(), ErrorCode> {
        Err(ErrorCode::Unimplemented)
    }
}
