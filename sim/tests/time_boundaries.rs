//! Periods a user declares for their own logic
//! (`SimulationBuilder::time_boundaries`): boundary-seeking time aims
//! input timestamps at their multiples and the millisecond either side, so
//! a user's own one-minute windowing that counts an order at exactly a
//! window's end in the earlier window is caught within 100 seeds.

use std::time::Duration;

use parsley::{App, Parsley, Stage, Topic, Utf8, I64};
use parsley_sim::sim::{Input, Invariant, PropertyFailure, Simulation, SimulationError};

const MINUTE_MS: i64 = 60_000;

fn topic(name: &str) -> Topic<String, i64> {
    Topic::with_codecs(name, Utf8, I64)
}

/// `orders` → `minute` → `bucketed`: each order written with the minute
/// the user's own windowing puts it in. `slips` plants the user's bug: an
/// order at exactly a minute's end (the next minute's first millisecond)
/// goes in the earlier minute.
fn app(slips: bool) -> App {
    let (orders, bucketed) = (topic("orders"), topic("bucketed"));
    let minute = Stage::named("minute")
        .on(&orders, {
            let bucketed = bucketed.clone();
            move |order| {
                let at = order.timestamp();
                let minute = match slips {
                    true => (at - 1).div_euclid(MINUTE_MS),
                    false => at.div_euclid(MINUTE_MS),
                };
                vec![bucketed.send(order.key().cloned(), minute)]
            }
        })
        .into(&bucketed)
        .build();
    Parsley::named("minutes").stage(minute).build().unwrap()
}

fn simulation(slips: bool, declared: bool) -> Simulation {
    let (orders, bucketed) = (topic("orders"), topic("bucketed"));
    let builder = Simulation::builder(app(slips))
        .input(
            Input::new(&orders, |draw| (Some(draw.key()), draw.range(1, 100)))
                .event_time_lag(Duration::from_millis(400)),
        )
        .partitions(2)
        .inputs(60)
        .budget(600, 3_000)
        .property(
            "an order is bucketed in the minute of its timestamp",
            move |run| {
                for record in run.records(&bucketed)? {
                    let minute = record.timestamp().div_euclid(MINUTE_MS);
                    if *record.value() != minute {
                        return Err(PropertyFailure::new(format!(
                            "an order at {} ms went in minute {}, not {minute}",
                            record.timestamp(),
                            record.value()
                        ))
                        .about(&record)
                        .into());
                    }
                }
                Ok(())
            },
        );
    let builder = match declared {
        true => builder.time_boundaries(Duration::from_secs(60)),
        false => builder,
    };
    builder.build().unwrap()
}

/// The first of `seeds` whose run breaks the property.
fn first_failing(simulation: &Simulation, seeds: std::ops::Range<u64>) -> Option<u64> {
    seeds.into_iter().find(|&seed| {
        simulation
            .run_seed(seed)
            .violations
            .iter()
            .any(|violation| violation.invariant == Invariant::Property(0))
    })
}

/// With the one-minute period declared, the slip is caught within 100
/// seeds; the correct windowing passes the same seeds.
#[test]
fn a_declared_period_catches_a_window_end_counted_in_the_earlier_window() {
    let caught = first_failing(&simulation(true, true), 0..100);
    assert!(
        caught.is_some(),
        "the one-minute slip passed 100 seeds with the period declared"
    );
    assert_eq!(first_failing(&simulation(false, true), 0..100), None);
}

/// Every run's clock starts at a whole minute (of one hour), drawn per
/// seed: the first inputs' timestamps lie on or next to a minute's edge.
#[test]
fn every_run_starts_at_a_whole_minute() {
    let simulation = simulation(false, false);
    let mut starts = std::collections::BTreeSet::new();
    for seed in 0..20 {
        let outcome = simulation.run_seed(seed);
        let start = outcome.trace.first().expect("a run has events").now;
        assert_eq!(
            start.rem_euclid(MINUTE_MS),
            0,
            "seed {seed} starts at {start}"
        );
        starts.insert(start);
    }
    assert!(starts.len() > 1, "every seed starts at {starts:?}");
}

/// At most four periods may be declared: a fifth is refused at build.
#[test]
fn a_fifth_period_is_refused() {
    let (orders, _) = (topic("orders"), topic("bucketed"));
    let mut builder =
        Simulation::builder(app(false)).input(Input::new(&orders, |draw| (Some(draw.key()), 1)));
    for seconds in 1..=5 {
        builder = builder.time_boundaries(Duration::from_secs(seconds));
    }
    match builder.build() {
        Err(SimulationError::OutOfRange { knob, .. }) => {
            assert_eq!(knob, "clock.time_boundaries_ms")
        }
        other => panic!("a fifth period was accepted: {other:?}"),
    }
}
