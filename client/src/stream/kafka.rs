//! Kafka at both ends of a [`super::Job`]: a checkpointed source on the consumer and a
//! two-phase-commit sink on the transactional producer.
//!
//! The source reads every partition of its topics by manual assignment (the engine, not
//! the group, decides what it reads); on barrier *n* it stores the next offset of every
//! partition in checkpoint *n*, on restore it seeks there, and once *n* is complete it
//! commits those offsets to its group, for lag monitoring only.
//!
//! The sink writes each checkpoint interval's records in one transaction; at barrier *n*
//! it flushes and prepares it (KIP-939), storing the transaction's identity in
//! checkpoint *n*; once *n* is complete it commits. After a crash, the restarted sink keeps
//! the transaction left open (`keep_prepared_txn`) and commits it if the latest complete
//! checkpoint prepared it, aborting it otherwise: a crash between the two phases neither
//! loses nor duplicates the prepared records.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use std::collections::BTreeMap;
use std::time::Duration;

use super::checkpoint::CheckpointId;
use super::runtime::{Sink, Source};
use super::StreamError;
use crate::consumer::{Consumer, ConsumerConfig, ConsumerRecord};
use crate::producer::{PreparedTxnState, Producer, ProducerConfig, ProducerRecord};
use crate::types::{OffsetAndMetadata, TopicPartition};

/// A Kafka source whose positions live in the job's checkpoints.
///
/// ```no_run
/// # async fn demo() -> Result<(), strata_client::stream::StreamError> {
/// use strata_client::consumer::ConsumerConfig;
/// use strata_client::stream::kafka::KafkaSource;
///
/// let mut config = ConsumerConfig::new("127.0.0.1:9092");
/// config.set("group.id", "wordcount")?;
/// let source = KafkaSource::new(config, &["lines"]).await?;
/// # Ok(()) }
/// ```
pub struct KafkaSource {
    consumer: Consumer,
    poll_timeout: Duration,
    /// Positions of checkpoints taken and not yet complete.
    taken: BTreeMap<CheckpointId, BTreeMap<TopicPartition, i64>>,
}

impl KafkaSource {
    /// A source reading every partition of `topics` (as they are when it starts); where
    /// a checkpoint has no position for a partition, `auto.offset.reset` decides. Its
    /// offsets are committed to `group.id` (if set) only as checkpoints complete, so
    /// `enable.auto.commit` is turned off. Set `isolation.level=read_committed` when the
    /// input is written transactionally.
    pub async fn new(mut config: ConsumerConfig, topics: &[&str]) -> Result<KafkaSource, StreamError> {
        config.enable_auto_commit = false;
        let mut consumer = Consumer::new(config).await?;
        let names: Vec<String> = topics.iter().map(|t| t.to_string()).collect();
        let cluster = consumer.client().refresh_metadata(&names).await?;
        let mut partitions = Vec::new();
        for name in &names {
            let topic = cluster
                .topic(name)
                .ok_or_else(|| StreamError::task("source", format!("topic {name} does not exist")))?;
            partitions.extend(topic.partitions.iter().map(|p| TopicPartition::new(name, p.partition)));
        }
        consumer.assign(&partitions)?;
        Ok(KafkaSource { consumer, poll_timeout: Duration::from_millis(100), taken: BTreeMap::new() })
    }

    /// The consumer, for settings the source does not cover.
    pub fn consumer(&mut self) -> &mut Consumer {
        &mut self.consumer
    }
}

/// Positions as bytes: a count, then (topic, partition, next offset) each.
fn encode_positions(positions: &BTreeMap<TopicPartition, i64>) -> Bytes {
    let mut b = BytesMut::new();
    b.put_u32(positions.len() as u32);
    for (tp, offset) in positions {
        b.put_u16(tp.topic.len() as u16);
        b.put_slice(tp.topic.as_bytes());
        b.put_i32(tp.partition);
        b.put_i64(*offset);
    }
    b.freeze()
}

