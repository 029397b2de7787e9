//! Apps with bugs of their own that used to break the simulator's report
//! (issue 22): logic that keeps state outside Parsley (S4), a stage whose
//! task stops on one key, a harness panic. Each ends in a report that names
//! the seed and the cause, with a replay line that reproduces it in a fresh
//! process; none panics the runner, and no tape that does not reproduce is
//! kept.

use std::collections::HashSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::{panic_text, replay_value, rerun};
use parsley::{App, Parsley, Stage, Step, Topic, Utf8, I64};
use parsley_sim::sim::{Input, Regressions, Simulation, SimulationBuilder};

fn views() -> Topic<String, i64> {
    Topic::with_codecs("views", Utf8, I64)
}

fn counts() -> Topic<String, i64> {
    Topic::with_codecs("counts", Utf8, I64)
}

/// Views with a unique-ish id as their value, on a few keys.
fn knobs(builder: SimulationBuilder) -> SimulationBuilder {
    builder
        .input(Input::new(&views(), |draw| {
            (Some(draw.key()), draw.range(1, 1_000_000))
        }))
        .partitions(2)
        .instances(2)
        .inputs(40)
        .keys(5)
        .budget(600, 3_000)
        .seeds(0..40)
}

/// An app `name` whose stage "count" counts views per key, each view
/// adding `bump` of its id (0: the count stays, and nothing is written).
fn counting(name: &str, bump: impl Fn(i64) -> i64 + Send + Sync + 'static) -> App {
    let counts = counts();
    let count = Stage::named("count")
        .state(I64, || 0i64)
        .on(&views(), move |count: i64, view| {
            match bump(*view.value()) {
                0 => Step::of(count),
                bump => Step::of(count + bump).emit(counts.send(view.key().cloned(), count + bump)),
            }
        })
        .into(&self::counts())
        .build();
    Parsley::named(name).stage(count).build().unwrap()
}

/// A count per key that skips ids it has "seen": a dedupe set in memory,
/// outside Parsley's state, so a redelivery after an abort is skipped and
/// the set outlives the run.
fn dedupe_app() -> App {
    let seen: Arc<Mutex<HashSet<i64>>> = Arc::default();
    counting("dedupe", move |id| {
        i64::from(seen.lock().unwrap().insert(id))
    })
}

/// A fold wrong once in a thousand calls, counted by a static: no run of
/// its own can make it pure.
fn once_in_a_thousand_app() -> App {
    static CALLS: AtomicU64 = AtomicU64::new(0);
    counting("thousand", |_| {
        let call = CALLS.fetch_add(1, Ordering::Relaxed) + 1;
        if call % 1000 == 0 {
            2
        } else {
            1
        }
    })
}

/// The fold pushes each view into a buffer shared with the tick, which
/// flushes it as one sum.
fn shared_buffer_app() -> App {
    let buffer: Arc<Mutex<Vec<i64>>> = Arc::default();
    let sums: Topic<String, i64> = Topic::with_codecs("sums", Utf8, I64);
    let batch = Stage::named("batch")
        .state(I64, || 0i64)
        .on(&views(), {
            let buffer = Arc::clone(&buffer);
            move |seen: i64, view| {
                buffer.lock().unwrap().push(*view.value());
                Step::of(seen + 1)
            }
        })
        .tick_fold(Duration::from_millis(200), {
            let sums = sums.clone();
            move |flushes: i64, _tick| {
                let sum: i64 = buffer.lock().unwrap().drain(..).sum();
                Step::of(flushes + 1).emit(sums.send(None, sum))
            }
        })
        .into(&sums)
        .build();
    Parsley::named("buffer").stage(batch).build().unwrap()
}

