//! The harness against the real Apache ZooKeeper from the Debian package.

use std::path::Path;
use std::time::Duration;

use wazoo_testkit::{
    four_letter_word, start_server, wait_for, Flavor, ServerOptions, TestServer, ZkEnsemble,
    ZkServer,
};

fn process_exists(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

#[test]
fn standalone_zookeeper_answers_ruok_and_dies_on_drop() -> anyhow::Result<()> {
    let server = ZkServer::start()?;
    assert_eq!(four_letter_word(server.addr(), "ruok")?, "imok");
    let srvr = four_letter_word(server.addr(), "srvr")?;
    assert!(srvr.contains("Mode: standalone"), "srvr said: {srvr}");
    assert!(srvr.contains("Zookeeper version: 3.8"), "srvr said: {srvr}");
    assert_eq!(
        server.connect_string(),
        format!("127.0.0.1:{}", server.port())
    );
    assert!(server.log_path().is_file());

    let pid = server.pid().expect("server runs");
    let dir = server.data_dir();
    drop(server);
    assert!(!process_exists(pid), "ZooKeeper pid {pid} survived drop");
    assert!(
        !dir.exists(),
        "temporary directory {} survived drop",
        dir.display()
    );
    Ok(())
}

#[test]
fn zookeeper_config_options_reach_the_server() -> anyhow::Result<()> {
    let server = ZkServer::start_with(
        ServerOptions::default()
            .tick_time_ms(100)
            .session_timeouts_ms(300, 5000)
            .cfg("maxClientCnxns=7"),
    )?;
    let conf = four_letter_word(server.addr(), "conf")?;
    assert!(conf.contains("tickTime=100"), "conf said: {conf}");
    assert!(conf.contains("minSessionTimeout=300"), "conf said: {conf}");
    assert!(conf.contains("maxSessionTimeout=5000"), "conf said: {conf}");
    assert!(conf.contains("maxClientCnxns=7"), "conf said: {conf}");
    Ok(())
}

#[test]
fn zookeeper_flavor_survives_kill_and_restart_on_the_same_port() -> anyhow::Result<()> {
    let mut server: Box<dyn TestServer> = start_server(Flavor::Zookeeper)?;
    let addr = server.addr();
    assert_eq!(server.four_letter("ruok")?, "imok");

    server.kill();
    assert!(!server.is_running());
    assert!(
        four_letter_word(addr, "ruok").is_err(),
        "a killed server answered"
    );

    server.restart()?;
    assert_eq!(server.addr(), addr);
    assert_eq!(server.four_letter("ruok")?, "imok");
    Ok(())
}

#[test]
fn three_member_ensemble_elects_a_leader_and_survives_losing_it() -> anyhow::Result<()> {
    let mut ensemble = ZkEnsemble::start(3)?;
    assert_eq!(ensemble.len(), 3);
    assert_eq!(ensemble.connect_string().split(',').count(), 3);
    let leader = ensemble.wait_for_leader(Duration::from_secs(30))?;
    let followers = (0..3)
        .filter(|&i| ensemble.mode(i).as_deref() == Some("follower"))
        .count();
    assert_eq!(followers, 2);

    ensemble.kill(leader);
    let new_leader = wait_for(
        "a new leader among the two survivors",
        Duration::from_secs(30),
        || ensemble.leader().filter(|&l| l != leader),
    )?;
    assert_ne!(new_leader, leader);

    ensemble.restart(leader)?;
    assert_eq!(ensemble.mode(leader).as_deref(), Some("follower"));
    Ok(())
}

#[test]
fn proxy_in_front_of_zookeeper_carries_requests_until_cut() -> anyhow::Result<()> {
    let server = ZkServer::start()?;
    let proxy = wazoo_testkit::Proxy::start(server.addr())?;
    assert_eq!(four_letter_word(proxy.addr(), "ruok")?, "imok");

    proxy.cut();
    let answer = four_letter_word(proxy.addr(), "ruok");
    assert!(
        !matches!(&answer, Ok(a) if a == "imok"),
        "a cut proxy let ruok through: {answer:?}"
    );

    proxy.restore();
    assert_eq!(four_letter_word(proxy.addr(), "ruok")?, "imok");
    Ok(())
}
