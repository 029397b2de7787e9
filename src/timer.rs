//! The timer service of the request/reply shape (K2): per-entity timers as
//! a stage of the application, so that every driver runs the same one.
//!
//! A stage that wants "wake me at time T for key K" emits a *timer request*:
//! a record keyed K whose value is T, in milliseconds, on a request topic.
//! The timer service consumes the requests and, once T has come, writes one
//! *fire* record to the fire topic: keyed K, valued T. The stage consumes
//! the fires like any source, through its gate.
//!
//! The service is a stage ([`OperatorBuilder::build`] returns a
//! [`Stage`]) with built-in logic, so it runs as tasks of the application,
//! one per request partition, under the same transactions, fencing, group
//! membership and failover as every stage:
//!
//! - **Pending timers are state.** A request's delivery adds its time to its
//!   key's slot (the slot holds that key's pending times, sorted), written
//!   to the service's changelog in the same transaction (S5): a restarted or
//!   moved task restores its pending timers from the changelog, without
//!   reading the requests again.
//! - **Time comes from ticks.** The service ticks every
//!   [`OperatorBuilder::resolution`] (T3); a tick's delivery fires every
//!   pending timer due at the tick's timestamp, earliest first (then by
//!   key), and removes
//!   them from their slots, in the tick's transaction: a crash neither loses
//!   nor repeats a fire (X1), and no fire precedes its time. A fire is at
//!   most one resolution (plus the commit interval) after the later of its
//!   time and its request's timestamp. In the
//!   `TestDriver`, `advance_wall_clock` ticks, so it fires what is due.
//! - **Fires are stamped at the stamping site (G5).** The service's history
//!   is the causal clock of K1 over the requests it delivered: a fire claims
//!   its request and everything the request claims, so the stage that
//!   consumes it is held until it has delivered the request's causes.
//! - **Every committed request fires exactly once.** Two requests for one
//!   key at the same time fire twice; a request is never replaced.
//!
//! Requests the service refuses stop its task, or go to its dead-letter
//! topic with [`OperatorBuilder::dead_letter_queue`] (X5): a request
//! without a key, and a value the request topic's codec rejects. A request
//! for a time before its own timestamp (a timer "in the past") is due at
//! once: it fires at the service's next tick, as a Kafka Streams punctuator
//! scheduled in the past would, and the task counts it
//! (`timer-requests-late-total`). Assembly requires the fire topic to have as many
//! partitions as the request topic (C3), so a key's fire lands where its
//! request did and where the requesting stage's task reads it.
//!
//! ```
//! use std::time::Duration;
//! use parsley::{Parsley, Stage, Step, Topic, Utf8, I64};
//!
//! let clicks = Topic::<String, i64>::with_codecs("clicks", Utf8, I64);
//! let requests = Topic::<String, i64>::with_codecs("session-timer-requests", Utf8, I64);
//! let fires = Topic::<String, i64>::with_codecs("session-timer-fires", Utf8, I64);
//! let closed = Topic::<String, i64>::with_codecs("closed-sessions", Utf8, I64);
//! let sessions = Stage::named("sessions")
//!     .state(I64, || 0i64)
//!     .on(&clicks, {
//!         let requests = requests.clone();
//!         // Remember the last click; ask to be woken 30 s after it.
//!         move |_last: i64, click| {
//!             let at = click.timestamp() + 30_000;
//!             Step::of(click.timestamp()).emit(requests.send(click.key().cloned(), at))
//!         }
//!     })
//!     .on(&fires, {
//!         let closed = closed.clone();
//!         // A fire for the last click's timer closes the session.
//!         move |last: i64, fire| match last + 30_000 == *fire.value() {
//!             true => Step::delete().emit(closed.send(fire.key().cloned(), last)),
//!             false => Step::of(last),
//!         }
//!     })
//!     .into(&requests)
//!     .into(&closed)
//!     .build();
//! let timers = Stage::named("session-timers").timer_service(&requests, &fires).build();
//! let app = Parsley::named("shop").stage(sessions).stage(timers).build()?;
//! assert!(app.stage("session-timers").unwrap().stage.hooks().operator::<parsley::TimerDecl>().is_some());
//! # Ok::<(), parsley::CompositionError>(())
//! ```

