//! The body of the `stamp_decode` fuzz target, shared with the stable test
//! suite (`examples/topologies/tests/fuzz_corpus.rs`), which runs it over the checked-in
//! corpus: one copy of what the target checks, two ways to feed it.
//!
//! Bad input (docs/RULES.md#bad-input) and the header codec's contract: the decoder never panics, whatever
//! the bytes (truncated, garbage, unknown version, absurd lengths), and it
//! accepts only the canonical encoding, so whatever it accepts re-encodes to
//! exactly the bytes it was given.

/// Decodes `data` as a stamp header; panics if the decoder panics or if an
/// accepted header does not re-encode to `data`.
pub fn stamp_decode(data: &[u8]) {
    if let Ok(stamp) = parsley::header::decode(data) {
        let encoded = parsley::header::encode(&stamp);
        assert_eq!(
            encoded.as_ref(),
            data,
            "the decoder accepted a header that re-encodes differently: {stamp:?}"
        );
        // The claims a decoded stamp holds are the canonical form: sorted by
        // tp, one per tp, so rebuilding the stamp from them changes nothing.
        let rebuilt = parsley::Stamp::from_claims(stamp.claims().iter().cloned());
        assert_eq!(rebuilt, stamp, "a decoded stamp is not canonical");
    }
}
