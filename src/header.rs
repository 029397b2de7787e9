//! The stamp's binary header: compact, versioned and canonical.
//!
//! Layout, version 1 (all integers unsigned LEB128 varints, minimally encoded):
//!
//! ```text
//! version:u8 = 1
//! topic_count
//! repeated topic_count times, topics in ascending byte order:
//!     name_len, name (UTF-8, 1..=249 bytes)
//!     claim_count (>= 1)
//!     repeated claim_count times, partitions ascending:
//!         partition, offset
//! ```
//!
//! Claims are grouped by topic so that a name is written once however many of
//! its partitions are claimed. The decoder accepts only the canonical form the
//! encoder writes (sorted, unique, minimal varints, no trailing bytes), so a
//! header that decodes re-encodes to the very same bytes, and every malformed
//! header gets a typed [`HeaderError`] saying what and at which byte.

use std::cell::RefCell;

use bytes::{BufMut, Bytes};

use crate::record::Header;
use crate::stamp::{Claim, Stamp};
use crate::tp::{TopicName, Tp};

pub use crate::task::aligned::{cut_of, is_progress, CUT_HEADER, EPOCH_HEADER, PROGRESS_HEADER};

/// The record header that carries a stamp.
pub const STAMP_HEADER: &str = "parsley-stamp";
/// The version this build writes and reads.
pub const STAMP_VERSION: u8 = 1;
/// Kafka's own limit on a topic name's length.
pub const TOPIC_NAME_BYTES_MAX: u64 = 249;
/// Far beyond any real application, small enough to refuse absurd inputs early.
pub const TOPICS_PER_STAMP_MAX: u64 = 4_096;
/// Kafka's practical partition ceiling per topic is far lower; this guards
/// allocation against garbage.
pub const CLAIMS_PER_TOPIC_MAX: u64 = 1 << 20;
/// Kafka offsets are signed 64-bit numbers.
pub const OFFSET_MAX: u64 = i64::MAX as u64;

/// Why a stamp header did not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// No bytes at all.
    #[error("stamp header is empty")]
    Empty,
    /// A version byte this build does not read.
    #[error(
        "stamp header has unknown version {version} (this build reads version {STAMP_VERSION})"
    )]
    UnknownVersion {
        /// The version byte found.
        version: u8,
    },
    /// The header ends in the middle of a value.
    #[error("stamp header is truncated at byte {at}: expected {expected}")]
    Truncated {
        /// The byte of the header where decoding stopped.
        at: usize,
        /// What was expected there.
        expected: &'static str,
    },
    /// A varint does not fit 64 bits.
    #[error("stamp header: varint at byte {at} overflows 64 bits")]
    VarintOverflow {
        /// The byte of the header where decoding stopped.
        at: usize,
    },
    /// A varint has redundant bytes (not canonical).
    #[error("stamp header: varint at byte {at} is not minimally encoded")]
    NonMinimalVarint {
        /// The byte of the header where decoding stopped.
        at: usize,
    },
    /// A count, length or offset beyond any sane bound, refused before allocating.
    #[error("stamp header: {what} {value} at byte {at} is absurd (at most {max})")]
    AbsurdValue {
        /// What was read.
        what: &'static str,
        /// The value read.
        value: u64,
        /// The largest value accepted.
        max: u64,
        /// The byte of the header where decoding stopped.
        at: usize,
    },
    /// A topic name that is not UTF-8.
    #[error("stamp header: topic name at byte {at} is not UTF-8")]
    InvalidUtf8 {
        /// The byte of the header where decoding stopped.
        at: usize,
    },
    /// Valid but not the canonical encoding (unsorted, repeated, or empty groups), so it would not re-encode to the same bytes.
    #[error("stamp header is not canonical at byte {at}: {what}")]
    NotCanonical {
        /// The byte of the header where decoding stopped.
        at: usize,
        /// What was read.
        what: &'static str,
    },
    /// Bytes after the last claim.
    #[error("stamp header has {count} trailing bytes after byte {at}")]
    TrailingBytes {
        /// The byte of the header where decoding stopped.
        at: usize,
        /// How many bytes were left over.
        count: usize,
    },
}

