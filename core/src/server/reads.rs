//! Reads, answered from the committed tree when they reach the head of
//! their connection's queue (ZooKeeper's FinalRequestProcessor), and
//! setWatches after a reconnect.

use super::*;

impl Server {
    pub(super) fn read(&mut self, conn: ConnId, req: Request) -> (ErrorCode, Response) {
        if let Request::MultiRead(ops) = req {
            return self.multi_read(conn, ops);
        }
        match self.try_read(conn, req) {
            Ok(r) => (ErrorCode::Ok, r),
            Err(e) => (e, Response::Empty),
        }
    }

    /// A multiRead, as ZooKeeper 3.8's FinalRequestProcessor answers it:
    /// each read in order, rebuilt without its watch flag (a multiRead
    /// sets no watches); an op that is no read (a write decodes in a
    /// multiRead when all its ops are writes) stops it with
    /// MarshallingError, and the reply carries the empty multi body
    /// ZooKeeper had begun. (Reads mixed with writes do not decode.)
    pub(super) fn multi_read(&mut self, conn: ConnId, ops: Vec<Request>) -> (ErrorCode, Response) {
        let mut results = Vec::with_capacity(ops.len());
        for op in ops {
            let result = match op {
                Request::GetChildren { path, .. } => {
                    match self.try_read(conn, Request::GetChildren { path, watch: false }) {
                        Ok(Response::GetChildren { children }) => {
                            OpResult::GetChildren { children }
                        }
                        Ok(_) => OpResult::Error {
                            err: ErrorCode::SystemError.code(),
                        },
                        Err(e) => OpResult::Error { err: e.code() },
                    }
                }
                Request::GetData { path, .. } => {
                    let req = Request::GetData { path, watch: false };
                    // A read call in a multiRead runs within the quick
                    // budget alone (its ops are answered at once).
                    let r = match self.serve_read_call(conn, 0, &req, false) {
                        Some(recipes::ReadCallRun::Answered(r)) => r,
                        Some(recipes::ReadCallRun::Offloaded(_)) => {
                            unreachable!("not offloaded from a multiRead")
                        }
                        None => self.try_read(conn, req),
                    };
                    match r {
                        Ok(Response::GetData { data, stat }) => OpResult::GetData { data, stat },
                        Ok(_) => OpResult::Error {
                            err: ErrorCode::SystemError.code(),
                        },
                        Err(e) => OpResult::Error { err: e.code() },
                    }
                }
                _ => return (ErrorCode::MarshallingError, Response::Multi(results)),
            };
            results.push(result);
        }
        (ErrorCode::Ok, Response::Multi(results))
    }

    pub(super) fn auth_of(&self, conn: ConnId) -> std::sync::Arc<AuthInfo> {
        self.conns
            .get(&conn)
            .map(|c| c.auth.clone())
            .unwrap_or_default()
    }

