//! Forwarding admin requests to the active controller (Kafka's KRaft brokers forward
//! CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs, IncrementalAlterConfigs,
//! ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments): the request
//! goes in its newest shape, the answer comes back in it, and the handler encodes it at
//! the client's version. Before answering, the broker
//! waits briefly until its own metadata shows the change, so the client's next request
//! here finds it; never past the request's own `timeout_ms`, which bounds the whole
//! answer (a broker whose metadata log is stalled, a full disk, cannot apply the change
//! the controller made, and still answers in time).

use crate::node::Node;
use std::sync::Arc;
use std::time::Duration;
use strata_protocol::messages::create_topics::{
    CreatableTopic, CreatableTopicResult, CreateTopicsRequest, CreateTopicsResponse,
};
use strata_protocol::{ErrorCode, RequestBody, ResponseBody};

/// How long a forwarded change may take to show in this broker's metadata, at most.
const APPLY_WAIT: Duration = Duration::from_secs(5);

/// The time an admin request's `timeout_ms` gives it (clamped to 1-60 s, so a zero or
/// negative timeout still reaches the controller), measured from its arrival.
#[derive(Debug, Clone, Copy)]
pub struct RequestDeadline {
    at: tokio::time::Instant,
}

impl RequestDeadline {
    /// The deadline of a request with `timeout_ms`, arriving now.
    pub fn new(timeout_ms: i32) -> RequestDeadline {
        let timeout = Duration::from_millis(timeout_ms.clamp(1000, 60_000) as u64);
        RequestDeadline { at: tokio::time::Instant::now() + timeout }
    }

    /// The time left until the deadline (zero once it passed).
    pub fn remaining(&self) -> Duration {
        self.at.saturating_duration_since(tokio::time::Instant::now())
    }

    /// How long the broker may still wait for its metadata to show the change: at most
    /// [`APPLY_WAIT`], never past the deadline.
    pub fn apply_wait(&self) -> Duration {
        self.remaining().min(APPLY_WAIT)
    }
}

/// The controller-side version a forwarded request is sent at.
pub fn controller_version(body: &RequestBody) -> i16 {
    match body {
        RequestBody::CreateTopics(_) => 7,
        RequestBody::DeleteTopics(_) => 6,
        RequestBody::CreatePartitions(_) => 3,
        RequestBody::AlterConfigs(_) => 2,
        RequestBody::IncrementalAlterConfigs(_) => 1,
        RequestBody::ElectLeaders(_) => 2,
        RequestBody::AlterPartitionReassignments(_) => 1,
        RequestBody::ListPartitionReassignments(_) => 0,
        RequestBody::DescribeQuorum(_) => 2,
        _ => 0,
    }
}

/// Sends `body` to the active controller; `None` if no controller answered before
/// `deadline`.
pub async fn to_controller(
    node: &Node,
    body: RequestBody,
    deadline: RequestDeadline,
) -> Option<ResponseBody> {
    let version = controller_version(&body);
    let timeout = deadline.remaining().max(Duration::from_millis(1));
    match node.controller_channel().call(body, version, timeout).await {
        Ok(r) => Some(r),
        Err(e) => {
            tracing::warn!(error = %e, "admin request not answered by a controller");
            None
        }
    }
}

/// Replicas of `partitions` new partitions with replication factor `rf` that land on one
/// broker when spread over the active ones (the controller's placement is even).
pub fn replicas_per_broker(node: &Node, partitions: i64, rf: i64) -> u64 {
    let image = node.metadata.current();
    let brokers = image.brokers.values().filter(|b| b.is_active()).count().max(1) as i64;
    let replicas = partitions.max(0) * rf.clamp(1, brokers);
    (replicas + brokers - 1).div_euclid(brokers) as u64
}

