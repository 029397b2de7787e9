//! Scenario files: which topology of a [`Registry`](crate::sim::Registry) a
//! simulation runs, and how the simulator stresses it (the knobs of
//! [`Settings`]).
//!
//! A scenario is a TOML file in `scenarios/`; its name is the file stem. Every
//! table rejects unknown fields, and every error — bad syntax, an unknown or
//! missing field, a wrong type, an impossible value — names the file, the
//! 1-based line and the field (see [`ScenarioError`]).
//!
//! ```toml
//! topology = "balances"          # required: a name of the registry the scenario is loaded with
//! partitions = 4                 # required: partitions of every source topic, 1..=64
//! instances = 2                  # application instances sharing the tasks, 1..=8 (default 2)
//! seeds = { start = 0, count = 2000 }  # required: runs seeds start..start+count, count >= 1
//! order = "random"               # which task acts: "random" draws, or "pct" / "pct:DEPTH" (PCT, depth >= 1; "pct" is depth 3)
//!
//! [workload]                     # optional; every key has the default shown
//! inputs = 100                   # input records produced during the safety phase, >= 1
//! keys = 8                       # distinct keys, >= 1
//! transactional = 0.2            # fraction of input batches produced in a transaction, [0, 1]
//!
//! [clock]                        # optional; every key has the default shown
//! time = "boundary"              # "boundary": advances and timestamps aim at pending deadlines; "uniform": drawn from step_ms only
//! step_ms = { min = 1, max = 500 }   # how far one uniform clock advance moves the wall clock, 1 <= min <= max
//! tick_interval_ms = 1000        # the topology's tick interval, >= 1
//! commit_interval_ms = 100       # the commit interval, >= 1
//! transaction_timeout_ms = 10000 # the broker aborts hanging transactions after this, >= 1
//! time_boundaries_ms = []        # periods the app's own logic keys on (at most 4, each >= 1): "boundary" time aims at their multiples too
//!
//! [faults]                       # optional; probabilities per simulator step, each in [0, 1]
//! swarm = true                   # each seed draws its own mix: every rate scaled by a per-seed factor
//! abort = 0.01                   # abort a task's open transaction
//! commit_failure = 0.01          # fail a commit
//! crash = 0.002                  # crash an instance (uncommitted work lost)
//! move_task = 0.002              # move a task to another instance (the old one is a zombie until fenced)
//! hanging_transaction = 0.005    # leave an input producer's transaction hanging until the timeout
//! logic_error = 0.001            # a logic error on a chosen record (X5)
//! partial_fetch = 0.3            # a fetch sees only part of what is visible
//! empty_fetch = 0.1              # a fetch sees nothing yet
//! marker_lag = 0.5               # a task's commit or abort has its markers written late (per end)
//! marker_lag_ms = { min = 5, max = 65 }  # how late: the broker was measured at 5-65 ms, 0 <= min <= max
//!
//! [budget]                       # optional; every key has the default shown
//! safety_steps = 2000            # steps with inputs and faults, >= 1
//! liveness_steps = 50000         # steps after inputs and faults stop, within which the world must quiesce (I8), >= 1
//!
//! [local_disk]                   # optional; when present, each instance's local disk is modelled (S6, I19)
//! checkpoint_every = 4           # a running task checkpoints its local store every this many changelog records, >= 1
//!
//! [queries]                      # optional; when present, interactive queries are asked of the tasks (Q1, I20); needs [local_disk]
//! rate = 0.05                    # the probability per safety step that a query is asked, in [0, 1]
//! ```
//!
//! `step_ms`, when given, needs both `min` and `max`. Integers are accepted
//! where a probability is expected (`abort = 0`).
//!
//! Parsing goes through private raw structs whose leaves are
//! [`serde_spanned::Spanned`], so that values can be checked after
//! deserializing and a bad one reported with its line; the public
//! [`Scenario`] holds plain numbers.

use std::fmt;
use std::ops::Range;
use std::path::Path;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_spanned::Spanned;

use crate::sim::world::settings::{
    Budget, ClockConfig, FaultRates, LocalDisk, OrderStrategy, Queries, SeedRange, Settings,
    StepRange, TimeStrategy, Workload, INSTANCES_MAX, PARTITIONS_MAX, TIME_BOUNDARIES_MAX,
};

/// A scenario, checked: every value is in range.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    /// The file stem (`balances` for `scenarios/balances.toml`).
    pub name: String,
    /// The topology that runs: a name in the [`Registry`](crate::sim::Registry)
    /// the scenario was loaded with.
    pub topology: String,
    /// The seeds to run.
    pub seeds: SeedRange,
    /// How the simulator stresses the topology.
    pub settings: Settings,
}

/// A scenario file that cannot be used: `file:line: field: message`, the
/// line (1-based) and field left out when unknown. The field is a dotted path
/// such as `faults.abort` or `clock.step_ms.min`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{file}{}: {}{message}", line_part(.line), field_part(.field))]
pub struct ScenarioError {
    /// The scenario file.
    pub file: String,
    /// The line, when known.
    pub line: Option<usize>,
    /// The field, as a dotted path.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
}

fn line_part(line: &Option<usize>) -> String {
    line.map(|line| format!(":{line}")).unwrap_or_default()
}

fn field_part(field: &Option<String>) -> String {
    field
        .as_ref()
        .map(|field| format!("{field}: "))
        .unwrap_or_default()
}

