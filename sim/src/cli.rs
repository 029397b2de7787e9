//! The command-line runner of the simulator over a [`Registry`] of
//! topologies: it runs a scenario file over a range of seeds, replays one run
//! (from a seed or a tape) and shrinks a failing one. `parsley-sim` is this
//! runner over the example topologies; a user's own binary over their own
//! topologies is one line (feature `cli`):
//!
//! ```no_run
//! use parsley_sim::sim::Registry;
//!
//! fn main() -> std::process::ExitCode {
//!     let registry = Registry::new(); // .topology("mine", |settings| …)
//!     parsley_sim::cli::main(registry)
//! }
//! ```
//!
//! Exit codes: 0 when every run passed, 1 when a run violated an invariant,
//! 2 for bad arguments, a bad scenario file or a file that cannot be used.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::AtomicU64;
use std::time::Instant;

use clap::{Args, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};
use parsley::mutation::Mutation;
use parsley::App;

use crate::sim::checker::{Invariant, NotJudged, Violation};
use crate::sim::report::shrink::{ShrinkBudget, Spent};
use crate::sim::report::timeline;
use crate::sim::report::{self, Failure};
use crate::sim::running::pool;
use crate::sim::running::runner::{parse_partition, partition};
use crate::sim::running::scenario::{Scenario, ScenarioError};
use crate::sim::world::stats::Stats;
use crate::sim::world::tape;
use crate::sim::{
    Bounds, FaultKind, OrderStrategy, Registry, RegistryError, RunOutcome, Simulation, TimeStrategy,
};

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
                  parsley-sim shrink scenarios/fan-in.toml --seed 7 --tape-out seed7.tape\n  \
                  parsley-sim explore scenarios/chain.toml --inputs 2 --faults 1 --steps 12"
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
    /// Explore every schedule of a tiny run of the scenario's topology
    /// within a bound (the bounded exhaustive mode), pruned by the world's
    /// state; report the first violating schedule or that none exists
    /// within the bound.
    Explore(ExploreArgs),
    /// Merge the summaries of `run --summary-out` (the slices of a CI
    /// matrix) into one; exit 1 if any slice had a failing seed.
    Merge(MergeArgs),
}

#[derive(Args)]
struct MergeArgs {
    /// Summary files written by `run --summary-out`.
    #[arg(required = true)]
    summaries: Vec<PathBuf>,
}

/// What `run --summary-out` writes: enough to merge slices of one range.
#[derive(serde::Serialize, serde::Deserialize)]
struct SummaryFile {
    scenario: String,
    mutation: Option<String>,
    range: (u64, u64),
    partition: Option<(u64, u64)>,
    seeds: u64,
    failing: Vec<u64>,
    stats: Stats,
}

#[derive(Args)]
struct Common {
    /// The scenario file (TOML, see scenarios/README.md).
    scenario: PathBuf,
    /// Plant a bug (parsley::mutation) to show the checker catching it.
    /// Needs a binary built with parsley's `mutations` feature.
    #[arg(long, value_name = "NAME")]
    mutation: Option<String>,
    /// How the clock's advances and input timestamps are drawn, over the
    /// scenario's `clock.time`: `boundary` (aimed at pending deadlines) or
    /// `uniform`.
    #[arg(long, value_name = "STRATEGY", value_parser = parse_time)]
    time: Option<TimeStrategy>,
    /// Which task delivers next, over the scenario's `order`: `random`, or
    /// `pct` / `pct:DEPTH` (PCT priorities with DEPTH − 1 change points).
    #[arg(long, value_name = "STRATEGY", value_parser = parse_order)]
    order: Option<OrderStrategy>,
}

#[derive(Args)]
struct RunArgs {
    #[command(flatten)]
    common: Common,
    /// Seeds to run, half-open: `0..200` runs seeds 0 to 199 [default: the scenario's `seeds`].
    #[arg(long, value_name = "A..B", value_parser = parse_seeds)]
    seeds: Option<Range<u64>>,
    /// Run only the I-th of N interleaved slices of the seeds (1-based), to
    /// split a range across machines, as cargo-nextest's `--partition count:I/N`.
    #[arg(long, value_name = "I/N", value_parser = parse_partition_arg)]
    partition: Option<(u64, u64)>,
    /// Write the run's summary as JSON to FILE, for `merge`.
    #[arg(long, value_name = "FILE")]
    summary_out: Option<PathBuf>,
    /// Worker threads, each running whole seeds [default: PARSLEY_SIM_JOBS, else available parallelism].
    #[arg(long, short, value_name = "N", value_parser = parse_jobs)]
    jobs: Option<u64>,
}

