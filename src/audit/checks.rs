//! The checks that need no search: claims (G6), ticks (T3, T4, I4), the
//! committed checkpoint (G4, G7, T6), dead letters (X5), and which tasks may
//! have written each output record.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use super::index::{describe_record, Beyond, DeadLetters, Lane, Log, TaskPlan};
use super::{AuditOptions, AuditSummary, AuditViolation, CommittedLogs, Invariant, TpCut};
use crate::assembly::Assembly;
use crate::task::{tick_of, Checkpoint, CommittedOffset, TaskId};
use crate::{App, Claim, DeadLetter, DeadLetterKind, Stamp, Tp};

pub(super) struct Auditor<'a> {
    pub(super) app: &'a App,
    pub(super) assembly: &'a Assembly,
    pub(super) logs: &'a CommittedLogs,
    pub(super) options: AuditOptions,
    pub(super) index: &'a BTreeMap<Tp, Log<'a>>,
    pub(super) violations: Vec<AuditViolation>,
    pub(super) summary: AuditSummary,
}

/// A claim that names no committed record: the invariant, why, and the
/// records that make it.
pub(super) type BadClaim = (Invariant, String, Vec<(Tp, u64)>);

impl<'a> Auditor<'a> {
    pub(super) fn violation(&mut self, invariant: Invariant, step: u64, message: String) {
        self.violations
            .push(AuditViolation::new(invariant, step, message));
    }

    pub(super) fn is_written_by_app(&self, tp: &Tp) -> bool {
        self.app.stages().iter().any(|plan| {
            plan.tick_topic.as_ref() == Some(&tp.topic)
                || plan.dead_letter.as_ref() == Some(&tp.topic)
                || plan.stage.sinks().iter().any(|sink| sink.name == tp.topic)
        })
    }

    /// G6 over every record read: each claim names a committed record. The
    /// claims of a record the operator skipped are not checked: a skip is
    /// how an operator gets past a claim that can never resolve
    /// (docs/RULES.md#skip). In a read at a cut
    /// ([`CommittedLogs::read_at_cut`]) a claim at or beyond where its tp's
    /// read stopped is unverifiable: the logs are read one after another
    /// while the application runs, and a record may claim, through the
    /// stamps of the records its task holds (G5), a cause that committed
    /// after that tp was read.
    pub(super) fn check_claims(&mut self, skipped: &HashSet<(Tp, u64)>) {
        // Bad claims, grouped so that one missing record is reported once.
        let mut bad: BTreeMap<Claim, BadClaim> = BTreeMap::new();
        let mut undecodable = Vec::new();
        for log in self.index.values() {
            for (index, record) in log.records.iter().enumerate() {
                if skipped.contains(&(log.tp.clone(), record.offset)) {
                    continue;
                }
                let stamp = match &log.stamps[index] {
                    Ok(stamp) => stamp,
                    Err(error) => {
                        if self.is_written_by_app(&log.tp) {
                            undecodable.push(format!(
                                "{}@{} was written by the application, but its stamp header does not decode: {error}",
                                log.tp, record.offset
                            ));
                        }
                        continue;
                    }
                };
                for claim in stamp.claims() {
                    let claimant = (log.tp.clone(), record.offset);
                    if claim.tp == log.tp && claim.offset >= record.offset {
                        bad.entry(claim.clone())
                            .or_insert_with(|| {
                                (
                                    Invariant::I1,
                                    format!("a claim on its own tp at or beyond itself (G6): {claim} can never be delivered before it"),
                                    Vec::new(),
                                )
                            })
                            .2
                            .push(claimant);
                        continue;
                    }
                    let Some(claimed) = self.index.get(&claim.tp) else {
                        self.summary.claims_unverifiable += 1;
                        continue;
                    };
                    if claimed.index_of(claim.offset).is_some() {
                        self.summary.claims_checked += 1;
                        let claimant_at = self.logs.commit_sequence(&log.tp, record.offset);
                        let claimed_at = self.logs.commit_sequence(&claim.tp, claim.offset);
                        if let (Some(claimant_at), Some(claimed_at)) = (claimant_at, claimed_at) {
                            if claimed_at > claimant_at {
                                bad.entry(claim.clone())
                                    .or_insert_with(|| {
                                        (
                                            Invariant::I3,
                                            format!("causal inversion: {claim} was committed after the record that claims it; its writer must have read it before it was committed"),
                                            Vec::new(),
                                        )
                                    })
                                    .2
                                    .push(claimant);
                            }
                        }
                        continue;
                    }
                    let bounds = claimed.bounds;
                    // At a cut, a claim past where its tp was read may name
                    // a record committed since.
                    let later = claim.offset >= bounds.read_until && self.logs.read_at_cut();
                    let finding = if claim.offset < bounds.start || later {
                        None
                    } else if claim.offset >= bounds.end {
                        Some((
                            Invariant::I1,
                            format!(
                                "{claim} lies at or beyond the log end {} of {}: a cause that was never appended (G6)",
                                bounds.end, claim.tp
                            ),
                        ))
                    } else if claim.offset >= bounds.read_until {
                        Some((
                            Invariant::I3,
                            format!(
                                "precommitted read: {claim} lies at or beyond the last stable offset {} of {}, inside or behind a transaction still open, which no read_committed consumer can have delivered",
                                bounds.read_until, claim.tp
                            ),
                        ))
                    } else {
                        Some((
                            Invariant::I3,
                            format!(
                                "{claim} names no committed record: an aborted record or a transaction marker (G6)"
                            ),
                        ))
                    };
                    match finding {
                        None => self.summary.claims_unverifiable += 1,
                        Some((invariant, message)) => bad
                            .entry(claim.clone())
                            .or_insert_with(|| (invariant, message, Vec::new()))
                            .2
                            .push(claimant),
                    }
                }
            }
        }
        for message in undecodable {
            self.violation(Invariant::I5, 0, message);
        }
        for (claim, (invariant, message, claimants)) in bad {
            let (tp, offset) = &claimants[0];
            let more = match claimants.len() {
                1 => String::new(),
                n => format!(" ({} more records claim it)", n - 1),
            };
            self.violation(
                invariant,
                0,
                format!("{tp}@{offset} claims {claim}: {message}{more}"),
            );
        }
    }

