//! A task's figures for operators, through the `metrics` facade: the core's
//! counters, the records held, the consumer lag and the commit latency,
//! labelled by application and task. Nothing is exported unless the process
//! installs a recorder (`parsley-live run --metrics ADDR` serves them in
//! the Prometheus text format).

use std::time::{Duration, Instant};

use parsley::task::{TaskId, TaskMetrics};

/// How often a task refreshes its figures: often enough to watch lag drain,
/// seldom enough to cost nothing next to its turns.
const EVERY: Duration = Duration::from_millis(500);

/// One task's labels, when it last published, and the counters of its
/// earlier runs in this process.
pub(crate) struct Exported {
    labels: [(&'static str, String); 2],
    last: Option<Instant>,
    /// The counters of the runs before a restart: a restarted task's core
    /// counts from zero, its exported counters go on from here.
    earlier: TaskMetrics,
    restarts: u64,
}

impl Exported {
    pub(crate) fn new(app: &str, task: &TaskId) -> Exported {
        Exported {
            labels: [("app", app.to_string()), ("task", task.to_string())],
            last: None,
            earlier: TaskMetrics::default(),
            restarts: 0,
        }
    }

    /// The task restarts: `ended` holds what its last run counted.
    pub(crate) fn restarted(&mut self, ended: &TaskMetrics) {
        self.earlier = self.total(ended);
        self.restarts += 1;
        metrics::counter!("parsley_task_restarts_total", &self.labels).absolute(self.restarts);
        self.last = None;
    }

    /// The counters of every run so far, `current` being the running one's.
    pub(crate) fn total(&self, current: &TaskMetrics) -> TaskMetrics {
        let earlier = &self.earlier;
        TaskMetrics {
            ticks_emitted_total: earlier.ticks_emitted_total + current.ticks_emitted_total,
            records_delivered_total: earlier.records_delivered_total
                + current.records_delivered_total,
            records_held: current.records_held,
            transactions_committed_total: earlier.transactions_committed_total
                + current.transactions_committed_total,
            transactions_aborted_total: earlier.transactions_aborted_total
                + current.transactions_aborted_total,
            records_redelivered_total: earlier.records_redelivered_total
                + current.records_redelivered_total,
            records_dead_lettered_total: earlier.records_dead_lettered_total
                + current.records_dead_lettered_total,
        }
    }

    /// Whether the figures are due again.
    pub(crate) fn due(&self) -> bool {
        self.last.is_none_or(|last| last.elapsed() >= EVERY)
    }

    /// Publishes the task's counters, its held records and its lag: the
    /// records between its consumer's positions and the log ends.
    pub(crate) fn publish(&mut self, current: &TaskMetrics, lag: u64) {
        let metrics = &self.total(current);
        let labels = &self.labels;
        for (name, value) in [
            (
                "parsley_records_delivered_total",
                metrics.records_delivered_total,
            ),
            ("parsley_ticks_emitted_total", metrics.ticks_emitted_total),
            (
                "parsley_transactions_committed_total",
                metrics.transactions_committed_total,
            ),
            (
                "parsley_transactions_aborted_total",
                metrics.transactions_aborted_total,
            ),
            (
                "parsley_records_redelivered_total",
                metrics.records_redelivered_total,
            ),
            (
                "parsley_records_dead_lettered_total",
                metrics.records_dead_lettered_total,
            ),
        ] {
            metrics::counter!(name, labels).absolute(value);
        }
        metrics::gauge!("parsley_records_held", labels).set(metrics.records_held as f64);
        metrics::gauge!("parsley_consumer_lag", labels).set(lag as f64);
        self.last = Some(Instant::now());
    }

    /// One commit's wall time, from sending the offsets to the end of the
    /// commit.
    pub(crate) fn commit_took(&self, took: Duration) {
        metrics::histogram!("parsley_commit_seconds", &self.labels).record(took.as_secs_f64());
    }
}
