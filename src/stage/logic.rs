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
use crate::operator::Counted;
use crate::record::ConsumedRecord;
use crate::stage::slots::{SlotKey, SlotStore, Slots};
use crate::tp::Tp;

/// What one delivery asks of the task: emissions, and slot changes: the
/// delivery's own slot (the record's key slot, or the tick slot) in
/// `write`, and, for logic whose deliveries read every slot, the other
/// slots it changes, in order.
#[derive(Default)]
pub(crate) struct Outcome {
    pub emissions: Vec<Emission>,
    pub write: Option<SlotWrite>,
    pub more_writes: Vec<SlotWrite>,
    /// What the operator counts of this delivery (a late record, W3; a
    /// late timer request, K2): the task adds it to its metrics by name.
    pub counted: Counted,
    /// A planted bug's (I5): the emissions are written with an empty stamp.
    pub planted_unstamped: bool,
}

impl Outcome {
    /// Emissions and no slot change.
    pub fn emitting(emissions: Vec<Emission>) -> Outcome {
        Outcome {
            emissions,
            ..Outcome::default()
        }
    }
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

impl From<crate::topic::RecordCodecError> for DeliveryFailure {
    /// A record's key or value its topic's codec refuses.
    fn from(refused: crate::topic::RecordCodecError) -> Self {
        DeliveryFailure::Codec {
            part: refused.part,
            error: refused.error,
        }
    }
}

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
    /// Runs the tick logic; logic without any (the task delivers ticks
    /// only to stages that declare them) does nothing.
    fn on_tick(&self, _slots: &mut dyn SlotStore, _tick: Tick) -> Result<Outcome, DeliveryFailure> {
        Ok(Outcome::default())
    }
    /// The next time at which this logic's state changes with time alone,
    /// read from `slots` (a timer due, a window's close, a key's expiry);
    /// `None` for logic that time alone never changes.
    fn next_deadline(&self, _slots: &dyn SlotStore) -> Option<crate::deadline::Deadline> {
        None
    }
    /// Called once the task has restored `slots` from its changelog, before
    /// its first delivery, at wall-clock time `now`.
    fn restored(&self, _slots: &mut dyn SlotStore, _now: i64) {}
    /// [`StageLogic::on_record`] replayed over `slots`, the encoded states
    /// the delivery reads and no others: the record's own slot (absent:
    /// unseen) for logic whose records read one slot, every slot of the
    /// task for logic whose records read every slot
    /// ([`crate::operator::Operator::record_reads_every_slot`]). The pure
    /// delivery, without building slots.
    fn replay_record(
        &self,
        slots: &[(SlotKey, &[u8])],
        source: usize,
        tp: &Tp,
        record: &ConsumedRecord,
    ) -> Result<Outcome, ReplayFailure>;
    /// [`StageLogic::on_tick`] replayed over `slots`: the tick slot alone,
    /// or every slot for logic whose ticks read every slot.
    fn replay_tick(
        &self,
        _slots: &[(SlotKey, &[u8])],
        _tick: Tick,
    ) -> Result<Outcome, ReplayFailure> {
        Ok(Outcome::default())
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
            ..Outcome::default()
        };
        Ok((outcome, step.state))
    }
}

/// The state of the one slot a one-slot replay is given (`None`: unseen).
fn only_slot<'a>(slots: &[(SlotKey, &'a [u8])]) -> Option<&'a [u8]> {
    debug_assert!(
        slots.len() <= 1,
        "a one-slot replay is given at most its own slot"
    );
    slots.first().map(|(_, state)| *state)
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
            TickLogic::Handler(handler) => Ok(Outcome::emitting(handler(&tick)?)),
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
        slots: &[(SlotKey, &[u8])],
        source: usize,
        tp: &Tp,
        record: &ConsumedRecord,
    ) -> Result<Outcome, ReplayFailure> {
        let state = only_slot(slots);
        let slot = SlotKey::for_key(record.data.key.as_ref());
        let state = self
            .replay_read(&slot, &slot, state)
            .map_err(ReplayFailure::State)?;
        let step = (self.sources[source])(state_or_unit(state), tp, record)?;
        Ok(self.outcome(slot, step)?.0)
    }

    fn replay_tick(
        &self,
        slots: &[(SlotKey, &[u8])],
        tick: Tick,
    ) -> Result<Outcome, ReplayFailure> {
        let state = only_slot(slots);
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
            TickLogic::Handler(handler) => Ok(Outcome::emitting(handler(&tick)?)),
            TickLogic::Fold(fold) => {
                let step = fold(state_or_unit(state), &tick)?;
                Ok(self.outcome(slot, step)?.0)
            }
        }
    }
}
