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

use crate::tp::Tp;

/// rdkafka's three transaction error classes. See the [module docs](self).
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
    Init,
    Begin,
    SendOffsets,
    Commit,
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

/// Everything the live adapter can fail with. Each variant names what was
/// being done and where: the topic, tp, offset, group or transactional id.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error("cannot create the Kafka {client} client: {source}")]
    Client {
        client: &'static str,
        #[source]
        source: Box<KafkaError>,
    },

    #[error("topic `{topic}` needs at least one partition")]
    InvalidPartitionCount { topic: String },

    #[error("topic `{topic}` already exists")]
    TopicExists { topic: String },

    #[error("creating topic `{topic}` with {partitions} partition(s) failed: {reason}")]
    CreateTopic {
        topic: String,
        partitions: u32,
        reason: String,
    },

    #[error("reading the metadata of topic `{topic}` failed: {source}")]
    Metadata {
        topic: String,
        #[source]
        source: Box<KafkaError>,
    },

    #[error(
        "topic `{topic}` did not show {partitions} partition(s) with leaders within {timeout:?}"
    )]
    TopicNotReady {
        topic: String,
        partitions: u32,
        timeout: Duration,
    },

    #[error("producer `{transactional_id}`: {op} failed ({class}{fenced_note}): {source}", fenced_note = fenced_note(.fenced))]
    Transaction {
        transactional_id: String,
        op: TxnOp,
        class: TxnErrorClass,
        fenced: bool,
        #[source]
        source: Box<KafkaError>,
    },

    #[error("producer `{producer}`: send to {tp} failed ({class}{fenced_note}): {source}", fenced_note = fenced_note(.fenced))]
    Send {
        producer: String,
        tp: Tp,
        class: TxnErrorClass,
        fenced: bool,
        #[source]
        source: Box<KafkaError>,
    },

    #[error("producer `{producer}`: the delivery report for {tp} has no offset")]
    NoOffset { producer: String, tp: Tp },

    #[error(
        "producer `{producer}`: the delivery report for {tp} never came (the producer was dropped)"
    )]
    DeliveryLost { producer: String, tp: Tp },

    #[error("offset {offset} is out of range for {tp}: the high watermark is {high_watermark}")]
    OffsetOutOfRange {
        tp: Tp,
        offset: u64,
        high_watermark: u64,
    },

    #[error("reading the watermarks of {tp} failed: {source}")]
    Watermarks {
        tp: Tp,
        #[source]
        source: Box<KafkaError>,
    },

    #[error("fetching {tp} from offset {from} failed: {source}")]
    Fetch {
        tp: Tp,
        from: u64,
        #[source]
        source: Box<KafkaError>,
    },

    #[error(
        "fetching {tp} from offset {from} did not reach offset {target} within {timeout:?}: \
         the consumer stopped at {position:?} after {records} record(s)"
    )]
    FetchIncomplete {
        tp: Tp,
        from: u64,
        target: u64,
        position: Option<u64>,
        records: usize,
        timeout: Duration,
    },

    #[error(
        "the last stable offset of {tp} did not reach {target} within {timeout:?}: it is {last_stable_offset}"
    )]
    NotStable {
        tp: Tp,
        target: u64,
        last_stable_offset: u64,
        timeout: Duration,
    },

    #[error("reading the committed offsets of group `{group}` on {tps:?} failed: {source}")]
    Committed {
        group: String,
        tps: Vec<Tp>,
        #[source]
        source: Box<KafkaError>,
    },

    #[error("offset {offset} of {tp} does not fit Kafka's signed 64-bit offsets")]
    OffsetTooLarge { tp: Tp, offset: u64 },

    #[error("{what}: the blocking call did not finish: {reason}")]
    Join { what: String, reason: String },
}

impl LiveError {
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

    /// The librdkafka error code underneath, if there is one.
    pub fn code(&self) -> Option<RDKafkaErrorCode> {
        match self {
            LiveError::Client { source, .. }
            | LiveError::Metadata { source, .. }
            | LiveError::Transaction { source, .. }
            | LiveError::Send { source, .. }
            | LiveError::Watermarks { source, .. }
            | LiveError::Fetch { source, .. }
            | LiveError::Committed { source, .. } => source.rdkafka_error_code(),
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
