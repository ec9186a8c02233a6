//! Jute, ZooKeeper's binary record format.
//!
//! Everything is big-endian. `int` is 4 bytes, `long` 8, `boolean` one byte
//! (0 or 1), `ustring` and `buffer` are an `int` length followed by that many
//! bytes (-1 means null), a `vector<T>` is an `int` count followed by the
//! elements (-1 means null). Records are their fields in declaration order,
//! with nothing in between.
//!
//! Decoding never trusts a length: it is checked against the bytes that are
//! actually left before anything is allocated, so a hostile length cannot make
//! us reserve memory we were not sent.

use thiserror::Error;

/// Why a record could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// The input ended in the middle of a field.
    #[error("record truncated: needed {needed} more bytes at offset {offset}")]
    Truncated { offset: usize, needed: usize },
    /// A field holds a value the format does not allow.
    #[error("invalid record: {0}")]
    Invalid(String),
}

/// Reads jute fields from a byte slice.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Read negative vector counts as Java's jute reader does (see
    /// [`Reader::read_len`]): for what clients send, not for wazoo's own
    /// formats, where a negative count is damage.
    java_counts: bool,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader {
            buf,
            pos: 0,
            java_counts: false,
        }
    }

    /// A reader of a client's request, which reads what ZooKeeper's
    /// server reads: a negative vector count is an empty vector.
    pub fn client(buf: &'a [u8]) -> Self {
        Reader {
            java_counts: true,
            ..Reader::new(buf)
        }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub fn position(&self) -> usize {
        self.pos
    }

    /// The unread part of the input.
    pub fn rest(&self) -> &'a [u8] {
        &self.buf[self.pos..]
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.remaining() < n {
            return Err(DecodeError::Truncated {
                offset: self.pos,
                needed: n - self.remaining(),
            });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub fn read_i32(&mut self) -> Result<i32, DecodeError> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn read_i64(&mut self) -> Result<i64, DecodeError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(i64::from_be_bytes(a))
    }

    pub fn read_bool(&mut self) -> Result<bool, DecodeError> {
        // Java's readBoolean treats any non-zero byte as true.
        Ok(self.take(1)?[0] != 0)
    }

    /// A length-prefixed byte run; `None` for the null encoding (-1).
    pub fn read_opt_buffer(&mut self) -> Result<Option<&'a [u8]>, DecodeError> {
        let len = self.read_i32()?;
        if len == -1 {
            return Ok(None);
        }
        if len < 0 {
            return Err(DecodeError::Invalid(format!("negative length {len}")));
        }
        Ok(Some(self.take(len as usize)?))
    }

    /// A buffer that keeps null (-1) apart from empty, as ZooKeeper keeps
    /// a znode's data (ZooKeeper Programmer's Guide, "ZooKeeper Data
    /// Model": a node created or set with null data reads back as null).
    pub fn read_nullable_buffer(&mut self) -> Result<Option<Vec<u8>>, DecodeError> {
        Ok(self.read_opt_buffer()?.map(<[u8]>::to_vec))
    }

    /// A buffer; null decodes as empty, as ZooKeeper's server treats every
    /// buffer but node data (see [`Reader::read_nullable_buffer`]).
    pub fn read_buffer(&mut self) -> Result<Vec<u8>, DecodeError> {
        Ok(self
            .read_opt_buffer()?
            .map(<[u8]>::to_vec)
            .unwrap_or_default())
    }

    /// A ustring; null decodes as the empty string. Invalid UTF-8 becomes
    /// U+FFFD, as Java's decoder makes it in ZooKeeper's server: a request
    /// whose path is not UTF-8 is then answered like one whose path holds
    /// U+FFFD (a read finds no node, a create is refused as a bad path),
    /// not refused as undecodable.
    pub fn read_string(&mut self) -> Result<String, DecodeError> {
        match self.read_opt_buffer()? {
            None => Ok(String::new()),
            Some(b) => Ok(decode_like_java(b)),
        }
    }

    /// A ustring that may be null: `None` for null, otherwise as
    /// [`Reader::read_string`] decodes it.
    pub fn read_opt_string(&mut self) -> Result<Option<String>, DecodeError> {
        Ok(self.read_opt_buffer()?.map(decode_like_java))
    }

    /// A vector count, checked against the bytes left given the smallest
    /// encoding an element can have. Null (-1) counts as empty. Any other
    /// negative count is an error, except in a [`Reader::client`], where it
    /// is empty too: Java's BinaryInputArchive.startVector takes it as it
    /// is and its index is done at once (`nelems <= 0`), so ZooKeeper's
    /// server reads an empty vector.
    pub fn read_len(&mut self, min_elem_size: usize) -> Result<usize, DecodeError> {
        let n = self.read_i32()?;
        if n == -1 || (n < 0 && self.java_counts) {
            return Ok(0);
        }
        if n < 0 {
            return Err(DecodeError::Invalid(format!("negative vector length {n}")));
        }
        let n = n as usize;
        if n.saturating_mul(min_elem_size.max(1)) > self.remaining() {
            return Err(DecodeError::Truncated {
                offset: self.pos,
                needed: n * min_elem_size.max(1) - self.remaining(),
            });
        }
        Ok(n)
    }

    pub fn read_vec<T: Jute>(&mut self) -> Result<Vec<T>, DecodeError> {
        let n = self.read_len(T::MIN_SIZE)?;
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(T::read(self)?);
        }
        Ok(v)
    }

    /// A path ZooKeeper's server uses without a null check: null is
    /// refused (its Java code meets a NullPointerException there, which
    /// it answers MarshallingError, as wazoo answers an undecodable
    /// request). The ops whose null path ZooKeeper answers otherwise read
    /// it with [`Reader::read_string`].
    pub fn read_path(&mut self) -> Result<String, DecodeError> {
        match self.read_opt_buffer()? {
            None => Err(DecodeError::Invalid("null path".into())),
            Some(b) => Ok(decode_like_java(b)),
        }
    }

    /// A vector of paths read as [`Reader::read_path`] reads one.
    pub fn read_paths(&mut self) -> Result<Vec<String>, DecodeError> {
        let n = self.read_len(4)?;
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(self.read_path()?);
        }
        Ok(v)
    }

    pub fn read_strings(&mut self) -> Result<Vec<String>, DecodeError> {
        let n = self.read_len(4)?;
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(self.read_string()?);
        }
        Ok(v)
    }
}