use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};

use crate::codec::{Codec, CodecError, Direction};
use crate::emission::Tick;
use crate::operator::{CoPartitioned, Counter, Operator};
use crate::record::ConsumedRecord;
use crate::stage::logic::{DeliveryFailure, Outcome, ReplayFailure, SlotWrite, StageLogic};
use crate::stage::slots::{SlotKey, SlotStore, Slots};
use crate::stage::{
    Declaration, OperatorBuilder, OperatorParts, Stage, StageBuilder, StageHead, Stateless,
    TickDecl, TickKind,
};
use crate::topic::{RecordPart, Topic, TopicRef};
use crate::tp::{TopicName, Tp};

/// The default [`OperatorBuilder::resolution`]: one second.
pub const DEFAULT_RESOLUTION: Duration = Duration::from_secs(1);

/// A timer service's declaration, as [`StageHooks::operator`](crate::StageHooks::operator) finds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimerDecl {
    /// The topic the service reads requests from.
    pub requests: TopicName,
    /// The topic it writes fires to.
    pub fires: TopicName,
    /// Its tick interval: how late a fire may be.
    pub resolution: Duration,
}

impl Operator for TimerDecl {
    /// A tick fires any key's due timers (K2).
    fn tick_reads_every_slot(&self) -> bool {
        true
    }

    /// C3, K2: its fires land on its requests' partitions.
    fn co_partitioned(&self, stage: &str) -> Vec<CoPartitioned> {
        vec![CoPartitioned {
            leader: self.requests.clone(),
            follower: self.fires.clone(),
            role: format!(
                "fires of timer service {stage}, which must match its requests {}",
                self.requests
            ),
            fix: format!(
                "give {} and {} the same partition count",
                self.fires, self.requests
            ),
        }]
    }

    fn counters(&self) -> &'static [Counter] {
        &[Counter {
            name: LATE_REQUESTS,
            help: "Timer requests (K2) for a time before their own timestamp: each fired at the timer service's next tick.",
        }]
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// K2's late timer requests, as a task's metrics count them.
pub(crate) const LATE_REQUESTS: &str = "timer-requests-late-total";

impl StageBuilder<Stateless> {
    /// A timer service's stage (K2): it reads timer requests from
    /// `requests` (a key and the time it asks to be woken at) and writes
    /// each fire to `fires` when its time has come.
    ///
    /// ```
    /// use std::time::Duration;
    /// use parsley::prelude::*;
    ///
    /// let requests: Topic<String, i64> = Topic::new("requests");
    /// let fires: Topic<String, i64> = Topic::new("fires");
    /// let timers = Stage::named("timers")
    ///     .timer_service(&requests, &fires)
    ///     .resolution(Duration::from_millis(100))
    ///     .build();
    /// assert_eq!(timers.name(), "timers");
    /// ```
    pub fn timer_service<K: Clone + Send + Sync + 'static>(
        self,
        requests: &Topic<K, i64>,
        fires: &Topic<K, i64>,
    ) -> OperatorBuilder<TimerService<K>> {
        self.choose(()).with(TimerService {
            requests: requests.clone(),
            fires: fires.clone(),
            resolution: DEFAULT_RESOLUTION,
        })
    }
}

/// The timer service of K2, as [`OperatorBuilder`] declares it (the rules
/// it keeps are in `docs/RULES.md`). It writes only its fires: `into`
/// takes nothing.
pub struct TimerService<K> {
    requests: Topic<K, i64>,
    fires: Topic<K, i64>,
    resolution: Duration,
}

impl<K: Clone + Send + Sync + 'static> OperatorBuilder<TimerService<K>> {
    /// How often the service looks for due timers (its tick interval, T3):
    /// a fire is at most this late. Default one second.
    pub fn resolution(mut self, resolution: Duration) -> Self {
        self.declaration.resolution = resolution;
        self
    }
}

