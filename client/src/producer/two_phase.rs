//! Two-phase commit (KIP-939) on the transactional producer, for a producer that takes
//! part in an external coordinator's commit (a stream engine's checkpoint):
//! `prepare_transaction` flushes and returns the transaction's identity to store;
//! after a crash, `init_transactions_keeping_prepared` keeps the transaction that was
//! ongoing instead of aborting it, and `complete_transaction` commits it if it is the one
//! stored, and aborts it otherwise.
//!
//! Kafka tells transactions apart by producer id and epoch because its transaction
//! version 2 bumps the epoch at every transaction. Against brokers on version 0 (Strata,
//! and Kafka before 4.0) the producer bumps the epoch itself (KIP-360) after each
//! completed two-phase transaction, so the identity stays unique either way.

use bytes::{BufMut, Bytes, BytesMut};

use super::idempotence::ProducerIdAndEpoch;
use super::transactional::{categorize, end_txn, init_pid, transactional_id, with_txn};
use super::{Producer, TxnPhase};
use crate::error::{Error, Result};

/// The identity of a prepared transaction: what a checkpoint stores, and what decides
/// after a restart whether the transaction found open is the one to commit.
///
/// ```
/// use strata_client::producer::PreparedTxnState;
///
/// let state = PreparedTxnState { producer_id: 4000, producer_epoch: 7 };
/// assert_eq!(PreparedTxnState::from_bytes(&state.to_bytes()).unwrap(), Some(state));
/// assert_eq!(PreparedTxnState::from_bytes(&[]).unwrap(), None);
/// assert_eq!(state.to_string(), "4000:7");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PreparedTxnState {
    /// Producer id the transaction was written with.
    pub producer_id: i64,
    /// Producer epoch the transaction was written with.
    pub producer_epoch: i16,
}

impl PreparedTxnState {
    /// Ten bytes: the producer id and epoch, big-endian.
    pub fn to_bytes(&self) -> Bytes {
        let mut b = BytesMut::with_capacity(10);
        b.put_i64(self.producer_id);
        b.put_i16(self.producer_epoch);
        b.freeze()
    }

    /// Reads [`PreparedTxnState::to_bytes`]; empty bytes mean "no transaction prepared".
    pub fn from_bytes(bytes: &[u8]) -> Result<Option<PreparedTxnState>> {
        match bytes.len() {
            0 => Ok(None),
            10 => Ok(Some(PreparedTxnState {
                producer_id: i64::from_be_bytes(bytes[..8].try_into().expect("8 bytes")),
                producer_epoch: i16::from_be_bytes(bytes[8..].try_into().expect("2 bytes")),
            })),
            n => Err(Error::state(format!("a prepared transaction state is 10 bytes, not {n}"))),
        }
    }

    fn of(ids: ProducerIdAndEpoch) -> PreparedTxnState {
        PreparedTxnState { producer_id: ids.id, producer_epoch: ids.epoch }
    }
}

impl std::fmt::Display for PreparedTxnState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.producer_id, self.producer_epoch)
    }
}

