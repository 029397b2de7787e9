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
    #[error("unknown topic `{topic}`")]
    UnknownTopic { topic: String },

    #[error("unknown partition {tp}: topic `{topic}` has {partitions} partition(s)", topic = .tp.topic)]
    UnknownPartition { tp: Tp, partitions: u32 },

    #[error("topic `{topic}` already exists")]
    TopicExists { topic: String },

    #[error("topic `{topic}` needs at least one partition")]
    InvalidPartitionCount { topic: String },

    #[error(
        "producer `{transactional_id}` with epoch {epoch} is fenced: the current epoch is {current_epoch}"
    )]
    Fenced {
        transactional_id: String,
        epoch: u32,
        current_epoch: u32,
    },

    #[error("producer `{transactional_id}` has no open transaction")]
    NoOpenTransaction { transactional_id: String },

    #[error("producer `{transactional_id}` already has an open transaction")]
    TransactionAlreadyOpen { transactional_id: String },

    #[error("offset {offset} is out of range for {tp}: the high watermark is {high_watermark}")]
    OffsetOutOfRange {
        tp: Tp,
        offset: u64,
        high_watermark: u64,
    },

    #[error("unknown producer: its id was never returned by init_producer on this cluster")]
    UnknownProducer,

    #[error("offset metadata for {tp} is {bytes} bytes, more than the broker's {max} (offset.metadata.max.bytes)")]
    MetadataTooLarge { tp: Tp, bytes: usize, max: usize },

    #[error("group `{group}` has offsets on {tp} pending in the transaction of `{transactional_id}` (UNSTABLE_OFFSET_COMMIT): a read_committed lookup waits until it ends")]
    UnstableOffset {
        group: String,
        tp: Tp,
        transactional_id: String,
    },
}
