//! Task metrics (T8). The core counts; drivers export.

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
    /// A timer service's (K2) deliveries of requests for a time before
    /// their own timestamp, each fired at the service's next tick; including
    /// ones later undone by an abort.
    pub timer_requests_late_total: u64,
    /// A windowed aggregation's (W3) deliveries of records too late for at
    /// least one of their windows; including ones later undone by an abort.
    pub window_records_late_total: u64,
}

impl TaskMetrics {
    /// The metrics under their published names.
    pub fn named(&self) -> [(&'static str, u64); 9] {
        [
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
            ("timer-requests-late-total", self.timer_requests_late_total),
            ("window-records-late-total", self.window_records_late_total),
        ]
    }
}
