//! The simulator over every shipped scenario: every seed of each scenario's
//! range passes; every planted bug is caught by the invariant it breaks
//! and reported on a task and a record;
//! runs are deterministic (I9).

use parsley::mutation::Mutation;
use parsley_examples::planted::{ALSO_PLANTED, PLANTED};
use parsley_sim::sim::{Event, Invariant, Relation, RunOutcome, Simulation, Violation};

use crate::shipped;

fn load(name: &str) -> Simulation {
    shipped::shipped(name)
}

/// Every shipped scenario: one per example topology, named after it
/// (`scenario.rs` checks the folder holds exactly these).
fn scenarios() -> Vec<String> {
    let registry = parsley_examples::registry();
    registry.names().into_iter().map(String::from).collect()
}

/// Runs `seeds` over all cores; the lowest failing one, written up.
fn failure(simulation: &Simulation, seeds: std::ops::Range<u64>) -> Option<String> {
    simulation.check_seeds(seeds).failure
}

/// I1–I8 hold on every seed of every shipped scenario, and the range
/// reaches every mark the topology's shape allows (X3, X4, G2, T5; see
/// `shipped::unreachable`).
///
/// Minutes long (every seed of every shipped scenario): CI runs it in a
/// step of its own (`.ci/run`, "slow tests"), not README's `cargo test`.
#[test]
#[ignore = "minutes long: CI runs it in its own step (`-- --ignored`)"]
fn every_scenario_passes_its_whole_seed_range() {
    for name in scenarios() {
        let simulation = load(&name);
        let summary = simulation.check_seeds(simulation.seeds());
        if let Some(failure) = summary.failure {
            panic!("{failure}\nshrink it: cargo run -p parsley-examples -- shrink scenarios/{name}.toml --seed SEED");
        }
        let missed = shipped::missed(&name, &summary.stats.marks);
        assert!(missed.is_empty(), "{name} never reached {missed:?}");
    }
}

/// The checker catches every planted bug within the first seeds of the
/// scenario's default range, with the invariant the bug breaks.
#[test]
fn every_planted_bug_is_caught_by_its_invariant() {
    for (planted, name, invariant) in PLANTED {
        assert_caught_within_50_seeds(planted, name, invariant);
    }
}

/// No planted bug hangs on one scenario: each is caught by a second
/// shipped scenario of another shape too (`ALSO_PLANTED`), but for the few
/// only one shape can reach, each with its reason (`ONE_SHAPE_ONLY`).
#[test]
fn every_planted_bug_is_caught_by_a_second_scenario() {
    for (planted, name, invariant) in ALSO_PLANTED {
        assert_caught_within_50_seeds(planted, name, invariant);
    }
}

/// The run of the first of scenario `name`'s first `seeds` seeds, with
/// `planted` planted, that `invariant` reports (or any invariant, for
/// `None`).
fn first_caught_run(
    planted: Mutation,
    name: &str,
    seeds: u64,
    invariant: Option<Invariant>,
) -> Option<RunOutcome> {
    let simulation = shipped::planted(&shipped::scenario(name), Some(planted));
    let start = simulation.seeds().start;
    (start..start + seeds).find_map(|seed| {
        let outcome = simulation.run_seed(seed);
        let caught = outcome
            .violations
            .iter()
            .any(|violation| invariant.is_none_or(|invariant| violation.invariant == invariant));
        caught.then_some(outcome)
    })
}

fn assert_caught_within_50_seeds(planted: Mutation, name: &str, invariant: Invariant) {
    assert!(
        first_caught_run(planted, name, 50, Some(invariant)).is_some(),
        "{} went unnoticed by {invariant} over 50 seeds of {name}",
        planted.name()
    );
}

