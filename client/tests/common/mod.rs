//! Shared helpers of the client's integration tests: one server per flavor
//! per test binary (each test works under its own chroot), bounded waits.
#![allow(dead_code)]

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use wazoo_client::{Acl, Client, ClientOptions, CreateMode, Error};
use wazoo_testkit::{start_server_with, Flavor, ServerOptions, TestServer};

/// Every wait in these tests is bounded by this, and fails with a message.
pub const WAIT: Duration = Duration::from_secs(30);

/// The shared servers: tickTime 500 ms, so sessions may last 1 s to 10 s.
pub const TICK_MS: u32 = 500;

/// Runs each test body against both flavors:
/// `flavored!(name, ...)` makes `name::zookeeper` and `name::wazoo`.
#[macro_export]
macro_rules! flavored {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn zookeeper() {
                super::$name(wazoo_testkit::Flavor::Zookeeper).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn wazoo() {
                super::$name(wazoo_testkit::Flavor::Wazoo).await
            }
        }
    )*};
}

/// A shared server, kept while some test holds it: dropped (process killed,
/// directory removed) when the last test using it is done.
pub struct Server {
    pub addr: SocketAddr,
    server: Mutex<Box<dyn TestServer>>,
}

impl Server {
    /// The last lines of the server's log, for failure messages.
    pub fn log(&self) -> String {
        self.server
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .log_tail(40)
    }
}

/// This binary's shared server of `flavor` (tickTime [`TICK_MS`]), started
/// if no running test holds one.
pub fn server(flavor: Flavor) -> Arc<Server> {
    static SERVERS: OnceLock<Mutex<HashMap<Flavor, Weak<Server>>>> = OnceLock::new();
    let mut map = SERVERS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(s) = map.get(&flavor).and_then(Weak::upgrade) {
        return s;
    }
    let started = start_server_with(flavor, ServerOptions::default().tick_time_ms(TICK_MS))
        .unwrap_or_else(|e| panic!("cannot start a {flavor} server: {e:#}"));
    let s = Arc::new(Server {
        addr: started.addr(),
        server: Mutex::new(started),
    });
    map.insert(flavor, Arc::downgrade(&s));
    s
}

/// Awaits `fut` for at most [`WAIT`]; panics naming `what` otherwise.
pub async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    match tokio::time::timeout(WAIT, fut).await {
        Ok(v) => v,
        Err(_) => panic!("timed out after {WAIT:?} waiting for {what}"),
    }
}

pub fn opts() -> ClientOptions {
    ClientOptions::default().session_timeout(Duration::from_secs(10))
}

/// A client on `connect` (no chroot handling), connected.
pub async fn connect(connect: &str, options: ClientOptions) -> (Client, wazoo_client::EventStream) {
    within(
        &format!("a client to connect to {connect}"),
        Client::connect(connect, options),
    )
    .await
    .unwrap_or_else(|e| panic!("connect to {connect}: {e}"))
}

/// Deletes `path` and everything below it (NoNode is fine).
pub async fn delete_all(c: &Client, path: &str) {
    let mut stack = vec![path.to_string()];
    let mut order = Vec::new();
    while let Some(p) = stack.pop() {
        match c.get_children(&p).await {
            Ok(kids) => {
                for k in kids {
                    stack.push(wazoo_proto::path::join(&p, &k));
                }
                order.push(p);
            }
            Err(Error::NoNode) => {}
            Err(e) => panic!("listing {p}: {e}"),
        }
    }
    for p in order.iter().rev() {
        match c.delete(p, None).await {
            Ok(()) | Err(Error::NoNode) => {}
            Err(e) => panic!("deleting {p}: {e}"),
        }
    }
}

/// A fresh, empty node `/<name>` on the shared server, and the connection
/// string that uses it as chroot: each test works in its own subtree. Hold
/// the returned server for the whole test.
pub async fn fresh_root(flavor: Flavor, name: &str) -> (Arc<Server>, String) {
    let srv = server(flavor);
    let (root, _) = connect(&srv.addr.to_string(), opts()).await;
    let path = format!("/{name}");
    delete_all(&root, &path).await;
    root.create(&path, b"", &Acl::open_unsafe(), CreateMode::Persistent)
        .await
        .unwrap();
    root.close().await.unwrap();
    let cs = format!("{}{path}", srv.addr);
    (srv, cs)
}
