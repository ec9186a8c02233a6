//! Four-letter words that change something (ZooKeeper Administrator's
//! Guide, "The Four Letter Words"): `srst` resets the server's statistics
//! and `crst` every connection's, on ZooKeeper and wazoo alike; and the
//! asking connection counts among the open ones in `mntr`, `srvr` and
//! `cons`.

#[macro_use]
mod common;

use common::{connect, start};
use wazoo_testkit::Flavor;

/// `mntr`'s value for `key`, as a number.
fn mntr(addr: std::net::SocketAddr, key: &str) -> u64 {
    let text = wazoo_testkit::four_letter_word(addr, "mntr").expect("mntr answers");
    text.lines()
        .find_map(|l| l.strip_prefix(key).and_then(|v| v.trim().parse().ok()))
        .unwrap_or_else(|| panic!("mntr has no {key}: {text}"))
}

async fn srst_and_crst_reset_what_they_say(flavor: Flavor) {
    let server = start(flavor);
    let addr = server.addr();
    let zk = connect(&server.connect_string()).await;
    for _ in 0..20 {
        zk.check_stat("/zookeeper").await.unwrap();
    }
    let before = tokio::task::spawn_blocking(move || mntr(addr, "zk_packets_received\t"))
        .await
        .unwrap();
    assert!(before >= 20, "{flavor}: {before} packets received");
    let (reset, after) = tokio::task::spawn_blocking(move || {
        let reset = wazoo_testkit::four_letter_word(addr, "srst").unwrap();
        (reset, mntr(addr, "zk_packets_received\t"))
    })
    .await
    .unwrap();
    assert_eq!(reset, "Server stats reset.\n", "{flavor}");
    assert!(after < before && after < 5, "{flavor}: {after} after srst");
    let (reset, cons) = tokio::task::spawn_blocking(move || {
        let reset = wazoo_testkit::four_letter_word(addr, "crst").unwrap();
        (
            reset,
            wazoo_testkit::four_letter_word(addr, "cons").unwrap(),
        )
    })
    .await
    .unwrap();
    assert_eq!(reset, "Connection stats reset.\n", "{flavor}");
    // The client's connection: nothing received since the reset.
    assert!(
        cons.lines().any(|l| l.contains("recved=0")),
        "{flavor}: cons after crst: {cons}"
    );
    drop(zk);
}

on_both!(srst_and_crst_reset_what_they_say);

/// `mntr`'s alive connections, `srvr`'s `Connections:`, and `cons`'
/// lines at `addr`, once `mntr` says `alive` (a connection closed just
/// before may take a moment to go).
fn connections_seen(addr: std::net::SocketAddr, alive: u64) -> (u64, String, Vec<String>) {
    let key = "zk_num_alive_connections\t";
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while mntr(addr, key) != alive && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let srvr = wazoo_testkit::four_letter_word(addr, "srvr").unwrap();
    let connections = srvr
        .lines()
        .find(|l| l.starts_with("Connections: "))
        .unwrap_or_else(|| panic!("srvr has no Connections: {srvr}"))
        .to_string();
    let cons = wazoo_testkit::four_letter_word(addr, "cons").unwrap();
    let lines = cons
        .lines()
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect();
    (mntr(addr, key), connections, lines)
}

/// `cons`' line for the connection asking it, as ZooKeeper prints it: no
/// session, one packet received (the word).
fn is_asking_line(l: &str) -> bool {
    l.strip_prefix(" /127.0.0.1:")
        .and_then(|r| r.split_once("[0](queued=0,recved=1,sent=0)"))
        .is_some_and(|(port, rest)| port.parse::<u16>().is_ok() && rest.is_empty())
}

