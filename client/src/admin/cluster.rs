//! The cluster, producers and transactions: DescribeCluster (falling back to Metadata),
//! DescribeProducers at the leaders, ListTransactions on every broker,
//! DescribeTransactions at the coordinators, and preferred / unclean leader election.

use super::{check_code, timeout_ms, wrong_api, Admin};
use crate::client::CoordinatorKind;
use crate::error::{Error, Result};
use crate::metadata::BrokerAddress;
use crate::types::TopicPartition;
use std::collections::BTreeMap;
use strata_protocol::messages::describe_cluster::DescribeClusterRequest;
use strata_protocol::messages::describe_producers::{DescribeProducersRequest, TopicRequest};
use strata_protocol::messages::describe_transactions::DescribeTransactionsRequest;
use strata_protocol::messages::elect_leaders::{self, ElectLeadersRequest, TopicPartitions};
use strata_protocol::messages::list_transactions::ListTransactionsRequest;
use strata_protocol::{ApiKey, ErrorCode, RequestBody, ResponseBody};

/// The cluster's id, controller and brokers.
///
/// ```no_run
/// # async fn demo(admin: strata_client::admin::Admin) -> Result<(), strata_client::Error> {
/// let c = admin.describe_cluster().await?;
/// println!("{:?}: controller {}, {} brokers", c.cluster_id, c.controller_id, c.brokers.len());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterDescription {
    /// The cluster id (`None` from brokers that send none).
    pub cluster_id: Option<String>,
    /// The controller's node id, -1 if unknown (with KRaft, a broker chosen to stand
    /// for it, as Kafka reports).
    pub controller_id: i32,
    /// Brokers by node id.
    pub brokers: Vec<BrokerAddress>,
}

/// An active producer of a partition (DescribeProducers, KIP-664).
///
/// ```no_run
/// # async fn demo(admin: strata_client::admin::Admin) -> Result<(), strata_client::Error> {
/// use strata_client::TopicPartition;
/// for (tp, producers) in admin.describe_producers(&[TopicPartition::new("orders", 0)]).await {
///     for p in producers? {
///         println!("{tp}: producer {} epoch {} open txn at {:?}", p.producer_id, p.producer_epoch, p.current_txn_start_offset);
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerState {
    /// Producer id.
    pub producer_id: i64,
    /// Its epoch.
    pub producer_epoch: i32,
    /// Last sequence number written (-1 if none).
    pub last_sequence: i32,
    /// Timestamp of its last write.
    pub last_timestamp: i64,
    /// The coordinator epoch of its last transaction marker.
    pub coordinator_epoch: i32,
    /// First offset of its open transaction, if one is open.
    pub current_txn_start_offset: Option<i64>,
}

/// A transaction as ListTransactions reports it.
///
/// ```no_run
/// # async fn demo(admin: strata_client::admin::Admin) -> Result<(), strata_client::Error> {
/// for t in admin.list_transactions().await? {
///     println!("{} (producer {}) is {}", t.transactional_id, t.producer_id, t.state);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionListing {
    /// `transactional.id`.
    pub transactional_id: String,
    /// Producer id.
    pub producer_id: i64,
    /// Ongoing, PrepareCommit, CompleteCommit, Empty, ...
    pub state: String,
    /// The coordinator's node id.
    pub coordinator: i32,
}

/// A transaction as DescribeTransactions reports it (KIP-664).
///
/// ```no_run
/// # async fn demo(admin: strata_client::admin::Admin) -> Result<(), strata_client::Error> {
/// let (_, t) = admin.describe_transactions(&["app-1".to_string()]).await.remove(0);
/// let t = t?;
/// println!("{} {} on {:?}", t.state, t.producer_id, t.partitions);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionDescription {
    /// `transactional.id`.
    pub transactional_id: String,
    /// Ongoing, PrepareCommit, CompleteCommit, Empty, ...
    pub state: String,
    /// `transaction.timeout.ms`.
    pub timeout_ms: i32,
    /// When the open transaction began (-1 if none).
    pub start_time_ms: i64,
    /// Producer id.
    pub producer_id: i64,
    /// Producer epoch.
    pub producer_epoch: i16,
    /// Partitions in the open transaction.
    pub partitions: Vec<TopicPartition>,
    /// The coordinator's node id.
    pub coordinator: i32,
}

