//! The model's behaviour that only the model can show, pinned against what
//! Kafka does (in the spirit of Kafka's `TransactionsTest`), plus a property
//! test over random interleavings.
//!
//! The transactional cases a broker can run too are not here: they are the
//! table `fidelity/cases.rs`, which `sim/tests/model_fidelity.rs` runs on the
//! model and `live/tests/live_fidelity.rs` on a real broker. Each test here
//! says in its first line (`Model only: …`) why it stays one-sided.

mod fixtures;

mod fencing;
mod fetch_positions;
mod group_offsets;
mod interleavings;
mod ordering;
mod stable_offset;
