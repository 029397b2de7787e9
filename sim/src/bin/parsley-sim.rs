//! `parsley-sim`: the command-line runner of the deterministic simulator
//! and its scenario files. It runs a scenario over a range of seeds, replays one
//! run (from a seed or a tape) and shrinks a failing one.
//!
//! Exit codes: 0 when every run passed, 1 when a run violated an invariant,
//! 2 for bad arguments, a bad scenario file or a file that cannot be used.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Instant;

use clap::{Args, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};
use parsley::mutation::Mutation;
use parsley_sim::sim::checker::{Invariant, Violation};
use parsley_sim::sim::report::{self, Failure};
use parsley_sim::sim::scenario::{self, Scenario, ScenarioError};
use parsley_sim::sim::world::Stats;
use parsley_sim::sim::{run, run_seed, timeline, Choices, RunOutcome};

/// Every record the simulator moves allocates; mimalloc is far cheaper at
/// that than the system allocator (BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "parsley-sim",
    version,
    about = "Runs Parsley's deterministic simulator over scenario files",
    after_help = "Exit codes: 0 all runs passed, 1 an invariant was violated, \
                  2 bad arguments or a bad scenario file.\n\n\
                  Examples:\n  \
                  parsley-sim run scenarios/balances.toml --seeds 0..200\n  \
                  parsley-sim replay scenarios/balances.toml --seed 3 --timeline run.html\n  \
                  parsley-sim shrink scenarios/fan-in.toml --seed 7 --tape-out seed7.tape"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run every seed of a range and print a summary; report the lowest failing seed, shrunk.
    Run(RunArgs),
    /// Replay one run (a seed or a tape) and print its story, stats, violations and trace hash.
    Replay(ReplayArgs),
    /// Shrink a failing seed to a short counterexample.
    Shrink(ShrinkArgs),
}

#[derive(Args)]
struct Common {
    /// The scenario file (TOML, see scenarios/README.md).
    scenario: PathBuf,
    /// Plant a bug (parsley::mutation) to show the checker catching it.
    /// Needs a binary built with `--features mutations`.
    #[arg(long, value_name = "NAME")]
    mutation: Option<String>,
}

#[derive(Args)]
struct RunArgs {
    #[command(flatten)]
    common: Common,
    /// Seeds to run, half-open: `0..200` runs seeds 0 to 199 [default: the scenario's `seeds`].
    #[arg(long, value_name = "A..B", value_parser = parse_seeds)]
    seeds: Option<Range<u64>>,
    /// Worker threads, each running whole seeds [default: available parallelism].
    #[arg(long, short, value_name = "N", value_parser = parse_jobs)]
    jobs: Option<u64>,
}

#[derive(Args)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["seed", "tape"])))]
struct ReplayArgs {
    #[command(flatten)]
    common: Common,
    /// The seed to replay.
    #[arg(long, value_name = "S")]
    seed: Option<u64>,
    /// Replay a hex tape file instead of a seed (as written by `shrink --tape-out`).
    #[arg(long, value_name = "FILE")]
    tape: Option<PathBuf>,
    /// Write a picture of the run (HTML with an inline SVG) to FILE.
    #[arg(long, value_name = "FILE")]
    timeline: Option<PathBuf>,
}

#[derive(Args)]
struct ShrinkArgs {
    #[command(flatten)]
    common: Common,
    /// The failing seed to shrink.
    #[arg(long, value_name = "S")]
    seed: u64,
    /// At most this many candidate tapes are tried.
    #[arg(long, value_name = "N", default_value_t = 2000)]
    attempts: usize,
    /// Write the shrunk tape as hex to FILE, for `replay --tape FILE`.
    #[arg(long, value_name = "FILE")]
    tape_out: Option<PathBuf>,
    /// Write a picture of the shrunk run (HTML with an inline SVG) to FILE.
    #[arg(long, value_name = "FILE")]
    timeline: Option<PathBuf>,
}

/// What makes the runner exit with code 2.
#[derive(Debug)]
struct CliError(String);

