//! The `wazoo` command: `serve`, `dev`, `cli`, `import`, `backup`,
//! `restore` (docs/MIGRATION.md), and `recipe run` (docs/RECIPES.md).

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

/// mimalloc instead of the system allocator: the request path allocates
/// and frees small buffers on every member thread, where glibc's malloc
/// spent a third of the members' time (docs/ARCHITECTURE.md, "Threads").
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
        /// JAAS file with the SASL users (ZooKeeper's `Server` section,
        /// DigestLoginModule `user_NAME="password"` entries).
        #[arg(long)]
        jaas: Option<PathBuf>,
        /// Accept losing transactions: if the transaction log is corrupt,
        /// cut it at the first bad record (deleting later segments) and
        /// start, instead of refusing to. Records dropped may have been
        /// acknowledged; for a one-off start after reading
        /// docs/OPERATIONS.md, "A damaged transaction log".
        #[arg(long)]
        truncate_corrupt_log_tail: bool,
    },
    /// Run a local playground: a 3-member ensemble on 127.0.0.1:2181-2183
    /// with the built-in recipes, a super user (its password printed),
    /// Prometheus metrics on 7000-7002, the AdminServer on 8080-8082, on a
    /// default data directory.
    Dev {
        /// Where to keep data (default: ./wazoo-dev-data).
        #[arg(long, default_value = "wazoo-dev-data")]
        data_dir: PathBuf,
        /// A zoo.cfg key for all three members (repeatable). A port key
        /// (clientPort, secureClientPort, metricsProvider.httpPort,
        /// admin.serverPort) is the
        /// first member's; the others take the next two.
        #[arg(long = "set", value_name = "KEY=VALUE", value_parser = parse_set_arg)]
        set: Vec<(String, String)>,
        /// The first member's quorum port (the others take the next two).
        #[arg(long, default_value_t = 2888, value_parser = clap::value_parser!(u16).range(1..=65533))]
        quorum_port: u16,
        /// The first member's election port (the others take the next two).
        #[arg(long, default_value_t = 3888, value_parser = clap::value_parser!(u16).range(1..=65533))]
        election_port: u16,
    },
    /// An interactive shell (like zkCli) for wazoo or Apache ZooKeeper.
    Cli {
        /// Connection string: host:port[,host:port...][/chroot].
        #[arg(long, default_value = "127.0.0.1:2181")]
        server: String,
        /// Run one command, print its result and exit (non-zero on error).
        #[arg(short = 'c', long = "command")]
        command: Option<String>,
        /// The command as words after the options, as zkCli takes it:
        /// `wazoo cli -server HOST:PORT ls /`.
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            conflicts_with = "command"
        )]
        words: Vec<String>,
    },
    /// Write this member's data directory from an Apache ZooKeeper (3.5 to
    /// 3.9) data directory: its newest valid snapshot plus the logs after
    /// it (docs/MIGRATION.md).
    Import {
        /// ZooKeeper's dataDir (or its version-2 directory).
        #[arg(long)]
        zookeeper_data: PathBuf,
        /// ZooKeeper's dataLogDir, if the logs are not in dataDir.
        #[arg(long)]
        zookeeper_log: Option<PathBuf>,
        /// zoo.cfg of the wazoo member to write (its dataDir must be empty).
        #[arg(long)]
        config: PathBuf,
    },
    /// Take a consistent snapshot of a running member over its client port
    /// (the super user's credentials are needed).
    Backup {
        /// The member's client address, host:port.
        #[arg(long)]
        server: String,
        /// The file to write.
        #[arg(long)]
        out: PathBuf,
        /// The super user's user:password (default: $WAZOO_BACKUP_AUTH).
        #[arg(long)]
        auth: Option<String>,
    },
    /// Write a member's data directory from a backup (for an ensemble,
    /// restore every member from the same file), or, with
    /// --zookeeper-data, an Apache ZooKeeper data directory.
    Restore {
        /// The backup file.
        #[arg(long)]
        from: PathBuf,
        /// zoo.cfg of the member to write (its dataDir must be empty).
        #[arg(long, required_unless_present = "zookeeper_data")]
        config: Option<PathBuf>,
        /// Write ZooKeeper's dataDir instead (a snapshot in ZooKeeper's
        /// format under version-2, which must hold none).
        #[arg(long, conflicts_with = "config")]
        zookeeper_data: Option<PathBuf>,
    },
    /// Recipe authors' tools (docs/RECIPES.md).
    Recipe {
        #[command(subcommand)]
        cmd: RecipeCmd,
    },
}

