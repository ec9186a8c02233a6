//! Recipe calls through ZooKeeper's standard operations (docs/RECIPES.md,
//! "Calling from any client"), so that every client calls a recipe with
//! its public API: a create under `/zookeeper/calls/<module>/` is a call.
//!
//! - `create -e [-s] /zookeeper/calls/<module>/<method> <args>`: the node's
//!   name is the method (with a sequence suffix when sequential; Curator's
//!   protected-mode prefix `_c_<guid>-` gives the call its guid), its data
//!   the arguments (JSON, or MessagePack). The call runs as one replicated
//!   step, as a native call does, and its txn also creates the call node:
//!   ephemeral, the caller's, with the client's ACL, holding the result as
//!   JSON (`{"done":V}`, `{"waiting":"token"}`).
//! - A call that waits finishes by setting the call node's data
//!   (`{"done":V}` or `{"error":{"code":C,"message":M}}`) in the txn of the
//!   callback that ends it, so a getData watch on the node fires: the
//!   wait's record names its call node ([`RecipeWait::call_node`]).
//! - A call that fails at once fails the create with the recipe's error
//!   code, and nothing is applied.
//! - The parents `/zookeeper/calls` and `/zookeeper/calls/<module>` are
//!   containers the first call creates (world READ): the container reaper
//!   removes them once empty. Clients may delete their own call nodes
//!   (only the owning session may), and write nothing else there.
//! - A chrooted client's create arrives as `<chroot>/zookeeper/calls/...`
//!   (the server never sees the chroot as such): its call node lives there,
//!   under containers `<chroot>/zookeeper` and below made as above, so the
//!   client reads it at the path it asked for. The recipe's arguments are
//!   not chrooted: they name absolute paths, as a native call's do.
//!
//! [`RecipeWait::call_node`]: crate::recipe::RecipeWait::call_node

use wazoo_proto::{perms, Acl, CreateMode, ErrorCode, OpCode, Request};
use wazoo_sdk::abi::{self, Reply};

use super::super::prep::{check_data_size, stage_new_node, stage_set_data, validate_path, View};
use super::super::ServerConfig;
use crate::txn::{NodeKind, Txn};

/// Where calls are made (under a chroot, below it: `<chroot>/zookeeper/calls`).
pub const CALLS_ROOT: &str = "/zookeeper/calls";

/// The protected-mode prefix of Curator, kazoo and go-zookeeper: `_c_`, a
/// guid, `-`. Curator's guid is a 36-character UUID; go-zookeeper's
/// (`CreateProtectedEphemeralSequential`) is 32 hex digits.
const PROTECTED_PREFIX: &str = "_c_";
const PROTECTED_GUID_LEN: usize = 36;
const PROTECTED_HEX_GUID_LEN: usize = 32;

/// A call made by a create: what the create asked for besides the call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeCall {
    /// The create's opcode (create or create2: the reply's form).
    pub op: OpCode,
    /// The path the client asked for (the sequence suffix comes later).
    pub path: String,
    pub sequential: bool,
    /// The call node's ACL, as the client sent it (fixed up when staged).
    pub acl: Vec<Acl>,
}

/// A call a create asks for, parsed: `Ok(None)` if `req` is no create under
/// [`CALLS_ROOT`]; an error code for a create there that is no valid call.
pub struct ParsedCall<'a> {
    pub module: &'a str,
    pub method: &'a str,
    /// The guid of Curator's protected mode, if the name carries one.
    pub guid: Option<&'a str>,
    /// The arguments as MessagePack.
    pub args: Vec<u8>,
    pub node: NodeCall,
}

/// `path` split at its calls root: the chroot before it (empty without
/// one: the server sees a chrooted client's full paths) and what follows
/// `<chroot>/zookeeper/calls/`; `None` outside a calls subtree.
///
/// Asked of every write's path: a byte scan from the end (a `str::rfind`
/// builds a substring searcher per call, which showed in profiles).
fn split(path: &str) -> Option<(&str, &str)> {
    const MARKER: &[u8] = b"/zookeeper/calls/";
    let b = path.as_bytes();
    let last = b.len().checked_sub(MARKER.len())?;
    let at = (0..=last).rev().find(|&i| b[i..].starts_with(MARKER))?;
    // The marker is ASCII, so both ends are char boundaries.
    let rest = &path[at + MARKER.len()..];
    (!rest.is_empty()).then_some((&path[..at], rest))
}

