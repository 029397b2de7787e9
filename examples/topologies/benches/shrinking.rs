//! How far the shrinker takes each planted bug: the first failing seed of
//! its scenario (the invariant the bug breaks), its non-zero choices before
//! and after shrinking, the attempts that took, whether the search reached
//! a local minimum, and the time, within the default budget (60 s).
//!
//! `cargo bench -p parsley-examples --features mutations --bench shrinking`
//!
//! Further arguments keep only the bugs whose name contains one of them
//! (`-- timer`); `--seconds=S` sets the budget's time (default 60; 0: no
//! limit) and `--attempts=N` caps its attempts (default: no cap).

use std::time::Instant;

use parsley_examples::planted::PLANTED;
use parsley_sim::sim::{ShrinkBudget, Simulation};

/// Every record the simulator moves allocates; mimalloc is far cheaper at
/// that than the system allocator (BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Seeds searched for a failing one.
const SEEDS: u64 = 50;

fn simulation(name: &str, planted: parsley::mutation::Mutation) -> Simulation {
    let registry = parsley_examples::registry();
    let scenario = registry
        .load(&parsley_examples::scenario_path(name))
        .unwrap_or_else(|error| panic!("{error}"));
    registry
        .simulation_with(&scenario.topology, &scenario.settings)
        .unwrap_or_else(|error| panic!("{error}"))
        .seeds(scenario.seeds.range())
        .name(scenario.name.clone())
        .planted(Some(planted))
        .build()
        .unwrap_or_else(|error| panic!("{error}"))
}

/// Choices other than the zero (simplest) one.
fn nonzero(tape: &[u8]) -> usize {
    tape.chunks(4)
        .filter(|word| word.iter().any(|&b| b != 0))
        .count()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !args.iter().any(|arg| arg == "--bench") {
        println!(
            "run with `cargo bench -p parsley-examples --features mutations --bench shrinking`"
        );
        return;
    }
    let attempts = args
        .iter()
        .find_map(|arg| arg.strip_prefix("--attempts="))
        .map(|n| n.parse().expect("--attempts=N takes a number"));
    let seconds: u64 = args
        .iter()
        .find_map(|arg| arg.strip_prefix("--seconds="))
        .map_or(60, |n| n.parse().expect("--seconds=S takes a number"));
    let budget = ShrinkBudget {
        time: (seconds > 0).then(|| std::time::Duration::from_secs(seconds)),
        attempts,
    };
    println!("budget: {budget}");
    let filters: Vec<&String> = args.iter().filter(|arg| !arg.starts_with("--")).collect();
    let wanted =
        |name: &str| filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str()));
    println!(
        "{:<34} {:<12} {:>4} {:>5} {:>9} {:>7} {:>9} {:>9} {:>8}",
        "planted bug", "scenario", "inv", "seed", "original", "shrunk", "attempts", "minimum", "s"
    );
    for (planted, name, invariant) in PLANTED {
        if !wanted(planted.name()) {
            continue;
        }
        let simulation = simulation(name, planted);
        let start = simulation.seeds().start;
        let failing = (start..start + SEEDS).find_map(|seed| {
            let outcome = simulation.run_seed(seed);
            outcome
                .violations
                .iter()
                .any(|violation| violation.invariant == invariant)
                .then_some(outcome)
        });
        let Some(outcome) = failing else {
            println!(
                "{:<34} {name:<12} no failing seed in {SEEDS}",
                planted.name()
            );
            continue;
        };
        let seed = outcome.seed.unwrap_or_default();
        let began = Instant::now();
        let failure = simulation
            .shrink(outcome, budget)
            .expect("a failing run shrinks");
        let elapsed = began.elapsed();
        println!(
            "{:<34} {:<12} {:>4} {:>5} {:>9} {:>7} {:>9} {:>9} {:>8}",
            planted.name(),
            name,
            format!("{invariant:?}"),
            seed - start,
            nonzero(&failure.original.tape),
            nonzero(&failure.shrunk.tape),
            failure.attempts,
            if failure.finished { "reached" } else { "no" },
            format!("{:.1}", elapsed.as_secs_f64())
        );
    }
}
