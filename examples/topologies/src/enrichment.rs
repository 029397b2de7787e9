//! The enrichment example (J1–J4).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use parsley::Join;
use parsley::{App, CompositionError, Json, Parsley, Stage, Topic, Utf8};

use crate::*;

/// The topics of the enrichment example (J1–J4).
#[derive(Clone, Debug)]
pub struct EnrichmentTopics {
    /// Each customer's discount in percent, keyed by customer: the table
    /// (a tombstone deletes the customer).
    pub discounts: Topic<String, i64>,
    /// Orders, keyed by customer; the value is the amount.
    pub orders: Topic<String, i64>,
    /// Every order priced at its customer's discount (a left join).
    pub priced: Topic<String, PricedOrder>,
    /// The orders of customers with a discount, at the discount (an inner
    /// join).
    pub discounted: Topic<String, i64>,
}

impl EnrichmentTopics {
    /// The topics with their plain names.
    pub fn new() -> Self {
        EnrichmentTopics::with_prefix("")
    }

    /// The same topics with `prefix` before each name.
    pub fn with_prefix(prefix: &str) -> Self {
        EnrichmentTopics {
            discounts: long_topic(format!("{prefix}discounts")),
            orders: long_topic(format!("{prefix}orders")),
            priced: Topic::with_codecs(format!("{prefix}priced-orders"), Utf8, Json),
            discounted: long_topic(format!("{prefix}discounted-orders")),
        }
    }
}

impl Default for EnrichmentTopics {
    fn default() -> Self {
        EnrichmentTopics::new()
    }
}

/// An order priced at its customer's discount, if the customer has one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PricedOrder {
    /// The order's amount.
    pub amount: i64,
    /// The customer's discount in percent, when the table has a row.
    pub discount: Option<i64>,
    /// What the customer pays.
    pub due: i64,
}

/// An order of `amount` priced at `discount`, if the customer has one;
/// refused as [`discounted`] and [`checked`] refuse.
pub fn priced(amount: i64, discount: Option<&i64>) -> Result<PricedOrder, String> {
    let due = match discount {
        Some(discount) => discounted(amount, *discount)?,
        None => checked(amount)?,
    };
    Ok(PricedOrder {
        amount,
        discount: discount.copied(),
        due,
    })
}

/// [`priced`] for a join with a grace period (J19), which never refuses:
/// an amount `priced` refuses is due 0. A held order is joined at the
/// delivery that releases it, and a joiner's refusal there would refuse
/// that delivery, not the order's own.
pub fn priced_or_nothing_due(amount: i64, discount: Option<&i64>) -> PricedOrder {
    priced(amount, discount).unwrap_or(PricedOrder {
        amount,
        discount: discount.copied(),
        due: 0,
    })
}

/// How long the `discounted` join of the enrichment example waits for a
/// source it is caught up on to get more (G9).
pub const DISCOUNT_IDLE_MS: u64 = 200;

/// `amount` less `discount` percent, rounded down; refused for a negative
/// amount or a discount outside 0..=100.
pub fn discounted(amount: i64, discount: i64) -> Result<i64, String> {
    let amount = checked(amount)?;
    if !(0..=100).contains(&discount) {
        return Err(format!("discount {discount}% is not a percentage"));
    }
    Ok(amount - amount * discount / 100)
}

/// Stream–table joins (J1–J4), fanned out over one table: `pricing` prices
/// every order at its customer's discount (a left join: full price without
/// one) and `discounted` writes the orders of customers with a discount (an
/// inner join) in timestamp order, waiting for records known to be in
/// either topic and up to [`DISCOUNT_IDLE_MS`] for one it is caught up on
/// (G9). Orders may claim the discount update
/// they were placed after (J3): the gate then holds them until their task
/// has it.
pub fn enrichment(topics: &EnrichmentTopics) -> Result<App, CompositionError> {
    enrichment_named("enrichment", topics)
}

/// [`enrichment`] under another application id.
pub fn enrichment_named(app_id: &str, topics: &EnrichmentTopics) -> Result<App, CompositionError> {
    let pricing = Stage::named("pricing")
        .join(Join::stream_table(&topics.orders, &topics.discounts))
        .left(|order, discount: Option<&i64>| priced(*order.value(), discount))
        .into(&topics.priced)
        .build();
    let discounted_orders = Stage::named("discounted")
        .join(Join::stream_table(&topics.orders, &topics.discounts))
        .inner(|order, discount: &i64| discounted(*order.value(), *discount))
        .synchronise_by_timestamp(Duration::from_millis(DISCOUNT_IDLE_MS))
        .into(&topics.discounted)
        .build();
    Parsley::named(app_id)
        .stage(pricing)
        .stage(discounted_orders)
        .build()
}
