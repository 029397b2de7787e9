//! Failing runs: shrinking their tapes and writing them up.
//!
//! The report wing reads what a run left ([`outcome`]) and never runs one
//! itself: shrinking is handed the replay to call.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use parsley::Tp;

use crate::sim::checker::{Invariant, Related, Relation, Violation};
use crate::sim::world::settings::Settings;
use crate::sim::world::stats::Stats;
use crate::sim::world::trace::{Entry, Event, TxnRef};
use cause::{has_cause, Cause};
use outcome::RunOutcome;
use shrink::{seconds, thousands, try_shrink, ShrinkBudget, Spent, Trial};

pub(crate) mod cause;
pub(crate) mod coverage;
pub(crate) mod horizon;
pub(crate) mod outcome;
pub(crate) mod outliers;
pub(crate) mod shrink;
pub(crate) mod timeline;

/// A failing run and its shrunk counterexample.
pub struct Failure {
    /// The failing run.
    pub original: RunOutcome,
    /// The shrunk run, failing the same invariant.
    pub shrunk: RunOutcome,
    /// The invariant both violate.
    pub invariant: Invariant,
    /// How many shrink attempts were run.
    pub attempts: usize,
    /// Whether shrinking reached a local minimum (a whole round of its
    /// passes found nothing simpler) before its budget ran out.
    pub finished: bool,
    /// The budget shrinking had.
    pub budget: ShrinkBudget,
    /// The limit of `budget` that stopped it, when it did not finish.
    pub spent: Option<Spent>,
    /// How long shrinking took.
    pub elapsed: std::time::Duration,
}

/// Shrinks a failing run's tape while the same invariant, with the same
/// cause ([`Cause`]), still fails, running each candidate with `replay`
/// (the simulation's [`run_tape`](crate::sim::Simulation::run_tape)).
/// Returns `None` when the run did not fail.
///
/// Never panics: when the original tape does not fail again, nothing is
/// shrunk and `shrunk` is that passing replay; when the shrunk tape, replayed
/// once more, does not fail, `shrunk` is that replay. Either way
/// [`Failure::reproduces`] is false and a report must fall back on the
/// original run.
pub(crate) fn shrink_failure(
    replay: impl Fn(&[u8]) -> RunOutcome,
    original: RunOutcome,
    budget: ShrinkBudget,
) -> Option<Failure> {
    let began = std::time::Instant::now();
    let first = original.violations.first()?;
    let invariant = first.invariant;
    let cause = Cause::of(first);
    // The original tape must fail again before anything is shrunk.
    let again = replay(&original.tape);
    if !has_cause(&again.violations, &cause) {
        return Some(Failure {
            original,
            shrunk: again,
            invariant,
            attempts: 0,
            finished: false,
            budget,
            spent: None,
            elapsed: began.elapsed(),
        });
    }
    let trial_of = |outcome: RunOutcome| Trial {
        fails: has_cause(&outcome.violations, &cause),
        spans: outcome.spans,
        kinds: outcome.kinds,
        canonical: outcome.canonical,
    };
    // The replay above is the precondition's check.
    let mut first = Some(trial_of(again));
    let trial = |tape: &[u8]| match first.take() {
        Some(trial) => trial,
        None => trial_of(replay(tape)),
    };
    // The time budget counts from here: the replay above was the check.
    let (tape, attempts, finished, spent) = match try_shrink(&original.tape, trial, budget) {
        Some(outcome) => (
            outcome.tape,
            outcome.attempts,
            outcome.finished,
            outcome.spent,
        ),
        None => (original.tape.clone(), 0, false, None),
    };
    let shrunk = replay(&tape);
    Some(Failure {
        original,
        shrunk,
        invariant,
        attempts,
        finished,
        budget,
        spent,
        elapsed: began.elapsed(),
    })
}

