package parsley.differential;

import java.time.Duration;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.kstream.WindowedSerdes;

/**
 * The Kafka Streams side of the windowed-aggregation differential test.
 *
 * stdin: one or more cases, each a header line {@code size_ms advance_ms grace_ms mode}
 * (mode is {@code close} for suppress(untilWindowCloses) or {@code update} for the
 * uncached windowed KTable's changelog), lines {@code key value timestamp}, and a
 * line {@code end}. stdout: per case, one line {@code key start end value timestamp} per output
 * record, in output order, then a line {@code end}. Each case runs on a
 * TopologyTestDriver of its own, so that one JVM serves hundreds of cases ({@link Harness}).
 */
public final class Windows {
    public static void main(String[] args) throws Exception {
        Harness.run("windows", Windows::build);
    }

    private static Harness.Case<?, ?> build(String headerLine) {
        String[] header = Harness.header(headerLine, "size advance grace mode", 4, 4);
        long size = Long.parseLong(header[0]);
        long advance = Long.parseLong(header[1]);
        long grace = Long.parseLong(header[2]);
        String mode = header[3];

        StreamsBuilder builder = new StreamsBuilder();
        KTable<Windowed<String>, Long> table = builder
            .stream("sales", Consumed.with(Serdes.String(), Serdes.Long()))
            .groupByKey()
            .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMillis(size), Duration.ofMillis(grace))
                .advanceBy(Duration.ofMillis(advance)))
            .aggregate(() -> 0L, (k, v, agg) -> agg + v, Materialized.with(Serdes.String(), Serdes.Long()));
        if (mode.equals("close")) {
            table = table.suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()));
        } else if (!mode.equals("update")) {
            throw new IllegalArgumentException("mode must be close or update, got " + mode);
        }
        WindowedSerdes.TimeWindowedSerde<String> windowed = new WindowedSerdes.TimeWindowedSerde<>(Serdes.String(), size);
        table.toStream().to("out", Produced.with(windowed, Serdes.Long()));
        return new Harness.Case<>(builder, Harness.oneTopic(Harness.Topic.longs("sales")),
            Harness.Output.windows(windowed.deserializer()));
    }
}
