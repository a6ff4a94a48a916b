//! What the load generator needs to know about a cluster before it starts: the API
//! versions the bootstrap broker serves, the topic's partitions and their leaders
//! (creating the topic if needed), and partition offsets.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use strata_protocol::messages::api_versions::ApiVersionsRequest;
use strata_protocol::messages::create_topics::{CreatableTopic, CreateTopicsRequest};
use strata_protocol::messages::list_offsets::{ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic};
use strata_protocol::messages::metadata::{MetadataRequest, MetadataRequestTopic};
use strata_protocol::{ApiKey, ErrorCode, RequestBody, ResponseBody};

use crate::wire::Connection;

/// How long to wait for a new topic's partitions to get leaders.
const TOPIC_READY_TIMEOUT: Duration = Duration::from_secs(30);

/// ListOffsets timestamp asking for the log start offset.
pub const EARLIEST: i64 = -2;
/// ListOffsets timestamp asking for the log end offset.
pub const LATEST: i64 = -1;

/// A Kafka error code as text, e.g. `NOT_LEADER_OR_FOLLOWER (6)`.
pub fn error_name(code: i16) -> String {
    match ErrorCode::from_code(code) {
        Some(e) => format!("{} ({code})", e.name()),
        None => format!("error code {code}"),
    }
}

/// The API versions a broker advertised.
#[derive(Debug, Clone, Default)]
pub struct Versions {
    ranges: BTreeMap<i16, (i16, i16)>,
}

impl Versions {
    /// From (api key, min, max) triples.
    pub fn from_ranges(ranges: impl IntoIterator<Item = (i16, i16, i16)>) -> Versions {
        Versions { ranges: ranges.into_iter().map(|(k, lo, hi)| (k, (lo, hi))).collect() }
    }

    /// Whether the broker advertises `api` at all.
    pub fn has(&self, api: ApiKey) -> bool {
        self.ranges.contains_key(&(api as i16))
    }

    /// The highest version both the broker and we (`ours_lo..=ours_hi`) speak.
    pub fn pick(&self, api: ApiKey, ours_lo: i16, ours_hi: i16) -> Result<i16> {
        let (lo, hi) = self
            .ranges
            .get(&(api as i16))
            .copied()
            .ok_or_else(|| anyhow!("the broker does not advertise {}", api.name()))?;
        let v = hi.min(ours_hi);
        if v < lo.max(ours_lo) {
            bail!("no common version of {}: broker {lo}-{hi}, strata-perf {ours_lo}-{ours_hi}", api.name());
        }
        Ok(v)
    }
}

/// The versions strata-perf uses for each API it sends.
#[derive(Debug, Clone, Copy)]
pub struct Negotiated {
    /// Produce (v3+ carries record batch v2).
    pub produce: i16,
    /// Fetch (v4+; topic names, so at most v12).
    pub fetch: i16,
    /// Metadata.
    pub metadata: i16,
    /// ListOffsets.
    pub list_offsets: i16,
}

impl Negotiated {
    /// Picks every version from what the broker advertised.
    pub fn from(versions: &Versions) -> Result<Negotiated> {
        Ok(Negotiated {
            produce: versions.pick(ApiKey::Produce, 3, 10)?,
            fetch: versions.pick(ApiKey::Fetch, 4, 12)?,
            metadata: versions.pick(ApiKey::Metadata, 1, 12)?,
            list_offsets: versions.pick(ApiKey::ListOffsets, 1, 7)?,
        })
    }
}

/// Asks the broker which API versions it serves: v3 first, then v0 if the broker
/// refuses v3 (KIP-511 brokers answer an unknown version with a v0 body).
pub async fn api_versions(addr: &str, client_id: &str) -> Result<Versions> {
    for version in [3i16, 0] {
        let mut conn = Connection::connect(addr, client_id).await?;
        let body = RequestBody::ApiVersions(ApiVersionsRequest {
            client_software_name: "strata-perf".into(),
            client_software_version: env!("CARGO_PKG_VERSION").into(),
        });
        let response = match conn.call(version, body).await {
            Ok(r) => r,
            Err(_) if version > 0 => continue,
            Err(e) => return Err(e),
        };
        let ResponseBody::ApiVersions(r) = response else {
            bail!("unexpected response to ApiVersions");
        };
        if r.error_code != 0 {
            if version > 0 {
                continue;
            }
            bail!("ApiVersions failed: {}", error_name(r.error_code));
        }
        return Ok(Versions::from_ranges(
            r.api_keys.iter().map(|k| (k.api_key, k.min_version, k.max_version)),
        ));
    }
    bail!("the broker at {addr} answered no ApiVersions request")
}

