//! Differential test of Parsley's windowed aggregation (W1–W4) against Kafka
//! Streams 4.4.0: the same seeded inputs go through Parsley's `TestDriver`
//! (one partition) and through a `TopologyTestDriver` running
//! `groupByKey().windowedBy(TimeWindows…).aggregate(…)`, with
//! `suppress(untilWindowCloses)` or the uncached KTable's changelog, and the
//! outputs must agree record for record, in order. The Java side is
//! `differential/kafka-streams`, built and run by `differential/run.sh`;
//! see `differential/README.md`. Built only with the `differential`
//! feature, as it needs `java` and `mvn`: without them it fails, naming
//! what is missing, rather than skipping:
//!
//! ```text
//! cargo test -p parsley-examples --features differential --test differential -- differential_windows::
//! ```

use crate::differential;
use parsley::Stage;

use std::time::Duration;

use differential::{
    assert_agree, compare_windowed, kafka_streams_windowed, pipe_windowed, planted, Rng,
};

use parsley::mutation::Mutation;
use parsley::{Emit, Windowed, WindowedCodec, Windows};
use parsley::{Topic, Utf8, I64};

/// One output window: key, start, end, aggregate, record timestamp (W4).
type Window = (String, i64, i64, i64, i64);

/// One input record: key, value, timestamp.
type Sale = (String, i64, i64);

#[derive(Clone, Copy, Debug)]
struct Case {
    name: &'static str,
    seed: u64,
    size: i64,
    advance: i64,
    grace: i64,
    emit: Emit,
    records: usize,
    /// How many keys (of `KEYS`) the records spread over.
    keys: usize,
    /// The first timestamp: 0 exercises the hopping windows cut at the epoch.
    first: i64,
}

/// Keys of one byte each, so that ordering by key bytes is the same in
/// Kafka Streams' suppression buffer (key bytes then start) and Parsley.
const KEYS: [&str; 8] = ["a", "b", "c", "d", "e", "f", "g", "h"];

/// Timestamps mostly increasing, by up to a fifth of a window; one record
/// in five jumps back by up to a window and a half plus twice the grace, so
/// some land within grace and some are late.
fn inputs(case: &Case) -> Vec<Sale> {
    let mut rng = Rng::new(case.seed);
    let mut now = case.first;
    let back_range = (case.size * 3 / 2 + 2 * case.grace) as u64;
    (0..case.records)
        .map(|_| {
            let key = KEYS[rng.below(case.keys as u64) as usize].to_string();
            let value = 1 + rng.below(100) as i64;
            let at = if rng.below(5) == 0 {
                (now - rng.below(back_range) as i64).max(0)
            } else {
                now += rng.below(case.size as u64 / 5 + 1) as i64;
                now
            };
            (key, value, at)
        })
        .collect()
}

/// The records late for at least one of their windows, by W2/W3 and Kafka
/// Streams' `windowEnd <= observedStreamTime - grace`: a check that each
/// case does exercise lateness.
fn late_count(case: &Case, records: &[Sale]) -> usize {
    let mut stream_time = i64::MIN;
    records
        .iter()
        .filter(|(_, _, at)| {
            stream_time = stream_time.max(*at);
            // The earliest window holding `at` ends first.
            let first_start =
                ((at - case.size + case.advance).max(0) / case.advance) * case.advance;
            first_start + case.size + case.grace <= stream_time
        })
        .count()
}

fn parsley_side(case: &Case, records: &[Sale]) -> (Vec<Window>, usize) {
    let sales = Topic::<String, i64>::with_codecs("sales", Utf8, I64);
    let late = Topic::<String, i64>::with_codecs("sales-late", Utf8, I64);
    let out =
        Topic::<Windowed<String>, i64>::with_codecs("sales-windows", WindowedCodec(Utf8), I64);
    let ms = |n: i64| Duration::from_millis(n as u64);
    let windows = match case.advance == case.size {
        true => Windows::tumbling(ms(case.size)),
        false => Windows::hopping(ms(case.size), ms(case.advance)),
    };
    let stage = Stage::named("sum")
        .windowed(windows.grace(ms(case.grace)))
        .aggregate(&sales, I64, || 0i64, |total, sale| total + sale.value())
        .emit(case.emit)
        .late_records_to(&late)
        .into(&out)
        .build();
    let (driver, windows) = pipe_windowed(stage, &sales, &out, records);
    let late = driver.output(&late).unwrap().read_all().unwrap().len();
    (windows, late)
}

/// Runs the cases through one Kafka Streams program (one JVM, a
/// `TopologyTestDriver` per case); returns each case's output windows.
fn kafka_streams_side(cases: &[(Case, Vec<Sale>)]) -> Vec<Vec<Window>> {
    let headers = cases.iter().map(|(case, records)| {
        let mode = match case.emit {
            Emit::OnClose => "close",
            Emit::OnUpdate => "update",
        };
        let header = format!("{} {} {} {mode}", case.size, case.advance, case.grace);
        (header, records.as_slice())
    });
    kafka_streams_windowed("windows", headers)
}

fn differential(case: Case) {
    if let Err(difference) = compare(&case) {
        panic!("{difference}");
    }
}

/// Runs both sides on the case's input; `Err` describes the first
/// difference in the outputs. The input's own checks (late records present,
/// Parsley's late topic as W3 counts them) panic.
fn compare(case: &Case) -> Result<(), String> {
    compare_records(case, &inputs(case), true)
}

