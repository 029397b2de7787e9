//! What the live adapter reports when Kafka refuses, and how bad it is.
//!
//! librdkafka sorts every error of a transactional producer into one of three
//! classes, and each asks the driver for a different response (X3, X4):
//!
//! | class | what it means | what the driver does |
//! |---|---|---|
//! | [`TxnErrorClass::Retriable`] | the call did not complete (a timeout, a coordinator moving) but the transaction is intact | repeat the same call |
//! | [`TxnErrorClass::RequiresAbort`] | the transaction can no longer commit (a send failed, an offset was refused), the producer is fine | abort the transaction, roll the task back to its snapshot, go on |
//! | [`TxnErrorClass::Fatal`] | the producer instance is unusable | drop it; if it was [fenced](LiveError::is_fenced), another instance owns the task: stop (a zombie must not re-initialise, that would fence the owner); otherwise roll back and start a fresh producer |
//!
//! [`TxnErrorClass::of`] is the one classifier, used for every error the
//! adapter returns from a transactional call or a send inside a transaction.

use std::fmt;
use std::time::Duration;

use rdkafka::error::{KafkaError, RDKafkaErrorCode};

use parsley::Tp;

/// rdkafka's three transaction error classes. The runtime handles each as its variant says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TxnErrorClass {
    /// Repeat the call; the transaction is still open and intact.
    Retriable,
    /// Abort the transaction; the producer stays usable afterwards.
    RequiresAbort,
    /// The producer is unusable: drop it.
    Fatal,
}

impl TxnErrorClass {
    /// Classifies an error of a transactional call (`init`, `begin`,
    /// `send_offsets`, `commit`, `abort`) or of a send inside a transaction.
    ///
    /// For transaction errors the flags librdkafka sets decide, fatal first:
    /// a fatal error is never worth retrying or aborting. A transaction error
    /// with none of the flags (librdkafka's `_STATE`, `_CONFLICT`: the driver
    /// called the producer in a state it did not expect) is classed fatal:
    /// the driver and the producer disagree about the transaction, and the
    /// only state both agree on is a fresh producer, whose `init` aborts
    /// whatever the old one left open.
    ///
    /// A failed delivery makes librdkafka put the open transaction in an
    /// abortable state, so a production error requires an abort, unless its
    /// code says the producer was fenced or failed fatally. Anything else (a
    /// client that could not be created, a dropped client) is fatal.
    pub fn of(error: &KafkaError) -> TxnErrorClass {
        match error {
            KafkaError::Transaction(error) => {
                if error.is_fatal() {
                    TxnErrorClass::Fatal
                } else if error.txn_requires_abort() {
                    TxnErrorClass::RequiresAbort
                } else if error.is_retriable() {
                    TxnErrorClass::Retriable
                } else {
                    TxnErrorClass::Fatal
                }
            }
            KafkaError::MessageProduction(code) | KafkaError::Flush(code) => {
                if is_fenced_code(*code) || *code == RDKafkaErrorCode::Fatal {
                    TxnErrorClass::Fatal
                } else {
                    TxnErrorClass::RequiresAbort
                }
            }
            _ => TxnErrorClass::Fatal,
        }
    }
}

impl fmt::Display for TxnErrorClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TxnErrorClass::Retriable => "retriable",
            TxnErrorClass::RequiresAbort => "requires abort",
            TxnErrorClass::Fatal => "fatal",
        })
    }
}

/// True for the codes that say a newer producer with the same transactional
/// id (or the coordinator, after a timeout) took the producer's epoch (X4).
pub fn is_fenced_code(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::Fenced
            | RDKafkaErrorCode::ProducerFenced
            | RDKafkaErrorCode::InvalidProducerEpoch
    )
}

/// True when `error` says the producer was fenced.
pub fn is_fenced(error: &KafkaError) -> bool {
    error.rdkafka_error_code().is_some_and(is_fenced_code)
}

/// A transactional producer's call, for error messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TxnOp {
    /// `init_transactions`: registers the transactional id, fencing older
    /// producers with it.
    Init,
    /// `begin_transaction`: opens a transaction.
    Begin,
    /// `send_offsets_to_transaction`: stages a group's offsets and
    /// checkpoint in the open transaction.
    SendOffsets,
    /// `commit_transaction`: flushes and commits the open transaction.
    Commit,
    /// `abort_transaction`: aborts the open transaction.
    Abort,
}