/// Forwards views, but sends key `k3`'s to a topic the stage never
/// declared (S3): its task stops on the first one.
fn undeclared_sink_app() -> App {
    let counts = counts();
    let elsewhere: Topic<String, i64> = Topic::with_codecs("elsewhere", Utf8, I64);
    let forward = Stage::named("forward")
        .on(&views(), move |view| {
            let topic = if view.key().map(String::as_str) == Some("k3") {
                &elsewhere
            } else {
                &counts
            };
            vec![topic.send(view.key().cloned(), *view.value())]
        })
        .into(&self::counts())
        .build();
    Parsley::named("forward").stage(forward).build().unwrap()
}

/// The report `check` panics with.
fn report_of(simulation: &Simulation) -> String {
    panic_text(catch_unwind(AssertUnwindSafe(|| simulation.check())).expect_err("check fails"))
}

/// The seed the report's first line names.
fn seed_of(report: &str) -> u64 {
    let after = report
        .split("seed ")
        .nth(1)
        .expect("the report names a seed");
    let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().expect("a seed number")
}

/// The report of `simulation` failing, its tapes kept in a regressions
/// file of its own (`kept(name)`), and that file.
fn failing(simulation: fn(Regressions) -> Simulation, name: &str) -> (PathBuf, String) {
    let kept = kept(name);
    let report = report_of(&simulation(Regressions::File(kept.clone())));
    (kept, report)
}

/// A regressions file of this test's own, absent.
fn kept(name: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("parsley-sim-{name}-{}.txt", std::process::id()));
    let _ = std::fs::remove_file(&path);
    path
}

/// Both the report's replay lines, seed and tape, run `replay_test` in a
/// fresh process, which fails saying each of `says`.
fn both_replays_fail(report: &str, replay_test: &str, says: &[&str]) {
    for kind in ["seed", "tape"] {
        let (passed, output) = rerun(replay_test, replay_value(report, kind));
        assert!(!passed, "the {kind} replay passed:\n{output}");
        for said in says {
            assert!(output.contains(said), "{output}");
        }
    }
}

/// A report of impure logic names the seed, S4 and the stage, has a seed
/// replay line, keeps no tape, and its replay fails with S4 in a fresh
/// process.
fn assert_impure(report: &str, stage: &str, replay_test: &str, kept: &std::path::Path) {
    assert!(report.contains("seed "), "{report}");
    assert!(
        report.contains("S4 (logic is not a pure function)"),
        "{report}"
    );
    assert!(report.contains(stage), "{report}");
    assert!(!report.contains("PARSLEY_SIM_REPLAY=tape="), "{report}");
    assert!(
        !kept.exists(),
        "a tape that does not reproduce was kept:\n{report}"
    );
    let (passed, output) = rerun(replay_test, replay_value(report, "seed"));
    assert!(!passed, "the replay passed:\n{output}");
    assert!(
        output.contains("S4 (logic is not a pure function)"),
        "{output}"
    );
}

/// `builder` with the `knobs`, keeping failing tapes as `regressions`
/// says.
fn simulation(builder: SimulationBuilder, regressions: Regressions) -> Simulation {
    knobs(builder).regressions(regressions).build().unwrap()
}

fn dedupe_shared(regressions: Regressions) -> Simulation {
    simulation(Simulation::builder(dedupe_app()), regressions)
}

#[test]
#[ignore = "run by an_impure_dedupe_fold_is_named_s4"]
fn replay_dedupe_shared() {
    dedupe_shared(Regressions::Off).check();
}

#[test]
fn an_impure_dedupe_fold_is_named_s4() {
    let (kept, report) = failing(dedupe_shared, "dedupe");
    assert_impure(
        &report,
        "count",
        "impure_logic::replay_dedupe_shared",
        &kept,
    );
}

fn thousand(regressions: Regressions) -> Simulation {
    knobs(Simulation::builder(once_in_a_thousand_app()))
        .seeds(0..60)
        .regressions(regressions)
        .build()
        .unwrap()
}

#[test]
#[ignore = "run by a_fold_wrong_once_in_a_thousand_calls_is_named_s4"]
fn replay_thousand() {
    thousand(Regressions::Off).check();
}

