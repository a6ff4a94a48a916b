package dev.strata.streams;

import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.config.TopicConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * A Kafka Streams word count run as its own process, so that a test can SIGKILL it.
 *
 * <p>Usage: {@code WordCount BOOTSTRAP APPLICATION_ID INPUT OUTPUT STATE_DIR}. Lines of words are
 * read from INPUT; each word is re-keyed (a repartition topic by word), counted in a persistent
 * state store (backed by a changelog topic), and every new count is written to OUTPUT as
 * (word, decimal count) - the store's cache is off, so every update is emitted, and the output of
 * each word is 1, 2, ..., n exactly when the processing is exactly-once.
 *
 * <p>{@code processing.guarantee=exactly_once_v2}: one transactional producer per stream thread,
 * with the input offsets committed in the transaction (TxnOffsetCommit carrying the consumer
 * group's generation and member id, KIP-447), so a zombie thread of an earlier generation is
 * fenced by the group coordinator.
 *
 * <p>Internal topics are created with replication factor 3 and min.insync.replicas 2 (the test's
 * cluster has 3 nodes, one of which may be down), or 1 and 1 with {@code -Dstrata.replication=1}.
 * One standby replica of each task's state store is kept on the other instance. Session timeouts are short so that a SIGKILLed
 * instance's tasks move to the survivor in seconds. A stream thread that dies of an unexpected
 * error is replaced (and the error logged to stderr); the process exits non-zero if the whole
 * application reaches ERROR, so that its supervisor starts it again.
 */
public final class WordCount {
    private WordCount() {}

    /** The topology: lines -> words (repartitioned by word) -> counts store -> output. */
    static Topology topology(String input, String output) {
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\s+")))
                .filter((k, word) -> !word.isEmpty())
                .groupBy((k, word) -> word, Grouped.with("words", Serdes.String(), Serdes.String()))
                .count(Materialized.as("counts"))
                .toStream()
                .mapValues(String::valueOf)
                .to(output, Produced.with(Serdes.String(), Serdes.String()));
        return builder.build();
    }

    static Properties config(String bootstrap, String applicationId, String stateDir) {
        Properties p = new Properties();
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, applicationId);
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        // -Dstrata.guarantee=at_least_once runs the same application without transactions: the
        // checker's negative control (a kill then shows as repeated counts).
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, System.getProperty("strata.guarantee", StreamsConfig.EXACTLY_ONCE_V2));
        // Purge the repartition topic (DeleteRecords below the committed offsets) every second
        // rather than every 30 s, so that a short run exercises it too.
        p.put(StreamsConfig.REPARTITION_PURGE_INTERVAL_MS_CONFIG, 1000);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        // Off: with the cache on, updates of a key within a commit interval are merged, so a
        // word's output would skip values (correct, but not the 1..n the checker asserts).
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        // -Dstrata.replication=1 on a one-node cluster (min.insync.replicas 1 there).
        int replication = Integer.getInteger("strata.replication", 3);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, replication);
        p.put(StreamsConfig.topicPrefix(TopicConfig.MIN_IN_SYNC_REPLICAS_CONFIG), replication > 1 ? "2" : "1");
        // A warm copy of each task's store on the other instance (restored from the changelog
        // as it is written), so a task that moves there starts from it instead of from scratch;
        // exactly-once Streams must then discard whatever the standby read past the last commit.
        p.put(StreamsConfig.NUM_STANDBY_REPLICAS_CONFIG, 1);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 6000);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1000);
        p.put(StreamsConfig.producerPrefix(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG), 10000);
        return p;
    }

    public static void main(String[] args) throws InterruptedException {
        if (args.length != 5) {
            System.err.println("usage: WordCount BOOTSTRAP APPLICATION_ID INPUT OUTPUT STATE_DIR");
            System.exit(2);
        }
        KafkaStreams streams = new KafkaStreams(topology(args[2], args[3]), config(args[0], args[1], args[4]));
        CountDownLatch failed = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            System.out.println("STATE " + before + " -> " + now);
            System.out.flush();
            if (now == KafkaStreams.State.ERROR) {
                failed.countDown();
            }
        });
        streams.setUncaughtExceptionHandler(e -> {
            System.err.println("stream thread died; replacing it: " + e);
            e.printStackTrace();
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        // On SIGTERM: close (commit or abort the open transactions, leave the group) and say
        // whether that finished in time, for the test's clean-stop check.
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            boolean closed = streams.close(Duration.ofSeconds(40));
            System.out.println("CLOSED " + closed + " " + streams.state());
            System.out.flush();
        }));
        streams.start();
        failed.await();
        System.err.println("the application reached ERROR; exiting");
        streams.close();
        System.exit(1);
    }
}
