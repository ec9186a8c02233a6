//! Byte-level format of one transaction log segment: the file header, record
//! framing, and a reader that classifies what it finds (record, clean end,
//! zero fill, bad frame) without deciding what that means for recovery. The
//! grammar is documented in the crate docs ([`crate`]).

use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use crate::error::{CorruptReason, IoContext, Result, StorageError};
use crate::fsutil::read_full;

/// File name prefix of segments: `log.<first zxid, 16 hex digits>`.
pub(crate) const SEGMENT_PREFIX: &str = "log.";
/// Magic at the start of every segment.
pub(crate) const SEGMENT_MAGIC: [u8; 4] = *b"WZLG";
/// Format version written (and the only one read).
pub(crate) const SEGMENT_VERSION: u32 = 1;
/// Length of the segment file header (magic + version).
pub(crate) const FILE_HEADER_LEN: u64 = 8;
/// Length of a record header: body length, CRC, zxid.
pub(crate) const RECORD_HEADER_LEN: usize = 16;

/// The 8-byte segment file header.
pub(crate) fn file_header() -> [u8; FILE_HEADER_LEN as usize] {
    let mut h = [0u8; FILE_HEADER_LEN as usize];
    h[..4].copy_from_slice(&SEGMENT_MAGIC);
    h[4..].copy_from_slice(&SEGMENT_VERSION.to_be_bytes());
    h
}

/// CRC32 (IEEE, as computed by `crc32fast`) over the big-endian zxid followed
/// by the body.
pub(crate) fn record_crc(zxid: u64, body: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&zxid.to_be_bytes());
    hasher.update(body);
    hasher.finalize()
}

/// The 16-byte record header for `(zxid, body)`. The caller guarantees that
/// `body.len()` fits in a `u32`.
pub(crate) fn record_header(zxid: u64, body: &[u8]) -> [u8; RECORD_HEADER_LEN] {
    let len = u32::try_from(body.len()).expect("caller checked the body length fits in u32");
    let mut h = [0u8; RECORD_HEADER_LEN];
    h[..4].copy_from_slice(&len.to_be_bytes());
    h[4..8].copy_from_slice(&record_crc(zxid, body).to_be_bytes());
    h[8..].copy_from_slice(&zxid.to_be_bytes());
    h
}

/// Splits a record header into (body length, stored CRC, zxid).
fn parse_record_header(h: &[u8; RECORD_HEADER_LEN]) -> (u32, u32, u64) {
    let word = |i: usize| u32::from_be_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
    let mut zxid = [0u8; 8];
    zxid.copy_from_slice(&h[8..]);
    (word(0), word(4), u64::from_be_bytes(zxid))
}

/// What the first bytes of a segment file say about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HeaderState {
    /// Magic and version are right; records start at [`FILE_HEADER_LEN`].
    Valid,
    /// Something is wrong with the header.
    Invalid(HeaderProblem),
}

/// What is wrong with a segment's file header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HeaderProblem {
    /// The file looks like a segment whose creation was cut short by a crash:
    /// a (possibly empty) prefix of the header followed by nothing but zeros.
    TornCreation { len: u64 },
    /// Not a segment of ours.
    BadMagic { found: Vec<u8> },
    /// A segment of another format version.
    UnsupportedVersion { found: u32 },
}

impl HeaderProblem {
    /// The error reported for this problem in `path`. A torn creation is only
    /// an error when the segment is not the last one.
    pub(crate) fn into_error(self, path: &Path) -> StorageError {
        match self {
            Self::BadMagic { found } => StorageError::BadMagic {
                file: path.to_path_buf(),
                found,
                expected: SEGMENT_MAGIC,
            },
            Self::UnsupportedVersion { found } => StorageError::UnsupportedVersion {
                file: path.to_path_buf(),
                found,
                supported: SEGMENT_VERSION,
            },
            Self::TornCreation { len } => StorageError::Corrupt {
                file: path.to_path_buf(),
                offset: 0,
                zxid: None,
                reason: CorruptReason::TruncatedFileHeader { available: len },
            },
        }
    }
}

