//! Consuming: a hand-assigned consumer of one group ([`LiveConsumer`]),
//! fetches of what is visible at an isolation level, and a group's
//! committed offsets.

use std::borrow::Cow;
use std::ffi::CStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use rdkafka::bindings as rdsys;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::{Offset, TopicPartitionList};

use parsley::header::STAMP_HEADER;
use parsley::CommittedOffset;
use parsley::Tp;
use parsley::{ConsumedRecord, Header, RecordData};

use super::log::LogContext;
use super::offsets::{kafka_offset, kafka_partition, our_offset, LogEnds};
use super::util::blocking;
use super::{Isolation, LiveConfig};
use crate::error::{JoinFailure, LiveError};

/// What [`LiveConsumer::fetch`] returned, with the fields of the model's
/// `Fetch`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveFetch {
    /// Visible data records in offset order.
    pub records: Vec<ConsumedRecord>,
    /// The consumer's position after the fetch: past the last record and
    /// past any markers or aborted records skipped after it.
    pub next_offset: u64,
    /// The high watermark when the fetch began.
    pub high_watermark: u64,
    /// The last stable offset when the fetch began.
    pub last_stable_offset: u64,
}

/// A hand-assigned consumer of one group at one isolation level.
pub struct LiveConsumer {
    inner: Arc<BaseConsumer<LogContext>>,
    log_ends: Arc<LogEnds>,
    group: String,
    isolation: Isolation,
    timeout: Duration,
}

impl LiveConsumer {
    pub(super) fn new(
        config: &LiveConfig,
        log_ends: Arc<LogEnds>,
        group: &str,
        isolation: Isolation,
    ) -> Result<LiveConsumer, LiveError> {
        let inner = config
            .client_config(&[
                ("group.id", group.to_owned()),
                ("isolation.level", isolation.property().into()),
                ("enable.auto.commit", "false".into()),
                ("enable.auto.offset.store", "false".into()),
                // A fetch starts at an offset the caller checked; if it is
                // out of range after all, fail rather than jump elsewhere.
                ("auto.offset.reset", "error".into()),
                // The broker holds an empty fetch this long: keep it short,
                // since a fetch polls until it reaches its target offset.
                ("fetch.wait.max.ms", "50".into()),
            ])
            .create_with_context::<_, BaseConsumer<LogContext>>(LogContext)
            .map_err(|source| LiveError::Client {
                client: "consumer",
                source: Box::new(source),
            })?;
        Ok(LiveConsumer {
            inner: Arc::new(inner),
            log_ends,
            group: group.to_owned(),
            isolation,
            timeout: config.timeout,
        })
    }

    /// The consumer group whose committed offsets it reads.
    pub fn group(&self) -> &str {
        &self.group
    }

    /// The isolation level its fetches and committed-offset reads use.
    pub fn isolation(&self) -> Isolation {
        self.isolation
    }

    /// Fetches every record of `tp` from `from` that is visible now: up to
    /// the last stable offset for `read_committed`, the high watermark for
    /// `read_uncommitted`, both read when the fetch begins. Like the model's
    /// fetch, `from` may be at the high watermark (an empty fetch) but not
    /// beyond it; `from` at or past the last stable offset returns nothing
    /// and leaves the position at `from`.
    ///
    /// The consumer polls until its position reaches that offset, so markers
    /// and aborted records after the last returned record are skipped too;
    /// not reaching it within the timeout is [`LiveError::FetchIncomplete`].
    /// `&mut self`: the fetch reassigns the consumer to `tp` alone.
    pub async fn fetch(&mut self, tp: &Tp, from: u64) -> Result<LiveFetch, LiveError> {
        let consumer = Arc::clone(&self.inner);
        let log_ends = Arc::clone(&self.log_ends);
        let (isolation, timeout, at) = (self.isolation, self.timeout, tp.clone());
        let group = self.group.clone();
        blocking(format!("fetch of {tp} from {from}"), move || {
            fetch_visible(&consumer, &group, &log_ends, isolation, &at, from, timeout)
        })
        .await
    }

    /// The consumer's position on `tp`: the offset it fetches next, if it has
    /// one.
    pub fn position(&self, tp: &Tp) -> Option<u64> {
        position_of(&self.inner, tp)
    }

