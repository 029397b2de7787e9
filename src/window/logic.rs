//! The windowed aggregation's built-in logic (W1–W5): one implementation,
//! run by the task over its slots and by the pure replay over the slots it
//! is given, so every driver and every checker sees the same windows.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;

use crate::codec::{encode_chunked, Codec};
use crate::deadline::{Deadline, DeadlineKind, TimeDomain};
use crate::emission::{Emission, Record, Tick};
use crate::record::ConsumedRecord;
use crate::stage::logic::{guarded, DeliveryFailure, Outcome, ReplayFailure, StageLogic};
use crate::stage::slots::{SlotKey, SlotStore, Slots};
use crate::stage::wide::{self, SlotChanges};
use crate::topic::{RecordPart, Topic};
use crate::tp::Tp;

use super::assign::{Shape, Span};
use super::state::{Clock, Open, WindowSlot, WindowSlotCodec};
use super::{Close, Emit, Windowed};

pub(crate) type FoldFn<K, V, A> = Arc<dyn Fn(A, &Record<K, V>) -> Result<A, String> + Send + Sync>;

/// A session aggregation's merge of two sessions' aggregates (W5).
pub(crate) type MergeFn<A> = Arc<dyn Fn(A, A) -> Result<A, String> + Send + Sync>;

pub(crate) struct WindowLogic<K, V, A> {
    pub source: Topic<K, V>,
    pub output: Option<Topic<Windowed<K>, A>>,
    pub late: Option<Topic<K, V>>,
    pub shape: Shape,
    pub emit: Emit,
    pub close: Close,
    pub init: Arc<dyn Fn() -> A + Send + Sync>,
    pub fold: FoldFn<K, V, A>,
    /// Session windows' merge; `None` for time windows.
    pub merge: Option<MergeFn<A>>,
    pub codec: Arc<WindowSlotCodec<A>>,
}

type Proposals<A> = wide::Proposals<WindowSlot<A>>;

/// W5: the span of the session a record at `timestamp` makes with the
/// sessions it joins.
fn session_span<A>(timestamp: i64, joined: &[Open<A>]) -> Span {
    joined.iter().fold(
        Span {
            start: timestamp,
            end: timestamp,
        },
        |span, open| Span {
            start: span.start.min(open.span.start),
            end: span.end.max(open.span.end),
        },
    )
}

/// The slots one delivery reads: the task's own, or those a replay is given.
trait View<A> {
    fn slot(&self, slot: &SlotKey) -> Option<&WindowSlot<A>>;
    /// Every key slot with open windows.
    fn windows(&self) -> Vec<(&SlotKey, &[Open<A>])>;
}

impl<A: Send + 'static> View<A> for Slots<WindowSlot<A>> {
    fn slot(&self, slot: &SlotKey) -> Option<&WindowSlot<A>> {
        self.get(slot)
    }

    fn windows(&self) -> Vec<(&SlotKey, &[Open<A>])> {
        self.current_slots()
            .filter_map(|(slot, state)| match state {
                WindowSlot::Windows(windows) => Some((slot, &windows[..])),
                WindowSlot::Clock(_) => None,
            })
            .collect()
    }
}

impl<A> View<A> for HashMap<SlotKey, WindowSlot<A>> {
    fn slot(&self, slot: &SlotKey) -> Option<&WindowSlot<A>> {
        self.get(slot)
    }

    fn windows(&self) -> Vec<(&SlotKey, &[Open<A>])> {
        self.iter()
            .filter_map(|(slot, state)| match state {
                WindowSlot::Windows(windows) => Some((slot, &windows[..])),
                WindowSlot::Clock(_) => None,
            })
            .collect()
    }
}

/// What one delivery changes: slots (the delivery's own first, when it
/// changes), emissions, and how many records came too late.
struct Change<A> {
    own: Option<(SlotKey, Option<WindowSlot<A>>)>,
    others: Vec<(SlotKey, Option<WindowSlot<A>>)>,
    emissions: Vec<Emission>,
    late: bool,
}

