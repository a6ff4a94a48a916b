//! [`Wire`] implementations for the protocol's primitive types.

use super::{Ctx, DecodeError, Reader, Wire, Writer};
use bytes::Bytes;

macro_rules! fixed_int {
    ($($t:ty => $w:ident),*) => {$(
        impl Wire for $t {
            fn read(r: &mut Reader, _: Ctx) -> Result<Self, DecodeError> {
                Ok(<$t>::from_be_bytes(r.array(stringify!($t))?))
            }
            fn write(&self, w: &mut Writer, _: Ctx) {
                w.$w(*self);
            }
        }
    )*};
}
fixed_int!(i8 => i8, i16 => i16, i32 => i32, i64 => i64);

impl Wire for u16 {
    fn read(r: &mut Reader, _: Ctx) -> Result<Self, DecodeError> {
        Ok(u16::from_be_bytes(r.array("u16")?))
    }
    fn write(&self, w: &mut Writer, _: Ctx) {
        w.put_slice(&self.to_be_bytes());
    }
}

impl Wire for u32 {
    fn read(r: &mut Reader, _: Ctx) -> Result<Self, DecodeError> {
        Ok(u32::from_be_bytes(r.array("u32")?))
    }
    fn write(&self, w: &mut Writer, _: Ctx) {
        w.put_slice(&self.to_be_bytes());
    }
}

impl Wire for f64 {
    fn read(r: &mut Reader, _: Ctx) -> Result<Self, DecodeError> {
        Ok(f64::from_be_bytes(r.array("f64")?))
    }
    fn write(&self, w: &mut Writer, _: Ctx) {
        w.put_slice(&self.to_be_bytes());
    }
}

impl Wire for bool {
    fn read(r: &mut Reader, _: Ctx) -> Result<Self, DecodeError> {
        let [b] = r.array::<1>("bool")?;
        Ok(b != 0)
    }
    fn write(&self, w: &mut Writer, _: Ctx) {
        w.i8(i8::from(*self));
    }
}

/// A 128-bit UUID as Kafka encodes it (topic ids): 16 bytes, big-endian halves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Uuid(pub [u8; 16]);

impl Uuid {
    /// The all-zero id, which Kafka uses for "no topic id".
    pub const ZERO: Uuid = Uuid([0; 16]);

    /// True for the all-zero id.
    pub fn is_zero(&self) -> bool {
        self.0 == [0; 16]
    }
}

impl std::fmt::Display for Uuid {
    /// Kafka prints topic ids as URL-safe base64 without padding.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let mut bits: u32 = 0;
        let mut nbits = 0;
        let mut out = String::with_capacity(22);
        for &b in &self.0 {
            bits = (bits << 8) | u32::from(b);
            nbits += 8;
            while nbits >= 6 {
                nbits -= 6;
                out.push(ALPHABET[((bits >> nbits) & 63) as usize] as char);
            }
        }
        if nbits > 0 {
            out.push(ALPHABET[((bits << (6 - nbits)) & 63) as usize] as char);
        }
        f.write_str(&out)
    }
}

impl std::str::FromStr for Uuid {
    type Err = &'static str;

    /// Reads the form [`Uuid`]'s `Display` writes (22 characters of URL-safe base64),
    /// as Kafka's `partition.metadata` files hold topic ids.
    fn from_str(s: &str) -> Result<Uuid, &'static str> {
        let bad = || "a topic id is 22 characters of URL-safe base64";
        if s.len() != 22 {
            return Err(bad());
        }
        let mut out = [0u8; 16];
        let (mut bits, mut nbits, mut at) = (0u32, 0, 0);
        for c in s.bytes() {
            let v = match c {
                b'A'..=b'Z' => c - b'A',
                b'a'..=b'z' => c - b'a' + 26,
                b'0'..=b'9' => c - b'0' + 52,
                b'-' => 62,
                b'_' => 63,
                _ => return Err(bad()),
            };
            bits = (bits << 6) | u32::from(v);
            nbits += 6;
            if nbits >= 8 {
                nbits -= 8;
                if at == 16 {
                    return Err(bad());
                }
                out[at] = (bits >> nbits) as u8;
                at += 1;
            }
        }
        // 22 characters carry 132 bits: the last 4 must be zero.
        if at != 16 || bits & ((1 << nbits) - 1) != 0 {
            return Err(bad());
        }
        Ok(Uuid(out))
    }
}

