//! What an instance knows of itself, for operators: its state, its owned
//! tasks and each one's state, turns, commits, restore progress and lag,
//! with the gauges that publish them and the answers of `/health` and
//! `/ready` ([`Health`]).
//!
//! The counters of each task's runs are [`Exported`](super::exported)'s;
//! this is the instance-wide board they sit beside. Lag is read from the
//! cluster here, not from a task's consumer: the stage group's committed
//! position and the last stable offset of each source tp, with the
//! committed records in between counted (as `status` does), so the figure
//! holds whether the task polls, is stuck in a call, restarts, is fenced or
//! has stopped. While the cluster does not answer the figure keeps its last
//! reading and `parsley_consumer_lag_age_seconds` grows.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use parsley::App;
use parsley::Assembly;
use parsley::TaskId;
use parsley::Tp;

use super::super::client::{Isolation, LiveClient, LiveConsumer};
use super::super::error::LiveError;
use super::super::instance::{instance_name, InstanceState, TaskReport, TaskState};
use super::super::state::StoreReader;
use super::super::status::tp_lag;
use super::clock::wall_clock_ms;

/// How often the instance's gauges and the tasks' lag are refreshed.
const EVERY: Duration = Duration::from_secs(1);

/// One task's entry on the board.
#[derive(Clone, Debug)]
struct TaskEntry {
    state: TaskState,
    since_ms: u64,
    /// The last turn of its loop (or its last state change).
    last_turn: Instant,
    last_commit: Option<Instant>,
    /// Changelog records still to restore when the restore began, and
    /// whether it is done.
    restore_remaining: u64,
    /// The last lag read from the cluster, and when.
    lag: Option<(u64, Instant)>,
    /// The reason of a real failure.
    failure: Option<String>,
}

#[derive(Debug, Default)]
struct Board {
    tasks: BTreeMap<TaskId, TaskEntry>,
    /// The tasks this instance owns now.
    owned: BTreeSet<TaskId>,
    /// Whether the instance was given its tasks yet.
    assigned: bool,
    /// Since when a rebalance of the group has been under way without
    /// its assignment reaching this instance.
    rebalancing: Option<Instant>,
    shutting_down: bool,
    /// The state last logged.
    logged: Option<InstanceState>,
    /// Bumped on every task state change, for the reports to the cluster.
    version: u64,
    /// Each task's report in the group when this instance took it: who
    /// owned it before, for the explanation of a wait for that owner's
    /// transaction.
    taken_from: BTreeMap<TaskId, TaskReport>,
}

/// The instance's board, shared by its task threads, its membership thread,
/// its figures loop and its health endpoints.
#[derive(Debug)]
pub(crate) struct Figures {
    app: String,
    instance: &'static str,
    /// How long a turn may take before the task counts as stalled:
    /// librdkafka's bound on one call ([`LiveConfig::timeout`]); a turn
    /// longer than that is a call overrunning it, or retrying.
    ///
    /// [`LiveConfig::timeout`]: crate::LiveConfig::timeout
    stall_after: Duration,
    board: Mutex<Board>,
    /// Where the instance answers interactive queries, as its reports to
    /// the group advertise it; set once, at start.
    endpoint: std::sync::OnceLock<String>,
    /// The local store of each running task, for interactive queries
    /// (`None`: the task runs without one). A task is here from the end of
    /// its restore to the end of its run; a query reads under the read
    /// lock, so a run ending (write lock) waits for the reads in flight
    /// before its store closes.
    stores: std::sync::RwLock<BTreeMap<TaskId, Option<StoreReader>>>,
}

