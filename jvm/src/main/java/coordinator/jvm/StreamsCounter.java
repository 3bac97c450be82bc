package coordinator.jvm;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * A Kafka Streams 4.4 instance of a stateful application in a streams group ({@code group.protocol=streams},
 * KIP-1071), driven as a process by the chaos harness and the tests, like the Python consumers of
 * {@code chaos_harness.real_consumer}.
 *
 * <p>The topology: the input topic's values become the keys ({@code selectKey}: a repartition topic), counted by
 * key ({@code groupByKey().count()}: the state store {@value #STORE}, with a changelog topic), every new count
 * written to the output topic (key, count as a decimal string). The record cache is off, so each input record
 * yields exactly one output record: a reader checks the output record by record.
 *
 * <p>Every line on stdout is one JSON event with {@code t} (wall clock, seconds) and {@code instance}:
 * {@code started}, {@code state} (the instance's state changes: from, to), {@code tasks} (the active and standby
 * tasks of its threads, as {@code subtopology_partition}, whenever they change), {@code error} (an uncaught
 * exception; the instance then shuts down), {@code stopped}. SIGTERM closes the instance ({@code close()}, what an
 * application does at shutdown: it commits, and a static member leaves only temporarily).
 *
 * <pre>
 * StreamsCounter --bootstrap-servers H:P --application-id APP --input IN --output OUT --state-dir DIR
 *     [--instance-id ID] [--threads N] [--commit-interval-ms MS] [--task-poll-ms MS]
 * </pre>
 */
public final class StreamsCounter {
    static final String STORE = "counts";

    private final String instance;

    private StreamsCounter(String instance) {
        this.instance = instance;
    }

    public static void main(String[] argv) throws InterruptedException {
        Map<String, String> args = parse(argv);
        String instanceId = args.get("instance-id");
        int failed = new StreamsCounter(instanceId).run(args);
        if (failed != 0) {
            System.exit(failed);  // runs the shutdown hook, which closes the instance
        }
    }

    private int run(Map<String, String> args) throws InterruptedException {
        Properties config = new Properties();
        config.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, required(args, "bootstrap-servers"));
        config.put(StreamsConfig.APPLICATION_ID_CONFIG, required(args, "application-id"));
        config.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
        config.put(StreamsConfig.STATE_DIR_CONFIG, required(args, "state-dir"));
        config.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, args.getOrDefault("threads", "1"));
        config.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, args.getOrDefault("commit-interval-ms", "100"));
        config.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.AT_LEAST_ONCE);
        // One output record per input record (no cache folding updates together): the output is checked record by record.
        config.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0");
        config.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        if (instance != null) {
            // Static membership (Kafka 4.4 with the streams protocol): each thread's member gets "-1", "-2"... appended.
            config.put(StreamsConfig.consumerPrefix(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG), instance);
        }

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(required(args, "input"), Consumed.with(Serdes.String(), Serdes.String()))
            .selectKey((key, value) -> value)
            .groupByKey(Grouped.with(Serdes.String(), Serdes.String()))
            .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as(STORE)
                       .withKeySerde(Serdes.String()).withValueSerde(Serdes.Long()))
            .toStream()
            .mapValues(count -> Long.toString(count))
            .to(required(args, "output"), Produced.with(Serdes.String(), Serdes.String()));

        KafkaStreams streams = new KafkaStreams(builder.build(), config);
        CountDownLatch closed = new CountDownLatch(1);
        streams.setStateListener((to, from) -> event("state", "\"from\":" + quote(from.name()) + ",\"to\":"
                                                              + quote(to.name())));
        streams.setUncaughtExceptionHandler(exception -> {
            event("error", "\"message\":" + quote(String.valueOf(exception)));
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close();
            event("stopped", "");
            closed.countDown();
        }, "streams-counter-shutdown"));

        event("started", "\"threads\":" + config.getProperty(StreamsConfig.NUM_STREAM_THREADS_CONFIG));
        streams.start();
        long pollMs = Long.parseLong(args.getOrDefault("task-poll-ms", "20"));
        String reported = "";
        // The tasks are read from the threads' metadata (what the instance runs), polled: Kafka Streams has no
        // public listener for task assignments under the streams protocol.
        while (!closed.await(pollMs, TimeUnit.MILLISECONDS)) {
            KafkaStreams.State state = streams.state();
            if (state == KafkaStreams.State.ERROR) {
                return 1;
            }
            if (!state.isRunningOrRebalancing()) {
                continue;
            }
            String tasks = tasks(streams);
            if (!tasks.equals(reported)) {
                reported = tasks;
                event("tasks", tasks);
            }
        }
        return 0;
    }

    private static String tasks(KafkaStreams streams) {
        TreeSet<String> active = new TreeSet<>();
        TreeSet<String> standby = new TreeSet<>();
        for (ThreadMetadata thread : streams.metadataForLocalThreads()) {
            for (TaskMetadata task : thread.activeTasks()) {
                active.add(task.taskId().toString());
            }
            for (TaskMetadata task : thread.standbyTasks()) {
                standby.add(task.taskId().toString());
            }
        }
        return "\"active\":" + list(active) + ",\"standby\":" + list(standby);
    }

    private synchronized void event(String name, String fields) {
        StringBuilder line = new StringBuilder("{\"event\":").append(quote(name))
            .append(",\"t\":").append(String.format("%.3f", System.currentTimeMillis() / 1000.0))
            .append(",\"instance\":").append(instance == null ? "null" : quote(instance));
        if (!fields.isEmpty()) {
            line.append(',').append(fields);
        }
        System.out.println(line.append('}'));
        System.out.flush();
    }

    private static String list(Iterable<String> items) {
        List<String> quoted = new ArrayList<>();
        for (String item : items) {
            quoted.add(quote(item));
        }
        return "[" + String.join(",", quoted) + "]";
    }

    private static String quote(String text) {
        StringBuilder out = new StringBuilder("\"");
        for (char c : text.toCharArray()) {
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        return out.append('"').toString();
    }

    private static Map<String, String> parse(String[] argv) {
        Map<String, String> args = new HashMap<>();
        for (int i = 0; i < argv.length; i += 2) {
            if (!argv[i].startsWith("--") || i + 1 >= argv.length) {
                throw new IllegalArgumentException("expected --name value pairs, got " + String.join(" ", argv));
            }
            args.put(argv[i].substring(2), argv[i + 1]);
        }
        return Collections.unmodifiableMap(args);
    }

    private static String required(Map<String, String> args, String name) {
        String value = args.get(name);
        if (value == null) {
            throw new IllegalArgumentException("--" + name + " is required");
        }
        return value;
    }
}
