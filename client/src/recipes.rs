//! Typed handles for wazoo's built-in recipes (the modules of
//! `recipes-wasm/`: `lock`, `rwlock`, `semaphore`, `queue`, `barrier`,
//! `double_barrier`, `twophase`, `election`, `group`), and [`call`], the
//! generic "call a recipe method and wait for its outcome" they are built on.
//!
//! A recipe method runs server-side as one atomic step. It either finishes
//! at once (`Reply::Done`) or answers `Reply::Wait { token }` after
//! registering a watch; the server then runs the recipe's watch handler when
//! the watch fires and, once that handler finishes, pushes a
//! `Notification::Finished { module, token, reply }` to the session. [`call`]
//! hides the difference: it subscribes to the session's recipe
//! notifications *before* sending the call (so a quick `Finished` cannot be
//! missed), then returns the decoded value of `Done`, or waits for the
//! matching `Finished`.
//!
//! Waiting survives connection loss (the session, and so the server-side
//! wait, lives on): the server sends the `Finished` of a wait that ended
//! while the client was away again when the session re-attaches. On top of
//! that, methods that are safe to repeat (every acquire, campaign and
//! wait-like method here; the recipes reuse the caller's node by its
//! session guid) are sent again once the client reconnects. A `take` is not
//! repeated (it would take a second item): it relies on the re-sent
//! `Finished`. When the session
//! ends (expired, closed) the wait fails with [`RecipeError::Ended`]: its
//! ephemeral nodes (locks, leases, memberships) are gone with it.
//!
//! The handles need the modules loaded on the server (`wazoo serve
//! --plugins DIR` with `scripts/build-recipes.sh DIR`). See
//! docs/BUILTIN_RECIPES.md for each recipe's node layout, and for how they
//! share paths with kazoo's recipes.

use crate::{Client, Error, SessionState};
use std::fmt;
use wazoo_sdk::abi::{self, Notification, Reply};
use wazoo_sdk::serde::de::DeserializeOwned;
use wazoo_sdk::serde::{Deserialize, Serialize};

/// Why a recipe call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecipeError {
    /// The request failed on the client's side or never reached the recipe
    /// (connection loss, session expired, module not loaded...).
    Client(Error),
    /// The recipe (or its watch handler) failed: a ZooKeeper error code
    /// (`NoNode` -101, `NodeExists` -110, `BadArguments` -8, ...) or the
    /// recipe's own, and its message. Nothing the failing step staged was
    /// applied.
    Failed {
        module: String,
        method: String,
        code: i32,
        message: String,
    },
    /// A reply, notification or result that does not decode as expected.
    Decode {
        module: String,
        method: String,
        message: String,
    },
    /// The session ended (or the client was dropped) while the call was
    /// waiting; `state` is the final state when known.
    Ended {
        module: String,
        method: String,
        state: Option<SessionState>,
    },
}

impl RecipeError {
    /// The ZooKeeper error code of the failure (`Failed`: the recipe's
    /// code; `Ended`: SessionExpired; `Decode`: MarshallingError).
    pub fn code(&self) -> i32 {
        match self {
            RecipeError::Client(e) => e.code().code(),
            RecipeError::Failed { code, .. } => *code,
            RecipeError::Decode { .. } => wazoo_proto::ErrorCode::MarshallingError.code(),
            RecipeError::Ended { .. } => wazoo_proto::ErrorCode::SessionExpired.code(),
        }
    }
}

impl fmt::Display for RecipeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecipeError::Client(e) => write!(f, "recipe call: {e}"),
            RecipeError::Failed {
                module,
                method,
                code,
                message,
            } => write!(f, "{module}.{method} failed: {message} ({code})"),
            RecipeError::Decode {
                module,
                method,
                message,
            } => write!(f, "{module}.{method}: cannot decode: {message}"),
            RecipeError::Ended {
                module,
                method,
                state,
            } => match state {
                Some(s) => write!(
                    f,
                    "{module}.{method}: the session ended ({s:?}) while waiting"
                ),
                None => write!(f, "{module}.{method}: the client ended while waiting"),
            },
        }
    }
}

impl std::error::Error for RecipeError {}

impl From<Error> for RecipeError {
    fn from(e: Error) -> RecipeError {
        RecipeError::Client(e)
    }
}

/// The result of a recipe call.
pub type RecipeResult<T> = std::result::Result<T, RecipeError>;

/// What one reply means for a call.
#[derive(Debug, PartialEq, Eq)]
enum Outcome<T> {
    Done(T),
    Wait(String),
}

