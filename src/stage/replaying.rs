//! A stage's task replayed through its public hooks, the way a checker
//! keeps one: every slot by slot key, records delivered at rising offsets
//! of partition 0, ticks. The operators' unit tests share it.

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::emission::{Emission, Tick};
use crate::record::{ConsumedRecord, RecordData};
use crate::stage::{ReplayError, Replayed, SlotChange, SlotKey, Stage};
use crate::tp::Tp;

/// A record of partition 0 with a UTF-8 key and a big-endian `i64` value.
pub(crate) fn record(
    key: Option<&str>,
    value: Option<i64>,
    timestamp: i64,
    offset: u64,
) -> ConsumedRecord {
    ConsumedRecord {
        offset,
        data: RecordData {
            key: key.map(|key| Bytes::copy_from_slice(key.as_bytes())),
            value: value.map(|value| Bytes::copy_from_slice(&value.to_be_bytes())),
            headers: Vec::new(),
            timestamp,
        },
    }
}

/// A stage's task, replayed: its slots and the offset of the next record.
pub(crate) struct Replay {
    pub(crate) stage: Stage,
    pub(crate) slots: BTreeMap<SlotKey, Bytes>,
    pub(crate) offset: u64,
}

impl Replay {
    pub(crate) fn of(stage: Stage) -> Replay {
        Replay {
            stage,
            slots: BTreeMap::new(),
            offset: 0,
        }
    }

    /// The slot of a record keyed `key`, if kept.
    pub(crate) fn slot(&self, key: &str) -> Option<&Bytes> {
        let key = Bytes::copy_from_slice(key.as_bytes());
        self.slots.get(&SlotKey::for_key(Some(&key)))
    }

    /// Delivers the next record of `topic`'s partition 0.
    pub(crate) fn deliver(
        &mut self,
        topic: &str,
        key: Option<&str>,
        value: Option<i64>,
        timestamp: i64,
    ) -> Result<Vec<Emission>, ReplayError> {
        let record = record(key, value, timestamp, self.offset);
        self.offset += 1;
        let tp = Tp::new(topic, 0);
        let own = SlotKey::for_key(record.data.key.as_ref());
        let hooks = self.stage.hooks();
        let replayed = match hooks.record_reads_every_slot() {
            true => hooks.replay_record_over_slots(&tp.topic, &self.given(), &tp, &record)?,
            false => {
                let state = self.slots.get(&own).map(|bytes| &bytes[..]);
                hooks.replay_record(&tp.topic, state, &tp, &record)?
            }
        };
        Ok(self.apply(own, replayed))
    }

    /// Runs the stage's tick logic at `at`.
    pub(crate) fn tick(&mut self, at: i64) -> Result<Vec<Emission>, ReplayError> {
        let hooks = self.stage.hooks();
        let replayed = match hooks.tick_reads_every_slot() {
            true => hooks.replay_tick_over_slots(&self.given(), Tick::new(at))?,
            false => {
                let state = self.slots.get(&SlotKey::Tick).map(|bytes| &bytes[..]);
                hooks.replay_tick(state, Tick::new(at))?
            }
        };
        Ok(self.apply(SlotKey::Tick, replayed))
    }

    fn given(&self) -> Vec<(SlotKey, &[u8])> {
        self.slots
            .iter()
            .map(|(slot, bytes)| (slot.clone(), &bytes[..]))
            .collect()
    }

    fn apply(&mut self, own: SlotKey, replayed: Replayed) -> Vec<Emission> {
        for (slot, change) in std::iter::once((own, replayed.slot)).chain(replayed.other_slots) {
            match change {
                SlotChange::Set(bytes) => {
                    self.slots.insert(slot, bytes);
                }
                SlotChange::Deleted => {
                    self.slots.remove(&slot);
                }
                SlotChange::Unchanged => {}
            }
        }
        replayed.emissions
    }
}
