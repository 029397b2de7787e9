//! One grammar for every operator's stage: name first, then the operator,
//! then its logic, then the setters every operator shares, written once
//! here.
//!
//! ```text
//! Stage::named("revenue")                       // the stage's name (C1)
//!     .windowed(Windows::tumbling(minute))      // the operator (its folder adds the entry)
//!     .aggregate(&sales, I64, || 0, add)        // its logic: an OperatorBuilder<_>
//!     .into(&revenue)                           // the setters below, shared
//!     .build();
//! ```
//!
//! Each operator's folder adds its entry to [`StageBuilder<Stateless>`]
//! (`windowed`, `join`, `expiring`, `timer_service`) and implements
//! [`Declaration`] for what its logic step returns; this module names no
//! operator.

use std::sync::Arc;
use std::time::Duration;

use crate::operator::{Operator, OperatorProblem};
use crate::stage::logic::StageLogic;
use crate::stage::{Stage, StageBuilder, StageDef, StageProblem, Stateless, TickDecl};
use crate::topic::{Sinks, Topic, TopicRef};

/// What a stage declared before its operator carries into it: its name
/// and the setters shared by every stage. Made by an operator's entry
/// method; not something a user builds.
#[derive(Debug)]
pub struct StageHead {
    pub(crate) name: String,
    pub(crate) dead_letter: bool,
    pub(crate) timestamp_sync: Option<Duration>,
    pub(crate) problems: Vec<StageProblem>,
    /// Re-keys of the operator's output (R3), applied when it is built.
    pub(crate) rekeys: Vec<crate::rekey::PendingRekey>,
}

impl StageBuilder<Stateless> {
    /// The head of an operator's stage: its name and dead-letter opt-in. An
    /// operator's stage takes its sources, sinks and ticks from its
    /// operator, so any declared before it is a problem (S1).
    pub(crate) fn head(self) -> StageHead {
        let mut problems = self.problems;
        if !self.sources.is_empty() || !self.sinks.is_empty() || self.tick.is_some() {
            problems.push(StageProblem::Operator(OperatorProblem {
                rules: "S1",
                anchor: "s1",
                operator: "stage",
                reason: "sources, sinks or ticks before its operator (an operator's stage takes them from the operator: declare the operator right after `Stage::named`)",
            }));
        }
        StageHead {
            name: self.name,
            dead_letter: self.dead_letter,
            timestamp_sync: self.timestamp_sync,
            problems,
            rekeys: self.rekeys,
        }
    }

    /// The head, with the operator `spec` chosen: what an operator's entry
    /// method (`windowed`, `join`, `expiring`, …) returns.
    pub(crate) fn choose<T>(self, spec: T) -> Declaring<T> {
        Declaring {
            head: self.head(),
            spec,
        }
    }
}

/// A stage named, its operator chosen (`Stage::named(..).windowed(..)`,
/// `.join(..)`, `.expiring(..)`), before the operator's logic: the
/// operator's folder gives it the method that takes the logic
/// (`aggregate`, `inner`, `left`, `outer`, `fold`).
#[derive(Debug)]
pub struct Declaring<T> {
    pub(crate) head: StageHead,
    pub(crate) spec: T,
}

impl<T> Declaring<T> {
    /// The operator's builder for `declaration`, its logic given.
    pub(crate) fn with<D: Declaration>(self, declaration: D) -> OperatorBuilder<D> {
        OperatorBuilder::new(self.head, declaration)
    }
}

/// What an operator's logic step returns, and what its stage is built from
/// ([`OperatorBuilder`]). Implemented by each of Parsley's operators.
pub trait Declaration: Sized {
    /// What [`OperatorBuilder::into`] takes (a typed topic, or any sinks).
    type Output;
    /// What [`OperatorBuilder::build`] returns: the stage, or a foreign-key
    /// join's stages.
    type Built;

