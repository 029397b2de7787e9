package parsley.differential;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.ValueJoiner;

/**
 * The Kafka Streams side of the stream–table join differential test.
 *
 * stdin: one or more cases, each a header line {@code inner} or {@code left}, lines
 * {@code t key value timestamp} (a table record; value {@code null} is a tombstone) or
 * {@code s key value timestamp} (a stream record), and a line {@code end}. stdout: per
 * case, one line {@code key value timestamp} per output record, in output order, then
 * {@code end}. The joiner writes {@code stream:table}, {@code stream:null} for a left
 * join without a row. Each case runs on a TopologyTestDriver of its own ({@link Harness}).
 */
public final class Joins {
    public static void main(String[] args) throws Exception {
        Harness.run("joins", Joins::build);
    }

    private static Harness.Case<?, ?> build(String mode) {
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
        return new Harness.Case<>(builder,
            Harness.twoTopics("t", Harness.Topic.longsOrNull("discounts"), "s", Harness.Topic.longsOrNull("orders")),
            Harness.Output.records(Serdes.String().deserializer()));
    }
}
