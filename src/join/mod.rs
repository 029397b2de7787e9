//! Stream–table joins as an operator (J1–J4): Kafka Streams'
//! `KStream.join(KTable, …)` and `leftJoin`, built into a stage so that
//! every driver runs the same join, and causal where Kafka Streams races.
//!
//! A stream–table join is a stage ([`JoinBuilder::build`] returns a
//! [`Stage`]) with two sources, a stream and a table, and one output:
//!
//! - **The table (J1).** The join keeps, in each key's slot, the latest
//!   value its task delivered from the table topic for that key; a
//!   tombstone (a record with a null value) deletes the row. The rows are
//!   state: written to the stage's changelog in the delivery's transaction
//!   (S5), restored by a restarted or moved task.
//! - **The lookup (J2).** A stream record is joined with the row its task
//!   holds for the record's key when it delivers the record: the table as of
//!   the task's delivery order. [`StreamTableJoin::inner`] writes nothing
//!   when there is no row; [`StreamTableJoin::left`] calls the joiner with
//!   `None`. The result goes to the output topic under the stream record's
//!   key, with its timestamp. A stream record never changes the table. A
//!   stream record that meets a row newer than itself is counted
//!   (`join-rows-newer-than-record-total`); a versioned join
//!   ([`Join::stream_versioned_table`]) reads the table as of the record's
//!   timestamp instead.
//! - **Causal joins (J3).** A stream record whose stamp claims a table
//!   record (its producer stamped it with [`crate::CausalClock`] after
//!   writing the table update, or a stage that had delivered the update
//!   emitted it) is held by the gate until that update is delivered, so it
//!   is joined with that version of the row or a later one, whatever the
//!   timestamps say. This is how to get joins that never race.
//! - **Co-partitioning (J4).** Stream and table must have the same key
//!   codec (checked when the application is built) and the same partition
//!   count (checked at assembly, C3), so that a key's stream records and
//!   table rows meet in one task.
//!
//! Stream–stream joins (J5–J7), [`Join::stream_stream`], join two streams
//! within a time window ([`JoinWindows`]): each record is held in its key's
//! slot until the task's stream time passes its window plus the grace, and
//! a left or outer join writes a record that joined nothing once, when its
//! window closes, never before. [`held_of`] lists a task's held records.
//!
//! Table–table joins (J8, J9), [`Join::table_table`], join two tables by
//! key: every change of either side rewrites the key's result, and a
//! change that removes it writes a tombstone. [`sides_of`] lists a task's
//! sides.
//!
//! Foreign-key table–table joins (J10–J15),
//! [`AppBuilder::foreign_key_join`](crate::app::AppBuilder::foreign_key_join),
//! join each left row with the right row its foreign key names, through
//! three stages and two derived topics; see [`ForeignKeyJoin`].
//!
//! A stream or table record without a key is refused with J1 or J2 (its
//! task stops, or dead-letters it with [`JoinBuilder::dead_letter_queue`]);
//! so is a value the topic's codec refuses, and a joiner's error or panic.
//!
//! ```
//! use parsley::{Join, JoinDecl};
//! use parsley::{Parsley, Topic, Utf8, I64};
//!
//! let orders = Topic::<String, i64>::with_codecs("orders", Utf8, I64);
//! let discounts = Topic::<String, i64>::with_codecs("discounts", Utf8, I64);
//! let priced = Topic::<String, i64>::with_codecs("priced-orders", Utf8, I64);
//! // Each order at its customer's discount, or at full price without one.
//! let pricing = Join::stream_table("pricing", &orders, &discounts)
//!     .left(|order, discount: Option<&i64>| order.value() - discount.copied().unwrap_or(0))
//!     .into(&priced)
//!     .build();
//! let app = Parsley::named("shop").stage(pricing).build()?;
//! let declared = app.stage("pricing").unwrap().stage.hooks().operator::<JoinDecl>().unwrap();
//! assert_eq!(declared.table.as_str(), "discounts");
//! # Ok::<(), parsley::CompositionError>(())
//! ```

