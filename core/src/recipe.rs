//! Recipes as the deterministic core sees them (docs/ARCHITECTURE.md,
//! "Recipes"; docs/RECIPES.md).
//!
//! The core never runs WebAssembly. Prep asks a [`RecipeEngine`] (the wasm
//! runtime in the shell, plain Rust in tests) for one recipe step against a
//! [`RecipeHost`] answered by the prep view; the step's writes, watch
//! registrations and notifications become one [`RecipeTxn`], replicated
//! like any write. What every member keeps of recipes is the
//! [`RecipeWaits`] table: watch registrations with a callback, changed only
//! by applying txns (so every member has the same table, and a new leader
//! knows which callbacks it owes), and saved in snapshots.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use wazoo_proto::jute::{DecodeError, Reader, Writer};
use wazoo_proto::{Acl, ErrorCode, EventType, Id, Zxid};
use wazoo_sdk::abi::{AclEntry, CallerInfo, CreateMode, NodeStat, Reply, WatchEvent, WatchRequest};

use super::txn::Txn;

/// The tree as one recipe step sees it, answered by the pipeline's prep view
/// (committed state plus outstanding changes, including what this step has
/// staged so far).
///
/// Contract for implementers:
/// - Reads answer from the view; writes (`create`, `set`, `delete`) and
///   `notify` are STAGED, never applied directly. If the step ends with
///   `Reply::Done` or `Reply::Wait`, the staged writes, watch registrations
///   and notifications become one txn; if it ends with `Reply::Error` (or
///   the engine fails it), all of it is discarded.
/// - The engine has already checked that every path lies within the
///   module's declared prefixes (see [`path_within`]); ACL checks with the
///   caller's identity are the implementer's job.
/// - `watch: Some(token)` registers a one-shot watch (data watch for
///   `get`/`exists`, child watch for `children`) whose firing runs the
///   module's `on_watch` with that token; it is registered even when the
///   read fails with NoNode for `exists` (as ZooKeeper does).
/// - Errors are ZooKeeper error codes, handed to the guest as such.
pub trait RecipeHost {
    fn get(&mut self, path: &str, watch: Option<&str>) -> Result<(Vec<u8>, NodeStat), ErrorCode>;
    fn children(&mut self, path: &str, watch: Option<&str>) -> Result<Vec<String>, ErrorCode>;
    fn exists(&mut self, path: &str, watch: Option<&str>) -> Result<Option<NodeStat>, ErrorCode>;
    /// Returns the created path (with the sequence suffix when sequential).
    /// `acl: None` creates the node open to everyone (world:anyone:cdrwa);
    /// `Some` is checked and expanded with the caller's identities as a
    /// client's create is (ZooKeeper's fixupACL: InvalidAcl when refused).
    fn create(
        &mut self,
        path: &str,
        data: &[u8],
        mode: CreateMode,
        acl: Option<&[AclEntry]>,
    ) -> Result<String, ErrorCode>;
    /// `version` -1 matches any version.
    fn set(&mut self, path: &str, data: &[u8], version: i32) -> Result<NodeStat, ErrorCode>;
    fn delete(&mut self, path: &str, version: i32) -> Result<(), ErrorCode>;
    fn check(&mut self, path: &str, version: i32) -> Result<(), ErrorCode>;
    /// Stages a notification to `session`, delivered after this step's changes.
    fn notify(&mut self, session: i64, payload: &[u8]) -> Result<(), ErrorCode>;
}

/// Whether `path` lies within one of `prefixes`: equal to a prefix or below
/// it (`/a` covers `/a` and `/a/b`, not `/ab`); `/` covers everything.
pub fn path_within(path: &str, prefixes: &[String]) -> bool {
    prefixes.iter().any(|p| {
        let p = p.as_str();
        if p == "/" {
            return path.starts_with('/');
        }
        path == p || (path.starts_with(p) && path.as_bytes().get(p.len()) == Some(&b'/'))
    })
}

