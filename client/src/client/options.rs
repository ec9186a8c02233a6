//! How a client connects: [`ClientOptions`].

use std::time::Duration;

/// The largest frame the client accepts from a server by default. Larger
/// than ZooKeeper's 1 MiB `jute.maxbuffer` so that a full-size node plus
/// its reply header and stat fits.
pub const DEFAULT_MAX_FRAME_LEN: usize = 4 << 20;

/// How a [`Client`](crate::Client) connects. `ClientOptions::default()` asks for a 30 s
/// session (zkCli's default), read-write.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// The session timeout to ask for; the server answers with the one it
    /// grants (between 2 and 20 ticks by default), see
    /// [`Client::session_timeout`](crate::Client::session_timeout).
    pub session_timeout: Duration,
    /// Accept a read-only server (one that lost its quorum) when no
    /// read-write server can be reached.
    pub read_only: bool,
    /// Timeout of one connection attempt (TCP connect + handshake); by
    /// default the session timeout divided by the number of servers, as in
    /// ZooKeeper's client.
    pub connect_timeout: Option<Duration>,
    /// How long [`Client::connect`](crate::Client::connect) waits for the first connection; by
    /// default the session timeout.
    pub initial_wait: Option<Duration>,
    /// Reconnect backoff: before each attempt after a loss the client waits
    /// a random time below a window that starts here and doubles each time
    /// every server has failed, up to `max_reconnect_delay`.
    pub reconnect_delay: Duration,
    pub max_reconnect_delay: Duration,
    /// The largest frame accepted from a server.
    pub max_frame_len: usize,
    /// Resume this session (id, password) instead of creating one.
    pub session: Option<(i64, Vec<u8>)>,
    /// Credentials (scheme, auth) sent on every connection from the first.
    pub auth: Vec<(String, Vec<u8>)>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            session_timeout: Duration::from_secs(30),
            read_only: false,
            connect_timeout: None,
            initial_wait: None,
            reconnect_delay: Duration::from_millis(100),
            max_reconnect_delay: Duration::from_secs(2),
            max_frame_len: DEFAULT_MAX_FRAME_LEN,
            session: None,
            auth: Vec::new(),
        }
    }
}

impl ClientOptions {
    pub fn new() -> ClientOptions {
        ClientOptions::default()
    }

    pub fn session_timeout(mut self, t: Duration) -> Self {
        self.session_timeout = t;
        self
    }

    pub fn read_only(mut self, yes: bool) -> Self {
        self.read_only = yes;
        self
    }

    pub fn connect_timeout(mut self, t: Duration) -> Self {
        self.connect_timeout = Some(t);
        self
    }

    pub fn initial_wait(mut self, t: Duration) -> Self {
        self.initial_wait = Some(t);
        self
    }

    pub fn reconnect_delay(mut self, initial: Duration, max: Duration) -> Self {
        self.reconnect_delay = initial;
        self.max_reconnect_delay = max;
        self
    }

    pub fn session(mut self, id: i64, password: Vec<u8>) -> Self {
        self.session = Some((id, password));
        self
    }

    pub fn auth(mut self, scheme: &str, auth: &[u8]) -> Self {
        self.auth.push((scheme.to_string(), auth.to_vec()));
        self
    }
}
