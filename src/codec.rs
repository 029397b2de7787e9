//! Codecs turn typed keys, values and states into bytes and back.
//!
//! [`Json`] is the default (serde), [`Utf8`] writes strings as plain text,
//! [`I64`] writes integers as Kafka's `LongSerializer` does and [`RawBytes`]
//! passes bytes through. A decode failure is a typed
//! [`CodecError`]; the task that met it stops and names the topic, tp and
//! offset (docs/RULES.md#bad-input).

use std::any::TypeId;
use std::fmt;

use bytes::{BufMut, Bytes, BytesMut};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Encodes and decodes one type.
pub trait Codec<T>: Send + Sync + 'static {
    /// Encodes `value` to bytes, or refuses it.
    fn encode(&self, value: &T) -> Result<Bytes, CodecError>;
    /// Decodes bytes, or refuses them; never panics on bad input.
    fn decode(&self, bytes: &[u8]) -> Result<T, CodecError>;
    /// Encodes `value` by appending its bytes to `out`, or refuses it (what
    /// it appended before refusing is discarded). Topics encode through
    /// this method, into shared chunks, so that a record's bytes need no
    /// allocation of their own. The built-in codecs write in place; the
    /// default copies what [`Codec::encode`] returns, so a codec need not
    /// implement it.
    fn encode_to(&self, value: &T, out: &mut BytesMut) -> Result<(), CodecError> {
        out.extend_from_slice(&self.encode(value)?);
        Ok(())
    }
}

/// The free bytes a key, value or state is encoded into before its chunk
/// grows: most are smaller.
pub(crate) const ENCODED_HINT: usize = 64;

/// Encodes `value` with `codec` into the thread's shared chunk
/// ([`Codec::encode_to`]): how Parsley encodes every key, value and state.
pub(crate) fn encode_chunked<T, C: Codec<T> + ?Sized>(
    codec: &C,
    value: &T,
) -> Result<Bytes, CodecError> {
    crate::chunks::write(ENCODED_HINT, |out| codec.encode_to(value, out))
}

/// Why a codec refused a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{codec} codec could not {direction} {type_name}: {message}")]
pub struct CodecError {
    /// The codec, e.g. "json".
    pub codec: &'static str,
    /// Whether it was encoding or decoding.
    pub direction: Direction,
    /// The Rust type involved.
    pub type_name: &'static str,
    /// The codec's own explanation.
    pub message: String,
}

/// Which way a codec was working.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Turning a value into bytes.
    Encode,
    /// Turning bytes into a value.
    Decode,
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Direction::Encode => "encode",
            Direction::Decode => "decode",
        })
    }
}

/// JSON through serde: readable on the wire, the default for typed topics.
#[derive(Debug, Clone, Copy, Default)]
pub struct Json;

impl<T: Serialize + DeserializeOwned + 'static> Codec<T> for Json {
    fn encode(&self, value: &T) -> Result<Bytes, CodecError> {
        serde_json::to_vec(value)
            .map(Bytes::from)
            .map_err(json_encode_error::<T>)
    }

    fn encode_to(&self, value: &T, out: &mut BytesMut) -> Result<(), CodecError> {
        serde_json::to_writer(out.writer(), value).map_err(json_encode_error::<T>)
    }

    fn decode(&self, bytes: &[u8]) -> Result<T, CodecError> {
        serde_json::from_slice(bytes).map_err(|error| CodecError {
            codec: "json",
            direction: Direction::Decode,
            type_name: std::any::type_name::<T>(),
            message: error.to_string(),
        })
    }
}

fn json_encode_error<T>(error: serde_json::Error) -> CodecError {
    CodecError {
        codec: "json",
        direction: Direction::Encode,
        type_name: std::any::type_name::<T>(),
        message: error.to_string(),
    }
}

/// Strings as plain UTF-8 text, like Kafka's `StringSerializer`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Utf8;

impl Codec<String> for Utf8 {
    fn encode(&self, value: &String) -> Result<Bytes, CodecError> {
        Ok(Bytes::copy_from_slice(value.as_bytes()))
    }

    fn encode_to(&self, value: &String, out: &mut BytesMut) -> Result<(), CodecError> {
        out.extend_from_slice(value.as_bytes());
        Ok(())
    }

    fn decode(&self, bytes: &[u8]) -> Result<String, CodecError> {
        String::from_utf8(bytes.to_vec()).map_err(|error| CodecError {
            codec: "utf8",
            direction: Direction::Decode,
            type_name: "String",
            message: error.to_string(),
        })
    }
}

/// A signed 64-bit integer as 8 bytes, big-endian: the format of Kafka's
/// `LongSerializer` and `LongDeserializer` (Kafka Streams' `Serdes.Long()`),
/// so counters and balances interoperate with JVM applications, at a
/// fraction of JSON's cost.
#[derive(Debug, Clone, Copy, Default)]
pub struct I64;

impl Codec<i64> for I64 {
    fn encode(&self, value: &i64) -> Result<Bytes, CodecError> {
        Ok(Bytes::copy_from_slice(&value.to_be_bytes()))
    }

