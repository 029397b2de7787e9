//! A wake-up that librdkafka's threads set when a queue turns non-empty,
//! and that a thread of ours sleeps on instead of polling on a timer.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// Set by librdkafka's threads (a queue's non-empty callback); waited on
/// by the thread that serves the queue once it found the queue empty.
#[derive(Default)]
pub(crate) struct Wake {
    pending: Mutex<bool>,
    signal: Condvar,
}

fn lock(mutex: &Mutex<bool>) -> MutexGuard<'_, bool> {
    // The critical sections only set or clear the flag.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Wake {
    /// Says a queue turned non-empty; never blocks for long (librdkafka's
    /// callback must not).
    pub(crate) fn notify(&self) {
        *lock(&self.pending) = true;
        self.signal.notify_one();
    }

    /// Forgets earlier wake-ups: called before the queues are served, so
    /// one that turns non-empty while they are served ends the wait after.
    pub(crate) fn arm(&self) {
        *lock(&self.pending) = false;
    }

    /// Waits up to `timeout` for a wake-up since [`Wake::arm`].
    pub(crate) fn wait(&self, timeout: Duration) {
        let pending = lock(&self.pending);
        let (mut pending, _) = self
            .signal
            .wait_timeout_while(pending, timeout, |pending| !*pending)
            .unwrap_or_else(PoisonError::into_inner);
        *pending = false;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    /// A wake-up that came before the wait ends it at once; without one
    /// the wait lasts its timeout.
    #[test]
    fn a_wake_up_before_the_wait_is_not_lost() {
        let wake = Wake::default();
        wake.arm();
        wake.notify();
        let started = Instant::now();
        wake.wait(Duration::from_secs(30));
        assert!(started.elapsed() < Duration::from_secs(5), "woken at once");
        wake.arm();
        let started = Instant::now();
        wake.wait(Duration::from_millis(50));
        assert!(
            started.elapsed() >= Duration::from_millis(50),
            "no wake-up: the whole timeout"
        );
    }

    /// Arming forgets a wake-up that came before it.
    #[test]
    fn arming_forgets_an_earlier_wake_up() {
        let wake = Wake::default();
        wake.notify();
        wake.arm();
        let started = Instant::now();
        wake.wait(Duration::from_millis(50));
        assert!(started.elapsed() >= Duration::from_millis(50));
    }
}
