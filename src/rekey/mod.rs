//! Re-keying as an operator (R1–R3): Kafka Streams' `selectKey(…)` followed
//! by the repartition topic its next stateful operation derives.
//!
//! Two ways to declare one, both name first like every operator; the
//! repartition topic is named after the application id, so its name is
//! filled in when the application is built, for every clone of the topic:
//!
//! - [`StageBuilder::rekey`]: a stage of its own that reads a topic (an
//!   external one, say) and writes it re-keyed:
//!   `Stage::named("by-product").rekey(&sales, Utf8, select)` returns the
//!   stage and its repartition topic.
//! - [`StageBuilder::rekey_output`] (and the same setter on an operator's
//!   builder): within the stage that writes the topic (R3), as Kafka
//!   Streams runs `selectKey` in the sub-topology before its repartition
//!   topic: each record the stage emits to its output is written again, in
//!   the same step and with the same stamp, re-keyed, to a repartition
//!   topic made with [`Topic::repartition`]. No stage and no hop of its
//!   own; see the second example below.
//!
//! [`StageBuilder::rekey`] makes a stage that writes every record of its
//! source, value unchanged, under the key a function of the record
//! selects, to a topic Parsley derives:
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
//! // Each sale again, keyed by its product (here: the customer's initial).
//! let (by_product, sales_by_product) = Stage::named("by-product").rekey(&sales, Utf8, |sale| {
//!     sale.key().and_then(|customer| customer.get(..1)).unwrap_or("?").to_string()
//! });
//! let totals = Topic::<String, i64>::with_codecs("product-totals", Utf8, I64);
//! let out = totals.clone();
//! let totalling = Stage::named("totals")
//!     .state(Json, || 0i64)
//!     .on(&sales_by_product, move |total: i64, sale| {
//!         Step::of(total + sale.value()).emit(out.send(sale.key().cloned(), total + sale.value()))
//!     })
//!     .into(&totals)
//!     .build();
//! let app = Parsley::named("shop").stage(by_product).stage(totalling).build()?;
//! // The build names the topic, for every clone of it.
//! assert_eq!(sales_by_product.name().as_str(), "shop-by-product-repartition");
//! assert!(app.stage("by-product").unwrap().stage.hooks().operator::<parsley::RekeyDecl>().is_some());
//! # Ok::<(), parsley::CompositionError>(())
//! ```
//!
//! Within the writing stage (R3): a fold per customer writes each customer's
//! running total to `customer-totals`, and the same stage writes each total
//! again, keyed by its amount's bucket, for a stage that counts per bucket.
//!
//! ```
//! use parsley::{Parsley, Stage, Step, Topic, Json, Utf8, I64};
//!
//! let sales = Topic::<String, i64>::with_codecs("sales", Utf8, I64);
//! let totals = Topic::<String, i64>::with_codecs("customer-totals", Utf8, I64);
//! // `<application.id>-by-bucket-repartition`, named by the build.
//! let by_bucket = totals.repartition("by-bucket", Utf8);
//! let out = totals.clone();
//! let totalling = Stage::named("totals")
//!     .state(Json, || 0i64)
//!     .on(&sales, move |total: i64, sale| {
//!         Step::of(total + sale.value()).emit(out.send(sale.key().cloned(), total + sale.value()))
//!     })
//!     .into(&totals)
//!     .rekey_output(&totals, &by_bucket, |_, total| format!("{}00s", total / 100))
//!     .build();
//! let counts = Topic::<String, i64>::with_codecs("bucket-counts", Utf8, I64);
//! let out = counts.clone();
//! let counting = Stage::named("counts")
//!     .state(Json, || 0i64)
//!     .on(&by_bucket, move |count: i64, total| {
//!         Step::of(count + 1).emit(out.send(total.key().cloned(), count + 1))
//!     })
//!     .into(&counts)
//!     .build();
//! let app = Parsley::named("shop").stage(totalling).stage(counting).build()?;
//! assert_eq!(by_bucket.name().as_str(), "shop-by-bucket-repartition");
//! assert_eq!(app.stage("totals").unwrap().stage.hooks().operators::<parsley::RekeyOutputDecl>().next().unwrap().name, "by-bucket");
//! # Ok::<(), parsley::CompositionError>(())
//! ```

pub(crate) mod output;

use std::sync::Arc;

use bytes::Bytes;

use crate::codec::{Codec, CodecError};
use crate::emission::{Emission, Record, Step};
use crate::operator::{Operator, OperatorProblem, UserLogic};
use crate::record::ConsumedRecord;
use crate::stage::logic::{guarded, DeliveryFailure, Fallible, TypedLogic};
use crate::stage::{
    OperatorParts, ReplayError, Stage, StageBuilder, StageDef, StageProblem, Stateless,
};
use crate::topic::{Topic, TopicRef};
use crate::tp::{TopicName, Tp};

