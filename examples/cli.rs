//! The shell outside of the `wazoo` binary:
//! `cargo run -p wazoo-examples --example cli -- 127.0.0.1:2181 [-c "ls /"]`.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let server = args.first().map(String::as_str).unwrap_or("127.0.0.1:2181");
    let command = match args.get(1).map(String::as_str) {
        Some("-c") => Some(args.get(2).map(String::as_str).unwrap_or("")),
        Some(other) => anyhow::bail!("usage: cli SERVER [-c COMMAND] (got {other:?})"),
        None => None,
    };
    let code = wazoo_client::shell::run(server, command).await?;
    std::process::exit(code);
}
