//! The by-product example (R1, R3 with W1–W4).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use parsley::{App, CompositionError, Json, Parsley, Stage, Step, Topic, Utf8, I64};
use parsley::{Close, Windowed, WindowedCodec, Windows};

use crate::*;

/// A sale: which product, and for how much. Keyed by customer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sale {
    /// The product sold.
    pub product: String,
    /// The amount.
    pub amount: i64,
}

/// The topics of the by-product example (R1, R3 with W1–W4).
#[derive(Clone, Debug)]
pub struct ByProductTopics {
    /// Sales, keyed by customer.
    pub sales: Topic<String, Sale>,
    /// Sales at the price each customer pays, keyed by customer.
    pub priced: Topic<String, Sale>,
    /// Revenue per product per second, each second once it closes.
    pub revenue: Topic<Windowed<String>, i64>,
    /// How many closed product-seconds of each size (`small`, `large`) so
    /// far, keyed by size.
    pub sizes: Topic<String, i64>,
}

impl ByProductTopics {
    /// The topics with their plain names.
    pub fn new() -> Self {
        ByProductTopics::with_prefix("")
    }

    /// The same topics with `prefix` before each name.
    pub fn with_prefix(prefix: &str) -> Self {
        ByProductTopics {
            sales: Topic::with_codecs(format!("{prefix}customer-sales"), Utf8, Json),
            priced: Topic::with_codecs(format!("{prefix}priced-sales"), Utf8, Json),
            revenue: Topic::with_codecs(
                format!("{prefix}product-revenue"),
                WindowedCodec(Utf8),
                I64,
            ),
            sizes: Topic::with_codecs(format!("{prefix}revenue-sizes"), Utf8, I64),
        }
    }
}

impl Default for ByProductTopics {
    fn default() -> Self {
        ByProductTopics::new()
    }
}

/// From a customer's this-many-th sale on, they pay [`LOYAL_PERCENT`] of
/// the price.
pub const LOYAL_FROM: i64 = 3;

/// What a loyal customer pays, in percent of the price.
pub const LOYAL_PERCENT: i64 = 90;

/// A product-second's revenue from this much on is `large`.
pub const LARGE_REVENUE: i64 = 200;

/// Re-keying within a stage (R1, R3), on records and on ticks: a fold per
/// customer prices each sale (from a customer's [`LOYAL_FROM`]th sale on,
/// at [`LOYAL_PERCENT`] %) and writes it to `priced-sales`, keyed by
/// customer; the same stage writes each priced sale again, re-keyed by
/// product, to the derived topic `by-product-by-product-repartition`. The
/// revenue per product per second is summed from there (tumbling windows
/// with grace, closed by the wall clock, so each is written on a tick) and
/// written to `product-revenue`; the windows' stage writes each result
/// again, re-keyed by its size (`large` from [`LARGE_REVENUE`]), to
/// `by-product-by-size-repartition`, and a third stage counts the
/// product-seconds of each size. Only the sales, priced sales, revenue and
/// size counts are declared; the repartition topics, the changelogs, the
/// windows' tick topic and the topics' partition counts are derived.
pub fn by_product(topics: &ByProductTopics) -> Result<App, CompositionError> {
    by_product_named("by-product", topics)
}

/// [`by_product`] under another application id.
pub fn by_product_named(app_id: &str, topics: &ByProductTopics) -> Result<App, CompositionError> {
    let app = Parsley::named(app_id);
    let sales_by_product = topics.priced.repartition("by-product", Utf8);
    let by_size = topics.revenue.repartition("by-size", Utf8);
    let priced = topics.priced.clone();
    let pricing = Stage::named("pricing")
        .state(Json, || 0i64)
        .on(&topics.sales, move |sales: i64, sale| {
            let count = sales + 1;
            let percent = if count >= LOYAL_FROM {
                LOYAL_PERCENT
            } else {
                100
            };
            let amount = checked(sale.value().amount)? * percent / 100;
            let priced_sale = Sale {
                product: sale.value().product.clone(),
                amount,
            };
            Ok::<_, String>(
                Step::of(count).emit(priced.send(sale.key().cloned().clone(), priced_sale)),
            )
        })
        .into(&topics.priced)
        .rekey_output(&topics.priced, &sales_by_product, |_, sale| {
            sale.product.clone()
        })
        .build();
    let revenue = Stage::named("product-revenue")
        .windowed(
            Windows::tumbling(Duration::from_millis(REVENUE_WINDOW_MS))
                .grace(Duration::from_millis(REVENUE_GRACE_MS)),
        )
        .aggregate(
            &sales_by_product,
            I64,
            || 0i64,
            |total, sale| checked(sale.value().amount).map(|amount| total + amount),
        )
        .close_by(Close::WallClock {
            resolution: Duration::from_millis(REVENUE_GRACE_MS),
        })
        .into(&topics.revenue)
        .rekey_output(&topics.revenue, &by_size, |_, total| {
            match *total >= LARGE_REVENUE {
                true => "large",
                false => "small",
            }
            .to_string()
        })
        .build();
    let sizes = topics.sizes.clone();
    let counting = Stage::named("revenue-sizes")
        .state(Json, || 0i64)
        .on(&by_size, move |count: i64, window| {
            Step::of(count + 1).emit(sizes.send(window.key().cloned().clone(), count + 1))
        })
        .into(&topics.sizes)
        .build();
    app.stage(pricing).stage(revenue).stage(counting).build()
}
