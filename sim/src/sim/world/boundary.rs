//! Boundary-seeking time ([`TimeStrategy::Boundary`]): the clock's advances
//! and input records' event times aim at the tasks' pending deadlines (a
//! tick, a timer's due time, a window's close, a key's expiry, a hanging
//! transaction's timeout, a late marker) and at the millisecond either side
//! of them, and for a few steps after a landing the moments' actions
//! (ticks, commits, restarts) and faults (aborts, failed commits, crashes,
//! moves) are drawn far more often.
//!
//! A uniform clock hits a given millisecond only by chance (about one
//! advance in `step_ms.max`), so logic off by one millisecond around a due
//! time shows in a few seeds in a hundred; landing there on purpose makes
//! it show in most. Every choice keeps the tape's rule that the zero word
//! is the simplest decision: a zero draws a uniform (smallest) advance, the
//! nearest deadline, and the deadline itself.

use parsley::{Deadline, TimeDomain};

use super::choice::Choices;
use super::settings::TimeStrategy;
use super::World;

/// The share of clock advances that land on a deadline.
const LANDING_SHARE: f64 = 0.5;
/// The share of records, of inputs with out-of-order event time, stamped
/// on an event-time deadline of their partition.
const EVENT_TIME_SHARE: f64 = 0.3;
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