impl Failure {
    /// Whether the shrunk run, replayed from its tape, fails with the
    /// original's first cause: only then may its tape be reported or kept.
    pub fn reproduces(&self) -> bool {
        self.original
            .violations
            .first()
            .is_some_and(|first| has_cause(&self.shrunk.violations, &Cause::of(first)))
    }
}

/// Whether shrinking reached a local minimum, in words: a run shrunk until
/// the budget ran out is not presented as a minimal counterexample.
pub(crate) fn shrink_verdict(failure: &Failure) -> String {
    if failure.finished {
        "Shrinking reached a local minimum: no pass found a simpler run that fails the same way.\n"
            .to_string()
    } else {
        let limit = match failure.spent {
            Some(Spent::Time) => "time",
            _ => "attempts",
        };
        format!(
            "Shrinking stopped after {} attempts at {} non-zero choices, when its {limit} ran out \
             (budget {}); it had not reached a minimum, so the run below may hold choices the \
             failure does not need.\n",
            thousands(failure.attempts),
            thousands(nonzero_words(&failure.shrunk.tape)),
            failure.budget
        )
    }
}

/// The line that says what shrinking did and with what budget:
/// `Shrink: 22,215 → 48 non-zero choices in 2,114 attempts, 41 s (budget 60 s)`.
pub(crate) fn shrink_line(failure: &Failure) -> String {
    format!(
        "Shrink: {} → {} non-zero choices in {} attempts, {} (budget {})",
        thousands(nonzero_words(&failure.original.tape)),
        thousands(nonzero_words(&failure.shrunk.tape)),
        thousands(failure.attempts),
        seconds(failure.elapsed),
        failure.budget
    )
}

/// Choices that are not the default (zero) one: what a counterexample needs.
pub(crate) fn nonzero_words(tape: &[u8]) -> usize {
    tape.chunks(4)
        .filter(|word| word.iter().any(|byte| *byte != 0))
        .count()
}

/// Whether an event belongs in the short story of a failure: what the
/// application did and what went wrong, without fetch and clock noise.
fn worth_telling(event: &Event) -> bool {
    !matches!(
        event,
        Event::Fetched { .. }
            | Event::Withheld { .. }
            | Event::ClockAdvanced { .. }
            | Event::TickChecked { emitted: None, .. }
    )
}

/// The story of a run (see [`story_of`]), centred on its first violation.
pub fn story(outcome: &RunOutcome, events_max: usize) -> String {
    story_of(&outcome.trace, outcome.violations.first(), events_max)
}

/// How many events around the violation a failure report tells.
const STORY_EVENTS: usize = 30;

/// How many of a story's window of events come after the violating one.
const AFTER_MAX: usize = 5;

/// How many related records the head of a story lists and tells the
/// events of.
const RELATED_MAX: usize = 8;

/// How many events of each named record a story tells.
const EVENTS_PER_RECORD: usize = 8;

