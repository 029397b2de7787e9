//! The timer request/reply shape (K2).

use std::time::Duration;

use parsley::{App, CompositionError, Parsley, Stage, Step, Topic, I64};

use crate::*;

/// The topics of the timer request/reply shape (K2).
#[derive(Clone, Debug)]
pub struct TimerTopics {
    /// Orders, keyed by account.
    pub orders: Topic<String, Order>,
    /// Timer requests: key and fire time (K2).
    pub requests: Topic<String, i64>,
    /// The timer service's fire records (K2).
    pub fires: Topic<String, i64>,
    /// Expired reservations.
    pub expiries: Topic<String, i64>,
}

impl TimerTopics {
    /// The topics with their plain names.
    pub fn new() -> Self {
        TimerTopics::with_prefix("")
    }

    /// The same topics with `prefix` before each name (the live tests run
    /// each example in its own namespace).
    pub fn with_prefix(prefix: &str) -> Self {
        TimerTopics {
            orders: order_topic(format!("{prefix}orders")),
            requests: long_topic(format!("{prefix}timer-requests")),
            fires: long_topic(format!("{prefix}timer-fires")),
            expiries: long_topic(format!("{prefix}expiries")),
        }
    }
}

impl Default for TimerTopics {
    fn default() -> Self {
        TimerTopics::new()
    }
}

/// How long a reservation is held before its timer fires.
pub const RESERVATION_MS: i64 = 30_000;

/// How often the timers example's service looks for due timers.
pub const TIMER_RESOLUTION: Duration = Duration::from_secs(1);

/// Per-entity timers as a topology shape (K2): `reserve` holds each order's
/// total against its key and asks the application's timer service
/// (`parsley::timer`, the stage `timers`) for a timer; the service writes
/// the fire record when the time comes, and `reserve` releases the
/// reservation to `expiries`. The fire record claims the request and so its
/// causes, so the release is gated behind the orders it releases. Every
/// request fires once: a second order on a key before the first fire asks
/// for a second timer, whose fire releases what is left (nothing, if the
/// first fire released it all).
pub fn timers(topics: &TimerTopics) -> Result<App, CompositionError> {
    timers_with("timers", topics, RESERVATION_MS)
}

/// [`timers`] under another application id, holding reservations for
/// `reservation_ms`.
pub fn timers_with(
    app_id: &str,
    topics: &TimerTopics,
    reservation_ms: i64,
) -> Result<App, CompositionError> {
    let requests = topics.requests.clone();
    let expiries = topics.expiries.clone();
    let reserve = Stage::named("reserve")
        .state(I64, || 0i64)
        .on(&topics.orders, move |held: i64, order| {
            checked(order.value().total()).map(|total| {
                Step::of(held + total)
                    .emit(requests.send(order.key().cloned(), order.timestamp() + reservation_ms))
            })
        })
        .on(&topics.fires, move |held: i64, fire| {
            Step::delete().emit(expiries.send(fire.key().cloned(), held))
        })
        .into((&topics.requests, &topics.expiries))
        .build();
    let timers = Stage::named("timers")
        .timer_service(&topics.requests, &topics.fires)
        .resolution(TIMER_RESOLUTION)
        .build();
    Parsley::named(app_id).stage(reserve).stage(timers).build()
}
