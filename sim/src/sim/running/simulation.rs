//! The public simulation API: any [`App`] with typed input generators,
//! declared upstream causality, the run's knobs and the
//! user's own properties, built into a [`Simulation`] that runs seeds.
//!
//! Every input a generator makes is drawn from the run's choice source
//! ([`Draw`]), so seeds, tapes, replay, shrinking and fuzzing cover the
//! inputs as well as the interleavings and faults.
//!
//! ```
//! use parsley::{Parsley, Stage, Step, Topic, Utf8, I64};
//! use parsley_sim::sim::{Input, Simulation};
//!
//! let clicks: Topic<String, i64> = Topic::with_codecs("clicks", Utf8, I64);
//! let count = Stage::named("count")
//!     .state(I64, || 0i64)
//!     .on(&clicks, |count: i64, _click| Step::of(count + 1))
//!     .build();
//! let app = Parsley::named("shop").stage(count).build()?;
//!
//! let simulation = Simulation::builder(app)
//!     .input(Input::new(&clicks, |draw| (Some(draw.key()), draw.range(1, 9))))
//!     .partitions(2)
//!     .inputs(50)
//!     .budget(300, 2_000)
//!     .build()?;
//! let outcome = simulation.run_seed(7);
//! assert!(outcome.violations.is_empty(), "{:?}", outcome.violations);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use parsley::mutation::Mutation;
use parsley::{App, Topic, TopicName, TopicRef, Tp};

use crate::sim::report::outcome::RunOutcome;
use crate::sim::report::shrink::ShrinkBudget;
use crate::sim::report::{shrink_failure, Failure};
use crate::sim::running::property::{BoxError, Committed, PropertyResult};
use crate::sim::running::run::{run, run_seed, run_watched, Watch};
use crate::sim::world::choice::Choices;
use crate::sim::world::input::{Draw, Generator, PlainInput};
use crate::sim::world::plan::Plan;
use crate::sim::world::settings::{
    Budget, ClockConfig, FaultRates, OrderStrategy, SeedRange, Settings, INSTANCES_MAX,
    PARTITIONS_MAX, TIME_BOUNDARIES_MAX,
};

/// The input of one source topic: a typed generator of its records, drawn
/// from the run's choices; optionally a generator of records the logic
/// rejects (X5), and the upstream records its records may claim.
pub struct Input<K, V> {
    topic: Topic<K, V>,
    generate: Generator,
    rejected: Option<Generator>,
    claims: Vec<(TopicName, f64)>,
    event_time_lag: std::time::Duration,
    tombstones: f64,
}

