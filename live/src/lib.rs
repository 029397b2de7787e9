//! Runs Parsley applications on Apache Kafka: the same sans-IO core that
//! the harness tests, driven against a real cluster through rust-rdkafka
//! (librdkafka compiled from source and linked statically) and tokio.
//!
//! This is the crate a production binary depends on; it does not depend on
//! the harness (`parsley-sim`), as Kafka Streams' runtime does not depend on
//! its test utilities. It holds:
//!
//! - the runtime ([`Runtime`], [`RuntimeConfig`]): an application's tasks
//!   on a cluster, with group membership, failover, fencing, logs and
//!   metrics;
//! - [`cli`]: the operator commands (`setup`, `run`, `status`, `skip`,
//!   `audit`) over a registry of the user's applications, in one call from
//!   `main`;
//! - status and read-back ([`task_status`], [`read_committed`]): what a
//!   cluster says of an application, read from outside, and the committed
//!   topics read back for [`parsley::audit`];
//! - [`serve_endpoints`]: an instance's `/metrics`, `/health`, `/ready`
//!   and `/query`;
//! - [`query`]: interactive queries, a stateful stage's committed state
//!   read by key from outside ([`Runtime::query`]);
//! - [`InstanceState`] and [`TaskState`]: an instance's name and state, and
//!   its tasks' states;
//! - a task's local state store and its checkpoint, so that a restart
//!   restores only the changelog after the checkpoint
//!   ([`RuntimeConfig`]'s state directory);
//! - [`LiveClient`]: rdkafka wrapped with the in-memory model's operations,
//!   and the client properties of a secured cluster ([`properties`]);
//! - whether the cluster answers, and over TLS and SASL ([`Unreachable`],
//!   [`SecureFailure`]);
//! - the ACLs an application needs, from its assembly (the `acls` command).
//!
//! # How it relates to the in-memory model
//!
//! The simulator drives a [`Task`](parsley::Task) over the in-memory model
//! (`parsley_sim::model::Cluster`) through `parsley_sim::TaskHost`.
//! The live driver does the same against Kafka, so the model must behave like
//! Kafka wherever the task can observe it:
//!
//! - offsets are dense over log entries, and transaction markers take
//!   offsets: after one aborted record and its marker, the next record is at
//!   offset 2;
//! - `read_committed` consumers see only committed records, below the last
//!   stable offset, and an open transaction holds the LSO back for every
//!   producer's records after it;
//! - a producer initialised with an existing transactional id fences the old
//!   one and aborts its open transaction;
//! - offsets sent to a transaction, with their metadata string (the task's
//!   checkpoint), become the group's committed offsets only when it commits.
//!
//! [`LiveClient`] wraps rdkafka with the model's operations, and the
//! model-fidelity tests (`tests/live_fidelity.rs`) run the table of
//! transactional cases the model runs too (`fidelity/cases.rs` at the
//! workspace root) against a broker started by `scripts/kafka/broker.sh`,
//! each case asserting the same numbers on both.
//!
//! # Errors
//!
//! librdkafka's transactional errors come in three classes; the runtime mirrors
//! them as [`TxnErrorClass`] and says what a driver does with each. Every
//! other failure is a [`LiveError`] naming what was being done and where.

// The face: modules are private and the root re-exports what users write
// against, each name by one path; `cli` (what a user's `main` calls),
// `properties` (a secured cluster's client properties) and `query`
// (interactive queries) are namespaces whose names are not repeated at the
// root. Test support and planted faults are
// hidden from the docs.
mod acls;
pub mod cli;
mod client;
mod endpoints;
mod error;
#[cfg(feature = "mutations")]
#[doc(hidden)]
pub mod faults;
mod instance;
mod pacing;
pub mod query;
mod reach;
mod readback;
mod runtime;
mod state;
mod stats;
mod status;

pub use client::properties;
#[doc(hidden)]
pub use client::{test_broker, BOOTSTRAP_ENV};
pub use client::{
    Assigned, AssignmentError, Delivery, GroupMember, Isolation, LiveClient, LiveConfig,
    LiveConsumer, LiveFetch, PlainProducer, TxnProducer, Watermarks,
};
pub use endpoints::{serve as serve_endpoints, EndpointError, Endpoints};
pub use error::{
    is_fenced, is_fenced_code, AclOperation, AclResource, CreateTopicFailure, Denied, JoinFailure,
    LiveError, TxnErrorClass, TxnOp,
};
pub use instance::{instance_name, InstanceState, ReportError, TaskReport, TaskState};
pub use reach::{SecureFailure, TlsCause, Unreachable, UnreachableCause};
pub use readback::{read_committed, ReadBack};
pub use runtime::{
    assemble_on, create_topics, group_identity, membership_topic, skip_record, wall_clock_ms,
    Assignment, FailurePolicy, GroupMembership, Health, HealthError, InstanceShare,
    MembershipFailure, ReleaseCause, Runtime, RuntimeConfig, RuntimeError, Stopper, TaskEnd,
    TaskEndKind, TaskRun, TopicSetup,
};
pub use state::StateError;
pub use status::{
    caught_up, final_state, keyed_outputs, task_status, wait_caught_up, TaskStatus, TpStatus,
};
