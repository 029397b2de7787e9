//! A stage's logic with its types erased, so one [`crate::task::Task`] runs
//! every stage: the closures decode records with their topic's codecs, call
//! the user's fold or handler (catching panics, X5), and return the outcome
//! for the task to check and apply.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use bytes::Bytes;

use crate::codec::{Codec, CodecError};
use crate::emission::{Emission, Step, Tick};
use crate::record::ConsumedRecord;
use crate::stage::slots::{SlotKey, SlotStore, Slots};
use crate::tp::{TopicName, Tp};

/// What one delivery asks of the task: emissions, and slot changes: the
/// delivery's own slot (the record's key slot, or the tick slot) in
/// `write`, and, for the timer service's ticks alone (K2), the key slots it
/// changes, in order.
pub(crate) struct Outcome {
    pub emissions: Vec<Emission>,
    pub write: Option<SlotWrite>,
    pub more_writes: Vec<SlotWrite>,
    /// A timer service's delivery of a request for a time before its own
    /// timestamp (K2): it fires at the next tick, and the task counts it.
    pub late_timer_request: bool,
    /// A windowed aggregation's delivery of a record too late for one of
    /// its windows (W3): the task counts it.
    pub late_window_record: bool,
}

/// A slot change, encoded for the changelog (`None` deletes the slot). In a
/// task the typed state waits in the slots, proposed, until the task
/// accepts the outcome ([`SlotStore::accept`]).
pub(crate) struct SlotWrite {
    pub slot: SlotKey,
    pub encoded: Option<Bytes>,
}

/// Why a delivery produced no outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DeliveryFailure {
    /// The record's key or value did not decode.
    Codec { part: RecordPart, error: CodecError },
    /// The fold's new state did not encode.
    StateCodec(CodecError),
    /// The fold or handler returned an error or panicked.
    Logic(String),
}

pub use crate::topic::RecordPart;

/// The erased logic of a stage.
pub(crate) trait StageLogic: Send + Sync {
    fn new_slots(&self) -> Box<dyn SlotStore>;
    /// Runs the fold or handler of `source` on `record`; a new state is
    /// proposed to `slots`, for the task to accept with the outcome.
    fn on_record(
        &self,
        slots: &mut dyn SlotStore,
        source: usize,
        tp: &Tp,
        record: &ConsumedRecord,
    ) -> Result<Outcome, DeliveryFailure>;
    fn on_tick(&self, slots: &mut dyn SlotStore, tick: Tick) -> Result<Outcome, DeliveryFailure>;
    /// The next time at which this logic's state changes with time alone,
    /// read from `slots` (a timer due, a window's close, a key's expiry);
    /// `None` for logic that time alone never changes.
    fn next_deadline(&self, _slots: &dyn SlotStore) -> Option<crate::task::Deadline> {
        None
    }
    /// [`StageLogic::on_record`] with the record's slot holding `state`
    /// (encoded; `None`: unseen) and no other slot: the pure fold, without
    /// building slots.
    fn replay_record(
        &self,
        state: Option<&[u8]>,
        source: usize,
        tp: &Tp,
        record: &ConsumedRecord,
    ) -> Result<Outcome, ReplayFailure>;
    /// [`StageLogic::on_tick`] with the tick slot holding `state`.
    fn replay_tick(&self, state: Option<&[u8]>, tick: Tick) -> Result<Outcome, ReplayFailure>;
    /// [`StageLogic::on_tick`] for logic whose ticks read every key slot
    /// (the timer service, K2), given every slot's encoded state.
    fn replay_tick_over_slots(
        &self,
        _slots: &[(SlotKey, &[u8])],
        _tick: Tick,
    ) -> Result<Outcome, ReplayFailure> {
        unreachable!("Stage::replay_tick_over_slots refuses stages whose ticks read one slot")
    }
    /// [`StageLogic::on_record`] for logic whose records read every slot (a
    /// windowed aggregation, W2), given every slot's encoded state.
    fn replay_record_over_slots(
        &self,
        _slots: &[(SlotKey, &[u8])],
        _source: usize,
        _tp: &Tp,
        _record: &ConsumedRecord,
    ) -> Result<Outcome, ReplayFailure> {
        unreachable!("Stage::replay_record_over_slots refuses stages whose records read one slot")
    }
    /// A windowed aggregation's (W4) output record for the window `bounds`
    /// of `key` holding `records`, by its own fold and codecs; `None` for
    /// other logic.
    fn window_emission(
        &self,
        _key: &[u8],
        _bounds: (i64, i64),
        _records: &[(&Tp, &ConsumedRecord)],
    ) -> Option<Result<(Bytes, Bytes), DeliveryFailure>> {
        None
    }
    /// An expiring fold's (I14) fold from its initial state over `records`
    /// (one key's, in delivery order): the last record's emissions, and
    /// whether the state is kept after it; `None` for other logic.
    #[allow(clippy::type_complexity)]
    fn expiring_fold(
        &self,
        _records: &[(&Tp, &ConsumedRecord)],
    ) -> Option<Result<(Vec<Emission>, bool), DeliveryFailure>> {
        None
    }
    /// A table–table join's (J8) result value bytes for `key` with these
    /// sides, `None` inside when the key has no result; `None` for other
    /// logic.
    fn table_joined(
        &self,
        _key: &[u8],
        _left: Option<&[u8]>,
        _right: Option<&[u8]>,
    ) -> Option<Result<Option<Bytes>, DeliveryFailure>> {
        None
    }
    /// The key a re-key within this stage (R3) whose copies go to
    /// `repartition` selects for a record the stage wrote with these key
    /// and value bytes (`None` inside: a null key); `None` when no re-key
    /// of this stage writes `repartition`.
    #[allow(clippy::type_complexity)]
    fn rekeyed_key(
        &self,
        _repartition: &TopicName,
        _key: Option<&Bytes>,
        _value: &Bytes,
    ) -> Option<Result<Option<Bytes>, DeliveryFailure>> {
        None
    }
    /// A stream–table join's (J2) output record for the stream record
    /// `record` of `tp` when its key's row is `row` (the table's value
    /// bytes): key and value bytes, or `None` for no output; `None` for
    /// other logic.
    #[allow(clippy::type_complexity)]
    fn joined(
        &self,
        _tp: &Tp,
        _record: &ConsumedRecord,
        _row: Option<&[u8]>,
    ) -> Option<Result<Option<(Option<Bytes>, Bytes)>, DeliveryFailure>> {
        None
    }
}