    /// T3, T4, I4: the committed tick records of every task.
    pub(super) fn check_ticks(&mut self) {
        let mut findings = Vec::new();
        for plan in self.app.stages() {
            let (Some(topic), Some(decl)) = (&plan.tick_topic, plan.stage.ticks()) else {
                continue;
            };
            let interval = i64::try_from(decl.interval.as_millis()).unwrap_or(i64::MAX);
            let partitions = self.assembly.partitions_of(topic.as_str()).unwrap_or(0);
            for partition in 0..partitions {
                let Some(log) = self.index.get(&Tp::new(topic.clone(), partition)) else {
                    continue;
                };
                self.summary.ticks += log.records.len();
                let mut last: Option<(u64, i64)> = None;
                for record in log.records {
                    let tp = &log.tp;
                    let time = tick_of(record).map(|tick| tick.timestamp);
                    if record.data.key.is_some() || time != Some(record.data.timestamp) {
                        findings.push(format!(
                            "{tp}@{} is not a tick record (T4: null key, value the 8-byte big-endian time equal to the record timestamp): key {:?}, timestamp {}, value time {time:?}",
                            record.offset, record.data.key, record.data.timestamp
                        ));
                        continue;
                    }
                    let time = record.data.timestamp;
                    if let Some((before, at)) = last {
                        if time.saturating_sub(at) < interval {
                            findings.push(format!(
                                "{tp}@{before} (at {at}) and {tp}@{} (at {time}) are committed ticks only {} ms apart, interval {interval} ms (T3: one tick per firing; T6: a tick committed once)",
                                record.offset,
                                time.saturating_sub(at)
                            ));
                        }
                    }
                    last = Some((record.offset, time));
                }
            }
        }
        for message in findings {
            self.violation(Invariant::I4, 0, message);
        }
    }

