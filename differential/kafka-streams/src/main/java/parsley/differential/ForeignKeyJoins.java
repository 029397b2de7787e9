package parsley.differential;

import java.util.function.Function;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.ValueJoiner;

/**
 * The Kafka Streams side of the foreign-key join differential test.
 *
 * stdin: one or more cases, each a header line {@code inner} or {@code left}, lines
 * {@code l key value timestamp} (a record of the left table, whose value is the foreign
 * key, {@code -} for none; value {@code null} is a tombstone) or {@code r key value
 * timestamp} (the right table, a long), and a line {@code end}. stdout: per case, one line
 * {@code key value timestamp} per output record, in output order ({@code null} for a
 * tombstone), then {@code end}. The joiner writes {@code foreignKey:right}, {@code null}
 * for a missing right value. Each case runs on a TopologyTestDriver of its own
 * ({@link Harness}), with the record cache off, both tables in in-memory stores.
 */
public final class ForeignKeyJoins {
    public static void main(String[] args) throws Exception {
        Harness.run("fk-joins", ForeignKeyJoins::build);
    }

    private static Harness.Case<?, ?> build(String header) {
        String mode = header.split("\\s+")[0];
        ValueJoiner<String, Long, String> joiner =
            (left, right) -> left + ":" + (right == null ? "null" : right.toString());
        Function<String, String> foreignKey = value -> value.equals("-") ? null : value;
        StreamsBuilder builder = new StreamsBuilder();
        KTable<String, String> left = Harness.inMemoryTable(builder, "left", Serdes.String());
        KTable<String, Long> right = Harness.inMemoryTable(builder, "right", Serdes.Long());
        KTable<String, String> joined;
        switch (mode) {
            case "inner" -> joined = left.join(right, foreignKey, joiner);
            case "left" -> joined = left.leftJoin(right, foreignKey, joiner);
            default -> throw new IllegalArgumentException("a case header is inner or left, got " + mode);
        }
        joined.toStream().to("out", Produced.with(Serdes.String(), Serdes.String()));
        return new Harness.Case<>(builder,
            Harness.twoTopics("l", Harness.Topic.stringsOrNull("left"), "r", Harness.Topic.longsOrNull("right")),
            Harness.Output.records(Serdes.String().deserializer()));
    }
}
