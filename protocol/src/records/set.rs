//! The records of one partition in a fetch response, as the broker hands them to the
//! codec: bytes in memory, or ranges of a segment file that the connection sends with
//! `sendfile` (Kafka's `FileRecords`), so fetched data is never copied through user
//! space. A decoded response always holds one in-memory part.

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};

use crate::codec::External;

/// Whole record batches, possibly in several parts (a fetch can read on past batches
/// that compaction emptied, into the next segment).
#[derive(Debug, Clone, Default)]
pub struct RecordSet {
    parts: Vec<RecordPart>,
    len: usize,
}

/// One contiguous part of a [`RecordSet`].
#[derive(Debug, Clone)]
pub enum RecordPart {
    /// Bytes in memory.
    Memory(Bytes),
    /// Bytes the frame's writer produces (a segment file range).
    External(Arc<dyn External>),
}

impl RecordSet {
    /// No records.
    pub fn new() -> RecordSet {
        RecordSet::default()
    }

    /// Appends batches held in memory.
    pub fn push_memory(&mut self, b: Bytes) {
        if !b.is_empty() {
            self.len += b.len();
            self.parts.push(RecordPart::Memory(b));
        }
    }

    /// Appends batches the frame's writer produces.
    pub fn push_external(&mut self, e: Arc<dyn External>) {
        if !e.is_empty() {
            self.len += e.len();
            self.parts.push(RecordPart::External(e));
        }
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the set holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The parts in order.
    pub fn parts(&self) -> &[RecordPart] {
        &self.parts
    }

    /// The bytes, if every part is in memory (always so in a decoded response): the
    /// single part itself, or the parts joined.
    pub fn memory(&self) -> Option<Bytes> {
        match self.parts.as_slice() {
            [] => Some(Bytes::new()),
            [RecordPart::Memory(b)] => Some(b.clone()),
            parts => {
                let mut out = BytesMut::with_capacity(self.len);
                for p in parts {
                    match p {
                        RecordPart::Memory(b) => out.put_slice(b),
                        RecordPart::External(_) => return None,
                    }
                }
                Some(out.freeze())
            }
        }
    }

    /// The bytes, loading external parts into memory.
    pub fn load(&self) -> std::io::Result<Bytes> {
        if let Some(b) = self.memory() {
            return Ok(b);
        }
        let mut out = BytesMut::with_capacity(self.len);
        for p in &self.parts {
            match p {
                RecordPart::Memory(b) => out.put_slice(b),
                RecordPart::External(e) => out.put_slice(&e.load()?),
            }
        }
        Ok(out.freeze())
    }
}

impl From<Bytes> for RecordSet {
    fn from(b: Bytes) -> RecordSet {
        let mut set = RecordSet::new();
        set.push_memory(b);
        set
    }
}

/// Equal when they hold the same bytes; sets with external parts are equal only to
/// sets made of the very same parts (the codec compares with the default, the empty
/// set, to decide whether a field is worth writing).
impl PartialEq for RecordSet {
    fn eq(&self, other: &RecordSet) -> bool {
        if self.len != other.len {
            return false;
        }
        match (self.memory(), other.memory()) {
            (Some(a), Some(b)) => a == b,
            _ => {
                self.parts.len() == other.parts.len()
                    && self.parts.iter().zip(&other.parts).all(|(a, b)| match (a, b) {
                        (RecordPart::Memory(a), RecordPart::Memory(b)) => a == b,
                        (RecordPart::External(a), RecordPart::External(b)) => Arc::ptr_eq(a, b),
                        _ => false,
                    })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{Ctx, Reader, Wire, Writer};

    #[derive(Debug)]
    struct Fake(Bytes);
    impl External for Fake {
        fn len(&self) -> usize {
            self.0.len()
        }
        fn load(&self) -> std::io::Result<Bytes> {
            Ok(self.0.clone())
        }
        fn as_any(&self) -> &dyn std::any::Any {
            self
        }
    }

    #[test]
    fn an_external_part_is_length_prefixed_and_left_for_the_frame_writer() {
        let ext: Arc<dyn External> = Arc::new(Fake(Bytes::from(vec![7u8; 5000])));
        let mut set = RecordSet::from(Bytes::from_static(b"abc"));
        set.push_external(ext.clone());
        set.push_memory(Bytes::new());
        assert_eq!(set.len(), 5003);
        for flexible in [false, true] {
            let ctx = Ctx { version: 0, flexible };
            let mut w = Writer::new();
            Some(set.clone()).write(&mut w, ctx);
            let frame = w.into_frame();
            assert!(frame
                .iter()
                .any(|c| matches!(c, crate::codec::Chunk::External(e) if Arc::ptr_eq(e, &ext))));
            let mut bytes = Vec::new();
            for c in frame {
                bytes.extend_from_slice(&c.load().unwrap());
            }
            let decoded =
                <Option<RecordSet>>::read(&mut Reader::new(Bytes::from(bytes)), ctx).unwrap().unwrap();
            assert_eq!(decoded.parts().len(), 1);
            assert_eq!(decoded.memory().unwrap(), set.load().unwrap());
            assert_eq!(decoded, RecordSet::from(set.load().unwrap()));
        }
    }
}
