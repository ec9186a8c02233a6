//! `config` and `reconfig`, as zkCli 3.8 runs them (`GetConfigCommand`,
//! `ReconfigCommand`): the ensemble's dynamic configuration (ZooKeeper
//! Dynamic Reconfiguration).

use std::io::Write;

use super::parse::Args;
use super::{format, wr, CommandError, OpError, Shell};
use crate::client::Client;

/// zkCli's `reconfig` usage line.
pub(super) const RECONFIG_USAGE: &str = "reconfig [-s] [-v version] [[-file path] | [-members serverID=host:port1:port2;port3[,...]*]] | [-add serverId=host:port1:port2;port3[,...]]* [-remove serverId[,...]*]";

/// The largest `-file` a reconfig reads: a membership list is a few lines
/// per server.
const RECONFIG_FILE_BYTES_MAX: u64 = 1 << 20;

/// `ConfigUtils.getClientConfigStr`: `version host:port,host:port`, the
/// client addresses of the `server.N` lines (`;[host:]port` after the
/// quorum ports; a bare port listens on every address, `0.0.0.0`).
pub(super) fn client_config(data: &str) -> String {
    let mut version = "";
    let mut hosts = Vec::new();
    for line in data.lines() {
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        if k == "version" {
            version = v;
        }
        if !k.starts_with("server.") {
            continue;
        }
        let Some((_, client)) = v.split_once(';') else {
            continue;
        };
        let client = client.trim();
        match client.rsplit_once(':') {
            Some((host, port)) => hosts.push(format!("{host}:{port}")),
            None => hosts.push(format!("0.0.0.0:{client}")),
        }
    }
    format!("{version} {}", hosts.join(","))
}

/// `config [-c] [-w] [-s]`.
pub(super) async fn config(
    shell: &Shell,
    zk: &Client,
    a: &Args,
    out: &mut (dyn Write + Send),
) -> Result<(), OpError> {
    let (data, stat) = if a.has('w') {
        let (d, s, watch) = zk.get_config_w().await?;
        shell.watch_printer(watch);
        (d, s)
    } else {
        zk.get_config().await?
    };
    let text = format::data(Some(&data));
    if a.has('c') {
        wr(writeln!(out, "{}", client_config(&text)))?;
    } else {
        wr(writeln!(out, "{text}"))?;
    }
    if a.has('s') {
        wr(write!(out, "{}", format::stat(&stat)))?;
    }
    Ok(())
}

/// What a `reconfig` line asks for.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Reconfig {
    pub(super) joining: Option<String>,
    pub(super) leaving: Option<String>,
    pub(super) members: Option<String>,
    pub(super) version: i64,
}

/// `ReconfigCommand.parse`: the multi-letter options are in `a.pos` (the
/// table's parser takes only single letters), `-v` and `-s` are flags.
pub(super) fn parse_reconfig(a: &Args) -> Result<Reconfig, CommandError> {
    let usage = || CommandError::Usage(RECONFIG_USAGE.to_string());
    let mut opts: Vec<(&str, &str)> = Vec::new();
    let mut it = a.pos.iter();
    while let Some(w) = it.next() {
        let name = match w.as_str() {
            "-add" => "add",
            "-remove" => "remove",
            "-members" => "members",
            "-file" => "file",
            _ => return Err(usage()),
        };
        let Some(v) = it.next() else {
            return Err(CommandError::Usage(format!(
                "Missing argument for option: {name}"
            )));
        };
        opts.push((name, v.as_str()));
    }
    let get = |n: &str| opts.iter().find(|(k, _)| *k == n).map(|(_, v)| *v);
    let has = |n: &str| get(n).is_some();
    if !has("file") && !has("members") && !has("add") && !has("remove") {
        return Err(usage());
    }
    let version = match a.value('v') {
        None => -1,
        // The configuration version is hexadecimal, as `config` shows it.
        Some(v) => i64::from_str_radix(v, 16).map_err(|_| {
            CommandError::Usage("-v must be followed by a long (configuration version)".into())
        })?,
    };
    if (has("file") || has("members")) && (has("add") || has("remove")) {
        return Err(CommandError::Usage(
            "Can't use -file or -members together with -add or -remove (mixing incremental and non-incremental modes is not allowed)".into(),
        ));
    }
    if has("file") && has("members") {
        return Err(CommandError::Usage(
            "Can't use -file and -members together (conflicting non-incremental modes)".into(),
        ));
    }
    let mut r = Reconfig {
        joining: get("add").map(str::to_lowercase),
        leaving: get("remove").map(str::to_lowercase),
        members: get("members").map(str::to_lowercase),
        version,
    };
    if let Some(file) = get("file") {
        r.members = Some(
            members_of_file(file)
                .map_err(|e| CommandError::Failed(format!("Error processing {file}: {e}")))?,
        );
    }
    Ok(r)
}