/// Runs recipe steps for the pipeline. Failures of the engine itself (no
/// such module, out of fuel, a trap...) come back as `Reply::Error` with
/// the ZooKeeper code a client sees and a message naming the problem.
pub trait RecipeEngine: Send {
    fn call(
        &mut self,
        module: &str,
        method: &str,
        args: &[u8],
        caller: &CallerInfo,
        host: &mut dyn RecipeHost,
    ) -> Reply;
    fn on_watch(&mut self, module: &str, req: &WatchRequest, host: &mut dyn RecipeHost) -> Reply;
    /// A first try at [`RecipeEngine::call`] on the member's thread, within
    /// a small budget the engine chooses: `None` if the step needs more
    /// (nothing of that try counts: the pipeline discards what it staged
    /// and runs the step off the member's thread with the full limits).
    /// The default does not try.
    fn try_call(
        &mut self,
        module: &str,
        method: &str,
        args: &[u8],
        caller: &CallerInfo,
        host: &mut dyn RecipeHost,
    ) -> Option<Reply> {
        let _ = (module, method, args, caller, host);
        None
    }
    /// [`RecipeEngine::try_call`] for [`RecipeEngine::on_watch`].
    fn try_on_watch(
        &mut self,
        module: &str,
        req: &WatchRequest,
        host: &mut dyn RecipeHost,
    ) -> Option<Reply> {
        let _ = (module, req, host);
        None
    }
    /// Whether `module` is loaded (waits on a module that is not end).
    fn has_module(&self, module: &str) -> bool;
    /// What is loaded, with its counters (for `recp`, metrics and the
    /// /zookeeper/recipes node).
    fn modules(&self) -> Vec<ModuleReport>;
    /// Leader, in prep: checks a module a client asks to deploy (the
    /// runtime compiles and validates it) and says what it is. `Err` is the
    /// reason it is refused; nothing changes then.
    fn validate(&mut self, bytes: &[u8]) -> Result<ModuleMeta, String> {
        let _ = bytes;
        Err("this recipe engine cannot deploy modules".into())
    }
    /// Whether [`validate`](Self::validate) answers at once for `bytes`
    /// (it need not compile them). When it does not and steps run off the
    /// member's thread, the leader validates the module on a worker first
    /// ([`Output::RecipeStep`](crate::server::Output::RecipeStep)) and
    /// preps the deploy when that is done, so compiling never holds the
    /// member's thread.
    fn validates_quickly(&mut self, bytes: &[u8]) -> bool {
        let _ = bytes;
        true
    }
    /// The name the module `bytes` declares, if the engine can tell
    /// without compiling it (a call of that name waits while the module's
    /// deploy is validated; with `None`, a call of any module not served
    /// waits).
    fn deploy_name(&self, bytes: &[u8]) -> Option<String> {
        let _ = bytes;
        None
    }
    /// Makes the engine serve `module` under `name` (`None`: serve nothing
    /// under it). Driven by the replicated module set (see
    /// [`DeployedModules`]): the pipeline calls it when the set it runs
    /// steps against changes, so every member serves what its applied
    /// state says. Compiling is the engine's business (cached by sha256).
    /// An `Err` is logged by the pipeline; the member then has no module
    /// under that name.
    fn install(&mut self, name: &str, module: Option<&DeployedModule>) -> Result<(), String> {
        let _ = (name, module);
        Ok(())
    }

    /// Go on counting from the ensemble's committed counters (this member
    /// now runs the steps: it became the leader, or recovered standalone).
    fn seed_counters(&mut self, counters: &RecipeCounters) {
        let _ = counters;
    }
}

/// What [`RecipeEngine::validate`] found in a module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleMeta {
    pub name: String,
    pub version: String,
    /// SHA-256 of the module's bytes, hex.
    pub sha256: String,
}

/// One deployed module, as every member keeps it: part of the replicated
/// state (changed only by applying deploy and undeploy txns, saved in
/// snapshots), so every member holds the same modules at the same zxid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeployedModule {
    pub name: String,
    pub version: String,
    /// SHA-256 of `bytes`, hex (computed by the leader's engine).
    pub sha256: String,
    /// The module itself (shared: snapshots and the engine clone it).
    pub bytes: Arc<[u8]>,
    /// The zxid of the deploy (saved as jute's `long`).
    pub zxid: Zxid,
    /// Who asked: `client`, or `plugins:<file name>` for a module the
    /// plugins directory of a member deployed (so deleting that file
    /// undeploys only what it deployed).
    pub source: String,
}

