//! `WAZOO_LOG`: which log lines a member prints, spelled the way operators
//! spell levels.
//!
//! The value is a comma-separated list of directives, as `tracing`'s
//! `EnvFilter` takes them: a bare level (`info`), or `target=level`
//! (`wazoo::net=debug`). Levels are case-insensitive and take the names
//! log4j and syslog use too: `warning` is `warn`, `fatal` and `critical`
//! are `error`, `all` is `trace`, `none` is `off`. A bare word that is not a
//! level is an error: `EnvFilter` would read it as a target name and
//! silently print nothing else, which is how `WAZOO_LOG=warning` used to
//! hide every line.

use anyhow::{bail, Result};

const LEVELS: &str = "trace, debug, info, warn (warning), error (fatal, critical), off";

/// The `EnvFilter` directives for a `WAZOO_LOG` value, or an error that
/// names the word it cannot read.
pub fn filter_directives(spec: &str) -> Result<String> {
    let mut out = Vec::new();
    for directive in spec.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        match directive.rsplit_once('=') {
            Some((target, level)) => {
                let Some(level) = level_name(level) else {
                    bail!("WAZOO_LOG: {level:?} in {directive:?} is not a level ({LEVELS})");
                };
                out.push(format!("{}={level}", target.trim()));
            }
            None => match level_name(directive) {
                Some(level) => out.push(level.to_string()),
                None => bail!(
                    "WAZOO_LOG: {directive:?} is not a level ({LEVELS}); \
                     to set one module's level write MODULE=LEVEL"
                ),
            },
        }
    }
    Ok(out.join(","))
}

fn level_name(word: &str) -> Option<&'static str> {
    Some(match word.trim().to_ascii_lowercase().as_str() {
        "trace" | "all" | "finest" => "trace",
        "debug" | "fine" => "debug",
        "info" => "info",
        "warn" | "warning" => "warn",
        "error" | "fatal" | "critical" | "severe" => "error",
        "off" | "none" => "off",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_are_read_the_way_operators_spell_them() {
        assert_eq!(filter_directives("warning").unwrap(), "warn");
        assert_eq!(filter_directives("WARN").unwrap(), "warn");
        assert_eq!(filter_directives("Fatal").unwrap(), "error");
        assert_eq!(
            filter_directives("info, wazoo::net=Warning").unwrap(),
            "info,wazoo::net=warn"
        );
        assert_eq!(filter_directives("").unwrap(), "");
    }

    #[test]
    fn a_word_that_is_not_a_level_is_an_error_not_silence() {
        let e = filter_directives("warnings").unwrap_err().to_string();
        assert!(e.contains("\"warnings\" is not a level"), "{e}");
        let e = filter_directives("wazoo=loud").unwrap_err().to_string();
        assert!(e.contains("\"loud\""), "{e}");
    }
}
