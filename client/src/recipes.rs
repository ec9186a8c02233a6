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
//!
//! Here: the error type, [`call`] and the arguments several recipes share;
//! one module per recipe family holds its handles.

mod barriers;
mod election;
mod group;
mod locks;
mod queues;
mod two_phase;

pub use barriers::{Barrier, DoubleBarrier};
pub use election::Election;
pub use group::{Group, Member, Members};
pub use locks::{Lock, ReadWriteLock, Semaphore};
pub use queues::{PriorityQueue, Queue};
pub use two_phase::{TwoPhaseCommit, TwoPhaseSite, TxOutcome};

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
    // One guid for the call and for every time it is sent again.
    let guid = client.new_call_guid();
    let body = client
        .recipe_call_with_guid(module, method, &args, &guid)
        .await?;
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
                    // ask again (same session, same call guid, same token).
                    let body = match client.recipe_call_with_guid(module, method, &args, &guid).await {
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

#[cfg(test)]
mod tests {
    use super::queues::Put;
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
