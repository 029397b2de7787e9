//! Property tests of the simulator: any choice tape is a run that
//! passes the checker (I1–I8), on every shipped scenario, and the same tape
//! gives the same trace (I9).
//!
//! Tapes come from a proptest strategy and from a quickcheck `Arbitrary`
//! newtype; both shrink toward shorter tapes and zero words, which the tape
//! format makes the simplest decisions (`parsley_sim::sim::Choices`), so a
//! failure shrinks to a short, mostly fault-free story. Budgets are shortened
//! as in the `causal_order` fuzz target (whose scenario loader this file
//! shares) so that each case takes milliseconds.

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use quickcheck::{Arbitrary, Gen, QuickCheck, TestResult};

use parsley_sim::sim::RunOutcome;

// Only the scenario loader is used here; the body itself runs in
// `fuzz_corpus.rs` and under `cargo fuzz`.
use crate::causal_order_body;

use causal_order_body::{simulations, SCENARIOS};

/// Tapes are at most this long: about a thousand draws, so a tape covers
/// much of a shortened safety phase before the zero words take over.
const TAPE_BYTES_MAX: usize = 4_096;
/// Proptest cases per scenario: enough to explore, few enough that the whole
/// file runs in well under a minute in a debug build.
const CASES_PER_SCENARIO: u32 = 24;

fn tape() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..TAPE_BYTES_MAX)
}

fn run_tape(scenario: usize, tape: &[u8]) -> RunOutcome {
    simulations()[scenario].run_tape(tape)
}

/// A run's violations, one per line, for a failure message.
fn listed(outcome: &RunOutcome) -> String {
    outcome
        .violations
        .iter()
        .map(|violation| format!("  {violation}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// I1–I8 on the run of `tape` over scenario `scenario`.
fn passes(scenario: usize, tape: &[u8]) -> Result<(), TestCaseError> {
    let outcome = run_tape(scenario, tape);
    prop_assert!(
        outcome.violations.is_empty(),
        "scenario {}: {} violations from a {}-byte tape:\n{}",
        SCENARIOS[scenario],
        outcome.violations.len(),
        tape.len(),
        listed(&outcome)
    );
    Ok(())
}

proptest! {
    // No failure file: a failing tape is printed in full, and belongs in
    // `fuzz/corpus/causal_order/` with a named test in `fuzz_corpus.rs`.
    #![proptest_config(ProptestConfig {
        cases: CASES_PER_SCENARIO,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// I1–I8 hold for any tape over `balances`.
    #[test]
    fn prop_any_tape_passes_balances(tape in tape()) {
        passes(0, &tape)?;
    }

    /// I1–I8 hold for any tape over `audit-cut`.
    #[test]
    fn prop_any_tape_passes_audit_cut(tape in tape()) {
        passes(1, &tape)?;
    }

    /// I1–I8 hold for any tape over `timers`.
    #[test]
    fn prop_any_tape_passes_timers(tape in tape()) {
        passes(2, &tape)?;
    }

    /// I1–I8 hold for any tape over `chain`.
    #[test]
    fn prop_any_tape_passes_chain(tape in tape()) {
        passes(3, &tape)?;
    }

    /// I1–I8 hold for any tape over `fan-in`.
    #[test]
    fn prop_any_tape_passes_fan_in(tape in tape()) {
        passes(4, &tape)?;
    }

    /// I9: the same tape, run twice, gives the same trace byte for byte (the
    /// same trace hash) and consumes the same choices.
    #[test]
    fn prop_same_tape_same_trace(scenario in 0..SCENARIOS.len(), tape in tape()) {
        let first = run_tape(scenario, &tape);
        let second = run_tape(scenario, &tape);
        prop_assert_eq!(first.trace_hash, second.trace_hash, "scenario {}", SCENARIOS[scenario]);
        prop_assert_eq!(first.trace.len(), second.trace.len());
        prop_assert_eq!(first.tape, second.tape);
        prop_assert_eq!(first.violations, second.violations);
    }

    /// I9 through replay: a run's recorded tape replays to the same trace, so
    /// every run a fuzzer or proptest finds can be replayed and shrunk.
    #[test]
    fn prop_recorded_tape_replays_the_run(scenario in 0..SCENARIOS.len(), tape in tape()) {
        let first = run_tape(scenario, &tape);
        let replay = run_tape(scenario, &first.tape);
        prop_assert_eq!(first.trace_hash, replay.trace_hash, "scenario {}", SCENARIOS[scenario]);
        prop_assert_eq!(first.tape, replay.tape);
    }
}

// ----- quickcheck -----

/// A choice tape for quickcheck, up to [`TAPE_BYTES_MAX`] bytes.
#[derive(Clone, Debug)]
struct Tape(Vec<u8>);

impl Arbitrary for Tape {
    fn arbitrary(g: &mut Gen) -> Self {
        let len = usize::arbitrary(g) % (TAPE_BYTES_MAX + 1);
        Tape((0..len).map(|_| u8::arbitrary(g)).collect())
    }

    /// Shrinks the way the tape format wants: cut the tail (half, then one
    /// word), then zero one non-zero word, each a simpler decision.
    fn shrink(&self) -> Box<dyn Iterator<Item = Self>> {
        const WORD: usize = parsley_sim::sim::Choices::WORD_BYTES;
        let tape = self.0.clone();
        let mut smaller = Vec::new();
        if !tape.is_empty() {
            smaller.push(Tape(tape[..tape.len() / 2].to_vec()));
            smaller.push(Tape(tape[..tape.len().saturating_sub(WORD)].to_vec()));
        }
        let zeroed = (0..tape.len().div_ceil(WORD))
            .filter(move |word| {
                let end = (word * WORD + WORD).min(tape.len());
                tape[word * WORD..end].iter().any(|byte| *byte != 0)
            })
            .map({
                let tape = self.0.clone();
                move |word| {
                    let mut zeroed = tape.clone();
                    let end = (word * WORD + WORD).min(zeroed.len());
                    zeroed[word * WORD..end].fill(0);
                    Tape(zeroed)
                }
            });
        Box::new(smaller.into_iter().chain(zeroed))
    }
}

/// I1–I8 hold for any quickcheck tape over any scenario (picked by `pick`),
/// and the run is deterministic (I9).
#[test]
fn prop_quickcheck_tape_passes_and_replays() {
    fn property(pick: u8, tape: Tape) -> TestResult {
        let scenario = usize::from(pick) % SCENARIOS.len();
        let first = run_tape(scenario, &tape.0);
        if !first.violations.is_empty() {
            return TestResult::error(format!(
                "scenario {}: {} violations:\n{}",
                SCENARIOS[scenario],
                first.violations.len(),
                listed(&first)
            ));
        }
        let second = run_tape(scenario, &tape.0);
        TestResult::from_bool(first.trace_hash == second.trace_hash)
    }
    QuickCheck::new()
        .tests(20)
        .quickcheck(property as fn(u8, Tape) -> TestResult);
}
