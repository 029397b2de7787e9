package parsley.differential;

import java.time.Duration;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.WindowedSerdes;
import org.apache.kafka.streams.state.SessionStore;

/**
 * The Kafka Streams side of the session-window differential test.
 *
 * stdin: one or more cases, each a header line {@code gap_ms grace_ms [retention_ms]}, lines
 * {@code key value timestamp}, and a line {@code end}. Each case runs
 * {@code groupByKey().windowedBy(SessionWindows.ofInactivityGapAndGrace(gap, grace))
 * .aggregate(0, sum, sum).suppress(untilWindowCloses(unbounded()))} with the record cache
 * off. Without {@code retention_ms} the session store keeps Kafka Streams' default
 * retention (gap + grace); with it, {@code Materialized.withRetention}. stdout: per case,
 * one line {@code key start end value timestamp} per output record, in output order, then a line
 * {@code end}. Each case runs on a TopologyTestDriver of its own, so that one JVM serves
 * hundreds of cases ({@link Harness}).
 */
public final class Sessions {
    public static void main(String[] args) throws Exception {
        Harness.run("sessions", Sessions::build);
    }

    private static Harness.Case<?, ?> build(String headerLine) {
        String[] header = Harness.header(headerLine, "gap grace [retention]", 2, 3);
        Duration gap = Harness.millis(header[0]);
        Duration grace = Harness.millis(header[1]);

        Materialized<String, Long, SessionStore<Bytes, byte[]>> store =
            Materialized.with(Serdes.String(), Serdes.Long());
        if (header.length == 3) {
            store = store.withRetention(Harness.millis(header[2]));
        }
        WindowedSerdes.SessionWindowedSerde<String> windowed = new WindowedSerdes.SessionWindowedSerde<>(Serdes.String());
        StreamsBuilder builder = new StreamsBuilder();
        builder
            .stream("sales", Consumed.with(Serdes.String(), Serdes.Long()))
            .groupByKey()
            .windowedBy(SessionWindows.ofInactivityGapAndGrace(gap, grace))
            .aggregate(() -> 0L, (k, v, agg) -> agg + v, (k, one, two) -> one + two, store)
            .suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()))
            .toStream()
            .to("out", Produced.with(windowed, Serdes.Long()));
        return new Harness.Case<>(builder, Harness.oneTopic(Harness.Topic.longs("sales")),
            Harness.Output.windows(windowed.deserializer()));
    }
}
