//! Why a task stopped. Every variant names the task and, where a record is
//! involved, its tp and offset; the task's committed position stays before
//! that record (docs/RULES.md#bad-input, X5).

use crate::codec::CodecError;
use crate::header::HeaderError;
use crate::stamp::Claim;
use crate::topic::RecordPart;
use crate::tp::Tp;

use super::TaskId;

/// Why a task stopped: bad input (docs/RULES.md#bad-input) or failing logic (X5). The driver aborts the open transaction, so the committed position stays before the record named.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TaskError {
    /// The stamp header does not decode.
    #[error("task {task}: record {tp}@{offset} has a stamp header that does not decode: {error}")]
    BadStamp {
        /// The task that stopped.
        task: TaskId,
        /// The tp of the record the task stopped on.
        tp: Tp,
        /// The offset of that record.
        offset: u64,
        /// The codec's refusal.
        error: HeaderError,
    },
    /// V4: on a path to a consistent view, a record whose epoch header (or
    /// progress header) is missing, does not parse, or names a task that
    /// does not write its topic.
    #[error("task {task}: record {tp}@{offset} cannot be placed in an epoch (V4, docs/RULES.md#v4): {reason}")]
    BadEpoch {
        /// The task that stopped.
        task: TaskId,
        /// The tp of the record the task stopped on.
        tp: Tp,
        /// The offset of that record.
        offset: u64,
        /// What is wrong with its header.
        reason: String,
    },
    /// G6: a claim that can never resolve, or a cycle of claims.
    #[error("task {task}: record {tp}@{offset} is poison (G6, docs/RULES.md#g6): its claim {claim} can never resolve: {reason}")]
    UnresolvableClaim {
        /// The task that stopped.
        task: TaskId,
        /// The tp of the record the task stopped on.
        tp: Tp,
        /// The offset of that record.
        offset: u64,
        /// The claim that can never resolve.
        claim: Claim,
        /// Why it cannot be used.
        reason: String,
    },
    /// The source topic's codec refused the key or value.
    #[error("task {task}: the {part} of record {tp}@{offset} was rejected by the codec of topic {}: {error}", tp.topic)]
    Codec {
        /// The task that stopped.
        task: TaskId,
        /// The tp of the record the task stopped on.
        tp: Tp,
        /// The offset of that record.
        offset: u64,
        /// Which part of the record the codec refused.
        part: RecordPart,
        /// The codec's refusal.
        error: Box<CodecError>,
    },
    /// The state codec refused the state a fold returned.
    #[error("task {task}: the state written while delivering {tp}@{offset} was rejected by the state codec: {error}")]
    StateCodec {
        /// The task that stopped.
        task: TaskId,
        /// The tp of the record the task stopped on.
        tp: Tp,
        /// The offset of that record.
        offset: u64,
        /// The codec's refusal.
        error: Box<CodecError>,
    },
    /// X5: the logic returned an error or panicked.
    #[error("task {task}: logic failed on {tp}@{offset} (X5, docs/RULES.md#x5): {message}")]
    Logic {
        /// The task that stopped.
        task: TaskId,
        /// The tp of the record the task stopped on.
        tp: Tp,
        /// The offset of that record.
        offset: u64,
        /// The logic's error, or the panic's message.
        message: String,
    },
    /// S3: an emission to a topic the stage does not declare as a sink.
    #[error("S3 (docs/RULES.md#s3): stage {:?} emitted to topic {topic:?}, which it does not declare with `into` (while delivering {tp}@{offset})", task.stage)]
    UndeclaredSink {
        /// The task that stopped.
        task: TaskId,
        /// The topic the logic emitted to.
        topic: String,
        /// The tp of the record the task stopped on.
        tp: Tp,
        /// The offset of that record.
        offset: u64,
    },
    /// T2: an emission to a tick topic.
    #[error("T2 (docs/RULES.md#t2): stage {:?} emitted to tick topic {topic:?}; no logic may emit to a tick topic (while delivering {tp}@{offset})", task.stage)]
    EmitToTickTopic {
        /// The task that stopped.
        task: TaskId,
        /// The topic the logic emitted to.
        topic: String,
        /// The tp of the record the task stopped on.
        tp: Tp,
        /// The offset of that record.
        offset: u64,
    },
    /// A sink's codec refused an emission.
    #[error("task {task}: an emission to topic {topic:?} was rejected by its codec (while delivering {tp}@{offset}): {error}")]
    EmissionCodec {
        /// The task that stopped.
        task: TaskId,
        /// The topic the logic emitted to.
        topic: String,
        /// The tp of the record the task stopped on.
        tp: Tp,
        /// The offset of that record.
        offset: u64,
        /// The codec's refusal.
        error: Box<CodecError>,
    },
    /// A tick record without an 8-byte timestamp value.
    #[error("task {task}: tick record {tp}@{offset} does not hold an 8-byte timestamp")]
    BadTick {
        /// The task that stopped.
        task: TaskId,
        /// The tp of the record the task stopped on.
        tp: Tp,
        /// The offset of that record.
        offset: u64,
    },
    /// A changelog record that cannot be restored (S5).
    #[error("task {task}: changelog record {tp}@{offset} cannot be restored: {reason}")]
    BadChangelog {
        /// The task that stopped.
        task: TaskId,
        /// The tp of the record the task stopped on.
        tp: Tp,
        /// The offset of that record.
        offset: u64,
        /// Why it cannot be used.
        reason: String,
    },
    /// Committed offset metadata that is not a checkpoint.
    #[error("task {task}: the offset metadata committed on {tp} does not decode: {reason}")]
    BadCheckpoint {
        /// The task that stopped.
        task: TaskId,
        /// The tp of the record the task stopped on.
        tp: Tp,
        /// Why it cannot be used.
        reason: String,
    },
    /// The checkpoint outgrew Kafka's offset metadata limit.
    #[error("task {task}: its checkpoint is {bytes} bytes, more than Kafka's {max}-byte offset metadata limit (the history claims {claims} tps)")]
    CheckpointTooLarge {
        /// The task that stopped.
        task: TaskId,
        /// The encoded checkpoint size.
        bytes: usize,
        /// Kafka's limit.
        max: usize,
        /// How many tps the history claims.
        claims: usize,
    },
    /// X5: an operator's skip named an offset that is not a record: the
    /// lane's next record lies beyond it.
    #[error("task {task}: the skip of {tp}@{offset} names no record; the next record of {tp} is at offset {next} (X5, docs/RULES.md#x5)")]
    SkipMissed {
        /// The task that stopped.
        task: TaskId,
        /// The tp the skip named.
        tp: Tp,
        /// The offset the skip named.
        offset: u64,
        /// The offset of the next record.
        next: u64,
    },
    /// The task is not part of the assembled application.
    #[error("task {task}: stage {:?} is not in the application, or has no task {}", task.stage, task.partition)]
    UnknownTask {
        /// The task that stopped.
        task: TaskId,
    },
}