impl<K: Clone + Send + Sync + 'static> Declaration for TimerService<K> {
    type Output = std::convert::Infallible;
    type Built = Stage;

    fn declare(self, head: StageHead, _output: Option<std::convert::Infallible>) -> Stage {
        let TimerService {
            requests,
            fires,
            resolution,
        } = self;
        let mut problems = Vec::new();
        if resolution.is_zero() {
            problems.push(crate::stage::StageProblem::ZeroTickInterval);
        }
        let operator = Arc::new(TimerDecl {
            requests: requests.name().clone(),
            fires: fires.name().clone(),
            resolution,
        });
        head.stage(OperatorParts {
            sources: vec![TopicRef::from(&requests)],
            sinks: vec![TopicRef::from(&fires)],
            ticks: Some(TickDecl {
                interval: resolution,
                kind: TickKind::Fold,
            }),
            operator,
            logic: Arc::new(TimerLogic {
                requests,
                fires,
                resolution,
            }),
            problems,
        })
    }
}

/// A key's pending timers: their times, earliest first. A type of its own,
/// so that only a timer service's slots downcast to `Slots<Pending>` (a
/// stage of the user's may well keep a `Vec<i64>`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Pending(Vec<i64>);

impl std::ops::Deref for Pending {
    type Target = Vec<i64>;

    fn deref(&self) -> &Vec<i64> {
        &self.0
    }
}

/// The pending times of a slot on the changelog: 8 big-endian bytes each,
/// as Kafka's `LongSerializer` writes one.
struct PendingCodec;

impl Codec<Pending> for PendingCodec {
    fn encode(&self, value: &Pending) -> Result<Bytes, CodecError> {
        let mut out = BytesMut::with_capacity(8 * value.len());
        self.encode_to(value, &mut out)?;
        Ok(out.freeze())
    }

    fn encode_to(&self, value: &Pending, out: &mut BytesMut) -> Result<(), CodecError> {
        for time in value.iter() {
            out.put_i64(*time);
        }
        Ok(())
    }

    fn decode(&self, bytes: &[u8]) -> Result<Pending, CodecError> {
        if bytes.len() % 8 != 0 {
            return Err(CodecError {
                codec: "timer-pending",
                direction: Direction::Decode,
                type_name: "pending timer times",
                message: format!("expected a multiple of 8 bytes, got {}", bytes.len()),
            });
        }
        let times: Vec<i64> = bytes
            .chunks_exact(8)
            .map(|chunk| i64::from_be_bytes(chunk.try_into().expect("chunks of 8")))
            .collect();
        if times.windows(2).any(|pair| pair[0] > pair[1]) {
            return Err(CodecError {
                codec: "timer-pending",
                direction: Direction::Decode,
                type_name: "pending timer times",
                message: "times are not in order".into(),
            });
        }
        Ok(Pending(times))
    }
}

/// The timer service's built-in logic.
struct TimerLogic<K> {
    requests: Topic<K, i64>,
    fires: Topic<K, i64>,
    /// Read only by the planted bug `TimerFiresEarly`.
    resolution: Duration,
}

