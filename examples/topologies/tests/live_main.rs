//! The examples on a real Kafka broker, one binary (feature `live`): each
//! `live_*.rs` file is a module, `live_common` what they share. They are
//! not run all at once: `.ci/run` picks them by module
//! (`-- live_examples:: live_metrics::`), as some restart the broker or need
//! the secured one.

mod live_common;

mod live_audit;
mod live_broker_restart;
mod live_examples;
mod live_metrics;
mod live_operator;
mod live_produce;
mod live_query;
mod live_secured;
mod live_unreachable;
