use std::net::IpAddr;

use super::*;

fn request_bytes(max: u64, threshold: i64) -> Arc<RequestBytes> {
    Arc::new(RequestBytes {
        in_flight: AtomicU64::new(0),
        max,
        threshold,
    })
}

// ZooKeeper Administrator's Guide, "Advanced Configuration",
// largeRequestMaxBytes: the bytes of requests in flight over all
// connections are bounded; a request that would pass the bound is
// refused (its connection closes), and answered requests give theirs
// back, as does a connection that ends.
#[test]
fn request_bytes_are_bounded_over_connections_and_always_given_back() {
    let global = request_bytes(1000, -1);
    let a = ConnRequests::new(Arc::clone(&global), Metrics::new());
    let b = ConnRequests::new(Arc::clone(&global), Metrics::new());
    assert!(a.admit(&[0; 400], Instant::now()) && a.admit(&[0; 300], Instant::now()));
    assert!(
        !b.admit(&[0; 301], Instant::now()),
        "700 + 301 would pass 1000"
    );
    assert!(b.admit(&[0; 300], Instant::now()));
    assert_eq!(global.in_flight.load(Ordering::SeqCst), 1000);
    a.answered(1);
    assert_eq!(
        global.in_flight.load(Ordering::SeqCst),
        600,
        "the first (400) went back"
    );
    drop(b);
    assert_eq!(
        global.in_flight.load(Ordering::SeqCst),
        300,
        "b's went back when it ended"
    );
    a.answered(5);
    assert_eq!(global.in_flight.load(Ordering::SeqCst), 0);

    // A request no longer than largeRequestThreshold is not counted
    // (ZooKeeper Administrator's Guide, largeRequestThreshold: "larger than").
    let global = request_bytes(1000, 500);
    let c = ConnRequests::new(Arc::clone(&global), Metrics::new());
    assert!(c.admit(&[0; 500], Instant::now()) && c.admit(&[0; 999], Instant::now()));
    assert!(!c.admit(&[0; 501], Instant::now()));
    assert_eq!(global.in_flight.load(Ordering::SeqCst), 999);
    c.answered(2);
    assert_eq!(global.in_flight.load(Ordering::SeqCst), 0);
}

// ZooKeeper Administrator's Guide, maxClientCnxns: a limit per address.
#[test]
fn a_connections_place_in_its_address_count_is_returned_when_it_ends() {
    let per_ip = Arc::new(PerIp::default());
    let ip: IpAddr = "127.0.0.1".parse().unwrap();
    let a = per_ip.try_add(ip, 2, 0).expect("first");
    let b = per_ip.try_add(ip, 2, 0).expect("second");
    assert_eq!(
        per_ip.try_add(ip, 2, 0).err(),
        Some(Refused::PerIp),
        "the third is refused"
    );
    assert!(per_ip.try_add("127.0.0.2".parse().unwrap(), 2, 0).is_ok());
    drop(a);
    assert_eq!(per_ip.count(ip), 1);
    let c = per_ip.try_add(ip, 2, 0).expect("room again");
    drop((b, c));
    assert_eq!(per_ip.count(ip), 0);
    assert!(per_ip.try_add(ip, 0, 0).is_ok(), "0 means no limit");
}

// ZooKeeper Administrator's Guide, "Advanced Configuration", maxCnxns: a
// limit on all the connections of a client port, checked before the
// address's.
#[test]
fn the_total_connection_count_is_bounded_and_given_back() {
    let per_ip = Arc::new(PerIp::default());
    let a: IpAddr = "127.0.0.1".parse().unwrap();
    let b: IpAddr = "127.0.0.2".parse().unwrap();
    let first = per_ip.try_add(a, 1, 2).expect("first");
    let second = per_ip
        .try_add(b, 1, 2)
        .expect("second, from another address");
    assert_eq!(
        per_ip.try_add("127.0.0.3".parse().unwrap(), 1, 2).err(),
        Some(Refused::Total(2))
    );
    assert_eq!(
        per_ip.try_add(a, 1, 2).err(),
        Some(Refused::Total(2)),
        "the total first"
    );
    drop(first);
    assert_eq!(per_ip.try_add(b, 1, 2).err(), Some(Refused::PerIp));
    let third = per_ip.try_add(a, 1, 2).expect("room again");
    drop((second, third));
    assert_eq!(per_ip.count(a) + per_ip.count(b), 0);
}

#[test]
fn the_writer_report_never_exceeds_the_unsent_reply_bound() {
    let mut cfg = Config::parse("dataDir=/d\n").unwrap();
    assert_eq!(Bounds::of(&cfg).written_report_bytes, WRITTEN_REPORT_BYTES);
    cfg.max_unsent_reply_bytes = 1000;
    assert_eq!(Bounds::of(&cfg).written_report_bytes, 1000);
    assert_eq!(Bounds::of(&cfg).unsent_reply_bytes, 1000);
}

#[tokio::test]
async fn bytes_sent_to_a_connection_count_as_queued_until_written() {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let shared = Arc::new(ConnShared::default());
    let mut conn = ConnTx::new(tx, Arc::clone(&shared));
    conn.gather(vec![0; 300], 1);
    conn.close().unwrap();
    assert_eq!(shared.queued_bytes.load(Ordering::Acquire), 300);
    // The close request is remembered for the connection's task.
    shared.close_requested.notified().await;
    assert!(matches!(rx.recv().await, Some(ConnMsg::Bytes { .. })));
    assert!(matches!(rx.recv().await, Some(ConnMsg::Close)));
    drop(rx);
    assert!(conn.close().is_err(), "the connection is gone");
}

#[tokio::test]
async fn replies_gathered_in_one_batch_reach_the_writer_as_one_message_in_order() {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let shared = Arc::new(ConnShared::default());
    let mut conn = ConnTx::new(tx, Arc::clone(&shared));
    assert!(conn.gather(vec![1, 2], 1), "the first reply of a batch");
    assert!(!conn.gather(vec![3], 2), "then more of the same batch");
    assert_eq!(
        shared.queued_bytes.load(Ordering::Acquire),
        0,
        "nothing is queued before the flush"
    );
    conn.flush(None).unwrap();
    conn.flush(None).unwrap();
    assert_eq!(shared.queued_bytes.load(Ordering::Acquire), 3);
    match rx.try_recv() {
        Ok(ConnMsg::Bytes {
            bytes,
            replies,
            local,
        }) => {
            assert_eq!((bytes, replies, local), (vec![1, 2, 3], 3, false));
        }
        _ => panic!("one message with both replies"),
    }
    assert!(rx.try_recv().is_err(), "an empty flush sends nothing");
    assert!(conn.gather(vec![4], 1), "a new batch starts after a flush");
}
