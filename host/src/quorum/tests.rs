use super::*;

#[test]
fn a_hello_round_trips_and_a_foreign_one_is_refused() {
    let h = Hello {
        sender: 3,
        link_epoch: 9,
    };
    assert_eq!(Hello::decode(&h.encode()), Ok(h));
    let mut b = h.encode();
    b[0] = b'X';
    assert_eq!(Hello::decode(&b), Err(LinkError::BadMagic));
    let mut b = h.encode();
    b[4] = 1;
    assert_eq!(Hello::decode(&b), Err(LinkError::UnsupportedVersion(1)));
}

#[test]
fn frame_lengths_are_checked_before_anything_is_read() {
    assert_eq!(check_frame_len(0), Err(LinkError::BadLength(0)));
    assert_eq!(
        check_frame_len(0xffff_ffff),
        Err(LinkError::BadLength(0xffff_ffff))
    );
    assert_eq!(check_frame_len(MAX_FRAME), Ok(()));
}

#[test]
fn malformed_frames_are_errors_not_panics() {
    assert_eq!(decode_frame(&[]), Err(LinkError::BadLength(0)));
    assert_eq!(decode_frame(&[9]), Err(LinkError::UnknownKind(9)));
    assert_eq!(decode_frame(&[KIND_KEEPALIVE]), Ok(Frame::Keepalive));
    assert_eq!(
        decode_frame(&[KIND_KEEPALIVE, 0]),
        Err(LinkError::KeepaliveWithPayload(1))
    );
    assert!(matches!(decode_frame(&[KIND_ZAB]), Err(LinkError::Zab(_))));
    assert_eq!(decode_frame(&[KIND_APP, 7]), Ok(Frame::App(vec![7])));
    let mut f = vec![KIND_ZAB];
    Message::Ping.encode(&mut f);
    assert_eq!(decode_frame(&f), Ok(Frame::Zab(Message::Ping)));
}

#[test]
fn a_queue_past_its_bound_is_reset_not_grown() {
    let o = Outbox {
        state: Mutex::new(OutboxState::default()),
        wake: Notify::new(),
    };
    let chunk = vec![0u8; 1 << 20];
    // One message larger than the bound is admitted into a short queue.
    o.push(LinkCmd::App(vec![0u8; QUEUE_BYTES_MAX + 1]));
    assert!(!o.is_overflowed());
    o.push(LinkCmd::App(chunk.clone()));
    assert!(o.is_overflowed(), "the queue passed its bound");
    assert!(o.lock().queue.is_empty(), "an overflowed queue is dropped");
    o.push(LinkCmd::App(chunk.clone()));
    assert!(o.lock().queue.is_empty(), "nothing queues until the reset");
    assert!(matches!(o.take(), Take::Overflowed));
    assert!(o.discard());
    o.push(LinkCmd::App(chunk));
    match o.take() {
        Take::Cmds(c) => assert_eq!(c.len(), 1),
        _ => panic!("a reset queue takes commands again"),
    }
    assert_eq!(o.lock().bytes, 0);
}

// ZooKeeper Administrator's Guide, "Unsafe Options", quorumListenOnAllIPs:
// with it, members are listened for on every address, not only the
// member's own; without it, only on the member's own.
#[tokio::test]
async fn the_quorum_port_listens_on_every_address_with_quorum_listen_on_all_ips() {
    for all in [false, true] {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let (tx, _rx) = mpsc::channel(16);
        let own: SocketAddr = ([127, 0, 0, 1], port).into();
        let opts = LinkOptions {
            listen_on_all_ips: all,
            ..LinkOptions::default()
        };
        let _links = start(1, &[own], HashMap::new(), tx, opts).await.unwrap();
        let connect = |ip: [u8; 4]| async move {
            tokio::time::timeout(
                Duration::from_secs(5),
                TcpStream::connect(SocketAddr::from((ip, port))),
            )
            .await
            .expect("bounded")
            .is_ok()
        };
        assert!(connect([127, 0, 0, 1]).await, "own address, all={all}");
        // Another loopback address of this machine.
        assert_eq!(
            connect([127, 0, 0, 2]).await,
            all,
            "other address, all={all}"
        );
    }
}

