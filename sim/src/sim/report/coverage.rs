//! The library's own "sometimes" marks ([`Marks`]): the hard cases the
//! simulator exists to reach (a redelivery after an abort, a zombie fenced,
//! a fetch stalled at the last stable offset, late commit markers, a record
//! held behind a claim on another topic, a held tick). `check()` prints
//! them beside the user's marks, and fails when one that the application's
//! shape and the simulation's faults can reach was reached by no run.
//!
//! A mark is required only where a sufficient condition is known from the
//! shape and the fault rates alone. A held tick depends on more than that
//! (which claims a tick's history makes after a restart), so it is shown
//! but never required.

use std::collections::{BTreeMap, BTreeSet};

use parsley::{App, TopicName};

use crate::sim::world::settings::Settings;
use crate::sim::world::stats::Marks;

/// Fewer seeds than this are a smoke run: the library's marks are printed,
/// not judged.
pub(crate) const JUDGED_FROM_SEEDS: u64 = 20;

/// One library mark over a check's seeds.
pub(crate) struct LibraryMark {
    /// Its name, as summaries print it.
    pub name: &'static str,
    /// How often it was reached, summed over the seeds.
    pub count: u64,
    /// Why the application and its faults can reach it, when they can
    /// (a mark with a reason must be reached).
    pub reachable: Option<String>,
}

/// The library's marks for `app` under `settings`, with their counts;
/// `claims` are the inputs' declared claims (an input topic, and the topic
/// whose latest record it may claim).
pub(crate) fn library_marks(
    marks: &Marks,
    app: &App,
    settings: &Settings,
    claims: &[(TopicName, TopicName)],
) -> Vec<LibraryMark> {
    let faults = &settings.faults;
    let on = |rate: f64| rate > 0.0;
    let shape = |condition: bool, reason: String| condition.then_some(reason);
    let reasons = [
        // Tick held behind a claim: not known from the shape alone.
        None,
        shape(
            settings.instances >= 2 && (on(faults.move_task) || on(faults.crash)),
            format!(
                "{} instances, with task moves or crashes on",
                settings.instances
            ),
        ),
        shape(
            on(faults.hanging_transaction) || on(faults.marker_lag),
            "hanging input transactions or late markers are on".to_string(),
        ),
        shape(
            on(faults.abort)
                || on(faults.commit_failure)
                || on(faults.crash)
                || on(faults.move_task),
            "aborts, failed commits, crashes or moves are on".to_string(),
        ),
        derived_source(app, claims).map(|(stage, topic, derived)| {
            format!(
                "stage `{stage}` consumes `{topic}` and `{derived}`, whose records claim records \
                 of `{topic}`"
            )
        }),
        shape(
            on(faults.marker_lag),
            "late commit markers are on".to_string(),
        ),
    ];
    marks
        .named()
        .into_iter()
        .zip(reasons)
        .map(|((name, count), reachable)| LibraryMark {
            name,
            count,
            reachable,
        })
        .collect()
}

/// A stage that consumes a topic and another topic derived from it by
/// other stages (or an input declared to claim it), whose records then claim
/// records of the first: the stage, the topic and the derived topic. A
/// derivation through the stage itself does not count: what it emits
/// claims what it had delivered already, so nothing waits on it (a timer
/// service's fires, requested by the stage that consumes them).
fn derived_source(
    app: &App,
    claims: &[(TopicName, TopicName)],
) -> Option<(String, TopicName, TopicName)> {
    app.stages().iter().find_map(|plan| {
        // Which topics each topic feeds: through the other stages that
        // consume it, and as the upstream an input claims.
        let mut feeds: BTreeMap<&TopicName, BTreeSet<&TopicName>> = BTreeMap::new();
        for (input, upstream) in claims {
            feeds.entry(upstream).or_default().insert(input);
        }
        for other in app
            .stages()
            .iter()
            .filter(|other| other.name() != plan.name())
        {
            for source in other.stage.sources() {
                feeds
                    .entry(&source.name)
                    .or_default()
                    .extend(other.stage.sinks().iter().map(|sink| &sink.name));
            }
        }
        let derived_from = |topic: &TopicName| -> BTreeSet<&TopicName> {
            let mut seen = BTreeSet::new();
            let mut next: Vec<&TopicName> =
                feeds.get(topic).into_iter().flatten().copied().collect();
            while let Some(derived) = next.pop() {
                if seen.insert(derived) {
                    next.extend(feeds.get(derived).into_iter().flatten().copied());
                }
            }
            seen
        };
        let sources: Vec<&TopicName> = plan.stage.sources().iter().map(|s| &s.name).collect();
        sources.iter().find_map(|topic| {
            let derived = derived_from(topic);
            sources
                .iter()
                .find(|other| *other != topic && derived.contains(*other))
                .map(|other| (plan.name().to_string(), (*topic).clone(), (*other).clone()))
        })
    })
}

