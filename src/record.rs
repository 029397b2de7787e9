//! Records as the core sees them on the wire: bytes plus headers, before any
//! codec has looked at them. Drivers translate their transport's records into
//! these and back; the core never touches a socket.

use bytes::Bytes;

use crate::tp::Tp;

/// A record header: Kafka allows repeated names, so headers are a list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub name: String,
    pub value: Bytes,
}

/// What a producer sends and a log stores: key, value, headers, timestamp.
/// A `None` value is a tombstone (used by changelogs to delete a slot).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordData {
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<Header>,
    /// Milliseconds since the Unix epoch, as Kafka's record timestamp.
    pub timestamp: i64,
}

impl RecordData {
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
    pub offset: u64,
    pub data: RecordData,
}

/// A record the core asks a driver to send inside the task's open transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducedRecord {
    pub tp: Tp,
    pub data: RecordData,
}
