//! Expiring state's built-in logic (E1–E3): one implementation, run by the
//! task over its slots and by the pure replay over the slots it is given,
//! so every driver and every checker sees the same expiry.

use bytes::Bytes;
use std::collections::HashMap;
use std::sync::Arc;

use crate::codec::Codec;
use crate::deadline::{Deadline, DeadlineKind, TimeDomain};
use crate::emission::{Emission, Record, Step, Tick};
use crate::mutation::{self, Mutation};
use crate::record::ConsumedRecord;
use crate::stage::logic::{guarded, DeliveryFailure, Outcome, ReplayFailure, StageLogic};
use crate::stage::slots::{SlotKey, SlotStore, Slots};
use crate::stage::wide::{self, SlotChanges};
use crate::topic::Topic;
use crate::tp::Tp;

use super::state::{Clock, ExpirySlot, ExpirySlotCodec};
use super::{Expire, Since};

pub(crate) type FoldFn<K, V, S> =
    Arc<dyn Fn(S, &Record<K, V>) -> Result<Step<S>, String> + Send + Sync>;

pub(crate) struct ExpiryLogic<K, V, S> {
    pub source: Topic<K, V>,
    /// The time to live, in milliseconds.
    pub ttl: i64,
    pub since: Since,
    pub expire: Expire,
    pub init: Arc<dyn Fn() -> S + Send + Sync>,
    pub fold: FoldFn<K, V, S>,
    pub codec: Arc<ExpirySlotCodec<S>>,
}

/// The slots one delivery reads: the task's own, or those a replay is given.
trait View<S> {
    fn slot(&self, slot: &SlotKey) -> Option<&ExpirySlot<S>>;
    /// The key slots but `own` that `expired` says are gone, in no
    /// particular order, and the earliest expiry time of the others.
    /// `expired` is monotone: when it holds for a time, it holds for every
    /// earlier one.
    fn due(
        &self,
        own: Option<&SlotKey>,
        expired: &dyn Fn(i64) -> bool,
    ) -> (Vec<SlotKey>, Option<i64>);
}

/// The task's own slots, indexed by expiry time: only the slots due and the
/// first of the others are visited.
impl<S: Send + 'static> View<S> for Slots<ExpirySlot<S>> {
    fn slot(&self, slot: &SlotKey) -> Option<&ExpirySlot<S>> {
        self.get(slot)
    }

    fn due(
        &self,
        own: Option<&SlotKey>,
        expired: &dyn Fn(i64) -> bool,
    ) -> (Vec<SlotKey>, Option<i64>) {
        let mut due = Vec::new();
        for (expires_at, slot) in self.by_time() {
            if Some(slot) == own {
                continue;
            }
            if !expired(expires_at) {
                return (due, Some(expires_at));
            }
            due.push(slot.clone());
        }
        (due, None)
    }
}

/// A replay's slots: every one is visited, independently of the task's
/// index.
impl<S> View<S> for HashMap<SlotKey, ExpirySlot<S>> {
    fn slot(&self, slot: &SlotKey) -> Option<&ExpirySlot<S>> {
        self.get(slot)
    }

    fn due(
        &self,
        own: Option<&SlotKey>,
        expired: &dyn Fn(i64) -> bool,
    ) -> (Vec<SlotKey>, Option<i64>) {
        let mut due = Vec::new();
        let mut next: Option<i64> = None;
        for (slot, state) in self {
            let ExpirySlot::Entry { expires_at, .. } = state else {
                continue;
            };
            if Some(slot) == own {
                continue;
            }
            match expired(*expires_at) {
                true => due.push(slot.clone()),
                false => next = Some(next.map_or(*expires_at, |next| next.min(*expires_at))),
            }
        }
        (due, next)
    }
}

/// An expiring slot's place in the task's index: a key's expiry time (the
/// clock is not indexed).
fn expiry_of<S>(slot: &ExpirySlot<S>) -> Option<i64> {
    match slot {
        ExpirySlot::Entry { expires_at, .. } => Some(*expires_at),
        ExpirySlot::Clock(_) => None,
    }
}

/// What one delivery changes: the delivery's own slot (a record's key),
/// the others (expired keys, the clock) in key order, and its emissions.
type Change<S> = SlotChanges<ExpirySlot<S>>;

