//! One scrape: reads the counters, the hosted partitions, the metadata image, the group
//! coordinator and the controller quorum, and encodes them in the Prometheus text
//! format (0.0.4) with prometheus-client.

use super::{BrokerMetrics, TopicMetrics};
use crate::broker::Broker;
use crate::controller::raft::{MetadataQuorum, QuorumRole};
use crate::coordinator::group::GroupsSnapshot;
use crate::coordinator::txn::{TxnCoordinatorSnapshot, TxnState};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use std::fmt::Error as FmtError;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use strata_protocol::ApiKey;

/// How long a scrape waits for the group coordinator before leaving groups out.
const GROUPS_TIMEOUT: Duration = Duration::from_secs(2);

/// The exposition of `broker`'s metrics (and of `quorum`, on a controller).
pub async fn render(broker: &Arc<Broker>, quorum: Option<&Arc<MetadataQuorum>>) -> String {
    // A controller-only node runs no coordinator worth reporting.
    let (groups, transactions) = if broker.config.cluster.broker {
        let groups = tokio::time::timeout(GROUPS_TIMEOUT, broker.groups.snapshot()).await.ok().flatten();
        let transactions =
            tokio::time::timeout(GROUPS_TIMEOUT, broker.transactions.snapshot()).await.ok().flatten();
        (groups, transactions)
    } else {
        (None, None)
    };
    let scrape = Scrape { broker: broker.clone(), quorum: quorum.cloned(), groups, transactions };
    let mut registry = Registry::default();
    registry.register_collector(Box::new(scrape));
    let mut out = String::with_capacity(16 * 1024);
    if let Err(e) = prometheus_client::encoding::prometheus_text::encode(&mut out, &registry) {
        tracing::warn!(error = %e, "encoding metrics failed");
    }
    out
}

/// Everything one scrape reads, gathered before encoding.
#[derive(Debug)]
struct Scrape {
    broker: Arc<Broker>,
    quorum: Option<Arc<MetadataQuorum>>,
    groups: Option<GroupsSnapshot>,
    transactions: Option<TxnCoordinatorSnapshot>,
}

impl Collector for Scrape {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), FmtError> {
        self.topic_counters(&mut enc)?;
        self.requests(&mut enc)?;
        self.logs(&mut enc)?;
        self.replicas(&mut enc)?;
        self.groups(&mut enc)?;
        self.transactions(&mut enc)?;
        self.controller(&mut enc)?;
        self.cleaner(&mut enc)?;
        Ok(())
    }
}

/// A counter family: (labels, value) samples.
fn counters<L: EncodeLabelSet>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    samples: impl IntoIterator<Item = (L, u64)>,
) -> Result<(), FmtError> {
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, v) in samples {
        m.encode_family(&labels)?.encode_counter::<NoLabelSet, u64, u64>(&v, None)?;
    }
    Ok(())
}

/// A gauge family: (labels, value) samples.
fn gauges<L: EncodeLabelSet>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    samples: impl IntoIterator<Item = (L, i64)>,
) -> Result<(), FmtError> {
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, v) in samples {
        m.encode_family(&labels)?.encode_gauge(&v)?;
    }
    Ok(())
}

/// No labels.
const NONE: [(&str, &str); 0] = [];

fn counter(enc: &mut DescriptorEncoder, name: &str, help: &str, v: u64) -> Result<(), FmtError> {
    counters(enc, name, help, [(NONE, v)])
}

fn gauge(enc: &mut DescriptorEncoder, name: &str, help: &str, v: i64) -> Result<(), FmtError> {
    gauges(enc, name, help, [(NONE, v)])
}

type TopicCounter = fn(&TopicMetrics) -> &AtomicU64;

