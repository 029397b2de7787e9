//! The live runtime: an application's tasks over a real Kafka cluster.
//!
//! An instance checks the application against the cluster's metadata (C3),
//! takes its share of the tasks and runs each on a thread of its own
//! (`task_loop`): one transactional producer per task, whose
//! `transactional.id` is the task's (`<app>-<stage>-<partition>`), so a newer
//! owner fences the old one (X4); the task's tps on its stage's
//! `read_committed` consumer, which the stage's tasks on the instance share
//! (`shared_clients`), each reading its own partition queues, assigned by
//! hand at the committed positions and reassigned at them after every
//! abort; the slots restored from the changelog before delivery
//! starts; ticks from the real clock and commits on the configured interval.
//!
//! # Sharing tasks between instances
//!
//! Two ways, chosen by [`Assignment`]:
//!
//! - **Group membership** ([`Assignment::Group`], what `parsley-live run`
//!   does unless given `--instance`): the instances join one Kafka consumer
//!   group and tasks move between them on every rebalance; a dead
//!   instance's tasks move within its session timeout, a new instance takes
//!   its share. See [`membership`](GroupMembership).
//! - **Static shares** ([`Assignment::Share`], the library's default with
//!   [`InstanceShare::ALL`]): the application's tasks, in stage order and
//!   then by partition, are dealt round-robin to `count` instances, and
//!   instance `index` runs those at positions `index`, `index + count`, ….
//!   Moving tasks means restarting instances with a new `count`.
//!
//! Either way each task's new owner initialises the task's producer, which
//! fences the old owner and aborts its open transaction, then resumes from
//! the committed positions, so no task ever runs twice un-fenced.

mod clock;
mod error;
mod exported;
pub(crate) mod figures;
mod local_state;
mod membership;
mod retry;
mod setup;
mod shared_clients;
mod task_loop;
mod tasks;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use parsley::App;
use parsley::Assembly;
use parsley::{TaskConfig, TaskId};

use super::client::{LiveClient, LiveConfig};
use super::error::LiveError;
use figures::Figures;
use tasks::TaskSet;

pub use clock::wall_clock_ms;
pub use error::{MembershipFailure, ReleaseCause, RuntimeError};
pub use figures::{Health, HealthError};
pub use membership::{group_identity, membership_topic, GroupMembership};
pub use setup::{assemble_on, create_topics, TopicSetup};
pub use task_loop::TaskRun;

/// Which share of the application's tasks an instance runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InstanceShare {
    /// This instance's position among the instances, below `count`.
    pub index: u32,
    /// How many instances share the tasks.
    pub count: u32,
}

impl InstanceShare {
    /// The only instance: every task.
    pub const ALL: InstanceShare = InstanceShare { index: 0, count: 1 };

    /// Instance `index` of `count`; [`RuntimeError::InvalidInstance`] unless
    /// `index < count`.
    pub fn new(index: u32, count: u32) -> Result<InstanceShare, RuntimeError> {
        if count == 0 || index >= count {
            return Err(RuntimeError::InvalidInstance { index, count });
        }
        Ok(InstanceShare { index, count })
    }

    /// This instance's tasks among all of `assembly`'s, dealt round-robin.
    pub fn tasks(&self, assembly: &Assembly) -> Vec<TaskId> {
        assembly
            .task_ids()
            .into_iter()
            .enumerate()
            .filter(|(position, _)| {
                *position as u64 % u64::from(self.count) == u64::from(self.index)
            })
            .map(|(_, task)| task)
            .collect()
    }
}

/// What an instance does when one of its tasks stops on an error (bad
/// input, a logic error (X5), a Kafka failure) while it runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FailurePolicy {
    /// Stop every other task gracefully, so the process ends with the
    /// error (and a non-zero exit) for a supervisor to see: Kafka Streams'
    /// `SHUTDOWN_CLIENT`.
    #[default]
    StopInstance,
    /// Keep the other tasks running; the failed one stays stopped, with its
    /// committed position before the record that stopped it, until the
    /// instance restarts: Kafka Streams' `REPLACE_THREAD` without the
    /// replacement.
    KeepOthersRunning,
}

