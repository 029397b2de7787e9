//! W1, W5: which windows a record belongs to; W2: when a window closes.
//!
//! Time windows are Kafka Streams' `TimeWindows`: a window `[start, end)`
//! holds the records whose timestamp `t` has `start <= t < end`; windows of
//! one size start at every multiple of the advance from the epoch (the
//! advance equals the size for tumbling windows), so a record of a hopping
//! window belongs to `size / advance` windows (fewer near the epoch). A
//! time window closes when the task's close frontier (its stream time, or
//! its wall clock at its last tick) reaches `end + grace`.
//!
//! Session windows are Kafka Streams' `SessionWindows`: a session
//! `[start, end]` (both ends its records' timestamps) takes every record of
//! its key within the inactivity gap of it, merging the sessions a record
//! bridges. A session closes when the frontier passes `end + gap + grace`.

use std::time::Duration;

/// The shape of a task's windows, in milliseconds. Built by
/// [`super::Windows`] and [`super::SessionWindows`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Shape {
    /// Time windows of `size`, starting every `advance`.
    Time { size: i64, advance: i64, grace: i64 },
    /// Sessions of one key's records at most `gap` apart.
    Session { gap: i64, grace: i64 },
}

/// One window of a key: `[start, end)` for a time window, `[start, end]`
/// (its first and last records' timestamps) for a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Span {
    pub start: i64,
    pub end: i64,
}

pub(crate) fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

impl Shape {
    /// W1: the time windows of `size` starting every `advance` that hold a
    /// record at `timestamp` (not negative), earliest first, as
    /// `TimeWindows.windowsFor` lists them.
    pub fn spans_of(size: i64, advance: i64, timestamp: i64) -> impl Iterator<Item = Span> {
        debug_assert!(timestamp >= 0, "W1: windows hold records with a timestamp");
        let first =
            (timestamp.saturating_sub(size).saturating_add(advance)).max(0) / advance * advance;
        // Planted bug (I12): a hopping window does not take a record at
        // exactly its start (its start taken as exclusive).
        let skips_start = advance < size
            && crate::mutation::active(crate::mutation::Mutation::HoppingWindowSkipsStart);
        (0..)
            .map(move |n| first + n * advance)
            .take_while(move |start| *start <= timestamp)
            .filter(move |start| !(skips_start && *start == timestamp))
            .map(move |start| Span {
                start,
                end: start.saturating_add(size),
            })
    }

    /// W5: the sessions of `sessions` (one key's, disjoint, in start
    /// order) that a record at `timestamp` joins: those within `gap` of
    /// it. They are consecutive, as sessions of one key are more than the
    /// gap apart; the range of their indexes.
    pub fn sessions_joined<T>(
        gap: i64,
        timestamp: i64,
        sessions: &[T],
        span: impl Fn(&T) -> Span,
    ) -> std::ops::Range<usize> {
        let first =
            sessions.partition_point(|session| span(session).end < timestamp.saturating_sub(gap));
        let last = sessions
            .partition_point(|session| span(session).start <= timestamp.saturating_add(gap));
        let last = last.max(first);
        // Planted bug (I12): a record that bridges two sessions joins the
        // first only.
        if crate::mutation::active(crate::mutation::Mutation::SessionBridgeNotMerged) {
            return first..last.min(first + 1);
        }
        first..last
    }

