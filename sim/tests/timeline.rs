//! The picture of a run: rendered from a real simulated run of the
//! harness's own fan-in, the `bank`, where withdrawals claim deposits and so
//! holds are common.

use std::collections::BTreeSet;

use parsley::mutation::Mutation;
use parsley::TaskId;
use parsley::{Claim, Stamp, TopicName, Tp};
use parsley_sim::sim::{
    render_timeline, stamps_in, tick_topics, Entry, Event, Invariant, Relation, RunOutcome,
    Simulation, TaskAt, TxnRef,
};

use crate::support;

/// The bank under the fan-in settings, shortened for test speed.
fn bank() -> Simulation {
    support::bank_simulation(support::short_fan_in_settings(), None)
}

/// The bank's tick topics, as its stage declares them.
fn bank_ticks() -> Vec<TopicName> {
    tick_topics(bank().app())
}

/// The tick topic of the hand-made traces' `vault` stage.
fn hand_made_ticks() -> Vec<TopicName> {
    vec![TopicName::from("bank-vault-ticks")]
}

fn trace_of(seed: u64) -> Vec<Entry> {
    bank().run_seed(seed).trace
}

/// Whether some hold's claimed record was delivered on the same task
/// instance, and the held record after the hold: then an arrow is due.
fn has_drawable_claim(trace: &[Entry]) -> bool {
    trace.iter().enumerate().any(|(hold, entry)| {
        let Event::Held {
            at,
            tp,
            offset,
            claim,
            ..
        } = &entry.event
        else {
            return false;
        };
        let delivered = |want_tp: &Tp, want_offset: u64, after: Option<usize>| {
            trace.iter().enumerate().any(|(index, entry)| {
                matches!(&entry.event, Event::Delivered { at: a, tp: t, offset: o, .. }
                    if a == at && t == want_tp && *o == want_offset)
                    && after.is_none_or(|after| index > after)
            })
        };
        delivered(&claim.tp, claim.offset, None) && delivered(tp, *offset, Some(hold))
    })
}

/// The first seed in 0..20 whose run has a claim worth an arrow.
fn seed_with_arrow() -> (u64, Vec<Entry>) {
    (0..20)
        .map(|seed| (seed, trace_of(seed)))
        .find(|(_, trace)| has_drawable_claim(trace))
        .expect("some bank seed in 0..20 holds a withdrawal on a delivered deposit")
}

#[test]
fn the_page_is_self_contained_html() {
    let html = render_timeline(&trace_of(0), "bank seed 0", &[], None, &bank_ticks());
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert_eq!(html.matches("<svg").count(), 1, "one inline SVG");
    assert!(html.contains("<style>"));
    assert!(
        !html.contains("<script"),
        "no scripts needed: tooltips are <title>s"
    );
    assert_eq!(
        html.matches("http").count(),
        1,
        "nothing from the network: the only URL is the SVG namespace"
    );
    assert!(html.contains("<h1>bank seed 0</h1>"));
    assert!(html.trim_end().ends_with("</html>"));
}

#[test]
fn one_lane_label_per_task_instance() {
    let (_, trace) = seed_with_arrow();
    let html = render_timeline(&trace, "lanes", &[], None, &bank_ticks());
    let lanes: BTreeSet<String> = trace
        .iter()
        .filter_map(|entry| match &entry.event {
            Event::TaskStarted { at }
            | Event::Fetched { at, .. }
            | Event::Held { at, .. }
            | Event::Delivered { at, .. }
            | Event::TickChecked { at, .. }
            | Event::Committed { at, .. }
            | Event::Aborted { at, .. }
            | Event::TaskStopped { at, .. }
            | Event::Fenced { at } => Some(at.to_string()),
            _ => None,
        })
        .collect();
    assert!(!lanes.is_empty());
    assert_eq!(html.matches("class=\"lane-label\"").count(), lanes.len());
    for lane in &lanes {
        assert_eq!(
            html.matches(&format!("font-weight=\"bold\" fill=\"#222\">{lane}</text>"))
                .count(),
            1,
            "one label for {lane}"
        );
    }
}