/// How an instance comes by its tasks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Assignment {
    /// A fixed share of the tasks, for as long as the instance runs.
    Share(InstanceShare),
    /// Whatever Kafka's group membership assigns, moving on rebalances.
    Group(GroupMembership),
}

/// How an instance runs its tasks.
#[derive(Clone, Debug)]
pub struct RuntimeConfig {
    /// How to reach the cluster, and the bound on every blocking call.
    pub live: LiveConfig,
    /// The commit interval (X2).
    pub task: TaskConfig,
    /// Which of the application's tasks this instance runs.
    pub assignment: Assignment,
    /// The most records a task takes from its consumer per turn.
    pub max_batch: usize,
    /// The longest a task sleeps waiting for records (they wake it as they
    /// come, as does a stop) before it looks again: at a fence check, at
    /// its stall check. It never sleeps past its next tick, its open
    /// transaction's commit or the end of a wait for a source (G9).
    pub idle_poll: Duration,
    /// How long a task with held records may see no delivery before it reads
    /// fresh log ends, to tell a claim that can never resolve (G6).
    pub stall_check: Duration,
    /// How long a task may go without a transaction before it commits an
    /// empty one (its positions and checkpoint again) to learn whether a
    /// newer owner fenced it (X4): a zombie that is idle has no other call
    /// that would tell it, and would otherwise run on, fenced, for good.
    pub fence_check: Duration,
    /// What a task's failure does to the others.
    pub on_failure: FailurePolicy,
    /// How many times in a row a task restarts after a transient failure
    /// ([`RuntimeError::is_transient`]) without committing in between before
    /// it gives up ([`RuntimeError::GaveUp`]).
    pub max_restarts: u32,
    /// The root of the tasks' local state stores: each
    /// task of a stateful stage keeps its store and checkpoint in
    /// `<state_dir>/<app>/<stage>-<partition>`. Instances on one machine
    /// may share it; a task runs in one of them at a time.
    pub state_dir: PathBuf,
    /// How many changelog records a task's local store applies between
    /// two checkpoints (each an fsync of the store, then the checkpoint
    /// file written whole): fewer make a restart restore less of the
    /// changelog and cost more syncs. A graceful stop checkpoints whatever
    /// the count.
    pub checkpoint_every: usize,
    /// Where this instance answers interactive queries (`host:port` of its
    /// endpoints, [`serve_endpoints`](crate::serve_endpoints)), advertised
    /// in its task reports to the group so that other instances and the
    /// `query` command find the owner of a key; `None`: it serves none.
    pub query_endpoint: Option<String>,
}

impl RuntimeConfig {
    /// The defaults on `live`: every task (a static share of one), the
    /// core's default commit interval, batches of up to 50,000 records, sleeps
    /// of at most 100 ms between records, a stall check after 1 s,
    /// a fence check after 30 s without a transaction, and up to 20
    /// restarts in a row. With pauses of 250 ms doubling to 8 s
    /// between restarts, and each start bounded by the calls' deadlines,
    /// that rides out a broker away for several minutes.
    pub fn new(live: LiveConfig) -> RuntimeConfig {
        RuntimeConfig {
            live,
            task: TaskConfig::default(),
            assignment: Assignment::Share(InstanceShare::ALL),
            max_batch: 50_000,
            idle_poll: Duration::from_millis(100),
            stall_check: Duration::from_secs(1),
            fence_check: Duration::from_secs(30),
            on_failure: FailurePolicy::default(),
            max_restarts: 20,
            state_dir: crate::state::default_state_dir(),
            checkpoint_every: crate::state::CHECKPOINT_EVERY,
            query_endpoint: None,
        }
    }

    /// The same advertising `endpoint` (`host:port`) as where this
    /// instance answers interactive queries.
    pub fn with_query_endpoint(mut self, endpoint: impl Into<String>) -> RuntimeConfig {
        self.query_endpoint = Some(endpoint.into());
        self
    }

    /// The same with another [`FailurePolicy`].
    pub fn with_failure_policy(mut self, policy: FailurePolicy) -> RuntimeConfig {
        self.on_failure = policy;
        self
    }

    /// The same with another commit interval (X2).
    pub fn with_commit_interval(mut self, interval: Duration) -> RuntimeConfig {
        self.task.commit_interval = interval;
        self
    }

