//! Table–table joins (J8, J9) under the `TestDriver`, the way a Kafka
//! Streams user tests `users.leftJoin(plans, …)` over two `KTable`s: pipe
//! updates and tombstones to both tables, read the output as changes and
//! as a table. The application is not an example: a streaming service
//! keeps, for each user, their latest plan name joined with the plan's
//! latest price override (a left join: a user without an override pays
//! the list price), and the users who have both a device and a plan (an
//! inner join).

use parsley::Stage;
use std::collections::HashMap;

use parsley::Join;
use parsley::{App, CompositionError, Parsley, Topic, Utf8, I64};
use parsley_sim::{DriverError, TestDriver};

struct Service {
    plans: Topic<String, String>,
    prices: Topic<String, i64>,
    devices: Topic<String, String>,
    billed: Topic<String, String>,
    streaming: Topic<String, String>,
    app: App,
}

fn service() -> Service {
    let plans = Topic::<String, String>::with_codecs("user-plans", Utf8, Utf8);
    let prices = Topic::<String, i64>::with_codecs("user-prices", Utf8, I64);
    let devices = Topic::<String, String>::with_codecs("user-devices", Utf8, Utf8);
    let billed = Topic::<String, String>::with_codecs("billed", Utf8, Utf8);
    let streaming = Topic::<String, String>::with_codecs("streaming", Utf8, Utf8);
    let billing = Stage::named("billing")
        .join(Join::table_table(&plans, &prices))
        .left(|_user, plan: &String, price: Option<&i64>| match price {
            Some(price) => format!("{plan} at {price}"),
            None => format!("{plan} at list price"),
        })
        .into(&billed)
        .build();
    let watching = Stage::named("watching")
        .join(Join::table_table(&devices, &plans))
        .inner(|_user, device: &String, plan: &String| format!("{plan} on {device}"))
        .into(&streaming)
        .build();
    let app = Parsley::named("service")
        .stage(billing)
        .stage(watching)
        .build()
        .unwrap();
    Service {
        plans,
        prices,
        devices,
        billed,
        streaming,
        app,
    }
}

fn driver(service: &Service) -> TestDriver {
    TestDriver::builder(&service.app)
        .default_partitions(2)
        .build()
        .unwrap()
}

fn change(user: &str, value: Option<&str>) -> (Option<String>, Option<String>) {
    (Some(user.to_string()), value.map(str::to_string))
}

fn changes(
    output: &parsley_sim::TestOutputTopic<String, String>,
) -> Vec<(Option<String>, Option<String>)> {
    output
        .read_changes()
        .unwrap()
        .into_iter()
        .map(|record| (record.key, record.value))
        .collect()
}

/// J8: an update of either table rewrites the user's result; a left join
/// writes a user without a price override at list price, and losing the
/// override rewrites it so.
#[test]
fn j8_either_side_rewrites_the_left_join() {
    let service = service();
    let driver = driver(&service);
    let plans = driver.input(&service.plans).unwrap();
    let prices = driver.input(&service.prices).unwrap();
    let billed = driver.output(&service.billed).unwrap();
    prices.pipe("ana", 5).unwrap();
    assert!(changes(&billed).is_empty(), "ana has no plan yet");
    plans.pipe("ana", "basic").unwrap();
    plans.pipe("ben", "family").unwrap();
    prices.pipe("ana", 7).unwrap();
    prices.pipe_tombstone("ana").unwrap();
    assert_eq!(
        changes(&billed),
        [
            change("ana", Some("basic at 5")),
            change("ben", Some("family at list price")),
            change("ana", Some("basic at 7")),
            change("ana", Some("basic at list price")),
        ]
    );
}

/// J8: a user losing their plan loses their left-join result: one
/// tombstone, read as `None`, and the output read as a table no longer has
/// them; deleting again writes nothing.
#[test]
fn j8_losing_the_left_side_writes_one_tombstone() {
    let service = service();
    let driver = driver(&service);
    let plans = driver.input(&service.plans).unwrap();
    let billed = driver.output(&service.billed).unwrap();
    plans.pipe("ana", "basic").unwrap();
    plans.pipe("ben", "family").unwrap();
    plans.pipe_tombstone("ana").unwrap();
    plans.pipe_tombstone("ana").unwrap();
    plans.pipe_tombstone("cleo").unwrap();
    assert_eq!(
        changes(&billed),
        [
            change("ana", Some("basic at list price")),
            change("ben", Some("family at list price")),
            change("ana", None),
        ]
    );
    assert_eq!(
        billed.read_table().unwrap(),
        HashMap::from([("ben".to_string(), "family at list price".to_string())])
    );
    // The typed reads take values only, and say what they met.
    let refused = billed.read_all().unwrap_err();
    assert!(
        matches!(refused, DriverError::OutputCodec { part: "value", .. }),
        "{refused}"
    );
}