#[test]
fn a_fold_wrong_once_in_a_thousand_calls_is_named_s4() {
    let (kept, report) = failing(thousand, "thousand");
    assert_impure(&report, "count", "impure_logic::replay_thousand", &kept);
}

fn shared_buffer(regressions: Regressions) -> Simulation {
    simulation(Simulation::builder(shared_buffer_app()), regressions)
}

#[test]
#[ignore = "run by a_tick_flushing_a_shared_buffer_is_named_s4"]
fn replay_shared_buffer() {
    shared_buffer(Regressions::Off).check();
}

/// The buffer is shared by the stage's two tasks, so a tick of one flushes
/// the views of the other: deterministic within a run (the simulator runs
/// one step at a time), so the seed fails the same way every time and its
/// shrunk tape is kept; the report says the logic's outputs differ from a
/// second call of it, naming S4 as the likely cause, and both replay lines
/// reproduce it.
#[test]
fn a_tick_flushing_a_shared_buffer_is_named_s4() {
    let (kept, report) = failing(shared_buffer, "buffer");
    assert!(report.contains("seed "), "{report}");
    assert!(report.contains("batch/"), "{report}");
    if report.contains("fails S4 (logic is not a pure function)") {
        // Found by two threads racing on the buffer: a replay in a fresh
        // process runs alone, so it reproduces the I7 it causes, or S4.
        assert!(!report.contains("PARSLEY_SIM_REPLAY=tape="), "{report}");
        assert!(!kept.exists(), "a non-reproducing tape was kept");
        let (passed, output) = rerun(
            "impure_logic::replay_shared_buffer",
            replay_value(&report, "seed"),
        );
        assert!(!passed, "the replay passed:\n{output}");
        assert!(
            output.contains("I7") || output.contains("S4 (logic"),
            "{output}"
        );
        return;
    }
    assert!(report.contains("I7"), "{report}");
    assert!(
        report.contains("not a pure function of them (S4)"),
        "{report}"
    );
    assert!(kept.exists(), "a reproducing tape is kept:\n{report}");
    let _ = std::fs::remove_file(&kept);
    both_replays_fail(&report, "impure_logic::replay_shared_buffer", &["I7"]);
}

fn dedupe_per_run(regressions: Regressions) -> Simulation {
    simulation(Simulation::builder_fn(dedupe_app), regressions)
}

#[test]
#[ignore = "run by with_an_app_per_run_the_dedupe_fold_is_named_s4_and_shrinks"]
fn replay_dedupe_per_run() {
    dedupe_per_run(Regressions::Off).check();
}

/// S4, named outright: with an application per run, seeds are independent
/// and the dedupe set still skips redeliveries within a run. The checker
/// finds a committed delivery its replay disagrees with, calls the logic
/// again in a fresh application, gets another answer, and names S4 rather
/// than I7; the run is deterministic, so it shrinks and its kept tape
/// reproduces it.
#[test]
fn with_an_app_per_run_the_dedupe_fold_is_named_s4_and_shrinks() {
    let (kept, report) = failing(dedupe_per_run, "dedupe-per-run");
    assert!(
        report.contains("fails S4 (logic is not a pure function)"),
        "{report}"
    );
    assert!(report.contains("keeps state outside Parsley"), "{report}");
    assert!(report.contains("count/"), "{report}");
    assert!(
        !report.contains("either Parsley broke"),
        "S4 is named outright, not as one of two causes:\n{report}"
    );
    assert!(report.contains("\nShrink: "), "{report}");
    let text = std::fs::read_to_string(&kept).expect("the shrunk tape is kept");
    assert!(text.contains("with_an_app_per_run"), "{text}");
    let _ = std::fs::remove_file(&kept);
    both_replays_fail(
        &report,
        "impure_logic::replay_dedupe_per_run",
        &["the replayed run fails", "S4 (logic"],
    );
}

