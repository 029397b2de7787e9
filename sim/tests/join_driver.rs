//! Stream–table joins (J1–J4) under the `TestDriver`, the way a Kafka
//! Streams user tests `stream.leftJoin(table, …)`: pipe table records and
//! tombstones, pipe stream records, read the results and the table back.
//! The application is not an example: shipments fan out to two joins over
//! two tables, labels (a left join with each warehouse's address) and
//! costs (an inner join with each warehouse's rate), and a third stage
//! sums the costs per warehouse.

use parsley::Join;
use parsley::{App, Claim, Json, Parsley, Stage, Stamp, Step, Topic, Utf8, I64};
use parsley_sim::{DriverError, TestDriver, TestRecord};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Address {
    city: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Label {
    parcels: i64,
    city: Option<String>,
}

struct Shipping {
    /// Shipments, keyed by warehouse; the value is the parcel count.
    shipments: Topic<String, i64>,
    addresses: Topic<String, Address>,
    rates: Topic<String, i64>,
    labels: Topic<String, Label>,
    costs: Topic<String, i64>,
    totals: Topic<String, i64>,
    app: App,
}

fn shipping() -> Shipping {
    let long = |name: &str| Topic::<String, i64>::with_codecs(name, Utf8, I64);
    let shipments = long("shipments");
    let addresses = Topic::<String, Address>::with_codecs("warehouse-addresses", Utf8, Json);
    let rates = long("warehouse-rates");
    let labels = Topic::<String, Label>::with_codecs("labels", Utf8, Json);
    let costs = long("costs");
    let totals = long("cost-totals");
    let labelling = Stage::named("labelling")
        .join(Join::stream_table(&shipments, &addresses))
        .left(|shipment, address: Option<&Address>| Label {
            parcels: *shipment.value(),
            city: address.map(|address| address.city.clone()),
        })
        .into(&labels)
        .build();
    let costing = Stage::named("costing")
        .join(Join::stream_table(&shipments, &rates))
        .inner(|shipment, rate: &i64| shipment.value() * rate)
        .into(&costs)
        .build();
    let totalling = Stage::named("totalling")
        .state(Json, || 0i64)
        .on(&costs, {
            let totals = totals.clone();
            move |total: i64, cost| {
                let total = total + cost.value();
                Step::of(total).emit(totals.send(cost.key().cloned(), total))
            }
        })
        .into(&totals)
        .build();
    let app = Parsley::named("shipping")
        .stage(labelling)
        .stage(costing)
        .stage(totalling)
        .build()
        .unwrap();
    Shipping {
        shipments,
        addresses,
        rates,
        labels,
        costs,
        totals,
        app,
    }
}

fn driver(shipping: &Shipping) -> TestDriver {
    TestDriver::builder(&shipping.app)
        .default_partitions(2)
        .build()
        .unwrap()
}

fn address(city: &str) -> Address {
    Address {
        city: city.to_string(),
    }
}

fn label(parcels: i64, city: Option<&str>) -> Label {
    Label {
        parcels,
        city: city.map(str::to_string),
    }
}

/// J1, J2: a shipment is labelled with its warehouse's latest address; an
/// update replaces the row, and the driver reads the table back.
#[test]
fn j1_j2_a_shipment_is_joined_with_its_keys_latest_row() {
    let shipping = shipping();
    let driver = driver(&shipping);
    let addresses = driver.input(&shipping.addresses).unwrap();
    let shipments = driver.input(&shipping.shipments).unwrap();
    addresses.pipe("north", address("Oslo")).unwrap();
    addresses.pipe("south", address("Seville")).unwrap();
    shipments.pipe("north", 3).unwrap();
    addresses.pipe("north", address("Bergen")).unwrap();
    shipments.pipe("north", 4).unwrap();
    shipments.pipe("south", 5).unwrap();
    let labels = driver
        .output(&shipping.labels)
        .unwrap()
        .read_values()
        .unwrap();
    assert_eq!(
        labels,
        [
            label(3, Some("Oslo")),
            label(4, Some("Bergen")),
            label(5, Some("Seville"))
        ]
    );
    assert_eq!(
        driver.table("labelling", &shipping.addresses).unwrap(),
        [
            ("north".to_string(), address("Bergen")),
            ("south".to_string(), address("Seville"))
        ]
    );
}

/// J2: without a row, the left join labels with `None` and the inner join
/// writes nothing; the fold downstream sees only what was joined.
#[test]
fn j2_without_a_row_left_joins_none_and_inner_writes_nothing() {
    let shipping = shipping();
    let driver = driver(&shipping);
    let shipments = driver.input(&shipping.shipments).unwrap();
    driver
        .input(&shipping.rates)
        .unwrap()
        .pipe("east", 10)
        .unwrap();
    shipments.pipe("west", 2).unwrap();
    shipments.pipe("east", 3).unwrap();
    shipments.pipe("east", 1).unwrap();
    let labels = driver.output(&shipping.labels).unwrap();
    assert_eq!(
        labels.read_key_values_to_list().unwrap(),
        [
            (Some("west".to_string()), label(2, None)),
            (Some("east".to_string()), label(3, None)),
            (Some("east".to_string()), label(1, None)),
        ]
    );
    let costs = driver.output(&shipping.costs).unwrap();
    assert_eq!(
        costs.read_key_values_to_list().unwrap(),
        [
            (Some("east".to_string()), 30),
            (Some("east".to_string()), 10)
        ]
    );
    let totals = driver.output(&shipping.totals).unwrap();
    assert_eq!(totals.read_values().unwrap(), [30, 40]);
}

/// J1: a tombstone (`pipe_tombstone`, Kafka Streams' `pipeInput(key,
/// null)`) deletes the row: later shipments are joined as if it never was.
#[test]
fn j1_a_tombstone_deletes_the_row() {
    let shipping = shipping();
    let driver = driver(&shipping);
    let addresses = driver.input(&shipping.addresses).unwrap();
    let rates = driver.input(&shipping.rates).unwrap();
    let shipments = driver.input(&shipping.shipments).unwrap();
    addresses.pipe("north", address("Oslo")).unwrap();
    rates.pipe("north", 7).unwrap();
    shipments.pipe("north", 1).unwrap();
    addresses.pipe_tombstone("north").unwrap();
    rates.pipe_tombstone("north").unwrap();
    shipments.pipe("north", 2).unwrap();
    assert_eq!(
        driver
            .output(&shipping.labels)
            .unwrap()
            .read_values()
            .unwrap(),
        [label(1, Some("Oslo")), label(2, None)]
    );
    assert_eq!(
        driver
            .output(&shipping.costs)
            .unwrap()
            .read_values()
            .unwrap(),
        [7]
    );
    assert!(driver
        .table("labelling", &shipping.addresses)
        .unwrap()
        .is_empty());
    assert!(driver.table("costing", &shipping.rates).unwrap().is_empty());
}

/// J2, J3: a join reads the table as its task has delivered it. An
/// address update not yet delivered (its topic paused) is not seen by a
/// plain shipment — the race Kafka Streams' stream–table joins have — but a
/// shipment whose stamp claims the update (as a `CausalClock` producer that
/// wrote the update first would stamp it) is held until the update is
/// delivered, and joined with it.
#[test]
fn j3_a_shipment_claiming_an_update_is_joined_with_it() {
    let shipping = shipping();
    let driver = driver(&shipping);
    let addresses = driver.input(&shipping.addresses).unwrap();
    let shipments = driver.input(&shipping.shipments).unwrap();
    addresses.pipe("north", address("Oslo")).unwrap();
    driver.pause(shipping.addresses.name().as_str());
    let (update_tp, update_offset) = addresses
        .pipe_record(TestRecord::new("north", address("Bergen")))
        .unwrap();
    shipments.pipe("north", 1).unwrap();
    let labels = driver.output(&shipping.labels).unwrap();
    assert_eq!(
        labels.read_values_to_list().unwrap(),
        [label(1, Some("Oslo"))]
    );
    let claim = Stamp::from_claims(vec![Claim::new(update_tp, update_offset)]);
    shipments
        .pipe_record(TestRecord::new("north", 2).stamped(claim))
        .unwrap();
    assert!(labels.is_empty(), "held behind the update it claims");
    driver.resume(shipping.addresses.name().as_str()).unwrap();
    assert_eq!(
        labels.read_values_to_list().unwrap(),
        [label(2, Some("Bergen"))]
    );
}

/// X1, S5: the table is state: a restarted application restores it from
/// the join's changelog and joins as before.
#[test]
fn x1_a_restart_keeps_the_table() {
    let shipping = shipping();
    let driver = driver(&shipping);
    driver
        .input(&shipping.addresses)
        .unwrap()
        .pipe("north", address("Oslo"))
        .unwrap();
    driver.restart().unwrap();
    driver
        .input(&shipping.shipments)
        .unwrap()
        .pipe("north", 6)
        .unwrap();
    assert_eq!(
        driver
            .output(&shipping.labels)
            .unwrap()
            .read_values()
            .unwrap(),
        [label(6, Some("Oslo"))]
    );
}

/// J4, C3: a table with another partition count than its stream is refused
/// when the driver assembles the application, naming both and the fix.
#[test]
fn j4_a_table_not_co_partitioned_with_its_stream_is_refused() {
    let shipping = shipping();
    let error = TestDriver::builder(&shipping.app)
        .default_partitions(2)
        .partitions("warehouse-rates", 3)
        .build()
        .err()
        .expect("assembly refuses the join");
    let message = error.to_string();
    assert!(
        message.contains("\"warehouse-rates\"")
            && message
                .contains("costing, which must be co-partitioned with its stream shipments (J4)")
            && message.contains("re-key"),
        "{message}"
    );
}

/// The table is read only from a join, with its value type.
#[test]
fn the_table_is_refused_for_other_stages_and_types() {
    let shipping = shipping();
    let driver = driver(&shipping);
    let not_a_join = driver.table("totalling", &shipping.costs).unwrap_err();
    assert!(
        matches!(not_a_join, DriverError::NotAJoin { .. }),
        "{not_a_join}"
    );
    let wrong_type = driver.table("labelling", &shipping.rates).unwrap_err();
    assert!(
        matches!(wrong_type, DriverError::WrongStateType { .. }),
        "{wrong_type}"
    );
}