    /// The same with another [`fence_check`](RuntimeConfig::fence_check)
    /// interval (X4).
    pub fn with_fence_check(mut self, interval: Duration) -> RuntimeConfig {
        self.fence_check = interval;
        self
    }

    /// The same with a static share of the tasks.
    pub fn with_share(mut self, share: InstanceShare) -> RuntimeConfig {
        self.assignment = Assignment::Share(share);
        self
    }

    /// The same with another root for the tasks' local state stores.
    pub fn with_state_dir(mut self, dir: impl Into<PathBuf>) -> RuntimeConfig {
        self.state_dir = dir.into();
        self
    }

    /// The same checkpointing each local store every `records` changelog
    /// records applied (at least 1).
    pub fn with_checkpoint_every(mut self, records: usize) -> RuntimeConfig {
        self.checkpoint_every = records.max(1);
        self
    }

    /// The same with tasks assigned by group membership.
    pub fn with_group(mut self, membership: GroupMembership) -> RuntimeConfig {
        self.assignment = Assignment::Group(membership);
        self
    }
}

/// Stops a running instance gracefully: each task commits what is pending
/// and returns.
#[derive(Clone, Debug)]
pub struct Stopper(Arc<AtomicBool>, Arc<Figures>);

impl Stopper {
    /// Asks every task of the instance to stop; returns at once, without
    /// waiting for them (see [`Runtime::wait`]). The instance is
    /// `PENDING_SHUTDOWN` from here.
    pub fn stop(&self) {
        self.1.shutting_down();
        self.0.store(true, Ordering::Relaxed);
    }
}

/// A task that returned, as its thread reports it the moment it does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskEnd {
    /// The task.
    pub task: TaskId,
    /// How it ended.
    pub how: TaskEndKind,
}

/// How a task ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TaskEndKind {
    /// A graceful stop.
    Stopped,
    /// A newer owner's producer fenced it (X4): the task moved.
    Fenced,
    /// The group took it away before it finished its final commit
    /// ([`RuntimeError::Released`]): the task moved, and its next owner
    /// resumes from the last commit. Not a failure.
    Released(String),
    /// An error stopped it; the message names the record, tp or call.
    Failed(String),
}

/// A running instance of an application.
pub struct Runtime {
    assembly: Assembly,
    stop: Arc<AtomicBool>,
    tasks: Arc<TaskSet>,
    /// The thread that keeps the instance in its group, with group
    /// membership.
    membership: Option<std::thread::JoinHandle<Option<LiveError>>>,
    /// Why the group membership stopped the instance, once it did and
    /// [`Runtime::wait`] saw it: a missing ACL on the instances' group or
    /// topic.
    membership_failure: Arc<Mutex<Option<LiveError>>>,
    policy: FailurePolicy,
    /// Tasks that returned, in the order they did; taken by
    /// [`Runtime::take_ended`].
    ended: Arc<Mutex<Vec<TaskEnd>>>,
    /// The instance's board, for its figures and health.
    figures: Arc<Figures>,
    /// Answers interactive queries of the instance's tasks.
    queries: crate::query::Queries,
}

