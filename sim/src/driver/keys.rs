//! What the driver's calls accept as keys and values: `pipe("alice", 5)` on
//! a `Topic<String, i64>` as well as `pipe("alice".to_string(), 5)` and
//! `pipe(None, 5)`, and a store key by value or by reference.

use std::any::type_name;

use bytes::Bytes;
use parsley::{Codec, CodecError, Json, RawBytes, Utf8, I64};

/// Anything a pipe takes as the key of a `Topic<K, _>`: a `K`, an
/// `Option<K>` (`None` for a null key), and, for `String` keys, a `&str` or
/// a `&String`.
///
/// ```
/// # use parsley::{Parsley, Stage, Topic};
/// # use parsley_sim::TestDriver;
/// let words: Topic<String, i64> = Topic::new("words");
/// # let stage = Stage::named("s").on(&words, |_w| Vec::<parsley::Emission>::new()).build();
/// # let app = Parsley::named("a").stage(stage).build()?;
/// # let driver = TestDriver::new(&app)?;
/// let input = driver.input(&words)?;
/// input.pipe("alice", 5)?;
/// input.pipe("alice".to_string(), 5)?;
/// input.pipe(Some("alice".to_string()), 5)?;
/// input.pipe(None, 5)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait IntoKey<K> {
    /// The key, `None` for a null key.
    fn into_key(self) -> Option<K>;
}

impl<K> IntoKey<K> for K {
    fn into_key(self) -> Option<K> {
        Some(self)
    }
}

impl<K> IntoKey<K> for Option<K> {
    fn into_key(self) -> Option<K> {
        self
    }
}

impl IntoKey<String> for &str {
    fn into_key(self) -> Option<String> {
        Some(self.to_string())
    }
}

impl IntoKey<String> for &String {
    fn into_key(self) -> Option<String> {
        Some(self.clone())
    }
}

/// Anything a pipe takes as the value of a `Topic<_, V>`: a `V`, and, for
/// `String` values, a `&str` or a `&String`.
pub trait IntoValue<V> {
    /// The value.
    fn into_value(self) -> V;
}

impl<V> IntoValue<V> for V {
    fn into_value(self) -> V {
        self
    }
}

impl IntoValue<String> for &str {
    fn into_value(self) -> String {
        self.to_string()
    }
}

impl IntoValue<String> for &String {
    fn into_value(self) -> String {
        self.clone()
    }
}

/// Whether `codecs`, a declaration's codecs as [`parsley::TopicRef::codecs`]
/// renders them (`key <(K, KC)> / value <(V, VC)>`), has keys of type `K`
/// written by codec `KC`.
pub(crate) fn declares_key<K, KC>(codecs: &str) -> bool {
    codecs
        .strip_prefix("key ")
        .and_then(|rest| rest.strip_prefix(type_name::<(K, KC)>()))
        .is_some_and(|rest| rest.starts_with(" / value "))
}

/// Whether `codecs` (as in [`declares_key`]) has values of type `V` written
/// by codec `VC`.
pub(crate) fn declares_value<V, VC>(codecs: &str) -> bool {
    codecs
        .strip_suffix(type_name::<(V, VC)>())
        .is_some_and(|rest| rest.ends_with(" / value "))
}

/// A key of a stage's state store ([`crate::driver::KeyValueStore::get`]):
/// the driver encodes it as the stage's source topics encode their keys, so
/// it finds the key's slot, and its partition, without being told a topic.
///
/// Implemented for `str` and `String` (topics with [`Utf8`] or [`Json`]
/// keys), `i64` ([`I64`] or [`Json`]), the other integers ([`Json`]),
/// `Bytes` and `Vec<u8>` ([`RawBytes`]), references to any of them, and
/// [`JsonKey`] for a key type of your own under [`Json`]. A key written by a
/// codec of your own is read with [`crate::TestDriver::key_slot`], which
/// takes the source topic (and so its codec).
pub trait StoreKey {
    /// This key's bytes as a topic whose codecs are `codecs` encodes its
    /// keys (`codecs` as [`parsley::TopicRef::codecs`] renders them), or
    /// `None` when that topic's keys are of another type or codec.
    fn encode_for(&self, codecs: &str) -> Option<Result<Bytes, CodecError>>;
}

