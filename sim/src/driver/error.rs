use parsley::codec::CodecError;
use parsley::header::HeaderError;
use parsley::{AssemblyError, TaskError, Tp};

use crate::host::HostError;
use crate::model::ModelError;

/// Why the test driver could not do what it was asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DriverError {
    /// C3: the model's topics do not fit the application.
    #[error(transparent)]
    Assembly(#[from] AssemblyError),
    /// A task stopped (bad input or a logic error); it stays stopped.
    #[error(transparent)]
    Task(#[from] TaskError),
    /// The in-memory model refused a call.
    #[error("kafka model: {0}")]
    Model(#[from] ModelError),
    /// `input` was asked for a topic no stage consumes.
    #[error("topic {topic:?} is not a source of any stage of application {app:?}")]
    NotASource {
        /// The topic.
        topic: String,
        /// The application id.
        app: String,
    },
    /// The topic is not in the model.
    #[error("topic {topic:?} does not exist in the model")]
    UnknownTopic {
        /// The topic.
        topic: String,
    },
    /// A committed output does not decode with the topic's codec.
    #[error("reading {tp}@{offset}: the {part} was rejected by the topic's codec: {error}")]
    OutputCodec {
        /// The tp read.
        tp: Tp,
        /// The offset read.
        offset: u64,
        /// "key" or "value".
        part: &'static str,
        /// The refusal.
        error: CodecError,
    },
    /// A committed output's stamp header does not decode.
    #[error("reading {tp}@{offset}: the stamp header does not decode: {error}")]
    OutputStamp {
        /// The tp read.
        tp: Tp,
        /// The offset read.
        offset: u64,
        /// The refusal.
        error: HeaderError,
    },
    /// A piped value was refused by the topic's codec.
    #[error("piping to {topic:?}: the {part} was rejected by the topic's codec: {error}")]
    InputCodec {
        /// The topic.
        topic: String,
        /// "key" or "value".
        part: &'static str,
        /// The refusal.
        error: CodecError,
    },
    /// A piped record names a partition the topic does not have.
    #[error(
        "piping to {topic:?}: partition {partition} does not exist (the topic has {partitions})"
    )]
    NoSuchPartition {
        /// The topic.
        topic: String,
        /// The partition asked for.
        partition: u32,
        /// The partitions the topic has.
        partitions: u32,
    },
    /// Processing did not settle: a stage probably feeds its own source.
    #[error("the application did not quiesce within {rounds_max} rounds; does a stage feed its own source?")]
    NoQuiescence {
        /// The round budget.
        rounds_max: usize,
    },
    /// The stage has no such task.
    #[error("stage {stage:?} has no task {partition}")]
    UnknownTask {
        /// The stage.
        stage: String,
        /// The partition asked for.
        partition: u32,
    },
    /// A slot was read as a type that is not the stage's state type.
    #[error("stage {stage:?} does not hold state of type {type_name}")]
    WrongStateType {
        /// The stage.
        stage: String,
        /// The state type asked for.
        type_name: &'static str,
    },
}

impl From<HostError> for DriverError {
    fn from(error: HostError) -> Self {
        match error {
            HostError::Task(error) => DriverError::Task(error),
            HostError::Model(error) => DriverError::Model(error),
        }
    }
}