impl From<ScenarioError> for CliError {
    fn from(error: ScenarioError) -> Self {
        CliError(error.to_string())
    }
}

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Run(args) => run_seeds(args),
        Command::Replay(args) => replay(args),
        Command::Shrink(args) => shrink(args),
    };
    match result {
        Ok(true) => ExitCode::from(1),
        Ok(false) => ExitCode::SUCCESS,
        Err(CliError(message)) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}

/// A loaded scenario with the options every command shares.
struct Setup {
    path: String,
    scenario: Scenario,
    mutation: Option<Mutation>,
}

impl Setup {
    fn load(common: &Common) -> Result<Setup, CliError> {
        let mutation = resolve_mutation(common.mutation.as_deref())?;
        let scenario = scenario::load(&common.scenario)?;
        Ok(Setup {
            path: common.scenario.display().to_string(),
            scenario,
            mutation,
        })
    }

    /// Runs one seed on this thread, with the mutation planted.
    fn run_seed(&self, seed: u64) -> RunOutcome {
        plant(self.mutation);
        run_seed(&self.scenario, seed)
    }

    /// Shrinks a failing run on this thread (with the mutation planted)
    /// and prints its report. `None` when the run passed.
    fn shrink(&self, outcome: RunOutcome, attempts: usize) -> Option<Failure> {
        plant(self.mutation);
        let seed = outcome.seed;
        let what = seed.map_or_else(|| "the tape".to_string(), |seed| format!("seed {seed}"));
        eprintln!("shrinking {what} (up to {attempts} attempts)…");
        let failure = report::shrink_failure(&self.scenario, outcome, attempts)?;
        let mut replays = Vec::new();
        if let Some(seed) = seed {
            // Printed only once the seed has failed again, as the command
            // would run it: a line that does not reproduce misleads.
            if fails(&self.run_seed(seed), failure.invariant) {
                let seed = format!("{} --seed {seed}", self.path);
                replays.push(("Replay", self.command(&format!("replay {seed}"))));
                replays.push(("Shrink", self.command(&format!("shrink {seed}"))));
            } else {
                eprintln!("seed {seed} passed when run again (I9): no replay command printed");
            }
        }
        println!("{}", report::render(&self.path, &failure, &replays));
        Some(failure)
    }

    /// The command line that runs `args` again: with the planted bug, its
    /// `--mutation` flag and the feature that allows it.
    fn command(&self, args: &str) -> String {
        match self.mutation {
            Some(mutation) => format!(
                "cargo run -p parsley-sim --features mutations -- {args} --mutation {}",
                mutation.name()
            ),
            None => format!("cargo run -p parsley-sim -- {args}"),
        }
    }
}

/// Whether a run violates `invariant`.
fn fails(outcome: &RunOutcome, invariant: Invariant) -> bool {
    outcome
        .violations
        .iter()
        .any(|violation| violation.invariant == invariant)
}

// ---------------------------------------------------------------------------
// run

/// What a worker keeps of one seed's run.
struct SeedResult {
    seed: u64,
    stats: Stats,
    violations: Vec<Violation>,
}

