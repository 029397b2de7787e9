//! I16: timestamp order (G9). A stage declared with
//! `synchronise_by_timestamp` delivers, of its sources' deliverable heads,
//! the one with the lowest timestamp (ties broken by tp), and waits for a
//! source with nothing fetched: while it is behind its log, and up to
//! `max_idle` once it is caught up. Checked at every delivery, committed or
//! not, against the instance's gate as the checker rebuilds it: no other
//! source lane may have had a deliverable head that came first. A held head
//! (a claim on one of the task's tps not yet delivered, G2) is not offered
//! and does not count.
//!
//! The waits are rebuilt here ([`Waits`]) from what the trace says the task
//! was told and asked, not from the core's lanes: each fetch's log end and
//! visible end, and each moment the task was asked what to deliver (a
//! delivery, or a `Withheld` event). A source lane is behind when it has
//! nothing buffered and its fetch position is short of the visible end
//! last given (while the position has not passed it), else of the log end
//! its last fetch carried, or it was never fetched; it is caught up when it
//! has nothing buffered and is not behind. Its wait begins the first time
//! the task is asked what to deliver while it is so (as Kafka Streams'
//! `PartitionGroup` starts its idle deadline at the first readiness check),
//! ends `max_idle` later, and is not begun again until the lane has had
//! records or fallen behind. Aborts keep the waits (they are wall-clock,
//! not transactional); a new instance starts with none.

use parsley::Tp;

use crate::sim::world::trace::TaskAt;

use super::reconstruction::Lanes;
use super::{Checker, Gate, Invariant, Relation};

/// G9's waits of one synchronised task instance, as the checker rebuilds
/// them from the trace (see the module doc).
#[derive(Clone)]
pub(super) struct Waits {
    max_idle: i64,
    /// Per lane: whether it is a source (not the stage's tick topic).
    source: Vec<bool>,
    /// Per lane: the log end the instance's last fetch of it carried;
    /// `None` before its first fetch.
    log_end: Vec<Option<u64>>,
    /// Per lane: the visible end (last stable offset) given with that
    /// fetch.
    visible_end: Vec<Option<u64>>,
    /// Per lane: when its wait as a caught-up, empty source began; kept
    /// after the wait ended, until the lane has records or falls behind.
    since: Vec<Option<i64>>,
}

/// Why a source lane held a synchronised delivery back.
enum Waited {
    /// Nothing buffered, and its log has more: `end` is the visible end
    /// (or the log end, or `None` before any fetch) past `position`.
    Behind { position: u64, end: Option<u64> },
    /// Caught up and empty since `since`: waited for until `since` plus
    /// `max_idle`.
    CaughtUp { since: i64 },
}

impl Waits {
    /// The waits of an instance of `plan`'s stage over `lanes`, if the
    /// stage delivers in timestamp order.
    pub(super) fn of(plan: &parsley::StagePlan, lanes: &Lanes) -> Option<Waits> {
        let max_idle = plan.stage.timestamp_sync()?;
        let source = lanes
            .tps
            .iter()
            .map(|tp| plan.tick_topic.as_ref() != Some(&tp.topic))
            .collect();
        let count = lanes.tps.len();
        Some(Waits {
            max_idle: i64::try_from(max_idle.as_millis()).unwrap_or(i64::MAX),
            source,
            log_end: vec![None; count],
            visible_end: vec![None; count],
            since: vec![None; count],
        })
    }

    /// A fetch of `lane` told the task its log end and visible end.
    pub(super) fn fetched(&mut self, lane: usize, log_end: u64, visible_end: Option<u64>) {
        self.log_end[lane] = Some(log_end);
        self.visible_end[lane] = visible_end;
    }

    /// Whether source `lane` is behind its log: nothing buffered, and its
    /// fetch position short of the visible end last given (while the
    /// position has not passed it), else of the log end its last fetch
    /// carried, or never fetched. Returns the end it is short of.
    fn behind(&self, lanes: &Lanes, lane: usize) -> Option<(u64, Option<u64>)> {
        if !self.source[lane] || !lanes.buffers[lane].is_empty() {
            return None;
        }
        let position = lanes.fetch_next[lane];
        let end = match self.visible_end[lane].filter(|end| *end >= position) {
            Some(visible) => Some(visible),
            None => self.log_end[lane],
        };
        match end {
            Some(end) if position >= end => None,
            end => Some((position, end)),
        }
    }

    /// The task was asked what to deliver at `now`: a wait begins for each
    /// source lane caught up and empty that has none yet; a lane with
    /// records, or behind, has none. A task holding nothing is not asked.
    pub(super) fn asked(&mut self, lanes: &Lanes, now: i64) {
        if lanes.buffers.iter().all(|buffer| buffer.is_empty()) {
            return;
        }
        for lane in 0..self.source.len() {
            let caught_up = self.source[lane]
                && lanes.buffers[lane].is_empty()
                && self.behind(lanes, lane).is_none();
            match caught_up {
                true => {
                    self.since[lane].get_or_insert(now);
                }
                false => self.since[lane] = None,
            }
        }
    }

