//! Running: the public builder of a [`Simulation`], its knobs' checks, the
//! user's properties, one run ([`run`]) and many ([`runner`]), the judging
//! of stopped tasks and of impure logic, the registry of named topologies
//! and the scenario files that pick one.
//!
//! The top floor: it makes a world's plain [`Plan`] from a `Simulation`,
//! runs it, has the checker judge the trace and the reports write up what
//! failed. Nothing below imports it.
//!
//! [`Simulation`]: simulation::Simulation
//! [`Plan`]: crate::sim::world::plan::Plan

pub(crate) mod history;
pub(crate) mod pool;
pub(crate) mod property;
pub(crate) mod purity;
pub(crate) mod registry;
pub(crate) mod run;
pub(crate) mod runner;
#[cfg(feature = "scenario-files")]
pub(crate) mod scenario;
pub(crate) mod simulation;
pub(crate) mod stops;
