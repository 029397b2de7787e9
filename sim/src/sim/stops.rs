//! Judging the run's stopped tasks, and naming the causes a report groups
//! violations by.
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
//! [`Input::rejected`]: crate::sim::Input::rejected
//! [`SimulationBuilder::expect_stop`]: crate::sim::SimulationBuilder::expect_stop

use std::collections::BTreeSet;
use std::sync::Arc;

use parsley::header::{self, STAMP_HEADER};
use parsley::Tp;

use crate::sim::checker::{Invariant, Violation};
use crate::sim::simulation::Stop;
use crate::sim::trace::Event;
use crate::sim::world::World;

/// The message prefix of a task stop the simulation did not expect.
pub const STOPPED: &str = "unexpected stop";
/// The message prefix of a task start the model refused.
pub const REFUSED: &str = "refused start";
/// The message prefix of a run that panicked (the harness, an input
/// generator or a property).
pub const PANICKED: &str = "the run panicked";
/// The message prefix of logic found not to be a pure function.
pub const IMPURE: &str = "S4 (logic is not a pure function)";

/// What a violation is about, finer than its invariant: the simulator's own
/// findings that share an invariant with the checker's are told apart, so
/// that shrinking keeps the cause and a report groups by it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Cause {
    /// A violation the checker or a property found.
    Rule(Invariant),
    /// One of the simulator's own findings: its message prefix.
    Harness(&'static str),
}

impl Cause {
    /// The cause of `violation`.
    pub fn of(violation: &Violation) -> Cause {
        for prefix in [STOPPED, REFUSED, PANICKED, IMPURE] {
            if violation.message.starts_with(prefix) {
                return Cause::Harness(prefix);
            }
        }
        Cause::Rule(violation.invariant)
    }
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cause::Rule(invariant) => write!(f, "{invariant}"),
            Cause::Harness(prefix) => f.write_str(prefix),
        }
    }
}

/// Whether any violation of `violations` has `cause`.
pub fn has_cause(violations: &[Violation], cause: &Cause) -> bool {
    violations
        .iter()
        .any(|violation| Cause::of(violation) == *cause)
}

/// The violations of the world's stopped tasks: each refused start, and each
/// stop (one per task and record) the simulation does not expect.
pub fn judge(world: &World) -> Vec<Violation> {
    let mut violations = Vec::new();
    let mut seen = BTreeSet::new();
    for (step, at, error) in &world.refused {
        if !seen.insert((Arc::clone(&at.task), Tp::new("-", 0), 0)) {
            continue;
        }
        let mut violation = Violation::new(
            Invariant::I8,
            *step,
            format!(
                "{REFUSED}: task {at} could not start, so its partition is never processed: {error}"
            ),
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
        if world
            .simulation
            .expected_stops()
            .iter()
            .any(|(_, expected)| expected(&stop))
        {
            continue;
        }
        let mut violation = Violation::new(
            Invariant::I8,
            entry.step,
            format!(
                "{STOPPED}: task {at} stopped on {tp}@{offset}, which no rejected input caused \
                 and no expect_stop declares: {error}"
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

#[cfg(test)]
mod tests {
    use super::*;

    /// I8, I9, S4: every message prefix a report groups violations by is
    /// defined in docs/RULES.md, under the invariant its violations cite.
    #[test]
    fn i8_i9_every_prefix_is_defined_in_the_rules() {
        let rules = include_str!("../../../docs/RULES.md");
        let section = |id: &str| {
            let start = rules
                .find(&format!("<a id=\"{id}\"></a>"))
                .unwrap_or_else(|| panic!("RULES.md has no {id}"));
            let rest = &rules[start + 1..];
            &rest[..rest.find("<a id=").unwrap_or(rest.len())]
        };
        for prefix in [STOPPED, REFUSED, PANICKED] {
            assert!(
                section("i8").contains(&format!("`{prefix}`")),
                "RULES.md#i8 does not name `{prefix}`"
            );
        }
        assert!(
            section("i9").contains(&format!("\"{IMPURE}\"")),
            "RULES.md#i9 does not name {IMPURE:?}"
        );
        assert!(section("s4").contains("pure logic"));
    }
}