/// Reads and checks the scenario file at `path`; its name is the file stem.
/// Its `topology` must be one of `topologies` (see
/// [`Registry::load`](crate::sim::Registry::load)).
pub(crate) fn load(path: &Path, topologies: &[&str]) -> Result<Scenario, ScenarioError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ScenarioError {
        file: file.clone(),
        line: None,
        field: None,
        message: format!("cannot read the scenario file: {e}"),
    })?;
    let name = path
        .file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .unwrap_or_default();
    parse(&name, &file, &text, topologies)
}

/// Parses and checks a scenario named `name` from `text`; `file` is what
/// errors call it, and `topology` must be one of `topologies`.
pub(crate) fn parse(
    name: &str,
    file: &str,
    text: &str,
    topologies: &[&str],
) -> Result<Scenario, ScenarioError> {
    let raw: RawScenario = toml::from_str(text).map_err(|e| deserialize_error(file, text, &e))?;
    Checker {
        file,
        text,
        topologies,
    }
    .check(name, raw)
}

// ---------------------------------------------------------------------------
// Raw structs: what the file says, with spans.

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    topology: Spanned<String>,
    partitions: Spanned<u32>,
    instances: Option<Spanned<u32>>,
    seeds: RawSeeds,
    order: Option<Spanned<String>>,
    workload: Option<RawWorkload>,
    clock: Option<RawClock>,
    faults: Option<RawFaults>,
    budget: Option<RawBudget>,
    local_disk: Option<RawLocalDisk>,
    queries: Option<Spanned<RawQueries>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawQueries {
    rate: Option<Spanned<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLocalDisk {
    checkpoint_every: Option<Spanned<u32>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSeeds {
    start: Spanned<u64>,
    count: Spanned<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWorkload {
    inputs: Option<Spanned<u64>>,
    keys: Option<Spanned<u32>>,
    transactional: Option<Spanned<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawClock {
    time: Option<Spanned<String>>,
    step_ms: Option<RawStepRange>,
    tick_interval_ms: Option<Spanned<u64>>,
    commit_interval_ms: Option<Spanned<u64>>,
    transaction_timeout_ms: Option<Spanned<u64>>,
    time_boundaries_ms: Option<Spanned<Vec<u64>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStepRange {
    min: Spanned<u64>,
    max: Spanned<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFaults {
    swarm: Option<Spanned<bool>>,
    abort: Option<Spanned<f64>>,
    commit_failure: Option<Spanned<f64>>,
    crash: Option<Spanned<f64>>,
    move_task: Option<Spanned<f64>>,
    hanging_transaction: Option<Spanned<f64>>,
    logic_error: Option<Spanned<f64>>,
    partial_fetch: Option<Spanned<f64>>,
    empty_fetch: Option<Spanned<f64>>,
    marker_lag: Option<Spanned<f64>>,
    marker_lag_ms: Option<RawStepRange>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBudget {
    safety_steps: Option<Spanned<u64>>,
    liveness_steps: Option<Spanned<u64>>,
}

// ---------------------------------------------------------------------------
// Checking values.

struct Checker<'a> {
    file: &'a str,
    text: &'a str,
    /// The topologies a scenario may name.
    topologies: &'a [&'a str],
}

/// The name in `known` closest to `name`, when one is close enough to be a
/// likely misspelling.
fn strsim_closest<'a>(name: &str, known: &[&'a str]) -> Option<&'a str> {
    known
        .iter()
        .map(|candidate| (strsim::osa_distance(name, candidate), *candidate))
        .filter(|(distance, _)| *distance <= 2)
        .min()
        .map(|(_, candidate)| candidate)
}

impl Checker<'_> {
    /// `clock.time_boundaries_ms`: at most [`TIME_BOUNDARIES_MAX`] periods,
    /// each `>= 1`.
    fn time_boundaries(
        &self,
        periods: Spanned<Vec<u64>>,
    ) -> Result<[u64; TIME_BOUNDARIES_MAX], ScenarioError> {
        let span = periods.span();
        let periods = periods.into_inner();
        if periods.len() > TIME_BOUNDARIES_MAX {
            return Err(self.error(
                span,
                "clock.time_boundaries_ms",
                format!(
                    "{} periods: at most {TIME_BOUNDARIES_MAX} may be declared",
                    periods.len()
                ),
            ));
        }
        let mut slots = [0; TIME_BOUNDARIES_MAX];
        for (slot, period) in slots.iter_mut().zip(periods) {
            if period == 0 {
                return Err(self.error(
                    span,
                    "clock.time_boundaries_ms",
                    "a period of 0 ms: each must be >= 1".to_string(),
                ));
            }
            *slot = period;
        }
        Ok(slots)
    }

    fn error(&self, span: Range<usize>, field: &str, message: String) -> ScenarioError {
        ScenarioError {
            file: self.file.to_owned(),
            line: Some(line_of(self.text, span.start)),
            field: Some(field.to_owned()),
            message,
        }
    }

    /// `value` (or `default`) must lie in `lo..=hi`.
    fn within<T>(
        &self,
        field: &str,
        value: Option<Spanned<T>>,
        default: T,
        lo: T,
        hi: T,
    ) -> Result<T, ScenarioError>
    where
        T: Copy + PartialOrd + fmt::Display,
    {
        let Some(value) = value else {
            return Ok(default);
        };
        let (span, value) = (value.span(), value.into_inner());
        if lo <= value && value <= hi {
            Ok(value)
        } else {
            Err(self.error(
                span,
                field,
                format!("{value} is out of range: it must be in [{lo}, {hi}]"),
            ))
        }
    }

    /// `value` (or `default`) must be at least `lo`.
    fn at_least<T>(
        &self,
        field: &str,
        value: Option<Spanned<T>>,
        default: T,
        lo: T,
    ) -> Result<T, ScenarioError>
    where
        T: Copy + PartialOrd + fmt::Display,
    {
        let Some(value) = value else {
            return Ok(default);
        };
        let (span, value) = (value.span(), value.into_inner());
        if lo <= value {
            Ok(value)
        } else {
            Err(self.error(
                span,
                field,
                format!("{value} is too small: it must be at least {lo}"),
            ))
        }
    }

    /// `value` (or `default`) must be a probability in `[0, 1]`.
    fn probability(
        &self,
        field: &str,
        value: Option<Spanned<f64>>,
        default: f64,
    ) -> Result<f64, ScenarioError> {
        let Some(value) = value else {
            return Ok(default);
        };
        let (span, value) = (value.span(), value.into_inner());
        if (0.0..=1.0).contains(&value) {
            Ok(value)
        } else {
            Err(self.error(
                span,
                field,
                format!("{value} is not a probability: it must be in [0, 1]"),
            ))
        }
    }

    /// A `{ min, max }` table with `lo <= min <= max`.
    fn range(&self, field: &str, range: RawStepRange, lo: u64) -> Result<StepRange, ScenarioError> {
        let min_span = range.min.span();
        let min = self.at_least(&format!("{field}.min"), Some(range.min), 0, lo)?;
        let max = range.max.into_inner();
        if min > max {
            return Err(self.error(
                min_span,
                field,
                format!("min ({min}) is greater than max ({max})"),
            ));
        }
        Ok(StepRange { min, max })
    }

    fn check(&self, name: &str, raw: RawScenario) -> Result<Scenario, ScenarioError> {
        let topology_span = raw.topology.span();
        let topology = raw.topology.into_inner();
        if !self.topologies.contains(&topology.as_str()) {
            let message = match strsim_closest(&topology, self.topologies) {
                Some(close) => format!(
                    "unknown topology {topology:?} (did you mean {close:?}?): expected one of {}",
                    self.topologies.join(", ")
                ),
                None => format!(
                    "unknown topology {topology:?}: expected one of {}",
                    self.topologies.join(", ")
                ),
            };
            return Err(self.error(topology_span, "topology", message));
        }
        let partitions = self.within("partitions", Some(raw.partitions), 0, 1, PARTITIONS_MAX)?;
        let instances = self.within(
            "instances",
            raw.instances,
            Settings::default().instances,
            1,
            INSTANCES_MAX,
        )?;

        let start = raw.seeds.start.into_inner();
        let count_span = raw.seeds.count.span();
        let count = self.at_least("seeds.count", Some(raw.seeds.count), 0, 1)?;
        // Unreachable from TOML, whose integers are i64, but kept so that a
        // `SeedRange` can always be iterated.
        if start.checked_add(count).is_none() {
            return Err(self.error(
                count_span,
                "seeds.count",
                format!("seeds {start}..{start}+{count} run past the largest seed"),
            ));
        }

        let default = Workload::default();
        let workload = match raw.workload {
            None => default,
            Some(w) => Workload {
                inputs: self.at_least("workload.inputs", w.inputs, default.inputs, 1)?,
                keys: self.at_least("workload.keys", w.keys, default.keys, 1)?,
                transactional: self.probability(
                    "workload.transactional",
                    w.transactional,
                    default.transactional,
                )?,
            },
        };

        let default = ClockConfig::default();
        let clock = match raw.clock {
            None => default,
            Some(c) => ClockConfig {
                time: match c.time {
                    None => default.time,
                    Some(time) => {
                        let span = time.span();
                        let name = time.into_inner();
                        TimeStrategy::from_name(&name).ok_or_else(|| {
                            self.error(
                                span,
                                "clock.time",
                                format!("{name:?} is not a time strategy: use \"boundary\" or \"uniform\""),
                            )
                        })?
                    }
                },
                step_ms: match c.step_ms {
                    None => default.step_ms,
                    Some(step) => self.range("clock.step_ms", step, 1)?,
                },
                tick_interval_ms: self.at_least(
                    "clock.tick_interval_ms",
                    c.tick_interval_ms,
                    default.tick_interval_ms,
                    1,
                )?,
                commit_interval_ms: self.at_least(
                    "clock.commit_interval_ms",
                    c.commit_interval_ms,
                    default.commit_interval_ms,
                    1,
                )?,
                transaction_timeout_ms: self.at_least(
                    "clock.transaction_timeout_ms",
                    c.transaction_timeout_ms,
                    default.transaction_timeout_ms,
                    1,
                )?,
                time_boundaries_ms: match c.time_boundaries_ms {
                    None => default.time_boundaries_ms,
                    Some(periods) => self.time_boundaries(periods)?,
                },
            },
        };

        let default = FaultRates::default();
        let faults = match raw.faults {
            None => default,
            Some(f) => FaultRates {
                swarm: f.swarm.map_or(default.swarm, Spanned::into_inner),
                abort: self.probability("faults.abort", f.abort, default.abort)?,
                commit_failure: self.probability(
                    "faults.commit_failure",
                    f.commit_failure,
                    default.commit_failure,
                )?,
                crash: self.probability("faults.crash", f.crash, default.crash)?,
                move_task: self.probability("faults.move_task", f.move_task, default.move_task)?,
                hanging_transaction: self.probability(
                    "faults.hanging_transaction",
                    f.hanging_transaction,
                    default.hanging_transaction,
                )?,
                logic_error: self.probability(
                    "faults.logic_error",
                    f.logic_error,
                    default.logic_error,
                )?,
                partial_fetch: self.probability(
                    "faults.partial_fetch",
                    f.partial_fetch,
                    default.partial_fetch,
                )?,
                empty_fetch: self.probability(
                    "faults.empty_fetch",
                    f.empty_fetch,
                    default.empty_fetch,
                )?,
                marker_lag: self.probability(
                    "faults.marker_lag",
                    f.marker_lag,
                    default.marker_lag,
                )?,
                marker_lag_ms: match f.marker_lag_ms {
                    None => default.marker_lag_ms,
                    Some(range) => self.range("faults.marker_lag_ms", range, 0)?,
                },
            },
        };

        let default = Budget::default();
        let budget = match raw.budget {
            None => default,
            Some(b) => Budget {
                safety_steps: self.at_least(
                    "budget.safety_steps",
                    b.safety_steps,
                    default.safety_steps,
                    1,
                )?,
                liveness_steps: self.at_least(
                    "budget.liveness_steps",
                    b.liveness_steps,
                    default.liveness_steps,
                    1,
                )?,
            },
        };

        let local_disk = match raw.local_disk {
            None => None,
            Some(disk) => Some(LocalDisk {
                checkpoint_every: self.at_least(
                    "local_disk.checkpoint_every",
                    disk.checkpoint_every,
                    LocalDisk::default().checkpoint_every,
                    1,
                )?,
            }),
        };

        let queries = match raw.queries {
            None => None,
            Some(queries) => {
                let span = queries.span();
                if local_disk.is_none() {
                    return Err(self.error(
                        span,
                        "queries",
                        "queries are answered from each task's local store: the scenario needs [local_disk] too".into(),
                    ));
                }
                Some(Queries {
                    rate: self.probability(
                        "queries.rate",
                        queries.into_inner().rate,
                        Queries::default().rate,
                    )?,
                })
            }
        };

        let order = match raw.order {
            None => OrderStrategy::default(),
            Some(order) => {
                let span = order.span();
                let name = order.into_inner();
                OrderStrategy::from_name(&name).ok_or_else(|| {
                    self.error(
                        span,
                        "order",
                        format!("{name:?} is not an order strategy: use \"random\", \"pct\" or \"pct:DEPTH\" (depth >= 1)"),
                    )
                })?
            }
        };

        Ok(Scenario {
            name: name.to_owned(),
            topology,
            seeds: SeedRange { start, count },
            settings: Settings {
                partitions,
                instances,
                workload,
                clock,
                faults,
                budget,
                order,
                local_disk,
                queries,
            },
        })
    }
}

/// The 1-based line of byte `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    let offset = offset.min(text.len());
    1 + text.as_bytes()[..offset]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
}

