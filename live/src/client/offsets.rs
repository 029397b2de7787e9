//! Offsets: Parsley's `u64` offsets and partitions as Kafka's, a tp's
//! watermarks, and the log-end readers that read them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::Offset;

use parsley::Tp;

use super::log::LogContext;
use super::util::{blocking, bounded};
use super::{Isolation, LiveClient, LiveConfig};
use crate::error::LiveError;

/// A tp's offsets as the broker reports them (ListOffsets).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Watermarks {
    /// The log start offset.
    pub low: u64,
    /// The log end offset.
    pub high_watermark: u64,
    /// The first offset of the earliest open transaction, or the high
    /// watermark.
    pub last_stable_offset: u64,
}

pub(crate) fn kafka_partition(tp: &Tp) -> i32 {
    // Kafka's partitions are i32; one beyond that cannot exist, and the
    // broker answers UNKNOWN_TOPIC_OR_PARTITION for i32::MAX.
    i32::try_from(tp.partition).unwrap_or(i32::MAX)
}

pub(crate) fn kafka_offset(tp: &Tp, offset: u64) -> Result<Offset, LiveError> {
    i64::try_from(offset)
        .map(Offset::Offset)
        .map_err(|_| LiveError::OffsetTooLarge {
            tp: tp.clone(),
            offset,
        })
}

/// Offsets from the broker are never negative when valid; a negative one
/// (librdkafka's "no offset" sentinels) becomes `None`.
pub(crate) fn our_offset(offset: i64) -> Option<u64> {
    u64::try_from(offset).ok()
}

/// Two group-less consumers, one per isolation level, for ListOffsets: a
/// `read_committed` ListOffsets(latest) answers the last stable offset, a
/// `read_uncommitted` one the high watermark.
pub(crate) struct LogEnds {
    committed: Arc<BaseConsumer<LogContext>>,
    pub(super) uncommitted: Arc<BaseConsumer<LogContext>>,
    timeout: Duration,
    deadline: Duration,
}

impl LogEnds {
    pub(crate) fn new(config: &LiveConfig) -> Result<LogEnds, LiveError> {
        let probe = |isolation: Isolation| {
            config
                .client_config(&[
                    ("isolation.level", isolation.property().into()),
                    ("enable.auto.commit", "false".into()),
                ])
                .create_with_context::<_, BaseConsumer<LogContext>>(LogContext)
                .map_err(|source| LiveError::Client {
                    client: "offset probe consumer",
                    source: Box::new(source),
                })
        };
        Ok(LogEnds {
            committed: Arc::new(probe(Isolation::ReadCommitted)?),
            uncommitted: Arc::new(probe(Isolation::ReadUncommitted)?),
            timeout: config.timeout,
            deadline: config.deadline(),
        })
    }

    /// ListOffsets for `tp` at both isolation levels, each bounded by the
    /// runtime's deadline ([`bounded`]).
    pub(crate) fn watermarks(&self, tp: &Tp) -> Result<Watermarks, LiveError> {
        let query = |consumer: &Arc<BaseConsumer<LogContext>>| {
            let (consumer, topic, partition, timeout) = (
                Arc::clone(consumer),
                tp.topic.as_str().to_owned(),
                kafka_partition(tp),
                self.timeout,
            );
            bounded(
                || format!("reading the watermarks of {tp}"),
                self.deadline,
                move || consumer.fetch_watermarks(&topic, partition, timeout),
            )?
            .map_err(|source| LiveError::Watermarks {
                tp: tp.clone(),
                source: Box::new(source),
            })
        };
        let (low, high) = query(&self.uncommitted)?;
        let (_, stable) = query(&self.committed)?;
        Ok(Watermarks {
            low: our_offset(low).unwrap_or(0),
            high_watermark: our_offset(high).unwrap_or(0),
            last_stable_offset: our_offset(stable).unwrap_or(0),
        })
    }

    /// The topic's partition count, or `None` if the broker does not know it.
    pub(crate) fn partitions(&self, topic: &str) -> Result<Option<(u32, bool)>, LiveError> {
        let metadata = self
            .uncommitted
            .fetch_metadata(Some(topic), self.timeout)
            .map_err(|source| LiveError::Metadata {
                topic: topic.to_owned(),
                source: Box::new(source),
            })?;
        let Some(found) = metadata.topics().iter().find(|t| t.name() == topic) else {
            return Ok(None);
        };
        // A topic this principal may not describe is not missing: say so
        // (a missing ACL, LiveError::denied).
        if let Some(error) = found.error() {
            let code = rdkafka::types::RDKafkaErrorCode::from(error);
            if code == rdkafka::types::RDKafkaErrorCode::TopicAuthorizationFailed {
                return Err(LiveError::Metadata {
                    topic: topic.to_owned(),
                    source: Box::new(rdkafka::error::KafkaError::MetadataFetch(code)),
                });
            }
        }
        if found.error().is_some() || found.partitions().is_empty() {
            return Ok(None);
        }
        let led = found
            .partitions()
            .iter()
            .all(|partition| partition.error().is_none() && partition.leader() >= 0);
        Ok(Some((found.partitions().len() as u32, led)))
    }
}

impl LiveClient {
    /// The log start, high watermark and last stable offset of `tp`.
    pub async fn watermarks(&self, tp: &Tp) -> Result<Watermarks, LiveError> {
        let log_ends = Arc::clone(&self.log_ends);
        let at = tp.clone();
        blocking(format!("watermarks of {tp}"), move || {
            log_ends.watermarks(&at)
        })
        .await
    }

    /// Waits until the last stable offset of `tp` is at least `target`.
    ///
    /// Kafka acknowledges a commit or an abort once the coordinator has
    /// logged its decision; it writes the markers, which move the LSO and
    /// make the records visible to `read_committed`, a moment later. The
    /// model does both at once, so a test that compares the two waits here
    /// for the markers first.
    pub async fn wait_stable(&self, tp: &Tp, target: u64) -> Result<Watermarks, LiveError> {
        let deadline = Instant::now() + self.config.timeout;
        loop {
            let marks = self.watermarks(tp).await?;
            if marks.last_stable_offset >= target {
                return Ok(marks);
            }
            if Instant::now() >= deadline {
                return Err(LiveError::NotStable {
                    tp: tp.clone(),
                    target,
                    last_stable_offset: marks.last_stable_offset,
                    timeout: self.config.timeout,
                });
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