fn lock(board: &Mutex<Board>) -> MutexGuard<'_, Board> {
    // Every critical section leaves the board whole.
    board.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Figures {
    pub(crate) fn new(app: &str, stall_after: Duration) -> Arc<Figures> {
        Arc::new(Figures {
            app: app.to_owned(),
            instance: instance_name(),
            stall_after,
            board: Mutex::new(Board::default()),
            endpoint: std::sync::OnceLock::new(),
            stores: std::sync::RwLock::default(),
        })
    }

    /// Advertises `endpoint` as where this instance answers queries.
    pub(crate) fn advertise(&self, endpoint: String) {
        let _ = self.endpoint.set(endpoint);
    }

    /// Where this instance answers queries, if it does.
    pub(crate) fn endpoint(&self) -> Option<String> {
        self.endpoint.get().cloned()
    }

    /// Task `id` restored its state and runs: queries read `store`.
    pub(crate) fn serve_store(&self, id: &TaskId, store: Option<StoreReader>) {
        self.stores
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id.clone(), store);
    }

    /// Task `id`'s run ended: queries no longer read its store. Returns
    /// once no query reads it.
    pub(crate) fn withdraw_store(&self, id: &TaskId) {
        self.stores
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
    }

    /// Runs `read` on task `id`'s store entry (`None`: the task is not
    /// served here), holding it open meanwhile.
    pub(crate) fn with_store<T>(
        &self,
        id: &TaskId,
        read: impl FnOnce(Option<&Option<StoreReader>>) -> T,
    ) -> T {
        let stores = self.stores.read().unwrap_or_else(PoisonError::into_inner);
        read(stores.get(id))
    }

    /// Whether the instance owns task `id` now, and the task's state on
    /// this instance, with the changelog offsets still to restore.
    pub(crate) fn task_view(&self, id: &TaskId) -> (bool, Option<(TaskState, u64)>) {
        let board = lock(&self.board);
        (
            board.owned.contains(id),
            board
                .tasks
                .get(id)
                .map(|entry| (entry.state, entry.restore_remaining)),
        )
    }

    fn labels(&self) -> [(&'static str, String); 2] {
        [
            ("app", self.app.clone()),
            ("instance", self.instance.to_owned()),
        ]
    }

    /// The instance now owns `ids` (a static share, or the group's
    /// assignment).
    pub(crate) fn own(&self, ids: &[TaskId]) {
        let mut board = lock(&self.board);
        board.assigned = true;
        board.owned.extend(ids.iter().cloned());
        self.log_state(&mut board);
    }

    /// The group's reports of tasks this instance takes, read before it
    /// reports them as its own.
    pub(crate) fn taken_from(&self, reports: Vec<(TaskId, TaskReport)>) {
        lock(&self.board).taken_from.extend(reports);
    }

    /// Who reported task `id` to the group before this instance took it,
    /// and in which state, if the group said when it was taken.
    pub(crate) fn previous_report(&self, id: &TaskId) -> Option<TaskReport> {
        lock(&self.board).taken_from.get(id).cloned()
    }

    /// The instance no longer owns `ids`.
    pub(crate) fn disown(&self, ids: &[TaskId]) {
        let mut board = lock(&self.board);
        for id in ids {
            board.owned.remove(id);
        }
        self.log_state(&mut board);
    }

    /// The group assignment was lost: nothing is owned until the next.
    pub(crate) fn disown_all(&self) {
        let mut board = lock(&self.board);
        board.owned.clear();
        self.log_state(&mut board);
    }

    /// A rebalance begins (`true`) or ends (`false`). Each beginning
    /// counts once: a cooperative rebalance calls back twice (revoke, then
    /// assign).
    pub(crate) fn rebalancing(&self, now: bool) {
        let mut board = lock(&self.board);
        if !now {
            board.rebalancing = None;
        } else if board.rebalancing.is_none() {
            board.rebalancing = Some(Instant::now());
            metrics::counter!("parsley_rebalances_total", &self.labels()).increment(1);
        }
        self.log_state(&mut board);
    }

    /// How long the group's current rebalance has waited for this
    /// instance's assignment, if one is under way.
    pub(crate) fn rebalancing_for(&self) -> Option<Duration> {
        lock(&self.board).rebalancing.map(|since| since.elapsed())
    }

    /// The instance rejoined its group with a fresh consumer: a rebalance
    /// begins again from now.
    pub(crate) fn rejoined(&self) {
        let mut board = lock(&self.board);
        board.rebalancing = Some(Instant::now());
        self.log_state(&mut board);
    }

    /// The instance is stopping.
    pub(crate) fn shutting_down(&self) {
        let mut board = lock(&self.board);
        board.shutting_down = true;
        self.log_state(&mut board);
    }

    /// Task `id` enters `state`; `failure` says why when it failed.
    pub(crate) fn task_state(&self, id: &TaskId, state: TaskState, failure: Option<String>) {
        let mut board = lock(&self.board);
        let now = Instant::now();
        let entry = board.tasks.entry(id.clone()).or_insert_with(|| TaskEntry {
            state,
            since_ms: 0,
            last_turn: now,
            last_commit: None,
            restore_remaining: 0,
            lag: None,
            failure: None,
        });
        let changed = entry.state != state || entry.since_ms == 0;
        if changed {
            entry.state = state;
            entry.since_ms = u64::try_from(wall_clock_ms()).unwrap_or(0);
        }
        entry.last_turn = now;
        if state == TaskState::Failed {
            entry.failure = failure;
        } else if state == TaskState::Restoring {
            entry.failure = None;
        }
        if changed {
            board.version += 1;
            tracing::info!(app = %self.app, task = %id, state = %state, "task state");
        }
        self.log_state(&mut board);
    }

    /// Task `id` turned its loop: it is not stuck in a call.
    pub(crate) fn turned(&self, id: &TaskId) {
        if let Some(entry) = lock(&self.board).tasks.get_mut(id) {
            entry.last_turn = Instant::now();
        }
    }

    /// Task `id` committed.
    pub(crate) fn committed(&self, id: &TaskId) {
        if let Some(entry) = lock(&self.board).tasks.get_mut(id) {
            let now = Instant::now();
            entry.last_commit = Some(now);
            entry.last_turn = now;
        }
    }

    /// Task `id` has `remaining` changelog records to restore (0 once done).
    pub(crate) fn restoring(&self, id: &TaskId, remaining: u64) {
        if let Some(entry) = lock(&self.board).tasks.get_mut(id) {
            entry.restore_remaining = remaining;
        }
    }

    /// The instance's state, derived from the board: see [`InstanceState`].
    pub(crate) fn state(&self) -> InstanceState {
        derive_state(&lock(&self.board))
    }

    /// Every task that failed for real on this instance, with why.
    fn failures(board: &Board) -> Vec<String> {
        board
            .tasks
            .iter()
            .filter(|(_, entry)| entry.state == TaskState::Failed)
            .map(|(id, entry)| {
                format!(
                    "task {id} failed: {}",
                    entry.failure.as_deref().unwrap_or("no reason given")
                )
            })
            .collect()
    }

    /// `/health`: alive and not in `ERROR`; the failures otherwise.
    pub(crate) fn health(&self) -> Result<String, HealthError> {
        let board = lock(&self.board);
        let state = derive_state(&board);
        if state == InstanceState::Error {
            return Err(HealthError::Unhealthy {
                state,
                failures: Figures::failures(&board),
            });
        }
        Ok(state.to_string())
    }

    /// `/ready`: every owned task runs and none is stalled; what is not,
    /// otherwise.
    pub(crate) fn ready(&self) -> Result<String, HealthError> {
        let board = lock(&self.board);
        let state = derive_state(&board);
        let mut not_ready = Vec::new();
        for id in &board.owned {
            match board.tasks.get(id) {
                None => not_ready.push(format!("task {id} not started")),
                Some(entry) if entry.state != TaskState::Running => {
                    not_ready.push(format!("task {id} {}", entry.state));
                }
                Some(entry) if entry.last_turn.elapsed() > self.stall_after => {
                    not_ready.push(format!(
                        "task {id} stalled: no turn for {:.0} s",
                        entry.last_turn.elapsed().as_secs_f64()
                    ));
                }
                Some(_) => {}
            }
        }
        if state == InstanceState::Running && not_ready.is_empty() {
            Ok(format!("{state}: {} tasks running", board.owned.len()))
        } else {
            Err(HealthError::NotReady { state, not_ready })
        }
    }

    /// The reports of the owned tasks to commit to the group, if any task's
    /// state changed since `seen` (which it updates), or `force`.
    pub(crate) fn reports(&self, seen: &mut u64, force: bool) -> Option<Vec<(TaskId, TaskReport)>> {
        let board = lock(&self.board);
        if board.version == *seen && !force {
            return None;
        }
        *seen = board.version;
        Some(
            board
                .tasks
                .iter()
                .filter(|(id, _)| board.owned.contains(*id))
                .map(|(id, entry)| {
                    (
                        id.clone(),
                        TaskReport {
                            instance: self.instance.to_owned(),
                            state: entry.state,
                            since_ms: entry.since_ms,
                            endpoint: self.endpoint(),
                        },
                    )
                })
                .collect(),
        )
    }

    /// The tasks the instance owns now.
    pub(crate) fn owned(&self) -> Vec<TaskId> {
        lock(&self.board).owned.iter().cloned().collect()
    }

    /// The reports of `ids`, owned or not (the last ones, as the instance
    /// leaves its group).
    pub(crate) fn reports_of(&self, ids: &[TaskId]) -> Vec<(TaskId, TaskReport)> {
        let board = lock(&self.board);
        ids.iter()
            .filter_map(|id| {
                let entry = board.tasks.get(id)?;
                Some((
                    id.clone(),
                    TaskReport {
                        instance: self.instance.to_owned(),
                        state: entry.state,
                        since_ms: entry.since_ms,
                        endpoint: self.endpoint(),
                    },
                ))
            })
            .collect()
    }

    /// Logs a change of the instance's state, and sets its gauge.
    fn log_state(&self, board: &mut Board) {
        let state = derive_state(board);
        if board.logged == Some(state) {
            return;
        }
        board.logged = Some(state);
        tracing::info!(app = %self.app, instance = self.instance, state = %state, owned = board.owned.len(), "instance state");
        let labels = self.labels();
        for each in InstanceState::ALL {
            let mut labels = labels.to_vec();
            labels.push(("state", each.as_str().to_owned()));
            metrics::gauge!("parsley_instance_state", &labels)
                .set(f64::from(u8::from(each == state)));
        }
    }

    /// Publishes the instance's and its tasks' gauges.
    fn publish(&self) {
        let board = lock(&self.board);
        let labels = self.labels();
        metrics::gauge!("parsley_owned_tasks", &labels).set(board.owned.len() as f64);
        for (id, entry) in &board.tasks {
            let task = [("app", self.app.clone()), ("task", id.to_string())];
            for state in TaskState::ALL {
                let mut labels = task.to_vec();
                labels.push(("state", state.as_str().to_owned()));
                metrics::gauge!("parsley_task_state", &labels)
                    .set(f64::from(u8::from(entry.state == state)));
            }
            if let Some(at) = entry.last_commit {
                metrics::gauge!("parsley_seconds_since_last_commit", &task)
                    .set(at.elapsed().as_secs_f64());
            }
            metrics::gauge!("parsley_restore_remaining_records", &task)
                .set(entry.restore_remaining as f64);
            if let Some((lag, at)) = entry.lag {
                metrics::gauge!("parsley_consumer_lag", &task).set(lag as f64);
                metrics::gauge!("parsley_consumer_lag_age_seconds", &task)
                    .set(at.elapsed().as_secs_f64());
            }
        }
    }

    /// The tasks whose lag the loop reads: every task that ran here.
    fn tracked(&self) -> Vec<TaskId> {
        lock(&self.board).tasks.keys().cloned().collect()
    }

    fn set_lag(&self, id: &TaskId, lag: u64) {
        if let Some(entry) = lock(&self.board).tasks.get_mut(id) {
            entry.lag = Some((lag, Instant::now()));
        }
    }
}

