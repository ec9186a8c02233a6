//! A double barrier (the built-in `double_barrier` recipe): three workers
//! (each with its own session) start the computation together and finish
//! it together, though they arrive and finish at different times.
//!
//! ```sh
//! cargo run -p wazoo-examples --example double_barrier [-- SERVER]
//! ```

use std::time::{Duration, Instant};

use wazoo_client::recipes::DoubleBarrier;
use wazoo_client::{Client, ClientOptions};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let server = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:2181".into());
    let path = format!("/examples/barrier-{}", std::process::id());
    let start = Instant::now();
    let mut tasks = Vec::new();
    for (i, (arrive, work)) in [(0u64, 900u64), (400, 100), (800, 500)]
        .into_iter()
        .enumerate()
    {
        let (c, _e) = Client::connect(&server, ClientOptions::default()).await?;
        let path = path.clone();
        tasks.push(tokio::spawn(async move {
            let t = || format!("{:4} ms", start.elapsed().as_millis());
            let b = DoubleBarrier::new(&c, &path, &format!("worker-{i}"), 3);
            tokio::time::sleep(Duration::from_millis(arrive)).await;
            println!("{} worker-{i}: entering", t());
            b.enter().await?;
            println!("{} worker-{i}: entered, working {work} ms", t());
            tokio::time::sleep(Duration::from_millis(work)).await;
            println!("{} worker-{i}: leaving", t());
            b.leave().await?;
            println!("{} worker-{i}: left", t());
            c.close().await?;
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(())
}
