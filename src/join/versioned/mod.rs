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
//!   [`OperatorBuilder::grace`] (Kafka Streams'
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
//! use parsley::{Parsley, Stage, Topic, Utf8, I64};
//!
//! let orders = Topic::<String, i64>::with_codecs("orders", Utf8, I64);
//! let discounts = Topic::<String, i64>::with_codecs("discounts", Utf8, I64);
//! let priced = Topic::<String, i64>::with_codecs("priced-orders", Utf8, I64);
//! // Each order at the discount its customer had when it was placed.
//! let pricing = Stage::named("pricing")
//!     .join(Join::stream_versioned_table(&orders, &discounts, Duration::from_secs(3600)))
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

use crate::operator::{CoPartitioned, Counter, Operator, OperatorProblem, UserLogic};
use crate::record::ConsumedRecord;
use crate::stage::{Declaration, OperatorBuilder, ReplayError, Stage, StageHead, StageProblem};
use crate::topic::Topic;
use crate::tp::{TopicName, Tp};

use super::declare::{self, JoinStage, Wording};
use super::logic::JoinLogic;
use super::{Join, JoinKind, Joiner, StreamTableJoin, StreamTableJoined};
use logic::VersionedJoinLogic;

impl Join {
    /// A stream–table join against a versioned table (J16, J17), for
    /// [`StageBuilder::join`](crate::StageBuilder::join): each record of
    /// `stream` joined with the version of its key in `table` as of the
    /// record's timestamp, the table's history kept for
    /// `history_retention`. Choose the join with `inner` or `left`.
    pub fn stream_versioned_table<K, V, T>(
        stream: &Topic<K, V>,
        table: &Topic<K, T>,
        history_retention: Duration,
    ) -> StreamVersionedTableJoin<K, V, T>
    where
        K: Clone + Send + Sync + 'static,
        V: Send + Sync + 'static,
        T: Clone + Send + Sync + 'static,
    {
        StreamTableJoin {
            stream: stream.clone(),
            table: table.clone(),
            history: Versioned {
                history_retention,
                grace: None,
            },
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

/// How a versioned join keeps its table (J16): each key's versions for
/// `history_retention`, and the grace its stream records wait (J19).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Versioned {
    history_retention: Duration,
    grace: Option<Duration>,
}

/// A versioned join's sides, before the joiner.
pub type StreamVersionedTableJoin<K, V, T> = StreamTableJoin<K, V, T, Versioned>;

/// A versioned join's logic, as [`OperatorBuilder`] declares it; see
/// [`Join::stream_versioned_table`](crate::Join::stream_versioned_table).
pub type VersionedJoined<K, V, T, R> = StreamTableJoined<K, V, T, R, Versioned>;

impl<K, V, T, R> OperatorBuilder<VersionedJoined<K, V, T, R>>
where
    K: Clone + Send + Sync + 'static,
    V: Send + Sync + 'static,
    T: Clone + Send + Sync + 'static,
    R: 'static,
{
    /// J19: hold each stream record until the join's stream time (the
    /// highest timestamp of a stream record it held) reaches its timestamp
    /// plus `grace`, so that table updates arriving up to `grace` out of
    /// order are seen (Kafka Streams' `Joined.withGracePeriod`). A record
    /// already older than the stream time less the grace is joined at
    /// once. The grace must be a whole number of milliseconds (J18) and
    /// no longer than the history retention
    /// ([`CompositionError::VersionedGraceBeyondRetention`](crate::CompositionError::VersionedGraceBeyondRetention)).
    pub fn grace(mut self, grace: Duration) -> Self {
        self.declaration.history.grace = Some(grace);
        self
    }
}

impl<K, V, T, R> Declaration for VersionedJoined<K, V, T, R>
where
    K: Clone + Send + Sync + 'static,
    V: Send + Sync + 'static,
    T: Clone + Send + Sync + 'static,
    R: 'static,
{
    type Output = Topic<K, R>;
    type Built = Stage;

    fn declare(self, head: StageHead, output: Option<Topic<K, R>>) -> Stage {
        let wording = Wording {
            rule: ("J18", "j18", "versioned stream–table join"),
            same_topic: "one topic as both its stream and its versioned table",
            key_codecs: "a stream and a versioned table whose keys have different codecs (a key's bytes must be the same on both to meet)",
        };
        let mut problems = declare::problems(&wording, &self.stream, &self.table, output.as_ref());
        let retention = retention_ms(self.history.history_retention);
        if retention.is_none() {
            problems.push(wording.problem(
                "a history retention that is not a whole number of milliseconds up to i64::MAX (Kafka's timestamps are milliseconds)",
            ));
        }
        let grace = self.history.grace.map(retention_ms);
        if grace.is_some_and(|grace| grace.is_none()) {
            problems.push(wording.problem(
                "a grace period that is not a whole number of milliseconds up to i64::MAX (Kafka's timestamps are milliseconds)",
            ));
        }
        if self.history.grace.is_some() && head.dead_letter {
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
        if let Some(grace) = self
            .history
            .grace
            .filter(|grace| *grace > self.history.history_retention)
        {
            problems.push(StageProblem::VersionedGraceBeyondRetention {
                grace,
                retention: self.history.history_retention,
            });
        }
        let join = Arc::new(JoinLogic {
            stream: self.stream.clone(),
            table: self.table.clone(),
            output: output.clone(),
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
            output: output.as_ref().map(|topic| topic.name().clone()),
            kind: self.kind,
            history_retention: self.history.history_retention,
            grace: self.history.grace,
            joiner: UserLogic(join),
        });
        let stage = JoinStage {
            first: self.stream.clone(),
            second: self.table.clone(),
            output,
        };
        stage.stage(head, declared, logic, problems)
    }
}

#[cfg(test)]
mod tests;