fn derive_state(board: &Board) -> InstanceState {
    if board.shutting_down {
        return InstanceState::PendingShutdown;
    }
    if board
        .tasks
        .values()
        .any(|entry| entry.state == TaskState::Failed)
    {
        return InstanceState::Error;
    }
    if !board.assigned {
        return InstanceState::Created;
    }
    let all_running = board.owned.iter().all(|id| {
        board
            .tasks
            .get(id)
            .is_some_and(|entry| entry.state == TaskState::Running)
    });
    if board.rebalancing.is_some() || !all_running {
        InstanceState::Rebalancing
    } else {
        InstanceState::Running
    }
}

/// Why an instance is not healthy ([`Health::health`]) or not ready
/// ([`Health::ready`]): its state and what is wrong, one line a task.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HealthError {
    /// The instance is in [`InstanceState::Error`]: its failed tasks and why.
    #[error("{state}: {}", failures.join("; "))]
    Unhealthy {
        /// The instance's state.
        state: InstanceState,
        /// Each failed task and why.
        failures: Vec<String>,
    },
    /// Not every owned task runs, or one is stalled: which, and how.
    #[error("{}", state_and(*state, not_ready))]
    NotReady {
        /// The instance's state.
        state: InstanceState,
        /// Each task that is not ready and why; empty when the state alone
        /// says it.
        not_ready: Vec<String>,
    },
}

