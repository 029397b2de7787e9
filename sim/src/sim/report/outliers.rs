//! Seeds far beyond the average: a run many times longer than the others
//! is worth a look (a livelock the budget cut short, a retry storm, a
//! workload that only one seed draws), so summaries name it instead of
//! folding it into the average.

use std::fmt;

/// A seed is named when its steps or its deliveries reach this many times
/// the average of the seeds run.
pub const OUTLIER_FACTOR: f64 = 10.0;
/// Fewer seeds than this have no average worth comparing with.
const MIN_SEEDS: usize = 10;
/// At most this many are named, the largest first.
const NAMED_MAX: usize = 3;

/// A seed whose run took far more steps or deliveries than the average
/// ([`OUTLIER_FACTOR`] times or more).
#[derive(Clone, Debug, PartialEq)]
pub struct Outlier {
    /// The seed.
    pub seed: u64,
    /// Its run's steps.
    pub steps: u64,
    /// Its run's deliveries.
    pub deliveries: u64,
    /// How many times the other seeds' average it is, by the larger of the
    /// two ratios.
    pub times_average: f64,
}

impl fmt::Display for Outlier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "seed {} ({} steps, {} deliveries: {:.0}× the average)",
            self.seed, self.steps, self.deliveries, self.times_average
        )
    }
}

/// The seeds of `sizes` (seed, steps, deliveries) far beyond the average
/// of the other seeds, the largest first, at most three. Each seed is
/// compared with the others' average, not one that includes itself (with
/// itself, a seed of n could never reach n times the average).
pub(crate) fn outliers(sizes: &[(u64, u64, u64)]) -> Vec<Outlier> {
    if sizes.len() < MIN_SEEDS {
        return Vec::new();
    }
    let others = (sizes.len() - 1) as f64;
    let total_steps: f64 = sizes.iter().map(|size| size.1 as f64).sum();
    let total_deliveries: f64 = sizes.iter().map(|size| size.2 as f64).sum();
    let ratio = |value: u64, total: f64| {
        let mean = (total - value as f64) / others;
        match mean > 0.0 {
            true => value as f64 / mean,
            false => 0.0,
        }
    };
    let mut found: Vec<Outlier> = sizes
        .iter()
        .map(|&(seed, steps, deliveries)| Outlier {
            seed,
            steps,
            deliveries,
            times_average: ratio(steps, total_steps).max(ratio(deliveries, total_deliveries)),
        })
        .filter(|outlier| outlier.times_average >= OUTLIER_FACTOR)
        .collect();
    found.sort_by(|a, b| {
        b.times_average
            .total_cmp(&a.times_average)
            .then(a.seed.cmp(&b.seed))
    });
    found.truncate(NAMED_MAX);
    found
}

/// The summary's words for `outliers`, or `None` when there are none.
pub(crate) fn note(outliers: &[Outlier]) -> Option<String> {
    if outliers.is_empty() {
        return None;
    }
    let named: Vec<String> = outliers.iter().map(ToString::to_string).collect();
    Some(format!("far beyond the average: {}", named.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn even(seeds: u64) -> Vec<(u64, u64, u64)> {
        (0..seeds).map(|seed| (seed, 1_000, 200)).collect()
    }

    #[test]
    fn a_seed_twenty_five_times_the_others_is_named_and_nine_times_is_not() {
        let mut sizes = even(40);
        sizes[17] = (17, 1_000, 200 * 25);
        sizes[30] = (30, 9_000, 200);
        let found = outliers(&sizes);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].seed, 17);
        assert!(found[0].times_average > 24.0, "{found:?}");
        let note = note(&found).expect("named");
        assert!(
            note.contains("seed 17 (1000 steps, 5000 deliveries"),
            "{note}"
        );
    }

    #[test]
    fn even_seeds_and_few_seeds_name_nothing() {
        assert!(outliers(&even(100)).is_empty());
        let mut few = even(5);
        few[0] = (0, 1_000_000, 200);
        assert!(outliers(&few).is_empty(), "five seeds have no average");
        assert_eq!(note(&[]), None);
    }

    #[test]
    fn at_most_three_are_named_the_largest_first() {
        let mut sizes = even(1_000);
        for (index, factor) in [(3, 20), (5, 40), (7, 30), (9, 50), (11, 12)] {
            sizes[index] = (index as u64, 1_000 * factor, 200);
        }
        // All five are ten times the others' average or more.
        let seeds: Vec<u64> = outliers(&sizes).iter().map(|o| o.seed).collect();
        assert_eq!(seeds, [9, 5, 7]);
    }
}
