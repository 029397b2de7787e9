//! Parsley's example topologies, as Kafka Streams keeps its own in
//! `streams/examples`: worked applications built with the public API of
//! `parsley`, run by both drivers.
//!
//! * the topologies themselves (a module each, re-exported here), for the docs, the test
//!   driver's tests and the benchmarks;
//! * [`TopologyName`]: the one list of them, from which both registries
//!   are built;
//! * [`simulations`]: each as a simulation, through the public simulation
//!   API like any user's application, and [`registry`], which the
//!   `parsley-sim` binary of this crate runs scenario files over;
//! * [`cpu`]: a process's CPU time from `/proc`, for the benches;
//! * [`planted`]: which shipped scenario exposes each planted bug;
//! * `live` (feature `live`): their inputs on a real Kafka cluster, for
//!   the `parsley-live` binary of this crate and the live tests.
//!
//! Nothing here is part of the harness (`parsley-sim`) or the runtime
//! (`parsley-live`): this crate sits above both, and neither depends on it.

#![warn(missing_docs)]

pub mod as_of;
pub mod consistent;
pub mod cpu;
pub mod example;
#[cfg(feature = "live")]
pub mod live;
pub mod order_labels;
pub mod planted;
pub mod simulations;
pub mod storefront;

pub use as_of::{as_of, AsOfTopics};
pub use consistent::{invoices, ledger, InvoiceTopics, LedgerTopics};
pub use example::{
    namespaced, ExampleError, ExampleTopology, InputTopic, TopologyName, LIVE_RESERVATION_MS,
};
pub use order_labels::{order_labels, order_labels_named, OrderLabelsTopics};
pub use simulations::registry;
pub use storefront::{storefront, Standing, StorefrontTopics};

/// The shipped scenario file `scenarios/<name>.toml` of the repository,
/// wherever the caller is built from (this crate's tests, the fuzz crate).
pub fn scenario_path(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios")
        .join(format!("{name}.toml"))
}

mod branches;
mod by_product;
mod chain;
mod credit;
mod dedupe;
mod diamond;
mod enrichment;
mod fan_in;
mod fan_out;
mod payments;
mod regroup;
mod sessions;
mod settlement;
mod shared;
mod timers;
mod windows;

pub use branches::*;
pub use by_product::*;
pub use chain::*;
pub use credit::*;
pub use dedupe::*;
pub use diamond::*;
pub use enrichment::*;
pub use fan_in::*;
pub use fan_out::*;
pub use payments::*;
pub use regroup::*;
pub use sessions::*;
pub use settlement::*;
pub use shared::{checked, Order};
pub(crate) use shared::{long_topic, order_topic, text_topic};
pub use timers::*;
pub use windows::*;

/// The snippets of `README.md`, run as doc tests here, where the runtime
/// (for "Run it on Kafka", feature `live`), the harness (for "Test your
/// topology") and the examples are all at hand, so that none of them can
/// drift from the API.
#[cfg(all(doctest, feature = "live"))]
#[doc = include_str!("../../../README.md")]
pub struct Readme;

/// The examples of `docs/CONCEPTS.md`, run as doc tests under the
/// `TestDriver` so the concepts page cannot drift from the behaviour.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/CONCEPTS.md")]
pub struct Concepts;
