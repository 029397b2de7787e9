//! Differential test of Parsley's re-keying (R1–R3) against Kafka Streams
//! 4.4.0: each customer's sales summed, each running total re-keyed by its
//! bucket (`b<total / 100>`) and the totals counted per bucket. Kafka
//! Streams runs `aggregate`, `toStream().selectKey(…)`, `groupByKey()
//! .count()` (the repartition topic its `groupByKey` derives); Parsley runs
//! the same twice, once with the re-key within the summing stage
//! (`rekey_output`, R3) and once as a re-key stage of its own (`rekey`,
//! R2). The same seeded sales go through both `TestDriver`s (one
//! partition) and through a `TopologyTestDriver`, and every count written
//! (key, value, timestamp) must agree record for record, in order. The
//! sales' timestamps never go back: Kafka Streams stamps an aggregate with
//! the highest timestamp it has seen for the key, Parsley with its
//! record's, and a rising input makes them one. The Java side is
//! `differential/kafka-streams/…/Rekeys.java`, run by
//! `differential/run.sh`; see `differential/README.md`. Built only with the
//! `differential` feature, as it needs `java` and `mvn`:
//!
//! ```text
//! cargo test -p parsley-examples --features differential --test differential -- differential_rekeys::
//! ```

use crate::differential;

use differential::{
    assert_agree, first_difference, kafka_streams_cases, pipe, planted, read_records, test_driver,
    Rng,
};
use parsley::mutation::Mutation;
use parsley::{App, Json, Parsley, Stage, Step, Topic, Utf8, I64};

/// One sale: customer, amount, timestamp.
type Sale = (String, i64, i64);

/// One count written: bucket, count, timestamp.
type Count = (String, i64, i64);

const CUSTOMERS: [&str; 6] = ["a", "b", "c", "d", "e", "f"];

/// How the Parsley side re-keys.
#[derive(Clone, Copy, Debug)]
enum Form {
    /// Within the summing stage (R3).
    Within,
    /// A re-key stage of its own (R2).
    OwnStage,
}

fn bucket(total: i64) -> String {
    format!("b{}", total / 100)
}

/// `records` sales over `customers` customers, amounts up to `max`,
/// timestamps rising by 0–49 ms (equal ones included).
fn sales(seed: u64, records: usize, customers: usize, max: u64) -> Vec<Sale> {
    let mut rng = Rng::new(seed);
    let mut now = 1_000i64;
    (0..records)
        .map(|_| {
            now += rng.below(50) as i64;
            let customer = CUSTOMERS[rng.below(customers as u64) as usize].to_string();
            (customer, rng.below(max + 1) as i64, now)
        })
        .collect()
}

fn app(form: Form, sales: &Topic<String, i64>, out: &Topic<String, i64>) -> App {
    let totals = Topic::<String, i64>::with_codecs("totals", Utf8, I64);
    let differential = Parsley::named("differential");
    let written = totals.clone();
    let summing = Stage::named("sum")
        .state(Json, || 0i64)
        .on(sales, move |total: i64, sale| {
            let total = total + sale.value();
            Step::of(total).emit(written.send(sale.key().cloned(), total))
        })
        .into(&totals);
    let (stages, by_bucket) = match form {
        Form::Within => {
            let by_bucket = totals.repartition("by-bucket", Utf8);
            let summing = summing.rekey_output(&totals, &by_bucket, |_, total| bucket(*total));
            (vec![summing.build()], by_bucket)
        }
        Form::OwnStage => {
            let (rekey, by_bucket) =
                Stage::named("by-bucket").rekey(&totals, Utf8, |total| bucket(*total.value()));
            (vec![summing.build(), rekey], by_bucket)
        }
    };
    let counts = out.clone();
    let counting = Stage::named("count")
        .state(Json, || 0i64)
        .on(&by_bucket, move |count: i64, total| {
            Step::of(count + 1).emit(counts.send(total.key().cloned(), count + 1))
        })
        .into(out)
        .build();
    stages
        .into_iter()
        .fold(differential, |app, stage| app.stage(stage))
        .stage(counting)
        .build()
        .unwrap()
}

fn parsley_side(form: Form, records: &[Sale]) -> Vec<Count> {
    let sales = Topic::<String, i64>::with_codecs("sales", Utf8, I64);
    let out = Topic::<String, i64>::with_codecs("out", Utf8, I64);
    let app = app(form, &sales, &out);
    let driver = test_driver(&app);
    let input = driver.input(&sales).unwrap();
    for (customer, amount, at) in records {
        pipe(&input, customer, Some(*amount), *at);
    }
    read_records(&driver, &out)
}

