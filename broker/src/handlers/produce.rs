//! Produce (0): append producers' record batches to partition logs.
//!
//! For each partition: check this broker leads it, append as leader (validation,
//! offsets, indexes happen in the log), and answer with the base offset, exactly as
//! Kafka does for each `acks`:
//! - `acks=0`: no answer (a failed partition closes the connection);
//! - `acks=1`: after the leader's append;
//! - `acks=all`: NOT_ENOUGH_REPLICAS before the append when the ISR is below
//!   `min.insync.replicas`; after it, the answer waits (a delayed produce) until the high
//!   watermark passes the batch, then NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank
//!   below the minimum meanwhile, NOT_LEADER_OR_FOLLOWER if leadership moved, or
//!   REQUEST_TIMED_OUT at the request's `timeout_ms`. With an ISR of one the high
//!   watermark reaches the batch at once and nothing waits.
//!
//! From v10 a partition refused with NOT_LEADER_OR_FOLLOWER names the current leader and
//! the answer carries its endpoint on the request's listener (KIP-951,
//! [`super::leader_discovery`]), so the producer moves there without a Metadata round.

use super::leader_discovery::{current_leader, names_leader, node_endpoints};
use crate::clock::now_ms;
use crate::coordinator::txn::service::TxnService;
use crate::coordinator::txn::{produce_verification_refusal, verification_error_for_client, TopicPartition};
use crate::errors::append_error_code;
use crate::metadata::MetadataImage;
use crate::node::Node;
use std::collections::HashMap;
use std::sync::Arc;
use strata_protocol::messages::produce::{
    BatchIndexAndErrorMessage, LeaderIdAndEpoch, NodeEndpoint, PartitionProduceResponse, ProduceRequest,
    ProduceResponse, TopicProduceResponse,
};
use strata_protocol::records::{Compression, RecordBatch, RecordBatches};
use strata_protocol::ErrorCode;

/// What to send back.
pub enum Reply {
    /// The response.
    Respond(ProduceResponse),
    /// `acks=all`: the batches are appended; the response once they are replicated
    /// (the connection goes on reading, so several acks=all requests of one connection
    /// wait together; responses still leave in request order).
    Later(std::pin::Pin<Box<dyn std::future::Future<Output = ProduceResponse> + Send>>),
    /// acks=0 and every partition succeeded: send nothing.
    Nothing,
    /// acks=0 and a partition failed: Kafka closes the connection so the producer
    /// notices (it cannot be told otherwise).
    Close,
}

/// Handles a Produce request that came in on `listener`.
pub async fn handle(
    node: &Arc<Node>,
    transactions: &TxnService,
    version: i16,
    request: ProduceRequest,
    listener: &Arc<str>,
) -> Reply {
    let acks = request.acks;
    let refuse = if version < 3 {
        Some((ErrorCode::UnsupportedVersion, "Produce v0-2 are not supported; use v3 or later"))
    } else if !matches!(acks, -1..=1) {
        Some((ErrorCode::InvalidRequiredAcks, "acks must be -1, 0 or 1"))
    } else {
        None
    };
    let refused = match (&refuse, request.transactional_id.as_deref()) {
        (None, Some(txn_id)) if !txn_id.is_empty() => {
            verify_transactional(transactions, version, txn_id, &request).await
        }
        _ => HashMap::new(),
    };
    let now = now_ms();
    let deadline =
        tokio::time::Instant::now() + std::time::Duration::from_millis(request.timeout_ms.max(0) as u64);
    let mut any_error = false;
    let mut delayed: Vec<(usize, usize, Delayed)> = Vec::new();
    let mut responses = Vec::with_capacity(request.topic_data.len());
    let image = node.metadata.current();
    for topic in request.topic_data {
        let mut partition_responses = Vec::with_capacity(topic.partition_data.len());
        let meta = image.topic(&topic.name).cloned();
        for pd in topic.partition_data {
            let mut r = PartitionProduceResponse { index: pd.index, base_offset: -1, ..Default::default() };
            let outcome = match (refuse, refused.get(&(topic.name.clone(), pd.index))) {
                (Some((code, message)), _) => Err((code, Some(message.to_string()))),
                (None, Some((code, message))) => Err((*code, Some(message.clone()))),
                (None, None) => append(
                    node,
                    version,
                    meta.as_deref(),
                    &topic.name,
                    pd.index,
                    pd.records,
                    acks,
                    now,
                    &mut r.record_errors,
                ),
            };
            match outcome {
                Ok(appended) => {
                    r.base_offset = appended.base_offset;
                    r.log_append_time_ms = appended.log_append_time;
                    r.log_start_offset = appended.log_start_offset;
                    if let Some(wait) = appended.wait {
                        delayed.push((responses.len(), partition_responses.len(), wait));
                    }
                }
                Err((code, message)) => {
                    any_error = true;
                    r.error_code = code.code();
                    r.error_message = message;
                }
            }
            partition_responses.push(r);
        }
        responses.push(TopicProduceResponse { name: topic.name, partition_responses });
    }
    if acks == 0 {
        return if any_error { Reply::Close } else { Reply::Nothing };
    }
    if delayed.is_empty() {
        return Reply::Respond(answer(&image, version, listener, responses));
    }
    let (node, listener) = (node.clone(), listener.clone());
    Reply::Later(Box::pin(async move {
        for (t, p, wait) in delayed {
            if let Err((code, message)) = wait.complete(deadline).await {
                let r = &mut responses[t].partition_responses[p];
                r.error_code = code.code();
                r.error_message = Some(message);
                if code != ErrorCode::NotEnoughReplicasAfterAppend {
                    r.base_offset = -1;
                }
            }
        }
        answer(&node.metadata.current(), version, &listener, responses)
    }))
}

