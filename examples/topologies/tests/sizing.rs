//! Sizing (docs/DESIGN.md, "Sizing a workload"): the default `Settings` and
//! the README's own sizes reach, in 1,000 seeds, every rare state the
//! application's shape allows. A test of reach, not of time: how long the
//! runs take is in BENCHMARKS.md.

use parsley_sim::sim::{Input, Settings, Simulation};

use crate::shipped;
use shipped::missed;

#[allow(dead_code)]
mod app {
    include!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/snippets/shop.rs"
    ));
}

/// The seeds a sized workload must reach every mark within.
const SEEDS: u64 = 1_000;

/// X3, X4, G2, T5 at the default size: every example topology, run with
/// `Settings::default()` for 1,000 seeds, passes and reaches every mark its
/// shape allows (zombies fenced (X4), fetches stalled at the LSO and
/// redeliveries after aborts (X3), late markers, and, where records claim
/// each other across topics, holds (G2) and held ticks (T5)).
///
/// Minutes long (1,000 seeds of each shipped topology): CI runs it in a
/// step of its own (`.ci/run`, "slow tests"), not README's `cargo test`.
#[test]
#[ignore = "minutes long: CI runs it in its own step (`-- --ignored`)"]
fn x3_x4_g2_t5_default_settings_reach_every_mark_in_1000_seeds() {
    let registry = parsley_examples::registry();
    let mut misses = Vec::new();
    for topology in registry.names() {
        let simulation = registry
            .simulation_with(topology, &Settings::default())
            .unwrap_or_else(|error| panic!("{error}"))
            .seeds(0..SEEDS)
            .name(format!("{topology} at the default size"))
            .build()
            .unwrap_or_else(|error| panic!("{error}"));
        let summary = simulation.check_seeds(simulation.seeds());
        assert_eq!(summary.failure, None, "{topology}");
        let missed = missed(topology, &summary.stats.marks);
        if !missed.is_empty() {
            misses.push(format!("{topology}: {}", missed.join(", ")));
        }
    }
    assert!(
        misses.is_empty(),
        "default-sized runs of 1,000 seeds never reached: {misses:?}"
    );
}

/// X3, X4 at the README's size: its "Test your topology" simulation (the
/// shop diamond, 60 inputs, 1,200 safety steps, two partitions and two
/// instances) run for 1,000 seeds reaches its own mark ("an instance
/// crashed") and every mark a diamond's shape allows.
#[test]
fn x3_x4_the_readme_sizes_reach_every_mark_in_1000_seeds() {
    let shop = app::shop();
    let simulation = Simulation::builder(shop.app.clone())
        .input(Input::new(&shop.views, |draw| {
            (Some(draw.key()), draw.range(1, 9))
        }))
        .partitions(2)
        .instances(2)
        .inputs(60)
        .budget(1_200, 4_000)
        .seeds(0..SEEDS)
        .sometimes("an instance crashed", |run| Ok(run.stats().crashes > 0))
        .build()
        .unwrap();
    let summary = simulation.check_seeds(simulation.seeds());
    assert_eq!(summary.failure, None);
    assert_eq!(summary.never_reached(), Vec::<&str>::new());
    // A diamond: its join consumes only the branches' outputs.
    assert_eq!(missed("diamond", &summary.stats.marks), Vec::<&str>::new());
}
