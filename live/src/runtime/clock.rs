//! The runtime's one reading of the wall clock.

use std::time::{SystemTime, UNIX_EPOCH};

/// The wall clock in milliseconds since the Unix epoch: the `now` the core
/// takes as an argument.
pub fn wall_clock_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
        })
}
