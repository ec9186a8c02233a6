//! Connection strings (`host:port,host:port/chroot`) and chroot path mapping
//! (ZooKeeper Programmer's Guide, "How to Create A Client Session").

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

/// ZooKeeper's default client port, used when a host has none.
pub const DEFAULT_PORT: u16 = 2181;

/// One server address of a connection string. The host is kept as written
/// (a name or an IP literal) and resolved at each connection attempt.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostPort {
    pub host: String,
    pub port: u16,
}

impl HostPort {
    pub fn new(host: impl Into<String>, port: u16) -> HostPort {
        HostPort {
            host: host.into(),
            port,
        }
    }
}

impl fmt::Display for HostPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

impl FromStr for HostPort {
    type Err = Error;

    /// `host`, `host:port`, `[v6]` or `[v6]:port` (ZooKeeper's
    /// `ConnectStringParser`; the port defaults to 2181).
    fn from_str(s: &str) -> Result<HostPort> {
        let s = s.trim();
        let bad = |why: &str| Error::bad_arguments(format!("invalid server address {s:?}: {why}"));
        let port_of = |p: &str| p.parse::<u16>().map_err(|_| bad("bad port"));
        if let Some(rest) = s.strip_prefix('[') {
            let Some((host, after)) = rest.split_once(']') else {
                return Err(bad("unclosed ["));
            };
            let port = match after {
                "" => DEFAULT_PORT,
                p => port_of(p.strip_prefix(':').ok_or_else(|| bad("junk after ]"))?)?,
            };
            if host.is_empty() {
                return Err(bad("empty host"));
            }
            return Ok(HostPort::new(host, port));
        }
        let (host, port) = match s.rfind(':') {
            Some(i) if i + 1 < s.len() => (&s[..i], port_of(&s[i + 1..])?),
            Some(i) => (&s[..i], DEFAULT_PORT),
            None => (s, DEFAULT_PORT),
        };
        if host.is_empty() {
            return Err(bad("empty host"));
        }
        Ok(HostPort::new(host, port))
    }
}

/// A parsed connection string: the servers and the optional chroot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectString {
    pub hosts: Vec<HostPort>,
    pub chroot: Option<Chroot>,
}

impl FromStr for ConnectString {
    type Err = Error;

    /// `h1:p1,h2:p2/app/a`: comma-separated servers, then an optional chroot
    /// that starts at the first `/`. A chroot of `/` is no chroot.
    fn from_str(s: &str) -> Result<ConnectString> {
        let (hosts_part, chroot) = match s.find('/') {
            Some(i) => (&s[..i], Chroot::new(&s[i..])?),
            None => (s, None),
        };
        let hosts = hosts_part
            .split(',')
            .map(str::trim)
            .filter(|h| !h.is_empty())
            .map(HostPort::from_str)
            .collect::<Result<Vec<_>>>()?;
        if hosts.is_empty() {
            return Err(Error::bad_arguments(format!(
                "connection string {s:?} names no server"
            )));
        }
        Ok(ConnectString { hosts, chroot })
    }
}

impl fmt::Display for ConnectString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, h) in self.hosts.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{h}")?;
        }
        if let Some(c) = &self.chroot {
            f.write_str(c.as_str())?;
        }
        Ok(())
    }
}

/// A chroot: every path the application uses is relative to it, and paths
/// coming back from the server are made relative again. Never `/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chroot(String);

impl Chroot {
    /// `None` for `/` (no chroot); an error for an invalid path.
    pub fn new(path: &str) -> Result<Option<Chroot>> {
        if path == "/" {
            return Ok(None);
        }
        wazoo_proto::path::validate(path, false)
            .map_err(|e| Error::bad_arguments(format!("invalid chroot: {e}")))?;
        Ok(Some(Chroot(path.to_string())))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The server's path for a client path (`/` is the chroot itself).
    pub fn to_server(&self, client_path: &str) -> String {
        if client_path == "/" {
            self.0.clone()
        } else {
            let mut s = String::with_capacity(self.0.len() + client_path.len());
            s.push_str(&self.0);
            s.push_str(client_path);
            s
        }
    }

    /// The client's path for a server path. A path outside the chroot is
    /// returned unchanged (it cannot happen for paths under the chroot).
    pub fn to_client<'a>(&self, server_path: &'a str) -> &'a str {
        match server_path.strip_prefix(self.0.as_str()) {
            Some("") => "/",
            Some(rest) if rest.starts_with('/') => rest,
            _ => server_path,
        }
    }
}