/// Appends jute fields to a byte vector.
pub trait Writer {
    fn write_i32(&mut self, v: i32);
    fn write_i64(&mut self, v: i64);
    fn write_bool(&mut self, v: bool);
    fn write_buffer(&mut self, v: &[u8]);
    fn write_null(&mut self);
    /// A buffer, or null (length -1) for `None`.
    fn write_nullable_buffer(&mut self, v: Option<&[u8]>) {
        match v {
            Some(b) => self.write_buffer(b),
            None => self.write_null(),
        }
    }
    fn write_string(&mut self, v: &str) {
        self.write_buffer(v.as_bytes())
    }
    fn write_strings<S: AsRef<str>>(&mut self, v: &[S]) {
        self.write_i32(v.len() as i32);
        for s in v {
            self.write_string(s.as_ref());
        }
    }
    /// A ustring as ZooKeeper's server writes it to a client
    /// (BinaryOutputArchive.writeString): each UTF-16 unit encoded on its
    /// own, so a character above U+FFFF leaves as its two surrogates of
    /// three bytes each (CESU-8); every other character as in UTF-8.
    /// For what goes to clients only: wazoo's own formats keep UTF-8,
    /// which reads back whole.
    fn write_java_string(&mut self, v: &str) {
        self.write_buffer(&java_utf8(v))
    }
    fn write_java_strings<S: AsRef<str>>(&mut self, v: &[S]) {
        self.write_i32(v.len() as i32);
        for s in v {
            self.write_java_string(s.as_ref());
        }
    }
    fn write_vec<T: Jute>(&mut self, v: &[T]);
}

