package parsley.differential;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.StreamJoined;
import org.apache.kafka.streams.kstream.ValueJoiner;
import org.apache.kafka.streams.state.BuiltInDslStoreSuppliers;

/**
 * The Kafka Streams side of the stream–stream join differential test.
 *
 * stdin: one or more cases, each a header line {@code inner|left|outer before_ms after_ms grace_ms},
 * lines {@code l key value timestamp} (a left record) or {@code r key value timestamp} (a right
 * record), and a line {@code end}. stdout: per case, one line {@code key value timestamp} per output
 * record, in output order, then {@code end}. The joiner writes {@code left:right}, {@code null} for
 * a missing side. Each case runs on a TopologyTestDriver of its own ({@link Harness}), with in-memory
 * stores and the outer join's emit interval at zero, so that unmatched records are looked at on every
 * record.
 */
public final class StreamJoins {
    public static void main(String[] args) throws Exception {
        Harness.run("stream-joins", StreamJoins::build);
    }

    private static Harness.Case<?, ?> build(String header) {
        String[] h = Harness.header(header, "inner|left|outer before after grace", 4, 4);
        JoinWindows windows = JoinWindows
            .ofTimeDifferenceAndGrace(Harness.millis(h[2]), Harness.millis(h[3]))
            .before(Harness.millis(h[1]))
            .after(Harness.millis(h[2]));
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
        return new Harness.Case<>(builder,
            Harness.twoTopics("l", Harness.Topic.longs("left"), "r", Harness.Topic.longs("right")),
            Harness.Output.records(Serdes.String().deserializer()))
            .set(StreamsConfig.DSL_STORE_SUPPLIERS_CLASS_CONFIG, BuiltInDslStoreSuppliers.InMemoryDslStoreSuppliers.class)
            .set(StreamsConfig.InternalConfig.EMIT_INTERVAL_MS_KSTREAMS_OUTER_JOIN_SPURIOUS_RESULTS_FIX, 0L);
    }
}