    /// The group's committed offsets (with metadata) on `tps`, in order;
    /// `None` where the group has none.
    ///
    /// A `read_committed` consumer asks the broker for *stable* offsets
    /// (KIP-447): while a transaction with offsets for the group is open, the
    /// broker answers UNSTABLE_OFFSET_COMMIT and librdkafka retries until the
    /// transaction ends or the timeout passes. A `read_uncommitted` consumer
    /// gets the last committed offsets at once.
    ///
    /// A group the principal may not describe is [`LiveError::Coordinator`]
    /// as soon as the broker refuses its coordinator look-up. librdkafka
    /// reports that refusal once per consumer: after it, make a new consumer
    /// to ask again (this one's next look-up would wait out its timeout).
    pub async fn committed(&self, tps: &[Tp]) -> Result<Vec<Option<CommittedOffset>>, LiveError> {
        let consumer = Arc::clone(&self.inner);
        let (group, timeout, tps) = (self.group.clone(), self.timeout, tps.to_vec());
        blocking(
            format!("committed offsets of `{}`", self.group),
            move || committed_offsets(&consumer, &group, &tps, timeout, None),
        )
        .await
    }
}

fn position_of<C: ConsumerContext>(consumer: &BaseConsumer<C>, tp: &Tp) -> Option<u64> {
    let positions = consumer.position().ok()?;
    let element = positions.find_partition(tp.topic.as_str(), kafka_partition(tp))?;
    match element.offset() {
        Offset::Offset(offset) => our_offset(offset),
        _ => None,
    }
}

pub(crate) fn fetch_visible<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    group: &str,
    log_ends: &LogEnds,
    isolation: Isolation,
    tp: &Tp,
    from: u64,
    timeout: Duration,
) -> Result<LiveFetch, LiveError> {
    let marks = log_ends.watermarks(tp)?;
    if from > marks.high_watermark {
        return Err(LiveError::OffsetOutOfRange {
            tp: tp.clone(),
            offset: from,
            high_watermark: marks.high_watermark,
        });
    }
    let target = isolation.read_limit(marks.last_stable_offset, marks.high_watermark);
    let mut fetched = LiveFetch {
        records: Vec::new(),
        next_offset: from,
        high_watermark: marks.high_watermark,
        last_stable_offset: marks.last_stable_offset,
    };
    if from >= target {
        return Ok(fetched);
    }
    let failed = |source: KafkaError| LiveError::Fetch {
        tp: tp.clone(),
        from,
        source: Box::new(source),
    };
    let mut assignment = TopicPartitionList::with_capacity(1);
    assignment
        .add_partition_offset(
            tp.topic.as_str(),
            kafka_partition(tp),
            kafka_offset(tp, from)?,
        )
        .map_err(failed)?;
    consumer.assign(&assignment).map_err(failed)?;
    let deadline = Instant::now() + timeout;
    let outcome = loop {
        let position = position_of(consumer, tp);
        if let Some(position) = position.filter(|&position| position >= target) {
            fetched.next_offset = position;
            break Ok(fetched);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break Err(LiveError::FetchIncomplete {
                tp: tp.clone(),
                from,
                target,
                position,
                records: fetched.records.len(),
                timeout,
            });
        }
        match consumer.poll(left.min(Duration::from_millis(100))) {
            None | Some(Err(KafkaError::PartitionEOF(_))) => {}
            Some(Ok(message)) => {
                if message.topic() == tp.topic.as_str()
                    && message.partition() == kafka_partition(tp)
                {
                    fetched.records.push(consumed(&message));
                }
            }
            Some(Err(source)) if is_group_refusal(&source) => {
                break Err(LiveError::Coordinator {
                    group: group.to_owned(),
                    source: Box::new(source),
                })
            }
            Some(Err(source)) => break Err(failed(source)),
        }
    };
    // Stop fetching in the background; the next fetch assigns afresh.
    let _ = consumer.unassign();
    outcome
}

/// A fetched record as the core takes it. Its value and header values are
/// copied into one buffer and cut from it: one allocation for them, not one
/// a field, on the runtime's hottest path. The key gets its own: a state
/// slot keeps a key for as long as the slot lives, and must not keep its
/// record's value with it.
pub(crate) fn consumed(message: &BorrowedMessage<'_>) -> ConsumedRecord {
    let list = header_list(message);
    // SAFETY: the list lives as long as `message`, borrowed here.
    let headers = || unsafe { headers_of(list) };
    let key = message.key();
    let value = message.payload();
    let header_bytes: usize = headers()
        .map(|(_, value)| value.map_or(0, <[u8]>::len))
        .sum();
    let mut buffer = BytesMut::with_capacity(value.map_or(0, <[u8]>::len) + header_bytes);
    let mut cut = |bytes: &[u8]| {
        buffer.extend_from_slice(bytes);
        buffer.split().freeze()
    };
    let key = key.map(Bytes::copy_from_slice);
    let value = value.map(&mut cut);
    let headers = headers()
        .map(|(name, value)| Header {
            // The stamp header's name is the core's own: no copy.
            name: match name {
                Cow::Borrowed(STAMP_HEADER) => Cow::Borrowed(STAMP_HEADER),
                name => Cow::Owned(name.into_owned()),
            },
            // The core writes no null header values; read one as empty.
            value: value.map(&mut cut).unwrap_or_default(),
        })
        .collect();
    ConsumedRecord {
        offset: our_offset(message.offset()).unwrap_or(0),
        data: RecordData {
            key,
            value,
            headers,
            timestamp: message.timestamp().to_millis().unwrap_or(-1),
        },
    }
}