    /// W2: the frontier at which a window ending at `end` closes: for a
    /// time window `end + grace`; for a session the millisecond after
    /// `end + gap + grace` (its end is its last record's timestamp, and a
    /// record at `end + gap` still joins it).
    pub fn closes_at(&self, end: i64) -> i64 {
        let (close, interval) = match *self {
            Shape::Time { advance, grace, .. } => (end.saturating_add(grace), advance),
            Shape::Session { gap, grace } => (
                end.saturating_add(gap)
                    .saturating_add(grace)
                    .saturating_add(1),
                gap.max(1),
            ),
        };
        // Planted bugs (I12): a window that closes one advance (or gap)
        // early, or one millisecond early (the grace boundary off by one).
        if crate::mutation::active(crate::mutation::Mutation::WindowClosesOneIntervalEarly) {
            return close.saturating_sub(interval);
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

    fn spans(size: i64, advance: i64, timestamp: i64) -> Vec<(i64, i64)> {
        Shape::spans_of(size, advance, timestamp)
            .map(|span| (span.start, span.end))
            .collect()
    }

    /// W1: a tumbling window holds `[start, start + size)`; its end is the
    /// next window's start.
    #[test]
    fn w1_a_tumbling_window_holds_start_to_end_exclusive() {
        assert_eq!(spans(60, 60, 0), [(0, 60)]);
        assert_eq!(spans(60, 60, 59), [(0, 60)]);
        assert_eq!(spans(60, 60, 60), [(60, 120)]);
        assert_eq!(spans(60, 60, 125), [(120, 180)]);
    }

    /// W1: a hopping window takes a record at exactly its start (its start
    /// is inclusive), as well as the earlier windows that still reach it.
    #[test]
    fn w1_a_hopping_window_takes_a_record_at_its_start() {
        assert_eq!(spans(100, 25, 50), [(0, 100), (25, 125), (50, 150)]);
        assert_eq!(
            spans(2_000, 1_000, 60_000),
            [(59_000, 61_000), (60_000, 62_000)]
        );
    }

    /// W1: a hopping window's record belongs to size / advance windows,
    /// earliest first, fewer near the epoch (as `TimeWindows.windowsFor`).
    #[test]
    fn w1_a_hopping_record_belongs_to_size_over_advance_windows() {
        assert_eq!(spans(100, 25, 10), [(0, 100)]);
        assert_eq!(spans(100, 25, 30), [(0, 100), (25, 125)]);
        assert_eq!(
            spans(100, 25, 110),
            [(25, 125), (50, 150), (75, 175), (100, 200)]
        );
        assert_eq!(
            spans(100, 25, 100),
            [(25, 125), (50, 150), (75, 175), (100, 200)]
        );
    }

    /// W2: a window closes when the frontier reaches its end plus grace,
    /// and not a millisecond before.
    #[test]
    fn w2_a_window_closes_at_end_plus_grace() {
        let shape = Shape::Time {
            size: 60,
            advance: 60,
            grace: 10,
        };
        assert!(!shape.is_closed(60, 69));
        assert!(shape.is_closed(60, 70));
        assert!(shape.is_closed(60, 71));
    }

    /// W2: a session closes once the frontier passes its last record's
    /// timestamp plus gap plus grace: at exactly that sum it still takes a
    /// record (one at `end + gap` joins it).
    #[test]
    fn w2_a_session_closes_after_end_plus_gap_plus_grace() {
        let shape = Shape::Session { gap: 10, grace: 5 };
        assert!(!shape.is_closed(100, 115));
        assert!(shape.is_closed(100, 116));
    }

    /// W5: a record joins the sessions within the gap of it, on both
    /// sides, inclusive; the rest of the key's sessions stay apart.
    #[test]
    fn w5_a_record_joins_the_sessions_within_the_gap() {
        let sessions = [
            Span { start: 0, end: 5 },
            Span { start: 20, end: 30 },
            Span { start: 45, end: 45 },
            Span { start: 70, end: 80 },
        ];
        let joined = |timestamp| Shape::sessions_joined(10, timestamp, &sessions, |span| *span);
        assert_eq!(joined(15), 0..2, "5 + 10 >= 15 and 20 - 10 <= 15");
        assert_eq!(joined(16), 1..2);
        assert_eq!(joined(35), 1..3, "bridges [20, 30] and [45, 45]");
        assert_eq!(joined(58), 3..3, "nothing within 10 of 58: a new session");
        assert_eq!(joined(60), 3..4);
        assert_eq!(joined(200), 4..4);
        assert_eq!(
            Shape::sessions_joined(10, 3, &[] as &[Span], |span| *span),
            0..0
        );
    }
}
