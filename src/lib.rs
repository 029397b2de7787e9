//! Parsley: causally consistent stream processing on Apache Kafka, as a
//! sans-IO core.
//!
//! # The model
//!
//! * **Stamps.** Every record Parsley writes carries a [`Stamp`]: a set of
//!   [`Claim`]s, each a tp and an offset, naming the records that caused it
//!   (G1). The stamp travels in the record's `parsley-stamp` header
//!   ([`header`]).
//! * **The gate.** A task *holds* a record while it claims an offset the task
//!   has not delivered on one of the task's own tps, and *delivers* it once
//!   every such claim is resolved (G2, G3). Effects never overtake causes.
//! * **The stamping site.** Everything a task writes (emissions and ticks) is
//!   stamped in one place with the task's history merged with the stamps of
//!   the records it holds (G4, G5), so causes flow through chains of stages.
//! * **Stages.** A [`Stage`] is pure logic over source topics: stateless
//!   (record to [`Emission`]s) or stateful (a fold returning a [`Step`] for
//!   the key's slot), emitting only to declared sinks (S1–S4). An [`App`]
//!   ([`Parsley::named`]) is a checked set of stages (C1, C2).
//! * **Ticks.** A stage may tick: each of its tasks writes a stamped tick to
//!   the stage's tick topic at an interval, reads it back through the gate,
//!   and delivers it as a [`Tick`] to a tick handler or a tick fold, which
//!   steps the task's *tick slot* (T1–T8). Ticks are per task, and tick
//!   logic never sees key slots.
//! * **Transactions.** A task's emissions, state changes, positions, history
//!   and tick time commit in one Kafka transaction or not at all; after an
//!   abort it resumes from the last commit (X1–X5).
//! * **A sans-IO task, several drivers.** [`Task`] never reads a clock or a
//!   socket: a driver feeds it fetched records and the time, and sends what
//!   it returns. The `parsley-sim` crate drives it over an in-memory Kafka
//!   model (its `TestDriver` and simulator); the `parsley-live` crate drives
//!   it over a real cluster.
//!
//! Every rule id (G2, T3, X5, …) is defined in `docs/RULES.md` of the
//! repository; `docs/CONCEPTS.md` explains ticks per task, the tick slot, the
//! timer shape, fan-out siblings and why transaction markers take offsets.
//!
//! # Example
//!
//! A stage keeps a balance per account and emits a cut on every tick; its
//! logic is plain functions, so it is tested without any runtime (S4):
//!
//! ```
//! use std::time::Duration;
//! use parsley::{TopicContract, Json, Parsley, Stage, Step, Tick, Topic};
//!
//! let orders: Topic<String, i64> = Topic::new("orders");
//! let audits: Topic<String, String> = Topic::new("audits");
//! let cut = {
//!     let audits = audits.clone();
//!     move |tick: &Tick| vec![audits.send(None, format!("cut@{}", tick.timestamp))]
//! };
//! assert_eq!(cut(&Tick::new(1000)), vec![audits.send(None, "cut@1000".to_string())]);
//!
//! let balances = Stage::named("balances")
//!     .state(Json, || 0i64)
//!     .on(&orders, |balance: i64, order| Step::of(balance - order.value()))
//!     .ticks(Duration::from_secs(60), cut)
//!     .into(&audits)
//!     .build();
//! let app = Parsley::named("payments").stage(balances).build()?;
//!
//! // What the application needs of a cluster (C4): its sources and sinks,
//! // plus the tick topic and changelog Parsley derives for the stage.
//! let topics: Vec<String> =
//!     TopicContract::list(&app).iter().map(|contract| contract.name.to_string()).collect();
//! assert_eq!(
//!     topics,
//!     ["audits", "orders", "payments-balances-state-changelog", "payments-balances-ticks"]
//! );
//! # Ok::<(), parsley::CompositionError>(())
//! ```
//!
//! To run it, use `parsley_sim::TestDriver` in tests, and the
//! `parsley-live` crate against Kafka.

#![warn(missing_docs)]
// The face: modules are private and the root re-exports what users write
// against, each name by one path (as quinn-proto's and turmoil's do). Three
// namespaces stay public where their names would crowd the root: `audit`,
// the stamp header's wire format (`header`) and the dead-letter headers.
mod app;
mod assembly;
pub mod audit;
mod chunks;
mod clock;
mod codec;
mod contract;
mod dead_letter;
mod deadline;
mod emission;
mod expiry;
pub mod header;
mod invariant;
mod join;
mod local_store;
#[doc(hidden)]
pub mod mutation;
mod operator;
mod partitioner;
mod record;
mod region;
mod rekey;
mod stage;
mod stamp;
mod task;
mod text;
mod timer;
mod topic;
mod tp;
mod window;

// Records, topics and codecs.
pub use codec::{Codec, CodecError, CodecIdentity, Direction, Json, RawBytes, Utf8, I64};
pub use emission::{Emission, Record, Step, Tick};
pub use partitioner::{murmur2, partition_for};
pub use record::{ConsumedRecord, Header, Isolation, ProducedRecord, RecordData};
pub use stamp::{Claim, Stamp};
pub use topic::{RecordCodecError, RecordPart, Sinks, Topic, TopicRef};
pub use tp::{DerivedTopic, TopicName, Tp};

