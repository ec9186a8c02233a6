//! The bytes of client requests a member holds unanswered are bounded over
//! all its connections (ZooKeeper Administrator's Guide, "Advanced
//! Configuration", largeRequestMaxBytes): behind a slow disk, a client that
//! pipelines large writes has its connection closed once its requests
//! would pass the bound, instead of the member holding them all, and the
//! member goes on serving.

use std::time::Duration;

use wazoo::config::Config;
use wazoo::member::{Member, MemberOptions};
use wazoo_storage::GroupCommitOptions;
use wazoo_testkit::free_port;
use zookeeper_client::{Acls, Client, CreateMode};

async fn connect(addr: &str) -> Client {
    Client::connector()
        .with_session_timeout(Duration::from_secs(10))
        .connect(addr)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {addr}: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_large_writes_past_large_request_max_bytes_close_their_connection() {
    const WRITE: usize = 900 << 10;
    let dir = tempfile::tempdir().unwrap();
    let cfg = Config::parse(&format!(
        "tickTime=200\ndataDir={}\nclientPort={}\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n\
         largeRequestMaxBytes={}\n",
        dir.path().display(),
        free_port(),
        3 << 20
    ))
    .unwrap();
    // One record per fsync and 300 ms per fsync: the writes wait, read
    // and unanswered, while the rest of the burst arrives.
    let opts = MemberOptions {
        group_commit: GroupCommitOptions {
            queue_capacity: 1,
            sync_delay: Some(Duration::from_millis(300)),
            ..GroupCommitOptions::default()
        },
        ..MemberOptions::default()
    };
    let member = Member::start_with(cfg, opts)
        .await
        .expect("the member starts");
    let addr = member.client_addr.to_string();
    let open = CreateMode::Persistent.with_acls(Acls::anyone_all());
    let setup = connect(&addr).await;
    setup.create("/big", b"", &open).await.unwrap();

    let flood = connect(&addr).await;
    let data = vec![7u8; WRITE];
    let pending: Vec<_> = (0..10)
        .map(|_| flood.set_data("/big", &data, None))
        .collect();
    let mut failed = 0;
    for f in pending {
        if tokio::time::timeout(Duration::from_secs(30), f)
            .await
            .expect("every write is answered or fails")
            .is_err()
        {
            failed += 1;
        }
    }
    assert!(
        failed > 0,
        "ten 900 KiB writes held at once would pass 3 MiB: the connection must close"
    );
    // The member still serves, and a write of the same size goes through.
    let after = connect(&addr).await;
    after
        .set_data("/big", &data, None)
        .await
        .expect("a write after the flood");
    let (got, _) = after.get_data("/big").await.unwrap();
    assert_eq!(got.len(), WRITE);
    drop((setup, flood, after));
    member
        .run_until(async {})
        .await
        .expect("the member stops cleanly");
}
