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
//! run starts on the tape (its *spans*), what kind of step each is (an
//! input, a fault or restart, or anything else), and the tape's canonical
//! form (each word lowered to the smallest that makes the same decision), so
//! the passes cut at a run's joints. It repeats these passes, in order,
//! until a whole round of them makes no progress (a local minimum) or the
//! budget ([`ShrinkBudget`]: a time, by default 60 s, and optionally a
//! number of attempts) is spent:
//!
//! 1. **cut steps**: bisect the shortest prefix of whole steps that still
//!    fails (what is cut reads zeros: the steps after it only deliver);
//! 2. **drop inputs**, then **drop faults**: delete whole input steps (the
//!    records then come at the liveness phase, with the simplest values),
//!    then whole fault and restart steps, as delta debugging does — all of
//!    them at once, then halves, quarters, … down to one at a time, from
//!    the last back;
//! 3. **drop steps**: from the last step back, delete runs of whole steps,
//!    doubling the run's length while deletions succeed and halving it when
//!    one fails — a crash, a clock advance or a commit goes with its step;
//! 4. **zero steps**: zero runs of whole steps the same way (the zeros
//!    replay as the simplest steps, deliveries to the first host, so the
//!    steps after them keep their words, and the world much of its timing,
//!    where a deletion moved both);
//! 5. **plain steps**: zero steps' words after their first (the action
//!    stays, its details become the simplest: the first host, the smallest
//!    clock step, the lowest value), over runs of steps that double and
//!    halve as in pass 3;
//! 6. **truncate** the tail word by word: cut half the words, a quarter, …;
//! 7. **delete** and **zero** aligned chunks of `4·k` bytes that hold a
//!    non-zero word, for k = 32, 16, 8, 4, 2, 1;
//! 8. **lower** single words: to 0, else halve while that keeps failing,
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
//! terminates, and the result always still fails. The search is
//! deterministic in its attempts: the same tape with a cap of `N` attempts
//! and no time limit gives the same result on every machine, which is how a
//! search stopped by its time is reproduced ([`ShrinkOutcome::attempts`]).

use std::cmp::Ordering;
use std::fmt;
use std::time::{Duration, Instant};

use crate::sim::world::choice::WORD_BYTES;
use crate::sim::world::StepKind;

/// How long shrinking may go on before it stops short of a local minimum:
/// a wall-clock time, a number of attempts (candidate tapes replayed), or
/// both (whichever runs out first).
///
/// The default is 60 s and no cap on attempts
/// ([`SimulationBuilder::shrink_time`](crate::sim::SimulationBuilder::shrink_time),
/// [`SimulationBuilder::shrink_attempts`](crate::sim::SimulationBuilder::shrink_attempts)):
/// a run that is slow to replay gets as long as a fast one, rather than a
/// budget of attempts that takes seconds on one scenario and minutes on
/// another. A time makes the result depend on the machine's speed; a cap
/// on attempts alone does not (shrinking is deterministic in its
/// attempts), so a report prints the attempts a search took and the
/// command that repeats exactly them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShrinkBudget {
    /// Wall-clock time for the whole search; `None`: no limit.
    pub time: Option<Duration>,
    /// At most this many candidate tapes; `None`: no limit.
    pub attempts: Option<usize>,
}

impl ShrinkBudget {
    /// The default time budget: 60 s.
    pub const DEFAULT_TIME: Duration = Duration::from_secs(60);

    /// A budget of `time` alone.
    pub fn time(time: Duration) -> ShrinkBudget {
        ShrinkBudget {
            time: Some(time),
            attempts: None,
        }
    }

    /// A budget of `attempts` alone: the same result on every machine.
    pub fn attempts(attempts: usize) -> ShrinkBudget {
        ShrinkBudget {
            time: None,
            attempts: Some(attempts),
        }
    }

    /// No limit: shrink until a local minimum.
    pub fn unlimited() -> ShrinkBudget {
        ShrinkBudget {
            time: None,
            attempts: None,
        }
    }
}

impl Default for ShrinkBudget {
    /// 60 s, no cap on attempts.
    fn default() -> Self {
        ShrinkBudget::time(ShrinkBudget::DEFAULT_TIME)
    }
}

impl From<usize> for ShrinkBudget {
    /// A cap of `attempts` and no time limit.
    fn from(attempts: usize) -> Self {
        ShrinkBudget::attempts(attempts)
    }
}

