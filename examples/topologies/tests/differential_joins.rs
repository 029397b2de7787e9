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
//! cargo test -p parsley-examples --features differential --test differential_joins
//! ```

mod differential;

use differential::{first_difference, kafka_streams, Rng};
use parsley::join::{Join, JoinKind};
use parsley::mutation::{self, Mutation};
use parsley::{Parsley, Topic, Utf8, I64};
use parsley_sim::{TestDriver, TestRecord};

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
    let mut rng = Rng::new(seed);
    let mut now = 1_000i64;
    (0..records)
        .map(|_| {
            now = (now + rng.below(200) as i64 - 60).max(0);
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
                at: now,
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

fn parsley_side(kind: JoinKind, records: &[Piped]) -> Vec<Joined> {
    let orders = Topic::<String, i64>::with_codecs("orders", Utf8, I64);
    let discounts = Topic::<String, i64>::with_codecs("discounts", Utf8, I64);
    let out = Topic::<String, String>::with_codecs("out", Utf8, Utf8);
    let join = Join::stream_table("join", &orders, &discounts);
    let stage = match kind {
        JoinKind::Inner => join
            .inner(|order, discount: &i64| joiner(order.value, Some(discount)))
            .into(&out)
            .build(),
        JoinKind::Left => join
            .left(|order, discount: Option<&i64>| joiner(order.value, discount))
            .into(&out)
            .build(),
    };
    let app = Parsley::named("differential").stage(stage).build().unwrap();
    let driver = TestDriver::builder(&app)
        .initial_wall_clock(0)
        .default_partitions(1)
        .build()
        .unwrap();
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
                // A tombstone keeps the wall clock's timestamp; the join
                // ignores a table record's timestamp.
                input.pipe_tombstone(piped.key.clone()).unwrap();
            }
        }
    }
    driver
        .output(&out)
        .unwrap()
        .read_all()
        .unwrap()
        .into_iter()
        .map(|record| (record.key.expect("keyed"), record.value, record.timestamp))
        .collect()
}

fn kafka_streams_side(cases: &[(JoinKind, Vec<Piped>)]) -> Vec<Vec<Joined>> {
    let mut stdin = String::new();
    for (kind, records) in cases {
        stdin.push_str(match kind {
            JoinKind::Inner => "inner\n",
            JoinKind::Left => "left\n",
        });
        for piped in records {
            let value = piped
                .value
                .map_or("null".to_string(), |value| value.to_string());
            let side = if piped.table { "t" } else { "s" };
            stdin.push_str(&format!("{side} {} {value} {}\n", piped.key, piped.at));
        }
        stdin.push_str("end\n");
    }
    kafka_streams("joins", stdin, cases.len())
        .into_iter()
        .map(|lines| {
            lines
                .iter()
                .map(|line| {
                    let fields: Vec<&str> = line.split_whitespace().collect();
                    assert_eq!(fields.len(), 3, "bad Kafka Streams line {line:?}");
                    let at = fields[2]
                        .parse()
                        .unwrap_or_else(|_| panic!("bad Kafka Streams line {line:?}"));
                    (fields[0].to_string(), fields[1].to_string(), at)
                })
                .collect()
        })
        .collect()
}

/// The cases: inner and left joins alternately, each with its own seed,
/// length (50–250 pipes), key count (one to six: key churn) and share of
/// tombstones (none to a half of the table records).
fn cases(count: u64) -> Vec<(JoinKind, Vec<Piped>, String)> {
    let mut rng = Rng::new(0x501E);
    (0..count)
        .map(|seed| {
            let kind = match seed % 2 {
                0 => JoinKind::Inner,
                _ => JoinKind::Left,
            };
            let records = 50 + rng.below(201) as usize;
            let keys = 1 + rng.below(KEYS.len() as u64) as usize;
            let tombstones = rng.below(51);
            let name = format!(
                "{kind:?} join, seed {seed}: {records} pipes over {keys} keys, {tombstones}% tombstones"
            );
            (kind, inputs(seed, records, keys, tombstones), name)
        })
        .collect()
}

/// Runs `cases` through both sides; the differences, told.
fn compare(cases: &[(JoinKind, Vec<Piped>, String)]) -> (Vec<String>, usize) {
    let inputs: Vec<(JoinKind, Vec<Piped>)> = cases
        .iter()
        .map(|(kind, records, _)| (*kind, records.clone()))
        .collect();
    let outputs = kafka_streams_side(&inputs);
    let mut differences = Vec::new();
    let mut joined = 0;
    for ((kind, records, name), kafka_streams) in cases.iter().zip(&outputs) {
        joined += kafka_streams.len();
        let parsley = parsley_side(*kind, records);
        differences.extend(first_difference(name, "output", &parsley, kafka_streams));
    }
    (differences, joined)
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
    assert!(
        differences.is_empty(),
        "{} of {} cases differ; the first:\n{}",
        differences.len(),
        cases.len(),
        differences[0]
    );
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
        mutation::set(Some(planted));
        let (differences, _) = compare(&cases);
        mutation::set(None);
        assert!(
            !differences.is_empty(),
            "the differential test missed Parsley's {} mutation",
            planted.name()
        );
        eprintln!(
            "{} caught, as it should be: {}",
            planted.name(),
            differences[0]
        );
    }
}
