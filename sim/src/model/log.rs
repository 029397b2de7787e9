//! One partition's log: the entries at their offsets, plus the bookkeeping that
//! makes `read_committed` fetches cheap.
//!
//! The log keeps, per offset, a small entry (a data record's index, or a
//! marker), its records in fixed-size chunks beside them (no record is
//! allocated on its own, and none moves as the log grows), and a small
//! status word (committed, open, aborted, control) and the global append
//! sequence. A transaction's records are written as *open*; when the
//! transaction ends, its records on this partition are flipped to committed or
//! aborted (the transaction remembers which offsets it wrote, so this costs one
//! step per record, once). A fetch therefore decides visibility offset by
//! offset without consulting any transaction and never looks outside
//! `[from_offset, upper)`, where `upper` is the last stable offset or the high
//! watermark. The log also keeps Kafka's aborted-transaction index (producer,
//! first offset, marker offset) for checkers.

use parsley::{ConsumedRecord, RecordData};

/// Which records a fetch may return, as Kafka's `isolation.level`: the
/// core's, shared with the live client.
pub use parsley::Isolation;

/// The outcome a transaction control marker records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ControlKind {
    /// The transaction committed.
    Commit,
    /// The transaction aborted.
    Abort,
}

/// What a log stores at one offset, borrowed from the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry<'a> {
    /// A record as produced. `producer` is the producer id of a transactional
    /// producer, `None` for a plain append.
    Data {
        /// The record.
        record: &'a RecordData,
        /// The producer id, `None` for a plain append.
        producer: Option<u64>,
        /// Whether it was written inside a transaction.
        transactional: bool,
    },
    /// A transaction marker: the producer's transaction ended here, with this
    /// outcome, for every record it wrote to this partition before it.
    Control {
        /// Commit or abort.
        kind: ControlKind,
        /// The producer id, `None` for a plain append.
        producer: u64,
    },
}

impl<'a> Entry<'a> {
    /// The record, if this is a data entry.
    pub fn record(&self) -> Option<&'a RecordData> {
        match self {
            Entry::Data { record, .. } => Some(record),
            Entry::Control { .. } => None,
        }
    }

    /// Whether this is a transaction marker.
    pub fn is_control(&self) -> bool {
        matches!(self, Entry::Control { .. })
    }
}

/// What the log keeps at one offset: a data entry's record lives in the
/// log's record chunks, so that entries stay small (markers take an offset
/// each, and a growing log copies its entries) and no record is allocated
/// on its own.
#[derive(Clone, Copy, Debug)]
enum Slot {
    Data {
        /// The record's index in [`Records`].
        record: u32,
        producer: Option<u32>,
        transactional: bool,
    },
    Control {
        kind: ControlKind,
        producer: u32,
    },
}

// Every offset of every log holds one: a test driver keeps them all.
const _: () = assert!(std::mem::size_of::<Slot>() <= 16, "a log entry stays small");

/// A producer id as a [`Slot`] keeps it: the model hands ids out as 0, 1,
/// 2, …, so they fit in half the room.
fn slot_producer(producer: u64) -> u32 {
    u32::try_from(producer).expect("the model hands out fewer than 2^32 producer ids")
}

/// A log's records in fixed-size chunks: appending never moves a record,
/// and a chunk is allocated for every [`RECORDS_PER_CHUNK`] records.
#[derive(Clone, Debug, Default)]
struct Records {
    chunks: Vec<Vec<RecordData>>,
}

/// Records per chunk of [`Records`] (about 24 KiB).
const RECORDS_PER_CHUNK: usize = 256;

impl Records {
    fn push(&mut self, record: RecordData) -> u32 {
        if self
            .chunks
            .last()
            .is_none_or(|chunk| chunk.len() == RECORDS_PER_CHUNK)
        {
            self.chunks.push(Vec::with_capacity(RECORDS_PER_CHUNK));
        }
        let full_chunks = self.chunks.len() - 1;
        let chunk = self
            .chunks
            .last_mut()
            .expect("a chunk was just made if none had room");
        chunk.push(record);
        let index = full_chunks * RECORDS_PER_CHUNK + chunk.len() - 1;
        u32::try_from(index).expect("a log holds fewer than 2^32 records")
    }

    fn get(&self, index: u32) -> &RecordData {
        let index = index as usize;
        &self.chunks[index / RECORDS_PER_CHUNK][index % RECORDS_PER_CHUNK]
    }
}