impl DeployedModule {
    fn write(&self, w: &mut Vec<u8>) {
        w.write_string(&self.name);
        w.write_string(&self.version);
        w.write_string(&self.sha256);
        w.write_buffer(&self.bytes);
        w.write_i64(self.zxid.to_wire());
        w.write_string(&self.source);
    }

    fn read(r: &mut Reader<'_>) -> Result<DeployedModule, DecodeError> {
        Ok(DeployedModule {
            name: r.read_string()?,
            version: r.read_string()?,
            sha256: r.read_string()?,
            bytes: Arc::from(r.read_buffer()?),
            zxid: Zxid::from_wire(r.read_i64()?),
            source: r.read_string()?,
        })
    }
}

/// The replicated set of deployed modules, by name.
pub type DeployedModules = BTreeMap<String, DeployedModule>;

/// A deploy txn: the module replaces any of the same name when applied.
/// `zxid` is not carried (the txn's own zxid is the module's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeployTxn {
    pub name: String,
    pub version: String,
    pub sha256: String,
    pub bytes: Arc<[u8]>,
    pub source: String,
}

impl DeployTxn {
    pub(crate) fn write(&self, w: &mut Vec<u8>) {
        w.write_string(&self.name);
        w.write_string(&self.version);
        w.write_string(&self.sha256);
        w.write_buffer(&self.bytes);
        w.write_string(&self.source);
    }

    pub(crate) fn read(r: &mut Reader<'_>) -> Result<DeployTxn, DecodeError> {
        Ok(DeployTxn {
            name: r.read_string()?,
            version: r.read_string()?,
            sha256: r.read_string()?,
            bytes: Arc::from(r.read_buffer()?),
            source: r.read_string()?,
        })
    }

    pub fn module(&self, zxid: Zxid) -> DeployedModule {
        DeployedModule {
            name: self.name.clone(),
            version: self.version.clone(),
            sha256: self.sha256.clone(),
            bytes: self.bytes.clone(),
            zxid,
            source: self.source.clone(),
        }
    }
}

/// One loaded module and its counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleReport {
    pub name: String,
    pub version: String,
    /// Content hash (hex).
    pub hash: String,
    pub methods: Vec<String>,
    pub calls: u64,
    pub errors: u64,
    pub fuel_used: u64,
    /// Versions loaded under this name (1: never reloaded).
    pub loads: u64,
    /// `calls`, `errors` (by kind) and `fuel_used` in full, with the
    /// latency histogram.
    pub counters: ModuleCounters,
}

/// The text of `recp` and of the /zookeeper/recipes node: one line per
/// module (`key=value` pairs: the ensemble's counters, `errors_by_kind`
/// as `kind:n,...`, the latency histogram as `le<µs>:n,...,inf:n`, the
/// module's pending waits; a module served as deployed adds the zxid that
/// deployed it and where it came from), then the pending waits of all.
pub fn render_report(modules: &[ModuleReport], waits: &RecipeWaits) -> String {
    let mut out = String::new();
    for m in modules {
        let c = &m.counters;
        let kinds: Vec<String> = c.errors.iter().map(|(k, n)| format!("{k}:{n}")).collect();
        let mut buckets: Vec<String> = LATENCY_BOUNDS_US
            .iter()
            .zip(&c.latency_buckets)
            .map(|(b, n)| format!("le{b}:{n}"))
            .collect();
        buckets.push(format!("inf:{}", c.latency_buckets[LATENCY_BUCKETS - 1]));
        out.push_str(&format!(
            "module={} version={} hash={} calls={} errors={} fuel_used={} loads={} methods={} pending_waits={} errors_by_kind={} latency_us={} latency_sum_us={}",
            m.name,
            m.version,
            m.hash,
            m.calls,
            m.errors,
            m.fuel_used,
            m.loads,
            m.methods.join(","),
            waits.of_module(&m.name).len(),
            kinds.join(","),
            buckets.join(","),
            c.latency_sum_us,
        ));
        if let Some(d) = waits.modules.get(&m.name).filter(|d| d.sha256 == m.hash) {
            out.push_str(&format!(
                " deployed_zxid=0x{:x} source={}",
                d.zxid.to_wire(),
                d.source
            ));
        }
        out.push('\n');
    }
    out.push_str(&format!("pending_waits={}\n", waits.len()));
    out
}

