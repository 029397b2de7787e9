//! How a simulation stresses an application: partitions, instances, the
//! workload, the clock, fault rates and the phases' budgets. A scenario file
//! (`sim::Scenario`, feature `scenario-files`) sets the same knobs as
//! [`SimulationBuilder`](crate::sim::SimulationBuilder)'s methods.

use std::ops::Range;

use crate::sim::world::choice::Choices;

/// Every knob of a run but the application and its inputs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Settings {
    /// Partitions of every source topic, in `1..=64`.
    pub partitions: u32,
    /// Application instances sharing the tasks, in `1..=8`.
    pub instances: u32,
    /// The input records.
    pub workload: Workload,
    /// The wall clock and the intervals driven by it.
    pub clock: ClockConfig,
    /// Fault probabilities per simulator step.
    pub faults: FaultRates,
    /// How long the phases of a run last.
    pub budget: Budget,
    /// Which task acts and which lane delivers.
    pub order: OrderStrategy,
    /// The instances' local disks (S6), modelled when set: each stateful
    /// task keeps a local store and checkpoint there, restores through
    /// them, and crashes damage them. Off by default.
    pub local_disk: Option<LocalDisk>,
    /// Interactive queries (Q1), asked when set: at drawn moments, of a
    /// drawn key of a stateful stage, of a drawn instance, answered from
    /// the modelled local store ([`Settings::local_disk`]) and checked
    /// (I20). Off by default.
    pub queries: Option<Queries>,
}

/// Interactive queries in the world (Q1, I20).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Queries {
    /// The probability, per step of the safety phase, that a query is
    /// asked, in `[0, 1]`.
    pub rate: f64,
}

impl Default for Queries {
    fn default() -> Self {
        Queries { rate: 0.05 }
    }
}

/// The model of each instance's local disk (S6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LocalDisk {
    /// A running task checkpoints its store every this many changelog
    /// records applied, `>= 1` (the live runtime's is 10,000).
    pub checkpoint_every: u32,
}

impl Default for LocalDisk {
    fn default() -> Self {
        LocalDisk {
            checkpoint_every: 4,
        }
    }
}

/// How the simulator picks which task acts next and which of its ready
/// lanes delivers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum OrderStrategy {
    /// Each pick drawn uniformly among the tasks (and lanes) that can act.
    #[default]
    Random,
    /// PCT: every task incarnation and lane gets a random priority, the
    /// highest enabled one acts, and at `depth − 1` random steps the task
    /// that acted last drops below all others. A bug needing `d ≤ depth`
    /// orderings shows with probability at least `1/(n·k^(d−1))` per seed
    /// (`n` task incarnations, `k` safety steps).
    Pct {
        /// The bug depth aimed at, `>= 1`.
        depth: u32,
    },
}

impl OrderStrategy {
    /// The name scenario files and the command line use: `random`, or
    /// `pct:DEPTH`.
    pub fn name(self) -> String {
        match self {
            OrderStrategy::Random => "random".to_string(),
            OrderStrategy::Pct { depth } => format!("pct:{depth}"),
        }
    }

    /// The strategy named `name` (`random`, `pct` for depth 3, or
    /// `pct:DEPTH` with a depth of at least 1).
    pub fn from_name(name: &str) -> Option<OrderStrategy> {
        match name {
            "random" => Some(OrderStrategy::Random),
            "pct" => Some(OrderStrategy::Pct { depth: 3 }),
            _ => {
                let depth: u32 = name.strip_prefix("pct:")?.parse().ok()?;
                (depth >= 1).then_some(OrderStrategy::Pct { depth })
            }
        }
    }
}

impl Default for Settings {
    /// Two partitions, two instances (so that moves leave zombies to fence),
    /// and the defaults of every table (the values scenario files document).
    /// Sized so that 1,000 seeds of a small application take a few seconds
    /// and reach every rare state its shape allows (docs/DESIGN.md, "Sizing
    /// a workload").
    fn default() -> Self {
        Settings {
            partitions: 2,
            instances: 2,
            workload: Workload::default(),
            clock: ClockConfig::default(),
            faults: FaultRates::default(),
            budget: Budget::default(),
            order: OrderStrategy::Random,
            local_disk: None,
            queries: None,
        }
    }
}

