//! The interactive shell of `wazoo cli`, in the spirit of ZooKeeper's
//! zkCli: the same commands, flags and output formats, plus `watch` (wait
//! for one event) and `call` (a wazoo recipe call).
//!
//! Interactive mode has line editing, tab completion of commands and paths,
//! and history (kept in `~/.wazoo_cli_history`, written after every
//! command); Ctrl-C stops the running command, not the shell. `-c COMMAND`
//! runs one command, prints its result and returns a non-zero exit code on
//! failure (1: the command failed, 2: it was not understood), with the
//! message on stderr. A server that refuses connections is reported at
//! once ("connection refused"), not after the connect wait.
//!
//! Layout: `parse` (the command table, words, flags), `ops` (the commands
//! on nodes), `quota` (setquota, listquota, delquota), `admin` (config,
//! reconfig), [`format`](mod@format) (zkCli's output formats), [`complete`] (tab
//! completion), `interactive` (the line editor loop); this module holds the
//! session and runs a command line.

mod admin;
pub mod complete;
pub mod format;
mod interactive;
mod ops;
mod parse;
mod quota;

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::client::{Client, ClientOptions};
use crate::error::Error;
use crate::session::SessionState;
use crate::watch::{PersistentWatch, WatchReceiver};

use interactive::run_interactive;
pub use parse::tokenize;
use parse::{parse, SPECS};

/// How the shell connects.
#[derive(Debug, Clone)]
pub struct ShellOptions {
    /// The session timeout to ask for (zkCli: 30 s).
    pub session_timeout: Duration,
    /// How long to wait for the first connection before giving up (a
    /// refused connection fails sooner, see [`Shell::connect`]).
    pub connect_wait: Duration,
}

impl Default for ShellOptions {
    fn default() -> Self {
        ShellOptions {
            session_timeout: Duration::from_secs(30),
            connect_wait: Duration::from_secs(15),
        }
    }
}

/// Runs the shell against `server` (a connection string): interactive when
/// `command` is `None`, else that one command. Returns the exit code.
pub async fn run(server: &str, command: Option<&str>) -> anyhow::Result<i32> {
    match command {
        Some(cmd) => {
            let mut out = std::io::stdout();
            let mut err = std::io::stderr();
            run_command(server, cmd, ShellOptions::default(), &mut out, &mut err).await
        }
        None => run_interactive(server, ShellOptions::default()).await,
    }
}

/// `-c` mode with explicit options and output streams: connects, runs
/// `command`, closes the session. Returns the exit code (0 ok, 1 the
/// command failed or no server could be reached, 2 bad usage).
pub async fn run_command(
    server: &str,
    command: &str,
    options: ShellOptions,
    out: &mut (dyn Write + Send),
    err: &mut (dyn Write + Send),
) -> anyhow::Result<i32> {
    let mut shell = Shell::new(server, options, Notifier::silent());
    if let Err(e) = shell.connect(server).await {
        writeln!(err, "{e}")?;
        return Ok(1);
    }
    let code = match shell.execute(command, out).await {
        Ok(Flow::Continue | Flow::Quit) => 0,
        Err(e) => {
            writeln!(err, "{}", e.message())?;
            e.exit_code()
        }
    };
    out.flush()?;
    shell.close().await;
    Ok(code)
}

/// Where the shell prints what happens in the background (watch events,
/// session changes).
#[derive(Clone)]
pub struct Notifier(Arc<dyn Fn(String) + Send + Sync>);

impl Notifier {
    pub fn new(f: impl Fn(String) + Send + Sync + 'static) -> Notifier {
        Notifier(Arc::new(f))
    }

    /// Prints nothing (one-command mode).
    pub fn silent() -> Notifier {
        Notifier::new(|_| {})
    }

    fn send(&self, msg: String) {
        (self.0)(msg)
    }
}

/// Why a command did not succeed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandError {
    /// Not understood: the message is the usage.
    Usage(String),
    /// Understood, but it failed.
    Failed(String),
}

impl CommandError {
    pub fn message(&self) -> &str {
        match self {
            CommandError::Usage(m) | CommandError::Failed(m) => m,
        }
    }

    pub fn exit_code(&self) -> i32 {
        match self {
            CommandError::Usage(_) => 2,
            CommandError::Failed(_) => 1,
        }
    }
}

/// What the loop does after a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Continue,
    Quit,
}

type CmdResult = Result<Flow, CommandError>;

/// How [`Shell::execute_until`] ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The command ran to its end.
    Done(Result<Flow, CommandError>),
    /// The interrupt came first: the command was stopped (requests it had
    /// sent may still take effect on the server, as when zkCli is stopped).
    Interrupted,
}

/// How long the shell waits for a first connection before it checks
/// whether the servers refuse connections.
const REFUSED_CHECK_AFTER: Duration = Duration::from_millis(200);
/// How long that check waits for one address.
const REFUSED_CHECK_WAIT: Duration = Duration::from_millis(500);