impl<K, V, S> ExpiryLogic<K, V, S>
where
    K: Send + Sync + 'static,
    V: Send + Sync + 'static,
    S: Clone + Send + Sync + 'static,
{
    fn clock(view: &dyn View<S>) -> Clock {
        match view.slot(&SlotKey::Tick) {
            Some(ExpirySlot::Clock(clock)) => *clock,
            _ => Clock::default(),
        }
    }

    /// E2: whether state expiring at `expires_at` is gone at `frontier`.
    fn expired(&self, expires_at: i64, frontier: i64) -> bool {
        // Planted bugs (I14): state that never expires, or expires halfway
        // through its time.
        if mutation::active(Mutation::ExpiryNeverExpires) {
            return false;
        }
        if mutation::active(Mutation::ExpiryHalfTtlEarly) {
            return expires_at.saturating_sub(self.ttl / 2) <= frontier;
        }
        // Planted bug (I14): state gone a millisecond before its time.
        if mutation::active(Mutation::ExpiryOneMsEarly) {
            return expires_at.saturating_sub(1) <= frontier;
        }
        expires_at <= frontier
    }

    /// E1, E3: a record's delivery: the frontier moves, what is due
    /// expires, the fold runs on the key's live state or `init()`.
    fn record(
        &self,
        view: &dyn View<S>,
        tp: &Tp,
        consumed: &ConsumedRecord,
    ) -> Result<Change<S>, DeliveryFailure> {
        let record = self.source.decode(tp, consumed)?;
        let Some(key) = &consumed.data.key else {
            return Err(DeliveryFailure::Logic(format!(
                "E1 (docs/RULES.md#e1): record {tp}@{} has no key, and expiring state is kept per key",
                consumed.offset
            )));
        };
        let timestamp = consumed.data.timestamp;
        if timestamp < 0 {
            return Err(DeliveryFailure::Logic(format!(
                "E1 (docs/RULES.md#e1): record {tp}@{} has no timestamp ({timestamp}), and its state's time to live runs from it",
                consumed.offset
            )));
        }
        let mut clock = Self::clock(view);
        if self.expire == Expire::StreamTime {
            clock.frontier = clock.frontier.max(timestamp);
        }
        let slot = SlotKey::Key(key.clone());
        let live = match view.slot(&slot) {
            Some(ExpirySlot::Entry { state, expires_at })
                if !self.expired(*expires_at, clock.frontier) =>
            {
                Some((state.clone(), *expires_at))
            }
            _ => None,
        };
        let had_slot = matches!(view.slot(&slot), Some(ExpirySlot::Entry { .. }));
        let state = live
            .as_ref()
            .map_or_else(|| (self.init)(), |(state, _)| state.clone());
        let step = guarded(|| (self.fold)(state, &record))?;
        // The own slot's new state, when the delivery writes it, and its
        // expiry time when it stays live.
        let (own, own_expiry) = match step.state {
            Some(state) => {
                let expires_at = match (self.since, &live) {
                    (Since::FirstWrite, Some((_, expires_at))) => *expires_at,
                    _ => timestamp.saturating_add(self.ttl),
                };
                match self.expired(expires_at, clock.frontier) {
                    // Born expired: a record ttl or more behind the frontier.
                    true => (had_slot.then_some(None), None),
                    false => (
                        Some(Some(ExpirySlot::Entry { state, expires_at })),
                        Some(expires_at),
                    ),
                }
            }
            None => (had_slot.then_some(None), None),
        };
        let mut change = self.expire_due(view, clock, Some((&slot, own_expiry)), step.emissions)?;
        change.own = own.map(|state| (slot, state));
        Ok(change)
    }

    /// E2: a tick moves a wall-clock frontier to its time.
    fn tick(&self, view: &dyn View<S>, tick: Tick) -> Result<Change<S>, DeliveryFailure> {
        let mut clock = Self::clock(view);
        clock.frontier = clock.frontier.max(tick.timestamp);
        self.expire_due(view, clock, None, Vec::new())
    }

    /// E2: deletes every key (but `own`, which the delivery writes itself,
    /// with its new expiry time when it stays live) whose state the
    /// frontier of `clock` has reached, when one is due, and writes the
    /// clock when it changed.
    fn expire_due(
        &self,
        view: &dyn View<S>,
        mut clock: Clock,
        own: Option<(&SlotKey, Option<i64>)>,
        emissions: Vec<Emission>,
    ) -> Result<Change<S>, DeliveryFailure> {
        let before = Self::clock(view);
        let (own_slot, own_expiry) = match own {
            Some((slot, expiry)) => (Some(slot), expiry),
            None => (None, None),
        };
        let earliest = |a: Option<i64>, b: Option<i64>| match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let mut others = Vec::new();
        // A planted bug (I14) expires before `next_expiry`: it looks always.
        let due = clock.next_expiry.is_some_and(|next| {
            next <= clock.frontier
                || mutation::active(Mutation::ExpiryHalfTtlEarly)
                || (mutation::active(Mutation::ExpiryOneMsEarly) && next - 1 <= clock.frontier)
        });
        if due {
            let frontier = clock.frontier;
            let (mut expired, next) =
                view.due(own_slot, &|expires_at| self.expired(expires_at, frontier));
            clock.next_expiry = earliest(next, own_expiry);
            // Slots in key order: the changelog's order is the delivery's.
            expired.sort();
            others.extend(expired.into_iter().map(|slot| (slot, None)));
        } else {
            clock.next_expiry = earliest(clock.next_expiry, own_expiry);
        }
        if clock != before {
            others.insert(0, (SlotKey::Tick, Some(ExpirySlot::Clock(clock))));
        }
        Ok(SlotChanges {
            own: None,
            others,
            emissions,
        })
    }

    fn slots(slots: &mut dyn SlotStore) -> &mut Slots<ExpirySlot<S>> {
        slots
            .as_any_mut()
            .downcast_mut::<Slots<ExpirySlot<S>>>()
            .expect("an expiring fold's slots hold expiring state")
    }
}

