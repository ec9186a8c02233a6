//! A lock shared by several processes (the built-in `lock` recipe). Run it
//! a few times at once; each process acquires, holds for 1 s, releases:
//!
//! ```sh
//! for i in 1 2 3; do cargo run -p wazoo-examples --example lock & done; wait
//! ```
//!
//! Argument: the server (default 127.0.0.1:2181).

use std::time::{Duration, Instant};

use wazoo_client::recipes::Lock;
use wazoo_client::{Client, ClientOptions};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let server = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:2181".into());
    let (client, _events) = Client::connect(&server, ClientOptions::default()).await?;
    let me = format!("pid {}", std::process::id());
    let lock = Lock::new(&client, "/examples/lock").with_id(me.as_bytes());
    let start = Instant::now();
    println!("{me}: waiting for /examples/lock");
    let node = lock.acquire().await?;
    println!(
        "{me}: acquired after {:.1} s as {node}",
        start.elapsed().as_secs_f64()
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    lock.release().await?;
    println!("{me}: released");
    client.close().await?;
    Ok(())
}