impl<K: Clone + Send + Sync + 'static> TimerLogic<K> {
    fn slots(slots: &mut dyn SlotStore) -> &mut Slots<Pending> {
        slots
            .as_any_mut()
            .downcast_mut::<Slots<Pending>>()
            .expect("a timer service's slots hold pending times")
    }

    /// A request's key, decoded with the request topic's key codec.
    fn key(&self, key: &[u8]) -> Result<K, DeliveryFailure> {
        self.requests
            .key_codec()
            .decode(key)
            .map_err(|error| DeliveryFailure::Codec {
                part: RecordPart::Key,
                error,
            })
    }

    /// The request's key and time, or why the service refuses it. A time
    /// before the request's own timestamp is no refusal: it is due already,
    /// so it fires at the service's next tick, as a punctuator scheduled in
    /// the past would (the natural re-arm on a fire asks for one, since a
    /// fire carries the service's tick time).
    fn request(&self, tp: &Tp, record: &ConsumedRecord) -> Result<(Bytes, i64), DeliveryFailure> {
        let key = match &record.data.key {
            Some(key) => key.clone(),
            None => {
                return Err(DeliveryFailure::Logic(format!(
                    "K2 (docs/RULES.md#k2): timer request {tp}@{} has no key, so its fire could have none",
                    record.offset
                )))
            }
        };
        self.key(&key)?;
        let value = record.data.value.as_deref().unwrap_or_default();
        let at =
            self.requests
                .value_codec()
                .decode(value)
                .map_err(|error| DeliveryFailure::Codec {
                    part: RecordPart::Value,
                    error,
                })?;
        Ok((key, at))
    }

    /// A request's new pending times for its key.
    fn add(pending: Option<Pending>, at: i64) -> Pending {
        let mut pending = pending.unwrap_or_default();
        let index = pending.partition_point(|time| *time <= at);
        pending.0.insert(index, at);
        pending
    }

    /// A request's outcome: its key's new pending times, and K2's late
    /// request counted.
    fn requested(write: SlotWrite, late: bool) -> Outcome {
        let mut outcome = Outcome {
            write: Some(write),
            ..Outcome::default()
        };
        if late {
            outcome.counted.count(LATE_REQUESTS);
        }
        outcome
    }

    fn write(slot: SlotKey, pending: &Pending) -> Result<SlotWrite, DeliveryFailure> {
        let encoded = match pending.is_empty() {
            true => None,
            false => Some(
                crate::codec::encode_chunked(&PendingCodec, pending)
                    .map_err(DeliveryFailure::StateCodec)?,
            ),
        };
        Ok(SlotWrite { slot, encoded })
    }

    /// A tick at `now` over `slots` (every key's pending times): the fires
    /// due, earliest first (then by key bytes), and each changed slot's
    /// remaining times, in the order of their keys' earliest fires.
    fn fire<'a>(
        &self,
        slots: impl Iterator<Item = (&'a SlotKey, Pending)>,
        now: i64,
    ) -> Result<(Outcome, Vec<Option<Pending>>), DeliveryFailure> {
        // Planted bug (I11): fire what is due a resolution from now.
        use crate::mutation::{active, Mutation};
        let now = if active(Mutation::TimerFiresEarly) {
            now.saturating_add(self.resolution.as_millis() as i64)
        } else if active(Mutation::TimerFiresOneMsEarly) {
            // Planted bug (I11): a timer due a millisecond after the tick.
            now.saturating_add(1)
        } else if active(Mutation::TimerSkipsExactDue) {
            // Planted bug (I11): a timer due at the tick's time waits.
            now.saturating_sub(1)
        } else {
            now
        };
        let mut due: Vec<(i64, Bytes, Pending)> = Vec::new();
        for (slot, pending) in slots {
            let SlotKey::Key(key) = slot else { continue };
            if pending.first().is_some_and(|first| *first <= now) {
                due.push((pending[0], key.clone(), pending));
            }
        }
        // The map's order is a hash's: fires go out in an order of their own.
        due.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        // Every fire of the tick, earliest first, then by key (a key's own
        // times are sorted already).
        let mut fires: Vec<(i64, usize)> = Vec::new();
        for (index, (_, _, pending)) in due.iter().enumerate() {
            let split = pending.partition_point(|time| *time <= now);
            fires.extend(pending[..split].iter().map(|at| (*at, index)));
        }
        fires.sort_by(|a, b| (a.0, &due[a.1].1).cmp(&(b.0, &due[b.1].1)));
        let mut emissions = Vec::with_capacity(fires.len());
        for (at, index) in fires {
            emissions.push(self.fires.send(self.key(&due[index].1)?, at));
        }
        let mut writes = Vec::with_capacity(due.len());
        let mut states = Vec::with_capacity(due.len());
        for (_, key, pending) in due {
            let split = pending.partition_point(|time| *time <= now);
            let left = &pending[split..];
            // Planted bug (I11): what fired within the last resolution stays
            // pending, so the next tick fires it again (once: by then it is
            // older than that).
            let left = match crate::mutation::active(crate::mutation::Mutation::TimerKeepsFired) {
                true => {
                    let recent = now.saturating_sub(self.resolution.as_millis() as i64);
                    Pending(
                        pending
                            .iter()
                            .copied()
                            .filter(|time| *time > recent)
                            .collect(),
                    )
                }
                false => Pending(left.to_vec()),
            };
            writes.push(Self::write(SlotKey::Key(key), &left)?);
            states.push((!left.is_empty()).then_some(left));
        }
        // A tick's own slot (the tick slot) is untouched: every change is
        // to another slot.
        let outcome = Outcome {
            emissions,
            write: None,
            more_writes: writes,
            ..Outcome::default()
        };
        Ok((outcome, states))
    }
}

