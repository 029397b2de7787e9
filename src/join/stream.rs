//! Stream–stream joins as an operator (J5–J7): Kafka Streams'
//! `KStream.join(KStream, …, JoinWindows)`, `leftJoin` and `outerJoin`,
//! built into a stage so that every driver runs the same join.
//!
//! A stream–stream join is a stage ([`OperatorBuilder::build`] returns a
//! [`Stage`]) with two sources, the left stream (source 0) and the right
//! stream (source 1), and one output:
//!
//! - **The join window (J5).** A left record at `t` joins the right records
//!   of its key whose timestamps lie in `[t - before, t + after]`; so a
//!   right record at `t` joins the left records in `[t - after, t + before]`
//!   ([`JoinWindows::time_difference`] sets both to one difference, as
//!   Kafka Streams' `JoinWindows.ofTimeDifferenceAndGrace`). Each pair is
//!   joined once, when the second of the two is delivered, if the first is
//!   still held (J6): the result goes to the output under their key.
//! - **Holding and closing (J6).** The task keeps a close frontier, its
//!   stream time: the highest timestamp it delivered from either side, as
//!   Kafka Streams' shared time tracker. A record is held, in its key's
//!   slot, until its window closes: when the frontier passes its timestamp
//!   plus its look-ahead (`after` for a left record, `before` for a right
//!   one) plus the grace. A record whose window has closed is gone: a record
//!   delivered later does not join it.
//! - **Unmatched records (J7).** [`StreamStreamJoin::left`] writes a left
//!   record that joined nothing with `None` for its right side, and
//!   [`StreamStreamJoin::outer`] either side's so, once, when its window
//!   closes, never before, so that a match arriving within the window and
//!   grace is joined instead (Kafka Streams since 3.1). The records a
//!   delivery closes are written first, in the order (timestamp, right
//!   before left, key, arrival), then its own pairs.
//!
//! The held records are state: written to the stage's changelog in the
//! delivery's transaction (S5), with the frontier in the tick slot, so a
//! restarted or moved task neither loses a held record nor writes an
//! unmatched result twice (X1). Co-partitioning is J4's: both sides must
//! have the same key codec (checked at build) and partition count (checked
//! at assembly, C3).
//!
//! A record without a key, without a value (a tombstone) or with a negative
//! timestamp is refused with J5 (its task stops, or dead-letters it with
//! [`OperatorBuilder::dead_letter_queue`]); so is a value its topic's
//! codec refuses, and a joiner's error or panic.
//!
//! ```
//! use std::time::Duration;
//! use parsley::{Join, JoinWindows, StreamJoinDecl, StreamJoinKind};
//! use parsley::{Parsley, Stage, Topic, Utf8, I64};
//!
//! let orders = Topic::<String, i64>::with_codecs("orders", Utf8, I64);
//! let payments = Topic::<String, i64>::with_codecs("payments", Utf8, I64);
//! let settled = Topic::<String, i64>::with_codecs("settlements", Utf8, I64);
//! // Each order with the payments made within a minute of it; an order
//! // paid for by none is written once its minute (and 10 s of grace) is over.
//! let window = JoinWindows::time_difference(Duration::from_secs(60)).grace(Duration::from_secs(10));
//! let settle = Stage::named("settle")
//!     .join(Join::stream_stream(&orders, &payments, window))
//!     .left(|_order_id, amount, paid: Option<&i64>| amount - paid.copied().unwrap_or(0))
//!     .into(&settled)
//!     .build();
//! let app = Parsley::named("shop").stage(settle).build()?;
//! let declared = app.stage("settle").unwrap().stage.hooks().operator::<StreamJoinDecl>().unwrap();
//! assert_eq!(declared.kind, StreamJoinKind::Left);
//! assert_eq!(declared.after, Duration::from_secs(60));
//! # Ok::<(), parsley::CompositionError>(())
//! ```

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::operator::{CoPartitioned, Operator, UserLogic};
use crate::record::ConsumedRecord;
use crate::stage::{Declaration, ReplayError, Stage, StageHead, TwoSided};
use crate::topic::Topic;
use crate::tp::{TopicName, Tp};

use super::declare::{self, JoinStage, Wording};
use super::stream_logic::{StreamJoinLogic, StreamJoinerFn};
use super::{Join, Joiner};