    /// Builds the operator's stage from the head's shared settings and the
    /// output declared with `into`.
    #[doc(hidden)]
    fn declare(self, head: StageHead, output: Option<Self::Output>) -> Self::Built;
}

/// An operator whose stage reads two sources and may merge them by their
/// timestamps (G9): the joins.
pub trait TwoSided: Declaration {}

/// How a value given to [`OperatorBuilder::into`] becomes the operator's
/// output: a typed topic for an operator that writes one topic of its
/// types, any [`Sinks`] for one whose logic writes where it likes.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not this operator's output: `into` takes `&{O}`",
    label = "not this operator's output",
    note = "a window writes `Topic<Windowed<K>, A>`, a join `Topic<K, R>` of its joiner's result, an expiring fold any sinks; a timer service writes its fires and takes no `into`"
)]
pub trait IntoOutput<O> {
    /// Adds `self` to the declared `output`.
    fn add_to(self, output: &mut Option<O>);
}

impl<K, V> IntoOutput<Topic<K, V>> for &Topic<K, V> {
    fn add_to(self, output: &mut Option<Topic<K, V>>) {
        *output = Some(self.clone());
    }
}

impl<S: Sinks> IntoOutput<Vec<TopicRef>> for S {
    fn add_to(self, output: &mut Option<Vec<TopicRef>>) {
        output
            .get_or_insert_with(Vec::new)
            .extend(self.declarations());
    }
}

/// An operator's stage being declared, its logic given: the setters every
/// operator shares, then `build`. The operator's own setters (a window's
/// `emit`, a versioned join's `grace`, …) are in its folder's docs.
pub struct OperatorBuilder<D: Declaration> {
    head: StageHead,
    output: Option<D::Output>,
    pub(crate) declaration: D,
}

impl<D: Declaration> OperatorBuilder<D> {
    fn new(head: StageHead, declaration: D) -> Self {
        OperatorBuilder {
            head,
            output: None,
            declaration,
        }
    }

    /// The topic the operator writes its results to (required for windows
    /// and joins), or, for an operator whose logic emits, the topics it
    /// emits to (S3).
    pub fn into(mut self, output: impl IntoOutput<D::Output>) -> Self {
        output.add_to(&mut self.output);
        self
    }

    /// X5's opt-in: records the operator refuses (no key, a value a codec
    /// refuses, failing logic) go to `<application.id>-<name>-dlq` instead
    /// of stopping the task.
    pub fn dead_letter_queue(mut self) -> Self {
        self.head.dead_letter = true;
        self
    }

    /// R3: each record the operator writes to `output` is written again,
    /// in the same step, value unchanged, under the key `select` returns
    /// for its key and value (or `Result<K2, E>`; an error refuses the
    /// delivery, X5), to `repartition`, the re-key's derived topic
    /// ([`Topic::repartition`]). See
    /// [`StageBuilder::rekey_output`](crate::StageBuilder::rekey_output).
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
        R: crate::stage::logic::Fallible<K2>,
    {
        self.head
            .rekeys
            .push(crate::rekey::pending(output, repartition, select));
        self
    }

    /// Finishes the declaration. A declaration that cannot be (a missing
    /// output, a window of size zero, …) is reported by the application's
    /// `build`, with its rule.
    pub fn build(self) -> D::Built {
        self.declaration.declare(self.head, self.output)
    }
}

impl<D: TwoSided> OperatorBuilder<D> {
    /// G9: the join's task merges its two sources' partitions by their
    /// heads' timestamps, waiting for records known to be in a source's
    /// log and up to `max_idle` for a caught-up source to get more (Kafka
    /// Streams' `max.task.idle.ms`). See
    /// [`StageBuilder::synchronise_by_timestamp`] for what it promises and
    /// what it does not.
    pub fn synchronise_by_timestamp(mut self, max_idle: Duration) -> Self {
        self.head.timestamp_sync = Some(max_idle);
        self
    }
}

