//! State slots (S1, S2, T7): one per key, one for the null key, and one
//! reserved tick slot per task, each distinct from the others.
//!
//! A task's slots keep every slot's current state in one map and, for each
//! slot the open transaction changed, what the last commit made durable, so
//! that an abort puts exactly that back (X3).

use std::any::Any;
use std::collections::hash_map::Entry;
use std::collections::{BTreeSet, HashMap, VecDeque};
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
    /// Stages the state the last delivery proposed for `slot` in the open
    /// transaction: the task accepts a delivery's outcome only after
    /// checking it, and the typed state waits in the slots till then.
    fn accept(&mut self, slot: SlotKey);
    /// Loads one changelog record before delivery starts (S5).
    fn restore(&mut self, slot: SlotKey, bytes: Option<&[u8]>) -> Result<(), CodecError>;
    fn commit(&mut self);
    fn abort(&mut self);
    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

/// A task's slots as a driver reads them, for tests and for the operators'
/// views of their state (`open_windows_of`, `rows_of`, …), which read
/// through it and know no task.
#[derive(Clone, Copy)]
pub struct SlotsView<'a>(pub(crate) &'a dyn SlotStore);

impl<'a> SlotsView<'a> {
    /// The slots, when they hold state of type `S`.
    pub fn of<S: 'static>(self) -> Option<&'a Slots<S>> {
        self.0.as_any().downcast_ref::<Slots<S>>()
    }
}

/// The slots' maps. Keys are user data, so the hasher is seeded (per process
/// and per map) rather than fixed; foldhash is several times cheaper than
/// std's SipHash on short keys, and every delivery and restored changelog
/// record hashes its slot.
type SlotMap<V> = HashMap<SlotKey, V, foldhash::fast::RandomState>;

/// One slot's state in the open transaction.
struct Slot<S> {
    /// `None`: deleted in the open transaction, removed when it commits.
    state: Option<S>,
    /// The transaction that last changed the slot: a slot changed in the
    /// open one has its committed state in the undo list.
    changed_in: u64,
}

/// An ordered index of the slots by a time their current state names (an
/// expiring fold's expiry time): the slots a state maps to `None` are not
/// in it.
struct Index<S> {
    time_of: fn(&S) -> Option<i64>,
    by_time: BTreeSet<(i64, SlotKey)>,
}

impl<S> Index<S> {
    /// The slot's current state goes from `old` to `new`.
    fn update(&mut self, slot: &SlotKey, old: Option<&S>, new: Option<&S>) {
        let old = old.and_then(self.time_of);
        let new = new.and_then(self.time_of);
        if old == new {
            return;
        }
        if let Some(time) = old {
            let removed = self.by_time.remove(&(time, slot.clone()));
            debug_assert!(removed, "an indexed slot is in the index");
        }
        if let Some(time) = new {
            self.by_time.insert((time, slot.clone()));
        }
    }
}

/// The slots of one task of a stage with state type `S`.
///
/// One map holds every slot's current state, open transaction included, so
/// a read and a write hash the key once each. The first change of a slot in
/// a transaction saves the slot's committed state in an undo list: a commit
/// forgets the list, an abort puts the saved states back (X3).
///
/// Slots made `Slots::with_index` also keep their current states ordered
/// by a time each names, so that the slots due by a time are found without
/// visiting the others.
pub struct Slots<S> {
    current: SlotMap<Slot<S>>,
    /// Per slot changed in the open transaction, its state as of the last
    /// commit (`None`: it had none), in the order of first change.
    undo: Vec<(SlotKey, Option<S>)>,
    /// Slots deleted in the open transaction, to remove when it commits.
    deleted: Vec<SlotKey>,
    /// The open transaction's number.
    transaction: u64,
    /// The new state of the delivery being checked (`Some(None)`: delete).
    proposed: Option<Option<S>>,
    /// The timer service's ticks change several slots (K2): the states
    /// after the first, in the order the task accepts them.
    proposed_more: VecDeque<Option<S>>,
    codec: Option<Arc<dyn Codec<S>>>,
    /// The current states by time, when the slots keep an index.
    index: Option<Index<S>>,
}