impl<K: 'static, V: 'static> Input<K, V> {
    /// Records of `topic` made by `generate`: a key (`None` for a null key,
    /// which goes to a drawn partition) and a value.
    pub fn new<G>(topic: &Topic<K, V>, generate: G) -> Self
    where
        G: Fn(&mut Draw<'_>) -> (Option<K>, V) + Send + Sync + 'static,
    {
        Input {
            topic: topic.clone(),
            generate: erase(topic, generate),
            rejected: None,
            claims: Vec::new(),
            event_time_lag: std::time::Duration::ZERO,
            tombstones: 0.0,
        }
    }

    /// Tombstones: with probability `probability`, a generated record with
    /// a key is written with a null value instead, as a table topic's
    /// deletes are (a stream–table join's table, J1). Records without a key
    /// are never tombstones.
    pub fn tombstones(mut self, probability: f64) -> Self {
        self.tombstones = probability;
        self
    }

    /// Out-of-order event time: each record's timestamp is drawn up to
    /// `lag` before the wall clock (uniformly, to the millisecond), as a
    /// producer that stamps records with their events' own times writes
    /// them. Without it a record's timestamp is the wall clock when it is
    /// produced, so each partition's timestamps never go back. This is what
    /// exercises a windowed aggregation's grace and late records (W2, W3).
    pub fn event_time_lag(mut self, lag: std::time::Duration) -> Self {
        self.event_time_lag = lag;
        self
    }

    /// Records the application's logic refuses, so that its tasks stop on
    /// them (X5). The run's `logic_error` fault rate decides when one is
    /// produced, at most one per run; without this generator on any input
    /// that fault never fires.
    pub fn rejected<G>(mut self, generate: G) -> Self
    where
        G: Fn(&mut Draw<'_>) -> (Option<K>, V) + Send + Sync + 'static,
    {
        self.rejected = Some(erase(&self.topic, generate));
        self
    }

    /// Records whose bytes the topic's codecs refuse (a key or value that
    /// does not decode), written as they are: the path of bad input through
    /// the codec to the task's stop or its dead-letter topic (X5). Like
    /// [`Input::rejected`], which it replaces, the run's `logic_error`
    /// fault rate decides when one is produced, at most one per run, and
    /// the task that stops on it stops as expected.
    pub fn malformed<G>(mut self, generate: G) -> Self
    where
        G: Fn(&mut Draw<'_>) -> (Option<Bytes>, Bytes) + Send + Sync + 'static,
    {
        self.rejected = Some(Arc::new(move |draw: &mut Draw<'_>| Ok(generate(draw))));
        self
    }

    /// Upstream causality, declared: each record of this input claims, with
    /// probability `probability`, the latest committed record of `upstream`
    /// (another input) on the same partition, so the gate holds it until
    /// that record is delivered (G2).
    pub fn claims_latest<K2: 'static, V2: 'static>(
        mut self,
        upstream: &Topic<K2, V2>,
        probability: f64,
    ) -> Self {
        self.claims.push((upstream.name().clone(), probability));
        self
    }
}

fn erase<K: 'static, V: 'static, G>(topic: &Topic<K, V>, generate: G) -> Generator
where
    G: Fn(&mut Draw<'_>) -> (Option<K>, V) + Send + Sync + 'static,
{
    let topic = topic.clone();
    Arc::new(move |draw: &mut Draw<'_>| {
        let (key, value) = generate(draw);
        topic.encode(key.as_ref(), &value)
    })
}

/// A check over what a run committed.
pub(crate) type Check = Arc<dyn Fn(&Committed<'_>) -> PropertyResult + Send + Sync>;

/// A condition some seed of a run of many must reach.
pub(crate) type Reached = Arc<dyn Fn(&Committed<'_>) -> Result<bool, BoxError> + Send + Sync>;

/// A user property, named.
#[derive(Clone)]
pub(crate) struct Property {
    pub(crate) name: String,
    pub(crate) check: Check,
}

/// Builds the application a run simulates: called once per run, so that
/// state the logic captures starts afresh in every seed.
pub(crate) type AppFactory = Arc<dyn Fn() -> App + Send + Sync>;

/// A task stop that [`SimulationBuilder::expect_stop`] is asked about: which
/// task stopped, on which record, and why.
#[derive(Clone, Copy, Debug)]
pub struct Stop<'a> {
    /// The stage of the task.
    pub stage: &'a str,
    /// The task's partition.
    pub partition: u32,
    /// The record the task stopped on (`-`@0 when the error names none).
    pub tp: &'a Tp,
    /// Its offset.
    pub offset: u64,
    /// The task's error, as it prints.
    pub error: &'a str,
}

/// A predicate over task stops that a simulation expects.
pub(crate) type ExpectedStop = Arc<dyn Fn(&Stop<'_>) -> bool + Send + Sync>;

/// A user "sometimes" mark, named.
#[derive(Clone)]
pub(crate) struct Sometimes {
    pub(crate) name: String,
    pub(crate) reached: Reached,
}

/// Why a simulation cannot be built: each names the topic, stage or knob.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SimulationError {
    /// An input's topic is not consumed by any stage of the application.
    #[error("input topic {topic:?} is not a source of application {app:?}: no stage consumes it")]
    NotASource {
        /// The topic.
        topic: String,
        /// The application id.
        app: String,
    },
    /// An input's topic is written by a stage: the simulator produces only
    /// to the application's external sources.
    #[error(
        "input topic {topic:?} is written by stage {stage:?}; inputs go to external sources only"
    )]
    WrittenByStage {
        /// The topic.
        topic: String,
        /// The stage that writes it.
        stage: String,
    },
    /// An input declares other codecs than the application does for its topic.
    #[error(
        "input topic {topic:?} is declared with {given}, but the application declares {declared}"
    )]
    CodecMismatch {
        /// The topic.
        topic: String,
        /// The application's codecs.
        declared: String,
        /// The input's codecs.
        given: String,
    },
    /// Two inputs for one topic.
    #[error("topic {topic:?} has two inputs; give each source one generator")]
    DuplicateInput {
        /// The topic.
        topic: String,
    },
    /// An external source of the application has no input generator.
    #[error("application {app:?} consumes {topics:?}, which no stage writes and no input generates: add an Input for each")]
    MissingInput {
        /// The application id.
        app: String,
        /// The sources without an input.
        topics: Vec<String>,
    },
    /// An input claims a topic that is not another input.
    #[error("input {topic:?} claims the latest record of {upstream:?}, which is not an input of this simulation")]
    ClaimsUnknownInput {
        /// The claiming input.
        topic: String,
        /// The claimed topic.
        upstream: String,
    },
    /// A probability outside `[0, 1]`.
    #[error("{what} is {value}, not a probability in [0, 1]")]
    NotAProbability {
        /// What the probability is of.
        what: String,
        /// The value given.
        value: String,
    },
    /// A knob out of its range.
    #[error("{knob} is {value}: it must be in {allowed}")]
    OutOfRange {
        /// The knob, as scenario files name it.
        knob: &'static str,
        /// The value given.
        value: String,
        /// The allowed range.
        allowed: String,
    },
    /// Planted bugs need `parsley`'s `mutations` feature.
    #[doc(hidden)]
    #[error("cannot plant {mutation:?}: this build of parsley lacks the `mutations` feature")]
    MutationsUnavailable {
        /// The bug asked for.
        mutation: String,
    },
    /// Two properties or marks with one name.
    #[error("two properties or sometimes marks are named {name:?}")]
    DuplicateName {
        /// The name.
        name: String,
    },
}

/// An input as declared, before it is checked against the app.
struct DeclaredInput {
    topic: TopicName,
    declaration: TopicRef,
    generate: Generator,
    rejected: Option<Generator>,
    claims: Vec<(TopicName, f64)>,
    event_time_lag: std::time::Duration,
    tombstones: f64,
}

/// Builds a [`Simulation`]: the application, an [`Input`] per external
/// source, and the same knobs as a scenario file.
pub struct SimulationBuilder {
    name: String,
    app: App,
    factory: Option<AppFactory>,
    expected_stops: Vec<(String, ExpectedStop)>,
    inputs: Vec<DeclaredInput>,
    settings: Settings,
    seeds: SeedRange,
    properties: Vec<Property>,
    sometimes: Vec<Sometimes>,
    mutation: Option<Mutation>,
    regressions: Regressions,
    shrink_budget: ShrinkBudget,
    /// Periods given to [`SimulationBuilder::time_boundaries`] beyond the
    /// [`TIME_BOUNDARIES_MAX`] it holds: [`SimulationBuilder::build`]
    /// refuses them.
    boundaries_beyond: usize,
}

/// Where [`Simulation::check`] keeps the shrunk tapes of failed runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Regressions {
    /// Next to the test's source file: `tests/diamond.rs` keeps them in
    /// `tests/sim-regressions/diamond.txt` (proptest's habit).
    #[default]
    BesideTheTest,
    /// In this file.
    File(std::path::PathBuf),
    /// Nowhere: failures are reported, not kept.
    Off,
}

impl fmt::Debug for SimulationBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimulationBuilder")
            .field("name", &self.name)
            .field("app", &self.app.id())
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl SimulationBuilder {
    /// Adds the input of one source topic.
    pub fn input<K: 'static, V: 'static>(mut self, input: Input<K, V>) -> Self {
        self.inputs.push(DeclaredInput {
            topic: input.topic.name().clone(),
            declaration: input.topic.declaration(),
            generate: input.generate,
            rejected: input.rejected,
            claims: input.claims,
            event_time_lag: input.event_time_lag,
            tombstones: input.tombstones,
        });
        self
    }

    /// The name reports give the simulation (the application id by default).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Every knob at once, as a scenario file sets them.
    pub fn settings(mut self, settings: Settings) -> Self {
        self.settings = settings;
        self
    }

    /// Partitions of every source topic, `1..=64`.
    pub fn partitions(mut self, partitions: u32) -> Self {
        self.settings.partitions = partitions;
        self
    }

    /// Application instances sharing the tasks, `1..=8`.
    pub fn instances(mut self, instances: u32) -> Self {
        self.settings.instances = instances;
        self
    }

    /// Input records produced during the safety phase, `>= 1`.
    pub fn inputs(mut self, inputs: u64) -> Self {
        self.settings.workload.inputs = inputs;
        self
    }

    /// Distinct keys [`Draw::key`] draws from, `>= 1`.
    pub fn keys(mut self, keys: u32) -> Self {
        self.settings.workload.keys = keys;
        self
    }

    /// The fraction of input batches produced in a transaction, `[0, 1]`.
    pub fn transactional(mut self, fraction: f64) -> Self {
        self.settings.workload.transactional = fraction;
        self
    }

    /// The wall clock and its intervals.
    pub fn clock(mut self, clock: ClockConfig) -> Self {
        self.settings.clock = clock;
        self
    }

    /// A period the application's own logic keys on (a report per minute,
    /// a window of its own), added to [`ClockConfig::time_boundaries_ms`]:
    /// boundary-seeking time aims the clock's advances and input
    /// timestamps at its multiples from the epoch and the millisecond
    /// either side, as at the window edges, gaps and TTLs the library
    /// knows. Up to [`TIME_BOUNDARIES_MAX`] periods (a period below 1 ms
    /// counts as 1 ms); call it after [`SimulationBuilder::settings`] and
    /// [`SimulationBuilder::clock`], which set every knob of the clock.
    pub fn time_boundaries(mut self, period: std::time::Duration) -> Self {
        let period = u64::try_from(period.as_millis()).unwrap_or(u64::MAX).max(1);
        let slots = &mut self.settings.clock.time_boundaries_ms;
        match slots
            .iter_mut()
            .find(|slot| **slot == 0 || **slot == period)
        {
            Some(slot) => *slot = period,
            None => self.boundaries_beyond += 1,
        }
        self
    }

    /// Which task acts and which lane delivers: uniform draws (the
    /// default) or PCT ([`OrderStrategy::Pct`]).
    pub fn order(mut self, order: OrderStrategy) -> Self {
        self.settings.order = order;
        self
    }

    /// The fault rates ([`FaultRates::none`] for none).
    pub fn faults(mut self, faults: FaultRates) -> Self {
        self.settings.faults = faults;
        self
    }

    /// Steps with inputs and faults, then steps within which the world must
    /// quiesce (I8); both `>= 1`.
    pub fn budget(mut self, safety_steps: u64, liveness_steps: u64) -> Self {
        self.settings.budget = Budget {
            safety_steps,
            liveness_steps,
        };
        self
    }

    /// The seeds [`Simulation::check`] runs: `start..start + count`
    /// (default `0..100`; `PARSLEY_SIM_SEEDS` overrides the count).
    pub fn seeds(mut self, seeds: Range<u64>) -> Self {
        self.seeds = SeedRange {
            start: seeds.start,
            count: seeds.end.saturating_sub(seeds.start),
        };
        self
    }

    /// A property every seed must keep: `check` reads what the run
    /// committed ([`Committed`]) and returns an error saying what is wrong.
    /// A failing property is reported, shrunk and replayed like a rule
    /// violation.
    pub fn property<F>(mut self, name: impl Into<String>, check: F) -> Self
    where
        F: Fn(&Committed<'_>) -> PropertyResult + Send + Sync + 'static,
    {
        self.properties.push(Property {
            name: name.into(),
            check: Arc::new(check),
        });
        self
    }

    /// A condition some seed must reach: [`Simulation::check`] fails, naming
    /// it, when none of its seeds does (a sign the workload or the faults
    /// never exercise the case). An error from `reached` fails that seed.
    pub fn sometimes<F>(mut self, name: impl Into<String>, reached: F) -> Self
    where
        F: Fn(&Committed<'_>) -> Result<bool, BoxError> + Send + Sync + 'static,
    {
        self.sometimes.push(Sometimes {
            name: name.into(),
            reached: Arc::new(reached),
        });
        self
    }

    /// A task stop this simulation expects, besides those the simulation
    /// itself causes (a record of an [`Input::rejected`] generator, which
    /// the logic-error fault produces, and what it caused downstream): a
    /// stop for which `expected` returns true is not a violation. Every
    /// other stop is: the checker names the task, the record and the error.
    /// `name` says why the stop is expected, for the reader of the test.
    pub fn expect_stop<F>(mut self, name: impl Into<String>, expected: F) -> Self
    where
        F: Fn(&Stop<'_>) -> bool + Send + Sync + 'static,
    {
        self.expected_stops.push((name.into(), Arc::new(expected)));
        self
    }

    /// Where failing tapes are kept and replayed from ([`Regressions`]).
    pub fn regressions(mut self, regressions: Regressions) -> Self {
        self.regressions = regressions;
        self
    }

    /// At most how many candidate tapes [`Simulation::check`] tries when it
    /// shrinks a failure (default: no cap, only the time of
    /// [`SimulationBuilder::shrink_time`]; both apply when both are set).
    /// Shrinking is deterministic in its attempts, so a cap with
    /// `shrink_time(None)` gives the same tape on every machine. A report
    /// says whether shrinking reached a local minimum or stopped on its
    /// budget; `PARSLEY_SIM_SHRINK_ATTEMPTS=N` overrides it for one
    /// `cargo test`.
    pub fn shrink_attempts(mut self, attempts: usize) -> Self {
        self.shrink_budget.attempts = Some(attempts);
        self
    }

    /// How long [`Simulation::check`] may shrink a failure, in wall-clock
    /// time (default 60 s, [`ShrinkBudget::DEFAULT_TIME`]); `None`: no
    /// limit but [`SimulationBuilder::shrink_attempts`].
    /// `PARSLEY_SIM_SHRINK_SECONDS=S` overrides it for one `cargo test`
    /// (`0`: no limit).
    pub fn shrink_time(mut self, time: Option<std::time::Duration>) -> Self {
        self.shrink_budget.time = time;
        self
    }

    /// Plants a bug of the core (`parsley::mutation`) on every thread that
    /// runs this simulation, to show that the checker finds it. Planted bugs
    /// exist only with `parsley`'s `mutations` feature; never in production,
    /// and hidden from the docs as the bugs are.
    #[doc(hidden)]
    pub fn planted(mut self, mutation: Option<Mutation>) -> Self {
        self.mutation = mutation;
        self
    }

    /// Checks the inputs against the application and the knobs against
    /// their ranges.
    pub fn build(self) -> Result<Simulation, SimulationError> {
        check_settings(&self.settings)?;
        if self.boundaries_beyond > 0 {
            return Err(SimulationError::OutOfRange {
                knob: "clock.time_boundaries_ms",
                value: format!("{} periods", TIME_BOUNDARIES_MAX + self.boundaries_beyond),
                allowed: format!("[0, {TIME_BOUNDARIES_MAX}] periods"),
            });
        }
        if let Some(mutation) = self.mutation {
            if !parsley::mutation::AVAILABLE {
                return Err(SimulationError::MutationsUnavailable {
                    mutation: mutation.name().to_string(),
                });
            }
        }
        let app = &self.app;
        let written_by = |topic: &TopicName| {
            app.stages()
                .iter()
                .find(|plan| plan.stage.sinks().iter().any(|sink| sink.name == *topic))
        };
        let consumed = |topic: &TopicName| {
            app.stages().iter().any(|plan| {
                plan.stage
                    .sources()
                    .iter()
                    .any(|source| source.name == *topic)
            })
        };
        let names: Vec<TopicName> = self
            .inputs
            .iter()
            .map(|input| input.topic.clone())
            .collect();
        for (index, input) in self.inputs.iter().enumerate() {
            let (topic, declaration, claims) = (&input.topic, &input.declaration, &input.claims);
            if names[..index].contains(topic) {
                return Err(SimulationError::DuplicateInput {
                    topic: topic.to_string(),
                });
            }
            if !consumed(topic) {
                return Err(SimulationError::NotASource {
                    topic: topic.to_string(),
                    app: app.id().to_string(),
                });
            }
            if let Some(plan) = written_by(topic) {
                return Err(SimulationError::WrittenByStage {
                    topic: topic.to_string(),
                    stage: plan.name().to_string(),
                });
            }
            if let Some(declared) = app.declaration(topic.as_str()) {
                if !declared.same_codecs(declaration) {
                    return Err(SimulationError::CodecMismatch {
                        topic: topic.to_string(),
                        declared: declared.codecs().unwrap_or_default(),
                        given: declaration.codecs().unwrap_or_default(),
                    });
                }
            }
            probability_in_range(
                &format!("the probability of a tombstone on {topic}"),
                input.tombstones,
            )?;
            for (upstream, probability) in claims {
                if !names.contains(upstream) || upstream == topic {
                    return Err(SimulationError::ClaimsUnknownInput {
                        topic: topic.to_string(),
                        upstream: upstream.to_string(),
                    });
                }
                probability_in_range(
                    &format!("the probability that {topic} claims {upstream}"),
                    *probability,
                )?;
            }
        }
        let mut missing = Vec::new();
        for plan in app.stages() {
            for source in plan.stage.sources() {
                let external = written_by(&source.name).is_none()
                    && app.tick_topic_owner(source.name.as_str()).is_none();
                let fed = names.contains(&source.name);
                let name = source.name.to_string();
                if external && !fed && !missing.contains(&name) {
                    missing.push(name);
                }
            }
        }
        if !missing.is_empty() {
            return Err(SimulationError::MissingInput {
                app: app.id().to_string(),
                topics: missing,
            });
        }
        let mut seen: Vec<&str> = Vec::new();
        for name in self
            .properties
            .iter()
            .map(|property| property.name.as_str())
            .chain(self.sometimes.iter().map(|mark| mark.name.as_str()))
        {
            if seen.contains(&name) {
                return Err(SimulationError::DuplicateName {
                    name: name.to_string(),
                });
            }
            seen.push(name);
        }
        let inputs = self
            .inputs
            .iter()
            .map(|input| PlainInput {
                topic: input.topic.clone(),
                generate: Arc::clone(&input.generate),
                rejected: input.rejected.clone(),
                claims: input
                    .claims
                    .iter()
                    .map(|(upstream, probability)| {
                        let index = names
                            .iter()
                            .position(|name| name == upstream)
                            .expect("claims were checked against the inputs");
                        (index, *probability)
                    })
                    .collect(),
                claimed: self.inputs.iter().any(|other| {
                    other
                        .claims
                        .iter()
                        .any(|(upstream, _)| *upstream == input.topic)
                }),
                event_time_lag_ms: u64::try_from(input.event_time_lag.as_millis())
                    .unwrap_or(u64::MAX),
                tombstones: input.tombstones,
            })
            .collect();
        Ok(Simulation {
            inner: Arc::new(Inner {
                name: self.name,
                app: self.app,
                factory: self.factory,
                expected_stops: self.expected_stops,
                inputs,
                settings: self.settings,
                seeds: self.seeds,
                properties: self.properties,
                sometimes: self.sometimes,
                mutation: self.mutation,
                regressions: self.regressions,
                shrink_budget: self.shrink_budget,
            }),
        })
    }
}

fn probability_in_range(what: &str, value: f64) -> Result<(), SimulationError> {
    if (0.0..=1.0).contains(&value) {
        Ok(())
    } else {
        Err(SimulationError::NotAProbability {
            what: what.to_string(),
            value: value.to_string(),
        })
    }
}

/// The knobs' ranges, as scenario files check them.
fn check_settings(settings: &Settings) -> Result<(), SimulationError> {
    fn within(
        knob: &'static str,
        value: u64,
        lo: u64,
        hi: Option<u64>,
    ) -> Result<(), SimulationError> {
        let fits = value >= lo && hi.is_none_or(|hi| value <= hi);
        if fits {
            return Ok(());
        }
        Err(SimulationError::OutOfRange {
            knob,
            value: value.to_string(),
            allowed: match hi {
                Some(hi) => format!("[{lo}, {hi}]"),
                None => format!("[{lo}, ∞)"),
            },
        })
    }
    within(
        "partitions",
        settings.partitions.into(),
        1,
        Some(PARTITIONS_MAX.into()),
    )?;
    within(
        "instances",
        settings.instances.into(),
        1,
        Some(INSTANCES_MAX.into()),
    )?;
    within("workload.inputs", settings.workload.inputs, 1, None)?;
    within("workload.keys", settings.workload.keys.into(), 1, None)?;
    probability_in_range("workload.transactional", settings.workload.transactional)?;
    let clock = &settings.clock;
    within(
        "clock.step_ms.min",
        clock.step_ms.min,
        1,
        Some(clock.step_ms.max),
    )?;
    within("clock.tick_interval_ms", clock.tick_interval_ms, 1, None)?;
    within(
        "clock.commit_interval_ms",
        clock.commit_interval_ms,
        1,
        None,
    )?;
    within(
        "clock.transaction_timeout_ms",
        clock.transaction_timeout_ms,
        1,
        None,
    )?;
    let faults = &settings.faults;
    for (what, rate) in [
        ("faults.abort", faults.abort),
        ("faults.commit_failure", faults.commit_failure),
        ("faults.crash", faults.crash),
        ("faults.move_task", faults.move_task),
        ("faults.hanging_transaction", faults.hanging_transaction),
        ("faults.logic_error", faults.logic_error),
        ("faults.partial_fetch", faults.partial_fetch),
        ("faults.empty_fetch", faults.empty_fetch),
        ("faults.marker_lag", faults.marker_lag),
    ] {
        probability_in_range(what, rate)?;
    }
    within(
        "faults.marker_lag_ms.min",
        faults.marker_lag_ms.min,
        0,
        Some(faults.marker_lag_ms.max),
    )?;
    within("budget.safety_steps", settings.budget.safety_steps, 1, None)?;
    within(
        "budget.liveness_steps",
        settings.budget.liveness_steps,
        1,
        None,
    )?;
    Ok(())
}

#[derive(Clone)]
struct Inner {
    name: String,
    app: App,
    factory: Option<AppFactory>,
    expected_stops: Vec<(String, ExpectedStop)>,
    inputs: Arc<[PlainInput]>,
    settings: Settings,
    seeds: SeedRange,
    properties: Vec<Property>,
    sometimes: Vec<Sometimes>,
    mutation: Option<Mutation>,
    regressions: Regressions,
    shrink_budget: ShrinkBudget,
}

/// A checked simulation of one application: cheap to clone and shared by the
/// threads that run its seeds.
#[derive(Clone)]
pub struct Simulation {
    inner: Arc<Inner>,
}

impl fmt::Debug for Simulation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Simulation")
            .field("name", &self.inner.name)
            .field("app", &self.inner.app.id())
            .field("settings", &self.inner.settings)
            .finish_non_exhaustive()
    }
}

impl Simulation {
    /// Starts a simulation of `app` with the default knobs ([`Settings`]).
    ///
    /// Every seed, thread and shrink attempt runs this one `app`: state its
    /// logic captures (a counter, a dedupe set, a buffer behind a mutex)
    /// outlives a run and makes seeds depend on each other, which S4
    /// forbids. [`Simulation::check`] runs seeds twice to catch that and
    /// reports it as "logic is not a pure function". To give every run its
    /// own copy of such state, build with [`Simulation::builder_fn`].
    pub fn builder(app: App) -> SimulationBuilder {
        SimulationBuilder {
            name: app.id().to_string(),
            app,
            factory: None,
            expected_stops: Vec::new(),
            inputs: Vec::new(),
            settings: Settings::default(),
            seeds: SeedRange {
                start: 0,
                count: 100,
            },
            properties: Vec::new(),
            sometimes: Vec::new(),
            mutation: None,
            regressions: Regressions::default(),
            shrink_budget: ShrinkBudget::default(),
            boundaries_beyond: 0,
        }
    }

    /// Starts a simulation of the application `app` builds, with the
    /// default knobs ([`Settings`]): `app` is called once to check the
    /// inputs against, then once per run (every seed, every replay and every
    /// shrink attempt), and the checker replays the logic on a copy of its
    /// own. State the closures capture therefore starts afresh in every run,
    /// and seeds stay independent even when the logic keeps state it should
    /// not (S4); such a run then fails on its own, reproducibly.
    pub fn builder_fn<F>(app: F) -> SimulationBuilder
    where
        F: Fn() -> App + Send + Sync + 'static,
    {
        let mut builder = Simulation::builder(app());
        builder.factory = Some(Arc::new(app));
        builder
    }

    /// The application one run simulates: a fresh one from the factory of
    /// [`Simulation::builder_fn`], otherwise the one shared application.
    pub fn fresh_app(&self) -> App {
        match &self.inner.factory {
            Some(factory) => factory(),
            None => self.inner.app.clone(),
        }
    }

    /// Whether every run gets an application of its own
    /// ([`Simulation::builder_fn`]).
    pub fn app_per_run(&self) -> bool {
        self.inner.factory.is_some()
    }

    /// The simulation's name in reports.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The application.
    pub fn app(&self) -> &App {
        &self.inner.app
    }

    /// The knobs.
    pub fn settings(&self) -> &Settings {
        &self.inner.settings
    }

    /// The seeds [`Simulation::check`] runs by default.
    pub fn seeds(&self) -> Range<u64> {
        self.inner.seeds.range()
    }

    /// The planted bug, if any.
    #[doc(hidden)]
    pub fn mutation(&self) -> Option<Mutation> {
        self.inner.mutation
    }

    /// The names of the user's "sometimes" marks, in the order a
    /// [`RunOutcome::reached`] lists them.
    pub fn sometimes_names(&self) -> impl Iterator<Item = &str> {
        self.inner.sometimes.iter().map(|mark| mark.name.as_str())
    }

    /// Runs one seed on this thread (planting the simulation's bug, if any).
    pub fn run_seed(&self, seed: u64) -> RunOutcome {
        self.plant();
        run_seed(self, seed)
    }

    /// Runs one seed as [`Simulation::run_seed`] does, calling `watch`
    /// after every step of the safety phase with the cluster as it is then
    /// ([`Watch`]): to read a running application as a tool outside it
    /// would, such as an audit at a consistent cut or a lag probe. The
    /// watcher reads and does not choose: the run is the seed's.
    pub fn run_seed_watched(&self, seed: u64, mut watch: impl FnMut(Watch<'_>)) -> RunOutcome {
        self.plant();
        let mut outcome = run_watched(self, Choices::seeded(seed), &mut watch);
        outcome.seed = Some(seed);
        outcome
    }

    /// Runs one tape (a replay or a shrink candidate) on this thread.
    pub fn run_tape(&self, tape: &[u8]) -> RunOutcome {
        self.plant();
        let mut choices = Choices::from_tape(tape.to_vec());
        choices.keep_canonical();
        run(self, choices)
    }

    /// Shrinks a failing run of this simulation to a simpler tape that
    /// fails the same way (the same invariant, with the same cause),
    /// replaying each candidate with [`Simulation::run_tape`] within
    /// `budget`: a [`ShrinkBudget`], or a number of attempts (no time
    /// limit, the same result on every machine). `None` when `original`
    /// did not fail; see [`Failure::reproduces`] for a failure that does
    /// not fail again.
    pub fn shrink(&self, original: RunOutcome, budget: impl Into<ShrinkBudget>) -> Option<Failure> {
        shrink_failure(|tape| self.run_tape(tape), original, budget.into())
    }

    /// This simulation with other knobs: the bounded exhaustive mode runs
    /// its tiny worlds this way.
    pub(crate) fn with_settings(&self, settings: Settings) -> Simulation {
        let mut inner = Inner::clone(&self.inner);
        inner.settings = settings;
        Simulation {
            inner: Arc::new(inner),
        }
    }

    /// Plants the simulation's bug on this thread (and clears any other).
    pub(crate) fn plant(&self) {
        parsley::mutation::set(self.inner.mutation);
    }

    /// The inputs' declared claims ([`Input::claims_latest`]): each input
    /// topic with a topic whose latest record it may claim.
    pub(crate) fn input_claims(&self) -> Vec<(TopicName, TopicName)> {
        let inputs = &self.inner.inputs;
        inputs
            .iter()
            .flat_map(|input| {
                input
                    .claims
                    .iter()
                    .filter(|(_, probability)| *probability > 0.0)
                    .map(|(upstream, _)| (input.topic.clone(), inputs[*upstream].topic.clone()))
            })
            .collect()
    }

    /// What one run's world is built from: a fresh application
    /// ([`Simulation::fresh_app`]), the inputs and the knobs.
    pub(crate) fn plan(&self) -> Plan {
        Plan {
            app: self.fresh_app(),
            inputs: Arc::clone(&self.inner.inputs),
            settings: self.inner.settings,
        }
    }

    pub(crate) fn properties(&self) -> &[Property] {
        &self.inner.properties
    }

    pub(crate) fn regressions(&self) -> &Regressions {
        &self.inner.regressions
    }

    /// The shrink budget of [`Simulation::check`]
    /// ([`SimulationBuilder::shrink_time`],
    /// [`SimulationBuilder::shrink_attempts`]).
    pub(crate) fn shrink_budget(&self) -> ShrinkBudget {
        self.inner.shrink_budget
    }

    pub(crate) fn expected_stops(&self) -> &[(String, ExpectedStop)] {
        &self.inner.expected_stops
    }

    pub(crate) fn sometimes(&self) -> &[Sometimes] {
        &self.inner.sometimes
    }
}
