//! Differential test of Parsley's table–table joins (J8) against Kafka
//! Streams 4.4.0: the same seeded interleavings of updates and tombstones
//! of two tables go through Parsley's `TestDriver` (one partition) and
//! through a `TopologyTestDriver` running `left.join(right, …)`,
//! `leftJoin` or `outerJoin` over two `KTable` sources with the record
//! cache on (Kafka Streams' default), and the outputs (key, and value or
//! tombstone) must agree record for record, in order. Both drivers process
//! each piped record before the next. The Java side is
//! `differential/kafka-streams/…/TableJoins.java`, run by
//! `differential/run.sh table-joins`; see `differential/README.md`. Built
//! only with the `differential` feature, as it needs `java` and `mvn`:
//!
//! ```text
//! cargo test -p parsley-examples --features differential --test differential -- differential_table_joins::
//! ```

use crate::differential;
use parsley::Stage;

use differential::{
    assert_agree, assert_caught, differences, join_cases, kafka_streams_cases, pipe, planted,
    read_changes, record_line, test_driver, wandering,
};
use parsley::mutation::Mutation;
use parsley::{Join, TableJoinKind};
use parsley::{Parsley, Topic, Utf8, I64};

/// One piped record: left or right table, key, value (`None`: a
/// tombstone), timestamp.
#[derive(Clone, Debug)]
struct Piped {
    left: bool,
    key: String,
    value: Option<i64>,
    at: i64,
}

/// One output record: key and value (`None`: a tombstone).
type Change = (String, Option<String>);

const KEYS: [&str; 6] = ["a", "b", "c", "d", "e", "f"];

/// `records` pipes over `keys` keys, each side as likely, a `tombstones`
/// share of them deletes; timestamps wander back and forth.
fn inputs(seed: u64, records: usize, keys: usize, tombstones: u64) -> Vec<Piped> {
    wandering(seed, records, |rng, at| {
        let left = rng.below(2) == 0;
        let key = KEYS[rng.below(keys as u64) as usize].to_string();
        let value = match rng.below(100) < tombstones {
            true => None,
            false => Some(rng.below(1_000) as i64),
        };
        Piped {
            left,
            key,
            value,
            at,
        }
    })
}

fn side(value: Option<&i64>) -> String {
    value.map_or("null".to_string(), i64::to_string)
}

fn parsley_side(kind: TableJoinKind, records: &[Piped]) -> Vec<Change> {
    let left = Topic::<String, i64>::with_codecs("left", Utf8, I64);
    let right = Topic::<String, i64>::with_codecs("right", Utf8, I64);
    let out = Topic::<String, String>::with_codecs("out", Utf8, Utf8);
    let join = Stage::named("join").join(Join::table_table(&left, &right));
    let builder = match kind {
        TableJoinKind::Inner => join.inner(|_, l: &i64, r: &i64| format!("{l}:{r}")),
        TableJoinKind::Left => join.left(|_, l: &i64, r: Option<&i64>| format!("{l}:{}", side(r))),
        TableJoinKind::Outer => {
            join.outer(|_, l: Option<&i64>, r: Option<&i64>| format!("{}:{}", side(l), side(r)))
        }
    };
    let app = Parsley::named("differential")
        .stage(builder.into(&out).build())
        .build()
        .unwrap();
    let driver = test_driver(&app);
    let (lefts, rights) = (driver.input(&left).unwrap(), driver.input(&right).unwrap());
    for piped in records {
        let input = match piped.left {
            true => &lefts,
            false => &rights,
        };
        pipe(input, &piped.key, piped.value, piped.at);
    }
    read_changes(&driver.output(&out).unwrap())
}

fn header(kind: TableJoinKind) -> &'static str {
    match kind {
        TableJoinKind::Inner => "inner",
        TableJoinKind::Left => "left",
        TableJoinKind::Outer => "outer",
    }
}

/// Kafka Streams' outputs of `cases`, with the record cache on (its
/// default) or off.
fn kafka_streams_side(
    cases: &[(TableJoinKind, Vec<Piped>, String)],
    cache: bool,
) -> Vec<Vec<Change>> {
    let cases = cases.iter().map(|(kind, records, _)| {
        let header = format!("{}{}", header(*kind), if cache { " cache" } else { "" });
        let lines = records
            .iter()
            .map(|piped| {
                let side = if piped.left { "l" } else { "r" };
                record_line(side, &piped.key, piped.value, piped.at)
            })
            .collect();
        (header, lines)
    });
    kafka_streams_cases("table-joins", cases, 3, |line| {
        (line.text(0), line.value(1))
    })
}

