//! Write a test once, run it against Apache ZooKeeper and against wazoo.
//!
//! ```no_run
//! use wazoo_testkit::{start_server, Flavor};
//!
//! fn ephemeral_node_goes_with_its_session(flavor: Flavor) -> anyhow::Result<()> {
//!     let server = start_server(flavor)?;
//!     let _hosts = server.connect_string();
//!     // ... connect a client to `_hosts` and assert ...
//!     Ok(())
//! }
//!
//! #[test]
//! fn ephemeral_node_goes_with_its_session_zookeeper() -> anyhow::Result<()> {
//!     ephemeral_node_goes_with_its_session(Flavor::Zookeeper)
//! }
//!
//! #[test]
//! fn ephemeral_node_goes_with_its_session_wazoo() -> anyhow::Result<()> {
//!     ephemeral_node_goes_with_its_session(Flavor::Wazoo)
//! }
//! ```

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;

use crate::config::ServerOptions;
use crate::wazoo::WazooServer;
use crate::zookeeper::ZkServer;

/// Which server implementation a test runs against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Flavor {
    /// Apache ZooKeeper 3.8, the compatibility oracle.
    Zookeeper,
    /// This project's server.
    Wazoo,
}

impl Flavor {
    pub const ALL: [Flavor; 2] = [Flavor::Zookeeper, Flavor::Wazoo];

    pub fn name(self) -> &'static str {
        match self {
            Flavor::Zookeeper => "zookeeper",
            Flavor::Wazoo => "wazoo",
        }
    }

    pub fn start(self) -> anyhow::Result<Box<dyn TestServer>> {
        start_server(self)
    }

    pub fn start_with(self, opts: ServerOptions) -> anyhow::Result<Box<dyn TestServer>> {
        start_server_with(self, opts)
    }
}

impl fmt::Display for Flavor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Flavor {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<Flavor> {
        match s.to_ascii_lowercase().as_str() {
            "zookeeper" | "zk" => Ok(Flavor::Zookeeper),
            "wazoo" => Ok(Flavor::Wazoo),
            other => anyhow::bail!("unknown server flavor {other:?} (zookeeper or wazoo)"),
        }
    }
}

/// A running standalone server of either flavor. Dropping it kills it.
pub trait TestServer: Send {
    fn flavor(&self) -> Flavor;
    /// The client address on loopback.
    fn addr(&self) -> SocketAddr;
    /// `127.0.0.1:<port>`, for any ZooKeeper client.
    fn connect_string(&self) -> String {
        self.addr().to_string()
    }
    /// Sends a four-letter word (`ruok`, `srvr`, `mntr`, ...) and returns the answer.
    fn four_letter(&self, word: &str) -> io::Result<String> {
        crate::four_letter_word(self.addr(), word)
    }
    fn data_dir(&self) -> PathBuf;
    /// The last `lines` lines of the server's log.
    fn log_tail(&self, lines: usize) -> String;
    fn is_running(&mut self) -> bool;
    /// SIGKILL (kill -9).
    fn kill(&mut self);
    /// Starts it again on the same port and data directory (killing it first
    /// if needed) and waits until it serves.
    fn restart(&mut self) -> anyhow::Result<()>;
    /// Where its AdminServer listens, if it serves one
    /// ([`ServerOptions::admin_server`](crate::ServerOptions::admin_server)).
    fn admin_addr(&self) -> Option<SocketAddr>;
}

/// Starts a standalone server of `flavor` with [`ServerOptions::default()`].
pub fn start_server(flavor: Flavor) -> anyhow::Result<Box<dyn TestServer>> {
    start_server_with(flavor, ServerOptions::default())
}

/// Starts a standalone server of `flavor`.
pub fn start_server_with(
    flavor: Flavor,
    opts: ServerOptions,
) -> anyhow::Result<Box<dyn TestServer>> {
    Ok(match flavor {
        Flavor::Zookeeper => Box::new(ZkServer::start_with(opts)?),
        Flavor::Wazoo => Box::new(WazooServer::start(opts)?),
    })
}

impl TestServer for ZkServer {
    fn admin_addr(&self) -> Option<SocketAddr> {
        ZkServer::admin_addr(self)
    }
    fn flavor(&self) -> Flavor {
        Flavor::Zookeeper
    }
    fn addr(&self) -> SocketAddr {
        ZkServer::addr(self)
    }
    fn data_dir(&self) -> PathBuf {
        ZkServer::data_dir(self)
    }
    fn log_tail(&self, lines: usize) -> String {
        ZkServer::log_tail(self, lines)
    }
    fn is_running(&mut self) -> bool {
        ZkServer::is_running(self)
    }
    fn kill(&mut self) {
        ZkServer::kill(self)
    }
    fn restart(&mut self) -> anyhow::Result<()> {
        ZkServer::restart(self)
    }
}

impl TestServer for WazooServer {
    fn admin_addr(&self) -> Option<SocketAddr> {
        WazooServer::admin_addr(self)
    }
    fn flavor(&self) -> Flavor {
        Flavor::Wazoo
    }
    fn addr(&self) -> SocketAddr {
        WazooServer::addr(self)
    }
    fn data_dir(&self) -> PathBuf {
        WazooServer::data_dir(self)
    }
    fn log_tail(&self, lines: usize) -> String {
        WazooServer::log_tail(self, lines)
    }
    fn is_running(&mut self) -> bool {
        WazooServer::is_running(self)
    }
    fn kill(&mut self) {
        WazooServer::kill(self)
    }
    fn restart(&mut self) -> anyhow::Result<()> {
        WazooServer::restart(self)
    }
}
