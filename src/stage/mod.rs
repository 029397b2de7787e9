//! Stages: named logic over source topics, with optional state and ticks.
//!
//! ```
//! use std::time::Duration;
//! use parsley::{Stage, Step, Topic, Json};
//!
//! let orders: Topic<String, i64> = Topic::new("orders");
//! let audits: Topic<String, String> = Topic::new("audits");
//! let balances = Stage::named("balances")
//!     .state(Json, || 0i64)
//!     .on(&orders, |balance: i64, order| Step::of(balance - order.value()))
//!     .ticks(Duration::from_secs(60), {
//!         let audits = audits.clone();
//!         move |tick| vec![audits.send(None, format!("cut@{}", tick.timestamp))]
//!     })
//!     .into(&audits)
//!     .build();
//! assert_eq!(balances.name(), "balances");
//! ```

mod declare;
pub(crate) mod logic;
pub mod slots;
pub(crate) mod wide;

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use crate::codec::{Codec, CodecError};
use crate::emission::{Emission, Record, Step, Tick};
use crate::operator::{Counter, Operator, OperatorProblem};
use crate::record::ConsumedRecord;
use crate::stage::logic::{
    guarded, DeliveryFailure, SourceFn, StageLogic, StateDecl, TickLogic, TypedLogic,
};
use crate::topic::{RecordPart, Sinks, Topic, TopicRef};
use crate::tp::{TopicName, Tp};

mod hooks;
#[cfg(test)]
pub(crate) mod replaying;

pub use declare::{Declaration, Declaring, IntoOutput, OperatorBuilder, TwoSided};
pub(crate) use declare::{OperatorParts, StageHead};
pub use hooks::StageHooks;
pub use logic::Fallible;
pub use slots::{SlotKey, SlotKeyError, Slots, SlotsView};

/// A built stage: its declaration and its logic. Cheap to clone.
#[derive(Clone)]
pub struct Stage {
    pub(crate) def: Arc<StageDef>,
}

#[derive(Clone)]
pub(crate) struct StageDef {
    pub name: String,
    pub sources: Vec<TopicRef>,
    pub sinks: Vec<TopicRef>,
    pub ticks: Option<TickDecl>,
    pub stateful: bool,
    /// X5's opt-in: refused records go to `<application.id>-<stage>-dlq`.
    pub dead_letter: bool,
    /// Its operators' declarations (the seam, [`crate::operator`]): at
    /// most one that makes the stage (a window, a join, …), and the re-keys
    /// of its outputs (R3).
    pub operators: Vec<Arc<dyn Operator>>,
    /// G9: deliver across sources in timestamp order, waiting at most this
    /// long for a source with nothing fetched.
    pub timestamp_sync: Option<Duration>,
    /// V1: a consistent view with this epoch length
    /// ([`Stage::consistent`]).
    pub consistent: Option<Duration>,
    pub logic: Arc<dyn StageLogic>,
    /// Declaration mistakes found while building, reported by
    /// [`crate::Parsley`]'s `build` with the rule they break.
    pub problems: Vec<StageProblem>,
}

impl StageDef {
    /// Every repartition topic the stage writes: its own as a re-key stage
    /// (R1) and its re-keyed outputs' (R3).
    pub(crate) fn repartitions(&self) -> impl Iterator<Item = &TopicName> {
        self.operators
            .iter()
            .filter_map(|operator| operator.repartition())
    }

    /// A stage with built-in logic and none of the other declarations (no
    /// ticks, no dead letters, no operator's declaration): what an operator
    /// that makes its stages by hand starts from, filling in its own.
    pub(crate) fn built_in(
        name: String,
        sources: Vec<TopicRef>,
        sinks: Vec<TopicRef>,
        stateful: bool,
        logic: Arc<dyn StageLogic>,
    ) -> StageDef {
        StageDef {
            name,
            sources,
            sinks,
            ticks: None,
            stateful,
            dead_letter: false,
            operators: Vec::new(),
            timestamp_sync: None,
            consistent: None,
            logic,
            problems: Vec::new(),
        }
    }
}

