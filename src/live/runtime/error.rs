//! What stops a live task or an instance.

use crate::assembly::AssemblyError;
use crate::task::{TaskError, TaskId};
use crate::tp::Tp;

use super::super::error::LiveError;

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
    #[error("task {task}: consuming {} failed: {reason}", tp.as_ref().map_or("its tps".to_string(), Tp::to_string))]
    Consume {
        /// The task whose consumer failed.
        task: TaskId,
        /// The tp involved, or `None` when the failure concerns all of the
        /// task's tps.
        tp: Option<Tp>,
        /// librdkafka's error.
        reason: String,
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

    /// True when the cluster could not be reached at all.
    pub fn is_unreachable(&self) -> bool {
        matches!(self, RuntimeError::Live(LiveError::Unreachable { .. }))
    }
}
