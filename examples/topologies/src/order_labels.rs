//! The order-labels example: foreign-key table–table joins (J10–J15).
//! Orders, a table keyed by order id whose value names the order's
//! customer (or `-` for none), joined with customers' tiers, a table keyed
//! by customer: `labels` keeps each order whose customer has a tier with
//! its label (an inner join), `listing` every order with its customer's
//! tier as far as known (a left join). Orders move between customers,
//! lose them, and are deleted; tiers change and are deleted.

use parsley::{App, CompositionError, Join, Parsley, Stage, Topic, Utf8, I64};

/// The topics of the order-labels example.
#[derive(Clone, Debug)]
pub struct OrderLabelsTopics {
    /// Each order's customer id (`-`: none), keyed by order id; a
    /// tombstone deletes the order.
    pub orders: Topic<String, String>,
    /// Each customer's tier, keyed by customer id; a tombstone deletes it.
    pub tiers: Topic<String, i64>,
    /// Each order whose customer has a tier: `<customer>@<tier>`, a
    /// tombstone once it has none (the inner join).
    pub labels: Topic<String, String>,
    /// Every order: `<customer>@<tier>`, or `<customer>@none` (the left
    /// join), a tombstone once the order is deleted.
    pub listing: Topic<String, String>,
}

impl OrderLabelsTopics {
    /// The topics with their plain names.
    pub fn new() -> Self {
        OrderLabelsTopics::with_prefix("")
    }

    /// The same topics with `prefix` before each name.
    pub fn with_prefix(prefix: &str) -> Self {
        OrderLabelsTopics {
            orders: Topic::with_codecs(format!("{prefix}order-customers"), Utf8, Utf8),
            tiers: Topic::with_codecs(format!("{prefix}customer-tiers"), Utf8, I64),
            labels: Topic::with_codecs(format!("{prefix}order-labels"), Utf8, Utf8),
            listing: Topic::with_codecs(format!("{prefix}order-listing"), Utf8, Utf8),
        }
    }
}

impl Default for OrderLabelsTopics {
    fn default() -> Self {
        OrderLabelsTopics::new()
    }
}

/// The order's foreign key: its customer, none for `-`.
fn customer(order: &String) -> Option<String> {
    (order != "-").then(|| order.clone())
}

/// The foreign-key joins of orders with their customers' tiers: `labels`
/// (inner) and `listing` (left), each three stages.
pub fn order_labels(topics: &OrderLabelsTopics) -> Result<App, CompositionError> {
    order_labels_named("order-labels", topics)
}

/// [`order_labels`] under another application id.
pub fn order_labels_named(
    app_id: &str,
    topics: &OrderLabelsTopics,
) -> Result<App, CompositionError> {
    let labels = Stage::named("labels")
        .join(Join::foreign_key(&topics.orders, &topics.tiers, customer))
        .inner(|_order: &String, customer: &String, tier: &i64| format!("{customer}@{tier}"))
        .into(&topics.labels)
        .build();
    let listing = Stage::named("listing")
        .join(Join::foreign_key(&topics.orders, &topics.tiers, customer))
        .left(|_order: &String, customer: &String, tier: Option<&i64>| {
            let tier = tier.map_or("none".to_string(), i64::to_string);
            format!("{customer}@{tier}")
        })
        .into(&topics.listing)
        .build();
    Parsley::named(app_id)
        .stages(labels)
        .stages(listing)
        .build()
}
