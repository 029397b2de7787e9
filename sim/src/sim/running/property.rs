//! What a user's property reads after a seed: the committed records of
//! every topic through the topics' own codecs, per partition in offset
//! order, and the committed state of every task.

use bytes::Bytes;
use parsley::partition_for;
use parsley::ConsumedRecord;
use parsley::SlotKey;
use parsley::TaskId;
use parsley::{App, Record, Topic, Tp};

use std::collections::HashSet;

use crate::host::TaskHost;
use crate::model::{Cluster, Isolation};
use crate::sim::running::history::StateRead;
use crate::sim::world::stats::Stats;

/// Any error a property returns ([`parsley::BoxError`]); a `String` or
/// `&str` converts with `?` or `.into()`.
pub use parsley::BoxError;

/// What a property returns: `Err` says what is wrong.
pub type PropertyResult = Result<(), BoxError>;

/// A property's failure that names the committed records it is about (the
/// click counted twice, the order that lost its update), so that the
/// report's story and the timeline follow those records and the task that
/// wrote the first of them, not the run's last events. Return it as a
/// property's error:
///
/// ```
/// use parsley_sim::sim::{Committed, PropertyFailure, PropertyResult};
/// use parsley::{Topic, Utf8, I64};
///
/// fn no_negative_counts(run: &Committed<'_>) -> PropertyResult {
///     let counts = Topic::<String, i64>::with_codecs("counts", Utf8, I64);
///     for count in run.records(&counts)? {
///         if *count.value() < 0 {
///             return Err(PropertyFailure::new(format!("{:?} counted {}", count.key(), count.value()))
///                 .about(&count)
///                 .into());
///         }
///     }
///     Ok(())
/// }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PropertyFailure {
    message: String,
    records: Vec<(Tp, u64)>,
}

impl PropertyFailure {
    /// A failure saying `message`, about no record yet.
    pub fn new(message: impl Into<String>) -> PropertyFailure {
        PropertyFailure {
            message: message.into(),
            records: Vec::new(),
        }
    }

    /// Names a committed record (as `Committed::records` returns it) the
    /// failure is about; the first named leads the report.
    pub fn about<K, V>(self, record: &Record<K, V>) -> PropertyFailure {
        self.about_offset(
            Tp::new(record.topic().clone(), record.partition()),
            record.offset(),
        )
    }

    /// Names a record by its tp and offset.
    pub fn about_offset(mut self, tp: Tp, offset: u64) -> PropertyFailure {
        self.records.push((tp, offset));
        self
    }

    /// The records named, the first leading.
    pub fn records(&self) -> &[(Tp, u64)] {
        &self.records
    }
}

impl std::fmt::Display for PropertyFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)?;
        if !self.records.is_empty() {
            let named: Vec<String> = self
                .records
                .iter()
                .map(|(tp, offset)| format!("{tp}@{offset}"))
                .collect();
            write!(f, " (about {})", named.join(", "))?;
        }
        Ok(())
    }
}

impl std::error::Error for PropertyFailure {}

/// A property could not read what it asked for: each names the topic, stage
/// or record.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// No such topic in the run.
    #[error("topic {topic:?} does not exist in this run")]
    UnknownTopic {
        /// The topic.
        topic: String,
    },
    /// No such partition of the topic.
    #[error("topic {topic:?} has {partitions} partitions; there is no partition {partition}")]
    UnknownPartition {
        /// The topic.
        topic: String,
        /// The partition asked for.
        partition: u32,
        /// How many the topic has.
        partitions: u32,
    },
    /// A committed record the topic's codecs cannot decode.
    #[error("{topic}-{partition}@{offset}: {error}")]
    Decode {
        /// The topic.
        topic: String,
        /// The partition.
        partition: u32,
        /// The record's offset.
        offset: u64,
        /// What the codec said.
        error: parsley::RecordCodecError,
    },
    /// A tombstone (a record with a null value) read as a typed record,
    /// which carries a value: a table topic's deletions are read with
    /// [`Committed::changes`], where a tombstone's value is `None`.
    #[error("{topic}-{partition}@{offset} is a tombstone (a null value), which a typed record cannot carry: read the topic with `changes()` (or `partition_changes()`), where a tombstone's value is `None`")]
    Tombstone {
        /// The topic.
        topic: String,
        /// The partition.
        partition: u32,
        /// The record's offset.
        offset: u64,
    },
    /// A slot's key the topic's key codec cannot decode.
    #[error("a key slot of stage {stage:?} does not decode with {topic:?}'s key codec: {error}")]
    SlotKey {
        /// The stage.
        stage: String,
        /// The topic whose codec was used.
        topic: String,
        /// What the codec said.
        error: parsley::CodecError,
    },
    /// A key the topic's key codec cannot encode.
    #[error("the key for topic {topic:?} does not encode: {error}")]
    Encode {
        /// The topic.
        topic: String,
        /// What the codec said.
        error: parsley::CodecError,
    },
    /// No task of that stage and partition ran.
    #[error("application {app:?} has no task {stage}[{partition}] in this run (stages: {stages})")]
    UnknownTask {
        /// The application id.
        app: String,
        /// The stage asked for.
        stage: String,
        /// The partition asked for.
        partition: u32,
        /// The application's stages.
        stages: String,
    },
    /// The stage keeps another state type.
    #[error("stage {stage:?} does not keep state of type {type_name}")]
    WrongStateType {
        /// The stage.
        stage: String,
        /// The type asked for.
        type_name: &'static str,
    },
}

