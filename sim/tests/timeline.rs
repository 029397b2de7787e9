//! The picture of a run: rendered from a real simulated
//! run of the fan-in, where orders claim payments and so holds are common.

use std::collections::BTreeSet;

use parsley::task::TaskId;
use parsley::{Claim, Tp};
use parsley_sim::sim::scenario::Scenario;
use parsley_sim::sim::timeline::render_html;
use parsley_sim::sim::trace::{Entry, Event, TaskAt, TxnRef};

mod shipped;

/// The fan-in scenario, shortened for test speed.
fn fan_in() -> Scenario {
    let mut scenario = shipped::scenario("fan-in");
    scenario.settings.budget.safety_steps = 600;
    scenario.settings.budget.liveness_steps = 2000;
    scenario
}

fn trace_of(seed: u64) -> Vec<Entry> {
    shipped::simulation(&fan_in()).run_seed(seed).trace
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
        .expect("some fan-in seed in 0..20 holds an order on a delivered payment")
}

#[test]
fn the_page_is_self_contained_html() {
    let html = render_html(&trace_of(0), "fan-in seed 0");
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
    assert!(html.contains("<h1>fan-in seed 0</h1>"));
    assert!(html.trim_end().ends_with("</html>"));
}

#[test]
fn one_lane_label_per_task_instance() {
    let (_, trace) = seed_with_arrow();
    let html = render_html(&trace, "lanes");
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
        let html = render_html(&trace, "deliveries");
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
    let html = render_html(&trace, "arrows");
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
    assert_eq!(render_html(&trace, "again"), render_html(&trace, "again"));
    // And a second run of the same seed gives the same picture (I9).
    assert_eq!(
        render_html(&trace_of(3), "again"),
        render_html(&trace_of(3), "again")
    );
}

#[test]
fn the_title_is_escaped() {
    let html = render_html(&trace_of(1), "<script>alert(\"x\") & co</script>");
    assert!(!html.contains("<script>"));
    assert!(html.contains("&lt;script&gt;alert(&quot;x&quot;) &amp; co&lt;/script&gt;"));
}

#[test]
fn an_empty_trace_still_renders() {
    let html = render_html(&[], "empty");
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("nothing to draw"));
}

fn task(stage: &str, partition: u32, instance: u32) -> TaskAt {
    TaskAt {
        task: std::sync::Arc::new(TaskId {
            stage: stage.to_string(),
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
    let at = task("ledger", 0, 1);
    let held = |offset, claim_offset| Event::Held {
        at: at.clone(),
        tp: Tp::new("orders", 0),
        offset,
        claim: Claim::new(Tp::new("payments", 0), claim_offset),
        tick: false,
    };
    let trace = vec![
        entry(0, Event::TaskStarted { at: at.clone() }),
        entry(1, held(0, 3)),
        entry(2, delivered(&at, "payments", 3)),
        entry(3, delivered(&at, "orders", 0)),
        entry(4, held(1, 9)),
        entry(5, delivered(&at, "ledger-ticks", 0)),
        entry(
            6,
            Event::Committed {
                at: at.clone(),
                txn: TxnRef {
                    producer: 1,
                    epoch: 0,
                    number: 1,
                },
            },
        ),
    ];
    let html = render_html(&trace, "hand-made");
    assert_eq!(html.matches("<path class=\"arrow\"").count(), 1);
    assert_eq!(html.matches("class=\"hold mark\"").count(), 2);
    assert_eq!(html.matches("class=\"delivery ").count(), 3);
    assert_eq!(html.matches("class=\"delivery tick mark\"").count(), 1);
    assert!(html.contains("claim payments-0@3 held orders-0@0 on ledger/0@i1"));
    assert!(html.contains("not delivered after this"));
    assert_eq!(html.matches("class=\"commit mark\"").count(), 1);
}

/// Long traces squeeze into a picture of bounded width.
#[test]
fn long_traces_are_capped_in_width() {
    let at = task("ledger", 0, 0);
    let trace: Vec<Entry> = (0..20_000)
        .map(|step| entry(step, delivered(&at, "orders", step)))
        .collect();
    let html = render_html(&trace, "long");
    let width: f64 = html
        .split("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .and_then(|width| width.parse().ok())
        .expect("the svg has a width");
    assert!((5000.0..=6100.0).contains(&width), "width {width}");
    assert_eq!(html.matches("class=\"delivery ").count(), 20_000);
}

/// Writes the picture of one run for a person to look at:
/// `TIMELINE_EXAMPLE=$PWD/target/timeline-example.html cargo test -p parsley-sim --test timeline`
/// (`TIMELINE_SEED=n` picks the seed, `TIMELINE_FULL=1` keeps the scenario's
/// full budget: a long, compressed picture).
#[test]
fn write_an_example_when_asked() {
    let Some(out) = std::env::var_os("TIMELINE_EXAMPLE") else {
        return;
    };
    let seed = std::env::var("TIMELINE_SEED")
        .ok()
        .and_then(|seed| seed.parse().ok())
        .unwrap_or(0);
    let scenario = if std::env::var_os("TIMELINE_FULL").is_some() {
        shipped::scenario("fan-in")
    } else {
        fan_in()
    };
    let mut scenario = scenario;
    if let Some(inputs) = std::env::var("TIMELINE_INPUTS")
        .ok()
        .and_then(|n| n.parse().ok())
    {
        scenario.settings.workload.inputs = inputs;
    }
    let title = format!(
        "fan-in, seed {seed} ({} + {} steps)",
        scenario.settings.budget.safety_steps, scenario.settings.budget.liveness_steps
    );
    let html = render_html(&shipped::simulation(&scenario).run_seed(seed).trace, &title);
    std::fs::write(out, html).expect("the example is written");
}
