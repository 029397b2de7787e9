//! One task over a real cluster: its transactional producer, its
//! partitions of its stage's `read_committed` consumer
//! ([`super::shared_clients`]) and its open transaction. The live counterpart
//! of the harness's `TaskHost`: every rule is the core [`Task`]'s, this only
//! moves bytes and reads the clock.
//!
//! Each task runs on a thread of its own. Polls and sends are librdkafka's
//! own bounded calls; every transactional call and offset look-up runs on a
//! thread of its own, waited for until the runtime's deadline
//! ([`LiveConfig::deadline`]), so no call blocks the task past it. A call
//! that overruns is abandoned, and the task restarts with a fresh producer.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rdkafka::consumer::BaseConsumer;
use rdkafka::error::KafkaError;
use rdkafka::message::Message;

use parsley::App;
use parsley::Assembly;
use parsley::ProducedRecord;
use parsley::Tp;
use parsley::{CommitRequest, CommittedOffset, Fetched, Task, TaskId, TaskMetrics};

use super::super::client::Delivery;
use super::super::client::{
    bounded, committed_offsets, consumed, is_group_refusal, LiveConfig, LogContext, LogEnds,
    TxnProducer, Wake,
};
use super::super::error::{LiveError, TxnErrorClass};
use super::super::instance::TaskState;
use super::super::state::LocalStore;
use super::clock::wall_clock_ms;
use super::exported::Exported;
use super::figures::Figures;
use super::local_state::restore_local;
use super::shared_clients::{SharedClients, TaskQueues};
use super::tasks::StopFlags;
use super::{Assignment, ReleaseCause, RuntimeConfig, RuntimeError};

/// How many times a retriable transactional call is tried before the
/// transaction is aborted instead.
const RETRIES: u32 = 5;

/// How a task's run ended.
#[derive(Debug)]
pub struct TaskRun {
    /// The task that ran.
    pub task: TaskId,
    /// The task's metrics when it returned; the defaults if it never started
    /// or its thread panicked.
    pub metrics: TaskMetrics,
    /// `Ok` after a graceful stop; the error that stopped it otherwise.
    pub outcome: Result<(), RuntimeError>,
    /// How many times the task restarted inside the instance after a
    /// transient failure ([`RuntimeError::is_transient`]).
    pub restarts: u32,
}

/// Why the loop left: a graceful stop or an error.
enum Exit {
    Stopped,
    Failed(RuntimeError),
}

impl<E: Into<RuntimeError>> From<E> for Exit {
    fn from(error: E) -> Exit {
        Exit::Failed(error.into())
    }
}

pub(crate) struct TaskDriver {
    task: Task,
    producer: TxnProducer,
    /// The task's partitions of its stage's consumer, shared with the
    /// stage's other tasks on this instance.
    queues: TaskQueues,
    /// The instance's log-end readers.
    log_ends: Arc<LogEnds>,
    /// The lane the next fetch polls first: each turn starts one further,
    /// so no lane's backlog starves the others.
    first_lane: usize,
    config: RuntimeConfig,
    /// The next offset the gate expects per consumed tp, in the order of
    /// [`Task::consumed_tps`].
    positions: Vec<(Tp, u64)>,
    /// When the open transaction began, if one is open.
    transaction_began: Option<Instant>,
    /// When the task last committed, or started: an idle task checks its
    /// fence once `fence_check` has passed since (X4).
    last_committed: Instant,
    /// The run's stop flags, once it runs under them: a retry loop gives
    /// up, and an abort is skipped, once the group's assignment was lost.
    flags: Option<StopFlags>,
    /// The instance's board: this task's state, turns and commits.
    figures: Arc<Figures>,
    /// The task's buffers (see [`Task`]'s docs), kept from turn to turn: a
    /// fetch per consumed tp, in the order of `positions`; the records a
    /// delivery produces; the last commit's request.
    fetched: Vec<Fetched>,
    produced: Vec<ProducedRecord>,
    commit_request: CommitRequest,
    /// G9: when the last stable offsets of the sources waited for were
    /// last read, and per consumed tp the position and end that read found.
    visible_ends_read: Option<Instant>,
    visible_ends_seen: Vec<Option<(u64, u64)>>,
    /// A stateful task's local store ([`crate::state`]), which gets each
    /// transaction's changelog records once it has committed.
    local: Option<LocalStore>,
    /// The open transaction's changelog records, `(key, value)` in order,
    /// for the local store.
    unapplied: Vec<(Bytes, Option<Bytes>)>,
    /// The delivery of the open transaction's last changelog record: its
    /// offset is where the local store then stands.
    last_change: Option<Delivery>,
}

/// G9: how often a task waiting for a source reads its visible end.
const VISIBLE_END_EVERY: Duration = Duration::from_millis(50);

/// How many deliveries of a turn go by between two looks at the clock for
/// what time brings due (a commit, a tick): a delivery takes microseconds,
/// so the commit interval is kept to within a millisecond or so, and the
/// clock is read once per this many records, not per record.
const TIME_CHECK_EVERY: usize = 64;

