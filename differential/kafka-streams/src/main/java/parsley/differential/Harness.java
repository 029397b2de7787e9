package parsley.differential;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.Comparator;
import java.util.Properties;
import java.util.function.Function;
import java.util.stream.Stream;

import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TestInputTopic;
import org.apache.kafka.streams.TestOutputTopic;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.TopologyTestDriver;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;
import org.apache.kafka.streams.test.TestRecord;

/**
 * What the Kafka Streams programs of the differential tests share: reading cases from
 * stdin, a TopologyTestDriver per case, piping each record line and printing what it
 * writes to the topic {@code out}.
 *
 * stdin: one or more cases, each a header line (the program's own), record lines and a
 * line {@code end}; blank lines are skipped. stdout: per case, one line per output
 * record, in output order, then a line {@code end}. Every record is piped on its own and
 * the outputs it caused are printed before the next, so that one JVM serves hundreds of
 * cases in order.
 */
final class Harness {
    private Harness() {}

    /**
     * A case header's fields, split at white space: from {@code least} to {@code most} of
     * them, as {@code shape} says, or a refusal naming the shape and the line.
     */
    static String[] header(String line, String shape, int least, int most) {
        String[] fields = line.trim().split("\\s+");
        if (fields.length < least || fields.length > most) {
            throw new IllegalArgumentException("a case header is `" + shape + "`, got " + line);
        }
        return fields;
    }

    /** A header field in milliseconds, as a duration. */
    static Duration millis(String field) {
        return Duration.ofMillis(Long.parseLong(field));
    }

    /** Pipes one record line, split at white space, into a case's input topics. */
    @FunctionalInterface
    interface Pipe {
        void pipe(String[] fields, String line);
    }

    /** How a case reads the records of {@code out} and prints each as a line. */
    record Output<K, V>(Deserializer<K> keys, Deserializer<V> values, Function<TestRecord<K, V>, String> line) {
        /** Lines {@code key value timestamp} ({@code null} for a tombstone). */
        static <V> Output<String, V> records(Deserializer<V> values) {
            return new Output<>(Serdes.String().deserializer(), values,
                record -> record.key() + " " + record.value() + " " + record.timestamp());
        }

        /** Lines {@code key start end value timestamp} of windowed keys. */
        static Output<Windowed<String>, Long> windows(Deserializer<Windowed<String>> keys) {
            return new Output<>(keys, Serdes.Long().deserializer(), record -> {
                Windowed<String> w = record.key();
                return w.key() + " " + w.window().start() + " " + w.window().end() + " " + record.value()
                    + " " + record.timestamp();
            });
        }
    }

    /**
     * One case, built from its header: its topology (writing to {@code out}), how its record
     * lines are piped, how its outputs are read, and any settings of its own. The record
     * cache is off unless {@link #recordCache()} turns it on.
     */
    static final class Case<K, V> {
        private final Topology topology;
        private final Function<TopologyTestDriver, Pipe> inputs;
        private final Output<K, V> output;
        private final Properties settings = new Properties();
        private boolean recordCache;

        Case(StreamsBuilder builder, Function<TopologyTestDriver, Pipe> inputs, Output<K, V> output) {
            this.topology = builder.build();
            this.inputs = inputs;
            this.output = output;
        }

        Case<K, V> set(String setting, Object value) {
            settings.put(setting, value);
            return this;
        }

        /** The record cache at its default size, as Kafka Streams runs by default. */
        Case<K, V> recordCache() {
            recordCache = true;
            return this;
        }
    }

    /** An input topic of String keys, and how a record line's value is read for it. */
    record Topic<V>(String name, Serializer<V> values, Function<String, V> value) {
        /** Long values, {@code null} a null value (a tombstone). */
        static Topic<Long> longsOrNull(String name) {
            return new Topic<>(name, Serdes.Long().serializer(), orTombstone(Long::parseLong));
        }

        /** Long values, never null. */
        static Topic<Long> longs(String name) {
            return new Topic<>(name, Serdes.Long().serializer(), Long::parseLong);
        }

        /** String values, {@code null} a null value (a tombstone). */
        static Topic<String> stringsOrNull(String name) {
            return new Topic<>(name, Serdes.String().serializer(), orTombstone(value -> value));
        }

        private static <V> Function<String, V> orTombstone(Function<String, V> parse) {
            return value -> value.equals("null") ? null : parse.apply(value);
        }

        TestInputTopic<String, V> create(TopologyTestDriver driver) {
            return driver.createInputTopic(name, Serdes.String().serializer(), values);
        }