/// A topic's partitions, their leaders and the leaders' addresses.
#[derive(Debug, Clone)]
pub struct TopicLayout {
    /// Topic name.
    pub topic: String,
    /// Leader node id of each partition, by partition index.
    pub leaders: Vec<i32>,
    /// host:port of each broker.
    pub brokers: BTreeMap<i32, String>,
}

impl TopicLayout {
    /// Number of partitions.
    pub fn partition_count(&self) -> usize {
        self.leaders.len()
    }

    /// Address of the leader of `partition`.
    pub fn leader_addr(&self, partition: usize) -> Result<&str> {
        let node = self.leaders[partition];
        self.brokers
            .get(&node)
            .map(String::as_str)
            .ok_or_else(|| anyhow!("leader {node} of partition {partition} is not in the broker list"))
    }
}

/// What a Metadata request said about one topic.
enum TopicState {
    Missing,
    NotReady(String),
    Ready(TopicLayout),
}

async fn describe(conn: &mut Connection, version: i16, topic: &str) -> Result<TopicState> {
    let request = MetadataRequest {
        topics: Some(vec![MetadataRequestTopic { name: Some(topic.to_string()), ..Default::default() }]),
        allow_auto_topic_creation: false,
        ..Default::default()
    };
    let ResponseBody::Metadata(r) = conn.call(version, RequestBody::Metadata(request)).await? else {
        bail!("unexpected response to Metadata");
    };
    let brokers = r.brokers.iter().map(|b| (b.node_id, format!("{}:{}", b.host, b.port))).collect();
    let Some(t) = r.topics.iter().find(|t| t.name.as_deref() == Some(topic)) else {
        return Ok(TopicState::Missing);
    };
    if t.error_code == ErrorCode::UnknownTopicOrPartition.code() {
        return Ok(TopicState::Missing);
    }
    if t.error_code != 0 {
        return Ok(TopicState::NotReady(error_name(t.error_code)));
    }
    let mut partitions: Vec<_> = t.partitions.iter().collect();
    partitions.sort_by_key(|p| p.partition_index);
    let mut leaders = Vec::with_capacity(partitions.len());
    for (i, p) in partitions.iter().enumerate() {
        if p.partition_index != i as i32 {
            return Ok(TopicState::NotReady(format!("partition {i} missing")));
        }
        if p.error_code != 0 || p.leader_id < 0 {
            return Ok(TopicState::NotReady(format!(
                "partition {i} has no leader ({})",
                error_name(p.error_code)
            )));
        }
        leaders.push(p.leader_id);
    }
    if leaders.is_empty() {
        return Ok(TopicState::NotReady("no partitions".into()));
    }
    Ok(TopicState::Ready(TopicLayout { topic: topic.to_string(), leaders, brokers }))
}