#[test]
fn one_delivery_mark_per_delivery() {
    for seed in [0, 1, 2] {
        let trace = trace_of(seed);
        let delivered = trace
            .iter()
            .filter(|entry| matches!(entry.event, Event::Delivered { .. }))
            .count();
        assert!(delivered > 0);
        let html = render_timeline(&trace, "deliveries", &[], None, &bank_ticks());
        assert_eq!(
            html.matches("class=\"delivery ").count(),
            delivered,
            "seed {seed}"
        );
    }
}

#[test]
fn claims_that_held_a_delivered_record_draw_arrows() {
    let (seed, trace) = seed_with_arrow();
    let html = render_timeline(&trace, "arrows", &[], None, &bank_ticks());
    let arrows = html.matches("<path class=\"arrow").count();
    assert!(arrows >= 1, "seed {seed}: no arrow drawn");
    let holds = trace
        .iter()
        .filter(|entry| matches!(entry.event, Event::Held { .. }))
        .count();
    assert!(arrows <= holds, "at most one arrow per hold");
    assert_eq!(html.matches("class=\"hold mark\"").count(), holds);
}

#[test]
fn rendering_is_deterministic() {
    let (_, trace) = seed_with_arrow();
    assert_eq!(
        render_timeline(&trace, "again", &[], None, &bank_ticks()),
        render_timeline(&trace, "again", &[], None, &bank_ticks())
    );
    // And a second run of the same seed gives the same picture (I9).
    assert_eq!(
        render_timeline(&trace_of(3), "again", &[], None, &bank_ticks()),
        render_timeline(&trace_of(3), "again", &[], None, &bank_ticks())
    );
}

#[test]
fn the_title_is_escaped() {
    let html = render_timeline(
        &trace_of(1),
        "<script>alert(\"x\") & co</script>",
        &[],
        None,
        &bank_ticks(),
    );
    assert!(!html.contains("<script>"));
    assert!(html.contains("&lt;script&gt;alert(&quot;x&quot;) &amp; co&lt;/script&gt;"));
}

#[test]
fn an_empty_trace_still_renders() {
    let html = render_timeline(&[], "empty", &[], None, &[]);
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("nothing to draw"));
}

fn task(stage: &str, partition: u32, instance: u32) -> TaskAt {
    TaskAt {
        task: std::sync::Arc::new(TaskId {
            stage: stage.into(),
            partition,
        }),
        instance,
    }
}

fn entry(step: u64, event: Event) -> Entry {
    Entry {
        step,
        now: 1_700_000_000_000 + step as i64 * 10,
        event,
    }
}

fn delivered(at: &TaskAt, topic: &str, offset: u64) -> Event {
    Event::Delivered {
        at: at.clone(),
        txn: TxnRef {
            producer: 1,
            epoch: 0,
            number: 1,
        },
        tp: Tp::new(topic, 0),
        offset,
        sent: vec![],
    }
}

/// A hand-made trace: one hold released by its cause, one whose cause never
/// came, and a tick delivery.
#[test]
fn arrows_join_the_cause_to_the_released_record() {
    let at = task("vault", 0, 1);
    let held = |offset, claim_offset| Event::Held {
        at: at.clone(),
        tp: Tp::new("withdrawals", 0),
        offset,
        claim: Claim::new(Tp::new("deposits", 0), claim_offset),
        tick: false,
    };
    let trace = vec![
        entry(0, Event::TaskStarted { at: at.clone() }),
        entry(1, held(0, 3)),
        entry(2, delivered(&at, "deposits", 3)),
        entry(3, delivered(&at, "withdrawals", 0)),
        entry(4, held(1, 9)),
        entry(5, delivered(&at, "bank-vault-ticks", 0)),
        entry(
            6,
            Event::Committed {
                at: at.clone(),
                txn: TxnRef {
                    producer: 1,
                    epoch: 0,
                    number: 1,
                },
                sent: Vec::new(),
            },
        ),
    ];
    let html = render_timeline(&trace, "hand-made", &[], None, &hand_made_ticks());
    assert_eq!(html.matches("<path class=\"arrow\"").count(), 1);
    assert_eq!(html.matches("class=\"hold mark\"").count(), 2);
    assert_eq!(html.matches("class=\"delivery ").count(), 3);
    assert_eq!(html.matches("class=\"delivery tick mark\"").count(), 1);
    assert!(html.contains("claim deposits-0@3 held withdrawals-0@0 on vault/0@i1"));
    assert!(html.contains("not delivered after this"));
    assert_eq!(html.matches("class=\"commit mark\"").count(), 1);
}

