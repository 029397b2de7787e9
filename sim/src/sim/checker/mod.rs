//! The independent checker: recomputes every guarantee (I1–I8, I10–I20) from the
//! recorded trace and the committed logs, trusting none of the runtime's own
//! bookkeeping.
//!
//! It rebuilds, per task instance, what the gate must have looked like: the
//! records each fetch brought (read back from the logs), the position of each
//! consumed tp, the history, the held records and the committed snapshot that
//! aborts and restarts return to. From that it knows what every stamp should
//! have been (G5 is exact: history merged with the stamps of held records),
//! and by replaying the stages' pure logic over the committed deliveries it
//! knows what state and outputs the committed history must have produced.
//!
//! One oracle a file, each reading the shared reconstruction
//! ([`reconstruction`]) and the input and pushing what it finds:
//! [`delivery`] (I1, I2, I3), [`ticks`] (I4), [`stamps`] (I5), [`state`]
//! (I6, the fold of the committed history), [`outputs`] (I7),
//! [`liveness`] (I8), [`dead_letters`] (I10), [`timers`] (I11),
//! [`windows`] (I12), [`joins`], [`stream_joins`], [`table_joins`] and
//! [`fk_joins`] and [`versioned_joins`] (I13), [`expiry`] (I14), [`groups`] (I15), [`order`] (I16, asked by
//! the walk at each delivery), [`rekeys`] (I17), [`consistent`] (I18, with its reference
//! evaluator of a region, [`region`]), [`restored`] (I19, restores through a
//! local store) and [`queries`] (I20, interactive queries' answers); [`purity`] tells impure logic (S4) from a
//! broken rule when a replay disagrees with what was committed.
//! [`check`] builds the reconstruction once and runs them in turn.

mod consistent;
#[cfg(test)]
mod consistent_tests;
mod dead_letters;
mod delivery;
mod expiry;
mod fk_joins;
mod fk_subscriptions;
mod groups;
#[cfg(test)]
mod independence;
mod joins;
mod liveness;
mod operated;
mod order;
mod outputs;
mod purity;
mod queries;
mod reconstruction;
mod region;
#[cfg(test)]
mod region_tests;
mod rekeys;
mod restored;
mod stamps;
mod state;
mod stream_joins;
mod table_joins;
mod ticks;
mod timers;
mod versioned_joins;
mod violation;
mod windows;

use std::collections::{BTreeMap, BTreeSet};

use parsley::Assembly;
use parsley::{App, Tp};

use crate::model::Cluster;
use crate::sim::world::trace::{Entry, Event, TaskAt, TxnRef};
use reconstruction::Tps;
use rustc_hash::FxHashMap;

pub use consistent::NotJudged;
pub use parsley::audit::Invariant;
pub use violation::{DeliveryOf, Finding, Gate, Related, Relation, TxnEnd, Violation};

/// What the checker needs besides the trace and the logs.
pub struct CheckInput<'a> {
    /// The application whose logic the checker replays: the run's own, or
    /// with a factory (`Simulation::builder_fn`) a fresh one.
    pub app: &'a App,
    /// The application the run ran, as the run left it.
    pub run_app: &'a App,
    /// The factory of fresh applications, when the simulation has one: a
    /// disagreeing delivery is called again in a fresh application to tell
    /// impure logic (S4) from a broken rule.
    pub fresh_app: Option<&'a (dyn Fn() -> App + 'a)>,
    /// Its assembly on the model.
    pub assembly: &'a Assembly,
    /// The model, with every log.
    pub cluster: &'a Cluster,
    /// The run's trace.
    pub trace: &'a [Entry],
    /// Whether the world quiesced within its liveness budget.
    pub quiesced: bool,
    /// The liveness budget, for the I8 message.
    pub liveness_steps: u64,
    /// Every restore through a modelled local store, for I19.
    pub(crate) restores: &'a [crate::sim::world::disk::Restore],
}

/// What every oracle shares: the input, the violations found so far, the
/// tps looked at (their logs and decoded stamps). A topic's role comes
/// from the application (`App::changelog_owner`), never from its name.
struct Checker<'a> {
    input: &'a CheckInput<'a>,
    violations: Vec<Violation>,
    tps: Tps<'a>,
    /// Disagreeing deliveries called again so far ([`purity`]).
    recalls: usize,
    /// Disagreeing deliveries of the operator oracles (I12–I14) whose
    /// calls of the user's logic were made again so far: a budget of their
    /// own, so that I6's and I7's re-calls do not use it up first.
    operator_recalls: usize,
    /// What an oracle could not judge, and why ([`NotJudged`]).
    not_judged: Vec<NotJudged>,
}

