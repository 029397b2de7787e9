//! Running librdkafka's blocking calls: on tokio's blocking pool
//! ([`blocking`]), or on a thread of their own with a deadline past which
//! the call is abandoned ([`bounded`]).

use std::time::Duration;

use crate::error::{JoinFailure, LiveError};

/// Runs a blocking librdkafka call on tokio's blocking pool.
pub(super) async fn blocking<T, F>(what: impl Into<String>, call: F) -> Result<T, LiveError>
where
    F: FnOnce() -> Result<T, LiveError> + Send + 'static,
    T: Send + 'static,
{
    tokio::task::spawn_blocking(call)
        .await
        .map_err(|error| LiveError::Join {
            what: what.into(),
            source: JoinFailure::Task(error),
        })?
}

/// Runs a blocking librdkafka call on a thread of its own and waits for it
/// until `deadline`. A call still running then is abandoned: its thread is
/// left to finish (or not) and drops what it holds when it does, and the
/// caller gets [`LiveError::Overran`](crate::LiveError::Overran) and must replace the client. Thus no
/// task thread blocks on Kafka past a deadline, whatever librdkafka does.
pub(crate) fn bounded<T, F>(
    what: impl FnOnce() -> String,
    deadline: Duration,
    call: F,
) -> Result<T, LiveError>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let (reply, answer) = std::sync::mpsc::sync_channel(1);
    let spawned = std::thread::Builder::new()
        .name("parsley kafka call".into())
        .spawn(move || {
            // The caller may have given up: then nobody listens.
            let _ = reply.send(call());
        });
    if let Err(error) = spawned {
        return Err(LiveError::Join {
            what: what(),
            source: JoinFailure::Spawn(error),
        });
    }
    match answer.recv_timeout(deadline) {
        Ok(value) => Ok(value),
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Err(LiveError::Overran {
            what: what(),
            deadline,
        }),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Err(LiveError::Join {
            what: what(),
            source: JoinFailure::Panicked,
        }),
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_bounded_call_returns_what_the_call_returns() {
        let answer = bounded(|| "adding".into(), Duration::from_secs(5), || 2 + 2);
        assert_eq!(answer.expect("in time"), 4);
    }

    /// Issue 13's wedge, without a broker: a call that ignores its own
    /// timeout is abandoned at the deadline, and the caller is told which.
    #[test]
    fn a_call_past_its_deadline_is_abandoned_and_named() {
        let started = Instant::now();
        let answer = bounded(
            || "send_offsets_to_transaction of `app-stage-0`".into(),
            Duration::from_millis(50),
            || std::thread::sleep(Duration::from_secs(3)),
        );
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "the caller did not wait for the call"
        );
        let error = answer.expect_err("overran");
        assert!(matches!(error, LiveError::Overran { .. }), "{error:?}");
        assert!(error.is_transient());
        let text = error.to_string();
        assert!(
            text.contains("send_offsets_to_transaction of `app-stage-0`"),
            "{text}"
        );
        assert!(
            text.contains("0.05s") && text.contains("abandoned"),
            "{text}"
        );
    }

    #[test]
    fn a_call_that_panics_is_an_error_not_a_panic() {
        let answer: Result<(), LiveError> = bounded(
            || "probing".into(),
            Duration::from_secs(5),
            || panic!("boom"),
        );
        let error = answer.expect_err("panicked");
        assert!(matches!(error, LiveError::Join { .. }), "{error:?}");
    }
}