/// A call made by a getData (docs/RECIPES.md, "Calling from any client",
/// "Calls that change nothing"): the path
/// `[chroot]/zookeeper/calls/<module>/<method>/<ARGS>`, ARGS being the rest
/// of the path, JSON. No node is ever at such a path (a call node is a
/// child of `<module>`, and has none), so it names nothing else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadCall<'a> {
    pub module: &'a str,
    pub method: &'a str,
    /// The arguments, as the path gives them (JSON).
    pub args: &'a str,
}

/// The read call `path` names: `None` if it names none (outside a calls
/// subtree, or fewer than three names below the calls root). The calls
/// root is the first `/zookeeper/calls/` of the path, as the arguments may
/// name paths too (`{"path":"/zookeeper/calls/..."}`); a chroot that
/// itself holds one is not supported.
pub fn read_call(path: &str) -> Option<ReadCall<'_>> {
    const MARKER: &[u8] = b"/zookeeper/calls/";
    let b = path.as_bytes();
    let last = b.len().checked_sub(MARKER.len())?;
    // Asked of every getData on a member that runs recipes: a byte scan
    // (see `split`), most paths failing at their first byte compared.
    let at = (0..=last).find(|&i| b[i] == b'/' && b[i..].starts_with(MARKER))?;
    let rest = &path[at + MARKER.len()..];
    let (module, rest) = rest.split_once('/')?;
    let (method, args) = rest.split_once('/')?;
    Some(ReadCall {
        module,
        method,
        args,
    })
}

/// A read call's arguments as MessagePack: the JSON of the path (a `/`
/// inside it may be written `\/`, so that no name of the path is empty or
/// `.`); `null` is nil. Anything else is BadArguments: JSON alone, as a
/// path is text.
pub fn read_args_to_msgpack(args: &str) -> Result<Vec<u8>, ErrorCode> {
    let v: serde_json::Value = serde_json::from_str(args).map_err(|_| ErrorCode::BadArguments)?;
    abi::encode(&v).map_err(|_| ErrorCode::BadArguments)
}

/// A read call's result as a getData answers it: the JSON a call node
/// would hold (`{"done":V}`), or the call's error code. `Err(NotReadOnly)`
/// for a call that asked to change something (wrote, waited or notified):
/// it is to be called with a create.
pub fn read_result(reply: &Reply, changed: bool) -> Result<Vec<u8>, ErrorCode> {
    match reply {
        Reply::Error { code, .. } => {
            Err(ErrorCode::from_i32(*code).unwrap_or(ErrorCode::SystemError))
        }
        Reply::Wait { .. } => Err(ErrorCode::NotReadOnly),
        Reply::Done(_) if changed => Err(ErrorCode::NotReadOnly),
        Reply::Done(_) => Ok(result_data(reply)),
    }
}

/// Whether `path` is in a calls subtree (the root itself excluded).
pub fn under_calls(path: &str) -> bool {
    split(path).is_some()
}

/// The module a create under a calls root calls, without parsing the rest
/// (for the check whether the call waits for a module to compile).
pub fn called_module(req: &Request) -> Option<&str> {
    match req {
        Request::Create(c) | Request::Create2(c) => split(&c.path)?.1.split('/').next(),
        _ => None,
    }
}

/// The call a create under [`CALLS_ROOT`] makes: `None` for any other
/// request; an error for a create there that is not a valid call (not
/// ephemeral, not `<module>/<name>`, arguments neither JSON nor
/// MessagePack).
pub fn parse(req: &Request) -> Option<Result<ParsedCall<'_>, ErrorCode>> {
    let c = match req {
        Request::Create(c) | Request::Create2(c) => c,
        Request::CreateContainer(c) | Request::CreateTtl(c) if under_calls(&c.path) => {
            return Some(Err(ErrorCode::BadArguments))
        }
        _ => return None,
    };
    if !under_calls(&c.path) {
        return None;
    }
    Some(parse_create(req.opcode(), c))
}

