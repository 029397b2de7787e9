//! The storefront: every operator over one set of sources, as an
//! application that mixes them would be. Orders, payments, discounts and
//! credit limits keyed by customer feed a dedupe (expiring state), a
//! stream–table join, a stream–stream join with the dead-letter opt-in
//! whose settlements are re-keyed by status within the join and counted, a
//! re-key stage into tumbling windows, session windows, a table–table join
//! and a versioned join with a grace period. Each operator also has an example of its own; here they share
//! sources, tasks' inputs and the simulator's faults, so that each planted
//! operator bug is caught by a second, unlike shape.

use parsley::Stage;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use parsley::Expiring;
use parsley::{App, CompositionError, Json, Parsley, Topic, Utf8, I64};
use parsley::{Join, JoinWindows};
use parsley::{SessionWindows, Windowed, WindowedCodec, Windows};

use crate::{checked, PricedOrder, Settlement, Spree};

/// The storefront's topics: four sources and eight sinks, all keyed by
/// customer except the windows by order size and the counts by settlement
/// status.
#[derive(Clone, Debug)]
pub struct StorefrontTopics {
    /// Orders, keyed by customer; the value is the amount.
    pub orders: Topic<String, i64>,
    /// Payments, keyed by customer; the value is the amount. Some do not
    /// decode: they go to the `paid` join's dead-letter topic.
    pub payments: Topic<String, i64>,
    /// Each customer's discount in percent (a table: tombstones delete).
    pub discounts: Topic<String, i64>,
    /// Each customer's credit limit (a table: tombstones delete).
    pub limits: Topic<String, i64>,
    /// Each customer's first order within [`FIRST_ORDER_MS`] of event time.
    pub first_orders: Topic<String, i64>,
    /// Every order priced at its customer's discount (a left join).
    pub priced: Topic<String, PricedOrder>,
    /// Every order with each payment within [`PAID_WITHIN_MS`] of it, or
    /// alone once its window closed (a left join).
    pub paid: Topic<String, Settlement>,
    /// How many settlements of each status (`paid`, `unpaid`, `payment
    /// only`) so far, keyed by status.
    pub settlement_counts: Topic<String, i64>,
    /// Revenue per order size (`small`, `large`) per window.
    pub by_size: Topic<Windowed<String>, i64>,
    /// Each customer's visits: orders no more than [`VISIT_GAP_MS`] apart.
    pub visits: Topic<Windowed<String>, Spree>,
    /// Each customer's discount and limit while it has either (an outer
    /// table–table join).
    pub standing: Topic<String, Standing>,
    /// Every order priced at the discount in force at its time, each held
    /// for [`AS_OF_GRACE_MS`] for late discounts (a versioned left join
    /// with a grace period).
    pub priced_as_of: Topic<String, PricedOrder>,
}

impl StorefrontTopics {
    /// The topics with their plain names.
    pub fn new() -> Self {
        let amounts = |name: &str| Topic::with_codecs(name, Utf8, I64);
        StorefrontTopics {
            orders: amounts("store-orders"),
            payments: amounts("store-payments"),
            discounts: amounts("store-discounts"),
            limits: amounts("store-limits"),
            first_orders: amounts("first-orders"),
            priced: Topic::with_codecs("store-priced", Utf8, Json),
            paid: Topic::with_codecs("store-paid", Utf8, Json),
            settlement_counts: amounts("settlement-counts"),
            by_size: Topic::with_codecs("revenue-by-size", WindowedCodec(Utf8), I64),
            visits: Topic::with_codecs("visits", WindowedCodec(Utf8), Json),
            standing: Topic::with_codecs("standing", Utf8, Json),
            priced_as_of: Topic::with_codecs("store-priced-as-of", Utf8, Json),
        }
    }
}

impl Default for StorefrontTopics {
    fn default() -> Self {
        StorefrontTopics::new()
    }
}

/// How long, in event time, a customer's later orders are not first.
pub const FIRST_ORDER_MS: u64 = 700;
/// How far apart an order and a payment may be to meet.
pub const PAID_WITHIN_MS: u64 = 250;
/// How long after its window a payment or an order waits for a match.
pub const PAID_GRACE_MS: u64 = 100;
/// The size of the by-size revenue windows.
pub const SIZE_WINDOW_MS: u64 = 500;
/// Their grace.
pub const SIZE_GRACE_MS: u64 = 150;
/// The most time between two orders of one visit.
pub const VISIT_GAP_MS: u64 = 200;
/// Its grace.
pub const VISIT_GRACE_MS: u64 = 100;
/// How long the versioned join keeps a customer's older discounts.
pub const AS_OF_RETENTION_MS: u64 = 300;
/// How long it holds an order for discounts arriving out of order.
pub const AS_OF_GRACE_MS: u64 = 120;

