//! Shrinking a failing tape.
//!
//! A failing run is replayed from its tape ([`crate::sim::world::choice`]); shrinking
//! searches for a smaller tape that still fails, so that the counterexample a
//! report prints is short and plain. Because the zero word is always the
//! simplest decision and a tape that runs out reads zeros, cutting and zeroing
//! words only ever simplifies a run.
//!
//! [`shrink`] is a deterministic greedy search over the run's structure
//! first and its words second. Each replay reports where every step of the
//! run starts on the tape (its *spans*) and the tape's canonical form (each
//! word lowered to the smallest that makes the same decision), so the
//! passes cut at a run's joints. It repeats these passes, in order, until a
//! whole round of them makes no progress (a local minimum) or the attempt
//! budget is spent:
//!
//! 1. **cut steps**: bisect the shortest prefix of whole steps that still
//!    fails (what is cut reads zeros: the steps after it only deliver);
//! 2. **drop steps**: from the last step back, delete runs of whole steps,
//!    doubling the run's length while deletions succeed and halving it when
//!    one fails — an input, a crash, a restart or a clock advance goes
//!    with its step;
//! 3. **plain steps**: zero a step's words after its first (its action
//!    stays, its details become the simplest: the first host, the smallest
//!    clock step, the lowest value);
//! 4. **truncate** the tail word by word: cut half the words, a quarter, …;
//! 5. **delete** and **zero** aligned chunks of `4·k` bytes that hold a
//!    non-zero word, for k = 32, 16, 8, 4, 2, 1;
//! 6. **lower** single words: to 0, else halve while that keeps failing,
//!    then bisect towards the last value that passed.
//!
//! After every success the tape is replaced by its canonical form, which
//! makes exactly the same decisions, so values fall without an attempt.
//!
//! A candidate is tried only if it is *simpler* than the current tape —
//! shorter, or as long and lexicographically smaller as a sequence of
//! little-endian `u32` words (the order the words mean: comparing raw bytes
//! would rank the word 256, `00 01 00 00`, below the word 1) — and kept only
//! if it still fails. Every kept candidate is strictly simpler, so the search
//! terminates, and the result always still fails.

use std::cmp::Ordering;

use crate::sim::world::choice::WORD_BYTES;

/// What one replay of a candidate tape tells the shrinker.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Probe {
    /// Whether it still fails the same way.
    pub fails: bool,
    /// The word at which each step of the replay starts.
    pub spans: Vec<u32>,
    /// The replay's canonical tape (empty when unknown).
    pub canonical: Vec<u8>,
}

#[cfg(test)]
impl Probe {
    /// A verdict on a tape without structure, for searches over plain words.
    pub(crate) fn plain(fails: bool) -> Probe {
        Probe {
            fails,
            ..Probe::default()
        }
    }
}

/// A shrunk tape and how many candidates were tried to find it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ShrinkOutcome {
    /// The simplest failing tape found; `still_fails(&tape)` is true.
    pub tape: Vec<u8>,
    /// How many candidates were passed to `still_fails` (not counting the
    /// initial check of the precondition); at most `attempts_max`.
    pub attempts: usize,
    /// Whether the search ended at a local minimum (a whole round of passes
    /// found nothing simpler) rather than on its budget.
    pub finished: bool,
}

/// Shrinks `tape`, a tape for which `still_fails` is true, to a simpler tape
/// for which it is still true, trying at most `attempts_max` candidates. See
/// the [module docs](self) for the passes.
///
/// `still_fails` is called once on `tape` itself to check the precondition,
/// then once per attempt.
///
/// # Panics
///
/// If `still_fails(tape)` is false.
#[cfg(test)]
pub(crate) fn shrink(
    tape: &[u8],
    mut still_fails: impl FnMut(&[u8]) -> bool,
    attempts_max: usize,
) -> ShrinkOutcome {
    try_shrink(tape, |t| Probe::plain(still_fails(t)), attempts_max).unwrap_or_else(|| {
        panic!(
            "shrink: the tape to shrink ({} bytes) must fail, but still_fails returned false for it",
            tape.len()
        )
    })
}

