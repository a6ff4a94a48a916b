//! Primitive encodings of the Kafka protocol and the [`Wire`] trait that every message
//! type implements.
//!
//! Decoding reads from a [`Reader`] over a `Bytes` so byte fields (record sets above all)
//! are zero-copy slices of the request frame. Every length and count is checked against
//! the bytes actually present before anything is allocated: a hostile client cannot make
//! the broker reserve memory it did not send.

mod macros;
mod primitives;
mod writer;

pub use primitives::{NonNull, Uuid};
pub use writer::{Chunk, External, Writer};

use bytes::Bytes;

/// How a value is encoded: the API version of the enclosing message and whether that
/// version uses the flexible encoding (KIP-482: compact strings and arrays, tagged fields).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ctx {
    /// API version of the message being encoded or decoded.
    pub version: i16,
    /// True from the API's first flexible version on.
    pub flexible: bool,
}

impl Ctx {
    /// A context for `version` of an API whose first flexible version is `flexible_from`.
    pub fn new(version: i16, flexible_from: i16) -> Ctx {
        Ctx { version, flexible: version >= flexible_from }
    }
}

/// Why a message could not be decoded. Every variant is the client's fault, so the broker
/// answers with `INVALID_REQUEST`/`CORRUPT_MESSAGE` or closes the connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The message ended before a field that its version requires.
    #[error("unexpected end of message while reading {what}: needed {needed} bytes, {remaining} left")]
    Truncated {
        /// What was being read.
        what: &'static str,
        /// Bytes needed.
        needed: usize,
        /// Bytes left in the message.
        remaining: usize,
    },
    /// A length or count prefix was negative where null is not allowed, or larger than
    /// the bytes that follow it.
    #[error("invalid length {length} for {what} ({remaining} bytes left)")]
    InvalidLength {
        /// What was being read.
        what: &'static str,
        /// The length or count the client claimed.
        length: i64,
        /// Bytes left in the message.
        remaining: usize,
    },
    /// A string was not valid UTF-8.
    #[error("string field is not valid UTF-8")]
    InvalidUtf8,
    /// A varint ran past its maximum length.
    #[error("varint is too long")]
    VarintTooLong,
    /// An API key the codec does not know.
    #[error("unknown API key {0}")]
    UnknownApiKey(i16),
    /// An API version outside what the codec can decode.
    #[error("unsupported version {version} of API key {api_key}")]
    UnsupportedVersion {
        /// The API key.
        api_key: i16,
        /// The version asked for.
        version: i16,
    },
}

/// A value with a Kafka wire encoding that may depend on the message version.
pub trait Wire: Sized {
    /// Reads one value; never allocates more than the bytes remaining in `r` justify.
    fn read(r: &mut Reader, ctx: Ctx) -> Result<Self, DecodeError>;
    /// Appends the encoding of `self` to `w`.
    fn write(&self, w: &mut Writer, ctx: Ctx);
}

/// A cursor over a frame's bytes. Slices handed out share the frame's buffer.
#[derive(Debug, Clone)]
pub struct Reader {
    buf: Bytes,
    pos: usize,
}

impl Reader {
    /// Starts reading at the beginning of `buf`.
    pub fn new(buf: Bytes) -> Reader {
        Reader { buf, pos: 0 }
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Position from the start of the buffer.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// The unread rest, without consuming it.
    pub fn rest(&self) -> Bytes {
        self.buf.slice(self.pos..)
    }

    /// Consumes exactly `n` bytes as a zero-copy slice.
    pub fn take(&mut self, n: usize, what: &'static str) -> Result<Bytes, DecodeError> {
        if n > self.remaining() {
            return Err(DecodeError::Truncated { what, needed: n, remaining: self.remaining() });
        }
        let out = self.buf.slice(self.pos..self.pos + n);
        self.pos += n;
        Ok(out)
    }

    /// Consumes exactly `N` bytes into an array.
    pub fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], DecodeError> {
        if N > self.remaining() {
            return Err(DecodeError::Truncated { what, needed: N, remaining: self.remaining() });
        }
        let mut out = [0u8; N];
        out.copy_from_slice(&self.buf[self.pos..self.pos + N]);
        self.pos += N;
        Ok(out)
    }

    /// Reads an unsigned LEB128 varint of at most 32 bits.
    pub fn uvarint(&mut self) -> Result<u32, DecodeError> {
        let mut value: u32 = 0;
        for i in 0..5 {
            let [b] = self.array::<1>("varint")?;
            value |= u32::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(DecodeError::VarintTooLong)
    }

    /// Reads an unsigned LEB128 varint of at most 64 bits.
    pub fn uvarlong(&mut self) -> Result<u64, DecodeError> {
        let mut value: u64 = 0;
        for i in 0..10 {
            let [b] = self.array::<1>("varlong")?;
            value |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(DecodeError::VarintTooLong)
    }

    /// Reads a zig-zag encoded signed varint.
    pub fn varint(&mut self) -> Result<i32, DecodeError> {
        let v = self.uvarint()?;
        Ok(((v >> 1) as i32) ^ -((v & 1) as i32))
    }

    /// Reads a zig-zag encoded signed varlong.
    pub fn varlong(&mut self) -> Result<i64, DecodeError> {
        let v = self.uvarlong()?;
        Ok(((v >> 1) as i64) ^ -((v & 1) as i64))
    }

    /// Reads an array or string length: classic int32/int16 or compact uvarint+1.
    /// Returns `None` for null (-1). The length is checked against the bytes present,
    /// with each element taking at least `min_elem` bytes.
    pub fn length(
        &mut self,
        ctx: Ctx,
        short: bool,
        min_elem: usize,
        what: &'static str,
    ) -> Result<Option<usize>, DecodeError> {
        let n: i64 = if ctx.flexible {
            i64::from(self.uvarint()?) - 1
        } else if short {
            i64::from(i16::from_be_bytes(self.array(what)?))
        } else {
            i64::from(i32::from_be_bytes(self.array(what)?))
        };
        if n == -1 {
            return Ok(None);
        }
        let remaining = self.remaining();
        if n < 0 || (n as u64).saturating_mul(min_elem as u64) > remaining as u64 {
            return Err(DecodeError::InvalidLength { what, length: n, remaining });
        }
        Ok(Some(n as usize))
    }
}

/// Reads one value of type `T` from the start of `buf`; trailing bytes are ignored, as
/// Apache Kafka ignores them.
pub fn decode_all<T: Wire>(buf: Bytes, ctx: Ctx) -> Result<T, DecodeError> {
    let mut r = Reader::new(buf);
    let v = T::read(&mut r, ctx)?;
    Ok(v)
}

/// True if the field declared for `range` exists at `version`.
pub fn in_range<R: std::ops::RangeBounds<i16>>(range: R, version: i16) -> bool {
    range.contains(&version)
}
