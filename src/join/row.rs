//! A stream–table join's row as its slot keeps it (J1): the table record's
//! value and its timestamp, so that a stream record that meets a row newer
//! than itself is counted (`join-rows-newer-than-record-total`).

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};

use crate::codec::{Codec, CodecError, Direction};

/// A key's row: the latest table record's value, and its timestamp.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Row<T> {
    pub value: T,
    pub timestamp: i64,
}

/// A row's bytes on the changelog: its timestamp (8 bytes, big-endian),
/// then the table record's own value bytes.
pub(crate) struct RowCodec<T> {
    pub value: Arc<dyn Codec<T>>,
}

impl<T> RowCodec<T> {
    /// The bytes of a row of `timestamp` whose value's bytes are `value`.
    pub(crate) fn bytes(timestamp: i64, value: &[u8]) -> Bytes {
        let mut out = BytesMut::with_capacity(8 + value.len());
        out.put_i64(timestamp);
        out.extend_from_slice(value);
        out.freeze()
    }
}

impl<T: 'static> Codec<Row<T>> for RowCodec<T> {
    fn encode(&self, row: &Row<T>) -> Result<Bytes, CodecError> {
        Ok(Self::bytes(row.timestamp, &self.value.encode(&row.value)?))
    }

    fn decode(&self, bytes: &[u8]) -> Result<Row<T>, CodecError> {
        let Some((timestamp, value)) = bytes.split_first_chunk::<8>() else {
            return Err(CodecError {
                codec: "join-row",
                direction: Direction::Decode,
                type_name: "stream–table join row",
                message: format!(
                    "a row starts with its 8-byte timestamp, got {} bytes",
                    bytes.len()
                ),
            });
        };
        Ok(Row {
            value: self.value.decode(value)?,
            timestamp: i64::from_be_bytes(*timestamp),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::I64;

    /// J1: a row reads back as it was written; bytes too short for a
    /// timestamp are refused, naming why.
    #[test]
    fn j1_rows_round_trip_and_short_bytes_are_refused() {
        let codec = RowCodec::<i64> {
            value: Arc::new(I64),
        };
        let row = Row {
            value: -7,
            timestamp: 1_700_000_000_123,
        };
        let bytes = codec.encode(&row).unwrap();
        assert_eq!(&bytes[8..], &(-7i64).to_be_bytes());
        assert_eq!(codec.decode(&bytes).unwrap(), row);
        let error = codec.decode(&[0; 5]).unwrap_err();
        assert!(error.message.contains("8-byte timestamp"), "{error}");
    }
}
