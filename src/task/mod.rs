//! The task state machine: one stage's unit of work, as a sans-IO core.
//!
//! A [`Task`] owns the causal gate, the task history, the single stamping site,
//! the state slots, the tick cadence and the transaction snapshot. It never
//! reads a clock, a socket or a random number: drivers (the test driver, the
//! simulator, the live runtime) feed it what their Kafka returned and the
//! wall-clock time, and do what it returns.
//!
//! # Driving a task
//!
//! [`Task`]'s own documentation gives the calling order, and the buffers a
//! driver keeps for it.

pub(crate) mod aligned;
mod changes;
mod checkpoint;
mod error;
mod gate;
mod id;
mod metrics;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::app::{App, StagePlan};
use crate::assembly::Assembly;
use crate::dead_letter::{self, DeadLetterKind};
use crate::deadline::{Deadline, DeadlineKind};
use crate::emission::{Emission, Tick};
use crate::header;
use crate::mutation::{self, Mutation};
use crate::partitioner::partition_for;
use crate::record::{ConsumedRecord, ProducedRecord, RecordData};
use crate::stage::logic::{DeliveryFailure, Outcome, StageLogic};
use crate::stage::slots::{SlotKey, SlotStore, Slots, SlotsView};
use crate::stamp::{Claim, Stamp};
use crate::tp::{TopicName, Tp};

pub use aligned::EpochCheckpoint;
pub use checkpoint::{Checkpoint, CheckpointError};
pub use error::{SkipError, TaskError};
pub use gate::{HeadStatus, Poison};
pub use id::TaskId;
pub use metrics::TaskMetrics;

use aligned::{Aligned, Tag};
use gate::Gate;

/// How a task commits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskConfig {
    /// X2: commit when this much time has passed and there is work to commit.
    /// Kafka Streams uses 100 ms under exactly-once.
    pub commit_interval: Duration,
}

impl Default for TaskConfig {
    fn default() -> Self {
        TaskConfig {
            commit_interval: Duration::from_millis(100),
        }
    }
}

/// What a fetch returned for one tp. A driver keeps one (or one per tp) and
/// refills it: [`Task::handle_fetched`] takes the records out and leaves the
/// list empty, its capacity kept.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Fetched {
    /// Data records in offset order, starting at or after the fetch position.
    pub records: Vec<ConsumedRecord>,
    /// The consumer's position after this fetch (past skipped control markers
    /// and aborted records).
    pub next_offset: u64,
    /// The tp's log end offset (high watermark), to tell claims that can never
    /// resolve (G6).
    pub log_end: u64,
}

/// Kafka's default `offset.metadata.max.bytes`: a broker refuses longer
/// offset metadata, so a checkpoint must fit in it.
pub const OFFSET_METADATA_BYTES_MAX: usize = 4096;

/// The offsets to send to the transaction, each with the task's checkpoint.
/// A driver keeps one from commit to commit (start from
/// `CommitRequest::default()`): [`Task::prepare_commit`] overwrites it, so
/// its list of offsets is reused.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommitRequest {
    /// The consumer group the offsets commit under (X6).
    pub group: Arc<str>,
    /// The next position of every consumed tp (G7).
    pub offsets: Vec<(Tp, u64)>,
    /// The task's checkpoint, on every tp (X1). Shared: every tp carries
    /// the same one.
    pub metadata: Arc<str>,
}

/// An offset committed for the task's group, as the driver read it back.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct CommittedOffset {
    /// The committed position: the next offset to read.
    pub offset: u64,
    /// The task's checkpoint, on every tp (X1).
    pub metadata: Arc<str>,
}

impl CommittedOffset {
    /// A committed position with its metadata.
    pub fn new(offset: u64, metadata: impl Into<Arc<str>>) -> Self {
        CommittedOffset {
            offset,
            metadata: metadata.into(),
        }
    }
}

/// Where the task's records come from: a source topic or the tick topic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LaneKind {
    Source(usize),
    Ticks,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Restoring,
    Running,
}

/// What the last commit made durable (G7).
#[derive(Clone, Debug)]
struct Committed {
    history: Stamp,
    last_tick_at: Option<i64>,
    positions: Vec<u64>,
}

/// The task's open transaction, as far as the task needs to know it.
#[derive(Clone, Debug, Default)]
struct OpenWork {
    /// Deliveries or ticks since the last commit.
    dirty: bool,
    ticks: u64,
}

/// One stage's task as a sans-IO state machine.
///
/// # Calling order
///
/// 1. [`Task::new`]; [`Task::restore_state`] with every committed record of
///    [`Task::changelog_tp`] (S5); [`Task::start`] with the committed offsets
///    of [`Task::consumed_tps`] (G7, T3): seek the consumer to the positions
///    it returns.
/// 2. Loop:
///    1. [`Task::handle_fetched`] with each `read_committed` fetch;
///    2. [`Task::deliverable`] (or [`Task::next_deliverable`], for the live
///       order of G3), then [`Task::deliver`] a tp it named, and send the
///       records it appended inside the task's transaction; ask again after
///       each delivery;
///    3. [`Task::poll_tick`] with the current time: send the tick it returns;
///    4. when [`Task::wants_commit`]: [`Task::prepare_commit`], send the
///       changelog records it appended, then its offsets, to the
///       transaction and commit it, then
///       [`Task::handle_committed`]; on any failure, abort it, call
///       [`Task::handle_aborted`] and seek the consumer to the positions it
///       returns (Kafka's consumer does not rewind by itself).
/// 3. A [`TaskError`] from any of these stops the task: abort its
///    transaction; nothing it delivered since its last commit is kept, and
///    its committed position stays before the record named in the error.
///
/// # The driver's buffers
///
/// Each output has one method. Where an output is a list, the method writes
/// into a buffer the driver owns and passes in every time, as quinn's
/// `Connection::poll_transmit` does: a driver that keeps its buffers for the
/// task's life allocates none per record.
///
/// | buffer | method | what it does with it |
/// |---|---|---|
/// | a [`Fetched`] (one, or one per tp) | [`Task::handle_fetched`] | takes the records out, leaves the list empty |
/// | a `Vec<Tp>` | [`Task::deliverable`] | clears it, then fills it |
/// | a `Vec<ProducedRecord>` | [`Task::deliver`] | appends; the driver sends and drains it |
/// | a [`CommitRequest`] | [`Task::prepare_commit`] | overwrites it |
/// | a `Vec<ProducedRecord>` | [`Task::prepare_commit`] | appends the changelog records; the driver sends and drains it |
///
/// A tick is one record, so [`Task::poll_tick`] returns it by value; the
/// seek positions of [`Task::start`] and [`Task::handle_aborted`] come once
/// per start or abort, and are returned too.
pub struct Task {
    id: TaskId,
    group: Arc<str>,
    transactional_id: String,
    kinds: Vec<LaneKind>,
    gate: Gate,
    logic: Arc<dyn StageLogic>,
    /// The repartition topics the stage writes (R2, R3): only a planted
    /// bug reads them.
    repartitions: Vec<TopicName>,
    /// G9: delivery in timestamp order across sources, when declared.
    sync: Option<Synchronised>,
    /// V3–V5: delivery in epoch order, on a path to a consistent view.
    aligned: Option<Aligned>,
    /// The epochs the commit being prepared makes durable (V5).
    pending_epochs: Option<EpochCheckpoint>,
    slots: Box<dyn SlotStore>,
    sinks: Vec<(TopicName, u32)>,
    tick_topics: Vec<TopicName>,
    tick: Option<(Tp, i64)>,
    changelog: Option<Tp>,
    /// S5: the open transaction's state changes, written at its commit.
    changes: changes::Changes,
    /// X5's opt-in: the task's partition of its stage's dead-letter topic.
    dead_letter: Option<Tp>,
    /// The record the operator asked to skip ([`Task::skip`]), until the
    /// transaction that dead-letters it commits.
    skip: Option<(Tp, u64)>,
    /// Whether the open transaction dead-lettered the skipped record.
    skip_done: bool,
    /// The buffers a commit encodes the checkpoint in (binary, then text).
    checkpoint_scratch: (Vec<u8>, Vec<u8>),
    config: TaskConfig,
    phase: Phase,
    failure: Option<TaskError>,
    /// G4: the merge of every delivered record's stamp plus a claim on it.
    history: Stamp,
    last_tick_at: Option<i64>,
    /// The timestamp of the last delivered record: only a planted bug
    /// (`Mutation::TickAtRecordTime`) reads it.
    last_delivered_at: Option<i64>,
    started_at: i64,
    last_commit_at: i64,
    committed: Committed,
    open: OpenWork,
    metrics: TaskMetrics,
}