fn parse_create(op: OpCode, c: &wazoo_proto::CreateRequest) -> Result<ParsedCall<'_>, ErrorCode> {
    let mode = CreateMode::from_flags(c.flags).ok_or(ErrorCode::BadArguments)?;
    // A call node goes with the session that made it: only ephemeral
    // modes make one.
    if !mode.is_ephemeral() || c.ttl.is_some_and(|t| t >= 0) {
        return Err(ErrorCode::BadArguments);
    }
    let (_, rest) = split(&c.path).ok_or(ErrorCode::BadArguments)?;
    let (module, name) = rest.split_once('/').ok_or(ErrorCode::BadArguments)?;
    if module.is_empty() || name.is_empty() || name.contains('/') {
        return Err(ErrorCode::BadArguments);
    }
    let (guid, method) = split_protected(name);
    if method.is_empty() {
        return Err(ErrorCode::BadArguments);
    }
    Ok(ParsedCall {
        module,
        method,
        guid,
        args: args_to_msgpack(c.data.as_deref().unwrap_or_default())?,
        node: NodeCall {
            op,
            path: c.path.clone(),
            sequential: mode.is_sequential(),
            acl: c.acl.clone(),
        },
    })
}

/// A node name's protected-mode guid and the rest (the method): 32 hex
/// digits (go-zookeeper), else any 36 characters (Curator's UUID, which has
/// dashes, so it is never taken for the former).
fn split_protected(name: &str) -> (Option<&str>, &str) {
    let Some(rest) = name.strip_prefix(PROTECTED_PREFIX) else {
        return (None, name);
    };
    let split = |len: usize| {
        let (guid, method) = (rest.get(..len)?, rest.get(len..)?);
        Some((guid, method.strip_prefix('-')?))
    };
    if let Some((guid, method)) = split(PROTECTED_HEX_GUID_LEN) {
        if guid.bytes().all(|b| b.is_ascii_hexdigit()) {
            return (Some(guid), method);
        }
    }
    match split(PROTECTED_GUID_LEN) {
        Some((guid, method)) => (Some(guid), method),
        None => (None, name),
    }
}

/// A call node's data as the recipe's MessagePack arguments: nothing is
/// nil; UTF-8 JSON is converted (objects keep their field names, as the
/// recipes' argument structs expect); anything else must be one whole
/// MessagePack value and passes unchanged.
pub fn args_to_msgpack(data: &[u8]) -> Result<Vec<u8>, ErrorCode> {
    if data.iter().all(u8::is_ascii_whitespace) {
        return Ok(abi::encode(&()).expect("nil encodes"));
    }
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) {
        return abi::encode(&v).map_err(|_| ErrorCode::BadArguments);
    }
    if whole_msgpack::<serde::de::IgnoredAny>(data).is_some() {
        Ok(data.to_vec())
    } else {
        Err(ErrorCode::BadArguments)
    }
}

/// `b` decoded as one whole MessagePack value (no bytes left over).
fn whole_msgpack<T: serde::de::DeserializeOwned>(b: &[u8]) -> Option<T> {
    let mut rest = b;
    let mut de = rmp_serde::Deserializer::new(&mut rest);
    let v = T::deserialize(&mut de).ok()?;
    rest.is_empty().then_some(v)
}

/// A recipe's result as JSON: its MessagePack value; binary data, wherever
/// it is (the whole result, or inside an array or a map, as the group's
/// members and the semaphore's holders are), and bytes that are no
/// MessagePack value, as a string when UTF-8, else as `0x` and hex.
fn msgpack_to_json(b: &[u8]) -> serde_json::Value {
    match whole_msgpack::<JsonOf>(b) {
        Some(JsonOf(v)) => v,
        None => bytes_to_json(b.to_vec()),
    }
}

