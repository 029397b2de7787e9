//! The fixtures every test of the task shares (see the module docs of
//! `task::tests`).

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use serde::Serialize;

use crate::app::{App, Parsley};
use crate::assembly::{assemble, Assembly};
use crate::codec::Json;
use crate::emission::{Record, Step, Tick};
use crate::header::{self, STAMP_HEADER};
use crate::record::{ConsumedRecord, Header, ProducedRecord, RecordData};
use crate::stage::{SlotKey, Stage, StageBuilder, Stateful, Stateless};
use crate::stamp::{Claim, Stamp};
use crate::task::{CommitRequest, CommittedOffset, Fetched, Task, TaskConfig, TaskError, TaskId};
use crate::topic::Topic;
use crate::tp::Tp;

/// The wall clock at which every task of these tests starts.
pub(super) const T0: i64 = 1_700_000_000_000;
/// The tick interval of every ticking fixture stage.
pub(super) const INTERVAL_MS: i64 = 1_000;

pub(super) const ORDERS: &str = "orders";
pub(super) const PAYMENTS: &str = "payments";
pub(super) const REFUNDS: &str = "refunds";
pub(super) const OUT: &str = "out";
pub(super) const MAPS: &str = "maps";
pub(super) const TICKS: &str = "app-s-ticks";
pub(super) const CHANGELOG: &str = "app-s-state-changelog";
pub(super) const DLQ: &str = "app-s-dlq";

pub(super) fn interval() -> Duration {
    Duration::from_millis(INTERVAL_MS as u64)
}

pub(super) fn orders() -> Topic<String, i64> {
    Topic::new(ORDERS)
}

pub(super) fn payments() -> Topic<String, i64> {
    Topic::new(PAYMENTS)
}

pub(super) fn refunds() -> Topic<String, i64> {
    Topic::new(REFUNDS)
}

pub(super) fn out() -> Topic<String, String> {
    Topic::new(OUT)
}

pub(super) fn tp(topic: &str, partition: u32) -> Tp {
    Tp::new(topic, partition)
}

pub(super) fn id(partition: u32) -> TaskId {
    TaskId {
        stage: "s".into(),
        partition,
    }
}

pub(super) fn json<T: Serialize + ?Sized>(value: &T) -> Bytes {
    Bytes::from(serde_json::to_vec(value).expect("fixture values encode"))
}

pub(super) fn stamp(claims: &[(&str, u32, u64)]) -> Stamp {
    claims
        .iter()
        .map(|&(topic, partition, offset)| Claim::new(tp(topic, partition), offset))
        .collect()
}

/// The one tp `deliverable` should list.
pub(super) fn only(tp: &Tp) -> Vec<Tp> {
    vec![tp.clone()]
}

pub(super) fn claim(topic: &str, partition: u32, offset: u64) -> Claim {
    Claim::new(tp(topic, partition), offset)
}

/// The stamp a produced record carries in its stamp header.
pub(super) fn stamp_of(record: &ProducedRecord) -> Stamp {
    let bytes = record
        .data
        .header(STAMP_HEADER)
        .expect("the record is stamped");
    header::decode(bytes).expect("the stamp header decodes")
}

pub(super) fn key_slot(key: &str) -> SlotKey {
    SlotKey::Key(json(key))
}

/// The slot's current value (open transaction included) of an `i64` stage.
pub(super) fn slot(task: &Task, slot: &SlotKey) -> Option<i64> {
    task.slots::<i64>()
        .expect("the stage's state is i64")
        .get(slot)
        .copied()
}

/// The values emitted to `out`, decoded.
pub(super) fn emitted(produced: &[ProducedRecord]) -> Vec<String> {
    produced
        .iter()
        .filter(|record| record.tp.topic.as_str() == OUT)
        .map(|record| {
            serde_json::from_slice(record.data.value.as_ref().expect("a value"))
                .expect("a JSON string")
        })
        .collect()
}

/// A changelog record as the task must produce it (S5).
pub(super) fn changelog_record(
    partition: u32,
    slot: &SlotKey,
    state: Option<i64>,
    timestamp: i64,
) -> ProducedRecord {
    ProducedRecord {
        tp: tp(CHANGELOG, partition),
        data: RecordData {
            key: Some(slot.changelog_key()),
            value: state.map(|state| json(&state)),
            headers: Vec::new(),
            timestamp,
        },
    }
}

/// A consumed record under construction: no key, value `1`, no stamp header,
/// timestamp `T0 + offset`.
pub(super) struct Rec(pub(super) ConsumedRecord);

