//! The `TestDriver` on the two operators (issue 27): a tumbling windowed
//! aggregation and a stream–table join, each over 100,000 piped records, and
//! the heap an open window and a table row hold. Printed one line per figure:
//!
//! `operator=<name> records=<n> outputs=<n> seconds=<s> records_per_s=<r>`
//! `allocations operator=<name> records=<n> per_record=<a> bytes_per_record=<b>`
//! `memory=<open-window|table-row> scope=<driver|task> entries=<n> bytes_per_entry=<b>`
//!
//! `cargo bench -p parsley-sim --bench operators`
//!
//! `expiry=dedupe live=<n> deliveries=<n> us_per_delivery=<t>`
//!
//! `PARSLEY_OPERATOR_RECORDS` sets the records per operator (default
//! 100,000), `PARSLEY_OPERATOR_ROUNDS` the measured rounds, of which the
//! fastest is printed (default 3), `PARSLEY_OPERATOR` one of `windows`,
//! `join`, `memory` or `expiry` only. `bench/kafka-streams/compare-operators.sh` runs
//! this beside the same topologies over Kafka Streams' `TopologyTestDriver`
//! (`OperatorBench.java`) and prints ratios.
//!
//! Both operators are piped one record at a time with its timestamp, and
//! their output is read once at the end, as a test of them would:
//!
//! - `windows`: `account-{i % 1000}`, value `i % 100`, timestamp
//!   `START + 6 ms × i`; 60 s tumbling windows with 5 s grace, the sum per
//!   window written once it closes (stream time), so each key's window takes
//!   10 records (6 or 7 in the first: `START` is 20 s into a minute) and
//!   100,000 records close 10,000 windows (the last 3,334 records stay in
//!   open ones).
//! - `join`: a left join of `orders` with the table `discounts`, 1,000 rows
//!   loaded before the clock starts; one record in ten is a row update
//!   (`account-{(i / 10) % 1000}`, value `i % 50`), the others orders
//!   (`account-{i % 1000}`, value `i % 100 + 100`) priced at their row.
//!
//! Each round runs on a fresh driver; its start-up and the checks of the
//! output (every closed window once with its total, every order once at its
//! row's price) are outside the timing. The allocation line comes from one
//! more round with the counting allocator on over the same timed part
//! (piping and the read), after the measured rounds: allocations and bytes
//! per piped record.
//!
//! `expiry` is an expiring fold's dedupe on the core's `Task` alone (as
//! `scope=task` below): ids `order-{i:07}` first seen 6 ms apart, kept for
//! `PARSLEY_EXPIRY_LIVE` × 6 ms (default 25,000 ids, as in BENCHMARKS.md's
//! live run A), so that once that many are live one falls due on every
//! delivery; the time per delivery of the `PARSLEY_EXPIRY_DELIVERIES` after
//! (default 20,000), fetches of 500, a commit every 1,000.
//!
//! Memory is live heap bytes per entry after `entries` distinct keys
//! (`account-{k:07}`, one record each at `START`), each opening a window
//! that stays open or setting a row: `scope=driver` is everything the
//! `TestDriver` gains (the task's state, the model's logs of the input and
//! changelog records, the trace), the keys piped in lists of
//! `PARSLEY_OPERATOR_MEMORY_LIST` (default 500; 0 pipes them as one list);
//! `scope=task` is the core's `Task` alone, fed fetches of 500 records and
//! committed every 1,000, as a live task holds its state.

use parsley::Stage;
use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parsley::Expiring;
use parsley::Join;
use parsley::{
    assemble, App, Codec, Parsley, Step, Task, TaskConfig, Topic, TopicContract, Tp, Utf8, I64,
};
use parsley::{CommitRequest, Fetched};
use parsley::{ConsumedRecord, RecordData};
use parsley::{Windowed, WindowedCodec, Windows};
use parsley_sim::{TestDriver, TestRecord};