mod declare;
mod foreign_key;
mod foreign_key_codec;
mod foreign_key_logic;
mod logic;
mod row;
mod stream;
mod stream_logic;
mod table;
mod table_logic;
mod versioned;

pub use foreign_key::{
    response_topic_name, subscription_topic_name, ForeignKeyJoin, ForeignKeyJoinBuilder,
    ForeignKeyJoinDecl, ForeignKeyJoinPart, ForeignKeyJoinStages,
};
pub use foreign_key_codec::{Response, ResponseCodec, Subscription, SubscriptionCodec};
pub use stream::{
    held_of, HeldRecord, JoinWindows, StreamJoinBuilder, StreamJoinDecl, StreamJoinKind,
    StreamStreamJoin,
};
pub use table::{sides_of, Sides, TableJoinBuilder, TableJoinDecl, TableJoinKind, TableTableJoin};
pub use versioned::{StreamVersionedTableJoin, VersionedJoinBuilder, VersionedJoinDecl};

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::emission::Record;
use crate::operator::{CoPartitioned, Counter, Operator, UserLogic};
use crate::record::ConsumedRecord;
use crate::stage::logic::DeliveryFailure;
use crate::stage::logic::Fallible;
use crate::stage::{ReplayError, Stage};
use crate::topic::Topic;
use crate::tp::{TopicName, Tp};

use declare::{JoinStage, Wording};
use logic::{inner_row_joiner, left_row_joiner, JoinLogic, JoinerFn};

/// A two-sided join's joiner (stream–stream, table–table), given each side
/// or `None`: the result to write, or `None` when the join's kind writes
/// none for those sides (J7, J8).
pub(crate) type SidedJoinerFn<K, L, R, O> =
    Arc<dyn Fn(&K, Option<&L>, Option<&R>) -> Option<Result<O, String>> + Send + Sync>;

/// An inner join's joiner: a result only when both sides are there.
pub(crate) fn inner_joiner<K, L, R, O, F>(
    joiner: impl Fn(&K, &L, &R) -> F + Send + Sync + 'static,
) -> SidedJoinerFn<K, L, R, O>
where
    K: 'static,
    L: 'static,
    R: 'static,
    O: 'static,
    F: Fallible<O>,
{
    Arc::new(move |key, left, right| match (left, right) {
        (Some(left), Some(right)) => Some(joiner(key, left, right).into_result()),
        _ => None,
    })
}

/// A left join's joiner: a result whenever the left side is there.
pub(crate) fn left_joiner<K, L, R, O, F>(
    joiner: impl Fn(&K, &L, Option<&R>) -> F + Send + Sync + 'static,
) -> SidedJoinerFn<K, L, R, O>
where
    K: 'static,
    L: 'static,
    R: 'static,
    O: 'static,
    F: Fallible<O>,
{
    Arc::new(move |key, left, right| left.map(|left| joiner(key, left, right).into_result()))
}

/// An outer join's joiner: a result whenever either side is there.
pub(crate) fn outer_joiner<K, L, R, O, F>(
    joiner: impl Fn(&K, Option<&L>, Option<&R>) -> F + Send + Sync + 'static,
) -> SidedJoinerFn<K, L, R, O>
where
    K: 'static,
    L: 'static,
    R: 'static,
    O: 'static,
    F: Fallible<O>,
{
    Arc::new(move |key, left, right| {
        (left.is_some() || right.is_some()).then(|| joiner(key, left, right).into_result())
    })
}

/// Entry point of the join operators.
pub struct Join;

impl Join {
    /// A stream–table join, a stage named `name` (unique in its application,
    /// C1; it also names the stage's changelog): each record of `stream`
    /// joined with the row of its key in `table` (J1, J2). Choose the join
    /// with [`StreamTableJoin::inner`] or [`StreamTableJoin::left`].
    pub fn stream_table<K, V, T>(
        name: impl Into<String>,
        stream: &Topic<K, V>,
        table: &Topic<K, T>,
    ) -> StreamTableJoin<K, V, T>
    where
        K: Clone + Send + Sync + 'static,
        V: Send + Sync + 'static,
        T: Clone + Send + Sync + 'static,
    {
        StreamTableJoin {
            name: name.into(),
            stream: stream.clone(),
            table: table.clone(),
        }
    }
}

