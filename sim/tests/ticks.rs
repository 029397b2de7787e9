//! Ticks under the test driver (T3–T8): held, aborted, redelivered, restarted.

use crate::support;

use std::time::Duration;

use parsley::{App, Claim, Stamp, Tp};
use parsley_sim::{TestDriver, TestRecord};
use support::{deliveries, ledger, ticks_delivered, ticks_emitted, MINUTE, START};
use support::{shop, tally, Sale, ShopTopics};

/// A driver of `app` whose wall clock starts at `START`.
fn at_start(app: &App) -> TestDriver {
    TestDriver::builder(app)
        .initial_wall_clock(START)
        .build()
        .unwrap()
}

/// The shop, under a driver whose wall clock starts at `START`.
fn shop_at_start() -> (ShopTopics, TestDriver) {
    let topics = ShopTopics::new();
    let driver = at_start(&shop(&topics).unwrap());
    (topics, driver)
}

/// The receipts the shop wrote.
fn receipts(driver: &TestDriver, topics: &ShopTopics) -> Vec<String> {
    driver
        .output(&topics.receipts)
        .unwrap()
        .read_values()
        .unwrap()
}

/// T5: a tick emitted while a record is held on an unresolved claim claims
/// that record's causes, so it is held too, and delivered only after the
/// claim resolves.
#[test]
fn t5_tick_held_behind_unresolved_claim_is_delivered_after_it_resolves() {
    let ledger = ledger();
    let driver = at_start(&ledger.app);
    driver.pause("payments");
    let (payment, _) = driver
        .input(&ledger.payments)
        .unwrap()
        .pipe_record(TestRecord::new("alice".to_string(), 50))
        .unwrap();
    let claim = Stamp::from_claims([Claim::new(payment.clone(), 0)]);
    driver
        .input(&ledger.orders)
        .unwrap()
        .pipe_record(TestRecord::new("alice".to_string(), 20).stamped(claim))
        .unwrap();
    driver.advance_wall_clock(MINUTE).unwrap();

    // The tick was emitted and committed, but neither it nor the order went.
    assert_eq!(ticks_emitted(&driver.trace()), [(START + 60_000, 0)]);
    assert!(ticks_delivered(&driver.trace()).is_empty());
    assert!(driver
        .output(&ledger.audits)
        .unwrap()
        .read_all()
        .unwrap()
        .is_empty());
    assert_eq!(driver.metrics("ledger", 0).unwrap().records_held, 2);

    // Time passes with the claim unresolved: still nothing, and no deadlock.
    driver.advance_wall_clock(Duration::from_secs(10)).unwrap();
    assert!(ticks_delivered(&driver.trace()).is_empty());
    driver.resume("payments").unwrap();
    assert_eq!(
        deliveries(&driver.trace()),
        ["payments-0@0", "orders-0@0", "books-ledger-ticks-0@0"],
        "the payment resolves the claim; the order and then the tick follow"
    );
    let cuts = driver.output(&ledger.audits).unwrap().read_all().unwrap();
    assert_eq!(cuts.len(), 1);
    assert!(cuts[0].stamp.offset(&Tp::new("payments", 0)) == Some(0));
    insta::assert_snapshot!("held_tick", driver.tick_report());
}

/// T6: if the transaction that emitted a tick aborts, the tick never becomes
/// visible, the tick time rolls back, and the retry emits a fresh tick.
#[test]
fn t6_abort_of_emitting_transaction_reemits_the_tick() {
    let (topics, driver) = shop_at_start();
    driver.fail_next_commit("till", 0).unwrap();
    driver.advance_wall_clock(MINUTE).unwrap();
    // Offset 0 held the aborted tick, offset 1 its abort marker.
    assert_eq!(
        ticks_emitted(&driver.trace()),
        [(START + 60_000, 0), (START + 60_000, 2)]
    );
    assert_eq!(
        ticks_delivered(&driver.trace()),
        [("shop-till-ticks-0".to_string(), 2)]
    );
    assert_eq!(
        receipts(&driver, &topics),
        [format!("close@{}", START + 60_000)]
    );
    assert_eq!(driver.metric("till", "ticks-emitted-total").unwrap(), 1);
}

