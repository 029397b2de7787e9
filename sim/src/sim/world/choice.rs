//! The choice source: the one place every nondeterministic decision of a
//! simulated run comes from.
//!
//! Tapes are read and recorded word by word, as [`Choices`] describes.

use std::sync::{Arc, Mutex};

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

/// Bytes per draw.
pub(crate) const WORD_BYTES: usize = 4;

/// 2³², the size of the word range, as a `u64`.
const WORD_RANGE: u64 = 1 << 32;

/// The source of every nondeterministic decision of a run.
///
/// Which action runs next, which deliverable head goes first, how far the
/// clock moves, whether a fault fires: the simulator asks a [`Choices`] for
/// each of them and never looks at a clock, a hash seed or a thread. A
/// `Choices` is either
///
/// - **seeded** ([`Choices::seeded`]): words come from a ChaCha8 generator
///   (`rand_chacha`) seeded with a `u64`, the ordinary way to run a seed; or
/// - **a tape** ([`Choices::from_tape`]): words come from a byte string
///   handed in by a fuzzer, a proptest strategy, the shrinker, or a recorded
///   run being replayed.
///
/// Either way every word consumed is recorded, and [`Choices::tape`] returns
/// the record: `Choices::from_tape(run.tape().to_vec())` makes exactly the
/// decisions `run` made, so any run can be replayed, and shrunk by shrinking
/// its tape ([`Simulation::shrink`](crate::sim::Simulation::shrink)).
///
/// # Tape format
///
/// A tape is a sequence of *words*. Every draw, whatever its kind, consumes
/// exactly one word: 4 bytes read as a little-endian `u32` `w`.
///
/// - [`below(n)`](Choices::below) is `w % n`;
/// - [`range_inclusive(lo, hi)`](Choices::range_inclusive) is
///   `lo + w % (hi - lo + 1)` (a range wider than 2³² values therefore only
///   reaches its first 2³² values: one word per draw keeps tapes aligned);
/// - [`pick(items)`](Choices::pick) is `items[below(items.len())]`;
/// - [`chance(p)`](Choices::chance) is true only when `w` lies in the top `p`
///   fraction of the `u32` range, i.e. `w >= 2³² - round(p · 2³²)`. So
///   `chance(1.0)` is always true, `chance(0.0)` always false (and still
///   consumes its word, so that the words after it keep their meaning).
///
/// # Zero is the simplest choice
///
/// When a tape runs out, further draws read the zero word (a trailing partial
/// word is padded with zero bytes) and [`Choices::exhausted`] turns true. The
/// zero word always means the *simplest* decision: the first option of a
/// `below` or `pick`, the low end of a range, and "no" for every `chance`, so
/// no fault fires. Callers must keep it that way when they map draws to
/// decisions (put the plain option first, ask "does the fault fire?" rather
/// than "does the fault stay away?"). That is what makes shrinking work: a
/// tape shrinks by zeroing words and by cutting its tail, and both only ever
/// replace a decision with a simpler one.
#[derive(Clone, Debug)]
pub struct Choices {
    source: Source,
    /// Every word consumed so far, in the tape format (`4 * draws` bytes).
    record: Vec<u8>,
    draws: u64,
    exhausted: bool,
    /// The word at which each marked span starts (a step of the run), so
    /// that the shrinker can cut a run at its joints rather than mid-step.
    spans: Vec<u32>,
    /// When kept ([`Choices::keep_canonical`]): each draw as the smallest
    /// word that makes the same decision, so that a shrinker lowers every
    /// value at once instead of bisecting each word.
    canonical: Option<Vec<u8>>,
    /// Side words taken so far ([`Choices::side_word`]).
    side: u64,
}

#[derive(Clone, Debug)]
enum Source {
    Seeded(Box<ChaCha8Rng>),
    Tape { bytes: Vec<u8>, position: usize },
    Guided(Arc<Mutex<Guide>>),
}

/// How many values a guided [`Choices::below`] enumerates in full; a wider
/// draw is quantised to its lowest and highest value.
pub(crate) const GUIDED_BELOW_MAX: u32 = 16;

