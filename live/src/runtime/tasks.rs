//! The tasks an instance runs right now, each on a thread of its own with a
//! stop flag of its own: started and released one at a time as group
//! membership moves them, or all at once for a static share.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parsley::App;
use parsley::Assembly;
use parsley::TaskId;

use super::super::client::Wake;
use super::super::instance::TaskState;
use super::figures::Figures;
use super::shared_clients::SharedClients;
use super::task_loop::{self, TaskRun};
use super::{RuntimeConfig, RuntimeError, TaskEnd, TaskEndKind};

/// What a task thread looks at to know it should stop: the instance's flag
/// (a graceful stop of everything) or its own (released on a rebalance).
#[derive(Clone)]
pub(crate) struct StopFlags {
    instance: Arc<AtomicBool>,
    task: Arc<AtomicBool>,
    /// Set with `task` when the group assignment was lost (the session
    /// expired): the task stops without its final commit.
    lost: Arc<AtomicBool>,
    /// Wakes the task from its wait for records when `task` is set.
    wake: Arc<Wake>,
}

impl StopFlags {
    /// What wakes the task: its partition queues share it.
    pub(crate) fn wake(&self) -> Arc<Wake> {
        Arc::clone(&self.wake)
    }

    pub(crate) fn is_set(&self) -> bool {
        self.instance.load(Ordering::Relaxed) || self.task.load(Ordering::Relaxed)
    }

    pub(crate) fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Relaxed)
    }
}

struct Running {
    id: TaskId,
    stop: Arc<AtomicBool>,
    lost: Arc<AtomicBool>,
    wake: Arc<Wake>,
    handle: JoinHandle<TaskRun>,
}

impl Running {
    /// Tells the task to stop (`lost`: without its final commit) and wakes
    /// it, so a task waiting for records stops at once.
    fn tell_to_stop(&self, lost: bool) {
        if lost {
            self.lost.store(true, Ordering::Relaxed);
        }
        self.stop.store(true, Ordering::Relaxed);
        self.wake.notify();
    }

    /// Running, and not told to stop.
    fn is_live(&self) -> bool {
        !self.handle.is_finished() && !self.stop.load(Ordering::Relaxed)
    }
}

/// The instance's task threads, running and returned.
pub(crate) struct TaskSet {
    app: Arc<App>,
    assembly: Arc<Assembly>,
    config: RuntimeConfig,
    instance_stop: Arc<AtomicBool>,
    /// Tasks that returned, in the order they did, for the failure policy.
    ended: Arc<Mutex<Vec<TaskEnd>>>,
    /// Threads not joined yet, finished or not.
    threads: Mutex<Vec<Running>>,
    /// What joined threads returned.
    joined: Mutex<Vec<TaskRun>>,
    /// With group membership: the tasks the group assigns this instance
    /// now, which [`TaskSet::reconcile`] keeps running.
    owned: Mutex<Vec<TaskId>>,
    /// Tasks that stopped on a real failure: never started again by
    /// [`TaskSet::reconcile`] (the failure policy decides what follows).
    failed: Arc<Mutex<Vec<TaskId>>>,
    /// The instance's board: owned tasks and their states.
    figures: Arc<Figures>,
    /// The clients the tasks share: a consumer per stage, the log-end readers.
    clients: Arc<SharedClients>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Each critical section pushes or removes whole entries: a panic inside
    // one cannot leave a torn entry behind.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl TaskSet {
    pub(crate) fn new(
        app: Arc<App>,
        assembly: Arc<Assembly>,
        config: RuntimeConfig,
        instance_stop: Arc<AtomicBool>,
        ended: Arc<Mutex<Vec<TaskEnd>>>,
        figures: Arc<Figures>,
    ) -> TaskSet {
        TaskSet {
            app,
            assembly,
            instance_stop,
            ended,
            threads: Mutex::new(Vec::new()),
            joined: Mutex::new(Vec::new()),
            owned: Mutex::new(Vec::new()),
            failed: Arc::new(Mutex::new(Vec::new())),
            figures,
            clients: SharedClients::new(&config.live),
            config,
        }
    }

    /// The instance's board.
    pub(crate) fn figures(&self) -> &Arc<Figures> {
        &self.figures
    }

    /// With group membership: the group assigned `ids` to this instance;
    /// each starts now, or, if an earlier run of it is still stopping, as
    /// soon as that run returns ([`TaskSet::reconcile`]).
    pub(crate) fn assign(&self, ids: &[TaskId]) {
        self.figures.own(ids);
        {
            let mut owned = lock(&self.owned);
            for id in ids {
                if !owned.contains(id) {
                    owned.push(id.clone());
                }
            }
        }
        for id in ids {
            if let Err(error) = self.start(id.clone()) {
                tracing::error!(app = self.app.id(), task = %id, error = %error, "a task assigned to this instance could not start");
            }
        }
    }

    /// With group membership: starts every task the group assigns this
    /// instance whose thread returned without a real failure (released by
    /// an earlier rebalance and assigned again, or stopped while the
    /// cluster was away). Called on every turn of the membership thread.
    pub(crate) fn reconcile(&self) {
        let owned = lock(&self.owned).clone();
        let failed = lock(&self.failed).clone();
        for id in owned {
            if failed.contains(&id) {
                continue;
            }
            let busy = lock(&self.threads)
                .iter()
                .any(|running| running.id == id && !running.handle.is_finished());
            if busy {
                continue;
            }
            tracing::info!(app = self.app.id(), task = %id, "starting a task the group assigns this instance, whose earlier run has returned");
            if let Err(error) = self.start(id.clone()) {
                tracing::error!(app = self.app.id(), task = %id, error = %error, "a task assigned to this instance could not start");
            }
        }
    }