/// Starts the task `id` and runs it until `stop` is set or it fails. A
/// transient failure ([`RuntimeError::is_transient`]: a Kafka call abandoned
/// at its deadline, a broker away, a transaction the broker aborted) does
/// not end the task: its producer is dropped, its partitions unassigned,
/// and it starts again from its committed checkpoint with a fresh producer
/// (the stage's consumer is kept), after a pause that doubles with
/// each restart that did not commit, until `max_restarts` in a row.
///
/// Under group membership (`Assignment::Group`) the group, not a count,
/// decides how long a task keeps trying: transient failures restart it for
/// as long as the instance holds it, however long the cluster is away; a
/// fence while the instance still holds it restarts it too (its new
/// producer fences whoever fenced it); and a task released by the group
/// (its own stop flag) that cannot finish its final commit ends as
/// [`RuntimeError::Released`], not as a failure: the next owner's fence
/// settles its open transaction.
pub(crate) fn run_task(
    app: &App,
    assembly: &Assembly,
    id: TaskId,
    config: RuntimeConfig,
    stop: &StopFlags,
    figures: &Arc<Figures>,
    clients: &SharedClients,
) -> TaskRun {
    let grouped = matches!(config.assignment, Assignment::Group(_));
    let mut exported = Exported::new(app, &id);
    let mut metrics = TaskMetrics::default();
    let (mut restarts, mut in_a_row) = (0u32, 0u32);
    let ran = |metrics, outcome, restarts| TaskRun {
        task: id.clone(),
        metrics,
        outcome,
        restarts,
    };
    loop {
        let previous = previous_owner(figures, &id, grouped, restarts > 0);
        figures.task_state(&id, TaskState::Restoring, None);
        let started = TaskDriver::start(
            app,
            assembly,
            &id,
            config.clone(),
            figures,
            clients,
            previous,
            stop.wake(),
        );
        let (error, ended) = match started {
            Ok(mut driver) => {
                // Queries read the restored store from here to the run's
                // end, and never the store of a run still restoring.
                figures.serve_store(&id, driver.local.as_ref().map(LocalStore::reader));
                figures.task_state(&id, TaskState::Running, None);
                driver.flags = Some(stop.clone());
                let exit = driver.run(stop, &mut exported);
                figures.withdraw_store(&id);
                let ended = driver.task.metrics();
                // What the run counted after its last publication, its
                // final commit's deliveries among them.
                exported.publish(&ended);
                metrics = exported.total(&ended);
                let Exit::Failed(error) = exit else {
                    tracing::info!(app = app.id(), task = %id, "task stopped gracefully");
                    return ran(metrics, Ok(()), restarts);
                };
                if !error.is_transient() && !error.is_fenced() {
                    driver.abort_quietly();
                }
                driver.abandon();
                (error, ended)
            }
            Err(error) => (error, TaskMetrics::default()),
        };
        if ended.transactions_committed_total > 0 {
            in_a_row = 0;
        }
        if let RuntimeError::Released { .. } = &error {
            tracing::warn!(app = app.id(), task = %id, error = %error, "task released");
            return ran(metrics, Err(error), restarts);
        }
        let movable = error.is_transient() || error.is_fenced();
        if grouped && movable && stop.is_set() {
            // Released by the group (or the instance leaving it) while the
            // cluster was away, or fenced by the task's next owner: what
            // was pending is the next owner's to redo.
            tracing::warn!(app = app.id(), task = %id, error = %error, "task released without its final commit: its next owner's fence settles the open transaction");
            let error = RuntimeError::Released {
                task: id.clone(),
                cause: ReleaseCause::Failed(Box::new(error)),
            };
            return ran(metrics, Err(error), restarts);
        }
        let fenced_but_held = grouped && error.is_fenced();
        let gave_up = !grouped && in_a_row >= config.max_restarts;
        if !(error.is_transient() || fenced_but_held) || gave_up || stop.is_set() {
            let error = if error.is_transient() && gave_up {
                RuntimeError::GaveUp {
                    task: id.clone(),
                    restarts: in_a_row,
                    last: Box::new(error),
                }
            } else {
                error
            };
            log_end(app, &id, &error);
            return ran(metrics, Err(error), restarts);
        }
        restarts += 1;
        in_a_row += 1;
        exported.restarted(&ended);
        figures.task_state(&id, TaskState::Retrying, None);
        let pause = restart_pause(in_a_row);
        if fenced_but_held {
            tracing::warn!(
                app = app.id(),
                task = %id,
                error = %error,
                restart = restarts,
                pause_ms = pause.as_millis() as u64,
                "task fenced while the group still assigns it to this instance: restarting it (its new producer fences whoever fenced it)"
            );
        } else {
            tracing::warn!(
                app = app.id(),
                task = %id,
                error = %error,
                restart = restarts,
                in_a_row,
                pause_ms = pause.as_millis() as u64,
                "task restarting from its committed checkpoint with a fresh producer"
            );
        }
        if !sleep_unless_stopped(pause, stop) {
            tracing::info!(app = app.id(), task = %id, "task stopped gracefully while it waited to restart");
            return ran(metrics, Ok(()), restarts);
        }
    }
}