/// A choice source driven by an explorer (the bounded exhaustive mode):
/// each draw is a *choice point* with a few alternatives, each the word
/// that means it on a tape. The first [`Guide::prefix`] points take the
/// alternatives it names; every later one takes its first (the zero word,
/// the simplest decision). The points met are recorded with their arity,
/// so the explorer can backtrack: stateless model checking, as shuttle's
/// and loom's DFS run it. The words drawn are recorded as any tape is, so
/// a guided run replays with [`Choices::from_tape`].
///
/// How each draw is enumerated:
///
/// - `below(n)`: every value when `n` ≤ [`GUIDED_BELOW_MAX`], otherwise
///   `0` and `n − 1`;
/// - `chance(p)`: no and yes (one alternative when `p` is 0 or 1);
/// - `range_inclusive(lo, hi)`: `lo`, and `hi` when
///   [`Guide::range_ends`] is set (a range is quantised: clock steps land
///   on deadlines through boundary-seeking time instead);
/// - [`Choices::step_within`] (the clock's steps): `hi`, and `lo` too
///   when [`Guide::range_ends`] is set;
/// - [`Choices::below_among`]: the words its caller lists (the world's
///   action draw lists one word per action it can take), those marked as
///   faults only while [`Guide::faults_left`] is not zero.
#[derive(Debug, Default)]
pub(crate) struct Guide {
    /// The alternative (an index) to take at each of the first points.
    pub(crate) prefix: Vec<u32>,
    /// Every point met so far: its arity and the alternative taken.
    pub(crate) points: Vec<Point>,
    /// Faults the run may still take at a [`Choices::below_among`].
    pub(crate) faults_left: u32,
    /// Whether ranges enumerate their high end too.
    pub(crate) range_ends: bool,
    /// Whether every later point takes its first alternative and offers
    /// no other (the explorer freezes the liveness phase: it completes
    /// the run, it is not explored).
    pub(crate) frozen: bool,
    /// When set, each point's alternatives are taken in an order rotated
    /// by a hash of this seed and the path that led to the point
    /// (randomised depth-first search): the search still takes every
    /// alternative of every point, in another order. The words recorded
    /// are the alternatives taken, so a tape replays as the run went.
    pub(crate) shuffle: Option<u64>,
    /// A hash of the alternatives taken so far (for [`Guide::shuffle`]).
    pub(crate) path: u64,
}

/// One choice point of a guided run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Point {
    /// How many alternatives it offered.
    pub(crate) arity: u32,
    /// The one taken, from 0.
    pub(crate) taken: u32,
}

