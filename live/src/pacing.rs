//! `produce --rate`: which records go in which batch, and when each batch
//! falls due. The runner calls the application's producer once per batch,
//! so every registered producer is paced without knowing it.
//!
//! A batch holds a tenth of a second's records (at least one). Batch `i`
//! falls due when the records before it would have gone at the rate: a
//! batch that takes longer than its share of time (a slow or absent
//! cluster) delays the next ones, which then go at once until the schedule
//! is met again. So the count is what was asked and the rate is a ceiling,
//! as with Kafka's `kafka-producer-perf-test --throughput`.

use std::time::Duration;

/// How a `produce` is cut into batches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pacing {
    /// Every record of the command.
    pub total: usize,
    /// Records per second; `None`: one batch, at once.
    pub rate: Option<u64>,
}

/// One call of the producer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Batch {
    /// Its place, from 0.
    pub index: usize,
    /// How many records went before it.
    pub first: usize,
    /// How many records it holds.
    pub count: usize,
    /// When it falls due, after the command started producing.
    pub due: Duration,
}

impl Pacing {
    /// The records of one batch: a tenth of a second's at the rate,
    /// rounded up; all of them without a rate.
    pub fn batch_size(&self) -> usize {
        match self.rate {
            None => self.total.max(1),
            Some(rate) => usize::try_from(rate.div_ceil(10)).unwrap_or(usize::MAX),
        }
    }

    /// The batches, in order. Without a rate there is one, even of zero
    /// records (the producer is called as before pacing existed).
    pub fn batches(&self) -> impl Iterator<Item = Batch> + '_ {
        let size = self.batch_size();
        let rate = self.rate;
        let unpaced = rate.is_none();
        let total = self.total;
        (0..)
            .map(move |index: usize| index * size)
            .enumerate()
            .take_while(move |(index, first)| *first < total || (unpaced && *index == 0))
            .map(move |(index, first)| Batch {
                index,
                first,
                count: size.min(total - first),
                due: rate.map_or(Duration::ZERO, |rate| {
                    Duration::from_secs_f64(first as f64 / rate as f64)
                }),
            })
    }
}

/// The seed batch `index` is planned from: `seed` itself for the first, so
/// an unpaced `produce` plans what it always did, and a mix of the two
/// (splitmix64) for the others, so no two batches repeat one plan.
pub(crate) fn batch_seed(seed: u64, index: usize) -> u64 {
    if index == 0 {
        return seed;
    }
    let mut z = seed ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--rate 200 --duration 3s`: 600 records in 30 batches of 20, one
    /// every 100 ms from 0 to 2.9 s.
    #[test]
    fn a_rate_cuts_tenths_of_a_second() {
        let pacing = Pacing {
            total: 600,
            rate: Some(200),
        };
        let batches: Vec<Batch> = pacing.batches().collect();
        assert_eq!(batches.len(), 30);
        assert!(batches.iter().all(|batch| batch.count == 20));
        assert_eq!(batches[0].due, Duration::ZERO);
        assert_eq!(batches[1].due, Duration::from_millis(100));
        assert_eq!(batches[29].due, Duration::from_millis(2900));
        assert_eq!(batches[29].first, 580);
    }

    /// A low rate goes one record at a time, a rate that does not divide
    /// ends on a short batch, and no rate is one batch.
    #[test]
    fn low_rates_odd_counts_and_no_rate() {
        let slow: Vec<Batch> = Pacing {
            total: 3,
            rate: Some(4),
        }
        .batches()
        .collect();
        assert_eq!(slow.len(), 3);
        assert_eq!(slow[2].due, Duration::from_millis(500));
        let odd: Vec<usize> = Pacing {
            total: 25,
            rate: Some(100),
        }
        .batches()
        .map(|batch| batch.count)
        .collect();
        assert_eq!(odd, [10, 10, 5]);
        let whole: Vec<Batch> = Pacing {
            total: 1000,
            rate: None,
        }
        .batches()
        .collect();
        assert_eq!(
            whole,
            [Batch {
                index: 0,
                first: 0,
                count: 1000,
                due: Duration::ZERO
            }]
        );
        assert_eq!(
            Pacing {
                total: 0,
                rate: None
            }
            .batches()
            .count(),
            1
        );
        assert_eq!(
            Pacing {
                total: 0,
                rate: Some(5)
            }
            .batches()
            .count(),
            0
        );
    }

    #[test]
    fn batch_seeds_keep_the_first_and_differ() {
        assert_eq!(batch_seed(7, 0), 7);
        let seeds: std::collections::BTreeSet<u64> = (0..1000).map(|i| batch_seed(7, i)).collect();
        assert_eq!(seeds.len(), 1000);
    }
}
