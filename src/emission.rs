//! The plain values logic works with: [`Record`] in, [`Emission`], [`Step`]
//! and [`Tick`] out (S4). All compare with `==` and print with `{:?}`, so
//! logic is tested with `assert_eq!` and no runtime.

use std::cell::Cell;
use std::fmt;

use bytes::Bytes;

use crate::codec::CodecError;
use crate::tp::TopicName;

/// A record that logic asks to send. Made by [`crate::Topic::send`] (or
/// [`crate::Topic::tombstone`], a record with a null value); holds the
/// encoded key and value, so two emissions are equal when they would put the
/// same bytes on the same topic.
#[derive(Clone, PartialEq, Eq)]
pub struct Emission {
    topic: TopicName,
    encoded: Result<(Option<Bytes>, Option<Bytes>), CodecError>,
    /// The record's timestamp when an operator sets its own (W4: a
    /// window's highest record timestamp); `None`: the delivery's.
    timestamp: Option<i64>,
}

impl Emission {
    pub(crate) fn new(
        topic: TopicName,
        encoded: Result<(Option<Bytes>, Bytes), CodecError>,
    ) -> Self {
        Emission {
            topic,
            encoded: encoded.map(|(key, value)| (key, Some(value))),
            timestamp: None,
        }
    }

    /// A record with a null value (a tombstone) under `key`, or the key
    /// codec's refusal.
    pub(crate) fn tombstone(topic: TopicName, key: Result<Option<Bytes>, CodecError>) -> Self {
        Emission {
            topic,
            encoded: key.map(|key| (key, None)),
            timestamp: None,
        }
    }

    /// The same record written with `timestamp` instead of the
    /// delivery's: an operator's choice (W4, W5), not the user's.
    pub(crate) fn at(mut self, timestamp: i64) -> Self {
        self.timestamp = Some(timestamp);
        self
    }

    /// The timestamp the record is written with, when it is not the
    /// delivery's (W4, W5).
    pub fn timestamp(&self) -> Option<i64> {
        self.timestamp
    }

    /// The topic the emission goes to.
    pub fn topic(&self) -> &TopicName {
        &self.topic
    }

    /// The encoded key and value (`None`: a null value, a tombstone), or
    /// the codec's refusal.
    pub fn encoded(&self) -> Result<(Option<&Bytes>, Option<&Bytes>), &CodecError> {
        match &self.encoded {
            Ok((key, value)) => Ok((key.as_ref(), value.as_ref())),
            Err(error) => Err(error),
        }
    }

    /// Whether the emission is a tombstone: a record with a null value.
    pub fn is_tombstone(&self) -> bool {
        matches!(&self.encoded, Ok((_, None)))
    }

    /// The topic and the encoded key and value, taken out without copying,
    /// or the codec's refusal.
    pub(crate) fn into_encoded(
        self,
    ) -> Result<(TopicName, Option<Bytes>, Option<Bytes>), CodecError> {
        let (key, value) = self.encoded?;
        Ok((self.topic, key, value))
    }
}

/// Renders bytes as text when they are text (JSON and UTF-8 codecs), else
/// hex, and an operator's own timestamp as `@<ms>`.
impl fmt::Debug for Emission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.fmt_record(f)?;
        match self.timestamp {
            Some(timestamp) => write!(f, "@{timestamp}"),
            None => Ok(()),
        }
    }
}

impl Emission {
    fn fmt_record(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.encoded {
            Ok((key, value)) => {
                let key = key.as_ref().map_or_else(
                    || "None".to_string(),
                    |key| crate::text::bytes_for_humans(key),
                );
                match value {
                    Some(value) => write!(
                        f,
                        "{}.send({}, {})",
                        self.topic,
                        key,
                        crate::text::bytes_for_humans(value)
                    ),
                    None => write!(f, "{}.tombstone({})", self.topic, key),
                }
            }
            Err(error) => write!(f, "{}.send(<{error}>)", self.topic),
        }
    }
}

impl fmt::Display for Emission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// What a fold returns: the slot's new state (`None` deletes the slot, which
/// then reads as the initial value again) and the emissions.
#[derive(Clone, Debug, PartialEq)]
pub struct Step<S> {
    /// The slot's new state; `None` deletes the slot (S2, T7).
    pub state: Option<S>,
    /// The records to send, in order.
    pub emissions: Vec<Emission>,
}

impl<S> Step<S> {
    /// The slot becomes `state`, nothing is emitted.
    pub fn of(state: S) -> Self {
        Step {
            state: Some(state),
            emissions: Vec::new(),
        }
    }

    /// The slot is deleted.
    pub fn delete() -> Self {
        Step {
            state: None,
            emissions: Vec::new(),
        }
    }

