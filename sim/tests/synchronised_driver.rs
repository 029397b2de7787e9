//! G9 under the `TestDriver`: a stream–table join that delivers in
//! timestamp order and waits a bounded time for its table, as Kafka
//! Streams' `max.task.idle.ms` makes a `KStream.leftJoin(KTable)` wait.
//! The application is not an example: clicks joined with each user's
//! tier, and the same join unsynchronised beside it for contrast.
//! `TestDriver::pause` stands for a table whose records the consumer has
//! not fetched yet while its log has them; `advance_wall_clock` lets a
//! wait for a caught-up source run out.

use parsley::Stage;
use std::time::Duration;

use crate::support::one_partition_driver;
use parsley::Join;
use parsley::{App, Parsley, Topic, Utf8};
use parsley_sim::{TestDriver, TestRecord};

const MAX_IDLE: Duration = Duration::from_secs(2);
const T0: i64 = 1_700_000_000_000;

struct Tiering {
    clicks: Topic<String, String>,
    tiers: Topic<String, String>,
    /// From the synchronised join.
    tiered: Topic<String, String>,
    /// From the plain join over the same topics.
    raced: Topic<String, String>,
    app: App,
}

fn tiering() -> Tiering {
    let text = |name: &str| Topic::<String, String>::with_codecs(name, Utf8, Utf8);
    let (clicks, tiers, tiered, raced) =
        (text("clicks"), text("tiers"), text("tiered"), text("raced"));
    let joiner = |click: &parsley::Record<String, String>, tier: Option<&String>| {
        format!("{}:{}", click.value(), tier.map_or("none", String::as_str))
    };
    let synchronised = Stage::named("tiering")
        .join(Join::stream_table(&clicks, &tiers))
        .left(joiner)
        .synchronise_by_timestamp(MAX_IDLE)
        .into(&tiered)
        .build();
    let plain = Stage::named("racing")
        .join(Join::stream_table(&clicks, &tiers))
        .left(joiner)
        .into(&raced)
        .build();
    let app = Parsley::named("tiers")
        .stage(synchronised)
        .stage(plain)
        .build()
        .unwrap();
    Tiering {
        clicks,
        tiers,
        tiered,
        raced,
        app,
    }
}

fn driver(tiering: &Tiering) -> TestDriver {
    one_partition_driver(&tiering.app, T0)
}

fn values(driver: &TestDriver, topic: &Topic<String, String>) -> Vec<String> {
    driver.output(topic).unwrap().read_values().unwrap()
}

/// G9: a click whose table is behind (records in its log not fetched yet)
/// waits for it, however long; once the table's records arrive, the click
/// is joined with the tier as of its timestamp: updates of a lower
/// timestamp go first, later ones after it. The plain join has joined it
/// already, with the tier it had.
#[test]
fn g9_a_click_waits_for_its_table_and_joins_the_tier_as_of_its_time() {
    let tiering = tiering();
    let driver = driver(&tiering);
    let (clicks, tiers) = (
        driver.input(&tiering.clicks).unwrap(),
        driver.input(&tiering.tiers).unwrap(),
    );
    tiers
        .pipe_record(TestRecord::new("ann", "bronze").at(T0))
        .unwrap();
    // Clicks is caught up and empty: the tier waits max idle for clicks.
    assert!(driver.table("tiering", &tiering.tiers).unwrap().is_empty());
    driver.advance_wall_clock(MAX_IDLE).unwrap();
    assert_eq!(
        driver.table("tiering", &tiering.tiers).unwrap(),
        [("ann".to_string(), "bronze".to_string())]
    );
    driver.pause("tiers");
    tiers
        .pipe_record(TestRecord::new("ann", "gold").at(T0 + 100))
        .unwrap();
    tiers
        .pipe_record(TestRecord::new("ann", "platinum").at(T0 + 300))
        .unwrap();
    clicks
        .pipe_record(TestRecord::new("ann", "c1").at(T0 + 200))
        .unwrap();
    driver.advance_wall_clock(10 * MAX_IDLE).unwrap();
    assert!(
        values(&driver, &tiering.tiered).is_empty(),
        "waits for tiers as long as it is behind"
    );
    assert_eq!(values(&driver, &tiering.raced), ["c1:bronze"]);
    driver.resume("tiers").unwrap();
    assert_eq!(values(&driver, &tiering.tiered), ["c1:gold"]);
    // Clicks drained: platinum waits max idle for clicks, then goes.
    assert_eq!(
        driver.table("tiering", &tiering.tiers).unwrap(),
        [("ann".to_string(), "gold".to_string())]
    );
    driver.advance_wall_clock(MAX_IDLE).unwrap();
    assert_eq!(
        driver.table("tiering", &tiering.tiers).unwrap(),
        [("ann".to_string(), "platinum".to_string())]
    );
}

/// G9: a table that is caught up and empty is waited for up to max idle of
/// wall-clock time, for its producers to send more (Kafka Streams'
/// `max.task.idle.ms`); then the click is joined with the table as it is.
/// While the table stays caught up and empty, later clicks do not wait
/// again; once it had records and drained, a new wait begins.
#[test]
fn g9_a_caught_up_table_is_waited_for_up_to_max_idle() {
    let tiering = tiering();
    let driver = driver(&tiering);
    let (clicks, tiers) = (
        driver.input(&tiering.clicks).unwrap(),
        driver.input(&tiering.tiers).unwrap(),
    );
    tiers
        .pipe_record(TestRecord::new("ann", "bronze").at(T0))
        .unwrap();
    driver.advance_wall_clock(MAX_IDLE).unwrap();
    clicks
        .pipe_record(TestRecord::new("ann", "c1").at(T0 + 100))
        .unwrap();
    assert!(values(&driver, &tiering.tiered).is_empty());
    driver
        .advance_wall_clock(MAX_IDLE - Duration::from_millis(1))
        .unwrap();
    assert!(
        values(&driver, &tiering.tiered).is_empty(),
        "within max idle"
    );
    driver.advance_wall_clock(Duration::from_millis(1)).unwrap();
    assert_eq!(values(&driver, &tiering.tiered), ["c1:bronze"]);
    clicks
        .pipe_record(TestRecord::new("ann", "c2").at(T0 + 200))
        .unwrap();
    assert_eq!(values(&driver, &tiering.tiered), ["c1:bronze", "c2:bronze"]);
    tiers
        .pipe_record(TestRecord::new("ann", "gold").at(T0 + 300))
        .unwrap();
    clicks
        .pipe_record(TestRecord::new("ann", "c3").at(T0 + 400))
        .unwrap();
    // Tiers had a record, drained, and is caught up: a new wait.
    assert_eq!(values(&driver, &tiering.tiered), ["c1:bronze", "c2:bronze"]);
    driver.advance_wall_clock(MAX_IDLE).unwrap();
    assert_eq!(
        values(&driver, &tiering.tiered),
        ["c1:bronze", "c2:bronze", "c3:gold"]
    );
}

/// Without G9 nothing waits: the plain join joins each click at once.
#[test]
fn without_g9_a_click_is_joined_at_once() {
    let tiering = tiering();
    let driver = driver(&tiering);
    let (clicks, tiers) = (
        driver.input(&tiering.clicks).unwrap(),
        driver.input(&tiering.tiers).unwrap(),
    );
    tiers.pipe("ann", "gold").unwrap();
    clicks.pipe("ann", "c1").unwrap();
    assert_eq!(values(&driver, &tiering.raced), ["c1:gold"]);
}