/// [`Chroot::to_server`] for an optional chroot.
pub(crate) fn to_server(chroot: Option<&Chroot>, client_path: &str) -> String {
    match chroot {
        Some(c) => c.to_server(client_path),
        None => client_path.to_string(),
    }
}

/// [`Chroot::to_client`] for an optional chroot.
pub(crate) fn to_client<'a>(chroot: Option<&Chroot>, server_path: &'a str) -> &'a str {
    match chroot {
        Some(c) => c.to_client(server_path),
        None => server_path,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hp(h: &str, p: u16) -> HostPort {
        HostPort::new(h, p)
    }

    #[test]
    fn connect_string_lists_servers_and_an_optional_chroot() {
        // ZooKeeper Programmer's Guide, "How to Create A Client Session": comma
        // separated host:port pairs, then an optional chroot suffix.
        let cs: ConnectString = "127.0.0.1:3000,127.0.0.1:3001,127.0.0.1:3002/app/a"
            .parse()
            .unwrap();
        assert_eq!(
            cs.hosts,
            vec![
                hp("127.0.0.1", 3000),
                hp("127.0.0.1", 3001),
                hp("127.0.0.1", 3002)
            ]
        );
        assert_eq!(cs.chroot.as_ref().unwrap().as_str(), "/app/a");
        assert_eq!(
            cs.to_string(),
            "127.0.0.1:3000,127.0.0.1:3001,127.0.0.1:3002/app/a"
        );

        let cs: ConnectString = "127.0.0.1:4545".parse().unwrap();
        assert_eq!(cs.hosts, vec![hp("127.0.0.1", 4545)]);
        assert_eq!(cs.chroot, None);
    }

    #[test]
    fn connect_string_defaults_port_handles_ipv6_and_spaces() {
        let cs: ConnectString = " zk1 , zk2:2182,[::1]:2183,[fe80::1]/".parse().unwrap();
        assert_eq!(
            cs.hosts,
            vec![
                hp("zk1", 2181),
                hp("zk2", 2182),
                hp("::1", 2183),
                hp("fe80::1", 2181)
            ]
        );
        assert_eq!(cs.chroot, None, "a chroot of / is no chroot");
        assert_eq!(hp("::1", 2183).to_string(), "[::1]:2183");
    }

    #[test]
    fn bad_connect_strings_are_bad_arguments() {
        for s in [
            "",
            "/app",
            ",",
            "host:notaport",
            "host:70000",
            "[::1",
            "h:1/app/",
            "h:1//a",
        ] {
            let err = s.parse::<ConnectString>().unwrap_err();
            assert!(matches!(err, Error::BadArguments(_)), "{s:?} gave {err:?}");
        }
    }

    #[test]
    fn chroot_prefixes_client_paths_and_strips_server_paths() {
        let c = Chroot::new("/app/a").unwrap().unwrap();
        assert_eq!(c.to_server("/"), "/app/a");
        assert_eq!(c.to_server("/foo/bar"), "/app/a/foo/bar");
        assert_eq!(c.to_client("/app/a"), "/");
        assert_eq!(c.to_client("/app/a/foo/bar"), "/foo/bar");
        assert_eq!(c.to_client("/app/a/x0000000001"), "/x0000000001");
        // Not under the chroot (a sibling sharing the prefix): unchanged.
        assert_eq!(c.to_client("/app/ab"), "/app/ab");
        assert_eq!(to_server(None, "/x"), "/x");
        assert_eq!(to_client(None, "/x"), "/x");
    }
}