    pub(super) fn try_read(&mut self, conn: ConnId, req: Request) -> Result<Response, ErrorCode> {
        let auth = self.auth_of(conn);
        if let Some(r) = self.recipes_node_read(&auth, &req) {
            return r;
        }
        if let Some(r) = tree_read(&self.tree, &auth, &req) {
            // The watch a read leaves: exists leaves one on a missing node
            // too (to see it created), the others only on a node read.
            let watch = match (&req, &r) {
                (Request::Exists { path, watch: true }, Ok(_) | Err(ErrorCode::NoNode)) => {
                    Some((path, Kind::Data))
                }
                (Request::GetData { path, watch: true }, Ok(_)) => Some((path, Kind::Data)),
                (
                    Request::GetChildren { path, watch: true }
                    | Request::GetChildren2 { path, watch: true },
                    Ok(_),
                ) => Some((path, Kind::Child)),
                _ => None,
            };
            if let Some((path, kind)) = watch {
                self.watches.add(conn, path, kind);
            }
            return r;
        }
        match req {
            Request::Ping => Ok(Response::Empty),
            Request::Sync { path } => Ok(Response::Sync { path }),
            Request::GetEphemerals { prefix } => {
                let session = self.conns.get(&conn).map(|c| c.session).unwrap_or(0);
                // As ZooKeeper: a blank prefix, or one that trims (Java's
                // String.trim, up to U+0020) to "/", lists them all; any
                // other is matched as sent, untrimmed.
                let java_blank = |c: char| {
                    (c.is_whitespace()
                        && !matches!(c, '\u{85}' | '\u{a0}' | '\u{2007}' | '\u{202f}'))
                        || ('\u{1c}'..='\u{1f}').contains(&c)
                };
                let all = self.tree.ephemerals(session);
                Ok(Response::Ephemerals(
                    if prefix.chars().all(java_blank)
                        || prefix.trim_matches(|c: char| c <= ' ') == "/"
                    {
                        all
                    } else {
                        all.into_iter().filter(|e| e.starts_with(&prefix)).collect()
                    },
                ))
            }
            Request::WhoAmI => {
                let auth = self.auth_of(conn);
                Ok(Response::WhoAmI(
                    auth.ids
                        .iter()
                        .map(|id| ClientInfo {
                            auth_scheme: id.scheme.clone(),
                            user: match id.scheme.as_str() {
                                "digest" => id.id.split(':').next().unwrap_or("").to_string(),
                                _ => id.id.clone(),
                            },
                        })
                        .collect(),
                ))
            }
            Request::AddWatch { path, mode } => {
                // An unknown mode is a MarshallingError in ZooKeeper (its
                // mode conversion throws), checked before the path.
                let kind = match AddWatchMode::from_i32(mode) {
                    Some(AddWatchMode::Persistent) => Kind::Persistent,
                    Some(AddWatchMode::PersistentRecursive) => Kind::Recursive,
                    None => return Err(ErrorCode::MarshallingError),
                };
                // ZooKeeper does not check the path: a watch on a path no
                // node can have never fires.
                self.watches.add(conn, &path, kind);
                // ZooKeeper answers addWatch with an ErrorResponse(0) body.
                Ok(Response::ErrorResponse(0))
            }
            Request::CheckWatches { path, watcher_type } => {
                let t = client_watcher_type(watcher_type)?;
                // ZooKeeper's walk over the path and its ancestors
                // (PathParentIterator) yields nothing for the empty path,
                // so it finds no watch there, even one filed under "".
                if path.is_empty() {
                    return Err(ErrorCode::NoWatcher);
                }
                // A path that does not start with `/` breaks ZooKeeper's
                // walk over its ancestors (core::watch), answered
                // MarshallingError.
                if !path.is_empty() && !path.starts_with('/') {
                    return match self.watches.contains_unrooted(&path, t) {
                        Ok(true) => Ok(Response::Empty),
                        Ok(false) => Err(ErrorCode::NoWatcher),
                        Err(()) => Err(ErrorCode::MarshallingError),
                    };
                }
                // Any connection's watch on the path answers OK, as in
                // ZooKeeper 3.8 (core::watch).
                if self.watches.contains(&path, t) {
                    Ok(Response::Empty)
                } else {
                    Err(ErrorCode::NoWatcher)
                }
            }
            Request::RemoveWatches { path, watcher_type } => {
                let t = client_watcher_type(watcher_type)?;
                if self.watches.remove(conn, &path, t) {
                    Ok(Response::Empty)
                } else {
                    Err(ErrorCode::NoWatcher)
                }
            }
            Request::SetWatches(s) => {
                self.set_watches(
                    conn,
                    SetWatches2 {
                        relative_zxid: s.relative_zxid,
                        data_watches: s.data_watches,
                        exist_watches: s.exist_watches,
                        child_watches: s.child_watches,
                        persistent_watches: Vec::new(),
                        persistent_recursive_watches: Vec::new(),
                    },
                );
                Ok(Response::Empty)
            }
            Request::SetWatches2(s) => {
                self.set_watches(conn, s);
                Ok(Response::Empty)
            }
            Request::MultiRead(ops) => match self.multi_read(conn, ops) {
                (ErrorCode::Ok, r) => Ok(r),
                (e, _) => Err(e),
            },
            // A failed multi arrives here with its results precomputed.
            Request::Multi(_) => Ok(Response::Multi(Vec::new())),
            _ => Err(ErrorCode::Unimplemented),
        }
    }

