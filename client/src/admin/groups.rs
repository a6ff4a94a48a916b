//! Consumer groups: list, describe, delete, and their committed offsets.

use super::topics::in_order;
use super::{check_code, wrong_api, Admin};
use crate::client::CoordinatorKind;
use crate::consumer_protocol::{Assignment, PROTOCOL_TYPE};
use crate::error::{Error, Result};
use crate::types::{OffsetAndMetadata, TopicPartition};
use std::collections::BTreeMap;
use strata_protocol::messages::delete_groups::DeleteGroupsRequest;
use strata_protocol::messages::describe_groups::{DescribeGroupsRequest, DescribedGroup};
use strata_protocol::messages::list_groups::ListGroupsRequest;
use strata_protocol::messages::offset_commit::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use strata_protocol::messages::offset_delete::{
    OffsetDeleteRequest, OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use strata_protocol::messages::offset_fetch::{
    OffsetFetchRequest, OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
    OffsetFetchResponse,
};
use strata_protocol::{ApiKey, ErrorCode, RequestBody, ResponseBody};

/// A group as ListGroups reports it.
///
/// ```no_run
/// # async fn demo(admin: strata_client::admin::Admin) -> Result<(), strata_client::Error> {
/// for g in admin.list_groups().await? {
///     println!("{} ({}) on broker {}: {:?}", g.group_id, g.protocol_type, g.coordinator, g.state);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupListing {
    /// Group id.
    pub group_id: String,
    /// `consumer` for consumer groups, "" for groups that only commit offsets.
    pub protocol_type: String,
    /// The group's state (ListGroups v4+, KIP-518), `None` from older brokers.
    pub state: Option<String>,
    /// The node id of the broker that coordinates it.
    pub coordinator: i32,
}

/// One member of a group.
///
/// ```no_run
/// # async fn demo(admin: strata_client::admin::Admin) -> Result<(), strata_client::Error> {
/// let (_, group) = admin.describe_groups(&["g".to_string()]).await.remove(0);
/// for m in group?.members {
///     println!("{} {} {}: {:?}", m.member_id, m.client_id, m.client_host, m.assignment);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberDescription {
    /// Member id given by the coordinator.
    pub member_id: String,
    /// `group.instance.id` of a static member.
    pub group_instance_id: Option<String>,
    /// The member's `client.id`.
    pub client_id: String,
    /// Where it connects from.
    pub client_host: String,
    /// Its assigned partitions, decoded from the consumer protocol (empty for groups of
    /// another protocol type, or before the group is stable).
    pub assignment: Vec<TopicPartition>,
}

/// A group as DescribeGroups reports it.
///
/// ```no_run
/// # async fn demo(admin: strata_client::admin::Admin) -> Result<(), strata_client::Error> {
/// let (_, group) = admin.describe_groups(&["g".to_string()]).await.remove(0);
/// let group = group?;
/// println!("{} is {} with {} members", group.group_id, group.state, group.members.len());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    /// Group id.
    pub group_id: String,
    /// Empty, PreparingRebalance, CompletingRebalance, Stable or Dead (a group that
    /// does not exist).
    pub state: String,
    /// `consumer` for consumer groups.
    pub protocol_type: String,
    /// The chosen protocol (for consumers, the assignor: `range`, `cooperative-sticky`).
    pub protocol: String,
    /// Node id of its coordinator.
    pub coordinator: i32,
    /// Members.
    pub members: Vec<MemberDescription>,
}

impl Admin {
    /// Every group of every broker (ListGroups to each broker, as each lists only the
    /// groups it coordinates). Fails if a broker cannot be asked.
    pub async fn list_groups(&self) -> Result<Vec<GroupListing>> {
        let request = ListGroupsRequest::default();
        let answers = self
            .call_every_broker(RequestBody::ListGroups(request), |body| match body {
                ResponseBody::ListGroups(r) => {
                    check_code(r.error_code, None)?;
                    Ok(r.groups)
                }
                _ => Err(wrong_api(ApiKey::ListGroups)),
            })
            .await?;
        let mut groups = Vec::new();
        for (broker, answer) in answers {
            for g in answer? {
                groups.push(GroupListing {
                    group_id: g.group_id,
                    protocol_type: g.protocol_type,
                    state: (!g.group_state.is_empty()).then_some(g.group_state),
                    coordinator: broker,
                });
            }
        }
        groups.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        groups.dedup_by(|a, b| a.group_id == b.group_id);
        Ok(groups)
    }

