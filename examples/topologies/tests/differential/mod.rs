//! What the differential tests against Kafka Streams share: their seeded
//! randomness, and running a program of `differential/kafka-streams` (built
//! once, cached) over many cases in one JVM.

#![allow(dead_code)] // Each test binary uses its part.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use parsley::mutation::{self, Mutation};
use parsley::Topic;
use parsley_sim::{TestDriver, TestInputTopic, TestOutputTopic, TestRecord};

/// xorshift64*: enough randomness for inputs, and no dependency.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn run_sh() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../differential/run.sh")
}

/// Builds the Kafka Streams programs once per test binary (cached across
/// runs under `differential/kafka-streams/target/`); fails, naming the
/// cause, when Java or Maven is missing.
fn build_once() {
    static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let output = Command::new("bash")
            .arg(run_sh())
            .arg("build")
            .output()
            .map_err(|error| format!("cannot run bash {}: {error}", run_sh().display()))?;
        match output.status.success() {
            true => Ok(()),
            false => Err(format!(
                "building the Kafka Streams side failed ({}); it needs java (JDK 17+) and mvn on PATH \
                 and Maven Central reachable for the first build:\n{}{}",
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            )),
        }
    });
    if let Err(error) = built {
        panic!("{error}");
    }
}

/// The first difference between two sides' outputs, told with the records
/// around it; `None` when they are equal. `what` names one output record
/// ("output", "count").
pub fn first_difference<T: PartialEq + std::fmt::Debug>(
    name: &str,
    what: &str,
    parsley: &[T],
    kafka_streams: &[T],
) -> Option<String> {
    if parsley == kafka_streams {
        return None;
    }
    let at = parsley
        .iter()
        .zip(kafka_streams)
        .position(|(p, k)| p != k)
        .unwrap_or(parsley.len().min(kafka_streams.len()));
    fn around<T>(side: &[T], at: usize) -> &[T] {
        &side[at.saturating_sub(2).min(side.len())..(at + 3).min(side.len())]
    }
    Some(format!(
        "{name}: Parsley and Kafka Streams differ at {what} {at} (Parsley wrote {}, Kafka Streams {})\n\
         Parsley:       {:?}\nKafka Streams: {:?}",
        parsley.len(),
        kafka_streams.len(),
        around(parsley, at),
        around(kafka_streams, at)
    ))
}

/// Runs `program` (a word of `differential/run.sh`: `windows`, `joins`, …) on `stdin`, the cases
/// each ended by a line `end`; returns each case's output lines. Asserts the
/// program answered `cases` cases.
pub fn kafka_streams(program: &str, stdin: String, cases: usize) -> Vec<Vec<String>> {
    build_once();
    let mut child = Command::new("bash")
        .arg(run_sh())
        .arg(program)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn differential/run.sh");
    // Written from a thread of its own: the program's output would fill its
    // pipe while this one still writes a large input.
    let mut pipe = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || pipe.write_all(stdin.as_bytes()));
    let output = child.wait_with_output().unwrap();
    writer
        .join()
        .unwrap()
        .expect("write the cases to differential/run.sh");
    assert!(
        output.status.success(),
        "the Kafka Streams side failed ({}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let mut outputs = vec![Vec::new()];
    for line in String::from_utf8(output.stdout).unwrap().lines() {
        match line {
            "end" => outputs.push(Vec::new()),
            line => outputs.last_mut().unwrap().push(line.to_string()),
        }
    }
    // The empty case after the last `end`.
    assert!(
        outputs.pop().is_some_and(|rest| rest.is_empty()),
        "the Kafka Streams side's output does not end with `end`"
    );
    assert_eq!(
        outputs.len(),
        cases,
        "the Kafka Streams side answered {} cases of {cases}",
        outputs.len()
    );
    outputs
}

/// A one-partition `TestDriver` of `app` (one task, as the
/// `TopologyTestDriver` has), its wall clock starting at 0.
pub fn test_driver(app: &parsley::App) -> TestDriver {
    TestDriver::builder(app)
        .initial_wall_clock(0)
        .default_partitions(1)
        .build()
        .unwrap()
}

/// Pipes `value` under `key` at `at`, or, for `None`, a tombstone for
/// `key` (stamped with the wall clock: the joins ignore a table record's
/// timestamp).
pub fn pipe<V: 'static>(input: &TestInputTopic<String, V>, key: &str, value: Option<V>, at: i64) {
    match value {
        Some(value) => {
            input
                .pipe_record(TestRecord::new(key.to_string(), value).at(at))
                .unwrap();
        }
        None => {
            input.pipe_tombstone(key.to_string()).unwrap();
        }
    }
}