fn kafka_streams_side(cases: &[Vec<Sale>]) -> Vec<Vec<Count>> {
    let cases = cases.iter().map(|records| {
        let lines = records
            .iter()
            .map(|(customer, amount, at)| format!("{customer} {amount} {at}"))
            .collect();
        ("rekey".to_string(), lines)
    });
    kafka_streams_cases("rekeys", cases, 3, |line| {
        (line.text(0), line.number(1), line.number(2))
    })
}

/// The cases, each with its own seed, length (50–250 sales), customer
/// count (one to six: key churn) and largest amount (10–300, so totals
/// cross buckets slowly or every sale).
fn cases(count: u64) -> Vec<(Vec<Sale>, String)> {
    let mut rng = Rng::new(0x2E4E);
    (0..count)
        .map(|seed| {
            let records = 50 + rng.below(201) as usize;
            let customers = 1 + rng.below(CUSTOMERS.len() as u64) as usize;
            let max = 10 + rng.below(291);
            let name = format!(
                "seed {seed}: {records} sales over {customers} customers, amounts up to {max}"
            );
            (sales(seed, records, customers, max), name)
        })
        .collect()
}

/// Runs `cases` through Kafka Streams and through Parsley in `form`; the
/// differences, told, and how many counts Kafka Streams wrote.
fn compare(form: Form, cases: &[(Vec<Sale>, String)], outputs: &[Vec<Count>]) -> Vec<String> {
    cases
        .iter()
        .zip(outputs)
        .filter_map(|((records, name), kafka_streams)| {
            let parsley = parsley_side(form, records);
            first_difference(
                &format!("{form:?}, {name}"),
                "count",
                &parsley,
                kafka_streams,
            )
        })
        .collect()
}

/// 300 seeded cases in one Kafka Streams program: both of Parsley's re-key
/// forms agree with `selectKey` and the repartition topic, every count.
#[test]
fn random_cases_agree() {
    let cases = cases(300);
    let inputs: Vec<Vec<Sale>> = cases.iter().map(|(records, _)| records.clone()).collect();
    let outputs = kafka_streams_side(&inputs);
    let counts: usize = outputs.iter().map(Vec::len).sum();
    let buckets: usize = outputs
        .iter()
        .map(|counts| {
            let mut keys: Vec<&String> = counts.iter().map(|(key, _, _)| key).collect();
            keys.sort();
            keys.dedup();
            keys.len()
        })
        .sum();
    eprintln!(
        "{} cases: {counts} counts over {buckets} buckets",
        cases.len()
    );
    assert!(counts > 30_000 && buckets > 3_000, "too little exercised");
    for form in [Form::Within, Form::OwnStage] {
        let differences = compare(form, &cases, &outputs);
        assert_agree(&differences, cases.len());
    }
}

/// The comparison sees a planted bug in the re-key within a stage: copies
/// written under the old key are counted per customer, not per bucket.
#[test]
fn a_planted_rekey_bug_is_caught() {
    let cases = cases(10);
    let inputs: Vec<Vec<Sale>> = cases.iter().map(|(records, _)| records.clone()).collect();
    let outputs = kafka_streams_side(&inputs);
    let differences = planted(Mutation::RekeyOutputKeepsKey, || {
        compare(Form::Within, &cases, &outputs)
    });
    assert_eq!(
        differences.len(),
        cases.len(),
        "the differential test missed the rekey-output-keeps-key mutation in some case"
    );
    eprintln!(
        "rekey-output-keeps-key caught, as it should be: {}",
        differences[0]
    );
}

/// Where the two differ on purpose (DESIGN.md, *Emission timestamps*): a
/// sale that goes back in time. Kafka Streams stamps each update with the
/// highest timestamp its key has seen; Parsley with the sale's own. The
/// counts and their keys agree.
#[test]
fn timestamps_going_back_differ_as_documented() {
    let sales: Vec<Sale> = vec![
        ("a".to_string(), 10, 5_000),
        ("a".to_string(), 10, 4_000),
        ("b".to_string(), 10, 3_000),
    ];
    let kafka_streams = kafka_streams_side(std::slice::from_ref(&sales)).remove(0);
    let stamped = |at: [i64; 3]| -> Vec<Count> {
        at.iter()
            .zip(1..)
            .map(|(at, count)| ("b0".to_string(), count, *at))
            .collect()
    };
    assert_eq!(kafka_streams, stamped([5_000, 5_000, 5_000]));
    for form in [Form::Within, Form::OwnStage] {
        assert_eq!(
            parsley_side(form, &sales),
            stamped([5_000, 4_000, 3_000]),
            "{form:?}"
        );
    }
}