// ---------------------------------------------------------------------------
// Locating deserialization errors.
//
// toml's error carries serde's message and a byte span, but not the path of
// the field. To name the field, the text is read a second time into a tree of
// spans (`Located`), and the error's span is looked up in it: a wrong value's
// span is the value, a missing field's span is the table that lacks it, and
// an unknown field's span is its key, which is named as written (after the
// path of the table around it, unless it is in a table header).

/// Turns toml's error for `text` into a [`ScenarioError`].
fn deserialize_error(file: &str, text: &str, error: &toml::de::Error) -> ScenarioError {
    let message = error.message().trim().replace('\n', "; ");
    let span = error.span();
    let line = span.as_ref().map(|span| line_of(text, span.start));
    let unknown = quoted_after(&message, "unknown field `");
    let missing = quoted_after(&message, "missing field `");
    let tree = toml::from_str::<Located>(text).ok();
    let enclosing = |exact: bool| {
        let mut path = Vec::new();
        if let (Some(tree), Some(span)) = (&tree, &span) {
            find(tree, span, exact, &mut path);
        }
        path
    };
    let mut path = match (unknown, missing, &span) {
        // The span is the unknown key: name it as the file spells it.
        (Some(name), _, Some(span)) => match written_key(text, span, name) {
            Some((true, key)) => vec![key],
            Some((false, key)) => {
                let mut path = enclosing(false);
                path.push(key);
                path
            }
            None => {
                let mut path = enclosing(false);
                path.push(name.to_owned());
                path
            }
        },
        // The span is the table that lacks the field.
        (_, Some(name), _) => {
            let mut path = enclosing(true);
            path.push(name.to_owned());
            path
        }
        // The span is the bad value.
        _ => enclosing(false),
    };
    if span.is_none() {
        if let Some(name) = unknown {
            path = vec![name.to_owned()];
        }
    }
    let field = if path.is_empty() {
        None
    } else {
        Some(path.iter().fold(String::new(), |mut field, segment| {
            if !field.is_empty() && !segment.starts_with('[') {
                field.push('.');
            }
            field.push_str(segment);
            field
        }))
    };
    ScenarioError {
        file: file.to_owned(),
        line,
        field,
        message,
    }
}

