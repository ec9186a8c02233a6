//! zoo.cfg as ZooKeeper reads it: a `java.util.Properties` file.
//!
//! The grammar of `Properties.load`, which this follows rule for rule:
//! - a *natural* line ends at `\n`, `\r` or `\r\n`; a *logical* line
//!   continues onto the next natural line while it ends in an odd number of
//!   backslashes, and the continuation's leading white space is dropped;
//! - white space is space, tab and form feed; a line of only white space
//!   is blank, and a line whose first other character is `#` or `!` is a
//!   comment (a comment never continues);
//! - the key runs to the first unescaped `=`, `:` or white space; then
//!   white space, at most one `=` or `:`, and white space again are
//!   skipped, and the rest of the line is the value (`key=value`,
//!   `key: value`, `key value` and a lone `key` all work);
//! - in keys and values `\t`, `\n`, `\r`, `\f` and `\uXXXX` are escapes,
//!   and a backslash before any other character stands for that character
//!   (`\=`, `\:`, `\ `, `\\`); a malformed `\u` escape is an error.
//!
//! ZooKeeper's `QuorumPeerConfig` then trims keys and values, and so does
//! [`parse`]. A later key replaces an earlier one, as in a `Properties`
//! table.

use std::fmt;

/// A line `Properties.load` refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PropertiesError {
    /// The natural line (1-based) the logical line starts on.
    pub line: usize,
    pub reason: &'static str,
}

impl fmt::Display for PropertiesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.reason)
    }
}

impl std::error::Error for PropertiesError {}

/// Decodes a zoo.cfg file's bytes: UTF-8 when they are, otherwise
/// ISO-8859-1, which is how `Properties.load(InputStream)` reads every
/// file (so a Latin-1 file means what it means to ZooKeeper, and a UTF-8
/// one what its author meant).
pub fn decode(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(s) => s.to_string(),
        Err(_) => bytes.iter().map(|&b| char::from(b)).collect(),
    }
}

/// The (key, value) pairs of a properties text, trimmed, in file order,
/// each with the line it starts on.
pub fn parse(text: &str) -> Result<Vec<(usize, String, String)>, PropertiesError> {
    let mut out = Vec::new();
    let mut lines = natural_lines(text).enumerate().peekable();
    while let Some((n, first)) = lines.next() {
        let first = trim_start(first);
        if first.is_empty() || first.starts_with('#') || first.starts_with('!') {
            continue;
        }
        let mut logical = String::from(first);
        while ends_in_continuation(&logical) {
            logical.pop();
            match lines.next() {
                Some((_, next)) => logical.push_str(trim_start(next)),
                None => break,
            }
        }
        let (key, value) = split_entry(&logical);
        let line = n + 1;
        let key = unescape(key).map_err(|reason| PropertiesError { line, reason })?;
        let value = unescape(value).map_err(|reason| PropertiesError { line, reason })?;
        out.push((line, key.trim().to_string(), value.trim().to_string()));
    }
    Ok(out)
}

fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\u{c}')
}

fn trim_start(s: &str) -> &str {
    s.trim_start_matches(is_space)
}

/// Splits at `\r\n`, `\n` and a lone `\r`.
fn natural_lines(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = Some(text);
    std::iter::from_fn(move || {
        let s = rest?;
        match s.find(['\n', '\r']) {
            Some(i) => {
                let skip = if s[i..].starts_with("\r\n") { 2 } else { 1 };
                rest = Some(&s[i + skip..]);
                Some(&s[..i])
            }
            None => {
                rest = None;
                (!s.is_empty()).then_some(s)
            }
        }
    })
}

fn ends_in_continuation(s: &str) -> bool {
    s.chars().rev().take_while(|&c| c == '\\').count() % 2 == 1
}

