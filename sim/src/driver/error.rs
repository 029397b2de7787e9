use parsley::header::HeaderError;
use parsley::CodecError;
use parsley::NotADeadLetter;
use parsley::SkipError;
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
    /// X5: the task refused to skip the record named.
    #[error(transparent)]
    Skip(#[from] SkipError),
    /// X5: the stage does not opt in to a dead-letter topic.
    #[error("stage {stage:?} has no dead-letter topic; declare it with `dead_letter_queue()` (X5, docs/RULES.md#x5)")]
    NoDeadLetterTopic {
        /// The stage.
        stage: String,
    },
    /// A record on a dead-letter topic does not read as a dead letter.
    #[error("reading {tp}@{offset}: {error}")]
    NotADeadLetter {
        /// The tp read.
        tp: Tp,
        /// The offset read.
        offset: u64,
        /// What is wrong with it.
        error: NotADeadLetter,
    },
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
    /// The application has no stage of that name.
    #[error("application {app:?} has no stage {stage:?}{}; its stages: {}", did_you_mean(.suggestion), .known.join(", "))]
    UnknownStage {
        /// The stage name asked for.
        stage: String,
        /// The application id.
        app: String,
        /// The application's stages, in declaration order.
        known: Vec<String>,
        /// The known stage closest to the name asked for, when one is close.
        suggestion: Option<String>,
    },
    /// The stage exists but is not a timer service (K2).
    #[error(
        "stage {stage:?} is not a timer service (parsley::TimerService): it has no pending timers"
    )]
    NotATimerService {
        /// The stage.
        stage: String,
    },
    /// The stage exists but is not a windowed aggregation (W1).
    #[error("stage {stage:?} is not a windowed aggregation (parsley::Windows): it has no windows")]
    NotAWindowedAggregation {
        /// The stage.
        stage: String,
    },
    /// The stage exists but is not an expiring fold (E1).
    #[error(
        "stage {stage:?} is not an expiring fold (parsley::Expiring): it has no expiring state"
    )]
    NotExpiring {
        /// The stage.
        stage: String,
    },
    /// The stage exists but is not a stream–table join (J1).
    #[error("stage {stage:?} is not a stream–table join (parsley::Join): it has no table")]
    NotAJoin {
        /// The stage.
        stage: String,
    },
    /// The stage exists but is not a table–table join (J8).
    #[error(
        "stage {stage:?} is not a table–table join (parsley::Join::table_table): it has no sides"
    )]
    NotATableJoin {
        /// The stage.
        stage: String,
    },
    /// The stage exists but has no task for that partition.
    #[error("stage {stage:?} has no task {partition}: it has {tasks} task(s), numbered from 0")]
    UnknownTask {
        /// The stage.
        stage: String,
        /// The partition asked for.
        partition: u32,
        /// How many tasks the stage has.
        tasks: u32,
    },
    /// `output` was asked for a topic the application neither declares nor
    /// derives.
    #[error("topic {topic:?} is not a topic of application {app:?}; its sinks: {}", .sinks.join(", "))]
    NotATopicOfTheApp {
        /// The topic asked for.
        topic: String,
        /// The application id.
        app: String,
        /// The topics the application's stages emit to.
        sinks: Vec<String>,
    },
    /// A typed handle's codecs differ from the ones the application declares
    /// for the topic (C1: one key codec and one value codec per topic).
    #[error("{call}: topic {topic:?} is declared by application {app:?} with {declared}, but this handle has {given}")]
    CodecMismatch {
        /// `input` or `output`.
        call: &'static str,
        /// The topic.
        topic: String,
        /// The application id.
        app: String,
        /// The codecs the application declares.
        declared: String,
        /// The codecs of the handle passed in.
        given: String,
    },
    /// A task stopped in an earlier step (its error was returned then, as
    /// [`DriverError::Task`]) and stays stopped: what is piped to it is not
    /// processed until it is restarted.
    #[error("{} stopped earlier and process(es) nothing until restarted (`restart_task`, `restart`); the first stopped with: {first}", .tasks.join(", "))]
    TaskStopped {
        /// The stopped tasks, as `stage/partition`.
        tasks: Vec<String>,
        /// The error the first of them stopped with.
        first: String,
    },
    /// A metric name that no task publishes (T8).
    #[error("no metric named {name:?}; the metrics are: {}", .known.join(", "))]
    UnknownMetric {
        /// The name asked for.
        name: String,
        /// The published names.
        known: Vec<&'static str>,
    },
    /// A consuming read found the topic's queue empty: every committed
    /// record was consumed, by this handle or another of the same topic
    /// (Kafka Streams' `readValue` throws `NoSuchElementException`).
    #[error("no record to read on topic {topic:?}: every committed record was consumed (check `is_empty()` first when none is expected)")]
    NoRecordToRead {
        /// The topic read.
        topic: String,
    },
    /// `read_key_values_to_map` met a record with a null key, which has no
    /// place in a map (Kafka Streams throws `IllegalStateException`).
    #[error("reading {tp}@{offset} into a map: the record has a null key; read it with `read_key_values_to_list` instead")]
    NullKeyInMap {
        /// The tp of the record.
        tp: Tp,
        /// Its offset.
        offset: u64,
    },
    /// A store key's type and codec are not the key type and codec of any
    /// source topic of the stage, so the driver cannot tell its slot.
    #[error("stage {stage:?} has no source topic with keys of type {key_type}; its sources: {}; read a key of a codec of your own with `key_slot(stage, &topic, &key)`", .sources.join(", "))]
    StoreKeyType {
        /// The stage.
        stage: String,
        /// The Rust type of the key passed.
        key_type: &'static str,
        /// The stage's sources, each with its codecs.
        sources: Vec<String>,
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

fn did_you_mean(suggestion: &Option<String>) -> String {
    match suggestion {
        Some(name) => format!(" (did you mean {name:?}?)"),
        None => String::new(),
    }
}

/// The name in `known` closest to `asked`, when it is within a typo of it:
/// an edit distance of at most a third of the longer name, a swap of two
/// neighbouring letters counting as one edit (optimal string alignment).
pub(crate) fn closest<'a>(asked: &str, known: impl IntoIterator<Item = &'a str>) -> Option<String> {
    known
        .into_iter()
        .map(|name| (strsim::osa_distance(asked, name), name))
        .filter(|(distance, name)| *distance * 3 <= asked.chars().count().max(name.chars().count()))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, name)| name.to_string())
}

impl From<HostError> for DriverError {
    fn from(error: HostError) -> Self {
        match error {
            HostError::Task(error) => DriverError::Task(error),
            HostError::Model(error) => DriverError::Model(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typo_suggests_the_closest_stage_and_a_stranger_suggests_none() {
        let known = ["enrich", "score", "join"];
        assert_eq!(closest("jion", known), Some("join".to_string()));
        assert_eq!(closest("scores", known), Some("score".to_string()));
        assert_eq!(closest("balances", known), None);
    }
}
