//! Test-only faults of the live adapter, with the `mutations` feature: a
//! stall makes one transactional call sleep on its call thread before it
//! reaches librdkafka, as a call does that ignores its own timeout when the
//! coordinator goes away (librdkafka issue 5456). A test arms one and shows
//! that the runtime abandons the call at its deadline and restarts the task
//! with a fresh producer, losing and repeating nothing.

use std::sync::Mutex;
use std::time::Duration;

use super::error::TxnOp;

struct Stall {
    op: TxnOp,
    transactional_id: String,
    duration: Duration,
}

static ARMED: Mutex<Vec<Stall>> = Mutex::new(Vec::new());

fn armed() -> std::sync::MutexGuard<'static, Vec<Stall>> {
    // Whole entries are pushed and removed: a poisoned lock holds no torn one.
    ARMED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The next `op` call of the producer `transactional_id` sleeps for
/// `duration` before it is made. Applies once, in any thread of the process.
pub fn stall_next(op: TxnOp, transactional_id: &str, duration: Duration) {
    armed().push(Stall {
        op,
        transactional_id: transactional_id.to_owned(),
        duration,
    });
}

/// Disarms the stall armed for this call, if any, and returns how long to
/// sleep.
pub(crate) fn take(op: TxnOp, transactional_id: &str) -> Option<Duration> {
    let mut armed = armed();
    let index = armed
        .iter()
        .position(|stall| stall.op == op && stall.transactional_id == transactional_id)?;
    Some(armed.remove(index).duration)
}
