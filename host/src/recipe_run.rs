//! `wazoo recipe run FILE.wasm METHOD ARGS [--tree SNAPSHOT]`: one call of a
//! module against an in-memory tree, with the real sandbox and the default
//! limits, printing the reply, the staged ops and the waits (docs/RECIPES.md,
//! "Try a call without a server").
//!
//! The tree is empty (just `/zookeeper`), or loaded from a wazoo snapshot
//! file or a `wazoo backup` file. The step runs through the pipeline's own
//! recipe host ([`crate::core::server::dry_run_call`]), so ACLs, sequence
//! numbers, ephemeral owners and the staged-bytes bound are the server's;
//! nothing is written anywhere.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};

use crate::core::acl::AuthInfo;
use crate::core::server::{dry_run_call, ServerConfig};
use crate::core::tree::DataTree;
use crate::core::txn::Txn;
use crate::plugin::abi::{self, CallerInfo, Notification, Reply};
use crate::plugin::{Limits, Runtime, RuntimeConfig};
use wazoo_client::shell::format::{json_to_msgpack, msgpack_display};

/// What to run.
pub struct RunSpec<'a> {
    pub module_bytes: &'a [u8],
    pub method: &'a str,
    /// The arguments as JSON (sent as MessagePack, as `wazoo cli` does).
    pub args_json: &'a str,
    /// The tree: a wazoo snapshot or backup file; `None` for an empty tree.
    pub tree: Option<&'a Path>,
    /// The calling session id.
    pub session: i64,
    /// The sandbox limits (the server's defaults unless overridden).
    pub limits: Limits,
    /// The leader's clock for this step, ms since the epoch: the ctime and
    /// mtime of what it writes (how a recipe learns the time).
    pub now_ms: i64,
}

/// Runs the call and returns the text `wazoo recipe run` prints, and
/// whether the call succeeded.
pub fn run(spec: &RunSpec<'_>) -> Result<(String, bool)> {
    let args = json_to_msgpack(spec.args_json).map_err(|e| anyhow!("{e}"))?;
    let (tree, zxid) = match spec.tree {
        None => (DataTree::new(), wazoo_proto::Zxid(0)),
        Some(p) => {
            let bytes = wazoo_storage::read_snapshot(p)
                .map_err(|e| anyhow!("{} is not a wazoo snapshot or backup: {e}", p.display()))?;
            let loaded = crate::member::read_snapshot_payload(&bytes)
                .with_context(|| format!("{} does not load", p.display()))?;
            (loaded.tree, loaded.zxid)
        }
    };
    let rt = Runtime::new(RuntimeConfig {
        limits: spec.limits.clone(),
        ..Default::default()
    })
    .context("cannot start the recipe runtime")?;
    let info = rt
        .load_bytes(spec.module_bytes)
        .map_err(|e| anyhow!("module refused: {e}"))?;
    let caller = CallerInfo {
        session: spec.session,
        guid: format!("{:016x}", spec.session as u64),
        // `dry_run_call` fills in the ids the step's ACL checks use.
        ids: Vec::new(),
    };
    let mut engine = rt;
    let out = dry_run_call(
        &ServerConfig::default(),
        &tree,
        &mut engine,
        &AuthInfo { ids: Vec::new() },
        &caller,
        &info.name,
        spec.method,
        &args,
        zxid.next(),
        spec.now_ms,
    );
    let mut text = String::new();
    let _ = writeln!(
        text,
        "module {} {} (sha256 {}), session 0x{:x}, now_ms {}",
        info.name, info.version, info.hash, spec.session, spec.now_ms
    );
    let ok = match &out.reply {
        Reply::Done(v) => {
            let _ = writeln!(text, "reply: done {}", msgpack_display(v));
            true
        }
        Reply::Wait { token } => {
            let _ = writeln!(text, "reply: wait {token:?}");
            true
        }
        Reply::Error { code, message } => {
            let _ = writeln!(text, "reply: error {code}: {message}");
            false
        }
    };
    let _ = writeln!(text, "staged ops: {}", out.ops.len());
    for op in &out.ops {
        let _ = writeln!(text, "  {}", op_line(op));
    }
    let _ = writeln!(text, "waits: {}", out.waits.len());
    for w in &out.waits {
        let kind = if w.child { "children" } else { "data" };
        let _ = writeln!(text, "  token {:?} on {} ({kind} watch)", w.token, w.path);
    }
    let _ = writeln!(text, "notifications: {}", out.notifications.len());
    for (session, note) in &out.notifications {
        let shown = match abi::decode::<Notification>(note) {
            Ok(Notification::Message { payload, .. }) => msgpack_display(&payload),
            Ok(other) => format!("{other:?}"),
            Err(e) => format!("(undecodable: {e})"),
        };
        let _ = writeln!(text, "  to 0x{session:x}: {shown}");
    }
    Ok((text, ok))
}

/// One staged op as a line.
fn op_line(op: &Txn) -> String {
    let data = |d: &Option<Vec<u8>>| match d.as_deref().map(std::str::from_utf8) {
        None => "null".to_string(),
        Some(Ok(s)) if !s.chars().any(char::is_control) => format!("{s:?}"),
        Some(_) => format!("{} bytes", d.as_ref().map_or(0, Vec::len)),
    };
    match op {
        Txn::Create(c) if c.ephemeral_owner != 0 => format!(
            "create {} {} (ephemeral, owner 0x{:x})",
            c.path,
            data(&c.data),
            c.ephemeral_owner
        ),
        Txn::Create(c) => format!("create {} {} ({:?})", c.path, data(&c.data), c.kind),
        Txn::SetData {
            path,
            data: d,
            version,
        } => format!("set {path} {} (version {version})", data(d)),
        Txn::Delete { path } => format!("delete {path}"),
        Txn::Check { path, .. } => format!("check {path}"),
        other => format!("{other:?}"),
    }
}

/// `wazoo recipe run`: reads the module, runs, prints; an error reply is a
/// non-zero exit.
pub fn run_file(
    file: &Path,
    method: &str,
    args_json: &str,
    tree: Option<&Path>,
    session: i64,
    limits: Limits,
    now_ms: i64,
) -> Result<()> {
    let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let (text, ok) = run(&RunSpec {
        module_bytes: &bytes,
        method,
        args_json,
        tree,
        session,
        limits,
        now_ms,
    })?;
    print!("{text}");
    if !ok {
        bail!("the call failed");
    }
    Ok(())
}
