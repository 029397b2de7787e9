//! The shipped scenario files, loaded through the example registry as the
//! `parsley-sim` binary loads them.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use parsley::mutation::Mutation;
use parsley_sim::sim::scenario::Scenario;
use parsley_sim::sim::Simulation;

/// `scenarios/<name>.toml`.
pub fn scenario_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../scenarios")
        .join(format!("{name}.toml"))
}

/// The shipped scenario `name`.
pub fn scenario(name: &str) -> Scenario {
    parsley_sim::topologies::registry()
        .load(&scenario_path(name))
        .unwrap_or_else(|error| panic!("{error}"))
}

/// The simulation `scenario` describes.
pub fn simulation(scenario: &Scenario) -> Simulation {
    planted(scenario, None)
}

/// The simulation `scenario` describes, with `mutation` planted.
pub fn planted(scenario: &Scenario, mutation: Option<Mutation>) -> Simulation {
    parsley_sim::topologies::registry()
        .simulation_with(&scenario.topology, &scenario.settings)
        .unwrap_or_else(|error| panic!("{error}"))
        .seeds(scenario.seeds.range())
        .name(scenario.name.clone())
        .planted(mutation)
        .build()
        .unwrap_or_else(|error| panic!("{error}"))
}

/// The shipped scenario `name`'s simulation.
pub fn shipped(name: &str) -> Simulation {
    simulation(&scenario(name))
}