/// The (possibly dotted) key ending at `span`, which spells `name`, as it is
/// written on its line: after a table header's brackets (then `true`: the
/// path is absolute), or after the start of the line or an inline table's
/// `{` or `,` (then `false`: the path is relative to the enclosing table).
fn written_key(text: &str, span: &Range<usize>, name: &str) -> Option<(bool, String)> {
    let line_start = text.get(..span.start)?.rfind('\n').map_or(0, |nl| nl + 1);
    let before = text.get(line_start..span.start)?;
    let header = before.trim_start().starts_with('[');
    let key_start = if header {
        line_start
            + before.find('[')?
            + before
                .trim_start()
                .chars()
                .take_while(|&c| c == '[')
                .count()
    } else {
        line_start + before.rfind(['{', ',']).map_or(0, |at| at + 1)
    };
    let key: String = text
        .get(key_start..span.end)?
        .chars()
        .filter(|c| !c.is_whitespace() && *c != '"' && *c != '\'')
        .collect();
    key.ends_with(name).then_some((header, key))
}

/// The text between `prefix` and the next backquote in `message`.
fn quoted_after<'m>(message: &'m str, prefix: &str) -> Option<&'m str> {
    let rest = &message[message.find(prefix)? + prefix.len()..];
    Some(&rest[..rest.find('`')?])
}

