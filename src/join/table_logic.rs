//! The table–table join's built-in logic (J8, J9): one implementation, run
//! by the task over its slots and by the pure replay over the one slot it
//! is given, so every driver, the audit and the checker see the same join.
//!
//! Each key's slot holds the key's two sides, as value bytes; a key with
//! neither has no slot.

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};

use crate::codec::{Codec, CodecError, Direction};
use crate::emission::Emission;
use crate::mutation::{self, Mutation};
use crate::record::ConsumedRecord;
use crate::stage::logic::{
    guarded, DeliveryFailure, Outcome, ReplayFailure, SlotWrite, StageLogic,
};
use crate::stage::slots::{SlotKey, SlotStore, Slots};
use crate::topic::{RecordPart, Topic};
use crate::tp::Tp;

use super::table::{Sides, TableJoinKind};

/// The joiner, in its outer-join form: `None` when the key has no result
/// with these sides (J8).
pub(crate) type TableJoinerFn<K, L, R, O> = super::SidedJoinerFn<K, L, R, O>;

/// Source 0 is the left table, source 1 the right.
const LEFT: usize = 0;

pub(crate) struct TableJoinLogic<K, L, R, O> {
    pub left: Topic<K, L>,
    pub right: Topic<K, R>,
    pub output: Option<Topic<K, O>>,
    pub kind: TableJoinKind,
    pub joiner: TableJoinerFn<K, L, R, O>,
}

/// A key's two sides (J8), each as its table record's value bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Pair {
    pub left: Option<Bytes>,
    pub right: Option<Bytes>,
}

