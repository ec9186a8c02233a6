//! The lock, semaphore and read-write lock recipes.

use super::*;

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
    for i in 0..3 {
        wait_deployed(ens.addr(i), &["lock"]);
    }
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

// ZooKeeper Programmer's Guide, "ZooKeeper access control using ACLs": a
// lock acquired with the caller's ACL gets CREATOR_ALL_ACL expanded to the
// caller's digest identity, as a client's own create would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_with_the_callers_acl_creates_its_node_for_the_caller_only() {
    use wazoo_client::Error;
    let s = Served::start(&["lock"]);
    let hosts = s.hosts();
    let alice = connect(&hosts).await;
    let other = connect(&hosts).await;
    let checker = connect(&hosts).await;
    let expected = vec![Acl::new(
        31,
        "digest",
        &wazoo_client::digest_id("alice", "secret"),
    )];
    within("the caller-ACL lock", Duration::from_secs(20), async {
        other
            .create("/locks", b"", &Acl::open_unsafe(), CreateMode::Persistent)
            .await
            .expect("an open parent");
        // Without an identity, CREATOR_ALL_ACL is invalid, as ZooKeeper says.
        match Lock::new(&alice, "/locks/mine")
            .with_creator_acl()
            .acquire()
            .await
        {
            Err(RecipeError::Failed { code, .. }) => assert_eq!(code, -114, "InvalidACL"),
            other => panic!("expected InvalidACL, got {other:?}"),
        }
        alice
            .add_auth("digest", b"alice:secret")
            .await
            .expect("addauth");
        let node = Lock::new(&alice, "/locks/mine")
            .with_creator_acl()
            .acquire()
            .await
            .expect("acquire with the caller's ACL");
        // A client without alice's identity may not even read the ACL.
        assert!(matches!(other.get_acl(&node).await, Err(Error::NoAuth)));
        assert!(matches!(
            other.get_children("/locks/mine").await,
            Err(Error::NoAuth)
        ));
        // Another session authenticated as alice sees her CREATOR_ALL.
        checker
            .add_auth("digest", b"alice:secret")
            .await
            .expect("addauth");
        let (acl, _) = checker.get_acl(&node).await.expect("getAcl");
        assert_eq!(acl, expected, "the lock node");
        let (acl, _) = checker.get_acl("/locks/mine").await.expect("getAcl");
        assert_eq!(acl, expected, "the lock's directory the acquire created");
        let (acl, _) = other.get_acl("/locks").await.expect("getAcl");
        assert_eq!(acl, Acl::open_unsafe(), "a parent it found stays as it was");
    })
    .await;
}
