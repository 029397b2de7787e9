//! I16: timestamp order (G9). A stage declared with
//! `synchronise_by_timestamp` delivers, of its sources' deliverable heads,
//! the one with the lowest timestamp (ties broken by tp). Checked at every
//! delivery, committed or not, against the instance's gate as the checker
//! rebuilds it: no other source lane may have had a deliverable head that
//! came first. A held head (a claim on one of the task's tps not yet
//! delivered, G2) is not offered and does not count. The waits of G9 (for
//! a source behind its log, and up to `max_idle` for a caught-up one)
//! depend on log ends the driver read at the time, which the trace does not
//! keep: they are not checked here.

use parsley::Tp;

use crate::sim::world::trace::TaskAt;

use super::reconstruction::Lanes;
use super::{Checker, Gate, Invariant, Relation};

impl Checker<'_> {
    /// I16: `tp@offset`, about to be delivered from `lane`, is the
    /// deliverable source head with the lowest timestamp, for a stage that
    /// delivers in timestamp order.
    pub(super) fn check_timestamp_order(
        &mut self,
        step: u64,
        at: &TaskAt,
        (tp, offset): (&Tp, u64),
        lanes: &Lanes,
        lane: usize,
    ) {
        let app = self.input.app;
        let Some(plan) = app.stage(&at.task.stage) else {
            return;
        };
        if plan.stage.timestamp_sync().is_none() {
            return;
        }
        let is_source = |tp: &Tp| plan.tick_topic.as_ref() != Some(&tp.topic);
        if !is_source(tp) {
            return;
        }
        let Some(delivered) = self.tps.data(lanes.ids[lane], offset) else {
            return;
        };
        let delivered_at = delivered.timestamp;
        let dead_letters = plan.dead_letter.is_some();
        for other in 0..lanes.tps.len() {
            let other_tp = &lanes.tps[other];
            if other == lane || !is_source(other_tp) {
                continue;
            }
            let Some(&head) = lanes.buffers[other].front() else {
                continue;
            };
            let id = lanes.ids[other];
            let Some(data) = self.tps.data(id, head) else {
                continue;
            };
            if (data.timestamp, other_tp) >= (delivered_at, tp) {
                continue;
            }
            // Offered only if deliverable: no claim on one of the task's
            // tps still undelivered (a stamp that does not decode is
            // poison, deliverable only to a stage with a dead-letter topic).
            let held = match self.tps.stamp(id, head) {
                Some(stamp) => stamp
                    .claims()
                    .iter()
                    .any(|claim| matches!(lanes.gate(claim, None), Some(gate) if gate != Gate::Delivered)),
                None => !dead_letters,
            };
            if held {
                continue;
            }
            self.violation(
                Invariant::I16,
                step,
                format!(
                    "{at} delivered {tp}@{offset} (timestamp {delivered_at}), but {other_tp}@{head} \
                     (timestamp {}) was a deliverable head of another source: a stage that \
                     delivers in timestamp order offers the lowest first, ties to the lower tp",
                    data.timestamp
                ),
            )
            .on(at)
            .about(tp, offset)
            .naming(Relation::Due, other_tp, head, Some(Gate::Fetched));
            return;
        }
    }
}