/// R3's declaration mistakes.
fn problem(reason: &'static str) -> StageProblem {
    StageProblem::Operator(OperatorProblem {
        rules: "R3",
        anchor: "r3",
        operator: "stage",
        reason,
    })
}

/// `<application.id>-<name>-repartition` (R1): the name the build of
/// application `app` gives the repartition topic of the re-key `name`.
pub fn repartition_topic_name(app: &str, name: &str) -> String {
    format!("{app}-{name}-repartition")
}

/// A re-key stage's declaration, as [`StageHooks::operator`](crate::StageHooks::operator) finds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RekeyDecl {
    /// The source topic.
    pub source: TopicName,
    /// The derived repartition topic it writes (R1).
    pub repartition: TopicName,
    /// The user's key function with the topics' codecs, for
    /// [`RekeyDecl::key_of`].
    pub(crate) select: UserLogic<SelectRecordKey>,
}

/// The new key's bytes for a record of a re-key stage's source, or the
/// key codec's refusal of the selected key (it travels in the emission,
/// as `Topic::send`'s does); or why the record is refused (X5, R2).
type SelectRecordKey = dyn Fn(&Tp, &ConsumedRecord) -> Result<Result<Bytes, CodecError>, DeliveryFailure>
    + Send
    + Sync;

/// A re-key within the stage that writes its source, as
/// [`StageHooks::operators`](crate::StageHooks::operators) finds it (R3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RekeyOutputDecl {
    /// The re-key's name, which names its repartition topic.
    pub name: String,
    /// The stage's output whose records are re-keyed.
    pub output: TopicName,
    /// The derived repartition topic the stage writes the copies to (R1).
    pub repartition: TopicName,
    /// The user's key function with the topics' codecs, for
    /// [`RekeyOutputDecl::key_of`].
    pub(crate) select: UserLogic<output::KeyOf>,
}

