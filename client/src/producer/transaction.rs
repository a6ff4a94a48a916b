//! A transactional producer's state as a pure machine, following the Java client's
//! `TransactionManager`: which calls are valid when, which partitions the coordinator
//! has been told of (AddPartitionsToTxn goes before a partition's first batch), and
//! errors sorted into fatal (close the producer), abortable (abort the transaction)
//! and retriable (the caller may retry the call).

use crate::error::{Error, Result};
use std::collections::BTreeSet;
use std::sync::Arc;

/// Where a transactional producer is ([`crate::producer::Producer::transaction_phase`]):
/// after an error it tells whether to abort or to close.
///
/// ```no_run
/// # async fn demo(p: strata_client::producer::Producer) -> strata_client::Result<()> {
/// use strata_client::producer::TxnPhase;
/// match p.transaction_phase() {
///     Some(TxnPhase::Abortable(_)) => p.abort_transaction().await?,
///     Some(TxnPhase::Fatal(e)) => return Err(e),
///     _ => {}
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub enum TxnPhase {
    /// `init_transactions` not called (or not finished).
    Uninitialized,
    /// No transaction open.
    Ready,
    /// Between `begin_transaction` and commit or abort.
    InTransaction,
    /// A commit is under way.
    Committing,
    /// An abort is under way.
    Aborting,
    /// Flushed and pre-committed (two-phase commit, KIP-939), or kept from a crashed
    /// predecessor: only `complete_transaction` (or abort) may follow.
    Prepared,
    /// The transaction failed; only `abort_transaction` is allowed.
    Abortable(Error),
    /// The producer can do nothing more but close.
    Fatal(Error),
}

/// The transaction bookkeeping.
#[derive(Debug)]
pub(crate) struct TransactionState {
    pub phase: TxnPhase,
    /// Partitions the coordinator has in this transaction.
    pub added: BTreeSet<(Arc<str>, i32)>,
    /// Partitions with data waiting for AddPartitionsToTxn.
    pub pending: BTreeSet<(Arc<str>, i32)>,
    /// An AddPartitionsToTxn is outstanding.
    pub adding: bool,
    /// Offsets were added (AddOffsetsToTxn), so EndTxn is needed even without data.
    pub offsets_added: bool,
    /// InitProducerId must bump the epoch at the next transaction (KIP-360).
    pub bump_epoch: bool,
    /// The producer id and epoch of the prepared transaction (KIP-939): its own after
    /// `prepare_transaction`, or the one kept from a crashed predecessor.
    pub prepared: Option<crate::producer::ProducerIdAndEpoch>,
    /// The prepared transaction was kept from a predecessor: EndTxn is needed.
    pub recovered: bool,
}

impl TransactionState {
    pub(crate) fn new() -> TransactionState {
        TransactionState {
            phase: TxnPhase::Uninitialized,
            added: BTreeSet::new(),
            pending: BTreeSet::new(),
            adding: false,
            offsets_added: false,
            bump_epoch: false,
            prepared: None,
            recovered: false,
        }
    }

    fn fatal_error(&self) -> Option<Error> {
        match &self.phase {
            TxnPhase::Fatal(e) => Some(e.clone()),
            _ => None,
        }
    }

    /// `init_transactions` may run (first time, or again after it failed retriably).
    pub(crate) fn may_init(&self) -> Result<()> {
        match &self.phase {
            TxnPhase::Uninitialized => Ok(()),
            TxnPhase::Fatal(e) => Err(e.clone()),
            p => Err(Error::state(format!("init_transactions called when {p:?}"))),
        }
    }

    pub(crate) fn begin(&mut self) -> Result<()> {
        match &self.phase {
            TxnPhase::Ready => {
                self.phase = TxnPhase::InTransaction;
                Ok(())
            }
            TxnPhase::Fatal(e) => Err(e.clone()),
            p => Err(Error::state(format!("begin_transaction called when {p:?}"))),
        }
    }

    /// Whether a record may be sent now.
    pub(crate) fn may_send(&self) -> Result<()> {
        match &self.phase {
            TxnPhase::InTransaction => Ok(()),
            TxnPhase::Abortable(e) => Err(abortable(e.clone())),
            TxnPhase::Fatal(e) => Err(e.clone()),
            p => Err(Error::state(format!("send outside a transaction ({p:?})"))),
        }
    }

