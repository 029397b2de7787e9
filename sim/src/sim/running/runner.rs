//! Many seeds from `cargo test`: [`Simulation::check`] runs a simulation's
//! seeds on every core and, on a failure, panics with the seed, the shrunk
//! story and a line that replays exactly that run, writes its timeline
//! under `target/`, and keeps the shrunk tape in a regressions file next to
//! the test, replayed first on later runs (proptest's habit).
//!
//! The environment steers it:
//!
//! * `PARSLEY_SIM_REPLAY=seed=N` or `PARSLEY_SIM_REPLAY=tape=HEX` runs only
//!   that seed or tape and prints its story;
//! * `PARSLEY_SIM_SEEDS=N` runs `N` seeds from the simulation's first, or
//!   `PARSLEY_SIM_SEEDS=A..B` those seeds;
//! * `PARSLEY_SIM_PARTITION=I/N` runs the `I`-th of `N` slices of the seeds
//!   (1-based, as cargo-nextest's `--partition count:I/N`), so a CI matrix
//!   can split millions of seeds across machines;
//! * `PARSLEY_SIM_JOBS=N` sets the worker threads (default: every core);
//! * `PARSLEY_SIM_SHRINK_SECONDS=S` and `PARSLEY_SIM_SHRINK_ATTEMPTS=N` set
//!   the shrink budget's time (`0`: no limit) and attempts (default: the
//!   simulation's, 60 s and no cap:
//!   [`SimulationBuilder::shrink_time`](crate::sim::SimulationBuilder::shrink_time),
//!   [`SimulationBuilder::shrink_attempts`](crate::sim::SimulationBuilder::shrink_attempts)).

use std::fmt::Write as _;
use std::ops::Range;
use std::panic::Location;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::sim::checker::Finding;
use crate::sim::checker::Invariant;
use crate::sim::checker::NotJudged;
use crate::sim::report;
use crate::sim::report::cause::Cause;
use crate::sim::report::coverage;
use crate::sim::report::horizon;
use crate::sim::report::outcome::RunOutcome;
use crate::sim::report::outliers::{self, Outlier};
use crate::sim::report::shrink::{ShrinkBudget, Spent};
use crate::sim::report::timeline::{render_html, stamps_in, tick_topics};
use crate::sim::running::pool;
use crate::sim::running::purity::divergence;
use crate::sim::running::simulation::{Regressions, Simulation};
use crate::sim::world::stats::Stats;
use crate::sim::world::tape;

/// One seed in this many (by index) runs twice even when it passes, to
/// check that runs are deterministic and the logic pure (I9, S4).
const PURITY_SAMPLE: u64 = 16;

/// Added to a seed to pick the run that disturbs shared state before the
/// seed runs again.
const DISTURBING_SEED: u64 = 0x9e37_79b9_7f4a_7c15;

/// How many times a replay on a shared application is repeated to look
/// for impure logic: a fold wrong once in a thousand calls needs a
/// thousand calls in the replaying process before it shows.
const REPLAY_ROUNDS: u64 = 64;

/// How many violations of one cause on one stage a report lists.
const LISTED_PER_CAUSE: usize = 3;

/// What [`Simulation::check_seeds`] found.
#[derive(Debug)]
pub struct Summary {
    /// The seeds run.
    pub seeds: u64,
    /// Regression tapes replayed before the seeds.
    pub regressions: u64,
    /// Counters over every run (`held_max` is the largest).
    pub stats: Stats,
    /// Each "sometimes" mark with the number of runs that reached it.
    pub reached: Vec<(String, u64)>,
    /// The failure, written up, if any run failed.
    pub failure: Option<String>,
    /// The seeds whose runs took far more steps or deliveries than the
    /// average, the largest first (at most three).
    pub outliers: Vec<Outlier>,
    /// Regression tapes skipped as stale (recorded against another build of
    /// the app or its settings), each as `file:line`.
    pub stale_regressions: Vec<String>,
    /// When the seeds' inputs spanned, on average, less simulated time than
    /// the application's longest horizon (a window and its grace, a time to
    /// live, a tick interval): a note saying so, with the knobs to raise.
    pub short_inputs: Option<String>,
    /// What the checker could not judge, over every run, one note per
    /// stage and reason, its records summed ([`NotJudged`]).
    pub not_judged: Vec<NotJudged>,
}