fn decode_positions(mut b: Bytes) -> Result<BTreeMap<TopicPartition, i64>, StreamError> {
    let corrupt = || StreamError::Corrupt("source positions: truncated".into());
    if b.remaining() < 4 {
        return Err(corrupt());
    }
    let count = b.get_u32();
    let mut out = BTreeMap::new();
    for _ in 0..count {
        if b.remaining() < 2 {
            return Err(corrupt());
        }
        let len = usize::from(b.get_u16());
        if b.remaining() < len + 12 {
            return Err(corrupt());
        }
        let topic = String::from_utf8(b.split_to(len).to_vec())
            .map_err(|_| StreamError::Corrupt("source positions: topic not UTF-8".into()))?;
        let partition = b.get_i32();
        out.insert(TopicPartition::new(&topic, partition), b.get_i64());
    }
    Ok(out)
}

impl Source for KafkaSource {
    type Out = ConsumerRecord;

    async fn restore(&mut self, state: Option<Bytes>) -> Result<(), StreamError> {
        let Some(state) = state else { return Ok(()) };
        let assigned = self.consumer.assignment();
        let positions: BTreeMap<_, _> =
            decode_positions(state)?.into_iter().filter(|(tp, _)| assigned.contains(tp)).collect();
        tracing::info!(partitions = positions.len(), "source restored from its checkpoint");
        self.consumer.restore_positions(&positions)?;
        Ok(())
    }

    async fn poll_next(&mut self) -> Result<Vec<ConsumerRecord>, StreamError> {
        Ok(self.consumer.poll(self.poll_timeout).await?)
    }

    async fn snapshot(&mut self, id: CheckpointId) -> Result<Bytes, StreamError> {
        let positions = self.consumer.positions();
        let bytes = encode_positions(&positions);
        self.taken.insert(id, positions);
        Ok(bytes)
    }

    async fn checkpoint_complete(&mut self, id: CheckpointId) -> Result<(), StreamError> {
        let Some(positions) = self.taken.remove(&id) else { return Ok(()) };
        self.taken.retain(|&taken, _| taken > id);
        if positions.is_empty() {
            return Ok(());
        }
        let offsets = positions.into_iter().map(|(tp, o)| (tp, OffsetAndMetadata::new(o))).collect();
        // For lag monitoring only: the checkpoint is what the job resumes from.
        match self.consumer.commit_async(Some(offsets)) {
            Ok(_) => {}
            Err(e) => tracing::debug!(error = %e, "offsets not committed to the group"),
        }
        Ok(())
    }
}

/// A two-phase-commit Kafka sink: one transaction per checkpoint, committed only when the
/// checkpoint is complete. `to_record` turns what the operator emits into a record.
///
/// ```no_run
/// # async fn demo() -> Result<(), strata_client::stream::StreamError> {
/// use strata_client::producer::{ProducerConfig, ProducerRecord};
/// use strata_client::stream::kafka::KafkaSink;
///
/// let mut config = ProducerConfig::new("127.0.0.1:9092");
/// config.set("transactional.id", "wordcount-sink-0")?;
/// let sink = KafkaSink::new(config, |(word, n): (String, u64)| {
///     ProducerRecord::new("counts").key(word).value(n.to_string())
/// })
/// .await?;
/// # Ok(()) }
/// ```
pub struct KafkaSink<T, F> {
    producer: Producer,
    to_record: F,
    /// A transaction was begun and not yet prepared.
    open: bool,
    /// The transaction prepared at the last barrier, waiting for its checkpoint.
    prepared: Option<PreparedTxnState>,
    /// Fault injection: abort the process before committing this checkpoint.
    #[cfg(feature = "fault-injection")]
    crash_before_commit: Option<CheckpointId>,
    /// Fault injection: abort the process once a transaction left open is kept.
    #[cfg(feature = "fault-injection")]
    crash_after_keep: bool,
    _records: std::marker::PhantomData<fn(T)>,
}

