//! Fuzzes the causal ordering of a whole simulated run: the input's first byte
//! picks a scenario, the rest is the run's choice tape, and any invariant
//! violation (I1–I8) panics with the violations listed. The body lives in
//! `fuzz/bodies/causal_order.rs`, shared with the stable test suite.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../bodies/causal_order.rs"]
mod body;

fuzz_target!(|data: &[u8]| body::causal_order(data));
