package parsley.differential;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * The Kafka Streams side of the re-key differential test.
 *
 * stdin: one or more cases, each a header line {@code rekey}, lines
 * {@code key value timestamp} (a sale: customer, amount) and a line {@code end}. The
 * topology sums each customer's sales, re-keys each running total by its bucket
 * ({@code b<total / 100>}, {@code selectKey}) and counts the totals per bucket (the
 * repartition topic {@code groupByKey} derives). stdout: per case, one line
 * {@code key value timestamp} per count written, in output order, then {@code end}.
 * Each case runs on a TopologyTestDriver of its own ({@link Harness}), with the record
 * cache off so that every update is written.
 */
public final class Rekeys {
    public static void main(String[] args) throws Exception {
        Harness.run("rekeys", Rekeys::build);
    }

    private static Harness.Case<?, ?> build(String header) {
        if (!header.equals("rekey")) {
            throw new IllegalArgumentException("a case header is rekey, got " + header);
        }
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
        return new Harness.Case<>(builder, Harness.oneTopic(Harness.Topic.longs("sales")),
            Harness.Output.records(Serdes.Long().deserializer()));
    }
}
