//! One simulated run: a safety phase with faults on, a liveness phase with
//! faults and inputs off, then the checker over the trace and the logs.

use std::hash::{Hash, Hasher};

use crate::model::Cluster;
use crate::sim::checker::{check, CheckInput, Violation};
use crate::sim::choice::Choices;
use crate::sim::scenario::Scenario;
use crate::sim::trace::Entry;
use crate::sim::world::{Stats, World};
use rustc_hash::FxHasher;

/// Everything a run produced.
pub struct RunOutcome {
    /// The seed, when the run was seeded (not replayed from a tape).
    pub seed: Option<u64>,
    /// Every choice the run consumed: replaying it gives the same run (I9).
    pub tape: Vec<u8>,
    /// Everything that happened.
    pub trace: Vec<Entry>,
    /// The run's counters.
    pub stats: Stats,
    /// Whether the world quiesced within its liveness budget (I8).
    pub quiesced: bool,
    /// What the checker found; empty for a passing run.
    pub violations: Vec<Violation>,
    /// A hash of the whole trace, to compare runs byte for byte (I9).
    pub trace_hash: u64,
    /// The model as the run left it: the logs that reports read stamps from.
    pub cluster: Cluster,
}

/// Runs `scenario` with the choices of `seed`.
pub fn run_seed(scenario: &Scenario, seed: u64) -> RunOutcome {
    let mut outcome = run(scenario, Choices::seeded(seed));
    outcome.seed = Some(seed);
    outcome
}

/// Runs `scenario` with the given choice source.
pub fn run(scenario: &Scenario, mut choices: Choices) -> RunOutcome {
    // A step draws about three words; regrowing the tape by doubling cost
    // more than drawing them.
    choices.reserve_words(scenario.budget.safety_steps.min(1 << 20) as usize * 3);
    let mut world = World::new(scenario, &mut choices);
    for _ in 0..scenario.budget.safety_steps {
        world.step(&mut choices);
    }
    let quiesced = world.run_liveness(&mut choices);
    let violations = check(&CheckInput {
        app: &world.topology.app,
        assembly: &world.assembly,
        cluster: &world.cluster,
        trace: &world.trace,
        quiesced,
        liveness_steps: scenario.budget.liveness_steps,
    });
    let mut hasher = FxHasher::default();
    world.trace.hash(&mut hasher);
    RunOutcome {
        seed: None,
        tape: choices.into_tape(),
        trace: world.trace,
        stats: world.stats,
        quiesced,
        violations,
        trace_hash: hasher.finish(),
        cluster: world.cluster,
    }
}
