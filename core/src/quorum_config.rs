//! The ensemble's dynamic configuration, as ZooKeeper 3.5+ keeps it in
//! `/zookeeper/config` (ZooKeeper Dynamic Reconfiguration, "Changes to
//! Configuration Format"): one `server.N=host:quorumPort:electionPort:role[;clientAddr:clientPort]`
//! line per member, sorted by id, then `version=HEX`, the zxid of the txn
//! that made it (0 for a configuration nobody has changed yet).
//!
//! With hierarchical quorums (Administrator's Guide, "Cluster Options",
//! `group.x` and `weight.x`) the `group.N=a:b:c` and `weight.N=W` lines
//! follow the servers, as ZooKeeper's `QuorumHierarchical` prints them.
//!
//! Parsing follows ZooKeeper's `QuorumPeer.QuorumServer`: the role is
//! `participant` when absent, the client part is `[address:]port` and an
//! address-less port is printed as `0.0.0.0:port`, as ZooKeeper prints it.
//! Everything here is pure: the leader parses a `reconfig` request with it,
//! and every member parses the committed text again to activate it.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use wazoo_zab as zab;

/// The largest number of members a configuration may list: a bound on what
/// a reconfig request can make the ensemble hold (ZooKeeper has none; ids
/// are also bounded by the session id layout, which keeps the id in one
/// byte).
pub const MEMBERS_MAX: usize = 255;

/// One address pair of a member: where it takes quorum links and
/// election connections. A `server.N` line lists one, or with
/// `multiAddress.enabled` several separated by `|` (Administrator's Guide,
/// "Cluster Options").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberAddr {
    pub host: String,
    pub quorum_port: u16,
    pub election_port: u16,
}

/// The most address pairs one `server.N` line may list: a bound on what a
/// reconfig request can make every member dial (ZooKeeper has none).
pub const ADDRS_PER_MEMBER_MAX: usize = 16;

/// One `server.N` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerEntry {
    /// The member's address pairs, in the order the line lists them: at
    /// least one, at most [`ADDRS_PER_MEMBER_MAX`], no two alike.
    pub addrs: Vec<MemberAddr>,
    pub observer: bool,
    /// `[address:]port` after the `;`; the address is `None` when only a
    /// port was given.
    pub client: Option<(Option<String>, u16)>,
}

impl ServerEntry {
    /// A member with one address pair.
    pub fn single(host: &str, quorum_port: u16, election_port: u16, observer: bool) -> ServerEntry {
        ServerEntry {
            addrs: vec![MemberAddr {
                host: host.to_string(),
                quorum_port,
                election_port,
            }],
            observer,
            client: None,
        }
    }

    /// The member's host name, as ZooKeeper's `QuorumServer.hostname`
    /// holds it: that of the last address pair listed (the only one
    /// without multiAddress).
    pub fn hostname(&self) -> &str {
        self.addrs.last().map_or("", |a| a.host.as_str())
    }

    /// The entry's text after `server.N=`, as ZooKeeper's
    /// `QuorumServer.toString` prints it: the address pairs sorted by
    /// host (a stable sort; `|` between them), then the role once, then
    /// the client address.
    pub fn render(&self) -> String {
        let mut addrs: Vec<&MemberAddr> = self.addrs.iter().collect();
        addrs.sort_by(|a, b| a.host.cmp(&b.host));
        let mut s = addrs
            .iter()
            .map(|a| format!("{}:{}:{}", a.host, a.quorum_port, a.election_port))
            .collect::<Vec<_>>()
            .join("|");
        s.push_str(if self.observer {
            ":observer"
        } else {
            ":participant"
        });
        if let Some((addr, port)) = &self.client {
            let _ = write!(s, ";{}:{}", addr.as_deref().unwrap_or("0.0.0.0"), port);
        }
        s
    }