/// `BrokerTopicMetrics` rates, per topic and broker-wide (no `topic` label), as the
/// JMX exporter's `...PerSec` → `_total` rule names them.
const TOPIC_COUNTERS: &[(&str, &str, TopicCounter)] = &[
    ("kafka_server_brokertopicmetrics_bytesin", "Bytes appended by producers.", |m| &m.bytes_in),
    ("kafka_server_brokertopicmetrics_messagesin", "Records appended by producers.", |m| &m.messages_in),
    ("kafka_server_brokertopicmetrics_bytesout", "Record bytes sent to consumers.", |m| &m.bytes_out),
    ("kafka_server_brokertopicmetrics_replicationbytesout", "Record bytes sent to follower replicas.", |m| {
        &m.replication_bytes_out
    }),
    (
        "kafka_server_brokertopicmetrics_totalproducerequests",
        "Partitions of produce requests handled as leader.",
        |m| &m.produce_requests,
    ),
    (
        "kafka_server_brokertopicmetrics_failedproducerequests",
        "Partitions of produce requests answered with an error.",
        |m| &m.failed_produce_requests,
    ),
    (
        "kafka_server_brokertopicmetrics_totalfetchrequests",
        "Partitions of fetch requests read here (as leader, or as a consumer's follower).",
        |m| &m.fetch_requests,
    ),
    (
        "kafka_server_brokertopicmetrics_failedfetchrequests",
        "Partitions of fetch requests answered with an error.",
        |m| &m.failed_fetch_requests,
    ),
];

impl Scrape {
    fn metrics(&self) -> &BrokerMetrics {
        &self.broker.metrics
    }

    fn topic_counters(&self, enc: &mut DescriptorEncoder) -> Result<(), FmtError> {
        let topics = self.metrics().topics_snapshot();
        for (name, help, get) in TOPIC_COUNTERS {
            let load = |m: &TopicMetrics| get(m).load(Ordering::Relaxed);
            let total: u64 = topics.iter().map(|(_, m)| load(m)).sum();
            let per_topic = topics.iter().map(|(t, m)| (vec![("topic", t.to_string())], load(m)));
            let all = std::iter::once((Vec::new(), total));
            counters(enc, name, help, all.chain(per_topic))?;
        }
        let shrinks = topics.iter().map(|(_, m)| m.isr_shrinks.load(Ordering::Relaxed)).sum::<u64>();
        let expands = topics.iter().map(|(_, m)| m.isr_expands.load(Ordering::Relaxed)).sum::<u64>();
        let h = "ISR shrinks of partitions led here.";
        counter(enc, "kafka_server_replicamanager_isrshrinks", h, shrinks)?;
        let h = "ISR expands of partitions led here.";
        counter(enc, "kafka_server_replicamanager_isrexpands", h, expands)
    }