    /// Describes `groups` (DescribeGroups, one request per coordinator), with the
    /// members' assignments decoded. One result per group, in request order; a group
    /// that does not exist is described as `Dead` with no members, as Kafka does.
    pub async fn describe_groups(&self, groups: &[String]) -> Vec<(String, Result<GroupDescription>)> {
        let keys = groups.to_vec();
        let results = self
            .per_item(keys.clone(), &[], |pending| {
                self.coordinator_round(CoordinatorKind::Group, pending, describe_request, split_described)
            })
            .await;
        in_order(keys, results).into_iter().map(|(k, r)| (k, r.map(|(id, g)| description(g, id)))).collect()
    }

    /// Deletes `groups` with their committed offsets (DeleteGroups, one request per
    /// coordinator); NON_EMPTY_GROUP for a group with members, GROUP_ID_NOT_FOUND for one
    /// that does not exist.
    pub async fn delete_groups(&self, groups: &[String]) -> Vec<(String, Result<()>)> {
        let keys = groups.to_vec();
        let results = self
            .per_item(keys.clone(), &[], |pending| {
                self.coordinator_round(CoordinatorKind::Group, pending, delete_request, split_deleted)
            })
            .await;
        in_order(keys, results).into_iter().map(|(k, r)| (k, r.map(|_| ()))).collect()
    }

    /// The group's committed offsets (OffsetFetch, to its coordinator): of `partitions`,
    /// or all the group has when `None`. Partitions without a commit are left out.
    pub async fn list_group_offsets(
        &self,
        group: &str,
        partitions: Option<&[TopicPartition]>,
    ) -> Result<BTreeMap<TopicPartition, OffsetAndMetadata>> {
        let (_, conn) = self.client.coordinator(CoordinatorKind::Group, group).await?;
        let version = conn.version(ApiKey::OffsetFetch)?;
        let by_topic = partitions.map(group_by_topic);
        let request = if version >= 8 {
            OffsetFetchRequest {
                groups: vec![OffsetFetchRequestGroup {
                    group_id: group.to_string(),
                    member_id: None,
                    member_epoch: -1,
                    topics: by_topic.as_ref().map(|m| {
                        m.iter()
                            .map(|(t, ps)| OffsetFetchRequestTopics {
                                name: t.clone(),
                                partition_indexes: ps.clone(),
                            })
                            .collect()
                    }),
                }],
                require_stable: true,
                ..Default::default()
            }
        } else {
            OffsetFetchRequest {
                group_id: group.to_string(),
                topics: by_topic.as_ref().map(|m| {
                    m.iter()
                        .map(|(t, ps)| OffsetFetchRequestTopic {
                            name: t.clone(),
                            partition_indexes: ps.clone(),
                        })
                        .collect()
                }),
                require_stable: true,
                ..Default::default()
            }
        };
        self.call_coordinator(CoordinatorKind::Group, group, RequestBody::OffsetFetch(request), |body| {
            let ResponseBody::OffsetFetch(r) = body else {
                return Err(wrong_api(ApiKey::OffsetFetch));
            };
            committed_offsets(r)
        })
        .await
    }

    /// Sets the group's committed offsets (OffsetCommit with generation -1 and no member,
    /// as Kafka's tool does): only for a group without active members, else the
    /// coordinator answers UNKNOWN_MEMBER_ID. One result per partition.
    pub async fn alter_group_offsets(
        &self,
        group: &str,
        offsets: &BTreeMap<TopicPartition, OffsetAndMetadata>,
    ) -> Result<Vec<(TopicPartition, Result<()>)>> {
        let mut topics: BTreeMap<&str, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
        for (tp, o) in offsets {
            topics.entry(&tp.topic).or_default().push(OffsetCommitRequestPartition {
                partition_index: tp.partition,
                committed_offset: o.offset,
                committed_leader_epoch: o.leader_epoch.unwrap_or(-1),
                commit_timestamp: -1,
                committed_metadata: Some(o.metadata.clone()),
            });
        }
        let request = OffsetCommitRequest {
            group_id: group.to_string(),
            generation_id_or_member_epoch: -1,
            member_id: String::new(),
            group_instance_id: None,
            retention_time_ms: -1,
            topics: topics
                .into_iter()
                .map(|(name, partitions)| OffsetCommitRequestTopic { name: name.to_string(), partitions })
                .collect(),
        };
        self.call_coordinator(CoordinatorKind::Group, group, RequestBody::OffsetCommit(request), |body| {
            let ResponseBody::OffsetCommit(r) = body else {
                return Err(wrong_api(ApiKey::OffsetCommit));
            };
            let mut results = Vec::new();
            for t in r.topics {
                for p in t.partitions {
                    let result = check_code(p.error_code, None);
                    // The coordinator moved or is loading: the whole request goes again.
                    if let Err(e) = &result {
                        if e.code().is_some_and(coordinator_moved) {
                            return Err(e.clone());
                        }
                    }
                    results.push((TopicPartition::new(t.name.clone(), p.partition_index), result));
                }
            }
            Ok(results)
        })
        .await
    }