/// Long traces squeeze into a picture of bounded width.
#[test]
fn long_traces_are_capped_in_width() {
    let at = task("vault", 0, 0);
    let trace: Vec<Entry> = (0..20_000)
        .map(|step| entry(step, delivered(&at, "withdrawals", step)))
        .collect();
    let html = render_timeline(&trace, "long", &[], None, &hand_made_ticks());
    let width: f64 = html
        .split("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .and_then(|width| width.parse().ok())
        .expect("the svg has a width");
    assert!((5000.0..=6100.0).contains(&width), "width {width}");
    assert_eq!(html.matches("class=\"delivery ").count(), 20_000);
}

/// A shortened bank run with the gate ignoring claims: it breaks I1.
fn planted_run(seed: u64) -> RunOutcome {
    support::bank_simulation(
        support::short_fan_in_settings(),
        Some(Mutation::GateIgnoresClaims),
    )
    .run_seed(seed)
}

/// The first planted run in seeds 0..20 that breaks I1.
fn failing_run() -> RunOutcome {
    (0..20)
        .map(planted_run)
        .find(|outcome| {
            outcome
                .violations
                .iter()
                .any(|violation| violation.invariant == Invariant::I1)
        })
        .expect("the planted bug breaks I1 within 20 seeds")
}

/// Escapes text the way the page does.
fn esc(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// The tooltip (the `<title>`) of the first mark whose tooltip contains
/// `needle`, and the mark's opening tag.
fn mark_with<'a>(html: &'a str, needle: &str) -> Option<(&'a str, &'a str)> {
    let at = html.find(needle)?;
    let open = html[..at]
        .rfind("<circle ")
        .or_else(|| html[..at].rfind("<path "))?;
    let tag_end = open + html[open..].find('>')?;
    let title_end = at + html[at..].find("</title>")?;
    let title_start = html[..at].rfind("<title>")? + "<title>".len();
    Some((&html[open..tag_end], &html[title_start..title_end]))
}

/// An attribute's value in a tag.
fn attribute<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let start = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    Some(&tag[start..start + tag[start..].find('"')?])
}

#[test]
fn the_violation_is_a_band_at_its_delivery_with_its_text() {
    let outcome = failing_run();
    let stamps = stamps_in(&outcome.cluster);
    let html = render_timeline(
        &outcome.trace,
        "planted",
        &outcome.violations,
        Some(&stamps),
        &bank_ticks(),
    );
    let first = &outcome.violations[0];
    // Listed above the picture, and labelled at its step.
    assert!(
        html.contains(&format!("<li>{}</li>", esc(&first.to_string()))),
        "the violation is not listed"
    );
    assert!(html.contains(&format!(
        ">✗ {:?} at step {}</text>",
        first.invariant, first.step
    )));
    let shown = outcome.violations.len().min(20);
    assert_eq!(html.matches("class=\"violation-band\"").count(), shown);
    // The band stands where the violating delivery is drawn, and that
    // delivery says what it broke and is ringed.
    let (tag, title) = mark_with(&html, &format!("VIOLATES {}", esc(&first.to_string())))
        .expect("the violating delivery's tooltip names the violation");
    assert!(tag.starts_with("<circle class=\"delivery"), "{tag}");
    let (tp, offset) = first.record.clone().expect("I1 names the delivery");
    assert!(
        title.contains(&format!("delivered {tp}@{offset} ")),
        "{title}"
    );
    let x = attribute(tag, "cx").expect("a delivery has a cx");
    let band = &html[html.find("class=\"violation-band\"").unwrap()..];
    assert!(
        band[..band.find("</g>").unwrap()].contains(&format!("<line x1=\"{x}\" ")),
        "the first band is not at x={x}"
    );
    assert!(html.contains(&format!("<circle class=\"violating\" cx=\"{x}\" ")));
    // Its stamp, and the claim it broke, which its task had not delivered.
    let stamp = first.stamp.as_ref().expect("I1 names the stamp");
    assert!(title.contains(&format!("stamp {stamp}")), "{title}");
    let unresolved = first
        .related
        .iter()
        .find(|related| related.relation == Relation::Unresolved)
        .expect("I1 names its unresolved claim");
    let task = &first.task.as_ref().unwrap();
    assert!(
        title.contains(&format!(
            "claim {}@{}: NOT delivered by task {task} before",
            unresolved.tp, unresolved.offset
        )),
        "{title}"
    );
}

