//! Stream–table joins against a versioned table (J16–J18): Kafka Streams'
//! `KStream.join(KTable, …)` and `leftJoin` over a table materialised in a
//! versioned store (KIP-914), so that each stream record is joined with the
//! table as of its own timestamp, whatever order either topic arrives in.
//!
//! - **The versioned table (J16).** Each key's slot holds its history: a
//!   version per table record (its timestamp and value; a tombstone is a
//!   version too), kept for the declared history retention; the task's
//!   tick slot holds the table's observed stream time, the highest
//!   timestamp of a table update it put. An update older than the observed
//!   stream time less the retention is dropped. Both are state, written to
//!   the stage's changelog in the delivery's transaction (S5).
//! - **The as-of lookup (J17).** A stream record is joined with the latest
//!   version of its key at or below its own timestamp (equal included); a
//!   tombstone there, or no version, is no row. A stream record older than
//!   the observed stream time less the retention sees only the key's
//!   latest version, when that is at or below its timestamp.
//! - **The declaration (J18).** Stream and table must be co-partitioned as
//!   J4 asks, and the retention must be a whole number of milliseconds
//!   that fits Kafka's timestamps.
//!
//! - **The grace period (J19).** Declared with
//!   [`VersionedJoinBuilder::grace`] (Kafka Streams'
//!   `Joined.withGracePeriod`, KIP-923): each stream record is held in the
//!   task's tick slot until the join's stream time (the highest timestamp
//!   of a stream record it held) passes its timestamp plus the grace, so a
//!   table update arriving out of order within the grace is seen. A grace
//!   longer than the history retention is refused.
//!
//! Differences from Kafka Streams are in docs/DESIGN.md ("Versioned
//! tables"). Without a grace period, a table update delivered after a
//! stream record does not change that record's result.
//!
//! ```
//! use std::time::Duration;
//! use parsley::{Join, VersionedJoinDecl};
//! use parsley::{Parsley, Topic, Utf8, I64};
//!
//! let orders = Topic::<String, i64>::with_codecs("orders", Utf8, I64);
//! let discounts = Topic::<String, i64>::with_codecs("discounts", Utf8, I64);
//! let priced = Topic::<String, i64>::with_codecs("priced-orders", Utf8, I64);
//! // Each order at the discount its customer had when it was placed.
//! let pricing = Join::stream_versioned_table("pricing", &orders, &discounts, Duration::from_secs(3600))
//!     .left(|order, discount: Option<&i64>| order.value() - discount.copied().unwrap_or(0))
//!     .into(&priced)
//!     .build();
//! let app = Parsley::named("shop").stage(pricing).build()?;
//! let declared = app.stage("pricing").unwrap().stage.hooks().operator::<VersionedJoinDecl>().unwrap();
//! assert_eq!(declared.history_retention, Duration::from_secs(3600));
//! # Ok::<(), parsley::CompositionError>(())
//! ```

mod grace;
mod history;
mod logic;
mod slot;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::emission::Record;
use crate::operator::{CoPartitioned, Counter, Operator, OperatorProblem, UserLogic};
use crate::record::ConsumedRecord;
use crate::stage::logic::Fallible;
use crate::stage::{ReplayError, Stage, StageProblem};
use crate::topic::Topic;
use crate::tp::{TopicName, Tp};

use super::declare::{self, JoinStage, Wording};
use super::logic::{inner_row_joiner, left_row_joiner, JoinLogic, JoinerFn};
use super::{Join, JoinKind, Joiner};
use logic::VersionedJoinLogic;

impl Join {
    /// A stream–table join against a versioned table, a stage named `name`
    /// (unique in its application, C1; it also names the stage's
    /// changelog): each record of `stream` joined with the version of its
    /// key in `table` as of the record's timestamp (J16, J17), the table's
    /// history kept for `history_retention`. Choose the join with
    /// [`StreamVersionedTableJoin::inner`] or
    /// [`StreamVersionedTableJoin::left`].
    pub fn stream_versioned_table<K, V, T>(
        name: impl Into<String>,
        stream: &Topic<K, V>,
        table: &Topic<K, T>,
        history_retention: Duration,
    ) -> StreamVersionedTableJoin<K, V, T>
    where
        K: Clone + Send + Sync + 'static,
        V: Send + Sync + 'static,
        T: Clone + Send + Sync + 'static,
    {
        StreamVersionedTableJoin {
            name: name.into(),
            stream: stream.clone(),
            table: table.clone(),
            history_retention,
        }
    }
}

