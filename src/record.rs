//! Records as the core sees them on the wire: bytes plus headers, before any
//! codec has looked at them. Drivers translate their transport's records into
//! these and back; the core never touches a socket.

use std::borrow::Cow;

use bytes::Bytes;

use crate::tp::Tp;

/// A record header: Kafka allows repeated names, so headers are a list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// The header key. Borrowed for the names Parsley writes itself (the
    /// stamp header's, the dead-letter headers'), owned for names read off
    /// the wire, so writing a header allocates no name.
    pub name: Cow<'static, str>,
    /// The header value.
    pub value: Bytes,
}

/// What a producer sends and a log stores: key, value, headers, timestamp.
/// A `None` value is a tombstone (used by changelogs to delete a slot).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordData {
    /// The key bytes; `None` for a null key.
    pub key: Option<Bytes>,
    /// The value bytes; `None` for a null value (a tombstone).
    pub value: Option<Bytes>,
    /// The headers, the stamp header among them.
    pub headers: Vec<Header>,
    /// Milliseconds since the Unix epoch, as Kafka's record timestamp.
    pub timestamp: i64,
}

impl RecordData {
    /// The value of the first header named `name`.
    pub fn header(&self, name: &str) -> Option<&Bytes> {
        self.headers
            .iter()
            .find(|header| header.name == name)
            .map(|header| &header.value)
    }
}

/// A record read back from a partition: its data and where it sits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumedRecord {
    /// Its offset in its tp.
    pub offset: u64,
    /// What the record holds.
    pub data: RecordData,
}

/// A record the core asks a driver to send inside the task's open transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducedRecord {
    /// The tp to write to.
    pub tp: Tp,
    /// What the record holds.
    pub data: RecordData,
}

/// Which records a fetch may return, as Kafka's `isolation.level`: one
/// definition for the harness's Kafka model and the live client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Isolation {
    /// Only records of committed transactions and plain records, and only
    /// below the last stable offset. What every Parsley consumer uses.
    ReadCommitted,
    /// Every data record up to the high watermark, including those of open and
    /// aborted transactions.
    ReadUncommitted,
}

impl Isolation {
    /// The offset a fetch reads up to: the last stable offset under
    /// `read_committed`, the high watermark under `read_uncommitted`.
    pub fn read_limit(self, last_stable_offset: u64, high_watermark: u64) -> u64 {
        match self {
            Isolation::ReadCommitted => last_stable_offset,
            Isolation::ReadUncommitted => high_watermark,
        }
    }

    /// The value of librdkafka's and Kafka's `isolation.level` property.
    pub fn property(self) -> &'static str {
        match self {
            Isolation::ReadCommitted => "read_committed",
            Isolation::ReadUncommitted => "read_uncommitted",
        }
    }
}

#[cfg(test)]
mod isolation_tests {
    use super::Isolation;

    /// §9.1: `read_committed` stops at the last stable offset, which an open
    /// transaction holds back; `read_uncommitted` reads to the high watermark.
    #[test]
    fn read_committed_stops_at_the_last_stable_offset() {
        assert_eq!(Isolation::ReadCommitted.read_limit(3, 7), 3);
        assert_eq!(Isolation::ReadUncommitted.read_limit(3, 7), 7);
        assert_eq!(Isolation::ReadCommitted.property(), "read_committed");
        assert_eq!(Isolation::ReadUncommitted.property(), "read_uncommitted");
    }
}
