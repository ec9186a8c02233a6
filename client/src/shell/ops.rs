//! The commands that read or change nodes, as zkCli runs them.

use std::io::Write;
use std::time::Duration;

use wazoo_proto::{Acl, AddWatchMode, CreateMode, WatcherType};
use wazoo_sdk::abi::{self, Notification, Reply};

use super::parse::Args;
use super::{admin, cmd_failed, format, quota, wr, OpError, Shell};
use crate::client::Client;
use crate::error::Error;

impl Shell {
    pub(super) async fn run_op(
        &self,
        zk: &Client,
        a: &Args,
        out: &mut (dyn Write + Send),
    ) -> Result<(), OpError> {
        let p = a.pos.first().map(String::as_str).unwrap_or("/");
        match a.spec.name {
            "ls" => {
                if a.has('R') {
                    // zkCli's order (`ZKUtil.visitSubTreeDFS`): a node's
                    // children, sorted, all printed before the walk goes
                    // down into the first of them.
                    zk.exists(p).await?.ok_or(Error::NoNode)?;
                    wr(writeln!(out, "{p}"))?;
                    let mut stack = vec![p.to_string()];
                    while let Some(node) = stack.pop() {
                        let mut kids = match zk.get_children(&node).await {
                            // Deleted while the walk was on its way.
                            Err(Error::NoNode) => continue,
                            r => r?,
                        };
                        kids.sort();
                        let paths: Vec<String> = kids
                            .iter()
                            .map(|k| wazoo_proto::path::join(&node, k))
                            .collect();
                        for child in &paths {
                            wr(writeln!(out, "{child}"))?;
                        }
                        stack.extend(paths.into_iter().rev());
                    }
                    return Ok(());
                }
                let (mut kids, stat) = if a.has('w') {
                    let (k, s, watch) = zk.get_children2_w(p).await?;
                    self.watch_printer(watch);
                    (k, s)
                } else {
                    zk.get_children2(p).await?
                };
                kids.sort();
                wr(writeln!(out, "{}", format::list(&kids)))?;
                if a.has('s') {
                    wr(write!(out, "{}", format::stat(&stat)))?;
                }
            }
            "get" => {
                let (data, stat) = if a.has('w') {
                    let (d, s, watch) = zk.get_data_maybe_null_w(p).await?;
                    self.watch_printer(watch);
                    (d, s)
                } else {
                    zk.get_data_maybe_null(p).await?
                };
                wr(writeln!(out, "{}", format::data(data.as_deref())))?;
                if a.has('s') {
                    wr(write!(out, "{}", format::stat(&stat)))?;
                }
            }
            "stat" => {
                let stat = if a.has('w') {
                    let (s, watch) = zk.exists_w(p).await?;
                    self.watch_printer(watch);
                    s
                } else {
                    zk.exists(p).await?
                };
                let stat = stat.ok_or(Error::NoNode)?;
                wr(write!(out, "{}", format::stat(&stat)))?;
            }
            "set" => {
                let stat = zk.set_data(p, a.pos[1].as_bytes(), a.version()?).await?;
                if a.has('s') {
                    wr(write!(out, "{}", format::stat(&stat)))?;
                }
            }
            "create" => {
                let (s, e, c) = (a.has('s'), a.has('e'), a.has('c'));
                let ttl = a.int('t')?;
                if c && (s || e) {
                    return Err(cmd_failed(
                        "-c cannot be combined with -s or -e. Containers cannot be ephemeral or sequential.",
                    ));
                }
                if ttl.is_some() && e {
                    return Err(cmd_failed("TTLs cannot be used with Ephemeral znodes"));
                }
                if ttl.is_some() && c {
                    return Err(cmd_failed("TTLs cannot be used with Container znodes"));
                }
                let mode = match (s, e, c, ttl.is_some()) {
                    (_, _, true, _) => CreateMode::Container,
                    (true, _, _, true) => CreateMode::PersistentSequentialWithTtl,
                    (false, _, _, true) => CreateMode::PersistentWithTtl,
                    (true, true, _, _) => CreateMode::EphemeralSequential,
                    (false, true, _, _) => CreateMode::Ephemeral,
                    (true, false, _, _) => CreateMode::PersistentSequential,
                    (false, false, _, _) => CreateMode::Persistent,
                };
                // No data is null data, as zkCli sends it.
                let data = a.pos.get(1).map(|d| d.as_bytes());
                let acl = match a.pos.get(2) {
                    Some(s) => format::parse_acl(s).map_err(cmd_failed)?,
                    None => Acl::open_unsafe(),
                };
                let ttl = match ttl {
                    Some(t) if t <= 0 => {
                        return Err(cmd_failed(format!("ttl must be positive, got {t}")))
                    }
                    t => t.map(|t| Duration::from_millis(t as u64)),
                };
                let created = zk.create_maybe_null(p, data, &acl, mode, ttl).await?;
                wr(writeln!(out, "Created {created}"))?;
            }
            "delete" => zk.delete(p, a.version()?).await?,
            "setquota" => quota::set_quota(zk, a, p).await?,
            "listquota" => quota::list_quota(zk, p, out).await?,
            "delquota" => quota::del_quota(zk, a, p, out).await?,
            "config" => admin::config(self, zk, a, out).await?,
            "reconfig" => admin::reconfig(zk, a, out).await?,
            "deleteall" => {
                // Depth-first: children before their parent.
                let mut order = Vec::new();
                let mut stack = vec![p.to_string()];
                while let Some(node) = stack.pop() {
                    for k in zk.get_children(&node).await? {
                        stack.push(wazoo_proto::path::join(&node, &k));
                    }
                    order.push(node);
                }
                for node in order.iter().rev() {
                    match zk.delete(node, None).await {
                        Ok(()) | Err(Error::NoNode) => {}
                        Err(e) => return Err(e.into()),
                    }
                }
            }
            "getAcl" => {
                let (acl, stat) = zk.get_acl(p).await?;
                for entry in &acl {
                    wr(write!(out, "{}", format::acl_entry(entry)))?;
                }
                if a.has('s') {
                    wr(write!(out, "{}", format::stat(&stat)))?;
                }
            }
            "setAcl" => {
                let acl = format::parse_acl(&a.pos[1]).map_err(cmd_failed)?;
                let version = a.version()?;
                if a.has('R') {
                    let mut stack = vec![p.to_string()];
                    while let Some(node) = stack.pop() {
                        zk.set_acl(&node, &acl, None).await?;
                        for k in zk.get_children(&node).await? {
                            stack.push(wazoo_proto::path::join(&node, &k));
                        }
                    }
                } else {
                    let stat = zk.set_acl(p, &acl, version).await?;
                    if a.has('s') {
                        wr(write!(out, "{}", format::stat(&stat)))?;
                    }
                }
            }
            "addauth" => zk.add_auth(&a.pos[0], a.pos[1].as_bytes()).await?,
            "sync" => {
                zk.sync(p).await?;
                wr(writeln!(out, "Sync is OK"))?;
            }
            "getEphemerals" => {
                let mut eph = zk.get_ephemerals(p).await?;
                eph.sort();
                wr(writeln!(out, "{}", format::list(&eph)))?;
            }
            "getAllChildrenNumber" => {
                let n = zk.get_all_children_number(p).await?;
                wr(writeln!(out, "{n}"))?;
            }
            "whoami" => {
                let who = zk.who_am_i().await?;
                wr(writeln!(out, "Auth scheme: User"))?;
                for c in who {
                    wr(writeln!(out, "{}: {}", c.auth_scheme, c.user))?;
                }
            }
            "removewatches" => {
                let ty = if a.has('c') {
                    WatcherType::Children
                } else if a.has('d') {
                    WatcherType::Data
                } else {
                    WatcherType::Any
                };
                zk.remove_watches(p, ty, a.has('l')).await?;
            }
            "addWatch" => {
                let mode = match a.value('m') {
                    None | Some("PERSISTENT_RECURSIVE") => AddWatchMode::PersistentRecursive,
                    Some("PERSISTENT") => AddWatchMode::Persistent,
                    Some(_) => return Err(OpError::Cmd(a.usage())),
                };
                let w = zk.add_watch(p, mode).await?;
                self.stream_printer(w);
            }
            "watch" => {
                let mode = if a.has('R') {
                    AddWatchMode::PersistentRecursive
                } else {
                    AddWatchMode::Persistent
                };
                let mut w = zk.add_watch(p, mode).await?;
                let ev = loop {
                    match w.recv().await {
                        Some(ev) if ev.is_node_event() => break ev,
                        Some(ev) if !ev.state_is_alive() => {
                            return Err(cmd_failed(format!("no event: session {:?}", ev.state)))
                        }
                        Some(_) => continue,
                        None => return Err(cmd_failed("no event: the watch is gone")),
                    }
                };
                wr(writeln!(out, "{ev}"))?;
                // Forget it here; the server's copy dies with the session
                // or its events are dropped.
                let _ = zk.remove_watches(p, WatcherType::Any, true).await;
            }
            "call" => {
                let args = match a.pos.get(2) {
                    None => Vec::new(),
                    Some(s) if s.starts_with("0x") => format::parse_hex(s).map_err(cmd_failed)?,
                    Some(s) => format::json_to_msgpack(s).map_err(cmd_failed)?,
                };
                // Subscribe first: the notification ending a wait may come
                // right behind the reply.
                let mut notes = zk.recipe_notifications();
                let body = zk.recipe_call(&a.pos[0], &a.pos[1], &args).await?;
                let reply: Reply = abi::decode(&body)
                    .map_err(|e| cmd_failed(format!("malformed recipe reply: {e}")))?;
                let reply = match reply {
                    Reply::Wait { token } => {
                        wr(writeln!(out, "waiting (token {token})..."))?;
                        loop {
                            let Some(n) = notes.recv().await else {
                                return Err(cmd_failed("the session ended while waiting"));
                            };
                            match abi::decode::<Notification>(&n.payload) {
                                Ok(Notification::Finished {
                                    module,
                                    token: t,
                                    reply,
                                }) if module == a.pos[0] && t == token => break reply,
                                _ => continue,
                            }
                        }
                    }
                    r => r,
                };
                match reply {
                    Reply::Done(v) => wr(writeln!(out, "{}", format::msgpack_display(&v)))?,
                    Reply::Error { code, message } => {
                        return Err(cmd_failed(format!("recipe error {code}: {message}")))
                    }
                    Reply::Wait { token } => wr(writeln!(out, "still waiting (token {token})"))?,
                }
            }
            "deploy" => {
                let bytes = std::fs::read(&a.pos[0])
                    .map_err(|e| cmd_failed(format!("{}: {e}", a.pos[0])))?;
                let r = zk.deploy(&bytes).await.map_err(|e| refused("deploy", e))?;
                wr(writeln!(out, "{} {} {}", r.name, r.version, r.sha256))?;
            }
            "undeploy" => zk
                .undeploy(&a.pos[0])
                .await
                .map_err(|e| refused("undeploy", e))?,
            "recipes" => {
                for r in zk.deployed_recipes().await? {
                    wr(writeln!(out, "{} {} {}", r.name, r.version, r.sha256))?;
                }
            }
            other => return Err(cmd_failed(format!("{other}: not implemented"))),
        }
        Ok(())
    }
}

/// A deploy or undeploy the ensemble refused for want of permission says
/// which permission on which node (zkCli's "Insufficient permission : PATH"
/// would name the module file, which reads like a file error).
fn refused(what: &str, e: Error) -> OpError {
    match e.root() {
        Error::NoAuth => cmd_failed(format!(
            "{what} refused: needs ADMIN permission on {} (authenticate as a user its ACL \
             grants, e.g. the super user: addauth digest super:PASSWORD)",
            crate::deploy::RECIPES_NODE
        )),
        _ => OpError::Zk(e),
    }
}

impl crate::watch::WatchedEvent {
    fn state_is_alive(&self) -> bool {
        !matches!(
            self.state,
            wazoo_proto::KeeperState::Expired
                | wazoo_proto::KeeperState::AuthFailed
                | wazoo_proto::KeeperState::Closed
        )
    }
}