/// The largest partition count a run may have.
pub(crate) const PARTITIONS_MAX: u32 = 64;
/// The largest instance count a run may have.
pub(crate) const INSTANCES_MAX: u32 = 8;

/// The seeds `start..start + count`; `count >= 1` and the end fits a `u64`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeedRange {
    /// The first seed.
    pub start: u64,
    /// How many seeds.
    pub count: u64,
}

impl SeedRange {
    /// The seeds as a range.
    pub fn range(&self) -> Range<u64> {
        self.start..self.start + self.count
    }
}

/// The input records of a run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Workload {
    /// Input records produced during the safety phase, `>= 1`.
    pub inputs: u64,
    /// Distinct keys, `>= 1`.
    pub keys: u32,
    /// Fraction of input batches produced in a transaction, in `[0, 1]`.
    pub transactional: f64,
}

impl Default for Workload {
    fn default() -> Self {
        Workload {
            inputs: 100,
            keys: 8,
            transactional: 0.2,
        }
    }
}

/// How far one clock advance moves the wall clock: `1 <= min <= max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepRange {
    /// The smallest step, in milliseconds.
    pub min: u64,
    /// The largest step, in milliseconds.
    pub max: u64,
}

/// How the simulator chooses where the wall clock goes and what time input
/// records carry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum TimeStrategy {
    /// Boundary-seeking (the default): about half the clock's advances land
    /// on a pending deadline of a task (its next tick, a timer's due time, a
    /// window's close, a key's expiry) or on the millisecond either side;
    /// records of an input with out-of-order event time are often stamped
    /// with such a deadline; and for a few steps after a landing, ticks,
    /// commits, aborts, crashes and moves are drawn far more often. Logic
    /// off by one millisecond around a deadline shows within a few seeds.
    #[default]
    Boundary,
    /// Every advance is drawn uniformly from `step_ms`, and a record's
    /// event-time lag uniformly from its input's range: a deadline is hit
    /// exactly only by chance.
    Uniform,
}

impl TimeStrategy {
    /// The name scenario files and the command line use.
    pub fn name(self) -> &'static str {
        match self {
            TimeStrategy::Boundary => "boundary",
            TimeStrategy::Uniform => "uniform",
        }
    }

    /// The strategy named `name`.
    pub fn from_name(name: &str) -> Option<TimeStrategy> {
        [TimeStrategy::Boundary, TimeStrategy::Uniform]
            .into_iter()
            .find(|strategy| strategy.name() == name)
    }
}

/// The wall clock and the intervals driven by it; all in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockConfig {
    /// How the clock's advances and input timestamps are drawn.
    pub time: TimeStrategy,
    /// How far one clock advance moves the clock (a uniform advance).
    pub step_ms: StepRange,
    /// The topology's tick interval, `>= 1`.
    pub tick_interval_ms: u64,
    /// The commit interval, `>= 1`.
    pub commit_interval_ms: u64,
    /// The broker aborts a hanging transaction after this, `>= 1`.
    pub transaction_timeout_ms: u64,
    /// Periods the application's own logic keys on (a report per minute,
    /// a user's own windows), up to [`TIME_BOUNDARIES_MAX`] of them, zero
    /// for none: under [`TimeStrategy::Boundary`] the clock's advances and
    /// input timestamps aim at their multiples (from the epoch) and the
    /// millisecond either side, as they aim at the edges the library knows.
    pub time_boundaries_ms: [u64; TIME_BOUNDARIES_MAX],
}

/// How many periods [`ClockConfig::time_boundaries_ms`] holds.
pub const TIME_BOUNDARIES_MAX: usize = 4;

impl ClockConfig {
    /// The declared periods of [`ClockConfig::time_boundaries_ms`], in
    /// milliseconds, without the unused zeros.
    pub fn time_boundaries(&self) -> impl Iterator<Item = u64> + '_ {
        self.time_boundaries_ms
            .iter()
            .copied()
            .filter(|period| *period > 0)
    }
}

impl Default for ClockConfig {
    fn default() -> Self {
        ClockConfig {
            time: TimeStrategy::Boundary,
            step_ms: StepRange { min: 1, max: 500 },
            tick_interval_ms: 1000,
            commit_interval_ms: 100,
            transaction_timeout_ms: 10_000,
            time_boundaries_ms: [0; TIME_BOUNDARIES_MAX],
        }
    }
}

