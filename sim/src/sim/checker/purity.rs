//! S4, told apart from a broken rule. When the fold of a committed history
//! disagrees with what was committed (I6, I7, I10), either Parsley broke
//! the rule or the logic is not a pure function of its state and record.
//! The checker calls the logic again on the same state and record: a
//! second time in the checking application, once in the run's own
//! application, and once in a fresh one when the simulation has a factory
//! (`Simulation::builder_fn`). Pure logic answers the same every time; two
//! different answers prove that the logic keeps state outside Parsley, and
//! the finding is named S4 outright instead of the rule it seemed to break.
//!
//! The operator oracles (I12, I13, I14) compute what a delivery should
//! write with the user's logic only (a fold, a merge, a joiner); each notes
//! those calls ([`UserCalls`]) and, when the delivery disagrees, the same
//! re-call makes them again ([`Checker::name_impure_operator_logic`]).

use bytes::Bytes;
use parsley::bytes_for_humans;
use parsley::ConsumedRecord;
use parsley::StagePlan;
use parsley::TaskId;
use parsley::Tp;
use parsley::{ReplayError, Replayed};

use super::reconstruction::Delivery;
use super::state::{Call, Slots};
use super::{Checker, Finding, Invariant};

/// How many disagreeing deliveries of one check are called again: enough
/// to name S4 at the first of them, bounded so a broken rule on every
/// delivery does not rebuild an application per delivery.
const RECALLS: usize = 8;

impl Checker<'_> {
    /// The violations from `found` on were found on `delivery`, whose call
    /// of the logic in the checking application gave `first`. Calls it
    /// again; if any answer differs, those violations become one S4
    /// violation that quotes them.
    pub(super) fn name_impure_logic(
        &mut self,
        task: &TaskId,
        call: &Call<'_>,
        slots: &Slots,
        delivery: &Delivery<'_>,
        first: &Result<Replayed, ReplayError>,
        found: usize,
    ) {
        if self.recalls >= RECALLS {
            return;
        }
        self.recalls += 1;
        let input = self.input;
        let again = |app: &parsley::App| {
            app.stage(&task.stage)
                .map(|plan| call.replay(&plan.stage, slots, delivery.tp))
        };
        let mut answers: Vec<(&str, Result<Replayed, ReplayError>)> = Vec::new();
        if let Some(answer) = again(input.app) {
            answers.push(("called a second time in the checking application", answer));
        }
        if let Some(answer) = again(input.run_app) {
            answers.push(("called in the run's own application, after the run", answer));
        }
        if let Some(answer) = input.fresh_app.and_then(|fresh| again(&fresh())) {
            answers.push((
                "called in a fresh application from the simulation's factory",
                answer,
            ));
        }
        let Some((how, other)) = answers
            .into_iter()
            .find(|(_, answer)| !same_answer(first, answer))
        else {
            return;
        };
        let seemed: Vec<String> = self
            .violations
            .drain(found..)
            .map(|violation| format!("{}: {}", violation.invariant, violation.message))
            .collect();
        let violation = self
            .violation(
                Invariant::I9,
                delivery.step,
                format!(
                    "{}: task {task}: the logic of stage `{}`, given the same state and the \
                 same {} ({}@{}), answered {} when the checker called it, but {} when {how}: it \
                 keeps state outside Parsley (captured by its closures or in statics), so what \
                 it committed depends on calls before it and cannot be replayed \
                 (docs/RULES.md#s4). What it committed therefore disagrees with a replay: {}",
                    Finding::Impure.prefix(),
                    task.stage,
                    match call {
                        Call::Record(_) => "record",
                        Call::Tick(_) => "tick",
                    },
                    delivery.tp,
                    delivery.offset,
                    describe(first),
                    describe(&other),
                    seemed.join("; ")
                ),
            )
            .on(delivery.at)
            .about(delivery.tp, delivery.offset);
        violation.finding = Some(Finding::Impure);
    }
}

/// Whether two calls of the logic gave the same answer: the same slot
/// changes and emissions, or the same failure.
fn same_answer(a: &Result<Replayed, ReplayError>, b: &Result<Replayed, ReplayError>) -> bool {
    match (a, b) {
        (Ok(a), Ok(b)) => a == b,
        (Err(a), Err(b)) => a.to_string() == b.to_string(),
        _ => false,
    }
}

/// An answer as the report tells it: what it emits, or how it fails.
fn describe(answer: &Result<Replayed, ReplayError>) -> String {
    match answer {
        Ok(replayed) => format!(
            "emissions [{}] with its slot {:?}",
            replayed
                .emissions
                .iter()
                .map(|emission| format!("{emission:?}"))
                .collect::<Vec<_>>()
                .join(", "),
            replayed.slot
        ),
        Err(error) => format!("a failure ({error})"),
    }
}

