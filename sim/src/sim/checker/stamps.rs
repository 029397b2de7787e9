//! I5: stamp inheritance. Each emission and tick carries exactly the
//! history merged with the stamps of the held records (G5), and the history
//! a task commits is the merge of its committed deliveries' stamps (G4, G7).

use std::borrow::Cow;
use std::rc::Rc;

use parsley::TaskId;
use parsley::{Claim, Stamp, Tp};

use crate::sim::world::trace::TaskAt;

use super::reconstruction::{committed_of, Committed, Delivery, Instance};
use super::{Checker, Invariant, Relation};

/// The claims of `expected` that `actual` does not make (or makes on an
/// earlier offset), as missing; then those of `actual` beyond `expected`,
/// as extra: how an emission's or tick's stamp differs from what it
/// should inherit (I5).
pub(super) fn stamp_difference(actual: &Stamp, expected: &Stamp) -> Vec<(Relation, Claim)> {
    let beyond = |stamp: &Stamp, other: &Stamp, relation: Relation| {
        stamp
            .claims()
            .iter()
            .filter(|claim| {
                other
                    .offset(&claim.tp)
                    .is_none_or(|offset| offset < claim.offset)
            })
            .map(|claim| (relation, claim.clone()))
            .collect::<Vec<_>>()
    };
    let mut difference = beyond(expected, actual, Relation::Missing);
    difference.extend(beyond(actual, expected, Relation::Extra));
    difference
}

impl<'a> Checker<'a> {
    /// I5 (G5, exact): every emission of a delivery carries the history
    /// (which has just merged the delivered record's stamp and claimed it)
    /// merged with the stamps of the held records.
    pub(super) fn check_emission_stamps(
        &mut self,
        step: u64,
        at: &TaskAt,
        (tp, offset): (&Tp, u64),
        stamp: &Stamp,
        sent: &[(Tp, u64)],
        instance: &Instance,
    ) {
        let (history, lanes) = (&instance.history, &instance.lanes);
        let mut expected: Option<Cow<Stamp>> = None;
        for (sent_tp, sent_offset) in sent {
            if self
                .input
                .app
                .changelog_owner(sent_tp.topic.as_str())
                .is_some()
            {
                continue;
            }
            let expected = expected.get_or_insert_with(|| self.expected_stamp(history, lanes));
            let sent_id = self.tps.id(sent_tp);
            // The expected stamp claims the delivered record and its causes
            // (the history merged them), so an emission carrying it is right.
            if self.tps.carries(sent_id, *sent_offset, expected) {
                continue;
            }
            let actual = self.tps.stamp(sent_id, *sent_offset);
            let actual: &Stamp = actual.as_deref().unwrap_or(&self.tps.empty);
            let mut inherited = stamp.clone();
            inherited.claim(tp, offset);
            let message = if !actual.dominates(&inherited) {
                format!("{at} emitted {sent_tp}@{sent_offset} while delivering {tp}@{offset} with stamp {actual}, which does not claim the delivered record and its causes {inherited}")
            } else if *actual != **expected {
                format!("{at} emitted {sent_tp}@{sent_offset} while delivering {tp}@{offset} with stamp {actual}; the history merged with the held records is {expected}")
            } else {
                continue;
            };
            let difference = stamp_difference(actual, expected);
            let actual = actual.clone();
            let violation = self
                .violation(Invariant::I5, step, message)
                .on(at)
                .about(sent_tp, *sent_offset)
                .stamped(&actual)
                .naming(Relation::Delivering, tp, offset, None);
            for (relation, claim) in difference {
                let gate = lanes.gate(&claim, None);
                violation.naming(relation, &claim.tp, claim.offset, gate);
            }
        }
    }

    /// I5 (G5, exact): a tick carries exactly the history merged with the
    /// held stamps.
    pub(super) fn check_tick_stamp(
        &mut self,
        step: u64,
        at: &TaskAt,
        (tp, offset): (&Tp, u64),
        instance: &Instance,
    ) {
        let expected = self.expected_stamp(&instance.history, &instance.lanes);
        let id = self.tps.id(tp);
        // The expected stamp claims the history (it merged it).
        if self.tps.carries(id, offset, &expected) {
            return;
        }
        let actual = self.tps.stamp(id, offset);
        let actual: &Stamp = actual.as_deref().unwrap_or(&self.tps.empty);
        let message = if !actual.dominates(&instance.history) {
            format!("{at} emitted tick {tp}@{offset} with stamp {actual}, which does not claim the task's history {}", instance.history)
        } else if *actual != *expected {
            format!("{at} emitted tick {tp}@{offset} with stamp {actual}; the history merged with the held records is {expected}")
        } else {
            return;
        };
        let difference = stamp_difference(actual, &expected);
        let actual = actual.clone();
        let violation = self
            .violation(Invariant::I5, step, message)
            .on(at)
            .about(tp, offset)
            .stamped(&actual);
        for (relation, claim) in difference {
            let gate = instance.lanes.gate(&claim, None);
            violation.naming(relation, &claim.tp, claim.offset, gate);
        }
    }

    /// I5 (G4, G7): the history a task committed in its checkpoint is the
    /// merge of the stamps of its committed deliveries plus a claim on each:
    /// what a restarted task resumes from, so a history cut short (a lost
    /// claim on a wide application) is seen even before a restart.
    pub(super) fn check_committed_checkpoints(&mut self, committed: &Committed<'a>) {
        let tasks: Vec<TaskId> = self.input.assembly.task_ids();
        for task in tasks {
            let plan = self
                .input
                .app
                .stage(&task.stage)
                .expect("tasks belong to stages");
            let Some(checkpoint) = self.consumed_tps(&task).iter().find_map(|tp| {
                let offset = self.input.cluster.committed(&plan.group, tp)?;
                parsley::Checkpoint::decode(&offset.metadata).ok()
            }) else {
                continue;
            };
            let deliveries = committed_of(committed, &task);
            let mut expected = Stamp::empty();
            // The first delivery whose stamp or claim the history lost.
            let mut lost: Option<(&Delivery<'a>, Rc<Stamp>)> = None;
            for delivery in deliveries {
                // A stamp that does not decode is I1's to report.
                let Some(stamp) = self.tps.stamp(delivery.id, delivery.offset) else {
                    continue;
                };
                let mut caused = (*stamp).clone();
                caused.merge(&Stamp::from_claims([Claim::new(
                    delivery.tp.clone(),
                    delivery.offset,
                )]));
                if lost.is_none() && !checkpoint.history.dominates(&caused) {
                    lost = Some((delivery, Rc::clone(&stamp)));
                }
                expected.merge(&caused);
            }
            if checkpoint.history != expected {
                // Dated at the delivery whose cause was lost, if one was.
                let step = lost
                    .as_ref()
                    .map(|(delivery, _)| delivery.step)
                    .or_else(|| deliveries.last().map(|delivery| delivery.step))
                    .unwrap_or(0);
                let violation = self
                    .violation(
                        Invariant::I5,
                        step,
                        format!(
                            "task {task}: the committed history {} is not the merge of the stamps of its committed deliveries plus a claim on each, {expected} (G4, G7)",
                            checkpoint.history
                        ),
                    )
                    .of_task(&task);
                if let Some((delivery, stamp)) = lost {
                    violation
                        .on(delivery.at)
                        .about(delivery.tp, delivery.offset)
                        .stamped(&stamp)
                        .naming(Relation::Delivering, delivery.tp, delivery.offset, None);
                }
            }
        }
    }
}