/// The raw (still escaped) key and value of a logical line.
fn split_entry(line: &str) -> (&str, &str) {
    let mut escaped = false;
    let mut key_end = line.len();
    for (i, c) in line.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == '=' || c == ':' || is_space(c) {
            key_end = i;
            break;
        }
    }
    let key = &line[..key_end];
    let mut rest = trim_start(&line[key_end..]);
    if let Some(r) = rest.strip_prefix(['=', ':']) {
        rest = trim_start(r);
    }
    (key, rest)
}

fn unescape(s: &str) -> Result<String, &'static str> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\u{c}'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                let code = (hex.len() == 4)
                    .then(|| u32::from_str_radix(&hex, 16).ok())
                    .flatten()
                    .ok_or("malformed \\uXXXX escape")?;
                // A lone UTF-16 surrogate has no char: Java would keep it,
                // but no key or value ZooKeeper reads can use one.
                out.push(char::from_u32(code).ok_or("\\u escape of a lone UTF-16 surrogate")?);
            }
            Some(other) => out.push(other),
            // A trailing backslash with nothing after it (the file's end).
            None => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(text: &str) -> Vec<(String, String)> {
        parse(text)
            .unwrap()
            .into_iter()
            .map(|(_, k, v)| (k, v))
            .collect()
    }

    fn kv(k: &str, v: &str) -> (String, String) {
        (k.to_string(), v.to_string())
    }

    // java.util.Properties.load: every separator form ZooKeeper 3.8 accepts
    // in zoo.cfg (ZooKeeper Administrator's Guide, "Configuration
    // Parameters", reads the file as Java properties).
    #[test]
    fn every_separator_java_properties_accepts() {
        let text = "tickTime=2000\ninitLimit: 10\nsyncLimit 5\n  dataDir = /var/z \nflag\n";
        assert_eq!(
            pairs(text),
            vec![
                kv("tickTime", "2000"),
                kv("initLimit", "10"),
                kv("syncLimit", "5"),
                kv("dataDir", "/var/z"),
                kv("flag", ""),
            ]
        );
    }

    #[test]
    fn comments_blank_lines_and_line_endings() {
        let text = "# a comment\r\n! also a comment\r\n   \n\tclientPort=2181\rmaxClientCnxns=60";
        assert_eq!(
            pairs(text),
            vec![kv("clientPort", "2181"), kv("maxClientCnxns", "60")]
        );
    }

    #[test]
    fn a_trailing_backslash_continues_the_line_without_the_next_lines_indent() {
        let text = "4lw.commands.whitelist=srvr, \\\n    ruok, \\\n    mntr\nnext=1\n";
        assert_eq!(
            pairs(text),
            vec![
                kv("4lw.commands.whitelist", "srvr, ruok, mntr"),
                kv("next", "1")
            ]
        );
        // An even number of backslashes is an escaped backslash, not a
        // continuation; a comment never continues.
        assert_eq!(
            pairs("a=x\\\\\nb=y\n# c \\\nd=z"),
            vec![kv("a", "x\\"), kv("b", "y"), kv("d", "z")]
        );
    }

    #[test]
    fn escapes_in_keys_and_values() {
        assert_eq!(
            pairs("my\\ key\\=x=a\\tb\\u0041\\:c"),
            vec![kv("my key=x", "a\tbA:c")]
        );
        assert_eq!(
            parse("k=\\u00g1").unwrap_err(),
            PropertiesError {
                line: 1,
                reason: "malformed \\uXXXX escape"
            }
        );
        assert!(parse("k=\\u12").is_err());
    }

    #[test]
    fn later_keys_come_later_and_line_numbers_are_kept() {
        let p = parse("a=1\n\n# x\na=2\n").unwrap();
        assert_eq!(p[0], (1, "a".into(), "1".into()));
        assert_eq!(p[1], (4, "a".into(), "2".into()));
    }

    #[test]
    fn a_file_that_is_not_utf8_is_read_as_latin1_as_java_does() {
        assert_eq!(decode(b"dataDir=/caf\xe9"), "dataDir=/caf\u{e9}");
        assert_eq!(decode("dataDir=/café".as_bytes()), "dataDir=/café");
    }
}
