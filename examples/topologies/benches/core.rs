//! The core's speed and size figures, printed as a table.
//!
//! `cargo bench -p parsley-examples --bench core`
//!
//! Figures are best-of-N wall-clock measurements on one thread; compare them
//! with each other and with the targets, not across machines.

use std::hint::black_box;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parsley::header::{self, STAMP_HEADER};
use parsley::Fetched;
use parsley::{assemble, Claim, Parsley, Stage, Stamp, Task, TaskConfig, Topic, Tp};
use parsley::{ConsumedRecord, Header, RecordData};
use parsley_examples::{balances, chain, ChainTopics, Order, PaymentsTopics};
use parsley_sim::{TestDriver, TestRecord};

/// Runs `work` `rounds` times and returns the fastest round.
fn best_of(rounds: usize, mut work: impl FnMut() -> Duration) -> Duration {
    (0..rounds)
        .map(|_| work())
        .min()
        .expect("at least one round")
}

fn chain_stamp() -> Stamp {
    Stamp::from_claims([
        Claim::new(Tp::new("input", 3), 12_345),
        Claim::new(Tp::new("enriched", 3), 12_345),
        Claim::new(Tp::new("metered", 3), 12_400),
        Claim::new(Tp::new("chain-meter-ticks", 3), 41),
    ])
}

/// A task whose one source lane has a head with `claims` claims: a third on
/// the task's own tps (resolved), the rest on tps it does not consume.
fn gate_fixture(claims: u32) -> Task {
    let orders: Topic<String, i64> = Topic::new("orders");
    let refunds: Topic<String, i64> = Topic::new("refunds");
    let stage = Stage::named("gate")
        .on(&orders, |_| Vec::new())
        .on(&refunds, |_| Vec::new())
        .build();
    let app = Parsley::named("bench").stage(stage).build().unwrap();
    let metadata = [("orders".to_string(), 1), ("refunds".to_string(), 1)]
        .into_iter()
        .collect::<std::collections::BTreeMap<_, _>>();
    let assembly = assemble(&app, &metadata).unwrap();
    let mut task = Task::new(&app, &assembly, "gate", 0, TaskConfig::default()).unwrap();
    task.start(&[None, None], 0).unwrap();
    let refunds_tp = Tp::new("refunds", 0);
    let filler: Vec<ConsumedRecord> = (0..100)
        .map(|offset| ConsumedRecord {
            offset,
            data: RecordData {
                key: None,
                value: Some(Bytes::from_static(b"1")),
                headers: Vec::new(),
                timestamp: 0,
            },
        })
        .collect();
    task.handle_fetched(
        &refunds_tp,
        &mut Fetched {
            records: filler,
            next_offset: 100,
            log_end: 100,
        },
    );
    let mut produced = Vec::new();
    for _ in 0..100 {
        task.deliver(&refunds_tp, &mut produced).unwrap();
        produced.clear();
    }
    let stamp = Stamp::from_claims((0..claims).map(|index| match index % 3 {
        0 => Claim::new(refunds_tp.clone(), u64::from(index % 50)),
        _ => Claim::new(
            Tp::new(format!("upstream-{}", index % 7), index),
            u64::from(index),
        ),
    }));
    let head = ConsumedRecord {
        offset: 0,
        data: RecordData {
            key: None,
            value: Some(Bytes::from_static(b"1")),
            headers: vec![Header {
                name: STAMP_HEADER.into(),
                value: header::encode(&stamp),
            }],
            timestamp: 0,
        },
    };
    task.handle_fetched(
        &Tp::new("orders", 0),
        &mut Fetched {
            records: vec![head],
            next_offset: 1,
            log_end: 1,
        },
    );
    task
}

fn gate_check_ns_per_claim() -> (f64, f64) {
    const CLAIMS: u32 = 24;
    const CHECKS: u32 = 200_000;
    let mut task = gate_fixture(CLAIMS);
    // The driver's list, kept from check to check as the simulator keeps it.
    let mut ready = Vec::new();
    task.deliverable(0, &mut ready).unwrap();
    assert_eq!(ready.len(), 1, "the head is deliverable");
    let elapsed = best_of(5, || {
        let start = Instant::now();
        for _ in 0..CHECKS {
            task.deliverable(0, &mut ready).unwrap();
            black_box(&ready);
        }
        start.elapsed()
    });
    let per_check = elapsed.as_nanos() as f64 / f64::from(CHECKS);
    (1e9 / per_check, per_check / f64::from(CLAIMS))
}

fn stamp_codec_ns() -> (f64, f64, usize) {
    const ROUNDS: u32 = 500_000;
    let stamp = chain_stamp();
    let encoded = header::encode(&stamp);
    let encode = best_of(5, || {
        let start = Instant::now();
        for _ in 0..ROUNDS {
            black_box(header::encode(black_box(&stamp)));
        }
        start.elapsed()
    });
    let decode = best_of(5, || {
        let start = Instant::now();
        for _ in 0..ROUNDS {
            black_box(header::decode(black_box(&encoded)).unwrap());
        }
        start.elapsed()
    });
    (
        encode.as_nanos() as f64 / f64::from(ROUNDS),
        decode.as_nanos() as f64 / f64::from(ROUNDS),
        encoded.len(),
    )
}

