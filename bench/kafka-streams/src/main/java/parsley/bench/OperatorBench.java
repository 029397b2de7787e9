package parsley.bench;

import java.lang.management.ManagementFactory;
import java.lang.management.MemoryMXBean;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.LongSerializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TestInputTopic;
import org.apache.kafka.streams.TestOutputTopic;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.TopologyTestDriver;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.TimeWindowedDeserializer;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.kstream.WindowedSerdes;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.Stores;
import org.apache.kafka.streams.state.WindowStore;
import org.apache.kafka.streams.test.TestRecord;

/**
 * The Kafka Streams side of {@code sim/benches/operators.rs}: the same two
 * operators, the same input and the same checks over
 * {@link TopologyTestDriver}, printed in the same line formats:
 *
 * <pre>
 * operator=&lt;name&gt; records=&lt;n&gt; outputs=&lt;n&gt; seconds=&lt;s&gt; records_per_s=&lt;r&gt;
 * memory=&lt;open-window|table-row&gt; scope=driver entries=&lt;n&gt; bytes_per_entry=&lt;b&gt;
 * </pre>
 *
 * <ul>
 * <li>{@code windows}: {@code stream("sales").groupByKey()
 * .windowedBy(TimeWindows.ofSizeAndGrace(60 s, 5 s)).aggregate(0, sum)
 * .suppress(untilWindowCloses(unbounded())).toStream().to("sales-per-minute")};
 * key {@code account-(i % 1000)}, value {@code i % 100}, timestamp
 * {@code START + 6 ms × i}.</li>
 * <li>{@code join}: {@code stream("orders").leftJoin(table("discounts"),
 * (order, discount) -> order - (discount or 0)).to("priced-orders")}, the
 * table's 1,000 rows piped before the clock starts; record {@code i} is a row
 * update when {@code i % 10 == 9} (key {@code account-((i / 10) % 1000)},
 * value {@code i % 50}), otherwise an order (key {@code account-(i % 1000)},
 * value {@code i % 100 + 100}).</li>
 * </ul>
 *
 * Each record is piped one at a time with its timestamp, and the output is
 * read once at the end ({@code readRecordsToList}), inside the timing; the
 * driver's start-up and the checks are outside it. Stores are in memory and
 * change-logged (the default), as the Parsley stages keep their state in
 * memory and write a changelog record per change; the record cache is off
 * ({@code statestore.cache.max.bytes=0}), as the Parsley side has none (the
 * driver commits after every record, so a cache would change no output).
 *
 * <p>Env: {@code PARSLEY_OPERATOR_RECORDS} (default 100,000),
 * {@code PARSLEY_OPERATOR_ROUNDS} (measured rounds, fastest printed, default
 * 3), {@code PARSLEY_OPERATOR} ({@code windows}, {@code join} or
 * {@code memory} only), {@code PARSLEY_OPERATOR_WARMUP} (unmeasured rounds of
 * both operators first; default 3, or more when N is under 200,000/3, so each
 * operator is warmed with at least 200,000 records),
 * {@code PARSLEY_OPERATOR_CACHE} ({@code statestore.cache.max.bytes}, default
 * 0).
 */
public final class OperatorBench {
    private static final int KEYS = 1_000;
    /** The Rust driver's initial wall clock and the first record's timestamp. */
    private static final long START = 1_700_000_000_000L;
    private static final long STEP_MS = 6;
    private static final long WINDOW_MS = 60_000;
    private static final long GRACE_MS = 5_000;
    private static final List<String> OPERATORS = List.of("windows", "join");

    private OperatorBench() {}

    static long cacheBytes() {
        return Math.max(0, Bench.envInt("PARSLEY_OPERATOR_CACHE", 0));
    }