    /// Adds an emission.
    pub fn emit(mut self, emission: Emission) -> Self {
        if self.emissions.capacity() == 0 {
            self.emissions = spare_emissions();
        }
        self.emissions.push(emission);
        self
    }

    /// Adds every emission of `emissions`, in order, after those already
    /// added: for a list the logic computes (one record per line of an
    /// order, say), where [`emit`](Self::emit) adds one.
    ///
    /// ```
    /// use parsley::{Step, Topic, Utf8, I64};
    ///
    /// let lines: Topic<String, i64> = Topic::with_codecs("lines", Utf8, I64);
    /// let amounts = [30, 12, 5];
    /// let step = Step::of(amounts.len())
    ///     .emit_all(amounts.iter().map(|amount| lines.send("order-7".to_string(), *amount)));
    /// assert_eq!(step.emissions.len(), 3);
    /// assert_eq!(step.emissions[1], lines.send("order-7".to_string(), 12));
    /// ```
    pub fn emit_all(mut self, emissions: impl IntoIterator<Item = Emission>) -> Self {
        if self.emissions.capacity() == 0 {
            self.emissions = spare_emissions();
        }
        self.emissions.extend(emissions);
        self
    }
}

/// The most emissions a list kept for reuse may have room for.
const SPARE_EMISSIONS_MAX: usize = 64;

thread_local! {
    /// One emptied list of emissions per thread: a task empties every step's
    /// list, and the next step's first emission takes it instead of
    /// allocating one.
    static SPARE_EMISSIONS: Cell<Vec<Emission>> = const { Cell::new(Vec::new()) };
}

fn spare_emissions() -> Vec<Emission> {
    SPARE_EMISSIONS.take()
}

/// Keeps `emissions`' room (emptied) for the next step on this thread.
pub(crate) fn recycle_emissions(mut emissions: Vec<Emission>) {
    if emissions.capacity() <= SPARE_EMISSIONS_MAX {
        emissions.clear();
        SPARE_EMISSIONS.set(emissions);
    }
}

/// A delivered tick: the wall-clock time at which the task emitted it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Tick {
    /// Milliseconds since the Unix epoch.
    pub timestamp: i64,
}

impl Tick {
    /// A tick emitted at `timestamp`, milliseconds since the Unix epoch. For testing tick logic.
    pub fn new(timestamp: i64) -> Self {
        Tick { timestamp }
    }
}

/// A delivered record, decoded with its topic's codecs. Read its parts
/// with its methods (`record.value()`, `record.key()`, ...), the same way
/// in a stage's fold, a window's aggregator, a join's joiner and a test.
#[derive(Clone, Debug, PartialEq)]
pub struct Record<K, V> {
    pub(crate) key: Option<K>,
    pub(crate) value: V,
    pub(crate) timestamp: i64,
    pub(crate) topic: TopicName,
    pub(crate) partition: u32,
    pub(crate) offset: u64,
}

impl<K, V> Record<K, V> {
    /// A record of `key` and `value` at `timestamp` (milliseconds since the
    /// Unix epoch), read from `topic`'s `partition` at `offset`: what a
    /// driver delivers, and what a test of a stage's logic passes it.
    pub fn new(
        key: Option<K>,
        value: V,
        timestamp: i64,
        topic: impl Into<TopicName>,
        partition: u32,
        offset: u64,
    ) -> Self {
        Record {
            key,
            value,
            timestamp,
            topic: topic.into(),
            partition,
            offset,
        }
    }

    /// The key, if not null.
    pub fn key(&self) -> Option<&K> {
        self.key.as_ref()
    }

    /// The value.
    pub fn value(&self) -> &V {
        &self.value
    }

    /// The record's timestamp, milliseconds since the Unix epoch.
    pub fn timestamp(&self) -> i64 {
        self.timestamp
    }

    /// The topic it was read from.
    pub fn topic(&self) -> &TopicName {
        &self.topic
    }

    /// The partition it was read from.
    pub fn partition(&self) -> u32 {
        self.partition
    }

    /// Its offset in that partition.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The key and the value, taken out of the record.
    pub fn into_key_value(self) -> (Option<K>, V) {
        (self.key, self.value)
    }

    /// The value, taken out of the record.
    pub fn into_value(self) -> V {
        self.value
    }

    /// The record with its value mapped by `f`, its key, timestamp and
    /// position kept.
    pub fn map_value<W>(self, f: impl FnOnce(V) -> W) -> Record<K, W> {
        Record {
            key: self.key,
            value: f(self.value),
            timestamp: self.timestamp,
            topic: self.topic,
            partition: self.partition,
            offset: self.offset,
        }
    }
}