/// Finds the deepest node whose span contains `span` (or equals it, when
/// `exact`), leaving its key path in `path`.
fn find(located: &Located, span: &Range<usize>, exact: bool, path: &mut Vec<String>) -> bool {
    let children: Box<dyn Iterator<Item = (String, &Located)>> = match &located.node {
        Node::Leaf => Box::new(std::iter::empty()),
        Node::Table(entries) => Box::new(entries.iter().map(|(key, child)| (key.clone(), child))),
        Node::Array(items) => Box::new(
            items
                .iter()
                .enumerate()
                .map(|(i, child)| (format!("[{i}]"), child)),
        ),
    };
    for (key, child) in children {
        path.push(key);
        if find(child, span, exact, path) {
            return true;
        }
        path.pop();
    }
    located.span.as_ref().is_some_and(|own| {
        if exact {
            own == span
        } else {
            own.start <= span.start && span.end <= own.end
        }
    })
}

/// A TOML value with its span, when toml knows it (dotted-key tables have
/// none).
struct Located {
    span: Option<Range<usize>>,
    node: Node,
}

enum Node {
    Leaf,
    Table(Vec<(String, Located)>),
    Array(Vec<Located>),
}

impl<'de> Deserialize<'de> for Located {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // Ask for a span the way `Spanned` does; toml answers with the span
        // fields when it has a span, and with the bare value otherwise.
        use serde_spanned::__unstable::{END_FIELD, NAME, START_FIELD, VALUE_FIELD};
        deserializer.deserialize_struct(
            NAME,
            &[START_FIELD, END_FIELD, VALUE_FIELD],
            LocatedVisitor { spanned: true },
        )
    }
}

/// The bare value of a [`Located`], without asking for its span again.
struct Bare(Located);

impl<'de> Deserialize<'de> for Bare {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer
            .deserialize_any(LocatedVisitor { spanned: false })
            .map(Bare)
    }
}

struct LocatedVisitor {
    spanned: bool,
}

impl LocatedVisitor {
    fn leaf<E>(self) -> Result<Located, E> {
        Ok(Located {
            span: None,
            node: Node::Leaf,
        })
    }
}

impl<'de> Visitor<'de> for LocatedVisitor {
    type Value = Located;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any TOML value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Located, E> {
        self.leaf()
    }

    fn visit_i64<E>(self, _: i64) -> Result<Located, E> {
        self.leaf()
    }

    fn visit_u64<E>(self, _: u64) -> Result<Located, E> {
        self.leaf()
    }

    fn visit_f64<E>(self, _: f64) -> Result<Located, E> {
        self.leaf()
    }

