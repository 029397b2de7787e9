//! Versioned tables and as-of joins (J16–J19): orders priced at the
//! discount their customer had at the order's own time, over a discount
//! table whose updates arrive out of timestamp order, with and without a
//! grace period for late discounts, beside a plain stream–table join over
//! the same topics that prices each order at the latest discount its task
//! delivered.

use parsley::Stage;
use std::collections::HashMap;
use std::time::Duration;

use parsley::Join;
use parsley::{App, CompositionError, Json, Parsley, Topic, Utf8};
use parsley_sim::sim::{BoxError, Committed};

use crate::{discounted, long_topic, priced, PricedOrder};

/// How long the versioned joins keep a customer's older discounts (J16):
/// shorter than the inputs' event-time lag, so that some updates come
/// older than it and are dropped, and some orders are older than it.
pub const AS_OF_RETENTION_MS: u64 = 15;

/// How long `as-of-graced` holds an order for late discounts (J19): within
/// the retention, and shorter than the inputs' lag, so that some orders
/// come too late to hold.
pub const AS_OF_GRACE_MS: u64 = 10;

/// The topics of the as-of example.
#[derive(Clone, Debug)]
pub struct AsOfTopics {
    /// Each customer's discount in percent, keyed by customer, stamped
    /// with the time it took effect: the versioned table (a tombstone ends
    /// the customer's discount).
    pub discounts: Topic<String, i64>,
    /// Orders, keyed by customer, stamped with the time they were placed.
    pub orders: Topic<String, i64>,
    /// Every order at the discount in force at its time (a versioned left
    /// join).
    pub priced: Topic<String, PricedOrder>,
    /// The same, each order held for [`AS_OF_GRACE_MS`] so that discounts
    /// arriving late within it are seen (a versioned left join with a
    /// grace period).
    pub priced_graced: Topic<String, PricedOrder>,
    /// The orders placed while their customer had a discount, at it (a
    /// versioned inner join).
    pub discounted: Topic<String, i64>,
    /// Every order at its customer's latest discount the join delivered (a
    /// plain left join), which may be newer than the order.
    pub latest: Topic<String, PricedOrder>,
}

impl AsOfTopics {
    /// The topics with their plain names.
    pub fn new() -> Self {
        AsOfTopics::with_prefix("")
    }

    /// The same topics with `prefix` before each name.
    pub fn with_prefix(prefix: &str) -> Self {
        AsOfTopics {
            discounts: long_topic(format!("{prefix}discounts")),
            orders: long_topic(format!("{prefix}orders")),
            priced: Topic::with_codecs(format!("{prefix}priced-as-of"), Utf8, Json),
            priced_graced: Topic::with_codecs(format!("{prefix}priced-as-of-graced"), Utf8, Json),
            discounted: long_topic(format!("{prefix}discounted-as-of")),
            latest: Topic::with_codecs(format!("{prefix}priced-latest"), Utf8, Json),
        }
    }
}

impl Default for AsOfTopics {
    fn default() -> Self {
        AsOfTopics::new()
    }
}

/// Four joins of orders with discounts: `as-of` (versioned, left),
/// `as-of-graced` (the same with a grace period) and `as-of-discounted`
/// (versioned, inner) see the discount in force at each order's timestamp;
/// `latest` (plain, left) sees the latest its task delivered.
pub fn as_of(topics: &AsOfTopics) -> Result<App, CompositionError> {
    let retention = Duration::from_millis(AS_OF_RETENTION_MS);
    let as_of = Stage::named("as-of")
        .join(Join::stream_versioned_table(
            &topics.orders,
            &topics.discounts,
            retention,
        ))
        .left(|order, discount: Option<&i64>| priced(*order.value(), discount))
        .into(&topics.priced)
        .build();
    let as_of_graced = Stage::named("as-of-graced")
        .join(Join::stream_versioned_table(
            &topics.orders,
            &topics.discounts,
            retention,
        ))
        .left(|order, discount: Option<&i64>| {
            crate::priced_or_nothing_due(*order.value(), discount)
        })
        .grace(Duration::from_millis(AS_OF_GRACE_MS))
        .into(&topics.priced_graced)
        .build();
    let as_of_discounted = Stage::named("as-of-discounted")
        .join(Join::stream_versioned_table(
            &topics.orders,
            &topics.discounts,
            retention,
        ))
        .inner(|order, discount: &i64| discounted(*order.value(), *discount))
        .into(&topics.discounted)
        .build();
    let latest = Stage::named("latest")
        .join(Join::stream_table(&topics.orders, &topics.discounts))
        .left(|order, discount: Option<&i64>| priced(*order.value(), discount))
        .into(&topics.latest)
        .build();
    Parsley::named("as-of")
        .stage(as_of)
        .stage(as_of_graced)
        .stage(as_of_discounted)
        .stage(latest)
        .build()
}

/// The committed records of `priced` that carry a discount no committed
/// update of their customer at or before their timestamp set: orders that
/// met a discount newer than themselves (the discounts' own log is the
/// reference, not a join's state). The `as-of` simulation's property
/// (none for the versioned joins) and its sometimes mark (some for the
/// plain join) read it.
pub fn met_newer_discounts(
    run: &Committed<'_>,
    discounts: &Topic<String, i64>,
    priced: &Topic<String, PricedOrder>,
) -> Result<Vec<parsley::Record<String, PricedOrder>>, BoxError> {
    let mut set: HashMap<String, Vec<(i64, i64)>> = HashMap::new();
    for partition in 0..run.partitions(discounts)? {
        let tp = parsley::Tp::new(discounts.name().clone(), partition);
        for update in run.committed_raw(&tp)? {
            let (Some(key), Some(value)) = (&update.data.key, &update.data.value) else {
                continue;
            };
            let customer = discounts.key_codec().decode(key)?;
            let discount = discounts.value_codec().decode(value)?;
            set.entry(customer)
                .or_default()
                .push((update.data.timestamp, discount));
        }
    }
    let seen_by = |order: &parsley::Record<String, PricedOrder>| {
        let Some(discount) = order.value().discount else {
            return true;
        };
        order
            .key()
            .and_then(|key| set.get(key))
            .is_some_and(|updates| {
                updates
                    .iter()
                    .any(|(at, value)| *at <= order.timestamp() && *value == discount)
            })
    };
    Ok(run
        .records(priced)?
        .into_iter()
        .filter(|order| !seen_by(order))
        .collect())
}
