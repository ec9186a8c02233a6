//! A snapshot written to a stream instead of a file: the same bytes
//! [`crate::write_snapshot`] puts in `snapshot.<zxid>` (header, payload,
//! trailer with its length and CRC), for a backup sent over a connection.
//! The receiver stores them as a file and checks them with
//! [`crate::verify_snapshot`] and [`crate::read_snapshot`], which accept
//! any file name.

use std::io::{self, Write};

use crate::snapshot::{header, trailer, CrcWriter, HEADER_LEN};
use crate::Zxid;

/// Writes a whole snapshot file's bytes for `zxid` into `w`;
/// `write_payload` streams the state as for [`crate::write_snapshot`].
pub fn write_snapshot_to<F>(w: &mut dyn Write, zxid: Zxid, write_payload: F) -> io::Result<()>
where
    F: FnOnce(&mut dyn Write) -> io::Result<()>,
{
    let mut out = CrcWriter::new(w);
    out.write_all(&header(zxid.0))?;
    write_payload(&mut out)?;
    let payload_len = out.written - HEADER_LEN;
    let (inner, crc) = out.finish();
    inner.write_all(&trailer(payload_len, crc))?;
    inner.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_streamed_snapshot_is_the_file_write_snapshot_writes() {
        let dir = tempfile::tempdir().unwrap();
        let path =
            crate::write_snapshot(dir.path(), Zxid(0x1_0000_0002), |w| w.write_all(b"state"))
                .unwrap();
        let mut streamed = Vec::new();
        write_snapshot_to(&mut streamed, Zxid(0x1_0000_0002), |w| {
            w.write_all(b"state")
        })
        .unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), streamed);
        // Stored under any name, it verifies and reads back.
        let copy = dir.path().join("backup.bin");
        std::fs::write(&copy, &streamed).unwrap();
        assert_eq!(crate::verify_snapshot(&copy).unwrap(), Zxid(0x1_0000_0002));
        assert_eq!(crate::read_snapshot(&copy).unwrap(), b"state");
    }
}