/// A versioned join's declaration, as [`StageHooks::operator`](crate::StageHooks::operator) finds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VersionedJoinDecl {
    /// The stream topic (source 0 of the stage).
    pub stream: TopicName,
    /// The table topic (source 1).
    pub table: TopicName,
    /// The output topic, once declared.
    pub output: Option<TopicName>,
    /// Inner or left.
    pub kind: JoinKind,
    /// How long each key's older versions are kept (J16).
    pub history_retention: Duration,
    /// How long a stream record is held for late table updates (J19);
    /// `None`: it is joined as it is delivered.
    pub grace: Option<Duration>,
    /// The user's joiner with the topics' codecs, for
    /// [`VersionedJoinDecl::joined`].
    pub(crate) joiner: UserLogic<dyn Joiner>,
}

impl Operator for VersionedJoinDecl {
    /// A table update moves the task's observed stream time (J16), which
    /// every later delivery reads: kept in the tick slot, read beside the
    /// record's own.
    fn record_reads_every_slot(&self) -> bool {
        true
    }

    /// C3, J4: its stream and table, so that a key's records and its
    /// versions meet in one task.
    fn co_partitioned(&self, stage: &str) -> Vec<CoPartitioned> {
        vec![CoPartitioned::join_sides(
            &self.stream,
            &self.table,
            format!(
                "versioned table of stream–table join {stage}, which must be co-partitioned with its stream {} (J4, J18)",
                self.stream
            ),
        )]
    }