/// `compare` on given records; `lateness` asserts the input has late ones.
fn compare_records(case: &Case, records: &[Sale], lateness: bool) -> Result<(), String> {
    let cases = [(*case, records.to_vec())];
    let kafka_streams = kafka_streams_side(&cases).pop().unwrap();
    let late = compare_outputs(case, records, &kafka_streams)?;
    eprintln!(
        "{}: {} records in ({late} late), {} windows out",
        case.name,
        records.len(),
        kafka_streams.len()
    );
    assert!(
        !lateness || late > 0,
        "{}: the input has no late record",
        case.name
    );
    Ok(())
}

/// Compares Parsley's output on `records` with Kafka Streams' and
/// Parsley's late topic with W3's count; returns that count.
fn compare_outputs(
    case: &Case,
    records: &[Sale],
    kafka_streams: &[Window],
) -> Result<usize, String> {
    let expected_late = late_count(case, records);
    let (parsley, parsley_late) = parsley_side(case, records);
    let name = format!("{} (seed {})", case.name, case.seed);
    let late = ("wrote", parsley_late as u64, expected_late as u64);
    compare_windowed(&name, case, &parsley, kafka_streams, late)?;
    Ok(expected_late)
}

const CASE: Case = Case {
    name: "",
    seed: 0,
    size: 100,
    advance: 100,
    grace: 0,
    emit: Emit::OnClose,
    records: 400,
    keys: 4,
    first: 1_000,
};

#[test]
fn tumbling_no_grace_on_close() {
    differential(Case {
        name: "tumbling_no_grace_on_close",
        seed: 1,
        ..CASE
    });
}

#[test]
fn tumbling_grace_on_close() {
    differential(Case {
        name: "tumbling_grace_on_close",
        seed: 2,
        grace: 30,
        ..CASE
    });
}

#[test]
fn hopping_grace_on_close() {
    differential(Case {
        name: "hopping_grace_on_close",
        seed: 3,
        advance: 25,
        grace: 20,
        first: 0,
        ..CASE
    });
}

#[test]
fn tumbling_grace_on_update() {
    differential(Case {
        name: "tumbling_grace_on_update",
        seed: 4,
        grace: 30,
        emit: Emit::OnUpdate,
        ..CASE
    });
}

#[test]
fn hopping_no_grace_on_update() {
    differential(Case {
        name: "hopping_no_grace_on_update",
        seed: 5,
        advance: 50,
        first: 0,
        emit: Emit::OnUpdate,
        ..CASE
    });
}

#[test]
fn hopping_uneven_grace_on_close() {
    // An advance that does not divide the size: windows of 60 every 25.
    differential(Case {
        name: "hopping_uneven_grace_on_close",
        seed: 6,
        size: 60,
        advance: 25,
        grace: 15,
        first: 0,
        ..CASE
    });
}

/// The comparison is sharp enough to see a one-millisecond error in when a
/// window closes: with Parsley's planted grace-off-by-one bug, the outputs
/// differ. (The mutation is per thread, as is the `TestDriver`.) The input is
/// hand-made: a random one rarely puts stream time on `end + grace - 1`
/// exactly and then a record for that window.
#[test]
fn a_grace_off_by_one_is_caught() {
    let case = Case {
        name: "grace off by one",
        grace: 30,
        ..CASE
    };
    // [0, 100) with grace 30 is open until stream time 130: the record at 50
    // comes at stream time 129 and still counts.
    let records: Vec<Sale> = [("a", 1, 10), ("b", 2, 129), ("a", 4, 50), ("a", 8, 300)]
        .into_iter()
        .map(|(key, value, at)| (key.to_string(), value, at))
        .collect();
    compare_records(&case, &records, false).expect("both sides agree without the mutation");
    let result = planted(Mutation::WindowGraceOffByOne, || {
        compare_records(&case, &records, false)
    });
    match result {
        Ok(()) => panic!("the differential test missed Parsley's grace-off-by-one mutation"),
        Err(difference) => eprintln!("caught, as it should be: {difference}"),
    }
}

/// A few hundred seeded random cases in one Kafka Streams program: window
/// sizes, advances (dividing the size or not), graces, emission modes, key
/// counts (one to eight: key churn) and starts (at the epoch or not) drawn
/// per case, each with its own input. Every case's output must agree.
#[test]
fn random_cases_agree() {
    const CASES: u64 = 300;
    let mut rng = Rng::new(0xD1FF);
    let cases: Vec<(Case, Vec<Sale>)> = (0..CASES)
        .map(|seed| {
            let size = 10 + rng.below(191) as i64;
            let advance = match rng.below(3) {
                0 => size,
                _ => 1 + rng.below(size as u64) as i64,
            };
            let case = Case {
                name: "random",
                seed: 1_000 + seed,
                size,
                advance,
                grace: match rng.below(3) {
                    0 => 0,
                    _ => rng.below(size as u64 + 1) as i64,
                },
                emit: match rng.below(2) {
                    0 => Emit::OnClose,
                    _ => Emit::OnUpdate,
                },
                records: 100 + rng.below(101) as usize,
                keys: 1 + rng.below(KEYS.len() as u64) as usize,
                first: match rng.below(2) {
                    0 => 0,
                    _ => rng.below(10_000) as i64,
                },
            };
            let records = inputs(&case);
            (case, records)
        })
        .collect();
    let outputs = kafka_streams_side(&cases);
    let mut late = 0;
    let mut windows = 0;
    let mut differences = Vec::new();
    for ((case, records), kafka_streams) in cases.iter().zip(&outputs) {
        windows += kafka_streams.len();
        match compare_outputs(case, records, kafka_streams) {
            Ok(count) => late += count,
            Err(difference) => differences.push(difference),
        }
    }
    eprintln!("{CASES} random cases: {late} late records, {windows} windows out");
    assert_agree(&differences, CASES);
    assert!(
        late as u64 > CASES,
        "the random inputs have too few late records: {late}"
    );
}
