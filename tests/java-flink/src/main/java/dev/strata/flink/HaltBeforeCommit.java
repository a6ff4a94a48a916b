package dev.strata.flink;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Collection;
import java.util.stream.Collectors;

import org.apache.flink.api.connector.sink2.Committer;
import org.apache.flink.api.connector.sink2.CommitterInitContext;
import org.apache.flink.api.connector.sink2.WriterInitContext;
import org.apache.flink.connector.kafka.sink.KafkaCommittable;
import org.apache.flink.connector.kafka.sink.KafkaSink;
import org.apache.flink.connector.kafka.sink.KafkaWriterState;
import org.apache.flink.connector.kafka.sink.TwoPhaseCommittingStatefulSink;
import org.apache.flink.core.io.SimpleVersionedSerializer;
import org.apache.flink.streaming.api.connector.sink2.CommittableMessage;
import org.apache.flink.streaming.api.connector.sink2.SupportsPostCommitTopology;
import org.apache.flink.streaming.api.datastream.DataStream;

/**
 * The KafkaSink, with a hook that makes the test's hardest crash deterministic: the JVM halts
 * after a checkpoint completed and before the sink committed that checkpoint's transactions.
 *
 * <p>The committer runs only once Flink has told it that a checkpoint completed (its
 * transactions are then recorded in the checkpoint as prepared). When the file HALT_FILE exists
 * as a commit is about to run, the committer deletes it (one subtask wins the delete), prints
 * {@code HALT BEFORE COMMIT} with the transactional ids it was going to commit, and halts the
 * JVM at once (no shutdown hooks, like a SIGKILL). The transactions stay open on the broker;
 * the job restored from that checkpoint must commit them by resuming their producer id and
 * epoch. Everything else is delegated to the KafkaSink unchanged.
 */
final class HaltBeforeCommit<IN>
        implements TwoPhaseCommittingStatefulSink<IN, KafkaWriterState, KafkaCommittable>,
                SupportsPostCommitTopology<KafkaCommittable> {
    private static final long serialVersionUID = 1L;
    /** The exit status of the halt, which the test tells from a crash. */
    static final int HALT_STATUS = 77;

    private final KafkaSink<IN> sink;
    private final String haltFile;

    HaltBeforeCommit(KafkaSink<IN> sink, String haltFile) {
        this.sink = sink;
        this.haltFile = haltFile;
    }

    @Override
    public PrecommittingStatefulSinkWriter<IN, KafkaWriterState, KafkaCommittable> createWriter(WriterInitContext context)
            throws IOException {
        return sink.createWriter(context);
    }

    @Override
    public PrecommittingStatefulSinkWriter<IN, KafkaWriterState, KafkaCommittable> restoreWriter(
            WriterInitContext context, Collection<KafkaWriterState> states) throws IOException {
        return sink.restoreWriter(context, states);
    }

    @Override
    public SimpleVersionedSerializer<KafkaWriterState> getWriterStateSerializer() {
        return sink.getWriterStateSerializer();
    }

    @Override
    public Committer<KafkaCommittable> createCommitter(CommitterInitContext context) throws IOException {
        Committer<KafkaCommittable> committer = sink.createCommitter(context);
        Path trigger = Paths.get(haltFile);
        return new Committer<>() {
            @Override
            public void commit(Collection<CommitRequest<KafkaCommittable>> requests)
                    throws IOException, InterruptedException {
                if (!requests.isEmpty() && Files.deleteIfExists(trigger)) {
                    String ids = requests.stream()
                            .map(r -> r.getCommittable().getTransactionalId())
                            .collect(Collectors.joining(" "));
                    System.out.println("HALT BEFORE COMMIT " + ids);
                    System.out.flush();
                    Runtime.getRuntime().halt(HALT_STATUS);
                }
                committer.commit(requests);
            }

            @Override
            public void close() throws IOException {
                try {
                    committer.close();
                } catch (IOException | RuntimeException e) {
                    throw e;
                } catch (Exception e) {
                    throw new IOException("closing the KafkaSink's committer", e);
                }
            }
        };
    }

    @Override
    public SimpleVersionedSerializer<KafkaCommittable> getCommittableSerializer() {
        return sink.getCommittableSerializer();
    }

    @Override
    public void addPostCommitTopology(DataStream<CommittableMessage<KafkaCommittable>> committables) {
        sink.addPostCommitTopology(committables);
    }
}