/// `s` in Java's jute encoding: UTF-8, except that a supplementary
/// character is written as its UTF-16 surrogate pair, each unit in three
/// bytes (see [`Writer::write_java_string`]).
pub fn java_utf8(s: &str) -> std::borrow::Cow<'_, [u8]> {
    if s.chars().all(|c| (c as u32) < 0x10000) {
        return std::borrow::Cow::Borrowed(s.as_bytes());
    }
    let mut out = Vec::with_capacity(s.len() + 2);
    for c in s.chars() {
        let mut units = [0u16; 2];
        for &u in c.encode_utf16(&mut units).iter() {
            let u = u32::from(u);
            if u < 0x80 {
                out.push(u as u8);
            } else if u < 0x800 {
                out.push((0xc0 | (u >> 6)) as u8);
                out.push((0x80 | (u & 0x3f)) as u8);
            } else {
                out.push((0xe0 | (u >> 12)) as u8);
                out.push((0x80 | ((u >> 6) & 0x3f)) as u8);
                out.push((0x80 | (u & 0x3f)) as u8);
            }
        }
    }
    std::borrow::Cow::Owned(out)
}

impl Writer for Vec<u8> {
    fn write_i32(&mut self, v: i32) {
        self.extend_from_slice(&v.to_be_bytes());
    }
    fn write_i64(&mut self, v: i64) {
        self.extend_from_slice(&v.to_be_bytes());
    }
    fn write_bool(&mut self, v: bool) {
        self.push(v as u8);
    }
    fn write_buffer(&mut self, v: &[u8]) {
        self.write_i32(v.len() as i32);
        self.extend_from_slice(v);
    }
    fn write_null(&mut self) {
        self.write_i32(-1);
    }
    fn write_vec<T: Jute>(&mut self, v: &[T]) {
        self.write_i32(v.len() as i32);
        for x in v {
            x.write(self);
        }
    }
}

/// A jute record.
pub trait Jute: Sized {
    /// The fewest bytes one encoded value takes (used to bound vector counts).
    const MIN_SIZE: usize;
    fn write(&self, w: &mut Vec<u8>);
    fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError>;

    fn to_bytes(&self) -> Vec<u8> {
        let mut v = Vec::new();
        self.write(&mut v);
        v
    }

    /// Decodes a whole record; trailing bytes are an error.
    fn from_bytes(b: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(b);
        let v = Self::read(&mut r)?;
        if r.remaining() != 0 {
            return Err(DecodeError::Invalid(format!(
                "{} unexpected trailing bytes",
                r.remaining()
            )));
        }
        Ok(v)
    }
}

impl Jute for String {
    const MIN_SIZE: usize = 4;
    fn write(&self, w: &mut Vec<u8>) {
        w.write_string(self)
    }
    fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.read_string()
    }
}

/// A ustring that may be null (jute's `-1` length): `None` is written as
/// null and null reads back as `None`, as ZooKeeper's ReconfigRequest
/// tells an absent field from an empty one.
impl Field for Option<String> {
    const MIN: usize = 4;
    fn put(&self, w: &mut Vec<u8>) {
        match self {
            Some(s) => w.write_string(s),
            None => w.write_null(),
        }
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.read_opt_string()
    }
}