#[test]
fn a_passing_run_has_no_violation_marks() {
    let outcome = bank().run_seed(0);
    assert!(outcome.violations.is_empty());
    let stamps = stamps_in(&outcome.cluster);
    let html = render_timeline(
        &outcome.trace,
        "passing",
        &outcome.violations,
        Some(&stamps),
        &bank_ticks(),
    );
    assert!(!html.contains("class=\"violation"), "a mark of a violation");
    assert!(!html.contains("<ul class=\"violations\">"));
    assert!(!html.contains("VIOLATES"));
    // Every delivery still shows its stamp.
    let deliveries = outcome
        .trace
        .iter()
        .filter(|entry| matches!(entry.event, Event::Delivered { .. }))
        .count();
    assert_eq!(html.matches("\nstamp {").count(), deliveries);
}

/// A hand-made trace and stamps: the tooltip of each delivery tells each
/// claim's fate on the delivering task.
#[test]
fn a_delivery_tooltip_tells_each_claim() {
    let (first, second) = (task("vault", 0, 0), task("vault", 0, 1));
    let txn = TxnRef {
        producer: 1,
        epoch: 0,
        number: 1,
    };
    let trace = vec![
        entry(0, Event::TaskStarted { at: first.clone() }),
        entry(1, delivered(&first, "deposits", 3)),
        entry(
            2,
            Event::Committed {
                at: first,
                txn,
                sent: Vec::new(),
            },
        ),
        entry(3, delivered(&second, "withdrawals", 0)),
        entry(4, delivered(&second, "withdrawals", 1)),
        entry(5, delivered(&second, "withdrawals", 2)),
    ];
    let deposits = Tp::new("deposits", 0);
    let stamps = |tp: &Tp, offset: u64| -> Option<Stamp> {
        let claims = match (tp.topic.as_str(), offset) {
            ("withdrawals", 0) => vec![Claim::new(deposits.clone(), 3)],
            ("withdrawals", 1) => vec![
                Claim::new(deposits.clone(), 9),
                Claim::new(Tp::new("elsewhere", 0), 4),
            ],
            ("withdrawals", 2) => return None,
            _ => vec![],
        };
        Some(Stamp::from_claims(claims))
    };
    let html = render_timeline(&trace, "claims", &[], Some(&stamps), &hand_made_ticks());
    let (_, title) = mark_with(&html, "delivered withdrawals-0@0 ").unwrap();
    assert!(title.contains("stamp {deposits-0@3}"), "{title}");
    assert!(
        title.contains("claim deposits-0@3: delivered at step 1 on vault/0@i0 (committed)"),
        "{title}"
    );
    let (_, title) = mark_with(&html, "delivered withdrawals-0@1 ").unwrap();
    assert!(
        title.contains("claim deposits-0@9: NOT delivered by task vault/0 before"),
        "{title}"
    );
    assert!(
        title.contains("claim elsewhere-0@4: on a tp task vault/0 does not consume"),
        "{title}"
    );
    let (_, title) = mark_with(&html, "delivered withdrawals-0@2 ").unwrap();
    assert!(title.contains("stamp: not in the log"), "{title}");
    let (_, title) = mark_with(&html, "delivered deposits-0@3 ").unwrap();
    assert!(title.contains("stamp {}"), "{title}");
}