    /// A new batch for `tp`: the coordinator must hear of it before it is sent.
    pub(crate) fn note_partition(&mut self, tp: (Arc<str>, i32)) {
        if !self.added.contains(&tp) {
            self.pending.insert(tp);
        }
    }

    /// Whether `tp`'s batches may go out.
    pub(crate) fn partition_added(&self, tp: &(Arc<str>, i32)) -> bool {
        self.added.contains(tp)
    }

    /// Whether [`TransactionState::take_pending`] would give partitions now.
    pub(crate) fn has_pending(&self) -> bool {
        !self.adding
            && !self.pending.is_empty()
            && matches!(self.phase, TxnPhase::InTransaction | TxnPhase::Committing)
    }

    /// The partitions for the next AddPartitionsToTxn, if one should be sent now.
    pub(crate) fn take_pending(&mut self) -> Option<Vec<(Arc<str>, i32)>> {
        if !self.has_pending() {
            return None;
        }
        self.adding = true;
        Some(self.pending.iter().cloned().collect())
    }

    /// AddPartitionsToTxn answered (after its own retries).
    pub(crate) fn on_added(&mut self, partitions: &[(Arc<str>, i32)], result: Result<()>) {
        self.adding = false;
        match result {
            Ok(()) => {
                for tp in partitions {
                    self.pending.remove(tp);
                    self.added.insert(tp.clone());
                }
            }
            Err(e) => self.fail(e),
        }
    }

    /// `send_offsets_to_transaction` may run.
    pub(crate) fn may_add_offsets(&self) -> Result<()> {
        self.may_send()
    }

    /// Moves to committing; the caller flushes, then sends EndTxn if [`Self::needs_end_txn`].
    pub(crate) fn begin_commit(&mut self) -> Result<()> {
        match &self.phase {
            TxnPhase::InTransaction | TxnPhase::Committing | TxnPhase::Prepared => {
                self.phase = TxnPhase::Committing;
                Ok(())
            }
            TxnPhase::Abortable(e) => Err(abortable(e.clone())),
            TxnPhase::Fatal(e) => Err(e.clone()),
            p => Err(Error::state(format!("commit_transaction called when {p:?}"))),
        }
    }

    pub(crate) fn begin_abort(&mut self) -> Result<()> {
        match &self.phase {
            TxnPhase::InTransaction
            | TxnPhase::Abortable(_)
            | TxnPhase::Aborting
            | TxnPhase::Committing
            | TxnPhase::Prepared => {
                self.phase = TxnPhase::Aborting;
                self.pending.clear();
                Ok(())
            }
            TxnPhase::Fatal(e) => Err(e.clone()),
            p => Err(Error::state(format!("abort_transaction called when {p:?}"))),
        }
    }

    /// Whether the coordinator knows of this transaction (EndTxn is needed).
    pub(crate) fn needs_end_txn(&self) -> bool {
        !self.added.is_empty() || self.offsets_added || self.recovered
    }

    /// `prepare_transaction`: the records are flushed; nothing more may be sent.
    pub(crate) fn begin_prepare(&mut self) -> Result<()> {
        match &self.phase {
            TxnPhase::InTransaction => Ok(()),
            TxnPhase::Abortable(e) => Err(abortable(e.clone())),
            TxnPhase::Fatal(e) => Err(e.clone()),
            p => Err(Error::state(format!("prepare_transaction called when {p:?}"))),
        }
    }

    /// The transaction is prepared as `ids`.
    pub(crate) fn on_prepared(&mut self, ids: crate::producer::ProducerIdAndEpoch, recovered: bool) {
        self.phase = TxnPhase::Prepared;
        self.prepared = Some(ids);
        self.recovered = recovered;
    }

    /// EndTxn (or nothing to end) finished.
    pub(crate) fn on_end(&mut self, result: Result<()>) -> Result<()> {
        match result {
            Ok(()) => {
                self.phase = TxnPhase::Ready;
                self.added.clear();
                self.pending.clear();
                self.offsets_added = false;
                self.prepared = None;
                self.recovered = false;
                Ok(())
            }
            Err(e) => {
                // A commit that failed retriably stays committing; the caller may call
                // commit (or abort) again, as in the Java client.
                if e.is_retriable() {
                    return Err(e);
                }
                self.fail(e.clone());
                Err(self.fatal_error().unwrap_or_else(|| abortable(e)))
            }
        }
    }