impl<K, V, A> WindowLogic<K, V, A>
where
    K: Clone + Send + Sync + 'static,
    V: Send + Sync + 'static,
    A: Clone + Send + Sync + 'static,
{
    fn clock(view: &dyn View<A>) -> Clock {
        match view.slot(&SlotKey::Tick) {
            Some(WindowSlot::Clock(clock)) => *clock,
            _ => Clock::default(),
        }
    }

    fn output(&self) -> &Topic<Windowed<K>, A> {
        self.output
            .as_ref()
            .expect("assembly refuses a windowed aggregation without an output topic")
    }

    /// W5: the aggregate of the session a record makes with the sessions
    /// it joins: the initial value merged with each joined session's
    /// aggregate, in start order, then the record folded in (as Kafka
    /// Streams' session aggregation does).
    fn merged(&self, joined: &[Open<A>], record: &Record<K, V>) -> Result<A, DeliveryFailure> {
        let merge = self
            .merge
            .as_ref()
            .expect("a session aggregation is built with its merge");
        let mut aggregate = (self.init)();
        for session in joined {
            let earlier = session.aggregate.clone();
            aggregate =
                match crate::mutation::active(crate::mutation::Mutation::SessionMergeKeepsLast) {
                    // Planted bug (W5, I12): each joined session's aggregate
                    // replaces what came before instead of merging with it.
                    true => earlier,
                    false => guarded(|| merge(aggregate, earlier))?,
                };
        }
        guarded(|| (self.fold)(aggregate, record))
    }

    /// W1, W5, W3: a record added to its key's windows that are open, W2:
    /// and the windows its stream time closes.
    fn record(
        &self,
        view: &dyn View<A>,
        tp: &Tp,
        consumed: &ConsumedRecord,
    ) -> Result<Change<A>, DeliveryFailure> {
        let record = self.source.decode(tp, consumed)?;
        let (Some(key_bytes), Some(key)) = (&consumed.data.key, &record.key) else {
            return Err(DeliveryFailure::Logic(format!(
                "W1 (docs/RULES.md#w1): record {tp}@{} has no key, and a windowed aggregation groups by key",
                consumed.offset
            )));
        };
        let timestamp = consumed.data.timestamp;
        if timestamp < 0 {
            return Err(DeliveryFailure::Logic(format!(
                "W1 (docs/RULES.md#w1): record {tp}@{} has no timestamp ({timestamp}), and a windowed aggregation places records by theirs",
                consumed.offset
            )));
        }
        let clock = Self::clock(view);
        let frontier = match self.close {
            Close::StreamTime => clock.frontier.max(timestamp),
            Close::WallClock { .. } => clock.frontier,
        };
        let slot = SlotKey::Key(key_bytes.clone());
        let mut windows = match view.slot(&slot) {
            Some(WindowSlot::Windows(windows)) => windows.clone(),
            _ => Vec::new(),
        };
        let mut next_close = clock.next_close;
        let mut emissions = Vec::new();
        let mut missed = false;
        let mut folded = false;
        let mut folded_into = |window: &Open<A>, emissions: &mut Vec<Emission>| {
            folded = true;
            let closes = self.shape.closes_at(window.span.end);
            next_close = Some(next_close.map_or(closes, |next: i64| next.min(closes)));
            if self.emit == Emit::OnUpdate {
                emissions.push(
                    self.output()
                        .send(
                            Windowed {
                                key: key.clone(),
                                start: window.span.start,
                                end: window.span.end,
                            },
                            window.aggregate.clone(),
                        )
                        .at(window.latest),
                );
            }
        };
        match self.shape {
            Shape::Time { size, advance, .. } => {
                for span in Shape::spans_of(size, advance, timestamp) {
                    if self.shape.is_closed(span.end, frontier) {
                        missed = true;
                        continue;
                    }
                    let index =
                        match windows.binary_search_by_key(&span.start, |open| open.span.start) {
                            Ok(index) => index,
                            Err(index) => {
                                windows.insert(
                                    index,
                                    Open {
                                        span,
                                        aggregate: (self.init)(),
                                        latest: timestamp,
                                    },
                                );
                                index
                            }
                        };
                    let aggregate = windows[index].aggregate.clone();
                    windows[index].aggregate = guarded(|| (self.fold)(aggregate, &record))?;
                    windows[index].latest = windows[index].latest.max(timestamp);
                    folded_into(&windows[index], &mut emissions);
                }
            }
            Shape::Session { gap, .. } => {
                let joined = Shape::sessions_joined(gap, timestamp, &windows, |open| open.span);
                let span = session_span(timestamp, &windows[joined.clone()]);
                if self.shape.is_closed(span.end, frontier) {
                    // W3: the session it would make is closed already; the
                    // sessions it touches stay as they were.
                    missed = true;
                } else {
                    let aggregate = self.merged(&windows[joined.clone()], &record)?;
                    let at = joined.start;
                    windows.splice(
                        joined,
                        [Open {
                            span,
                            aggregate,
                            latest: span.end,
                        }],
                    );
                    folded_into(&windows[at], &mut emissions);
                }
            }
        }
        if missed {
            if let Some(topic) = &self.late {
                // The record as it came: its own bytes, not re-encoded.
                let value = consumed.data.value.clone().unwrap_or_default();
                emissions.push(Emission::new(
                    topic.name().clone(),
                    Ok((Some(key_bytes.clone()), value)),
                ));
            }
        }
        let clock = Clock {
            frontier,
            next_close,
        };
        let mut change = self.close_due(view, clock, Some((&slot, windows, folded)), emissions)?;
        change.late = missed;
        Ok(change)
    }

    /// W2: a tick moves a wall-clock frontier to its time.
    fn tick(&self, view: &dyn View<A>, tick: Tick) -> Result<Change<A>, DeliveryFailure> {
        let clock = Self::clock(view);
        let clock = Clock {
            frontier: clock.frontier.max(tick.timestamp),
            ..clock
        };
        self.close_due(view, clock, None, Vec::new())
    }

    /// W2: closes every window the frontier of `clock` has reached (when
    /// one is due), emitting each closed window's aggregate (W4, on close)
    /// in the order (end, key, start); `own` is the delivering record's
    /// slot with its windows as the delivery left them, and whether the
    /// delivery folded the record into any.
    fn close_due(
        &self,
        view: &dyn View<A>,
        mut clock: Clock,
        own: Option<(&SlotKey, Vec<Open<A>>, bool)>,
        mut emissions: Vec<Emission>,
    ) -> Result<Change<A>, DeliveryFailure> {
        let before = Self::clock(view);
        let mut own_changed = own.as_ref().is_some_and(|(_, _, folded)| *folded);
        let own_slot = own.as_ref().map(|(slot, _, _)| (*slot).clone());
        let mut own_windows = own.map(|(_, windows, _)| windows);
        let mut others = Vec::new();
        if clock.next_close.is_some_and(|next| next <= clock.frontier) {
            let mut closed: Vec<(Span, SlotKey, A, i64)> = Vec::new();
            let mut next_close: Option<i64> = None;
            let mut keep = |slot: &SlotKey, windows: &[Open<A>], closed: &mut Vec<_>| {
                let mut left = Vec::with_capacity(windows.len());
                for open in windows {
                    if self.shape.is_closed(open.span.end, clock.frontier) {
                        closed.push((open.span, slot.clone(), open.aggregate.clone(), open.latest));
                    } else {
                        let closes = self.shape.closes_at(open.span.end);
                        next_close = Some(next_close.map_or(closes, |next| next.min(closes)));
                        left.push(open.clone());
                    }
                }
                left
            };
            let mut changed_others = Vec::new();
            for (slot, windows) in view.windows() {
                if Some(slot) == own_slot.as_ref() {
                    continue;
                }
                let left = keep(slot, windows, &mut closed);
                if left.len() != windows.len() {
                    changed_others.push((slot.clone(), left));
                }
            }
            if let (Some(slot), Some(windows)) = (&own_slot, &own_windows) {
                let left = keep(slot, windows, &mut closed);
                own_changed |= left.len() != windows.len();
                own_windows = Some(left);
            }
            clock.next_close = next_close;
            closed.sort_by(|a, b| (a.0.end, &a.1, a.0.start).cmp(&(b.0.end, &b.1, b.0.start)));
            if self.emit == Emit::OnClose {
                // A planted bug (W4, I12) writes the delivery's timestamp.
                let written_at_close = crate::mutation::active(
                    crate::mutation::Mutation::WindowWrittenAtClosingRecord,
                );
                for (span, slot, aggregate, latest) in closed {
                    let SlotKey::Key(bytes) = &slot else {
                        unreachable!("windows are kept in key slots")
                    };
                    let key = self.source.key_codec().decode(bytes).map_err(|error| {
                        DeliveryFailure::Codec {
                            part: RecordPart::Key,
                            error,
                        }
                    })?;
                    let written = self.output().send(
                        Windowed {
                            key,
                            start: span.start,
                            end: span.end,
                        },
                        aggregate,
                    );
                    emissions.push(match written_at_close {
                        true => written,
                        false => written.at(latest),
                    });
                }
            }
            // Slots in key order: the changelog's order is the delivery's.
            changed_others.sort_by(|a, b| a.0.cmp(&b.0));
            for (slot, left) in changed_others {
                others.push((
                    slot,
                    (!left.is_empty()).then_some(WindowSlot::Windows(left)),
                ));
            }
        }
        if clock != before {
            others.insert(0, (SlotKey::Tick, Some(WindowSlot::Clock(clock))));
        }
        let own = match (own_slot, own_windows) {
            (Some(slot), Some(windows)) if own_changed => Some((
                slot,
                (!windows.is_empty()).then_some(WindowSlot::Windows(windows)),
            )),
            _ => None,
        };
        Ok(Change {
            own,
            others,
            emissions,
            late: false,
        })
    }

    /// The outcome of a change, and the states to propose, in the order the
    /// task accepts them (the delivery's own slot first).
    fn outcome(&self, change: Change<A>) -> Result<(Outcome, Proposals<A>), DeliveryFailure> {
        let changes = SlotChanges {
            own: change.own,
            others: change.others,
            emissions: change.emissions,
        };
        let (mut outcome, states) = wide::outcome(&*self.codec, changes)?;
        if change.late {
            outcome.counted.count(LATE_RECORDS);
        }
        Ok((outcome, states))
    }

    fn slots(slots: &mut dyn SlotStore) -> &mut Slots<WindowSlot<A>> {
        slots
            .as_any_mut()
            .downcast_mut::<Slots<WindowSlot<A>>>()
            .expect("a windowed aggregation's slots hold windows")
    }
}