/// Why a replay failed: the given state does not decode, or the delivery
/// itself fails as it would in a task.
#[derive(Debug)]
pub(crate) enum ReplayFailure {
    State(CodecError),
    Delivery(DeliveryFailure),
}

impl From<DeliveryFailure> for ReplayFailure {
    fn from(failure: DeliveryFailure) -> Self {
        ReplayFailure::Delivery(failure)
    }
}

/// A return value that may be an error: plain values and `Result`s alike, so
/// `on` takes infallible and fallible logic with one signature.
pub trait Fallible<T> {
    /// The value, or the error as text.
    fn into_result(self) -> Result<T, String>;
}

impl<T> Fallible<T> for T {
    fn into_result(self) -> Result<T, String> {
        Ok(self)
    }
}

impl<T, E: std::fmt::Display> Fallible<T> for Result<T, E> {
    fn into_result(self) -> Result<T, String> {
        self.map_err(|error| error.to_string())
    }
}

/// Runs user logic, turning a panic into a logic failure (X5).
pub(crate) fn guarded<T>(logic: impl FnOnce() -> Result<T, String>) -> Result<T, DeliveryFailure> {
    match catch_unwind(AssertUnwindSafe(logic)) {
        Ok(result) => result.map_err(DeliveryFailure::Logic),
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|text| text.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panic with a non-string payload".to_string());
            Err(DeliveryFailure::Logic(format!("panicked: {message}")))
        }
    }
}

pub(crate) type SourceFn<S> =
    Arc<dyn Fn(S, &Tp, &ConsumedRecord) -> Result<Step<S>, DeliveryFailure> + Send + Sync>;
pub(crate) type TickHandlerFn =
    Arc<dyn Fn(&Tick) -> Result<Vec<Emission>, DeliveryFailure> + Send + Sync>;
pub(crate) type TickFoldFn<S> =
    Arc<dyn Fn(S, &Tick) -> Result<Step<S>, DeliveryFailure> + Send + Sync>;

pub(crate) enum TickLogic<S> {
    Handler(TickHandlerFn),
    Fold(TickFoldFn<S>),
}

pub(crate) struct StateDecl<S> {
    pub codec: Arc<dyn Codec<S>>,
    pub init: Arc<dyn Fn() -> S + Send + Sync>,
}

/// The typed logic behind [`StageLogic`]. Stateless stages are the case
/// `S = ()` with no state declaration: their folds always return the unit
/// state, and nothing is ever written to a slot.
pub(crate) struct TypedLogic<S> {
    pub state: Option<StateDecl<S>>,
    pub sources: Vec<SourceFn<S>>,
    pub tick: Option<TickLogic<S>>,
}

