//! Leader election with failover (the built-in `election` recipe). Three
//! candidates, each with its own session (separate processes in real
//! life); the leader acknowledges, works for a second, then its session
//! ends (as if it crashed) and the next candidate takes over.
//!
//! ```sh
//! cargo run -p wazoo-examples --example election [-- SERVER]
//! ```

use std::time::Duration;

use wazoo_client::recipes::Election;
use wazoo_client::{Client, ClientOptions};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let server = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:2181".into());
    let path = format!("/examples/election-{}", std::process::id());
    let (watcher_client, _e) = Client::connect(&server, ClientOptions::default()).await?;
    let watcher = Election::new(&watcher_client, &path, b"watcher");
    let mut tasks = Vec::new();
    for name in ["alpha", "beta", "gamma"] {
        let (c, _e) = Client::connect(&server, ClientOptions::default()).await?;
        let e = Election::new(&c, &path, name.as_bytes());
        tasks.push(tokio::spawn(async move {
            let node = e.campaign().await?;
            println!("{name}: I lead ({node})");
            e.ack().await?;
            tokio::time::sleep(Duration::from_secs(1)).await;
            println!("{name}: my session ends");
            c.close().await?;
            anyhow::Ok(())
        }));
        // Campaign in order, so the succession is alpha, beta, gamma.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for _ in 0..3 {
        let id = watcher.wait_ack().await?;
        println!(
            "watcher: leader {} acknowledged",
            String::from_utf8_lossy(&id)
        );
        // Wait for this leader to go before asking again.
        while watcher.leader().await?.as_deref() == Some(id.as_slice()) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    for t in tasks {
        t.await??;
    }
    watcher_client.close().await?;
    Ok(())
}
