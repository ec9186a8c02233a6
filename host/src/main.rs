//! The `wazoo` command: `serve`, `dev` and `cli`.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "wazoo",
    version,
    about = "A ZooKeeper-compatible coordination server"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run one member from a ZooKeeper-format config file (zoo.cfg).
    Serve {
        /// Path to zoo.cfg.
        #[arg(long)]
        config: PathBuf,
        /// Directory of recipe modules to load and watch.
        #[arg(long)]
        plugins: Option<PathBuf>,
    },
    /// Run a local development server on 127.0.0.1:2181 with a default data directory.
    Dev {
        /// Where to keep data (default: ./wazoo-dev-data).
        #[arg(long, default_value = "wazoo-dev-data")]
        data_dir: PathBuf,
    },
    /// An interactive shell (like zkCli) for wazoo or Apache ZooKeeper.
    Cli {
        /// Connection string: host:port[,host:port...][/chroot].
        #[arg(long, default_value = "127.0.0.1:2181")]
        server: String,
        /// Run one command, print its result and exit (non-zero on error).
        #[arg(short = 'c', long = "command")]
        command: Option<String>,
    },
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("WAZOO_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let json = std::env::var("WAZOO_LOG_FORMAT").is_ok_and(|v| v == "json");
    let b = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    if json {
        b.json().init();
    } else {
        b.init();
    }
}

async fn shutdown_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

async fn serve(cfg: wazoo::config::Config) -> Result<()> {
    for (k, v) in &cfg.unknown {
        tracing::warn!("zoo.cfg key {k}={v} is not used by wazoo");
    }
    if cfg.is_ensemble() {
        anyhow::bail!(
            "this config has server.N lines: ensemble mode is not implemented yet; remove them to run standalone"
        );
    }
    let member = wazoo::member::Member::start(cfg).await?;
    member.run_until(shutdown_signal()).await
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("wazoo: cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result: Result<i32> = rt.block_on(async move {
        match cli.cmd {
            Cmd::Serve { config, plugins } => {
                init_tracing();
                let mut cfg = wazoo::config::Config::load(&config)?;
                if plugins.is_some() {
                    cfg.plugins_dir = plugins;
                }
                serve(cfg).await.map(|_| 0)
            }
            Cmd::Dev { data_dir } => {
                init_tracing();
                std::fs::create_dir_all(&data_dir)
                    .with_context(|| format!("cannot create {}", data_dir.display()))?;
                let text = format!(
                    "tickTime=2000\ndataDir={}\nclientPort=2181\nclientPortAddress=127.0.0.1\n4lw.commands.whitelist=*\nextendedTypesEnabled=true\n",
                    data_dir.display()
                );
                let cfg = wazoo::config::Config::parse(&text)?;
                tracing::warn!("wazoo dev runs one standalone member for now (the 3-member ensemble is not implemented yet)");
                serve(cfg).await.map(|_| 0)
            }
            Cmd::Cli { server, command } => wazoo_client::shell::run(&server, command.as_deref()).await,
        }
    });
    match result {
        Ok(0) => std::process::ExitCode::SUCCESS,
        Ok(code) => std::process::ExitCode::from(code.clamp(1, 255) as u8),
        Err(e) => {
            eprintln!("wazoo: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
