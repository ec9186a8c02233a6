//! ZooKeeper's transaction log file (`FileTxnLog`, `Util.readTxnBytes`),
//! version 2:
//!
//! ```text
//! LogFile   := FileHeader Entry* ZeroPad
//! FileHeader:= magic:int("ZKLG") version:int(2) dbid:long
//! Entry     := checksum:long length:int bytes[length] 0x42('B')
//! bytes     := TxnHeader Record [TxnDigest]
//! ZeroPad   := 0x00*          (ZooKeeper preallocates log files)
//! ```
//!
//! `checksum` is the Adler-32 of `bytes`. Where a file ends is decided as
//! ZooKeeper's `FileTxnIterator.next` decides it: an entry of length 0 (the
//! preallocated zeros), an entry cut short by the end of the file, or one
//! whose `B` is missing ("Last transaction was partial") ends the file, and
//! the reader goes on with the next one. Those are what a crash in the
//! middle of a write leaves. An entry that is complete but fails its
//! checksum, or that does not decode, is corruption: ZooKeeper refuses to
//! start on it, and so does this reader, naming the file and offset.

use super::jute::{Adler32, Jute};
use super::txn::{decode_entry, TxnEntry};
use super::FormatError;

/// `"ZKLG"`.
pub const LOG_MAGIC: i32 = 0x5A4B_4C47;
/// The log version ZooKeeper 3.x writes.
pub const LOG_VERSION: i32 = 2;
const HEADER_LEN: usize = 16;
const END_OF_ENTRY: u8 = b'B';

/// Why a log file stopped before its last byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogEnd {
    /// At the end of the file, or at a zero-length entry with only zeros
    /// after it (preallocated space).
    Clean,
    /// An entry that a crash cut short, at `offset`; `trailing_nonzero` is
    /// how many non-zero bytes follow that point (ignored, as ZooKeeper
    /// ignores them).
    Torn {
        offset: u64,
        reason: &'static str,
        trailing_nonzero: u64,
    },
}

/// One decoded entry and where it starts in its file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEntry {
    pub offset: u64,
    pub entry: TxnEntry,
}

/// A whole log file, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogFile {
    pub dbid: i64,
    pub entries: Vec<LogEntry>,
    pub end: LogEnd,
}

/// Parses a log file. A file too short for its header is empty (ZooKeeper
/// deletes such a file when it is the newest; the caller decides).
pub fn parse_log(bytes: &[u8]) -> Result<LogFile, FormatError> {
    if bytes.len() < HEADER_LEN {
        return Ok(LogFile {
            dbid: 0,
            entries: Vec::new(),
            end: if bytes.iter().all(|&b| b == 0) {
                LogEnd::Clean
            } else {
                LogEnd::Torn {
                    offset: 0,
                    reason: "the file header is incomplete",
                    trailing_nonzero: nonzero(bytes),
                }
            },
        });
    }
    let mut r = Jute::new(bytes, 0);
    let magic = r.int("magic")?;
    if magic != LOG_MAGIC {
        return Err(FormatError {
            offset: 0,
            what: format!("not a ZooKeeper transaction log (magic {magic:#x}, not ZKLG)"),
        });
    }
    let version = r.int("version")?;
    if version != LOG_VERSION {
        return Err(FormatError {
            offset: 4,
            what: format!("unsupported log version {version}"),
        });
    }
    let dbid = r.long("dbid")?;
    let mut entries = Vec::new();
    let mut pos = HEADER_LEN;
    let torn = |offset: usize, reason: &'static str| LogEnd::Torn {
        offset: offset as u64,
        reason,
        trailing_nonzero: nonzero(&bytes[offset..]),
    };
    let end = loop {
        let rest = &bytes[pos..];
        if rest.is_empty() {
            break LogEnd::Clean;
        }
        if rest.len() < 12 {
            break torn(pos, "an entry header is cut short");
        }
        let crc = i64::from_be_bytes(rest[..8].try_into().unwrap_or_default());
        let len = i32::from_be_bytes(rest[8..12].try_into().unwrap_or_default());
        if len == 0 {
            // ZooKeeper's end of the log: preallocated zeros.
            if nonzero(rest) == 0 {
                break LogEnd::Clean;
            }
            break torn(pos, "a zero-length entry");
        }
        if len < 0 {
            // ZooKeeper reads a null buffer (-1) as the end; any other
            // negative length makes it fail.
            if len == -1 {
                break torn(pos, "a null entry");
            }
            return Err(FormatError {
                offset: pos as u64 + 8,
                what: format!("entry length {len} is negative"),
            });
        }
        let len = len as usize;
        if rest.len() - 12 < len + 1 {
            break torn(pos, "an entry is cut short by the end of the file");
        }
        let body = &rest[12..12 + len];
        if rest[12 + len] != END_OF_ENTRY {
            break torn(pos, "an entry lacks its end marker (a partial write)");
        }
        let computed = Adler32::of(body);
        if crc != i64::from(computed) {
            return Err(FormatError {
                offset: pos as u64,
                what: format!(
                    "entry checksum mismatch (stored {crc:#x}, computed {computed:#x}): the entry is complete, so this is corruption, not a torn write"
                ),
            });
        }
        let entry = decode_entry(body, pos as u64 + 12)?;
        entries.push(LogEntry {
            offset: pos as u64,
            entry,
        });
        pos += 12 + len + 1;
    };
    Ok(LogFile { dbid, entries, end })
}

fn nonzero(bytes: &[u8]) -> u64 {
    bytes.iter().filter(|&&b| b != 0).count() as u64
}