    /// ZooKeeper's refusal of a line with several address pairs when
    /// `multiAddress.enabled` is false (its default).
    pub fn check_single_address(&self, id: u64) -> Result<(), String> {
        if self.addrs.len() > 1 {
            return Err(format!(
                "Multiple address feature is disabled, but multiple addresses were specified for sid {id} (multiAddress.enabled=true allows them)"
            ));
        }
        Ok(())
    }
}

/// A whole configuration: the members by id, their groups and weights
/// (none for plain majorities) and its version.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QuorumConfig {
    pub servers: BTreeMap<u64, ServerEntry>,
    /// `group.N=a:b:c`: group N's members. None: majorities.
    pub groups: BTreeMap<u64, Vec<u64>>,
    /// `weight.N=W`: member N's weight (1 when not given).
    pub weights: BTreeMap<u64, u64>,
    /// The zxid of the txn that committed it; 0 for the configuration of
    /// zoo.cfg that no reconfig has changed.
    pub version: i64,
}

impl QuorumConfig {
    /// The voting members' ids, in order.
    pub fn voters(&self) -> Vec<u64> {
        self.servers
            .iter()
            .filter(|(_, s)| !s.observer)
            .map(|(&id, _)| id)
            .collect()
    }

    /// The observers' ids, in order.
    pub fn observers(&self) -> Vec<u64> {
        self.servers
            .iter()
            .filter(|(_, s)| s.observer)
            .map(|(&id, _)| id)
            .collect()
    }

    /// Whether quorums are hierarchical (zoo.cfg has `group.N` lines; as
    /// in ZooKeeper, `weight.N` alone does nothing).
    pub fn is_hierarchical(&self) -> bool {
        !self.groups.is_empty()
    }

    /// The quorum rule consensus decides with.
    pub fn quorum_rule(&self) -> Result<zab::QuorumRule, String> {
        if !self.is_hierarchical() {
            return Ok(zab::QuorumRule::Majority);
        }
        let groups: Vec<(u64, Vec<u64>)> =
            self.groups.iter().map(|(g, m)| (*g, m.clone())).collect();
        let weights: Vec<(u64, u64)> = self.weights.iter().map(|(i, w)| (*i, *w)).collect();
        let h = zab::Hierarchy::new(&self.voters(), &self.observers(), &groups, &weights)?;
        Ok(zab::QuorumRule::Hierarchical(h))
    }

    /// The text of `/zookeeper/config`.
    pub fn render(&self) -> String {
        let mut s = String::new();
        for (id, e) in &self.servers {
            let _ = writeln!(s, "server.{id}={}", e.render());
        }
        if let Ok(zab::QuorumRule::Hierarchical(h)) = self.quorum_rule() {
            for line in h.render_lines() {
                let _ = writeln!(s, "{line}");
            }
        }
        let _ = write!(s, "version={:x}", self.version);
        s
    }

    /// Parses the text of `/zookeeper/config` (or of a dynamic
    /// configuration file): `server.N=...` lines and an optional
    /// `version=HEX`; blank lines and `#` comments are skipped.
    pub fn parse(text: &str) -> Result<QuorumConfig, String> {
        let c = Self::parse_any_ids(text)?;
        c.check_ids()?;
        c.quorum_rule()?;
        Ok(c)
    }