/// Where an entry stands now. Plain records are committed as soon as they are
/// appended; a transaction's records are open until it ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EntryStatus {
    /// Visible to `read_committed`.
    Committed,
    /// In a transaction that is still open.
    Open,
    /// In an aborted transaction.
    Aborted,
    /// A transaction marker: it takes an offset but is never delivered.
    Control,
}

/// One aborted transaction on one partition, as in Kafka's aborted-transaction
/// index: the producer's records in `first_offset..last_offset` are aborted;
/// `last_offset` is the offset of its abort marker. Other producers' records in
/// that range are not affected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AbortedTxn {
    /// The producer id, `None` for a plain append.
    pub producer: u64,
    /// The producer's first record in the transaction.
    pub first_offset: u64,
    /// The abort marker.
    pub last_offset: u64,
}

/// The result of one fetch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fetch {
    /// Visible data records, in offset order.
    pub records: Vec<ConsumedRecord>,
    /// Where the consumer fetches next: past the last returned record and past
    /// any markers or aborted records skipped after it, never beyond the last
    /// stable offset for `read_committed`.
    pub next_offset: u64,
    /// The log's end offset.
    pub high_watermark: u64,
    /// The first offset of the oldest open transaction, or the high watermark.
    pub last_stable_offset: u64,
}

/// Where a fetch that appended its records to a caller's list ended
/// ([`crate::model::Cluster::fetch_into`]): [`Fetch`] without the records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FetchEnd {
    /// As [`Fetch::next_offset`].
    pub next_offset: u64,
    /// The log's end offset.
    pub high_watermark: u64,
    /// As [`Fetch::last_stable_offset`].
    pub last_stable_offset: u64,
}

/// The entries a log makes room for on its first append: a simulated
/// partition commonly grows to hundreds of entries, and the reservation
/// (about 12 KiB, entries and bookkeeping; records live in chunks of their
/// own) spares the early doublings, each
/// of which copies the whole log. Kept small because a test driver may
/// hold hundreds of partitions.
const INITIAL_CAPACITY: usize = 256;

/// Per-offset bookkeeping kept beside the entries, so that [`Entry`] stays the
/// plain value a checker sees.
#[derive(Clone, Copy, Debug)]
struct Meta {
    /// The cluster-wide append sequence; meaningless for control entries.
    sequence: u64,
    status: EntryStatus,
}

/// A read-only view of one partition's log, for checkers that walk a log
/// offset by offset: looked up once, it answers without finding the partition
/// again.
#[derive(Clone, Copy, Debug)]
pub struct LogView<'a> {
    log: &'a PartitionLog,
}

impl<'a> LogView<'a> {
    pub(crate) fn new(log: &'a PartitionLog) -> Self {
        LogView { log }
    }

