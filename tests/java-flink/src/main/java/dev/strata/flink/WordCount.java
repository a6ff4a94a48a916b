package dev.strata.flink;

import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.serialization.SimpleStringSchema;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.connector.kafka.lineage.DefaultKafkaDatasetFacet;
import org.apache.flink.connector.kafka.lineage.DefaultKafkaDatasetIdentifier;
import org.apache.flink.connector.kafka.lineage.KafkaDatasetFacet;
import org.apache.flink.connector.kafka.lineage.KafkaDatasetFacetProvider;
import org.apache.flink.connector.kafka.sink.KafkaRecordSerializationSchema;
import org.apache.flink.connector.kafka.sink.KafkaSink;
import org.apache.flink.connector.kafka.sink.TransactionNamingStrategy;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.JobListener;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.util.Collector;
import org.apache.kafka.clients.producer.ProducerRecord;

/**
 * A Flink word count run in a local mini cluster inside this JVM, so that a test can SIGKILL the
 * whole job (job manager, task managers and the Kafka clients at once) and start it again from
 * its latest retained checkpoint.
 *
 * <p>Usage: {@code WordCount BOOTSTRAP INPUT OUTPUT GROUP_ID TXN_ID_PREFIX CHECKPOINT_DIR
 * [RESTORE_PATH]}. Lines of words are read from INPUT by a {@link KafkaSource} (read_committed;
 * its offsets live in Flink's checkpoints, not in the consumer group), split into words, keyed by
 * word, counted in keyed {@link ValueState}, and every new count is written to OUTPUT as (word,
 * decimal count) by a {@link KafkaSink}. The output of each word is 1, 2, ..., n exactly when the
 * pipeline is exactly-once end to end.
 *
 * <p>With {@link DeliveryGuarantee#EXACTLY_ONCE} the sink writes each checkpoint interval in a
 * Kafka transaction with the transactional id {@code TXN_ID_PREFIX-subtask-checkpoint}: the
 * transaction is flushed (pre-committed) at the checkpoint barrier, its producer id and epoch go
 * into the checkpoint, and it is committed when the checkpoint completes. After a restart from
 * that checkpoint the sink commits it again by resuming the producer id and epoch (EndTxn
 * without InitProducerId), and aborts the lingering transactions of later checkpoints that never
 * completed. Checkpoints go to CHECKPOINT_DIR every few hundred ms and are retained when the job
 * stops (the test finds the newest {@code chk-N/_metadata} and passes it as RESTORE_PATH).
 *
 * <p>System properties: {@code strata.guarantee} (EXACTLY_ONCE, or AT_LEAST_ONCE for the checker's
 * negative control), {@code strata.naming} (the sink's TransactionNamingStrategy, INCREMENTING or
 * POOLING: the latter finds lingering transactions with ListTransactions),
 * {@code strata.parallelism} (2), {@code strata.checkpoint.ms} (300), {@code strata.halt.file} (unset: a
 * file whose appearance halts the JVM after a checkpoint completed and before the sink committed
 * it, see {@link HaltBeforeCommit}). The process prints
 * {@code JOB SUBMITTED id} once the job runs, and exits non-zero if the job fails for good.
 */
public final class WordCount {
    private WordCount() {}

    /** The running count of each word: keyed state, so it is in every checkpoint. */
    static final class Count extends KeyedProcessFunction<String, String, Tuple2<String, Long>> {
        private static final long serialVersionUID = 1L;
        private transient ValueState<Long> count;

        @Override
        public void open(OpenContext context) {
            count = getRuntimeContext().getState(new ValueStateDescriptor<>("count", Types.LONG));
        }

        @Override
        public void processElement(String word, Context ctx, Collector<Tuple2<String, Long>> out) throws Exception {
            Long before = count.value();
            long now = before == null ? 1 : before + 1;
            count.update(now);
            out.collect(Tuple2.of(word, now));
        }
    }

    /**
     * (word, count) as a record keyed by the word (so a word's counts share a partition). It names
     * its topic (KafkaDatasetFacetProvider): the POOLING naming strategy needs that to list the
     * lingering transactions that wrote to it.
     */
    static final class Serializer implements KafkaRecordSerializationSchema<Tuple2<String, Long>>,
            KafkaDatasetFacetProvider {
        private static final long serialVersionUID = 1L;
        private final String topic;

        Serializer(String topic) {
            this.topic = topic;
        }

        @Override
        public ProducerRecord<byte[], byte[]> serialize(Tuple2<String, Long> e, KafkaSinkContext ctx, Long timestamp) {
            return new ProducerRecord<>(topic, e.f0.getBytes(StandardCharsets.UTF_8),
                    String.valueOf(e.f1).getBytes(StandardCharsets.UTF_8));
        }

        @Override
        public Optional<KafkaDatasetFacet> getKafkaDatasetFacet() {
            return Optional.of(new DefaultKafkaDatasetFacet(DefaultKafkaDatasetIdentifier.ofTopics(List.of(topic))));
        }
    }

