//! Internal topics that coordinators keep their state in (`__consumer_offsets`,
//! `__transaction_state`), created through the controller on first use. Writing and
//! reading them back is [`super::writer`]'s.

use crate::node::Node;
use std::time::Duration;
use strata_protocol::messages::create_topics::{CreatableTopic, CreatableTopicConfig, CreateTopicsRequest};
use strata_protocol::{ErrorCode, RequestBody, ResponseBody};

/// Name of the group coordinator's topic.
pub const CONSUMER_OFFSETS: &str = "__consumer_offsets";

/// Name of the transaction coordinator's topic.
pub const TRANSACTION_STATE: &str = "__transaction_state";

/// Creates a coordinator's compacted topic unless it exists: `partitions` partitions,
/// `replication_factor` replicas, `segment_bytes` segments (the broker's
/// `offsets.topic.segment.bytes` or `transaction.state.log.segment.bytes`), and the given `compression.type` (and `min.insync.replicas`
/// when given). Returns once this broker's metadata shows the topic.
pub async fn ensure_coordinator_topic(
    broker: &Node,
    name: &str,
    partitions: i32,
    replication_factor: i16,
    segment_bytes: i64,
    extra: &[(&str, String)],
) -> Result<(), ErrorCode> {
    if broker.metadata.current().topic(name).is_some() {
        return Ok(());
    }
    let mut configs = vec![
        CreatableTopicConfig { name: "cleanup.policy".into(), value: Some("compact".into()) },
        CreatableTopicConfig { name: "segment.bytes".into(), value: Some(segment_bytes.to_string()) },
    ];
    for (k, v) in extra {
        configs.push(CreatableTopicConfig { name: k.to_string(), value: Some(v.clone()) });
    }
    let request = CreateTopicsRequest {
        topics: vec![CreatableTopic {
            name: name.to_string(),
            num_partitions: partitions,
            replication_factor,
            assignments: Vec::new(),
            configs,
        }],
        timeout_ms: 30_000,
        validate_only: false,
    };
    let timeout = Duration::from_millis(broker.config.cluster.quorum_request_timeout_ms.max(2000));
    let answer = broker.controller_channel().call(RequestBody::CreateTopics(request), 7, timeout).await;
    match answer {
        Ok(ResponseBody::CreateTopics(r)) => {
            let code = r.topics.first().map_or(0, |t| t.error_code);
            if code != 0 && code != ErrorCode::TopicAlreadyExists.code() {
                let message = r.topics.first().and_then(|t| t.error_message.clone()).unwrap_or_default();
                tracing::warn!(topic = name, error = code, %message, "cannot create internal topic");
                return Err(ErrorCode::CoordinatorNotAvailable);
            }
        }
        Ok(_) | Err(_) => return Err(ErrorCode::CoordinatorNotAvailable),
    }
    let image = broker.await_topics_applied(&[name.to_string()], Duration::from_secs(5)).await;
    if image.topic(name).is_some() {
        Ok(())
    } else {
        Err(ErrorCode::CoordinatorNotAvailable)
    }
}
