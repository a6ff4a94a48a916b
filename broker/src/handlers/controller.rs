//! The controller listener's dispatch table: Raft RPCs between voters (StrataRaft,
//! Strata's own), the metadata log for broker-only nodes (StrataMetadataFetch, Strata's
//! own), and the broker-to-controller APIs Kafka's controllers serve (BrokerRegistration,
//! BrokerHeartbeat, AlterPartition, AllocateProducerIds, and the admin requests brokers
//! forward: CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs,
//! IncrementalAlterConfigs, ElectLeaders, AlterPartitionReassignments,
//! ListPartitionReassignments, UnregisterBroker), plus DescribeQuorum.
//!
//! Strata's own APIs are listed in this listener's ApiVersions only; client listeners
//! never advertise or serve them.

use super::{api_versions, Outcome, Served};
use crate::controller::service::ControllerService;
use crate::node::Node;
use bytes::Bytes;
use std::sync::Arc;
use std::time::Duration;
use strata_protocol::messages::strata_metadata_fetch::{
    StrataMetadataFetchRequest, StrataMetadataFetchResponse,
};
use strata_protocol::messages::strata_raft::StrataRaftResponse;
use strata_protocol::{encode_response, ApiKey, ErrorCode, Request, RequestBody, ResponseBody};

/// Everything the controller listener serves.
pub const SERVED: &[Served] = &[
    Served { api: ApiKey::ApiVersions, min: 0, max: 3 },
    Served { api: ApiKey::BrokerRegistration, min: 0, max: 4 },
    Served { api: ApiKey::BrokerHeartbeat, min: 0, max: 1 },
    Served { api: ApiKey::AlterPartition, min: 0, max: 3 },
    Served { api: ApiKey::AllocateProducerIds, min: 0, max: 0 },
    Served { api: ApiKey::UnregisterBroker, min: 0, max: 0 },
    Served { api: ApiKey::CreateTopics, min: 2, max: 7 },
    Served { api: ApiKey::DeleteTopics, min: 1, max: 6 },
    Served { api: ApiKey::CreatePartitions, min: 0, max: 3 },
    Served { api: ApiKey::AlterConfigs, min: 0, max: 2 },
    Served { api: ApiKey::IncrementalAlterConfigs, min: 0, max: 1 },
    Served { api: ApiKey::ElectLeaders, min: 0, max: 2 },
    Served { api: ApiKey::AlterPartitionReassignments, min: 0, max: 1 },
    Served { api: ApiKey::ListPartitionReassignments, min: 0, max: 0 },
    Served { api: ApiKey::DescribeQuorum, min: 0, max: 2 },
    Served { api: ApiKey::StrataRaft, min: 0, max: 0 },
    Served { api: ApiKey::StrataMetadataFetch, min: 0, max: 0 },
];

/// Longest a StrataMetadataFetch may wait for news.
const MAX_METADATA_WAIT: Duration = Duration::from_secs(5);

/// Handles one request on the controller listener.
pub async fn dispatch(node: &Arc<Node>, request: Request) -> Outcome {
    let Request { header, api, body } = request;
    let version = header.api_version;
    let Some(range) = SERVED.iter().find(|s| s.api == api) else {
        tracing::info!(api = api.name(), "closing controller connection: API not served here");
        return Outcome::Close;
    };
    if version < range.min || version > range.max {
        if api == ApiKey::ApiVersions {
            let body = api_versions::unsupported(SERVED, version);
            return Outcome::Respond(encode_response(header.correlation_id, 0, &body.into()));
        }
        return Outcome::Close;
    }
    let Some(service) = node.controller_channel().local().cloned() else {
        tracing::info!("closing controller connection: the controller is still starting");
        return Outcome::Close;
    };
    let response: ResponseBody = match body {
        RequestBody::ApiVersions(r) => api_versions::handle(SERVED, version, r).into(),
        RequestBody::StrataRaft(r) => match service.quorum().serve_rpc(r.kind, r.payload).await {
            Ok(payload) => StrataRaftResponse { error_code: 0, payload }.into(),
            Err(e) => {
                tracing::debug!(error = %e, "Raft RPC refused");
                let error_code = crate::errors::raft_serve_error_code(&e).code();
                StrataRaftResponse { error_code, payload: Bytes::new() }.into()
            }
        },
        RequestBody::StrataMetadataFetch(r) => metadata_fetch(&service, r).await.into(),
        body => service.call(body, version).await,
    };
    Outcome::Respond(encode_response(header.correlation_id, version, &response))
}

/// Answers a broker-only node with the metadata image once it is past `from_index`
/// (waiting up to `max_wait_ms` for that), as a snapshot of the whole image.
async fn metadata_fetch(
    service: &ControllerService,
    r: StrataMetadataFetchRequest,
) -> StrataMetadataFetchResponse {
    let wait = Duration::from_millis(r.max_wait_ms.max(0) as u64).min(MAX_METADATA_WAIT);
    let from = r.from_index;
    let image = service.cache().wait_for(wait, |i| i.applied_index as i64 > from).await;
    let leader_id = service.leader().unwrap_or(-1);
    if image.applied_index as i64 <= from {
        return StrataMetadataFetchResponse { leader_id, applied_index: from, ..Default::default() };
    }
    match serde_json::to_vec(&image.to_snapshot()) {
        Ok(json) => StrataMetadataFetchResponse {
            error_code: 0,
            leader_id,
            applied_index: image.applied_index as i64,
            snapshot: Some(Bytes::from(json)),
            records: None,
        },
        Err(e) => {
            tracing::error!(error = %e, "cannot encode the metadata image");
            StrataMetadataFetchResponse {
                error_code: ErrorCode::UnknownServerError.code(),
                leader_id,
                ..Default::default()
            }
        }
    }
}