impl Operator for RekeyDecl {
    fn repartition(&self) -> Option<&TopicName> {
        Some(&self.repartition)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl Operator for RekeyOutputDecl {
    fn repartition(&self) -> Option<&TopicName> {
        Some(&self.repartition)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl RekeyDecl {
    /// The key bytes the user's key function selects for a record of the
    /// re-key stage's source, with the source's codecs and the re-key's
    /// key codec. What a checker that re-keys a source by itself (I18)
    /// calls, and nothing of the stage's own logic.
    pub fn key_of(&self, tp: &Tp, record: &ConsumedRecord) -> Result<Bytes, ReplayError> {
        (self.select)(tp, record)
            .and_then(|encoded| {
                encoded.map_err(|error| DeliveryFailure::Codec {
                    part: crate::topic::RecordPart::Key,
                    error,
                })
            })
            .map_err(ReplayError::delivery)
    }
}

impl RekeyOutputDecl {
    /// The key bytes (`None`: a null key) the user's key function selects
    /// for a record the stage wrote with these key and value bytes, with
    /// the output's codecs and the re-key's key codec. What a checker
    /// compares each copy's key with (I17).
    pub fn key_of(&self, key: Option<&Bytes>, value: &Bytes) -> Result<Option<Bytes>, ReplayError> {
        self.select
            .key_of(key, value)
            .map_err(ReplayError::delivery)
    }
}

impl StageBuilder<Stateless> {
    /// A re-key stage (R1, R2; [`RekeyDecl`]): every record of `source`,
    /// value unchanged, under the key `select` returns (or `Result<K2,
    /// E>`; an error refuses the record, X5), encoded with `key_codec`,
    /// written to the derived topic `<application.id>-<stage>-repartition`
    /// (named when the application is built). Returns the stage and that
    /// topic, for downstream stages to consume. Kafka Streams'
    /// `selectKey(…)` and the repartition topic its next stateful
    /// operation derives.
    pub fn rekey<K, V, K2, KC, R>(
        self,
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
        let head = self.head();
        let repartition = source.repartition(&head.name, key_codec);
        let decoding = source.clone();
        let out = repartition.clone();
        // One closure runs the user's function, for the stage's logic and
        // for the declaration's hook (`RekeyDecl::key_of`).
        let selected: Arc<SelectRecordKey> = Arc::new(move |tp, consumed| {
            let record = decoding.decode(tp, consumed)?;
            let key = guarded(|| select(&record).into_result())?;
            Ok(out.encode_key(&key))
        });
        let decl = RekeyDecl {
            source: source.name().clone(),
            repartition: repartition.name().clone(),
            select: UserLogic(Arc::clone(&selected)),
        };
        let out = repartition.clone();
        let logic = TypedLogic::<()> {
            state: None,
            sources: vec![Arc::new(move |(), tp, consumed| {
                let key = selected(tp, consumed)?;
                // The source's value bytes as they are (R2), not encoded again.
                let value = consumed
                    .data
                    .value
                    .clone()
                    .expect("a record whose value decoded has one");
                // A key the codec refuses travels in the emission, as
                // `Topic::send`'s does: the task stops naming the topic (S3).
                let encoded = key.map(|key| (Some(key), value));
                Ok(Step {
                    state: Some(()),
                    emissions: vec![Emission::new(out.name().clone(), encoded)],
                })
            })],
            tick: None,
        };
        let stage = head.stateless_stage(OperatorParts {
            sources: vec![TopicRef::from(source)],
            sinks: vec![TopicRef::from(&repartition)],
            ticks: None,
            operator: Arc::new(decl),
            logic: Arc::new(logic),
            problems: Vec::new(),
        });
        (stage, repartition)
    }
}

/// A re-key of a stage's output declared with `rekey_output`, applied when
/// the stage is built.
pub(crate) struct PendingRekey(Box<dyn FnOnce(Stage) -> Stage + Send + Sync>);

impl std::fmt::Debug for PendingRekey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PendingRekey")
    }
}

/// `stage` with the re-keys of its outputs.
pub(crate) fn apply(rekeys: Vec<PendingRekey>, stage: Stage) -> Stage {
    rekeys
        .into_iter()
        .fold(stage, |stage, rekey| (rekey.0)(stage))
}

/// The re-key of `output` into `repartition`, for when its stage is built;
/// see [`StageBuilder::rekey_output`].
pub(crate) fn pending<K, V, K2, R>(
    output: &Topic<K, V>,
    repartition: &Topic<K2, V>,
    select: impl Fn(Option<&K>, &V) -> R + Send + Sync + 'static,
) -> PendingRekey
where
    K: 'static,
    V: 'static,
    K2: 'static,
    R: Fallible<K2>,
{
    let output = output.clone();
    let repartition = repartition.clone();
    PendingRekey(Box::new(move |stage| {
        rekey_output(stage, &output, &repartition, select)
    }))
}

/// `stage`, now also writing each record it emits to `output` again, under
/// the key `select` returns, to `repartition`.
fn rekey_output<K, V, K2, R>(
    stage: Stage,
    output: &Topic<K, V>,
    repartition: &Topic<K2, V>,
    select: impl Fn(Option<&K>, &V) -> R + Send + Sync + 'static,
) -> Stage
where
    K: 'static,
    V: 'static,
    K2: 'static,
    R: Fallible<K2>,
{
    let mut def = StageDef::clone(&stage.def);
    let name = match repartition.name().derivation() {
        Some(derived) if derived.role == "repartition" => derived.owner,
        _ => {
            def.problems.push(problem(
                "a re-key into a topic that is not a repartition topic (make it with `Topic::repartition`)",
            ));
            repartition.name().to_string()
        }
    };
    if !output.same_value_codec(repartition) {
        def.problems.push(problem(
            "a re-key into a repartition topic whose values have other codecs than the output's (make it with the output's `repartition`)",
        ));
    }
    let decoding = output.clone();
    let encoding = repartition.clone();
    let rekey = name.clone();
    let select: output::SelectKey = Arc::new(move |key, value| {
        // What the stage wrote does not decode with the topic's own codecs:
        // the stage's fault, not its input record's.
        let (key, value) = decoding
            .decode_parts(key.map(|key| &key[..]), value)
            .map_err(|refused| {
                DeliveryFailure::Logic(format!(
                    "R3: the re-key {rekey:?} cannot read the record the stage wrote to {}: its {} was rejected: {}",
                    decoding.name(),
                    refused.part,
                    refused.error
                ))
            })?;
        let selected = guarded(|| select(key.as_ref(), &value).into_result())?;
        Ok(encoding.encode_key(&selected).map(Some))
    });
    let declared = TopicRef::from(output);
    match def.sinks.iter().find(|sink| sink.name == declared.name) {
        None => def.problems.push(problem(
            "a re-key of a topic it does not write (declare the topic with `.into(…)`)",
        )),
        Some(sink) if *sink != declared => def.problems.push(problem(
            "a re-key of an output it writes with other codecs than the topic given (give `rekey_output` the `Topic` the stage writes)",
        )),
        Some(_) => {}
    }
    def.logic = Arc::new(output::RekeyedOutput {
        inner: Arc::clone(&def.logic),
        output: output.name().clone(),
        repartition: repartition.name().clone(),
        select: Arc::clone(&select),
    });
    def.sinks.push(TopicRef::from(repartition));
    def.operators.push(Arc::new(RekeyOutputDecl {
        name,
        output: output.name().clone(),
        repartition: repartition.name().clone(),
        select: UserLogic(Arc::new(output::KeyOf(select))),
    }));
    Stage { def: Arc::new(def) }
}
