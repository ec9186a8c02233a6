//! A work queue with several workers (the built-in `queue` recipe): every
//! job is taken by exactly one worker.
//!
//! ```sh
//! cargo run -p wazoo-examples --example queue -- 127.0.0.1:2181 worker &   # as many as you like
//! cargo run -p wazoo-examples --example queue -- 127.0.0.1:2181 worker &
//! cargo run -p wazoo-examples --example queue -- 127.0.0.1:2181 producer 10 2
//! ```
//!
//! `producer JOBS WORKERS` puts JOBS jobs, then one "stop" item per worker;
//! a `worker` takes jobs until it takes a "stop".

use std::time::Duration;

use wazoo_client::recipes::Queue;
use wazoo_client::{Client, ClientOptions};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let server = args
        .first()
        .cloned()
        .unwrap_or_else(|| "127.0.0.1:2181".into());
    let role = args.get(1).map(String::as_str).unwrap_or("worker");
    let (client, _events) = Client::connect(&server, ClientOptions::default()).await?;
    let queue = Queue::new(&client, "/examples/jobs");
    let me = format!("pid {}", std::process::id());
    match role {
        "producer" => {
            let jobs: u32 = args.get(2).map(|s| s.parse()).transpose()?.unwrap_or(10);
            let workers: u32 = args.get(3).map(|s| s.parse()).transpose()?.unwrap_or(1);
            for i in 1..=jobs {
                queue.put(format!("job-{i}").as_bytes()).await?;
            }
            for _ in 0..workers {
                queue.put(b"stop").await?;
            }
            println!("producer {me}: put {jobs} jobs and {workers} stops");
        }
        "worker" => {
            let mut done = 0;
            loop {
                let item = String::from_utf8(queue.take().await?)?;
                if item == "stop" {
                    break;
                }
                println!("worker {me}: {item}");
                done += 1;
                // Pretend to work, so the jobs spread over the workers.
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            println!("worker {me}: stop after {done} jobs");
        }
        other => anyhow::bail!("unknown role {other:?}: producer JOBS WORKERS | worker"),
    }
    client.close().await?;
    Ok(())
}