/// Binary data as JSON: a string when UTF-8, else `0x` and hex.
fn bytes_to_json(bytes: Vec<u8>) -> serde_json::Value {
    match String::from_utf8(bytes) {
        Ok(s) => serde_json::Value::String(s),
        Err(e) => {
            let hex: String = e.as_bytes().iter().map(|x| format!("{x:02x}")).collect();
            serde_json::Value::String(format!("0x{hex}"))
        }
    }
}

/// A MessagePack value read as JSON ([`msgpack_to_json`]'s rules):
/// `serde_json::Value` itself refuses binary data. Map keys that are not
/// strings become their JSON text.
struct JsonOf(serde_json::Value);

impl<'de> serde::Deserialize<'de> for JsonOf {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{MapAccess, SeqAccess, Visitor};
        use serde_json::Value;
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = JsonOf;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a MessagePack value")
            }
            fn visit_bool<E>(self, v: bool) -> Result<JsonOf, E> {
                Ok(JsonOf(Value::Bool(v)))
            }
            fn visit_i64<E>(self, v: i64) -> Result<JsonOf, E> {
                Ok(JsonOf(v.into()))
            }
            fn visit_u64<E>(self, v: u64) -> Result<JsonOf, E> {
                Ok(JsonOf(v.into()))
            }
            fn visit_f64<E>(self, v: f64) -> Result<JsonOf, E> {
                Ok(JsonOf(
                    serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number),
                ))
            }
            fn visit_str<E>(self, v: &str) -> Result<JsonOf, E> {
                Ok(JsonOf(Value::String(v.to_string())))
            }
            fn visit_bytes<E>(self, v: &[u8]) -> Result<JsonOf, E> {
                Ok(JsonOf(bytes_to_json(v.to_vec())))
            }
            fn visit_unit<E>(self) -> Result<JsonOf, E> {
                Ok(JsonOf(Value::Null))
            }
            fn visit_none<E>(self) -> Result<JsonOf, E> {
                Ok(JsonOf(Value::Null))
            }
            fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<JsonOf, D::Error> {
                <JsonOf as serde::Deserialize>::deserialize(d)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<JsonOf, A::Error> {
                let mut out = Vec::new();
                while let Some(JsonOf(v)) = a.next_element()? {
                    out.push(v);
                }
                Ok(JsonOf(Value::Array(out)))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<JsonOf, A::Error> {
                let mut out = serde_json::Map::new();
                while let Some((JsonOf(k), JsonOf(v))) = a.next_entry()? {
                    let key = match k {
                        Value::String(s) => s,
                        other => other.to_string(),
                    };
                    out.insert(key, v);
                }
                Ok(JsonOf(Value::Object(out)))
            }
        }
        d.deserialize_any(V)
    }
}

/// What a call node holds for `reply`, as JSON.
pub fn result_data(reply: &Reply) -> Vec<u8> {
    match reply {
        Reply::Done(v) => one_key("done", &msgpack_to_json(v)),
        Reply::Wait { token } => one_key("waiting", token),
        Reply::Error { code, message } => one_key(
            "error",
            &serde_json::json!({ "code": code, "message": message }),
        ),
    }
}

/// `{"KEY":V}`, written as such (no map built for it).
fn one_key<T: serde::Serialize + ?Sized>(key: &str, v: &T) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + key.len());
    out.extend_from_slice(b"{\"");
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(b"\":");
    serde_json::to_writer(&mut out, v).expect("JSON values always encode");
    out.push(b'}');
    out
}

/// The path of the call node a recipe txn's ops create, if any (the last
/// create in the calls subtree: parents come before it).
pub fn created_call_node(ops: &[Txn]) -> Option<&str> {
    ops.iter().rev().find_map(|op| match op {
        Txn::Create(c) if under_calls(&c.path) && c.ephemeral_owner != 0 => Some(c.path.as_str()),
        _ => None,
    })
}

/// The parents' ACL: anyone may read (list the calls), no one may write.
fn parents_acl() -> Vec<Acl> {
    vec![Acl::new(perms::READ, "world", "anyone")]
}

