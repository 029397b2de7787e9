//! Typed input and output handles, like Kafka Streams' `TestInputTopic` and
//! `TestOutputTopic`.

use std::collections::HashMap;
use std::fmt::{self, Debug, Write};
use std::hash::Hash;
use std::sync::Arc;

use bytes::Bytes;
use parsley::header::{self, STAMP_HEADER};
use parsley::partition_for;
use parsley::{Header, RecordData};
use parsley::{Stamp, Topic, Tp};

use crate::driver::error::DriverError;
use crate::driver::keys::{IntoKey, IntoValue};
use crate::driver::world::World;
use crate::driver::Shared;
use crate::model::LogId;

/// A record to pipe, with optional timestamp, partition and stamp.
#[derive(Clone, Debug, PartialEq)]
pub struct TestRecord<K, V> {
    /// The key; `None` for a null key.
    pub key: Option<K>,
    /// The value.
    pub value: V,
    /// Defaults to the driver's wall clock.
    pub timestamp: Option<i64>,
    /// Defaults to Kafka's partitioner over the key (partition 0 for no key).
    pub partition: Option<u32>,
    /// A stamp for the record's header, as a CausalClock would write it.
    pub stamp: Option<Stamp>,
}

impl<K, V> TestRecord<K, V> {
    /// A record with `key` and `value`, stamped with the wall clock,
    /// partitioned like a producer would. The key may be a `K`, an
    /// `Option<K>` or, for `String` keys, a `&str` ([`IntoKey`]); the value
    /// a `V` or, for `String` values, a `&str` ([`IntoValue`]).
    pub fn new(key: impl IntoKey<K>, value: impl IntoValue<V>) -> Self {
        TestRecord {
            key: key.into_key(),
            value: value.into_value(),
            timestamp: None,
            partition: None,
            stamp: None,
        }
    }

    /// Sets the record timestamp, milliseconds since the epoch.
    pub fn at(mut self, timestamp: i64) -> Self {
        self.timestamp = Some(timestamp);
        self
    }

    /// Puts the record on `partition` instead of the partitioner's choice.
    pub fn partition(mut self, partition: u32) -> Self {
        self.partition = Some(partition);
        self
    }

    /// Gives the record a stamp header, as if a stamped producer wrote it.
    pub fn stamped(mut self, stamp: Stamp) -> Self {
        self.stamp = Some(stamp);
        self
    }
}

/// Pipes typed records into a source topic. Each pipe is processed
/// synchronously to quiescence and committed.
pub struct TestInputTopic<K, V> {
    pub(crate) topic: Topic<K, V>,
    pub(crate) world: Arc<Shared>,
    /// Per partition, where its log is in the model (`None`: the model has
    /// no such topic), looked up once: the model's topics never change
    /// their partitions.
    pub(crate) logs: Option<Vec<LogId>>,
}

impl<K: 'static, V: 'static> TestInputTopic<K, V> {
    /// Pipes one record with `key` and `value`, processes to quiescence and
    /// commits; returns the tp it landed on. Like Kafka Streams'
    /// `pipeInput(key, value)`: the key may be a `K`, an `Option<K>` (`None`
    /// for a null key) or, for `String` keys, a `&str` ([`IntoKey`]); the
    /// value a `V` or, for `String` values, a `&str` ([`IntoValue`]). So on a
    /// `Topic<String, i64>`, `pipe("alice", 5)`, `pipe("alice".to_string(),
    /// 5)` and `pipe(None, 5)` all compile.
    pub fn pipe(&self, key: impl IntoKey<K>, value: impl IntoValue<V>) -> Result<Tp, DriverError> {
        self.pipe_record(TestRecord::new(key, value))
            .map(|(tp, _)| tp)
    }

    /// Pipes one record; returns where it landed.
    pub fn pipe_record(&self, record: TestRecord<K, V>) -> Result<(Tp, u64), DriverError> {
        let mut world = self.world.lock();
        let landed = self.append(&mut world, record)?;
        world.run()?;
        Ok(landed)
    }

