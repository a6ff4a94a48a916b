//! The active controller's handling of each controller API: decide with
//! [`ControllerState`](super::ControllerState), write, answer.

use super::answers::not_controller;
use super::Task;
use crate::clock::now_ms;
use crate::controller::brokers::{Heartbeat, Registration};
use crate::controller::isr::{AlterIsr, IsrChange, IsrOutcome};
use crate::controller::leaders::ElectionType;
use crate::controller::reassign::ReassignRequest;
use crate::metadata::{Endpoint, MetadataImage, MetadataRecord};
use std::sync::Arc;
use strata_protocol::codec::Uuid;
use strata_protocol::messages::{
    allocate_producer_ids::AllocateProducerIdsResponse,
    alter_configs::{AlterConfigsResourceResponse, AlterConfigsResponse},
    alter_partition::{
        AlterPartitionRequest, AlterPartitionResponse, PartitionDataResponse, TopicDataResponse,
    },
    alter_partition_reassignments::{
        AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
        ReassignablePartitionResponse, ReassignableTopicResponse,
    },
    broker_heartbeat::BrokerHeartbeatResponse,
    broker_registration::{BrokerRegistrationRequest, BrokerRegistrationResponse},
    delete_topics::DeleteTopicsResponse,
    elect_leaders::{ElectLeadersRequest, ElectLeadersResponse, PartitionResult, ReplicaElectionResult},
    incremental_alter_configs as incremental,
    list_partition_reassignments::{
        ListPartitionReassignmentsResponse, OngoingPartitionReassignment, OngoingTopicReassignment,
    },
    unregister_broker::UnregisterBrokerResponse,
};
use strata_protocol::{ErrorCode, RequestBody, ResponseBody};

impl Task {
    /// Handles one request as the active controller.
    pub(super) async fn handle(&mut self, body: RequestBody, version: i16) -> ResponseBody {
        let image = self.cache.current();
        let now = now_ms();
        match body {
            RequestBody::BrokerRegistration(r) => self.register(r).await.into(),
            RequestBody::BrokerHeartbeat(r) => self.heartbeat(r, &image, now).await,
            RequestBody::AlterPartition(r) => self.alter_partition(r, version).await.into(),
            RequestBody::AllocateProducerIds(r) => self.allocate_producer_ids(r, &image).await,
            RequestBody::CreateTopics(r) => {
                let (records, response) = self.state.create_topics(&image, &r);
                self.written(records, response.into(), RequestBody::CreateTopics(r)).await
            }
            RequestBody::DeleteTopics(r) => self.delete_topics(r, &image, version).await,
            RequestBody::CreatePartitions(r) => {
                let (records, response) = self.state.create_partitions(&image, &r);
                self.written(records, response.into(), RequestBody::CreatePartitions(r)).await
            }
            RequestBody::AlterConfigs(r) => self.alter_configs(r, &image).await,
            RequestBody::IncrementalAlterConfigs(r) => self.incremental_alter_configs(r, &image).await,
            RequestBody::ElectLeaders(r) => self.elect_leaders(r, version).await.into(),
            RequestBody::AlterPartitionReassignments(r) => self.alter_reassignments(r).await.into(),
            RequestBody::ListPartitionReassignments(r) => self.list_reassignments(r, &image).await,
            RequestBody::UnregisterBroker(r) => self.unregister_broker(r, &image).await,
            other => {
                tracing::warn!(api = other.api_key().name(), "not a controller API");
                not_controller(&other)
            }
        }
    }

    /// BrokerHeartbeat: the session, fencing and controlled shutdown of a broker.
    async fn heartbeat(
        &mut self,
        r: strata_protocol::messages::broker_heartbeat::BrokerHeartbeatRequest,
        image: &Arc<MetadataImage>,
        now: i64,
    ) -> ResponseBody {
        let hb = Heartbeat {
            node_id: r.broker_id,
            broker_epoch: r.broker_epoch,
            current_metadata_offset: r.current_metadata_offset,
            want_fence: r.want_fence,
            want_shut_down: r.want_shut_down,
        };
        let (records, reply) = self.state.heartbeat(image, &hb, now);
        let begins_shutdown =
            records.iter().any(|r| matches!(r, MetadataRecord::BeginControlledShutdown { .. }));
        if !records.is_empty() {
            match self.write(records).await {
                Ok((index, _)) if begins_shutdown => self.state.shutdown_written(hb.node_id, index),
                Ok(_) => {}
                Err(_) => return not_controller(&RequestBody::BrokerHeartbeat(r)),
            }
        }
        BrokerHeartbeatResponse {
            error_code: reply.error.map_or(0, |e| e.code()),
            is_caught_up: reply.is_caught_up,
            is_fenced: reply.is_fenced,
            should_shut_down: reply.should_shut_down,
            ..Default::default()
        }
        .into()
    }

