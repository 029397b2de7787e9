//! What the consistent views cost beside the plain topology, under the
//! `TestDriver`, in one run (the machines are shared and noisy: compare
//! the ratios, not the absolute figures):
//!
//! - throughput: transfers a second through the driver, one at a time and
//!   in batches of 1,000, with and without the views;
//! - latency, with the views, piped one at a time: for each transfer, how
//!   many transfers were piped after it before a total whose cut includes
//!   it was released (one transfer a millisecond of event time, so it
//!   reads as milliseconds of event time too), and how much wall-clock
//!   time passed.
//!
//! `cargo run --release --manifest-path examples/transfers/Cargo.toml
//! --example costs [-- COUNT]` (default 20,000 transfers, seed 1).

use std::time::{Duration, Instant};

use parsley::header::{cut_of, is_progress};
use parsley::Isolation;
use parsley_sim::{TestDriver, TestRecord};
use parsley_transfers::{app, transfers, Topics, Transfer, BASE_MS, EPOCH};

/// Pipes `transfers`, `batch` at a time; after each pipe, `after_pipe`
/// gets the index of the last transfer piped and the driver.
fn run(
    transfers: &[Transfer],
    batch: usize,
    epoch: Option<Duration>,
    mut after_pipe: impl FnMut(usize, &TestDriver, &Topics),
) -> Duration {
    let topics = Topics::new("");
    let app = app("", &topics, epoch).expect("the app composes");
    let driver = TestDriver::builder(&app)
        .initial_wall_clock(BASE_MS)
        .build()
        .expect("the driver starts");
    let input = driver.input(&topics.transfers).expect("an input");
    let record = |t: &Transfer| TestRecord::new(t.id.clone(), t.value()).at(t.timestamp_ms);
    let started = Instant::now();
    let mut piped = 0;
    for chunk in transfers.chunks(batch) {
        match chunk {
            [one] => input.pipe_record(record(one)).map(|_| ()).expect("piped"),
            many => input.pipe_all(many.iter().map(record)).expect("piped"),
        }
        piped += chunk.len();
        after_pipe(piped - 1, &driver, &topics);
    }
    started.elapsed()
}

/// The highest cut among the totals committed from `from` on, and where
/// the next read starts.
fn released_cut(driver: &TestDriver, topics: &Topics, from: &mut u64) -> Option<i64> {
    let fetched = driver
        .cluster()
        .fetch(
            &topics.totals.tp(0),
            *from,
            usize::MAX,
            Isolation::ReadCommitted,
        )
        .expect("the totals read back");
    *from = fetched.next_offset;
    fetched
        .records
        .iter()
        .filter(|record| !is_progress(&record.data))
        .filter_map(|record| cut_of(&record.data))
        .max()
}

fn percentile(sorted: &[u64], share: f64) -> u64 {
    let at = ((sorted.len() as f64 - 1.0) * share).round() as usize;
    sorted[at]
}

fn main() {
    let count: usize = std::env::args()
        .nth(1)
        .map(|arg| arg.parse().expect("COUNT is a number"))
        .unwrap_or(20_000);
    let transfers = transfers(1, count);
    let per_second = |took: Duration| count as f64 / took.as_secs_f64();

    println!(
        "{count} transfers, seed 1, epochs of {} ms",
        EPOCH.as_millis()
    );
    for batch in [1, 1_000] {
        let plain = run(&transfers, batch, None, |_, _, _| {});
        let view = run(&transfers, batch, Some(EPOCH), |_, _, _| {});
        println!(
            "throughput, batches of {batch}: no view {:.0}/s, views {:.0}/s: the views at {:.2}x",
            per_second(plain),
            per_second(view),
            plain.as_secs_f64() / view.as_secs_f64()
        );
    }

    // Each transfer's epoch: the highest timestamp so far (one partition)
    // over the epoch length; a total at cut c includes the transfers of
    // the epochs below c.
    let epoch_ms = i64::try_from(EPOCH.as_millis()).expect("small");
    let mut highest = i64::MIN;
    let epochs: Vec<i64> = transfers
        .iter()
        .map(|t| {
            highest = highest.max(t.timestamp_ms);
            highest.div_euclid(epoch_ms)
        })
        .collect();
    let mut piped_at: Vec<Instant> = Vec::with_capacity(count);
    let mut latency: Vec<(u64, Duration)> = Vec::with_capacity(count);
    let mut next = 0usize;
    let mut from = 0u64;
    run(&transfers, 1, Some(EPOCH), |last, driver, topics| {
        piped_at.push(Instant::now());
        if let Some(cut) = released_cut(driver, topics, &mut from) {
            let now = Instant::now();
            while next <= last && epochs[next] < cut {
                latency.push(((last - next) as u64, now - piped_at[next]));
                next += 1;
            }
        }
    });
    let mut transfers_after: Vec<u64> = latency.iter().map(|(n, _)| *n).collect();
    transfers_after.sort_unstable();
    let mut wall: Vec<u64> = latency
        .iter()
        .map(|(_, took)| u64::try_from(took.as_micros()).unwrap_or(u64::MAX))
        .collect();
    wall.sort_unstable();
    println!(
        "latency, one at a time: {} of {count} transfers in a released total (the last epoch stays open); transfers piped after one before a total includes it: median {}, p99 {}, max {}; wall clock: median {:.1} ms, p99 {:.1} ms",
        latency.len(),
        percentile(&transfers_after, 0.5),
        percentile(&transfers_after, 0.99),
        transfers_after.last().copied().unwrap_or(0),
        percentile(&wall, 0.5) as f64 / 1_000.0,
        percentile(&wall, 0.99) as f64 / 1_000.0,
    );
}
