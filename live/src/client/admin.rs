//! Topics and groups: creating a topic, its partition count, and the live
//! members of a consumer group with their decoded assignments.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminOptions, NewTopic, TopicReplication};
use rdkafka::consumer::Consumer;
use rdkafka::error::RDKafkaErrorCode;

use super::util::{blocking, bounded};
use super::LiveClient;
use crate::error::{CreateTopicFailure, LiveError};

impl LiveClient {
    /// Creates `topic` with `partitions` partitions and the broker's default
    /// replication factor, and waits until every partition has a leader, so
    /// the next produce does not race the topic's creation.
    pub async fn create_topic(&self, topic: &str, partitions: u32) -> Result<(), LiveError> {
        self.create_topic_with(topic, partitions, &[]).await
    }

    /// [`LiveClient::create_topic`] with topic configuration: `settings` are
    /// `kafka-topics.sh --config` pairs such as `cleanup.policy=compact`.
    pub async fn create_topic_with(
        &self,
        topic: &str,
        partitions: u32,
        settings: &[(String, String)],
    ) -> Result<(), LiveError> {
        if partitions == 0 {
            return Err(LiveError::InvalidPartitionCount {
                topic: topic.to_owned(),
            });
        }
        let count = i32::try_from(partitions).map_err(|_| LiveError::CreateTopic {
            topic: topic.to_owned(),
            partitions,
            source: CreateTopicFailure::TooManyPartitions,
        })?;
        let mut new = NewTopic::new(topic, count, TopicReplication::Fixed(-1));
        for (key, value) in settings {
            new = new.set(key, value);
        }
        let options = AdminOptions::new()
            .operation_timeout(Some(self.config.timeout))
            .request_timeout(Some(self.config.timeout));
        let failed = |source: CreateTopicFailure| LiveError::CreateTopic {
            topic: topic.to_owned(),
            partitions,
            source,
        };
        let results = self
            .admin
            .create_topics([&new], &options)
            .await
            .map_err(|error| failed(CreateTopicFailure::Admin(error)))?;
        for result in results {
            match result {
                Ok(_) => {}
                Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {
                    return Err(LiveError::TopicExists {
                        topic: topic.to_owned(),
                    })
                }
                Err((_, code)) => return Err(failed(CreateTopicFailure::Refused(code))),
            }
        }
        let deadline = Instant::now() + self.config.timeout;
        loop {
            let log_ends = Arc::clone(&self.log_ends);
            let name = topic.to_owned();
            let found = blocking(format!("metadata of `{topic}`"), move || {
                log_ends.partitions(&name)
            })
            .await?;
            if found == Some((partitions, true)) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(LiveError::TopicNotReady {
                    topic: topic.to_owned(),
                    partitions,
                    timeout: self.config.timeout,
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The partition count of `topic`, or `None` if it does not exist.
    pub async fn partitions(&self, topic: &str) -> Result<Option<u32>, LiveError> {
        let log_ends = Arc::clone(&self.log_ends);
        let name = topic.to_owned();
        let found = blocking(format!("metadata of `{topic}`"), move || {
            log_ends.partitions(&name)
        })
        .await?;
        Ok(found.map(|(count, _)| count))
    }

    /// The live members of consumer group `group`, as its coordinator
    /// describes them (empty for a group with none, or none at all): each
    /// one's client id, host and assigned partitions.
    pub async fn group_members(&self, group: &str) -> Result<Vec<GroupMember>, LiveError> {
        let log_ends = Arc::clone(&self.log_ends);
        let (name, timeout, deadline) = (
            group.to_owned(),
            self.config.timeout,
            self.config.deadline(),
        );
        let what = format!("describing group `{group}`");
        let described = blocking(what.clone(), move || {
            bounded(
                || what,
                deadline,
                move || {
                    log_ends
                        .uncommitted
                        .fetch_group_list(Some(&name), timeout)
                        .map(|list| {
                            list.groups()
                                .iter()
                                .filter(|info| info.name() == name)
                                .flat_map(|info| info.members())
                                .map(|member| GroupMember {
                                    client_id: member.client_id().to_owned(),
                                    client_host: member.client_host().to_owned(),
                                    assignment: member
                                        .assignment()
                                        .filter(|bytes| !bytes.is_empty())
                                        .map(decode_assignment),
                                })
                                .collect::<Vec<_>>()
                        })
                },
            )
        })
        .await?;
        described.map_err(|source| LiveError::Group {
            group: group.to_owned(),
            source: Box::new(source),
        })
    }
}

/// A member's assigned partitions, per topic.
pub type Assigned = Vec<(String, Vec<i32>)>;

/// One live member of a consumer group ([`LiveClient::group_members`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupMember {
    /// Its `client.id`.
    pub client_id: String,
    /// The host it connects from, as the broker sees it (`/127.0.0.1`).
    pub client_host: String,
    /// Its assignment, decoded (`decode_assignment`); `None` while it has
    /// none (the group is rebalancing).
    pub assignment: Option<Result<Assigned, AssignmentError>>,
}

/// Why a member's assignment could not be decoded (`decode_assignment`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AssignmentError {
    /// The bytes end in the middle of a field.
    #[error("the assignment ends at byte {at} in the middle of {what} ({needed} byte(s) needed)")]
    Cut {
        /// Where the bytes end.
        at: usize,
        /// The field cut short.
        what: &'static str,
        /// How many bytes the field needed.
        needed: usize,
    },
    /// A negative version.
    #[error("the assignment has version {0}")]
    Version(i16),
    /// A negative topic name length.
    #[error("a topic name has length {0}")]
    NameLength(i16),
    /// A topic name that is not UTF-8.
    #[error("a topic name is not UTF-8: {0}")]
    NotUtf8(#[source] std::str::Utf8Error),
}

/// Decodes a member's assignment in Kafka's consumer protocol
/// (`ConsumerProtocolAssignment`): an i16 version, an i32 topic count, per
/// topic an i16-length UTF-8 name, an i32 partition count and the i32
/// partitions, then user data (ignored, as are the fields later versions
/// add). All big-endian. An error names what was cut short or malformed.
pub fn decode_assignment(bytes: &[u8]) -> Result<Assigned, AssignmentError> {
    struct Reader<'a>(&'a [u8], usize);
    impl Reader<'_> {
        fn take(&mut self, count: usize, what: &'static str) -> Result<&[u8], AssignmentError> {
            let end = self.1.checked_add(count).filter(|end| *end <= self.0.len());
            let Some(end) = end else {
                return Err(AssignmentError::Cut {
                    at: self.0.len(),
                    what,
                    needed: count,
                });
            };
            let taken = &self.0[self.1..end];
            self.1 = end;
            Ok(taken)
        }
        fn i16(&mut self, what: &'static str) -> Result<i16, AssignmentError> {
            let bytes = self.take(2, what)?;
            Ok(i16::from_be_bytes([bytes[0], bytes[1]]))
        }
        fn i32(&mut self, what: &'static str) -> Result<i32, AssignmentError> {
            let bytes = self.take(4, what)?;
            Ok(i32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
        }
        fn count(&mut self, what: &'static str) -> Result<usize, AssignmentError> {
            let count = self.i32(what)?;
            // -1 is a null array: none.
            Ok(usize::try_from(count.max(0)).unwrap_or(0))
        }
    }
    let mut reader = Reader(bytes, 0);
    let version = reader.i16("the version")?;
    if version < 0 {
        return Err(AssignmentError::Version(version));
    }
    let topics = reader.count("the topic count")?;
    let mut assignment = Vec::new();
    for _ in 0..topics {
        let length = reader.i16("a topic name's length")?;
        let length = usize::try_from(length).map_err(|_| AssignmentError::NameLength(length))?;
        let name = std::str::from_utf8(reader.take(length, "a topic name")?)
            .map_err(AssignmentError::NotUtf8)?
            .to_owned();
        let partitions = reader.count("a partition count")?;
        let mut list = Vec::with_capacity(partitions.min(bytes.len() / 4));
        for _ in 0..partitions {
            list.push(reader.i32("a partition")?);
        }
        assignment.push((name, list));
    }
    Ok(assignment)
}
#[cfg(test)]
mod tests {
    use super::*;

    /// The consumer protocol's assignment decodes to topics and
    /// partitions; a cut one names where it ends.
    #[test]
    fn an_assignment_decodes_and_a_cut_one_is_named() {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&1i16.to_be_bytes());
        bytes.extend_from_slice(&2i32.to_be_bytes());
        for (topic, partitions) in [("app.instances", vec![0i32, 3]), ("x", vec![])] {
            bytes.extend_from_slice(&(topic.len() as i16).to_be_bytes());
            bytes.extend_from_slice(topic.as_bytes());
            bytes.extend_from_slice(&(partitions.len() as i32).to_be_bytes());
            for partition in partitions {
                bytes.extend_from_slice(&partition.to_be_bytes());
            }
        }
        bytes.extend_from_slice(&(-1i32).to_be_bytes()); // no user data
        assert_eq!(
            decode_assignment(&bytes),
            Ok(vec![
                ("app.instances".to_string(), vec![0, 3]),
                ("x".to_string(), vec![])
            ])
        );
        let error = decode_assignment(&bytes[..20]).unwrap_err();
        assert!(error.to_string().contains("ends at byte 20"), "{error}");
        assert_eq!(decode_assignment(&[0, 0, 0, 0, 0, 0]), Ok(vec![]));
    }
}
