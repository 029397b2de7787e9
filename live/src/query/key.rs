//! A queried key, from its text to the bytes the stage's slots are keyed
//! by: the stage's sources' key codec's own text form for the codecs
//! Parsley ships, or `base64:` and the bytes themselves for any codec.

use base64::Engine as _;
use bytes::Bytes;
use parsley::StagePlan;
use parsley::{Json, RawBytes, Utf8, I64};

use super::QueryError;

/// What marks a key given as its bytes, in base64 (standard alphabet).
pub const BASE64_PREFIX: &str = "base64:";

/// The bytes of `text` as a key of `plan`'s stage:
///
/// - `base64:<bytes>`: the key's bytes, whatever the codec;
/// - key codec [`Utf8`]: the text itself;
/// - [`I64`]: a decimal integer, written as Kafka's long (8 bytes, big
///   endian);
/// - [`Json`]: the key's JSON as the codec writes it (compact);
/// - any other codec ([`RawBytes`] among them): refused, naming it
///   ([`QueryError::UnknownKeyCodec`]); give the bytes in base64.
pub fn key_bytes(plan: &StagePlan, text: &str) -> Result<Bytes, QueryError> {
    let stage = plan.name();
    let bad = |why: String| QueryError::BadKey {
        stage: stage.to_owned(),
        key: text.to_owned(),
        why,
    };
    if let Some(encoded) = text.strip_prefix(BASE64_PREFIX) {
        return base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map(Bytes::from)
            .map_err(|error| bad(format!("is not base64 after `{BASE64_PREFIX}`: {error}")));
    }
    let sources = plan.stage.sources();
    let all = |is: fn(&parsley::TopicRef) -> bool| !sources.is_empty() && sources.iter().all(is);
    if all(|source| source.key_codec_is::<Utf8>()) {
        Ok(Bytes::copy_from_slice(text.as_bytes()))
    } else if all(|source| source.key_codec_is::<I64>()) {
        let number: i64 = text
            .trim()
            .parse()
            .map_err(|error| bad(format!("is no decimal i64 (the key codec is I64): {error}")))?;
        Ok(Bytes::copy_from_slice(&number.to_be_bytes()))
    } else if all(|source| source.key_codec_is::<Json>()) {
        serde_json::from_str::<serde_json::Value>(text)
            .map_err(|error| bad(format!("is not JSON (the key codec is Json): {error}")))?;
        Ok(Bytes::copy_from_slice(text.as_bytes()))
    } else {
        let raw = all(|source| source.key_codec_is::<RawBytes>());
        Err(QueryError::UnknownKeyCodec {
            stage: stage.to_owned(),
            codecs: sources
                .iter()
                .map(|source| {
                    format!(
                        "{}: {}",
                        source.name,
                        source.codecs().unwrap_or_else(|| "none".into())
                    )
                })
                .collect::<Vec<_>>()
                .join("; "),
            raw,
        })
    }
}

/// `bytes` in standard base64.
pub fn base64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}
