//! ZooKeeper's C client (libzookeeper-mt, Debian's `libzookeeper-mt-dev`)
//! keeps its session when the member it is connected to dies: it moves to
//! another member and its next writes succeed (ZooKeeper Programmer's
//! Guide, "ZooKeeper Sessions": the client reconnects to another server in
//! its list with the same session). Run against Apache ZooKeeper's
//! ensemble and wazoo's; the C program is compiled at test time.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use wazoo_testkit::{start_ensemble, Flavor, ServerOptions};

fn options(flavor: Flavor) -> ServerOptions {
    let o = ServerOptions::default()
        .tick_time_ms(500)
        .session_timeouts_ms(1000, 30_000);
    match flavor {
        Flavor::Wazoo => o.binary(env!("CARGO_BIN_EXE_wazoo")),
        Flavor::Zookeeper => o,
    }
}

fn the_session_survives_the_death_of_its_member(flavor: Flavor, kill_leader: bool) {
    let dir = tempfile::tempdir().unwrap();
    let bin = common::compile_c_client(dir.path(), "failover");
    let mut e = start_ensemble(flavor, 3, options(flavor))
        .unwrap_or_else(|err| panic!("cannot start a {flavor} ensemble: {err:#}"));
    let leader = e
        .wait_for_leader(Duration::from_secs(30))
        .expect("a leader");
    let victim = if kill_leader {
        leader
    } else {
        (leader + 1) % 3
    };
    let hosts: Vec<String> = (0..3).map(|i| e.addr(i).to_string()).collect();
    let go = dir.path().join("go");
    // The C client picks a member of its list at random: start it until
    // it is on the member the test kills.
    let (mut child, out) = (0..40)
        .find_map(|_| {
            let mut child = Command::new(&bin)
                .arg(hosts.join(","))
                .arg(&go)
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let mut out = BufReader::new(child.stdout.take().unwrap());
            let mut line = String::new();
            out.read_line(&mut line).unwrap();
            if line.trim() == format!("connected {}", hosts[victim]) {
                return Some((child, out));
            }
            assert!(
                line.starts_with("connected "),
                "{flavor}: the C client said {line:?}"
            );
            let _ = child.kill();
            let _ = child.wait();
            None
        })
        .unwrap_or_else(|| panic!("{flavor}: the C client never picked member {victim}"));
    e.kill(victim);
    std::fs::write(&go, b"").unwrap();
    let rest: Vec<String> = out.lines().map_while(Result::ok).collect();
    let status = child.wait().unwrap();
    assert!(
        status.success(),
        "{flavor}: after member {victim} died the C client said {rest:?}"
    );
    assert_eq!(
        rest.iter().filter(|l| *l == "create after: ok").count(),
        3,
        "{flavor}: {rest:?}"
    );
}

// One test, the cases in turn: four ensembles at once (the test harness
// runs tests in parallel) starve a small machine.
#[test]
fn a_c_client_session_moves_off_a_dead_follower_or_leader_and_writes_on() {
    for flavor in [Flavor::Zookeeper, Flavor::Wazoo] {
        the_session_survives_the_death_of_its_member(flavor, false);
        the_session_survives_the_death_of_its_member(flavor, true);
    }
}
