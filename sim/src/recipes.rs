//! A recipe engine in plain Rust: the core's [`RecipeEngine`] trait, which
//! the wasmtime runtime implements for real modules, implemented here for
//! two recipes the simulated clients call.
//!
//! - `lock`: `acquire(name)` creates an ephemeral sequential node under
//!   `/locks/<name>`; the lowest holds the lock (`Done("<path>")`), any
//!   other waits on its predecessor (`Wait { token: <its path> }`) and is
//!   called back when the predecessor goes; `release(path)` deletes it.
//! - `counter`: `incr(name)` adds one to `/counters/<name>` and answers the
//!   new value; `await("name|target|tag")` answers once the counter
//!   reaches `target`, waiting on the node's data meanwhile.

use wazoo_core::recipe::{error_reply, ModuleReport, RecipeEngine, RecipeHost};
use wazoo_proto::ErrorCode;
use wazoo_sdk::abi::{CallerInfo, CreateMode, Reply, WatchRequest};

pub struct SimRecipes;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn ensure(h: &mut dyn RecipeHost, path: &str) -> Result<(), ErrorCode> {
    if h.exists(path, None)?.is_none() {
        h.create(path, b"", CreateMode::Persistent, None)?;
    }
    Ok(())
}

/// The lock's decision for the node at `me`: held, or wait on the
/// predecessor (registering the wait with `me` as token).
fn lock_decide(h: &mut dyn RecipeHost, me: &str) -> Result<Reply, ErrorCode> {
    let (dir, name) = me.rsplit_once('/').ok_or(ErrorCode::BadArguments)?;
    let mut children = h.children(dir, None)?;
    children.sort_by_key(|c| c.rsplit('-').next().unwrap_or("").to_string());
    let Some(at) = children.iter().position(|c| c == name) else {
        return Ok(error_reply(ErrorCode::NoNode, format!("{me} is gone")));
    };
    if at == 0 {
        return Ok(Reply::Done(me.as_bytes().to_vec()));
    }
    let pred = format!("{dir}/{}", children[at - 1]);
    match h.exists(&pred, Some(me))? {
        Some(_) => Ok(Reply::Wait {
            token: me.to_string(),
        }),
        // Cannot happen within one consistent view; decide again if it does.
        None => Ok(error_reply(ErrorCode::SystemError, "predecessor vanished")),
    }
}

fn counter_path(name: &str) -> String {
    format!("/counters/{name}")
}

fn counter_value(h: &mut dyn RecipeHost, path: &str) -> Result<(i64, i32), ErrorCode> {
    let (data, stat) = h.get(path, None)?;
    let v = text(&data).parse().unwrap_or(0);
    Ok((v, stat.version))
}

/// `name|target|tag`: answers once the counter reaches target.
fn counter_await(h: &mut dyn RecipeHost, token: &str) -> Result<Reply, ErrorCode> {
    let mut parts = token.split('|');
    let (Some(name), Some(target)) = (parts.next(), parts.next()) else {
        return Ok(error_reply(ErrorCode::BadArguments, "name|target|tag"));
    };
    let target: i64 = target.parse().map_err(|_| ErrorCode::BadArguments)?;
    let path = counter_path(name);
    ensure(h, "/counters")?;
    if h.exists(&path, None)?.is_none() {
        h.create(&path, b"0", CreateMode::Persistent, None)?;
    }
    let (v, _) = counter_value(h, &path)?;
    if v >= target {
        return Ok(Reply::Done(v.to_string().into_bytes()));
    }
    h.get(&path, Some(token))?;
    Ok(Reply::Wait {
        token: token.to_string(),
    })
}

impl RecipeEngine for SimRecipes {
    fn call(
        &mut self,
        module: &str,
        method: &str,
        args: &[u8],
        _caller: &CallerInfo,
        h: &mut dyn RecipeHost,
    ) -> Reply {
        let arg = text(args);
        let r: Result<Reply, ErrorCode> = (|| match (module, method) {
            ("lock", "acquire") => {
                ensure(h, "/locks")?;
                let dir = format!("/locks/{arg}");
                ensure(h, &dir)?;
                let me = h.create(
                    &format!("{dir}/n-"),
                    b"",
                    CreateMode::EphemeralSequential,
                    None,
                )?;
                lock_decide(h, &me)
            }
            ("lock", "release") => {
                h.delete(&arg, -1)?;
                Ok(Reply::Done(Vec::new()))
            }
            ("counter", "incr") => {
                ensure(h, "/counters")?;
                let path = counter_path(&arg);
                if h.exists(&path, None)?.is_none() {
                    h.create(&path, b"0", CreateMode::Persistent, None)?;
                }
                let (v, version) = counter_value(h, &path)?;
                let next = v + 1;
                h.set(&path, next.to_string().as_bytes(), version)?;
                Ok(Reply::Done(next.to_string().into_bytes()))
            }
            ("counter", "await") => counter_await(h, &arg),
            _ => Ok(error_reply(
                ErrorCode::Unimplemented,
                format!("no method {module}.{method}"),
            )),
        })();
        r.unwrap_or_else(|code| error_reply(code, format!("{module}.{method} failed")))
    }

    fn on_watch(&mut self, module: &str, req: &WatchRequest, h: &mut dyn RecipeHost) -> Reply {
        let r = match module {
            "lock" => lock_decide(h, &req.token),
            "counter" => counter_await(h, &req.token),
            _ => Ok(error_reply(ErrorCode::Unimplemented, "no such module")),
        };
        r.unwrap_or_else(|code| error_reply(code, format!("{module} callback failed")))
    }

    fn has_module(&self, module: &str) -> bool {
        matches!(module, "lock" | "counter")
    }

    fn modules(&self) -> Vec<ModuleReport> {
        ["lock", "counter"]
            .iter()
            .map(|name| ModuleReport {
                name: name.to_string(),
                version: "1.0.0".into(),
                hash: "00".into(),
                methods: Vec::new(),
                calls: 0,
                errors: 0,
                fuel_used: 0,
                loads: 1,
                counters: Default::default(),
            })
            .collect()
    }
}