/// A customer's discount and credit limit, as far as known.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Standing {
    /// The latest discount, when the customer has one.
    pub discount: Option<i64>,
    /// The latest credit limit, when the customer has one.
    pub limit: Option<i64>,
}

/// A settlement's status: its counts' key after the re-key within `paid`.
fn status(settlement: &Settlement) -> String {
    match (settlement.order, settlement.payment) {
        (Some(_), Some(_)) => "paid",
        (Some(_), None) => "unpaid",
        (None, _) => "payment only",
    }
    .to_string()
}

/// An order's size: its windows' key after the re-key.
fn size(amount: i64) -> String {
    if amount >= 50 { "large" } else { "small" }.to_string()
}

/// The storefront application (see the module docs).
pub fn storefront(topics: &StorefrontTopics) -> Result<App, CompositionError> {
    let app = Parsley::named("storefront");
    let first_order = Stage::named("first-order")
        .expiring(Expiring::after(Duration::from_millis(FIRST_ORDER_MS)).from_first_write())
        .fold(
            &topics.orders,
            Json,
            || false,
            crate::first_sightings_to(&topics.first_orders),
        )
        .into(&topics.first_orders)
        .build();
    let priced = Stage::named("priced")
        .join(Join::stream_table(&topics.orders, &topics.discounts))
        .left(|order, discount: Option<&i64>| crate::priced(*order.value(), discount))
        .into(&topics.priced)
        .build();
    let window = JoinWindows::time_difference(Duration::from_millis(PAID_WITHIN_MS))
        .grace(Duration::from_millis(PAID_GRACE_MS));
    // Re-keyed within the join (R3): its unmatched results are written when
    // stream time closes their window, and their copies with them.
    let by_status = topics.paid.repartition("by-status", Utf8);
    let paid = Stage::named("paid")
        .join(Join::stream_stream(
            &topics.orders,
            &topics.payments,
            window,
        ))
        .left(|_, order: &i64, payment: Option<&i64>| Settlement {
            order: Some(*order),
            payment: payment.copied(),
        })
        .dead_letter_queue()
        .into(&topics.paid)
        .rekey_output(&topics.paid, &by_status, |_, paid| status(paid))
        .build();
    let counts = topics.settlement_counts.clone();
    let settlement_counts = parsley::Stage::named("settlement-counts")
        .state(Json, || 0i64)
        .on(&by_status, move |count: i64, settlement| {
            parsley::Step::of(count + 1)
                .emit(counts.send(settlement.key().cloned().clone(), count + 1))
        })
        .into(&topics.settlement_counts)
        .build();
    let (rekey, orders_by_size) =
        Stage::named("by-size").rekey(&topics.orders, Utf8, |order| size(*order.value()));
    let by_size = Stage::named("revenue-by-size")
        .windowed(
            Windows::tumbling(Duration::from_millis(SIZE_WINDOW_MS))
                .grace(Duration::from_millis(SIZE_GRACE_MS)),
        )
        .aggregate(
            &orders_by_size,
            I64,
            || 0i64,
            |total, amount| checked(*amount.value()).map(|amount| total + amount),
        )
        .into(&topics.by_size)
        .build();
    let visits = Stage::named("visits")
        .windowed(
            SessionWindows::with_inactivity_gap(Duration::from_millis(VISIT_GAP_MS))
                .grace(Duration::from_millis(VISIT_GRACE_MS)),
        )
        .aggregate(
            &topics.orders,
            Json,
            Spree::default,
            |visit: Spree, order| visit.with_sale(*order.value()),
            Spree::merged,
        )
        .into(&topics.visits)
        .build();
    let standing = Stage::named("standing")
        .join(Join::table_table(&topics.discounts, &topics.limits))
        .outer(|_, discount: Option<&i64>, limit: Option<&i64>| Standing {
            discount: discount.copied(),
            limit: limit.copied(),
        })
        .into(&topics.standing)
        .build();
    let priced_as_of = Stage::named("priced-as-of")
        .join(Join::stream_versioned_table(
            &topics.orders,
            &topics.discounts,
            Duration::from_millis(AS_OF_RETENTION_MS),
        ))
        .left(|order, discount: Option<&i64>| {
            crate::priced_or_nothing_due(*order.value(), discount)
        })
        .grace(Duration::from_millis(AS_OF_GRACE_MS))
        .into(&topics.priced_as_of)
        .build();
    app.stage(first_order)
        .stage(priced)
        .stage(priced_as_of)
        .stage(paid)
        .stage(settlement_counts)
        .stage(rekey)
        .stage(by_size)
        .stage(visits)
        .stage(standing)
        .build()
}
