//! Typed input and output handles, like Kafka Streams' `TestInputTopic` and
//! `TestOutputTopic`.

use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use parsley::header::{self, STAMP_HEADER};
use parsley::partitioner::partition_for;
use parsley::record::{Header, RecordData};
use parsley::{Stamp, Topic, Tp};

use crate::driver::error::DriverError;
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
    /// A record with `key` and `value`, stamped with the wall clock, partitioned like a producer would.
    pub fn new(key: impl Into<Option<K>>, value: V) -> Self {
        TestRecord {
            key: key.into(),
            value,
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
    /// Pipes one record with `key` and `value`, processes to quiescence and commits; returns the tp it landed on.
    pub fn pipe(&self, key: impl Into<Option<K>>, value: V) -> Result<Tp, DriverError> {
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

/// Reads what was committed to a topic, `read_committed`.
pub struct TestOutputTopic<K, V> {
    pub(crate) topic: Topic<K, V>,
    pub(crate) world: Arc<Shared>,
    /// Where [`TestOutputTopic::read_new`] goes on, per partition.
    pub(crate) read: Mutex<Vec<u64>>,
    /// Per partition, where its log is in the model.
    pub(crate) logs: Vec<LogId>,
}

impl<K: 'static, V: 'static> TestOutputTopic<K, V> {
    /// Every committed record, across partitions in the order they were
    /// written.
    pub fn read_all(&self) -> Result<Vec<OutputRecord<K, V>>, DriverError> {
        let partitions = self
            .read
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        self.read_from(&vec![0; partitions], &mut Vec::new())
    }

    /// The committed records not returned by an earlier `read_new`, in the
    /// order they were written. Costs what it returns: each call reads on
    /// from where the last one stopped, like a consumer's position. A
    /// record that does not decode fails the read, and the next read starts
    /// where this one did.
    pub fn read_new(&self) -> Result<Vec<OutputRecord<K, V>>, DriverError> {
        let mut read = self.read.lock().unwrap_or_else(PoisonError::into_inner);
        if let [position] = read.as_mut_slice() {
            // One partition: read on in place, no merge.
            let world = self.world.lock();
            let mut fresh = Vec::new();
            *position = self.read_partition(&world, 0, *position, |_, record| {
                fresh.push(record);
            })?;
            return Ok(fresh);
        }
        let mut next = Vec::with_capacity(read.len());
        let fresh = self.read_from(&read, &mut next)?;
        *read = next;
        Ok(fresh)
    }

    /// The committed values, in write order.
    pub fn read_values(&self) -> Result<Vec<V>, DriverError> {
        Ok(self
            .read_all()?
            .into_iter()
            .map(|record| record.value)
            .collect())
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
        // Records of several partitions are merged by where each was
        // appended, cluster-wide.
        let mut sequenced = Vec::new();
        for (partition, &position) in positions.iter().enumerate() {
            let log = world.cluster.log_at(self.logs[partition]);
            next.push(
                self.read_partition(&world, partition, position, |offset, record| {
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
            found(offset, self.decode(&tp, offset, data)?);
        }
        Ok(stable)
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
        let stamp = match data.header(STAMP_HEADER) {
            Some(bytes) => header::decode(bytes).map_err(|error| DriverError::OutputStamp {
                tp: tp.clone(),
                offset,
                error,
            })?,
            None => Stamp::empty(),
        };
        Ok(OutputRecord {
            key: record.key,
            value: record.value,
            timestamp: record.timestamp,
            tp: tp.clone(),
            offset,
            stamp,
        })
    }
}
