//! What the world produces from: each input's generators with their types
//! erased, and the [`Draw`] they take their choices from.
//!
//! Every input a generator makes is drawn from the run's choice source, so
//! seeds, tapes, replay, shrinking and fuzzing cover the inputs as well as
//! the interleavings and faults. The typed [`Input`] a user writes is erased
//! into a [`PlainInput`] when the simulation is built.
//!
//! [`Input`]: crate::sim::Input

use std::sync::Arc;

use bytes::Bytes;
use parsley::{RecordCodecError, TopicName};

use crate::sim::world::choice::Choices;

/// The choices an input generator draws from: every draw is one word of the
/// run's choice tape, so a shrunk tape shrinks inputs too (a zero word is the
/// first option: the smallest number, the first key, `false`).
pub struct Draw<'a> {
    choices: &'a mut Choices,
    keys: u32,
    now: i64,
}

impl<'a> Draw<'a> {
    pub(crate) fn new(choices: &'a mut Choices, keys: u32, now: i64) -> Self {
        Draw { choices, keys, now }
    }

    /// The simulated wall clock, in milliseconds since the epoch, when the
    /// record is produced: its timestamp, unless its input lags event time
    /// ([`Input::event_time_lag`](crate::sim::Input::event_time_lag)). For
    /// values that name a time of their own, such as a timer request's due
    /// time or an event's scheduled time. Reading it draws nothing.
    pub fn now(&self) -> i64 {
        self.now
    }

    /// A number in `[0, n)`.
    ///
    /// # Panics
    ///
    /// If `n` is zero.
    pub fn below(&mut self, n: u32) -> u32 {
        self.choices.below(n)
    }

    /// True with probability `probability`, in `[0, 1]`.
    ///
    /// # Panics
    ///
    /// If `probability` is not in `[0, 1]`.
    pub fn chance(&mut self, probability: f64) -> bool {
        self.choices.chance(probability)
    }

    /// A number in `[lo, hi]`; a span wider than 2³² reaches only its first
    /// 2³² values.
    ///
    /// # Panics
    ///
    /// If `lo > hi`.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        assert!(
            lo <= hi,
            "Draw::range(lo, hi) needs lo <= hi, got {lo} > {hi}"
        );
        let span = hi.abs_diff(lo);
        lo.wrapping_add(self.choices.range_inclusive(0, span) as i64)
    }

    /// One of `items`.
    ///
    /// # Panics
    ///
    /// If `items` is empty.
    pub fn pick<'i, T>(&mut self, items: &'i [T]) -> &'i T {
        self.choices.pick(items)
    }

    /// A key number in `[0, keys)`, where `keys` is the run's workload knob
    /// ([`SimulationBuilder::keys`](crate::sim::SimulationBuilder::keys), a scenario's `workload.keys`).
    pub fn key_number(&mut self) -> u32 {
        self.choices.below(self.keys)
    }

    /// A key `k<N>` with `N` in `[0, keys)`: see [`Draw::key_number`].
    pub fn key(&mut self) -> String {
        format!("k{}", self.key_number())
    }
}

/// A generator's record, encoded with its topic's codecs.
pub(crate) type Encoded = Result<(Option<Bytes>, Bytes), RecordCodecError>;

/// A type-erased generator of encoded records.
pub(crate) type Generator = Arc<dyn Fn(&mut Draw<'_>) -> Encoded + Send + Sync>;

/// An input with its types erased, as the world uses it.
pub(crate) struct PlainInput {
    pub(crate) topic: TopicName,
    pub(crate) generate: Generator,
    pub(crate) rejected: Option<Generator>,
    /// The inputs (by index) this input's records may claim, and how often.
    pub(crate) claims: Vec<(usize, f64)>,
    /// Whether another input claims this one's records.
    pub(crate) claimed: bool,
    /// How far, at most, a record's timestamp lies before the wall clock
    /// (0: records are stamped with the wall clock).
    pub(crate) event_time_lag_ms: u64,
    /// How often a keyed record is a tombstone instead (0: never).
    pub(crate) tombstones: f64,
}