impl Producer {
    /// `init_transactions` for a restarted two-phase-commit producer (Java's
    /// `initTransactions(true)`): fences the previous producer of the `transactional.id`
    /// but keeps its ongoing transaction open, returning its identity; the producer is
    /// then in the prepared phase and [`Producer::complete_transaction`] decides. None: no
    /// transaction was open, the producer is ready. Needs
    /// `transaction.two.phase.commit.enable=true`.
    ///
    /// ```no_run
    /// # async fn demo(stored: Option<strata_client::producer::PreparedTxnState>) -> strata_client::Result<()> {
    /// use strata_client::producer::{Producer, ProducerConfig};
    /// let mut config = ProducerConfig::new("127.0.0.1:9092");
    /// config.set("transactional.id", "sink-0")?;
    /// config.set("transaction.two.phase.commit.enable", "true")?;
    /// let producer = Producer::new(config).await?;
    /// if producer.init_transactions_keeping_prepared().await?.is_some() {
    ///     // Commits it if it is the transaction the checkpoint stored, aborts it otherwise.
    ///     producer.complete_transaction(stored.as_ref()).await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn init_transactions_keeping_prepared(&self) -> Result<Option<PreparedTxnState>> {
        let shared = &self.shared;
        let tid = transactional_id(shared)?;
        if !shared.config.two_phase_commit {
            return Err(Error::state(
                "keeping a prepared transaction needs transaction.two.phase.commit.enable=true",
            ));
        }
        with_txn(shared, |t| t.may_init())?;
        let result = init_pid(shared, &tid, ProducerIdAndEpoch::NONE, true).await;
        let mut st = shared.lock();
        match result {
            Ok((pid, ongoing)) => {
                st.pid = pid;
                st.acc.reset_sequences();
                let t = st.txn.as_mut().ok_or_else(|| Error::state("no transactional.id is set"))?;
                t.initialized();
                if let Some(ongoing) = ongoing {
                    tracing::info!(transactional_id = %tid, prepared = %PreparedTxnState::of(ongoing), "kept an open transaction");
                    t.on_prepared(ongoing, true);
                }
                Ok(ongoing.map(PreparedTxnState::of))
            }
            Err(e) => Err(categorize(st.txn.as_mut(), e)),
        }
    }

    /// The first phase: flushes every record of the transaction (they are written, not
    /// yet visible to `read_committed` readers) and returns the identity to store. After
    /// it, only [`Producer::complete_transaction`] (or an abort) is allowed.
    pub async fn prepare_transaction(&self) -> Result<PreparedTxnState> {
        let shared = &self.shared;
        transactional_id(shared)?;
        if !shared.config.two_phase_commit {
            return Err(Error::state("prepare_transaction needs transaction.two.phase.commit.enable=true"));
        }
        with_txn(shared, |t| t.begin_prepare())?;
        self.flush().await?;
        let mut st = shared.lock();
        let pid = st.pid;
        let t = st.txn.as_mut().ok_or_else(|| Error::state("no transactional.id is set"))?;
        t.begin_prepare()?;
        t.on_prepared(pid, false);
        Ok(PreparedTxnState::of(pid))
    }

    /// The second phase: commits the prepared transaction if it is `stored` (what the
    /// completed checkpoint recorded), aborts it otherwise; returns whether it committed.
    /// With no prepared transaction it does nothing. The epoch is then bumped, so the
    /// next transaction has an identity of its own.
    pub async fn complete_transaction(&self, stored: Option<&PreparedTxnState>) -> Result<bool> {
        let shared = &self.shared;
        let tid = transactional_id(shared)?;
        let prepared = {
            let st = shared.lock();
            let t = st.txn.as_ref().ok_or_else(|| Error::state("no transactional.id is set"))?;
            match &t.phase {
                TxnPhase::Prepared => t.prepared.map(PreparedTxnState::of),
                TxnPhase::Ready => return Ok(false),
                TxnPhase::Fatal(e) => return Err(e.clone()),
                p => return Err(Error::state(format!("complete_transaction called when {p:?}"))),
            }
        };
        let commit = prepared.is_some() && prepared.as_ref() == stored;
        let needs_end = {
            let mut st = shared.lock();
            let t = st.txn.as_mut().ok_or_else(|| Error::state("no transactional.id is set"))?;
            if commit {
                t.begin_commit()?;
            } else {
                t.begin_abort()?;
            }
            t.needs_end_txn()
        };
        tracing::debug!(transactional_id = %tid, ?prepared, ?stored, commit, "completing a prepared transaction");
        let result = if needs_end { end_txn(shared, &tid, commit).await } else { Ok(()) };
        with_txn(shared, |t| t.on_end(result))?;
        let current = shared.lock().pid;
        let result = init_pid(shared, &tid, current, false).await;
        let mut st = shared.lock();
        match result {
            Ok((pid, _)) => {
                st.pid = pid;
                st.acc.reset_sequences();
                if let Some(t) = st.txn.as_mut() {
                    t.initialized();
                }
                Ok(commit)
            }
            Err(e) => Err(categorize(st.txn.as_mut(), e)),
        }
    }
}
