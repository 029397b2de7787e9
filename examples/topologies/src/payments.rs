//! The `payments` examples: `balances` and `audit_cut` (T1–T8).

use std::time::Duration;

use parsley::{App, CompositionError, Parsley, Stage, Step, Tick, Topic, I64};

use crate::*;

/// The topics of the `payments` examples.
#[derive(Clone, Debug)]
pub struct PaymentsTopics {
    /// Orders, keyed by account.
    pub orders: Topic<String, Order>,
    /// Audit cuts and balances.
    pub audits: Topic<String, String>,
}

impl PaymentsTopics {
    /// The topics with their plain names.
    pub fn new() -> Self {
        PaymentsTopics::with_prefix("")
    }

    /// The same topics with `prefix` before each name (the live tests run
    /// each example in its own namespace).
    pub fn with_prefix(prefix: &str) -> Self {
        PaymentsTopics {
            orders: order_topic(format!("{prefix}orders")),
            audits: text_topic(format!("{prefix}audits")),
        }
    }
}

impl Default for PaymentsTopics {
    fn default() -> Self {
        PaymentsTopics::new()
    }
}

/// The seed's `balances` stage: each order's total is taken off its
/// account's balance, and every minute the stage cuts an audit marker.
///
/// The tick's stamp claims everything the task had delivered when the minute
/// fired, so whoever reads `cut@…` from `audits` is gated behind those
/// orders.
pub fn balances_stage(topics: &PaymentsTopics) -> Stage {
    balances_stage_every(topics, Duration::from_secs(60))
}

/// `balances` with another tick interval.
pub fn balances_stage_every(topics: &PaymentsTopics, interval: Duration) -> Stage {
    balances_stage_with(topics, interval, false)
}

/// [`balances_stage_every`] with X5's opt-in: the orders its logic refuses
/// (negative amounts) are dead-lettered to `<application.id>-balances-dlq`
/// instead of stopping the task.
pub fn balances_stage_dead_letters(topics: &PaymentsTopics, interval: Duration) -> Stage {
    balances_stage_with(topics, interval, true)
}

fn balances_stage_with(topics: &PaymentsTopics, interval: Duration, dead_letters: bool) -> Stage {
    let audits = topics.audits.clone();
    let mut stage = Stage::named("balances")
        .state(I64, || 0i64)
        .on(&topics.orders, |balance: i64, order| {
            checked(order.value().total()).map(|total| Step::of(balance - total))
        })
        .ticks(interval, move |tick| {
            vec![audits.send(None, format!("cut@{}", tick.timestamp))]
        })
        .into(&topics.audits);
    if dead_letters {
        stage = stage.dead_letter_queue();
    }
    stage.build()
}

/// The `payments` application with the `balances` stage: a balance per account folded from orders, and a cut emitted on every tick.
pub fn balances(topics: &PaymentsTopics) -> Result<App, CompositionError> {
    Parsley::named("payments")
        .stage(balances_stage(topics))
        .build()
}

/// The fifth-tick audit cut: the tick slot counts quiet ticks, and every
/// fifth one emits a cut marker and resets the count.
pub fn audit_cut_policy(audits: &Topic<String, String>, quiet: i64, tick: &Tick) -> Step<i64> {
    if quiet + 1 >= 5 {
        Step::of(0).emit(audits.send(None, format!("cut@{}", tick.timestamp)))
    } else {
        Step::of(quiet + 1)
    }
}

/// The `audit-cut` stage: balances folded per account as in `balances`, with
/// the fifth-tick cut as its tick fold over the integer tick slot.
pub fn audit_cut_stage(topics: &PaymentsTopics) -> Stage {
    audit_cut_stage_every(topics, Duration::from_secs(60))
}

/// The audit cut with another tick interval.
pub fn audit_cut_stage_every(topics: &PaymentsTopics, interval: Duration) -> Stage {
    let audits = topics.audits.clone();
    Stage::named("audit-cut")
        .state(I64, || 0i64)
        .on(&topics.orders, |balance: i64, order| {
            checked(order.value().total()).map(|total| Step::of(balance - total))
        })
        .tick_fold(interval, move |quiet, tick| {
            audit_cut_policy(&audits, quiet, tick)
        })
        .into(&topics.audits)
        .build()
}

/// The `payments` application with the `audit-cut` stage (its tick fold emits a cut on every fifth quiet tick).
pub fn audit_cut(topics: &PaymentsTopics) -> Result<App, CompositionError> {
    Parsley::named("payments")
        .stage(audit_cut_stage(topics))
        .build()
}