impl<S> Slots<S> {
    pub(crate) fn new(codec: Option<Arc<dyn Codec<S>>>) -> Self {
        Slots {
            current: SlotMap::default(),
            undo: Vec::new(),
            deleted: Vec::new(),
            transaction: 0,
            proposed: None,
            proposed_more: VecDeque::new(),
            codec,
            index: None,
        }
    }

    /// Slots that also keep their current states (open transaction
    /// included) ordered by `time_of` each, for [`Slots::by_time`]; a state
    /// it maps to `None` is left out.
    pub(crate) fn with_index(
        codec: Option<Arc<dyn Codec<S>>>,
        time_of: fn(&S) -> Option<i64>,
    ) -> Self {
        let mut slots = Slots::new(codec);
        slots.index = Some(Index {
            time_of,
            by_time: BTreeSet::new(),
        });
        slots
    }

    /// The indexed slots with their times, earliest first (slots of equal
    /// times in key order), the open transaction's changes included. Lazy:
    /// taking the first `k` costs O(log n + k).
    ///
    /// # Panics
    ///
    /// When the slots were not made [`Slots::with_index`].
    pub(crate) fn by_time(&self) -> impl Iterator<Item = (i64, &SlotKey)> {
        self.index
            .as_ref()
            .expect("slots made with an index")
            .by_time
            .iter()
            .map(|(time, slot)| (*time, slot))
    }

    /// The slot's current state (open transaction included), or `None` when it
    /// is unseen or deleted and so reads as the initial value.
    pub fn get(&self, slot: &SlotKey) -> Option<&S> {
        self.current.get(slot)?.state.as_ref()
    }

    /// The slot's state as of the last commit.
    pub fn committed(&self, slot: &SlotKey) -> Option<&S> {
        self.committed_state(slot, self.current.get(slot)?)
    }

    /// Every slot holding a committed state. Between transactions this walks
    /// the map; inside one, each slot the transaction changed is looked up in
    /// its undo list.
    pub fn committed_slots(&self) -> impl Iterator<Item = (&SlotKey, &S)> {
        self.current
            .iter()
            .filter_map(|(slot, entry)| Some((slot, self.committed_state(slot, entry)?)))
    }

    fn committed_state<'a>(&'a self, slot: &SlotKey, entry: &'a Slot<S>) -> Option<&'a S> {
        if entry.changed_in != self.transaction {
            return entry.state.as_ref();
        }
        let (_, committed) = self
            .undo
            .iter()
            .find(|(changed, _)| changed == slot)
            .expect("a slot changed in the open transaction saved its committed state");
        committed.as_ref()
    }

    /// Holds a delivery's new state (`None` deletes the slot) until the task
    /// accepts the delivery; a later proposal replaces an unaccepted one.
    pub(crate) fn propose(&mut self, state: Option<S>) {
        self.proposed = Some(state);
        self.proposed_more.clear();
    }

    /// Holds one more new state of the same delivery, accepted after the
    /// first and the ones proposed before it.
    pub(crate) fn propose_more(&mut self, state: Option<S>) {
        assert!(
            self.proposed.is_some(),
            "a delivery proposes its first state before more"
        );
        self.proposed_more.push_back(state);
    }

    /// Every slot's current state, the open transaction's changes included.
    pub(crate) fn current_slots(&self) -> impl Iterator<Item = (&SlotKey, &S)> {
        self.current
            .iter()
            .filter_map(|(slot, entry)| Some((slot, entry.state.as_ref()?)))
    }
}