    /// The raw log, markers and aborted records included.
    pub fn entries(&self) -> Vec<Entry<'a>> {
        self.log.entries()
    }

    /// The data record at `offset`, whatever its status.
    pub fn record(&self, offset: u64) -> Option<&'a RecordData> {
        self.log.entry(offset)?.record()
    }

    /// As [`crate::model::Cluster::entry_status`].
    pub fn status(&self, offset: u64) -> Option<EntryStatus> {
        self.log.status(offset)
    }

    /// The log end offset.
    pub fn high_watermark(&self) -> u64 {
        self.log.high_watermark()
    }

    /// As [`crate::model::Cluster::append_sequence`].
    pub fn sequence(&self, offset: u64) -> Option<u64> {
        self.log.sequence(offset)
    }

    /// The last stable offset: `read_committed` reads stop here.
    pub fn last_stable_offset(&self) -> u64 {
        self.log.last_stable_offset()
    }

    /// The offsets of `[from, to)` holding committed data records (markers
    /// have a status of their own), ascending.
    pub fn committed_offsets(&self, from: u64, to: u64) -> impl Iterator<Item = u64> + 'a {
        let log = self.log;
        (from..to).filter(move |&offset| log.status(offset) == Some(EntryStatus::Committed))
    }

    /// The commit order of every committed data record below the last
    /// stable offset, ascending by offset: `(offset, sequence)`, where the
    /// sequence is cluster-wide — a plain record's append, a transactional
    /// record's commit (its transaction's markers). Sorting records of
    /// several partitions by it gives the order in which they became
    /// committed.
    pub fn commit_order(&self) -> Vec<(u64, u64)> {
        let log = self.log;
        let upper = log.last_stable_offset() as usize;
        // A transaction's records wait for its marker, which comes later in
        // the log; each producer has at most one transaction open at a time.
        let mut waiting: Vec<(u32, Vec<u64>)> = Vec::new();
        let mut order = Vec::new();
        // A committed transaction's marker may lie beyond the last stable
        // offset (a later transaction opened before it), so markers are
        // looked for in the whole log.
        for (offset, (slot, meta)) in log.entries.iter().zip(&log.meta).enumerate() {
            let readable = offset < upper;
            match slot {
                Slot::Data { .. } if !readable => {}
                Slot::Data {
                    producer: Some(producer),
                    transactional: true,
                    ..
                } if meta.status == EntryStatus::Committed => {
                    match waiting.iter_mut().find(|(waiter, _)| waiter == producer) {
                        Some((_, offsets)) => offsets.push(offset as u64),
                        None => waiting.push((*producer, vec![offset as u64])),
                    }
                }
                Slot::Data { .. } if meta.status == EntryStatus::Committed => {
                    order.push((offset as u64, meta.sequence));
                }
                Slot::Control {
                    kind: ControlKind::Commit,
                    producer,
                } => {
                    if let Some(at) = waiting.iter().position(|(waiter, _)| waiter == producer) {
                        let (_, offsets) = waiting.swap_remove(at);
                        order.extend(offsets.into_iter().map(|offset| (offset, meta.sequence)));
                    }
                }
                _ => {}
            }
        }
        order.sort_unstable();
        order
    }

    /// What a `read_committed` fetch of everything from offset 0 returns,
    /// without copying: committed data records below the last stable offset.
    pub fn read_committed(&self) -> impl Iterator<Item = (u64, &'a RecordData)> + 'a {
        let log = self.log;
        let upper = log.last_stable_offset() as usize;
        log.entries[..upper]
            .iter()
            .zip(&log.meta[..upper])
            .enumerate()
            .filter_map(move |(offset, (slot, meta))| match slot {
                Slot::Data { record, .. } if meta.status == EntryStatus::Committed => {
                    Some((offset as u64, log.records.get(*record)))
                }
                _ => None,
            })
    }
}

/// A transaction open on one partition: its producer and where it began.
#[derive(Clone, Copy, Debug)]
struct OpenTxn {
    first_offset: u64,
    producer: u64,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct PartitionLog {
    entries: Vec<Slot>,
    records: Records,
    meta: Vec<Meta>,
    /// Open transactions on this partition, in order of their first offset
    /// (the order they opened in): the first one's is the last stable offset.
    open: Vec<OpenTxn>,
    /// Aborted transactions, in the order of their markers.
    aborted: Vec<AbortedTxn>,
}

impl PartitionLog {
    /// The log end offset: the offset the next entry will take.
    pub(crate) fn high_watermark(&self) -> u64 {
        self.entries.len() as u64
    }

    /// The first offset of the earliest open transaction on this partition,
    /// or the high watermark if none is open.
    pub(crate) fn last_stable_offset(&self) -> u64 {
        self.open
            .first()
            .map_or_else(|| self.high_watermark(), |open| open.first_offset)
    }

    pub(crate) fn entries(&self) -> Vec<Entry<'_>> {
        self.entries.iter().map(|slot| self.view(slot)).collect()
    }

