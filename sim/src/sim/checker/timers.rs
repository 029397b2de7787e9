//! I11: timers (K2), from the committed logs alone.

use std::collections::BTreeMap;

use bytes::Bytes;
use parsley::StagePlan;
use parsley::TaskId;
use parsley::TimerDecl;
use parsley::{App, RecordData, Stamp, Tp};
use parsley::{SlotChange, SlotKey};

use crate::sim::world::trace::{Event, TaskAt};

use super::{Checker, Invariant};

/// A fire's key and value bytes: what the requests asking for it and the
/// fires on the log are matched by.
type Fire = (Option<Bytes>, Option<Bytes>);

/// A request the service accepted, and what it asks for.
struct Asked {
    task: TaskId,
    tp: Tp,
    offset: u64,
    time: i64,
    /// The time of the first committed tick (in log order) that claims it
    /// and is at or past its time: the tick whose delivery must fire it.
    /// `None` while it is pending.
    due_at: Option<i64>,
}

/// By the fire: the requests asking for it, in (partition, offset) order.
type Requests = BTreeMap<Fire, Vec<Asked>>;

impl<'a> Checker<'a> {
    /// I11 (K2), from the committed logs alone, for every timer service: each
    /// request of its committed history (below its group's committed offset)
    /// that it accepts has exactly one committed fire once it is due (a
    /// committed tick of that history claims it and is at or past its time;
    /// pending timers are fine), at a record timestamp not before its time
    /// and not after the first such tick's (the fire comes with that tick),
    /// with a stamp that claims the request and its causes; no fire lacks
    /// such a request; the fires one tick's delivery writes to a partition
    /// are in (time, key) order. The service's pure logic only reads a request's time
    /// and encodes the fire it asks for (`Stage::replay_record`,
    /// `Stage::replay_tick_over_slots`), since its topics' codecs are the
    /// user's.
    pub(super) fn check_timers(&mut self) {
        let app: &'a App = self.input.app;
        let last_step = self.input.trace.last().map_or(0, |entry| entry.step);
        for plan in app.stages() {
            let Some(timer) = plan.stage.hooks().operator::<parsley::TimerDecl>() else {
                continue;
            };
            let asked = self.committed_requests(plan, timer);
            let matched = self.check_fires(plan, timer, &asked, last_step);
            self.check_due_requests_fired(timer, &asked, &matched, last_step);
        }
    }

    fn partitions(&self, topic: &parsley::TopicName) -> u32 {
        self.input
            .assembly
            .partitions_of(topic.as_str())
            .unwrap_or(0)
    }

    /// The requests of each task's committed history that the service
    /// accepts, by the fire each asks for.
    fn committed_requests(&mut self, plan: &StagePlan, timer: &TimerDecl) -> Requests {
        let mut asked = Requests::new();
        for partition in 0..self.partitions(&timer.requests) {
            let task = TaskId {
                stage: plan.name().into(),
                partition,
            };
            let tp = Tp::new(timer.requests.clone(), partition);
            let id = self.tps.id(&tp);
            let end = self
                .input
                .cluster
                .committed(&plan.group, &tp)
                .map_or(0, |position| position.offset);
            let ticks = self.committed_ticks(plan, &tp);
            for offset in self.tps.committed_offsets(id, 0, end) {
                let Some((fire, time)) = self.fire_asked(plan, timer, &tp, id, offset) else {
                    continue;
                };
                let due_at = ticks
                    .iter()
                    .find(|(claimed, at)| *claimed >= offset && *at >= time)
                    .map(|(_, at)| *at);
                asked.entry(fire).or_default().push(Asked {
                    task: task.clone(),
                    tp: tp.clone(),
                    offset,
                    time,
                    due_at,
                });
            }
        }
        asked
    }

    /// The committed ticks of the history of the task that consumes the
    /// request partition `tp`: how far each claims `tp`, and its time.
    fn committed_ticks(&mut self, plan: &StagePlan, tp: &Tp) -> Vec<(u64, i64)> {
        let mut ticks: Vec<(u64, i64)> = Vec::new();
        if let Some(tick_topic) = &plan.tick_topic {
            let tick_tp = Tp::new(tick_topic.clone(), tp.partition);
            let tick_id = self.tps.id(&tick_tp);
            let tick_end = self
                .input
                .cluster
                .committed(&plan.group, &tick_tp)
                .map_or(0, |position| position.offset);
            for offset in self.tps.committed_offsets(tick_id, 0, tick_end) {
                let Some(data) = self.tps.data(tick_id, offset) else {
                    continue;
                };
                let time = data.timestamp;
                let claimed = self
                    .tps
                    .stamp(tick_id, offset)
                    .and_then(|stamp| stamp.offset(tp));
                if let Some(claimed) = claimed {
                    ticks.push((claimed, time));
                }
            }
        }
        ticks
    }

