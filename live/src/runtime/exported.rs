//! A task's figures for operators, through the `metrics` facade: the core's
//! counters, the records held and the commit latency, labelled by
//! application and task. Nothing is exported unless the process installs a
//! recorder (`parsley-live run --metrics ADDR` serves them in the Prometheus
//! text format). The instance-wide figures (state, lag, restore, last
//! commit) are [`figures`](super::figures)'.
//!
//! Counters only grow: each publication adds what the running task's core
//! counted since the last one, so a task that restarts, moves away and
//! comes back adds to the same counters instead of starting them again.

use std::time::{Duration, Instant};

use parsley::{TaskId, TaskMetrics};

/// How often a task refreshes its figures: often enough to watch lag drain,
/// seldom enough to cost nothing next to its turns.
const EVERY: Duration = Duration::from_millis(500);

/// One task's labels, when it last published, what the running core's
/// counters stood at then, and the counters of its earlier runs.
pub(crate) struct Exported {
    labels: [(&'static str, String); 2],
    last: Option<Instant>,
    /// The running core's counters as last added to the exported ones.
    published: TaskMetrics,
    /// The counters of the runs before a restart: a restarted task's core
    /// counts from zero, the run's totals go on from here.
    earlier: TaskMetrics,
}

/// The exported name of a core counter: `window-records-late-total` is
/// `parsley_window_records_late_total`.
pub(crate) fn published_name(name: &str) -> String {
    format!("parsley_{}", name.replace('-', "_"))
}

impl Exported {
    /// The figures of task `task` of application `app`, whose operators'
    /// counters are described for the endpoint as they come.
    pub(crate) fn new(app: &parsley::App, task: &TaskId) -> Exported {
        if let Some(plan) = app.stage(&task.stage) {
            for counter in plan.stage.hooks().counters() {
                metrics::describe_counter!(published_name(counter.name), counter.help);
            }
        }
        let app = app.id();
        Exported {
            labels: [("app", app.to_string()), ("task", task.to_string())],
            last: None,
            published: TaskMetrics::default(),
            earlier: TaskMetrics::default(),
        }
    }

    /// The task restarts: `ended` holds what its last run counted, which
    /// is published first.
    pub(crate) fn restarted(&mut self, ended: &TaskMetrics) {
        self.publish(ended);
        self.earlier = self.total(ended);
        self.published = TaskMetrics::default();
        metrics::counter!("parsley_task_restarts_total", &self.labels).increment(1);
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
            operator_counts: earlier
                .operator_counts
                .keys()
                .chain(current.operator_counts.keys())
                .map(|name| {
                    let sum = earlier.operator_count(name) + current.operator_count(name);
                    (*name, sum)
                })
                .collect(),
        }
    }

    /// Whether the figures are due again.
    pub(crate) fn due(&self) -> bool {
        self.last.is_none_or(|last| last.elapsed() >= EVERY)
    }

    /// Adds what the running core counted since the last publication to
    /// the exported counters, and sets its held records.
    pub(crate) fn publish(&mut self, current: &TaskMetrics) {
        let labels = &self.labels;
        let before = &self.published;
        for (name, now, then) in [
            (
                "parsley_records_delivered_total",
                current.records_delivered_total,
                before.records_delivered_total,
            ),
            (
                "parsley_ticks_emitted_total",
                current.ticks_emitted_total,
                before.ticks_emitted_total,
            ),
            (
                "parsley_transactions_committed_total",
                current.transactions_committed_total,
                before.transactions_committed_total,
            ),
            (
                "parsley_transactions_aborted_total",
                current.transactions_aborted_total,
                before.transactions_aborted_total,
            ),
            (
                "parsley_records_redelivered_total",
                current.records_redelivered_total,
                before.records_redelivered_total,
            ),
            (
                "parsley_records_dead_lettered_total",
                current.records_dead_lettered_total,
                before.records_dead_lettered_total,
            ),
        ] {
            // A core's counters only grow within its run.
            metrics::counter!(name, labels).increment(now.saturating_sub(then));
        }
        // The operator's own counters (K2's late requests, W3's late
        // records), by name.
        for (name, now) in &current.operator_counts {
            let then = before.operator_count(name);
            metrics::counter!(published_name(name), labels).increment(now.saturating_sub(then));
        }
        metrics::gauge!("parsley_records_held", labels).set(current.records_held as f64);
        self.published = current.clone();
        self.last = Some(Instant::now());
    }

    /// One commit's wall time, from sending the offsets to the end of the
    /// commit.
    pub(crate) fn commit_took(&self, took: Duration) {
        metrics::histogram!("parsley_commit_seconds", &self.labels).record(took.as_secs_f64());
    }
}
