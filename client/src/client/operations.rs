//! Every ZooKeeper operation of a [`Client`], as ZooKeeper's Java client
//! names them (ZooKeeper Programmer's Guide, "Bindings", "Java Binding").

use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use wazoo_proto::{
    Acl, AddWatchMode, ClientInfo, CreateMode, OpResult, Request, Response, Stat, WatcherType,
};

use super::{Client, RecipeNotifications};

/// ZooKeeper's `ZooDefs.CONFIG_NODE`: the ensemble's configuration.
const CONFIG_NODE: &str = "/zookeeper/config";
use crate::connect_string::ConnectString;
use crate::error::{Error, Result};
use crate::ops::{create_request_with, MultiResult, Op, ReadOp, ReadResult};
use crate::session::{Command, Removal, WatchReg};
use crate::watch::{PersistentWatch, WatchKind, WatchReceiver, WatchSink};

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
        self.create_maybe_null(path, Some(data), acl, mode, None)
            .await
    }

    /// [`Client::create`], or with `ttl` [`Client::create_ttl`], with
    /// `data` `None` for null data (what zkCli's `create` without data
    /// sends; ZooKeeper Programmer's Guide, "ZooKeeper Data Model").
    pub(crate) async fn create_maybe_null(
        &self,
        path: &str,
        data: Option<&[u8]>,
        acl: &[Acl],
        mode: CreateMode,
        ttl: Option<Duration>,
    ) -> Result<String> {
        let ttl_ms = ttl.map(|t| t.as_millis().min(i64::MAX as u128) as i64);
        let req = create_request_with(self.chroot_ref(), path, data, acl, mode, ttl_ms, false)?;
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
        let req = create_request_with(self.chroot_ref(), path, Some(data), acl, mode, None, true)?;
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
        let req = create_request_with(
            self.chroot_ref(),
            path,
            Some(data),
            acl,
            mode,
            Some(ttl_ms),
            true,
        )?;
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

    /// The node's data and stat. Null data (a node created or set with
    /// null data by another client) reads as empty.
    pub async fn get_data(&self, path: &str) -> Result<(Vec<u8>, Stat)> {
        let (data, stat) = self.get_data_maybe_null(path).await?;
        Ok((data.unwrap_or_default(), stat))
    }

    /// [`Client::get_data`] with null data as `None`.
    pub(crate) async fn get_data_maybe_null(&self, path: &str) -> Result<(Option<Vec<u8>>, Stat)> {
        let path = self.server_path(path)?;
        let resp = self.call(Request::GetData { path, watch: false }).await?;
        expect!(resp, Response::GetData { data, stat } => (data, stat))
    }

    /// [`Client::get_data`] and a watch that fires when the data changes or
    /// the node is deleted.
    pub async fn get_data_w(&self, path: &str) -> Result<(Vec<u8>, Stat, WatchReceiver)> {
        let (data, stat, rx) = self.get_data_maybe_null_w(path).await?;
        Ok((data.unwrap_or_default(), stat, rx))
    }

    /// [`Client::get_data_w`] with null data as `None`.
    pub(crate) async fn get_data_maybe_null_w(
        &self,
        path: &str,
    ) -> Result<(Option<Vec<u8>>, Stat, WatchReceiver)> {
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
                data: Some(data.to_vec()),
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
        self.call(Request::Sync { path: Some(path) })
            .await
            .map(|_| ())
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
                OpResult::GetData { data, stat } => Ok(ReadResult::Data {
                    data: data.unwrap_or_default(),
                    stat,
                }),
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
    /// the client's own or absent). Runs the probabilistic
    /// load-balancing of ZooKeeper Programmer's Guide ("Updating the List of
    /// Servers"): returns whether the client dropped its connection to
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
        expect!(resp, Response::GetData { data, stat } => (data.unwrap_or_default(), stat))
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
        expect!(resp, Response::GetData { data, stat } => (data.unwrap_or_default(), stat, rx))
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
            joining_servers: joining.map(str::to_string),
            leaving_servers: leaving.map(str::to_string),
            new_members: members.map(str::to_string),
            cur_config_id: from_config,
        });
        let resp = self.call(req).await?;
        expect!(resp, Response::GetData { data, stat } => (data.unwrap_or_default(), stat))
    }

    // ---- recipes (wazoo only) -----------------------------------------------

    /// Calls a recipe on a wazoo server: module, method, MessagePack
    /// arguments; returns the MessagePack reply. Apache ZooKeeper does not
    /// know the request.
    ///
    /// Each call gets a new guid (the recipe's `caller_guid`); to send a
    /// call again as the same call, use [`Client::recipe_call_with_guid`]
    /// with the guid of the first attempt.
    pub async fn recipe_call(&self, module: &str, method: &str, args: &[u8]) -> Result<Vec<u8>> {
        let guid = self.new_call_guid();
        self.recipe_call_with_guid(module, method, args, &guid)
            .await
    }

    /// [`Client::recipe_call`] with the call's guid: send the same guid
    /// with every retry of one call (after a connection loss left its
    /// outcome unknown), so the recipe sees one `caller_guid` for it.
    pub async fn recipe_call_with_guid(
        &self,
        module: &str,
        method: &str,
        args: &[u8],
        guid: &str,
    ) -> Result<Vec<u8>> {
        let resp = self
            .call(Request::RecipeCall {
                module: module.to_string(),
                method: method.to_string(),
                args: args.to_vec(),
                guid: guid.to_string(),
            })
            .await?;
        expect!(resp, Response::Recipe(b) => b)
    }

    /// A guid for a new recipe call, unique per call: the session id (16
    /// hex digits), this process's id and a counter of the process.
    pub fn new_call_guid(&self) -> String {
        static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        format!(
            "{:016x}-{:x}-{n:x}",
            self.session_id() as u64,
            std::process::id()
        )
    }

    /// A new stream of the recipe notifications the server pushes to this
    /// session from now on.
    pub fn recipe_notifications(&self) -> RecipeNotifications {
        let (tx, rx) = mpsc::unbounded_channel();
        let _ = self.inner.tx.send(Command::SubscribeRecipe(tx));
        RecipeNotifications { rx }
    }
}
