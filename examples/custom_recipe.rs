//! Calling a recipe written from scratch with the SDK: `recipes-wasm/lease`
//! (a named lease that lapses after `ttl_ms` unless renewed). `wazoo dev`
//! loads it with the built-in recipes; on `wazoo serve`, put
//! `lease.wasm` (scripts/build-recipes.sh) in the --plugins directory.
//!
//! ```sh
//! cargo run -p wazoo-examples --example custom_recipe [-- SERVER]
//! ```

use std::time::Duration;

use serde::{Deserialize, Serialize};
use wazoo_client::recipes::{self, RecipeResult};
use wazoo_client::{Client, ClientOptions};

#[derive(Serialize)]
struct Acquire<'a> {
    name: &'a str,
    holder: &'a str,
    ttl_ms: i64,
}

#[derive(Serialize)]
struct Release<'a> {
    name: &'a str,
    holder: &'a str,
}

#[derive(Debug, Deserialize)]
struct Grant {
    granted: bool,
    holder: String,
    expires_ms: i64,
    now_ms: i64,
}

/// `lease.release`: true if `holder` held the lease and let it go.
async fn release(c: &Client, name: &str, holder: &str) -> RecipeResult<bool> {
    recipes::call(c, "lease", "release", &Release { name, holder }).await
}

async fn acquire(c: &Client, name: &str, holder: &str, ttl_ms: i64) -> RecipeResult<Grant> {
    let g: Grant = recipes::call(
        c,
        "lease",
        "acquire",
        &Acquire {
            name,
            holder,
            ttl_ms,
        },
    )
    .await?;
    if g.granted {
        println!(
            "{holder}: granted {name} for {} ms",
            g.expires_ms - g.now_ms
        );
    } else {
        println!(
            "{holder}: refused, {name} is held by {} for {} ms more",
            g.holder,
            g.expires_ms - g.now_ms
        );
    }
    Ok(g)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let server = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:2181".into());
    let (c, _e) = Client::connect(&server, ClientOptions::default()).await?;
    let name = format!("report-{}", std::process::id());
    assert!(acquire(&c, &name, "alice", 1500).await?.granted);
    assert!(!acquire(&c, &name, "bob", 1500).await?.granted);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    println!("alice: renewing");
    assert!(acquire(&c, &name, "alice", 1500).await?.granted);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert!(!acquire(&c, &name, "bob", 1500).await?.granted);
    println!("(alice stops renewing)");
    tokio::time::sleep(Duration::from_millis(1600)).await;
    assert!(acquire(&c, &name, "bob", 1500).await?.granted);
    let r = release(&c, &name, "alice").await?;
    println!("alice: release -> {r} (not hers any more)");
    let r = release(&c, &name, "bob").await?;
    println!("bob: release -> {r}");
    c.close().await?;
    Ok(())
}