/// Inner or left (J2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JoinKind {
    /// A stream record with no row writes nothing (`KStream.join`).
    Inner,
    /// A stream record with no row is joined with `None` (`KStream.leftJoin`).
    Left,
}

/// A stream–table join's declaration, as [`StageHooks::operator`](crate::StageHooks::operator) finds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinDecl {
    /// The stream topic (source 0 of the stage).
    pub stream: TopicName,
    /// The table topic (source 1).
    pub table: TopicName,
    /// The output topic, once declared.
    pub output: Option<TopicName>,
    /// Inner or left.
    pub kind: JoinKind,
    /// The user's joiner with the topics' codecs, for [`JoinDecl::joined`].
    pub(crate) joiner: UserLogic<dyn Joiner>,
}

impl Operator for JoinDecl {
    fn counters(&self) -> &'static [Counter] {
        &[Counter {
            name: logic::ROWS_NEWER,
            help: logic::ROWS_NEWER_HELP,
        }]
    }

    /// C3, J4: its stream and table, so that a key's records and its row
    /// meet in one task.
    fn co_partitioned(&self, stage: &str) -> Vec<CoPartitioned> {
        vec![CoPartitioned::join_sides(
            &self.stream,
            &self.table,
            format!(
                "table of stream–table join {stage}, which must be co-partitioned with its stream {} (J4)",
                self.stream
            ),
        )]
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl JoinDecl {
    /// The output record (key and value bytes; `None` when an inner join
    /// writes nothing) for the stream record `record` read from `tp`, when
    /// its key's row is `row` (the table's value bytes; `None`: no row):
    /// the user's joiner, encoded with the output topic's codecs. What a
    /// checker that keeps the table by itself compares a delivery's output
    /// with (I13).
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
}

/// The user's joiner of a stream–table or a stream–stream join with its
/// topics' codecs, for the harness's oracle: the output record for a
/// record joined with the other side's value bytes (`None`: none).
pub(crate) trait Joiner: Send + Sync {
    #[allow(clippy::type_complexity)]
    fn joined(
        &self,
        tp: &Tp,
        record: &ConsumedRecord,
        other: Option<&[u8]>,
    ) -> Result<Option<(Option<Bytes>, Bytes)>, DeliveryFailure>;
}

/// A stream–table join being declared: its sources, before the joiner.
pub struct StreamTableJoin<K, V, T> {
    name: String,
    stream: Topic<K, V>,
    table: Topic<K, T>,
}

impl<K, V, T> StreamTableJoin<K, V, T>
where
    K: Clone + Send + Sync + 'static,
    V: Send + Sync + 'static,
    T: Clone + Send + Sync + 'static,
{
    /// An inner join: each stream record with a row is joined by `joiner`
    /// (which may return `R` or `Result<R, E>`; an error or a panic refuses
    /// the record, X5); one without writes nothing.
    pub fn inner<R, F>(
        self,
        joiner: impl Fn(&Record<K, V>, &T) -> F + Send + Sync + 'static,
    ) -> JoinBuilder<K, V, T, R>
    where
        R: 'static,
        F: Fallible<R>,
    {
        self.with(JoinKind::Inner, inner_row_joiner(joiner))
    }

    /// A left join: each stream record is joined by `joiner`, with its row
    /// or `None`.
    pub fn left<R, F>(
        self,
        joiner: impl Fn(&Record<K, V>, Option<&T>) -> F + Send + Sync + 'static,
    ) -> JoinBuilder<K, V, T, R>
    where
        R: 'static,
        F: Fallible<R>,
    {
        self.with(JoinKind::Left, left_row_joiner(joiner))
    }

    fn with<R>(self, kind: JoinKind, joiner: JoinerFn<K, V, T, R>) -> JoinBuilder<K, V, T, R> {
        JoinBuilder {
            name: self.name,
            stream: self.stream,
            table: self.table,
            kind,
            joiner,
            output: None,
            dead_letter: false,
            timestamp_sync: None,
        }
    }
}

/// A stream–table join with its joiner (the rules it keeps are in `docs/RULES.md`).
pub struct JoinBuilder<K, V, T, R> {
    name: String,
    stream: Topic<K, V>,
    table: Topic<K, T>,
    kind: JoinKind,
    joiner: JoinerFn<K, V, T, R>,
    output: Option<Topic<K, R>>,
    dead_letter: bool,
    timestamp_sync: Option<Duration>,
}

impl<K, V, T, R> JoinBuilder<K, V, T, R>
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

    /// X5's opt-in: refused records (no key, a value the codec refuses, a
    /// failing joiner) go to `<application.id>-<name>-dlq` instead of
    /// stopping the task.
    pub fn dead_letter_queue(mut self) -> Self {
        self.dead_letter = true;
        self
    }

    /// G9: the join's task merges its stream and table partitions by their
    /// heads' timestamps, waiting for records known to be in a source's log
    /// and up to `max_idle` for a caught-up source to get more (Kafka
    /// Streams' `max.task.idle.ms`). When both topics' timestamps rise with
    /// their offsets, a stream record is joined with every table update of
    /// a lower timestamp that reached the table in time and none of a
    /// higher one. It does not sort a partition: when a topic is out of
    /// timestamp order within itself, a record may meet an update newer
    /// than itself or miss an older one (counted by
    /// `join-rows-newer-than-record-total`, the first of these). Of a stream
    /// record and a table update of one millisecond, the one whose topic's
    /// name sorts first (byte by byte) goes first: the record sees the
    /// update only when the table's name sorts before the stream's. For the
    /// table as of each record's timestamp whatever the order, use
    /// [`Join::stream_versioned_table`] (J16, J17). See
    /// [`StageBuilder::synchronise_by_timestamp`](crate::stage::StageBuilder::synchronise_by_timestamp).
    pub fn synchronise_by_timestamp(mut self, max_idle: Duration) -> Self {
        self.timestamp_sync = Some(max_idle);
        self
    }

    /// The stage.
    pub fn build(self) -> Stage {
        let wording = Wording {
            rule: ("J4", "j4", "stream–table join"),
            same_topic: "one topic as both its stream and its table",
            key_codecs: "a stream and a table whose keys have different codecs (a key's bytes must be the same on both to meet)",
        };
        let problems = declare::problems(&wording, &self.stream, &self.table, self.output.as_ref());
        let logic = Arc::new(JoinLogic {
            stream: self.stream.clone(),
            table: self.table.clone(),
            output: self.output.clone(),
            joiner: self.joiner,
        });
        let declared = Arc::new(JoinDecl {
            stream: self.stream.name().clone(),
            table: self.table.name().clone(),
            output: self.output.as_ref().map(|topic| topic.name().clone()),
            kind: self.kind,
            joiner: UserLogic(logic.clone()),
        });
        let stage = JoinStage {
            name: self.name,
            first: self.stream.clone(),
            second: self.table.clone(),
            output: self.output.clone(),
            dead_letter: self.dead_letter,
            timestamp_sync: self.timestamp_sync,
        };
        stage.stage(declared, logic, problems)
    }
}

/// The rows of a stream–table join's task (its table, Kafka Streams'
/// `KTable` store), by key bytes in the table's key codec, in key order.
/// `None` when the task is not a join's or `T` is not its table's value
/// type. A driver's view for tests; the open transaction's changes are
/// included.
pub fn rows_of<T: Clone + Send + Sync + 'static>(
    slots: crate::stage::SlotsView<'_>,
) -> Option<Vec<(Bytes, T)>> {
    let slots = slots.of::<row::Row<T>>()?;
    let mut rows: Vec<(Bytes, T)> = slots
        .current_slots()
        .filter_map(|(slot, row)| match slot {
            crate::stage::SlotKey::Key(key) => Some((key.clone(), row.value.clone())),
            _ => None,
        })
        .collect();
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    Some(rows)
}

#[cfg(test)]
mod foreign_key_tests;
#[cfg(test)]
mod stream_tests;
#[cfg(test)]
mod table_tests;
#[cfg(test)]
mod tests;