    /// Pipes many records, then processes them together to quiescence (one
    /// commit per task instead of one per record).
    pub fn pipe_all(
        &self,
        records: impl IntoIterator<Item = TestRecord<K, V>>,
    ) -> Result<(), DriverError> {
        let mut world = self.world.lock();
        for record in records {
            self.append(&mut world, record)?;
        }
        world.run()
    }

    fn append(
        &self,
        world: &mut World,
        record: TestRecord<K, V>,
    ) -> Result<(Tp, u64), DriverError> {
        let name = self.topic.name().as_str();
        let (key, value) = self
            .topic
            .encode(record.key.as_ref(), &record.value)
            .map_err(|refused| DriverError::InputCodec {
                topic: name.to_string(),
                part: refused.part.name(),
                error: refused.error,
            })?;
        let logs = self
            .logs
            .as_deref()
            .ok_or_else(|| DriverError::UnknownTopic {
                topic: name.to_string(),
            })?;
        let partitions = logs.len() as u32;
        let partition = record
            .partition
            .unwrap_or_else(|| partition_for(key.as_deref(), partitions, 0));
        if partition >= partitions {
            return Err(DriverError::NoSuchPartition {
                topic: name.to_string(),
                partition,
                partitions,
            });
        }
        let headers = record
            .stamp
            .map(|stamp| vec![header::stamp_header(&stamp)])
            .unwrap_or_default();
        let data = RecordData {
            key,
            value: Some(value),
            headers,
            timestamp: record.timestamp.unwrap_or(world.now),
        };
        let offset = world.cluster.append_at(logs[partition as usize], data);
        Ok((self.topic.tp(partition), offset))
    }

    /// Pipes a tombstone for `key`: a record with a null value, which
    /// deletes the key's row of a table (a stream–table join's, J1), as
    /// Kafka Streams' `pipeInput(key, null)` does. It goes where the key's
    /// records go, stamped with the wall clock; then the application runs.
    pub fn pipe_tombstone(&self, key: impl IntoKey<K>) -> Result<(Tp, u64), DriverError> {
        self.tombstone(key, None)
    }

    /// Pipes a tombstone for `key` at `timestamp`, as Kafka Streams'
    /// `pipeInput(key, null, timestamp)` does: what a versioned table
    /// (J16) keeps as the version that ends a key's row at that time.
    pub fn pipe_tombstone_at(
        &self,
        key: impl IntoKey<K>,
        timestamp: i64,
    ) -> Result<(Tp, u64), DriverError> {
        self.tombstone(key, Some(timestamp))
    }

    fn tombstone(
        &self,
        key: impl IntoKey<K>,
        timestamp: Option<i64>,
    ) -> Result<(Tp, u64), DriverError> {
        let name = self.topic.name().as_str();
        let key = key
            .into_key()
            .map(|key| self.topic.key_codec().encode(&key))
            .transpose()
            .map_err(|error| DriverError::InputCodec {
                topic: name.to_string(),
                part: "key",
                error,
            })?;
        let logs = self
            .logs
            .as_deref()
            .ok_or_else(|| DriverError::UnknownTopic {
                topic: name.to_string(),
            })?;
        let partition = partition_for(key.as_deref(), logs.len() as u32, 0);
        let mut world = self.world.lock();
        let data = RecordData {
            key,
            value: None,
            headers: Vec::new(),
            timestamp: timestamp.unwrap_or(world.now),
        };
        let offset = world.cluster.append_at(logs[partition as usize], data);
        world.run()?;
        Ok((self.topic.tp(partition), offset))
    }

    /// Appends raw bytes, bypassing the codecs: for tests of bad input.
    pub fn pipe_raw(
        &self,
        partition: u32,
        key: Option<Bytes>,
        value: Option<Bytes>,
        headers: Vec<Header>,
    ) -> Result<(Tp, u64), DriverError> {
        let tp = self.topic.tp(partition);
        let mut world = self.world.lock();
        let timestamp = world.now;
        let offset = world.cluster.append(
            &tp,
            RecordData {
                key,
                value,
                headers,
                timestamp,
            },
        )?;
        world.run()?;
        Ok((tp, offset))
    }
}

