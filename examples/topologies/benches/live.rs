//! Parsley live against a raw rdkafka loop, on the same broker, in one run.
//!
//! Both consume the same kind of input (JSON orders keyed by account, on 4
//! partitions), keep a balance per account, write one record per input (for
//! Parsley, the changelog update; for the raw loop, the new balance) and
//! commit transactionally with the consumed offsets every 100 ms, one
//! thread and one transactional producer per partition.
//!
//! - Throughput: N inputs are produced first; the clock runs from start-up
//!   until the group's committed offsets reach the end of the input. Rounds
//!   of both sides alternate which goes first; the median ratio is the
//!   figure.
//! - Latency: inputs arrive at a steady rate; a `read_committed` reader of
//!   the output measures now minus the input's timestamp (both carry it).
//!
//! ```text
//! export "$(bash scripts/kafka/broker.sh start)"
//! cargo bench -p parsley-examples --features live --bench live
//! ```
//! `PARSLEY_BENCH_RECORDS` (default 300000), `PARSLEY_BENCH_ROUNDS` (default
//! 3) and `PARSLEY_BENCH_RATE` (inputs per second in the latency run,
//! default 2000) change the load.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parsley::Assembly;
use parsley::{RecordData, Tp};
use parsley_examples::live::{plan_inputs, produce_inputs};
use parsley_examples::namespaced;
use parsley_examples::ExampleTopology;
use parsley_examples::Order;
use parsley_examples::TopologyName;
use parsley_live::wall_clock_ms;
use parsley_live::{
    assemble_on, create_topics, test_broker, Isolation, LiveClient, LiveConfig, Runtime,
    RuntimeConfig,
};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::{Offset, TopicPartitionList};

const PARTITIONS: u32 = 4;
const COMMIT_INTERVAL: Duration = Duration::from_millis(100);
const LATENCY_RUN: Duration = Duration::from_secs(10);

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

fn namespace(kind: &str) -> String {
    format!("bench-{kind}-{:x}-", wall_clock_ms())
}

struct Setup {
    client: LiveClient,
    topology: ExampleTopology,
    assembly: Assembly,
}

async fn set_up(live: &LiveConfig, kind: &str) -> Setup {
    let client = LiveClient::new(live.clone()).expect("client");
    // Ticks far apart: both sides do the same work per input.
    let topology = namespaced(
        TopologyName::Balances,
        &namespace(kind),
        Duration::from_secs(3600),
    )
    .expect("balances");
    create_topics(&client, &topology.app, PARTITIONS, &Default::default())
        .await
        .expect("topics");
    let assembly = assemble_on(&client, &topology.app).await.expect("assembly");
    Setup {
        client,
        topology,
        assembly,
    }
}

fn input_tps(setup: &Setup) -> Vec<Tp> {
    let name = setup.topology.inputs[0].name.clone();
    (0..PARTITIONS)
        .map(|partition| Tp::new(name.clone(), partition))
        .collect()
}

