//! The foreign-key join's own records and states, in a small binary
//! format (J12–J14). Every integer is big-endian; a byte string is its
//! length (4 bytes) then its bytes. Bytes that do not fit are refused with a
//! [`CodecError`], never a panic: on the derived topics that makes them
//! [bad input](../../docs/RULES.md#bad-input) (J15).
//!
//! | record or state | bytes |
//! |---|---|
//! | subscription, subscribe | `1`, version (8), left partition (4), left key (string) |
//! | subscription, unsubscribe | `2`, left key (string) |
//! | response | version (8), left partition (4), then `0` (no right value) or `1` and the right value's bytes to the end |
//! | subscribe stage's slot | the foreign key's bytes |
//! | respond stage's slot | `0`, or `1` and the right value (string); the subscriber count (4); per subscriber, in key order: left key (string), version (8), left partition (4) |
//! | resolve stage's slot | version (8), `0` or `1` (the key has a result written), the left value's bytes to the end |

use std::collections::BTreeMap;

use bytes::{BufMut, Bytes, BytesMut};

use crate::codec::{Codec, CodecError, Direction};

/// A subscription record's value (J12): what the subscribe stage asks of
/// the respond stage for one left key. Its record's key is the foreign
/// key's bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Subscription {
    /// The left key subscribes to the foreign key, as of the left record
    /// at offset `version` of its partition.
    Subscribe {
        /// The left key's bytes.
        key: Bytes,
        /// The left record's offset.
        version: u64,
        /// The left record's partition, which its response must reach
        /// (J11).
        partition: u32,
    },
    /// The left key no longer refers to the foreign key.
    Unsubscribe {
        /// The left key's bytes.
        key: Bytes,
    },
}

/// A response record's value (J13): the right value for the left record at
/// offset `version`. Its record's key is the left key's bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    /// The offset of the left record whose subscription this answers.
    pub version: u64,
    /// That left record's partition: the response topic's partition the
    /// response must land on (J11).
    pub partition: u32,
    /// The right table's value bytes for the foreign key, `None` when it
    /// has none.
    pub right: Option<Bytes>,
}

/// The respond stage's slot for one foreign key (J13).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Foreign {
    /// The right table's value bytes for the key.
    pub right: Option<Bytes>,
    /// The subscribed left keys' bytes, and the version and left
    /// partition each subscribed as.
    pub subscribers: BTreeMap<Bytes, (u64, u32)>,
}

/// The resolve stage's slot for one left key (J14).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Current {
    /// The offset of the latest left record of the key delivered.
    pub version: u64,
    /// Whether the output's latest record for the key is a result (not a
    /// tombstone, not nothing).
    pub joined: bool,
    /// That left record's value bytes.
    pub left: Bytes,
}

const SUBSCRIBE: u8 = 1;
const UNSUBSCRIBE: u8 = 2;

fn refused(codec: &'static str, direction: Direction, message: String) -> CodecError {
    CodecError {
        codec,
        direction,
        type_name: codec,
        message,
    }
}

/// Reads the parts of one encoded value, naming the codec in its refusals.
struct Reader<'a> {
    codec: &'static str,
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn fail(&self, message: String) -> CodecError {
        refused(self.codec, Direction::Decode, message)
    }

    fn take(&mut self, length: usize, what: &str) -> Result<&'a [u8], CodecError> {
        if self.rest.len() < length {
            return Err(self.fail(format!(
                "{what} needs {length} bytes, {} left",
                self.rest.len()
            )));
        }
        let (taken, rest) = self.rest.split_at(length);
        self.rest = rest;
        Ok(taken)
    }

    fn byte(&mut self, what: &str) -> Result<u8, CodecError> {
        Ok(self.take(1, what)?[0])
    }

    fn u64(&mut self, what: &str) -> Result<u64, CodecError> {
        let bytes = self.take(8, what)?;
        Ok(u64::from_be_bytes(bytes.try_into().expect("8 bytes")))
    }

    fn u32(&mut self, what: &str) -> Result<u32, CodecError> {
        let bytes = self.take(4, what)?;
        Ok(u32::from_be_bytes(bytes.try_into().expect("4 bytes")))
    }

    fn string(&mut self, what: &str) -> Result<Bytes, CodecError> {
        let length = self.u32(what)? as usize;
        Ok(Bytes::copy_from_slice(self.take(length, what)?))
    }

    fn flag(&mut self, what: &str) -> Result<bool, CodecError> {
        match self.byte(what)? {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(self.fail(format!("{what} is {other}, expected 0 or 1"))),
        }
    }

    fn rest(self) -> Bytes {
        Bytes::copy_from_slice(self.rest)
    }

    fn end(self) -> Result<(), CodecError> {
        match self.rest.len() {
            0 => Ok(()),
            extra => Err(self.fail(format!("{extra} bytes after the end"))),
        }
    }
}

fn put_string(codec: &'static str, out: &mut BytesMut, bytes: &[u8]) -> Result<(), CodecError> {
    let length = u32::try_from(bytes.len()).map_err(|_| {
        refused(
            codec,
            Direction::Encode,
            format!("a byte string of {} bytes", bytes.len()),
        )
    })?;
    out.put_u32(length);
    out.extend_from_slice(bytes);
    Ok(())
}

