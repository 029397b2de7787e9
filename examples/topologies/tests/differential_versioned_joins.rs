//! Differential test of Parsley's versioned joins (J16, J17, J19) against
//! Kafka Streams 4.4.0 (KIP-914, KIP-923's grace period): the same seeded
//! interleavings of table updates,
//! tombstones and stream records, their timestamps out of order and often
//! equal, go through Parsley's `TestDriver` (one partition) running
//! `Stage::named(…).join(Join::stream_versioned_table(…))` and through a `TopologyTestDriver`
//! running `stream.join(table, …)` or `stream.leftJoin(table, …)` over a
//! table in `Stores.persistentVersionedKeyValueStore` with the same
//! history retention (and, for the cases with one, the same grace period,
//! `Joined.withGracePeriod`); the outputs (key, value and timestamp) must agree
//! record for record, in order. Both drivers process each piped record
//! before the next. The Java side is
//! `differential/kafka-streams/…/VersionedJoins.java`, run by
//! `differential/run.sh`; see `differential/README.md`. Built only with the
//! `differential` feature, as it needs `java` and `mvn`:
//!
//! ```text
//! cargo test -p parsley-examples --features differential --test differential_versioned_joins
//! ```

use crate::differential;
use parsley::Stage;

use std::collections::HashMap;
use std::time::Duration;

use differential::{
    assert_agree, differences, join_cases, kafka_streams_cases, read_records, record_line,
    test_driver, Rng,
};
use parsley::mutation::Mutation;
use parsley::{Join, JoinKind};
use parsley::{Parsley, Topic, Utf8, I64};
use parsley_sim::TestRecord;

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

/// A case's join: inner or left, its history retention in ms, and its
/// grace period in ms when it has one.
type Kind = (JoinKind, u64, Option<u64>);

const KEYS: [&str; 6] = ["a", "b", "c", "d", "e", "f"];

