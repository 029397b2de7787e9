//! I10: dead letters (X5). Every committed record of a dead-letter topic is
//! a dead letter naming a record no other names, and every refused record
//! of a committed history is dead-lettered exactly as X5 says.

use std::collections::BTreeMap;

use parsley::ConsumedRecord;
use parsley::DeadLetterKind;
use parsley::TaskId;
use parsley::{App, TopicName, Tp};
use parsley::{ReplayError, Replayed};

use super::reconstruction::Delivery;
use super::{Checker, Invariant, Relation};

impl<'a> Checker<'a> {
    /// I10 over every committed record of every dead-letter topic: it reads
    /// as a dead letter, and names a record no other committed dead letter
    /// names (exactly once).
    pub(super) fn check_dead_letter_logs(&mut self) {
        let app: &'a App = self.input.app;
        for plan in app.stages() {
            let Some(topic) = &plan.dead_letter else {
                continue;
            };
            let partitions = self
                .input
                .assembly
                .partitions_of(topic.as_str())
                .unwrap_or(0);
            let mut named: BTreeMap<(Tp, u64), (Tp, u64)> = BTreeMap::new();
            for partition in 0..partitions {
                let tp = Tp::new(topic.clone(), partition);
                let id = self.tps.id(&tp);
                let Some(log) = self.tps.log(id) else {
                    continue;
                };
                for (offset, data) in log.read_committed() {
                    match parsley::DeadLetter::from_record(data) {
                        Err(error) => {
                            self.violation(
                                Invariant::I10,
                                0,
                                format!("{tp}@{offset} on dead-letter topic {topic} is not a dead letter: {error}"),
                            )
                            .about(&tp, offset);
                        }
                        Ok(letter) => {
                            let source = (letter.tp.clone(), letter.offset);
                            if let Some(first) = named.insert(source, (tp.clone(), offset)) {
                                self.violation(
                                    Invariant::I10,
                                    0,
                                    format!("{}@{} is dead-lettered twice in the committed logs: at {}@{} and {tp}@{offset}", letter.tp, letter.offset, first.0, first.1),
                                )
                                .about(&tp, offset)
                                .naming(Relation::Delivering, &letter.tp, letter.offset, None);
                            }
                        }
                    }
                }
            }
        }
    }

    /// I10 for one committed delivery in a stage with X5's opt-in: a record
    /// its logic refuses is dead-lettered ([`Checker::check_dead_letter`]),
    /// one it accepts is not. Whether the fold goes on with the delivery:
    /// a refused or wrongly dead-lettered one changes no slot.
    pub(super) fn check_refusal(
        &mut self,
        task: &TaskId,
        dead_letter: &TopicName,
        delivery: &Delivery<'a>,
        record: &ConsumedRecord,
        replayed: &Result<Replayed, ReplayError>,
    ) -> bool {
        let wrote_dead_letter = delivery.sent.iter().any(|(tp, _)| tp.topic == *dead_letter);
        match replayed {
            Err(error) => {
                match refused_as(error) {
                    // Refused: a dead letter of that kind and nothing else,
                    // and no slot change (the fold goes on without it).
                    Some(kind) => {
                        self.check_dead_letter(task, dead_letter, delivery, record, error, kind)
                    }
                    // Not a refusal of the record: the replay itself could
                    // not run, so the delivery cannot be judged. Said, never
                    // taken for a refusal.
                    None => {
                        self.violation(
                            Invariant::I10,
                            delivery.step,
                            format!(
                                "task {task}: the delivery of {}@{} cannot be judged: its replay failed ({error})",
                                delivery.tp, delivery.offset
                            ),
                        )
                        .on(delivery.at)
                        .about(delivery.tp, delivery.offset);
                    }
                }
                false
            }
            Ok(_) if wrote_dead_letter => {
                self.violation(
                    Invariant::I10,
                    delivery.step,
                    format!(
                        "task {task} dead-lettered {}@{}, which its logic accepts",
                        delivery.tp, delivery.offset
                    ),
                )
                .on(delivery.at)
                .about(delivery.tp, delivery.offset);
                false
            }
            Ok(_) => true,
        }
    }

    /// I10 for one committed delivery of a record the logic refuses, in a
    /// stage with X5's opt-in: it wrote one record, on the task's partition
    /// of the dead-letter topic, with the refused key and value and headers
    /// naming its stage, tp and offset; no emission and no changelog record.
    fn check_dead_letter(
        &mut self,
        task: &TaskId,
        dead_letter: &TopicName,
        delivery: &Delivery<'a>,
        record: &ConsumedRecord,
        error: &ReplayError,
        kind: DeadLetterKind,
    ) {
        let delivered = format!("{}@{}", delivery.tp, delivery.offset);
        let expected_tp = Tp::new(dead_letter.clone(), task.partition);
        let problem = match delivery.sent {
            [] => Some(format!("task {task} committed the delivery of {delivered}, which its logic refuses ({error}), but wrote no dead letter")),
            [(tp, offset)] if *tp == expected_tp => {
                let id = self.tps.id(tp);
                match self.tps.data(id, *offset).map(parsley::DeadLetter::from_record) {
                    None => Some(format!("task {task}: the dead letter {tp}@{offset} of {delivered} is not in the log")),
                    Some(Err(not)) => Some(format!("task {task}: {tp}@{offset}, written for {delivered}, is not a dead letter: {not}")),
                    Some(Ok(letter)) => {
                        if letter.tp != *delivery.tp || letter.offset != delivery.offset {
                            Some(format!("task {task}: the dead letter {tp}@{offset} of {delivered} names {}@{}", letter.tp, letter.offset))
                        } else if *letter.stage != *task.stage {
                            Some(format!("task {task}: the dead letter {tp}@{offset} of {delivered} names stage {:?}", letter.stage))
                        } else if letter.key != record.data.key || letter.value != record.data.value {
                            Some(format!("task {task}: the dead letter {tp}@{offset} does not hold the key and value of {delivered}"))
                        } else if letter.kind == DeadLetterKind::Skipped {
                            Some(format!("task {task}: {delivered} is dead-lettered as skipped, but the simulation skips nothing"))
                        } else if letter.kind != kind {
                            Some(format!("task {task}: {delivered} is dead-lettered as {}, but its logic refuses it as {} ({error})", letter.kind.name(), kind.name()))
                        } else {
                            None
                        }
                    }
                }
            }
            sent => Some(format!(
                "task {task} committed the delivery of {delivered}, which its logic refuses ({error}); it must write one dead letter to {expected_tp} and nothing else, but wrote {}",
                sent.iter().map(|(tp, offset)| format!("{tp}@{offset}")).collect::<Vec<_>>().join(", ")
            )),
        };
        if let Some(message) = problem {
            self.violation(Invariant::I10, delivery.step, message)
                .on(delivery.at)
                .about(delivery.tp, delivery.offset);
        }
    }
}

/// The dead letter's kind a replay's refusal of a record calls for: a
/// codec's refusal of its key or value, a state its codec refuses, or the
/// logic's own error or panic; `None` when the replay failed for another
/// reason than the record (it could not run at all).
fn refused_as(error: &ReplayError) -> Option<DeadLetterKind> {
    match error {
        ReplayError::Record { .. } => Some(DeadLetterKind::Codec),
        ReplayError::NewState(_) => Some(DeadLetterKind::StateCodec),
        ReplayError::Logic(_) => Some(DeadLetterKind::Logic),
        _ => None,
    }
}