// ZooKeeper Administrator's Guide, "The Four Letter Words" (mntr, srvr,
// cons): the connection asking a four-letter word is open while it asks,
// and counts as one: `zk_num_alive_connections` and `Connections:` are 1
// on a server or ensemble member no client is connected to, 2 with one
// client, and `cons` lists the asking connection beside the clients'.
async fn the_asking_connection_counts_as_alive(flavor: Flavor) {
    let standalone = start(flavor);
    let ensemble = wazoo_testkit::start_ensemble(flavor, 3, common::ensemble_options(flavor))
        .unwrap_or_else(|e| panic!("cannot start a {flavor} ensemble: {e:#}"));
    ensemble
        .wait_for_leader(std::time::Duration::from_secs(30))
        .unwrap();
    for (what, addr) in [
        ("server", standalone.addr()),
        ("ensemble member", ensemble.addr(0)),
    ] {
        let (alive, connections, cons) =
            tokio::task::spawn_blocking(move || connections_seen(addr, 1))
                .await
                .unwrap();
        assert_eq!(alive, 1, "{flavor} {what}: mntr");
        assert_eq!(connections, "Connections: 1", "{flavor} {what}: srvr");
        assert!(
            cons.len() == 1 && is_asking_line(&cons[0]),
            "{flavor} {what}: cons {cons:?}"
        );
        let zk = connect(&addr.to_string()).await;
        zk.check_stat("/").await.unwrap();
        let (alive, connections, cons) =
            tokio::task::spawn_blocking(move || connections_seen(addr, 2))
                .await
                .unwrap();
        assert_eq!(alive, 2, "{flavor} {what}: mntr with a client");
        assert_eq!(
            connections, "Connections: 2",
            "{flavor} {what}: srvr with a client"
        );
        assert!(
            cons.len() == 2
                && cons.iter().filter(|l| is_asking_line(l)).count() == 1
                && cons.iter().any(|l| l.contains(",sid=0x")),
            "{flavor} {what}: cons with a client {cons:?}"
        );
        drop(zk);
    }
}

on_both!(the_asking_connection_counts_as_alive);

/// ZooKeeper counts each four-letter word as a packet received
/// (NIOServerCnxn.checkFourLetterWord), before it runs, and its answer as
/// a packet sent (one per 8,192 characters begun): with no client
/// connected, `srst` leaves zk_packets_received at 1 in the `mntr` after
/// it (the `mntr` itself), and each word asked adds one to each count.
async fn each_four_letter_word_counts_as_a_packet_received(flavor: Flavor) {
    let server = start(flavor);
    let addr = server.addr();
    tokio::task::spawn_blocking(move || {
        let word = |w: &str| wazoo_testkit::four_letter_word(addr, w).expect("the word answers");
        let line = |text: &str, key: &str| -> u64 {
            text.lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or_else(|| panic!("{flavor}: no {key} line in {text}"))
        };
        word("srst");
        assert_eq!(mntr(addr, "zk_packets_received\t"), 1, "{flavor}");
        word("srst");
        word("ruok");
        word("srvr");
        // srvr's Received: counts the srvr itself; Sent: the answers
        // before it (srst's is sent after its reset).
        let srvr = word("srvr");
        assert_eq!(line(&srvr, "Received: "), 3, "{flavor}: {srvr}");
        assert_eq!(line(&srvr, "Sent: "), 3, "{flavor}: {srvr}");
    })
    .await
    .unwrap();
}

on_both!(each_four_letter_word_counts_as_a_packet_received);

/// `wchs`, `wchc` and `wchp` show ZooKeeper 3.8's data-watch table only
/// (DataTree.dumpWatchesSummary and dumpWatches print `dataWatches`): a
/// child watch is not in them; an exists watch and a persistent watch are.
/// ZooKeeper Administrator's Guide, "The Four Letter Words".
async fn watch_words_show_the_data_watch_table(flavor: Flavor) {
    let server = start(flavor);
    let addr = server.addr();
    let hosts = server.connect_string();
    tokio::task::spawn_blocking(move || {
        use wazoo_proto::{AddWatchMode, Request};
        let mut s = common::raw_session(&hosts).expect("a session");
        let calls = [
            Request::GetChildren {
                path: "/zookeeper".into(),
                watch: true,
            },
            Request::Exists {
                path: "/nothing".into(),
                watch: true,
            },
            Request::AddWatch {
                path: "/persistent".into(),
                mode: AddWatchMode::Persistent as i32,
            },
        ];
        for (i, req) in calls.iter().enumerate() {
            common::raw_call(&mut s, i as i32 + 1, req);
        }
        let word = |w: &str| wazoo_testkit::four_letter_word(addr, w).expect("the word answers");
        assert_eq!(
            word("wchs"),
            "1 connections watching 2 paths\nTotal watches:2\n",
            "{flavor}"
        );
        let wchp = word("wchp");
        assert!(
            wchp.contains("/nothing\n") && wchp.contains("/persistent\n"),
            "{flavor}: {wchp}"
        );
        assert!(!wchp.contains("/zookeeper\n"), "{flavor}: {wchp}");
        let wchc = word("wchc");
        assert!(
            wchc.contains("\t/nothing\n") && !wchc.contains("\t/zookeeper\n"),
            "{flavor}: {wchc}"
        );
        drop(s);
    })
    .await
    .unwrap();
}

on_both!(watch_words_show_the_data_watch_table);