    fn counters(&self) -> &'static [Counter] {
        &[
            Counter {
                name: logic::UPDATES_EXPIRED,
                help: "Table updates a versioned join (J16) dropped as older than its history retention.",
            },
            Counter {
                name: logic::ROWS_NEWER,
                help: logic::ROWS_NEWER_HELP,
            },
        ]
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl VersionedJoinDecl {
    /// The output record (key and value bytes; `None` when an inner join
    /// writes nothing) for the stream record `record` read from `tp`, when
    /// the version of its key it must see is `row` (the table's value
    /// bytes; `None`: no row): the user's joiner, encoded with the output
    /// topic's codecs. What a checker that keeps the histories by itself
    /// compares a delivery's output with (I13).
    #[allow(clippy::type_complexity)]
    pub fn joined(
        &self,
        tp: &Tp,
        record: &ConsumedRecord,
        row: Option<&[u8]>,
    ) -> Result<Option<(Option<Bytes>, Bytes)>, ReplayError> {
        self.joiner
            .joined(tp, record, row)
            .map_err(ReplayError::delivery)
    }

    /// The history retention in milliseconds (J16).
    pub fn retention_ms(&self) -> i64 {
        retention_ms(self.history_retention).unwrap_or(i64::MAX)
    }

    /// The grace period in milliseconds (J19), when there is one.
    pub fn grace_ms(&self) -> Option<i64> {
        self.grace
            .map(|grace| retention_ms(grace).unwrap_or(i64::MAX))
    }
}

/// The retention in whole milliseconds, when it fits a timestamp (J18).
fn retention_ms(retention: Duration) -> Option<i64> {
    if retention.subsec_nanos() % 1_000_000 != 0 {
        return None;
    }
    i64::try_from(retention.as_millis()).ok()
}

/// A versioned join being declared: its sources, before the joiner.
pub struct StreamVersionedTableJoin<K, V, T> {
    name: String,
    stream: Topic<K, V>,
    table: Topic<K, T>,
    history_retention: Duration,
}

impl<K, V, T> StreamVersionedTableJoin<K, V, T>
where
    K: Clone + Send + Sync + 'static,
    V: Send + Sync + 'static,
    T: Clone + Send + Sync + 'static,
{
    /// An inner join: each stream record with a version as of its
    /// timestamp is joined by `joiner` (which may return `R` or
    /// `Result<R, E>`; an error or a panic refuses the record, X5).
    pub fn inner<R, F>(
        self,
        joiner: impl Fn(&Record<K, V>, &T) -> F + Send + Sync + 'static,
    ) -> VersionedJoinBuilder<K, V, T, R>
    where
        R: 'static,
        F: Fallible<R>,
    {
        self.with(JoinKind::Inner, inner_row_joiner(joiner))
    }

    /// A left join: each stream record is joined by `joiner`, with its
    /// version as of its timestamp or `None`.
    pub fn left<R, F>(
        self,
        joiner: impl Fn(&Record<K, V>, Option<&T>) -> F + Send + Sync + 'static,
    ) -> VersionedJoinBuilder<K, V, T, R>
    where
        R: 'static,
        F: Fallible<R>,
    {
        self.with(JoinKind::Left, left_row_joiner(joiner))
    }

    fn with<R>(
        self,
        kind: JoinKind,
        joiner: JoinerFn<K, V, T, R>,
    ) -> VersionedJoinBuilder<K, V, T, R> {
        VersionedJoinBuilder {
            name: self.name,
            stream: self.stream,
            table: self.table,
            history_retention: self.history_retention,
            kind,
            joiner,
            output: None,
            dead_letter: false,
            grace: None,
        }
    }
}

/// A versioned join with its joiner; see [`Join::stream_versioned_table`](crate::Join::stream_versioned_table).
pub struct VersionedJoinBuilder<K, V, T, R> {
    name: String,
    stream: Topic<K, V>,
    table: Topic<K, T>,
    history_retention: Duration,
    kind: JoinKind,
    joiner: JoinerFn<K, V, T, R>,
    output: Option<Topic<K, R>>,
    dead_letter: bool,
    grace: Option<Duration>,
}

impl<K, V, T, R> VersionedJoinBuilder<K, V, T, R>
where
    K: Clone + Send + Sync + 'static,
    V: Send + Sync + 'static,
    T: Clone + Send + Sync + 'static,
    R: 'static,
{
    /// The topic the join's results are written to (required).
    pub fn into(mut self, output: &Topic<K, R>) -> Self {
        self.output = Some(output.clone());
        self
    }

    /// X5's opt-in: refused records (no key, no timestamp, a value the
    /// codec refuses, a failing joiner) go to `<application.id>-<name>-dlq`
    /// instead of stopping the task.
    pub fn dead_letter_queue(mut self) -> Self {
        self.dead_letter = true;
        self
    }

    /// J19: hold each stream record until the join's stream time (the
    /// highest timestamp of a stream record it held) reaches its timestamp
    /// plus `grace`, so that table updates arriving up to `grace` out of
    /// order are seen (Kafka Streams' `Joined.withGracePeriod`). A record
    /// already older than the stream time less the grace is joined at
    /// once. The grace must be a whole number of milliseconds (J18) and
    /// no longer than the history retention
    /// ([`CompositionError::VersionedGraceBeyondRetention`](crate::CompositionError::VersionedGraceBeyondRetention)).
    pub fn grace(mut self, grace: Duration) -> Self {
        self.grace = Some(grace);
        self
    }

    /// The stage.
    pub fn build(self) -> Stage {
        let wording = Wording {
            rule: ("J18", "j18", "versioned stream–table join"),
            same_topic: "one topic as both its stream and its versioned table",
            key_codecs: "a stream and a versioned table whose keys have different codecs (a key's bytes must be the same on both to meet)",
        };
        let mut problems =
            declare::problems(&wording, &self.stream, &self.table, self.output.as_ref());
        let retention = retention_ms(self.history_retention);
        if retention.is_none() {
            problems.push(wording.problem(
                "a history retention that is not a whole number of milliseconds up to i64::MAX (Kafka's timestamps are milliseconds)",
            ));
        }
        let grace = self.grace.map(retention_ms);
        if grace.is_some_and(|grace| grace.is_none()) {
            problems.push(wording.problem(
                "a grace period that is not a whole number of milliseconds up to i64::MAX (Kafka's timestamps are milliseconds)",
            ));
        }
        if self.grace.is_some() && self.dead_letter {
            // A joiner failing on a held record fails the delivery that
            // releases it: a dead-letter queue would dead-letter that
            // record in the held one's place, and again at each release.
            problems.push(StageProblem::Operator(OperatorProblem {
                rules: "J19",
                anchor: "j19",
                operator: "versioned stream–table join",
                reason: "a grace period with a dead-letter queue (a joiner failing on a held record fails the delivery that releases it, so the queue would take the releasing record in its place)",
            }));
        }
        if let Some(grace) = self.grace.filter(|grace| *grace > self.history_retention) {
            problems.push(StageProblem::VersionedGraceBeyondRetention {
                grace,
                retention: self.history_retention,
            });
        }
        let join = Arc::new(JoinLogic {
            stream: self.stream.clone(),
            table: self.table.clone(),
            output: self.output.clone(),
            joiner: self.joiner,
        });
        let logic = Arc::new(VersionedJoinLogic {
            join: join.clone(),
            retention: retention.unwrap_or(i64::MAX),
            grace: grace.map(|grace| grace.unwrap_or(i64::MAX)),
        });
        let declared = Arc::new(VersionedJoinDecl {
            stream: self.stream.name().clone(),
            table: self.table.name().clone(),
            output: self.output.as_ref().map(|topic| topic.name().clone()),
            kind: self.kind,
            history_retention: self.history_retention,
            grace: self.grace,
            joiner: UserLogic(join),
        });
        let stage = JoinStage {
            name: self.name,
            first: self.stream.clone(),
            second: self.table.clone(),
            output: self.output.clone(),
            dead_letter: self.dead_letter,
            timestamp_sync: None,
        };
        stage.stage(declared, logic, problems)
    }
}

#[cfg(test)]
mod tests;
