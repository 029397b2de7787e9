package parsley.transfers;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.stream.Stream;

import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TestInputTopic;
import org.apache.kafka.streams.TestOutputTopic;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.TopologyTestDriver;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.test.TestRecord;

/**
 * The transfers test of internal consistency (Jamie Brandon, "Internal
 * consistency in streaming systems", 2021) on Kafka Streams'
 * {@link TopologyTestDriver}.
 *
 * <p>Transfers between accounts are summed per recipient (credits) and per
 * sender (debits), the two sums are outer-joined into a balance per account,
 * and the balances are summed into one total, written to {@code totals}. The
 * total is 0 on every prefix of the input, so every total record other than 0
 * is impossible: no prefix of the input produces it.
 *
 * <p>Usage: {@code Transfers FILE.csv}, the file as {@link Generate} writes
 * it. Runs the topology on a fresh driver per mode, piping the transfers
 * {@code one-at-a-time} ({@code pipeInput} per record) and in
 * {@code batches-of-1000} ({@code pipeRecordList}), and prints per mode:
 *
 * <pre>
 * mode=&lt;mode&gt; transfers=&lt;n&gt; totals=&lt;n&gt; impossible=&lt;n&gt; max_abs=&lt;n&gt;
 * </pre>
 *
 * After each mode it checks every balance in the store and the last total
 * against the input, and exits 1 if one is wrong, so a broken run prints no
 * figure.
 */
public final class Transfers {
    static final int BATCH = 1_000;

    /** A transfer's value on the {@code transfers} topic: {@code {"from":"3","to":"7","amount":1}}. */
    public record Transfer(String from, String to, long amount) {}

    static final ObjectMapper JSON = new ObjectMapper();

    static final Serde<Transfer> TRANSFER = Serdes.serdeFrom(
            (topic, transfer) -> {
                try {
                    return transfer == null ? null : JSON.writeValueAsBytes(transfer);
                } catch (IOException e) {
                    throw new UncheckedIOException(e);
                }
            },
            (topic, bytes) -> {
                try {
                    return bytes == null ? null : JSON.readValue(bytes, Transfer.class);
                } catch (IOException e) {
                    throw new UncheckedIOException(e);
                }
            });

    /** One line of the input file. */
    record Row(String id, Transfer transfer, long timestampMs) {}

    static Topology topology() {
        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, Transfer> transfers =
                builder.stream("transfers", Consumed.with(Serdes.String(), TRANSFER));

        KTable<String, Long> credits = transfers
                .selectKey((id, t) -> t.to())
                .groupByKey(Grouped.with("credits", Serdes.String(), TRANSFER))
                .aggregate(() -> 0L, (account, t, sum) -> sum + t.amount(), longs("credits"));
        KTable<String, Long> debits = transfers
                .selectKey((id, t) -> t.from())
                .groupByKey(Grouped.with("debits", Serdes.String(), TRANSFER))
                .aggregate(() -> 0L, (account, t, sum) -> sum + t.amount(), longs("debits"));

        KTable<String, Long> balances = credits.outerJoin(
                debits, (c, d) -> (c == null ? 0L : c) - (d == null ? 0L : d), longs("balances"));

        KTable<String, Long> total = balances
                .groupBy((account, balance) -> KeyValue.pair("total", balance),
                        Grouped.with("total", Serdes.String(), Serdes.Long()))
                .reduce((sum, v) -> sum + v, (sum, v) -> sum - v, longs("total"));

        total.toStream().to("totals", Produced.with(Serdes.String(), Serdes.Long()));
        return builder.build();
    }

    static Materialized<String, Long, KeyValueStore<Bytes, byte[]>> longs(String store) {
        return Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as(store)
                .withKeySerde(Serdes.String())
                .withValueSerde(Serdes.Long());
    }

    static List<Row> read(Path file) throws IOException {
        List<Row> rows = new ArrayList<>();
        int line = 0;
        for (String text : Files.readAllLines(file, StandardCharsets.UTF_8)) {
            line++;
            if (text.isEmpty()) {
                continue;
            }
            String[] f = text.split(",", -1);
            if (f.length != 5) {
                throw new IllegalArgumentException(
                        file + ":" + line + ": expected id,from,to,amount,timestamp_ms, got '" + text + "'");
            }
            rows.add(new Row(f[0], new Transfer(f[1], f[2], Long.parseLong(f[3])), Long.parseLong(f[4])));
        }
        return rows;
    }