#[derive(Args)]
struct ExploreArgs {
    #[command(flatten)]
    common: Common,
    /// Input records of the run.
    #[arg(long, value_name = "N", default_value_t = 2)]
    inputs: u64,
    /// Partitions of every topic.
    #[arg(long, value_name = "P", default_value_t = 1)]
    partitions: u32,
    /// Application instances.
    #[arg(long, value_name = "I", default_value_t = 1)]
    instances: u32,
    /// Distinct keys of the inputs.
    #[arg(long, value_name = "K", default_value_t = 1)]
    keys: u32,
    /// Faults a schedule may take, in all.
    #[arg(long, value_name = "C", default_value_t = 1)]
    faults: u32,
    /// Which faults, comma-separated: abort, commit-failure, crash, move,
    /// hanging, logic-error.
    #[arg(long, value_name = "KINDS", value_delimiter = ',', default_value = "abort,crash", value_parser = parse_fault_kind)]
    fault_kinds: Vec<FaultKind>,
    /// Steps of the safety phase.
    #[arg(long, value_name = "S", default_value_t = 12)]
    steps: u64,
    /// Explore drawn ranges (clock steps, input values, marker lags) at
    /// both ends, not only at the low one.
    #[arg(long)]
    range_ends: bool,
    /// Let input batches be written in input transactions.
    #[arg(long)]
    transactional: bool,
    /// Let transactions' markers be written late.
    #[arg(long)]
    marker_lag: bool,
    /// Stop after this many runs, without a verdict on the whole bound.
    #[arg(long, value_name = "RUNS", default_value_t = 1_000_000)]
    runs_max: u64,
    /// Search in a randomised depth-first order drawn from SEED, instead
    /// of simplest first: the same schedules, in another order.
    #[arg(long, value_name = "SEED")]
    shuffle: Option<u64>,
    /// Write the first violating schedule's tape to FILE.
    #[arg(long, value_name = "FILE")]
    tape_out: Option<PathBuf>,
    /// Replay a tape written by `--tape-out`, under the same bound, instead
    /// of exploring.
    #[arg(long, value_name = "FILE")]
    replay: Option<PathBuf>,
    /// Write a picture of the violating (or replayed) run to FILE.
    #[arg(long, value_name = "FILE")]
    timeline: Option<PathBuf>,
}

impl ExploreArgs {
    fn bounds(&self) -> Bounds {
        Bounds {
            inputs: self.inputs,
            partitions: self.partitions,
            instances: self.instances,
            keys: self.keys,
            faults: self.faults,
            kinds: self.fault_kinds.clone(),
            steps: self.steps,
            range_ends: self.range_ends,
            transactional: self.transactional,
            marker_lag: self.marker_lag,
            runs_max: self.runs_max,
            shuffle: self.shuffle,
        }
    }

