//! Model fidelity: the transactional cases of `fidelity/cases.rs`, the
//! table the live runtime runs against a real broker too
//! (`live/tests/live_fidelity.rs`), run here on the in-memory model
//! (`parsley_sim::model::Cluster`) through its public API.
//!
//! The model's backend checks its own bookkeeping as it goes: a
//! re-initialised transactional id keeps its producer id and gets the next
//! epoch, a fencing error names an older epoch than the current one, and
//! the aborted-transaction index agrees with the log whenever a case reads
//! the log. The cases only the model can run (its simulated clock, its
//! late markers, its determinism) stay in `sim/src/model/tests/`.

#[path = "../../fidelity/cases.rs"]
mod cases;

use parsley::CommittedOffset;
use parsley::{Isolation, RecordData, Tp};
use parsley_sim::model::{
    AbortedTxn, Cluster, ControlKind, Entry, EntryStatus, ModelError, ProducerId,
};

use cases::{Backend, Failed, Fetched, Kind, Logged};

/// The model as a [`Backend`]: a cluster with the model tests' topics, `in`
/// (1 partition) and `out` (2). It has no clock: every call is at time 0,
/// and no transaction times out (the default timeout never passes).
struct Model {
    cluster: Cluster,
}

impl Model {
    fn new() -> Model {
        let mut cluster = Cluster::new();
        cluster.create_topic("in", 1).unwrap();
        cluster.create_topic("out", 2).unwrap();
        Model { cluster }
    }
}

fn failed(error: ModelError) -> Failed {
    let kind = match &error {
        ModelError::Fenced {
            epoch,
            current_epoch,
            ..
        } => {
            assert!(epoch < current_epoch, "fenced by a newer epoch: {error}");
            Kind::Fenced
        }
        ModelError::OffsetOutOfRange {
            offset,
            high_watermark,
            ..
        } => Kind::OffsetOutOfRange {
            offset: *offset,
            high_watermark: *high_watermark,
        },
        ModelError::TopicExists { .. } => Kind::TopicExists,
        ModelError::InvalidPartitionCount { .. } => Kind::InvalidPartitionCount,
        ModelError::MetadataTooLarge { .. } => Kind::MetadataTooLarge,
        ModelError::UnstableOffset { .. } => Kind::UnstableOffset,
        _ => Kind::Other,
    };
    Failed {
        kind,
        message: error.to_string(),
    }
}

