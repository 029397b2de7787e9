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
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TestInputTopic;
import org.apache.kafka.streams.TestOutputTopic;
import org.apache.kafka.streams.TopologyTestDriver;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.kstream.WindowedSerdes;
import org.apache.kafka.streams.state.SessionStore;
import org.apache.kafka.streams.test.TestRecord;

/**
 * The Kafka Streams side of the session-window differential test.
 *
 * stdin: one or more cases, each a header line {@code gap_ms grace_ms [retention_ms]}, lines
 * {@code key value timestamp}, and a line {@code end}. Each case runs
 * {@code groupByKey().windowedBy(SessionWindows.ofInactivityGapAndGrace(gap, grace))
 * .aggregate(0, sum, sum).suppress(untilWindowCloses(unbounded()))} with the record cache
 * off. Without {@code retention_ms} the session store keeps Kafka Streams' default
 * retention (gap + grace); with it, {@code Materialized.withRetention}. stdout: per case,
 * one line {@code key start end value} per output record, in output order, then a line
 * {@code end}. Each case runs on a TopologyTestDriver of its own, so that one JVM serves
 * hundreds of cases.
 */
public final class Sessions {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        // A state directory of its own: the test runs several programs at once,
        // and RocksDB locks its store under the shared default /tmp/kafka-streams.
        Path stateDir = Files.createTempDirectory("parsley-differential-");
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

    private static void runCase(String headerLine, BufferedReader in, PrintStream out, Path stateDir)
            throws IOException {
        String[] header = headerLine.split("\\s+");
        if (header.length != 2 && header.length != 3) {
            throw new IllegalArgumentException("a case header is `gap grace [retention]`, got " + headerLine);
        }
        long gap = Long.parseLong(header[0]);
        long grace = Long.parseLong(header[1]);

        Materialized<String, Long, SessionStore<Bytes, byte[]>> store =
            Materialized.with(Serdes.String(), Serdes.Long());
        if (header.length == 3) {
            store = store.withRetention(Duration.ofMillis(Long.parseLong(header[2])));
        }
        StreamsBuilder builder = new StreamsBuilder();
        builder
            .stream("sales", Consumed.with(Serdes.String(), Serdes.Long()))
            .groupByKey()
            .windowedBy(SessionWindows.ofInactivityGapAndGrace(Duration.ofMillis(gap), Duration.ofMillis(grace)))
            .aggregate(() -> 0L, (k, v, agg) -> agg + v, (k, one, two) -> one + two, store)
            .suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()))
            .toStream()
            .to("out", Produced.with(new WindowedSerdes.SessionWindowedSerde<>(Serdes.String()), Serdes.Long()));

        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, "differential-sessions");
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "dummy:1234");
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
        try (TopologyTestDriver driver = new TopologyTestDriver(builder.build(), props, Instant.ofEpochMilli(0))) {
            TestInputTopic<String, Long> input = driver.createInputTopic(
                "sales", Serdes.String().serializer(), Serdes.Long().serializer());
            TestOutputTopic<Windowed<String>, Long> output = driver.createOutputTopic(
                "out",
                new WindowedSerdes.SessionWindowedSerde<>(Serdes.String()).deserializer(),
                Serdes.Long().deserializer());
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
                input.pipeInput(new TestRecord<>(f[0], Long.parseLong(f[1]), Instant.ofEpochMilli(Long.parseLong(f[2]))));
                drain(output, out);
            }
            throw new IllegalArgumentException("stdin ended inside a case (no `end` line)");
        }
    }

    private static void drain(TestOutputTopic<Windowed<String>, Long> output, PrintStream out) {
        while (!output.isEmpty()) {
            KeyValue<Windowed<String>, Long> kv = output.readKeyValue();
            Windowed<String> w = kv.key;
            out.println(w.key() + " " + w.window().start() + " " + w.window().end() + " "
                + (kv.value == null ? "null" : kv.value.toString()));
        }
    }
}
