//! Partition offsets: look them up (ListOffsets) and delete records before one
//! (DeleteRecords), both at the partitions' leaders.

use super::topics::in_order;
use super::{check_code, timeout_ms, wrong_api, Admin};
use crate::error::Result;
use crate::types::{IsolationLevel, TopicPartition};
use std::collections::BTreeMap;
use strata_protocol::messages::delete_records::{
    DeleteRecordsPartition, DeleteRecordsRequest, DeleteRecordsTopic,
};
use strata_protocol::messages::list_offsets::{ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic};
use strata_protocol::{ApiKey, ErrorCode, RequestBody, ResponseBody};

/// Which offset of a partition to look up.
///
/// ```
/// use strata_client::admin::OffsetSpec;
/// assert_eq!(OffsetSpec::Latest.timestamp(), -1);
/// assert_eq!(OffsetSpec::Timestamp(1_700_000_000_000).timestamp(), 1_700_000_000_000);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetSpec {
    /// The log start offset.
    Earliest,
    /// The offset the next record gets (high watermark, or the last stable offset
    /// under read_committed).
    Latest,
    /// The record with the largest timestamp (ListOffsets v7+, KIP-734).
    MaxTimestamp,
    /// The first record whose timestamp is at least this (ms since the epoch).
    Timestamp(i64),
}

impl OffsetSpec {
    /// The wire value: a timestamp, or Kafka's negative sentinels.
    pub fn timestamp(self) -> i64 {
        match self {
            OffsetSpec::Earliest => -2,
            OffsetSpec::Latest => -1,
            OffsetSpec::MaxTimestamp => -3,
            OffsetSpec::Timestamp(ts) => ts,
        }
    }
}

/// A ListOffsets answer for one partition.
///
/// ```no_run
/// # async fn demo(admin: strata_client::admin::Admin) -> Result<(), strata_client::Error> {
/// use strata_client::admin::OffsetSpec;
/// use strata_client::{IsolationLevel, TopicPartition};
/// let asked = [(TopicPartition::new("orders", 0), OffsetSpec::Latest)];
/// for (tp, listed) in admin.list_offsets(&asked, IsolationLevel::ReadUncommitted).await {
///     println!("{tp}: {}", listed?.offset);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListedOffset {
    /// The offset; -1 when no record matches a timestamp.
    pub offset: i64,
    /// The record's timestamp (-1 for Earliest / Latest).
    pub timestamp: i64,
    /// The leader epoch of the record, if the broker said.
    pub leader_epoch: Option<i32>,
}

type OffsetKey = (TopicPartition, OffsetSpec);

fn offset_key_tp(k: &OffsetKey) -> (&str, i32) {
    (&k.0.topic, k.0.partition)
}

fn tp_key(k: &(TopicPartition, i64)) -> (&str, i32) {
    (&k.0.topic, k.0.partition)
}

impl Admin {
    /// Looks up offsets (ListOffsets, to each partition's leader, one request per
    /// broker). One result per partition, in request order.
    pub async fn list_offsets(
        &self,
        partitions: &[(TopicPartition, OffsetSpec)],
        isolation: IsolationLevel,
    ) -> Vec<(TopicPartition, Result<ListedOffset>)> {
        let keys = partitions.to_vec();
        // A request names each partition once (Kafka refuses duplicates): several specs
        // for one partition go in successive layers.
        let mut results = Vec::with_capacity(keys.len());
        for layer in layers(&keys) {
            results.extend(self.list_offsets_once(layer, isolation).await);
        }
        in_order(keys, results).into_iter().map(|((tp, _), r)| (tp, r)).collect()
    }

    /// [`Admin::list_offsets`] of items that name each partition once.
    async fn list_offsets_once(
        &self,
        keys: Vec<OffsetKey>,
        isolation: IsolationLevel,
    ) -> Vec<(OffsetKey, Result<ListedOffset>)> {
        self.per_item(keys.clone(), &[ErrorCode::UnknownTopicOrPartition], |pending| {
            self.leader_round(
                pending,
                offset_key_tp,
                move |group| {
                    let mut topics: BTreeMap<&str, Vec<ListOffsetsPartition>> = BTreeMap::new();
                    for (tp, spec) in group {
                        topics.entry(&tp.topic).or_default().push(ListOffsetsPartition {
                            partition_index: tp.partition,
                            current_leader_epoch: -1,
                            timestamp: spec.timestamp(),
                            max_num_offsets: 1,
                        });
                    }
                    RequestBody::ListOffsets(ListOffsetsRequest {
                        replica_id: -1,
                        isolation_level: isolation.as_i8(),
                        topics: topics
                            .into_iter()
                            .map(|(name, partitions)| ListOffsetsTopic { name: name.to_string(), partitions })
                            .collect(),
                        timeout_ms: 0,
                    })
                },
                split_list_offsets,
            )
        })
        .await
    }