/// Counts heap bytes and allocations only while `COUNTING` is set: the
/// throughput rounds run with it off, so they pay one relaxed load per
/// allocation and are otherwise on the system allocator, as a user's
/// `cargo test` is. A delta taken with it on is exact whenever the memory
/// freed in between was allocated before.
struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static LIVE: AtomicIsize = AtomicIsize::new(0);
static ALLOCATED: AtomicUsize = AtomicUsize::new(0);
static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
            ALLOCATED.fetch_add(layout.size(), Ordering::Relaxed);
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if COUNTING.load(Ordering::Relaxed) {
            LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        }
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            LIVE.fetch_add(
                new_size as isize - layout.size() as isize,
                Ordering::Relaxed,
            );
            ALLOCATED.fetch_add(new_size, Ordering::Relaxed);
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// What the allocator counted over a closure: live bytes gained, bytes and
/// allocations made.
struct Counted {
    live: isize,
    allocated: usize,
    allocations: usize,
}

fn counted<T>(work: impl FnOnce() -> T) -> (T, Counted) {
    let (live, allocated, allocations) = (
        LIVE.load(Ordering::Relaxed),
        ALLOCATED.load(Ordering::Relaxed),
        ALLOCATIONS.load(Ordering::Relaxed),
    );
    COUNTING.store(true, Ordering::Relaxed);
    let result = work();
    COUNTING.store(false, Ordering::Relaxed);
    let counted = Counted {
        live: LIVE.load(Ordering::Relaxed) - live,
        allocated: ALLOCATED.load(Ordering::Relaxed) - allocated,
        allocations: ALLOCATIONS.load(Ordering::Relaxed) - allocations,
    };
    (result, counted)
}

const KEYS: usize = 1_000;
/// The drivers' wall clock and the first record's timestamp, as in
/// `driver_patterns` and on the Java side.
const START: i64 = 1_700_000_000_000;
/// Timestamps advance this much per piped record: 10,000 records, 10 per
/// key, per 60 s window.
const STEP_MS: i64 = 6;
const WINDOW_MS: i64 = 60_000;
const GRACE_MS: i64 = 5_000;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

fn keys() -> Vec<String> {
    (0..KEYS).map(|key| format!("account-{key}")).collect()
}

/// The windowed aggregation: each account's sales summed per minute, each
/// minute written once stream time passes its end and grace.
struct WindowApp {
    sales: Topic<String, i64>,
    per_minute: Topic<Windowed<String>, i64>,
    app: App,
}

fn window_app() -> WindowApp {
    let sales = Topic::<String, i64>::with_codecs("sales", Utf8, I64);
    let per_minute =
        Topic::<Windowed<String>, i64>::with_codecs("sales-per-minute", WindowedCodec(Utf8), I64);
    let stage = Stage::named("revenue")
        .windowed(
            Windows::tumbling(Duration::from_millis(WINDOW_MS as u64))
                .grace(Duration::from_millis(GRACE_MS as u64)),
        )
        .aggregate(&sales, I64, || 0i64, |total, sale| total + sale.value())
        .into(&per_minute)
        .build();
    let app = Parsley::named("bench")
        .stage(stage)
        .build()
        .expect("the window topology composes");
    WindowApp {
        sales,
        per_minute,
        app,
    }
}

/// The stream–table join: each order less its account's discount, or at
/// full price without a row.
struct JoinApp {
    orders: Topic<String, i64>,
    discounts: Topic<String, i64>,
    priced: Topic<String, i64>,
    app: App,
}

fn join_app() -> JoinApp {
    let orders = Topic::<String, i64>::with_codecs("orders", Utf8, I64);
    let discounts = Topic::<String, i64>::with_codecs("discounts", Utf8, I64);
    let priced = Topic::<String, i64>::with_codecs("priced-orders", Utf8, I64);
    let stage = Stage::named("pricing")
        .join(Join::stream_table(&orders, &discounts))
        .left(|order, discount: Option<&i64>| order.value() - discount.copied().unwrap_or(0))
        .into(&priced)
        .build();
    let app = Parsley::named("bench")
        .stage(stage)
        .build()
        .expect("the join topology composes");
    JoinApp {
        orders,
        discounts,
        priced,
        app,
    }
}