impl<K: Clone + Send + Sync + 'static> StageLogic for TimerLogic<K> {
    fn new_slots(&self) -> Box<dyn SlotStore> {
        // Indexed by each key's earliest pending time: a tick visits the
        // keys due by it, and the next deadline is the index's first entry,
        // whatever the number of keys.
        Box::new(Slots::<Pending>::with_index(
            Some(Arc::new(PendingCodec)),
            earliest_of,
        ))
    }

    fn on_record(
        &self,
        slots: &mut dyn SlotStore,
        _source: usize,
        tp: &Tp,
        record: &ConsumedRecord,
    ) -> Result<Outcome, DeliveryFailure> {
        let (key, at) = self.request(tp, record)?;
        let late = at < record.data.timestamp;
        let slots = Self::slots(slots);
        let slot = SlotKey::Key(key);
        // Planted bug (I11, I6): the task forgets a request with an odd time
        // (the pure replay still holds it).
        let forget = crate::mutation::active(crate::mutation::Mutation::TimerDropsOddRequests)
            && at % 2 != 0;
        let pending = match forget {
            true => slots.get(&slot).cloned().unwrap_or_default(),
            false => Self::add(slots.get(&slot).cloned(), at),
        };
        let write = Self::write(slot, &pending)?;
        slots.propose((!pending.is_empty()).then_some(pending));
        Ok(Self::requested(write, late))
    }

    fn on_tick(&self, slots: &mut dyn SlotStore, tick: Tick) -> Result<Outcome, DeliveryFailure> {
        let slots = Self::slots(slots);
        // The keys whose earliest time is due by the tick, from the index
        // (a planted bug may fire up to a resolution ahead: those too).
        let reach = (self.resolution.as_millis() as i64).max(1);
        let by = tick.timestamp.saturating_add(reach);
        let due: Vec<(&SlotKey, Pending)> = slots
            .by_time()
            .take_while(|(earliest, _)| *earliest <= by)
            .filter_map(|(_, slot)| Some((slot, slots.get(slot)?.clone())))
            .collect();
        let (mut outcome, states) = self.fire(due.into_iter(), tick.timestamp)?;
        // Planted bug (I5): the fires are written unstamped.
        outcome.planted_unstamped =
            crate::mutation::active(crate::mutation::Mutation::TimerFireUnstamped);
        let mut states = states.into_iter();
        if let Some(first) = states.next() {
            slots.propose(first);
            for state in states {
                slots.propose_more(state);
            }
        }
        Ok(outcome)
    }

    fn next_deadline(&self, slots: &dyn SlotStore) -> Option<crate::deadline::Deadline> {
        let slots = slots.as_any().downcast_ref::<Slots<Pending>>()?;
        earliest_pending(slots).map(|at| {
            crate::deadline::Deadline::wall_clock(at, crate::deadline::DeadlineKind::Timer)
        })
    }

    fn restored(&self, slots: &mut dyn SlotStore, now: i64) {
        // Planted bug (I11): the restored timers already due are dropped,
        // as if they had fired before the restart.
        if crate::mutation::active(crate::mutation::Mutation::TimerLostWhenOverdueAtStart) {
            forget_overdue(slots, now);
        }
    }

    fn replay_record(
        &self,
        slots: &[(SlotKey, &[u8])],
        _source: usize,
        tp: &Tp,
        record: &ConsumedRecord,
    ) -> Result<Outcome, ReplayFailure> {
        let pending = slots
            .first()
            .map(|(_, bytes)| PendingCodec.decode(bytes))
            .transpose()
            .map_err(ReplayFailure::State)?;
        let (key, at) = self.request(tp, record)?;
        let late = at < record.data.timestamp;
        let pending = Self::add(pending, at);
        Ok(Self::requested(
            Self::write(SlotKey::Key(key), &pending)?,
            late,
        ))
    }

    fn replay_tick(
        &self,
        slots: &[(SlotKey, &[u8])],
        tick: Tick,
    ) -> Result<Outcome, ReplayFailure> {
        let mut decoded = Vec::with_capacity(slots.len());
        for (slot, bytes) in slots {
            decoded.push((
                slot,
                PendingCodec.decode(bytes).map_err(ReplayFailure::State)?,
            ));
        }
        let (outcome, _) = self.fire(decoded.into_iter(), tick.timestamp)?;
        Ok(outcome)
    }
}

