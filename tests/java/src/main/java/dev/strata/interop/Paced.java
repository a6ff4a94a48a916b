package dev.strata.interop;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;

/**
 * {@code paced BOOTSTRAP TOPIC PARTITIONS COUNT RATE}: an idempotent producer (acks=all, five
 * requests in flight, retries until the 120 s delivery timeout) that sends "j-I" to partition
 * I mod PARTITIONS at RATE records/s and prints "ACKED N" after every 100 acknowledgements, so a
 * cluster test can SIGKILL a leader while it writes. It ends with
 * {@code DONE {"acked":N,"errors":[...]}} once every send has an answer; the test then reads the
 * topic back and checks that each record is there exactly once.
 */
final class Paced {
    private Paced() {}

    static void run(String bootstrap, String[] args) throws Exception {
        String topic = args[0];
        int partitions = Integer.parseInt(args[1]);
        int count = Integer.parseInt(args[2]);
        int rate = Integer.parseInt(args[3]);
        Properties p = Check.producer(bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, "5");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "120000");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "5000");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "60000");
        p.put(ProducerConfig.RETRY_BACKOFF_MS_CONFIG, "100");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "2");
        AtomicInteger acked = new AtomicInteger();
        AtomicReference<String> firstError = new AtomicReference<>();
        AtomicInteger errors = new AtomicInteger();
        long start = System.nanoTime();
        try (KafkaProducer<String, String> prod = new KafkaProducer<>(p)) {
            for (int i = 0; i < count; i++) {
                long due = start + (long) i * 1_000_000_000L / rate;
                long now = System.nanoTime();
                if (due > now) {
                    Thread.sleep((due - now) / 1_000_000, (int) ((due - now) % 1_000_000));
                }
                prod.send(new ProducerRecord<>(topic, i % partitions, null, "j-" + i), (md, e) -> {
                    if (e != null) {
                        errors.incrementAndGet();
                        firstError.compareAndSet(null, Check.describe(e));
                    } else if (acked.incrementAndGet() % 100 == 0) {
                        synchronized (System.out) {
                            System.out.println("ACKED " + acked.get());
                            System.out.flush();
                        }
                    }
                });
            }
            prod.flush();
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("acked", acked.get());
        out.put("errors", errors.get());
        out.put("first_error", firstError.get());
        System.out.println("DONE " + Json.write(out));
        System.out.flush();
    }
}