/// `STATE`, or `STATE: line; line` when there are lines.
fn state_and(state: InstanceState, lines: &[String]) -> String {
    if lines.is_empty() {
        state.to_string()
    } else {
        format!("{state}: {}", lines.join("; "))
    }
}

/// A view of a running instance for its `/health` and `/ready` endpoints
/// ([`Runtime::health`](super::Runtime::health)).
#[derive(Clone, Debug)]
pub struct Health(pub(crate) Arc<Figures>);

impl Health {
    /// The instance's state.
    pub fn state(&self) -> InstanceState {
        self.0.state()
    }

    /// `Ok` with the state while the process is alive and not in
    /// [`InstanceState::Error`]; the failed tasks and why otherwise.
    pub fn health(&self) -> Result<String, HealthError> {
        self.0.health()
    }

    /// `Ok` while every owned task runs and none is stalled in a call; what
    /// is not ready otherwise.
    pub fn ready(&self) -> Result<String, HealthError> {
        self.0.ready()
    }
}

/// Reads each tracked task's lag from the cluster and publishes the
/// instance's figures every second, until `stop` is set.
pub(crate) async fn refresh(
    figures: Arc<Figures>,
    client: Arc<LiveClient>,
    app: Arc<App>,
    assembly: Arc<Assembly>,
    stop: Arc<AtomicBool>,
) {
    let mut readers = LagReaders::default();
    let mut failing_since: Option<Instant> = None;
    while !stop.load(Ordering::Relaxed) {
        figures.publish();
        let mut failed = None;
        for id in figures.tracked() {
            match readers.task_lag(&client, &app, &assembly, &id).await {
                Ok(lag) => figures.set_lag(&id, lag),
                Err(error) => {
                    failed = Some(error);
                    break;
                }
            }
        }
        match failed {
            Some(error) => {
                // Logged once per outage, not every second.
                if failing_since.is_none() {
                    tracing::warn!(app = app.id(), error = %error, "consumer lag cannot be read from the cluster: the figures keep their last reading until it answers");
                    failing_since = Some(Instant::now());
                }
            }
            None => failing_since = None,
        }
        tokio::time::sleep(EVERY).await;
    }
    figures.publish();
}

