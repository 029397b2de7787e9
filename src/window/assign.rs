//! W1, W2: which windows a record belongs to, and when a window closes.
//!
//! Time windows are Kafka Streams' `TimeWindows`: a window `[start, end)`
//! holds the records whose timestamp `t` has `start <= t < end`; windows of
//! one size start at every multiple of the advance from the epoch (the
//! advance equals the size for tumbling windows), so a record of a hopping
//! window belongs to `size / advance` windows (fewer near the epoch). A
//! window closes when the task's close frontier (its stream time, or its
//! wall clock at its last tick) reaches `end + grace`.

use std::time::Duration;

/// The shape of a task's windows: their size, advance and grace, in
/// milliseconds. Built by [`super::Windows`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Shape {
    pub size: i64,
    pub advance: i64,
    pub grace: i64,
}

/// One window of a key: `[start, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Span {
    pub start: i64,
    pub end: i64,
}

pub(crate) fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

impl Shape {
    /// W1: the windows holding a record at `timestamp` (not negative),
    /// earliest first, as `TimeWindows.windowsFor` lists them.
    pub fn spans_of(&self, timestamp: i64) -> impl Iterator<Item = Span> + '_ {
        debug_assert!(timestamp >= 0, "W1: windows hold records with a timestamp");
        let first = (timestamp
            .saturating_sub(self.size)
            .saturating_add(self.advance))
        .max(0)
            / self.advance
            * self.advance;
        (0..)
            .map(move |n| first + n * self.advance)
            .take_while(move |start| *start <= timestamp)
            .map(|start| Span {
                start,
                end: start.saturating_add(self.size),
            })
    }

    /// W2: the frontier at which a window ending at `end` closes.
    pub fn closes_at(&self, end: i64) -> i64 {
        let close = end.saturating_add(self.grace);
        // Planted bugs (I12): a window that closes one advance early, or one
        // millisecond early (the grace boundary off by one).
        if crate::mutation::active(crate::mutation::Mutation::WindowClosesOneIntervalEarly) {
            return close.saturating_sub(self.advance);
        }
        if crate::mutation::active(crate::mutation::Mutation::WindowGraceOffByOne) {
            return close.saturating_sub(1);
        }
        close
    }

    /// W2: whether the window ending at `end` is closed at `frontier`.
    pub fn is_closed(&self, end: i64, frontier: i64) -> bool {
        frontier >= self.closes_at(end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spans(shape: Shape, timestamp: i64) -> Vec<(i64, i64)> {
        shape
            .spans_of(timestamp)
            .map(|span| (span.start, span.end))
            .collect()
    }

    /// W1: a tumbling window holds `[start, start + size)`; its end is the
    /// next window's start.
    #[test]
    fn w1_a_tumbling_window_holds_start_to_end_exclusive() {
        let tumbling = Shape {
            size: 60,
            advance: 60,
            grace: 0,
        };
        assert_eq!(spans(tumbling, 0), [(0, 60)]);
        assert_eq!(spans(tumbling, 59), [(0, 60)]);
        assert_eq!(spans(tumbling, 60), [(60, 120)]);
        assert_eq!(spans(tumbling, 125), [(120, 180)]);
    }

    /// W1: a hopping window's record belongs to size / advance windows,
    /// earliest first, fewer near the epoch (as `TimeWindows.windowsFor`).
    #[test]
    fn w1_a_hopping_record_belongs_to_size_over_advance_windows() {
        let hopping = Shape {
            size: 100,
            advance: 25,
            grace: 0,
        };
        assert_eq!(spans(hopping, 10), [(0, 100)]);
        assert_eq!(spans(hopping, 30), [(0, 100), (25, 125)]);
        assert_eq!(
            spans(hopping, 110),
            [(25, 125), (50, 150), (75, 175), (100, 200)]
        );
        assert_eq!(
            spans(hopping, 100),
            [(25, 125), (50, 150), (75, 175), (100, 200)]
        );
    }

    /// W2: a window closes when the frontier reaches its end plus grace,
    /// and not a millisecond before.
    #[test]
    fn w2_a_window_closes_at_end_plus_grace() {
        let shape = Shape {
            size: 60,
            advance: 60,
            grace: 10,
        };
        assert!(!shape.is_closed(60, 69));
        assert!(shape.is_closed(60, 70));
        assert!(shape.is_closed(60, 71));
    }
}
