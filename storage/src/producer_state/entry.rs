//! What the log remembers about one producer id: its epoch, its last few batches (for
//! duplicate detection and sequence checks) and its open transaction.

use std::collections::VecDeque;

use strata_protocol::records::{NO_PRODUCER_EPOCH, NO_SEQUENCE};

/// How many recent batches are kept per producer. A producer has at most 5 requests in
/// flight per connection (`max.in.flight.requests.per.connection` <= 5 with idempotence),
/// so a retry is always a duplicate of one of these.
pub(crate) const NUM_BATCHES_TO_RETAIN: usize = 5;

/// One appended batch of a producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BatchMetadata {
    pub(crate) first_seq: i32,
    pub(crate) last_seq: i32,
    pub(crate) first_offset: i64,
    pub(crate) last_offset: i64,
    /// The batch's max timestamp.
    pub(crate) timestamp: i64,
}

impl BatchMetadata {
    /// Rebuilds a batch from Kafka's snapshot fields (last sequence, last offset, offset
    /// delta): sequences advance by one per record, wrapping from i32::MAX to 0.
    pub(crate) fn from_last(last_seq: i32, last_offset: i64, offset_delta: i32, timestamp: i64) -> Self {
        let first = i64::from(last_seq) - i64::from(offset_delta);
        let first_seq = if last_seq < 0 {
            NO_SEQUENCE
        } else if first < 0 {
            (first + i64::from(i32::MAX) + 1) as i32
        } else {
            first as i32
        };
        BatchMetadata {
            first_seq,
            last_seq,
            first_offset: last_offset - i64::from(offset_delta),
            last_offset,
            timestamp,
        }
    }

    /// `last_offset - first_offset`, as Kafka's snapshot stores it.
    pub(crate) fn offset_delta(&self) -> i32 {
        i32::try_from(self.last_offset - self.first_offset).unwrap_or(i32::MAX)
    }
}

/// State of one producer id in one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProducerStateEntry {
    pub(crate) producer_id: i64,
    pub(crate) producer_epoch: i16,
    /// Oldest first; at most [`NUM_BATCHES_TO_RETAIN`], all of `producer_epoch`.
    pub(crate) batches: VecDeque<BatchMetadata>,
    /// Epoch of the transaction coordinator that wrote the last marker, -1 if none.
    pub(crate) coordinator_epoch: i32,
    /// Max timestamp of the last batch or marker (what expiration measures from).
    pub(crate) last_timestamp: i64,
    /// First offset of the open transaction.
    pub(crate) current_txn_first_offset: Option<i64>,
}

impl ProducerStateEntry {
    /// A producer not seen before.
    pub(crate) fn empty(producer_id: i64) -> Self {
        ProducerStateEntry {
            producer_id,
            producer_epoch: NO_PRODUCER_EPOCH,
            batches: VecDeque::new(),
            coordinator_epoch: -1,
            last_timestamp: -1,
            current_txn_first_offset: None,
        }
    }

    /// Last sequence appended in the current epoch, -1 if none.
    pub(crate) fn last_seq(&self) -> i32 {
        self.batches.back().map_or(NO_SEQUENCE, |b| b.last_seq)
    }

    /// A retained batch of the current epoch with exactly this sequence range.
    pub(crate) fn find_duplicate(&self, epoch: i16, first_seq: i32, last_seq: i32) -> Option<BatchMetadata> {
        if epoch != self.producer_epoch {
            return None;
        }
        self.batches.iter().find(|b| b.first_seq == first_seq && b.last_seq == last_seq).copied()
    }

    /// Moves to `epoch`; a new epoch forgets the batches of the old one.
    pub(crate) fn maybe_update_epoch(&mut self, epoch: i16) {
        if self.producer_epoch != epoch {
            self.batches.clear();
            self.producer_epoch = epoch;
        }
    }

    /// Records an appended batch, dropping the oldest beyond [`NUM_BATCHES_TO_RETAIN`].
    pub(crate) fn add_batch(&mut self, epoch: i16, batch: BatchMetadata) {
        self.maybe_update_epoch(epoch);
        if self.batches.len() == NUM_BATCHES_TO_RETAIN {
            self.batches.pop_front();
        }
        self.batches.push_back(batch);
        self.last_timestamp = batch.timestamp;
    }

    /// Whether idle long enough to forget (never while a transaction is open).
    pub(crate) fn is_expired(&self, now_ms: i64, expiration_ms: i64) -> bool {
        self.current_txn_first_offset.is_none() && now_ms.saturating_sub(self.last_timestamp) >= expiration_ms
    }
}

/// Whether `next` directly follows `last`, with the wrap from i32::MAX to 0.
pub(crate) fn in_sequence(last: i32, next: i32) -> bool {
    i64::from(next) == i64::from(last) + 1 || (next == 0 && last == i32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(first_seq: i32, last_seq: i32, first_offset: i64) -> BatchMetadata {
        let last_offset = first_offset + (i64::from(last_seq) - i64::from(first_seq)).rem_euclid(1 << 31);
        BatchMetadata { first_seq, last_seq, first_offset, last_offset, timestamp: 0 }
    }

    #[test]
    fn keeps_five_batches_and_forgets_them_on_epoch_bump() {
        let mut e = ProducerStateEntry::empty(1);
        for i in 0..7 {
            e.add_batch(0, batch(i * 2, i * 2 + 1, i64::from(i) * 2));
        }
        assert_eq!(e.batches.len(), 5);
        assert_eq!(e.batches.front().unwrap().first_seq, 4);
        assert!(e.find_duplicate(0, 12, 13).is_some());
        assert!(e.find_duplicate(0, 2, 3).is_none(), "sixth-oldest forgotten");
        assert!(e.find_duplicate(1, 12, 13).is_none(), "other epoch");
        e.maybe_update_epoch(1);
        assert!(e.batches.is_empty());
        assert_eq!(e.last_seq(), NO_SEQUENCE);
    }

    #[test]
    fn sequence_wraps_at_i32_max() {
        assert!(in_sequence(i32::MAX, 0));
        assert!(in_sequence(-1, 0));
        assert!(in_sequence(5, 6));
        assert!(!in_sequence(5, 7));
        assert!(!in_sequence(i32::MAX - 1, 0));
        let b = BatchMetadata::from_last(2, 100, 5, 9);
        assert_eq!((b.first_seq, b.first_offset), (i32::MAX - 2, 95));
        assert_eq!(b.offset_delta(), 5);
        assert_eq!(BatchMetadata::from_last(-1, -1, 0, 0).first_seq, NO_SEQUENCE);
    }
}