    /// Deletes the records of each partition before the given offset (DeleteRecords, to
    /// the leaders; -1 means up to the high watermark); the result is the new log start
    /// offset (low watermark). OFFSET_OUT_OF_RANGE for an offset past the high watermark.
    pub async fn delete_records(
        &self,
        before: &BTreeMap<TopicPartition, i64>,
    ) -> Vec<(TopicPartition, Result<i64>)> {
        let keys: Vec<(TopicPartition, i64)> = before.iter().map(|(tp, o)| (tp.clone(), *o)).collect();
        let timeout = timeout_ms(&self.client);
        let results = self
            .per_item(keys.clone(), &[ErrorCode::UnknownTopicOrPartition], |pending| {
                self.leader_round(
                    pending,
                    tp_key,
                    move |group| {
                        let mut topics: BTreeMap<&str, Vec<DeleteRecordsPartition>> = BTreeMap::new();
                        for (tp, offset) in group {
                            topics.entry(&tp.topic).or_default().push(DeleteRecordsPartition {
                                partition_index: tp.partition,
                                offset: *offset,
                            });
                        }
                        RequestBody::DeleteRecords(DeleteRecordsRequest {
                            topics: topics
                                .into_iter()
                                .map(|(name, partitions)| DeleteRecordsTopic {
                                    name: name.to_string(),
                                    partitions,
                                })
                                .collect(),
                            timeout_ms: timeout,
                        })
                    },
                    split_delete_records,
                )
            })
            .await;
        in_order(keys, results).into_iter().map(|((tp, _), r)| (tp, r)).collect()
    }
}

/// `keys` split so that no partition appears twice in a layer, order kept within each.
fn layers(keys: &[OffsetKey]) -> Vec<Vec<OffsetKey>> {
    let mut layers: Vec<Vec<OffsetKey>> = Vec::new();
    for key in keys {
        match layers.iter_mut().find(|l| !l.iter().any(|(tp, _)| *tp == key.0)) {
            Some(layer) => layer.push(key.clone()),
            None => layers.push(vec![key.clone()]),
        }
    }
    layers
}

fn split_list_offsets(
    body: ResponseBody,
    asked: &[OffsetKey],
) -> Result<Vec<(OffsetKey, Result<ListedOffset>)>> {
    let ResponseBody::ListOffsets(r) = body else {
        return Err(wrong_api(ApiKey::ListOffsets));
    };
    let mut out = Vec::new();
    for t in r.topics {
        for p in t.partitions {
            let Some(key) =
                asked.iter().find(|(tp, _)| tp.topic == t.name && tp.partition == p.partition_index)
            else {
                continue;
            };
            let listed = check_code(p.error_code, None).map(|_| ListedOffset {
                offset: if p.offset >= 0 {
                    p.offset
                } else {
                    p.old_style_offsets.first().copied().unwrap_or(-1)
                },
                timestamp: p.timestamp,
                leader_epoch: (p.leader_epoch >= 0).then_some(p.leader_epoch),
            });
            out.push((key.clone(), listed));
        }
    }
    Ok(out)
}

fn split_delete_records(
    body: ResponseBody,
    asked: &[(TopicPartition, i64)],
) -> Result<super::PerItem<(TopicPartition, i64), i64>> {
    let ResponseBody::DeleteRecords(r) = body else {
        return Err(wrong_api(ApiKey::DeleteRecords));
    };
    let mut out = Vec::new();
    for t in r.topics {
        for p in t.partitions {
            let Some(key) =
                asked.iter().find(|(tp, _)| tp.topic == t.name && tp.partition == p.partition_index)
            else {
                continue;
            };
            out.push((key.clone(), check_code(p.error_code, None).map(|_| p.low_watermark)));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_protocol::messages::list_offsets::{
        ListOffsetsPartitionResponse, ListOffsetsResponse, ListOffsetsTopicResponse,
    };

    #[test]
    fn a_partition_asked_twice_goes_in_separate_requests() {
        let a = TopicPartition::new("t", 0);
        let b = TopicPartition::new("t", 1);
        let keys = [
            (a.clone(), OffsetSpec::Earliest),
            (b.clone(), OffsetSpec::Latest),
            (a.clone(), OffsetSpec::Latest),
            (a.clone(), OffsetSpec::MaxTimestamp),
        ];
        let l = layers(&keys);
        assert_eq!(l.len(), 3);
        assert_eq!(l[0], vec![keys[0].clone(), keys[1].clone()]);
        assert_eq!(l[1], vec![keys[2].clone()]);
        assert_eq!(l[2], vec![keys[3].clone()]);
    }

    #[test]
    fn answers_are_matched_to_what_was_asked_with_errors_per_partition() {
        let asked = vec![
            (TopicPartition::new("t", 0), OffsetSpec::Latest),
            (TopicPartition::new("t", 1), OffsetSpec::Earliest),
        ];
        let response = ListOffsetsResponse {
            topics: vec![ListOffsetsTopicResponse {
                name: "t".into(),
                partitions: vec![
                    ListOffsetsPartitionResponse {
                        partition_index: 0,
                        offset: 7,
                        leader_epoch: 2,
                        ..Default::default()
                    },
                    ListOffsetsPartitionResponse { partition_index: 1, error_code: 6, ..Default::default() },
                    ListOffsetsPartitionResponse { partition_index: 9, offset: 1, ..Default::default() },
                ],
            }],
            ..Default::default()
        };
        let out = split_list_offsets(ResponseBody::ListOffsets(response), &asked).expect("split");
        assert_eq!(out.len(), 2, "an unasked partition is ignored");
        assert_eq!(out[0].1.as_ref().expect("listed").offset, 7);
        assert_eq!(out[0].1.as_ref().expect("listed").leader_epoch, Some(2));
        let e = out[1].1.as_ref().expect_err("per-partition error");
        assert!(e.is_retriable() && e.code() == Some(ErrorCode::NotLeaderOrFollower));
    }
}