/// W3's late records, as a task's metrics count them.
pub(crate) const LATE_RECORDS: &str = "window-records-late-total";

/// A windowed aggregation's user logic with its topics' codecs, for the
/// harness's oracle ([`super::WindowDecl`]): the user's initial value, fold
/// and merge over aggregates encoded with the aggregate's codec, and the
/// output record of a window. None of the operator's window arithmetic.
pub(crate) trait WindowFold: Send + Sync {
    fn initial(&self) -> Result<Bytes, DeliveryFailure>;
    fn fold(
        &self,
        aggregate: &[u8],
        tp: &Tp,
        record: &ConsumedRecord,
    ) -> Result<Bytes, DeliveryFailure>;
    fn merge(&self, aggregate: &[u8], earlier: &[u8]) -> Result<Bytes, DeliveryFailure>;
    fn output(
        &self,
        key: &[u8],
        bounds: (i64, i64),
        aggregate: &[u8],
    ) -> Result<(Bytes, Bytes), DeliveryFailure>;
}

impl<K, V, A> WindowLogic<K, V, A>
where
    K: Clone + Send + Sync + 'static,
    V: Send + Sync + 'static,
    A: Clone + Send + Sync + 'static,
{
    fn decode_aggregate(&self, bytes: &[u8]) -> Result<A, DeliveryFailure> {
        self.codec
            .aggregate
            .decode(bytes)
            .map_err(DeliveryFailure::StateCodec)
    }

    fn encode_aggregate(&self, aggregate: &A) -> Result<Bytes, DeliveryFailure> {
        encode_chunked(&*self.codec.aggregate, aggregate).map_err(DeliveryFailure::StateCodec)
    }
}