/// G9's wait: how long a synchronised task waits for a source that is
/// caught up, and since when each such lane has been waited for (wall
/// clock, not transactional: an abort does not restart a wait).
struct Synchronised {
    max_idle: i64,
    waiting_since: Vec<Option<i64>>,
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

impl Task {
    /// The task of `stage` that consumes partition `partition` of its sources.
    pub fn new(
        app: &App,
        assembly: &Assembly,
        stage: &str,
        partition: u32,
        config: TaskConfig,
    ) -> Result<Task, TaskError> {
        let id = TaskId {
            stage: stage.into(),
            partition,
        };
        let unknown = || TaskError::UnknownTask { task: id.clone() };
        let plan: &StagePlan = app.stage(stage).ok_or_else(unknown)?;
        let tasks = assembly.tasks_of(stage).ok_or_else(unknown)?;
        if partition >= tasks {
            return Err(unknown());
        }
        let def = &plan.stage.def;
        let mut tps = Vec::new();
        let mut kinds = Vec::new();
        for (index, source) in def.sources.iter().enumerate() {
            // Task i consumes partition i of each source that has one.
            if assembly
                .partitions_of(source.name.as_str())
                .is_some_and(|count| partition < count)
            {
                tps.push(Tp::new(source.name.clone(), partition));
                kinds.push(LaneKind::Source(index));
            }
        }
        let tick = plan
            .tick_topic
            .as_ref()
            .zip(def.ticks)
            .map(|(topic, decl)| {
                tps.push(Tp::new(topic.clone(), partition));
                kinds.push(LaneKind::Ticks);
                (Tp::new(topic.clone(), partition), millis(decl.interval))
            });
        let sinks = def
            .sinks
            .iter()
            .map(|sink| {
                let count = assembly
                    .partitions_of(sink.name.as_str())
                    .expect("assembly resolved every sink");
                (sink.name.clone(), count)
            })
            .collect();
        let aligned = plan.region.as_ref().map(|region| {
            let writers = kinds
                .iter()
                .map(|kind| match kind {
                    LaneKind::Source(source) => region.writers[*source]
                        .iter()
                        .flat_map(|stage| {
                            let tasks = assembly.tasks_of(stage).unwrap_or(0);
                            let stage: Arc<str> = stage.as_str().into();
                            (0..tasks).map(move |partition| (Arc::clone(&stage), partition))
                        })
                        .collect(),
                    LaneKind::Ticks => Vec::new(),
                })
                .collect();
            let progress: Vec<(TopicName, u32)> = region
                .progress_sinks
                .iter()
                .map(|sink| {
                    let count = assembly
                        .partitions_of(sink.as_str())
                        .expect("assembly resolved every sink");
                    (sink.clone(), count)
                })
                .collect();
            Aligned::new(
                region.epoch_ms,
                region.is_view,
                stage,
                partition,
                writers,
                aligned::progress_tps(&progress),
            )
        });
        let positions = vec![0; tps.len()];
        let lane_count = tps.len();
        let mut gate = Gate::new(tps);
        gate.by_writer = aligned.is_some();
        Ok(Task {
            id,
            // A planted bug may commit every stage under the application id,
            // as one shared group (breaks X6); the transactional id never
            // depends on it.
            group: if mutation::active(Mutation::SharedGroup) {
                app.id().into()
            } else {
                plan.group.as_str().into()
            },
            transactional_id: format!("{}-{partition}", plan.group),
            kinds,
            gate,
            logic: Arc::clone(&def.logic),
            repartitions: def.repartitions().cloned().collect(),
            sync: def.timestamp_sync.map(|max_idle| Synchronised {
                max_idle: millis(max_idle),
                waiting_since: vec![None; lane_count],
            }),
            aligned,
            pending_epochs: None,
            slots: def.logic.new_slots(),
            sinks,
            tick_topics: app
                .stages()
                .iter()
                .filter_map(|plan| plan.tick_topic.clone())
                .collect(),
            tick,
            changelog: plan
                .changelog
                .as_ref()
                .map(|topic| Tp::new(topic.clone(), partition)),
            changes: changes::Changes::default(),
            dead_letter: plan
                .dead_letter
                .as_ref()
                .map(|topic| Tp::new(topic.clone(), partition)),
            skip: None,
            skip_done: false,
            checkpoint_scratch: (Vec::new(), Vec::new()),
            config,
            phase: Phase::Restoring,
            failure: None,
            history: Stamp::empty(),
            last_tick_at: None,
            last_delivered_at: None,
            started_at: 0,
            last_commit_at: 0,
            committed: Committed {
                history: Stamp::empty(),
                last_tick_at: None,
                positions,
            },
            open: OpenWork::default(),
            metrics: TaskMetrics::counting(plan.stage.hooks().counters()),
        })
    }

    // ----- getters -----

    /// Which stage and partition this task is.
    pub fn id(&self) -> &TaskId {
        &self.id
    }

    /// The tps this task consumes: one per source with this partition, then
    /// its tick topic's partition.
    pub fn consumed_tps(&self) -> Vec<Tp> {
        self.gate.lanes.iter().map(|lane| lane.tp.clone()).collect()
    }

    /// The changelog partition to restore from before starting (S5).
    pub fn changelog_tp(&self) -> Option<&Tp> {
        self.changelog.as_ref()
    }

    /// The partition of its stage's dead-letter topic this task writes
    /// refused records to, when the stage opts in (X5).
    pub fn dead_letter_tp(&self) -> Option<&Tp> {
        self.dead_letter.as_ref()
    }

    /// The record an operator's [`Task::skip`] names, until the transaction
    /// that dead-letters it commits.
    pub fn pending_skip(&self) -> Option<(&Tp, u64)> {
        self.skip.as_ref().map(|(tp, offset)| (tp, *offset))
    }

    /// The tick partition this task emits to and consumes back (T2, T4).
    pub fn tick_tp(&self) -> Option<&Tp> {
        self.tick.as_ref().map(|(tp, _)| tp)
    }

    /// The transactional id of this task's producer (X4):
    /// `<application.id>-<stage>-<partition>`, the stage's group and the
    /// task's partition.
    pub fn transactional_id(&self) -> &str {
        &self.transactional_id
    }

    /// The stage's consumer group (X6), under which the task commits its
    /// positions and checkpoint.
    pub fn group(&self) -> &str {
        &self.group
    }

    /// G4: the task's history, open transaction included.
    pub fn history(&self) -> &Stamp {
        &self.history
    }

    /// The history as of the last commit.
    pub fn committed_history(&self) -> &Stamp {
        &self.committed.history
    }

    /// The wall-clock time of the last tick, open transaction included.
    pub fn last_tick_at(&self) -> Option<i64> {
        self.last_tick_at
    }

    /// The first undelivered offset of `tp`.
    pub fn position(&self, tp: &Tp) -> Option<u64> {
        self.gate
            .lane_index(tp)
            .map(|lane| self.gate.lanes[lane].position())
    }

    /// The error the task stopped on, if it stopped.
    pub fn failure(&self) -> Option<&TaskError> {
        self.failure.as_ref()
    }

    /// The task's metrics (T8).
    pub fn metrics(&self) -> TaskMetrics {
        let mut metrics = self.metrics.clone();
        metrics.records_held = self.records_held();
        metrics
    }

    /// `records-held` of [`Task::metrics`] alone: the records held now.
    pub fn records_held(&self) -> u64 {
        self.gate.held().count() as u64
    }

