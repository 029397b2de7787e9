//! The stream–stream join's built-in logic (J5–J7): one implementation, run
//! by the task over its slots and by the pure replay over the slots it is
//! given, so every driver, the audit and the checker see the same join.
//!
//! Each key's slot holds the key's records whose join window is open, in
//! arrival order; the tick slot holds the task's clock (the close frontier,
//! and the earliest close point of a held record, so that a delivery looks
//! for records to close only when one is due).

use std::collections::HashMap;
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};

use crate::codec::{Codec, CodecError, Direction};
use crate::deadline::{Deadline, DeadlineKind, TimeDomain};
use crate::emission::Emission;
use crate::mutation::{self, Mutation};
use crate::record::ConsumedRecord;
use crate::stage::logic::{guarded, DeliveryFailure, Outcome, ReplayFailure, StageLogic};
use crate::stage::slots::{SlotKey, SlotStore, Slots};
use crate::stage::wide::{self, SlotChanges};
use crate::topic::{RecordPart, Topic};
use crate::tp::Tp;

use super::stream::{HeldRecord, StreamJoinKind};

/// The joiner, in its outer-join form: `None` when the join writes nothing
/// for these sides (an inner join's unmatched record, a left join's right
/// one).
pub(crate) type StreamJoinerFn<K, L, R, O> = super::SidedJoinerFn<K, L, R, O>;

/// Source 0 is the left stream, source 1 the right.
const LEFT: usize = 0;

pub(crate) struct StreamJoinLogic<K, L, R, O> {
    pub left: Topic<K, L>,
    pub right: Topic<K, R>,
    pub output: Option<Topic<K, O>>,
    pub kind: StreamJoinKind,
    /// The window in milliseconds (J5).
    pub before: i64,
    pub after: i64,
    pub grace: i64,
    pub joiner: StreamJoinerFn<K, L, R, O>,
}

/// A held record (J6): its side, timestamp, whether it joined, and its value
/// bytes as they came.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Held {
    pub left: bool,
    pub timestamp: i64,
    pub matched: bool,
    pub value: Bytes,
}

/// The task's join clock (in its tick slot).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Clock {
    /// The close frontier (J6): the highest timestamp delivered from either
    /// side. `i64::MIN` before the first.
    pub frontier: i64,
    /// The lowest close point of a held record.
    pub next_close: Option<i64>,
}

impl Default for Clock {
    fn default() -> Self {
        Clock {
            frontier: i64::MIN,
            next_close: None,
        }
    }
}

/// What a slot of a stream–stream join holds.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum JoinSlot {
    /// The tick slot: the task's clock.
    Clock(Clock),
    /// A key's slot: its held records, in arrival order.
    Held(Vec<Held>),
}

/// The slots a delivery reads: the task's own, or those a replay is given.
trait View {
    fn slot(&self, slot: &SlotKey) -> Option<&JoinSlot>;
    /// Every key slot with held records.
    fn held(&self) -> Vec<(&SlotKey, &[Held])>;
}

fn held_in<'a>(
    slots: impl Iterator<Item = (&'a SlotKey, &'a JoinSlot)>,
) -> Vec<(&'a SlotKey, &'a [Held])> {
    slots
        .filter_map(|(slot, state)| match state {
            JoinSlot::Held(held) => Some((slot, &held[..])),
            JoinSlot::Clock(_) => None,
        })
        .collect()
}

impl View for Slots<JoinSlot> {
    fn slot(&self, slot: &SlotKey) -> Option<&JoinSlot> {
        self.get(slot)
    }

    fn held(&self) -> Vec<(&SlotKey, &[Held])> {
        held_in(self.current_slots())
    }
}

impl View for HashMap<SlotKey, JoinSlot> {
    fn slot(&self, slot: &SlotKey) -> Option<&JoinSlot> {
        self.get(slot)
    }

    fn held(&self) -> Vec<(&SlotKey, &[Held])> {
        held_in(self.iter())
    }
}

/// A delivered record, decoded: its key and its side's value.
enum Value<L, R> {
    Left(L),
    Right(R),
}

