//! The cluster: topics of partition logs, transactional producers with their
//! transaction coordinator, and consumer-group offsets.
//!
//! Internally a partition is named by a [`LogId`] (its topic's creation slot
//! and the partition number) once it has been looked up, so transactions and
//! group offsets keep small numbers rather than tps and group ids, and the
//! hot paths (send, commit) compare no strings.

use std::collections::BTreeMap;

use parsley::{ConsumedRecord, RecordData, TopicName, Tp};

use super::error::ModelError;
use super::log::{
    AbortedTxn, ControlKind, Entry, EntryStatus, Fetch, FetchEnd, Isolation, LogView, PartitionLog,
};

/// Kafka's default `transaction.timeout.ms`.
pub const DEFAULT_TRANSACTION_TIMEOUT_MS: i64 = 60_000;

/// A transactional producer's handle: its producer id and the epoch it was
/// given. A handle whose epoch is no longer the current one is fenced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProducerId {
    /// The producer id.
    pub id: u64,
    /// The epoch this handle was given.
    pub epoch: u32,
}

/// A consumer group's committed position on one tp, with its metadata string:
/// the core's own type, so drivers hand it to a task as they read it.
pub use parsley::CommittedOffset;

/// Kafka's default `offset.metadata.max.bytes`: the broker refuses longer
/// offset metadata, and so does the model.
pub use parsley::OFFSET_METADATA_BYTES_MAX;

/// Where one partition's log is in a [`Cluster`] ([`Cluster::log_id`]):
/// a caller that reaches the same logs over and over (a consumer's
/// partitions) looks each up once. Topics are never removed or reordered, so
/// an id stays valid for good, in the cluster that gave it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogId {
    topic: u32,
    partition: u32,
}

/// The coordinator's view of one transactional id.
#[derive(Clone, Debug)]
struct ProducerState {
    transactional_id: String,
    epoch: u32,
    /// Whether a transaction is open, its state being `txn`.
    in_transaction: bool,
    /// A transaction whose end the coordinator accepted but whose markers
    /// are not written yet (its state still in `txn`): until they are, its
    /// records stay undecided, the last stable offset stays pinned and its
    /// group offsets are not applied.
    ending: Option<ControlKind>,
    /// The open transaction; between transactions its emptied buffers, kept
    /// so the next transaction allocates nothing.
    txn: Transaction,
}

#[derive(Clone, Debug, Default)]
struct Transaction {
    started_ms: i64,
    /// Every record written, with its partition, in write order (so
    /// ascending per partition). A partition's first one is where the
    /// transaction holds its last stable offset.
    writes: Vec<(LogId, u64)>,
    /// Group offsets sent to the transaction, in the order sent, applied only
    /// on commit: a later one overrides an earlier one for its group and tp.
    offsets: Vec<StagedOffset>,
}

#[derive(Clone, Debug)]
struct StagedOffset {
    group: usize,
    log: LogId,
    offset: CommittedOffset,
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
    groups: Groups,
    next_sequence: u64,
    transaction_timeout_ms: i64,
    /// No open transaction started before this (`None`: none is open), so
    /// the timeout sweep looks at the producers only when one may be overdue.
    /// It may be older than the oldest open transaction, never newer.
    oldest_open_ms: Option<i64>,
}

impl Default for Cluster {
    fn default() -> Self {
        Cluster::new()
    }
}

