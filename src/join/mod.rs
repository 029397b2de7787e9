//! Stream–table joins as an operator (J1–J4): Kafka Streams'
//! `KStream.join(KTable, …)` and `leftJoin`, built into a stage so that
//! every driver runs the same join, and causal where Kafka Streams races.
//!
//! A stream–table join is a stage ([`OperatorBuilder::build`] returns a
//! [`Stage`]) with two sources, a stream and a table, and one output:
//!
//! - **The table (J1).** The join keeps, in each key's slot, the latest
//!   value its task delivered from the table topic for that key; a
//!   tombstone (a record with a null value) deletes the row. The rows are
//!   state: written to the stage's changelog in the delivery's transaction
//!   (S5), restored by a restarted or moved task.
//! - **The lookup (J2).** A stream record is joined with the row its task
//!   holds for the record's key when it delivers the record: the table as of
//!   the task's delivery order. `inner` writes nothing
//!   when there is no row; `left` calls the joiner with
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
//! Foreign-key table–table joins (J10–J15), [`Join::foreign_key`], join
//! each left row with the right row its foreign key names, through
//! three stages and two derived topics; see [`ForeignKeyJoin`].
//!
//! A stream or table record without a key is refused with J1 or J2 (its
//! task stops, or dead-letters it with [`OperatorBuilder::dead_letter_queue`]);
//! so is a value the topic's codec refuses, and a joiner's error or panic.
//!
//! ```
//! use parsley::{Join, JoinDecl};
//! use parsley::{Parsley, Stage, Topic, Utf8, I64};
//!
//! let orders = Topic::<String, i64>::with_codecs("orders", Utf8, I64);
//! let discounts = Topic::<String, i64>::with_codecs("discounts", Utf8, I64);
//! let priced = Topic::<String, i64>::with_codecs("priced-orders", Utf8, I64);
//! // Each order at its customer's discount, or at full price without one.
//! let pricing = Stage::named("pricing")
//!     .join(Join::stream_table(&orders, &discounts))
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
    response_topic_name, subscription_topic_name, ForeignKeyJoin, ForeignKeyJoinDecl,
    ForeignKeyJoinPart, ForeignKeyJoinStages, ForeignKeyJoined,
};
pub use foreign_key_codec::{Response, ResponseCodec, Subscription, SubscriptionCodec};
pub use stream::{
    held_of, HeldRecord, JoinWindows, StreamJoinDecl, StreamJoinKind, StreamStreamJoin,
    StreamStreamJoined,
};
pub use table::{sides_of, Sides, TableJoinDecl, TableJoinKind, TableTableJoin, TableTableJoined};
pub use versioned::{StreamVersionedTableJoin, Versioned, VersionedJoinDecl, VersionedJoined};

use std::sync::Arc;

use bytes::Bytes;

use crate::emission::Record;
use crate::operator::{CoPartitioned, Counter, Operator, UserLogic};
use crate::record::ConsumedRecord;
use crate::stage::logic::DeliveryFailure;
use crate::stage::logic::Fallible;
use crate::stage::{
    Declaration, Declaring, OperatorBuilder, ReplayError, Stage, StageBuilder, StageHead,
    Stateless, TwoSided,
};
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
    /// A stream–table join (J1, J2), for [`StageBuilder::join`]: each
    /// record of `stream` joined with the row of its key in `table`. Choose
    /// the join with `inner` or `left`.
    pub fn stream_table<K, V, T>(
        stream: &Topic<K, V>,
        table: &Topic<K, T>,
    ) -> StreamTableJoin<K, V, T>
    where
        K: Clone + Send + Sync + 'static,
        V: Send + Sync + 'static,
        T: Clone + Send + Sync + 'static,
    {
        StreamTableJoin {
            stream: stream.clone(),
            table: table.clone(),
            history: Latest,
        }
    }
}

impl Join {
    /// A foreign-key table–table join (J10–J15), for
    /// [`StageBuilder::join`]: each row of `left` joined with the row of
    /// `right` whose key `foreign_key` returns for its value (or
    /// `Result<Option<KO>, E>`; an error refuses the record, X5), kept up
    /// to date as either changes. Choose `inner` or `left`, then the
    /// output; the build returns the join's three stages,
    /// `<name>-subscribe`, `<name>-respond` and `<name>-resolve`, to add
    /// with [`AppBuilder::stages`](crate::app::AppBuilder::stages), and
    /// its derived topics `<application.id>-<name>-subscription` and
    /// `-response`, named when the application is built. Kafka Streams'
    /// `KTable.join(KTable, Function, …)` and `leftJoin` (KIP-213).
    pub fn foreign_key<K, V, KO, VO, R>(
        left: &Topic<K, V>,
        right: &Topic<KO, VO>,
        foreign_key: impl Fn(&V) -> R + Send + Sync + 'static,
    ) -> ForeignKeyJoin<K, V, KO, VO>
    where
        K: Send + Sync + 'static,
        V: Send + Sync + 'static,
        KO: Send + Sync + 'static,
        VO: Send + Sync + 'static,
        R: Fallible<Option<KO>>,
    {
        ForeignKeyJoin::new(left, right, foreign_key)
    }
}

