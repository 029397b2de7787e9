//! What the three join builders share when they build: the checks every
//! join's two sides and output must pass (J4, J5, J9), and the stage they
//! make. Each builder words its problems for its own kind of join.

use std::sync::Arc;

use crate::operator::{Operator, OperatorProblem};
use crate::stage::logic::StageLogic;
use crate::stage::{OperatorParts, Stage, StageHead, StageProblem};
use crate::topic::{Topic, TopicRef};

/// A join's problems, worded for its kind.
pub(super) struct Wording {
    /// The join's rule, its anchor in docs/RULES.md, and what the join is
    /// called in a message.
    pub(super) rule: (&'static str, &'static str, &'static str),
    /// One topic as both sides.
    pub(super) same_topic: &'static str,
    /// Sides whose keys are encoded by different codecs.
    pub(super) key_codecs: &'static str,
}

/// The problems of a join of `first` and `second` into `output`: no output,
/// one topic as both sides, keys in different codecs (so that a key's
/// bytes would not meet in one slot).
pub(super) fn problems<K: 'static, A: 'static, B: 'static, O: 'static>(
    wording: &Wording,
    first: &Topic<K, A>,
    second: &Topic<K, B>,
    output: Option<&Topic<K, O>>,
) -> Vec<StageProblem> {
    let mut problems = Vec::new();
    if output.is_none() {
        problems.push(wording.problem("no output topic (declare one with `into`)"));
    }
    if first.name() == second.name() {
        problems.push(wording.problem(wording.same_topic));
    }
    if !first.same_key_codec(second) {
        problems.push(wording.problem(wording.key_codecs));
    }
    problems
}

impl Wording {
    /// The join's problem `reason`, with its rule.
    pub(super) fn problem(&self, reason: &'static str) -> StageProblem {
        let (rules, anchor, operator) = self.rule;
        StageProblem::Operator(OperatorProblem {
            rules,
            anchor,
            operator,
            reason,
        })
    }
}

/// What a join's stage is made of besides its declaration and its head.
pub(super) struct JoinStage<K, A, B, O> {
    pub(super) first: Topic<K, A>,
    pub(super) second: Topic<K, B>,
    pub(super) output: Option<Topic<K, O>>,
}

impl<K: 'static, A: 'static, B: 'static, O: 'static> JoinStage<K, A, B, O> {
    /// The stage: stateful (its rows or held records are its state), its
    /// two sides as sources 0 and 1, its output as its one sink.
    pub(super) fn stage(
        self,
        head: StageHead,
        declared: Arc<dyn Operator>,
        logic: Arc<dyn StageLogic>,
        problems: Vec<StageProblem>,
    ) -> Stage {
        head.stage(OperatorParts {
            sources: vec![TopicRef::from(&self.first), TopicRef::from(&self.second)],
            sinks: self.output.iter().map(TopicRef::from).collect(),
            ticks: None,
            operator: declared,
            logic,
            problems,
        })
    }
}
