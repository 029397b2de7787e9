//! One simulated run: a safety phase with faults on, a liveness phase with
//! faults and inputs off, then the checker over the trace and the logs, and
//! the user's properties over what was committed.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use parsley::App;
use parsley::Assembly;

use crate::model::Cluster;
use crate::sim::checker::{check, CheckInput, Finding, Invariant, Related, Relation, Violation};
use crate::sim::report::outcome::RunOutcome;
use crate::sim::running::history::{commits, first_failing, Commit, StateRead};
use crate::sim::running::property::{Committed, PropertyFailure};
use crate::sim::running::purity::fingerprint;
use crate::sim::running::simulation::Simulation;
use crate::sim::running::stops;
use crate::sim::world::choice::Choices;
use crate::sim::world::stats::Stats;
use crate::sim::world::trace::Entry;
use crate::sim::world::{StepKind, World};

/// Runs `simulation` with the choices of `seed`, on this thread, with
/// whatever bug this thread has planted.
pub fn run_seed(simulation: &Simulation, seed: u64) -> RunOutcome {
    let mut outcome = run(simulation, Choices::seeded(seed));
    outcome.seed = Some(seed);
    outcome
}

/// Runs `simulation` with the given choice source, on an application of its
/// own when the simulation has a factory ([`Simulation::builder_fn`]).
///
/// A run never panics: a panic of the harness, of an input generator or of
/// a property ends the run with a violation that says so (the logic's own
/// panics stop its task, X5), and every task that stops unexpectedly or is
/// refused its start is a violation too, unless a rejected input caused it
/// or [`SimulationBuilder::expect_stop`](crate::sim::SimulationBuilder::expect_stop)
/// declares it.
pub fn run(simulation: &Simulation, choices: Choices) -> RunOutcome {
    run_watched(simulation, choices, &mut |_| {})
}

/// What a watcher sees of a run after one step of its safety phase
/// ([`Simulation::run_seed_watched`]): the cluster as it is at that moment,
/// with the application and its assembly, as a tool outside the
/// application would read it.
pub struct Watch<'a> {
    /// The step just taken, from 0.
    pub step: u64,
    /// The model cluster after it.
    pub cluster: &'a Cluster,
    /// The application the run is running.
    pub app: &'a App,
    /// Its assembly on the cluster.
    pub assembly: &'a Assembly,
}