/// Whether every address of every server in the connection string refuses
/// a TCP connection (nothing listens there). A name that does not resolve,
/// an address that accepts or does not answer in time: not refused.
async fn every_address_refuses(server: &str) -> bool {
    let Ok(cs) = server.parse::<crate::connect_string::ConnectString>() else {
        return false;
    };
    let mut tried = 0usize;
    for h in &cs.hosts {
        let lookup = tokio::net::lookup_host((h.host.as_str(), h.port));
        let Ok(Ok(addrs)) = tokio::time::timeout(REFUSED_CHECK_WAIT, lookup).await else {
            return false;
        };
        for a in addrs {
            tried += 1;
            match tokio::time::timeout(REFUSED_CHECK_WAIT, tokio::net::TcpStream::connect(a)).await
            {
                Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {}
                _ => return false,
            }
        }
    }
    tried > 0
}

/// The shell's state: one session (or none after `close`), the history.
pub struct Shell {
    server: String,
    options: ShellOptions,
    client: Option<Client>,
    history: Vec<String>,
    notifier: Notifier,
    print_watches: Arc<Mutex<bool>>,
}

impl Shell {
    pub fn new(server: &str, options: ShellOptions, notifier: Notifier) -> Shell {
        Shell {
            server: server.to_string(),
            options,
            client: None,
            history: Vec::new(),
            notifier,
            print_watches: Arc::new(Mutex::new(true)),
        }
    }

    /// The client of the current session, if any.
    pub fn client(&self) -> Option<&Client> {
        self.client.as_ref()
    }

