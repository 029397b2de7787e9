//! Failing runs: shrinking their tapes and writing them up.

use std::fmt::Write;

use crate::sim::checker::Invariant;
use crate::sim::run::RunOutcome;
use crate::sim::shrink::shrink;
use crate::sim::simulation::Simulation;
use crate::sim::trace::Event;

/// A failing run and its shrunk counterexample.
pub struct Failure {
    /// The failing run.
    pub original: RunOutcome,
    /// The shrunk run, failing the same invariant.
    pub shrunk: RunOutcome,
    /// The invariant both violate.
    pub invariant: Invariant,
    /// How many shrink attempts were run.
    pub attempts: usize,
}

/// Shrinks a failing run's tape while the same invariant still fails
/// (planting the simulation's bug on this thread). Returns `None` when the
/// run did not fail.
pub fn shrink_failure(
    simulation: &Simulation,
    original: RunOutcome,
    attempts_max: usize,
) -> Option<Failure> {
    let invariant = original.violations.first()?.invariant;
    let fails = |tape: &[u8]| {
        simulation
            .run_tape(tape)
            .violations
            .iter()
            .any(|violation| violation.invariant == invariant)
    };
    let outcome = shrink(&original.tape, fails, attempts_max);
    let shrunk = simulation.run_tape(&outcome.tape);
    Some(Failure {
        original,
        shrunk,
        invariant,
        attempts: outcome.attempts,
    })
}

/// Choices that are not the default (zero) one: what a counterexample needs.
pub fn nonzero_words(tape: &[u8]) -> usize {
    tape.chunks(4)
        .filter(|word| word.iter().any(|byte| *byte != 0))
        .count()
}

/// Whether an event belongs in the short story of a failure: what the
/// application did and what went wrong, without fetch and clock noise.
fn worth_telling(event: &Event) -> bool {
    !matches!(
        event,
        Event::Fetched { .. }
            | Event::ClockAdvanced { .. }
            | Event::TickChecked { emitted: None, .. }
    )
}

/// The shrunk trace as a short list of events, up to the violation's step.
pub fn story(outcome: &RunOutcome, events_max: usize) -> String {
    let until = outcome
        .violations
        .first()
        .map_or(u64::MAX, |violation| violation.step.max(1));
    let events: Vec<_> = outcome
        .trace
        .iter()
        .filter(|entry| entry.step <= until && worth_telling(&entry.event))
        .collect();
    let skipped = events.len().saturating_sub(events_max);
    let mut out = String::new();
    if skipped > 0 {
        let _ = writeln!(out, "  … {skipped} earlier events");
    }
    for entry in events.iter().skip(skipped) {
        let _ = writeln!(
            out,
            "  step {:>5}  t={:>6}  {}",
            entry.step,
            entry.now - 1_700_000_000_000,
            entry.event
        );
    }
    out
}

/// The report of a failure: seed, invariant, violations, the shrunk story
/// and the command that replays it.
pub fn render(scenario_path: &str, failure: &Failure) -> String {
    let mut out = String::new();
    let seed = failure
        .original
        .seed
        .map_or_else(|| "(tape)".to_string(), |seed| seed.to_string());
    let _ = writeln!(
        out,
        "FAILED: seed {seed} of {scenario_path} violates {}",
        failure.invariant
    );
    for violation in failure.original.violations.iter().take(5) {
        let _ = writeln!(out, "  {violation}");
    }
    let _ = writeln!(
        out,
        "\nShrunk in {} attempts from {} to {} non-zero choices ({} trace events); it violates:",
        failure.attempts,
        nonzero_words(&failure.original.tape),
        nonzero_words(&failure.shrunk.tape),
        failure.shrunk.trace.len()
    );
    for violation in failure.shrunk.violations.iter().take(3) {
        let _ = writeln!(out, "  {violation}");
    }
    let _ = writeln!(out, "\nWhat happened (shrunk):");
    out.push_str(&story(&failure.shrunk, 40));
    if let Some(seed) = failure.original.seed {
        let _ = writeln!(
            out,
            "\nReplay: cargo run -p parsley-sim -- replay {scenario_path} --seed {seed}"
        );
        let _ = writeln!(
            out,
            "Shrink: cargo run -p parsley-sim -- shrink {scenario_path} --seed {seed}"
        );
    }
    out
}