/// Boundary-seeking time: a bug that shows only when something happens at
/// exactly a deadline or an edge, or the millisecond beside it (a tick, a
/// timer's due time, a window's close or start, an expiry, a restart while
/// a timer is overdue, the end of a wait for a caught-up source)
/// fails within the first 10 seeds of its shipped scenario at its default
/// size. Under uniform time most of them take tens of seeds
/// (BENCHMARKS.md, "Time and order strategies").
#[test]
fn boundary_bugs_are_caught_within_ten_seeds() {
    const BOUNDARY_BUGS: [Mutation; 8] = [
        Mutation::TimerFiresOneMsEarly,
        Mutation::TimerSkipsExactDue,
        Mutation::TickOneMsEarly,
        Mutation::ExpiryOneMsEarly,
        Mutation::WindowGraceOffByOne,
        Mutation::TimerLostWhenOverdueAtStart,
        Mutation::HoppingWindowSkipsStart,
        Mutation::SyncWaitEndsEarly,
    ];
    for planted in BOUNDARY_BUGS {
        let (_, name, invariant) = PLANTED
            .into_iter()
            .find(|(mutation, _, _)| *mutation == planted)
            .expect("every boundary bug has a row");
        assert!(
            first_caught_run(planted, name, 10, Some(invariant)).is_some(),
            "{} went unnoticed by {invariant} over the first 10 seeds of {name}",
            planted.name()
        );
    }
}

/// The first of scenario `name`'s first 50 seeds that violates `invariant`
/// with `planted` planted, and that violation.
fn first_caught(planted: Mutation, name: &str, invariant: Invariant) -> (RunOutcome, Violation) {
    let outcome = first_caught_run(planted, name, 50, Some(invariant))
        .unwrap_or_else(|| panic!("{} is not caught by {invariant}", planted.name()));
    let violation = outcome
        .violations
        .iter()
        .find(|violation| violation.invariant == invariant)
        .cloned()
        .expect("the run was caught by it");
    (outcome, violation)
}

/// Every planted bug of the table, on its shipped scenario, is reported on
/// a task and (unless it is about a tick check or a slot) on a record the
/// entry it points at concerns. The table's bugs need every example's
/// shape, so this stays with the shipped scenarios; the report's own tests
/// (`sim/tests/report.rs`) run on the harness's fan-in.
#[test]
fn every_planted_bug_is_reported_on_a_task_and_a_record() {
    for (planted, name, invariant) in PLANTED {
        let (outcome, violation) = first_caught(planted, name, invariant);
        assert!(
            violation.task.is_some(),
            "{}: {violation} names no task",
            planted.name()
        );
        // Lost ticks, wrong state and a shared group are about a tick
        // check, a slot and a group's positions, not about one record.
        let about_a_record = !matches!(
            violation.message.as_str(),
            message if message.contains("emitted no tick")
                || message.contains("committed slot")
                || message.contains("holds committed positions")
        );
        if !about_a_record {
            continue;
        }
        let (tp, offset) = violation
            .record
            .clone()
            .unwrap_or_else(|| panic!("{}: {violation} names no record", planted.name()));
        let entry = &outcome.trace[violation.entry_in(&outcome.trace).unwrap()];
        assert!(
            entry.event.concerns(&tp, offset),
            "{}: {violation} points at {}",
            planted.name(),
            entry.event
        );
        match invariant {
            Invariant::I5 => {
                assert!(violation.stamp.is_some(), "{violation}");
                let delivering = violation
                    .related
                    .iter()
                    .find(|related| related.relation == Relation::Delivering);
                // An emission names the delivery it was made in; a tick,
                // made at a tick check, names none.
                match (&entry.event, delivering) {
                    (Event::Delivered { tp, offset, .. }, Some(delivering)) => assert!(
                        *tp == delivering.tp && *offset == delivering.offset,
                        "{violation}: {}",
                        entry.event
                    ),
                    (Event::TickChecked { .. }, None) => {}
                    (event, _) => panic!("{violation}: {event}"),
                }
            }
            Invariant::I1 => assert!(!violation.related.is_empty(), "{violation}"),
            _ => {}
        }
    }
}