/// Stages, in `view`, the call node of `call` holding `data`, owned by
/// `session`, and the parents it lacks; returns the creates and the node's
/// path. The client's ACL is fixed up as any create's.
pub(in crate::server) fn stage_call_node(
    cfg: &ServerConfig,
    view: &mut View<'_>,
    auth: &crate::acl::AuthInfo,
    session: i64,
    call: &NodeCall,
    data: &[u8],
) -> Result<(Vec<Txn>, String), ErrorCode> {
    let acl = crate::acl::fixup(&call.acl, auth, cfg.acl_schemes)?;
    check_data_size(cfg, Some(data))?;
    let module_dir = wazoo_proto::path::parent(&call.path);
    let mut ops = Vec::new();
    // The module's directory, once made, is there for every later call
    // (until the reaper takes it empty): one lookup, and the parents
    // only when it is missing (a node's parent exists whenever it does).
    let parent = match view.get(module_dir) {
        Some(parent) => parent,
        None => {
            let (chroot, _) = split(&call.path).ok_or(ErrorCode::BadArguments)?;
            let calls_root = format!("{chroot}{CALLS_ROOT}");
            let zk_dir = wazoo_proto::path::parent(&calls_root);
            for dir in [zk_dir, &calls_root, module_dir] {
                if !view.exists(dir) {
                    validate_path(dir)?;
                    ops.push(stage_create(
                        view,
                        dir,
                        None,
                        b"",
                        parents_acl(),
                        0,
                        NodeKind::Container,
                    )?);
                }
            }
            view.get(module_dir).ok_or(ErrorCode::NoNode)?
        }
    };
    let path = if call.sequential {
        crate::tree::sequential_path(&call.path, parent.stored_cversion)
    } else {
        call.path.clone()
    };
    validate_path(&path)?;
    if view.exists(&path) {
        return Err(ErrorCode::NodeExists);
    }
    ops.push(stage_create(
        view,
        &path,
        Some(parent),
        data,
        acl,
        session,
        NodeKind::Regular,
    )?);
    Ok((ops, path))
}

/// One create, in `view`, of a node whose parent exists there (`parent`:
/// its record, if the caller has it already).
fn stage_create(
    view: &mut View<'_>,
    path: &str,
    parent: Option<super::super::prep::Record>,
    data: &[u8],
    acl: Vec<Acl>,
    owner: i64,
    kind: NodeKind,
) -> Result<Txn, ErrorCode> {
    let parent_path = wazoo_proto::path::parent(path);
    let parent = match parent {
        Some(p) => p,
        None => view.get(parent_path).ok_or(ErrorCode::NoNode)?,
    };
    if parent.stat.ephemeral_owner != 0 {
        return Err(ErrorCode::NoChildrenForEphemerals);
    }
    stage_new_node(
        view,
        parent_path,
        parent,
        path,
        Some(data),
        acl,
        owner,
        kind,
    )
}

/// Stages, in `view`, the result of a finished wait into its call node:
/// `None` when the node is gone (its client deleted it, or its session
/// ended) or is not the session's.
pub(in crate::server) fn stage_result(
    cfg: &ServerConfig,
    view: &mut View<'_>,
    session: i64,
    call_node: &str,
    reply: &Reply,
) -> Option<Txn> {
    let r = view.get(call_node)?;
    if r.stat.ephemeral_owner != session {
        return None;
    }
    let mut data = result_data(reply);
    if check_data_size(cfg, Some(&data)).is_err() {
        data = result_data(&crate::recipe::error_reply(
            ErrorCode::BadArguments,
            "the recipe's result exceeds jute.maxbuffer as JSON",
        ));
    }
    let version = r.stat.version.wrapping_add(1);
    stage_set_data(view, call_node, r, Some(&data), version).ok()
}