    /// `records-redelivered-total` of [`Task::metrics`] alone, without
    /// counting the held records.
    pub fn records_redelivered_total(&self) -> u64 {
        self.metrics.records_redelivered_total
    }

    /// The slots the open transaction changed, each with its encoded
    /// state now (`None`: deleted), in the order they first changed: what
    /// its commit writes to the changelog (S5), and nothing a query may
    /// answer (Q1).
    pub fn open_changes(&self) -> impl Iterator<Item = (&SlotKey, Option<&Bytes>)> + '_ {
        self.changes.iter()
    }

    /// The task's slots, typed; `None` if `S` is not the stage's state type.
    pub fn slots<S: 'static>(&self) -> Option<&Slots<S>> {
        self.slots_view().of::<S>()
    }

    /// The task's slots, as the operators' views read them
    /// (`parsley::open_windows_of`, …).
    pub fn slots_view(&self) -> SlotsView<'_> {
        SlotsView(&*self.slots)
    }

    /// Every lane's head and whether it may go (for schedulers and tests).
    pub fn heads(&self) -> Vec<(Tp, u64, HeadStatus)> {
        (0..self.gate.lanes.len())
            .filter_map(|lane| {
                let status = self.status(lane)?;
                let head = &self.gate.lanes[lane].queue[self.next_index(lane)?];
                Some((self.gate.lanes[lane].tp.clone(), head.record.offset, status))
            })
            .collect()
    }

    /// The heads that are held (G2), in lane order, as [`Task::heads`] lists
    /// them but without copying: the lane's index in [`Task::consumed_tps`],
    /// its tp, the head's offset and the claim it waits on.
    pub fn held_heads(&self) -> impl Iterator<Item = (usize, &Tp, u64, Claim)> + '_ {
        (0..self.gate.lanes.len()).filter_map(|lane| match self.status(lane)? {
            HeadStatus::Held(claim) => {
                let state = &self.gate.lanes[lane];
                let head = &state.queue[self.next_index(lane)?];
                Some((lane, &state.tp, head.record.offset, claim))
            }
            _ => None,
        })
    }

    /// The record of `tp` next in line for delivery: its head, or, on a
    /// path to a consistent view, its first record of the lowest epoch
    /// held, once that epoch is closed (V4).
    pub fn head(&self, tp: &Tp) -> Option<&ConsumedRecord> {
        let lane = self.gate.lane_index(tp)?;
        let index = self.next_index(lane)?;
        Some(&self.gate.lanes[lane].queue[index].record)
    }

    /// True when something was delivered or emitted since the last commit,
    /// or, on a path to a consistent view, the frontier rose (V4: the
    /// commit tells the task's readers).
    pub fn has_open_work(&self) -> bool {
        self.open.dirty
            || self
                .aligned
                .as_ref()
                .is_some_and(|aligned| self.frontier() > aligned.committed_frontier())
    }

    /// V4: the lowest epoch the task may still deliver, on a path to a
    /// consistent view (what its progress records say); `i64::MAX`
    /// elsewhere.
    pub fn frontier(&self) -> i64 {
        let (lowest, horizon) = self.epochs();
        lowest.min(horizon)
    }

    /// V4: the lowest queued epoch and the horizon ([`Aligned::epochs`]).
    fn epochs(&self) -> (i64, i64) {
        match &self.aligned {
            Some(aligned) => aligned.epochs(self.gate.lanes.iter().map(|lane| {
                (
                    lane.queue.iter().map(|queued| queued.epoch),
                    lane.fetch_position,
                )
            })),
            None => (i64::MAX, i64::MAX),
        }
    }

    /// V4: whether every record the task buffers waits for its epoch to
    /// close: the task is on a path to a consistent view, and no lane has
    /// fetched past the lowest epoch it holds. Such a task is at rest: its
    /// sources have to bring a later epoch for it to go on.
    pub fn awaits_open_epochs(&self) -> bool {
        let (lowest, horizon) = self.epochs();
        self.aligned.is_some()
            && lowest >= horizon
            && self
                .gate
                .lanes
                .iter()
                .all(|lane| lane.queue.iter().all(|queued| queued.bad_epoch.is_none()))
    }

    /// V5: whether the task may commit now: anywhere, unless it is on a
    /// path to a consistent view, which commits only between epochs.
    pub fn may_commit(&self) -> bool {
        self.aligned
            .as_ref()
            .is_none_or(|aligned| aligned.at_epoch_end(self.frontier()))
    }

    /// Where in its lane's queue the record next in line for delivery is:
    /// the head (G3), or, on a path to a consistent view, the first record
    /// of the lowest queued epoch once that epoch is closed, which keeps
    /// each writer's order (V4). A record whose epoch header is bad comes
    /// first, to be refused.
    fn next_index(&self, lane: usize) -> Option<usize> {
        let queue = &self.gate.lanes[lane].queue;
        if self.aligned.is_none() {
            return (!queue.is_empty()).then_some(0);
        }
        if let Some(bad) = queue.iter().position(|queued| queued.bad_epoch.is_some()) {
            return Some(bad);
        }
        let (lowest, horizon) = self.epochs();
        if lowest >= horizon {
            return None;
        }
        queue.iter().position(|queued| queued.epoch == lowest)
    }

    /// Records fetched and not yet delivered.
    pub fn buffered(&self) -> usize {
        self.gate.lanes.iter().map(|lane| lane.queue.len()).sum()
    }

    fn check_running(&self) -> Result<(), TaskError> {
        match &self.failure {
            Some(error) => Err(error.clone()),
            None => {
                assert_eq!(
                    self.phase,
                    Phase::Running,
                    "task {} is used before start",
                    self.id
                );
                Ok(())
            }
        }
    }

    fn stop(&mut self, error: TaskError) -> TaskError {
        self.failure = Some(error.clone());
        error
    }

    // ----- start-up -----

    /// S5: loads the committed changelog record at `offset` into the slots.
    /// It borrows the record: a restore reads the whole changelog, and drivers
    /// can hand it over without copying.
    pub fn restore_state(&mut self, offset: u64, record: &RecordData) -> Result<(), TaskError> {
        assert_eq!(
            self.phase,
            Phase::Restoring,
            "task {}: state is restored before start",
            self.id
        );
        let tp = self
            .changelog
            .as_ref()
            .expect("only stateful stages restore state");
        let bad = |reason: String| TaskError::BadChangelog {
            task: self.id.clone(),
            tp: tp.clone(),
            offset,
            reason,
        };
        let key = record
            .key
            .as_ref()
            .ok_or_else(|| bad("it has no key".into()))?;
        let slot = SlotKey::from_changelog_bytes(key).map_err(|error| bad(error.to_string()))?;
        self.slots
            .restore(slot, record.value.as_deref())
            .map_err(|error| bad(error.to_string()))
    }

    /// G7, T3: resumes from the committed offsets of [`Task::consumed_tps`]
    /// (in that order; `None` where nothing was committed) and their
    /// checkpoint. Returns where to seek the consumer: the committed offset, or
    /// the start of the log.
    pub fn start(
        &mut self,
        committed: &[Option<CommittedOffset>],
        now: i64,
    ) -> Result<Vec<(Tp, u64)>, TaskError> {
        assert_eq!(
            self.phase,
            Phase::Restoring,
            "task {} is started once",
            self.id
        );
        assert_eq!(
            committed.len(),
            self.gate.lanes.len(),
            "one committed offset per consumed tp"
        );
        let mut checkpoint = None;
        for (lane, committed) in self.gate.lanes.iter().zip(committed) {
            if let (None, Some(committed)) = (&checkpoint, committed) {
                let decoded = Checkpoint::decode(&committed.metadata).map_err(|error| {
                    TaskError::BadCheckpoint {
                        task: self.id.clone(),
                        tp: lane.tp.clone(),
                        reason: error.reason,
                    }
                })?;
                checkpoint = Some(decoded);
            }
        }
        let positions: Vec<u64> = committed
            .iter()
            .map(|committed| committed.as_ref().map_or(0, |committed| committed.offset))
            .collect();
        let checkpoint = checkpoint.unwrap_or(Checkpoint {
            history: Stamp::empty(),
            last_tick_at: None,
            epochs: None,
        });
        if let Some(aligned) = &mut self.aligned {
            aligned.roll_back(Some(checkpoint.epochs.clone().unwrap_or(EpochCheckpoint {
                frontier: i64::MIN,
                lanes: Vec::new(),
            })));
        }
        self.committed = Committed {
            history: checkpoint.history,
            last_tick_at: checkpoint.last_tick_at,
            positions,
        };
        self.phase = Phase::Running;
        self.started_at = now;
        self.last_commit_at = now;
        self.logic.restored(&mut *self.slots, now);
        Ok(self.roll_back())
    }

    // ----- input -----

    /// Queues what a `read_committed` fetch of `tp` returned: takes the
    /// records out of `fetched`, which it leaves empty for the driver's next
    /// fetch.
    pub fn handle_fetched(&mut self, tp: &Tp, fetched: &mut Fetched) {
        let lane = self.consumed_lane(tp);
        let Task { gate, aligned, .. } = self;
        let tag = |record: &ConsumedRecord| match aligned {
            Some(aligned) => aligned.tag(lane, record),
            // No Parsley reader delivers a progress record (V4).
            None if aligned::is_progress(&record.data) => Tag::Pass,
            None => Tag::Data { epoch: 0 },
        };
        gate.push_fetched(
            lane,
            fetched.records.drain(..),
            fetched.next_offset,
            fetched.log_end,
            tag,
        );
    }

    /// G9: the end of what a `read_committed` fetch of `tp` could return now
    /// (Kafka's last stable offset). A task that delivers in timestamp
    /// order waits for a source until its position reaches it, and only
    /// then, caught up, up to `max_idle` more. Nothing else reads it: a
    /// claim is judged on fetched log ends only (G6).
    pub fn handle_visible_end(&mut self, tp: &Tp, end: u64) {
        let lane = self.consumed_lane(tp);
        self.gate.lanes[lane].visible_end = Some(end);
    }

    /// Whether the task delivers in timestamp order across its sources
    /// (G9), and so waits on [`Task::handle_visible_end`].
    pub fn is_synchronised(&self) -> bool {
        self.sync.is_some()
    }

    /// The lane of a tp the task consumes; a driver that names another
    /// has a bug.
    fn consumed_lane(&self, tp: &Tp) -> usize {
        self.gate
            .lane_index(tp)
            .unwrap_or_else(|| panic!("task {} does not consume {tp}", self.id))
    }

    /// Every tp whose head may be delivered now (G2, G3), into `ready`, a
    /// list the driver keeps: cleared, then filled. A poison head stops the
    /// task with its error. `now` is the wall clock, which a stage that
    /// delivers in timestamp order (G9) waits on: it offers only its
    /// sources' deliverable head with the lowest timestamp (and its tick),
    /// or none of its sources' while it waits for one.
    #[must_use = "an error stops the task: its transaction is to be aborted"]
    pub fn deliverable(&mut self, now: i64, ready: &mut Vec<Tp>) -> Result<(), TaskError> {
        ready.clear();
        self.check_running()?;
        if self.gate.is_empty() {
            return Ok(());
        }
        self.check_skip()?;
        if self.commits_before_delivering(now) {
            return Ok(());
        }
        let waiting = self.waits_for_a_source(now);
        let mut lowest: Option<(i64, usize)> = None;
        for lane in 0..self.gate.lanes.len() {
            match self.status(lane) {
                Some(HeadStatus::Deliverable) => match (&self.sync, self.kinds[lane]) {
                    (Some(_), LaneKind::Source(_)) => {
                        if !waiting {
                            lowest = self.earlier_head(lowest, lane);
                        }
                    }
                    _ => ready.push(self.gate.lanes[lane].tp.clone()),
                },
                Some(HeadStatus::Poison(poison)) => return Err(self.poison_error(lane, poison)),
                Some(HeadStatus::Held(_)) | None => {}
            }
        }
        if let Some((_, lane)) = lowest {
            ready.push(self.gate.lanes[lane].tp.clone());
        }
        if ready.is_empty() {
            self.check_cycles()?;
        }
        Ok(())
    }

    /// V5: a task on a path to a consistent view at an epoch's end, with
    /// work due to commit (X2), delivers nothing more until it commits: a
    /// commit later would cut the next epoch.
    fn commits_before_delivering(&self, now: i64) -> bool {
        self.aligned.is_some()
            && self.may_commit()
            && self.commit_due_at().is_some_and(|due| now >= due)
    }

    /// G9: whether a synchronised task waits for one of its sources, as
    /// Kafka Streams' `PartitionGroup` does: for a source lane that is
    /// behind (its log has records it has not fetched, or it was never
    /// fetched) until they are fetched; for one that is caught up and
    /// empty, up to the stage's `max_idle` from when it became so, for
    /// producers to send more. Starts and ends each lane's wait.
    fn waits_for_a_source(&mut self, now: i64) -> bool {
        let Some(sync) = &self.sync else {
            return false;
        };
        // A planted bug ends the wait a millisecond early.
        let early = i64::from(mutation::active(Mutation::SyncWaitEndsEarly) && sync.max_idle > 0);
        let max_idle = sync.max_idle - early;
        let mut waiting = false;
        for lane in 0..self.gate.lanes.len() {
            let is_source = matches!(self.kinds[lane], LaneKind::Source(_));
            let empty = self.gate.lanes[lane].queue.is_empty();
            let behind = self.is_behind(lane);
            let since = &mut self.sync.as_mut().expect("synchronised").waiting_since[lane];
            if !is_source || !empty || behind {
                *since = None;
                waiting |= behind;
                continue;
            }
            let since = *since.get_or_insert(now);
            waiting |= now.saturating_sub(since) < max_idle;
        }
        waiting
    }

    /// G9: when the earliest of the task's waits for a caught-up source
    /// still running at `now` ends (it began at `waiting_since`, it lasts
    /// `max_idle`), if it holds records: the time at which a head may
    /// become deliverable with time alone. A driver that sleeps waiting for
    /// records sleeps no later than this. A wait that has ended is not
    /// begun again until its source has had records, so it is no deadline.
    pub(crate) fn wait_ends_at(&self, now: i64) -> Option<i64> {
        let sync = self.sync.as_ref()?;
        if self.gate.is_empty() {
            return None;
        }
        sync.waiting_since
            .iter()
            .flatten()
            .map(|since| since.saturating_add(sync.max_idle))
            .filter(|&end| end > now)
            .min()
    }

    /// G9: whether source lane `lane` has nothing fetched while its log
    /// has records it could fetch, or may have: the visible end the driver
    /// gave ([`Task::handle_visible_end`]) is past its position; without a
    /// current one (none given, or one its position passed since), its last
    /// fetch's log end is past its position, or it was never fetched.
    fn is_behind(&self, lane: usize) -> bool {
        let state = &self.gate.lanes[lane];
        if !matches!(self.kinds[lane], LaneKind::Source(_)) || !state.queue.is_empty() {
            return false;
        }
        let visible = state.visible_end.filter(|end| *end >= state.fetch_position);
        match visible {
            Some(end) => state.fetch_position < end,
            None => state.log_end_seq == 0 || state.fetch_position < state.log_end,
        }
    }

    /// G9: whether the task delivers in timestamp order and `tp` is a
    /// source it would wait for now: nothing fetched, and its log may have
    /// more. A driver whose fetches carry no log end asks the cluster for
    /// the visible end of such a tp ([`Task::handle_visible_end`]).
    pub fn waits_for(&self, tp: &Tp) -> bool {
        self.sync.is_some()
            && self
                .gate
                .lane_index(tp)
                .is_some_and(|lane| self.is_behind(lane))
    }

    /// Of `best` and the head of `lane`, the one with the lower record
    /// timestamp, ties broken by tp (G3's order for the live runtime, G9's).
    fn earlier_head(&self, best: Option<(i64, usize)>, lane: usize) -> Option<(i64, usize)> {
        let state = &self.gate.lanes[lane];
        let index = self
            .next_index(lane)
            .expect("a deliverable lane has a head");
        let timestamp = state.queue[index].record.data.timestamp;
        let better = best.is_none_or(|(best_timestamp, best_lane)| {
            // A planted bug keeps the first deliverable head in lane order.
            !mutation::active(Mutation::SyncIgnoresTimestamps)
                && (timestamp, &state.tp) < (best_timestamp, &self.gate.lanes[best_lane].tp)
        });
        match better {
            true => Some((timestamp, lane)),
            false => best,
        }
    }

    /// §8: heads waiting on each other in a cycle are poison, not a stall.
    fn check_cycles(&mut self) -> Result<(), TaskError> {
        match self.gate.find_cycle() {
            Some((lane, claim, reason)) => {
                Err(self.poison_error(lane, Poison::Unresolvable { claim, reason }))
            }
            None => Ok(()),
        }
    }

    /// G3's order for the live runtime: the deliverable head with the oldest
    /// record timestamp, ties broken by tp. A stage that delivers in
    /// timestamp order (G9) offers none of its sources' heads while it
    /// waits for one, at wall-clock time `now`.
    pub fn next_deliverable(&mut self, now: i64) -> Result<Option<Tp>, TaskError> {
        self.check_running()?;
        if self.gate.is_empty() {
            // No heads: nothing to deliver, hold, refuse or skip.
            return Ok(None);
        }
        self.check_skip()?;
        if self.commits_before_delivering(now) {
            return Ok(None);
        }
        let waiting = self.waits_for_a_source(now);
        let mut best: Option<(i64, usize)> = None;
        for lane in 0..self.gate.lanes.len() {
            match self.status(lane) {
                Some(HeadStatus::Deliverable) => {
                    if waiting && matches!(self.kinds[lane], LaneKind::Source(_)) {
                        continue;
                    }
                    best = self.earlier_head(best, lane);
                }
                Some(HeadStatus::Poison(poison)) => return Err(self.poison_error(lane, poison)),
                Some(HeadStatus::Held(_)) | None => {}
            }
        }
        if best.is_none() {
            self.check_cycles()?;
        }
        Ok(best.map(|(_, lane)| self.gate.lanes[lane].tp.clone()))
    }

    fn poison_error(&mut self, lane: usize, poison: Poison) -> TaskError {
        let index = self.next_index(lane).expect("poison is found at a head");
        let lane = &self.gate.lanes[lane];
        let tp = lane.tp.clone();
        let offset = lane.queue[index].record.offset;
        let error = match poison {
            Poison::BadStamp(error) => TaskError::BadStamp {
                task: self.id.clone(),
                tp,
                offset,
                error,
            },
            Poison::Unresolvable { claim, reason } => TaskError::UnresolvableClaim {
                task: self.id.clone(),
                tp,
                offset,
                claim,
                reason,
            },
            Poison::BadEpoch(reason) => TaskError::BadEpoch {
                task: self.id.clone(),
                tp,
                offset,
                reason,
            },
        };
        self.stop(error)
    }

    /// Delivers the head of `tp` to the stage's logic and appends the records
    /// to send in the task's transaction to `produced`, a list the driver
    /// keeps and drains: the emissions, stamped at the stamping site. The
    /// slots it changes go to the changelog at the commit
    /// ([`Task::prepare_commit`], S5).
    #[must_use = "an error stops the task: its transaction is to be aborted"]
    pub fn deliver(
        &mut self,
        tp: &Tp,
        produced: &mut Vec<ProducedRecord>,
    ) -> Result<(), TaskError> {
        self.check_running()?;
        self.check_skip()?;
        let lane = self.consumed_lane(tp);
        let Some(index) = self.next_index(lane) else {
            panic!("task {}: {tp} has nothing to deliver", self.id)
        };
        if self.skips_head(lane) {
            let offset = self.gate.lanes[lane].queue[index].record.offset;
            let merge = self.gate.status_at(lane, index) == Some(HeadStatus::Deliverable);
            let message = format!(
                "task {}: {tp}@{offset} was skipped by the operator (X5, docs/RULES.md#x5)",
                self.id
            );
            self.skip_done = true;
            produced.extend(self.dead_letter(lane, index, DeadLetterKind::Skipped, message, merge));
            return Ok(());
        }
        match self.gate.status_at(lane, index) {
            Some(HeadStatus::Deliverable) => {}
            Some(HeadStatus::Poison(poison @ (Poison::BadStamp(_) | Poison::BadEpoch(_))))
                if self.dead_letter.is_some() =>
            {
                let offset = self.gate.lanes[lane].queue[index].record.offset;
                let error = match poison {
                    Poison::BadStamp(error) => TaskError::BadStamp {
                        task: self.id.clone(),
                        tp: tp.clone(),
                        offset,
                        error,
                    },
                    Poison::BadEpoch(reason) => TaskError::BadEpoch {
                        task: self.id.clone(),
                        tp: tp.clone(),
                        offset,
                        reason,
                    },
                    Poison::Unresolvable { .. } => unreachable!("matched above"),
                };
                produced.extend(self.dead_letter(
                    lane,
                    index,
                    DeadLetterKind::BadStamp,
                    error.to_string(),
                    false,
                ));
                return Ok(());
            }
            Some(HeadStatus::Poison(poison)) => return Err(self.poison_error(lane, poison)),
            Some(HeadStatus::Held(claim)) => panic!(
                "task {}: {tp} is held on {claim}; deliver only what `deliverable` lists",
                self.id
            ),
            None => panic!("task {}: {tp} has nothing to deliver", self.id),
        }
        let head = &self.gate.lanes[lane].queue[index];
        let offset = head.record.offset;
        let timestamp = head.record.data.timestamp;
        let outcome = match self.kinds[lane] {
            LaneKind::Source(source) => {
                self.logic
                    .on_record(&mut *self.slots, source, tp, &head.record)
            }
            LaneKind::Ticks => match tick_of(&head.record) {
                Some(tick) => self.logic.on_tick(&mut *self.slots, tick),
                None => {
                    let error = TaskError::BadTick {
                        task: self.id.clone(),
                        tp: tp.clone(),
                        offset,
                    };
                    return Err(self.stop(error));
                }
            },
        };
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(failure) => {
                let error = self.failure_error(failure, tp, offset);
                if self.dead_letter.is_some() {
                    let swapped = mutation::active(Mutation::DeadLetterKindSwapped);
                    let kind = match &error {
                        // Planted bug (I10): the codec and logic arms swapped.
                        TaskError::Codec { .. } if swapped => DeadLetterKind::Logic,
                        TaskError::Codec { .. } => DeadLetterKind::Codec,
                        TaskError::StateCodec { .. } => DeadLetterKind::StateCodec,
                        _ if swapped => DeadLetterKind::Codec,
                        _ => DeadLetterKind::Logic,
                    };
                    produced.extend(self.dead_letter(lane, index, kind, error.to_string(), true));
                    return Ok(());
                }
                return Err(self.stop(error));
            }
        };
        if let Err(error) = self.check_emissions(&outcome.emissions, tp, offset) {
            return Err(self.stop(error));
        }

        // The delivery is accepted: from here on nothing can fail.
        let queued = self.gate.take(lane, index).expect("checked above");
        if let Some(aligned) = &mut self.aligned {
            aligned.taken(lane, queued.epoch);
            aligned.delivered = Some(queued.epoch);
        }
        let epoch = queued.epoch;
        let stamp = queued
            .stamp
            .expect("a deliverable head has a decoded stamp");
        self.history.merge(&stamp);
        self.account_delivery(lane, offset, timestamp);
        for name in outcome.counted.names() {
            self.metrics.count(name);
        }
        self.produce(outcome, timestamp, epoch, produced);
        Ok(())
    }

    /// The gate's view of a lane's head, with what the task overrides: a
    /// head the operator skips may go whatever it claims, and so may a head
    /// whose stamp does not decode when the stage dead-letters (X5).
    fn status(&self, lane: usize) -> Option<HeadStatus> {
        let status = self.gate.status_at(lane, self.next_index(lane)?)?;
        if self.skips_head(lane) {
            return Some(HeadStatus::Deliverable);
        }
        match status {
            HeadStatus::Poison(Poison::BadStamp(_) | Poison::BadEpoch(_))
                if self.dead_letter.is_some() =>
            {
                Some(HeadStatus::Deliverable)
            }
            status => Some(status),
        }
    }

    /// Whether the head of `lane` is the record [`Task::skip`] names.
    fn skips_head(&self, lane: usize) -> bool {
        let Some((tp, offset)) = &self.skip else {
            return false;
        };
        if self.skip_done {
            return false;
        }
        let state = &self.gate.lanes[lane];
        state.tp == *tp
            && self
                .next_index(lane)
                .is_some_and(|index| state.queue[index].record.offset == *offset)
    }

    /// A skip names a record that is not there: the lane's head is already
    /// past the offset (it was a transaction marker or an aborted record).
    /// Stops the task rather than skip anything else.
    fn check_skip(&mut self) -> Result<(), TaskError> {
        let Some((tp, offset)) = &self.skip else {
            return Ok(());
        };
        if self.skip_done {
            return Ok(());
        }
        let lane = self.gate.lane_index(tp).expect("skip checked the tp");
        let Some(head) = self.gate.lanes[lane].queue.front() else {
            return Ok(());
        };
        if head.record.offset > *offset {
            let error = TaskError::SkipMissed {
                task: self.id.clone(),
                tp: tp.clone(),
                offset: *offset,
                next: head.record.offset,
            };
            return Err(self.stop(error));
        }
        Ok(())
    }

    /// What every delivery of `offset` on `lane` records, whatever its
    /// outcome: G4's claim on it, the lane's highest delivered offset (to
    /// count redeliveries), the counters, and the open work to commit.
    fn account_delivery(&mut self, lane: usize, offset: u64, timestamp: i64) {
        let lane_state = &mut self.gate.lanes[lane];
        self.history.claim(&lane_state.tp, offset);
        if lane_state.delivered_max.is_some_and(|max| offset <= max) {
            self.metrics.records_redelivered_total += 1;
        }
        lane_state.delivered_max = Some(
            lane_state
                .delivered_max
                .map_or(offset, |max| max.max(offset)),
        );
        self.metrics.records_delivered_total += 1;
        self.open.dirty = true;
        self.last_delivered_at = Some(timestamp);
    }

    /// X5's opt-in: delivers the head of `lane` with no effect and returns
    /// the one record to send instead of the logic's: the original key and
    /// value on the task's partition of the dead-letter topic, with the
    /// `parsley.dlq.*` headers ([`crate::dead_letter`]). The record counts as
    /// delivered (its offset is passed, G4's history claims it, and merges
    /// its stamp when `merge`: the gate let it through); no slot changes and
    /// nothing is emitted.
    fn dead_letter(
        &mut self,
        lane: usize,
        index: usize,
        kind: DeadLetterKind,
        message: String,
        merge: bool,
    ) -> Vec<ProducedRecord> {
        let dead_letter = self
            .dead_letter
            .clone()
            .expect("only stages with a dead-letter topic dead-letter");
        let queued = self.gate.take(lane, index).expect("dead-letters a head");
        if let Some(aligned) = &mut self.aligned {
            aligned.taken(lane, queued.epoch);
            if queued.bad_epoch.is_none() {
                aligned.delivered = Some(queued.epoch);
            }
        }
        let tp = self.gate.lanes[lane].tp.clone();
        let offset = queued.record.offset;
        if merge {
            if let Ok(stamp) = &queued.stamp {
                self.history.merge(stamp);
            }
        }
        let record = queued.record;
        let timestamp = record.data.timestamp;
        self.account_delivery(lane, offset, timestamp);
        self.metrics.records_dead_lettered_total += 1;
        if mutation::active(Mutation::DeadLetterDropsRecord) {
            return Vec::new();
        }
        let headers = dead_letter::headers(
            self.at_stamping_site(header::stamp_header),
            kind,
            &message,
            &self.id.stage,
            &tp,
            offset,
            &record.data.headers,
        );
        let value = match kind == DeadLetterKind::Codec
            && mutation::active(Mutation::CodecDeadLetterLosesValue)
        {
            true => None,
            false => record.data.value,
        };
        vec![ProducedRecord {
            tp: dead_letter,
            data: RecordData {
                key: record.data.key,
                value,
                headers,
                timestamp,
            },
        }]
    }

    /// X5: the operator's skip. When the task reaches `offset` of `tp`, it
    /// dead-letters that record (`parsley.dlq.error: skipped`) instead of
    /// delivering it, whatever its logic, its codecs or its claims would do
    /// with it: a skipped record that is held or poison passes on the claim
    /// on itself, not its own claims. Call it on a started task, before it
    /// delivers that record: after a stop, restart the task (its committed
    /// position stays before the record it stopped on) and skip that record.
    ///
    /// The records before it on `tp` are delivered as usual; only the record
    /// at exactly `offset` is skipped. (A restarted task may have to redeliver
    /// a few records before it reaches the one it stopped on: its committed
    /// position is that of its last commit.)
    ///
    /// It refuses, naming why, a stage without the dead-letter opt-in (the
    /// record has nowhere to go), a tp the task does not consume, a second
    /// skip while one is pending, a task not started or stopped, an offset
    /// the task has already delivered ([`SkipError::Behind`]), and an offset
    /// its fetched records show to be no record ([`SkipError::NotARecord`]).
    /// If an offset not fetched yet turns out to be no record (a transaction
    /// marker), the task stops with [`TaskError::SkipMissed`] when it gets
    /// there, rather than skip another record. The skip is consumed when the
    /// transaction that dead-letters the record commits; an abort keeps it
    /// for the redelivery.
    pub fn skip(&mut self, tp: &Tp, offset: u64) -> Result<(), SkipError> {
        let task = self.id.clone();
        if let Some(error) = &self.failure {
            return Err(SkipError::Stopped {
                task,
                error: Box::new(error.clone()),
            });
        }
        if self.phase != Phase::Running {
            return Err(SkipError::NotStarted { task });
        }
        if self.dead_letter.is_none() {
            return Err(SkipError::NoDeadLetterTopic { task });
        }
        let Some(lane) = self.gate.lane_index(tp) else {
            return Err(SkipError::NotConsumed {
                task,
                tp: tp.clone(),
            });
        };
        if let Some((pending, pending_offset)) = &self.skip {
            return Err(SkipError::AlreadyPending {
                task,
                tp: pending.clone(),
                offset: *pending_offset,
            });
        }
        let state = &self.gate.lanes[lane];
        let next = state.position();
        if offset < next {
            return Err(SkipError::Behind {
                task,
                tp: tp.clone(),
                offset,
                next,
            });
        }
        // The queue holds data records only: an offset it has passed without
        // holding is a transaction marker or an aborted record.
        let fetched_past = state
            .queue
            .back()
            .is_some_and(|last| last.record.offset >= offset);
        if fetched_past
            && !state
                .queue
                .iter()
                .any(|queued| queued.record.offset == offset)
        {
            return Err(SkipError::NotARecord {
                task,
                tp: tp.clone(),
                offset,
            });
        }
        self.skip = Some((tp.clone(), offset));
        Ok(())
    }

    fn failure_error(&self, failure: DeliveryFailure, tp: &Tp, offset: u64) -> TaskError {
        let (task, tp) = (self.id.clone(), tp.clone());
        match failure {
            DeliveryFailure::Codec { part, error } => TaskError::Codec {
                task,
                tp,
                offset,
                part,
                error: Box::new(error),
            },
            DeliveryFailure::StateCodec(error) => TaskError::StateCodec {
                task,
                tp,
                offset,
                error: Box::new(error),
            },
            DeliveryFailure::Logic(message) => TaskError::Logic {
                task,
                tp,
                offset,
                message,
            },
        }
    }

    /// S3, T2: emissions go only to declared sinks, never to a tick topic,
    /// and must have encoded.
    fn check_emissions(
        &self,
        emissions: &[Emission],
        tp: &Tp,
        offset: u64,
    ) -> Result<(), TaskError> {
        for emission in emissions {
            let topic = emission.topic();
            if self.tick_topics.iter().any(|tick| tick.same(topic)) {
                return Err(TaskError::EmitToTickTopic {
                    task: self.id.clone(),
                    topic: topic.to_string(),
                    tp: tp.clone(),
                    offset,
                });
            }
            if !self.sinks.iter().any(|(sink, _)| sink.same(topic)) {
                return Err(TaskError::UndeclaredSink {
                    task: self.id.clone(),
                    topic: topic.to_string(),
                    tp: tp.clone(),
                    offset,
                });
            }
            if let Err(error) = emission.encoded() {
                return Err(TaskError::EmissionCodec {
                    task: self.id.clone(),
                    topic: topic.to_string(),
                    tp: tp.clone(),
                    offset,
                    error: Box::new(error.clone()),
                });
            }
        }
        Ok(())
    }

    /// G5: the one stamping site. Every emission and every tick carries the
    /// task's history merged with the stamps of every record it holds.
    fn stamping_site(&self) -> Stamp {
        self.at_stamping_site(Stamp::clone)
    }

    /// [`Task::stamping_site`] lent to `use_stamp`: with nothing held, the
    /// stamp is the history itself, and is not copied.
    fn at_stamping_site<R>(&self, use_stamp: impl FnOnce(&Stamp) -> R) -> R {
        let mut held = self
            .gate
            .held()
            .filter_map(|queued| queued.stamp.as_ref().ok())
            .peekable();
        if held.peek().is_none() || mutation::active(Mutation::StampingForgetsHeld) {
            return use_stamp(&self.history);
        }
        let mut stamp = self.history.clone();
        for held in held {
            stamp.merge(held);
        }
        use_stamp(&stamp)
    }

    fn produce(
        &mut self,
        mut outcome: Outcome,
        timestamp: i64,
        epoch: i64,
        produced: &mut Vec<ProducedRecord>,
    ) {
        produced.reserve(outcome.emissions.len() + 1);
        if !outcome.emissions.is_empty() {
            let stamp_header = match outcome.planted_unstamped {
                true => header::stamp_header(&Stamp::empty()),
                false => self.at_stamping_site(header::stamp_header),
            };
            // Planted bug (R2, R3): re-keyed records written unstamped.
            let rekey_unstamped =
                !self.repartitions.is_empty() && mutation::active(Mutation::RekeyDropsStamp);
            // V4: a region task's records carry the epoch of the delivery.
            let epoch_header = self
                .aligned
                .as_ref()
                .map(|aligned| aligned.epoch_header(epoch));
            // The key of the emission a re-keyed copy (R3) follows: a view
            // holds a copy under the key of the record it copies (V5).
            let mut copied: Option<Option<Bytes>> = None;
            for emission in outcome.emissions.drain(..) {
                let timestamp = emission.timestamp().unwrap_or(timestamp);
                let (topic, key, value) = emission
                    .into_encoded()
                    .expect("emissions were checked before delivery");
                let partitions = self
                    .sinks
                    .iter()
                    .find(|(sink, _)| sink.same(&topic))
                    .map(|(_, partitions)| *partitions)
                    .expect("emissions were checked before delivery");
                let partition = partition_for(key.as_deref(), partitions, self.id.partition);
                let header = match rekey_unstamped && self.repartitions.contains(&topic) {
                    true => header::stamp_header(&Stamp::empty()),
                    false => stamp_header.clone(),
                };
                // A copy counts a reference: the name is static and the
                // bytes are shared.
                let headers = match &epoch_header {
                    Some(epoch) => vec![header, epoch.clone()],
                    None => vec![header],
                };
                let record = ProducedRecord {
                    tp: Tp::new(topic, partition),
                    data: RecordData {
                        key,
                        // `None`: a tombstone (J8), written with a null value.
                        value,
                        headers,
                        timestamp,
                    },
                };
                match &mut self.aligned {
                    // V5: the view's outputs wait for their epoch's end.
                    Some(aligned) if aligned.is_view() => {
                        let key = match self.repartitions.contains(&record.tp.topic) {
                            true => copied.take().unwrap_or_else(|| record.data.key.clone()),
                            false => {
                                copied = Some(record.data.key.clone());
                                record.data.key.clone()
                            }
                        };
                        aligned.hold(epoch, key, record);
                    }
                    _ => produced.push(record),
                }
            }
        }
        crate::emission::recycle_emissions(outcome.emissions);
        // The delivery's own slot, then (a timer service's tick, K2) the
        // others it changed, in the order the slots accept them. The
        // changelog gets them at the commit (S5).
        for write in outcome.write.into_iter().chain(outcome.more_writes) {
            assert!(
                self.changelog.is_some(),
                "task {}: only stateful stages change slots, and they have a changelog",
                self.id
            );
            self.changes.record(&write.slot, write.encoded, timestamp);
            self.slots.accept(write.slot);
        }
    }

    // ----- ticks -----

    /// T3, T4: emits one tick if at least the interval has passed since the
    /// last tick (or since start). Never more than one, however late.
    ///
    /// Returns the tick and the stamp its header carries. By value, not into
    /// a buffer: a tick is one record, moved out (as quinn's `poll` returns
    /// its event); and the stamp is made for the header anyway, so a driver
    /// that records it need not decode the header, and one that does not
    /// loses nothing.
    #[must_use = "the task counts the tick as emitted: a dropped tick is lost"]
    pub fn poll_tick(&mut self, now: i64) -> Option<(ProducedRecord, Stamp)> {
        if self.failure.is_some() || self.phase != Phase::Running {
            return None;
        }
        let (tp, interval) = self.tick.clone()?;
        let since = self.last_tick_at.unwrap_or(self.started_at);
        // Planted bug (I4): the tick goes out a millisecond before its
        // interval has passed.
        let interval = match mutation::active(Mutation::TickOneMsEarly) {
            true => interval - 1,
            false => interval,
        };
        if now.saturating_sub(since) < interval {
            return None;
        }
        self.last_tick_at = Some(now);
        self.open.dirty = true;
        self.open.ticks += 1;
        let stamp = self.stamping_site();
        let tp = if mutation::active(Mutation::TickOnPartitionZero) {
            Tp::new(tp.topic, 0)
        } else {
            tp
        };
        let at = if mutation::active(Mutation::TickAtRecordTime) {
            self.last_delivered_at.unwrap_or(now)
        } else {
            now
        };
        let tick = ProducedRecord {
            tp,
            data: RecordData {
                key: None,
                value: Some(crate::chunks::copy(&at.to_be_bytes())),
                headers: vec![header::stamp_header(&stamp)],
                timestamp: at,
            },
        };
        Some((tick, stamp))
    }

    /// When the next tick is due, if the stage ticks.
    pub fn next_tick_at(&self) -> Option<i64> {
        let (_, interval) = self.tick.as_ref()?;
        Some(
            self.last_tick_at
                .unwrap_or(self.started_at)
                .saturating_add(*interval),
        )
    }

    /// The task's next deadlines: its next tick, the ends of its waits for
    /// caught-up sources (G9), and its stage's own next deadline (a timer
    /// service's earliest pending timer, a windowed aggregation's earliest
    /// close, an expiring fold's earliest expiry),
    /// each in the time domain that moves it. A driver that chooses time
    /// aims at them; nothing depends on it doing so.
    pub fn deadlines(&self) -> impl Iterator<Item = Deadline> + '_ {
        let tick = match self.phase {
            Phase::Running => self.next_tick_at(),
            _ => None,
        };
        tick.map(|at| Deadline::wall_clock(at, DeadlineKind::Tick))
            .into_iter()
            .chain(self.logic.next_deadline(&*self.slots))
            .chain(self.wait_ends())
    }

    /// G9: the end of each wait for a caught-up source (its start plus
    /// `max_idle`) while the task holds records, ended or not: a wait that
    /// has ended stays until its source has records again.
    fn wait_ends(&self) -> impl Iterator<Item = Deadline> + '_ {
        self.sync
            .iter()
            .filter(|_| !self.gate.is_empty())
            .flat_map(|sync| {
                sync.waiting_since.iter().flatten().map(|since| {
                    Deadline::wall_clock(
                        since.saturating_add(sync.max_idle),
                        DeadlineKind::SyncWait,
                    )
                })
            })
    }

    // ----- transactions -----

    /// X2: true when the commit interval has passed and there is work.
    pub fn wants_commit(&self, now: i64) -> bool {
        self.commit_due_at().is_some_and(|due| now >= due) && self.may_commit()
    }

    /// X2: when the open transaction is due to commit (the last commit
    /// plus the commit interval); `None` with nothing to commit, or once
    /// the task has failed. A driver that sleeps waiting for records
    /// sleeps no later than this.
    pub(crate) fn commit_due_at(&self) -> Option<i64> {
        (self.failure.is_none() && self.has_open_work()).then(|| {
            self.last_commit_at
                .saturating_add(millis(self.config.commit_interval))
        })
    }

    /// The earliest time at which the task's behaviour changes with time
    /// alone, as quinn-proto's `poll_timeout`: its next tick (T3), its open
    /// transaction's commit (X2), or the end of a wait for a caught-up
    /// source while it holds records (G9). A driver that sleeps waiting for
    /// records sleeps no later than this; `None`: only records wake it.
    pub fn poll_timeout(&self, now: i64) -> Option<i64> {
        [
            self.next_tick_at(),
            self.commit_due_at(),
            self.wait_ends_at(now),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// X1: what to send to the transaction before committing it. The
    /// offsets (every consumed tp's first undelivered offset) and the
    /// checkpoint are written over `request`, which the driver keeps from
    /// one commit to the next; the transaction's changelog records are
    /// appended to `produced`, one per slot it changed, with the slot's
    /// value now (S5): send them, then the offsets. A checkpoint larger than
    /// Kafka's offset metadata limit stops the task with
    /// [`TaskError::CheckpointTooLarge`]: a broker would refuse every
    /// commit, and the task would stall silently.
    #[must_use = "an error stops the task: its transaction is to be aborted"]
    pub fn prepare_commit(
        &mut self,
        request: &mut CommitRequest,
        produced: &mut Vec<ProducedRecord>,
    ) -> Result<(), TaskError> {
        self.pending_epochs = match &self.aligned {
            Some(aligned) => {
                let frontier = self.frontier();
                assert!(
                    aligned.at_epoch_end(frontier),
                    "task {}: a commit within an epoch (V5): commit when `wants_commit` or `may_commit` says so",
                    self.id
                );
                let fetched = self.gate.lanes.iter().map(|lane| lane.fetch_position);
                Some(aligned.checkpoint(frontier, fetched))
            }
            None => None,
        };
        let cut = match mutation::active(Mutation::CheckpointTruncated) {
            true => self.history_cut_to_fit(),
            false => None,
        };
        let metadata = Checkpoint::encode_parts_into(
            cut.as_ref().unwrap_or(&self.history),
            self.last_tick_at,
            self.pending_epochs.as_ref(),
            &mut self.checkpoint_scratch,
        );
        if metadata.len() > OFFSET_METADATA_BYTES_MAX {
            let error = TaskError::CheckpointTooLarge {
                task: self.id.clone(),
                bytes: metadata.len(),
                max: OFFSET_METADATA_BYTES_MAX,
                claims: self.history.len(),
            };
            return Err(self.stop(error));
        }
        request.metadata = metadata.into();
        if !Arc::ptr_eq(&request.group, &self.group) {
            request.group = Arc::clone(&self.group);
        }
        if let (Some(aligned), Some(epochs)) = (&mut self.aligned, &self.pending_epochs) {
            aligned.prepare_commit(epochs.frontier, produced);
        }
        if !self.changes.is_empty() {
            let changelog = self
                .changelog
                .as_ref()
                .expect("only stateful stages change slots");
            self.changes.write_into(changelog, produced);
        }
        request.offsets.clear();
        request.offsets.extend(self.gate.lanes.iter().map(|lane| {
            let position = match mutation::active(Mutation::PositionsPastHeld) {
                true => lane.fetch_position,
                false => lane.position(),
            };
            (lane.tp.clone(), position)
        }));
        Ok(())
    }

    /// A planted bug (`Mutation::CheckpointTruncated`): the history cut to
    /// the claims whose checkpoint fits Kafka's offset metadata limit, when
    /// the whole one does not.
    fn history_cut_to_fit(&self) -> Option<Stamp> {
        let mut scratch = (Vec::new(), Vec::new());
        let fits = |history: &Stamp, scratch: &mut (Vec<u8>, Vec<u8>)| {
            let epochs = self.pending_epochs.as_ref();
            Checkpoint::encode_parts_into(history, self.last_tick_at, epochs, scratch).len()
                <= OFFSET_METADATA_BYTES_MAX
        };
        if fits(&self.history, &mut scratch) {
            return None;
        }
        let mut claims = self.history.claims().to_vec();
        loop {
            claims.pop();
            let cut = Stamp::from_claims(claims.iter().cloned());
            if claims.is_empty() || fits(&cut, &mut scratch) {
                return Some(cut);
            }
        }
    }

    /// The transaction committed: what it held is now the snapshot to return
    /// to on any later abort.
    pub fn handle_committed(&mut self, now: i64) {
        assert!(
            self.changes.is_empty(),
            "task {}: a commit without `prepare_commit`: the transaction's state changes were never sent (S5)",
            self.id
        );
        // Into the snapshot's own buffers: a task commits often.
        self.committed.history.clone_from(&self.history);
        self.committed.last_tick_at = self.last_tick_at;
        self.committed.positions.clear();
        self.committed
            .positions
            .extend(self.gate.lanes.iter().map(gate::Lane::position));
        self.slots.commit();
        if let (Some(aligned), Some(epochs)) = (&mut self.aligned, self.pending_epochs.take()) {
            aligned.committed(epochs);
        }
        if self.skip_done {
            self.skip = None;
            self.skip_done = false;
        }
        self.metrics.transactions_committed_total += 1;
        self.metrics.ticks_emitted_total += self.open.ticks;
        self.open = OpenWork::default();
        self.last_commit_at = now;
    }

    /// X3: the transaction aborted. Everything since the last commit is
    /// dropped; returns the positions to seek the consumer back to.
    #[must_use]
    pub fn handle_aborted(&mut self) -> Vec<(Tp, u64)> {
        self.metrics.transactions_aborted_total += 1;
        self.roll_back()
    }

    fn roll_back(&mut self) -> Vec<(Tp, u64)> {
        if !mutation::active(Mutation::HistoryNotRestored) {
            self.history = self.committed.history.clone();
        }
        if !mutation::active(Mutation::TickTimeNotRolledBack) {
            self.last_tick_at = self.committed.last_tick_at;
        }
        self.slots.abort();
        self.changes.clear();
        // A skip done in the aborted transaction waits for the redelivery.
        self.skip_done = false;
        self.gate.rewind(&self.committed.positions);
        if let Some(aligned) = &mut self.aligned {
            aligned.roll_back(None);
        }
        self.pending_epochs = None;
        self.open = OpenWork::default();
        self.gate
            .lanes
            .iter()
            .map(|lane| (lane.tp.clone(), lane.fetch_position))
            .collect()
    }
}

/// A tick record's value is its emission time, 8 bytes big-endian.
pub fn tick_of(record: &ConsumedRecord) -> Option<Tick> {
    let value = record.data.value.as_ref()?;
    let bytes: [u8; 8] = value.as_ref().try_into().ok()?;
    Some(Tick::new(i64::from_be_bytes(bytes)))
}

#[cfg(test)]
mod tests;
