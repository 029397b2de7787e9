//! What stops a live task or an instance.

use parsley::AssemblyError;
use parsley::Tp;
use parsley::{SkipError, TaskError, TaskId};

use rdkafka::error::KafkaError;

use super::super::error::LiveError;

/// Why the instances' group could not be joined
/// ([`RuntimeError::Membership`]).
#[derive(Debug, thiserror::Error)]
pub enum MembershipFailure {
    /// The application declares the membership topic itself.
    #[error(
        "the application declares a topic of that name, which group membership needs for itself"
    )]
    TopicTaken,
    /// The group's members could not be described.
    #[error("its members could not be read: {0}")]
    Members(#[source] KafkaError),
    /// The membership consumer could not subscribe.
    #[error(transparent)]
    Subscribe(KafkaError),
    /// The look-up of the group's members did not finish.
    #[error(transparent)]
    Join(tokio::task::JoinError),
    /// The membership thread could not be started.
    #[error("the membership thread could not start: {0}")]
    Thread(#[source] std::io::Error),
}

/// Why a task released by the group did not finish its final commit
/// ([`RuntimeError::Released`]).
#[derive(Debug, thiserror::Error)]
pub enum ReleaseCause {
    /// The instance's session expired and the group took its assignment.
    #[error("the group assignment was lost (the instance's session expired), so the task stopped without its final commit")]
    Lost,
    /// The assignment was lost while a transactional call failed.
    #[error("the group assignment was lost while a transactional call failed: {0}")]
    LostInCall(#[source] Box<LiveError>),
    /// The task failed while the group was taking it away.
    #[error(transparent)]
    Failed(Box<RuntimeError>),
}

/// Why the live runtime could not start, or why one of its tasks stopped.
/// Each names the task, tp, offset or topic involved.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// Kafka refused: a client could not be created, a fetch or a
    /// transactional call failed, or the task's producer was fenced (see
    /// [`RuntimeError::is_fenced`]).
    #[error(transparent)]
    Live(#[from] LiveError),

    /// The core stopped the task: bad input on the wire, a logic error (X5),
    /// an oversized checkpoint. Its transaction was aborted, so its committed
    /// position stays before the record named.
    #[error(transparent)]
    Task(#[from] TaskError),

    /// C3 against the cluster's metadata: start-up stops before any task runs.
    #[error("{0}")]
    Assembly(#[from] AssemblyError),

    /// The task's consumer could not be assigned its tps, or failed fatally
    /// while polling.
    #[error("task {task}: consuming {} failed: {source}", tp.as_ref().map_or("its tps".to_string(), Tp::to_string))]
    Consume {
        /// The task whose consumer failed.
        task: TaskId,
        /// The tp involved, or `None` when the failure concerns all of the
        /// task's tps.
        tp: Option<Tp>,
        /// librdkafka's error.
        #[source]
        source: Box<KafkaError>,
    },

    /// An [`InstanceShare`](super::InstanceShare) whose index is not below
    /// its count, or whose count is 0.
    #[error(
        "instance {index} of {count}: the index must be below the count, and the count above 0"
    )]
    InvalidInstance {
        /// The instance's index.
        index: u32,
        /// The number of instances.
        count: u32,
    },

    /// The broker aborted the task's transaction because it was open longer
    /// than the producer's `transaction.timeout.ms`, and bumped the
    /// producer's epoch, so the producer reports itself fenced although no
    /// other owner exists. The task restarts from its committed checkpoint.
    #[error("task {task}: the broker aborted its transaction, open for {}s, past the transaction timeout of {}s: {source}", open_for.as_secs_f64(), timeout.as_secs_f64())]
    TransactionTimedOut {
        /// The task.
        task: TaskId,
        /// How long the transaction had been open.
        open_for: std::time::Duration,
        /// The producer's `transaction.timeout.ms`.
        timeout: std::time::Duration,
        /// The fencing error the producer reported.
        source: Box<LiveError>,
    },

    /// The task's local state store in `dir` failed:
    /// its directory or files could not be made, written or synced.
    #[error("task {task}: local state in {}: {source}", dir.display())]
    State {
        /// The task.
        task: TaskId,
        /// The task's state directory.
        dir: std::path::PathBuf,
        /// What failed.
        source: crate::state::StateError,
    },

    /// The task restarted `restarts` times in a row without committing once
    /// in between, and stopped trying.
    #[error("task {task}: gave up after {restarts} restarts in a row without a commit; the last failure: {}", without_task(task, &last.to_string()))]
    GaveUp {
        /// The task.
        task: TaskId,
        /// How many restarts were tried.
        restarts: u32,
        /// What stopped the last run.
        last: Box<RuntimeError>,
    },

    /// The membership topic exists with a partition count other than the
    /// application's number of tasks: the application's tasks changed.
    #[error("topic `{topic}` has {found} partition(s) but the application has {tasks} task(s): its stages or partition counts changed since the topic was made; delete it (it holds no records) and start again")]
    MembershipTopic {
        /// The membership topic, `<app>.instances`.
        topic: String,
        /// Its partition count.
        found: u32,
        /// The application's tasks.
        tasks: u32,
    },

    /// The instances' group could not be joined.
    #[error("joining group `{group}` failed: {source}")]
    Membership {
        /// The group, `<app>.instances`.
        group: String,
        /// What failed.
        #[source]
        source: MembershipFailure,
    },

    /// The group took the task away from this instance (a rebalance, or
    /// the instance's session expiring while the cluster was away) and the
    /// task stopped without finishing its final commit. Not a failure: the
    /// next owner's producer fences this one and settles its open
    /// transaction, and resumes from the last commit.
    #[error("task {task}: released by the group without its final commit ({cause}); its next owner resumes from the last commit")]
    Released {
        /// The task.
        task: TaskId,
        /// Why the final commit did not finish.
        #[source]
        cause: ReleaseCause,
    },

    /// Another application, or another topology of this application, is a
    /// live member of the instances' group `<app>.instances`: two
    /// assemblies must never share one group, or each would run a part of
    /// the tasks and the rest would never run. Nothing was started.
    #[error("group `{group}` is in use by another application or topology under the same id: this instance is `{ours}`, the group holds {}; stop those instances, or give this application another id", theirs.iter().map(|member| format!("`{member}`")).collect::<Vec<_>>().join(", "))]
    GroupConflict {
        /// The group, `<app>.instances`.
        group: String,
        /// This instance's identity in the group: the application's id,
        /// the fingerprint of its assembly and its stages.
        ours: String,
        /// The identities of the members that differ from it.
        theirs: Vec<String>,
    },

    /// The operator's skip was refused: nothing was skipped.
    #[error(transparent)]
    Skip(#[from] SkipError),

    /// The task did not reach the record to skip in time: nothing was
    /// skipped.
    #[error("task {task}: {tp}@{offset} was not reached within {}s; nothing was skipped", patience.as_secs_f64())]
    SkipNotReached {
        /// The task.
        task: TaskId,
        /// The record's tp.
        tp: Tp,
        /// Its offset.
        offset: u64,
        /// How long the task ran.
        patience: std::time::Duration,
    },

    /// The operator's skip names an offset at or past the tp's log end:
    /// there is no record there to skip. Refused before anything ran.
    #[error("task {task}: {tp}@{offset} is not in the log: its log end (high watermark) is {log_end}; nothing was skipped")]
    SkipBeyondLogEnd {
        /// The task.
        task: TaskId,
        /// The record's tp.
        tp: Tp,
        /// The offset named.
        offset: u64,
        /// The tp's high watermark.
        log_end: u64,
    },

    /// The operator's skip names a tp the task does not consume: `why`
    /// says what the tp is instead (a topic that is no source of the
    /// stage, a partition the topic does not have, with its partition
    /// count). Refused before anything ran.
    #[error("task {task} does not consume {tp}: {why}; nothing was skipped")]
    SkipNotConsumed {
        /// The task.
        task: TaskId,
        /// The tp named.
        tp: Tp,
        /// What the tp is instead.
        why: String,
    },

    /// The operator named a stage the application does not have.
    #[error("stage {stage:?} is not in application {app:?}: its stages are {}", known.join(", "))]
    UnknownStage {
        /// The application.
        app: String,
        /// The stage named.
        stage: String,
        /// The application's stages.
        known: Vec<String>,
    },

    /// The task's thread panicked, or could not be started.
    #[error("task {task}: its thread panicked: {reason}")]
    Panicked {
        /// The task the thread ran.
        task: TaskId,
        /// The panic's message, or why the thread did not start.
        reason: String,
    },
}

impl RuntimeError {
    /// True when the task stopped because a newer instance's producer fenced
    /// it (X4): the task moved, which is not a failure of this instance.
    pub fn is_fenced(&self) -> bool {
        matches!(self, RuntimeError::Live(error) if error.is_fenced())
    }

    /// True when the task may restart from its committed checkpoint with
    /// a fresh producer and expect to get further: a transient Kafka failure
    /// ([`LiveError::is_transient`]: an abandoned call, a broker away) or a
    /// transaction the broker aborted on its timeout. Never for what the
    /// core stopped on (bad input, X5), nor for a fence by a newer owner.
    pub fn is_transient(&self) -> bool {
        match self {
            RuntimeError::Live(error) => error.is_transient(),
            RuntimeError::TransactionTimedOut { .. } => true,
            _ => false,
        }
    }

    /// True when the group took the task away before it could finish its
    /// final commit ([`RuntimeError::Released`]): the task moved, which is
    /// not a failure of this instance.
    pub fn is_released(&self) -> bool {
        matches!(self, RuntimeError::Released { .. })
    }

    /// True when the cluster could not be reached at all.
    pub fn is_unreachable(&self) -> bool {
        matches!(self, RuntimeError::Live(LiveError::Unreachable { .. }))
    }

    /// True when the error refused what was asked before anything was
    /// done: the application does not fit the cluster (C3), the operator's
    /// input names no stage, task or record that can be acted on, or the
    /// group is another's. The operator commands exit 2 on these.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            RuntimeError::Assembly(_)
                | RuntimeError::Skip(_)
                | RuntimeError::SkipBeyondLogEnd { .. }
                | RuntimeError::SkipNotConsumed { .. }
                | RuntimeError::UnknownStage { .. }
                | RuntimeError::InvalidInstance { .. }
                | RuntimeError::MembershipTopic { .. }
                | RuntimeError::GroupConflict { .. }
        ) || matches!(
            self,
            RuntimeError::Live(
                LiveError::InvalidPartitionCount { .. }
                    | LiveError::Client { .. }
                    | LiveError::OffsetTooLarge { .. }
            )
        )
    }

    /// The error as a line about `task`: prefixed with `task <task>: `
    /// unless it names the task first already, so the summary of a run
    /// never says `task X: task X: …`.
    pub fn about_task(&self, task: &TaskId) -> String {
        let text = self.to_string();
        let named = [format!("task {task}:"), format!("task {task} ")]
            .iter()
            .any(|prefix| text.starts_with(prefix.as_str()));
        if named {
            text
        } else {
            format!("task {task}: {text}")
        }
    }
}

/// `text` without a leading `task <task>: `.
fn without_task<'a>(task: &TaskId, text: &'a str) -> &'a str {
    text.strip_prefix(&format!("task {task}: ")).unwrap_or(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::JoinFailure;

    fn task() -> TaskId {
        TaskId {
            stage: "balances".into(),
            partition: 0,
        }
    }

    /// Issue 21: a run's summary names a task once, whether or not the
    /// error names it itself, and a task that gave up names it once too.
    #[test]
    fn a_task_is_named_once() {
        let named = RuntimeError::Released {
            task: task(),
            cause: ReleaseCause::Lost,
        };
        let line = named.about_task(&task());
        assert!(line.starts_with("task balances/0: released"), "{line}");
        assert_eq!(line.matches("balances/0").count(), 1, "{line}");
        let unnamed = RuntimeError::Live(LiveError::Join {
            what: "fetch of orders-0 from 3".into(),
            source: JoinFailure::Panicked,
        });
        assert_eq!(
            unnamed.about_task(&task()),
            "task balances/0: fetch of orders-0 from 3: the blocking call did not finish: the call's thread panicked"
        );
        let gave_up = RuntimeError::GaveUp {
            task: task(),
            restarts: 20,
            last: Box::new(named),
        };
        let line = gave_up.about_task(&task());
        assert_eq!(line.matches("task balances/0").count(), 1, "{line}");
        assert!(line.contains("the last failure: released"), "{line}");
        let skip = RuntimeError::Skip(parsley::SkipError::NotConsumed {
            task: task(),
            tp: Tp::new("orders", 1),
        });
        assert_eq!(
            skip.about_task(&task()),
            "task balances/0 does not consume orders-1"
        );
    }
}