/// A free port on 127.0.0.1 (nothing listens on it once this returns).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

// Administrator's Guide, "Cluster Options" (multiAddress.enabled): a dial
// leaves from the member's own address nearest the target (the longest
// shared prefix, the first listed on a tie), of the target's family.
#[test]
fn a_dial_leaves_from_the_own_address_nearest_the_target() {
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    let own = [ip("10.0.0.5"), ip("192.168.1.5"), ip("fd00::5")];
    assert_eq!(source_ip(&own, ip("192.168.1.9")), Some(ip("192.168.1.5")));
    assert_eq!(source_ip(&own, ip("10.0.0.9")), Some(ip("10.0.0.5")));
    assert_eq!(source_ip(&own, ip("8.8.8.8")), Some(ip("10.0.0.5")));
    let tie = [ip("127.0.0.4"), ip("127.0.0.5")];
    assert_eq!(source_ip(&tie, ip("127.0.0.6")), Some(ip("127.0.0.4")));
    assert_eq!(source_ip(&own, ip("fd00::9")), Some(ip("fd00::5")));
    assert_eq!(source_ip(&own[..2], ip("fd00::9")), None);
    assert_eq!(source_ip(&[], ip("10.0.0.9")), None);
}

/// A member's two addresses: 127.0.0.1 and 127.0.0.`second`, each with
/// a free port.
fn two_addresses(second: u8) -> Vec<SocketAddr> {
    vec![
        ([127, 0, 0, 1], free_port()).into(),
        ([127, 0, 0, second], free_port()).into(),
    ]
}

/// Addresses as a peer's line names them (by IP).
fn named(addrs: impl IntoIterator<Item = SocketAddr>) -> Vec<PeerAddr> {
    addrs
        .into_iter()
        .map(|addr| PeerAddr {
            host: addr.ip().to_string(),
            addr,
        })
        .collect()
}

/// Members 1 (at `one`, seeing 2 at `two_seen`) and 2 (at `two`, seeing 1
/// at `one_seen`), linked, with the events each receives.
async fn pair(
    (one, two_seen): (&[SocketAddr], Vec<PeerAddr>),
    (two, one_seen): (&[SocketAddr], Vec<PeerAddr>),
) -> (
    (Links, mpsc::Receiver<LinkEvent>),
    (Links, mpsc::Receiver<LinkEvent>),
) {
    let (tx1, rx1) = mpsc::channel(16);
    let (tx2, rx2) = mpsc::channel(16);
    let opts = LinkOptions::default;
    let links1 = start(1, one, HashMap::from([(2, two_seen)]), tx1, opts())
        .await
        .unwrap();
    let links2 = start(2, two, HashMap::from([(1, one_seen)]), tx2, opts())
        .await
        .unwrap();
    ((links1, rx1), (links2, rx2))
}

// Administrator's Guide, "Cluster Options" (multiAddress.enabled): a member
// listens on the quorum port of every one of its addresses, and a dialer
// reaches a peer over whichever of its addresses answers: here the first
// listed has nothing behind it, and the link comes up over the second,
// from the dialer's own second address, which the acceptor takes as one
// of the dialer's.
#[tokio::test]
async fn a_link_comes_up_over_the_address_that_answers() {
    let (one, two) = (two_addresses(2), two_addresses(3));
    // Member 2 sees member 1's first address as a port nothing listens on.
    let mut one_seen = named(one.iter().copied());
    one_seen[0].addr.set_port(free_port());
    let ((links1, mut rx1), (links2, mut rx2)) =
        pair((&one, named(two.iter().copied())), (&two, one_seen)).await;
    // Member 1 listens on both of its own addresses.
    for a in &one {
        assert!(TcpStream::connect(a).await.is_ok(), "{a}");
    }
    assert_eq!(delivered(&links2, 1, &mut rx1, b"over").await, b"over");
    assert_eq!(delivered(&links1, 2, &mut rx2, b"back").await, b"back");
}