impl<K, L, R, O> TableJoinLogic<K, L, R, O>
where
    K: Clone + Send + Sync + 'static,
    L: Send + Sync + 'static,
    R: Send + Sync + 'static,
    O: 'static,
{
    fn output(&self) -> &Topic<K, O> {
        self.output
            .as_ref()
            .expect("the build refuses a join without an output topic")
    }

    fn decode_key(&self, key: &[u8]) -> Result<K, DeliveryFailure> {
        self.left
            .key_codec()
            .decode(key)
            .map_err(|error| DeliveryFailure::Codec {
                part: RecordPart::Key,
                error,
            })
    }

    fn value_failure(error: CodecError) -> DeliveryFailure {
        DeliveryFailure::Codec {
            part: RecordPart::Value,
            error,
        }
    }

    /// J8: the joiner's value for `key` with these sides, `None` when the
    /// key has no result with them.
    fn result(
        &self,
        key: &K,
        left: Option<&[u8]>,
        right: Option<&[u8]>,
    ) -> Result<Option<O>, DeliveryFailure> {
        let left = left
            .map(|bytes| self.left.value_codec().decode(bytes))
            .transpose()
            .map_err(Self::value_failure)?;
        let right = right
            .map(|bytes| self.right.value_codec().decode(bytes))
            .transpose()
            .map_err(Self::value_failure)?;
        // Planted bug (I13): the right side left out beside a left one.
        let right = right
            .filter(|_| left.is_none() || !mutation::active(Mutation::TableJoinResultDropsRight));
        guarded(|| (self.joiner)(key, left.as_ref(), right.as_ref()).transpose())
    }

    /// J8, J9: one record's delivery: the key's sides after it (`None`: the
    /// sides are unchanged) and what it writes.
    fn deliver(
        &self,
        source: usize,
        tp: &Tp,
        consumed: &ConsumedRecord,
        before: &Pair,
    ) -> Result<(Option<Pair>, Option<Emission>), DeliveryFailure> {
        let side = if source == LEFT { "left" } else { "right" };
        let Some(key_bytes) = &consumed.data.key else {
            return Err(DeliveryFailure::Logic(format!(
                "J9 (docs/RULES.md#j9): {side} table record {tp}@{} has no key, and a table–table join keeps its sides by key",
                consumed.offset
            )));
        };
        let key = self.decode_key(key_bytes)?;
        let value = consumed.data.value.clone();
        if let Some(bytes) = &value {
            // A value its codec refuses is refused here, not when joined.
            match source {
                LEFT => self.left.value_codec().decode(bytes).map(drop),
                _ => self.right.value_codec().decode(bytes).map(drop),
            }
            .map_err(Self::value_failure)?;
        }
        let mut after = before.clone();
        match source {
            LEFT => after.left = value,
            _ => after.right = value,
        }
        if after == *before && consumed.data.value.is_none() {
            // A tombstone for a side without a value changes nothing.
            return Ok((None, None));
        }
        let had = self
            .kind
            .has_result(before.left.is_some(), before.right.is_some());
        let joined = self.result(&key, after.left.as_deref(), after.right.as_deref())?;
        let emission = match joined {
            Some(joined) => Some(self.output().send(key, joined)),
            None if had && !mutation::active(Mutation::TableJoinSkipsTombstone) => {
                Some(self.output().tombstone(key))
            }
            None => None,
        };
        Ok((Some(after), emission))
    }

    fn outcome(
        slot: SlotKey,
        change: (Option<Pair>, Option<Emission>),
    ) -> Result<(Outcome, Option<Option<Pair>>), DeliveryFailure> {
        let (after, emission) = change;
        let mut outcome = Outcome {
            emissions: emission.into_iter().collect(),
            write: None,
            more_writes: Vec::new(),
            ..Outcome::default()
        };
        let proposal = match after {
            None => None,
            Some(pair) if pair.left.is_none() && pair.right.is_none() => {
                outcome.write = Some(SlotWrite {
                    slot,
                    encoded: None,
                });
                Some(None)
            }
            Some(pair) => {
                let encoded = PairCodec
                    .encode(&pair)
                    .map_err(DeliveryFailure::StateCodec)?;
                outcome.write = Some(SlotWrite {
                    slot,
                    encoded: Some(encoded),
                });
                Some(Some(pair))
            }
        };
        Ok((outcome, proposal))
    }

    /// J8's result for `key` (its bytes) with these sides, encoded: the
    /// output record's value bytes, or `None` when the key has no result.
    /// What a checker that keeps both tables by itself compares a
    /// delivery's output with (I13).
    fn joined(
        &self,
        key: &[u8],
        left: Option<&[u8]>,
        right: Option<&[u8]>,
    ) -> Result<Option<Bytes>, DeliveryFailure> {
        let decoded = self.decode_key(key)?;
        // Decoded and joined here, not by `result`: the oracle that calls
        // this judges the operator's own result.
        let left = left
            .map(|bytes| self.left.value_codec().decode(bytes))
            .transpose()
            .map_err(Self::value_failure)?;
        let right = right
            .map(|bytes| self.right.value_codec().decode(bytes))
            .transpose()
            .map_err(Self::value_failure)?;
        let joined =
            guarded(|| (self.joiner)(&decoded, left.as_ref(), right.as_ref()).transpose())?;
        let Some(joined) = joined else {
            return Ok(None);
        };
        match self.output().send(decoded, joined).encoded() {
            Ok((_, value)) => Ok(value.cloned()),
            Err(error) => Err(DeliveryFailure::Logic(format!(
                "the output topic's codec refuses the join's result: {error}"
            ))),
        }
    }
}

impl<K, L, R, O> super::table::TableJoiner for TableJoinLogic<K, L, R, O>
where
    K: Clone + Send + Sync + 'static,
    L: Send + Sync + 'static,
    R: Send + Sync + 'static,
    O: 'static,
{
    fn joined(
        &self,
        key: &[u8],
        left: Option<&[u8]>,
        right: Option<&[u8]>,
    ) -> Result<Option<Bytes>, DeliveryFailure> {
        TableJoinLogic::joined(self, key, left, right)
    }
}

impl<K, L, R, O> StageLogic for TableJoinLogic<K, L, R, O>
where
    K: Clone + Send + Sync + 'static,
    L: Send + Sync + 'static,
    R: Send + Sync + 'static,
    O: 'static,
{
    fn new_slots(&self) -> Box<dyn SlotStore> {
        let codec: Arc<dyn Codec<Pair>> = Arc::new(PairCodec);
        Box::new(Slots::<Pair>::new(Some(codec)))
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
            .downcast_mut::<Slots<Pair>>()
            .expect("a table–table join's slots hold its keys' sides");
        let slot = SlotKey::for_key(record.data.key.as_ref());
        let before = slots.get(&slot).cloned().unwrap_or_default();
        let change = self.deliver(source, tp, record, &before)?;
        let (outcome, proposal) = Self::outcome(slot, change)?;
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
        let before = slots
            .first()
            .map(|(_, bytes)| PairCodec.decode(bytes))
            .transpose()
            .map_err(ReplayFailure::State)?
            .unwrap_or_default();
        let slot = SlotKey::for_key(record.data.key.as_ref());
        let change = self.deliver(source, tp, record, &before)?;
        Ok(Self::outcome(slot, change)?.0)
    }
}

