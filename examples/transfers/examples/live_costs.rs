//! What the consistent views cost beside the plain topology, live: the
//! application run in this process by `parsley-live` on a real broker
//! (`KAFKA_BOOTSTRAP_SERVERS`, e.g. `export "$(bash
//! scripts/kafka/broker.sh start)"` in the Parsley repository), without the
//! views and with them at each epoch length asked for, in one run (the
//! machine is shared and noisy: compare the ratios within a run).
//!
//! Each variant gets topics of its own (2 partitions each) and the same
//! input: the generator's transfers from seed 1, out of order in event time
//! by up to ten seconds.
//!
//! - Throughput: COUNT transfers are produced first; the clock runs from
//!   the runtime's start until the totals topic holds the total that covers
//!   them: without the views, the 2·COUNT-th total (each transfer updates
//!   two balances, each balance update one total); with them, the total
//!   whose cut is the lowest epoch the transfers' partitions reached (the
//!   last epoch stays open, V5).
//! - Latency: transfers are produced at RATE a second for SECONDS, each
//!   stamped with its produce time less its lag; a `read_committed` reader
//!   of the totals notes when each total becomes visible. With the views, a
//!   transfer's latency is its produce time to the first visible total whose
//!   cut covers it (its epoch, V3: the highest timestamp of its partition up
//!   to it, is below the cut). Without them no total says what it covers:
//!   the figure is the produce time of transfer i (in produce order) to the
//!   time the totals topic holds 2(i+1) totals, the first moment as many
//!   effects as the transfers up to it have come through.
//!
//! ```text
//! cargo run --manifest-path examples/transfers/Cargo.toml --example live_costs
//! ```
//! `PARSLEY_BENCH_COUNT` (default 20000), `PARSLEY_BENCH_RATE` (default 300),
//! `PARSLEY_BENCH_SECONDS` (default 20), `PARSLEY_BENCH_EPOCHS_MS` (default
//! `100,1000`) and `PARSLEY_BENCH_ROUNDS` (throughput rounds, alternating
//! the order of the variants; default 2) change the load.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use parsley::header::{cut_of, is_progress};
use parsley::{App, Assembly, Codec, Json, RecordData, Tp, Utf8};
use parsley_live::{
    assemble_on, create_topics, test_broker, wall_clock_ms, Isolation, LiveClient, LiveConfig,
    Runtime, RuntimeConfig,
};
use parsley_transfers::{app, transfers_from, Topics, Transfer, TransferValue};

const PARTITIONS: u32 = 2;
const COMMIT_INTERVAL: Duration = Duration::from_millis(100);

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

/// Without the views, or with them at one epoch length.
#[derive(Clone, Copy)]
enum Variant {
    Plain,
    Views(Duration),
}

impl Variant {
    fn epoch(self) -> Option<Duration> {
        match self {
            Variant::Plain => None,
            Variant::Views(epoch) => Some(epoch),
        }
    }

    fn epoch_ms(self) -> Option<i64> {
        self.epoch().map(|epoch| epoch.as_millis() as i64)
    }

    fn name(self) -> String {
        match self {
            Variant::Plain => "no view".into(),
            Variant::Views(epoch) => format!("views, {} ms epochs", epoch.as_millis()),
        }
    }
}

/// One variant's topics, created and assembled.
struct Setup {
    client: LiveClient,
    app: App,
    topics: Topics,
    assembly: Assembly,
}

async fn set_up(live: &LiveConfig, variant: Variant, kind: &str) -> Setup {
    let namespace = format!("transfers-costs-{kind}-{:x}-", wall_clock_ms());
    let topics = Topics::new(&namespace);
    let app = app(&namespace, &topics, variant.epoch()).expect("the app composes");
    let client = LiveClient::new(live.clone()).expect("client");
    create_topics(&client, &app, PARTITIONS, &BTreeMap::new())
        .await
        .expect("topics");
    let assembly = assemble_on(&client, &app).await.expect("assembly");
    Setup {
        client,
        app,
        topics,
        assembly,
    }
}

impl Setup {
    fn transfers_tp(&self, transfer: &Transfer) -> (Tp, RecordData) {
        let name = self.topics.transfers.name();
        let partitions = self
            .assembly
            .partitions_of(name.as_str())
            .expect("transfers");
        let key = Codec::<String>::encode(&Utf8, &transfer.id).expect("a key");
        let partition = parsley::partition_for(Some(&key), partitions, 0);
        let value: TransferValue = transfer.value();
        let record = RecordData {
            key: Some(key),
            value: Some(Codec::<TransferValue>::encode(&Json, &value).expect("a value")),
            headers: Vec::new(),
            timestamp: transfer.timestamp_ms,
        };
        (Tp::new(name.clone(), partition), record)
    }

    fn totals_tps(&self) -> Vec<Tp> {
        let name = self.topics.totals.name();
        let partitions = self.assembly.partitions_of(name.as_str()).expect("totals");
        (0..partitions)
            .map(|partition| Tp::new(name.clone(), partition))
            .collect()
    }

