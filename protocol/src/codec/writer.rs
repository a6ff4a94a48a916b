//! The encoding side: a byte buffer that can also carry large payloads by reference.

use bytes::{BufMut, Bytes, BytesMut};

/// Payloads at least this large are linked into the output instead of copied.
const ZERO_COPY_THRESHOLD: usize = 1024;

/// Accumulates an encoded message as a list of chunks. Small fields are written into a
/// growing buffer; record sets (fetch responses) are appended as references to the
/// bytes the log returned, so serving a fetch does not copy its data in user space.
#[derive(Debug, Default)]
pub struct Writer {
    buf: BytesMut,
    /// The first chunk, kept mutable so a length prefix can be patched in at the end.
    head: Option<BytesMut>,
    chunks: Vec<Bytes>,
    len: usize,
}

impl Writer {
    /// An empty writer.
    pub fn new() -> Writer {
        Writer::default()
    }

    /// An empty writer with room for `n` bytes of small fields.
    pub fn with_capacity(n: usize) -> Writer {
        Writer { buf: BytesMut::with_capacity(n), head: None, chunks: Vec::new(), len: 0 }
    }

    /// Total bytes written so far.
    pub fn len(&self) -> usize {
        self.len + self.buf.len()
    }

    /// True if nothing has been written.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends raw bytes by copy.
    pub fn put_slice(&mut self, s: &[u8]) {
        self.buf.put_slice(s);
    }

    /// Appends `b` by reference when it is large, by copy otherwise.
    pub fn put_bytes(&mut self, b: &Bytes) {
        if b.len() >= ZERO_COPY_THRESHOLD {
            if !self.buf.is_empty() {
                let part = self.buf.split();
                self.len += part.len();
                if self.head.is_none() && self.chunks.is_empty() {
                    self.head = Some(part);
                } else {
                    self.chunks.push(part.freeze());
                }
            }
            self.len += b.len();
            self.chunks.push(b.clone());
        } else {
            self.buf.put_slice(b);
        }
    }

    /// Appends a big-endian i8.
    pub fn i8(&mut self, v: i8) {
        self.buf.put_i8(v);
    }
    /// Appends a big-endian i16.
    pub fn i16(&mut self, v: i16) {
        self.buf.put_i16(v);
    }
    /// Appends a big-endian i32.
    pub fn i32(&mut self, v: i32) {
        self.buf.put_i32(v);
    }
    /// Appends a big-endian i64.
    pub fn i64(&mut self, v: i64) {
        self.buf.put_i64(v);
    }

    /// Appends an unsigned LEB128 varint.
    pub fn uvarint(&mut self, mut v: u32) {
        while v >= 0x80 {
            self.buf.put_u8((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.put_u8(v as u8);
    }

    /// Appends an unsigned LEB128 varlong.
    pub fn uvarlong(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf.put_u8((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.put_u8(v as u8);
    }

    /// Appends a zig-zag signed varint.
    pub fn varint(&mut self, v: i32) {
        self.uvarint(((v << 1) ^ (v >> 31)) as u32);
    }

    /// Appends a zig-zag signed varlong.
    pub fn varlong(&mut self, v: i64) {
        self.uvarlong(((v << 1) ^ (v >> 63)) as u64);
    }

    /// Appends a length prefix: classic int32 (or int16 for strings) or compact
    /// uvarint+1; `None` is null.
    pub fn length(&mut self, flexible: bool, short: bool, n: Option<usize>) {
        match (flexible, n) {
            (true, None) => self.uvarint(0),
            (true, Some(n)) => self.uvarint(n as u32 + 1),
            (false, None) if short => self.i16(-1),
            (false, None) => self.i32(-1),
            (false, Some(n)) if short => self.i16(n as i16),
            (false, Some(n)) => self.i32(n as i32),
        }
    }

    /// Overwrites the first four bytes written (a length prefix reserved with
    /// `i32(0)`) with `v`. Does nothing if fewer than four bytes were written first.
    pub fn patch_prefix_i32(&mut self, v: i32) {
        let target = match self.head.as_mut() {
            Some(h) => h,
            None => &mut self.buf,
        };
        if target.len() >= 4 {
            target[..4].copy_from_slice(&v.to_be_bytes());
        }
    }

    /// Finishes the message: the chunks to write in order.
    pub fn into_chunks(mut self) -> Vec<Bytes> {
        let mut out = Vec::with_capacity(self.chunks.len() + 2);
        if let Some(h) = self.head.take() {
            out.push(h.freeze());
        }
        out.append(&mut self.chunks);
        if !self.buf.is_empty() {
            out.push(self.buf.freeze());
        }
        out
    }

    /// Finishes the message into one contiguous buffer (copies linked payloads).
    pub fn into_bytes(self) -> Bytes {
        let chunks = self.into_chunks();
        if chunks.len() == 1 {
            return chunks.into_iter().next().unwrap_or_default();
        }
        let total = chunks.iter().map(Bytes::len).sum();
        let mut out = BytesMut::with_capacity(total);
        for c in chunks {
            out.put_slice(&c);
        }
        out.freeze()
    }
}
