//! What the operators' checkers (I12–I14) share: a walk over every stage
//! with an operator of one kind, what a delivery wrote to one topic, and
//! how a wrong delivery is told. Nothing here computes what an operator
//! should write: each checker keeps its own model.

use std::fmt::Write as _;

use bytes::Bytes;
use parsley::bytes_for_humans;
use parsley::{App, ConsumedRecord, Operator, StagePlan, TaskId, TopicName};

use super::purity::UserCalls;
use super::reconstruction::{Committed, Delivery};
use super::{Checker, Invariant};

/// A record a delivery wrote: its bytes, its timestamp, and where it is
/// (`tp@offset`).
pub(super) struct Written {
    pub(super) key: Option<Bytes>,
    pub(super) value: Option<Bytes>,
    pub(super) timestamp: i64,
    pub(super) at: String,
}

/// Bytes as a report shows them; `null` for none.
pub(super) fn describe(bytes: &Option<Bytes>) -> String {
    bytes
        .as_ref()
        .map_or("null".to_string(), |bytes| bytes_for_humans(bytes))
}

/// Appends what a delivery wrote to a report: how many records, then each
/// one's place, key and value (and timestamp, with `timestamps`).
pub(super) fn tell_written(message: &mut String, wrote: &[Written], timestamps: bool) {
    let _ = write!(message, " — it wrote {}", wrote.len());
    for written in wrote {
        let _ = write!(
            message,
            "; {}: key {} value {}",
            written.at,
            describe(&written.key),
            describe(&written.value)
        );
        if timestamps {
            let _ = write!(message, " @{}", written.timestamp);
        }
    }
}

impl<'a> Checker<'a> {
    /// An operator's model check for every stage with an operator `O`:
    /// [`Checker::check_each_task`] of the stage, with `check` told the
    /// stage's plan and operator.
    pub(super) fn check_each_operator<O: Operator, M>(
        &mut self,
        committed: &Committed<'a>,
        mut model: impl FnMut() -> M,
        mut check: impl FnMut(&mut Self, &'a StagePlan, &'a O, &TaskId, &Delivery<'a>, &mut M) -> bool,
    ) {
        let app: &'a App = self.input.app;
        for plan in app.stages() {
            let Some(operator) = plan.stage.hooks().operator::<O>() else {
                continue;
            };
            self.check_each_task(
                committed,
                plan.name(),
                &mut model,
                |checker, task, delivery, state| {
                    check(checker, plan, operator, task, delivery, state)
                },
            );
        }
    }

    /// The records `delivery` wrote to `topic`, in the order it wrote them.
    pub(super) fn written_to(
        &mut self,
        delivery: &Delivery<'a>,
        topic: Option<&TopicName>,
    ) -> Vec<Written> {
        let mut wrote = Vec::new();
        for (tp, offset) in delivery.sent {
            if topic != Some(&tp.topic) {
                continue;
            }
            let id = self.tps.id(tp);
            if let Some(data) = self.tps.data(id, *offset) {
                wrote.push(Written {
                    key: data.key.clone(),
                    value: data.value.clone(),
                    timestamp: data.timestamp,
                    at: format!("{tp}@{offset}"),
                });
            }
        }
        wrote
    }

    /// Reports I13 for a join's wrong delivery: `message`, what the join
    /// should have written, with what it wrote; then makes the delivery's
    /// calls of the user's logic again (S4). False: the task is reported.
    pub(super) fn report_join_delivery(
        &mut self,
        task: &TaskId,
        delivery: &Delivery<'a>,
        record: &ConsumedRecord,
        calls: &UserCalls<'_>,
        mut message: String,
        wrote: &[Written],
    ) -> bool {
        tell_written(&mut message, wrote, false);
        let found = self.violations.len();
        self.violation(Invariant::I13, delivery.step, message)
            .on(delivery.at)
            .about(delivery.tp, delivery.offset);
        self.name_impure_operator_logic(task, delivery, record, calls, found);
        false
    }
}