/// The response: from v10, each partition refused for leadership names the leader the
/// metadata knows, and the answer carries the endpoints of those leaders (KIP-951).
fn answer(
    image: &MetadataImage,
    version: i16,
    listener: &str,
    mut responses: Vec<TopicProduceResponse>,
) -> ProduceResponse {
    if version < 10 {
        return ProduceResponse { responses, ..Default::default() };
    }
    let mut leaders = Vec::new();
    for t in &mut responses {
        for r in t.partition_responses.iter_mut().filter(|r| names_leader(r.error_code)) {
            let (leader_id, leader_epoch) = current_leader(image, &t.name, r.index);
            r.current_leader = LeaderIdAndEpoch { leader_id, leader_epoch };
            leaders.push(leader_id);
        }
    }
    let node_endpoints = node_endpoints(image, listener, leaders, |node_id, host, port, rack| NodeEndpoint {
        node_id,
        host,
        port,
        rack,
    });
    ProduceResponse { responses, node_endpoints, ..Default::default() }
}

/// The codec of the first batch of a Produce request's records, read from its header
/// (the check Kafka's `ProduceRequest.validateRecords` makes of the first batch).
fn first_batch_codec(records: &bytes::Bytes) -> Option<Compression> {
    RecordBatch::parse(records).ok()?.compression().ok()
}

/// KIP-467 as Kafka's `LogValidator` does it for compacted topics: every record without a
/// key is refused, each named by its index in the request's records, and the partition's
/// whole append is refused with INVALID_RECORD (the other partitions are unaffected).
/// Batches that do not parse are left to the log's own validation.
fn records_without_key(
    records: &bytes::Bytes,
    topic: &str,
    partition: i32,
    max_message_bytes: i32,
) -> Vec<BatchIndexAndErrorMessage> {
    let mut errors = Vec::new();
    let mut index = 0i32;
    // Decompressed bytes are bounded as the log bounds them (a zip bomb fails here too).
    let cap = (max_message_bytes.max(1) as usize).saturating_mul(4);
    for batch in RecordBatches::new(records.clone()) {
        let Ok(batch) = batch else { return errors };
        if batch.is_control() {
            continue;
        }
        let Ok(batch_records) = batch.records(cap) else { return errors };
        for record in batch_records {
            let Ok(record) = record else { return errors };
            if record.key.is_none() {
                errors.push(BatchIndexAndErrorMessage {
                    batch_index: index,
                    batch_index_error_message: Some(format!(
                        "Compacted topic cannot accept message without key in topic partition {topic}-{partition}."
                    )),
                });
            }
            index += 1;
        }
    }
    errors
}

/// The partition's error message for refused records, as Kafka words it.
fn record_errors_summary(errors: &[BatchIndexAndErrorMessage]) -> String {
    let first: Vec<String> = errors
        .iter()
        .take(3)
        .map(|e| {
            format!(
                "{} (batch index {})",
                e.batch_index_error_message.as_deref().unwrap_or(""),
                e.batch_index
            )
        })
        .collect();
    format!(
        "One or more records have been rejected due to {} record errors in total, and only showing the first three errors at most: [{}]",
        errors.len(),
        first.join(", ")
    )
}