fn decode_err(module: &str, method: &str, message: impl fmt::Display) -> RecipeError {
    RecipeError::Decode {
        module: module.to_string(),
        method: method.to_string(),
        message: message.to_string(),
    }
}

/// Interprets a `Reply` (from the call's reply or from a `Finished`).
fn interpret<T: DeserializeOwned>(
    module: &str,
    method: &str,
    reply: Reply,
) -> RecipeResult<Outcome<T>> {
    match reply {
        Reply::Done(v) => {
            // A method that returns `()` may answer nil.
            let v: &[u8] = if v.is_empty() { &[0xc0] } else { &v };
            abi::decode(v)
                .map(Outcome::Done)
                .map_err(|e| decode_err(module, method, format!("result: {e}")))
        }
        Reply::Wait { token } => Ok(Outcome::Wait(token)),
        Reply::Error { code, message } => Err(RecipeError::Failed {
            module: module.to_string(),
            method: method.to_string(),
            code,
            message,
        }),
    }
}

/// Whether a notification finishes the wait `(module, token)`: its reply.
fn finished(payload: &[u8], module: &str, token: &str) -> Option<Reply> {
    match abi::decode::<Notification>(payload) {
        Ok(Notification::Finished {
            module: m,
            token: t,
            reply,
        }) if m == module && t == token => Some(reply),
        _ => None,
    }
}

/// Calls `module.method(args)` and returns its result, waiting for the
/// recipe's `Finished` notification if the method answers `Wait`. Methods
/// that are not safe to repeat must use [`call_once`]; this one re-sends the
/// call after a reconnection while waiting (see the module docs).
pub async fn call<A: Serialize, T: DeserializeOwned>(
    client: &Client,
    module: &str,
    method: &str,
    args: &A,
) -> RecipeResult<T> {
    call_inner(client, module, method, args, true).await
}

/// Like [`call`], but never re-sends the call (for non-idempotent methods
/// such as `queue.take`): after a reconnection it keeps waiting for the
/// `Finished` notification.
pub async fn call_once<A: Serialize, T: DeserializeOwned>(
    client: &Client,
    module: &str,
    method: &str,
    args: &A,
) -> RecipeResult<T> {
    call_inner(client, module, method, args, false).await
}

async fn call_inner<A: Serialize, T: DeserializeOwned>(
    client: &Client,
    module: &str,
    method: &str,
    args: &A,
    repeat_on_reconnect: bool,
) -> RecipeResult<T> {
    let args =
        abi::encode(args).map_err(|e| Error::bad_arguments(format!("recipe arguments: {e}")))?;
    // Subscribe first: the Finished may come right behind the reply.
    let mut notes = client.recipe_notifications();
    let mut state = client.state_receiver();
    state.mark_unchanged();
    let body = client.recipe_call(module, method, &args).await?;
    let reply: Reply =
        abi::decode(&body).map_err(|e| decode_err(module, method, format!("reply: {e}")))?;
    let mut token = match interpret(module, method, reply)? {
        Outcome::Done(v) => return Ok(v),
        Outcome::Wait(t) => t,
    };
    let mut was_down = false;
    loop {
        tokio::select! {
            n = notes.recv() => {
                let Some(n) = n else {
                    return Err(RecipeError::Ended {
                        module: module.to_string(),
                        method: method.to_string(),
                        state: Some(client.state()).filter(|s| !s.is_alive()),
                    });
                };
                if let Some(reply) = finished(&n.payload, module, &token) {
                    match interpret(module, method, reply)? {
                        Outcome::Done(v) => return Ok(v),
                        // Not sent by the server (a Wait is not a finish); keep waiting.
                        Outcome::Wait(t) => token = t,
                    }
                }
            }
            changed = state.changed() => {
                let s = *state.borrow_and_update();
                if changed.is_err() || !s.is_alive() {
                    return Err(RecipeError::Ended {
                        module: module.to_string(),
                        method: method.to_string(),
                        state: Some(s).filter(|s| !s.is_alive()),
                    });
                }
                if !s.is_connected() {
                    was_down = true;
                } else if was_down && repeat_on_reconnect {
                    was_down = false;
                    // The Finished may have been pushed while we were away:
                    // ask again (same session, same guid, same token).
                    let body = match client.recipe_call(module, method, &args).await {
                        Ok(b) => b,
                        Err(Error::ConnectionLoss) => { was_down = true; continue; }
                        Err(e) => return Err(e.into()),
                    };
                    let reply: Reply = abi::decode(&body)
                        .map_err(|e| decode_err(module, method, format!("reply: {e}")))?;
                    match interpret(module, method, reply)? {
                        Outcome::Done(v) => return Ok(v),
                        Outcome::Wait(t) => token = t,
                    }
                }
            }
        }
    }
}