/// A stage's tick declaration (T1): how often, and which kind of logic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TickDecl {
    /// The tick interval (T3).
    pub interval: Duration,
    /// Handler or fold (T1).
    pub kind: TickKind,
}

/// The kind of tick logic (T1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TickKind {
    /// A TickHandler: tick to emissions.
    Handler,
    /// A TickFold: steps the tick slot.
    Fold,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum StageProblem {
    TicksDeclaredTwice,
    ZeroTickInterval,
    StateAfterLogic,
    /// An operator's declaration that cannot be, with its rule.
    Operator(OperatorProblem),
    /// J19: a versioned join whose grace period is longer than its
    /// history retention.
    VersionedGraceBeyondRetention {
        grace: std::time::Duration,
        retention: std::time::Duration,
    },
}

impl Stage {
    /// Starts a stage declaration. The name must be unique in its
    /// application (C1); it also names the topics Parsley derives for the
    /// stage (`<application.id>-<stage>-ticks`, `-state-changelog`).
    ///
    /// ```
    /// use parsley::{Stage, Topic};
    ///
    /// let orders: Topic<String, i64> = Topic::new("orders");
    /// let large: Topic<String, i64> = Topic::new("large-orders");
    /// let out = large.clone();
    /// let filter = Stage::named("large")
    ///     .on(&orders, move |order| {
    ///         if *order.value() >= 1000 {
    ///             vec![out.send(order.key().cloned(), *order.value())]
    ///         } else {
    ///             vec![]
    ///         }
    ///     })
    ///     .into(&large)
    ///     .build();
    /// assert_eq!(filter.name(), "large");
    /// assert!(!filter.is_stateful());
    /// ```
    pub fn named(name: impl Into<String>) -> StageBuilder<Stateless> {
        StageBuilder {
            name: name.into(),
            sources: Vec::new(),
            source_fns: Vec::new(),
            sinks: Vec::new(),
            tick: None,
            state: None,
            dead_letter: false,
            timestamp_sync: None,
            problems: Vec::new(),
            rekeys: Vec::new(),
            mode: PhantomData,
        }
    }

    /// The stage's name, unique in its application (C1).
    pub fn name(&self) -> &str {
        &self.def.name
    }

    /// The declared sources, in declaration order (the tick topic is not among them).
    pub fn sources(&self) -> &[TopicRef] {
        &self.def.sources
    }

    /// The declared sinks (S3).
    pub fn sinks(&self) -> &[TopicRef] {
        &self.def.sinks
    }

    /// The tick declaration, if the stage ticks.
    pub fn ticks(&self) -> Option<TickDecl> {
        self.def.ticks
    }

    /// Whether the stage declares state (S1).
    pub fn is_stateful(&self) -> bool {
        self.def.stateful
    }

    /// G9: how long the stage's tasks wait for a source with nothing
    /// fetched when they deliver in timestamp order; `None` when they do
    /// not ([`StageBuilder::synchronise_by_timestamp`]).
    pub fn timestamp_sync(&self) -> Option<Duration> {
        self.def.timestamp_sync
    }

    /// V1: declares the stage a *consistent view*. Each record it writes
    /// is what the application computes on a prefix of its sources (a
    /// cut): every source record of an epoch below the cut, and none
    /// above. A source record's epoch is the highest timestamp of its
    /// partition up to it, divided by `epoch`. The stages on the paths from
    /// the sources to this one (its *region*) deliver in epoch order, and
    /// this stage writes at each epoch's end the last output per key, with
    /// the cut in a `parsley-cut` header. Kafka Streams has no counterpart;
    /// Materialize and differential dataflow give every view this.
    ///
    /// What it costs and what it cannot promise: docs/RULES.md#v1, and
    /// docs/DESIGN.md, "Consistent views". The application's `build`
    /// refuses a region it cannot align (V2).
    ///
    /// ```
    /// use std::time::Duration;
    /// use parsley::{Json, Stage, Step, Topic};
    ///
    /// let balances: Topic<String, i64> = Topic::new("balances");
    /// let totals: Topic<String, i64> = Topic::new("totals");
    /// let out = totals.clone();
    /// let total = Stage::named("total")
    ///     .state(Json, std::collections::BTreeMap::<String, i64>::new)
    ///     .on(&balances, move |mut all, balance| {
    ///         all.insert(balance.key().cloned().unwrap_or_default(), *balance.value());
    ///         let sum = all.values().sum::<i64>();
    ///         Step::of(all).emit(out.send(Some("total".into()), sum))
    ///     })
    ///     .into(&totals)
    ///     .build()
    ///     .consistent(Duration::from_secs(1));
    /// assert_eq!(total.consistent_epoch(), Some(Duration::from_secs(1)));
    /// ```
    pub fn consistent(mut self, epoch: Duration) -> Stage {
        Arc::make_mut(&mut self.def).consistent = Some(epoch);
        self
    }