/// Coverage where the bug lives: a checkpoint that keeps only its first 16
/// tps (a fixed-size buffer) is caught by the wide `regroup` scenario (24
/// partitions, histories of dozens of tps) and by `branches` (forty
/// ledgers), and by no other shipped scenario, whose histories stay small.
#[test]
fn a_checkpoint_cut_at_16_tps_is_caught_only_by_the_wide_scenario() {
    for name in scenarios() {
        let caught = first_caught_run(Mutation::CheckpointKeeps16Tps, &name, 30, None).is_some();
        let wide = ["regroup", "branches"].contains(&name.as_str());
        assert_eq!(caught, wide, "scenario {name}");
    }
}

/// G2, coverage where the bug lives: a gate that finds a claim's lane by
/// its topic alone (taking a claim on another partition of a consumed
/// topic for one on its own partition) is caught by the scenarios whose
/// records claim another partition of a topic their task consumes:
/// `regroup`, held behind claims on another topic, and `order-labels`,
/// whose responses claim left records of every partition their respond
/// task read subscriptions from; by no other shipped scenario: `fan-in`'s
/// orders claim only the payment of their own partition number, so there
/// the bug changes nothing.
#[test]
fn g2_a_gate_matching_claims_by_topic_alone_is_caught_where_claims_cross_partitions() {
    for name in scenarios() {
        let caught = first_caught_run(Mutation::GateMatchesTopicOnly, &name, 30, None)
            .map(|run| run.violations);
        let crossing = match name.as_str() {
            // Waited for on the task's own partition of `clicks`.
            "regroup" => Some("clicks-"),
            // Waited for on the task's own partition of the left table.
            "order-labels" => Some("order-customers-"),
            _ => None,
        };
        assert_eq!(caught.is_some(), crossing.is_some(), "scenario {name}");
        if let (Some(violations), Some(topic)) = (caught, crossing) {
            assert_eq!(violations[0].invariant, Invariant::I8, "{}", violations[0]);
            assert!(violations[0].message.contains(topic), "{}", violations[0]);
        }
    }
}

/// X5, I10, bad input, coverage where the bug lives: a codec refusal
/// dead-lettered without its value is caught by the scenarios whose input
/// writes bytes the codec refuses (`Input::malformed`): `bad-bytes`, and
/// `storefront`'s payments, which its stream–stream join dead-letters; by
/// no other shipped scenario: `dead-letter`'s refusals are the logic's,
/// whose dead letters the bug leaves alone.
#[test]
fn i10_a_codec_dead_letter_without_its_value_is_caught_only_by_malformed_input() {
    for name in scenarios() {
        let caught = first_caught_run(Mutation::CodecDeadLetterLosesValue, &name, 30, None)
            .map(|run| run.violations);
        let malformed_input = ["bad-bytes", "storefront"].contains(&name.as_str());
        assert_eq!(caught.is_some(), malformed_input, "scenario {name}");
        if let Some(violations) = caught {
            assert_eq!(violations[0].invariant, Invariant::I10, "{}", violations[0]);
            assert!(
                violations[0]
                    .message
                    .contains("does not hold the key and value"),
                "{}",
                violations[0]
            );
        }
    }
}

/// Without a planted bug the same seeds pass: the detections above are the
/// bugs', not the checker's.
#[test]
fn the_mutation_seeds_pass_without_the_mutation() {
    for name in [
        "fan-in",
        "balances",
        "audit-cut",
        "dead-letter",
        "bad-bytes",
        "regroup",
    ] {
        let simulation = load(name);
        let start = simulation.seeds().start;
        assert_eq!(failure(&simulation, start..start + 50), None);
    }
}

