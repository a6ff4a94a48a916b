package dev.strata.interop;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;

/**
 * KafkaProducer scenarios: each acks level, idempotence (the default), every compression codec,
 * headers and five requests in flight. Every record written is read back with a KafkaConsumer and
 * compared field by field (partition, offset, key, value, headers); the idempotent ones are also
 * seen by Admin#describeProducers, which the non-idempotent ones must not be.
 */
final class Producers {
    private Producers() {}

    static Map<String, Main.Scenario> all() {
        Map<String, Main.Scenario> m = new LinkedHashMap<>();
        m.put("acks_0", b -> roundTrip(b, "0", "none", 150, 3));
        m.put("acks_1", b -> roundTrip(b, "1", "none", 150, 3));
        m.put("acks_all_idempotent_default", b -> roundTrip(b, "all", "none", 150, 3));
        for (String codec : List.of("gzip", "snappy", "lz4", "zstd")) {
            m.put("codec_" + codec, b -> roundTrip(b, "all", codec, 300, 2));
        }
        m.put("headers", Producers::headers);
        m.put("max_in_flight_5", Producers::maxInFlight);
        return m;
    }

    private static Header[] headersOf(int i) {
        return new Header[] {
            new RecordHeader("idx", Integer.toString(i)),
            new RecordHeader("bin", new byte[] {0, (byte) i, (byte) 0xff}),
        };
    }

    /** A header built from a string or bytes (the client's own RecordHeader is internal). */
    record RecordHeader(String key, byte[] value) implements Header {
        RecordHeader(String key, String value) {
            this(key, value == null ? null : value.getBytes(StandardCharsets.UTF_8));
        }
    }

    static Map<String, Object> roundTrip(String bootstrap, String acks, String codec, int n, int partitions)
            throws Exception {
        String topic = Check.unique("acks" + acks + "-" + codec);
        Check.createTopic(bootstrap, topic, partitions);
        Properties p = Check.producer(bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, acks);
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        try (KafkaProducer<String, String> prod = new KafkaProducer<>(p)) {
            for (int i = 0; i < n; i++) {
                // Compressible values, so that a codec has something to do.
                String value = "value-" + i + "-" + "abcdefgh".repeat(8);
                sent.add(prod.send(new ProducerRecord<>(topic, null, "key-" + i, value,
                        new RecordHeaders(headersOf(i)))));
            }
            prod.flush();
        }
        Map<String, RecordMetadata> acked = new HashMap<>();
        for (int i = 0; i < n; i++) {
            acked.put("key-" + i, sent.get(i).get());
        }
        List<ConsumerRecord<String, String>> got = Check.read(bootstrap, topic, partitions, n, "read_uncommitted");
        Check.eq(n, got.size(), "records read back");
        for (ConsumerRecord<String, String> r : got) {
            RecordMetadata md = acked.remove(r.key());
            Check.that(md != null, "unexpected or duplicated key " + r.key());
            int i = Integer.parseInt(r.key().substring(4));
            Check.eq("value-" + i + "-" + "abcdefgh".repeat(8), r.value(), "value of " + r.key());
            Check.eq(md.partition(), r.partition(), "partition of " + r.key());
            if (!acks.equals("0")) {
                Check.eq(md.offset(), r.offset(), "offset of " + r.key());
            }
            Header[] h = r.headers().toArray();
            Check.eq(2, h.length, "headers of " + r.key());
            Check.eq("idx", h[0].key(), "first header key");
            Check.eq(Integer.toString(i), new String(h[0].value(), StandardCharsets.UTF_8), "first header value");
            Check.that(Arrays.equals(new byte[] {0, (byte) i, (byte) 0xff}, h[1].value()), "binary header of " + r.key());
        }
        // Idempotence is the default with acks=all; with acks 0 or 1 it is off (unless asked for).
        int producers = 0;
        try (Admin a = Check.admin(bootstrap)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int i = 0; i < partitions; i++) {
                tps.add(new TopicPartition(topic, i));
            }
            var states = a.describeProducers(tps).all().get();
            for (var e : states.entrySet()) {
                for (ProducerState s : e.getValue().activeProducers()) {
                    producers++;
                    Check.that(s.producerId() >= 0, "producer id " + s.producerId());
                    long count = got.stream().filter(r -> r.partition() == e.getKey().partition()).count();
                    Check.eq((int) count - 1, s.lastSequence(), "last sequence on " + e.getKey());
                }
            }
        }
        boolean idempotent = acks.equals("all");
        Check.eq(idempotent ? partitions : 0, producers, "active producers seen by describeProducers");
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("topic", topic);
        out.put("records", n);
        out.put("producers", producers);
        return out;
    }

    /** Null header values, repeated keys and an empty key survive the round trip in order. */
    static Map<String, Object> headers(String bootstrap) throws Exception {
        String topic = Check.unique("headers");
        Check.createTopic(bootstrap, topic, 1);
        try (KafkaProducer<String, String> prod = new KafkaProducer<>(Check.producer(bootstrap))) {
            RecordHeaders hs = new RecordHeaders();
            hs.add(new RecordHeader("dup", "one"));
            hs.add(new RecordHeader("nullvalue", (byte[]) null));
            hs.add(new RecordHeader("dup", "two"));
            hs.add(new RecordHeader("", "empty-key"));
            prod.send(new ProducerRecord<String, String>(topic, 0, (String) null, "with-headers", hs)).get();
            prod.send(new ProducerRecord<String, String>(topic, 0, (String) null, (String) null, new RecordHeaders())).get();
        }
        List<ConsumerRecord<String, String>> got = Check.read(bootstrap, topic, 1, 2, "read_uncommitted");
        Header[] h = got.get(0).headers().toArray();
        Check.eq(4, h.length, "header count");
        Check.eq(List.of("dup", "nullvalue", "dup", ""), Arrays.stream(h).map(Header::key).toList(), "header keys in order");
        Check.that(h[1].value() == null, "a null header value stays null");
        Check.eq("two", new String(h[2].value(), StandardCharsets.UTF_8), "second dup");
        Check.eq("two", new String(got.get(0).headers().lastHeader("dup").value(), StandardCharsets.UTF_8), "lastHeader");
        Check.eq(0, got.get(1).headers().toArray().length, "no headers");
        Check.that(got.get(1).value() == null && got.get(1).key() == null, "null key and value (a tombstone)");
        return Map.of("topic", topic);
    }

    /**
     * max.in.flight.requests.per.connection=5 with idempotence and tiny batches, so that several
     * produce requests are outstanding at once: the offsets must follow the send order, densely.
     */
    static Map<String, Object> maxInFlight(String bootstrap) throws Exception {
        String topic = Check.unique("inflight");
        Check.createTopic(bootstrap, topic, 1);
        Properties p = Check.producer(bootstrap);
        p.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, "5");
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, "200");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "0");
        int n = 3000;
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        try (KafkaProducer<String, String> prod = new KafkaProducer<>(p)) {
            for (int i = 0; i < n; i++) {
                sent.add(prod.send(new ProducerRecord<>(topic, 0, null, "r-" + i)));
            }
            prod.flush();
        }
        for (int i = 0; i < n; i++) {
            Check.eq((long) i, sent.get(i).get().offset(), "offset of record " + i + " (send order)");
        }
        List<ConsumerRecord<String, String>> got = Check.read(bootstrap, topic, 1, n, "read_uncommitted");
        for (int i = 0; i < n; i++) {
            Check.eq("r-" + i, got.get(i).value(), "record at offset " + i);
        }
        return Map.of("topic", topic, "records", n);
    }
}