impl Cluster {
    /// Hashes everything the cluster holds that a later call can observe:
    /// every log's entries (records and markers) and last stable offset,
    /// every producer's epoch and transaction, every committed offset. Two
    /// clusters with the same digest answer every request alike (up to
    /// hash collisions); the bounded exhaustive mode keys its states on it.
    pub(crate) fn digest(&self, hasher: &mut impl std::hash::Hasher) {
        use std::hash::Hash;
        for (slot, logs) in self.topics.logs.iter().enumerate() {
            self.topics.names[slot].as_str().hash(hasher);
            for log in logs {
                log.last_stable_offset().hash(hasher);
                for entry in log.entries() {
                    match entry {
                        Entry::Data {
                            record,
                            producer,
                            transactional,
                        } => {
                            0u8.hash(hasher);
                            record.key.hash(hasher);
                            record.value.hash(hasher);
                            record.timestamp.hash(hasher);
                            for header in &record.headers {
                                header.name.hash(hasher);
                                header.value.hash(hasher);
                            }
                            producer.hash(hasher);
                            transactional.hash(hasher);
                        }
                        Entry::Control { kind, producer } => {
                            1u8.hash(hasher);
                            kind.hash(hasher);
                            producer.hash(hasher);
                        }
                    }
                }
            }
        }
        for producer in &self.producers {
            producer.transactional_id.hash(hasher);
            producer.epoch.hash(hasher);
            producer.in_transaction.hash(hasher);
            producer.ending.hash(hasher);
            if producer.in_transaction || producer.ending.is_some() {
                producer.txn.started_ms.hash(hasher);
                for (log, offset) in &producer.txn.writes {
                    (log.topic, log.partition, offset).hash(hasher);
                }
                for staged in &producer.txn.offsets {
                    (staged.group, staged.log.topic, staged.log.partition).hash(hasher);
                    staged.offset.hash(hasher);
                }
            }
        }
        for (group, number) in &self.groups.ids {
            group.hash(hasher);
            self.groups.committed[*number].hash(hasher);
        }
    }