/// Which replica an election may choose.
///
/// ```
/// use strata_client::admin::ElectionType;
/// assert_eq!(ElectionType::Preferred as i8, 0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElectionType {
    /// The first replica of the assignment, if it is in the ISR.
    Preferred = elect_leaders::ELECTION_TYPE_PREFERRED as isize,
    /// Any live replica when no in-sync one is (may lose records).
    Unclean = elect_leaders::ELECTION_TYPE_UNCLEAN as isize,
}

type TpKey = TopicPartition;

fn tp_of(k: &TpKey) -> (&str, i32) {
    (&k.topic, k.partition)
}

impl Admin {
    /// The cluster id, controller and brokers (DescribeCluster, KIP-700; Metadata from
    /// brokers without it).
    pub async fn describe_cluster(&self) -> Result<ClusterDescription> {
        let request =
            DescribeClusterRequest { include_cluster_authorized_operations: false, endpoint_type: 1 };
        match self.client.call_any(RequestBody::DescribeCluster(request)).await {
            Ok(ResponseBody::DescribeCluster(r)) => {
                check_code(r.error_code, r.error_message.as_deref())?;
                Ok(ClusterDescription {
                    cluster_id: Some(r.cluster_id).filter(|c| !c.is_empty()),
                    controller_id: r.controller_id,
                    brokers: r
                        .brokers
                        .into_iter()
                        .map(|b| BrokerAddress { id: b.broker_id, host: b.host, port: b.port, rack: b.rack })
                        .collect(),
                })
            }
            Ok(_) => Err(wrong_api(ApiKey::DescribeCluster)),
            Err(Error::UnsupportedVersion { .. }) => {
                let cluster = self.client.refresh_metadata(&[]).await?;
                Ok(ClusterDescription {
                    cluster_id: cluster.cluster_id.clone(),
                    controller_id: cluster.controller_id,
                    brokers: cluster.brokers.values().cloned().collect(),
                })
            }
            Err(e) => Err(e),
        }
    }

    /// The active producers of `partitions` (DescribeProducers, to the leaders), one
    /// result per partition, in request order.
    pub async fn describe_producers(
        &self,
        partitions: &[TopicPartition],
    ) -> Vec<(TopicPartition, Result<Vec<ProducerState>>)> {
        let keys = partitions.to_vec();
        let results = self
            .per_item(keys.clone(), &[ErrorCode::UnknownTopicOrPartition], |pending| {
                self.leader_round(
                    pending,
                    tp_of,
                    |group| {
                        let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
                        for tp in group {
                            topics.entry(&tp.topic).or_default().push(tp.partition);
                        }
                        RequestBody::DescribeProducers(DescribeProducersRequest {
                            topics: topics
                                .into_iter()
                                .map(|(name, partition_indexes)| TopicRequest {
                                    name: name.to_string(),
                                    partition_indexes,
                                })
                                .collect(),
                        })
                    },
                    split_describe_producers,
                )
            })
            .await;
        super::topics::in_order(keys, results)
    }

    /// Every transaction the coordinators know (ListTransactions, to every broker).
    pub async fn list_transactions(&self) -> Result<Vec<TransactionListing>> {
        let request = ListTransactionsRequest::default();
        let answers = self
            .call_every_broker(RequestBody::ListTransactions(request), |body| match body {
                ResponseBody::ListTransactions(r) => {
                    check_code(r.error_code, None)?;
                    Ok(r.transaction_states)
                }
                _ => Err(wrong_api(ApiKey::ListTransactions)),
            })
            .await?;
        let mut out = Vec::new();
        for (broker, answer) in answers {
            for t in answer? {
                out.push(TransactionListing {
                    transactional_id: t.transactional_id,
                    producer_id: t.producer_id,
                    state: t.transaction_state,
                    coordinator: broker,
                });
            }
        }
        out.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
        Ok(out)
    }

    /// Describes transactions (DescribeTransactions, one request per coordinator); one
    /// result per id, in request order, TRANSACTIONAL_ID_NOT_FOUND for an unknown one.
    pub async fn describe_transactions(
        &self,
        ids: &[String],
    ) -> Vec<(String, Result<TransactionDescription>)> {
        let keys = ids.to_vec();
        let results = self
            .per_item(keys.clone(), &[], |pending| {
                self.coordinator_round(
                    CoordinatorKind::Transaction,
                    pending,
                    |ids| {
                        RequestBody::DescribeTransactions(DescribeTransactionsRequest {
                            transactional_ids: ids.to_vec(),
                        })
                    },
                    split_transactions,
                )
            })
            .await;
        super::topics::in_order(keys, results)
            .into_iter()
            .map(|(k, r)| (k, r.map(|(coordinator, t)| TransactionDescription { coordinator, ..t })))
            .collect()
    }

