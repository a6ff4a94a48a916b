//! Framing: every Kafka request and response is a 4-byte big-endian length followed by
//! that many bytes. The decoder checks the length against the configured maximum
//! before reserving anything, so a client claiming a 2 GiB frame costs nothing.

use bytes::{Buf, Bytes, BytesMut};

/// The most [`FrameDecoder::next_frame`] reserves ahead of the bytes received for a
/// frame larger than [`WHOLE_RESERVE_MAX`], before any of its body has arrived.
pub const RESERVE_STEP: usize = 64 * 1024;

/// Frames up to this size get room for all of their bytes as soon as their length is
/// read, so a produce request is received without growing (and copying) its buffer on
/// the way; a client that announces such a frame and sends nothing costs this much at
/// most. Kafka reserves every frame whole, up to `socket.request.max.bytes`.
pub const WHOLE_RESERVE_MAX: usize = 1 << 20;

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

/// Frames at least this large (produce requests carrying real batches) are received
/// into a buffer of their own.
const LARGE_FRAME: usize = 64 * 1024;

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
        FrameDecoder { buf: BytesMut::with_capacity(8 * 1024), max_frame }
    }

    /// The buffer to read socket data into.
    pub fn buffer(&mut self) -> &mut BytesMut {
        &mut self.buf
    }

    /// Bytes buffered but not yet returned as frames.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// The next whole frame, if one is buffered. While a frame is incomplete, reserves
    /// room for the rest of it up to [`WHOLE_RESERVE_MAX`]; beyond, for at most as many
    /// more bytes as arrived (at least [`RESERVE_STEP`]): memory grows with the bytes
    /// the client actually sends, not with the length it claims, so a client that
    /// announces 100 MiB and sends nothing costs 64 KiB, not 100 MiB.
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
            return Err(FrameError::TooLarge { size: size as i64, max: self.max_frame });
        }
        if self.buf.len() < 4 + size {
            let missing = 4 + size - self.buf.len();
            let ahead = if size <= WHOLE_RESERVE_MAX { missing } else { RESERVE_STEP.max(self.buf.len()) };
            self.buf.reserve(missing.min(ahead));
            return Ok(None);
        }
        if size >= LARGE_FRAME && self.buf.len() == 4 + size {
            // The buffer holds exactly this frame (reads stopped at its end, see
            // `read_limit`): hand over the whole allocation, so the frame's record sets
            // are uniquely owned and the log can patch their headers without a copy.
            let mut whole = std::mem::replace(&mut self.buf, BytesMut::with_capacity(8 * 1024));
            whole.advance(4);
            return Ok(Some(whole.freeze()));
        }
        self.buf.advance(4);
        Ok(Some(self.buf.split_to(size).freeze()))
    }

    /// The length of the frame at the head of the buffer, once its 4-byte prefix is
    /// buffered (whether or not the rest has arrived); `None` for a negative length,
    /// which [`FrameDecoder::next_frame`] refuses.
    pub fn next_frame_size(&self) -> Option<usize> {
        if self.buf.len() < 4 {
            return None;
        }
        usize::try_from(i32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]])).ok()
    }

    /// How many bytes the next socket read may take: up to the end of a large frame
    /// being received (so it ends up alone in its buffer), else no limit.
    pub fn read_limit(&self) -> usize {
        if self.buf.len() >= 4 {
            let size = i32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]);
            if let Ok(size) = usize::try_from(size) {
                if size >= LARGE_FRAME && self.buf.len() < 4 + size {
                    return 4 + size - self.buf.len();
                }
            }
        }
        usize::MAX
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_frame_read_up_to_its_end_owns_its_buffer() {
        let mut d = FrameDecoder::new(1 << 20);
        let size = LARGE_FRAME + 10;
        let mut wire = (size as i32).to_be_bytes().to_vec();
        wire.extend(std::iter::repeat_n(7u8, size));
        wire.extend_from_slice(&[0, 0, 0, 1, 9]);
        let mut fed = 0;
        let frame = loop {
            let n = d.read_limit().min(4096).min(wire.len() - fed);
            d.buffer().extend_from_slice(&wire[fed..fed + n]);
            fed += n;
            if let Some(f) = d.next_frame().unwrap() {
                break f;
            }
        };
        assert_eq!(frame.len(), size);
        assert!(frame.slice(100..200).try_into_mut().is_err(), "the frame still holds it");
        let records = frame.slice(100..200);
        drop(frame);
        assert!(records.try_into_mut().is_ok(), "a large frame must not share its buffer");
        d.buffer().extend_from_slice(&wire[fed..]);
        assert_eq!(d.next_frame().unwrap().unwrap().as_ref(), &[9]);
    }

    #[test]
    fn splits_frames_and_refuses_huge_ones() {
        let mut d = FrameDecoder::new(100);
        d.buffer().extend_from_slice(&[0, 0, 0, 3, 1, 2, 3, 0, 0]);
        assert_eq!(d.next_frame_size(), Some(3));
        assert_eq!(d.next_frame().unwrap().unwrap().as_ref(), &[1, 2, 3]);
        assert_eq!(d.next_frame_size(), None, "half a length prefix");
        assert_eq!(d.next_frame().unwrap(), None);
        d.buffer().extend_from_slice(&[0, 0]);
        assert_eq!(d.next_frame_size(), Some(0));
        assert_eq!(d.next_frame().unwrap().unwrap().as_ref(), &[] as &[u8]);
        d.buffer().extend_from_slice(&[0x7f, 0xff, 0xff, 0xff]);
        assert!(matches!(d.next_frame(), Err(FrameError::TooLarge { .. })));
        assert!(d.buffer().capacity() < 1 << 20);
        let mut d = FrameDecoder::new(100);
        d.buffer().extend_from_slice(&[0xff, 0xff, 0xff, 0xff]);
        assert!(matches!(d.next_frame(), Err(FrameError::Negative(-1))));
    }

    #[test]
    fn a_claimed_length_reserves_only_a_step() {
        let mut d = FrameDecoder::new(100 << 20);
        d.buffer().extend_from_slice(&(90i32 << 20).to_be_bytes());
        assert_eq!(d.next_frame().unwrap(), None);
        assert!(d.buffer().capacity() <= 2 * RESERVE_STEP);
        // Still delivers the frame once it has all arrived.
        let mut d = FrameDecoder::new(1 << 20);
        let body = vec![7u8; 200_000];
        d.buffer().extend_from_slice(&(body.len() as i32).to_be_bytes());
        for chunk in body.chunks(30_000) {
            assert_eq!(d.next_frame().unwrap(), None);
            d.buffer().extend_from_slice(chunk);
        }
        assert_eq!(d.next_frame().unwrap().unwrap().len(), body.len());
    }
}