/// The stamp header carrying `stamp`.
pub fn stamp_header(stamp: &Stamp) -> Header {
    Header {
        name: STAMP_HEADER.into(),
        value: encode(stamp),
    }
}

/// Encodes a stamp into its header bytes.
pub fn encode(stamp: &Stamp) -> Bytes {
    crate::chunks::fill(encoded_len_hint(stamp), |out| encode_into(stamp, out))
}

/// How many bytes to reserve for a stamp's encoding: enough while topic
/// names are shorter than 128 bytes, counts and partitions below 128 and
/// offsets below 2^35, so that encoding rarely has to grow its buffer.
pub(crate) fn encoded_len_hint(stamp: &Stamp) -> usize {
    let claims = stamp.claims();
    let mut len = 2 + claims.len() * 6;
    let mut previous: Option<&TopicName> = None;
    for claim in claims {
        if previous.is_none_or(|topic| !topic.same(&claim.tp.topic)) {
            len += 2 + claim.tp.topic.as_str().len();
            previous = Some(&claim.tp.topic);
        }
    }
    len
}

/// Appends a stamp's header bytes to `out`.
pub fn encode_into(stamp: &Stamp, out: &mut impl BufMut) {
    out.put_u8(STAMP_VERSION);
    let claims = stamp.claims();
    let topic_count = count_topics(claims);
    put_varint(out, topic_count as u64);
    let mut start = 0;
    while start < claims.len() {
        let topic = &claims[start].tp.topic;
        let end = start
            + claims[start..]
                .iter()
                .take_while(|claim| claim.tp.topic.same(topic))
                .count();
        put_varint(out, topic.as_str().len() as u64);
        out.put_slice(topic.as_str().as_bytes());
        put_varint(out, (end - start) as u64);
        for claim in &claims[start..end] {
            put_varint(out, u64::from(claim.tp.partition));
            put_varint(out, claim.offset);
        }
        start = end;
    }
}

/// Whether `bytes` is the header of `stamp`, without decoding them: the
/// decoder accepts only the canonical encoding, so bytes equal to `stamp`'s
/// encoding decode to `stamp`, provided `stamp` lies within the decoder's
/// bounds. `scratch` holds the encoding and can be reused across calls.
pub fn is_header_of(bytes: &[u8], stamp: &Stamp, scratch: &mut Vec<u8>) -> bool {
    scratch.clear();
    encode_into(stamp, scratch);
    scratch[..] == *bytes && within_decoder_bounds(stamp)
}

/// The bounds [`decode`] enforces that a stamp built in memory may exceed
/// (order and uniqueness hold for every [`Stamp`]).
fn within_decoder_bounds(stamp: &Stamp) -> bool {
    let mut topics = 0;
    for group in stamp.claims().chunk_by(|a, b| a.tp.topic.same(&b.tp.topic)) {
        let name = group[0].tp.topic.as_str().len() as u64;
        if name == 0
            || name > TOPIC_NAME_BYTES_MAX
            || group.len() as u64 > CLAIMS_PER_TOPIC_MAX
            || group.iter().any(|claim| claim.offset > OFFSET_MAX)
        {
            return false;
        }
        topics += 1;
    }
    topics <= TOPICS_PER_STAMP_MAX
}

fn count_topics(claims: &[Claim]) -> usize {
    let mut count = 0;
    let mut previous: Option<&TopicName> = None;
    for claim in claims {
        if previous.is_none_or(|topic| !topic.same(&claim.tp.topic)) {
            count += 1;
            previous = Some(&claim.tp.topic);
        }
    }
    count
}

fn put_varint(out: &mut impl BufMut, mut value: u64) {
    while value >= 0x80 {
        out.put_u8((value as u8) | 0x80);
        value >>= 7;
    }
    out.put_u8(value as u8);
}

