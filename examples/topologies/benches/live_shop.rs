//! The order pipeline live: Parsley's operators against a Kafka Streams 4.4
//! application doing the same (`bench/kafka-streams/.../ShopPipeline.java`),
//! on the same broker and the same input, each from an empty state until
//! its last output is committed.
//!
//! The pipeline is `examples/shop-app`'s: orders deduplicated within ten
//! minutes (expiring state), re-keyed by customer and enriched with the
//! customer's profile (a left stream–table join, timestamp-synchronised),
//! re-keyed by product, revenue per product per minute (tumbling windows,
//! grace 5 s) written once each window closes. One difference, so that the
//! two sides can be compared record for record: the windows close by stream
//! time (Kafka Streams' only way), not by the wall clock.
//!
//! Each round, per side: fresh topics (4 partitions) under a prefix of its
//! own; the input produced first (profiles, then orders, every fourth order
//! sent twice); the side started as a child process (this binary again, or
//! the JVM); the clock and the child's CPU time (user + system of every
//! thread, `/proc/<pid>/stat`: the JVM's JIT and GC threads too) run from
//! the spawn until a `read_committed` reader has seen every expected
//! output. The child is then stopped through its standard input, the reader
//! drains the output topics, and the outputs are checked against what the
//! input says they must be: every order id once in unique-orders and in
//! enriched-orders with its customer's last profile, every closed window's
//! revenue to the cent, no late record. A side whose output differs fails
//! the bench (exit 1), its figures and the difference on stderr, and gives
//! no result line.
//!
//! The input is laid out so that the outputs are deterministic: each order's
//! id, customer and product hash to the same partition (the records of one
//! partition stay in it through both re-keys, so no task sees another
//! task's records interleave, and no record can come late), and every
//! profile is older than every order (the join sees each customer's last
//! profile on both sides).
//!
//! ```text
//! bash bench/kafka-streams/compare-live.sh
//! ```
//! runs it with the Java side built. Env: `PARSLEY_SHOP_ORDERS` (distinct
//! orders, default 160,000: 200,000 order records), `PARSLEY_SHOP_ROUNDS`
//! (default 3; rounds alternate which side goes first), `PARSLEY_SHOP_STEP_MS`
//! (event time between orders, default 6: 16 minutes for 160,000 orders, so
//! ids expire from the dedupe after the first ten),
//! `PARSLEY_SHOP_JAVA_CP` (the Java side's classpath; without it only the
//! Parsley side runs), `PARSLEY_SHOP_JAVA_OPTS`, `PARSLEY_SHOP_STORES` and
//! `PARSLEY_SHOP_THREADS` (passed to the Java side), `PARSLEY_SHOP_TIMEOUT_S`
//! (per side and round, default 900), `PARSLEY_SHOP_REKEY_STAGES=1` (the
//! Parsley side with each re-key a stage of its own, for measuring what a
//! hop costs: see `pipeline`).

use parsley::Stage;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use parsley::partition_for;
use parsley::Expiring;
use parsley::Join;
use parsley::{App, Codec, CompositionError, Json, Parsley, Step, Topic, Utf8, I64};
use parsley::{Windowed, WindowedCodec, Windows};
use parsley_live::wall_clock_ms;
use parsley_live::{create_topics, test_broker, LiveClient, LiveConfig, Runtime, RuntimeConfig};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};

const PARTITIONS: u32 = 4;
const COMMIT_INTERVAL: Duration = Duration::from_millis(100);
const DEDUPE: Duration = Duration::from_secs(600);
const PROFILE_WAIT: Duration = Duration::from_secs(1);
const WINDOW_MS: i64 = 60_000;
const GRACE_MS: i64 = 5_000;
const CUSTOMERS: usize = 1_000;
const PRODUCTS: usize = 40;
/// Distinct orders are this far apart in event time, by default.
const STEP_MS: i64 = 6;

