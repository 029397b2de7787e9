//! The one pool of threads that runs many seeds: the `cargo test` runner's
//! (`Simulation::check`) and the command line's (`run`). Workers take the
//! next seed from a shared counter and hand each result back to the
//! calling thread, which folds them in the order they finish.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;

/// The worker count: `PARSLEY_SIM_JOBS` when set to a positive number,
/// else the machine's parallelism.
pub(crate) fn default_jobs() -> usize {
    std::env::var("PARSLEY_SIM_JOBS")
        .ok()
        .and_then(|jobs| jobs.parse::<usize>().ok())
        .filter(|jobs| *jobs >= 1)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Runs `run(index, seed)` for the seeds on `jobs` threads and hands each
/// result to `take(index, result)` on the calling thread. A seed whose
/// index is past `skip_past` when a worker reaches it is not run (the
/// runner lowers it to its lowest failing seed: the seeds after it need
/// not run).
pub(crate) fn for_each_seed<T: Send>(
    seeds: &[u64],
    jobs: usize,
    skip_past: &AtomicU64,
    run: impl Fn(usize, u64) -> T + Sync,
    mut take: impl FnMut(usize, T),
) {
    let next = AtomicU64::new(0);
    std::thread::scope(|scope| {
        let (sender, receiver) = mpsc::channel();
        for _ in 0..jobs.min(seeds.len()).max(1) {
            let (sender, next, run) = (sender.clone(), &next, &run);
            scope.spawn(move || loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                if index > skip_past.load(Ordering::Relaxed) {
                    break;
                }
                let Some(&seed) = seeds.get(index as usize) else {
                    break;
                };
                let result = run(index as usize, seed);
                if sender.send((index as usize, result)).is_err() {
                    break;
                }
            });
        }
        drop(sender);
        for (index, result) in receiver {
            take(index, result);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every seed is run once and handed back with its index; a lowered
    /// `skip_past` stops the seeds after it.
    #[test]
    fn every_seed_runs_once_and_none_past_the_skip() {
        let seeds: Vec<u64> = (100..164).collect();
        let mut seen = vec![0u32; seeds.len()];
        let all = AtomicU64::new(u64::MAX);
        for_each_seed(
            &seeds,
            4,
            &all,
            |_, seed| seed * 2,
            |index, doubled| {
                assert_eq!(doubled, seeds[index] * 2);
                seen[index] += 1;
            },
        );
        assert!(seen.iter().all(|count| *count == 1), "{seen:?}");

        let skip = AtomicU64::new(9);
        let mut ran = Vec::new();
        for_each_seed(
            &seeds,
            1,
            &skip,
            |index, _| index,
            |_, index| ran.push(index),
        );
        assert_eq!(ran, (0..=9).collect::<Vec<_>>());
    }
}
