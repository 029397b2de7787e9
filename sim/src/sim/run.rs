//! One simulated run: a safety phase with faults on, a liveness phase with
//! faults and inputs off, then the checker over the trace and the logs, and
//! the user's properties over what was committed.

use std::hash::{Hash, Hasher};

use crate::model::Cluster;
use crate::sim::checker::{check, CheckInput, Invariant, Violation};
use crate::sim::choice::Choices;
use crate::sim::property::Committed;
use crate::sim::simulation::Simulation;
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
    /// What the checker and the user's properties found; empty for a
    /// passing run.
    pub violations: Vec<Violation>,
    /// Whether this run reached each of the simulation's "sometimes" marks,
    /// in the order of [`Simulation::sometimes_names`].
    pub reached: Vec<bool>,
    /// A hash of the whole trace, to compare runs byte for byte (I9).
    pub trace_hash: u64,
    /// The model as the run left it: the logs that reports read stamps from.
    pub cluster: Cluster,
}

/// Runs `simulation` with the choices of `seed`, on this thread, with
/// whatever bug this thread has planted.
pub fn run_seed(simulation: &Simulation, seed: u64) -> RunOutcome {
    let mut outcome = run(simulation, Choices::seeded(seed));
    outcome.seed = Some(seed);
    outcome
}

/// Runs `simulation` with the given choice source.
pub fn run(simulation: &Simulation, mut choices: Choices) -> RunOutcome {
    let budget = simulation.settings().budget;
    // A step draws about three words; regrowing the tape by doubling cost
    // more than drawing them.
    choices.reserve_words(budget.safety_steps.min(1 << 20) as usize * 3);
    let mut world = World::new(simulation, &mut choices);
    for _ in 0..budget.safety_steps {
        world.step(&mut choices);
    }
    let quiesced = world.run_liveness(&mut choices);
    let mut violations = check(&CheckInput {
        app: simulation.app(),
        assembly: &world.assembly,
        cluster: &world.cluster,
        trace: &world.trace,
        quiesced,
        liveness_steps: budget.liveness_steps,
    });
    let committed = Committed {
        app: simulation.app(),
        cluster: &world.cluster,
        hosts: world.final_hosts(),
        stats: &world.stats,
        quiesced,
    };
    // A property's verdict is about the end of the run: it is dated at the
    // last step.
    let last_step = world.trace.last().map_or(0, |entry| entry.step);
    for (index, property) in simulation.properties().iter().enumerate() {
        if let Err(error) = (property.check)(&committed) {
            violations.push(Violation::new(
                Invariant::Property(index as u16),
                last_step,
                format!("property {:?} failed: {error}", property.name),
            ));
        }
    }
    let mut reached = Vec::with_capacity(simulation.sometimes().len());
    for (index, mark) in simulation.sometimes().iter().enumerate() {
        match (mark.reached)(&committed) {
            Ok(yes) => reached.push(yes),
            Err(error) => {
                reached.push(false);
                violations.push(Violation::new(
                    Invariant::Property((simulation.properties().len() + index) as u16),
                    last_step,
                    format!("sometimes mark {:?} could not be read: {error}", mark.name),
                ));
            }
        }
    }
    let mut hasher = FxHasher::default();
    world.trace.hash(&mut hasher);
    RunOutcome {
        seed: None,
        tape: choices.into_tape(),
        trace: world.trace,
        stats: world.stats,
        quiesced,
        violations,
        reached,
        trace_hash: hasher.finish(),
        cluster: world.cluster,
    }
}
