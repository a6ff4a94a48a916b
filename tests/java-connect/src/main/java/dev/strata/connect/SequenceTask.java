package dev.strata.connect;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;

import org.apache.kafka.common.config.AbstractConfig;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.source.SourceTask;

/**
 * One task of {@link SequenceSource}: emits {@code next, next + 1, ...} up to
 * {@code records.per.task} under key {@code t<id>}, paced at {@code rate} values a second, a
 * random number of them (1 to {@code batch.max}) per poll. It starts from the offset Connect
 * committed for its source partition ({@code {"task": id}}), and logs where on stdout
 * ({@code TASK id START next}), so a test can see every restart's resume point.
 */
public final class SequenceTask extends SourceTask {
    private String topic;
    private String key;
    private Map<String, Object> partition;
    private long total;
    private int batchMax;
    private double rate;
    private long next;
    private long startedNanos;
    private long emittedSinceStart;

    @Override
    public String version() {
        return "1";
    }

    @Override
    public void start(Map<String, String> props) {
        AbstractConfig config = new AbstractConfig(SequenceSource.CONFIG, props);
        String id = props.get(SequenceSource.TASK_ID);
        topic = config.getString(SequenceSource.TOPIC);
        total = config.getLong(SequenceSource.RECORDS);
        batchMax = config.getInt(SequenceSource.BATCH);
        rate = config.getDouble(SequenceSource.RATE);
        key = "t" + id;
        partition = Map.of("task", id);
        Map<String, Object> offset = context.offsetStorageReader().offset(partition);
        next = offset == null ? 1 : ((Number) offset.get("next")).longValue();
        startedNanos = System.nanoTime();
        System.out.println("TASK " + id + " START " + next);
        System.out.flush();
    }

    @Override
    public List<SourceRecord> poll() throws InterruptedException {
        if (next > total) {
            Thread.sleep(200);
            return null;
        }
        // Paced: value k of this start is due k / rate seconds after it.
        long dueNanos = startedNanos + (long) (emittedSinceStart / rate * 1e9);
        long waitMs = (dueNanos - System.nanoTime()) / 1_000_000;
        if (waitMs > 0) {
            Thread.sleep(waitMs);
        }
        int n = (int) Math.min(ThreadLocalRandom.current().nextInt(1, batchMax + 1), total - next + 1);
        List<SourceRecord> records = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            long v = next + i;
            records.add(new SourceRecord(partition, Map.of("next", v + 1), topic, null, Schema.STRING_SCHEMA, key,
                    Schema.STRING_SCHEMA, Long.toString(v)));
        }
        next += n;
        emittedSinceStart += n;
        return records;
    }

    @Override
    public void stop() {}
}