impl Summary {
    /// The marks no run reached.
    pub fn never_reached(&self) -> Vec<&str> {
        self.reached
            .iter()
            .filter(|(_, count)| *count == 0)
            .map(|(name, _)| name.as_str())
            .collect()
    }
}

/// Where a check was called from, for regression files and replay lines.
#[derive(Clone, Debug)]
struct Caller {
    /// The test's source file, as the compiler names it.
    file: &'static str,
    /// The test's name (libtest names each test's thread after it).
    test: Option<String>,
}

impl Simulation {
    /// Runs the simulation's seeds (see [`SimulationBuilder::seeds`] and the
    /// module docs for the environment) and panics, with the lowest failing
    /// seed shrunk, its story and a replay line, if any run breaks a rule
    /// or a property, or if a "sometimes" mark is never reached: one of
    /// the user's, or (from 20 seeds on) one of the library's that the
    /// application's shape and the faults can reach. It prints both kinds
    /// of marks with how often they were reached.
    ///
    /// [`SimulationBuilder::seeds`]: crate::sim::SimulationBuilder::seeds
    #[track_caller]
    pub fn check(&self) {
        let caller = Caller {
            file: Location::caller().file(),
            test: test_name(),
        };
        if let Ok(replay) = std::env::var("PARSLEY_SIM_REPLAY") {
            let summary = self.replay(&replay, &caller);
            if let Some(failure) = &summary.failure {
                panic!("{failure}");
            }
            // A replay line is printed for a run that failed: passing now
            // does not mean fixed.
            eprintln!(
                "{}: PARSLEY_SIM_REPLAY={replay} did not reproduce: the failure needs a \
                 condition this run lacks (a planted bug or a setting it ran with, state kept \
                 outside the application by an earlier test, or code changed since the line was \
                 printed); the replayed run broke no rule",
                self.name()
            );
            return;
        }
        let summary = self.check_with(&caller);
        let stale = stale_note(self.name(), &summary.stale_regressions);
        if let Some(failure) = &summary.failure {
            panic!("{failure}{stale}");
        }
        eprint!("{stale}");
        // The user's marks no run reached, then the library's that this
        // application and its faults can reach (judged from 20 seeds on).
        let library = coverage::library_marks(
            &summary.stats.marks,
            self.app(),
            self.settings(),
            &self.input_claims(),
        );
        let never: Vec<String> = summary
            .never_reached()
            .iter()
            .map(|name| format!("{name:?}"))
            .chain(
                coverage::unreached(&library, summary.seeds)
                    .iter()
                    .map(|mark| {
                        format!(
                            "the library's mark {:?}, which this application can reach ({})",
                            mark.name,
                            mark.reachable.as_deref().unwrap_or_default()
                        )
                    }),
            )
            .collect();
        if !never.is_empty() {
            panic!(
                "{}: {} seeds passed, but no run reached {}: the workload or the faults never exercise {}; {}. A seed, on average: {}",
                self.name(),
                summary.seeds,
                never.join(", "),
                if never.len() == 1 { "it" } else { "them" },
                report::raise_hint(self.settings()),
                report::seed_size(&summary.stats, summary.seeds)
            );
        }
        let outliers = outliers::note(&summary.outliers)
            .map(|note| format!("; {note}"))
            .unwrap_or_default();
        let user_marks = if summary.reached.is_empty() {
            String::new()
        } else {
            format!(
                "; your marks, runs reaching each: {}",
                summary
                    .reached
                    .iter()
                    .map(|(name, runs)| format!("{name:?} {runs}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        eprintln!(
            "{}: library marks, times reached: {}{user_marks}",
            self.name(),
            coverage::line(&library)
        );
        eprintln!(
            "{}: {} seeds passed ({} regressions replayed first; {} deliveries, {} aborts, {} crashes; a seed, on average: {}{outliers})",
            self.name(),
            summary.seeds,
            summary.regressions,
            summary.stats.deliveries,
            summary.stats.aborts,
            summary.stats.crashes,
            report::seed_size(&summary.stats, summary.seeds)
        );
        if let Some(note) = &summary.short_inputs {
            eprintln!("{}: {note}", self.name());
        }
        for note in &summary.not_judged {
            eprintln!("{}: {note}", self.name());
        }
    }

    /// Runs `seeds` (no environment, no regression file) and says what was
    /// found, without panicking: for tests of the harness itself and for
    /// runners of their own.
    pub fn check_seeds(&self, seeds: Range<u64>) -> Summary {
        self.run_many(Vec::new(), seeds.collect(), None)
    }

    /// The seeds of [`check`](Self::check), its regression tapes first (a
    /// replay is `check`'s own branch).
    fn check_with(&self, caller: &Caller) -> Summary {
        let regressions = match self.regressions() {
            Regressions::BesideTheTest => regressions_file(caller.file),
            Regressions::File(path) => Some(path.clone()),
            Regressions::Off => None,
        };
        let kept = regressions
            .as_deref()
            .map(|path| read_regressions(path, caller.test.as_deref(), self.build_fingerprint()))
            .unwrap_or_default();
        let tapes = kept.tapes;
        let seeds = match seeds_from_env(self.seeds()) {
            Ok(seeds) => seeds,
            Err(message) => panic!("{message}"),
        };
        let seeds = match partition_from_env(seeds) {
            Ok(seeds) => seeds,
            Err(message) => panic!("{message}"),
        };
        let context = Context {
            caller,
            regressions: regressions.as_deref(),
        };
        let mut summary = self.run_many(tapes, seeds, Some(&context));
        summary.stale_regressions = kept.stale;
        summary
    }

    /// Runs the regression tapes, then the seeds on every core; the lowest
    /// failing seed (or the first failing tape) is shrunk and written up.
    fn run_many(&self, tapes: Vec<Vec<u8>>, seeds: Vec<u64>, context: Option<&Context>) -> Summary {
        let marks: Vec<String> = self.sometimes_names().map(str::to_string).collect();
        let mut summary = Summary {
            seeds: seeds.len() as u64,
            regressions: tapes.len() as u64,
            stats: Stats::default(),
            reached: marks.iter().map(|name| (name.clone(), 0)).collect(),
            failure: None,
            outliers: Vec::new(),
            stale_regressions: Vec::new(),
            short_inputs: None,
            not_judged: Vec::new(),
        };
        for tape in &tapes {
            let outcome = self.run_tape(tape);
            if !outcome.violations.is_empty() {
                summary.failure = Some(self.write_up(outcome, context, "a regression tape"));
                return summary;
            }
        }
        // The lowest failing seed's index: seeds past it need not run.
        let lowest_failure = AtomicU64::new(u64::MAX);
        let mut stats = Stats::default();
        let mut reached = vec![0u64; marks.len()];
        let mut failed: Option<(usize, RunOutcome)> = None;
        let mut not_judged = Vec::<NotJudged>::new();
        // Each seed's size (seed, steps, deliveries), for the outliers.
        let mut sizes: Vec<(u64, u64, u64)> = Vec::with_capacity(seeds.len());
        let run = |index: usize, seed: u64| {
            let mut outcome = self.run_seed(seed);
            // I9 and S4: a failing seed, and a sample of the passing ones,
            // must run the same way twice.
            if !outcome.violations.is_empty() || index as u64 % PURITY_SAMPLE == 0 {
                self.disturb(seed);
                let again = self.run_seed(seed);
                let what = format!("seed {seed}");
                if let Some(violation) = divergence(&what, &outcome, &again) {
                    outcome.violations.insert(0, violation);
                }
            }
            outcome
        };
        pool::for_each_seed(
            &seeds,
            pool::default_jobs(),
            &lowest_failure,
            run,
            |index, outcome| {
                stats.add(&outcome.stats);
                NotJudged::merge(&mut not_judged, &outcome.not_judged);
                sizes.push((seeds[index], outcome.stats.steps, outcome.stats.deliveries));
                for (count, yes) in reached.iter_mut().zip(&outcome.reached) {
                    *count += u64::from(*yes);
                }
                if !outcome.violations.is_empty() {
                    lowest_failure.fetch_min(index as u64, Ordering::Relaxed);
                    if failed.as_ref().is_none_or(|(at, _)| index < *at) {
                        failed = Some((index, outcome));
                    }
                }
            },
        );
        summary.stats = stats;
        summary.not_judged = not_judged;
        sizes.sort_unstable();
        summary.outliers = outliers::outliers(&sizes);
        if summary.seeds > 0 {
            summary.short_inputs = horizon::longest(self.app()).and_then(|horizon| {
                horizon::note(&horizon, &summary.stats, summary.seeds, self.settings())
            });
        }
        for ((_, total), count) in summary.reached.iter_mut().zip(reached) {
            *total = count;
        }
        if let Some((_, outcome)) = failed {
            let seed = outcome.seed.expect("seeded runs know their seed");
            summary.failure = Some(self.write_up(outcome, context, &format!("seed {seed}")));
        }
        summary
    }

    /// Before a run is repeated to check that it is deterministic: on a
    /// shared application ([`Simulation::builder`]), runs another seed, so
    /// that state the logic keeps outside Parsley is not where the first
    /// run found it and shows up as a difference between the two runs.
    fn disturb(&self, seed: u64) {
        if !self.app_per_run() {
            let _ = self.run_seed(seed.wrapping_add(DISTURBING_SEED));
        }
    }

    /// Shrinks a failing run, writes its timeline and regression line, and
    /// returns the report a test panics with. A tape is reported and kept
    /// only once it has failed again, with the same cause, when replayed;
    /// otherwise the run is reported as it failed, with its seed, what did
    /// not reproduce, and no tape. Logic found impure (S4) is not shrunk.
    fn write_up(&self, outcome: RunOutcome, context: Option<&Context>, what: &str) -> String {
        self.plant();
        let seed = outcome.seed;
        let Some(first) = outcome.violations.first() else {
            return format!("{}: {what} passed", self.name());
        };
        let cause = Cause::of(first);
        let mut out = String::new();
        let _ = writeln!(out, "{}: {what} fails {cause}", self.name());
        out.push_str(&report::grouped(&outcome.violations, LISTED_PER_CAUSE));
        // With an application per run, logic named impure by the checker
        // fails the same way on every replay: it shrinks like any failure.
        if cause == Cause::Harness(Finding::Impure) && !self.app_per_run() {
            let _ = writeln!(
                out,
                "\nA run of impure logic cannot be shrunk or kept as a tape: make the logic a \
                 pure function of its state and record (no state captured outside Parsley), or \
                 build the simulation with Simulation::builder_fn so that each run gets its own \
                 application.\n\nWhat happened (the first run):"
            );
            out.push_str(&report::story(&outcome, 40));
            self.replay_lines(&mut out, context, seed, None);
            if let Some(context) = context {
                if let Some(path) = write_timeline(self, &outcome, context.caller, seed) {
                    let _ = writeln!(out, "Timeline of the run: {}", path.display());
                }
            }
            return out;
        }
        let budget = shrink_budget_from_env(self.shrink_budget());
        let failure = self
            .shrink(outcome, budget)
            .expect("only failing runs are written up");
        if !failure.reproduces() {
            // The same choices gave another run: the logic is not pure.
            let mut out = String::new();
            let _ = writeln!(out, "{}: {what} fails {}", self.name(), Finding::Impure);
            let _ = writeln!(
                out,
                "  {}: {what} failed with {cause}, but not again when its choices were \
                 replayed ({}): the run depends on something besides its choices, such as \
                 state the logic keeps outside Parsley (docs/RULES.md#s4). No tape is shown \
                 or kept. As it failed:",
                Finding::Impure,
                report::not_reproduced(&failure)
            );
            out.push_str(&report::grouped(
                &failure.original.violations,
                LISTED_PER_CAUSE,
            ));
            let _ = writeln!(out, "\nWhat happened (as it failed):");
            out.push_str(&report::story(&failure.original, 40));
            self.replay_lines(&mut out, context, seed, None);
            if let Some(context) = context {
                if let Some(path) = write_timeline(self, &failure.original, context.caller, seed) {
                    let _ = writeln!(out, "Timeline of the run: {}", path.display());
                }
            }
            return out;
        }
        let _ = writeln!(out, "\n{}; it fails:", report::shrink_line(&failure));
        out.push_str(&report::grouped(&failure.shrunk.violations, 2));
        out.push_str(&report::shrink_verdict(&failure));
        if !failure.finished {
            let command = self.test_command(context).map_or_else(
                || "call Simulation::shrink with a larger budget".to_string(),
                |command| {
                    // Four times the limit that ran out.
                    let more = match (failure.spent, budget.time) {
                        (Some(Spent::Time), Some(time)) => format!(
                            "PARSLEY_SIM_SHRINK_SECONDS={}",
                            time.as_secs().saturating_mul(4).max(1)
                        ),
                        _ => format!(
                            "PARSLEY_SIM_SHRINK_ATTEMPTS={}",
                            failure.attempts.saturating_mul(4).max(1)
                        ),
                    };
                    format!("{more} {command} (the kept tape is replayed first and shrunk further)")
                },
            );
            let _ = writeln!(out, "  To continue: {command}");
        }
        if matches!(cause, Cause::Rule(Invariant::I6 | Invariant::I7)) {
            let _ = writeln!(
                out,
                "\nThe committed state or output differs from what the stage's logic gives when \
                 the checker calls it again on the same state and record: either Parsley broke \
                 {cause}, or the logic is not a pure function of them (S4), e.g. it keeps state \
                 outside Parsley that tasks, calls or runs share (docs/RULES.md#s4)."
            );
        }
        let _ = writeln!(out, "\nWhat happened (shrunk):");
        out.push_str(&report::story(&failure.shrunk, 40));
        let hex = tape::to_hex(tape::trimmed(&failure.shrunk.tape));
        self.replay_lines(&mut out, context, seed, Some(&hex));
        if let Some(context) = context {
            if let Some(path) = write_timeline(self, &failure.shrunk, context.caller, seed) {
                let _ = writeln!(out, "Timeline of the shrunk run: {}", path.display());
            }
            if let Some(path) = context.regressions {
                let test = context.caller.test.as_deref();
                match append_regression(path, test, &hex, self.build_fingerprint(), &failure) {
                    Ok(()) => {
                        let _ = writeln!(
                            out,
                            "Kept in {} (replayed first from now on; commit it)",
                            path.display()
                        );
                    }
                    Err(error) => {
                        let _ = writeln!(
                            out,
                            "Could not keep the tape in {}: {error}",
                            path.display()
                        );
                    }
                }
            }
        }
        out
    }

    /// The lines that replay a failure from `cargo test`: its seed, and its
    /// (shrunk) tape when it has one that reproduces it.
    fn replay_lines(
        &self,
        out: &mut String,
        context: Option<&Context>,
        seed: Option<u64>,
        hex: Option<&str>,
    ) {
        let Some(context) = context else {
            if let Some(seed) = seed {
                let _ = writeln!(out, "\nReplay: run seed {seed} (Simulation::run_seed)");
            }
            return;
        };
        let command = self.test_command(Some(context)).unwrap_or_default();
        let _ = writeln!(out, "\nReplay:");
        if let Some(seed) = seed {
            let _ = writeln!(out, "  PARSLEY_SIM_REPLAY=seed={seed} {command}");
        }
        if let Some(hex) = hex {
            let _ = writeln!(out, "  PARSLEY_SIM_REPLAY=tape={hex} {command}");
        }
    }

    /// The `cargo test` line that runs the calling test again, when called
    /// from one.
    fn test_command(&self, context: Option<&Context>) -> Option<String> {
        let context = context?;
        let filter = context
            .caller
            .test
            .as_deref()
            // `--include-ignored`, so the line runs an `#[ignore]`d test too
            // (and changes nothing for one that is not).
            .map(|test| format!(" -- {test} --exact --include-ignored"))
            .unwrap_or_default();
        let package = std::env::var("CARGO_PKG_NAME").unwrap_or_else(|_| "PACKAGE".into());
        let target = test_target().map_or_else(String::new, |target| format!(" --test {target}"));
        Some(format!("cargo test -p {package}{target}{filter}"))
    }

    /// Runs `data` as a choice tape and panics, listing every violation, if
    /// the run breaks a rule or a property: the whole body of a cargo-fuzz
    /// target, whose bytes then spell interleavings, faults and inputs.
    /// Past the end of the tape every choice is the simplest one, so short
    /// inputs are short, fault-free runs.
    pub fn fuzz(&self, data: &[u8]) {
        let outcome = self.run_tape(data);
        if !outcome.violations.is_empty() {
            let listed: Vec<String> = outcome
                .violations
                .iter()
                .map(|violation| format!("  {violation}"))
                .collect();
            panic!(
                "{}: {} violations from a {}-byte tape:\n{}",
                self.name(),
                outcome.violations.len(),
                data.len(),
                listed.join("\n")
            );
        }
    }

    /// `PARSLEY_SIM_REPLAY`: one seed or tape, its story printed.
    fn replay(&self, replay: &str, caller: &Caller) -> Summary {
        let outcome = match replay.split_once('=') {
            Some(("seed", seed)) => match seed.trim().parse::<u64>() {
                Ok(seed) => self.run_seed(seed),
                Err(_) => panic!("PARSLEY_SIM_REPLAY=seed={seed}: {seed:?} is not a seed"),
            },
            Some(("tape", hex)) => match tape::from_hex(hex) {
                Ok(tape) => self.run_tape(&tape),
                Err(error) => panic!("PARSLEY_SIM_REPLAY=tape=…: not a hex tape: {error}"),
            },
            _ => panic!("PARSLEY_SIM_REPLAY={replay:?}: expected seed=N or tape=HEX"),
        };
        // The same choices must give the same run (I9, S4).
        // On a shared application the run is repeated a few more times:
        // state kept outside Parsley may need many calls to show (a fold
        // wrong once in a thousand calls).
        let mut outcome = outcome;
        let rounds = if !self.app_per_run() {
            REPLAY_ROUNDS
        } else {
            1
        };
        for round in 0..rounds {
            self.disturb(outcome.seed.unwrap_or(0).wrapping_add(round));
            let again = self.run_tape(&outcome.tape);
            if let Some(violation) = divergence(replay, &outcome, &again) {
                outcome.violations.insert(0, violation);
                break;
            }
        }
        eprintln!(
            "{}: replaying {replay}\n{}",
            self.name(),
            report::story(&outcome, 80)
        );
        let mut summary = Summary {
            seeds: 1,
            regressions: 0,
            stats: outcome.stats.clone(),
            reached: Vec::new(),
            failure: None,
            outliers: Vec::new(),
            stale_regressions: Vec::new(),
            short_inputs: None,
            not_judged: outcome.not_judged.clone(),
        };
        if !outcome.violations.is_empty() {
            let mut out = format!("{}: the replayed run fails\n", self.name());
            out.push_str(&report::grouped(&outcome.violations, LISTED_PER_CAUSE));
            if let Some(path) = write_timeline(self, &outcome, caller, outcome.seed) {
                let _ = writeln!(out, "Timeline: {}", path.display());
            }
            summary.failure = Some(out);
        }
        summary
    }
}

struct Context<'a> {
    caller: &'a Caller,
    regressions: Option<&'a Path>,
}

/// libtest runs each test on a thread named after it.
fn test_name() -> Option<String> {
    std::thread::current()
        .name()
        .filter(|name| *name != "main")
        .map(str::to_string)
}

/// The test binary's target name (`diamond` for `tests/diamond.rs`): its
/// file name without cargo's hash.
fn test_target() -> Option<String> {
    let exe = std::env::current_exe().ok()?;
    let stem = exe.file_stem()?.to_str()?;
    let (name, hash) = stem.rsplit_once('-')?;
    hash.chars()
        .all(|c| c.is_ascii_hexdigit())
        .then(|| name.to_string())
}

/// The test source file on disk: the compiler names it relative to the
/// workspace root, and tests run in their package's directory.
fn source_file(file: &str) -> Option<PathBuf> {
    let file = Path::new(file);
    if file.is_absolute() {
        return file.exists().then(|| file.to_path_buf());
    }
    let start = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::current_dir().ok())?;
    start
        .ancestors()
        .map(|dir| dir.join(file))
        .find(|candidate| candidate.exists())
}

/// `tests/diamond.rs` keeps its failing tapes in
/// `tests/sim-regressions/diamond.txt`. A check called from outside a
/// `tests` directory (a unit test in `src/`, an example) keeps them in the
/// crate's `tests/sim-regressions/`, named after its file: never in `src/`.
fn regressions_file(file: &str) -> Option<PathBuf> {
    let source = source_file(file)?;
    let stem = source.file_stem()?.to_str()?.to_string();
    let name = format!("{stem}.txt");
    let parent = source.parent()?;
    if parent.file_name().is_some_and(|dir| dir == "tests") {
        return Some(parent.join("sim-regressions").join(name));
    }
    let root = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .or_else(|| {
            source
                .ancestors()
                .find(|dir| dir.join("Cargo.toml").exists())
                .map(Path::to_path_buf)
        })?;
    Some(root.join("tests").join("sim-regressions").join(name))
}

/// The words for stale regression tapes, one line each; empty if none.
fn stale_note(name: &str, stale: &[String]) -> String {
    stale
        .iter()
        .map(|line| {
            format!(
                "\n{name}: {line}: stale regression tape, recorded against another build of the \
                 app or its settings (another topology, knobs or tape format), so its choices mean \
                 another run: skipped, not replayed; delete the line, or record it again\n"
            )
        })
        .collect()
}

/// The tape format: a regression line records it in its build, so a tape
/// of an older format is stale rather than misread.
const TAPE_FORMAT: u32 = 1;

impl Simulation {
    /// What a tape's choices mean: the app's shape ([`parsley::App::shape`]),
    /// every knob, and the tape format, fingerprinted. A regression tape
    /// recorded under another is stale.
    pub(crate) fn build_fingerprint(&self) -> u64 {
        parsley::fingerprint(&format!(
            "tape format {TAPE_FORMAT}\n{}settings {:?}\n",
            self.app().shape(),
            self.settings()
        ))
    }
}

/// What a regression file keeps for a test.
#[derive(Debug, Default, PartialEq)]
struct Kept {
    /// The tapes to replay first.
    tapes: Vec<Vec<u8>>,
    /// The `file:line` of each tape recorded against another build.
    stale: Vec<String>,
}

/// The tapes kept for `test` (lines `<test> <hex tape> build=<hex>`; `#`
/// comments). A line whose build is not `build` is stale; a line with no
/// build (written before builds were recorded) is replayed.
///
/// # Panics
///
/// On a tape that is not hex, naming the file and line.
fn read_regressions(path: &Path, test: Option<&str>, build: u64) -> Kept {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Kept::default();
    };
    let mut kept = Kept::default();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        // The empty tape (the simplest run) is the test name alone.
        let mut words = line.split(' ');
        let name = words.next().unwrap_or_default();
        if test.is_some_and(|test| test != name) {
            continue;
        }
        let (mut hex, mut recorded) = ("", None);
        for word in words {
            match word.strip_prefix("build=") {
                Some(build) => recorded = Some(build),
                None => hex = word,
            }
        }
        if recorded.is_some_and(|recorded| recorded != format!("{build:016x}")) {
            kept.stale
                .push(format!("{}:{}", path.display(), number + 1));
            continue;
        }
        match tape::from_hex(hex) {
            Ok(tape) => kept.tapes.push(tape),
            Err(error) => panic!("{}:{}: not a hex tape: {error}", path.display(), number + 1),
        }
    }
    kept
}