impl<K, V, A> WindowFold for WindowLogic<K, V, A>
where
    K: Clone + Send + Sync + 'static,
    V: Send + Sync + 'static,
    A: Clone + Send + Sync + 'static,
{
    fn initial(&self) -> Result<Bytes, DeliveryFailure> {
        self.encode_aggregate(&guarded(|| Ok((self.init)()))?)
    }

    fn fold(
        &self,
        aggregate: &[u8],
        tp: &Tp,
        consumed: &ConsumedRecord,
    ) -> Result<Bytes, DeliveryFailure> {
        let aggregate = self.decode_aggregate(aggregate)?;
        let record = self.source.decode(tp, consumed)?;
        self.encode_aggregate(&guarded(|| (self.fold)(aggregate, &record))?)
    }

    fn merge(&self, aggregate: &[u8], earlier: &[u8]) -> Result<Bytes, DeliveryFailure> {
        let Some(merge) = &self.merge else {
            return Err(DeliveryFailure::Logic(
                "W5 (docs/RULES.md#w5): time windows have no merge".to_string(),
            ));
        };
        let (aggregate, earlier) = (
            self.decode_aggregate(aggregate)?,
            self.decode_aggregate(earlier)?,
        );
        self.encode_aggregate(&guarded(|| merge(aggregate, earlier))?)
    }

    fn output(
        &self,
        key: &[u8],
        (start, end): (i64, i64),
        aggregate: &[u8],
    ) -> Result<(Bytes, Bytes), DeliveryFailure> {
        let key = self
            .source
            .key_codec()
            .decode(key)
            .map_err(|error| DeliveryFailure::Codec {
                part: RecordPart::Key,
                error,
            })?;
        let aggregate = self.decode_aggregate(aggregate)?;
        let output = self.output();
        let windowed = Windowed { key, start, end };
        let key = encode_chunked(output.key_codec(), &windowed);
        let value = encode_chunked(output.value_codec(), &aggregate);
        key.and_then(|key| Ok((key, value?)))
            .map_err(DeliveryFailure::StateCodec)
    }
}