fn driver(app: &App) -> TestDriver {
    TestDriver::builder(app)
        .initial_wall_clock(START)
        .build()
        .expect("the bench driver starts")
}

/// The windows a run closes and the sum of their totals, from the
/// workload's own arithmetic: a window closes once the last timestamp
/// reaches its end plus grace.
fn windows_expected(records: usize) -> (usize, i64) {
    let last = START + STEP_MS * (records as i64 - 1);
    let mut closed = BTreeMap::new();
    for index in 0..records {
        let at = START + STEP_MS * index as i64;
        let start = at - at.rem_euclid(WINDOW_MS);
        if start + WINDOW_MS + GRACE_MS <= last {
            *closed.entry((index % KEYS, start)).or_insert(0i64) += (index % 100) as i64;
        }
    }
    (closed.len(), closed.values().sum())
}

/// One round of an operator: the time its piping and read took, the
/// outputs read, and, when counted, what it allocated meanwhile.
struct Round {
    elapsed: Duration,
    outputs: usize,
    counted: Option<Counted>,
}

/// Times `work` (the piping and the read, nothing else), counting its
/// allocations when `count` is set: the measured rounds run without.
fn timed<T>(count: bool, work: impl FnOnce() -> T) -> (Duration, Option<Counted>, T) {
    let start = Instant::now();
    let (result, counted) = match count {
        true => {
            let (result, counted) = counted(work);
            (result, Some(counted))
        }
        false => (work(), None),
    };
    (start.elapsed(), counted, result)
}

/// Pipes the window workload and reads the closed windows once.
fn run_windows(records: usize, count: bool) -> Round {
    let bench = window_app();
    let driver = driver(&bench.app);
    let keys = keys();
    let input = driver.input(&bench.sales).expect("sales is a source");
    let output = driver.output(&bench.per_minute).expect("a sink");
    let (elapsed, counted, closed) = timed(count, || {
        for index in 0..records {
            let record = TestRecord::new(keys[index % KEYS].clone(), (index % 100) as i64)
                .at(START + STEP_MS * index as i64);
            input.pipe_record(record).expect("pipe");
        }
        output.read_new().expect("read_new")
    });
    let total: i64 = closed.iter().map(|window| window.value).sum();
    assert_eq!(
        (closed.len(), total),
        windows_expected(records),
        "windows: every closed window once, with its total"
    );
    Round {
        elapsed,
        outputs: closed.len(),
        counted,
    }
}

/// The join workload's record `index`: a row update or an order.
fn join_record(index: usize) -> (bool, usize, i64) {
    match index % 10 == 9 {
        true => (true, (index / 10) % KEYS, (index % 50) as i64),
        false => (false, index % KEYS, (index % 100 + 100) as i64),
    }
}

/// The join's priced orders and the sum of their prices, by replaying the
/// table in pipe order.
fn join_expected(records: usize) -> (usize, i64) {
    let mut table: Vec<i64> = (0..KEYS).map(|key| (key % 50) as i64).collect();
    let (mut count, mut sum) = (0, 0);
    for index in 0..records {
        match join_record(index) {
            (true, key, value) => table[key] = value,
            (false, key, value) => {
                count += 1;
                sum += value - table[key];
            }
        }
    }
    (count, sum)
}

/// Pipes the join workload and reads the priced orders once.
fn run_join(records: usize, count: bool) -> Round {
    let bench = join_app();
    let driver = driver(&bench.app);
    let keys = keys();
    let orders = driver.input(&bench.orders).expect("orders is a source");
    let discounts = driver
        .input(&bench.discounts)
        .expect("discounts is a source");
    let output = driver.output(&bench.priced).expect("a sink");
    // The table's first rows, before the clock starts (a test's set-up).
    discounts
        .pipe_all(
            (0..KEYS).map(|key| TestRecord::new(keys[key].clone(), (key % 50) as i64).at(START)),
        )
        .expect("pipe_all");
    let (elapsed, counted, priced) = timed(count, || {
        for index in 0..records {
            let (row, key, value) = join_record(index);
            let record =
                TestRecord::new(keys[key].clone(), value).at(START + STEP_MS * index as i64);
            match row {
                true => discounts.pipe_record(record).expect("pipe"),
                false => orders.pipe_record(record).expect("pipe"),
            };
        }
        output.read_new().expect("read_new")
    });
    let total: i64 = priced.iter().map(|order| order.value).sum();
    assert_eq!(
        (priced.len(), total),
        join_expected(records),
        "join: every order once, at its row's price"
    );
    Round {
        elapsed,
        outputs: priced.len(),
        counted,
    }
}

