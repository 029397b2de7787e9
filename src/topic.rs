//! Typed topics: a name plus a key codec and a value codec.

use std::fmt;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Serialize;

use bytes::Bytes;

use crate::codec::{Codec, CodecError, CodecIdentity, Direction, Json, ENCODED_HINT};
use crate::emission::{Emission, Record};
use crate::record::{ConsumedRecord, RecordData};
use crate::tp::{TopicName, Tp};

/// Which part of a record a codec refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordPart {
    /// The key.
    Key,
    /// The value.
    Value,
}

impl RecordPart {
    /// "key" or "value".
    pub fn name(self) -> &'static str {
        match self {
            RecordPart::Key => "key",
            RecordPart::Value => "value",
        }
    }
}

impl fmt::Display for RecordPart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A codec refused a record's key or value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the {part} was rejected: {error}")]
pub struct RecordCodecError {
    /// Which part was refused.
    pub part: RecordPart,
    /// The codec's refusal.
    pub error: CodecError,
}

/// A Kafka topic with typed keys and values. Cheap to clone; clones share
/// their codecs.
pub struct Topic<K, V> {
    name: TopicName,
    key_codec: Arc<dyn Codec<K>>,
    value_codec: Arc<dyn Codec<V>>,
    identity: CodecIdentity,
}

impl<K, V> Clone for Topic<K, V> {
    fn clone(&self) -> Self {
        Topic {
            name: self.name.clone(),
            key_codec: Arc::clone(&self.key_codec),
            value_codec: Arc::clone(&self.value_codec),
            identity: self.identity,
        }
    }
}

impl<K, V> fmt::Debug for Topic<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Topic")
            .field("name", &self.name)
            .field("codecs", &self.identity.description)
            .finish()
    }
}

impl<K, V> Topic<K, V>
where
    K: Serialize + DeserializeOwned + 'static,
    V: Serialize + DeserializeOwned + 'static,
{
    /// A topic whose keys and values are JSON (the default codec).
    pub fn new(name: impl Into<TopicName>) -> Self {
        Topic::with_codecs(name, Json, Json)
    }
}

impl<K: 'static, V: 'static> Topic<K, V> {
    /// A topic with explicit codecs, such as [`crate::codec::Utf8`] or
    /// [`crate::codec::RawBytes`].
    pub fn with_codecs<KC: Codec<K>, VC: Codec<V>>(
        name: impl Into<TopicName>,
        key_codec: KC,
        value_codec: VC,
    ) -> Self {
        Topic {
            name: name.into(),
            key_codec: Arc::new(key_codec),
            value_codec: Arc::new(value_codec),
            identity: CodecIdentity::of::<K, V, KC, VC>(),
        }
    }
}

impl<K: 'static, V: 'static> Topic<K, V> {
    /// The topic name.
    pub fn name(&self) -> &TopicName {
        &self.name
    }

    /// The tp of one partition of this topic.
    pub fn tp(&self, partition: u32) -> Tp {
        Tp::new(self.name.clone(), partition)
    }

    /// The key codec.
    pub fn key_codec(&self) -> &dyn Codec<K> {
        &*self.key_codec
    }

    /// The value codec.
    pub fn value_codec(&self) -> &dyn Codec<V> {
        &*self.value_codec
    }

    /// The value codec, shared.
    pub(crate) fn value_codec_arc(&self) -> Arc<dyn Codec<V>> {
        Arc::clone(&self.value_codec)
    }