impl<K, L, R, O> StreamJoinLogic<K, L, R, O>
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

    /// J6: where a record's window closes: its timestamp plus its
    /// look-ahead (a left record looks `after` ahead, a right one `before`)
    /// plus the grace. Closed once the frontier is past it.
    fn closes_after(&self, left: bool, timestamp: i64) -> i64 {
        let ahead = if left { self.after } else { self.before };
        timestamp.saturating_add(ahead).saturating_add(self.grace)
    }

    /// J5: whether a left record at `left` and a right record at `right`
    /// are close enough in time to join.
    fn in_window(&self, left: i64, right: i64) -> bool {
        left.saturating_sub(self.before) <= right && right <= left.saturating_add(self.after)
    }

    /// J7: whether the join writes a record of this side that joined
    /// nothing.
    fn writes_unmatched(&self, left: bool) -> bool {
        match self.kind {
            StreamJoinKind::Inner => false,
            StreamJoinKind::Left => left,
            StreamJoinKind::Outer => true,
        }
    }

    fn clock(view: &dyn View) -> Clock {
        match view.slot(&SlotKey::Tick) {
            Some(JoinSlot::Clock(clock)) => *clock,
            _ => Clock::default(),
        }
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

    fn decode_value(&self, left: bool, value: &[u8]) -> Result<Value<L, R>, DeliveryFailure> {
        let decoded = match left {
            true => self.left.value_codec().decode(value).map(Value::Left),
            false => self.right.value_codec().decode(value).map(Value::Right),
        };
        decoded.map_err(|error| DeliveryFailure::Codec {
            part: RecordPart::Value,
            error,
        })
    }

    /// The joiner's result for `one` and `other` (of the other side, or
    /// `None`), oriented left and right, as the output's record; `None`
    /// when the join writes nothing.
    fn join(
        &self,
        key: &K,
        one: &Value<L, R>,
        other: Option<&Value<L, R>>,
    ) -> Result<Option<Emission>, DeliveryFailure> {
        let (left, right) = match (one, other) {
            (Value::Left(left), Some(Value::Right(right))) => (Some(left), Some(right)),
            (Value::Right(right), Some(Value::Left(left))) => (Some(left), Some(right)),
            (Value::Left(left), None) => (Some(left), None),
            (Value::Right(right), None) => (None, Some(right)),
            _ => unreachable!("a record joins only records of the other side"),
        };
        let joined = guarded(|| (self.joiner)(key, left, right).transpose())?;
        Ok(joined.map(|joined| self.output().send(key.clone(), joined)))
    }

    /// J5–J7: one record's delivery: the held records its timestamp closes
    /// (the unmatched ones written), its pairs with the held records of the
    /// other side in its window, and the record held while its own window
    /// is open (or, closed already and unmatched, written at once).
    fn record(
        &self,
        view: &dyn View,
        source: usize,
        tp: &Tp,
        consumed: &ConsumedRecord,
    ) -> Result<SlotChanges<JoinSlot>, DeliveryFailure> {
        let is_left = source == LEFT;
        let Some(key_bytes) = &consumed.data.key else {
            return Err(DeliveryFailure::Logic(format!(
                "J5 (docs/RULES.md#j5): record {tp}@{} has no key, and a stream–stream join matches records by key",
                consumed.offset
            )));
        };
        let timestamp = consumed.data.timestamp;
        if timestamp < 0 {
            return Err(DeliveryFailure::Logic(format!(
                "J5 (docs/RULES.md#j5): record {tp}@{} has no timestamp ({timestamp}), and a stream–stream join matches records by theirs",
                consumed.offset
            )));
        }
        // A tombstone is refused by the side's codec, as any typed record's.
        let (key, value) = match is_left {
            true => {
                let record = self.left.decode(tp, consumed)?;
                (record.key, Value::Left(record.value))
            }
            false => {
                let record = self.right.decode(tp, consumed)?;
                (record.key, Value::Right(record.value))
            }
        };
        let key = key.expect("a record with key bytes decodes to a key");
        let bytes = consumed
            .data
            .value
            .clone()
            .expect("a decoded record has a value");
        let before = Self::clock(view);
        let mut clock = Clock {
            frontier: before.frontier.max(timestamp),
            ..before
        };
        let own_slot = SlotKey::Key(key_bytes.clone());
        let mut own: Vec<Held> = match view.slot(&own_slot) {
            Some(JoinSlot::Held(held)) => held.clone(),
            _ => Vec::new(),
        };
        let mut own_changed = false;
        let mut emissions = Vec::new();
        let mut others = Vec::new();
        // J6: close what the frontier has passed, across keys.
        if clock.next_close.is_some_and(|next| next < clock.frontier) {
            let mut closed: Vec<(i64, bool, Bytes, usize, Bytes)> = Vec::new();
            let mut next_close: Option<i64> = None;
            let mut keep = |slot: &SlotKey, held: &[Held], closed: &mut Vec<_>| {
                let SlotKey::Key(key) = slot else {
                    unreachable!("records are held in key slots")
                };
                let mut left = Vec::with_capacity(held.len());
                for (arrival, record) in held.iter().enumerate() {
                    let closes = self.closes_after(record.left, record.timestamp);
                    if closes < clock.frontier {
                        if !record.matched && self.writes_unmatched(record.left) {
                            closed.push((
                                record.timestamp,
                                record.left,
                                key.clone(),
                                arrival,
                                record.value.clone(),
                            ));
                        }
                    } else {
                        next_close = Some(next_close.map_or(closes, |next: i64| next.min(closes)));
                        left.push(record.clone());
                    }
                }
                left
            };
            let mut changed = Vec::new();
            for (slot, held) in view.held() {
                if *slot == own_slot {
                    continue;
                }
                let left = keep(slot, held, &mut closed);
                if left.len() != held.len() {
                    changed.push((slot.clone(), left));
                }
            }
            let left = keep(&own_slot, &own, &mut closed);
            own_changed |= left.len() != own.len();
            own = left;
            clock.next_close = next_close;
            // Kafka Streams' order: timestamp, right before left, key.
            closed.sort_by(|a, b| (a.0, a.1, &a.2, a.3).cmp(&(b.0, b.1, &b.2, b.3)));
            for (_, left, key, _, value) in closed {
                let key = self.decode_key(&key)?;
                let value = self.decode_value(left, &value)?;
                emissions.extend(self.join(&key, &value, None)?);
            }
            changed.sort_by(|a, b| a.0.cmp(&b.0));
            for (slot, left) in changed {
                others.push((slot, (!left.is_empty()).then_some(JoinSlot::Held(left))));
            }
        }
        // J5: the pairs with the other side's held records in the window,
        // earliest first, then by arrival.
        let mut pairs: Vec<usize> = (0..own.len())
            .filter(|&at| {
                let held = &own[at];
                held.left != is_left
                    && match is_left {
                        true => self.in_window(timestamp, held.timestamp),
                        false => self.in_window(held.timestamp, timestamp),
                    }
            })
            .collect();
        pairs.sort_by_key(|&at| own[at].timestamp);
        for &at in &pairs {
            let other = self.decode_value(!is_left, &own[at].value)?;
            // Planted bug (I13): a right record's pair joined without it.
            let pair = match !is_left && mutation::active(Mutation::StreamJoinPairsDropRight) {
                true => self.join(&key, &other, None)?,
                false => self.join(&key, &value, Some(&other))?,
            };
            emissions.extend(pair);
            if !own[at].matched {
                own[at].matched = true;
                own_changed = true;
            }
        }
        let mut matched = !pairs.is_empty();
        // Planted bug (I13): the unmatched result at once, pre-3.1 style.
        if !matched
            && self.writes_unmatched(is_left)
            && mutation::active(Mutation::StreamJoinEmitsUnmatchedEarly)
        {
            emissions.extend(self.join(&key, &value, None)?);
            matched = true;
        }
        let closes = self.closes_after(is_left, timestamp);
        if closes >= clock.frontier {
            // J6: held until its window closes.
            own.push(Held {
                left: is_left,
                timestamp,
                matched,
                value: bytes,
            });
            own_changed = true;
            clock.next_close = Some(clock.next_close.map_or(closes, |next| next.min(closes)));
        } else if !matched && self.writes_unmatched(is_left) {
            // J7: its window closed before it came: nothing can join it.
            emissions.extend(self.join(&key, &value, None)?);
        }
        if clock != before {
            others.insert(0, (SlotKey::Tick, Some(JoinSlot::Clock(clock))));
        }
        let own = own_changed.then(|| (own_slot, (!own.is_empty()).then_some(JoinSlot::Held(own))));
        Ok(SlotChanges {
            own,
            others,
            emissions,
        })
    }

    fn slots(slots: &mut dyn SlotStore) -> &mut Slots<JoinSlot> {
        slots
            .as_any_mut()
            .downcast_mut::<Slots<JoinSlot>>()
            .expect("a stream–stream join's slots hold its records")
    }

    /// J5, J7: the output of `consumed` (read from `tp`, either side) joined
    /// with `other` (the other side's value bytes; `None`: its unmatched
    /// result), encoded; `None` when the join writes nothing. What a
    /// checker that holds the records by itself compares a delivery's
    /// output with (I13).
    fn joined(
        &self,
        tp: &Tp,
        consumed: &ConsumedRecord,
        other: Option<&[u8]>,
    ) -> Result<Option<(Option<Bytes>, Bytes)>, DeliveryFailure> {
        let is_left = tp.topic == *self.left.name();
        let Some(key) = &consumed.data.key else {
            return Err(DeliveryFailure::Logic(format!(
                "J5 (docs/RULES.md#j5): record {tp}@{} has no key",
                consumed.offset
            )));
        };
        let key = self.decode_key(key)?;
        let Some(value) = &consumed.data.value else {
            return Err(DeliveryFailure::Logic(format!(
                "J5 (docs/RULES.md#j5): record {tp}@{} has no value",
                consumed.offset
            )));
        };
        // The sides are set out here, not by `join`: the oracle that calls
        // this judges the operator's own pairing.
        let (left, right) = match is_left {
            true => (Some(value.as_ref()), other),
            false => (other, Some(value.as_ref())),
        };
        let left = left
            .map(|bytes| self.left.value_codec().decode(bytes))
            .transpose()
            .map_err(|error| DeliveryFailure::Codec {
                part: RecordPart::Value,
                error,
            })?;
        let right = right
            .map(|bytes| self.right.value_codec().decode(bytes))
            .transpose()
            .map_err(|error| DeliveryFailure::Codec {
                part: RecordPart::Value,
                error,
            })?;
        let joined = guarded(|| (self.joiner)(&key, left.as_ref(), right.as_ref()).transpose())?;
        match joined.map(|joined| self.output().send(key.clone(), joined)) {
            None => Ok(None),
            Some(emission) => match emission.encoded() {
                Ok((key, value)) => Ok(Some((
                    key.cloned(),
                    value.expect("a joined result is sent with a value").clone(),
                ))),
                Err(error) => Err(DeliveryFailure::Logic(format!(
                    "the output topic's codec refuses the join's result: {error}"
                ))),
            },
        }
    }
}

