//! Fetch (1): whole record batches from each requested partition, within the request's
//! byte limits; parked until `min_bytes` arrive or `max_wait_ms` passes.
//!
//! Consumers read up to the high watermark (`read_committed`: the last stable offset),
//! from the leader or, with Fetch v11+ (KIP-392), from a follower up to the follower's
//! high watermark. With `replica.selector.class` set to Kafka's rack-aware selector, the
//! leader answers a consumer whose `rack_id` names a follower's rack with that
//! follower as `preferred_read_replica` and no data (`crate::replication::read_replica`).
//! A follower's fetch (`replica_id` / `ReplicaState` >= 0) reads up
//! to the log end, and its fetch offset is the follower's log end offset: the leader
//! records it ([`crate::replica::Partition::on_follower_fetch`]), which moves the high
//! watermark (waking parked consumer fetches and delayed `acks=all` produces) and may
//! propose an ISR expansion. With `LastFetchedEpoch` (v12+) the leader first checks the
//! follower's log against its own and answers a `DivergingEpoch` instead of data when
//! they differ, so the follower truncates before it appends. A partition refused with
//! NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH names the current leader, and from v16
//! the answer carries that leader's endpoint (KIP-951, [`super::leader_discovery`]).
//!
//! Fetch sessions (KIP-227): a request naming a session (a consumer's or a follower's)
//! is turned into the full request the session stands for, answered as any other, and
//! the answer cut down to what changed (`crate::fetch_session`).

use super::leader_discovery::{self, names_leader, node_endpoints};
use crate::errors::storage_error_code;
use crate::fetch_session::SessionPlan;
use crate::metadata::MetadataImage;
use crate::node::unhosted_error;
use crate::node::Node;
use crate::replica::{Partition, ReadError, ReadUpper};
use crate::replication::alter_isr::IsrChanges;
use crate::replication::throttle;
use std::sync::Arc;
use std::time::Duration;
use strata_protocol::messages::fetch::{
    AbortedTransaction, EpochEndOffset, FetchPartition, FetchRequest, FetchResponse, FetchableTopicResponse,
    LeaderIdAndEpoch, NodeEndpoint, PartitionData,
};
use strata_protocol::records::RecordSet;
use strata_protocol::ErrorCode;
use tokio::sync::Notify;

/// Who is fetching.
#[derive(Debug, Clone, Copy)]
struct Fetcher {
    /// The follower's node id, or -1 for a consumer.
    replica_id: i32,
    /// The follower's broker epoch (v15+, KIP-903), -1 if not sent.
    broker_epoch: i64,
    /// A consumer that may read from followers and be sent to one (Fetch v11+).
    any_replica: bool,
}

/// Handles a Fetch request.
/// `listener` is the one the request came in on: a consumer is only sent to a replica
/// it can reach there.
pub async fn handle(
    node: &Arc<Node>,
    isr_changes: &IsrChanges,
    version: i16,
    request: FetchRequest,
    listener: &str,
) -> FetchResponse {
    let follower =
        if version >= 15 { request.replica_state.replica_id >= 0 } else { request.replica_id >= 0 };
    let mut response = match node.fetch_sessions.begin(version, &request, follower) {
        SessionPlan::Sessionless => fetch(node, isr_changes, version, request, listener).await,
        SessionPlan::Refuse(code) => {
            FetchResponse { error_code: code.code(), session_id: 0, ..Default::default() }
        }
        SessionPlan::Full { id } => {
            let mut response = fetch(node, isr_changes, version, request, listener).await;
            node.fetch_sessions.finish(id, version, &mut response, false);
            response
        }
        SessionPlan::Incremental { id, request } => {
            let mut response = fetch(node, isr_changes, version, request, listener).await;
            node.fetch_sessions.finish(id, version, &mut response, true);
            response
        }
    };
    if version >= 16 {
        // KIP-951: the endpoints of the leaders the refused partitions name.
        let leaders = response.responses.iter().flat_map(|t| &t.partitions);
        let leaders = leaders.filter(|pd| names_leader(pd.error_code)).map(|pd| pd.current_leader.leader_id);
        response.node_endpoints =
            node_endpoints(&node.metadata.current(), listener, leaders, |node_id, host, port, rack| {
                NodeEndpoint { node_id, host, port, rack }
            });
    } else if version >= 12 {
        // v12-15 carry the tagged `CurrentLeader` too, but Kafka names the leader in it
        // only from v16, with its endpoint (KIP-951); an older fetcher refreshes its
        // metadata instead, on Strata as on Kafka.
        for pd in response.responses.iter_mut().flat_map(|t| &mut t.partitions) {
            pd.current_leader = LeaderIdAndEpoch::default();
        }
    }
    response
}