    async fn start(&self, live: &LiveConfig) -> Runtime {
        let config = RuntimeConfig::new(live.clone()).with_commit_interval(COMMIT_INTERVAL);
        Runtime::start(Arc::new(self.app.clone()), config)
            .await
            .expect("the runtime starts")
    }
}

/// A total as the reader saw it: when it became visible, and its cut.
#[derive(Clone, Copy)]
struct Seen {
    at_ms: i64,
    cut: Option<i64>,
}

/// A `read_committed` reader of the totals: every data record, in the
/// order it became visible, with the wall clock of the fetch that saw it.
struct Reader {
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Reader {
    fn start(setup: &Setup, group: &str) -> Reader {
        let mut consumer = setup
            .client
            .consumer(group, Isolation::ReadCommitted)
            .expect("reader");
        let tps = setup.totals_tps();
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (stopping, saw) = (Arc::clone(&stop), Arc::clone(&seen));
        let task = tokio::spawn(async move {
            let mut next = vec![0u64; tps.len()];
            while !stopping.load(Ordering::Relaxed) {
                for (tp, from) in tps.iter().zip(next.iter_mut()) {
                    let fetched = consumer.fetch(tp, *from).await.expect("a fetch");
                    let at_ms = wall_clock_ms();
                    *from = fetched.next_offset;
                    let mut saw = saw.lock().expect("seen");
                    for record in fetched.records {
                        if !is_progress(&record.data) && record.data.value.is_some() {
                            saw.push(Seen {
                                at_ms,
                                cut: cut_of(&record.data),
                            });
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        });
        Reader { stop, seen, task }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("seen").clone()
    }

    async fn stop(self) -> Vec<Seen> {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.expect("the reader");
        let seen = self.seen.lock().expect("seen").clone();
        seen
    }
}

/// Each transfer's epoch (V3): the highest timestamp of its partition up
/// to it, in produce order (one producer: offset order), over `epoch_ms`.
fn epochs(setup: &Setup, transfers: &[Transfer], epoch_ms: i64) -> Vec<i64> {
    let mut highest: BTreeMap<u32, i64> = BTreeMap::new();
    transfers
        .iter()
        .map(|transfer| {
            let (tp, _) = setup.transfers_tp(transfer);
            let high = highest.entry(tp.partition).or_insert(i64::MIN);
            *high = (*high).max(transfer.timestamp_ms);
            high.div_euclid(epoch_ms)
        })
        .collect()
}

// ----- throughput -----

async fn throughput(live: &LiveConfig, variant: Variant, count: usize) -> f64 {
    let setup = set_up(live, variant, "throughput").await;
    let transfers = transfers_from(1, count, wall_clock_ms());
    let producer = setup.client.plain_producer().expect("producer");
    let mut deliveries = Vec::with_capacity(count);
    for transfer in &transfers {
        let (tp, record) = setup.transfers_tp(transfer);
        deliveries.push(producer.enqueue(&tp, &record).expect("queued"));
    }
    for delivery in deliveries {
        delivery.wait().await.expect("delivered");
    }
    // The total that covers the input: the last cut every partition
    // reached, or (no view) the 2·count-th total.
    let done = |seen: &[Seen]| match variant.epoch_ms() {
        None => seen.len() >= 2 * count,
        Some(epoch_ms) => {
            let reached = *epochs(&setup, &transfers, epoch_ms)
                .iter()
                .zip(&transfers)
                .fold(BTreeMap::new(), |mut last, (epoch, transfer)| {
                    last.insert(setup.transfers_tp(transfer).0.partition, *epoch);
                    last
                })
                .values()
                .min()
                .expect("a partition");
            seen.last().and_then(|total| total.cut) == Some(reached)
        }
    };
    let reader = Reader::start(&setup, &format!("reader-{:x}", wall_clock_ms()));
    let started = Instant::now();
    let runtime = setup.start(live).await;
    let deadline = started + Duration::from_secs(600);
    while !done(&reader.seen()) {
        assert!(
            Instant::now() < deadline,
            "{}: not through {count} transfers in 600 s",
            variant.name()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let took = started.elapsed();
    runtime.stopper().stop();
    runtime.wait().await;
    reader.stop().await;
    count as f64 / took.as_secs_f64()
}

// ----- latency -----

struct Latency {
    /// Milliseconds, sorted.
    sorted: Vec<i64>,
    produced: usize,
    totals: usize,
}

impl Latency {
    fn percentile(&self, share: f64) -> i64 {
        let at = ((self.sorted.len() as f64 - 1.0) * share).round() as usize;
        self.sorted[at]
    }
}

async fn latency(live: &LiveConfig, variant: Variant, rate: u64, seconds: u64) -> Latency {
    let setup = set_up(live, variant, "latency").await;
    let count = (rate * seconds) as usize;
    // The generator's lags: transfer i at `0 + i - lag`.
    let lags: Vec<i64> = transfers_from(1, count, 0)
        .iter()
        .enumerate()
        .map(|(i, transfer)| i as i64 - transfer.timestamp_ms)
        .collect();
    let reader = Reader::start(&setup, &format!("reader-{:x}", wall_clock_ms()));
    let runtime = setup.start(live).await;
    // Let the runtime's tasks start before the first transfer.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let producer = setup.client.plain_producer().expect("producer");
    let mut transfers: Vec<Transfer> = transfers_from(1, count, 0);
    let mut produced_ms = Vec::with_capacity(count);
    let mut deliveries = Vec::with_capacity(count);
    let started = Instant::now();
    for (i, transfer) in transfers.iter_mut().enumerate() {
        let due = started + Duration::from_micros(i as u64 * 1_000_000 / rate);
        tokio::time::sleep_until(due.into()).await;
        let now = wall_clock_ms();
        transfer.timestamp_ms = now - lags[i];
        let (tp, record) = setup.transfers_tp(transfer);
        deliveries.push(producer.enqueue(&tp, &record).expect("queued"));
        produced_ms.push(now);
    }
    for delivery in deliveries {
        delivery.wait().await.expect("delivered");
    }
    // Drain: the last closed epochs and a few commits.
    let drain = variant.epoch().unwrap_or_default() * 2 + Duration::from_secs(5);
    tokio::time::sleep(drain).await;
    runtime.stopper().stop();
    runtime.wait().await;
    let seen = reader.stop().await;
    let mut sorted: Vec<i64> = match variant.epoch_ms() {
        Some(epoch_ms) => {
            let epochs = epochs(&setup, &transfers, epoch_ms);
            epochs
                .iter()
                .zip(&produced_ms)
                .filter_map(|(epoch, produced)| {
                    // Cuts rise in the order the totals become visible.
                    let first =
                        seen.partition_point(|total| total.cut.unwrap_or(i64::MIN) <= *epoch);
                    seen.get(first).map(|total| total.at_ms - produced)
                })
                .collect()
        }
        None => produced_ms
            .iter()
            .enumerate()
            .filter_map(|(i, produced)| seen.get(2 * i + 1).map(|total| total.at_ms - produced))
            .collect(),
    };
    sorted.sort_unstable();
    Latency {
        sorted,
        produced: count,
        totals: seen.len(),
    }
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let Some(live) = test_broker() else {
        eprintln!("live_costs: set KAFKA_BOOTSTRAP_SERVERS (scripts/kafka/broker.sh start)");
        std::process::exit(2);
    };
    let count = env_number("PARSLEY_BENCH_COUNT", 20_000) as usize;
    let rate = env_number("PARSLEY_BENCH_RATE", 300);
    let seconds = env_number("PARSLEY_BENCH_SECONDS", 20);
    let rounds = env_number("PARSLEY_BENCH_ROUNDS", 2);
    let epochs: Vec<u64> = std::env::var("PARSLEY_BENCH_EPOCHS_MS")
        .unwrap_or_else(|_| "100,1000".into())
        .split(',')
        .map(|epoch| {
            epoch
                .trim()
                .parse()
                .expect("PARSLEY_BENCH_EPOCHS_MS: ms, comma-separated")
        })
        .collect();
    let mut variants = vec![Variant::Plain];
    variants.extend(
        epochs
            .iter()
            .map(|ms| Variant::Views(Duration::from_millis(*ms))),
    );
    println!(
        "transfers, seed 1, {PARTITIONS} partitions a topic, commit interval {} ms",
        COMMIT_INTERVAL.as_millis()
    );

    for round in 0..rounds {
        let mut order = variants.clone();
        if round % 2 == 1 {
            order.reverse();
        }
        let mut figures = Vec::new();
        for variant in order {
            let per_second = throughput(&live, variant, count).await;
            figures.push((variant, per_second));
        }
        let plain = figures
            .iter()
            .find(|(variant, _)| matches!(variant, Variant::Plain))
            .map(|(_, per_second)| *per_second)
            .expect("the plain run");
        let line: Vec<String> = figures
            .iter()
            .map(|(variant, per_second)| {
                format!(
                    "{} {per_second:.0}/s ({:.2}x)",
                    variant.name(),
                    per_second / plain
                )
            })
            .collect();
        println!(
            "throughput, round {} ({count} transfers, end to end): {}",
            round + 1,
            line.join(", ")
        );
    }

    for variant in variants {
        let measured = latency(&live, variant, rate, seconds).await;
        if measured.sorted.is_empty() {
            println!(
                "latency, {}: no transfer covered by a visible total",
                variant.name()
            );
            continue;
        }
        println!(
            "latency, {} ({rate} transfers/s for {seconds} s): {} of {} transfers covered, {} totals; median {} ms, p99 {} ms, max {} ms",
            variant.name(),
            measured.sorted.len(),
            measured.produced,
            measured.totals,
            measured.percentile(0.5),
            measured.percentile(0.99),
            measured.sorted.last().copied().unwrap_or(0),
        );
    }
}
