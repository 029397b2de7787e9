//! Which task acts and which lane delivers: drawn uniformly
//! ([`OrderStrategy::Random`]), or by PCT ([`OrderStrategy::Pct`]).
//!
//! PCT (probabilistic concurrency testing, Burckhardt et al., as shuttle
//! implements it) gives every task incarnation (a host) and every lane a
//! random priority; of the hosts with records to deliver, the one with the
//! highest priority delivers, from its ready lane with the highest
//! priority (fetches, commits, ticks and faults stay drawn uniformly). At `depth − 1`
//! change points, steps drawn uniformly from the safety phase, the host
//! that acted last drops below every other. A bug that needs `d ≤ depth`
//! orderings to line up shows with probability at least `1/(n·k^(d−1))`
//! per seed, for `n` hosts and `k` steps, where uniform draws give no such
//! bound. Priorities come from one drawn word hashed with the host's
//! instance, task and producer epoch (or the lane's tp), so a restarted
//! task is a new host with a priority of its own, and shrinking the word
//! keeps the priorities distinct.

use std::cell::Cell;

use parsley::Tp;

use super::choice::Choices;
use super::settings::OrderStrategy;

/// A host: its instance, its task's index and its producer epoch.
pub(super) type HostKey = (u32, u32, u32);

/// PCT's state for one run.
pub(super) struct Pct {
    seed: u64,
    /// The steps at which the host that acted last is demoted, ascending.
    change_points: Vec<u64>,
    /// The hosts demoted so far, in order: each below every host not
    /// demoted, and below those demoted before it.
    demoted: Vec<HostKey>,
    /// The host that acted last.
    last: Cell<Option<HostKey>>,
}

/// SplitMix64's finaliser: a fixed, well-mixed hash of a word.
fn mix(mut value: u64) -> u64 {
    value = (value ^ (value >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    value = (value ^ (value >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    value ^ (value >> 31)
}

impl Pct {
    /// PCT's draws for a run of `steps` safety steps: its seed word and
    /// its change points. `None` (drawing nothing) under random order.
    pub(super) fn draw(order: OrderStrategy, steps: u64, choices: &mut Choices) -> Option<Pct> {
        let OrderStrategy::Pct { depth } = order else {
            return None;
        };
        let seed = u64::from(choices.below(u32::MAX));
        let mut change_points: Vec<u64> = (1..depth)
            .map(|_| choices.range_inclusive(1, steps.max(1)))
            .collect();
        change_points.sort_unstable();
        Some(Pct {
            seed,
            change_points,
            demoted: Vec::new(),
            last: Cell::new(None),
        })
    }

    /// A host's priority: demoted hosts lowest (the later, the lower),
    /// every other one from its hash.
    pub(super) fn host_priority(&self, host: HostKey) -> u64 {
        match self.demoted.iter().position(|demoted| *demoted == host) {
            Some(index) => (self.change_points.len() - index) as u64,
            None => {
                let key = (u64::from(host.0) << 48) ^ (u64::from(host.1) << 24) ^ u64::from(host.2);
                // Above every demoted host's priority.
                mix(self.seed ^ mix(key)) | (1 << 63)
            }
        }
    }

    /// A lane's priority, from its tp.
    pub(super) fn lane_priority(&self, tp: &Tp) -> u64 {
        let topic = tp
            .topic
            .as_str()
            .bytes()
            .fold(0xcbf2_9ce4_8422_2325u64, |hash, byte| {
                (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
            });
        mix(self.seed ^ mix(topic ^ u64::from(tp.partition)))
    }

    /// Notes the host that acts.
    pub(super) fn acted(&self, host: HostKey) {
        self.last.set(Some(host));
    }

    /// At a change point, demotes the host that acted last.
    pub(super) fn at_step(&mut self, step: u64) {
        while self.demoted.len() < self.change_points.len()
            && self.change_points[self.demoted.len()] <= step
        {
            match self.last.get() {
                Some(last) => self.demoted.push(last),
                None => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// PCT: hosts get distinct priorities above every demoted one; at each
    /// change point the host that acted last drops below all others, the
    /// later demoted the lower; nothing is demoted without a host that
    /// acted.
    #[test]
    fn a_change_point_demotes_the_host_that_acted_last() {
        let mut choices = Choices::from_tape(
            [7u32, 10, 20]
                .iter()
                .flat_map(|word| word.to_le_bytes())
                .collect(),
        );
        let mut pct = Pct::draw(OrderStrategy::Pct { depth: 3 }, 100, &mut choices).unwrap();
        assert_eq!(pct.change_points, [11, 21]);
        let (a, b, c) = ((0, 0, 0), (0, 1, 0), (1, 0, 0));
        assert_ne!(pct.host_priority(a), pct.host_priority(b));
        pct.at_step(11);
        assert!(pct.demoted.is_empty(), "no host has acted yet");
        pct.acted(a);
        pct.at_step(12);
        pct.acted(b);
        pct.at_step(21);
        assert_eq!(pct.demoted, [a, b]);
        assert!(pct.host_priority(b) < pct.host_priority(a));
        assert!(pct.host_priority(a) < pct.host_priority(c));
    }

    #[test]
    fn order_strategies_are_named_as_scenario_files_write_them() {
        assert_eq!(
            OrderStrategy::from_name("random"),
            Some(OrderStrategy::Random)
        );
        assert_eq!(
            OrderStrategy::from_name("pct"),
            Some(OrderStrategy::Pct { depth: 3 })
        );
        assert_eq!(
            OrderStrategy::from_name("pct:5"),
            Some(OrderStrategy::Pct { depth: 5 })
        );
        for bad in ["pct:0", "pct:x", "dfs"] {
            assert_eq!(OrderStrategy::from_name(bad), None, "{bad}");
        }
        assert_eq!(OrderStrategy::Pct { depth: 2 }.name(), "pct:2");
    }
}