/// The sides of a table–table join's task ([`super::sides_of`]).
pub(crate) fn sides_of(slots: crate::stage::SlotsView<'_>) -> Option<Vec<Sides>> {
    let slots = slots.of::<Pair>()?;
    let mut sides: Vec<Sides> = slots
        .current_slots()
        .filter_map(|(slot, pair)| match slot {
            SlotKey::Key(key) => Some(Sides {
                key: key.clone(),
                left: pair.left.clone(),
                right: pair.right.clone(),
            }),
            _ => None,
        })
        .collect();
    sides.sort_by(|a, b| a.key.cmp(&b.key));
    Some(sides)
}

const FLAG_LEFT: u8 = 1;
const FLAG_RIGHT: u8 = 2;

/// The slots on the changelog: a flags byte (1: a left value, 2: a right
/// value), then each present value, left first, as its length (4 bytes,
/// big-endian) and its bytes.
pub(crate) struct PairCodec;

fn refused(direction: Direction, message: String) -> CodecError {
    CodecError {
        codec: "table-join-slot",
        direction,
        type_name: "table–table join slot",
        message,
    }
}

impl Codec<Pair> for PairCodec {
    fn encode(&self, value: &Pair) -> Result<Bytes, CodecError> {
        let mut out = BytesMut::new();
        self.encode_to(value, &mut out)?;
        Ok(out.freeze())
    }

    fn encode_to(&self, value: &Pair, out: &mut BytesMut) -> Result<(), CodecError> {
        let mut flags = 0;
        if value.left.is_some() {
            flags |= FLAG_LEFT;
        }
        if value.right.is_some() {
            flags |= FLAG_RIGHT;
        }
        out.put_u8(flags);
        for side in [&value.left, &value.right].into_iter().flatten() {
            let length = u32::try_from(side.len()).map_err(|_| {
                refused(
                    Direction::Encode,
                    format!("a value of {} bytes", side.len()),
                )
            })?;
            out.put_u32(length);
            out.extend_from_slice(side);
        }
        Ok(())
    }

    fn decode(&self, bytes: &[u8]) -> Result<Pair, CodecError> {
        let Some((&flags, mut rest)) = bytes.split_first() else {
            return Err(refused(Direction::Decode, "an empty slot".into()));
        };
        if flags & !(FLAG_LEFT | FLAG_RIGHT) != 0 {
            return Err(refused(
                Direction::Decode,
                format!("flags byte {flags} (expected 0 to 3)"),
            ));
        }
        let mut side = |present: bool, which: &str| -> Result<Option<Bytes>, CodecError> {
            if !present {
                return Ok(None);
            }
            if rest.len() < 4 {
                return Err(refused(
                    Direction::Decode,
                    format!(
                        "the {which} value's length needs 4 bytes, {} left",
                        rest.len()
                    ),
                ));
            }
            let (length, tail) = rest.split_at(4);
            let length = u32::from_be_bytes(length.try_into().expect("4 bytes")) as usize;
            if tail.len() < length {
                return Err(refused(
                    Direction::Decode,
                    format!(
                        "the {which} value needs {length} bytes, {} left",
                        tail.len()
                    ),
                ));
            }
            let (value, tail) = tail.split_at(length);
            rest = tail;
            Ok(Some(Bytes::copy_from_slice(value)))
        };
        let left = side(flags & FLAG_LEFT != 0, "left")?;
        let right = side(flags & FLAG_RIGHT != 0, "right")?;
        if !rest.is_empty() {
            return Err(refused(
                Direction::Decode,
                format!("{} bytes after the sides", rest.len()),
            ));
        }
        Ok(Pair { left, right })
    }
}