    /// An empty cluster.
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
            groups: Groups::default(),
            next_sequence: 0,
            transaction_timeout_ms: timeout_ms,
            oldest_open_ms: None,
        }
    }

    /// When the oldest open transaction passes the timeout, if one is open
    /// (from then on [`Cluster::expire_transactions`] aborts it).
    pub fn next_transaction_expiry(&self) -> Option<i64> {
        self.oldest_open_ms
            .map(|oldest| oldest.saturating_add(self.transaction_timeout_ms))
    }

    /// The broker's transaction timeout: an open transaction older than this is aborted by the coordinator.
    pub fn transaction_timeout_ms(&self) -> i64 {
        self.transaction_timeout_ms
    }

    // ----- topics -----

    /// Creates a topic of `partitions` partitions.
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
        self.topics.insert(at, name, partitions);
        Ok(())
    }

    /// The partition count of `topic`, if it exists.
    pub fn partitions(&self, topic: &str) -> Option<u32> {
        let at = self.topics.search(topic).ok()?;
        Some(self.topics.logs[self.topics.by_name[at] as usize].len() as u32)
    }

    /// Every topic with its partition count, sorted by name.
    pub fn topics(&self) -> Vec<(TopicName, u32)> {
        self.topics
            .by_name
            .iter()
            .map(|&slot| {
                let slot = slot as usize;
                let partitions = self.topics.logs[slot].len() as u32;
                (self.topics.names[slot].clone(), partitions)
            })
            .collect()
    }

    // ----- plain produce -----

    /// A plain (non-transactional, idempotent) produce. The record is visible
    /// to `read_committed` consumers once no open transaction precedes it.
    pub fn append(&mut self, tp: &Tp, record: RecordData) -> Result<u64, ModelError> {
        let log = self.topics.log_id(tp)?;
        Ok(self.append_at(log, record))
    }

    /// [`Cluster::append`] to the log at `log`.
    pub fn append_at(&mut self, log: LogId, record: RecordData) -> u64 {
        let sequence = next(&mut self.next_sequence);
        self.topics.log_mut(log).append_plain(record, sequence)
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
            // The coordinator completes an accepted end before it fences.
            if let Some(kind) = state.ending.take() {
                let sequence = next(&mut self.next_sequence);
                finish(
                    &mut self.topics,
                    &mut self.groups,
                    id,
                    state,
                    kind,
                    sequence,
                );
            }
            let sequence = next(&mut self.next_sequence);
            fence(&mut self.topics, &mut self.groups, id, state, sequence);
            return ProducerId {
                id,
                epoch: state.epoch,
            };
        }
        let id = self.producers.len() as u64;
        self.producers.push(ProducerState {
            transactional_id: transactional_id.to_owned(),
            epoch: 0,
            in_transaction: false,
            ending: None,
            txn: Transaction::default(),
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
        if state.in_transaction {
            return Err(ModelError::TransactionAlreadyOpen {
                transactional_id: state.transactional_id.clone(),
            });
        }
        // The previous transaction's markers go out first: a broker answers
        // the next transaction's first write with CONCURRENT_TRANSACTIONS
        // until they are written, and the client retries until then.
        if let Some(kind) = state.ending.take() {
            let sequence = next(&mut self.next_sequence);
            finish(
                &mut self.topics,
                &mut self.groups,
                producer.id,
                state,
                kind,
                sequence,
            );
        }
        state.in_transaction = true;
        state.txn.started_ms = now_ms;
        self.oldest_open_ms = Some(self.oldest_open_ms.unwrap_or(now_ms).min(now_ms));
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
        let log_id = self.topics.log_id(tp)?;
        let sequence = next(&mut self.next_sequence);
        let offset =
            self.topics
                .log_mut(log_id)
                .append_transactional(record, producer.id, sequence);
        txn.writes.push((log_id, offset));
        Ok(offset)
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

    /// [`Cluster::send_offsets`] taking the offsets by value (a list, or
    /// an iterator that makes them), which spares copying them into the
    /// transaction.
    pub fn send_offsets_owned(
        &mut self,
        producer: ProducerId,
        group: &str,
        offsets: impl IntoIterator<Item = (Tp, CommittedOffset)>,
    ) -> Result<(), ModelError> {
        let offsets = offsets.into_iter();
        let state = producer_mut(&mut self.producers, producer)?;
        let txn = open_txn(state)?;
        // Interning a group that then stages nothing is harmless: it has no
        // committed offsets either way.
        let group = self.groups.intern(group);
        let staged_before = txn.offsets.len();
        txn.offsets.reserve(offsets.size_hint().0);
        let staged = offsets.into_iter().try_for_each(|(tp, offset)| {
            let log = self.topics.log_id(&tp)?;
            // The broker's `offset.metadata.max.bytes` (4096 by default).
            if offset.metadata.len() > OFFSET_METADATA_BYTES_MAX {
                return Err(ModelError::MetadataTooLarge {
                    bytes: offset.metadata.len(),
                    tp,
                    max: OFFSET_METADATA_BYTES_MAX,
                });
            }
            txn.offsets.push(StagedOffset { group, log, offset });
            Ok(())
        });
        // All or nothing: a refused tp unstages those before it.
        if staged.is_err() {
            txn.offsets.truncate(staged_before);
        }
        staged
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

    /// Commits, as [`Cluster::commit`] does for the producer, but leaves the
    /// markers unwritten, as a broker does between answering `EndTxn` and
    /// writing the markers (measured at 5–65 ms): the commit is decided and
    /// cannot be undone, yet `read_committed` consumers do not see its
    /// records, the last stable offset stays where the transaction began,
    /// and its group offsets are not applied until
    /// [`Cluster::write_markers`] (or the producer's next `begin`, or its
    /// fencing, which complete it first).
    pub fn commit_later(&mut self, producer: ProducerId) -> Result<(), ModelError> {
        self.end_later(producer, ControlKind::Commit)
    }

    /// Aborts with the markers left unwritten (see [`Cluster::commit_later`]).
    pub fn abort_later(&mut self, producer: ProducerId) -> Result<(), ModelError> {
        self.end_later(producer, ControlKind::Abort)
    }

    /// Writes the markers of producer `id`'s accepted but unwritten end, if
    /// it has one (a later `begin` or a fencing may have written them
    /// already). Returns whether it wrote any.
    pub fn write_markers(&mut self, id: u64) -> bool {
        let Some(state) = usize::try_from(id)
            .ok()
            .and_then(|index| self.producers.get_mut(index))
        else {
            return false;
        };
        let Some(kind) = state.ending.take() else {
            return false;
        };
        let sequence = next(&mut self.next_sequence);
        finish(
            &mut self.topics,
            &mut self.groups,
            id,
            state,
            kind,
            sequence,
        );
        true
    }

    /// The ids of producers whose accepted end still has its markers
    /// unwritten, ascending.
    pub fn unwritten_markers(&self) -> Vec<u64> {
        (0..self.producers.len() as u64)
            .filter(|&id| self.producers[id as usize].ending.is_some())
            .collect()
    }

    fn end_later(&mut self, producer: ProducerId, kind: ControlKind) -> Result<(), ModelError> {
        let state = producer_mut(&mut self.producers, producer)?;
        if !state.in_transaction {
            return Err(ModelError::NoOpenTransaction {
                transactional_id: state.transactional_id.clone(),
            });
        }
        state.in_transaction = false;
        state.ending = Some(kind);
        Ok(())
    }

    /// The transaction coordinator's timeout sweep: aborts every transaction
    /// open for longer than the timeout at `now_ms` and bumps its producer's
    /// epoch, so the producer's next call fails with [`ModelError::Fenced`].
    /// Returns the transactional ids aborted, sorted.
    pub fn expire_transactions(&mut self, now_ms: i64) -> Vec<String> {
        let mut expired = Vec::new();
        let timeout_ms = self.transaction_timeout_ms;
        // Every open transaction started at or after `oldest_open_ms`, so
        // none is overdue unless a transaction started then would be.
        match self.oldest_open_ms {
            Some(oldest) if now_ms.saturating_sub(oldest) > timeout_ms => {}
            _ => return expired,
        }
        let mut oldest_left: Option<i64> = None;
        for (transactional_id, &id) in &self.transactional_ids {
            let state = &mut self.producers[id as usize];
            if !state.in_transaction {
                continue;
            }
            let started_ms = state.txn.started_ms;
            if now_ms.saturating_sub(started_ms) <= timeout_ms {
                oldest_left = Some(oldest_left.unwrap_or(started_ms).min(started_ms));
                continue;
            }
            let sequence = next(&mut self.next_sequence);
            fence(&mut self.topics, &mut self.groups, id, state, sequence);
            expired.push(transactional_id.clone());
        }
        self.oldest_open_ms = oldest_left;
        expired
    }

    /// Transactional ids with an open transaction, sorted.
    pub fn open_transactions(&self) -> Vec<String> {
        self.transactional_ids
            .iter()
            .filter(|(_, &id)| self.producers[id as usize].in_transaction)
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
        let mut records = Vec::new();
        let end = self.fetch_into(tp, from_offset, max_records, isolation, &mut records)?;
        Ok(Fetch {
            records,
            next_offset: end.next_offset,
            high_watermark: end.high_watermark,
            last_stable_offset: end.last_stable_offset,
        })
    }

    /// [`Cluster::fetch`], appending the records to `records` (a list the
    /// caller keeps from one fetch to the next).
    pub fn fetch_into(
        &self,
        tp: &Tp,
        from_offset: u64,
        max_records: usize,
        isolation: Isolation,
        records: &mut Vec<ConsumedRecord>,
    ) -> Result<FetchEnd, ModelError> {
        let log = self.topics.log_id(tp)?;
        self.fetch_into_at(log, from_offset, max_records, isolation, records)
    }

    /// [`Cluster::fetch_into`] from the log at `log`.
    pub fn fetch_into_at(
        &self,
        log: LogId,
        from_offset: u64,
        max_records: usize,
        isolation: Isolation,
        records: &mut Vec<ConsumedRecord>,
    ) -> Result<FetchEnd, ModelError> {
        let partition = self.topics.log(log);
        let high_watermark = partition.high_watermark();
        if from_offset > high_watermark {
            return Err(ModelError::OffsetOutOfRange {
                tp: self.topics.tp(log),
                offset: from_offset,
                high_watermark,
            });
        }
        Ok(partition.fetch_into(from_offset, max_records, isolation, records))
    }

    /// `group`'s committed offset on `tp`, as written by committed
    /// transactions only: what a `read_uncommitted` consumer's lookup
    /// answers, at once.
    pub fn committed(&self, group: &str, tp: &Tp) -> Option<CommittedOffset> {
        let group = self.groups.find(group)?;
        let log = self.topics.find_log(tp)?;
        self.groups.get(group, log).cloned()
    }

    /// Every group with a committed offset, in name order, with the tps it
    /// holds offsets on (committed transactions only): what reading
    /// `__consumer_offsets` would tell of who committed what.
    pub fn group_positions(&self) -> Vec<(&str, Vec<Tp>)> {
        self.groups
            .ids
            .iter()
            .map(|(group, number)| {
                let tps = self.groups.committed[*number]
                    .iter()
                    .enumerate()
                    .flat_map(|(topic, partitions)| {
                        partitions
                            .iter()
                            .enumerate()
                            .filter(|(_, offset)| offset.is_some())
                            .map(move |(partition, _)| {
                                Tp::new(self.topics.names[topic].clone(), partition as u32)
                            })
                    })
                    .collect();
                (group.as_str(), tps)
            })
            .filter(|(_, tps): &(&str, Vec<Tp>)| !tps.is_empty())
            .collect()
    }

    /// `group`'s committed offset on `tp` as a `read_committed` consumer
    /// asks for it (KIP-447's stable offsets): while a transaction that sent
    /// offsets of `group` on `tp` is open, or ended with its markers
    /// unwritten, the broker answers `UNSTABLE_OFFSET_COMMIT` and the
    /// consumer waits; the model answers [`ModelError::UnstableOffset`]
    /// naming that transaction, and the caller retries later.
    pub fn committed_stable(
        &self,
        group: &str,
        tp: &Tp,
    ) -> Result<Option<CommittedOffset>, ModelError> {
        let Some(group_id) = self.groups.find(group) else {
            return Ok(None);
        };
        let Some(log) = self.topics.find_log(tp) else {
            return Ok(None);
        };
        let pending = self.producers.iter().find(|state| {
            (state.in_transaction || state.ending.is_some())
                && state
                    .txn
                    .offsets
                    .iter()
                    .any(|staged| staged.group == group_id && staged.log == log)
        });
        if let Some(state) = pending {
            return Err(ModelError::UnstableOffset {
                group: group.to_string(),
                tp: tp.clone(),
                transactional_id: state.transactional_id.clone(),
            });
        }
        Ok(self.groups.get(group_id, log).cloned())
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
    pub fn entries(&self, tp: &Tp) -> Result<Vec<Entry<'_>>, ModelError> {
        Ok(partition(&self.topics, tp)?.entries())
    }

    /// A read-only view of `tp`'s log, to walk it without looking the
    /// partition up again for every offset.
    pub fn log(&self, tp: &Tp) -> Result<LogView<'_>, ModelError> {
        Ok(LogView::new(partition(&self.topics, tp)?))
    }

    /// Where `tp`'s log is, for [`Cluster::log_at`] and
    /// [`Cluster::fetch_into_at`].
    pub fn log_id(&self, tp: &Tp) -> Result<LogId, ModelError> {
        self.topics.log_id(tp)
    }

    /// [`Cluster::log`] of the log at `log`.
    ///
    /// # Panics
    ///
    /// If `log` was given by another cluster that has more topics.
    pub fn log_at(&self, log: LogId) -> LogView<'_> {
        LogView::new(self.topics.log(log))
    }

    /// Whether the entry at `offset` of `tp` is committed, open, aborted or a
    /// marker; `None` if there is no such entry.
    pub fn entry_status(&self, tp: &Tp, offset: u64) -> Option<EntryStatus> {
        let log = self.topics.find_log(tp)?;
        self.topics.log(log).status(offset)
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
        let log = self.topics.find_log(tp)?;
        self.topics.log(log).sequence(offset)
    }

    fn end(&mut self, producer: ProducerId, kind: ControlKind) -> Result<(), ModelError> {
        let state = producer_mut(&mut self.producers, producer)?;
        if !state.in_transaction {
            return Err(ModelError::NoOpenTransaction {
                transactional_id: state.transactional_id.clone(),
            });
        }
        let sequence = next(&mut self.next_sequence);
        finish(
            &mut self.topics,
            &mut self.groups,
            producer.id,
            state,
            kind,
            sequence,
        );
        Ok(())
    }
}

