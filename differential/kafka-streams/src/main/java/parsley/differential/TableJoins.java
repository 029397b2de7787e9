package parsley.differential;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.ValueJoiner;

/**
 * The Kafka Streams side of the table–table join differential test.
 *
 * stdin: one or more cases, each a header line {@code inner}, {@code left} or {@code outer}
 * and an optional second field {@code cache} (the record cache on, as by default; off
 * otherwise), lines {@code l key value timestamp} (a record of the left table; value
 * {@code null} is a tombstone) or {@code r key value timestamp} (the right table), and a
 * line {@code end}. stdout: per case, one line {@code key value timestamp} per output
 * record, in output order ({@code null} for a tombstone), then {@code end}. The joiner
 * writes {@code left:right}, {@code null} for a missing side. Each case runs on a
 * TopologyTestDriver of its own ({@link Harness}), both tables in in-memory stores.
 */
public final class TableJoins {
    public static void main(String[] args) throws Exception {
        Harness.run("table-joins", TableJoins::build);
    }

    private static Harness.Case<?, ?> build(String header) {
        String[] fields = header.split("\\s+");
        String mode = fields[0];
        boolean cache = fields.length > 1 && fields[1].equals("cache");
        ValueJoiner<Long, Long, String> joiner =
            (left, right) -> (left == null ? "null" : left.toString()) + ":" + (right == null ? "null" : right.toString());
        StreamsBuilder builder = new StreamsBuilder();
        KTable<String, Long> left = Harness.inMemoryTable(builder, "left", Serdes.Long());
        KTable<String, Long> right = Harness.inMemoryTable(builder, "right", Serdes.Long());
        KTable<String, String> joined;
        switch (mode) {
            case "inner" -> joined = left.join(right, joiner);
            case "left" -> joined = left.leftJoin(right, joiner);
            case "outer" -> joined = left.outerJoin(right, joiner);
            default -> throw new IllegalArgumentException("a case header is inner, left or outer, got " + mode);
        }
        joined.toStream().to("out", Produced.with(Serdes.String(), Serdes.String()));
        Harness.Case<String, String> c = new Harness.Case<>(builder,
            Harness.twoTopics("l", Harness.Topic.longsOrNull("left"), "r", Harness.Topic.longsOrNull("right")),
            Harness.Output.records(Serdes.String().deserializer()));
        return cache ? c.recordCache() : c;
    }
}