/// Bytes as MessagePack bin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(crate = "wazoo_sdk::serde")]
struct Bin(#[serde(with = "wazoo_sdk::abi::bytes")] Vec<u8>);

#[derive(Serialize)]
#[serde(crate = "wazoo_sdk::serde")]
struct PathArg<'a> {
    path: &'a str,
}

#[derive(Serialize)]
#[serde(crate = "wazoo_sdk::serde")]
struct PathId<'a> {
    path: &'a str,
    #[serde(with = "wazoo_sdk::abi::bytes")]
    id: &'a [u8],
}

#[derive(Serialize)]
#[serde(crate = "wazoo_sdk::serde")]
struct NodeArg<'a> {
    node: &'a str,
}

// ---- lock ----------------------------------------------------------------

/// An exclusive, fair lock (module `lock`). Server-side: an ephemeral
/// sequential node `PATH/<session hex>__lock__<seq>` (kazoo's naming, so
/// kazoo's `Lock`/`WriteLock`/`ReadLock` on the same path contend with it);
/// the lowest sequence holds; a waiter watches only its predecessor. One
/// contender per session and path: acquiring twice from one session returns
/// the same node.
#[derive(Debug, Clone)]
pub struct Lock {
    client: Client,
    path: String,
    id: Vec<u8>,
}

impl Lock {
    pub fn new(client: &Client, path: &str) -> Lock {
        Lock {
            client: client.clone(),
            path: path.to_string(),
            id: Vec::new(),
        }
    }

    /// The data written into the lock node (kazoo's `identifier`).
    pub fn with_id(mut self, id: &[u8]) -> Lock {
        self.id = id.to_vec();
        self
    }

    /// Waits until the lock is held; returns the lock node's path.
    pub async fn acquire(&self) -> RecipeResult<String> {
        let a = PathId {
            path: &self.path,
            id: &self.id,
        };
        call(&self.client, "lock", "acquire", &a).await
    }

    /// Deletes the caller's lock node (held or still waiting); false if
    /// there was none.
    pub async fn release(&self) -> RecipeResult<bool> {
        call(
            &self.client,
            "lock",
            "release",
            &PathArg { path: &self.path },
        )
        .await
    }

    /// The holding node's path, if the lock is held by a writer (none when
    /// free or held by kazoo readers).
    pub async fn holder(&self) -> RecipeResult<Option<String>> {
        call(
            &self.client,
            "lock",
            "holder",
            &PathArg { path: &self.path },
        )
        .await
    }
}

// ---- rwlock --------------------------------------------------------------

/// A shared (read/write) lock, revocable (module `rwlock`). Server-side:
/// `PATH/<session hex>__rlock__<seq>` for readers, `__lock__` for writers
/// (kazoo's `ReadLock`/`WriteLock` names). A reader waits only for lower
/// writers; a writer for any lower node. Revocation: [`revoke`] writes
/// "unlock" into a holder's node; the holder learns it from
/// [`watch_revoke`].
///
/// [`revoke`]: ReadWriteLock::revoke
/// [`watch_revoke`]: ReadWriteLock::watch_revoke
#[derive(Debug, Clone)]
pub struct ReadWriteLock {
    client: Client,
    path: String,
    id: Vec<u8>,
}

impl ReadWriteLock {
    pub fn new(client: &Client, path: &str) -> ReadWriteLock {
        ReadWriteLock {
            client: client.clone(),
            path: path.to_string(),
            id: Vec::new(),
        }
    }

    /// The data written into the lock nodes.
    pub fn with_id(mut self, id: &[u8]) -> ReadWriteLock {
        self.id = id.to_vec();
        self
    }

    /// Waits until a read lock is held; returns its node's path.
    pub async fn read_acquire(&self) -> RecipeResult<String> {
        let a = PathId {
            path: &self.path,
            id: &self.id,
        };
        call(&self.client, "rwlock", "read_acquire", &a).await
    }

    /// Waits until the write lock is held; returns its node's path.
    pub async fn write_acquire(&self) -> RecipeResult<String> {
        let a = PathId {
            path: &self.path,
            id: &self.id,
        };
        call(&self.client, "rwlock", "write_acquire", &a).await
    }

    /// Deletes the caller's read and write nodes; how many there were.
    pub async fn release(&self) -> RecipeResult<u32> {
        call(
            &self.client,
            "rwlock",
            "release",
            &PathArg { path: &self.path },
        )
        .await
    }