/// A run's trace as a short list of events, centred on `violation`: first
/// what the violation names and where each related record was at the
/// violating step; then the events around the violating step (up to
/// `events_max`, a few of them after it) together with every event that
/// concerns a record the violation names, wherever it is in the trace (a
/// few per record), in trace order, with the events left out counted. A
/// violation that names records is told without the production of the
/// inputs it does not name (they are among the events counted): a run
/// produces its whole workload, and the failure needs only the records it
/// names. `>` marks the violating event, `*` an event of a named record; `t` is
/// the wall clock in milliseconds since the whole hour every run starts in
/// (each starts at a whole minute of it). Without a
/// violation, the last `events_max` events.
pub fn story_of(trace: &[Entry], violation: Option<&Violation>, events_max: usize) -> String {
    // told_before[i]: how many entries before entry i are worth telling.
    let mut told_before = Vec::with_capacity(trace.len() + 1);
    told_before.push(0);
    for entry in trace {
        let told = told_before.last().copied().unwrap_or(0);
        told_before.push(told + usize::from(worth_telling(&entry.event)));
    }
    // A violation about records: the inputs it does not name are counted
    // in the gaps, not listed (a run produces its whole workload, and the
    // failure needs only the records it names).
    let unnamed_input = |event: &Event| match (event, violation) {
        (Event::InputProduced { tp, offset, .. }, Some(violation)) if names_records(violation) => {
            !violation
                .record
                .iter()
                .any(|(named, at)| named == tp && at == offset)
                && !violation
                    .related
                    .iter()
                    .any(|related| &related.tp == tp && related.offset == *offset)
        }
        _ => false,
    };
    let told: Vec<usize> = (0..trace.len())
        .filter(|&index| worth_telling(&trace[index].event) && !unnamed_input(&trace[index].event))
        .collect();
    let mut out = String::new();
    // Trace index to the mark of its line and the records it concerns.
    let mut lines: BTreeMap<usize, (char, Vec<String>)> = BTreeMap::new();
    match violation.and_then(|violation| Some((violation, violation.entry_in(trace)?))) {
        None => {
            for &index in told.iter().skip(told.len().saturating_sub(events_max)) {
                lines.insert(index, (' ', Vec::new()));
            }
        }
        Some((violation, centre)) => {
            head(&mut out, violation);
            // A property is a verdict on what the whole run committed, dated
            // at its end: the last few events are context, not cause.
            // A property dated at a commit (one it named, or the first
            // after which it fails) is told around that commit.
            let events_max = match violation.invariant {
                Invariant::Property(_) if violation.record.is_none() => {
                    out.push_str("  (a property reads the committed end state: the run's last events follow)\n");
                    events_max.min(8)
                }
                _ => events_max,
            };
            let after = (events_max / 4).min(AFTER_MAX);
            let before = events_max - after;
            // The window: told entries up to the centre, and a few after.
            let upto = told.partition_point(|&index| index <= centre);
            let window = upto.saturating_sub(before)..(upto + after).min(told.len());
            for &index in &told[window] {
                lines.insert(index, (' ', Vec::new()));
            }
            for (index, note) in concerning(trace, violation) {
                let (mark, notes) = lines.entry(index).or_insert((' ', Vec::new()));
                *mark = '*';
                notes.push(note);
            }
            lines.entry(centre).or_insert((' ', Vec::new())).0 = '>';
        }
    }
    let mut next = 0;
    for (&index, (mark, notes)) in &lines {
        gap(&mut out, told_before[index] - told_before[next]);
        let entry = &trace[index];
        let _ = write!(
            out,
            " {mark} step {:>5}  t={:>7}  {}",
            entry.step,
            entry.now - crate::sim::world::WORLD_BASE_MS,
            entry.event
        );
        if !notes.is_empty() {
            let _ = write!(out, "  ← {}", notes.join(", "));
        }
        out.push('\n');
        next = index + 1;
    }
    gap(
        &mut out,
        told_before[trace.len()] - told_before[next.min(trace.len())],
    );
    out
}

/// Whether a violation names records (its own, or related ones).
fn names_records(violation: &Violation) -> bool {
    violation.record.is_some() || !violation.related.is_empty()
}

/// Notes how many events a story leaves out.
fn gap(out: &mut String, events: usize) {
    match events {
        0 => {}
        1 => out.push_str("  … 1 event\n"),
        events => {
            let _ = writeln!(out, "  … {events} events");
        }
    }
}

/// The head of a story: the violation's record and where each related
/// record was at the violating step.
fn head(out: &mut String, violation: &Violation) {
    let id = match violation.invariant {
        Invariant::Property(_) => violation.invariant.to_string(),
        rule => format!("{rule:?}"),
    };
    let _ = write!(out, "  {id} at step {}", violation.step);
    if let Some(at) = violation.at() {
        let _ = write!(out, " on {at}");
    } else if let Some(task) = &violation.task {
        let _ = write!(out, " on task {task}");
    }
    if let Some((tp, offset)) = &violation.record {
        let _ = write!(out, ", about {tp}@{offset}");
    }
    if let Some(stamp) = &violation.stamp {
        let _ = write!(out, " (stamp {stamp})");
    }
    out.push('\n');
    if violation.related.is_empty() {
        return;
    }
    let _ = writeln!(out, "  where its records were at step {}:", violation.step);
    let related = explaining_first(violation);
    for related in related.iter().take(RELATED_MAX) {
        let _ = writeln!(
            out,
            "    {}@{} ({}): {}",
            related.tp,
            related.offset,
            related.relation,
            related.whereabouts()
        );
    }
    if related.len() > RELATED_MAX {
        let _ = writeln!(out, "    … and {} more", related.len() - RELATED_MAX);
    }
}