/// A `Reply::Error` with a ZooKeeper code.
pub fn error_reply(code: ErrorCode, message: impl Into<String>) -> Reply {
    Reply::Error {
        code: code.code(),
        message: message.into(),
    }
}

/// Identifies a pending recipe wait: the session that waits, the module
/// whose callback runs, and the token the module chose. Ordered by session
/// first (then module, then token), so one session's waits are a range of
/// the table.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WaitKey {
    pub session: i64,
    pub module: String,
    pub token: String,
}

impl WaitKey {
    pub fn new(session: i64, module: impl Into<String>, token: impl Into<String>) -> WaitKey {
        WaitKey {
            session,
            module: module.into(),
            token: token.into(),
        }
    }

    /// The smallest key of `session`: where its range of the table starts.
    fn first_of(session: i64) -> WaitKey {
        WaitKey::new(session, String::new(), String::new())
    }
}

/// A watch a recipe registered with a callback, as every member keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecipeWait {
    pub session: i64,
    pub module: String,
    pub token: String,
    pub path: String,
    /// A child watch (from `children`); otherwise a data watch.
    pub child: bool,
    /// The identity the callback runs with (the caller's auth ids).
    pub auth: Vec<Id>,
    /// The guid of the call that registered it: its callback is told the
    /// same `caller_guid`. Empty in a wait recorded before guids were kept
    /// (the callback then gets the session-derived one, see
    /// `server::recipes::caller_info`).
    pub guid: String,
    /// The call node of a call made by a create under /zookeeper/calls
    /// (`server::recipes::node_calls`): the wait's end is written there,
    /// not sent as a notification. Empty for a native call's wait.
    pub call_node: String,
    /// Set when a txn triggered it: the callback is owed.
    pub fired: Option<(String, WatchEvent)>,
}

/// The scheme a wait's guid is recorded under, as the last entry of its
/// auth ids on disk and on the wire (so records and snapshots written
/// before guids were kept read as they did). Not an ACL scheme: never
/// among the ids a callback's ACL checks use.
const GUID_SCHEME: &str = "wazoo:guid";

/// The scheme a wait's call node is recorded under, after its guid, the
/// same way (records and snapshots of native calls' waits read as before).
const CALL_NODE_SCHEME: &str = "wazoo:callnode";

impl RecipeWait {
    pub fn key(&self) -> WaitKey {
        WaitKey::new(self.session, self.module.clone(), self.token.clone())
    }

    fn fires_on(&self, event: EventType) -> Option<WatchEvent> {
        match (self.child, event) {
            (false, EventType::NodeCreated) => Some(WatchEvent::Created),
            (false, EventType::NodeDataChanged) => Some(WatchEvent::DataChanged),
            (_, EventType::NodeDeleted) => Some(WatchEvent::Deleted),
            (true, EventType::NodeChildrenChanged) => Some(WatchEvent::ChildrenChanged),
            _ => None,
        }
    }

    fn write(&self, w: &mut Vec<u8>) {
        w.write_i64(self.session);
        w.write_string(&self.module);
        w.write_string(&self.token);
        w.write_string(&self.path);
        w.write_bool(self.child);
        if self.guid.is_empty() && self.call_node.is_empty() {
            w.write_vec(&self.auth);
        } else {
            let mut ids = self.auth.clone();
            for (scheme, id) in [
                (GUID_SCHEME, &self.guid),
                (CALL_NODE_SCHEME, &self.call_node),
            ] {
                if !id.is_empty() {
                    ids.push(Id {
                        scheme: scheme.into(),
                        id: id.clone(),
                    });
                }
            }
            w.write_vec(&ids);
        }
        match &self.fired {
            None => w.write_i32(-1),
            Some((path, ev)) => {
                w.write_i32(event_tag(*ev));
                w.write_string(path);
            }
        }
    }

