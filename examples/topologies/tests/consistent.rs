//! The consistent-view examples (`ledger`, `invoices`) under I18: their
//! views release records at cuts, and I18's reference judges every one
//! of them (no record is left unjudged) and finds none wrong. That the
//! planted view bugs are caught is `simulator.rs`'s, from the planted
//! table.

use parsley_sim::sim::Invariant;

use crate::shipped;

#[test]
fn i18_judges_every_release_of_the_consistent_view_scenarios() {
    for (name, view) in [("ledger", "totals"), ("invoices", "owed")] {
        let scenario = shipped::scenario(name);
        let simulation = shipped::simulation(&scenario);
        let mut released = 0;
        for seed in simulation.seeds().start..simulation.seeds().start + 20 {
            let outcome = simulation.run_seed(seed);
            if let Some(violation) = outcome
                .violations
                .iter()
                .find(|violation| violation.invariant == Invariant::I18)
            {
                panic!("{name}, seed {seed}: {violation}");
            }
            assert_eq!(outcome.not_judged, [], "{name}, seed {seed}");
            for partition in 0..scenario.settings.partitions {
                let tp = parsley::Tp::new(view, partition);
                let log = outcome.cluster.log(&tp).expect("the view's output exists");
                released += log
                    .read_committed()
                    .filter(|(_, data)| parsley::header::cut_of(data).is_some())
                    .count();
            }
        }
        assert!(released >= 40, "{name}: {released} releases in 20 seeds");
    }
}