    /// AllocateProducerIds: the next block, recorded before it is handed out.
    async fn allocate_producer_ids(
        &mut self,
        r: strata_protocol::messages::allocate_producer_ids::AllocateProducerIdsRequest,
        image: &Arc<MetadataImage>,
    ) -> ResponseBody {
        match self.state.allocate_producer_ids(image, r.broker_id, r.broker_epoch) {
            Err(code) => AllocateProducerIdsResponse { error_code: code.code(), ..Default::default() }.into(),
            Ok((record, block)) => match self.write(vec![record]).await {
                Ok(_) => AllocateProducerIdsResponse {
                    producer_id_start: block.first,
                    producer_id_len: block.len,
                    ..Default::default()
                }
                .into(),
                Err(_) => not_controller(&RequestBody::AllocateProducerIds(r)),
            },
        }
    }

    /// DeleteTopics, by name (below v6) or by name or id.
    async fn delete_topics(
        &mut self,
        r: strata_protocol::messages::delete_topics::DeleteTopicsRequest,
        image: &Arc<MetadataImage>,
        version: i16,
    ) -> ResponseBody {
        let wanted: Vec<(Option<String>, Uuid)> = if version >= 6 {
            r.topics.iter().map(|t| (t.name.clone(), t.topic_id)).collect()
        } else {
            r.topic_names.iter().map(|n| (Some(n.clone()), Uuid::ZERO)).collect()
        };
        let (records, responses) = self.state.delete_topics(image, &wanted);
        let response = DeleteTopicsResponse { responses, ..Default::default() };
        self.written(records, response.into(), RequestBody::DeleteTopics(r)).await
    }

    /// AlterConfigs: every resource's configs replaced.
    async fn alter_configs(
        &mut self,
        r: strata_protocol::messages::alter_configs::AlterConfigsRequest,
        image: &Arc<MetadataImage>,
    ) -> ResponseBody {
        let (records, outcomes) = self.state.alter_configs(image, &r.resources, r.validate_only);
        let resources = r.resources.iter().map(|res| (res.resource_type, &res.resource_name));
        let responses =
            per_resource(resources, outcomes, |error_code, error_message, resource_type, resource_name| {
                AlterConfigsResourceResponse { error_code, error_message, resource_type, resource_name }
            });
        let response = AlterConfigsResponse { responses, ..Default::default() };
        self.written(records, response.into(), RequestBody::AlterConfigs(r)).await
    }

    /// IncrementalAlterConfigs: set, delete, append or subtract per key.
    async fn incremental_alter_configs(
        &mut self,
        r: incremental::IncrementalAlterConfigsRequest,
        image: &Arc<MetadataImage>,
    ) -> ResponseBody {
        let (records, outcomes) = self.state.incremental_alter_configs(image, &r.resources, r.validate_only);
        let resources = r.resources.iter().map(|res| (res.resource_type, &res.resource_name));
        let responses =
            per_resource(resources, outcomes, |error_code, error_message, resource_type, resource_name| {
                incremental::AlterConfigsResourceResponse {
                    error_code,
                    error_message,
                    resource_type,
                    resource_name,
                }
            });
        let response = incremental::IncrementalAlterConfigsResponse { responses, ..Default::default() };
        self.written(records, response.into(), RequestBody::IncrementalAlterConfigs(r)).await
    }

    /// ListPartitionReassignments: the reassignments in progress.
    async fn list_reassignments(
        &mut self,
        r: strata_protocol::messages::list_partition_reassignments::ListPartitionReassignmentsRequest,
        image: &Arc<MetadataImage>,
    ) -> ResponseBody {
        let wanted: Option<Vec<(String, Vec<i32>)>> = r
            .topics
            .as_ref()
            .map(|ts| ts.iter().map(|t| (t.name.clone(), t.partition_indexes.clone())).collect());
        let topics = self
            .state
            .list_reassignments(image, wanted.as_deref())
            .into_iter()
            .map(|(name, partitions)| OngoingTopicReassignment {
                name,
                partitions: partitions
                    .into_iter()
                    .map(|p| OngoingPartitionReassignment {
                        partition_index: p.partition,
                        replicas: p.replicas,
                        adding_replicas: p.adding_replicas,
                        removing_replicas: p.removing_replicas,
                    })
                    .collect(),
            })
            .collect();
        ListPartitionReassignmentsResponse { error_message: None, topics, ..Default::default() }.into()
    }

