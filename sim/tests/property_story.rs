//! A failing property that names the records it is about gets a story about
//! them: the report leads with the record, dated where it was written and
//! on the task that wrote it (the stage with the bug), not the run's last
//! events.

use parsley::{App, Parsley, Stage, Step, Topic, Utf8, I64};
use parsley_sim::sim::story;
use parsley_sim::sim::{Input, Invariant, PropertyFailure, Simulation};

fn topic(name: &str) -> Topic<String, i64> {
    Topic::with_codecs(name, Utf8, I64)
}

/// `clicks` → `count` (each click counted, but `k3`'s twice: the bug) →
/// `counted` → `echo` → `echoed`: the stage after the bug's is the last.
fn app() -> App {
    let (clicks, counted, echoed) = (topic("clicks"), topic("counted"), topic("echoed"));
    let count = Stage::named("count")
        .state(I64, || 0i64)
        .on(&clicks, {
            let counted = counted.clone();
            move |seen: i64, click| {
                let bump = if click.key().map(String::as_str) == Some("k3") {
                    2
                } else {
                    1
                };
                Step::of(seen + bump).emit(counted.send(click.key().cloned(), seen + bump))
            }
        })
        .into(&counted)
        .build();
    let echo = Stage::named("echo")
        .on(&counted, {
            let echoed = echoed.clone();
            move |record| vec![echoed.send(record.key().cloned(), *record.value())]
        })
        .into(&echoed)
        .build();
    Parsley::named("clicks")
        .stage(count)
        .stage(echo)
        .build()
        .unwrap()
}

fn simulation() -> Simulation {
    let (clicks, counted) = (topic("clicks"), topic("counted"));
    Simulation::builder(app())
        .input(Input::new(&clicks, |draw| (Some(draw.key()), 1)))
        .partitions(2)
        .inputs(30)
        .budget(600, 3_000)
        .property("a count never runs ahead of the clicks", move |run| {
            let clicks = run.records(&clicks)?;
            for record in run.records(&counted)? {
                let seen = clicks
                    .iter()
                    .filter(|click| click.key == record.key)
                    .count() as i64;
                if record.value > seen {
                    return Err(PropertyFailure::new(format!(
                        "{:?} counted {} of {seen} clicks",
                        record.key, record.value
                    ))
                    .about(&record)
                    .into());
                }
            }
            Ok(())
        })
        .build()
        .unwrap()
}

/// The story is about the named record: it leads with it, on the `count`
/// task that wrote it, dated at its writing, and tells its events.
#[test]
fn a_property_that_names_its_record_is_told_from_that_record() {
    let simulation = simulation();
    let outcome = (0..40)
        .map(|seed| simulation.run_seed(seed))
        .find(|outcome| !outcome.violations.is_empty())
        .expect("the double count fails some seed");
    let violation = &outcome.violations[0];
    assert_eq!(violation.invariant, Invariant::Property(0));
    let (tp, offset) = violation
        .record
        .clone()
        .expect("the property named a record");
    assert_eq!(tp.topic.as_str(), "counted");
    assert_eq!(
        &*violation.task.as_ref().expect("the writer").stage,
        "count"
    );
    let last = outcome.trace.last().unwrap().step;
    assert!(
        violation.step < last,
        "dated at the writing, not at the end"
    );
    let told = story(&outcome, 40);
    assert!(told.contains(&format!("{tp}@{offset}")), "{told}");
    assert!(told.contains("count/"), "{told}");
    assert!(
        violation.message.contains(&format!("about {tp}@{offset}")),
        "{}",
        violation.message
    );
}