/// The operator's skip (X5): starts task `id` from its committed
/// checkpoint, has it dead-letter the record at `tp`@`offset` as skipped,
/// runs it until the transaction holding the dead letter commits, commits
/// what else is pending and returns how many records it delivered. The
/// task's producer fences any instance running the task (X4). Gives up with
/// [`RuntimeError::SkipNotReached`] if the record is not reached within
/// `patience`.
pub(crate) fn skip_record(
    app: &App,
    assembly: &Assembly,
    id: &TaskId,
    config: RuntimeConfig,
    tp: &Tp,
    offset: u64,
    patience: Duration,
) -> Result<TaskMetrics, RuntimeError> {
    let figures = Figures::new(app.id(), config.live.deadline());
    let previous = previous_owner_in_group(&config.live, app, assembly, id);
    let clients = SharedClients::new(&config.live);
    let wake = Arc::new(Wake::default());
    let mut driver = TaskDriver::start(
        app, assembly, id, config, &figures, &clients, previous, wake,
    )?;
    driver.task.skip(tp, offset)?;
    let exported = Exported::new(app, id);
    let until = Instant::now() + patience;
    while driver.task.pending_skip().is_some() {
        if Instant::now() >= until {
            driver.abort_quietly();
            return Err(RuntimeError::SkipNotReached {
                task: id.clone(),
                tp: tp.clone(),
                offset,
                patience,
            });
        }
        if let Err(Exit::Failed(error)) = driver.step(&exported) {
            driver.abort_quietly();
            return Err(error);
        }
    }
    if let Err(Exit::Failed(error)) = driver.shut_down() {
        return Err(error);
    }
    tracing::info!(app = app.id(), task = %id, %tp, offset, "record skipped to the dead-letter topic");
    Ok(driver.task.metrics())
}

/// The pause before restart number `restarts` (from 1): 250 ms, doubling,
/// at most 8 s.
fn restart_pause(restarts: u32) -> Duration {
    Duration::from_millis(250 << restarts.saturating_sub(1).min(5))
}

/// Sleeps for `pause`, looking at `stop` every 50 ms; false if it was set.
fn sleep_unless_stopped(pause: Duration, stop: &StopFlags) -> bool {
    let until = Instant::now() + pause;
    while Instant::now() < until {
        if stop.is_set() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50).min(until - Instant::now()));
    }
    !stop.is_set()
}

/// A task's end on an error, as the operator's log says it: a move (X4) is
/// a warning, anything else an error naming the record or call.
fn log_end(app: &App, id: &TaskId, error: &RuntimeError) {
    if error.is_fenced() {
        tracing::warn!(app = app.id(), task = %id, "task fenced by a newer owner (X4): it moved");
    } else {
        tracing::error!(app = app.id(), task = %id, error = %error, "task stopped on an error");
    }
}

/// Who owned task `id` before this instance took it from the group: the
/// report the group held for it then (read at the assignment, before this
/// instance reported the task as its own), or, once the task restarts
/// here, this instance. For the explanation of a wait for an earlier
/// owner's transaction. `None` with static shares (no instance reports) or
/// when the group did not say.
fn previous_owner(
    figures: &Arc<Figures>,
    id: &TaskId,
    grouped: bool,
    restarted: bool,
) -> crate::client::PreviousOwner {
    if !grouped {
        return Arc::new(|| None);
    }
    let known = if restarted {
        Some(format!(
            "this instance ({}), restarting the task,",
            crate::instance::instance_name()
        ))
    } else {
        figures.previous_report(id).map(|report| described(&report))
    };
    Arc::new(move || known.clone())
}

/// Who owned task `id` before, for a command that takes it over without
/// joining the group (`skip`): the instance that last reported it to the
/// group `<app>.instances` (its committed offset's metadata on the task's
/// partition of that topic), asked at once on a thread of its own; the
/// answer is awaited (up to the call bound) only when the explanation
/// needs it.
fn previous_owner_in_group(
    live: &LiveConfig,
    app: &App,
    assembly: &Assembly,
    id: &TaskId,
) -> crate::client::PreviousOwner {
    let lookup = last_reporter(live, app, assembly, id);
    let (answer, answered) = std::sync::mpsc::channel();
    let asked = std::thread::Builder::new()
        .name("parsley previous owner".into())
        .spawn(move || {
            let _ = answer.send(lookup());
        })
        .is_ok();
    let timeout = live.timeout;
    let answered = std::sync::Mutex::new(answered);
    let known: std::sync::Mutex<Option<Option<String>>> = std::sync::Mutex::new(None);
    Arc::new(move || {
        if !asked {
            return None;
        }
        let mut known = known
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(known) = known.as_ref() {
            return known.clone();
        }
        let got = answered
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .recv_timeout(timeout)
            .ok()
            .flatten();
        *known = Some(got.clone());
        got
    })
}

/// Reads the last report of task `id` to the instances' group: who made
/// it and in which state.
fn last_reporter(
    live: &LiveConfig,
    app: &App,
    assembly: &Assembly,
    id: &TaskId,
) -> impl FnOnce() -> Option<String> + Send + 'static {
    let live = live.clone();
    let topic = super::membership_topic(app.id());
    let partition = assembly.task_ids().iter().position(|task| task == id);
    move || {
        let tp = Tp::new(topic.clone(), u32::try_from(partition?).ok()?);
        let consumer: Arc<BaseConsumer<LogContext>> = Arc::new(
            live.client_config(&[
                ("group.id", topic.clone()),
                ("enable.auto.commit", "false".into()),
            ])
            .create_with_context(LogContext)
            .ok()?,
        );
        let committed = committed_offsets(&consumer, &topic, &[tp], live.timeout, None).ok()?;
        let metadata = committed.into_iter().next()??.metadata;
        let report = crate::instance::TaskReport::from_json(&metadata).ok()?;
        Some(described(&report))
    }
}

