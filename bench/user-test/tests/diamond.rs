//! The shipped diamond scenario's knobs, simulated from a user's test the
//! way README shows, timed. Prints seeds per second; asserts every seed
//! passes.

use std::time::Instant;

use parsley_sim::sim::{
    Budget, ClockConfig, FaultRates, OrderStrategy, Settings, StepRange, TimeStrategy, Workload,
};

/// `scenarios/diamond.toml`, in code (a user's build has no scenario files).
fn diamond_settings() -> Settings {
    Settings {
        partitions: 2,
        instances: 2,
        workload: Workload {
            inputs: 200,
            keys: 8,
            transactional: 0.25,
        },
        clock: ClockConfig {
            time: TimeStrategy::default(),
            step_ms: StepRange { min: 1, max: 500 },
            tick_interval_ms: 1000,
            commit_interval_ms: 100,
            transaction_timeout_ms: 5000,
            ..ClockConfig::default()
        },
        faults: FaultRates {
            swarm: true,
            abort: 0.02,
            commit_failure: 0.02,
            crash: 0.004,
            move_task: 0.004,
            hanging_transaction: 0.01,
            logic_error: 0.002,
            partial_fetch: 0.3,
            empty_fetch: 0.1,
            marker_lag: 0.5,
            marker_lag_ms: StepRange { min: 5, max: 65 },
        },
        budget: Budget {
            safety_steps: 4000,
            liveness_steps: 5000,
        },
        order: OrderStrategy::Random,
    }
}

#[test]
fn diamond_seeds_per_second() {
    let seeds: u64 = std::env::var("SEEDS")
        .ok()
        .and_then(|seeds| seeds.parse().ok())
        .unwrap_or(200);
    let simulation = parsley_examples::registry()
        .simulation_with("diamond", &diamond_settings())
        .unwrap()
        .build()
        .unwrap();
    let started = Instant::now();
    let summary = simulation.check_seeds(0..seeds);
    let elapsed = started.elapsed().as_secs_f64();
    assert!(summary.failure.is_none(), "{:?}", summary.failure);
    println!(
        "diamond: {seeds} seeds in {elapsed:.2} s = {:.1} seeds/s on {} threads",
        seeds as f64 / elapsed,
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
}
