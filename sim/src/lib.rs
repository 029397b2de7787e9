//! The deterministic harness for Parsley: everything needed to run the
//! `parsley` core without a Kafka cluster, and to check that it keeps its
//! guarantees.
//!
//! * [`model`]: an in-memory Kafka with real transaction semantics:
//!   transaction markers that take offsets, the last stable offset,
//!   `read_committed` fetches, fencing, and transactions left hanging until
//!   the broker's timeout.
//! * [`TaskHost`]: one core task's producer, consumer and transaction over
//!   the model, shared by every driver here.
//! * [`TestDriver`]: Parsley's TopologyTestDriver. Each pipe and each
//!   [`TestDriver::advance_wall_clock`] runs synchronously to quiescence and
//!   commits; the wall clock moves only when the test moves it, so ticks are
//!   deterministic.
//! * [`sim`]: the seeded simulator. Every choice (which head is delivered,
//!   how far the clock moves, which fault fires) comes from one choice
//!   source, so a run replays exactly from its seed or tape and shrinks; an
//!   independent checker recomputes the invariants I1–I9 from the trace and
//!   the logs ([`sim::Invariant`]).
//! * [`audit`]: the log-only audit of `parsley::audit` over the model's
//!   committed logs (`parsley-live` reads a cluster's the same way).
//! * `cli` (feature `cli`): the command-line runner over a registry of
//!   topologies; the example topologies and the `parsley-sim` binary that
//!   runs it over them live in the `parsley-examples` crate.
//!
//! The rule ids are defined in `docs/RULES.md` of the repository;
//! `docs/CONCEPTS.md` has runnable examples of how ticks, state, fan-outs and
//! offsets behave under the test driver.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use parsley::{Json, Parsley, Stage, Step, Topic};
//! use parsley_sim::TestDriver;
//!
//! let orders: Topic<String, i64> = Topic::new("orders");
//! let totals = Stage::named("totals")
//!     .state(Json, || 0i64)
//!     .on(&orders, |total: i64, order| Step::of(total + order.value()))
//!     .build();
//! let app = Parsley::named("shop").stage(totals).build()?;
//!
//! let driver = TestDriver::new(&app)?;
//! driver.input(&orders)?.pipe("alice".to_string(), 30)?;
//! driver.input(&orders)?.pipe("alice".to_string(), 12)?;
//! assert_eq!(driver.key_slot::<i64, _, _>("totals", &orders, &"alice".to_string())?, Some(42));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs)]

// The face: the test driver and the task host are private modules whose
// names the root re-exports; `model`, `sim`, `audit` and `cli` are
// namespaces whose names are not repeated at the root.
pub mod audit;
#[cfg(feature = "cli")]
pub mod cli;
mod driver;
mod host;
pub mod model;
pub mod sim;

pub use driver::{
    render_records, render_ticks, ClusterView, DriverError, IntoKey, IntoValue, JsonKey,
    KeyValueStore, OutputRecord, StoreKey, TestDriver, TestDriverBuilder, TestInputTopic,
    TestOutputTopic, TestRecord, TraceEvent,
};
pub use host::{CommitOutcome, HostError, Markers, Sent, SentTick, TaskHost};
