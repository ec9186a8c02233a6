//! Shared helpers for the host's integration tests: one server per flavor
//! per test binary (started on first use, killed when the binary exits),
//! and a macro that runs a scenario against both Apache ZooKeeper and wazoo.

#![allow(dead_code)]

pub mod zk_joiner;

use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use wazoo_testkit::{Flavor, ServerOptions, TestServer};

mod rng;
#[allow(unused_imports)]
pub use rng::Rng;

pub fn options(flavor: Flavor) -> ServerOptions {
    let opts = ServerOptions::default()
        .cfg("znode.container.checkIntervalMs=500")
        .cfg("extendedTypesEnabled=true")
        .cfg("DigestAuthenticationProvider.superDigest=super:D/InIHSb7yEEbrWz8b9l71RjZJU=");
    match flavor {
        Flavor::Wazoo => opts.binary(env!("CARGO_BIN_EXE_wazoo")),
        // ZooKeeper reads the super digest and these as system properties.
        Flavor::Zookeeper => opts
            .arg("-Dzookeeper.DigestAuthenticationProvider.superDigest=super:D/InIHSb7yEEbrWz8b9l71RjZJU=")
            .arg("-Dzookeeper.extendedTypesEnabled=true")
            .arg("-Dznode.container.checkIntervalMs=500"),
    }
}

/// A fresh server of `flavor`, owned by the caller.
pub fn start(flavor: Flavor) -> Box<dyn TestServer> {
    flavor
        .start_with(options(flavor))
        .unwrap_or_else(|e| panic!("cannot start {flavor}: {e:#}"))
}

static ZK: OnceLock<Mutex<Box<dyn TestServer>>> = OnceLock::new();
static WAZOO: OnceLock<Mutex<Box<dyn TestServer>>> = OnceLock::new();
static ZK_ENSEMBLE: OnceLock<Mutex<Box<dyn wazoo_testkit::TestEnsemble>>> = OnceLock::new();
static WAZOO_ENSEMBLE: OnceLock<Mutex<Box<dyn wazoo_testkit::TestEnsemble>>> = OnceLock::new();

/// What a scenario runs against: one server, or a 3-member ensemble.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    pub flavor: Flavor,
    pub ensemble: bool,
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.ensemble {
            write!(f, "{}-ensemble", self.flavor)
        } else {
            write!(f, "{}", self.flavor)
        }
    }
}

impl From<Flavor> for Target {
    fn from(flavor: Flavor) -> Target {
        Target {
            flavor,
            ensemble: false,
        }
    }
}

/// The connect string of this binary's shared server (or ensemble) for `t`.
pub fn shared(t: impl Into<Target>) -> String {
    let t = t.into();
    if t.ensemble {
        let cell = match t.flavor {
            Flavor::Zookeeper => &ZK_ENSEMBLE,
            Flavor::Wazoo => &WAZOO_ENSEMBLE,
        };
        let m = cell.get_or_init(|| {
            let opts = match t.flavor {
                // The shared wazoo ensemble serves its clients on client
                // I/O threads, which answer plain reads themselves
                // (docs/ARCHITECTURE.md, "Reads on I/O threads"): every
                // client library's scenarios on it go through them, and
                // the standalone server covers the default.
                Flavor::Wazoo => options(t.flavor).cfg("wazoo.client.ioThreads=1"),
                Flavor::Zookeeper => options(t.flavor),
            };
            Mutex::new(
                wazoo_testkit::start_ensemble(t.flavor, 3, opts)
                    .unwrap_or_else(|e| panic!("cannot start a {} ensemble: {e:#}", t.flavor)),
            )
        });
        let s = m.lock().unwrap_or_else(|e| e.into_inner());
        return s.connect_string();
    }
    let cell = match t.flavor {
        Flavor::Zookeeper => &ZK,
        Flavor::Wazoo => &WAZOO,
    };
    let m = cell.get_or_init(|| Mutex::new(start(t.flavor)));
    let s = m.lock().unwrap_or_else(|e| e.into_inner());
    s.connect_string()
}

