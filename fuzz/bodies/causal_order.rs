//! The body of the `causal_order` fuzz target, shared with the stable test
//! suite (`examples/topologies/tests/fuzz_corpus.rs`), which runs it over the checked-in
//! corpus.
//!
//! The fuzzer's bytes drive one whole simulated run: the first
//! byte picks one of the five shipped scenarios, the rest is the choice tape
//! (`Choices::from_tape`), so every interleaving, clock step and fault the
//! fuzzer can spell is a run the checker must pass (I1–I8). Past the end of
//! the tape every choice is the simplest one, so short inputs are short,
//! fault-free stories.

use std::sync::OnceLock;

use parsley_sim::sim::Simulation;

/// The shipped scenarios, in the order the first byte picks them.
pub const SCENARIOS: [&str; 5] = ["balances", "audit-cut", "timers", "chain", "fan-in"];

/// Safety steps per execution: far fewer than the scenario files ask for, so
/// that one execution takes milliseconds and the fuzzer explores many tapes.
pub const SAFETY_STEPS: u64 = 400;
/// Liveness steps per execution: enough for the shortened safety phase's work
/// to quiesce (I8).
pub const LIVENESS_STEPS: u64 = 3_000;

/// The five scenarios' simulations, read once per process from the
/// repository's `scenarios/`, with the budgets shortened.
pub fn simulations() -> &'static [Simulation] {
    static LOADED: OnceLock<Vec<Simulation>> = OnceLock::new();
    LOADED.get_or_init(|| {
        let registry = parsley_examples::registry();
        SCENARIOS
            .iter()
            .map(|name| {
                let path = parsley_examples::scenario_path(name);
                let mut scenario = registry
                    .load(&path)
                    .unwrap_or_else(|error| panic!("{error}"));
                scenario.settings.budget.safety_steps = SAFETY_STEPS;
                scenario.settings.budget.liveness_steps = LIVENESS_STEPS;
                registry
                    .simulation(&scenario)
                    .unwrap_or_else(|error| panic!("{error}"))
            })
            .collect()
    })
}

/// Runs the scenario picked by `data[0]` with the tape `data[1..]`; panics
/// with every violation listed if the checker reports any. Empty input runs
/// the first scenario on the empty tape.
pub fn causal_order(data: &[u8]) {
    let (pick, tape) = match data.split_first() {
        Some((pick, tape)) => (usize::from(*pick), tape),
        None => (0, data),
    };
    simulations()[pick % SCENARIOS.len()].fuzz(tape);
}