/// Answers `request` in full: every partition it names.
async fn fetch(
    node: &Arc<Node>,
    isr_changes: &IsrChanges,
    version: i16,
    request: FetchRequest,
    listener: &str,
) -> FetchResponse {
    let (replica_id, broker_epoch) = if version >= 15 {
        (request.replica_state.replica_id, request.replica_state.replica_epoch)
    } else {
        (request.replica_id, -1)
    };
    let fetcher = Fetcher { replica_id, broker_epoch, any_replica: replica_id < 0 && version >= 11 };
    let reader = Reader { request: &request, fetcher, listener, isr_changes };
    let deadline = tokio::time::Instant::now() + Duration::from_millis(request.max_wait_ms.max(0) as u64);
    // Woken only by appends and high watermark moves of the partitions this fetch reads.
    let waker = (request.max_wait_ms > 0).then(|| Arc::new(Notify::new()));
    let mut first = true;
    loop {
        let (response, bytes, answer_now) = read_all(node, version, reader, waker.as_ref(), first);
        first = false;
        let done = answer_now
            || bytes >= request.min_bytes.max(0) as usize
            || tokio::time::Instant::now() >= deadline;
        let Some(waker) = waker.as_ref().filter(|_| !done) else {
            count(node, version, &request, &response, fetcher);
            return response;
        };
        // Parked for fetch.min.bytes: Kafka counts a delayed fetch's wait as remote time.
        let woken = crate::metrics::remote_wait(tokio::time::timeout_at(deadline, waker.notified())).await;
        if woken.is_err() {
            let response = read_all(node, version, reader, None, false).0;
            count(node, version, &request, &response, fetcher);
            return response;
        }
    }
}

/// Adds the answer's partitions to their topics' counters (bytes out, requests,
/// failures), once per request: a parked fetch reads several times but answers once.
/// Partitions not led here count nowhere (their topic has no counters on this broker).
fn count(node: &Node, version: i16, request: &FetchRequest, response: &FetchResponse, fetcher: Fetcher) {
    let image = node.metadata.current();
    let follower = fetcher.replica_id >= 0;
    for (asked, answered) in request.topics.iter().zip(&response.responses) {
        let name = if version >= 13 {
            match image.topic_by_id(asked.topic_id) {
                Some(t) => t.name.as_str(),
                None => continue,
            }
        } else {
            asked.topic.as_str()
        };
        for pd in &answered.partitions {
            if let Some(p) = node.replicas.get(name, pd.partition_index) {
                let bytes = pd.records.as_ref().map_or(0, RecordSet::len);
                p.metrics().fetched(bytes, follower, pd.error_code != 0);
            }
        }
    }
}

/// One pass over every requested partition: the response, the bytes it carries, and
/// whether it must be sent without waiting for more data: a partition answered with an
/// error, a diverging epoch or a preferred read replica (as Kafka's delayed fetch).
/// With `park`, each partition is asked to wake it on its next append before it is
/// read, so an append between the read and the wait is not missed. A follower's
/// position is recorded on the `first` pass only.
fn read_all(
    node: &Arc<Node>,
    version: i16,
    reader: Reader<'_>,
    park: Option<&Arc<Notify>>,
    first: bool,
) -> (FetchResponse, usize, bool) {
    let Reader { request, fetcher, .. } = reader;
    let mut remaining = if version >= 3 { request.max_bytes.max(0) as usize } else { usize::MAX };
    let mut total = 0usize;
    let mut answer_now = false;
    let mut responses = Vec::with_capacity(request.topics.len());
    let image = node.metadata.current();
    for topic in &request.topics {
        let name = if version >= 13 {
            image.topic_by_id(topic.topic_id).map(|t| t.name.clone())
        } else {
            Some(topic.topic.clone())
        };
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for fp in &topic.partitions {
            let mut pd = PartitionData {
                partition_index: fp.partition,
                high_watermark: -1,
                last_stable_offset: -1,
                log_start_offset: -1,
                records: Some(RecordSet::new()),
                ..Default::default()
            };
            match &name {
                None => pd.error_code = ErrorCode::UnknownTopicId.code(),
                Some(name) => {
                    match node.replicas.get(name, fp.partition).filter(|p| readable(p, fetcher)) {
                        None => {
                            let code = match node.replicas.get(name, fp.partition) {
                                Some(_) => ErrorCode::NotLeaderOrFollower,
                                None => unhosted_error(&image, name, fp.partition),
                            };
                            pd.error_code = code.code();
                            pd.current_leader = current_leader(&image, name, fp.partition);
                        }
                        Some(_) if version < 10 && stores_zstd(node, &image, name) => {
                            // KIP-110: a client that fetches below v10 cannot read zstd, so a
                            // topic whose batches are stored as zstd is refused to it (as Kafka).
                            pd.error_code = ErrorCode::UnsupportedCompressionType.code();
                        }
                        Some(p) => {
                            if let Some(waker) = park {
                                p.park(waker, fetcher.replica_id >= 0);
                            }
                            let limit = remaining.min(fp.partition_max_bytes.max(0) as usize);
                            let read = read_partition(node, &image, &p, fp, reader, limit, total == 0, first);
                            pd = PartitionData { partition_index: fp.partition, ..read };
                            let len = pd.records.as_ref().map_or(0, RecordSet::len);
                            remaining = remaining.saturating_sub(len);
                            total += len;
                        }
                    }
                }
            }
            answer_now |= pd.error_code != 0
                || pd.preferred_read_replica >= 0
                || pd.diverging_epoch != EpochEndOffset::default();
            partitions.push(pd);
        }
        responses.push(FetchableTopicResponse {
            topic: if version < 13 { topic.topic.clone() } else { String::new() },
            topic_id: topic.topic_id,
            partitions,
        });
    }
    (FetchResponse { responses, ..Default::default() }, total, answer_now)
}