    /// Asks the holder of `node` (a lock node path) to release: sets its
    /// data to "unlock". False if the node is gone.
    pub async fn revoke(&self, node: &str) -> RecipeResult<bool> {
        call(&self.client, "rwlock", "revoke", &NodeArg { node }).await
    }

    /// Waits until someone asks to revoke `node` (the caller's lock node):
    /// true; false if the node went away first (released, session lost).
    pub async fn watch_revoke(&self, node: &str) -> RecipeResult<bool> {
        call(&self.client, "rwlock", "watch_revoke", &NodeArg { node }).await
    }
}

// ---- semaphore -----------------------------------------------------------

/// A semaphore of `max_leases` leases (module `semaphore`), kazoo's layout:
/// leases `PATH/<session hex>` (ephemeral), `max_leases` as `PATH`'s data,
/// and acquirers queued on the exclusive lock `PATH-__lock__`; only the
/// queue's head watches the leases (no herd, first come first served).
#[derive(Debug, Clone)]
pub struct Semaphore {
    client: Client,
    path: String,
    max_leases: u32,
    id: Vec<u8>,
}

#[derive(Serialize)]
#[serde(crate = "wazoo_sdk::serde")]
struct SemAcquire<'a> {
    path: &'a str,
    max_leases: u32,
    #[serde(with = "wazoo_sdk::abi::bytes")]
    id: &'a [u8],
}

impl Semaphore {
    pub fn new(client: &Client, path: &str, max_leases: u32) -> Semaphore {
        Semaphore {
            client: client.clone(),
            path: path.to_string(),
            max_leases,
            id: Vec::new(),
        }
    }

    /// The data written into the lease node.
    pub fn with_id(mut self, id: &[u8]) -> Semaphore {
        self.id = id.to_vec();
        self
    }

    /// Waits for a lease; returns the lease node's path. Fails with
    /// BadArguments if the semaphore was created with another `max_leases`.
    pub async fn acquire(&self) -> RecipeResult<String> {
        let a = SemAcquire {
            path: &self.path,
            max_leases: self.max_leases,
            id: &self.id,
        };
        call(&self.client, "semaphore", "acquire", &a).await
    }

    /// Gives the lease back (or leaves the queue); false if there was none.
    pub async fn release(&self) -> RecipeResult<bool> {
        call(
            &self.client,
            "semaphore",
            "release",
            &PathArg { path: &self.path },
        )
        .await
    }

    /// The data of every lease (kazoo's `lease_holders`).
    pub async fn holders(&self) -> RecipeResult<Vec<Vec<u8>>> {
        let v: Vec<Bin> = call(
            &self.client,
            "semaphore",
            "holders",
            &PathArg { path: &self.path },
        )
        .await?;
        Ok(v.into_iter().map(|b| b.0).collect())
    }
}

// ---- queue ---------------------------------------------------------------

#[derive(Serialize)]
#[serde(crate = "wazoo_sdk::serde")]
struct Put<'a> {
    path: &'a str,
    #[serde(with = "wazoo_sdk::abi::bytes")]
    data: &'a [u8],
    priority: u16,
}

/// A distributed FIFO queue (module `queue`), kazoo's `Queue` layout:
/// items are persistent sequential nodes `PATH/entry-100-<seq>`, taken in
/// name order; a take deletes the item in the same atomic step, so each
/// item goes to exactly one taker. Not reliable consumption: an item whose
/// `take` reply is lost is gone.
#[derive(Debug, Clone)]
pub struct Queue {
    client: Client,
    path: String,
}

impl Queue {
    pub fn new(client: &Client, path: &str) -> Queue {
        Queue {
            client: client.clone(),
            path: path.to_string(),
        }
    }

    /// Appends an item; returns its node name.
    pub async fn put(&self, data: &[u8]) -> RecipeResult<String> {
        let a = Put {
            path: &self.path,
            data,
            priority: 100,
        };
        call_once(&self.client, "queue", "put", &a).await
    }

    /// Takes the first item, waiting while the queue is empty (every
    /// waiting taker is woken by a put; the ones that lose the race wait
    /// again).
    pub async fn take(&self) -> RecipeResult<Vec<u8>> {
        let b: Bin =
            call_once(&self.client, "queue", "take", &PathArg { path: &self.path }).await?;
        Ok(b.0)
    }

    /// The number of items.
    pub async fn len(&self) -> RecipeResult<u32> {
        call(&self.client, "queue", "len", &PathArg { path: &self.path }).await
    }

    /// Whether the queue has no items.
    pub async fn is_empty(&self) -> RecipeResult<bool> {
        Ok(self.len().await? == 0)
    }
}