// ----- the pipeline, as examples/shop-app writes it -----

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Order {
    id: String,
    customer: String,
    product: String,
    cents: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Profile {
    tier: String,
    discount: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Enriched {
    order: Order,
    tier: Option<String>,
    due: i64,
}

#[derive(Clone)]
struct Topics {
    orders: Topic<String, Order>,
    profiles: Topic<String, Profile>,
    unique_orders: Topic<String, Order>,
    enriched: Topic<String, Enriched>,
    revenue: Topic<Windowed<String>, i64>,
    late: Topic<String, Enriched>,
}

impl Topics {
    fn new(prefix: &str) -> Topics {
        Topics {
            orders: Topic::with_codecs(format!("{prefix}orders"), Utf8, Json),
            profiles: Topic::with_codecs(format!("{prefix}profiles"), Utf8, Json),
            unique_orders: Topic::with_codecs(format!("{prefix}unique-orders"), Utf8, Json),
            enriched: Topic::with_codecs(format!("{prefix}enriched-orders"), Utf8, Json),
            revenue: Topic::with_codecs(
                format!("{prefix}product-revenue"),
                WindowedCodec(Utf8),
                I64,
            ),
            late: Topic::with_codecs(format!("{prefix}late-sales"), Utf8, Json),
        }
    }

    fn names(&self) -> [String; 6] {
        [
            self.orders.name().to_string(),
            self.profiles.name().to_string(),
            self.unique_orders.name().to_string(),
            self.enriched.name().to_string(),
            self.revenue.name().to_string(),
            self.late.name().to_string(),
        ]
    }
}

/// `examples/shop-app`'s `app`, its windows closed by stream time: each
/// re-key within the stage that writes what it re-keys (R3).
///
/// With `PARSLEY_SHOP_REKEY_STAGES=1`, for measuring what a hop costs (not
/// the shipped pipeline): each re-key a stage of its own
/// (`Stage::named(..).rekey`) that reads back the topic the stage before wrote,
/// two consume–produce hops an order more.
fn pipeline(prefix: &str, topics: &Topics) -> Result<App, CompositionError> {
    let stages = std::env::var("PARSLEY_SHOP_REKEY_STAGES").as_deref() == Ok("1");
    let shop = Parsley::named(format!("{prefix}shop"));
    let unique = topics.unique_orders.clone();
    let dedupe = Stage::named("dedupe")
        .expiring(Expiring::after(DEDUPE).from_first_write())
        .fold(
            &topics.orders,
            Json,
            || false,
            move |seen: bool, order| match seen {
                true => Step::of(true),
                false => {
                    Step::of(true).emit(unique.send(order.key().cloned(), order.value().clone()))
                }
            },
        )
        .into(&topics.unique_orders);
    let customer = |order: &Order| order.customer.clone();
    let (dedupe, by_customer, orders_by_customer) = match stages {
        true => {
            let (rekey, rekeyed) =
                Stage::named("by-customer").rekey(&topics.unique_orders, Utf8, move |order| {
                    customer(order.value())
                });
            (dedupe.build(), Some(rekey), rekeyed)
        }
        false => {
            let rekeyed = topics.unique_orders.repartition("by-customer", Utf8);
            let dedupe = dedupe.rekey_output(&topics.unique_orders, &rekeyed, move |_, order| {
                customer(order)
            });
            (dedupe.build(), None, rekeyed)
        }
    };
    let enrich = Stage::named("enrich")
        .join(Join::stream_table(&orders_by_customer, &topics.profiles))
        .left(|order, profile: Option<&Profile>| Enriched {
            order: order.value().clone(),
            tier: profile.map(|profile| profile.tier.clone()),
            due: order.value().cents
                - order.value().cents * profile.map_or(0, |profile| profile.discount) / 100,
        })
        .synchronise_by_timestamp(PROFILE_WAIT)
        .into(&topics.enriched);
    let product = |sale: &Enriched| sale.order.product.clone();
    let (enrich, by_product, enriched_by_product) = match stages {
        true => {
            let (rekey, rekeyed) =
                Stage::named("by-product")
                    .rekey(&topics.enriched, Utf8, move |sale| product(sale.value()));
            (enrich.build(), Some(rekey), rekeyed)
        }
        false => {
            let rekeyed = topics.enriched.repartition("by-product", Utf8);
            let enrich =
                enrich.rekey_output(&topics.enriched, &rekeyed, move |_, sale| product(sale));
            (enrich.build(), None, rekeyed)
        }
    };
    let revenue = Stage::named("revenue")
        .windowed(
            Windows::tumbling(Duration::from_millis(WINDOW_MS as u64))
                .grace(Duration::from_millis(GRACE_MS as u64)),
        )
        .aggregate(
            &enriched_by_product,
            I64,
            || 0i64,
            |total, sale| total + sale.value().due,
        )
        .late_records_to(&topics.late)
        .into(&topics.revenue)
        .build();
    let mut shop = shop.stage(dedupe);
    shop = match by_customer {
        Some(rekey) => shop.stage(rekey),
        None => shop,
    };
    shop = shop.stage(enrich);
    shop = match by_product {
        Some(rekey) => shop.stage(rekey),
        None => shop,
    };
    shop.stage(revenue).build()
}

/// The child process of the Parsley side: the pipeline on the runtime,
/// `ready` once started, stopped gracefully when standard input closes.
fn parsley_child() {
    let live = test_broker().expect("KAFKA_BOOTSTRAP_SERVERS");
    let prefix = std::env::var("PARSLEY_SHOP_PREFIX").expect("PARSLEY_SHOP_PREFIX");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio");
    runtime.block_on(async {
        let topics = Topics::new(&prefix);
        let app = pipeline(&prefix, &topics).expect("the pipeline");
        let config = RuntimeConfig::new(live).with_commit_interval(COMMIT_INTERVAL);
        let running = Runtime::start(Arc::new(app), config).await.expect("start");
        println!("ready");
        std::io::stdout().flush().expect("stdout");
        tokio::task::spawn_blocking(|| {
            let mut rest = Vec::new();
            let _ = std::io::stdin().read_to_end(&mut rest);
        })
        .await
        .expect("stdin");
        running.stopper().stop();
        let runs = running.wait().await;
        // What explains a far-off round: aborts redo work, restarts redo
        // their set-up.
        let sum = |metric: fn(&parsley::TaskMetrics) -> u64| -> u64 {
            runs.iter().map(|run| metric(&run.metrics)).sum()
        };
        eprintln!(
            "live_shop: parsley's tasks: {} deliveries, {} transactions committed, {} aborted, {} records redelivered, {} restarts",
            sum(|m| m.records_delivered_total),
            sum(|m| m.transactions_committed_total),
            sum(|m| m.transactions_aborted_total),
            sum(|m| m.records_redelivered_total),
            runs.iter().map(|run| u64::from(run.restarts)).sum::<u64>(),
        );
        println!("closed");
    });
}

// ----- the input and what it must give -----

struct Input {
    /// (customer, profile, timestamp), in the order produced.
    profiles: Vec<(String, Profile, i64)>,
    /// (order, timestamp), duplicates included, in the order produced.
    orders: Vec<(Order, i64)>,
    /// Each distinct order id: its tier and due as the join must give them.
    enriched: HashMap<String, (Option<String>, i64)>,
    /// Each window that closes: (product, start) and its revenue.
    windows: BTreeMap<(String, i64), i64>,
}

fn partition_of(key: &str) -> u32 {
    partition_for(Some(key.as_bytes()), PARTITIONS, 0)
}

/// `distinct` orders from `base` on, `step_ms` apart, every fourth sent
/// twice (the copy 3 ms later); two versions of a profile for nine
/// customers in ten, both older than every order.
fn plan(distinct: usize, step_ms: i64, base: i64) -> Input {
    let mut state: u64 = 0x5eed;
    let mut next = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) as usize
    };
    let mut products: Vec<Vec<String>> = vec![Vec::new(); PARTITIONS as usize];
    for product in 0..PRODUCTS {
        let name = format!("p{product}");
        products[partition_of(&name) as usize].push(name);
    }
    assert!(
        products.iter().all(|these| !these.is_empty()),
        "every partition has a product"
    );
    let mut profiles = Vec::new();
    let mut last: HashMap<String, Profile> = HashMap::new();
    for customer in 0..CUSTOMERS {
        if customer % 10 == 9 {
            continue;
        }
        let name = format!("c{customer}");
        for version in 0..2 {
            let profile = Profile {
                tier: format!("t{}", (customer + version) % 3),
                discount: ((customer * (7 + 6 * version)) % 40) as i64,
            };
            profiles.push((
                name.clone(),
                profile.clone(),
                base - 2_000 + 1_000 * version as i64,
            ));
            last.insert(name.clone(), profile);
        }
    }
    let mut orders = Vec::with_capacity(distinct + distinct / 4 + 1);
    let mut enriched = HashMap::with_capacity(distinct);
    let mut sales: Vec<(u32, String, i64, i64)> = Vec::with_capacity(distinct);
    for index in 0..distinct {
        let customer = format!("c{}", next() % CUSTOMERS);
        let partition = partition_of(&customer);
        let these = &products[partition as usize];
        let product = these[next() % these.len()].clone();
        let mut id = format!("o{index}");
        let mut attempt = 0;
        while partition_of(&id) != partition {
            attempt += 1;
            id = format!("o{index}-{attempt}");
        }
        let cents = 100 + (next() % 10_000) as i64;
        let at = base + step_ms * index as i64;
        let profile = last.get(&customer);
        let due = cents - cents * profile.map_or(0, |profile| profile.discount) / 100;
        enriched.insert(
            id.clone(),
            (profile.map(|profile| profile.tier.clone()), due),
        );
        sales.push((partition, product.clone(), at, due));
        let order = Order {
            id,
            customer,
            product,
            cents,
        };
        if index % 4 == 0 {
            orders.push((order.clone(), at));
            orders.push((order, at + 3));
        } else {
            orders.push((order, at));
        }
    }
    // A window closes when its partition's stream time (the last sale's
    // timestamp there) reaches its end plus the grace.
    let mut stream_time = [i64::MIN; PARTITIONS as usize];
    for (partition, _, at, _) in &sales {
        stream_time[*partition as usize] = stream_time[*partition as usize].max(*at);
    }
    let mut windows = BTreeMap::new();
    for (partition, product, at, due) in sales {
        let start = at - at.rem_euclid(WINDOW_MS);
        if start + WINDOW_MS + GRACE_MS <= stream_time[partition as usize] {
            *windows.entry((product, start)).or_insert(0) += due;
        }
    }
    Input {
        profiles,
        orders,
        enriched,
        windows,
    }
}