impl StageBuilder<Stateless> {
    /// A join's stage: `join` names its two sides
    /// ([`Join::stream_table`], [`Join::stream_stream`],
    /// [`Join::table_table`], [`Join::stream_versioned_table`],
    /// [`Join::foreign_key`]); the joiner (`inner`, `left`, `outer`)
    /// follows.
    ///
    /// ```
    /// use parsley::prelude::*;
    ///
    /// let orders: Topic<String, i64> = Topic::new("orders");
    /// let discounts: Topic<String, i64> = Topic::new("discounts");
    /// let priced: Topic<String, i64> = Topic::new("priced");
    /// let pricing = Stage::named("pricing")
    ///     .join(Join::stream_table(&orders, &discounts))
    ///     .left(|order, discount: Option<&i64>| order.value() - discount.copied().unwrap_or(0))
    ///     .into(&priced)
    ///     .build();
    /// assert_eq!(pricing.name(), "pricing");
    /// ```
    pub fn join<J: Joining>(self, join: J) -> Declaring<J> {
        self.choose(join)
    }
}

/// The sides of a join whose joiner is called with the key and the two
/// sides' values: a stream–stream join ([`Join::stream_stream`]) and a
/// table–table join ([`Join::table_table`]). Their `inner`, `left` and
/// `outer` are one set of methods, on [`Declaring`].
pub trait KeyedSides: sealed::Joining {
    /// The key both sides share.
    type Key: 'static;
    /// The left side's values.
    type Left: 'static;
    /// The right side's values.
    type Right: 'static;
    /// The join's kind, as its declaration records it.
    #[doc(hidden)]
    type Kind: Copy;
    /// The kinds `inner`, `left` and `outer` declare.
    #[doc(hidden)]
    const KINDS: [Self::Kind; 3];
    /// What the joiner step declares.
    type Joined<O: 'static>: Declaration;

    /// The join's declaration with its kind and joiner.
    #[doc(hidden)]
    fn with_joiner<O: 'static>(
        &self,
        kind: Self::Kind,
        joiner: SidedJoinerFn<Self::Key, Self::Left, Self::Right, O>,
    ) -> Self::Joined<O>;
}

impl<J: KeyedSides> Declaring<J> {
    /// An inner join: `joiner` (which may return `O` or `Result<O, E>`; an
    /// error or a panic refuses the record, X5) is called only with both
    /// sides. A stream–stream join writes each pair within its window; a
    /// table–table join writes a key's result while it has both sides, and
    /// a tombstone when it loses one.
    pub fn inner<O, F>(
        self,
        joiner: impl Fn(&J::Key, &J::Left, &J::Right) -> F + Send + Sync + 'static,
    ) -> OperatorBuilder<J::Joined<O>>
    where
        O: 'static,
        F: Fallible<O>,
    {
        let joined = self.spec.with_joiner(J::KINDS[0], inner_joiner(joiner));
        self.with(joined)
    }

    /// A left join: `joiner` is called with the left side and the right
    /// one or `None`. A stream–stream join writes each pair, and each left
    /// record that joined nothing once its window has closed (J7); a
    /// table–table join writes a key's result while it has a left side.
    pub fn left<O, F>(
        self,
        joiner: impl Fn(&J::Key, &J::Left, Option<&J::Right>) -> F + Send + Sync + 'static,
    ) -> OperatorBuilder<J::Joined<O>>
    where
        O: 'static,
        F: Fallible<O>,
    {
        let joined = self.spec.with_joiner(J::KINDS[1], left_joiner(joiner));
        self.with(joined)
    }

    /// An outer join: `joiner` is called with either side or both, `None`
    /// for a missing one. A stream–stream join writes each pair, and each
    /// record of either side that joined nothing once its window has
    /// closed (J7); a table–table join writes a key's result while it has
    /// either side, and a tombstone when it loses its last.
    pub fn outer<O, F>(
        self,
        joiner: impl Fn(&J::Key, Option<&J::Left>, Option<&J::Right>) -> F + Send + Sync + 'static,
    ) -> OperatorBuilder<J::Joined<O>>
    where
        O: 'static,
        F: Fallible<O>,
    {
        let joined = self.spec.with_joiner(J::KINDS[2], outer_joiner(joiner));
        self.with(joined)
    }
}

/// The two sides of a join ([`StageBuilder::join`]).
pub trait Joining: sealed::Joining {}

mod sealed {
    pub trait Joining {}
}

impl<J: sealed::Joining> Joining for J {}

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