/// The `server.N=...` lines of a dynamic configuration file, one a line,
/// as the server reads a non-incremental membership.
fn members_of_file(path: &str) -> Result<String, String> {
    use std::io::Read;
    let f = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut text = String::new();
    f.take(RECONFIG_FILE_BYTES_MAX + 1)
        .read_to_string(&mut text)
        .map_err(|e| e.to_string())?;
    if text.len() as u64 > RECONFIG_FILE_BYTES_MAX {
        return Err(format!("larger than {RECONFIG_FILE_BYTES_MAX} bytes"));
    }
    let lines: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("server."))
        .filter_map(|l| {
            l.split_once('=')
                .map(|(k, v)| format!("{}={}", k.trim(), v.trim()))
        })
        .collect();
    if lines.is_empty() {
        return Err("no server.N lines".into());
    }
    Ok(lines.join("\n"))
}

/// `reconfig ...`: prints the committed configuration.
pub(super) async fn reconfig(
    zk: &Client,
    a: &Args,
    out: &mut (dyn Write + Send),
) -> Result<(), OpError> {
    let r = parse_reconfig(a)?;
    let (data, stat) = zk
        .reconfig(
            r.joining.as_deref(),
            r.leaving.as_deref(),
            r.members.as_deref(),
            r.version,
        )
        .await?;
    wr(writeln!(
        out,
        "Committed new configuration:\n{}",
        format::data(Some(&data))
    ))?;
    if a.has('s') {
        wr(write!(out, "{}", format::stat(&stat)))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::parse::{parse, tokenize};
    use super::*;

    fn reconfig_of(line: &str) -> Result<Reconfig, CommandError> {
        parse_reconfig(&parse(&tokenize(line).unwrap())?)
    }

    #[test]
    fn client_config_lists_client_addresses_as_zkcli_config_c() {
        let data = "server.1=127.0.0.1:2888:3888:participant;0.0.0.0:2181\n\
                    server.2=10.0.0.2:2888:3888:observer;2182\n\
                    server.3=10.0.0.3:2888:3888\nversion=100000000";
        assert_eq!(client_config(data), "100000000 0.0.0.0:2181,0.0.0.0:2182");
        assert_eq!(client_config(""), " ");
    }

    #[test]
    fn reconfig_options_parse_as_zkcli() {
        let r = reconfig_of("reconfig -add server.5=H:1:2;3 -remove 3,4 -v 1a -s").unwrap();
        assert_eq!(
            r,
            Reconfig {
                joining: Some("server.5=h:1:2;3".into()),
                leaving: Some("3,4".into()),
                members: None,
                version: 0x1a,
            }
        );
        assert_eq!(reconfig_of("reconfig -remove 2").unwrap().version, -1);
        let e = reconfig_of("reconfig").unwrap_err();
        assert_eq!(e, CommandError::Usage(RECONFIG_USAGE.into()));
        let e =
            reconfig_of("reconfig -members server.1=a:1:2;3 -add server.2=b:1:2;3").unwrap_err();
        assert!(e
            .message()
            .starts_with("Can't use -file or -members together with -add"));
        let e = reconfig_of("reconfig -remove 2 -v zz").unwrap_err();
        assert!(e.message().contains("-v must be followed by a long"));
        let e = reconfig_of("reconfig -remove").unwrap_err();
        assert!(e.message().contains("Missing argument"), "{e:?}");
        let e = reconfig_of("reconfig -file /nonexistent/dyn.cfg").unwrap_err();
        assert!(e
            .message()
            .starts_with("Error processing /nonexistent/dyn.cfg"));
    }
}