// ----- the broker -----

fn client_config(live: &LiveConfig) -> ClientConfig {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", &live.bootstrap_servers);
    config
}

fn admin(live: &LiveConfig) -> AdminClient<DefaultClientContext> {
    client_config(live).create().expect("admin client")
}

async fn create_plain_topics(live: &LiveConfig, names: &[String]) {
    let topics: Vec<NewTopic> = names
        .iter()
        .map(|name| NewTopic::new(name, PARTITIONS as i32, TopicReplication::Fixed(1)))
        .collect();
    for result in admin(live)
        .create_topics(&topics, &AdminOptions::new())
        .await
        .expect("create topics")
    {
        if let Err((name, code)) = result {
            assert_eq!(
                code,
                RDKafkaErrorCode::TopicAlreadyExists,
                "creating {name}"
            );
        }
    }
}

/// Prints how many offsets the round's topics hold, by kind: what a side
/// wrote (records, and the commit markers of its transactions), the input
/// included. Changelogs and internal topics are where the two sides differ.
fn report_offsets(consumer: &BaseConsumer, metadata: &rdkafka::metadata::Metadata, prefix: &str) {
    let mut by_kind: BTreeMap<&str, i64> = BTreeMap::new();
    for topic in metadata.topics() {
        let name = topic.name();
        if !name.starts_with(prefix) {
            continue;
        }
        let kind = if name.contains("changelog") {
            "changelogs"
        } else if name.contains("repartition") {
            "repartition topics"
        } else if name.ends_with("-ticks") {
            "tick topics"
        } else {
            "sources and sinks"
        };
        for partition in topic.partitions() {
            if let Ok((_, high)) =
                consumer.fetch_watermarks(name, partition.id(), Duration::from_secs(10))
            {
                *by_kind.entry(kind).or_default() += high;
            }
        }
    }
    let total: i64 = by_kind.values().sum();
    let parts: Vec<String> = by_kind
        .iter()
        .map(|(kind, offsets)| format!("{offsets} on {kind}"))
        .collect();
    eprintln!(
        "live_shop: {prefix}* holds {total} offsets (records and commit markers): {}",
        parts.join(", ")
    );
}