pub async fn connect(hosts: &str) -> zookeeper_client::Client {
    zookeeper_client::Client::connector()
        .with_session_timeout(Duration::from_secs(10))
        .connect(hosts)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {hosts}: {e}"))
}

/// A new session as [`connect`] makes it, or `None` if none is made
/// within 5 s (the servers may be down: the caller tries again later).
pub async fn try_connect(hosts: &str) -> Option<zookeeper_client::Client> {
    let connecting = zookeeper_client::Client::connector()
        .with_session_timeout(Duration::from_secs(10))
        .connect(hosts);
    tokio::time::timeout(Duration::from_secs(5), connecting)
        .await
        .ok()?
        .ok()
}

/// Creates a persistent, world-open node (the parent a test writes under).
pub async fn create_persistent(hosts: &str, path: &str) {
    connect(hosts)
        .await
        .create(
            path,
            b"",
            &zookeeper_client::CreateMode::Persistent
                .with_acls(zookeeper_client::Acls::anyone_all()),
        )
        .await
        .unwrap_or_else(|e| panic!("cannot create {path}: {e}"));
}

/// Runs `scenario(target)` against one server and a 3-member ensemble of
/// each system: tests `zookeeper`, `wazoo`, `zookeeper_ensemble`,
/// `wazoo_ensemble`.
#[macro_export]
macro_rules! on_all {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                use wazoo_testkit::Flavor;
                use super::common::Target;
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn zookeeper() {
                    super::$name(Target { flavor: Flavor::Zookeeper, ensemble: false }).await;
                }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn wazoo() {
                    super::$name(Target { flavor: Flavor::Wazoo, ensemble: false }).await;
                }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn zookeeper_ensemble() {
                    super::$name(Target { flavor: Flavor::Zookeeper, ensemble: true }).await;
                }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn wazoo_ensemble() {
                    super::$name(Target { flavor: Flavor::Wazoo, ensemble: true }).await;
                }
            }
        )*
    };
}

/// Runs `scenario(flavor)` as two tests, `zookeeper` and `wazoo`.
#[macro_export]
macro_rules! on_both {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                use wazoo_testkit::Flavor;
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn zookeeper() {
                    super::$name(Flavor::Zookeeper).await;
                }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn wazoo() {
                    super::$name(Flavor::Wazoo).await;
                }
            }
        )*
    };
}

pub async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(Duration::from_secs(20), fut).await {
        Ok(v) => v,
        Err(_) => panic!("timed out waiting for {what}"),
    }
}

