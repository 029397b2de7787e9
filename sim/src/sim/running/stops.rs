//! Judging the run's stopped tasks.
//!
//! A task that stops has stopped processing its partition for good: Parsley
//! stops a task on input it cannot use or on logic that fails (X5, bad
//! input), rather than guessing. In a simulation only some stops are
//! expected: those on a record of an [`Input::rejected`] generator (the
//! logic-error fault's record) or on a record it caused downstream, and
//! those the user declared with [`SimulationBuilder::expect_stop`]. Every
//! other stop is a violation naming the task, the record and the error; so
//! is a task start the model refused.
//!
//! Until the checker has a kind of its own for them, these are violations of
//! I8 (liveness: a stopped task never makes progress again), told apart by
//! the prefix of their message ([`Cause`]).
//!
//! [`Cause`]: crate::sim::report::cause::Cause
//!
//! [`Input::rejected`]: crate::sim::Input::rejected
//! [`SimulationBuilder::expect_stop`]: crate::sim::SimulationBuilder::expect_stop

use std::collections::BTreeSet;
use std::sync::Arc;

use parsley::header::{self, STAMP_HEADER};
use parsley::Tp;

use crate::sim::checker::{Finding, Invariant, Violation};
use crate::sim::running::simulation::{ExpectedStop, Stop};
use crate::sim::world::trace::Event;
use crate::sim::world::World;

/// The violations of the world's stopped tasks: each refused start, and each
/// stop (one per task and record) that no rejected input caused and none of
/// `expected` (the simulation's `expect_stop`s) accepts.
pub(crate) fn judge(world: &World, expected: &[(String, ExpectedStop)]) -> Vec<Violation> {
    let mut violations = Vec::new();
    let mut seen = BTreeSet::new();
    for (step, at, error) in &world.refused {
        if !seen.insert((Arc::clone(&at.task), Tp::new("-", 0), 0)) {
            continue;
        }
        let mut violation = Violation::found(
            Finding::RefusedStart,
            Invariant::I8,
            *step,
            &format!("task {at} could not start, so its partition is never processed: {error}"),
        );
        violation.task = Some(Arc::clone(&at.task));
        violation.instance = Some(at.instance);
        violations.push(violation);
    }
    for entry in &world.trace {
        let Event::TaskStopped {
            at,
            tp,
            offset,
            error,
        } = &entry.event
        else {
            continue;
        };
        if !seen.insert((Arc::clone(&at.task), tp.clone(), *offset)) {
            continue;
        }
        if caused_by_rejected(world, tp, *offset) {
            continue;
        }
        let stop = Stop {
            stage: at.task.stage.as_ref(),
            partition: at.task.partition,
            tp,
            offset: *offset,
            error,
        };
        if expected.iter().any(|(_, expected)| expected(&stop)) {
            continue;
        }
        let mut violation = Violation::found(
            Finding::UnexpectedStop,
            Invariant::I8,
            entry.step,
            &format!(
                "task {at} stopped on {tp}@{offset}, which no rejected input caused and no \
                 expect_stop declares: {error}"
            ),
        );
        violation.task = Some(Arc::clone(&at.task));
        violation.instance = Some(at.instance);
        violation.record = Some((tp.clone(), *offset));
        violations.push(violation);
    }
    violations
}

/// Whether the record at `offset` of `tp` is one the logic-error fault
/// produced, or claims one exactly (it was written while one was delivered).
fn caused_by_rejected(world: &World, tp: &Tp, offset: u64) -> bool {
    if world.rejected.is_empty() {
        return false;
    }
    if world
        .rejected
        .iter()
        .any(|(rejected, at)| rejected == tp && *at == offset)
    {
        return true;
    }
    let Some(stamp) = world
        .cluster
        .log(tp)
        .ok()
        .and_then(|log| log.record(offset))
        .and_then(|record| record.header(STAMP_HEADER))
        .and_then(|bytes| header::decode(bytes).ok())
    else {
        return false;
    };
    world
        .rejected
        .iter()
        .any(|(rejected, at)| stamp.offset(rejected) == Some(*at))
}
