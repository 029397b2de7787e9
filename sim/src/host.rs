//! How one task talks to the in-memory Kafka model: its transactional
//! producer, its `read_committed` consumer positions and its open transaction.
//!
//! Both the [`crate::TestDriver`] and the simulator drive tasks through a
//! `TaskHost`, so the I/O around the core is written once. Everything the
//! rules decide — what is deliverable, how records are stamped, what commits —
//! stays in the core's [`Task`]; the host only moves bytes.

use std::sync::Arc;

use parsley::mutation::{self, Mutation};
use parsley::Assembly;
use parsley::{App, ProducedRecord, Stamp, Task, TaskConfig, TaskError, Tp};
use parsley::{CommitRequest, Fetched};

use crate::model::{Cluster, Isolation, LogId, ModelError, ProducerId};

/// Why a host could not carry out a step.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    /// The core task stopped.
    #[error(transparent)]
    Task(#[from] TaskError),
    /// The in-memory model refused a call.
    #[error("kafka model: {0}")]
    Model(#[from] ModelError),
}

/// Where a record the host sent for its task landed (the record itself is
/// in the log).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sent {
    /// The tp.
    pub tp: Tp,
    /// The offset it landed at.
    pub offset: u64,
}

/// A tick the host emitted for its task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SentTick {
    /// The tp.
    pub tp: Tp,
    /// The offset it landed at.
    pub offset: u64,
    /// The wall-clock time of the tick.
    pub at: i64,
    /// The tick's stamp.
    pub stamp: Stamp,
}

/// When a transaction's end writes its markers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Markers {
    /// At once, as the model's `commit` and `abort` do.
    Now,
    /// When the driver says so ([`Cluster::write_markers`]), as a broker
    /// writes them some milliseconds after answering `EndTxn`.
    Later,
}

/// How a commit attempt ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CommitOutcome {
    /// There was nothing to commit.
    Nothing,
    /// The transaction committed.
    Committed,
    /// The commit failed and the transaction was aborted (X3); the consumer
    /// was rewound to the committed positions.
    Aborted(ModelError),
}

/// Drives one core task over the in-memory model: its transactional producer, its `read_committed` consumer and its transaction. Every driver of the harness (test driver, simulator) hosts tasks with it.
pub struct TaskHost {
    /// The core task this host drives.
    pub task: Task,
    producer: ProducerId,
    /// The consumer's fetch position per consumed tp.
    positions: Vec<(Tp, u64)>,
    /// Per consumed tp, where its log is: a host fetches the same tps over
    /// and over.
    logs: Vec<LogId>,
    /// Per consumed tp, the log end its last fetch reported.
    log_ends: Vec<u64>,
    /// The records a delivery produces, kept from one delivery to the next.
    produced: Vec<ProducedRecord>,
    /// What a fetch returns, kept from one fetch to the next.
    fetched: Fetched,
    /// The last commit's request, its list reused by the next.
    commit_request: CommitRequest,
    in_transaction: bool,
    /// Counts this host's transactions: the open work belongs to transaction
    /// `transaction_number`, whether or not it has begun on the broker yet.
    transaction_number: u64,
}

impl TaskHost {
    /// Starts the task of `stage` for `partition`: initialises its producer
    /// (fencing any older instance, X4), restores its slots from the changelog
    /// (S5) and its positions, history and tick time from its group's
    /// committed offsets (G7).
    pub fn start(
        cluster: &mut Cluster,
        app: &App,
        assembly: &Assembly,
        stage: &str,
        partition: u32,
        config: TaskConfig,
        now: i64,
    ) -> Result<TaskHost, HostError> {
        let restore = |task: &mut Task, cluster: &Cluster| -> Result<(), HostError> {
            if let Some(changelog) = task.changelog_tp().cloned() {
                for (offset, record) in cluster.log(&changelog)?.read_committed() {
                    task.restore_state(offset, record)?;
                }
            }
            Ok(())
        };
        TaskHost::start_with(
            cluster, app, assembly, stage, partition, config, now, restore,
        )
    }

