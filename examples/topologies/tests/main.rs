//! The examples' tests that need neither a broker nor Java, one binary:
//! each file under `tests/` is a module of it (linking one binary, not one
//! per file). `cargo test -p parsley-examples --test main -- NAME::` runs
//! one file's tests. The differential tests (`tests/differential_main.rs`,
//! feature `differential`) and the live ones (`tests/live_main.rs`,
//! feature `live`) are binaries of their own.

mod common;
mod shipped;
mod smallest;

// The fuzz target's body that `fuzz_corpus` runs and `properties` takes
// its scenarios from.
#[path = "../../../fuzz/bodies/causal_order.rs"]
mod causal_order_body;

mod as_of;
mod audit;
mod cli;
mod consistent;
mod examples;
mod explore;
mod fuzz_corpus;
mod properties;
mod refused_start;
mod scenarios;
mod simulator;
mod sizing;