impl fmt::Display for ShrinkBudget {
    /// `60 s`, `2,000 attempts`, `60 s or 2,000 attempts`, `no limit`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.time, self.attempts) {
            (None, None) => write!(f, "no limit"),
            (Some(time), None) => write!(f, "{}", seconds(time)),
            (None, Some(attempts)) => write!(f, "{} attempts", thousands(attempts)),
            (Some(time), Some(attempts)) => {
                write!(f, "{} or {} attempts", seconds(time), thousands(attempts))
            }
        }
    }
}

/// A duration in seconds as a report prints it: `60 s`, `1.5 s`, `0.02 s`.
pub(crate) fn seconds(time: Duration) -> String {
    let secs = time.as_secs_f64();
    if time.subsec_nanos() == 0 || secs >= 10.0 {
        format!("{:.0} s", secs)
    } else if secs >= 0.1 {
        format!("{secs:.1} s")
    } else {
        format!("{secs:.2} s")
    }
}

/// `n` with a comma between thousands: `15,663`.
pub(crate) fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index) % 3 == 0 {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// Which limit of a [`ShrinkBudget`] stopped a search.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spent {
    /// Its wall-clock time ran out.
    Time,
    /// Its attempts ran out.
    Attempts,
}

/// What one replay of a candidate tape tells the shrinker.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Trial {
    /// Whether it still fails the same way.
    pub fails: bool,
    /// The word at which each step of the replay starts.
    pub spans: Vec<u32>,
    /// The kind of each step of `spans` (empty when unknown: every step is
    /// then [`StepKind::Other`]).
    pub kinds: Vec<StepKind>,
    /// The replay's canonical tape (empty when unknown).
    pub canonical: Vec<u8>,
}

#[cfg(test)]
impl Trial {
    /// A verdict on a tape without structure, for searches over plain words.
    pub(crate) fn plain(fails: bool) -> Trial {
        Trial {
            fails,
            ..Trial::default()
        }
    }
}

/// A shrunk tape and how many candidates were tried to find it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ShrinkOutcome {
    /// The simplest failing tape found; `still_fails(&tape)` is true.
    pub tape: Vec<u8>,
    /// How many candidates were passed to `still_fails` (not counting the
    /// initial check of the precondition); within the budget's attempts.
    /// A search with a cap of exactly this many attempts and no time limit
    /// ends on the same tape.
    pub attempts: usize,
    /// Whether the search ended at a local minimum (a whole round of passes
    /// found nothing simpler) rather than on its budget.
    pub finished: bool,
    /// The limit that stopped it, when it did not finish.
    pub spent: Option<Spent>,
    /// How long it took.
    pub elapsed: Duration,
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
    try_shrink(
        tape,
        |t| Trial::plain(still_fails(t)),
        ShrinkBudget::attempts(attempts_max),
    )
    .unwrap_or_else(|| {
        panic!(
            "shrink: the tape to shrink ({} bytes) must fail, but still_fails returned false for it",
            tape.len()
        )
    })
}

/// [`shrink`] over replays that report their structure ([`Trial`]) within
/// `budget`, or `None` when `trial(tape)` does not fail: a failure that
/// does not fail again when replayed (a sign the logic is not a pure
/// function, S4) has nothing to shrink. The time budget counts from the
/// call, the precondition's replay included.
pub(crate) fn try_shrink(
    tape: &[u8],
    mut trial: impl FnMut(&[u8]) -> Trial,
    budget: ShrinkBudget,
) -> Option<ShrinkOutcome> {
    let began = Instant::now();
    let first = trial(tape);
    if !first.fails {
        return None;
    }
    let mut shrinker = Shrinker {
        current: tape.to_vec(),
        spans: Vec::new(),
        kinds: Vec::new(),
        attempts: 0,
        attempts_max: budget.attempts.unwrap_or(usize::MAX),
        deadline: budget.time.map(|time| began + time),
        spent: None,
        trial: &mut trial,
    };
    shrinker.learn(first);
    loop {
        let before = shrinker.current.clone();
        shrinker.cut_steps();
        shrinker.drop_kind(StepKind::Input);
        shrinker.drop_kind(StepKind::Fault);
        shrinker.drop_steps();
        shrinker.zero_steps();
        shrinker.plain_steps();
        shrinker.truncate();
        shrinker.delete_chunks();
        shrinker.zero_chunks();
        shrinker.lower_words();
        if shrinker.current == before || shrinker.spent.is_some() {
            break;
        }
    }
    Some(ShrinkOutcome {
        tape: shrinker.current,
        attempts: shrinker.attempts,
        finished: shrinker.spent.is_none(),
        spent: shrinker.spent,
        elapsed: began.elapsed(),
    })
}

