//! Small file-system helpers shared by the log, snapshot and purge code.

use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use crate::error::{IoContext, Result};

/// Fsyncs a directory so that creations, renames and deletions of its entries
/// are durable.
pub(crate) fn fsync_dir(dir: &Path) -> Result<()> {
    File::open(dir).and_then(|d| d.sync_all()).at(dir)
}

/// The file name `<prefix><zxid as 16 lower-case hex digits>`.
pub(crate) fn zxid_file_name(prefix: &str, zxid: u64) -> String {
    format!("{prefix}{zxid:016x}")
}

/// Parses `<prefix><hex>` where `<hex>` is 1 to 16 hex digits (zero padding is
/// optional, as in ZooKeeper's unpadded `log.100000001`). Anything else,
/// including a `.tmp` suffix, yields `None`.
pub(crate) fn parse_zxid_file_name(name: &str, prefix: &str) -> Option<u64> {
    let hex = name.strip_prefix(prefix)?;
    let well_formed =
        !hex.is_empty() && hex.len() <= 16 && hex.bytes().all(|b| b.is_ascii_hexdigit());
    if well_formed {
        u64::from_str_radix(hex, 16).ok()
    } else {
        None
    }
}

/// A directory entry whose name parsed as `<prefix><zxid>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ZxidFile {
    pub(crate) zxid: u64,
    pub(crate) path: PathBuf,
}

/// Lists the non-directory entries of `dir` named `<prefix><hex zxid>`, sorted
/// by zxid (ascending). A missing directory lists as empty. Entries starting
/// with `prefix` whose suffix does not parse are reported to `on_ignored`.
pub(crate) fn list_zxid_files(
    dir: &Path,
    prefix: &str,
    mut on_ignored: impl FnMut(&Path),
) -> Result<Vec<ZxidFile>> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).at(dir),
    };
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.at(dir)?;
        if entry.file_type().at(&entry.path())?.is_dir() {
            continue;
        }
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.starts_with(prefix) {
            continue;
        }
        match parse_zxid_file_name(name, prefix) {
            Some(zxid) => files.push(ZxidFile {
                zxid,
                path: entry.path(),
            }),
            None => on_ignored(&entry.path()),
        }
    }
    files.sort_by_key(|f| f.zxid);
    Ok(files)
}

/// Reads until `buf` is full or the reader is at end of file; returns the
/// number of bytes read.
pub(crate) fn read_full(reader: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zxid_file_names_parse_padded_and_unpadded_hex_only() {
        assert_eq!(
            parse_zxid_file_name("log.0000000100000001", "log."),
            Some(0x1_0000_0001)
        );
        assert_eq!(
            parse_zxid_file_name("log.100000001", "log."),
            Some(0x1_0000_0001)
        );
        assert_eq!(
            parse_zxid_file_name("log.ffffffffffffffff", "log."),
            Some(u64::MAX)
        );
        assert_eq!(parse_zxid_file_name("log.", "log."), None);
        assert_eq!(parse_zxid_file_name("log.1ffffffffffffffff", "log."), None);
        assert_eq!(parse_zxid_file_name("log.12.tmp", "log."), None);
        assert_eq!(parse_zxid_file_name("log.+1", "log."), None);
        assert_eq!(parse_zxid_file_name("snapshot.1", "log."), None);
        assert_eq!(
            zxid_file_name("log.", 0x1_0000_0001),
            "log.0000000100000001"
        );
    }
}
