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
        let _links = start(1, own, HashMap::new(), tx, opts).await.unwrap();
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
