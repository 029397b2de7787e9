//! What one world is built from, as plain data: the application this run
//! simulates, its inputs with their types erased, and the knobs. The
//! running wing makes a [`Plan`] from the public `Simulation` for every
//! run; the world never sees the builder.

use std::sync::Arc;

use parsley::App;

use crate::sim::world::input::PlainInput;
use crate::sim::world::settings::Settings;

/// A world's description: everything [`World::new`] needs and nothing of
/// the properties, marks or expected stops judged after the run.
///
/// [`World::new`]: crate::sim::world::World::new
#[derive(Clone)]
pub(crate) struct Plan {
    /// The application this run simulates (built for the run when the
    /// simulation has a factory).
    pub(crate) app: App,
    /// Each external source's generators, shared by every run.
    pub(crate) inputs: Arc<[PlainInput]>,
    /// The run's knobs.
    pub(crate) settings: Settings,
}