/// [`run`], calling `watch` after every step of the safety phase.
pub(crate) fn run_watched(
    simulation: &Simulation,
    choices: Choices,
    watch: &mut dyn FnMut(Watch<'_>),
) -> RunOutcome {
    run_gated(simulation, choices, watch, &mut |_| true)
        .expect("a run whose gate always opens runs to its end")
}

/// [`run_watched`], asking `gate` before every step of the safety phase,
/// and before the liveness phase, whether to go on: `None` when it said no, and the run was dropped
/// unchecked (the bounded exhaustive mode cuts a run that reached a state
/// it explored before).
pub(crate) fn run_gated(
    simulation: &Simulation,
    mut choices: Choices,
    watch: &mut dyn FnMut(Watch<'_>),
    gate: &mut dyn FnMut(&World) -> bool,
) -> Option<RunOutcome> {
    let budget = simulation.settings().budget;
    // A step draws about three words; regrowing the tape by doubling cost
    // more than drawing them.
    choices.reserve_words(budget.safety_steps.min(1 << 20) as usize * 3);
    let plan = simulation.plan();
    let mut world: Option<World> = None;
    // The kind of each step, beside its span (the shrinker drops whole
    // inputs and faults first).
    let mut kinds: Vec<StepKind> = Vec::new();
    let phases = catch_unwind(AssertUnwindSafe(|| {
        let world = world.insert(World::new(plan, &mut choices));
        for step in 0..budget.safety_steps {
            choices.mark_span();
            if !gate(world) {
                return None;
            }
            kinds.push(world.step(&mut choices));
            watch(Watch {
                step,
                cluster: &world.cluster,
                app: &world.app,
                assembly: &world.assembly,
            });
        }
        if !gate(world) {
            return None;
        }
        choices.mark_span();
        kinds.push(StepKind::Other);
        Some(world.run_liveness(&mut choices))
    }));
    let phases = match phases {
        Ok(None) => return None,
        Ok(Some(quiesced)) => Ok(quiesced),
        Err(panic) => Err(panic),
    };
    let mut world = match world {
        Some(world) => world,
        // The world could not even be built: nothing happened.
        None => {
            let panic = phases
                .err()
                .map_or_else(String::new, |p| panic_message(&*p));
            let violation = Violation::found(
                Finding::Panicked,
                Invariant::I8,
                0,
                &format!("while setting up the world: {panic}"),
            );
            let (tape, spans, canonical) = choices.into_parts();
            return Some(RunOutcome {
                seed: None,
                tape,
                spans,
                kinds,
                canonical,
                trace: Vec::new(),
                stats: Stats::default(),
                quiesced: false,
                violations: vec![violation],
                not_judged: Vec::new(),
                reached: vec![false; simulation.sometimes().len()],
                trace_hash: 0,
                cluster: Cluster::default(),
            });
        }
    };
    let last_step = world.trace.last().map_or(0, |entry| entry.step);
    let mut not_judged = Vec::new();
    let (quiesced, mut violations) = match phases {
        Ok(quiesced) => {
            // The checker replays the logic on an application of its own, so
            // that what a run left in captured state does not leak into it.
            let checked_app = if simulation.app_per_run() {
                simulation.fresh_app()
            } else {
                world.app.clone()
            };
            let fresh_app = || simulation.fresh_app();
            let checked = catch_unwind(AssertUnwindSafe(|| {
                check(&CheckInput {
                    app: &checked_app,
                    run_app: &world.app,
                    fresh_app: simulation
                        .app_per_run()
                        .then_some(&fresh_app as &dyn Fn() -> App),
                    assembly: &world.assembly,
                    cluster: &world.cluster,
                    trace: &world.trace,
                    quiesced,
                    liveness_steps: budget.liveness_steps,
                    restores: &world.restores,
                })
            }));
            let violations = match checked {
                Ok(checked) => {
                    not_judged = checked.not_judged;
                    checked.violations
                }
                Err(panic) => vec![Violation::found(
                    Finding::Panicked,
                    Invariant::I8,
                    last_step,
                    &format!("in the checker: {}", panic_message(&*panic)),
                )],
            };
            (quiesced, violations)
        }
        Err(panic) => {
            let violation = Violation::found(
                Finding::Panicked,
                Invariant::I8,
                last_step,
                &format!(
                    "at step {last_step} (after {} events): {}",
                    world.trace.len(),
                    panic_message(&*panic)
                ),
            );
            (false, vec![violation])
        }
    };
    let mut stopped = stops::judge(&world, simulation.expected_stops());
    violations.append(&mut stopped);
    violations.sort_by_key(|violation| violation.step);
    let committed = Committed {
        app: &world.app,
        cluster: &world.cluster,
        hosts: world.final_hosts(),
        stats: &world.stats,
        quiesced,
        hidden: None,
        state_read: StateRead::default(),
    };
    // Built once, when a property fails without naming its records.
    let mut history: Option<Vec<Commit>> = None;
    // A property's verdict is about the end of the run: it is dated at the
    // last step.
    for (index, property) in simulation.properties().iter().enumerate() {
        let verdict = catch_unwind(AssertUnwindSafe(|| (property.check)(&committed)))
            .unwrap_or_else(|panic| Err(format!("it panicked: {}", panic_message(&*panic)).into()));
        if let Err(error) = verdict {
            let mut violation = Violation::new(
                Invariant::Property(index as u16),
                last_step,
                format!("property {:?} failed: {error}", property.name),
            );
            match error.downcast_ref::<PropertyFailure>() {
                Some(failure) if !failure.records().is_empty() => {
                    about_named_records(&mut violation, failure, &world.trace);
                }
                _ => {
                    let commits = history.get_or_insert_with(|| commits(&world.trace));
                    let check = property.check.as_ref();
                    if let Some(index) = first_failing(&committed, commits, check) {
                        lead_with_commit(&mut violation, &commits[index], index);
                    }
                }
            }
            violations.push(violation);
        }
    }
    let mut reached = Vec::with_capacity(simulation.sometimes().len());
    for (index, mark) in simulation.sometimes().iter().enumerate() {
        let verdict = catch_unwind(AssertUnwindSafe(|| (mark.reached)(&committed)))
            .unwrap_or_else(|panic| Err(format!("it panicked: {}", panic_message(&*panic)).into()));
        match verdict {
            Ok(yes) => reached.push(yes),
            Err(error) => {
                reached.push(false);
                violations.push(Violation::new(
                    Invariant::Property((simulation.properties().len() + index) as u16),
                    last_step,
                    format!("sometimes mark {:?} could not be read: {error}", mark.name),
                ));
            }
        }
    }
    drop(committed);
    let trace_hash = fingerprint(&world.trace, &world.cluster);
    let trace = std::mem::take(&mut world.trace);
    let (tape, spans, canonical) = choices.into_parts();
    Some(RunOutcome {
        seed: None,
        tape,
        spans,
        kinds,
        canonical,
        trace,
        stats: world.stats,
        quiesced,
        violations,
        not_judged,
        reached,
        trace_hash,
        cluster: world.cluster,
    })
}

/// A panic's message, as `panic!` formatted it.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|text| text.to_string()))
        .unwrap_or_else(|| "(a panic without a message)".to_string())
}

/// How many of a commit's records a property's message lists.
const COMMIT_RECORDS_LISTED: usize = 4;

/// A failing property that names no record is told from the commit after
/// which it fails: the violation is dated at that commit, on the task that
/// made it, about its first record, and its message says so.
fn lead_with_commit(violation: &mut Violation, commit: &Commit, index: usize) {
    violation.step = commit.step;
    violation.record = commit.records.first().cloned();
    let what = match &commit.at {
        Some(at) => {
            violation.task = Some(Arc::clone(&at.task));
            violation.instance = Some(at.instance);
            format!("the transaction of {at}")
        }
        None => "an input".to_string(),
    };
    let mut records: Vec<String> = commit
        .records
        .iter()
        .take(COMMIT_RECORDS_LISTED)
        .map(|(tp, offset)| format!("{tp}@{offset}"))
        .collect();
    if commit.records.len() > COMMIT_RECORDS_LISTED {
        records.push(format!("… {} in all", commit.records.len()));
    }
    violation.message.push_str(&format!(
        "; it held over the run's first {index} commits and fails from commit {} on: {what}, \
         committed at step {}, writing {}",
        index + 1,
        commit.step,
        records.join(", ")
    ));
}

/// A failing property that names its records is told from them: the
/// violation is about the first, dated where it was written and on the task
/// that wrote it, and names the others.
fn about_named_records(violation: &mut Violation, failure: &PropertyFailure, trace: &[Entry]) {
    let Some(((tp, offset), others)) = failure.records().split_first() else {
        return;
    };
    violation.record = Some((tp.clone(), *offset));
    let written = trace
        .iter()
        .find(|entry| entry.event.concerns(tp, *offset) && entry.event.task_at().is_some())
        .or_else(|| trace.iter().find(|entry| entry.event.concerns(tp, *offset)));
    if let Some(entry) = written {
        violation.step = entry.step;
        if let Some(at) = entry.event.task_at() {
            violation.task = Some(Arc::clone(&at.task));
            violation.instance = Some(at.instance);
        }
    }
    for (tp, offset) in others {
        violation.related.push(Related {
            relation: Relation::Named,
            tp: tp.clone(),
            offset: *offset,
            gate: None,
            status: None,
            deliveries: Vec::new(),
        });
    }
}
