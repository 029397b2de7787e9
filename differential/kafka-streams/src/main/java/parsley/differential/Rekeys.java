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

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TestInputTopic;
import org.apache.kafka.streams.TestOutputTopic;
import org.apache.kafka.streams.TopologyTestDriver;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.test.TestRecord;

/**
 * The Kafka Streams side of the re-key differential test.
 *
 * stdin: one or more cases, each a header line {@code rekey}, lines
 * {@code key value timestamp} (a sale: customer, amount) and a line {@code end}. The
 * topology sums each customer's sales, re-keys each running total by its bucket
 * ({@code b<total / 100>}, {@code selectKey}) and counts the totals per bucket (the
 * repartition topic {@code groupByKey} derives). stdout: per case, one line
 * {@code key value timestamp} per count written, in output order, then {@code end}.
 * Each case runs on a TopologyTestDriver of its own, with the record cache off so
 * that every update is written.
 */
public final class Rekeys {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        Path stateDir = Files.createTempDirectory("parsley-differential-rekeys-");
        try {
            String line;
            int cases = 0;
            while ((line = in.readLine()) != null) {
                line = line.trim();
                if (line.isEmpty()) {
                    continue;
                }
                if (!line.equals("rekey")) {
                    throw new IllegalArgumentException("a case header is rekey, got " + line);
                }
                runCase(in, out, stateDir.resolve("case-" + cases++));
                out.println("end");
            }
        } finally {
            Windows.deleteRecursively(stateDir);
        }
        out.flush();
    }

    private static void runCase(BufferedReader in, PrintStream out, Path stateDir) throws IOException {
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream("sales", Consumed.with(Serdes.String(), Serdes.Long()))
            .groupByKey()
            .aggregate(() -> 0L, (customer, amount, total) -> total + amount,
                Materialized.with(Serdes.String(), Serdes.Long()))
            .toStream()
            .selectKey((customer, total) -> "b" + (total / 100))
            .groupByKey(Grouped.with(Serdes.String(), Serdes.Long()))
            .count()
            .toStream()
            .to("out", Produced.with(Serdes.String(), Serdes.Long()));

        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, "differential-rekeys");
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "dummy:1234");
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
        try (TopologyTestDriver driver = new TopologyTestDriver(builder.build(), props, Instant.ofEpochMilli(0))) {
            TestInputTopic<String, Long> sales = driver.createInputTopic(
                "sales", Serdes.String().serializer(), Serdes.Long().serializer());
            TestOutputTopic<String, Long> output = driver.createOutputTopic(
                "out", Serdes.String().deserializer(), Serdes.Long().deserializer());
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
                if (f.length != 3) {
                    throw new IllegalArgumentException("a record line is `key value timestamp`, got " + line);
                }
                sales.pipeInput(new TestRecord<>(f[0], Long.parseLong(f[1]),
                    Instant.ofEpochMilli(Long.parseLong(f[2]))));
                drain(output, out);
            }
            throw new IllegalArgumentException("stdin ended inside a case (no `end` line)");
        }
    }

    private static void drain(TestOutputTopic<String, Long> output, PrintStream out) {
        while (!output.isEmpty()) {
            TestRecord<String, Long> record = output.readRecord();
            out.println(record.key() + " " + record.value() + " " + record.timestamp());
        }
    }
}