    fn encode_to(&self, value: &i64, out: &mut BytesMut) -> Result<(), CodecError> {
        out.put_i64(*value);
        Ok(())
    }

    fn decode(&self, bytes: &[u8]) -> Result<i64, CodecError> {
        let bytes: [u8; 8] = bytes.try_into().map_err(|_| CodecError {
            codec: "i64",
            direction: Direction::Decode,
            type_name: "i64",
            message: format!("expected 8 bytes, got {}", bytes.len()),
        })?;
        Ok(i64::from_be_bytes(bytes))
    }
}

/// Bytes passed through untouched.
#[derive(Debug, Clone, Copy, Default)]
pub struct RawBytes;

impl Codec<Bytes> for RawBytes {
    fn encode(&self, value: &Bytes) -> Result<Bytes, CodecError> {
        Ok(value.clone())
    }

    fn encode_to(&self, value: &Bytes, out: &mut BytesMut) -> Result<(), CodecError> {
        out.extend_from_slice(value);
        Ok(())
    }

    fn decode(&self, bytes: &[u8]) -> Result<Bytes, CodecError> {
        Ok(Bytes::copy_from_slice(bytes))
    }
}

impl Codec<Vec<u8>> for RawBytes {
    fn encode(&self, value: &Vec<u8>) -> Result<Bytes, CodecError> {
        Ok(Bytes::copy_from_slice(value))
    }

    fn encode_to(&self, value: &Vec<u8>, out: &mut BytesMut) -> Result<(), CodecError> {
        out.extend_from_slice(value);
        Ok(())
    }

    fn decode(&self, bytes: &[u8]) -> Result<Vec<u8>, CodecError> {
        Ok(bytes.to_vec())
    }
}

/// What a topic's codecs are, so that two declarations of one topic can be
/// compared (C1: one key codec and one value codec per topic).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodecIdentity {
    key: TypeId,
    value: TypeId,
    key_codec: TypeId,
    value_codec: TypeId,
    pub(crate) description: (&'static str, &'static str),
}

impl CodecIdentity {
    /// This identity with its key type and key codec replaced.
    pub(crate) fn with_key<K: 'static, KC: 'static>(self) -> Self {
        CodecIdentity {
            key: TypeId::of::<K>(),
            key_codec: TypeId::of::<KC>(),
            description: (std::any::type_name::<(K, KC)>(), self.description.1),
            ..self
        }
    }

    /// The key codec's type.
    pub(crate) fn key_codec(&self) -> TypeId {
        self.key_codec
    }

    /// Whether two declarations encode their keys alike (type and codec).
    pub(crate) fn same_key_codec(&self, other: &CodecIdentity) -> bool {
        (self.key, self.key_codec) == (other.key, other.key_codec)
    }

    /// Whether `other` encodes values of the same type with the same codec.
    pub(crate) fn same_value_codec(&self, other: &CodecIdentity) -> bool {
        (self.value, self.value_codec) == (other.value, other.value_codec)
    }

    pub(crate) fn of<K: 'static, V: 'static, KC: 'static, VC: 'static>() -> Self {
        CodecIdentity {
            key: TypeId::of::<K>(),
            value: TypeId::of::<V>(),
            key_codec: TypeId::of::<KC>(),
            value_codec: TypeId::of::<VC>(),
            description: (
                std::any::type_name::<(K, KC)>(),
                std::any::type_name::<(V, VC)>(),
            ),
        }
    }
}

impl fmt::Display for CodecIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "key {} / value {}",
            self.description.0, self.description.1
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trips_and_names_its_errors() {
        let bytes = Codec::<i64>::encode(&Json, &-42).unwrap();
        assert_eq!(Codec::<i64>::decode(&Json, &bytes).unwrap(), -42);
        let error = Codec::<i64>::decode(&Json, b"\"not a number\"").unwrap_err();
        assert_eq!(error.codec, "json");
        assert_eq!(error.direction, Direction::Decode);
        assert!(
            error
                .to_string()
                .starts_with("json codec could not decode i64: "),
            "{error}"
        );
    }

    /// Kafka's `LongSerializer` writes -2 as ff ff ff ff ff ff ff fe.
    #[test]
    fn i64_is_kafkas_long_format_and_names_a_wrong_length() {
        let bytes = Codec::<i64>::encode(&I64, &-2).unwrap();
        assert_eq!(
            &bytes[..],
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe]
        );
        for value in [i64::MIN, -1, 0, 1, 1 << 40, i64::MAX] {
            let bytes = Codec::<i64>::encode(&I64, &value).unwrap();
            assert_eq!(Codec::<i64>::decode(&I64, &bytes).unwrap(), value);
        }
        let error = Codec::<i64>::decode(&I64, b"42").unwrap_err();
        assert_eq!(error.codec, "i64");
        assert_eq!(error.direction, Direction::Decode);
        assert_eq!(
            error.to_string(),
            "i64 codec could not decode i64: expected 8 bytes, got 2"
        );
    }

    #[test]
    fn utf8_rejects_invalid_text() {
        let error = Codec::<String>::decode(&Utf8, &[0xff, 0xfe]).unwrap_err();
        assert_eq!(error.codec, "utf8");
    }
}
