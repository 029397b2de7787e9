//! An order pipeline as a user would write it with Parsley's operators:
//!
//! ```text
//! orders ──► dedupe (expiring, 10 min) ──► unique-orders
//!              └─ by customer ──► enrich (left join) ◄── profiles (table)
//!                                   ├──► enriched-orders
//!                                   └─ by product ──► revenue (windows) ──► product-revenue
//!                                                        └──► late-sales
//! ```
//!
//! Only sources and sinks are declared; the two repartition topics, the
//! changelogs and the revenue windows' tick topic are derived. Each re-key
//! runs within the stage that writes what it re-keys (R3), as Kafka
//! Streams' `selectKey` runs in the sub-topology before its repartition
//! topic: an order crosses three stages, not five. The join
//! delivers orders and profiles in timestamp order (G9), so an order is
//! enriched with its customer's profile as of the order's time.

use std::time::Duration;

use parsley::Expiring;
use parsley::Join;
use parsley::{App, CompositionError, Json, Parsley, Stage, Step, Topic, Utf8, I64};
use parsley::{Close, Windowed, WindowedCodec, Windows};
use serde::{Deserialize, Serialize};

/// How long after an order id's first sighting its repeats are dropped.
pub const DEDUPE: Duration = Duration::from_secs(600);

/// How long the enrichment waits for orders or profiles when it is caught
/// up on them, for more to arrive: Kafka Streams' `max.task.idle.ms` (G9).
pub const PROFILE_WAIT: Duration = Duration::from_secs(1);

/// An order, keyed by its id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Order {
    /// The order id (also the key of `orders`).
    pub id: String,
    /// Who ordered.
    pub customer: String,
    /// What.
    pub product: String,
    /// For how much, in cents.
    pub cents: i64,
}

/// A customer's profile, keyed by customer: the table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Profile {
    /// The customer's tier.
    pub tier: String,
    /// Their discount, in percent.
    pub discount: i64,
}

/// An order with its customer's profile as the join saw it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Enriched {
    /// The order.
    pub order: Order,
    /// The customer's tier, when the table had a row.
    pub tier: Option<String>,
    /// What is due after the discount, in cents.
    pub due: i64,
}

/// The application's topics: its sources and sinks.
#[derive(Clone)]
pub struct Topics {
    /// Orders, keyed by order id; producers retry, so ids repeat.
    pub orders: Topic<String, Order>,
    /// Profiles, keyed by customer.
    pub profiles: Topic<String, Profile>,
    /// Each order id once.
    pub unique_orders: Topic<String, Order>,
    /// Each order with its customer's profile, keyed by customer.
    pub enriched: Topic<String, Enriched>,
    /// Revenue (cents due) per product per window, each window once.
    pub revenue: Topic<Windowed<String>, i64>,
    /// Enriched orders too late for their window, keyed by product.
    pub late: Topic<String, Enriched>,
}

impl Topics {
    /// The topics, every name after `prefix`.
    pub fn new(prefix: &str) -> Topics {
        Topics {
            orders: Topic::with_codecs(format!("{prefix}orders"), Utf8, Json),
            profiles: Topic::with_codecs(format!("{prefix}profiles"), Utf8, Json),
            unique_orders: Topic::with_codecs(format!("{prefix}unique-orders"), Utf8, Json),
            enriched: Topic::with_codecs(format!("{prefix}enriched-orders"), Utf8, Json),
            revenue: Topic::with_codecs(
                format!("{prefix}product-revenue"),
                WindowedCodec(Utf8),
                I64,
            ),
            late: Topic::with_codecs(format!("{prefix}late-sales"), Utf8, Json),
        }
    }
}

/// The application, its id after `prefix`: revenue windows of `window`,
/// closed by the wall clock `grace` after their end.
pub fn app(
    prefix: &str,
    topics: &Topics,
    window: Duration,
    grace: Duration,
) -> Result<App, CompositionError> {
    let shop = Parsley::named(format!("{prefix}shop"));
    let unique = topics.unique_orders.clone();
    // Each re-key runs within the stage that writes what it re-keys (R3);
    // its topic is named `<application.id>-<name>-repartition` by the build.
    let orders_by_customer = topics.unique_orders.repartition("by-customer", Utf8);
    let enriched_by_product = topics.enriched.repartition("by-product", Utf8);
    let dedupe = Stage::named("dedupe")
        .expiring(Expiring::after(DEDUPE).from_first_write())
        .fold(
            &topics.orders,
            Json,
            || false,
            move |seen: bool, order| match seen {
                true => Step::of(true),
                false => {
                    Step::of(true).emit(unique.send(order.key().cloned(), order.value().clone()))
                }
            },
        )
        .into(&topics.unique_orders)
        .rekey_output(&topics.unique_orders, &orders_by_customer, |_, order| {
            order.customer.clone()
        })
        .build();
    let enrich = Stage::named("enrich")
        .join(Join::stream_table(&orders_by_customer, &topics.profiles))
        .left(|order, profile: Option<&Profile>| Enriched {
            order: order.value().clone(),
            tier: profile.map(|profile| profile.tier.clone()),
            due: order.value().cents
                - order.value().cents * profile.map_or(0, |profile| profile.discount) / 100,
        })
        // Orders reach the join two hops after their profiles: wait for
        // them, so each order sees the profile as of its timestamp (G9).
        .synchronise_by_timestamp(PROFILE_WAIT)
        .into(&topics.enriched)
        .rekey_output(&topics.enriched, &enriched_by_product, |_, sale| {
            sale.order.product.clone()
        })
        .build();
    let revenue = Stage::named("revenue")
        .windowed(Windows::tumbling(window).grace(grace))
        .aggregate(
            &enriched_by_product,
            I64,
            || 0i64,
            |total, sale| total + sale.value().due,
        )
        .close_by(Close::WallClock {
            resolution: Duration::from_millis(250),
        })
        .late_records_to(&topics.late)
        .into(&topics.revenue)
        .build();
    shop.stage(dedupe).stage(enrich).stage(revenue).build()
}
