//! S4, told apart from a broken rule. When the fold of a committed history
//! disagrees with what was committed (I6, I7, I10), either Parsley broke
//! the rule or the logic is not a pure function of its state and record.
//! The checker calls the logic again on the same state and record: a
//! second time in the checking application, once in the run's own
//! application, and once in a fresh one when the simulation has a factory
//! (`Simulation::builder_fn`). Pure logic answers the same every time; two
//! different answers prove that the logic keeps state outside Parsley, and
//! the finding is named S4 outright instead of the rule it seemed to break.

use parsley::TaskId;
use parsley::{ReplayError, Replayed};

use super::reconstruction::Delivery;
use super::state::{Call, Slots};
use super::{Checker, Finding, Invariant};

/// How many disagreeing deliveries of one check are called again: enough
/// to name S4 at the first of them, bounded so a broken rule on every
/// delivery does not rebuild an application per delivery.
const PROBES: usize = 8;

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
        if self.probes >= PROBES {
            return;
        }
        self.probes += 1;
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