/// What a successful append answers, and for `acks=all` what it still waits for.
struct Appended {
    base_offset: i64,
    log_append_time: i64,
    log_start_offset: i64,
    /// Records appended (offsets are dense).
    records: u64,
    wait: Option<Delayed>,
}

/// An `acks=all` append whose high watermark has not passed it yet.
struct Delayed {
    partition: Arc<crate::replica::Partition>,
    last_offset: i64,
    leader_epoch: i32,
    min_isr: usize,
}

impl Delayed {
    /// Waits until the batch is replicated to the ISR, or why not.
    async fn complete(self, deadline: tokio::time::Instant) -> Result<(), (ErrorCode, String)> {
        use crate::replica::WaitError;
        match self.partition.wait_for_high_watermark(self.last_offset, self.leader_epoch, deadline).await {
            Ok(()) => check_isr_after(&self.partition, self.min_isr),
            Err(e) => {
                let why = match e {
                    WaitError::NotLeader => "leadership moved before the batch was replicated",
                    WaitError::Timeout => "the batch was not replicated to the ISR within the timeout",
                };
                Err((crate::errors::wait_error_code(e), why.into()))
            }
        }
    }
}

/// NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below the minimum after the append.
fn check_isr_after(p: &crate::replica::Partition, min_isr: usize) -> Result<(), (ErrorCode, String)> {
    let isr = p.isr_size();
    if isr < min_isr {
        return Err((
            ErrorCode::NotEnoughReplicasAfterAppend,
            format!("in-sync replicas {isr} below min.insync.replicas {min_isr} after the append"),
        ));
    }
    Ok(())
}

/// KIP-890 part 1: a transactional produce may only write to partitions the transaction
/// coordinator has added to the producer's ongoing transaction, so a late request of an
/// earlier transaction cannot land in a later one. Returns the partitions to refuse.
async fn verify_transactional(
    transactions: &TxnService,
    version: i16,
    transactional_id: &str,
    request: &ProduceRequest,
) -> HashMap<(String, i32), (ErrorCode, String)> {
    let mut refused = HashMap::new();
    let ours = |code: ErrorCode| (code, format!("{} for this transaction", code.name()));
    let mut producer: Option<(i64, i16)> = None;
    let mut partitions = Vec::new();
    for topic in &request.topic_data {
        for pd in &topic.partition_data {
            let header = pd.records.as_ref().and_then(|r| RecordBatch::parse(r).ok());
            match header {
                Some(batch) if batch.is_transactional() && batch.producer_id() >= 0 => {
                    let this = (batch.producer_id(), batch.producer_epoch());
                    if producer.is_some_and(|p| p != this) {
                        refused.insert((topic.name.clone(), pd.index), ours(ErrorCode::InvalidRequest));
                        continue;
                    }
                    producer = Some(this);
                    partitions.push(TopicPartition::new(topic.name.clone(), pd.index));
                }
                _ => {
                    // A transactional request must carry transactional batches.
                    refused.insert((topic.name.clone(), pd.index), ours(ErrorCode::InvalidRecord));
                }
            }
        }
    }
    let Some((producer_id, producer_epoch)) = producer else {
        return refused;
    };
    let results =
        transactions.verify(transactional_id.to_string(), producer_id, producer_epoch, partitions).await;
    for (tp, code) in results {
        if code != ErrorCode::None {
            let code = verification_error_for_client(code, version > 10);
            refused.insert((tp.topic, tp.partition), produce_verification_refusal(code));
        }
    }
    refused
}

#[allow(clippy::too_many_arguments)]
fn append(
    node: &Node,
    version: i16,
    meta: Option<&crate::metadata::TopicImage>,
    topic: &str,
    index: i32,
    records: Option<bytes::Bytes>,
    acks: i16,
    now: i64,
    record_errors: &mut Vec<BatchIndexAndErrorMessage>,
) -> Result<Appended, (ErrorCode, Option<String>)> {
    let Some(meta) = meta else {
        return Err((ErrorCode::UnknownTopicOrPartition, None));
    };
    let partition = node.leader_partition(topic, index).map_err(|code| (code, None))?;
    let bytes = records.as_ref().map_or(0, bytes::Bytes::len);
    let result = append_to(node, version, meta, &partition, topic, index, records, acks, now, record_errors);
    match &result {
        Ok(a) => partition.metrics().produced(bytes, a.records),
        Err(_) => partition.metrics().produce_failed(),
    }
    result
}