/// A priority queue (module `queue`): items `PATH/entry-PPP-<seq>`, where
/// `PPP` is the priority 0-999 in three digits; lower priorities are taken
/// first, FIFO within a priority. Shares the layout (and the path) with
/// [`Queue`], whose items have priority 100, and with kazoo's `Queue`.
#[derive(Debug, Clone)]
pub struct PriorityQueue {
    queue: Queue,
}

impl PriorityQueue {
    pub fn new(client: &Client, path: &str) -> PriorityQueue {
        PriorityQueue {
            queue: Queue::new(client, path),
        }
    }

    /// Adds an item with a priority (0-999; lower is taken first).
    pub async fn put(&self, data: &[u8], priority: u16) -> RecipeResult<String> {
        let a = Put {
            path: &self.queue.path,
            data,
            priority,
        };
        call_once(&self.queue.client, "queue", "put_priority", &a).await
    }

    /// Takes the item of lowest priority value (waits while empty).
    pub async fn take(&self) -> RecipeResult<Vec<u8>> {
        self.queue.take().await
    }

    pub async fn len(&self) -> RecipeResult<u32> {
        self.queue.len().await
    }

    pub async fn is_empty(&self) -> RecipeResult<bool> {
        self.queue.is_empty().await
    }
}

// ---- barriers ------------------------------------------------------------

/// A simple barrier (module `barrier`): up while the node `PATH` exists.
#[derive(Debug, Clone)]
pub struct Barrier {
    client: Client,
    path: String,
}

impl Barrier {
    pub fn new(client: &Client, path: &str) -> Barrier {
        Barrier {
            client: client.clone(),
            path: path.to_string(),
        }
    }

    /// Puts the barrier up (creates the node and its parents); false if it
    /// was already up.
    pub async fn set(&self) -> RecipeResult<bool> {
        call(
            &self.client,
            "barrier",
            "set",
            &PathArg { path: &self.path },
        )
        .await
    }

    /// Takes the barrier down; false if it was not up.
    pub async fn remove(&self) -> RecipeResult<bool> {
        call(
            &self.client,
            "barrier",
            "remove",
            &PathArg { path: &self.path },
        )
        .await
    }

    /// Waits until the barrier is down (an exists watch on the node).
    pub async fn wait(&self) -> RecipeResult<()> {
        call(
            &self.client,
            "barrier",
            "wait",
            &PathArg { path: &self.path },
        )
        .await
    }
}

#[derive(Serialize)]
#[serde(crate = "wazoo_sdk::serde")]
struct Enter<'a> {
    path: &'a str,
    name: &'a str,
    count: u32,
}

#[derive(Serialize)]
#[serde(crate = "wazoo_sdk::serde")]
struct Leave<'a> {
    path: &'a str,
    name: &'a str,
}

/// A double barrier (module `double_barrier`), the ZooKeeper recipe: each
/// process has an ephemeral node `PATH/NAME`; `enter` waits until `count`
/// are there (the last one creates `PATH/ready`), `leave` until all are
/// gone (the lowest watches the highest, the others delete theirs and watch
/// the lowest). A process that dies inside does not block the others.
#[derive(Debug, Clone)]
pub struct DoubleBarrier {
    client: Client,
    path: String,
    name: String,
    count: u32,
}

impl DoubleBarrier {
    /// `name`: this process's node name (one path component, not "ready");
    /// `count`: how many processes must enter.
    pub fn new(client: &Client, path: &str, name: &str, count: u32) -> DoubleBarrier {
        DoubleBarrier {
            client: client.clone(),
            path: path.to_string(),
            name: name.to_string(),
            count,
        }
    }

    /// Enters; waits until `count` processes have.
    pub async fn enter(&self) -> RecipeResult<()> {
        let a = Enter {
            path: &self.path,
            name: &self.name,
            count: self.count,
        };
        call(&self.client, "double_barrier", "enter", &a).await
    }

    /// Leaves; waits until every process has.
    pub async fn leave(&self) -> RecipeResult<()> {
        let a = Leave {
            path: &self.path,
            name: &self.name,
        };
        call(&self.client, "double_barrier", "leave", &a).await
    }
}

// ---- two-phase commit ----------------------------------------------------

/// The outcome of a two-phase commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxOutcome {
    Commit,
    Abort,
}

impl TxOutcome {
    fn parse(s: &str) -> RecipeResult<TxOutcome> {
        match s {
            "commit" => Ok(TxOutcome::Commit),
            "abort" => Ok(TxOutcome::Abort),
            other => Err(decode_err(
                "twophase",
                "decision",
                format!("outcome {other:?}"),
            )),
        }
    }
}

