//! The cluster: topics of partition logs, transactional producers with their
//! transaction coordinator, and consumer-group offsets.

use std::collections::BTreeMap;

use parsley::{RecordData, TopicName, Tp};

use super::error::ModelError;
use super::log::{
    AbortedTxn, ControlKind, Entry, EntryStatus, Fetch, Isolation, LogView, PartitionLog,
};

/// Kafka's default `transaction.timeout.ms`.
pub const DEFAULT_TRANSACTION_TIMEOUT_MS: i64 = 60_000;

/// A transactional producer's handle: its producer id and the epoch it was
/// given. A handle whose epoch is no longer the current one is fenced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProducerId {
    pub id: u64,
    pub epoch: u32,
}

/// A consumer group's committed position on one tp, with its metadata string:
/// the core's own type, so drivers hand it to a task as they read it.
pub use parsley::task::CommittedOffset;

/// Kafka's default `offset.metadata.max.bytes`: the broker refuses longer
/// offset metadata, and so does the model.
pub use parsley::task::OFFSET_METADATA_BYTES_MAX;

type GroupOffsets = BTreeMap<String, BTreeMap<Tp, CommittedOffset>>;

/// The coordinator's view of one transactional id.
#[derive(Clone, Debug)]
struct ProducerState {
    transactional_id: String,
    epoch: u32,
    txn: Option<Transaction>,
}

#[derive(Clone, Debug, Default)]
struct Transaction {
    started_ms: i64,
    /// Offsets written per partition, ascending; the first one is where the
    /// transaction holds the partition's last stable offset.
    writes: BTreeMap<Tp, Vec<u64>>,
    /// Group offsets sent to the transaction, applied only on commit.
    offsets: GroupOffsets,
}

/// A deterministic in-memory Kafka cluster. See the [module docs](super).
///
/// Everything is kept in ordered maps and vectors, so the same calls in the
/// same order produce the same logs, the same producer ids and the same
/// markers; there is no clock, and callers pass `now_ms` where time matters.
#[derive(Clone, Debug)]
pub struct Cluster {
    topics: Topics,
    /// Indexed by producer id: ids are handed out as 0, 1, 2, …
    producers: Vec<ProducerState>,
    transactional_ids: BTreeMap<String, u64>,
    groups: GroupOffsets,
    next_sequence: u64,
    transaction_timeout_ms: i64,
}

impl Default for Cluster {
    fn default() -> Self {
        Cluster::new()
    }
}

impl Cluster {
    pub fn new() -> Self {
        Cluster::with_transaction_timeout(DEFAULT_TRANSACTION_TIMEOUT_MS)
    }

    /// A cluster whose transaction coordinator aborts transactions open for
    /// longer than `timeout_ms` (see [`Cluster::expire_transactions`]).
    pub fn with_transaction_timeout(timeout_ms: i64) -> Self {
        Cluster {
            topics: Topics::default(),
            producers: Vec::new(),
            transactional_ids: BTreeMap::new(),
            groups: BTreeMap::new(),
            next_sequence: 0,
            transaction_timeout_ms: timeout_ms,
        }
    }

    pub fn transaction_timeout_ms(&self) -> i64 {
        self.transaction_timeout_ms
    }

    // ----- topics -----

    pub fn create_topic(&mut self, name: &str, partitions: u32) -> Result<(), ModelError> {
        self.create_topic_named(TopicName::new(name), partitions)
    }

    /// [`Cluster::create_topic`] with the name the application uses: tps
    /// that share its allocation are then found without comparing names.
    pub fn create_topic_named(
        &mut self,
        name: TopicName,
        partitions: u32,
    ) -> Result<(), ModelError> {
        let Err(at) = self.topics.search(name.as_str()) else {
            return Err(ModelError::TopicExists {
                topic: name.as_str().to_owned(),
            });
        };
        if partitions == 0 {
            return Err(ModelError::InvalidPartitionCount {
                topic: name.as_str().to_owned(),
            });
        }
        let logs = (0..partitions).map(|_| PartitionLog::default()).collect();
        self.topics.names.insert(at, name);
        self.topics.logs.insert(at, logs);
        Ok(())
    }

    pub fn partitions(&self, topic: &str) -> Option<u32> {
        let index = self.topics.search(topic).ok()?;
        Some(self.topics.logs[index].len() as u32)
    }

    /// Every topic with its partition count, sorted by name.
    pub fn topics(&self) -> Vec<(TopicName, u32)> {
        self.topics
            .names
            .iter()
            .zip(&self.topics.logs)
            .map(|(name, logs)| (name.clone(), logs.len() as u32))
            .collect()
    }

    // ----- plain produce -----

