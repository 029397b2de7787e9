//! Fuzzes the stamp header decoder: it never panics, and whatever it accepts
//! re-encodes to exactly the input bytes. The body lives in
//! `fuzz/bodies/stamp_decode.rs`, shared with the stable test suite.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../bodies/stamp_decode.rs"]
mod body;

fuzz_target!(|data: &[u8]| body::stamp_decode(data));
