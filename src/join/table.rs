//! Table–table joins as an operator (J8, J9): Kafka Streams'
//! `KTable.join(KTable, …)`, `leftJoin` and `outerJoin`, built into a stage
//! so that every driver runs the same join.
//!
//! A table–table join is a stage ([`OperatorBuilder::build`] returns a
//! [`Stage`]) with two sources, the left table (source 0) and the right
//! table (source 1), and one output, itself a table:
//!
//! - **The tables (J8).** The join keeps, in each key's slot, the latest
//!   value its task delivered from each side for that key; a tombstone (a
//!   record with a null value) deletes that side's value, and a tombstone
//!   for a side without a value changes nothing and writes nothing. The
//!   slots are state: written to the stage's changelog in the delivery's
//!   transaction (S5), restored by a restarted or moved task.
//! - **The result (J8).** A key has a result when [`TableTableJoin::inner`]
//!   has both sides, [`TableTableJoin::left`] its left side,
//!   [`TableTableJoin::outer`] either side. Every delivery that changes a
//!   side writes the key's result to the output under the key: the
//!   joiner's value when the key has a result after the change, a
//!   tombstone ([`crate::Topic::tombstone`]) when it had one before and has
//!   none after, nothing when it had none either.
//! - **Co-partitioning (J4).** Both tables must have the same key codec
//!   (checked when the application is built, J9) and the same partition
//!   count (checked at assembly, C3), so that a key's records of both sides
//!   meet in one task.
//!
//! A record without a key is refused with J9 (its task stops, or
//! dead-letters it with [`OperatorBuilder::dead_letter_queue`]); so is a
//! value its topic's codec refuses, and a joiner's error or panic.
//!
//! ```
//! use parsley::{Join, TableJoinDecl, TableJoinKind};
//! use parsley::{Parsley, Stage, Topic, Utf8, I64};
//!
//! let balances = Topic::<String, i64>::with_codecs("balances", Utf8, I64);
//! let limits = Topic::<String, i64>::with_codecs("credit-limits", Utf8, I64);
//! let headroom = Topic::<String, i64>::with_codecs("headroom", Utf8, I64);
//! // Each account's headroom: its limit less its balance, kept up to date
//! // as either changes; an account without a limit has none.
//! let view = Stage::named("headroom")
//!     .join(Join::table_table(&balances, &limits))
//!     .inner(|_account, balance, limit| limit - balance)
//!     .into(&headroom)
//!     .build();
//! let app = Parsley::named("bank").stage(view).build()?;
//! let declared = app.stage("headroom").unwrap().stage.hooks().operator::<TableJoinDecl>().unwrap();
//! assert_eq!(declared.kind, TableJoinKind::Inner);
//! # Ok::<(), parsley::CompositionError>(())
//! ```

use std::sync::Arc;

use bytes::Bytes;

use crate::operator::{CoPartitioned, Operator, UserLogic};
use crate::stage::logic::DeliveryFailure;
use crate::stage::{Declaration, ReplayError, Stage, StageHead, TwoSided};
use crate::topic::Topic;
use crate::tp::TopicName;

use super::declare::{self, JoinStage, Wording};
use super::table_logic::{TableJoinLogic, TableJoinerFn};
use super::Join;

/// Inner, left or outer (J8).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TableJoinKind {
    /// A key has a result while it has both sides (`KTable.join`).
    Inner,
    /// A key has a result while it has a left side (`KTable.leftJoin`).
    Left,
    /// A key has a result while it has either side (`KTable.outerJoin`).
    Outer,
}

impl TableJoinKind {
    /// J8: whether a key with these sides has a result.
    pub fn has_result(self, left: bool, right: bool) -> bool {
        match self {
            TableJoinKind::Inner => left && right,
            TableJoinKind::Left => left,
            TableJoinKind::Outer => left || right,
        }
    }
}

/// A table–table join's declaration, as [`StageHooks::operator`](crate::StageHooks::operator) finds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableJoinDecl {
    /// The left table (source 0 of the stage).
    pub left: TopicName,
    /// The right table (source 1).
    pub right: TopicName,
    /// The output topic, once declared.
    pub output: Option<TopicName>,
    /// Inner, left or outer.
    pub kind: TableJoinKind,
    /// The user's joiner with the topics' codecs, for
    /// [`TableJoinDecl::joined`].
    pub(crate) joiner: UserLogic<dyn TableJoiner>,
}