/// The user's fold of an expiring fold with its topics' codecs, for the
/// harness's oracle ([`super::ExpiryDecl::initial`] and
/// [`super::ExpiryDecl::fold`]): states travel encoded with the state's
/// codec.
pub(crate) trait ExpiringFold: Send + Sync {
    fn initial(&self) -> Result<Bytes, DeliveryFailure>;
    fn fold(
        &self,
        state: &[u8],
        tp: &Tp,
        record: &ConsumedRecord,
    ) -> Result<(Option<Bytes>, Vec<Emission>), DeliveryFailure>;
}

impl<K, V, S> ExpiringFold for ExpiryLogic<K, V, S>
where
    K: Send + Sync + 'static,
    V: Send + Sync + 'static,
    S: Clone + Send + Sync + 'static,
{
    fn initial(&self) -> Result<Bytes, DeliveryFailure> {
        let state = guarded(|| Ok((self.init)()))?;
        self.codec
            .state
            .encode(&state)
            .map_err(DeliveryFailure::StateCodec)
    }

    fn fold(
        &self,
        state: &[u8],
        tp: &Tp,
        consumed: &ConsumedRecord,
    ) -> Result<(Option<Bytes>, Vec<Emission>), DeliveryFailure> {
        let state = self
            .codec
            .state
            .decode(state)
            .map_err(DeliveryFailure::StateCodec)?;
        let record = self.source.decode(tp, consumed)?;
        let step = guarded(|| (self.fold)(state, &record))?;
        let state = step
            .state
            .map(|state| self.codec.state.encode(&state))
            .transpose()
            .map_err(DeliveryFailure::StateCodec)?;
        Ok((state, step.emissions))
    }
}

