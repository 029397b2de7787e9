//! Start-up retries what Kafka says to retry.
//!
//! Right after a broker starts, or when a group's coordinator moves, Kafka
//! answers "come back later" (`COORDINATOR_LOAD_IN_PROGRESS`,
//! `NOT_COORDINATOR`, `LEADER_NOT_AVAILABLE`, …): the codes its own clients
//! mark retriable. Kafka Streams retries them; so does [`at_start`], within
//! the connect bound ([`LiveConfig::connect_timeout`](crate::LiveConfig)),
//! logging each distinct answer once. Anything else (a missing topic, a
//! refused contract, a conflicting group) stops start-up at once.

use std::future::Future;
use std::time::{Duration, Instant};

use rdkafka::error::RDKafkaErrorCode;

use super::error::{MembershipFailure, RuntimeError};

/// The first pause between two attempts; it doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(50);
/// The longest pause between two attempts.
const MAX_PAUSE: Duration = Duration::from_secs(1);

/// True for the broker answers Kafka's protocol marks retriable that a
/// start-up call can meet: the coordinator or a leader is loading, moving or
/// not elected yet, or the broker timed the request out.
pub(crate) fn is_retriable_at_start(code: RDKafkaErrorCode) -> bool {
    use RDKafkaErrorCode as Code;
    matches!(
        code,
        Code::CoordinatorLoadInProgress
            | Code::CoordinatorNotAvailable
            | Code::NotCoordinator
            | Code::LeaderNotAvailable
            | Code::NotLeaderForPartition
            | Code::ReplicaNotAvailable
            | Code::RequestTimedOut
            | Code::NetworkException
            | Code::NotEnoughReplicas
            | Code::KafkaStorageError
            | Code::FencedLeaderEpoch
            | Code::UnknownLeaderEpoch
            | Code::NotController
            | Code::RebalanceInProgress
    )
}

impl RuntimeError {
    /// The broker's answer, when it is one Kafka says to retry
    /// (a coordinator loading or moving, a leader not elected yet); `None`
    /// for every other error.
    pub fn retriable_code(&self) -> Option<RDKafkaErrorCode> {
        let code = match self {
            RuntimeError::Live(error) => error.code(),
            RuntimeError::Membership {
                source: MembershipFailure::Members(error) | MembershipFailure::Subscribe(error),
                ..
            } => error.rdkafka_error_code(),
            _ => None,
        };
        code.filter(|code| is_retriable_at_start(*code))
    }
}

/// Runs `attempt` until it succeeds, fails with an error that is not
/// [retriable](RuntimeError::retriable_code), or `bound` has passed since
/// the first attempt; then returns its last result. Each distinct retriable
/// answer is logged once, naming `what` was being done.
pub(crate) async fn at_start<T, F, Fut>(
    app: &str,
    what: &str,
    bound: Duration,
    mut attempt: F,
) -> Result<T, RuntimeError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, RuntimeError>>,
{
    let started = Instant::now();
    let mut pause = FIRST_PAUSE;
    let mut answered: Vec<RDKafkaErrorCode> = Vec::new();
    loop {
        let error = match attempt().await {
            Ok(value) => return Ok(value),
            Err(error) => error,
        };
        let Some(code) = error.retriable_code() else {
            return Err(error);
        };
        let waited = started.elapsed();
        if waited + pause > bound {
            tracing::warn!(app, what, waited_ms = waited.as_millis() as u64, error = %error,
                "Kafka still answers with a retriable error at the end of the connect bound: giving up");
            return Err(error);
        }
        if !answered.contains(&code) {
            answered.push(code);
            tracing::info!(app, what, answer = ?code, bound_ms = bound.as_millis() as u64,
                "Kafka says to retry (a coordinator or leader is loading or moving): retrying within the connect bound");
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(MAX_PAUSE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::LiveError;
    use rdkafka::error::KafkaError;
    use std::cell::Cell;

    fn members_error(code: RDKafkaErrorCode) -> RuntimeError {
        RuntimeError::Membership {
            group: "app.instances".into(),
            source: MembershipFailure::Members(KafkaError::GroupListFetch(code)),
        }
    }

    /// Issue 29's start-up failure: a group's coordinator still loading
    /// after a broker start is retried until it answers.
    #[tokio::test]
    async fn a_coordinator_still_loading_is_retried_until_it_answers() {
        let calls = Cell::new(0);
        let answer = at_start(
            "app",
            "describing the group",
            Duration::from_secs(5),
            || {
                calls.set(calls.get() + 1);
                let call = calls.get();
                async move {
                    if call < 3 {
                        Err(members_error(RDKafkaErrorCode::CoordinatorLoadInProgress))
                    } else {
                        Ok(call)
                    }
                }
            },
        )
        .await;
        assert_eq!(answer.expect("the third attempt succeeds"), 3);
    }

    /// What Kafka does not say to retry stops start-up at the first answer.
    #[tokio::test]
    async fn an_answer_that_is_not_retriable_stops_at_once() {
        let calls = Cell::new(0);
        let answer: Result<(), RuntimeError> = at_start(
            "app",
            "describing the group",
            Duration::from_secs(5),
            || {
                calls.set(calls.get() + 1);
                async { Err(members_error(RDKafkaErrorCode::GroupAuthorizationFailed)) }
            },
        )
        .await;
        assert!(answer.is_err());
        assert_eq!(calls.get(), 1);
    }

    /// A coordinator that never finishes loading is given up on within the
    /// bound, with its own error.
    #[tokio::test]
    async fn retries_stop_within_the_bound() {
        let started = Instant::now();
        let answer: Result<(), RuntimeError> = at_start(
            "app",
            "describing the group",
            Duration::from_millis(300),
            || async { Err(members_error(RDKafkaErrorCode::NotCoordinator)) },
        )
        .await;
        let error = answer.expect_err("never answers");
        assert_eq!(
            error.retriable_code(),
            Some(RDKafkaErrorCode::NotCoordinator)
        );
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn a_missing_topic_is_not_retried() {
        let missing = RuntimeError::Live(LiveError::Metadata {
            topic: "orders".into(),
            source: Box::new(KafkaError::MetadataFetch(
                RDKafkaErrorCode::UnknownTopicOrPartition,
            )),
        });
        assert_eq!(missing.retriable_code(), None);
        let loading = RuntimeError::Live(LiveError::Metadata {
            topic: "orders".into(),
            source: Box::new(KafkaError::MetadataFetch(
                RDKafkaErrorCode::LeaderNotAvailable,
            )),
        });
        assert_eq!(
            loading.retriable_code(),
            Some(RDKafkaErrorCode::LeaderNotAvailable)
        );
    }
}
