//! I8: liveness. Once faults and inputs stop, the world quiesces and every
//! committed record of every consumed tp is delivered.

use std::collections::HashMap;

use parsley::TaskId;
use parsley::Tp;

use crate::sim::world::trace::Event;

use super::reconstruction::{committed_of, Committed};
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
            for tp in self.consumed_tps(&task) {
                let end = self.input.cluster.high_watermark(&tp).unwrap_or(0);
                let id = self.tps.id(&tp);
                let delivered = deliveries
                    .iter()
                    .filter(|delivery| delivery.id == id)
                    .count();
                let undelivered = self.tps.committed_offsets(id, 0, end).nth(delivered);
                let Some(undelivered) = undelivered else {
                    continue;
                };
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
                            format!("task {task} never delivered {tp}@{undelivered} ({delivered} of {records} committed records delivered)"),
                        )
                        .of_task(&task)
                        .about(&tp, undelivered);
                    }
                }
            }
        }
    }
}