impl<K, V, S> StageLogic for ExpiryLogic<K, V, S>
where
    K: Send + Sync + 'static,
    V: Send + Sync + 'static,
    S: Clone + Send + Sync + 'static,
{
    fn next_deadline(&self, slots: &dyn SlotStore) -> Option<Deadline> {
        let slots = slots.as_any().downcast_ref::<Slots<ExpirySlot<S>>>()?;
        let at = Self::clock(slots).next_expiry?;
        let domain = match self.expire {
            Expire::StreamTime => TimeDomain::EventTime,
            Expire::WallClock { .. } => TimeDomain::WallClock,
        };
        Some(Deadline {
            at,
            domain,
            kind: DeadlineKind::Expiry,
        })
    }

    fn new_slots(&self) -> Box<dyn SlotStore> {
        let codec: Arc<dyn Codec<ExpirySlot<S>>> = self.codec.clone();
        Box::new(Slots::<ExpirySlot<S>>::with_index(
            Some(codec),
            expiry_of::<S>,
        ))
    }

    fn on_record(
        &self,
        slots: &mut dyn SlotStore,
        _source: usize,
        tp: &Tp,
        record: &ConsumedRecord,
    ) -> Result<Outcome, DeliveryFailure> {
        let slots = Self::slots(slots);
        let change = self.record(&*slots, tp, record)?;
        let (outcome, states) = wide::outcome(&*self.codec, change)?;
        wide::propose(slots, states);
        Ok(outcome)
    }

    fn on_tick(&self, slots: &mut dyn SlotStore, tick: Tick) -> Result<Outcome, DeliveryFailure> {
        let slots = Self::slots(slots);
        let change = self.tick(&*slots, tick)?;
        let (outcome, states) = wide::outcome(&*self.codec, change)?;
        wide::propose(slots, states);
        Ok(outcome)
    }

    fn replay_record(
        &self,
        slots: &[(SlotKey, &[u8])],
        _source: usize,
        tp: &Tp,
        record: &ConsumedRecord,
    ) -> Result<Outcome, ReplayFailure> {
        let view = wide::decoded(&*self.codec, slots)?;
        let change = self.record(&view, tp, record)?;
        Ok(wide::outcome(&*self.codec, change)?.0)
    }

    fn replay_tick(
        &self,
        slots: &[(SlotKey, &[u8])],
        tick: Tick,
    ) -> Result<Outcome, ReplayFailure> {
        let view = wide::decoded(&*self.codec, slots)?;
        let change = self.tick(&view, tick)?;
        Ok(wide::outcome(&*self.codec, change)?.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use proptest::prelude::*;

    type Indexed = Slots<ExpirySlot<i64>>;

    fn slot_of(index: u8) -> SlotKey {
        match index {
            0 => SlotKey::Tick,
            index => SlotKey::Key(Bytes::from(vec![index])),
        }
    }

    /// A slot's new state: a key's entry expiring at `.1`, or a deletion;
    /// the tick slot holds a clock.
    fn state_of(slot: &SlotKey, expires_at: Option<i64>) -> Option<ExpirySlot<i64>> {
        let expires_at = expires_at?;
        Some(match slot {
            SlotKey::Tick => ExpirySlot::Clock(Clock {
                frontier: expires_at,
                next_expiry: None,
            }),
            _ => ExpirySlot::Entry {
                state: expires_at,
                expires_at,
            },
        })
    }

    #[derive(Clone, Debug)]
    enum Op {
        Set(u8, Option<i64>),
        Commit,
        Abort,
    }

    fn arb_op() -> impl Strategy<Value = Op> {
        prop_oneof![
            8 => (0u8..16, proptest::option::weighted(0.85, -5i64..40))
                .prop_map(|(slot, at)| Op::Set(slot, at)),
            1 => Just(Op::Commit),
            1 => Just(Op::Abort),
        ]
    }

    /// What is due, in key order, and the next expiry.
    fn due(
        view: &dyn View<i64>,
        own: Option<&SlotKey>,
        expired: &dyn Fn(i64) -> bool,
    ) -> (Vec<SlotKey>, Option<i64>) {
        let (mut due, next) = view.due(own, expired);
        due.sort();
        (due, next)
    }

    proptest! {
        /// The task's indexed slots find the same slots due and the same
        /// next expiry as a scan of the same states (the replay's view),
        /// after any sequence of changes, aborts included, for any own slot
        /// and any monotone expiry: on time, early by some time (the
        /// planted bugs), or never.
        #[test]
        fn prop_indexed_due_is_the_scans(
            ops in proptest::collection::vec(arb_op(), 0..80),
            own in proptest::option::of(0u8..16),
            frontier in -8i64..45,
            early in 0i64..10,
        ) {
            let mut slots = Indexed::with_index(None, expiry_of::<i64>);
            for op in ops {
                match op {
                    Op::Set(index, at) => {
                        let slot = slot_of(index);
                        slots.propose(state_of(&slot, at));
                        slots.accept(slot);
                    }
                    Op::Commit => slots.commit(),
                    Op::Abort => slots.abort(),
                }
            }
            let scan: HashMap<SlotKey, ExpirySlot<i64>> = slots
                .current_slots()
                .map(|(slot, state)| (slot.clone(), state.clone()))
                .collect();
            let own = own.map(slot_of);
            let on_time = |at: i64| at <= frontier;
            let early = |at: i64| at.saturating_sub(early) <= frontier;
            let never = |_: i64| false;
            let rules: [&dyn Fn(i64) -> bool; 3] = [&on_time, &early, &never];
            for expired in rules {
                prop_assert_eq!(
                    due(&slots, own.as_ref(), expired),
                    due(&scan, own.as_ref(), expired)
                );
            }
        }
    }
}