impl fmt::Display for TxnOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TxnOp::Init => "init_transactions",
            TxnOp::Begin => "begin_transaction",
            TxnOp::SendOffsets => "send_offsets_to_transaction",
            TxnOp::Commit => "commit_transaction",
            TxnOp::Abort => "abort_transaction",
        })
    }
}

fn fenced_note(fenced: &bool) -> &'static str {
    if *fenced {
        ", fenced"
    } else {
        ""
    }
}

/// Why a topic could not be created ([`LiveError::CreateTopic`]).
#[derive(Debug, thiserror::Error)]
pub enum CreateTopicFailure {
    /// More partitions than Kafka's i32 allows.
    #[error("Kafka allows at most 2^31 - 1 partitions")]
    TooManyPartitions,
    /// The admin client's request failed.
    #[error(transparent)]
    Admin(KafkaError),
    /// The broker refused the topic with this code.
    #[error(transparent)]
    Refused(RDKafkaErrorCode),
}

/// Why a blocking call did not finish ([`LiveError::Join`]).
#[derive(Debug, thiserror::Error)]
pub enum JoinFailure {
    /// Tokio's blocking task panicked or was cancelled.
    #[error(transparent)]
    Task(tokio::task::JoinError),
    /// The call's own thread could not be started.
    #[error("the call's thread could not start: {0}")]
    Spawn(#[source] std::io::Error),
    /// The call's own thread panicked.
    #[error("the call's thread panicked")]
    Panicked,
}

/// Everything the live adapter can fail with. Each variant names what was
/// being done and where: the topic, tp, offset, group or transactional id.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// No bootstrap address accepted a connection: each is named with why
    /// (DNS, refused, timeout) and after how long; a refusal is not said
    /// to have taken the whole bound.
    #[error("cannot reach the Kafka cluster at `{bootstrap}`: {}", failures.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Unreachable {
        /// `bootstrap.servers` as configured.
        bootstrap: String,
        /// The bound it was tried within ([`LiveConfig::connect_timeout`](super::LiveConfig::connect_timeout));
        /// each failure says how long it took.
        within: std::time::Duration,
        /// Each address and why it failed.
        failures: Vec<super::reach::Unreachable>,
    },

    /// librdkafka refused to create a client (a bad property, say).
    #[error("cannot create the Kafka {client} client: {source}")]
    Client {
        /// Which client: "admin", "transactional producer", "stage consumer", ….
        client: &'static str,
        /// librdkafka's error.
        #[source]
        source: Box<KafkaError>,
    },

    /// A topic was to be created with zero partitions.
    #[error("topic `{topic}` needs at least one partition")]
    InvalidPartitionCount {
        /// The topic to create.
        topic: String,
    },

    /// The topic to create exists already.
    #[error("topic `{topic}` already exists")]
    TopicExists {
        /// The topic to create.
        topic: String,
    },

    /// The admin client could not create a topic.
    #[error("creating topic `{topic}` with {partitions} partition(s) failed: {source}")]
    CreateTopic {
        /// The topic to create.
        topic: String,
        /// The partition count asked for.
        partitions: u32,
        /// What the admin client or the broker said.
        #[source]
        source: CreateTopicFailure,
    },

    /// A metadata request for a topic (its partition count) failed.
    #[error("reading the metadata of topic `{topic}` failed: {source}")]
    Metadata {
        /// The topic asked about.
        topic: String,
        /// librdkafka's error.
        #[source]
        source: Box<KafkaError>,
    },

    /// A topic just created did not get a leader on every partition within
    /// the timeout.
    #[error(
        "topic `{topic}` did not show {partitions} partition(s) with leaders within {timeout:?}"
    )]
    TopicNotReady {
        /// The topic created.
        topic: String,
        /// The partition count it was created with.
        partitions: u32,
        /// How long the adapter waited ([`LiveConfig::timeout`](super::LiveConfig::timeout)).
        timeout: Duration,
    },

    /// A transactional call of a producer failed; `class` says whether to
    /// retry, abort, or drop the producer.
    #[error("producer `{transactional_id}`: {op} failed ({class}{fenced_note}): {source}", fenced_note = fenced_note(.fenced))]
    Transaction {
        /// The producer's transactional id: the task's
        /// `<app>-<stage>-<partition>`.
        transactional_id: String,
        /// The topics the open transaction wrote to, in the order first
        /// written: one of them is the topic a missing `Write` ACL names
        /// (the broker does not say which).
        written: Vec<String>,
        /// The call that failed.
        op: TxnOp,
        /// What the driver should do about it.
        class: TxnErrorClass,
        /// True when a newer producer with the same transactional id fenced
        /// this one (X4).
        fenced: bool,
        /// librdkafka's error.
        #[source]
        source: Box<KafkaError>,
    },

    /// A record could not be queued, or its delivery failed.
    #[error("producer `{producer}`: send to {tp} failed ({class}{fenced_note}): {source}", fenced_note = fenced_note(.fenced))]
    Send {
        /// The producer's transactional id, or `plain` for a
        /// [`PlainProducer`](super::PlainProducer).
        producer: String,
        /// Where the record was going.
        tp: Tp,
        /// What the driver should do about the open transaction.
        class: TxnErrorClass,
        /// True when the producer was fenced (X4).
        fenced: bool,
        /// librdkafka's error.
        #[source]
        source: Box<KafkaError>,
    },

    /// A delivery report said the record landed but gave no offset.
    #[error("producer `{producer}`: the delivery report for {tp} has no offset")]
    NoOffset {
        /// The producer's transactional id, or `plain`.
        producer: String,
        /// Where the record went.
        tp: Tp,
    },

    /// The producer was dropped before the record's delivery report came.
    #[error(
        "producer `{producer}`: the delivery report for {tp} never came (the producer was dropped)"
    )]
    DeliveryLost {
        /// The producer's transactional id, or `plain`.
        producer: String,
        /// Where the record was going.
        tp: Tp,
    },

    /// A fetch was asked to start beyond the high watermark.
    #[error("offset {offset} is out of range for {tp}: the high watermark is {high_watermark}")]
    OffsetOutOfRange {
        /// The tp fetched.
        tp: Tp,
        /// The offset the fetch was to start at.
        offset: u64,
        /// The tp's high watermark when the fetch began.
        high_watermark: u64,
    },

    /// A ListOffsets request for a tp's watermarks failed.
    #[error("reading the watermarks of {tp} failed: {source}")]
    Watermarks {
        /// The tp asked about.
        tp: Tp,
        /// librdkafka's error.
        #[source]
        source: Box<KafkaError>,
    },

    /// Assigning the consumer, or a poll during a fetch, failed.
    #[error("fetching {tp} from offset {from} failed: {source}")]
    Fetch {
        /// The tp fetched.
        tp: Tp,
        /// The offset the fetch started at.
        from: u64,
        /// librdkafka's error.
        #[source]
        source: Box<KafkaError>,
    },

    /// A fetch did not reach the offset visible when it began within the
    /// timeout.
    #[error(
        "fetching {tp} from offset {from} did not reach offset {target} within {timeout:?}: \
         the consumer stopped at {position:?} after {records} record(s)"
    )]
    FetchIncomplete {
        /// The tp fetched.
        tp: Tp,
        /// The offset the fetch started at.
        from: u64,
        /// The offset it had to reach: the last stable offset for
        /// `read_committed`, the high watermark for `read_uncommitted`.
        target: u64,
        /// The consumer's position when it gave up, if it had one.
        position: Option<u64>,
        /// How many records it had fetched by then.
        records: usize,
        /// How long it polled.
        timeout: Duration,
    },

    /// The last stable offset of a tp did not reach the target within the
    /// timeout: the markers of a commit or an abort were not written in time.
    #[error(
        "the last stable offset of {tp} did not reach {target} within {timeout:?}: it is {last_stable_offset}"
    )]
    NotStable {
        /// The tp waited on.
        tp: Tp,
        /// The last stable offset waited for.
        target: u64,
        /// The last stable offset at the end.
        last_stable_offset: u64,
        /// How long the adapter waited.
        timeout: Duration,
    },

    /// Reading a consumer group's committed offsets failed.
    #[error("reading the committed offsets of group `{group}` on {tps:?} failed: {source}")]
    Committed {
        /// The consumer group: `<app>-<stage>` for a task's.
        group: String,
        /// The tps asked about.
        tps: Vec<Tp>,
        /// librdkafka's error, for the request or for one tp.
        #[source]
        source: Box<KafkaError>,
    },

    /// Describing a consumer group (its members and their assignments)
    /// failed.
    #[error("describing group `{group}` failed: {source}")]
    Group {
        /// The consumer group.
        group: String,
        /// librdkafka's error.
        #[source]
        source: Box<KafkaError>,
    },

    /// An offset beyond `i64::MAX`, which Kafka cannot represent.
    #[error("offset {offset} of {tp} does not fit Kafka's signed 64-bit offsets")]
    OffsetTooLarge {
        /// The tp the offset is on.
        tp: Tp,
        /// The offset.
        offset: u64,
    },

    /// A blocking call run on tokio's blocking pool panicked or was
    /// cancelled.
    #[error("{what}: the blocking call did not finish: {source}")]
    Join {
        /// What the call was doing, such as "fetch of balances-0 from 0".
        what: String,
        /// Why it did not finish.
        #[source]
        source: JoinFailure,
    },

    /// A librdkafka call did not return within the runtime's deadline
    /// ([`LiveConfig::deadline`](super::LiveConfig::deadline)), although
    /// it was given a shorter timeout of its own: it was abandoned on the
    /// thread it ran on. Its client is in an unknown state and must be
    /// replaced; a task restarts from its committed checkpoint with a fresh
    /// producer, whose `init_transactions` fences the abandoned one.
    #[error("{what} did not return within {}s; the call was abandoned and its client must be replaced", deadline.as_secs_f64())]
    Overran {
        /// The call, such as "send_offsets_to_transaction of `app-stage-0`".
        what: String,
        /// How long it was waited for.
        deadline: Duration,
    },

    /// The broker refused to look up a consumer group's coordinator
    /// (FindCoordinator), which every request about the group needs (its
    /// committed offsets, a transaction's offsets, a consumer's fetches):
    /// no ACL allows the principal to describe the group. librdkafka
    /// reports it on the consumer's queue without the group's name; the
    /// consumer that polled it names it.
    #[error("looking up the coordinator of group `{group}` failed: {source}")]
    Coordinator {
        /// The consumer group: `<app>-<stage>` for a task's.
        group: String,
        /// librdkafka's error.
        #[source]
        source: Box<KafkaError>,
    },

    /// The instance's group membership (the group and topic
    /// `<app>.instances`) was refused by the cluster's authorizer.
    #[error("group membership of `{group}` failed: {source}")]
    GroupMembership {
        /// The instances' group, which is also its topic.
        group: String,
        /// librdkafka's error.
        #[source]
        source: Box<KafkaError>,
    },

    /// The client properties (`--command-config`, `-X`, `PARSLEY_CLIENT_*`)
    /// could not be read, or librdkafka refused one; a secret's value is
    /// never shown.
    #[error("client properties: {source}")]
    Properties {
        /// What was wrong, and where it was given.
        #[source]
        source: Box<crate::client::properties::PropertiesError>,
    },

    /// A bootstrap address accepted the connection, but the TLS handshake
    /// or the SASL authentication failed ([`crate::reach::SecureFailure`]).
    #[error("cannot connect securely to the Kafka cluster at `{bootstrap}`: {failure}")]
    Secure {
        /// `bootstrap.servers` as configured.
        bootstrap: String,
        /// What failed.
        failure: crate::reach::SecureFailure,
    },
}

