package parsley.differential;

import java.time.Duration;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Joined;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.ValueJoiner;
import org.apache.kafka.streams.state.Stores;

/**
 * The Kafka Streams side of the versioned stream–table join differential test (KIP-914).
 *
 * stdin: one or more cases, each a header line {@code inner RETENTION_MS [GRACE_MS]} or
 * {@code left RETENTION_MS [GRACE_MS]} (with a grace, the join holds stream records for it,
 * {@code Joined.withGracePeriod}, KIP-923), lines {@code t key value timestamp} (a table record; value
 * {@code null} is a tombstone) or {@code s key value timestamp} (a stream record), and a line
 * {@code end}. The table is materialised in {@code Stores.persistentVersionedKeyValueStore}
 * with that history retention. stdout: per case, one line {@code key value timestamp} per
 * output record, in output order, then {@code end}. The joiner writes {@code stream:table},
 * {@code stream:null} for a left join without a row. Each case runs on a TopologyTestDriver
 * of its own ({@link Harness}).
 */
public final class VersionedJoins {
    public static void main(String[] args) throws Exception {
        Harness.run("versioned-joins", VersionedJoins::build);
    }

    private static Harness.Case<?, ?> build(String header) {
        String[] f = Harness.header(header, "inner|left RETENTION_MS [GRACE_MS]", 2, 3);
        Duration retention = Harness.millis(f[1]);
        Joined<String, Long, Long> joinedWith = Joined.with(Serdes.String(), Serdes.Long(), Serdes.Long());
        if (f.length == 3) {
            joinedWith = joinedWith.withGracePeriod(Harness.millis(f[2]));
        }
        ValueJoiner<Long, Long, String> joiner = (order, discount) -> order + ":" + (discount == null ? "null" : discount);
        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, Long> stream = builder.stream("orders", Consumed.with(Serdes.String(), Serdes.Long()));
        KTable<String, Long> table = builder.table("discounts", Consumed.with(Serdes.String(), Serdes.Long()),
            Materialized.<String, Long>as(Stores.persistentVersionedKeyValueStore("discounts-versioned", retention))
                .withKeySerde(Serdes.String()).withValueSerde(Serdes.Long()));
        KStream<String, String> joined;
        if (f[0].equals("inner")) {
            joined = stream.join(table, joiner, joinedWith);
        } else if (f[0].equals("left")) {
            joined = stream.leftJoin(table, joiner, joinedWith);
        } else {
            throw new IllegalArgumentException("a case header starts with inner or left, got " + header);
        }
        joined.to("out", Produced.with(Serdes.String(), Serdes.String()));
        return new Harness.Case<>(builder,
            Harness.twoTopics("t", Harness.Topic.longsOrNull("discounts"), "s", Harness.Topic.longsOrNull("orders")),
            Harness.Output.records(Serdes.String().deserializer()));
    }
}