/// What a client's write in the calls subtree other than a call may do:
/// only the owning session deletes its call node; everything else there is
/// the server's to write (NoAuth).
pub(in crate::server) fn check_client_delete(
    view: &View<'_>,
    session: i64,
    path: &str,
) -> Result<(), ErrorCode> {
    let node = view.get(path).ok_or(ErrorCode::NoNode)?;
    if node.stat.ephemeral_owner == session && session != 0 {
        Ok(())
    } else {
        Err(ErrorCode::NoAuth)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wazoo_proto::CreateRequest;

    fn create(path: &str, flags: i32, data: &[u8]) -> Request {
        Request::Create(CreateRequest {
            path: path.into(),
            data: Some(data.to_vec()),
            acl: Acl::open_unsafe(),
            flags,
            ttl: None,
        })
    }

    #[test]
    fn a_create_under_calls_names_module_method_and_arguments() {
        let req = create("/zookeeper/calls/lock/acquire", 3, br#"{"path":"/l"}"#);
        let call = parse(&req).unwrap().unwrap();
        assert_eq!(
            (call.module, call.method, call.guid),
            ("lock", "acquire", None)
        );
        let args: serde_json::Value = abi::decode(&call.args).unwrap();
        assert_eq!(args, serde_json::json!({"path": "/l"}));
        assert!(call.node.sequential);
    }

    #[test]
    fn curators_protected_prefix_gives_the_guid() {
        let guid = "0f8fad5b-d9cb-469f-a165-70867728950e";
        let req = create(&format!("/zookeeper/calls/lock/_c_{guid}-acquire"), 3, b"");
        let call = parse(&req).unwrap().unwrap();
        assert_eq!((call.method, call.guid), ("acquire", Some(guid)));
        assert_eq!(call.args, abi::encode(&()).unwrap());
    }

    // go-zookeeper's CreateProtectedEphemeralSequential names the node
    // `_c_<32 hex digits>-<name>`.
    #[test]
    fn go_zookeepers_protected_prefix_gives_the_guid() {
        let guid = "0f8fad5bd9cb469fa16570867728950e";
        let req = create(&format!("/zookeeper/calls/lock/_c_{guid}-acquire"), 3, b"");
        let call = parse(&req).unwrap().unwrap();
        assert_eq!((call.method, call.guid), ("acquire", Some(guid)));
        // 32 characters that are not all hex digits are no guid of that form.
        let req = create(
            "/zookeeper/calls/lock/_c_0f8fad5b-d9cb-469f-a165-7086772-acquire",
            3,
            b"",
        );
        let call = parse(&req).unwrap().unwrap();
        assert_eq!(call.guid, None);
    }

    #[test]
    fn only_ephemeral_calls_of_module_and_method_are_calls() {
        for (path, flags) in [
            ("/zookeeper/calls/lock/acquire", 0),
            ("/zookeeper/calls/lock/acquire", 2),
            ("/zookeeper/calls/lock", 1),
            ("/zookeeper/calls/lock/a/b", 1),
            ("/zookeeper/calls//acquire", 1),
        ] {
            assert_eq!(
                parse(&create(path, flags, b"")).map(|r| r.err()),
                Some(Some(ErrorCode::BadArguments)),
                "{path} {flags}"
            );
        }
        assert!(parse(&create("/zookeeper/callsx/a", 1, b"")).is_none());
        assert!(parse(&create("/zookeeper/calls", 1, b"")).is_none());
    }

    #[test]
    fn arguments_are_json_or_one_messagepack_value() {
        assert!(args_to_msgpack(b"{not json").is_err());
        let packed = abi::encode(&serde_json::json!({"a": 1})).unwrap();
        assert_eq!(args_to_msgpack(&packed).unwrap(), packed);
        let mut two = packed.clone();
        two.extend_from_slice(&packed);
        assert!(args_to_msgpack(&two).is_err());
    }

    #[test]
    fn a_read_call_is_three_names_or_more_below_the_first_calls_root() {
        let c = read_call(r#"/zookeeper/calls/lock/holder/{"path":"/locks/x"}"#).unwrap();
        assert_eq!(
            (c.module, c.method, c.args),
            ("lock", "holder", r#"{"path":"/locks/x"}"#)
        );
        let c = read_call("/app/zookeeper/calls/m/f/1/zookeeper/calls/a/b/c").unwrap();
        assert_eq!(
            (c.module, c.method, c.args),
            ("m", "f", "1/zookeeper/calls/a/b/c")
        );
        for not in [
            "/zookeeper/calls/lock/acquire0000000001",
            "/zookeeper/calls/lock",
            "/zookeeper/calls",
            "/zookeeper/callsx/a/b/c",
            "/zookeeper/calls/",
            "/a",
            "",
        ] {
            assert_eq!(read_call(not), None, "{not}");
        }
    }

    // Bad arguments of any shape are BadArguments, never a panic.
    #[test]
    fn read_call_arguments_are_json_and_bounded_in_depth() {
        assert_eq!(
            abi::decode::<serde_json::Value>(&read_args_to_msgpack(r#"{"a":"\/b"}"#).unwrap())
                .unwrap(),
            serde_json::json!({"a": "/b"})
        );
        assert_eq!(
            read_args_to_msgpack("null").unwrap(),
            abi::encode(&()).unwrap()
        );
        let deep = "[".repeat(100_000) + &"]".repeat(100_000);
        let huge = format!("\"{}\"", "x".repeat(1 << 20));
        assert!(read_args_to_msgpack(&huge).is_ok());
        for bad in ["", " ", "{", "nul", "1 2", "\u{fffd}", &deep, "\"\\ud800\""] {
            assert_eq!(
                read_args_to_msgpack(bad),
                Err(ErrorCode::BadArguments),
                "{bad:.20}"
            );
        }
        // Some arbitrary bytes, as a lossy jute string would bring them.
        let mut x: u32 = 1;
        for _ in 0..2000 {
            let s: String = (0..(x % 40))
                .map(|_| {
                    x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                    char::from_u32((x >> 16) % 0x250).unwrap_or('?')
                })
                .collect();
            let _ = read_args_to_msgpack(&s);
        }
    }

    #[test]
    fn a_read_calls_result_is_done_or_its_code() {
        let done = Reply::Done(abi::encode("v").unwrap());
        assert_eq!(read_result(&done, false).unwrap(), br#"{"done":"v"}"#);
        assert_eq!(read_result(&done, true), Err(ErrorCode::NotReadOnly));
        let wait = Reply::Wait { token: "t".into() };
        assert_eq!(read_result(&wait, false), Err(ErrorCode::NotReadOnly));
        let e = Reply::Error {
            code: ErrorCode::NoAuth.code(),
            message: String::new(),
        };
        assert_eq!(read_result(&e, true), Err(ErrorCode::NoAuth));
    }

    #[test]
    fn binary_data_in_a_result_is_text_or_hex_wherever_it_is() {
        #[derive(serde::Serialize)]
        struct Member {
            name: &'static str,
            #[serde(with = "wazoo_sdk::abi::bytes")]
            data: Vec<u8>,
        }
        let members = vec![
            Member {
                name: "a",
                data: b"text".to_vec(),
            },
            Member {
                name: "b",
                data: vec![0xff, 0],
            },
        ];
        let reply = Reply::Done(abi::encode(&members).unwrap());
        assert_eq!(
            result_data(&reply),
            br#"{"done":[{"data":"text","name":"a"},{"data":"0xff00","name":"b"}]}"#
        );
        let whole = Reply::Done(abi::encode(&serde_bytes_of(b"\xfe")).unwrap());
        assert_eq!(result_data(&whole), br#"{"done":"0xfe"}"#);
        let none = Reply::Done(abi::encode(&Option::<u8>::None).unwrap());
        assert_eq!(result_data(&none), br#"{"done":null}"#);
    }

    fn serde_bytes_of(b: &[u8]) -> impl serde::Serialize + '_ {
        struct B<'a>(&'a [u8]);
        impl serde::Serialize for B<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_bytes(self.0)
            }
        }
        B(b)
    }

    #[test]
    fn results_are_json_objects_of_one_key() {
        let done = Reply::Done(abi::encode("/locks/x/n1").unwrap());
        assert_eq!(result_data(&done), br#"{"done":"/locks/x/n1"}"#);
        let wait = Reply::Wait { token: "t".into() };
        assert_eq!(result_data(&wait), br#"{"waiting":"t"}"#);
        let err = Reply::Error {
            code: -101,
            message: "gone".into(),
        };
        assert_eq!(
            result_data(&err),
            br#"{"error":{"code":-101,"message":"gone"}}"#
        );
    }
}
