package dev.strata.interop;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ElectionNotNeededException;

/**
 * Admin scenarios that need a 3-node cluster: a preferred-leader election that moves leadership
 * back to the first replica (after the cluster test's SIGKILL and restart moved it away; the
 * topic is the system property {@code strata.topic}), and a partition reassignment that moves
 * a replication-factor-2 partition to other brokers while its records stay readable.
 */
final class ClusterAdmins {
    private ClusterAdmins() {}

    static Map<String, Main.Scenario> all() {
        Map<String, Main.Scenario> m = new LinkedHashMap<>();
        m.put("elect_preferred", ClusterAdmins::electPreferred);
        m.put("reassign_move", ClusterAdmins::reassignMove);
        return m;
    }

    private static TopicDescription describe(Admin a, String topic) {
        try {
            return a.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
        } catch (Exception e) {
            throw new AssertionError(Check.describe(e), e);
        }
    }

    static Map<String, Object> electPreferred(String bootstrap) throws Exception {
        String topic = System.getProperty("strata.topic");
        Check.that(topic != null, "-Dstrata.topic names the topic");
        Map<String, Object> facts = new LinkedHashMap<>();
        try (Admin a = Check.admin(bootstrap)) {
            TopicDescription before = describe(a, topic);
            List<TopicPartition> moved = new ArrayList<>();
            for (var p : before.partitions()) {
                if (p.leader() == null || p.leader().id() != p.replicas().get(0).id()) {
                    moved.add(new TopicPartition(topic, p.partition()));
                }
            }
            facts.put("not_preferred", moved.stream().map(TopicPartition::partition).toList());
            Check.that(!moved.isEmpty(), "a partition led by a non-preferred replica: " + before);
            Set<TopicPartition> all = new java.util.HashSet<>();
            before.partitions().forEach(p -> all.add(new TopicPartition(topic, p.partition())));
            Map<TopicPartition, Optional<Throwable>> r = a.electLeaders(ElectionType.PREFERRED, all).partitions().get();
            for (var e : r.entrySet()) {
                if (moved.contains(e.getKey())) {
                    Check.that(e.getValue().isEmpty(), "preferred election of " + e.getKey() + ": " + e.getValue());
                } else {
                    Check.that(e.getValue().isPresent() && e.getValue().get() instanceof ElectionNotNeededException,
                            "preferred election of " + e.getKey() + " already led by its first replica: " + e.getValue());
                }
            }
            Check.await(() -> describe(a, topic).partitions().stream()
                    .allMatch(p -> p.leader() != null && p.leader().id() == p.replicas().get(0).id()),
                    Check.WAIT, "every partition led by its first replica");
        }
        return facts;
    }

    static Map<String, Object> reassignMove(String bootstrap) throws Exception {
        String topic = Check.unique("reassign");
        TopicPartition tp = new TopicPartition(topic, 0);
        Map<String, Object> facts = new LinkedHashMap<>();
        try (Admin a = Check.admin(bootstrap)) {
            List<Integer> nodes = a.describeCluster().nodes().get().stream().map(Node::id).sorted().toList();
            Check.eq(3, nodes.size(), "brokers");
            List<Integer> from = List.of(nodes.get(0), nodes.get(1));
            List<Integer> to = List.of(nodes.get(1), nodes.get(2));
            a.createTopics(List.of(new NewTopic(topic, Map.of(0, from)))).all().get();
            Check.await(() -> {
                try {
                    var p = describe(a, topic).partitions().get(0);
                    return p.isr().size() == 2;
                } catch (AssertionError e) {
                    return false;
                }
            }, Check.WAIT, "both replicas in sync");
            try (KafkaProducer<String, String> prod = new KafkaProducer<>(Check.producer(bootstrap))) {
                for (int i = 0; i < 50; i++) {
                    prod.send(new ProducerRecord<>(topic, 0, null, "m-" + i));
                }
                prod.flush();
            }
            a.alterPartitionReassignments(Map.of(tp, Optional.of(new NewPartitionReassignment(to)))).all().get();
            Check.await(() -> {
                try {
                    return a.listPartitionReassignments().reassignments().get().isEmpty()
                            && describe(a, topic).partitions().get(0).replicas().stream().map(Node::id).toList()
                                    .equals(to);
                } catch (Exception e) {
                    throw new AssertionError(Check.describe(e), e);
                }
            }, Check.WAIT, "the partition moved to " + to);
            var p = describe(a, topic).partitions().get(0);
            Check.that(to.contains(p.leader().id()), "the leader is one of the new replicas: " + p);
            facts.put("replicas", to);
        }
        List<ConsumerRecord<String, String>> got = Check.read(bootstrap, topic, 1, 50, "read_uncommitted");
        Check.eq(50, got.size(), "records after the move");
        return facts;
    }
}
