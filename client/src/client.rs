//! The application-facing handle: [`Client`], its options and every
//! ZooKeeper operation.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use wazoo_proto::{
    Acl, AddWatchMode, ClientInfo, CreateMode, OpResult, Request, Response, Stat, WatcherType,
};

use crate::connect_string::{to_client, to_server, Chroot, ConnectString, HostPort};
use crate::error::{Error, Result};
use crate::ops::{check_path, create_request_with, MultiResult, Op, ReadOp, ReadResult};
use crate::session::{
    Command, Config, Outgoing, RecipeNotification, Removal, Session, SessionInfo, SessionState,
    Shared, WatchReg,
};
use crate::watch::{PersistentWatch, WatchKind, WatchReceiver, WatchSink};

/// The largest frame the client accepts from a server by default. Larger
/// than ZooKeeper's 1 MiB `jute.maxbuffer` so that a full-size node plus
/// its reply header and stat fits.
pub const DEFAULT_MAX_FRAME_LEN: usize = 4 << 20;

/// ZooKeeper's `ZooDefs.CONFIG_NODE`: the ensemble's configuration.
const CONFIG_NODE: &str = "/zookeeper/config";

/// How a [`Client`] connects. `ClientOptions::default()` asks for a 30 s
/// session (zkCli's default), read-write.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// The session timeout to ask for; the server answers with the one it
    /// grants (between 2 and 20 ticks by default), see
    /// [`Client::session_timeout`].
    pub session_timeout: Duration,
    /// Accept a read-only server (one that lost its quorum) when no
    /// read-write server can be reached.
    pub read_only: bool,
    /// Timeout of one connection attempt (TCP connect + handshake); by
    /// default the session timeout divided by the number of servers, as in
    /// ZooKeeper's client.
    pub connect_timeout: Option<Duration>,
    /// How long [`Client::connect`] waits for the first connection; by
    /// default the session timeout.
    pub initial_wait: Option<Duration>,
    /// Reconnect backoff: before each attempt after a loss the client waits
    /// a random time below a window that starts here and doubles each time
    /// every server has failed, up to `max_reconnect_delay`.
    pub reconnect_delay: Duration,
    pub max_reconnect_delay: Duration,
    /// The largest frame accepted from a server.
    pub max_frame_len: usize,
    /// Resume this session (id, password) instead of creating one.
    pub session: Option<(i64, Vec<u8>)>,
    /// Credentials (scheme, auth) sent on every connection from the first.
    pub auth: Vec<(String, Vec<u8>)>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            session_timeout: Duration::from_secs(30),
            read_only: false,
            connect_timeout: None,
            initial_wait: None,
            reconnect_delay: Duration::from_millis(100),
            max_reconnect_delay: Duration::from_secs(2),
            max_frame_len: DEFAULT_MAX_FRAME_LEN,
            session: None,
            auth: Vec::new(),
        }
    }
}

impl ClientOptions {
    pub fn new() -> ClientOptions {
        ClientOptions::default()
    }

    pub fn session_timeout(mut self, t: Duration) -> Self {
        self.session_timeout = t;
        self
    }

    pub fn read_only(mut self, yes: bool) -> Self {
        self.read_only = yes;
        self
    }

    pub fn connect_timeout(mut self, t: Duration) -> Self {
        self.connect_timeout = Some(t);
        self
    }

    pub fn initial_wait(mut self, t: Duration) -> Self {
        self.initial_wait = Some(t);
        self
    }

    pub fn reconnect_delay(mut self, initial: Duration, max: Duration) -> Self {
        self.reconnect_delay = initial;
        self.max_reconnect_delay = max;
        self
    }

    pub fn session(mut self, id: i64, password: Vec<u8>) -> Self {
        self.session = Some((id, password));
        self
    }

    pub fn auth(mut self, scheme: &str, auth: &[u8]) -> Self {
        self.auth.push((scheme.to_string(), auth.to_vec()));
        self
    }
}

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