/// [`shrink`] over replays that report their structure ([`Probe`]), or
/// `None` when `probe(tape)` does not fail: a failure that does not fail
/// again when replayed (a sign the logic is not a pure function, S4) has
/// nothing to shrink.
pub(crate) fn try_shrink(
    tape: &[u8],
    mut probe: impl FnMut(&[u8]) -> Probe,
    attempts_max: usize,
) -> Option<ShrinkOutcome> {
    let first = probe(tape);
    if !first.fails {
        return None;
    }
    let mut shrinker = Shrinker {
        current: tape.to_vec(),
        spans: Vec::new(),
        attempts: 0,
        attempts_max,
        cut_short: false,
        probe: &mut probe,
    };
    shrinker.learn(first);
    loop {
        let before = shrinker.current.clone();
        shrinker.cut_steps();
        shrinker.drop_steps();
        shrinker.plain_steps();
        shrinker.truncate();
        shrinker.delete_chunks();
        shrinker.zero_chunks();
        shrinker.lower_words();
        if shrinker.current == before || shrinker.cut_short {
            break;
        }
    }
    Some(ShrinkOutcome {
        tape: shrinker.current,
        attempts: shrinker.attempts,
        finished: !shrinker.cut_short,
    })
}

const CHUNK_WORDS: [usize; 6] = [32, 16, 8, 4, 2, 1];

struct Shrinker<'a, F: FnMut(&[u8]) -> Probe> {
    current: Vec<u8>,
    /// Where each step of the current tape's run starts, in words, within
    /// the tape (steps that start past its end read only zeros).
    spans: Vec<usize>,
    attempts: usize,
    attempts_max: usize,
    /// Whether some candidate went untried for want of budget.
    cut_short: bool,
    probe: &'a mut F,
}

