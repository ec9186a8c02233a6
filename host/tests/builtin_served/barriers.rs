//! The double barrier recipe.

use super::*;

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
