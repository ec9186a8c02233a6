//! The application-facing handle: [`Client`], its options (`options`)
//! and every ZooKeeper operation (`operations`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use wazoo_proto::{Request, Response};

use crate::connect_string::{to_client, to_server, Chroot, ConnectString, HostPort};
use crate::error::{Error, Result};
use crate::ops::check_path;
use crate::session::{
    Command, Config, Outgoing, RecipeNotification, Removal, Session, SessionInfo, SessionState,
    Shared, WatchReg,
};

mod operations;
mod options;

pub use options::{ClientOptions, DEFAULT_MAX_FRAME_LEN};

/// The session state changes of a client, in order: ZooKeeper's default
/// watcher. Before the first event the state is `Disconnected`. See
/// [`SessionState`] for the sequence. The stream ends after a final state.
#[derive(Debug)]
pub struct EventStream {
    rx: mpsc::UnboundedReceiver<SessionState>,
}

impl EventStream {
    /// The next state change; `None` after the final one was taken.
    pub async fn recv(&mut self) -> Option<SessionState> {
        self.rx.recv().await
    }

    /// The next state change if one is queued.
    pub fn try_recv(&mut self) -> Option<SessionState> {
        self.rx.try_recv().ok()
    }

    /// Skips changes until one satisfies `f`; `None` if the stream ends
    /// first.
    pub async fn wait_for(&mut self, f: impl Fn(SessionState) -> bool) -> Option<SessionState> {
        while let Some(s) = self.rx.recv().await {
            if f(s) {
                return Some(s);
            }
        }
        None
    }
}

/// Recipe notifications pushed by a wazoo server to this session.
#[derive(Debug)]
pub struct RecipeNotifications {
    rx: mpsc::UnboundedReceiver<RecipeNotification>,
}

impl RecipeNotifications {
    /// The next notification; `None` once the client is dead.
    pub async fn recv(&mut self) -> Option<RecipeNotification> {
        self.rx.recv().await
    }

    pub fn try_recv(&mut self) -> Option<RecipeNotification> {
        self.rx.try_recv().ok()
    }
}

#[derive(Debug)]
struct Inner {
    tx: mpsc::UnboundedSender<Command>,
    shared: Arc<Shared>,
    chroot: Option<Chroot>,
    state: watch::Receiver<SessionState>,
    hosts: Vec<HostPort>,
}

