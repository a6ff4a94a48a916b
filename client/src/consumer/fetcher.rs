//! Fetching: each assigned, unpaused partition with a position and nothing buffered is
//! in at most one Fetch request at a time, the partitions of one leader broker sent
//! together, so responses arrive while the application processes the last poll's records
//! (prefetch). Requests use topic ids
//! (v13+) when the broker and the metadata have them, names otherwise; each partition
//! carries the leader epoch the metadata knows (KIP-320) so a stale leader is refused.
//! Each broker's fetches run in an incremental fetch session (KIP-227, [`BrokerSession`]),
//! one fetch in flight per broker.

use super::record::{decode, DecodeOptions, Decoded};
use crate::client::Client;
use crate::connection::Response;
use crate::error::{Error, Result};
use crate::metadata::{Cluster, LeaderHint};
use crate::types::TopicPartition;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use strata_protocol::codec::Uuid;
use strata_protocol::fetch_session::FetchSession;
use strata_protocol::messages::fetch::{
    FetchPartition, FetchRequest, FetchResponse, FetchTopic, ForgottenTopic,
};
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
/// the positions when it arrives, and the broker's fetch session, handed back for the
/// next fetch.
#[derive(Debug)]
pub(crate) struct FetchOutcome {
    pub broker: i32,
    /// Every partition of the session with the offset it is fetched from, including
    /// those the (incremental) request did not name because they did not change.
    pub asked: Vec<(TopicPartition, i64)>,
    pub ids: HashMap<Uuid, String>,
    pub result: Result<FetchResponse>,
    pub session: BrokerSession,
}

/// The consumer's incremental fetch session (KIP-227) with one broker, as Kafka's Java
/// consumer keeps one: each fetch after the first names only the partitions whose
/// position or leader epoch changed and those no longer fetched, and the broker answers
/// only the partitions with something new, so a consumer of many partitions does not
/// send and parse all of them every time. One fetch per broker is in flight, and the
/// session travels with it (a broker answers one connection's requests in order, so a
/// second fetch would wait behind a parked one anyway).
#[derive(Debug, Default)]
pub(crate) struct BrokerSession {
    session: FetchSession<TopicPartition>,
    /// Whether the session's requests name topics by id (v13+); a change of mind (a
    /// topic without an id joined) starts a new session.
    by_id: bool,
}

/// Partitions with the offsets to fetch them from.
pub(crate) type Positioned = Vec<(TopicPartition, i64)>;

/// Groups `wanted` (partition, position) by the broker to fetch from and builds each
/// broker's request: the replica `read_from` names (the leader's `preferred_read_replica`,
/// KIP-392) while the metadata still knows that broker, the leader otherwise.
pub(crate) fn plan(
    cluster: &Cluster,
    wanted: &[(TopicPartition, i64)],
    read_from: impl Fn(&TopicPartition) -> Option<i32>,
) -> (BTreeMap<i32, Positioned>, Vec<TopicPartition>) {
    let mut by_broker: BTreeMap<i32, Positioned> = BTreeMap::new();
    let mut leaderless = Vec::new();
    for (tp, offset) in wanted {
        match cluster.partition(&tp.topic, tp.partition).filter(|p| p.leader >= 0) {
            Some(p) => {
                let node = read_from(tp).filter(|n| cluster.brokers.contains_key(n)).unwrap_or(p.leader);
                by_broker.entry(node).or_default().push((tp.clone(), *offset))
            }
            None => leaderless.push(tp.clone()),
        }
    }
    (by_broker, leaderless)
}

/// Whether a fetch's top-level error only says the session is gone (the broker
/// restarted or evicted it): the next fetch opens another, nothing else is wrong.
pub(crate) fn session_lost(e: &Error) -> bool {
    matches!(e.code(), Some(ErrorCode::FetchSessionIdNotFound | ErrorCode::InvalidFetchSessionEpoch))
}

