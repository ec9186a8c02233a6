//! Time: timers run on the monotonic clock, the wall clock only stamps
//! txns (ZooKeeper Programmer's Guide, "ZooKeeper Sessions"; ZooKeeper
//! Internals: the leader stamps the time into each txn).

use super::*;
use crate::recipe::RecipeWaits;
use crate::tree::DataTree;

const HOUR_MS: i64 = 3_600_000;

fn exists(h: &mut Harness, conn: u64, path: &str) -> bool {
    let r = h.call(
        conn,
        Request::Exists {
            path: path.into(),
            watch: false,
        },
    );
    match r {
        (0, _) => true,
        (e, _) if e == ErrorCode::NoNode as i32 => false,
        other => panic!("exists {path}: {other:?}"),
    }
}

fn stat_of(h: &mut Harness, conn: u64, path: &str) -> wazoo_proto::Stat {
    match ok(h.call(
        conn,
        Request::Exists {
            path: path.into(),
            watch: false,
        },
    )) {
        Response::Stat(s) => s,
        other => panic!("exists {path}: {other:?}"),
    }
}

/// Lets `ms` pass on the monotonic clock in ticks of `step_ms`, the client
/// on `conn` pinging after every tick.
fn live_for(h: &mut Harness, conn: u64, ms: i64, step_ms: i64) {
    let mut left = ms;
    while left > 0 {
        h.now += step_ms;
        left -= step_ms;
        h.step(Input::Tick);
        ok(h.call(conn, Request::Ping));
    }
}

#[test]
fn a_wall_clock_step_forward_expires_no_live_session() {
    let mut h = Harness::default();
    h.connect_with(1, 0, vec![0; 16], 4000);
    ok(h.call(1, create("/eph", b"", CreateMode::Ephemeral)));
    h.wall_step_ms = HOUR_MS;
    live_for(&mut h, 1, 12_000, 1000);
    assert_eq!(h.server.stats.sessions_expired, 0);
    assert!(
        exists(&mut h, 1, "/eph"),
        "a live session's ephemeral stays"
    );
    // Stamps follow the wall clock forward.
    ok(h.call(1, create("/later", b"", CreateMode::Persistent)));
    assert_eq!(stat_of(&mut h, 1, "/later").mtime, h.now + HOUR_MS);
}

#[test]
fn a_wall_clock_step_back_keeps_no_dead_session_alive() {
    let mut h = Harness::default();
    h.connect_with(1, 0, vec![0; 16], 4000);
    h.connect_with(2, 0, vec![0; 16], 40_000);
    ok(h.call(1, create("/eph", b"", CreateMode::Ephemeral)));
    let before = stat_of(&mut h, 2, "/eph").mtime;
    h.wall_step_ms = -HOUR_MS;
    h.step(Input::Closed { conn: 1 });
    h.now += 3000;
    ok(h.call(2, Request::Ping));
    h.step(Input::Tick);
    assert!(exists(&mut h, 2, "/eph"), "not expired before its timeout");
    live_for(&mut h, 2, 3000, 1000);
    assert_eq!(h.server.stats.sessions_expired, 1, "expired on time");
    assert!(!exists(&mut h, 2, "/eph"), "its ephemeral is gone");
    // After the step back, stamps hold at the last one instead of going back.
    ok(h.call(2, create("/after", b"", CreateMode::Persistent)));
    assert_eq!(stat_of(&mut h, 2, "/after").mtime, before);
}

#[test]
fn restored_sessions_get_a_full_timeout_from_this_process_clock() {
    // A restarted member's monotonic clock starts near zero, far below any
    // reading the previous process stored (it stores none): deadlines
    // restart from now, as ZooKeeper's do when it loads a snapshot.
    let mut h = Harness::default();
    h.now = 0;
    h.wall_step_ms = 1_700_000_000_000;
    h.server = Server::recovered(
        ServerConfig::default(),
        DataTree::new(),
        vec![wazoo_proto::SessionRecord {
            id: 0x0100_0000_0000_0007,
            timeout_ms: 4000,
            verifier: None,
        }],
        RecipeWaits::default(),
        Zxid::ZERO,
        h.clocks(),
    );
    h.connect_with(9, 0, vec![0; 16], 40_000);
    live_for(&mut h, 9, 3000, 1000);
    assert_eq!(h.server.stats.sessions_expired, 0, "a full timeout first");
    live_for(&mut h, 9, 3000, 1000);
    assert_eq!(h.server.stats.sessions_expired, 1, "then it expires");
}

// ZooKeeper Programmer's Guide, "TTL Nodes": ZooKeeper's ContainerManager
// ages a TTL node by the wall clock (now - mtime); wazoo does the same, so
// a step forward expires what ZooKeeper would expire, and the interval of
// the check runs on the monotonic clock.
#[test]
fn a_ttl_node_ages_by_the_wall_clock_as_in_zookeeper() {
    let mut h = Harness::new(ServerConfig {
        container_check_interval_ms: 1000,
        extended_types_enabled: true,
        ..ServerConfig::default()
    });
    h.connect(1);
    let ttl = |path: &str, ttl_ms: i64| {
        Request::CreateTtl(CreateRequest {
            path: path.into(),
            data: Some(vec![]),
            acl: Acl::open_unsafe(),
            flags: CreateMode::PersistentWithTtl.flags(),
            ttl: Some(ttl_ms),
        })
    };
    ok(h.call(1, ttl("/short", 10 * 60_000)));
    ok(h.call(1, ttl("/long", 2 * HOUR_MS)));
    // A step back: no TTL node ages while the wall clock is behind.
    h.wall_step_ms = -HOUR_MS;
    live_for(&mut h, 1, 20_000, 1000);
    assert!(exists(&mut h, 1, "/short"));
    // A step forward of an hour: what is older than its TTL by then goes,
    // nothing else.
    h.wall_step_ms = HOUR_MS;
    live_for(&mut h, 1, 3000, 1000);
    assert!(
        !exists(&mut h, 1, "/short"),
        "older than its TTL by the wall clock"
    );
    assert!(exists(&mut h, 1, "/long"), "younger than its TTL");
}