fn run_seeds(args: RunArgs) -> Result<bool, CliError> {
    let setup = Setup::load(&args.common)?;
    let seeds = args.seeds.unwrap_or_else(|| setup.scenario.seeds.range());
    let count = seeds.end - seeds.start;
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get() as u64));
    let threads = jobs.min(count);
    let progress = progress_bar(count);
    let started = Instant::now();

    // Workers take the next seed from a shared counter and send back what
    // they keep; results are put back in seed order.
    let (next, end) = (AtomicU64::new(seeds.start), seeds.end);
    let mut results: Vec<Option<SeedResult>> = (0..count).map(|_| None).collect();
    std::thread::scope(|scope| {
        let (sender, receiver) = mpsc::channel();
        for _ in 0..threads {
            let (sender, next, setup) = (sender.clone(), &next, &setup);
            scope.spawn(move || loop {
                let seed = next.fetch_add(1, Ordering::Relaxed);
                if seed >= end {
                    break;
                }
                let outcome =
                    std::panic::catch_unwind(|| setup.run_seed(seed)).unwrap_or_else(|panic| {
                        // The replay command is printed once it has panicked again.
                        if std::panic::catch_unwind(|| setup.run_seed(seed)).is_err() {
                            let replay =
                                setup.command(&format!("replay {} --seed {seed}", setup.path));
                            eprintln!("seed {seed} panicked; replay it with: {replay}");
                        }
                        std::panic::resume_unwind(panic)
                    });
                let result = SeedResult {
                    seed,
                    stats: outcome.stats,
                    violations: outcome.violations,
                };
                if sender.send(result).is_err() {
                    break;
                }
            });
        }
        drop(sender);
        let mut failing = 0;
        for result in receiver {
            if !result.violations.is_empty() {
                failing += 1;
                progress.set_message(format!("{failing} failing"));
            }
            progress.inc(1);
            let index = (result.seed - seeds.start) as usize;
            results[index] = Some(result);
        }
    });
    progress.finish_and_clear();
    let elapsed = started.elapsed();
    let results: Vec<SeedResult> = results.into_iter().flatten().collect();

    let mut total = Stats::default();
    for result in &results {
        add_stats(&mut total, &result.stats);
    }
    let failing: Vec<&SeedResult> = results
        .iter()
        .filter(|result| !result.violations.is_empty())
        .collect();

    row(
        "scenario",
        format!("{} ({})", setup.scenario.name, setup.path),
    );
    if let Some(mutation) = setup.mutation {
        row("mutation", format!("{} (planted)", mutation.name()));
    }
    row(
        "seeds",
        format!("{}..{} ({count} seeds)", seeds.start, seeds.end),
    );
    print_stats(&total, "summed over seeds");
    row("violations", format!("{} failing seeds", failing.len()));
    if !failing.is_empty() {
        let listed: Vec<String> = failing
            .iter()
            .take(10)
            .map(|r| r.seed.to_string())
            .collect();
        let more = failing.len().saturating_sub(listed.len());
        let more = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        row("failing seeds", format!("{}{more}", listed.join(", ")));
    }
    let secs = elapsed.as_secs_f64();
    row(
        "wall time",
        format!(
            "{secs:.2} s ({:.1} seeds/s, {threads} thread{})",
            count as f64 / secs.max(1e-9),
            if threads == 1 { "" } else { "s" }
        ),
    );

    if let Some(first) = failing.first() {
        println!();
        setup.shrink(setup.run_seed(first.seed), 2000);
    }
    Ok(!failing.is_empty())
}

/// A progress bar on stderr, hidden when stderr is not a terminal.
fn progress_bar(count: u64) -> ProgressBar {
    use std::io::IsTerminal;
    let target = if std::io::stderr().is_terminal() {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    };
    let style = ProgressStyle::with_template(
        "{elapsed_precise} [{wide_bar}] {pos}/{len} seeds  {rate}  eta {eta}  {msg}",
    )
    .expect("a valid template")
    .with_key(
        "rate",
        |state: &ProgressState, out: &mut dyn std::fmt::Write| {
            let _ = write!(out, "{:.1} seeds/s", state.per_sec());
        },
    )
    .progress_chars("=> ");
    ProgressBar::with_draw_target(Some(count), target).with_style(style)
}

/// Parses a number of worker threads, at least one.
fn parse_jobs(text: &str) -> Result<u64, String> {
    match text.parse::<u64>() {
        Ok(0) => Err("at least one worker thread is needed".into()),
        Ok(jobs) => Ok(jobs),
        Err(e) => Err(format!("{text:?} is not a number of threads ({e})")),
    }
}

/// Parses a half-open seed range `A..B` with `A < B`.
fn parse_seeds(text: &str) -> Result<Range<u64>, String> {
    let Some((start, end)) = text.split_once("..") else {
        return Err(format!(
            "expected a half-open range A..B such as 0..200, got {text:?}"
        ));
    };
    let number = |part: &str, which: &str| {
        part.trim().parse::<u64>().map_err(|e| {
            format!("the {which} of {text:?} is not a seed ({e}); expected A..B such as 0..200")
        })
    };
    let (start, end) = (number(start, "start")?, number(end, "end")?);
    if end <= start {
        return Err(format!(
            "{start}..{end} holds no seed: the range is half-open, so the end must be greater than the start"
        ));
    }
    Ok(start..end)
}

