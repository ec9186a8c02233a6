//! SASL DIGEST-MD5 with real clients, on Apache ZooKeeper 3.8 (the oracle)
//! and wazoo alike, given the same zoo.cfg and the same JAAS file (ZooKeeper
//! reads it through `-Djava.security.auth.login.config`, wazoo through
//! `serve --jaas`): ZooKeeper's Java client with a JAAS `Client` section
//! and kazoo with `sasl_options` authenticate, the `sasl` ACL scheme lets
//! alice in and keeps bob out, a wrong password fails, and with
//! `sessionRequireClientSASLAuth=true` an unauthenticated client's request
//! fails the way ZooKeeper fails it (ZooKeeper Administrator's Guide,
//! "Encryption, Authentication, Authorization Options"; ZooKeeper
//! Programmer's Guide, "Built-in ACL Schemes").
//!
//! The JAAS files are written at test time into a temporary directory.
//! Everything listens on loopback.

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use wazoo_testkit::{Flavor, ServerOptions};

const PROVIDER: &str = "authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider";

/// The JAAS files: the server's users, and a `Client` section per user.
struct Jaas {
    dir: tempfile::TempDir,
}

impl Jaas {
    fn new() -> Jaas {
        let dir = tempfile::Builder::new()
            .prefix("wazoo-sasl-")
            .tempdir()
            .unwrap();
        std::fs::write(
            dir.path().join("server.jaas"),
            r#"// The users ZooKeeper's server reads.
Server {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    user_alice="alice-pw"
    user_bob="bob-pw";
};
"#,
        )
        .unwrap();
        for (name, user, pw) in [("alice", "alice", "alice-pw"), ("wrong", "alice", "not-it")] {
            std::fs::write(
                dir.path().join(format!("{name}.jaas")),
                format!(
                    "Client {{\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n  username=\"{user}\"\n  password=\"{pw}\";\n}};\n"
                ),
            )
            .unwrap();
        }
        Jaas { dir }
    }

    fn server(&self) -> PathBuf {
        self.dir.path().join("server.jaas")
    }

    fn client(&self, name: &str) -> PathBuf {
        self.dir.path().join(format!("{name}.jaas"))
    }
}

/// The server options of `flavor` with the JAAS file and zoo.cfg `lines`.
fn sasl_server(flavor: Flavor, jaas: &Jaas, lines: &[&str]) -> ServerOptions {
    let opts = lines.iter().fold(common::options(flavor), |o, l| o.cfg(*l));
    match flavor {
        Flavor::Zookeeper => opts.arg(format!(
            "-Djava.security.auth.login.config={}",
            jaas.server().display()
        )),
        _ => opts.arg("--jaas").arg(jaas.server().display().to_string()),
    }
}

