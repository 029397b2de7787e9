//! The tasks an instance runs right now, each on a thread of its own with a
//! stop flag of its own: started and released one at a time as group
//! membership moves them, or all at once for a static share.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parsley::app::App;
use parsley::assembly::Assembly;
use parsley::task::TaskId;

use super::task_loop::{self, TaskRun};
use super::{RuntimeConfig, RuntimeError, TaskEnd, TaskEndKind};

/// What a task thread looks at to know it should stop: the instance's flag
/// (a graceful stop of everything) or its own (released on a rebalance).
pub(crate) struct StopFlags {
    instance: Arc<AtomicBool>,
    task: Arc<AtomicBool>,
}

impl StopFlags {
    pub(crate) fn is_set(&self) -> bool {
        self.instance.load(Ordering::Relaxed) || self.task.load(Ordering::Relaxed)
    }
}

struct Running {
    id: TaskId,
    stop: Arc<AtomicBool>,
    handle: JoinHandle<TaskRun>,
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
    ) -> TaskSet {
        TaskSet {
            app,
            assembly,
            config,
            instance_stop,
            ended,
            threads: Mutex::new(Vec::new()),
            joined: Mutex::new(Vec::new()),
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
        if let Some(index) = threads.iter().position(|running| running.id == id) {
            if !threads[index].handle.is_finished() {
                return Ok(());
            }
            let earlier = threads.remove(index);
            lock(&self.joined).push(join(earlier));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let flags = StopFlags {
            instance: Arc::clone(&self.instance_stop),
            task: Arc::clone(&stop),
        };
        let (app, assembly, config, ended) = (
            Arc::clone(&self.app),
            Arc::clone(&self.assembly),
            self.config.clone(),
            Arc::clone(&self.ended),
        );
        let task = id.clone();
        let handle = std::thread::Builder::new()
            .name(format!("parsley {id}"))
            .spawn(move || {
                let run = task_loop::run_task(&app, &assembly, task, config, &flags);
                let how = match &run.outcome {
                    Ok(()) => TaskEndKind::Stopped,
                    Err(error) if error.is_fenced() => TaskEndKind::Fenced,
                    Err(error) => TaskEndKind::Failed(error.to_string()),
                };
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
        threads.push(Running { id, stop, handle });
        Ok(())
    }

    /// Stops `ids` gracefully (each commits what is pending) and waits up
    /// to `patience` for them to return, so the next owner starts from
    /// their last commit. One still running then is left to finish: the
    /// next owner's producer fences it (X4).
    pub(crate) fn release(&self, ids: &[TaskId], patience: Duration) {
        let released: Vec<Running> = {
            let mut threads = lock(&self.threads);
            let (released, kept) = std::mem::take(&mut *threads)
                .into_iter()
                .partition(|running| ids.contains(&running.id));
            *threads = kept;
            released
        };
        for running in &released {
            running.stop.store(true, Ordering::Relaxed);
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
            .filter(|running| !running.handle.is_finished())
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