/// A stream–stream join's window (J5) and grace (J6): how far apart in
/// time a left and a right record of one key may be to join, and how long
/// after that a record is still held for a late match. Kafka Streams'
/// `JoinWindows`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JoinWindows {
    before: Duration,
    after: Duration,
    grace: Duration,
}

impl JoinWindows {
    /// Left and right records at most `difference` apart join: Kafka
    /// Streams' `JoinWindows.ofTimeDifferenceWithNoGrace(difference)`.
    pub fn time_difference(difference: Duration) -> JoinWindows {
        JoinWindows {
            before: difference,
            after: difference,
            grace: Duration::ZERO,
        }
    }

    /// How far before a left record a right record may be to join it
    /// (Kafka Streams' `JoinWindows.before`).
    pub fn before(mut self, before: Duration) -> JoinWindows {
        self.before = before;
        self
    }

    /// How far after a left record a right record may be to join it
    /// (Kafka Streams' `JoinWindows.after`).
    pub fn after(mut self, after: Duration) -> JoinWindows {
        self.after = after;
        self
    }

    /// How long after its window a record is still held for a match that
    /// arrives out of order (J6). Default zero.
    pub fn grace(mut self, grace: Duration) -> JoinWindows {
        self.grace = grace;
        self
    }
}

/// Inner, left or outer (J7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamJoinKind {
    /// Only pairs are written (`KStream.join`).
    Inner,
    /// Pairs, and each left record that joined nothing (`KStream.leftJoin`).
    Left,
    /// Pairs, and each record of either side that joined nothing
    /// (`KStream.outerJoin`).
    Outer,
}

/// A stream–stream join's declaration, as [`StageHooks::operator`](crate::StageHooks::operator) finds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamJoinDecl {
    /// The left stream (source 0 of the stage).
    pub left: TopicName,
    /// The right stream (source 1).
    pub right: TopicName,
    /// The output topic, once declared.
    pub output: Option<TopicName>,
    /// Inner, left or outer.
    pub kind: StreamJoinKind,
    /// How far before a left record its right records may be.
    pub before: Duration,
    /// How far after a left record its right records may be.
    pub after: Duration,
    /// How long after its window a record is held (J6).
    pub grace: Duration,
    /// The user's joiner with the topics' codecs, for
    /// [`StreamJoinDecl::joined`].
    pub(crate) joiner: UserLogic<dyn Joiner>,
}

impl Operator for StreamJoinDecl {
    /// C3, J4: its two sides.
    fn co_partitioned(&self, stage: &str) -> Vec<CoPartitioned> {
        vec![CoPartitioned::join_sides(
            &self.left,
            &self.right,
            format!(
                "right stream of stream–stream join {stage}, which must be co-partitioned with its left stream {} (J4)",
                self.left
            ),
        )]
    }