    /// The fire the request `tp@offset` asks for, and its time, as the
    /// service's logic has it; `None` for a refused request (no key, a value
    /// that does not decode), which asks for nothing. A time in the past is
    /// accepted: it is due at once.
    fn fire_asked(
        &self,
        plan: &StagePlan,
        timer: &TimerDecl,
        tp: &Tp,
        id: usize,
        offset: u64,
    ) -> Option<(Fire, i64)> {
        let record = self.record(id, offset)?;
        let replayed = plan
            .stage
            .hooks()
            .replay_record(&timer.requests, None, tp, &record)
            .ok()?;
        let (Some(key), SlotChange::Set(pending)) = (&record.data.key, &replayed.slot) else {
            return None;
        };
        let time = <[u8; 8]>::try_from(&pending[..])
            .map(i64::from_be_bytes)
            .ok()?;
        let slot = [(SlotKey::Key(key.clone()), &pending[..])];
        let fired = plan
            .stage
            .hooks()
            .replay_tick_over_slots(&slot, parsley::Tick::new(time))
            .ok()?;
        let Ok((fire_key, fire_value)) = fired.emissions.first()?.encoded() else {
            return None;
        };
        Some(((fire_key.cloned(), fire_value.cloned()), time))
    }

    /// Every committed fire, matched in order to a request asking for it:
    /// none duplicated or invented, none early, each claiming its request.
    /// Returns how many fires each fire's requests got.
    fn check_fires(
        &mut self,
        plan: &StagePlan,
        timer: &TimerDecl,
        asked: &Requests,
        last_step: u64,
    ) -> BTreeMap<Fire, usize> {
        let mut matched: BTreeMap<Fire, usize> = BTreeMap::new();
        for partition in 0..self.partitions(&timer.fires) {
            let tp = Tp::new(timer.fires.clone(), partition);
            let id = self.tps.id(&tp);
            let Some(log) = self.tps.log(id) else {
                continue;
            };
            // The last fire seen: the step that wrote it, its time and key.
            let mut last: Option<(u64, i64, Option<Bytes>, u64)> = None;
            for (offset, data) in log.read_committed() {
                let wanted = (data.key.clone(), data.value.clone());
                let count = matched.entry(wanted.clone()).or_default();
                let index = *count;
                *count += 1;
                let requests = asked.get(&wanted).map_or(&[][..], Vec::as_slice);
                self.check_fire(plan, (&tp, id, offset), data, requests, index, last_step);
                let (Some(request), Some(writer)) =
                    (requests.get(index), self.writer_of(&tp, offset))
                else {
                    continue;
                };
                let this = (writer.step, request.time, data.key.clone(), offset);
                if let Some(earlier) = &last {
                    if earlier.0 == this.0 && (this.1, &this.2) < (earlier.1, &earlier.2) {
                        let message = format!(
                            "{tp}@{offset} fires time {} after {tp}@{} fired time {} in the same tick's delivery: a tick's fires go out earliest first, then by key",
                            this.1, earlier.3, earlier.1
                        );
                        let at = writer.event.task_at();
                        let violation = self
                            .violation(Invariant::I11, writer.step, message)
                            .about(&tp, offset);
                        if let Some(at) = at {
                            violation.on(at);
                        }
                    }
                }
                last = Some(this);
            }
        }
        matched
    }

