//! The command table and the command-line parser: words, quotes, flags
//! (zkCli's single-letter options, anywhere on the line) and the number of
//! arguments each command takes.

use super::CommandError;

pub(super) struct Spec {
    pub(super) name: &'static str,
    pub(super) usage: &'static str,
    pub(super) help: &'static str,
    /// Flags without a value.
    pub(super) switches: &'static str,
    /// Flags with a value.
    pub(super) valued: &'static str,
    pub(super) min: usize,
    pub(super) max: usize,
}

pub(super) const SPECS: &[Spec] = &[
    Spec { name: "addWatch", usage: "addWatch [-m mode] path", help: "persistent watch; mode PERSISTENT or PERSISTENT_RECURSIVE (default)", switches: "", valued: "m", min: 1, max: 1 },
    Spec { name: "addauth", usage: "addauth scheme auth", help: "add credentials to the session, e.g. addauth digest user:password", switches: "", valued: "", min: 2, max: 2 },
    Spec { name: "call", usage: "call module method [args]", help: "call a wazoo recipe; args are JSON (sent as MessagePack) or raw MessagePack as 0x-hex; waits when the recipe waits; prints the result as JSON (or 0x-hex)", switches: "", valued: "", min: 2, max: 3 },
    Spec { name: "deploy", usage: "deploy file.wasm", help: "deploy a recipe module through the ensemble's log (needs ADMIN on /zookeeper/recipes: the super user by default); prints name, version and sha256 once committed", switches: "", valued: "", min: 1, max: 1 },
    Spec { name: "undeploy", usage: "undeploy name", help: "undeploy the recipe module name (needs ADMIN on /zookeeper/recipes)", switches: "", valued: "", min: 1, max: 1 },
    Spec { name: "recipes", usage: "recipes", help: "list the deployed recipe modules: name, version, sha256", switches: "", valued: "", min: 0, max: 0 },
    Spec { name: "close", usage: "close", help: "close the session", switches: "", valued: "", min: 0, max: 0 },
    Spec { name: "config", usage: "config [-c] [-w] [-s]", help: "print the ensemble's configuration, /zookeeper/config (-c the client addresses only, -w set a watch, -s with the stat)", switches: "cws", valued: "", min: 0, max: 0 },
    Spec { name: "connect", usage: "connect [host:port,...[/chroot]]", help: "open a new session (to the same servers if none given)", switches: "", valued: "", min: 0, max: 1 },
    Spec { name: "create", usage: "create [-s] [-e] [-c] [-t ttl] path [data] [acl]", help: "create a node: -s sequential, -e ephemeral, -c container, -t ttl in ms", switches: "sec", valued: "t", min: 1, max: 3 },
    Spec { name: "delete", usage: "delete [-v version] path", help: "delete a node", switches: "", valued: "v", min: 1, max: 1 },
    Spec { name: "deleteall", usage: "deleteall path [-b batch size]", help: "delete a node and everything below it", switches: "", valued: "b", min: 1, max: 1 },
    Spec { name: "delquota", usage: "delquota [-n|-b|-N|-B] path", help: "delete the quota on a node, or only the limits named (-n/-b soft count/bytes, -N/-B hard)", switches: "nbNB", valued: "", min: 1, max: 1 },
    Spec { name: "get", usage: "get [-s] [-w] path", help: "print the data (-s with the stat, -w set a watch)", switches: "sw", valued: "", min: 1, max: 1 },
    Spec { name: "getAcl", usage: "getAcl [-s] path", help: "print the ACL", switches: "s", valued: "", min: 1, max: 1 },
    Spec { name: "getAllChildrenNumber", usage: "getAllChildrenNumber path", help: "count the nodes below a node", switches: "", valued: "", min: 1, max: 1 },
    Spec { name: "getEphemerals", usage: "getEphemerals [path]", help: "list this session's ephemeral nodes", switches: "", valued: "", min: 0, max: 1 },
    Spec { name: "help", usage: "help", help: "this list", switches: "", valued: "", min: 0, max: 1 },
    Spec { name: "history", usage: "history", help: "the last commands", switches: "", valued: "", min: 0, max: 0 },
    Spec { name: "listquota", usage: "listquota path", help: "print the quota on a node and what its subtree holds", switches: "", valued: "", min: 1, max: 1 },
    Spec { name: "ls", usage: "ls [-s] [-w] [-R] path", help: "list children (-s with the stat, -w set a watch, -R the whole subtree)", switches: "swR", valued: "", min: 1, max: 1 },
    Spec { name: "printwatches", usage: "printwatches on|off", help: "print watch events as they come", switches: "", valued: "", min: 0, max: 1 },
    Spec { name: "quit", usage: "quit", help: "leave the shell", switches: "", valued: "", min: 0, max: 0 },
    Spec { name: "reconfig", usage: super::admin::RECONFIG_USAGE, help: "change the ensemble's membership: -add/-remove (incremental) or -members/-file (the whole list); -v the configuration version it applies to (hex); -s print the stat", switches: "s", valued: "v", min: 0, max: 8 },
    Spec { name: "redo", usage: "redo cmdno", help: "run a command of the history again", switches: "", valued: "", min: 1, max: 1 },
    Spec { name: "removewatches", usage: "removewatches path [-c|-d|-a] [-l]", help: "remove watches (-c child, -d data, -a any; -l locally only)", switches: "cdal", valued: "", min: 1, max: 1 },
    Spec { name: "set", usage: "set [-s] [-v version] path data", help: "set the data", switches: "s", valued: "v", min: 2, max: 2 },
    Spec { name: "setAcl", usage: "setAcl [-s] [-v version] [-R] path acl", help: "set the ACL, e.g. world:anyone:cdrwa,digest:user:hash:r", switches: "sR", valued: "v", min: 2, max: 2 },
    Spec { name: "setquota", usage: "setquota -n|-b|-N|-B val path", help: "set a quota on a node: -n node count, -b data bytes (soft: over it is logged), -N, -B (hard: refused when the server enforces quotas)", switches: "", valued: "nbNB", min: 1, max: 1 },
    Spec { name: "stat", usage: "stat [-w] path", help: "print the stat", switches: "w", valued: "", min: 1, max: 1 },
    Spec { name: "sync", usage: "sync path", help: "make the server catch up with the leader", switches: "", valued: "", min: 1, max: 1 },
    Spec { name: "version", usage: "version", help: "the client's version", switches: "", valued: "", min: 0, max: 0 },
    Spec { name: "watch", usage: "watch [-R] path", help: "wait for one event on the node (-R: or below it) and print it", switches: "R", valued: "", min: 1, max: 1 },
    Spec { name: "whoami", usage: "whoami", help: "the identities of the session", switches: "", valued: "", min: 0, max: 0 },
];

/// A parsed command line.
pub(super) struct Args {
    pub(super) spec: &'static Spec,
    pub(super) flags: Vec<(char, Option<String>)>,
    pub(super) pos: Vec<String>,
}

impl Args {
    pub(super) fn has(&self, f: char) -> bool {
        self.flags.iter().any(|(c, _)| *c == f)
    }

    pub(super) fn value(&self, f: char) -> Option<&str> {
        self.flags
            .iter()
            .find(|(c, _)| *c == f)
            .and_then(|(_, v)| v.as_deref())
    }

    pub(super) fn usage(&self) -> CommandError {
        CommandError::Usage(format!("usage: {}", self.spec.usage))
    }

    pub(super) fn int(&self, f: char) -> Result<Option<i64>, CommandError> {
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

    pub(super) fn version(&self) -> Result<Option<i32>, CommandError> {
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

pub(super) fn parse(words: &[String]) -> Result<Args, CommandError> {
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