/// Sends one broker's fetch and waits for the answer (run as its own task).
pub(crate) async fn fetch(
    client: Client,
    broker: i32,
    asked: Vec<(TopicPartition, i64)>,
    limits: FetchLimits,
    mut session: BrokerSession,
) -> FetchOutcome {
    let cluster = client.cluster();
    let mut ids = HashMap::new();
    let result = async {
        let conn = client.broker(broker).await?;
        let all_ids = asked.iter().all(|(tp, _)| cluster.topic(&tp.topic).is_some_and(|t| !t.id.is_zero()));
        let version = conn.version_at_most(ApiKey::Fetch, if all_ids { 17 } else { 12 })?;
        let by_id = version >= 13;
        if session.by_id != by_id {
            session.session.reset();
            session.by_id = by_id;
        }
        let id_of = |topic: &str| cluster.topic(topic).map(|t| t.id).unwrap_or(Uuid::ZERO);
        for (tp, _) in &asked {
            ids.entry(id_of(&tp.topic)).or_insert_with(|| tp.topic.to_string());
        }
        let wanted = || {
            asked
                .iter()
                .map(|(tp, offset)| {
                    let epoch =
                        cluster.partition(&tp.topic, tp.partition).map(|p| p.leader_epoch).unwrap_or(-1);
                    let fp = FetchPartition {
                        partition: tp.partition,
                        current_leader_epoch: epoch,
                        fetch_offset: *offset,
                        partition_max_bytes: limits.partition_max_bytes,
                        ..Default::default()
                    };
                    (tp.clone(), fp)
                })
                .collect()
        };
        let mut planned = session.session.plan(wanted());
        if by_id && planned.forgotten.iter().any(|tp| id_of(&tp.topic).is_zero()) {
            // A topic left the metadata (deleted): it cannot be named to forget it, so
            // the session starts over with a full request.
            session.session.reset();
            planned = session.session.plan(wanted());
        }
        let mut topics: BTreeMap<&str, Vec<FetchPartition>> = BTreeMap::new();
        for (tp, fp) in &planned.partitions {
            topics.entry(tp.topic.as_str()).or_default().push(fp.clone());
        }
        let topics: Vec<FetchTopic> = topics
            .into_iter()
            .map(|(name, partitions)| FetchTopic {
                topic: name.to_string(),
                topic_id: id_of(name),
                partitions,
            })
            .collect();
        let mut forgotten: BTreeMap<String, Vec<i32>> = BTreeMap::new();
        for tp in planned.forgotten {
            forgotten.entry(tp.topic.to_string()).or_default().push(tp.partition);
        }
        let forgotten_topics_data = forgotten
            .into_iter()
            .map(|(name, partitions)| ForgottenTopic { topic_id: id_of(&name), topic: name, partitions })
            .collect();
        let request = FetchRequest {
            max_wait_ms: limits.max_wait_ms,
            min_bytes: limits.min_bytes,
            max_bytes: limits.max_bytes,
            isolation_level: limits.isolation_level,
            session_id: planned.id,
            session_epoch: planned.epoch,
            topics,
            forgotten_topics_data,
            rack_id: limits.rack.clone(),
            ..Default::default()
        };
        let rx = conn.submit(version, &RequestBody::Fetch(request)).await?;
        let Response { body, .. } = conn.await_reply(rx).await?;
        match body {
            ResponseBody::Fetch(r) => {
                session.session.answered(r.error_code, r.session_id);
                match Error::from_code(r.error_code, None) {
                    Some(e) => Err(e),
                    None => Ok(r),
                }
            }
            _ => Err(Error::protocol(conn.addr(), "Fetch answered with another API")),
        }
    }
    .await;
    if result.is_err() {
        // Whether the broker saw the request is unknown: the next fetch opens a session.
        session.session.reset();
    }
    FetchOutcome { broker, asked, ids, result, session }
}