/// Kafka's aborted-transaction index of one log, rebuilt from its entries:
/// for every abort marker, its producer's first record since that
/// producer's previous marker on the log.
fn aborted_index(entries: &[Entry<'_>]) -> Vec<AbortedTxn> {
    let mut first: std::collections::BTreeMap<u64, u64> = Default::default();
    let mut index = Vec::new();
    for (offset, entry) in entries.iter().enumerate() {
        let offset = offset as u64;
        match *entry {
            Entry::Data {
                producer: Some(producer),
                transactional: true,
                ..
            } => {
                first.entry(producer).or_insert(offset);
            }
            Entry::Data { .. } => {}
            Entry::Control { kind, producer } => {
                let start = first
                    .remove(&producer)
                    .expect("a marker ends records of its producer");
                if kind == ControlKind::Abort {
                    index.push(AbortedTxn {
                        producer,
                        first_offset: start,
                        last_offset: offset,
                    });
                }
            }
        }
    }
    index
}

impl Backend for Model {
    type Producer = ProducerId;

    fn name(&self, name: &str) -> String {
        name.to_owned()
    }

    fn timestamp(&self) -> i64 {
        0
    }

    fn create_topic(&mut self, topic: &str, partitions: u32) -> Result<(), Failed> {
        self.cluster.create_topic(topic, partitions).map_err(failed)
    }

    fn partitions(&mut self, topic: &str) -> Option<u32> {
        self.cluster.partitions(topic)
    }

    fn init_producer(&mut self, transactional_id: &str) -> ProducerId {
        let before = self.cluster.producer(transactional_id);
        let producer = self.cluster.init_producer(transactional_id, 0);
        if let Some(before) = before {
            assert_eq!(producer.id, before.id, "the same id keeps its producer id");
            assert_eq!(producer.epoch, before.epoch + 1, "and gets the next epoch");
        }
        assert_eq!(self.cluster.producer(transactional_id), Some(producer));
        producer
    }

    fn begin(&mut self, producer: &ProducerId) -> Result<(), Failed> {
        self.cluster.begin(*producer, 0).map_err(failed)
    }

    fn send(&mut self, producer: &ProducerId, tp: &Tp, record: &RecordData) -> Result<u64, Failed> {
        self.cluster
            .send(*producer, tp, record.clone())
            .map_err(failed)
    }

    fn send_offsets(
        &mut self,
        producer: &ProducerId,
        group: &str,
        offsets: &[(Tp, CommittedOffset)],
    ) -> Result<(), Failed> {
        self.cluster
            .send_offsets(*producer, group, offsets)
            .map_err(failed)
    }

    fn commit(&mut self, producer: &ProducerId) -> Result<(), Failed> {
        self.cluster.commit(*producer).map_err(failed)
    }

    fn abort(&mut self, producer: &ProducerId) -> Result<(), Failed> {
        self.cluster.abort(*producer).map_err(failed)
    }

    fn append(&mut self, tp: &Tp, record: &RecordData) -> Result<u64, Failed> {
        self.cluster.append(tp, record.clone()).map_err(failed)
    }

    fn fetch(&mut self, tp: &Tp, from: u64, isolation: Isolation) -> Result<Fetched, Failed> {
        let fetch = self
            .cluster
            .fetch(tp, from, usize::MAX, isolation)
            .map_err(failed)?;
        Ok(Fetched {
            records: fetch.records,
            next_offset: fetch.next_offset,
            high_watermark: fetch.high_watermark,
            last_stable_offset: fetch.last_stable_offset,
        })
    }

    fn high_watermark(&mut self, tp: &Tp) -> u64 {
        self.cluster.high_watermark(tp).unwrap()
    }

    fn last_stable_offset(&mut self, tp: &Tp) -> u64 {
        self.cluster.last_stable_offset(tp).unwrap()
    }

    fn wait_stable(&mut self, tp: &Tp, target: u64) -> u64 {
        let lso = self.last_stable_offset(tp);
        assert!(
            lso >= target,
            "{tp}: the model writes markers at once, yet the LSO is {lso}, not {target}"
        );
        lso
    }

    fn wait_high_watermark(&mut self, tp: &Tp, target: u64) {
        let hwm = self.high_watermark(tp);
        assert!(
            hwm >= target,
            "{tp}: the model writes markers at once, yet the high watermark is {hwm}, not {target}"
        );
    }

    fn committed(
        &mut self,
        group: &str,
        tp: &Tp,
        isolation: Isolation,
    ) -> Result<Option<CommittedOffset>, Failed> {
        match isolation {
            Isolation::ReadUncommitted => Ok(self.cluster.committed(group, tp)),
            Isolation::ReadCommitted => self.cluster.committed_stable(group, tp).map_err(failed),
        }
    }

    fn log(&mut self, tp: &Tp) -> Option<Vec<Logged>> {
        let entries = self.cluster.entries(tp).unwrap();
        assert_eq!(
            self.cluster.aborted_transactions(tp).unwrap(),
            aborted_index(&entries),
            "{tp}: the aborted-transaction index against the log"
        );
        let logged = entries
            .iter()
            .enumerate()
            .map(|(offset, entry)| {
                let status = self.cluster.entry_status(tp, offset as u64);
                match (entry, status) {
                    (
                        Entry::Data {
                            transactional: false,
                            ..
                        },
                        Some(EntryStatus::Committed),
                    ) => Logged::Plain,
                    (Entry::Data { .. }, Some(EntryStatus::Committed)) => Logged::Committed,
                    (Entry::Data { .. }, Some(EntryStatus::Aborted)) => Logged::Aborted,
                    (Entry::Data { .. }, Some(EntryStatus::Open)) => Logged::Open,
                    (
                        Entry::Control {
                            kind: ControlKind::Commit,
                            ..
                        },
                        Some(EntryStatus::Control),
                    ) => Logged::CommitMarker,
                    (
                        Entry::Control {
                            kind: ControlKind::Abort,
                            ..
                        },
                        Some(EntryStatus::Control),
                    ) => Logged::AbortMarker,
                    (entry, status) => {
                        panic!("{tp} at {offset}: entry {entry:?} with status {status:?}")
                    }
                }
            })
            .collect();
        Some(logged)
    }

    fn open_transactions(&mut self) -> Option<Vec<String>> {
        Some(self.cluster.open_transactions())
    }
}

macro_rules! run {
    ($case:ident) => {
        #[test]
        fn $case() {
            cases::$case(&mut Model::new());
        }
    };
}

cases::for_each_case!(run);