/// Deletes every topic whose name starts with `prefix`: the round's.
async fn delete_topics(live: &LiveConfig, prefix: &str) {
    let consumer: BaseConsumer = client_config(live).create().expect("metadata client");
    let Ok(metadata) = consumer.fetch_metadata(None, Duration::from_secs(30)) else {
        eprintln!("live_shop: could not list the topics of {prefix} to delete them");
        return;
    };
    let names: Vec<String> = metadata
        .topics()
        .iter()
        .map(|topic| topic.name().to_owned())
        .filter(|name| name.starts_with(prefix))
        .collect();
    report_offsets(&consumer, &metadata, prefix);
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    if names.is_empty() {
        return;
    }
    if let Err(error) = admin(live)
        .delete_topics(&names, &AdminOptions::new())
        .await
    {
        eprintln!("live_shop: deleting the topics of {prefix}: {error}");
    }
}

fn produce(live: &LiveConfig, topics: &Topics, input: &Input) {
    let producer: ThreadedProducer<DefaultProducerContext> = client_config(live)
        .set("linger.ms", "5")
        .set("queue.buffering.max.messages", "1000000")
        .create()
        .expect("producer");
    let send = |topic: &str, key: &str, value: Vec<u8>, at: i64| {
        let mut record = BaseRecord::to(topic)
            .partition(partition_of(key) as i32)
            .key(key)
            .payload(&value)
            .timestamp(at);
        loop {
            match producer.send(record) {
                Ok(()) => return,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    record = back;
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err((error, _)) => panic!("producing the input: {error}"),
            }
        }
    };
    for (customer, profile, at) in &input.profiles {
        let value = Codec::<Profile>::encode(&Json, profile).expect("a profile");
        send(
            topics.profiles.name().as_str(),
            customer,
            value.to_vec(),
            *at,
        );
    }
    for (order, at) in &input.orders {
        let value = Codec::<Order>::encode(&Json, order).expect("an order");
        send(
            topics.orders.name().as_str(),
            &order.id,
            value.to_vec(),
            *at,
        );
    }
    producer
        .flush(Duration::from_secs(120))
        .expect("the input flushed");
}