    /// V1: the epoch length of a consistent view ([`Stage::consistent`]);
    /// `None` for any other stage.
    pub fn consistent_epoch(&self) -> Option<Duration> {
        self.def.consistent
    }

    /// Whether the stage opted in to a dead-letter topic
    /// ([`StageBuilder::dead_letter_queue`], X5).
    pub fn has_dead_letter_queue(&self) -> bool {
        self.def.dead_letter
    }

    /// What a checker or the audit asks of the stage beyond its
    /// declaration: replaying its logic over encoded slots, the operators
    /// it holds, the topics and counters they derive. One accessor, so the
    /// stage's own face stays what a user declares and reads.
    pub fn hooks(&self) -> StageHooks<'_> {
        StageHooks { stage: self }
    }
}

/// What one delivery does to its slot, as [`StageHooks::replay_record`](crate::StageHooks::replay_record) reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SlotChange {
    /// A stateless stage, or a tick handler: no slot is touched.
    Unchanged,
    /// The slot's new state, encoded with the state codec.
    Set(bytes::Bytes),
    /// The slot is deleted and reads as the initial value again.
    Deleted,
}

/// The pure result of one delivery.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replayed {
    /// What the delivery does to its slot.
    pub slot: SlotChange,
    /// What it does to other slots, in the order their changelog records
    /// are written: only a timer service's tick changes any (K2).
    pub other_slots: Vec<(SlotKey, SlotChange)>,
    /// What the delivery emits, in order.
    pub emissions: Vec<Emission>,
}

/// Why [`StageHooks::replay_record`](crate::StageHooks::replay_record), [`StageHooks::replay_tick`](crate::StageHooks::replay_tick) or
/// [`StageHooks::replay_tick_over_slots`](crate::StageHooks::replay_tick_over_slots) has no [`Replayed`]: the replay was
/// asked of the wrong stage, or the delivery fails as it would in a task.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReplayError {
    /// A record of a topic the stage does not consume.
    #[error("stage {stage:?} does not consume {topic}")]
    UnknownSource {
        /// The stage.
        stage: String,
        /// The topic of the record.
        topic: TopicName,
    },
    /// A tick of a stage that declares no ticks.
    #[error("stage {stage:?} declares no ticks")]
    NoTicks {
        /// The stage.
        stage: String,
    },
    /// [`StageHooks::replay_record`](crate::StageHooks::replay_record) or [`StageHooks::replay_tick`](crate::StageHooks::replay_tick) of a delivery that
    /// reads every slot (a timer service's tick, K2; a windowed
    /// aggregation's record or tick, W2; an expiring fold's, E2).
    #[error("stage {stage:?} reads every slot on this delivery (its operator may change any key's state on it): replay it over the slots, with replay_record_over_slots or replay_tick_over_slots")]
    ReadsEverySlot {
        /// The stage.
        stage: String,
    },
    /// [`StageHooks::replay_record_over_slots`](crate::StageHooks::replay_record_over_slots) or
    /// [`StageHooks::replay_tick_over_slots`](crate::StageHooks::replay_tick_over_slots) of a delivery that reads one slot.
    #[error("stage {stage:?} reads one slot on this delivery: replay it with replay_record or replay_tick")]
    ReadsOneSlot {
        /// The stage.
        stage: String,
    },
    /// The given state does not decode with the stage's state codec.
    #[error("{0}")]
    State(CodecError),
    /// The record's key or value does not decode (X5: the task would
    /// dead-letter it or stop).
    #[error("the record's {part} was rejected: {error}")]
    Record {
        /// Which part the codec refused.
        part: RecordPart,
        /// The codec's error.
        error: CodecError,
    },
    /// The fold's new state does not encode.
    #[error("the new state was rejected: {0}")]
    NewState(CodecError),
    /// The fold or handler returned an error or panicked.
    #[error("the logic failed: {0}")]
    Logic(String),
}

