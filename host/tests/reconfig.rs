//! Dynamic reconfiguration (ZooKeeper Dynamic Reconfiguration), against
//! Apache ZooKeeper's ensemble and wazoo's alike: `/zookeeper/config` on
//! every member, `reconfig` refused while `reconfigEnabled` is off.

mod common;

use common::connect;

use wazoo_testkit::{start_ensemble, Flavor, ServerOptions, TestEnsemble};
use zookeeper_client::EnsembleUpdate;

fn ensemble(flavor: Flavor, opts: ServerOptions) -> Box<dyn TestEnsemble> {
    start_ensemble(flavor, 3, opts)
        .unwrap_or_else(|e| panic!("cannot start a {flavor} ensemble: {e:#}"))
}

/// The `server.N=` lines and the version of a `/zookeeper/config` text.
fn parse_config(data: &[u8]) -> (Vec<String>, i64) {
    let text = std::str::from_utf8(data).expect("the config is text");
    let mut servers = Vec::new();
    let mut version = None;
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("version=") {
            version = Some(i64::from_str_radix(v, 16).expect("a hexadecimal version"));
        } else {
            assert!(line.starts_with("server."), "unexpected line {line:?}");
            servers.push(line.to_string());
        }
    }
    (servers, version.expect("a version= line"))
}

// ZooKeeper Dynamic Reconfiguration, "Retrieving the current dynamic
// configuration": every member serves the same membership, one
// `server.N=host:quorumPort:electionPort:participant[;clientAddr:port]` line
// per member (the testkit gives wazoo's client ports there), and a
// version that is the node's mzxid; the node's data version is -1.
async fn every_member_serves_the_configuration(flavor: Flavor) {
    let e = ensemble(flavor, common::ensemble_options(flavor));
    let mut seen = Vec::new();
    for i in 0..3 {
        let zk = connect(&e.addr(i).to_string()).await;
        let (data, stat) = zk.get_config().await.unwrap();
        let (servers, version) = parse_config(&data);
        assert_eq!(servers.len(), 3, "{flavor}: member {i}: {servers:?}");
        for (n, line) in servers.iter().enumerate() {
            assert!(
                line.starts_with(&format!("server.{}=127.0.0.1:", n + 1))
                    && line.split(';').next().unwrap().ends_with(":participant"),
                "{flavor}: member {i}: {line:?}"
            );
        }
        assert_eq!(stat.mzxid, version, "{flavor}: member {i}");
        assert_eq!(stat.version, -1, "{flavor}: member {i}");
        assert_eq!(stat.data_length as usize, data.len(), "{flavor}");
        seen.push(servers);
    }
    assert!(seen.windows(2).all(|w| w[0] == w[1]), "{flavor}: {seen:?}");
}

// ZooKeeper Administrator's Guide, "reconfigEnabled": off by default, and a
// reconfig then fails with ReconfigDisabled.
async fn reconfig_is_refused_while_disabled(flavor: Flavor) {
    let e = ensemble(flavor, common::ensemble_options(flavor));
    let zk = connect(&e.addr(0).to_string()).await;
    let err = zk
        .update_ensemble(
            EnsembleUpdate::Incremental {
                joinings: [].iter().copied(),
                leavings: ["3"].iter().copied(),
            },
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(err, zookeeper_client::Error::ReconfigDisabled, "{flavor}");
}

on_both! {
    every_member_serves_the_configuration,
    reconfig_is_refused_while_disabled,
}
