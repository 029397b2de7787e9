//! A versioned join's slots on the changelog (S5): the tick slot holds the
//! task's clock, each key's slot its history.

use bytes::{BufMut, Bytes, BytesMut};

use crate::codec::{Codec, CodecError, Direction};

use super::history::{Clock, History, Version};

/// What a slot of a versioned join holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum VersionedSlot {
    /// The tick slot: the table's observed stream time.
    Clock(Clock),
    /// A key's slot: its versions, oldest first.
    History(History),
}

const TAG_CLOCK: u8 = 0;
const TAG_HISTORY: u8 = 1;
const TOMBSTONE: u8 = 0;
const VALUE: u8 = 1;

/// The slots' bytes: a tag byte; a clock is its observed stream time (8
/// bytes, big-endian), absent before the first put; a history is, per
/// version, its timestamp (8 bytes), a byte 0 for a tombstone or 1 for a
/// value, and a value's length (4 bytes) and bytes (the table record's
/// own).
pub(crate) struct VersionedSlotCodec;

fn refused(direction: Direction, message: String) -> CodecError {
    CodecError {
        codec: "versioned-slot",
        direction,
        type_name: "versioned table slot",
        message,
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], CodecError> {
        if self.bytes.len() < n {
            return Err(refused(
                Direction::Decode,
                format!("{what} needs {n} bytes, {} left", self.bytes.len()),
            ));
        }
        let (taken, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(taken)
    }

    fn i64(&mut self, what: &str) -> Result<i64, CodecError> {
        let bytes = self.take(8, what)?;
        Ok(i64::from_be_bytes(bytes.try_into().expect("8 bytes")))
    }
}

impl Codec<VersionedSlot> for VersionedSlotCodec {
    fn encode(&self, value: &VersionedSlot) -> Result<Bytes, CodecError> {
        let mut out = BytesMut::new();
        self.encode_to(value, &mut out)?;
        Ok(out.freeze())
    }

    fn encode_to(&self, value: &VersionedSlot, out: &mut BytesMut) -> Result<(), CodecError> {
        match value {
            VersionedSlot::Clock(clock) => {
                out.put_u8(TAG_CLOCK);
                if let Some(observed) = clock.observed {
                    out.put_i64(observed);
                }
            }
            VersionedSlot::History(history) => {
                out.put_u8(TAG_HISTORY);
                for version in history {
                    out.put_i64(version.timestamp);
                    match &version.value {
                        None => out.put_u8(TOMBSTONE),
                        Some(bytes) => {
                            let length = u32::try_from(bytes.len()).map_err(|_| {
                                refused(
                                    Direction::Encode,
                                    format!("a version of {} bytes", bytes.len()),
                                )
                            })?;
                            out.put_u8(VALUE);
                            out.put_u32(length);
                            out.extend_from_slice(bytes);
                        }
                    }
                }
            }
        }
        Ok(())
    }

    fn decode(&self, bytes: &[u8]) -> Result<VersionedSlot, CodecError> {
        let Some((&tag, rest)) = bytes.split_first() else {
            return Err(refused(Direction::Decode, "an empty slot".into()));
        };
        let mut reader = Reader { bytes: rest };
        match tag {
            TAG_CLOCK => {
                let observed = match reader.bytes.is_empty() {
                    true => None,
                    false => Some(reader.i64("the observed stream time")?),
                };
                if !reader.bytes.is_empty() {
                    return Err(refused(
                        Direction::Decode,
                        format!("{} bytes after the clock", reader.bytes.len()),
                    ));
                }
                Ok(VersionedSlot::Clock(Clock { observed }))
            }
            TAG_HISTORY => {
                let mut history: History = Vec::new();
                while !reader.bytes.is_empty() {
                    let timestamp = reader.i64("a version's timestamp")?;
                    let value = match reader.take(1, "a version's kind")?[0] {
                        TOMBSTONE => None,
                        VALUE => {
                            let length = reader.take(4, "a version's length")?;
                            let length =
                                u32::from_be_bytes(length.try_into().expect("4 bytes")) as usize;
                            Some(Bytes::copy_from_slice(
                                reader.take(length, "a version's value")?,
                            ))
                        }
                        other => {
                            return Err(refused(
                                Direction::Decode,
                                format!("version kind {other} (expected 0 = tombstone, 1 = value)"),
                            ))
                        }
                    };
                    if history
                        .last()
                        .is_some_and(|last| last.timestamp >= timestamp)
                    {
                        return Err(refused(
                            Direction::Decode,
                            "versions are not in timestamp order".into(),
                        ));
                    }
                    history.push(Version { timestamp, value });
                }
                if history.is_empty() {
                    return Err(refused(
                        Direction::Decode,
                        "a history without versions".into(),
                    ));
                }
                Ok(VersionedSlot::History(history))
            }
            other => Err(refused(
                Direction::Decode,
                format!("tag byte {other} (expected 0 = clock, 1 = history)"),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// S5, J16: slots read back as they were written; bytes that are not a
    /// slot are refused, naming what was wrong.
    #[test]
    fn j16_slots_round_trip_and_bad_bytes_are_refused() {
        let codec = VersionedSlotCodec;
        for slot in [
            VersionedSlot::Clock(Clock::default()),
            VersionedSlot::Clock(Clock { observed: Some(42) }),
            VersionedSlot::History(vec![
                Version {
                    timestamp: 5,
                    value: Some(Bytes::from_static(b"seven")),
                },
                Version {
                    timestamp: 9,
                    value: None,
                },
                Version {
                    timestamp: 12,
                    value: Some(Bytes::new()),
                },
            ]),
        ] {
            let bytes = codec.encode(&slot).unwrap();
            assert_eq!(codec.decode(&bytes).unwrap(), slot);
        }
        let unordered = codec
            .encode(&VersionedSlot::History(vec![
                Version {
                    timestamp: 9,
                    value: None,
                },
                Version {
                    timestamp: 5,
                    value: None,
                },
            ]))
            .unwrap();
        let error = codec.decode(&unordered).unwrap_err();
        assert!(error.message.contains("timestamp order"), "{error}");
        assert!(codec.decode(&[]).is_err());
        assert!(codec
            .decode(&[1])
            .unwrap_err()
            .message
            .contains("without versions"));
        assert!(codec
            .decode(&[7])
            .unwrap_err()
            .message
            .contains("tag byte 7"));
        let short = [1, 0, 0, 0, 0, 0, 0, 0, 5, 1, 0, 0, 0, 9, b'x'];
        assert!(codec.decode(&short).unwrap_err().message.contains("value"));
    }
}