    /// UnregisterBroker: fences the broker and removes its registration.
    async fn unregister_broker(
        &mut self,
        r: strata_protocol::messages::unregister_broker::UnregisterBrokerRequest,
        image: &Arc<MetadataImage>,
    ) -> ResponseBody {
        let Some(b) = image.broker(r.broker_id) else {
            return UnregisterBrokerResponse {
                error_code: ErrorCode::BrokerIdNotRegistered.code(),
                error_message: Some(format!("broker {} is not registered", r.broker_id)),
                ..Default::default()
            }
            .into();
        };
        let mut records = vec![MetadataRecord::FenceBroker { node_id: b.node_id, broker_epoch: b.epoch }];
        records.push(MetadataRecord::UnregisterBroker { node_id: b.node_id, broker_epoch: b.epoch });
        let response = UnregisterBrokerResponse { error_message: None, ..Default::default() };
        self.written(records, response.into(), RequestBody::UnregisterBroker(r)).await
    }

    /// Writes `records` (if any) and answers `response`, or NOT_CONTROLLER if the write
    /// failed.
    async fn written(
        &mut self,
        records: Vec<MetadataRecord>,
        response: ResponseBody,
        request: RequestBody,
    ) -> ResponseBody {
        if records.is_empty() {
            return response;
        }
        match self.write(records).await {
            Ok(_) => response,
            Err(_) => not_controller(&request),
        }
    }

    async fn register(&mut self, r: BrokerRegistrationRequest) -> BrokerRegistrationResponse {
        let image = self.cache.current();
        let registration = Registration {
            node_id: r.broker_id,
            cluster_id: (!r.cluster_id.is_empty()).then(|| r.cluster_id.clone()),
            incarnation_id: String::from(crate::metadata::TopicId(r.incarnation_id)),
            endpoints: r
                .listeners
                .iter()
                .map(|l| Endpoint { listener: l.name.clone(), host: l.host.clone(), port: l.port })
                .collect(),
            rack: r.rack.clone().filter(|s| !s.is_empty()),
        };
        let records = match self.state.register(&image, &registration, now_ms()) {
            Ok(records) => records,
            Err((code, message)) => {
                tracing::info!(node_id = r.broker_id, error = code.name(), %message, "broker registration refused");
                return BrokerRegistrationResponse { error_code: code.code(), ..Default::default() };
            }
        };
        match self.write(records).await {
            Ok((_, outcome)) => {
                let epoch = outcome.broker_epoch.unwrap_or(-1);
                self.state.registered(r.broker_id, epoch, now_ms());
                tracing::info!(node_id = r.broker_id, broker_epoch = epoch, "broker registered");
                BrokerRegistrationResponse { broker_epoch: epoch, ..Default::default() }
            }
            Err(_) => BrokerRegistrationResponse {
                error_code: ErrorCode::NotController.code(),
                ..Default::default()
            },
        }
    }

