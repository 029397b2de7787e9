//! A versioned join's slots on the changelog (S5): the tick slot holds the
//! task's clock (and, with a grace period, the held stream records, J19),
//! each key's slot its history.

use bytes::{BufMut, Bytes, BytesMut};

use crate::codec::{Codec, CodecError, Direction};

use super::grace::{Buffer, Held};
use super::history::{Clock, History, Version};
use crate::record::Header;

/// What a slot of a versioned join holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum VersionedSlot {
    /// The tick slot: the table's observed stream time.
    Clock(Clock),
    /// A key's slot: its versions, oldest first.
    History(History),
    /// The tick slot of a join with a grace period (J19): the clock and
    /// the grace buffer.
    Graced(Clock, Buffer),
}

const TAG_CLOCK: u8 = 0;
const TAG_HISTORY: u8 = 1;
const TAG_GRACED: u8 = 2;
const TOMBSTONE: u8 = 0;
const VALUE: u8 = 1;

/// The slots' bytes: a tag byte; a clock is its observed stream time (8
/// bytes, big-endian), absent before the first put; a history is, per
/// version, its timestamp (8 bytes), a byte 0 for a tombstone or 1 for a
/// value, and a value's length (4 bytes) and bytes (the table record's
/// own). A graced tick is its clock and stream time (each a byte 0 for
/// none or 1 and 8 bytes), then its held records' count (4 bytes) and per
/// record its offset, timestamp, key, value (a byte 0 for none or 1 and
/// the bytes) and headers (count, then name and value each), every length
/// 4 bytes.
pub(crate) struct VersionedSlotCodec;

fn length(bytes: usize, what: &str) -> Result<u32, CodecError> {
    u32::try_from(bytes).map_err(|_| refused(Direction::Encode, format!("{what} of {bytes} bytes")))
}

fn put_bytes(out: &mut BytesMut, bytes: &[u8], what: &str) -> Result<(), CodecError> {
    out.put_u32(length(bytes.len(), what)?);
    out.extend_from_slice(bytes);
    Ok(())
}

fn put_time(out: &mut BytesMut, time: Option<i64>) {
    match time {
        None => out.put_u8(0),
        Some(time) => {
            out.put_u8(1);
            out.put_i64(time);
        }
    }
}

fn encode_graced(clock: &Clock, buffer: &Buffer, out: &mut BytesMut) -> Result<(), CodecError> {
    out.put_u8(TAG_GRACED);
    put_time(out, clock.observed);
    put_time(out, buffer.stream_time);
    out.put_u32(length(buffer.held.len(), "a grace buffer")?);
    for held in &buffer.held {
        out.put_u64(held.offset);
        out.put_i64(held.timestamp);
        put_bytes(out, &held.key, "a held key")?;
        match &held.value {
            None => out.put_u8(0),
            Some(value) => {
                out.put_u8(1);
                put_bytes(out, value, "a held value")?;
            }
        }
        out.put_u32(length(held.headers.len(), "a held record's headers")?);
        for header in &held.headers {
            put_bytes(out, header.name.as_bytes(), "a header name")?;
            put_bytes(out, &header.value, "a header value")?;
        }
    }
    Ok(())
}

fn decode_graced(reader: &mut Reader<'_>) -> Result<VersionedSlot, CodecError> {
    let observed = reader.time("the observed stream time")?;
    let stream_time = reader.time("the grace buffer's stream time")?;
    let count = reader.u32("the held records' count")?;
    let mut held = Vec::new();
    for _ in 0..count {
        let offset = u64::from_be_bytes(
            reader
                .take(8, "a held offset")?
                .try_into()
                .expect("8 bytes"),
        );
        let timestamp = reader.i64("a held timestamp")?;
        let key = reader.bytes("a held key")?;
        let value = match reader.take(1, "a held value's kind")?[0] {
            0 => None,
            1 => Some(reader.bytes("a held value")?),
            other => {
                return Err(refused(
                    Direction::Decode,
                    format!("held value kind {other} (expected 0 = none, 1 = bytes)"),
                ))
            }
        };
        let headers = (0..reader.u32("a held record's header count")?)
            .map(|_| {
                let name = reader.bytes("a header name")?;
                let name = String::from_utf8(name.to_vec()).map_err(|_| {
                    refused(Direction::Decode, "a header name that is not UTF-8".into())
                })?;
                Ok(Header {
                    name: name.into(),
                    value: reader.bytes("a header value")?,
                })
            })
            .collect::<Result<Vec<_>, CodecError>>()?;
        held.push(Held {
            offset,
            timestamp,
            key,
            value,
            headers,
        });
    }
    if !reader.bytes.is_empty() {
        return Err(refused(
            Direction::Decode,
            format!("{} bytes after the grace buffer", reader.bytes.len()),
        ));
    }
    Ok(VersionedSlot::Graced(
        Clock { observed },
        Buffer { stream_time, held },
    ))
}

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

    fn u32(&mut self, what: &str) -> Result<u32, CodecError> {
        let bytes = self.take(4, what)?;
        Ok(u32::from_be_bytes(bytes.try_into().expect("4 bytes")))
    }

    fn bytes(&mut self, what: &str) -> Result<Bytes, CodecError> {
        let length = self.u32(what)? as usize;
        Ok(Bytes::copy_from_slice(self.take(length, what)?))
    }

    fn time(&mut self, what: &str) -> Result<Option<i64>, CodecError> {
        match self.take(1, what)?[0] {
            0 => Ok(None),
            1 => Ok(Some(self.i64(what)?)),
            other => Err(refused(
                Direction::Decode,
                format!("{what}: kind {other} (expected 0 = none, 1 = set)"),
            )),
        }
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
            VersionedSlot::Graced(clock, buffer) => encode_graced(clock, buffer, out)?,
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
            TAG_GRACED => decode_graced(&mut reader),
            other => Err(refused(
                Direction::Decode,
                format!("tag byte {other} (expected 0 = clock, 1 = history, 2 = graced clock)"),
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
    fn j16_j19_slots_round_trip_and_bad_bytes_are_refused() {
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
            VersionedSlot::Graced(Clock::default(), Buffer::default()),
            VersionedSlot::Graced(
                Clock { observed: Some(7) },
                Buffer {
                    stream_time: Some(40),
                    held: vec![
                        Held {
                            offset: 3,
                            timestamp: 31,
                            key: Bytes::from_static(b"k"),
                            value: None,
                            headers: Vec::new(),
                        },
                        Held {
                            offset: 9,
                            timestamp: 35,
                            key: Bytes::from_static(b"j"),
                            value: Some(Bytes::from_static(b"v")),
                            headers: vec![Header {
                                name: "h".into(),
                                value: Bytes::from_static(b"x"),
                            }],
                        },
                    ],
                },
            ),
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
        let graced = codec
            .encode(&VersionedSlot::Graced(
                Clock::default(),
                Buffer {
                    stream_time: Some(1),
                    held: vec![Held {
                        offset: 0,
                        timestamp: 1,
                        key: Bytes::from_static(b"k"),
                        value: None,
                        headers: Vec::new(),
                    }],
                },
            ))
            .unwrap();
        assert!(codec
            .decode(&graced[..graced.len() - 1])
            .unwrap_err()
            .message
            .contains("header count"));
        let short = [1, 0, 0, 0, 0, 0, 0, 0, 5, 1, 0, 0, 0, 9, b'x'];
        assert!(codec.decode(&short).unwrap_err().message.contains("value"));
    }
}