    /// Why source `lane` held deliveries of other sources back at `now`,
    /// if it did.
    fn waited(&self, lanes: &Lanes, lane: usize, now: i64) -> Option<Waited> {
        if let Some((position, end)) = self.behind(lanes, lane) {
            return Some(Waited::Behind { position, end });
        }
        let since = self.since[lane]?;
        (now.saturating_sub(since) < self.max_idle).then_some(Waited::CaughtUp { since })
    }
}

impl Checker<'_> {
    /// I16: `tp@offset`, about to be delivered from `lane`, is the
    /// deliverable source head with the lowest timestamp, for a stage that
    /// delivers in timestamp order.
    pub(super) fn check_timestamp_order(
        &mut self,
        step: u64,
        at: &TaskAt,
        (tp, offset): (&Tp, u64),
        lanes: &Lanes,
        lane: usize,
    ) {
        let app = self.input.app;
        let Some(plan) = app.stage(&at.task.stage) else {
            return;
        };
        if plan.stage.timestamp_sync().is_none() {
            return;
        }
        let is_source = |tp: &Tp| plan.tick_topic.as_ref() != Some(&tp.topic);
        if !is_source(tp) {
            return;
        }
        let Some(delivered) = self.tps.data(lanes.ids[lane], offset) else {
            return;
        };
        let delivered_at = delivered.timestamp;
        let dead_letters = plan.dead_letter.is_some();
        for other in 0..lanes.tps.len() {
            let other_tp = &lanes.tps[other];
            if other == lane || !is_source(other_tp) {
                continue;
            }
            let Some(&head) = lanes.buffers[other].front() else {
                continue;
            };
            let id = lanes.ids[other];
            let Some(data) = self.tps.data(id, head) else {
                continue;
            };
            if (data.timestamp, other_tp) >= (delivered_at, tp) {
                continue;
            }
            // Offered only if deliverable: no claim on one of the task's
            // tps still undelivered (a stamp that does not decode is
            // poison, deliverable only to a stage with a dead-letter topic).
            let held = match self.tps.stamp(id, head) {
                Some(stamp) => stamp
                    .claims()
                    .iter()
                    .any(|claim| matches!(lanes.gate(claim, None), Some(gate) if gate != Gate::Delivered)),
                None => !dead_letters,
            };
            if held {
                continue;
            }
            self.violation(
                Invariant::I16,
                step,
                format!(
                    "{at} delivered {tp}@{offset} (timestamp {delivered_at}), but {other_tp}@{head} \
                     (timestamp {}) was a deliverable head of another source: a stage that \
                     delivers in timestamp order offers the lowest first, ties to the lower tp",
                    data.timestamp
                ),
            )
            .on(at)
            .about(tp, offset)
            .naming(Relation::Due, other_tp, head, Some(Gate::Fetched));
            return;
        }
    }

    /// I16, G9's waits: `tp@offset`, a source record of a synchronised
    /// stage about to be delivered from `lane` at `now`, was not held back
    /// by a wait for another source: none was behind its log, and none was
    /// caught up and empty with less than `max_idle` since its wait began.
    pub(super) fn check_waits(
        &mut self,
        (step, now): (u64, i64),
        at: &TaskAt,
        (tp, offset): (&Tp, u64),
        (lanes, waits): (&Lanes, &Waits),
        lane: usize,
    ) {
        if !waits.source[lane] {
            return;
        }
        for other in 0..lanes.tps.len() {
            if other == lane {
                continue;
            }
            let Some(waited) = waits.waited(lanes, other, now) else {
                continue;
            };
            let other_tp = &lanes.tps[other];
            let why = match waited {
                Waited::Behind { position, end: Some(end) } => format!(
                    "{other_tp} had nothing fetched at position {position} while its log reached {end}: \
                     a source behind its log is waited for until fetched"
                ),
                Waited::Behind { end: None, .. } => format!(
                    "{other_tp} had never been fetched: a source whose log is unknown is waited for"
                ),
                Waited::CaughtUp { since } => format!(
                    "{other_tp}, caught up and empty, had been waited for since {since}: its wait of \
                     max_idle {} ms ends at {}, {} ms later",
                    waits.max_idle,
                    since.saturating_add(waits.max_idle),
                    since.saturating_add(waits.max_idle) - now
                ),
            };
            self.violation(
                Invariant::I16,
                step,
                format!("{at} delivered {tp}@{offset} at {now}, but {why}"),
            )
            .on(at)
            .about(tp, offset);
            return;
        }
    }
}