    /// [`TaskHost::start`], with the task's slots restored by `restore`
    /// once its producer has fenced any older instance (the simulator's
    /// restore through a local store, S6).
    #[allow(clippy::too_many_arguments)]
    pub fn start_with(
        cluster: &mut Cluster,
        app: &App,
        assembly: &Assembly,
        stage: &str,
        partition: u32,
        config: TaskConfig,
        now: i64,
        restore: impl FnOnce(&mut Task, &Cluster) -> Result<(), HostError>,
    ) -> Result<TaskHost, HostError> {
        let mut task = Task::new(app, assembly, stage, partition, config)?;
        let producer = cluster.init_producer(task.transactional_id(), now);
        restore(&mut task, cluster)?;
        // A read_committed lookup, as the live runtime's consumer makes it:
        // the new producer's init has ended whatever transaction of this
        // task was pending, so the offsets are stable unless another
        // producer staged offsets of this stage's group on this task's tps.
        let committed = task
            .consumed_tps()
            .iter()
            .map(|tp| cluster.committed_stable(task.group(), tp))
            .collect::<Result<Vec<_>, _>>()?;
        let positions = task.start(&committed, now)?;
        let logs = positions
            .iter()
            .map(|(tp, _)| cluster.log_id(tp))
            .collect::<Result<_, _>>()?;
        Ok(TaskHost {
            task,
            producer,
            log_ends: vec![u64::MAX; positions.len()],
            produced: Vec::new(),
            fetched: Fetched::default(),
            commit_request: CommitRequest::default(),
            positions,
            logs,
            in_transaction: false,
            transaction_number: 0,
        })
    }

    /// The task's producer handle.
    pub fn producer(&self) -> ProducerId {
        self.producer
    }

    /// Whether a transaction is open on the broker.
    pub fn in_transaction(&self) -> bool {
        self.in_transaction
    }

    /// The number of the transaction the task's open work belongs to.
    pub fn transaction_number(&self) -> u64 {
        self.transaction_number
    }

    /// The consumer's fetch positions.
    pub fn positions(&self) -> &[(Tp, u64)] {
        &self.positions
    }

    /// Fetches up to `max_records` of the consumed tp at `index` and hands
    /// them to the task. Returns how many records arrived.
    pub fn fetch(
        &mut self,
        cluster: &Cluster,
        index: usize,
        max_records: usize,
    ) -> Result<usize, HostError> {
        let (tp, position) = &self.positions[index];
        self.fetched.records.clear();
        let end = cluster.fetch_into_at(
            self.logs[index],
            *position,
            max_records,
            Isolation::ReadCommitted,
            &mut self.fetched.records,
        )?;
        let count = self.fetched.records.len();
        self.fetched.next_offset = end.next_offset;
        self.fetched.log_end = end.high_watermark;
        self.task.handle_fetched(tp, &mut self.fetched);
        if self.task.is_synchronised() {
            // G9 waits for what a read_committed consumer could fetch: up to
            // the last stable offset, not records of open transactions.
            let visible = cluster.log_at(self.logs[index]).last_stable_offset();
            self.task.handle_visible_end(tp, visible);
        }
        self.positions[index].1 = end.next_offset;
        self.log_ends[index] = end.high_watermark;
        Ok(count)
    }

    /// The log end (high watermark) the last fetch of the consumed tp at
    /// `index` carried; `u64::MAX` before its first fetch.
    pub fn log_end(&self, index: usize) -> u64 {
        self.log_ends[index]
    }

    /// Whether a fetch of the consumed tp at `index` would tell the task
    /// anything: records to read, or a log end it has not been told. A
    /// driver whose task holds no record may skip the fetches this says no
    /// to.
    pub fn has_news(&self, cluster: &Cluster, index: usize) -> bool {
        let position = self.positions[index].1;
        let log = cluster.log_at(self.logs[index]);
        log.last_stable_offset() > position || log.high_watermark() != self.log_ends[index]
    }

    fn ensure_transaction(&mut self, cluster: &mut Cluster, now: i64) -> Result<(), ModelError> {
        if !self.in_transaction {
            cluster.begin(self.producer, now)?;
            self.in_transaction = true;
        }
        Ok(())
    }

    /// Sends `records`, appending where each landed to `sent`.
    fn send(
        &mut self,
        cluster: &mut Cluster,
        records: &mut Vec<ProducedRecord>,
        now: i64,
        sent: &mut Vec<Sent>,
    ) -> Result<(), ModelError> {
        sent.reserve(records.len());
        for record in records.drain(..) {
            sent.push(self.send_one(cluster, record, now)?);
        }
        Ok(())
    }

    /// Sends one record; returns where it landed.
    fn send_one(
        &mut self,
        cluster: &mut Cluster,
        record: ProducedRecord,
        now: i64,
    ) -> Result<Sent, ModelError> {
        if mutation::active(Mutation::EmissionsOutsideTransaction)
            && self.task.changelog_tp() != Some(&record.tp)
        {
            let offset = cluster.append(&record.tp, record.data)?;
            return Ok(Sent {
                tp: record.tp,
                offset,
            });
        }
        self.ensure_transaction(cluster, now)?;
        let offset = cluster.send(self.producer, &record.tp, record.data)?;
        Ok(Sent {
            tp: record.tp,
            offset,
        })
    }

