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
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.ValueJoiner;
import org.apache.kafka.streams.test.TestRecord;

/**
 * The Kafka Streams side of the stream–table join differential test.
 *
 * stdin: one or more cases, each a header line {@code inner} or {@code left}, lines
 * {@code t key value timestamp} (a table record; value {@code null} is a tombstone) or
 * {@code s key value timestamp} (a stream record), and a line {@code end}. stdout: per
 * case, one line {@code key value timestamp} per output record, in output order, then
 * {@code end}. The joiner writes {@code stream:table}, {@code stream:null} for a left
 * join without a row. Each case runs on a TopologyTestDriver of its own.
 */
public final class Joins {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        Path stateDir = Files.createTempDirectory("parsley-differential-joins-");
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

    private static void runCase(String mode, BufferedReader in, PrintStream out, Path stateDir)
            throws IOException {
        ValueJoiner<Long, Long, String> joiner = (order, discount) -> order + ":" + (discount == null ? "null" : discount);
        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, Long> stream = builder.stream("orders", Consumed.with(Serdes.String(), Serdes.Long()));
        KTable<String, Long> table = builder.table("discounts", Consumed.with(Serdes.String(), Serdes.Long()));
        KStream<String, String> joined;
        if (mode.equals("inner")) {
            joined = stream.join(table, joiner);
        } else if (mode.equals("left")) {
            joined = stream.leftJoin(table, joiner);
        } else {
            throw new IllegalArgumentException("a case header is inner or left, got " + mode);
        }
        joined.to("out", Produced.with(Serdes.String(), Serdes.String()));

        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, "differential-joins");
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "dummy:1234");
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
        try (TopologyTestDriver driver = new TopologyTestDriver(builder.build(), props, Instant.ofEpochMilli(0))) {
            TestInputTopic<String, Long> orders = driver.createInputTopic(
                "orders", Serdes.String().serializer(), Serdes.Long().serializer());
            TestInputTopic<String, Long> discounts = driver.createInputTopic(
                "discounts", Serdes.String().serializer(), Serdes.Long().serializer());
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
                    throw new IllegalArgumentException("a record line is `t|s key value timestamp`, got " + line);
                }
                Long value = f[2].equals("null") ? null : Long.parseLong(f[2]);
                Instant at = Instant.ofEpochMilli(Long.parseLong(f[3]));
                switch (f[0]) {
                    case "t" -> discounts.pipeInput(new TestRecord<>(f[1], value, at));
                    case "s" -> orders.pipeInput(new TestRecord<>(f[1], value, at));
                    default -> throw new IllegalArgumentException("a record is t or s, got " + line);
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