impl<S: Clone + Send + Sync + 'static> TypedLogic<S> {
    fn slots<'a>(&self, slots: &'a mut dyn SlotStore) -> &'a mut Slots<S> {
        slots
            .as_any_mut()
            .downcast_mut::<Slots<S>>()
            .expect("a task's slots have its stage's state type")
    }

    fn read(&self, slots: &Slots<S>, slot: &SlotKey) -> Option<S> {
        let decl = self.state.as_ref()?;
        Some(slots.get(slot).cloned().unwrap_or_else(|| (decl.init)()))
    }

    /// The outcome of a delivery in a task: the new state is proposed to
    /// the slots rather than carried in the outcome.
    fn delivered(
        &self,
        slots: &mut Slots<S>,
        slot: SlotKey,
        step: Step<S>,
    ) -> Result<Outcome, DeliveryFailure> {
        let (outcome, state) = self.outcome(slot, step)?;
        if outcome.write.is_some() {
            slots.propose(state);
        }
        Ok(outcome)
    }

    /// The state a replay reads from `slot` when only `restored` holds the
    /// encoded `state`: what [`TypedLogic::read`] would return from slots
    /// restored with that one record.
    fn replay_read(
        &self,
        slot: &SlotKey,
        restored: &SlotKey,
        state: Option<&[u8]>,
    ) -> Result<Option<S>, CodecError> {
        let Some(decl) = &self.state else {
            return Ok(None);
        };
        let decoded = match state {
            Some(bytes) if slot == restored => Some(decl.codec.decode(bytes)?),
            // A state that does not decode fails the replay wherever it
            // sits, as restoring it would.
            Some(bytes) => {
                decl.codec.decode(bytes)?;
                None
            }
            None => None,
        };
        Ok(Some(decoded.unwrap_or_else(|| (decl.init)())))
    }

    /// The slot a tick fold reads and writes.
    fn tick_slot() -> SlotKey {
        match crate::mutation::active(crate::mutation::Mutation::TickSlotIsNullSlot) {
            true => SlotKey::Null,
            false => SlotKey::Tick,
        }
    }

    /// The outcome of `step` on `slot`, and the step's new state.
    fn outcome(
        &self,
        slot: SlotKey,
        step: Step<S>,
    ) -> Result<(Outcome, Option<S>), DeliveryFailure> {
        let write = match &self.state {
            None => None,
            Some(decl) => {
                let encoded = step
                    .state
                    .as_ref()
                    .map(|state| crate::codec::encode_chunked(&*decl.codec, state))
                    .transpose()
                    .map_err(DeliveryFailure::StateCodec)?;
                Some(SlotWrite { slot, encoded })
            }
        };
        let outcome = Outcome {
            emissions: step.emissions,
            write,
            more_writes: Vec::new(),
            late_timer_request: false,
            late_window_record: false,
        };
        Ok((outcome, step.state))
    }
}

/// For stateless stages, `read` yields no state; the unit state stands in.
fn state_or_unit<S: 'static>(state: Option<S>) -> S {
    match state {
        Some(state) => state,
        None => *(Box::new(()) as Box<dyn Any>)
            .downcast::<S>()
            .expect("only stateless stages (S = ()) run without a state declaration"),
    }
}

impl<S: Clone + Send + Sync + 'static> StageLogic for TypedLogic<S> {
    fn new_slots(&self) -> Box<dyn SlotStore> {
        Box::new(Slots::<S>::new(
            self.state.as_ref().map(|decl| Arc::clone(&decl.codec)),
        ))
    }

    fn on_record(
        &self,
        slots: &mut dyn SlotStore,
        source: usize,
        tp: &Tp,
        record: &ConsumedRecord,
    ) -> Result<Outcome, DeliveryFailure> {
        let slots = self.slots(slots);
        let slot = SlotKey::for_key(record.data.key.as_ref());
        let state = state_or_unit(self.read(slots, &slot));
        let step = (self.sources[source])(state, tp, record)?;
        self.delivered(slots, slot, step)
    }

    fn on_tick(&self, slots: &mut dyn SlotStore, tick: Tick) -> Result<Outcome, DeliveryFailure> {
        match self
            .tick
            .as_ref()
            .expect("ticks are delivered only to stages that declare them")
        {
            TickLogic::Handler(handler) => Ok(Outcome {
                emissions: handler(&tick)?,
                write: None,
                more_writes: Vec::new(),
                late_timer_request: false,
                late_window_record: false,
            }),
            TickLogic::Fold(fold) => {
                let slots = self.slots(slots);
                let slot = Self::tick_slot();
                let state = state_or_unit(self.read(slots, &slot));
                let step = fold(state, &tick)?;
                self.delivered(slots, slot, step)
            }
        }
    }

    fn replay_record(
        &self,
        state: Option<&[u8]>,
        source: usize,
        tp: &Tp,
        record: &ConsumedRecord,
    ) -> Result<Outcome, ReplayFailure> {
        let slot = SlotKey::for_key(record.data.key.as_ref());
        let state = self
            .replay_read(&slot, &slot, state)
            .map_err(ReplayFailure::State)?;
        let step = (self.sources[source])(state_or_unit(state), tp, record)?;
        Ok(self.outcome(slot, step)?.0)
    }

    fn replay_tick(&self, state: Option<&[u8]>, tick: Tick) -> Result<Outcome, ReplayFailure> {
        let tick_logic = self
            .tick
            .as_ref()
            .expect("ticks are replayed only for stages that declare them");
        // The given state sits in the tick slot, decoded (and so checked)
        // even by a tick handler that never reads it.
        let slot = Self::tick_slot();
        let state = self
            .replay_read(&slot, &SlotKey::Tick, state)
            .map_err(ReplayFailure::State)?;
        match tick_logic {
            TickLogic::Handler(handler) => Ok(Outcome {
                emissions: handler(&tick)?,
                write: None,
                more_writes: Vec::new(),
                late_timer_request: false,
                late_window_record: false,
            }),
            TickLogic::Fold(fold) => {
                let step = fold(state_or_unit(state), &tick)?;
                Ok(self.outcome(slot, step)?.0)
            }
        }
    }
}