impl ReplayError {
    /// The error of a delivery that fails as it would in a task.
    pub(crate) fn delivery(failure: DeliveryFailure) -> ReplayError {
        logic::ReplayFailure::Delivery(failure).into()
    }
}

impl From<logic::ReplayFailure> for ReplayError {
    fn from(failure: logic::ReplayFailure) -> Self {
        match failure {
            logic::ReplayFailure::State(error) => ReplayError::State(error),
            logic::ReplayFailure::Delivery(DeliveryFailure::Codec { part, error }) => {
                ReplayError::Record { part, error }
            }
            logic::ReplayFailure::Delivery(DeliveryFailure::StateCodec(error)) => {
                ReplayError::NewState(error)
            }
            logic::ReplayFailure::Delivery(DeliveryFailure::Logic(message)) => {
                ReplayError::Logic(message)
            }
        }
    }
}

impl std::fmt::Debug for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stage")
            .field("name", &self.def.name)
            .field("sources", &self.def.sources)
            .field("sinks", &self.def.sinks)
            .field("ticks", &self.def.ticks)
            .field("stateful", &self.def.stateful)
            .finish()
    }
}

/// Marks a builder of a stage without state.
pub struct Stateless;
/// Marks a builder of a stage with state of type `S`.
pub struct Stateful<S>(PhantomData<S>);

/// Declares a stage; see [`Stage::named`].
pub struct StageBuilder<M, S = ()> {
    name: String,
    sources: Vec<TopicRef>,
    source_fns: Vec<SourceFn<S>>,
    sinks: Vec<TopicRef>,
    tick: Option<(Duration, TickLogic<S>)>,
    state: Option<StateDecl<S>>,
    dead_letter: bool,
    timestamp_sync: Option<Duration>,
    problems: Vec<StageProblem>,
    /// Re-keys of its outputs (R3), applied when it is built.
    rekeys: Vec<crate::rekey::PendingRekey>,
    mode: PhantomData<M>,
}

/// Wraps a typed fold into the erased form: decode key and value with the
/// topic's codecs, then run the fold under the panic guard.
fn source_fn<K, V, S, R>(
    topic: &Topic<K, V>,
    fold: impl Fn(S, &Record<K, V>) -> R + Send + Sync + 'static,
) -> SourceFn<S>
where
    K: 'static,
    V: 'static,
    R: Fallible<Step<S>>,
{
    let topic = topic.clone();
    Arc::new(move |state: S, tp: &Tp, consumed: &ConsumedRecord| {
        let record = topic.decode(tp, consumed)?;
        guarded(|| fold(state, &record).into_result())
    })
}

