//! Tab completion: command names in the first word, znode paths (read
//! from the server with getChildren) in the others.

use std::time::Duration;

use super::parse::SPECS;
use crate::client::Client;

/// How long a completion waits for the server: the prompt must not hang
/// on a slow or lost connection.
pub const LOOKUP_WAIT: Duration = Duration::from_millis(500);

/// The most candidates a completion offers (a node may have many
/// children; a screenful is what a person reads).
pub const CANDIDATES_MAX: usize = 1000;

/// What the word under the cursor needs.
#[derive(Debug, PartialEq, Eq)]
enum Want<'a> {
    /// A command name starting with this.
    Command(&'a str),
    /// A child of `dir` starting with `prefix`; candidates are written
    /// `shown` + child (the word as typed up to its last `/`).
    Child {
        dir: String,
        shown: &'a str,
        prefix: &'a str,
    },
    Nothing,
}

/// The start (byte offset) of the word that ends at `pos`, and what it
/// needs.
fn want(line: &str, pos: usize) -> (usize, Want<'_>) {
    let head = &line[..pos];
    let start = head
        .rfind(char::is_whitespace)
        .map(|i| i + head[i..].chars().next().map_or(1, char::len_utf8))
        .unwrap_or(0);
    let word = &head[start..];
    if head[..start].trim().is_empty() {
        return (start, Want::Command(word));
    }
    if !word.starts_with('/') {
        return (start, Want::Nothing);
    }
    let slash = word.rfind('/').unwrap_or(0);
    let dir = if slash == 0 {
        "/".to_string()
    } else {
        word[..slash].to_string()
    };
    (
        start,
        Want::Child {
            dir,
            shown: &word[..=slash],
            prefix: &word[slash + 1..],
        },
    )
}

/// Completes `line` at byte offset `pos`: the start of the word replaced
/// and the candidates, sorted. `children` lists a node's children (`None`
/// when it cannot).
pub fn complete_with(
    line: &str,
    pos: usize,
    children: impl FnOnce(&str) -> Option<Vec<String>>,
) -> (usize, Vec<String>) {
    let (start, want) = want(line, pos);
    let mut out: Vec<String> = match want {
        Want::Command(prefix) => SPECS
            .iter()
            .map(|s| s.name)
            .filter(|n| n.starts_with(prefix))
            .map(str::to_string)
            .collect(),
        Want::Child { dir, shown, prefix } => children(&dir)
            .unwrap_or_default()
            .into_iter()
            .filter(|c| c.starts_with(prefix))
            .map(|c| format!("{shown}{c}"))
            .collect(),
        Want::Nothing => Vec::new(),
    };
    out.sort();
    out.truncate(CANDIDATES_MAX);
    (start, out)
}

/// Completes `line` at `pos` with the paths read through `client`, waiting
/// at most [`LOOKUP_WAIT`] for the server.
pub async fn complete(client: Option<&Client>, line: &str, pos: usize) -> (usize, Vec<String>) {
    let mut dir = None;
    complete_with(line, pos, |d| {
        dir = Some(d.to_string());
        Some(Vec::new())
    });
    let kids = match (client, dir) {
        (Some(c), Some(d)) => tokio::time::timeout(LOOKUP_WAIT, c.get_children(&d))
            .await
            .ok()
            .and_then(Result::ok),
        _ => None,
    };
    complete_with(line, pos, |_| kids)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kids(dir: &str) -> Option<Vec<String>> {
        match dir {
            "/" => Some(vec!["zookeeper".into(), "app".into(), "apple".into()]),
            "/app" => Some(vec!["b".into(), "a".into()]),
            _ => None,
        }
    }

    #[test]
    fn the_first_word_completes_to_command_names() {
        assert_eq!(
            complete_with("del", 3, kids),
            (
                0,
                vec!["delete".into(), "deleteall".into(), "delquota".into()]
            )
        );
        assert_eq!(
            complete_with("  setq", 6, kids),
            (2, vec!["setquota".into()])
        );
        assert_eq!(complete_with("nope", 4, kids), (0, vec![]));
    }

    #[test]
    fn later_words_complete_to_children_of_the_typed_directory() {
        assert_eq!(
            complete_with("ls /ap", 6, kids),
            (3, vec!["/app".into(), "/apple".into()])
        );
        assert_eq!(
            complete_with("get -s /app/", 12, kids),
            (7, vec!["/app/a".into(), "/app/b".into()])
        );
        // Only up to the cursor counts.
        assert_eq!(
            complete_with("ls /z rest", 5, kids),
            (3, vec!["/zookeeper".into()])
        );
        // No server answer, a flag, or data: nothing.
        assert_eq!(complete_with("ls /missing/x", 13, kids), (3, vec![]));
        assert_eq!(complete_with("ls -", 4, kids), (3, vec![]));
        assert_eq!(complete_with("set /a da", 9, kids), (7, vec![]));
    }

    #[test]
    fn candidates_are_bounded() {
        let many = |_: &str| Some((0..5000).map(|i| format!("n{i:05}")).collect());
        let (_, c) = complete_with("ls /", 4, many);
        assert_eq!(c.len(), CANDIDATES_MAX);
        assert_eq!(c[0], "/n00000");
    }
}
