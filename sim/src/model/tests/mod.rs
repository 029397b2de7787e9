//! The model's behaviour, pinned against what Kafka does (in the spirit of
//! Kafka's `TransactionsTest`), plus a property test over random interleavings.

mod fixtures;

mod fencing;
mod fetch_positions;
mod group_offsets;
mod interleavings;
mod ordering;
mod stable_offset;
mod visibility;