/// A stage group's consumers for lag readings, kept between readings.
#[derive(Default)]
struct LagReaders {
    by_group: BTreeMap<String, (LiveConsumer, LiveConsumer)>,
}

impl LagReaders {
    /// A task's lag over its source tps, from the cluster, as `status`
    /// reads it ([`tp_lag`]).
    async fn task_lag(
        &mut self,
        client: &LiveClient,
        app: &App,
        assembly: &Assembly,
        id: &TaskId,
    ) -> Result<u64, LiveError> {
        let Some(plan) = app.stages().iter().find(|plan| plan.name() == &*id.stage) else {
            return Ok(0);
        };
        let tps: Vec<Tp> = plan
            .stage
            .sources()
            .iter()
            .filter(|source| assembly.partitions_of(source.name.as_str()).is_some())
            .map(|source| Tp::new(source.name.clone(), id.partition))
            .collect();
        if !self.by_group.contains_key(&plan.group) {
            let offsets = client.consumer(&plan.group, Isolation::ReadUncommitted)?;
            let reader = client.consumer(&plan.group, Isolation::ReadCommitted)?;
            self.by_group.insert(plan.group.clone(), (offsets, reader));
        }
        let (offsets, reader) = self.by_group.get_mut(&plan.group).expect("inserted above");
        let lag = lag_over(client, offsets, reader, &tps).await;
        if lag.is_err() {
            // Fresh consumers for the next reading: librdkafka reports a
            // refusal of the group once per consumer, and a kept one would
            // wait out its timeout instead (`LiveConsumer::committed`).
            self.by_group.remove(&plan.group);
        }
        lag
    }
}