// Stages and applications.
pub use app::{
    changelog_topic_name, fingerprint, group_name, tick_topic_name, App, AppBuilder,
    CompositionError, Parsley, StagePlan,
};
pub use dead_letter::{dead_letter_topic_name, DeadLetter, DeadLetterKind, NotADeadLetter};
pub use region::Region;
pub use stage::{
    Declaration, Declaring, Fallible, IntoOutput, OperatorBuilder, ReplayError, Replayed,
    SlotChange, SlotKey, SlotKeyError, Slots, SlotsView, Stage, StageBuilder, StageHooks, Stateful,
    Stateless, TickDecl, TickKind, TwoSided,
};

// Operators.
pub use expiry::{live_state_of, Expire, Expiring, ExpiringFold, ExpiryDecl, Since};
pub use join::{
    held_of, response_topic_name, rows_of, sides_of, subscription_topic_name, ForeignKeyJoin,
    ForeignKeyJoinDecl, ForeignKeyJoinPart, ForeignKeyJoinStages, ForeignKeyJoined, HeldRecord,
    Join, JoinDecl, JoinKind, JoinWindows, Joining, KeyedSides, Latest, Response, ResponseCodec,
    Sides, StreamJoinDecl, StreamJoinKind, StreamStreamJoin, StreamStreamJoined, StreamTableJoin,
    StreamTableJoined, StreamVersionedTableJoin, Subscription, SubscriptionCodec, TableJoinDecl,
    TableJoinKind, TableTableJoin, TableTableJoined, Versioned, VersionedJoinDecl, VersionedJoined,
};
pub use operator::{CoPartitioned, Counter, Operator, OperatorProblem};
pub use rekey::{repartition_topic_name, RekeyDecl, RekeyOutputDecl};
pub use timer::{next_due, pending_of, TimerDecl, TimerService, DEFAULT_RESOLUTION};
pub use window::{
    open_windows_of, Close, Emit, OpenWindow, SessionWindows, WindowAggregation, WindowDecl,
    WindowShape, Windowed, WindowedCodec, Windowing, Windows,
};

// What a driver needs: the task, its assembly over a cluster and its clock.
pub use assembly::{assemble, Assembly, AssemblyError, AssemblyFailure, TopicMetadata};
pub use clock::CausalClock;
pub use contract::{PartitionRule, Role, TopicContract};
pub use deadline::{Deadline, DeadlineKind, TimeDomain};
pub use local_store::{
    answer_query, check_last_applied, judge_opened, query_task, queryable_stage,
    record_fingerprint, restore_start, CheckpointCorrupt, CheckpointFound, CheckpointStep,
    LastApplied, Opened, QueryRefusal, QueryStanding, QueryStore, QueryTargetError, RestoreStart,
    StoreBeside, StoreCheckpoint, StoreLedger,
};
pub use task::{
    tick_of, Checkpoint, CheckpointError, CommitRequest, CommittedOffset, EpochCheckpoint, Fetched,
    HeadStatus, Poison, SkipError, Task, TaskConfig, TaskError, TaskId, TaskMetrics,
    OFFSET_METADATA_BYTES_MAX,
};
pub use text::bytes_for_humans;

/// What an application's code writes against, in one import:
/// `use parsley::prelude::*;` brings the topics and codecs, the stage and
/// the application builders, the records, steps and ticks the logic reads
/// and returns, and every operator's declaration (windows, joins, expiring
/// state, timers).
///
/// ```
/// use parsley::prelude::*;
///
/// let orders: Topic<String, i64> = Topic::new("orders");
/// let totals: Topic<String, i64> = Topic::new("totals");
/// let out = totals.clone();
/// let stage = Stage::named("totals")
///     .state(Json, || 0i64)
///     .on(&orders, move |total: i64, order: &Record<String, i64>| {
///         let total = total + order.value();
///         Step::of(total).emit(out.send(order.key().cloned(), total))
///     })
///     .into(&totals)
///     .build();
/// let app = Parsley::named("shop").stage(stage).build()?;
/// assert_eq!(app.stages().len(), 1);
/// # Ok::<(), CompositionError>(())
/// ```
pub mod prelude {
    pub use crate::{
        App, Close, Codec, CompositionError, Emission, Emit, Expire, Expiring, Join, JoinWindows,
        Json, Parsley, RawBytes, Record, SessionWindows, Since, Stage, Step, Tick, TimerService,
        Topic, Utf8, Windowed, WindowedCodec, Windows, I64,
    };
}

/// The headers a dead-lettered record carries (`parsley.dlq.*`), each
/// naming one fact of the refusal.
pub mod dead_letter_headers {
    pub use crate::dead_letter::{ERROR, MESSAGE, OFFSET, PARTITION, STAGE, STAMP, TOPIC};
}

/// Any error a user's code hands back to a driver that only reports it: a
/// simulation's property or app factory, a live app's factory or producer.
/// A `String` or `&str` converts with `?` or `.into()`. One definition for
/// every crate, so a user's helper returning it serves the harness and the
/// runtime alike.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The examples of `docs/RULES.md`, run as doc tests so the rules reference
/// cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../docs/RULES.md")]
pub struct RulesReference;