/// Decodes header bytes into a stamp, accepting only the canonical encoding.
pub fn decode(bytes: &[u8]) -> Result<Stamp, HeaderError> {
    let mut reader = Reader { bytes, at: 0 };
    let version = *bytes.first().ok_or(HeaderError::Empty)?;
    if version != STAMP_VERSION {
        return Err(HeaderError::UnknownVersion { version });
    }
    reader.at = 1;
    let topic_count = reader.count("topic count", TOPICS_PER_STAMP_MAX, 4)?;
    let mut claims = Vec::with_capacity(topic_count as usize);
    let mut previous_topic: Option<TopicName> = None;
    for _ in 0..topic_count {
        let name_at = reader.at;
        let name_len = reader.count("topic name length", TOPIC_NAME_BYTES_MAX, 1)?;
        if name_len == 0 {
            return Err(HeaderError::NotCanonical {
                at: name_at,
                what: "empty topic name",
            });
        }
        let name_bytes = reader.take(name_len as usize, "topic name")?;
        let name = std::str::from_utf8(name_bytes)
            .map_err(|_| HeaderError::InvalidUtf8 { at: name_at })?;
        if previous_topic
            .as_ref()
            .is_some_and(|previous| previous.as_str() >= name)
        {
            return Err(HeaderError::NotCanonical {
                at: name_at,
                what: "topics not in ascending order",
            });
        }
        let topic = decoded_topic(name);
        let count_at = reader.at;
        let claim_count = reader.count("claim count", CLAIMS_PER_TOPIC_MAX, 2)?;
        if claim_count == 0 {
            return Err(HeaderError::NotCanonical {
                at: count_at,
                what: "topic with no claims",
            });
        }
        claims.reserve(claim_count as usize);
        let mut previous_partition: Option<u32> = None;
        for _ in 0..claim_count {
            let partition_at = reader.at;
            let partition = reader.bounded("partition", u64::from(u32::MAX))? as u32;
            if previous_partition.is_some_and(|previous| previous >= partition) {
                return Err(HeaderError::NotCanonical {
                    at: partition_at,
                    what: "partitions not in ascending order",
                });
            }
            previous_partition = Some(partition);
            let offset = reader.bounded("offset", OFFSET_MAX)?;
            claims.push(Claim::new(Tp::new(topic.clone(), partition), offset));
        }
        previous_topic = Some(topic);
    }
    if reader.at != bytes.len() {
        return Err(HeaderError::TrailingBytes {
            at: reader.at,
            count: bytes.len() - reader.at,
        });
    }
    Ok(Stamp::from_sorted_unique(claims))
}

/// Topic names decoded lately, at most this many per thread.
const DECODED_TOPICS_MAX: usize = 16;

thread_local! {
    /// Topic names this thread decoded lately: stamps name the same few
    /// topics over and over, and sharing a name spares an allocation per
    /// topic per decoded stamp (and lets comparisons of names match by
    /// pointer).
    static DECODED_TOPICS: RefCell<Vec<TopicName>> = const { RefCell::new(Vec::new()) };
}