// ----- reading the outputs back -----

/// What a side wrote, as a `read_committed` reader saw it.
#[derive(Default)]
struct Outputs {
    unique: Vec<String>,
    enriched: Vec<(String, Option<String>, i64)>,
    windows: Vec<((String, i64), i64)>,
    late: usize,
}

/// One `read_committed` reader per output topic, each on its own thread,
/// into `outputs`; `at_end` counts the partitions whose last event was
/// the end of the log.
struct Reader {
    outputs: Arc<Mutex<Outputs>>,
    at_end: Arc<Mutex<HashSet<(usize, i32)>>>,
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Reader {
    fn start(live: &LiveConfig, topics: &Topics) -> Reader {
        let outputs = Arc::new(Mutex::new(Outputs::default()));
        let at_end = Arc::new(Mutex::new(HashSet::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let names = [
            topics.unique_orders.name().to_string(),
            topics.enriched.name().to_string(),
            topics.revenue.name().to_string(),
            topics.late.name().to_string(),
        ];
        let threads = names
            .into_iter()
            .enumerate()
            .map(|(which, name)| {
                let consumer: BaseConsumer = client_config(live)
                    .set("group.id", format!("{name}-reader"))
                    .set("isolation.level", "read_committed")
                    .set("enable.auto.commit", "false")
                    .set("enable.partition.eof", "true")
                    .set("fetch.wait.max.ms", "50")
                    .create()
                    .expect("reader");
                let mut assignment = TopicPartitionList::new();
                for partition in 0..PARTITIONS {
                    assignment
                        .add_partition_offset(&name, partition as i32, Offset::Beginning)
                        .expect("assignment");
                }
                consumer.assign(&assignment).expect("assign");
                let (outputs, at_end, stop) =
                    (Arc::clone(&outputs), Arc::clone(&at_end), Arc::clone(&stop));
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        match consumer.poll(Duration::from_millis(50)) {
                            None => {}
                            Some(Err(KafkaError::PartitionEOF(partition))) => {
                                at_end.lock().unwrap().insert((which, partition));
                            }
                            Some(Err(error)) => panic!("reading {name}: {error}"),
                            Some(Ok(message)) => {
                                at_end.lock().unwrap().remove(&(which, message.partition()));
                                let key = message.key().unwrap_or_default();
                                let value = message.payload().unwrap_or_default();
                                let mut outputs = outputs.lock().unwrap();
                                match which {
                                    0 => outputs.unique.push(
                                        Codec::<Order>::decode(&Json, value).expect("an order").id,
                                    ),
                                    1 => {
                                        let sale = Codec::<Enriched>::decode(&Json, value)
                                            .expect("an enriched order");
                                        outputs.enriched.push((sale.order.id, sale.tier, sale.due));
                                    }
                                    2 => {
                                        let window =
                                            WindowedCodec(Utf8).decode(key).expect("a window");
                                        let revenue =
                                            Codec::<i64>::decode(&I64, value).expect("a revenue");
                                        outputs.windows.push(((window.key, window.start), revenue));
                                    }
                                    _ => outputs.late += 1,
                                }
                            }
                        }
                    }
                })
            })
            .collect();
        Reader {
            outputs,
            at_end,
            stop,
            threads,
        }
    }

    /// (unique orders, enriched orders, windows) read so far.
    fn counts(&self) -> (usize, usize, usize) {
        let outputs = self.outputs.lock().unwrap();
        (
            outputs.unique.len(),
            outputs.enriched.len(),
            outputs.windows.len(),
        )
    }

    /// Everything, once every partition has stayed at its end for a second.
    fn drain(self) -> Outputs {
        let all = 4 * PARTITIONS as usize;
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut settled_since: Option<Instant> = None;
        while Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
            if self.at_end.lock().unwrap().len() == all {
                let since = *settled_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= Duration::from_secs(1) {
                    break;
                }
            } else {
                settled_since = None;
            }
        }
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads {
            thread.join().expect("reader");
        }
        Arc::try_unwrap(self.outputs)
            .ok()
            .expect("the readers are done")
            .into_inner()
            .unwrap()
    }
}

