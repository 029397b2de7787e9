//! I18: consistent views (V1), from the committed logs alone.
//!
//! A consistent view releases records with a cut (`parsley-cut`): each
//! must equal what the application computes for its (topic, key) from
//! every source record of an epoch below the cut, and from nothing else.
//! The checker takes every committed record the view released and
//! recomputes that value itself: it reads the committed source logs, gives
//! each source record its epoch (the highest timestamp of its partition up
//! to it, divided by the epoch length), and evaluates the view's region over
//! the records of the epochs below the cut with its own reference
//! ([`super::region`]), which calls only the user's logic. It trusts none
//! of the runtime's epochs, frontiers, progress records or held emissions.
//!
//! Each task of a view holds and releases its own emissions (V5), so a
//! release is compared with what the task that released it (named by the
//! trace) emitted. It also checks what needs no evaluation: a release's cut
//! is no higher than the epoch every source partition upstream of its task
//! reached in its committed log (the task cannot know that the epochs below
//! are complete on a partition that never passed them), and one task's
//! releases of one key on one partition come with cuts that never go down.
//!
//! What it does not judge is said, not passed: a region holding an
//! operator the reference does not evaluate, and a release whose key's
//! value depends on how the region's tasks interleave their lanes within
//! an epoch, are [`NotJudged`] notes the report shows.

use std::collections::BTreeSet;
use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use parsley::bytes_for_humans;
use parsley::header::CUT_HEADER;
use parsley::{App, StagePlan, TopicName, Tp};
use rustc_hash::FxHashMap;

use super::region::{region, AtCut, Key, Outputs, Region, Schedule, SourceRecord};
use super::{Checker, Finding, Invariant};
use crate::sim::world::trace::{Entry, Event, TaskAt};

/// How many wrong releases of one view are reported, each kind of wrong:
/// a planted bug shows in many, and the first few tell it.
const REPORTED_PER_VIEW: usize = 4;

/// What the checker left unjudged in a run, and why: a typed note the
/// report shows beside the violations, never a pass.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NotJudged {
    /// The invariant that could not judge.
    pub invariant: Invariant,
    /// The stage whose outputs were not judged.
    pub stage: String,
    /// Why, and what was judged instead.
    pub reason: String,
    /// How many of the stage's records were not judged for this reason
    /// (summed over runs in a summary).
    pub records: usize,
}

impl NotJudged {
    /// Adds `notes` to `into`, one note per (invariant, stage, reason),
    /// their records summed: how a summary over many runs keeps them.
    pub(crate) fn merge(into: &mut Vec<NotJudged>, notes: &[NotJudged]) {
        for note in notes {
            match into.iter_mut().find(|known| {
                (known.invariant, &known.stage, &known.reason)
                    == (note.invariant, &note.stage, &note.reason)
            }) {
                Some(known) => known.records += note.records,
                None => into.push(note.clone()),
            }
        }
        into.sort();
    }
}

impl fmt::Display for NotJudged {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} did not judge {} record(s) stage `{}` wrote: {}",
            self.invariant.short(),
            self.records,
            self.stage,
            self.reason
        )
    }
}

/// A record a view released.
struct Release<'l> {
    tp: Tp,
    offset: u64,
    /// The task instance that wrote it and the step, from the trace.
    written: Option<(u64, &'l TaskAt)>,
    key: &'l Key,
    value: &'l Option<Bytes>,
    /// The cut its header gives, or the header as it is when it does not
    /// read as one.
    cut: Result<i64, String>,
}

/// The committed records of a view's region sources, each with its epoch,
/// and the epoch each source partition's committed log reached (`None`: an
/// empty partition).
struct Sources<'l> {
    records: Vec<SourceRecord<'l>>,
    reached: Vec<(Tp, Option<i64>)>,
}

/// The region's reference outputs under both schedules, once evaluated.
struct Reference {
    oldest: Outputs,
    newest: Outputs,
}

impl<'a> Checker<'a> {
    /// I18 for every consistent view of the application.
    pub(super) fn check_consistent_views(&mut self) {
        let app: &'a App = self.input.app;
        for plan in app.stages() {
            if let Some(epoch) = plan.stage.consistent_epoch() {
                self.check_consistent_view(plan, epoch);
            }
        }
    }