    /// One committed fire, the `index`th of those asked for by `requests`.
    fn check_fire(
        &mut self,
        plan: &StagePlan,
        (tp, id, offset): (&Tp, usize, u64),
        data: &RecordData,
        requests: &[Asked],
        index: usize,
        last_step: u64,
    ) {
        let key = data.key.as_ref().map_or("no key".to_string(), |key| {
            format!("key {}", parsley::bytes_for_humans(key))
        });
        let writer = self.writer_of(tp, offset);
        let step = writer.map_or(last_step, |entry| entry.step);
        let at: Option<&'a TaskAt> = writer.and_then(|entry| entry.event.task_at());
        let Some(request) = requests.get(index) else {
            let message = match requests.first() {
                Some(first) => format!(
                    "{tp}@{offset} fires {key} at {} again: {} committed request(s) ask for it ({}@{} first), and the fires before it answered them all (a duplicate fire)",
                    first.time,
                    requests.len(),
                    first.tp,
                    first.offset
                ),
                None => format!(
                    "{tp}@{offset} ({key}) is a fire of timer service {} that no committed request of its committed history asks for (an invented fire)",
                    plan.name()
                ),
            };
            let violation = self
                .violation(Invariant::I11, step, message)
                .about(tp, offset);
            if let Some(at) = at {
                violation.on(at);
            }
            return;
        };
        let (request_tp, request_offset, time) = (&request.tp, request.offset, request.time);
        if data.timestamp < time {
            let message = format!(
                "{tp}@{offset} fires {request_tp}@{request_offset} ({key}, time {time}) with record timestamp {}: {} ms before its due time",
                data.timestamp,
                time - data.timestamp
            );
            let violation = self
                .violation(Invariant::I11, step, message)
                .about(tp, offset);
            if let Some(at) = at {
                violation.on(at);
            }
        }
        // The first tick that may fire it must: a later one is a late fire.
        if let Some(due_at) = request.due_at.filter(|due_at| data.timestamp > *due_at) {
            let message = format!(
                "{tp}@{offset} fires {request_tp}@{request_offset} ({key}, time {time}) at tick time {}, though the committed tick at {due_at} claims the request and is at or past its time: a fire comes with the first such tick, not a later one",
                data.timestamp
            );
            let violation = self
                .violation(Invariant::I11, step, message)
                .about(tp, offset);
            if let Some(at) = at {
                violation.on(at);
            }
        }
        let request_id = self.tps.id(request_tp);
        let mut inherited = self
            .tps
            .stamp(request_id, request_offset)
            .map_or_else(Stamp::empty, |stamp| (*stamp).clone());
        inherited.claim(request_tp, request_offset);
        let actual = self.tps.stamp(id, offset);
        let actual: &Stamp = actual.as_deref().unwrap_or(&self.tps.empty);
        if !actual.dominates(&inherited) {
            let actual = actual.clone();
            let message = format!(
                "{tp}@{offset}, the fire of {request_tp}@{request_offset}, has stamp {actual}, which does not claim the request and its causes {inherited} (G5)"
            );
            let violation = self
                .violation(Invariant::I11, step, message)
                .about(tp, offset)
                .stamped(&actual);
            if let Some(at) = at {
                violation.on(at);
            }
        }
    }

    /// Every due request fired: beyond the requests the fires answered, none
    /// is due.
    fn check_due_requests_fired(
        &mut self,
        timer: &TimerDecl,
        asked: &Requests,
        matched: &BTreeMap<Fire, usize>,
        last_step: u64,
    ) {
        for (wanted, requests) in asked {
            let fired = matched.get(wanted).copied().unwrap_or(0);
            let Some(request) = requests
                .iter()
                .skip(fired)
                .find(|request| request.due_at.is_some())
            else {
                continue;
            };
            let key = wanted.0.as_ref().map_or("no key".to_string(), |key| {
                format!("key {}", parsley::bytes_for_humans(key))
            });
            let message = format!(
                "task {}: timer request {}@{} ({key}, time {}) is in its committed history and due (a committed tick at or past its time claims it), but no committed fire on {} answers it ({fired} of {} requests for it fired)",
                request.task,
                request.tp,
                request.offset,
                request.time,
                timer.fires,
                requests.len()
            );
            let (task, tp, offset) = (request.task.clone(), request.tp.clone(), request.offset);
            // At the request's last delivery: the committed one.
            let delivered = self
                .input
                .trace
                .iter()
                .rev()
                .find_map(|entry| match &entry.event {
                    Event::Delivered {
                        at,
                        tp: delivered,
                        offset: delivered_offset,
                        ..
                    } if *delivered == tp && *delivered_offset == offset => Some((entry.step, at)),
                    _ => None,
                });
            let step = delivered.map_or(last_step, |(step, _)| step);
            let violation = self
                .violation(Invariant::I11, step, message)
                .of_task(&task)
                .about(&tp, offset);
            if let Some((_, at)) = delivered {
                violation.on(at);
            }
        }
    }
}