impl<K, L, R, O> super::Joiner for StreamJoinLogic<K, L, R, O>
where
    K: Clone + Send + Sync + 'static,
    L: Send + Sync + 'static,
    R: Send + Sync + 'static,
    O: 'static,
{
    fn joined(
        &self,
        tp: &Tp,
        record: &ConsumedRecord,
        other: Option<&[u8]>,
    ) -> Result<Option<(Option<Bytes>, Bytes)>, DeliveryFailure> {
        StreamJoinLogic::joined(self, tp, record, other)
    }
}

impl<K, L, R, O> StageLogic for StreamJoinLogic<K, L, R, O>
where
    K: Clone + Send + Sync + 'static,
    L: Send + Sync + 'static,
    R: Send + Sync + 'static,
    O: 'static,
{
    fn next_deadline(&self, slots: &dyn SlotStore) -> Option<Deadline> {
        let slots = slots.as_any().downcast_ref::<Slots<JoinSlot>>()?;
        Some(Deadline {
            at: Self::clock(slots).next_close?,
            domain: TimeDomain::EventTime,
            kind: DeadlineKind::JoinClose,
        })
    }

    fn new_slots(&self) -> Box<dyn SlotStore> {
        let codec: Arc<dyn Codec<JoinSlot>> = Arc::new(JoinSlotCodec);
        Box::new(Slots::<JoinSlot>::new(Some(codec)))
    }

    fn on_record(
        &self,
        slots: &mut dyn SlotStore,
        source: usize,
        tp: &Tp,
        record: &ConsumedRecord,
    ) -> Result<Outcome, DeliveryFailure> {
        let slots = Self::slots(slots);
        let changes = self.record(&*slots, source, tp, record)?;
        let (outcome, states) = wide::outcome(&JoinSlotCodec, changes)?;
        wide::propose(slots, states);
        Ok(outcome)
    }

    fn replay_record(
        &self,
        slots: &[(SlotKey, &[u8])],
        source: usize,
        tp: &Tp,
        record: &ConsumedRecord,
    ) -> Result<Outcome, ReplayFailure> {
        let view = wide::decoded(&JoinSlotCodec, slots)?;
        let changes = self.record(&view, source, tp, record)?;
        Ok(wide::outcome(&JoinSlotCodec, changes)?.0)
    }
}