/// A task report as the explanation names its owner.
fn described(report: &crate::instance::TaskReport) -> String {
    let me = crate::instance::instance_name();
    let who = if report.instance == me {
        format!("this instance ({me})")
    } else {
        format!("instance {}", report.instance)
    };
    format!("{who} (it last reported the task {})", report.state)
}

impl TaskDriver {
    /// Initialises the producer (fencing any older owner of the task, X4),
    /// restores the slots from the changelog (S5), and resumes from the
    /// committed offsets and checkpoint (G7, T3).
    // Each is a separate handle of the instance's; a struct of them would
    // only be unpacked here.
    #[allow(clippy::too_many_arguments)]
    fn start(
        app: &App,
        assembly: &Assembly,
        id: &TaskId,
        config: RuntimeConfig,
        figures: &Arc<Figures>,
        clients: &SharedClients,
        previous: crate::client::PreviousOwner,
        wake: Arc<Wake>,
    ) -> Result<TaskDriver, RuntimeError> {
        let mut task = Task::new(app, assembly, &id.stage, id.partition, config.task)?;
        let producer = TxnProducer::owned_by(
            &config.live,
            task.transactional_id(),
            format!("task {id}"),
            Some(previous),
            crate::client::TASK_LINGER,
        )?;
        // Before reading committed offsets: an open transaction of a zombie
        // holding this group's offsets makes the broker answer "unstable"
        // until it ends, and initialising aborts it.
        producer.init_blocking()?;
        let stage = clients.stage_consumer(task.group())?;
        if let Some(error) = stage.serve() {
            return Err(stage_failure(id, stage.group(), error));
        }
        let log_ends = clients.log_ends()?;
        let mut restored = 0usize;
        let mut local = None;
        if let Some(changelog) = task.changelog_tp().cloned() {
            let (store, restore) = restore_local(
                app, assembly, id, &config, figures, &log_ends, &changelog, &mut task,
            )?;
            restored = restore.from_changelog;
            tracing::info!(
                app = app.id(),
                task = %id,
                from_store = restore.from_store,
                from_changelog = restore.from_changelog,
                changelog_from = restore.changelog_from,
                rebuilt = restore.rebuilt.is_some(),
                "state restored"
            );
            local = store;
        }
        let tps = task.consumed_tps();
        let committed: Vec<Option<CommittedOffset>> = {
            let (consumer, group, tps, timeout, shared) = (
                Arc::clone(stage.client()),
                task.group().to_owned(),
                tps.clone(),
                config.live.timeout,
                Arc::clone(&stage),
            );
            let read = bounded(
                || format!("reading the committed offsets of group `{}`", task.group()),
                config.live.deadline(),
                move || committed_offsets(&consumer, &group, &tps, timeout, Some(shared.failure())),
            );
            match read.and_then(|read| read) {
                Ok(committed) => committed,
                Err(error) => {
                    // A consumer that could not reach its group's
                    // coordinator may stay so once the cluster is back
                    // (librdkafka does not always recover a client from a
                    // frozen broker): the stage's next task to start here
                    // makes a fresh one, as the membership consumer does.
                    // Dropped elsewhere: closing a client can wait on the
                    // cluster.
                    drop_elsewhere((clients.renew_stage_consumer(&stage), stage));
                    return Err(error.into());
                }
            }
        };
        let positions = task.start(&committed, wall_clock_ms())?;
        tracing::info!(
            app = app.id(),
            task = %id,
            restored,
            positions = ?positions,
            "task started"
        );
        let queues = TaskQueues::new(
            id.clone(),
            stage,
            positions.iter().map(|(tp, _)| tp.clone()).collect(),
            wake,
        );
        let mut driver = TaskDriver {
            task,
            producer,
            queues,
            log_ends,
            first_lane: 0,
            config,
            positions,
            transaction_began: None,
            last_committed: Instant::now(),
            flags: None,
            figures: Arc::clone(figures),
            fetched: Vec::new(),
            produced: Vec::new(),
            commit_request: CommitRequest::default(),
            visible_ends_read: None,
            visible_ends_seen: Vec::new(),
            local,
            unapplied: Vec::new(),
            last_change: None,
        };
        driver
            .fetched
            .resize_with(driver.positions.len(), Fetched::default);
        driver.assign()?;
        Ok(driver)
    }

    fn id(&self) -> TaskId {
        self.task.id().clone()
    }

    /// Assigns the task's partitions of the stage's consumer at the gate's
    /// positions. Used at start and after every abort: Kafka's consumer
    /// does not rewind by itself (KAFKA-17582), and reassigning drops
    /// whatever it had fetched beyond the committed positions.
    fn assign(&mut self) -> Result<(), RuntimeError> {
        self.queues.assign(&self.positions)
    }

    fn run(&mut self, stop: &StopFlags, exported: &mut Exported) -> Exit {
        let mut last_progress = Instant::now();
        loop {
            if stop.is_lost() {
                // The group took the task away when this instance lost its
                // session: another instance may run it already, and the
                // cluster may be away. No final commit: the next owner's
                // fence aborts the open transaction.
                return Exit::Failed(RuntimeError::Released {
                    task: self.id(),
                    cause: ReleaseCause::Lost,
                });
            }
            if stop.is_set() {
                return match self.shut_down() {
                    Ok(()) => Exit::Stopped,
                    Err(exit) => exit,
                };
            }
            self.figures.turned(self.task.id());
            if exported.due() {
                exported.publish(&self.task.metrics());
            }
            match self.step(exported) {
                Ok(true) => last_progress = Instant::now(),
                Ok(false) => {
                    if last_progress.elapsed() >= self.config.stall_check {
                        if let Err(exit) = self.refresh_log_ends() {
                            return exit;
                        }
                        last_progress = Instant::now();
                    }
                }
                Err(exit) => return exit,
            }
        }
    }