impl Wire for Uuid {
    fn read(r: &mut Reader, _: Ctx) -> Result<Self, DecodeError> {
        Ok(Uuid(r.array("uuid")?))
    }
    fn write(&self, w: &mut Writer, _: Ctx) {
        w.put_slice(&self.0);
    }
}

fn read_str(r: &mut Reader, ctx: Ctx) -> Result<Option<String>, DecodeError> {
    match r.length(ctx, true, 1, "string")? {
        None => Ok(None),
        Some(n) => {
            let b = r.take(n, "string")?;
            String::from_utf8(b.to_vec()).map(Some).map_err(|_| DecodeError::InvalidUtf8)
        }
    }
}

fn write_str(w: &mut Writer, ctx: Ctx, s: Option<&str>) {
    let s = s.map(|s| fit_classic(ctx, s));
    w.length(ctx.flexible, true, s.map(str::len));
    if let Some(s) = s {
        w.put_slice(s.as_bytes());
    }
}

/// A classic (non-flexible) string's length is an int16, so one longer than 32767 bytes
/// cannot be encoded, and writing its length truncated would corrupt the rest of the
/// frame. Kafka's Java encoder throws; ours cannot fail, so it cuts the string at the
/// last character boundary that fits (a long config value or error message, never a
/// name a client must match exactly: those are refused long before).
fn fit_classic(ctx: Ctx, s: &str) -> &str {
    const MAX: usize = i16::MAX as usize;
    if ctx.flexible || s.len() <= MAX {
        return s;
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

impl Wire for String {
    fn read(r: &mut Reader, ctx: Ctx) -> Result<Self, DecodeError> {
        read_str(r, ctx)?.ok_or(DecodeError::InvalidLength {
            what: "non-nullable string",
            length: -1,
            remaining: r.remaining(),
        })
    }
    fn write(&self, w: &mut Writer, ctx: Ctx) {
        write_str(w, ctx, Some(self));
    }
}

impl Wire for Option<String> {
    fn read(r: &mut Reader, ctx: Ctx) -> Result<Self, DecodeError> {
        read_str(r, ctx)
    }
    fn write(&self, w: &mut Writer, ctx: Ctx) {
        write_str(w, ctx, self.as_deref());
    }
}

fn read_bytes(r: &mut Reader, ctx: Ctx) -> Result<Option<Bytes>, DecodeError> {
    match r.length(ctx, false, 1, "bytes")? {
        None => Ok(None),
        Some(n) => r.take(n, "bytes").map(Some),
    }
}

impl Wire for Bytes {
    fn read(r: &mut Reader, ctx: Ctx) -> Result<Self, DecodeError> {
        read_bytes(r, ctx)?.ok_or(DecodeError::InvalidLength {
            what: "non-nullable bytes",
            length: -1,
            remaining: r.remaining(),
        })
    }
    fn write(&self, w: &mut Writer, ctx: Ctx) {
        w.length(ctx.flexible, false, Some(self.len()));
        w.put_bytes(self);
    }
}

impl Wire for Option<Bytes> {
    fn read(r: &mut Reader, ctx: Ctx) -> Result<Self, DecodeError> {
        read_bytes(r, ctx)
    }
    fn write(&self, w: &mut Writer, ctx: Ctx) {
        w.length(ctx.flexible, false, self.as_ref().map(Bytes::len));
        if let Some(b) = self {
            w.put_bytes(b);
        }
    }
}

impl Wire for Option<crate::records::RecordSet> {
    fn read(r: &mut Reader, ctx: Ctx) -> Result<Self, DecodeError> {
        Ok(read_bytes(r, ctx)?.map(crate::records::RecordSet::from))
    }
    fn write(&self, w: &mut Writer, ctx: Ctx) {
        w.length(ctx.flexible, false, self.as_ref().map(crate::records::RecordSet::len));
        for part in self.iter().flat_map(|s| s.parts()) {
            match part {
                crate::records::RecordPart::Memory(b) => w.put_bytes(b),
                crate::records::RecordPart::External(e) => w.put_external(e),
            }
        }
    }
}

/// A nullable value in a version of its field that does not allow null (see
/// `null [..]` in the `message!` macro): null is refused on read, and `None` goes out as
/// the empty value on write.
pub trait NonNull: Sized {
    /// Reads a value that must not be null.
    fn read_non_null(r: &mut Reader, ctx: Ctx) -> Result<Self, DecodeError>;
    /// Writes `self`, with `None` as empty.
    fn write_non_null(&self, w: &mut Writer, ctx: Ctx);
}

fn null_refused(r: &Reader) -> DecodeError {
    DecodeError::InvalidLength {
        what: "field not nullable in this version",
        length: -1,
        remaining: r.remaining(),
    }
}

impl NonNull for Option<String> {
    fn read_non_null(r: &mut Reader, ctx: Ctx) -> Result<Self, DecodeError> {
        match read_str(r, ctx)? {
            None => Err(null_refused(r)),
            some => Ok(some),
        }
    }
    fn write_non_null(&self, w: &mut Writer, ctx: Ctx) {
        write_str(w, ctx, Some(self.as_deref().unwrap_or("")));
    }
}

impl<T: Wire> NonNull for Option<Vec<T>> {
    fn read_non_null(r: &mut Reader, ctx: Ctx) -> Result<Self, DecodeError> {
        match read_array(r, ctx)? {
            None => Err(null_refused(r)),
            some => Ok(some),
        }
    }
    fn write_non_null(&self, w: &mut Writer, ctx: Ctx) {
        match self {
            Some(v) => v.write(w, ctx),
            None => w.length(ctx.flexible, false, Some(0)),
        }
    }
}

/// The most memory an array decoder reserves before its elements have been read.
const MAX_PREALLOC_BYTES: usize = 4096;

fn read_array<T: Wire>(r: &mut Reader, ctx: Ctx) -> Result<Option<Vec<T>>, DecodeError> {
    match r.length(ctx, false, 1, "array")? {
        None => Ok(None),
        Some(n) => {
            // `length` proved n <= remaining bytes, but n elements can take far more
            // memory than n bytes (a topic struct is ~70 bytes, its smallest encoding
            // a few): reserving n up front would let a 1 MiB frame claim a 70 MiB
            // vector. Reserve a bounded amount and let the vector grow as elements
            // actually decode, each of which consumes input.
            let mut v = Vec::with_capacity(n.min(MAX_PREALLOC_BYTES / size_of::<T>().max(1)));
            for _ in 0..n {
                v.push(T::read(r, ctx)?);
            }
            Ok(Some(v))
        }
    }
}

impl<T: Wire> Wire for Vec<T> {
    fn read(r: &mut Reader, ctx: Ctx) -> Result<Self, DecodeError> {
        read_array(r, ctx)?.ok_or(DecodeError::InvalidLength {
            what: "non-nullable array",
            length: -1,
            remaining: r.remaining(),
        })
    }
    fn write(&self, w: &mut Writer, ctx: Ctx) {
        w.length(ctx.flexible, false, Some(self.len()));
        for item in self {
            item.write(w, ctx);
        }
    }
}

impl<T: Wire> Wire for Option<Vec<T>> {
    fn read(r: &mut Reader, ctx: Ctx) -> Result<Self, DecodeError> {
        read_array(r, ctx)
    }
    fn write(&self, w: &mut Writer, ctx: Ctx) {
        w.length(ctx.flexible, false, self.as_ref().map(Vec::len));
        for item in self.iter().flatten() {
            item.write(w, ctx);
        }
    }
}

#[cfg(test)]
mod uuid_tests {
    use super::Uuid;

    #[test]
    fn topic_ids_print_and_parse_as_kafka_writes_them() {
        let mut one = [0u8; 16];
        one[15] = 1;
        assert_eq!(Uuid(one).to_string(), "AAAAAAAAAAAAAAAAAAAAAQ");
        for id in [Uuid::ZERO, Uuid(one), Uuid([0xff; 16]), Uuid(*b"0123456789abcdef")] {
            assert_eq!(id.to_string().parse::<Uuid>(), Ok(id));
        }
        for bad in [
            "",
            "AAAAAAAAAAAAAAAAAAAAA",
            "AAAAAAAAAAAAAAAAAAAAAQQ",
            "AAAAAAAAAAAAAAAAAAAA+Q",
            "AAAAAAAAAAAAAAAAAAAAAB",
        ] {
            assert!(bad.parse::<Uuid>().is_err(), "{bad:?}");
        }
    }
}
