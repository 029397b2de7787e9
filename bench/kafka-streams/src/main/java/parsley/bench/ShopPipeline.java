package parsley.bench;

import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;

import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Repartitioned;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.kstream.internals.TimeWindow;
import org.apache.kafka.streams.processor.PunctuationType;
import org.apache.kafka.streams.processor.api.FixedKeyProcessor;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorContext;
import org.apache.kafka.streams.processor.api.FixedKeyRecord;
import org.apache.kafka.streams.state.KeyValueBytesStoreSupplier;
import org.apache.kafka.streams.state.StoreBuilder;
import org.apache.kafka.streams.state.Stores;
import org.apache.kafka.streams.state.WindowBytesStoreSupplier;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * The order pipeline of {@code examples/shop-app} as a Kafka Streams 4.4
 * application, for {@code examples/topologies/benches/live_shop.rs}: the
 * same topics, the same JSON values, the same output formats.
 *
 * <pre>
 * orders ──► dedupe (10 min: a store and a punctuator) ──► unique-orders
 *        └─► selectKey(customer) ──► repartition ──► leftJoin(table(profiles)) ──► enriched-orders
 *              └─► selectKey(product) ──► repartition ──► windowedBy(60 s, grace 5 s)
 *                    .aggregate(sum of due) .suppress(untilWindowCloses) ──► product-revenue
 * </pre>
 *
 * The dedupe is written with the Processor API (Kafka Streams has no
 * operator for it): a key-value store of each id's first sighting, a record
 * dropped while its id's ten minutes of stream time are not over, and a
 * stream-time punctuator, every minute, deleting the ids whose ten minutes
 * are. (A window store fetched over the ten minutes before each record, the
 * other usual way, visits every timestamp in that range when in memory:
 * tried first, it cost this side 1.7 times the CPU on 20,000 orders, and
 * more as the input grows.) The
 * revenue key is written as Parsley's {@code WindowedCodec(Utf8)} writes
 * it (the key's bytes, then the window's start and end, 8 big-endian bytes
 * each), the revenue as a long.
 *
 * <p>Env: {@code PARSLEY_SHOP_BOOTSTRAP} (the broker),
 * {@code PARSLEY_SHOP_PREFIX} (of every topic name and of the application
 * id, {@code <prefix>shop}), {@code PARSLEY_SHOP_STORES} ({@code memory},
 * the default, as the Parsley stages keep their state in memory, or
 * {@code rocksdb}, Kafka Streams' default), {@code PARSLEY_SHOP_THREADS}
 * ({@code num.stream.threads}, default 1). Everything else is Kafka
 * Streams' default but {@code processing.guarantee=exactly_once_v2}
 * (commit interval 100 ms) and {@code max.task.idle.ms=1000}, as the Parsley
 * join waits up to a second ({@code synchronise_by_timestamp}).
 *
 * <p>Prints {@code ready} once the application is RUNNING the first time,
 * runs until its standard input closes, then closes the application and
 * prints {@code closed}. A stream thread that fails stops the process
 * (exit 1).
 */
public final class ShopPipeline {
    static final Duration DEDUPE = Duration.ofMinutes(10);
    static final Duration WINDOW = Duration.ofSeconds(60);
    static final Duration GRACE = Duration.ofSeconds(5);

    private ShopPipeline() {}

    /** An order, keyed by its id. */
    public static final class Order {
        public String id;
        public String customer;
        public String product;
        public long cents;
    }

    /** A customer's profile, keyed by customer: the table. */
    public static final class Profile {
        public String tier;
        public long discount;
    }

    /** An order with its customer's profile as the join saw it. */
    public static final class Enriched {
        public Order order;
        public String tier;
        public long due;

        static Enriched of(Order order, Profile profile) {
            Enriched enriched = new Enriched();
            enriched.order = order;
            enriched.tier = profile == null ? null : profile.tier;
            long discount = profile == null ? 0 : profile.discount;
            enriched.due = order.cents - order.cents * discount / 100;
            return enriched;
        }
    }

    static final ObjectMapper JSON = new ObjectMapper();

    /** JSON with Jackson, as a Kafka Streams user writes a serde. */
    static <T> Serde<T> json(Class<T> type) {
        Serializer<T> serializer = (topic, value) -> {
            if (value == null) {
                return null;
            }
            try {
                return JSON.writeValueAsBytes(value);
            } catch (IOException error) {
                throw new IllegalStateException(error);
            }
        };
        Deserializer<T> deserializer = (topic, bytes) -> {
            if (bytes == null) {
                return null;
            }
            try {
                return JSON.readValue(bytes, type);
            } catch (IOException error) {
                throw new IllegalStateException(error);
            }
        };
        return Serdes.serdeFrom(serializer, deserializer);
    }

    /** Parsley's {@code WindowedCodec(Utf8)}: key bytes, start, end. */
    static Serde<Windowed<String>> windowedKey() {
        Serializer<Windowed<String>> serializer = (topic, windowed) -> {
            byte[] key = windowed.key().getBytes(StandardCharsets.UTF_8);
            return ByteBuffer.allocate(key.length + 16)
                .put(key)
                .putLong(windowed.window().start())
                .putLong(windowed.window().end())
                .array();
        };
        Deserializer<Windowed<String>> deserializer = (topic, bytes) -> {
            ByteBuffer buffer = ByteBuffer.wrap(bytes);
            String key = new String(bytes, 0, bytes.length - 16, StandardCharsets.UTF_8);
            long start = buffer.getLong(bytes.length - 16);
            long end = buffer.getLong(bytes.length - 8);
            return new Windowed<>(key, new TimeWindow(start, end));
        };
        return Serdes.serdeFrom(serializer, deserializer);
    }

    /**
     * Drops an order whose id was first seen less than ten minutes (of
     * stream time) before it; a punctuator deletes the ids whose ten minutes
     * are over, every minute of stream time.
     */
    static final class Dedupe implements FixedKeyProcessor<String, Order, Order> {
        private FixedKeyProcessorContext<String, Order> context;
        private KeyValueStore<String, Long> firstSeen;

        @Override
        public void init(FixedKeyProcessorContext<String, Order> context) {
            this.context = context;
            this.firstSeen = context.getStateStore("dedupe-store");
            context.schedule(Duration.ofMinutes(1), PunctuationType.STREAM_TIME, this::expire);
        }

        @Override
        public void process(FixedKeyRecord<String, Order> record) {
            Long first = firstSeen.get(record.key());
            if (first != null && first + DEDUPE.toMillis() > context.currentStreamTimeMs()) {
                return;
            }
            firstSeen.put(record.key(), record.timestamp());
            context.forward(record);
        }

        private void expire(long streamTime) {
            List<String> expired = new ArrayList<>();
            try (KeyValueIterator<String, Long> all = firstSeen.all()) {
                while (all.hasNext()) {
                    KeyValue<String, Long> entry = all.next();
                    if (entry.value + DEDUPE.toMillis() <= streamTime) {
                        expired.add(entry.key);
                    }
                }
            }
            for (String id : expired) {
                firstSeen.delete(id);
            }
        }
    }

    static boolean rocksdb() {
        String stores = System.getenv().getOrDefault("PARSLEY_SHOP_STORES", "memory");
        switch (stores) {
            case "memory":
                return false;
            case "rocksdb":
                return true;
            default:
                throw new IllegalArgumentException(
                    "PARSLEY_SHOP_STORES must be memory or rocksdb, not " + stores);
        }
    }

    static StreamsBuilder topology(String prefix, boolean rocksdb) {
        Serde<String> strings = Serdes.String();
        Serde<Order> orders = json(Order.class);
        Serde<Profile> profiles = json(Profile.class);
        Serde<Enriched> enriched = json(Enriched.class);
        StreamsBuilder builder = new StreamsBuilder();

        KeyValueBytesStoreSupplier dedupeStore = rocksdb
            ? Stores.persistentKeyValueStore("dedupe-store")
            : Stores.inMemoryKeyValueStore("dedupe-store");
        StoreBuilder<KeyValueStore<String, Long>> dedupe =
            Stores.keyValueStoreBuilder(dedupeStore, strings, Serdes.Long());
        builder.addStateStore(dedupe);

        KStream<String, Order> unique = builder
            .stream(prefix + "orders", Consumed.with(strings, orders))
            .processValues(Dedupe::new, "dedupe-store");
        unique.to(prefix + "unique-orders", Produced.with(strings, orders));

        KeyValueBytesStoreSupplier profileStore = rocksdb
            ? Stores.persistentKeyValueStore("profiles-store")
            : Stores.inMemoryKeyValueStore("profiles-store");
        KTable<String, Profile> table = builder.table(prefix + "profiles",
            Consumed.with(strings, profiles),
            Materialized.<String, Profile>as(profileStore)
                .withKeySerde(strings)
                .withValueSerde(profiles));

        KStream<String, Enriched> sales = unique
            .selectKey((id, order) -> order.customer)
            .repartition(Repartitioned.<String, Order>as("by-customer")
                .withKeySerde(strings)
                .withValueSerde(orders))
            .leftJoin(table, Enriched::of);
        sales.to(prefix + "enriched-orders", Produced.with(strings, enriched));

        WindowBytesStoreSupplier revenueStore = rocksdb
            ? Stores.persistentWindowStore("revenue-store", WINDOW.plus(GRACE), WINDOW, false)
            : Stores.inMemoryWindowStore("revenue-store", WINDOW.plus(GRACE), WINDOW, false);
        sales
            .selectKey((customer, sale) -> sale.order.product)
            .groupByKey(Grouped.<String, Enriched>as("by-product")
                .withKeySerde(strings)
                .withValueSerde(enriched))
            .windowedBy(TimeWindows.ofSizeAndGrace(WINDOW, GRACE))
            .aggregate(() -> 0L, (product, sale, total) -> total + sale.due,
                Materialized.<String, Long>as(revenueStore)
                    .withKeySerde(strings)
                    .withValueSerde(Serdes.Long()))
            .suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()))
            .toStream()
            .to(prefix + "product-revenue",
                Produced.with(windowedKey(), Serdes.Long()));
        return builder;
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = System.getenv().getOrDefault("PARSLEY_SHOP_BOOTSTRAP", "127.0.0.1:19092");
        String prefix = System.getenv().getOrDefault("PARSLEY_SHOP_PREFIX", "");
        int threads = Integer.parseInt(System.getenv().getOrDefault("PARSLEY_SHOP_THREADS", "1"));
        boolean rocksdb = rocksdb();
        Path stateDir = Files.createTempDirectory("parsley-shop-streams-");

        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, prefix + "shop");
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, threads);
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
        // As the Parsley join's synchronise_by_timestamp(1 s): wait up to a
        // second for a source with nothing fetched.
        props.put(StreamsConfig.MAX_TASK_IDLE_MS_CONFIG,
            Long.parseLong(System.getenv().getOrDefault("PARSLEY_SHOP_IDLE_MS", "1000")));

        KafkaStreams streams = new KafkaStreams(topology(prefix, rocksdb).build(), props);
        streams.setUncaughtExceptionHandler(error -> {
            System.err.println("shop pipeline: a stream thread failed: " + error);
            error.printStackTrace();
            System.exit(1);
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        boolean[] ready = {false};
        streams.setStateListener((now, before) -> {
            if (now == KafkaStreams.State.RUNNING && !ready[0]) {
                ready[0] = true;
                System.out.println("ready");
                System.out.flush();
            }
        });
        streams.start();
        InputStream in = System.in;
        byte[] buffer = new byte[256];
        while (in.read(buffer) >= 0) {
            // Runs until the driver closes standard input.
        }
        streams.close(Duration.ofSeconds(60));
        streams.cleanUp();
        System.out.println("closed");
        System.out.flush();
        System.exit(0);
    }
}