/// `records` pipes over `keys` keys: about two in five are table records,
/// a `tombstones` share of those deletes. Timestamps climb on a 10 ms
/// grid; three pipes in ten take the timestamp of an earlier pipe (equal
/// timestamps, and updates out of order), one in ten falls back up to
/// 600 ms.
fn inputs(seed: u64, records: usize, keys: usize, tombstones: u64) -> Vec<Piped> {
    let mut rng = Rng::new(seed);
    let mut now = 1_000i64;
    let mut earlier: Vec<i64> = Vec::new();
    (0..records)
        .map(|_| {
            now += 10 * rng.below(8) as i64;
            let at = match rng.below(10) {
                0..=2 if !earlier.is_empty() => earlier[rng.below(earlier.len() as u64) as usize],
                3 => (now - 10 * rng.below(61) as i64).max(0),
                _ => now,
            };
            earlier.push(at);
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
        .collect()
}

fn joiner(order: i64, discount: Option<&i64>) -> String {
    match discount {
        Some(discount) => format!("{order}:{discount}"),
        None => format!("{order}:null"),
    }
}

fn parsley_side((kind, retention, grace): Kind, records: &[Piped]) -> Vec<Joined> {
    let orders = Topic::<String, i64>::with_codecs("orders", Utf8, I64);
    let discounts = Topic::<String, i64>::with_codecs("discounts", Utf8, I64);
    let out = Topic::<String, String>::with_codecs("out", Utf8, Utf8);
    let join = Stage::named("join").join(Join::stream_versioned_table(
        &orders,
        &discounts,
        Duration::from_millis(retention),
    ));
    let stage = match (kind, grace) {
        (JoinKind::Inner, None) => join
            .inner(|order, discount: &i64| joiner(*order.value(), Some(discount)))
            .into(&out)
            .build(),
        (JoinKind::Inner, Some(grace)) => join
            .inner(|order, discount: &i64| joiner(*order.value(), Some(discount)))
            .into(&out)
            .grace(Duration::from_millis(grace))
            .build(),
        (JoinKind::Left, None) => join
            .left(|order, discount: Option<&i64>| joiner(*order.value(), discount))
            .into(&out)
            .build(),
        (JoinKind::Left, Some(grace)) => join
            .left(|order, discount: Option<&i64>| joiner(*order.value(), discount))
            .into(&out)
            .grace(Duration::from_millis(grace))
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
        match piped.value {
            Some(value) => {
                input
                    .pipe_record(TestRecord::new(piped.key.clone(), value).at(piped.at))
                    .unwrap();
            }
            None => {
                input
                    .pipe_tombstone_at(piped.key.clone(), piped.at)
                    .unwrap();
            }
        }
    }
    read_records(&driver, &out)
}

fn kafka_streams_side(cases: &[(Kind, Vec<Piped>, String)]) -> Vec<Vec<Joined>> {
    let cases = cases.iter().map(|((kind, retention, grace), records, _)| {
        let kind = match kind {
            JoinKind::Inner => "inner",
            JoinKind::Left => "left",
        };
        let header = match grace {
            None => format!("{kind} {retention}"),
            Some(grace) => format!("{kind} {retention} {grace}"),
        };
        let lines = records
            .iter()
            .map(|piped| {
                let side = if piped.table { "t" } else { "s" };
                record_line(side, &piped.key, piped.value, piped.at)
            })
            .collect();
        (header, lines)
    });
    kafka_streams_cases("versioned-joins", cases, 3, |line| {
        (line.text(0), line.text(1), line.number(2))
    })
}

/// The cases: inner and left joins, each with a history retention of 0,
/// 50, 200 or 1,000 ms or an hour in turn, and its own seed, length
/// (50–250 pipes), key count and share of tombstones.
fn cases(count: u64) -> Vec<(Kind, Vec<Piped>, String)> {
    let kinds: Vec<Kind> = [0, 50, 200, 1_000, 3_600_000]
        .into_iter()
        .flat_map(|retention| {
            [
                (JoinKind::Inner, retention, None),
                (JoinKind::Left, retention, None),
            ]
        })
        .collect();
    join_cases(0x7E55, count, &kinds, inputs)
}

/// The cases with a grace period (J19): inner and left joins, each with
/// (retention, grace) of (50, 0), (200, 50), (1,000, 200), (1,000,
/// 1,000) or (an hour, 600) ms in turn: graces shorter and longer than
/// the inputs' 600 ms fall-backs, one equal to the retention.
fn graced_cases(count: u64) -> Vec<(Kind, Vec<Piped>, String)> {
    let kinds: Vec<Kind> = [
        (50, 0),
        (200, 50),
        (1_000, 200),
        (1_000, 1_000),
        (3_600_000, 600),
    ]
    .into_iter()
    .flat_map(|(retention, grace)| {
        [
            (JoinKind::Inner, retention, Some(grace)),
            (JoinKind::Left, retention, Some(grace)),
        ]
    })
    .collect();
    join_cases(0x6A2C, count, &kinds, graced_inputs)
}

/// [`inputs`], but a tombstone never lands on a millisecond its key
/// already has a table record of. Kafka Streams 4.4's versioned store
/// loses such a tombstone once an older version of the key is put after
/// it (`t b 312 @1080`, `t b null @1080`, `t b 321 @1000`: a lookup
/// @1310 finds 321, where J16 has the tombstone in force), with or
/// without a grace period; docs/DESIGN.md ("Versioned tables") records
/// the difference. The grace cases reorder lookups after such updates
/// far more often than the plain ones, so they leave it out to compare
/// what J19 adds.
fn graced_inputs(seed: u64, records: usize, keys: usize, tombstones: u64) -> Vec<Piped> {
    let mut stamped: std::collections::HashSet<(String, i64)> = Default::default();
    inputs(seed, records, keys, tombstones)
        .into_iter()
        .map(|mut piped| {
            if piped.table {
                while piped.value.is_none() && stamped.contains(&(piped.key.clone(), piped.at)) {
                    piped.at += 1;
                }
                stamped.insert((piped.key.clone(), piped.at));
            }
            piped
        })
        .collect()
}

/// Runs `cases` through both sides; the differences, told.
fn compare(cases: &[(Kind, Vec<Piped>, String)]) -> (Vec<String>, usize) {
    let outputs = kafka_streams_side(cases);
    let joined = outputs.iter().map(Vec::len).sum();
    (differences(cases, &outputs, parsley_side), joined)
}

/// What a case's input exercises: table updates older than an earlier
/// update of their key (out of order), and stream records of the same
/// timestamp as an earlier update of their key.
fn exercised(records: &[Piped]) -> (usize, usize) {
    let mut latest: HashMap<&str, i64> = HashMap::new();
    let mut stamped: HashMap<(&str, i64), ()> = HashMap::new();
    let (mut out_of_order, mut equal) = (0, 0);
    for piped in records {
        if piped.table {
            let newest = latest.entry(&piped.key).or_insert(piped.at);
            if piped.at < *newest {
                out_of_order += 1;
            }
            *newest = (*newest).max(piped.at);
            stamped.insert((&piped.key, piped.at), ());
        } else if stamped.contains_key(&(&piped.key[..], piped.at)) {
            equal += 1;
        }
    }
    (out_of_order, equal)
}

/// 300 seeded cases in one Kafka Streams program: every output agrees,
/// timestamps included.
#[test]
fn random_cases_agree() {
    let cases = cases(300);
    let (out_of_order, equal) = cases
        .iter()
        .map(|(_, records, _)| exercised(records))
        .fold((0, 0), |(a, b), (c, d)| (a + c, b + d));
    let (differences, joined) = compare(&cases);
    eprintln!(
        "{} cases: {out_of_order} table updates out of order, {equal} stream records on an update's millisecond, {joined} joined records out",
        cases.len()
    );
    assert_agree(&differences, cases.len());
    assert!(
        out_of_order > 2_000 && equal > 300 && joined > 10_000,
        "too little exercised"
    );
}

/// J19: 200 seeded cases with a grace period in one Kafka Streams
/// program: every output agrees, order and timestamps included (a held
/// record is written at the pipe that releases it, with its own
/// timestamp).
#[test]
fn random_cases_with_a_grace_period_agree() {
    let cases = graced_cases(200);
    let (out_of_order, _) = cases
        .iter()
        .map(|(_, records, _)| exercised(records))
        .fold((0, 0), |(a, b), (c, d)| (a + c, b + d));
    let (differences, joined) = compare(&cases);
    eprintln!(
        "{} cases with a grace period: {out_of_order} table updates out of order, {joined} joined records out",
        cases.len()
    );
    assert_agree(&differences, cases.len());
    assert!(
        out_of_order > 1_000 && joined > 5_000,
        "too little exercised"
    );
}

/// The comparison sees a planted grace bug: a join that writes each
/// stream record at once, as without a grace period.
#[test]
fn a_planted_grace_bug_is_caught() {
    let cases = graced_cases(20);
    let planted = Mutation::VersionedGraceIgnored;
    let (differences, _) = differential::planted(planted, || compare(&cases));
    differential::assert_caught(planted, &differences);
}

/// The comparison sees a planted bug in Parsley's lookup: leaving out a
/// version of the record's own millisecond, or taking the latest version
/// whatever its timestamp, makes outputs differ from Kafka Streams'.
#[test]
fn planted_lookup_bugs_are_caught() {
    let cases = cases(20);
    for planted in [
        Mutation::VersionedJoinExcludesEqual,
        Mutation::VersionedJoinTakesLatest,
    ] {
        let (differences, _) = differential::planted(planted, || compare(&cases));
        differential::assert_caught(planted, &differences);
    }
}