    /// One turn: fetch, deliver, tick, commit. True if anything was
    /// delivered.
    fn step(&mut self, exported: &Exported) -> Result<bool, Exit> {
        let mut now = wall_clock_ms();
        let wait = self.poll_wait(now);
        self.fetch(wait)?;
        let mut delivered = 0usize;
        while let Some(tp) = self.task.next_deliverable(now)? {
            let mut produced = std::mem::take(&mut self.produced);
            produced.clear();
            let sent = self
                .task
                .deliver(&tp, &mut produced)
                .map_err(Exit::from)
                .and_then(|()| self.send(produced.drain(..)));
            self.produced = produced;
            sent?;
            delivered += 1;
            // A turn's records (up to `max_batch`) can take longer than the
            // commit interval or a tick's: what time brings comes due
            // within the turn too (X2, T3).
            if delivered.is_multiple_of(TIME_CHECK_EVERY) {
                now = wall_clock_ms();
                self.on_time(now, exported)?;
            }
        }
        self.on_time(wall_clock_ms(), exported)?;
        Ok(delivered > 0)
    }

    /// What time alone brings due: the next tick (T3), the open
    /// transaction's commit (X2), or an idle task's fence check (X4).
    fn on_time(&mut self, now: i64, exported: &Exported) -> Result<(), Exit> {
        if let Some((tick, _)) = self.task.poll_tick(now) {
            self.send(std::iter::once(tick))?;
        }
        if self.task.wants_commit(now) {
            let started = Instant::now();
            self.commit(now)?;
            exported.commit_took(started.elapsed());
            self.figures.committed(self.task.id());
        } else if self.fence_check_due() {
            self.commit(now)?;
            tracing::debug!(task = %self.task.id(), "idle: checked the fence with an empty transaction (X4)");
        }
        Ok(())
    }

    /// X4: an idle task makes no transactional call, so a newer owner's
    /// fence would go unnoticed for as long as no record or tick comes: the
    /// zombie would stay up, reported running. After `fence_check` without
    /// a transaction it commits its positions and checkpoint again, which
    /// changes nothing when it still owns the task and fails as fenced when
    /// it does not.
    fn fence_check_due(&self) -> bool {
        self.transaction_began.is_none()
            && !self.task.has_open_work()
            && self.task.failure().is_none()
            && self.last_committed.elapsed() >= self.config.fence_check
    }

    /// How long the task may sleep waiting for records, which wake it as
    /// they come, as does a stop: never past what time alone changes (the
    /// next tick, an open transaction's commit, X2, the end of a wait for a
    /// source, G9), never past the next read of a visible end while it
    /// waits for a source behind its log (G9), and never longer than the
    /// idle poll.
    fn poll_wait(&self, now: i64) -> Duration {
        let mut wait = self.config.idle_poll;
        if self.positions.iter().any(|(tp, _)| self.task.waits_for(tp)) {
            wait = wait.min(VISIBLE_END_EVERY);
        }
        if let Some(at) = self.task.poll_timeout(now) {
            let until = u64::try_from(at.saturating_sub(now)).unwrap_or(0);
            wait = wait.min(Duration::from_millis(until));
        }
        wait
    }

    /// Polls up to `max_batch` records from the task's partition queues
    /// (waiting at most `wait` for the first) and hands them to the gate,
    /// grouped by tp. Serves the stage consumer's own queue first.
    fn fetch(&mut self, wait: Duration) -> Result<(), Exit> {
        // Each turn's batch starts empty (a failed turn may have left some).
        for fetched in &mut self.fetched {
            fetched.records.clear();
        }
        let stage = Arc::clone(self.queues.stage());
        if let Some(error) = stage.serve() {
            return Err(Exit::Failed(stage_failure(
                self.task.id(),
                stage.group(),
                error,
            )));
        }
        if self.queues.misrouted() {
            self.assign()?;
        }
        let mut taken = 0;
        let mut waited = false;
        loop {
            self.queues.arm();
            let lanes = self.queues.lanes();
            for turn in 0..lanes {
                let lane = (self.first_lane + turn) % lanes;
                while taken < self.config.max_batch {
                    let Some(polled) = self.queues.lane(lane).poll(Duration::ZERO) else {
                        break;
                    };
                    // Errors count too: a lane that keeps reporting one
                    // must not keep the turn from ending.
                    taken += 1;
                    let message = match polled {
                        Ok(message) => message,
                        Err(KafkaError::PartitionEOF(_)) => continue,
                        Err(error) => {
                            if stage.is_fatal(&error) {
                                return Err(Exit::Failed(RuntimeError::Consume {
                                    task: self.task.id().clone(),
                                    tp: Some(self.positions[lane].0.clone()),
                                    source: Box::new(error),
                                }));
                            }
                            // A leader moving: librdkafka retries by itself,
                            // and the task waits.
                            continue;
                        }
                    };
                    let Ok(offset) = u64::try_from(message.offset()) else {
                        continue;
                    };
                    // Records from before the last rewind may still arrive
                    // once; the gate must see each offset in order.
                    if offset < self.positions[lane].1 {
                        continue;
                    }
                    self.positions[lane].1 = offset + 1;
                    self.fetched[lane].records.push(consumed(&message));
                }
            }
            self.first_lane = self.first_lane.wrapping_add(1);
            if taken > 0 || waited || wait.is_zero() {
                break;
            }
            self.queues.wait(wait);
            waited = true;
        }
        for (fetched, (tp, next_offset)) in self.fetched.iter_mut().zip(&self.positions) {
            if fetched.records.is_empty() {
                continue;
            }
            fetched.next_offset = *next_offset;
            // No log end here: a fetch's cached high watermark may predate a
            // record that claims beyond it. A fresh one is read when the
            // task stalls (refresh_log_ends).
            fetched.log_end = u64::MAX;
            self.task.handle_fetched(tp, fetched);
        }
        self.read_visible_ends();
        Ok(())
    }