/// A committed output record with its stamp.
#[derive(Clone, Debug, PartialEq)]
pub struct OutputRecord<K, V> {
    /// The key; `None` for a null key.
    pub key: Option<K>,
    /// The value.
    pub value: V,
    /// The record timestamp, milliseconds since the epoch.
    pub timestamp: i64,
    /// Where it was committed.
    pub tp: Tp,
    /// Its offset.
    pub offset: u64,
    /// Its stamp (empty when it has no stamp header).
    pub stamp: Stamp,
}

/// Reads what was committed to a topic, `read_committed`, in two ways:
///
/// - **Consuming reads**, like Kafka Streams' `TestOutputTopic`: the driver
///   keeps one queue per topic, as a TopologyTestDriver does, of the
///   records committed to it and not consumed yet, and
///   [`read_value`](Self::read_value), [`read_key_value`](Self::read_key_value),
///   [`read_record`](Self::read_record), the `read_*_to_list`/`_to_map` reads
///   and [`read_new`](Self::read_new) take records off it;
///   [`is_empty`](Self::is_empty) and [`queue_size`](Self::queue_size) look
///   at it. Every handle of a topic reads the same queue: a record one
///   handle consumed is gone for the others, so a helper that opens the
///   output anew reads on from where the test left off.
/// - **Non-consuming reads**: [`read_all`](Self::read_all),
///   [`read_values`](Self::read_values) and [`render`](Self::render) always
///   see everything committed to the topic, from its first record, and leave
///   the queue as it is.
///
/// ```
/// use parsley::{Parsley, Stage, Topic};
/// use parsley_sim::TestDriver;
///
/// let words: Topic<String, i64> = Topic::new("words");
/// let echoes: Topic<String, i64> = Topic::new("echoes");
/// let out = echoes.clone();
/// let echo = Stage::named("echo")
///     .on(&words, move |word| vec![out.send(word.key().cloned(), *word.value())])
///     .into(&echoes)
///     .build();
/// let driver = TestDriver::new(&Parsley::named("echo").stage(echo).build()?)?;
/// let output = driver.output(&echoes)?;
/// driver.input(&words)?.pipe("a", 1)?;
/// driver.input(&words)?.pipe("b", 2)?;
/// assert_eq!(output.read_value()?, 1);                          // consumes a
/// assert_eq!(output.read_key_value()?, (Some("b".to_string()), 2)); // consumes b
/// assert!(output.is_empty());
/// assert!(output.read_value().is_err());                        // nothing left
/// assert_eq!(output.read_values()?, [1, 2]);                    // non-consuming
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct TestOutputTopic<K, V> {
    pub(crate) topic: Topic<K, V>,
    pub(crate) world: Arc<Shared>,
    /// Per partition, where its log is in the model.
    pub(crate) logs: Vec<LogId>,
}

impl<K: 'static, V: 'static> TestOutputTopic<K, V> {
    /// Every committed record, across partitions in the order they were
    /// written. Non-consuming: it reads from the topic's first record each
    /// time and leaves this handle's queue as it is.
    pub fn read_all(&self) -> Result<Vec<OutputRecord<K, V>>, DriverError> {
        let partitions = self.logs.len();
        self.read_from(&vec![0; partitions], &mut Vec::new())
    }

    /// The committed values, in write order. Non-consuming, like
    /// [`read_all`](Self::read_all): every call returns every value
    /// committed so far; [`read_values_to_list`](Self::read_values_to_list)
    /// is the consuming read (Kafka Streams' `readValuesToList`).
    pub fn read_values(&self) -> Result<Vec<V>, DriverError> {
        Ok(self
            .read_all()?
            .into_iter()
            .map(|record| record.value)
            .collect())
    }

    /// Consumes every record in the topic's queue: the committed records
    /// not returned by an earlier consuming read, in the order they were
    /// written (Kafka Streams' `readRecordsToList`). Costs what it returns:
    /// each call reads on from where the last one stopped, like a consumer's
    /// position. A record that does not decode fails the read, and the next
    /// read starts where this one did.
    pub fn read_new(&self) -> Result<Vec<OutputRecord<K, V>>, DriverError> {
        self.consume_all()
    }