    /// Records a failure: fatal errors end the producer, others the transaction.
    pub(crate) fn fail(&mut self, e: Error) {
        if matches!(self.phase, TxnPhase::Fatal(_)) {
            return;
        }
        if e.is_fatal() {
            self.phase = TxnPhase::Fatal(fatal(e));
        } else if !matches!(self.phase, TxnPhase::Aborting | TxnPhase::Ready | TxnPhase::Uninitialized) {
            if e.code() == Some(strata_protocol::ErrorCode::UnknownProducerId)
                || e.code() == Some(strata_protocol::ErrorCode::OutOfOrderSequenceNumber)
            {
                self.bump_epoch = true;
            }
            if !matches!(self.phase, TxnPhase::Abortable(_)) {
                self.phase = TxnPhase::Abortable(e);
            }
        }
    }

    pub(crate) fn initialized(&mut self) {
        self.phase = TxnPhase::Ready;
        self.bump_epoch = false;
    }
}

/// `e` as an error that requires aborting the transaction.
pub(crate) fn abortable(e: Error) -> Error {
    match e {
        Error::Transaction { .. } => e,
        e => Error::Transaction { fatal: false, cause: Arc::new(e) },
    }
}

/// `e` as an error that requires closing the producer.
pub(crate) fn fatal(e: Error) -> Error {
    match e {
        Error::Transaction { fatal: true, .. } => e,
        Error::Transaction { cause, .. } => Error::Transaction { fatal: true, cause },
        e => Error::Transaction { fatal: true, cause: Arc::new(e) },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_protocol::ErrorCode;

    fn tp(p: i32) -> (Arc<str>, i32) {
        (Arc::from("t"), p)
    }

    #[test]
    fn calls_are_valid_only_in_their_phase() {
        let mut s = TransactionState::new();
        assert!(s.begin().is_err(), "before init");
        s.may_init().expect("init");
        s.initialized();
        assert!(s.may_send().is_err(), "outside a transaction");
        assert!(s.begin_commit().is_err());
        s.begin().expect("begin");
        assert!(s.begin().is_err(), "twice");
        s.may_send().expect("send");
        s.begin_commit().expect("commit");
        s.on_end(Ok(())).expect("ended");
        assert!(matches!(s.phase, TxnPhase::Ready));
    }

    #[test]
    fn partitions_are_added_once_before_their_first_batch() {
        let mut s = TransactionState::new();
        s.initialized();
        s.begin().expect("begin");
        s.note_partition(tp(0));
        s.note_partition(tp(1));
        assert!(!s.partition_added(&tp(0)));
        let batch = s.take_pending().expect("pending");
        assert_eq!(batch.len(), 2);
        s.note_partition(tp(2));
        assert!(s.take_pending().is_none(), "one request at a time");
        s.on_added(&batch, Ok(()));
        assert!(s.partition_added(&tp(0)) && s.partition_added(&tp(1)));
        s.note_partition(tp(0));
        assert_eq!(s.take_pending().expect("the rest"), vec![tp(2)]);
        assert!(s.needs_end_txn());
    }

    #[test]
    fn errors_are_fatal_or_abortable_as_in_the_java_client() {
        let mut s = TransactionState::new();
        s.initialized();
        s.begin().expect("begin");
        s.fail(Error::kafka(ErrorCode::TopicAuthorizationFailed));
        let e = s.may_send().unwrap_err();
        assert!(e.requires_abort() && !e.is_fatal(), "{e}");
        assert!(s.begin_commit().is_err());
        s.begin_abort().expect("abort allowed");
        s.on_end(Ok(())).expect("aborted");
        s.begin().expect("a new transaction");
        s.fail(Error::kafka(ErrorCode::ProducerFenced));
        let e = s.may_send().unwrap_err();
        assert!(e.is_fatal() && !e.requires_abort(), "{e}");
        assert_eq!(e.code(), Some(ErrorCode::ProducerFenced));
        assert!(s.begin_abort().is_err(), "fatal: only close");
        assert!(s.begin().is_err());
    }

    #[test]
    fn a_retriable_commit_failure_can_be_retried() {
        let mut s = TransactionState::new();
        s.initialized();
        s.begin().expect("begin");
        s.begin_commit().expect("commit");
        assert!(s.on_end(Err(Error::kafka(ErrorCode::RequestTimedOut))).is_err());
        s.begin_commit().expect("again");
        s.on_end(Ok(())).expect("done");
    }
}
