//! I8: liveness. Once faults and inputs stop, the world quiesces and every
//! committed record of every consumed tp is delivered.

use std::collections::{HashMap, HashSet};

use parsley::TaskId;
use parsley::Tp;

use crate::sim::world::trace::Event;

use super::reconstruction::{committed_of, written_epoch, Committed};
use super::{Checker, Invariant};

impl<'a> Checker<'a> {
    /// I8: once faults and inputs stopped, the world quiesced within its
    /// budget, nothing is held, and every committed record of every consumed
    /// tp was delivered — except behind a task that stopped on a poison
    /// record, which must sit exactly at that record.
    pub(super) fn check_liveness(&mut self, committed: &Committed<'a>) {
        let last_step = self.input.trace.last().map_or(0, |entry| entry.step);
        if !self.input.quiesced {
            self.violation(
                Invariant::I8,
                last_step,
                format!(
                    "the world did not quiesce within {} liveness steps",
                    self.input.liveness_steps
                ),
            );
            return;
        }
        let mut stopped: HashMap<TaskId, (Tp, u64)> = HashMap::new();
        for entry in self.input.trace {
            if let Event::TaskStopped { at, tp, offset, .. } = &entry.event {
                stopped.insert((*at.task).clone(), (tp.clone(), *offset));
            }
        }
        for task in self.input.assembly.task_ids() {
            let deliveries = committed_of(committed, &task);
            // On a path to a consistent view, records of epochs the task's
            // sources have not closed wait, at rest (V4).
            let open = self.open_epochs(&task);
            for tp in self.consumed_tps(&task) {
                let end = self.input.cluster.high_watermark(&tp).unwrap_or(0);
                let id = self.tps.id(&tp);
                let delivered: HashSet<u64> = deliveries
                    .iter()
                    .filter(|delivery| delivery.id == id)
                    .map(|delivery| delivery.offset)
                    .collect();
                let mut undelivered = self
                    .tps
                    .committed_offsets(id, 0, end)
                    .filter(|offset| !delivered.contains(offset));
                let Some(undelivered) = undelivered.next() else {
                    continue;
                };
                if let Some((horizon, epochs)) = &open {
                    let lane = epochs.get(&tp);
                    let waits = |offset: u64| {
                        lane.and_then(|epochs| epochs.get(&offset))
                            .is_some_and(|epoch| epoch >= horizon)
                    };
                    let late = self
                        .tps
                        .committed_offsets(id, 0, end)
                        .filter(|offset| !delivered.contains(offset))
                        .find(|offset| !waits(*offset));
                    let Some(late) = late else {
                        continue;
                    };
                    self.violation(
                        Invariant::I8,
                        last_step,
                        format!("task {task} never delivered {tp}@{late}, of an epoch below {horizon}, which every source of the task has closed (V4)"),
                    )
                    .of_task(&task)
                    .about(&tp, late);
                    continue;
                }
                // I2: the committed position never passes a committed record
                // the committed history has not delivered (that record would
                // be lost: no restart goes back for it), stopped task or not.
                let group = self.input.app.group_of(&task.stage).unwrap_or_default();
                if let Some(position) = self.input.cluster.committed(group, &tp) {
                    if position.offset > undelivered {
                        self.violation(
                            Invariant::I2,
                            last_step,
                            format!("task {task}: the committed position of {tp} is {}, past {tp}@{undelivered}, which its committed history never delivered", position.offset),
                        )
                        .of_task(&task)
                        .about(&tp, undelivered);
                        continue;
                    }
                }
                match stopped.get(&task) {
                    Some((poison_tp, poison)) if *poison_tp == tp && *poison == undelivered => {}
                    Some(_) => {}
                    None => {
                        let records = self.tps.committed_offsets(id, 0, end).count();
                        self.violation(
                            Invariant::I8,
                            last_step,
                            format!("task {task} never delivered {tp}@{undelivered} ({} of {records} committed records delivered)", delivered.len()),
                        )
                        .of_task(&task)
                        .about(&tp, undelivered);
                    }
                }
            }
        }
    }

    /// For a task on a path to a consistent view: the lowest epoch its
    /// sources' committed logs have not closed, and each source record's
    /// epoch, computed here from the logs (V3): on a source of the
    /// application, the running highest timestamp over the epoch length;
    /// on a topic stages write, its `parsley-epoch` header. `None` for any
    /// other task.
    fn open_epochs(&mut self, task: &TaskId) -> Option<(i64, EpochsOf)> {
        let app = self.input.app;
        let plan = app.stage(&task.stage)?;
        let region = plan.region.as_ref()?;
        let mut horizon = i64::MAX;
        let mut epochs = HashMap::new();
        for (source, writers) in plan.stage.sources().iter().zip(&region.writers) {
            let tp = Tp::new(source.name.clone(), task.partition);
            let id = self.tps.id(&tp);
            let mut lane = HashMap::new();
            let Some(log) = self.tps.log(id) else {
                continue;
            };
            if writers.is_empty() {
                let source = self.tps.source_epochs(id, region.epoch_ms);
                horizon = horizon.min(source.last().map_or(i64::MIN, |(_, epoch)| *epoch));
                lane.extend(source);
            } else {
                // Each writing task's highest epoch, from records and
                // progress records alike.
                let mut highest: HashMap<(&str, u32), i64> = HashMap::new();
                for stage in writers {
                    for partition in 0..self.input.assembly.tasks_of(stage).unwrap_or(0) {
                        highest.insert((stage.as_str(), partition), i64::MIN);
                    }
                }
                for (offset, data) in log.read_committed() {
                    let epoch_header = data.header(parsley::header::EPOCH_HEADER);
                    let header =
                        epoch_header.or_else(|| data.header(parsley::header::PROGRESS_HEADER));
                    let Some((epoch, writer)) = header.and_then(|value| written_epoch(value))
                    else {
                        continue;
                    };
                    if epoch_header.is_some() {
                        lane.insert(offset, epoch);
                    }
                    if let Some(high) = highest.get_mut(&writer) {
                        *high = (*high).max(epoch);
                    }
                }
                let lowest = highest.values().copied().min().unwrap_or(i64::MAX);
                horizon = horizon.min(lowest);
            }
            epochs.insert(tp, lane);
        }
        Some((horizon, epochs))
    }
}

/// Per consumed tp, the epoch of each committed record (V3).
type EpochsOf = HashMap<Tp, HashMap<u64, i64>>;
