//! Produce (0): append producers' record batches to partition logs.
//!
//! For each partition: check the topic and partition exist here, append as leader
//! (validation, offsets, indexes happen in the log), and answer with the base offset.
//! `acks=all` with an ISR below `min.insync.replicas` is refused before the append
//! with NOT_ENOUGH_REPLICAS; with a single node the high watermark reaches the batch at
//! once, so acks=all answers as soon as the append returns.

use crate::broker::Broker;
use crate::errors::storage_error_code;
use crate::txn::{verification_error_for_client, TopicPartition};
use std::collections::HashMap;
use std::sync::Arc;
use strata_protocol::messages::produce::{
    PartitionProduceResponse, ProduceRequest, ProduceResponse, TopicProduceResponse,
};
use strata_protocol::records::RecordBatch;
use strata_protocol::ErrorCode;

/// What to send back.
#[derive(Debug)]
pub enum Reply {
    /// The response.
    Respond(ProduceResponse),
    /// acks=0 and every partition succeeded: send nothing.
    Nothing,
    /// acks=0 and a partition failed: Kafka closes the connection so the producer
    /// notices (it cannot be told otherwise).
    Close,
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Handles a Produce request.
pub async fn handle(broker: &Arc<Broker>, version: i16, request: ProduceRequest) -> Reply {
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
            verify_transactional(broker, version, txn_id, &request).await
        }
        _ => HashMap::new(),
    };
    let now = now_ms();
    let mut any_error = false;
    let mut responses = Vec::with_capacity(request.topic_data.len());
    for topic in request.topic_data {
        let mut partition_responses = Vec::with_capacity(topic.partition_data.len());
        let meta = broker.topics.get(&topic.name);
        for pd in topic.partition_data {
            let mut r = PartitionProduceResponse { index: pd.index, base_offset: -1, ..Default::default() };
            let outcome = match (refuse, refused.get(&(topic.name.clone(), pd.index))) {
                (Some((code, message)), _) => Err((code, Some(message.to_string()))),
                (None, Some(&code)) => Err((code, Some(format!("{} for this transaction", code.name())))),
                (None, None) => append(broker, meta.as_deref(), &topic.name, pd.index, pd.records, acks, now),
            };
            match outcome {
                Ok((base_offset, log_append_time, log_start_offset)) => {
                    r.base_offset = base_offset;
                    r.log_append_time_ms = log_append_time;
                    r.log_start_offset = log_start_offset;
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
    Reply::Respond(ProduceResponse { responses, ..Default::default() })
}

type Appended = (i64, i64, i64);

/// KIP-890 part 1: a transactional produce may only write to partitions the transaction
/// coordinator has added to the producer's ongoing transaction, so a late request of an
/// earlier transaction cannot land in a later one. Returns the partitions to refuse.
async fn verify_transactional(
    broker: &Arc<Broker>,
    version: i16,
    transactional_id: &str,
    request: &ProduceRequest,
) -> HashMap<(String, i32), ErrorCode> {
    let mut refused = HashMap::new();
    let mut producer: Option<(i64, i16)> = None;
    let mut partitions = Vec::new();
    for topic in &request.topic_data {
        for pd in &topic.partition_data {
            let header = pd.records.as_ref().and_then(|r| RecordBatch::parse(r).ok());
            match header {
                Some(batch) if batch.is_transactional() && batch.producer_id() >= 0 => {
                    let this = (batch.producer_id(), batch.producer_epoch());
                    if producer.is_some_and(|p| p != this) {
                        refused.insert((topic.name.clone(), pd.index), ErrorCode::InvalidRequest);
                        continue;
                    }
                    producer = Some(this);
                    partitions.push(TopicPartition::new(topic.name.clone(), pd.index));
                }
                _ => {
                    // A transactional request must carry transactional batches.
                    refused.insert((topic.name.clone(), pd.index), ErrorCode::InvalidRecord);
                }
            }
        }
    }
    let Some((producer_id, producer_epoch)) = producer else {
        return refused;
    };
    let results = broker
        .transactions()
        .verify(transactional_id.to_string(), producer_id, producer_epoch, partitions)
        .await;
    for (tp, code) in results {
        if code != ErrorCode::None {
            refused.insert((tp.topic, tp.partition), verification_error_for_client(code, version > 10));
        }
    }
    refused
}

fn append(
    broker: &Broker,
    meta: Option<&crate::topics::TopicMeta>,
    topic: &str,
    index: i32,
    records: Option<bytes::Bytes>,
    acks: i16,
    now: i64,
) -> Result<Appended, (ErrorCode, Option<String>)> {
    let Some(meta) = meta else {
        return Err((ErrorCode::UnknownTopicOrPartition, None));
    };
    let Some(partition) = broker.replicas.get(topic, index) else {
        return Err((ErrorCode::UnknownTopicOrPartition, None));
    };
    if meta.internal {
        return Err((
            ErrorCode::InvalidTopicException,
            Some(format!("cannot produce to internal topic {topic}")),
        ));
    }
    let Some(records) = records.filter(|r| !r.is_empty()) else {
        return Err((ErrorCode::InvalidRecord, Some("produce request without records".into())));
    };
    if acks == -1 {
        let (min_isr, _) = broker.config.topic_defaults.resolve(&meta.configs, "min.insync.replicas");
        let min_isr: usize = min_isr.parse().unwrap_or(1);
        let isr_size = 1;
        if isr_size < min_isr {
            return Err((
                ErrorCode::NotEnoughReplicas,
                Some(format!("in-sync replicas {isr_size} below min.insync.replicas {min_isr}")),
            ));
        }
    }
    match partition.append_as_leader(records, now) {
        Ok(info) => Ok((info.first_offset, info.log_append_time, info.log_start_offset)),
        Err(e) => {
            tracing::debug!(topic, partition = index, error = %e, "append refused");
            Err((storage_error_code(&e), Some(e.to_string())))
        }
    }
}
