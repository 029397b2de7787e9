//! What the differential tests against Kafka Streams share: their seeded
//! randomness, and running a program of `differential/kafka-streams` (built
//! once, cached) over many cases in one JVM.

#![allow(dead_code)] // Each test binary uses its part.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

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

/// Runs `program` (`windows`, `joins` or `sessions`) on `stdin`, the cases
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

/// The Parsley side of a windowed comparison: `stage` (a windowed
/// aggregation of `source` into `output`) alone in an application, under a
/// one-partition `TestDriver` (one task, as the `TopologyTestDriver` has);
/// `records` (key, value, timestamp) piped one by one; the windows written,
/// as (key, start, end, aggregate), and the driver for further reads.
pub fn pipe_windowed(
    stage: parsley::Stage,
    source: &parsley::Topic<String, i64>,
    output: &parsley::Topic<parsley::window::Windowed<String>, i64>,
    records: &[(String, i64, i64)],
) -> (parsley_sim::TestDriver, Vec<(String, i64, i64, i64)>) {
    let app = parsley::Parsley::named("differential")
        .stage(stage)
        .build()
        .unwrap();
    let driver = parsley_sim::TestDriver::builder(&app)
        .initial_wall_clock(0)
        .default_partitions(1)
        .build()
        .unwrap();
    let input = driver.input(source).unwrap();
    for (key, value, at) in records {
        input
            .pipe_record(parsley_sim::TestRecord::new(key.clone(), *value).at(*at))
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
            (key.key, key.start, key.end, record.value)
        })
        .collect();
    (driver, windows)
}

/// The Kafka Streams side of a windowed comparison: each case, a header
/// line and its records (key, value, timestamp), through `program`; each
/// case's output lines `key start end aggregate`, parsed.
pub fn kafka_streams_windowed<'a>(
    program: &str,
    cases: impl ExactSizeIterator<Item = (String, &'a [(String, i64, i64)])>,
) -> Vec<Vec<(String, i64, i64, i64)>> {
    let count = cases.len();
    let mut stdin = String::new();
    for (header, records) in cases {
        stdin.push_str(&header);
        stdin.push('\n');
        for (key, value, at) in records {
            stdin.push_str(&format!("{key} {value} {at}\n"));
        }
        stdin.push_str("end\n");
    }
    kafka_streams(program, stdin, count)
        .into_iter()
        .map(|lines| {
            lines
                .iter()
                .map(|line| {
                    let fields: Vec<&str> = line.split_whitespace().collect();
                    assert_eq!(fields.len(), 4, "bad Kafka Streams line {line:?}");
                    let number = |i: usize| -> i64 {
                        fields[i]
                            .parse()
                            .unwrap_or_else(|_| panic!("bad Kafka Streams line {line:?}"))
                    };
                    (fields[0].to_string(), number(1), number(2), number(3))
                })
                .collect()
        })
        .collect()
}