    fn check_consistent_view(&mut self, plan: &'a StagePlan, epoch: Duration) {
        let name = plan.name();
        let releases = self.releases_of(plan);
        if releases.is_empty() {
            return;
        }
        let epoch_ms = i64::try_from(epoch.as_millis()).unwrap_or(i64::MAX);
        let region = region(self.input.app, name);
        for unevaluated in &region.unevaluated {
            self.not_judged.push(NotJudged {
                invariant: Invariant::I18,
                stage: name.to_string(),
                reason: format!(
                    "its region holds stage `{}`, {}, which I18's reference evaluator does not \
                     evaluate, so the values it released are not compared (their cuts are \
                     checked)",
                    unevaluated.stage, unevaluated.what
                ),
                records: releases.len(),
            });
        }
        if epoch_ms <= 0 {
            self.not_judged.push(NotJudged {
                invariant: Invariant::I18,
                stage: name.to_string(),
                reason: format!("its epoch length {epoch:?} is under a millisecond"),
                records: releases.len(),
            });
            return;
        }
        let sources = self.source_epochs(&region, epoch_ms);
        // Per task of the view, its slowest upstream source partition: the
        // one whose log reached the lowest epoch (`None`: an empty one).
        let reached: FxHashMap<&Tp, Option<i64>> = sources
            .reached
            .iter()
            .map(|(tp, reached)| (tp, *reached))
            .collect();
        let tasks = self.tasks_of(plan);
        let slowest: Vec<Option<(Tp, Option<i64>)>> = (0..tasks)
            .map(|task| {
                upstream_sources(self.input.app, self.input.assembly, plan, task)
                    .into_iter()
                    .map(|tp| {
                        let at = reached.get(&tp).copied().flatten();
                        (tp, at)
                    })
                    .min_by_key(|(_, at)| at.unwrap_or(i64::MIN))
            })
            .collect();
        let mut reported = [0usize; 3];
        let mut order_dependent = 0usize;
        // Per (writing task, tp, key): the highest cut so far and where.
        let mut last_cut: FxHashMap<(Option<u32>, &Tp, &Key), (i64, u64)> = FxHashMap::default();
        let mut reference: Option<Reference> = None;
        let highest = releases
            .iter()
            .filter_map(|release| release.cut.as_ref().ok().copied())
            .max()
            .unwrap_or(i64::MIN);
        for release in &releases {
            let cut = match &release.cut {
                Ok(cut) => *cut,
                Err(header) => {
                    let message = format!(
                        "stage `{name}` released {}@{} (key {}) with a {CUT_HEADER} header of {header:?}, which is not a cut (an epoch in ASCII decimal)",
                        release.tp,
                        release.offset,
                        describe(release.key)
                    );
                    self.release_violation(release, message);
                    continue;
                }
            };
            // A cut no upstream source partition's committed log has passed:
            // of the writing task's, or, when the trace does not name the
            // writer, of every task's.
            let task = release.written.map(|(_, at)| at.task.partition);
            let behind = match task {
                Some(task) => slowest.get(task as usize).cloned().flatten(),
                None => slowest
                    .iter()
                    .flatten()
                    .min_by_key(|(_, at)| std::cmp::Reverse(at.unwrap_or(i64::MIN)))
                    .cloned(),
            };
            if let Some((tp, reached)) = behind {
                if reached.is_none_or(|reached| reached < cut) && reported[0] < REPORTED_PER_VIEW {
                    reported[0] += 1;
                    let reached = match reached {
                        Some(reached) => format!("reaches only epoch {reached}"),
                        None => "holds no record".to_string(),
                    };
                    let message = format!(
                        "stage `{name}`{} released {}@{} (key {}) with cut {cut}, but source partition {tp}, upstream of it, has a committed log that {reached} (epoch length {epoch_ms} ms): the task could not know that the epochs below {cut} are complete there",
                        task.map_or(String::new(), |task| format!(" (its task {task})")),
                        release.tp,
                        release.offset,
                        describe(release.key)
                    );
                    self.release_violation(release, message);
                }
            }
            // A key's cuts never go down, release after release of one task
            // (two tasks of a view that write one key have cuts of their own).
            let slot = last_cut
                .entry((task, &release.tp, release.key))
                .or_insert((cut, release.offset));
            if cut < slot.0 && reported[1] < REPORTED_PER_VIEW {
                reported[1] += 1;
                let message = format!(
                    "stage `{name}`{} released {}@{} (key {}) with cut {cut}, after releasing the key at {}@{} with the higher cut {}: a key's releases went back to an earlier cut",
                    task.map_or(String::new(), |task| format!(" (its task {task})")),
                    release.tp,
                    release.offset,
                    describe(release.key),
                    release.tp,
                    slot.1,
                    slot.0
                );
                self.release_violation(release, message);
            }
            if cut >= slot.0 {
                *slot = (cut, release.offset);
            }
            if !region.unevaluated.is_empty() || reported[2] >= REPORTED_PER_VIEW {
                continue;
            }
            let reference =
                reference.get_or_insert_with(|| self.evaluate(&region, &sources.records, highest));
            let task = release.written.map(|(_, at)| at.task.partition);
            let expected = reference
                .oldest
                .at(task, &release.tp.topic, release.key, cut);
            let other = reference
                .newest
                .at(task, &release.tp.topic, release.key, cut);
            let actual = AtCut::Value(release.value.clone());
            if expected.contains(&actual) || other.contains(&actual) {
                continue;
            }
            if expected != other {
                order_dependent += 1;
                continue;
            }
            let expected = expected[0].clone();
            reported[2] += 1;
            let below: usize = sources.records.partition_point(|source| source.epoch < cut);
            let computed = match &expected {
                AtCut::Nothing => format!(
                    "no record for the key on {}: the view emitted none from those epochs",
                    release.tp.topic
                ),
                AtCut::Value(value) => format!(
                    "{} for the key on {}, the last the view emitted from those epochs",
                    describe(value),
                    release.tp.topic
                ),
            };
            let message = format!(
                "stage `{name}` released {}@{} (key {}, value {}) with cut {cut}; from the {below} committed source records of the epochs below {cut} (epoch length {epoch_ms} ms, over {} source partitions), the region computes {computed}",
                release.tp,
                release.offset,
                describe(release.key),
                describe(release.value),
                sources.reached.len(),
            );
            let found = self.violations.len();
            self.release_violation(release, message);
            if reported[2] == 1 {
                self.name_impure_region(
                    name,
                    &sources.records,
                    highest,
                    release,
                    cut,
                    &expected,
                    found,
                );
            }
        }
        if order_dependent > 0 {
            self.not_judged.push(NotJudged {
                invariant: Invariant::I18,
                stage: name.to_string(),
                reason: "released with keys whose value depends on how the region's tasks \
                         interleave their lanes within an epoch: two delivery orders give two \
                         values, the record holds neither, and it is not compared"
                    .to_string(),
                records: order_dependent,
            });
        }
    }

