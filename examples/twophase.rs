//! A two-phase commit across three sites (the built-in `twophase` recipe).
//! The coordinator and the sites each have their own session, as they
//! would in separate processes. Two transactions: every site votes commit;
//! then site `c` votes abort, and the abort reaches everyone at once.
//!
//! ```sh
//! cargo run -p wazoo-examples --example twophase [-- SERVER]
//! ```

use wazoo_client::recipes::{TwoPhaseCommit, TwoPhaseSite};
use wazoo_client::{Client, ClientOptions};

async fn run(server: &str, tx: &str, abort_at: Option<&str>) -> anyhow::Result<()> {
    let sites: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
    let (coord_client, _e) = Client::connect(server, ClientOptions::default()).await?;
    let coord = TwoPhaseCommit::new(&coord_client, tx);
    coord.begin(&sites, b"move 10 from a to b").await?;
    println!("coordinator: began {tx} with sites {sites:?}");
    let mut tasks = Vec::new();
    for name in sites {
        let (c, _e) = Client::connect(server, ClientOptions::default()).await?;
        let commit = abort_at != Some(name.as_str());
        let tx = tx.to_string();
        tasks.push(tokio::spawn(async move {
            let site = TwoPhaseSite::new(&c, &tx, &name);
            let data = site.join().await?;
            println!(
                "site {name}: joined, transaction {:?}, votes {}",
                String::from_utf8_lossy(&data),
                if commit { "commit" } else { "abort" }
            );
            site.vote(commit).await?;
            let outcome = site.decision().await?;
            println!("site {name}: outcome {outcome:?}");
            c.close().await?;
            anyhow::Ok(outcome)
        }));
    }
    let outcome = coord.decision().await?;
    println!("coordinator: outcome {outcome:?}");
    for t in tasks {
        assert_eq!(t.await??, outcome);
    }
    coord_client.close().await?;
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let server = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:2181".into());
    let stamp = std::process::id();
    run(&server, &format!("/examples/tx/commit-{stamp}"), None).await?;
    println!();
    run(&server, &format!("/examples/tx/abort-{stamp}"), Some("c")).await?;
    Ok(())
}