/// The picture of a shrunk run: the axis labels are the steps and clock of
/// the entries drawn there, and the violation is marked at its real step.
#[test]
fn a_shrunk_run_is_drawn_on_its_real_steps_and_times() {
    let simulation = support::bank_simulation(
        support::short_fan_in_settings(),
        Some(Mutation::GateIgnoresClaims),
    );
    let failure = simulation.shrink(simulation.run_seed(0), 200);
    let shrunk = failure.expect("the planted bug fails seed 0").shrunk;
    let stamps = stamps_in(&shrunk.cluster);
    let html = render_timeline(
        &shrunk.trace,
        "shrunk",
        &shrunk.violations,
        Some(&stamps),
        &bank_ticks(),
    );
    let start = shrunk.trace[0].now;
    let real: BTreeSet<(String, String)> = shrunk
        .trace
        .iter()
        .map(|entry| {
            let clock = format!("t+{:.3}s", (entry.now - start) as f64 / 1000.0);
            (entry.step.to_string(), clock)
        })
        .collect();
    let axis = &html[html.find("<g class=\"axis\">").unwrap()..];
    let axis = &axis[..axis.find("</g>").unwrap()];
    let label = |text: &str| text[text.find('>').unwrap() + 1..].to_string();
    let mut labels = 0;
    for tick in axis.split("fill=\"#444\" font-size=\"10\"").skip(1) {
        let step = label(&tick[..tick.find("</text>").unwrap()]);
        let clock = tick.split("fill=\"#888\" font-size=\"10\"").nth(1).unwrap();
        let clock = label(&clock[..clock.find("</text>").unwrap()]);
        assert!(
            real.contains(&(step.clone(), clock.clone())),
            "axis label step {step} at {clock} is no entry of the run"
        );
        labels += 1;
    }
    assert!(labels > 1, "the axis has labels");
    let violation = &shrunk.violations[0];
    assert!(html.contains(&format!("✗ I1 at step {}</text>", violation.step)));
}

/// Writes the picture of one run for a person to look at:
/// `TIMELINE_EXAMPLE=$PWD/target/timeline-example.html cargo test -p parsley-sim --test main -- timeline::`
/// (`TIMELINE_SEED=n` picks the seed, `TIMELINE_FULL=1` keeps the fan-in
/// settings' full budget: a long, compressed picture).
#[test]
fn write_an_example_when_asked() {
    let Some(out) = std::env::var_os("TIMELINE_EXAMPLE") else {
        return;
    };
    let seed = std::env::var("TIMELINE_SEED")
        .ok()
        .and_then(|seed| seed.parse().ok())
        .unwrap_or(0);
    let mut settings = if std::env::var_os("TIMELINE_FULL").is_some() {
        support::fan_in_settings()
    } else {
        support::short_fan_in_settings()
    };
    if let Some(inputs) = std::env::var("TIMELINE_INPUTS")
        .ok()
        .and_then(|n| n.parse().ok())
    {
        settings.workload.inputs = inputs;
    }
    let title = format!(
        "bank, seed {seed} ({} + {} steps)",
        settings.budget.safety_steps, settings.budget.liveness_steps
    );
    let outcome = support::bank_simulation(settings, None).run_seed(seed);
    let stamps = stamps_in(&outcome.cluster);
    let html = render_timeline(
        &outcome.trace,
        &title,
        &outcome.violations,
        Some(&stamps),
        &bank_ticks(),
    );
    std::fs::write(out, html).expect("the example is written");
}

