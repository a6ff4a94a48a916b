//! Fetching: one Fetch request in flight per leader broker, for the assigned, unpaused
//! partitions with a position and nothing buffered, so responses arrive while the
//! application processes the last poll's records (prefetch). Requests use topic ids
//! (v13+) when the broker and the metadata have them, names otherwise; each partition
//! carries the leader epoch the metadata knows (KIP-320) so a stale leader is refused.

use super::record::{decode, DecodeOptions, Decoded};
use crate::client::Client;
use crate::connection::Response;
use crate::error::{Error, Result};
use crate::metadata::Cluster;
use crate::types::TopicPartition;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use strata_protocol::codec::Uuid;
use strata_protocol::messages::fetch::{FetchPartition, FetchRequest, FetchResponse, FetchTopic};
use strata_protocol::{ApiKey, ErrorCode, RequestBody, ResponseBody};

/// The byte and time limits of a fetch.
#[derive(Debug, Clone)]
pub(crate) struct FetchLimits {
    pub max_wait_ms: i32,
    pub min_bytes: i32,
    pub max_bytes: i32,
    pub partition_max_bytes: i32,
    pub isolation_level: i8,
    pub rack: String,
}

/// A fetch sent to one broker: what was asked, so the answer can be checked against
/// the positions when it arrives.
#[derive(Debug)]
pub(crate) struct FetchOutcome {
    pub broker: i32,
    pub asked: Vec<(TopicPartition, i64)>,
    pub ids: HashMap<Uuid, String>,
    pub result: Result<FetchResponse>,
}

/// Partitions with the offsets to fetch them from.
pub(crate) type Positioned = Vec<(TopicPartition, i64)>;

/// Groups `wanted` (partition, position) by leader and builds each broker's request.
pub(crate) fn plan(
    cluster: &Cluster,
    wanted: &[(TopicPartition, i64)],
) -> (BTreeMap<i32, Positioned>, Vec<TopicPartition>) {
    let mut by_leader: BTreeMap<i32, Positioned> = BTreeMap::new();
    let mut leaderless = Vec::new();
    for (tp, offset) in wanted {
        match cluster.partition(&tp.topic, tp.partition).filter(|p| p.leader >= 0) {
            Some(p) => by_leader.entry(p.leader).or_default().push((tp.clone(), *offset)),
            None => leaderless.push(tp.clone()),
        }
    }
    (by_leader, leaderless)
}

/// Sends one broker's fetch and waits for the answer (run as its own task).
pub(crate) async fn fetch(
    client: Client,
    broker: i32,
    asked: Vec<(TopicPartition, i64)>,
    limits: FetchLimits,
) -> FetchOutcome {
    let cluster = client.cluster();
    let mut ids = HashMap::new();
    let result = async {
        let conn = client.broker(broker).await?;
        let all_ids = asked.iter().all(|(tp, _)| cluster.topic(&tp.topic).is_some_and(|t| !t.id.is_zero()));
        let version = conn.version_at_most(ApiKey::Fetch, if all_ids { 17 } else { 12 })?;
        let mut topics: BTreeMap<&str, Vec<FetchPartition>> = BTreeMap::new();
        for (tp, offset) in &asked {
            let epoch = cluster.partition(&tp.topic, tp.partition).map(|p| p.leader_epoch).unwrap_or(-1);
            topics.entry(tp.topic.as_str()).or_default().push(FetchPartition {
                partition: tp.partition,
                current_leader_epoch: epoch,
                fetch_offset: *offset,
                partition_max_bytes: limits.partition_max_bytes,
                ..Default::default()
            });
        }
        let topics: Vec<FetchTopic> = topics
            .into_iter()
            .map(|(name, partitions)| {
                let id = cluster.topic(name).map(|t| t.id).unwrap_or(Uuid::ZERO);
                ids.insert(id, name.to_string());
                FetchTopic { topic: name.to_string(), topic_id: id, partitions }
            })
            .collect();
        let request = FetchRequest {
            max_wait_ms: limits.max_wait_ms,
            min_bytes: limits.min_bytes,
            max_bytes: limits.max_bytes,
            isolation_level: limits.isolation_level,
            session_id: 0,
            session_epoch: -1,
            topics,
            rack_id: limits.rack.clone(),
            ..Default::default()
        };
        let rx = conn.submit(version, &RequestBody::Fetch(request)).await?;
        let Response { body, .. } = conn.await_reply(rx).await?;
        match body {
            ResponseBody::Fetch(r) => match Error::from_code(r.error_code, None) {
                Some(e) => Err(e),
                None => Ok(r),
            },
            _ => Err(Error::protocol(conn.addr(), "Fetch answered with another API")),
        }
    }
    .await;
    FetchOutcome { broker, asked, ids, result }
}

/// What one partition's answer means for the consumer.
#[derive(Debug)]
pub(crate) enum PartitionResult {
    Records(Decoded),
    /// The leader moved or the metadata is stale: refresh, then fetch again.
    RefreshMetadata,
    /// The position is outside the log: reset it by `auto.offset.reset`.
    OutOfRange,
    /// Another error: fetch again later.
    Failed(Error),
}

/// Splits a fetch response into per-partition results for the partitions asked.
pub(crate) fn results(
    outcome: &FetchOutcome,
    options: DecodeOptions,
) -> Vec<(TopicPartition, i64, PartitionResult)> {
    let Ok(response) = &outcome.result else { return Vec::new() };
    let asked: HashMap<&TopicPartition, i64> = outcome.asked.iter().map(|(tp, o)| (tp, *o)).collect();
    let mut out = Vec::new();
    for topic in &response.responses {
        let name = if topic.topic.is_empty() {
            outcome.ids.get(&topic.topic_id).cloned().unwrap_or_default()
        } else {
            topic.topic.clone()
        };
        let shared: Arc<str> = name.as_str().into();
        for p in &topic.partitions {
            let tp = TopicPartition::new(name.as_str(), p.partition_index);
            let Some(&offset) = asked.get(&tp) else { continue };
            let result = match ErrorCode::from_code(p.error_code).unwrap_or(ErrorCode::UnknownServerError) {
                ErrorCode::None => {
                    let bytes = p.records.as_ref().and_then(|r| r.memory()).unwrap_or_default();
                    let aborted = p.aborted_transactions.as_deref().unwrap_or_default();
                    match decode(&shared, p.partition_index, offset, &bytes, aborted, options) {
                        Ok(d) => PartitionResult::Records(d),
                        Err(e) => PartitionResult::Failed(e),
                    }
                }
                ErrorCode::OffsetOutOfRange => PartitionResult::OutOfRange,
                code if crate::error::refreshes_metadata(code) => PartitionResult::RefreshMetadata,
                code => PartitionResult::Failed(Error::kafka(code)),
            };
            out.push((tp, offset, result));
        }
    }
    out
}
