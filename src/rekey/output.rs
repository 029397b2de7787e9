//! A re-key within the stage that writes its source (R3): the stage's own
//! logic, wrapped so that every record it emits to the re-keyed topic is
//! followed, in the same step, by a copy under the selected key on the
//! repartition topic. The task stamps both at the same stamping site (G5),
//! so the copy claims what the stage delivered and its causes.

use std::sync::Arc;

use bytes::Bytes;

use crate::codec::CodecError;
use crate::emission::{Emission, Tick};
use crate::mutation::{self, Mutation};
use crate::record::ConsumedRecord;
use crate::stage::logic::{DeliveryFailure, Outcome, ReplayFailure, StageLogic};
use crate::stage::slots::{SlotKey, SlotStore};
use crate::task::Deadline;
use crate::topic::RecordPart;
use crate::tp::{TopicName, Tp};

/// The new key's bytes for an emitted record's key and value bytes (`None`:
/// a null key), or the key codec's refusal of the selected key (it travels
/// in the copy, as `Topic::send`'s does); or why the record is refused
/// (X5).
pub(crate) type SelectKey = Arc<
    dyn Fn(Option<&Bytes>, &Bytes) -> Result<Result<Option<Bytes>, CodecError>, DeliveryFailure>
        + Send
        + Sync,
>;

/// A stage's logic with one of its outputs re-keyed (R3).
pub(crate) struct RekeyedOutput {
    pub inner: Arc<dyn StageLogic>,
    /// The topic whose records are re-keyed.
    pub output: TopicName,
    /// Where the copies go (R1).
    pub repartition: TopicName,
    pub select: SelectKey,
}

impl RekeyedOutput {
    fn rekeyed(&self, outcome: Outcome) -> Result<Outcome, DeliveryFailure> {
        let mut outcome = outcome;
        outcome.emissions = self.with_copies(std::mem::take(&mut outcome.emissions))?;
        Ok(outcome)
    }

    /// `emissions`, each to the output followed by its re-keyed copy.
    fn with_copies(&self, emissions: Vec<Emission>) -> Result<Vec<Emission>, DeliveryFailure> {
        if !emissions
            .iter()
            .any(|emission| *emission.topic() == self.output)
        {
            return Ok(emissions);
        }
        let mut all = Vec::with_capacity(emissions.len() * 2);
        for emission in emissions {
            let copy = match (emission.topic() == &self.output, emission.encoded()) {
                (true, Ok((key, Some(value)))) => {
                    let key = match mutation::active(Mutation::RekeyOutputKeepsKey) {
                        // Planted bug (R3, I17): the copy keeps the old key.
                        true => Ok(key.cloned()),
                        false => (self.select)(key, value)?,
                    };
                    let encoded = key.map(|key| (key, value.clone()));
                    Some(Emission::new(self.repartition.clone(), encoded))
                }
                // A tombstone has no value to select a key from: the
                // stage's output, not its input record, is at fault.
                (true, Ok((_, None))) => {
                    return Err(DeliveryFailure::Logic(format!(
                        "R3: the stage wrote a tombstone to {}, whose records it writes again re-keyed to {}; a tombstone has no value to select a key from",
                        self.output, self.repartition
                    )))
                }
                // An emission its codec refused: the task stops on it (S3)
                // as it would without the re-key.
                _ => None,
            };
            all.push(emission);
            all.extend(copy);
        }
        Ok(all)
    }
}

impl StageLogic for RekeyedOutput {
    fn new_slots(&self) -> Box<dyn SlotStore> {
        self.inner.new_slots()
    }

    fn on_record(
        &self,
        slots: &mut dyn SlotStore,
        source: usize,
        tp: &Tp,
        record: &ConsumedRecord,
    ) -> Result<Outcome, DeliveryFailure> {
        self.rekeyed(self.inner.on_record(slots, source, tp, record)?)
    }

    fn on_tick(&self, slots: &mut dyn SlotStore, tick: Tick) -> Result<Outcome, DeliveryFailure> {
        self.rekeyed(self.inner.on_tick(slots, tick)?)
    }

    fn next_deadline(&self, slots: &dyn SlotStore) -> Option<Deadline> {
        self.inner.next_deadline(slots)
    }

    fn replay_record(
        &self,
        state: Option<&[u8]>,
        source: usize,
        tp: &Tp,
        record: &ConsumedRecord,
    ) -> Result<Outcome, ReplayFailure> {
        Ok(self.rekeyed(self.inner.replay_record(state, source, tp, record)?)?)
    }

    fn replay_tick(&self, state: Option<&[u8]>, tick: Tick) -> Result<Outcome, ReplayFailure> {
        Ok(self.rekeyed(self.inner.replay_tick(state, tick)?)?)
    }

    fn replay_tick_over_slots(
        &self,
        slots: &[(SlotKey, &[u8])],
        tick: Tick,
    ) -> Result<Outcome, ReplayFailure> {
        Ok(self.rekeyed(self.inner.replay_tick_over_slots(slots, tick)?)?)
    }

    fn replay_record_over_slots(
        &self,
        slots: &[(SlotKey, &[u8])],
        source: usize,
        tp: &Tp,
        record: &ConsumedRecord,
    ) -> Result<Outcome, ReplayFailure> {
        Ok(self.rekeyed(
            self.inner
                .replay_record_over_slots(slots, source, tp, record)?,
        )?)
    }

    // The operators' own oracles name the record the operator writes to
    // its output; its re-keyed copy is R3's, checked on its own.
    fn window_emission(
        &self,
        key: &[u8],
        bounds: (i64, i64),
        records: &[(&Tp, &ConsumedRecord)],
    ) -> Option<Result<(Bytes, Bytes), DeliveryFailure>> {
        self.inner.window_emission(key, bounds, records)
    }

    fn expiring_fold(
        &self,
        records: &[(&Tp, &ConsumedRecord)],
    ) -> Option<Result<(Vec<Emission>, bool), DeliveryFailure>> {
        // The fold's emissions are the delivery's: its copies included.
        Some(
            self.inner
                .expiring_fold(records)?
                .and_then(|(emissions, kept)| Ok((self.with_copies(emissions)?, kept))),
        )
    }

    fn table_joined(
        &self,
        key: &[u8],
        left: Option<&[u8]>,
        right: Option<&[u8]>,
    ) -> Option<Result<Option<Bytes>, DeliveryFailure>> {
        self.inner.table_joined(key, left, right)
    }

    fn rekeyed_key(
        &self,
        repartition: &TopicName,
        key: Option<&Bytes>,
        value: &Bytes,
    ) -> Option<Result<Option<Bytes>, DeliveryFailure>> {
        match *repartition == self.repartition {
            true => Some((self.select)(key, value).and_then(|encoded| {
                encoded.map_err(|error| DeliveryFailure::Codec {
                    part: RecordPart::Key,
                    error,
                })
            })),
            false => self.inner.rekeyed_key(repartition, key, value),
        }
    }

    fn joined(
        &self,
        tp: &Tp,
        record: &ConsumedRecord,
        row: Option<&[u8]>,
    ) -> Option<Result<Option<(Option<Bytes>, Bytes)>, DeliveryFailure>> {
        self.inner.joined(tp, record, row)
    }
}
