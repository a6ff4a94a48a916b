package dev.strata.interop;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.function.BooleanSupplier;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/** Assertions, client configurations and small read/write helpers shared by the scenarios. */
final class Check {
    /** The longest any single wait of a scenario may take. */
    static final Duration WAIT = Duration.ofSeconds(30);

    private Check() {}

    static void that(boolean cond, String what) {
        if (!cond) {
            throw new AssertionError(what);
        }
    }

    static void eq(Object want, Object got, String what) {
        if (!Objects.equals(want, got)) {
            throw new AssertionError(what + ": want " + want + ", got " + got);
        }
    }

    /** Waits for `cond` (polled every 50 ms) for at most `timeout`. */
    static void await(BooleanSupplier cond, Duration timeout, String what) throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (!cond.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out after " + timeout.toSeconds() + " s waiting for " + what);
            }
            Thread.sleep(50);
        }
    }

    /** The class and message of an error, its causes appended (ExecutionException unwrapped). */
    static String describe(Throwable e) {
        StringBuilder sb = new StringBuilder();
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof ExecutionException && t.getCause() != null) {
                continue;
            }
            if (sb.length() > 0) {
                sb.append(" <- ");
            }
            sb.append(t.getClass().getName()).append(": ").append(t.getMessage());
        }
        return sb.toString();
    }

    /** The innermost cause that is not an ExecutionException wrapper. */
    static Throwable root(Throwable e) {
        Throwable t = e;
        while ((t instanceof ExecutionException || t instanceof java.util.concurrent.CompletionException)
                && t.getCause() != null) {
            t = t.getCause();
        }
        return t;
    }

    static String unique(String prefix) {
        return "java-" + prefix + "-" + UUID.randomUUID().toString().substring(0, 8);
    }

    static Properties common(String bootstrap) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("request.timeout.ms", "15000");
        p.put("default.api.timeout.ms", "30000");
        return p;
    }

    static Properties producer(String bootstrap) {
        Properties p = common(bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        return p;
    }

    static Properties consumer(String bootstrap, String group) {
        Properties p = common(bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
        if (group != null) {
            p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            // The classic protocol: Strata serves JoinGroup/SyncGroup, not KIP-848's heartbeat.
            p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
        }
        return p;
    }

    static Admin admin(String bootstrap) {
        Properties p = common(bootstrap);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        return Admin.create(p);
    }

    static void createTopic(Admin a, String topic, int partitions) throws Exception {
        a.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get();
        await(() -> {
            try {
                return a.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().size() == partitions;
            } catch (Exception e) {
                return false;
            }
        }, WAIT, "topic " + topic + " in metadata");
    }

    static void createTopic(String bootstrap, String topic, int partitions) throws Exception {
        try (Admin a = admin(bootstrap)) {
            createTopic(a, topic, partitions);
        }
    }

    /** Reads `count` records from the start of `partitions` of `topic` (assigned, no group). */
    static List<ConsumerRecord<String, String>> read(String bootstrap, String topic, int partitions, int count,
                                                     String isolation) throws Exception {
        Properties p = consumer(bootstrap, null);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        List<ConsumerRecord<String, String>> out = new ArrayList<>();
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int i = 0; i < partitions; i++) {
                tps.add(new TopicPartition(topic, i));
            }
            c.assign(tps);
            c.seekToBeginning(tps);
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (out.size() < count) {
                that(System.nanoTime() < deadline, "read " + out.size() + " of " + count + " records of " + topic);
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    out.add(r);
                }
            }
            // Nothing beyond `count`: poll to the end of every partition.
            var ends = c.endOffsets(tps);
            long deadline2 = System.nanoTime() + WAIT.toNanos();
            while (tps.stream().anyMatch(tp -> c.position(tp) < ends.get(tp) && !isolation.equals("read_committed"))) {
                that(System.nanoTime() < deadline2, "reading to the end of " + topic);
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    out.add(r);
                }
            }
            if (isolation.equals("read_committed")) {
                // The last stable offset bounds what it can read; one more poll shows any extra.
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    out.add(r);
                }
            }
        }
        return out;
    }
}
