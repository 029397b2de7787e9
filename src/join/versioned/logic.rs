//! The versioned join's built-in logic (J16, J17): one implementation, run
//! by the task over its slots and by the pure replay over the slots it is
//! given, so every driver, the audit and the checker see the same join.

use std::collections::HashMap;
use std::sync::Arc;

use crate::codec::Codec;
use crate::emission::Emission;
use crate::record::{ConsumedRecord, RecordData};
use crate::stage::logic::{DeliveryFailure, Outcome, ReplayFailure, StageLogic};
use crate::stage::slots::{SlotKey, SlotStore, Slots};
use crate::stage::wide::{self, SlotChanges};
use crate::topic::RecordPart;
use crate::tp::Tp;

use super::super::logic::JoinLogic;
use super::grace::{self, Buffer, Held};
use super::history::{self, Clock, Put};
use super::slot::{VersionedSlot, VersionedSlotCodec};

/// Source 1 is the table, source 0 the stream.
const TABLE: usize = 1;

/// The counter of table updates dropped as older than the retention.
pub(crate) const UPDATES_EXPIRED: &str = "versioned-table-updates-expired-total";

/// The counter of stream records joined with a version newer than
/// themselves, shared with the plain join (`join-rows-newer-than-record-total`):
/// never counted here but by a broken lookup.
pub(crate) use super::super::logic::{ROWS_NEWER, ROWS_NEWER_HELP};

pub(crate) struct VersionedJoinLogic<K, V, T, R> {
    /// The plain join's logic, for its joiner and codecs.
    pub join: Arc<JoinLogic<K, V, T, R>>,
    /// The history retention, in milliseconds.
    pub retention: i64,
    /// The grace period, in milliseconds (J19); `None`: none.
    pub grace: Option<i64>,
}

/// The slots one delivery reads: the task's own, or those a replay is given.
trait View {
    fn slot(&self, slot: &SlotKey) -> Option<&VersionedSlot>;
}

impl View for Slots<VersionedSlot> {
    fn slot(&self, slot: &SlotKey) -> Option<&VersionedSlot> {
        self.get(slot)
    }
}

impl View for HashMap<SlotKey, VersionedSlot> {
    fn slot(&self, slot: &SlotKey) -> Option<&VersionedSlot> {
        self.get(slot)
    }
}

/// What one delivery changes, and what it counts.
struct Delivered {
    changes: SlotChanges<VersionedSlot>,
    counted: Option<&'static str>,
}

