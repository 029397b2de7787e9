//! X5's dead-letter opt-in through the public API: a topology the examples
//! do not have (sensor readings, refused above a limit), under the
//! TestDriver (dead letters read back, the operator's skip) and under the
//! simulator (refused records and the logic-error fault dead-lettered, I10
//! checked on every seed).

use bytes::Bytes;
use parsley::header::stamp_header;
use parsley::{Claim, DeadLetterKind, Json, Parsley, Stage, Stamp, Step, Topic, Tp, Utf8, I64};
use parsley_sim::sim::{FaultRates, Input, Simulation};
use parsley_sim::TestRecord;
use parsley_sim::{DriverError, TestDriver};

/// Readings above this are refused by the logic.
const LIMIT: i64 = 1_000;

struct Sensors {
    readings: Topic<String, i64>,
    peaks: Topic<String, i64>,
    app: parsley::App,
}

/// `peaks`: the highest reading per sensor, emitted when it rises; a
/// reading above [`LIMIT`] is an error of the logic. With `dead_letters`
/// the stage opts in to `plant-peaks-dlq`.
fn sensors(dead_letters: bool) -> Sensors {
    let readings: Topic<String, i64> = Topic::with_codecs("readings", Utf8, I64);
    let peaks: Topic<String, i64> = Topic::with_codecs("peaks", Utf8, I64);
    let out = peaks.clone();
    let stage = Stage::named("peaks")
        .state(Json, || i64::MIN)
        .on(&readings, move |peak: i64, reading| {
            let value = *reading.value();
            if value > LIMIT {
                return Err(format!("reading {value} is above the limit {LIMIT}"));
            }
            Ok(if value > peak {
                Step::of(value).emit(out.send(reading.key().cloned(), value))
            } else {
                Step::of(peak)
            })
        })
        .into(&peaks);
    let stage = if dead_letters {
        stage.dead_letter_queue().build()
    } else {
        stage.build()
    };
    let app = Parsley::named("plant")
        .stage(stage)
        .build()
        .expect("the sensors compose");
    Sensors {
        readings,
        peaks,
        app,
    }
}

/// X5 (opt-in): under the TestDriver a refused reading and a value its codec
/// refuses are dead-lettered, readable with `dead_letters`, and the task
/// keeps running: the peak is the fold of the accepted readings only.
#[test]
fn x5_dead_letter_the_driver_keeps_running_past_refused_records() {
    let sensors = sensors(true);
    let driver = TestDriver::builder(&sensors.app)
        .default_partitions(1)
        .build()
        .unwrap();
    let contracts: Vec<String> = driver
        .topic_contracts()
        .iter()
        .map(|contract| contract.name.to_string())
        .collect();
    assert!(
        contracts.contains(&"plant-peaks-dlq".to_string()),
        "{contracts:?}"
    );
    let readings = driver.input(&sensors.readings).unwrap();
    readings.pipe("s1".to_string(), 5).unwrap();
    readings.pipe("s1".to_string(), 5_000).unwrap();
    driver
        .input_raw("readings")
        .unwrap()
        .pipe_raw(
            0,
            Some(Bytes::from_static(b"s1")),
            Some(Bytes::from_static(b"??")),
            Vec::new(),
        )
        .unwrap();
    readings.pipe("s1".to_string(), 7).unwrap();

    assert!(driver.stopped_tasks().is_empty());
    let peaks = driver.output(&sensors.peaks).unwrap();
    assert_eq!(peaks.read_values().unwrap(), [5, 7]);
    assert_eq!(
        driver
            .key_slot::<i64, _, _>("peaks", &sensors.readings, &"s1".to_string())
            .unwrap(),
        Some(7)
    );
    let letters = driver.dead_letters("peaks").unwrap();
    let summary: Vec<(DeadLetterKind, u64)> = letters
        .iter()
        .map(|letter| (letter.kind, letter.offset))
        .collect();
    assert_eq!(
        summary,
        [(DeadLetterKind::Logic, 1), (DeadLetterKind::Codec, 2)]
    );
    assert_eq!(letters[0].tp, Tp::new("readings", 0));
    assert_eq!(letters[0].stage, "peaks");
    assert!(
        letters[0]
            .message
            .contains("reading 5000 is above the limit"),
        "{}",
        letters[0].message
    );
    assert_eq!(
        letters[0].value.as_deref(),
        Some(&5_000i64.to_be_bytes()[..])
    );
    assert_eq!(letters[1].value.as_deref(), Some(&b"??"[..]));
    assert_eq!(
        driver
            .metric("peaks", "records-dead-lettered-total")
            .unwrap(),
        2
    );
    assert_eq!(
        driver.metric("peaks", "records-delivered-total").unwrap(),
        4
    );
}

/// X5: without the opt-in the same refusal stops the task, and there are no
/// dead letters to read.
#[test]
fn x5_dead_letter_without_the_opt_in_the_task_stops() {
    let sensors = sensors(false);
    let driver = TestDriver::builder(&sensors.app)
        .default_partitions(1)
        .build()
        .unwrap();
    let readings = driver.input(&sensors.readings).unwrap();
    let error = readings.pipe("s1".to_string(), 5_000).unwrap_err();
    assert!(matches!(
        error,
        DriverError::Task(parsley::TaskError::Logic { offset: 0, .. })
    ));
    assert!(matches!(
        driver.dead_letters("peaks"),
        Err(DriverError::NoDeadLetterTopic { .. })
    ));
}