impl<F: FnMut(&[u8]) -> Probe> Shrinker<'_, F> {
    fn spent(&mut self) -> bool {
        let spent = self.attempts >= self.attempts_max;
        self.cut_short |= spent;
        spent
    }

    /// Words in the current tape, a trailing partial word included.
    fn words(&self) -> usize {
        self.current.len().div_ceil(WORD_BYTES)
    }

    /// Takes in what the replay of the (new) current tape showed: its
    /// steps, and its canonical form when that is simpler.
    fn learn(&mut self, probe: Probe) {
        if !probe.canonical.is_empty() {
            let mut canonical = probe.canonical;
            canonical.truncate(self.current.len());
            while canonical.len() >= WORD_BYTES && canonical.ends_with(&[0; WORD_BYTES]) {
                canonical.truncate(canonical.len() - WORD_BYTES);
            }
            // Same decisions, so the same run: it fails without an attempt.
            if simpler(&canonical, &self.current) == Ordering::Less {
                self.current = canonical;
            }
        }
        let words = self.words();
        self.spans = probe
            .spans
            .iter()
            .map(|&word| word as usize)
            .filter(|&word| word < words)
            .collect();
        self.spans.dedup();
    }

    /// Tries `candidate`; keeps it if it is simpler and still fails.
    fn try_candidate(&mut self, candidate: Vec<u8>) -> bool {
        if simpler(&candidate, &self.current) != Ordering::Less || self.spent() {
            return false;
        }
        self.attempts += 1;
        let probe = (self.probe)(&candidate);
        if probe.fails {
            self.current = candidate;
            self.learn(probe);
            true
        } else {
            false
        }
    }

    /// The words of step `index`: from its start to the next step's.
    fn step_words(&self, index: usize) -> std::ops::Range<usize> {
        let end = self.spans.get(index + 1).copied().unwrap_or(self.words());
        self.spans[index]..end
    }

    fn cut_steps(&mut self) {
        // The smallest `kept` steps whose prefix still fails, by bisection:
        // failing is not monotone in the prefix, but every kept cut fails.
        let (mut low, mut high) = (0, self.spans.len());
        while low < high && !self.spent() {
            let middle = low + (high - low) / 2;
            let cut = self.spans[middle] * WORD_BYTES;
            if self.try_candidate(self.current[..cut.min(self.current.len())].to_vec()) {
                // Trailing zeros of the canonical tape may have gone too.
                high = middle.min(self.spans.len());
                low = low.min(high);
            } else {
                low = middle + 1;
            }
        }
    }

    fn drop_steps(&mut self) {
        // Walking back keeps the earlier steps' spans valid: a run is the
        // same up to the first word that changed.
        let mut end = self.spans.len();
        let mut run = 1;
        while end > 0 && !self.spent() {
            let run_now = run.min(end);
            let words = self.step_words(end - run_now).start..self.step_words(end - 1).end;
            let mut candidate = self.current.clone();
            let len = candidate.len();
            candidate.drain((words.start * WORD_BYTES).min(len)..(words.end * WORD_BYTES).min(len));
            if self.try_candidate(candidate) {
                end -= run_now;
                run = run_now * 2;
            } else if run_now > 1 {
                run = run_now / 2;
            } else {
                end -= 1;
            }
            end = end.min(self.spans.len());
        }
    }

    fn plain_steps(&mut self) {
        let mut index = self.spans.len();
        while index > 0 && !self.spent() {
            index -= 1;
            if index >= self.spans.len() {
                continue;
            }
            let words = self.step_words(index);
            let bytes =
                (words.start + 1) * WORD_BYTES..(words.end * WORD_BYTES).min(self.current.len());
            if bytes.start < bytes.end && self.current[bytes.clone()].iter().any(|&b| b != 0) {
                let mut candidate = self.current.clone();
                candidate[bytes].fill(0);
                self.try_candidate(candidate);
            }
        }
    }

    fn truncate(&mut self) {
        let mut cut = self.words();
        while cut >= 1 && !self.spent() {
            let words = self.words();
            if cut > words {
                cut = words;
                continue;
            }
            let candidate = self.current[..(words - cut) * WORD_BYTES].to_vec();
            if !self.try_candidate(candidate) {
                cut /= 2;
            }
        }
    }

    /// The bytes of `k` words from `word`, clipped to the tape, when any of
    /// them is non-zero: deleting or zeroing only zeros changes nothing a
    /// reader counts.
    fn chunk(&self, word: usize, k: usize) -> Option<std::ops::Range<usize>> {
        let range = word * WORD_BYTES..((word + k) * WORD_BYTES).min(self.current.len());
        (range.start < range.end && self.current[range.clone()].iter().any(|&b| b != 0))
            .then_some(range)
    }

    fn delete_chunks(&mut self) {
        for k in CHUNK_WORDS {
            let mut word = 0;
            while (word + k) * WORD_BYTES <= self.current.len() && !self.spent() {
                let kept = match self.chunk(word, k) {
                    Some(range) => {
                        let mut candidate = self.current.clone();
                        candidate.drain(range);
                        self.try_candidate(candidate)
                    }
                    None => false,
                };
                if !kept {
                    word += k;
                }
            }
        }
    }

    fn zero_chunks(&mut self) {
        for k in CHUNK_WORDS {
            let mut word = 0;
            while word * WORD_BYTES < self.current.len() && !self.spent() {
                if let Some(range) = self.chunk(word, k) {
                    let mut candidate = self.current.clone();
                    candidate[range].fill(0);
                    self.try_candidate(candidate);
                }
                word += k;
            }
        }
    }

    fn lower_words(&mut self) {
        for index in 0..self.words() {
            if index >= self.words() || self.spent() {
                return;
            }
            let value = word_at(&self.current, index);
            if value == 0 || self.try_word(index, 0) {
                continue;
            }
            // `passed` is a value known not to fail (0 just did not).
            let mut passed = 0;
            let mut value = value;
            while value / 2 > passed && !self.spent() {
                if self.try_word(index, value / 2) {
                    value = word_at(&self.current, index);
                } else {
                    passed = value / 2;
                    break;
                }
            }
            // Bisect between the last value that passed and the current one.
            while value > passed + 1 && !self.spent() {
                let mid = passed + (value - passed) / 2;
                if self.try_word(index, mid) {
                    value = word_at(&self.current, index);
                } else {
                    passed = mid;
                }
            }
        }
    }

    /// Tries the current tape with word `index` set to `value`.
    fn try_word(&mut self, index: usize, value: u32) -> bool {
        let mut candidate = self.current.clone();
        set_word(&mut candidate, index, value);
        self.try_candidate(candidate)
    }
}

/// Word `index` of `tape`, a partial word padded with zero bytes.
fn word_at(tape: &[u8], index: usize) -> u32 {
    let start = index * WORD_BYTES;
    let end = (start + WORD_BYTES).min(tape.len());
    let mut buf = [0u8; WORD_BYTES];
    buf[..end - start].copy_from_slice(&tape[start..end]);
    u32::from_le_bytes(buf)
}

