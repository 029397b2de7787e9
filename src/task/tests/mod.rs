//! Unit tests of the task state machine, driven by hand-made fetches (no Kafka
//! model): each test reads as a script of what a driver would do, and is named
//! after the rule it checks (docs/RULES.md).
//!
//! Fixtures: application `app` with one stage `s`; sources `orders`, `payments`
//! and `refunds` (2 partitions each, JSON `String` keys and `i64` values); sink
//! `out` (3 partitions, JSON `String` values); derived `app-s-ticks`,
//! `app-s-state-changelog` and `app-s-dlq` (2 partitions each).

mod fixtures;

mod aligned;
mod buffers;
mod codec;
mod dead_letter;
mod gate;
mod held;
mod liveness;
mod logic_errors;
mod operators;
mod stamping;
mod state;
mod synchronised;
mod ticks;
mod transactions;
