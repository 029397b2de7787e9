//! Differential test of Parsley's stream–table joins (J1, J2) against Kafka
//! Streams 4.4.0: the same seeded interleavings of table updates,
//! tombstones and stream records go through Parsley's `TestDriver` (one
//! partition) and through a `TopologyTestDriver` running
//! `stream.join(table, …)` or `stream.leftJoin(table, …)`, and the outputs
//! (key, value and timestamp) must agree record for record, in order. Both
//! drivers process each piped record before the next, so both read the
//! table in pipe order. The Java side is
//! `differential/kafka-streams/…/Joins.java`, run by `differential/run.sh`;
//! see `differential/README.md`. Built only with the `differential`
//! feature, as it needs `java` and `mvn`:
//!
//! ```text
//! cargo test -p parsley-examples --features differential --test differential -- differential_joins::
//! ```

use crate::differential;
use parsley::Stage;

use differential::{
    assert_agree, differences, join_cases, kafka_streams_cases, pipe, read_records, record_line,
    test_driver, wandering,
};
use parsley::mutation::Mutation;
use parsley::{Join, JoinKind};
use parsley::{Parsley, Topic, Utf8, I64};

/// One piped record: table or stream, key, value (`None`: a tombstone),
/// timestamp.
#[derive(Clone, Debug)]
struct Piped {
    table: bool,
    key: String,
    value: Option<i64>,
    at: i64,
}

/// One output record: key, value, timestamp.
type Joined = (String, String, i64);

const KEYS: [&str; 6] = ["a", "b", "c", "d", "e", "f"];

/// `records` pipes over `keys` keys: about two in five are table records,
/// a `tombstones` share of those deletes; timestamps wander back and forth,
/// as the join reads the table in pipe order whatever they say.
fn inputs(seed: u64, records: usize, keys: usize, tombstones: u64) -> Vec<Piped> {
    wandering(seed, records, |rng, at| {
        let table = rng.below(5) < 2;
        let key = KEYS[rng.below(keys as u64) as usize].to_string();
        let value = match table && rng.below(100) < tombstones {
            true => None,
            false => Some(rng.below(1_000) as i64),
        };
        Piped {
            table,
            key,
            value,
            at,
        }
    })
}

fn joiner(order: i64, discount: Option<&i64>) -> String {
    match discount {
        Some(discount) => format!("{order}:{discount}"),
        None => format!("{order}:null"),
    }
}

fn parsley_side(kind: JoinKind, records: &[Piped]) -> Vec<Joined> {
    let orders = Topic::<String, i64>::with_codecs("orders", Utf8, I64);
    let discounts = Topic::<String, i64>::with_codecs("discounts", Utf8, I64);
    let out = Topic::<String, String>::with_codecs("out", Utf8, Utf8);
    let join = Stage::named("join").join(Join::stream_table(&orders, &discounts));
    let stage = match kind {
        JoinKind::Inner => join
            .inner(|order, discount: &i64| joiner(*order.value(), Some(discount)))
            .into(&out)
            .build(),
        JoinKind::Left => join
            .left(|order, discount: Option<&i64>| joiner(*order.value(), discount))
            .into(&out)
            .build(),
    };
    let app = Parsley::named("differential").stage(stage).build().unwrap();
    let driver = test_driver(&app);
    let (table, stream) = (
        driver.input(&discounts).unwrap(),
        driver.input(&orders).unwrap(),
    );
    for piped in records {
        let input = match piped.table {
            true => &table,
            false => &stream,
        };
        pipe(input, &piped.key, piped.value, piped.at);
    }
    read_records(&driver, &out)
}

fn kafka_streams_side(cases: &[(JoinKind, Vec<Piped>, String)]) -> Vec<Vec<Joined>> {
    let cases = cases.iter().map(|(kind, records, _)| {
        let header = match kind {
            JoinKind::Inner => "inner",
            JoinKind::Left => "left",
        };
        let lines = records
            .iter()
            .map(|piped| {
                let side = if piped.table { "t" } else { "s" };
                record_line(side, &piped.key, piped.value, piped.at)
            })
            .collect();
        (header.to_string(), lines)
    });
    kafka_streams_cases("joins", cases, 3, |line| {
        (line.text(0), line.text(1), line.number(2))
    })
}

/// The cases: inner and left joins alternately, each with its own seed,
/// length (50–250 pipes), key count (one to six: key churn) and share of
/// tombstones (none to a half of the table records).
fn cases(count: u64) -> Vec<(JoinKind, Vec<Piped>, String)> {
    join_cases(0x501E, count, &[JoinKind::Inner, JoinKind::Left], inputs)
}

/// Runs `cases` through both sides; the differences, told.
fn compare(cases: &[(JoinKind, Vec<Piped>, String)]) -> (Vec<String>, usize) {
    let outputs = kafka_streams_side(cases);
    let joined = outputs.iter().map(Vec::len).sum();
    (differences(cases, &outputs, parsley_side), joined)
}

/// 300 seeded cases in one Kafka Streams program: every output agrees.
#[test]
fn random_cases_agree() {
    let cases = cases(300);
    let tombstones: usize = cases
        .iter()
        .flat_map(|(_, records, _)| records)
        .filter(|piped| piped.value.is_none())
        .count();
    let (differences, joined) = compare(&cases);
    eprintln!(
        "{} cases: {tombstones} tombstones in, {joined} joined records out",
        cases.len()
    );
    assert_agree(&differences, cases.len());
    assert!(
        tombstones > 1_000 && joined > 10_000,
        "too little exercised"
    );
}

/// The comparison sees a planted bug in Parsley's table: with tombstones
/// ignored or updates dropped, outputs differ from Kafka Streams'.
#[test]
fn planted_table_bugs_are_caught() {
    let cases = cases(20);
    for planted in [Mutation::JoinIgnoresTombstones, Mutation::JoinKeepsStaleRow] {
        let (differences, _) = differential::planted(planted, || compare(&cases));
        differential::assert_caught(planted, &differences);
    }
}