/// Appends to a partition this broker leads (see [`append`]).
#[allow(clippy::too_many_arguments)]
fn append_to(
    node: &Node,
    version: i16,
    meta: &crate::metadata::TopicImage,
    partition: &Arc<crate::replica::Partition>,
    topic: &str,
    index: i32,
    records: Option<bytes::Bytes>,
    acks: i16,
    now: i64,
    record_errors: &mut Vec<BatchIndexAndErrorMessage>,
) -> Result<Appended, (ErrorCode, Option<String>)> {
    if meta.is_internal() {
        return Err((
            ErrorCode::InvalidTopicException,
            Some(format!("cannot produce to internal topic {topic}")),
        ));
    }
    let Some(records) = records.filter(|r| !r.is_empty()) else {
        return Err((ErrorCode::InvalidRecord, Some("produce request without records".into())));
    };
    if version < 7 && first_batch_codec(&records) == Some(Compression::Zstd) {
        // KIP-110: zstd needs Produce v7, which tells the broker the client knows it.
        return Err((
            ErrorCode::UnsupportedCompressionType,
            Some(format!(
                "Produce requests with version {version} are not allowed to use ZStandard compression"
            )),
        ));
    }
    let (policy, _) = node.topic_defaults().resolve(&meta.configs, "cleanup.policy");
    if policy.split(',').any(|p| p.trim() == "compact") {
        *record_errors = records_without_key(&records, topic, index, node.config.message_max_bytes);
        if !record_errors.is_empty() {
            return Err((ErrorCode::InvalidRecord, Some(record_errors_summary(record_errors))));
        }
    }
    let mut min_isr = 1;
    if acks == -1 {
        let (value, _) = node.topic_defaults().resolve(&meta.configs, "min.insync.replicas");
        min_isr = value.parse().unwrap_or(1);
        let isr_size = partition.isr_size();
        if isr_size < min_isr {
            return Err((
                ErrorCode::NotEnoughReplicas,
                Some(format!("in-sync replicas {isr_size} below min.insync.replicas {min_isr}")),
            ));
        }
    }
    let leader_epoch = partition.leader_epoch();
    match partition.append_as_leader(records, strata_storage::AppendOrigin::Client, now) {
        Ok(info) => {
            let wait = (acks == -1).then(|| Delayed {
                partition: partition.clone(),
                last_offset: info.last_offset,
                leader_epoch,
                min_isr,
            });
            // Already replicated (an ISR of one): answer without waiting.
            let wait = match wait {
                Some(w)
                    if partition.high_watermark() > w.last_offset
                        && partition.leader_epoch() == leader_epoch =>
                {
                    check_isr_after(partition, min_isr).map_err(|(c, m)| (c, Some(m)))?;
                    None
                }
                other => other,
            };
            Ok(Appended {
                base_offset: info.first_offset,
                log_append_time: info.log_append_time,
                log_start_offset: info.log_start_offset,
                records: (info.last_offset - info.first_offset + 1).max(0) as u64,
                wait,
            })
        }
        Err(e @ crate::replica::AppendError::NotLeader) => Err((append_error_code(&e), None)),
        Err(e @ crate::replica::AppendError::Storage(_)) => {
            tracing::debug!(topic, partition = index, error = %e, "append refused");
            Err((append_error_code(&e), Some(e.to_string())))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verification_failures_are_answered_as_kafka_answers_them() {
        for code in [
            ErrorCode::ConcurrentTransactions,
            ErrorCode::NetworkException,
            ErrorCode::CoordinatorLoadInProgress,
            ErrorCode::CoordinatorNotAvailable,
            ErrorCode::NotCoordinator,
        ] {
            let (answer, message) = produce_verification_refusal(code);
            assert_eq!(answer, ErrorCode::NotEnoughReplicas, "{code:?}");
            assert!(message.ends_with(&format!("Underlying error: {}", code.name())), "{message}");
        }
        assert_eq!(
            produce_verification_refusal(ErrorCode::InvalidTxnState),
            (ErrorCode::InvalidTxnState, "Partition was not added to the transaction".into())
        );
        assert_eq!(
            produce_verification_refusal(ErrorCode::InvalidProducerEpoch).0,
            ErrorCode::InvalidProducerEpoch
        );
        assert_eq!(
            produce_verification_refusal(ErrorCode::TransactionAbortable).0,
            ErrorCode::TransactionAbortable
        );
    }
}