    fn read(r: &mut Reader<'_>) -> Result<RecipeWait, DecodeError> {
        let session = r.read_i64()?;
        let module = r.read_string()?;
        let token = r.read_string()?;
        let path = r.read_string()?;
        let child = r.read_bool()?;
        let mut auth: Vec<Id> = r.read_vec()?;
        let mut take = |scheme: &str| match auth.last() {
            Some(id) if id.scheme == scheme => auth.pop().map(|id| id.id).unwrap_or_default(),
            _ => String::new(),
        };
        let call_node = take(CALL_NODE_SCHEME);
        let guid = take(GUID_SCHEME);
        let fired = match r.read_i32()? {
            -1 => None,
            t => Some((r.read_string()?, event_of(t)?)),
        };
        Ok(RecipeWait {
            session,
            module,
            token,
            path,
            child,
            auth,
            guid,
            call_node,
            fired,
        })
    }
}

fn event_tag(e: WatchEvent) -> i32 {
    match e {
        WatchEvent::Created => 1,
        WatchEvent::Deleted => 2,
        WatchEvent::DataChanged => 3,
        WatchEvent::ChildrenChanged => 4,
    }
}

fn event_of(t: i32) -> Result<WatchEvent, DecodeError> {
    Ok(match t {
        1 => WatchEvent::Created,
        2 => WatchEvent::Deleted,
        3 => WatchEvent::DataChanged,
        4 => WatchEvent::ChildrenChanged,
        t => {
            return Err(DecodeError::Invalid(format!(
                "unknown recipe watch event {t}"
            )))
        }
    })
}

/// Every member's table of recipe waits. Deterministic: changed only by
/// applying txns, iterated in key order.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RecipeWaits {
    waits: BTreeMap<WaitKey, RecipeWait>,
    /// Unfired waits by watched path.
    by_path: HashMap<String, BTreeSet<WaitKey>>,
    /// The last `Finished` notification of each ended wait, by wait key, with
    /// the zxid that ended it: sent again when the session re-attaches (a
    /// notification pushed while the client was away is not lost). Dropped
    /// when the same wait is registered again, or with the session.
    results: BTreeMap<WaitKey, (Zxid, Vec<u8>)>,
    /// The deployed modules (saved in snapshots after the waits, from
    /// snapshot format 3 on; see [`RecipeWaits::write_modules`]).
    pub modules: DeployedModules,
    /// The ensemble's recipe counters as last committed (a
    /// [`Txn::RecipeCounters`](crate::txn::Txn)); saved in snapshots after
    /// the modules from snapshot format 4 on, so a member loaded from a
    /// snapshot shows the leader's figures at that zxid.
    pub counters: RecipeCounters,
    /// The ACL of /zookeeper/recipes (saved in snapshots after the
    /// modules, from snapshot format 4 on; see
    /// [`RecipeWaits::write_recipes_acl`]).
    pub recipes_acl: RecipesAcl,
}

/// The ACL of the /zookeeper/recipes node, replicated (changed only by
/// applying a setACL of it, saved in snapshots): deploying and undeploying
/// need ADMIN in it. By default anyone may read the node and no one but the
/// super user (who passes every ACL check) may deploy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecipesAcl {
    pub acl: Vec<Acl>,
    /// The node's aversion: how many times its ACL was set.
    pub aversion: i32,
}

impl Default for RecipesAcl {
    fn default() -> Self {
        RecipesAcl {
            acl: Acl::read_unsafe(),
            aversion: 0,
        }
    }
}

impl RecipeWaits {
    pub fn len(&self) -> usize {
        self.waits.len()
    }

    pub fn is_empty(&self) -> bool {
        self.waits.is_empty()
    }

    pub fn get(&self, key: &WaitKey) -> Option<&RecipeWait> {
        self.waits.get(key)
    }

