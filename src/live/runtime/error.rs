//! What stops a live task or an instance.

use crate::assembly::AssemblyError;
use crate::task::{TaskError, TaskId};
use crate::tp::Tp;

use super::super::error::LiveError;

/// Why the live runtime could not start, or why one of its tasks stopped.
/// Each names the task, tp, offset or topic involved.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
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

    #[error("task {task}: consuming {} failed: {reason}", tp.as_ref().map_or("its tps".to_string(), Tp::to_string))]
    Consume {
        task: TaskId,
        tp: Option<Tp>,
        reason: String,
    },

    #[error(
        "instance {index} of {count}: the index must be below the count, and the count above 0"
    )]
    InvalidInstance { index: u32, count: u32 },

    #[error("task {task}: its thread panicked: {reason}")]
    Panicked { task: TaskId, reason: String },
}

impl RuntimeError {
    /// True when the task stopped because a newer instance's producer fenced
    /// it (X4): the task moved, which is not a failure of this instance.
    pub fn is_fenced(&self) -> bool {
        matches!(self, RuntimeError::Live(error) if error.is_fenced())
    }
}
