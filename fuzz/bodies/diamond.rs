//! The body of the `diamond` fuzz target: what a fuzz target for a user's
//! own app looks like. The simulation is built once with the public API
//! (here the example diamond from the registry, with short budgets), and
//! the whole target body is `simulation().fuzz(data)`: the fuzzer's bytes
//! are the run's choice tape, so they spell interleavings, faults and the
//! inputs the generators draw, and any broken rule or property panics.

use std::sync::OnceLock;

use parsley_sim::sim::{Settings, Simulation};

/// The diamond, built once per process.
pub fn simulation() -> &'static Simulation {
    static SIMULATION: OnceLock<Simulation> = OnceLock::new();
    SIMULATION.get_or_init(|| {
        let mut settings = Settings {
            partitions: 2,
            instances: 2,
            ..Settings::default()
        };
        settings.workload.inputs = 60;
        settings.budget.safety_steps = 400;
        settings.budget.liveness_steps = 3_000;
        parsley_examples::registry()
            .simulation_with("diamond", &settings)
            .unwrap_or_else(|error| panic!("{error}"))
            .build()
            .unwrap_or_else(|error| panic!("{error}"))
    })
}
