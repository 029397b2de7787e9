//! A run's counters and the rare states it reached: what summaries add up
//! over seeds and what properties may read ([`Committed::stats`]).
//!
//! [`Committed::stats`]: crate::sim::Committed::stats

/// Rare states the run reached, counted to show that the simulator really
/// exercises the hard cases.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Marks {
    /// Ticks held behind a claim (T5).
    pub tick_held: u64,
    /// Zombies fenced by a newer instance (X4).
    pub zombie_fenced: u64,
    /// Fetches stalled at the last stable offset by a hanging transaction.
    pub lso_stalled: u64,
    /// Records redelivered after an abort (X3).
    pub redelivered_after_abort: u64,
    /// Records held on a claim on another topic (G2).
    pub held_behind_other_topic: u64,
    /// A task's commit whose markers were written late (its records and
    /// offsets invisible for a while after the commit returned).
    pub markers_lagged: u64,
}

impl Marks {
    /// Each counter with a readable name, for summaries.
    pub fn named(&self) -> [(&'static str, u64); 6] {
        [
            ("tick held behind a claim", self.tick_held),
            ("zombie fenced", self.zombie_fenced),
            ("LSO stalled by a hanging transaction", self.lso_stalled),
            ("redelivery after an abort", self.redelivered_after_abort),
            (
                "record held behind another topic",
                self.held_behind_other_topic,
            ),
            ("commit markers written late", self.markers_lagged),
        ]
    }

    /// Adds another run's counts.
    pub fn add(&mut self, other: &Marks) {
        self.tick_held += other.tick_held;
        self.zombie_fenced += other.zombie_fenced;
        self.lso_stalled += other.lso_stalled;
        self.redelivered_after_abort += other.redelivered_after_abort;
        self.held_behind_other_topic += other.held_behind_other_topic;
        self.markers_lagged += other.markers_lagged;
    }
}

/// Counters of one run.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Stats {
    /// Steps taken.
    pub steps: u64,
    /// Input records produced (the scenario's workload, plus the planted
    /// logic errors).
    pub inputs: u64,
    /// Of those, the ones still left when the safety phase ended, produced
    /// with faults off: a sign the step budget is short for the workload.
    pub inputs_after_faults: u64,
    /// Deliveries, aborted ones included.
    pub deliveries: u64,
    /// Task commits.
    pub commits: u64,
    /// Task aborts.
    pub aborts: u64,
    /// Instance crashes.
    pub crashes: u64,
    /// Producers fenced.
    pub fences: u64,
    /// The most records held at once by one task.
    pub held_max: u64,
    /// Simulated wall-clock time the runs spanned, in milliseconds: how far
    /// their clocks moved, both phases together.
    pub simulated_ms: u64,
    /// Simulated time from each run's first input to its last, in
    /// milliseconds (summed over runs, as `simulated_ms` is): how much time
    /// the application's windows, ticks and time to live see records in.
    #[serde(default)]
    pub inputs_span_ms: u64,
    /// Clock advances that landed on a pending deadline or next to it
    /// (boundary-seeking time).
    #[serde(default)]
    pub boundary_landings: u64,
    /// Crash faults of a task's directory on a modelled local disk (S6).
    #[serde(default)]
    pub disk_faults: u64,
    /// Task starts that restored through a modelled local store (S6).
    #[serde(default)]
    pub store_restores: u64,
    /// Of those, the ones that cleared the store and rebuilt it.
    #[serde(default)]
    pub store_rebuilds: u64,
    /// Interactive queries asked (Q1).
    #[serde(default)]
    pub queries: u64,
    /// Of those, the ones answered with the slot's state (the others were
    /// refused: not the owner, not started, ended, no store).
    #[serde(default)]
    pub queries_answered: u64,
    /// The rare states reached.
    pub marks: Marks,
}

impl Stats {
    /// Adds another run's counters; `held_max` is a maximum.
    pub fn add(&mut self, other: &Stats) {
        self.steps += other.steps;
        self.inputs += other.inputs;
        self.inputs_after_faults += other.inputs_after_faults;
        self.deliveries += other.deliveries;
        self.commits += other.commits;
        self.aborts += other.aborts;
        self.crashes += other.crashes;
        self.fences += other.fences;
        self.held_max = self.held_max.max(other.held_max);
        self.simulated_ms += other.simulated_ms;
        self.inputs_span_ms += other.inputs_span_ms;
        self.boundary_landings += other.boundary_landings;
        self.disk_faults += other.disk_faults;
        self.store_restores += other.store_restores;
        self.store_rebuilds += other.store_rebuilds;
        self.queries += other.queries;
        self.queries_answered += other.queries_answered;
        self.marks.add(&other.marks);
    }
}
