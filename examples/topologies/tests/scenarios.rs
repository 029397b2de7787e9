//! The shipped scenario files against the one list of example topologies:
//! one scenario per topology, named after it, each of which loads.

use std::path::Path;

use parsley_examples::{registry, TopologyName};

/// The example topologies' names, as scenario files write them.
const NAMES: [&str; 23] = [
    "balances",
    "audit-cut",
    "timers",
    "chain",
    "fan-in",
    "diamond",
    "fan-out",
    "dead-letter",
    "sessions",
    "regroup",
    "bad-bytes",
    "windows",
    "enrichment",
    "dedupe",
    "by-product",
    "settlement",
    "credit",
    "order-labels",
    "storefront",
    "as-of",
    "ledger",
    "invoices",
    "branches",
];

#[test]
fn the_registry_is_the_list_of_topologies() {
    let listed: Vec<&str> = TopologyName::ALL.iter().map(|name| name.as_str()).collect();
    assert_eq!(listed, NAMES);
    assert_eq!(registry().names(), NAMES);
}

#[test]
fn the_live_runner_runs_every_topology_but_the_simulator_only_ones() {
    let live: Vec<&str> = TopologyName::ALL
        .into_iter()
        .filter(|name| name.runs_live())
        .map(TopologyName::as_str)
        .collect();
    assert_eq!(
        live,
        [
            "balances",
            "audit-cut",
            "timers",
            "chain",
            "fan-in",
            "diamond",
            "dead-letter",
            "sessions"
        ]
    );
    for name in TopologyName::ALL {
        let built = parsley_examples::namespaced(name, "x-", std::time::Duration::from_secs(1));
        assert_eq!(built.is_ok(), name.runs_live(), "{name}");
    }
}

#[test]
fn every_scenario_in_the_scenarios_folder_loads() {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let registry = registry();
    let mut names = Vec::new();
    let mut topologies = Vec::new();
    for entry in std::fs::read_dir(&folder).expect("the scenarios folder") {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let scenario = registry.load(&path).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(scenario.name, path.file_stem().unwrap().to_string_lossy());
            assert!(scenario.seeds.count >= 1);
            names.push(scenario.name.clone());
            topologies.push(scenario.topology.clone());
        }
    }
    names.sort();
    topologies.sort();
    // One scenario per example topology, named after it.
    let mut known = NAMES.to_vec();
    known.sort();
    assert_eq!(topologies, known);
    assert_eq!(names, known);
}
