//! Why a task stopped. Every variant names the task and, where a record is
//! involved, its tp and offset; the task's committed position stays before
//! that record (SPEC §8, X5).

use std::fmt;

use crate::codec::CodecError;
use crate::header::HeaderError;
use crate::stamp::Claim;
use crate::topic::RecordPart;
use crate::tp::Tp;

/// One stage's task: its unit of work and of parallelism.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskId {
    pub stage: String,
    pub partition: u32,
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.stage, self.partition)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TaskError {
    #[error("task {task}: record {tp}@{offset} has a stamp header that does not decode: {error}")]
    BadStamp {
        task: TaskId,
        tp: Tp,
        offset: u64,
        error: HeaderError,
    },
    #[error("task {task}: record {tp}@{offset} is poison (G6): its claim {claim} can never resolve: {reason}")]
    UnresolvableClaim {
        task: TaskId,
        tp: Tp,
        offset: u64,
        claim: Claim,
        reason: String,
    },
    #[error("task {task}: the {part} of record {tp}@{offset} was rejected by the codec of topic {}: {error}", tp.topic)]
    Codec {
        task: TaskId,
        tp: Tp,
        offset: u64,
        part: RecordPart,
        error: Box<CodecError>,
    },
    #[error("task {task}: the state written while delivering {tp}@{offset} was rejected by the state codec: {error}")]
    StateCodec {
        task: TaskId,
        tp: Tp,
        offset: u64,
        error: Box<CodecError>,
    },
    #[error("task {task}: logic failed on {tp}@{offset} (X5): {message}")]
    Logic {
        task: TaskId,
        tp: Tp,
        offset: u64,
        message: String,
    },
    #[error("S3: stage {:?} emitted to topic {topic:?}, which it does not declare with `into` (while delivering {tp}@{offset})", task.stage)]
    UndeclaredSink {
        task: TaskId,
        topic: String,
        tp: Tp,
        offset: u64,
    },
    #[error("T2: stage {:?} emitted to tick topic {topic:?}; no logic may emit to a tick topic (while delivering {tp}@{offset})", task.stage)]
    EmitToTickTopic {
        task: TaskId,
        topic: String,
        tp: Tp,
        offset: u64,
    },
    #[error("task {task}: an emission to topic {topic:?} was rejected by its codec (while delivering {tp}@{offset}): {error}")]
    EmissionCodec {
        task: TaskId,
        topic: String,
        tp: Tp,
        offset: u64,
        error: Box<CodecError>,
    },
    #[error("task {task}: tick record {tp}@{offset} does not hold an 8-byte timestamp")]
    BadTick { task: TaskId, tp: Tp, offset: u64 },
    #[error("task {task}: changelog record {tp}@{offset} cannot be restored: {reason}")]
    BadChangelog {
        task: TaskId,
        tp: Tp,
        offset: u64,
        reason: String,
    },
    #[error("task {task}: the offset metadata committed on {tp} does not decode: {reason}")]
    BadCheckpoint {
        task: TaskId,
        tp: Tp,
        reason: String,
    },
    #[error("task {task}: its checkpoint is {bytes} bytes, more than Kafka's {max}-byte offset metadata limit (the history claims {claims} tps)")]
    CheckpointTooLarge {
        task: TaskId,
        bytes: usize,
        max: usize,
        claims: usize,
    },
    #[error("task {task}: stage {:?} is not in the application, or has no task {}", task.stage, task.partition)]
    UnknownTask { task: TaskId },
}

impl TaskError {
    /// The task that stopped with this error.
    pub fn task(&self) -> &TaskId {
        match self {
            TaskError::BadStamp { task, .. }
            | TaskError::UnresolvableClaim { task, .. }
            | TaskError::Codec { task, .. }
            | TaskError::StateCodec { task, .. }
            | TaskError::Logic { task, .. }
            | TaskError::UndeclaredSink { task, .. }
            | TaskError::EmitToTickTopic { task, .. }
            | TaskError::EmissionCodec { task, .. }
            | TaskError::BadTick { task, .. }
            | TaskError::BadChangelog { task, .. }
            | TaskError::BadCheckpoint { task, .. }
            | TaskError::CheckpointTooLarge { task, .. }
            | TaskError::UnknownTask { task } => task,
        }
    }

    /// The record this error is about, if any.
    pub fn record(&self) -> Option<(&Tp, u64)> {
        match self {
            TaskError::BadStamp { tp, offset, .. }
            | TaskError::UnresolvableClaim { tp, offset, .. }
            | TaskError::Codec { tp, offset, .. }
            | TaskError::StateCodec { tp, offset, .. }
            | TaskError::Logic { tp, offset, .. }
            | TaskError::UndeclaredSink { tp, offset, .. }
            | TaskError::EmitToTickTopic { tp, offset, .. }
            | TaskError::EmissionCodec { tp, offset, .. }
            | TaskError::BadTick { tp, offset, .. }
            | TaskError::BadChangelog { tp, offset, .. } => Some((tp, *offset)),
            TaskError::BadCheckpoint { .. }
            | TaskError::CheckpointTooLarge { .. }
            | TaskError::UnknownTask { .. } => None,
        }
    }
}
