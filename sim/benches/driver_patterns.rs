//! The `TestDriver` on the four test patterns a user writes, on a balances
//! fold that emits the new balance for every order (String keys, Long values,
//! a wall-clock tick), printed one line per pattern:
//!
//! `pattern=<name> records=<n> seconds=<s> records_per_s=<r>`
//!
//! `cargo bench -p parsley-sim --bench driver_patterns`
//!
//! `PARSLEY_PATTERN_RECORDS` sets the records per pattern (default 100,000),
//! `PARSLEY_PATTERN_ROUNDS` the rounds per pattern, of which the fastest is
//! printed (default 3). `bench/kafka-streams/compare.sh` runs this beside the
//! same topology over Kafka Streams' `TopologyTestDriver` and prints ratios.

use std::time::{Duration, Instant};

use parsley::{Parsley, Stage, Step, Topic, Utf8, I64};
use parsley_sim::{TestDriver, TestRecord};

// No global allocator of its own: a user's `cargo test` runs the driver on
// the system allocator, so the figures are measured on it too.

const KEYS: usize = 1_000;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

/// The workload's topology: a per-key balance that emits the new balance for
/// every order, and a one-minute wall-clock tick that emits nothing.
struct Balances {
    orders: Topic<String, i64>,
    balances: Topic<String, i64>,
    driver: TestDriver,
}

impl Balances {
    fn new() -> Balances {
        let orders: Topic<String, i64> = Topic::with_codecs("orders", Utf8, I64);
        let balances: Topic<String, i64> = Topic::with_codecs("balances", Utf8, I64);
        let out = balances.clone();
        let stage = Stage::named("balances")
            .state(I64, || 0i64)
            .on(&orders, move |balance: i64, order| {
                let balance = balance + order.value();
                Step::of(balance).emit(out.send(order.key().cloned(), balance))
            })
            .ticks(Duration::from_secs(60), |_tick| Vec::new())
            .into(&balances)
            .build();
        let app = Parsley::named("bench")
            .stage(stage)
            .build()
            .expect("the bench topology composes");
        let driver = TestDriver::builder(&app)
            .initial_wall_clock(1_700_000_000_000)
            .build()
            .expect("the bench driver starts");
        Balances {
            orders,
            balances,
            driver,
        }
    }
}

fn keys() -> Vec<String> {
    (0..KEYS).map(|key| format!("account-{key}")).collect()
}

/// Runs one pattern over `records` records on a fresh driver and returns how
/// long its piping and reading took (the driver's start-up excluded, as the
/// JVM side excludes building its `TopologyTestDriver`).
fn run(pattern: &str, records: usize) -> Duration {
    let bench = Balances::new();
    let keys = keys();
    let input = bench
        .driver
        .input(&bench.orders)
        .expect("orders is a source");
    let output = bench
        .driver
        .output(&bench.balances)
        .expect("balances is a sink");
    let record = |index: usize| TestRecord::new(keys[index % KEYS].clone(), (index % 100) as i64);
    let start = Instant::now();
    let read = match pattern {
        "pipe-one" => {
            for index in 0..records {
                input.pipe_record(record(index)).expect("pipe");
            }
            0
        }
        "pipe-list" => {
            input.pipe_all((0..records).map(record)).expect("pipe_all");
            0
        }
        "pipe-list-read-all" => {
            input.pipe_all((0..records).map(record)).expect("pipe_all");
            output.read_new().expect("read_new").len()
        }
        "pipe-one-read-each" => {
            let mut read = 0;
            for index in 0..records {
                input.pipe_record(record(index)).expect("pipe");
                read += output.read_new().expect("read_new").len();
            }
            read
        }
        other => panic!("unknown pattern {other:?}"),
    };
    let elapsed = start.elapsed();
    let expected = match pattern {
        "pipe-list-read-all" | "pipe-one-read-each" => records,
        _ => 0,
    };
    assert_eq!(read, expected, "{pattern}: every output is read once");
    elapsed
}

fn main() {
    // `cargo test --benches` runs bench targets without `--bench`; only
    // measure under `cargo bench`.
    if !std::env::args().any(|arg| arg == "--bench") {
        println!("run with `cargo bench -p parsley-sim --bench driver_patterns`");
        return;
    }
    let records = env_usize("PARSLEY_PATTERN_RECORDS", 100_000);
    let rounds = env_usize("PARSLEY_PATTERN_ROUNDS", 3).max(1);
    let only = std::env::var("PARSLEY_PATTERN").ok();
    for pattern in [
        "pipe-one",
        "pipe-list",
        "pipe-list-read-all",
        "pipe-one-read-each",
    ] {
        if only.as_deref().is_some_and(|only| only != pattern) {
            continue;
        }
        let best = (0..rounds)
            .map(|_| run(pattern, records))
            .min()
            .expect("at least one round");
        let seconds = best.as_secs_f64();
        println!(
            "pattern={pattern} records={records} seconds={seconds:.4} records_per_s={:.0}",
            records as f64 / seconds
        );
    }
}