    /// Elects leaders (ElectLeaders, KIP-460, to the controller) of `partitions`, or of
    /// every partition when `None`. One result per partition; ELECTION_NOT_NEEDED where
    /// the chosen replica already leads.
    pub async fn elect_leaders(
        &self,
        election: ElectionType,
        partitions: Option<&[TopicPartition]>,
    ) -> Result<Vec<(TopicPartition, Result<()>)>> {
        let topic_partitions = partitions.map(|ps| {
            let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
            for tp in ps {
                topics.entry(&tp.topic).or_default().push(tp.partition);
            }
            topics
                .into_iter()
                .map(|(topic, partitions)| TopicPartitions { topic: topic.to_string(), partitions })
                .collect()
        });
        let request = ElectLeadersRequest {
            election_type: election as i8,
            topic_partitions,
            timeout_ms: timeout_ms(&self.client),
        };
        let client = self.client.clone();
        self.call_retrying(
            || client.controller(),
            RequestBody::ElectLeaders(request),
            |body| {
                let ResponseBody::ElectLeaders(r) = body else {
                    return Err(wrong_api(ApiKey::ElectLeaders));
                };
                check_code(r.error_code, None)?;
                Ok(r.replica_election_results
                    .into_iter()
                    .flat_map(|t| {
                        let topic = t.topic;
                        t.partition_result.into_iter().map(move |p| {
                            (
                                TopicPartition::new(topic.clone(), p.partition_id),
                                check_code(p.error_code, p.error_message.as_deref()),
                            )
                        })
                    })
                    .collect())
            },
        )
        .await
    }
}

fn split_transactions(
    body: ResponseBody,
    asked: &[String],
) -> Result<Vec<(String, Result<TransactionDescription>)>> {
    let ResponseBody::DescribeTransactions(r) = body else {
        return Err(wrong_api(ApiKey::DescribeTransactions));
    };
    Ok(r.transaction_states
        .into_iter()
        .filter(|t| asked.contains(&t.transactional_id))
        .map(|t| {
            let described = check_code(t.error_code, None).map(|_| TransactionDescription {
                transactional_id: t.transactional_id.clone(),
                state: t.transaction_state,
                timeout_ms: t.transaction_timeout_ms,
                start_time_ms: t.transaction_start_time_ms,
                producer_id: t.producer_id,
                producer_epoch: t.producer_epoch,
                partitions: t
                    .topics
                    .into_iter()
                    .flat_map(|d| {
                        let topic = d.topic;
                        d.partitions.into_iter().map(move |p| TopicPartition::new(topic.clone(), p))
                    })
                    .collect(),
                coordinator: -1,
            });
            (t.transactional_id, described)
        })
        .collect())
}

fn split_describe_producers(
    body: ResponseBody,
    asked: &[TpKey],
) -> Result<Vec<(TpKey, Result<Vec<ProducerState>>)>> {
    let ResponseBody::DescribeProducers(r) = body else {
        return Err(wrong_api(ApiKey::DescribeProducers));
    };
    let mut out = Vec::new();
    for t in r.topics {
        for p in t.partitions {
            let Some(key) = asked.iter().find(|tp| tp.topic == t.name && tp.partition == p.partition_index)
            else {
                continue;
            };
            let states = check_code(p.error_code, p.error_message.as_deref()).map(|_| {
                p.active_producers
                    .into_iter()
                    .map(|s| ProducerState {
                        producer_id: s.producer_id,
                        producer_epoch: s.producer_epoch,
                        last_sequence: s.last_sequence,
                        last_timestamp: s.last_timestamp,
                        coordinator_epoch: s.coordinator_epoch,
                        current_txn_start_offset: (s.current_txn_start_offset >= 0)
                            .then_some(s.current_txn_start_offset),
                    })
                    .collect()
            });
            out.push((key.clone(), states));
        }
    }
    Ok(out)
}