    /// Every committed record of `plan`'s sinks that carries a cut, in log
    /// order, partition by partition, with the task instance that wrote it;
    /// but the copies of a re-key within the view (R3), which it holds
    /// under the key of the record each copies (V5), one per record: I7
    /// pairs them with what the view held, and I18 judges the records.
    fn releases_of(&mut self, plan: &StagePlan) -> Vec<Release<'a>> {
        let copies: Vec<&TopicName> = plan
            .stage
            .hooks()
            .operators::<parsley::RekeyOutputDecl>()
            .map(|rekey| &rekey.repartition)
            .collect();
        let trace: &'a [Entry] = self.input.trace;
        let sinks: Vec<&TopicName> = plan.stage.sinks().iter().map(|sink| &sink.name).collect();
        let mut writers: FxHashMap<(Tp, u64), (u64, &'a TaskAt)> = FxHashMap::default();
        for entry in trace {
            let (at, sent) = match &entry.event {
                Event::Committed { at, sent, .. } | Event::Delivered { at, sent, .. } => (at, sent),
                _ => continue,
            };
            if &*at.task.stage != plan.name() {
                continue;
            }
            for (tp, offset) in sent {
                if sinks.contains(&&tp.topic) {
                    writers
                        .entry((tp.clone(), *offset))
                        .or_insert((entry.step, at));
                }
            }
        }
        let mut releases = Vec::new();
        for sink in plan.stage.sinks() {
            if copies.contains(&&sink.name) {
                continue;
            }
            let partitions = self
                .input
                .assembly
                .partitions_of(sink.name.as_str())
                .unwrap_or(0);
            for partition in 0..partitions {
                let tp = Tp::new(sink.name.clone(), partition);
                let id = self.tps.id(&tp);
                let Some(log) = self.tps.log(id) else {
                    continue;
                };
                for (offset, data) in log.read_committed() {
                    let Some(cut) = data.header(CUT_HEADER) else {
                        continue;
                    };
                    let cut = std::str::from_utf8(cut)
                        .ok()
                        .and_then(|text| text.parse::<i64>().ok())
                        .ok_or_else(|| bytes_for_humans(cut));
                    let written = writers.get(&(tp.clone(), offset)).copied();
                    releases.push(Release {
                        tp: tp.clone(),
                        offset,
                        written,
                        key: &data.key,
                        value: &data.value,
                        cut,
                    });
                }
            }
        }
        releases
    }