fn run(operator: &str, records: usize, count: bool) -> Round {
    match operator {
        "windows" => run_windows(records, count),
        "join" => run_join(records, count),
        other => panic!("unknown operator {other:?}"),
    }
}

/// `entries` distinct keys, one record each, at one timestamp: each opens
/// a window that stays open (or sets a row).
fn distinct(entries: usize) -> impl Iterator<Item = TestRecord<String, i64>> {
    (0..entries).map(|key| TestRecord::new(format!("account-{key:07}"), 1).at(START))
}

/// Pipes [`distinct`] records in lists of `PARSLEY_OPERATOR_MEMORY_LIST`
/// (default [`FETCH`]; 0: all in one list), each list one commit, and
/// returns the heap the driver gained. The driver hands a task a list in one
/// fetch and keeps its buffers (the gate's queue, the host's fetch and send
/// lists) at the largest size they reached, so one list of 100,000 records
/// would add about 370 bytes per entry of buffers that are not the entries'.
fn driver_fill(driver: &TestDriver, topic: &Topic<String, i64>, entries: usize) -> isize {
    let list = match env_usize("PARSLEY_OPERATOR_MEMORY_LIST", FETCH) {
        0 => entries.max(1),
        list => list,
    };
    let input = driver.input(topic).expect("a source");
    let ((), counted) = counted(|| {
        let mut records = distinct(entries).peekable();
        while records.peek().is_some() {
            input
                .pipe_all(records.by_ref().take(list))
                .expect("pipe_all");
        }
    });
    counted.live
}

/// The heap a driver gains from `entries` open windows: the task's slots
/// and everything the model keeps for them (the piped record, its changelog
/// record, the trace).
fn driver_windows(entries: usize) -> isize {
    let bench = window_app();
    let driver = driver(&bench.app);
    let held = driver_fill(&driver, &bench.sales, entries);
    let open = driver
        .open_windows::<i64, _, _>("revenue", &bench.sales)
        .expect("open windows");
    assert_eq!(open.len(), entries, "every window is open");
    held
}

/// The same for `entries` table rows of the join.
fn driver_rows(entries: usize) -> isize {
    let bench = join_app();
    let driver = driver(&bench.app);
    let held = driver_fill(&driver, &bench.discounts, entries);
    let rows = driver
        .table::<_, i64>("pricing", &bench.discounts)
        .expect("the table");
    assert_eq!(rows.len(), entries, "every row is held");
    held
}

/// A started task of `stage`, every topic of one partition, as the live
/// runtime would run it.
fn task(app: &App, stage: &str) -> Task {
    let metadata: BTreeMap<String, u32> = TopicContract::list(app)
        .into_iter()
        .map(|contract| (contract.name.to_string(), 1))
        .collect();
    let assembly = assemble(app, &metadata).expect("the bench assembles");
    let mut task = Task::new(app, &assembly, stage, 0, TaskConfig::default()).expect("a task");
    let lanes = task.consumed_tps().len();
    task.start(&vec![None; lanes], START)
        .expect("the task starts");
    task
}

/// Records per fetch handed to a task: the Java consumer's default
/// `max.poll.records`. One fetch of every record instead would leave the
/// gate's queue with room for all of them, which the count would charge to
/// the entries.
const FETCH: usize = 500;

