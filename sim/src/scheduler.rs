//! The timer scheduler of the request/reply shape (K2), as a state machine
//! with no I/O and no clock of its own. It observes committed timer requests
//! with a [`CausalClock`] (K1) and, asked with the current time, returns the
//! fire records that are due: keyed like their request, valued with the time
//! asked for, stamped with everything observed, for the fire topic's
//! partition of the request. Times are milliseconds as a long, in Kafka's
//! `LongSerializer` format. The simulator and the live scheduler drive it
//! over the model and a real cluster.

use bytes::Bytes;
use parsley::header::HeaderError;
use parsley::{CausalClock, Codec, ConsumedRecord, RecordData, Tp, I64};

/// A timer request the scheduler cannot read (§8).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimerRequestError {
    /// The request's stamp header does not decode.
    #[error("timer request {tp}@{offset} has a stamp header that does not decode: {error}")]
    BadStamp {
        /// The tp of the request.
        tp: Tp,
        /// Its offset.
        offset: u64,
        /// The decoder's refusal.
        error: HeaderError,
    },
    /// The request has no key, so the fire record could not have one.
    #[error("timer request {tp}@{offset} has no key")]
    NoKey {
        /// The tp of the request.
        tp: Tp,
        /// Its offset.
        offset: u64,
    },
    /// The request does not hold a fire time.
    #[error(
        "timer request {tp}@{offset} does not hold a time in milliseconds as a long (8 big-endian bytes)"
    )]
    NoTime {
        /// The tp of the request.
        tp: Tp,
        /// Its offset.
        offset: u64,
    },
}

/// The timer scheduler of the request/reply shape (K2), without I/O: it observes committed timer requests with a `CausalClock` (K1) and, given the time, returns the fire records that are due, stamped with what it observed.
#[derive(Clone, Debug, Default)]
pub struct TimerScheduler {
    clock: CausalClock,
    /// Key, time to fire, partition: in the order the requests were read.
    pending: Vec<(Bytes, i64, u32)>,
}

impl TimerScheduler {
    /// A scheduler with no timers.
    pub fn new() -> Self {
        TimerScheduler::default()
    }

    /// Reads one committed request of `tp`; it fires on the same partition
    /// of the fire topic.
    pub fn observe(&mut self, tp: &Tp, record: &ConsumedRecord) -> Result<(), TimerRequestError> {
        let offset = record.offset;
        self.clock
            .observe(tp, record)
            .map_err(|error| TimerRequestError::BadStamp {
                tp: tp.clone(),
                offset,
                error,
            })?;
        let key = record.data.key.clone().ok_or(TimerRequestError::NoKey {
            tp: tp.clone(),
            offset,
        })?;
        let fire_at = record
            .data
            .value
            .as_deref()
            .and_then(|value| Codec::<i64>::decode(&I64, value).ok())
            .ok_or(TimerRequestError::NoTime {
                tp: tp.clone(),
                offset,
            })?;
        self.pending.push((key, fire_at, tp.partition));
        Ok(())
    }

    /// Timers read but not yet fired.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Takes every timer due at `now` and returns its fire record with the
    /// fire topic's partition, in the order the requests were read.
    pub fn due(&mut self, now: i64) -> Vec<(u32, RecordData)> {
        let (due, later): (Vec<_>, Vec<_>) = self
            .pending
            .drain(..)
            .partition(|(_, fire_at, _)| *fire_at <= now);
        self.pending = later;
        due.into_iter()
            .map(|(key, fire_at, partition)| {
                let mut data = RecordData {
                    key: Some(key),
                    value: Some(Codec::<i64>::encode(&I64, &fire_at).expect("times encode")),
                    headers: Vec::new(),
                    timestamp: now,
                };
                self.clock.stamp_record(&mut data);
                (partition, data)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use parsley::header::{self, STAMP_HEADER};
    use parsley::{Claim, Header};

    use super::*;

    fn request(offset: u64, key: Option<&str>, value: &[u8]) -> ConsumedRecord {
        ConsumedRecord {
            offset,
            data: RecordData {
                key: key.map(|key| Bytes::copy_from_slice(key.as_bytes())),
                value: Some(Bytes::copy_from_slice(value)),
                headers: Vec::new(),
                timestamp: 0,
            },
        }
    }

    /// K2: a fire record is due at its time, keyed like its request, on its
    /// partition, and claims the request (K1).
    #[test]
    fn k2_fires_when_due_stamped_with_the_request() {
        let tp = Tp::new("timer-requests", 1);
        let mut scheduler = TimerScheduler::new();
        scheduler
            .observe(&tp, &request(4, Some("k"), &100i64.to_be_bytes()))
            .unwrap();
        assert!(scheduler.due(99).is_empty());
        let fired = scheduler.due(100);
        assert_eq!(fired.len(), 1);
        let (partition, data) = &fired[0];
        assert_eq!(*partition, 1);
        assert_eq!(data.key.as_deref(), Some(&b"k"[..]));
        assert_eq!(data.value.as_deref(), Some(&100i64.to_be_bytes()[..]));
        let stamp = header::decode(data.header(STAMP_HEADER).unwrap()).unwrap();
        assert!(stamp.claims().contains(&Claim::new(tp, 4)));
        assert_eq!(scheduler.pending(), 0);
    }

    /// §8: a request without a key, without a time or with a bad stamp is a
    /// typed error naming the record.
    #[test]
    fn unreadable_requests_are_typed_errors() {
        let tp = Tp::new("timer-requests", 0);
        let mut scheduler = TimerScheduler::new();
        assert!(matches!(
            scheduler.observe(&tp, &request(0, None, &1i64.to_be_bytes())),
            Err(TimerRequestError::NoKey { offset: 0, .. })
        ));
        assert!(matches!(
            scheduler.observe(&tp, &request(1, Some("k"), b"soon")),
            Err(TimerRequestError::NoTime { offset: 1, .. })
        ));
        let mut bad = request(2, Some("k"), &1i64.to_be_bytes());
        bad.data.headers.push(Header {
            name: STAMP_HEADER.into(),
            value: Bytes::from_static(&[0xff]),
        });
        assert!(matches!(
            scheduler.observe(&tp, &bad),
            Err(TimerRequestError::BadStamp { offset: 2, .. })
        ));
        assert_eq!(scheduler.pending(), 0);
    }
}
