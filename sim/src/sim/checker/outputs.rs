//! I7: exactly-once outputs. What a committed delivery wrote is what its
//! logic emits, and every committed record a stage wrote comes from a
//! committed delivery or tick.

use std::collections::BTreeSet;

use parsley::TaskId;
use parsley::{TopicName, Tp};

use crate::model::EntryStatus;
use crate::sim::world::trace::Event;

use super::reconstruction::{Delivery, Tps};
use super::{Checker, Invariant, Relation};

/// Per tp number, by offset: whether a committed delivery or tick wrote it.
#[derive(Default)]
pub(super) struct Accounted {
    marks: Vec<Vec<bool>>,
}

impl Accounted {
    /// Marks `tp@offset` as written by a committed delivery or tick.
    pub(super) fn mark(&mut self, tps: &mut Tps<'_>, tp: &Tp, offset: u64) {
        let id = tps.id(tp);
        if self.marks.len() <= id {
            self.marks.resize(id + 1, Vec::new());
        }
        let marks = &mut self.marks[id];
        let index = offset as usize;
        if marks.len() <= index {
            let end = tps.log(id).map_or(0, |log| log.high_watermark() as usize);
            marks.resize(end.max(index + 1), false);
        }
        marks[index] = true;
    }

    /// The marks of the tp numbered `id`, by offset (none beyond the end).
    fn marks(&self, id: usize) -> &[bool] {
        self.marks.get(id).map_or(&[][..], Vec::as_slice)
    }
}

impl<'a> Checker<'a> {
    /// I7 (and I10 for dead-letter topics): every committed record a
    /// stage wrote comes from a committed delivery (outputs, changelogs,
    /// dead letters) or a committed tick check.
    pub(super) fn check_outputs_accounted(&mut self, mut accounted: Accounted) {
        // Every committed record a task wrote must come from a committed
        // delivery (outputs, changelogs) or a committed tick check.
        for entry in self.input.trace {
            match &entry.event {
                Event::TickChecked {
                    emitted: Some((tp, offset)),
                    ..
                } => {
                    let id = self.tps.id(tp);
                    if self.tps.status(id, *offset) == Some(EntryStatus::Committed) {
                        accounted.mark(&mut self.tps, tp, *offset);
                    }
                }
                // A commit's progress records (V4), whether or not its
                // transaction delivered anything.
                Event::Committed { sent, .. } => {
                    for (tp, offset) in sent.iter() {
                        let id = self.tps.id(tp);
                        let progress = self
                            .tps
                            .data(id, *offset)
                            .is_some_and(parsley::header::is_progress);
                        if progress && self.tps.status(id, *offset) == Some(EntryStatus::Committed)
                        {
                            accounted.mark(&mut self.tps, tp, *offset);
                        }
                    }
                }
                _ => {}
            }
        }
        let written: BTreeSet<TopicName> = self
            .input
            .app
            .stages()
            .iter()
            .flat_map(|plan| {
                plan.stage
                    .sinks()
                    .iter()
                    .map(|sink| sink.name.clone())
                    .chain(plan.changelog.clone())
                    .chain(plan.dead_letter.clone())
            })
            .collect();
        let dead_letter_topics: BTreeSet<TopicName> = self
            .input
            .app
            .stages()
            .iter()
            .filter_map(|plan| plan.dead_letter.clone())
            .collect();
        for topic in written {
            let partitions = self
                .input
                .assembly
                .partitions_of(topic.as_str())
                .unwrap_or(0);
            for partition in 0..partitions {
                let tp = Tp::new(topic.clone(), partition);
                let id = self.tps.id(&tp);
                let Some(log) = self.tps.log(id) else {
                    continue;
                };
                let marks = accounted.marks(id);
                let unaccounted: Vec<u64> = log
                    .read_committed()
                    .map(|(offset, _)| offset)
                    .filter(|&offset| !marks.get(offset as usize).copied().unwrap_or(false))
                    .collect();
                let invariant = if dead_letter_topics.contains(&topic) {
                    Invariant::I10
                } else {
                    Invariant::I7
                };
                for offset in unaccounted {
                    let writer = self.writer_of(&tp, offset);
                    let step = writer.map_or(0, |entry| entry.step);
                    let violation = self
                        .violation(
                            invariant,
                            step,
                            format!(
                                "{tp}@{offset} is committed but no committed delivery wrote it"
                            ),
                        )
                        .about(&tp, offset);
                    if let Some(Event::Delivered {
                        at,
                        tp: delivered,
                        offset: delivered_offset,
                        ..
                    }) = writer.map(|entry| &entry.event)
                    {
                        violation.on(at).naming(
                            Relation::Delivering,
                            delivered,
                            *delivered_offset,
                            None,
                        );
                    }
                }
            }
        }
    }

