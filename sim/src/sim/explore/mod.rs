//! The bounded exhaustive mode: every schedule of a tiny run, depth first,
//! pruned by the world's state ([`Simulation::explore`]).
//!
//! A run draws every decision from its [`Choices`](crate::sim::Choices).
//! Guided by an explorer, each draw is a choice point of a few
//! alternatives (`world::choice::Guide`): the explorer replays a prefix of
//! them, takes the first alternative at every later point, and backtracks
//! to the deepest point with one left (`search`), as shuttle's and loom's
//! DFS do. At the start of every step past the prefix it hashes the
//! world's state (`states`); a state seen before with as many steps and
//! faults left is not explored again, so schedules that only interleave
//! independent work meet and are explored once. Every schedule that is
//! not cut runs its liveness phase and the checker like any run; the first
//! that violates an invariant ends the exploration, with its tape.
//!
//! The top wing of the simulator: it runs simulations (`running`), and
//! nothing below imports it.

use std::fmt;
use std::time::Duration;

use crate::sim::report::outcome::RunOutcome;
use crate::sim::running::simulation::Simulation;

mod bounds;
mod search;
mod states;

pub use bounds::{Bounds, FaultKind};

/// What an exploration found ([`Simulation::explore`]).
pub struct Exploration {
    /// The bound explored.
    pub bounds: Bounds,
    /// Schedules run to their end and checked.
    pub schedules: u64,
    /// Schedules cut at a state explored before.
    pub cut: u64,
    /// Distinct states met at the start of a step (with their faults left).
    pub states: u64,
    /// Whether every schedule within the bound was explored: false when a
    /// violation ended the search, or [`Bounds::runs_max`] did.
    pub exhausted: bool,
    /// The first violating run, in depth-first order: its tape
    /// ([`RunOutcome::tape`]) replays it on [`Exploration::simulation`].
    pub violation: Option<RunOutcome>,
    /// How long it took.
    pub elapsed: Duration,
    /// The simulation as explored: the original one with the bound's
    /// knobs, on which [`Simulation::run_tape`] replays a violation's tape.
    pub simulation: Simulation,
}

impl Exploration {
    /// Whether the whole bound was explored and no schedule violated an
    /// invariant.
    pub fn clean(&self) -> bool {
        self.exhausted && self.violation.is_none()
    }
}

impl fmt::Debug for Exploration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Exploration")
            .field("bounds", &self.bounds)
            .field("schedules", &self.schedules)
            .field("cut", &self.cut)
            .field("states", &self.states)
            .field("exhausted", &self.exhausted)
            .field(
                "violation",
                &self.violation.as_ref().map(|run| &run.violations),
            )
            .finish_non_exhaustive()
    }
}

impl fmt::Display for Exploration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let counts = format!(
            "{} schedules, {} distinct states; {} more cut at a state seen before; {:.1} s",
            self.schedules,
            self.states,
            self.cut,
            self.elapsed.as_secs_f64()
        );
        match &self.violation {
            Some(outcome) => {
                let first = outcome
                    .violations
                    .first()
                    .map_or_else(String::new, ToString::to_string);
                write!(
                    f,
                    "a violation within the bound ({}), after {counts}: {first}",
                    self.bounds
                )
            }
            None if self.exhausted => write!(
                f,
                "no violation within the bound ({}): {counts}",
                self.bounds
            ),
            None => write!(
                f,
                "no violation in the schedules explored, but the bound ({}) was not exhausted: \
                 the cap of {} runs was reached ({counts})",
                self.bounds, self.bounds.runs_max
            ),
        }
    }
}

impl Simulation {
    /// Explores every schedule of this simulation within `bounds` (the
    /// bounded exhaustive mode): every order of the actions the world can
    /// take, every fault of the allowed kinds up to the budget, every
    /// landing of the clock on a pending deadline, each input drawn every
    /// way its key and partition can go, pruned by hashing the world's
    /// state. Ends at the first violating schedule, or with "no violation
    /// within the bound (K schedules, S distinct states)". Runs on this
    /// thread, with the simulation's planted bug. DESIGN.md, "Bounded
    /// exhaustive mode", says what it does and does not promise.
    pub fn explore(&self, bounds: &Bounds) -> Exploration {
        search::explore(&self.within(bounds), bounds)
    }

    /// This simulation with the knobs of `bounds`' tiny world, as
    /// [`Simulation::explore`] runs it: a violation's tape replays on it
    /// ([`Simulation::run_tape`]).
    pub fn within(&self, bounds: &Bounds) -> Simulation {
        self.with_settings(bounds.settings(self.settings()))
    }
}