/// The heap the core's task gains from `entries` distinct keys delivered
/// from `tp` in fetches of [`FETCH`] and committed: its state alone, without
/// a model or a cluster (what a live task holds; Kafka Streams' store and
/// caches compare).
fn task_entries(task: &mut Task, tp: &Tp, entries: usize) -> isize {
    let ((), counted) = counted(|| {
        let (mut ready, mut produced, mut request) =
            (Vec::new(), Vec::new(), CommitRequest::default());
        let mut delivered = 0;
        for first in (0..entries).step_by(FETCH) {
            let last = (first + FETCH).min(entries);
            // Built inside the count: what of the records the task keeps
            // (its slots share the key bytes) is the task's.
            let records = (first..last)
                .map(|offset| ConsumedRecord {
                    offset: offset as u64,
                    data: RecordData {
                        key: Some(Utf8.encode(&format!("account-{offset:07}")).expect("utf-8")),
                        value: Some(I64.encode(&1).expect("i64")),
                        headers: Vec::new(),
                        timestamp: START,
                    },
                })
                .collect();
            task.handle_fetched(
                tp,
                &mut Fetched {
                    records,
                    next_offset: last as u64,
                    log_end: entries as u64,
                },
            );
            loop {
                task.deliverable(START, &mut ready).expect("deliverable");
                if !ready.contains(tp) {
                    break;
                }
                task.deliver(tp, &mut produced).expect("deliver");
                produced.clear();
                delivered += 1;
                // Commit as a live task would, every 1,000 deliveries.
                if delivered % 1_000 == 0 {
                    task.prepare_commit(&mut request, &mut produced)
                        .expect("commit");
                    produced.clear();
                    task.handle_committed(START);
                }
            }
        }
        assert_eq!(delivered, entries, "every record is delivered");
        task.prepare_commit(&mut request, &mut produced)
            .expect("commit");
        produced.clear();
        task.handle_committed(START);
    });
    counted.live
}

fn task_windows(entries: usize) -> isize {
    let mut task = task(&window_app().app, "revenue");
    let held = task_entries(&mut task, &Tp::new("sales", 0), entries);
    let open = parsley::open_windows_of::<i64>(task.slots_view()).expect("a window task");
    assert_eq!(open.len(), entries, "every window is open");
    held
}

fn task_rows(entries: usize) -> isize {
    let mut task = task(&join_app().app, "pricing");
    let held = task_entries(&mut task, &Tp::new("discounts", 0), entries);
    let rows = parsley::rows_of::<i64>(task.slots_view()).expect("a join task");
    assert_eq!(rows.len(), entries, "every row is held");
    held
}

/// Delivers the dedupe's orders `ids` (id `i` at `START + 6 ms × i`) to its
/// task in fetches of [`FETCH`], committing every 1,000 deliveries.
fn deliver_orders(task: &mut Task, tp: &Tp, ids: std::ops::Range<usize>) {
    let (mut ready, mut produced, mut request) = (Vec::new(), Vec::new(), CommitRequest::default());
    let mut delivered = 0;
    for first in ids.clone().step_by(FETCH) {
        let last = (first + FETCH).min(ids.end);
        let records = (first..last)
            .map(|id| ConsumedRecord {
                offset: id as u64,
                data: RecordData {
                    key: Some(Utf8.encode(&format!("order-{id:07}")).expect("utf-8")),
                    value: Some(I64.encode(&1).expect("i64")),
                    headers: Vec::new(),
                    timestamp: START + STEP_MS * id as i64,
                },
            })
            .collect();
        task.handle_fetched(
            tp,
            &mut Fetched {
                records,
                next_offset: last as u64,
                log_end: ids.end as u64,
            },
        );
        loop {
            task.deliverable(START, &mut ready).expect("deliverable");
            if !ready.contains(tp) {
                break;
            }
            task.deliver(tp, &mut produced).expect("deliver");
            produced.clear();
            delivered += 1;
            if delivered % 1_000 == 0 {
                task.prepare_commit(&mut request, &mut produced)
                    .expect("commit");
                produced.clear();
                task.handle_committed(START);
            }
        }
    }
}