/// Bumps `state`'s epoch, fencing its current holder, and aborts its open
/// transaction if it has one: what the coordinator does when the id is
/// initialised again or its transaction times out.
fn fence(
    topics: &mut Topics,
    groups: &mut Groups,
    producer: u64,
    state: &mut ProducerState,
    sequence: u64,
) {
    if state.in_transaction {
        finish(
            topics,
            groups,
            producer,
            state,
            ControlKind::Abort,
            sequence,
        );
    }
    state.epoch += 1;
}

/// Ends `state`'s open transaction with `kind`: writes the markers, settles
/// its records and, on commit, applies its group offsets; leaves the
/// transaction's buffers empty for the producer's next one. A free function
/// over the fields so callers can hold a borrow of the producer table
/// meanwhile.
fn finish(
    topics: &mut Topics,
    groups: &mut Groups,
    producer: u64,
    state: &mut ProducerState,
    kind: ControlKind,
    sequence: u64,
) {
    state.in_transaction = false;
    let txn = &mut state.txn;
    // Markers go out in tp order; the stable sort keeps each partition's
    // offsets ascending.
    txn.writes
        .sort_by_key(|&(log, _)| (topics.rank[log.topic as usize], log.partition));
    for partition_writes in txn.writes.chunk_by(|(a, _), (b, _)| a == b) {
        let log = partition_writes[0].0;
        let offsets = partition_writes.iter().map(|&(_, offset)| offset);
        topics
            .log_mut(log)
            .end_transaction(producer, kind, offsets, sequence);
    }
    txn.writes.clear();
    match kind {
        ControlKind::Commit => {
            for staged in txn.offsets.drain(..) {
                groups.set(staged.group, staged.log, staged.offset);
            }
        }
        ControlKind::Abort => txn.offsets.clear(),
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
    // Not `ok_or`: that would build (and drop) the error on every call.
    let Some(state) = usize::try_from(producer.id)
        .ok()
        .and_then(|index| producers.get_mut(index))
    else {
        return Err(ModelError::UnknownProducer);
    };
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
    match state.in_transaction {
        true => Ok(&mut state.txn),
        false => Err(ModelError::NoOpenTransaction {
            transactional_id: state.transactional_id.clone(),
        }),
    }
}

/// The topics with their partitions' logs. A topic keeps the slot it was
/// created in, which is what a [`LogId`] names; name order is kept aside.
#[derive(Clone, Debug, Default)]
struct Topics {
    /// By slot: the topics' names.
    names: Vec<TopicName>,
    /// By slot: the topics' partition logs.
    logs: Vec<Vec<PartitionLog>>,
    /// The slots, sorted by name.
    by_name: Vec<u32>,
    /// By slot: the topic's position in name order, to order partitions as
    /// their tps are ordered.
    rank: Vec<u32>,
}

impl Topics {
    /// Where `name` is in name order, or where it would go.
    fn search(&self, name: &str) -> Result<usize, usize> {
        self.by_name
            .binary_search_by(|&slot| self.names[slot as usize].as_str().cmp(name))
    }

    /// Adds a topic at position `at` of name order.
    fn insert(&mut self, at: usize, name: TopicName, partitions: u32) {
        let slot = self.names.len() as u32;
        self.names.push(name);
        self.logs
            .push((0..partitions).map(|_| PartitionLog::default()).collect());
        self.by_name.insert(at, slot);
        self.rank.push(0);
        for (position, &slot) in self.by_name.iter().enumerate() {
            self.rank[slot as usize] = position as u32;
        }
    }

    /// The topic's slot. The tps drivers hand in mostly share their topic's
    /// allocation with the name the topic was created under, so the pointers
    /// are tried first and names compared only when none matches.
    fn find(&self, topic: &TopicName) -> Option<usize> {
        self.names
            .iter()
            .position(|known| known.ptr_eq(topic))
            .or_else(|| {
                let at = self.search(topic.as_str()).ok()?;
                Some(self.by_name[at] as usize)
            })
    }

    /// The id of `tp`'s log, if it exists.
    fn find_log(&self, tp: &Tp) -> Option<LogId> {
        let slot = self.find(&tp.topic)?;
        (tp.partition < self.logs[slot].len() as u32).then_some(LogId {
            topic: slot as u32,
            partition: tp.partition,
        })
    }

    /// The id of `tp`'s log, or why there is none.
    fn log_id(&self, tp: &Tp) -> Result<LogId, ModelError> {
        let Some(slot) = self.find(&tp.topic) else {
            return Err(ModelError::UnknownTopic {
                topic: tp.topic.as_str().to_owned(),
            });
        };
        let partitions = self.logs[slot].len() as u32;
        if tp.partition >= partitions {
            return Err(ModelError::UnknownPartition {
                tp: tp.clone(),
                partitions,
            });
        }
        Ok(LogId {
            topic: slot as u32,
            partition: tp.partition,
        })
    }

    /// The tp of the log at `id`.
    fn tp(&self, id: LogId) -> Tp {
        Tp::new(self.names[id.topic as usize].clone(), id.partition)
    }

    fn log(&self, id: LogId) -> &PartitionLog {
        &self.logs[id.topic as usize][id.partition as usize]
    }

    fn log_mut(&mut self, id: LogId) -> &mut PartitionLog {
        &mut self.logs[id.topic as usize][id.partition as usize]
    }
}

fn partition<'a>(topics: &'a Topics, tp: &Tp) -> Result<&'a PartitionLog, ModelError> {
    Ok(topics.log(topics.log_id(tp)?))
}

