//! Topologies by name, for scenario files and command-line runners: each
//! name builds a [`SimulationBuilder`] from a scenario's settings (its tick
//! interval, say), and the scenario's knobs are applied on top.

use std::fmt;
use std::sync::Arc;

use crate::sim::running::property::BoxError;
use crate::sim::running::simulation::{SimulationBuilder, SimulationError};
use crate::sim::world::settings::Settings;

#[cfg(feature = "scenario-files")]
use crate::sim::running::scenario::{self, Scenario, ScenarioError};
#[cfg(feature = "scenario-files")]
use crate::sim::running::simulation::Simulation;

/// Builds one topology's simulation from a scenario's settings.
type Build = Arc<dyn Fn(&Settings) -> Result<SimulationBuilder, BoxError> + Send + Sync>;

/// Topologies by name.
#[derive(Clone, Default)]
pub struct Registry {
    entries: Vec<(String, Build)>,
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

/// Why a registry cannot make a simulation.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// No topology of that name.
    #[error("unknown topology {name:?}: expected one of {}", known.join(", "))]
    UnknownTopology {
        /// The name asked for.
        name: String,
        /// The registry's names.
        known: Vec<String>,
    },
    /// The topology's builder failed (its application does not compose).
    #[error("topology {name:?} cannot be built: {error}")]
    Build {
        /// The topology.
        name: String,
        /// What failed.
        error: BoxError,
    },
    /// The simulation refused the builder's inputs or the knobs.
    #[error("topology {name:?}: {error}")]
    Simulation {
        /// The topology.
        name: String,
        /// What was refused.
        error: SimulationError,
    },
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Registry::default()
    }

    /// Adds topology `name`: `build` makes its simulation from a scenario's
    /// settings. A later entry of the same name replaces an earlier one.
    pub fn topology<F>(mut self, name: impl Into<String>, build: F) -> Self
    where
        F: Fn(&Settings) -> Result<SimulationBuilder, BoxError> + Send + Sync + 'static,
    {
        let name = name.into();
        self.entries.retain(|(existing, _)| *existing != name);
        self.entries.push((name, Arc::new(build)));
        self
    }

    /// The topologies' names, in the order they were added.
    pub fn names(&self) -> Vec<&str> {
        self.entries.iter().map(|(name, _)| name.as_str()).collect()
    }

    /// Topology `name` with `settings` applied.
    pub fn simulation_with(
        &self,
        name: &str,
        settings: &Settings,
    ) -> Result<SimulationBuilder, RegistryError> {
        let (_, build) = self
            .entries
            .iter()
            .find(|(known, _)| known == name)
            .ok_or_else(|| RegistryError::UnknownTopology {
                name: name.to_string(),
                known: self.names().iter().map(|name| name.to_string()).collect(),
            })?;
        let builder = build(settings).map_err(|error| RegistryError::Build {
            name: name.to_string(),
            error,
        })?;
        Ok(builder.settings(*settings))
    }

    /// Reads and checks a scenario file whose `topology` must be one of this
    /// registry's.
    #[cfg(feature = "scenario-files")]
    pub fn load(&self, path: &std::path::Path) -> Result<Scenario, ScenarioError> {
        scenario::load(path, &self.names())
    }

    /// The simulation a scenario describes: its topology with its settings,
    /// seeds and name.
    #[cfg(feature = "scenario-files")]
    pub fn simulation(&self, scenario: &Scenario) -> Result<Simulation, RegistryError> {
        self.simulation_with(&scenario.topology, &scenario.settings)?
            .seeds(scenario.seeds.range())
            .name(scenario.name.clone())
            .build()
            .map_err(|error| RegistryError::Simulation {
                name: scenario.topology.clone(),
                error,
            })
    }
}
