//! The timer service's figures (K2), printed as a table: the memory a
//! pending timer holds in the service's task, and how many timers a tick
//! fires per second. It drives the core's `Task` of a timer service
//! directly, without a model or a cluster, so the figures are the service's
//! own (the live runtime runs this same task; Kafka's costs come on top).
//!
//! `cargo bench -p parsley-sim --bench timers`

use parsley::Stage;
use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Instant;

use bytes::Bytes;
use parsley::{assemble, Codec, Parsley, Task, TaskConfig, Topic, Tp, Utf8, I64};
use parsley::{CommitRequest, Fetched};
use parsley::{ConsumedRecord, RecordData};

/// Counts the bytes live on the heap, so a figure is what the task holds,
/// not what the process's allocator keeps around.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const START: i64 = 1_700_000_000_000;

/// A started task of a timer service reading `requests`.
fn service() -> (Task, Tp, Tp) {
    let requests: Topic<String, i64> = Topic::with_codecs("requests", Utf8, I64);
    let fires: Topic<String, i64> = Topic::with_codecs("fires", Utf8, I64);
    let timers = Stage::named("timers")
        .timer_service(&requests, &fires)
        .build();
    let app = Parsley::named("bench").stage(timers).build().unwrap();
    let metadata: BTreeMap<String, u32> = [
        "requests",
        "fires",
        "bench-timers-ticks",
        "bench-timers-state-changelog",
    ]
    .into_iter()
    .map(|topic| (topic.to_string(), 1))
    .collect();
    let assembly = assemble(&app, &metadata).unwrap();
    let mut task = Task::new(&app, &assembly, "timers", 0, TaskConfig::default()).unwrap();
    let lanes = task.consumed_tps().len();
    task.start(&vec![None; lanes], START).unwrap();
    let tick_tp = task.tick_tp().cloned().expect("the service ticks");
    (task, Tp::new("requests", 0), tick_tp)
}

/// `count` requests over `keys` keys, due one millisecond apart.
fn requests(count: u64, keys: u64) -> Vec<ConsumedRecord> {
    (0..count)
        .map(|offset| ConsumedRecord {
            offset,
            data: RecordData {
                key: Some(
                    Codec::<String>::encode(&Utf8, &format!("user-{:06}", offset % keys)).unwrap(),
                ),
                value: Some(Bytes::copy_from_slice(
                    &(START + 1_000 + offset as i64).to_be_bytes(),
                )),
                headers: Vec::new(),
                timestamp: START,
            },
        })
        .collect()
}

/// Delivers every request, committing every `batch`.
fn fill(task: &mut Task, tp: &Tp, records: Vec<ConsumedRecord>, batch: usize) {
    let count = records.len() as u64;
    task.handle_fetched(
        tp,
        &mut Fetched {
            records,
            next_offset: count,
            log_end: count,
        },
    );
    // The driver's buffers, kept from delivery to delivery (and freed
    // before the caller counts what the timers hold).
    let (mut ready, mut produced, mut request) = (Vec::new(), Vec::new(), CommitRequest::default());
    let mut delivered = 0;
    loop {
        task.deliverable(0, &mut ready).unwrap();
        if !ready.contains(tp) {
            break;
        }
        task.deliver(tp, &mut produced).unwrap();
        produced.clear();
        delivered += 1;
        if delivered % batch == 0 {
            commit(task, &mut request, START);
        }
    }
    commit(task, &mut request, START);
}

/// Commits the open transaction as a driver would once Kafka said yes.
fn commit(task: &mut Task, request: &mut CommitRequest, now: i64) {
    let mut changes = Vec::new();
    task.prepare_commit(request, &mut changes).unwrap();
    task.handle_committed(now);
}

fn main() {
    println!("timer service (K2): the core's task, one partition");
    println!(
        "{:>10} {:>8} {:>16} {:>16} {:>14} {:>18}",
        "pending", "keys", "bytes/timer", "fires/s (tick)", "tick ms", "tick, 1 due (ms)"
    );
    for (count, keys) in [(10_000u64, 10_000u64), (100_000, 100_000), (100_000, 1_000)] {
        let (mut task, tp, tick_tp) = service();
        let records = requests(count, keys);
        let before = LIVE.load(Ordering::Relaxed);
        fill(&mut task, &tp, records, 1_000);
        let held = LIVE.load(Ordering::Relaxed) - before;
        assert_eq!(
            parsley::pending_of(task.slots_view()).unwrap().len() as u64,
            count,
            "every request is pending"
        );
        // A tick when only the earliest timer is due: what a tick costs
        // beside the many keys it does not fire on.
        let mut produced = Vec::new();
        let early = deliver_tick(&mut task, &tick_tp, START + 1_000, 0, &mut produced);
        assert_eq!(produced.len(), 2, "one fire and its changelog record");
        // One tick after every timer is due fires the rest.
        let now = START + 1_000 + count as i64 + 1_000;
        produced.clear();
        let elapsed = deliver_tick(&mut task, &tick_tp, now, 1, &mut produced);
        let fires = produced
            .iter()
            .filter(|record| record.tp.topic.as_str() == "fires")
            .count() as u64;
        assert_eq!(fires, count - 1, "the tick fires every due timer");
        println!(
            "{:>10} {:>8} {:>16.0} {:>16.0} {:>14.1} {:>18.3}",
            count,
            keys,
            held as f64 / count as f64,
            fires as f64 / elapsed.as_secs_f64(),
            elapsed.as_secs_f64() * 1_000.0,
            early.as_secs_f64() * 1_000.0
        );
    }
}

/// Polls the tick due at `now`, commits it, and times the delivery of it
/// (the tick record at `offset` of the tick topic).
fn deliver_tick(
    task: &mut Task,
    tick_tp: &Tp,
    now: i64,
    offset: u64,
    produced: &mut Vec<parsley::ProducedRecord>,
) -> std::time::Duration {
    let (tick, _) = task.poll_tick(now).expect("the interval has passed");
    commit(task, &mut CommitRequest::default(), now);
    task.handle_fetched(
        tick_tp,
        &mut Fetched {
            records: vec![ConsumedRecord {
                offset,
                data: tick.data,
            }],
            next_offset: offset + 1,
            log_end: offset + 1,
        },
    );
    let started = Instant::now();
    task.deliver(tick_tp, produced).unwrap();
    let elapsed = started.elapsed();
    commit(task, &mut CommitRequest::default(), now);
    elapsed
}
