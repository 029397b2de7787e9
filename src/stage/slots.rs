//! State slots (S1, S2, T7): one per key, one for the null key, and one
//! reserved tick slot per task, each distinct from the others.
//!
//! A task's slots keep what the last commit made durable apart from what the
//! open transaction changed, so an abort simply forgets the pending changes
//! (X3) instead of undoing them.

use std::any::Any;
use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;

use crate::codec::{Codec, CodecError};

/// Which slot a fold reads and writes.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SlotKey {
    /// The slot of records with no key.
    Null,
    /// The slot of one key, by the key's encoded bytes.
    Key(Bytes),
    /// The task's tick slot, seen only by tick folds.
    Tick,
}

/// Why a changelog record's key names no slot.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("changelog key {key:02x?} names no slot (expected a tag byte 0 = null key, 1 = key, 2 = tick slot)")]
pub struct SlotKeyError {
    /// The changelog key refused.
    pub key: Vec<u8>,
}

const TAG_NULL: u8 = 0;
const TAG_KEY: u8 = 1;
const TAG_TICK: u8 = 2;

impl SlotKey {
    /// The slot of a record with this (encoded) key.
    pub fn for_key(key: Option<&Bytes>) -> SlotKey {
        match key {
            None => SlotKey::Null,
            Some(key) => SlotKey::Key(key.clone()),
        }
    }

    /// The key this slot's changes carry on the changelog. A tag byte keeps the
    /// null key's slot, the tick slot and every key slot apart (T7).
    pub fn changelog_key(&self) -> Bytes {
        match self {
            SlotKey::Null => Bytes::from_static(&[TAG_NULL]),
            SlotKey::Tick => Bytes::from_static(&[TAG_TICK]),
            SlotKey::Key(key) => crate::chunks::fill(key.len() + 1, |bytes| {
                bytes.extend_from_slice(&[TAG_KEY]);
                bytes.extend_from_slice(key);
            }),
        }
    }

    /// [`SlotKey::from_changelog_key`] that shares the key's bytes instead
    /// of copying them.
    pub fn from_changelog_bytes(bytes: &Bytes) -> Result<SlotKey, SlotKeyError> {
        match bytes.first() {
            Some(&TAG_KEY) => Ok(SlotKey::Key(bytes.slice(1..))),
            _ => SlotKey::from_changelog_key(bytes),
        }
    }

    /// Reads a changelog key back into the slot it names.
    pub fn from_changelog_key(bytes: &[u8]) -> Result<SlotKey, SlotKeyError> {
        match bytes {
            [TAG_NULL] => Ok(SlotKey::Null),
            [TAG_TICK] => Ok(SlotKey::Tick),
            [TAG_KEY, key @ ..] => Ok(SlotKey::Key(Bytes::copy_from_slice(key))),
            _ => Err(SlotKeyError {
                key: bytes.to_vec(),
            }),
        }
    }
}

/// The erased face of a task's slots, as the task drives them.
pub(crate) trait SlotStore: Send {
    /// Stages a change made by a delivery in the open transaction.
    fn apply(&mut self, slot: SlotKey, state: Option<Box<dyn Any + Send>>);
    /// Loads one changelog record before delivery starts (S5).
    fn restore(&mut self, slot: SlotKey, bytes: Option<&[u8]>) -> Result<(), CodecError>;
    fn commit(&mut self);
    fn abort(&mut self);
    fn as_any(&self) -> &dyn Any;
}

/// The slots' maps. Keys are user data, so the hasher is seeded (per process
/// and per map) rather than fixed; foldhash is several times cheaper than
/// std's SipHash on short keys, and every delivery and restored changelog
/// record hashes its slot.
type SlotMap<V> = HashMap<SlotKey, V, foldhash::fast::RandomState>;

/// The slots of one task of a stage with state type `S`.
pub struct Slots<S> {
    committed: SlotMap<S>,
    pending: SlotMap<Option<S>>,
    codec: Option<Arc<dyn Codec<S>>>,
}

