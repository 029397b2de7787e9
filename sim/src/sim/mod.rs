//! The deterministic simulator: a world of application
//! instances over the Kafka model, driven by one choice source, with faults,
//! an independent checker, shrinking and scenarios.

pub mod checker;
pub mod choice;
pub mod planted;
pub mod report;
pub mod run;
pub mod scenario;
pub mod shrink;
pub mod timeline;
pub mod topology;
pub mod trace;
pub mod world;

pub use checker::{Invariant, Violation};
pub use choice::Choices;
pub use run::{run, run_seed, RunOutcome};
pub use scenario::Scenario;