impl<M, S: Clone + Send + Sync + 'static> StageBuilder<M, S> {
    fn with_source(mut self, topic: TopicRef, source: SourceFn<S>) -> Self {
        self.sources.push(topic);
        self.source_fns.push(source);
        self
    }

    fn with_ticks(mut self, interval: Duration, logic: TickLogic<S>) -> Self {
        if self.tick.is_some() {
            self.problems.push(StageProblem::TicksDeclaredTwice);
        }
        if interval.is_zero() {
            self.problems.push(StageProblem::ZeroTickInterval);
        }
        self.tick = Some((interval, logic));
        self
    }

    /// T1: a TickHandler, a pure function from a tick to emissions. On a
    /// stateful stage it leaves the tick slot untouched.
    pub fn ticks<R>(
        self,
        interval: Duration,
        handler: impl Fn(&Tick) -> R + Send + Sync + 'static,
    ) -> Self
    where
        R: Fallible<Vec<Emission>>,
    {
        let handler = Arc::new(move |tick: &Tick| guarded(|| handler(tick).into_result()));
        self.with_ticks(interval, TickLogic::Handler(handler))
    }

    /// X5's opt-in: records the logic refuses are dead-lettered instead of
    /// stopping the task. The stage then owns the derived topic
    /// `<application.id>-<stage>-dlq` (one partition per task, like its tick
    /// topic and changelog), which must exist before the application starts
    /// (C3). A refused record — the logic returns an error or panics, the
    /// source codec refuses its key or value, the state codec refuses the
    /// state returned, or its stamp header does not decode — is written there
    /// with its original key and value and `parsley.dlq.*` headers naming
    /// the error and the record ([`DeadLetter`](crate::DeadLetter)); it counts as
    /// delivered, with no effect. Everything else still stops the task.
    /// Kafka Streams users know this as the dead-letter queue of KIP-1034
    /// (`errors.dead.letter.queue.topic.name`).
    ///
    /// ```
    /// use parsley::{Parsley, Stage, Topic};
    ///
    /// let orders: Topic<String, i64> = Topic::new("orders");
    /// let picky = Stage::named("picky")
    ///     .on(&orders, |order| {
    ///         if *order.value() < 0 {
    ///             Err(format!("negative amount {}", order.value()))
    ///         } else {
    ///             Ok(Vec::new())
    ///         }
    ///     })
    ///     .dead_letter_queue()
    ///     .build();
    /// assert!(picky.has_dead_letter_queue());
    /// let app = Parsley::named("shop").stage(picky).build().unwrap();
    /// let dlq = app.stage("picky").unwrap().dead_letter.as_ref().unwrap();
    /// assert_eq!(dlq.as_str(), "shop-picky-dlq");
    /// ```
    pub fn dead_letter_queue(mut self) -> Self {
        self.dead_letter = true;
        self
    }

    /// G9's opt-in, Kafka Streams' `max.task.idle.ms`: each task delivers,
    /// among its sources' deliverable heads, the one with the lowest record
    /// timestamp; equal timestamps go in tp order, by topic name (byte by
    /// byte), then partition. While a source has nothing fetched and its
    /// log has records to fetch, the task waits for them; while a source is
    /// caught up and empty, it waits up to `max_idle` of wall-clock time
    /// for more before it delivers the others. The gate's causal holds come
    /// first (G2): a held head neither goes nor makes the others wait.
    /// Ticks are not held back. `Duration::ZERO` orders by timestamp and
    /// waits only for records known to be in the log, as Kafka Streams'
    /// default does.
    ///
    /// What it gives is the task's partitions merged by their heads'
    /// timestamps, each still in offset order: a partition out of timestamp
    /// order within itself is not sorted, and a record that arrives more
    /// than `max_idle` late is not waited for. A stream–table join so
    /// declared sees the table as of each stream record's timestamp only
    /// when both topics' timestamps rise with their offsets and nothing is
    /// that late; a table update of the record's own millisecond is seen
    /// only when the table topic's name sorts first. For the table as of
    /// each record's timestamp whatever the order, declare a versioned
    /// join ([`crate::join::Join::stream_versioned_table`], J16, J17).
    ///
    /// ```
    /// use std::time::Duration;
    /// use parsley::{Parsley, Stage, Topic};
    ///
    /// let clicks: Topic<String, i64> = Topic::new("clicks");
    /// let views: Topic<String, i64> = Topic::new("views");
    /// let merged = Stage::named("merged")
    ///     .on(&clicks, |_click| Vec::new())
    ///     .on(&views, |_view| Vec::new())
    ///     .synchronise_by_timestamp(Duration::from_millis(500))
    ///     .build();
    /// assert_eq!(merged.timestamp_sync(), Some(Duration::from_millis(500)));
    /// ```
    pub fn synchronise_by_timestamp(mut self, max_idle: Duration) -> Self {
        self.timestamp_sync = Some(max_idle);
        self
    }

    /// S3: the topics this stage may emit to.
    pub fn into(mut self, sinks: impl Sinks) -> Self {
        self.sinks.extend(sinks.declarations());
        self
    }

    /// R3: a re-key of what the stage writes to `output`, run within the
    /// stage: each record it emits to `output` is written again in the
    /// same step, value unchanged, under the key `select` returns for its
    /// key and value (or `Result<K2, E>`; an error refuses the delivery,
    /// X5), to `repartition`, the re-key's derived topic
    /// `<application.id>-<name>-repartition` made by
    /// [`Topic::repartition`]. Kafka Streams' `selectKey(…)` in the
    /// sub-topology before its repartition topic: no stage, and no hop,
    /// of its own, where [`StageBuilder::rekey`] reads `output` back.
    /// `output` must be a sink of the stage (`into`), with its codecs.
    ///
    /// ```
    /// use parsley::{Parsley, Stage, Step, Topic, Json, Utf8, I64};
    ///
    /// let sales = Topic::<String, i64>::with_codecs("sales", Utf8, I64);
    /// let totals = Topic::<String, i64>::with_codecs("customer-totals", Utf8, I64);
    /// let by_bucket = totals.repartition::<String, _>("by-bucket", Utf8);
    /// let out = totals.clone();
    /// let totalling = Stage::named("totals")
    ///     .state(Json, || 0i64)
    ///     .on(&sales, move |total: i64, sale| {
    ///         Step::of(total + sale.value()).emit(out.send(sale.key().cloned(), total + sale.value()))
    ///     })
    ///     .into(&totals)
    ///     .rekey_output(&totals, &by_bucket, |_, total| format!("{}00s", total / 100))
    ///     .build();
    /// let app = Parsley::named("shop").stage(totalling).build()?;
    /// assert_eq!(by_bucket.name().as_str(), "shop-by-bucket-repartition");
    /// # Ok::<(), parsley::CompositionError>(())
    /// ```
    pub fn rekey_output<K, V, K2, R>(
        mut self,
        output: &Topic<K, V>,
        repartition: &Topic<K2, V>,
        select: impl Fn(Option<&K>, &V) -> R + Send + Sync + 'static,
    ) -> Self
    where
        K: 'static,
        V: 'static,
        K2: 'static,
        R: Fallible<K2>,
    {
        self.rekeys
            .push(crate::rekey::pending(output, repartition, select));
        self
    }

    /// Finishes the declaration. Mistakes in it (ticks twice, a zero interval, state after logic) are reported by the application's `build`, with their rule.
    pub fn build(self) -> Stage {
        let ticks = self.tick.as_ref().map(|(interval, logic)| TickDecl {
            interval: *interval,
            kind: match logic {
                TickLogic::Handler(_) => TickKind::Handler,
                TickLogic::Fold(_) => TickKind::Fold,
            },
        });
        let stateful = self.state.is_some();
        let logic = TypedLogic {
            state: self.state,
            sources: self.source_fns,
            tick: self.tick.map(|(_, logic)| logic),
        };
        let stage = Stage {
            def: Arc::new(StageDef {
                name: self.name,
                sources: self.sources,
                sinks: self.sinks,
                ticks,
                stateful,
                dead_letter: self.dead_letter,
                operators: Vec::new(),
                timestamp_sync: self.timestamp_sync,
                consistent: None,
                logic: Arc::new(logic),
                problems: self.problems,
            }),
        };
        crate::rekey::apply(self.rekeys, stage)
    }
}