    /// With group membership: the group's assignment was lost (this
    /// instance's session expired, the cluster away): every task is told to
    /// stop at once, without its final commit, and nothing is waited for.
    /// The tasks the group assigns again start once their runs return.
    pub(crate) fn lose_all(&self) {
        lock(&self.owned).clear();
        self.figures.disown_all();
        let threads = lock(&self.threads);
        for running in threads.iter() {
            running.tell_to_stop(true);
        }
    }

    /// Starts `id` on a thread of its own, unless it runs already or the
    /// instance is stopping. A thread of an earlier run of `id` that
    /// returned is joined first.
    pub(crate) fn start(&self, id: TaskId) -> Result<(), RuntimeError> {
        if self.instance_stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        let mut threads = lock(&self.threads);
        // An earlier run still stopping (released, its final commit under
        // way) must return first: reconcile starts the task after it.
        if threads
            .iter()
            .any(|running| running.id == id && !running.handle.is_finished())
        {
            return Ok(());
        }
        let (finished, others): (Vec<Running>, Vec<Running>) = std::mem::take(&mut *threads)
            .into_iter()
            .partition(|running| running.id == id);
        *threads = others;
        for earlier in finished {
            lock(&self.joined).push(join(earlier));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let lost = Arc::new(AtomicBool::new(false));
        let wake = Arc::new(Wake::default());
        let flags = StopFlags {
            instance: Arc::clone(&self.instance_stop),
            task: Arc::clone(&stop),
            lost: Arc::clone(&lost),
            wake: Arc::clone(&wake),
        };
        let (app, assembly, config, ended, failed, figures, clients) = (
            Arc::clone(&self.app),
            Arc::clone(&self.assembly),
            self.config.clone(),
            Arc::clone(&self.ended),
            Arc::clone(&self.failed),
            Arc::clone(&self.figures),
            Arc::clone(&self.clients),
        );
        let task = id.clone();
        let handle = std::thread::Builder::new()
            .name(format!("parsley {id}"))
            .spawn(move || {
                let run =
                    task_loop::run_task(&app, &assembly, task, config, &flags, &figures, &clients);
                let how = match &run.outcome {
                    Ok(()) => TaskEndKind::Stopped,
                    Err(error) if error.is_fenced() => TaskEndKind::Fenced,
                    Err(error) if error.is_released() => TaskEndKind::Released(error.to_string()),
                    Err(error) => {
                        lock(&failed).push(run.task.clone());
                        TaskEndKind::Failed(error.to_string())
                    }
                };
                let state = match &how {
                    TaskEndKind::Stopped | TaskEndKind::Released(_) => TaskState::Stopped,
                    TaskEndKind::Fenced => TaskState::Fenced,
                    TaskEndKind::Failed(_) => TaskState::Failed,
                };
                let failure = match &how {
                    TaskEndKind::Failed(reason) => Some(reason.clone()),
                    _ => None,
                };
                figures.task_state(&run.task, state, failure);
                lock(&ended).push(TaskEnd {
                    task: run.task.clone(),
                    how,
                });
                run
            })
            .map_err(|error| RuntimeError::Panicked {
                task: id.clone(),
                reason: format!("the task's thread could not start: {error}"),
            })?;
        threads.push(Running {
            id,
            stop,
            lost,
            wake,
            handle,
        });
        Ok(())
    }

    /// Stops `ids` gracefully (each commits what is pending) and waits up
    /// to `patience` for them to return, so the next owner starts from
    /// their last commit. One still running then is left to finish: the
    /// next owner's producer fences it (X4).
    pub(crate) fn release(&self, ids: &[TaskId], patience: Duration) {
        lock(&self.owned).retain(|owned| !ids.contains(owned));
        self.figures.disown(ids);
        let released: Vec<Running> = {
            let mut threads = lock(&self.threads);
            let (released, kept) = std::mem::take(&mut *threads)
                .into_iter()
                .partition(|running| ids.contains(&running.id));
            *threads = kept;
            released
        };
        for running in &released {
            running.tell_to_stop(false);
        }
        let until = Instant::now() + patience;
        while Instant::now() < until && !released.iter().all(|r| r.handle.is_finished()) {
            std::thread::sleep(Duration::from_millis(20));
        }
        for running in released {
            if running.handle.is_finished() {
                lock(&self.joined).push(join(running));
            } else {
                tracing::warn!(app = self.app.id(), task = %running.id, "released task did not stop within {patience:?}; its next owner fences it");
                lock(&self.threads).push(running);
            }
        }
    }

    /// The tasks whose threads run now.
    pub(crate) fn running(&self) -> Vec<TaskId> {
        lock(&self.threads)
            .iter()
            .filter(|running| running.is_live())
            .map(|running| running.id.clone())
            .collect()
    }

    /// True when no task thread runs.
    pub(crate) fn all_returned(&self) -> bool {
        lock(&self.threads)
            .iter()
            .all(|running| running.handle.is_finished())
    }

    /// Joins every thread (blocking) and returns every run, in the order
    /// they were joined.
    pub(crate) fn join_all(&self) -> Vec<TaskRun> {
        let threads = std::mem::take(&mut *lock(&self.threads));
        let mut runs = std::mem::take(&mut *lock(&self.joined));
        runs.extend(threads.into_iter().map(join));
        runs
    }
}

fn join(running: Running) -> TaskRun {
    let id = running.id;
    match running.handle.join() {
        Ok(run) => run,
        Err(panic) => TaskRun {
            task: id.clone(),
            metrics: Default::default(),
            outcome: Err(RuntimeError::Panicked {
                task: id,
                reason: panic_message(panic.as_ref()),
            }),
            restarts: 0,
        },
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|text| (*text).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}