/// A kind of Kafka resource an ACL names (`kafka-acls.sh`'s `--topic`,
/// `--group`, `--transactional-id`, `--cluster`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AclResource {
    /// A topic.
    Topic(String),
    /// One of these topics, which the broker's answer does not tell apart
    /// (a transaction that wrote to several).
    OneOfTopics(Vec<String>),
    /// A consumer group.
    Group(String),
    /// A producer's transactional id.
    TransactionalId(String),
    /// The cluster.
    Cluster,
}

impl fmt::Display for AclResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AclResource::Topic(name) => write!(f, "Topic:{name}"),
            AclResource::OneOfTopics(names) => {
                let names: Vec<String> = names.iter().map(|name| format!("Topic:{name}")).collect();
                write!(f, "one of {}", names.join(", "))
            }
            AclResource::Group(name) => write!(f, "Group:{name}"),
            AclResource::TransactionalId(name) => write!(f, "TransactionalId:{name}"),
            AclResource::Cluster => f.write_str("Cluster:kafka-cluster"),
        }
    }
}

/// An operation an ACL allows (`kafka-acls.sh --operation`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AclOperation {
    /// Read a topic, join or commit to a group.
    Read,
    /// Write to a topic; use a transactional id.
    Write,
    /// Create a topic.
    Create,
    /// Describe a topic or a group (granted by Read, Write and Create too).
    Describe,
    /// An idempotent producer's id from the cluster.
    IdempotentWrite,
}