/// `message`'s header list, null when it has none.
fn header_list(message: &BorrowedMessage<'_>) -> *const rdsys::rd_kafka_headers_t {
    let mut list: *mut rdsys::rd_kafka_headers_t = std::ptr::null_mut();
    // SAFETY: the message is valid while borrowed; librdkafka parses its
    // headers once and keeps the list with the message.
    let found = unsafe { rdsys::rd_kafka_message_headers(message.ptr(), &mut list) };
    if found == rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
        list
    } else {
        std::ptr::null()
    }
}

/// The names and values of librdkafka's header list `list` (none when it
/// is null). Names are read lossily: Kafka's protocol does not check that
/// a header's name is UTF-8, and rust-rdkafka's own reader panics on one
/// that is not, where a record from another producer must never stop a
/// task unexplained (it would reach the core's checks, or pass through).
///
/// # Safety
/// `list` is null or a valid list that outlives `'a`.
unsafe fn headers_of<'a>(
    list: *const rdsys::rd_kafka_headers_t,
) -> impl Iterator<Item = (Cow<'a, str>, Option<&'a [u8]>)> {
    let count = if list.is_null() {
        0
    } else {
        // SAFETY: a valid list (the caller's promise).
        unsafe { rdsys::rd_kafka_header_cnt(list) }
    };
    (0..count).filter_map(move |index| {
        let (mut name, mut value, mut len) = (std::ptr::null(), std::ptr::null(), 0);
        // SAFETY: a valid list, and an index below its count.
        let found =
            unsafe { rdsys::rd_kafka_header_get_all(list, index, &mut name, &mut value, &mut len) };
        if found != rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR || name.is_null() {
            return None;
        }
        // SAFETY: librdkafka's names are NUL-terminated, its values `len`
        // bytes long, both kept with the list.
        let name = unsafe { CStr::from_ptr(name) }.to_string_lossy();
        let value = (!value.is_null())
            .then(|| unsafe { std::slice::from_raw_parts(value.cast::<u8>(), len) });
        Some((name, value))
    })
}

/// How often [`committed_offsets`] looks at the consumer's queue for a
/// refusal of its group while the look-up waits for the coordinator.
const REFUSAL_WATCH: Duration = Duration::from_millis(100);

/// The group's committed offsets on `tps` (OffsetFetch), within `timeout`.
///
/// The look-up needs the group's coordinator first (FindCoordinator). A
/// broker that refuses it (no ACL allows the principal to describe the
/// group) makes librdkafka retry for ever and put the refusal, once and
/// without the group's name, on the consumer's queue, not on the look-up:
/// so while the look-up waits, the queue of a consumer with nothing
/// assigned is watched, and that refusal ends the wait at once as
/// [`LiveError::Coordinator`] naming `group`, instead of a timeout. A
/// consumer with partitions assigned is not watched (its queue holds
/// records for its fetches).
///
/// `shared` is where the consumer's users keep a refusal one of them saw
/// (a stage's tasks share one consumer, and librdkafka reports the refusal
/// once per consumer): a refusal found here is recorded there, and one
/// recorded there ends this wait too, so every task of a refused stage
/// fails at once rather than one at once and the rest at their timeout.
pub(crate) fn committed_offsets<C: ConsumerContext + 'static>(
    consumer: &Arc<BaseConsumer<C>>,
    group: &str,
    tps: &[Tp],
    timeout: Duration,
    shared: Option<&SharedRefusal>,
) -> Result<Vec<Option<CommittedOffset>>, LiveError> {
    let failed = |source: KafkaError| LiveError::Committed {
        group: group.to_owned(),
        tps: tps.to_vec(),
        source: Box::new(source),
    };
    let mut list = TopicPartitionList::with_capacity(tps.len());
    for tp in tps {
        list.add_partition(tp.topic.as_str(), kafka_partition(tp));
    }
    let (reply, answered) = std::sync::mpsc::sync_channel(1);
    let asking = Arc::clone(consumer);
    std::thread::Builder::new()
        .name("parsley offset fetch".into())
        .spawn(move || {
            // After a refusal nobody listens; the call ends at its timeout.
            let _ = reply.send(asking.committed_offsets(list, timeout));
        })
        .map_err(|error| LiveError::Join {
            what: format!("reading the committed offsets of group `{group}`"),
            source: JoinFailure::Spawn(error),
        })?;
    let watch = consumer
        .assignment()
        .is_ok_and(|assigned| assigned.count() == 0);
    let answer = loop {
        match answered.recv_timeout(REFUSAL_WATCH) {
            Ok(answer) => break answer.map_err(failed)?,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                let seen = shared.and_then(|shared| {
                    shared
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .clone()
                        .filter(is_group_refusal)
                });
                if let Some(error) = seen {
                    return Err(LiveError::Coordinator {
                        group: group.to_owned(),
                        source: Box::new(error),
                    });
                }
                if watch {
                    if let Some((refused, error)) = group_refusal(consumer, group) {
                        if let Some(shared) = shared {
                            shared
                                .lock()
                                .unwrap_or_else(std::sync::PoisonError::into_inner)
                                .get_or_insert(error);
                        }
                        return Err(refused);
                    }
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err(LiveError::Join {
                    what: format!("reading the committed offsets of group `{group}`"),
                    source: JoinFailure::Panicked,
                })
            }
        }
    };
    tps.iter()
        .map(|tp| {
            let Some(element) = answer.find_partition(tp.topic.as_str(), kafka_partition(tp))
            else {
                return Ok(None);
            };
            element.error().map_err(failed)?;
            Ok(match element.offset() {
                Offset::Offset(offset) => our_offset(offset)
                    .map(|offset| CommittedOffset::new(offset, element.metadata())),
                _ => None,
            })
        })
        .collect()
}