/// Committed consumer-group offsets. A group id is interned to a number the
/// first time offsets are sent for it, so that staging and applying offsets
/// compare no strings.
#[derive(Clone, Debug, Default)]
struct Groups {
    /// The group ids, sorted, each with its number.
    ids: Vec<(String, usize)>,
    /// By group number, topic slot, then partition: the committed offset.
    committed: Vec<Vec<Vec<Option<CommittedOffset>>>>,
}

impl Groups {
    fn search(&self, group: &str) -> Result<usize, usize> {
        self.ids
            .binary_search_by(|(known, _)| known.as_str().cmp(group))
    }

    fn find(&self, group: &str) -> Option<usize> {
        let at = self.search(group).ok()?;
        Some(self.ids[at].1)
    }

    fn intern(&mut self, group: &str) -> usize {
        match self.search(group) {
            Ok(at) => self.ids[at].1,
            Err(at) => {
                let number = self.committed.len();
                self.committed.push(Vec::new());
                self.ids.insert(at, (group.to_owned(), number));
                number
            }
        }
    }

    fn get(&self, group: usize, log: LogId) -> Option<&CommittedOffset> {
        self.committed[group]
            .get(log.topic as usize)?
            .get(log.partition as usize)?
            .as_ref()
    }

    fn set(&mut self, group: usize, log: LogId, offset: CommittedOffset) {
        let topics = &mut self.committed[group];
        let (topic, partition) = (log.topic as usize, log.partition as usize);
        if topics.len() <= topic {
            topics.resize_with(topic + 1, Vec::new);
        }
        let partitions = &mut topics[topic];
        if partitions.len() <= partition {
            partitions.resize_with(partition + 1, || None);
        }
        partitions[partition] = Some(offset);
    }
}

/// What the core's assembly check (C3) reads: the model's topics.
impl parsley::TopicMetadata for Cluster {
    fn partitions(&self, topic: &str) -> Option<u32> {
        Cluster::partitions(self, topic)
    }
}
