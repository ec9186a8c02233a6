//! Path rules of the ZooKeeper data model (ZooKeeper Programmer's Guide, "Data Model", "ZNodes"; PathUtils).

/// Checks a node path the way ZooKeeper's `PathUtils.validatePath` does.
/// `sequential` allows a trailing `/` (the name is then just the counter).
pub fn validate(path: &str, sequential: bool) -> Result<(), String> {
    if sequential {
        // A sequential create appends the counter, so validate as if it had one.
        return validate_inner(&format!("{path}1"));
    }
    validate_inner(path)
}

fn validate_inner(path: &str) -> Result<(), String> {
    if path.is_empty() {
        return Err("Path length must be > 0".into());
    }
    if !path.starts_with('/') {
        return Err("Path must start with / character".into());
    }
    if path.len() == 1 {
        return Ok(());
    }
    if path.ends_with('/') {
        return Err("Path must not end with / character".into());
    }
    // The usual path (printable ASCII, no '.', no "//") is valid with no
    // need for the rules below, none of which can fire on it: one pass over
    // the bytes, no allocation (a write validates its path several times).
    let plain = path
        .as_bytes()
        .windows(2)
        .all(|w| (0x20..0x7f).contains(&w[1]) && w[1] != b'.' && !(w[0] == b'/' && w[1] == b'/'));
    if plain {
        return Ok(());
    }
    rules(path)
}

/// ZooKeeper's `PathUtils.validatePath` rules, character by character, for
/// a path that starts with '/', is longer than "/" and does not end in '/'.
fn rules(path: &str) -> Result<(), String> {
    let chars: Vec<char> = path.chars().collect();
    let mut last = '/';
    for (i, &c) in chars.iter().enumerate().skip(1) {
        let reason = if c == '\0' {
            Some(format!("null character not allowed @{i}"))
        } else if c == '/' && last == '/' {
            Some(format!("empty node name specified @{i}"))
        } else if c == '.' && last == '.' {
            let prev2 = chars[i - 2];
            let next = chars.get(i + 1).copied();
            if prev2 == '/' && (next.is_none() || next == Some('/')) {
                Some(format!("relative paths not allowed @{i}"))
            } else {
                None
            }
        } else if c == '.' {
            let next = chars.get(i + 1).copied();
            if chars[i - 1] == '/' && (next.is_none() || next == Some('/')) {
                Some(format!("relative paths not allowed @{i}"))
            } else {
                None
            }
        } else if ('\u{0001}'..='\u{001f}').contains(&c)
            || ('\u{007f}'..='\u{009f}').contains(&c)
            // Java refuses U+D800..=U+F8FF, surrogates included, and sees a
            // supplementary-plane character as a surrogate pair: so every
            // character above U+FFFF is refused too.
            || ('\u{e000}'..='\u{f8ff}').contains(&c)
            || c >= '\u{fff0}'
        {
            Some(format!("invalid character @{i}"))
        } else {
            None
        };
        if let Some(r) = reason {
            return Err(format!("Invalid path string \"{path}\" caused by {r}"));
        }
        last = c;
    }
    Ok(())
}

/// The parent of a valid path ("/" for a top-level node; "" for "/").
pub fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) if path.len() > 1 => "/",
        Some(0) | None => "",
        Some(i) => &path[..i],
    }
}

/// The last component of a valid path.
pub fn name(path: &str) -> &str {
    match path.rfind('/') {
        Some(i) => &path[i + 1..],
        None => path,
    }
}

/// Joins a parent path and a child name.
pub fn join(parent: &str, child: &str) -> String {
    if parent == "/" {
        format!("/{child}")
    } else {
        format!("{parent}/{child}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fast path for plain paths answers as the rules do, over every
    /// path of up to 6 characters from an alphabet that exercises each rule
    /// (ZooKeeper Programmer's Guide, "Data Model", "ZNodes").
    #[test]
    fn the_plain_path_shortcut_agrees_with_the_rules() {
        let alphabet = [
            '/', '.', 'a', ' ', '~', '\u{7f}', '\u{1}', '\0', 'é', '\u{fff0}',
        ];
        let mut paths = vec![String::from("/")];
        let mut checked = 0;
        for _ in 0..5 {
            let mut next = Vec::new();
            for p in &paths {
                for c in alphabet {
                    let q = format!("{p}{c}");
                    if !q.ends_with('/') {
                        assert_eq!(validate_inner(&q).is_ok(), rules(&q).is_ok(), "{q:?}");
                        checked += 1;
                    }
                    next.push(q);
                }
            }
            paths = next;
        }
        assert!(checked > 90_000, "{checked}");
    }

    #[test]
    fn valid_paths_follow_the_data_model_rules() {
        for p in [
            "/",
            "/a",
            "/a/b",
            "/a.b",
            "/...",
            "/a/..b",
            "/zookeeper/quota",
        ] {
            assert!(validate(p, false).is_ok(), "{p}");
        }
        for p in [
            "", "a", "/a/", "//a", "/a//b", "/a/./b", "/a/../b", "/.", "/..", "/a\u{1}",
        ] {
            assert!(validate(p, false).is_err(), "{p}");
        }
        assert!(validate("/a/", true).is_ok(), "sequential may end with /");
    }

    /// ZooKeeper Programmer's Guide, "The ZooKeeper Data Model": the
    /// characters \ud800 - uF8FF and \uFFF0 - uFFFF are not allowed. Java
    /// holds a character above U+FFFF as two surrogates, so those are
    /// refused as well.
    #[test]
    fn supplementary_plane_characters_are_refused_like_surrogates() {
        for p in [
            "/😀",
            "/a/\u{10000}",
            "/\u{10ffff}",
            "/\u{e000}",
            "/\u{fff0}",
            "/\u{ffff}",
        ] {
            assert!(validate(p, false).is_err(), "{p:?}");
        }
        for p in ["/\u{d7ff}", "/\u{f900}", "/\u{ffef}", "/日本", "/ü"] {
            assert!(validate(p, false).is_ok(), "{p:?}");
        }
    }

    #[test]
    fn parent_and_name_split_paths() {
        assert_eq!(parent("/a/b"), "/a");
        assert_eq!(parent("/a"), "/");
        assert_eq!(parent("/"), "");
        assert_eq!(name("/a/b"), "b");
        assert_eq!(join("/", "a"), "/a");
        assert_eq!(join("/a", "b"), "/a/b");
    }
}
