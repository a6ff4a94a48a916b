package dev.strata.interop;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.AbortTransactionSpec;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.DescribeProducersResult.PartitionProducerState;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.MemberToRemove;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.RemoveMembersFromConsumerGroupOptions;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.admin.FeatureUpdate;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionReplica;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.ElectionNotNeededException;
import org.apache.kafka.common.errors.NoReassignmentInProgressException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourceType;

/**
 * Admin scenarios: every Admin call whose APIs Strata serves, each checked against what the
 * broker then reports (through Admin itself and the clients), and the calls whose APIs Strata does
 * not serve, each of which must fail at once with UnsupportedVersionException (the API is not
 * in the broker's ApiVersions answer), never hang.
 */
final class Admins {
    private Admins() {}

    static Map<String, Main.Scenario> all() {
        Map<String, Main.Scenario> m = new LinkedHashMap<>();
        m.put("topics_and_partitions", Admins::topics);
        m.put("configs", Admins::configs);
        m.put("delete_records_and_list_offsets", Admins::deleteRecords);
        m.put("consumer_groups", Admins::groups);
        m.put("describe_cluster_features_quorum", Admins::cluster);
        m.put("elect_leaders", Admins::electLeaders);
        m.put("reassignments", Admins::reassignments);
        m.put("producers_and_transactions", Admins::transactions);
        m.put("fence_producers", Admins::fenceProducers);
        m.put("log_dirs", Admins::logDirs);
        m.put("unsupported_calls", Admins::unsupported);
        return m;
    }

    static Map<String, Object> topics(String bootstrap) throws Exception {
        String topic = Check.unique("admin-topic");
        try (Admin a = Check.admin(bootstrap)) {
            NewTopic nt = new NewTopic(topic, 2, (short) 1).configs(Map.of("retention.ms", "3600000"));
            a.createTopics(List.of(nt), new CreateTopicsOptions().validateOnly(true)).all().get();
            Check.that(!a.listTopics().names().get().contains(topic), "validateOnly created the topic");
            var created = a.createTopics(List.of(nt));
            created.all().get();
            Check.eq(2, created.numPartitions(topic).get(), "numPartitions in the CreateTopics answer");
            Uuid id = created.topicId(topic).get();
            Check.that(!Uuid.ZERO_UUID.equals(id), "a topic id");
            Check.await(() -> names(a).contains(topic), Check.WAIT, "the topic listed");
            var desc = a.describeTopics(TopicCollection.ofTopicIds(List.of(id))).allTopicIds().get().get(id);
            Check.eq(topic, desc.name(), "described by id");
            Check.eq(2, desc.partitions().size(), "partitions described");
            a.createPartitions(Map.of(topic, NewPartitions.increaseTo(3))).all().get();
            Check.await(() -> partitions(a, topic) == 3, Check.WAIT, "3 partitions after createPartitions");
            a.deleteTopics(TopicCollection.ofTopicNames(List.of(topic))).all().get();
            Check.await(() -> !names(a).contains(topic), Check.WAIT, "the topic gone after deleteTopics");
        }
        return Map.of();
    }

    private static Set<String> names(Admin a) {
        try {
            return a.listTopics().names().get();
        } catch (Exception e) {
            throw new AssertionError(Check.describe(e), e);
        }
    }

    private static int partitions(Admin a, String topic) {
        try {
            return a.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().size();
        } catch (Exception e) {
            return -1;
        }
    }

    private static ConfigEntry entry(Admin a, ConfigResource r, String key) throws Exception {
        Config c = a.describeConfigs(List.of(r)).all().get().get(r);
        return c.get(key);
    }

    private static void alter(Admin a, ConfigResource r, AlterConfigOp... ops) throws Exception {
        a.incrementalAlterConfigs(Map.of(r, List.of(ops))).all().get();
    }

