//! Deadlines: the times at which a task's behaviour next changes with time
//! alone, without a new record: its next tick (T3), the end of a wait for a
//! caught-up source (G9), and its stage's own next
//! deadline (a timer's due time, K2; a window's close, W2; a key's expiry,
//! E2; a held record's close in a stream–stream join, J6).
//!
//! Nothing in the core needs them to be right: a driver that chooses time
//! (the simulator) aims its clock and its record timestamps at them and at
//! the millisecond either side, where an off-by-one in time-based logic
//! shows.

/// What measures a deadline's time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TimeDomain {
    /// The wall clock: a tick at or after the deadline acts on it.
    WallClock,
    /// Event time: a delivered record whose timestamp reaches the deadline
    /// moves stream time onto it.
    EventTime,
}

/// What comes due at a deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DeadlineKind {
    /// The task's next tick (T3).
    Tick,
    /// A timer service's earliest pending timer (K2).
    Timer,
    /// The earliest close of an open window (W2).
    WindowClose,
    /// The earliest expiry of a key's state (E2).
    Expiry,
    /// The earliest close of a record a stream–stream join holds (J6).
    JoinClose,
    /// The end of a synchronised task's wait for a caught-up source (G9).
    SyncWait,
}

/// One deadline of a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Deadline {
    /// When, in milliseconds of its domain.
    pub at: i64,
    /// The clock `at` is measured by.
    pub domain: TimeDomain,
    /// What comes due.
    pub kind: DeadlineKind,
}

impl Deadline {
    /// A deadline of the wall clock.
    pub fn wall_clock(at: i64, kind: DeadlineKind) -> Deadline {
        Deadline {
            at,
            domain: TimeDomain::WallClock,
            kind,
        }
    }
}
