//! The encoding side: a byte buffer that can also carry large payloads by reference,
//! and payloads that are not in memory at all (a range of a segment file, which the
//! connection sends with `sendfile`).

use std::any::Any;
use std::fmt::Debug;
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};

/// Bytes of a frame that the codec does not hold: whoever writes the frame out produces
/// them (the broker sends a segment file range with `sendfile`, so fetched records are
/// never copied through user space). The codec only needs their length.
pub trait External: Debug + Send + Sync + 'static {
    /// Length in bytes.
    fn len(&self) -> usize;
    /// Whether there are no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Reads the bytes into memory, for a frame that must be contiguous after all.
    fn load(&self) -> std::io::Result<Bytes>;
    /// For the writer of the frame to recognise its own kind of payload.
    fn as_any(&self) -> &dyn Any;
}

/// One piece of an encoded frame, written in order.
#[derive(Debug, Clone)]
pub enum Chunk {
    /// Bytes in memory.
    Bytes(Bytes),
    /// Bytes produced by the frame's writer (see [`External`]).
    External(Arc<dyn External>),
}

impl Chunk {
    /// Length in bytes.
    pub fn len(&self) -> usize {
        match self {
            Chunk::Bytes(b) => b.len(),
            Chunk::External(e) => e.len(),
        }
    }

    /// Whether the chunk holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes, loading an external payload into memory.
    pub fn load(self) -> std::io::Result<Bytes> {
        match self {
            Chunk::Bytes(b) => Ok(b),
            Chunk::External(e) => e.load(),
        }
    }
}

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
    chunks: Vec<Chunk>,
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
            self.seal_buffer();
            self.len += b.len();
            self.chunks.push(Chunk::Bytes(b.clone()));
        } else {
            self.buf.put_slice(b);
        }
    }

    /// Appends a payload the frame's writer produces (see [`External`]).
    pub fn put_external(&mut self, e: &Arc<dyn External>) {
        self.seal_buffer();
        self.len += e.len();
        self.chunks.push(Chunk::External(e.clone()));
    }

    /// Ends the current run of small fields as a chunk of its own.
    fn seal_buffer(&mut self) {
        if !self.buf.is_empty() {
            let part = self.buf.split();
            self.len += part.len();
            if self.head.is_none() && self.chunks.is_empty() {
                self.head = Some(part);
            } else {
                self.chunks.push(Chunk::Bytes(part.freeze()));
            }
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

    /// Finishes the message: the chunks to write in order, external payloads included.
    pub fn into_frame(mut self) -> Vec<Chunk> {
        let mut out = Vec::with_capacity(self.chunks.len() + 2);
        if let Some(h) = self.head.take() {
            out.push(Chunk::Bytes(h.freeze()));
        }
        out.append(&mut self.chunks);
        if !self.buf.is_empty() {
            out.push(Chunk::Bytes(self.buf.freeze()));
        }
        out
    }

    /// Finishes a message that holds no external payload (requests) as the chunks to
    /// write in order.
    pub fn into_memory_chunks(self) -> Vec<Bytes> {
        debug_assert!(
            !self.chunks.iter().any(|c| matches!(c, Chunk::External(_))),
            "an external payload in a message encoded to memory"
        );
        self.into_frame()
            .into_iter()
            .filter_map(|c| match c {
                Chunk::Bytes(b) => Some(b),
                Chunk::External(_) => None,
            })
            .collect()
    }

    /// Finishes a message that holds no external payload (requests, and the records
    /// the coordinators write) into one buffer.
    pub fn into_memory_bytes(self) -> Bytes {
        debug_assert!(
            !self.chunks.iter().any(|c| matches!(c, Chunk::External(_))),
            "an external payload in a message encoded to memory"
        );
        let mut out = BytesMut::with_capacity(self.len());
        if let Some(h) = &self.head {
            out.put_slice(h);
        }
        for c in &self.chunks {
            if let Chunk::Bytes(b) = c {
                out.put_slice(b);
            }
        }
        out.put_slice(&self.buf);
        out.freeze()
    }
}
