//! Boundary-seeking time ([`TimeStrategy::Boundary`]): the clock's advances
//! and input records' event times aim at the tasks' pending deadlines (a
//! tick, a timer's due time, a window's close, a key's expiry, a hanging
//! transaction's timeout, a late marker), at the edges the application
//! declares ([`Edges`]: window starts and ends and grace ends on their
//! epoch-aligned grid; a session's gap, a join's window and a TTL after a
//! key's latest record) and at the periods the user declares for their own
//! logic ([`ClockConfig::time_boundaries_ms`]), and at the millisecond
//! either side of each; for a few steps after a landing the moments'
//! actions (ticks, commits, restarts) and faults (aborts, failed commits,
//! crashes, moves) are drawn far more often.
//!
//! Deadlines are what the tasks know is pending now; edges are where the
//! declared logic changes its answer, whether or not anything is pending
//! there: a record at exactly a hopping window's start is a question about
//! W1 that no deadline asks. An edge on a grid is aimed at only within one
//! largest clock step ahead (an advance could have reached it anyway), so
//! a one-minute period does not drag a run of 100 ms steps a minute ahead.
//!
//! [`ClockConfig::time_boundaries_ms`]: super::settings::ClockConfig::time_boundaries_ms
//!
//! A uniform clock hits a given millisecond only by chance (about one
//! advance in `step_ms.max`), so logic off by one millisecond around a due
//! time shows in a few seeds in a hundred; landing there on purpose makes
//! it show in most. Every choice keeps the tape's rule that the zero word
//! is the simplest decision: a zero draws a uniform (smallest) advance, the
//! nearest deadline, and the deadline itself.

use bytes::Bytes;
use parsley::App;
use parsley::{Deadline, TimeDomain};
use parsley::{ExpiryDecl, StreamJoinDecl, WindowDecl, WindowShape};

use super::choice::Choices;
use super::settings::{ClockConfig, TimeStrategy};
use super::World;

/// The share of clock advances that land on a deadline or an edge.
const LANDING_SHARE: f64 = 0.5;
/// The share of records, of inputs with out-of-order event time, stamped
/// on an event-time deadline of their partition or an edge.
const EVENT_TIME_SHARE: f64 = 0.4;
/// How many of the latest input records (key and timestamp) the edges
/// after a key's latest record are measured from.
pub(super) const RECENT: usize = 16;
/// How many grid points behind the clock an event-time lag may reach back
/// to, per grid.
const GRID_BACK: usize = 4;

/// Where the application's declared logic changes its answer with a
/// record's timestamp, in milliseconds; built once per world from its
/// operators' declarations and the user's declared periods, independent
/// of anything pending.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Edges {
    /// Epoch-aligned grids `(period, offset)`: the times
    /// `offset + k·period` (W1: a time window's starts, ends and grace
    /// ends, on its advance's grid; a declared period's multiples).
    pub(crate) grids: Vec<(i64, i64)>,
    /// Spans after (or, negative, before) a key's latest record (W5: a
    /// session's gap and gap plus grace; J5, J6: a join's window before
    /// and after, and after plus grace; E2: a TTL).
    pub(crate) spans: Vec<i64>,
}

