//! The stream–table join's built-in logic (J1–J3): one implementation, run
//! by the task over its slots and by the pure replay over the one slot it
//! is given, so every driver, the audit and the checker see the same join.

use std::sync::Arc;

use bytes::Bytes;

use crate::codec::Codec;
use crate::emission::{Emission, Record};
use crate::mutation::{self, Mutation};
use crate::record::ConsumedRecord;
use crate::stage::logic::{
    guarded, DeliveryFailure, Fallible, Outcome, ReplayFailure, SlotWrite, StageLogic,
};
use crate::stage::slots::{SlotKey, SlotStore, Slots};
use crate::topic::Topic;
use crate::tp::Tp;

use super::row::{Row, RowCodec};

/// The joiner, in its left-join form: `None` when an inner join writes
/// nothing (there is no row).
pub(crate) type JoinerFn<K, V, T, R> =
    Arc<dyn Fn(&Record<K, V>, Option<&T>) -> Option<Result<R, String>> + Send + Sync>;

/// An inner stream–table joiner: a result only when the record has a row.
pub(crate) fn inner_row_joiner<K, V, T, R, F>(
    joiner: impl Fn(&Record<K, V>, &T) -> F + Send + Sync + 'static,
) -> JoinerFn<K, V, T, R>
where
    K: 'static,
    V: 'static,
    T: 'static,
    R: 'static,
    F: Fallible<R>,
{
    Arc::new(move |record, row| row.map(|row| joiner(record, row).into_result()))
}

/// A left stream–table joiner: a result for every record, with its row or
/// `None`.
pub(crate) fn left_row_joiner<K, V, T, R, F>(
    joiner: impl Fn(&Record<K, V>, Option<&T>) -> F + Send + Sync + 'static,
) -> JoinerFn<K, V, T, R>
where
    K: 'static,
    V: 'static,
    T: 'static,
    R: 'static,
    F: Fallible<R>,
{
    Arc::new(move |record, row| Some(joiner(record, row).into_result()))
}

/// The counter of stream records joined with a row whose timestamp is
/// higher than their own: a table newer than the record.
pub(crate) const ROWS_NEWER: &str = "join-rows-newer-than-record-total";

/// Its help text, one for every stream–table join that declares it.
pub(crate) const ROWS_NEWER_HELP: &str = "Stream records a stream–table join (J2, J17) joined with a row whose timestamp is higher than their own.";

/// Source 0 is the stream, source 1 the table.
const TABLE: usize = 1;

pub(crate) struct JoinLogic<K, V, T, R> {
    pub stream: Topic<K, V>,
    pub table: Topic<K, T>,
    pub output: Option<Topic<K, R>>,
    pub joiner: JoinerFn<K, V, T, R>,
}

/// A delivery's new row for its key's slot, when it writes one (`None`
/// inside: deleted).
type Proposal<T> = Option<Option<Row<T>>>;

/// What one delivery does: a row written or deleted (a table record), or
/// the join's result (a stream record).
enum Change<T> {
    Row {
        slot: SlotKey,
        row: Option<(Row<T>, Bytes)>,
    },
    Unchanged,
    Joined(Option<Emission>),
}