    /// The committed records of the region's source partitions with their
    /// epochs, sorted by epoch, then topic, partition and offset.
    fn source_epochs(&mut self, region: &Region<'_>, epoch_ms: i64) -> Sources<'a> {
        let mut records = Vec::new();
        let mut reached = Vec::new();
        for topic in &region.sources {
            let partitions = self
                .input
                .assembly
                .partitions_of(topic.as_str())
                .unwrap_or(0);
            for partition in 0..partitions {
                let tp = Tp::new(topic.clone(), partition);
                let id = self.tps.id(&tp);
                let mut running: Option<i64> = None;
                for (offset, data) in self
                    .tps
                    .log(id)
                    .into_iter()
                    .flat_map(|log| log.read_committed())
                {
                    let epoch = data.timestamp.div_euclid(epoch_ms);
                    let epoch = running.map_or(epoch, |running| running.max(epoch));
                    running = Some(epoch);
                    records.push(SourceRecord {
                        tp: tp.clone(),
                        offset,
                        data,
                        epoch,
                    });
                }
                reached.push((tp, running));
            }
        }
        records.sort_by(|a, b| (a.epoch, &a.tp, a.offset).cmp(&(b.epoch, &b.tp, b.offset)));
        Sources { records, reached }
    }

    /// The region's reference outputs up to `highest` (the highest cut
    /// released), under both schedules.
    fn evaluate(
        &self,
        region: &Region<'_>,
        records: &[SourceRecord<'_>],
        highest: i64,
    ) -> Reference {
        let assembly = self.input.assembly;
        let partitions = |topic: &TopicName| assembly.partitions_of(topic.as_str());
        Reference {
            oldest: region.evaluate(records, highest, &partitions, Schedule::OldestFirst),
            newest: region.evaluate(records, highest, &partitions, Schedule::NewestFirst),
        }
    }

    /// Records an I18 violation about `release`, dated at the step that
    /// wrote it, on the task instance that did.
    fn release_violation(&mut self, release: &Release<'a>, message: String) {
        let step = release
            .written
            .map(|(step, _)| step)
            .or(self.input.trace.last().map(|entry| entry.step))
            .unwrap_or(0);
        let violation = self.violation(Invariant::I18, step, message);
        violation.about(&release.tp, release.offset);
        if let Some((_, at)) = release.written {
            violation.on(at);
        }
    }

    /// S4 for I18: the violations from `found` on say that `release`
    /// disagrees with the reference's `expected`. The reference is
    /// evaluated again in the run's own application and in a fresh one
    /// from the simulation's factory (the logic it calls is the user's);
    /// if either gives another value at that cut, the user's logic is not
    /// a pure function, and the finding is named S4 instead.
    #[allow(clippy::too_many_arguments)]
    fn name_impure_region(
        &mut self,
        view: &str,
        records: &[SourceRecord<'_>],
        highest: i64,
        release: &Release<'_>,
        cut: i64,
        expected: &AtCut,
        found: usize,
    ) {
        let input = self.input;
        let assembly = input.assembly;
        let partitions = |topic: &TopicName| assembly.partitions_of(topic.as_str());
        let task = release.written.map(|(_, at)| at.task.partition);
        let again = |app: &App| {
            region(app, view)
                .evaluate(records, highest, &partitions, Schedule::OldestFirst)
                .at(task, &release.tp.topic, release.key, cut)
                .swap_remove(0)
        };
        let mut answers = vec![(
            "evaluated a second time in the checking application",
            again(input.app),
        )];
        answers.push((
            "evaluated in the run's own application, after the run",
            again(input.run_app),
        ));
        if let Some(fresh) = input.fresh_app {
            answers.push((
                "evaluated in a fresh application from the simulation's factory",
                again(&fresh()),
            ));
        }
        let Some((how, other)) = answers.into_iter().find(|(_, answer)| answer != expected) else {
            return;
        };
        let told = |at: &AtCut| match at {
            AtCut::Nothing => "no record".to_string(),
            AtCut::Value(value) => describe(value),
        };
        let seemed: Vec<String> = self
            .violations
            .drain(found..)
            .map(|violation| format!("{}: {}", violation.invariant, violation.message))
            .collect();
        let step = self.input.trace.last().map_or(0, |entry| entry.step);
        let violation = self.violation(
            Invariant::I9,
            step,
            format!(
                "{}: the region of consistent view `{view}`, evaluated by the checker over the same committed source records, gave {} for key {} on {} at cut {cut}, but {} when {how}: its logic keeps state outside Parsley (captured by its closures or in statics), so what it committed depends on calls before it and cannot be replayed (docs/RULES.md#s4). What it released therefore disagrees with the reference: {}",
                Finding::Impure.prefix(),
                told(expected),
                describe(release.key),
                release.tp.topic,
                told(&other),
                seemed.join("; ")
            ),
        );
        violation.about(&release.tp, release.offset);
        violation.finding = Some(Finding::Impure);
    }
}

impl Checker<'_> {
    /// How many tasks `plan` has: as many as its widest source has
    /// partitions.
    fn tasks_of(&self, plan: &StagePlan) -> u32 {
        plan.stage
            .sources()
            .iter()
            .filter_map(|source| self.input.assembly.partitions_of(source.name.as_str()))
            .max()
            .unwrap_or(0)
    }
}

/// The source partitions of the application (of topics no stage writes)
/// upstream of task `task` of `plan`: its own partition of each source it
/// reads, and, through each topic it reads that stages write, everything
/// upstream of every task of those stages (each writer task writes every
/// partition of its topic, its progress records at least: V4).
fn upstream_sources(
    app: &App,
    assembly: &parsley::Assembly,
    plan: &StagePlan,
    task: u32,
) -> BTreeSet<Tp> {
    let mut found = BTreeSet::new();
    let mut seen: BTreeSet<(String, u32)> = BTreeSet::new();
    let mut waiting = vec![(plan, task)];
    let partitions = |topic: &TopicName| assembly.partitions_of(topic.as_str()).unwrap_or(0);
    while let Some((plan, task)) = waiting.pop() {
        if !seen.insert((plan.name().to_string(), task)) {
            continue;
        }
        for source in plan.stage.sources() {
            let writers: Vec<&StagePlan> = app
                .stages()
                .iter()
                .filter(|writer| {
                    writer
                        .stage
                        .sinks()
                        .iter()
                        .any(|sink| sink.name == source.name)
                })
                .collect();
            if writers.is_empty() {
                if task < partitions(&source.name) {
                    found.insert(Tp::new(source.name.clone(), task));
                }
                continue;
            }
            for writer in writers {
                let tasks = writer
                    .stage
                    .sources()
                    .iter()
                    .map(|source| partitions(&source.name))
                    .max()
                    .unwrap_or(0);
                waiting.extend((0..tasks).map(|task| (writer, task)));
            }
        }
    }
    found
}

fn describe(bytes: &Option<Bytes>) -> String {
    bytes
        .as_ref()
        .map_or("null".to_string(), |bytes| bytes_for_humans(bytes))
}