    /// The repartition topic of the re-key named `name` (R1, R3): this
    /// topic's values (their codec shared) under keys of another type, in
    /// `key_codec`, in the topic Parsley derives,
    /// `<application.id>-<name>-repartition`, named when the application
    /// whose stage re-keys into it is built
    /// ([`StageBuilder::rekey_output`](crate::StageBuilder::rekey_output)).
    /// Kafka Streams' `repartition(Repartitioned.as(name).withKeySerde(…))`.
    ///
    /// ```
    /// use parsley::{Topic, Utf8, I64};
    ///
    /// let totals = Topic::<String, i64>::with_codecs("customer-totals", Utf8, I64);
    /// let by_bucket = totals.repartition::<String, _>("by-bucket", Utf8);
    /// assert_eq!(by_bucket.name().as_str(), "<application.id>-by-bucket-repartition");
    /// ```
    pub fn repartition<K2: 'static, KC: Codec<K2>>(
        &self,
        name: &str,
        key_codec: KC,
    ) -> Topic<K2, V> {
        self.rekeyed(TopicName::derived(name, "repartition"), key_codec)
    }

    /// A topic named `name` with this topic's values (their codec shared)
    /// under keys of another type, in `key_codec`.
    pub(crate) fn rekeyed<K2: 'static, KC: Codec<K2>>(
        &self,
        name: impl Into<TopicName>,
        key_codec: KC,
    ) -> Topic<K2, V> {
        Topic {
            name: name.into(),
            key_codec: Arc::new(key_codec),
            value_codec: Arc::clone(&self.value_codec),
            identity: self.identity.with_key::<K2, KC>(),
        }
    }

    /// A record's key (`None`: null) and value decoded from their bytes.
    pub(crate) fn decode_parts(
        &self,
        key: Option<&[u8]>,
        value: &[u8],
    ) -> Result<(Option<K>, V), RecordCodecError> {
        let key = self.decode_key(key)?;
        let value = self
            .value_codec
            .decode(value)
            .map_err(|error| RecordCodecError {
                part: RecordPart::Value,
                error,
            })?;
        Ok((key, value))
    }

    /// A record's key decoded from its bytes (`None`: a null key).
    fn decode_key(&self, key: Option<&[u8]>) -> Result<Option<K>, RecordCodecError> {
        key.map(|key| self.key_codec.decode(key))
            .transpose()
            .map_err(|error| RecordCodecError {
                part: RecordPart::Key,
                error,
            })
    }

    /// A key encoded with this topic's key codec.
    pub(crate) fn encode_key(&self, key: &K) -> Result<Bytes, CodecError> {
        self.key_codec.encode(key)
    }

    /// Whether `other` encodes its values with the same codec as this topic.
    pub(crate) fn same_value_codec<K2>(&self, other: &Topic<K2, V>) -> bool {
        self.identity.same_value_codec(&other.identity)
    }

    /// Whether `other` encodes its keys with the same codec as this topic.
    pub(crate) fn same_key_codec<V2>(&self, other: &Topic<K, V2>) -> bool {
        self.identity.same_key_codec(&other.identity)
    }

    /// The untyped declaration of this topic, as stages record their sources
    /// and sinks.
    pub fn declaration(&self) -> TopicRef {
        TopicRef {
            name: self.name.clone(),
            identity: Some(self.identity),
        }
    }

    /// An emission of `value` under `key` to this topic: a plain value that
    /// logic returns and tests compare with `==`. Encoding happens here; a
    /// codec failure travels inside the emission and stops the task that
    /// returns it, with the stage and topic named.
    pub fn send(&self, key: impl Into<Option<K>>, value: impl Into<V>) -> Emission {
        let encoded = self
            .encode(key.into().as_ref(), &value.into())
            .map_err(|refused| refused.error);
        Emission::new(self.name.clone(), encoded)
    }

    /// A tombstone for `key` on this topic: a record with a null value,
    /// which a reader of the topic as a table takes as the key's deletion
    /// (Kafka's `send(key, null)`). A key codec's refusal travels inside
    /// the emission, as [`Topic::send`]'s does.
    pub fn tombstone(&self, key: impl Into<Option<K>>) -> Emission {
        let key = key
            .into()
            .map(|key| self.key_codec.encode(&key))
            .transpose();
        Emission::tombstone(self.name.clone(), key)
    }

    /// Encodes a key and value with this topic's codecs.
    pub fn encode(
        &self,
        key: Option<&K>,
        value: &V,
    ) -> Result<(Option<Bytes>, Bytes), RecordCodecError> {
        // Key and value are written back to back in one cut, then split.
        let mut key_len = None;
        let mut written = crate::chunks::write(2 * ENCODED_HINT, |out| {
            if let Some(key) = key {
                self.key_codec
                    .encode_to(key, out)
                    .map_err(|error| RecordCodecError {
                        part: RecordPart::Key,
                        error,
                    })?;
                key_len = Some(out.len());
            }
            self.value_codec
                .encode_to(value, out)
                .map_err(|error| RecordCodecError {
                    part: RecordPart::Value,
                    error,
                })
        })?;
        let key = key_len.map(|len| written.split_to(len));
        Ok((key, written))
    }

    /// Decodes a record read from `tp` with this topic's codecs. A null value
    /// (a tombstone) is refused: a typed record has a value.
    pub fn decode(
        &self,
        tp: &Tp,
        consumed: &ConsumedRecord,
    ) -> Result<Record<K, V>, RecordCodecError> {
        self.decode_at(tp, consumed.offset, &consumed.data)
    }

    /// [`Topic::decode`] of a record's data at `offset` of `tp`, borrowed
    /// where it lies (a driver's log, say).
    pub fn decode_at(
        &self,
        tp: &Tp,
        offset: u64,
        data: &RecordData,
    ) -> Result<Record<K, V>, RecordCodecError> {
        let Some(value) = &data.value else {
            // The key is judged first, as for any record.
            self.decode_key(data.key.as_deref())?;
            return Err(RecordCodecError {
                part: RecordPart::Value,
                error: CodecError {
                    codec: "parsley",
                    direction: Direction::Decode,
                    type_name: std::any::type_name::<V>(),
                    message: "the value is null (a tombstone); typed records carry values"
                        .to_string(),
                },
            });
        };
        let (key, value) = self.decode_parts(data.key.as_deref(), value)?;
        Ok(Record {
            key,
            value,
            timestamp: data.timestamp,
            topic: tp.topic.clone(),
            partition: tp.partition,
            offset,
        })
    }
}