/// The pending timers of a timer service's task, as `(key, time)` pairs in
/// time order, from its slots (`Task::slots`); `None` when the slots are not
/// a timer service's.
pub fn pending_of(slots: crate::stage::SlotsView<'_>) -> Option<Vec<(Bytes, i64)>> {
    let slots = slots.of::<Pending>()?;
    let mut pending: Vec<(Bytes, i64)> = slots
        .current_slots()
        .filter_map(|(slot, times)| match slot {
            SlotKey::Key(key) => Some(times.iter().map(move |time| (key.clone(), *time))),
            _ => None,
        })
        .flatten()
        .collect();
    pending.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
    Some(pending)
}

/// When a timer service's task next has a timer due: its earliest pending
/// time, without listing them all (`None` when nothing is pending or the
/// task is not a timer service's). A driver asks this often.
pub fn next_due(slots: crate::stage::SlotsView<'_>) -> Option<i64> {
    earliest_pending(slots.of::<Pending>()?)
}

fn earliest_pending(slots: &Slots<Pending>) -> Option<i64> {
    slots.by_time().next().map(|(earliest, _)| earliest)
}

/// A key's earliest pending time: what the slots are indexed by (none for
/// an empty list, which is never kept).
fn earliest_of(pending: &Pending) -> Option<i64> {
    pending.first().copied()
}