/// The held records of a stream–stream join's task ([`super::held_of`]).
pub(crate) fn held_of(slots: crate::stage::SlotsView<'_>) -> Option<Vec<HeldRecord>> {
    let slots = slots.of::<JoinSlot>()?;
    let mut held: Vec<(usize, HeldRecord)> = slots
        .current_slots()
        .filter_map(|(slot, state)| match (slot, state) {
            (SlotKey::Key(key), JoinSlot::Held(held)) => {
                Some(held.iter().enumerate().map(move |(arrival, record)| {
                    let held = HeldRecord {
                        key: key.clone(),
                        left: record.left,
                        timestamp: record.timestamp,
                        matched: record.matched,
                    };
                    (arrival, held)
                }))
            }
            _ => None,
        })
        .flatten()
        .collect();
    held.sort_by(|a, b| (a.1.timestamp, &a.1.key, a.0).cmp(&(b.1.timestamp, &b.1.key, b.0)));
    Some(held.into_iter().map(|(_, record)| record).collect())
}

const TAG_CLOCK: u8 = 0;
const TAG_HELD: u8 = 1;
const FLAG_LEFT: u8 = 1;
const FLAG_MATCHED: u8 = 2;

/// The slots on the changelog: a tag byte; a clock is its frontier (8
/// bytes, big-endian) and, when a record is held, its next close (8 bytes);
/// held records are, each, a flags byte (1: left, 2: matched), the
/// timestamp (8 bytes), the value's length (4 bytes) and the value's bytes.
pub(crate) struct JoinSlotCodec;

