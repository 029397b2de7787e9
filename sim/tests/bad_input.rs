//! Bad input (docs/RULES.md#bad-input) under the test driver: every bad input gets a typed error naming
//! what and where, the task stops, and its committed position stays before
//! the bad record, so nothing committed is lost.

use crate::support;

use bytes::Bytes;
use parsley::header::{self, HeaderError, STAMP_HEADER};
use parsley::Header;
use parsley::{
    AssemblyError, Claim, CompositionError, Parsley, Stage, Stamp, TaskError, Topic, Tp,
};
use parsley_sim::{DriverError, TestDriver, TestRecord};
use support::{ledger, START};
use support::{shop, Sale, ShopTopics};

fn committed_offset(driver: &TestDriver, group: &str, tp: &Tp) -> Option<u64> {
    driver
        .cluster()
        .committed(group, tp)
        .map(|committed| committed.offset)
}

fn shop_driver(topics: &ShopTopics) -> TestDriver {
    TestDriver::builder(&shop(topics).unwrap())
        .initial_wall_clock(START)
        .build()
        .unwrap()
}

/// §8: a stamp header that does not decode stops the task naming tp and
/// offset; the committed position stays at that record.
#[test]
fn bad_stamp_header_stops_the_task_at_the_record() {
    let topics = ShopTopics::new();
    let driver = shop_driver(&topics);
    let sales = driver.input(&topics.sales).unwrap();
    sales.pipe("alice".to_string(), Sale { amount: 5 }).unwrap();
    let garbage = vec![Header {
        name: STAMP_HEADER.into(),
        value: Bytes::from_static(&[1, 9]),
    }];
    let error = sales
        .pipe_raw(
            0,
            Some(Bytes::from_static(b"\"bob\"")),
            Some(Bytes::from_static(b"{\"amount\":1}")),
            garbage,
        )
        .unwrap_err();
    let DriverError::Task(TaskError::BadStamp {
        tp, offset, error, ..
    }) = &error
    else {
        panic!("expected a bad stamp, got {error}");
    };
    assert_eq!((tp.to_string().as_str(), *offset), ("sales-0", 1));
    assert!(
        matches!(error, HeaderError::AbsurdValue { .. }),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("topic count 9"),
        "the error says what is wrong: {error}"
    );
    assert_eq!(
        committed_offset(&driver, "shop-till", &Tp::new("sales", 0)),
        Some(1)
    );
    // The task stays stopped, loudly: later input is not silently skipped,
    // and the error says the task is stopped instead of repeating the stop.
    let again = sales
        .pipe("carol".to_string(), Sale { amount: 2 })
        .unwrap_err();
    let DriverError::TaskStopped { tasks, first } = &again else {
        panic!("expected the task to be reported stopped, got {again}");
    };
    assert_eq!(tasks, &["till/0"]);
    assert!(
        first.starts_with("task till/0: ") && first.contains("topic count 9"),
        "the first stop is named: {first}"
    );
    assert_eq!(
        committed_offset(&driver, "shop-till", &Tp::new("sales", 0)),
        Some(1)
    );
}

/// §8, G6: a claim at or beyond the record's own offset on its own tp can
/// never resolve: reported as poison with the claim, not waited on.
#[test]
fn g6_claim_on_own_future_offset_is_poison() {
    let topics = ShopTopics::new();
    let driver = shop_driver(&topics);
    let stamp = Stamp::from_claims([Claim::new(Tp::new("sales", 0), 7)]);
    let error = driver
        .input(&topics.sales)
        .unwrap()
        .pipe_record(TestRecord::new("alice".to_string(), Sale { amount: 1 }).stamped(stamp))
        .unwrap_err();
    let DriverError::Task(TaskError::UnresolvableClaim {
        tp, offset, claim, ..
    }) = &error
    else {
        panic!("expected poison, got {error}");
    };
    assert_eq!(
        (tp.to_string(), *offset, claim.to_string()),
        ("sales-0".to_string(), 0, "sales-0@7".to_string())
    );
    assert_eq!(
        committed_offset(&driver, "shop-till", &Tp::new("sales", 0)),
        None
    );
}

