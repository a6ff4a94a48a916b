package dev.strata.interop;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.consumer.RoundRobinAssignor;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;

/**
 * KafkaConsumer scenarios in classic groups (JoinGroup/SyncGroup): the range, round-robin and
 * cooperative-sticky assignors with two members (the assignment the leader computed reaches both,
 * the rebalance listeners see eager or incremental revocation, each record is read once), static
 * membership (a member restarted with its group.instance.id gets its partitions back without a
 * rebalance), seek, pause/resume, offsetsForTimes and commitSync/commitAsync.
 */
final class Consumers {
    private Consumers() {}

    static Map<String, Main.Scenario> all() {
        Map<String, Main.Scenario> m = new LinkedHashMap<>();
        m.put("assignor_range", b -> assignors(b, RangeAssignor.class.getName(), false));
        m.put("assignor_roundrobin", b -> assignors(b, RoundRobinAssignor.class.getName(), false));
        m.put("assignor_cooperative_sticky", b -> assignors(b, CooperativeStickyAssignor.class.getName(), true));
        m.put("static_membership", Consumers::staticMembership);
        m.put("seek", Consumers::seek);
        m.put("pause_resume", Consumers::pauseResume);
        m.put("offsets_for_times", Consumers::offsetsForTimes);
        m.put("commit_sync_async", Consumers::commitSyncAsync);
        m.put("group_protocol_consumer", Consumers::groupProtocolConsumer);
        m.put("share_consumer", Consumers::shareConsumer);
        return m;
    }