/// The records a violation names, those that explain it first and the
/// context (the other claims of its record) last.
fn explaining_first(violation: &Violation) -> Vec<&Related> {
    let mut related: Vec<&Related> = violation.related.iter().collect();
    related.sort_by_key(|related| related.relation == Relation::Claim);
    related
}

/// The events that concern the records `violation` names, with a note of
/// which record: their production, delivery, holds, stops, and the end of
/// every transaction that delivered or wrote them; the first
/// `EVENTS_PER_RECORD` of each, for the violation's own record and the
/// first `RELATED_MAX` related ones (the claims that explain it first).
fn concerning(trace: &[Entry], violation: &Violation) -> Vec<(usize, String)> {
    let mut records: Vec<(&Tp, u64, String)> = Vec::new();
    if let Some((tp, offset)) = &violation.record {
        records.push((tp, *offset, format!("{tp}@{offset}")));
    }
    for related in explaining_first(violation).into_iter().take(RELATED_MAX) {
        let note = format!("{}@{} ({})", related.tp, related.offset, related.relation);
        records.push((&related.tp, related.offset, note));
    }
    // Where each transaction ended.
    let mut ends: BTreeMap<TxnRef, usize> = BTreeMap::new();
    for (index, entry) in trace.iter().enumerate() {
        if let Event::Committed { txn, .. } | Event::Aborted { txn, .. } = &entry.event {
            ends.entry(*txn).or_insert(index);
        }
    }
    let mut found = Vec::new();
    for (tp, offset, note) in records {
        let mut events = BTreeSet::new();
        for (index, entry) in trace.iter().enumerate() {
            if !entry.event.concerns(tp, offset) {
                continue;
            }
            events.insert(index);
            let txn = match &entry.event {
                Event::Delivered { txn, .. } | Event::TickChecked { txn, .. } => txn,
                _ => continue,
            };
            if let Some(&end) = ends.get(txn) {
                events.insert(end);
            }
        }
        let events = events.into_iter().take(EVENTS_PER_RECORD);
        found.extend(events.map(|index| (index, note.clone())));
    }
    found
}

/// What a replay that did not reproduce a failure found instead.
pub(crate) fn not_reproduced(failure: &Failure) -> String {
    match failure.shrunk.violations.first() {
        None => "the replay passed".to_string(),
        Some(violation) => format!("the replay failed otherwise: {violation}"),
    }
}

/// Violations listed a few per cause and task's stage, then a count of the
/// rest of that group: one cause repeated a hundred times takes a few lines.
pub(crate) fn grouped(violations: &[Violation], per_group: usize) -> String {
    /// A cause and the stage of the task it broke on.
    type Group = (Cause, Option<String>);
    let mut groups: Vec<(Group, Vec<&Violation>)> = Vec::new();
    for violation in violations {
        let key = (
            Cause::of(violation),
            violation.task.as_ref().map(|task| task.stage.to_string()),
        );
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, members)) => members.push(violation),
            None => groups.push((key, vec![violation])),
        }
    }
    let mut out = String::new();
    for ((cause, stage), members) in &groups {
        for violation in members.iter().take(per_group) {
            let _ = writeln!(out, "  {violation}");
        }
        if members.len() > per_group {
            let on = stage
                .as_ref()
                .map(|stage| format!(" on stage {stage}"))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "  … and {} more of {cause}{on}",
                members.len() - per_group
            );
        }
    }
    out
}