    static TopologyTestDriver driver(Topology topology) {
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, "bench");
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "unused:9092");
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, cacheBytes());
        return new TopologyTestDriver(topology, props, Instant.ofEpochMilli(START));
    }

    /** Each account's sales summed per minute, each minute written once it closes. */
    static Topology windowTopology() {
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream("sales", Consumed.with(Serdes.String(), Serdes.Long()))
            .groupByKey()
            .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMillis(WINDOW_MS), Duration.ofMillis(GRACE_MS)))
            .aggregate(() -> 0L, (key, sale, total) -> total + sale,
                Materialized.<String, Long>as(Stores.inMemoryWindowStore("revenue",
                        Duration.ofMillis(WINDOW_MS + GRACE_MS), Duration.ofMillis(WINDOW_MS), false))
                    .withKeySerde(Serdes.String())
                    .withValueSerde(Serdes.Long()))
            .suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()))
            .toStream()
            .to("sales-per-minute", Produced.with(
                new WindowedSerdes.TimeWindowedSerde<>(Serdes.String(), WINDOW_MS), Serdes.Long()));
        return builder.build();
    }

    /** Each order less its account's discount, or at full price without a row. */
    static Topology joinTopology() {
        StreamsBuilder builder = new StreamsBuilder();
        KTable<String, Long> discounts = builder.table("discounts",
            Consumed.with(Serdes.String(), Serdes.Long()),
            Materialized.<String, Long>as(Stores.inMemoryKeyValueStore("discounts"))
                .withKeySerde(Serdes.String())
                .withValueSerde(Serdes.Long()));
        KStream<String, Long> orders = builder.stream("orders", Consumed.with(Serdes.String(), Serdes.Long()));
        orders.leftJoin(discounts, (order, discount) -> order - (discount == null ? 0L : discount))
            .to("priced-orders", Produced.with(Serdes.String(), Serdes.Long()));
        return builder.build();
    }

    /** The windows a run closes and the sum of their totals, as on the Rust side. */
    static long[] windowsExpected(int records) {
        long last = START + STEP_MS * (records - 1L);
        Map<Long, Long> closed = new HashMap<>();
        for (int index = 0; index < records; index++) {
            long at = START + STEP_MS * index;
            long start = at - Math.floorMod(at, WINDOW_MS);
            if (start + WINDOW_MS + GRACE_MS <= last) {
                closed.merge(start * KEYS + index % KEYS, (long) (index % 100), Long::sum);
            }
        }
        long sum = 0;
        for (long total : closed.values()) {
            sum += total;
        }
        return new long[] {closed.size(), sum};
    }

    /** Pipes the window workload; returns the nanoseconds taken and the windows read. */
    static long[] runWindows(int records, String[] keys) {
        try (TopologyTestDriver driver = driver(windowTopology())) {
            TestInputTopic<String, Long> input =
                driver.createInputTopic("sales", new StringSerializer(), new LongSerializer());
            TestOutputTopic<Windowed<String>, Long> output = driver.createOutputTopic("sales-per-minute",
                new TimeWindowedDeserializer<>(new StringDeserializer(), WINDOW_MS), new LongDeserializer());
            long start = System.nanoTime();
            for (int index = 0; index < records; index++) {
                input.pipeInput(keys[index % KEYS], (long) (index % 100), START + STEP_MS * index);
            }
            List<TestRecord<Windowed<String>, Long>> closed = output.readRecordsToList();
            long elapsed = System.nanoTime() - start;
            long total = 0;
            for (TestRecord<Windowed<String>, Long> window : closed) {
                total += window.value();
            }
            long[] expected = windowsExpected(records);
            if (closed.size() != expected[0] || total != expected[1]) {
                throw new IllegalStateException(String.format(Locale.ROOT,
                    "windows: read %d windows totalling %d, expected %d totalling %d",
                    closed.size(), total, expected[0], expected[1]));
            }
            return new long[] {elapsed, closed.size()};
        }
    }

    /** The join workload's record {@code index}: {row (1) or order (0), key, value}. */
    static long[] joinRecord(int index) {
        if (index % 10 == 9) {
            return new long[] {1, (index / 10) % KEYS, index % 50};
        }
        return new long[] {0, index % KEYS, index % 100 + 100};
    }

    /** The join's priced orders and the sum of their prices, replaying the table in pipe order. */
    static long[] joinExpected(int records) {
        long[] table = new long[KEYS];
        for (int key = 0; key < KEYS; key++) {
            table[key] = key % 50;
        }
        long count = 0;
        long sum = 0;
        for (int index = 0; index < records; index++) {
            long[] record = joinRecord(index);
            int key = (int) record[1];
            if (record[0] == 1) {
                table[key] = record[2];
            } else {
                count++;
                sum += record[2] - table[key];
            }
        }
        return new long[] {count, sum};
    }

    /** Pipes the join workload; returns the nanoseconds taken and the orders read. */
    static long[] runJoin(int records, String[] keys) {
        try (TopologyTestDriver driver = driver(joinTopology())) {
            TestInputTopic<String, Long> orders =
                driver.createInputTopic("orders", new StringSerializer(), new LongSerializer());
            TestInputTopic<String, Long> discounts =
                driver.createInputTopic("discounts", new StringSerializer(), new LongSerializer());
            TestOutputTopic<String, Long> output =
                driver.createOutputTopic("priced-orders", new StringDeserializer(), new LongDeserializer());
            // The table's first rows, before the clock starts (a test's set-up).
            List<TestRecord<String, Long>> rows = new ArrayList<>(KEYS);
            for (int key = 0; key < KEYS; key++) {
                rows.add(new TestRecord<>(keys[key], (long) (key % 50), Instant.ofEpochMilli(START)));
            }
            discounts.pipeRecordList(rows);
            long start = System.nanoTime();
            for (int index = 0; index < records; index++) {
                long[] record = joinRecord(index);
                String key = keys[(int) record[1]];
                long at = START + STEP_MS * index;
                if (record[0] == 1) {
                    discounts.pipeInput(key, record[2], at);
                } else {
                    orders.pipeInput(key, record[2], at);
                }
            }
            List<TestRecord<String, Long>> priced = output.readRecordsToList();
            long elapsed = System.nanoTime() - start;
            long total = 0;
            for (TestRecord<String, Long> order : priced) {
                total += order.value();
            }
            long[] expected = joinExpected(records);
            if (priced.size() != expected[0] || total != expected[1]) {
                throw new IllegalStateException(String.format(Locale.ROOT,
                    "join: read %d orders totalling %d, expected %d totalling %d",
                    priced.size(), total, expected[0], expected[1]));
            }
            return new long[] {elapsed, priced.size()};
        }
    }

    static long[] run(String operator, int records, String[] keys) {
        return switch (operator) {
            case "windows" -> runWindows(records, keys);
            case "join" -> runJoin(records, keys);
            default -> throw new IllegalArgumentException("unknown operator " + operator);
        };
    }

    /** The heap in use after collecting until it stops shrinking. */
    static long usedAfterGc() {
        MemoryMXBean memory = ManagementFactory.getMemoryMXBean();
        long used = Long.MAX_VALUE;
        for (int attempt = 0; attempt < 10; attempt++) {
            System.gc();
            try {
                Thread.sleep(50);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            long now = memory.getHeapMemoryUsage().getUsed();
            if (now >= used) {
                return Math.min(now, used);
            }
            used = now;
        }
        return used;
    }

    /**
     * The heap a driver gains from {@code entries} open windows (or table
     * rows): its store, the changelog records the driver captures, and
     * everything else it keeps. {@code entries} distinct keys
     * ({@code account-%07d}), one record each at one timestamp, as on the
     * Rust side; each record is built as it is piped, so no input list is
     * alive at either reading.
     */
    static long driverEntries(String what, int entries) {
        boolean windows = what.equals("open-window");
        try (TopologyTestDriver driver = driver(windows ? windowTopology() : joinTopology())) {
            TestInputTopic<String, Long> input = driver.createInputTopic(
                windows ? "sales" : "discounts", new StringSerializer(), new LongSerializer());
            long before = usedAfterGc();
            for (int key = 0; key < entries; key++) {
                input.pipeInput(String.format(Locale.ROOT, "account-%07d", key), 1L, START);
            }
            long after = usedAfterGc();
            long held = 0;
            if (windows) {
                WindowStore<String, Long> store = driver.getWindowStore("revenue");
                try (KeyValueIterator<Windowed<String>, Long> all = store.all()) {
                    while (all.hasNext()) {
                        all.next();
                        held++;
                    }
                }
            } else {
                held = driver.getKeyValueStore("discounts").approximateNumEntries();
            }
            if (held != entries) {
                throw new IllegalStateException(String.format(Locale.ROOT,
                    "%s: %d held, expected %d", what, held, entries));
            }
            return after - before;
        }
    }

    static void memory() {
        for (String what : List.of("open-window", "table-row")) {
            for (int entries : new int[] {10_000, 100_000}) {
                long held = driverEntries(what, entries);
                System.out.printf(Locale.ROOT, "memory=%s scope=driver entries=%d bytes_per_entry=%.1f%n",
                    what, entries, (double) held / entries);
            }
        }
    }

    public static void main(String[] args) {
        int records = Bench.envInt("PARSLEY_OPERATOR_RECORDS", 100_000);
        int rounds = Math.max(1, Bench.envInt("PARSLEY_OPERATOR_ROUNDS", 3));
        int warmup = Math.max(0, Bench.envInt("PARSLEY_OPERATOR_WARMUP", Bench.defaultWarmup(records)));
        String only = System.getenv("PARSLEY_OPERATOR");
        if (only != null && !OPERATORS.contains(only) && !only.equals("memory")) {
            throw new IllegalArgumentException("unknown operator " + only);
        }

        String[] keys = Bench.keys(KEYS);

        // The Rust side is compiled ahead of time; give the JIT the same
        // footing by running both operators unmeasured in this process first,
        // both even when PARSLEY_OPERATOR picks one.
        for (int round = 0; round < warmup; round++) {
            for (String operator : OPERATORS) {
                run(operator, records, keys);
            }
        }

        for (String operator : OPERATORS) {
            if (only != null && !only.equals(operator)) {
                continue;
            }
            long best = Long.MAX_VALUE;
            long outputs = 0;
            for (int round = 0; round < rounds; round++) {
                // Collect the last driver's garbage before the clock starts,
                // not during the next round.
                System.gc();
                long[] result = run(operator, records, keys);
                best = Math.min(best, result[0]);
                outputs = result[1];
            }
            double seconds = best / 1e9;
            System.out.printf(Locale.ROOT, "operator=%s records=%d outputs=%d seconds=%.4f records_per_s=%.0f%n",
                operator, records, outputs, seconds, records / seconds);
        }
        if (only == null || only.equals("memory")) {
            memory();
        }
    }
}
