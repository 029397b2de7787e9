//! I1, I2 and I3: causal delivery, exactly-once delivery in order, and no
//! aborted (or open) reads. Asked by the walk over the trace about each
//! fetch and delivery, and, once the walk is over, about each task's
//! committed history.

use std::rc::Rc;

use parsley::TaskId;
use parsley::{Stamp, Tp};

use crate::model::EntryStatus;
use crate::sim::world::trace::TaskAt;
use rustc_hash::FxHashMap;

use super::reconstruction::{committed_of, Committed, Delivery, Instance, Lanes};
use super::{Checker, Gate, Invariant, Relation};

impl<'a> Checker<'a> {
    /// I3: a fetch returns every committed record of its range, and only
    /// those (`found` is how many the log holds there).
    pub(super) fn check_fetched(
        &mut self,
        step: u64,
        at: &TaskAt,
        tp: &Tp,
        (from, next): (u64, u64),
        records: usize,
        found: usize,
    ) {
        if found != records {
            self.violation(
                Invariant::I3,
                step,
                format!("{at} fetched {records} records from {tp} [{from}, {next}), but {found} committed records lie there"),
            )
            .on(at);
        }
    }

    /// Checks a delivery against the instance's gate as rebuilt so far (I3,
    /// I1, I2, then I5 over what it emitted) and moves the gate and the
    /// history past it; returns it unless its instance or lane is unknown or
    /// its stamp does not decode.
    pub(super) fn on_delivered(
        &mut self,
        (step, now): (u64, i64),
        at: &'a TaskAt,
        tp: &'a Tp,
        offset: u64,
        sent: &'a [(Tp, u64)],
        instances: &mut FxHashMap<TaskAt, Instance>,
    ) -> Option<Delivery<'a>> {
        let instance = instances.get_mut(at);
        let lane = instance
            .as_deref()
            .and_then(|instance| instance.lanes.lane(tp));
        let id = match (&instance, lane) {
            (Some(instance), Some(lane)) => instance.lanes.ids[lane],
            _ => self.tps.id(tp),
        };
        self.check_read_committed(step, at, (tp, offset), id);
        let stamp = self.delivered_stamp(step, at, (tp, offset), id)?;
        let (instance, lane) = (instance?, lane?);
        if let Some(waits) = &mut instance.waits {
            // The delivery answers the task's being asked at `now` (G9).
            waits.asked(&instance.lanes, now);
            self.check_waits(
                (step, now),
                at,
                (tp, offset),
                (&instance.lanes, waits),
                lane,
            );
        }
        self.check_timestamp_order(step, at, (tp, offset), &instance.lanes, lane);
        self.check_head_of_lane(step, at, (tp, offset), &mut instance.lanes, lane);
        self.check_claims_delivered(step, at, (tp, offset), &stamp, &instance.lanes, lane);
        instance.history.merge(&stamp);
        instance.history.claim(tp, offset);
        self.check_emission_stamps(step, at, (tp, offset), &stamp, sent, instance);
        Some(Delivery {
            step,
            at,
            tp,
            id,
            offset,
            sent,
            commit: None,
        })
    }

    /// I3: only committed records are delivered.
    fn check_read_committed(
        &mut self,
        step: u64,
        at: &TaskAt,
        (tp, offset): (&Tp, u64),
        id: usize,
    ) {
        let status = self.tps.status(id, offset);
        if status != Some(EntryStatus::Committed) {
            self.violation(
                Invariant::I3,
                step,
                format!("{at} delivered {tp}@{offset}, which is {status:?} in the log"),
            )
            .on(at)
            .about(tp, offset);
        }
    }

    /// The delivered record's stamp; `None`, and an I1 violation, when its
    /// header does not decode in a stage without X5's opt-in.
    fn delivered_stamp(
        &mut self,
        step: u64,
        at: &TaskAt,
        (tp, offset): (&Tp, u64),
        id: usize,
    ) -> Option<Rc<Stamp>> {
        let dead_letters = self
            .input
            .app
            .stage(&at.task.stage)
            .is_some_and(|plan| plan.dead_letter.is_some());
        let stamp = match self.tps.stamp(id, offset) {
            // X5's opt-in: a stamp that does not decode is dead-lettered,
            // with no claims of its own (I10 checks the dead letter).
            None if dead_letters => Some(Rc::clone(&self.tps.empty)),
            stamp => stamp,
        };
        if stamp.is_none() {
            self.violation(
                Invariant::I1,
                step,
                format!("{at} delivered {tp}@{offset}, whose stamp header does not decode"),
            )
            .on(at)
            .about(tp, offset);
        }
        stamp
    }

    /// I2 (G3): the delivered record is the head of its lane, or, on a
    /// path to a consistent view (V4), the first buffered record of its
    /// writer; the lane moves past it if it is.
    fn check_head_of_lane(
        &mut self,
        step: u64,
        at: &TaskAt,
        (tp, offset): (&Tp, u64),
        lanes: &mut Lanes,
        lane: usize,
    ) {
        if lanes.by_writer.is_some() {
            let id = lanes.ids[lane];
            let writer = self.tps.writer(id, offset);
            let head = lanes.buffers[lane]
                .iter()
                .copied()
                .find(|buffered| *buffered == offset || self.tps.writer(id, *buffered) == writer);
            if head == Some(offset) {
                lanes.take(lane, offset);
                return;
            }
            let violation = self
                .violation(
                    Invariant::I2,
                    step,
                    format!("{at} delivered {tp}@{offset}, but the first buffered record of its writer was {head:?}"),
                )
                .on(at)
                .about(tp, offset);
            if let Some(head) = head {
                violation.naming(Relation::Due, tp, head, Some(Gate::Fetched));
            }
            return;
        }
        let head = lanes.buffers[lane].front().copied();
        if head != Some(offset) {
            let violation = self
                .violation(
                    Invariant::I2,
                    step,
                    format!("{at} delivered {tp}@{offset}, but the head of {tp} was {head:?}"),
                )
                .on(at)
                .about(tp, offset);
            if let Some(head) = head {
                violation.naming(Relation::Due, tp, head, Some(Gate::Fetched));
            }
        } else {
            lanes.buffers[lane].pop_front();
        }
    }

    /// I1: every claim on a consumed tp was delivered before, in this
    /// instance's view (the committed history plus its open transaction).
    fn check_claims_delivered(
        &mut self,
        step: u64,
        at: &TaskAt,
        (tp, offset): (&Tp, u64),
        stamp: &Stamp,
        lanes: &Lanes,
        lane: usize,
    ) {
        for claim in stamp.claims() {
            let Some(claimed_lane) = lanes.lane(&claim.tp) else {
                continue;
            };
            let position = lanes.position(claimed_lane);
            let passed = if claimed_lane == lane && lanes.by_writer.is_none() {
                offset > claim.offset
            } else {
                lanes.passed(claimed_lane, claim.offset)
            };
            if !passed {
                let violation = self
                    .violation(
                        Invariant::I1,
                        step,
                        format!("{at} delivered {tp}@{offset} before its claim {claim} was delivered (position of {} was {position})", claim.tp),
                    )
                    .on(at)
                    .about(tp, offset)
                    .stamped(stamp);
                // Every claim, with what the gate had done with it: the
                // unresolved one is why, the others are its context.
                for other in stamp.claims() {
                    let relation = if other == claim {
                        Relation::Unresolved
                    } else {
                        Relation::Claim
                    };
                    let gate = lanes.gate(other, Some((lane, offset)));
                    violation.naming(relation, &other.tp, other.offset, gate);
                }
            }
        }
    }

    /// I2: each task's committed deliveries of each consumed tp are exactly
    /// a prefix of that tp's committed records, in order, once each; on a
    /// path to a consistent view (V4), a prefix of each writer's records.
    pub(super) fn check_committed_histories(&mut self, committed: &Committed<'a>) {
        let tasks: Vec<TaskId> = self.input.assembly.task_ids();
        for task in tasks {
            let deliveries = committed_of(committed, &task);
            let by_writer = self
                .input
                .app
                .stage(&task.stage)
                .is_some_and(|plan| plan.region.is_some());
            for tp in self.consumed_tps(&task) {
                let end = self.input.cluster.high_watermark(&tp).unwrap_or(0);
                let id = self.tps.id(&tp);
                // One sequence per writer: the whole tp but by writer.
                let mut writers: Vec<(Option<Writer>, std::collections::VecDeque<u64>)> =
                    Vec::new();
                for offset in self.tps.committed_offsets(id, 0, end) {
                    let writer = by_writer.then(|| self.tps.writer(id, offset)).flatten();
                    match writers.iter_mut().find(|(known, _)| *known == writer) {
                        Some((_, records)) => records.push_back(offset),
                        None => writers.push((writer, [offset].into())),
                    }
                }
                let delivered = deliveries.iter().filter(|delivery| delivery.id == id);
                for delivery in delivered {
                    let writer = by_writer
                        .then(|| self.tps.writer(id, delivery.offset))
                        .flatten();
                    let expected = writers
                        .iter_mut()
                        .find(|(known, _)| *known == writer)
                        .and_then(|(_, records)| records.pop_front());
                    if expected != Some(delivery.offset) {
                        let message = match expected {
                            Some(expected) if delivery.offset > expected => format!("task {task} skipped {tp}@{expected}: its committed history delivers {tp}@{} next", delivery.offset),
                            Some(expected) => format!("task {task} delivered {tp}@{} again (or out of order) where {tp}@{expected} was due", delivery.offset),
                            None => format!("task {task} delivered {tp}@{}, beyond the committed records of {tp}", delivery.offset),
                        };
                        let violation = self
                            .violation(Invariant::I2, delivery.step, message)
                            .on(delivery.at)
                            .about(&tp, delivery.offset);
                        if let Some(expected) = expected {
                            violation.naming(Relation::Due, &tp, expected, None);
                        }
                        break;
                    }
                }
            }
        }
    }
}

/// A task writing a topic region stages read, as its stage and partition
/// (V3).
type Writer<'a> = (&'a str, u32);
