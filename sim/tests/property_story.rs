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
                    .filter(|click| click.key() == record.key())
                    .count() as i64;
                if *record.value() > seen {
                    return Err(PropertyFailure::new(format!(
                        "{:?} counted {} of {seen} clicks",
                        record.key(),
                        record.value()
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

/// The same bug, under a property that names no record: the run is
/// bisected over its committed history, and the story leads with the
/// first commit after which the property fails — a transaction of the
/// `count` task, which wrote the count that runs ahead.
#[test]
fn a_property_that_names_no_record_is_told_from_the_first_commit_it_fails_after() {
    let (clicks, counted) = (topic("clicks"), topic("counted"));
    let simulation = Simulation::builder(app())
        .input(Input::new(&clicks, |draw| (Some(draw.key()), 1)))
        .partitions(2)
        .inputs(30)
        .budget(600, 3_000)
        .property("a count never runs ahead of the clicks", move |run| {
            let clicks = run.records(&clicks)?;
            for record in run.records(&counted)? {
                let seen = clicks
                    .iter()
                    .filter(|click| click.key() == record.key())
                    .count() as i64;
                if *record.value() > seen {
                    return Err(
                        format!("{:?} counted {} of {seen}", record.key(), record.value()).into(),
                    );
                }
            }
            Ok(())
        })
        .build()
        .unwrap();
    let outcome = (0..40)
        .map(|seed| simulation.run_seed(seed))
        .find(|outcome| !outcome.violations.is_empty())
        .expect("the double count fails some seed");
    let violation = &outcome.violations[0];
    assert_eq!(violation.invariant, Invariant::Property(0));
    assert!(
        violation.message.contains("fails from commit"),
        "{}",
        violation.message
    );
    let (tp, offset) = violation.record.clone().expect("the commit's first record");
    assert_eq!(tp.topic.as_str(), "counted", "{}", violation.message);
    assert_eq!(
        &*violation.task.as_ref().expect("the committing task").stage,
        "count"
    );
    let last = outcome.trace.last().unwrap().step;
    assert!(violation.step < last, "dated at the commit, not at the end");
    let told = story(&outcome, 40);
    assert!(told.contains(&format!("{tp}@{offset}")), "{told}");
    assert!(!told.contains("the run's last events follow"), "{told}");
}

/// A property that reads a task's state is not bisected: the state is the
/// run's end state whatever prefix of the records it is read with.
#[test]
fn a_property_that_reads_state_is_dated_at_the_end() {
    let (clicks, counted) = (topic("clicks"), topic("counted"));
    let simulation = Simulation::builder(app())
        .input(Input::new(&clicks, |draw| (Some(draw.key()), 1)))
        .partitions(2)
        .inputs(30)
        .budget(600, 3_000)
        .property("k3 is never counted twice", move |run| {
            let state: Option<i64> = run.key_slot("count", &counted, &"k3".to_string())?;
            let clicks = run
                .records(&clicks)?
                .iter()
                .filter(|click| click.key().map(String::as_str) == Some("k3"))
                .count() as i64;
            match state {
                Some(count) if count > clicks => Err(format!("k3 at {count} of {clicks}").into()),
                _ => Ok(()),
            }
        })
        .build()
        .unwrap();
    let outcome = (0..40)
        .map(|seed| simulation.run_seed(seed))
        .find(|outcome| !outcome.violations.is_empty())
        .expect("the double count fails some seed");
    let violation = &outcome.violations[0];
    assert!(
        !violation.message.contains("fails from commit"),
        "{}",
        violation.message
    );
    assert_eq!(violation.record, None);
    assert_eq!(violation.step, outcome.trace.last().unwrap().step);
}
