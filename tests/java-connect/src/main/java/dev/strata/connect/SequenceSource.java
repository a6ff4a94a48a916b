package dev.strata.connect;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.source.ExactlyOnceSupport;
import org.apache.kafka.connect.source.SourceConnector;

/**
 * A source connector that emits a deterministic sequence, so that a checker can tell exactly which
 * records a run must produce: task i writes the values 1, 2, ..., {@code records.per.task} under
 * the key {@code t<i>} (one key, hence one partition and one order, per task).
 *
 * <p>Each record's source offset is the next value to emit, so a task restarted anywhere resumes
 * from the offset Connect committed. With {@code exactly.once.source.support=enabled} on the
 * workers the records and their offsets are written in one transaction per poll (KIP-618), and a
 * crash can neither repeat nor skip a value; without it the offsets are flushed periodically and
 * a crash repeats what was written since the last flush (the checker's negative control).
 *
 * <p>Config: {@code topic}, {@code records.per.task}, {@code batch.max} (values per poll, at most),
 * {@code rate} (values per second per task, so that kills land while the sequence is running).
 */
public final class SequenceSource extends SourceConnector {
    static final String TOPIC = "topic";
    static final String RECORDS = "records.per.task";
    static final String BATCH = "batch.max";
    static final String RATE = "rate";
    static final String TASK_ID = "task.id";

    static final ConfigDef CONFIG = new ConfigDef()
            .define(TOPIC, ConfigDef.Type.STRING, ConfigDef.Importance.HIGH, "the output topic")
            .define(RECORDS, ConfigDef.Type.LONG, ConfigDef.Importance.HIGH, "values each task emits")
            .define(BATCH, ConfigDef.Type.INT, 20, ConfigDef.Importance.LOW, "values per poll, at most")
            .define(RATE, ConfigDef.Type.DOUBLE, 200.0, ConfigDef.Importance.LOW, "values per second per task");

    private Map<String, String> props;

    @Override
    public String version() {
        return "1";
    }

    @Override
    public void start(Map<String, String> props) {
        CONFIG.parse(props); // refuses a bad config when the connector is created
        this.props = props;
    }

    @Override
    public Class<? extends Task> taskClass() {
        return SequenceTask.class;
    }

    @Override
    public List<Map<String, String>> taskConfigs(int maxTasks) {
        List<Map<String, String>> configs = new ArrayList<>();
        for (int i = 0; i < maxTasks; i++) {
            Map<String, String> c = new java.util.HashMap<>(props);
            c.put(TASK_ID, Integer.toString(i));
            configs.add(c);
        }
        return configs;
    }

    @Override
    public void stop() {}

    @Override
    public ConfigDef config() {
        return CONFIG;
    }

    /** The task's offsets say exactly where it resumes, so exactly-once delivery is possible. */
    @Override
    public ExactlyOnceSupport exactlyOnceSupport(Map<String, String> connectorConfig) {
        return ExactlyOnceSupport.SUPPORTED;
    }
}