impl Runtime {
    /// Checks `app` against the cluster (C3) and starts this instance's
    /// tasks: its share at once, or, with group membership, joins the
    /// instances' group (making its topic if need be) and starts what the
    /// group assigns. A missing or mis-sized topic stops start-up here,
    /// before any task runs. What Kafka says to retry (a coordinator
    /// loading or moving, a leader not elected yet) is retried for up to
    /// [`LiveConfig::connect_timeout`], each answer logged once.
    pub async fn start(app: Arc<App>, config: RuntimeConfig) -> Result<Runtime, RuntimeError> {
        let client = Arc::new(LiveClient::new(config.live.clone())?);
        // Every call to Kafka before the tasks run retries what Kafka says
        // to retry, within the connect bound (a broker just started loads
        // its coordinators for a while).
        let bound = config.live.connect_timeout;
        let assembly = retry::at_start(app.id(), "reading the topics' metadata", bound, || {
            assemble_on(&client, &app)
        })
        .await?;
        let stop = Arc::new(AtomicBool::new(false));
        let ended = Arc::new(Mutex::new(Vec::new()));
        let figures = Figures::new(app.id(), config.live.timeout);
        if let Some(endpoint) = &config.query_endpoint {
            figures.advertise(endpoint.clone());
        }
        let shared_assembly = Arc::new(assembly.clone());
        let queries = crate::query::Queries::new(
            Arc::clone(&app),
            Arc::clone(&shared_assembly),
            Arc::clone(&figures),
            Arc::clone(&client),
        );
        let tasks = Arc::new(TaskSet::new(
            Arc::clone(&app),
            Arc::clone(&shared_assembly),
            config.clone(),
            Arc::clone(&stop),
            Arc::clone(&ended),
            Arc::clone(&figures),
        ));
        tokio::spawn(figures::refresh(
            Arc::clone(&figures),
            Arc::clone(&client),
            Arc::clone(&app),
            shared_assembly,
            Arc::clone(&stop),
        ));
        let membership = match config.assignment {
            Assignment::Share(share) => {
                figures.own(&share.tasks(&assembly));
                for id in share.tasks(&assembly) {
                    tasks.start(id)?;
                }
                None
            }
            Assignment::Group(membership) => {
                let topic = membership_topic(app.id());
                if app.declaration(&topic).is_some() {
                    return Err(RuntimeError::Membership {
                        group: topic,
                        source: MembershipFailure::TopicTaken,
                    });
                }
                let all = assembly.task_ids();
                let identity = group_identity(&app, &assembly);
                let theirs =
                    retry::at_start(app.id(), "describing the instances' group", bound, || {
                        let (live, group, ours) =
                            (config.live.clone(), topic.clone(), identity.clone());
                        async {
                            tokio::task::spawn_blocking(move || {
                                membership::foreign_members(&live, &group, &ours)
                            })
                            .await
                            .map_err(|error| {
                                RuntimeError::Membership {
                                    group: topic.clone(),
                                    source: MembershipFailure::Join(error),
                                }
                            })?
                        }
                    })
                    .await?;
                if !theirs.is_empty() {
                    return Err(RuntimeError::GroupConflict {
                        group: topic,
                        ours: identity,
                        theirs,
                    });
                }
                retry::at_start(app.id(), "making the membership topic", bound, || {
                    membership::ensure_topic(&client, &topic, all.len())
                })
                .await?;
                Some(membership::spawn(
                    &config.live,
                    membership,
                    app.id(),
                    &identity,
                    all,
                    Arc::clone(&tasks),
                    Arc::clone(&stop),
                )?)
            }
        };
        Ok(Runtime {
            assembly,
            stop,
            tasks,
            membership,
            policy: config.on_failure,
            ended,
            figures,
            membership_failure: Arc::default(),
            queries,
        })
    }

    /// Interactive queries of this instance's tasks, usable from another
    /// thread or task (the endpoints' `/query`).
    pub fn queries(&self) -> crate::query::Queries {
        self.queries.clone()
    }

    /// The committed state of `key` (in its text form,
    /// [`key_bytes`](crate::query::key_bytes)) in stage `stage`, answered
    /// by this instance when it owns the key's task
    /// ([`Queries::query`](crate::query::Queries::query)).
    pub async fn query(
        &self,
        stage: &str,
        key: &str,
    ) -> Result<crate::query::QueryAnswer, crate::query::QueryError> {
        self.queries.query(stage, key).await
    }

    /// The instance's state and the answers of its `/health` and `/ready`
    /// endpoints, usable from another thread.
    pub fn health(&self) -> Health {
        Health(Arc::clone(&self.figures))
    }

    /// The application as assembled against the cluster's metadata (C3).
    pub fn assembly(&self) -> &Assembly {
        &self.assembly
    }

    /// The tasks this instance runs now.
    pub fn tasks(&self) -> Vec<TaskId> {
        self.tasks.running()
    }

    /// Where [`Runtime::wait`] leaves why the group membership stopped the
    /// instance (a missing ACL on the instances' group or topic, named);
    /// take it before waiting, read it after.
    pub fn membership_failure(&self) -> Arc<Mutex<Option<LiveError>>> {
        Arc::clone(&self.membership_failure)
    }

    /// A handle that stops this instance, usable from another thread.
    pub fn stopper(&self) -> Stopper {
        Stopper(Arc::clone(&self.stop), Arc::clone(&self.figures))
    }