impl<K, V, T, R> JoinLogic<K, V, T, R>
where
    K: Clone + Send + Sync + 'static,
    V: Send + Sync + 'static,
    T: Clone + Send + Sync + 'static,
    R: 'static,
{
    /// The slots' codec: a row's timestamp, then its value in the table's
    /// codec.
    fn row_codec(&self) -> RowCodec<T> {
        RowCodec {
            value: self.table.value_codec_arc(),
        }
    }

    fn output(&self) -> &Topic<K, R> {
        self.output
            .as_ref()
            .expect("the build refuses a join without an output topic")
    }

    /// J1: a table record sets its key's row, a tombstone deletes it.
    /// `exists`: whether the key has a row now.
    fn table_record(
        &self,
        tp: &Tp,
        consumed: &ConsumedRecord,
        exists: bool,
    ) -> Result<Change<T>, DeliveryFailure> {
        let Some(key) = &consumed.data.key else {
            return Err(DeliveryFailure::Logic(format!(
                "J1 (docs/RULES.md#j1): table record {tp}@{} has no key, and a table row is keyed",
                consumed.offset
            )));
        };
        let slot = SlotKey::Key(key.clone());
        self.table
            .key_codec()
            .decode(key)
            .map_err(|error| DeliveryFailure::Codec {
                part: crate::topic::RecordPart::Key,
                error,
            })?;
        let Some(bytes) = &consumed.data.value else {
            if mutation::active(Mutation::JoinIgnoresTombstones) {
                return Ok(Change::Unchanged);
            }
            return Ok(match exists {
                true => Change::Row { slot, row: None },
                // A tombstone for a key without a row changes nothing.
                false => Change::Unchanged,
            });
        };
        let value = self.table.decode(tp, consumed)?.value;
        if exists && mutation::active(Mutation::JoinKeepsStaleRow) {
            return Ok(Change::Unchanged);
        }
        // The changelog keeps the row's value as the table has it, its own
        // bytes, after its timestamp.
        let timestamp = consumed.data.timestamp;
        Ok(Change::Row {
            slot,
            row: Some((
                Row { value, timestamp },
                RowCodec::<T>::bytes(timestamp, bytes),
            )),
        })
    }

    /// J2: a stream record joined with its key's row (`None`: no row).
    fn stream_record(
        &self,
        tp: &Tp,
        consumed: &ConsumedRecord,
        row: Option<&T>,
    ) -> Result<Change<T>, DeliveryFailure> {
        if consumed.data.key.is_none() {
            return Err(DeliveryFailure::Logic(format!(
                "J2 (docs/RULES.md#j2): stream record {tp}@{} has no key, and a stream–table join looks its key up",
                consumed.offset
            )));
        }
        let record = self.stream.decode(tp, consumed)?;
        let joined = guarded(|| (self.joiner)(&record, row).transpose())?;
        // Under the stream record's key; an output codec's refusal travels
        // in the emission and stops the task, as any stage's does.
        Ok(Change::Joined(joined.map(|joined| {
            self.output().send(record.key.clone(), joined)
        })))
    }

    /// J2's join of the stream record `consumed` with `row`: the output
    /// record, or `None` when an inner join writes nothing. The versioned
    /// join (V2) joins through it, with the version it looked up.
    pub(super) fn join_record(
        &self,
        tp: &Tp,
        consumed: &ConsumedRecord,
        row: Option<&T>,
    ) -> Result<Option<Emission>, DeliveryFailure> {
        match self.stream_record(tp, consumed, row)? {
            Change::Joined(joined) => Ok(joined),
            Change::Row { .. } | Change::Unchanged => {
                unreachable!("a stream record changes no row")
            }
        }
    }

    fn deliver(
        &self,
        source: usize,
        tp: &Tp,
        consumed: &ConsumedRecord,
        row: Option<&Row<T>>,
    ) -> Result<(Outcome, Proposal<T>), DeliveryFailure> {
        let change = match source {
            TABLE => self.table_record(tp, consumed, row.is_some())?,
            _ => self.stream_record(tp, consumed, row.map(|row| &row.value))?,
        };
        let mut outcome = Outcome {
            emissions: Vec::new(),
            write: None,
            more_writes: Vec::new(),
            ..Outcome::default()
        };
        // A stream record that meets a row newer than itself: the table
        // as of the delivery order is not the table as of its time.
        if source != TABLE && row.is_some_and(|row| row.timestamp > consumed.data.timestamp) {
            outcome.counted.count(ROWS_NEWER);
        }
        let proposal = match change {
            Change::Row { slot, row } => {
                let (state, encoded) = match row {
                    Some((row, bytes)) => (Some(row), Some(bytes)),
                    None => (None, None),
                };
                outcome.write = Some(SlotWrite { slot, encoded });
                Some(state)
            }
            Change::Unchanged | Change::Joined(None) => None,
            Change::Joined(Some(emission)) => {
                outcome.emissions.push(emission);
                None
            }
        };
        Ok((outcome, proposal))
    }

    /// The user's joiner on the stream record `consumed` of `tp` and the
    /// row `row` (the table's value bytes, `None`: no row), decoded and
    /// encoded with the topics' codecs: the output record's key and value
    /// bytes, or `None` when the joiner gives none (an inner join's, given
    /// no row). What a checker that keeps the table and decides J2 by
    /// itself compares a delivery's output with (I13); it shares none of
    /// the delivery's code ([`Self::stream_record`]).
    pub(crate) fn joined(
        &self,
        tp: &Tp,
        consumed: &ConsumedRecord,
        row: Option<&[u8]>,
    ) -> Result<Option<(Option<Bytes>, Bytes)>, DeliveryFailure> {
        let row = row
            .map(|bytes| self.table.value_codec().decode(bytes))
            .transpose()
            .map_err(|error| DeliveryFailure::Codec {
                part: crate::topic::RecordPart::Value,
                error,
            })?;
        let record = self.stream.decode(tp, consumed)?;
        let Some(joined) = guarded(|| (self.joiner)(&record, row.as_ref()).transpose())? else {
            return Ok(None);
        };
        match self.output().encode(record.key.as_ref(), &joined) {
            Ok(encoded) => Ok(Some(encoded)),
            Err(refused) => Err(DeliveryFailure::Logic(format!(
                "the output topic's codec refuses the join's result: {}",
                refused.error
            ))),
        }
    }
}