/// Waits until `group`'s committed offsets on `tps` reach `ends`.
async fn wait_committed(client: &LiveClient, group: &str, tps: &[Tp], ends: &[u64]) {
    let consumer = client
        .consumer(group, Isolation::ReadUncommitted)
        .expect("consumer");
    loop {
        let committed = consumer.committed(tps).await.expect("committed");
        let done = committed
            .iter()
            .zip(ends)
            .all(|(committed, end)| committed.as_ref().is_some_and(|c| c.offset >= *end));
        if done {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn ends(client: &LiveClient, tps: &[Tp]) -> Vec<u64> {
    let mut ends = Vec::new();
    for tp in tps {
        ends.push(
            client
                .watermarks(tp)
                .await
                .expect("watermarks")
                .high_watermark,
        );
    }
    ends
}

// ----- the raw loop -----

fn client_config(live: &LiveConfig) -> ClientConfig {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", &live.bootstrap_servers);
    config
}

/// One partition's consume-transform-produce loop, transactional, with the
/// balances in a map: what a user would write by hand with rdkafka.
fn raw_loop(live: &LiveConfig, input: Tp, output: String, group: String, stop: Arc<AtomicBool>) {
    let consumer: BaseConsumer = client_config(live)
        .set("group.id", &group)
        .set("isolation.level", "read_committed")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("fetch.wait.max.ms", "10")
        .create()
        .expect("raw consumer");
    let producer: ThreadedProducer<DefaultProducerContext> = client_config(live)
        .set("transactional.id", format!("{group}-{}", input.partition))
        .set("enable.idempotence", "true")
        .create()
        .expect("raw producer");
    producer
        .init_transactions(Duration::from_secs(30))
        .expect("init");
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(
            input.topic.as_str(),
            input.partition as i32,
            Offset::Beginning,
        )
        .expect("assignment");
    consumer.assign(&assignment).expect("assign");
    let metadata = consumer.group_metadata().expect("group metadata");
    let mut balances: HashMap<Vec<u8>, i64> = HashMap::new();
    let mut next: Option<i64> = None;
    let mut open = false;
    let mut last_commit = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..500 {
            let Some(Ok(message)) = consumer.poll(Duration::from_millis(if open { 0 } else { 10 }))
            else {
                break;
            };
            let key = message.key().unwrap_or_default().to_vec();
            let order: Order =
                serde_json::from_slice(message.payload().unwrap_or_default()).expect("an order");
            let balance = balances.entry(key.clone()).or_insert(0);
            *balance -= order.total;
            // As the balances stage keeps its state: Kafka's long format.
            let value = balance.to_be_bytes();
            if !open {
                producer.begin_transaction().expect("begin");
                open = true;
            }
            let mut record = BaseRecord::to(&output)
                .partition(input.partition as i32)
                .key(&key)
                .payload(&value);
            if let Some(timestamp) = message.timestamp().to_millis() {
                record = record.timestamp(timestamp);
            }
            producer
                .send(record)
                .map_err(|(error, _)| error)
                .expect("send");
            next = Some(message.offset() + 1);
        }
        if open && last_commit.elapsed() >= COMMIT_INTERVAL {
            let mut offsets = TopicPartitionList::new();
            offsets
                .add_partition_offset(
                    input.topic.as_str(),
                    input.partition as i32,
                    Offset::Offset(next.expect("something was consumed")),
                )
                .expect("offsets");
            producer
                .send_offsets_to_transaction(&offsets, &metadata, Duration::from_secs(30))
                .expect("send offsets");
            producer
                .commit_transaction(Duration::from_secs(30))
                .expect("commit");
            open = false;
            last_commit = Instant::now();
        }
    }
}

struct RawApp {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl RawApp {
    fn start(live: &LiveConfig, setup: &Setup, group: &str) -> RawApp {
        let stop = Arc::new(AtomicBool::new(false));
        let output = raw_output(setup);
        let threads = input_tps(setup)
            .into_iter()
            .map(|input| {
                let (live, output, group, stop) = (
                    live.clone(),
                    output.clone(),
                    group.to_owned(),
                    Arc::clone(&stop),
                );
                std::thread::spawn(move || raw_loop(&live, input, output, group, stop))
            })
            .collect();
        RawApp { stop, threads }
    }

    fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads {
            thread.join().expect("raw loop");
        }
    }
}

/// The raw loop writes to the app's sink topic (unused by balances'
/// inputs), so both sides write to topics of the same shape.
fn raw_output(setup: &Setup) -> String {
    setup.topology.app.stages()[0]
        .changelog
        .clone()
        .expect("balances has a changelog")
        .to_string()
}

// ----- runs -----

/// Topics with `records` inputs produced, the input tps and their ends.
async fn loaded(live: &LiveConfig, kind: &str, records: usize) -> (Setup, Vec<Tp>, Vec<u64>) {
    let setup = set_up(live, kind).await;
    let plan = plan_inputs(&setup.topology, records, 1000, 1);
    produce_inputs(&setup.client, &setup.topology, &setup.assembly, &plan)
        .await
        .expect("inputs");
    let tps = input_tps(&setup);
    let ends = ends(&setup.client, &tps).await;
    (setup, tps, ends)
}

/// CPU time so far: the machine's busy and total jiffies (`/proc/stat`)
/// and this process's ([`parsley_examples::cpu::own_ticks`]), to tell what a side's
/// throughput was bound by: with the broker on the same cores, a machine
/// near 100 % busy while the application uses little is a broker-bound run.
#[derive(Clone, Copy)]
struct CpuSample {
    busy: u64,
    total: u64,
    process: u64,
}

impl CpuSample {
    fn now() -> Option<CpuSample> {
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
        let process = parsley_examples::cpu::own_ticks()?;
        Some(CpuSample {
            busy: total - idle,
            total,
            process,
        })
    }

    /// Busy cores of the whole machine and of this process since `self`.
    fn cores_since(self, wall: Duration) -> Option<(f64, f64)> {
        let now = CpuSample::now()?;
        let cores = std::thread::available_parallelism().map_or(1, usize::from) as f64;
        let share = (now.busy - self.busy) as f64 / (now.total - self.total).max(1) as f64;
        // USER_HZ is 100 on Linux.
        let process = (now.process - self.process) as f64 / 100.0 / wall.as_secs_f64();
        Some((share * cores, process))
    }
}

/// A side's throughput and, where `/proc` tells, the busy cores of the
/// machine and of this process while it ran.
struct Measured {
    records_per_second: f64,
    cores: Option<(f64, f64)>,
}

impl Measured {
    fn of(records: usize, elapsed: Duration, cpu: Option<CpuSample>) -> Measured {
        Measured {
            records_per_second: records as f64 / elapsed.as_secs_f64(),
            cores: cpu.and_then(|cpu| cpu.cores_since(elapsed)),
        }
    }

    fn cores(&self) -> String {
        self.cores.map_or("cpu n/a".into(), |(machine, process)| {
            format!("machine {machine:.2} cores busy, this process {process:.2}")
        })
    }
}

async fn parsley_throughput(live: &LiveConfig, records: usize) -> Measured {
    let (setup, tps, ends) = loaded(live, "parsley", records).await;
    let cpu = CpuSample::now();
    let started = Instant::now();
    let config = RuntimeConfig::new(live.clone()).with_commit_interval(COMMIT_INTERVAL);
    let runtime = Runtime::start(Arc::new(setup.topology.app.clone()), config)
        .await
        .expect("start");
    // The balances topology has one stage: its group (X6) commits the inputs.
    let group = &setup.topology.app.stages()[0].group;
    wait_committed(&setup.client, group, &tps, &ends).await;
    let measured = Measured::of(records, started.elapsed(), cpu);
    runtime.stopper().stop();
    runtime.wait().await;
    measured
}

async fn raw_throughput(live: &LiveConfig, records: usize) -> Measured {
    let (setup, tps, ends) = loaded(live, "raw", records).await;
    let group = format!("{}raw", namespace("group"));
    let cpu = CpuSample::now();
    let started = Instant::now();
    let raw = RawApp::start(live, &setup, &group);
    wait_committed(&setup.client, &group, &tps, &ends).await;
    let measured = Measured::of(records, started.elapsed(), cpu);
    raw.stop();
    measured
}

/// Produces at `rate` inputs/s for the latency run while a reader of
/// `output` records now minus each record's timestamp; returns the
/// latencies in milliseconds, sorted.
async fn measure_latency(live: &LiveConfig, setup: &Setup, output: &str, rate: usize) -> Vec<i64> {
    let reader: BaseConsumer = client_config(live)
        .set("group.id", format!("{}reader", namespace("latency")))
        .set("isolation.level", "read_committed")
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", "5")
        .create()
        .expect("reader");
    let mut assignment = TopicPartitionList::new();
    for partition in 0..PARTITIONS {
        assignment
            .add_partition_offset(output, partition as i32, Offset::End)
            .expect("assignment");
    }
    reader.assign(&assignment).expect("assign");
    let stop = Arc::new(AtomicBool::new(false));
    let stopping = Arc::clone(&stop);
    let reading = std::thread::spawn(move || {
        let mut latencies = Vec::new();
        while !stopping.load(Ordering::Relaxed) {
            if let Some(Ok(message)) = reader.poll(Duration::from_millis(10)) {
                if let Some(timestamp) = message.timestamp().to_millis() {
                    latencies.push(wall_clock_ms() - timestamp);
                }
            }
        }
        latencies
    });
    // Let the reader's assignment settle before the first input.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let producer = setup.client.plain_producer().expect("producer");
    let plan = plan_inputs(
        &setup.topology,
        rate * LATENCY_RUN.as_secs() as usize,
        1000,
        2,
    );
    let per_tick = (rate / 100).max(1);
    let name = setup.topology.inputs[0].name.clone();
    let started = Instant::now();
    for (index, chunk) in plan.chunks(per_tick).enumerate() {
        for input in chunk {
            let (key, value) = setup.topology.encode_input(0, &input.key, input.amount);
            let partition = parsley::partition_for(Some(&key), PARTITIONS, 0);
            let data = RecordData {
                key: Some(key),
                value: Some(value),
                headers: Vec::new(),
                timestamp: wall_clock_ms(),
            };
            drop(
                producer
                    .enqueue(&Tp::new(name.clone(), partition), &data)
                    .expect("enqueue"),
            );
        }
        let due = started + Duration::from_millis(10 * (index as u64 + 1));
        tokio::time::sleep_until(due.into()).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);
    let mut latencies = reading.join().expect("reader");
    latencies.sort_unstable();
    latencies
}

fn percentile(sorted: &[i64], p: f64) -> i64 {
    if sorted.is_empty() {
        return -1;
    }
    let index = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[index]
}

async fn parsley_latency(live: &LiveConfig, rate: usize) -> Vec<i64> {
    let setup = set_up(live, "parsley-latency").await;
    let config = RuntimeConfig::new(live.clone()).with_commit_interval(COMMIT_INTERVAL);
    let runtime = Runtime::start(Arc::new(setup.topology.app.clone()), config)
        .await
        .expect("start");
    let latencies = measure_latency(live, &setup, &raw_output(&setup), rate).await;
    runtime.stopper().stop();
    runtime.wait().await;
    latencies
}

async fn raw_latency(live: &LiveConfig, rate: usize) -> Vec<i64> {
    let setup = set_up(live, "raw-latency").await;
    let group = format!("{}raw", namespace("group"));
    let raw = RawApp::start(live, &setup, &group);
    let latencies = measure_latency(live, &setup, &raw_output(&setup), rate).await;
    raw.stop();
    latencies
}

#[tokio::main]
async fn main() {
    // `cargo bench` passes `--bench`; nothing else to parse.
    let Some(live) = test_broker() else { return };
    let records = env_number("PARSLEY_BENCH_RECORDS", 300_000);
    let rate = env_number("PARSLEY_BENCH_RATE", 2000);
    println!("live benchmark: {records} inputs on {PARTITIONS} partitions, commit interval {COMMIT_INTERVAL:?}");
    // The raw loop's figure swings by up to 2x between runs on a shared
    // machine; alternate rounds of both sides and report the median ratio.
    let rounds = env_number("PARSLEY_BENCH_ROUNDS", 3).max(1);
    let mut ratios = Vec::with_capacity(rounds);
    for round in 1..=rounds {
        // Alternate which side goes first, so neither always meets the broker
        // in the same state.
        let (raw, parsley) = if round % 2 == 1 {
            let raw = raw_throughput(&live, records).await;
            (raw, parsley_throughput(&live, records).await)
        } else {
            let parsley = parsley_throughput(&live, records).await;
            (raw_throughput(&live, records).await, parsley)
        };
        let ratio = 100.0 * parsley.records_per_second / raw.records_per_second;
        println!(
            "round {round}      raw {:>8.0}  parsley {:>8.0} records/s  ratio {ratio:>5.1} %",
            raw.records_per_second, parsley.records_per_second
        );
        println!("            raw:     {}", raw.cores());
        println!("            parsley: {}", parsley.cores());
        ratios.push(ratio);
    }
    ratios.sort_by(f64::total_cmp);
    println!(
        "ratio       parsley / raw     {:>10.1} %  (median of {rounds} rounds)",
        ratios[ratios.len() / 2]
    );
    let raw_latencies = raw_latency(&live, rate).await;
    let parsley_latencies = parsley_latency(&live, rate).await;
    for (name, latencies) in [
        ("raw rdkafka loop", &raw_latencies),
        ("parsley balances", &parsley_latencies),
    ] {
        println!(
            "latency     {name}  p50 {:>4} ms  p99 {:>4} ms  ({} records at {rate}/s)",
            percentile(latencies, 0.50),
            percentile(latencies, 0.99),
            latencies.len()
        );
    }
}