    /// The prompt state: zkCli's `ZooKeeper.States` names.
    pub fn state_name(&self) -> &'static str {
        self.client
            .as_ref()
            .map(|c| c.state().zk_name())
            .unwrap_or("CLOSED")
    }

    /// Opens a session to `server` (closing the current one). Fails after
    /// `connect_wait` without a server, or at once (well within a second)
    /// when every address refuses the connection.
    pub async fn connect(&mut self, server: &str) -> Result<(), String> {
        self.close().await;
        let opts = ClientOptions::default().session_timeout(self.options.session_timeout);
        let fail = |why: String| format!("Unable to connect to {server}: {why}");
        let (client, mut events) = Client::start(server, opts).map_err(|e| fail(e.to_string()))?;
        let result = {
            let wait = self.options.connect_wait;
            let connected = async {
                tokio::time::timeout(wait, client.wait_until_connected())
                    .await
                    .unwrap_or(Err(Error::ConnectionLoss))
            };
            tokio::pin!(connected);
            // A server that is up answers at once. If none has yet, and every
            // address refuses a connection, waiting out `connect_wait` would
            // only hide that (zkCli fails at once there too).
            match tokio::time::timeout(REFUSED_CHECK_AFTER, &mut connected).await {
                Ok(r) => r.map_err(|e| e.to_string()),
                Err(_) if every_address_refuses(server).await => Err("connection refused".into()),
                Err(_) => connected.await.map_err(|e| e.to_string()),
            }
        };
        if let Err(why) = result {
            let _ = client.close().await;
            return Err(fail(why));
        }
        self.server = server.to_string();
        let notify = self.notifier.clone();
        let print = self.print_watches.clone();
        tokio::spawn(async move {
            // The first Connecting/Connected pair was the connect
            // itself; report what happens after.
            let mut seen_connected = false;
            while let Some(s) = events.recv().await {
                if !seen_connected {
                    seen_connected = s.is_connected();
                    continue;
                }
                if s == SessionState::Connecting {
                    continue;
                }
                if *print.lock().unwrap_or_else(|e| e.into_inner()) {
                    if let Some(ks) = s.keeper_state() {
                        notify.send(format!(
                            "\nWATCHER::\n\nWatchedEvent state:{ks:?} type:None path:null\n"
                        ));
                    }
                }
            }
        });
        self.client = Some(client);
        Ok(())
    }

    /// Closes the session, if any.
    pub async fn close(&mut self) {
        if let Some(c) = self.client.take() {
            let _ = c.close().await;
        }
    }

    fn zk(&self) -> Result<&Client, CommandError> {
        self.client.as_ref().ok_or_else(|| {
            CommandError::Failed("not connected: the session is closed (use connect)".into())
        })
    }

    /// Runs one command line until it ends or `interrupt` completes, which
    /// stops it (Ctrl-C in the interactive shell). A stopped `watch`
    /// forgets its watch here, as one that fired does.
    pub async fn execute_until(
        &mut self,
        line: &str,
        out: &mut (dyn Write + Send),
        interrupt: impl std::future::Future<Output = ()>,
    ) -> Outcome {
        let done = tokio::select! {
            r = self.execute(line, out) => Some(r),
            _ = interrupt => None,
        };
        match done {
            Some(r) => Outcome::Done(r),
            None => {
                let words = tokenize(line).unwrap_or_default();
                if let (Some("watch"), Some(path), Some(zk)) = (
                    words.first().map(String::as_str),
                    words.iter().skip(1).find(|w| !w.starts_with('-')),
                    self.client.clone(),
                ) {
                    let forget = zk.remove_watches(path, wazoo_proto::WatcherType::Any, true);
                    let _ = tokio::time::timeout(Duration::from_secs(1), forget).await;
                }
                Outcome::Interrupted
            }
        }
    }

    /// Runs one command line, writing its output to `out`.
    pub async fn execute(&mut self, line: &str, out: &mut (dyn Write + Send)) -> CmdResult {
        let words = tokenize(line).map_err(CommandError::Usage)?;
        if words.is_empty() {
            return Ok(Flow::Continue);
        }
        if words[0] != "history" && words[0] != "redo" {
            self.history.push(line.trim().to_string());
        }
        let args = parse(&words)?;
        let w =
            |r: std::io::Result<()>| r.map_err(|e| CommandError::Failed(format!("output: {e}")));
        match args.spec.name {
            "help" => w(self.help(out)).map(|_| Flow::Continue),
            "quit" => Ok(Flow::Quit),
            "history" => {
                let start = self.history.len().saturating_sub(10);
                for (i, h) in self.history.iter().enumerate().skip(start) {
                    w(writeln!(out, "{i} - {h}"))?;
                }
                Ok(Flow::Continue)
            }
            "redo" => {
                let n: usize = args.pos[0].parse().map_err(|_| args.usage())?;
                let Some(line) = self.history.get(n).cloned() else {
                    return Err(CommandError::Failed(format!(
                        "no command {n} in the history"
                    )));
                };
                Box::pin(self.execute(&line, out)).await
            }
            "version" => w(writeln!(out, "wazoo-client {}", env!("CARGO_PKG_VERSION")))
                .map(|_| Flow::Continue),
            "printwatches" => {
                match args.pos.first().map(String::as_str) {
                    Some("on") => {
                        *self.print_watches.lock().unwrap_or_else(|e| e.into_inner()) = true
                    }
                    Some("off") => {
                        *self.print_watches.lock().unwrap_or_else(|e| e.into_inner()) = false
                    }
                    None => {
                        let on = *self.print_watches.lock().unwrap_or_else(|e| e.into_inner());
                        w(writeln!(
                            out,
                            "printwatches is {}",
                            if on { "on" } else { "off" }
                        ))?;
                    }
                    Some(_) => return Err(args.usage()),
                }
                Ok(Flow::Continue)
            }
            "close" => {
                self.close().await;
                Ok(Flow::Continue)
            }
            "connect" => {
                let server = args
                    .pos
                    .first()
                    .cloned()
                    .unwrap_or_else(|| self.server.clone());
                self.connect(&server).await.map_err(CommandError::Failed)?;
                Ok(Flow::Continue)
            }
            _ => {
                // zkCli names the path in most errors; config and
                // reconfig have none (their words are options).
                let path = match args.spec.name {
                    "config" | "reconfig" => String::new(),
                    _ => args.pos.first().cloned().unwrap_or_default(),
                };
                let zk = self.zk()?.clone();
                match self.run_op(&zk, &args, out).await {
                    Ok(()) => Ok(Flow::Continue),
                    Err(OpError::Zk(e)) => Err(CommandError::Failed(format::error(&e, &path))),
                    Err(OpError::Cmd(e)) => Err(e),
                }
            }
        }
    }

    fn help(&self, out: &mut (dyn Write + Send)) -> std::io::Result<()> {
        writeln!(
            out,
            "wazoo cli --server host:port[,host:port...][/chroot] [-c \"COMMAND\"]"
        )?;
        for s in SPECS {
            writeln!(out, "\t{}", s.usage)?;
            writeln!(out, "\t\t{}", s.help)?;
        }
        writeln!(out, "In -c mode the exit code is 0 on success, 1 if the command failed, 2 if it was not understood.")
    }

    pub(super) fn watch_printer(&self, w: WatchReceiver) {
        let notify = self.notifier.clone();
        let print = self.print_watches.clone();
        tokio::spawn(async move {
            let ev = w.await;
            if ev.is_node_event() && *print.lock().unwrap_or_else(|e| e.into_inner()) {
                notify.send(format!("\nWATCHER::\n\n{ev}\n"));
            }
        });
    }

    fn stream_printer(&self, mut w: PersistentWatch) {
        let notify = self.notifier.clone();
        let print = self.print_watches.clone();
        tokio::spawn(async move {
            while let Some(ev) = w.next_node_event().await {
                if *print.lock().unwrap_or_else(|e| e.into_inner()) {
                    notify.send(format!("\nWATCHER::\n\n{ev}\n"));
                }
            }
        });
    }
}

enum OpError {
    Zk(Error),
    Cmd(CommandError),
}

impl From<Error> for OpError {
    fn from(e: Error) -> OpError {
        OpError::Zk(e)
    }
}

impl From<CommandError> for OpError {
    fn from(e: CommandError) -> OpError {
        OpError::Cmd(e)
    }
}

fn cmd_failed(msg: impl Into<String>) -> OpError {
    OpError::Cmd(CommandError::Failed(msg.into()))
}

fn wr(r: std::io::Result<()>) -> Result<(), OpError> {
    r.map_err(|e| cmd_failed(format!("output: {e}")))
}