impl<T, F> KafkaSink<T, F>
where
    T: Send + 'static,
    F: FnMut(T) -> ProducerRecord + Send + 'static,
{
    /// A sink writing with a transactional producer; `config` needs a `transactional.id`
    /// (unique to this sink) and gets `transaction.two.phase.commit.enable=true`.
    pub async fn new(mut config: ProducerConfig, to_record: F) -> Result<Self, StreamError> {
        if config.transactional_id.is_none() {
            return Err(StreamError::task("sink", "a two-phase-commit sink needs a transactional.id"));
        }
        config.two_phase_commit = true;
        let producer = Producer::new(config).await?;
        Ok(KafkaSink {
            producer,
            to_record,
            open: false,
            prepared: None,
            #[cfg(feature = "fault-injection")]
            crash_before_commit: None,
            #[cfg(feature = "fault-injection")]
            crash_after_keep: false,
            _records: std::marker::PhantomData,
        })
    }

    /// For fault-injection tests only: once checkpoint `id` is complete (written), the
    /// process aborts, as `kill -9` would, before the sink commits the transaction it
    /// prepared for it: the crash between the two phases that KIP-939 recovers. Only with
    /// the `fault-injection` feature.
    #[cfg(feature = "fault-injection")]
    pub fn crash_before_commit(mut self, id: CheckpointId) -> Self {
        self.crash_before_commit = Some(id);
        self
    }

    /// For fault-injection tests only: on restore, once the transaction the previous run
    /// left open is kept (its producer fenced), the process aborts before completing it,
    /// so the next run keeps a transaction that was kept already. Only with the
    /// `fault-injection` feature.
    #[cfg(feature = "fault-injection")]
    pub fn crash_after_keep(mut self) -> Self {
        self.crash_after_keep = true;
        self
    }

    /// The producer.
    pub fn producer(&self) -> &Producer {
        &self.producer
    }
}

impl<T, F> Sink for KafkaSink<T, F>
where
    T: Send + 'static,
    F: FnMut(T) -> ProducerRecord + Send + 'static,
{
    type In = T;

    async fn restore(&mut self, last: Option<(CheckpointId, Bytes)>) -> Result<(), StreamError> {
        let stored = match &last {
            Some((_, state)) => PreparedTxnState::from_bytes(state)?,
            None => None,
        };
        let kept = self.producer.init_transactions_keeping_prepared().await?;
        if let Some(kept) = kept {
            #[cfg(feature = "fault-injection")]
            if self.crash_after_keep {
                tracing::warn!(transaction = %kept, "fault injection: crashing after keeping the open transaction");
                std::process::abort();
            }
            let committed = self.producer.complete_transaction(stored.as_ref()).await?;
            tracing::info!(
                transaction = %kept,
                checkpoint = last.as_ref().map(|(id, _)| *id),
                committed,
                "the transaction left open by the previous run is complete"
            );
        }
        Ok(())
    }

    async fn write(&mut self, records: Vec<T>) -> Result<(), StreamError> {
        if records.is_empty() {
            return Ok(());
        }
        if !self.open {
            self.producer.begin_transaction()?;
            self.open = true;
        }
        for r in records {
            // Delivery failures surface in prepare (the flush), which fails the checkpoint.
            drop(self.producer.send((self.to_record)(r)).await?);
        }
        Ok(())
    }

    async fn prepare(&mut self, _id: CheckpointId) -> Result<Bytes, StreamError> {
        if !self.open {
            self.prepared = None;
            return Ok(Bytes::new());
        }
        let state = self.producer.prepare_transaction().await?;
        self.open = false;
        self.prepared = Some(state);
        Ok(state.to_bytes())
    }

    async fn commit(&mut self, id: CheckpointId) -> Result<(), StreamError> {
        let Some(state) = self.prepared.take() else { return Ok(()) };
        #[cfg(feature = "fault-injection")]
        if self.crash_before_commit.is_some_and(|at| id >= at) {
            tracing::warn!(checkpoint = id, transaction = %state, "fault injection: crashing before the commit");
            std::process::abort();
        }
        if !self.producer.complete_transaction(Some(&state)).await? {
            return Err(StreamError::task(
                "sink",
                format!("prepared transaction {state} of checkpoint {id} was not committed"),
            ));
        }
        Ok(())
    }

    async fn close(&mut self) -> Result<(), StreamError> {
        if self.open {
            self.producer.abort_transaction().await?;
            self.open = false;
        }
        self.producer.close().await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_round_trip_and_truncation_is_refused() {
        let mut p = BTreeMap::new();
        p.insert(TopicPartition::new("lines", 0), 17);
        p.insert(TopicPartition::new("lines", 2), 0);
        p.insert(TopicPartition::new("other", 1), i64::MAX);
        let b = encode_positions(&p);
        assert_eq!(decode_positions(b.clone()).unwrap(), p);
        for len in 0..b.len() {
            assert!(decode_positions(b.slice(..len)).is_err(), "{len}");
        }
    }
}
