//! The application under the simulator: 2,000 seeds with faults on, every
//! rule checked, timers (K2) included, plus the application's own
//! property.

use std::collections::BTreeMap;

use parsley_sim::sim::{Input, Simulation};
use parsley_user_app::{app, Topics, GAP_MS};

#[test]
fn two_thousand_seeds_of_sessions_and_fraud() {
    let topics = Topics::new("");
    let app = app("", &topics, GAP_MS).unwrap();
    let (clicks, summaries) = (topics.clicks.clone(), topics.summaries.clone());
    Simulation::builder(app)
        .input(Input::new(&topics.clicks, |draw| {
            (Some(draw.key()), draw.range(0, 7))
        }))
        .input(Input::new(&topics.payments, |draw| {
            (Some(draw.key()), draw.range(1, 2_000))
        }))
        .partitions(2)
        .instances(2)
        .inputs(40)
        .budget(800, 4_000)
        .seeds(0..2_000)
        .property(
            "every click ends in exactly one closed session",
            move |run| {
                let mut open: BTreeMap<Option<String>, i64> = BTreeMap::new();
                for click in run.records(&clicks)? {
                    *open.entry(click.key().cloned().clone()).or_default() += 1;
                }
                for summary in run.records(&summaries)? {
                    *open.entry(summary.key().cloned().clone()).or_default() -= summary.value();
                }
                match open.into_iter().find(|(_, left)| *left != 0) {
                    None => Ok(()),
                    Some((user, left)) => {
                        Err(format!("{user:?}: {left} clicks in no closed session").into())
                    }
                }
            },
        )
        .sometimes("a session closed", {
            let summaries = topics.summaries.clone();
            move |run| Ok(!run.records(&summaries)?.is_empty())
        })
        .sometimes("an instance crashed", |run| Ok(run.stats().crashes > 0))
        .build()
        .unwrap()
        .check();
}
