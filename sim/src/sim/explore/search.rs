//! The depth-first search over a run's choice points: replay a prefix of
//! alternatives, take the first alternative everywhere after it, then
//! backtrack to the deepest point with an alternative left.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::sim::running::run::run_gated;
use crate::sim::running::simulation::Simulation;
use crate::sim::world::choice::{Choices, Guide, Point};
use crate::sim::world::World;

use super::states::{Seen, TaskDigests};
use super::{Bounds, Exploration};

/// Explores every schedule of `simulation` (already within `bounds`' knobs),
/// depth first, until the first violation or the end of the bound (or
/// [`Bounds::runs_max`]).
pub(crate) fn explore(simulation: &Simulation, bounds: &Bounds) -> Exploration {
    let started = Instant::now();
    simulation.plant();
    let steps = bounds.steps;
    let mut seen = Seen::default();
    let mut prefix: Vec<u32> = Vec::new();
    let (mut schedules, mut cut) = (0u64, 0u64);
    let exploration = |violation, exhausted, schedules, cut, seen: &Seen| Exploration {
        bounds: bounds.clone(),
        schedules,
        cut,
        states: seen.len(),
        exhausted,
        violation,
        elapsed: started.elapsed(),
        simulation: simulation.clone(),
    };
    loop {
        let guide = Arc::new(Mutex::new(Guide {
            prefix: std::mem::take(&mut prefix),
            points: Vec::new(),
            faults_left: bounds.faults,
            range_ends: bounds.range_ends,
            frozen: false,
            shuffle: bounds.shuffle,
            path: 0,
        }));
        let mut tasks = TaskDigests::default();
        let mut step = 0u64;
        let mut gate = |world: &World| {
            tasks.update(&world.trace);
            let steps_left = steps - step;
            step += 1;
            let (past, faults_left) = {
                let mut guide = guide.lock().unwrap_or_else(|e| e.into_inner());
                // The liveness phase completes the run; its draws (the
                // inputs it produces) take their simplest values.
                guide.frozen = steps_left == 0;
                (guide.past_prefix(), guide.faults_left)
            };
            // The states along the prefix were judged when first met.
            !past || seen.is_new(world, &tasks, faults_left, steps_left)
        };
        let outcome = run_gated(
            simulation,
            Choices::guided(Arc::clone(&guide)),
            &mut |_| {},
            &mut gate,
        );
        match outcome {
            None => cut += 1,
            Some(outcome) => {
                schedules += 1;
                if !outcome.violations.is_empty() {
                    return exploration(Some(outcome), false, schedules, cut, &seen);
                }
            }
        }
        let points = std::mem::take(&mut guide.lock().unwrap_or_else(|e| e.into_inner()).points);
        match next_prefix(&points) {
            None => return exploration(None, true, schedules, cut, &seen),
            Some(next) => prefix = next,
        }
        if schedules + cut >= bounds.runs_max {
            return exploration(None, false, schedules, cut, &seen);
        }
    }
}

/// The prefix of the next schedule in depth-first order: the alternatives
/// taken up to the deepest point with one left, and that one; `None` when
/// every point's alternatives are spent.
fn next_prefix(points: &[Point]) -> Option<Vec<u32>> {
    let deepest = points
        .iter()
        .rposition(|point| point.taken + 1 < point.arity)?;
    let mut prefix: Vec<u32> = points[..deepest].iter().map(|point| point.taken).collect();
    prefix.push(points[deepest].taken + 1);
    Some(prefix)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_prefix_backtracks_to_the_deepest_point_with_an_alternative_left() {
        let point = |arity, taken| Point { arity, taken };
        assert_eq!(
            next_prefix(&[point(2, 0), point(3, 1), point(2, 1)]),
            Some(vec![0, 2])
        );
        assert_eq!(next_prefix(&[point(2, 1), point(1, 0)]), None);
        assert_eq!(next_prefix(&[]), None);
    }
}
