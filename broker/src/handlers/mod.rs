//! Request handlers: one file per API, and the one dispatch table from API key to
//! handler. The ApiVersions answer is built from [`SERVED`], so what is advertised is
//! exactly what is served.

mod admin_configs;
mod api_versions;
pub mod context;
pub mod controller;
mod create_partitions;
mod create_topics;
mod delete_records;
mod delete_topics;
mod describe_cluster;
mod describe_log_dirs;
mod describe_quorum;
mod elect_leaders;
mod fetch;
mod find_coordinator;
pub mod forward;
mod groups;
mod init_producer_id;
mod leader_discovery;
mod list_offsets;
mod metadata;
mod offset_for_leader_epoch;
mod partition_reassignments;
mod produce;
mod transactions;

use crate::broker::Broker;
use context::RequestContext;
use std::sync::Arc;
use strata_protocol::codec::Chunk;
use strata_protocol::{encode_response, ApiKey, Request, RequestBody, RequestHeader, ResponseBody};

/// An API served by this broker with the versions its handler implements.
#[derive(Debug, Clone, Copy)]
pub struct Served {
    /// The API.
    pub api: ApiKey,
    /// Lowest version advertised.
    pub min: i16,
    /// Highest version advertised.
    pub max: i16,
}

/// Every API this broker serves, with its advertised version range. A version range
/// here must be implemented by the handler and decodable by the codec (checked in a
/// test below).
pub const SERVED: &[Served] = &[
    // Produce v0-2 are advertised (older librdkafka disables compression otherwise) but
    // answered with UNSUPPORTED_VERSION, as Kafka 4 does (KIP-896).
    Served { api: ApiKey::Produce, min: 0, max: 10 },
    Served { api: ApiKey::Fetch, min: 4, max: 16 },
    Served { api: ApiKey::ListOffsets, min: 0, max: 10 },
    Served { api: ApiKey::OffsetForLeaderEpoch, min: 0, max: 4 },
    Served { api: ApiKey::Metadata, min: 0, max: 12 },
    Served { api: ApiKey::ApiVersions, min: 0, max: 3 },
    Served { api: ApiKey::CreateTopics, min: 2, max: 7 },
    Served { api: ApiKey::DeleteTopics, min: 1, max: 6 },
    Served { api: ApiKey::DeleteRecords, min: 0, max: 2 },
    Served { api: ApiKey::DescribeConfigs, min: 1, max: 4 },
    // v0 was removed in Kafka 4 (KIP-896).
    Served { api: ApiKey::DescribeLogDirs, min: 1, max: 5 },
    Served { api: ApiKey::AlterConfigs, min: 0, max: 2 },
    Served { api: ApiKey::CreatePartitions, min: 0, max: 3 },
    Served { api: ApiKey::IncrementalAlterConfigs, min: 0, max: 1 },
    Served { api: ApiKey::DescribeCluster, min: 0, max: 1 },
    Served { api: ApiKey::DescribeQuorum, min: 0, max: 2 },
    Served { api: ApiKey::ElectLeaders, min: 0, max: 2 },
    Served { api: ApiKey::AlterPartitionReassignments, min: 0, max: 1 },
    Served { api: ApiKey::ListPartitionReassignments, min: 0, max: 0 },
    Served { api: ApiKey::InitProducerId, min: 0, max: 6 },
    Served { api: ApiKey::FindCoordinator, min: 0, max: 4 },
    Served { api: ApiKey::JoinGroup, min: 0, max: 9 },
    Served { api: ApiKey::SyncGroup, min: 0, max: 5 },
    Served { api: ApiKey::Heartbeat, min: 0, max: 4 },
    Served { api: ApiKey::LeaveGroup, min: 0, max: 5 },
    Served { api: ApiKey::OffsetCommit, min: 0, max: 9 },
    Served { api: ApiKey::OffsetFetch, min: 1, max: 9 },
    Served { api: ApiKey::ListGroups, min: 0, max: 5 },
    Served { api: ApiKey::DescribeGroups, min: 0, max: 5 },
    Served { api: ApiKey::DeleteGroups, min: 0, max: 2 },
    Served { api: ApiKey::OffsetDelete, min: 0, max: 0 },
    // v4-5 (batched, `verify_only`) are what brokers send each other (KIP-890).
    Served { api: ApiKey::AddPartitionsToTxn, min: 0, max: 5 },
    Served { api: ApiKey::AddOffsetsToTxn, min: 0, max: 3 },
    Served { api: ApiKey::EndTxn, min: 0, max: 3 },
    Served { api: ApiKey::WriteTxnMarkers, min: 0, max: 1 },
    Served { api: ApiKey::DescribeProducers, min: 0, max: 0 },
    Served { api: ApiKey::DescribeTransactions, min: 0, max: 0 },
    Served { api: ApiKey::ListTransactions, min: 0, max: 1 },
    Served { api: ApiKey::TxnOffsetCommit, min: 0, max: 3 },
];

