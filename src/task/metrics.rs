//! Task metrics (T8). The core counts; drivers export.

use std::collections::BTreeMap;

use crate::operator::Counter;

/// Counters and gauges of one task.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaskMetrics {
    /// Tick records committed: counted when the transaction holding the tick
    /// commits, so once per committed tick.
    pub ticks_emitted_total: u64,
    /// Deliveries to logic, including ones later undone by an abort.
    pub records_delivered_total: u64,
    /// Records consumed but held behind an unresolved claim, at the last look.
    pub records_held: u64,
    /// `transactions-committed-total`: transactions this task committed.
    pub transactions_committed_total: u64,
    /// `transactions-aborted-total`: transactions this task aborted.
    pub transactions_aborted_total: u64,
    /// Deliveries of an offset that an aborted transaction had delivered before.
    pub records_redelivered_total: u64,
    /// Deliveries that dead-lettered their record (X5's opt-in), including
    /// ones later undone by an abort; each also counts as delivered.
    pub records_dead_lettered_total: u64,
    /// What the stage's operator counts, by published name, including
    /// deliveries later undone by an abort: a windowed aggregation's
    /// records too late for one of their windows
    /// (`window-records-late-total`, W3), a timer service's requests for a
    /// time before their own timestamp (`timer-requests-late-total`, K2).
    /// A name the operator has not counted yet is absent.
    pub operator_counts: BTreeMap<&'static str, u64>,
}

impl TaskMetrics {
    /// No counts yet, with each of `counters` (the stage's operators') at 0.
    pub(crate) fn counting<'a>(counters: impl IntoIterator<Item = &'a Counter>) -> TaskMetrics {
        TaskMetrics {
            operator_counts: counters
                .into_iter()
                .map(|counter| (counter.name, 0))
                .collect(),
            ..TaskMetrics::default()
        }
    }

    /// The metrics under their published names: the task's own, then its
    /// operator's counters.
    pub fn named(&self) -> Vec<(&'static str, u64)> {
        let own = [
            ("ticks-emitted-total", self.ticks_emitted_total),
            ("records-delivered-total", self.records_delivered_total),
            ("records-held", self.records_held),
            (
                "transactions-committed-total",
                self.transactions_committed_total,
            ),
            (
                "transactions-aborted-total",
                self.transactions_aborted_total,
            ),
            ("records-redelivered-total", self.records_redelivered_total),
            (
                "records-dead-lettered-total",
                self.records_dead_lettered_total,
            ),
        ];
        own.into_iter()
            .chain(
                self.operator_counts
                    .iter()
                    .map(|(name, count)| (*name, *count)),
            )
            .collect()
    }

    /// An operator's counter `name`: 0 until it counts one.
    pub fn operator_count(&self, name: &str) -> u64 {
        self.operator_counts.get(name).copied().unwrap_or(0)
    }

    /// Counts one more of the operator's counter `name`.
    pub(crate) fn count(&mut self, name: &'static str) {
        *self.operator_counts.entry(name).or_insert(0) += 1;
    }
}