/// The pure version of the same app passes with an app per run, and the
/// sampled re-runs find every run deterministic.
#[test]
fn a_pure_app_per_run_passes() {
    let app = || counting("pure", |_| 1);
    let summary = knobs(Simulation::builder_fn(app))
        .build()
        .unwrap()
        .check_seeds(0..40);
    assert!(summary.failure.is_none(), "{}", summary.failure.unwrap());
}

fn undeclared(regressions: Regressions) -> Simulation {
    simulation(Simulation::builder(undeclared_sink_app()), regressions)
}

#[test]
#[ignore = "run by a_task_that_stops_on_one_key_is_a_violation"]
fn replay_undeclared() {
    undeclared(Regressions::Off).check();
}

/// A stage that emits to an undeclared topic for one key stops its task:
/// the report names the task, the record and the error, and both replay
/// lines reproduce it.
#[test]
fn a_task_that_stops_on_one_key_is_a_violation() {
    let (kept, report) = failing(undeclared, "undeclared");
    assert!(report.contains("unexpected stop"), "{report}");
    assert!(report.contains("task forward/"), "{report}");
    assert!(report.contains("elsewhere"), "{report}");
    assert!(report.contains("stopped on views-"), "{report}");
    let seed = seed_of(&report);
    assert!(report.contains(&format!("seed={seed}")), "{report}");
    assert!(kept.exists(), "a reproducing tape is kept:\n{report}");
    let _ = std::fs::remove_file(&kept);
    both_replays_fail(
        &report,
        "impure_logic::replay_undeclared",
        &["unexpected stop"],
    );
}

/// Most seeds stop the task, and every one of them is flagged; a stop the
/// user declares is not.
#[test]
fn every_seed_with_the_stop_is_flagged_unless_declared() {
    let simulation = undeclared(Regressions::Off);
    let mut flagged = 0;
    for seed in 0..30 {
        let outcome = simulation.run_seed(seed);
        let stopped = outcome
            .trace
            .iter()
            .any(|entry| matches!(&entry.event, parsley_sim::sim::Event::TaskStopped { .. }));
        let violated = outcome
            .violations
            .iter()
            .any(|violation| violation.message.starts_with("unexpected stop"));
        assert_eq!(stopped, violated, "seed {seed}: {:?}", outcome.violations);
        flagged += usize::from(violated);
    }
    assert!(flagged >= 20, "only {flagged} of 30 seeds stopped the task");

    let summary = knobs(Simulation::builder(undeclared_sink_app()))
        .expect_stop(
            "k3's views go to a topic the stage does not declare",
            |stop| stop.stage == "forward" && stop.error.contains("elsewhere"),
        )
        .build()
        .unwrap()
        .check_seeds(0..30);
    assert!(summary.failure.is_none(), "{}", summary.failure.unwrap());
}

/// An input generator that panics fails its seed, named, with the panic's
/// message; the other seeds run and the runner does not panic.
#[test]
fn a_panic_in_a_run_is_a_violation_of_its_seed() {
    let app = || counting("panicky", |_| 1);
    let summary = Simulation::builder_fn(app)
        .input(Input::new(&views(), |draw| {
            let value = draw.range(1, 100);
            assert!(value != 7, "the generator cannot make a view worth 7");
            (Some(draw.key()), value)
        }))
        .inputs(40)
        .budget(600, 3_000)
        .build()
        .unwrap()
        .check_seeds(0..40);
    let failure = summary.failure.expect("some seed draws a 7");
    assert!(failure.contains("the run panicked"), "{failure}");
    assert!(failure.contains("cannot make a view worth 7"), "{failure}");
    assert!(failure.contains("seed "), "{failure}");
}

/// An expiring fold that counts each key's new ids, "new" decided by a set
/// its closure captures: a redelivery after an abort is not counted.
fn expiring_dedupe_app() -> App {
    let seen: Arc<Mutex<HashSet<i64>>> = Arc::default();
    let counts = counts();
    let dedupe = Stage::named("expiring-dedupe")
        .expiring(parsley::Expiring::after(Duration::from_secs(5)))
        .fold(
            &views(),
            I64,
            || 0i64,
            move |count: i64, view| match seen.lock().unwrap().insert(*view.value()) {
                true => Step::of(count + 1).emit(counts.send(view.key().cloned(), count + 1)),
                false => Step::of(count),
            },
        )
        .into(&self::counts())
        .build();
    Parsley::named("expiring-dedupe")
        .stage(dedupe)
        .build()
        .unwrap()
}

