//! The causal clock (K1): stamps records produced outside stages.
//!
//! A scheduler or an ingest service that reads some records and writes others
//! keeps a `CausalClock`: it observes each record it consumes (that record's
//! stamp, plus a claim on the record itself) and stamps what it sends with
//! everything observed so far. A consumer of what it sends is then gated
//! behind the observed records and their causes, as if a stage had sent it.

use crate::header::{self, HeaderError, STAMP_HEADER};
use crate::record::{ConsumedRecord, RecordData};
use crate::stamp::Stamp;
use crate::tp::Tp;

/// Stamps records written outside stages (K1): it merges what it observes and stamps with it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CausalClock {
    observed: Stamp,
}

impl CausalClock {
    /// A clock that has observed nothing: it stamps with the empty stamp.
    pub fn new() -> Self {
        CausalClock::default()
    }

    /// Observes a consumed record of `tp`: merges its stamp and claims it.
    /// A stamp header that does not decode is refused, and nothing is observed.
    pub fn observe(&mut self, tp: &Tp, record: &ConsumedRecord) -> Result<(), HeaderError> {
        let stamp = match record.data.header(STAMP_HEADER) {
            Some(bytes) => header::decode(bytes)?,
            None => Stamp::empty(),
        };
        self.observe_stamp(tp, record.offset, &stamp);
        Ok(())
    }

    /// Observes a record known by its tp, offset and decoded stamp.
    pub fn observe_stamp(&mut self, tp: &Tp, offset: u64, stamp: &Stamp) {
        self.observed.merge(stamp);
        self.observed.claim(tp, offset);
    }

    /// Everything observed so far: the stamp of whatever is sent next.
    pub fn stamp(&self) -> &Stamp {
        &self.observed
    }

    /// Sets `record`'s stamp header to the observed stamp, replacing any.
    pub fn stamp_record(&self, record: &mut RecordData) {
        record.headers.retain(|header| header.name != STAMP_HEADER);
        record.headers.push(header::stamp_header(&self.observed));
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::{Claim, Header};

    fn consumed(offset: u64, stamp: &Stamp) -> ConsumedRecord {
        ConsumedRecord {
            offset,
            data: RecordData {
                key: None,
                value: Some(Bytes::from_static(b"{}")),
                headers: vec![Header {
                    name: STAMP_HEADER.into(),
                    value: header::encode(stamp),
                }],
                timestamp: 0,
            },
        }
    }

    /// K1: what the clock sends claims each observed record and its causes.
    #[test]
    fn k1_causal_clock_stamps_with_what_it_observed() {
        let requests = Tp::new("timer-requests", 2);
        let cause = Stamp::from_claims([Claim::new(Tp::new("orders", 0), 17)]);
        let mut clock = CausalClock::new();
        clock.observe(&requests, &consumed(5, &cause)).unwrap();
        clock
            .observe(&requests, &consumed(3, &Stamp::empty()))
            .unwrap();
        let expected = Stamp::from_claims([
            Claim::new(Tp::new("orders", 0), 17),
            Claim::new(requests, 5),
        ]);
        assert_eq!(clock.stamp(), &expected);

        let mut fire = RecordData {
            key: Some(Bytes::from_static(b"k")),
            value: Some(Bytes::from_static(b"fire")),
            headers: Vec::new(),
            timestamp: 9,
        };
        clock.stamp_record(&mut fire);
        clock.stamp_record(&mut fire);
        assert_eq!(fire.headers.len(), 1, "restamping replaces the header");
        assert_eq!(
            header::decode(fire.header(STAMP_HEADER).unwrap()).unwrap(),
            expected
        );
    }

    #[test]
    fn k1_causal_clock_refuses_a_bad_header() {
        let mut record = consumed(1, &Stamp::empty());
        record.data.headers[0].value = Bytes::from_static(&[7]);
        let mut clock = CausalClock::new();
        assert_eq!(
            clock.observe(&Tp::new("t", 0), &record),
            Err(HeaderError::UnknownVersion { version: 7 })
        );
        assert!(clock.stamp().is_empty());
    }
}
