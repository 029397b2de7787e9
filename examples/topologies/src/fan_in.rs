//! The fan-in.

use std::time::Duration;

use parsley::{App, CompositionError, Parsley, Stage, Step, Topic, I64};

use crate::*;

/// The topics of the fan-in.
#[derive(Clone, Debug)]
pub struct FanInTopics {
    /// Payments, keyed by account.
    pub payments: Topic<String, i64>,
    /// Orders, keyed by account.
    pub orders: Topic<String, i64>,
    /// Audit cuts and balances.
    pub audits: Topic<String, String>,
}

impl FanInTopics {
    /// The topics with their plain names.
    pub fn new() -> Self {
        FanInTopics::with_prefix("")
    }

    /// The same topics with `prefix` before each name (the live tests run
    /// each example in its own namespace).
    pub fn with_prefix(prefix: &str) -> Self {
        FanInTopics {
            payments: long_topic(format!("{prefix}payments")),
            orders: long_topic(format!("{prefix}orders")),
            audits: text_topic(format!("{prefix}audits")),
        }
    }
}

impl Default for FanInTopics {
    fn default() -> Self {
        FanInTopics::new()
    }
}

/// A fan-in of two sources where orders may claim the payments that funded
/// them: `ledger` folds both per key and cuts on every tick, and the gate
/// holds an order until its payment is delivered.
pub fn fan_in(topics: &FanInTopics, tick_interval: Duration) -> Result<App, CompositionError> {
    fan_in_named("fan-in", topics, tick_interval)
}

/// [`fan_in`] under another application id.
pub fn fan_in_named(
    app_id: &str,
    topics: &FanInTopics,
    tick_interval: Duration,
) -> Result<App, CompositionError> {
    let audits = topics.audits.clone();
    let ledger = Stage::named("ledger")
        .state(I64, || 0i64)
        .on(&topics.payments, |balance: i64, payment| {
            checked(*payment.value()).map(|amount| Step::of(balance + amount))
        })
        .on(&topics.orders, |balance: i64, order| {
            checked(*order.value()).map(|amount| Step::of(balance - amount))
        })
        .ticks(tick_interval, move |tick| {
            vec![audits.send(None, format!("cut@{}", tick.timestamp))]
        })
        .into(&topics.audits)
        .build();
    Parsley::named(app_id).stage(ledger).build()
}