impl fmt::Display for AclOperation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AclOperation::Read => "Read",
            AclOperation::Write => "Write",
            AclOperation::Create => "Create",
            AclOperation::Describe => "Describe",
            AclOperation::IdempotentWrite => "IdempotentWrite",
        })
    }
}

/// What the cluster's authorizer refused: the operation on the resource
/// ([`LiveError::denied`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denied {
    /// The resource, as the failed request named it.
    pub resource: AclResource,
    /// The operation the request needed.
    pub operation: AclOperation,
}

impl fmt::Display for Denied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} on {}", self.operation, self.resource)?;
        if self.operation == AclOperation::Describe {
            f.write_str(" (granted by Read or Write too)")?;
        }
        Ok(())
    }
}

/// True for Kafka's authorization codes.
fn is_authorization_code(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::TopicAuthorizationFailed
            | RDKafkaErrorCode::GroupAuthorizationFailed
            | RDKafkaErrorCode::ClusterAuthorizationFailed
            | RDKafkaErrorCode::TransactionalIdAuthorizationFailed
    )
}

impl LiveError {
    /// What the cluster's authorizer refused, when this is an
    /// authorization failure (a missing ACL): the resource and operation,
    /// from the code Kafka answered and the call that got it.
    pub fn denied(&self) -> Option<Denied> {
        use AclOperation as Op;
        use AclResource as Res;
        let code = match self {
            LiveError::CreateTopic {
                source: CreateTopicFailure::Refused(code),
                ..
            } => *code,
            LiveError::CreateTopic {
                source: CreateTopicFailure::Admin(error),
                ..
            } => error.rdkafka_error_code()?,
            other => other.code()?,
        };
        if !is_authorization_code(code) {
            return None;
        }
        let by_code = |id: &str, topic: Option<&str>, topic_op: Op| match code {
            RDKafkaErrorCode::TransactionalIdAuthorizationFailed => {
                (Res::TransactionalId(id.to_owned()), Op::Write)
            }
            RDKafkaErrorCode::ClusterAuthorizationFailed => (Res::Cluster, Op::IdempotentWrite),
            // The task's group is its transactional id without the
            // partition (X4, X6).
            RDKafkaErrorCode::GroupAuthorizationFailed => (
                Res::Group(
                    id.rsplit_once('-')
                        .map_or(id, |(group, _)| group)
                        .to_owned(),
                ),
                Op::Read,
            ),
            _ => (
                Res::Topic(topic.unwrap_or("(one of the task's topics)").to_owned()),
                topic_op,
            ),
        };
        let (resource, operation) = match self {
            LiveError::Transaction {
                transactional_id,
                written,
                ..
            } => match (code, written.as_slice()) {
                (RDKafkaErrorCode::TopicAuthorizationFailed, [one]) => {
                    (Res::Topic(one.clone()), Op::Write)
                }
                (RDKafkaErrorCode::TopicAuthorizationFailed, [_, _, ..]) => {
                    (Res::OneOfTopics(written.clone()), Op::Write)
                }
                _ => by_code(transactional_id, None, Op::Write),
            },
            LiveError::Send { producer, tp, .. } => {
                by_code(producer, Some(tp.topic.as_str()), Op::Write)
            }
            LiveError::Fetch { tp, .. } => match code {
                RDKafkaErrorCode::GroupAuthorizationFailed => {
                    (Res::Group("(the task's group)".into()), Op::Read)
                }
                _ => (Res::Topic(tp.topic.as_str().to_owned()), Op::Read),
            },
            LiveError::Committed { group, tps, .. } => match code {
                RDKafkaErrorCode::GroupAuthorizationFailed => {
                    (Res::Group(group.clone()), Op::Describe)
                }
                _ => (
                    Res::Topic(tps.first().map_or("?", |tp| tp.topic.as_str()).to_owned()),
                    Op::Describe,
                ),
            },
            LiveError::Group { group, .. } | LiveError::Coordinator { group, .. } => {
                (Res::Group(group.clone()), Op::Describe)
            }
            LiveError::GroupMembership { group, .. } => match code {
                RDKafkaErrorCode::TopicAuthorizationFailed => (Res::Topic(group.clone()), Op::Read),
                _ => (Res::Group(group.clone()), Op::Read),
            },
            LiveError::Metadata { topic, .. } => (Res::Topic(topic.clone()), Op::Describe),
            LiveError::Watermarks { tp, .. } => {
                (Res::Topic(tp.topic.as_str().to_owned()), Op::Describe)
            }
            LiveError::CreateTopic { topic, .. } => (Res::Topic(topic.clone()), Op::Create),
            _ => return None,
        };
        Some(Denied {
            resource,
            operation,
        })
    }

