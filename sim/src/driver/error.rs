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
    #[error("kafka model: {0}")]
    Model(#[from] ModelError),
    #[error("topic {topic:?} is not a source of any stage of application {app:?}")]
    NotASource { topic: String, app: String },
    #[error("topic {topic:?} does not exist in the model")]
    UnknownTopic { topic: String },
    #[error("reading {tp}@{offset}: the {part} was rejected by the topic's codec: {error}")]
    OutputCodec {
        tp: Tp,
        offset: u64,
        part: &'static str,
        error: CodecError,
    },
    #[error("reading {tp}@{offset}: the stamp header does not decode: {error}")]
    OutputStamp {
        tp: Tp,
        offset: u64,
        error: HeaderError,
    },
    #[error("piping to {topic:?}: the {part} was rejected by the topic's codec: {error}")]
    InputCodec {
        topic: String,
        part: &'static str,
        error: CodecError,
    },
    #[error(
        "piping to {topic:?}: partition {partition} does not exist (the topic has {partitions})"
    )]
    NoSuchPartition {
        topic: String,
        partition: u32,
        partitions: u32,
    },
    #[error("the application did not quiesce within {rounds_max} rounds; does a stage feed its own source?")]
    NoQuiescence { rounds_max: usize },
    #[error("stage {stage:?} has no task {partition}")]
    UnknownTask { stage: String, partition: u32 },
    #[error("stage {stage:?} does not hold state of type {type_name}")]
    WrongStateType {
        stage: String,
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