impl<T: StoreKey + ?Sized> StoreKey for &T {
    fn encode_for(&self, codecs: &str) -> Option<Result<Bytes, CodecError>> {
        (**self).encode_for(codecs)
    }
}

impl StoreKey for str {
    fn encode_for(&self, codecs: &str) -> Option<Result<Bytes, CodecError>> {
        if declares_key::<String, Utf8>(codecs) {
            return Some(Ok(Bytes::copy_from_slice(self.as_bytes())));
        }
        if declares_key::<String, Json>(codecs) {
            return Some(Codec::<String>::encode(&Json, &self.to_string()));
        }
        None
    }
}

impl StoreKey for String {
    fn encode_for(&self, codecs: &str) -> Option<Result<Bytes, CodecError>> {
        self.as_str().encode_for(codecs)
    }
}

impl StoreKey for i64 {
    fn encode_for(&self, codecs: &str) -> Option<Result<Bytes, CodecError>> {
        if declares_key::<i64, I64>(codecs) {
            return Some(Codec::<i64>::encode(&I64, self));
        }
        if declares_key::<i64, Json>(codecs) {
            return Some(Codec::<i64>::encode(&Json, self));
        }
        None
    }
}

macro_rules! json_store_keys {
    ($($type:ty),+) => {$(
        impl StoreKey for $type {
            fn encode_for(&self, codecs: &str) -> Option<Result<Bytes, CodecError>> {
                declares_key::<$type, Json>(codecs).then(|| Codec::<$type>::encode(&Json, self))
            }
        }
    )+};
}

json_store_keys!(i8, i16, i32, u8, u16, u32, u64, usize, bool, char);

impl StoreKey for Bytes {
    fn encode_for(&self, codecs: &str) -> Option<Result<Bytes, CodecError>> {
        (declares_key::<Bytes, RawBytes>(codecs) || declares_key::<Vec<u8>, RawBytes>(codecs))
            .then(|| Ok(self.clone()))
    }
}

impl StoreKey for Vec<u8> {
    fn encode_for(&self, codecs: &str) -> Option<Result<Bytes, CodecError>> {
        Bytes::copy_from_slice(self).encode_for(codecs)
    }
}

/// A store key of a type of your own, for a topic whose keys are [`Json`]:
/// `store.get(JsonKey(UserId(7)))`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JsonKey<T>(pub T);

impl<T: serde::Serialize + serde::de::DeserializeOwned + 'static> StoreKey for JsonKey<T> {
    fn encode_for(&self, codecs: &str) -> Option<Result<Bytes, CodecError>> {
        declares_key::<T, Json>(codecs).then(|| Codec::<T>::encode(&Json, &self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parsley::Topic;

    fn codecs<K: 'static, V: 'static>(topic: &Topic<K, V>) -> String {
        topic.declaration().codecs().unwrap()
    }

    /// The declaration's rendering is what the store keys match on: a
    /// change to it in the core shows here first.
    #[test]
    fn keys_and_values_are_recognised_by_type_and_codec() {
        let text = codecs(&Topic::<String, i64>::with_codecs("t", Utf8, I64));
        assert!(declares_key::<String, Utf8>(&text));
        assert!(!declares_key::<String, Json>(&text));
        assert!(declares_value::<i64, I64>(&text));
        assert!(!declares_value::<i64, Json>(&text));
        let json = codecs(&Topic::<i64, String>::new("t"));
        assert!(declares_key::<i64, Json>(&json));
        assert!(!declares_key::<i64, I64>(&json));
        assert!(declares_value::<String, Json>(&json));
        assert_eq!(
            "home".encode_for(&text),
            Some(Ok(Bytes::from_static(b"home")))
        );
        assert_eq!("home".encode_for(&json), None);
        assert_eq!(7i64.encode_for(&json), Some(Ok(Bytes::from_static(b"7"))));
    }
}