impl<K, V, T, R> super::Joiner for JoinLogic<K, V, T, R>
where
    K: Clone + Send + Sync + 'static,
    V: Send + Sync + 'static,
    T: Clone + Send + Sync + 'static,
    R: 'static,
{
    fn joined(
        &self,
        tp: &Tp,
        record: &ConsumedRecord,
        row: Option<&[u8]>,
    ) -> Result<Option<(Option<Bytes>, Bytes)>, DeliveryFailure> {
        JoinLogic::joined(self, tp, record, row)
    }
}

impl<K, V, T, R> StageLogic for JoinLogic<K, V, T, R>
where
    K: Clone + Send + Sync + 'static,
    V: Send + Sync + 'static,
    T: Clone + Send + Sync + 'static,
    R: 'static,
{
    fn new_slots(&self) -> Box<dyn SlotStore> {
        let codec: Arc<dyn Codec<Row<T>>> = Arc::new(self.row_codec());
        Box::new(Slots::<Row<T>>::new(Some(codec)))
    }

    fn on_record(
        &self,
        slots: &mut dyn SlotStore,
        source: usize,
        tp: &Tp,
        record: &ConsumedRecord,
    ) -> Result<Outcome, DeliveryFailure> {
        let slots = slots
            .as_any_mut()
            .downcast_mut::<Slots<Row<T>>>()
            .expect("a join's slots hold its table's rows");
        let slot = SlotKey::for_key(record.data.key.as_ref());
        let (outcome, proposal) = self.deliver(source, tp, record, slots.get(&slot))?;
        if let Some(state) = proposal {
            slots.propose(state);
        }
        Ok(outcome)
    }

    fn replay_record(
        &self,
        slots: &[(SlotKey, &[u8])],
        source: usize,
        tp: &Tp,
        record: &ConsumedRecord,
    ) -> Result<Outcome, ReplayFailure> {
        let row = slots
            .first()
            .map(|(_, bytes)| self.row_codec().decode(bytes))
            .transpose()
            .map_err(ReplayFailure::State)?;
        Ok(self.deliver(source, tp, record, row.as_ref())?.0)
    }
}
