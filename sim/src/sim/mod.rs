//! The deterministic simulator: a world of application instances over the
//! Kafka model, driven by one choice source, with faults, an independent
//! checker, the user's properties, shrinking and scenarios.
//!
//! Any [`App`](parsley::App) is simulated through [`Simulation`]: an
//! [`Input`] per external source, the run's knobs ([`Settings`]), properties
//! over what was committed ([`Committed`]), and [`Simulation::check`] to run
//! many seeds from `cargo test`.
//!
//! What is here is what a user writes against: the builder and its knobs,
//! the properties' view of a run, a run's outcome with its trace and
//! violations, and the stories and pictures reports are made of. The
//! simulator's inside is five wings, private to the crate, each importing
//! only the ones below it:
//!
//! * `explore`: the bounded exhaustive mode ([`Simulation::explore`]), a
//!   depth-first search over every schedule of a tiny run;
//! * `running`: the builder, properties, one run and many, the judging of
//!   stopped tasks and impure logic, the registry and scenario files;
//! * `report`: a run's outcome and the causes violations are grouped by,
//!   shrinking, stories and the timeline picture;
//! * `checker`: the independent oracle of the invariants, over the trace
//!   and the logs;
//! * `world`: the world itself, the choice source and its tapes, the
//!   knobs, the plain inputs a world is built from, the trace and counters.

pub(crate) mod checker;
pub(crate) mod explore;
pub(crate) mod report;
pub(crate) mod running;
pub(crate) mod world;

pub use checker::{
    DeliveryOf, Finding, Gate, Invariant, NotJudged, Related, Relation, TxnEnd, Violation,
};
pub use explore::{Bounds, Exploration, FaultKind};
pub use report::outcome::RunOutcome;
pub use report::outliers::{Outlier, OUTLIER_FACTOR};
pub use report::shrink::{ShrinkBudget, Spent};
pub use report::timeline::{render_html as render_timeline, stamps_in, tick_topics, StampOf};
pub use report::{render as render_report, story, story_of, Failure};
pub use running::property::{BoxError, Committed, PropertyFailure, PropertyResult, ReadError};
pub use running::registry::{Registry, RegistryError};
pub use running::run::{run, run_seed, Watch};
pub use running::runner::Summary;
#[cfg(feature = "scenario-files")]
pub use running::scenario::{Scenario, ScenarioError};
pub use running::simulation::{
    Input, Regressions, Simulation, SimulationBuilder, SimulationError, Stop,
};
pub use world::choice::Choices;
pub use world::input::Draw;
pub use world::settings::{
    Budget, ClockConfig, FaultRates, LocalDisk, OrderStrategy, Queries, SeedRange, Settings,
    StepRange, TimeStrategy, Workload, TIME_BOUNDARIES_MAX,
};
pub use world::stats::{Marks, Stats};
pub use world::trace::{AbortCause, Entry, Event, InputOutcome, TaskAt, TxnRef};
