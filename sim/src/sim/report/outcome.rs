//! What one run leaves behind for its verdict and its reports: the tape,
//! the trace, the counters, the violations and the model's logs.

use crate::model::Cluster;
use crate::sim::checker::{NotJudged, Violation};
use crate::sim::world::stats::Stats;
use crate::sim::world::trace::Entry;
use crate::sim::world::StepKind;

/// Everything a run produced.
pub struct RunOutcome {
    /// The seed, when the run was seeded (not replayed from a tape).
    pub seed: Option<u64>,
    /// Every choice the run consumed: replaying it gives the same run (I9).
    pub tape: Vec<u8>,
    /// The word of `tape` at which each step starts (the safety phase's
    /// steps, then the liveness phase): the joints the shrinker cuts at.
    pub(crate) spans: Vec<u32>,
    /// The kind of each step of `spans`.
    pub(crate) kinds: Vec<StepKind>,
    /// The tape with every word lowered to the smallest that makes the same
    /// decision (kept by replays of a tape, empty otherwise).
    pub(crate) canonical: Vec<u8>,
    /// Everything that happened.
    pub trace: Vec<Entry>,
    /// The run's counters.
    pub stats: Stats,
    /// Whether the world quiesced within its liveness budget (I8).
    pub quiesced: bool,
    /// What the checker and the user's properties found; empty for a
    /// passing run.
    pub violations: Vec<Violation>,
    /// What the checker could not judge, and why: shown beside the
    /// violations, never taken for a pass.
    pub not_judged: Vec<NotJudged>,
    /// Whether this run reached each of the simulation's "sometimes" marks,
    /// in the order of [`Simulation::sometimes_names`](crate::sim::Simulation::sometimes_names).
    pub reached: Vec<bool>,
    /// A hash of the whole trace and of every record the run wrote, values
    /// included, to compare runs byte for byte (I9).
    pub trace_hash: u64,
    /// The model as the run left it: the logs that reports read stamps from.
    pub cluster: Cluster,
}
