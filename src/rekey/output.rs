//! A re-key within the stage that writes its source (R3): the stage's own
//! logic, wrapped so that every record it emits to the re-keyed topic is
//! followed, in the same step, by a copy under the selected key on the
//! repartition topic. The task stamps both at the same stamping site (G5),
//! so the copy claims what the stage delivered and its causes.

use std::sync::Arc;

use bytes::Bytes;

use crate::codec::CodecError;
use crate::deadline::Deadline;
use crate::emission::{Emission, Tick};
use crate::mutation::{self, Mutation};
use crate::record::ConsumedRecord;
use crate::stage::logic::{DeliveryFailure, Outcome, ReplayFailure, StageLogic};
use crate::stage::slots::{SlotKey, SlotStore};
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
                    let copy = Emission::new(self.repartition.clone(), encoded);
                    // R3: the copy keeps the record's timestamp, an
                    // operator's own (W4) included.
                    Some(match emission.timestamp() {
                        Some(timestamp) => copy.at(timestamp),
                        None => copy,
                    })
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

    fn restored(&self, slots: &mut dyn SlotStore, now: i64) {
        self.inner.restored(slots, now)
    }

    fn replay_record(
        &self,
        slots: &[(SlotKey, &[u8])],
        source: usize,
        tp: &Tp,
        record: &ConsumedRecord,
    ) -> Result<Outcome, ReplayFailure> {
        Ok(self.rekeyed(self.inner.replay_record(slots, source, tp, record)?)?)
    }

    fn replay_tick(
        &self,
        slots: &[(SlotKey, &[u8])],
        tick: Tick,
    ) -> Result<Outcome, ReplayFailure> {
        Ok(self.rekeyed(self.inner.replay_tick(slots, tick)?)?)
    }
}

/// The user's key function of a re-key within a stage with its topics'
/// codecs, for the harness's oracle ([`super::RekeyOutputDecl::key_of`]).
pub(crate) struct KeyOf(pub SelectKey);

impl KeyOf {
    /// The key bytes (`None`: a null key) selected for a record the stage
    /// wrote with these key and value bytes.
    pub fn key_of(
        &self,
        key: Option<&Bytes>,
        value: &Bytes,
    ) -> Result<Option<Bytes>, DeliveryFailure> {
        (self.0)(key, value).and_then(|encoded| {
            encoded.map_err(|error| DeliveryFailure::Codec {
                part: RecordPart::Key,
                error,
            })
        })
    }
}