/// §8, G6: a claim beyond the log end of another consumed tp is poison once
/// a fresh fetch shows the log end.
#[test]
fn g6_claim_beyond_another_tps_log_end_is_poison() {
    let ledger = ledger();
    let driver = TestDriver::builder(&ledger.app)
        .initial_wall_clock(START)
        .build()
        .unwrap();
    let stamp = Stamp::from_claims([Claim::new(Tp::new("payments", 0), 3)]);
    let error = driver
        .input(&ledger.orders)
        .unwrap()
        .pipe_record(TestRecord::new("alice".to_string(), 1).stamped(stamp))
        .unwrap_err();
    assert!(
        error.to_string().contains("its claim payments-0@3 can never resolve: it is at or beyond the log end 0 of payments-0"),
        "{error}"
    );
}

/// §8, G6: after earlier traffic on both sources, a claim beyond the other
/// tp's log end is still poison, whichever of the two tps the record is on.
/// The driver skips fetches that have nothing new for a task with nothing
/// buffered; a task holding a record must fetch again, or the claim would
/// wait silently on a log end it was told before the record arrived.
#[test]
fn g6_claim_beyond_the_log_end_is_poison_after_earlier_traffic_on_either_tp() {
    for (on_orders, claimed) in [(true, "payments"), (false, "orders")] {
        let ledger = ledger();
        let driver = TestDriver::builder(&ledger.app)
            .initial_wall_clock(START)
            .build()
            .unwrap();
        let orders = driver.input(&ledger.orders).unwrap();
        let payments = driver.input(&ledger.payments).unwrap();
        for _ in 0..3 {
            orders
                .pipe_record(TestRecord::new("alice".to_string(), 1).partition(0))
                .unwrap();
            payments
                .pipe_record(TestRecord::new("alice".to_string(), 2).partition(0))
                .unwrap();
        }
        let stamp = Stamp::from_claims([Claim::new(Tp::new(claimed, 0), 9)]);
        let record = TestRecord::new("alice".to_string(), 1)
            .partition(0)
            .stamped(stamp);
        let error = match on_orders {
            true => orders.pipe_record(record),
            false => payments.pipe_record(record),
        }
        .unwrap_err();
        assert!(
            error.to_string().contains(&format!(
                "its claim {claimed}-0@9 can never resolve: it is at or beyond the log end 3 of {claimed}-0"
            )),
            "{error}"
        );
    }
}

/// §8: a value the topic's codec rejects stops the task naming topic, tp and
/// offset; nothing after it is delivered and the position stays.
#[test]
fn codec_rejected_value_names_topic_tp_and_offset() {
    let topics = ShopTopics::new();
    let driver = shop_driver(&topics);
    let sales = driver.input(&topics.sales).unwrap();
    let error = sales
        .pipe_raw(
            0,
            Some(Bytes::from_static(b"\"alice\"")),
            Some(Bytes::from_static(b"not json")),
            Vec::new(),
        )
        .unwrap_err();
    let DriverError::Task(task_error @ TaskError::Codec { tp, offset, .. }) = &error else {
        panic!("expected a codec error, got {error}");
    };
    assert_eq!((tp.to_string().as_str(), *offset), ("sales-0", 0));
    let message = task_error.to_string();
    assert!(
        message.contains("the value of record sales-0@0 was rejected by the codec of topic sales"),
        "{message}"
    );
    assert_eq!(
        committed_offset(&driver, "shop-till", &Tp::new("sales", 0)),
        None
    );
}

/// §8, S3: an emission to an undeclared topic names stage and topic.
#[test]
fn s3_emission_to_undeclared_topic_names_stage_and_topic() {
    let orders: Topic<String, i64> = Topic::new("orders");
    let secret: Topic<String, i64> = Topic::new("secret");
    let leak = Stage::named("leak")
        .on(
            &orders,
            move |order| vec![secret.send(None, *order.value())],
        )
        .build();
    let app = Parsley::named("shop").stage(leak).build().unwrap();
    let driver = TestDriver::new(&app).unwrap();
    let error = driver.input(&orders).unwrap().pipe(None, 1).unwrap_err();
    assert!(
        matches!(&error, DriverError::Task(TaskError::UndeclaredSink { topic, .. }) if topic == "secret")
    );
    assert!(
        error
            .to_string()
            .starts_with("S3 (docs/RULES.md#s3): stage \"leak\" emitted to topic \"secret\""),
        "{error}"
    );
}

