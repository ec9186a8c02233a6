//! A loopback TCP proxy that tests use to break the network between a
//! client and a server: connection loss, a silent partition (for session
//! expiry), or a switch to another server.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

const UPSTREAM_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Bytes flow both ways.
    Forward,
    /// Existing connections were closed; new ones are reset at once.
    Cut,
    /// Connections stay open but no byte goes through, either way.
    Blackhole,
}

struct State {
    mode: Mode,
    target: SocketAddr,
    /// Bumped by `cut()`: connections accepted in an older epoch must close.
    epoch: u64,
    shutdown: bool,
    next_id: u64,
    /// The sockets of each live connection, to shut them down from outside.
    conns: HashMap<u64, Vec<TcpStream>>,
    workers: Vec<JoinHandle<()>>,
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
    accepted: AtomicU64,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Blocks while the proxy is blackholed. `Some(target)` if the
    /// connection of `epoch` may forward, `None` if it must close.
    fn wait_forwarding(&self, epoch: u64) -> Option<SocketAddr> {
        let mut st = self.lock();
        loop {
            if st.shutdown || st.epoch != epoch || st.mode == Mode::Cut {
                return None;
            }
            if st.mode == Mode::Forward {
                return Some(st.target);
            }
            st = self.changed.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Adds `stream` to connection `id`; `false` (and nothing added) if that
    /// connection has been cut meanwhile.
    fn register(&self, id: u64, epoch: u64, stream: &TcpStream) -> bool {
        let mut st = self.lock();
        if st.shutdown || st.epoch != epoch {
            return false;
        }
        match (st.conns.get_mut(&id), stream.try_clone()) {
            (Some(socks), Ok(clone)) => {
                socks.push(clone);
                true
            }
            _ => false,
        }
    }

    /// Shuts down and forgets every socket of connection `id`.
    fn close(&self, id: u64) {
        if let Some(socks) = self.lock().conns.remove(&id) {
            for s in socks {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
    }
}

/// A TCP proxy on a free loopback port that forwards every connection to a
/// target address, until told otherwise. Stops (closing every connection)
/// when dropped.
///
/// All methods take `&self`, so a proxy can be shared (e.g. in an `Arc`)
/// between the test and helper threads.
pub struct Proxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

impl Proxy {
    /// Listens on `127.0.0.1:<free port>` and forwards to `target`.
    pub fn start(target: SocketAddr) -> io::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                mode: Mode::Forward,
                target,
                epoch: 0,
                shutdown: false,
                next_id: 0,
                conns: HashMap::new(),
                workers: Vec::new(),
            }),
            changed: Condvar::new(),
            accepted: AtomicU64::new(0),
        });
        let acceptor = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name(format!("proxy-accept-{}", addr.port()))
                .spawn(move || accept_loop(listener, shared))?
        };
        Ok(Proxy {
            addr,
            shared,
            acceptor: Some(acceptor),
        })
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `127.0.0.1:<proxy port>`.
    pub fn connect_string(&self) -> String {
        self.addr.to_string()
    }

    pub fn target(&self) -> SocketAddr {
        self.shared.lock().target
    }

    /// Connections accepted from now on go to `target`. Connections already
    /// open keep their server; call [`cut`](Self::cut) then
    /// [`restore`](Self::restore) to move clients over.
    pub fn set_target(&self, target: SocketAddr) {
        self.shared.lock().target = target;
    }

    /// Connection loss: closes every current connection (both sides see EOF)
    /// and resets every new one at once, until [`restore`](Self::restore).
    pub fn cut(&self) {
        let mut st = self.shared.lock();
        st.mode = Mode::Cut;
        st.epoch += 1;
        for socks in std::mem::take(&mut st.conns).into_values() {
            for s in socks {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
        drop(st);
        self.shared.changed.notify_all();
    }

    /// A silent partition: connections stay open (and new ones are
    /// accepted) but no byte passes either way, so only timeouts notice.
    /// [`restore`](Self::restore) lets the held bytes through, like a healed
    /// network; [`cut`](Self::cut) closes them instead.
    pub fn blackhole(&self) {
        self.shared.lock().mode = Mode::Blackhole;
        self.shared.changed.notify_all();
    }

    /// Back to forwarding, after [`cut`](Self::cut) or [`blackhole`](Self::blackhole).
    pub fn restore(&self) {
        self.shared.lock().mode = Mode::Forward;
        self.shared.changed.notify_all();
    }

    /// Connections currently open through the proxy.
    pub fn active_connections(&self) -> usize {
        self.shared.lock().conns.len()
    }

    /// Connections accepted since the proxy started (refused ones included).
    pub fn accepted_connections(&self) -> u64 {
        self.shared.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        {
            let mut st = self.shared.lock();
            st.shutdown = true;
            for socks in std::mem::take(&mut st.conns).into_values() {
                for s in socks {
                    let _ = s.shutdown(Shutdown::Both);
                }
            }
        }
        self.shared.changed.notify_all();
        // Wake the acceptor, blocked in accept(), so it sees `shutdown`.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
        let workers = std::mem::take(&mut self.shared.lock().workers);
        for worker in workers {
            let _ = worker.join();
        }
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    for incoming in listener.incoming() {
        let mut st = shared.lock();
        if st.shutdown {
            return;
        }
        let client = match incoming {
            Ok(client) => client,
            Err(_) => {
                drop(st);
                // e.g. out of file descriptors: do not spin.
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        shared.accepted.fetch_add(1, Ordering::SeqCst);
        if st.mode == Mode::Cut {
            reset(client);
            continue;
        }
        let Ok(clone) = client.try_clone() else {
            continue;
        };
        let id = st.next_id;
        st.next_id += 1;
        let epoch = st.epoch;
        st.conns.insert(id, vec![clone]);
        st.workers.retain(|w| !w.is_finished());
        let worker = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name(format!("proxy-conn-{id}"))
                .spawn(move || run_connection(shared, id, epoch, client))
        };
        match worker {
            Ok(worker) => st.workers.push(worker),
            Err(_) => {
                drop(st);
                shared.close(id);
            }
        }
    }
}

fn run_connection(shared: Arc<Shared>, id: u64, epoch: u64, client: TcpStream) {
    let Some(target) = shared.wait_forwarding(epoch) else {
        shared.close(id);
        return;
    };
    let upstream = match TcpStream::connect_timeout(&target, UPSTREAM_CONNECT_TIMEOUT) {
        Ok(upstream) => upstream,
        Err(_) => {
            // The server is down: the client sees its connection reset.
            shared.close(id);
            reset(client);
            return;
        }
    };
    if !shared.register(id, epoch, &upstream) {
        shared.close(id);
        return;
    }
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let (Ok(client_write), Ok(upstream_read)) = (client.try_clone(), upstream.try_clone()) else {
        shared.close(id);
        return;
    };
    let back = {
        let shared = shared.clone();
        std::thread::Builder::new()
            .name(format!("proxy-conn-{id}-back"))
            .spawn(move || pump(&shared, epoch, upstream_read, client_write))
    };
    pump(&shared, epoch, client, upstream);
    if let Ok(back) = back {
        let _ = back.join();
    }
    shared.close(id);
}

/// Copies `src` to `dst` while the proxy forwards; holds the bytes while it
/// is blackholed. An EOF from `src` is passed on as a half-close of `dst`
/// (as TCP would); an error or a cut closes both sockets entirely, which
/// also ends the other direction.
fn pump(shared: &Shared, epoch: u64, mut src: TcpStream, mut dst: TcpStream) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match src.read(&mut buf) {
            Ok(0) => {
                let _ = dst.shutdown(Shutdown::Write);
                return;
            }
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        if shared.wait_forwarding(epoch).is_none() || dst.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = src.shutdown(Shutdown::Both);
    let _ = dst.shutdown(Shutdown::Both);
}

/// Closes `stream` with a TCP RST instead of a FIN (SO_LINGER 0).
fn reset(stream: TcpStream) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt on an open socket we own, with a correctly sized value.
    unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
    drop(stream);
}
