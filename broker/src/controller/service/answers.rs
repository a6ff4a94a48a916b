//! Answers the controller gives without deciding anything: NOT_CONTROLLER for each
//! controller API (so the caller retries on the active controller), and the check the
//! broker side makes to recognise one.

use strata_protocol::messages::{
    allocate_producer_ids::AllocateProducerIdsResponse,
    alter_configs::{AlterConfigsResourceResponse, AlterConfigsResponse},
    alter_partition::AlterPartitionResponse,
    alter_partition_reassignments::AlterPartitionReassignmentsResponse,
    broker_heartbeat::BrokerHeartbeatResponse,
    broker_registration::BrokerRegistrationResponse,
    create_partitions::{CreatePartitionsResponse, CreatePartitionsTopicResult},
    create_topics::{CreatableTopicResult, CreateTopicsResponse},
    delete_topics::{DeletableTopicResult, DeleteTopicsResponse},
    elect_leaders::ElectLeadersResponse,
    incremental_alter_configs as incremental,
    list_partition_reassignments::ListPartitionReassignmentsResponse,
    unregister_broker::UnregisterBrokerResponse,
};
use strata_protocol::{ErrorCode, RequestBody, ResponseBody};

const NOT_CONTROLLER: i16 = ErrorCode::NotController as i16;

/// The NOT_CONTROLLER answer to `body`. One flat arm per controller API (each answer has its
/// own shape), hence the length.
pub fn not_controller(body: &RequestBody) -> ResponseBody {
    let message = || Some("this node is not the active controller".to_string());
    match body {
        RequestBody::BrokerRegistration(_) => {
            BrokerRegistrationResponse { error_code: NOT_CONTROLLER, ..Default::default() }.into()
        }
        RequestBody::BrokerHeartbeat(_) => {
            BrokerHeartbeatResponse { error_code: NOT_CONTROLLER, ..Default::default() }.into()
        }
        RequestBody::AlterPartition(_) => {
            AlterPartitionResponse { error_code: NOT_CONTROLLER, ..Default::default() }.into()
        }
        RequestBody::AllocateProducerIds(_) => {
            AllocateProducerIdsResponse { error_code: NOT_CONTROLLER, ..Default::default() }.into()
        }
        RequestBody::UnregisterBroker(_) => UnregisterBrokerResponse {
            error_code: NOT_CONTROLLER,
            error_message: message(),
            ..Default::default()
        }
        .into(),
        RequestBody::ElectLeaders(_) => {
            ElectLeadersResponse { error_code: NOT_CONTROLLER, ..Default::default() }.into()
        }
        RequestBody::AlterPartitionReassignments(r) => AlterPartitionReassignmentsResponse {
            error_code: NOT_CONTROLLER,
            error_message: message(),
            allow_replication_factor_change: r.allow_replication_factor_change,
            ..Default::default()
        }
        .into(),
        RequestBody::ListPartitionReassignments(_) => ListPartitionReassignmentsResponse {
            error_code: NOT_CONTROLLER,
            error_message: message(),
            ..Default::default()
        }
        .into(),
        RequestBody::CreateTopics(r) => CreateTopicsResponse {
            topics: r
                .topics
                .iter()
                .map(|t| CreatableTopicResult {
                    name: t.name.clone(),
                    error_code: NOT_CONTROLLER,
                    error_message: message(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
        .into(),
        RequestBody::DeleteTopics(r) => DeleteTopicsResponse {
            responses: r
                .topics
                .iter()
                .map(|t| DeletableTopicResult {
                    name: t.name.clone(),
                    topic_id: t.topic_id,
                    error_code: NOT_CONTROLLER,
                    error_message: message(),
                })
                .collect(),
            ..Default::default()
        }
        .into(),
        RequestBody::CreatePartitions(r) => CreatePartitionsResponse {
            results: r
                .topics
                .iter()
                .map(|t| CreatePartitionsTopicResult {
                    name: t.name.clone(),
                    error_code: NOT_CONTROLLER,
                    error_message: message(),
                })
                .collect(),
            ..Default::default()
        }
        .into(),
        RequestBody::AlterConfigs(r) => AlterConfigsResponse {
            responses: r
                .resources
                .iter()
                .map(|res| AlterConfigsResourceResponse {
                    error_code: NOT_CONTROLLER,
                    error_message: message(),
                    resource_type: res.resource_type,
                    resource_name: res.resource_name.clone(),
                })
                .collect(),
            ..Default::default()
        }
        .into(),
        RequestBody::IncrementalAlterConfigs(r) => incremental::IncrementalAlterConfigsResponse {
            responses: r
                .resources
                .iter()
                .map(|res| incremental::AlterConfigsResourceResponse {
                    error_code: NOT_CONTROLLER,
                    error_message: message(),
                    resource_type: res.resource_type,
                    resource_name: res.resource_name.clone(),
                })
                .collect(),
            ..Default::default()
        }
        .into(),
        RequestBody::DescribeQuorum(_) => crate::controller::quorum_answer::error(
            ErrorCode::NotLeaderOrFollower,
            "this voter is not the quorum's leader",
        )
        .into(),
        other => {
            tracing::error!(api = other.api_key().name(), "not a controller API");
            UnregisterBrokerResponse { error_code: ErrorCode::InvalidRequest.code(), ..Default::default() }
                .into()
        }
    }
}

/// True if `response` says "not the active controller" (every result, for APIs with
/// per-item results), so the caller should retry elsewhere.
pub fn is_not_controller(response: &ResponseBody) -> bool {
    match response {
        ResponseBody::BrokerRegistration(r) => r.error_code == NOT_CONTROLLER,
        ResponseBody::BrokerHeartbeat(r) => r.error_code == NOT_CONTROLLER,
        ResponseBody::AlterPartition(r) => r.error_code == NOT_CONTROLLER,
        ResponseBody::AllocateProducerIds(r) => r.error_code == NOT_CONTROLLER,
        ResponseBody::UnregisterBroker(r) => r.error_code == NOT_CONTROLLER,
        ResponseBody::ElectLeaders(r) => r.error_code == NOT_CONTROLLER,
        ResponseBody::AlterPartitionReassignments(r) => r.error_code == NOT_CONTROLLER,
        ResponseBody::ListPartitionReassignments(r) => r.error_code == NOT_CONTROLLER,
        ResponseBody::DescribeQuorum(r) => crate::controller::quorum_answer::is_not_leader(r),
        ResponseBody::CreateTopics(r) => {
            !r.topics.is_empty() && r.topics.iter().all(|t| t.error_code == NOT_CONTROLLER)
        }
        ResponseBody::DeleteTopics(r) => {
            !r.responses.is_empty() && r.responses.iter().all(|t| t.error_code == NOT_CONTROLLER)
        }
        ResponseBody::CreatePartitions(r) => {
            !r.results.is_empty() && r.results.iter().all(|t| t.error_code == NOT_CONTROLLER)
        }
        ResponseBody::AlterConfigs(r) => {
            !r.responses.is_empty() && r.responses.iter().all(|t| t.error_code == NOT_CONTROLLER)
        }
        ResponseBody::IncrementalAlterConfigs(r) => {
            !r.responses.is_empty() && r.responses.iter().all(|t| t.error_code == NOT_CONTROLLER)
        }
        _ => false,
    }
}