/// X5: the operator's skip. A poison record (its claim can never resolve)
/// stops even an opted-in task; `skip` refuses any other offset, then the
/// restarted task dead-letters exactly that record as skipped and goes on.
#[test]
fn x5_skip_the_driver_restarts_a_stopped_task_past_the_named_record() {
    let sensors = sensors(true);
    let driver = TestDriver::builder(&sensors.app)
        .default_partitions(1)
        .build()
        .unwrap();
    let readings = driver.input(&sensors.readings).unwrap();
    let tp = Tp::new("readings", 0);
    readings.pipe("s1".to_string(), 5).unwrap();
    // Claims its own offset: poison (G6).
    let poison = Stamp::from_claims([Claim::new(tp.clone(), 1)]);
    let error = readings
        .pipe_record(TestRecord::new("s1".to_string(), 9).stamped(poison))
        .unwrap_err();
    assert!(matches!(
        error,
        DriverError::Task(parsley::TaskError::UnresolvableClaim { offset: 1, .. })
    ));
    readings.pipe("s1".to_string(), 8).unwrap_err();

    let refused = driver.skip("peaks", 0, &tp, 0).unwrap_err();
    assert!(
        matches!(
            refused,
            DriverError::Skip(parsley::SkipError::Behind { next: 1, .. })
        ),
        "{refused}"
    );
    driver.skip("peaks", 0, &tp, 1).unwrap();
    assert!(driver.stopped_tasks().is_empty());
    let letters = driver.dead_letters("peaks").unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!(
        (letters[0].kind, letters[0].offset),
        (DeadLetterKind::Skipped, 1)
    );
    let peaks = driver.output(&sensors.peaks).unwrap();
    assert_eq!(peaks.read_values().unwrap(), [5, 8]);
    // A stamp header that does not decode is dead-lettered too (§8).
    driver
        .input_raw("readings")
        .unwrap()
        .pipe_raw(
            0,
            Some(Bytes::from_static(b"s2")),
            Some(Bytes::copy_from_slice(&3i64.to_be_bytes())),
            vec![parsley::Header {
                value: Bytes::from_static(&[9, 0]),
                ..stamp_header(&Stamp::empty())
            }],
        )
        .unwrap();
    let letters = driver.dead_letters("peaks").unwrap();
    assert_eq!(
        letters.last().map(|letter| letter.kind),
        Some(DeadLetterKind::BadStamp)
    );
}

/// X5, I10: simulated with refused readings and the logic-error fault, the
/// opted-in stage dead-letters them instead of stopping, and the checker
/// (I1–I8, I10) passes on every seed; some seeds really do dead-letter.
#[test]
fn x5_i10_simulated_dead_letters_pass_the_checker() {
    let sensors = sensors(true);
    let readings = sensors.readings.clone();
    let simulation = Simulation::builder(sensors.app)
        .name("sensors")
        .input(
            Input::new(&readings, |draw| (Some(draw.key()), draw.range(0, LIMIT)))
                .rejected(|draw| (Some(draw.key()), LIMIT + draw.range(1, 10))),
        )
        .partitions(2)
        .instances(2)
        .inputs(80)
        .faults(FaultRates {
            logic_error: 0.05,
            ..FaultRates::default()
        })
        .seeds(0..150)
        .build()
        .unwrap();
    let summary = simulation.check_seeds(simulation.seeds());
    assert_eq!(summary.failure, None);
    let dead_lettered = (0..20u64)
        .map(|seed| {
            let outcome = simulation.run_seed(seed);
            (0..2)
                .map(|partition| {
                    let tp = Tp::new("plant-peaks-dlq", partition);
                    outcome
                        .cluster
                        .log(&tp)
                        .map_or(0, |log| log.read_committed().count())
                })
                .sum::<usize>()
        })
        .sum::<usize>();
    assert!(dead_lettered > 0, "no seed dead-lettered anything");
}

/// X5, I10, bad input: an input that writes bytes the topic's codec refuses
/// (`Input::malformed`) takes the codec path in the simulator: the opted-in
/// stage dead-letters each as a codec refusal and the checker passes; some
/// seeds really do. Without the opt-in the task stops on it, as expected.
#[test]
fn x5_i10_simulated_malformed_records_reach_the_codec_and_the_dead_letter_topic() {
    for dead_letters in [true, false] {
        let sensors = sensors(dead_letters);
        let readings = sensors.readings.clone();
        let simulation = Simulation::builder(sensors.app)
            .name("sensors")
            .input(
                Input::new(&readings, |draw| (Some(draw.key()), draw.range(0, LIMIT)))
                    .malformed(|draw| (Some(Bytes::from(draw.key())), Bytes::from_static(b"n/a"))),
            )
            .partitions(2)
            .instances(2)
            .inputs(80)
            .faults(FaultRates {
                logic_error: 0.05,
                ..FaultRates::default()
            })
            .seeds(0..100)
            .build()
            .unwrap();
        let summary = simulation.check_seeds(simulation.seeds());
        assert_eq!(summary.failure, None, "dead letters: {dead_letters}");
        let mut kinds = Vec::new();
        for seed in 0..20u64 {
            let outcome = simulation.run_seed(seed);
            for partition in 0..2 {
                let tp = Tp::new("plant-peaks-dlq", partition);
                if let Ok(log) = outcome.cluster.log(&tp) {
                    for (_, data) in log.read_committed() {
                        kinds.push(parsley::DeadLetter::from_record(data).unwrap().kind);
                    }
                }
            }
        }
        match dead_letters {
            true => {
                assert!(!kinds.is_empty(), "no seed dead-lettered anything");
                assert!(
                    kinds.iter().all(|kind| *kind == DeadLetterKind::Codec),
                    "{kinds:?}"
                );
            }
            false => assert!(kinds.is_empty()),
        }
    }
}