    pub fn iter(&self) -> impl Iterator<Item = &RecipeWait> {
        self.waits.values()
    }

    /// How many waits `session` has (fired or not).
    /// Whether `session` has a wait of a native call (not one made by a
    /// create), or the kept end of one: it speaks wazoo's own protocol.
    pub fn has_native_for(&self, session: i64) -> bool {
        let mut mine = self
            .waits
            .range(WaitKey::first_of(session)..)
            .take_while(|(k, _)| k.session == session);
        mine.any(|(_, w)| w.call_node.is_empty())
            || self
                .results
                .range(WaitKey::first_of(session)..)
                .next()
                .is_some_and(|(k, _)| k.session == session)
    }

    pub fn count_for(&self, session: i64) -> usize {
        self.waits
            .range(WaitKey::first_of(session)..)
            .take_while(|(k, _)| k.session == session)
            .count()
    }

    /// Adds a wait; one with the same key is replaced (and the result of
    /// its previous round is forgotten).
    pub fn register(&mut self, w: RecipeWait) {
        let key = w.key();
        self.remove(&key);
        self.results.remove(&key);
        if w.fired.is_none() {
            self.by_path
                .entry(w.path.clone())
                .or_default()
                .insert(key.clone());
        }
        self.waits.insert(key, w);
    }

    pub fn remove(&mut self, key: &WaitKey) -> Option<RecipeWait> {
        let w = self.waits.remove(key)?;
        if let Some(set) = self.by_path.get_mut(&w.path) {
            set.remove(key);
            if set.is_empty() {
                self.by_path.remove(&w.path);
            }
        }
        Some(w)
    }

    /// A txn triggered `event` on `path`: marks the matching waits fired
    /// and returns their keys (the callbacks now owed), in key order.
    pub fn trigger(&mut self, path: &str, event: EventType) -> Vec<WaitKey> {
        let Some(keys) = self.by_path.get(path) else {
            return Vec::new();
        };
        let mut fired = Vec::new();
        for key in keys {
            let w = self.waits.get_mut(key).expect("indexed waits exist");
            if let Some(ev) = w.fires_on(event) {
                w.fired = Some((path.to_string(), ev));
                fired.push(key.clone());
            }
        }
        if let Some(set) = self.by_path.get_mut(path) {
            for k in &fired {
                set.remove(k);
            }
            if set.is_empty() {
                self.by_path.remove(path);
            }
        }
        fired
    }

    /// The unfired waits that `event` on `path` would fire, and what they
    /// would see (does not mark them).
    pub fn matching(&self, path: &str, event: EventType) -> Vec<(WaitKey, WatchEvent)> {
        let Some(keys) = self.by_path.get(path) else {
            return Vec::new();
        };
        keys.iter()
            .filter_map(|k| {
                let ev = self.waits.get(k)?.fires_on(event)?;
                Some((k.clone(), ev))
            })
            .collect()
    }

    /// Drops every wait and result of an ended session.
    pub fn drop_session(&mut self, session: i64) {
        let keys: Vec<WaitKey> = self
            .waits
            .range(WaitKey::first_of(session)..)
            .take_while(|(k, _)| k.session == session)
            .map(|(k, _)| k.clone())
            .collect();
        for k in keys {
            self.remove(&k);
        }
        for k in self.result_keys(session) {
            self.results.remove(&k);
        }
    }

