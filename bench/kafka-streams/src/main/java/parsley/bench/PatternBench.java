package parsley.bench;

import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Properties;

import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.LongSerializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TestInputTopic;
import org.apache.kafka.streams.TestOutputTopic;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.TopologyTestDriver;
import org.apache.kafka.streams.processor.PunctuationType;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;

/**
 * The Kafka Streams side of {@code sim/benches/driver_patterns.rs}: the same
 * balances topology and the same four test patterns over
 * {@link TopologyTestDriver}, printed in the same line format:
 *
 * <pre>pattern=&lt;name&gt; records=&lt;n&gt; seconds=&lt;s&gt; records_per_s=&lt;r&gt;</pre>
 *
 * Env: {@code PARSLEY_PATTERN_RECORDS} (default 100,000),
 * {@code PARSLEY_PATTERN_ROUNDS} (measured rounds, fastest printed, default 3),
 * {@code PARSLEY_PATTERN} (only that pattern), {@code PARSLEY_PATTERN_WARMUP}
 * (unmeasured rounds of all four patterns first; default 3, or more when N is
 * under 200,000/3 so each pattern is warmed with at least 200,000 records).
 */
public final class PatternBench {
    private static final int KEYS = 1_000;
    private static final String STORE = "balances";
    private static final List<String> PATTERNS =
        List.of("pipe-one", "pipe-list", "pipe-list-read-all", "pipe-one-read-each");
    /** The Rust driver's initial wall clock, so both start at the same instant. */
    private static final Instant WALL_CLOCK = Instant.ofEpochMilli(1_700_000_000_000L);

    private PatternBench() {}

    /** Folds each order into its key's balance and forwards the new balance. */
    static final class BalanceProcessor implements Processor<String, Long, String, Long> {
        private ProcessorContext<String, Long> context;
        private KeyValueStore<String, Long> balances;

        @Override
        public void init(ProcessorContext<String, Long> context) {
            this.context = context;
            this.balances = context.getStateStore(STORE);
            // Mirrors the Rust stage's one-minute tick; the driver's wall clock
            // is never advanced, so it costs scheduling only, as on that side.
            context.schedule(Duration.ofSeconds(60), PunctuationType.WALL_CLOCK_TIME, timestamp -> { });
        }

        @Override
        public void process(Record<String, Long> order) {
            Long previous = balances.get(order.key());
            long balance = (previous == null ? 0L : previous) + order.value();
            balances.put(order.key(), balance);
            context.forward(order.withValue(balance));
        }
    }

    static Topology topology() {
        Topology topology = new Topology();
        topology.addSource("orders", new StringDeserializer(), new LongDeserializer(), "orders");
        topology.addProcessor("balance", BalanceProcessor::new, "orders");
        // In memory and change-logged (the default), as the Rust stage keeps its
        // state in memory and writes a changelog record per change.
        topology.addStateStore(
            Stores.keyValueStoreBuilder(Stores.inMemoryKeyValueStore(STORE), Serdes.String(), Serdes.Long()),
            "balance");
        topology.addSink("balances", "balances", new StringSerializer(), new LongSerializer(), "balance");
        return topology;
    }

