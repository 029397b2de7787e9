//! The deterministic simulator: a world of application instances over the
//! Kafka model, driven by one choice source, with faults, an independent
//! checker, the user's properties, shrinking and scenarios.
//!
//! Any [`App`](parsley::App) is simulated through [`Simulation`]: an
//! [`Input`] per external source, the run's knobs ([`Settings`]), properties
//! over what was committed ([`Committed`]), and [`Simulation::check`] to run
//! many seeds from `cargo test`.

pub mod checker;
pub mod choice;
pub mod property;
pub mod purity;
pub mod registry;
pub mod report;
pub mod run;
pub mod runner;
#[cfg(feature = "scenario-files")]
pub mod scenario;
pub mod settings;
pub mod shrink;
pub mod simulation;
pub mod stops;
pub mod tape;
pub mod timeline;
pub mod trace;
pub mod world;

pub use checker::{Invariant, Violation};
pub use choice::Choices;
pub use property::{BoxError, Committed, PropertyFailure, PropertyResult, ReadError};
pub use registry::{Registry, RegistryError};
pub use run::{run, run_seed, RunOutcome};
pub use runner::Summary;
#[cfg(feature = "scenario-files")]
pub use scenario::Scenario;
pub use settings::{Budget, ClockConfig, FaultRates, Settings, StepRange, Workload};
pub use simulation::{
    Draw, Input, Regressions, Simulation, SimulationBuilder, SimulationError, Stop,
};