impl<K, V, T, R> VersionedJoinLogic<K, V, T, R>
where
    K: Clone + Send + Sync + 'static,
    V: Send + Sync + 'static,
    T: Clone + Send + Sync + 'static,
    R: 'static,
{
    fn clock(view: &dyn View) -> Clock {
        match view.slot(&SlotKey::Tick) {
            Some(VersionedSlot::Clock(clock) | VersionedSlot::Graced(clock, _)) => *clock,
            _ => Clock::default(),
        }
    }

    fn buffer(view: &dyn View) -> Option<&Buffer> {
        match view.slot(&SlotKey::Tick) {
            Some(VersionedSlot::Graced(_, buffer)) => Some(buffer),
            _ => None,
        }
    }

    /// The tick slot holding `clock`, and `buffer` for a join with a grace
    /// period.
    fn tick(&self, clock: Clock, buffer: Option<Buffer>) -> VersionedSlot {
        match self.grace {
            Some(_) => VersionedSlot::Graced(clock, buffer.unwrap_or_default()),
            None => VersionedSlot::Clock(clock),
        }
    }

    fn history<'a>(view: &'a dyn View, slot: &SlotKey) -> &'a [history::Version] {
        match view.slot(slot) {
            Some(VersionedSlot::History(history)) => history,
            _ => &[],
        }
    }

    /// The record's key slot, and its timestamp; refused without either.
    fn keyed(
        &self,
        rule: &str,
        side: &str,
        tp: &Tp,
        consumed: &ConsumedRecord,
    ) -> Result<(SlotKey, i64), DeliveryFailure> {
        let anchor = rule.to_lowercase();
        let Some(key) = &consumed.data.key else {
            return Err(DeliveryFailure::Logic(format!(
                "{rule} (docs/RULES.md#{anchor}): {side} record {tp}@{} has no key, and a versioned table is kept per key",
                consumed.offset
            )));
        };
        let timestamp = consumed.data.timestamp;
        if timestamp < 0 {
            return Err(DeliveryFailure::Logic(format!(
                "{rule} (docs/RULES.md#{anchor}): {side} record {tp}@{} has no timestamp ({timestamp}), and a versioned table is read and written by timestamp",
                consumed.offset
            )));
        }
        Ok((SlotKey::Key(key.clone()), timestamp))
    }

    /// J16: a table update is put into its key's history, or dropped when
    /// older than the retention.
    fn table_record(
        &self,
        view: &dyn View,
        tp: &Tp,
        consumed: &ConsumedRecord,
    ) -> Result<Delivered, DeliveryFailure> {
        let (slot, timestamp) = self.keyed("J16", "table", tp, consumed)?;
        let table = &self.join.table;
        if let SlotKey::Key(key) = &slot {
            table
                .key_codec()
                .decode(key)
                .map_err(|error| DeliveryFailure::Codec {
                    part: RecordPart::Key,
                    error,
                })?;
        }
        if consumed.data.value.is_some() {
            // A value the table's codec refuses is refused, not kept.
            table.decode(tp, consumed)?;
        }
        let clock = Self::clock(view);
        let put = history::put(
            Self::history(view, &slot),
            clock,
            self.retention,
            timestamp,
            consumed.data.value.clone(),
        );
        let Put::Put {
            history,
            clock: after,
        } = put
        else {
            return Ok(Delivered {
                changes: nothing(),
                counted: Some(UPDATES_EXPIRED),
            });
        };
        let had = view.slot(&slot).is_some();
        let own = match history {
            Some(history) => Some((slot, Some(VersionedSlot::History(history)))),
            None => had.then_some((slot, None)),
        };
        let others = match after != clock {
            true => vec![(
                SlotKey::Tick,
                Some(self.tick(after, Self::buffer(view).cloned())),
            )],
            false => Vec::new(),
        };
        Ok(Delivered {
            changes: SlotChanges {
                own,
                others,
                emissions: Vec::new(),
            },
            counted: None,
        })
    }

    /// J17: the stream record `consumed` of key slot `slot` joined with
    /// its key's version as of its timestamp; and whether that version is
    /// newer than the record (never, unless the lookup is broken).
    fn join_as_of(
        &self,
        view: &dyn View,
        tp: &Tp,
        consumed: &ConsumedRecord,
        slot: &SlotKey,
    ) -> Result<(Option<Emission>, bool), DeliveryFailure> {
        let timestamp = consumed.data.timestamp;
        let found = history::as_of(
            Self::history(view, slot),
            Self::clock(view),
            self.retention,
            timestamp,
        );
        let row = found
            .and_then(|version| version.value.as_ref())
            .map(|bytes| self.join.table.value_codec().decode(bytes))
            .transpose()
            .map_err(DeliveryFailure::StateCodec)?;
        let joined = self.join.join_record(tp, consumed, row.as_ref())?;
        let newer = found.is_some_and(|version| version.timestamp > timestamp);
        Ok((joined, newer))
    }

    /// J17, J19: a stream record joined with its key's version as of its
    /// timestamp, at once or, with a grace period, when the join's stream
    /// time passes its timestamp plus the grace.
    fn stream_record(
        &self,
        view: &dyn View,
        tp: &Tp,
        consumed: &ConsumedRecord,
    ) -> Result<Delivered, DeliveryFailure> {
        let (slot, timestamp) = self.keyed("J17", "stream", tp, consumed)?;
        let Some(grace) = self.grace else {
            let (joined, newer) = self.join_as_of(view, tp, consumed, &slot)?;
            let mut changes = nothing();
            changes.emissions.extend(joined);
            return Ok(Delivered {
                changes,
                counted: newer.then_some(ROWS_NEWER),
            });
        };
        // A value the stream's codec refuses is refused as it arrives, not
        // when it is released.
        self.join.stream.decode(tp, consumed)?;
        let SlotKey::Key(key) = slot else {
            unreachable!("a keyed record's slot is its key's")
        };
        let buffer = Self::buffer(view).cloned().unwrap_or_default();
        let arrival = grace::arrive(
            &buffer,
            grace,
            Held {
                offset: consumed.offset,
                timestamp,
                key,
                value: consumed.data.value.clone(),
                headers: consumed.data.headers.clone(),
            },
        );
        let mut changes = nothing();
        let mut newer = false;
        for held in arrival.released {
            let slot = SlotKey::Key(held.key.clone());
            let released = ConsumedRecord {
                offset: held.offset,
                data: RecordData {
                    key: Some(held.key),
                    value: held.value,
                    headers: held.headers,
                    timestamp: held.timestamp,
                },
            };
            let (joined, met_newer) = self.join_as_of(view, tp, &released, &slot)?;
            // The output carries the held record's timestamp (Kafka
            // Streams' too), not the one of the record that released it.
            changes
                .emissions
                .extend(joined.map(|emission| emission.at(held.timestamp)));
            newer |= met_newer;
        }
        if arrival.buffer != buffer {
            let tick = self.tick(Self::clock(view), Some(arrival.buffer));
            changes.others.push((SlotKey::Tick, Some(tick)));
        }
        Ok(Delivered {
            changes,
            counted: newer.then_some(ROWS_NEWER),
        })
    }

    fn deliver(
        &self,
        view: &dyn View,
        source: usize,
        tp: &Tp,
        consumed: &ConsumedRecord,
    ) -> Result<(Outcome, Vec<Option<VersionedSlot>>), DeliveryFailure> {
        let delivered = match source {
            TABLE => self.table_record(view, tp, consumed)?,
            _ => self.stream_record(view, tp, consumed)?,
        };
        let (mut outcome, proposals) = wide::outcome(&VersionedSlotCodec, delivered.changes)?;
        if let Some(name) = delivered.counted {
            outcome.counted.count(name);
        }
        Ok((outcome, proposals))
    }
}

