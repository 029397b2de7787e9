//! Two stages forced onto one consumer group (the `shared-group` planted
//! bug: every stage commits under the application id) make the model refuse
//! a task's start while another stage's transaction holds offsets of the
//! group pending. The harness does not crash on it: the refused start is a
//! violation of the seed that caused it, naming the task, and the report
//! carries a replay line that reproduces it in a fresh process.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::process::Command;

use parsley::mutation::Mutation;
use parsley_sim::sim::{Regressions, Simulation};

use crate::shipped;

/// The wide regrouping scenario with every stage on one group; no
/// regressions file is kept.
fn shared_group() -> Simulation {
    let scenario = shipped::scenario("regroup");
    parsley_examples::registry()
        .simulation_with(&scenario.topology, &scenario.settings)
        .unwrap()
        .seeds(scenario.seeds.range())
        .planted(Some(Mutation::SharedGroup))
        .regressions(Regressions::Off)
        .build()
        .unwrap()
}

#[test]
#[ignore = "run by a_refused_start_is_a_violation_of_its_seed_with_a_replay_line"]
fn replay_shared_group() {
    shared_group().check();
}

#[test]
fn a_refused_start_is_a_violation_of_its_seed_with_a_replay_line() {
    let simulation = shared_group();
    // Some seed's run refuses a start; it is reported, not a panic.
    let (seed, violation) = (0..60u64)
        .find_map(|seed| {
            let outcome = simulation.run_seed(seed);
            outcome
                .violations
                .into_iter()
                .find(|violation| violation.message.starts_with("refused start"))
                .map(|violation| (seed, violation))
        })
        .expect("a seed of the shared group refuses a start");
    assert!(violation.task.is_some(), "{violation}");
    assert!(violation.message.contains("could not start"), "{violation}");
    // The same seed refuses the same start again (I9).
    let again = simulation.run_seed(seed);
    assert!(
        again
            .violations
            .iter()
            .any(|other| other.message == violation.message),
        "seed {seed} did not refuse the start again"
    );
    // A whole check reports a failing seed with a replay line, and the
    // replay fails in a fresh process.
    let report =
        catch_unwind(AssertUnwindSafe(|| simulation.check())).expect_err("the shared group fails");
    let report = report.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(report.contains("seed "), "{report}");
    let start = report
        .find("PARSLEY_SIM_REPLAY=")
        .unwrap_or_else(|| panic!("no replay line in:\n{report}"));
    let replay = report[start + "PARSLEY_SIM_REPLAY=".len()..]
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    let output = Command::new(std::env::current_exe().unwrap())
        .args([
            "refused_start::replay_shared_group",
            "--exact",
            "--include-ignored",
            "--nocapture",
        ])
        .env("PARSLEY_SIM_REPLAY", &replay)
        .output()
        .expect("the test binary runs");
    assert!(!output.status.success(), "the replay of {replay} passed");
}