#[derive(Serialize)]
#[serde(crate = "wazoo_sdk::serde")]
struct TxArg<'a> {
    tx: &'a str,
}

#[derive(Serialize)]
#[serde(crate = "wazoo_sdk::serde")]
struct Begin<'a> {
    tx: &'a str,
    sites: &'a [String],
    #[serde(with = "wazoo_sdk::abi::bytes")]
    data: &'a [u8],
}

#[derive(Serialize)]
#[serde(crate = "wazoo_sdk::serde")]
struct SiteArg<'a> {
    tx: &'a str,
    site: &'a str,
}

#[derive(Serialize)]
#[serde(crate = "wazoo_sdk::serde")]
struct VoteArg<'a> {
    tx: &'a str,
    site: &'a str,
    commit: bool,
}

/// The coordinator of a two-phase commit (module `twophase`). Server-side:
/// the transaction node `TX` (data: the transaction), a child per site,
/// `TX/_coordinator` and, once decided, `TX/_decision`. The coordinator's
/// [`decision`](TwoPhaseCommit::decision) wait is what detects a site
/// failing before its vote (its ephemeral `TX/SITE/alive` vanishing),
/// deciding abort.
#[derive(Debug, Clone)]
pub struct TwoPhaseCommit {
    client: Client,
    tx: String,
}

impl TwoPhaseCommit {
    pub fn new(client: &Client, tx: &str) -> TwoPhaseCommit {
        TwoPhaseCommit {
            client: client.clone(),
            tx: tx.to_string(),
        }
    }

    /// Creates the transaction: its node (with `data`, the transaction the
    /// sites read when they join) and one node per site. Site names are one
    /// path component and do not start with `_`.
    pub async fn begin(&self, sites: &[String], data: &[u8]) -> RecipeResult<()> {
        let a = Begin {
            tx: &self.tx,
            sites,
            data,
        };
        call(&self.client, "twophase", "begin", &a).await
    }

    /// Waits for the outcome (watching the sites' presence, one at a time).
    pub async fn decision(&self) -> RecipeResult<TxOutcome> {
        let s: String = call(
            &self.client,
            "twophase",
            "decision",
            &TxArg { tx: &self.tx },
        )
        .await?;
        TxOutcome::parse(&s)
    }

    /// Decides abort unless already decided (e.g. on the coordinator's
    /// timeout); returns the outcome.
    pub async fn abort(&self) -> RecipeResult<TxOutcome> {
        let s: String = call(&self.client, "twophase", "abort", &TxArg { tx: &self.tx }).await?;
        TxOutcome::parse(&s)
    }

    /// A site's handle on this transaction.
    pub fn site(&self, site: &str) -> TwoPhaseSite {
        TwoPhaseSite::new(&self.client, &self.tx, site)
    }
}

/// A participating site of a two-phase commit (module `twophase`).
#[derive(Debug, Clone)]
pub struct TwoPhaseSite {
    client: Client,
    tx: String,
    site: String,
}

impl TwoPhaseSite {
    pub fn new(client: &Client, tx: &str, site: &str) -> TwoPhaseSite {
        TwoPhaseSite {
            client: client.clone(),
            tx: tx.to_string(),
            site: site.to_string(),
        }
    }

    /// Joins: creates the site's ephemeral presence node (its failure before
    /// voting then aborts the transaction); returns the transaction data.
    pub async fn join(&self) -> RecipeResult<Vec<u8>> {
        let a = SiteArg {
            tx: &self.tx,
            site: &self.site,
        };
        let b: Bin = call(&self.client, "twophase", "join", &a).await?;
        Ok(b.0)
    }

    /// Votes; returns the outcome if it is decided (an abort vote decides
    /// at once; the last commit vote decides commit).
    pub async fn vote(&self, commit: bool) -> RecipeResult<Option<TxOutcome>> {
        let a = VoteArg {
            tx: &self.tx,
            site: &self.site,
            commit,
        };
        let s: Option<String> = call(&self.client, "twophase", "vote", &a).await?;
        s.as_deref().map(TxOutcome::parse).transpose()
    }

    /// Waits for the outcome (a watch on `TX/_decision` only).
    pub async fn decision(&self) -> RecipeResult<TxOutcome> {
        let s: String = call(
            &self.client,
            "twophase",
            "decision",
            &TxArg { tx: &self.tx },
        )
        .await?;
        TxOutcome::parse(&s)
    }
}

// ---- election ------------------------------------------------------------