pub(super) fn rec(offset: u64) -> Rec {
    Rec(ConsumedRecord {
        offset,
        data: RecordData {
            key: None,
            value: Some(json(&1i64)),
            headers: Vec::new(),
            timestamp: T0 + offset as i64,
        },
    })
}

/// A produced record (a tick) read back at `offset` of its tp.
pub(super) fn back(offset: u64, produced: &ProducedRecord) -> Rec {
    Rec(ConsumedRecord {
        offset,
        data: produced.data.clone(),
    })
}

impl Rec {
    pub(super) fn key(mut self, key: &str) -> Self {
        self.0.data.key = Some(json(key));
        self
    }

    pub(super) fn value(mut self, value: i64) -> Self {
        self.0.data.value = Some(json(&value));
        self
    }

    pub(super) fn raw_key(mut self, bytes: &[u8]) -> Self {
        self.0.data.key = Some(Bytes::copy_from_slice(bytes));
        self
    }

    pub(super) fn raw_value(mut self, bytes: Option<&[u8]>) -> Self {
        self.0.data.value = bytes.map(Bytes::copy_from_slice);
        self
    }

    pub(super) fn at(mut self, timestamp: i64) -> Self {
        self.0.data.timestamp = timestamp;
        self
    }

    pub(super) fn stamp(self, claims: &[(&str, u32, u64)]) -> Self {
        let bytes = header::encode(&stamp(claims));
        self.raw_stamp(&bytes)
    }

    pub(super) fn raw_stamp(mut self, bytes: &[u8]) -> Self {
        self.0.data.headers.push(Header {
            name: STAMP_HEADER.into(),
            value: Bytes::copy_from_slice(bytes),
        });
        self
    }
}

/// Hands the task one fetch of `tp`: `records` (continuing the lane's fetch
/// position), the position after them, and the log end the fetch observed.
/// An empty fetch keeps the position and only reports the log end.
pub(super) fn feed(task: &mut Task, tp: &Tp, records: Vec<Rec>, log_end: u64) {
    let records: Vec<ConsumedRecord> = records.into_iter().map(|rec| rec.0).collect();
    let next_offset = match records.last() {
        Some(last) => last.offset + 1,
        None => {
            let lane = task.gate.lane_index(tp).expect("the task consumes the tp");
            task.gate.lanes[lane].fetch_position
        }
    };
    task.handle_fetched(
        tp,
        &mut Fetched {
            records,
            next_offset,
            log_end,
        },
    );
}

/// The task's outputs as values, for scripts that assert on them: each calls
/// the task's one method for the output with a fresh buffer, as a driver
/// that keeps none would.
pub(super) trait Outputs {
    /// [`Task::deliverable`]'s list.
    fn ready(&mut self) -> Result<Vec<Tp>, TaskError>;
    /// What [`Task::deliver`] appends.
    fn delivered(&mut self, tp: &Tp) -> Result<Vec<ProducedRecord>, TaskError>;
    /// [`Task::poll_tick`]'s tick, without its stamp.
    fn tick(&mut self, now: i64) -> Option<ProducedRecord>;
    /// [`Task::prepare_commit`]'s request (its changelog records dropped).
    fn committing(&mut self) -> Result<CommitRequest, TaskError>;
    /// [`Task::prepare_commit`]'s request and changelog records (S5).
    fn committing_changes(&mut self) -> Result<(CommitRequest, Vec<ProducedRecord>), TaskError>;
}

impl Outputs for Task {
    fn ready(&mut self) -> Result<Vec<Tp>, TaskError> {
        let mut ready = Vec::new();
        self.deliverable(0, &mut ready).map(|()| ready)
    }

    fn delivered(&mut self, tp: &Tp) -> Result<Vec<ProducedRecord>, TaskError> {
        let mut produced = Vec::new();
        self.deliver(tp, &mut produced).map(|()| produced)
    }

    fn tick(&mut self, now: i64) -> Option<ProducedRecord> {
        self.poll_tick(now).map(|(tick, _)| tick)
    }

    fn committing(&mut self) -> Result<CommitRequest, TaskError> {
        self.committing_changes().map(|(request, _)| request)
    }

    fn committing_changes(&mut self) -> Result<(CommitRequest, Vec<ProducedRecord>), TaskError> {
        let mut request = CommitRequest::default();
        let mut changes = Vec::new();
        self.prepare_commit(&mut request, &mut changes)
            .map(|()| (request, changes))
    }
}