        void pipe(TestInputTopic<String, V> input, String key, String value, String timestamp) {
            input.pipeInput(new TestRecord<>(key, this.value.apply(value), Instant.ofEpochMilli(Long.parseLong(timestamp))));
        }
    }

    /** Record lines {@code key value timestamp}, into the one topic {@code topic}. */
    static <V> Function<TopologyTestDriver, Pipe> oneTopic(Topic<V> topic) {
        return driver -> {
            TestInputTopic<String, V> input = topic.create(driver);
            return (f, line) -> {
                if (f.length != 3) {
                    throw new IllegalArgumentException("a record line is `key value timestamp`, got " + line);
                }
                topic.pipe(input, f[0], f[1], f[2]);
            };
        };
    }

    /** Record lines {@code tag key value timestamp}: tag {@code firstTag} into {@code first}, {@code secondTag} into {@code second}. */
    static <A, B> Function<TopologyTestDriver, Pipe> twoTopics(String firstTag, Topic<A> first, String secondTag, Topic<B> second) {
        return driver -> {
            TestInputTopic<String, A> firsts = first.create(driver);
            TestInputTopic<String, B> seconds = second.create(driver);
            return (f, line) -> {
                if (f.length != 4) {
                    throw new IllegalArgumentException(
                        "a record line is `" + firstTag + "|" + secondTag + " key value timestamp`, got " + line);
                }
                if (f[0].equals(firstTag)) {
                    first.pipe(firsts, f[1], f[2], f[3]);
                } else if (f[0].equals(secondTag)) {
                    second.pipe(seconds, f[1], f[2], f[3]);
                } else {
                    throw new IllegalArgumentException("a record is " + firstTag + " or " + secondTag + ", got " + line);
                }
            };
        };
    }

    /** A table of String keys read from {@code topic}, in an in-memory store (a RocksDB store per case is most of the time otherwise). */
    static <V> KTable<String, V> inMemoryTable(StreamsBuilder builder, String topic, Serde<V> values) {
        Materialized<String, V, KeyValueStore<Bytes, byte[]>> store =
            Materialized.<String, V>as(Stores.inMemoryKeyValueStore(topic + "-store"))
                .withKeySerde(Serdes.String()).withValueSerde(values);
        return builder.table(topic, Consumed.with(Serdes.String(), values), store);
    }

    /**
     * Runs every case on stdin through the case {@code program} builds from its header, as
     * application {@code differential-<name>}.
     */
    static void run(String name, Function<String, Case<?, ?>> program) throws IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        // A state directory of its own: the test runs several programs at once,
        // and RocksDB locks its store under the shared default /tmp/kafka-streams.
        Path stateDir = Files.createTempDirectory("parsley-differential-" + name + "-");
        try {
            String line;
            int cases = 0;
            while ((line = in.readLine()) != null) {
                line = line.trim();
                if (line.isEmpty()) {
                    continue;
                }
                runCase(name, program.apply(line), in, out, stateDir.resolve("case-" + cases++));
                out.println("end");
            }
        } finally {
            deleteRecursively(stateDir);
        }
        out.flush();
    }

    private static <K, V> void runCase(String name, Case<K, V> c, BufferedReader in, PrintStream out, Path stateDir)
            throws IOException {
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, "differential-" + name);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "dummy:1234");
        if (!c.recordCache) {
            props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        }
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
        props.putAll(c.settings);
        try (TopologyTestDriver driver = new TopologyTestDriver(c.topology, props, Instant.ofEpochMilli(0))) {
            Pipe pipe = c.inputs.apply(driver);
            TestOutputTopic<K, V> output = driver.createOutputTopic("out", c.output.keys(), c.output.values());
            String line;
            while ((line = in.readLine()) != null) {
                line = line.trim();
                if (line.equals("end")) {
                    drain(output, c.output, out);
                    return;
                }
                if (line.isEmpty()) {
                    continue;
                }
                pipe.pipe(line.split("\\s+"), line);
                drain(output, c.output, out);
            }
            throw new IllegalArgumentException("stdin ended inside a case (no `end` line)");
        }
    }

    private static <K, V> void drain(TestOutputTopic<K, V> output, Output<K, V> format, PrintStream out) {
        while (!output.isEmpty()) {
            out.println(format.line().apply(output.readRecord()));
        }
    }

    private static void deleteRecursively(Path root) throws IOException {
        if (!Files.exists(root)) {
            return;
        }
        try (Stream<Path> paths = Files.walk(root)) {
            for (Path path : (Iterable<Path>) paths.sorted(Comparator.reverseOrder())::iterator) {
                Files.deleteIfExists(path);
            }
        }
    }
}
