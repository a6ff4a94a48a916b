package dev.strata.interop;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.ProducerFencedException;

/**
 * Transactional KafkaProducer scenarios: consume-transform-produce with
 * sendOffsetsToTransaction and the consumer's group metadata (the offsets are committed with the
 * records, and only then), an abort (neither records nor offsets visible to read_committed
 * readers), and a zombie fenced by a second producer with the same transactional.id.
 */
final class Transactions {
    private Transactions() {}

    static Map<String, Main.Scenario> all() {
        Map<String, Main.Scenario> m = new LinkedHashMap<>();
        m.put("send_offsets_commit", Transactions::sendOffsetsCommit);
        m.put("abort_then_commit", Transactions::abortThenCommit);
        m.put("zombie_fenced", Transactions::zombieFenced);
        return m;
    }

    static KafkaProducer<String, String> txnProducer(String bootstrap, String txnId) {
        Properties p = Check.producer(bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "30000");
        KafkaProducer<String, String> prod = new KafkaProducer<>(p);
        prod.initTransactions();
        return prod;
    }

    private static void producePlain(String bootstrap, String topic, int partitions, int n) throws Exception {
        try (KafkaProducer<String, String> prod = new KafkaProducer<>(Check.producer(bootstrap))) {
            for (int i = 0; i < n; i++) {
                prod.send(new ProducerRecord<>(topic, i % partitions, null, "in-" + i));
            }
            prod.flush();
        }
    }

    private static Map<TopicPartition, Long> committed(Admin a, String group) throws Exception {
        Map<TopicPartition, Long> out = new HashMap<>();
        for (var e : a.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get().entrySet()) {
            if (e.getValue() != null) {
                out.put(e.getKey(), e.getValue().offset());
            }
        }
        return out;
    }