/// Creates `topic` with `partitions` partitions if it does not exist, then waits until
/// every partition has a leader. An existing topic is used as it is.
pub async fn ensure_topic(
    bootstrap: &str,
    client_id: &str,
    versions: &Versions,
    topic: &str,
    create: Option<(i32, i16)>,
) -> Result<TopicLayout> {
    let metadata_version = versions.pick(ApiKey::Metadata, 4, 12)?;
    let mut conn = Connection::connect(bootstrap, client_id).await?;
    let deadline = Instant::now() + TOPIC_READY_TIMEOUT;
    let mut created = false;
    loop {
        let why = match describe(&mut conn, metadata_version, topic).await? {
            TopicState::Ready(layout) => {
                if let Some((wanted, _)) = create {
                    if layout.partition_count() != wanted as usize && !created {
                        eprintln!(
                            "note: topic {topic} exists with {} partitions; using them (asked for {wanted})",
                            layout.partition_count()
                        );
                    }
                }
                return Ok(layout);
            }
            TopicState::Missing => match create {
                Some((partitions, replication_factor)) if !created => {
                    create_topic(&mut conn, versions, topic, partitions, replication_factor).await?;
                    created = true;
                    continue;
                }
                Some(_) => "not visible in metadata yet".to_string(),
                None => bail!("topic {topic} does not exist"),
            },
            TopicState::NotReady(why) => why,
        };
        if Instant::now() >= deadline {
            bail!("topic {topic} is not ready after {TOPIC_READY_TIMEOUT:?}: {why}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn create_topic(
    conn: &mut Connection,
    versions: &Versions,
    topic: &str,
    partitions: i32,
    replication_factor: i16,
) -> Result<()> {
    let version = versions.pick(ApiKey::CreateTopics, 2, 7)?;
    let request = CreateTopicsRequest {
        topics: vec![CreatableTopic {
            name: topic.to_string(),
            num_partitions: partitions,
            replication_factor,
            ..Default::default()
        }],
        timeout_ms: 30_000,
        validate_only: false,
    };
    let ResponseBody::CreateTopics(r) =
        conn.call(version, RequestBody::CreateTopics(request)).await.context("creating the topic")?
    else {
        bail!("unexpected response to CreateTopics");
    };
    for t in &r.topics {
        if t.error_code != 0 && t.error_code != ErrorCode::TopicAlreadyExists.code() {
            bail!(
                "creating topic {} failed: {} {}",
                t.name,
                error_name(t.error_code),
                t.error_message.as_deref().unwrap_or("")
            );
        }
    }
    Ok(())
}

/// The offset at `timestamp` ([`EARLIEST`] or [`LATEST`]) of every partition,
/// asking each partition's leader.
pub async fn list_offsets(
    layout: &TopicLayout,
    version: i16,
    client_id: &str,
    timestamp: i64,
) -> Result<Vec<i64>> {
    let mut by_leader: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for p in 0..layout.partition_count() {
        by_leader.entry(layout.leader_addr(p)?).or_default().push(p as i32);
    }
    let mut out = vec![-1i64; layout.partition_count()];
    for (addr, partitions) in by_leader {
        let mut conn = Connection::connect(addr, client_id).await?;
        let request = ListOffsetsRequest {
            replica_id: -1,
            isolation_level: 0,
            topics: vec![ListOffsetsTopic {
                name: layout.topic.clone(),
                partitions: partitions
                    .iter()
                    .map(|&p| ListOffsetsPartition { partition_index: p, timestamp, ..Default::default() })
                    .collect(),
            }],
            timeout_ms: 30_000,
        };
        let ResponseBody::ListOffsets(r) = conn.call(version, RequestBody::ListOffsets(request)).await?
        else {
            bail!("unexpected response to ListOffsets");
        };
        for t in &r.topics {
            for p in &t.partitions {
                if p.error_code != 0 {
                    bail!(
                        "ListOffsets of partition {} failed: {}",
                        p.partition_index,
                        error_name(p.error_code)
                    );
                }
                if let Some(slot) = out.get_mut(p.partition_index as usize) {
                    *slot = p.offset;
                }
            }
        }
    }
    if let Some(p) = out.iter().position(|&o| o < 0) {
        bail!("ListOffsets returned no offset for partition {p}");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_highest_common_version() {
        let v = Versions::from_ranges([(0, 0, 10), (1, 4, 16), (3, 0, 12), (2, 1, 7)]);
        assert_eq!(v.pick(ApiKey::Produce, 3, 10).unwrap(), 10);
        assert_eq!(v.pick(ApiKey::Fetch, 4, 12).unwrap(), 12);
        assert_eq!(v.pick(ApiKey::Produce, 3, 7).unwrap(), 7);
        assert!(v.pick(ApiKey::Fetch, 0, 3).is_err(), "no overlap");
        assert!(v.pick(ApiKey::InitProducerId, 0, 5).is_err(), "not advertised");
        assert!(!v.has(ApiKey::InitProducerId));
        let n = Negotiated::from(&v).unwrap();
        assert_eq!((n.produce, n.fetch, n.metadata, n.list_offsets), (10, 12, 12, 7));
    }

    #[test]
    fn error_names_are_readable() {
        assert_eq!(error_name(6), "NOT_LEADER_OR_FOLLOWER (6)");
        assert_eq!(error_name(9999), "error code 9999");
    }
}