/// What a call of the user's logic answered, as the S4 re-call of the
/// operator oracles (I12–I14) compares it: the bytes it made (an
/// aggregate, a state, an output record's key and value, emissions'
/// keys and values), or how it refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Answer {
    Made(Vec<Option<Bytes>>),
    Refused(String),
}

impl Answer {
    /// The answer of a call that made `parts`, or refused.
    pub(super) fn of<T>(
        result: &Result<T, ReplayError>,
        parts: impl FnOnce(&T) -> Vec<Option<Bytes>>,
    ) -> Answer {
        match result {
            Ok(made) => Answer::Made(parts(made)),
            Err(error) => Answer::Refused(error.to_string()),
        }
    }

    /// The answer of a call that made one value.
    pub(super) fn bytes(result: &Result<Bytes, ReplayError>) -> Answer {
        Answer::of(result, |bytes| vec![Some(bytes.clone())])
    }

    fn told(&self) -> String {
        match self {
            Answer::Made(parts) => format!(
                "[{}]",
                parts
                    .iter()
                    .map(|part| part
                        .as_ref()
                        .map_or("null".to_string(), |bytes| bytes_for_humans(bytes)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Answer::Refused(error) => format!("a refusal ({error})"),
        }
    }
}

/// A call made again: with the logic of a stage, on the delivery's tp and
/// record; `None` when the stage is not the operator's.
type Again<'c> = Box<dyn Fn(&StagePlan, &Tp, &ConsumedRecord) -> Option<Answer> + 'c>;

/// The calls of the user's logic an operator oracle made to compute what
/// one delivery should write, each with its answer: what its S4 re-call
/// makes again when the delivery disagrees with the oracle.
#[derive(Default)]
pub(super) struct UserCalls<'c> {
    calls: Vec<(&'static str, Answer, Again<'c>)>,
}

impl<'c> UserCalls<'c> {
    /// Notes a call of `what` (the user's fold, merge, joiner…) that
    /// answered `answer`, and how to make it again.
    pub(super) fn note(
        &mut self,
        what: &'static str,
        answer: Answer,
        again: impl Fn(&StagePlan, &Tp, &ConsumedRecord) -> Option<Answer> + 'c,
    ) {
        self.calls.push((what, answer, Box::new(again)));
    }
}

impl Checker<'_> {
    /// The violations from `found` on were found by an operator oracle on
    /// `delivery` of `record`, from what `calls` answered. Makes each call
    /// again, as [`Checker::name_impure_logic`] does for a stage's own
    /// logic: a second time in the checking application, in the run's own
    /// and in a fresh one; if any answer differs, those violations become
    /// one S4 violation that quotes them, so that the report blames the
    /// user's logic and not the operator.
    pub(super) fn name_impure_operator_logic(
        &mut self,
        task: &TaskId,
        delivery: &Delivery<'_>,
        record: &ConsumedRecord,
        calls: &UserCalls<'_>,
        found: usize,
    ) {
        if self.operator_recalls >= RECALLS
            || calls.calls.is_empty()
            || self.violations.len() <= found
        {
            return;
        }
        self.operator_recalls += 1;
        let input = self.input;
        let differing = |app: &parsley::App| {
            let plan = app.stage(&task.stage)?;
            calls.calls.iter().find_map(|(what, first, again)| {
                let answer = again(plan, delivery.tp, record)?;
                (answer != *first).then(|| (*what, first.told(), answer.told()))
            })
        };
        let mut found_impure = differing(input.app)
            .map(|told| (told, "called a second time in the checking application"));
        if found_impure.is_none() {
            found_impure = differing(input.run_app)
                .map(|told| (told, "called in the run's own application, after the run"));
        }
        if found_impure.is_none() {
            found_impure = input.fresh_app.and_then(|fresh| {
                differing(&fresh()).map(|told| {
                    (
                        told,
                        "called in a fresh application from the simulation's factory",
                    )
                })
            });
        }
        let Some(((what, first, other), how)) = found_impure else {
            return;
        };
        let seemed: Vec<String> = self
            .violations
            .drain(found..)
            .map(|violation| format!("{}: {}", violation.invariant, violation.message))
            .collect();
        let violation = self
            .violation(
                Invariant::I9,
                delivery.step,
                format!(
                    "{}: task {task}: the user's {what} of stage `{}`, given the same input \
                 and the same record ({}@{}), answered {first} when the checker called it, but \
                 {other} when {how}: it keeps state outside Parsley (captured by its closures \
                 or in statics), so what it committed depends on calls before it and cannot \
                 be replayed (docs/RULES.md#s4). What it committed therefore disagrees with \
                 the operator's rules as the checker computes them: {}",
                    Finding::Impure.prefix(),
                    task.stage,
                    delivery.tp,
                    delivery.offset,
                    seemed.join("; ")
                ),
            )
            .on(delivery.at)
            .about(delivery.tp, delivery.offset);
        violation.finding = Some(Finding::Impure);
    }
}