/// Fault probabilities per simulator step, each in `[0, 1]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FaultRates {
    /// Whether each seed draws its own mix ([`FaultRates::swarm`]).
    pub swarm: bool,
    /// Abort a task's open transaction.
    pub abort: f64,
    /// Fail a commit.
    pub commit_failure: f64,
    /// Crash an instance.
    pub crash: f64,
    /// Move a task to another instance.
    pub move_task: f64,
    /// Leave an input producer's transaction hanging until the timeout.
    pub hanging_transaction: f64,
    /// A logic error on a chosen record.
    pub logic_error: f64,
    /// A fetch sees only part of what is visible.
    pub partial_fetch: f64,
    /// A fetch sees nothing yet.
    pub empty_fetch: f64,
    /// A task's commit or abort has its markers written late: for that long
    /// its records stay undecided to `read_committed` consumers, the last
    /// stable offset stays pinned and its group offsets are not applied
    /// (probability per transaction end).
    pub marker_lag: f64,
    /// How late, drawn per lagging end, in milliseconds of wall clock.
    pub marker_lag_ms: StepRange,
}

impl Default for FaultRates {
    fn default() -> Self {
        FaultRates {
            swarm: true,
            abort: 0.01,
            commit_failure: 0.01,
            crash: 0.002,
            move_task: 0.002,
            hanging_transaction: 0.005,
            logic_error: 0.001,
            partial_fetch: 0.3,
            empty_fetch: 0.1,
            marker_lag: 0.5,
            marker_lag_ms: StepRange { min: 5, max: 65 },
        }
    }
}

/// The per-seed factors [`FaultRates::swarm`] scales rates by are
/// `k / (SWARM_LEVELS - 1)` for `k` in `0..SWARM_LEVELS`.
pub(crate) const SWARM_LEVELS: u32 = 5;

impl FaultRates {
    /// No faults at all: every rate zero, no swarm. Interleavings and
    /// marker lag aside, the run is a calm one.
    pub fn none() -> FaultRates {
        FaultRates {
            swarm: false,
            abort: 0.0,
            commit_failure: 0.0,
            crash: 0.0,
            move_task: 0.0,
            hanging_transaction: 0.0,
            logic_error: 0.0,
            partial_fetch: 0.0,
            empty_fetch: 0.0,
            marker_lag: 0.0,
            marker_lag_ms: StepRange { min: 0, max: 0 },
        }
    }

    /// This seed's fault mix (swarm testing). When `swarm` is false the rates
    /// come back unchanged and nothing is drawn. When it is true, each rate,
    /// in field order, is scaled by its own factor drawn from `choices`: one
    /// of 0, ¼, ½, ¾ and 1, so a fault is switched off entirely in about a
    /// fifth of the seeds. The zero word gives the factor 0: a zero tape
    /// switches every fault off. The returned mix has `swarm` false: it is
    /// already this seed's.
    pub fn swarm(&self, choices: &mut Choices) -> FaultRates {
        if !self.swarm {
            return *self;
        }
        let mut scale =
            |rate: f64| rate * f64::from(choices.below(SWARM_LEVELS)) / f64::from(SWARM_LEVELS - 1);
        FaultRates {
            swarm: false,
            abort: scale(self.abort),
            commit_failure: scale(self.commit_failure),
            crash: scale(self.crash),
            move_task: scale(self.move_task),
            hanging_transaction: scale(self.hanging_transaction),
            logic_error: scale(self.logic_error),
            partial_fetch: scale(self.partial_fetch),
            empty_fetch: scale(self.empty_fetch),
            marker_lag: scale(self.marker_lag),
            marker_lag_ms: self.marker_lag_ms,
        }
    }
}

/// How long the phases of a run last, in simulator steps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Steps with inputs and faults, `>= 1`.
    pub safety_steps: u64,
    /// Steps after inputs and faults stop, within which the world must
    /// quiesce (I8), `>= 1`.
    pub liveness_steps: u64,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            safety_steps: 2_000,
            liveness_steps: 50_000,
        }
    }
}