/// One round of SplitMix64 over `state` and `salt`: the path hash and
/// the rotation of a shuffled guide.
fn mix(state: u64, salt: u64) -> u64 {
    let mut z = state
        .wrapping_add(salt.wrapping_mul(0x9e37_79b9_7f4a_7c15))
        .wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// How far a shuffled guide rotates the alternatives of a point of
/// `arity` reached by `path`.
fn rotation(seed: u64, path: u64, arity: u32) -> u32 {
    (mix(path, seed) % u64::from(arity)) as u32
}

impl Guide {
    /// The alternative to take at the next point of `arity` alternatives,
    /// recorded.
    fn next(&mut self, arity: u32) -> u32 {
        let arity = if self.frozen { 1 } else { arity };
        let index = self.points.len();
        let taken = self.prefix.get(index).copied().unwrap_or(0);
        assert!(
            taken < arity,
            "a guided run met point {index} with {arity} alternatives where its prefix \
             takes alternative {taken}: the run is not a function of its choices (I9)"
        );
        self.points.push(Point { arity, taken });
        let alternative = match self.shuffle {
            Some(seed) if arity > 1 => (taken + rotation(seed, self.path, arity)) % arity,
            _ => taken,
        };
        self.path = mix(self.path ^ u64::from(alternative), u64::from(arity));
        alternative
    }

    /// Whether every point of the prefix has been met: from here on the
    /// run is new ground.
    pub(crate) fn past_prefix(&self) -> bool {
        self.points.len() >= self.prefix.len()
    }
}

impl Choices {
    /// Bytes per draw: one word of the tape.
    pub const WORD_BYTES: usize = WORD_BYTES;

    /// A source drawing its words from ChaCha8 seeded with `seed`.
    pub fn seeded(seed: u64) -> Self {
        Choices {
            source: Source::Seeded(Box::new(ChaCha8Rng::seed_from_u64(seed))),
            record: Vec::new(),
            draws: 0,
            exhausted: false,
            spans: Vec::new(),
            canonical: None,
            side: 0,
        }
    }

    /// A word off the tape, for an observation of the run that changes
    /// nothing in it (an interactive query): a hash of how many words were
    /// drawn, the last two of them and how many side words were taken. It
    /// is not recorded, so a run that takes side words draws the same
    /// words from its source, and takes the same steps, as one that does
    /// not; a run replayed from its tape takes the same side words.
    pub(crate) fn side_word(&mut self) -> u32 {
        self.side += 1;
        let word = |back: usize| {
            let end = self.record.len().checked_sub(WORD_BYTES * (back - 1))?;
            let start = end.checked_sub(WORD_BYTES)?;
            let bytes: [u8; WORD_BYTES] = self.record[start..end].try_into().ok()?;
            Some(u64::from(u32::from_le_bytes(bytes)))
        };
        let last = word(1).unwrap_or(0) << 32 | word(2).unwrap_or(0);
        // SplitMix64's finaliser.
        let mut z = last
            ^ self.draws.wrapping_mul(0x9E37_79B9_7F4A_7C15)
            ^ self.side.wrapping_mul(0xD1B5_4A32_D192_ED03);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) as u32
    }

    /// [`Choices::side_word`] as a draw below `n` (`n >= 1`).
    pub(crate) fn side_below(&mut self, n: u32) -> u32 {
        ((u64::from(self.side_word()) * u64::from(n)) >> 32) as u32
    }

    /// [`Choices::side_word`] as a chance of `probability`.
    pub(crate) fn side_chance(&mut self, probability: f64) -> bool {
        f64::from(self.side_word()) < probability.clamp(0.0, 1.0) * WORD_RANGE as f64
    }

    /// A source reading its words from `tape`; past its end every word is
    /// zero.
    pub fn from_tape(tape: Vec<u8>) -> Self {
        Choices {
            source: Source::Tape {
                bytes: tape,
                position: 0,
            },
            record: Vec::new(),
            draws: 0,
            exhausted: false,
            spans: Vec::new(),
            canonical: None,
            side: 0,
        }
    }

    /// A source driven by an explorer through `guide` (see [`Guide`]).
    pub(crate) fn guided(guide: Arc<Mutex<Guide>>) -> Self {
        Choices {
            source: Source::Guided(guide),
            record: Vec::new(),
            draws: 0,
            exhausted: false,
            spans: Vec::new(),
            canonical: None,
            side: 0,
        }
    }

    /// Whether an explorer drives this source: callers with a draw too
    /// wide to enumerate list its alternatives ([`Choices::below_among`]).
    #[inline]
    pub(crate) fn is_guided(&self) -> bool {
        matches!(self.source, Source::Guided(_))
    }

    /// When guided, the word `choose` picks with the guide, recorded.
    fn guided_draw(&mut self, choose: impl FnOnce(&mut Guide) -> u32) -> Option<u32> {
        let Source::Guided(guide) = &self.source else {
            return None;
        };
        let guide = Arc::clone(guide);
        let word = choose(&mut guide.lock().unwrap_or_else(|e| e.into_inner()));
        Some(self.guided_word(word))
    }

    /// Records a word chosen by the guide.
    fn guided_word(&mut self, word: u32) -> u32 {
        self.record.extend_from_slice(&word.to_le_bytes());
        self.draws += 1;
        self.canon(word);
        word
    }

    /// A number in `[0, n)` as [`Choices::below`] draws it; a guided source
    /// offers only `alternatives` (the words that mean something different,
    /// each with whether it is a fault) instead of all `n` values.
    pub(crate) fn below_among(&mut self, n: u32, alternatives: &[(u32, bool)]) -> u32 {
        let guided = self.guided_draw(|guide| {
            let faults = guide.faults_left > 0;
            let offered = |&&(_, fault): &&(u32, bool)| faults || !fault;
            let arity = alternatives.iter().filter(offered).count() as u32;
            let taken = guide.next(arity.max(1));
            match alternatives.iter().filter(offered).nth(taken as usize) {
                Some(&(word, fault)) => {
                    if fault {
                        guide.faults_left -= 1;
                    }
                    word
                }
                None => 0,
            }
        });
        match guided {
            Some(word) => word % n,
            None => self.below(n),
        }
    }

    /// Makes room to record `words` more draws without regrowing the tape.
    pub fn reserve_words(&mut self, words: usize) {
        self.record.reserve(words.saturating_mul(WORD_BYTES));
    }

    /// The next word; records it. Inlined: a step draws several, and the
    /// seeded path is a few instructions once the tape's path is out of line.
    #[inline]
    fn word(&mut self) -> u32 {
        let word = match &mut self.source {
            Source::Seeded(rng) => rng.next_u32(),
            Source::Tape { .. } => self.tape_word(),
            Source::Guided(_) => unreachable!("a guided source draws through its guide"),
        };
        self.record.extend_from_slice(&word.to_le_bytes());
        self.draws += 1;
        word
    }

    /// The tape's next word; past its end, zero bytes pad it.
    #[inline(never)]
    fn tape_word(&mut self) -> u32 {
        let Source::Tape { bytes, position } = &mut self.source else {
            unreachable!("tape_word is called on a tape source");
        };
        let mut buf = [0u8; WORD_BYTES];
        let available = bytes.len().saturating_sub(*position).min(WORD_BYTES);
        buf[..available].copy_from_slice(&bytes[*position..*position + available]);
        *position += available;
        if available < WORD_BYTES {
            self.exhausted = true;
        }
        u32::from_le_bytes(buf)
    }

    /// Records the canonical word of the draw just made, when kept.
    #[inline]
    fn canon(&mut self, word: u32) {
        if let Some(canonical) = &mut self.canonical {
            canonical.extend_from_slice(&word.to_le_bytes());
        }
    }

    /// Keeps, beside the record, the canonical tape: every draw as the
    /// smallest word that makes the same decision (`w % n` for a `below`,
    /// the lowest "yes" word for a `chance` that fired, zero for one that
    /// did not). Replaying it makes exactly the same decisions.
    pub(crate) fn keep_canonical(&mut self) {
        self.canonical = Some(Vec::new());
    }

    /// A number in `[0, n)`: `w % n`. Zero is the first option.
    ///
    /// # Panics
    ///
    /// If `n` is zero.
    pub fn below(&mut self, n: u32) -> u32 {
        assert!(n >= 1, "Choices::below(n) needs n >= 1, got 0");
        let guided = self.guided_draw(|guide| match n {
            n if n <= GUIDED_BELOW_MAX => guide.next(n),
            n => [0, n - 1][guide.next(2) as usize],
        });
        if let Some(word) = guided {
            return word;
        }
        let value = self.word() % n;
        self.canon(value);
        value
    }

    /// True with probability `probability`: when the word lies in the top
    /// `probability` fraction of the `u32` range. The zero word is false.
    ///
    /// # Panics
    ///
    /// If `probability` is not in `[0, 1]` (NaN included).
    pub fn chance(&mut self, probability: f64) -> bool {
        assert!(
            (0.0..=1.0).contains(&probability),
            "Choices::chance(p) needs p in [0, 1], got {probability}"
        );
        // No, then yes; a certain answer is no choice.
        let guided = self.guided_draw(|guide| match probability {
            p if p == 0.0 || p == 1.0 => {
                guide.next(1);
                u32::from(p == 1.0) * u32::MAX
            }
            _ => [0, u32::MAX][guide.next(2) as usize],
        });
        if let Some(word) = guided {
            return word != 0;
        }
        let word = self.word();
        // How many of the 2^32 words mean "yes"; they are the top ones.
        let yes = (probability * WORD_RANGE as f64).round() as u64;
        let lowest_yes = WORD_RANGE - yes.min(WORD_RANGE);
        let fired = u64::from(word) >= lowest_yes;
        self.canon(if fired { lowest_yes as u32 } else { 0 });
        fired
    }

    /// A number in `[lo, hi]`: `lo + w % (hi - lo + 1)`. Zero is `lo`.
    ///
    /// One word per draw: a range of more than 2³² values only reaches
    /// `lo..lo + 2³²`.
    ///
    /// # Panics
    ///
    /// If `lo > hi`.
    pub fn range_inclusive(&mut self, lo: u64, hi: u64) -> u64 {
        assert!(
            lo <= hi,
            "Choices::range_inclusive(lo, hi) needs lo <= hi, got {lo} > {hi}"
        );
        let span = (hi - lo).min(u64::from(u32::MAX)) as u32;
        let guided = self.guided_draw(|guide| match (span, guide.range_ends) {
            (0, _) | (_, false) => {
                guide.next(1);
                0
            }
            (span, true) => [0, span][guide.next(2) as usize],
        });
        if let Some(word) = guided {
            return lo + u64::from(word);
        }
        let word = u64::from(self.word());
        let offset = match (hi - lo).checked_add(1) {
            Some(span) => word % span,
            // The whole u64 range: every word is in it.
            None => word,
        };
        // Below 2^32: `word` is.
        self.canon(offset as u32);
        lo + offset
    }

    /// A step in `[lo, hi]`, drawn as [`Choices::range_inclusive`] draws
    /// it; a guided source offers only `hi` (or `lo` and `hi` when its
    /// [`Guide::range_ends`] is set): the world's clock steps this way, so
    /// that one step passes a commit interval, and boundary-seeking time's
    /// landings reach the deadlines and the millisecond either side.
    pub(crate) fn step_within(&mut self, lo: u64, hi: u64) -> u64 {
        let span = hi.saturating_sub(lo).min(u64::from(u32::MAX)) as u32;
        let guided = self.guided_draw(|guide| match (span, guide.range_ends) {
            (0, _) => {
                guide.next(1);
                0
            }
            (span, false) => {
                guide.next(1);
                span
            }
            (span, true) => [0, span][guide.next(2) as usize],
        });
        match guided {
            Some(word) => lo + u64::from(word),
            None => self.range_inclusive(lo, hi),
        }
    }

    /// One of `items`: `items[w % items.len()]`. Zero is the first item.
    ///
    /// # Panics
    ///
    /// If `items` is empty or longer than `u32::MAX`.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        assert!(!items.is_empty(), "Choices::pick needs a non-empty slice");
        let len = u32::try_from(items.len())
            .expect("Choices::pick needs a slice of at most u32::MAX items");
        &items[self.below(len) as usize]
    }

    /// Marks that the next draw starts a new span: one step of the run.
    pub(crate) fn mark_span(&mut self) {
        self.spans
            .push(u32::try_from(self.draws).unwrap_or(u32::MAX));
    }

    /// The word offset of every span marked so far, in order.
    #[cfg(test)]
    pub(crate) fn spans(&self) -> &[u32] {
        &self.spans
    }

    /// Every word consumed so far, in the tape format: `4 * draws()` bytes.
    /// Replaying it with [`Choices::from_tape`] makes the same decisions.
    /// Words read past the end of an exhausted tape are recorded as the zeros
    /// they were read as.
    pub fn tape(&self) -> &[u8] {
        &self.record
    }

    /// The recorded tape; see [`Choices::tape`].
    pub fn into_tape(self) -> Vec<u8> {
        self.record
    }

    /// The recorded tape, its spans ([`Choices::mark_span`]) and its
    /// canonical form ([`Choices::keep_canonical`]; empty when not kept).
    pub(crate) fn into_parts(self) -> (Vec<u8>, Vec<u32>, Vec<u8>) {
        (self.record, self.spans, self.canonical.unwrap_or_default())
    }

    /// How many decisions were drawn.
    pub fn draws(&self) -> u64 {
        self.draws
    }

    /// Whether a tape ran out: some draw read (at least partly) past its end
    /// and got zero bytes. Never true for a seeded source.
    pub fn exhausted(&self) -> bool {
        self.exhausted
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A mixed sequence of draws, as a record of their results.
    fn mixed_draws(choices: &mut Choices, rounds: usize) -> Vec<u64> {
        let items = ["a", "b", "c", "d", "e"];
        let mut out = Vec::new();
        for round in 0..rounds {
            match round % 5 {
                0 => out.push(u64::from(choices.below(1 + round as u32 % 97))),
                1 => out.push(u64::from(choices.chance(0.3))),
                2 => out.push(choices.range_inclusive(5, 5 + round as u64)),
                3 => {
                    let picked = choices.pick(&items);
                    out.push(items.iter().position(|i| i == picked).unwrap() as u64)
                }
                _ => out.push(choices.range_inclusive(0, u64::MAX)),
            }
        }
        out
    }

    #[test]
    fn a_seeded_run_replays_from_its_tape() {
        for seed in [0, 1, 42, u64::MAX] {
            let mut seeded = Choices::seeded(seed);
            let decisions = mixed_draws(&mut seeded, 5_000);
            assert_eq!(seeded.draws(), 5_000);
            assert_eq!(seeded.tape().len(), 5_000 * WORD_BYTES);
            assert!(!seeded.exhausted());

            let mut replay = Choices::from_tape(seeded.tape().to_vec());
            assert_eq!(mixed_draws(&mut replay, 5_000), decisions);
            assert!(!replay.exhausted());
            assert_eq!(replay.tape(), seeded.tape());
            assert_eq!(replay.into_tape(), seeded.into_tape());
        }
    }

    #[test]
    fn a_guided_run_records_its_points_and_replays_from_its_tape() {
        let guide = Arc::new(Mutex::new(Guide {
            prefix: vec![2, 1, 0, 1, 0, 1],
            range_ends: true,
            faults_left: 1,
            ..Guide::default()
        }));
        let mut guided = Choices::guided(Arc::clone(&guide));
        let drawn = (
            guided.below(3),
            guided.chance(0.3),
            guided.range_inclusive(5, 9),
            guided.below(1_000),
            guided.below_among(1_000, &[(0, false), (400, false), (900, true)]),
            guided.step_within(1, 500),
            // Past the prefix: the first alternative.
            guided.below_among(1_000, &[(0, false), (900, true)]),
            guided.below(5),
        );
        assert_eq!(drawn, (2, true, 5, 999, 0, 500, 0, 0));
        let points: Vec<(u32, u32)> = guide
            .lock()
            .unwrap()
            .points
            .iter()
            .map(|point| (point.arity, point.taken))
            .collect();
        assert_eq!(
            points,
            [
                (3, 2),
                (2, 1),
                (2, 0),
                (2, 1),
                (3, 0),
                (2, 1),
                (2, 0),
                (5, 0)
            ]
        );
        let mut replay = Choices::from_tape(guided.tape().to_vec());
        let replayed = (
            replay.below(3),
            replay.chance(0.3),
            replay.range_inclusive(5, 9),
            replay.below(1_000),
            replay.below(1_000),
            replay.range_inclusive(1, 500),
            replay.below(1_000),
            replay.below(5),
        );
        assert_eq!(replayed, drawn);
    }

    #[test]
    fn a_spent_fault_budget_offers_no_fault_and_a_frozen_guide_no_choice() {
        let guide = Arc::new(Mutex::new(Guide {
            prefix: vec![1],
            faults_left: 1,
            ..Guide::default()
        }));
        let mut guided = Choices::guided(Arc::clone(&guide));
        assert_eq!(guided.below_among(10, &[(0, false), (9, true)]), 9);
        // The budget is spent: only the benign word is offered.
        assert_eq!(guided.below_among(10, &[(0, false), (9, true)]), 0);
        guide.lock().unwrap().frozen = true;
        assert_eq!(guided.below(4), 0);
        let arities: Vec<u32> = guide
            .lock()
            .unwrap()
            .points
            .iter()
            .map(|p| p.arity)
            .collect();
        assert_eq!(arities, [2, 1, 1]);
    }

    #[test]
    fn the_same_seed_gives_the_same_decisions_and_others_differ() {
        let a = mixed_draws(&mut Choices::seeded(7), 1_000);
        let b = mixed_draws(&mut Choices::seeded(7), 1_000);
        let c = mixed_draws(&mut Choices::seeded(8), 1_000);
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    /// Side words leave the tape alone: a run taking them draws the same
    /// words and records the same tape as one that does not, and its
    /// replay takes the same side words; other seeds take other ones.
    #[test]
    fn side_words_are_not_recorded_and_replay_with_the_tape() {
        let side_run = |choices: &mut Choices| {
            let mut side = Vec::new();
            for _ in 0..200 {
                choices.below(1_000);
                side.push(choices.side_word());
                side.push(choices.side_below(7));
            }
            side
        };
        let mut with = Choices::seeded(7);
        let side = side_run(&mut with);
        let mut without = Choices::seeded(7);
        for _ in 0..200 {
            without.below(1_000);
        }
        assert_eq!(with.tape(), without.tape());
        assert_eq!(with.draws(), 200);
        let mut replay = Choices::from_tape(with.tape().to_vec());
        assert_eq!(side_run(&mut replay), side);
        assert_ne!(side_run(&mut Choices::seeded(8)), side);
        assert!(side.iter().skip(1).step_by(2).all(|below| *below < 7));
        let words: std::collections::BTreeSet<_> = side.iter().step_by(2).collect();
        assert!(
            words.len() > 190,
            "side words repeat: {} distinct",
            words.len()
        );
    }

    #[test]
    fn an_exhausted_tape_reads_zeros_and_the_simplest_choice() {
        let mut choices = Choices::from_tape(Vec::new());
        assert!(!choices.exhausted());
        assert_eq!(choices.below(10), 0);
        assert!(choices.exhausted());
        assert!(!choices.chance(0.999_999));
        assert_eq!(choices.range_inclusive(3, 9), 3);
        assert_eq!(*choices.pick(&['x', 'y']), 'x');
        assert!(choices.chance(1.0));
        assert!(!choices.chance(0.0));
        assert_eq!(choices.draws(), 6);
        assert_eq!(choices.tape(), &[0u8; 24][..]);
        // The record replays, and is not exhausted itself.
        let mut replay = Choices::from_tape(choices.into_tape());
        assert_eq!(replay.below(10), 0);
        assert!(!replay.exhausted());
    }

    #[test]
    fn a_partial_word_is_padded_with_zeros() {
        let mut choices = Choices::from_tape(vec![1, 0, 0, 0, 0x34, 0x12]);
        assert_eq!(choices.below(u32::MAX), 1);
        assert!(!choices.exhausted());
        assert_eq!(choices.below(u32::MAX), 0x1234);
        assert!(choices.exhausted());
        assert_eq!(choices.tape(), &[1, 0, 0, 0, 0x34, 0x12, 0, 0]);
    }

    #[test]
    fn words_are_little_endian_and_chance_takes_the_top_fraction() {
        let tape = [
            u32::MAX.to_le_bytes(),
            (u32::MAX / 2).to_le_bytes(),
            (1u32 << 31).to_le_bytes(),
            258u32.to_le_bytes(),
        ]
        .concat();
        let mut choices = Choices::from_tape(tape);
        assert!(
            choices.chance(1e-9),
            "the top word is in every non-zero top fraction"
        );
        assert!(
            !choices.chance(0.5),
            "just below half is not in the top half"
        );
        assert!(choices.chance(0.5), "exactly half is");
        assert_eq!(choices.below(1000), 258);
        // chance(0) never fires, even on the top word; chance(1) always does.
        let mut top = Choices::from_tape([u32::MAX.to_le_bytes(), 0u32.to_le_bytes()].concat());
        assert!(!top.chance(0.0));
        assert!(top.chance(1.0));
        assert!(!top.exhausted());
    }

    #[test]
    fn chance_fires_about_p_of_the_time() {
        let mut choices = Choices::seeded(2024);
        for p in [0.0, 0.001, 0.01, 0.1, 0.3, 0.5, 0.9, 1.0] {
            let n = 100_000;
            let hits = (0..n).filter(|_| choices.chance(p)).count();
            let rate = hits as f64 / n as f64;
            // Loose bounds: several standard deviations, and a floor for tiny p.
            let slack = 5.0 * (p * (1.0 - p) / n as f64).sqrt() + 0.0005;
            assert!(
                (rate - p).abs() <= slack,
                "chance({p}) fired at rate {rate}, outside {p} ± {slack}"
            );
        }
    }

    #[test]
    fn the_canonical_tape_makes_the_same_decisions_with_smaller_words() {
        for seed in [3, 17, 99] {
            let mut seeded = Choices::seeded(seed);
            let decisions = mixed_draws(&mut seeded, 2_000);
            let mut replay = Choices::from_tape(seeded.tape().to_vec());
            replay.keep_canonical();
            assert_eq!(mixed_draws(&mut replay, 2_000), decisions);
            let (record, _, canonical) = replay.into_parts();
            assert_eq!(canonical.len(), record.len());
            let words = |tape: &[u8]| -> Vec<u32> {
                tape.chunks(WORD_BYTES)
                    .map(|w| u32::from_le_bytes(w.try_into().unwrap()))
                    .collect()
            };
            assert!(words(&canonical)
                .iter()
                .zip(words(&record))
                .all(|(c, r)| *c <= r));
            assert_ne!(canonical, record, "seed {seed}: some word must get smaller");
            let mut again = Choices::from_tape(canonical);
            assert_eq!(mixed_draws(&mut again, 2_000), decisions);
        }
    }

    #[test]
    fn spans_mark_where_each_step_starts() {
        let mut choices = Choices::seeded(1);
        choices.mark_span();
        choices.below(3);
        choices.below(3);
        choices.mark_span();
        choices.chance(0.5);
        assert_eq!(choices.spans(), &[0, 2]);
    }

    #[test]
    #[should_panic(expected = "needs n >= 1")]
    fn below_zero_is_refused() {
        Choices::seeded(0).below(0);
    }

    #[test]
    #[should_panic(expected = "needs p in [0, 1]")]
    fn a_probability_above_one_is_refused() {
        Choices::seeded(0).chance(1.5);
    }

    #[test]
    #[should_panic(expected = "needs lo <= hi")]
    fn an_empty_range_is_refused() {
        Choices::seeded(0).range_inclusive(2, 1);
    }

    #[test]
    #[should_panic(expected = "non-empty")]
    fn picking_from_nothing_is_refused() {
        Choices::seeded(0).pick::<u8>(&[]);
    }

    proptest! {
        #[test]
        fn below_stays_below_its_bound(tape in proptest::collection::vec(any::<u8>(), 0..64), n in 1u32..) {
            let mut choices = Choices::from_tape(tape);
            for _ in 0..20 {
                prop_assert!(choices.below(n) < n);
            }
        }

        #[test]
        fn range_inclusive_stays_in_range(seed in any::<u64>(), lo in any::<u64>(), width in any::<u64>()) {
            let hi = lo.saturating_add(width);
            let mut choices = Choices::seeded(seed);
            for _ in 0..20 {
                let x = choices.range_inclusive(lo, hi);
                prop_assert!(lo <= x && x <= hi);
            }
        }

        #[test]
        fn any_tape_replays_from_its_record(tape in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut first = Choices::from_tape(tape.clone());
            let decisions = mixed_draws(&mut first, 60);
            // The record starts with the tape itself (then zero padding).
            prop_assert_eq!(&first.tape()[..tape.len()], &tape[..]);
            let mut replay = Choices::from_tape(first.tape().to_vec());
            prop_assert_eq!(mixed_draws(&mut replay, 60), decisions);
        }
    }
}
