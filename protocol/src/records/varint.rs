//! Zigzag varints (protobuf style) as used inside v2 records.
//!
//! Readers advance a `&mut &[u8]` cursor and refuse encodings longer than the type allows,
//! so a stream of 0xFF bytes cannot make them loop or overflow.

use super::error::RecordsError;

/// Longest encoding of a 32-bit varint.
pub const MAX_VARINT_LEN: usize = 5;
/// Longest encoding of a 64-bit varlong.
pub const MAX_VARLONG_LEN: usize = 10;

/// Reads an unsigned LEB128 value of at most `max_len` bytes.
fn read_unsigned(buf: &mut &[u8], max_len: usize) -> Result<u64, RecordsError> {
    let mut value: u64 = 0;
    for i in 0..max_len {
        let (&byte, rest) = buf.split_first().ok_or(RecordsError::InvalidVarint)?;
        *buf = rest;
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(RecordsError::InvalidVarint)
}

/// Reads a zigzag-encoded 32-bit varint.
pub fn read_varint(buf: &mut &[u8]) -> Result<i32, RecordsError> {
    let raw = read_unsigned(buf, MAX_VARINT_LEN)?;
    let raw = u32::try_from(raw).map_err(|_| RecordsError::InvalidVarint)?;
    Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32))
}

/// Reads a zigzag-encoded 64-bit varlong.
pub fn read_varlong(buf: &mut &[u8]) -> Result<i64, RecordsError> {
    let raw = read_unsigned(buf, MAX_VARLONG_LEN)?;
    Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64))
}

/// Appends `value` as unsigned LEB128.
#[inline]
fn put_unsigned(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Appends a zigzag-encoded 32-bit varint.
#[inline]
pub fn put_varint(out: &mut Vec<u8>, value: i32) {
    put_unsigned(out, u64::from(((value << 1) ^ (value >> 31)) as u32));
}

/// Appends a zigzag-encoded 64-bit varlong.
#[inline]
pub fn put_varlong(out: &mut Vec<u8>, value: i64) {
    put_unsigned(out, ((value << 1) ^ (value >> 63)) as u64);
}

/// Encoded size of a zigzag varint, for sizing records before writing them.
#[inline]
pub fn varint_len(value: i32) -> usize {
    unsigned_len(u64::from(((value << 1) ^ (value >> 31)) as u32))
}

/// Encoded size of a zigzag varlong.
#[inline]
pub fn varlong_len(value: i64) -> usize {
    unsigned_len(((value << 1) ^ (value >> 63)) as u64)
}

#[inline]
fn unsigned_len(value: u64) -> usize {
    let bits = 64 - (value | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_round_trip_edges() {
        for v in [0, 1, -1, 63, -64, 64, -65, i32::MAX, i32::MIN, 300, -300] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            assert_eq!(out.len(), varint_len(v), "len of {v}");
            let mut cur = &out[..];
            assert_eq!(read_varint(&mut cur).unwrap(), v);
            assert!(cur.is_empty());
        }
    }

    #[test]
    fn varlong_round_trip_edges() {
        for v in [0, 1, -1, i64::MAX, i64::MIN, 1 << 40, -(1 << 40)] {
            let mut out = Vec::new();
            put_varlong(&mut out, v);
            assert_eq!(out.len(), varlong_len(v));
            let mut cur = &out[..];
            assert_eq!(read_varlong(&mut cur).unwrap(), v);
            assert!(cur.is_empty());
        }
    }

    #[test]
    fn known_encodings() {
        // Zigzag: 0 -> 0, -1 -> 1, 1 -> 2, 150 -> 300 = ac 02.
        let mut out = Vec::new();
        put_varint(&mut out, 150);
        assert_eq!(out, [0xac, 0x02]);
        out.clear();
        put_varint(&mut out, -1);
        assert_eq!(out, [0x01]);
    }

    #[test]
    fn overlong_and_truncated_are_rejected() {
        let mut cur: &[u8] = &[0xff; 6];
        assert!(read_varint(&mut cur).is_err());
        let mut cur: &[u8] = &[0xff; 11];
        assert!(read_varlong(&mut cur).is_err());
        let mut cur: &[u8] = &[0x80];
        assert!(read_varint(&mut cur).is_err());
        let mut cur: &[u8] = &[];
        assert!(read_varlong(&mut cur).is_err());
        // Five bytes whose value overflows u32.
        let mut cur: &[u8] = &[0xff, 0xff, 0xff, 0xff, 0x7f];
        assert!(read_varint(&mut cur).is_err());
    }
}