fn refused(message: String) -> CodecError {
    CodecError {
        codec: "stream-join-slot",
        direction: Direction::Decode,
        type_name: "stream–stream join slot",
        message,
    }
}

fn take<'a>(bytes: &mut &'a [u8], n: usize, what: &str) -> Result<&'a [u8], CodecError> {
    if bytes.len() < n {
        return Err(refused(format!(
            "{what} needs {n} bytes, {} left",
            bytes.len()
        )));
    }
    let (taken, rest) = bytes.split_at(n);
    *bytes = rest;
    Ok(taken)
}

fn take_i64(bytes: &mut &[u8], what: &str) -> Result<i64, CodecError> {
    Ok(i64::from_be_bytes(
        take(bytes, 8, what)?.try_into().expect("8 bytes"),
    ))
}

impl Codec<JoinSlot> for JoinSlotCodec {
    fn encode(&self, value: &JoinSlot) -> Result<Bytes, CodecError> {
        let mut out = BytesMut::new();
        self.encode_to(value, &mut out)?;
        Ok(out.freeze())
    }

    fn encode_to(&self, value: &JoinSlot, out: &mut BytesMut) -> Result<(), CodecError> {
        match value {
            JoinSlot::Clock(clock) => {
                out.put_u8(TAG_CLOCK);
                out.put_i64(clock.frontier);
                if let Some(next) = clock.next_close {
                    out.put_i64(next);
                }
            }
            JoinSlot::Held(held) => {
                out.put_u8(TAG_HELD);
                for record in held {
                    let mut flags = 0;
                    if record.left {
                        flags |= FLAG_LEFT;
                    }
                    if record.matched {
                        flags |= FLAG_MATCHED;
                    }
                    out.put_u8(flags);
                    out.put_i64(record.timestamp);
                    let length = u32::try_from(record.value.len()).map_err(|_| CodecError {
                        codec: "stream-join-slot",
                        direction: Direction::Encode,
                        type_name: "stream–stream join slot",
                        message: format!("a value of {} bytes", record.value.len()),
                    })?;
                    out.put_u32(length);
                    out.extend_from_slice(&record.value);
                }
            }
        }
        Ok(())
    }

    fn decode(&self, bytes: &[u8]) -> Result<JoinSlot, CodecError> {
        let Some((&tag, mut rest)) = bytes.split_first() else {
            return Err(refused("an empty slot".into()));
        };
        match tag {
            TAG_CLOCK => {
                let frontier = take_i64(&mut rest, "the frontier")?;
                let next_close = match rest.is_empty() {
                    true => None,
                    false => Some(take_i64(&mut rest, "the next close")?),
                };
                if !rest.is_empty() {
                    return Err(refused(format!("{} bytes after the clock", rest.len())));
                }
                Ok(JoinSlot::Clock(Clock {
                    frontier,
                    next_close,
                }))
            }
            TAG_HELD => {
                let mut held = Vec::new();
                while !rest.is_empty() {
                    let flags = take(&mut rest, 1, "a record's flags")?[0];
                    if flags & !(FLAG_LEFT | FLAG_MATCHED) != 0 {
                        return Err(refused(format!("flags byte {flags} (expected 0 to 3)")));
                    }
                    let timestamp = take_i64(&mut rest, "a record's timestamp")?;
                    let length = u32::from_be_bytes(
                        take(&mut rest, 4, "a value's length")?
                            .try_into()
                            .expect("4 bytes"),
                    ) as usize;
                    let value = Bytes::copy_from_slice(take(&mut rest, length, "a value")?);
                    held.push(Held {
                        left: flags & FLAG_LEFT != 0,
                        timestamp,
                        matched: flags & FLAG_MATCHED != 0,
                        value,
                    });
                }
                Ok(JoinSlot::Held(held))
            }
            other => Err(refused(format!(
                "tag byte {other} (expected 0 = clock, 1 = held records)"
            ))),
        }
    }
}