/// Reads and classifies the file header of an open segment. Leaves the file
/// position unspecified.
pub(crate) fn read_header_state(file: &mut File, file_len: u64) -> io::Result<HeaderState> {
    let mut buf = [0u8; FILE_HEADER_LEN as usize];
    file.seek(SeekFrom::Start(0))?;
    let n = read_full(file, &mut buf)?;
    let got = &buf[..n];
    let expected = file_header();
    if n == buf.len() && got == expected {
        return Ok(HeaderState::Valid);
    }
    // A crash while the header was being written leaves a prefix of it,
    // followed by nothing or by zeros up to the end of the file.
    let common = got
        .iter()
        .zip(&expected)
        .take_while(|(a, b)| a == b)
        .count();
    if all_zero_from(file, common as u64)? {
        return Ok(HeaderState::Invalid(HeaderProblem::TornCreation {
            len: file_len,
        }));
    }
    if n == buf.len() && got[..4] == SEGMENT_MAGIC {
        let found = u32::from_be_bytes([got[4], got[5], got[6], got[7]]);
        return Ok(HeaderState::Invalid(HeaderProblem::UnsupportedVersion {
            found,
        }));
    }
    Ok(HeaderState::Invalid(HeaderProblem::BadMagic {
        found: got[..n.min(4)].to_vec(),
    }))
}

/// True when every byte of `file` from `start` to its end is zero.
fn all_zero_from(file: &mut File, start: u64) -> io::Result<bool> {
    file.seek(SeekFrom::Start(start))?;
    Ok(first_nonzero(&mut BufReader::new(file), start)?.is_none())
}

/// Offset of the first non-zero byte read from `src`, whose current position
/// is `pos`; `None` if the rest is all zero.
fn first_nonzero(src: &mut impl Read, mut pos: u64) -> io::Result<Option<u64>> {
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = read_full(src, &mut chunk)?;
        if let Some(i) = chunk[..n].iter().position(|&b| b != 0) {
            return Ok(Some(pos + i as u64));
        }
        if n < chunk.len() {
            return Ok(None);
        }
        pos += n as u64;
    }
}

/// One step of reading a segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Frame {
    /// A valid record starting at `offset`; its body is in [`RecordReader::body`].
    Record { offset: u64, zxid: u64 },
    /// Clean end of file, right after the last record.
    End,
    /// The log ends in zero bytes from `offset` to the end of the file
    /// (preallocation, or a file system that extended the file before the
    /// data reached the disk).
    ZeroFill { offset: u64 },
    /// Something at `offset` is not a valid record. `zxid` is the one its
    /// header holds, when the header is complete (it may be what is damaged).
    Bad {
        offset: u64,
        zxid: Option<u64>,
        reason: CorruptReason,
    },
}

/// Sequential reader of the records of one segment. After it returns
/// anything but [`Frame::Record`] it must not be asked for more.
pub(crate) struct RecordReader<R> {
    inner: R,
    /// Position of `inner`.
    pos: u64,
    /// End of the last valid record (start of the next frame).
    offset: u64,
    /// File length at the time the segment was opened; bounds allocations.
    file_len: u64,
    body: Vec<u8>,
}

impl<R: Read> RecordReader<R> {
    /// A reader over `inner`, positioned at `offset` of a file of `file_len` bytes.
    pub(crate) fn new(inner: R, offset: u64, file_len: u64) -> Self {
        Self {
            inner,
            pos: offset,
            offset,
            file_len,
            body: Vec::new(),
        }
    }

    /// End offset of the last valid record returned (or the start offset).
    pub(crate) fn valid_end(&self) -> u64 {
        self.offset
    }

    /// Body of the record last returned.
    #[cfg(test)]
    pub(crate) fn body(&self) -> &[u8] {
        &self.body
    }

