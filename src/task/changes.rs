//! S5: the open transaction's state changes, one per slot, written to the
//! changelog when the transaction commits.
//!
//! A slot that several deliveries of a transaction change is written once,
//! with its value at the commit, as Kafka Streams' record cache does for a
//! store's changelog: restoring reads the latest record per slot, so the
//! values in between would only cost a record each. A transaction's changes
//! are written in the order each slot first changed in it.

use std::collections::HashMap;

use bytes::Bytes;

use crate::mutation::{self, Mutation};
use crate::record::{ProducedRecord, RecordData};
use crate::stage::SlotKey;
use crate::tp::Tp;

/// One slot's change in the open transaction.
struct Change {
    slot: SlotKey,
    /// The encoded state; `None` deletes the slot (a tombstone).
    value: Option<Bytes>,
    /// The timestamp of the delivery that made the change.
    timestamp: i64,
}

/// The open transaction's state changes, one per slot, in the order of
/// first change.
#[derive(Default)]
pub(super) struct Changes {
    /// Each changed slot's place in `list`.
    at: HashMap<SlotKey, usize, foldhash::fast::RandomState>,
    list: Vec<Change>,
}

impl Changes {
    /// A delivery changed `slot` to `value` (`None`: deleted it).
    pub(super) fn record(&mut self, slot: &SlotKey, value: Option<Bytes>, timestamp: i64) {
        match self.at.get(slot) {
            Some(&index) => {
                // Planted bug (S5, I6): the transaction writes a slot's
                // first change instead of its value at the commit.
                if mutation::active(Mutation::ChangelogKeepsFirstChange) {
                    return;
                }
                let change = &mut self.list[index];
                change.value = value;
                change.timestamp = timestamp;
            }
            None => {
                self.at.insert(slot.clone(), self.list.len());
                self.list.push(Change {
                    slot: slot.clone(),
                    value,
                    timestamp,
                });
            }
        }
    }

    /// Appends the changelog records of the transaction to `produced`, one
    /// per changed slot, and forgets the changes.
    pub(super) fn write_into(&mut self, changelog: &Tp, produced: &mut Vec<ProducedRecord>) {
        produced.reserve(self.list.len());
        produced.extend(self.list.drain(..).map(|change| ProducedRecord {
            tp: changelog.clone(),
            data: RecordData {
                key: Some(change.slot.changelog_key()),
                value: change.value,
                headers: Vec::new(),
                timestamp: change.timestamp,
            },
        }));
        self.at.clear();
    }

    /// Forgets the changes: the transaction aborted (X3).
    pub(super) fn clear(&mut self) {
        self.list.clear();
        self.at.clear();
    }

    /// Each changed slot and its value now, in the order of first change.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&SlotKey, Option<&Bytes>)> + '_ {
        self.list
            .iter()
            .map(|change| (&change.slot, change.value.as_ref()))
    }

    /// Whether no slot changed in the open transaction.
    pub(super) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
}
