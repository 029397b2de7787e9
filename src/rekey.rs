//! Re-keying as an operator (R1–R2): Kafka Streams' `selectKey(…)` followed
//! by the repartition topic its next stateful operation derives.
//!
//! [`AppBuilder::rekey`](crate::app::AppBuilder::rekey) makes a stage that
//! writes every record of its source, value unchanged, under the key a
//! function of the record selects, to a topic Parsley derives:
//! `<application.id>-<stage>-repartition`. It returns the stage and that
//! topic, typed, for downstream stages to consume:
//!
//! - **The repartition topic (R1).** It is the re-key stage's own, like its
//!   tick topic and changelog: it has one partition per task of the stage
//!   (its source's partition count, C3), the probe lists it (C4) and setup
//!   creates it; no other stage may write it. A record lands on the
//!   partition Kafka's default partitioner gives its new key, so every
//!   record of a key meets in one downstream task.
//! - **The re-keyed record (R2).** Its value is the source record's bytes,
//!   its timestamp the source record's, and its stamp claims the source
//!   record and its causes (G5), so gating downstream still holds. A key
//!   function that returns an error or panics refuses the record (X5), as
//!   does a value the source's codec refuses.
//!
//! ```
//! use parsley::{Parsley, Stage, Step, Topic, Json, Utf8, I64};
//!
//! let sales = Topic::<String, i64>::with_codecs("sales-by-customer", Utf8, I64);
//! let shop = Parsley::named("shop");
//! // Each sale again, keyed by its product (here: the customer's initial).
//! let (by_product, sales_by_product) = shop.rekey("by-product", &sales, Utf8, |sale| {
//!     sale.key().and_then(|customer| customer.get(..1)).unwrap_or("?").to_string()
//! });
//! assert_eq!(sales_by_product.name().as_str(), "shop-by-product-repartition");
//! let totals = Topic::<String, i64>::with_codecs("product-totals", Utf8, I64);
//! let out = totals.clone();
//! let totalling = Stage::named("totals")
//!     .state(Json, || 0i64)
//!     .on(&sales_by_product, move |total: i64, sale| {
//!         Step::of(total + sale.value).emit(out.send(sale.key().cloned(), total + sale.value))
//!     })
//!     .into(&totals)
//!     .build();
//! let app = shop.stage(by_product).stage(totalling).build()?;
//! assert!(app.stage("by-product").unwrap().stage.rekey().is_some());
//! # Ok::<(), parsley::CompositionError>(())
//! ```

use std::sync::Arc;

use crate::codec::Codec;
use crate::emission::{Record, Step};
use crate::stage::logic::{guarded, DeliveryFailure, Fallible, TypedLogic};
use crate::stage::{Stage, StageDef};
use crate::topic::{Topic, TopicRef};
use crate::tp::TopicName;

/// `<application.id>-<stage>-repartition` (R1).
pub fn repartition_topic_name(app: &str, stage: &str) -> String {
    format!("{app}-{stage}-repartition")
}

/// A re-key stage's declaration, as [`Stage::rekey`] reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RekeyDecl {
    /// The source topic.
    pub source: TopicName,
    /// The derived repartition topic it writes (R1).
    pub repartition: TopicName,
}

/// The re-key stage of application `app` and its repartition topic; see
/// [`AppBuilder::rekey`](crate::app::AppBuilder::rekey).
pub(crate) fn rekey<K, V, K2, KC, R>(
    app: &str,
    name: String,
    source: &Topic<K, V>,
    key_codec: KC,
    select: impl Fn(&Record<K, V>) -> R + Send + Sync + 'static,
) -> (Stage, Topic<K2, V>)
where
    K: 'static,
    V: Clone + 'static,
    K2: 'static,
    KC: Codec<K2>,
    R: Fallible<K2>,
{
    let repartition = source.rekeyed(repartition_topic_name(app, &name), key_codec);
    let decl = RekeyDecl {
        source: source.name().clone(),
        repartition: repartition.name().clone(),
    };
    let decoding = source.clone();
    let out = repartition.clone();
    let logic = TypedLogic::<()> {
        state: None,
        sources: vec![Arc::new(move |(), tp, consumed| {
            let record =
                decoding
                    .decode(tp, consumed)
                    .map_err(|refused| DeliveryFailure::Codec {
                        part: refused.part,
                        error: refused.error,
                    })?;
            let key = guarded(|| select(&record).into_result())?;
            Ok(Step {
                state: Some(()),
                emissions: vec![out.send(key, record.value)],
            })
        })],
        tick: None,
    };
    let stage = Stage {
        def: Arc::new(StageDef {
            rekey: Some(decl),
            ..StageDef::built_in(
                name,
                vec![TopicRef::from(source)],
                vec![TopicRef::from(&repartition)],
                false,
                Arc::new(logic),
            )
        }),
    };
    (stage, repartition)
}