    /// True once every task has returned (stopped, failed, fenced or
    /// released) and, with group membership, the instance has left its
    /// group (which it does only when stopped).
    pub fn finished(&self) -> bool {
        self.membership
            .as_ref()
            .is_none_or(std::thread::JoinHandle::is_finished)
            && self.tasks.all_returned()
    }

    /// Waits for every task to return, and with group membership for the
    /// instance to leave its group; call [`Stopper::stop`] first for a
    /// graceful stop. Every run of every task is returned, released ones
    /// included.
    pub async fn wait(self) -> Vec<TaskRun> {
        let (membership, tasks) = (self.membership, self.tasks);
        let failure = self.membership_failure;
        let joined = tokio::task::spawn_blocking(move || {
            if let Some(membership) = membership {
                match membership.join() {
                    Err(_) => tracing::error!("the group membership thread panicked"),
                    Ok(Some(error)) => {
                        *failure
                            .lock()
                            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(error)
                    }
                    Ok(None) => {}
                }
            }
            tasks.join_all()
        })
        .await;
        joined.unwrap_or_else(|error| {
            tracing::error!(error = %error, "waiting for the tasks failed");
            Vec::new()
        })
    }

    /// The tasks that returned since the last call, in the order they did.
    pub fn take_ended(&self) -> Vec<TaskEnd> {
        std::mem::take(
            &mut *self
                .ended
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        )
    }

    /// Runs until SIGINT or SIGTERM, until every task has returned, or (with
    /// [`FailurePolicy::StopInstance`], the default) until a task fails;
    /// then stops gracefully: each task commits what is pending. A task that
    /// stops is logged (`tracing`) the moment it does, with its error.
    pub async fn run_until_signal(self) -> Vec<TaskRun> {
        let stopper = self.stopper();
        let mut terminate = shutdown_signal();
        loop {
            tokio::select! {
                _ = &mut terminate => break,
                _ = tokio::time::sleep(Duration::from_millis(100)) => {
                    let failed = self.task_failed_since_last_look();
                    if failed && self.policy == FailurePolicy::StopInstance {
                        tracing::error!("a task failed: stopping the instance's other tasks (failure policy: stop the instance)");
                        break;
                    }
                    if self.finished() {
                        break;
                    }
                }
            }
        }
        stopper.stop();
        self.wait().await
    }

    /// Whether a task failed since the last look (each task logs its own
    /// end as it happens).
    fn task_failed_since_last_look(&self) -> bool {
        self.take_ended()
            .iter()
            .any(|end| matches!(end.how, TaskEndKind::Failed(_)))
    }
}

/// The operator's path past a record that stopped a task (X5, the skip):
/// checks `app` against the cluster, starts `task` from its committed
/// checkpoint, dead-letters the record at `tp`@`offset` (headers say it was
/// skipped), and returns once that is committed, with the task's metrics.
/// Run it while no instance runs the task: its producer fences one that
/// does. The stage must declare a dead-letter topic
/// ([`SkipError::NoDeadLetterTopic`](parsley::SkipError) otherwise);
/// an offset the task delivered already, one that is no record, or one not
/// reached within the calls' deadline times four is refused, and nothing is
/// skipped.
pub async fn skip_record(
    app: Arc<App>,
    config: RuntimeConfig,
    task: TaskId,
    tp: parsley::Tp,
    offset: u64,
) -> Result<parsley::TaskMetrics, RuntimeError> {
    let client = LiveClient::new(config.live.clone())?;
    let assembly = assemble_on(&client, &app).await?;
    let patience = config.live.deadline() * 4;
    let id = task.clone();
    tokio::task::spawn_blocking(move || {
        task_loop::skip_record(&app, &assembly, &id, config, &tp, offset, patience)
    })
    .await
    .map_err(|error| RuntimeError::Panicked {
        task,
        reason: error.to_string(),
    })?
}

/// Resolves on SIGINT or, on Unix, SIGTERM.
fn shutdown_signal() -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
    Box::pin(async {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            match signal(SignalKind::terminate()) {
                Ok(mut terminate) => {
                    tokio::select! {
                        _ = tokio::signal::ctrl_c() => {}
                        _ = terminate.recv() => {}
                    }
                }
                Err(_) => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    })
}
