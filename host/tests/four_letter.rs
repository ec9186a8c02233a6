//! Four-letter words that change something (ZooKeeper Administrator's
//! Guide, "The Four Letter Words"): `srst` resets the server's statistics
//! and `crst` every connection's, on ZooKeeper and wazoo alike.

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