/// The marks a check of `seeds` seeds fails on: reachable, never reached.
pub(crate) fn unreached(marks: &[LibraryMark], seeds: u64) -> Vec<&LibraryMark> {
    if seeds < JUDGED_FROM_SEEDS {
        return Vec::new();
    }
    marks
        .iter()
        .filter(|mark| mark.count == 0 && mark.reachable.is_some())
        .collect()
}

/// The marks as one line: `name N` each.
pub(crate) fn line(marks: &[LibraryMark]) -> String {
    marks
        .iter()
        .map(|mark| format!("{} {}", mark.name, mark.count))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use parsley::{Parsley, Stage, Step, Topic, Utf8, I64};

    use super::*;

    fn topic(name: &str) -> Topic<String, i64> {
        Topic::with_codecs(name, Utf8, I64)
    }

    /// `forward` copies `orders` to `copies`; `join` consumes `copies`,
    /// and `orders` too when `both`.
    fn chain(both: bool) -> App {
        let (orders, copies, joined) = (topic("orders"), topic("copies"), topic("joined"));
        let forward = Stage::named("forward")
            .on(&orders, {
                let copies = copies.clone();
                move |order| vec![copies.send(order.key().cloned(), *order.value())]
            })
            .into(&copies)
            .build();
        let mut join = Stage::named("join").state(I64, || 0i64).on(&copies, {
            let joined = joined.clone();
            move |n: i64, copy| Step::of(n + 1).emit(joined.send(copy.key().cloned(), n))
        });
        if both {
            join = join.on(&orders, |n: i64, _order| Step::of(n));
        }
        let join = join.into(&joined).build();
        Parsley::named("shop")
            .stage(forward)
            .stage(join)
            .build()
            .unwrap()
    }

    /// A record held behind another topic is required of a stage that
    /// consumes a topic and one derived from it, and of no other.
    #[test]
    fn a_cross_topic_hold_is_reachable_only_where_a_source_derives_from_another() {
        assert_eq!(derived_source(&chain(false), &[]), None);
        assert_eq!(
            derived_source(&chain(true), &[]),
            Some(("join".to_string(), "orders".into(), "copies".into()))
        );
    }

    /// A topic derived through the consuming stage itself (it requests
    /// timers that another stage fires back to it) is no cross-topic hold:
    /// the stage delivered the cause before it emitted the request.
    #[test]
    fn a_derivation_through_the_stage_itself_is_no_cross_topic_hold() {
        let (clicks, requests, fires) = (topic("clicks"), topic("requests"), topic("fires"));
        let sessions = Stage::named("sessions")
            .state(I64, || 0i64)
            .on(&clicks, {
                let requests = requests.clone();
                move |n: i64, click| Step::of(n + 1).emit(requests.send(click.key().cloned(), n))
            })
            .on(&fires, |n: i64, _fire| Step::of(n))
            .into(&requests)
            .build();
        let timers = Stage::named("timers")
            .on(&requests, {
                let fires = fires.clone();
                move |request| vec![fires.send(request.key().cloned(), *request.value())]
            })
            .into(&fires)
            .build();
        let app = Parsley::named("loop")
            .stage(sessions)
            .stage(timers)
            .build()
            .unwrap();
        assert_eq!(derived_source(&app, &[]), None);
    }

    /// An input declared to claim another input's latest record derives
    /// from it, as a stage's output does.
    #[test]
    fn an_input_claiming_another_makes_a_cross_topic_hold_reachable() {
        let (orders, payments, out) = (topic("orders"), topic("payments"), topic("out"));
        let both = Stage::named("both")
            .state(I64, || 0i64)
            .on(&orders, {
                let out = out.clone();
                move |n: i64, order| Step::of(n + 1).emit(out.send(order.key().cloned(), n))
            })
            .on(&payments, |n: i64, _payment| Step::of(n))
            .into(&out)
            .build();
        let app = Parsley::named("pay").stage(both).build().unwrap();
        assert_eq!(derived_source(&app, &[]), None);
        let claims = [("orders".into(), "payments".into())];
        assert_eq!(
            derived_source(&app, &claims),
            Some(("both".to_string(), "payments".into(), "orders".into()))
        );
    }

    /// Fault-driven marks are required only when their faults are on, and
    /// only from `JUDGED_FROM_SEEDS` seeds on; a held tick never is.
    #[test]
    fn fault_marks_follow_the_fault_rates_and_the_seed_count() {
        let app = chain(false);
        let mut settings = Settings {
            instances: 2,
            ..Settings::default()
        };
        let required = |settings: &Settings, seeds: u64| -> Vec<&'static str> {
            let marks = library_marks(&Marks::default(), &app, settings, &[]);
            unreached(&marks, seeds)
                .iter()
                .map(|mark| mark.name)
                .collect()
        };
        assert_eq!(
            required(&settings, JUDGED_FROM_SEEDS),
            [
                "zombie fenced",
                "LSO stalled by a hanging transaction",
                "redelivery after an abort",
                "commit markers written late"
            ]
        );
        assert!(required(&settings, JUDGED_FROM_SEEDS - 1).is_empty());
        settings.faults = crate::sim::FaultRates::none();
        assert!(required(&settings, JUDGED_FROM_SEEDS).is_empty());
    }
}