    /// The transaction error class, for errors of transactional calls and
    /// sends; `None` for everything else.
    pub fn txn_class(&self) -> Option<TxnErrorClass> {
        match self {
            LiveError::Transaction { class, .. } | LiveError::Send { class, .. } => Some(*class),
            _ => None,
        }
    }

    /// True when a transactional call or a send failed because the producer
    /// was fenced (X4).
    pub fn is_fenced(&self) -> bool {
        match self {
            LiveError::Transaction { fenced, .. } | LiveError::Send { fenced, .. } => *fenced,
            _ => false,
        }
    }

    /// True when the failure concerns the cluster or a client rather than
    /// the data or the configuration, so a task that hit it can start again
    /// from its committed checkpoint with a fresh producer and expect to get
    /// further: an abandoned call, a broker that did not answer, a producer
    /// that failed fatally without being fenced. A fence is not transient:
    /// a newer owner holds the task (X4), and re-initialising would fence it.
    pub fn is_transient(&self) -> bool {
        // A missing ACL stays missing: the task's failure policy applies.
        if self.denied().is_some() {
            return false;
        }
        match self {
            LiveError::Overran { .. }
            | LiveError::Metadata { .. }
            | LiveError::TopicNotReady { .. }
            | LiveError::DeliveryLost { .. }
            | LiveError::Watermarks { .. }
            | LiveError::Fetch { .. }
            | LiveError::FetchIncomplete { .. }
            | LiveError::NotStable { .. }
            | LiveError::Committed { .. }
            | LiveError::Group { .. }
            | LiveError::Join { .. } => true,
            LiveError::Transaction { fenced, .. } | LiveError::Send { fenced, .. } => !fenced,
            _ => false,
        }
    }