    /// I7: what a committed delivery wrote, its changelog records aside, is
    /// what the stage's logic emits for it, record for record.
    pub(super) fn compare_emissions(
        &mut self,
        task: &TaskId,
        delivery: &Delivery,
        expected: &[parsley::Emission],
    ) {
        let sent = delivery.sent;
        let app = self.input.app;
        let actual = || {
            sent.iter()
                .filter(|(tp, _)| app.changelog_owner(tp.topic.as_str()).is_none())
        };
        let describe = |emissions: &[parsley::Emission]| {
            emissions
                .iter()
                .map(|emission| format!("{emission:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let count = actual().count();
        if count != expected.len() {
            let message = format!(
                "task {task}: delivering {}@{} committed {} records, but its logic emits [{}]",
                delivery.tp,
                delivery.offset,
                count,
                describe(expected)
            );
            self.violation(Invariant::I7, delivery.step, message)
                .on(delivery.at)
                .about(delivery.tp, delivery.offset);
            return;
        }
        for ((tp, offset), emission) in actual().zip(expected) {
            let id = self.tps.id(tp);
            let Some(data) = self.tps.data(id, *offset) else {
                continue;
            };
            let Ok((key, value)) = emission.encoded() else {
                continue;
            };
            let same = tp.topic == *emission.topic()
                && data.key.as_ref() == key
                && data.value.as_ref() == value;
            if !same {
                self.violation(
                    Invariant::I7,
                    delivery.step,
                    format!("task {task}: delivering {}@{} committed {tp}@{offset}, but its logic emits {emission:?}", delivery.tp, delivery.offset),
                )
                .on(delivery.at)
                .about(tp, *offset)
                .naming(Relation::Delivering, delivery.tp, delivery.offset, None);
            }
        }
    }

    /// I7 for a consistent view (V5): the outputs its commit wrote (after
    /// `delivery`, the last of the transaction) are, epoch by epoch, the
    /// last emission per topic and key of the transaction's deliveries of
    /// that epoch (`held`), each with the cut just above its epoch.
    pub(super) fn compare_releases(
        &mut self,
        task: &TaskId,
        delivery: &Delivery,
        held: &super::state::Held,
    ) {
        let held: Vec<(i64, &parsley::Emission)> = held
            .iter()
            .flat_map(|(epoch, emissions)| {
                emissions
                    .iter()
                    .map(move |(_, emission)| (*epoch, emission))
            })
            .collect();
        let app = self.input.app;
        let released: Vec<(Tp, u64)> = delivery
            .commit
            .unwrap_or_default()
            .iter()
            .filter(|(tp, _)| app.changelog_owner(tp.topic.as_str()).is_none())
            .filter(|(tp, offset)| {
                let id = self.tps.id(tp);
                !self
                    .tps
                    .data(id, *offset)
                    .is_some_and(parsley::header::is_progress)
            })
            .cloned()
            .collect();
        let describe = || {
            held.iter()
                .map(|(epoch, emission)| format!("{emission:?} of epoch {epoch}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        if released.len() != held.len() {
            let message = format!(
                "task {task}: the consistent view's commit after {}@{} wrote {} outputs, but the last of each key its logic emitted in the transaction are [{}] (V5)",
                delivery.tp,
                delivery.offset,
                released.len(),
                describe()
            );
            self.violation(Invariant::I7, delivery.step, message)
                .on(delivery.at)
                .about(delivery.tp, delivery.offset);
            return;
        }
        for ((tp, offset), (epoch, emission)) in released.iter().zip(held) {
            let id = self.tps.id(tp);
            let Some(data) = self.tps.data(id, *offset) else {
                continue;
            };
            let Ok((key, value)) = emission.encoded() else {
                continue;
            };
            let cut = parsley::header::cut_of(data);
            if cut != Some(epoch.saturating_add(1)) {
                self.violation(
                    Invariant::I7,
                    delivery.step,
                    format!("task {task}: the consistent view released {tp}@{offset} at cut {cut:?}, but it is its output at the end of epoch {epoch}: cut {} (V5)", epoch.saturating_add(1)),
                )
                .on(delivery.at)
                .about(tp, *offset);
                continue;
            }
            if tp.topic != *emission.topic()
                || data.key.as_ref() != key
                || data.value.as_ref() != value
            {
                self.violation(
                    Invariant::I7,
                    delivery.step,
                    format!("task {task}: the consistent view released {tp}@{offset}, but the last output of its key in epoch {epoch} is {emission:?} (V5)"),
                )
                .on(delivery.at)
                .about(tp, *offset);
            }
        }
    }
}