    /// G9: a task that delivers in timestamp order waits for a drained
    /// source until it knows the source is caught up, and its fetches carry
    /// no log end: it reads the last stable offset of each source it waits
    /// for (at most every [`VISIBLE_END_EVERY`], so a wait costs the broker
    /// a few ListOffsets, not one per turn). librdkafka hands over records
    /// only, so a position stops short of the transaction markers and
    /// aborted records before that offset: when two reads in a row find the
    /// same end and the position unmoved, with nothing fetched between
    /// them, what lies between is no record, and the source is caught up
    /// at its position. A failed read leaves the source waited for until
    /// one succeeds.
    fn read_visible_ends(&mut self) {
        if !self.task.is_synchronised()
            || self
                .visible_ends_read
                .is_some_and(|read| read.elapsed() < VISIBLE_END_EVERY)
        {
            return;
        }
        let waited: Vec<usize> = (0..self.positions.len())
            .filter(|lane| self.task.waits_for(&self.positions[*lane].0))
            .collect();
        if waited.is_empty() {
            return;
        }
        self.visible_ends_read = Some(Instant::now());
        self.visible_ends_seen.resize(self.positions.len(), None);
        for lane in waited {
            let (tp, position) = self.positions[lane].clone();
            match self.log_ends.watermarks(&tp) {
                Ok(marks) => {
                    let end = marks.last_stable_offset;
                    let seen = Some((position, end));
                    let unmoved = self.visible_ends_seen[lane] == seen;
                    self.visible_ends_seen[lane] = seen;
                    let visible = match unmoved && end > position {
                        true => position,
                        false => end,
                    };
                    self.task.handle_visible_end(&tp, visible);
                }
                Err(error) => tracing::debug!(
                    task = %self.task.id(),
                    %tp,
                    %error,
                    "no visible end read for a source waited for (G9)"
                ),
            }
        }
    }

    /// G6 on a stalled task: reads every consumed tp's high watermark from
    /// the broker, after the held records were fetched, so a claim at or
    /// beyond it is reported as poison instead of waited on forever.
    fn refresh_log_ends(&mut self) -> Result<(), Exit> {
        if self.task.metrics().records_held == 0 {
            return Ok(());
        }
        for (lane, (tp, next_offset)) in self.positions.iter().enumerate() {
            let marks = self.log_ends.watermarks(tp)?;
            // No records: only the log end is news.
            let fetched = &mut self.fetched[lane];
            fetched.records.clear();
            fetched.next_offset = *next_offset;
            fetched.log_end = marks.high_watermark;
            self.task.handle_fetched(tp, fetched);
        }
        // Surfaces the poison, if any.
        self.task.next_deliverable(wall_clock_ms())?;
        Ok(())
    }

    fn ensure_transaction(&mut self) -> Result<(), Exit> {
        if self.transaction_began.is_none() {
            self.producer.begin().map_err(|error| self.failed(error))?;
            self.transaction_began = Some(Instant::now());
        }
        Ok(())
    }

    /// Queues records in the open transaction. Their delivery reports are
    /// not awaited one by one: committing flushes them, and fails if any
    /// failed.
    fn send(&mut self, records: impl ExactSizeIterator<Item = ProducedRecord>) -> Result<(), Exit> {
        if records.len() == 0 {
            return Ok(());
        }
        self.ensure_transaction()?;
        for record in records {
            if self.task.dead_letter_tp() == Some(&record.tp) {
                log_dead_letter(self.task.id(), &record);
            }
            if let Err(error) = self.producer.enqueue_unreported(&record.tp, &record.data) {
                return self.on_transaction_error(error);
            }
        }
        Ok(())
    }