/// Leader election (module `election`), the ZooKeeper recipe with kazoo's
/// `Election` node names: candidates `PATH/<session hex>__lock__<seq>`
/// (ephemeral sequential, data = the id), the lowest leads, each candidate
/// watches only the next lower one. The leader acknowledges with
/// [`ack`](Election::ack) (node `PATH/__ack__`), which
/// [`wait_ack`](Election::wait_ack) waits for.
#[derive(Debug, Clone)]
pub struct Election {
    client: Client,
    path: String,
    id: Vec<u8>,
}

impl Election {
    /// `id`: this candidate's data, what [`leader`](Election::leader) returns.
    pub fn new(client: &Client, path: &str, id: &[u8]) -> Election {
        Election {
            client: client.clone(),
            path: path.to_string(),
            id: id.to_vec(),
        }
    }

    /// Volunteers and waits until this session leads; returns its node.
    pub async fn campaign(&self) -> RecipeResult<String> {
        let a = PathId {
            path: &self.path,
            id: &self.id,
        };
        call(&self.client, "election", "campaign", &a).await
    }

    /// The current leader's id.
    pub async fn leader(&self) -> RecipeResult<Option<Vec<u8>>> {
        let b: Option<Bin> = call(
            &self.client,
            "election",
            "leader",
            &PathArg { path: &self.path },
        )
        .await?;
        Ok(b.map(|b| b.0))
    }

    /// Withdraws (leader or not); false if this session was no candidate.
    pub async fn resign(&self) -> RecipeResult<bool> {
        call(
            &self.client,
            "election",
            "resign",
            &PathArg { path: &self.path },
        )
        .await
    }

    /// As the leader: acknowledges that the leader procedure ran. Fails
    /// with APIError (-100) if this session does not lead.
    pub async fn ack(&self) -> RecipeResult<()> {
        call(
            &self.client,
            "election",
            "ack",
            &PathArg { path: &self.path },
        )
        .await
    }

    /// Waits until the current leader has acknowledged; returns its id.
    pub async fn wait_ack(&self) -> RecipeResult<Vec<u8>> {
        let b: Bin = call(
            &self.client,
            "election",
            "wait_ack",
            &PathArg { path: &self.path },
        )
        .await?;
        Ok(b.0)
    }
}

// ---- group ---------------------------------------------------------------

/// A group member: its node name and data.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(crate = "wazoo_sdk::serde")]
pub struct Member {
    pub name: String,
    #[serde(with = "wazoo_sdk::abi::bytes")]
    pub data: Vec<u8>,
}

/// A group's membership: the members (by name) and the group node's
/// cversion (-1 if there is no group node), which changes with every join
/// and leave; pass it to [`Group::watch`].
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(crate = "wazoo_sdk::serde")]
pub struct Members {
    pub version: i32,
    pub members: Vec<Member>,
}

#[derive(Serialize)]
#[serde(crate = "wazoo_sdk::serde")]
struct JoinArg<'a> {
    path: &'a str,
    member: &'a str,
    #[serde(with = "wazoo_sdk::abi::bytes")]
    data: &'a [u8],
}

#[derive(Serialize)]
#[serde(crate = "wazoo_sdk::serde")]
struct MemberArg<'a> {
    path: &'a str,
    member: &'a str,
}

#[derive(Serialize)]
#[serde(crate = "wazoo_sdk::serde")]
struct WatchArg<'a> {
    path: &'a str,
    version: i32,
}

/// Group membership (module `group`): members are ephemeral nodes
/// `PATH/MEMBER` under a persistent group node, so a failed member leaves
/// by itself.
#[derive(Debug, Clone)]
pub struct Group {
    client: Client,
    path: String,
}

impl Group {
    pub fn new(client: &Client, path: &str) -> Group {
        Group {
            client: client.clone(),
            path: path.to_string(),
        }
    }

    /// Joins as `member` with `data` (updates the data if this session is
    /// already that member; NodeExists if another session is).
    pub async fn join(&self, member: &str, data: &[u8]) -> RecipeResult<()> {
        let a = JoinArg {
            path: &self.path,
            member,
            data,
        };
        call(&self.client, "group", "join", &a).await
    }

    /// Leaves; false if this session was not `member`.
    pub async fn leave(&self, member: &str) -> RecipeResult<bool> {
        let a = MemberArg {
            path: &self.path,
            member,
        };
        call(&self.client, "group", "leave", &a).await
    }

    /// The current members.
    pub async fn members(&self) -> RecipeResult<Members> {
        call(
            &self.client,
            "group",
            "members",
            &PathArg { path: &self.path },
        )
        .await
    }

