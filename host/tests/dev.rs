//! `wazoo dev`, the playground the README starts with: three members, the
//! built-in recipes (not the SDK's test modules), a super user whose
//! password it prints and which may deploy, Prometheus metrics, `--set`
//! keys on every member, and the path of the binary for `wazoo cli`.

mod common;
#[path = "../../runtime/tests/plugin_support/mod.rs"]
mod plugin_support;

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use plugin_support::good_module;
use wazoo_client::{Client, ClientOptions, Error};

/// Ports a dev ensemble takes from `base`: clients, quorum, election,
/// metrics and the AdminServer, three each.
const PORTS: u16 = 15;

/// A base port whose fifteen ports were all free a moment ago.
fn free_port_block() -> u16 {
    let seed = std::process::id() as u64
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos() as u64;
    for i in 0..200u64 {
        let base =
            20_000 + ((seed.wrapping_mul(2_654_435_761).wrapping_add(i * 7919)) % 30_000) as u16;
        let free = (base..base + PORTS).all(|p| TcpListener::bind(("127.0.0.1", p)).is_ok());
        if free {
            return base;
        }
    }
    panic!("no block of {PORTS} free ports found");
}

/// The running `wazoo dev`; killed if the test ends without stopping it.
struct Dev {
    child: Child,
    lines: mpsc::Receiver<String>,
    stderr: std::path::PathBuf,
}

impl Drop for Dev {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Dev {
    fn start(data: &Path, args: &[String]) -> Dev {
        let stderr = data.with_extension("stderr");
        let mut child = Command::new(env!("CARGO_BIN_EXE_wazoo"))
            .arg("dev")
            .arg("--data-dir")
            .arg(data)
            .args(args)
            .env("WAZOO_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .expect("start wazoo dev");
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Dev {
            child,
            lines,
            stderr,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// The lines printed up to and including the one starting with `last`.
    fn banner(&self, last: &str, timeout: Duration) -> Vec<String> {
        let deadline = Instant::now() + timeout;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => {
                    let done = l.starts_with(last);
                    seen.push(l);
                    if done {
                        return seen;
                    }
                }
                Err(_) => panic!(
                    "no {last:?} line after {timeout:?}; printed {seen:?}; log:\n{}",
                    self.log()
                ),
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_is_a_playground_with_a_super_user_metrics_set_keys_and_the_binarys_path() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("dev-data");
    let base = free_port_block();
    let p = |i: u16| base + i;
    let args: Vec<String> = [
        format!("--set=clientPort={}", p(0)),
        format!("--quorum-port={}", p(3)),
        format!("--election-port={}", p(6)),
        format!("--set=metricsProvider.httpPort={}", p(9)),
        format!("--set=admin.serverPort={}", p(12)),
        "--set=maxClientCnxns=50".into(),
    ]
    .into();
    let dev = Dev::start(&data, &args);
    // A debug build starting three members on a busy machine.
    let banner = dev.banner("wazoo cli:", Duration::from_secs(120));
    let text = banner.join("\n");

    // The binary's path, so the README's `wazoo cli` lines work as printed.
    let servers = format!("127.0.0.1:{},127.0.0.1:{},127.0.0.1:{}", p(0), p(1), p(2));
    let exe = Path::new(env!("CARGO_BIN_EXE_wazoo"))
        .canonicalize()
        .unwrap();
    let cli_line = format!("wazoo cli: {} cli --server {servers}", exe.display());
    assert!(banner.contains(&cli_line), "{text}");
    assert!(
        text.contains(&format!("3 members serving on {servers}")),
        "{text}"
    );

    // The super user's password, printed and kept for the next run.
    let pw_line = banner
        .iter()
        .find(|l| l.starts_with("super user: super, password "))
        .unwrap_or_else(|| panic!("no super user line: {text}"));
    let pw = pw_line["super user: super, password ".len()..]
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    assert_eq!(
        std::fs::read_to_string(data.join("super-password"))
            .unwrap()
            .trim(),
        pw
    );
    assert!(
        pw_line.contains(&format!("addauth digest super:{pw}")),
        "{pw_line}"
    );

    // The built-in recipes, without the SDK's test modules.
    let plugins: Vec<String> = std::fs::read_dir(data.join("plugins"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !plugins
            .iter()
            .any(|f| f == "echo.wasm" || f == "counter.wasm"),
        "{plugins:?}"
    );
    if !wazoo::builtin::BUILTIN_RECIPES.is_empty() {
        assert!(plugins.iter().any(|f| f == "lock.wasm"), "{plugins:?}");
        assert!(
            text.contains(&format!("recipes: {} built-in modules", plugins.len())),
            "{text}"
        );
    }

    // `--set` reached every member; each serves its metrics.
    for i in 0..3 {
        let conf =
            wazoo_testkit::four_letter_word(SocketAddr::from(([127, 0, 0, 1], p(i))), "conf")
                .unwrap();
        assert!(
            conf.contains("maxClientCnxns=50"),
            "member {}: {conf}",
            i + 1
        );
        let url = format!("http://127.0.0.1:{}/metrics", p(9 + i));
        assert!(text.contains(&url), "{text}");
        let body = common::get_metrics(p(9 + i));
        assert!(body.contains("znode_count"), "{url}: {body}");
        // The AdminServer, on as in ZooKeeper, on the member's port.
        let url = format!("http://127.0.0.1:{}/commands", p(12 + i));
        assert!(text.contains(&url), "{text}");
        let body = common::http_get(p(12 + i), "/commands/ruok");
        assert!(body.contains("ruok"), "{url}/ruok: {body}");
    }

    // Deploying needs ADMIN on /zookeeper/recipes: refused to anyone, allowed
    // to the super user with the printed password.
    let module = good_module("devplay", "1.0.0", "hi");
    let (anyone, _) = Client::connect(
        &servers,
        ClientOptions::new().session_timeout(Duration::from_secs(20)),
    )
    .await
    .unwrap();
    assert!(matches!(anyone.deploy(&module).await, Err(Error::NoAuth)));
    let (admin, _) = Client::connect(
        &servers,
        ClientOptions::new()
            .session_timeout(Duration::from_secs(20))
            .auth("digest", format!("super:{pw}").as_bytes()),
    )
    .await
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(180);
    let deployed = loop {
        match admin.deploy(&module).await {
            Ok(d) => break d,
            Err(Error::NoAuth) => panic!("the super user was refused: {}", dev.log()),
            // The built-ins are still being validated, or the members elect.
            Err(e) if Instant::now() < deadline => {
                eprintln!("deploy: {e}; again");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => panic!("deploy: {e}; log:\n{}", dev.log()),
        }
    };
    assert_eq!(deployed.name, "devplay");
    let _ = anyone.close().await;
    let _ = admin.close().await;

    // A signal stops the playground cleanly.
    let mut dev = dev;
    let pid = dev.child.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = dev.child.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "wazoo dev did not stop on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(status.success(), "{status}: {}", dev.log());
}

#[test]
fn dev_refuses_a_set_key_that_would_split_the_ensemble() {
    let out = Command::new(env!("CARGO_BIN_EXE_wazoo"))
        .args(["dev", "--set", "dataDir=/tmp/x"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--data-dir"), "{err}");
}

#[test]
fn the_sdks_test_modules_are_not_built_in() {
    let names: Vec<&str> = wazoo::builtin::BUILTIN_RECIPES
        .iter()
        .map(|(n, _)| *n)
        .collect();
    assert!(
        !names.contains(&"echo.wasm") && !names.contains(&"counter.wasm"),
        "{names:?}"
    );
}