/// Commits the open transaction as a driver does at `now`: prepares it and
/// reports it committed. Returns the changelog records it wrote (S5).
pub(super) fn commit(task: &mut Task, now: i64) -> Vec<ProducedRecord> {
    let (_, changes) = task.committing_changes().expect("the commit is prepared");
    task.handle_committed(now);
    changes
}

/// Delivers the head of `tp`, which must be deliverable.
pub(super) fn deliver(task: &mut Task, tp: &Tp) -> Vec<ProducedRecord> {
    let ready = task.ready().expect("no poison head");
    assert!(
        ready.contains(tp),
        "{tp} is not deliverable; deliverable: {ready:?}"
    );
    task.delivered(tp).expect("the delivery succeeds")
}

/// Stateless: every record of `sources` emits `sink.send(key, "<topic>@<offset>")`;
/// with `ticks`, every tick emits `sink.send(None, "tick@<timestamp>")`.
pub(super) fn echo(sources: &[Topic<String, i64>], ticks: bool) -> Stage {
    echo_builder(sources, ticks).build()
}

/// [`echo`] before it is built, for options of the stage.
pub(super) fn echo_builder(sources: &[Topic<String, i64>], ticks: bool) -> StageBuilder<Stateless> {
    let mut builder = Stage::named("s");
    for source in sources {
        let sink = out();
        builder = builder.on(source, move |record: &Record<String, i64>| {
            vec![sink.send(
                record.key.clone(),
                format!("{}@{}", record.topic, record.offset),
            )]
        });
    }
    if ticks {
        let sink = out();
        builder = builder.ticks(interval(), move |tick: &Tick| {
            vec![sink.send(None, tick_note(tick))]
        });
    }
    builder.into(&out())
}

pub(super) fn tick_note(tick: &Tick) -> String {
    format!("tick@{}", tick.timestamp)
}

/// Stateful over `orders`: each slot starts at 100 and adds the record's
/// value, emitting the new sum to `out`; a value of 0 deletes the slot.
pub(super) fn counter() -> StageBuilder<Stateful<i64>, i64> {
    let sink = out();
    Stage::named("s").state(Json, || 100i64).on(
        &orders(),
        move |sum: i64, record: &Record<String, i64>| {
            if record.value == 0 {
                Step::delete()
            } else {
                let sum = sum + record.value;
                Step::of(sum).emit(sink.send(record.key.clone(), sum.to_string()))
            }
        },
    )
}

/// `counter` with a plain tick handler emitting `tick@<timestamp>`.
pub(super) fn counter_with_tick_handler() -> Stage {
    let sink = out();
    counter()
        .ticks(interval(), move |tick: &Tick| {
            vec![sink.send(None, tick_note(tick))]
        })
        .into(&out())
        .build()
}

pub(super) struct Fixture {
    pub(super) app: App,
    pub(super) assembly: Assembly,
}

pub(super) fn fixture(stage: Stage) -> Fixture {
    let app = Parsley::named("app")
        .stage(stage)
        .build()
        .expect("the fixture app composes");
    let metadata: BTreeMap<String, u32> = [
        (ORDERS, 2),
        (PAYMENTS, 2),
        (REFUNDS, 2),
        (OUT, 3),
        (MAPS, 1),
        (TICKS, 2),
        (CHANGELOG, 2),
        (DLQ, 2),
    ]
    .into_iter()
    .map(|(topic, partitions)| (topic.to_string(), partitions))
    .collect();
    let assembly = assemble(&app, &metadata).expect("the fixture cluster has every topic");
    Fixture { app, assembly }
}

impl Fixture {
    pub(super) fn task_with(&self, partition: u32, config: TaskConfig) -> Task {
        Task::new(&self.app, &self.assembly, "s", partition, config).expect("the task exists")
    }

    pub(super) fn task(&self, partition: u32) -> Task {
        self.task_with(partition, TaskConfig::default())
    }

    /// A fresh task (nothing committed) started at `T0`.
    pub(super) fn started(&self, partition: u32) -> Task {
        let mut task = self.task(partition);
        let nothing = vec![None; task.consumed_tps().len()];
        let seek = task.start(&nothing, T0).expect("starts");
        assert!(seek.iter().all(|(_, offset)| *offset == 0));
        task
    }
}

/// What a driver reads back after committing `request`: every offset with its
/// checkpoint.
pub(super) fn committed_offsets(
    request: &crate::task::CommitRequest,
) -> Vec<Option<CommittedOffset>> {
    request
        .offsets
        .iter()
        .map(|(_, offset)| {
            Some(CommittedOffset {
                offset: *offset,
                metadata: request.metadata.clone(),
            })
        })
        .collect()
}