    fn result_keys(&self, session: i64) -> Vec<WaitKey> {
        self.results
            .range(WaitKey::first_of(session)..)
            .take_while(|(k, _)| k.session == session)
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Keeps the `Finished` payload that ended wait `key` at `zxid`; a
    /// session keeps at most `max` (the oldest go first).
    pub fn keep_result(&mut self, key: WaitKey, zxid: Zxid, payload: Vec<u8>, max: usize) {
        let session = key.session;
        self.results.insert(key, (zxid, payload));
        let mut keys = self.result_keys(session);
        if keys.len() > max {
            keys.sort_by_key(|k| self.results[k].0);
            let excess = keys.len() - max;
            for k in &keys[..excess] {
                self.results.remove(k);
            }
        }
    }

    /// The kept `Finished` payloads of `session`, oldest first.
    pub fn results_of(&self, session: i64) -> Vec<&[u8]> {
        let mut v: Vec<(Zxid, &[u8])> = self
            .results
            .range(WaitKey::first_of(session)..)
            .take_while(|(k, _)| k.session == session)
            .map(|(_, (z, p))| (*z, p.as_slice()))
            .collect();
        v.sort_by_key(|(z, _)| *z);
        v.into_iter().map(|(_, p)| p).collect()
    }

    /// Keys of the waits whose callback is owed, in key order.
    pub fn fired(&self) -> Vec<WaitKey> {
        self.waits
            .iter()
            .filter(|(_, w)| w.fired.is_some())
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// The modules that have waits, in order.
    pub fn modules(&self) -> BTreeSet<&str> {
        self.waits.keys().map(|k| k.module.as_str()).collect()
    }

    /// Keys of the waits of `module`, in key order.
    pub fn of_module(&self, module: &str) -> Vec<WaitKey> {
        self.waits
            .iter()
            .filter(|(k, _)| k.module == module)
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// The table's binary form (for snapshots): count, then each wait;
    /// count, then each kept result.
    pub fn write(&self, w: &mut Vec<u8>) {
        w.write_i32(self.waits.len() as i32);
        for wait in self.waits.values() {
            wait.write(w);
        }
        w.write_i32(self.results.len() as i32);
        for (key, (z, p)) in &self.results {
            w.write_i64(key.session);
            w.write_string(&key.module);
            w.write_string(&key.token);
            w.write_i64(z.to_wire());
            w.write_buffer(p);
        }
    }

    /// The deployed modules' binary form (snapshot format 3): count, then
    /// each module.
    pub fn write_modules(&self, w: &mut Vec<u8>) {
        w.write_i32(self.modules.len() as i32);
        for m in self.modules.values() {
            m.write(w);
        }
    }

    pub fn read_modules(&mut self, r: &mut Reader<'_>) -> Result<(), DecodeError> {
        let n = read_count(r, "module")?;
        for _ in 0..n {
            let m = DeployedModule::read(r)?;
            self.modules.insert(m.name.clone(), m);
        }
        Ok(())
    }

    /// The ACL of /zookeeper/recipes, as snapshots from format 4 on hold
    /// it after the modules: the aversion, then the ACL list.
    pub fn write_recipes_acl(&self, w: &mut Vec<u8>) {
        w.write_i32(self.recipes_acl.aversion);
        w.write_vec(&self.recipes_acl.acl);
    }

    /// Reads what [`RecipeWaits::write_recipes_acl`] wrote; an empty list
    /// (which would let anyone deploy) is refused.
    pub fn read_recipes_acl(&mut self, r: &mut Reader<'_>) -> Result<(), DecodeError> {
        let aversion = r.read_i32()?;
        let acl: Vec<Acl> = r.read_vec()?;
        if acl.is_empty() {
            return Err(DecodeError::Invalid(
                "an empty ACL for /zookeeper/recipes".into(),
            ));
        }
        self.recipes_acl = RecipesAcl { acl, aversion };
        Ok(())
    }

    pub fn read(r: &mut Reader<'_>) -> Result<RecipeWaits, DecodeError> {
        let n = r.read_i32()?;
        if n < 0 {
            return Err(DecodeError::Invalid(format!(
                "negative recipe wait count {n}"
            )));
        }
        let mut t = RecipeWaits::default();
        for _ in 0..n {
            t.register(RecipeWait::read(r)?);
        }
        let n = read_count(r, "result")?;
        for _ in 0..n {
            let key = WaitKey::new(r.read_i64()?, r.read_string()?, r.read_string()?);
            let zxid = Zxid::from_wire(r.read_i64()?);
            t.results.insert(key, (zxid, r.read_buffer()?));
        }
        Ok(t)
    }
}

/// A recipe step's effects: one txn, applied atomically by every member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecipeTxn {
    pub module: String,
    /// Tree writes (create, delete, setData, check), applied like a multi.
    pub ops: Vec<Txn>,
    /// (session, token) of the fired wait (of the txn's module) this step
    /// answered (a callback): removed before `waits` is added, if it is
    /// still the fired one (a registration made since, by a call the
    /// client sent again, is not this step's to consume).
    pub consumed: Vec<(i64, String)>,
    /// (session, token) of waits ended whatever their state (the module
    /// was unloaded).
    pub cancelled: Vec<(i64, String)>,
    /// New watch registrations (module: the txn's).
    pub waits: Vec<RecipeWait>,
    /// (session, MessagePack `abi::Notification`), delivered in order after
    /// the txn's changes by the member holding the session.
    pub notifications: Vec<(i64, Vec<u8>)>,
    /// A call's MessagePack `abi::Reply`, for the member answering the
    /// caller; empty for callbacks.
    pub reply: Vec<u8>,
}

/// How many ops a recipe txn may carry when decoding (beyond the per-call
/// cap, a guard against a corrupt record).
const MAX_RECIPE_ITEMS: i32 = 1 << 20;

fn read_count(r: &mut Reader<'_>, what: &str) -> Result<usize, DecodeError> {
    let n = r.read_i32()?;
    if !(0..=MAX_RECIPE_ITEMS).contains(&n) {
        return Err(DecodeError::Invalid(format!("bad recipe {what} count {n}")));
    }
    Ok(n as usize)
}

impl RecipeTxn {
    pub(crate) fn write(&self, w: &mut Vec<u8>) {
        w.write_string(&self.module);
        w.write_i32(self.ops.len() as i32);
        for op in &self.ops {
            op.write(w);
        }
        for list in [&self.consumed, &self.cancelled] {
            w.write_i32(list.len() as i32);
            for (s, t) in list {
                w.write_i64(*s);
                w.write_string(t);
            }
        }
        w.write_i32(self.waits.len() as i32);
        for wait in &self.waits {
            wait.write(w);
        }
        w.write_i32(self.notifications.len() as i32);
        for (s, p) in &self.notifications {
            w.write_i64(*s);
            w.write_buffer(p);
        }
        w.write_buffer(&self.reply);
    }

    /// `read_op` decodes one tree op (the txn codec, at multi depth).
    pub(crate) fn read(
        r: &mut Reader<'_>,
        mut read_op: impl FnMut(&mut Reader<'_>) -> Result<Txn, DecodeError>,
    ) -> Result<RecipeTxn, DecodeError> {
        let module = r.read_string()?;
        let n = read_count(r, "op")?;
        let mut ops = Vec::with_capacity(n.min(1024));
        for _ in 0..n {
            ops.push(read_op(r)?);
        }
        let read_keys = |r: &mut Reader<'_>, what: &str| {
            let n = read_count(r, what)?;
            let mut v = Vec::with_capacity(n.min(1024));
            for _ in 0..n {
                v.push((r.read_i64()?, r.read_string()?));
            }
            Ok::<_, DecodeError>(v)
        };
        let consumed = read_keys(r, "consumed")?;
        let cancelled = read_keys(r, "cancelled")?;
        let n = read_count(r, "wait")?;
        let mut waits = Vec::with_capacity(n.min(1024));
        for _ in 0..n {
            waits.push(RecipeWait::read(r)?);
        }
        let n = read_count(r, "notification")?;
        let mut notifications = Vec::with_capacity(n.min(1024));
        for _ in 0..n {
            notifications.push((r.read_i64()?, r.read_buffer()?));
        }
        let reply = r.read_buffer()?;
        Ok(RecipeTxn {
            module,
            ops,
            consumed,
            cancelled,
            waits,
            notifications,
            reply,
        })
    }
}

mod counters;
pub(crate) use counters::{read_counters, write_counters};
pub use counters::{
    ModuleCounters, RecipeCounters, COUNTERS_INTERVAL_MS, LATENCY_BOUNDS_US, LATENCY_BUCKETS,
    UNSERVED,
};

#[cfg(test)]
mod tests;