fn append_regression(
    path: &Path,
    test: Option<&str>,
    hex: &str,
    build: u64,
    failure: &report::Failure,
) -> std::io::Result<()> {
    use std::io::Write;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let fresh = !path.exists();
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    if fresh {
        writeln!(
            file,
            "# Shrunk choice tapes of failed simulation runs, one per line as\n\
             # `<test name> <hex tape> build=<the app's and settings' fingerprint>`.\n\
             # Each is replayed before the seeds of its test while its build is the\n\
             # test's; another build's is reported stale and skipped. Commit this\n\
             # file; delete a line once its bug is fixed for good."
        )?;
    }
    writeln!(file, "# {}", failure.invariant)?;
    writeln!(file, "{} {hex} build={build:016x}", test.unwrap_or("-"))
}

/// Writes the run's timeline to `target/parsley-sim/`; `None` if it cannot.
fn write_timeline(
    simulation: &Simulation,
    outcome: &RunOutcome,
    caller: &Caller,
    seed: Option<u64>,
) -> Option<PathBuf> {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .or_else(|| {
            // target/<profile>/deps/<test binary>
            let exe = std::env::current_exe().ok()?;
            Some(exe.parent()?.parent()?.parent()?.to_path_buf())
        })?;
    let dir = target.join("parsley-sim");
    std::fs::create_dir_all(&dir).ok()?;
    let test = caller
        .test
        .as_deref()
        .unwrap_or(simulation.name())
        .replace("::", "-");
    let which = seed.map_or_else(|| "tape".to_string(), |seed| format!("seed-{seed}"));
    let path = dir.join(format!("{test}-{which}.html"));
    let title = format!("{}: {which}", simulation.name());
    let stamps = stamps_in(&outcome.cluster);
    let html = render_html(
        &outcome.trace,
        &title,
        &outcome.violations,
        Some(&stamps),
        &tick_topics(simulation.app()),
    );
    std::fs::write(&path, html).ok()?;
    Some(path)
}