/// §8, T2: an emission to a tick topic names stage and topic.
#[test]
fn t2_emission_to_a_tick_topic_names_stage_and_topic() {
    let orders: Topic<String, i64> = Topic::new("orders");
    let forged: Topic<String, i64> = Topic::new("shop-forger-ticks");
    let forger = Stage::named("forger")
        .on(
            &orders,
            move |order| vec![forged.send(None, *order.value())],
        )
        .ticks(support::MINUTE, |_| Vec::new())
        .build();
    let app = Parsley::named("shop").stage(forger).build().unwrap();
    let driver = TestDriver::new(&app).unwrap();
    let error = driver.input(&orders).unwrap().pipe(None, 1).unwrap_err();
    assert!(
        error.to_string().starts_with(
            "T2 (docs/RULES.md#t2): stage \"forger\" emitted to tick topic \"shop-forger-ticks\""
        ),
        "{error}"
    );
}

/// §8, C3: a missing topic fails assembly before any record is read,
/// naming the topic and the fix.
#[test]
fn c3_missing_topics_fail_before_anything_runs() {
    let topics = ShopTopics::new();
    let app = shop(&topics).unwrap();
    let result = TestDriver::builder(&app)
        .create_topics(false)
        .existing_topic("sales", 4)
        .existing_topic("receipts", 1)
        .build();
    let Err(DriverError::Assembly(AssemblyError { failures, .. })) = result else {
        panic!("assembly must fail");
    };
    let messages: Vec<String> = failures.iter().map(ToString::to_string).collect();
    assert_eq!(
        messages,
        [
            "C3 (docs/RULES.md#c3): topic \"shop-till-state-changelog\" (changelog of stage till) does not exist; expected 4 partitions; fix: create it: kafka-topics.sh --create --topic shop-till-state-changelog --partitions 4 --config cleanup.policy=compact",
            "C3 (docs/RULES.md#c3): topic \"shop-till-ticks\" (ticks of stage till) does not exist; expected 4 partitions; fix: create it: kafka-topics.sh --create --topic shop-till-ticks --partitions 4 --config cleanup.policy=delete --config retention.ms=3600000",
        ]
    );
}

/// §8, C3: a tick topic whose partition count differs from the widest
/// source's fails assembly.
#[test]
fn c3_wrong_tick_partition_count_fails() {
    let topics = ShopTopics::new();
    let app = shop(&topics).unwrap();
    let result = TestDriver::builder(&app)
        .partitions("sales", 4)
        .existing_topic("shop-till-ticks", 3)
        .build();
    let error = result.err().expect("assembly must fail");
    assert!(
        error
            .to_string()
            .contains("\"shop-till-ticks\" (ticks of stage till) has 3 partitions, expected 4"),
        "{error}"
    );
}

/// §8, C1: duplicate names fail the build naming the rule.
#[test]
fn c1_duplicate_stage_names_fail_the_build() {
    let topics = ShopTopics::new();
    let error = Parsley::named("shop")
        .stage(support::till(&topics))
        .stage(support::till(&topics))
        .build()
        .unwrap_err();
    assert!(matches!(error, CompositionError::DuplicateStage { .. }));
}

/// X5: a fold that panics does not skip the record: the task stops naming
/// stage, tp and offset, and its committed position stays before the record.
#[test]
fn x5_panicking_logic_stops_the_task_without_skipping() {
    let orders: Topic<String, i64> = Topic::new("orders");
    let fragile = Stage::named("fragile")
        .on(&orders, |order| {
            assert!(*order.value() >= 0, "negative order {}", order.value());
            Vec::new()
        })
        .build();
    let app = Parsley::named("shop").stage(fragile).build().unwrap();
    let driver = TestDriver::new(&app).unwrap();
    let input = driver.input(&orders).unwrap();
    input.pipe(None, 1).unwrap();
    let error = input.pipe(None, -1).unwrap_err();
    assert!(
        error.to_string().starts_with(
            "task fragile/0: logic failed on orders-0@1 (X5, docs/RULES.md#x5): panicked: negative order -1"
        ),
        "{error}"
    );
    assert_eq!(
        committed_offset(&driver, "shop-fragile", &Tp::new("orders", 0)),
        Some(1)
    );
    assert_eq!(driver.stopped_tasks().len(), 1);
    let _ = header::encode(&Stamp::empty());
}