    static Map<String, Object> configs(String bootstrap) throws Exception {
        String topic = Check.unique("admin-configs");
        try (Admin a = Check.admin(bootstrap)) {
            Check.createTopic(a, topic, 1);
            ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            ConfigEntry e = entry(a, r, "retention.ms");
            Check.eq(ConfigEntry.ConfigSource.DEFAULT_CONFIG, e.source(), "retention.ms source before");
            alter(a, r, new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET));
            Check.await(() -> value(a, r, "retention.ms").equals("7200000"), Check.WAIT, "retention.ms set");
            Check.eq(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, entry(a, r, "retention.ms").source(), "source after SET");
            alter(a, r, new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.APPEND));
            Check.await(() -> value(a, r, "cleanup.policy").equals("delete,compact"), Check.WAIT, "cleanup.policy appended");
            alter(a, r, new AlterConfigOp(new ConfigEntry("cleanup.policy", "delete"), AlterConfigOp.OpType.SUBTRACT));
            Check.await(() -> value(a, r, "cleanup.policy").equals("compact"), Check.WAIT, "cleanup.policy subtracted");
            alter(a, r, new AlterConfigOp(new ConfigEntry("retention.ms", ""), AlterConfigOp.OpType.DELETE));
            Check.await(() -> !value(a, r, "retention.ms").equals("7200000"), Check.WAIT, "retention.ms deleted");
            Check.eq(ConfigEntry.ConfigSource.DEFAULT_CONFIG, entry(a, r, "retention.ms").source(), "source after DELETE");
            // The broker resource: a node id from describeCluster.
            String node = a.describeCluster().nodes().get().iterator().next().idString();
            ConfigResource br = new ConfigResource(ConfigResource.Type.BROKER, node);
            ConfigEntry be = entry(a, br, "log.retention.check.interval.ms");
            Check.that(be != null && be.value() != null, "the broker's log.retention.check.interval.ms");
        }
        return Map.of();
    }

    private static String value(Admin a, ConfigResource r, String key) {
        try {
            ConfigEntry e = entry(a, r, key);
            return e == null || e.value() == null ? "" : e.value();
        } catch (Exception e) {
            throw new AssertionError(Check.describe(e), e);
        }
    }

    static Map<String, Object> deleteRecords(String bootstrap) throws Exception {
        String topic = Check.unique("admin-delete-records");
        TopicPartition tp = new TopicPartition(topic, 0);
        try (Admin a = Check.admin(bootstrap)) {
            Check.createTopic(a, topic, 1);
            try (KafkaProducer<String, String> prod = new KafkaProducer<>(Check.producer(bootstrap))) {
                for (int i = 0; i < 10; i++) {
                    prod.send(new ProducerRecord<>(topic, 0, 1_000_000_000_000L + i * 1000L, null, "d-" + i));
                }
                prod.flush();
            }
            Check.eq(10L, offset(a, tp, OffsetSpec.latest()), "latest");
            Check.eq(9L, offset(a, tp, OffsetSpec.maxTimestamp()), "max timestamp's offset");
            Check.eq(3L, offset(a, tp, OffsetSpec.forTimestamp(1_000_000_002_500L)), "offset for a timestamp");
            var low = a.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(4))).lowWatermarks().get(tp).get();
            Check.eq(4L, low.lowWatermark(), "low watermark after deleteRecords");
            Check.eq(4L, offset(a, tp, OffsetSpec.earliest()), "earliest after deleteRecords");
        }
        return Map.of();
    }

    private static long offset(Admin a, TopicPartition tp, OffsetSpec spec) throws Exception {
        return a.listOffsets(Map.of(tp, spec)).partitionResult(tp).get().offset();
    }

    static Map<String, Object> groups(String bootstrap) throws Exception {
        String topic = Check.unique("admin-groups"), group = Check.unique("admin-group");
        TopicPartition p0 = new TopicPartition(topic, 0), p1 = new TopicPartition(topic, 1);
        Map<String, Object> facts = new LinkedHashMap<>();
        try (Admin a = Check.admin(bootstrap)) {
            Check.createTopic(a, topic, 2);
            Consumers.produce(bootstrap, topic, 2, 5);
            Properties cp = Consumers.groupConsumer(bootstrap, group, "admin-member");
            cp.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, "static-1");
            cp.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "45000");
            try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp)) {
                c.subscribe(List.of(topic));
                int n = 0;
                long deadline = System.nanoTime() + Check.WAIT.toNanos();
                while (n < 10) {
                    Check.that(System.nanoTime() < deadline, "the member read " + n + " of 10");
                    n += c.poll(Duration.ofMillis(200)).count();
                }
                c.commitSync();
                GroupListing listed = a.listGroups().all().get().stream().filter(g -> g.groupId().equals(group))
                        .findFirst().orElseThrow(() -> new AssertionError("listGroups does not list " + group));
                facts.put("listed", listed.toString());
                ConsumerGroupDescription d = a.describeConsumerGroups(List.of(group)).describedGroups().get(group).get();
                Check.eq(GroupState.STABLE, d.groupState(), "state");
                Check.eq(1, d.members().size(), "members");
                Check.eq(Optional.of("static-1"), d.members().iterator().next().groupInstanceId(), "group.instance.id");
                Check.eq(Set.of(p0, p1), d.members().iterator().next().assignment().topicPartitions(), "assignment");
                Check.eq("range", d.partitionAssignor(), "assignor");
                Check.eq(Map.of(p0, 5L, p1, 5L), offsets(a, group), "committed offsets");
            }
            // A static member's close leaves it in the group until removed.
            a.removeMembersFromConsumerGroup(group, new RemoveMembersFromConsumerGroupOptions(
                    List.of(new MemberToRemove("static-1")))).all().get();
            Check.await(() -> state(a, group) == GroupState.EMPTY, Check.WAIT, "the group empty after removeMembers");
            a.alterConsumerGroupOffsets(group, Map.of(p0, new OffsetAndMetadata(1))).all().get();
            Check.eq(Map.of(p0, 1L, p1, 5L), offsets(a, group), "after alterConsumerGroupOffsets");
            a.deleteConsumerGroupOffsets(group, Set.of(p1)).all().get();
            Check.eq(Map.of(p0, 1L), offsets(a, group), "after deleteConsumerGroupOffsets");
            var classic = a.describeClassicGroups(List.of(group)).all().get().get(group);
            facts.put("classic_state", String.valueOf(classic.state()));
            a.deleteConsumerGroups(List.of(group)).all().get();
            Check.that(a.listGroups().all().get().stream().noneMatch(g -> g.groupId().equals(group)),
                    "the group listed after deleteConsumerGroups");
        }
        return facts;
    }

    private static GroupState state(Admin a, String group) {
        try {
            return a.describeConsumerGroups(List.of(group)).describedGroups().get(group).get().groupState();
        } catch (Exception e) {
            throw new AssertionError(Check.describe(e), e);
        }
    }

    private static Map<TopicPartition, Long> offsets(Admin a, String group) throws Exception {
        Map<TopicPartition, Long> out = new HashMap<>();
        a.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get().forEach((tp, om) -> {
            if (om != null) {
                out.put(tp, om.offset());
            }
        });
        return out;
    }

    static Map<String, Object> cluster(String bootstrap) throws Exception {
        Map<String, Object> facts = new LinkedHashMap<>();
        try (Admin a = Check.admin(bootstrap)) {
            var dc = a.describeCluster();
            Check.that(dc.clusterId().get() != null, "a cluster id");
            Check.eq(1, dc.nodes().get().size(), "nodes");
            Check.that(dc.controller().get() != null, "a controller");
            var features = a.describeFeatures().featureMetadata().get();
            facts.put("finalized", features.finalizedFeatures().keySet());
            facts.put("supported", features.supportedFeatures().keySet());
            // Which features are reported is left to the test (Strata reports none: see
            // docs/compatibility.md); the call itself must be answered.
            var quorum = a.describeMetadataQuorum().quorumInfo().get();
            Check.that(quorum.leaderId() >= 0, "a quorum leader");
            Check.eq(1, quorum.voters().size(), "voters");
            facts.put("quorum_leader", quorum.leaderId());
        }
        return facts;
    }

    static Map<String, Object> electLeaders(String bootstrap) throws Exception {
        String topic = Check.unique("admin-elect");
        TopicPartition tp = new TopicPartition(topic, 0);
        try (Admin a = Check.admin(bootstrap)) {
            Check.createTopic(a, topic, 1);
            for (ElectionType t : List.of(ElectionType.PREFERRED, ElectionType.UNCLEAN)) {
                Map<TopicPartition, Optional<Throwable>> r = a.electLeaders(t, Set.of(tp)).partitions().get();
                Check.that(r.get(tp).isPresent() && r.get(tp).get() instanceof ElectionNotNeededException,
                        t + " election of the only replica: " + r.get(tp));
            }
        }
        return Map.of();
    }

    static Map<String, Object> reassignments(String bootstrap) throws Exception {
        String topic = Check.unique("admin-reassign");
        TopicPartition tp = new TopicPartition(topic, 0);
        try (Admin a = Check.admin(bootstrap)) {
            Check.createTopic(a, topic, 1);
            int node = a.describeCluster().nodes().get().iterator().next().id();
            a.alterPartitionReassignments(Map.of(tp, Optional.of(new NewPartitionReassignment(List.of(node)))))
                    .all().get();
            Check.await(() -> {
                try {
                    return a.listPartitionReassignments().reassignments().get().isEmpty();
                } catch (Exception e) {
                    throw new AssertionError(Check.describe(e), e);
                }
            }, Check.WAIT, "no reassignment in progress");
            try {
                a.alterPartitionReassignments(Map.of(tp, Optional.empty())).all().get();
                throw new AssertionError("cancelling no reassignment succeeded");
            } catch (java.util.concurrent.ExecutionException e) {
                Check.that(e.getCause() instanceof NoReassignmentInProgressException,
                        "cancel with none in progress: " + Check.describe(e));
            }
        }
        return Map.of();
    }

    /** describeProducers, listTransactions, describeTransactions and abortTransaction. */
    static Map<String, Object> transactions(String bootstrap) throws Exception {
        String topic = Check.unique("admin-txn"), txnId = Check.unique("admin-txn-id");
        TopicPartition tp = new TopicPartition(topic, 0);
        Map<String, Object> facts = new LinkedHashMap<>();
        try (Admin a = Check.admin(bootstrap)) {
            Check.createTopic(a, topic, 1);
            try (KafkaProducer<String, String> prod = Transactions.txnProducer(bootstrap, txnId)) {
                prod.beginTransaction();
                prod.send(new ProducerRecord<>(topic, 0, null, "open")).get();
                PartitionProducerState ps = a.describeProducers(List.of(tp)).partitionResult(tp).get();
                Check.eq(1, ps.activeProducers().size(), "active producers");
                ProducerState s = ps.activeProducers().get(0);
                Check.eq(java.util.OptionalLong.of(0), s.currentTransactionStartOffset(), "transaction start offset");
                Collection<TransactionListing> listed = a.listTransactions().all().get();
                TransactionListing l = listed.stream().filter(x -> x.transactionalId().equals(txnId)).findFirst()
                        .orElseThrow(() -> new AssertionError("listTransactions does not list " + txnId));
                Check.eq(TransactionState.ONGOING, l.state(), "listed state");
                Check.eq(s.producerId(), l.producerId(), "listed producer id");
                TransactionDescription td = a.describeTransactions(List.of(txnId)).description(txnId).get();
                Check.eq(TransactionState.ONGOING, td.state(), "described state");
                Check.eq(Set.of(tp), td.topicPartitions(), "described partitions");
                Check.eq(s.producerId(), td.producerId(), "described producer id");
                // Admin's abort writes the marker on the partition (as for a hanging transaction).
                a.abortTransaction(new AbortTransactionSpec(tp, s.producerId(), (short) s.producerEpoch(),
                        s.coordinatorEpoch().orElse(-1))).all().get();
                Check.await(() -> {
                    try {
                        return a.describeProducers(List.of(tp)).partitionResult(tp).get().activeProducers().get(0)
                                .currentTransactionStartOffset().isEmpty();
                    } catch (Exception e) {
                        throw new AssertionError(Check.describe(e), e);
                    }
                }, Check.WAIT, "no open transaction on the partition after abortTransaction");
                Check.eq(2L, a.listOffsets(Map.of(tp, OffsetSpec.latest()),
                        new org.apache.kafka.clients.admin.ListOffsetsOptions(
                                org.apache.kafka.common.IsolationLevel.READ_COMMITTED)).partitionResult(tp).get().offset(),
                        "the last stable offset past the abort marker");
                facts.put("producer_id", s.producerId());
            }
        }
        return facts;
    }

    static Map<String, Object> fenceProducers(String bootstrap) throws Exception {
        String topic = Check.unique("admin-fence"), txnId = Check.unique("admin-fence-id");
        try (Admin a = Check.admin(bootstrap)) {
            Check.createTopic(a, topic, 1);
            KafkaProducer<String, String> prod = Transactions.txnProducer(bootstrap, txnId);
            try {
                prod.beginTransaction();
                prod.send(new ProducerRecord<>(topic, 0, null, "before-fence")).get();
                a.fenceProducers(List.of(txnId)).all().get();
                try {
                    prod.commitTransaction();
                    throw new AssertionError("a fenced producer committed");
                } catch (Exception e) {
                    Throwable t = e;
                    while (t != null && !(t instanceof ProducerFencedException)) {
                        t = t.getCause();
                    }
                    Check.that(t != null, "commit after fenceProducers: " + Check.describe(e));
                }
                TransactionDescription td = a.describeTransactions(List.of(txnId)).description(txnId).get();
                Check.that(td.state() == TransactionState.COMPLETE_ABORT || td.state() == TransactionState.EMPTY,
                        "state after fencing: " + td.state());
            } finally {
                prod.close(Duration.ZERO);
            }
        }
        return Map.of();
    }

    /**
     * describeLogDirs and describeReplicaLogDirs (DescribeLogDirs): the broker's one log dir, the
     * partition's size growing after a produce, no future replica; the facts (dir, sizes, volume
     * bytes) are checked against the disk by test_java_admin.py.
     */
    static Map<String, Object> logDirs(String bootstrap) throws Exception {
        Map<String, Object> facts = new TreeMap<>();
        String topic = Check.unique("admin-log-dirs");
        try (Admin a = Check.admin(bootstrap)) {
            int node = a.describeCluster().nodes().get().iterator().next().id();
            Check.createTopic(a, topic, 2);
            try (KafkaProducer<String, String> prod = new KafkaProducer<>(Check.producer(bootstrap))) {
                for (int i = 0; i < 20; i++) {
                    prod.send(new ProducerRecord<>(topic, 0, null, "log-dirs-" + i));
                }
                prod.flush();
            }
            var dirs = a.describeLogDirs(List.of(node)).allDescriptions().get().get(node);
            Check.eq(1, dirs.size(), "log dirs");
            var entry = dirs.entrySet().iterator().next();
            var d = entry.getValue();
            Check.that(d.error() == null, "log dir error " + d.error());
            facts.put("dir", entry.getKey());
            facts.put("total_bytes", d.totalBytes().orElse(-1));
            facts.put("usable_bytes", d.usableBytes().orElse(-1));
            for (int p = 0; p < 2; p++) {
                var info = d.replicaInfos().get(new TopicPartition(topic, p));
                Check.that(info != null, "partition " + p + " described");
                Check.that(!info.isFuture(), "partition " + p + " is not a future replica");
                Check.eq(0L, info.offsetLag(), "offset lag of partition " + p);
                facts.put("size_" + p, info.size());
            }
            facts.put("topic", topic);
            var replica = new TopicPartitionReplica(topic, 0, node);
            var rd = a.describeReplicaLogDirs(List.of(replica)).all().get().get(replica);
            Check.eq(entry.getKey(), rd.getCurrentReplicaLogDir(), "current replica log dir");
            Check.eq(null, rd.getFutureReplicaLogDir(), "future replica log dir");
        }
        return facts;
    }

    /** Calls whose APIs Strata does not serve: each must fail fast with UnsupportedVersionException. */
    static Map<String, Object> unsupported(String bootstrap) throws Exception {
        Map<String, Object> facts = new TreeMap<>();
        List<String> wrong = new ArrayList<>();
        try (Admin a = Check.admin(bootstrap)) {
            int node = a.describeCluster().nodes().get().iterator().next().id();
            ResourcePattern pat = new ResourcePattern(ResourceType.TOPIC, "t", PatternType.LITERAL);
            Map<String, KafkaFuture<?>> calls = new LinkedHashMap<>();
            calls.put("describeAcls", a.describeAcls(AclBindingFilter.ANY).values());
            calls.put("createAcls", a.createAcls(List.of(new AclBinding(pat,
                    new AccessControlEntry("User:x", "*", AclOperation.READ, AclPermissionType.ALLOW)))).all());
            calls.put("deleteAcls", a.deleteAcls(List.of(AclBindingFilter.ANY)).all());
            calls.put("alterReplicaLogDirs", a.alterReplicaLogDirs(
                    Map.of(new TopicPartitionReplica("t", 0, node), "/tmp")).all());
            calls.put("describeClientQuotas", a.describeClientQuotas(ClientQuotaFilter.all()).entities());
            calls.put("alterClientQuotas", a.alterClientQuotas(List.of(new ClientQuotaAlteration(
                    new ClientQuotaEntity(Map.of(ClientQuotaEntity.CLIENT_ID, "c")),
                    List.of(new ClientQuotaAlteration.Op("producer_byte_rate", 1000.0))))).all());
            calls.put("describeUserScramCredentials", a.describeUserScramCredentials().all());
            calls.put("alterUserScramCredentials", a.alterUserScramCredentials(List.of(new UserScramCredentialUpsertion(
                    "u", new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), "p"))).all());
            calls.put("createDelegationToken", a.createDelegationToken().delegationToken());
            calls.put("describeDelegationToken", a.describeDelegationToken().delegationTokens());
            calls.put("updateFeatures", a.updateFeatures(Map.of("group.version",
                    new FeatureUpdate((short) 1, FeatureUpdate.UpgradeType.UPGRADE)),
                    new org.apache.kafka.clients.admin.UpdateFeaturesOptions()).all());
            calls.put("unregisterBroker", a.unregisterBroker(99).all());
            calls.put("describeShareGroups", a.describeShareGroups(List.of("g")).all());
            calls.put("describeStreamsGroups", a.describeStreamsGroups(List.of("g")).all());
            for (var e : calls.entrySet()) {
                String outcome;
                try {
                    e.getValue().get(20, TimeUnit.SECONDS);
                    outcome = "succeeded";
                } catch (java.util.concurrent.TimeoutException te) {
                    outcome = "no answer in 20 s";
                } catch (Exception ex) {
                    Throwable t = Check.root(ex);
                    outcome = t.getClass().getSimpleName();
                }
                facts.put(e.getKey(), outcome);
                if (!outcome.equals(UnsupportedVersionException.class.getSimpleName())) {
                    wrong.add(e.getKey() + ": " + outcome);
                }
            }
        }
        Check.that(wrong.isEmpty(), "not UnsupportedVersionException: " + wrong);
        return facts;
    }
}