/// Whether `outputs` are what `input` must give; `Err` names the first
/// difference.
fn check(input: &Input, outputs: &Outputs) -> Result<(), String> {
    let distinct = input.enriched.len();
    let unique: HashSet<&String> = outputs.unique.iter().collect();
    if outputs.unique.len() != distinct || unique.len() != distinct {
        return Err(format!(
            "unique-orders: {} records, {} ids, expected {distinct} of each",
            outputs.unique.len(),
            unique.len()
        ));
    }
    if let Some(stranger) = unique.iter().find(|id| !input.enriched.contains_key(**id)) {
        return Err(format!(
            "unique-orders: {stranger} is no order of the input"
        ));
    }
    if outputs.enriched.len() != distinct {
        return Err(format!(
            "enriched-orders: {} records, expected {distinct}",
            outputs.enriched.len()
        ));
    }
    let mut seen = HashSet::new();
    for (id, tier, due) in &outputs.enriched {
        if !seen.insert(id) {
            return Err(format!("enriched-orders: {id} twice"));
        }
        match input.enriched.get(id) {
            Some((expected_tier, expected_due)) if expected_tier == tier && expected_due == due => {
            }
            expected => {
                return Err(format!(
                    "enriched-orders: {id} as ({tier:?}, {due}), expected {expected:?}"
                ))
            }
        }
    }
    let mut windows = BTreeMap::new();
    for (window, revenue) in &outputs.windows {
        if windows.insert(window.clone(), *revenue).is_some() {
            return Err(format!("product-revenue: {window:?} twice"));
        }
    }
    if windows != input.windows {
        let wrong = input
            .windows
            .iter()
            .filter(|(window, revenue)| windows.get(*window) != Some(revenue))
            .count();
        return Err(format!(
            "product-revenue: {} windows, expected {}; {wrong} expected ones missing or not exact",
            windows.len(),
            input.windows.len()
        ));
    }
    if outputs.late != 0 {
        return Err(format!(
            "late-sales: {} records, expected none",
            outputs.late
        ));
    }
    Ok(())
}

// ----- running a side -----

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Side {
    Parsley,
    KafkaStreams,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Parsley => "parsley",
            Side::KafkaStreams => "kafka-streams",
        }
    }
}

/// The machine's busy and total jiffies (`/proc/stat`).
fn machine_jiffies() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let fields: Vec<u64> = stat
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .filter_map(|field| field.parse().ok())
        .collect();
    let total: u64 = fields.iter().take(8).sum();
    let idle = fields.get(3)? + fields.get(4)?;
    Some((total - idle, total))
}

/// A process's CPU time in seconds, user plus system, all its threads.
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // USER_HZ is 100 on Linux.
    Some(parsley_examples::cpu::process_ticks(&stat)? as f64 / 100.0)
}

/// One side's run.
struct Measured {
    /// From the spawn until the side said it was running.
    ready: Duration,
    /// From the spawn until the last expected output was visible.
    done: Duration,
    cpu_ready: f64,
    cpu_done: f64,
    /// The machine's busy cores over the run (of all of them).
    machine: Option<f64>,
}

impl Measured {
    fn records_per_second(&self, records: usize) -> f64 {
        records as f64 / self.done.as_secs_f64()
    }

    fn micros_per_record(&self, records: usize) -> f64 {
        self.cpu_done * 1e6 / records as f64
    }

    fn micros_per_record_after_ready(&self, records: usize) -> f64 {
        (self.cpu_done - self.cpu_ready) * 1e6 / records as f64
    }
}

struct Settings {
    live: LiveConfig,
    java_cp: Option<String>,
    java_opts: Vec<String>,
    timeout: Duration,
}

fn spawn(settings: &Settings, side: Side, prefix: &str) -> Child {
    let mut command = match side {
        Side::Parsley => {
            let mut command = Command::new(std::env::current_exe().expect("this binary"));
            command
                .env("PARSLEY_SHOP_ROLE", "parsley")
                .env("PARSLEY_SHOP_PREFIX", prefix);
            command
        }
        Side::KafkaStreams => {
            let mut command = Command::new("java");
            command
                .args(&settings.java_opts)
                .arg("-cp")
                .arg(settings.java_cp.as_deref().expect("a classpath"))
                .arg("parsley.bench.ShopPipeline")
                .env("PARSLEY_SHOP_BOOTSTRAP", &settings.live.bootstrap_servers)
                .env("PARSLEY_SHOP_PREFIX", prefix);
            command
        }
    };
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn the side")
}