/// The shrink budget for this run: `budget`, with its attempts set by
/// `PARSLEY_SIM_SHRINK_ATTEMPTS=N` and its time by
/// `PARSLEY_SIM_SHRINK_SECONDS=S` (`0`: no time limit).
fn shrink_budget_from_env(mut budget: ShrinkBudget) -> ShrinkBudget {
    if let Ok(text) = std::env::var("PARSLEY_SIM_SHRINK_ATTEMPTS") {
        match text.trim().parse() {
            Ok(attempts) => budget.attempts = Some(attempts),
            Err(_) => {
                panic!("PARSLEY_SIM_SHRINK_ATTEMPTS={text:?}: expected a number of attempts")
            }
        }
    }
    if let Ok(text) = std::env::var("PARSLEY_SIM_SHRINK_SECONDS") {
        match text.trim().parse::<u64>() {
            Ok(0) => budget.time = None,
            Ok(secs) => budget.time = Some(std::time::Duration::from_secs(secs)),
            Err(_) => panic!(
                "PARSLEY_SIM_SHRINK_SECONDS={text:?}: expected a whole number of seconds (0: no limit)"
            ),
        }
    }
    budget
}

/// `PARSLEY_SIM_SEEDS`: a count from the first seed, or a range `A..B`.
fn seeds_from_env(default: Range<u64>) -> Result<Range<u64>, String> {
    let Ok(text) = std::env::var("PARSLEY_SIM_SEEDS") else {
        return Ok(default);
    };
    let bad =
        || format!("PARSLEY_SIM_SEEDS={text:?}: expected a count (2000) or a range (0..2000)");
    match text.split_once("..") {
        Some((start, end)) => {
            let start: u64 = start.trim().parse().map_err(|_| bad())?;
            let end: u64 = end.trim().parse().map_err(|_| bad())?;
            if start >= end {
                return Err(bad());
            }
            Ok(start..end)
        }
        None => {
            let count: u64 = text.trim().parse().map_err(|_| bad())?;
            if count == 0 {
                return Err(bad());
            }
            Ok(default.start..default.start.saturating_add(count))
        }
    }
}