/// True when a consumer's poll returned the broker's refusal of its
/// group: librdkafka's coordinator look-up (FindCoordinator) answered
/// GROUP_AUTHORIZATION_FAILED.
pub(crate) fn is_group_refusal(error: &KafkaError) -> bool {
    error.rdkafka_error_code() == Some(RDKafkaErrorCode::GroupAuthorizationFailed)
}

/// The refusal of `group` waiting on the queue of `consumer`, which has
/// nothing assigned, if there is one; other events it drains are dropped
/// (librdkafka retries what they report by itself).
fn group_refusal<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    group: &str,
) -> Option<(LiveError, KafkaError)> {
    for _ in 0..32 {
        let polled = consumer.poll(Duration::ZERO)?;
        if let Some(error) = polled.err().filter(is_group_refusal) {
            let refused = LiveError::Coordinator {
                group: group.to_owned(),
                source: Box::new(error.clone()),
            };
            return Some((refused, error));
        }
    }
    None
}

/// A refusal of a consumer's group, kept where every user of the consumer
/// sees it ([`committed_offsets`]).
pub(crate) type SharedRefusal = std::sync::Mutex<Option<KafkaError>>;

#[cfg(test)]
mod tests {
    use super::*;

    /// A header list with `headers`, names given as raw bytes.
    fn list_of(headers: &[(&[u8], Option<&[u8]>)]) -> *mut rdsys::rd_kafka_headers_t {
        // SAFETY: a fresh list; every name and value pointer is valid for
        // its length (librdkafka copies them).
        unsafe {
            let list = rdsys::rd_kafka_headers_new(headers.len());
            for (name, value) in headers {
                let (value_ptr, value_len) = match value {
                    Some(value) => (value.as_ptr().cast(), value.len() as isize),
                    None => (std::ptr::null(), 0),
                };
                let added = rdsys::rd_kafka_header_add(
                    list,
                    name.as_ptr().cast(),
                    name.len() as isize,
                    value_ptr,
                    value_len,
                );
                assert_eq!(
                    added,
                    rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR
                );
            }
            list
        }
    }

    /// §8: a header whose name is not UTF-8 (Kafka does not check it) is
    /// read, its name lossily, beside the others: no panic (rust-rdkafka's
    /// own reader unwraps it), no header dropped.
    #[test]
    fn a_header_name_that_is_not_utf8_is_read_lossily() {
        let list = list_of(&[
            (STAMP_HEADER.as_bytes(), Some(&[1, 2, 3])),
            (&[0x66, 0xff, 0x6f], Some(b"v")),
            (b"empty", None),
        ]);
        // SAFETY: the list lives until destroyed below.
        let read: Vec<(String, Option<Vec<u8>>)> = unsafe { headers_of(list) }
            .map(|(name, value)| (name.into_owned(), value.map(<[u8]>::to_vec)))
            .collect();
        // SAFETY: made above, destroyed once.
        unsafe { rdsys::rd_kafka_headers_destroy(list) };
        assert_eq!(
            read,
            vec![
                (STAMP_HEADER.to_owned(), Some(vec![1, 2, 3])),
                ("f\u{fffd}o".to_owned(), Some(b"v".to_vec())),
                ("empty".to_owned(), None),
            ]
        );
    }

    /// A message without headers has none: a null list reads as empty.
    #[test]
    fn a_null_header_list_is_empty() {
        // SAFETY: null is allowed.
        assert_eq!(unsafe { headers_of(std::ptr::null()) }.count(), 0);
    }
}