/// What one seed committed, once its world quiesced (or ran out of
/// liveness budget): read-only, for properties and "sometimes" marks.
pub struct Committed<'a> {
    pub(crate) app: &'a App,
    pub(crate) cluster: &'a Cluster,
    /// The final task hosts, stopped ones included, one per task.
    pub(crate) hosts: Vec<&'a TaskHost>,
    pub(crate) stats: &'a Stats,
    pub(crate) quiesced: bool,
    /// Records left out of this view: those of commits after a prefix of
    /// the history ([`history`](crate::sim::running::history)).
    pub(crate) hidden: Option<&'a HashSet<(Tp, u64)>>,
    /// Whether a property read a task's state through this view.
    pub(crate) state_read: StateRead,
}

impl<'a> Committed<'a> {
    /// This view with `hidden`'s records left out of every topic.
    pub(crate) fn hiding<'b>(&'b self, hidden: &'b HashSet<(Tp, u64)>) -> Committed<'b> {
        Committed {
            app: self.app,
            cluster: self.cluster,
            hosts: self.hosts.clone(),
            stats: self.stats,
            quiesced: self.quiesced,
            hidden: Some(hidden),
            state_read: StateRead::default(),
        }
    }

    /// Whether a property read a task's state through this view.
    pub(crate) fn read_state(&self) -> bool {
        self.state_read.get()
    }

    /// The application that ran.
    pub fn app(&self) -> &App {
        self.app
    }

    /// The run's counters (inputs, commits, aborts, crashes, rare states
    /// reached).
    pub fn stats(&self) -> &Stats {
        self.stats
    }

    /// Whether the world quiesced within its liveness budget (I8).
    pub fn quiesced(&self) -> bool {
        self.quiesced
    }

    /// How many partitions `topic` has.
    pub fn partitions<K: 'static, V: 'static>(
        &self,
        topic: &Topic<K, V>,
    ) -> Result<u32, ReadError> {
        self.cluster
            .partitions(topic.name().as_str())
            .ok_or_else(|| ReadError::UnknownTopic {
                topic: topic.name().to_string(),
            })
    }

    /// The committed records of one partition of `topic`, in offset order,
    /// decoded with the topic's codecs (records of aborted or open
    /// transactions are not there, as a `read_committed` consumer sees). A
    /// tombstone is refused ([`ReadError::Tombstone`]): a table topic is
    /// read with [`partition_changes`](Self::partition_changes).
    pub fn partition<K: 'static, V: 'static>(
        &self,
        topic: &Topic<K, V>,
        partition: u32,
    ) -> Result<Vec<Record<K, V>>, ReadError> {
        self.partition_changes(topic, partition)?
            .into_iter()
            .map(|record| match record.value() {
                Some(_) => Ok(record.map_value(|value| value.expect("matched Some"))),
                None => Err(ReadError::Tombstone {
                    topic: record.topic().to_string(),
                    partition,
                    offset: record.offset(),
                }),
            })
            .collect()
    }

    /// The committed records of one partition of `topic`, in offset order,
    /// tombstones included: a record with a null value (a table's deletion
    /// of its key) has the value `None`, every other `Some`, as a Kafka
    /// Streams test reads a table's changelog with `null` values.
    pub fn partition_changes<K: 'static, V: 'static>(
        &self,
        topic: &Topic<K, V>,
        partition: u32,
    ) -> Result<Vec<Record<K, Option<V>>>, ReadError> {
        let partitions = self.partitions(topic)?;
        if partition >= partitions {
            return Err(ReadError::UnknownPartition {
                topic: topic.name().to_string(),
                partition,
                partitions,
            });
        }
        let tp = topic.tp(partition);
        self.committed_raw(&tp)?
            .iter()
            .map(|consumed| {
                let refused = |error| ReadError::Decode {
                    topic: tp.topic.to_string(),
                    partition,
                    offset: consumed.offset,
                    error,
                };
                if consumed.data.value.is_some() {
                    let record = topic.decode(&tp, consumed).map_err(refused)?;
                    return Ok(record.map_value(Some));
                }
                let key = consumed
                    .data
                    .key
                    .as_ref()
                    .map(|key| topic.key_codec().decode(key))
                    .transpose()
                    .map_err(|error| {
                        refused(parsley::RecordCodecError {
                            part: parsley::RecordPart::Key,
                            error,
                        })
                    })?;
                Ok(Record::new(
                    key,
                    None,
                    consumed.data.timestamp,
                    tp.topic.clone(),
                    partition,
                    consumed.offset,
                ))
            })
            .collect()
    }