    /// The bound as the flags that give it, for a printed command.
    fn flags(&self) -> String {
        let kinds: Vec<&str> = self.fault_kinds.iter().map(|kind| kind.name()).collect();
        let mut flags = format!(
            "--inputs {} --partitions {} --instances {} --keys {} --faults {} --fault-kinds {} --steps {}",
            self.inputs,
            self.partitions,
            self.instances,
            self.keys,
            self.faults,
            kinds.join(","),
            self.steps
        );
        for (on, flag) in [
            (self.range_ends, " --range-ends"),
            (self.transactional, " --transactional"),
            (self.marker_lag, " --marker-lag"),
        ] {
            if on {
                flags.push_str(flag);
            }
        }
        if let Some(seed) = self.shuffle {
            flags.push_str(&format!(" --shuffle {seed}"));
        }
        flags
    }
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
    /// At most this many candidate tapes are tried (default: no cap).
    /// Shrinking is deterministic in its attempts: with `--seconds 0` the
    /// same tape comes out on every machine.
    #[arg(long, value_name = "N")]
    attempts: Option<usize>,
    /// Shrinking stops after this many seconds of wall-clock time (0: no
    /// time limit).
    #[arg(long, value_name = "S", default_value_t = 60)]
    seconds: u64,
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

impl From<RegistryError> for CliError {
    fn from(error: RegistryError) -> Self {
        CliError(error.to_string())
    }
}

/// Runs the command line over `registry`'s topologies and returns the exit
/// code (see the module docs).
pub fn main(registry: Registry) -> ExitCode {
    let result = match Cli::parse().command {
        Command::Run(args) => run_seeds(&registry, args),
        Command::Replay(args) => replay(&registry, args),
        Command::Shrink(args) => shrink(&registry, args),
        Command::Explore(args) => explore(&registry, args),
        Command::Merge(args) => merge(args),
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
    simulation: Simulation,
    mutation: Option<Mutation>,
    /// `--time`, when given: replay lines carry it.
    time: Option<TimeStrategy>,
    /// `--order`, when given: replay lines carry it.
    order: Option<OrderStrategy>,
}

impl Setup {
    fn load(registry: &Registry, common: &Common) -> Result<Setup, CliError> {
        let mutation = resolve_mutation(common.mutation.as_deref())?;
        let mut scenario = registry.load(&common.scenario)?;
        if let Some(time) = common.time {
            scenario.settings.clock.time = time;
        }
        if let Some(order) = common.order {
            scenario.settings.order = order;
        }
        let simulation = registry
            .simulation_with(&scenario.topology, &scenario.settings)?
            .seeds(scenario.seeds.range())
            .name(scenario.name.clone())
            .planted(mutation)
            .build()
            .map_err(|error| CliError(format!("{}: {error}", common.scenario.display())))?;
        Ok(Setup {
            path: common.scenario.display().to_string(),
            scenario,
            simulation,
            mutation,
            time: common.time,
            order: common.order,
        })
    }

    /// Runs one seed on this thread, with the mutation planted.
    fn run_seed(&self, seed: u64) -> RunOutcome {
        self.simulation.run_seed(seed)
    }

    /// Shrinks a failing run on this thread (with the mutation planted)
    /// and prints its report. `None` when the run passed.
    fn shrink(&self, outcome: RunOutcome, budget: ShrinkBudget) -> Option<Failure> {
        let seed = outcome.seed;
        let what = seed.map_or_else(|| "the tape".to_string(), |seed| format!("seed {seed}"));
        eprintln!("shrinking {what} (budget {budget})…");
        let failure = self.simulation.shrink(outcome, budget)?;
        let mut replays = Vec::new();
        if let Some(seed) = seed {
            // Printed only once the seed has failed again, as the command
            // would run it: a line that does not reproduce misleads.
            if fails(&self.run_seed(seed), failure.invariant) {
                let seed = format!("{} --seed {seed}", self.path);
                replays.push(("Replay", self.command(&format!("replay {seed}"))));
                // Shrinking is deterministic in its attempts: the attempts
                // it took, with no time limit, give this tape again.
                replays.push((
                    "Shrink",
                    self.command(&format!(
                        "shrink {seed} --attempts {} --seconds 0",
                        failure.attempts
                    )),
                ));
                if !failure.finished {
                    // A larger budget goes the same way, then further.
                    let more = match (failure.spent, budget.time) {
                        (Some(Spent::Time), Some(time)) => {
                            format!("--seconds {}", time.as_secs().saturating_mul(4).max(1))
                        }
                        _ => format!(
                            "--attempts {} --seconds 0",
                            failure.attempts.saturating_mul(4).max(1)
                        ),
                    };
                    replays.push((
                        "Continue shrinking",
                        self.command(&format!("shrink {seed} {more}")),
                    ));
                }
            } else {
                eprintln!("seed {seed} passed when run again (I9): no replay command printed");
            }
        }
        println!("{}", report::render(&self.path, &failure, &replays));
        Some(failure)
    }

    /// The command line that runs `args` again: this very program (the
    /// `parsley-sim` binary, or a user's own runner), with the planted
    /// bug's `--mutation` flag.
    fn command(&self, args: &str) -> String {
        let program = std::env::args()
            .next()
            .unwrap_or_else(|| "parsley-sim".to_string());
        let mut command = format!("{program} {args}");
        if let Some(mutation) = self.mutation {
            command.push_str(&format!(" --mutation {}", mutation.name()));
        }
        if let Some(time) = self.time {
            command.push_str(&format!(" --time {}", time.name()));
        }
        if let Some(order) = self.order {
            command.push_str(&format!(" --order {}", order.name()));
        }
        command
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
    not_judged: Vec<NotJudged>,
}

fn run_seeds(registry: &Registry, args: RunArgs) -> Result<bool, CliError> {
    let setup = Setup::load(registry, &args.common)?;
    let range = args.seeds.unwrap_or_else(|| setup.scenario.seeds.range());
    let seeds: Vec<u64> = match args.partition {
        Some((index, count)) => partition(range.clone(), index, count),
        None => range.clone().collect(),
    };
    let count = seeds.len() as u64;
    let jobs = args.jobs.unwrap_or_else(|| pool::default_jobs() as u64);
    let threads = jobs.min(count);
    let progress = progress_bar(count);
    let started = Instant::now();

    // Results are put back in seed order.
    let mut results: Vec<Option<SeedResult>> = (0..count).map(|_| None).collect();
    let run = |_: usize, seed: u64| {
        // A run turns its own panics into violations; one that escapes
        // still fails only its seed, never the whole run.
        let run = std::panic::AssertUnwindSafe(|| setup.run_seed(seed));
        let outcome = std::panic::catch_unwind(run).map_err(|panic| {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Violation::found(
                crate::sim::checker::Finding::Panicked,
                Invariant::I8,
                0,
                &format!("seed {seed}: {message}"),
            )
        });
        let (stats, violations, not_judged) = match outcome {
            Ok(outcome) => (outcome.stats, outcome.violations, outcome.not_judged),
            Err(violation) => (Stats::default(), vec![violation], Vec::new()),
        };
        SeedResult {
            seed,
            stats,
            violations,
            not_judged,
        }
    };
    let mut failing = 0;
    let all = AtomicU64::new(u64::MAX);
    pool::for_each_seed(&seeds, threads as usize, &all, run, |index, result| {
        if !result.violations.is_empty() {
            failing += 1;
            progress.set_message(format!("{failing} failing"));
        }
        progress.inc(1);
        results[index] = Some(result);
    });
    progress.finish_and_clear();
    let elapsed = started.elapsed();
    let results: Vec<SeedResult> = results.into_iter().flatten().collect();

    let mut total = Stats::default();
    for result in &results {
        total.add(&result.stats);
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
    let slice = match args.partition {
        Some((index, of)) => format!(", slice {index}/{of}"),
        None => String::new(),
    };
    row(
        "seeds",
        format!("{}..{} ({count} seeds{slice})", range.start, range.end),
    );
    row(
        "time",
        match setup.scenario.settings.clock.time {
            TimeStrategy::Boundary => "boundary-seeking (advances and timestamps aim at deadlines)",
            TimeStrategy::Uniform => "uniform (advances drawn from clock.step_ms)",
        }
        .to_string(),
    );
    row(
        "order",
        match setup.scenario.settings.order {
            OrderStrategy::Random => "random draws".to_string(),
            OrderStrategy::Pct { depth } => format!(
                "PCT, depth {depth}: a bug needing at most {depth} orderings shows in a seed with probability at least 1/(n·k^{}), n the task incarnations, k = {} safety steps",
                depth - 1,
                setup.scenario.settings.budget.safety_steps
            ),
        },
    );
    let hint = report::raise_hint(&setup.scenario.settings);
    print_stats(
        &total,
        "summed over seeds",
        count,
        &hint,
        Some(&setup.simulation),
    );
    let sizes: Vec<(u64, u64, u64)> = results
        .iter()
        .map(|result| (result.seed, result.stats.steps, result.stats.deliveries))
        .collect();
    if let Some(note) = report::outliers::note(&report::outliers::outliers(&sizes)) {
        row("seeds worth a look", note);
    }
    if let Some(note) = report::horizon::longest(setup.simulation.app()).and_then(|horizon| {
        report::horizon::note(&horizon, &total, count, &setup.scenario.settings)
    }) {
        row("inputs too short", note);
    }
    let mut not_judged = Vec::new();
    for result in &results {
        NotJudged::merge(&mut not_judged, &result.not_judged);
    }
    for note in &not_judged {
        row("not judged", note.to_string());
    }
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

    if let Some(path) = &args.summary_out {
        let summary = SummaryFile {
            scenario: setup.scenario.name.clone(),
            mutation: setup.mutation.map(|m| m.name().to_string()),
            range: (range.start, range.end),
            partition: args.partition,
            seeds: count,
            failing: failing.iter().map(|result| result.seed).collect(),
            stats: total.clone(),
        };
        let json = serde_json::to_string_pretty(&summary).expect("a summary serializes");
        write_file(path, &json)?;
    }
    if let Some(first) = failing.first() {
        println!();
        setup.shrink(setup.run_seed(first.seed), ShrinkBudget::default());
    }
    Ok(!failing.is_empty())
}

// ---------------------------------------------------------------------------
// merge

fn merge(args: MergeArgs) -> Result<bool, CliError> {
    let mut summaries = Vec::new();
    for path in &args.summaries {
        let text = std::fs::read_to_string(path)
            .map_err(|e| CliError(format!("{}: cannot read: {e}", path.display())))?;
        let summary: SummaryFile = serde_json::from_str(&text)
            .map_err(|e| CliError(format!("{}: not a run summary: {e}", path.display())))?;
        summaries.push((path, summary));
    }
    let (first_path, first) = &summaries[0];
    for (path, summary) in &summaries[1..] {
        let same = summary.scenario == first.scenario
            && summary.mutation == first.mutation
            && summary.range == first.range;
        if !same {
            return Err(CliError(format!(
                "{} ran {} seeds {}..{} and {} ran {} seeds {}..{}: only slices of one run merge",
                first_path.display(),
                first.scenario,
                first.range.0,
                first.range.1,
                path.display(),
                summary.scenario,
                summary.range.0,
                summary.range.1
            )));
        }
    }
    let mut total = Stats::default();
    let mut failing = Vec::new();
    let mut seeds = 0;
    for (_, summary) in &summaries {
        total.add(&summary.stats);
        failing.extend(&summary.failing);
        seeds += summary.seeds;
    }
    failing.sort_unstable();
    let expected = first.range.1 - first.range.0;
    row("scenario", first.scenario.clone());
    if let Some(mutation) = &first.mutation {
        row("mutation", format!("{mutation} (planted)"));
    }
    let coverage = if seeds == expected {
        "every seed".to_string()
    } else {
        format!("{seeds} of {expected} seeds: a slice is missing or repeated")
    };
    row(
        "seeds",
        format!(
            "{}..{} ({coverage}, {} summaries)",
            first.range.0,
            first.range.1,
            summaries.len()
        ),
    );
    print_stats(&total, "summed over seeds", seeds, report::RAISE_HINT, None);
    row("violations", format!("{} failing seeds", failing.len()));
    if !failing.is_empty() {
        let listed: Vec<String> = failing.iter().take(10).map(u64::to_string).collect();
        row("failing seeds", listed.join(", "));
    }
    if seeds != expected {
        return Err(CliError(format!(
            "the summaries cover {seeds} of the {expected} seeds {}..{}",
            first.range.0, first.range.1
        )));
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

/// Parses `I/N` with `1 <= I <= N`.
fn parse_order(text: &str) -> Result<OrderStrategy, String> {
    OrderStrategy::from_name(text).ok_or_else(|| {
        format!("{text:?} is not an order strategy: use random, pct or pct:DEPTH (depth >= 1)")
    })
}

fn parse_fault_kind(text: &str) -> Result<FaultKind, String> {
    FaultKind::from_name(text).ok_or_else(|| {
        let names: Vec<&str> = FaultKind::ALL.iter().map(|kind| kind.name()).collect();
        format!(
            "unknown fault {text:?}: expected one of {}",
            names.join(", ")
        )
    })
}

fn parse_time(text: &str) -> Result<TimeStrategy, String> {
    TimeStrategy::from_name(text)
        .ok_or_else(|| format!("{text:?} is not a time strategy: use boundary or uniform"))
}

fn parse_partition_arg(text: &str) -> Result<(u64, u64), String> {
    parse_partition(text).ok_or_else(|| format!("expected I/N with 1 <= I <= N, got {text:?}"))
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

fn replay(registry: &Registry, args: ReplayArgs) -> Result<bool, CliError> {
    let setup = Setup::load(registry, &args.common)?;
    let (outcome, title) = match (&args.tape, args.seed) {
        (Some(path), _) => {
            let tape = read_tape(path)?;
            let what = format!("{} bytes of tape from {}", tape.len(), path.display());
            (setup.simulation.run_tape(&tape), what)
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
    let hint = report::raise_hint(&setup.scenario.settings);
    print_stats(
        &outcome.stats,
        "this run",
        1,
        &hint,
        Some(&setup.simulation),
    );
    for note in &outcome.not_judged {
        row("not judged", note.to_string());
    }
    row("violations", outcome.violations.len().to_string());
    for violation in &outcome.violations {
        println!("  {violation}");
    }
    row("trace hash", format!("{:016x}", outcome.trace_hash));
    if let Some(path) = &args.timeline {
        write_timeline(path, setup.simulation.app(), &outcome, &title)?;
    }
    Ok(!outcome.violations.is_empty())
}

/// Writes the picture of a run, its violations marked and its records'
/// stamps in the tooltips.
fn write_timeline(
    path: &Path,
    app: &App,
    outcome: &RunOutcome,
    title: &str,
) -> Result<(), CliError> {
    let stamps = timeline::stamps_in(&outcome.cluster);
    let html = timeline::render_html(
        &outcome.trace,
        title,
        &outcome.violations,
        Some(&stamps),
        &timeline::tick_topics(app),
    );
    write_file(path, &html)?;
    println!("timeline written to {}", path.display());
    Ok(())
}

// ---------------------------------------------------------------------------
// shrink

fn shrink(registry: &Registry, args: ShrinkArgs) -> Result<bool, CliError> {
    let setup = Setup::load(registry, &args.common)?;
    let outcome = setup.run_seed(args.seed);
    let budget = ShrinkBudget {
        time: (args.seconds > 0).then(|| std::time::Duration::from_secs(args.seconds)),
        attempts: args.attempts,
    };
    let Some(failure) = setup.shrink(outcome, budget) else {
        println!(
            "seed {} of {} passes: nothing to shrink",
            args.seed, setup.path
        );
        return Ok(false);
    };
    if !failure.reproduces() {
        println!(
            "seed {} failed, but not again when replayed from its tape ({}): no tape written",
            args.seed,
            report::not_reproduced(&failure)
        );
        return Ok(true);
    }
    if let Some(path) = &args.tape_out {
        // A tape reads zeros past its end, so trailing zeros can go.
        let tape = tape::trimmed(&failure.shrunk.tape);
        let mut text = format!(
            "# parsley-sim tape: {} seed {} shrunk, violates {}\n",
            setup.path, args.seed, failure.invariant
        );
        for line in tape.chunks(32) {
            text.push_str(&tape::to_hex(line));
            text.push('\n');
        }
        write_file(path, &text)?;
        // The tape as written, replayed the way `replay --tape` will.
        let replayed = setup.simulation.run_tape(tape);

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
        write_timeline(path, setup.simulation.app(), &failure.shrunk, &title)?;
    }
    Ok(true)
}

// ---------------------------------------------------------------------------
// explore

fn explore(registry: &Registry, args: ExploreArgs) -> Result<bool, CliError> {
    let setup = Setup::load(registry, &args.common)?;
    let bounds = args.bounds();
    if let Some(path) = &args.replay {
        let tape = read_tape(path)?;
        let outcome = setup.simulation.within(&bounds).run_tape(&tape);
        println!(
            "Replaying {} bytes of tape from {} on {} within the bound ({bounds})",
            tape.len(),
            path.display(),
            setup.path
        );
        return tell(&setup, &outcome, args.timeline.as_deref(), "replayed");
    }
    println!("Exploring {} within the bound ({bounds})", setup.path);
    if let Some(mutation) = setup.mutation {
        println!("with the planted bug {}", mutation.name());
    }
    let exploration = setup.simulation.explore(&bounds);
    println!("{exploration}");
    let Some(outcome) = &exploration.violation else {
        return Ok(false);
    };
    if let Some(path) = &args.tape_out {
        let tape = tape::trimmed(&outcome.tape);
        let mut text = format!(
            "# parsley-sim tape: {} explored within {}, violates {}\n",
            setup.path,
            args.flags(),
            outcome.violations[0].invariant
        );
        for line in tape.chunks(32) {
            text.push_str(&tape::to_hex(line));
            text.push('\n');
        }
        write_file(path, &text)?;
        let replay = setup.command(&format!(
            "explore {} {} --replay {}",
            setup.path,
            args.flags(),
            path.display()
        ));
        println!(
            "Tape ({} bytes) written to {}; replay it with:\n  {replay}",
            tape.len(),
            path.display()
        );
    }
    tell(
        &setup,
        outcome,
        args.timeline.as_deref(),
        "first violating schedule",
    )
}

/// Prints a run's story and violations (and its timeline); whether it
/// violated an invariant.
fn tell(
    setup: &Setup,
    outcome: &RunOutcome,
    timeline: Option<&Path>,
    what: &str,
) -> Result<bool, CliError> {
    println!("\nWhat happened:");
    print!("{}", report::story(outcome, 200));
    println!();
    for note in &outcome.not_judged {
        row("not judged", note.to_string());
    }
    row("violations", outcome.violations.len().to_string());
    for violation in &outcome.violations {
        println!("  {violation}");
    }
    if let Some(path) = timeline {
        let title = format!("{}: {what}", setup.scenario.name);
        write_timeline(path, setup.simulation.app(), outcome, &title)?;
    }
    Ok(!outcome.violations.is_empty())
}

/// Reads a hex tape; whitespace and `#` comment lines are ignored.
fn read_tape(path: &Path) -> Result<Vec<u8>, CliError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError(format!("{}: cannot read the tape: {e}", path.display())))?;
    tape::from_hex(&text)
        .map_err(|why| CliError(format!("{}: not a hex tape: {why}", path.display())))
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
    if !parsley::mutation::AVAILABLE {
        return Err(CliError(format!(
            "--mutation {name}: this binary was built without planted bugs; \
             build it with parsley's `mutations` feature, e.g. for the examples' runner \
             cargo run -p parsley-examples --features mutations -- run SCENARIO --mutation {name}"
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

/// `hint` says what to raise for a mark never reached: with the run's own
/// knobs where they are known. `shape`, when known, says which library
/// marks the application and its faults can reach.
fn print_stats(
    stats: &Stats,
    marks_note: &str,
    seeds: u64,
    hint: &str,
    shape: Option<&Simulation>,
) {
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
    if stats.store_restores > 0 {
        row("local-disk faults", stats.disk_faults.to_string());
        row(
            "restores through a local store",
            format!(
                "{} ({} rebuilt)",
                stats.store_restores, stats.store_rebuilds
            ),
        );
    }
    if stats.queries > 0 {
        row(
            "interactive queries",
            format!(
                "{} ({} answered, the others refused)",
                stats.queries, stats.queries_answered
            ),
        );
    }
    row("max held", stats.held_max.to_string());
    row(
        "clock landings on a deadline",
        stats.boundary_landings.to_string(),
    );
    row("a seed, on average", report::seed_size(stats, seeds));
    println!("sometimes ({marks_note}):");
    // Per library mark, why this application can reach it (when known).
    let reachable: Option<Vec<Option<String>>> = shape.map(|simulation| {
        report::coverage::library_marks(
            &stats.marks,
            simulation.app(),
            simulation.settings(),
            &simulation.input_claims(),
        )
        .into_iter()
        .map(|mark| mark.reachable)
        .collect()
    });
    for (index, (name, count)) in stats.marks.named().into_iter().enumerate() {
        let never = match (count, reachable.as_ref().map(|reasons| &reasons[index])) {
            (0, Some(Some(reason))) => {
                format!("  (never reached, though this application can reach it: {reason}; {hint})")
            }
            (0, Some(None)) => "  (never reached; not known to be reachable from this \
                 application's shape and faults)"
                .to_string(),
            (0, None) => format!("  (never reached: {hint})"),
            _ => String::new(),
        };
        row(&format!("  {name}"), format!("{count}{never}"));
    }
}

fn row(label: &str, value: String) {
    println!("{label:<40} {value}");
}