/// A planted bug's restart (`TimerLostWhenOverdueAtStart`): drops the
/// restored timers due at or before `now` from a timer service's slots.
pub(crate) fn forget_overdue(slots: &mut dyn SlotStore, now: i64) {
    let Some(slots) = slots.as_any_mut().downcast_mut::<Slots<Pending>>() else {
        return;
    };
    let overdue: Vec<(SlotKey, Vec<i64>)> = slots
        .current_slots()
        .filter(|(_, times)| times.first().is_some_and(|first| *first <= now))
        .map(|(slot, times)| {
            (
                slot.clone(),
                times.iter().copied().filter(|time| *time > now).collect(),
            )
        })
        .collect();
    for (slot, left) in overdue {
        let encoded = PendingCodec
            .encode(&Pending(left))
            .expect("pending times always encode");
        let bytes = (!encoded.is_empty()).then_some(&encoded[..]);
        slots
            .restore(slot, bytes)
            .expect("pending times encoded here decode");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stage::ReplayError;
    use crate::{Parsley, RecordData, RecordPart, Utf8, I64};

    fn topics() -> (Topic<String, i64>, Topic<String, i64>) {
        (
            Topic::with_codecs("requests", Utf8, I64),
            Topic::with_codecs("fires", Utf8, I64),
        )
    }

    fn request(offset: u64, key: Option<&str>, value: &[u8], timestamp: i64) -> ConsumedRecord {
        ConsumedRecord {
            offset,
            data: RecordData {
                key: key.map(|key| Bytes::copy_from_slice(key.as_bytes())),
                value: Some(Bytes::copy_from_slice(value)),
                headers: Vec::new(),
                timestamp,
            },
        }
    }

    fn stage() -> (Stage, Topic<String, i64>) {
        let (requests, fires) = topics();
        (
            Stage::named("timers")
                .timer_service(&requests, &fires)
                .build(),
            fires,
        )
    }

    /// K2: a request adds its time to its key's slot, sorted; a tick fires
    /// what is due at its time, earliest first, and keeps the rest.
    #[test]
    fn k2_a_tick_fires_what_is_due_and_keeps_the_rest() {
        let (stage, fires) = stage();
        let tp = Tp::new("requests", 0);
        let name = TopicName::new("requests");
        let first = stage
            .hooks()
            .replay_record(
                &name,
                None,
                &tp,
                &request(0, Some("k"), &300i64.to_be_bytes(), 0),
            )
            .unwrap();
        let crate::stage::SlotChange::Set(state) = first.slot else {
            panic!("a request sets its key's slot")
        };
        let second = stage
            .hooks()
            .replay_record(
                &name,
                Some(&state),
                &tp,
                &request(1, Some("k"), &100i64.to_be_bytes(), 0),
            )
            .unwrap();
        let crate::stage::SlotChange::Set(state) = second.slot else {
            panic!("a request sets its key's slot")
        };
        assert_eq!(
            PendingCodec.decode(&state).unwrap(),
            Pending(vec![100, 300])
        );
        let slot = SlotKey::Key(Bytes::from_static(b"k"));
        let early = stage
            .hooks()
            .replay_tick_over_slots(&[(slot.clone(), &state)], Tick::new(99))
            .unwrap();
        assert!(early.emissions.is_empty());
        assert!(early.other_slots.is_empty());
        let fired = stage
            .hooks()
            .replay_tick_over_slots(&[(slot.clone(), &state)], Tick::new(100))
            .unwrap();
        assert_eq!(fired.emissions, vec![fires.send("k".to_string(), 100)]);
        let crate::stage::SlotChange::Set(left) = &fired.other_slots[0].1 else {
            panic!("one timer is left")
        };
        assert_eq!(PendingCodec.decode(left).unwrap(), Pending(vec![300]));
        let all = stage
            .hooks()
            .replay_tick_over_slots(&[(slot, &state)], Tick::new(1_000))
            .unwrap();
        assert_eq!(
            all.emissions,
            vec![
                fires.send("k".to_string(), 100),
                fires.send("k".to_string(), 300)
            ]
        );
        assert_eq!(all.other_slots[0].1, crate::stage::SlotChange::Deleted);
    }

    /// The slot `requests` (each a key and a time, at timestamp 0) leave,
    /// one key's after another.
    fn pending_after(stage: &Stage, requests: &[(&str, i64)]) -> Vec<(SlotKey, Bytes)> {
        let tp = Tp::new("requests", 0);
        let name = TopicName::new("requests");
        let mut slots: Vec<(SlotKey, Bytes)> = Vec::new();
        for (offset, (key, at)) in requests.iter().enumerate() {
            let slot = SlotKey::Key(Bytes::copy_from_slice(key.as_bytes()));
            let held = slots.iter().position(|(held, _)| *held == slot);
            let state = held.map(|index| slots[index].1.clone());
            let replayed = stage
                .hooks()
                .replay_record(
                    &name,
                    state.as_deref(),
                    &tp,
                    &request(offset as u64, Some(key), &at.to_be_bytes(), 0),
                )
                .unwrap();
            let crate::stage::SlotChange::Set(bytes) = replayed.slot else {
                panic!("a request sets its key's slot")
            };
            match held {
                Some(index) => slots[index].1 = bytes,
                None => slots.push((slot, bytes)),
            }
        }
        slots
    }

    /// K2: several requests for one key and for one time each fire once
    /// (none replaces another); a tick's fires go out earliest first across
    /// keys, ties by key, whatever order the requests came in.
    #[test]
    fn k2_a_ticks_fires_are_earliest_first_across_keys_and_none_is_merged() {
        let (stage, fires) = stage();
        let slots = pending_after(
            &stage,
            &[
                ("b", 300),
                ("a", 100),
                ("b", 200),
                ("a", 400),
                ("c", 200),
                ("a", 100),
                ("c", 900),
            ],
        );
        let view: Vec<(SlotKey, &[u8])> = slots
            .iter()
            .map(|(slot, bytes)| (slot.clone(), bytes.as_ref()))
            .collect();
        let fired = stage
            .hooks()
            .replay_tick_over_slots(&view, Tick::new(400))
            .unwrap();
        let fire = |key: &str, at: i64| fires.send(key.to_string(), at);
        assert_eq!(
            fired.emissions,
            [
                fire("a", 100),
                fire("a", 100),
                fire("b", 200),
                fire("c", 200),
                fire("b", 300),
                fire("a", 400)
            ]
        );
        let left: Vec<_> = fired
            .other_slots
            .iter()
            .map(|(slot, change)| (slot.clone(), change.clone()))
            .collect();
        let c = SlotKey::Key(Bytes::from_static(b"c"));
        assert!(left.contains(&(
            c,
            crate::stage::SlotChange::Set(Bytes::copy_from_slice(&900i64.to_be_bytes()))
        )));
        assert_eq!(
            left.iter()
                .filter(|(_, change)| *change == crate::stage::SlotChange::Deleted)
                .count(),
            2,
            "a and b have nothing left"
        );
    }

    /// K2, §8: a request without a key, or with a time the codec rejects, is
    /// refused, naming the record; a time before the request's own
    /// timestamp is not (it is due at once).
    #[test]
    fn k2_bad_requests_are_refused_naming_the_record_and_past_times_accepted() {
        let (stage, _) = stage();
        let tp = Tp::new("requests", 2);
        let name = TopicName::new("requests");
        let no_key = stage
            .hooks()
            .replay_record(&name, None, &tp, &request(4, None, &1i64.to_be_bytes(), 0))
            .unwrap_err();
        assert!(
            matches!(&no_key, ReplayError::Logic(message) if message.contains("requests-2@4 has no key")),
            "{no_key:?}"
        );
        let bad_time = stage
            .hooks()
            .replay_record(&name, None, &tp, &request(5, Some("k"), b"soon", 0))
            .unwrap_err();
        assert!(
            matches!(
                bad_time,
                ReplayError::Record {
                    part: RecordPart::Value,
                    ..
                }
            ),
            "{bad_time:?}"
        );
        let past = stage
            .hooks()
            .replay_record(
                &name,
                None,
                &tp,
                &request(6, Some("k"), &5i64.to_be_bytes(), 10),
            )
            .expect("a timer in the past is accepted");
        assert_eq!(
            past.slot,
            crate::stage::SlotChange::Set(bytes::Bytes::copy_from_slice(&5i64.to_be_bytes()))
        );
    }

    /// A pending slot that does not decode is refused, not misread.
    #[test]
    fn pending_times_decode_only_whole_and_in_order() {
        assert!(PendingCodec.decode(&[0; 7]).is_err());
        let mut bytes = 2i64.to_be_bytes().to_vec();
        bytes.extend(1i64.to_be_bytes());
        assert!(PendingCodec.decode(&bytes).is_err());
        assert_eq!(PendingCodec.decode(&[]).unwrap(), Pending::default());
    }

    /// C1: the service is a stage; a zero resolution is refused like a
    /// zero tick interval.
    #[test]
    fn a_zero_resolution_is_refused_at_build() {
        let (requests, fires) = topics();
        let timers = Stage::named("timers")
            .timer_service(&requests, &fires)
            .resolution(Duration::ZERO)
            .build();
        assert!(Parsley::named("app").stage(timers).build().is_err());
    }
}