/// J8: an inner join writes a user once they have a device and a plan,
/// rewrites it on either change, and deletes it when either goes; a user
/// with one side only never appears.
#[test]
fn j8_an_inner_join_lives_while_both_sides_do() {
    let service = service();
    let driver = driver(&service);
    let plans = driver.input(&service.plans).unwrap();
    let devices = driver.input(&service.devices).unwrap();
    let streaming = driver.output(&service.streaming).unwrap();
    devices.pipe("ana", "tv").unwrap();
    devices.pipe("dan", "phone").unwrap();
    plans.pipe("ana", "basic").unwrap();
    devices.pipe("ana", "laptop").unwrap();
    plans.pipe_tombstone("ana").unwrap();
    devices.pipe_tombstone("ana").unwrap();
    devices.pipe_tombstone("dan").unwrap();
    assert_eq!(
        changes(&streaming),
        [
            change("ana", Some("basic on tv")),
            change("ana", Some("basic on laptop")),
            change("ana", None),
        ]
    );
    assert!(streaming.read_table().unwrap().is_empty());
    // "dan" lost his only side; nobody is left in the join's tables.
    assert_eq!(
        driver
            .table_sides("watching", &service.devices, &service.plans)
            .unwrap(),
        []
    );
}

/// J8: the join's tables, as its tasks hold them, read from the driver: a
/// side without a value is `None`; a stage that is not a table–table join
/// is refused.
#[test]
fn j8_the_sides_are_readable_from_the_driver() {
    let service = service();
    let driver = driver(&service);
    let plans = driver.input(&service.plans).unwrap();
    let prices = driver.input(&service.prices).unwrap();
    plans.pipe("ana", "basic").unwrap();
    prices.pipe("ben", 3).unwrap();
    prices.pipe("ana", 4).unwrap();
    plans.pipe_tombstone("ana").unwrap();
    assert_eq!(
        driver
            .table_sides("billing", &service.plans, &service.prices)
            .unwrap(),
        [
            ("ana".to_string(), None, Some(4)),
            ("ben".to_string(), None, Some(3)),
        ]
    );
    let wrong = Topic::<String, String>::with_codecs("x", Utf8, Utf8);
    assert!(matches!(
        driver.table_sides("nowhere", &wrong, &wrong),
        Err(DriverError::UnknownStage { .. })
    ));
    let stream_table = Stage::named("pricing")
        .join(Join::stream_table(&service.plans, &service.prices))
        .inner(|plan, price: &i64| format!("{} at {price}", plan.value()))
        .into(&service.billed)
        .build();
    let app = Parsley::named("other").stage(stream_table).build().unwrap();
    let other = TestDriver::new(&app).unwrap();
    assert!(matches!(
        other.table_sides("pricing", &service.plans, &service.prices),
        Err(DriverError::NotATableJoin { .. })
    ));
}

/// J8: the sides are state: after a restart a deletion still finds the
/// side it removes, and writes the result without it.
#[test]
fn j8_a_restarted_task_keeps_both_sides() {
    let service = service();
    let driver = driver(&service);
    let plans = driver.input(&service.plans).unwrap();
    let prices = driver.input(&service.prices).unwrap();
    let billed = driver.output(&service.billed).unwrap();
    plans.pipe("ana", "basic").unwrap();
    prices.pipe("ana", 9).unwrap();
    driver.restart().unwrap();
    assert_eq!(
        driver
            .table_sides("billing", &service.plans, &service.prices)
            .unwrap(),
        [("ana".to_string(), Some("basic".to_string()), Some(9))],
        "restored from the changelog"
    );
    prices.pipe_tombstone("ana").unwrap();
    assert_eq!(
        changes(&billed).last(),
        Some(&change("ana", Some("basic at list price")))
    );
}

/// J9: a record without a key stops the join's task, naming J9.
#[test]
fn j9_a_record_without_a_key_is_refused() {
    let service = service();
    let driver = driver(&service);
    let plans = driver.input(&service.plans).unwrap();
    let _ = plans.pipe(None, "basic");
    let stopped = driver.stopped_tasks();
    assert!(
        stopped.iter().any(|error| error.to_string().contains("J9")),
        "{stopped:?}"
    );
}

/// J9: one topic as both tables is refused when the application is built.
#[test]
fn j9_one_topic_as_both_sides_is_refused() {
    let plans = Topic::<String, String>::with_codecs("user-plans", Utf8, Utf8);
    let stage = Stage::named("self")
        .join(Join::table_table(&plans, &plans))
        .inner(|_, a: &String, b: &String| format!("{a}{b}"))
        .into(&plans)
        .build();
    let error = Parsley::named("service").stage(stage).build().unwrap_err();
    assert!(
        matches!(
            error,
            CompositionError::ImpossibleOperator { rules: "J9", .. }
        ),
        "{error}"
    );
    assert!(error.to_string().contains("J9"), "{error}");
}

/// J4: tables with different partition counts are refused before anything
/// runs, naming the fix.
#[test]
fn j4_tables_not_co_partitioned_are_refused() {
    let service = service();
    let error = TestDriver::builder(&service.app)
        .default_partitions(2)
        .partitions("user-prices", 3)
        .build()
        .err()
        .expect("not co-partitioned");
    let message = error.to_string();
    assert!(
        message.contains("user-prices") && message.contains("J4") && message.contains("re-key"),
        "{message}"
    );
}