/// What an operator makes its stage of, besides the head.
pub(crate) struct OperatorParts {
    pub(crate) sources: Vec<TopicRef>,
    pub(crate) sinks: Vec<TopicRef>,
    pub(crate) ticks: Option<TickDecl>,
    pub(crate) operator: Arc<dyn Operator>,
    pub(crate) logic: Arc<dyn StageLogic>,
    pub(crate) problems: Vec<StageProblem>,
}

impl StageHead {
    /// The operator's stage: stateful (the operator's slots are its state),
    /// with the head's name and shared settings.
    pub(crate) fn stage(self, parts: OperatorParts) -> Stage {
        self.assemble(parts, true)
    }

    /// The operator's stage, for an operator that keeps no state (a
    /// re-key stage).
    pub(crate) fn stateless_stage(self, parts: OperatorParts) -> Stage {
        self.assemble(parts, false)
    }

    fn assemble(self, parts: OperatorParts, stateful: bool) -> Stage {
        let mut problems = self.problems;
        problems.extend(parts.problems);
        let stage = Stage {
            def: Arc::new(StageDef {
                name: self.name,
                sources: parts.sources,
                sinks: parts.sinks,
                ticks: parts.ticks,
                stateful,
                dead_letter: self.dead_letter,
                operators: vec![parts.operator],
                timestamp_sync: self.timestamp_sync,
                consistent: None,
                logic: parts.logic,
                problems,
            }),
        };
        crate::rekey::apply(self.rekeys, stage)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::{CompositionError, Expiring, Join, Parsley, Stage, Step, Topic, Windows};

    fn orders() -> Topic<String, i64> {
        Topic::new("orders")
    }

    /// S1: an operator's stage takes its sources from the operator; one
    /// declared after sources of the stage's own is refused, naming S1.
    #[test]
    fn s1_an_operator_after_the_stages_own_sources_is_refused() {
        let out: Topic<String, i64> = Topic::new("out");
        let stage = Stage::named("late-operator")
            .on(&orders(), |_order| Vec::new())
            .expiring(Expiring::after(Duration::from_secs(1)))
            .fold(
                &orders(),
                crate::Json,
                || 0i64,
                |count, _order| Step::of(count + 1),
            )
            .into(&out)
            .build();
        let error = Parsley::named("shop").stage(stage).build().unwrap_err();
        assert!(
            matches!(
                &error,
                CompositionError::ImpossibleOperator { rules: "S1", .. }
            ),
            "{error}"
        );
        assert!(error.to_string().contains("before its operator"), "{error}");
    }

    /// The shared setters: a dead-letter queue declared on the head or on
    /// the operator's builder is the stage's; a join's timestamp
    /// synchronisation is the stage's (G9).
    #[test]
    fn the_shared_setters_reach_the_stage_from_either_side_of_the_operator() {
        let totals = Topic::with_codecs("totals", crate::WindowedCodec(crate::Utf8), crate::I64);
        let before = Stage::named("before")
            .dead_letter_queue()
            .windowed(Windows::tumbling(Duration::from_secs(1)))
            .aggregate(
                &orders(),
                crate::I64,
                || 0i64,
                |total, order| total + order.value(),
            )
            .into(&totals)
            .build();
        assert!(before.has_dead_letter_queue());
        let discounts: Topic<String, i64> = Topic::new("discounts");
        let priced: Topic<String, i64> = Topic::new("priced");
        let after = Stage::named("after")
            .join(Join::stream_table(&orders(), &discounts))
            .inner(|order, discount: &i64| order.value() - discount)
            .into(&priced)
            .dead_letter_queue()
            .synchronise_by_timestamp(Duration::from_millis(5))
            .build();
        assert!(after.has_dead_letter_queue());
        assert_eq!(after.timestamp_sync(), Some(Duration::from_millis(5)));
        assert_eq!(after.sinks().len(), 1);
        assert!(Parsley::named("shop")
            .stage(before)
            .stage(after)
            .build()
            .is_ok());
    }
}