/// The first `Some` of `probe`, polled every 20 ms for at most 5 s.
async fn eventually<T>(mut probe: impl FnMut() -> Option<T>) -> Option<T> {
    for _ in 0..250 {
        if let Some(v) = probe() {
            return Some(v);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

/// The next `App` payload member `rx` receives, within 10 s, sending
/// `msg` from `links` to `to` every 100 ms meanwhile (what is queued while
/// a link is down is dropped).
async fn delivered(
    links: &Links,
    to: ServerId,
    rx: &mut mpsc::Receiver<LinkEvent>,
    msg: &[u8],
) -> Vec<u8> {
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            links.send(to, LinkCmd::App(msg.to_vec()));
            tokio::select! {
                ev = rx.recv() => if let Some(LinkEvent::App { payload, .. }) = ev {
                    break payload;
                },
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
        }
    })
    .await
    .expect("delivered within 10 s")
}

// Administrator's Guide, "Cluster Options" (multiAddress.enabled): when the
// path a link runs over dies, the dialer moves it to another address of
// the peer. Member 2 reaches member 1's two addresses through a proxy
// each; the proxy carrying the link goes away (its connections close, new
// ones are refused) and the link comes back through the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_link_moves_to_another_address_of_the_peer() {
    // Member 2 is on 127.0.0.1 too: the proxies dial from there.
    let (one, two) = (two_addresses(2), two_addresses(3));
    let mut proxies: Vec<Option<wazoo_testkit::Proxy>> = one
        .iter()
        .map(|a| Some(wazoo_testkit::Proxy::start(*a).unwrap()))
        .collect();
    let one_seen = named(proxies.iter().flatten().map(|p| p.addr()));
    let ((_links1, mut rx1), (links2, _rx2)) =
        pair((&one, named(two.iter().copied())), (&two, one_seen)).await;
    assert_eq!(delivered(&links2, 1, &mut rx1, b"first").await, b"first");
    // The dial that lost the race was dropped: one proxy carries the link.
    let carrying = eventually(|| {
        let open: Vec<usize> = proxies
            .iter()
            .map(|p| p.as_ref().map_or(0, |p| p.active_connections()))
            .collect();
        match open.as_slice() {
            [1, 0] => Some(0),
            [0, 1] => Some(1),
            _ => None,
        }
    })
    .await
    .expect("one proxy carries the link");
    drop(proxies[carrying].take());
    let down = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let Some(LinkEvent::Down { peer }) = rx1.recv().await {
                break peer;
            }
        }
    })
    .await
    .expect("member 1 sees the link break");
    assert_eq!(down, 2);
    assert_eq!(delivered(&links2, 1, &mut rx1, b"moved").await, b"moved");
    let other = proxies[1 - carrying].as_ref().unwrap();
    assert_eq!(
        other.active_connections(),
        1,
        "the link runs over the other address"
    );
}

// ZooKeeper Dynamic Reconfiguration: a committed configuration that lists
// a member's address pairs in another order (`/zookeeper/config` sorts
// them by host) leaves its link alone; one that changes an address links
// it anew.
#[tokio::test]
async fn the_same_addresses_in_another_order_are_no_move() {
    let (one, two) = (two_addresses(9), two_addresses(3));
    let (tx, _rx) = mpsc::channel(16);
    let mut links = start(
        2,
        &two,
        HashMap::from([(1, named(one.iter().copied()))]),
        tx,
        LinkOptions::default(),
    )
    .await
    .unwrap();
    let line = |a: &[SocketAddr]| {
        a.iter()
            .map(|a| format!("{}:{}:{}", a.ip(), a.port(), free_port()))
            .collect::<Vec<_>>()
            .join("|")
    };
    let config = |one_line: String| {
        crate::core::quorum_config::QuorumConfig::parse(&format!(
            "server.1={one_line}\nserver.2={}",
            line(&two)
        ))
        .unwrap()
    };
    let outbox = Arc::clone(&links.outboxes[&1]);
    let reversed: Vec<SocketAddr> = one.iter().rev().copied().collect();
    links.follow(&config(line(&reversed)));
    assert!(Arc::ptr_eq(&outbox, &links.outboxes[&1]), "kept");
    let moved = [one[0], ([127, 0, 0, 9], free_port()).into()];
    links.follow(&config(line(&moved)));
    assert!(!Arc::ptr_eq(&outbox, &links.outboxes[&1]), "linked anew");
    let mut want = named(moved);
    want.sort();
    assert_eq!(links.addrs[&1], want);
}