/// What one partition's answer means for the consumer.
#[derive(Debug)]
pub(crate) enum PartitionResult {
    /// The records read, and the partition's end as the broker reported it: the high
    /// watermark, or the last stable offset under `read_committed`.
    Records(Decoded, i64),
    /// The leader moved or the metadata is stale: move to the leader the answer named
    /// (KIP-951), if it named one, else refresh; then fetch again.
    RefreshMetadata(Option<LeaderHint>),
    /// The position is outside the log: reset it by `auto.offset.reset`.
    OutOfRange,
    /// The leader sends this partition's reads to another replica (KIP-392).
    ReadFrom(i32),
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
                ErrorCode::None if p.preferred_read_replica >= 0 => {
                    PartitionResult::ReadFrom(p.preferred_read_replica)
                }
                ErrorCode::None => {
                    let bytes = p.records.as_ref().and_then(|r| r.memory()).unwrap_or_default();
                    let aborted = p.aborted_transactions.as_deref().unwrap_or_default();
                    let end = match options.isolation {
                        crate::types::IsolationLevel::ReadCommitted if p.last_stable_offset >= 0 => {
                            p.last_stable_offset
                        }
                        _ => p.high_watermark,
                    };
                    match decode(&shared, p.partition_index, offset, &bytes, aborted, options) {
                        Ok(d) => PartitionResult::Records(d, end),
                        Err(e) => PartitionResult::Failed(e),
                    }
                }
                ErrorCode::OffsetOutOfRange => PartitionResult::OutOfRange,
                code if crate::error::refreshes_metadata(code) => {
                    let named = p.current_leader.leader_id >= 0;
                    PartitionResult::RefreshMetadata(named.then(|| LeaderHint {
                        topic: name.clone(),
                        partition: p.partition_index,
                        leader: p.current_leader.leader_id,
                        leader_epoch: p.current_leader.leader_epoch,
                    }))
                }
                code => PartitionResult::Failed(Error::kafka(code)),
            };
            out.push((tp, offset, result));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::IsolationLevel;
    use bytes::Bytes;
    use strata_protocol::messages::fetch::{FetchableTopicResponse, LeaderIdAndEpoch, PartitionData};
    use strata_protocol::records::{NewRecord, RecordBatchBuilder, RecordSet};

    fn options() -> DecodeOptions {
        DecodeOptions {
            isolation: IsolationLevel::ReadUncommitted,
            check_crcs: true,
            max_uncompressed_bytes: 1 << 20,
        }
    }

    fn partition(index: i32, code: ErrorCode, records: Option<Bytes>) -> PartitionData {
        PartitionData {
            partition_index: index,
            error_code: code.code(),
            records: records.map(RecordSet::from),
            ..Default::default()
        }
    }

    #[test]
    fn answers_are_matched_by_topic_id_and_their_errors_classified() {
        let id = Uuid([7; 16]);
        let mut b = RecordBatchBuilder::new(5);
        b.append(&NewRecord::new(1, None, Some(Bytes::from_static(b"v")))).expect("append");
        let response = FetchResponse {
            responses: vec![FetchableTopicResponse {
                topic: String::new(),
                topic_id: id,
                partitions: vec![
                    partition(0, ErrorCode::None, Some(b.build().expect("batch"))),
                    partition(1, ErrorCode::NotLeaderOrFollower, None),
                    PartitionData {
                        current_leader: LeaderIdAndEpoch { leader_id: 3, leader_epoch: 7 },
                        ..partition(2, ErrorCode::FencedLeaderEpoch, None)
                    },
                    partition(3, ErrorCode::OffsetOutOfRange, None),
                    partition(4, ErrorCode::TopicAuthorizationFailed, None),
                    partition(9, ErrorCode::None, None),
                ],
            }],
            ..Default::default()
        };
        let asked = (0..5).map(|p| (TopicPartition::new("t", p), 5)).collect();
        let outcome = FetchOutcome {
            broker: 0,
            asked,
            ids: HashMap::from([(id, "t".to_string())]),
            result: Ok(response),
            session: BrokerSession::default(),
        };
        let results = results(&outcome, options());
        assert_eq!(results.len(), 5, "a partition not asked for is ignored");
        assert!(
            matches!(&results[0].2, PartitionResult::Records(d, _) if d.records.len() == 1 && d.next_offset == 6)
        );
        assert_eq!(&*results[0].0.topic, "t");
        assert!(matches!(results[1].2, PartitionResult::RefreshMetadata(None)));
        let named = LeaderHint { topic: "t".into(), partition: 2, leader: 3, leader_epoch: 7 };
        assert!(matches!(&results[2].2, PartitionResult::RefreshMetadata(Some(h)) if *h == named));
        assert!(matches!(results[3].2, PartitionResult::OutOfRange));
        assert!(
            matches!(&results[4].2, PartitionResult::Failed(e) if e.code() == Some(ErrorCode::TopicAuthorizationFailed))
        );
    }

    #[test]
    fn partitions_are_grouped_by_leader_and_leaderless_ones_set_aside() {
        use strata_protocol::messages::metadata::{
            MetadataResponse, MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
        };
        let response = MetadataResponse {
            brokers: vec![
                MetadataResponseBroker { node_id: 1, host: "a".into(), port: 1, rack: None },
                MetadataResponseBroker { node_id: 2, host: "b".into(), port: 1, rack: None },
            ],
            topics: vec![MetadataResponseTopic {
                name: Some("t".into()),
                partitions: [(0, 1), (1, 2), (2, -1), (3, 1)]
                    .iter()
                    .map(|(p, leader)| MetadataResponsePartition {
                        partition_index: *p,
                        leader_id: *leader,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let cluster = Cluster::default().merged(&response, true, std::time::Instant::now());
        let wanted: Vec<_> = (0..5).map(|p| (TopicPartition::new("t", p), 10)).collect();
        let (by_leader, leaderless) = plan(&cluster, &wanted, |_| None);
        assert_eq!(by_leader[&1].iter().map(|(tp, _)| tp.partition).collect::<Vec<_>>(), vec![0, 3]);
        assert_eq!(by_leader[&2].len(), 1);
        assert_eq!(leaderless.iter().map(|tp| tp.partition).collect::<Vec<_>>(), vec![2, 4]);
        // A preferred read replica the metadata knows is fetched from; one it does not
        // (gone from the cluster) falls back to the leader.
        let read_from = |tp: &TopicPartition| match tp.partition {
            0 => Some(2),
            3 => Some(7),
            _ => None,
        };
        let (by_broker, _) = plan(&cluster, &wanted, read_from);
        assert_eq!(by_broker[&1].iter().map(|(tp, _)| tp.partition).collect::<Vec<_>>(), vec![3]);
        assert_eq!(by_broker[&2].iter().map(|(tp, _)| tp.partition).collect::<Vec<_>>(), vec![0, 1]);
    }

    #[test]
    fn a_preferred_read_replica_is_reported_instead_of_records() {
        let response = FetchResponse {
            responses: vec![FetchableTopicResponse {
                topic: "t".into(),
                partitions: vec![PartitionData {
                    preferred_read_replica: 3,
                    ..partition(0, ErrorCode::None, None)
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let outcome = FetchOutcome {
            broker: 1,
            asked: vec![(TopicPartition::new("t", 0), 0)],
            ids: HashMap::new(),
            result: Ok(response),
            session: BrokerSession::default(),
        };
        assert!(matches!(results(&outcome, options())[0].2, PartitionResult::ReadFrom(3)));
    }
}
