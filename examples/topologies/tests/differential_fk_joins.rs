//! Differential test of Parsley's foreign-key joins (J10–J14) against
//! Kafka Streams 4.4.0: the same seeded interleavings of updates and
//! tombstones of a left table (whose value is a foreign key, or `-` for
//! none) and a right table go through Parsley's `TestDriver` (one
//! partition) and through a `TopologyTestDriver` running
//! `left.join(right, foreignKey, …)` or `leftJoin` over two `KTable`
//! sources (record cache off). The two write different records on the
//! way (DESIGN.md: Kafka Streams writes redundant tombstones), so what is
//! compared is the output read as a table at the end of each case, and
//! both must be the join of the final tables. And every record Parsley
//! writes, tombstones included, must be the join's result for its key as
//! of the piped record it answers, or a tombstone when the key has none
//! then. The driver runs each pipe to the end on one partition, so no
//! response is ever stale here: this compares the join's semantics with
//! Kafka Streams', and the simulator (I13) checks the stale responses.
//! The Java side is `differential/kafka-streams/…/ForeignKeyJoins.java`,
//! run by `differential/run.sh fk-joins`; see `differential/README.md`.
//! Built only with the `differential` feature, as it needs `java` and
//! `mvn`:
//!
//! ```text
//! cargo test -p parsley-examples --features differential --test differential -- differential_fk_joins::
//! ```

use crate::differential;

use std::collections::BTreeMap;

use differential::{
    kafka_streams_cases, pipe, read_changes, record_line, test_driver, wandering, Rng,
};
use parsley::JoinKind;
use parsley::{Join, Parsley, Stage, Topic, Utf8, I64};

/// One piped record: left or right table, key, value (`None`: a
/// tombstone; a left value is a foreign key or `-`), timestamp.
#[derive(Clone, Debug)]
struct Piped {
    left: bool,
    key: String,
    value: Option<String>,
    at: i64,
}

/// One output record: key and value (`None`: a tombstone).
type Change = (String, Option<String>);

/// A table read from its records: the latest value per key.
type Table = BTreeMap<String, String>;

const ORDERS: [&str; 6] = ["o1", "o2", "o3", "o4", "o5", "o6"];
const CUSTOMERS: [&str; 4] = ["a", "b", "c", "d"];

/// `records` pipes, each side as likely: left records over `orders` keys
/// naming one of `customers` (one in six none), right records over the
/// customers; a `tombstones` share of them deletes.
fn inputs(
    seed: u64,
    records: usize,
    orders: usize,
    customers: usize,
    tombstones: u64,
) -> Vec<Piped> {
    wandering(seed, records, |rng, at| {
        let left = rng.below(2) == 0;
        let (key, value) = match left {
            true => {
                let key = ORDERS[rng.below(orders as u64) as usize].to_string();
                let value = match rng.below(6) {
                    0 => "-".to_string(),
                    _ => CUSTOMERS[rng.below(customers as u64) as usize].to_string(),
                };
                (key, value)
            }
            false => {
                let customer = CUSTOMERS[rng.below(customers as u64) as usize].to_string();
                (customer, rng.below(1_000).to_string())
            }
        };
        let value = (rng.below(100) >= tombstones).then_some(value);
        Piped {
            left,
            key,
            value,
            at,
        }
    })
}

/// The join's result for `order` over the two tables, as both joiners
/// write it (`customer:tier`, `customer:null` without a right value).
fn joined(kind: JoinKind, lefts: &Table, rights: &Table, order: &str) -> Option<String> {
    let customer = lefts.get(order)?;
    let right = (customer != "-").then(|| rights.get(customer)).flatten();
    match (kind, right) {
        (_, Some(right)) => Some(format!("{customer}:{right}")),
        (JoinKind::Left, None) => Some(format!("{customer}:null")),
        (JoinKind::Inner, None) => None,
    }
}

/// The join of the final tables: each order's result.
fn expected_table(kind: JoinKind, records: &[Piped]) -> Table {
    let (mut lefts, mut rights) = (Table::new(), Table::new());
    for piped in records {
        apply(&mut lefts, &mut rights, piped);
    }
    lefts
        .keys()
        .filter_map(|order| Some((order.clone(), joined(kind, &lefts, &rights, order)?)))
        .collect()
}

fn apply(lefts: &mut Table, rights: &mut Table, piped: &Piped) {
    let table = if piped.left { lefts } else { rights };
    match &piped.value {
        Some(value) => {
            table.insert(piped.key.clone(), value.clone());
        }
        None => {
            table.remove(&piped.key);
        }
    }
}

/// `changes` read as a table.
fn table_of(changes: &[Change]) -> Table {
    let mut table = Table::new();
    for (key, value) in changes {
        match value {
            Some(value) => table.insert(key.clone(), value.clone()),
            None => table.remove(key),
        };
    }
    table
}

