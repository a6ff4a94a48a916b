//! The client crate's admin against the real broker: every admin call, per-item errors
//! coming back for the item alone (an existing topic, an invalid config, a missing
//! topic or group), a group described while a member is in it (joined with raw
//! JoinGroup / SyncGroup through the client's connection), offsets of that group
//! altered and deleted once it is empty, partition reassignment's answers on one node,
//! and admin calls that ride out a broker
//! killed with SIGKILL and restarted under them.

use bytes::Bytes;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use strata_client::admin::{
    Admin, AlterConfigOp, ConfigResource, ConfigSource, ElectionType, NewPartitions, NewTopic, OffsetSpec,
};
use strata_client::consumer_protocol::{Assignment, Subscription, TopicPartitions, PROTOCOL_TYPE};
use strata_client::{Client, ClientConfig, ErrorCode, IsolationLevel, OffsetAndMetadata, TopicPartition};
use strata_protocol::messages::init_producer_id::InitProducerIdRequest;
use strata_protocol::messages::join_group::{JoinGroupRequest, JoinGroupRequestProtocol};
use strata_protocol::messages::leave_group::{LeaveGroupRequest, MemberIdentity};
use strata_protocol::messages::produce::{PartitionProduceData, ProduceRequest, TopicProduceData};
use strata_protocol::messages::sync_group::{SyncGroupRequest, SyncGroupRequestAssignment};
use strata_protocol::records::{NewRecord, RecordBatchBuilder};
use strata_protocol::{RequestBody, ResponseBody};
use strata_tests::BrokerProcess;

async fn connect(broker: &BrokerProcess) -> Client {
    let mut config = ClientConfig::new(&broker.addr().to_string());
    config.set("request.timeout.ms", "15000").expect("setting");
    Client::connect(config).await.expect("connect")
}

fn code<T: std::fmt::Debug>(result: &strata_client::Result<T>) -> Option<ErrorCode> {
    result.as_ref().err().and_then(strata_client::Error::code)
}

fn config_value(entries: &[strata_client::admin::ConfigEntry], key: &str) -> Option<(String, ConfigSource)> {
    entries.iter().find(|e| e.name == key).map(|e| (e.value.clone().unwrap_or_default(), e.source))
}

async fn topic_config(admin: &Admin, topic: &str) -> Vec<strata_client::admin::ConfigEntry> {
    let (_, entries) = admin.describe_configs(&[ConfigResource::topic(topic)]).await.remove(0);
    entries.expect("describe configs")
}