    /// The same as [`read_new`](Self::read_new), under Kafka Streams' name.
    #[doc(alias = "readRecordsToList")]
    pub fn read_records_to_list(&self) -> Result<Vec<OutputRecord<K, V>>, DriverError> {
        self.read_new()
    }

    /// Consumes the next record of this handle's queue (Kafka Streams'
    /// `readRecord`). An empty queue is an error,
    /// [`DriverError::NoRecordToRead`], as Kafka Streams throws
    /// `NoSuchElementException`: check [`is_empty`](Self::is_empty) first
    /// when an empty queue is expected.
    #[doc(alias = "readRecord")]
    pub fn read_record(&self) -> Result<OutputRecord<K, V>, DriverError> {
        self.consume_next()?
            .ok_or_else(|| DriverError::NoRecordToRead {
                topic: self.topic.name().to_string(),
            })
    }

    /// Consumes the next record and returns its value (Kafka Streams'
    /// `readValue`); [`DriverError::NoRecordToRead`] when the queue is empty.
    #[doc(alias = "readValue")]
    pub fn read_value(&self) -> Result<V, DriverError> {
        Ok(self.read_record()?.value)
    }

    /// Consumes the next record and returns its key (`None` for a null
    /// key) and value (Kafka Streams' `readKeyValue`);
    /// [`DriverError::NoRecordToRead`] when the queue is empty.
    #[doc(alias = "readKeyValue")]
    pub fn read_key_value(&self) -> Result<(Option<K>, V), DriverError> {
        let record = self.read_record()?;
        Ok((record.key, record.value))
    }

    /// Consumes every record of the queue and returns their values, in write
    /// order (Kafka Streams' `readValuesToList`); empty when the queue is.
    #[doc(alias = "readValuesToList")]
    pub fn read_values_to_list(&self) -> Result<Vec<V>, DriverError> {
        Ok(self
            .consume_all()?
            .into_iter()
            .map(|record| record.value)
            .collect())
    }

    /// Consumes every record of the queue and returns their keys and values,
    /// in write order (Kafka Streams' `readKeyValuesToList`).
    #[doc(alias = "readKeyValuesToList")]
    pub fn read_key_values_to_list(&self) -> Result<Vec<(Option<K>, V)>, DriverError> {
        Ok(self
            .consume_all()?
            .into_iter()
            .map(|record| (record.key, record.value))
            .collect())
    }

    /// Every committed record, tombstones included (`None`: a record with
    /// a null value, which a table–table join writes when a key loses its
    /// result, J8), across partitions in the order they were written; Kafka
    /// Streams' `readRecordsToList` on a table's output, where a tombstone's
    /// value is `null`. Non-consuming, like [`read_all`](Self::read_all),
    /// which refuses a tombstone as a value its codec cannot decode.
    pub fn read_changes(&self) -> Result<Vec<OutputRecord<K, Option<V>>>, DriverError> {
        let world = self.world.lock();
        let mut sequenced = Vec::new();
        for (partition, &log_id) in self.logs.iter().enumerate() {
            let log = world.cluster.log_at(log_id);
            let tp = self.topic.tp(partition as u32);
            for offset in log.committed_offsets(0, log.last_stable_offset()) {
                let data = log
                    .record(offset)
                    .expect("a committed offset holds a record");
                let change = match &data.value {
                    Some(_) => {
                        let record = self.decode(&tp, offset, data)?;
                        OutputRecord {
                            key: record.key,
                            value: Some(record.value),
                            timestamp: record.timestamp,
                            tp: record.tp,
                            offset,
                            stamp: record.stamp,
                        }
                    }
                    None => {
                        let key = data
                            .key
                            .as_ref()
                            .map(|key| self.topic.key_codec().decode(key))
                            .transpose()
                            .map_err(|error| DriverError::OutputCodec {
                                tp: tp.clone(),
                                offset,
                                part: parsley::RecordPart::Key.name(),
                                error,
                            })?;
                        OutputRecord {
                            key,
                            value: None,
                            timestamp: data.timestamp,
                            tp: tp.clone(),
                            offset,
                            stamp: Self::stamp_of(&tp, offset, data)?,
                        }
                    }
                };
                sequenced.push((log.sequence(offset).unwrap_or(u64::MAX), change));
            }
        }
        sequenced.sort_by_key(|(sequence, _)| *sequence);
        Ok(sequenced.into_iter().map(|(_, record)| record).collect())
    }

