//! The worked examples under the test driver, with snapshots of their ticks.

use crate::common;

use common::{MINUTE, START};
use parsley::{Step, Tick};
use parsley_examples::{audit_cut, audit_cut_policy, balances, Order, PaymentsTopics};
use parsley_sim::TraceEvent;
use parsley_sim::{TestDriver, TestRecord};

/// The seed's `balances`: a fold over orders and a one-minute tick that cuts
/// `cut@<timestamp>` to `audits`.
#[test]
fn balances_folds_orders_and_cuts_every_minute() {
    let topics = PaymentsTopics::new();
    let driver = TestDriver::builder(&balances(&topics).unwrap())
        .initial_wall_clock(START)
        .partitions("orders", 2)
        .build()
        .unwrap();
    let orders = driver.input(&topics.orders).unwrap();
    orders
        .pipe("alice".to_string(), Order { total: 30 })
        .unwrap();
    orders.pipe("bob".to_string(), Order { total: 5 }).unwrap();
    orders
        .pipe("alice".to_string(), Order { total: 12 })
        .unwrap();
    driver.advance_wall_clock(MINUTE).unwrap();
    orders.pipe("bob".to_string(), Order { total: 1 }).unwrap();
    driver.advance_wall_clock(MINUTE).unwrap();

    let balance = |account: &str| {
        driver
            .key_slot::<i64, _, _>("balances", &topics.orders, &account.to_string())
            .unwrap()
    };
    assert_eq!(balance("alice"), Some(-42));
    assert_eq!(balance("bob"), Some(-6));
    assert_eq!(balance("carol"), None);
    let cuts = driver.output(&topics.audits).unwrap().read_all().unwrap();
    assert_eq!(cuts.len(), 4, "two tasks, two minutes");
    // G5: each cut claims the tick it was emitted for, and that tick's causes
    // (everything its task had delivered when the minute fired).
    let trace = driver.trace();
    for cut in &cuts {
        let tick = cut
            .stamp
            .claims()
            .iter()
            .find(|claim| claim.tp.topic.as_str() == "payments-balances-ticks")
            .expect("a cut claims its tick");
        let tick_stamp = trace
            .iter()
            .find_map(|event| match event {
                TraceEvent::TickEmitted {
                    tp, offset, stamp, ..
                } if *tp == tick.tp && *offset == tick.offset => Some(stamp.clone()),
                _ => None,
            })
            .expect("the claimed tick was emitted");
        assert!(
            cut.stamp.dominates(&tick_stamp),
            "{} does not dominate {}",
            cut.stamp,
            tick_stamp
        );
    }
    assert_eq!(driver.metric("balances", "ticks-emitted-total").unwrap(), 4);
    insta::assert_snapshot!("balances_ticks", driver.tick_report());
}

/// The fifth-tick audit cut: a tick fold over an integer slot emits a cut on
/// every fifth tick.
#[test]
fn audit_cut_emits_on_every_fifth_tick() {
    let topics = PaymentsTopics::new();
    let driver = TestDriver::builder(&audit_cut(&topics).unwrap())
        .initial_wall_clock(START)
        .build()
        .unwrap();
    let orders = driver.input(&topics.orders).unwrap();
    for minute in 0..11 {
        orders
            .pipe_record(TestRecord::new(
                "alice".to_string(),
                Order { total: minute },
            ))
            .unwrap();
        driver.advance_wall_clock(MINUTE).unwrap();
    }
    assert_eq!(
        driver
            .output(&topics.audits)
            .unwrap()
            .read_values()
            .unwrap(),
        [
            format!("cut@{}", START + 5 * 60_000),
            format!("cut@{}", START + 10 * 60_000)
        ]
    );
    assert_eq!(driver.tick_slot::<i64>("audit-cut", 0).unwrap(), Some(1));
    insta::assert_snapshot!("audit_cut_ticks", driver.tick_report());
}

