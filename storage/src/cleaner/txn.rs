//! Transactions in a cleaning (Kafka's `CleanedTransactionMetadata`).
//!
//! The cleaner only works below the last stable offset, so every transactional batch it
//! reads belongs to a transaction that has ended: aborted if the partition's transaction
//! indexes hold an aborted transaction of its producer covering its offsets, committed
//! otherwise. Reading the batches in offset order, [`TxnTracker`] tells for each:
//!
//! - a data batch of an aborted transaction: its records go (they were never visible to
//!   `read_committed` consumers, and `read_uncommitted` ones have no claim on them);
//! - a data batch of a committed transaction: it is compacted like any other (and its
//!   keys supersede older values in the offset map);
//! - a COMMIT or ABORT marker: it may go once no batch of its transaction was read in
//!   this cleaning (its data is gone), after its delete horizon (`delete.retention.ms`,
//!   stamped by the first cleaning that finds it removable, so a consumer that read the
//!   data has that long to read the marker). An ABORT marker that stays is recorded in
//!   the cleaned segment's transaction index; one that goes leaves the index too, so a
//!   `read_committed` consumer never looks for a marker that is no longer there.

use std::collections::{HashMap, HashSet, VecDeque};

use strata_protocol::records::{EndTxnMarker, RecordBatch};

use crate::index::AbortedTxn;

/// An aborted transaction reached in the log, and whether a batch of it was read.
#[derive(Debug)]
struct OngoingAbort {
    txn: AbortedTxn,
    observed: bool,
}

/// Per producer: inside an aborted transaction, inside a committed one, or neither.
#[derive(Debug, Default)]
pub(super) struct TxnTracker {
    /// Aborted transactions not reached yet, by first offset.
    pending: VecDeque<AbortedTxn>,
    /// (producer, first offset) of every aborted transaction added, so one listed by
    /// two segments' indexes is tracked once.
    known: HashSet<(i64, i64)>,
    aborted: HashMap<i64, OngoingAbort>,
    committed: HashSet<i64>,
    /// ABORT markers kept, for the cleaned segment's transaction index.
    retained: Vec<AbortedTxn>,
    /// Producers of the transactions in progress with a data batch left in the cleaned
    /// log (kept whole, rewritten or emptied) in this cleaning.
    kept_data: HashSet<i64>,
}

impl TxnTracker {
    /// Adds aborted transactions that may cover batches read from now on.
    pub(super) fn add_aborted(&mut self, txns: impl IntoIterator<Item = AbortedTxn>) {
        let mut added = false;
        for txn in txns {
            if self.known.insert((txn.producer_id, txn.first_offset)) {
                self.pending.push_back(txn);
                added = true;
            }
        }
        if added {
            self.pending.make_contiguous().sort_by_key(|t| (t.first_offset, t.producer_id));
        }
    }

    /// Starts every aborted transaction whose first batch is at or before `offset`.
    fn reach(&mut self, offset: i64) {
        while self.pending.front().is_some_and(|t| t.first_offset <= offset) {
            let Some(txn) = self.pending.pop_front() else { break };
            self.aborted.entry(txn.producer_id).or_insert(OngoingAbort { txn, observed: false });
        }
    }

    /// A data batch read in order: true if it belongs to an aborted transaction.
    pub(super) fn on_data(&mut self, batch: &RecordBatch) -> bool {
        self.reach(batch.last_offset());
        if !batch.is_transactional() {
            return false;
        }
        match self.aborted.get_mut(&batch.producer_id()) {
            Some(abort) => {
                abort.observed = true;
                true
            }
            None => {
                self.committed.insert(batch.producer_id());
                false
            }
        }
    }

    /// A data batch of the transaction in progress of `producer_id` stays in the cleaned
    /// log (kept, rewritten or emptied).
    pub(super) fn data_kept(&mut self, producer_id: i64) {
        self.kept_data.insert(producer_id);
    }

    /// True if this cleaning read data of `producer_id`'s transaction in progress and
    /// dropped all of it: its marker, not removable now, will be the next time.
    pub(super) fn data_all_dropped(&self, producer_id: i64) -> bool {
        let read = self.committed.contains(&producer_id)
            || self.aborted.get(&producer_id).is_some_and(|a| a.observed);
        read && !self.kept_data.contains(&producer_id)
    }