/// I9: the same seed gives the same trace and tape, and replaying the tape
/// gives the same trace again.
#[test]
fn i9_runs_are_deterministic_and_tapes_replay_them() {
    for name in scenarios() {
        let simulation = load(&name);
        let first = simulation.run_seed(7);
        let second = simulation.run_seed(7);
        assert_eq!(
            first.trace_hash, second.trace_hash,
            "{name}: seed 7 ran two ways"
        );
        assert_eq!(first.tape, second.tape);
        let replayed = simulation.run_tape(&first.tape);
        assert_eq!(
            replayed.trace_hash, first.trace_hash,
            "{name}: the tape does not replay the run"
        );
        assert_eq!(replayed.trace, first.trace);
        assert_ne!(
            simulation.run_seed(8).trace_hash,
            first.trace_hash,
            "{name}: seeds 7 and 8 ran alike"
        );
    }
}

/// A step budget too short for the workload does not drop inputs: the ones
/// the safety phase did not reach are produced when faults stop, counted as
/// such, and delivered and checked like the rest.
#[test]
fn a_short_safety_phase_still_runs_the_whole_workload() {
    let mut scenario = shipped::scenario("balances");
    scenario.settings.budget.safety_steps = 20;
    // Every input record in the trace is then one of the workload's.
    scenario.settings.faults.logic_error = 0.0;
    scenario.settings.faults.hanging_transaction = 0.0;
    let inputs = scenario.settings.workload.inputs;
    let simulation = shipped::simulation(&scenario);
    let mut some_in_safety = false;
    for seed in 0..5 {
        let outcome = simulation.run_seed(seed);
        assert!(
            outcome.violations.is_empty(),
            "seed {seed}: {:?}",
            outcome.violations
        );
        assert_eq!(outcome.stats.inputs, inputs, "seed {seed}");
        // Twenty steps reach few inputs, or (a seed in ten) none.
        assert!(
            outcome.stats.inputs_after_faults > 0,
            "seed {seed}: {} of {inputs} inputs came after the faults",
            outcome.stats.inputs_after_faults
        );
        some_in_safety |= outcome.stats.inputs_after_faults < inputs;
        let produced = outcome
            .trace
            .iter()
            .filter(|entry| matches!(entry.event, Event::InputProduced { .. }))
            .count() as u64;
        assert_eq!(produced, inputs, "seed {seed}: inputs in the trace");
        assert!(
            outcome.stats.deliveries >= inputs,
            "seed {seed}: {} deliveries of {inputs} inputs",
            outcome.stats.deliveries
        );
    }
    assert!(
        some_in_safety,
        "no seed produced an input in the safety phase"
    );
}

/// Faults really happen: over a few seeds every scenario reaches aborts,
/// crashes or fences, and the fan-in holds records behind claims.
#[test]
fn the_simulator_reaches_the_hard_cases() {
    let simulation = load("fan-in");
    let mut marks = parsley_sim::sim::Marks::default();
    let (mut aborts, mut crashes, mut fences) = (0, 0, 0);
    for seed in 0..20 {
        let outcome = simulation.run_seed(seed);
        marks.add(&outcome.stats.marks);
        aborts += outcome.stats.aborts;
        crashes += outcome.stats.crashes;
        fences += outcome.stats.fences;
    }
    for (mark, count) in marks.named() {
        assert!(count > 0, "fan-in never reached: {mark}");
    }
    assert!(
        aborts > 0 && crashes > 0 && fences > 0,
        "aborts {aborts}, crashes {crashes}, fences {fences}"
    );
}

/// I2: a committed position past records the committed history never
/// delivered is reported even when the task stopped on a poison record
/// (balances with positions committed past held records: a task stops at a
/// negative amount and the records before it are lost). Some seed among the
/// first twenty shows it.
#[test]
fn i2_position_past_undelivered_records_of_a_stopped_task_is_reported() {
    let simulation = shipped::planted(
        &shipped::scenario("balances"),
        Some(Mutation::PositionsPastHeld),
    );
    let found = (0..20).find_map(|seed| {
        simulation
            .run_seed(seed)
            .violations
            .into_iter()
            .find(|violation| violation.message.contains("committed position"))
    });
    let violation = found.expect("a seed reports the committed position");
    assert_eq!(
        violation.invariant,
        parsley_sim::sim::Invariant::I2,
        "{violation}"
    );
    assert!(violation.message.contains("never delivered"), "{violation}");
}