    /// The topic read as a table: for each key, the value of its latest
    /// committed record, and no entry for a key whose latest record is a
    /// tombstone (J1's reading of a table, applied to
    /// [`read_changes`](Self::read_changes)). Records with a null key are
    /// not part of a table and are left out. Non-consuming.
    pub fn read_table(&self) -> Result<HashMap<K, V>, DriverError>
    where
        K: Eq + Hash,
    {
        let mut table = HashMap::new();
        for record in self.read_changes()? {
            let Some(key) = record.key else { continue };
            match record.value {
                Some(value) => table.insert(key, value),
                None => table.remove(&key),
            };
        }
        Ok(table)
    }

    /// Consumes every record of the queue into a map from key to the last
    /// value written under it (Kafka Streams' `readKeyValuesToMap`: a later
    /// record replaces an earlier one of the same key). A record with a null
    /// key cannot go in the map: the read is refused with
    /// [`DriverError::NullKeyInMap`] and consumes nothing (Kafka Streams
    /// throws `IllegalStateException`).
    #[doc(alias = "readKeyValuesToMap")]
    pub fn read_key_values_to_map(&self) -> Result<HashMap<K, V>, DriverError>
    where
        K: Eq + Hash,
    {
        let mut world = self.world.lock();
        let (records, next) = self.unread(&world)?;
        if let Some(record) = records.iter().find(|record| record.key.is_none()) {
            return Err(DriverError::NullKeyInMap {
                tp: record.tp.clone(),
                offset: record.offset,
            });
        }
        self.set_positions(&mut world, next);
        Ok(records
            .into_iter()
            .filter_map(|record| Some((record.key?, record.value)))
            .collect())
    }

    /// How many records the topic's queue holds: committed and not
    /// consumed yet by any handle of the topic (Kafka Streams'
    /// `getQueueSize`). Counts without decoding, so it never fails.
    #[doc(alias = "getQueueSize")]
    pub fn queue_size(&self) -> usize {
        let world = self.world.lock();
        self.positions(&world)
            .iter()
            .zip(&self.logs)
            .map(|(&position, &log)| {
                let log = world.cluster.log_at(log);
                log.committed_offsets(position, log.last_stable_offset().max(position))
                    .filter(|&offset| !is_progress_at(&log, offset))
                    .count()
            })
            .sum()
    }

    /// Whether the topic's queue is empty: every committed record was
    /// consumed (Kafka Streams' `isEmpty`).
    #[doc(alias = "isEmpty")]
    pub fn is_empty(&self) -> bool {
        self.queue_size() == 0
    }

    /// Every committed record, rendered one per line for snapshots (see
    /// [`render_records`]): `tp@offset  key …  value …  stamp {…}`, keys and
    /// values decoded and printed with `Debug`. Non-consuming.
    ///
    /// ```
    /// use parsley::{Parsley, Stage, Topic};
    /// use parsley_sim::TestDriver;
    ///
    /// let words: Topic<String, i64> = Topic::new("words");
    /// let echoes: Topic<String, i64> = Topic::new("echoes");
    /// let out = echoes.clone();
    /// let echo = Stage::named("echo")
    ///     .on(&words, move |word| vec![out.send(word.key().cloned(), *word.value())])
    ///     .into(&echoes)
    ///     .build();
    /// let driver = TestDriver::new(&Parsley::named("echo").stage(echo).build()?)?;
    /// driver.input(&words)?.pipe("a", 1)?;
    /// driver.input(&words)?.pipe(None, 2)?;
    /// assert_eq!(
    ///     driver.output(&echoes)?.render()?,
    ///     "echoes-0@0  key \"a\"  value 1  stamp {words-0@0}\n\
    ///      echoes-0@2  key null  value 2  stamp {words-0@1}\n"
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn render(&self) -> Result<String, DriverError>
    where
        K: Debug,
        V: Debug,
    {
        Ok(render_records(&self.read_all()?))
    }

