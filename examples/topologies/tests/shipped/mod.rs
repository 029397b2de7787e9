//! The shipped scenario files, loaded through the example registry as the
//! `parsley-sim` binary loads them.
#![allow(dead_code)]

use parsley::mutation::Mutation;
use parsley_sim::sim::{Marks, Scenario, Simulation};

pub use parsley_examples::scenario_path;

/// The shipped scenario `name`.
pub fn scenario(name: &str) -> Scenario {
    parsley_examples::registry()
        .load(&scenario_path(name))
        .unwrap_or_else(|error| panic!("{error}"))
}

/// The simulation `scenario` describes.
pub fn simulation(scenario: &Scenario) -> Simulation {
    planted(scenario, None)
}

/// The simulation `scenario` describes, with `mutation` planted.
pub fn planted(scenario: &Scenario, mutation: Option<Mutation>) -> Simulation {
    parsley_examples::registry()
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

/// The marks of `marks` (by their summary name) an application of `topology`
/// cannot reach by its shape, and why. Every other mark must be reached.
pub fn unreachable(topology: &str) -> &'static [(&'static str, &'static str)] {
    const NO_CROSS_TOPIC: (&str, &str) = (
        "record held behind another topic",
        "no record claims another tp its task consumes (G2)",
    );
    const NO_HELD_TICK: (&str, &str) = (
        "tick held behind a claim",
        "a tick claims only what its task delivered unless the task holds a record (G5, T5)",
    );
    match topology {
        // An order claims the latest payment: both marks (G2, T5).
        "fan-in" => &[],
        // Holds behind the click, but no ticks.
        "regroup" => &[NO_HELD_TICK],
        // Orders claim the latest discount update: holds, but no ticks.
        "enrichment" => &[NO_HELD_TICK],
        // A response claims its left record, which the resolve stage
        // consumes too (J14): holds, but no ticks.
        "order-labels" => &[NO_HELD_TICK],
        // Orders claim the latest discount update; its operators close by
        // stream time, so it has no ticks to hold.
        "storefront" => &[NO_HELD_TICK],
        _ => &[NO_CROSS_TOPIC, NO_HELD_TICK],
    }
}

/// The marks `marks` misses, of those `topology`'s shape allows.
pub fn missed(topology: &str, marks: &Marks) -> Vec<&'static str> {
    let exempt = unreachable(topology);
    marks
        .named()
        .into_iter()
        .filter(|(name, count)| *count == 0 && !exempt.iter().any(|(mark, _)| mark == name))
        .map(|(name, _)| name)
        .collect()
}