    /// The librdkafka error code underneath, if there is one.
    pub fn code(&self) -> Option<RDKafkaErrorCode> {
        match self {
            LiveError::Client { source, .. }
            | LiveError::Metadata { source, .. }
            | LiveError::Transaction { source, .. }
            | LiveError::Send { source, .. }
            | LiveError::Watermarks { source, .. }
            | LiveError::Fetch { source, .. }
            | LiveError::Committed { source, .. }
            | LiveError::Group { source, .. }
            | LiveError::Coordinator { source, .. }
            | LiveError::GroupMembership { source, .. } => source.rdkafka_error_code(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn production_errors_require_an_abort_unless_fenced() {
        let failed = KafkaError::MessageProduction(RDKafkaErrorCode::MessageTimedOut);
        assert_eq!(TxnErrorClass::of(&failed), TxnErrorClass::RequiresAbort);
        let fenced = KafkaError::MessageProduction(RDKafkaErrorCode::ProducerFenced);
        assert_eq!(TxnErrorClass::of(&fenced), TxnErrorClass::Fatal);
        assert!(is_fenced(&fenced));
        assert!(!is_fenced(&failed));
        assert_eq!(
            TxnErrorClass::of(&KafkaError::Canceled),
            TxnErrorClass::Fatal
        );
    }

    /// A fence is never transient (X4: re-initialising would fence the
    /// newer owner); an abandoned call, a broker away or a producer failing
    /// without a fence is.
    #[test]
    fn transient_failures_restart_a_task_but_a_fence_does_not() {
        let transaction = |fenced: bool| LiveError::Transaction {
            transactional_id: "app-stage-0".into(),
            written: Vec::new(),
            op: TxnOp::Commit,
            class: TxnErrorClass::Fatal,
            fenced,
            source: Box::new(KafkaError::MessageProduction(
                RDKafkaErrorCode::ProducerFenced,
            )),
        };
        assert!(!transaction(true).is_transient());
        assert!(transaction(false).is_transient());
        let overran = LiveError::Overran {
            what: "commit_transaction of `app-stage-0`".into(),
            deadline: Duration::from_secs(16),
        };
        assert!(overran.is_transient());
        let bad_offset = LiveError::OffsetOutOfRange {
            tp: Tp::new("balances", 0),
            offset: 9,
            high_watermark: 3,
        };
        assert!(!bad_offset.is_transient());
    }

    /// A topic the broker refused, and a blocking call that did not finish,
    /// keep what failed as their typed source; the messages read as before.
    #[test]
    fn create_topic_and_join_failures_keep_their_source() {
        use std::error::Error as _;
        let refused = LiveError::CreateTopic {
            topic: "orders".into(),
            partitions: 3,
            source: CreateTopicFailure::Refused(RDKafkaErrorCode::PolicyViolation),
        };
        assert_eq!(
            refused.to_string(),
            format!(
                "creating topic `orders` with 3 partition(s) failed: {}",
                RDKafkaErrorCode::PolicyViolation
            )
        );
        assert!(refused
            .source()
            .is_some_and(|source| source.downcast_ref::<CreateTopicFailure>().is_some()));
        let too_many = LiveError::CreateTopic {
            topic: "orders".into(),
            partitions: u32::MAX,
            source: CreateTopicFailure::TooManyPartitions,
        };
        assert_eq!(
            too_many.to_string(),
            "creating topic `orders` with 4294967295 partition(s) failed: Kafka allows at most 2^31 - 1 partitions"
        );
        let spawn = LiveError::Join {
            what: "probing".into(),
            source: JoinFailure::Spawn(std::io::Error::other("no threads")),
        };
        assert_eq!(
            spawn.to_string(),
            "probing: the blocking call did not finish: the call's thread could not start: no threads"
        );
        assert!(spawn.source().and_then(|source| source.source()).is_some());
    }

    /// A refused coordinator look-up names the group it was for, as a
    /// missing ACL on it, which no restart cures.
    #[test]
    fn a_refused_coordinator_look_up_names_the_group() {
        let refused = LiveError::Coordinator {
            group: "payments-balances".into(),
            source: Box::new(KafkaError::MessageConsumption(
                RDKafkaErrorCode::GroupAuthorizationFailed,
            )),
        };
        assert_eq!(
            refused.denied(),
            Some(Denied {
                resource: AclResource::Group("payments-balances".into()),
                operation: AclOperation::Describe,
            })
        );
        assert!(!refused.is_transient());
        assert!(
            refused.to_string().contains("group `payments-balances`"),
            "{refused}"
        );
    }

    #[test]
    fn messages_name_what_and_where() {
        let error = LiveError::Send {
            producer: "payments-balances-0".into(),
            tp: Tp::new("balances", 0),
            class: TxnErrorClass::Fatal,
            fenced: true,
            source: Box::new(KafkaError::MessageProduction(
                RDKafkaErrorCode::ProducerFenced,
            )),
        };
        let text = error.to_string();
        assert!(text.contains("payments-balances-0"), "{text}");
        assert!(text.contains("balances-0"), "{text}");
        assert!(text.contains("fatal, fenced"), "{text}");
        assert!(error.is_fenced());
        assert_eq!(error.txn_class(), Some(TxnErrorClass::Fatal));
    }
}
