//! The part of jute's binary encoding (`BinaryInputArchive`) that
//! ZooKeeper's snapshots and logs use, read from bytes that came off disk:
//! every length is checked against the bytes left before anything is
//! allocated, and nothing here can panic.
//!
//! All integers are big-endian. `buffer` and `ustring` are an `int` length
//! (-1 for null) and that many bytes; `vector` is an `int` count (-1 for
//! null) and that many elements; `boolean` is one byte.

use super::FormatError;

/// A cursor over bytes that knows its offset, for error messages.
pub(crate) struct Jute<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Offset of `buf[0]` in the file, added to every reported offset.
    base: u64,
    /// Set when a read failed only because the bytes ran out (a length or
    /// count past the end): a reader of a stream can wait for more bytes.
    short: bool,
}

impl<'a> Jute<'a> {
    pub fn new(buf: &'a [u8], base: u64) -> Jute<'a> {
        Jute {
            buf,
            pos: 0,
            base,
            short: false,
        }
    }

    /// Bytes consumed so far.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Goes back to an earlier position (an alternative reading).
    pub fn rewind(&mut self, pos: usize) {
        self.pos = pos.min(self.pos);
    }

    /// The file offset of the next byte.
    pub fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// Whether a read failed because the input ended (see `short`).
    pub fn ran_short(&self) -> bool {
        self.short
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Everything read so far.
    pub fn consumed(&self) -> &'a [u8] {
        &self.buf[..self.pos]
    }

    pub fn error(&self, what: impl Into<String>) -> FormatError {
        FormatError {
            offset: self.offset(),
            what: what.into(),
        }
    }

    pub fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], FormatError> {
        if n > self.remaining() {
            self.short = true;
            return Err(self.error(format!(
                "{what}: {n} bytes needed, {} left",
                self.remaining()
            )));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// Fails with `what` unless `n` more bytes are there.
    pub fn need(&mut self, n: usize, what: &str) -> Result<(), FormatError> {
        if n > self.remaining() {
            self.short = true;
            return Err(self.error(what));
        }
        Ok(())
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], FormatError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N, what)?);
        Ok(a)
    }

    pub fn byte(&mut self, what: &str) -> Result<u8, FormatError> {
        Ok(self.array::<1>(what)?[0])
    }

    pub fn boolean(&mut self, what: &str) -> Result<bool, FormatError> {
        Ok(self.byte(what)? != 0)
    }

    pub fn int(&mut self, what: &str) -> Result<i32, FormatError> {
        Ok(i32::from_be_bytes(self.array(what)?))
    }

    pub fn long(&mut self, what: &str) -> Result<i64, FormatError> {
        Ok(i64::from_be_bytes(self.array(what)?))
    }

    /// A `buffer`; null (length -1) is `None`.
    pub fn buffer(&mut self, what: &str) -> Result<Option<&'a [u8]>, FormatError> {
        let at = self.offset();
        let len = self.int(what)?;
        if len == -1 {
            return Ok(None);
        }
        if len < 0 {
            return Err(FormatError {
                offset: at,
                what: format!("{what}: negative length {len}"),
            });
        }
        self.take(len as usize, what).map(Some)
    }

    /// A `ustring` that must not be null.
    pub fn string(&mut self, what: &str) -> Result<String, FormatError> {
        let at = self.offset();
        let bytes = self.buffer(what)?.ok_or_else(|| FormatError {
            offset: at,
            what: format!("{what} is null"),
        })?;
        String::from_utf8(bytes.to_vec()).map_err(|_| FormatError {
            offset: at,
            what: format!("{what} is not UTF-8"),
        })
    }

    /// A `vector`'s count (null is `None`); the count is refused if its
    /// elements, at `min_elem` bytes each, could not fit in what is left.
    pub fn vector_len(
        &mut self,
        min_elem: usize,
        what: &str,
    ) -> Result<Option<usize>, FormatError> {
        let at = self.offset();
        let n = self.int(what)?;
        if n == -1 {
            return Ok(None);
        }
        if n < 0 {
            return Err(FormatError {
                offset: at,
                what: format!("{what}: negative count {n}"),
            });
        }
        let n = n as usize;
        if n.saturating_mul(min_elem.max(1)) > self.remaining() {
            self.short = true;
            return Err(FormatError {
                offset: at,
                what: format!(
                    "{what}: {n} elements cannot fit in the {} bytes left",
                    self.remaining()
                ),
            });
        }
        Ok(Some(n))
    }
}

/// The writing side of the same encoding (`BinaryOutputArchive`), for the
/// records the quorum protocol sends.
pub(crate) fn put_int(out: &mut Vec<u8>, v: i32) {
    out.extend_from_slice(&v.to_be_bytes());
}

pub(crate) fn put_long(out: &mut Vec<u8>, v: i64) {
    out.extend_from_slice(&v.to_be_bytes());
}

pub(crate) fn put_bool(out: &mut Vec<u8>, v: bool) {
    out.push(u8::from(v));
}

/// A `buffer`; `None` is null (length -1).
pub(crate) fn put_buffer(out: &mut Vec<u8>, v: Option<&[u8]>) {
    match v {
        Some(b) => {
            put_int(out, b.len() as i32);
            out.extend_from_slice(b);
        }
        None => put_int(out, -1),
    }
}

pub(crate) fn put_string(out: &mut Vec<u8>, v: &str) {
    put_buffer(out, Some(v.as_bytes()));
}

/// Adler-32 (RFC 1950), which `java.util.zip.Adler32` computes: ZooKeeper's
/// checksum of snapshots and log records.
#[derive(Clone, Copy)]
pub(crate) struct Adler32 {
    a: u32,
    b: u32,
}

impl Default for Adler32 {
    fn default() -> Self {
        Adler32 { a: 1, b: 0 }
    }
}

impl Adler32 {
    const MOD: u32 = 65521;
    /// The most bytes summed before the sums must be reduced (zlib's NMAX).
    const NMAX: usize = 5552;

    pub fn update(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(Self::NMAX) {
            for &x in chunk {
                self.a += u32::from(x);
                self.b += self.a;
            }
            self.a %= Self::MOD;
            self.b %= Self::MOD;
        }
    }

    pub fn value(&self) -> u32 {
        (self.b << 16) | self.a
    }

    pub fn of(bytes: &[u8]) -> u32 {
        let mut a = Adler32::default();
        a.update(bytes);
        a.value()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adler32_matches_the_reference_values() {
        // RFC 1950's example and values zlib's adler32() gives.
        assert_eq!(Adler32::of(b""), 1);
        assert_eq!(Adler32::of(b"Wikipedia"), 0x11E6_0398);
        let big = vec![0xFFu8; 100_000];
        let mut split = Adler32::default();
        split.update(&big[..7]);
        split.update(&big[7..]);
        assert_eq!(split.value(), Adler32::of(&big));
        // Reference: zlib.adler32(b"\xff" * 100000) in Python.
        assert_eq!(Adler32::of(&big), 0x149A_302C);
    }

    #[test]
    fn lengths_past_the_end_are_errors_not_allocations() {
        let bytes = [0x7F, 0xFF, 0xFF, 0xFF, 1, 2];
        assert!(Jute::new(&bytes, 0).buffer("data").is_err());
        assert!(Jute::new(&bytes, 0).vector_len(1, "acl").is_err());
        let null = (-1i32).to_be_bytes();
        assert_eq!(Jute::new(&null, 0).buffer("data").unwrap(), None);
        let neg = (-2i32).to_be_bytes();
        let e = Jute::new(&neg, 100).buffer("data").unwrap_err();
        assert_eq!(e.offset, 100);
    }
}
