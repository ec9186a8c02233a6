//! The built-in recipes (recipes-wasm/: lock, rwlock, semaphore, queue,
//! double_barrier, twophase, election, group) served by a LIVE wazoo, driven
//! through the client's typed handles (`wazoo_client::recipes`), one
//! session per simulated process (issue 6, "How it is tested"): contention,
//! session expiry of holders and waiters, a leader killed while callers
//! wait. Sessions are made to expire by blackholing their connection with
//! the testkit's Proxy (no byte passes, the server's session timer runs).
//! Every test is bounded by tokio timeouts; loopback only, free ports.

// Shared with the runtime's own tests, which it mostly serves.
#[path = "../../runtime/tests/plugin_support/mod.rs"]
mod plugin_support;

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use plugin_support::recipes_dir;
use wazoo_client::recipes::{
    DoubleBarrier, Election, Group, Lock, PriorityQueue, Queue, ReadWriteLock, RecipeError,
    Semaphore, TwoPhaseCommit, TwoPhaseSite, TxOutcome,
};
use wazoo_client::{Acl, Client, ClientOptions, CreateMode};
use wazoo_testkit::{Proxy, ServerOptions, TestEnsemble, WazooEnsemble, WazooServer};

/// A plugins directory holding only `modules` (each member compiles what it
/// loads at start), and server options using it. Ticks of 500 ms and a
/// 1 s minimum session timeout, so a blackholed session expires in ~2 s.
fn options(modules: &[&str]) -> (tempfile::TempDir, ServerOptions) {
    let dir = tempfile::tempdir().expect("temp dir");
    for m in modules {
        std::fs::copy(
            recipes_dir().join(format!("{m}.wasm")),
            dir.path().join(format!("{m}.wasm")),
        )
        .unwrap_or_else(|e| panic!("copy {m}.wasm: {e}"));
    }
    let opts = ServerOptions::default()
        .binary(env!("CARGO_BIN_EXE_wazoo"))
        .tick_time_ms(500)
        .session_timeouts_ms(1000, 30_000)
        .arg("--plugins")
        .arg(dir.path().to_string_lossy().to_string());
    (dir, opts)
}

struct Served {
    server: WazooServer,
    _plugins: tempfile::TempDir,
}

impl Served {
    fn start(modules: &[&str]) -> Served {
        let (plugins, opts) = options(modules);
        let server = WazooServer::start(opts).expect("start wazoo with --plugins");
        Served {
            server,
            _plugins: plugins,
        }
    }
    fn hosts(&self) -> String {
        self.server.addr().to_string()
    }
}

async fn connect(hosts: &str) -> Client {
    let opts = ClientOptions::default().session_timeout(Duration::from_secs(10));
    Client::connect(hosts, opts).await.expect("connect").0
}

/// A client whose session can be killed: it goes through a proxy, with a
/// 1.5 s session timeout; `proxy.blackhole()` makes the session expire.
async fn mortal(server: &Served) -> (Proxy, Client) {
    let proxy = Proxy::start(server.server.addr()).expect("proxy");
    let opts = ClientOptions::default()
        .session_timeout(Duration::from_millis(1500))
        .reconnect_delay(Duration::from_millis(50), Duration::from_millis(300));
    let c = Client::connect(&proxy.connect_string(), opts)
        .await
        .expect("connect through the proxy")
        .0;
    (proxy, c)
}

/// Runs `f`, failing the test if it takes longer than `d`.
async fn within<F: Future>(what: &str, d: Duration, f: F) -> F::Output {
    match tokio::time::timeout(d, f).await {
        Ok(v) => v,
        Err(_) => panic!("{what}: not done within {d:?}"),
    }
}