    /// Deletes the group's committed offsets of `partitions` (OffsetDelete, KIP-496);
    /// GROUP_SUBSCRIBED_TO_TOPIC for a topic its live members consume. One result per
    /// partition; a group-level error (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP) fails all.
    pub async fn delete_group_offsets(
        &self,
        group: &str,
        partitions: &[TopicPartition],
    ) -> Result<Vec<(TopicPartition, Result<()>)>> {
        let request = OffsetDeleteRequest {
            group_id: group.to_string(),
            topics: group_by_topic(partitions)
                .into_iter()
                .map(|(name, ps)| OffsetDeleteRequestTopic {
                    name,
                    partitions: ps
                        .into_iter()
                        .map(|partition_index| OffsetDeleteRequestPartition { partition_index })
                        .collect(),
                })
                .collect(),
        };
        self.call_coordinator(CoordinatorKind::Group, group, RequestBody::OffsetDelete(request), |body| {
            let ResponseBody::OffsetDelete(r) = body else {
                return Err(wrong_api(ApiKey::OffsetDelete));
            };
            check_code(r.error_code, None)?;
            Ok(r.topics
                .into_iter()
                .flat_map(|t| {
                    let name = t.name;
                    t.partitions.into_iter().map(move |p| {
                        (TopicPartition::new(name.clone(), p.partition_index), check_code(p.error_code, None))
                    })
                })
                .collect())
        })
        .await
    }
}

fn describe_request(groups: &[String]) -> RequestBody {
    RequestBody::DescribeGroups(DescribeGroupsRequest {
        groups: groups.to_vec(),
        include_authorized_operations: false,
    })
}

fn split_described(body: ResponseBody, asked: &[String]) -> Result<Vec<(String, Result<DescribedGroup>)>> {
    let ResponseBody::DescribeGroups(r) = body else {
        return Err(wrong_api(ApiKey::DescribeGroups));
    };
    Ok(r.groups
        .into_iter()
        .filter(|g| asked.contains(&g.group_id))
        .map(|g| (g.group_id.clone(), check_code(g.error_code, None).map(|_| g)))
        .collect())
}

fn delete_request(groups: &[String]) -> RequestBody {
    RequestBody::DeleteGroups(DeleteGroupsRequest { groups_names: groups.to_vec() })
}

fn split_deleted(body: ResponseBody, asked: &[String]) -> Result<Vec<(String, Result<()>)>> {
    let ResponseBody::DeleteGroups(r) = body else {
        return Err(wrong_api(ApiKey::DeleteGroups));
    };
    Ok(r.results
        .into_iter()
        .filter(|g| asked.contains(&g.group_id))
        .map(|g| (g.group_id, check_code(g.error_code, None)))
        .collect())
}

/// Codes after which a coordinator request is sent again, to the coordinator found anew.
fn coordinator_moved(code: ErrorCode) -> bool {
    crate::error::refreshes_coordinator(code) || code == ErrorCode::CoordinatorLoadInProgress
}

fn group_by_topic(partitions: &[TopicPartition]) -> BTreeMap<String, Vec<i32>> {
    let mut m: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    for tp in partitions {
        m.entry(tp.topic.clone()).or_default().push(tp.partition);
    }
    m
}

/// The offsets of an OffsetFetch answer of either shape (v8+ per group, older flat).
fn committed_offsets(r: OffsetFetchResponse) -> Result<BTreeMap<TopicPartition, OffsetAndMetadata>> {
    let mut offsets = BTreeMap::new();
    let mut add =
        |topic: &str, partition: i32, offset: i64, epoch: i32, metadata: Option<String>, code: i16| {
            check_code(code, None)?;
            if offset >= 0 {
                offsets.insert(
                    TopicPartition::new(topic, partition),
                    OffsetAndMetadata {
                        offset,
                        metadata: metadata.unwrap_or_default(),
                        leader_epoch: (epoch >= 0).then_some(epoch),
                    },
                );
            }
            Ok::<(), Error>(())
        };
    if let Some(g) = r.groups.into_iter().next() {
        check_code(g.error_code, None)?;
        for t in g.topics {
            for p in t.partitions {
                add(
                    &t.name,
                    p.partition_index,
                    p.committed_offset,
                    p.committed_leader_epoch,
                    p.metadata,
                    p.error_code,
                )?;
            }
        }
    } else {
        check_code(r.error_code, None)?;
        for t in r.topics {
            for p in t.partitions {
                add(
                    &t.name,
                    p.partition_index,
                    p.committed_offset,
                    p.committed_leader_epoch,
                    p.metadata,
                    p.error_code,
                )?;
            }
        }
    }
    Ok(offsets)
}