    /// setWatches after a reconnect: events the client missed since
    /// `relative_zxid` are delivered now; the rest are re-armed.
    pub(super) fn set_watches(&mut self, conn: ConnId, s: SetWatches2) {
        let rz = s.relative_zxid;
        let mut events: Vec<(String, EventType)> = Vec::new();
        for p in s.data_watches {
            match self.tree.stat(node_path(&p)) {
                None => events.push((p, EventType::NodeDeleted)),
                Some(st) if st.mzxid > rz => events.push((p, EventType::NodeDataChanged)),
                Some(_) => self.watches.add(conn, &p, Kind::Data),
            }
        }
        for p in s.exist_watches {
            match self.tree.stat(node_path(&p)) {
                Some(_) => events.push((p, EventType::NodeCreated)),
                None => self.watches.add(conn, &p, Kind::Data),
            }
        }
        for p in s.child_watches {
            match self.tree.stat(node_path(&p)) {
                None => events.push((p, EventType::NodeDeleted)),
                Some(st) if st.pzxid > rz => events.push((p, EventType::NodeChildrenChanged)),
                Some(_) => self.watches.add(conn, &p, Kind::Child),
            }
        }
        for p in s.persistent_watches {
            self.watches.add(conn, &p, Kind::Persistent);
        }
        for p in s.persistent_recursive_watches {
            self.watches.add(conn, &p, Kind::Recursive);
        }
        for (path, event) in events {
            let ev = WatcherEvent {
                event_type: event as i32,
                state: KeeperState::SyncConnected as i32,
                path,
            };
            frame::write_notification(self.send_buf(conn), NOTIFICATION_ZXID, &ev);
            self.stats.packets_sent += 1;
        }
    }
}

/// Whether `req` is a read [`tree_read`] answers in full: exists, getData,
/// getChildren(2) without a watch, getACL and getAllChildrenNumber, of a
/// path outside `/zookeeper` (where the recipes node, the call nodes and
/// read calls are answered by the pipeline). The shell may answer these
/// from a published copy of the tree, off the member's thread
/// (docs/ARCHITECTURE.md, "Reads on I/O threads").
pub fn tree_read_eligible(req: &Request) -> bool {
    let (path, watch) = match req {
        Request::Exists { path, watch }
        | Request::GetData { path, watch }
        | Request::GetChildren { path, watch }
        | Request::GetChildren2 { path, watch } => (path, *watch),
        Request::GetAcl { path } | Request::GetAllChildrenNumber { path } => (path, false),
        _ => return false,
    };
    !watch && !path.starts_with("/zookeeper")
}