impl StageBuilder<Stateless> {
    /// S1: makes the stage stateful: each key's slot starts as `init()` and is
    /// written with `codec` to the stage's changelog. Declare state before
    /// `on` and `ticks`.
    pub fn state<S, C>(
        self,
        codec: C,
        init: impl Fn() -> S + Send + Sync + 'static,
    ) -> StageBuilder<Stateful<S>, S>
    where
        S: Clone + Send + Sync + 'static,
        C: Codec<S>,
    {
        let mut problems = self.problems;
        if !self.sources.is_empty() || self.tick.is_some() {
            problems.push(StageProblem::StateAfterLogic);
        }
        StageBuilder {
            name: self.name,
            sources: Vec::new(),
            source_fns: Vec::new(),
            sinks: self.sinks,
            tick: None,
            state: Some(StateDecl {
                codec: Arc::new(codec),
                init: Arc::new(init),
            }),
            dead_letter: self.dead_letter,
            timestamp_sync: self.timestamp_sync,
            problems,
            rekeys: self.rekeys,
            mode: PhantomData,
        }
    }

    /// S1: consumes `topic`, mapping each delivered record to emissions.
    /// `handler` may return `Vec<Emission>` or `Result<Vec<Emission>, E>`.
    pub fn on<K, V, R>(
        self,
        topic: &Topic<K, V>,
        handler: impl Fn(&Record<K, V>) -> R + Send + Sync + 'static,
    ) -> Self
    where
        K: 'static,
        V: 'static,
        R: Fallible<Vec<Emission>>,
    {
        let source = source_fn(topic, move |(), record: &Record<K, V>| {
            handler(record).into_result().map(|emissions| Step {
                state: Some(()),
                emissions,
            })
        });
        self.with_source(topic.declaration(), source)
    }
}