impl<S> Slots<S> {
    pub(crate) fn new(codec: Option<Arc<dyn Codec<S>>>) -> Self {
        Slots {
            committed: SlotMap::default(),
            pending: SlotMap::default(),
            codec,
        }
    }

    /// The slot's current state (open transaction included), or `None` when it
    /// is unseen or deleted and so reads as the initial value.
    pub fn get(&self, slot: &SlotKey) -> Option<&S> {
        match self.pending.get(slot) {
            Some(pending) => pending.as_ref(),
            None => self.committed.get(slot),
        }
    }

    /// The slot's state as of the last commit.
    pub fn committed(&self, slot: &SlotKey) -> Option<&S> {
        self.committed.get(slot)
    }

    /// Every slot holding a committed state.
    pub fn committed_slots(&self) -> impl Iterator<Item = (&SlotKey, &S)> {
        self.committed.iter()
    }
}

impl<S: Send + 'static> SlotStore for Slots<S> {
    fn apply(&mut self, slot: SlotKey, state: Option<Box<dyn Any + Send>>) {
        let state = state.map(|state| {
            *state
                .downcast::<S>()
                .expect("a stage's logic writes states of the stage's own type")
        });
        self.pending.insert(slot, state);
    }

    fn restore(&mut self, slot: SlotKey, bytes: Option<&[u8]>) -> Result<(), CodecError> {
        assert!(
            self.pending.is_empty(),
            "slots are restored before any delivery"
        );
        match bytes {
            None => {
                self.committed.remove(&slot);
            }
            Some(bytes) => {
                let codec = self
                    .codec
                    .as_ref()
                    .expect("only stateful stages have a changelog to restore from");
                self.committed.insert(slot, codec.decode(bytes)?);
            }
        }
        Ok(())
    }

    fn commit(&mut self) {
        for (slot, state) in self.pending.drain() {
            match state {
                Some(state) => self.committed.insert(slot, state),
                None => self.committed.remove(&slot),
            };
        }
    }

    fn abort(&mut self) {
        self.pending.clear();
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// T7: the tick slot's changelog key differs from the null key's and from
    /// every key's, including keys whose bytes look like tags.
    #[test]
    fn t7_tick_slot_is_distinct_on_the_changelog() {
        let tick = SlotKey::Tick.changelog_key();
        assert_ne!(tick, SlotKey::Null.changelog_key());
        for key in [&[][..], &[0], &[2], &[1, 2]] {
            assert_ne!(
                tick,
                SlotKey::Key(Bytes::copy_from_slice(key)).changelog_key()
            );
        }
        for slot in [
            SlotKey::Null,
            SlotKey::Tick,
            SlotKey::Key(Bytes::from_static(b"k")),
        ] {
            assert_eq!(
                SlotKey::from_changelog_key(&slot.changelog_key()).unwrap(),
                slot
            );
        }
        assert!(SlotKey::from_changelog_key(&[7]).is_err());
        for key in [&[1u8, 2, 3][..], &[1], &[0], &[2], &[7], &[]] {
            let bytes = Bytes::copy_from_slice(key);
            assert_eq!(
                SlotKey::from_changelog_bytes(&bytes),
                SlotKey::from_changelog_key(key)
            );
        }
    }

    /// X3: an abort forgets pending changes; a commit makes them durable.
    #[test]
    fn x3_pending_changes_are_dropped_on_abort() {
        let mut slots: Slots<i64> = Slots::new(None);
        slots.apply(SlotKey::Null, Some(Box::new(5i64)));
        slots.commit();
        slots.apply(SlotKey::Null, Some(Box::new(9i64)));
        assert_eq!(slots.get(&SlotKey::Null), Some(&9));
        slots.abort();
        assert_eq!(slots.get(&SlotKey::Null), Some(&5));
        slots.apply(SlotKey::Null, None);
        slots.commit();
        assert_eq!(slots.get(&SlotKey::Null), None);
    }
}