    /// A plain (non-transactional, idempotent) produce. The record is visible
    /// to `read_committed` consumers once no open transaction precedes it.
    pub fn append(&mut self, tp: &Tp, record: RecordData) -> Result<u64, ModelError> {
        let log = partition_mut(&mut self.topics, tp)?;
        let sequence = next(&mut self.next_sequence);
        Ok(log.append_plain(record, sequence))
    }

    // ----- transactional producers -----

    /// Registers `transactional_id`, or re-registers it: the epoch is bumped,
    /// which fences every older handle, and an open transaction of the old
    /// incarnation is aborted (markers written) — how a restarted instance
    /// clears the hanging transaction of its crashed predecessor.
    ///
    /// `now_ms` is accepted for symmetry with the broker call; initialising
    /// opens no transaction, so no time is recorded.
    pub fn init_producer(&mut self, transactional_id: &str, _now_ms: i64) -> ProducerId {
        if let Some(&id) = self.transactional_ids.get(transactional_id) {
            let state = &mut self.producers[id as usize];
            if let Some(txn) = state.txn.take() {
                finish(
                    &mut self.topics,
                    &mut self.groups,
                    id,
                    txn,
                    ControlKind::Abort,
                );
            }
            state.epoch += 1;
            return ProducerId {
                id,
                epoch: state.epoch,
            };
        }
        let id = self.producers.len() as u64;
        self.producers.push(ProducerState {
            transactional_id: transactional_id.to_owned(),
            epoch: 0,
            txn: None,
        });
        self.transactional_ids
            .insert(transactional_id.to_owned(), id);
        ProducerId { id, epoch: 0 }
    }

    /// The current handle of `transactional_id`, if it was ever initialised.
    pub fn producer(&self, transactional_id: &str) -> Option<ProducerId> {
        let &id = self.transactional_ids.get(transactional_id)?;
        Some(ProducerId {
            id,
            epoch: self.producers[id as usize].epoch,
        })
    }

    /// Opens a transaction at `now_ms`; the timeout counts from here.
    pub fn begin(&mut self, producer: ProducerId, now_ms: i64) -> Result<(), ModelError> {
        let state = producer_mut(&mut self.producers, producer)?;
        if state.txn.is_some() {
            return Err(ModelError::TransactionAlreadyOpen {
                transactional_id: state.transactional_id.clone(),
            });
        }
        state.txn = Some(Transaction {
            started_ms: now_ms,
            ..Transaction::default()
        });
        Ok(())
    }

    /// Writes a record inside the producer's open transaction and returns its
    /// offset. Invisible to `read_committed` until the transaction commits.
    pub fn send(
        &mut self,
        producer: ProducerId,
        tp: &Tp,
        record: RecordData,
    ) -> Result<u64, ModelError> {
        let state = producer_mut(&mut self.producers, producer)?;
        let txn = open_txn(state)?;
        let log = partition_mut(&mut self.topics, tp)?;
        let sequence = next(&mut self.next_sequence);
        match txn.writes.get_mut(tp) {
            Some(offsets) => {
                let offset = log.append_transactional(record, producer.id, sequence, false);
                offsets.push(offset);
                Ok(offset)
            }
            None => {
                let offset = log.append_transactional(record, producer.id, sequence, true);
                txn.writes.insert(tp.clone(), vec![offset]);
                Ok(offset)
            }
        }
    }

    /// Stages `group`'s offsets in the open transaction. They become what
    /// [`Cluster::committed`] returns only if the transaction commits; a later
    /// call in the same transaction overrides an earlier one per tp.
    pub fn send_offsets(
        &mut self,
        producer: ProducerId,
        group: &str,
        offsets: &[(Tp, CommittedOffset)],
    ) -> Result<(), ModelError> {
        self.send_offsets_owned(producer, group, offsets.to_vec())
    }

    /// [`Cluster::send_offsets`] taking the offsets by value, which spares
    /// copying them into the transaction.
    pub fn send_offsets_owned(
        &mut self,
        producer: ProducerId,
        group: &str,
        offsets: Vec<(Tp, CommittedOffset)>,
    ) -> Result<(), ModelError> {
        let state = producer_mut(&mut self.producers, producer)?;
        let txn = open_txn(state)?;
        // All or nothing: check every tp before staging any.
        for (tp, offset) in &offsets {
            partition(&self.topics, tp)?;
            // The broker's `offset.metadata.max.bytes` (4096 by default).
            if offset.metadata.len() > OFFSET_METADATA_BYTES_MAX {
                return Err(ModelError::MetadataTooLarge {
                    tp: tp.clone(),
                    bytes: offset.metadata.len(),
                    max: OFFSET_METADATA_BYTES_MAX,
                });
            }
        }
        let staged = match txn.offsets.get_mut(group) {
            Some(staged) => staged,
            None => txn.offsets.entry(group.to_owned()).or_default(),
        };
        staged.extend(offsets);
        Ok(())
    }

