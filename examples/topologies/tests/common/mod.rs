//! Fixtures shared by the driver tests.
#![allow(dead_code)]

use std::time::Duration;

use parsley::{App, Json, Parsley, Stage, Step, Topic};
use parsley_sim::driver::TraceEvent;

/// 2023-11-14T22:13:20Z: a fixed initial wall clock.
pub const START: i64 = 1_700_000_000_000;
pub const MINUTE: Duration = Duration::from_secs(60);

/// A ledger that consumes orders and payments, where an order may claim the
/// payment that caused it; it ticks every minute and folds per key.
pub struct Ledger {
    pub orders: Topic<String, i64>,
    pub payments: Topic<String, i64>,
    pub audits: Topic<String, String>,
    pub app: App,
}

pub fn ledger() -> Ledger {
    let orders: Topic<String, i64> = Topic::new("orders");
    let payments: Topic<String, i64> = Topic::new("payments");
    let audits: Topic<String, String> = Topic::new("audits");
    let cut = audits.clone();
    let stage = Stage::named("ledger")
        .state(Json, || 0i64)
        .on(&orders, |balance: i64, order| {
            Step::of(balance - order.value())
        })
        .on(&payments, |balance: i64, payment| {
            Step::of(balance + payment.value())
        })
        .ticks(MINUTE, move |tick| {
            vec![cut.send(None, format!("cut@{}", tick.timestamp))]
        })
        .into(&audits)
        .build();
    let app = Parsley::named("books").stage(stage).build().unwrap();
    Ledger {
        orders,
        payments,
        audits,
        app,
    }
}

/// The offsets of the ticks a task emitted, in order.
pub fn ticks_emitted(trace: &[TraceEvent]) -> Vec<(i64, u64)> {
    trace
        .iter()
        .filter_map(|event| match event {
            TraceEvent::TickEmitted { at, offset, .. } => Some((*at, *offset)),
            _ => None,
        })
        .collect()
}

/// The (tp, offset) of every tick delivery, in order.
pub fn ticks_delivered(trace: &[TraceEvent]) -> Vec<(String, u64)> {
    trace
        .iter()
        .filter_map(|event| match event {
            TraceEvent::Delivered {
                tp,
                offset,
                tick: Some(_),
                ..
            } => Some((tp.to_string(), *offset)),
            _ => None,
        })
        .collect()
}

/// Every delivery as `tp@offset`, in order.
pub fn deliveries(trace: &[TraceEvent]) -> Vec<String> {
    trace
        .iter()
        .filter_map(|event| match event {
            TraceEvent::Delivered { tp, offset, .. } => Some(format!("{tp}@{offset}")),
            _ => None,
        })
        .collect()
}