/// A ZooKeeper client: one session, one background task that owns the
/// connection. Cheap to clone (all clones share the session); when the last
/// clone is dropped the session is closed.
///
/// Every path is relative to the chroot of the connection string. Every
/// call fails with [`Error::ConnectionLoss`] if the connection drops while
/// it is pending, and with [`Error::SessionExpired`] (resp.
/// [`Error::AuthFailed`], [`Error::Closed`]) once the client is dead.
#[derive(Debug, Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl Client {
    /// Starts a client and waits until it is connected (or the options'
    /// `initial_wait`, by default the session timeout, has passed: then
    /// [`Error::ConnectionLoss`]). The event stream still holds every state
    /// change from the start.
    pub async fn connect(
        connect_string: &str,
        options: ClientOptions,
    ) -> Result<(Client, EventStream)> {
        let wait = options.initial_wait.unwrap_or(options.session_timeout);
        let (client, events) = Client::start(connect_string, options)?;
        match tokio::time::timeout(wait, client.wait_until_connected()).await {
            Ok(Ok(())) => Ok((client, events)),
            Ok(Err(e)) => Err(e),
            Err(_) => {
                let _ = client.close().await;
                Err(Error::ConnectionLoss)
            }
        }
    }

    /// Starts a client without waiting: calls made before it connects are
    /// sent once it does (or fail with ConnectionLoss if the attempt
    /// fails). Must be called inside a tokio runtime.
    pub fn start(connect_string: &str, options: ClientOptions) -> Result<(Client, EventStream)> {
        let cs: ConnectString = connect_string.parse()?;
        if options.session_timeout.is_zero() {
            return Err(Error::bad_arguments("session timeout must be positive"));
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let (state_tx, state_rx) = watch::channel(SessionState::Disconnected);
        let shared = Arc::new(Shared {
            state: state_tx,
            info: Mutex::new(SessionInfo::default()),
            dead: Mutex::new(None),
        });
        let cfg = Config {
            hosts: cs.hosts.clone(),
            chroot: cs.chroot.clone(),
            session_timeout: options.session_timeout,
            read_only: options.read_only,
            connect_timeout: options.connect_timeout,
            reconnect_delay: options.reconnect_delay,
            max_reconnect_delay: options.max_reconnect_delay.max(options.reconnect_delay),
            max_frame_len: options.max_frame_len,
            session: options.session.clone(),
            auth: options.auth.clone(),
        };
        let session = Session::new(cfg, rx, shared.clone(), events_tx);
        tokio::spawn(session.run());
        let client = Client {
            inner: Arc::new(Inner {
                tx,
                shared,
                chroot: cs.chroot,
                state: state_rx,
                hosts: cs.hosts,
            }),
        };
        Ok((client, EventStream { rx: events_rx }))
    }

    /// The handle's state now.
    pub fn state(&self) -> SessionState {
        *self.inner.state.borrow()
    }

    /// A receiver of the handle's current state (changes may be skipped;
    /// the [`EventStream`] has every one).
    pub fn state_receiver(&self) -> watch::Receiver<SessionState> {
        self.inner.state.clone()
    }

    /// Waits until the client is connected (read-write or read-only);
    /// fails if it dies first.
    pub async fn wait_until_connected(&self) -> Result<()> {
        let mut rx = self.inner.state.clone();
        let s = rx
            .wait_for(|s| s.is_connected() || !s.is_alive())
            .await
            .map(|s| *s)
            .unwrap_or(SessionState::Closed);
        if s.is_connected() {
            Ok(())
        } else {
            Err(self.dead())
        }
    }

    fn info(&self) -> SessionInfo {
        self.inner
            .shared
            .info
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The session id (0 before the first connection).
    pub fn session_id(&self) -> i64 {
        self.info().session_id
    }

    /// The session password, to resume the session elsewhere with
    /// [`ClientOptions::session`].
    pub fn session_password(&self) -> Vec<u8> {
        self.info().password
    }

    /// The session timeout the server granted (zero before the first
    /// connection).
    pub fn session_timeout(&self) -> Duration {
        self.info().timeout
    }

    /// The server of the current (or last) connection.
    pub fn connected_server(&self) -> Option<HostPort> {
        self.info().server
    }

    /// The servers of the connection string.
    pub fn servers(&self) -> &[HostPort] {
        &self.inner.hosts
    }

    /// The chroot of the connection string.
    pub fn chroot(&self) -> Option<&str> {
        self.inner.chroot.as_ref().map(Chroot::as_str)
    }

    fn dead(&self) -> Error {
        self.inner
            .shared
            .dead
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .unwrap_or(Error::Closed)
    }

    fn chroot_ref(&self) -> Option<&Chroot> {
        self.inner.chroot.as_ref()
    }

    fn server_path(&self, path: &str) -> Result<String> {
        check_path(path, false)?;
        Ok(to_server(self.chroot_ref(), path))
    }

    fn client_path(&self, server_path: &str) -> String {
        to_client(self.chroot_ref(), server_path).to_string()
    }

    async fn submit(
        &self,
        req: Request,
        watch: Option<WatchReg>,
        removal: Option<Removal>,
    ) -> Result<Response> {
        let (tx, rx) = oneshot::channel();
        let cmd = Command::Request(Outgoing {
            req,
            reply: tx,
            watch,
            removal,
        });
        if self.inner.tx.send(cmd).is_err() {
            return Err(self.dead());
        }
        match rx.await {
            Ok(r) => r,
            Err(_) => Err(self.dead()),
        }
    }

    pub(crate) async fn call(&self, req: Request) -> Result<Response> {
        self.submit(req, None, None).await
    }

    /// Sends a request as is (no chroot, no checks) and returns the reply:
    /// for tests and tools that need an op this API does not wrap. A watch
    /// flag set here makes the server send an event nobody receives.
    pub async fn raw(&self, req: Request) -> Result<Response> {
        self.call(req).await
    }

    // ---- close --------------------------------------------------------------

    /// Closes the session (the server deletes its ephemeral nodes at once)
    /// and the client: state `Closed`; later calls fail with
    /// [`Error::Closed`]. Closing a dead client is a no-op.
    pub async fn close(&self) -> Result<()> {
        let (tx, rx) = oneshot::channel();
        if self.inner.tx.send(Command::Close { reply: tx }).is_err() {
            return Ok(());
        }
        let _ = rx.await;
        Ok(())
    }
}

/// The ACL id of a digest identity: `user:base64(sha1("user:password"))`,
/// for `Acl::new(perms, "digest", &digest_id("user", "password"))`.
pub fn digest_id(user: &str, password: &str) -> String {
    use base64::Engine;
    use sha1::{Digest, Sha1};
    let hash = Sha1::digest(format!("{user}:{password}").as_bytes());
    format!(
        "{user}:{}",
        base64::engine::general_purpose::STANDARD.encode(hash)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_id_matches_zookeepers_digest_authentication_provider() {
        // DigestAuthenticationProvider.generateDigest("super:test").
        assert_eq!(
            digest_id("super", "test"),
            "super:D/InIHSb7yEEbrWz8b9l71RjZJU="
        );
    }

    #[tokio::test]
    async fn calls_before_any_server_answers_fail_with_connection_loss() {
        // ZooKeeper Programmer's Guide ("ZooKeeper Sessions"): an operation
        // while the client cannot reach any server fails with connectionloss.
        // Port 1 on loopback refuses at once.
        let opts = ClientOptions::default()
            .reconnect_delay(Duration::from_millis(1), Duration::from_millis(5));
        let (c, mut events) = Client::start("127.0.0.1:1", opts).unwrap();
        assert_eq!(events.recv().await, Some(SessionState::Connecting));
        assert_eq!(c.get_data("/a").await, Err(Error::ConnectionLoss));
        c.close().await.unwrap();
        assert_eq!(
            events.wait_for(|s| !s.is_alive()).await,
            Some(SessionState::Closed)
        );
        assert_eq!(c.get_data("/a").await, Err(Error::Closed));
    }

    #[tokio::test]
    async fn invalid_paths_are_refused_client_side() {
        let (c, _events) = Client::start("127.0.0.1:1/app", ClientOptions::default()).unwrap();
        for p in ["", "a", "/a/", "//", "/a/../b"] {
            assert!(
                matches!(c.get_data(p).await, Err(Error::BadArguments(_))),
                "{p:?}"
            );
        }
        assert_eq!(c.chroot(), Some("/app"));
        assert!(matches!(
            Client::start("127.0.0.1:1/app/", ClientOptions::default()),
            Err(Error::BadArguments(_))
        ));
    }
}

#[cfg(test)]
mod static_checks {
    use super::*;
    use wazoo_proto::AddWatchMode;

    fn send_sync<T: Send + Sync>(_: &T) {}
    fn send<T: Send>(_: T) {}

    #[allow(dead_code)]
    fn client_and_its_futures_cross_threads(c: &Client) {
        send_sync(c);
        send(c.get_data("/"));
        send(c.multi(&[]));
        send(c.add_watch("/", AddWatchMode::Persistent));
    }
}
