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

// Administrator's Guide, "Cluster Options" (multiAddress.enabled): a member
// listens on the quorum port of every one of its addresses, and a dialer
// reaches a peer over whichever of its addresses answers: here the first
// listed has nothing behind it, and the link comes up over the second,
// from the dialer's own second address, which the acceptor takes as one
// of the dialer's.
#[tokio::test]
async fn a_link_comes_up_over_the_address_that_answers() {
    let one: Vec<SocketAddr> = vec![
        ([127, 0, 0, 1], free_port()).into(),
        ([127, 0, 0, 2], free_port()).into(),
    ];
    let two: Vec<SocketAddr> = vec![
        ([127, 0, 0, 1], free_port()).into(),
        ([127, 0, 0, 3], free_port()).into(),
    ];
    let peer = |addrs: &[SocketAddr]| -> Vec<PeerAddr> {
        addrs
            .iter()
            .map(|a| PeerAddr {
                host: a.ip().to_string(),
                addr: *a,
            })
            .collect()
    };
    // Member 2 sees member 1's first address as a port nothing listens on.
    let mut one_seen = peer(&one);
    one_seen[0].addr.set_port(free_port());
    let (tx1, mut rx1) = mpsc::channel(16);
    let (tx2, mut rx2) = mpsc::channel(16);
    let links1 = start(
        1,
        &one,
        HashMap::from([(2, peer(&two))]),
        tx1,
        LinkOptions::default(),
    )
    .await
    .unwrap();
    let links2 = start(
        2,
        &two,
        HashMap::from([(1, one_seen)]),
        tx2,
        LinkOptions::default(),
    )
    .await
    .unwrap();
    // Member 1 listens on both of its own addresses.
    for a in &one {
        assert!(TcpStream::connect(a).await.is_ok(), "{a}");
    }
    links2.send(1, LinkCmd::App(b"over".to_vec()));
    let got = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            // What is queued before the link is up is dropped: send again.
            links2.send(1, LinkCmd::App(b"over".to_vec()));
            tokio::select! {
                ev = rx1.recv() => if let Some(LinkEvent::App { from, payload }) = ev {
                    break (from, payload);
                },
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
        }
    })
    .await
    .expect("the link comes up over the second address");
    assert_eq!(got, (2, b"over".to_vec()));
    links1.send(2, LinkCmd::App(b"back".to_vec()));
    let back = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            if let Some(LinkEvent::App { from, payload }) = rx2.recv().await {
                break (from, payload);
            }
        }
    })
    .await
    .expect("and carries the other way");
    assert_eq!(back, (1, b"back".to_vec()));
}