fn run_side(
    settings: &Settings,
    tokio: &tokio::runtime::Runtime,
    side: Side,
    input: &Input,
) -> Result<Measured, String> {
    let live = &settings.live;
    let prefix = format!("lshop-{}-{:x}-", side.name(), wall_clock_ms());
    let topics = Topics::new(&prefix);
    tokio.block_on(async {
        match side {
            Side::Parsley => {
                let client = LiveClient::new(live.clone()).expect("client");
                let app = pipeline(&prefix, &topics).expect("the pipeline");
                create_topics(&client, &app, PARTITIONS, &Default::default())
                    .await
                    .expect("topics");
            }
            Side::KafkaStreams => create_plain_topics(live, &topics.names()).await,
        }
    });
    produce(live, &topics, input);
    let reader = Reader::start(live, &topics);
    let expected = (
        input.enriched.len(),
        input.enriched.len(),
        input.windows.len(),
    );

    let machine_before = machine_jiffies();
    let started = Instant::now();
    let mut child = spawn(settings, side, &prefix);
    let pid = child.id();
    let stdout = child.stdout.take().expect("stdout");
    let (ready_tx, ready_rx) = mpsc::channel();
    let lines = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line == "ready" {
                let _ = ready_tx.send((started.elapsed(), cpu_seconds(pid).unwrap_or(0.0)));
            }
        }
    });
    let outcome = loop {
        std::thread::sleep(Duration::from_millis(20));
        let counts = reader.counts();
        if counts == expected {
            let done = started.elapsed();
            let cpu = cpu_seconds(pid).unwrap_or(f64::NAN);
            break Ok((done, cpu));
        }
        if let Ok(Some(status)) = child.try_wait() {
            break Err(format!(
                "{} exited ({status}) at {counts:?} of {expected:?} outputs",
                side.name()
            ));
        }
        if started.elapsed() > settings.timeout {
            break Err(format!(
                "{} timed out after {:?} at {counts:?} of {expected:?} outputs (unique, enriched, windows)",
                side.name(),
                settings.timeout
            ));
        }
    };
    let machine = machine_jiffies()
        .zip(machine_before)
        .map(|((busy, total), (busy0, total0))| {
            let cores = std::thread::available_parallelism().map_or(1, usize::from) as f64;
            cores * (busy - busy0) as f64 / (total - total0).max(1) as f64
        });
    // Stop: close its standard input, give it a minute, then kill it.
    drop(child.stdin.take());
    let stopping = Instant::now();
    while child.try_wait().ok().flatten().is_none() && stopping.elapsed() < Duration::from_secs(60)
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    if child.try_wait().ok().flatten().is_none() {
        eprintln!(
            "live_shop: {} did not stop within a minute; killing it",
            side.name()
        );
        let _ = child.kill();
        let _ = child.wait();
    }
    let _ = lines.join();
    let outputs = reader.drain();
    tokio.block_on(delete_topics(live, &prefix));
    let (done, cpu_done) = outcome?;
    let (ready, cpu_ready) = ready_rx
        .try_recv()
        .map_err(|_| format!("{} never said it was ready", side.name()))?;
    let measured = Measured {
        ready,
        done,
        cpu_ready,
        cpu_done,
        machine,
    };
    if let Err(difference) = check(input, &outputs) {
        eprintln!(
            "live_shop: {} outputs differ from the input's ({difference}); it ran {:.2} s, {:.2} CPU s",
            side.name(),
            measured.done.as_secs_f64(),
            measured.cpu_done
        );
        return Err(format!("{}: {difference}", side.name()));
    }
    Ok(measured)
}

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    match values.len() % 2 {
        1 => values[middle],
        _ => (values[middle - 1] + values[middle]) / 2.0,
    }
}

