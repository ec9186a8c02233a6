//! wazoo-client: an async (tokio) client for wazoo and for any Apache
//! ZooKeeper server, and the interactive shell that `wazoo cli` runs.
//!
//! The client follows ZooKeeper's client behavior (the Programmer's Guide,
//! "Sessions"): a connection string with an optional chroot, a random
//! server from the list, reconnection to the next server keeping the session
//! (id + password) until the ensemble expires it, session state changes on
//! an [`EventStream`] (the default watcher), pings when idle, ConnectionLoss
//! for calls pending when a connection drops, one-shot and persistent
//! watches re-registered on reconnect so that no event is missed, and the
//! probabilistic rebalancing of [`Client::update_server_list`].
//!
//! ```no_run
//! use wazoo_client::{Acl, Client, ClientOptions, CreateMode};
//!
//! # async fn demo() -> wazoo_client::Result<()> {
//! let (zk, mut events) = Client::connect("127.0.0.1:2181/app", ClientOptions::default()).await?;
//! zk.create("/config", b"v1", &Acl::open_unsafe(), CreateMode::Persistent).await?;
//! let (data, stat, watch) = zk.get_data_w("/config").await?;
//! zk.set_data("/config", b"v2", Some(stat.version)).await?;
//! let event = watch.await; // NodeDataChanged /config
//! # let _ = (data, event, events.recv().await);
//! zk.close().await?;
//! # Ok(()) }
//! ```
//!
//! One background task per client owns the socket; requests are pipelined
//! (any number in flight, matched to replies in order) and written in
//! batches, so a single client can drive a server at full speed.
//!
//! Layout:
//! - `client`: [`Client`] (`client.rs`), its options (`client/options.rs`)
//!   and every ZooKeeper operation (`client/operations.rs`).
//! - `session`: the connection task that owns the socket, reconnects and
//!   keeps the session (`session/handshake.rs` opens a connection,
//!   `session/connected.rs` and `session/incoming.rs` serve a live one).
//! - `watch`: watches as the application holds them, and their registry.
//! - `connect_string`, [`hosts`]: connection strings and chroots; which
//!   server to try next.
//! - `ops`, `error`: typed `multi` ops and results; the error type.
//! - [`recipes`]: typed handles for wazoo's built-in recipes (one file per
//!   recipe family under `recipes/`).
//! - [`shell`]: the interactive shell of `wazoo cli`.

mod client;
mod connect_string;
pub mod deploy;
mod error;
pub mod hosts;
mod ops;
pub mod recipes;
mod session;
pub mod shell;
mod watch;

pub use client::{
    digest_id, Client, ClientOptions, EventStream, RecipeNotifications, DEFAULT_MAX_FRAME_LEN,
};
pub use connect_string::{Chroot, ConnectString, HostPort, DEFAULT_PORT};
pub use error::{Error, Result};
pub use ops::{MultiResult, Op, ReadOp, ReadResult, MAX_TTL_MS};
pub use session::{RecipeNotification, SessionState};
pub use watch::{PersistentWatch, WatchReceiver, WatchedEvent};

pub use wazoo_proto::{
    perms, Acl, AddWatchMode, ClientInfo, CreateMode, ErrorCode, EventType, Id, KeeperState, Stat,
    WatcherType,
};