/// The lag over `tps`: from `offsets`' committed offsets of the group to
/// the last stable offsets, counted by `reader`.
async fn lag_over(
    client: &LiveClient,
    offsets: &LiveConsumer,
    reader: &mut LiveConsumer,
    tps: &[Tp],
) -> Result<u64, LiveError> {
    let committed = offsets.committed(tps).await?;
    let mut lag = 0;
    for (tp, committed) in tps.iter().zip(committed) {
        let from = committed.map(|committed| committed.offset);
        lag += tp_lag(client, reader, tp, from).await?.1;
    }
    Ok(lag)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(partition: u32) -> TaskId {
        TaskId {
            stage: "sum".into(),
            partition,
        }
    }

    /// The instance's state follows Kafka Streams': CREATED until it owns
    /// tasks, REBALANCING while any owned task is not running, RUNNING,
    /// ERROR once a task failed, PENDING_SHUTDOWN when stopping; `/ready`
    /// and `/health` answer from it.
    #[test]
    fn the_instance_state_and_its_endpoints_follow_the_tasks() {
        let figures = Figures::new("shop", Duration::from_secs(30));
        assert_eq!(figures.state(), InstanceState::Created);
        assert!(figures.ready().is_err());
        assert_eq!(figures.health(), Ok("CREATED".into()));
        figures.own(&[task(0), task(1)]);
        assert_eq!(figures.state(), InstanceState::Rebalancing);
        figures.task_state(&task(0), TaskState::Restoring, None);
        figures.task_state(&task(1), TaskState::Running, None);
        assert_eq!(figures.state(), InstanceState::Rebalancing);
        let not_ready = figures.ready().unwrap_err();
        assert!(
            not_ready.to_string().contains("task sum/0 restoring"),
            "{not_ready}"
        );
        figures.task_state(&task(0), TaskState::Running, None);
        assert_eq!(figures.state(), InstanceState::Running);
        assert_eq!(figures.ready(), Ok("RUNNING: 2 tasks running".into()));
        figures.task_state(
            &task(1),
            TaskState::Failed,
            Some("poison at orders-1@7".into()),
        );
        assert_eq!(figures.state(), InstanceState::Error);
        let unhealthy = figures.health().unwrap_err();
        assert!(
            unhealthy
                .to_string()
                .contains("task sum/1 failed: poison at orders-1@7"),
            "{unhealthy}"
        );
        figures.shutting_down();
        assert_eq!(figures.state(), InstanceState::PendingShutdown);
    }

    /// What `/ready` and `/health` print: the state alone, or the state and
    /// each line.
    #[test]
    fn a_health_error_reads_as_the_state_and_its_lines() {
        let alone = HealthError::NotReady {
            state: InstanceState::Created,
            not_ready: Vec::new(),
        };
        assert_eq!(alone.to_string(), "CREATED");
        let lines = HealthError::NotReady {
            state: InstanceState::Rebalancing,
            not_ready: vec![
                "task sum/0 restoring".into(),
                "task sum/1 not started".into(),
            ],
        };
        assert_eq!(
            lines.to_string(),
            "REBALANCING: task sum/0 restoring; task sum/1 not started"
        );
    }

    /// An instance the group gives nothing (more instances than tasks) is
    /// RUNNING and ready once the rebalance ends, not CREATED for ever.
    #[test]
    fn an_instance_given_no_task_is_running_and_ready() {
        let figures = Figures::new("shop", Duration::from_secs(30));
        figures.rebalancing(true);
        figures.own(&[]);
        assert_eq!(figures.state(), InstanceState::Rebalancing);
        figures.rebalancing(false);
        assert_eq!(figures.state(), InstanceState::Running);
        assert_eq!(figures.ready(), Ok("RUNNING: 0 tasks running".into()));
    }

    /// A task whose loop has not turned within the bound on its calls is
    /// stalled, and the instance is not ready.
    #[test]
    fn a_task_stuck_in_a_call_makes_the_instance_not_ready() {
        let figures = Figures::new("shop", Duration::from_millis(50));
        figures.own(&[task(0)]);
        figures.task_state(&task(0), TaskState::Running, None);
        assert!(figures.ready().is_ok());
        std::thread::sleep(Duration::from_millis(80));
        let stalled = figures.ready().unwrap_err();
        assert!(
            stalled.to_string().contains("task sum/0 stalled"),
            "{stalled}"
        );
        figures.turned(&task(0));
        assert!(figures.ready().is_ok());
    }

    /// Reports go to the cluster when a task's state changes, for owned
    /// tasks only.
    #[test]
    fn reports_follow_state_changes_of_owned_tasks() {
        let figures = Figures::new("shop", Duration::from_secs(30));
        let mut seen = 0;
        figures.own(&[task(0)]);
        figures.task_state(&task(0), TaskState::Restoring, None);
        figures.task_state(&task(1), TaskState::Running, None);
        let reports = figures.reports(&mut seen, false).expect("changed");
        assert_eq!(reports.len(), 1);
        assert_eq!(reports[0].0, task(0));
        assert_eq!(reports[0].1.state, TaskState::Restoring);
        assert!(figures.reports(&mut seen, false).is_none());
        assert!(figures.reports(&mut seen, true).is_some());
    }
}
