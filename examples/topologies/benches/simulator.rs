//! The simulator's speed, and how fast it finds each planted bug.
//!
//! `cargo bench -p parsley-examples --bench simulator`
//!
//! Further arguments keep only the rows whose name contains one of them
//! (`-- "1000 inputs"`, `-- planted`), for profiling one row.
//!
//! Per scenario: seeds per second, simulated deliveries per second and steps
//! per seed, on one thread, with the scenario's boundary-seeking time and
//! with uniform time. Then, for each planted bug, the wall time until
//! the first failing seed, over 20 different seed ranges: median and max.

use std::time::{Duration, Instant};

use parsley::mutation;
use parsley_examples::planted::PLANTED;
use parsley_sim::sim::{run_seed, Invariant, Scenario, Simulation, TimeStrategy};

/// Every record the simulator moves allocates; mimalloc is far cheaper at
/// that than the system allocator (BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn scenario(name: &str) -> Scenario {
    let path = parsley_examples::scenario_path(name);
    parsley_examples::registry()
        .load(&path)
        .unwrap_or_else(|error| panic!("{error}"))
}

fn simulation(scenario: &Scenario) -> Simulation {
    parsley_examples::registry()
        .simulation(scenario)
        .unwrap_or_else(|error| panic!("{error}"))
}

fn load(name: &str) -> Simulation {
    simulation(&scenario(name))
}

const SEEDS: u64 = 200;

fn throughput(name: &str, scenario: &Simulation) {
    let start = Instant::now();
    let (mut deliveries, mut steps, mut failing) = (0, 0, 0);
    for seed in 0..SEEDS {
        let outcome = run_seed(scenario, seed);
        deliveries += outcome.stats.deliveries;
        steps += outcome.stats.steps;
        failing += u64::from(!outcome.violations.is_empty());
    }
    let elapsed = start.elapsed().as_secs_f64();
    println!(
        "{name:<28} {:>10.0} {:>16.0} {:>14.0} {:>10}",
        SEEDS as f64 / elapsed,
        deliveries as f64 / elapsed,
        steps as f64 / SEEDS as f64,
        failing
    );
}
/// Time until a seed of `first..` fails with `invariant`.
fn time_to_detection(scenario: &Simulation, first: u64, invariant: Invariant) -> Option<Duration> {
    let start = Instant::now();
    (first..first + 500).find(|&seed| {
        run_seed(scenario, seed)
            .violations
            .iter()
            .any(|violation| violation.invariant == invariant)
    })?;
    Some(start.elapsed())
}

fn main() {
    if !std::env::args().any(|arg| arg == "--bench") {
        println!("run with `cargo bench -p parsley-examples --bench simulator`");
        return;
    }
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|arg| !arg.starts_with("--"))
        .collect();
    let wanted =
        |name: &str| filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str()));
    println!(
        "{:<28} {:>10} {:>16} {:>14} {:>10}",
        "scenario", "seeds/s", "deliveries/s", "steps/seed", "failing"
    );
    // Each example topology has a shipped scenario of its name.
    let registry = parsley_examples::registry();
    for name in registry.names() {
        if wanted(name) {
            throughput(name, &load(name));
        }
        // The same scenario with the clock drawn uniformly: what
        // boundary-seeking time costs per seed.
        let uniform = format!("{name}, uniform time");
        if wanted(&uniform) {
            let mut scenario = scenario(name);
            scenario.settings.clock.time = TimeStrategy::Uniform;
            throughput(&uniform, &simulation(&scenario));
        }
    }
    let mut big = scenario("balances");
    big.settings.partitions = 4;
    big.settings.workload.inputs = 1000;
    big.settings.budget.safety_steps = 12_000;
    if wanted("balances, 1000 inputs") {
        throughput("balances, 1000 inputs", &simulation(&big));
    }
    if !wanted("planted") {
        return;
    }

    println!(
        "\n{:<32} {:<10} {:>5} {:>12} {:>12}",
        "planted bug", "scenario", "inv", "median ms", "max ms"
    );
    for (planted, name, invariant) in PLANTED {
        let scenario = load(name);
        mutation::set(Some(planted));
        let mut times: Vec<Duration> = (0..20)
            .map(|range| {
                time_to_detection(&scenario, 10_000 + range * 1_000, invariant)
                    .expect("every planted bug is found")
            })
            .collect();
        mutation::set(None);
        times.sort();
        println!(
            "{:<32} {:<10} {:>5} {:>12.1} {:>12.1}",
            planted.name(),
            name,
            format!("{invariant:?}"),
            times[times.len() / 2].as_secs_f64() * 1e3,
            times[times.len() - 1].as_secs_f64() * 1e3
        );
    }
}