/// `clicks` → `count` (which counts `k3`'s clicks twice: the bug) →
/// `counted` → `echo` → `echoed`, with a property that names the wrong
/// count it finds; `echo` is the last stage.
fn double_count() -> parsley_sim::sim::Simulation {
    use parsley::{Parsley, Stage, Step, Topic, Utf8, I64};
    use parsley_sim::sim::{Input, PropertyFailure, Simulation};
    let topic = |name: &str| Topic::<String, i64>::with_codecs(name, Utf8, I64);
    let (clicks, counted, echoed) = (topic("clicks"), topic("counted"), topic("echoed"));
    let count = Stage::named("count")
        .state(I64, || 0i64)
        .on(&clicks, {
            let counted = counted.clone();
            move |seen: i64, click| {
                let bump = 1 + i64::from(click.key().map(String::as_str) == Some("k3"));
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
    let app = Parsley::named("clicks")
        .stage(count)
        .stage(echo)
        .build()
        .unwrap();
    Simulation::builder(app)
        .input(Input::new(&clicks, |draw| (Some(draw.key()), 1)))
        .partitions(2)
        .inputs(30)
        .budget(600, 3_000)
        .property("a count never runs ahead of the clicks", move |run| {
            let clicks = run.records(&clicks)?;
            for record in run.records(&counted)? {
                let seen = clicks.iter().filter(|c| c.key() == record.key()).count() as i64;
                if *record.value() > seen {
                    let message =
                        format!("{:?} counted {} of {seen}", record.key(), record.value());
                    return Err(PropertyFailure::new(message).about(&record).into());
                }
            }
            Ok(())
        })
        .build()
        .unwrap()
}

/// The numbers of every `name="…"` attribute of the tags that start with
/// `open`, in order.
fn numbers_of(html: &str, open: &str, name: &str) -> Vec<f64> {
    html.match_indices(open)
        .filter_map(|(at, _)| {
            let tag = &html[at..at + html[at..].find('>')?];
            attribute(tag, name)?.parse().ok()
        })
        .collect()
}

/// The lane label's text and its `y` for each lane.
fn lane_labels(html: &str) -> Vec<(String, f64)> {
    html.match_indices("<text class=\"lane-label\" ")
        .map(|(at, _)| {
            let tag = &html[at..at + html[at..].find('>').unwrap()];
            let text = &html[at + tag.len() + 1..];
            let text = &text[..text.find("</text>").unwrap()];
            (
                text.to_string(),
                attribute(tag, "y").unwrap().parse().unwrap(),
            )
        })
        .collect()
}

/// Stories about the cause (`user property #n`, docs/RULES.md#invariants):
/// a property that fails naming the wrong
/// record (`PropertyFailure::about`) marks the stage that emitted it, not
/// the app's last stage. On a two-stage app whose first stage is wrong, the
/// timeline's ring stands on the lane of the `count` task that wrote the
/// record, at the delivery that wrote it, and the red band goes through it.
#[test]
fn a_property_failure_marks_the_lane_of_the_stage_that_wrote_the_record() {
    let simulation = double_count();
    let outcome = (0..40)
        .map(|seed| simulation.run_seed(seed))
        .find(|outcome| !outcome.violations.is_empty())
        .expect("the double count fails some seed");
    let violation = &outcome.violations[0];
    assert_eq!(violation.invariant, Invariant::Property(0));
    let writer = violation.task.as_ref().expect("the writer is named");
    assert_eq!(&*writer.stage, "count");
    let (tp, offset) = violation.record.clone().expect("the record is named");
    let html = render_timeline(
        &outcome.trace,
        "double count",
        &outcome.violations,
        None,
        &tick_topics(simulation.app()),
    );

    // One ring, on a `count` lane: the lane of the task instance that wrote it.
    let rings_x = numbers_of(&html, "<circle class=\"violating\"", "cx");
    let rings_y = numbers_of(&html, "<circle class=\"violating\"", "cy");
    assert_eq!(rings_y.len(), 1, "one violation, one ring");
    let labels = lane_labels(&html);
    assert!(labels.iter().any(|(name, _)| name.starts_with("echo/")));
    let (lane, _) = labels
        .iter()
        .find(|(_, y)| (y - 4.0 - rings_y[0]).abs() < 0.05)
        .expect("the ring stands on a lane");
    assert!(
        lane.starts_with(&format!("{writer}@i")),
        "the ring is on {lane}, not on the lane of {writer}"
    );

    // At the delivery that wrote the record: its mark is under the ring and
    // tells the violation.
    let at = violation
        .entry_in(&outcome.trace)
        .expect("dated in the trace");
    match &outcome.trace[at].event {
        Event::Delivered { at, sent, .. } => {
            assert_eq!(&at.task, writer);
            assert!(sent.contains(&(tp.clone(), offset)), "{sent:?}");
        }
        other => panic!("marked at {other:?}, not at the delivery that wrote {tp}@{offset}"),
    }
    let (tag, _) = mark_with(&html, &format!("VIOLATES {}", esc(&violation.to_string())))
        .expect("the delivery's tooltip names the violation");
    assert!(tag.starts_with("<circle class=\"delivery"), "{tag}");
    assert_eq!(
        attribute(tag, "cx"),
        Some(format!("{:.1}", rings_x[0]).as_str())
    );
    // And the band's line goes through it.
    let band = &html[html.find("class=\"violation-band\"").unwrap()..];
    assert!(
        band[..band.find("</g>").unwrap()].contains(&format!("<line x1=\"{:.1}\" ", rings_x[0])),
        "the band is not at the ring's x"
    );
}
