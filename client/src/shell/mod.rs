//! The interactive shell of `wazoo cli`, in the spirit of ZooKeeper's
//! zkCli: the same commands, flags and output formats, plus `watch` (wait
//! for one event) and `call` (a wazoo recipe call).
//!
//! Interactive mode has line editing and history (kept in
//! `~/.wazoo_cli_history`); `-c COMMAND` runs one command, prints its result
//! and returns a non-zero exit code on failure (1: the command failed,
//! 2: it was not understood), with the message on stderr.

pub mod format;

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use wazoo_proto::{Acl, AddWatchMode, CreateMode, WatcherType};
use wazoo_sdk::abi::{self, Notification, Reply};

use crate::client::{Client, ClientOptions};
use crate::error::Error;
use crate::session::SessionState;
use crate::watch::{PersistentWatch, WatchReceiver};

/// How the shell connects.
#[derive(Debug, Clone)]
pub struct ShellOptions {
    /// The session timeout to ask for (zkCli: 30 s).
    pub session_timeout: Duration,
    /// How long to wait for the first connection before giving up.
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

struct Spec {
    name: &'static str,
    usage: &'static str,
    help: &'static str,
    /// Flags without a value.
    switches: &'static str,
    /// Flags with a value.
    valued: &'static str,
    min: usize,
    max: usize,
}

const SPECS: &[Spec] = &[
    Spec { name: "addWatch", usage: "addWatch [-m mode] path", help: "persistent watch; mode PERSISTENT or PERSISTENT_RECURSIVE (default)", switches: "", valued: "m", min: 1, max: 1 },
    Spec { name: "addauth", usage: "addauth scheme auth", help: "add credentials to the session, e.g. addauth digest user:password", switches: "", valued: "", min: 2, max: 2 },
    Spec { name: "call", usage: "call module method [args]", help: "call a wazoo recipe; args are JSON (sent as MessagePack) or raw MessagePack as 0x-hex; waits when the recipe waits; prints the result as JSON (or 0x-hex)", switches: "", valued: "", min: 2, max: 3 },
    Spec { name: "close", usage: "close", help: "close the session", switches: "", valued: "", min: 0, max: 0 },
    Spec { name: "connect", usage: "connect [host:port,...[/chroot]]", help: "open a new session (to the same servers if none given)", switches: "", valued: "", min: 0, max: 1 },
    Spec { name: "create", usage: "create [-s] [-e] [-c] [-t ttl] path [data] [acl]", help: "create a node: -s sequential, -e ephemeral, -c container, -t ttl in ms", switches: "sec", valued: "t", min: 1, max: 3 },
    Spec { name: "delete", usage: "delete [-v version] path", help: "delete a node", switches: "", valued: "v", min: 1, max: 1 },
    Spec { name: "deleteall", usage: "deleteall path [-b batch size]", help: "delete a node and everything below it", switches: "", valued: "b", min: 1, max: 1 },
    Spec { name: "get", usage: "get [-s] [-w] path", help: "print the data (-s with the stat, -w set a watch)", switches: "sw", valued: "", min: 1, max: 1 },
    Spec { name: "getAcl", usage: "getAcl [-s] path", help: "print the ACL", switches: "s", valued: "", min: 1, max: 1 },
    Spec { name: "getAllChildrenNumber", usage: "getAllChildrenNumber path", help: "count the nodes below a node", switches: "", valued: "", min: 1, max: 1 },
    Spec { name: "getEphemerals", usage: "getEphemerals [path]", help: "list this session's ephemeral nodes", switches: "", valued: "", min: 0, max: 1 },
    Spec { name: "help", usage: "help", help: "this list", switches: "", valued: "", min: 0, max: 1 },
    Spec { name: "history", usage: "history", help: "the last commands", switches: "", valued: "", min: 0, max: 0 },
    Spec { name: "ls", usage: "ls [-s] [-w] [-R] path", help: "list children (-s with the stat, -w set a watch, -R the whole subtree)", switches: "swR", valued: "", min: 1, max: 1 },
    Spec { name: "printwatches", usage: "printwatches on|off", help: "print watch events as they come", switches: "", valued: "", min: 0, max: 1 },
    Spec { name: "quit", usage: "quit", help: "leave the shell", switches: "", valued: "", min: 0, max: 0 },
    Spec { name: "redo", usage: "redo cmdno", help: "run a command of the history again", switches: "", valued: "", min: 1, max: 1 },
    Spec { name: "removewatches", usage: "removewatches path [-c|-d|-a] [-l]", help: "remove watches (-c child, -d data, -a any; -l locally only)", switches: "cdal", valued: "", min: 1, max: 1 },
    Spec { name: "set", usage: "set [-s] [-v version] path data", help: "set the data", switches: "s", valued: "v", min: 2, max: 2 },
    Spec { name: "setAcl", usage: "setAcl [-s] [-v version] [-R] path acl", help: "set the ACL, e.g. world:anyone:cdrwa,digest:user:hash:r", switches: "sR", valued: "v", min: 2, max: 2 },
    Spec { name: "stat", usage: "stat [-w] path", help: "print the stat", switches: "w", valued: "", min: 1, max: 1 },
    Spec { name: "sync", usage: "sync path", help: "make the server catch up with the leader", switches: "", valued: "", min: 1, max: 1 },
    Spec { name: "version", usage: "version", help: "the client's version", switches: "", valued: "", min: 0, max: 0 },
    Spec { name: "watch", usage: "watch [-R] path", help: "wait for one event on the node (-R: or below it) and print it", switches: "R", valued: "", min: 1, max: 1 },
    Spec { name: "whoami", usage: "whoami", help: "the identities of the session", switches: "", valued: "", min: 0, max: 0 },
];

/// A parsed command line.
struct Args {
    spec: &'static Spec,
    flags: Vec<(char, Option<String>)>,
    pos: Vec<String>,
}

impl Args {
    fn has(&self, f: char) -> bool {
        self.flags.iter().any(|(c, _)| *c == f)
    }

