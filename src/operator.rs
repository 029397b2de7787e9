//! The seam between a stage and its operators: what the stage, the task and
//! the drivers ask of an operator, by no operator's name.
//!
//! A stage holds its operators' declarations as [`Operator`]s (a windowed
//! aggregation's, a join's, a re-key's, …) beside its erased logic; the
//! stage and the task read them only through this trait, and a driver or a
//! checker that knows an operator finds its declaration with
//! [`crate::StageHooks::operator`]. An operator's logic plugs into the task as
//! any stage's logic does (`StageLogic`), and reports what it counts through
//! the outcome's named counters. So a new operator touches its own folder,
//! its checker and the docs, and nothing else (DESIGN.md, "Operators").
//!
//! This module sits below the stage and the task: it imports neither.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use crate::tp::TopicName;

/// An operator's declaration, as its stage holds it.
pub trait Operator: Any + fmt::Debug + Send + Sync {
    /// Whether a record's delivery reads every slot of its task, not only
    /// its key's (a record may close other keys' windows, W2; expire other
    /// keys, E2; close other keys' join windows, J6). Its records are
    /// replayed with every slot ([`crate::StageHooks::replay_record_over_slots`]).
    fn record_reads_every_slot(&self) -> bool {
        false
    }

    /// Whether a tick's delivery reads every slot of its task, not only the
    /// tick slot (a timer service's, K2; a window's close, W2; an expiry,
    /// E2).
    fn tick_reads_every_slot(&self) -> bool {
        false
    }

    /// The topic Parsley derives for the operator that its stage writes,
    /// if any (a re-key's repartition topic, R1, R3).
    fn repartition(&self) -> Option<&TopicName> {
        None
    }

    /// Pairs of its topics that must have one partition count (C3), so
    /// that what meets by key meets in one task; `stage` names its stage
    /// in the messages.
    fn co_partitioned(&self, _stage: &str) -> Vec<CoPartitioned> {
        Vec::new()
    }

    /// The counters its deliveries report, by name, through their outcome.
    fn counters(&self) -> &'static [Counter] {
        &[]
    }

    /// The declaration as [`Any`], for [`crate::StageHooks::operator`]'s
    /// downcast.
    fn as_any(&self) -> &dyn Any;
}

/// The user's logic as an operator's declaration carries it for the
/// harness's oracles (the user's fold, aggregator, joiner or key function
/// with the topics' codecs, never the operator's own machinery). Two are
/// equal when they are the same logic; it shows as `UserLogic(..)`.
pub(crate) struct UserLogic<T: ?Sized>(pub(crate) Arc<T>);

impl<T: ?Sized> Clone for UserLogic<T> {
    fn clone(&self) -> Self {
        UserLogic(Arc::clone(&self.0))
    }
}

impl<T: ?Sized> PartialEq for UserLogic<T> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl<T: ?Sized> Eq for UserLogic<T> {}

impl<T: ?Sized> fmt::Debug for UserLogic<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("UserLogic(..)")
    }
}

impl<T: ?Sized> std::ops::Deref for UserLogic<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

/// Named counters an operator's delivery reports (W3's late records, K2's
/// late timer requests): the task adds them to its metrics by name
/// ([`crate::task::TaskMetrics::operator_counts`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counted(Vec<&'static str>);

impl Counted {
    /// Counts one more of `name` (a published metric name, such as
    /// `window-records-late-total`).
    pub(crate) fn count(&mut self, name: &'static str) {
        self.0.push(name);
    }

    /// Each name counted, once per count.
    pub(crate) fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.0.iter().copied()
    }
}

/// A declaration mistake of an operator, found while its stage is built
/// and reported by the application's `build`
/// ([`crate::CompositionError::ImpossibleOperator`]) with its rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OperatorProblem {
    /// The rules it breaks, as the message cites them (`"W1, W5"`).
    pub rules: &'static str,
    /// The anchor of the first in docs/RULES.md (`"w1"`).
    pub anchor: &'static str,
    /// What the operator is called in the message (`"windowed
    /// aggregation"`).
    pub operator: &'static str,
    /// What is wrong.
    pub reason: &'static str,
}

/// A counter an operator reports through its deliveries' outcomes, as drivers publish
/// it: every task of a stage starts with each of its operators' counters
/// at 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counter {
    /// The published name (`window-records-late-total`).
    pub name: &'static str,
    /// What it counts, for a metrics endpoint's help text.
    pub help: &'static str,
}

/// Two topics an operator needs co-partitioned (C3), as the assembly
/// checks them: the follower must have the leader's partition count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoPartitioned {
    /// The topic whose count is expected.
    pub leader: TopicName,
    /// The topic that must have it.
    pub follower: TopicName,
    /// What the follower is to the operator, for the failure's message.
    pub role: String,
    /// How to mend it.
    pub fix: String,
}

impl CoPartitioned {
    /// Two join sides (J4): mended by a re-key of one into a topic with the
    /// other's count.
    pub fn join_sides(leader: &TopicName, follower: &TopicName, role: String) -> CoPartitioned {
        CoPartitioned {
            leader: leader.clone(),
            follower: follower.clone(),
            role,
            fix: format!(
                "give {follower} and {leader} the same partition count (and the same partitioner): re-key one of them into a topic with the other's count"
            ),
        }
    }
}
