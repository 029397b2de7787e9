//! I4: tick durability and cadence. Asked by the walk over the trace about
//! each tick check.

use std::sync::Arc;

use parsley::TaskId;
use parsley::Tp;

use crate::sim::world::trace::TaskAt;
use rustc_hash::FxHashMap;

use super::reconstruction::{Instance, Snapshot};
use super::{Checker, Invariant};

impl<'a> Checker<'a> {
    /// I4 (T1): a tick is emitted exactly when an interval has passed since
    /// the last one (the open transaction's, else the committed one, else
    /// the task's start); then the tick record (T4) and its stamp (I5).
    pub(super) fn on_tick_checked(
        &mut self,
        step: u64,
        at: &TaskAt,
        now: i64,
        emitted: Option<&(Tp, u64)>,
        instances: &mut FxHashMap<TaskAt, Instance>,
        snapshots: &FxHashMap<Arc<TaskId>, Snapshot>,
    ) {
        let Some(interval) = self.tick_interval(&at.task) else {
            return;
        };
        let Some(instance) = instances.get_mut(at) else {
            return;
        };
        // I4: the last tick is the open transaction's, else the committed one,
        // else the task's start.
        let committed_tick = snapshots
            .get(&at.task)
            .and_then(|snapshot| snapshot.last_tick_at);
        let since = instance
            .open_tick
            .or(committed_tick)
            .unwrap_or(instance.started_at);
        let due = now - since >= interval;
        match (due, emitted) {
            (true, None) => {
                self.violation(
                    Invariant::I4,
                    step,
                    format!("{at} emitted no tick at {now}, though the last tick (or start) was at {since} and the interval is {interval} ms: an interval was lost"),
                )
                .on(at);
            }
            (false, Some((tp, offset))) => {
                self.violation(
                    Invariant::I4,
                    step,
                    format!("{at} emitted tick {tp}@{offset} at {now}, only {} ms after the last at {since} (interval {interval} ms)", now - since),
                )
                .on(at)
                .about(tp, *offset);
            }
            _ => {}
        }
        let Some((tp, offset)) = emitted else { return };
        instance.open_tick = Some(now);
        self.check_tick_record(step, at, now, tp, *offset);
        self.check_tick_stamp(step, at, (tp, *offset), instance);
    }

    /// I4 (T4): a tick lands on the task's own partition of its stage's tick
    /// topic, without a key, and carries the world's clock at the poll as
    /// its time, in its value (8 bytes, big-endian) and as its record
    /// timestamp. The partition comes from the application and the task, the
    /// time from the world's clock: neither is taken from the core.
    fn check_tick_record(&mut self, step: u64, at: &TaskAt, now: i64, tp: &Tp, offset: u64) {
        let own = self
            .input
            .app
            .stage(&at.task.stage)
            .and_then(|plan| plan.tick_topic.clone())
            .map(|topic| Tp::new(topic, at.task.partition));
        if own.as_ref() != Some(tp) {
            let own = own.map_or_else(|| "none".to_string(), |own| own.to_string());
            self.violation(
                Invariant::I4,
                step,
                format!("{at} emitted a tick to {tp}@{offset}, but its own tick partition is {own} (T4)"),
            )
            .on(at)
            .about(tp, offset);
        }
        let id = self.tps.id(tp);
        let Some(data) = self.tps.data(id, offset) else {
            self.violation(
                Invariant::I4,
                step,
                format!("{at} emitted a tick to {tp}@{offset}, where the log holds no record"),
            )
            .on(at)
            .about(tp, offset);
            return;
        };
        let value_ok = data.value.as_deref() == Some(&now.to_be_bytes()[..]);
        if data.key.is_some() || data.timestamp != now || !value_ok {
            let value = data.value.as_deref().map(<[u8]>::len).unwrap_or(0);
            self.violation(
                Invariant::I4,
                step,
                format!(
                    "{at} emitted tick {tp}@{offset} at wall-clock {now}, but the record has {} key, timestamp {} and a {value}-byte value{} (T4: null key, the emission time as timestamp and as 8-byte value)",
                    if data.key.is_some() { "a" } else { "no" },
                    data.timestamp,
                    if value_ok { " holding that time" } else { " not holding that time" },
                ),
            )
            .on(at)
            .about(tp, offset);
        }
    }
}