/// `PARSLEY_SIM_PARTITION=I/N`: every `N`-th seed from the `I`-th (1-based).
fn partition_from_env(seeds: Range<u64>) -> Result<Vec<u64>, String> {
    let Ok(text) = std::env::var("PARSLEY_SIM_PARTITION") else {
        return Ok(seeds.collect());
    };
    let (index, count) = parse_partition(&text)
        .ok_or_else(|| format!("PARSLEY_SIM_PARTITION={text:?}: expected I/N with 1 <= I <= N"))?;
    Ok(partition(seeds, index, count))
}

/// `I/N` with `1 <= I <= N`.
pub(crate) fn parse_partition(text: &str) -> Option<(u64, u64)> {
    let (index, count) = text.split_once('/')?;
    let index: u64 = index.trim().parse().ok()?;
    let count: u64 = count.trim().parse().ok()?;
    (1 <= index && index <= count).then_some((index, count))
}

/// The `index`-th (1-based) of `count` interleaved slices of `seeds`: the
/// slices are disjoint and together are every seed.
pub(crate) fn partition(seeds: Range<u64>, index: u64, count: u64) -> Vec<u64> {
    let start = seeds.start;
    seeds
        .filter(|seed| (seed - start) % count == index - 1)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_are_disjoint_and_cover_every_seed() {
        let mut all: Vec<u64> = (1..=3)
            .flat_map(|index| partition(10..20, index, 3))
            .collect();
        all.sort_unstable();
        assert_eq!(all, (10..20).collect::<Vec<_>>());
        assert_eq!(partition(10..20, 2, 3), vec![11, 14, 17]);
    }

    #[test]
    fn partition_text_is_checked() {
        assert_eq!(parse_partition("2/4"), Some((2, 4)));
        assert_eq!(parse_partition("0/4"), None);
        assert_eq!(parse_partition("5/4"), None);
        assert_eq!(parse_partition("x"), None);
    }

    #[test]
    fn regression_lines_are_filtered_by_test() {
        let dir =
            std::env::temp_dir().join(format!("parsley-sim-regressions-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.txt");
        std::fs::write(&path, "# comment\na::one 0001\nb::two ff\n").unwrap();
        assert_eq!(
            read_regressions(&path, Some("a::one"), 7).tapes,
            vec![vec![0, 1]]
        );
        assert_eq!(read_regressions(&path, None, 7).tapes.len(), 2);
        // A tape of another build is stale: named by file and line, not
        // replayed; one of this build is.
        std::fs::write(
            &path,
            format!("a::one 0001 build={:016x}\na::one 02 build={:016x}\n", 7, 8),
        )
        .unwrap();
        let kept = read_regressions(&path, Some("a::one"), 7);
        assert_eq!(kept.tapes, vec![vec![0, 1]]);
        assert_eq!(kept.stale, [format!("{}:2", path.display())]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