/// An untyped topic declaration: its name and, for typed topics, the identity
/// of its codecs (tick topics and changelogs are Parsley's own and carry none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicRef {
    /// The topic name.
    pub name: TopicName,
    pub(crate) identity: Option<CodecIdentity>,
}

impl TopicRef {
    /// The codecs of the declaration, as `key <type, codec> / value <type,
    /// codec>`; `None` for Parsley's own topics, which have none.
    pub fn codecs(&self) -> Option<String> {
        self.identity.map(|identity| identity.to_string())
    }

    /// Whether the declaration encodes its keys with codec `C` (`false` for
    /// Parsley's own topics, which declare none): how a driver reads a key
    /// written as text (an interactive query's) into the key's bytes.
    pub fn key_codec_is<C: 'static>(&self) -> bool {
        self.identity
            .is_some_and(|identity| identity.key_codec() == std::any::TypeId::of::<C>())
    }

    /// Whether `other` declares the same key and value types and codecs.
    pub fn same_codecs(&self, other: &TopicRef) -> bool {
        self.identity == other.identity
    }
}

impl<K: 'static, V: 'static> From<&Topic<K, V>> for TopicRef {
    fn from(topic: &Topic<K, V>) -> Self {
        topic.declaration()
    }
}

/// Anything `Stage::into` accepts: one topic, a tuple of topics, or a list of
/// declarations.
pub trait Sinks {
    /// The declarations of the topics, in order.
    fn declarations(self) -> Vec<TopicRef>;
}

impl<K: 'static, V: 'static> Sinks for &Topic<K, V> {
    fn declarations(self) -> Vec<TopicRef> {
        vec![self.declaration()]
    }
}

impl Sinks for Vec<TopicRef> {
    fn declarations(self) -> Vec<TopicRef> {
        self
    }
}

impl<const N: usize> Sinks for [TopicRef; N] {
    fn declarations(self) -> Vec<TopicRef> {
        self.into()
    }
}

macro_rules! sinks_tuple {
    ($($k:ident $v:ident $name:ident),+) => {
        impl<$($k: 'static, $v: 'static),+> Sinks for ($(&Topic<$k, $v>,)+) {
            fn declarations(self) -> Vec<TopicRef> {
                let ($($name,)+) = self;
                vec![$($name.declaration()),+]
            }
        }
    };
}

sinks_tuple!(K1 V1 a, K2 V2 b);
sinks_tuple!(K1 V1 a, K2 V2 b, K3 V3 c);
sinks_tuple!(K1 V1 a, K2 V2 b, K3 V3 c, K4 V4 d);