/// A read answered from `tree` and the connection's identities alone, as
/// ZooKeeper's FinalRequestProcessor answers it (errors in its order:
/// the path, the node, then its ACL), or None for a request that needs
/// more. The watch flag is not looked at: the pipeline adds the watch
/// ([`Server::try_read`]); a read with one is never answered elsewhere.
pub fn tree_read(
    tree: &DataTree,
    auth: &AuthInfo,
    req: &Request,
) -> Option<Result<Response, ErrorCode>> {
    let readable = |path: &str| -> Result<(), ErrorCode> {
        check_read_path(path)?;
        let acl = tree.acl_shared(node_path(path)).ok_or(ErrorCode::NoNode)?;
        acl::check(&acl, perms::READ, auth)
    };
    Some(match req {
        Request::Exists { path, .. } => {
            // The one read ZooKeeper checks: a NUL is BadArguments.
            if path.contains('\0') {
                return Some(Err(ErrorCode::BadArguments));
            }
            tree.stat(node_path(path))
                .map(Response::Stat)
                .ok_or(ErrorCode::NoNode)
        }
        Request::GetData { path, .. } => {
            if let Err(e) = check_read_path(path) {
                return Some(Err(e));
            }
            // One lookup for the ACL check and the data.
            match tree.get_data_checked(node_path(path), |acl| acl::check(acl, perms::READ, auth)) {
                None => Err(ErrorCode::NoNode),
                Some(Err(e)) => Err(e),
                Some(Ok((data, stat))) => Ok(Response::GetData { data, stat }),
            }
        }
        Request::GetChildren { path, .. } => readable(path).and_then(|()| {
            let children = tree.children(node_path(path)).ok_or(ErrorCode::NoNode)?;
            Ok(Response::GetChildren { children })
        }),
        Request::GetChildren2 { path, .. } => readable(path).and_then(|()| {
            let (children, stat) = tree
                .children_with_stat(node_path(path))
                .ok_or(ErrorCode::NoNode)?;
            Ok(Response::GetChildren2 { children, stat })
        }),
        Request::GetAcl { path } => (|| {
            check_read_path(path)?;
            let acl = tree.acl(node_path(path)).ok_or(ErrorCode::NoNode)?;
            let acl = acl_reply(&acl, auth)?;
            let stat = tree.stat(node_path(path)).unwrap_or_default();
            Ok(Response::GetAcl { acl, stat })
        })(),
        Request::GetAllChildrenNumber { path } => readable(path).and_then(|()| {
            let n = tree
                .all_children_number(node_path(path))
                .ok_or(ErrorCode::NoNode)?;
            // ZooKeeper counts the keys that start with the path and a
            // `/`: for "", every node, "/" among them.
            Ok(Response::AllChildrenNumber(if path.is_empty() {
                n.saturating_add(1)
            } else {
                n
            }))
        }),
        _ => return None,
    })
}

/// The node a read of `path` finds: ZooKeeper's DataTree files the root
/// under "" as well as "/", so its reads (exists, getData, getChildren,
/// getACL, getAllChildrenNumber, setWatches) of the empty path answer for
/// the root; a watch set on "" stays filed under "" (where no event is
/// ever delivered, in ZooKeeper as here).
pub(super) fn node_path(path: &str) -> &str {
    if path.is_empty() {
        "/"
    } else {
        path
    }
}

/// The watcher type of a checkWatches or removeWatches: ZooKeeper 3.8
/// takes Children (1), Data (2) and Any (3) and answers MarshallingError
/// for anything else, the persistent types (4, 5) included.
pub(super) fn client_watcher_type(t: i32) -> Result<WatcherType, ErrorCode> {
    match WatcherType::from_i32(t) {
        Some(t @ (WatcherType::Children | WatcherType::Data | WatcherType::Any)) => Ok(t),
        _ => Err(ErrorCode::MarshallingError),
    }
}

/// What getACL answers of a node with `acl` to a client with `auth`: it
/// needs READ or ADMIN; without ADMIN, digest hashes are masked, as
/// ZooKeeper does.
pub(super) fn acl_reply(acl: &[Acl], auth: &AuthInfo) -> Result<Vec<Acl>, ErrorCode> {
    acl::check(acl, perms::READ | perms::ADMIN, auth)?;
    if acl::check(acl, perms::ADMIN, auth).is_ok() {
        return Ok(acl.to_vec());
    }
    Ok(acl
        .iter()
        .cloned()
        .map(|mut a| {
            if a.id.scheme == "digest" {
                if let Some((user, _)) = a.id.id.split_once(':') {
                    a.id.id = format!("{user}:x");
                }
            }
            a
        })
        .collect())
}