impl Edges {
    /// The edges of `app`'s windowed aggregations, stream–stream joins and
    /// expiring folds, and of the periods `clock` declares.
    pub(crate) fn of(app: &App, clock: &ClockConfig) -> Edges {
        let millis =
            |duration: std::time::Duration| i64::try_from(duration.as_millis()).unwrap_or(i64::MAX);
        let mut edges = Edges::default();
        for plan in app.stages() {
            let stage = &plan.stage;
            for window in stage.hooks().operators::<WindowDecl>() {
                let grace = millis(window.grace);
                match window.shape {
                    WindowShape::Time { size, advance } => {
                        let (size, advance) = (millis(size), millis(advance).max(1));
                        for offset in [0, size, size.saturating_add(grace)] {
                            edges.grids.push((advance, offset.rem_euclid(advance)));
                        }
                    }
                    WindowShape::Session { gap } => {
                        let gap = millis(gap);
                        edges.spans.push(gap);
                        edges.spans.push(gap.saturating_add(grace));
                    }
                }
            }
            for join in stage.hooks().operators::<StreamJoinDecl>() {
                let (before, after) = (millis(join.before), millis(join.after));
                edges.spans.push(-before);
                edges.spans.push(after);
                edges.spans.push(after.saturating_add(millis(join.grace)));
            }
            for expiry in stage.hooks().operators::<ExpiryDecl>() {
                edges.spans.push(millis(expiry.ttl));
            }
        }
        for period in clock.time_boundaries() {
            edges
                .grids
                .push((i64::try_from(period).unwrap_or(i64::MAX), 0));
        }
        edges.grids.sort_unstable();
        edges.grids.dedup();
        edges.spans.retain(|span| *span != 0);
        edges.spans.sort_unstable();
        edges.spans.dedup();
        edges
    }

    /// The latest point of grid `(period, offset)` at or before `at`.
    fn grid_at_or_before((period, offset): (i64, i64), at: i64) -> i64 {
        at - (at - offset).rem_euclid(period)
    }
}
/// How many of the nearest deadlines a landing picks among.
const NEAREST: usize = 4;
/// How many steps after a landing the moment's actions and faults are
/// drawn more often.
pub(super) const MOMENT_STEPS: u32 = 3;
/// How much more often faults fire at a moment.
pub(super) const MOMENT_FAULT_FACTOR: u32 = 4;
/// How much more often ticks, commits and restarts are drawn at a moment.
pub(super) const MOMENT_ACTION_FACTOR: u32 = 3;

/// Where around a deadline a landing or a timestamp goes: the deadline
/// itself first (the zero word), then the millisecond before, then after.
const OFFSETS: [i64; 3] = [0, -1, 1];

impl World {
    /// One clock advance: under [`TimeStrategy::Boundary`], about half land
    /// on or next to one of the nearest pending deadlines; the rest, and
    /// every advance when no deadline is ahead, move by a uniform draw from
    /// `step_ms`.
    pub(super) fn advance_clock_drawn(&mut self, choices: &mut Choices) {
        if self.settings.clock.time == TimeStrategy::Boundary && choices.chance(LANDING_SHARE) {
            if let Some(target) = self.landing(choices) {
                self.stats.boundary_landings += 1;
                self.moment_steps = MOMENT_STEPS;
                self.advance_clock(target - self.now);
                return;
            }
        }
        let step = choices.step_within(
            self.settings.clock.step_ms.min,
            self.settings.clock.step_ms.max,
        );
        self.advance_clock(step as i64);
    }

    /// A landing time after now: one of the [`NEAREST`] deadlines ahead
    /// (nearest first), at one of [`OFFSETS`]; `None`, drawing nothing
    /// more, when no deadline is ahead.
    fn landing(&mut self, choices: &mut Choices) -> Option<i64> {
        let now = self.now;
        let mut ahead = std::mem::take(&mut self.deadline_buffer);
        ahead.clear();
        ahead.extend(
            self.deadlines()
                .map(|(_, _, at)| at)
                .filter(|at| *at >= now),
        );
        // Edges within one largest step ahead: the next point of each grid,
        // and each span after a recent record.
        let reach = match choices.is_guided() {
            // An exhaustive search tries the deadlines and the ranges' ends;
            // the edges would multiply its schedules (DESIGN.md).
            true => now - 1,
            false => now.saturating_add(self.settings.clock.step_ms.max as i64),
        };
        for &grid in &self.edges.grids {
            let next = Edges::grid_at_or_before(grid, now).saturating_add(grid.0);
            if next <= reach {
                ahead.push(next);
            }
        }
        for &(_, stamped) in &self.recent {
            for &span in &self.edges.spans {
                let at = stamped.saturating_add(span);
                if (now..=reach).contains(&at) {
                    ahead.push(at);
                }
            }
        }
        ahead.sort_unstable();
        ahead.dedup();
        let landing = match ahead.len() {
            0 => None,
            len => {
                let at = ahead[choices.below(len.min(NEAREST) as u32) as usize];
                let offset = OFFSETS[choices.below(OFFSETS.len() as u32) as usize];
                Some(match at + offset {
                    target if target > now => target,
                    _ if at > now => at,
                    _ => at + 1,
                })
            }
        };
        self.deadline_buffer = ahead;
        landing
    }

