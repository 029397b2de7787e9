//! The live-broker adapter: the same core, driven against a real
//! Kafka cluster through rust-rdkafka and tokio. Built only with the `live`
//! feature, which brings in rdkafka (with librdkafka compiled from source and
//! linked statically) and tokio.
//!
//! # How it relates to the in-memory model
//!
//! The simulator drives a [`Task`](crate::Task) over the in-memory model
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
//! [`client`] wraps rdkafka with the model's operations, and the
//! model-fidelity tests (`tests/live_fidelity.rs`) run the model's own
//! transactional cases against a broker started by `scripts/kafka/broker.sh`,
//! asserting the numbers the model's tests assert.
//!
//! # Errors
//!
//! librdkafka's transactional errors come in three classes; [`error`] mirrors
//! them as [`TxnErrorClass`] and says what a driver does with each. Every
//! other failure is a [`LiveError`] naming what was being done and where.

pub mod client;
pub mod error;
#[cfg(feature = "mutations")]
pub mod faults;
pub mod reach;
pub mod runtime;

pub use client::test_broker;
pub use client::{
    Delivery, Isolation, LiveClient, LiveConfig, LiveConsumer, LiveFetch, PlainProducer,
    TxnProducer, Watermarks, BOOTSTRAP_ENV,
};
pub use error::{is_fenced, is_fenced_code, LiveError, TxnErrorClass, TxnOp};
pub use runtime::{
    assemble_on, create_topics, membership_topic, skip_record, Assignment, FailurePolicy,
    GroupMembership, InstanceShare, Runtime, RuntimeConfig, RuntimeError, Stopper, TaskEnd,
    TaskEndKind, TaskRun, TopicSetup,
};
