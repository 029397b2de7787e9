//! What the model refuses, and why. Each message names the topic, partition or
//! transactional id it is about, so a failing simulation says where it failed.

use parsley::Tp;
use thiserror::Error;

/// An error returned by [`Cluster`](super::Cluster). These mirror the broker's
/// error codes the core has to handle (unknown topic, fencing, out of range);
/// misuse of the API (a second `begin`) is reported the same way rather than by
/// panicking, so a simulator can inject it deliberately.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum ModelError {
    /// The topic does not exist.
    #[error("unknown topic `{topic}`")]
    UnknownTopic {
        /// The topic.
        topic: String,
    },

    /// The partition does not exist.
    #[error("unknown partition {tp}: topic `{topic}` has {partitions} partition(s)", topic = .tp.topic)]
    UnknownPartition {
        /// The tp.
        tp: Tp,
        /// The partitions the topic has.
        partitions: u32,
    },

    /// The topic exists already.
    #[error("topic `{topic}` already exists")]
    TopicExists {
        /// The topic.
        topic: String,
    },

    /// A topic needs at least one partition.
    #[error("topic `{topic}` needs at least one partition")]
    InvalidPartitionCount {
        /// The topic.
        topic: String,
    },

    /// A newer `init` with the same transactional id fenced this producer (X4).
    #[error(
        "producer `{transactional_id}` with epoch {epoch} is fenced: the current epoch is {current_epoch}"
    )]
    Fenced {
        /// The producer's transactional id.
        transactional_id: String,
        /// The epoch the call was made with.
        epoch: u32,
        /// The epoch that fenced it.
        current_epoch: u32,
    },

    /// `commit`, `abort` or `send_offsets` without `begin`.
    #[error("producer `{transactional_id}` has no open transaction")]
    NoOpenTransaction {
        /// The producer's transactional id.
        transactional_id: String,
    },

    /// `begin` with a transaction already open.
    #[error("producer `{transactional_id}` already has an open transaction")]
    TransactionAlreadyOpen {
        /// The producer's transactional id.
        transactional_id: String,
    },

    /// A fetch beyond the log end.
    #[error("offset {offset} is out of range for {tp}: the high watermark is {high_watermark}")]
    OffsetOutOfRange {
        /// The tp.
        tp: Tp,
        /// The offset asked for.
        offset: u64,
        /// The tp's high watermark.
        high_watermark: u64,
    },

    /// A producer handle from another cluster.
    #[error("unknown producer: its id was never returned by init_producer on this cluster")]
    UnknownProducer,

    /// Offset metadata beyond the broker's `offset.metadata.max.bytes`.
    #[error("offset metadata for {tp} is {bytes} bytes, more than the broker's {max} (offset.metadata.max.bytes)")]
    MetadataTooLarge {
        /// The tp.
        tp: Tp,
        /// The size of the metadata.
        bytes: usize,
        /// The broker's limit.
        max: usize,
    },

    /// KIP-447: a stable offset lookup while a transaction holding the
    /// group's offsets on the tp is open or has its markers unwritten.
    #[error("group `{group}` has offsets on {tp} pending in the transaction of `{transactional_id}` (UNSTABLE_OFFSET_COMMIT): a read_committed lookup waits until it ends")]
    UnstableOffset {
        /// The group looked up.
        group: String,
        /// The tp looked up.
        tp: Tp,
        /// The transaction holding the group's offsets on `tp`.
        transactional_id: String,
    },
}