/// Q1 and I20 on the scenarios that ask queries: over their first 30
/// seeds, queries are answered with a slot's state and with none, and
/// refused by an instance that does not own the key's task; every answer
/// is the committed state (no violation at all). A query draws off the
/// tape: the same seeds without `[queries]` draw the same tape and trace
/// the same entries but the queries'.
#[test]
fn i20_queries_answer_committed_state_and_leave_every_step_unchanged() {
    for name in ["balances", "dedupe"] {
        let scenario = shipped::scenario(name);
        assert!(
            scenario.settings.queries.is_some(),
            "{name} asks no queries"
        );
        let simulation = shipped::simulation(&scenario);
        let mut without = scenario.clone();
        without.settings.queries = None;
        let plain = shipped::simulation(&without);
        let (mut state, mut none, mut not_owner) = (0, 0, 0);
        for seed in 0..30 {
            let outcome = simulation.run_seed(seed);
            assert!(
                outcome.violations.is_empty(),
                "{name} seed {seed}: {}",
                outcome.violations[0]
            );
            for entry in &outcome.trace {
                match &entry.event {
                    Event::Queried {
                        answer: Ok(Some(_)),
                        ..
                    } => state += 1,
                    Event::Queried {
                        answer: Ok(None), ..
                    } => none += 1,
                    Event::Queried {
                        answer: Err("not the owner"),
                        ..
                    } => not_owner += 1,
                    _ => {}
                }
            }
            let other = plain.run_seed(seed);
            assert_eq!(
                outcome.tape, other.tape,
                "{name} seed {seed}: the tapes differ"
            );
            let steps: Vec<_> = outcome
                .trace
                .iter()
                .filter(|entry| !matches!(entry.event, Event::Queried { .. }))
                .collect();
            assert!(
                steps.iter().copied().eq(other.trace.iter()),
                "{name} seed {seed}: the queries changed the run"
            );
        }
        assert!(
            state > 0 && none > 0 && not_owner > 0,
            "{name}: {state} answered with state, {none} with none, {not_owner} refused as not the owner"
        );
    }
}

/// I19 and S6 on the scenarios that model the local disk: over their first
/// 60 seeds, crashes draw every kind of disk fault, starts restore through
/// a local store and some rebuild it, and every restore equals the
/// committed changelog's state (no violation at all); the same runs
/// without `[local_disk]` restore nothing through a store.
#[test]
fn i19_restores_through_a_damaged_local_disk_equal_the_committed_changelog() {
    for name in ["balances", "dedupe"] {
        let scenario = shipped::scenario(name);
        assert!(
            scenario.settings.local_disk.is_some(),
            "{name} models no disk"
        );
        let simulation = shipped::simulation(&scenario);
        let mut faults = std::collections::BTreeSet::new();
        let (mut restores, mut rebuilds) = (0, 0);
        for seed in 0..60 {
            let outcome = simulation.run_seed(seed);
            assert!(
                outcome.violations.is_empty(),
                "{name} seed {seed}: {}",
                outcome.violations[0]
            );
            restores += outcome.stats.store_restores;
            rebuilds += outcome.stats.store_rebuilds;
            for entry in &outcome.trace {
                if let Event::DiskFault { fault, .. } = &entry.event {
                    faults.insert(*fault);
                }
            }
        }
        assert!(
            restores > 0 && rebuilds > 0,
            "{name}: {restores} restores, {rebuilds} rebuilt"
        );
        assert_eq!(faults.len(), 6, "{name} drew only {faults:?}");
        let mut without = scenario.clone();
        without.settings.local_disk = None;
        let outcome = shipped::simulation(&without).run_seed(0);
        assert_eq!(outcome.stats.store_restores, 0);
    }
}