    /// Commits: a Commit marker on every partition the transaction wrote to
    /// (in tp order), then the staged group offsets are applied.
    pub fn commit(&mut self, producer: ProducerId) -> Result<(), ModelError> {
        self.end(producer, ControlKind::Commit)
    }

    /// Aborts: an Abort marker on every partition the transaction wrote to;
    /// staged group offsets are dropped.
    pub fn abort(&mut self, producer: ProducerId) -> Result<(), ModelError> {
        self.end(producer, ControlKind::Abort)
    }

    /// The transaction coordinator's timeout sweep: aborts every transaction
    /// open for longer than the timeout at `now_ms` and bumps its producer's
    /// epoch, so the producer's next call fails with [`ModelError::Fenced`].
    /// Returns the transactional ids aborted, sorted.
    pub fn expire_transactions(&mut self, now_ms: i64) -> Vec<String> {
        let mut expired = Vec::new();
        for (transactional_id, &id) in &self.transactional_ids {
            let state = &mut self.producers[id as usize];
            let overdue = state.txn.as_ref().is_some_and(|txn| {
                now_ms.saturating_sub(txn.started_ms) > self.transaction_timeout_ms
            });
            if !overdue {
                continue;
            }
            if let Some(txn) = state.txn.take() {
                finish(
                    &mut self.topics,
                    &mut self.groups,
                    id,
                    txn,
                    ControlKind::Abort,
                );
            }
            state.epoch += 1;
            expired.push(transactional_id.clone());
        }
        expired
    }

    /// Transactional ids with an open transaction, sorted.
    pub fn open_transactions(&self) -> Vec<String> {
        self.transactional_ids
            .iter()
            .filter(|(_, &id)| self.producers[id as usize].txn.is_some())
            .map(|(transactional_id, _)| transactional_id.clone())
            .collect()
    }

    // ----- consuming -----

    /// Reads at most `max_records` visible records of `tp` from `from_offset`.
    /// `from_offset` may equal the high watermark (an empty fetch); beyond it
    /// is [`ModelError::OffsetOutOfRange`].
    pub fn fetch(
        &self,
        tp: &Tp,
        from_offset: u64,
        max_records: usize,
        isolation: Isolation,
    ) -> Result<Fetch, ModelError> {
        let log = partition(&self.topics, tp)?;
        let high_watermark = log.high_watermark();
        if from_offset > high_watermark {
            return Err(ModelError::OffsetOutOfRange {
                tp: tp.clone(),
                offset: from_offset,
                high_watermark,
            });
        }
        Ok(log.fetch(from_offset, max_records, isolation))
    }

    /// `group`'s committed offset on `tp`, as written by committed
    /// transactions only.
    pub fn committed(&self, group: &str, tp: &Tp) -> Option<CommittedOffset> {
        self.groups.get(group)?.get(tp).cloned()
    }

    /// The log end offset of `tp`.
    pub fn high_watermark(&self, tp: &Tp) -> Result<u64, ModelError> {
        Ok(partition(&self.topics, tp)?.high_watermark())
    }

    /// The first offset of the earliest open transaction on `tp`, or the high
    /// watermark if none is open.
    pub fn last_stable_offset(&self, tp: &Tp) -> Result<u64, ModelError> {
        Ok(partition(&self.topics, tp)?.last_stable_offset())
    }

    /// The raw log of `tp`, markers and aborted records included.
    pub fn entries(&self, tp: &Tp) -> Result<&[Entry], ModelError> {
        Ok(partition(&self.topics, tp)?.entries())
    }

    /// A read-only view of `tp`'s log, to walk it without looking the
    /// partition up again for every offset.
    pub fn log(&self, tp: &Tp) -> Result<LogView<'_>, ModelError> {
        Ok(LogView::new(partition(&self.topics, tp)?))
    }

    /// Whether the entry at `offset` of `tp` is committed, open, aborted or a
    /// marker; `None` if there is no such entry.
    pub fn entry_status(&self, tp: &Tp, offset: u64) -> Option<EntryStatus> {
        partition(&self.topics, tp).ok()?.status(offset)
    }

    /// Kafka's aborted-transaction index of `tp`, in marker order.
    pub fn aborted_transactions(&self, tp: &Tp) -> Result<&[AbortedTxn], ModelError> {
        Ok(partition(&self.topics, tp)?.aborted())
    }

    /// The cluster-wide sequence number stamped on the data entry at `offset`
    /// of `tp` when it was appended; `None` for markers and missing entries.
    /// Sorting records of several partitions by it gives the order in which
    /// they were written.
    pub fn append_sequence(&self, tp: &Tp, offset: u64) -> Option<u64> {
        partition(&self.topics, tp).ok()?.sequence(offset)
    }

    fn end(&mut self, producer: ProducerId, kind: ControlKind) -> Result<(), ModelError> {
        let state = producer_mut(&mut self.producers, producer)?;
        let txn = state
            .txn
            .take()
            .ok_or_else(|| ModelError::NoOpenTransaction {
                transactional_id: state.transactional_id.clone(),
            })?;
        finish(&mut self.topics, &mut self.groups, producer.id, txn, kind);
        Ok(())
    }
}

