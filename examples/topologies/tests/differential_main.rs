//! The differential tests against Kafka Streams' TopologyTestDriver
//! (differential/README.md), one binary (feature `differential`; they
//! need java and mvn on PATH): each `differential_*.rs` file is a module,
//! `differential` the harness they share.

mod differential;

mod differential_fk_joins;
mod differential_joins;
mod differential_rekeys;
mod differential_sessions;
mod differential_stream_joins;
mod differential_table_joins;
mod differential_versioned_joins;
mod differential_windows;