    /// Moves the body of the record last returned out of the reader.
    pub(crate) fn take_body(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.body)
    }

    /// Gives back the underlying reader.
    pub(crate) fn into_inner(self) -> R {
        self.inner
    }

    /// Reads the next frame.
    pub(crate) fn next_frame(&mut self) -> io::Result<Frame> {
        let offset = self.offset;
        let mut header = [0u8; RECORD_HEADER_LEN];
        let n = self.read(&mut header)?;
        if n == 0 {
            return Ok(Frame::End);
        }
        if header[..n].iter().all(|&b| b == 0) {
            return self.zero_fill(offset);
        }
        if n < RECORD_HEADER_LEN {
            let reason = CorruptReason::TruncatedRecordHeader {
                available: n as u64,
            };
            return Ok(Frame::Bad {
                offset,
                zxid: None,
                reason,
            });
        }
        let (len, stored, zxid) = parse_record_header(&header);
        let bad = |reason| Frame::Bad {
            offset,
            zxid: Some(zxid),
            reason,
        };
        if let Some(reason) = self.read_body(offset, len, zxid)? {
            return Ok(bad(reason));
        }
        let computed = record_crc(zxid, &self.body);
        if computed != stored {
            return Ok(bad(CorruptReason::ChecksumMismatch { stored, computed }));
        }
        self.offset = offset + RECORD_HEADER_LEN as u64 + u64::from(len);
        Ok(Frame::Record { offset, zxid })
    }

    /// Reads a body of `len` bytes into `self.body`, or says why it cannot.
    fn read_body(&mut self, offset: u64, len: u32, zxid: u64) -> io::Result<Option<CorruptReason>> {
        if zxid == 0 {
            return Ok(Some(CorruptReason::ZeroZxid));
        }
        let available = self
            .file_len
            .saturating_sub(offset + RECORD_HEADER_LEN as u64);
        if u64::from(len) > available {
            return Ok(Some(CorruptReason::TruncatedBody { len, available }));
        }
        // `len <= available <= file length`, so this allocation is bounded by
        // the size of the file actually on disk.
        let mut body = std::mem::take(&mut self.body);
        body.clear();
        body.resize(len as usize, 0);
        let got = self.read(&mut body)?;
        self.body = body;
        if got < len as usize {
            let available = got as u64;
            return Ok(Some(CorruptReason::TruncatedBody { len, available }));
        }
        Ok(None)
    }

    /// A zero record header at `offset`: end of log if the rest of the file
    /// is zero too, otherwise a bad frame.
    fn zero_fill(&mut self, offset: u64) -> io::Result<Frame> {
        match first_nonzero(&mut self.inner, self.pos)? {
            None => Ok(Frame::ZeroFill { offset }),
            Some(nonzero_at) => Ok(Frame::Bad {
                offset,
                zxid: None,
                reason: CorruptReason::DataAfterZeroFill { nonzero_at },
            }),
        }
    }

    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = read_full(&mut self.inner, buf)?;
        self.pos += n as u64;
        Ok(n)
    }
}

/// Whether any valid record with a zxid above `prev_zxid` starts anywhere in
/// `tail` after its first byte. `tail` holds the bytes of a segment from a bad
/// frame to the end of the file. Valid records after a bad frame mean the bad
/// frame is in the middle of the log, not at a crash-torn end.
pub(crate) fn valid_record_follows(tail: &[u8], prev_zxid: u64) -> bool {
    (1..tail.len()).any(|i| is_valid_frame_at(&tail[i..], prev_zxid))
}

/// The (body length, stored CRC, zxid) of the record header at the start of
/// `bytes`, if all 16 bytes are there.
pub(crate) fn header_at(bytes: &[u8]) -> Option<(u32, u32, u64)> {
    bytes
        .first_chunk::<RECORD_HEADER_LEN>()
        .map(parse_record_header)
}

/// Index in `bytes` where the run of zero bytes that reaches its end starts
/// (`bytes.len()` if the last byte is not zero).
pub(crate) fn trailing_zeros_start(bytes: &[u8]) -> usize {
    bytes.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1)
}

/// A body length, other than `declared`, under which the record header
/// `(declared, stored, zxid)` followed by `rest` (the bytes after the header
/// up to the end of the file) is a record with a correct CRC: the length
/// field was damaged. Tries every length one bit flip away from `declared`,
/// and the length that ends the record exactly at the end of the file (the
/// last record of a file that is not preallocated). That is at most 33
/// candidates, so a record that really was torn passes for a damaged one
/// only with a probability of about 33 in 2^32.
pub(crate) fn length_matching_crc(
    declared: u32,
    stored: u32,
    zxid: u64,
    rest: &[u8],
) -> Option<u32> {
    let present = u32::try_from(rest.len()).unwrap_or(u32::MAX);
    let mut candidates: Vec<u32> = (0..32).map(|bit| declared ^ (1 << bit)).collect();
    candidates.push(present);
    candidates.retain(|&len| len != declared && len <= present);
    candidates.sort_unstable();
    candidates.dedup();
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&zxid.to_be_bytes());
    let mut hashed = 0usize;
    for len in candidates {
        hasher.update(&rest[hashed..len as usize]);
        hashed = len as usize;
        if hasher.clone().finalize() == stored {
            return Some(len);
        }
    }
    None
}

