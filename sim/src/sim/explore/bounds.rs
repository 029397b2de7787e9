//! The bound an exploration covers, and the tiny world it makes of a
//! simulation's knobs.

use std::fmt;

use crate::sim::world::settings::{
    Budget, FaultRates, OrderStrategy, Settings, StepRange, Workload,
};

/// A fault the bounded exhaustive mode may place, each spending one of
/// [`Bounds::faults`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FaultKind {
    /// A task's transaction aborted.
    Abort,
    /// A commit that fails, and so aborts.
    CommitFailure,
    /// An instance crashed (it restarts by a later step, or in the
    /// liveness phase).
    Crash,
    /// A task moved to another instance (needs two instances): the old
    /// host runs on as a zombie until fenced.
    Move,
    /// An input transaction left hanging until the broker's timeout.
    Hanging,
    /// One input record its logic refuses (X5).
    LogicError,
}

impl FaultKind {
    /// Every kind, in the order the command line names them.
    pub const ALL: [FaultKind; 6] = [
        FaultKind::Abort,
        FaultKind::CommitFailure,
        FaultKind::Crash,
        FaultKind::Move,
        FaultKind::Hanging,
        FaultKind::LogicError,
    ];

    /// The name on the command line (`--fault-kinds abort,crash`).
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Abort => "abort",
            FaultKind::CommitFailure => "commit-failure",
            FaultKind::Crash => "crash",
            FaultKind::Move => "move",
            FaultKind::Hanging => "hanging",
            FaultKind::LogicError => "logic-error",
        }
    }

    /// The kind a name means.
    pub fn from_name(name: &str) -> Option<FaultKind> {
        FaultKind::ALL.into_iter().find(|kind| kind.name() == name)
    }
}

/// The bound of a bounded exhaustive exploration
/// ([`Simulation::explore`](crate::sim::Simulation::explore)): every
/// schedule of at most [`inputs`](Bounds::inputs) inputs over
/// [`partitions`](Bounds::partitions) partitions, with at most
/// [`faults`](Bounds::faults) faults of the [`kinds`](Bounds::kinds)
/// allowed, within [`steps`](Bounds::steps) steps of the safety phase;
/// then the liveness phase and the checker, as in every run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// Input records produced (the liveness phase produces those the
    /// safety phase did not reach).
    pub inputs: u64,
    /// Partitions of every topic.
    pub partitions: u32,
    /// Application instances.
    pub instances: u32,
    /// Distinct keys the inputs draw from.
    pub keys: u32,
    /// Faults a schedule may take, in all.
    pub faults: u32,
    /// Which faults.
    pub kinds: Vec<FaultKind>,
    /// Steps of the safety phase: actions, faults and clock advances.
    pub steps: u64,
    /// Whether a drawn range (a clock step, an input's value, a marker's
    /// lag) is explored at both ends; otherwise at its low end only.
    /// Boundary-seeking time still lands the clock on every pending
    /// deadline and the millisecond either side.
    pub range_ends: bool,
    /// Whether input batches may be written in an input transaction.
    pub transactional: bool,
    /// Whether a transaction's markers may be written late.
    pub marker_lag: bool,
    /// A cap on the runs (schedules run to their end, and schedules cut at
    /// a state seen before): an exploration that reaches it ends without
    /// a verdict on the whole bound, and says so.
    pub runs_max: u64,
    /// The order of the search. `None`: simplest first at every choice
    /// point (the first schedule is the simplest, and the search varies
    /// the deepest points first). `Some(seed)`: randomised depth-first
    /// search, each point's alternatives rotated by a hash of the seed and
    /// the path to it. Both take every alternative of every point, so an
    /// exhausted bound means the same; the shuffled order changes which
    /// schedule comes first (another path to a violation, sometimes in
    /// far fewer runs), not how big the search is: it too backtracks
    /// deepest first.
    pub shuffle: Option<u64>,
}

impl Default for Bounds {
    /// Two inputs on one partition and one instance, one abort or crash,
    /// twelve steps, at most a million runs.
    fn default() -> Self {
        Bounds {
            inputs: 2,
            partitions: 1,
            instances: 1,
            keys: 1,
            faults: 1,
            kinds: vec![FaultKind::Abort, FaultKind::Crash],
            steps: 12,
            range_ends: false,
            transactional: false,
            marker_lag: false,
            runs_max: 1_000_000,
            shuffle: None,
        }
    }
}

impl Bounds {
    /// The knobs of the tiny world: `base`'s clock (its time strategy, tick
    /// and commit intervals, transaction timeout) and liveness budget, the
    /// bound's sizes and faults, no swarm, whole fetches, no PCT.
    pub(crate) fn settings(&self, base: &Settings) -> Settings {
        let on = |kind: FaultKind| {
            if self.kinds.contains(&kind) {
                0.01
            } else {
                0.0
            }
        };
        Settings {
            partitions: self.partitions,
            instances: self.instances,
            workload: Workload {
                inputs: self.inputs,
                keys: self.keys,
                transactional: if self.transactional { 0.5 } else { 0.0 },
            },
            clock: base.clock,
            faults: FaultRates {
                swarm: false,
                abort: on(FaultKind::Abort),
                commit_failure: on(FaultKind::CommitFailure),
                crash: on(FaultKind::Crash),
                move_task: on(FaultKind::Move),
                hanging_transaction: on(FaultKind::Hanging),
                logic_error: on(FaultKind::LogicError),
                partial_fetch: 0.0,
                empty_fetch: 0.0,
                marker_lag: if self.marker_lag { 0.5 } else { 0.0 },
                marker_lag_ms: StepRange {
                    min: base.faults.marker_lag_ms.min,
                    max: base.faults.marker_lag_ms.max,
                },
            },
            budget: Budget {
                safety_steps: self.steps,
                liveness_steps: base.budget.liveness_steps,
            },
            order: OrderStrategy::Random,
            local_disk: base.local_disk,
            queries: base.queries,
        }
    }
}

impl fmt::Display for Bounds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plural =
            |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        let kinds: Vec<&str> = self.kinds.iter().map(|kind| kind.name()).collect();
        write!(
            f,
            "{} over {} ({}, {}), {} ({}), {}",
            plural(self.inputs, "input", "inputs"),
            plural(u64::from(self.partitions), "partition", "partitions"),
            plural(u64::from(self.instances), "instance", "instances"),
            plural(u64::from(self.keys), "key", "keys"),
            plural(u64::from(self.faults), "fault", "faults"),
            if kinds.is_empty() {
                "none".to_string()
            } else {
                kinds.join(", ")
            },
            plural(self.steps, "step", "steps"),
        )?;
        let mut extras = Vec::new();
        if self.range_ends {
            extras.push("ranges at both ends".to_string());
        }
        if self.transactional {
            extras.push("input transactions".to_string());
        }
        if self.marker_lag {
            extras.push("late markers".to_string());
        }
        if let Some(seed) = self.shuffle {
            extras.push(format!("shuffled by seed {seed}"));
        }
        if !extras.is_empty() {
            write!(f, ", {}", extras.join(", "))?;
        }
        Ok(())
    }
}