#[derive(Subcommand)]
enum RecipeCmd {
    /// Run one call of a module against an in-memory tree (empty, or a
    /// wazoo snapshot or backup file) with the real sandbox and limits;
    /// print the reply, the staged ops and the waits. Nothing is written.
    Run {
        /// The module (.wasm).
        file: PathBuf,
        /// The method to call.
        method: String,
        /// The arguments, JSON (sent as MessagePack, as `wazoo cli` does).
        #[arg(default_value = "null")]
        args: String,
        /// A wazoo snapshot file or a `wazoo backup` file to run against.
        #[arg(long)]
        tree: Option<PathBuf>,
        /// The calling session id (hex with 0x, or decimal).
        #[arg(long, default_value = "0x1")]
        session: String,
        /// Fuel per call (the server's `recipe.fuel` default unless given).
        #[arg(long)]
        fuel: Option<u64>,
        /// The leader's clock for the step, ms since the epoch: the ctime
        /// and mtime of its writes (default: this machine's clock now).
        #[arg(long)]
        now_ms: Option<i64>,
    },
}

/// `wazoo dev --set KEY=VALUE`.
fn parse_set_arg(s: &str) -> Result<(String, String), String> {
    wazoo::dev::parse_set(s).map_err(|e| format!("{e:#}"))
}

/// A session id as `wazoo recipe run` takes it.
fn parse_session(s: &str) -> Result<i64> {
    let n = match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).map(|n| n as i64),
        None => s.parse::<i64>(),
    };
    n.map_err(|_| anyhow::anyhow!("--session {s:?}: a session id is 0x-hex or decimal"))
}

/// Logs at `WAZOO_LOG`'s levels (info when unset); a value that names no
/// level is an error, not silence (see `wazoo::logging`).
fn init_tracing() -> Result<()> {
    let spec = std::env::var("WAZOO_LOG").unwrap_or_default();
    let directives = wazoo::logging::filter_directives(&spec)?;
    let filter = if directives.is_empty() {
        tracing_subscriber::EnvFilter::new("info")
    } else {
        tracing_subscriber::EnvFilter::try_new(&directives)
            .map_err(|e| anyhow::anyhow!("WAZOO_LOG={spec:?}: {e}"))?
    };
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
    Ok(())
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
    for k in cfg.unknown.keys() {
        tracing::warn!("{}", wazoo::config::unused_key_note(k));
    }
    let member = wazoo::member::Member::start(cfg).await?;
    let result = member
        .run_until(async {
            shutdown_signal().await;
            tracing::info!("shutting down on a signal: closing clients and the transaction log");
        })
        .await;
    match &result {
        Ok(()) => tracing::info!("wazoo stopped"),
        Err(e) => tracing::error!("wazoo stopped: {e:#}"),
    }
    result
}