/// What `driver` wrote to `out`, in order: (key, value, timestamp).
pub fn read_records<V: 'static>(
    driver: &TestDriver,
    out: &Topic<String, V>,
) -> Vec<(String, V, i64)> {
    driver
        .output(out)
        .unwrap()
        .read_all()
        .unwrap()
        .into_iter()
        .map(|record| (record.key.expect("keyed"), record.value, record.timestamp))
        .collect()
}

/// What `output` holds, read as changes: (key, value), `None` for a
/// tombstone.
pub fn read_changes<V: 'static>(output: &TestOutputTopic<String, V>) -> Vec<(String, Option<V>)> {
    output
        .read_changes()
        .unwrap()
        .into_iter()
        .map(|record| (record.key.expect("keyed"), record.value))
        .collect()
}

/// One output record of a windowed aggregation, as both sides write it:
/// key, start, end, aggregate and the record's timestamp (W4).
pub type WindowRecord = (String, i64, i64, i64, i64);

/// The Parsley side of a windowed comparison: `stage` (a windowed
/// aggregation of `source` into `output`) alone in an application, under
/// [`test_driver`]; `records` (key, value, timestamp) piped one by one; the
/// windows written, as (key, start, end, aggregate), and the driver for
/// further reads.
pub fn pipe_windowed(
    stage: parsley::Stage,
    source: &Topic<String, i64>,
    output: &Topic<parsley::Windowed<String>, i64>,
    records: &[(String, i64, i64)],
) -> (TestDriver, Vec<WindowRecord>) {
    let app = parsley::Parsley::named("differential")
        .stage(stage)
        .build()
        .unwrap();
    let driver = test_driver(&app);
    let input = driver.input(source).unwrap();
    for (key, value, at) in records {
        input
            .pipe_record(TestRecord::new(key.clone(), *value).at(*at))
            .unwrap();
    }
    let windows = driver
        .output(output)
        .unwrap()
        .read_all()
        .unwrap()
        .into_iter()
        .map(|record| {
            let key = record.key.expect("a windowed key");
            (key.key, key.start, key.end, record.value, record.timestamp)
        })
        .collect();
    (driver, windows)
}

/// Compares a windowed case's outputs (`name` names it, `case` is shown)
/// and, when they agree, Parsley's late count with the test's own model of
/// W3 (`late`: what Parsley's side says of them, "wrote" or "counted");
/// `Err` tells the first difference.
pub fn compare_windowed(
    name: &str,
    case: &impl std::fmt::Debug,
    parsley: &[WindowRecord],
    kafka_streams: &[WindowRecord],
    (late, parsley_late, expected_late): (&str, u64, u64),
) -> Result<(), String> {
    assert!(!kafka_streams.is_empty(), "{name}: no output");
    if let Some(difference) = first_difference(
        &format!("{name} ({case:?})"),
        "output",
        parsley,
        kafka_streams,
    ) {
        return Err(difference);
    }
    // The outputs first: the late count is the test's own model of W3.
    if parsley_late != expected_late {
        return Err(format!(
            "{name}: Parsley {late} {parsley_late} late records, W3 expects {expected_late}"
        ));
    }
    Ok(())
}

/// A record line of a program with two input topics: `side` (the topic's
/// tag), key, value (`null` for `None`, a tombstone) and timestamp.
pub fn record_line(
    side: &str,
    key: &str,
    value: Option<impl std::fmt::Display>,
    at: i64,
) -> String {
    match value {
        Some(value) => format!("{side} {key} {value} {at}"),
        None => format!("{side} {key} null {at}"),
    }
}

/// One output line of a Kafka Streams program, split at white space.
pub struct Line<'a> {
    line: &'a str,
    fields: Vec<&'a str>,
}

impl Line<'_> {
    /// Field `i`.
    pub fn text(&self, i: usize) -> String {
        self.fields[i].to_string()
    }

    /// Field `i`, `None` for `null` (a tombstone).
    pub fn value(&self, i: usize) -> Option<String> {
        (self.fields[i] != "null").then(|| self.text(i))
    }

    /// Field `i`, a number.
    pub fn number(&self, i: usize) -> i64 {
        self.fields[i]
            .parse()
            .unwrap_or_else(|_| panic!("bad Kafka Streams line {:?}", self.line))
    }
}

