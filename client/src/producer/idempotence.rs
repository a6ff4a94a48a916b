//! Idempotence as a pure state machine: the producer id and epoch, and per partition the
//! next sequence, the last acknowledged one and the batches in flight; and the verdict on
//! each Produce answer, as the Java client's `TransactionManager` decides it.
//!
//! Ordering with up to 5 requests in flight holds because a batch sent again keeps its
//! sequence and goes out only once nothing else of its partition is in flight, ahead of
//! any newer batch; the broker then sees every partition's sequences in order, and one it
//! already has is answered as a duplicate (success), never written twice.

use crate::error::{retriable, Error};
use strata_protocol::ErrorCode;

/// A producer's identity from InitProducerId; `id = -1` when it has none (a producer
/// without idempotence).
///
/// ```
/// use strata_client::producer::ProducerIdAndEpoch;
/// assert!(!ProducerIdAndEpoch::NONE.is_set());
/// assert!(ProducerIdAndEpoch { id: 7, epoch: 0 }.is_set());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerIdAndEpoch {
    /// Producer id.
    pub id: i64,
    /// Producer epoch; a higher one fences the lower.
    pub epoch: i16,
}

impl ProducerIdAndEpoch {
    /// No identity.
    pub const NONE: ProducerIdAndEpoch = ProducerIdAndEpoch { id: -1, epoch: -1 };

    /// Whether an InitProducerId gave this producer an identity.
    pub fn is_set(&self) -> bool {
        self.id >= 0
    }
}

/// One partition's sequence bookkeeping.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PartitionSequence {
    /// Sequence of the next new batch.
    pub next: i32,
    /// Last sequence the broker acknowledged (-1: none in this epoch).
    pub last_acked: i32,
    /// Batches sent and not answered.
    pub in_flight: u32,
}

impl PartitionSequence {
    pub(crate) fn new() -> PartitionSequence {
        PartitionSequence { next: 0, last_acked: -1, in_flight: 0 }
    }

    /// Gives a new batch of `count` records its base sequence.
    pub(crate) fn assign(&mut self, count: i32) -> i32 {
        let base = self.next;
        self.next = wrapping_seq(self.next, count);
        base
    }

    /// Records an acknowledged batch.
    pub(crate) fn acked(&mut self, base: i32, count: i32) {
        let last = wrapping_seq(base, count - 1);
        if self.last_acked < 0 || seq_after(last, self.last_acked) {
            self.last_acked = last;
        }
    }

    /// Whether a batch starting at `base` is the next the broker expects.
    pub(crate) fn is_next(&self, base: i32) -> bool {
        wrapping_seq(self.last_acked, 1) == base || (self.last_acked < 0 && base == 0)
    }
}

/// Sequences wrap from `i32::MAX` to 0, as Kafka's do.
pub(crate) fn wrapping_seq(seq: i32, delta: i32) -> i32 {
    ((i64::from(seq) + i64::from(delta)) % (i64::from(i32::MAX) + 1)) as i32
}

fn seq_after(a: i32, b: i32) -> bool {
    let d = i64::from(a) - i64::from(b);
    d > 0 || d < -(i64::from(i32::MAX) / 2)
}

/// What to do with a batch after the broker's answer for its partition.
#[derive(Debug, Clone)]
pub(crate) enum Verdict {
    /// Written (or already written: DUPLICATE_SEQUENCE_NUMBER).
    Success,
    /// Send it again after a backoff (it keeps its sequence).
    Retry,
    /// Send it again once the producer epoch is bumped (KIP-360) and sequences reset.
    RetryAfterEpochBump,
    /// Fail the batch's records with this error.
    Fail(Error),
}

/// What the producer is, for judging an answer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mode {
    pub idempotent: bool,
    pub transactional: bool,
}

/// The verdict on a batch that got `code` (NONE included) for its partition; `base` is
/// its sequence (-1 without idempotence).
pub(crate) fn judge(code: ErrorCode, base: i32, seq: &PartitionSequence, mode: Mode) -> Verdict {
    use ErrorCode::*;
    match code {
        None | DuplicateSequenceNumber => Verdict::Success,
        OutOfOrderSequenceNumber if mode.idempotent => {
            if !seq.is_next(base) {
                // An earlier batch failed; this one follows it again.
                Verdict::Retry
            } else if !mode.transactional {
                Verdict::RetryAfterEpochBump
            } else {
                Verdict::Fail(Error::kafka(code))
            }
        }
        UnknownProducerId if mode.idempotent && !mode.transactional => Verdict::RetryAfterEpochBump,
        code if retriable(code) => Verdict::Retry,
        code => Verdict::Fail(Error::kafka(code)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IDEMPOTENT: Mode = Mode { idempotent: true, transactional: false };
    const TXN: Mode = Mode { idempotent: true, transactional: true };
    const PLAIN: Mode = Mode { idempotent: false, transactional: false };

    #[test]
    fn sequences_advance_by_record_count_and_wrap() {
        let mut s = PartitionSequence::new();
        assert_eq!(s.assign(3), 0);
        assert_eq!(s.assign(2), 3);
        assert!(s.is_next(0));
        s.acked(0, 3);
        assert!(s.is_next(3) && !s.is_next(5));
        assert_eq!(wrapping_seq(i32::MAX, 1), 0);
        let mut w = PartitionSequence { next: i32::MAX - 1, last_acked: i32::MAX - 2, in_flight: 0 };
        assert_eq!(w.assign(4), i32::MAX - 1);
        assert_eq!(w.next, 2);
        w.acked(i32::MAX - 1, 4);
        assert_eq!(w.last_acked, 1);
        assert!(w.is_next(2));
    }

    #[test]
    fn answers_are_judged_as_the_java_client_does() {
        let mut s = PartitionSequence::new();
        s.assign(10);
        s.assign(10);
        assert!(matches!(judge(ErrorCode::None, 0, &s, IDEMPOTENT), Verdict::Success));
        assert!(matches!(judge(ErrorCode::DuplicateSequenceNumber, 0, &s, IDEMPOTENT), Verdict::Success));
        // Batch 10 is out of order because batch 0 is unresolved: plain retry.
        assert!(matches!(judge(ErrorCode::OutOfOrderSequenceNumber, 10, &s, IDEMPOTENT), Verdict::Retry));
        // The first unacknowledged batch out of order: a real gap.
        assert!(matches!(
            judge(ErrorCode::OutOfOrderSequenceNumber, 0, &s, IDEMPOTENT),
            Verdict::RetryAfterEpochBump
        ));
        assert!(matches!(judge(ErrorCode::OutOfOrderSequenceNumber, 0, &s, TXN), Verdict::Fail(_)));
        assert!(matches!(
            judge(ErrorCode::UnknownProducerId, 0, &s, IDEMPOTENT),
            Verdict::RetryAfterEpochBump
        ));
        assert!(matches!(judge(ErrorCode::UnknownProducerId, 0, &s, TXN), Verdict::Fail(_)));
        assert!(matches!(judge(ErrorCode::NotLeaderOrFollower, 0, &s, PLAIN), Verdict::Retry));
        assert!(matches!(judge(ErrorCode::MessageTooLarge, 0, &s, PLAIN), Verdict::Fail(_)));
        assert!(matches!(judge(ErrorCode::ProducerFenced, 0, &s, IDEMPOTENT), Verdict::Fail(_)));
    }
}