impl Operator for TableJoinDecl {
    /// C3, J4: its two sides.
    fn co_partitioned(&self, stage: &str) -> Vec<CoPartitioned> {
        vec![CoPartitioned::join_sides(
            &self.left,
            &self.right,
            format!(
                "right table of table–table join {stage}, which must be co-partitioned with its left table {} (J4)",
                self.left
            ),
        )]
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl TableJoinDecl {
    /// The result for the key `key` (its bytes) when its left side is
    /// `left` and its right side `right` (each its table's value bytes;
    /// `None`: no value): the user's joiner, encoded with the output
    /// topic's value codec; `None` when the key has no result with these
    /// sides (J8). What a checker that keeps both tables by itself compares
    /// a delivery's output with (I13).
    pub fn joined(
        &self,
        key: &[u8],
        left: Option<&[u8]>,
        right: Option<&[u8]>,
    ) -> Result<Option<Bytes>, ReplayError> {
        self.joiner
            .joined(key, left, right)
            .map_err(ReplayError::delivery)
    }
}

/// The user's joiner of a table–table join with its topics' codecs, for
/// the harness's oracle ([`TableJoinDecl::joined`]).
pub(crate) trait TableJoiner: Send + Sync {
    fn joined(
        &self,
        key: &[u8],
        left: Option<&[u8]>,
        right: Option<&[u8]>,
    ) -> Result<Option<Bytes>, DeliveryFailure>;
}

impl Join {
    /// A table–table join (J8), for
    /// [`StageBuilder::join`](crate::StageBuilder::join): the latest value
    /// of each key in `left` joined with the latest value of the key in
    /// `right`, rewritten whenever either changes. Choose the join with
    /// `inner`, `left` or `outer`.
    pub fn table_table<K, L, R>(left: &Topic<K, L>, right: &Topic<K, R>) -> TableTableJoin<K, L, R>
    where
        K: Clone + Send + Sync + 'static,
        L: Send + Sync + 'static,
        R: Send + Sync + 'static,
    {
        TableTableJoin {
            left: left.clone(),
            right: right.clone(),
        }
    }
}

/// A table–table join being declared: its sources, before the joiner.
pub struct TableTableJoin<K, L, R> {
    left: Topic<K, L>,
    right: Topic<K, R>,
}

impl<K, L, R> super::sealed::Joining for TableTableJoin<K, L, R> {}

impl<K, L, R> super::KeyedSides for TableTableJoin<K, L, R>
where
    K: Clone + Send + Sync + 'static,
    L: Send + Sync + 'static,
    R: Send + Sync + 'static,
{
    type Key = K;
    type Left = L;
    type Right = R;
    type Kind = TableJoinKind;
    const KINDS: [TableJoinKind; 3] = [
        TableJoinKind::Inner,
        TableJoinKind::Left,
        TableJoinKind::Outer,
    ];
    type Joined<O: 'static> = TableTableJoined<K, L, R, O>;

    fn with_joiner<O: 'static>(
        &self,
        kind: TableJoinKind,
        joiner: TableJoinerFn<K, L, R, O>,
    ) -> TableTableJoined<K, L, R, O> {
        TableTableJoined {
            left: self.left.clone(),
            right: self.right.clone(),
            kind,
            joiner,
        }
    }
}

/// A table–table join with its joiner; see [`Join::table_table`] and
/// docs/RULES.md#j8.
pub struct TableTableJoined<K, L, R, O> {
    left: Topic<K, L>,
    right: Topic<K, R>,
    kind: TableJoinKind,
    joiner: TableJoinerFn<K, L, R, O>,
}

impl<K, L, R, O> TwoSided for TableTableJoined<K, L, R, O>
where
    K: Clone + Send + Sync + 'static,
    L: Send + Sync + 'static,
    R: Send + Sync + 'static,
    O: 'static,
{
}

impl<K, L, R, O> Declaration for TableTableJoined<K, L, R, O>
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
            rule: ("J9", "j9", "table–table join"),
            same_topic: "one topic as both its left and its right table",
            key_codecs: "a left and a right table whose keys have different codecs (a key's bytes must be the same on both to meet)",
        };
        let problems = declare::problems(&wording, &self.left, &self.right, output.as_ref());
        let logic = Arc::new(TableJoinLogic {
            left: self.left.clone(),
            right: self.right.clone(),
            output: output.clone(),
            kind: self.kind,
            joiner: self.joiner,
        });
        let declared = Arc::new(TableJoinDecl {
            joiner: UserLogic(logic.clone()),
            left: self.left.name().clone(),
            right: self.right.name().clone(),
            output: output.as_ref().map(|topic| topic.name().clone()),
            kind: self.kind,
        });
        let stage = JoinStage {
            first: self.left.clone(),
            second: self.right.clone(),
            output,
        };
        stage.stage(head, declared, logic, problems)
    }
}

/// A key's two sides as a table–table join's task holds them (J8), as
/// [`sides_of`] lists them: each side's value bytes, `None` when the side
/// has no value for the key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sides {
    /// The key's bytes, in the tables' key codec.
    pub key: Bytes,
    /// The left table's value bytes.
    pub left: Option<Bytes>,
    /// The right table's value bytes.
    pub right: Option<Bytes>,
}

/// The sides a table–table join's task holds, by key bytes in key order.
/// `None` when the task is not a table–table join's. A driver's view for
/// tests; the open transaction's changes are included.
pub fn sides_of(slots: crate::stage::SlotsView<'_>) -> Option<Vec<Sides>> {
    super::table_logic::sides_of(slots)
}