    /** Reads the input in a group and writes it transformed, its offsets in the same transaction. */
    private static Map<String, Object> copyInTransaction(String bootstrap, String in, String out, String group,
                                                         int n, boolean commit) throws Exception {
        Properties cp = Check.consumer(bootstrap, group);
        cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp);
             KafkaProducer<String, String> prod = txnProducer(bootstrap, Check.unique("txn"))) {
            c.subscribe(List.of(in));
            List<ConsumerRecord<String, String>> batch = new ArrayList<>();
            long deadline = System.nanoTime() + Check.WAIT.toNanos();
            while (batch.size() < n) {
                Check.that(System.nanoTime() < deadline, "the group consumer read " + batch.size() + " of " + n);
                c.poll(Duration.ofMillis(200)).forEach(batch::add);
            }
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            prod.beginTransaction();
            for (ConsumerRecord<String, String> r : batch) {
                prod.send(new ProducerRecord<>(out, r.partition(), null, r.value().replace("in-", "out-")));
                offsets.merge(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1),
                        (a, b) -> a.offset() > b.offset() ? a : b);
            }
            prod.sendOffsetsToTransaction(offsets, c.groupMetadata());
            // abortTransaction drops batches not sent yet: flush, so the aborted records are in
            // the log for the readers to skip (Kafka itself showed this under load).
            prod.flush();
            if (commit) {
                prod.commitTransaction();
            } else {
                prod.abortTransaction();
            }
            Map<String, Object> facts = new LinkedHashMap<>();
            facts.put("generation", c.groupMetadata().generationId());
            return facts;
        }
    }

    static Map<String, Object> sendOffsetsCommit(String bootstrap) throws Exception {
        String in = Check.unique("txn-in"), out = Check.unique("txn-out"), group = Check.unique("txn-group");
        int n = 40;
        Check.createTopic(bootstrap, in, 2);
        Check.createTopic(bootstrap, out, 2);
        producePlain(bootstrap, in, 2, n);
        Map<String, Object> facts = copyInTransaction(bootstrap, in, out, group, n, true);
        try (Admin a = Check.admin(bootstrap)) {
            Check.eq(Map.of(new TopicPartition(in, 0), 20L, new TopicPartition(in, 1), 20L), committed(a, group),
                    "offsets committed by the transaction");
        }
        List<ConsumerRecord<String, String>> got = Check.read(bootstrap, out, 2, n, "read_committed");
        Check.eq(n, got.size(), "committed records a read_committed reader sees");
        Check.eq((long) n, got.stream().map(ConsumerRecord::value).distinct().count(), "distinct values");
        facts.put("records", n);
        return facts;
    }

    static Map<String, Object> abortThenCommit(String bootstrap) throws Exception {
        String in = Check.unique("abort-in"), out = Check.unique("abort-out"), group = Check.unique("abort-group");
        Check.createTopic(bootstrap, in, 2);
        Check.createTopic(bootstrap, out, 2);
        producePlain(bootstrap, in, 2, 10);
        copyInTransaction(bootstrap, in, out, group, 10, false);
        try (Admin a = Check.admin(bootstrap)) {
            Check.eq(Map.of(), committed(a, group), "offsets of an aborted transaction");
        }
        // A later committed transaction of another producer on the same partitions.
        try (KafkaProducer<String, String> prod = txnProducer(bootstrap, Check.unique("txn"))) {
            prod.beginTransaction();
            for (int i = 0; i < 4; i++) {
                prod.send(new ProducerRecord<>(out, i % 2, null, "committed-" + i));
            }
            prod.commitTransaction();
        }
        List<ConsumerRecord<String, String>> rc = Check.read(bootstrap, out, 2, 4, "read_committed");
        Check.eq(4, rc.size(), "read_committed sees only the committed records");
        Check.that(rc.stream().allMatch(r -> r.value().startsWith("committed-")), "no aborted record read committed");
        List<ConsumerRecord<String, String>> ru = Check.read(bootstrap, out, 2, 14, "read_uncommitted");
        Check.eq(14, ru.size(), "read_uncommitted sees aborted and committed records");
        return Map.of("topic", out);
    }

    /**
     * A second producer with the same transactional.id fences the first, which has a transaction
     * open: the zombie's next produce is refused (Kafka answers a produce under the old epoch
     * with INVALID_PRODUCER_EPOCH) and so is its commit, and a read_committed reader sees only
     * the new instance's records. A second zombie that goes straight to commitTransaction is
     * refused by the coordinator (PRODUCER_FENCED).
     */
    static Map<String, Object> zombieFenced(String bootstrap) throws Exception {
        String topic = Check.unique("zombie");
        Check.createTopic(bootstrap, topic, 1);
        Map<String, Object> facts = new LinkedHashMap<>();
        for (boolean sendFirst : List.of(true, false)) {
            String txnId = Check.unique("zombie-txn");
            KafkaProducer<String, String> zombie = txnProducer(bootstrap, txnId);
            try {
                zombie.beginTransaction();
                zombie.send(new ProducerRecord<>(topic, 0, null, "zombie-" + sendFirst)).get();
                try (KafkaProducer<String, String> fresh = txnProducer(bootstrap, txnId)) {
                    if (sendFirst) {
                        facts.put("late_send", fenced(() -> zombie.send(new ProducerRecord<>(topic, 0, null, "late")).get()));
                    }
                    facts.put(sendFirst ? "commit_after_send" : "commit", fenced(() -> {
                        zombie.commitTransaction();
                        return null;
                    }));
                    fresh.beginTransaction();
                    fresh.send(new ProducerRecord<>(topic, 0, null, "fresh-" + sendFirst));
                    fresh.commitTransaction();
                }
            } finally {
                zombie.close(Duration.ZERO);
            }
        }
        List<ConsumerRecord<String, String>> got = Check.read(bootstrap, topic, 1, 2, "read_committed");
        Check.eq(List.of("fresh-true", "fresh-false"), got.stream().map(ConsumerRecord::value).toList(),
                "read_committed sees the new instances' records only");
        Check.that(String.valueOf(facts.get("commit")).contains("ProducerFencedException"),
                "a zombie's commit is fenced by the coordinator: " + facts.get("commit"));
        return facts;
    }

    /** Runs an action of a zombie, which must fail with a fencing error; returns that error. */
    private static String fenced(java.util.concurrent.Callable<Object> action) {
        try {
            action.call();
        } catch (Exception e) {
            for (Throwable t = e; t != null; t = t.getCause()) {
                if (t instanceof ProducerFencedException || t instanceof InvalidProducerEpochException) {
                    return t.getClass().getSimpleName();
                }
            }
            throw new AssertionError("a zombie failed without a fencing error: " + Check.describe(e), e);
        }
        throw new AssertionError("a fenced zombie's produce or commit succeeded");
    }
}