    /// [`QuorumConfig::parse`] without wazoo's bounds on ids and members
    /// ([`QuorumConfig::check_ids`]): a reconfig request is parsed so, as
    /// ZooKeeper parses it, and checked against them after ZooKeeper's
    /// own checks.
    pub fn parse_any_ids(text: &str) -> Result<QuorumConfig, String> {
        let mut c = QuorumConfig::default();
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (k, v) = line
                .split_once('=')
                .ok_or_else(|| format!("{line:?}: expected key=value"))?;
            let (k, v) = (k.trim(), v.trim());
            if k == "version" {
                c.version = i64::from_str_radix(v, 16)
                    .map_err(|_| format!("version {v:?} is not a hexadecimal number"))?;
            } else if let Some(id) = k.strip_prefix("server.") {
                let (id, e) = parse_server_line(id, v)?;
                if c.servers.insert(id, e).is_some() {
                    return Err(format!("server.{id} is listed twice"));
                }
            } else if let Some(gid) = k.strip_prefix("group.") {
                let (gid, members) = parse_group_line(gid, v)?;
                if c.groups.insert(gid, members).is_some() {
                    return Err(format!("group.{gid} is listed twice"));
                }
            } else if let Some(id) = k.strip_prefix("weight.") {
                let (id, w) = parse_weight_line(id, v)?;
                if c.weights.insert(id, w).is_some() {
                    return Err(format!("weight.{id} is listed twice"));
                }
            } else {
                return Err(format!(
                    "{k:?}: a dynamic configuration holds only server.N, group.N, weight.N and version lines"
                ));
            }
        }
        Ok(c)
    }

    /// wazoo's own bounds, which ZooKeeper has not: at most
    /// [`MEMBERS_MAX`] members, with ids 1 to 255 (the session id layout
    /// keeps a server id in one byte).
    pub fn check_ids(&self) -> Result<(), String> {
        if self.servers.len() > MEMBERS_MAX {
            return Err(format!("more than {MEMBERS_MAX} servers"));
        }
        match self.servers.keys().find(|&&id| id == 0 || id > 255) {
            Some(id) => Err(format!("server.{id}: the server id must be 1 to 255")),
            None => Ok(()),
        }
    }

    /// Checks what every configuration must satisfy: at least one
    /// participant, and quorum and election addresses (host and port) that
    /// no two members, and no two address pairs of one member, share.
    pub fn validate(&self) -> Result<(), String> {
        if self.voters().is_empty() {
            return Err("no participant is left".into());
        }
        self.quorum_rule()?;
        let mut seen = BTreeMap::new();
        for (id, e) in &self.servers {
            for a in &e.addrs {
                for port in [a.quorum_port, a.election_port] {
                    match seen.insert((a.host.as_str(), port), *id) {
                        None => {}
                        Some(other) if other == *id => {
                            return Err(format!("server.{id} uses {}:{port} twice", a.host));
                        }
                        Some(other) => {
                            return Err(format!(
                                "server.{id} uses {}:{port}, which server.{other} uses too",
                                a.host
                            ))
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// [`ServerEntry::check_single_address`] for every member: what
    /// ZooKeeper refuses when `multiAddress.enabled` is false.
    pub fn check_single_addresses(&self) -> Result<(), String> {
        self.servers
            .iter()
            .try_for_each(|(&id, e)| e.check_single_address(id))
    }
}

/// `N` (the text after `server.`) and
/// `host:quorumPort:electionPort[:participant|observer][;[clientAddr:]clientPort]`.
/// Any number is an id here, as ZooKeeper reads one; wazoo's bounds on ids
/// are [`QuorumConfig::check_ids`].
pub fn parse_server_line(id: &str, v: &str) -> Result<(u64, ServerEntry), String> {
    let id: u64 = id
        .trim()
        .parse()
        .map_err(|_| format!("server.{id}: the server id must be a number"))?;
    let e = parse_server_entry(v).map_err(|e| format!("server.{id}={v}: {e}"))?;
    Ok((id, e))
}

/// `group.N=a:b:c` (the text after `group.` and after `=`): the group's
/// id and its members' ids.
pub fn parse_group_line(gid: &str, v: &str) -> Result<(u64, Vec<u64>), String> {
    let gid: u64 = gid
        .trim()
        .parse()
        .map_err(|_| format!("group.{gid}: the group id must be a number"))?;
    let members = v
        .split(':')
        .map(|m| {
            m.trim()
                .parse::<u64>()
                .map_err(|_| format!("group.{gid}={v}: {m:?} is not a server id"))
        })
        .collect::<Result<Vec<u64>, String>>()?;
    Ok((gid, members))
}

/// `weight.N=W`: the member's id and its weight.
pub fn parse_weight_line(id: &str, v: &str) -> Result<(u64, u64), String> {
    let id: u64 = id
        .trim()
        .parse()
        .map_err(|_| format!("weight.{id}: the server id must be a number"))?;
    let w: u64 = v
        .trim()
        .parse()
        .map_err(|_| format!("weight.{id}={v}: the weight must be a number, 0 or more"))?;
    Ok((id, w))
}

/// The text after `server.N=`:
/// `host:quorumPort:electionPort[:role]`, or with multiAddress several of
/// those separated by `|` (the roles given must agree), then optionally
/// `;[clientAddr:]clientPort`, as ZooKeeper's `QuorumServer` reads it.
/// Whether several address pairs are allowed is the caller's to check
/// ([`ServerEntry::check_single_address`]): a committed configuration is
/// read whatever this member's zoo.cfg says.
pub fn parse_server_entry(v: &str) -> Result<ServerEntry, String> {
    const FORM: &str = "expected host:quorumPort:electionPort[:participant|observer], \
                        several separated by `|`, then optionally ;[clientAddress:]clientPort";
    let (addr, client) = match v.split_once(';') {
        Some((a, c)) => (a, Some(c)),
        None => (v, None),
    };
    if client.is_some_and(|c| c.contains(';')) {
        return Err(FORM.into());
    }
    let mut addrs = Vec::new();
    let mut role: Option<bool> = None;
    for pair in addr.split('|') {
        let parts: Vec<&str> = pair.split(':').map(str::trim).collect();
        if parts.len() < 3 || parts.len() > 4 || parts[0].is_empty() {
            return Err(FORM.into());
        }
        if let Some(r) = parts.get(3) {
            let observer = match r.to_ascii_lowercase().as_str() {
                "participant" => false,
                "observer" => true,
                _ => return Err(format!("unknown role {r:?} (participant or observer)")),
            };
            if role.is_some_and(|o| o != observer) {
                return Err("the address pairs name different roles".into());
            }
            role = Some(observer);
        }
        let a = MemberAddr {
            host: parts[0].to_string(),
            quorum_port: port(parts[1], "quorum port")?,
            election_port: port(parts[2], "election port")?,
        };
        if a.quorum_port == a.election_port {
            return Err(format!(
                "{}:{}: the quorum and election ports must differ",
                a.host, a.quorum_port
            ));
        }
        let taken = |p: u16| {
            addrs.iter().any(|b: &MemberAddr| {
                b.host == a.host && [b.quorum_port, b.election_port].contains(&p)
            })
        };
        if let Some(p) = [a.quorum_port, a.election_port]
            .into_iter()
            .find(|&p| taken(p))
        {
            return Err(format!("{}:{p} is listed twice", a.host));
        }
        addrs.push(a);
    }
    if addrs.len() > ADDRS_PER_MEMBER_MAX {
        return Err(format!(
            "more than {ADDRS_PER_MEMBER_MAX} address pairs (wazoo's bound)"
        ));
    }
    let client = match client.map(str::trim) {
        None | Some("") => None,
        Some(c) => Some(match c.rsplit_once(':') {
            // ZooKeeper's `getHostAndPort`: `host:port` or `[v6]:port`, so
            // a pair after the `;` (`;2181|b:3:4`) is the wrong format.
            Some((h, _)) if h.contains(':') && !(h.starts_with('[') && h.ends_with(']')) => {
                return Err(FORM.into())
            }
            Some((h, p)) => (Some(h.trim().to_string()), port(p, "client port")?),
            None => (None, port(c, "client port")?),
        }),
    };
    Ok(ServerEntry {
        addrs,
        observer: role.unwrap_or(false),
        client,
    })
}

fn port(s: &str, what: &str) -> Result<u16, String> {
    match s.trim().parse::<u16>() {
        Ok(p) if p > 0 => Ok(p),
        _ => Err(format!("{what} {s:?} is not a port number")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ZooKeeper Dynamic Reconfiguration, "Changes to Configuration
    /// Format": the text ZooKeeper 3.8 serves for members given with and
    /// without a role and a client part.
    #[test]
    fn config_text_renders_as_zookeeper_prints_it() {
        let c = QuorumConfig::parse(
            "server.2=127.0.0.1:2789:2799\n\
             server.1=127.0.0.1:2788:2798:participant\n\
             server.3=127.0.0.1:2790:2800:participant;27183\n\
             server.4=127.0.0.1:2791:2801:observer;127.0.0.1:27184\n\
             version=100000003\n",
        )
        .unwrap();
        assert_eq!(c.version, 0x1_0000_0003);
        assert_eq!(c.voters(), vec![1, 2, 3]);
        assert_eq!(c.observers(), vec![4]);
        assert_eq!(
            c.render(),
            "server.1=127.0.0.1:2788:2798:participant\n\
             server.2=127.0.0.1:2789:2799:participant\n\
             server.3=127.0.0.1:2790:2800:participant;0.0.0.0:27183\n\
             server.4=127.0.0.1:2791:2801:observer;127.0.0.1:27184\n\
             version=100000003"
        );
        let again = QuorumConfig::parse(&c.render()).unwrap();
        assert_eq!(again.render(), c.render(), "the text reads back as itself");
    }

    #[test]
    fn malformed_config_lines_are_refused_with_the_reason() {
        for (text, reason) in [
            ("server.x=h:1:2", "must be a number"),
            ("server.0=h:1:2", "1 to 255"),
            ("server.1=h:1", "expected host"),
            ("server.1=h:1:2:leader", "unknown role"),
            ("server.1=h:1:0", "election port"),
            ("server.1=h:1:2;h:x", "client port"),
            ("server.1=h:1:2\nserver.1=h:3:4", "listed twice"),
            ("version=zz", "hexadecimal"),
            (
                "clientPort=2181",
                "only server.N, group.N, weight.N and version",
            ),
            ("server.1=h:1:2\ngroup.1=1:x", "not a server id"),
            ("server.1=h:1:2\ngroup.1=1\nweight.1=-1", "0 or more"),
            (
                "server.1=h:1:2\nserver.2=h:3:4\ngroup.1=1",
                "server 2 is in no group",
            ),
            (
                "server.1=h:1:2\ngroup.1=1\ngroup.2=1",
                "more than one group",
            ),
        ] {
            let e = QuorumConfig::parse(text).unwrap_err();
            assert!(e.contains(reason), "{text:?}: {e}");
        }
    }

    /// Administrator's Guide, "Cluster Options" (`group.x`, `weight.x`):
    /// the groups and weights follow the servers in `/zookeeper/config`,
    /// every grouped member's weight shown, and read back as themselves.
    #[test]
    fn groups_and_weights_render_after_the_servers() {
        let c = QuorumConfig::parse(
            "server.1=h:1:2\nserver.2=h:3:4\nserver.3=h:5:6\ngroup.1=3:1:2\nweight.3=0\nversion=0",
        )
        .unwrap();
        assert!(c.is_hierarchical());
        let text = c.render();
        assert_eq!(
            text,
            "server.1=h:1:2:participant\nserver.2=h:3:4:participant\nserver.3=h:5:6:participant\n\
             group.1=1:2:3\nweight.1=1\nweight.2=1\nweight.3=0\nversion=0"
        );
        let rule = c.quorum_rule().unwrap();
        assert!(rule.contains_quorum(&c.voters(), &[1, 2]));
        assert!(!rule.contains_quorum(&c.voters(), &[1, 3]));
        assert_eq!(QuorumConfig::parse(&text).unwrap().render(), text);
    }

    /// Administrator's Guide, "Cluster Options" (multiAddress.enabled):
    /// a member's address pairs separated by `|`, rendered as ZooKeeper
    /// 3.8's `QuorumServer.toString` prints them: sorted by host, the role
    /// once after the last pair, the client address after `;`.
    #[test]
    fn several_address_pairs_render_sorted_by_host_with_one_role() {
        let c = QuorumConfig::parse(
            "server.1=127.0.0.3:2788:2798|127.0.0.1:2789:2799;2181\n\
             server.2=h2:1:2|h1:3:4:observer\n\
             server.3=h5:5:6:participant|h4:7:8:PARTICIPANT",
        )
        .unwrap();
        let one = &c.servers[&1];
        assert_eq!(one.addrs.len(), 2);
        assert_eq!(one.addrs[0].host, "127.0.0.3", "kept in the order listed");
        assert_eq!(one.hostname(), "127.0.0.1", "the last pair's host");
        assert!(c.servers[&2].observer, "a role on one pair is the member's");
        assert_eq!(c.validate(), Ok(()));
        let text = c.render();
        assert_eq!(
            text,
            "server.1=127.0.0.1:2789:2799|127.0.0.3:2788:2798:participant;0.0.0.0:2181\n\
             server.2=h1:3:4|h2:1:2:observer\n\
             server.3=h4:7:8|h5:5:6:participant\n\
             version=0"
        );
        assert_eq!(QuorumConfig::parse(&text).unwrap().render(), text);
        assert_eq!(
            one.check_single_address(1).unwrap_err(),
            "Multiple address feature is disabled, but multiple addresses were specified \
             for sid 1 (multiAddress.enabled=true allows them)"
        );
        assert!(c.check_single_addresses().is_err());
        let single = QuorumConfig::parse("server.1=h:1:2\nserver.2=h:3:4").unwrap();
        assert_eq!(single.check_single_addresses(), Ok(()));
    }

    #[test]
    fn malformed_address_pairs_are_refused_with_the_reason() {
        for (text, reason) in [
            (
                "server.1=h:1:2:observer|g:3:4:participant",
                "different roles",
            ),
            ("server.1=h:1:2|", "expected host"),
            ("server.1=h:1:2|g:3", "expected host"),
            ("server.1=h:1:2|g:3:x", "election port"),
            ("server.1=h:1:2;3;4", "expected host"),
            ("server.1=h:1:2;2181|g:3:4", "expected host"),
        ] {
            let e = QuorumConfig::parse(text).unwrap_err();
            assert!(e.contains(reason), "{text:?}: {e}");
        }
        let many = (0..=ADDRS_PER_MEMBER_MAX)
            .map(|i| format!("h{i}:1:2"))
            .collect::<Vec<_>>()
            .join("|");
        let e = QuorumConfig::parse(&format!("server.1={many}")).unwrap_err();
        assert!(e.contains("address pairs"), "{e}");
        for (text, reason) in [
            ("server.1=h:1:2|h:1:3", "h:1 is listed twice"),
            ("server.1=h:1:2|h:3:1", "h:1 is listed twice"),
            ("server.1=h:1:1", "ports must differ"),
        ] {
            let e = QuorumConfig::parse(text).unwrap_err();
            assert!(e.contains(reason), "{text:?}: {e}");
        }
        let e = QuorumConfig::parse("server.1=h:1:2|g:3:4\nserver.2=g:4:5")
            .unwrap()
            .validate()
            .unwrap_err();
        assert!(e.contains("server.2 uses g:4, which server.1"), "{e}");
    }

    #[test]
    fn a_config_needs_a_participant_and_distinct_ports() {
        let only_observer = QuorumConfig::parse("server.1=h:1:2:observer").unwrap();
        assert!(only_observer.validate().is_err());
        let clash = QuorumConfig::parse("server.1=h:1:2\nserver.2=h:2:3").unwrap();
        assert!(clash.validate().unwrap_err().contains("server.1"));
        let ok = QuorumConfig::parse("server.1=h:1:2\nserver.2=h:3:4").unwrap();
        assert_eq!(ok.validate(), Ok(()));
    }
}
