package parsley.differential;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.Properties;
import java.util.function.Function;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TestInputTopic;
import org.apache.kafka.streams.TestOutputTopic;
import org.apache.kafka.streams.TopologyTestDriver;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.ValueJoiner;
import org.apache.kafka.streams.state.Stores;
import org.apache.kafka.streams.test.TestRecord;

/**
 * The Kafka Streams side of the foreign-key join differential test.
 *
 * stdin: one or more cases, each a header line {@code inner} or {@code left}, lines
 * {@code l key value timestamp} (a record of the left table, whose value is the foreign
 * key, {@code -} for none; value {@code null} is a tombstone) or {@code r key value
 * timestamp} (the right table, a long), and a line {@code end}. stdout: per case, one line
 * {@code key value timestamp} per output record, in output order ({@code null} for a
 * tombstone), then {@code end}. The joiner writes {@code foreignKey:right}, {@code null}
 * for a missing right value. Each case runs on a TopologyTestDriver of its own, with the
 * record cache off, both tables in in-memory stores.
 */
public final class ForeignKeyJoins {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        Path stateDir = Files.createTempDirectory("parsley-differential-fk-joins-");
        try {
            String line;
            int cases = 0;
            while ((line = in.readLine()) != null) {
                line = line.trim();
                if (line.isEmpty()) {
                    continue;
                }
                runCase(line, in, out, stateDir.resolve("case-" + cases++));
                out.println("end");
            }
        } finally {
            Windows.deleteRecursively(stateDir);
        }
        out.flush();
    }

    private static void runCase(String header, BufferedReader in, PrintStream out, Path stateDir)
            throws IOException {
        String mode = header.split("\\s+")[0];
        ValueJoiner<String, Long, String> joiner =
            (left, right) -> left + ":" + (right == null ? "null" : right.toString());
        Function<String, String> foreignKey = value -> value.equals("-") ? null : value;
        StreamsBuilder builder = new StreamsBuilder();
        KTable<String, String> left = builder.table("left", Consumed.with(Serdes.String(), Serdes.String()),
            Materialized.<String, String>as(Stores.inMemoryKeyValueStore("left-store"))
                .withKeySerde(Serdes.String()).withValueSerde(Serdes.String()));
        KTable<String, Long> right = builder.table("right", Consumed.with(Serdes.String(), Serdes.Long()),
            Materialized.<String, Long>as(Stores.inMemoryKeyValueStore("right-store"))
                .withKeySerde(Serdes.String()).withValueSerde(Serdes.Long()));
        KTable<String, String> joined;
        switch (mode) {
            case "inner" -> joined = left.join(right, foreignKey, joiner);
            case "left" -> joined = left.leftJoin(right, foreignKey, joiner);
            default -> throw new IllegalArgumentException("a case header is inner or left, got " + mode);
        }
        joined.toStream().to("out", Produced.with(Serdes.String(), Serdes.String()));

        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, "differential-fk-joins");
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "dummy:1234");
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
        try (TopologyTestDriver driver = new TopologyTestDriver(builder.build(), props, Instant.ofEpochMilli(0))) {
            TestInputTopic<String, String> lefts = driver.createInputTopic(
                "left", Serdes.String().serializer(), Serdes.String().serializer());
            TestInputTopic<String, Long> rights = driver.createInputTopic(
                "right", Serdes.String().serializer(), Serdes.Long().serializer());
            TestOutputTopic<String, String> output = driver.createOutputTopic(
                "out", Serdes.String().deserializer(), Serdes.String().deserializer());
            String line;
            while ((line = in.readLine()) != null) {
                line = line.trim();
                if (line.equals("end")) {
                    drain(output, out);
                    return;
                }
                if (line.isEmpty()) {
                    continue;
                }
                String[] f = line.split("\\s+");
                if (f.length != 4) {
                    throw new IllegalArgumentException("a record line is `l|r key value timestamp`, got " + line);
                }
                boolean tombstone = f[2].equals("null");
                Instant at = Instant.ofEpochMilli(Long.parseLong(f[3]));
                switch (f[0]) {
                    case "l" -> lefts.pipeInput(new TestRecord<>(f[1], tombstone ? null : f[2], at));
                    case "r" -> rights.pipeInput(new TestRecord<>(f[1], tombstone ? null : Long.parseLong(f[2]), at));
                    default -> throw new IllegalArgumentException("a record is l or r, got " + line);
                }
                drain(output, out);
            }
            throw new IllegalArgumentException("stdin ended inside a case (no `end` line)");
        }
    }

    private static void drain(TestOutputTopic<String, String> output, PrintStream out) {
        while (!output.isEmpty()) {
            TestRecord<String, String> record = output.readRecord();
            out.println(record.key() + " " + (record.value() == null ? "null" : record.value()) + " " + record.timestamp());
        }
    }
}