    /** What one mode measured. */
    static final class Count {
        long totals;
        long impossible;
        long maxAbs;
        Long last;

        void drain(TestOutputTopic<String, Long> out) {
            for (Long v : out.readValuesToList()) {
                totals++;
                if (v != 0) {
                    impossible++;
                }
                maxAbs = Math.max(maxAbs, Math.abs(v));
                last = v;
            }
        }
    }

    static Count run(List<Row> rows, boolean batched) throws IOException {
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, "transfers");
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "unused:9092");
        // The stores are the default (RocksDB); a state directory of its own
        // lets two runs go at once.
        Path stateDir = Files.createTempDirectory("transfers-state-");
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
        try (TopologyTestDriver driver = new TopologyTestDriver(topology(), props)) {
            TestInputTopic<String, Transfer> in =
                    driver.createInputTopic("transfers", new StringSerializer(), TRANSFER.serializer());
            TestOutputTopic<String, Long> out =
                    driver.createOutputTopic("totals", new StringDeserializer(), new LongDeserializer());
            Count count = new Count();
            for (int start = 0; start < rows.size(); start += BATCH) {
                List<TestRecord<String, Transfer>> batch = new ArrayList<>(BATCH);
                for (Row row : rows.subList(start, Math.min(start + BATCH, rows.size()))) {
                    batch.add(new TestRecord<>(row.id(), row.transfer(), Instant.ofEpochMilli(row.timestampMs())));
                }
                if (batched) {
                    in.pipeRecordList(batch);
                } else {
                    for (TestRecord<String, Transfer> record : batch) {
                        in.pipeInput(record);
                    }
                }
                // Read after every 1,000 transfers in both modes, to bound memory;
                // the driver has then processed them all, so this changes no output.
                count.drain(out);
            }
            check(rows, driver, count);
            return count;
        } finally {
            try (Stream<Path> paths = Files.walk(stateDir)) {
                paths.sorted(Comparator.reverseOrder()).forEach(path -> path.toFile().delete());
            }
        }
    }

    /** The balances in the store and the last total must be the input's. */
    static void check(List<Row> rows, TopologyTestDriver driver, Count count) {
        Map<String, Long> expected = new TreeMap<>();
        for (Row row : rows) {
            Transfer t = row.transfer();
            expected.merge(t.to(), t.amount(), Long::sum);
            expected.merge(t.from(), -t.amount(), Long::sum);
        }
        KeyValueStore<String, Long> store = driver.getKeyValueStore("balances");
        Map<String, Long> actual = new TreeMap<>();
        store.all().forEachRemaining(kv -> actual.put(kv.key, kv.value));
        if (!actual.equals(expected)) {
            fail("balances in the store " + actual + ", expected " + expected);
        }
        if (!rows.isEmpty() && (count.last == null || count.last != 0)) {
            fail("last total " + count.last + ", expected 0");
        }
    }

    static void fail(String message) {
        System.err.println("Transfers: " + message);
        System.exit(1);
    }

    public static void main(String[] args) throws IOException {
        if (args.length != 1) {
            System.err.println("usage: Transfers FILE.csv");
            System.exit(2);
        }
        List<Row> rows = read(Path.of(args[0]));
        long outOfOrder = 0;
        long maxSeen = Long.MIN_VALUE;
        for (Row row : rows) {
            if (row.timestampMs() < maxSeen) {
                outOfOrder++;
            }
            maxSeen = Math.max(maxSeen, row.timestampMs());
        }
        System.out.println("input=" + args[0] + " transfers=" + rows.size() + " out_of_order=" + outOfOrder);
        for (boolean batched : new boolean[] {false, true}) {
            Count c = run(rows, batched);
            System.out.println("mode=" + (batched ? "batches-of-" + BATCH : "one-at-a-time")
                    + " transfers=" + rows.size() + " totals=" + c.totals + " impossible=" + c.impossible
                    + " max_abs=" + c.maxAbs);
        }
    }
}