    /// X1: the task's state changes (S5), positions and checkpoint go into
    /// the transaction, and it commits. A failure that requires an abort
    /// aborts and rewinds (X3); a retriable one is retried; a fatal one
    /// stops the task.
    fn commit(&mut self, now: i64) -> Result<(), Exit> {
        let mut produced = std::mem::take(&mut self.produced);
        produced.clear();
        let prepared = self
            .task
            .prepare_commit(&mut self.commit_request, &mut produced)
            .map_err(Exit::from);
        let last_change = match (&prepared, &self.local, self.task.changelog_tp()) {
            (Ok(()), Some(_), Some(changelog)) => {
                for record in produced.iter().filter(|record| record.tp == *changelog) {
                    if let Some(key) = &record.data.key {
                        self.unapplied
                            .push((key.clone(), record.data.value.clone()));
                    }
                }
                produced
                    .iter()
                    .rposition(|record| record.tp == *changelog)
                    .map(|at| produced.remove(at))
            }
            _ => None,
        };
        let sent = prepared
            .and_then(|()| self.send(produced.drain(..)))
            .and_then(|()| match last_change {
                // Sent last, with a report: where the store then stands.
                Some(record) => self.send_reported(record),
                None => Ok(()),
            });
        self.produced = produced;
        sent?;
        self.ensure_transaction()?;
        let request = &self.commit_request;
        let offsets: Vec<(Tp, CommittedOffset)> = request
            .offsets
            .iter()
            .map(|(tp, offset)| {
                (
                    tp.clone(),
                    CommittedOffset::new(*offset, request.metadata.clone()),
                )
            })
            .collect();
        let group = Arc::clone(&request.group);
        self.producer.flush_before_offsets();
        let sent = self.retrying(|producer| producer.send_offsets_blocking(&group, &offsets));
        if let Err(error) = sent {
            return self.on_transaction_error(error);
        }
        if let Err(error) = self.retrying(TxnProducer::commit_blocking) {
            return self.on_transaction_error(error);
        }
        self.transaction_began = None;
        self.last_committed = Instant::now();
        self.task.handle_committed(now);
        self.apply_committed()
    }

    /// Queues the transaction's last changelog record with a delivery
    /// report.
    fn send_reported(&mut self, record: ProducedRecord) -> Result<(), Exit> {
        self.ensure_transaction()?;
        match self.producer.enqueue(&record.tp, &record.data) {
            Ok(delivery) => {
                self.last_change = Some(delivery);
                Ok(())
            }
            Err(error) => self.on_transaction_error(error),
        }
    }

    /// The committed transaction's changelog records go to the local
    /// store, as one batch, and a checkpoint follows when one is due. A
    /// report that does not come, or a store that fails, ends the run:
    /// the next start restores from the changelog what the store lacks.
    fn apply_committed(&mut self) -> Result<(), Exit> {
        let (Some(store), Some(delivery)) = (&mut self.local, self.last_change.take()) else {
            return Ok(());
        };
        let offset = delivery.wait_blocking(self.config.live.deadline())?;
        let applied = store.apply(&self.unapplied, offset).and_then(|()| {
            if store.checkpoint_due() {
                store.checkpoint()
            } else {
                Ok(())
            }
        });
        self.unapplied.clear();
        applied.map_err(|source| self.state_error(source))
    }

    /// Checkpoints the local store, if the task has one.
    fn checkpoint(&mut self) -> Result<(), Exit> {
        let Some(store) = &mut self.local else {
            return Ok(());
        };
        store
            .checkpoint()
            .map_err(|source| self.state_error(source))
    }

    fn state_error(&self, source: crate::state::StateError) -> Exit {
        let dir = self
            .local
            .as_ref()
            .map(|store| store.dir().to_owned())
            .unwrap_or_default();
        Exit::Failed(RuntimeError::State {
            task: self.id(),
            dir,
            source,
        })
    }

    /// Forgets the open transaction's changelog records: it did not commit.
    fn forget_unapplied(&mut self) {
        self.unapplied.clear();
        self.last_change = None;
    }

    /// True once the group's assignment of this task was lost: no retry,
    /// no abort, no final commit (the next owner's fence settles them).
    fn lost(&self) -> bool {
        self.flags.as_ref().is_some_and(StopFlags::is_lost)
    }

    fn retrying(
        &self,
        mut call: impl FnMut(&TxnProducer) -> Result<(), LiveError>,
    ) -> Result<(), LiveError> {
        let mut tries = 0;
        loop {
            match call(&self.producer) {
                Err(error)
                    if error.txn_class() == Some(TxnErrorClass::Retriable)
                        && tries < RETRIES
                        && !self.lost() =>
                {
                    tries += 1;
                    tracing::warn!(task = %self.task.id(), error = %error, try_number = tries, "transactional call failed; retrying");
                    std::thread::sleep(Duration::from_millis(100 << tries.min(4)));
                }
                other => return other,
            }
        }
    }

    /// The three classes of Kafka's transaction errors, as core actions:
    /// requires-abort (and retriable ones that kept failing) abort the
    /// transaction and rewind; fatal ones stop the task.
    fn on_transaction_error(&mut self, error: LiveError) -> Result<(), Exit> {
        if self.lost() {
            return Err(Exit::Failed(RuntimeError::Released {
                task: self.id(),
                cause: ReleaseCause::LostInCall(Box::new(error)),
            }));
        }
        match error.txn_class() {
            // A missing ACL stays missing: abort what is open, then stop
            // the task (its failure policy applies).
            Some(TxnErrorClass::Retriable | TxnErrorClass::RequiresAbort)
                if error.denied().is_some() =>
            {
                tracing::error!(task = %self.task.id(), error = %error, "not authorized: aborting the transaction and stopping the task");
                // The task stops whether or not the abort succeeds (the
                // broker may refuse it after the refusal): a producer that
                // cannot abort leaves the transaction to its timeout, and
                // nothing of it is committed.
                if let Err(abort) = self.abort() {
                    tracing::warn!(task = %self.task.id(), "the abort after the refusal failed too; the broker aborts the transaction at its timeout");
                    drop(abort);
                }
                Err(self.failed(error))
            }
            Some(TxnErrorClass::Retriable | TxnErrorClass::RequiresAbort) => {
                tracing::warn!(task = %self.task.id(), error = %error, "transaction aborted; rewinding to the committed positions (X3)");
                self.abort()?;
                Ok(())
            }
            _ => Err(self.failed(error)),
        }
    }