/// Runs `program` on `cases`, each a header line and its record lines (a
/// line `end` closes each); each case's output lines, each asserted to have
/// `fields` fields and read with `read`.
pub fn kafka_streams_cases<T>(
    program: &str,
    cases: impl ExactSizeIterator<Item = (String, Vec<String>)>,
    fields: usize,
    read: impl Fn(&Line) -> T,
) -> Vec<Vec<T>> {
    let count = cases.len();
    let mut stdin = String::new();
    for (header, records) in cases {
        stdin.push_str(&header);
        stdin.push('\n');
        for record in records {
            stdin.push_str(&record);
            stdin.push('\n');
        }
        stdin.push_str("end\n");
    }
    kafka_streams(program, stdin, count)
        .into_iter()
        .map(|lines| {
            lines
                .iter()
                .map(|line| {
                    let line = Line {
                        line,
                        fields: line.split_whitespace().collect(),
                    };
                    assert_eq!(
                        line.fields.len(),
                        fields,
                        "bad Kafka Streams line {:?}",
                        line.line
                    );
                    read(&line)
                })
                .collect()
        })
        .collect()
}

/// The Kafka Streams side of a windowed comparison: each case, a header
/// line and its records (key, value, timestamp), through `program`; each
/// case's output lines `key start end aggregate`, parsed.
pub fn kafka_streams_windowed<'a>(
    program: &str,
    cases: impl ExactSizeIterator<Item = (String, &'a [(String, i64, i64)])>,
) -> Vec<Vec<WindowRecord>> {
    let cases = cases.map(|(header, records)| {
        let lines = records
            .iter()
            .map(|(key, value, at)| format!("{key} {value} {at}"))
            .collect();
        (header, lines)
    });
    kafka_streams_cases(program, cases, 5, |line| {
        (
            line.text(0),
            line.number(1),
            line.number(2),
            line.number(3),
            line.number(4),
        )
    })
}

/// `records` pipes drawn from `seed`: timestamps wander back and forth
/// from 1,000 (never below 0), and `draw` makes each pipe from the
/// generator and its timestamp.
pub fn wandering<P>(seed: u64, records: usize, mut draw: impl FnMut(&mut Rng, i64) -> P) -> Vec<P> {
    let mut rng = Rng::new(seed);
    let mut now = 1_000i64;
    (0..records)
        .map(|_| {
            now = (now + rng.below(200) as i64 - 60).max(0);
            draw(&mut rng, now)
        })
        .collect()
}

/// Seeded cases of a join test: per seed, its kind (`kinds` in turn), 50–250
/// pipes over one to six keys, none to half of them tombstones, drawn from
/// `rng_seed`; the input `inputs` makes of them (seed, pipes, keys,
/// tombstones in percent), and the case's name.
pub fn join_cases<K: Copy + std::fmt::Debug, P>(
    rng_seed: u64,
    count: u64,
    kinds: &[K],
    inputs: impl Fn(u64, usize, usize, u64) -> Vec<P>,
) -> Vec<(K, Vec<P>, String)> {
    let mut rng = Rng::new(rng_seed);
    (0..count)
        .map(|seed| {
            let kind = kinds[(seed % kinds.len() as u64) as usize];
            let records = 50 + rng.below(201) as usize;
            let keys = 1 + rng.below(6) as usize;
            let tombstones = rng.below(51);
            let name = format!(
                "{kind:?} join, seed {seed}: {records} pipes over {keys} keys, {tombstones}% tombstones"
            );
            (kind, inputs(seed, records, keys, tombstones), name)
        })
        .collect()
}

/// The differences between Parsley's outputs of `cases` (by `parsley`) and
/// Kafka Streams' `outputs` of them, told by [`first_difference`].
pub fn differences<K: Copy, P, T: PartialEq + std::fmt::Debug>(
    cases: &[(K, Vec<P>, String)],
    outputs: &[Vec<T>],
    parsley: impl Fn(K, &[P]) -> Vec<T>,
) -> Vec<String> {
    cases
        .iter()
        .zip(outputs)
        .filter_map(|((kind, records, name), kafka_streams)| {
            first_difference(name, "output", &parsley(*kind, records), kafka_streams)
        })
        .collect()
}

/// Asserts that none of `cases` cases differs: `differences` is empty, or
/// the first is told.
pub fn assert_agree(differences: &[String], cases: impl std::fmt::Display) {
    assert!(
        differences.is_empty(),
        "{} of {} cases differ; the first:\n{}",
        differences.len(),
        cases,
        differences[0]
    );
}

/// Asserts that the comparison saw `planted`: `differences` is not
/// empty; the first is told.
pub fn assert_caught(planted: Mutation, differences: &[String]) {
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

/// Runs `run` with `planted` set, and unsets it.
pub fn planted<T>(planted: Mutation, run: impl FnOnce() -> T) -> T {
    mutation::set(Some(planted));
    let result = run();
    mutation::set(None);
    result
}