/// Mean stamp header bytes per record on each topic of the chain.
fn chain_stamp_bytes() -> Vec<(String, f64, usize)> {
    let topics = ChainTopics::new();
    let app = chain(&topics, Duration::from_secs(1)).unwrap();
    let driver = TestDriver::builder(&app)
        .initial_wall_clock(1_700_000_000_000)
        .default_partitions(8)
        .build()
        .unwrap();
    let input = driver.input(&topics.input).unwrap();
    for batch in 0..20 {
        input
            .pipe_all(
                (0..200)
                    .map(|index| TestRecord::new(format!("key-{}", (batch * 200 + index) % 64), 1)),
            )
            .unwrap();
        driver.advance_wall_clock(Duration::from_secs(1)).unwrap();
    }
    let cluster = driver.cluster();
    ["enriched", "metered", "output"]
        .iter()
        .map(|topic| {
            let (mut bytes, mut records) = (0usize, 0usize);
            for partition in 0..8 {
                let tp = Tp::new(*topic, partition);
                let fetch = cluster
                    .fetch(
                        &tp,
                        0,
                        usize::MAX,
                        parsley_sim::model::Isolation::ReadCommitted,
                    )
                    .unwrap();
                for record in fetch.records {
                    bytes += record
                        .data
                        .header(STAMP_HEADER)
                        .map_or(0, |header| header.len());
                    records += 1;
                }
            }
            (
                topic.to_string(),
                bytes as f64 / records.max(1) as f64,
                records,
            )
        })
        .collect()
}

fn driver_records_per_second() -> f64 {
    const RECORDS: usize = 100_000;
    const TICK_EVERY: usize = 1_000;
    let elapsed = best_of(3, || {
        let topics = PaymentsTopics::new();
        let app = balances(&topics).unwrap();
        let driver = TestDriver::builder(&app)
            .initial_wall_clock(1_700_000_000_000)
            .partitions("orders", 4)
            .build()
            .unwrap();
        let orders = driver.input(&topics.orders).unwrap();
        let keys: Vec<String> = (0..16).map(|key| format!("account-{key}")).collect();
        let start = Instant::now();
        for batch in 0..RECORDS / TICK_EVERY {
            orders
                .pipe_all((0..TICK_EVERY).map(|index| {
                    TestRecord::new(
                        keys[(batch * TICK_EVERY + index) % keys.len()].clone(),
                        Order { total: 1 },
                    )
                }))
                .unwrap();
            driver.advance_wall_clock(Duration::from_secs(60)).unwrap();
        }
        let elapsed = start.elapsed();
        assert_eq!(
            driver.metric("balances", "ticks-emitted-total").unwrap(),
            (4 * RECORDS / TICK_EVERY) as u64
        );
        elapsed
    });
    RECORDS as f64 / elapsed.as_secs_f64()
}

fn main() {
    // `cargo test --benches` runs bench targets with `--bench`-less args; only
    // measure under `cargo bench`.
    if !std::env::args().any(|arg| arg == "--bench") {
        println!("run with `cargo bench -p parsley-examples --bench core`");
        return;
    }
    let (checks_per_second, ns_per_claim) = gate_check_ns_per_claim();
    let (encode_ns, decode_ns, stamp_len) = stamp_codec_ns();
    let chain = chain_stamp_bytes();
    let records_per_second = driver_records_per_second();

    println!("{:<58} {:>14} {:>12}", "figure", "measured", "target");
    println!(
        "{:<58} {:>14.0} {:>12}",
        "gate checks per second (24 claims per head)", checks_per_second, ""
    );
    println!(
        "{:<58} {:>14.1} {:>12}",
        "gate check, ns per claim", ns_per_claim, "<= 50"
    );
    println!(
        "{:<58} {:>14.1} {:>12}",
        format!("stamp encode, ns ({stamp_len}-byte, 4-claim chain stamp)"),
        encode_ns,
        ""
    );
    println!(
        "{:<58} {:>14.1} {:>12}",
        "stamp decode, ns (same stamp)", decode_ns, ""
    );
    for (topic, bytes, records) in &chain {
        let target = if topic == "output" { "<= 64" } else { "" };
        println!(
            "{:<58} {:>14.1} {:>12}",
            format!("stamp bytes per record, 3-stage chain x8, {topic} ({records} records)"),
            bytes,
            target
        );
    }
    println!(
        "{:<58} {:>14.0} {:>12}",
        "TestDriver records/s, balances (4 partitions, 16 keys)", records_per_second, ">= 500000"
    );
}
