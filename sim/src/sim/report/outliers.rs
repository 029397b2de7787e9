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
    /// How many times the average it is, by the larger of the two ratios.
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

/// The seeds of `sizes` (seed, steps, deliveries) far beyond the average,
/// the largest first, at most three.
pub(crate) fn outliers(sizes: &[(u64, u64, u64)]) -> Vec<Outlier> {
    if sizes.len() < MIN_SEEDS {
        return Vec::new();
    }
    let count = sizes.len() as f64;
    let mean_steps = sizes.iter().map(|size| size.1 as f64).sum::<f64>() / count;
    let mean_deliveries = sizes.iter().map(|size| size.2 as f64).sum::<f64>() / count;
    let ratio = |value: u64, mean: f64| match mean > 0.0 {
        true => value as f64 / mean,
        false => 0.0,
    };
    let mut found: Vec<Outlier> = sizes
        .iter()
        .map(|&(seed, steps, deliveries)| Outlier {
            seed,
            steps,
            deliveries,
            times_average: ratio(steps, mean_steps).max(ratio(deliveries, mean_deliveries)),
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
    fn a_seed_twenty_times_the_average_is_named() {
        let mut sizes = even(40);
        sizes[17] = (17, 1_000, 200 * 25);
        let found = outliers(&sizes);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].seed, 17);
        assert!(found[0].times_average > 15.0, "{found:?}");
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
        let mut sizes = even(100);
        for (index, factor) in [(3, 20), (5, 40), (7, 30), (9, 50)] {
            sizes[index] = (index as u64, 1_000 * factor, 200);
        }
        let seeds: Vec<u64> = outliers(&sizes).iter().map(|o| o.seed).collect();
        assert_eq!(seeds, [9, 5, 7]);
    }
}