impl<S: Clone + Send + Sync + 'static> StageBuilder<Stateful<S>, S> {
    /// S1: consumes `topic`, folding each delivered record into its key's slot.
    /// `fold` may return `Step<S>` or `Result<Step<S>, E>`.
    pub fn on<K, V, R>(
        self,
        topic: &Topic<K, V>,
        fold: impl Fn(S, &Record<K, V>) -> R + Send + Sync + 'static,
    ) -> Self
    where
        K: 'static,
        V: 'static,
        R: Fallible<Step<S>>,
    {
        let source = source_fn(topic, fold);
        self.with_source(topic.declaration(), source)
    }

    /// T1: a TickFold, stepping the task's tick slot (T7) on every tick.
    /// The tick slot has the stage's state type but is apart from every key
    /// slot: tick logic never sees per-key state (per-entity timing is the
    /// request/reply shape, K2). `fold` may return `Step<S>` or
    /// `Result<Step<S>, E>`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use parsley::{Json, Stage, Step, Tick, Topic};
    ///
    /// let orders: Topic<String, i64> = Topic::new("orders");
    /// let cuts: Topic<String, i64> = Topic::new("cuts");
    /// // Count ticks in the tick slot; every third tick emits a cut and resets.
    /// let every_third = {
    ///     let cuts = cuts.clone();
    ///     move |ticks: i64, tick: &Tick| {
    ///         if ticks + 1 == 3 {
    ///             Step::of(0).emit(cuts.send(None, tick.timestamp))
    ///         } else {
    ///             Step::of(ticks + 1)
    ///         }
    ///     }
    /// };
    /// // Tick logic is a pure function (S4): test it without a runtime.
    /// assert_eq!(every_third(0, &Tick::new(1000)), Step::of(1));
    /// assert_eq!(
    ///     every_third(2, &Tick::new(3000)),
    ///     Step::of(0).emit(cuts.send(None, 3000))
    /// );
    ///
    /// let stage = Stage::named("cutter")
    ///     .state(Json, || 0i64)
    ///     .on(&orders, |balance: i64, order| Step::of(balance + order.value()))
    ///     .tick_fold(Duration::from_secs(60), every_third)
    ///     .into(&cuts)
    ///     .build();
    /// assert!(stage.ticks().is_some());
    /// ```
    pub fn tick_fold<R>(
        self,
        interval: Duration,
        fold: impl Fn(S, &Tick) -> R + Send + Sync + 'static,
    ) -> Self
    where
        R: Fallible<Step<S>>,
    {
        let fold =
            Arc::new(move |state: S, tick: &Tick| guarded(|| fold(state, tick).into_result()));
        self.with_ticks(interval, TickLogic::Fold(fold))
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::codec::I64;
    use crate::record::RecordData;

    fn long(value: i64) -> Bytes {
        I64.encode(&value).expect("longs encode")
    }

    /// A running sum per key in Kafka's long format, emitting each new sum,
    /// and a tick fold counting ticks in the tick slot.
    fn summing() -> Stage {
        let sums: Topic<String, i64> = Topic::new("sums");
        let out = sums.clone();
        Stage::named("sum")
            .state(I64, || 0i64)
            .on(
                &Topic::<String, i64>::new("numbers"),
                move |sum: i64, record: &Record<String, i64>| {
                    let sum = sum + record.value;
                    Step::of(sum).emit(out.send(record.key.clone(), sum))
                },
            )
            .tick_fold(Duration::from_secs(1), |ticks: i64, _tick| {
                Step::of(ticks + 1)
            })
            .into(&sums)
            .build()
    }

    fn number(value: i64) -> ConsumedRecord {
        ConsumedRecord {
            offset: 7,
            data: RecordData {
                key: Some(Bytes::from_static(b"\"k\"")),
                value: Some(Bytes::from(serde_json::to_vec(&value).unwrap())),
                headers: Vec::new(),
                timestamp: 0,
            },
        }
    }

    /// The checkers' replay folds the given state, or the initial value when
    /// there is none, and reports the new state and the emissions.
    #[test]
    fn replay_record_folds_the_given_state() {
        let stage = summing();
        let numbers = crate::tp::TopicName::new("numbers");
        let tp = Tp::new("numbers", 0);
        let from_state = stage
            .hooks()
            .replay_record(&numbers, Some(&long(40)), &tp, &number(2))
            .unwrap();
        assert_eq!(from_state.slot, SlotChange::Set(long(42)));
        assert_eq!(from_state.emissions.len(), 1);
        let unseen = stage
            .hooks()
            .replay_record(&numbers, None, &tp, &number(2))
            .unwrap();
        assert_eq!(unseen.slot, SlotChange::Set(long(2)));
    }

    /// §8: a state that does not decode fails the replay with the codec's own
    /// words, as restoring it would fail the task.
    #[test]
    fn replay_of_a_state_that_does_not_decode_names_the_codec() {
        let stage = summing();
        let numbers = crate::tp::TopicName::new("numbers");
        let error = stage
            .hooks()
            .replay_record(&numbers, Some(b"42"), &Tp::new("numbers", 0), &number(2))
            .unwrap_err();
        assert!(matches!(error, ReplayError::State(_)), "{error:?}");
        assert_eq!(
            error.to_string(),
            "i64 codec could not decode i64: expected 8 bytes, got 2"
        );
        let error = stage
            .hooks()
            .replay_tick(Some(b"42"), Tick::new(0))
            .unwrap_err();
        assert!(matches!(error, ReplayError::State(_)), "{error:?}");
        assert_eq!(
            error.to_string(),
            "i64 codec could not decode i64: expected 8 bytes, got 2"
        );
    }

    /// T7: a tick fold replays from the tick slot's state.
    #[test]
    fn replay_tick_folds_the_tick_slot() {
        let stage = summing();
        let replayed = stage
            .hooks()
            .replay_tick(Some(&long(4)), Tick::new(0))
            .unwrap();
        assert_eq!(replayed.slot, SlotChange::Set(long(5)));
        assert!(replayed.emissions.is_empty());
        let first = stage.hooks().replay_tick(None, Tick::new(0)).unwrap();
        assert_eq!(first.slot, SlotChange::Set(long(1)));
    }

    /// A source the stage does not consume is refused, naming both.
    #[test]
    fn replay_of_an_unknown_source_is_refused() {
        let stage = summing();
        let error = stage
            .hooks()
            .replay_record(
                &crate::tp::TopicName::new("elsewhere"),
                None,
                &Tp::new("elsewhere", 0),
                &number(1),
            )
            .unwrap_err();
        assert_eq!(
            error,
            ReplayError::UnknownSource {
                stage: "sum".into(),
                topic: crate::tp::TopicName::new("elsewhere"),
            }
        );
        assert_eq!(
            error.to_string(),
            "stage \"sum\" does not consume elsewhere"
        );
    }

    /// A tick replayed on the wrong kind of stage is refused, naming the
    /// method to use.
    #[test]
    fn replay_of_a_tick_the_stage_cannot_take_is_refused() {
        let stage = summing();
        let error = stage
            .hooks()
            .replay_tick_over_slots(&[], Tick::new(0))
            .unwrap_err();
        assert_eq!(
            error,
            ReplayError::ReadsOneSlot {
                stage: "sum".into()
            }
        );
        assert_eq!(
            error.to_string(),
            "stage \"sum\" reads one slot on this delivery: replay it with replay_record or replay_tick"
        );
    }
}