fn nothing() -> SlotChanges<VersionedSlot> {
    SlotChanges {
        own: None,
        others: Vec::new(),
        emissions: Vec::new(),
    }
}

impl<K, V, T, R> StageLogic for VersionedJoinLogic<K, V, T, R>
where
    K: Clone + Send + Sync + 'static,
    V: Send + Sync + 'static,
    T: Clone + Send + Sync + 'static,
    R: 'static,
{
    fn new_slots(&self) -> Box<dyn SlotStore> {
        let codec: Arc<dyn Codec<VersionedSlot>> = Arc::new(VersionedSlotCodec);
        Box::new(Slots::<VersionedSlot>::new(Some(codec)))
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
            .downcast_mut::<Slots<VersionedSlot>>()
            .expect("a versioned join's slots hold its histories");
        let (outcome, proposals) = self.deliver(slots, source, tp, record)?;
        wide::propose(slots, proposals);
        Ok(outcome)
    }

    fn replay_record(
        &self,
        slots: &[(SlotKey, &[u8])],
        source: usize,
        tp: &Tp,
        record: &ConsumedRecord,
    ) -> Result<Outcome, ReplayFailure> {
        let view = wide::decoded(&VersionedSlotCodec, slots)?;
        Ok(self.deliver(&view, source, tp, record)?.0)
    }
}
