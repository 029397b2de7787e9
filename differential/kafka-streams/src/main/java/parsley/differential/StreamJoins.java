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
import java.util.Properties;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TestInputTopic;
import org.apache.kafka.streams.TestOutputTopic;
import org.apache.kafka.streams.TopologyTestDriver;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.StreamJoined;
import org.apache.kafka.streams.kstream.ValueJoiner;
import org.apache.kafka.streams.state.BuiltInDslStoreSuppliers;
import org.apache.kafka.streams.test.TestRecord;

/**
 * The Kafka Streams side of the stream–stream join differential test.
 *
 * stdin: one or more cases, each a header line {@code inner|left|outer before_ms after_ms grace_ms},
 * lines {@code l key value timestamp} (a left record) or {@code r key value timestamp} (a right
 * record), and a line {@code end}. stdout: per case, one line {@code key value timestamp} per output
 * record, in output order, then {@code end}. The joiner writes {@code left:right}, {@code null} for
 * a missing side. Each case runs on a TopologyTestDriver of its own, with in-memory stores and the
 * outer join's emit interval at zero, so that unmatched records are looked at on every record.
 */
public final class StreamJoins {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        Path stateDir = Files.createTempDirectory("parsley-differential-stream-joins-");
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
        String[] h = header.split("\\s+");
        if (h.length != 4) {
            throw new IllegalArgumentException("a case header is `inner|left|outer before after grace`, got " + header);
        }
        JoinWindows windows = JoinWindows
            .ofTimeDifferenceAndGrace(Duration.ofMillis(Long.parseLong(h[2])), Duration.ofMillis(Long.parseLong(h[3])))
            .before(Duration.ofMillis(Long.parseLong(h[1])))
            .after(Duration.ofMillis(Long.parseLong(h[2])));
        ValueJoiner<Long, Long, String> joiner = (left, right) ->
            (left == null ? "null" : left.toString()) + ":" + (right == null ? "null" : right.toString());
        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, Long> left = builder.stream("left", Consumed.with(Serdes.String(), Serdes.Long()));
        KStream<String, Long> right = builder.stream("right", Consumed.with(Serdes.String(), Serdes.Long()));
        StreamJoined<String, Long, Long> joined = StreamJoined.with(Serdes.String(), Serdes.Long(), Serdes.Long());
        KStream<String, String> result = switch (h[0]) {
            case "inner" -> left.join(right, joiner, windows, joined);
            case "left" -> left.leftJoin(right, joiner, windows, joined);
            case "outer" -> left.outerJoin(right, joiner, windows, joined);
            default -> throw new IllegalArgumentException("a join is inner, left or outer, got " + h[0]);
        };
        result.to("out", Produced.with(Serdes.String(), Serdes.String()));

        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, "differential-stream-joins");
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "dummy:1234");
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
        props.put(StreamsConfig.DSL_STORE_SUPPLIERS_CLASS_CONFIG,
            BuiltInDslStoreSuppliers.InMemoryDslStoreSuppliers.class);
        props.put(StreamsConfig.InternalConfig.EMIT_INTERVAL_MS_KSTREAMS_OUTER_JOIN_SPURIOUS_RESULTS_FIX, 0L);
        try (TopologyTestDriver driver = new TopologyTestDriver(builder.build(), props, Instant.ofEpochMilli(0))) {
            TestInputTopic<String, Long> lefts = driver.createInputTopic(
                "left", Serdes.String().serializer(), Serdes.Long().serializer());
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
                Long value = Long.parseLong(f[2]);
                Instant at = Instant.ofEpochMilli(Long.parseLong(f[3]));
                switch (f[0]) {
                    case "l" -> lefts.pipeInput(new TestRecord<>(f[1], value, at));
                    case "r" -> rights.pipeInput(new TestRecord<>(f[1], value, at));
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
            out.println(record.key() + " " + record.value() + " " + record.timestamp());
        }
    }
}