    fn visit_str<E>(self, _: &str) -> Result<Located, E> {
        self.leaf()
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Located, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Located>()? {
            items.push(item);
        }
        Ok(Located {
            span: None,
            node: Node::Array(items),
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Located, A::Error> {
        use serde_spanned::__unstable::{END_FIELD, START_FIELD, VALUE_FIELD};
        let mut entries = Vec::new();
        let Some(first) = map.next_key::<String>()? else {
            return Ok(Located {
                span: None,
                node: Node::Table(entries),
            });
        };
        if self.spanned && first == START_FIELD {
            let start: usize = map.next_value()?;
            let end_key = map.next_key::<String>()?;
            let end: usize = map.next_value()?;
            let value_key = map.next_key::<String>()?;
            if end_key.as_deref() != Some(END_FIELD) || value_key.as_deref() != Some(VALUE_FIELD) {
                return Err(de::Error::custom("malformed span"));
            }
            let Bare(mut located) = map.next_value()?;
            located.span = Some(start..end);
            return Ok(located);
        }
        entries.push((first, map.next_value::<Located>()?));
        while let Some(key) = map.next_key::<String>()? {
            entries.push((key, map.next_value::<Located>()?));
        }
        Ok(Located {
            span: None,
            node: Node::Table(entries),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::world::choice::Choices;
    use std::path::PathBuf;

    /// The topology names these tests' made-up registry accepts: names of
    /// their own, not the example topologies' (whose scenario files are
    /// tested in `parsley-examples`).
    fn known() -> Vec<&'static str> {
        vec![
            "ledger", "audit", "alarms", "relay", "merge", "lattice", "spread", "drain", "window",
            "rekey", "garble",
        ]
    }

    fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        super::load(path, &known())
    }

    fn parse(name: &str, file: &str, text: &str) -> Result<Scenario, ScenarioError> {
        super::parse(name, file, text, &known())
    }

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/scenario_files")
            .join(name)
    }

    /// Loads a bad fixture and checks where its error points.
    fn assert_error(name: &str, line: usize, field: &str, message_part: &str) -> ScenarioError {
        let path = fixture(name);
        let error = load(&path).expect_err(name);
        assert_eq!(error.file, path.display().to_string(), "{name}: {error}");
        assert_eq!(error.line, Some(line), "{name}: {error}");
        assert_eq!(error.field.as_deref(), Some(field), "{name}: {error}");
        assert!(error.message.contains(message_part), "{name}: {error}");
        assert_eq!(
            error.to_string(),
            format!("{}:{line}: {field}: {}", path.display(), error.message)
        );
        error
    }

    #[test]
    fn an_unknown_top_level_field_is_named_with_its_line() {
        assert_error(
            "unknown_top_level_field.toml",
            4,
            "colour",
            "unknown field `colour`",
        );
    }

    #[test]
    fn an_unknown_field_in_faults_is_named_with_its_table() {
        assert_error(
            "unknown_faults_field.toml",
            8,
            "faults.crahs",
            "unknown field `crahs`",
        );
    }

    #[test]
    fn an_unknown_field_in_an_inline_table_is_named_with_its_path() {
        assert_error(
            "unknown_field_in_inline_table.toml",
            6,
            "clock.step_ms.mean",
            "unknown field `mean`",
        );
    }

    #[test]
    fn a_wrong_type_is_named_with_its_line() {
        assert_error(
            "wrong_type.toml",
            6,
            "workload.inputs",
            "invalid type: string \"many\"",
        );
    }

    #[test]
    fn a_missing_topology_is_reported_on_the_first_line() {
        assert_error(
            "missing_topology.toml",
            1,
            "topology",
            "missing field `topology`",
        );
    }

    #[test]
    fn a_missing_field_in_an_inline_table_is_named_with_its_table() {
        assert_error(
            "missing_seeds_count.toml",
            3,
            "seeds.count",
            "missing field `count`",
        );
    }

    #[test]
    fn an_unknown_topology_is_refused() {
        assert_error(
            "unknown_topology.toml",
            1,
            "topology",
            "unknown topology \"hexagon\": expected one of ledger, audit",
        );
    }

    #[test]
    fn a_probability_above_one_is_refused() {
        assert_error(
            "probability_out_of_range.toml",
            7,
            "faults.crash",
            "1.5 is not a probability",
        );
    }

    #[test]
    fn a_step_minimum_above_its_maximum_is_refused() {
        assert_error(
            "step_min_greater_than_max.toml",
            7,
            "clock.step_ms",
            "min (500) is greater than max (100)",
        );
    }

    #[test]
    fn zero_partitions_are_refused() {
        assert_error("zero_partitions.toml", 2, "partitions", "0 is out of range");
    }

    #[test]
    fn a_zero_seed_count_is_refused() {
        assert_error("zero_seeds_count.toml", 6, "seeds.count", "0 is too small");
    }

    #[test]
    fn a_syntax_error_has_a_line_but_no_field() {
        let path = fixture("syntax_error.toml");
        let error = load(&path).unwrap_err();
        assert_eq!(error.line, Some(6), "{error}");
        assert_eq!(error.field, None, "{error}");
        assert!(!error.message.contains('\n'));
        assert!(
            error
                .to_string()
                .starts_with(&format!("{}:6: ", path.display())),
            "{error}"
        );
    }

    #[test]
    fn an_unreadable_file_is_an_error_without_a_line() {
        let path = fixture("no_such_scenario.toml");
        let error = load(&path).unwrap_err();
        assert_eq!(error.file, path.display().to_string());
        assert_eq!(error.line, None);
        assert_eq!(error.field, None);
        assert!(
            error.message.starts_with("cannot read the scenario file"),
            "{error}"
        );
        assert!(error
            .to_string()
            .starts_with(&format!("{}: cannot read", path.display())));
    }

    const FULL: &str = r#"
topology = "ledger"
partitions = 4
instances = 2
seeds = { start = 0, count = 2000 }
order = "random"

[workload]
inputs = 100
keys = 8
transactional = 0.2

[clock]
time = "boundary"
step_ms = { min = 1, max = 500 }
tick_interval_ms = 1000
commit_interval_ms = 100
transaction_timeout_ms = 10000

[faults]
swarm = true
abort = 0.01
commit_failure = 0.01
crash = 0.002
move_task = 0.002
hanging_transaction = 0.005
logic_error = 0.001
partial_fetch = 0.3
empty_fetch = 0.1

[budget]
safety_steps = 2000
liveness_steps = 50000
"#;

    #[test]
    fn the_clock_takes_either_time_strategy() {
        for strategy in [TimeStrategy::Uniform, TimeStrategy::Boundary] {
            let text = format!(
                "topology = \"ledger\"\npartitions = 1\nseeds = {{ start = 0, count = 1 }}\n[clock]\ntime = \"{}\"\n",
                strategy.name()
            );
            let scenario = parse("time", "time.toml", &text).unwrap();
            assert_eq!(scenario.settings.clock.time, strategy);
        }
    }

    #[test]
    fn the_clock_takes_the_periods_the_app_keys_on() {
        let head =
            "topology = \"ledger\"\npartitions = 1\nseeds = { start = 0, count = 1 }\n[clock]\n";
        let text = format!("{head}time_boundaries_ms = [60000, 3600000]\n");
        let scenario = parse("periods", "periods.toml", &text).unwrap();
        assert_eq!(
            scenario.settings.clock.time_boundaries_ms,
            [60_000, 3_600_000, 0, 0]
        );
        assert_eq!(
            scenario
                .settings
                .clock
                .time_boundaries()
                .collect::<Vec<_>>(),
            [60_000, 3_600_000]
        );
        let text = format!("{head}time_boundaries_ms = [1, 2, 3, 4, 5]\n");
        let error = parse("periods", "periods.toml", &text).unwrap_err();
        assert_eq!(error.field.as_deref(), Some("clock.time_boundaries_ms"));
        assert_eq!(error.line, Some(5), "{error}");
        assert!(error.message.contains("at most 4"), "{error}");
        let text = format!("{head}time_boundaries_ms = [0]\n");
        let error = parse("periods", "periods.toml", &text).unwrap_err();
        assert!(error.message.contains(">= 1"), "{error}");
    }

    /// `[queries]` reads each task's local store: without `[local_disk]`
    /// it is refused with its line; with it, its rate is a probability.
    #[test]
    fn queries_need_a_local_disk_and_a_probability() {
        let base = "topology = \"ledger\"\npartitions = 2\nseeds = { start = 0, count = 1 }\n";
        let error = parse("q", "q.toml", &format!("{base}[queries]\nrate = 0.1\n")).unwrap_err();
        assert_eq!(error.line, Some(4), "{error}");
        assert!(error.message.contains("[local_disk]"), "{error}");
        let disk = format!("{base}[local_disk]\n[queries]\n");
        let parsed = parse("q", "q.toml", &disk).unwrap();
        assert_eq!(parsed.settings.queries, Some(Queries::default()));
        let error = parse("q", "q.toml", &format!("{disk}rate = 2\n")).unwrap_err();
        assert!(error.message.contains("probability"), "{error}");
    }

    #[test]
    fn the_documented_example_parses_to_the_defaults() {
        let full = parse("full", "full.toml", FULL).unwrap();
        assert_eq!(
            full,
            Scenario {
                name: "full".into(),
                topology: "ledger".into(),
                seeds: SeedRange {
                    start: 0,
                    count: 2000
                },
                settings: Settings {
                    partitions: 4,
                    instances: 2,
                    workload: Workload::default(),
                    clock: ClockConfig::default(),
                    faults: FaultRates::default(),
                    budget: Budget::default(),
                    order: OrderStrategy::Random,
                    local_disk: None,
                    queries: None,
                },
            }
        );
        assert_eq!(full.seeds.range(), 0..2000);

        let minimal = "topology = \"merge\"\npartitions = 4\nseeds = { start = 0, count = 2000 }\n[workload]\n[clock]\n";
        let minimal = parse("full", "minimal.toml", minimal).unwrap();
        assert_eq!(minimal.settings.instances, Settings::default().instances);
        assert_eq!(minimal.topology, "merge");
        assert_eq!(
            minimal,
            Scenario {
                topology: "merge".into(),
                ..full
            }
        );
    }

    #[test]
    fn integers_are_probabilities_and_dotted_keys_work() {
        let text = "topology = \"alarms\"\npartitions = 1\nseeds.start = 5\nseeds.count = 3\nfaults.abort = 1\nfaults.crash = 0\n";
        let scenario = parse("dotted", "dotted.toml", text).unwrap();
        assert_eq!(scenario.seeds.range(), 5..8);
        assert_eq!(scenario.settings.faults.abort, 1.0);
        assert_eq!(scenario.settings.faults.crash, 0.0);
        assert_eq!(
            scenario.settings.faults.commit_failure,
            FaultRates::default().commit_failure
        );
    }

    #[test]
    fn values_are_checked_in_every_table() {
        let base = "topology = \"relay\"\npartitions = 2\nseeds = { start = 0, count = 1 }\n";
        let cases = [
            ("instances = 9\n", 4, "instances"),
            ("instances = 0\n", 4, "instances"),
            ("partitions = 65\n", 2, "partitions"),
            ("[workload]\ninputs = 0\n", 5, "workload.inputs"),
            ("[workload]\nkeys = 0\n", 5, "workload.keys"),
            (
                "[workload]\ntransactional = -0.1\n",
                5,
                "workload.transactional",
            ),
            (
                "[clock]\nstep_ms = { min = 0, max = 3 }\n",
                5,
                "clock.step_ms.min",
            ),
            (
                "[clock]\ntick_interval_ms = 0\n",
                5,
                "clock.tick_interval_ms",
            ),
            (
                "[clock]\ncommit_interval_ms = 0\n",
                5,
                "clock.commit_interval_ms",
            ),
            (
                "[clock]\ntransaction_timeout_ms = 0\n",
                5,
                "clock.transaction_timeout_ms",
            ),
            ("[clock]\nstep_ms = { min = 1 }\n", 5, "clock.step_ms.max"),
            ("[clock]\ntime = \"random\"\n", 5, "clock.time"),
            ("order = \"pct:0\"\n", 4, "order"),
            (
                "[clock]\nstep_ms = { min = \"1\", max = 2 }\n",
                5,
                "clock.step_ms.min",
            ),
            ("[faults]\nempty_fetch = nan\n", 5, "faults.empty_fetch"),
            ("[faults]\nswarm = 1\n", 5, "faults.swarm"),
            (
                "[faults]\n\n\npartial_fetch = inf\n",
                7,
                "faults.partial_fetch",
            ),
            ("[budget]\nsafety_steps = 0\n", 5, "budget.safety_steps"),
            (
                "[budget]\nliveness_steps = -1\n",
                5,
                "budget.liveness_steps",
            ),
            ("[budget]\nsteps = 1\n", 5, "budget.steps"),
            ("[[runs]]\nx = 1\n", 4, "runs"),
            ("[clock.bogus]\nx = 1\n", 4, "clock.bogus"),
            ("[ \"bogus\" ]\nx = 1\n", 4, "bogus"),
            ("faults.bogus = 1\n", 4, "faults.bogus"),
            ("faults.abort = \"x\"\n", 4, "faults.abort"),
            (
                "[clock]\nstep_ms.min = 1\nstep_ms.bogus = 1\n",
                6,
                "clock.step_ms.bogus",
            ),
            (
                "[clock]\nstep_ms = { min = 1, max = 2, 'zz' = 3 }\n",
                5,
                "clock.step_ms.zz",
            ),
            ("workload = 3\n", 4, "workload"),
        ];
        for (extra, line, field) in cases {
            let text = if extra.starts_with("partitions") {
                base.replace("partitions = 2\n", extra)
            } else {
                format!("{base}{extra}")
            };
            let error = parse("case", "case.toml", &text).expect_err(extra);
            assert_eq!(
                (error.line, error.field.as_deref()),
                (Some(line), Some(field)),
                "{extra:?}: {error}"
            );
        }
    }

    #[test]
    fn missing_fields_point_at_the_table_that_lacks_them() {
        let cases = [
            ("", 1, "topology"),
            ("# nothing\n\n[workload]\ninputs = 3\n", 1, "topology"),
            ("topology = \"relay\"\nseeds = { start = 0, count = 1 }\n", 1, "partitions"),
            ("topology = \"relay\"\npartitions = 1\n\n[seeds]\nstart = 0\n", 4, "seeds.count"),
            ("topology = \"relay\"\npartitions = 1\nseeds = { start = 0, count = 1 }\n[clock]\nstep_ms = { max = 3 }\n", 5, "clock.step_ms.min"),
        ];
        for (text, line, field) in cases {
            let error = parse("case", "case.toml", text).expect_err(text);
            assert_eq!(
                (error.line, error.field.as_deref()),
                (Some(line), Some(field)),
                "{text:?}: {error}"
            );
        }
    }

    #[test]
    fn topology_names_round_trip() {
        for topology in known() {
            let text = format!(
                "topology = \"{topology}\"\npartitions = 1\nseeds = {{ start = 0, count = 1 }}\n"
            );
            assert_eq!(parse("t", "t.toml", &text).unwrap().topology, topology);
        }
    }

    #[test]
    fn an_unknown_topology_suggests_the_closest_name() {
        let text = "topology = \"latice\"\npartitions = 1\nseeds = { start = 0, count = 1 }\n";
        let error = parse("t", "t.toml", text).unwrap_err();
        assert_eq!(
            (error.line, error.field.as_deref()),
            (Some(1), Some("topology"))
        );
        assert!(
            error.message.contains("did you mean \"lattice\"?"),
            "{error}"
        );
        assert!(error.message.contains("spread"), "{error}");
    }

    #[test]
    fn errors_display_only_what_they_know() {
        let mut error = ScenarioError {
            file: "a.toml".into(),
            line: Some(3),
            field: Some("faults.abort".into()),
            message: "bad".into(),
        };
        assert_eq!(error.to_string(), "a.toml:3: faults.abort: bad");
        error.field = None;
        assert_eq!(error.to_string(), "a.toml:3: bad");
        error.line = None;
        assert_eq!(error.to_string(), "a.toml: bad");
        error.field = Some("x".into());
        assert_eq!(error.to_string(), "a.toml: x: bad");
    }

    #[test]
    fn swarm_scales_each_rate_by_a_drawn_factor() {
        let rates = FaultRates::default();

        // Without swarm the rates are unchanged and nothing is drawn.
        let fixed = FaultRates {
            swarm: false,
            ..rates
        };
        let mut choices = Choices::seeded(1);
        assert_eq!(fixed.swarm(&mut choices), fixed);
        assert_eq!(choices.draws(), 0);

        // The zero tape switches every fault off.
        let off = rates.swarm(&mut Choices::from_tape(Vec::new()));
        assert_eq!(
            off,
            FaultRates {
                swarm: false,
                abort: 0.0,
                commit_failure: 0.0,
                crash: 0.0,
                move_task: 0.0,
                hanging_transaction: 0.0,
                logic_error: 0.0,
                partial_fetch: 0.0,
                empty_fetch: 0.0,
                marker_lag: 0.0,
                marker_lag_ms: rates.marker_lag_ms,
            }
        );

        // A tape picks the factors in field order: 4/4, 3/4, 2/4, 1/4, 0, ...
        let tape: Vec<u8> = [4u32, 3, 2, 1, 0, 9, 5, 4]
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        let mix = rates.swarm(&mut Choices::from_tape(tape));
        assert!(!mix.swarm);
        assert_eq!(mix.abort, rates.abort);
        assert_eq!(mix.commit_failure, rates.commit_failure * 0.75);
        assert_eq!(mix.crash, rates.crash * 0.5);
        assert_eq!(mix.move_task, rates.move_task * 0.25);
        assert_eq!(mix.hanging_transaction, 0.0);
        assert_eq!(mix.logic_error, rates.logic_error * 1.0);
        assert_eq!(mix.partial_fetch, 0.0);
        assert_eq!(mix.empty_fetch, rates.empty_fetch);

        // Seeds differ in their mix, and every rate stays within [0, its rate].
        let mixes: Vec<FaultRates> = (0..50)
            .map(|seed| rates.swarm(&mut Choices::seeded(seed)))
            .collect();
        assert!(mixes.iter().any(|m| m != &mixes[0]));
        for m in &mixes {
            assert!((0.0..=rates.abort).contains(&m.abort));
            assert!((0.0..=rates.partial_fetch).contains(&m.partial_fetch));
        }
    }
}