impl<S: Send + 'static> SlotStore for Slots<S> {
    fn accept(&mut self, slot: SlotKey) {
        let state = match self.proposed.take() {
            Some(state) => state,
            None => self
                .proposed_more
                .pop_front()
                .expect("a delivery that writes a slot proposed its state"),
        };
        if state.is_none() {
            self.deleted.push(slot.clone());
        }
        let transaction = self.transaction;
        match self.current.entry(slot) {
            Entry::Occupied(mut occupied) => {
                if let Some(index) = &mut self.index {
                    index.update(
                        occupied.key(),
                        occupied.get().state.as_ref(),
                        state.as_ref(),
                    );
                }
                let entry = occupied.get_mut();
                let committed = std::mem::replace(&mut entry.state, state);
                if entry.changed_in != transaction {
                    entry.changed_in = transaction;
                    self.undo.push((occupied.key().clone(), committed));
                }
            }
            Entry::Vacant(vacant) => {
                if let Some(index) = &mut self.index {
                    index.update(vacant.key(), None, state.as_ref());
                }
                self.undo.push((vacant.key().clone(), None));
                vacant.insert(Slot {
                    state,
                    changed_in: transaction,
                });
            }
        }
    }

    fn restore(&mut self, slot: SlotKey, bytes: Option<&[u8]>) -> Result<(), CodecError> {
        assert!(
            self.undo.is_empty(),
            "slots are restored before any delivery"
        );
        match bytes {
            None => {
                let removed = self.current.remove(&slot);
                if let (Some(index), Some(removed)) = (&mut self.index, removed) {
                    index.update(&slot, removed.state.as_ref(), None);
                }
            }
            Some(bytes) => {
                let codec = self
                    .codec
                    .as_ref()
                    .expect("only stateful stages have a changelog to restore from");
                let state = Some(codec.decode(bytes)?);
                if let Some(index) = &mut self.index {
                    let old = self
                        .current
                        .get(&slot)
                        .and_then(|entry| entry.state.as_ref());
                    index.update(&slot, old, state.as_ref());
                }
                // Changed in no transaction that is open.
                let changed_in = self.transaction.wrapping_sub(1);
                self.current.insert(slot, Slot { state, changed_in });
            }
        }
        Ok(())
    }

    fn commit(&mut self) {
        self.undo.clear();
        for slot in self.deleted.drain(..) {
            // Deleted, unless set again later in the transaction.
            if let Entry::Occupied(entry) = self.current.entry(slot) {
                if entry.get().state.is_none() {
                    entry.remove();
                }
            }
        }
        self.transaction += 1;
    }

    fn abort(&mut self) {
        for (slot, committed) in self.undo.drain(..) {
            let entry = self
                .current
                .get_mut(&slot)
                .expect("a changed slot stays in the map until its transaction ends");
            if let Some(index) = &mut self.index {
                index.update(&slot, entry.state.as_ref(), committed.as_ref());
            }
            match committed {
                Some(state) => entry.state = Some(state),
                None => {
                    self.current.remove(&slot);
                }
            }
        }
        self.deleted.clear();
        self.proposed = None;
        self.transaction += 1;
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
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

    fn set(slots: &mut Slots<i64>, slot: &SlotKey, state: Option<i64>) {
        slots.propose(state);
        slots.accept(slot.clone());
    }

    fn committed_of(slots: &Slots<i64>) -> Vec<(SlotKey, i64)> {
        let mut all: Vec<_> = slots
            .committed_slots()
            .map(|(slot, state)| (slot.clone(), *state))
            .collect();
        all.sort();
        all
    }

    /// X3: in an open transaction, reads see its changes and the committed
    /// view does not, whether a slot was set, changed twice, deleted, or
    /// deleted and set again; an abort puts every committed state back.
    #[test]
    fn x3_open_changes_are_seen_by_reads_and_undone_by_abort() {
        let (a, b, c, d) = (
            SlotKey::Key(Bytes::from_static(b"a")),
            SlotKey::Key(Bytes::from_static(b"b")),
            SlotKey::Key(Bytes::from_static(b"c")),
            SlotKey::Null,
        );
        let mut slots: Slots<i64> = Slots::new(None);
        set(&mut slots, &a, Some(1));
        set(&mut slots, &b, Some(2));
        set(&mut slots, &c, Some(3));
        slots.commit();
        let before = committed_of(&slots);
        assert_eq!(before, [(a.clone(), 1), (b.clone(), 2), (c.clone(), 3)]);

        set(&mut slots, &a, Some(10));
        set(&mut slots, &a, Some(11));
        set(&mut slots, &b, None);
        set(&mut slots, &c, None);
        set(&mut slots, &c, Some(30));
        set(&mut slots, &d, Some(40));
        assert_eq!(
            [&a, &b, &c, &d].map(|slot| slots.get(slot).copied()),
            [Some(11), None, Some(30), Some(40)]
        );
        assert_eq!(slots.committed(&a), Some(&1));
        assert_eq!(slots.committed(&d), None);
        assert_eq!(committed_of(&slots), before);

        slots.abort();
        assert_eq!(
            [&a, &b, &c, &d].map(|slot| slots.get(slot).copied()),
            [Some(1), Some(2), Some(3), None]
        );
        assert_eq!(committed_of(&slots), before);

        set(&mut slots, &b, None);
        set(&mut slots, &c, None);
        set(&mut slots, &c, Some(31));
        slots.commit();
        assert_eq!(committed_of(&slots), [(a.clone(), 1), (c.clone(), 31)]);
        assert_eq!(slots.get(&b), None);
        // A slot deleted and committed is gone, not kept as a tombstone.
        assert_eq!(slots.current.len(), 2);
    }

    /// X3: an abort forgets pending changes; a commit makes them durable.
    #[test]
    fn x3_pending_changes_are_dropped_on_abort() {
        let mut slots: Slots<i64> = Slots::new(None);
        slots.propose(Some(5));
        slots.accept(SlotKey::Null);
        slots.commit();
        slots.propose(Some(9));
        slots.accept(SlotKey::Null);
        assert_eq!(slots.get(&SlotKey::Null), Some(&9));
        slots.abort();
        assert_eq!(slots.get(&SlotKey::Null), Some(&5));
        slots.propose(None);
        slots.accept(SlotKey::Null);
        slots.commit();
        assert_eq!(slots.get(&SlotKey::Null), None);
    }

    /// The test index: a state's time is a tenth of it (so that states
    /// differ and times tie), and a negative state is not indexed.
    fn tenth(state: &i64) -> Option<i64> {
        (*state >= 0).then_some(*state / 10)
    }

    fn indexed() -> Slots<i64> {
        Slots::with_index(Some(Arc::new(crate::codec::I64)), tenth)
    }

    fn restore(slots: &mut Slots<i64>, slot: &SlotKey, state: Option<i64>) {
        let bytes = state.map(|state| crate::codec::I64.encode(&state).unwrap());
        slots.restore(slot.clone(), bytes.as_deref()).unwrap();
    }

    /// The index as it should be: every current state's time, by a scan.
    fn scanned(slots: &Slots<i64>) -> Vec<(i64, SlotKey)> {
        let mut all: Vec<_> = slots
            .current_slots()
            .filter_map(|(slot, state)| Some((tenth(state)?, slot.clone())))
            .collect();
        all.sort();
        all
    }

    fn by_time(slots: &Slots<i64>) -> Vec<(i64, SlotKey)> {
        slots
            .by_time()
            .map(|(time, slot)| (time, slot.clone()))
            .collect()
    }

    #[track_caller]
    fn assert_indexed(slots: &Slots<i64>, expected: &[(i64, &SlotKey)]) {
        let expected: Vec<_> = expected
            .iter()
            .map(|(time, slot)| (*time, (*slot).clone()))
            .collect();
        assert_eq!(by_time(slots), expected);
        assert_eq!(scanned(slots), expected);
    }

    /// The index follows the current states, open transaction included,
    /// through restores, proposals accepted, deletions, aborts and commits;
    /// unindexed states stay out of it, and equal times are in key order.
    #[test]
    fn the_index_follows_the_current_states() {
        let (a, b, c, n) = (
            SlotKey::Key(Bytes::from_static(b"a")),
            SlotKey::Key(Bytes::from_static(b"b")),
            SlotKey::Key(Bytes::from_static(b"c")),
            SlotKey::Null,
        );
        let mut slots = indexed();
        restore(&mut slots, &a, Some(50));
        restore(&mut slots, &b, Some(20));
        restore(&mut slots, &c, Some(-1));
        restore(&mut slots, &b, Some(30));
        restore(&mut slots, &n, Some(70));
        restore(&mut slots, &n, None);
        assert_indexed(&slots, &[(3, &b), (5, &a)]);

        // Set, rewritten at the same time, moved, deleted, unindexed.
        set(&mut slots, &c, Some(31));
        set(&mut slots, &b, Some(39));
        set(&mut slots, &a, Some(10));
        set(&mut slots, &n, Some(0));
        assert_indexed(&slots, &[(0, &n), (1, &a), (3, &b), (3, &c)]);
        set(&mut slots, &a, None);
        set(&mut slots, &b, Some(-5));
        assert_indexed(&slots, &[(0, &n), (3, &c)]);
        slots.abort();
        assert_indexed(&slots, &[(3, &b), (5, &a)]);

        // Deleted and set again in one transaction, then committed.
        set(&mut slots, &a, None);
        set(&mut slots, &a, Some(90));
        set(&mut slots, &b, None);
        set(&mut slots, &c, Some(0));
        slots.commit();
        assert_indexed(&slots, &[(0, &c), (9, &a)]);
        set(&mut slots, &c, None);
        slots.commit();
        assert_indexed(&slots, &[(9, &a)]);
        assert_eq!(slots.current.len(), 1);

        // A restore after commits replaces an indexed state.
        restore(&mut slots, &a, Some(11));
        restore(&mut slots, &b, Some(12));
        restore(&mut slots, &b, None);
        assert_indexed(&slots, &[(1, &a)]);
    }

    /// Slots without an index keep none.
    #[test]
    #[should_panic(expected = "slots made with an index")]
    fn slots_without_an_index_have_no_order_by_time() {
        let slots: Slots<i64> = Slots::new(None);
        let _ = slots.by_time().count();
    }

    /// One operation on indexed slots, as a task drives them.
    #[derive(Clone, Debug)]
    enum Op {
        /// A delivery's state for slot `.0` (`None`: delete), accepted.
        Set(u8, Option<i64>),
        /// A delivery's several states (a timer tick's), accepted in order.
        SetMany(Vec<(u8, Option<i64>)>),
        Commit,
        Abort,
        /// A changelog record, loaded when no transaction has changes.
        Restore(u8, Option<i64>),
    }

    fn slot_of(index: u8) -> SlotKey {
        match index {
            0 => SlotKey::Null,
            1 => SlotKey::Tick,
            index => SlotKey::Key(Bytes::from(vec![index])),
        }
    }

    fn arb_state() -> impl Strategy<Value = Option<i64>> {
        prop_oneof![
            1 => Just(None),
            1 => (-20i64..0).prop_map(Some),
            6 => (0i64..200).prop_map(Some),
        ]
    }

    fn arb_op() -> impl Strategy<Value = Op> {
        let slot = 0u8..12;
        prop_oneof![
            8 => (slot.clone(), arb_state()).prop_map(|(slot, state)| Op::Set(slot, state)),
            1 => proptest::collection::vec((slot.clone(), arb_state()), 1..4).prop_map(Op::SetMany),
            2 => Just(Op::Commit),
            2 => Just(Op::Abort),
            2 => (slot, arb_state()).prop_map(|(slot, state)| Op::Restore(slot, state)),
        ]
    }

    use proptest::prelude::*;

    proptest! {
        /// The index answers as a scan of the current states does, after
        /// every operation of any sequence, aborts included, and the slots'
        /// states are those of slots without an index.
        #[test]
        fn prop_the_index_is_a_scan_of_the_current_states(
            ops in proptest::collection::vec(arb_op(), 0..60),
        ) {
            let mut slots = indexed();
            let mut plain: Slots<i64> = Slots::new(Some(Arc::new(crate::codec::I64)));
            for op in ops {
                match op {
                    Op::Set(slot, state) => {
                        set(&mut slots, &slot_of(slot), state);
                        set(&mut plain, &slot_of(slot), state);
                    }
                    Op::SetMany(states) => {
                        for target in [&mut slots, &mut plain] {
                            target.propose(states[0].1);
                            for (_, state) in &states[1..] {
                                target.propose_more(*state);
                            }
                            for (slot, _) in &states {
                                target.accept(slot_of(*slot));
                            }
                        }
                    }
                    Op::Commit => {
                        slots.commit();
                        plain.commit();
                    }
                    Op::Abort => {
                        slots.abort();
                        plain.abort();
                    }
                    Op::Restore(slot, state) => {
                        if slots.undo.is_empty() {
                            restore(&mut slots, &slot_of(slot), state);
                            restore(&mut plain, &slot_of(slot), state);
                        }
                    }
                }
                prop_assert_eq!(by_time(&slots), scanned(&slots));
                prop_assert_eq!(scanned(&slots), scanned(&plain));
                prop_assert_eq!(committed_of(&slots), committed_of(&plain));
            }
        }
    }
}
