//! What a checker or the audit asks of a stage ([`Stage::hooks`]): its
//! logic replayed over encoded slots, and the operators it holds.

use super::logic;
use super::*;

/// A stage's hooks for the checker and the audit, from [`Stage::hooks`].
#[derive(Clone, Copy)]
pub struct StageHooks<'a> {
    pub(super) stage: &'a Stage,
}

impl<'a> StageHooks<'a> {
    /// Runs the stage's logic for one record of `source`, given the slot's
    /// encoded state (`None`: unseen). Nothing else is touched: this is the
    /// pure fold, for checkers that recompute what a run should have
    /// committed without trusting the task that ran it.
    pub fn replay_record(
        &self,
        source: &crate::tp::TopicName,
        state: Option<&[u8]>,
        tp: &Tp,
        record: &ConsumedRecord,
    ) -> Result<Replayed, ReplayError> {
        let index = self.source_index(source)?;
        if self.record_reads_every_slot() {
            return Err(ReplayError::ReadsEverySlot {
                stage: self.stage.def.name.clone(),
            });
        }
        let slot = SlotKey::for_key(record.data.key.as_ref());
        let slots: Vec<(SlotKey, &[u8])> = state.map(|state| (slot, state)).into_iter().collect();
        let outcome = self
            .stage
            .def
            .logic
            .replay_record(&slots, index, tp, record)?;
        Ok(replayed(outcome))
    }

    fn source_index(&self, source: &TopicName) -> Result<usize, ReplayError> {
        self.stage
            .def
            .sources
            .iter()
            .position(|declared| declared.name == *source)
            .ok_or_else(|| ReplayError::UnknownSource {
                stage: self.stage.def.name.clone(),
                topic: source.clone(),
            })
    }

    /// Whether a record's delivery reads every slot of its task, not only
    /// its key's: its operator says ([`Operator::record_reads_every_slot`]:
    /// a windowed aggregation's, an expiring fold's, a stream–stream
    /// join's). Replay such a stage's records with
    /// [`StageHooks::replay_record_over_slots`].
    pub fn record_reads_every_slot(&self) -> bool {
        self.stage
            .def
            .operators
            .iter()
            .any(|operator| operator.record_reads_every_slot())
    }

    /// Whether a tick's delivery reads every slot of its task, not only the
    /// tick slot: its operator says ([`Operator::tick_reads_every_slot`]: a
    /// timer service's, a windowed aggregation's, an expiring fold's).
    /// Replay such a stage's ticks with [`StageHooks::replay_tick_over_slots`].
    pub fn tick_reads_every_slot(&self) -> bool {
        self.stage
            .def
            .operators
            .iter()
            .any(|operator| operator.tick_reads_every_slot())
    }

    /// The declaration of this stage's operator of type `O` (a
    /// [`crate::window::WindowDecl`], a [`crate::join::JoinDecl`], …), if it
    /// has one: how a driver or a checker that knows an operator finds it.
    pub fn operator<O: Operator>(&self) -> Option<&'a O> {
        self.operators::<O>().next()
    }

    /// Every operator of type `O` of this stage, in the order they were
    /// declared (a stage may re-key several of its outputs, R3).
    pub fn operators<O: Operator>(&self) -> impl Iterator<Item = &'a O> + 'a {
        self.stage
            .def
            .operators
            .iter()
            .filter_map(|operator| operator.as_any().downcast_ref::<O>())
    }

    /// Runs the stage's logic for one record of `source` whose delivery
    /// reads every slot ([`StageHooks::record_reads_every_slot`]), given every
    /// slot's encoded state (the tick slot's too); the record's own slot's
    /// change is in [`Replayed::slot`], the others' in
    /// [`Replayed::other_slots`].
    pub fn replay_record_over_slots(
        &self,
        source: &TopicName,
        slots: &[(SlotKey, &[u8])],
        tp: &Tp,
        record: &ConsumedRecord,
    ) -> Result<Replayed, ReplayError> {
        let index = self.source_index(source)?;
        if !self.record_reads_every_slot() {
            return Err(ReplayError::ReadsOneSlot {
                stage: self.stage.def.name.clone(),
            });
        }
        let outcome = self
            .stage
            .def
            .logic
            .replay_record(slots, index, tp, record)?;
        Ok(replayed(outcome))
    }

    /// Runs the stage's tick logic for one tick, given the tick slot's
    /// encoded state (`None`: unseen).
    pub fn replay_tick(&self, state: Option<&[u8]>, tick: Tick) -> Result<Replayed, ReplayError> {
        let stage = || self.stage.def.name.clone();
        if self.stage.def.ticks.is_none() {
            return Err(ReplayError::NoTicks { stage: stage() });
        }
        if self.tick_reads_every_slot() {
            return Err(ReplayError::ReadsEverySlot { stage: stage() });
        }
        let slots: Vec<(SlotKey, &[u8])> = state
            .map(|state| (SlotKey::Tick, state))
            .into_iter()
            .collect();
        let outcome = self.stage.def.logic.replay_tick(&slots, tick)?;
        Ok(replayed(outcome))
    }

    /// Runs a tick of a stage whose ticks read every slot
    /// ([`StageHooks::tick_reads_every_slot`]), given every slot's encoded
    /// state (the tick slot's too); its changes are in
    /// [`Replayed::other_slots`].
    pub fn replay_tick_over_slots(
        &self,
        slots: &[(SlotKey, &[u8])],
        tick: Tick,
    ) -> Result<Replayed, ReplayError> {
        if self.stage.def.ticks.is_none() {
            return Err(ReplayError::NoTicks {
                stage: self.stage.def.name.clone(),
            });
        }
        if !self.tick_reads_every_slot() {
            return Err(ReplayError::ReadsOneSlot {
                stage: self.stage.def.name.clone(),
            });
        }
        let outcome = self.stage.def.logic.replay_tick(slots, tick)?;
        Ok(replayed(outcome))
    }

    /// Every repartition topic the stage writes: its own as a re-key stage
    /// (R1) and its re-keyed outputs' (R3).
    pub fn repartitions(&self) -> impl Iterator<Item = &'a TopicName> + 'a {
        self.stage.def.repartitions()
    }

    /// The counters its operators report, each task's from 0
    /// ([`crate::task::TaskMetrics::operator_counts`]).
    pub fn counters(&self) -> impl Iterator<Item = &'static Counter> + 'a {
        self.stage
            .def
            .operators
            .iter()
            .flat_map(|operator| operator.counters().iter())
    }
}

fn replayed(outcome: logic::Outcome) -> Replayed {
    let change = |encoded: Option<bytes::Bytes>| match encoded {
        Some(bytes) => SlotChange::Set(bytes),
        None => SlotChange::Deleted,
    };
    Replayed {
        slot: outcome
            .write
            .map_or(SlotChange::Unchanged, |write| change(write.encoded)),
        other_slots: outcome
            .more_writes
            .into_iter()
            .map(|write| (write.slot, change(write.encoded)))
            .collect(),
        emissions: outcome.emissions,
    }
}