    /// A record may close other keys' join windows (J6).
    fn record_reads_every_slot(&self) -> bool {
        true
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl StreamJoinDecl {
    /// The output record (key and value bytes) for `record`, a record of
    /// either side read from `tp`, joined with `other`, the other side's
    /// value bytes (`None`: its unmatched result, J7; `None` is returned
    /// when the join writes none for that side): the user's joiner,
    /// encoded with the output topic's codecs. What a checker that holds
    /// the records by itself compares a delivery's output with (I13).
    #[allow(clippy::type_complexity)]
    pub fn joined(
        &self,
        tp: &Tp,
        record: &ConsumedRecord,
        other: Option<&[u8]>,
    ) -> Result<Option<(Option<Bytes>, Bytes)>, ReplayError> {
        self.joiner
            .joined(tp, record, other)
            .map_err(ReplayError::delivery)
    }
}

impl Join {
    /// A stream–stream join (J5–J7), for
    /// [`StageBuilder::join`](crate::StageBuilder::join): each record of
    /// `left` joined with the records of its key in `right` within
    /// `windows`. Choose the join with `inner`, `left` or `outer`.
    pub fn stream_stream<K, L, R>(
        left: &Topic<K, L>,
        right: &Topic<K, R>,
        windows: JoinWindows,
    ) -> StreamStreamJoin<K, L, R>
    where
        K: Clone + Send + Sync + 'static,
        L: Send + Sync + 'static,
        R: Send + Sync + 'static,
    {
        StreamStreamJoin {
            left: left.clone(),
            right: right.clone(),
            windows,
        }
    }
}

/// A stream–stream join being declared: its sources and window, before the
/// joiner.
pub struct StreamStreamJoin<K, L, R> {
    left: Topic<K, L>,
    right: Topic<K, R>,
    windows: JoinWindows,
}

impl<K, L, R> super::sealed::Joining for StreamStreamJoin<K, L, R> {}

impl<K, L, R> super::KeyedSides for StreamStreamJoin<K, L, R>
where
    K: Clone + Send + Sync + 'static,
    L: Send + Sync + 'static,
    R: Send + Sync + 'static,
{
    type Key = K;
    type Left = L;
    type Right = R;
    type Kind = StreamJoinKind;
    const KINDS: [StreamJoinKind; 3] = [
        StreamJoinKind::Inner,
        StreamJoinKind::Left,
        StreamJoinKind::Outer,
    ];
    type Joined<O: 'static> = StreamStreamJoined<K, L, R, O>;

    fn with_joiner<O: 'static>(
        &self,
        kind: StreamJoinKind,
        joiner: StreamJoinerFn<K, L, R, O>,
    ) -> StreamStreamJoined<K, L, R, O> {
        StreamStreamJoined {
            left: self.left.clone(),
            right: self.right.clone(),
            windows: self.windows,
            kind,
            joiner,
        }
    }
}

/// A stream–stream join with its joiner; see [`Join::stream_stream`] and
/// docs/RULES.md#j5.
pub struct StreamStreamJoined<K, L, R, O> {
    left: Topic<K, L>,
    right: Topic<K, R>,
    windows: JoinWindows,
    kind: StreamJoinKind,
    joiner: StreamJoinerFn<K, L, R, O>,
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

impl<K, L, R, O> TwoSided for StreamStreamJoined<K, L, R, O>
where
    K: Clone + Send + Sync + 'static,
    L: Send + Sync + 'static,
    R: Send + Sync + 'static,
    O: 'static,
{
}

impl<K, L, R, O> Declaration for StreamStreamJoined<K, L, R, O>
where
    K: Clone + Send + Sync + 'static,
    L: Send + Sync + 'static,
    R: Send + Sync + 'static,
    O: 'static,
{
    type Output = Topic<K, O>;
    type Built = Stage;

    fn declare(self, head: StageHead, output: Option<Topic<K, O>>) -> Stage {
        let wording = Wording {
            rule: ("J5", "j5", "stream–stream join"),
            same_topic: "one topic as both its left and its right stream",
            key_codecs: "a left and a right stream whose keys have different codecs (a key's bytes must be the same on both to meet)",
        };
        let mut problems = declare::problems(&wording, &self.left, &self.right, output.as_ref());
        if self.windows.before.is_zero() && self.windows.after.is_zero() {
            problems.push(wording.problem(
                "a join window of zero (records would join only at the same millisecond; declare a time difference of at least 1 ms)",
            ));
        }
        let logic = Arc::new(StreamJoinLogic {
            left: self.left.clone(),
            right: self.right.clone(),
            output: output.clone(),
            kind: self.kind,
            before: millis(self.windows.before),
            after: millis(self.windows.after),
            grace: millis(self.windows.grace),
            joiner: self.joiner,
        });
        let declared = Arc::new(StreamJoinDecl {
            joiner: UserLogic(logic.clone()),
            left: self.left.name().clone(),
            right: self.right.name().clone(),
            output: output.as_ref().map(|topic| topic.name().clone()),
            kind: self.kind,
            before: self.windows.before,
            after: self.windows.after,
            grace: self.windows.grace,
        });
        let stage = JoinStage {
            first: self.left.clone(),
            second: self.right.clone(),
            output,
        };
        stage.stage(head, declared, logic, problems)
    }
}

/// The records a stream–stream join's task holds (J6): by timestamp, then
/// key, then arrival. `None` when the task is
/// not a stream–stream join's. A driver's view for tests; the open
/// transaction's changes are included.
pub fn held_of(slots: crate::stage::SlotsView<'_>) -> Option<Vec<HeldRecord>> {
    super::stream_logic::held_of(slots)
}

/// A record a stream–stream join holds, as [`held_of`] lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeldRecord {
    /// The key's bytes, in the streams' key codec.
    pub key: bytes::Bytes,
    /// Whether it came from the left stream.
    pub left: bool,
    /// Its timestamp.
    pub timestamp: i64,
    /// Whether it has joined a record of the other side.
    pub matched: bool,
}