/// Writers that create `{parent}/{prefix}w{w}-{i}` as fast as they can and
/// record every acknowledged create: the load of the kill tests.
pub struct Writers {
    acked: std::sync::Arc<Mutex<Vec<String>>>,
    /// The last error a writer saw.
    last_error: std::sync::Arc<Mutex<Option<String>>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Writers {
    /// `n` writers, each making at most `max` creates; with
    /// `stop_on_error` a writer stops at its first failure, otherwise it
    /// pauses briefly and goes on (through a failover).
    pub fn start(
        hosts: &str,
        parent: &str,
        prefix: &str,
        n: usize,
        max: usize,
        stop_on_error: bool,
    ) -> Writers {
        let acked: std::sync::Arc<Mutex<Vec<String>>> = Default::default();
        let last_error: std::sync::Arc<Mutex<Option<String>>> = Default::default();
        let stop: std::sync::Arc<std::sync::atomic::AtomicBool> = Default::default();
        let tasks = (0..n)
            .map(|w| {
                let (hosts, acked, stop) = (hosts.to_string(), acked.clone(), stop.clone());
                let last_error = last_error.clone();
                let base = format!("{parent}/{prefix}w{w}-");
                tokio::spawn(async move {
                    let mut zk = connect(&hosts).await;
                    let opts = zookeeper_client::CreateMode::Persistent
                        .with_acls(zookeeper_client::Acls::anyone_all());
                    for i in 0..max {
                        if stop.load(std::sync::atomic::Ordering::Relaxed) {
                            return;
                        }
                        let p = format!("{base}{i}");
                        match zk.create(&p, &[7u8; 64], &opts).await {
                            Ok(_) => acked.lock().unwrap().push(p),
                            Err(e) => {
                                *last_error.lock().unwrap() = Some(e.to_string());
                                if stop_on_error {
                                    return;
                                }
                                // An expired session ends its client: an
                                // application starts a new one.
                                if e == zookeeper_client::Error::SessionExpired {
                                    if let Some(c) = try_connect(&hosts).await {
                                        zk = c;
                                    }
                                }
                                tokio::time::sleep(Duration::from_millis(10)).await
                            }
                        }
                    }
                })
            })
            .collect();
        Writers {
            acked,
            last_error,
            stop,
            tasks,
        }
    }

    /// The last error a writer saw, if any.
    pub fn last_error(&self) -> Option<String> {
        self.last_error.lock().unwrap().clone()
    }

    /// Every create acknowledged so far.
    pub fn acked(&self) -> Vec<String> {
        self.acked.lock().unwrap().clone()
    }

    pub fn count(&self) -> usize {
        self.acked.lock().unwrap().len()
    }

    /// Waits (bounded) until `more` creates beyond the current count are
    /// acknowledged.
    pub async fn wait_for_more(&self, more: usize, what: &str) {
        let target = self.count() + more;
        within(what, async {
            while self.count() < target {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
    }

    /// Tells the writers to stop and waits (bounded) for them.
    pub async fn finish(self) -> Vec<String> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.tasks {
            let _ = tokio::time::timeout(Duration::from_secs(30), t).await;
        }
        let acked = self.acked.lock().unwrap().clone();
        acked
    }
}

/// Options for a 3-member test ensemble: short ticks, so elections and
/// session expiry are quick; TTL nodes enabled on both flavors.
pub fn ensemble_options(flavor: Flavor) -> ServerOptions {
    let o = ServerOptions::default()
        .tick_time_ms(500)
        .session_timeouts_ms(1000, 20_000);
    match flavor {
        Flavor::Wazoo => o.binary(env!("CARGO_BIN_EXE_wazoo")),
        Flavor::Zookeeper => o.arg("-Dzookeeper.extendedTypesEnabled=true"),
    }
}

/// A new session over a raw socket (no client library in the way), or
/// None if the server refuses or closes it (a member still electing).
pub fn raw_session(addr: impl std::net::ToSocketAddrs) -> Option<std::net::TcpStream> {
    raw_handshake(addr, 0, &[]).map(|(s, _)| s)
}

/// A raw connection for session `session_id` (0: a new one) with its
/// password (empty: none), and the server's answer; None if the server
/// refuses or closes it. Reads wait at most 60 s.
pub fn raw_handshake(
    addr: impl std::net::ToSocketAddrs,
    session_id: i64,
    passwd: &[u8],
) -> Option<(std::net::TcpStream, wazoo_proto::ConnectResponse)> {
    let addr = addr.to_socket_addrs().ok()?.next()?;
    wazoo_testkit::raw::handshake(addr, session_id, passwd, 30_000, Duration::from_secs(60)).ok()
}

/// One length-prefixed frame's payload, or None at EOF, on an error, or
/// for a length outside 0..=4 MiB.
pub fn read_frame(s: &mut std::net::TcpStream) -> Option<Vec<u8>> {
    wazoo_testkit::raw::read_frame(s, 4 << 20).ok()
}

/// `GET /metrics` on the loopback `port`: the body of a 200 answer (a
/// panic otherwise).
pub fn get_metrics(port: u16) -> String {
    http_get(port, "/metrics")
}

/// The body of a `GET path` to 127.0.0.1:`port`, which must answer 200.
pub fn http_get(port: u16, path: &str) -> String {
    use std::io::{Read, Write};
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .unwrap_or_else(|e| panic!("connect to port {port} for {path}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    body.to_string()
}

/// Sends `req` on a raw session (see [`raw_session`]) and reads until its
/// reply (watch events before it are skipped): the reply's error code and,
/// when it is 0, its decoded body. Panics if the connection fails.
pub fn raw_call(
    s: &mut std::net::TcpStream,
    xid: i32,
    req: &wazoo_proto::Request,
) -> (i32, Option<wazoo_proto::Response>) {
    use std::io::Write;
    use wazoo_proto::jute::{Jute, Reader};
    let mut out = Vec::new();
    wazoo_proto::frame::write_request(&mut out, xid, req);
    s.write_all(&out).expect("send a raw request");
    loop {
        let p = read_frame(s).expect("a raw reply");
        let mut r = Reader::new(&p);
        let h = wazoo_proto::ReplyHeader::read(&mut r).expect("a reply header");
        if h.xid != xid {
            continue;
        }
        if h.err != 0 {
            return (h.err, None);
        }
        let body = wazoo_proto::Response::read_body(req.opcode(), &mut r).expect("a reply body");
        return (0, Some(body));
    }
}

/// Runs each request on a new raw session to `addr`; each must succeed.
pub fn raw_writes(addr: impl std::net::ToSocketAddrs, reqs: &[wazoo_proto::Request]) {
    let mut s = raw_session(addr).expect("a raw session");
    for (i, req) in reqs.iter().enumerate() {
        let (err, _) = raw_call(&mut s, i as i32 + 1, req);
        assert_eq!(err, 0, "{req:?}");
    }
}

/// The data getData answers for each path, on a new raw session to `addr`
/// (`None`: null data, which `wazoo_client` would show as empty); each
/// node's dataLength must be its data's length.
pub fn raw_data(addr: impl std::net::ToSocketAddrs, paths: &[&str]) -> Vec<Option<Vec<u8>>> {
    let mut s = raw_session(addr).expect("a raw session");
    paths
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let get = wazoo_proto::Request::GetData {
                path: p.to_string(),
                watch: false,
            };
            match raw_call(&mut s, i as i32 + 1, &get) {
                (0, Some(wazoo_proto::Response::GetData { data, stat })) => {
                    assert_eq!(stat.data_length, data.as_ref().map_or(0, Vec::len) as i32);
                    data
                }
                other => panic!("getData {p}: {other:?}"),
            }
        })
        .collect()
}

/// A create of a world-open persistent node; `data` `None` is null data.
pub fn raw_create(path: &str, data: Option<&[u8]>) -> wazoo_proto::Request {
    wazoo_proto::Request::Create(wazoo_proto::CreateRequest {
        path: path.into(),
        data: data.map(<[u8]>::to_vec),
        acl: wazoo_proto::Acl::open_unsafe(),
        flags: 0,
        ttl: None,
    })
}

/// A plugins directory holding `modules` copied from `recipes_dir` (each
/// member compiles what it loads at start), and wazoo server options using
/// it: ticks of 500 ms, session timeouts from 1 s to 30 s.
pub fn plugins_options(
    recipes_dir: &std::path::Path,
    modules: &[&str],
) -> (tempfile::TempDir, ServerOptions) {
    let dir = tempfile::tempdir().expect("temp dir");
    for m in modules {
        std::fs::copy(
            recipes_dir.join(format!("{m}.wasm")),
            dir.path().join(format!("{m}.wasm")),
        )
        .unwrap_or_else(|e| panic!("copy {m}.wasm: {e}"));
    }
    let opts = ServerOptions::default()
        .tick_time_ms(500)
        .session_timeouts_ms(1000, 30_000)
        .binary(env!("CARGO_BIN_EXE_wazoo"))
        .arg("--plugins")
        .arg(dir.path().to_string_lossy().to_string());
    (dir, opts)
}

/// Compiles `tests/c_client/<name>.c` against ZooKeeper's C client
/// (libzookeeper-mt) into `dir`: the program.
pub fn compile_c_client(dir: &std::path::Path, name: &str) -> std::path::PathBuf {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/c_client")
        .join(format!("{name}.c"));
    compile_c(dir, &src, name)
}

/// Compiles the C program `src` against ZooKeeper's C client
/// (libzookeeper-mt) into `dir/<name>`: the program.
pub fn compile_c(dir: &std::path::Path, src: &std::path::Path, name: &str) -> std::path::PathBuf {
    let bin = dir.join(name);
    let out = std::process::Command::new("cc")
        .args(["-DTHREADED", "-o"])
        .arg(&bin)
        .arg(src)
        .arg("-lzookeeper_mt")
        .output()
        .expect("a C compiler (cc)");
    assert!(
        out.status.success(),
        "compiling the C client (needs libzookeeper-mt-dev, which scripts/setup.sh installs): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    bin
}

/// Compiles `tests/java/<class>.java` against `classpath` (colon-separated)
/// into `dir`, warnings as errors. Panics if javac fails.
pub fn compile_java(dir: &std::path::Path, class: &str, classpath: &str) {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/java")
        .join(format!("{class}.java"));
    compile_java_file(dir, &src, classpath);
}

/// Compiles the Java source `src` against `classpath` (colon-separated)
/// into `dir`, warnings as errors. Panics if javac fails.
pub fn compile_java_file(dir: &std::path::Path, src: &std::path::Path, classpath: &str) {
    // `-path`: Debian's jars name absent jars in their Class-Path.
    let out = std::process::Command::new("javac")
        .args(["-Xlint:all,-path", "-Werror", "-cp", classpath, "-d"])
        .arg(dir)
        .arg(src)
        .output()
        .expect("javac runs");
    assert!(
        out.status.success(),
        "javac {}: {}",
        src.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Compiles `tests/java/<class>.java` against `classpath` into `dir` and
/// runs it with `args` (for at most 120 s): its stdout lines. Panics if
/// either step fails.
pub fn run_java(
    dir: &std::path::Path,
    class: &str,
    classpath: &[&str],
    args: &[&str],
) -> Vec<String> {
    let classpath = classpath.join(":");
    compile_java(dir, class, &classpath);
    let run_cp = format!("{}:{classpath}", dir.display());
    let out = std::process::Command::new("timeout")
        .args(["120", "java", "-cp", &run_cp, class])
        .args(args)
        .output()
        .expect("java runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{class}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout.lines().map(str::to_string).collect()
}

/// A client program's stdout, read line by line as it runs.
pub type ProgramOut = std::io::BufReader<std::process::ChildStdout>;

/// Starts `cmd` with its stdout piped and its stderr dropped: the child and
/// its stdout, and the first line of it (without the line end).
pub fn spawn_first_line(
    cmd: &mut std::process::Command,
) -> (std::process::Child, ProgramOut, String) {
    use std::io::BufRead;
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the client program starts");
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    (child, out, line.trim_end().to_string())
}

/// Kills member `leader` of `e` while a client program waits on it, waits
/// for another leader, then creates `go` so the program goes on: its
/// remaining stdout lines. Panics unless it exits 0.
pub fn kill_leader_then_go(
    e: &mut impl wazoo_testkit::TestEnsemble,
    leader: usize,
    go: &std::path::Path,
    mut child: std::process::Child,
    out: ProgramOut,
) -> Vec<String> {
    use std::io::BufRead;
    e.kill(leader);
    let new_leader = e
        .wait_for_leader(Duration::from_secs(30))
        .expect("a new leader");
    assert_ne!(new_leader, leader);
    std::fs::write(go, b"").unwrap();
    let rest: Vec<String> = out.lines().map_while(Result::ok).collect();
    let status = child.wait().unwrap();
    assert!(status.success(), "the client program said {rest:?}");
    rest
}

/// A client program's lock waiter through a leader's death
/// (tests/c_client/recipe_call.c and tests/go/client.go's `lock` print the
/// same lines): starts `cmd` (which waits for the file `go` once its
/// waiter waits), checks that a holder of `lock` and a waiting acquire
/// came first, kills member `leader` of `e` (its leader) and lets the
/// program go on; checks that the waiter then held the lock. The program's
/// remaining lines.
pub fn lock_waiter_outlives_the_leader(
    e: &mut impl wazoo_testkit::TestEnsemble,
    leader: usize,
    cmd: &mut std::process::Command,
    lock: &str,
    go: &std::path::Path,
) -> Vec<String> {
    use std::io::BufRead;
    let (child, mut out, line) = spawn_first_line(cmd);
    assert!(
        line.starts_with(&format!(r#"holder {{"done":"{lock}/"#)),
        "{line:?}"
    );
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert!(
        line.starts_with("waiting /zookeeper/calls/lock/acquire")
            && line
                .trim_end()
                .ends_with(&format!(r#"{{"waiting":"acquire:{lock}"}}"#)),
        "{line:?}"
    );
    let rest = kill_leader_then_go(e, leader, go, child, out);
    assert!(
        rest.iter()
            .any(|l| l.starts_with(&format!(r#"held {{"done":"{lock}/"#)) && l.contains("__lock__")),
        "{rest:?}"
    );
    rest
}

/// The runnable lock examples (examples/lock.rs and its Python, Java, Go
/// and C twins print the same lines), all started at once on `lock`:
/// waits for each to end and checks that it exited 0 having printed
/// `pid N: waiting for LOCK`, `pid N: acquired after S s as NODE` and
/// `pid N: released`, NODE a lock node of its own under `lock`; the lock
/// nodes' sequence numbers are the first ones, one per process (ZooKeeper
/// Recipes and Solutions, "Locks": every contender a sequential node).
pub fn lock_examples_take_turns(cmds: &mut [std::process::Command], lock: &str) {
    let children: Vec<_> = cmds
        .iter_mut()
        .map(|cmd| {
            cmd.stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| panic!("{cmd:?} starts: {e}"))
        })
        .collect();
    let mut seqs = Vec::new();
    for child in children {
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}: {stdout}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let lines: Vec<&str> = stdout.lines().collect();
        let [waiting, acquired, released] = lines[..] else {
            panic!("three lines expected: {stdout}");
        };
        let pid = waiting.split(':').next().unwrap();
        assert!(
            pid.strip_prefix("pid ")
                .is_some_and(|n| n.parse::<u32>().is_ok()),
            "{stdout}"
        );
        assert_eq!(waiting, format!("{pid}: waiting for {lock}"));
        assert!(
            acquired.starts_with(&format!("{pid}: acquired after ")),
            "{stdout}"
        );
        let node = acquired.rsplit(' ').next().unwrap();
        let seq = node
            .strip_prefix(&format!("{lock}/"))
            .and_then(|n| n.split("__lock__").nth(1))
            .unwrap_or_else(|| panic!("a lock node: {stdout}"));
        seqs.push(seq.to_string());
        assert_eq!(released, format!("{pid}: released"));
    }
    seqs.sort();
    let first: Vec<String> = (0..seqs.len()).map(|i| format!("{i:010}")).collect();
    assert_eq!(seqs, first);
}

/// Debian's jars a Curator program runs with (`libcurator-framework-java`,
/// `libcurator-recipes-java`, `zookeeper` and their dependencies).
pub const CURATOR_CLASSPATH: &[&str] = &[
    "/usr/share/java/curator-recipes.jar",
    "/usr/share/java/curator-framework.jar",
    "/usr/share/java/curator-client.jar",
    "/usr/share/java/guava.jar",
    "/usr/share/java/zookeeper.jar",
    "/usr/share/java/zookeeper-jute.jar",
    "/usr/share/java/slf4j-api.jar",
    "/usr/share/java/slf4j-nop.jar",
];

/// Asserts that a client program printed exactly `expected` (ZooKeeper
/// 3.8's lines) on `target`: the first differing line, then the count.
pub fn assert_lines<S: AsRef<str> + std::fmt::Debug>(
    target: impl std::fmt::Display,
    got: &[S],
    expected: &[&str],
) {
    for (i, (g, want)) in got.iter().zip(expected).enumerate() {
        assert_eq!(g.as_ref(), *want, "{target}: line {} of {got:#?}", i + 1);
    }
    assert_eq!(got.len(), expected.len(), "{target}: {got:#?}");
}

/// A node as a client reads it: data, ACL and Stat.
pub type Seen = (Vec<u8>, Vec<wazoo_client::Acl>, wazoo_client::Stat);

/// Asserts that `served` holds exactly the paths of `expected`, each with
/// the same data, ACL and Stat; `what` names the server in messages.
pub fn assert_same_tree(
    what: &str,
    served: &std::collections::BTreeMap<String, Seen>,
    expected: &std::collections::BTreeMap<String, Seen>,
) {
    assert_eq!(
        served.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>(),
        "{what}: the same paths"
    );
    for (p, (data, acl, stat)) in expected {
        let (d, a, s) = &served[p];
        assert!(d == data, "{what}: {p}: data differs");
        assert_eq!(a, acl, "{what}: {p}: ACL");
        assert_eq!(s, stat, "{what}: {p}: Stat");
    }
}

/// Runs the `wazoo` binary with `args` (without `WAZOO_BACKUP_AUTH` from
/// the test's environment); (success, stdout, stderr).
pub fn run_wazoo(args: &[&str]) -> (bool, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_wazoo"))
        .args(args)
        .env_remove("WAZOO_BACKUP_AUTH")
        .output()
        .expect("cannot run wazoo");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// What tests/java/CuratorPins.java prints against ZooKeeper 3.8 (paths
/// relative to its base node): host/tests/curator.rs and the mixed
/// ensembles of host/tests/zk_observer.rs.
pub const CURATOR_PINS: &[&str] = &[
    "create with parents: /fw/a/b",
    "create again: NODEEXISTS",
    "get: x version 0",
    "set stale: BADVERSION",
    "set: 1",
    "exists missing: null",
    "delete non-empty: NOTEMPTY",
    "ephemeral sequential: /fw/s-0000000001",
    "protected name: true",
    "children: [_c_...-p, a, s-0000000001]",
    "transaction with a stale check: BADVERSION",
    "nothing created: null",
    "transaction: [CREATE /fw/t 0, CHECK /fw/a/b 0, SET_DATA /fw/a/b 0]",
    "deleted with children: null",
    "first acquires: true",
    "reentrant: true",
    "participants: 1",
    "second times out: false",
    "still held after one release: true",
    "second still waits: true",
    "second acquires once released: true",
    "first holds: false",
    "lock nodes left: 0",
    "a leads: true",
    "participants: 2",
    "b leads: false",
    "leader seen by b: a",
    "b leads after a closed: true",
    "leader now: b",
    "path children cache: CHILD_ADDED /pcc/before 0",
    "path children cache: INITIALIZED 1",
    "path children cache: CHILD_ADDED /pcc/x 1",
    "path children cache: CHILD_UPDATED /pcc/x 2",
    "path children cache: CHILD_REMOVED /pcc/x 2",
    "path children cache: CHILD_REMOVED /pcc/before 0",
    "cached children: 0",
    "curator cache: created /cc root",
    "curator cache: initialized",
    "curator cache: created /cc/a 1",
    "curator cache: created /cc/a/deep 2",
    "curator cache: changed /cc/a/deep 3 was 2",
    "curator cache: deleted /cc/a/deep 3",
    "curator cache: deleted /cc/a 1",
    "cached nodes: 1",
];
