//! A task's changelog as the audit reads it: one batch per committed
//! transaction (S5).
//!
//! A transaction writes each slot it changed once, with the slot's value at
//! its commit, in the order the slots first changed in it; its commit
//! marker takes the offset after its last record. So a batch is a run of
//! committed changelog records at consecutive offsets, and the
//! reconstruction matches the slot changes of a run of deliveries, one per
//! slot, against the next batch.

use std::collections::HashSet;

use bytes::Bytes;

use super::index::{describe_record, Log};
use crate::record::ConsumedRecord;
use crate::stage::SlotKey;

/// The batches of one changelog partition.
pub(super) struct Batches {
    /// Per record index, where its batch ends (exclusive).
    end: Vec<usize>,
    /// (first record index of a batch, a slot it writes).
    slots: HashSet<(usize, SlotKey)>,
}

impl Batches {
    /// The batches of `log` (none without a changelog).
    pub(super) fn of(log: Option<&Log<'_>>) -> Batches {
        let records: &[ConsumedRecord] = log.map_or(&[], |log| log.records);
        let mut end = vec![0; records.len()];
        let mut slots = HashSet::new();
        let mut start = 0;
        for index in 0..records.len() {
            let last = records
                .get(index + 1)
                .is_none_or(|next| next.offset != records[index].offset + 1);
            if let Some(slot) = records[index]
                .data
                .key
                .as_ref()
                .and_then(|key| SlotKey::from_changelog_bytes(key).ok())
            {
                slots.insert((start, slot));
            }
            if last {
                end[start..=index].fill(index + 1);
                start = index + 1;
            }
        }
        Batches { end, slots }
    }

    /// The records of the batch that starts at `start`: empty past the end.
    pub(super) fn batch<'l>(&self, log: &'l Log<'_>, start: usize) -> &'l [ConsumedRecord] {
        match self.end.get(start) {
            Some(&end) => &log.records[start..end],
            None => &[],
        }
    }

    /// Whether the batch that starts at `start` writes `slot`.
    pub(super) fn names(&self, start: usize, slot: &SlotKey) -> bool {
        // Only a lookup: the key's bytes are shared, not copied.
        self.slots.contains(&(start, slot.clone()))
    }
}

/// Whether `batch` is exactly `pending`: the same slots in the same order,
/// each with the same value (`None`: a tombstone).
pub(super) fn matches(batch: &[ConsumedRecord], pending: &[(SlotKey, Option<Bytes>)]) -> bool {
    batch.len() == pending.len()
        && batch.iter().zip(pending).all(|(record, (slot, value))| {
            record.data.key.as_ref() == Some(&slot.changelog_key()) && record.data.value == *value
        })
}

/// A batch as a report names it: its offsets on the changelog, and its
/// first records as slot changes.
pub(super) fn describe(log: &Log<'_>, batch: &[ConsumedRecord]) -> String {
    const SHOWN: usize = 3;
    let (Some(first), Some(last)) = (batch.first(), batch.last()) else {
        return format!("nothing further on {}", log.tp);
    };
    let offsets = match first.offset == last.offset {
        true => format!("{}@{}", log.tp, first.offset),
        false => format!("{}@{}..={}", log.tp, first.offset, last.offset),
    };
    let shown: Vec<String> = batch
        .iter()
        .take(SHOWN)
        .map(|record| {
            match record
                .data
                .key
                .as_ref()
                .and_then(|key| SlotKey::from_changelog_bytes(key).ok())
            {
                Some(slot) => describe_change(&slot, record.data.value.as_ref()),
                None => describe_record(record),
            }
        })
        .collect();
    let more = match batch.len() > SHOWN {
        true => format!(", and {} more", batch.len() - SHOWN),
        false => String::new(),
    };
    format!("{offsets}: {}{more}", shown.join(", "))
}

/// Pending changes as a report names them: each slot and its value.
pub(super) fn describe_pending(pending: &[(SlotKey, Option<Bytes>)]) -> String {
    pending
        .iter()
        .map(|(slot, value)| describe_change(slot, value.as_ref()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What a delivery did to a slot, as a report says it after the
/// delivery's name.
pub(super) fn describe_delivered_change(slot: &SlotKey, value: Option<&Bytes>) -> String {
    match value {
        Some(bytes) => format!(
            "sets slot {slot:?} to {}",
            crate::text::bytes_for_humans(bytes)
        ),
        None => format!("deletes slot {slot:?}"),
    }
}

/// One slot's change as a report names it.
fn describe_change(slot: &SlotKey, value: Option<&Bytes>) -> String {
    match value {
        Some(bytes) => format!("{slot:?} = {}", crate::text::bytes_for_humans(bytes)),
        None => format!("{slot:?} deleted"),
    }
}