/// Parsley's output, and the first record it wrote that is not the join's
/// result for its key as of the piped record that caused it (a stale or
/// wrong result), told.
fn parsley_side(kind: JoinKind, records: &[Piped]) -> (Vec<Change>, Option<String>) {
    let orders = Topic::<String, String>::with_codecs("left", Utf8, Utf8);
    let tiers = Topic::<String, i64>::with_codecs("right", Utf8, I64);
    let out = Topic::<String, String>::with_codecs("out", Utf8, Utf8);
    let join =
        Stage::named("join").join(Join::foreign_key(&orders, &tiers, |customer: &String| {
            (customer != "-").then(|| customer.clone())
        }));
    let builder = match kind {
        JoinKind::Inner => {
            join.inner(|_, customer: &String, tier: &i64| format!("{customer}:{tier}"))
        }
        JoinKind::Left => join.left(|_, customer: &String, tier: Option<&i64>| {
            format!(
                "{customer}:{}",
                tier.map_or("null".to_string(), i64::to_string)
            )
        }),
    };
    let app = Parsley::named("differential")
        .stages(builder.into(&out).build())
        .build()
        .unwrap();
    let driver = test_driver(&app);
    let (lefts_in, rights_in) = (
        driver.input(&orders).unwrap(),
        driver.input(&tiers).unwrap(),
    );
    let output = driver.output(&out).unwrap();
    let (mut lefts, mut rights) = (Table::new(), Table::new());
    let mut changes: Vec<Change> = Vec::new();
    let mut wrong = None;
    for (at, piped) in records.iter().enumerate() {
        let value = piped.value.clone();
        match piped.left {
            true => pipe(&lefts_in, &piped.key, value, piped.at),
            false => pipe(
                &rights_in,
                &piped.key,
                value.map(|tier| tier.parse().unwrap()),
                piped.at,
            ),
        }
        apply(&mut lefts, &mut rights, piped);
        let all: Vec<Change> = read_changes(&output);
        for (order, value) in &all[changes.len()..] {
            let expected = joined(kind, &lefts, &rights, order);
            if wrong.is_none() && *value != expected {
                wrong = Some(format!(
                    "after pipe {at} ({piped:?}) Parsley wrote {order} = {value:?}, when its result is {expected:?}"
                ));
            }
        }
        changes = all;
    }
    (changes, wrong)
}

fn header(kind: JoinKind) -> &'static str {
    match kind {
        JoinKind::Inner => "inner",
        JoinKind::Left => "left",
    }
}

/// Kafka Streams' outputs of `cases`.
fn kafka_streams_side(cases: &[(JoinKind, Vec<Piped>, String)]) -> Vec<Vec<Change>> {
    let cases = cases.iter().map(|(kind, records, _)| {
        let lines = records
            .iter()
            .map(|piped| {
                let side = if piped.left { "l" } else { "r" };
                record_line(side, &piped.key, piped.value.as_ref(), piped.at)
            })
            .collect();
        (header(*kind).to_string(), lines)
    });
    kafka_streams_cases("fk-joins", cases, 3, |line| (line.text(0), line.value(1)))
}

/// The cases: inner and left joins in turn, each with its own seed, length
/// (50–200 pipes), order and customer counts (foreign keys moving between
/// few customers) and share of tombstones (none to 40 %).
fn cases(count: u64) -> Vec<(JoinKind, Vec<Piped>, String)> {
    let mut rng = Rng::new(0xF0_2E16);
    (0..count)
        .map(|seed| {
            let kind = match seed % 2 {
                0 => JoinKind::Inner,
                _ => JoinKind::Left,
            };
            let records = 50 + rng.below(151) as usize;
            let orders = 1 + rng.below(ORDERS.len() as u64) as usize;
            let customers = 1 + rng.below(CUSTOMERS.len() as u64) as usize;
            let tombstones = rng.below(41);
            let name = format!(
                "{kind:?} join, seed {seed}: {records} pipes over {orders} orders and {customers} customers, {tombstones}% tombstones"
            );
            (
                kind,
                inputs(seed, records, orders, customers, tombstones),
                name,
            )
        })
        .collect()
}

/// J14: 200 seeded cases in one Kafka Streams program: the final tables
/// agree with each other and with the join of the final input tables, and
/// Parsley never writes a stale result on the way.
#[test]
fn j14_random_cases_end_in_the_same_table_with_no_stale_result() {
    let cases = cases(200);
    let outputs = kafka_streams_side(&cases);
    let mut differences = Vec::new();
    let (mut written, mut rows) = (0, 0);
    for ((kind, records, name), kafka_streams) in cases.iter().zip(&outputs) {
        let (parsley, wrong) = parsley_side(*kind, records);
        written += parsley.len();
        let expected = expected_table(*kind, records);
        rows += expected.len();
        if let Some(wrong) = wrong {
            differences.push(format!("{name}: {wrong}"));
        }
        let (parsley_table, kafka_table) = (table_of(&parsley), table_of(kafka_streams));
        if parsley_table != expected || kafka_table != expected {
            differences.push(format!(
                "{name}: the final tables differ\nexpected:      {expected:?}\nParsley:       {parsley_table:?}\nKafka Streams: {kafka_table:?}"
            ));
        }
    }
    eprintln!(
        "{} cases: Parsley wrote {written} records, the final tables hold {rows} rows",
        cases.len()
    );
    assert!(
        differences.is_empty(),
        "{} differences; the first:\n{}",
        differences.len(),
        differences[0]
    );
    assert!(written > 5_000 && rows > 300, "too little exercised");
}