// ---------------------------------------------------------------------------
// replay

fn replay(args: ReplayArgs) -> Result<bool, CliError> {
    let setup = Setup::load(&args.common)?;
    let (outcome, title) = match (&args.tape, args.seed) {
        (Some(path), _) => {
            let tape = read_tape(path)?;
            let what = format!("{} bytes of tape from {}", tape.len(), path.display());
            plant(setup.mutation);
            (run(&setup.scenario, Choices::from_tape(tape)), what)
        }
        (None, Some(seed)) => (setup.run_seed(seed), format!("seed {seed}")),
        (None, None) => unreachable!("clap requires --seed or --tape"),
    };
    let title = format!("{}: {title}", setup.scenario.name);
    println!("Replaying {title} ({})", setup.path);
    if let Some(mutation) = setup.mutation {
        println!("with the planted bug {}", mutation.name());
    }
    println!("\nWhat happened:");
    print!("{}", report::story(&outcome, 200));
    println!();
    row("quiesced", outcome.quiesced.to_string());
    print_stats(&outcome.stats, "this run");
    row("violations", outcome.violations.len().to_string());
    for violation in &outcome.violations {
        println!("  {violation}");
    }
    row("trace hash", format!("{:016x}", outcome.trace_hash));
    if let Some(path) = &args.timeline {
        write_timeline(path, &outcome, &title)?;
    }
    Ok(!outcome.violations.is_empty())
}

/// Writes the picture of a run, its violations marked and its records'
/// stamps in the tooltips.
fn write_timeline(path: &Path, outcome: &RunOutcome, title: &str) -> Result<(), CliError> {
    let stamps = timeline::stamps_in(&outcome.cluster);
    let html = timeline::render_html(&outcome.trace, title, &outcome.violations, Some(&stamps));
    write_file(path, &html)?;
    println!("timeline written to {}", path.display());
    Ok(())
}

// ---------------------------------------------------------------------------
// shrink

fn shrink(args: ShrinkArgs) -> Result<bool, CliError> {
    let setup = Setup::load(&args.common)?;
    let outcome = setup.run_seed(args.seed);
    let Some(failure) = setup.shrink(outcome, args.attempts) else {
        println!(
            "seed {} of {} passes: nothing to shrink",
            args.seed, setup.path
        );
        return Ok(false);
    };
    if let Some(path) = &args.tape_out {
        // A tape reads zeros past its end, so trailing zeros can go.
        let tape = &failure.shrunk.tape;
        let tape = &tape[..tape
            .iter()
            .rposition(|byte| *byte != 0)
            .map_or(0, |i| i + 1)];
        let mut text = format!(
            "# parsley-sim tape: {} seed {} shrunk, violates {}\n",
            setup.path, args.seed, failure.invariant
        );
        for line in tape.chunks(32) {
            text.extend(line.iter().map(|byte| format!("{byte:02x}")));
            text.push('\n');
        }
        write_file(path, &text)?;
        // The tape as written, replayed the way `replay --tape` will.
        plant(setup.mutation);
        let replayed = run(&setup.scenario, Choices::from_tape(tape.to_vec()));
        if fails(&replayed, failure.invariant) {
            let replay = setup.command(&format!("replay {} --tape {}", setup.path, path.display()));
            println!(
                "Shrunk tape ({} bytes) written to {}; replay it with:\n  {replay}",
                tape.len(),
                path.display()
            );
        } else {
            println!(
                "Shrunk tape ({} bytes) written to {}, but replaying it does not violate {} (I9)",
                tape.len(),
                path.display(),
                failure.invariant
            );
        }
    }
    if let Some(path) = &args.timeline {
        let title = format!("{}: seed {} shrunk", setup.scenario.name, args.seed);
        write_timeline(path, &failure.shrunk, &title)?;
    }
    Ok(true)
}