/// The topic called `name`, shared with an earlier decode when there was one.
fn decoded_topic(name: &str) -> TopicName {
    DECODED_TOPICS.with(|cell| {
        let Ok(mut known) = cell.try_borrow_mut() else {
            return TopicName::new(name);
        };
        if let Some(topic) = known.iter().find(|topic| topic.as_str() == name) {
            return topic.clone();
        }
        let topic = TopicName::new(name);
        if known.len() == DECODED_TOPICS_MAX {
            known.remove(0);
        }
        known.push(topic.clone());
        topic
    })
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn varint(&mut self, expected: &'static str) -> Result<u64, HeaderError> {
        let start = self.at;
        let mut value: u64 = 0;
        for shift in (0..64).step_by(7) {
            let byte = *self.bytes.get(self.at).ok_or(HeaderError::Truncated {
                at: self.at,
                expected,
            })?;
            self.at += 1;
            let bits = u64::from(byte & 0x7f);
            if shift == 63 && bits > 1 {
                return Err(HeaderError::VarintOverflow { at: start });
            }
            value |= bits << shift;
            if byte & 0x80 == 0 {
                // A final zero byte after the first adds nothing: not minimal.
                if byte == 0 && self.at - start > 1 {
                    return Err(HeaderError::NonMinimalVarint { at: start });
                }
                return Ok(value);
            }
        }
        Err(HeaderError::VarintOverflow { at: start })
    }

    /// Reads a count (or length) no larger than `max` and than the bytes
    /// left could hold (`min_bytes_each` per item), so that a garbage count
    /// never drives a huge allocation or loop.
    fn count(
        &mut self,
        what: &'static str,
        max: u64,
        min_bytes_each: usize,
    ) -> Result<u64, HeaderError> {
        let at = self.at;
        let value = self.varint(what)?;
        let left = (self.bytes.len() - self.at) as u64;
        within(what, value, max.min(left / min_bytes_each as u64), at)
    }

    /// Reads a varint no larger than `max`.
    fn bounded(&mut self, what: &'static str, max: u64) -> Result<u64, HeaderError> {
        let at = self.at;
        let value = self.varint(what)?;
        within(what, value, max, at)
    }

    fn take(&mut self, len: usize, expected: &'static str) -> Result<&'a [u8], HeaderError> {
        let end = self.at + len;
        let slice = self.bytes.get(self.at..end).ok_or(HeaderError::Truncated {
            at: self.at,
            expected,
        })?;
        self.at = end;
        Ok(slice)
    }
}

/// `value`, read at byte `at`, if it is at most `max`.
fn within(what: &'static str, value: u64, max: u64, at: usize) -> Result<u64, HeaderError> {
    if value > max {
        return Err(HeaderError::AbsurdValue {
            what,
            value,
            max,
            at,
        });
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Decoding the same topic twice shares its name, and a stamp decoded
    /// on a thread whose recent names are all other topics still decodes.
    #[test]
    fn decoded_stamps_share_their_topic_names() {
        let bytes = encode(&sample());
        let (first, second) = (decode(&bytes).unwrap(), decode(&bytes).unwrap());
        assert_eq!(first, sample());
        for (a, b) in first.claims().iter().zip(second.claims()) {
            assert!(a.tp.topic.ptr_eq(&b.tp.topic), "{} is not shared", a.tp);
        }
        for index in 0..DECODED_TOPICS_MAX * 2 {
            let other = Stamp::from_claims([Claim::new(Tp::new(format!("t{index}"), 0), 1)]);
            assert_eq!(decode(&encode(&other)).unwrap(), other);
        }
        assert_eq!(decode(&bytes).unwrap(), sample());
    }

    fn sample() -> Stamp {
        Stamp::from_claims([
            Claim::new(Tp::new("orders", 0), 4),
            Claim::new(Tp::new("orders", 3), 300),
            Claim::new(Tp::new("audits", 1), 0),
        ])
    }

    /// A header is recognised as a stamp's exactly when it decodes to it.
    #[test]
    fn is_header_of_agrees_with_decode() {
        let mut scratch = Vec::new();
        let bytes = encode(&sample());
        assert!(is_header_of(&bytes, &sample(), &mut scratch));
        assert!(!is_header_of(&bytes, &Stamp::empty(), &mut scratch));
        assert!(!is_header_of(
            &bytes[..bytes.len() - 1],
            &sample(),
            &mut scratch
        ));
        // Beyond the decoder's bounds the bytes match but do not decode.
        let absurd = Stamp::from_claims([Claim::new(Tp::new("orders", 0), OFFSET_MAX + 1)]);
        let absurd_bytes = encode(&absurd);
        assert!(decode(&absurd_bytes).is_err());
        assert!(!is_header_of(&absurd_bytes, &absurd, &mut scratch));
        let long = Stamp::from_claims([Claim::new(Tp::new("t".repeat(250), 0), 1)]);
        assert!(!is_header_of(&encode(&long), &long, &mut scratch));
    }

    /// Whether `stamp`'s encoding decodes, checking that `is_header_of`
    /// agrees.
    fn decodes_and_is_recognised(stamp: &Stamp) -> bool {
        let bytes = encode(stamp);
        let decodes = decode(&bytes).is_ok();
        assert_eq!(
            is_header_of(&bytes, stamp, &mut Vec::new()),
            decodes,
            "is_header_of disagrees with decode"
        );
        decodes
    }

    /// Each bound of the decoder holds at its limit and fails one past it,
    /// and `is_header_of` draws the same line.
    #[test]
    fn is_header_of_agrees_with_decode_at_every_bound() {
        let one = |topic: String, offset: u64| {
            Stamp::from_claims([Claim::new(Tp::new(topic, 0), offset)])
        };
        let limit = TOPIC_NAME_BYTES_MAX as usize;
        assert!(decodes_and_is_recognised(&one("t".repeat(limit), 1)));
        assert!(!decodes_and_is_recognised(&one("t".repeat(limit + 1), 1)));
        assert!(decodes_and_is_recognised(&one("t".into(), OFFSET_MAX)));
        assert!(!decodes_and_is_recognised(&one("t".into(), OFFSET_MAX + 1)));
        let topics = |count: u64| {
            Stamp::from_claims(
                (0..count).map(|topic| Claim::new(Tp::new(format!("t{topic}"), 0), 1)),
            )
        };
        assert!(decodes_and_is_recognised(&topics(TOPICS_PER_STAMP_MAX)));
        assert!(!decodes_and_is_recognised(&topics(
            TOPICS_PER_STAMP_MAX + 1
        )));
        let claims = |count: u64| {
            let topic = TopicName::new("t");
            Stamp::from_claims(
                (0..count).map(|partition| Claim::new(Tp::new(topic.clone(), partition as u32), 1)),
            )
        };
        assert!(decodes_and_is_recognised(&claims(CLAIMS_PER_TOPIC_MAX)));
        assert!(!decodes_and_is_recognised(&claims(
            CLAIMS_PER_TOPIC_MAX + 1
        )));
    }

    /// A count is bounded by the bytes left to hold it (4 per topic at
    /// least), not only by its own maximum.
    #[test]
    fn bad_header_count_beyond_the_bytes_left_is_absurd() {
        assert_eq!(
            decode(&[1, 2, 1, b'a', 1, 0]),
            Err(HeaderError::AbsurdValue {
                what: "topic count",
                value: 2,
                max: 1,
                at: 1
            })
        );
    }

    #[test]
    fn g1_header_round_trips() {
        let stamp = sample();
        assert_eq!(decode(&encode(&stamp)).unwrap(), stamp);
        assert_eq!(decode(&encode(&Stamp::empty())).unwrap(), Stamp::empty());
    }

    #[test]
    fn header_is_compact() {
        // version, topic count, "audits" group (1+6+1+2), "orders" group (1+6+1+2+3).
        assert_eq!(encode(&sample()).len(), 1 + 1 + 10 + 13);
    }

    #[test]
    fn bad_header_empty_and_unknown_version() {
        assert_eq!(decode(&[]), Err(HeaderError::Empty));
        assert_eq!(
            decode(&[9, 0]),
            Err(HeaderError::UnknownVersion { version: 9 })
        );
    }

    #[test]
    fn bad_header_truncated_names_the_byte() {
        let bytes = encode(&sample());
        for cut in 1..bytes.len() {
            let error = decode(&bytes[..cut]).unwrap_err();
            assert!(
                matches!(error, HeaderError::Truncated { at, .. } | HeaderError::AbsurdValue { at, .. } if at <= cut),
                "cut at {cut}: {error:?}"
            );
        }
    }

    #[test]
    fn bad_header_absurd_lengths_are_refused_before_allocating() {
        // One topic whose name claims to be 200 bytes long (varint 0xc8 0x01),
        // with 2 bytes left.
        let error = decode(&[1, 1, 0xc8, 0x01, b'a', b'b']).unwrap_err();
        assert_eq!(
            error,
            HeaderError::AbsurdValue {
                what: "topic name length",
                value: 200,
                max: 2,
                at: 2
            }
        );
        // A topic count of 2^62.
        let error = decode(&[1, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40]).unwrap_err();
        assert!(
            matches!(
                error,
                HeaderError::AbsurdValue {
                    what: "topic count",
                    ..
                }
            ),
            "{error:?}"
        );
        assert_eq!(
            error.to_string(),
            "stamp header: topic count 4611686018427387904 at byte 1 is absurd (at most 0)"
        );
    }

    #[test]
    fn bad_header_varint_overflow_and_non_minimal() {
        let mut overflow = vec![1u8];
        overflow.extend([0xff; 10]);
        assert_eq!(
            decode(&overflow),
            Err(HeaderError::VarintOverflow { at: 1 })
        );
        assert_eq!(
            decode(&[1, 0x80, 0x00]),
            Err(HeaderError::NonMinimalVarint { at: 1 })
        );
        // The tenth byte holds bit 63 only: 2 overflows, 0 is not minimal.
        let mut tenth_two = vec![1u8];
        tenth_two.extend([0xff; 9]);
        tenth_two.push(0x02);
        assert_eq!(
            decode(&tenth_two),
            Err(HeaderError::VarintOverflow { at: 1 })
        );
        let mut tenth_zero = vec![1u8];
        tenth_zero.extend([0x80; 9]);
        tenth_zero.push(0x00);
        assert_eq!(
            decode(&tenth_zero),
            Err(HeaderError::NonMinimalVarint { at: 1 })
        );
    }

    #[test]
    fn bad_header_not_canonical_and_trailing() {
        // Topics "b" then "a": out of order.
        let bytes = [1, 2, 1, b'b', 1, 0, 0, 1, b'a', 1, 0, 0];
        assert!(matches!(
            decode(&bytes),
            Err(HeaderError::NotCanonical { at: 7, .. })
        ));
        // Partitions 1 then 1: repeated.
        let bytes = [1, 1, 1, b'a', 2, 1, 0, 1, 0];
        assert!(matches!(
            decode(&bytes),
            Err(HeaderError::NotCanonical { at: 7, .. })
        ));
        let mut bytes = encode(&sample()).to_vec();
        let end = bytes.len();
        bytes.extend([0, 0, 0]);
        assert_eq!(
            decode(&bytes),
            Err(HeaderError::TrailingBytes { at: end, count: 3 })
        );
        assert!(matches!(
            decode(&[1, 1, 1, 0xff, 1, 0, 0]),
            Err(HeaderError::InvalidUtf8 { at: 2 })
        ));
    }

    #[test]
    fn bad_header_offset_beyond_kafka_range() {
        let mut bytes = vec![1, 1, 1, b'a', 1, 0];
        put_varint(&mut bytes, u64::MAX);
        assert!(matches!(
            decode(&bytes),
            Err(HeaderError::AbsurdValue { what: "offset", .. })
        ));
    }

    proptest! {
        /// The codec round-trips every stamp.
        #[test]
        fn prop_header_round_trips(stamp in crate::stamp::tests::arb_stamp()) {
            prop_assert_eq!(decode(&encode(&stamp)).unwrap(), stamp);
        }

        /// Whatever the decoder accepts re-encodes to the same bytes, and it
        /// never panics on garbage.
        #[test]
        fn prop_header_decode_accepts_only_canonical(bytes in prop::collection::vec(any::<u8>(), 0..40)) {
            if let Ok(stamp) = decode(&bytes) {
                let encoded = encode(&stamp);
                prop_assert_eq!(encoded.as_ref(), &bytes[..]);
            }
        }
    }
}
