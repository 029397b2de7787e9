//! The windows example (W1–W5).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use parsley::{App, CompositionError, Json, Parsley, Stage, Topic, Utf8, I64};
use parsley::{Close, Emit, SessionWindows, Windowed, WindowedCodec, Windows};

use crate::*;

/// The topics of the windows example (W1–W5).
#[derive(Clone, Debug)]
pub struct WindowTopics {
    /// Sales, keyed by product; the value is the amount.
    pub sales: Topic<String, i64>,
    /// Revenue per product per second, each second once it closes.
    pub per_second: Topic<Windowed<String>, i64>,
    /// Sales too late for their second (W3), as they came.
    pub late_sales: Topic<String, i64>,
    /// Sales per product over two seconds, every second, on each update.
    pub trend: Topic<Windowed<String>, i64>,
    /// Each closed second's revenue, keyed by product again.
    pub revenue: Topic<String, i64>,
    /// Each product's buying sprees: sales at most
    /// [`SPREE_GAP_MS`] apart, their count and total, once a spree closes.
    pub sprees: Topic<Windowed<String>, Spree>,
}

/// A spree's figures (the `sprees` session aggregation of the windows
/// example).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spree {
    /// How many sales it holds.
    pub sales: i64,
    /// Their amounts' sum.
    pub total: i64,
}

impl Spree {
    /// The spree with one more sale of `amount`, refused for an amount the
    /// examples refuse ([`checked`]).
    pub fn with_sale(self, amount: i64) -> Result<Spree, String> {
        checked(amount).map(|amount| Spree {
            sales: self.sales + 1,
            total: self.total + amount,
        })
    }

    /// Two sprees a bridging sale joined into one (W5).
    pub fn merged(self, other: Spree) -> Spree {
        Spree {
            sales: self.sales + other.sales,
            total: self.total + other.total,
        }
    }
}

impl WindowTopics {
    /// The topics with their plain names.
    pub fn new() -> Self {
        WindowTopics::with_prefix("")
    }

    /// The same topics with `prefix` before each name.
    pub fn with_prefix(prefix: &str) -> Self {
        let windowed = |name: String| Topic::with_codecs(name, WindowedCodec(Utf8), I64);
        WindowTopics {
            sales: long_topic(format!("{prefix}sales")),
            per_second: windowed(format!("{prefix}revenue-per-second")),
            late_sales: long_topic(format!("{prefix}late-sales")),
            trend: windowed(format!("{prefix}sales-trend")),
            revenue: long_topic(format!("{prefix}revenue")),
            sprees: Topic::with_codecs(format!("{prefix}sprees"), WindowedCodec(Utf8), Json),
        }
    }
}

impl Default for WindowTopics {
    fn default() -> Self {
        WindowTopics::new()
    }
}

/// The revenue windows' size and grace, in milliseconds.
pub const REVENUE_WINDOW_MS: u64 = 1_000;
/// How long a revenue window takes late sales (W2).
pub const REVENUE_GRACE_MS: u64 = 250;
/// The inactivity gap of a spree (W5): sales of a product at most this far
/// apart belong to one spree.
pub const SPREE_GAP_MS: u64 = 300;
/// How long after its end plus the gap a spree takes late sales (W2).
pub const SPREE_GRACE_MS: u64 = 100;

/// Windowed aggregation (W1–W4), fanned out: `revenue-per-second` sums each
/// product's sales per second (tumbling windows, 250 ms of grace, closed by
/// stream time, late sales to their own topic) and writes each second once
/// it closes; `sales-trend` counts each product's sales over two seconds,
/// every second (hopping windows closed by the wall clock at the tick
/// interval), on every update; `revenue` re-keys each closed second to its
/// product; `sprees` counts and sums each product's sales per session
/// (W5: sales at most 300 ms apart, 100 ms of grace, closed by stream time,
/// late sales only counted).
pub fn windows(topics: &WindowTopics, tick_interval: Duration) -> Result<App, CompositionError> {
    windows_named("windows", topics, tick_interval)
}

/// [`windows`] under another application id.
pub fn windows_named(
    app_id: &str,
    topics: &WindowTopics,
    tick_interval: Duration,
) -> Result<App, CompositionError> {
    let per_second = Stage::named("revenue-per-second")
        .windowed(
            Windows::tumbling(Duration::from_millis(REVENUE_WINDOW_MS))
                .grace(Duration::from_millis(REVENUE_GRACE_MS)),
        )
        .aggregate(
            &topics.sales,
            I64,
            || 0i64,
            |total, sale| checked(*sale.value()).map(|amount| total + amount),
        )
        .late_records_to(&topics.late_sales)
        .into(&topics.per_second)
        .build();
    let trend = Stage::named("sales-trend")
        .windowed(Windows::hopping(
            Duration::from_secs(2),
            Duration::from_secs(1),
        ))
        .aggregate(&topics.sales, I64, || 0i64, |count, _sale| count + 1)
        .emit(Emit::OnUpdate)
        .close_by(Close::WallClock {
            resolution: tick_interval,
        })
        .into(&topics.trend)
        .build();
    let revenue = Stage::named("revenue")
        .on(&topics.per_second, {
            let revenue = topics.revenue.clone();
            move |window| {
                let product = window.key().map(|windowed| windowed.key.clone());
                vec![revenue.send(product, *window.value())]
            }
        })
        .into(&topics.revenue)
        .build();
    let sprees = Stage::named("sprees")
        .windowed(
            SessionWindows::with_inactivity_gap(Duration::from_millis(SPREE_GAP_MS))
                .grace(Duration::from_millis(SPREE_GRACE_MS)),
        )
        .aggregate(
            &topics.sales,
            Json,
            Spree::default,
            |spree: Spree, sale| spree.with_sale(*sale.value()),
            Spree::merged,
        )
        .into(&topics.sprees)
        .build();
    Parsley::named(app_id)
        .stage(per_second)
        .stage(trend)
        .stage(revenue)
        .stage(sprees)
        .build()
}