    static TopologyTestDriver driver() {
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, "bench");
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "unused:9092");
        return new TopologyTestDriver(topology(), props, WALL_CLOCK);
    }

    /**
     * Runs one pattern over {@code records} records on a fresh driver and
     * returns the nanoseconds its piping and reading took (the driver's
     * start-up and the checks excluded, as on the Rust side).
     */
    static long run(String pattern, int records, String[] keys) {
        try (TopologyTestDriver driver = driver()) {
            TestInputTopic<String, Long> input =
                driver.createInputTopic("orders", new StringSerializer(), new LongSerializer());
            TestOutputTopic<String, Long> output =
                driver.createOutputTopic("balances", new StringDeserializer(), new LongDeserializer());

            long start = System.nanoTime();
            int read;
            switch (pattern) {
                case "pipe-one" -> {
                    for (int index = 0; index < records; index++) {
                        input.pipeInput(keys[index % KEYS], (long) (index % 100));
                    }
                    read = 0;
                }
                case "pipe-list" -> {
                    input.pipeKeyValueList(orders(records, keys));
                    read = 0;
                }
                case "pipe-list-read-all" -> {
                    input.pipeKeyValueList(orders(records, keys));
                    read = output.readKeyValuesToList().size();
                }
                case "pipe-one-read-each" -> {
                    read = 0;
                    for (int index = 0; index < records; index++) {
                        input.pipeInput(keys[index % KEYS], (long) (index % 100));
                        output.readKeyValue();
                        read++;
                    }
                }
                default -> throw new IllegalArgumentException("unknown pattern " + pattern);
            }
            long elapsed = System.nanoTime() - start;

            check(pattern, records, keys, driver, output, read);
            return elapsed;
        }
    }

    /** Built inside the timing, as the Rust side builds its records there. */
    static List<KeyValue<String, Long>> orders(int records, String[] keys) {
        List<KeyValue<String, Long>> orders = new ArrayList<>(records);
        for (int index = 0; index < records; index++) {
            orders.add(KeyValue.pair(keys[index % KEYS], (long) (index % 100)));
        }
        return orders;
    }

    /**
     * Fails the run unless every output was read exactly once (or, for the
     * patterns that read nothing, is still queued) and every balance is right,
     * so a broken run cannot print a figure.
     */
    static void check(String pattern, int records, String[] keys, TopologyTestDriver driver,
                      TestOutputTopic<String, Long> output, int read) {
        boolean reads = pattern.endsWith("read-all") || pattern.endsWith("read-each");
        int expectedRead = reads ? records : 0;
        long queued = output.getQueueSize();
        long expectedQueued = reads ? 0 : records;
        if (read != expectedRead || queued != expectedQueued) {
            throw new IllegalStateException(String.format(Locale.ROOT,
                "%s: read %d (expected %d), %d left queued (expected %d)",
                pattern, read, expectedRead, queued, expectedQueued));
        }
        long[] expected = new long[KEYS];
        for (int index = 0; index < records; index++) {
            expected[index % KEYS] += index % 100;
        }
        KeyValueStore<String, Long> balances = driver.getKeyValueStore(STORE);
        for (int key = 0; key < KEYS; key++) {
            Long balance = balances.get(keys[key]);
            long actual = balance == null ? 0L : balance;
            if (actual != expected[key]) {
                throw new IllegalStateException(String.format(Locale.ROOT,
                    "%s: %s has balance %d, expected %d", pattern, keys[key], actual, expected[key]));
            }
        }
    }

    public static void main(String[] args) {
        int records = Bench.envInt("PARSLEY_PATTERN_RECORDS", 100_000);
        int rounds = Math.max(1, Bench.envInt("PARSLEY_PATTERN_ROUNDS", 3));
        int warmup = Math.max(0, Bench.envInt("PARSLEY_PATTERN_WARMUP", Bench.defaultWarmup(records)));
        String only = System.getenv("PARSLEY_PATTERN");
        List<String> patterns = PATTERNS.stream()
            .filter(pattern -> only == null || only.equals(pattern))
            .toList();
        if (patterns.isEmpty()) {
            throw new IllegalArgumentException("unknown pattern " + only);
        }

        String[] keys = Bench.keys(KEYS);

        // The Rust side is compiled ahead of time; give the JIT the same footing
        // by running every pattern unmeasured in this process first. All four,
        // even when PARSLEY_PATTERN picks one, so a pattern's figure is the same
        // whether it runs alone (as compare.sh runs it) or with the others.
        for (int round = 0; round < warmup; round++) {
            for (String pattern : PATTERNS) {
                run(pattern, records, keys);
            }
        }

        for (String pattern : patterns) {
            long best = Long.MAX_VALUE;
            for (int round = 0; round < rounds; round++) {
                // Collect the last driver's garbage before the clock starts, not
                // during the next round.
                System.gc();
                best = Math.min(best, run(pattern, records, keys));
            }
            double seconds = best / 1e9;
            System.out.printf(Locale.ROOT, "pattern=%s records=%d seconds=%.4f records_per_s=%.0f%n",
                pattern, records, seconds, records / seconds);
        }
    }
}
