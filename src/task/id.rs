//! A task's identity: its stage and partition.

use std::fmt;
use std::sync::Arc;

/// One stage's task: its unit of work and of parallelism. Cheap to clone
/// (the stage's name is shared): drivers put it in every trace event.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskId {
    /// The stage's name.
    pub stage: Arc<str>,
    /// The partition of each source the task consumes.
    pub partition: u32,
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.stage, self.partition)
    }
}
