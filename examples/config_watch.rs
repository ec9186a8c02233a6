//! A configuration watch with the plain ZooKeeper API (no recipe): a
//! watcher re-reads `/examples/config` on every change (one-shot data
//! watches, set again after each event), while a writer updates it.
//!
//! ```sh
//! cargo run -p wazoo-examples --example config_watch [-- SERVER]            # both, in one process
//! cargo run -p wazoo-examples --example config_watch -- SERVER watch        # watch until Ctrl-C
//! cargo run -p wazoo-examples --example config_watch -- SERVER set 'v=42'   # write once
//! ```

use std::time::Duration;

use wazoo_client::{Acl, Client, ClientOptions, CreateMode, Error};

const PATH: &str = "/examples/config";

async fn ensure(c: &Client) -> anyhow::Result<()> {
    for p in ["/examples", PATH] {
        match c
            .create(p, b"", &Acl::open_unsafe(), CreateMode::Persistent)
            .await
        {
            Ok(_) | Err(Error::NodeExists) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Prints the value and every change, `changes` times (forever if None).
async fn watch(c: Client, changes: Option<usize>) -> anyhow::Result<()> {
    let mut seen = 0;
    loop {
        let (data, stat, w) = c.get_data_w(PATH).await?;
        println!(
            "watcher: config = {:?} (version {})",
            String::from_utf8_lossy(&data),
            stat.version
        );
        if changes.is_some_and(|n| seen == n) {
            return Ok(());
        }
        let event = w.await;
        println!("watcher: event {:?}", event.event_type);
        seen += 1;
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let server = args
        .first()
        .cloned()
        .unwrap_or_else(|| "127.0.0.1:2181".into());
    let (client, _events) = Client::connect(&server, ClientOptions::default()).await?;
    ensure(&client).await?;
    match args.get(1).map(String::as_str) {
        Some("watch") => watch(client.clone(), None).await?,
        Some("set") => {
            let v = args.get(2).cloned().unwrap_or_default();
            let stat = client.set_data(PATH, v.as_bytes(), None).await?;
            println!("set {PATH} = {v:?} (version {})", stat.version);
        }
        None => {
            client.set_data(PATH, b"color=red", None).await?;
            let (wc, _e) = Client::connect(&server, ClientOptions::default()).await?;
            let watcher = tokio::spawn(watch(wc, Some(3)));
            for v in ["color=green", "color=blue", "color=blue size=2"] {
                tokio::time::sleep(Duration::from_millis(300)).await;
                println!("writer: set {v:?}");
                client.set_data(PATH, v.as_bytes(), None).await?;
            }
            watcher.await??;
        }
        Some(other) => anyhow::bail!("unknown mode {other:?}: watch | set VALUE"),
    }
    client.close().await?;
    Ok(())
}
