//! G9 under the `TestDriver`: a stream–table join that delivers in
//! timestamp order and waits a bounded time for its table, as Kafka
//! Streams' `max.task.idle.ms` makes a `KStream.leftJoin(KTable)` wait.
//! The application is not an example: clicks joined with each user's
//! tier, and the same join unsynchronised beside it for contrast.
//! `TestDriver::pause` stands for a table whose records the consumer has
//! not fetched yet while its log has them.

use std::time::Duration;

use parsley::join::Join;
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
        format!("{}:{}", click.value, tier.map_or("none", String::as_str))
    };
    let synchronised = Join::stream_table("tiering", &clicks, &tiers)
        .left(joiner)
        .synchronise_by_timestamp(MAX_IDLE)
        .into(&tiered)
        .build();
    let plain = Join::stream_table("racing", &clicks, &tiers)
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
    TestDriver::builder(&tiering.app)
        .initial_wall_clock(T0)
        .default_partitions(1)
        .build()
        .unwrap()
}

fn values(driver: &TestDriver, topic: &Topic<String, String>) -> Vec<String> {
    driver.output(topic).unwrap().read_values().unwrap()
}

/// G9: a click whose table is behind (records in its log not fetched yet)
/// waits for it; once the table's records arrive, the click is joined with
/// the tier as of its timestamp: updates of a lower timestamp go first,
/// later ones after it. The plain join has joined it already, with none.
#[test]
fn g9_a_click_waits_for_its_table_and_joins_the_tier_as_of_its_time() {
    let tiering = tiering();
    let driver = driver(&tiering);
    let (clicks, tiers) = (
        driver.input(&tiering.clicks).unwrap(),
        driver.input(&tiering.tiers).unwrap(),
    );
    tiers.pipe("ann", "bronze").unwrap();
    assert!(values(&driver, &tiering.tiered).is_empty());
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
    assert!(
        values(&driver, &tiering.tiered).is_empty(),
        "waits for tiers"
    );
    assert_eq!(values(&driver, &tiering.raced), ["c1:bronze"]);
    driver.resume("tiers").unwrap();
    assert_eq!(values(&driver, &tiering.tiered), ["c1:gold"]);
    assert_eq!(
        driver.table("tiering", &tiering.tiers).unwrap(),
        [("ann".to_string(), "platinum".to_string())]
    );
}

/// G9: the wait is bounded: after max idle of wall-clock time without the
/// table's records, the click is joined with the table as it is. While the
/// table stays behind, later clicks do not wait again (Kafka Streams keeps
/// one idle deadline per partition until it has records); once the table's
/// records came and it fell behind again, a new wait begins.
#[test]
fn g9_the_wait_for_a_table_ends_after_max_idle() {
    let tiering = tiering();
    let driver = driver(&tiering);
    let (clicks, tiers) = (
        driver.input(&tiering.clicks).unwrap(),
        driver.input(&tiering.tiers).unwrap(),
    );
    tiers.pipe("ann", "bronze").unwrap();
    driver.pause("tiers");
    tiers
        .pipe_record(TestRecord::new("ann", "gold").at(T0 + 100))
        .unwrap();
    clicks
        .pipe_record(TestRecord::new("ann", "c1").at(T0 + 200))
        .unwrap();
    driver
        .advance_wall_clock(MAX_IDLE - Duration::from_millis(1))
        .unwrap();
    assert!(
        values(&driver, &tiering.tiered).is_empty(),
        "still within max idle"
    );
    driver.advance_wall_clock(Duration::from_millis(1)).unwrap();
    assert_eq!(values(&driver, &tiering.tiered), ["c1:bronze"]);
    clicks
        .pipe_record(TestRecord::new("ann", "c2").at(T0 + 300))
        .unwrap();
    assert_eq!(values(&driver, &tiering.tiered), ["c1:bronze", "c2:bronze"]);

    driver.resume("tiers").unwrap();
    driver.pause("tiers");
    tiers
        .pipe_record(TestRecord::new("ann", "platinum").at(T0 + 400))
        .unwrap();
    clicks
        .pipe_record(TestRecord::new("ann", "c3").at(T0 + 500))
        .unwrap();
    assert_eq!(
        values(&driver, &tiering.tiered),
        ["c1:bronze", "c2:bronze"],
        "a new wait"
    );
    driver.resume("tiers").unwrap();
    assert_eq!(
        values(&driver, &tiering.tiered),
        ["c1:bronze", "c2:bronze", "c3:platinum"]
    );
}

/// G9: a table that is caught up is not waited for.
#[test]
fn g9_a_caught_up_table_is_not_waited_for() {
    let tiering = tiering();
    let driver = driver(&tiering);
    let (clicks, tiers) = (
        driver.input(&tiering.clicks).unwrap(),
        driver.input(&tiering.tiers).unwrap(),
    );
    tiers.pipe("ann", "gold").unwrap();
    clicks.pipe("ann", "c1").unwrap();
    assert_eq!(values(&driver, &tiering.tiered), ["c1:gold"]);
}