/// The served range of `api`, if served.
pub fn served(api: ApiKey) -> Option<Served> {
    SERVED.iter().copied().find(|s| s.api == api)
}

/// What the connection does after a request.
pub enum Outcome {
    /// Send this response frame.
    Respond(Vec<Chunk>),
    /// Send this response once the future completes; later responses of the connection
    /// wait behind it, so responses keep their request order.
    Later(std::pin::Pin<Box<dyn std::future::Future<Output = Vec<Chunk>> + Send>>),
    /// Send nothing (Produce with acks=0).
    NoResponse,
    /// Close the connection (protocol misuse).
    Close,
}

/// The answer to a request whose version the codec cannot decode: ApiVersions gets a
/// v0-encoded UNSUPPORTED_VERSION with the full API list (KIP-511) so the client can
/// retry at a version both know; anything else closes the connection.
pub fn unsupported_version(header: &RequestHeader) -> Option<Vec<Chunk>> {
    if header.api_key != ApiKey::ApiVersions as i16 {
        return None;
    }
    let body = api_versions::unsupported(SERVED, header.api_version);
    Some(encode_response(header.correlation_id, 0, &body.into()))
}

/// Handles one decoded request of a client listener: the one table from API to handler
/// (one arm per API, hence the length).
pub async fn dispatch(broker: &Arc<Broker>, request: Request, ctx: &RequestContext) -> Outcome {
    let Request { header, api, body } = request;
    let version = header.api_version;
    let Some(range) = served(api) else {
        tracing::info!(peer = %ctx.peer, api = api.name(), "closing connection: API not served");
        return Outcome::Close;
    };
    if version < range.min || version > range.max {
        return match unsupported_version(&header) {
            Some(chunks) => Outcome::Respond(chunks),
            None => {
                tracing::info!(peer = %ctx.peer, api = api.name(), version, "closing connection: version not served");
                Outcome::Close
            }
        };
    }
    let response: ResponseBody = match body {
        RequestBody::ApiVersions(r) => api_versions::handle(SERVED, version, r).into(),
        RequestBody::Metadata(r) => {
            metadata::handle(broker.node(), &broker.groups, &broker.transactions, version, r, ctx)
                .await
                .into()
        }
        RequestBody::Produce(r) => {
            match produce::handle(broker.node(), &broker.transactions, version, r, &ctx.listener).await {
                produce::Reply::Respond(resp) => resp.into(),
                produce::Reply::Later(wait) => {
                    let correlation_id = header.correlation_id;
                    return Outcome::Later(Box::pin(async move {
                        encode_response(correlation_id, version, &wait.await.into())
                    }));
                }
                produce::Reply::Nothing => return Outcome::NoResponse,
                produce::Reply::Close => return Outcome::Close,
            }
        }
        RequestBody::Fetch(r) => {
            fetch::handle(broker.node(), &broker.isr_changes, version, r, &ctx.listener).await.into()
        }
        RequestBody::ListOffsets(r) => list_offsets::handle(broker, version, r).into(),
        RequestBody::OffsetForLeaderEpoch(r) => offset_for_leader_epoch::handle(broker, r).into(),
        RequestBody::CreateTopics(r) => create_topics::handle(broker.node(), version, r).await.into(),
        RequestBody::DeleteTopics(r) => delete_topics::handle(broker, version, r).await.into(),
        RequestBody::CreatePartitions(r) => create_partitions::handle(broker.node(), r).await.into(),
        RequestBody::DeleteRecords(r) => delete_records::handle(broker, r).await.into(),
        RequestBody::DescribeLogDirs(r) => describe_log_dirs::handle(broker, r).into(),
        RequestBody::DescribeConfigs(r) => admin_configs::describe(broker, version, r).into(),
        RequestBody::AlterConfigs(r) => admin_configs::alter(broker, r).await.into(),
        RequestBody::IncrementalAlterConfigs(r) => admin_configs::incremental_alter(broker, r).await.into(),
        RequestBody::DescribeCluster(r) => describe_cluster::handle(broker, r, ctx).into(),
        RequestBody::DescribeQuorum(r) => describe_quorum::handle(broker, r).await.into(),
        RequestBody::ElectLeaders(r) => elect_leaders::handle(broker, r).await.into(),
        RequestBody::AlterPartitionReassignments(r) => partition_reassignments::alter(broker, r).await.into(),
        RequestBody::ListPartitionReassignments(r) => partition_reassignments::list(broker, r).await.into(),
        RequestBody::InitProducerId(r) if r.transactional_id.as_deref().is_none_or(str::is_empty) => {
            init_producer_id::handle(broker, r).await.into()
        }
        body @ (RequestBody::InitProducerId(_)
        | RequestBody::AddPartitionsToTxn(_)
        | RequestBody::AddOffsetsToTxn(_)
        | RequestBody::EndTxn(_)
        | RequestBody::DescribeTransactions(_)
        | RequestBody::ListTransactions(_)) => {
            match transactions::coordinator(&broker.transactions, version, body).await {
                Some(response) => response,
                None => return Outcome::Close,
            }
        }
        RequestBody::WriteTxnMarkers(r) => {
            transactions::write_txn_markers(broker.node(), &broker.groups, r).await.into()
        }
        RequestBody::DescribeProducers(r) => transactions::describe_producers(broker, r).into(),
        RequestBody::FindCoordinator(r) => {
            find_coordinator::handle(broker, &broker.groups, &broker.transactions, version, r, ctx)
                .await
                .into()
        }
        body @ (RequestBody::JoinGroup(_)
        | RequestBody::SyncGroup(_)
        | RequestBody::Heartbeat(_)
        | RequestBody::LeaveGroup(_)
        | RequestBody::OffsetCommit(_)
        | RequestBody::OffsetFetch(_)
        | RequestBody::DescribeGroups(_)
        | RequestBody::ListGroups(_)
        | RequestBody::DeleteGroups(_)
        | RequestBody::OffsetDelete(_)
        | RequestBody::TxnOffsetCommit(_)) => {
            match groups::handle(broker, &broker.groups, &broker.transactions, &header, ctx.peer, body).await
            {
                Some(response) => response,
                None => return Outcome::Close,
            }
        }
        other => {
            tracing::info!(peer = %ctx.peer, api = other.api_key().name(), "closing connection: API not served");
            return Outcome::Close;
        }
    };
    Outcome::Respond(encode_response(header.correlation_id, version, &response))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_served_range_is_decodable() {
        for s in SERVED.iter().chain(controller::SERVED) {
            let (lo, hi) = s.api.codec_versions();
            assert!(
                lo <= s.min && s.max <= hi,
                "{:?} serves {}-{} but codec decodes {lo}-{hi}",
                s.api,
                s.min,
                s.max
            );
        }
    }

    #[test]
    fn client_listeners_never_advertise_strata_private_apis() {
        assert!(SERVED.iter().all(|s| !s.api.is_strata_private()));
    }
}
