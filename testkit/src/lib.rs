//! wazoo-testkit: the shared test harness of the wazoo workspace.
//!
//! Integration tests of the other crates use it as a dev-dependency to run
//! real servers as child processes on loopback and to break the network
//! between a client and a server:
//!
//! * [`ZkServer`] / [`ZkEnsemble`]: Apache ZooKeeper 3.8 from the Debian
//!   package `zookeeper` (the compatibility oracle), standalone or a quorum.
//! * [`WazooServer`]: the `wazoo` binary of this workspace, with kill -9 and
//!   restart on the same data directory and port.
//! * [`Flavor`] / [`TestServer`] / [`start_server`]: write a test once, run it
//!   against both servers.
//! * [`Proxy`]: a loopback TCP proxy that can cut, blackhole and restore
//!   connections, or switch its target.
//! * [`raw`]: a session over a plain socket (the handshake, one frame).
//! * [`four_letter_word`], [`free_port`], [`wait_for`]: small helpers.
//!
//! Every server binds 127.0.0.1 only, on ports the kernel hands out, lives in
//! its own temporary directory, is killed when its handle is dropped, and is
//! also killed by the kernel if the test process dies (`PR_SET_PDEATHSIG`).
//! Every wait is bounded and fails with a message that says what it waited
//! for, plus the tail of the server's log.

mod config;
mod ensemble;
mod flavor;
mod process;
mod proxy;
mod quorum_net;
pub mod raw;
mod wazoo;
mod zookeeper;

use std::collections::HashSet;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

pub use config::{MultiAddress, ServerOptions};
pub use ensemble::{start_ensemble, TestEnsemble, WazooEnsemble};
pub use flavor::{start_server, start_server_with, Flavor, TestServer};
pub use proxy::Proxy;
pub use quorum_net::QuorumNet;
pub use wazoo::{wazoo_bin, WazooServer};
pub use zookeeper::{
    netty_jars_debian_omits, zkcli_stdout, zookeeper_classpath, ZkEnsemble, ZkServer,
};

/// How long [`four_letter_word`] waits to connect and for the answer.
pub const FOUR_LETTER_TIMEOUT: Duration = Duration::from_secs(5);

/// A loopback TCP port that was free a moment ago.
///
/// Binds `127.0.0.1:0`, reads the port the kernel chose and closes the
/// socket. The same process never gets the same port twice, so servers
/// started by parallel tests do not collide with each other; a collision with
/// another process is still possible in principle, which is why the server
/// starters retry on "address in use".
pub fn free_port() -> u16 {
    static HANDED_OUT: OnceLock<Mutex<HashSet<u16>>> = OnceLock::new();
    let handed_out = HANDED_OUT.get_or_init(Default::default);
    for _ in 0..100 {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("cannot bind 127.0.0.1:0 to find a free port")
            .port();
        if handed_out.lock().unwrap().insert(port) {
            return port;
        }
    }
    panic!("free_port: the kernel returned only ports already handed out 100 times in a row");
}

/// The loopback address `127.0.0.1:port`.
pub fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// Sends a ZooKeeper four-letter word (`ruok`, `srvr`, `stat`, `mntr`, ...)
/// and returns the whole answer (the server closes the connection after it).
///
/// Connecting, writing and reading are each bounded by
/// [`FOUR_LETTER_TIMEOUT`].
pub fn four_letter_word(addr: SocketAddr, word: &str) -> io::Result<String> {
    let mut stream = TcpStream::connect_timeout(&addr, FOUR_LETTER_TIMEOUT)?;
    stream.set_read_timeout(Some(FOUR_LETTER_TIMEOUT))?;
    stream.set_write_timeout(Some(FOUR_LETTER_TIMEOUT))?;
    stream.write_all(word.as_bytes())?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    Ok(String::from_utf8_lossy(&answer).into_owned())
}

/// Polls `probe` until it returns `Some`, for at most `timeout`.
///
/// The error names `what` was awaited, so a test reads
/// `wait_for("node /a to disappear", secs(10), || ...)`. The poll interval
/// starts at 10 ms and backs off to 200 ms.
pub fn wait_for<T>(
    what: &str,
    timeout: Duration,
    mut probe: impl FnMut() -> Option<T>,
) -> anyhow::Result<T> {
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(10);
    loop {
        if let Some(value) = probe() {
            return Ok(value);
        }
        if Instant::now() >= deadline {
            anyhow::bail!("timed out after {timeout:?} waiting for {what}");
        }
        std::thread::sleep(pause.min(deadline.saturating_duration_since(Instant::now())));
        pause = (pause * 2).min(Duration::from_millis(200));
    }
}

/// Waits until the wazoo member at `addr` serves every recipe module of
/// `modules`, compiled, for at most `timeout`: its `recp` word lists each
/// with `loads=` above 0 (a member lists a deployed module it is still
/// compiling with `loads=0`). A member deploys its plugins directory's
/// modules once they are compiled: tests whose sessions have short
/// timeouts, and measured windows, start after that, so neither a compile
/// nor the sync of a deploy of some 400 KB is in their way.
pub fn wait_for_recipes(
    addr: SocketAddr,
    modules: &[&str],
    timeout: Duration,
) -> anyhow::Result<()> {
    let what = format!("{addr} to serve the recipe modules {modules:?}");
    wait_for(&what, timeout, || {
        let answer = four_letter_word(addr, "recp").ok()?;
        let serves = |m: &&str| {
            let listed = format!("module={m} ");
            answer
                .lines()
                .any(|l| l.starts_with(&listed) && !l.contains(" loads=0 "))
        };
        modules.iter().all(serves).then_some(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_ports_are_distinct_and_bindable() {
        let a = free_port();
        let b = free_port();
        assert_ne!(a, b);
        TcpListener::bind(loopback(a)).expect("port from free_port() should be bindable");
    }

    #[test]
    fn wait_for_returns_the_value_or_names_what_it_waited_for() {
        let mut calls = 0;
        let got = wait_for("the third call", Duration::from_secs(5), || {
            calls += 1;
            (calls == 3).then_some(calls)
        })
        .unwrap();
        assert_eq!(got, 3);

        let err = wait_for::<()>("something that never happens", Duration::ZERO, || None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("something that never happens"), "{err}");
    }
}
