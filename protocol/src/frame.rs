//! Framing: every Kafka request and response is a 4-byte big-endian length followed by
//! that many bytes. The decoder checks the length against the configured maximum
//! before reserving anything, so a client claiming a 2 GiB frame costs nothing.

use bytes::{Buf, Bytes, BytesMut};

/// Why a frame was refused. Either way the connection cannot continue.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The length prefix exceeds `socket.request.max.bytes`.
    #[error("frame of {size} bytes exceeds the maximum of {max}")]
    TooLarge {
        /// The size claimed.
        size: i64,
        /// The configured maximum.
        max: usize,
    },
    /// The length prefix is negative.
    #[error("negative frame length {0}")]
    Negative(i32),
}

/// Splits a byte stream into frames. Feed it whatever the socket produced with
/// [`FrameDecoder::buffer`], then call [`FrameDecoder::next_frame`] until it returns
/// `None`.
#[derive(Debug)]
pub struct FrameDecoder {
    buf: BytesMut,
    max_frame: usize,
}

impl FrameDecoder {
    /// A decoder refusing frames larger than `max_frame` bytes.
    pub fn new(max_frame: usize) -> FrameDecoder {
        FrameDecoder {
            buf: BytesMut::with_capacity(8 * 1024),
            max_frame,
        }
    }

    /// The buffer to read socket data into.
    pub fn buffer(&mut self) -> &mut BytesMut {
        &mut self.buf
    }

    /// Bytes buffered but not yet returned as frames.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// The next whole frame, if one is buffered. After a partial frame header is seen,
    /// reserves room for the frame (bounded by `max_frame`) so reads fill it directly.
    pub fn next_frame(&mut self) -> Result<Option<Bytes>, FrameError> {
        if self.buf.len() < 4 {
            return Ok(None);
        }
        let size = i32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]);
        if size < 0 {
            return Err(FrameError::Negative(size));
        }
        let size = size as usize;
        if size > self.max_frame {
            return Err(FrameError::TooLarge {
                size: size as i64,
                max: self.max_frame,
            });
        }
        if self.buf.len() < 4 + size {
            self.buf.reserve(4 + size - self.buf.len());
            return Ok(None);
        }
        self.buf.advance(4);
        Ok(Some(self.buf.split_to(size).freeze()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_frames_and_refuses_huge_ones() {
        let mut d = FrameDecoder::new(100);
        d.buffer().extend_from_slice(&[0, 0, 0, 3, 1, 2, 3, 0, 0]);
        assert_eq!(d.next_frame().unwrap().unwrap().as_ref(), &[1, 2, 3]);
        assert_eq!(d.next_frame().unwrap(), None);
        d.buffer().extend_from_slice(&[0, 1]);
        assert_eq!(d.next_frame().unwrap().unwrap().as_ref(), &[] as &[u8]);
        d.buffer().extend_from_slice(&[0x7f, 0xff, 0xff, 0xff]);
        assert!(matches!(d.next_frame(), Err(FrameError::TooLarge { .. })));
        assert!(d.buffer().capacity() < 1 << 20);
        let mut d = FrameDecoder::new(100);
        d.buffer().extend_from_slice(&[0xff, 0xff, 0xff, 0xff]);
        assert!(matches!(d.next_frame(), Err(FrameError::Negative(-1))));
    }
}