/// Tumbling windows summing each key's new ids, "new" decided by a set the
/// aggregator captures.
fn windowed_dedupe_app() -> App {
    use parsley::{Emit, Windowed, WindowedCodec, Windows};
    let seen: Arc<Mutex<HashSet<i64>>> = Arc::default();
    let sums: Topic<Windowed<String>, i64> = Topic::with_codecs("sums", WindowedCodec(Utf8), I64);
    let windows = Stage::named("windowed-dedupe")
        .windowed(Windows::tumbling(Duration::from_millis(500)))
        .aggregate(
            &views(),
            I64,
            || 0i64,
            move |sum: i64, view| match seen.lock().unwrap().insert(*view.value()) {
                true => sum + 1,
                false => sum,
            },
        )
        .into(&sums)
        .emit(Emit::OnUpdate)
        .build();
    Parsley::named("windowed-dedupe")
        .stage(windows)
        .build()
        .unwrap()
}

fn expiring_dedupe(regressions: Regressions) -> Simulation {
    simulation(Simulation::builder_fn(expiring_dedupe_app), regressions)
}

fn windowed_dedupe(regressions: Regressions) -> Simulation {
    simulation(Simulation::builder_fn(windowed_dedupe_app), regressions)
}

/// The report of an operator whose user logic keeps state outside Parsley
/// leads with S4, blaming the user's logic of the stage, in the headline
/// and in the shrunk run, and not the operator's invariant.
fn assert_operator_impure(report: &str, stage: &str, invariant: &str) {
    let headline = report.lines().next().unwrap_or_default();
    assert!(
        headline.contains("S4 (logic is not a pure function)"),
        "the headline names S4:\n{report}"
    );
    assert!(
        report.contains(&format!("of stage `{stage}`, given the same input")),
        "the S4 finding names the user's logic of the operator's stage:\n{report}"
    );
    assert!(
        !report.contains(&format!("fails {invariant}")),
        "the operator's invariant is not blamed:\n{report}"
    );
    let shrunk = report
        .split("\nShrink: ")
        .nth(1)
        .unwrap_or_else(|| panic!("the run is shrunk:\n{report}"));
    let first = shrunk.lines().nth(1).unwrap_or_default();
    assert!(
        first.contains("S4 (logic is not a pure function)"),
        "the shrunk run's first finding is S4, not {invariant}: {first}\n{report}"
    );
}

#[test]
#[ignore = "run by s4_an_impure_expiring_fold_is_named_s4_before_i14"]
fn replay_expiring_dedupe() {
    expiring_dedupe(Regressions::Off).check();
}

/// S4 before I14: the oracle of expiring state makes its calls of the
/// user's fold again when a delivery disagrees with it, and names S4.
#[test]
fn s4_an_impure_expiring_fold_is_named_s4_before_i14() {
    let (kept, report) = failing(expiring_dedupe, "expiring-dedupe");
    let _ = std::fs::remove_file(&kept);
    assert_operator_impure(&report, "expiring-dedupe", "I14");
}

#[test]
#[ignore = "run by s4_an_impure_window_aggregator_is_named_s4_before_i12"]
fn replay_windowed_dedupe() {
    windowed_dedupe(Regressions::Off).check();
}

/// S4 before I12: the same for a windowed aggregation's fold.
#[test]
fn s4_an_impure_window_aggregator_is_named_s4_before_i12() {
    let (kept, report) = failing(windowed_dedupe, "windowed-dedupe");
    let _ = std::fs::remove_file(&kept);
    assert_operator_impure(&report, "windowed-dedupe", "I12");
}
