//! Fuzzes a whole simulated run of the diamond: the input is the run's
//! choice tape. A target for your own app is the same two lines over your
//! own `Simulation` (see `fuzz/bodies/diamond.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../bodies/diamond.rs"]
mod body;

fuzz_target!(|data: &[u8]| body::simulation().fuzz(data));
