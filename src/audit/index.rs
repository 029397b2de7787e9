//! The log index: every tp read, with its records' stamps decoded, and
//! what a task is made of (its lanes and committed prefixes, its outputs, its
//! dead letters).

use std::collections::{BTreeMap, HashMap};

use super::{AuditSummary, CommittedLogs, LogBounds};
use crate::app::StagePlan;
use crate::header::{self, STAMP_HEADER};
use crate::record::ConsumedRecord;
use crate::task::TaskId;
use crate::{DeadLetterKind, Emission, Stamp, Tp};
use bytes::Bytes;

/// One tp as read, with its records' stamps decoded.
pub(super) struct Log<'a> {
    pub(super) tp: Tp,
    pub(super) records: &'a [ConsumedRecord],
    pub(super) stamps: Vec<Result<Stamp, String>>,
    pub(super) bounds: LogBounds,
}

impl Log<'_> {
    pub(super) fn index_of(&self, offset: u64) -> Option<usize> {
        self.records
            .binary_search_by_key(&offset, |record| record.offset)
            .ok()
    }

    /// The stamp of record `index`, empty when it does not decode (that is
    /// reported on its own).
    pub(super) fn stamp(&self, index: usize) -> &Stamp {
        static EMPTY: std::sync::OnceLock<Stamp> = std::sync::OnceLock::new();
        match &self.stamps[index] {
            Ok(stamp) => stamp,
            Err(_) => EMPTY.get_or_init(Stamp::empty),
        }
    }
}

/// A consumed tp of a task and its committed prefix.
pub(super) struct Lane<'a> {
    pub(super) tp: Tp,
    pub(super) tick: bool,
    pub(super) log: &'a Log<'a>,
    /// Records of the prefix: `log.records[..len]`.
    pub(super) len: usize,
    pub(super) committed: u64,
}

/// A sink partition a task may have written, with the records it may have
/// written there: (index in the log, whether the task is the only
/// candidate).
pub(super) struct Out<'a> {
    pub(super) log: &'a Log<'a>,
    pub(super) entries: Vec<(usize, bool)>,
}

impl<'a> Out<'a> {
    /// The first of the entries before `upto`, less those `skip` names,
    /// with `record`'s key and value bytes: what a duplicate repeats.
    pub(super) fn copy_before(
        &self,
        upto: usize,
        record: &ConsumedRecord,
        skip: impl Fn(&ConsumedRecord) -> bool,
    ) -> Option<&'a ConsumedRecord> {
        self.entries[..upto]
            .iter()
            .map(|&(earlier, _)| &self.log.records[earlier])
            .filter(|earlier| !skip(earlier))
            .find(|earlier| {
                earlier.data.key == record.data.key && earlier.data.value == record.data.value
            })
    }
}

/// A task's partition of its stage's dead-letter topic (X5), with the dead
/// letters there that name a record of the task's committed prefix.
pub(super) struct DeadLetters<'a> {
    /// `None` when the partition was not read.
    pub(super) log: Option<&'a Log<'a>>,
    /// The dead letters the task's committed deliveries must have written,
    /// in offset order (so in delivery order): index in `log`, and kind.
    pub(super) entries: Vec<(usize, DeadLetterKind)>,
    /// `(lane, offset)` of the record each entry names, to the entry.
    pub(super) by_source: HashMap<(usize, u64), usize>,
}

impl DeadLetters<'_> {
    /// The entry that dead-letters `offset` of `lane`, if any.
    pub(super) fn entry(&self, lane: usize, offset: u64) -> Option<usize> {
        self.by_source.get(&(lane, offset)).copied()
    }

    /// Whether the operator skipped `offset` of `lane`: it goes whatever
    /// its claims (docs/RULES.md#skip).
    pub(super) fn skips(&self, lane: usize, offset: u64) -> bool {
        self.entry(lane, offset)
            .is_some_and(|entry| self.entries[entry].1 == DeadLetterKind::Skipped)
    }

    pub(super) fn record(&self, entry: usize) -> (&Log<'_>, &ConsumedRecord) {
        let log = self.log.expect("entries come from a read partition");
        (log, &log.records[self.entries[entry].0])
    }
}

pub(super) struct TaskPlan<'a> {
    pub(super) id: TaskId,
    pub(super) plan: &'a StagePlan,
    pub(super) lanes: Vec<Lane<'a>>,
    /// Set by [`Auditor::tasks`](super::checks::Auditor::tasks) when the task
    /// cannot be reconstructed.
    pub(super) unreadable: Option<String>,
    /// The task committed while the logs were read: what its later
    /// transactions wrote lies beyond the cut.
    pub(super) moved: bool,
}

/// The records read that lie beyond the cut, as `(tp, offset)`.
pub(super) type Beyond = std::collections::HashSet<(Tp, u64)>;

pub(super) fn describe_record(record: &ConsumedRecord) -> String {
    let render = |bytes: Option<&Bytes>| {
        bytes.map_or("null".to_string(), |bytes| {
            match std::str::from_utf8(bytes) {
                Ok(text) if !text.chars().any(char::is_control) => text.to_string(),
                _ => format!(
                    "0x{}",
                    bytes
                        .iter()
                        .map(|byte| format!("{byte:02x}"))
                        .collect::<String>()
                ),
            }
        })
    };
    format!(
        "({}, {})",
        render(record.data.key.as_ref()),
        render(record.data.value.as_ref())
    )
}

pub(super) fn same_content(record: &ConsumedRecord, emission: &Emission) -> bool {
    match emission.encoded() {
        Ok((key, value)) => record.data.key.as_ref() == key && record.data.value.as_ref() == value,
        Err(_) => false,
    }
}

/// Every tp read, with its records' stamps decoded.
pub(super) fn build_index<'a>(
    logs: &'a CommittedLogs,
    summary: &mut AuditSummary,
) -> BTreeMap<Tp, Log<'a>> {
    let mut index = BTreeMap::new();
    for (tp, records) in &logs.records {
        let stamps = records
            .iter()
            .map(|record| match record.data.header(STAMP_HEADER) {
                Some(bytes) => header::decode(bytes).map_err(|error| error.to_string()),
                None => Ok(Stamp::empty()),
            })
            .collect();
        summary.tps += 1;
        summary.records += records.len();
        let bounds = logs.bounds(tp).expect("a read tp has bounds");
        index.insert(
            tp.clone(),
            Log {
                tp: tp.clone(),
                records,
                stamps,
                bounds,
            },
        );
    }
    index
}
