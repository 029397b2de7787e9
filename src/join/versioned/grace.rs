//! A versioned join's grace period (J19, KIP-923): stream records held
//! until the join's stream time passes their timestamp plus the grace, so
//! that table updates arriving out of order within the grace are seen.
//!
//! Plain data, no codecs and no slots, as [`super::history`]: the logic
//! keeps the buffer in the task's tick slot, and the unit tests read it
//! directly.

use bytes::Bytes;

use crate::mutation::{self, Mutation};
use crate::record::Header;

/// A stream record held for the grace period: what the join needs of it
/// when it is released (the task's stream partition is its partition).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Held {
    pub offset: u64,
    pub timestamp: i64,
    pub key: Bytes,
    pub value: Option<Bytes>,
    pub headers: Vec<Header>,
}

/// The grace buffer: the join's stream time (the highest timestamp of a
/// stream record it held, Kafka Streams' buffer's `observedStreamTime`;
/// `None` before the first) and the held records in release order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Buffer {
    pub stream_time: Option<i64>,
    /// Ordered by timestamp, then key bytes, then arrival.
    pub held: Vec<Held>,
}

/// What a stream record's arrival does.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Arrival {
    /// The buffer after it.
    pub buffer: Buffer,
    /// The records to join now, in order: the arriving record itself when
    /// it is older than the stream time less the grace (too late to hold),
    /// else the held records whose timestamp plus the grace the stream time
    /// has reached (the arriving one among them when the grace is over).
    pub released: Vec<Held>,
}

/// J19: `record` arrives at `buffer` under a grace of `grace` ms.
pub(crate) fn arrive(buffer: &Buffer, grace: i64, record: Held) -> Arrival {
    // Kafka Streams holds a record unless its buffer's stream time less
    // the grace is above its timestamp.
    let too_late = buffer
        .stream_time
        .is_some_and(|stream_time| stream_time.saturating_sub(grace) > record.timestamp);
    if too_late || mutation::active(Mutation::VersionedGraceIgnored) {
        // Planted bug (I13): every record joined at once, as without grace.
        return Arrival {
            buffer: buffer.clone(),
            released: vec![record],
        };
    }
    let mut held = buffer.held.clone();
    let at = held
        .partition_point(|other| (other.timestamp, &other.key) <= (record.timestamp, &record.key));
    let stream_time = Some(
        buffer
            .stream_time
            .map_or(record.timestamp, |seen| seen.max(record.timestamp)),
    );
    held.insert(at, record);
    let due = stream_time.map_or(i64::MIN, |time| time.saturating_sub(grace));
    let released_count = held.partition_point(|other| other.timestamp <= due);
    let released: Vec<Held> = held.drain(..released_count).collect();
    Arrival {
        buffer: Buffer { stream_time, held },
        released,
    }
}