/// `wazoo dev`: the playground of [`wazoo::dev`], three members in this
/// process, until a signal.
async fn dev(o: &wazoo::dev::DevOptions) -> Result<()> {
    let plugins = o.plugins_dir();
    let n = wazoo::builtin::install(&plugins).with_context(|| {
        format!(
            "cannot install the built-in recipes in {}",
            plugins.display()
        )
    })?;
    if n == 0 {
        tracing::warn!(
            "this binary was built without the built-in recipes (the wasm32-unknown-unknown target was missing; scripts/setup.sh installs it)"
        );
    }
    let (cfgs, password) = wazoo::dev::member_configs(o)?;
    // The members share their keys: unused ones are noted once.
    for k in cfgs[0].unknown.keys() {
        tracing::warn!("{}", wazoo::config::unused_key_note(k));
    }
    let mut starts = Vec::new();
    for mut cfg in cfgs {
        let dir = cfg.data_dir.clone();
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let id = cfg.my_id.expect("dev members have ids");
        std::fs::write(dir.join("myid"), id.to_string())
            .with_context(|| format!("cannot write {}/myid", dir.display()))?;
        if n == 0 {
            // No modules in the directory: the runtime still starts (and
            // says the binary has none).
            cfg.builtin_recipes = true;
        }
        // The members start side by side (each on a thread of its own).
        starts.push(tokio::spawn(wazoo::member::Member::start(cfg)));
    }
    let mut members = Vec::new();
    for s in starts {
        members.push(s.await.context("a member's start failed")??);
    }
    let exe = std::env::current_exe()
        .and_then(|p| p.canonicalize())
        .unwrap_or_else(|_| PathBuf::from("wazoo"));
    print!("{}", wazoo::dev::banner(o, n, password.as_deref(), &exe));
    let (stop_tx, _) = tokio::sync::broadcast::channel::<()>(1);
    let mut runs = Vec::new();
    for m in members {
        let mut rx = stop_tx.subscribe();
        runs.push(tokio::spawn(async move {
            m.run_until(async move {
                let _ = rx.recv().await;
            })
            .await
        }));
    }
    shutdown_signal().await;
    let _ = stop_tx.send(());
    for r in runs {
        r.await.map_err(|e| anyhow::anyhow!("{e}"))??;
    }
    Ok(())
}

/// zkCli's options as `wazoo cli` takes them: its single-dash `-server
/// HOST:PORT` becomes `--server` (only among the options, not in the
/// command words after them).
fn zkcli_args(args: impl IntoIterator<Item = std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    let mut v: Vec<std::ffi::OsString> = args.into_iter().collect();
    if v.get(1).is_some_and(|a| a == "cli") {
        let mut i = 2;
        while i < v.len() {
            let a = v[i].to_string_lossy().into_owned();
            if a == "-server" {
                v[i] = "--server".into();
            }
            match a.as_str() {
                "-server" | "--server" | "-c" | "--command" => i += 2,
                a if a.starts_with('-') => i += 1,
                _ => break,
            }
        }
    }
    v
}