/// Unpacks the expected response variant.
macro_rules! expect {
    ($resp:expr, $pat:pat => $out:expr) => {
        match $resp {
            $pat => Ok($out),
            _ => Err(Error::MarshallingError),
        }
    };
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

    // ---- create -------------------------------------------------------

    /// Creates a node and returns its path (with the sequence suffix for
    /// sequential modes). Containers are created with `createContainer`;
    /// the TTL modes need [`Client::create_ttl`].
    pub async fn create(
        &self,
        path: &str,
        data: &[u8],
        acl: &[Acl],
        mode: CreateMode,
    ) -> Result<String> {
        let req = create_request_with(self.chroot_ref(), path, data, acl, mode, None, false)?;
        let resp = self.call(req).await?;
        expect!(resp,
            Response::Create { path } | Response::Create2 { path, .. } => self.client_path(&path))
    }

    /// Creates a node and returns its path and stat (`create2`).
    pub async fn create2(
        &self,
        path: &str,
        data: &[u8],
        acl: &[Acl],
        mode: CreateMode,
    ) -> Result<(String, Stat)> {
        let req = create_request_with(self.chroot_ref(), path, data, acl, mode, None, true)?;
        let resp = self.call(req).await?;
        expect!(resp, Response::Create2 { path, stat } => (self.client_path(&path), stat))
    }

    /// Creates a node that the server deletes once it has had no children
    /// and no change for `ttl` (modes `PersistentWithTtl`,
    /// `PersistentSequentialWithTtl`; the server must enable extended
    /// types).
    pub async fn create_ttl(
        &self,
        path: &str,
        data: &[u8],
        acl: &[Acl],
        mode: CreateMode,
        ttl: Duration,
    ) -> Result<(String, Stat)> {
        let ttl_ms = ttl.as_millis().min(i64::MAX as u128) as i64;
        let req =
            create_request_with(self.chroot_ref(), path, data, acl, mode, Some(ttl_ms), true)?;
        let resp = self.call(req).await?;
        expect!(resp, Response::Create2 { path, stat } => (self.client_path(&path), stat))
    }

    // ---- delete / data --------------------------------------------------

    /// Deletes a node; `version` `None` deletes whatever the version.
    pub async fn delete(&self, path: &str, version: Option<i32>) -> Result<()> {
        let path = self.server_path(path)?;
        self.call(Request::Delete {
            path,
            version: version.unwrap_or(-1),
        })
        .await
        .map(|_| ())
    }

    /// The node's stat, or `None` if it does not exist.
    pub async fn exists(&self, path: &str) -> Result<Option<Stat>> {
        let path = self.server_path(path)?;
        match self.call(Request::Exists { path, watch: false }).await {
            Ok(resp) => expect!(resp, Response::Stat(s) => Some(s)),
            Err(Error::NoNode) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// [`Client::exists`] and a watch that fires when the node is created,
    /// deleted or its data changes.
    pub async fn exists_w(&self, path: &str) -> Result<(Option<Stat>, WatchReceiver)> {
        let spath = self.server_path(path)?;
        let (tx, rx) = WatchReceiver::new();
        let reg = WatchReg {
            kind: WatchKind::Exist,
            path: spath.clone(),
            sink: WatchSink::Once(tx),
        };
        let req = Request::Exists {
            path: spath,
            watch: true,
        };
        match self.submit(req, Some(reg), None).await {
            Ok(resp) => expect!(resp, Response::Stat(s) => (Some(s), rx)),
            Err(Error::NoNode) => Ok((None, rx)),
            Err(e) => Err(e),
        }
    }

    /// The node's data and stat.
    pub async fn get_data(&self, path: &str) -> Result<(Vec<u8>, Stat)> {
        let path = self.server_path(path)?;
        let resp = self.call(Request::GetData { path, watch: false }).await?;
        expect!(resp, Response::GetData { data, stat } => (data, stat))
    }

    /// [`Client::get_data`] and a watch that fires when the data changes or
    /// the node is deleted.
    pub async fn get_data_w(&self, path: &str) -> Result<(Vec<u8>, Stat, WatchReceiver)> {
        let spath = self.server_path(path)?;
        let (tx, rx) = WatchReceiver::new();
        let reg = WatchReg {
            kind: WatchKind::Data,
            path: spath.clone(),
            sink: WatchSink::Once(tx),
        };
        let req = Request::GetData {
            path: spath,
            watch: true,
        };
        let resp = self.submit(req, Some(reg), None).await?;
        expect!(resp, Response::GetData { data, stat } => (data, stat, rx))
    }

    /// Sets the node's data; `version` `None` whatever the version.
    pub async fn set_data(&self, path: &str, data: &[u8], version: Option<i32>) -> Result<Stat> {
        let path = self.server_path(path)?;
        let resp = self
            .call(Request::SetData {
                path,
                data: data.to_vec(),
                version: version.unwrap_or(-1),
            })
            .await?;
        expect!(resp, Response::Stat(s) => s)
    }

    // ---- ACLs -------------------------------------------------------------

    pub async fn get_acl(&self, path: &str) -> Result<(Vec<Acl>, Stat)> {
        let path = self.server_path(path)?;
        let resp = self.call(Request::GetAcl { path }).await?;
        expect!(resp, Response::GetAcl { acl, stat } => (acl, stat))
    }

    /// Sets the node's ACL; `version` (the ACL version) `None` whatever it is.
    pub async fn set_acl(&self, path: &str, acl: &[Acl], version: Option<i32>) -> Result<Stat> {
        let path = self.server_path(path)?;
        if acl.is_empty() {
            return Err(Error::InvalidAcl);
        }
        let resp = self
            .call(Request::SetAcl {
                path,
                acl: acl.to_vec(),
                version: version.unwrap_or(-1),
            })
            .await?;
        expect!(resp, Response::Stat(s) => s)
    }

    // ---- children ---------------------------------------------------------

    /// The names of the node's children (in the server's order).
    pub async fn get_children(&self, path: &str) -> Result<Vec<String>> {
        let path = self.server_path(path)?;
        let resp = self
            .call(Request::GetChildren { path, watch: false })
            .await?;
        expect!(resp, Response::GetChildren { children } => children)
    }

    /// [`Client::get_children`] and a watch that fires when a child is
    /// created or deleted, or the node is deleted.
    pub async fn get_children_w(&self, path: &str) -> Result<(Vec<String>, WatchReceiver)> {
        let (children, _, rx) = self.children_w(path, false).await?;
        Ok((children, rx))
    }

    /// The children and the node's stat (`getChildren2`).
    pub async fn get_children2(&self, path: &str) -> Result<(Vec<String>, Stat)> {
        let path = self.server_path(path)?;
        let resp = self
            .call(Request::GetChildren2 { path, watch: false })
            .await?;
        expect!(resp, Response::GetChildren2 { children, stat } => (children, stat))
    }

    /// [`Client::get_children2`] with a child watch.
    pub async fn get_children2_w(&self, path: &str) -> Result<(Vec<String>, Stat, WatchReceiver)> {
        let (children, stat, rx) = self.children_w(path, true).await?;
        Ok((children, stat.unwrap_or_default(), rx))
    }

    async fn children_w(
        &self,
        path: &str,
        with_stat: bool,
    ) -> Result<(Vec<String>, Option<Stat>, WatchReceiver)> {
        let spath = self.server_path(path)?;
        let (tx, rx) = WatchReceiver::new();
        let reg = WatchReg {
            kind: WatchKind::Child,
            path: spath.clone(),
            sink: WatchSink::Once(tx),
        };
        let req = if with_stat {
            Request::GetChildren2 {
                path: spath,
                watch: true,
            }
        } else {
            Request::GetChildren {
                path: spath,
                watch: true,
            }
        };
        match self.submit(req, Some(reg), None).await? {
            Response::GetChildren { children } => Ok((children, None, rx)),
            Response::GetChildren2 { children, stat } => Ok((children, Some(stat), rx)),
            _ => Err(Error::MarshallingError),
        }
    }

    /// How many nodes are below the node, at any depth.
    pub async fn get_all_children_number(&self, path: &str) -> Result<i32> {
        let path = self.server_path(path)?;
        let resp = self.call(Request::GetAllChildrenNumber { path }).await?;
        expect!(resp, Response::AllChildrenNumber(n) => n)
    }

    /// The paths of this session's ephemeral nodes that start with
    /// `prefix` (a path; `/` for all), relative to the chroot.
    pub async fn get_ephemerals(&self, prefix: &str) -> Result<Vec<String>> {
        let prefix = self.server_path(prefix)?;
        let resp = self.call(Request::GetEphemerals { prefix }).await?;
        let paths = expect!(resp, Response::Ephemerals(p) => p)?;
        Ok(match self.chroot_ref() {
            None => paths,
            Some(c) => paths
                .iter()
                .filter(|p| c.to_client(p) != p.as_str() || p.as_str() == c.as_str())
                .map(|p| c.to_client(p).to_string())
                .collect(),
        })
    }

    // ---- sync / check / multi -----------------------------------------------

    /// Makes the server this client is connected to catch up with the
    /// leader, so that later reads see every write committed before.
    pub async fn sync(&self, path: &str) -> Result<()> {
        let path = self.server_path(path)?;
        self.call(Request::Sync { path }).await.map(|_| ())
    }

    /// Succeeds if the node has this version (`None`: if it exists). Sent as
    /// a one-op multi, which every ZooKeeper version answers.
    pub async fn check(&self, path: &str, version: Option<i32>) -> Result<()> {
        match self.multi(&[Op::check(path, version)]).await {
            Ok(_) => Ok(()),
            Err(Error::Multi { error, .. }) => Err(*error),
            Err(e) => Err(e),
        }
    }

    /// Runs the ops as one transaction: all succeed or none is applied. On
    /// failure the error is [`Error::Multi`] with the index of the op that
    /// failed and its error.
    pub async fn multi(&self, ops: &[Op]) -> Result<Vec<MultiResult>> {
        let reqs = ops
            .iter()
            .map(|o| o.to_request(self.chroot_ref()))
            .collect::<Result<Vec<_>>>()?;
        let resp = self.call(Request::Multi(reqs)).await?;
        let results = expect!(resp, Response::Multi(r) => r)?;
        if let Some((index, err)) = results.iter().enumerate().find_map(|(i, r)| match r {
            OpResult::Error { err } if *err != 0 => Some((i, *err)),
            _ => None,
        }) {
            let error = Error::from_code(err).unwrap_or(Error::Unknown(err));
            return Err(Error::Multi {
                index,
                error: Box::new(error),
            });
        }
        results
            .into_iter()
            .map(|r| {
                Ok(match r {
                    OpResult::Create { path } => MultiResult::Create {
                        path: self.client_path(&path),
                        stat: None,
                    },
                    OpResult::Create2 { path, stat } => MultiResult::Create {
                        path: self.client_path(&path),
                        stat: Some(stat),
                    },
                    OpResult::Delete => MultiResult::Delete,
                    OpResult::SetData { stat } => MultiResult::SetData { stat },
                    OpResult::Check => MultiResult::Check,
                    _ => return Err(Error::MarshallingError),
                })
            })
            .collect()
    }

    /// Runs reads together (`multiRead`): each succeeds or fails on its own.
    pub async fn multi_read(&self, ops: &[ReadOp]) -> Result<Vec<Result<ReadResult>>> {
        let reqs = ops
            .iter()
            .map(|o| o.to_request(self.chroot_ref()))
            .collect::<Result<Vec<_>>>()?;
        let resp = self.call(Request::MultiRead(reqs)).await?;
        let results = expect!(resp, Response::Multi(r) => r)?;
        Ok(results
            .into_iter()
            .map(|r| match r {
                OpResult::GetData { data, stat } => Ok(ReadResult::Data { data, stat }),
                OpResult::GetChildren { children } => Ok(ReadResult::Children { children }),
                OpResult::Error { err } => {
                    Err(Error::from_code(err).unwrap_or(Error::Unknown(err)))
                }
                _ => Err(Error::MarshallingError),
            })
            .collect())
    }

    // ---- watches ------------------------------------------------------------

    /// Sets a persistent (or persistent-recursive) watch: every event on the
    /// node (recursive: and below it) until removed; re-registered on
    /// reconnect.
    pub async fn add_watch(&self, path: &str, mode: AddWatchMode) -> Result<PersistentWatch> {
        let spath = self.server_path(path)?;
        let (tx, rx) = PersistentWatch::new(path.to_string());
        let kind = match mode {
            AddWatchMode::Persistent => WatchKind::Persistent,
            AddWatchMode::PersistentRecursive => WatchKind::PersistentRecursive,
        };
        let reg = WatchReg {
            kind,
            path: spath.clone(),
            sink: WatchSink::Stream(tx),
        };
        let req = Request::AddWatch {
            path: spath,
            mode: mode as i32,
        };
        self.submit(req, Some(reg), None).await?;
        Ok(rx)
    }

    /// Removes this client's watches of type `ty` on the node; each removed
    /// watch receives a `*WatchRemoved` event. `NoWatcher` if the client has
    /// none. With `local`, only the client forgets them (no request: works
    /// while disconnected; the server's event, if any, is then dropped).
    ///
    /// ZooKeeper 3.8 servers know only `Children`, `Data` and `Any`: a
    /// `Persistent` or `PersistentRecursive` removal is sent as `Any`, as
    /// ZooKeeper's 3.8 client does, and so removes every watch of this
    /// client on the node.
    pub async fn remove_watches(&self, path: &str, ty: WatcherType, local: bool) -> Result<()> {
        let spath = self.server_path(path)?;
        let ty = match ty {
            WatcherType::Persistent | WatcherType::PersistentRecursive => WatcherType::Any,
            t => t,
        };
        let removal = Removal {
            path: spath.clone(),
            client_path: path.to_string(),
            ty,
        };
        if local {
            let (tx, rx) = oneshot::channel();
            let cmd = Command::RemoveWatchesLocal { removal, reply: tx };
            if self.inner.tx.send(cmd).is_err() {
                return Err(self.dead());
            }
            return rx.await.unwrap_or_else(|_| Err(self.dead()));
        }
        let req = Request::RemoveWatches {
            path: spath,
            watcher_type: ty as i32,
        };
        self.submit(req, None, Some(removal)).await.map(|_| ())
    }

    /// Asks the server whether it holds a watch of type `ty` on the node for
    /// this session (`checkWatches`; `NoWatcher` if not).
    pub async fn check_watches(&self, path: &str, ty: WatcherType) -> Result<()> {
        let path = self.server_path(path)?;
        self.call(Request::CheckWatches {
            path,
            watcher_type: ty as i32,
        })
        .await
        .map(|_| ())
    }

    // ---- auth / identity ----------------------------------------------------

    /// Adds credentials to the session (`addauth`, e.g. `digest` with
    /// `user:password`); they are sent again on every reconnect. If the
    /// server refuses them the client is dead: state `AuthFailed`.
    pub async fn add_auth(&self, scheme: &str, auth: &[u8]) -> Result<()> {
        let (tx, rx) = oneshot::channel();
        let cmd = Command::Auth {
            scheme: scheme.to_string(),
            auth: auth.to_vec(),
            reply: tx,
        };
        if self.inner.tx.send(cmd).is_err() {
            return Err(self.dead());
        }
        rx.await.unwrap_or_else(|_| Err(self.dead()))
    }

    /// The identities the session is authenticated as.
    pub async fn who_am_i(&self) -> Result<Vec<ClientInfo>> {
        let resp = self.call(Request::WhoAmI).await?;
        expect!(resp, Response::WhoAmI(v) => v)
    }

    // ---- servers ------------------------------------------------------------

    /// Replaces the server list (a connection string; a chroot in it must be
    /// the client's own or absent). Runs the seed's probabilistic
    /// load-balancing: returns whether the client dropped its connection to
    /// move to another server.
    pub async fn update_server_list(&self, connect_string: &str) -> Result<bool> {
        let cs: ConnectString = connect_string.parse()?;
        if cs.chroot.is_some() && cs.chroot != self.inner.chroot {
            return Err(Error::bad_arguments(
                "the new connection string has a different chroot",
            ));
        }
        let (tx, rx) = oneshot::channel();
        let cmd = Command::UpdateServers {
            hosts: cs.hosts,
            reply: tx,
        };
        if self.inner.tx.send(cmd).is_err() {
            return Err(self.dead());
        }
        rx.await.unwrap_or_else(|_| Err(self.dead()))
    }

    // ---- dynamic configuration ----------------------------------------------

    /// The ensemble's configuration: the data of `/zookeeper/config`
    /// (`server.N=...` lines and `version=...`; empty on a standalone
    /// server) and its stat. Read at that path whatever the chroot, as
    /// ZooKeeper's `getConfig` does.
    pub async fn get_config(&self) -> Result<(Vec<u8>, Stat)> {
        let path = CONFIG_NODE.to_string();
        let resp = self.call(Request::GetData { path, watch: false }).await?;
        expect!(resp, Response::GetData { data, stat } => (data, stat))
    }

    /// [`Client::get_config`] and a watch that fires when the configuration
    /// changes.
    pub async fn get_config_w(&self) -> Result<(Vec<u8>, Stat, WatchReceiver)> {
        let (tx, rx) = WatchReceiver::new();
        let reg = WatchReg {
            kind: WatchKind::Data,
            path: CONFIG_NODE.to_string(),
            sink: WatchSink::Once(tx),
        };
        let req = Request::GetData {
            path: CONFIG_NODE.to_string(),
            watch: true,
        };
        let resp = self.submit(req, Some(reg), None).await?;
        expect!(resp, Response::GetData { data, stat } => (data, stat, rx))
    }

    /// Asks the ensemble to change its membership (ZooKeeper 3.5+'s
    /// `reconfig`, `ZooKeeperAdmin.reconfigure`): `joining` and `leaving`
    /// for an incremental change (`server.N=host:port:port[:role];client`
    /// entries and server ids, comma separated), or `members` for the whole
    /// new membership; `from_config` the configuration version it applies
    /// to, -1 for any. Returns the new configuration and its stat. A server
    /// with reconfiguration off answers [`Error::ReconfigDisabled`].
    pub async fn reconfig(
        &self,
        joining: Option<&str>,
        leaving: Option<&str>,
        members: Option<&str>,
        from_config: i64,
    ) -> Result<(Vec<u8>, Stat)> {
        let req = Request::Reconfig(wazoo_proto::ReconfigRequest {
            joining_servers: joining.unwrap_or_default().to_string(),
            leaving_servers: leaving.unwrap_or_default().to_string(),
            new_members: members.unwrap_or_default().to_string(),
            cur_config_id: from_config,
        });
        let resp = self.call(req).await?;
        expect!(resp, Response::GetData { data, stat } => (data, stat))
    }

    // ---- recipes (wazoo only) -----------------------------------------------

    /// Calls a recipe on a wazoo server: module, method, MessagePack
    /// arguments; returns the MessagePack reply. Apache ZooKeeper does not
    /// know the request.
    pub async fn recipe_call(&self, module: &str, method: &str, args: &[u8]) -> Result<Vec<u8>> {
        let resp = self
            .call(Request::RecipeCall {
                module: module.to_string(),
                method: method.to_string(),
                args: args.to_vec(),
            })
            .await?;
        expect!(resp, Response::Recipe(b) => b)
    }

    /// A new stream of the recipe notifications the server pushes to this
    /// session from now on.
    pub fn recipe_notifications(&self) -> RecipeNotifications {
        let (tx, rx) = mpsc::unbounded_channel();
        let _ = self.inner.tx.send(Command::SubscribeRecipe(tx));
        RecipeNotifications { rx }
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
        // Seed: an operation while the client cannot reach any server
        // fails with connectionloss. Port 1 on loopback refuses at once.
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
