//! The dedupe example (E1–E3).

use std::time::Duration;

use parsley::{App, CompositionError, Json, Parsley, Stage, Step, Topic};
use parsley::{Expire, Expiring};

use crate::*;

/// A dedupe's fold over a key's "seen" flag: the first record of a key
/// (since its state last expired) goes to `unique`, the rest nowhere;
/// amounts the examples refuse ([`checked`]) are refused.
pub fn first_sightings_to(
    unique: &Topic<String, i64>,
) -> impl Fn(bool, &parsley::Record<String, i64>) -> Result<Step<bool>, String> + Send + Sync + 'static
{
    let unique = unique.clone();
    move |seen, order| {
        let amount = checked(*order.value())?;
        Ok(match seen {
            true => Step::of(true),
            false => Step::of(true).emit(unique.send(order.key().cloned(), amount)),
        })
    }
}

/// The topics of the dedupe example (E1–E3).
#[derive(Clone, Debug)]
pub struct DedupeTopics {
    /// Orders, keyed by order id; the value is the amount. Producers retry,
    /// so an id may come more than once.
    pub orders: Topic<String, i64>,
    /// Each order id once within [`DEDUPE_WINDOW_MS`] of its first sighting.
    pub unique: Topic<String, i64>,
    /// Per id, how many times it came since it was last quiet for
    /// [`QUIET_MS`] of wall clock.
    pub repeats: Topic<String, i64>,
}

impl DedupeTopics {
    /// The topics with their plain names.
    pub fn new() -> Self {
        DedupeTopics::with_prefix("")
    }

    /// The same topics with `prefix` before each name.
    pub fn with_prefix(prefix: &str) -> Self {
        DedupeTopics {
            orders: long_topic(format!("{prefix}orders")),
            unique: long_topic(format!("{prefix}unique-orders")),
            repeats: long_topic(format!("{prefix}order-repeats")),
        }
    }
}

impl Default for DedupeTopics {
    fn default() -> Self {
        DedupeTopics::new()
    }
}

/// How long after an id's first sighting its repeats are dropped, in
/// milliseconds (event time).
pub const DEDUPE_WINDOW_MS: u64 = 1_000;
/// How long an id must be quiet, by the wall clock, for its repeat count
/// to start over, in milliseconds.
pub const QUIET_MS: u64 = 2_000;

/// Expiring state (E1–E3), fanned out over one source: `dedupe` writes each
/// order id once within a second of its first sighting (state from the
/// first write, expired by stream time), and `repeats` counts each id's
/// arrivals until it has been quiet for two seconds of wall clock (state
/// from the last write, expired by ticks).
pub fn dedupe(topics: &DedupeTopics, tick_interval: Duration) -> Result<App, CompositionError> {
    dedupe_named("dedupe", topics, tick_interval)
}

/// [`dedupe`] under another application id.
pub fn dedupe_named(
    app_id: &str,
    topics: &DedupeTopics,
    tick_interval: Duration,
) -> Result<App, CompositionError> {
    let unique = Stage::named("dedupe")
        .expiring(Expiring::after(Duration::from_millis(DEDUPE_WINDOW_MS)).from_first_write())
        .fold(
            &topics.orders,
            Json,
            || false,
            first_sightings_to(&topics.unique),
        )
        .into(&topics.unique)
        .build();
    let repeats = Stage::named("repeats")
        .expiring(
            Expiring::after(Duration::from_millis(QUIET_MS)).expire_by(Expire::WallClock {
                resolution: tick_interval,
            }),
        )
        .fold(&topics.orders, Json, || 0i64, {
            let repeats = topics.repeats.clone();
            move |count: i64, order| {
                let count = count + 1;
                Step::of(count).emit(repeats.send(order.key().cloned(), count))
            }
        })
        .into(&topics.repeats)
        .build();
    Parsley::named(app_id).stage(unique).stage(repeats).build()
}