    async fn alter_partition(&mut self, r: AlterPartitionRequest, version: i16) -> AlterPartitionResponse {
        let image = self.cache.current();
        let mut changes = Vec::new();
        for t in &r.topics {
            let topic_id = if version >= 2 {
                t.topic_id
            } else {
                image.topic(&t.topic_name).map_or(Uuid::ZERO, |x| x.uuid())
            };
            for p in &t.partitions {
                let new_isr = if version >= 3 {
                    p.new_isr_with_epochs.iter().map(|b| (b.broker_id, b.broker_epoch)).collect()
                } else {
                    p.new_isr.iter().map(|&b| (b, -1)).collect()
                };
                changes.push(IsrChange {
                    topic_id,
                    partition: p.partition_index,
                    leader_epoch: p.leader_epoch,
                    partition_epoch: p.partition_epoch,
                    new_isr,
                });
            }
        }
        let request = AlterIsr { broker_id: r.broker_id, broker_epoch: r.broker_epoch, changes, version };
        let (records, outcomes) = match self.state.alter_partition(&image, &request) {
            Ok(x) => x,
            Err(code) => return AlterPartitionResponse { error_code: code.code(), ..Default::default() },
        };
        if !records.is_empty() && self.write(records).await.is_err() {
            return AlterPartitionResponse {
                error_code: ErrorCode::NotController.code(),
                ..Default::default()
            };
        }
        let mut outcomes = outcomes.into_iter();
        let topics = r
            .topics
            .iter()
            .map(|t| TopicDataResponse {
                topic_name: t.topic_name.clone(),
                topic_id: t.topic_id,
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| match outcomes.next() {
                        Some(IsrOutcome::Done(state)) => PartitionDataResponse {
                            partition_index: p.partition_index,
                            error_code: 0,
                            leader_id: state.leader,
                            leader_epoch: state.leader_epoch,
                            isr: state.isr,
                            leader_recovery_state: 0,
                            partition_epoch: state.partition_epoch,
                        },
                        Some(IsrOutcome::Refused(code)) => PartitionDataResponse {
                            partition_index: p.partition_index,
                            error_code: code.code(),
                            ..Default::default()
                        },
                        None => PartitionDataResponse {
                            partition_index: p.partition_index,
                            error_code: ErrorCode::UnknownServerError.code(),
                            ..Default::default()
                        },
                    })
                    .collect(),
            })
            .collect();
        AlterPartitionResponse { topics, ..Default::default() }
    }

    async fn alter_reassignments(
        &mut self,
        r: AlterPartitionReassignmentsRequest,
    ) -> AlterPartitionReassignmentsResponse {
        let image = self.cache.current();
        let changes: Vec<ReassignRequest> = r
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(|p| ReassignRequest {
                    topic: t.name.clone(),
                    partition: p.partition_index,
                    target: p.replicas.clone(),
                })
            })
            .collect();
        let (records, outcomes) =
            self.state.alter_reassignments(&image, &changes, r.allow_replication_factor_change);
        if !records.is_empty() && self.write(records).await.is_err() {
            return AlterPartitionReassignmentsResponse {
                error_code: ErrorCode::NotController.code(),
                error_message: Some("this node is not the active controller".into()),
                allow_replication_factor_change: r.allow_replication_factor_change,
                ..Default::default()
            };
        }
        let mut outcomes = outcomes.into_iter();
        let responses = r
            .topics
            .iter()
            .map(|t| ReassignableTopicResponse {
                name: t.name.clone(),
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| {
                        let (error_code, error_message) = match outcomes.next() {
                            Some(o) => split(o),
                            None => (ErrorCode::UnknownServerError.code(), None),
                        };
                        ReassignablePartitionResponse {
                            partition_index: p.partition_index,
                            error_code,
                            error_message,
                        }
                    })
                    .collect(),
            })
            .collect();
        AlterPartitionReassignmentsResponse {
            allow_replication_factor_change: r.allow_replication_factor_change,
            error_message: None,
            responses,
            ..Default::default()
        }
    }

    async fn elect_leaders(&mut self, r: ElectLeadersRequest, version: i16) -> ElectLeadersResponse {
        let image = self.cache.current();
        let kind = if version >= 1 && r.election_type == 1 {
            ElectionType::Unclean
        } else {
            ElectionType::Preferred
        };
        let targets: Option<Vec<(String, i32)>> = r.topic_partitions.as_ref().map(|tps| {
            tps.iter().flat_map(|t| t.partitions.iter().map(move |&p| (t.topic.clone(), p))).collect()
        });
        let (records, results) = self.state.elect_leaders(&image, kind, targets.as_deref());
        if !records.is_empty() && self.write(records).await.is_err() {
            return ElectLeadersResponse {
                error_code: ErrorCode::NotController.code(),
                ..Default::default()
            };
        }
        let mut by_topic: Vec<ReplicaElectionResult> = Vec::new();
        for res in results {
            let entry = PartitionResult {
                partition_id: res.partition,
                error_code: res.error.code(),
                error_message: res.message,
            };
            match by_topic.iter_mut().find(|t| t.topic == res.topic) {
                Some(t) => t.partition_result.push(entry),
                None => {
                    by_topic.push(ReplicaElectionResult { topic: res.topic, partition_result: vec![entry] })
                }
            }
        }
        ElectLeadersResponse { replica_election_results: by_topic, ..Default::default() }
    }
}

fn split(outcome: Result<(), (ErrorCode, String)>) -> (i16, Option<String>) {
    match outcome {
        Ok(()) => (0, None),
        Err((code, message)) => (code.code(), Some(message)),
    }
}

/// One answer per config resource, in request order: `answer(error code, message, resource
/// type, resource name)` for each resource and its outcome (AlterConfigs and
/// IncrementalAlterConfigs answer alike in types of their own).
fn per_resource<'a, T>(
    resources: impl Iterator<Item = (i8, &'a String)>,
    outcomes: Vec<Result<(), (ErrorCode, String)>>,
    answer: impl Fn(i16, Option<String>, i8, String) -> T,
) -> Vec<T> {
    resources
        .zip(outcomes)
        .map(|((resource_type, name), outcome)| {
            let (error_code, error_message) = split(outcome);
            answer(error_code, error_message, resource_type, name.clone())
        })
        .collect()
}
