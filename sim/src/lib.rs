//! The deterministic harness for Parsley: an in-memory Kafka model with
//! transactions ([`model`]), the [`TaskHost`] that connects a core task to it,
//! and the [`TestDriver`].

pub mod audit;
pub mod driver;
pub mod host;
#[cfg(feature = "live")]
pub mod live;
pub mod model;
pub mod scheduler;
pub mod sim;
pub mod text;
pub mod topologies;

pub use driver::{
    DriverError, OutputRecord, TestDriver, TestInputTopic, TestOutputTopic, TestRecord,
};
pub use host::TaskHost;