/// The subscription topic's value codec.
#[derive(Clone, Copy, Debug, Default)]
pub struct SubscriptionCodec;

const SUBSCRIPTION: &str = "foreign-key subscription";

impl Codec<Subscription> for SubscriptionCodec {
    fn encode(&self, value: &Subscription) -> Result<Bytes, CodecError> {
        let mut out = BytesMut::new();
        self.encode_to(value, &mut out)?;
        Ok(out.freeze())
    }

    fn encode_to(&self, value: &Subscription, out: &mut BytesMut) -> Result<(), CodecError> {
        match value {
            Subscription::Subscribe {
                key,
                version,
                partition,
            } => {
                out.put_u8(SUBSCRIBE);
                out.put_u64(*version);
                out.put_u32(*partition);
                put_string(SUBSCRIPTION, out, key)
            }
            Subscription::Unsubscribe { key } => {
                out.put_u8(UNSUBSCRIBE);
                put_string(SUBSCRIPTION, out, key)
            }
        }
    }

    fn decode(&self, bytes: &[u8]) -> Result<Subscription, CodecError> {
        let mut reader = Reader {
            codec: SUBSCRIPTION,
            rest: bytes,
        };
        let subscription = match reader.byte("the instruction")? {
            SUBSCRIBE => {
                let version = reader.u64("the version")?;
                let partition = reader.u32("the left partition")?;
                let key = reader.string("the left key")?;
                Subscription::Subscribe {
                    key,
                    version,
                    partition,
                }
            }
            UNSUBSCRIBE => Subscription::Unsubscribe {
                key: reader.string("the left key")?,
            },
            other => {
                return Err(reader.fail(format!(
                    "instruction {other} (expected {SUBSCRIBE}: subscribe or {UNSUBSCRIBE}: unsubscribe)"
                )))
            }
        };
        reader.end()?;
        Ok(subscription)
    }
}

/// The response topic's value codec.
#[derive(Clone, Copy, Debug, Default)]
pub struct ResponseCodec;

const RESPONSE: &str = "foreign-key response";

impl Codec<Response> for ResponseCodec {
    fn encode(&self, value: &Response) -> Result<Bytes, CodecError> {
        let mut out = BytesMut::new();
        self.encode_to(value, &mut out)?;
        Ok(out.freeze())
    }

    fn encode_to(&self, value: &Response, out: &mut BytesMut) -> Result<(), CodecError> {
        out.put_u64(value.version);
        out.put_u32(value.partition);
        match &value.right {
            None => out.put_u8(0),
            Some(right) => {
                out.put_u8(1);
                out.extend_from_slice(right);
            }
        }
        Ok(())
    }

    fn decode(&self, bytes: &[u8]) -> Result<Response, CodecError> {
        let mut reader = Reader {
            codec: RESPONSE,
            rest: bytes,
        };
        let version = reader.u64("the version")?;
        let partition = reader.u32("the left partition")?;
        let right = match reader.flag("the right value's flag")? {
            true => Some(reader.rest()),
            false => {
                reader.end()?;
                None
            }
        };
        Ok(Response {
            version,
            partition,
            right,
        })
    }
}

/// A slot that is either kept (`Some`) or deleted: a stage whose logic
/// starts from no state (`None`) and deletes its slot rather than keep
/// `None`, so only `Some` is ever encoded. The subscribe stage keeps the
/// foreign key's bytes as they are (`Kept<RawBytes>`), the resolve stage a
/// [`Current`].
pub(crate) struct Kept<C>(pub C);

impl<T, C: Codec<T>> Codec<Option<T>> for Kept<C> {
    fn encode(&self, value: &Option<T>) -> Result<Bytes, CodecError> {
        match value {
            Some(value) => self.0.encode(value),
            None => Err(refused(
                "foreign-key join slot",
                Direction::Encode,
                "an empty slot is deleted, never written".to_string(),
            )),
        }
    }

    fn decode(&self, bytes: &[u8]) -> Result<Option<T>, CodecError> {
        self.0.decode(bytes).map(Some)
    }
}

/// The respond stage's slots.
pub(crate) struct ForeignCodec;

const FOREIGN: &str = "foreign-key join respond slot";

impl Codec<Foreign> for ForeignCodec {
    fn encode(&self, value: &Foreign) -> Result<Bytes, CodecError> {
        let mut out = BytesMut::new();
        self.encode_to(value, &mut out)?;
        Ok(out.freeze())
    }

    fn encode_to(&self, value: &Foreign, out: &mut BytesMut) -> Result<(), CodecError> {
        match &value.right {
            None => out.put_u8(0),
            Some(right) => {
                out.put_u8(1);
                put_string(FOREIGN, out, right)?;
            }
        }
        let count = u32::try_from(value.subscribers.len()).map_err(|_| {
            refused(
                FOREIGN,
                Direction::Encode,
                format!("{} subscribers", value.subscribers.len()),
            )
        })?;
        out.put_u32(count);
        for (key, (version, partition)) in &value.subscribers {
            put_string(FOREIGN, out, key)?;
            out.put_u64(*version);
            out.put_u32(*partition);
        }
        Ok(())
    }