    static Properties groupConsumer(String bootstrap, String group, String clientId) {
        Properties p = Check.consumer(bootstrap, group);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
        p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "300");
        p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
        return p;
    }

    /** A group member polled by its own thread; records what its listener and polls saw. */
    static final class Member implements ConsumerRebalanceListener, AutoCloseable {
        final String name;
        final KafkaConsumer<String, String> consumer;
        final List<String> events = new ArrayList<>();
        final Set<TopicPartition> owned = new HashSet<>();
        final List<ConsumerRecord<String, String>> records = new ArrayList<>();
        final AtomicReference<Throwable> failure = new AtomicReference<>();
        volatile boolean running = true;
        volatile int generation = -1;
        private final Thread thread;

        Member(String name, Properties props, String topic) {
            this.name = name;
            this.consumer = new KafkaConsumer<>(props);
            this.thread = new Thread(() -> {
                try {
                    consumer.subscribe(List.of(topic), this);
                    while (running) {
                        var polled = consumer.poll(Duration.ofMillis(100));
                        synchronized (this) {
                            polled.forEach(records::add);
                            generation = consumer.groupMetadata().generationId();
                        }
                    }
                } catch (Throwable e) {
                    failure.set(e);
                }
            }, "member-" + name);
            thread.start();
        }

        @Override
        public synchronized void onPartitionsRevoked(Collection<TopicPartition> parts) {
            events.add("revoked " + sorted(parts));
            owned.removeAll(parts);
        }

        @Override
        public synchronized void onPartitionsAssigned(Collection<TopicPartition> parts) {
            events.add("assigned " + sorted(parts));
            owned.addAll(parts);
        }

        @Override
        public synchronized void onPartitionsLost(Collection<TopicPartition> parts) {
            events.add("lost " + sorted(parts));
            owned.removeAll(parts);
        }

        synchronized Set<Integer> owned() {
            Set<Integer> s = new TreeSet<>();
            owned.forEach(tp -> s.add(tp.partition()));
            return s;
        }

        synchronized int recordCount() {
            return records.size();
        }

        synchronized List<String> events() {
            return new ArrayList<>(events);
        }

        void check() {
            if (failure.get() != null) {
                throw new AssertionError("member " + name + " failed: " + Check.describe(failure.get()), failure.get());
            }
        }

        /** Stops polling; the consumer is closed by its own thread's owner (here) afterwards. */
        @Override
        public void close() {
            running = false;
            try {
                thread.join(30_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            consumer.close();
        }
    }

    static List<Integer> sorted(Collection<TopicPartition> parts) {
        return parts.stream().map(TopicPartition::partition).sorted().toList();
    }

    static void produce(String bootstrap, String topic, int partitions, int perPartition) throws Exception {
        try (KafkaProducer<String, String> prod = new KafkaProducer<>(Check.producer(bootstrap))) {
            for (int i = 0; i < partitions * perPartition; i++) {
                prod.send(new ProducerRecord<>(topic, i % partitions, null, "c-" + i));
            }
            prod.flush();
        }
    }

    static Map<String, Object> assignors(String bootstrap, String assignor, boolean cooperative) throws Exception {
        String topic = Check.unique("assign"), group = Check.unique("group");
        Check.createTopic(bootstrap, topic, 4);
        Properties pa = groupConsumer(bootstrap, group, "a");
        pa.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, assignor);
        Properties pb = groupConsumer(bootstrap, group, "b");
        pb.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, assignor);
        Map<String, Object> facts = new LinkedHashMap<>();
        try (Member a = new Member("a", pa, topic)) {
            Check.await(() -> {
                a.check();
                return a.owned().size() == 4;
            }, Check.WAIT, "member a owns all 4 partitions");
            try (Member b = new Member("b", pb, topic)) {
                Check.await(() -> {
                    a.check();
                    b.check();
                    return a.owned().size() == 2 && b.owned().size() == 2;
                }, Check.WAIT, "both members own 2 partitions (a " + a.owned() + ", b " + b.owned() + ")");
                Set<Integer> union = new TreeSet<>(a.owned());
                union.addAll(b.owned());
                Check.eq(Set.of(0, 1, 2, 3), union, "the members' assignments cover the topic");
                // Member ids start with the client id, so the leader sorts a before b.
                if (assignor.contains("Range")) {
                    Check.eq(Set.of(0, 1), a.owned(), "range: a's partitions");
                } else if (assignor.contains("RoundRobin")) {
                    Check.eq(Set.of(0, 2), a.owned(), "round-robin: a's partitions");
                }
                produce(bootstrap, topic, 4, 10);
                Check.await(() -> a.recordCount() + b.recordCount() >= 40, Check.WAIT, "40 records read by the group");
                Set<String> seen = new HashSet<>();
                for (Member m : List.of(a, b)) {
                    synchronized (m) {
                        for (ConsumerRecord<String, String> r : m.records) {
                            Check.that(seen.add(r.value()), "record " + r.value() + " read twice");
                            Check.that(m.owned().contains(r.partition()),
                                    m.name + " read partition " + r.partition() + " it does not own");
                        }
                    }
                }
                Check.eq(40, seen.size(), "distinct records read");
                List<String> ev = a.events();
                facts.put("a_events", ev);
                facts.put("b_events", b.events());
                if (cooperative) {
                    // Incremental: a gives up exactly the two partitions that move, never all four.
                    Check.that(ev.stream().noneMatch(e -> e.equals("revoked [0, 1, 2, 3]")), "cooperative revokes all: " + ev);
                    Check.that(ev.stream().anyMatch(e -> e.startsWith("revoked [") && e.split(",").length == 2),
                            "cooperative revokes the 2 that move: " + ev);
                } else {
                    Check.that(ev.contains("revoked [0, 1, 2, 3]"), "eager revokes everything on rebalance: " + ev);
                }
            }
        }
        return facts;
    }

    static Map<String, Object> staticMembership(String bootstrap) throws Exception {
        String topic = Check.unique("static"), group = Check.unique("static-group");
        Check.createTopic(bootstrap, topic, 2);
        Properties pa = groupConsumer(bootstrap, group, "a");
        pa.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, "instance-a");
        Properties pb = groupConsumer(bootstrap, group, "b");
        pb.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, "instance-b");
        // Long enough that the restarted b comes back before its session expires.
        pb.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "45000");
        pa.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "45000");
        Map<String, Object> facts = new LinkedHashMap<>();
        try (Member a = new Member("a", pa, topic)) {
            Set<Integer> bOwned;
            int generation;
            try (Member b = new Member("b", pb, topic)) {
                Check.await(() -> {
                    a.check();
                    b.check();
                    return a.owned().size() == 1 && b.owned().size() == 1 && a.generation == b.generation
                            && a.generation > 0;
                }, Check.WAIT, "a and b own one partition each");
                bOwned = b.owned();
                generation = a.generation;
            }
            List<String> before = a.events();
            // b's close sent no LeaveGroup (static member); its successor takes its place.
            try (Member b2 = new Member("b2", pb, topic)) {
                Check.await(() -> {
                    a.check();
                    b2.check();
                    return b2.owned().size() == 1;
                }, Check.WAIT, "the restarted b owns a partition");
                Check.eq(bOwned, b2.owned(), "the restarted static member gets its old partition");
                Check.eq(before, a.events(), "a saw no rebalance");
                Check.eq(generation, a.generation, "the generation did not change");
                facts.put("generation", generation);
            }
        }
        return facts;
    }

    static Map<String, Object> seek(String bootstrap) throws Exception {
        String topic = Check.unique("seek");
        Check.createTopic(bootstrap, topic, 1);
        produce(bootstrap, topic, 1, 20);
        TopicPartition tp = new TopicPartition(topic, 0);
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(Check.consumer(bootstrap, null))) {
            c.assign(List.of(tp));
            c.seek(tp, 7);
            Check.eq(7L, firstOffset(c), "first offset after seek(7)");
            c.seekToEnd(List.of(tp));
            Check.eq(20L, c.position(tp), "position after seekToEnd");
            c.seekToBeginning(List.of(tp));
            Check.eq(0L, c.position(tp), "position after seekToBeginning");
            c.seek(tp, new OffsetAndMetadata(15));
            Check.eq(15L, firstOffset(c), "first offset after seek(15)");
        }
        return Map.of();
    }

    private static long firstOffset(KafkaConsumer<String, String> c) {
        long deadline = System.nanoTime() + Check.WAIT.toNanos();
        while (System.nanoTime() < deadline) {
            var recs = c.poll(Duration.ofMillis(200));
            if (!recs.isEmpty()) {
                return recs.iterator().next().offset();
            }
        }
        throw new AssertionError("no record after seek");
    }

    static Map<String, Object> pauseResume(String bootstrap) throws Exception {
        String topic = Check.unique("pause");
        Check.createTopic(bootstrap, topic, 2);
        produce(bootstrap, topic, 2, 10);
        TopicPartition p0 = new TopicPartition(topic, 0), p1 = new TopicPartition(topic, 1);
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(Check.consumer(bootstrap, null))) {
            c.assign(List.of(p0, p1));
            c.seekToBeginning(List.of(p0, p1));
            c.pause(List.of(p0));
            Check.eq(Set.of(p0), c.paused(), "paused()");
            Map<Integer, Integer> counts = new HashMap<>();
            long deadline = System.nanoTime() + Check.WAIT.toNanos();
            while (counts.getOrDefault(1, 0) < 10) {
                Check.that(System.nanoTime() < deadline, "partition 1 read while 0 is paused");
                c.poll(Duration.ofMillis(200)).forEach(r -> counts.merge(r.partition(), 1, Integer::sum));
            }
            // A few more fetch rounds: partition 1 is drained, so only a paused 0 could answer.
            for (int i = 0; i < 3; i++) {
                c.poll(Duration.ofMillis(200)).forEach(r -> counts.merge(r.partition(), 1, Integer::sum));
            }
            Check.eq(0, counts.getOrDefault(0, 0), "records of the paused partition");
            c.resume(List.of(p0));
            while (counts.getOrDefault(0, 0) < 10) {
                Check.that(System.nanoTime() < deadline, "partition 0 read after resume");
                c.poll(Duration.ofMillis(200)).forEach(r -> counts.merge(r.partition(), 1, Integer::sum));
            }
            Check.eq(Map.of(0, 10, 1, 10), counts, "records per partition");
        }
        return Map.of();
    }

    static Map<String, Object> offsetsForTimes(String bootstrap) throws Exception {
        String topic = Check.unique("times");
        Check.createTopic(bootstrap, topic, 1);
        try (KafkaProducer<String, String> prod = new KafkaProducer<>(Check.producer(bootstrap))) {
            for (int i = 1; i <= 5; i++) {
                // CreateTime timestamps far in the past, one per second.
                prod.send(new ProducerRecord<>(topic, 0, 1_000_000_000_000L + i * 1000L, null, "t-" + i)).get();
            }
        }
        TopicPartition tp = new TopicPartition(topic, 0);
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(Check.consumer(bootstrap, null))) {
            Map<TopicPartition, OffsetAndTimestamp> r = c.offsetsForTimes(Map.of(tp, 1_000_000_002_500L));
            Check.eq(2L, r.get(tp).offset(), "offset of the first record at or after the time");
            Check.eq(1_000_000_003_000L, r.get(tp).timestamp(), "its timestamp");
            Check.eq(0L, c.offsetsForTimes(Map.of(tp, 0L)).get(tp).offset(), "a time before all records");
            Check.that(c.offsetsForTimes(Map.of(tp, 2_000_000_000_000L)).get(tp) == null, "a time after all records");
            Check.eq(Map.of(tp, 0L), c.beginningOffsets(List.of(tp)), "beginningOffsets");
            Check.eq(Map.of(tp, 5L), c.endOffsets(List.of(tp)), "endOffsets");
        }
        return Map.of();
    }

    static Map<String, Object> commitSyncAsync(String bootstrap) throws Exception {
        String topic = Check.unique("commit"), group = Check.unique("commit-group");
        Check.createTopic(bootstrap, topic, 2);
        produce(bootstrap, topic, 2, 10);
        TopicPartition p0 = new TopicPartition(topic, 0), p1 = new TopicPartition(topic, 1);
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(groupConsumer(bootstrap, group, "committer"))) {
            c.subscribe(List.of(topic));
            int n = 0;
            long deadline = System.nanoTime() + Check.WAIT.toNanos();
            while (n < 20) {
                Check.that(System.nanoTime() < deadline, "read " + n + " of 20");
                n += c.poll(Duration.ofMillis(200)).count();
            }
            c.commitSync();
            Check.eq(10L, c.committed(Set.of(p0)).get(p0).offset(), "committed after commitSync");
            AtomicReference<Object> done = new AtomicReference<>();
            c.commitAsync(Map.of(p0, new OffsetAndMetadata(4, "async-meta"), p1, new OffsetAndMetadata(6)),
                    (offsets, e) -> done.set(e == null ? offsets : e));
            Check.await(() -> {
                c.poll(Duration.ofMillis(50));
                return done.get() != null;
            }, Check.WAIT, "the commitAsync callback");
            Check.that(done.get() instanceof Map, "commitAsync failed: " + done.get());
            var committed = c.committed(Set.of(p0, p1));
            Check.eq(4L, committed.get(p0).offset(), "p0 after commitAsync");
            Check.eq("async-meta", committed.get(p0).metadata(), "p0's metadata");
            Check.eq(6L, committed.get(p1).offset(), "p1 after commitAsync");
        }
        try (Admin a = Check.admin(bootstrap)) {
            var offs = a.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            Check.eq(4L, offs.get(p0).offset(), "p0 as Admin lists it");
            Check.eq(6L, offs.get(p1).offset(), "p1 as Admin lists it");
        }
        // A new member of the group starts from the committed offsets.
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(groupConsumer(bootstrap, group, "next"))) {
            c.subscribe(List.of(topic));
            Map<Integer, Long> first = new HashMap<>();
            long deadline = System.nanoTime() + Check.WAIT.toNanos();
            while (first.size() < 2) {
                Check.that(System.nanoTime() < deadline, "the next member read both partitions");
                c.poll(Duration.ofMillis(200)).forEach(r -> first.putIfAbsent(r.partition(), r.offset()));
            }
            Check.eq(Map.of(0, 4L, 1, 6L), first, "where the next member starts");
        }
        return Map.of();
    }

    /**
     * A consumer of KIP-848's protocol (group.protocol=consumer), whose ConsumerGroupHeartbeat
     * Strata does not serve: the outcome (the first error of poll, or "assigned") is reported for
     * the test to judge, so that it fails fast rather than hangs.
     */
    static Map<String, Object> groupProtocolConsumer(String bootstrap) throws Exception {
        String topic = Check.unique("kip848"), group = Check.unique("kip848-group");
        Check.createTopic(bootstrap, topic, 1);
        Properties p = Check.consumer(bootstrap, group);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
        String outcome = "no assignment and no error in 20 s";
        long start = System.nanoTime();
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            c.subscribe(List.of(topic));
            long deadline = start + Duration.ofSeconds(20).toNanos();
            while (System.nanoTime() < deadline) {
                c.poll(Duration.ofMillis(200));
                if (!c.assignment().isEmpty()) {
                    outcome = "assigned";
                    break;
                }
            }
        } catch (Exception e) {
            outcome = Check.root(e).getClass().getSimpleName();
        }
        Map<String, Object> facts = new LinkedHashMap<>();
        facts.put("outcome", outcome);
        facts.put("after_ms", (System.nanoTime() - start) / 1_000_000);
        return facts;
    }

    /**
     * A KafkaShareConsumer (KIP-932 share groups; 4.1+ clients), whose ShareGroupHeartbeat
     * Strata does not serve: its outcome is reported as for {@link #groupProtocolConsumer}.
     */
    static Map<String, Object> shareConsumer(String bootstrap) throws Exception {
        String topic = Check.unique("share"), group = Check.unique("share-group");
        Check.createTopic(bootstrap, topic, 1);
        Properties p = Check.consumer(bootstrap, group);
        p.remove(ConsumerConfig.GROUP_PROTOCOL_CONFIG);
        p.remove(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG);
        p.remove(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG);
        String outcome = "no error in 20 s";
        long start = System.nanoTime();
        try (var c = new org.apache.kafka.clients.consumer.KafkaShareConsumer<String, String>(p)) {
            c.subscribe(List.of(topic));
            long deadline = start + Duration.ofSeconds(20).toNanos();
            while (System.nanoTime() < deadline) {
                c.poll(Duration.ofMillis(200));
            }
        } catch (Exception e) {
            outcome = Check.root(e).getClass().getSimpleName();
        }
        Map<String, Object> facts = new LinkedHashMap<>();
        facts.put("outcome", outcome);
        facts.put("after_ms", (System.nanoTime() - start) / 1_000_000);
        return facts;
    }
}