fn description(g: DescribedGroup, coordinator: i32) -> GroupDescription {
    let consumer = g.protocol_type == PROTOCOL_TYPE;
    GroupDescription {
        members: g
            .members
            .into_iter()
            .map(|m| MemberDescription {
                assignment: if consumer { decode_assignment(&m.member_assignment) } else { Vec::new() },
                member_id: m.member_id,
                group_instance_id: m.group_instance_id,
                client_id: m.client_id,
                client_host: m.client_host,
            })
            .collect(),
        group_id: g.group_id,
        state: g.group_state,
        protocol_type: g.protocol_type,
        protocol: g.protocol_data,
        coordinator,
    }
}

/// A member's assigned partitions; undecodable bytes (another client's bug) show as none.
fn decode_assignment(bytes: &bytes::Bytes) -> Vec<TopicPartition> {
    match Assignment::decode(bytes) {
        Ok((_, a)) => a
            .assigned_partitions
            .into_iter()
            .flat_map(|tp| {
                let topic = tp.topic;
                tp.partitions.into_iter().map(move |p| TopicPartition::new(topic.clone(), p))
            })
            .collect(),
        Err(e) => {
            tracing::debug!(error = %e, "a member's assignment does not decode");
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consumer_protocol::TopicPartitions;
    use strata_protocol::messages::describe_groups::DescribedGroupMember;
    use strata_protocol::messages::offset_fetch::{
        OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
        OffsetFetchResponseTopic, OffsetFetchResponseTopics,
    };

    #[test]
    fn consumer_assignments_are_decoded_and_other_protocols_left_alone() {
        let assignment = Assignment {
            assigned_partitions: vec![TopicPartitions { topic: "t".into(), partitions: vec![0, 2] }],
            user_data: None,
        };
        let group = |protocol_type: &str| DescribedGroup {
            group_id: "g".into(),
            group_state: "Stable".into(),
            protocol_type: protocol_type.into(),
            protocol_data: "range".into(),
            members: vec![DescribedGroupMember {
                member_id: "m".into(),
                member_assignment: assignment.encode(1),
                ..Default::default()
            }],
            ..Default::default()
        };
        let d = description(group("consumer"), 3);
        assert_eq!(d.members[0].assignment, vec![TopicPartition::new("t", 0), TopicPartition::new("t", 2)]);
        assert_eq!((d.coordinator, d.protocol.as_str()), (3, "range"));
        assert!(description(group("connect"), 3).members[0].assignment.is_empty());
    }

    #[test]
    fn offset_fetch_answers_of_both_shapes_give_the_committed_offsets() {
        let old = OffsetFetchResponse {
            topics: vec![OffsetFetchResponseTopic {
                name: "t".into(),
                partitions: vec![
                    OffsetFetchResponsePartition {
                        partition_index: 0,
                        committed_offset: 5,
                        ..Default::default()
                    },
                    OffsetFetchResponsePartition {
                        partition_index: 1,
                        committed_offset: -1,
                        ..Default::default()
                    },
                ],
            }],
            ..Default::default()
        };
        let offsets = committed_offsets(old).expect("offsets");
        assert_eq!(offsets.len(), 1, "no commit, no entry");
        assert_eq!(offsets[&TopicPartition::new("t", 0)].offset, 5);
        let new = OffsetFetchResponse {
            groups: vec![OffsetFetchResponseGroup {
                group_id: "g".into(),
                topics: vec![OffsetFetchResponseTopics {
                    name: "t".into(),
                    partitions: vec![OffsetFetchResponsePartitions {
                        partition_index: 2,
                        committed_offset: 9,
                        committed_leader_epoch: 4,
                        ..Default::default()
                    }],
                }],
                error_code: 0,
            }],
            ..Default::default()
        };
        let offsets = committed_offsets(new).expect("offsets");
        assert_eq!(offsets[&TopicPartition::new("t", 2)].leader_epoch, Some(4));
        let failed = OffsetFetchResponse {
            groups: vec![OffsetFetchResponseGroup { error_code: 16, ..Default::default() }],
            ..Default::default()
        };
        assert_eq!(committed_offsets(failed).unwrap_err().code(), Some(ErrorCode::NotCoordinator));
    }
}