/// Sets word `index` of `tape` to `value`. A partial word keeps its length:
/// callers only ever lower a word, so the value fits.
fn set_word(tape: &mut [u8], index: usize, value: u32) {
    let start = index * WORD_BYTES;
    let end = (start + WORD_BYTES).min(tape.len());
    let bytes = value.to_le_bytes();
    debug_assert!(bytes[end - start..].iter().all(|&b| b == 0));
    tape[start..end].copy_from_slice(&bytes[..end - start]);
}

/// The shrinking order: shorter first, then lexicographic over the words.
fn simpler(a: &[u8], b: &[u8]) -> Ordering {
    a.len().cmp(&b.len()).then_with(|| {
        let words = a.len().div_ceil(WORD_BYTES);
        (0..words)
            .map(|i| word_at(a, i).cmp(&word_at(b, i)))
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::world::choice::Choices;
    use proptest::prelude::*;

    fn words(tape: &[u8]) -> Vec<u32> {
        (0..tape.len().div_ceil(WORD_BYTES))
            .map(|i| word_at(tape, i))
            .collect()
    }

    fn tape_of(words: &[u32]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    /// Some word >= 1000 comes (anywhere) after a word equal to 7.
    fn big_after_seven(tape: &[u8]) -> bool {
        let mut seen_seven = false;
        for w in words(tape) {
            if seen_seven && w >= 1000 {
                return true;
            }
            seen_seven |= w == 7;
        }
        false
    }

    /// A long random tape with a 7 and a big word planted in it.
    fn planted_tape(seed: u64, len_words: usize) -> Vec<u8> {
        let mut choices = Choices::seeded(seed);
        let mut w: Vec<u32> = (0..len_words).map(|_| choices.below(u32::MAX)).collect();
        let seven = choices.below(len_words as u32 / 2) as usize;
        let big = seven + 1 + choices.below((len_words - seven - 1) as u32) as usize;
        w[seven] = 7;
        w[big] = 1000 + choices.below(1 << 30);
        tape_of(&w)
    }

    #[test]
    fn a_long_tape_shrinks_to_the_two_words_that_matter() {
        for seed in 0..20 {
            let tape = planted_tape(seed, 200 + seed as usize * 37);
            assert!(big_after_seven(&tape));
            let outcome = shrink(&tape, big_after_seven, 100_000);
            assert_eq!(words(&outcome.tape), vec![7, 1000], "seed {seed}");
            assert_eq!(outcome.tape, tape_of(&[7, 1000]));
            assert!(
                outcome.attempts < 100_000,
                "seed {seed} ran out of attempts"
            );
        }
    }

    #[test]
    fn a_trailing_partial_word_can_be_what_fails() {
        // The big word is only partly on the tape: 0x03e8 = 1000, padded.
        let mut tape = tape_of(&[1, 2, 7, 9]);
        tape.extend_from_slice(&[0xe9, 0x03]);
        let outcome = shrink(&tape, big_after_seven, 10_000);
        assert_eq!(outcome.tape, vec![7, 0, 0, 0, 0xe8, 0x03]);
    }

    #[test]
    fn the_empty_tape_is_the_end_when_everything_fails() {
        let tape = planted_tape(3, 100);
        let outcome = shrink(&tape, |_| true, 1_000);
        assert_eq!(outcome.tape, Vec::<u8>::new());
        assert_eq!(outcome.attempts, 1);
    }

    #[test]
    fn attempts_never_exceed_the_cap() {
        for cap in [0, 1, 2, 5, 17, 100, 1000] {
            let tape = planted_tape(cap as u64, 300);
            let mut calls = 0;
            let outcome = shrink(
                &tape,
                |t| {
                    calls += 1;
                    big_after_seven(t)
                },
                cap,
            );
            assert!(
                outcome.attempts <= cap,
                "cap {cap}: {} attempts",
                outcome.attempts
            );
            assert_eq!(
                calls,
                outcome.attempts + 1,
                "the precondition check is the one extra call"
            );
            assert!(big_after_seven(&outcome.tape), "the result must still fail");
            assert!(outcome.tape.len() <= tape.len());
        }
        let zero_cap = shrink(&tape_of(&[7, 5000]), big_after_seven, 0);
        assert_eq!(zero_cap.tape, tape_of(&[7, 5000]));
        assert_eq!(zero_cap.attempts, 0);
    }

    #[test]
    fn shrinking_is_deterministic() {
        let tape = planted_tape(99, 500);
        let run = |cap| {
            let mut seen = Vec::new();
            let outcome = shrink(
                &tape,
                |t| {
                    seen.push(t.to_vec());
                    big_after_seven(t)
                },
                cap,
            );
            (outcome, seen)
        };
        assert_eq!(run(100_000), run(100_000));
        assert_eq!(run(50), run(50));
    }

    /// A toy run of `TOY_STEPS` steps over a tape, reporting its structure
    /// as a simulated run does: each step reads a word whose value mod 4 is
    /// its kind, then `kind` more words. It fails when a step of kind 3
    /// whose first word after the kind is at least 500 follows a step of
    /// kind 2.
    fn toy(tape: &[u8]) -> Probe {
        const TOY_STEPS: usize = 300;
        let mut choices = Choices::from_tape(tape.to_vec());
        choices.keep_canonical();
        let (mut seen_two, mut fails) = (false, false);
        for _ in 0..TOY_STEPS {
            choices.mark_span();
            let kind = choices.below(4);
            let first = (0..kind).map(|_| choices.below(1 << 20)).next();
            for _ in 1..kind {
                choices.below(1 << 20);
            }
            fails |= seen_two && kind == 3 && first.is_some_and(|value| value >= 500);
            seen_two |= kind == 2;
        }
        let (_, spans, canonical) = choices.into_parts();
        Probe {
            fails,
            spans,
            canonical,
        }
    }

    fn nonzero(tape: &[u8]) -> usize {
        words(tape).iter().filter(|&&w| w != 0).count()
    }

    #[test]
    fn a_run_shrinks_by_its_steps_to_the_two_that_matter() {
        for seed in 0..10 {
            let mut choices = Choices::seeded(seed);
            let tape: Vec<u8> = loop {
                let tape: Vec<u8> = (0..600)
                    .flat_map(|_| choices.below(u32::MAX).to_le_bytes())
                    .collect();
                if toy(&tape).fails {
                    break tape;
                }
            };
            let outcome = try_shrink(&tape, toy, 5_000).expect("the tape fails");
            assert!(toy(&outcome.tape).fails);
            assert!(
                outcome.finished,
                "seed {seed}: {} attempts",
                outcome.attempts
            );
            // A kind-2 step (its two words zero) and a kind-3 step whose
            // first word is 500: the kind words and that one.
            assert_eq!(words(&outcome.tape), vec![2, 0, 0, 3, 500], "seed {seed}");
            assert!(nonzero(&outcome.tape) <= 3);
        }
    }

    #[test]
    fn a_search_cut_short_by_its_budget_says_it_did_not_finish() {
        let mut choices = Choices::seeded(5);
        let tape: Vec<u8> = loop {
            let tape: Vec<u8> = (0..600)
                .flat_map(|_| choices.below(u32::MAX).to_le_bytes())
                .collect();
            if toy(&tape).fails {
                break tape;
            }
        };
        let short = try_shrink(&tape, toy, 3).expect("the tape fails");
        assert_eq!(short.attempts, 3);
        assert!(!short.finished);
        let long = try_shrink(&tape, toy, 5_000).expect("the tape fails");
        assert!(long.finished);
        assert!(long.attempts < 5_000);
    }

    #[test]
    #[should_panic(expected = "must fail")]
    fn a_passing_tape_is_refused() {
        shrink(&tape_of(&[1, 2, 3]), big_after_seven, 100);
    }

    #[test]
    fn the_order_compares_words_not_bytes() {
        assert_eq!(simpler(&tape_of(&[1]), &tape_of(&[256])), Ordering::Less);
        assert_eq!(
            simpler(&tape_of(&[u32::MAX]), &tape_of(&[0, 0])),
            Ordering::Less
        );
        assert_eq!(
            simpler(&tape_of(&[3, 4]), &tape_of(&[3, 4])),
            Ordering::Equal
        );
    }

    proptest! {
        #[test]
        fn the_result_still_fails_and_is_no_bigger(
            tape in proptest::collection::vec(any::<u8>(), 0..120),
            threshold in 0u32..u32::MAX,
            cap in 0usize..300,
        ) {
            // Fails when some word is at least `threshold`.
            let fails = |t: &[u8]| words(t).iter().any(|&w| w >= threshold);
            prop_assume!(fails(&tape));
            let outcome = shrink(&tape, fails, cap);
            prop_assert!(fails(&outcome.tape));
            prop_assert!(outcome.attempts <= cap);
            prop_assert!(simpler(&outcome.tape, &tape) != Ordering::Greater);
        }
    }
}