/// Reads a hex tape; whitespace and `#` comment lines are ignored.
fn read_tape(path: &Path) -> Result<Vec<u8>, CliError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError(format!("{}: cannot read the tape: {e}", path.display())))?;
    let digits: Vec<u8> = text
        .lines()
        .filter(|line| !line.trim_start().starts_with('#'))
        .flat_map(|line| line.bytes().filter(|byte| !byte.is_ascii_whitespace()))
        .collect();
    let bad = |why: &str| CliError(format!("{}: not a hex tape: {why}", path.display()));
    if digits.len() % 2 != 0 {
        return Err(bad("an odd number of hex digits"));
    }
    digits
        .chunks(2)
        .map(|pair| {
            std::str::from_utf8(pair)
                .ok()
                .and_then(|pair| u8::from_str_radix(pair, 16).ok())
                .ok_or_else(|| {
                    bad(&format!(
                        "{:?} is not a hex byte",
                        String::from_utf8_lossy(pair)
                    ))
                })
        })
        .collect()
}

fn write_file(path: &Path, text: &str) -> Result<(), CliError> {
    std::fs::write(path, text)
        .map_err(|e| CliError(format!("{}: cannot write: {e}", path.display())))
}

// ---------------------------------------------------------------------------
// mutations and output

/// Resolves `--mutation NAME`; without the `mutations` feature any name is
/// an error, so [`plant`] only ever plants with the feature on.
fn resolve_mutation(name: Option<&str>) -> Result<Option<Mutation>, CliError> {
    let Some(name) = name else {
        return Ok(None);
    };
    if !cfg!(feature = "mutations") {
        return Err(CliError(format!(
            "--mutation {name}: this binary was built without planted bugs; \
             build it with `--features mutations`, e.g. \
             cargo run -p parsley-sim --features mutations -- run SCENARIO --mutation {name}"
        )));
    }
    Mutation::from_name(name).map(Some).ok_or_else(|| {
        let names: Vec<&str> = Mutation::ALL.iter().map(|m| m.name()).collect();
        CliError(format!(
            "unknown mutation {name:?}; valid names: {}",
            names.join(", ")
        ))
    })
}

/// Plants `mutation` (or none) on the current thread.
fn plant(mutation: Option<Mutation>) {
    #[cfg(feature = "mutations")]
    parsley::mutation::set(mutation);
    #[cfg(not(feature = "mutations"))]
    debug_assert!(mutation.is_none(), "resolve_mutation refuses mutations");
}

/// Adds one run's counters to a total; `held_max` is a maximum.
fn add_stats(total: &mut Stats, stats: &Stats) {
    total.steps += stats.steps;
    total.inputs += stats.inputs;
    total.inputs_after_faults += stats.inputs_after_faults;
    total.deliveries += stats.deliveries;
    total.commits += stats.commits;
    total.aborts += stats.aborts;
    total.crashes += stats.crashes;
    total.fences += stats.fences;
    total.held_max = total.held_max.max(stats.held_max);
    total.marks.add(&stats.marks);
}

fn print_stats(stats: &Stats, marks_note: &str) {
    row("steps", stats.steps.to_string());
    row("inputs", stats.inputs.to_string());
    row(
        "  produced after faults stopped",
        stats.inputs_after_faults.to_string(),
    );
    row("deliveries", stats.deliveries.to_string());
    row("commits", stats.commits.to_string());
    row("aborts", stats.aborts.to_string());
    row("crashes", stats.crashes.to_string());
    row("fences", stats.fences.to_string());
    row("max held", stats.held_max.to_string());
    println!("sometimes ({marks_note}):");
    for (name, count) in stats.marks.named() {
        let never = if count == 0 { "  (never reached)" } else { "" };
        row(&format!("  {name}"), format!("{count}{never}"));
    }
}

fn row(label: &str, value: String) {
    println!("{label:<40} {value}");
}