    /// Where the topic's queue stands, per partition: where its next
    /// consuming read starts.
    fn positions<'w>(&self, world: &'w World) -> std::borrow::Cow<'w, [u64]> {
        match world.read_positions.get(self.topic.name().as_str()) {
            Some(positions) => std::borrow::Cow::Borrowed(positions),
            None => std::borrow::Cow::Owned(vec![0; self.logs.len()]),
        }
    }

    /// Moves the topic's queue to `next`.
    fn set_positions(&self, world: &mut World, next: Vec<u64>) {
        match world.read_positions.get_mut(self.topic.name().as_str()) {
            Some(positions) => *positions = next,
            None => {
                world
                    .read_positions
                    .insert(self.topic.name().to_string(), next);
            }
        }
    }

    /// The records in the topic's queue, in the order they were written,
    /// and where the queue stands once they are consumed; the queue itself
    /// is left as it is.
    fn unread(&self, world: &World) -> Result<Unread<K, V>, DriverError> {
        let positions = self.positions(world);
        let mut next = Vec::with_capacity(positions.len());
        let records = self.read_in(world, &positions, &mut next)?;
        Ok((records, next))
    }

    /// Consumes every record of the topic's queue. A record that does not
    /// decode fails the read and leaves the queue as it was.
    fn consume_all(&self) -> Result<Vec<OutputRecord<K, V>>, DriverError> {
        let mut world = self.world.lock();
        let (records, next) = self.unread(&world)?;
        self.set_positions(&mut world, next);
        Ok(records)
    }

    /// Consumes the first record of the topic's queue (the first written,
    /// across partitions), decoding only it; `None` when the queue is empty.
    fn consume_next(&self) -> Result<Option<OutputRecord<K, V>>, DriverError> {
        let mut world = self.world.lock();
        let positions = self.positions(&world);
        let mut first: Option<(u64, usize, u64)> = None;
        for (partition, &position) in positions.iter().enumerate() {
            let log = world.cluster.log_at(self.logs[partition]);
            let stable = log.last_stable_offset();
            if stable <= position {
                continue;
            }
            if let Some(offset) = log
                .committed_offsets(position, stable)
                .find(|&offset| !is_progress_at(&log, offset))
            {
                let sequence = log.sequence(offset).unwrap_or(u64::MAX);
                if first.is_none_or(|(earliest, _, _)| sequence < earliest) {
                    first = Some((sequence, partition, offset));
                }
            }
        }
        let Some((_, partition, offset)) = first else {
            return Ok(None);
        };
        let log = world.cluster.log_at(self.logs[partition]);
        let data = log
            .record(offset)
            .expect("a committed offset holds a record");
        let tp = self.topic.tp(partition as u32);
        let record = self.decode(&tp, offset, data)?;
        let mut next = positions.into_owned();
        next[partition] = offset + 1;
        self.set_positions(&mut world, next);
        Ok(Some(record))
    }

    /// Reads every partition from `positions` on, in place in the logs:
    /// returns the records in the order they were written, and puts in
    /// `next` where each partition's reads go on.
    fn read_from(
        &self,
        positions: &[u64],
        next: &mut Vec<u64>,
    ) -> Result<Vec<OutputRecord<K, V>>, DriverError> {
        let world = self.world.lock();
        self.read_in(&world, positions, next)
    }

    /// [`read_from`](Self::read_from) in a world already locked.
    fn read_in(
        &self,
        world: &World,
        positions: &[u64],
        next: &mut Vec<u64>,
    ) -> Result<Vec<OutputRecord<K, V>>, DriverError> {
        if let [position] = positions {
            // One partition: in offset order, no merge.
            let mut records = Vec::new();
            next.push(self.read_partition(world, 0, *position, |_, record| records.push(record))?);
            return Ok(records);
        }
        // Records of several partitions are merged by where each was
        // appended, cluster-wide.
        let mut sequenced = Vec::new();
        for (partition, &position) in positions.iter().enumerate() {
            let log = world.cluster.log_at(self.logs[partition]);
            next.push(
                self.read_partition(world, partition, position, |offset, record| {
                    let sequence = log.sequence(offset).unwrap_or(u64::MAX);
                    sequenced.push((sequence, record));
                })?,
            );
        }
        sequenced.sort_by_key(|(sequence, _)| *sequence);
        Ok(sequenced.into_iter().map(|(_, record)| record).collect())
    }

    /// Decodes the committed records of `partition` from `position` to its
    /// last stable offset (what a `read_committed` fetch returns) into
    /// `found`, with their offsets; returns the last stable offset.
    fn read_partition(
        &self,
        world: &World,
        partition: usize,
        position: u64,
        mut found: impl FnMut(u64, OutputRecord<K, V>),
    ) -> Result<u64, DriverError> {
        let log = world.cluster.log_at(self.logs[partition]);
        let stable = log.last_stable_offset();
        if stable <= position {
            return Ok(position);
        }
        let tp = self.topic.tp(partition as u32);
        // Positions come from earlier reads, and logs never shrink.
        assert!(
            position <= log.high_watermark(),
            "{tp}: read position {position} is past the log end {}",
            log.high_watermark()
        );
        for offset in log.committed_offsets(position, stable) {
            let data = log
                .record(offset)
                .expect("a committed offset holds a record");
            if header::is_progress(data) {
                // A consistent view's progress record (V4): not data.
                continue;
            }
            found(offset, self.decode(&tp, offset, data)?);
        }
        Ok(stable)
    }

    fn stamp_of(tp: &Tp, offset: u64, data: &RecordData) -> Result<Stamp, DriverError> {
        Ok(match data.header(STAMP_HEADER) {
            Some(bytes) => header::decode(bytes).map_err(|error| DriverError::OutputStamp {
                tp: tp.clone(),
                offset,
                error,
            })?,
            None => Stamp::empty(),
        })
    }

    fn decode(
        &self,
        tp: &Tp,
        offset: u64,
        data: &parsley::RecordData,
    ) -> Result<OutputRecord<K, V>, DriverError> {
        let record =
            self.topic
                .decode_at(tp, offset, data)
                .map_err(|refused| DriverError::OutputCodec {
                    tp: tp.clone(),
                    offset,
                    part: refused.part.name(),
                    error: refused.error,
                })?;
        let stamp = Self::stamp_of(tp, offset, data)?;
        let timestamp = record.timestamp();
        let (key, value) = record.into_key_value();
        Ok(OutputRecord {
            key,
            value,
            timestamp,
            tp: tp.clone(),
            offset,
            stamp,
        })
    }
}

/// What a consuming read takes off a topic's queue, in write order, and
/// where the queue stands once they are consumed.
type Unread<K, V> = (Vec<OutputRecord<K, V>>, Vec<u64>);

/// Renders records one per line, for snapshots: `tp@offset  key …  value …
/// stamp {…}`, a null key as `null`, keys and values with `Debug` (so a
/// string is quoted and a number is a number).
pub fn render_records<K: Debug, V: Debug>(records: &[OutputRecord<K, V>]) -> String {
    let mut out = String::new();
    for record in records {
        let _ = writeln!(
            out,
            "{}@{}  key {}  value {:?}  stamp {}",
            record.tp,
            record.offset,
            NullOr(record.key.as_ref()),
            record.value,
            record.stamp
        );
    }
    out
}

/// `null`, or the value with `Debug`.
struct NullOr<'a, T>(Option<&'a T>);

impl<T: Debug> fmt::Display for NullOr<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(value) => write!(f, "{value:?}"),
            None => f.write_str("null"),
        }
    }
}

/// Whether the committed record at `offset` is a progress record (V4),
/// which no read returns.
fn is_progress_at(log: &crate::model::LogView<'_>, offset: u64) -> bool {
    log.record(offset).is_some_and(header::is_progress)
}