fn main() {
    if std::env::var("PARSLEY_SHOP_ROLE").as_deref() == Ok("parsley") {
        parsley_child();
        return;
    }
    // `cargo bench` passes `--bench`; nothing else to parse.
    let Some(live) = test_broker() else { return };
    let settings = Settings {
        live,
        java_cp: std::env::var("PARSLEY_SHOP_JAVA_CP")
            .ok()
            .filter(|cp| !cp.is_empty()),
        java_opts: std::env::var("PARSLEY_SHOP_JAVA_OPTS")
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_owned)
            .collect(),
        timeout: Duration::from_secs(env_number("PARSLEY_SHOP_TIMEOUT_S", 900) as u64),
    };
    let distinct = env_number("PARSLEY_SHOP_ORDERS", 160_000).max(1);
    let rounds = env_number("PARSLEY_SHOP_ROUNDS", 3).max(1);
    let sides: Vec<Side> = match settings.java_cp {
        Some(_) => vec![Side::Parsley, Side::KafkaStreams],
        None => {
            eprintln!("live_shop: PARSLEY_SHOP_JAVA_CP is not set: the Parsley side only (bench/kafka-streams/compare-live.sh sets it)");
            vec![Side::Parsley]
        }
    };
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio");
    // Event time two hours back (within the broker's retention and its
    // bound on timestamps ahead of its clock), aligned to a minute.
    let base = {
        let base = wall_clock_ms() - 2 * 3_600_000;
        base - base.rem_euclid(WINDOW_MS)
    };
    let step_ms = env_number("PARSLEY_SHOP_STEP_MS", STEP_MS as usize).max(1) as i64;
    let input = plan(distinct, step_ms, base);
    let records = input.profiles.len() + input.orders.len();
    let revenue: i64 = input.windows.values().sum();
    println!(
        "live shop pipeline: {records} input records over {:.0} s of event time ({step_ms} ms apart) ({} order records of {distinct} orders, {} profiles) on {PARTITIONS} partitions; expected: {distinct} unique and enriched orders ({} duplicates dropped), {} windows closed totalling {revenue} cents, none late",
        (step_ms * distinct as i64) as f64 / 1000.0,
        input.orders.len(),
        input.profiles.len(),
        input.orders.len() - distinct,
        input.windows.len(),
    );
    let mut results: Vec<(usize, Side, Measured)> = Vec::new();
    for round in 1..=rounds {
        let order: Vec<Side> = match round % 2 {
            1 => sides.clone(),
            _ => sides.iter().rev().copied().collect(),
        };
        for side in order {
            match run_side(&settings, &tokio, side, &input) {
                Ok(measured) => {
                    println!(
                        "round {round} {:<13} ready {:>5.2} s  done {:>6.2} s  {:>7.0} records/s  cpu {:>6.2} s ({:.2} s to ready)  {:>6.1} µs/record ({:.1} after ready)  machine {} cores busy  outputs exact",
                        side.name(),
                        measured.ready.as_secs_f64(),
                        measured.done.as_secs_f64(),
                        measured.records_per_second(records),
                        measured.cpu_done,
                        measured.cpu_ready,
                        measured.micros_per_record(records),
                        measured.micros_per_record_after_ready(records),
                        measured.machine.map_or("n/a".into(), |cores| format!("{cores:.2}")),
                    );
                    results.push((round, side, measured));
                }
                Err(failure) => {
                    eprintln!("live_shop: round {round}: {failure}");
                    std::process::exit(1);
                }
            }
        }
    }
    if sides.len() < 2 {
        return;
    }
    let of = |round: usize, side: Side| {
        results
            .iter()
            .find(|(r, s, _)| *r == round && *s == side)
            .map(|(_, _, measured)| measured)
            .expect("both sides ran")
    };
    let mut cpu_ratios = Vec::new();
    let mut cpu_ratios_after_ready = Vec::new();
    let mut wall_ratios = Vec::new();
    for round in 1..=rounds {
        let (parsley, streams) = (of(round, Side::Parsley), of(round, Side::KafkaStreams));
        cpu_ratios.push(streams.micros_per_record(records) / parsley.micros_per_record(records));
        cpu_ratios_after_ready.push(
            streams.micros_per_record_after_ready(records)
                / parsley.micros_per_record_after_ready(records),
        );
        wall_ratios.push(parsley.records_per_second(records) / streams.records_per_second(records));
    }
    let column = |side: Side, figure: &dyn Fn(&Measured) -> f64| {
        median(
            results
                .iter()
                .filter(|(_, s, _)| *s == side)
                .map(|(_, _, measured)| figure(measured))
                .collect(),
        )
    };
    println!();
    println!("| side | records/s | ready (s) | CPU s | CPU µs/record | after ready | machine busy (cores) |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for side in [Side::Parsley, Side::KafkaStreams] {
        println!(
            "| {} | {:.0} | {:.2} | {:.2} | {:.1} | {:.1} | {:.2} |",
            side.name(),
            column(side, &|m| m.records_per_second(records)),
            column(side, &|m| m.ready.as_secs_f64()),
            column(side, &|m| m.cpu_done),
            column(side, &|m| m.micros_per_record(records)),
            column(side, &|m| m.micros_per_record_after_ready(records)),
            column(side, &|m| m.machine.unwrap_or(f64::NAN)),
        );
    }
    let range = |ratios: &[f64]| {
        let mut sorted = ratios.to_vec();
        sorted.sort_by(f64::total_cmp);
        format!(
            "{:.2} (min {:.2}, max {:.2}; rounds {})",
            median(ratios.to_vec()),
            sorted[0],
            sorted[sorted.len() - 1],
            ratios
                .iter()
                .map(|ratio| format!("{ratio:.2}"))
                .collect::<Vec<_>>()
                .join(" / ")
        )
    };
    println!();
    println!(
        "CPU per record, Kafka Streams / Parsley: {} (target ≥ 3)",
        range(&cpu_ratios)
    );
    println!(
        "CPU per record after ready, Kafka Streams / Parsley: {}",
        range(&cpu_ratios_after_ready)
    );
    println!(
        "records/s, Parsley / Kafka Streams: {}",
        range(&wall_ratios)
    );
}