/// The reflected CRC-32 (IEEE) polynomial `crc32fast` computes with.
const CRC32_POLY: u32 = 0xEDB8_8320;

/// Byte-at-a-time table of the reflected CRC-32: entry `v` is the register
/// after shifting the byte `v` through a zero register.
const CRC32_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut r = i as u32;
        let mut k = 0;
        while k < 8 {
            r = if r & 1 != 0 {
                (r >> 1) ^ CRC32_POLY
            } else {
                r >> 1
            };
            k += 1;
        }
        table[i] = r;
        i += 1;
    }
    table
};

/// Whether the record `(zxid, body)` whose header stores the CRC `stored` is
/// one flipped bit away from a record with a correct CRC: one bit of the
/// zxid, of the body or of the stored CRC itself. That is the signature of
/// bit rot, not of a write lost in a crash (which loses whole sectors).
///
/// CRC-32 is linear: flipping bit `b` of the byte `d` bytes before the end of
/// the message changes the CRC by a value that depends only on `b` and `d`
/// (the byte `1 << b` run through a zero register, then `d` zero bytes). So
/// one pass that advances eight registers by one zero byte per message byte
/// compares the mismatch against every single-bit error.
pub(crate) fn one_bit_from_valid(zxid: u64, body: &[u8], stored: u32) -> bool {
    let syndrome = stored ^ record_crc(zxid, body);
    if syndrome.count_ones() == 1 {
        return true; // the stored CRC itself took the flip
    }
    let message_len = 8 + body.len();
    let mut regs: [u32; 8] = std::array::from_fn(|bit| CRC32_TABLE[1 << bit]);
    for _ in 0..message_len {
        if regs.contains(&syndrome) {
            return true;
        }
        for r in &mut regs {
            *r = (*r >> 8) ^ CRC32_TABLE[(*r & 0xff) as usize];
        }
    }
    false
}

/// Whether `bytes` starts with a complete record with a correct CRC and a
/// zxid above `prev_zxid`.
fn is_valid_frame_at(bytes: &[u8], prev_zxid: u64) -> bool {
    let Some(header) = bytes.first_chunk::<RECORD_HEADER_LEN>() else {
        return false;
    };
    let (len, stored, zxid) = parse_record_header(header);
    let rest = &bytes[RECORD_HEADER_LEN..];
    zxid > prev_zxid
        && (len as usize) <= rest.len()
        && record_crc(zxid, &rest[..len as usize]) == stored
}

/// An open segment file whose header was checked.
pub(crate) struct OpenSegment {
    pub(crate) file: File,
    pub(crate) len: u64,
    pub(crate) header: HeaderState,
}