    /// Delivers the head of `tp` and sends what the task emitted, appending
    /// where each sent record landed to `sent`, a list the caller keeps.
    pub fn deliver(
        &mut self,
        cluster: &mut Cluster,
        tp: &Tp,
        now: i64,
        sent: &mut Vec<Sent>,
    ) -> Result<(), HostError> {
        // The list is the host's, kept from one delivery to the next.
        let mut produced = std::mem::take(&mut self.produced);
        produced.clear();
        let delivered = self
            .task
            .deliver(tp, &mut produced)
            .map_err(HostError::from)
            .and_then(|()| Ok(self.send(cluster, &mut produced, now, sent)?));
        self.produced = produced;
        delivered
    }

    /// Emits a tick if one is due (T3) and sends it.
    pub fn poll_tick(
        &mut self,
        cluster: &mut Cluster,
        now: i64,
    ) -> Result<Option<SentTick>, HostError> {
        let Some((tick, stamp)) = self.task.poll_tick(now) else {
            return Ok(None);
        };
        let sent = self.send_one(cluster, tick, now)?;
        Ok(Some(SentTick {
            tp: sent.tp,
            offset: sent.offset,
            at: now,
            stamp,
        }))
    }

    /// Commits the open work, if any (X1). A failed commit aborts (X3).
    pub fn commit(&mut self, cluster: &mut Cluster, now: i64) -> Result<CommitOutcome, HostError> {
        let mut sent = Vec::new();
        self.commit_with(cluster, now, Markers::Now, &mut sent)
    }

    /// [`TaskHost::commit`], with the markers written now or left for the
    /// driver to write later ([`Cluster::commit_later`]): the task learns
    /// its commit succeeded either way, as a Kafka client does when
    /// `commit_transaction` returns.
    ///
    /// The transaction's changelog records (S5) are sent first, and where
    /// each landed is appended to `sent`; should the commit then fail, they
    /// are aborted with the rest.
    pub fn commit_with(
        &mut self,
        cluster: &mut Cluster,
        now: i64,
        markers: Markers,
        sent: &mut Vec<Sent>,
    ) -> Result<CommitOutcome, HostError> {
        // A task on a path to a consistent view commits only between
        // epochs (V5): within one, there is nothing it may commit yet.
        if !self.task.has_open_work() || !self.task.may_commit() {
            return Ok(CommitOutcome::Nothing);
        }
        // The list is the host's, kept from one commit to the next.
        let mut changelog = std::mem::take(&mut self.produced);
        changelog.clear();
        let prepared = self
            .task
            .prepare_commit(&mut self.commit_request, &mut changelog)
            .map(|()| self.send(cluster, &mut changelog, now, sent));
        self.produced = changelog;
        let attempt = prepared?
            .and_then(|()| self.ensure_transaction(cluster, now))
            .and_then(|()| {
                let CommitRequest {
                    group,
                    offsets,
                    metadata,
                } = &self.commit_request;
                // Every tp carries the same checkpoint, shared.
                let offsets = offsets.iter().map(|(tp, offset)| {
                    let committed =
                        crate::model::CommittedOffset::new(*offset, Arc::clone(metadata));
                    (tp.clone(), committed)
                });
                cluster.send_offsets_owned(self.producer, group, offsets)?;
                match markers {
                    Markers::Now => cluster.commit(self.producer),
                    Markers::Later => cluster.commit_later(self.producer),
                }
            });
        match attempt {
            Ok(()) => {
                self.in_transaction = false;
                self.transaction_number += 1;
                self.task.handle_committed(now);
                Ok(CommitOutcome::Committed)
            }
            Err(error) => {
                self.abort(cluster);
                Ok(CommitOutcome::Aborted(error))
            }
        }
    }

    /// Aborts the open transaction (a fault, a failed commit, a stopped task)
    /// and rewinds the consumer to the committed positions: Kafka's consumer
    /// does not rewind by itself.
    pub fn abort(&mut self, cluster: &mut Cluster) {
        self.abort_with(cluster, Markers::Now);
    }

    /// [`TaskHost::abort`], with the markers written now or later (see
    /// [`TaskHost::commit_with`]).
    pub fn abort_with(&mut self, cluster: &mut Cluster, markers: Markers) {
        if self.in_transaction {
            // A fenced producer cannot abort; its transaction was already
            // aborted by the fencing, so the error changes nothing.
            let _ = match markers {
                Markers::Now => cluster.abort(self.producer),
                Markers::Later => cluster.abort_later(self.producer),
            };
            self.in_transaction = false;
        }
        self.transaction_number += 1;
        let seeks = self.task.handle_aborted();
        self.seek(seeks);
    }

    fn seek(&mut self, seeks: Vec<(Tp, u64)>) {
        if mutation::active(Mutation::ConsumerNotRewound) {
            return;
        }
        for (tp, offset) in seeks {
            if let Some(position) = self.positions.iter_mut().find(|(known, _)| *known == tp) {
                position.1 = offset;
            }
        }
    }
}
