//! The election and group recipes.

use super::*;

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