    /// The entry at `offset`, if there is one.
    pub(crate) fn entry(&self, offset: u64) -> Option<Entry<'_>> {
        let slot = self.entries.get(usize::try_from(offset).ok()?)?;
        Some(self.view(slot))
    }

    fn view(&self, slot: &Slot) -> Entry<'_> {
        match *slot {
            Slot::Data {
                record,
                producer,
                transactional,
            } => Entry::Data {
                record: self.records.get(record),
                producer: producer.map(u64::from),
                transactional,
            },
            Slot::Control { kind, producer } => Entry::Control {
                kind,
                producer: u64::from(producer),
            },
        }
    }

    pub(crate) fn aborted(&self) -> &[AbortedTxn] {
        &self.aborted
    }

    pub(crate) fn status(&self, offset: u64) -> Option<EntryStatus> {
        self.meta
            .get(usize::try_from(offset).ok()?)
            .map(|m| m.status)
    }

    pub(crate) fn sequence(&self, offset: u64) -> Option<u64> {
        let meta = self.meta.get(usize::try_from(offset).ok()?)?;
        (meta.status != EntryStatus::Control).then_some(meta.sequence)
    }

    /// Appends a plain record, visible as soon as it is written.
    pub(crate) fn append_plain(&mut self, record: RecordData, sequence: u64) -> u64 {
        let record = self.records.push(record);
        self.push(
            Slot::Data {
                record,
                producer: None,
                transactional: false,
            },
            Meta {
                sequence,
                status: EntryStatus::Committed,
            },
        )
    }

    /// Appends a record of `producer`'s open transaction. Its first record
    /// here opens the transaction on this partition, which may pin the last
    /// stable offset.
    pub(crate) fn append_transactional(
        &mut self,
        record: RecordData,
        producer: u64,
        sequence: u64,
    ) -> u64 {
        let record = self.records.push(record);
        let offset = self.push(
            Slot::Data {
                record,
                producer: Some(slot_producer(producer)),
                transactional: true,
            },
            Meta {
                sequence,
                status: EntryStatus::Open,
            },
        );
        // A producer has at most one transaction open, so an entry of its own
        // means this transaction wrote here before. Offsets only grow, so
        // pushing keeps `open` in order.
        if !self.open.iter().any(|open| open.producer == producer) {
            self.open.push(OpenTxn {
                first_offset: offset,
                producer,
            });
        }
        offset
    }

    /// Ends `producer`'s transaction on this partition: writes the marker and
    /// settles the records at `offsets` (all written by this transaction).
    /// Returns the marker's offset.
    /// `sequence` is the cluster-wide sequence of the transaction's end,
    /// shared by all its markers: it orders commits across partitions.
    pub(crate) fn end_transaction(
        &mut self,
        producer: u64,
        kind: ControlKind,
        offsets: impl IntoIterator<Item = u64>,
        sequence: u64,
    ) -> u64 {
        let marker = self.push(
            Slot::Control {
                kind,
                producer: slot_producer(producer),
            },
            Meta {
                sequence,
                status: EntryStatus::Control,
            },
        );
        let status = match kind {
            ControlKind::Commit => EntryStatus::Committed,
            ControlKind::Abort => EntryStatus::Aborted,
        };
        for offset in offsets {
            self.meta[offset as usize].status = status;
        }
        if let Some(at) = self.open.iter().position(|open| open.producer == producer) {
            let first_offset = self.open.remove(at).first_offset;
            if kind == ControlKind::Abort {
                self.aborted.push(AbortedTxn {
                    producer,
                    first_offset,
                    last_offset: marker,
                });
            }
        }
        marker
    }

    /// Reads from `from` (which must be at most the high watermark), appending
    /// to `records` at most `max_records` records visible to `isolation`, and
    /// says where the fetch ended. Walks only `[from, upper)`, stopping at the
    /// first visible record past `max_records`, so a fetch costs what it
    /// returns plus what it skips.
    pub(crate) fn fetch_into(
        &self,
        from: u64,
        max_records: usize,
        isolation: Isolation,
        records: &mut Vec<ConsumedRecord>,
    ) -> FetchEnd {
        let high_watermark = self.high_watermark();
        let last_stable_offset = self.last_stable_offset();
        debug_assert!(from <= high_watermark);
        let upper = isolation.read_limit(last_stable_offset, high_watermark);
        let mut next_offset = from;
        let mut taken = 0;
        if from < upper {
            let (start, end) = (from as usize, upper as usize);
            records.reserve((end - start).min(max_records));
            let window = self.entries[start..end].iter().zip(&self.meta[start..end]);
            for (offset, (slot, meta)) in (from..).zip(window) {
                let visible = match isolation {
                    Isolation::ReadCommitted => meta.status == EntryStatus::Committed,
                    Isolation::ReadUncommitted => meta.status != EntryStatus::Control,
                };
                if visible {
                    if taken == max_records {
                        break;
                    }
                    if let Slot::Data { record, .. } = slot {
                        records.push(ConsumedRecord {
                            offset,
                            data: self.records.get(*record).clone(),
                        });
                        taken += 1;
                    }
                }
                // Skipped markers and aborted records move the position too,
                // so a consumer never fetches them again.
                next_offset = offset + 1;
            }
        }
        FetchEnd {
            next_offset,
            high_watermark,
            last_stable_offset,
        }
    }

    fn push(&mut self, entry: Slot, meta: Meta) -> u64 {
        let offset = self.high_watermark();
        if self.entries.capacity() == 0 {
            // Every doubling of a log copies all its entries; reserving
            // room up front spares the early doublings.
            self.entries.reserve(INITIAL_CAPACITY);
            self.meta.reserve(INITIAL_CAPACITY);
        }
        self.entries.push(entry);
        self.meta.push(meta);
        offset
    }
}