    /// Every pending deadline of the world, with its time domain: each
    /// running task's (with its partition), a hanging transaction's timeout
    /// and a late marker's write (on no partition).
    fn deadlines(&self) -> impl Iterator<Item = (Option<u32>, TimeDomain, i64)> + '_ {
        let tasks = self.active_hosts().flat_map(|(_, _, host)| {
            let partition = host.task.id().partition;
            host.task
                .deadlines()
                .map(move |deadline: Deadline| (Some(partition), deadline.domain, deadline.at))
        });
        let world = self
            .cluster
            .next_transaction_expiry()
            .into_iter()
            .chain(self.unwritten_markers.iter().map(|(at, _)| *at))
            .map(|at| (None, TimeDomain::WallClock, at));
        tasks.chain(world)
    }

    /// How far behind the wall clock a record of an input with out-of-order
    /// event time (up to `max_lag` ms) is stamped, on `partition`: under
    /// [`TimeStrategy::Boundary`], sometimes onto (or next to) an
    /// event-time deadline of a task of that partition within reach;
    /// otherwise a uniform draw in `0..=max_lag`.
    pub(super) fn event_time_lag(
        &mut self,
        choices: &mut Choices,
        partition: u32,
        key: Option<&Bytes>,
        max_lag: u64,
    ) -> i64 {
        let max_lag = max_lag.min(self.now.max(0) as u64);
        if self.settings.clock.time == TimeStrategy::Boundary && choices.chance(EVENT_TIME_SHARE) {
            let now = self.now;
            let earliest = now - max_lag as i64;
            let mut within = std::mem::take(&mut self.deadline_buffer);
            within.clear();
            within.extend(
                self.deadlines()
                    .filter(|(on, domain, _)| {
                        *on == Some(partition) && *domain == TimeDomain::EventTime
                    })
                    .map(|(_, _, at)| at)
                    .filter(|at| (earliest - 1..=now + 1).contains(at)),
            );
            // The edges within reach: the grids' points, and the spans
            // after this key's latest record.
            let guided = choices.is_guided();
            for &grid in self.edges.grids.iter().filter(|_| !guided) {
                let mut at = Edges::grid_at_or_before(grid, now + 1);
                for _ in 0..GRID_BACK {
                    if at < earliest - 1 {
                        break;
                    }
                    within.push(at);
                    at -= grid.0;
                }
            }
            let latest = key.filter(|_| !guided).and_then(|key| {
                self.recent
                    .iter()
                    .rev()
                    .find(|(recent, _)| recent.as_ref() == Some(key))
                    .map(|(_, stamped)| *stamped)
            });
            if let Some(stamped) = latest {
                for &span in &self.edges.spans {
                    let at = stamped.saturating_add(span);
                    if (earliest - 1..=now + 1).contains(&at) {
                        within.push(at);
                    }
                }
            }
            within.sort_unstable();
            within.dedup();
            let lag = match within.len() {
                0 => None,
                len => {
                    let at = within[choices.below(len as u32) as usize];
                    let offset = OFFSETS[choices.below(OFFSETS.len() as u32) as usize];
                    Some(now - (at + offset).clamp(earliest, now))
                }
            };
            self.deadline_buffer = within;
            if let Some(lag) = lag {
                return lag;
            }
        }
        choices.range_inclusive(0, max_lag) as i64
    }
}