/// Runs ZooKeeper's Java client (`ZooKeeperMain`, what zkCli.sh runs)
/// with the JAAS `Client` file `jaas` and one command; its output.
fn zkcli(addr: SocketAddr, jaas: &Path, cmd: &[&str]) -> String {
    let out = Command::new("timeout")
        .arg("60")
        .arg("java")
        .arg("-cp")
        .arg("/usr/share/java/zookeeper.jar")
        .arg(format!(
            "-Djava.security.auth.login.config={}",
            jaas.display()
        ))
        .arg("org.apache.zookeeper.ZooKeeperMain")
        .args(["-server", &addr.to_string()])
        .args(cmd)
        .output()
        .expect("java runs");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// kazoo with pure-sasl: each scenario prints one `name: result` line.
const KAZOO_SCRIPT: &str = r#"
import sys
from kazoo.client import KazooClient
from kazoo.security import make_acl
addr, root, scenario = sys.argv[1:4]

def client(user=None, pw=None):
    kw = {}
    if user:
        kw["sasl_options"] = {"mechanism": "DIGEST-MD5", "username": user, "password": pw}
    zk = KazooClient(hosts=addr, timeout=10, connection_retry={"max_tries": 0}, **kw)
    zk.start(timeout=10)
    return zk

def attempt(name, f):
    try:
        print(name + ":", f())
    except Exception as e:
        print(name + ":", type(e).__name__)

if scenario == "acl":
    alice = client("alice", "alice-pw")
    alice.create(root, b"alice's", acl=[make_acl("sasl", "alice", all=True)])
    attempt("alice reads", lambda: alice.get(root)[0].decode())
    attempt("alice acl", lambda: alice.get_acls(root)[0][0].id.scheme + ":" + alice.get_acls(root)[0][0].id.id)
    bob = client("bob", "bob-pw")
    attempt("bob reads", lambda: bob.get(root)[0].decode())
    bob.stop()
    attempt("anonymous reads", lambda: client().get(root)[0].decode())
    attempt("wrong password", lambda: client("alice", "not-it").get("/") and "connected")
    attempt("unknown user", lambda: client("carol", "x").get("/") and "connected")
    alice.stop()
elif scenario == "elsewhere":
    alice = client("alice", "alice-pw")
    attempt("alice reads", lambda: alice.get(root)[0].decode())
    attempt("alice writes", lambda: alice.set(root, b"alice's") and "written")
    bob = client("bob", "bob-pw")
    attempt("bob reads", lambda: bob.get(root)[0].decode())
    attempt("bob writes", lambda: bob.set(root, b"bob's") and "written")
    bob.stop()
    alice.stop()
else:
    attempt("alice reads", lambda: client("alice", "alice-pw").get("/")[1].version)
    attempt("anonymous reads", lambda: client().get("/")[1].version)
"#;

fn kazoo(addr: SocketAddr, root: &str, scenario: &str) -> String {
    let out = Command::new("timeout")
        .arg("120")
        .arg("python3")
        .arg("-c")
        .arg(KAZOO_SCRIPT)
        .arg(addr.to_string())
        .arg(root)
        .arg(scenario)
        .output()
        .expect("python3 runs");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The `name: result` lines of a script's output, in order.
fn results(out: &str) -> Vec<String> {
    out.lines()
        .filter(|l| {
            ["alice", "bob", "anonymous", "wrong", "unknown"]
                .iter()
                .any(|p| l.starts_with(p))
        })
        .map(String::from)
        .collect()
}

fn digest_md5_with_real_clients(flavor: Flavor) -> Vec<String> {
    let jaas = Jaas::new();
    let server = flavor
        .start_with(sasl_server(flavor, &jaas, &[PROVIDER]))
        .unwrap_or_else(|e| panic!("{} starts: {e:#}", flavor.name()));
    let addr = server.addr();

    // ZooKeeper's Java client, with the JAAS `Client` section.
    let created = zkcli(
        addr,
        &jaas.client("alice"),
        &["create", "/zkcli", "from-zkcli", "sasl:alice:cdrwa"],
    );
    assert!(created.contains("Created /zkcli"), "{flavor:?}: {created}");
    let read = zkcli(addr, &jaas.client("alice"), &["get", "/zkcli"]);
    assert!(read.contains("from-zkcli"), "{flavor:?}: {read}");
    let wrong = zkcli(addr, &jaas.client("wrong"), &["get", "/zkcli"]);
    // The client reports AuthFailed (it reads the failed step's reply, a
    // null token, before the server closes) and the node is never read.
    assert!(!wrong.contains("from-zkcli"), "{flavor:?}: {wrong}");
    assert!(wrong.contains("AuthFailed"), "{flavor:?}: {wrong}");

    let out = kazoo(addr, "/kazoo", "acl");
    let lines = results(&out);
    for line in [
        "alice reads: alice's",
        "alice acl: sasl:alice",
        "bob reads: NoAuthError",
        "anonymous reads: NoAuthError",
    ] {
        assert!(
            lines.iter().any(|l| l == line),
            "{flavor:?}: {line:?} in {out}"
        );
    }
    lines
}

fn enforced_sasl_with_kazoo(flavor: Flavor) -> Vec<String> {
    let jaas = Jaas::new();
    let server = flavor
        .start_with(sasl_server(
            flavor,
            &jaas,
            &[PROVIDER, "sessionRequireClientSASLAuth=true"],
        ))
        .unwrap_or_else(|e| panic!("{} starts: {e:#}", flavor.name()));
    let out = kazoo(server.addr(), "/", "enforce");
    let lines = results(&out);
    assert!(
        lines.iter().any(|l| l == "alice reads: 0"),
        "{flavor:?}: {out}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("anonymous reads:") && l != "anonymous reads: 0"),
        "{flavor:?}: {out}"
    );
    lines
}

// ZooKeeper Administrator's Guide, "Encryption, Authentication,
// Authorization Options" (SASL with DIGEST-MD5 and a JAAS file) and
// ZooKeeper Programmer's Guide, "Built-in ACL Schemes" (sasl). The same
// scenarios give the same results on both servers.
#[test]
fn digest_md5_authenticates_real_clients_on_zookeeper_and_wazoo_alike() {
    let zk = digest_md5_with_real_clients(Flavor::Zookeeper);
    let wazoo = digest_md5_with_real_clients(Flavor::Wazoo);
    assert_eq!(wazoo, zk);
}

// ZooKeeper Administrator's Guide, "Encryption, Authentication,
// Authorization Options" (sessionRequireClientSASLAuth).
#[test]
fn enforced_sasl_fails_unauthenticated_requests_on_zookeeper_and_wazoo_alike() {
    let zk = enforced_sasl_with_kazoo(Flavor::Zookeeper);
    let wazoo = enforced_sasl_with_kazoo(Flavor::Wazoo);
    assert_eq!(wazoo, zk);
}

/// A 3-member ensemble with SASL on every member: alice authenticates on
/// one member and creates a node only she may use; on each other member
/// (a follower forwards writes with the session's identities) alice reads
/// and writes it, bob is refused both, and ZooKeeper's Java client with a
/// wrong password is told AuthFailed.
fn digest_md5_on_an_ensemble(flavor: Flavor) -> Vec<String> {
    let jaas = Jaas::new();
    let e = wazoo_testkit::start_ensemble(flavor, 3, sasl_server(flavor, &jaas, &[PROVIDER]))
        .unwrap_or_else(|err| panic!("{} ensemble starts: {err:#}", flavor.name()));
    let created = kazoo(e.addr(0), "/ens", "acl");
    assert!(
        results(&created)
            .iter()
            .any(|l| l == "alice reads: alice's"),
        "{flavor:?}: {created}"
    );
    let mut lines = results(&created);
    for i in 1..3 {
        let out = kazoo(e.addr(i), "/ens", "elsewhere");
        let got = results(&out);
        for line in [
            "alice reads: alice's",
            "alice writes: written",
            "bob reads: NoAuthError",
            "bob writes: NoAuthError",
        ] {
            assert!(
                got.iter().any(|l| l == line),
                "{flavor:?} member {i}: {line:?} in {out}"
            );
        }
        lines.extend(got);
    }
    let wrong = zkcli(e.addr(2), &jaas.client("wrong"), &["get", "/ens"]);
    assert!(wrong.contains("AuthFailed"), "{flavor:?}: {wrong}");
    lines
}

// ZooKeeper Administrator's Guide, "Encryption, Authentication,
// Authorization Options" (SASL, every server of the ensemble reading the
// same JAAS users) and ZooKeeper Programmer's Guide, "Built-in ACL Schemes".
#[test]
fn digest_md5_works_on_every_member_of_an_ensemble_on_zookeeper_and_wazoo_alike() {
    let zk = digest_md5_on_an_ensemble(Flavor::Zookeeper);
    let wazoo = digest_md5_on_an_ensemble(Flavor::Wazoo);
    assert_eq!(wazoo, zk);
}
