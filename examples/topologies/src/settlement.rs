//! The settlement example (J5–J7).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use parsley::{App, CompositionError, Json, Parsley, Stage, Topic, Utf8};
use parsley::{Join, JoinWindows};

use crate::*;

/// The topics of the settlement example (J5–J7).
#[derive(Clone, Debug)]
pub struct SettlementTopics {
    /// Orders, keyed by order id; the value is the amount due.
    pub orders: Topic<String, i64>,
    /// Payments, keyed by the order id they pay; the value is the amount.
    pub payments: Topic<String, i64>,
    /// Each order with each payment made within [`SETTLE_WITHIN_MS`] of it,
    /// and each order or payment that met none (an outer join).
    pub settlements: Topic<String, Settlement>,
    /// Each order with each payment within the window, in timestamp order
    /// (an inner join, G9).
    pub paid: Topic<String, i64>,
}

impl SettlementTopics {
    /// The topics with their plain names.
    pub fn new() -> Self {
        SettlementTopics::with_prefix("")
    }

    /// The same topics with `prefix` before each name.
    pub fn with_prefix(prefix: &str) -> Self {
        SettlementTopics {
            orders: long_topic(format!("{prefix}orders")),
            payments: long_topic(format!("{prefix}payments")),
            settlements: Topic::with_codecs(format!("{prefix}settlements"), Utf8, Json),
            paid: long_topic(format!("{prefix}paid-orders")),
        }
    }
}

impl Default for SettlementTopics {
    fn default() -> Self {
        SettlementTopics::new()
    }
}

/// An order and a payment that met within the join window, or either alone
/// once its window closed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settlement {
    /// The order's amount, when there is an order.
    pub order: Option<i64>,
    /// The payment's amount, when there is a payment.
    pub payment: Option<i64>,
}

/// How far apart in time an order and its payment may be to meet, in
/// milliseconds (J5).
pub const SETTLE_WITHIN_MS: u64 = 300;

/// How long after its window an order or a payment is held for a match
/// that arrives out of order, in milliseconds (J6).
pub const SETTLE_GRACE_MS: u64 = 150;

/// How long the `paid` join waits for a side it is caught up on to get
/// more (G9).
pub const SETTLE_IDLE_MS: u64 = 200;

/// Stream–stream joins (J5–J7) over orders and payments: `settle` writes
/// each order with each payment within [`SETTLE_WITHIN_MS`] of it and,
/// once its window and [`SETTLE_GRACE_MS`] of grace have closed, each
/// order or payment that met none (an outer join); `paid` writes the paid
/// amount of each pair (an inner join) in timestamp order (G9).
pub fn settlement(topics: &SettlementTopics) -> Result<App, CompositionError> {
    settlement_named("settlement", topics)
}

/// [`settlement`] under another application id.
pub fn settlement_named(app_id: &str, topics: &SettlementTopics) -> Result<App, CompositionError> {
    let window = JoinWindows::time_difference(Duration::from_millis(SETTLE_WITHIN_MS))
        .grace(Duration::from_millis(SETTLE_GRACE_MS));
    let settle = Stage::named("settle")
        .join(Join::stream_stream(
            &topics.orders,
            &topics.payments,
            window,
        ))
        .outer(|_, order: Option<&i64>, payment: Option<&i64>| Settlement {
            order: order.copied(),
            payment: payment.copied(),
        })
        .into(&topics.settlements)
        .build();
    let paid = Stage::named("paid")
        .join(Join::stream_stream(
            &topics.orders,
            &topics.payments,
            window,
        ))
        .inner(|_, _order: &i64, payment: &i64| *payment)
        .synchronise_by_timestamp(Duration::from_millis(SETTLE_IDLE_MS))
        .into(&topics.paid)
        .build();
    Parsley::named(app_id).stage(settle).stage(paid).build()
}