/// What the checker found: the violations, first ones first, and what it
/// could not judge.
pub struct Checked {
    /// The violations, sorted by step.
    pub violations: Vec<Violation>,
    /// The notes of what was not judged, one per stage and reason.
    pub not_judged: Vec<NotJudged>,
}

/// Runs every check and returns the violations found, first ones first,
/// and what could not be judged.
pub fn check(input: &CheckInput<'_>) -> Checked {
    let mut checker = Checker {
        input,
        violations: Vec::new(),
        tps: Tps::new(input.cluster, input.app),
        recalls: 0,
        operator_recalls: 0,
        not_judged: Vec::new(),
    };
    let committed = checker.replay_trace();
    checker.check_committed_histories(&committed);
    checker.check_committed_checkpoints(&committed);
    let accounted = checker.check_committed_folds(&committed);
    checker.check_outputs_accounted(accounted);
    checker.check_dead_letter_logs();
    checker.check_timers();
    checker.check_windows(&committed);
    checker.check_joins(&committed);
    checker.check_versioned_joins(&committed);
    checker.check_stream_joins(&committed);
    checker.check_table_joins(&committed);
    checker.check_foreign_key_joins(&committed);
    checker.check_foreign_key_requests(&committed);
    checker.check_expiry(&committed);
    checker.check_rekeyed_outputs(&committed);
    checker.check_consistent_views();
    checker.check_groups();
    checker.check_restores(input.restores);
    checker.check_queries();
    checker.check_liveness(&committed);
    checker.locate_related();
    checker.violations.sort_by_key(|violation| violation.step);
    let mut not_judged = Vec::new();
    NotJudged::merge(&mut not_judged, &checker.not_judged);
    Checked {
        violations: checker.violations,
        not_judged,
    }
}

impl<'a> Checker<'a> {
    /// Records a violation; the caller names its task and records on the
    /// returned value.
    fn violation(&mut self, invariant: Invariant, step: u64, message: String) -> &mut Violation {
        self.violations
            .push(Violation::new(invariant, step, message));
        self.violations.last_mut().expect("just pushed")
    }

    /// Fills in where each related record was: its status in the log and
    /// every delivery of it in the trace, with how its transaction ended.
    /// Runs only for a failing run, in two passes over the trace.
    fn locate_related(&mut self) {
        let wanted: BTreeSet<(Tp, u64)> = self
            .violations
            .iter()
            .flat_map(|violation| &violation.related)
            .map(|related| (related.tp.clone(), related.offset))
            .collect();
        if wanted.is_empty() {
            return;
        }
        /// A delivery of a wanted record: its trace index, task instance and
        /// transaction.
        struct Seen<'t> {
            index: usize,
            at: &'t TaskAt,
            txn: TxnRef,
        }
        let trace: &'a [Entry] = self.input.trace;
        let mut deliveries: BTreeMap<(Tp, u64), Vec<Seen>> = BTreeMap::new();
        let mut ends: FxHashMap<TxnRef, TxnEnd> = FxHashMap::default();
        for (index, entry) in trace.iter().enumerate() {
            if let Event::Delivered {
                at,
                txn,
                tp,
                offset,
                ..
            } = &entry.event
            {
                let key = (tp.clone(), *offset);
                if wanted.contains(&key) {
                    let txn = *txn;
                    deliveries
                        .entry(key)
                        .or_default()
                        .push(Seen { index, at, txn });
                    ends.insert(txn, TxnEnd::Unfinished);
                }
            }
        }
        for entry in trace {
            let (txn, end) = match &entry.event {
                Event::Committed { txn, .. } => (txn, TxnEnd::Committed(entry.step)),
                Event::Aborted { txn, .. } => (txn, TxnEnd::Aborted(entry.step)),
                _ => continue,
            };
            if let Some(known) = ends.get_mut(txn) {
                *known = end;
            }
        }
        let tps = &mut self.tps;
        for violation in &mut self.violations {
            let happened = violation.entry_in(trace).unwrap_or(0);
            for related in &mut violation.related {
                let id = tps.id(&related.tp);
                related.status = tps.status(id, related.offset);
                let key = (related.tp.clone(), related.offset);
                let seen = deliveries.get(&key).map_or(&[][..], Vec::as_slice);
                related.deliveries = seen
                    .iter()
                    .map(|seen| DeliveryOf {
                        step: trace[seen.index].step,
                        at: seen.at.clone(),
                        ended: ends[&seen.txn],
                        before: seen.index < happened,
                    })
                    .collect();
            }
        }
    }
}
