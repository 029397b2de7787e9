//! Tick logic is pure (S4): tested with plain equality and no runtime at all —
//! this crate has none.

use std::time::Duration;

use parsley::{Emission, Json, Parsley, Stage, Step, Tick, Topic};

/// The seed's fifth-tick policy, as a user would write it.
fn policy(audits: &Topic<String, String>, quiet: i64, _tick: &Tick) -> Step<i64> {
    if quiet + 1 >= 5 {
        Step::of(0).emit(audits.send(None, "fired"))
    } else {
        Step::of(quiet + 1)
    }
}

/// The seed's test: `Step::of(1)` emitting `audits.send(None, "fired")`
/// equals the policy's answer to its fourth quiet tick; its first quiet tick
/// just counts.
#[test]
fn s4_tick_policy_is_tested_with_plain_equality() {
    let audits: Topic<String, String> = Topic::new("audits");
    assert_eq!(policy(&audits, 0, &Tick::new(1000)), Step::of(1));
    assert_eq!(
        policy(&audits, 4, &Tick::new(1000)),
        Step::of(0).emit(audits.send(None, "fired"))
    );
    assert_ne!(
        policy(&audits, 4, &Tick::new(1000)),
        Step::of(0).emit(audits.send(None, "fired later")),
        "emissions compare by topic, key and value"
    );
}

/// S4: emissions print readably, so a failing `assert_eq!` explains itself.
#[test]
fn s4_emissions_debug_print_readably() {
    let audits: Topic<String, String> = Topic::new("audits");
    let emission: Emission = audits.send("k".to_string(), "cut@1000");
    assert_eq!(format!("{emission:?}"), r#"audits.send("k", "cut@1000")"#);
    assert_eq!(format!("{:?}", Tick::new(1000)), "Tick { timestamp: 1000 }");
}

/// T1: the same pure function declares a stage's tick fold.
#[test]
fn t1_pure_policy_is_the_stages_tick_fold() {
    let orders: Topic<String, i64> = Topic::new("orders");
    let audits: Topic<String, String> = Topic::new("audits");
    let cut = audits.clone();
    let stage = Stage::named("audit-cut")
        .state(Json, || 0i64)
        .on(&orders, |balance: i64, order| {
            Step::of(balance - order.value())
        })
        .tick_fold(Duration::from_secs(60), move |quiet, tick| {
            policy(&cut, quiet, tick)
        })
        .into(&audits)
        .build();
    let app = Parsley::named("payments").stage(stage).build().unwrap();
    let plan = app.stage("audit-cut").unwrap();
    assert_eq!(
        plan.tick_topic.as_ref().map(|topic| topic.as_str()),
        Some("payments-audit-cut-ticks")
    );
    assert_eq!(
        plan.changelog.as_ref().map(|topic| topic.as_str()),
        Some("payments-audit-cut-state-changelog")
    );
}