/// T6: if the transaction that processes a tick aborts, the retry redelivers
/// the same tick, in order, and its effects commit exactly once.
#[test]
fn t6_abort_of_processing_transaction_redelivers_the_same_tick() {
    let (topics, driver) = shop_at_start();
    driver.pause("shop-till-ticks");
    driver.advance_wall_clock(MINUTE).unwrap();
    driver.fail_next_commit("till", 0).unwrap();
    driver.resume("shop-till-ticks").unwrap();
    let tick = "shop-till-ticks-0".to_string();
    assert_eq!(
        ticks_delivered(&driver.trace()),
        [(tick.clone(), 0), (tick, 0)]
    );
    assert_eq!(
        receipts(&driver, &topics),
        [format!("close@{}", START + 60_000)]
    );
    let metrics = driver.metrics("till", 0).unwrap();
    assert_eq!(metrics.records_redelivered_total, 1);
    assert_eq!(metrics.transactions_aborted_total, 1);
}

/// T3: the time of the last tick is committed, so a restarted task keeps its
/// cadence instead of counting from the restart.
#[test]
fn t3_cadence_survives_a_restart() {
    let (_, driver) = shop_at_start();
    driver.advance_wall_clock(MINUTE).unwrap();
    driver.advance_wall_clock(Duration::from_secs(30)).unwrap();
    driver.restart().unwrap();
    driver.advance_wall_clock(Duration::from_secs(30)).unwrap();
    let times: Vec<i64> = ticks_emitted(&driver.trace())
        .iter()
        .map(|(at, _)| at - START)
        .collect();
    assert_eq!(times, [60_000, 120_000]);
}

/// T3: one tick per firing, never a burst of catch-up ticks.
#[test]
fn t3_a_long_pause_gives_one_tick_not_a_burst() {
    let (_, driver) = shop_at_start();
    driver.advance_wall_clock(Duration::from_secs(59)).unwrap();
    assert!(
        ticks_emitted(&driver.trace()).is_empty(),
        "not before the interval"
    );
    driver
        .advance_wall_clock(Duration::from_secs(10 * 60))
        .unwrap();
    assert_eq!(ticks_emitted(&driver.trace()).len(), 1);
}

/// T7: the tick slot is never the null key's slot, live or restored from the
/// changelog.
#[test]
fn t7_tick_slot_is_never_the_null_key_slot() {
    let topics = ShopTopics::new();
    let driver = at_start(&tally(&topics).unwrap());
    driver
        .input(&topics.sales)
        .unwrap()
        .pipe(None, Sale { amount: 40 })
        .unwrap();
    for _ in 0..3 {
        driver.advance_wall_clock(MINUTE).unwrap();
    }
    let check = |driver: &TestDriver| {
        assert_eq!(driver.null_key_slot::<i64>("tally", 0).unwrap(), Some(40));
        assert_eq!(driver.tick_slot::<i64>("tally", 0).unwrap(), Some(3));
    };
    check(&driver);
    driver.restart().unwrap();
    check(&driver);
}

/// T8: `ticks-emitted-total` counts committed tick records only.
#[test]
fn t8_ticks_emitted_total_counts_committed_ticks_once() {
    let topics = ShopTopics::new();
    let driver = TestDriver::builder(&shop(&topics).unwrap())
        .initial_wall_clock(START)
        .partitions("sales", 3)
        .build()
        .unwrap();
    driver.advance_wall_clock(MINUTE).unwrap();
    driver.fail_next_commit("till", 1).unwrap();
    driver.advance_wall_clock(MINUTE).unwrap();
    assert_eq!(driver.metric("till", "ticks-emitted-total").unwrap(), 6);
    assert_eq!(driver.metrics("till", 1).unwrap().ticks_emitted_total, 2);
    assert_eq!(
        driver.metric("till", "transactions-aborted-total").unwrap(),
        1
    );
}