impl TaskError {
    /// The task that stopped with this error.
    pub fn task(&self) -> &TaskId {
        match self {
            TaskError::BadStamp { task, .. }
            | TaskError::BadEpoch { task, .. }
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
            | TaskError::SkipMissed { task, .. }
            | TaskError::UnknownTask { task } => task,
        }
    }

    /// The record this error is about, if any.
    pub fn record(&self) -> Option<(&Tp, u64)> {
        match self {
            TaskError::BadStamp { tp, offset, .. }
            | TaskError::BadEpoch { tp, offset, .. }
            | TaskError::UnresolvableClaim { tp, offset, .. }
            | TaskError::Codec { tp, offset, .. }
            | TaskError::StateCodec { tp, offset, .. }
            | TaskError::Logic { tp, offset, .. }
            | TaskError::UndeclaredSink { tp, offset, .. }
            | TaskError::EmitToTickTopic { tp, offset, .. }
            | TaskError::EmissionCodec { tp, offset, .. }
            | TaskError::BadTick { tp, offset, .. }
            | TaskError::BadChangelog { tp, offset, .. }
            | TaskError::SkipMissed { tp, offset, .. } => Some((tp, *offset)),
            TaskError::BadCheckpoint { .. }
            | TaskError::CheckpointTooLarge { .. }
            | TaskError::UnknownTask { .. } => None,
        }
    }
}

/// Why [`crate::Task::skip`] refused to skip a record (X5). Nothing was
/// skipped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SkipError {
    /// The stage does not opt in to a dead-letter topic.
    #[error("task {task}: stage {:?} has no dead-letter topic to skip records to; declare it with `dead_letter_queue()` (X5, docs/RULES.md#x5)", task.stage)]
    NoDeadLetterTopic {
        /// The task asked.
        task: TaskId,
    },
    /// The task does not consume the tp named.
    #[error("task {task} does not consume {tp}")]
    NotConsumed {
        /// The task asked.
        task: TaskId,
        /// The tp named.
        tp: Tp,
    },
    /// The offset is behind the next record the task delivers on that tp:
    /// it was delivered already.
    #[error("task {task}: {tp}@{offset} is behind the next record it delivers on {tp}, at offset {next}; it was delivered already")]
    Behind {
        /// The task asked.
        task: TaskId,
        /// The tp named.
        tp: Tp,
        /// The offset named.
        offset: u64,
        /// The next offset to deliver.
        next: u64,
    },
    /// The records fetched show no record at that offset (a transaction
    /// marker or an aborted record).
    #[error(
        "task {task}: {tp}@{offset} is not a record (a transaction marker or an aborted record)"
    )]
    NotARecord {
        /// The task asked.
        task: TaskId,
        /// The tp named.
        tp: Tp,
        /// The offset named.
        offset: u64,
    },
    /// A skip is already pending.
    #[error("task {task}: the skip of {tp}@{offset} is still pending")]
    AlreadyPending {
        /// The task asked.
        task: TaskId,
        /// The tp of the pending skip.
        tp: Tp,
        /// Its offset.
        offset: u64,
    },
    /// The task has not started.
    #[error("task {task} has not started; skip after `start`")]
    NotStarted {
        /// The task asked.
        task: TaskId,
    },
    /// The task stopped: restart it from its committed positions, then skip.
    #[error("task {task} stopped ({error}); restart it, then skip the record it stopped on")]
    Stopped {
        /// The task asked.
        task: TaskId,
        /// Why it stopped.
        error: Box<TaskError>,
    },
}
