//! How often each planted bug shows under each strategy (uniform time,
//! boundary-seeking time, and boundary-seeking time with PCT order): the share of
//! seeds, of the first `SEEDS` of its scenario, that violate the invariant
//! the bug breaks, and the first such seed.
//!
//! `cargo bench -p parsley-examples --features mutations --bench strategies`
//!
//! Further arguments keep only the bugs whose name contains one of them
//! (`-- timer`).

use parsley::mutation::{self, Mutation};
use parsley_examples::planted::PLANTED;
use parsley_sim::sim::{run_seed, Invariant, OrderStrategy, Simulation, TimeStrategy};

/// Every record the simulator moves allocates; mimalloc is far cheaper at
/// that than the system allocator (BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const SEEDS: u64 = 100;

fn simulation(name: &str, (time, order): (TimeStrategy, OrderStrategy)) -> Simulation {
    let registry = parsley_examples::registry();
    let mut scenario = registry
        .load(&parsley_examples::scenario_path(name))
        .unwrap_or_else(|error| panic!("{error}"));
    scenario.settings.clock.time = time;
    scenario.settings.order = order;
    registry
        .simulation(&scenario)
        .unwrap_or_else(|error| panic!("{error}"))
}

/// Of the scenario's first `SEEDS` seeds with `planted`, how many violate
/// `invariant`, and the first that does.
fn share(simulation: &Simulation, planted: Mutation, invariant: Invariant) -> (u64, Option<u64>) {
    mutation::set(Some(planted));
    let start = simulation.seeds().start;
    let failing: Vec<u64> = (start..start + SEEDS)
        .filter(|&seed| {
            run_seed(simulation, seed)
                .violations
                .iter()
                .any(|violation| violation.invariant == invariant)
        })
        .collect();
    mutation::set(None);
    (
        failing.len() as u64,
        failing.first().map(|seed| seed - start),
    )
}

fn main() {
    if !std::env::args().any(|arg| arg == "--bench") {
        println!(
            "run with `cargo bench -p parsley-examples --features mutations --bench strategies`"
        );
        return;
    }
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|arg| !arg.starts_with("--"))
        .collect();
    let wanted =
        |name: &str| filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str()));
    let strategies = [
        ("uniform", (TimeStrategy::Uniform, OrderStrategy::Random)),
        ("boundary", (TimeStrategy::Boundary, OrderStrategy::Random)),
        (
            "b+pct:3",
            (TimeStrategy::Boundary, OrderStrategy::Pct { depth: 3 }),
        ),
    ];
    print!("{:<34} {:<12} {:>4}", "planted bug", "scenario", "inv");
    for (label, _) in strategies {
        print!(" {:>10} {:>6}", label, "first");
    }
    println!("   (failing seeds of {SEEDS}; first failing seed)");
    for (planted, name, invariant) in PLANTED {
        if !wanted(planted.name()) {
            continue;
        }
        print!(
            "{:<34} {:<12} {:>4}",
            planted.name(),
            name,
            format!("{invariant:?}")
        );
        for (_, strategy) in strategies {
            let (failing, first) = share(&simulation(name, strategy), planted, invariant);
            let first = first.map_or("-".to_string(), |seed| seed.to_string());
            print!(" {:>9}% {:>6}", failing * 100 / SEEDS, first);
        }
        println!();
    }
}