/// A stream–table join's sides, before the joiner. `H` is how the table
/// is kept: [`Latest`], its latest row per key ([`Join::stream_table`],
/// J1), or [`Versioned`], its versions ([`Join::stream_versioned_table`],
/// J16).
pub struct StreamTableJoin<K, V, T, H = Latest> {
    stream: Topic<K, V>,
    table: Topic<K, T>,
    history: H,
}

/// How a plain stream–table join keeps its table: its latest row per key
/// (J1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Latest;

impl<K, V, T, H> sealed::Joining for StreamTableJoin<K, V, T, H> {}

impl<K, V, T, H: Copy> Declaring<StreamTableJoin<K, V, T, H>>
where
    K: Clone + Send + Sync + 'static,
    V: Send + Sync + 'static,
    T: Clone + Send + Sync + 'static,
{
    /// An inner join: each stream record with a row (for a versioned
    /// table, a version as of its timestamp) is joined by `joiner` (which
    /// may return `R` or `Result<R, E>`; an error or a panic refuses the
    /// record, X5); one without writes nothing.
    pub fn inner<R, F>(
        self,
        joiner: impl Fn(&Record<K, V>, &T) -> F + Send + Sync + 'static,
    ) -> OperatorBuilder<StreamTableJoined<K, V, T, R, H>>
    where
        R: 'static,
        F: Fallible<R>,
        StreamTableJoined<K, V, T, R, H>: Declaration,
    {
        self.with_joiner(JoinKind::Inner, inner_row_joiner(joiner))
    }

    /// A left join: each stream record is joined by `joiner`, with its row
    /// (its version as of its timestamp) or `None`.
    pub fn left<R, F>(
        self,
        joiner: impl Fn(&Record<K, V>, Option<&T>) -> F + Send + Sync + 'static,
    ) -> OperatorBuilder<StreamTableJoined<K, V, T, R, H>>
    where
        R: 'static,
        F: Fallible<R>,
        StreamTableJoined<K, V, T, R, H>: Declaration,
    {
        self.with_joiner(JoinKind::Left, left_row_joiner(joiner))
    }

    fn with_joiner<R: 'static>(
        self,
        kind: JoinKind,
        joiner: JoinerFn<K, V, T, R>,
    ) -> OperatorBuilder<StreamTableJoined<K, V, T, R, H>>
    where
        StreamTableJoined<K, V, T, R, H>: Declaration,
    {
        let StreamTableJoin {
            stream,
            table,
            history,
        } = &self.spec;
        let joined = StreamTableJoined {
            stream: stream.clone(),
            table: table.clone(),
            history: *history,
            kind,
            joiner,
        };
        self.with(joined)
    }
}

/// A stream–table join's logic, as [`OperatorBuilder`] declares it (the
/// rules it keeps are in `docs/RULES.md`). Its
/// [`synchronise_by_timestamp`](OperatorBuilder::synchronise_by_timestamp):
/// when both topics' timestamps rise with their offsets, a stream record
/// is joined with every table update of a lower timestamp that reached the
/// table in time and none of a higher one. It does not sort a partition:
/// when a topic is out of timestamp order within itself, a record may meet
/// an update newer than itself or miss an older one (counted by
/// `join-rows-newer-than-record-total`, the first of these). Of a stream
/// record and a table update of one millisecond, the one whose topic's
/// name sorts first (byte by byte) goes first: the record sees the update
/// only when the table's name sorts before the stream's. For the table as
/// of each record's timestamp whatever the order, use
/// [`Join::stream_versioned_table`] (J16, J17).
pub struct StreamTableJoined<K, V, T, R, H = Latest> {
    stream: Topic<K, V>,
    table: Topic<K, T>,
    history: H,
    kind: JoinKind,
    joiner: JoinerFn<K, V, T, R>,
}

impl<K, V, T, R> TwoSided for StreamTableJoined<K, V, T, R, Latest>
where
    K: Clone + Send + Sync + 'static,
    V: Send + Sync + 'static,
    T: Clone + Send + Sync + 'static,
    R: 'static,
{
}

impl<K, V, T, R> Declaration for StreamTableJoined<K, V, T, R, Latest>
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
            rule: ("J4", "j4", "stream–table join"),
            same_topic: "one topic as both its stream and its table",
            key_codecs: "a stream and a table whose keys have different codecs (a key's bytes must be the same on both to meet)",
        };
        let problems = declare::problems(&wording, &self.stream, &self.table, output.as_ref());
        let logic = Arc::new(JoinLogic {
            stream: self.stream.clone(),
            table: self.table.clone(),
            output: output.clone(),
            joiner: self.joiner,
        });
        let declared = Arc::new(JoinDecl {
            stream: self.stream.name().clone(),
            table: self.table.name().clone(),
            output: output.as_ref().map(|topic| topic.name().clone()),
            kind: self.kind,
            joiner: UserLogic(logic.clone()),
        });
        let stage = JoinStage {
            first: self.stream.clone(),
            second: self.table.clone(),
            output,
        };
        stage.stage(head, declared, logic, problems)
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