/// The cases: inner, left and outer joins in turn, each with its own seed,
/// length (50–250 pipes), key count (one to six: key churn) and share of
/// tombstones (none to a half).
fn cases(count: u64) -> Vec<(TableJoinKind, Vec<Piped>, String)> {
    let kinds = [
        TableJoinKind::Inner,
        TableJoinKind::Left,
        TableJoinKind::Outer,
    ];
    join_cases(0x7AB1E, count, &kinds, inputs)
}

/// Runs `cases` through both sides; the differences, told, and the number
/// of results and of tombstones Kafka Streams wrote.
fn compare(cases: &[(TableJoinKind, Vec<Piped>, String)]) -> (Vec<String>, usize, usize) {
    let outputs = kafka_streams_side(cases, true);
    let results = outputs.iter().map(Vec::len).sum();
    let tombstones = outputs
        .iter()
        .flatten()
        .filter(|(_, value)| value.is_none())
        .count();
    (
        differences(cases, &outputs, parsley_side),
        results,
        tombstones,
    )
}

/// 300 seeded cases in one Kafka Streams program: every output agrees.
#[test]
fn random_cases_agree() {
    let cases = cases(300);
    let (differences, results, tombstones) = compare(&cases);
    eprintln!(
        "{} cases: {results} records out, {tombstones} of them tombstones",
        cases.len()
    );
    assert_agree(&differences, cases.len());
    assert!(
        tombstones > 1_000 && results > 10_000,
        "too little exercised"
    );
}

fn piped(left: bool, key: &str, value: Option<i64>, at: i64) -> Piped {
    Piped {
        left,
        key: key.to_string(),
        value,
        at,
    }
}

fn change(key: &str, value: Option<&str>) -> Change {
    (key.to_string(), value.map(str::to_string))
}

/// The designed difference (DESIGN.md): a tombstone for a side without a
/// value changes nothing and writes nothing in Parsley (J8), as in Kafka
/// Streams with its record cache on; with the cache off, Kafka Streams
/// writes the key's result again (or a tombstone, for a key without one)
/// whenever the other side has a value.
#[test]
fn j8_a_tombstone_for_a_missing_side_differs_as_designed() {
    // "a" has a right side only; "b" has both, and loses its left twice.
    let records = vec![
        piped(false, "a", Some(5), 10),
        piped(true, "a", None, 20),
        piped(true, "b", Some(1), 30),
        piped(false, "b", Some(2), 40),
        piped(true, "b", None, 50),
        piped(true, "b", None, 60),
    ];
    let expected = [
        (
            TableJoinKind::Inner,
            vec![change("b", Some("1:2")), change("b", None)],
            vec![
                change("a", None),
                change("b", Some("1:2")),
                change("b", None),
                change("b", None),
            ],
        ),
        (
            TableJoinKind::Outer,
            vec![
                change("a", Some("null:5")),
                change("b", Some("1:null")),
                change("b", Some("1:2")),
                change("b", Some("null:2")),
            ],
            vec![
                change("a", Some("null:5")),
                change("a", Some("null:5")),
                change("b", Some("1:null")),
                change("b", Some("1:2")),
                change("b", Some("null:2")),
                change("b", Some("null:2")),
            ],
        ),
    ];
    let cases: Vec<(TableJoinKind, Vec<Piped>, String)> = expected
        .iter()
        .map(|(kind, _, _)| (*kind, records.clone(), format!("{kind:?}")))
        .collect();
    let cached = kafka_streams_side(&cases, true);
    let uncached = kafka_streams_side(&cases, false);
    for (at, (kind, parsley_rule, uncached_rule)) in expected.iter().enumerate() {
        assert_eq!(
            &parsley_side(*kind, &records),
            parsley_rule,
            "{kind:?}: Parsley"
        );
        assert_eq!(
            &cached[at], parsley_rule,
            "{kind:?}: Kafka Streams, cache on"
        );
        assert_eq!(
            &uncached[at], uncached_rule,
            "{kind:?}: Kafka Streams, cache off"
        );
    }
}

/// The comparison sees the planted bug: with no tombstone when a deletion
/// removes a result, outputs differ from Kafka Streams'.
#[test]
fn a_planted_missing_tombstone_is_caught() {
    let cases = cases(20);
    let bug = Mutation::TableJoinSkipsTombstone;
    let (differences, _, _) = planted(bug, || compare(&cases));
    assert_caught(bug, &differences);
}
