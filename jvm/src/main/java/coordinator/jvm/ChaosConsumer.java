package coordinator.jvm;

import java.time.Duration;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.StringJoiner;
import java.util.TreeSet;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * The Java consumer (kafka-clients 4.4, the classic group protocol) as the chaos harness's real consumers are:
 * chaos_harness.real_consumer's processes, with the same options and the same JSON-line events on stdout.
 *
 * <pre>
 * java -cp ... coordinator.jvm.ChaosConsumer --bootstrap-servers HOST:PORT --group G --topic T \
 *     [--instance-id I] [--client-id C] [--session-timeout-ms MS] [--rebalance-timeout-ms MS] \
 *     --heartbeat-interval-ms MS
 * </pre>
 *
 * It subscribes to one topic (the range assignor, as the Python consumers' groups use), and in a loop polls, prints
 * the records it got and commits them synchronously. Events: {@code started}, {@code assigned} / {@code revoked}
 * (partition lists; {@code assigned} also has the {@code generation} it came with, which the Python libraries do not
 * tell: the rebalances the client lived through, against any coordinator), {@code records} ([partition, offset] pairs), {@code committed} ({partition: next offset}),
 * {@code stopped}; each with {@code t} (wall clock, seconds) and {@code instance}. SIGTERM or SIGINT stops it after
 * the current batch is committed, then the consumer is closed (a dynamic member sends LeaveGroup then, a static one
 * does not) and the process exits 0. The heartbeat interval is the parent's to choose (real_consumer's
 * heartbeat_interval_ms, the one place of that rule). Its own log goes to stderr at WARN.
 */
public final class ChaosConsumer {
    private final String instance;
    private volatile boolean stopping;
    private volatile int exitStatus = 1;

    private ChaosConsumer(String instance) {
        this.instance = instance;
    }

    /** The client's log: WARN to stderr (stdout carries the events), unless the command line names another. */
    static final String LOG_CONFIG = "classpath:coordinator/jvm/client-log4j2.properties";