    /// A control batch read in order: true if it may be removed (no batch of its
    /// transaction was read in this cleaning). An ABORT marker that must stay is recorded
    /// for the cleaned segment's transaction index.
    pub(super) fn on_control(&mut self, batch: &RecordBatch) -> bool {
        self.reach(batch.last_offset());
        let producer_id = batch.producer_id();
        self.kept_data.remove(&producer_id);
        match EndTxnMarker::from_batch(batch) {
            Ok(Some(marker)) if marker.is_commit() => !self.committed.remove(&producer_id),
            Ok(Some(_)) => match self.aborted.remove(&producer_id) {
                Some(abort) if abort.observed => {
                    self.retained.push(abort.txn);
                    false
                }
                _ => true,
            },
            // Another control type, or an undecodable one: keep it.
            _ => false,
        }
    }

    /// The ABORT markers kept so far, in log order; the list is emptied.
    pub(super) fn take_retained(&mut self) -> Vec<AbortedTxn> {
        std::mem::take(&mut self.retained)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use strata_protocol::records::{EndTxnMarkerBatch, NewRecord, RecordBatchBuilder};

    fn data(pid: i64, base: i64, transactional: bool) -> RecordBatch {
        let mut b = RecordBatchBuilder::new(base).producer(pid, 0, 0).transactional(transactional);
        b.append(&NewRecord::new(0, Some(Bytes::from_static(b"k")), Some(Bytes::from_static(b"v")))).unwrap();
        RecordBatch::parse(&b.build().unwrap()).unwrap()
    }

    fn marker(pid: i64, offset: i64, commit: bool) -> RecordBatch {
        let marker = if commit { EndTxnMarker::commit(0) } else { EndTxnMarker::abort(0) };
        let batch = EndTxnMarkerBatch {
            producer_id: pid,
            producer_epoch: 0,
            partition_leader_epoch: 0,
            timestamp: 0,
            marker,
        };
        RecordBatch::parse(&batch.build(offset).unwrap()).unwrap()
    }

    fn abort(pid: i64, first: i64, last: i64) -> AbortedTxn {
        AbortedTxn { producer_id: pid, first_offset: first, last_offset: last, last_stable_offset: last + 1 }
    }

    #[test]
    fn aborted_data_goes_and_its_marker_stays_while_data_was_seen() {
        let mut t = TxnTracker::default();
        t.add_aborted([abort(1, 0, 2)]);
        assert!(t.on_data(&data(1, 0, true)), "aborted data");
        assert!(!t.on_data(&data(2, 1, true)), "another producer's committed data");
        assert!(!t.on_control(&marker(1, 2, false)), "the abort marker of seen data stays");
        assert!(!t.on_control(&marker(2, 3, true)), "the commit marker of seen data stays");
        assert_eq!(t.take_retained(), vec![abort(1, 0, 2)]);
        // Producer 1's next transaction is not aborted.
        assert!(!t.on_data(&data(1, 4, true)));
        assert!(!t.on_data(&data(1, 5, false)), "non-transactional data is never aborted");
    }

    #[test]
    fn markers_whose_data_is_gone_may_go() {
        let mut t = TxnTracker::default();
        // The same abort listed by two segments is tracked once.
        t.add_aborted([abort(1, 0, 5)]);
        t.add_aborted([abort(1, 0, 5)]);
        assert!(t.on_control(&marker(1, 5, false)));
        assert!(t.on_control(&marker(2, 6, true)));
        assert!(t.take_retained().is_empty());
    }

    #[test]
    fn an_abort_that_started_before_the_cleaned_range_still_applies() {
        let mut t = TxnTracker::default();
        t.add_aborted([abort(7, 10, 40), abort(8, 30, 50)]);
        assert!(t.on_data(&data(7, 20, true)));
        assert!(!t.on_data(&data(8, 25, true)), "producer 8's abort starts at 30");
        assert!(t.on_data(&data(8, 35, true)));
    }
}