impl<K, V, A> StageLogic for WindowLogic<K, V, A>
where
    K: Clone + Send + Sync + 'static,
    V: Send + Sync + 'static,
    A: Clone + Send + Sync + 'static,
{
    fn next_deadline(&self, slots: &dyn SlotStore) -> Option<Deadline> {
        let slots = slots.as_any().downcast_ref::<Slots<WindowSlot<A>>>()?;
        let at = Self::clock(slots).next_close?;
        let domain = match self.close {
            Close::StreamTime => TimeDomain::EventTime,
            Close::WallClock { .. } => TimeDomain::WallClock,
        };
        Some(Deadline {
            at,
            domain,
            kind: DeadlineKind::WindowClose,
        })
    }

    fn new_slots(&self) -> Box<dyn SlotStore> {
        let codec: Arc<dyn Codec<WindowSlot<A>>> = self.codec.clone();
        Box::new(Slots::<WindowSlot<A>>::new(Some(codec)))
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
        let (outcome, states) = self.outcome(change)?;
        wide::propose(slots, states);
        Ok(outcome)
    }

    fn on_tick(&self, slots: &mut dyn SlotStore, tick: Tick) -> Result<Outcome, DeliveryFailure> {
        let slots = Self::slots(slots);
        let change = self.tick(&*slots, tick)?;
        let (outcome, states) = self.outcome(change)?;
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
        Ok(self.outcome(change)?.0)
    }

    fn replay_tick(
        &self,
        slots: &[(SlotKey, &[u8])],
        tick: Tick,
    ) -> Result<Outcome, ReplayFailure> {
        let view = wide::decoded(&*self.codec, slots)?;
        let change = self.tick(&view, tick)?;
        Ok(self.outcome(change)?.0)
    }
}
