//! The `as-of` example's joins in the simulator: of the orders priced with
//! a discount, the share that met a discount newer than themselves (read
//! from the committed logs, the discounts' own log the reference), for the
//! versioned joins (J17) and for the plain join beside them (J2).

use std::sync::{Arc, Mutex};

use parsley_examples::as_of::met_newer_discounts;
use parsley_examples::AsOfTopics;

use crate::shipped;

/// Per run, for the versioned and the plain join: orders priced with a
/// discount, and those that met a newer one.
type Shares = [(usize, usize); 2];

/// J2, J17: over 200 seeds of the shipped scenario, under its faults, no
/// order of the versioned join met a discount newer than itself; the plain
/// join's orders did.
#[test]
fn j17_no_versioned_order_meets_a_newer_discount_where_plain_ones_do() {
    let scenario = shipped::scenario("as-of");
    let last: Arc<Mutex<Option<Shares>>> = Arc::new(Mutex::new(None));
    let seen = Arc::clone(&last);
    let topics = AsOfTopics::new();
    let simulation = parsley_examples::registry()
        .simulation_with(&scenario.topology, &scenario.settings)
        .unwrap()
        .property("shares of orders meeting a newer discount", move |run| {
            let mut shares = [(0, 0); 2];
            for (share, priced) in shares.iter_mut().zip([&topics.priced, &topics.latest]) {
                let discounted = run
                    .records(priced)?
                    .iter()
                    .filter(|order| order.value().discount.is_some())
                    .count();
                let newer = met_newer_discounts(run, &topics.discounts, priced)?.len();
                *share = (discounted, newer);
            }
            *seen.lock().unwrap() = Some(shares);
            Ok(())
        })
        .seeds(0..200)
        .build()
        .unwrap();
    let mut totals = [(0, 0); 2];
    for seed in 0..200 {
        *last.lock().unwrap() = None;
        let outcome = simulation.run_seed(seed);
        assert!(
            outcome.violations.is_empty(),
            "seed {seed}: {:?}",
            outcome.violations
        );
        let shares = last.lock().unwrap().expect("the property ran");
        for (total, share) in totals.iter_mut().zip(shares) {
            total.0 += share.0;
            total.1 += share.1;
        }
    }
    let [(versioned, versioned_newer), (plain, plain_newer)] = totals;
    eprintln!(
        "orders meeting a newer discount: versioned {versioned_newer} of {versioned}, plain {plain_newer} of {plain} ({:.1} %)",
        100.0 * plain_newer as f64 / plain.max(1) as f64
    );
    assert!(versioned > 1_000 && plain > 1_000, "too little exercised");
    assert_eq!(versioned_newer, 0, "a versioned join met a newer discount");
    assert!(
        plain_newer > 0,
        "the plain join never met a newer discount: the scenario does not race"
    );
}
