//! The harness's integration tests, one binary: each file under `tests/`
//! is a module of it (linking one binary, not one per file), and
//! `support` is the helpers they share. `cargo test -p parsley-sim -- NAME::`
//! runs one file's tests.

mod support;

mod bad_input;
mod consistent_driver;
mod dead_letter;
mod driver_api;
mod driver_errors;
mod expiry_driver;
mod fan_out;
mod fk_join_driver;
mod impure_logic;
mod join_driver;
mod model_fidelity;
mod order;
mod property_story;
mod rekey_driver;
mod report;
mod session_driver;
mod simulate_your_app;
mod stream_join_driver;
mod synchronised_driver;
mod table_join_driver;
mod ticks;
mod time_boundaries;
mod timeline;
mod timer_driver;
mod timer_service;
mod transactions;
mod versioned_join_driver;
mod window_driver;