    public static void main(String[] argv) {
        if (System.getProperty("log4j2.configurationFile") == null) {
            System.setProperty("log4j2.configurationFile", LOG_CONFIG);  // before the first logger exists
        }
        Map<String, String> args = parse(argv);
        ChaosConsumer chaos = new ChaosConsumer(args.get("instance-id"));
        Properties config = new Properties();
        config.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args.get("bootstrap-servers"));
        config.put(ConsumerConfig.GROUP_ID_CONFIG, args.get("group"));
        config.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
        config.put(ConsumerConfig.CLIENT_ID_CONFIG, args.getOrDefault("client-id", "real-consumer"));
        config.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, args.getOrDefault("session-timeout-ms", "10000"));
        config.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, args.get("heartbeat-interval-ms"));
        config.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, args.getOrDefault("rebalance-timeout-ms", "20000"));
        config.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, RangeAssignor.class.getName());
        config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        config.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        config.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        config.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        if (args.containsKey("instance-id")) {
            config.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, args.get("instance-id"));
        }
        chaos.report("started", "\"library\":\"java\"");
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(config);
        Thread main = Thread.currentThread();
        // The JVM exits with 128 + the signal's number after its shutdown hooks, whatever they did; the Python
        // consumers exit 0 after a clean stop, so the hook ends the process itself, once the main thread has
        // committed and closed, with the main thread's status.
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            chaos.stopping = true;
            consumer.wakeup();
            try {
                main.join();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            Runtime.getRuntime().halt(chaos.exitStatus);
        }, "chaos-consumer-stop"));
        try {
            chaos.run(consumer, args.get("topic"));
        } finally {
            consumer.close();
        }
        chaos.report("stopped", null);
        chaos.exitStatus = 0;
    }

    private void run(KafkaConsumer<byte[], byte[]> consumer, String topic) {
        consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                report("revoked", "\"partitions\":" + partitionList(partitions));
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                report("assigned", "\"partitions\":" + partitionList(partitions)
                       + ",\"generation\":" + consumer.groupMetadata().generationId());
            }
        });
        while (!stopping) {
            ConsumerRecords<byte[], byte[]> batch;
            try {
                batch = consumer.poll(Duration.ofMillis(200));
            } catch (WakeupException e) {
                continue;  // the stop: the loop's condition ends it
            }
            if (batch.isEmpty()) {
                continue;
            }
            StringJoiner records = new StringJoiner(",", "\"records\":[", "]");
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            for (ConsumerRecord<byte[], byte[]> record : batch) {
                records.add("[" + record.partition() + "," + record.offset() + "]");
                offsets.put(new TopicPartition(record.topic(), record.partition()),
                            new OffsetAndMetadata(record.offset() + 1));
            }
            report("records", records.toString());
            commit(consumer, offsets);
            Map<Integer, Long> next = new TreeMap<>();  // one topic: partition numbers name them
            offsets.forEach((partition, offset) -> next.put(partition.partition(), offset.offset()));
            StringJoiner committed = new StringJoiner(",", "\"offsets\":{", "}");
            next.forEach((partition, offset) -> committed.add("\"" + partition + "\":" + offset));
            report("committed", committed.toString());
        }
    }

    /** commitSync, again if a stop's wakeup interrupted it: the batch printed is the batch committed. */
    private static void commit(KafkaConsumer<byte[], byte[]> consumer, Map<TopicPartition, OffsetAndMetadata> offsets) {
        while (true) {
            try {
                consumer.commitSync(offsets);
                return;
            } catch (WakeupException e) {
                // the stop's wakeup: commit first, the loop stops after
            }
        }
    }

    private static String partitionList(Collection<TopicPartition> partitions) {
        StringJoiner numbers = new StringJoiner(",", "[", "]");
        new TreeSet<>(partitions.stream().map(TopicPartition::partition).toList())
            .forEach(p -> numbers.add(p.toString()));
        return numbers.toString();
    }

    /** One JSON event a line, flushed at once: {"event":..,"t":..,"instance":..[, fields]}. */
    private synchronized void report(String event, String fields) {
        String who = instance == null ? "null" : quote(instance);
        String t = String.format(Locale.ROOT, "%.3f", System.currentTimeMillis() / 1000.0);
        String line = "{\"event\":\"" + event + "\",\"t\":" + t + ",\"instance\":" + who
            + (fields == null ? "" : "," + fields) + "}";
        System.out.println(line);
        System.out.flush();
    }

    private static String quote(String text) {
        StringBuilder quoted = new StringBuilder("\"");
        for (char c : text.toCharArray()) {
            if (c == '"' || c == '\\') {
                quoted.append('\\').append(c);
            } else if (c < 0x20) {
                quoted.append(String.format("\\u%04x", (int) c));
            } else {
                quoted.append(c);
            }
        }
        return quoted.append('"').toString();
    }

    private static final List<String> REQUIRED = List.of("bootstrap-servers", "group", "topic",
                                                         "heartbeat-interval-ms");
    private static final List<String> OPTIONAL = List.of("instance-id", "client-id", "session-timeout-ms",
                                                         "rebalance-timeout-ms");

    private static Map<String, String> parse(String[] argv) {
        Map<String, String> args = new HashMap<>();
        for (int i = 0; i < argv.length; i += 2) {
            String name = argv[i].startsWith("--") ? argv[i].substring(2) : "";
            if (!REQUIRED.contains(name) && !OPTIONAL.contains(name) || i + 1 >= argv.length) {
                usage("unexpected argument " + argv[i]);
            }
            args.put(name, argv[i + 1]);
        }
        for (String name : REQUIRED) {
            if (!args.containsKey(name)) {
                usage("--" + name + " is required");
            }
        }
        return args;
    }

    private static void usage(String problem) {
        System.err.println("ChaosConsumer: " + problem + "; options: --" + String.join(" --", REQUIRED)
                           + " (required), --" + String.join(" --", OPTIONAL));
        System.exit(2);
    }
}