/// Polls until `path` has `n` children (a missing node counts as none).
async fn wait_children(c: &Client, path: &str, n: usize) {
    let mut last = 0;
    for _ in 0..300 {
        last = c.get_children(path).await.map(|k| k.len()).unwrap_or(0);
        if last == n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{path}: expected {n} children, still {last} after 15 s");
}

/// The server's count of registered recipe waits (`/zookeeper/recipes`).
async fn pending_waits(c: &Client) -> usize {
    let (data, _) = c
        .get_data("/zookeeper/recipes")
        .await
        .expect("recipes node");
    let text = String::from_utf8_lossy(&data).to_string();
    text.lines()
        .find_map(|l| l.strip_prefix("pending_waits="))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no pending_waits in {text:?}"))
}

async fn wait_pending(c: &Client, n: usize) {
    let mut last = 0;
    for _ in 0..300 {
        last = pending_waits(c).await;
        if last == n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("expected {n} pending recipe waits, still {last} after 15 s");
}

/// Whether a spawned call is still waiting after `d`.
async fn still_waiting<T>(h: &tokio::task::JoinHandle<T>, d: Duration) -> bool {
    tokio::time::sleep(d).await;
    !h.is_finished()
}

// ---- lock ----------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_contention_8_clients_x_10_rounds_keep_a_plain_counter_exact() {
    let s = Served::start(&["lock"]);
    let hosts = s.hosts();
    let setup = connect(&hosts).await;
    setup
        .create(
            "/counter",
            b"0",
            &Acl::open_unsafe(),
            CreateMode::Persistent,
        )
        .await
        .expect("counter node");
    let held = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for i in 0..8 {
        let c = connect(&hosts).await;
        let held = held.clone();
        tasks.push(tokio::spawn(async move {
            let lock = Lock::new(&c, "/locks/contended").with_id(format!("c{i}").as_bytes());
            for _ in 0..10 {
                lock.acquire().await.expect("acquire");
                assert!(
                    !held.swap(true, Ordering::SeqCst),
                    "two holders at once (client {i})"
                );
                // Read-modify-write with no version check: only the lock
                // keeps it exact.
                let (data, _) = c.get_data("/counter").await.expect("get");
                let n: u64 = String::from_utf8(data).unwrap().parse().unwrap();
                tokio::task::yield_now().await;
                c.set_data("/counter", (n + 1).to_string().as_bytes(), None)
                    .await
                    .expect("set");
                held.store(false, Ordering::SeqCst);
                assert!(lock.release().await.expect("release"));
            }
            c.close().await.ok();
        }));
    }
    within("80 lock rounds", Duration::from_secs(40), async {
        for t in tasks {
            t.await.expect("client task");
        }
    })
    .await;
    let (data, _) = setup.get_data("/counter").await.unwrap();
    assert_eq!(String::from_utf8(data).unwrap(), "80");
    assert!(setup
        .get_children("/locks/contended")
        .await
        .unwrap()
        .is_empty());
    assert_eq!(pending_waits(&setup).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_holder_expiry_hands_over_and_waiter_expiry_leaves_no_orphan() {
    let s = Served::start(&["lock"]);
    let hosts = s.hosts();
    let observer = connect(&hosts).await;

    // A holder whose session expires: the next waiter acquires.
    let (proxy, holder) = mortal(&s).await;
    let held = Lock::new(&holder, "/locks/e").acquire().await.unwrap();
    let waiter = connect(&hosts).await;
    let w = waiter.clone();
    let waiting = tokio::spawn(async move { Lock::new(&w, "/locks/e").acquire().await });
    wait_children(&observer, "/locks/e", 2).await;
    wait_pending(&observer, 1).await;
    assert!(still_waiting(&waiting, Duration::from_millis(300)).await);
    proxy.blackhole();
    let got = within(
        "waiter acquires after the holder expires",
        Duration::from_secs(15),
        waiting,
    )
    .await
    .unwrap()
    .expect("acquire");
    assert_ne!(got, held);
    assert!(observer.exists(&held).await.unwrap().is_none());
    assert_eq!(
        Lock::new(&observer, "/locks/e").holder().await.unwrap(),
        Some(got.clone())
    );
    drop(holder);

    // A waiter whose session expires: its node and its wait go away; the
    // holder's release then leaves the lock free for anyone.
    let (proxy2, doomed) = mortal(&s).await;
    let d = doomed.clone();
    let doomed_wait = tokio::spawn(async move { Lock::new(&d, "/locks/e").acquire().await });
    wait_children(&observer, "/locks/e", 2).await;
    wait_pending(&observer, 1).await;
    proxy2.blackhole();
    wait_children(&observer, "/locks/e", 1).await;
    wait_pending(&observer, 0).await;
    // A blackholed client cannot hear that its session expired; once the
    // network heals, its reconnection is refused and the waiting call ends.
    proxy2.restore();
    let err = within(
        "the expired waiter's call ends",
        Duration::from_secs(15),
        doomed_wait,
    )
    .await
    .unwrap()
    .expect_err("an expired waiter does not acquire");
    assert!(matches!(err, RecipeError::Ended { .. }), "{err:?}");
    assert!(Lock::new(&waiter, "/locks/e").release().await.unwrap());
    assert!(observer.get_children("/locks/e").await.unwrap().is_empty());
    let third = connect(&hosts).await;
    within(
        "a fresh acquire on the free lock",
        Duration::from_secs(5),
        Lock::new(&third, "/locks/e").acquire(),
    )
    .await
    .unwrap();
    assert_eq!(pending_waits(&observer).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_waiter_acquires_after_the_leader_is_killed() {
    let (_plugins, opts) = options(&["lock"]);
    // Ensemble timing: default ticks (2 s), as the other ensemble tests.
    let mut opts = opts.tick_time_ms(2000);
    opts.min_session_timeout_ms = None;
    opts.max_session_timeout_ms = None;
    let mut ens = WazooEnsemble::start(3, opts).expect("start a 3-member ensemble");
    let leader = ens
        .wait_for_leader(Duration::from_secs(30))
        .expect("a leader");
    let followers: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    let holder = connect(&ens.addr(followers[1]).to_string()).await;
    let waiter = connect(&ens.addr(followers[0]).to_string()).await;
    let probe = connect(&ens.addr(followers[1]).to_string()).await;

    let lock = Lock::new(&holder, "/locks/f");
    let held = lock.acquire().await.expect("holder acquires");
    let w = waiter.clone();
    let waiting = tokio::spawn(async move { Lock::new(&w, "/locks/f").acquire().await });
    wait_children(&probe, "/locks/f", 2).await;
    wait_pending(&probe, 1).await;
    assert!(still_waiting(&waiting, Duration::from_millis(300)).await);

    ens.kill(leader);
    // The holder releases once the survivors have a leader again.
    within("release after failover", Duration::from_secs(30), async {
        loop {
            match lock.release().await {
                Ok(_) => break,
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    })
    .await;
    let got = within(
        "the waiter acquires after failover",
        Duration::from_secs(30),
        waiting,
    )
    .await
    .unwrap()
    .expect("acquire");
    assert_ne!(got, held);
    let probe = connect(&ens.addr(followers[1]).to_string()).await;
    assert!(probe.exists(&held).await.unwrap().is_none());
    assert_eq!(
        Lock::new(&probe, "/locks/f").holder().await.unwrap(),
        Some(got)
    );
}

// ---- queue ---------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_4_producers_4_consumers_every_item_taken_exactly_once() {
    let s = Served::start(&["queue"]);
    let hosts = s.hosts();
    let claimed = Arc::new(AtomicUsize::new(0));
    let taken = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut tasks = Vec::new();
    // Consumers first, so some wait on an empty queue.
    for _ in 0..4 {
        let c = connect(&hosts).await;
        let claimed = claimed.clone();
        let taken = taken.clone();
        tasks.push(tokio::spawn(async move {
            let q = Queue::new(&c, "/queues/work");
            // Take until 100 takes have been started in total (a take
            // waiting on an empty queue cannot be cancelled server-side).
            while claimed.fetch_add(1, Ordering::SeqCst) < 100 {
                let item = q.take().await.expect("take");
                taken.lock().unwrap().push(String::from_utf8(item).unwrap());
            }
        }));
    }
    for p in 0..4 {
        let c = connect(&hosts).await;
        tasks.push(tokio::spawn(async move {
            let q = Queue::new(&c, "/queues/work");
            for i in 0..25 {
                q.put(format!("p{p}-{i:02}").as_bytes()).await.expect("put");
            }
        }));
    }
    within("100 puts and takes", Duration::from_secs(40), async {
        for t in tasks {
            t.await.expect("task");
        }
    })
    .await;
    let mut got = taken.lock().unwrap().clone();
    got.sort();
    let mut want: Vec<String> = (0..4)
        .flat_map(|p| (0..25).map(move |i| format!("p{p}-{i:02}")))
        .collect();
    want.sort();
    assert_eq!(got.len(), 100, "items taken");
    assert_eq!(got, want, "every item exactly once");
    let c = connect(&hosts).await;
    assert_eq!(Queue::new(&c, "/queues/work").len().await.unwrap(), 0);
    assert_eq!(pending_waits(&c).await, 0);

    // Priority order: lower priority first, FIFO within a priority.
    let pq = PriorityQueue::new(&c, "/queues/prio");
    for (data, prio) in [
        ("e", 500u16),
        ("b", 3),
        ("g", 999),
        ("c", 3),
        ("d", 100),
        ("a", 0),
        ("f", 500),
    ] {
        pq.put(data.as_bytes(), prio).await.unwrap();
    }
    let mut order = String::new();
    for _ in 0..7 {
        order.push_str(&String::from_utf8(pq.take().await.unwrap()).unwrap());
    }
    assert_eq!(order, "abcdefg");
    assert!(pq.is_empty().await.unwrap());
}

// ---- two-phase commit ----------------------------------------------------

fn sites() -> Vec<String> {
    vec!["a".into(), "b".into(), "c".into()]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twophase_commit_abort_vote_and_a_dead_site() {
    let s = Served::start(&["twophase"]);
    let hosts = s.hosts();
    let coord_c = connect(&hosts).await;
    let mut site_clients = Vec::new();
    for _ in 0..3 {
        site_clients.push(connect(&hosts).await);
    }

    // 1. Every site commits: commit, for the coordinator and every site.
    let coord = TwoPhaseCommit::new(&coord_c, "/tx/t1");
    coord.begin(&sites(), b"payload-1").await.unwrap();
    let mut votes = Vec::new();
    for (c, name) in site_clients.iter().zip(sites()) {
        let site = TwoPhaseSite::new(c, "/tx/t1", &name);
        votes.push(tokio::spawn(async move {
            assert_eq!(site.join().await.unwrap(), b"payload-1");
            site.vote(true).await.unwrap();
            site.decision().await.unwrap()
        }));
    }
    let outcome = within("t1 decision", Duration::from_secs(15), coord.decision())
        .await
        .unwrap();
    assert_eq!(outcome, TxOutcome::Commit);
    for v in votes {
        let o = within("a site's decision", Duration::from_secs(15), v)
            .await
            .unwrap();
        assert_eq!(o, TxOutcome::Commit);
    }

    // 2. One site votes abort: decided at once, for everyone waiting.
    let coord = TwoPhaseCommit::new(&coord_c, "/tx/t2");
    coord.begin(&sites(), b"payload-2").await.unwrap();
    let site = |i: usize| TwoPhaseSite::new(&site_clients[i], "/tx/t2", &sites()[i]);
    for i in 0..3 {
        site(i).join().await.unwrap();
    }
    assert_eq!(site(0).vote(true).await.unwrap(), None);
    let mut waits = Vec::new();
    for i in [0, 2] {
        let s = site(i);
        waits.push(tokio::spawn(async move { s.decision().await }));
    }
    let c2 = coord.clone();
    waits.push(tokio::spawn(async move { c2.decision().await }));
    wait_pending(&coord_c, 3).await;
    assert_eq!(
        site(1).vote(false).await.unwrap(),
        Some(TxOutcome::Abort),
        "an abort vote decides at once"
    );
    for w in waits {
        let o = within("abort reaches every waiter", Duration::from_secs(5), w)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(o, TxOutcome::Abort);
    }
    // Site c never voted; its vote now changes nothing.
    let (d, _) = coord_c.get_data("/tx/t2/_decision").await.unwrap();
    assert_eq!(d, b"abort");

    // 3. A site's session dies before voting: abort.
    let coord = TwoPhaseCommit::new(&coord_c, "/tx/t3");
    coord.begin(&sites(), b"payload-3").await.unwrap();
    let (proxy, dying) = mortal(&s).await;
    let sa = TwoPhaseSite::new(&site_clients[0], "/tx/t3", "a");
    let sb = TwoPhaseSite::new(&site_clients[1], "/tx/t3", "b");
    let sc = TwoPhaseSite::new(&dying, "/tx/t3", "c");
    for st in [&sa, &sb, &sc] {
        st.join().await.unwrap();
    }
    assert_eq!(sa.vote(true).await.unwrap(), None);
    assert_eq!(sb.vote(true).await.unwrap(), None);
    let c3 = coord.clone();
    let deciding = tokio::spawn(async move { c3.decision().await });
    let sa2 = sa.clone();
    let a_waits = tokio::spawn(async move { sa2.decision().await });
    assert!(still_waiting(&deciding, Duration::from_millis(300)).await);
    proxy.blackhole();
    let o = within(
        "abort after the site's session expires",
        Duration::from_secs(15),
        deciding,
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(o, TxOutcome::Abort);
    let o = within("site a learns abort", Duration::from_secs(5), a_waits)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(o, TxOutcome::Abort);
}

// ---- double barrier ------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn double_barrier_enter_and_leave_wait_for_all_and_a_dead_member_does_not_block() {
    let s = Served::start(&["double_barrier"]);
    let hosts = s.hosts();
    let entering = Arc::new(AtomicUsize::new(0));
    let leaving = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..3u64 {
        let c = connect(&hosts).await;
        let (entering, leaving) = (entering.clone(), leaving.clone());
        tasks.push(tokio::spawn(async move {
            let b = DoubleBarrier::new(&c, "/barriers/d", &format!("m{i}"), 3);
            // Staggered arrivals: the early ones must wait.
            tokio::time::sleep(Duration::from_millis(300 * i)).await;
            entering.fetch_add(1, Ordering::SeqCst);
            b.enter().await.expect("enter");
            assert_eq!(
                entering.load(Ordering::SeqCst),
                3,
                "m{i} entered before all 3 did"
            );
            // Staggered departures, in another order.
            tokio::time::sleep(Duration::from_millis(300 * (2 - i))).await;
            leaving.fetch_add(1, Ordering::SeqCst);
            b.leave().await.expect("leave");
            assert_eq!(
                leaving.load(Ordering::SeqCst),
                3,
                "m{i} left before all 3 did"
            );
        }));
    }
    within("enter and leave", Duration::from_secs(20), async {
        for t in tasks {
            t.await.expect("member");
        }
    })
    .await;
    let c = connect(&hosts).await;
    assert!(c.get_children("/barriers/d").await.unwrap().is_empty());

    // A member dies inside: the others still leave.
    let (proxy, dying) = mortal(&s).await;
    let others = [connect(&hosts).await, connect(&hosts).await];
    // (The dying client stays alive in this scope: dropping it would close
    // its session at once instead of letting it expire.)
    let zb = DoubleBarrier::new(&dying, "/barriers/x", "z", 3);
    let mut enters = vec![tokio::spawn(async move { zb.enter().await })];
    for (i, o) in others.iter().enumerate() {
        let b = DoubleBarrier::new(o, "/barriers/x", &format!("m{i}"), 3);
        enters.push(tokio::spawn(async move { b.enter().await }));
    }
    within("3 enter", Duration::from_secs(10), async {
        for e in enters {
            e.await.unwrap().expect("enter");
        }
    })
    .await;
    proxy.blackhole();
    let mut leaves = Vec::new();
    for (i, o) in others.iter().enumerate() {
        let b = DoubleBarrier::new(o, "/barriers/x", &format!("m{i}"), 3);
        leaves.push(tokio::spawn(async move { b.leave().await }));
    }
    within(
        "the survivors leave once the dead member's session expires",
        Duration::from_secs(15),
        async {
            for l in leaves {
                l.await.unwrap().expect("leave");
            }
        },
    )
    .await;
    assert!(c.get_children("/barriers/x").await.unwrap().is_empty());
    drop(dying);

    // A member closes its session right as the others leave: the close and
    // their leave steps race in the pipeline, and they still leave (the
    // close's deletes are in the view the steps read).
    for round in 0..3 {
        let path = format!("/barriers/q{round}");
        let quitter = connect(&hosts).await;
        let mut enters = Vec::new();
        let qb = DoubleBarrier::new(&quitter, &path, "q", 3);
        enters.push(tokio::spawn(async move { qb.enter().await }));
        for (i, o) in others.iter().enumerate() {
            let b = DoubleBarrier::new(o, &path, &format!("m{i}"), 3);
            enters.push(tokio::spawn(async move { b.enter().await }));
        }
        within("3 enter", Duration::from_secs(10), async {
            for e in enters {
                e.await.unwrap().expect("enter");
            }
        })
        .await;
        let mut leaves = Vec::new();
        for (i, o) in others.iter().enumerate() {
            let b = DoubleBarrier::new(o, &path, &format!("m{i}"), 3);
            leaves.push(tokio::spawn(async move { b.leave().await }));
        }
        quitter.close().await.ok();
        within(
            "the others leave after a member closed its session",
            Duration::from_secs(10),
            async {
                for l in leaves {
                    l.await.unwrap().expect("leave");
                }
            },
        )
        .await;
    }
}

// ---- election and group --------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn election_one_leader_failover_ack_and_group_membership() {
    let s = Served::start(&["election", "group"]);
    let hosts = s.hosts();
    let observer = connect(&hosts).await;
    let mut proxies = Vec::new();
    let mut campaigns = Vec::new();
    // Campaign one after the other, so the order (and the successor) is known.
    for i in 0..3 {
        let (proxy, c) = mortal(&s).await;
        proxies.push(proxy);
        let e = Election::new(&c, "/elect", format!("c{i}").as_bytes());
        campaigns.push(tokio::spawn(async move {
            let node = e.campaign().await;
            (e, node)
        }));
        wait_children(&observer, "/elect", i + 1).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let done: Vec<usize> = (0..3).filter(|&i| campaigns[i].is_finished()).collect();
    assert_eq!(done, vec![0], "exactly one leader, the first candidate");
    let watcher = Election::new(&observer, "/elect", b"observer");
    assert_eq!(watcher.leader().await.unwrap(), Some(b"c0".to_vec()));
    let mut campaigns = campaigns.into_iter();
    let (e0, node0) = campaigns.next().unwrap().await.unwrap();
    node0.expect("c0 leads");
    // wait_ack waits until the leader acknowledges.
    let w = watcher.clone();
    let acked = tokio::spawn(async move { w.wait_ack().await });
    assert!(still_waiting(&acked, Duration::from_millis(300)).await);
    e0.ack().await.unwrap();
    assert_eq!(
        within("wait_ack", Duration::from_secs(5), acked)
            .await
            .unwrap()
            .unwrap(),
        b"c0"
    );

    // The leader's session dies: the next candidate leads.
    proxies[0].blackhole();
    let c1 = campaigns.next().unwrap();
    let (e1, node1) = within("c1 becomes leader", Duration::from_secs(15), c1)
        .await
        .unwrap();
    node1.expect("c1 leads");
    let c2 = campaigns.next().unwrap();
    assert!(!c2.is_finished(), "c2 must not lead while c1 does");
    assert_eq!(watcher.leader().await.unwrap(), Some(b"c1".to_vec()));
    // The old ack names c0's node, which is gone: wait_ack waits for c1's.
    let w = watcher.clone();
    let acked = tokio::spawn(async move { w.wait_ack().await });
    assert!(still_waiting(&acked, Duration::from_millis(300)).await);
    e1.ack().await.unwrap();
    assert_eq!(
        within("wait_ack for c1", Duration::from_secs(5), acked)
            .await
            .unwrap()
            .unwrap(),
        b"c1"
    );
    // A non-leader's ack fails with APIError.
    let (e2_client, _) = {
        let c = connect(&hosts).await;
        (c.clone(), c)
    };
    let not_leader = Election::new(&e2_client, "/elect", b"late");
    assert_eq!(not_leader.ack().await.unwrap_err().code(), -100);
    e1.resign().await.unwrap();
    let (_e2, node2) = within("c2 leads after c1 resigns", Duration::from_secs(10), c2)
        .await
        .unwrap();
    node2.expect("c2 leads");

    // Group membership.
    let g1c = connect(&hosts).await;
    let (gproxy, g2c) = mortal(&s).await;
    let g1 = Group::new(&g1c, "/groups/g");
    let g2 = Group::new(&g2c, "/groups/g");
    g1.join("alpha", b"1").await.unwrap();
    g2.join("beta", b"2").await.unwrap();
    let m = g1.members().await.unwrap();
    let names: Vec<&str> = m.members.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["alpha", "beta"]);
    assert_eq!(m.members[1].data, b"2");
    let gw = Group::new(&observer, "/groups/g");
    let v = m.version;
    let watching = tokio::spawn(async move { gw.watch(v).await });
    assert!(still_waiting(&watching, Duration::from_millis(300)).await);
    let g3c = connect(&hosts).await;
    Group::new(&g3c, "/groups/g")
        .join("gamma", b"3")
        .await
        .unwrap();
    let m2 = within(
        "watch_members sees the join",
        Duration::from_secs(5),
        watching,
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(m2.members.len(), 3);
    assert_ne!(m2.version, v);
    // A member whose session dies leaves by itself.
    let gw = Group::new(&observer, "/groups/g");
    let v2 = m2.version;
    let watching = tokio::spawn(async move { gw.watch(v2).await });
    gproxy.blackhole();
    let m3 = within(
        "watch_members sees the dead member leave",
        Duration::from_secs(15),
        watching,
    )
    .await
    .unwrap()
    .unwrap();
    let names: Vec<&str> = m3.members.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["alpha", "gamma"]);
    assert!(
        !g1.leave("gamma").await.is_ok_and(|b| b),
        "not alpha's member"
    );
    assert!(g1.leave("alpha").await.unwrap());
}

// ---- semaphore and rwlock ------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_of_2_never_has_more_than_2_holders_among_5() {
    let s = Served::start(&["semaphore"]);
    let hosts = s.hosts();
    let holders = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..5 {
        let c = connect(&hosts).await;
        let (holders, peak) = (holders.clone(), peak.clone());
        tasks.push(tokio::spawn(async move {
            let sem = Semaphore::new(&c, "/sems/two", 2).with_id(format!("s{i}").as_bytes());
            for _ in 0..4 {
                sem.acquire().await.expect("acquire");
                let now = holders.fetch_add(1, Ordering::SeqCst) + 1;
                assert!(now <= 2, "{now} holders of a 2-lease semaphore");
                peak.fetch_max(now, Ordering::SeqCst);
                let listed = sem.holders().await.unwrap().len();
                assert!(listed <= 2, "{listed} leases listed");
                tokio::time::sleep(Duration::from_millis(30)).await;
                holders.fetch_sub(1, Ordering::SeqCst);
                assert!(sem.release().await.expect("release"));
            }
        }));
    }
    within("20 semaphore rounds", Duration::from_secs(30), async {
        for t in tasks {
            t.await.expect("contender");
        }
    })
    .await;
    assert_eq!(
        peak.load(Ordering::SeqCst),
        2,
        "two leases were used at once"
    );
    let c = connect(&hosts).await;
    assert!(c.get_children("/sems/two").await.unwrap().is_empty());
    // A different max_leases on the same semaphore is refused.
    let err = Semaphore::new(&c, "/sems/two", 3)
        .acquire()
        .await
        .unwrap_err();
    assert_eq!(err.code(), -8, "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rwlock_two_readers_share_and_a_writer_waits_for_both() {
    let s = Served::start(&["rwlock"]);
    let hosts = s.hosts();
    let (r1c, r2c, wc) = (
        connect(&hosts).await,
        connect(&hosts).await,
        connect(&hosts).await,
    );
    let r1 = ReadWriteLock::new(&r1c, "/rw/x");
    let r2 = ReadWriteLock::new(&r2c, "/rw/x");
    within("two readers at once", Duration::from_secs(5), async {
        r1.read_acquire().await.unwrap();
        r2.read_acquire().await.unwrap();
    })
    .await;
    let w = ReadWriteLock::new(&wc, "/rw/x");
    let w2 = w.clone();
    let writing = tokio::spawn(async move { w2.write_acquire().await });
    assert!(still_waiting(&writing, Duration::from_millis(500)).await);
    assert_eq!(r1.release().await.unwrap(), 1);
    assert!(
        still_waiting(&writing, Duration::from_millis(500)).await,
        "the writer acquired while a reader held"
    );
    // A reader arriving now queues behind the writer.
    let r3c = connect(&hosts).await;
    let r3 = ReadWriteLock::new(&r3c, "/rw/x");
    let reading = tokio::spawn(async move { r3.read_acquire().await });
    assert_eq!(r2.release().await.unwrap(), 1);
    within("the writer acquires", Duration::from_secs(5), writing)
        .await
        .unwrap()
        .unwrap();
    assert!(still_waiting(&reading, Duration::from_millis(300)).await);
    assert_eq!(w.release().await.unwrap(), 1);
    within("the late reader acquires", Duration::from_secs(5), reading)
        .await
        .unwrap()
        .unwrap();
}

// ---- lease (the custom recipe of examples/custom_recipe.rs) -------

#[derive(serde::Deserialize, Debug)]
struct Grant {
    granted: bool,
    holder: String,
    expires_ms: i64,
    now_ms: i64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_is_exclusive_renewable_and_lapses() {
    let (plugins, opts) = options(&["lease"]);
    let server = WazooServer::start(opts.cfg("extendedTypesEnabled=true")).expect("start wazoo");
    let _plugins = plugins;
    let c = connect(&server.addr().to_string()).await;
    let acquire = |holder: &'static str, ttl_ms: i64| {
        let c = c.clone();
        async move {
            #[derive(serde::Serialize)]
            struct A<'a> {
                name: &'a str,
                holder: &'a str,
                ttl_ms: i64,
            }
            let a = A {
                name: "l",
                holder,
                ttl_ms,
            };
            wazoo_client::recipes::call::<_, Grant>(&c, "lease", "acquire", &a)
                .await
                .expect("lease.acquire")
        }
    };
    let g = acquire("alice", 800).await;
    assert!(g.granted);
    assert_eq!(g.expires_ms - g.now_ms, 800);
    let g = acquire("bob", 800).await;
    assert!(!g.granted);
    assert_eq!(g.holder, "alice");
    assert!(g.expires_ms > g.now_ms);
    // The lease node holds "holder\nexpires".
    let (data, stat) = c.get_data("/leases/l").await.unwrap();
    assert!(data.starts_with(b"alice\n"), "{data:?}");
    assert_eq!(stat.version, 0);
    assert!(acquire("alice", 800).await.granted, "renewal");
    tokio::time::sleep(Duration::from_millis(900)).await;
    let g = acquire("bob", 800).await;
    assert!(g.granted, "alice's lease lapsed: {g:?}");
    #[derive(serde::Serialize)]
    struct R<'a> {
        name: &'a str,
        holder: &'a str,
    }
    let rel = |holder: &'static str| {
        let c = c.clone();
        async move {
            wazoo_client::recipes::call::<_, bool>(&c, "lease", "release", &R { name: "l", holder })
                .await
        }
    };
    assert!(!rel("alice").await.unwrap());
    assert!(rel("bob").await.unwrap());
    assert!(c.exists("/leases/l").await.unwrap().is_none());
    // Bad arguments are refused before anything is written.
    #[derive(serde::Serialize)]
    struct A2<'a> {
        name: &'a str,
        holder: &'a str,
        ttl_ms: i64,
    }
    let err = wazoo_client::recipes::call::<_, Grant>(
        &c,
        "lease",
        "acquire",
        &A2 {
            name: "a/b",
            holder: "x",
            ttl_ms: 5,
        },
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), -8, "{err}");
}

// wazoo's own four-letter word (README, "Four-letter words"): `recp`
// answers on the client port, like ZooKeeper's words, with each module
// loaded and the pending waits.
#[tokio::test]
async fn the_recp_word_lists_the_loaded_modules() {
    let s = Served::start(&["lock"]);
    let answer = tokio::task::spawn_blocking(move || {
        wazoo_testkit::four_letter_word(s.server.addr(), "recp").expect("recp answers")
    })
    .await
    .unwrap();
    assert!(answer.contains("module=lock "), "{answer}");
    assert!(answer.ends_with("pending_waits=0\n"), "{answer}");
}