/// Opens `path` read-only and classifies its header.
pub(crate) fn open_segment(path: &Path) -> Result<OpenSegment> {
    let mut file = File::open(path).at(path)?;
    let len = file.metadata().at(path)?.len();
    let header = read_header_state(&mut file, len).at(path)?;
    Ok(OpenSegment { file, len, header })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn frame(zxid: u64, body: &[u8]) -> Vec<u8> {
        let mut v = record_header(zxid, body).to_vec();
        v.extend_from_slice(body);
        v
    }

    fn reader(bytes: &[u8]) -> RecordReader<Cursor<Vec<u8>>> {
        RecordReader::new(Cursor::new(bytes.to_vec()), 0, bytes.len() as u64)
    }

    #[test]
    fn reader_returns_records_then_clean_end() {
        let mut bytes = frame(1, b"a");
        bytes.extend(frame(2, b""));
        let mut r = reader(&bytes);
        assert_eq!(
            r.next_frame().unwrap(),
            Frame::Record { offset: 0, zxid: 1 }
        );
        assert_eq!(r.body(), b"a");
        assert_eq!(
            r.next_frame().unwrap(),
            Frame::Record {
                offset: 17,
                zxid: 2
            }
        );
        assert_eq!(r.body(), b"");
        assert_eq!(r.next_frame().unwrap(), Frame::End);
        assert_eq!(r.valid_end(), 33);
    }

    #[test]
    fn reader_treats_trailing_zeros_as_zero_fill_end() {
        let mut bytes = frame(1, b"abc");
        bytes.extend([0u8; 100]);
        let mut r = reader(&bytes);
        assert!(matches!(r.next_frame().unwrap(), Frame::Record { .. }));
        assert_eq!(r.next_frame().unwrap(), Frame::ZeroFill { offset: 19 });
    }

    #[test]
    fn reader_reports_nonzero_data_after_zero_header_as_bad() {
        let mut bytes = vec![0u8; 40];
        bytes[33] = 7;
        let mut r = reader(&bytes);
        assert_eq!(
            r.next_frame().unwrap(),
            Frame::Bad {
                offset: 0,
                zxid: None,
                reason: CorruptReason::DataAfterZeroFill { nonzero_at: 33 }
            }
        );
    }

    #[test]
    fn reader_reports_huge_declared_length_without_allocating_it() {
        let mut bytes = frame(1, b"abc");
        bytes[..4].copy_from_slice(&u32::MAX.to_be_bytes());
        let mut r = reader(&bytes);
        assert_eq!(
            r.next_frame().unwrap(),
            Frame::Bad {
                offset: 0,
                zxid: Some(1),
                reason: CorruptReason::TruncatedBody {
                    len: u32::MAX,
                    available: 3
                }
            }
        );
    }

    #[test]
    fn valid_record_follows_finds_a_record_after_garbage_but_not_in_zeros() {
        let mut bytes = vec![0xAB; 5];
        bytes.extend(frame(9, b"xyz"));
        assert!(valid_record_follows(&bytes, 8));
        assert!(!valid_record_follows(&bytes, 9));
        assert!(!valid_record_follows(&[0u8; 64], 0));
    }

    #[test]
    fn one_bit_from_valid_finds_every_single_bit_flip_of_zxid_body_and_crc() {
        let zxid = 0x0000_0003_0000_0101;
        let body: Vec<u8> = (0..300u32).map(|i| (i * 7 + 1) as u8).collect();
        let framed = frame(zxid, &body);
        // Bytes 4..8 are the CRC, 8..16 the zxid, 16.. the body; the length
        // (0..4) is not covered by the CRC.
        for byte in 4..framed.len() {
            for bit in 0..8 {
                let mut damaged = framed.clone();
                damaged[byte] ^= 1 << bit;
                let (_, stored, z) = header_at(&damaged).unwrap();
                assert!(
                    one_bit_from_valid(z, &damaged[16..], stored),
                    "bit {bit} of byte {byte}"
                );
            }
        }
    }

    #[test]
    fn one_bit_from_valid_does_not_take_a_lost_sector_for_a_bit_flip() {
        let zxid = 7;
        let body: Vec<u8> = (0..1500u32).map(|i| (i % 251 + 1) as u8).collect();
        let stored = record_crc(zxid, &body);
        for lost_from in [0, 3, 500, 1000, 1499] {
            let mut torn = body.clone();
            torn[lost_from..].fill(0);
            assert!(
                !one_bit_from_valid(zxid, &torn, stored),
                "zeros from {lost_from}"
            );
        }
        assert!(!one_bit_from_valid(zxid, &body, stored ^ 0b11));
    }

    #[test]
    fn length_matching_crc_recovers_a_length_one_bit_off_or_ending_at_eof() {
        let framed = frame(5, b"hello world");
        let (len, stored, zxid) = header_at(&framed).unwrap();
        let rest = &framed[16..];
        assert_eq!(length_matching_crc(len, stored, zxid, rest), None);
        for bit in 0..32 {
            let damaged = len ^ (1 << bit);
            assert_eq!(
                length_matching_crc(damaged, stored, zxid, rest),
                Some(len),
                "bit {bit}"
            );
        }
        // A torn body (a prefix of it) matches no length.
        assert_eq!(length_matching_crc(len, stored, zxid, &rest[..5]), None);
        assert_eq!(
            length_matching_crc(0x00ff_0000, stored, zxid, rest),
            Some(len)
        );
    }

    #[test]
    fn trailing_zeros_start_finds_the_run_reaching_the_end() {
        assert_eq!(trailing_zeros_start(&[1, 0, 2, 0, 0]), 3);
        assert_eq!(trailing_zeros_start(&[1, 2]), 2);
        assert_eq!(trailing_zeros_start(&[0, 0]), 0);
        assert_eq!(trailing_zeros_start(&[]), 0);
    }
}