/// Declares a jute record: a struct whose fields are encoded in order.
///
/// Field kinds: `i32`, `i64`, `bool`, `String`, `Vec<u8>` (buffer), and any
/// `Jute` record or `Vec` of one.
#[macro_export]
macro_rules! jute_record {
    ($(#[$m:meta])* pub struct $name:ident { $($(#[$fm:meta])* pub $field:ident : $ty:ty),* $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, PartialEq, Eq, Default)]
        pub struct $name { $($(#[$fm])* pub $field: $ty),* }
        impl $crate::jute::Jute for $name {
            const MIN_SIZE: usize = 0 $(+ <$ty as $crate::jute::Field>::MIN)*;
            fn write(&self, w: &mut Vec<u8>) {
                $( <$ty as $crate::jute::Field>::put(&self.$field, w); )*
            }
            fn read(r: &mut $crate::jute::Reader<'_>) -> Result<Self, $crate::jute::DecodeError> {
                Ok($name { $($field: <$ty as $crate::jute::Field>::get(r)?),* })
            }
        }
    };
}

/// A type that can be a field of a [`jute_record!`].
pub trait Field: Sized {
    const MIN: usize;
    fn put(&self, w: &mut Vec<u8>);
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError>;
}

impl Field for i32 {
    const MIN: usize = 4;
    fn put(&self, w: &mut Vec<u8>) {
        w.write_i32(*self)
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.read_i32()
    }
}
impl Field for i64 {
    const MIN: usize = 8;
    fn put(&self, w: &mut Vec<u8>) {
        w.write_i64(*self)
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.read_i64()
    }
}
impl Field for bool {
    const MIN: usize = 1;
    fn put(&self, w: &mut Vec<u8>) {
        w.write_bool(*self)
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.read_bool()
    }
}
impl Field for Vec<u8> {
    const MIN: usize = 4;
    fn put(&self, w: &mut Vec<u8>) {
        w.write_buffer(self)
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.read_buffer()
    }
}
impl<T: Jute> Field for T {
    const MIN: usize = T::MIN_SIZE;
    fn put(&self, w: &mut Vec<u8>) {
        self.write(w)
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        T::read(r)
    }
}
impl<T: Jute> Jute for Vec<T> {
    const MIN_SIZE: usize = 4;
    fn write(&self, w: &mut Vec<u8>) {
        w.write_vec(self)
    }
    fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.read_vec()
    }
}

/// UTF-8 with U+FFFD for each maximal invalid run, as Rust's lossy
/// decoding does, except that a surrogate encoded in three bytes (as CESU-8
/// writes one) is a single U+FFFD: that is how Java's decoder differs.
fn decode_like_java(mut b: &[u8]) -> String {
    let mut out = String::with_capacity(b.len());
    loop {
        match std::str::from_utf8(b) {
            Ok(s) => {
                out.push_str(s);
                return out;
            }
            Err(e) => {
                let (good, rest) = b.split_at(e.valid_up_to());
                // Valid by construction: from_utf8 said so up to here.
                out.push_str(std::str::from_utf8(good).unwrap_or_default());
                out.push('\u{fffd}');
                let surrogate = matches!(rest, [0xed, 0xa0..=0xbf, 0x80..=0xbf, ..]);
                let skip = if surrogate {
                    3
                } else {
                    e.error_len().unwrap_or(rest.len())
                };
                b = &rest[skip..];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ZooKeeper's jute writer sends a supplementary character as two
    /// 3-byte surrogates (CESU-8), everything else as UTF-8; and its reader
    /// (Java's UTF-8 decoder) takes each such surrogate as one U+FFFD.
    #[test]
    fn java_strings_carry_supplementary_characters_as_surrogate_pairs() {
        assert_eq!(
            &*java_utf8("/a\u{e9}\u{20ac}\0"),
            "/a\u{e9}\u{20ac}\0".as_bytes()
        );
        assert_eq!(&*java_utf8("/\u{1F600}"), &b"/\xed\xa0\xbd\xed\xb8\x80"[..]);
        let mut w = Vec::new();
        w.write_java_string("/\u{1F600}");
        assert_eq!(Reader::new(&w).read_string().unwrap(), "/\u{fffd}\u{fffd}");
    }

    /// A negative vector count other than -1 in a client's request reads
    /// as an empty vector, as in ZooKeeper's jute reader (an ACL list of
    /// -5 is an empty list, and the create is refused with InvalidACL, not
    /// MarshallingError); in wazoo's own formats it is an error.
    #[test]
    fn a_negative_vector_count_reads_as_an_empty_vector_in_a_request() {
        let mut b = Vec::new();
        b.extend_from_slice(&(-5i32).to_be_bytes());
        b.extend_from_slice(b"rest");
        let mut r = Reader::client(&b);
        assert_eq!(r.read_strings().expect("decodes"), Vec::<String>::new());
        assert_eq!(r.remaining(), 4);
        assert!(Reader::new(&b).read_strings().is_err());
    }

    /// ZooKeeper's server decodes a ustring with Java's UTF-8 decoder,
    /// which replaces what is not UTF-8 instead of failing: the request is
    /// then judged on its decoded path.
    #[test]
    fn a_ustring_that_is_not_utf8_decodes_with_replacement_characters() {
        let mut b = Vec::new();
        b.extend_from_slice(&4i32.to_be_bytes());
        b.extend_from_slice(b"/a\xff\x80");
        let s = Reader::new(&b).read_string().expect("decodes");
        assert_eq!(s, "/a\u{fffd}\u{fffd}");
        // A surrogate in three bytes is one U+FFFD, as in Java.
        let mut b = Vec::new();
        b.extend_from_slice(&8i32.to_be_bytes());
        b.extend_from_slice(b"/\xed\xa0\x80\xed\xb0\x80x");
        let s = Reader::new(&b).read_string().expect("decodes");
        assert_eq!(s, "/\u{fffd}\u{fffd}x");
    }
}