/// The dedupe with `live` ids live, then `deliveries` more, each expiring
/// one: the time per delivery of those.
fn expiry(live: usize, deliveries: usize) -> Duration {
    let orders = Topic::<String, i64>::with_codecs("orders", Utf8, I64);
    let unique = Topic::<String, i64>::with_codecs("unique-orders", Utf8, I64);
    let out = unique.clone();
    let dedupe = Stage::named("dedupe")
        .expiring(
            Expiring::after(Duration::from_millis(STEP_MS as u64 * live as u64)).from_first_write(),
        )
        .fold(
            &orders,
            I64,
            || 0i64,
            move |seen: i64, order| match seen {
                0 => Step::of(1).emit(out.send(order.key().cloned(), *order.value())),
                _ => Step::of(1),
            },
        )
        .into(&unique)
        .build();
    let app = Parsley::named("bench")
        .stage(dedupe)
        .build()
        .expect("the app");
    let mut task = task(&app, "dedupe");
    let tp = Tp::new("orders", 0);
    deliver_orders(&mut task, &tp, 0..live);
    let start = Instant::now();
    deliver_orders(&mut task, &tp, live..live + deliveries);
    let elapsed = start.elapsed();
    let held = parsley::live_state_of::<i64>(task.slots_view()).expect("an expiring task");
    assert_eq!(held.len(), live, "one id expires per delivery");
    elapsed / deliveries as u32
}

fn memory() {
    type Fill = fn(usize) -> isize;
    let figures: [(&str, &str, Fill); 4] = [
        ("open-window", "driver", driver_windows),
        ("open-window", "task", task_windows),
        ("table-row", "driver", driver_rows),
        ("table-row", "task", task_rows),
    ];
    for (what, scope, fill) in figures {
        for entries in [10_000, 100_000] {
            let held = fill(entries);
            println!(
                "memory={what} scope={scope} entries={entries} bytes_per_entry={:.1}",
                held as f64 / entries as f64
            );
        }
    }
}

fn main() {
    // `cargo test --benches` runs bench targets without `--bench`; only
    // measure under `cargo bench`.
    if !std::env::args().any(|arg| arg == "--bench") {
        println!("run with `cargo bench -p parsley-sim --bench operators`");
        return;
    }
    let records = env_usize("PARSLEY_OPERATOR_RECORDS", 100_000);
    let rounds = env_usize("PARSLEY_OPERATOR_ROUNDS", 3).max(1);
    let only = std::env::var("PARSLEY_OPERATOR").ok();
    if let Some(only) = only.as_deref() {
        assert!(
            ["windows", "join", "memory", "expiry"].contains(&only),
            "PARSLEY_OPERATOR must be windows, join, memory or expiry, not {only:?}"
        );
    }
    let wanted = |name: &str| only.as_deref().is_none_or(|only| only == name);
    for operator in ["windows", "join"] {
        if !wanted(operator) {
            continue;
        }
        let best = (0..rounds)
            .map(|_| run(operator, records, false))
            .min_by_key(|round| round.elapsed)
            .expect("at least one round");
        let seconds = best.elapsed.as_secs_f64();
        println!(
            "operator={operator} records={records} outputs={} seconds={seconds:.4} records_per_s={:.0}",
            best.outputs,
            records as f64 / seconds
        );
        // One more round, counted: what the driver allocates per record.
        let counted = run(operator, records, true)
            .counted
            .expect("a counted round");
        println!(
            "allocations operator={operator} records={records} per_record={:.1} bytes_per_record={:.0}",
            counted.allocations as f64 / records as f64,
            counted.allocated as f64 / records as f64
        );
    }
    if wanted("memory") {
        memory();
    }
    if wanted("expiry") {
        let live = env_usize("PARSLEY_EXPIRY_LIVE", 25_000);
        let deliveries = env_usize("PARSLEY_EXPIRY_DELIVERIES", 20_000);
        let best = (0..rounds)
            .map(|_| expiry(live, deliveries))
            .min()
            .expect("at least one round");
        println!(
            "expiry=dedupe live={live} deliveries={deliveries} us_per_delivery={:.2}",
            best.as_secs_f64() * 1e6
        );
    }
}