    static Configuration config(String checkpointDir, String restorePath) {
        Map<String, String> c = new HashMap<>();
        c.put("execution.checkpointing.interval", System.getProperty("strata.checkpoint.ms", "300") + " ms");
        c.put("execution.checkpointing.mode", "EXACTLY_ONCE");
        c.put("execution.checkpointing.dir", "file://" + checkpointDir);
        c.put("execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION");
        c.put("execution.checkpointing.num-retained", "2");
        c.put("state.backend.type", "hashmap");
        // A failure inside the job (e.g. a broker unreachable for a while) restarts it in this
        // JVM from its latest checkpoint; only a failure that outlasts this is fatal.
        c.put("restart-strategy.type", "fixed-delay");
        c.put("restart-strategy.fixed-delay.attempts", "20");
        c.put("restart-strategy.fixed-delay.delay", "2 s");
        c.put("taskmanager.numberOfTaskSlots", "4");
        if (restorePath != null) {
            c.put("execution.state-recovery.path", restorePath);
        }
        return Configuration.fromMap(c);
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 6 && args.length != 7) {
            System.err.println("usage: WordCount BOOTSTRAP INPUT OUTPUT GROUP_ID TXN_ID_PREFIX CHECKPOINT_DIR [RESTORE_PATH]");
            System.exit(2);
        }
        String bootstrap = args[0], input = args[1], output = args[2], group = args[3], prefix = args[4];
        String restore = args.length == 7 ? args[6] : null;
        DeliveryGuarantee guarantee = DeliveryGuarantee.valueOf(System.getProperty("strata.guarantee", "EXACTLY_ONCE"));
        TransactionNamingStrategy naming =
                TransactionNamingStrategy.valueOf(System.getProperty("strata.naming", "INCREMENTING"));

        String haltFile = System.getProperty("strata.halt.file");

        StreamExecutionEnvironment env = StreamExecutionEnvironment.createLocalEnvironment(
                Integer.parseInt(System.getProperty("strata.parallelism", "2")), config(args[5], restore));

        KafkaSource<String> source = KafkaSource.<String>builder()
                .setBootstrapServers(bootstrap)
                .setTopics(input)
                .setGroupId(group)
                // Only where no checkpoint is restored: a restored job resumes at its offsets.
                .setStartingOffsets(OffsetsInitializer.earliest())
                .setValueOnlyDeserializer(new SimpleStringSchema())
                .setProperty("isolation.level", "read_committed")
                .build();

        KafkaSink<Tuple2<String, Long>> sink = KafkaSink.<Tuple2<String, Long>>builder()
                .setBootstrapServers(bootstrap)
                .setRecordSerializer(new Serializer(output))
                .setDeliveryGuarantee(guarantee)
                .setTransactionalIdPrefix(prefix)
                .setTransactionNamingStrategy(naming)
                // At most the broker's transaction.max.timeout.ms (else InitProducerId fails with
                // INVALID_TRANSACTION_TIMEOUT); long enough that a prepared transaction outlives
                // a restart, so the restored job can still commit it.
                .setProperty("transaction.timeout.ms", "60000")
                .build();

        env.fromSource(source, WatermarkStrategy.noWatermarks(), "lines")
                .flatMap((String line, Collector<String> out) -> {
                    for (String w : line.toLowerCase(Locale.ROOT).split("\\s+")) {
                        if (!w.isEmpty()) {
                            out.collect(w);
                        }
                    }
                })
                .returns(Types.STRING)
                .name("words")
                .keyBy(w -> w)
                .process(new Count())
                .returns(Types.TUPLE(Types.STRING, Types.LONG))
                .name("count")
                .sinkTo(haltFile == null ? sink : new HaltBeforeCommit<>(sink, haltFile))
                .name("counts");

        env.registerJobListener(new JobListener() {
            @Override
            public void onJobSubmitted(JobClient client, Throwable t) {
                System.out.println(t == null ? "JOB SUBMITTED " + client.getJobID() : "JOB NOT SUBMITTED " + t);
                System.out.flush();
            }

            @Override
            public void onJobExecuted(org.apache.flink.api.common.JobExecutionResult result, Throwable t) {}
        });
        System.out.println("STARTING guarantee=" + guarantee + " naming=" + naming + " restore=" + restore);
        System.out.flush();
        try {
            env.execute("strata-flink-word-count");
        } catch (Exception e) {
            System.err.println("the job failed for good; exiting");
            e.printStackTrace();
            System.exit(1);
        }
    }
}