/// The report of a failure: seed, invariant, violations, the shrunk story
/// and the commands that reproduce it. `replays` are printed as given, a
/// label and a command each: the caller checks that they do reproduce the
/// failure (a planted bug, for one, needs its `--mutation` flag).
pub fn render(scenario_path: &str, failure: &Failure, replays: &[(&str, String)]) -> String {
    let mut out = String::new();
    let seed = failure
        .original
        .seed
        .map_or_else(|| "(tape)".to_string(), |seed| seed.to_string());
    let _ = writeln!(
        out,
        "FAILED: seed {seed} of {scenario_path} violates {}",
        failure.invariant
    );
    out.push_str(&grouped(&failure.original.violations, 3));
    if !failure.reproduces() {
        let _ = writeln!(
            out,
            "\nThe failure did not reproduce when its tape was replayed ({}), so no shrunk \
             tape is shown; what happened in the run as it failed:",
            not_reproduced(failure)
        );
        out.push_str(&story(&failure.original, STORY_EVENTS));
    } else {
        let _ = writeln!(
            out,
            "\n{} ({} trace events); it violates:",
            shrink_line(failure),
            failure.shrunk.trace.len()
        );
        out.push_str(&grouped(&failure.shrunk.violations, 2));
        out.push_str(&shrink_verdict(failure));
        let _ = writeln!(out, "\nWhat happened (shrunk):");
        let violation = failure
            .shrunk
            .violations
            .iter()
            .find(|violation| violation.invariant == failure.invariant);
        out.push_str(&story_of(&failure.shrunk.trace, violation, STORY_EVENTS));
    }
    if !replays.is_empty() {
        out.push('\n');
    }
    for (label, command) in replays {
        let _ = writeln!(out, "{label}: {command}");
    }
    out
}

/// What a "sometimes" mark that no seed reached should make a user try.
#[cfg(feature = "cli")]
pub(crate) const RAISE_HINT: &str = "raise the inputs (`inputs`), the safety steps \
    (`budget`), the partitions or instances, or the fault rates that lead \
    there, or run more seeds (unless the application's shape cannot reach it)";

/// [`RAISE_HINT`] with the knobs `settings` has now, so that a user sees
/// which inputs or steps to raise, and from what.
pub(crate) fn raise_hint(settings: &Settings) -> String {
    format!(
        "raise the inputs (`inputs`, now {}), the safety steps (`budget`, now {}), \
         the partitions or instances (now {} and {}), or the fault rates that lead \
         there, or run more seeds (unless the application's shape cannot reach it)",
        settings.workload.inputs,
        settings.budget.safety_steps,
        settings.partitions,
        settings.instances
    )
}