    /// The committed records of every partition of `topic`, tombstones
    /// included as `None` values ([`partition_changes`](Self::partition_changes)):
    /// partition 0 in offset order, then partition 1, and so on. A table
    /// topic's records, which [`records`](Self::records) refuses at its
    /// first tombstone.
    pub fn changes<K: 'static, V: 'static>(
        &self,
        topic: &Topic<K, V>,
    ) -> Result<Vec<Record<K, Option<V>>>, ReadError> {
        let mut records = Vec::new();
        for partition in 0..self.partitions(topic)? {
            records.extend(self.partition_changes(topic, partition)?);
        }
        Ok(records)
    }

    /// The committed records of every partition of `topic`: partition 0 in
    /// offset order, then partition 1, and so on. A tombstone is refused
    /// ([`ReadError::Tombstone`]); [`changes`](Self::changes) reads it as
    /// `None`.
    pub fn records<K: 'static, V: 'static>(
        &self,
        topic: &Topic<K, V>,
    ) -> Result<Vec<Record<K, V>>, ReadError> {
        let mut records = Vec::new();
        for partition in 0..self.partitions(topic)? {
            records.extend(self.partition(topic, partition)?);
        }
        Ok(records)
    }

    /// The committed records of `tp` as bytes, headers (stamps) included.
    pub fn committed_raw(&self, tp: &Tp) -> Result<Vec<ConsumedRecord>, ReadError> {
        let unknown = || ReadError::UnknownTopic {
            topic: tp.topic.to_string(),
        };
        let fetch = self
            .cluster
            .fetch(tp, 0, usize::MAX, Isolation::ReadCommitted)
            .map_err(|_| unknown())?;
        let mut records = fetch.records;
        if let Some(hidden) = self.hidden {
            records.retain(|record| !hidden.contains(&(tp.clone(), record.offset)));
        }
        Ok(records)
    }

    fn host(&self, stage: &str, partition: u32) -> Result<&'a TaskHost, ReadError> {
        self.state_read.mark();
        let task = TaskId {
            stage: stage.into(),
            partition,
        };
        self.hosts
            .iter()
            .find(|host| *host.task.id() == task)
            .copied()
            .ok_or_else(|| ReadError::UnknownTask {
                app: self.app.id().to_string(),
                stage: stage.to_string(),
                partition,
                stages: self
                    .app
                    .stages()
                    .iter()
                    .map(|plan| plan.name())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }

    fn slots<S: Clone + 'static>(
        &self,
        stage: &str,
        partition: u32,
    ) -> Result<&'a parsley::Slots<S>, ReadError> {
        self.host(stage, partition)?
            .task
            .slots::<S>()
            .ok_or(ReadError::WrongStateType {
                stage: stage.to_string(),
                type_name: std::any::type_name::<S>(),
            })
    }

    /// The committed state of `key`'s slot in `stage`, on the task that
    /// consumes the partition `key` goes to in `topic`; `None` when unseen or
    /// deleted.
    pub fn key_slot<S: Clone + 'static, K: 'static, V: 'static>(
        &self,
        stage: &str,
        topic: &Topic<K, V>,
        key: &K,
    ) -> Result<Option<S>, ReadError> {
        let bytes = topic
            .key_codec()
            .encode(key)
            .map_err(|error| ReadError::Encode {
                topic: topic.name().to_string(),
                error,
            })?;
        let partition = partition_for(Some(&bytes), self.partitions(topic)?, 0);
        Ok(self
            .slots::<S>(stage, partition)?
            .committed(&SlotKey::Key(bytes))
            .cloned())
    }

    /// Every committed key slot of `stage`'s task on `partition`, keys
    /// decoded with `topic`'s key codec, in no particular order.
    pub fn key_slots<S: Clone + 'static, K: 'static, V: 'static>(
        &self,
        stage: &str,
        topic: &Topic<K, V>,
        partition: u32,
    ) -> Result<Vec<(K, S)>, ReadError> {
        let mut slots = Vec::new();
        for (slot, state) in self.slots::<S>(stage, partition)?.committed_slots() {
            if let SlotKey::Key(bytes) = slot {
                let key = decode_key(stage, topic, bytes)?;
                slots.push((key, state.clone()));
            }
        }
        Ok(slots)
    }

    /// The committed state of `stage`'s tick slot on `partition` (T7).
    pub fn tick_slot<S: Clone + 'static>(
        &self,
        stage: &str,
        partition: u32,
    ) -> Result<Option<S>, ReadError> {
        Ok(self
            .slots::<S>(stage, partition)?
            .committed(&SlotKey::Tick)
            .cloned())
    }

    /// The tasks that stopped (X5), with the error that stopped each.
    pub fn stopped(&self) -> Vec<(TaskId, String)> {
        self.state_read.mark();
        self.hosts
            .iter()
            .filter_map(|host| {
                host.task
                    .failure()
                    .map(|error| (host.task.id().clone(), error.to_string()))
            })
            .collect()
    }
}

fn decode_key<K: 'static, V: 'static>(
    stage: &str,
    topic: &Topic<K, V>,
    bytes: &Bytes,
) -> Result<K, ReadError> {
    topic
        .key_codec()
        .decode(bytes)
        .map_err(|error| ReadError::SlotKey {
            stage: stage.to_string(),
            topic: topic.name().to_string(),
            error,
        })
}
