//! The pipeline under the `TestDriver`: duplicates dropped, orders
//! enriched with the profile their customer had, revenue windows closed by
//! `advance_wall_clock` alone.
//!
//! The join is synchronised by timestamp (G9): when it is caught up on
//! orders or on profiles it waits up to `PROFILE_WAIT` of wall clock for
//! more, and the driver's wall clock moves only when the test moves it (as
//! Kafka Streams' `TopologyTestDriver` under `max.task.idle.ms`), so the
//! test advances it by `PROFILE_WAIT` before it reads what the join wrote.

use std::time::Duration;

use parsley_shop_app::{app, Enriched, Order, Profile, Topics, PROFILE_WAIT};
use parsley_sim::{TestDriver, TestRecord};

const MINUTE: i64 = 60_000;
// A whole minute, so windows start on it.
const START: i64 = 1_700_000_040_000;

fn order(id: &str, customer: &str, product: &str, cents: i64) -> Order {
    Order {
        id: id.to_string(),
        customer: customer.to_string(),
        product: product.to_string(),
        cents,
    }
}

#[test]
fn duplicates_are_dropped_orders_enriched_and_each_minute_written_once_it_closes() {
    let topics = Topics::new("");
    let app = app("", &topics, Duration::from_secs(60), Duration::from_secs(5)).unwrap();
    let driver = TestDriver::builder(&app)
        .initial_wall_clock(START)
        .build()
        .unwrap();
    let (orders, profiles) = (
        driver.input(&topics.orders).unwrap(),
        driver.input(&topics.profiles).unwrap(),
    );
    profiles
        .pipe(
            "ann",
            Profile {
                tier: "gold".into(),
                discount: 10,
            },
        )
        .unwrap();
    let placed = [
        order("o1", "ann", "tea", 1_000),
        order("o2", "bob", "tea", 500),
        order("o1", "ann", "tea", 1_000), // a producer's retry
        order("o3", "ann", "cake", 2_000),
    ];
    for (at, order) in placed.iter().enumerate() {
        orders
            .pipe_record(
                TestRecord::new(order.id.clone(), order.clone()).at(START + at as i64 * 1_000),
            )
            .unwrap();
    }
    // The join waits for more profiles before it delivers the orders.
    driver.advance_wall_clock(PROFILE_WAIT).unwrap();
    assert_eq!(
        driver
            .output(&topics.unique_orders)
            .unwrap()
            .read_all()
            .unwrap()
            .len(),
        3
    );
    let enriched: Vec<Enriched> = driver
        .output(&topics.enriched)
        .unwrap()
        .read_values()
        .unwrap();
    let dues: Vec<(&str, Option<&str>, i64)> = enriched
        .iter()
        .map(|sale| (sale.order.id.as_str(), sale.tier.as_deref(), sale.due))
        .collect();
    assert_eq!(
        dues,
        [
            ("o1", Some("gold"), 900),
            ("o2", None, 500),
            ("o3", Some("gold"), 1_800)
        ]
    );
    let revenue = driver.output(&topics.revenue).unwrap();
    assert!(
        revenue.read_all().unwrap().is_empty(),
        "the minute is still open"
    );
    // Past the minute and its grace, by the wall clock alone.
    driver.advance_wall_clock(Duration::from_secs(66)).unwrap();
    let mut closed: Vec<(String, i64, i64)> = revenue
        .read_all()
        .unwrap()
        .into_iter()
        .map(|record| {
            let window = record.key.unwrap();
            (window.key, window.start - START, record.value)
        })
        .collect();
    closed.sort();
    assert_eq!(
        closed,
        [
            ("cake".to_string(), 0, 1_800),
            ("tea".to_string(), 0, 1_400)
        ]
    );
    // A sale for the closed minute is late: it goes to late-sales.
    orders
        .pipe_record(TestRecord::new("o4", order("o4", "bob", "tea", 300)).at(START + 30_000))
        .unwrap();
    let late = driver.output(&topics.late).unwrap().read_values().unwrap();
    assert_eq!(late.len(), 1);
    assert_eq!(late[0].order.id, "o4");
    // The profile changes: later orders see the new one.
    profiles
        .pipe(
            "bob",
            Profile {
                tier: "silver".into(),
                discount: 50,
            },
        )
        .unwrap();
    orders
        .pipe_record(
            TestRecord::new("o5", order("o5", "bob", "tea", 300)).at(START + MINUTE + 70_000),
        )
        .unwrap();
    // The profile, then the order; the join waits for more profiles.
    driver.advance_wall_clock(PROFILE_WAIT).unwrap();
    let last = driver
        .output(&topics.enriched)
        .unwrap()
        .read_values()
        .unwrap()
        .pop()
        .unwrap();
    assert_eq!((last.tier.as_deref(), last.due), (Some("silver"), 150));
}