/// Waits until `cond` holds, failing after `timeout_ms`.
async fn await_condition<F, Fut>(what: &str, timeout_ms: u64, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_millis(timeout_ms);
    while !cond().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Appends `count` records with timestamps `base_ts + i` to a partition (acks=-1),
/// optionally as an idempotent producer `(id, epoch)`.
async fn produce(
    client: &Client,
    topic: &str,
    partition: i32,
    count: i64,
    base_ts: i64,
    producer: Option<(i64, i16)>,
) {
    let mut builder = RecordBatchBuilder::new(0);
    if let Some((id, epoch)) = producer {
        builder = builder.producer(id, epoch, 0);
    }
    for i in 0..count {
        builder
            .append(&NewRecord::new(base_ts + i, None, Some(Bytes::from(format!("v{i}")))))
            .expect("append");
    }
    let request = ProduceRequest {
        transactional_id: None,
        acks: -1,
        timeout_ms: 10_000,
        topic_data: vec![TopicProduceData {
            name: topic.to_string(),
            partition_data: vec![PartitionProduceData {
                index: partition,
                records: Some(builder.build().expect("batch")),
            }],
        }],
    };
    let (_, conn) = client.leader(topic, partition).await.expect("leader");
    let ResponseBody::Produce(r) = conn.call(RequestBody::Produce(request)).await.expect("produce") else {
        panic!("wrong api")
    };
    let p = &r.responses[0].partition_responses[0];
    assert_eq!(p.error_code, 0, "produce: {:?}", p.error_message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_are_created_described_altered_grown_and_deleted_with_errors_per_topic() {
    let broker = BrokerProcess::start(&[]).expect("broker");
    let client = connect(&broker).await;
    let admin = client.admin();

    let created = admin
        .create_topics(&[NewTopic::new("a", 3), NewTopic::new("b", 1).config("retention.ms", "60000")], false)
        .await;
    assert_eq!(created.len(), 2);
    assert!(created.iter().all(|(_, r)| r.is_ok()), "{created:?}");

    // One request, three outcomes: each topic gets its own.
    let mixed = admin
        .create_topics(
            &[
                NewTopic::new("a", 3),
                NewTopic::new("c", 2).replication_factor(1),
                NewTopic::new("d", 1).config("retention.ms", "soon"),
            ],
            false,
        )
        .await;
    let names: Vec<&str> = mixed.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["a", "c", "d"], "results in request order");
    assert_eq!(code(&mixed[0].1), Some(ErrorCode::TopicAlreadyExists));
    assert!(mixed[1].1.is_ok(), "{:?}", mixed[1].1);
    assert_eq!(code(&mixed[2].1), Some(ErrorCode::InvalidConfig));

    let validated = admin.create_topics(&[NewTopic::new("e", 4)], true).await;
    assert!(validated[0].1.is_ok(), "{validated:?}");
    let too_many = admin.create_topics(&[NewTopic::new("f", 1).replication_factor(3)], true).await;
    assert_eq!(code(&too_many[0].1), Some(ErrorCode::InvalidReplicationFactor));

    let listed = admin.list_topics(false).await.expect("list");
    assert_eq!(listed, ["a", "b", "c"], "validate-only and failed topics are not created");

    let described = admin.describe_topics(&["a".to_string(), "missing".to_string()]).await.expect("describe");
    let a = described[0].1.as_ref().expect("a described");
    assert_eq!(a.partitions.len(), 3);
    assert!(!a.id.is_zero() && !a.internal);
    for p in &a.partitions {
        assert_eq!((p.leader, p.replicas.as_slice(), p.isr.as_slice()), (0, &[0][..], &[0][..]), "{p:?}");
    }
    assert_eq!(code(&described[1].1), Some(ErrorCode::UnknownTopicOrPartition));

    // Configs: the topic's override, a default, and the broker's own.
    let b = topic_config(&admin, "b").await;
    assert_eq!(config_value(&b, "retention.ms"), Some(("60000".into(), ConfigSource::DynamicTopic)));
    let (_, source) = config_value(&b, "cleanup.policy").expect("cleanup.policy described");
    assert_ne!(source, ConfigSource::DynamicTopic);
    let broker_configs = admin.describe_configs(&[ConfigResource::broker(0)]).await;
    let broker_configs = broker_configs[0].1.as_ref().expect("broker configs");
    assert!(broker_configs.iter().any(|e| e.name == "log.retention.hours" || e.name == "num.partitions"));

    // Incremental alter: set, delete, append, subtract, and a bad value refused.
    let altered = admin
        .incremental_alter_configs(
            &[(
                ConfigResource::topic("b"),
                vec![AlterConfigOp::set("cleanup.policy", "compact"), AlterConfigOp::delete("retention.ms")],
            )],
            false,
        )
        .await;
    assert!(altered[0].1.is_ok(), "{altered:?}");
    let b = topic_config(&admin, "b").await;
    assert_eq!(config_value(&b, "cleanup.policy"), Some(("compact".into(), ConfigSource::DynamicTopic)));
    assert_ne!(config_value(&b, "retention.ms").map(|(_, s)| s), Some(ConfigSource::DynamicTopic));
    let appended = admin
        .incremental_alter_configs(
            &[(ConfigResource::topic("b"), vec![AlterConfigOp::append("cleanup.policy", "delete")])],
            false,
        )
        .await;
    assert!(appended[0].1.is_ok(), "{appended:?}");
    let b = topic_config(&admin, "b").await;
    assert_eq!(config_value(&b, "cleanup.policy").map(|(v, _)| v).as_deref(), Some("compact,delete"));
    let subtracted = admin
        .incremental_alter_configs(
            &[(ConfigResource::topic("b"), vec![AlterConfigOp::subtract("cleanup.policy", "compact")])],
            false,
        )
        .await;
    assert!(subtracted[0].1.is_ok(), "{subtracted:?}");
    let b = topic_config(&admin, "b").await;
    assert_eq!(config_value(&b, "cleanup.policy").map(|(v, _)| v).as_deref(), Some("delete"));
    let bad = admin
        .incremental_alter_configs(
            &[
                (ConfigResource::topic("b"), vec![AlterConfigOp::set("retention.ms", "never")]),
                (ConfigResource::topic("a"), vec![AlterConfigOp::set("retention.ms", "120000")]),
            ],
            false,
        )
        .await;
    assert_eq!(code(&bad[0].1), Some(ErrorCode::InvalidConfig));
    assert!(bad[1].1.is_ok(), "the other resource is altered: {bad:?}");
    assert_eq!(
        config_value(&topic_config(&admin, "a").await, "retention.ms").map(|(v, _)| v).as_deref(),
        Some("120000")
    );

    // Partitions grow, never shrink.
    let grown = admin
        .create_partitions(&[NewPartitions::increase_to("a", 5), NewPartitions::increase_to("c", 1)], false)
        .await;
    assert!(grown[0].1.is_ok(), "{grown:?}");
    assert_eq!(code(&grown[1].1), Some(ErrorCode::InvalidPartitions));
    let a = admin.describe_topics(&["a".to_string()]).await.expect("describe").remove(0).1.expect("a");
    assert_eq!(a.partitions.len(), 5);

    let deleted = admin.delete_topics(&["c".to_string(), "missing".to_string()]).await;
    assert!(deleted[0].1.is_ok(), "{deleted:?}");
    assert_eq!(code(&deleted[1].1), Some(ErrorCode::UnknownTopicOrPartition));
    await_condition("c to be gone", 10_000, || async {
        admin.list_topics(false).await.is_ok_and(|l| l == ["a", "b"])
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offsets_are_listed_records_deleted_and_producers_described_at_the_leaders() {
    let broker = BrokerProcess::start(&[]).expect("broker");
    let client = connect(&broker).await;
    let admin = client.admin();
    let created = admin.create_topics(&[NewTopic::new("o", 2)], false).await;
    assert!(created[0].1.is_ok(), "{created:?}");

    let ResponseBody::InitProducerId(pid) = client
        .call_any(RequestBody::InitProducerId(InitProducerIdRequest {
            transactional_id: None,
            transaction_timeout_ms: 60_000,
            ..Default::default()
        }))
        .await
        .expect("init producer id")
    else {
        panic!("wrong api")
    };
    let base_ts = 1_700_000_000_000;
    produce(&client, "o", 0, 10, base_ts, Some((pid.producer_id, pid.producer_epoch))).await;
    produce(&client, "o", 1, 4, base_ts, None).await;

    let p0 = TopicPartition::new("o", 0);
    let p1 = TopicPartition::new("o", 1);
    let asked = [
        (p0.clone(), OffsetSpec::Earliest),
        (p0.clone(), OffsetSpec::Latest),
        (p0.clone(), OffsetSpec::Timestamp(base_ts + 6)),
        (p0.clone(), OffsetSpec::MaxTimestamp),
        (p1.clone(), OffsetSpec::Latest),
        (TopicPartition::new("o", 7), OffsetSpec::Latest),
        (TopicPartition::new("nope", 0), OffsetSpec::Latest),
    ];
    let listed = admin.list_offsets(&asked, IsolationLevel::ReadUncommitted).await;
    assert_eq!(listed.len(), asked.len());
    let offset = |i: usize| listed[i].1.as_ref().map(|l| l.offset).unwrap_or_else(|e| panic!("{i}: {e}"));
    assert_eq!(offset(0), 0);
    assert_eq!(offset(1), 10);
    assert_eq!(offset(2), 6);
    assert_eq!(offset(3), 9);
    assert_eq!(listed[3].1.as_ref().expect("max").timestamp, base_ts + 9);
    assert_eq!(offset(4), 4);
    assert_eq!(code(&listed[5].1), Some(ErrorCode::UnknownTopicOrPartition));
    assert_eq!(code(&listed[6].1), Some(ErrorCode::UnknownTopicOrPartition));

    let before = BTreeMap::from([(p0.clone(), 3), (p1.clone(), 99)]);
    let deleted = admin.delete_records(&before).await;
    assert_eq!(deleted[0].0, p0);
    assert_eq!(deleted[0].1.as_ref().ok(), Some(&3), "{deleted:?}");
    assert_eq!(deleted[1].0, p1);
    assert_eq!(code(&deleted[1].1), Some(ErrorCode::OffsetOutOfRange));
    let earliest =
        admin.list_offsets(&[(p0.clone(), OffsetSpec::Earliest)], IsolationLevel::ReadCommitted).await;
    assert_eq!(earliest[0].1.as_ref().expect("earliest").offset, 3);

    let producers = admin.describe_producers(&[p0.clone(), p1.clone()]).await;
    let on_p0 = producers[0].1.as_ref().expect("p0 producers");
    assert_eq!(on_p0.len(), 1, "{on_p0:?}");
    assert_eq!((on_p0[0].producer_id, on_p0[0].producer_epoch), (pid.producer_id, pid.producer_epoch as i32));
    assert_eq!(on_p0[0].last_sequence, 9);
    assert_eq!(on_p0[0].current_txn_start_offset, None);
    assert!(producers[1].1.as_ref().expect("p1 producers").is_empty(), "no idempotent producer wrote p1");
}

/// Joins `group` as its only member, subscribed to `topic` and assigned `partitions`;
/// returns the member id and generation.
async fn join_as_only_member(client: &Client, group: &str, topic: &str, partitions: &[i32]) -> (String, i32) {
    let (_, conn) =
        client.coordinator(strata_client::CoordinatorKind::Group, group).await.expect("coordinator");
    let subscription = Subscription { topics: vec![topic.to_string()], ..Default::default() };
    let mut member_id = String::new();
    let joined = loop {
        let request = JoinGroupRequest {
            group_id: group.to_string(),
            session_timeout_ms: 30_000,
            rebalance_timeout_ms: 30_000,
            member_id: member_id.clone(),
            group_instance_id: None,
            protocol_type: PROTOCOL_TYPE.to_string(),
            protocols: vec![JoinGroupRequestProtocol {
                name: "range".into(),
                metadata: subscription.encode(1),
            }],
            reason: None,
        };
        let ResponseBody::JoinGroup(r) = conn.call(RequestBody::JoinGroup(request)).await.expect("join")
        else {
            panic!("wrong api")
        };
        if r.error_code == ErrorCode::MemberIdRequired as i16 {
            member_id = r.member_id;
            continue;
        }
        assert_eq!(r.error_code, 0, "join");
        break r;
    };
    assert_eq!(joined.leader, joined.member_id, "the only member leads");
    let assignment = Assignment {
        assigned_partitions: vec![TopicPartitions {
            topic: topic.to_string(),
            partitions: partitions.to_vec(),
        }],
        user_data: None,
    };
    let request = SyncGroupRequest {
        group_id: group.to_string(),
        generation_id: joined.generation_id,
        member_id: joined.member_id.clone(),
        group_instance_id: None,
        protocol_type: Some(PROTOCOL_TYPE.to_string()),
        protocol_name: Some("range".into()),
        assignments: vec![SyncGroupRequestAssignment {
            member_id: joined.member_id.clone(),
            assignment: assignment.encode(1),
        }],
    };
    let ResponseBody::SyncGroup(r) = conn.call(RequestBody::SyncGroup(request)).await.expect("sync") else {
        panic!("wrong api")
    };
    assert_eq!(r.error_code, 0, "sync");
    (joined.member_id, joined.generation_id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_with_a_live_member_is_described_and_its_offsets_are_managed_once_it_is_empty() {
    let broker = BrokerProcess::start(&[]).expect("broker");
    let client = connect(&broker).await;
    let admin = client.admin();
    assert!(admin.create_topics(&[NewTopic::new("g-topic", 3)], false).await[0].1.is_ok());
    let (member_id, _) = join_as_only_member(&client, "g1", "g-topic", &[0, 2]).await;

    let listed = admin.list_groups().await.expect("list groups");
    let g1 = listed.iter().find(|g| g.group_id == "g1").expect("g1 listed");
    assert_eq!((g1.protocol_type.as_str(), g1.coordinator), ("consumer", 0));
    assert_eq!(g1.state.as_deref(), Some("Stable"));

    let described = admin.describe_groups(&["nobody".to_string(), "g1".to_string()]).await;
    assert_eq!(described.iter().map(|(g, _)| g.as_str()).collect::<Vec<_>>(), ["nobody", "g1"]);
    let nobody = described[0].1.as_ref().expect("a missing group is described");
    assert_eq!((nobody.state.as_str(), nobody.members.len()), ("Dead", 0));
    let d = described[1].1.as_ref().expect("described");
    assert_eq!((d.state.as_str(), d.protocol.as_str(), d.coordinator), ("Stable", "range", 0));
    assert_eq!(d.members.len(), 1);
    assert_eq!(d.members[0].member_id, member_id);
    assert_eq!(
        d.members[0].assignment,
        vec![TopicPartition::new("g-topic", 0), TopicPartition::new("g-topic", 2)]
    );

    // While it has a member, the admin may not rewrite its offsets or delete it.
    let offsets = BTreeMap::from([
        (TopicPartition::new("g-topic", 0), OffsetAndMetadata::new(0)),
        (TopicPartition::new("g-topic", 1), OffsetAndMetadata::new(0)),
    ]);
    let refused = admin.alter_group_offsets("g1", &offsets).await.expect("commit answered");
    assert!(refused.iter().all(|(_, r)| code(r) == Some(ErrorCode::UnknownMemberId)), "{refused:?}");
    let refused = admin.delete_groups(&["g1".to_string()]).await;
    assert_eq!(code(&refused[0].1), Some(ErrorCode::NonEmptyGroup));

    let ResponseBody::LeaveGroup(left) = client
        .coordinator(strata_client::CoordinatorKind::Group, "g1")
        .await
        .expect("coordinator")
        .1
        .call(RequestBody::LeaveGroup(LeaveGroupRequest {
            group_id: "g1".into(),
            member_id: member_id.clone(),
            members: vec![MemberIdentity { member_id, group_instance_id: None, reason: None }],
        }))
        .await
        .expect("leave")
    else {
        panic!("wrong api")
    };
    assert_eq!(left.error_code, 0);
    let d = admin.describe_groups(&["g1".to_string()]).await.remove(0).1.expect("described");
    assert_eq!((d.state.as_str(), d.members.len()), ("Empty", 0));

    let offsets = BTreeMap::from([
        (
            TopicPartition::new("g-topic", 0),
            OffsetAndMetadata { offset: 5, metadata: "m".into(), leader_epoch: None },
        ),
        (TopicPartition::new("g-topic", 1), OffsetAndMetadata::new(7)),
    ]);
    let altered = admin.alter_group_offsets("g1", &offsets).await.expect("commit");
    assert_eq!(altered.len(), 2);
    assert!(altered.iter().all(|(_, r)| r.is_ok()), "{altered:?}");
    let committed = admin.list_group_offsets("g1", None).await.expect("offsets");
    assert_eq!(committed, offsets);
    let some =
        admin.list_group_offsets("g1", Some(&[TopicPartition::new("g-topic", 1)])).await.expect("offsets");
    assert_eq!(some.keys().collect::<Vec<_>>(), [&TopicPartition::new("g-topic", 1)]);

    let deleted =
        admin.delete_group_offsets("g1", &[TopicPartition::new("g-topic", 0)]).await.expect("delete");
    assert!(deleted.iter().all(|(_, r)| r.is_ok()), "{deleted:?}");
    let committed = admin.list_group_offsets("g1", None).await.expect("offsets");
    assert_eq!(committed.keys().collect::<Vec<_>>(), [&TopicPartition::new("g-topic", 1)]);
    let missing = admin.delete_group_offsets("nobody", &[TopicPartition::new("g-topic", 0)]).await;
    assert_eq!(code(&missing), Some(ErrorCode::GroupIdNotFound));

    let deleted = admin.delete_groups(&["g1".to_string(), "nobody".to_string()]).await;
    assert!(deleted[0].1.is_ok(), "{deleted:?}");
    assert_eq!(code(&deleted[1].1), Some(ErrorCode::GroupIdNotFound));
    assert!(admin.list_group_offsets("g1", None).await.expect("offsets").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_transactions_and_elections_are_described() {
    let broker = BrokerProcess::start(&[]).expect("broker");
    let client = connect(&broker).await;
    let admin = client.admin();

    let cluster = admin.describe_cluster().await.expect("cluster");
    assert!(cluster.cluster_id.as_deref().is_some_and(|id| !id.is_empty()));
    assert_eq!(cluster.controller_id, 0);
    assert_eq!(cluster.brokers.len(), 1);
    assert_eq!(cluster.brokers[0].port as u16, broker.addr().port());

    let ResponseBody::InitProducerId(pid) = client
        .coordinator(strata_client::CoordinatorKind::Transaction, "tx-1")
        .await
        .expect("coordinator")
        .1
        .call(RequestBody::InitProducerId(InitProducerIdRequest {
            transactional_id: Some("tx-1".into()),
            transaction_timeout_ms: 60_000,
            ..Default::default()
        }))
        .await
        .expect("init")
    else {
        panic!("wrong api")
    };
    assert_eq!(pid.error_code, 0);
    let listed = admin.list_transactions().await.expect("list transactions");
    let tx = listed.iter().find(|t| t.transactional_id == "tx-1").expect("tx-1 listed");
    assert_eq!((tx.producer_id, tx.state.as_str(), tx.coordinator), (pid.producer_id, "Empty", 0));
    let described = admin.describe_transactions(&["tx-1".to_string(), "tx-none".to_string()]).await;
    let d = described[0].1.as_ref().expect("tx-1 described");
    assert_eq!(
        (d.producer_id, d.producer_epoch, d.state.as_str()),
        (pid.producer_id, pid.producer_epoch, "Empty")
    );
    assert_eq!(d.timeout_ms, 60_000);
    assert!(d.partitions.is_empty());
    assert_eq!(code(&described[1].1), Some(ErrorCode::TransactionalIdNotFound));

    assert!(admin.create_topics(&[NewTopic::new("el", 2)], false).await[0].1.is_ok());
    let elected = admin
        .elect_leaders(
            ElectionType::Preferred,
            Some(&[TopicPartition::new("el", 0), TopicPartition::new("el", 1)]),
        )
        .await
        .expect("elect");
    assert_eq!(elected.len(), 2);
    assert!(
        elected.iter().all(|(_, r)| code(r) == Some(ErrorCode::ElectionNotNeeded)),
        "the preferred replica already leads: {elected:?}"
    );

    // Reassignments: on one node nothing can move, but every answer is Kafka's.
    let me = admin.describe_cluster().await.expect("cluster").brokers[0].id;
    assert!(admin.list_partition_reassignments(None).await.expect("list").is_empty());
    let moves = [
        (TopicPartition::new("el", 0), None),
        (TopicPartition::new("el", 1), Some(vec![me, 99])),
        (TopicPartition::new("el", 1), Some(vec![me])),
        (TopicPartition::new("el-none", 0), Some(vec![me])),
    ];
    let answered = admin.alter_partition_reassignments(&moves).await.expect("alter");
    let codes: Vec<Option<ErrorCode>> = answered.iter().map(|(_, r)| code(r)).collect();
    assert_eq!(
        codes,
        vec![
            Some(ErrorCode::NoReassignmentInProgress),
            Some(ErrorCode::InvalidReplicaAssignment),
            None,
            Some(ErrorCode::UnknownTopicOrPartition),
        ],
        "{answered:?}"
    );
    let listed = admin.list_partition_reassignments(Some(&[TopicPartition::new("el", 1)])).await;
    assert!(listed.expect("list").is_empty(), "the same replicas again is no move");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_calls_ride_out_a_broker_killed_and_restarted_under_them() {
    let mut broker = BrokerProcess::start(&[]).expect("broker");
    let client = connect(&broker).await;
    let admin = client.admin();
    assert!(admin.create_topics(&[NewTopic::new("k", 2)], false).await[0].1.is_ok());
    produce(&client, "k", 1, 3, 1_000, None).await;
    let offsets = BTreeMap::from([(TopicPartition::new("k", 1), OffsetAndMetadata::new(2))]);
    let committed = admin.alter_group_offsets("kg", &offsets).await.expect("commit");
    assert!(committed[0].1.is_ok(), "{committed:?}");

    broker.kill().expect("kill");
    // The calls start while the broker is down and retry until it is back.
    let calls = tokio::spawn(async move {
        let created = admin.create_topics(&[NewTopic::new("after", 1)], false).await;
        let listed = admin
            .list_offsets(
                &[(TopicPartition::new("k", 1), OffsetSpec::Latest)],
                IsolationLevel::ReadUncommitted,
            )
            .await;
        let groups = admin.list_groups().await;
        // The coordinator reloads the group from __consumer_offsets after the restart.
        let group_offsets = admin.list_group_offsets("kg", None).await;
        (created, listed, groups, group_offsets)
    });
    let broker = tokio::task::spawn_blocking(move || {
        broker.restart().expect("restart");
        broker
    })
    .await
    .expect("restart task");
    let (created, listed, groups, group_offsets) = calls.await.expect("calls");
    assert!(created[0].1.is_ok(), "{created:?}");
    assert_eq!(listed[0].1.as_ref().expect("listed").offset, 3);
    assert!(groups.expect("groups").iter().any(|g| g.group_id == "kg"));
    assert_eq!(group_offsets.expect("group offsets"), offsets);
    drop(broker);
}