    /// Waits until the membership differs from `version` (a
    /// [`Members::version`]); returns the new membership.
    pub async fn watch(&self, version: i32) -> RecipeResult<Members> {
        let a = WatchArg {
            path: &self.path,
            version,
        };
        call(&self.client, "group", "watch_members", &a).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done<T: Serialize>(v: &T) -> Reply {
        Reply::Done(abi::encode(v).unwrap())
    }

    #[test]
    fn replies_are_interpreted() {
        let r: Outcome<String> = interpret("lock", "acquire", done(&"/l/x")).unwrap();
        assert_eq!(r, Outcome::Done("/l/x".to_string()));
        let r: Outcome<()> = interpret("barrier", "wait", Reply::Done(Vec::new())).unwrap();
        assert_eq!(r, Outcome::Done(()));
        let r: Outcome<()> = interpret("barrier", "wait", done(&())).unwrap();
        assert_eq!(r, Outcome::Done(()));
        let r: Outcome<String> = interpret(
            "lock",
            "acquire",
            Reply::Wait {
                token: "acquire:/l".into(),
            },
        )
        .unwrap();
        assert_eq!(r, Outcome::Wait("acquire:/l".into()));
        let e = interpret::<String>(
            "lock",
            "acquire",
            Reply::Error {
                code: -101,
                message: "gone".into(),
            },
        )
        .unwrap_err();
        assert_eq!(e.code(), -101);
        assert_eq!(e.to_string(), "lock.acquire failed: gone (-101)");
        let e = interpret::<u32>("queue", "len", done(&"x")).unwrap_err();
        assert!(matches!(e, RecipeError::Decode { .. }), "{e:?}");
    }

    #[test]
    fn bytes_results_decode_from_bin() {
        let v = abi::encode(&Bin(b"hi".to_vec())).unwrap();
        assert_eq!(v, vec![0xc4, 2, b'h', b'i']);
        let r: Outcome<Bin> = interpret("queue", "take", Reply::Done(v)).unwrap();
        assert_eq!(r, Outcome::Done(Bin(b"hi".to_vec())));
        let r: Outcome<Option<Bin>> = interpret("election", "leader", done(&())).unwrap();
        assert_eq!(r, Outcome::Done(None));
    }

    #[test]
    fn only_the_matching_finished_notification_ends_a_wait() {
        let note = |module: &str, token: &str| {
            abi::encode(&Notification::Finished {
                module: module.into(),
                token: token.into(),
                reply: done(&true),
            })
            .unwrap()
        };
        assert!(finished(&note("lock", "acquire:/a"), "lock", "acquire:/a").is_some());
        assert!(finished(&note("lock", "acquire:/b"), "lock", "acquire:/a").is_none());
        assert!(finished(&note("rwlock", "acquire:/a"), "lock", "acquire:/a").is_none());
        let msg = abi::encode(&Notification::Message {
            module: "lock".into(),
            payload: vec![1],
        })
        .unwrap();
        assert!(finished(&msg, "lock", "acquire:/a").is_none());
        assert!(finished(b"junk", "lock", "acquire:/a").is_none());
    }

    #[test]
    fn arguments_are_maps_with_the_recipes_field_names() {
        // The recipes decode named fields; a positional encoding would fail.
        let v = abi::encode(&Put {
            path: "/q",
            data: b"x",
            priority: 7,
        })
        .unwrap();
        #[derive(Deserialize)]
        #[serde(crate = "wazoo_sdk::serde")]
        struct PutIn {
            path: String,
            #[serde(with = "wazoo_sdk::abi::bytes")]
            data: Vec<u8>,
            priority: u16,
        }
        let p: PutIn = abi::decode(&v).unwrap();
        assert_eq!(
            (p.path.as_str(), p.data.as_slice(), p.priority),
            ("/q", &b"x"[..], 7)
        );
        // The group recipe's result shape.
        #[derive(Serialize)]
        #[serde(crate = "wazoo_sdk::serde")]
        struct MemberOut<'a> {
            name: &'a str,
            #[serde(with = "wazoo_sdk::abi::bytes")]
            data: &'a [u8],
        }
        #[derive(Serialize)]
        #[serde(crate = "wazoo_sdk::serde")]
        struct MembersOut<'a> {
            version: i32,
            members: Vec<MemberOut<'a>>,
        }
        let out = MembersOut {
            version: 3,
            members: vec![MemberOut {
                name: "a",
                data: b"d",
            }],
        };
        let r: Outcome<Members> = interpret("group", "members", done(&out)).unwrap();
        let Outcome::Done(m) = r else { panic!() };
        assert_eq!(m.version, 3);
        assert_eq!(
            m.members,
            vec![Member {
                name: "a".into(),
                data: b"d".to_vec()
            }]
        );
    }
}