    fn requests(&self, enc: &mut DescriptorEncoder) -> Result<(), FmtError> {
        let served: Vec<(ApiKey, &super::RequestMetrics)> = crate::handlers::SERVED
            .iter()
            .chain(crate::handlers::controller::SERVED)
            .filter_map(|s| Some((s.api, self.metrics().requests.get(s.api as usize)?)))
            .filter(|(_, r)| r.requests.load(Ordering::Relaxed) > 0)
            .collect();
        let mut seen = std::collections::BTreeSet::new();
        let served: Vec<_> = served.into_iter().filter(|(api, _)| seen.insert(*api as i16)).collect();
        counters(
            enc,
            "kafka_network_requestmetrics_requests",
            "Requests handled, per API.",
            served.iter().map(|(api, r)| ([("request", api.name())], r.requests.load(Ordering::Relaxed))),
        )?;
        type Phase = fn(&super::RequestMetrics) -> &super::LatencyHistogram;
        let phases: [(&str, &str, Phase); 5] = [
            (
                "kafka_network_requestmetrics_totaltimems",
                "Milliseconds from reading a request to its response written to the socket, per API.",
                |r| &r.total_time,
            ),
            (
                "kafka_network_requestmetrics_localtimems",
                "Milliseconds a request spent in its handler, remote waits excepted, per API.",
                |r| &r.local_time,
            ),
            (
                "kafka_network_requestmetrics_remotetimems",
                "Milliseconds a request waited on other replicas or members, or for data (acks=all, fetch.min.bytes, joins), per API.",
                |r| &r.remote_time,
            ),
            (
                "kafka_network_requestmetrics_responsequeuetimems",
                "Milliseconds a ready response waited behind earlier responses of its connection, per API.",
                |r| &r.response_queue_time,
            ),
            (
                "kafka_network_requestmetrics_responsesendtimems",
                "Milliseconds writing a response to the socket, per API.",
                |r| &r.response_send_time,
            ),
        ];
        for (name, help, phase) in phases {
            let mut m = enc.encode_descriptor(name, help, None, MetricType::Histogram)?;
            for (api, r) in &served {
                let (sum, count, buckets) = phase(r).snapshot();
                let labels = [("request", api.name())];
                m.encode_family(&labels)?.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)?;
            }
        }
        let connections = self.metrics().connections.load(Ordering::Relaxed).max(0);
        gauge(
            enc,
            "kafka_server_socket_server_metrics_connections",
            "Open client connections.",
            connections,
        )?;
        let (sessions, cached, evictions) = self.broker.fetch_sessions.stats();
        let h = "Incremental fetch sessions open (KIP-227).";
        gauge(enc, "kafka_server_fetchsessioncache_numincrementalfetchsessions", h, sessions as i64)?;
        let h = "Partitions held by the incremental fetch sessions.";
        gauge(enc, "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached", h, cached as i64)?;
        let h = "Fetch sessions evicted to make room for new ones.";
        counter(enc, "kafka_server_fetchsessioncache_incrementalfetchsessionevictions", h, evictions)?;
        let Some(memory) = &self.broker.request_memory else { return Ok(()) };
        let available = memory.available() as i64;
        let h = "Bytes of queued.max.request.bytes not held by requests being received or handled.";
        gauge(enc, "kafka_network_socketserver_memorypoolavailable", h, available)?;
        let h = "Bytes of queued.max.request.bytes held by requests being received or handled.";
        gauge(enc, "kafka_network_socketserver_memorypoolused", h, memory.capacity() as i64 - available)
    }

    fn logs(&self, enc: &mut DescriptorEncoder) -> Result<(), FmtError> {
        let mut parts = self.broker.replicas.all();
        parts.sort_by(|a, b| (&a.topic, a.index).cmp(&(&b.topic, b.index)));
        let labels = |p: &crate::replica::Partition| {
            [("topic", p.topic.to_string()), ("partition", p.index.to_string())]
        };
        type Read = fn(&crate::replica::Partition) -> i64;
        let logs: [(&str, &str, Read); 4] = [
            ("kafka_log_log_size", "Bytes of the partition's log segments.", |p| {
                p.log.size_in_bytes() as i64
            }),
            ("kafka_log_log_logstartoffset", "The partition's log start offset.", |p| {
                p.log.log_start_offset()
            }),
            ("kafka_log_log_logendoffset", "The partition's log end offset.", |p| p.log.log_end_offset()),
            ("kafka_log_log_numlogsegments", "Segments of the partition's log.", |p| {
                p.log.num_segments() as i64
            }),
        ];
        for (name, help, read) in logs {
            gauges(enc, name, help, parts.iter().map(|p| (labels(p), read(p))))?;
        }
        let leaders: Vec<_> = parts.iter().filter(|p| p.is_leader()).collect();
        gauges(
            enc,
            "kafka_cluster_partition_highwatermark",
            "High watermark of partitions led here.",
            leaders.iter().map(|p| (labels(p), p.high_watermark())),
        )?;
        let mut lag = Vec::new();
        for p in &leaders {
            let leo = p.log.log_end_offset();
            for (replica, follower_leo) in p.follower_log_end_offsets() {
                let behind = if follower_leo < 0 { leo } else { (leo - follower_leo).max(0) };
                lag.push((
                    [
                        ("topic", p.topic.to_string()),
                        ("partition", p.index.to_string()),
                        ("replica", replica.to_string()),
                    ],
                    behind,
                ));
            }
        }
        let h = "Messages a follower is behind the leader's log end offset, as of its last fetch (Strata's own, on the leader).";
        gauges(enc, "kafka_server_replicamanager_followerlag", h, lag)?;
        gauge(
            enc,
            "kafka_server_replicamanager_partitioncount",
            "Partitions hosted here.",
            parts.len() as i64,
        )?;
        gauge(enc, "kafka_server_replicamanager_leadercount", "Partitions led here.", leaders.len() as i64)
    }

    /// Replication health of the partitions led here, from the metadata image.
    fn replicas(&self, enc: &mut DescriptorEncoder) -> Result<(), FmtError> {
        let image = self.broker.metadata.current();
        let me = self.broker.config.node_id;
        let (mut under_replicated, mut under_min_isr, mut offline) = (0i64, 0i64, 0i64);
        for t in image.topics.values() {
            let (min_isr, _) = self.broker.topic_defaults().resolve(&t.configs, "min.insync.replicas");
            let min_isr: usize = min_isr.parse().unwrap_or(1);
            for p in &t.partitions {
                if p.leader < 0 {
                    offline += 1;
                }
                if p.leader == me {
                    under_replicated += i64::from(p.isr.len() < p.replicas.len());
                    under_min_isr += i64::from(p.isr.len() < min_isr);
                }
            }
        }
        let h = "Partitions led here whose ISR is smaller than their replica set.";
        gauge(enc, "kafka_server_replicamanager_underreplicatedpartitions", h, under_replicated)?;
        let h = "Partitions led here whose ISR is below min.insync.replicas.";
        gauge(enc, "kafka_server_replicamanager_underminisrpartitioncount", h, under_min_isr)?;
        if self.is_active_controller() {
            let h = "Leader elections in the cluster's metadata (reported by the active controller).";
            let elections = self.metrics().leader_elections.load(Ordering::Relaxed);
            counter(enc, "kafka_controller_controllerstats_leaderelections", h, elections)?;
            let h = "Partitions without a leader (reported by the active controller).";
            gauge(enc, "kafka_controller_kafkacontroller_offlinepartitionscount", h, offline)?;
        }
        Ok(())
    }

    fn is_active_controller(&self) -> bool {
        match &self.quorum {
            Some(q) => q.is_leader(),
            None => false,
        }
    }

    /// Group counts by state and consumer-group lag, as kafka-exporter names it.
    fn groups(&self, enc: &mut DescriptorEncoder) -> Result<(), FmtError> {
        let Some(groups) = &self.groups else { return Ok(()) };
        let total: u64 = groups.by_state.iter().sum();
        gauge(
            enc,
            "kafka_coordinator_group_groupmetadatamanager_numgroups",
            "Groups coordinated here.",
            total as i64,
        )?;
        for (state, n) in GroupsSnapshot::STATES.iter().zip(groups.by_state) {
            let name = format!(
                "kafka_coordinator_group_groupmetadatamanager_numgroups{}",
                state.name().to_lowercase()
            );
            gauge(enc, &name, "Groups coordinated here in this state.", n as i64)?;
        }
        let h = "Rebalances started by this coordinator since the broker started.";
        counter(enc, "kafka_server_group_coordinator_metrics_group_rebalance", h, groups.rebalances)?;
        let mut lag = Vec::new();
        let mut stable_lag = Vec::new();
        let mut current = Vec::new();
        for (group, topic, partition, committed) in &groups.committed {
            let Some(p) = self.broker.replicas.get(topic, *partition).filter(|p| p.is_leader()) else {
                continue;
            };
            let labels = vec![
                ("consumergroup", group.clone()),
                ("topic", topic.clone()),
                ("partition", partition.to_string()),
            ];
            lag.push((labels.clone(), (p.high_watermark() - committed).max(0)));
            stable_lag.push((labels.clone(), (p.last_stable_offset() - committed).max(0)));
            current.push((labels, *committed));
        }
        let h = "Last stable offset minus the group's committed offset: the lag a read_committed consumer can close (Strata's own).";
        gauges(enc, "kafka_consumergroup_lag_stable", h, stable_lag)?;
        let h = "Committed offset of a group (kafka-exporter's name).";
        gauges(enc, "kafka_consumergroup_current_offset", h, current)?;
        let h = "High watermark minus the group's committed offset, for partitions led here.";
        gauges(enc, "kafka_consumergroup_lag", h, lag)
    }

    /// Transactional ids by state and timed-out aborts of the transaction coordinator
    /// (Strata's own names: Kafka reports neither as an MBean).
    fn transactions(&self, enc: &mut DescriptorEncoder) -> Result<(), FmtError> {
        let Some(t) = &self.transactions else { return Ok(()) };
        let samples: Vec<_> = TxnState::ALL
            .iter()
            .zip(t.by_state)
            .filter(|(st, _)| !matches!(st, TxnState::Dead | TxnState::PrepareEpochFence))
            .map(|(st, n)| ([("state", st.name())], n as i64))
            .collect();
        let h = "Transactional ids of the __transaction_state partitions coordinated here, by state.";
        gauges(enc, "kafka_coordinator_transaction_transactionstatemanager_numtransactions", h, samples)?;
        let h = "Transactions the coordinator aborted because they outlived transaction.timeout.ms.";
        counter(
            enc,
            "kafka_coordinator_transaction_transactioncoordinator_timedoutaborts",
            h,
            t.timed_out_aborts,
        )
    }

    /// The log cleaner (`kafka.log:type=LogCleaner`; runs and bytes are Strata's own).
    fn cleaner(&self, enc: &mut DescriptorEncoder) -> Result<(), FmtError> {
        let c = &self.metrics().cleaner;
        let h = "Cleanings of compacted logs that rewrote segments.";
        counter(enc, "kafka_log_logcleaner_cleaner_runs", h, c.runs.load(Ordering::Relaxed))?;
        let h = "Bytes of segments rewritten by the log cleaner.";
        counter(enc, "kafka_log_logcleaner_cleaned_bytes", h, c.bytes_cleaned.load(Ordering::Relaxed))?;
        let h = "Dirty ratio of the dirtiest compacted log at the cleaner's last pass, in percent.";
        let mut m =
            enc.encode_descriptor("kafka_log_logcleaner_max_dirty_percent", h, None, MetricType::Gauge)?;
        m.encode_gauge(&c.max_dirty_percent())?;
        let h = "Bytes written over bytes read by the last cleaning, in percent.";
        let mut m =
            enc.encode_descriptor("kafka_log_logcleaner_cleaner_recopy_percent", h, None, MetricType::Gauge)?;
        m.encode_gauge(&c.recopy_percent())
    }

    /// The controller quorum as KRaft's `raft-metrics` report it.
    fn controller(&self, enc: &mut DescriptorEncoder) -> Result<(), FmtError> {
        let Some(q) = &self.quorum else { return Ok(()) };
        let s = q.status();
        let h = "1 on the active controller.";
        gauge(
            enc,
            "kafka_controller_kafkacontroller_activecontrollercount",
            h,
            i64::from(s.role == QuorumRole::Leader),
        )?;
        let h = "The quorum leader as this node knows it (-1 if unknown).";
        gauge(enc, "kafka_server_raft_metrics_current_leader", h, i64::from(s.leader.unwrap_or(-1)))?;
        let h = "The quorum's epoch (Raft term).";
        gauge(enc, "kafka_server_raft_metrics_current_epoch", h, s.term as i64)?;
        let h = "Committed index of the metadata log plus one (-1 before any).";
        let hw = s.committed_index.map_or(-1, |i| i as i64 + 1);
        gauge(enc, "kafka_server_raft_metrics_high_watermark", h, hw)?;
        let h = "Last index of the local metadata log plus one.";
        let leo = s.last_log_index.map_or(0, |i| i as i64 + 1);
        gauge(enc, "kafka_server_raft_metrics_log_end_offset", h, leo)?;
        let state = match s.role {
            QuorumRole::Leader => "leader",
            QuorumRole::Candidate => "candidate",
            QuorumRole::Follower => "follower",
            QuorumRole::Learner => "observer",
            QuorumRole::Shutdown => "unattached",
        };
        gauges(
            enc,
            "kafka_server_raft_metrics_current_state",
            "1 for this node's quorum state.",
            [([("state", state)], 1i64)],
        )
    }
}