    fn value(&self, f: char) -> Option<&str> {
        self.flags
            .iter()
            .find(|(c, _)| *c == f)
            .and_then(|(_, v)| v.as_deref())
    }

    fn usage(&self) -> CommandError {
        CommandError::Usage(format!("usage: {}", self.spec.usage))
    }

    fn int(&self, f: char) -> Result<Option<i64>, CommandError> {
        match self.value(f) {
            None => Ok(None),
            Some(v) => v.parse().map(Some).map_err(|_| {
                CommandError::Usage(format!(
                    "-{f} needs a number, got {v:?}; usage: {}",
                    self.spec.usage
                ))
            }),
        }
    }

    fn version(&self) -> Result<Option<i32>, CommandError> {
        Ok(self.int('v')?.map(|v| v as i32))
    }
}

/// Splits a command line into words; `"..."` and `'...'` quote.
pub fn tokenize(line: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    for c in line.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => cur.push(c),
            None if c == '"' || c == '\'' => {
                quote = Some(c);
                in_word = true;
            }
            None if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            None => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if quote.is_some() {
        return Err("unclosed quote".into());
    }
    if in_word {
        out.push(cur);
    }
    Ok(out)
}

fn parse(words: &[String]) -> Result<Args, CommandError> {
    let name = &words[0];
    let Some(spec) = SPECS.iter().find(|s| s.name == name.as_str()) else {
        return Err(CommandError::Usage(format!(
            "unknown command: {name} (try help)"
        )));
    };
    let mut flags = Vec::new();
    let mut pos = Vec::new();
    let mut it = words[1..].iter();
    while let Some(w) = it.next() {
        let flag = w
            .strip_prefix('-')
            .filter(|f| f.chars().count() == 1)
            .and_then(|f| f.chars().next());
        match flag {
            Some(f) if spec.switches.contains(f) => flags.push((f, None)),
            Some(f) if spec.valued.contains(f) => match it.next() {
                Some(v) => flags.push((f, Some(v.clone()))),
                None => {
                    return Err(CommandError::Usage(format!(
                        "-{f} needs a value; usage: {}",
                        spec.usage
                    )))
                }
            },
            _ => pos.push(w.clone()),
        }
    }
    let args = Args { spec, flags, pos };
    if args.pos.len() < spec.min || args.pos.len() > spec.max {
        return Err(args.usage());
    }
    Ok(args)
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

    /// Opens a session to `server` (closing the current one).
    pub async fn connect(&mut self, server: &str) -> Result<(), String> {
        self.close().await;
        let opts = ClientOptions::default()
            .session_timeout(self.options.session_timeout)
            .initial_wait(self.options.connect_wait);
        match Client::connect(server, opts).await {
            Ok((client, mut events)) => {
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
            Err(e) => Err(format!("Unable to connect to {server}: {e}")),
        }
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
                let path = args.pos.first().cloned().unwrap_or_default();
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

    fn watch_printer(&self, w: WatchReceiver) {
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

    async fn run_op(
        &self,
        zk: &Client,
        a: &Args,
        out: &mut (dyn Write + Send),
    ) -> Result<(), OpError> {
        let p = a.pos.first().map(String::as_str).unwrap_or("/");
        match a.spec.name {
            "ls" => {
                if a.has('R') {
                    let mut stack = vec![p.to_string()];
                    while let Some(node) = stack.pop() {
                        let mut kids = zk.get_children(&node).await?;
                        kids.sort();
                        wr(writeln!(out, "{node}"))?;
                        for k in kids.iter().rev() {
                            stack.push(wazoo_proto::path::join(&node, k));
                        }
                    }
                    return Ok(());
                }
                let (mut kids, stat) = if a.has('w') {
                    let (k, s, watch) = zk.get_children2_w(p).await?;
                    self.watch_printer(watch);
                    (k, s)
                } else {
                    zk.get_children2(p).await?
                };
                kids.sort();
                wr(writeln!(out, "{}", format::list(&kids)))?;
                if a.has('s') {
                    wr(write!(out, "{}", format::stat(&stat)))?;
                }
            }
            "get" => {
                let (data, stat) = if a.has('w') {
                    let (d, s, watch) = zk.get_data_w(p).await?;
                    self.watch_printer(watch);
                    (d, s)
                } else {
                    zk.get_data(p).await?
                };
                wr(writeln!(out, "{}", format::data(&data)))?;
                if a.has('s') {
                    wr(write!(out, "{}", format::stat(&stat)))?;
                }
            }
            "stat" => {
                let stat = if a.has('w') {
                    let (s, watch) = zk.exists_w(p).await?;
                    self.watch_printer(watch);
                    s
                } else {
                    zk.exists(p).await?
                };
                let stat = stat.ok_or(Error::NoNode)?;
                wr(write!(out, "{}", format::stat(&stat)))?;
            }
            "set" => {
                let stat = zk.set_data(p, a.pos[1].as_bytes(), a.version()?).await?;
                if a.has('s') {
                    wr(write!(out, "{}", format::stat(&stat)))?;
                }
            }
            "create" => {
                let (s, e, c) = (a.has('s'), a.has('e'), a.has('c'));
                let ttl = a.int('t')?;
                if c && (s || e) {
                    return Err(cmd_failed(
                        "-c cannot be combined with -s or -e. Containers cannot be ephemeral or sequential.",
                    ));
                }
                if ttl.is_some() && e {
                    return Err(cmd_failed("TTLs cannot be used with Ephemeral znodes"));
                }
                if ttl.is_some() && c {
                    return Err(cmd_failed("TTLs cannot be used with Container znodes"));
                }
                let mode = match (s, e, c, ttl.is_some()) {
                    (_, _, true, _) => CreateMode::Container,
                    (true, _, _, true) => CreateMode::PersistentSequentialWithTtl,
                    (false, _, _, true) => CreateMode::PersistentWithTtl,
                    (true, true, _, _) => CreateMode::EphemeralSequential,
                    (false, true, _, _) => CreateMode::Ephemeral,
                    (true, false, _, _) => CreateMode::PersistentSequential,
                    (false, false, _, _) => CreateMode::Persistent,
                };
                let data = a.pos.get(1).map(|d| d.as_bytes()).unwrap_or(b"");
                let acl = match a.pos.get(2) {
                    Some(s) => format::parse_acl(s).map_err(cmd_failed)?,
                    None => Acl::open_unsafe(),
                };
                let created = match ttl {
                    Some(t) if t <= 0 => {
                        return Err(cmd_failed(format!("ttl must be positive, got {t}")))
                    }
                    Some(t) => {
                        zk.create_ttl(p, data, &acl, mode, Duration::from_millis(t as u64))
                            .await?
                            .0
                    }
                    None => zk.create(p, data, &acl, mode).await?,
                };
                wr(writeln!(out, "Created {created}"))?;
            }
            "delete" => zk.delete(p, a.version()?).await?,
            "deleteall" => {
                // Depth-first: children before their parent.
                let mut order = Vec::new();
                let mut stack = vec![p.to_string()];
                while let Some(node) = stack.pop() {
                    for k in zk.get_children(&node).await? {
                        stack.push(wazoo_proto::path::join(&node, &k));
                    }
                    order.push(node);
                }
                for node in order.iter().rev() {
                    match zk.delete(node, None).await {
                        Ok(()) | Err(Error::NoNode) => {}
                        Err(e) => return Err(e.into()),
                    }
                }
            }
            "getAcl" => {
                let (acl, stat) = zk.get_acl(p).await?;
                for entry in &acl {
                    wr(write!(out, "{}", format::acl_entry(entry)))?;
                }
                if a.has('s') {
                    wr(write!(out, "{}", format::stat(&stat)))?;
                }
            }
            "setAcl" => {
                let acl = format::parse_acl(&a.pos[1]).map_err(cmd_failed)?;
                let version = a.version()?;
                if a.has('R') {
                    let mut stack = vec![p.to_string()];
                    while let Some(node) = stack.pop() {
                        zk.set_acl(&node, &acl, None).await?;
                        for k in zk.get_children(&node).await? {
                            stack.push(wazoo_proto::path::join(&node, &k));
                        }
                    }
                } else {
                    let stat = zk.set_acl(p, &acl, version).await?;
                    if a.has('s') {
                        wr(write!(out, "{}", format::stat(&stat)))?;
                    }
                }
            }
            "addauth" => zk.add_auth(&a.pos[0], a.pos[1].as_bytes()).await?,
            "sync" => {
                zk.sync(p).await?;
                wr(writeln!(out, "Sync is OK"))?;
            }
            "getEphemerals" => {
                let mut eph = zk.get_ephemerals(p).await?;
                eph.sort();
                wr(writeln!(out, "{}", format::list(&eph)))?;
            }
            "getAllChildrenNumber" => {
                let n = zk.get_all_children_number(p).await?;
                wr(writeln!(out, "{n}"))?;
            }
            "whoami" => {
                let who = zk.who_am_i().await?;
                wr(writeln!(out, "Auth scheme: User"))?;
                for c in who {
                    wr(writeln!(out, "{}: {}", c.auth_scheme, c.user))?;
                }
            }
            "removewatches" => {
                let ty = if a.has('c') {
                    WatcherType::Children
                } else if a.has('d') {
                    WatcherType::Data
                } else {
                    WatcherType::Any
                };
                zk.remove_watches(p, ty, a.has('l')).await?;
            }
            "addWatch" => {
                let mode = match a.value('m') {
                    None | Some("PERSISTENT_RECURSIVE") => AddWatchMode::PersistentRecursive,
                    Some("PERSISTENT") => AddWatchMode::Persistent,
                    Some(_) => return Err(OpError::Cmd(a.usage())),
                };
                let w = zk.add_watch(p, mode).await?;
                self.stream_printer(w);
            }
            "watch" => {
                let mode = if a.has('R') {
                    AddWatchMode::PersistentRecursive
                } else {
                    AddWatchMode::Persistent
                };
                let mut w = zk.add_watch(p, mode).await?;
                let ev = loop {
                    match w.recv().await {
                        Some(ev) if ev.is_node_event() => break ev,
                        Some(ev) if !ev.state_is_alive() => {
                            return Err(cmd_failed(format!("no event: session {:?}", ev.state)))
                        }
                        Some(_) => continue,
                        None => return Err(cmd_failed("no event: the watch is gone")),
                    }
                };
                wr(writeln!(out, "{ev}"))?;
                // Forget it here; the server's copy dies with the session
                // or its events are dropped.
                let _ = zk.remove_watches(p, WatcherType::Any, true).await;
            }
            "call" => {
                let args = match a.pos.get(2) {
                    None => Vec::new(),
                    Some(s) if s.starts_with("0x") => format::parse_hex(s).map_err(cmd_failed)?,
                    Some(s) => format::json_to_msgpack(s).map_err(cmd_failed)?,
                };
                // Subscribe first: the notification ending a wait may come
                // right behind the reply.
                let mut notes = zk.recipe_notifications();
                let body = zk.recipe_call(&a.pos[0], &a.pos[1], &args).await?;
                let reply: Reply = abi::decode(&body)
                    .map_err(|e| cmd_failed(format!("malformed recipe reply: {e}")))?;
                let reply = match reply {
                    Reply::Wait { token } => {
                        wr(writeln!(out, "waiting (token {token})..."))?;
                        loop {
                            let Some(n) = notes.recv().await else {
                                return Err(cmd_failed("the session ended while waiting"));
                            };
                            match abi::decode::<Notification>(&n.payload) {
                                Ok(Notification::Finished {
                                    module,
                                    token: t,
                                    reply,
                                }) if module == a.pos[0] && t == token => break reply,
                                _ => continue,
                            }
                        }
                    }
                    r => r,
                };
                match reply {
                    Reply::Done(v) => wr(writeln!(out, "{}", format::msgpack_display(&v)))?,
                    Reply::Error { code, message } => {
                        return Err(cmd_failed(format!("recipe error {code}: {message}")))
                    }
                    Reply::Wait { token } => wr(writeln!(out, "still waiting (token {token})"))?,
                }
            }
            other => return Err(cmd_failed(format!("{other}: not implemented"))),
        }
        Ok(())
    }
}

impl crate::watch::WatchedEvent {
    fn state_is_alive(&self) -> bool {
        !matches!(
            self.state,
            wazoo_proto::KeeperState::Expired
                | wazoo_proto::KeeperState::AuthFailed
                | wazoo_proto::KeeperState::Closed
        )
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

/// The interactive loop: rustyline editing and history, background events
/// printed above the prompt.
async fn run_interactive(server: &str, options: ShellOptions) -> anyhow::Result<i32> {
    use rustyline::error::ReadlineError;
    use rustyline::ExternalPrinter as _;

    let mut editor = rustyline::DefaultEditor::new()?;
    let history_file =
        std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".wazoo_cli_history"));
    if let Some(f) = &history_file {
        let _ = editor.load_history(f);
    }
    let notifier = match editor.create_external_printer() {
        Ok(printer) => {
            let printer = Mutex::new(printer);
            Notifier::new(move |msg| {
                let mut p = printer.lock().unwrap_or_else(|e| e.into_inner());
                if p.print(msg.clone()).is_err() {
                    println!("{msg}");
                }
            })
        }
        Err(_) => Notifier::new(|msg| println!("{msg}")),
    };
    println!("Connecting to {server}");
    let mut shell = Shell::new(server, options, notifier);
    if let Err(e) = shell.connect(server).await {
        eprintln!("{e}");
    } else {
        println!("\nWATCHER::\n\nWatchedEvent state:SyncConnected type:None path:null");
    }
    let mut n = 0usize;
    loop {
        let prompt = format!("[wazoo: {}({}) {n}] ", shell.server, shell.state_name());
        let (ed, line) = tokio::task::spawn_blocking(move || {
            let line = editor.readline(&prompt);
            (editor, line)
        })
        .await?;
        editor = ed;
        match line {
            Ok(line) => {
                if line.trim().is_empty() {
                    continue;
                }
                let _ = editor.add_history_entry(line.as_str());
                n += 1;
                let mut out = std::io::stdout();
                match shell.execute(&line, &mut out).await {
                    Ok(Flow::Continue) => {}
                    Ok(Flow::Quit) => break,
                    Err(e) => eprintln!("{}", e.message()),
                }
                let _ = out.flush();
            }
            Err(ReadlineError::Interrupted) => continue,
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(e.into()),
        }
    }
    if let Some(f) = &history_file {
        let _ = editor.save_history(f);
    }
    shell.close().await;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        tokenize(s).unwrap()
    }

    #[test]
    fn tokenize_splits_on_spaces_and_honours_quotes() {
        assert_eq!(words("  ls   /a "), vec!["ls", "/a"]);
        assert_eq!(
            words(r#"create /a "hello world" 'x y'"#),
            vec!["create", "/a", "hello world", "x y"]
        );
        assert_eq!(words(r#"set /a """#), vec!["set", "/a", ""]);
        assert!(tokenize("get \"/a").is_err());
    }

    #[test]
    fn flags_may_come_anywhere_and_values_follow_their_flag() {
        let a = parse(&words("create -e /a data -s")).unwrap();
        assert!(a.has('e') && a.has('s') && !a.has('c'));
        assert_eq!(a.pos, vec!["/a", "data"]);
        let a = parse(&words("set /a -v 3 data")).unwrap();
        assert_eq!(a.version().unwrap(), Some(3));
        assert_eq!(a.pos, vec!["/a", "data"]);
        // A negative number is data, not a flag.
        let a = parse(&words("set /a -1")).unwrap();
        assert_eq!(a.pos, vec!["/a", "-1"]);
    }

    #[test]
    fn bad_usage_names_the_usage() {
        let e = parse(&words("get")).err().unwrap();
        assert_eq!(e, CommandError::Usage("usage: get [-s] [-w] path".into()));
        assert_eq!(e.exit_code(), 2);
        let e = parse(&words("frobnicate /")).err().unwrap();
        assert!(e.message().contains("unknown command"), "{e:?}");
        let e = parse(&words("delete -v")).err().unwrap();
        assert!(e.message().contains("-v needs a value"), "{e:?}");
        assert!(parse(&words("set /a -v x data"))
            .unwrap()
            .version()
            .is_err());
    }
}
