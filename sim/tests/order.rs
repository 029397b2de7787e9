//! PCT order (`OrderStrategy::Pct`) on the harness's fan-in bank: the
//! clean application passes, a planted gate bug is caught, and runs stay
//! deterministic (I9).

use parsley::mutation::Mutation;
use parsley_sim::sim::{Invariant, OrderStrategy};

use crate::support;

fn settings() -> parsley_sim::sim::Settings {
    let mut settings = support::fan_in_settings();
    settings.order = OrderStrategy::Pct { depth: 3 };
    settings
}

#[test]
fn pct_order_passes_a_correct_application_and_replays_exactly() {
    let simulation = support::bank_simulation(settings(), None);
    let summary = simulation.check_seeds(0..40);
    assert!(summary.failure.is_none(), "{}", summary.failure.unwrap());
    for seed in [3, 17] {
        assert_eq!(
            simulation.run_seed(seed).trace_hash,
            simulation.run_seed(seed).trace_hash,
            "seed {seed} ran twice differently under PCT"
        );
    }
}

#[test]
fn pct_order_catches_a_gate_that_ignores_claims() {
    let simulation = support::bank_simulation(settings(), Some(Mutation::GateIgnoresClaims));
    let caught = (0..10).any(|seed| {
        simulation
            .run_seed(seed)
            .violations
            .iter()
            .any(|violation| violation.invariant == Invariant::I1)
    });
    assert!(caught, "gate-ignores-claims unnoticed over 10 PCT seeds");
}