    /// Every task of the assembly with its lanes and committed prefixes.
    pub(super) fn tasks(&mut self) -> Vec<TaskPlan<'a>> {
        let index = self.index;
        self.summary.cut.read_again = self.logs.read_at_cut();
        for (tp, log) in index {
            self.summary.cut.tps.insert(
                tp.clone(),
                TpCut {
                    committed: Vec::new(),
                    read_until: log.bounds.read_until,
                    beyond: 0,
                },
            );
        }
        let mut tasks = Vec::new();
        for (stage, count) in &self.assembly.tasks {
            let Some(plan) = self.app.stage(stage) else {
                continue;
            };
            for partition in 0..*count {
                let id = TaskId {
                    stage: stage.as_str().into(),
                    partition,
                };
                let mut lanes = Vec::new();
                let mut unreadable = None;
                let mut moved = false;
                for topic in plan.consumed_topics() {
                    let count = self.assembly.partitions_of(topic.as_str()).unwrap_or(0);
                    if partition >= count {
                        continue;
                    }
                    let tp = Tp::new(topic.clone(), partition);
                    moved |= self.logs.moved(&plan.group, &tp);
                    let committed = self
                        .logs
                        .committed(&plan.group, &tp)
                        .map_or(0, |offset| offset.offset);
                    let Some(log) = index.get(&tp) else {
                        if committed > 0 {
                            unreadable = Some(format!("{tp} was not read"));
                        }
                        continue;
                    };
                    if let Some(cut) = self.summary.cut.tps.get_mut(&tp) {
                        cut.committed.push((plan.group.clone(), committed));
                    }
                    if committed > log.bounds.end {
                        self.violations.push(AuditViolation::new(
                            Invariant::I2,
                            0,
                            format!(
                                "task {id}: the committed offset {committed} of {tp} lies beyond its log end {}",
                                log.bounds.end
                            ),
                        ));
                        unreadable = Some(format!(
                            "its committed offset on {tp} is beyond the log end"
                        ));
                    } else if committed > log.bounds.read_until && self.logs.read_at_cut() {
                        // The offsets were read before the logs: what lies
                        // below them had committed before the log was read.
                        self.violations.push(AuditViolation::new(
                            Invariant::I3,
                            0,
                            format!(
                                "task {id}: precommitted read: the committed offset {committed} of {tp}, read before the log, lies beyond its last stable offset {} read after it; the task delivered records of a transaction still open",
                                log.bounds.read_until
                            ),
                        ));
                        unreadable = Some(format!(
                            "its committed offset on {tp} is beyond the last stable offset"
                        ));
                    } else if committed > log.bounds.read_until {
                        unreadable = Some(format!(
                            "its committed offset {committed} on {tp} lies beyond where the read stopped ({}, an open transaction)",
                            log.bounds.read_until
                        ));
                    }
                    let len = log
                        .records
                        .partition_point(|record| record.offset < committed);
                    lanes.push(Lane {
                        tick: plan.tick_topic.as_ref() == Some(&topic),
                        tp,
                        log,
                        len,
                        committed,
                    });
                }
                self.summary.cut.tasks_moved += usize::from(moved);
                if let (None, Some(region)) = (&unreadable, &plan.region) {
                    unreadable = Some(format!(
                        "it is on a path to the consistent view {:?}: it delivers by epoch across its sources' writers (V4), which this audit does not reconstruct (the simulator's checker does: I18)",
                        region.views.join(", ")
                    ));
                }
                tasks.push(TaskPlan {
                    id,
                    plan,
                    lanes,
                    unreadable,
                    moved,
                });
            }
        }
        tasks
    }

    /// The records read that lie beyond the cut (module docs, *At a
    /// consistent cut*), found without a search: of each task that
    /// committed while the logs were read, every record of a partition it
    /// writes (sinks, dead letters) whose stamp claims one of its lanes at or
    /// beyond the lane's committed offset (an effect of a delivery the cut
    /// does not hold), every dead letter naming such a delivery, and every
    /// tick later than the cut's checkpoint's tick time. The changelog carries no stamps: what of a moving task's changelog
    /// its committed deliveries do not write is beyond the cut too, counted
    /// after the reconstruction.
    pub(super) fn beyond_cut(&self, tasks: &[TaskPlan<'a>]) -> Beyond {
        let mut beyond = Beyond::new();
        for task in tasks.iter().filter(|task| task.moved) {
            let claims_beyond = |stamp: &Stamp| {
                stamp.claims().iter().any(|claim| {
                    task.lanes
                        .iter()
                        .any(|lane| lane.tp == claim.tp && claim.offset >= lane.committed)
                })
            };
            let plan = task.plan;
            let mut written: Vec<Tp> = Vec::new();
            for sink in plan.stage.sinks() {
                let partitions = self.assembly.partitions_of(sink.name.as_str()).unwrap_or(0);
                written
                    .extend((0..partitions).map(|partition| Tp::new(sink.name.clone(), partition)));
            }
            if let Some(topic) = &plan.dead_letter {
                written.push(Tp::new(topic.clone(), task.id.partition));
            }
            for tp in &written {
                let Some(log) = self.index.get(tp) else {
                    continue;
                };
                for (index, record) in log.records.iter().enumerate() {
                    let names_beyond = plan.dead_letter.as_ref() == Some(&tp.topic)
                        && DeadLetter::from_record(&record.data).is_ok_and(|letter| {
                            task.lanes
                                .iter()
                                .any(|lane| lane.tp == letter.tp && letter.offset >= lane.committed)
                        });
                    if names_beyond || claims_beyond(log.stamp(index)) {
                        beyond.insert((tp.clone(), record.offset));
                    }
                }
            }
            if let Some(lane) = task.lanes.iter().find(|lane| lane.tick) {
                let tick_at = task
                    .lanes
                    .first()
                    .and_then(|lane| self.logs.committed(&plan.group, &lane.tp))
                    .and_then(|committed| Checkpoint::decode(&committed.metadata).ok())
                    .and_then(|checkpoint| checkpoint.last_tick_at);
                for record in lane.log.records {
                    if tick_at.is_none_or(|at| record.data.timestamp > at) {
                        beyond.insert((lane.tp.clone(), record.offset));
                    }
                }
            }
        }
        beyond
    }

    /// G4, G7, T6: the committed checkpoint against the committed prefix and
    /// the committed ticks; I1 for prefix records whose stamps do not decode.
    ///
    /// With the dead-letter opt-in a prefix record whose stamp does not
    /// decode is not I1: the task dead-letters it (`bad-stamp`), which the
    /// reconstruction checks. A record the operator skipped is claimed by
    /// the history, but its stamp merged only if the gate let it through
    /// (docs/RULES.md#skip), which depends on the interleaving: the
    /// checkpoint must lie between the two.
    pub(super) fn check_checkpoint(
        &mut self,
        task: &TaskPlan<'a>,
        dead: Option<&DeadLetters<'a>>,
        beyond: &Beyond,
    ) {
        if task.plan.region.is_some() {
            // Its history claims what it delivered out of offset order
            // (V4): not a prefix of each lane.
            return;
        }
        let id = &task.id;
        let mut expected = Stamp::empty();
        let mut skipped_stamps = Stamp::empty();
        let mut skips = 0;
        for (lane_index, lane) in task.lanes.iter().enumerate() {
            for index in 0..lane.len {
                let record = &lane.log.records[index];
                if dead.is_some_and(|dead| dead.skips(lane_index, record.offset)) {
                    skipped_stamps.merge(lane.log.stamp(index));
                    expected.claim(&lane.tp, record.offset);
                    skips += 1;
                    continue;
                }
                if let Err(error) = &lane.log.stamps[index] {
                    if dead.is_some() {
                        expected.claim(&lane.tp, record.offset);
                        continue;
                    }
                    self.violation(
                        Invariant::I1,
                        0,
                        format!(
                            "task {id} delivered {}@{} in its committed history, but its stamp header does not decode ({error}): the gate must hold it as poison",
                            lane.tp, record.offset
                        ),
                    );
                }
                expected.merge(lane.log.stamp(index));
                expected.claim(&lane.tp, record.offset);
            }
            self.summary.deliveries += lane.len;
            if lane.tick {
                self.summary.ticks_delivered += lane.len;
            }
        }
        let committed: Vec<(&Tp, &CommittedOffset)> = task
            .lanes
            .iter()
            .filter_map(|lane| Some((&lane.tp, self.logs.committed(&task.plan.group, &lane.tp)?)))
            .collect();
        let mut checkpoint = Checkpoint {
            history: Stamp::empty(),
            last_tick_at: None,
            epochs: None,
        };
        if let Some((first_tp, first)) = committed.first() {
            for (tp, offset) in &committed[1..] {
                if offset.metadata != first.metadata {
                    self.violation(
                        Invariant::I5,
                        0,
                        format!("task {id}: the committed offsets of {first_tp} and {tp} carry different checkpoints (X1, docs/RULES.md#x1: one transaction commits every lane with one checkpoint)"),
                    );
                    break;
                }
            }
            match Checkpoint::decode(&first.metadata) {
                Ok(decoded) => checkpoint = decoded,
                Err(error) => {
                    self.violation(
                        Invariant::I5,
                        0,
                        format!("task {id}: the committed offset of {first_tp} carries no checkpoint (G7): {error}"),
                    );
                    return;
                }
            }
        }
        let upper = expected.merged(&skipped_stamps);
        if skips == 0 && checkpoint.history != expected {
            self.violation(
                Invariant::I5,
                0,
                format!(
                    "task {id}: the committed history {} is not the merge of the stamps of its committed deliveries plus a claim on each, {expected} (G4, G7)",
                    checkpoint.history
                ),
            );
        } else if skips > 0
            && !(checkpoint.history.dominates(&expected) && upper.dominates(&checkpoint.history))
        {
            self.violation(
                Invariant::I5,
                0,
                format!(
                    "task {id}: the committed history {} is not the merge of the stamps of its committed deliveries plus a claim on each, {expected}, with at most the stamps of its {skips} skipped records, {upper} (G4, G7)",
                    checkpoint.history
                ),
            );
        }
        if let Some(tick_lane) = task.lanes.iter().find(|lane| lane.tick) {
            // The last tick of the cut: ticks of transactions committed
            // after it lie beyond.
            let last = tick_lane
                .log
                .records
                .iter()
                .rev()
                .filter(|record| !beyond.contains(&(tick_lane.tp.clone(), record.offset)))
                .find_map(|record| tick_of(record).map(|tick| (record.offset, tick.timestamp)));
            if checkpoint.last_tick_at != last.map(|(_, time)| time) {
                let committed_tick = match last {
                    Some((offset, time)) => format!("{}@{offset} at {time}", tick_lane.tp),
                    None => "none".to_string(),
                };
                self.violation(
                    Invariant::I4,
                    0,
                    format!(
                        "task {id}: the committed tick time is {:?}, but the last committed tick is {committed_tick} (T6: the tick time commits with its tick)",
                        checkpoint.last_tick_at
                    ),
                );
            }
        }
    }

    /// I10 over every committed record of every task's partition of its
    /// stage's dead-letter topic (X5), independent of the interleaving: it
    /// reads as a dead letter (`crate::DeadLetter::from_record`), names the
    /// stage, names a record of the task's committed prefix (a committed
    /// delivery), holds that record's key and value, and no other committed
    /// dead letter names the same record. Returns, per task (`None` without
    /// the opt-in), the dead letters that name a committed delivery, for the
    /// reconstruction to match; a dead letter that names none is reported
    /// here and not matched.
    pub(super) fn check_dead_letters(
        &mut self,
        tasks: &[TaskPlan<'a>],
        beyond: &Beyond,
    ) -> Vec<Option<DeadLetters<'a>>> {
        let index = self.index;
        let mut all = Vec::with_capacity(tasks.len());
        // Per stage, the record each dead letter names, to the first dead
        // letter naming it.
        let mut named: BTreeMap<(&str, Tp, u64), (Tp, u64)> = BTreeMap::new();
        for task in tasks {
            let Some(topic) = &task.plan.dead_letter else {
                all.push(None);
                continue;
            };
            let id = &task.id;
            let tp = Tp::new(topic.clone(), id.partition);
            let log = index.get(&tp);
            let mut dead = DeadLetters {
                log,
                entries: Vec::new(),
                by_source: HashMap::new(),
            };
            for (record_index, record) in log.map_or(&[][..], |log| log.records).iter().enumerate()
            {
                self.summary.dead_letters += 1;
                let at = format!("{tp}@{}", record.offset);
                let letter = match DeadLetter::from_record(&record.data) {
                    Ok(letter) => letter,
                    Err(error) => {
                        self.violation(
                            Invariant::I10,
                            0,
                            format!(
                                "{at} on dead-letter topic {topic} is not a dead letter: {error}"
                            ),
                        );
                        continue;
                    }
                };
                if letter.kind == DeadLetterKind::Skipped {
                    self.summary.dead_letters_skipped += 1;
                }
                let source = format!("{}@{}", letter.tp, letter.offset);
                if let Some((first_tp, first)) = named.insert(
                    (&*id.stage, letter.tp.clone(), letter.offset),
                    (tp.clone(), record.offset),
                ) {
                    self.violation(
                        Invariant::I10,
                        0,
                        format!("{source} is dead-lettered twice in the committed logs: at {first_tp}@{first} and {at}"),
                    );
                    continue;
                }
                if *letter.stage != *id.stage {
                    self.violation(
                        Invariant::I10,
                        0,
                        format!(
                            "{at}, the dead letter of {source}, names stage {:?}, but {topic} is stage {:?}'s",
                            letter.stage, id.stage
                        ),
                    );
                }
                let delivered = task
                    .lanes
                    .iter()
                    .position(|lane| lane.tp == letter.tp)
                    .and_then(|lane| {
                        let at = task.lanes[lane].log.index_of(letter.offset)?;
                        (at < task.lanes[lane].len).then_some((lane, at))
                    });
                let Some((lane, named_index)) = delivered else {
                    if task.unreadable.is_none() && !beyond.contains(&(tp.clone(), record.offset)) {
                        self.violation(
                            Invariant::I10,
                            0,
                            format!(
                                "{at} ({}) dead-letters {source}, which is not a committed delivery of task {id} (task {id} writes {tp}; it consumes {})",
                                letter.kind,
                                task.lanes
                                    .iter()
                                    .map(|lane| format!("{} below {}", lane.tp, lane.committed))
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ),
                        );
                    }
                    continue;
                };
                let original = &task.lanes[lane].log.records[named_index];
                if original.data.key != record.data.key || original.data.value != record.data.value
                {
                    self.violation(
                        Invariant::I10,
                        0,
                        format!(
                            "{at} {}, the dead letter of {source}, does not hold that record's key and value {}",
                            describe_record(record),
                            describe_record(original)
                        ),
                    );
                }
                dead.by_source
                    .insert((lane, letter.offset), dead.entries.len());
                dead.entries.push((record_index, letter.kind));
            }
            all.push(Some(dead));
        }
        all
    }

    /// The tasks that may have written each record of each sink partition.
    pub(super) fn attribute(&self, tasks: &[TaskPlan<'a>]) -> BTreeMap<(Tp, usize), Vec<usize>> {
        let mut candidates = BTreeMap::new();
        let mut sinks: BTreeSet<&crate::TopicName> = BTreeSet::new();
        for plan in self.app.stages() {
            for sink in plan.stage.sinks() {
                sinks.insert(&sink.name);
            }
        }
        for topic in sinks {
            let partitions = self.assembly.partitions_of(topic.as_str()).unwrap_or(0);
            let writers: Vec<usize> = tasks
                .iter()
                .enumerate()
                .filter(|(_, task)| {
                    task.plan
                        .stage
                        .sinks()
                        .iter()
                        .any(|sink| sink.name == *topic)
                })
                .map(|(index, _)| index)
                .collect();
            for partition in 0..partitions {
                let tp = Tp::new(topic.clone(), partition);
                let Some(log) = self.index.get(&tp) else {
                    continue;
                };
                for (index, record) in log.records.iter().enumerate() {
                    let placed: Vec<usize> = writers
                        .iter()
                        .copied()
                        .filter(|&writer| {
                            record.data.key.is_some()
                                || tasks[writer].id.partition % partitions == partition
                        })
                        .collect();
                    let stamp = log.stamp(index);
                    let claimed: Vec<usize> = placed
                        .iter()
                        .copied()
                        .filter(|&writer| {
                            tasks[writer]
                                .lanes
                                .iter()
                                .any(|lane| stamp.offset(&lane.tp).is_some())
                        })
                        .collect();
                    let chosen = if claimed.is_empty() { placed } else { claimed };
                    candidates.insert((tp.clone(), index), chosen);
                }
            }
        }
        candidates
    }
}