/// The seed's pure tick-logic test: no runtime, plain equality.
#[test]
fn audit_cut_policy_is_pure() {
    let topics = PaymentsTopics::new();
    assert_eq!(
        audit_cut_policy(&topics.audits, 0, &Tick::new(1000)),
        Step::of(1)
    );
    assert_eq!(
        audit_cut_policy(&topics.audits, 4, &Tick::new(1000)),
        Step::of(0).emit(topics.audits.send(None, "cut@1000"))
    );
}

/// K1, K2: per-entity timers as a topology shape. `reserve` asks for a timer;
/// a scheduler outside the application observes the request with a
/// `CausalClock` and writes the fire record stamped with what it observed, so
/// `reserve` delivers the fire only after the request's causes.
#[test]
fn k2_timer_fire_is_gated_behind_the_requests_causes() {
    use parsley::{CausalClock, Tp};
    use parsley_examples::{timers, TimerTopics, RESERVATION_MS};

    let topics = TimerTopics::new();
    let driver = TestDriver::builder(&timers(&topics).unwrap())
        .initial_wall_clock(START)
        .build()
        .unwrap();
    let orders = driver.input(&topics.orders).unwrap();
    orders
        .pipe("alice".to_string(), Order { total: 30 })
        .unwrap();

    // The scheduler reads the committed request and observes it.
    let requests = driver.output(&topics.requests).unwrap().read_all().unwrap();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].value, START + RESERVATION_MS);
    let mut clock = CausalClock::new();
    clock.observe_stamp(&requests[0].tp, requests[0].offset, &requests[0].stamp);
    assert_eq!(
        clock.stamp().offset(&Tp::new("orders", 0)),
        Some(0),
        "the request claims its order"
    );

    // A second order arrives but is not yet consumed; the fire claims it too,
    // as if the scheduler had seen a request caused by it.
    driver.pause("orders");
    let (second, _) = orders
        .pipe_record(TestRecord::new("alice".to_string(), Order { total: 5 }))
        .unwrap();
    clock.observe_stamp(&second, 1, &parsley::Stamp::empty());
    driver
        .input(&topics.fires)
        .unwrap()
        .pipe_record(
            TestRecord::new("alice".to_string(), START + RESERVATION_MS)
                .stamped(clock.stamp().clone()),
        )
        .unwrap();
    assert!(
        driver
            .output(&topics.expiries)
            .unwrap()
            .read_all()
            .unwrap()
            .is_empty(),
        "the fire waits for orders-0@1"
    );
    assert_eq!(driver.metrics("reserve", 0).unwrap().records_held, 1);

    driver.resume("orders").unwrap();
    let expiries = driver.output(&topics.expiries).unwrap().read_all().unwrap();
    assert_eq!(expiries.len(), 1);
    assert_eq!(
        expiries[0].value, 35,
        "both orders were reserved before the release"
    );
    assert!(expiries[0].stamp.offset(&Tp::new("orders", 0)) >= Some(1));
}

/// The shipped sessions example under the driver: clicks within the gap
/// are one session; the gap closes it and the report counts its clicks.
#[test]
fn k2_sessions_close_a_gap_after_the_last_click() {
    use parsley_examples::{sessions, SessionTopics, SESSION_GAP_MS};
    use std::time::Duration;
    let topics = SessionTopics::new();
    let app = sessions(&topics).unwrap();
    let driver = TestDriver::builder(&app)
        .initial_wall_clock(START)
        .build()
        .unwrap();
    let clicks = driver.input(&topics.clicks).unwrap();
    clicks.pipe("ann".to_string(), 1).unwrap();
    driver.advance_wall_clock(Duration::from_secs(20)).unwrap();
    clicks.pipe("ann".to_string(), 2).unwrap();
    let summaries = driver.output(&topics.summaries).unwrap();
    driver.advance_wall_clock(Duration::from_secs(20)).unwrap();
    assert!(summaries.read_values().unwrap().is_empty(), "still open");
    driver
        .advance_wall_clock(Duration::from_millis(SESSION_GAP_MS as u64))
        .unwrap();
    assert_eq!(summaries.read_values().unwrap(), [2]);
    assert_eq!(
        driver
            .key_slot::<i64, _, _>("report", &topics.summaries, &"ann".to_string())
            .unwrap(),
        Some(2)
    );
}
