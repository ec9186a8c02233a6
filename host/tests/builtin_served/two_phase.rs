//! The two-phase commit recipe.

use super::*;

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