/// Command words given after the options, joined into one command line
/// (a word with spaces quoted, so that the shell splits it back the same).
fn join_words(words: &[String]) -> String {
    let quoted: Vec<String> = words
        .iter()
        .map(|w| {
            match (
                w.is_empty() || w.contains(char::is_whitespace),
                w.contains('\''),
            ) {
                (false, _) => w.clone(),
                (true, false) => format!("'{w}'"),
                (true, true) => format!("\"{w}\""),
            }
        })
        .collect();
    quoted.join(" ")
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse_from(zkcli_args(std::env::args_os()));
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
            Cmd::Serve {
                config,
                plugins,
                jaas,
                truncate_corrupt_log_tail,
            } => {
                init_tracing()?;
                let mut cfg = wazoo::config::Config::load(&config)?;
                if let Some(jaas) = jaas {
                    // A file wazoo cannot honour refuses the start; its
                    // errors never quote a password.
                    let users = wazoo::sasl::SaslUsers::load(&jaas)?;
                    cfg.sasl.users = Some(std::sync::Arc::new(users));
                }
                if plugins.is_some() {
                    cfg.plugins_dir = plugins;
                }
                cfg.truncate_corrupt_log_tail = truncate_corrupt_log_tail;
                serve(cfg).await.map(|_| 0)
            }
            Cmd::Dev {
                data_dir,
                set,
                quorum_port,
                election_port,
            } => {
                init_tracing()?;
                let o = wazoo::dev::DevOptions {
                    data_dir,
                    sets: set,
                    quorum_port,
                    election_port,
                };
                dev(&o).await.map(|_| 0)
            }
            Cmd::Import {
                zookeeper_data,
                zookeeper_log,
                config,
            } => wazoo::import::run_import(&config, &zookeeper_data, zookeeper_log.as_deref())
                .map(|_| 0),
            Cmd::Backup { server, out, auth } => {
                wazoo::backup::run_backup(&server, &out, auth).map(|_| 0)
            }
            Cmd::Restore {
                from,
                config,
                zookeeper_data,
            } => match (config, zookeeper_data) {
                (_, Some(dir)) => wazoo::backup::run_restore_to_zookeeper(&from, &dir).map(|_| 0),
                (Some(config), None) => wazoo::backup::run_restore(&from, &config).map(|_| 0),
                (None, None) => unreachable!("clap requires --config or --zookeeper-data"),
            },
            Cmd::Recipe {
                cmd:
                    RecipeCmd::Run {
                        file,
                        method,
                        args,
                        tree,
                        session,
                        fuel,
                        now_ms,
                    },
            } => {
                init_tracing()?;
                let d = wazoo::config::RecipeLimits::default();
                let limits = wazoo::plugin::Limits {
                    fuel: fuel.unwrap_or(d.fuel),
                    deadline: std::time::Duration::from_millis(d.deadline_ms),
                    memory_bytes: d.memory_bytes,
                    max_ops: d.max_ops,
                    max_reply_bytes: d.max_reply_bytes,
                    max_notifications: d.max_notifications,
                    ..Default::default()
                };
                let session = parse_session(&session)?;
                let now_ms = now_ms.unwrap_or_else(|| {
                    std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_millis() as i64)
                });
                wazoo::recipe_run::run_file(
                    &file,
                    &method,
                    &args,
                    tree.as_deref(),
                    session,
                    limits,
                    now_ms,
                )
                .map(|_| 0)
            }
            Cmd::Cli {
                server,
                command,
                words,
            } => {
                let command = command.or_else(|| (!words.is_empty()).then(|| join_words(&words)));
                wazoo_client::shell::run(&server, command.as_deref()).await
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &[&str]) -> Vec<String> {
        zkcli_args(s.iter().map(std::ffi::OsString::from))
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect()
    }

    #[test]
    fn cli_takes_zkclis_single_dash_server_among_its_options_only() {
        assert_eq!(
            args(&["wazoo", "cli", "-server", "h:1", "ls", "-server"]),
            ["wazoo", "cli", "--server", "h:1", "ls", "-server"]
        );
        assert_eq!(
            args(&["wazoo", "cli", "-c", "-server", "-server", "h:1"]),
            ["wazoo", "cli", "-c", "-server", "--server", "h:1"]
        );
        assert_eq!(
            args(&["wazoo", "serve", "-server"]),
            ["wazoo", "serve", "-server"]
        );
        let cli = Cli::parse_from(args(&["wazoo", "cli", "-server", "h:1", "get", "-s", "/a"]));
        let Cmd::Cli {
            server,
            command,
            words,
        } = cli.cmd
        else {
            panic!("not cli")
        };
        assert_eq!(
            (server.as_str(), command, words),
            ("h:1", None, vec!["get".into(), "-s".into(), "/a".into()])
        );
    }

    #[test]
    fn serve_takes_truncate_corrupt_log_tail_off_by_default() {
        let flag = |argv: &[&str]| match Cli::parse_from(argv.iter().copied()).cmd {
            Cmd::Serve {
                truncate_corrupt_log_tail,
                ..
            } => truncate_corrupt_log_tail,
            _ => panic!("not serve"),
        };
        assert!(!flag(&["wazoo", "serve", "--config", "z.cfg"]));
        assert!(flag(&[
            "wazoo",
            "serve",
            "--config",
            "z.cfg",
            "--truncate-corrupt-log-tail"
        ]));
    }

    #[test]
    fn command_words_join_into_a_line_the_shell_splits_back() {
        let words: Vec<String> = ["create", "/a", "two words", "it's here", ""]
            .iter()
            .map(|w| w.to_string())
            .collect();
        let line = join_words(&words);
        assert_eq!(wazoo_client::shell::tokenize(&line).unwrap(), words);
    }
}