/// The size of an average seed of `stats` (summed over `seeds` runs): its
/// steps, inputs and deliveries, and the simulated time it spans.
pub(crate) fn seed_size(stats: &Stats, seeds: u64) -> String {
    let seeds = seeds.max(1);
    format!(
        "{} steps, {} inputs, {} deliveries, {:.1} s simulated",
        stats.steps / seeds,
        stats.inputs / seeds,
        stats.deliveries / seeds,
        stats.simulated_ms as f64 / seeds as f64 / 1_000.0
    )
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use parsley::TaskId;
    use parsley::{Claim, Stamp};

    use super::*;
    use crate::model::EntryStatus;
    use crate::sim::checker::{DeliveryOf, Gate, TxnEnd};
    use crate::sim::world::trace::TaskAt;

    fn ledger() -> TaskAt {
        TaskAt {
            task: Arc::new(TaskId {
                stage: "ledger".into(),
                partition: 0,
            }),
            instance: 0,
        }
    }

    const TXN: TxnRef = TxnRef {
        producer: 7,
        epoch: 0,
        number: 1,
    };

    fn entry(step: u64, event: Event) -> Entry {
        Entry {
            step,
            now: crate::sim::world::WORLD_BASE_MS + step as i64 * 10,
            event,
        }
    }

    fn input(step: u64, topic: &str, offset: u64) -> Entry {
        let tp = Tp::new(topic, 0);
        let event = Event::InputProduced {
            tp,
            offset,
            transactional: false,
        };
        entry(step, event)
    }

    fn delivered(step: u64, topic: &str, offset: u64) -> Entry {
        let event = Event::Delivered {
            at: ledger(),
            txn: TXN,
            tp: Tp::new(topic, 0),
            offset,
            sent: vec![],
        };
        entry(step, event)
    }

    /// The payment an order claims is produced first, then ten records of
    /// noise, then the order is delivered before the payment (I1).
    fn trace() -> Vec<Entry> {
        let mut trace = vec![
            entry(0, Event::TaskStarted { at: ledger() }),
            input(1, "payments", 0),
            input(2, "orders", 0),
        ];
        trace.extend((0..10).map(|offset| input(3 + offset, "noise", offset)));
        trace.push(entry(13, Event::ClockAdvanced { now: 0 }));
        trace.push(delivered(13, "orders", 0));
        trace.push(delivered(14, "payments", 0));
        trace.push(entry(
            15,
            Event::Committed {
                at: ledger(),
                txn: TXN,
                sent: Vec::new(),
            },
        ));
        trace.extend((0..5).map(|offset| input(16 + offset, "noise", 10 + offset)));
        trace
    }

    fn violation() -> Violation {
        let payment = Tp::new("payments", 0);
        let mut violation = Violation::new(
            Invariant::I1,
            13,
            "ledger/0@i0 delivered orders-0@0 before its claim payments-0@0 was delivered"
                .to_string(),
        );
        violation.task = Some(Arc::clone(&ledger().task));
        violation.instance = Some(0);
        violation.record = Some((Tp::new("orders", 0), 0));
        violation.stamp = Some(Stamp::from_claims([Claim::new(payment.clone(), 0)]));
        violation.related.push(Related {
            relation: Relation::Unresolved,
            tp: payment,
            offset: 0,
            gate: Some(Gate::Fetched),
            status: Some(EntryStatus::Committed),
            deliveries: vec![DeliveryOf {
                step: 14,
                at: ledger(),
                ended: TxnEnd::Committed(15),
                before: false,
            }],
        });
        violation
    }

    #[test]
    fn the_story_is_centred_on_the_violation_and_tells_its_records() {
        let story = story_of(&trace(), Some(&violation()), 8);
        let expected = "  I1 at step 13 on ledger/0@i0, about orders-0@0 (stamp {payments-0@0})
  where its records were at step 13:
    payments-0@0 (unresolved claim): fetched but not delivered yet; committed in the log; next delivered at step 14 by ledger/0@i0 (committed at step 15)
   step     0  t=      0  ledger/0@i0 started
 * step     1  t=     10  input payments-0@0  ← payments-0@0 (unresolved claim)
 * step     2  t=     20  input orders-0@0  ← orders-0@0
  … 10 events
 > step    13  t=    130  ledger/0@i0 delivered orders-0@0 in txn 7.0#1  ← orders-0@0
 * step    14  t=    140  ledger/0@i0 delivered payments-0@0 in txn 7.0#1  ← payments-0@0 (unresolved claim)
 * step    15  t=    150  ledger/0@i0 committed txn 7.0#1  ← orders-0@0, payments-0@0 (unresolved claim)
  … 5 events
";
        assert_eq!(story, expected, "\n{story}");
    }

    #[test]
    fn without_a_violation_the_story_is_the_last_events() {
        let story = story_of(&trace(), None, 3);
        let expected = "  … 18 events
   step    18  t=    180  input noise-0@12
   step    19  t=    190  input noise-0@13
   step    20  t=    200  input noise-0@14
";
        assert_eq!(story, expected, "\n{story}");
    }
}
