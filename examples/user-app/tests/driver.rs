//! The application under the `TestDriver`: timers fire by
//! `advance_wall_clock` alone.

use std::time::Duration;

use parsley_sim::TestDriver;
use parsley_user_app::{app, Session, Topics, GAP_MS, LARGE};

const START: i64 = 1_700_000_000_000;

#[test]
fn a_session_closes_a_gap_after_its_last_click_and_a_lone_click_then_a_large_payment_alerts() {
    let topics = Topics::new("");
    let app = app("", &topics, GAP_MS).unwrap();
    let driver = TestDriver::builder(&app)
        .initial_wall_clock(START)
        .build()
        .unwrap();
    let clicks = driver.input(&topics.clicks).unwrap();
    clicks.pipe("ann".to_string(), 1).unwrap();
    clicks.pipe("bob".to_string(), 1).unwrap();
    driver.advance_wall_clock(Duration::from_secs(10)).unwrap();
    clicks.pipe("bob".to_string(), 2).unwrap();
    assert_eq!(driver.pending_timers("session-timers").unwrap().len(), 3);
    assert_eq!(
        driver
            .key_slot::<Session, _, _>("sessions", &topics.clicks, &"bob".to_string())
            .unwrap(),
        Some(Session {
            clicks: 2,
            last: START + 10_000
        })
    );
    driver.advance_wall_clock(Duration::from_secs(25)).unwrap();
    // ann's session closed; bob's is still open (his last click was later,
    // so his first timer's fire finds the session going).
    let summaries = driver.output(&topics.summaries).unwrap();
    let closed: Vec<(Option<String>, i64)> = summaries
        .read_all()
        .unwrap()
        .into_iter()
        .map(|record| (record.key, record.value))
        .collect();
    assert_eq!(closed, [(Some("ann".to_string()), 1)]);
    assert_eq!(
        driver.pending_timers("session-timers").unwrap(),
        [START + 40_000]
    );
    driver.advance_wall_clock(Duration::from_secs(10)).unwrap();
    assert!(driver.pending_timers("session-timers").unwrap().is_empty());
    let payments = driver.input(&topics.payments).unwrap();
    payments.pipe("ann".to_string(), LARGE).unwrap();
    payments.pipe("bob".to_string(), LARGE).unwrap();
    let alerts = driver.output(&topics.alerts).unwrap().read_all().unwrap();
    let alerts: Vec<(Option<String>, i64)> = alerts
        .into_iter()
        .map(|record| (record.key, record.value))
        .collect();
    assert_eq!(alerts, [(Some("ann".to_string()), LARGE)]);
}