/// Whether this broker serves the fetcher's reads of `p`: the leader always; a follower
/// a consumer that may read from followers (KIP-392), never another follower.
fn readable(p: &Partition, fetcher: Fetcher) -> bool {
    p.is_leader() || (fetcher.any_replica && p.follower_of().is_some())
}

/// The request a partition is read for, who sent it, and on which listener.
#[derive(Clone, Copy)]
struct Reader<'a> {
    request: &'a FetchRequest,
    fetcher: Fetcher,
    listener: &'a str,
    /// Where a follower's fetch that lets it rejoin proposes the ISR change.
    isr_changes: &'a IsrChanges,
}

/// Whether the topic's `compression.type` (its own or the broker's) is zstd.
fn stores_zstd(node: &Node, image: &MetadataImage, topic: &str) -> bool {
    image
        .topic(topic)
        .is_some_and(|t| node.topic_defaults().resolve(&t.configs, "compression.type").0 == "zstd")
}

/// The leader the metadata names for a partition (tagged `CurrentLeader`, v12+), so a
/// client refreshes without another Metadata round.
fn current_leader(image: &MetadataImage, topic: &str, partition: i32) -> LeaderIdAndEpoch {
    let (leader_id, leader_epoch) = leader_discovery::current_leader(image, topic, partition);
    LeaderIdAndEpoch { leader_id, leader_epoch }
}