    fn decode(&self, bytes: &[u8]) -> Result<Foreign, CodecError> {
        let mut reader = Reader {
            codec: FOREIGN,
            rest: bytes,
        };
        let right = match reader.flag("the right value's flag")? {
            true => Some(reader.string("the right value")?),
            false => None,
        };
        let count = reader.u32("the subscriber count")?;
        let mut subscribers = BTreeMap::new();
        for _ in 0..count {
            let key = reader.string("a subscriber's key")?;
            let version = reader.u64("a subscriber's version")?;
            let partition = reader.u32("a subscriber's left partition")?;
            subscribers.insert(key, (version, partition));
        }
        reader.end()?;
        Ok(Foreign { right, subscribers })
    }
}

/// The resolve stage's slots.
pub(crate) struct CurrentCodec;

const CURRENT: &str = "foreign-key join resolve slot";

impl Codec<Current> for CurrentCodec {
    fn encode(&self, value: &Current) -> Result<Bytes, CodecError> {
        let mut out = BytesMut::new();
        self.encode_to(value, &mut out)?;
        Ok(out.freeze())
    }

    fn encode_to(&self, value: &Current, out: &mut BytesMut) -> Result<(), CodecError> {
        out.put_u64(value.version);
        out.put_u8(u8::from(value.joined));
        out.extend_from_slice(&value.left);
        Ok(())
    }

    fn decode(&self, bytes: &[u8]) -> Result<Current, CodecError> {
        let mut reader = Reader {
            codec: CURRENT,
            rest: bytes,
        };
        let version = reader.u64("the version")?;
        let joined = reader.flag("the result flag")?;
        Ok(Current {
            version,
            joined,
            left: reader.rest(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(text: &str) -> Bytes {
        Bytes::copy_from_slice(text.as_bytes())
    }

    /// J12, J13, J14: every record and state reads back as written.
    #[test]
    fn j12_j13_j14_records_and_states_round_trip() {
        for subscription in [
            Subscription::Subscribe {
                key: bytes("order-1"),
                version: 42,
                partition: 3,
            },
            Subscription::Unsubscribe { key: bytes("") },
        ] {
            let encoded = SubscriptionCodec.encode(&subscription).unwrap();
            assert_eq!(SubscriptionCodec.decode(&encoded).unwrap(), subscription);
        }
        for response in [
            Response {
                version: 7,
                partition: 1,
                right: Some(bytes("ada")),
            },
            Response {
                version: 0,
                partition: 0,
                right: Some(bytes("")),
            },
            Response {
                version: u64::MAX,
                partition: u32::MAX,
                right: None,
            },
        ] {
            let encoded = ResponseCodec.encode(&response).unwrap();
            assert_eq!(ResponseCodec.decode(&encoded).unwrap(), response);
        }
        let foreign = Foreign {
            right: Some(bytes("ada")),
            subscribers: BTreeMap::from([(bytes("o1"), (3, 0)), (bytes("o2"), (9, 2))]),
        };
        let encoded = ForeignCodec.encode(&foreign).unwrap();
        assert_eq!(ForeignCodec.decode(&encoded).unwrap(), foreign);
        let current = Current {
            version: 12,
            joined: true,
            left: bytes("{\"customer\":\"ada\"}"),
        };
        let encoded = CurrentCodec.encode(&current).unwrap();
        assert_eq!(CurrentCodec.decode(&encoded).unwrap(), current);
    }

    /// J15: bad bytes are refused with an error naming what was wrong,
    /// never a panic.
    #[test]
    fn j15_bad_bytes_are_refused_by_name() {
        let message = |error: CodecError| error.to_string();
        assert!(message(SubscriptionCodec.decode(&[]).unwrap_err()).contains("instruction"));
        assert!(message(SubscriptionCodec.decode(&[9]).unwrap_err()).contains("instruction 9"));
        assert!(message(SubscriptionCodec.decode(&[1, 0, 0]).unwrap_err()).contains("version"));
        assert!(message(
            SubscriptionCodec
                .decode(&[2, 0, 0, 0, 5, b'a'])
                .unwrap_err()
        )
        .contains("the left key needs 5 bytes, 1 left"));
        assert!(
            message(SubscriptionCodec.decode(&[2, 0, 0, 0, 0, 0]).unwrap_err())
                .contains("1 bytes after the end")
        );
        assert!(message(ResponseCodec.decode(&[0; 8]).unwrap_err()).contains("left partition"));
        assert!(message(ResponseCodec.decode(&[0; 12]).unwrap_err()).contains("flag"));
        assert!(message(
            ResponseCodec
                .decode(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2])
                .unwrap_err()
        )
        .contains("is 2, expected 0 or 1"));
        assert!(
            message(ForeignCodec.decode(&[1, 255, 255, 255, 255]).unwrap_err())
                .contains("the right value needs")
        );
        assert!(message(CurrentCodec.decode(&[0; 3]).unwrap_err()).contains("version"));
    }
}