    /// The error that ends this run. A fence while the transaction has been
    /// open past the transaction timeout is the broker's abort of it, not a
    /// newer owner (whose `init_transactions` would have fenced a young
    /// transaction just the same): the task restarts instead of leaving.
    fn failed(&self, error: LiveError) -> Exit {
        let timeout = self.config.live.transaction_timeout;
        let open_for = self.transaction_began.map(|began| began.elapsed());
        Exit::Failed(match open_for {
            Some(open_for) if error.is_fenced() && open_for >= timeout => {
                RuntimeError::TransactionTimedOut {
                    task: self.id(),
                    open_for,
                    timeout,
                    source: Box::new(error),
                }
            }
            _ => RuntimeError::Live(error),
        })
    }

    /// Drops the task's producer on a thread of its own (after a call was
    /// abandoned, its destructor may block as long as the call does), and
    /// unassigns its partitions of the stage's consumer at once.
    fn abandon(mut self) {
        // The store holds committed transactions only, so what it applied
        // may be checkpointed whatever ended the run.
        if let Err(Exit::Failed(error)) = self.checkpoint() {
            tracing::warn!(task = %self.task.id(), error = %error, "the local store could not be checkpointed; the next start restores more of the changelog");
        }
        let TaskDriver {
            producer, queues, ..
        } = self;
        // Unassigned here, before the task's next run assigns the same
        // partitions again: on the reaper, after a producer that blocks,
        // the unassignment could come second and stop the next run's fetching.
        drop(queues);
        drop_elsewhere(producer);
    }

    /// Aborts the open transaction and rewinds the gate and the consumer to
    /// the committed positions (X3).
    fn abort(&mut self) -> Result<(), Exit> {
        self.forget_unapplied();
        if self.transaction_began.is_some() {
            self.producer
                .abort_blocking()
                .map_err(|error| self.failed(error))?;
            self.transaction_began = None;
        }
        let seeks = self.task.handle_aborted();
        for (tp, offset) in seeks {
            if let Some(position) = self.positions.iter_mut().find(|(known, _)| *known == tp) {
                position.1 = offset;
            }
        }
        self.assign()?;
        Ok(())
    }

    /// After a failure: the open transaction is dropped so nothing of it
    /// becomes visible; the broker would abort it at its timeout anyway.
    fn abort_quietly(&mut self) {
        self.forget_unapplied();
        if self.transaction_began.is_some() {
            let _ = self.producer.abort_blocking();
            self.transaction_began = None;
        }
    }

    /// Graceful stop: commits what is pending, whatever the interval. A
    /// task on a path to a consistent view stopped within an epoch commits
    /// nothing of it (V5): it aborts, and its next owner re-reads the epoch.
    fn shut_down(&mut self) -> Result<(), Exit> {
        if self.task.has_open_work() && self.task.failure().is_none() {
            match self.task.may_commit() {
                true => self.commit(wall_clock_ms())?,
                false => self.abort_quietly(),
            }
        }
        self.checkpoint()
    }
}

/// One warning per dead letter (X5), naming the record and why, from the
/// headers the core wrote on it.
fn log_dead_letter(id: &TaskId, record: &ProducedRecord) {
    use parsley::dead_letter_headers::{ERROR, MESSAGE, OFFSET, PARTITION, TOPIC};
    let header = |name: &str| {
        record
            .data
            .header(name)
            .map(|value| String::from_utf8_lossy(value).into_owned())
            .unwrap_or_default()
    };
    tracing::warn!(
        task = %id,
        dead_letter_topic = %record.tp,
        kind = %header(ERROR),
        record = %format!("{}-{}@{}", header(TOPIC), header(PARTITION), header(OFFSET)),
        error = %header(MESSAGE),
        "record dead-lettered (X5)"
    );
}

/// Drops `clients` on a thread of their own: after a call was abandoned, a
/// client's destructor may block as long as the call does.
pub(super) fn drop_elsewhere<T: Send + 'static>(clients: T) {
    let reaped = std::thread::Builder::new()
        .name("parsley reaper".into())
        .spawn(move || drop(clients));
    if let Err(error) = reaped {
        tracing::warn!(error = %error, "no thread to drop a task's old clients on; they are leaked");
    }
}

/// The error a failure of the stage's consumer's own queue stops task `id`
/// with: the broker's refusal of the stage's group (no ACL lets the
/// principal describe it), typed so the failure policy applies, or an
/// error no retry cures.
fn stage_failure(id: &TaskId, group: &str, error: KafkaError) -> RuntimeError {
    if is_group_refusal(&error) {
        return RuntimeError::Live(LiveError::Coordinator {
            group: group.to_owned(),
            source: Box::new(error),
        });
    }
    RuntimeError::Consume {
        task: id.clone(),
        tp: None,
        source: Box::new(error),
    }
}