/// Reads one partition this broker leads (or follows, for a consumer that may read
/// from followers).
#[allow(clippy::too_many_arguments)]
fn read_partition(
    node: &Arc<Node>,
    image: &MetadataImage,
    p: &Arc<Partition>,
    fp: &FetchPartition,
    reader: Reader<'_>,
    limit: usize,
    min_one: bool,
    first: bool,
) -> PartitionData {
    let Reader { request, fetcher, listener, isr_changes } = reader;
    // Read once, the last stable offset first: the high watermark read after it is at
    // least as high, and the data, the aborted transactions and the answer all use these.
    let last_stable_offset = p.last_stable_offset();
    let high_watermark = p.high_watermark();
    let mut pd = PartitionData {
        partition_index: fp.partition,
        high_watermark,
        last_stable_offset,
        log_start_offset: p.log.log_start_offset(),
        records: Some(RecordSet::new()),
        ..Default::default()
    };
    if let Err(code) = p.check_leader_epoch(fp.current_leader_epoch) {
        pd.error_code = code.code();
        pd.current_leader = current_leader(image, &p.topic, p.index);
        return pd;
    }
    if fetcher.any_replica && !request.rack_id.is_empty() {
        if let Some(id) = preferred_read_replica(node, image, p, fp.fetch_offset, &request.rack_id, listener)
        {
            // Sent elsewhere: no data, the offsets as the leader knows them (Kafka).
            pd.preferred_read_replica = id;
            return pd;
        }
    }
    let follower = fetcher.replica_id >= 0;
    if follower && fp.last_fetched_epoch >= 0 {
        let (found_epoch, end) = p.log.end_offset_for_epoch(fp.last_fetched_epoch).unwrap_or((-1, -1));
        if end < fp.fetch_offset || found_epoch < fp.last_fetched_epoch {
            pd.diverging_epoch = EpochEndOffset { epoch: found_epoch, end_offset: end };
            return pd;
        }
    }
    let leader_leo = p.log.log_end_offset();
    let upper = match (follower, request.isolation_level) {
        (true, _) => ReadUpper::LogEnd,
        (false, 1) => ReadUpper::LastStable,
        (false, _) => ReadUpper::HighWatermark,
    };
    // A replica out of the ISR that a reassignment throttles gets nothing while the
    // leader's quota is spent (KIP-73); its position is still recorded below.
    let throttled = follower
        && throttle::throttled(
            image,
            &p.topic,
            p.index,
            throttle::LEADER_REPLICAS,
            node.config.node_id,
            fetcher.replica_id,
        );
    let bound = upper.bound(high_watermark, last_stable_offset);
    let read = if throttled && node.leader_quota.exceeded() {
        Ok(RecordSet::new())
    } else {
        p.read_for_fetch(fp.fetch_offset, limit, min_one, bound)
    };
    match read {
        Ok(data) => {
            if upper == ReadUpper::LastStable {
                // Over exactly the range read: a transaction aborted after the bound was
                // read is not in the data.
                pd.aborted_transactions = aborted(p, fp.fetch_offset, bound, !data.is_empty());
            }
            if throttled {
                node.leader_quota.record(data.len());
            }
            pd.records = Some(data);
        }
        Err(ReadError::Io(e)) => {
            tracing::error!(topic = %p.topic, partition = p.index, error = %e, "fetch read failed");
            pd.error_code = ErrorCode::KafkaStorageError.code();
            return pd;
        }
        Err(ReadError::Storage(e)) => {
            pd.error_code = storage_error_code(&e).code();
            return pd;
        }
    }
    if follower && first {
        let eligible = |node: i32, epoch: i64| {
            image.broker(node).is_some_and(|b| b.is_active() && (epoch < 0 || b.epoch == epoch))
        };
        let proposal = p.on_follower_fetch(
            fetcher.replica_id,
            fp.fetch_offset,
            fp.log_start_offset,
            fetcher.broker_epoch,
            leader_leo,
            crate::clock::now_ms(),
            eligible,
        );
        if let Some(proposal) = proposal {
            isr_changes.submit(p.clone(), proposal);
        }
        pd.high_watermark = p.high_watermark();
    }
    pd
}

/// The follower the consumer in `rack` should read `p` from, when this broker leads it
/// and `replica.selector.class` says so; only followers alive and reachable on the
/// consumer's `listener` are offered.
fn preferred_read_replica(
    node: &Node,
    image: &MetadataImage,
    p: &Partition,
    fetch_offset: i64,
    rack: &str,
    listener: &str,
) -> Option<i32> {
    use crate::replication::read_replica::{select, ReplicaSelector, ReplicaView};
    let selector = node.config.cluster.replica_selector;
    if selector == ReplicaSelector::Leader || !p.is_leader() {
        return None;
    }
    let rack_of = |id: i32| image.broker(id).and_then(|b| b.rack.as_deref());
    let leader = ReplicaView {
        id: node.config.node_id,
        rack: node.config.rack.as_deref(),
        log_end_offset: p.log.log_end_offset(),
        last_caught_up_ms: crate::clock::now_ms(),
    };
    let followers: Vec<ReplicaView<'_>> = p
        .read_replica_candidates(fetch_offset)
        .into_iter()
        .filter(|(id, _, _)| image.broker(*id).is_some_and(|b| !b.fenced && b.endpoint(listener).is_some()))
        .map(|(id, log_end_offset, last_caught_up_ms)| ReplicaView {
            id,
            rack: rack_of(id),
            log_end_offset,
            last_caught_up_ms,
        })
        .collect();
    select(selector, rack, leader, &followers)
}

/// The aborted transactions a `read_committed` consumer must skip in the fetched range
/// (Kafka sends null when the fetch returned no data).
fn aborted(p: &Partition, from: i64, upper: i64, has_data: bool) -> Option<Vec<AbortedTransaction>> {
    if !has_data {
        return None;
    }
    match p.log.aborted_transactions(from, upper) {
        Ok(list) => Some(
            list.into_iter()
                .map(|a| AbortedTransaction { producer_id: a.producer_id, first_offset: a.first_offset })
                .collect(),
        ),
        Err(e) => {
            tracing::error!(topic = %p.topic, partition = p.index, error = %e, "aborted transactions lookup failed");
            Some(Vec::new())
        }
    }
}