const CHUNK_WORDS: [usize; 6] = [32, 16, 8, 4, 2, 1];

struct Shrinker<'a, F: FnMut(&[u8]) -> Trial> {
    current: Vec<u8>,
    /// Where each step of the current tape's run starts, in words, within
    /// the tape (steps that start past its end read only zeros).
    spans: Vec<usize>,
    /// The kind of each step of `spans`.
    kinds: Vec<StepKind>,
    attempts: usize,
    attempts_max: usize,
    /// When the time budget runs out.
    deadline: Option<Instant>,
    /// The limit that left some candidate untried.
    spent: Option<Spent>,
    trial: &'a mut F,
}

impl<F: FnMut(&[u8]) -> Trial> Shrinker<'_, F> {
    fn spent(&mut self) -> bool {
        if self.spent.is_none() {
            if self.attempts >= self.attempts_max {
                self.spent = Some(Spent::Attempts);
            } else if self
                .deadline
                .is_some_and(|deadline| Instant::now() >= deadline)
            {
                self.spent = Some(Spent::Time);
            }
        }
        self.spent.is_some()
    }

    /// Words in the current tape, a trailing partial word included.
    fn words(&self) -> usize {
        self.current.len().div_ceil(WORD_BYTES)
    }

    /// Takes in what the replay of the (new) current tape showed: its
    /// steps, and its canonical form when that is simpler.
    fn learn(&mut self, trial: Trial) {
        if !trial.canonical.is_empty() {
            let mut canonical = trial.canonical;
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
        self.spans.clear();
        self.kinds.clear();
        for (index, &word) in trial.spans.iter().enumerate() {
            let word = word as usize;
            if word >= words {
                break;
            }
            let kind = trial.kinds.get(index).copied().unwrap_or_default();
            // A step that drew nothing shares its start with the next: the
            // later one is the step those words belong to.
            if self.spans.last() == Some(&word) {
                *self.kinds.last_mut().expect("kinds follow spans") = kind;
            } else {
                self.spans.push(word);
                self.kinds.push(kind);
            }
        }
    }

    /// Tries `candidate`; keeps it if it is simpler and still fails.
    fn try_candidate(&mut self, candidate: Vec<u8>) -> bool {
        if simpler(&candidate, &self.current) != Ordering::Less || self.spent() {
            return false;
        }
        self.attempts += 1;
        let trial = (self.trial)(&candidate);
        if trial.fails {
            self.current = candidate;
            self.learn(trial);
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

    /// The current tape without the words of the steps `steps` (indices in
    /// ascending order).
    fn without_steps(&self, steps: &[usize]) -> Vec<u8> {
        let len = self.current.len();
        let mut candidate = self.current.clone();
        for &step in steps.iter().rev() {
            let words = self.step_words(step);
            candidate.drain((words.start * WORD_BYTES).min(len)..(words.end * WORD_BYTES).min(len));
        }
        candidate
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

    /// Deletes whole steps of `kind`, delta debugging's way: all of them,
    /// then groups of half as many, and so on down to one, each level
    /// walking from the last group back. A deletion changes the run only
    /// from its first deleted step on, so the steps before a group keep
    /// their places.
    fn drop_kind(&mut self, kind: StepKind) {
        let of_kind = |shrinker: &Self| -> Vec<usize> {
            (0..shrinker.spans.len())
                .filter(|&index| shrinker.kinds[index] == kind)
                .collect()
        };
        let mut size = of_kind(self).len();
        while size >= 1 && !self.spent() {
            // `end`: how many of the steps of this kind, counted from the
            // first, are still to be tried at this size.
            let mut end = of_kind(self).len();
            while end > 0 && !self.spent() {
                let steps = of_kind(self);
                let end_now = end.min(steps.len());
                let start = end_now.saturating_sub(size);
                if start == end_now {
                    break;
                }
                let candidate = self.without_steps(&steps[start..end_now]);
                self.try_candidate(candidate);
                end = start;
            }
            size /= 2;
        }
    }

    /// Walks the steps from the last back in runs that double while `edit`
    /// succeeds and halve when it fails. `edit(shrinker, steps)` tries one
    /// candidate made from the steps in `steps`.
    fn step_runs(
        &mut self,
        mut edit: impl FnMut(&mut Self, std::ops::Range<usize>) -> Option<bool>,
    ) {
        // Walking back keeps the earlier steps' spans valid: a run is the
        // same up to the first word that changed.
        let mut end = self.spans.len();
        let mut run = 1;
        while end > 0 && !self.spent() {
            let run_now = run.min(end);
            match edit(self, end - run_now..end) {
                Some(true) => {
                    end -= run_now;
                    run = run_now * 2;
                }
                Some(false) if run_now > 1 => run = run_now / 2,
                // Failed on one step, or nothing to change in the run.
                _ => {
                    end -= run_now;
                    run = run_now.max(1);
                }
            }
            end = end.min(self.spans.len());
        }
    }

    fn drop_steps(&mut self) {
        self.step_runs(|shrinker, steps| {
            let steps: Vec<usize> = steps.collect();
            Some(shrinker.try_candidate(shrinker.without_steps(&steps)))
        });
    }

    /// Zeroes runs of whole steps: the zeros replay as the simplest
    /// steps (deliveries to the first host), as many as they last, so the
    /// steps after them keep their words where deleting the run would
    /// have moved the world's timing.
    fn zero_steps(&mut self) {
        self.step_runs(|shrinker, steps| {
            let len = shrinker.current.len();
            let bytes = (shrinker.spans[steps.start] * WORD_BYTES).min(len)
                ..(shrinker.step_words(steps.end - 1).end * WORD_BYTES).min(len);
            if !shrinker.current[bytes.clone()].iter().any(|&b| b != 0) {
                return None;
            }
            let mut candidate = shrinker.current.clone();
            candidate[bytes].fill(0);
            Some(shrinker.try_candidate(candidate))
        });
    }

    fn plain_steps(&mut self) {
        self.step_runs(|shrinker, steps| {
            let mut candidate = shrinker.current.clone();
            let mut changed = false;
            for step in steps {
                let words = shrinker.step_words(step);
                let bytes = ((words.start + 1) * WORD_BYTES).min(candidate.len())
                    ..(words.end * WORD_BYTES).min(candidate.len());
                if candidate[bytes.clone()].iter().any(|&b| b != 0) {
                    candidate[bytes].fill(0);
                    changed = true;
                }
            }
            changed.then(|| shrinker.try_candidate(candidate))
        });
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
            // Everything but the time it took.
            let outcome = ShrinkOutcome {
                elapsed: Duration::ZERO,
                ..outcome
            };
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
    fn toy(tape: &[u8]) -> Trial {
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
        Trial {
            fails,
            spans,
            kinds: Vec::new(),
            canonical,
        }
    }

    /// A toy run whose steps are inputs, faults and deliveries, reported
    /// with their kinds: each step reads a word whose value mod 3 is its
    /// kind (0 a delivery, 1 an input, 2 a fault), an input one more word,
    /// its record's value, a fault one more. It fails when an input of
    /// value 7 mod 64 comes before one of 9 mod 64, with no fault between.
    fn records(tape: &[u8]) -> (Trial, Vec<u32>) {
        const STEPS: usize = 400;
        let mut choices = Choices::from_tape(tape.to_vec());
        choices.keep_canonical();
        let mut kinds = Vec::new();
        let mut inputs = Vec::new();
        let (mut seven, mut fails) = (false, false);
        for _ in 0..STEPS {
            choices.mark_span();
            match choices.below(3) {
                1 => {
                    kinds.push(StepKind::Input);
                    let value = choices.below(64);
                    inputs.push(value);
                    fails |= seven && value == 9;
                    seven |= value == 7;
                }
                2 => {
                    kinds.push(StepKind::Fault);
                    choices.below(8);
                    seven = false;
                }
                _ => kinds.push(StepKind::Other),
            }
        }
        let (_, spans, canonical) = choices.into_parts();
        let trial = Trial {
            fails,
            spans,
            kinds,
            canonical,
        };
        (trial, inputs)
    }

    #[test]
    fn a_failure_that_needs_two_inputs_of_many_keeps_only_those_two() {
        for seed in 0..5 {
            let mut choices = Choices::seeded(seed);
            let tape: Vec<u8> = loop {
                let tape: Vec<u8> = (0..1_200)
                    .flat_map(|_| choices.below(u32::MAX).to_le_bytes())
                    .collect();
                if records(&tape).0.fails {
                    break tape;
                }
            };
            let (_, inputs_before) = records(&tape);
            assert!(inputs_before.len() > 50, "seed {seed}: {inputs_before:?}");
            let outcome = try_shrink(&tape, |t| records(t).0, ShrinkBudget::attempts(5_000))
                .expect("the tape fails");
            assert!(
                outcome.finished,
                "seed {seed}: {} attempts",
                outcome.attempts
            );
            let (trial, inputs) = records(&outcome.tape);
            assert!(trial.fails);
            // Every other input went: the run's inputs are the two the
            // failure needs (the rest of the run reads zeros: deliveries).
            assert_eq!(inputs, vec![7, 9], "seed {seed}");
            assert_eq!(words(&outcome.tape), vec![1, 7, 1, 9], "seed {seed}");
        }
    }

    #[test]
    fn dropping_inputs_comes_first_and_takes_few_attempts() {
        let mut choices = Choices::seeded(11);
        let tape: Vec<u8> = loop {
            let tape: Vec<u8> = (0..1_200)
                .flat_map(|_| choices.below(u32::MAX).to_le_bytes())
                .collect();
            if records(&tape).0.fails {
                break tape;
            }
        };
        let inputs_before = records(&tape).1.len();
        // Within a budget far below one attempt per input, the pass that
        // drops whole inputs has already removed most of them.
        let short = try_shrink(
            &tape,
            |t| records(t).0,
            ShrinkBudget::attempts(inputs_before / 3),
        )
        .expect("the tape fails");
        let (trial, inputs) = records(&short.tape);
        assert!(trial.fails);
        assert!(
            inputs.len() * 4 <= inputs_before,
            "{} of {inputs_before} inputs left after {} attempts",
            inputs.len(),
            short.attempts
        );
    }

    /// The first random tape of 600 words that fails the toy run.
    fn failing_toy_tape() -> Vec<u8> {
        let mut choices = Choices::seeded(5);
        loop {
            let tape: Vec<u8> = (0..600)
                .flat_map(|_| choices.below(u32::MAX).to_le_bytes())
                .collect();
            if toy(&tape).fails {
                return tape;
            }
        }
    }

    #[test]
    fn a_time_budget_stops_the_search_and_says_so() {
        let tape = failing_toy_tape();
        // Each replay takes 5 ms: 50 ms is about ten of them.
        let slow = |t: &[u8]| {
            std::thread::sleep(Duration::from_millis(5));
            toy(t)
        };
        let budget = ShrinkBudget::time(Duration::from_millis(50));
        let outcome = try_shrink(&tape, slow, budget).expect("the tape fails");
        assert!(!outcome.finished);
        assert_eq!(outcome.spent, Some(Spent::Time));
        assert!(
            outcome.attempts >= 1 && outcome.attempts <= 10,
            "{} attempts",
            outcome.attempts
        );
        assert!(
            outcome.elapsed < Duration::from_secs(2),
            "{:?}",
            outcome.elapsed
        );
        assert!(toy(&outcome.tape).fails);
        // The attempts it took, with no time limit, give the same tape.
        let again = try_shrink(&tape, toy, ShrinkBudget::attempts(outcome.attempts))
            .expect("the tape fails");
        assert_eq!(again.tape, outcome.tape);
        assert_eq!(again.spent, Some(Spent::Attempts));
    }

    #[test]
    fn a_budget_reads_as_its_limits() {
        assert_eq!(ShrinkBudget::default().to_string(), "60 s");
        assert_eq!(
            ShrinkBudget::attempts(15_663).to_string(),
            "15,663 attempts"
        );
        assert_eq!(
            ShrinkBudget {
                time: Some(Duration::from_millis(1_500)),
                attempts: Some(2_000),
            }
            .to_string(),
            "1.5 s or 2,000 attempts"
        );
        assert_eq!(ShrinkBudget::unlimited().to_string(), "no limit");
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(1_381), "1,381");
        assert_eq!(thousands(1_234_567), "1,234,567");
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
            let outcome =
                try_shrink(&tape, toy, ShrinkBudget::attempts(5_000)).expect("the tape fails");
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
        let tape = failing_toy_tape();
        let short = try_shrink(&tape, toy, ShrinkBudget::attempts(3)).expect("the tape fails");
        assert_eq!(short.attempts, 3);
        assert!(!short.finished);
        let long = try_shrink(&tape, toy, ShrinkBudget::attempts(5_000)).expect("the tape fails");
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