/// Splits `topics` into those this broker's open files limit admits and the refusals
/// of the others (POLICY_VIOLATION naming the limit, `crate::limits`). The limit of
/// this broker stands for every broker's: the controller places replicas evenly.
fn admit_by_descriptors(
    node: &Node,
    topics: Vec<CreatableTopic>,
) -> (Vec<CreatableTopic>, Vec<CreatableTopicResult>) {
    let mut admitted = Vec::with_capacity(topics.len());
    let mut refused = Vec::new();
    let mut total = 0;
    for t in topics {
        let here = if t.assignments.is_empty() {
            let partitions = if t.num_partitions < 0 { node.config.num_partitions } else { t.num_partitions };
            let rf = if t.replication_factor < 0 {
                node.config.default_replication_factor
            } else {
                t.replication_factor
            };
            replicas_per_broker(node, i64::from(partitions), i64::from(rf))
        } else {
            t.assignments.iter().filter(|a| a.broker_ids.contains(&node.config.node_id)).count() as u64
        };
        match crate::limits::refuse_new_partitions(total + here) {
            Some(why) => refused.push(CreatableTopicResult {
                name: t.name.clone(),
                error_code: ErrorCode::PolicyViolation.code(),
                error_message: Some(why),
                ..Default::default()
            }),
            None => {
                total += here;
                admitted.push(t);
            }
        }
    }
    (admitted, refused)
}

/// Creates topics through the controller and waits until they are applied here.
/// Topics whose partitions would not fit the open files limit are refused first.
pub async fn create_topics(node: &Arc<Node>, mut request: CreateTopicsRequest) -> CreateTopicsResponse {
    let (admitted, refused) = admit_by_descriptors(node, std::mem::take(&mut request.topics));
    request.topics = admitted;
    if !refused.is_empty() {
        for r in &refused {
            tracing::warn!(topic = %r.name, reason = r.error_message.as_deref().unwrap_or(""), "topic refused");
        }
    }
    if request.topics.is_empty() {
        return CreateTopicsResponse { topics: refused, ..Default::default() };
    }
    let mut response = create_admitted_topics(node, request).await;
    response.topics.extend(refused);
    response
}

async fn create_admitted_topics(node: &Arc<Node>, request: CreateTopicsRequest) -> CreateTopicsResponse {
    let names: Vec<String> = request.topics.iter().map(|t| t.name.clone()).collect();
    let validate_only = request.validate_only;
    let deadline = RequestDeadline::new(request.timeout_ms);
    let failed = |topics: &[CreatableTopic]| CreateTopicsResponse {
        topics: topics
            .iter()
            .map(|t| CreatableTopicResult {
                name: t.name.clone(),
                error_code: ErrorCode::RequestTimedOut.code(),
                error_message: Some("no active controller answered".into()),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    let topics = request.topics.clone();
    let response = match to_controller(node, RequestBody::CreateTopics(request), deadline).await {
        Some(ResponseBody::CreateTopics(r)) => r,
        _ => return failed(&topics),
    };
    if !validate_only {
        let created: Vec<String> = response
            .topics
            .iter()
            .filter(|t| t.error_code == 0 && names.contains(&t.name))
            .map(|t| t.name.clone())
            .collect();
        node.await_topics_applied(&created, deadline.apply_wait()).await;
    }
    response
}

/// Creates `names` with this broker's defaults (`num.partitions`,
/// `default.replication.factor`), as Metadata's auto-creation does; the error per
/// topic that could not be created (TOPIC_ALREADY_EXISTS counts as created).
pub async fn auto_create(node: &Arc<Node>, names: &[String]) -> Vec<(String, ErrorCode)> {
    let request = CreateTopicsRequest {
        topics: names
            .iter()
            .map(|n| CreatableTopic {
                name: n.clone(),
                num_partitions: node.config.num_partitions,
                replication_factor: node.config.default_replication_factor,
                ..Default::default()
            })
            .collect(),
        timeout_ms: 30_000,
        validate_only: false,
    };
    let response = create_topics(node, request).await;
    response
        .topics
        .into_iter()
        .filter(|t| t.error_code != 0 && t.error_code != ErrorCode::TopicAlreadyExists.code())
        .map(|t| (t.name, ErrorCode::from_code(t.error_code).unwrap_or(ErrorCode::UnknownServerError)))
        .collect()
}

/// Forwards a request whose answer needs no waiting (configs, elections); the
/// NOT_CONTROLLER answer if no controller answered.
pub async fn plain(node: &Node, body: RequestBody) -> ResponseBody {
    within(node, body, RequestDeadline::new(30_000)).await
}

/// [`plain`] for a request with a `timeout_ms` of its own: the controller is given until
/// its deadline.
pub async fn within(node: &Node, body: RequestBody, deadline: RequestDeadline) -> ResponseBody {
    let fallback = crate::controller::service::not_controller(&body);
    to_controller(node, body, deadline).await.unwrap_or(fallback)
}