/// Writes the markers of a transaction that ends with `kind`, settles its
/// records and, on commit, applies its group offsets. A free function over the
/// fields so callers can hold a borrow of the producer table meanwhile.
fn finish(
    topics: &mut Topics,
    groups: &mut GroupOffsets,
    producer: u64,
    txn: Transaction,
    kind: ControlKind,
) {
    for (tp, offsets) in &txn.writes {
        // Topics are never deleted, so a partition written to still exists.
        let log = partition_mut(topics, tp).expect("a written partition exists");
        log.end_transaction(producer, kind, offsets);
    }
    if kind == ControlKind::Commit {
        for (group, offsets) in txn.offsets {
            groups.entry(group).or_default().extend(offsets);
        }
    }
}

fn next(counter: &mut u64) -> u64 {
    let value = *counter;
    *counter += 1;
    value
}

fn producer_mut(
    producers: &mut [ProducerState],
    producer: ProducerId,
) -> Result<&mut ProducerState, ModelError> {
    let state = usize::try_from(producer.id)
        .ok()
        .and_then(|index| producers.get_mut(index))
        .ok_or(ModelError::UnknownProducer)?;
    if state.epoch != producer.epoch {
        return Err(ModelError::Fenced {
            transactional_id: state.transactional_id.clone(),
            epoch: producer.epoch,
            current_epoch: state.epoch,
        });
    }
    Ok(state)
}

fn open_txn(state: &mut ProducerState) -> Result<&mut Transaction, ModelError> {
    match state.txn {
        Some(ref mut txn) => Ok(txn),
        None => Err(ModelError::NoOpenTransaction {
            transactional_id: state.transactional_id.clone(),
        }),
    }
}

/// The topics, sorted by name, with their partitions' logs.
#[derive(Clone, Debug, Default)]
struct Topics {
    names: Vec<TopicName>,
    logs: Vec<Vec<PartitionLog>>,
}

impl Topics {
    /// Where `name` is, or where it would go.
    fn search(&self, name: &str) -> Result<usize, usize> {
        self.names
            .binary_search_by(|known| known.as_str().cmp(name))
    }

    /// The topic's index. The tps drivers hand in mostly share their
    /// topic's allocation with the name the topic was created under, so the
    /// pointers are tried first and names compared only when none matches.
    fn find(&self, topic: &TopicName) -> Option<usize> {
        self.names
            .iter()
            .position(|known| known.ptr_eq(topic))
            .or_else(|| self.search(topic.as_str()).ok())
    }
}

fn partition<'a>(topics: &'a Topics, tp: &Tp) -> Result<&'a PartitionLog, ModelError> {
    let logs = topics
        .find(&tp.topic)
        .map(|index| &topics.logs[index])
        .ok_or_else(|| ModelError::UnknownTopic {
            topic: tp.topic.as_str().to_owned(),
        })?;
    logs.get(tp.partition as usize)
        .ok_or_else(|| ModelError::UnknownPartition {
            tp: tp.clone(),
            partitions: logs.len() as u32,
        })
}

fn partition_mut<'a>(topics: &'a mut Topics, tp: &Tp) -> Result<&'a mut PartitionLog, ModelError> {
    let logs = match topics.find(&tp.topic) {
        Some(index) => &mut topics.logs[index],
        None => {
            return Err(ModelError::UnknownTopic {
                topic: tp.topic.as_str().to_owned(),
            })
        }
    };
    let partitions = logs.len() as u32;
    logs.get_mut(tp.partition as usize)
        .ok_or_else(|| ModelError::UnknownPartition {
            tp: tp.clone(),
            partitions,
        })
}

/// What the core's assembly check (C3) reads: the model's topics.
impl parsley::TopicMetadata for Cluster {
    fn partitions(&self, topic: &str) -> Option<u32> {
        Cluster::partitions(self, topic)
    }
}
