//! Unit tests of the task state machine, driven by hand-made fetches (no Kafka
//! model): each test reads as a script of what a driver would do, and is named
//! after the rule it checks (docs/RULES.md).
//!
//! Fixtures: application `app` with one stage `s`; sources `orders`, `payments`
//! and `refunds` (2 partitions each, JSON `String` keys and `i64` values); sink
//! `out` (3 partitions, JSON `String` values); derived `app-s-ticks`,
//! `app-s-state-changelog` and `app-s-dlq` (2 partitions each).

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use serde::Serialize;

use super::{
    Checkpoint, CommittedOffset, Fetched, HeadStatus, Task, TaskConfig, TaskError, TaskId,
};
use crate::app::{App, Parsley};
use crate::assembly::{assemble, Assembly};
use crate::codec::{Direction, Json};
use crate::emission::{Record, Step, Tick};
use crate::header::{self, HeaderError, STAMP_HEADER};
use crate::record::{ConsumedRecord, Header, ProducedRecord, RecordData};
use crate::stage::logic::RecordPart;
use crate::stage::{SlotKey, Stage, StageBuilder, Stateful};
use crate::stamp::{Claim, Stamp};
use crate::topic::Topic;
use crate::tp::Tp;

// ----- fixtures -----

/// The wall clock at which every task of these tests starts.
const T0: i64 = 1_700_000_000_000;
/// The tick interval of every ticking fixture stage.
const INTERVAL_MS: i64 = 1_000;

const ORDERS: &str = "orders";
const PAYMENTS: &str = "payments";
const REFUNDS: &str = "refunds";
const OUT: &str = "out";
const MAPS: &str = "maps";
const TICKS: &str = "app-s-ticks";
const CHANGELOG: &str = "app-s-state-changelog";
const DLQ: &str = "app-s-dlq";

fn interval() -> Duration {
    Duration::from_millis(INTERVAL_MS as u64)
}

fn orders() -> Topic<String, i64> {
    Topic::new(ORDERS)
}

fn payments() -> Topic<String, i64> {
    Topic::new(PAYMENTS)
}

fn refunds() -> Topic<String, i64> {
    Topic::new(REFUNDS)
}

fn out() -> Topic<String, String> {
    Topic::new(OUT)
}

fn tp(topic: &str, partition: u32) -> Tp {
    Tp::new(topic, partition)
}

fn id(partition: u32) -> TaskId {
    TaskId {
        stage: "s".into(),
        partition,
    }
}

fn json<T: Serialize + ?Sized>(value: &T) -> Bytes {
    Bytes::from(serde_json::to_vec(value).expect("fixture values encode"))
}

fn stamp(claims: &[(&str, u32, u64)]) -> Stamp {
    claims
        .iter()
        .map(|&(topic, partition, offset)| Claim::new(tp(topic, partition), offset))
        .collect()
}

/// The one tp `deliverable` should list.
fn only(tp: &Tp) -> Vec<Tp> {
    vec![tp.clone()]
}

fn claim(topic: &str, partition: u32, offset: u64) -> Claim {
    Claim::new(tp(topic, partition), offset)
}

/// The stamp a produced record carries in its stamp header.
fn stamp_of(record: &ProducedRecord) -> Stamp {
    let bytes = record
        .data
        .header(STAMP_HEADER)
        .expect("the record is stamped");
    header::decode(bytes).expect("the stamp header decodes")
}

fn key_slot(key: &str) -> SlotKey {
    SlotKey::Key(json(key))
}

/// The slot's current value (open transaction included) of an `i64` stage.
fn slot(task: &Task, slot: &SlotKey) -> Option<i64> {
    task.slots::<i64>()
        .expect("the stage's state is i64")
        .get(slot)
        .copied()
}

/// The values emitted to `out`, decoded.
fn emitted(produced: &[ProducedRecord]) -> Vec<String> {
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
fn changelog_record(
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
struct Rec(ConsumedRecord);

fn rec(offset: u64) -> Rec {
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
fn back(offset: u64, produced: &ProducedRecord) -> Rec {
    Rec(ConsumedRecord {
        offset,
        data: produced.data.clone(),
    })
}

impl Rec {
    fn key(mut self, key: &str) -> Self {
        self.0.data.key = Some(json(key));
        self
    }

    fn value(mut self, value: i64) -> Self {
        self.0.data.value = Some(json(&value));
        self
    }

    fn raw_key(mut self, bytes: &[u8]) -> Self {
        self.0.data.key = Some(Bytes::copy_from_slice(bytes));
        self
    }

    fn raw_value(mut self, bytes: Option<&[u8]>) -> Self {
        self.0.data.value = bytes.map(Bytes::copy_from_slice);
        self
    }

    fn at(mut self, timestamp: i64) -> Self {
        self.0.data.timestamp = timestamp;
        self
    }

    fn stamp(self, claims: &[(&str, u32, u64)]) -> Self {
        let bytes = header::encode(&stamp(claims));
        self.raw_stamp(&bytes)
    }

    fn raw_stamp(mut self, bytes: &[u8]) -> Self {
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
fn feed(task: &mut Task, tp: &Tp, records: Vec<Rec>, log_end: u64) {
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
        Fetched {
            records,
            next_offset,
            log_end,
        },
    );
}

/// Delivers the head of `tp`, which must be deliverable.
fn deliver(task: &mut Task, tp: &Tp) -> Vec<ProducedRecord> {
    let ready = task.deliverable().expect("no poison head");
    assert!(
        ready.contains(tp),
        "{tp} is not deliverable; deliverable: {ready:?}"
    );
    task.deliver(tp).expect("the delivery succeeds")
}

/// Stateless: every record of `sources` emits `sink.send(key, "<topic>@<offset>")`;
/// with `ticks`, every tick emits `sink.send(None, "tick@<timestamp>")`.
fn echo(sources: &[Topic<String, i64>], ticks: bool) -> Stage {
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
    builder.into(&out()).build()
}

fn tick_note(tick: &Tick) -> String {
    format!("tick@{}", tick.timestamp)
}

/// Stateful over `orders`: each slot starts at 100 and adds the record's
/// value, emitting the new sum to `out`; a value of 0 deletes the slot.
fn counter() -> StageBuilder<Stateful<i64>, i64> {
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
fn counter_with_tick_handler() -> Stage {
    let sink = out();
    counter()
        .ticks(interval(), move |tick: &Tick| {
            vec![sink.send(None, tick_note(tick))]
        })
        .into(&out())
        .build()
}

struct Fixture {
    app: App,
    assembly: Assembly,
}

fn fixture(stage: Stage) -> Fixture {
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
    fn task_with(&self, partition: u32, config: TaskConfig) -> Task {
        Task::new(&self.app, &self.assembly, "s", partition, config).expect("the task exists")
    }

    fn task(&self, partition: u32) -> Task {
        self.task_with(partition, TaskConfig::default())
    }

    /// A fresh task (nothing committed) started at `T0`.
    fn started(&self, partition: u32) -> Task {
        let mut task = self.task(partition);
        let nothing = vec![None; task.consumed_tps().len()];
        let seek = task.start(&nothing, T0).expect("starts");
        assert!(seek.iter().all(|(_, offset)| *offset == 0));
        task
    }
}

/// What a driver reads back after committing `request`: every offset with its
/// checkpoint.
fn committed_offsets(request: &super::CommitRequest) -> Vec<Option<CommittedOffset>> {
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

// ----- G2: the gate condition -----

/// G2: a record claiming an undelivered offset of another consumed tp is held,
/// and becomes deliverable exactly when that offset is delivered (not when it
/// is fetched, not one offset early).
#[test]
fn g2_claim_on_undelivered_offset_holds_until_exactly_that_offset_is_delivered() {
    let f = fixture(echo(&[orders(), payments()], false));
    let mut task = f.started(0);
    let (o, p) = (tp(ORDERS, 0), tp(PAYMENTS, 0));

    feed(&mut task, &o, vec![rec(0).stamp(&[(PAYMENTS, 0, 1)])], 1);
    feed(&mut task, &p, vec![rec(0), rec(1)], 2);
    // payments@1 is fetched but not delivered: orders@0 is held.
    assert_eq!(task.deliverable().unwrap(), only(&p));
    assert_eq!(
        task.heads(),
        [
            (o.clone(), 0, HeadStatus::Held(claim(PAYMENTS, 0, 1))),
            (p.clone(), 0, HeadStatus::Deliverable),
        ]
    );

    assert_eq!(emitted(&deliver(&mut task, &p)), ["payments@0"]);
    // payments@0 is delivered, payments@1 is not: still held.
    assert_eq!(task.deliverable().unwrap(), only(&p));

    assert_eq!(emitted(&deliver(&mut task, &p)), ["payments@1"]);
    assert_eq!(task.deliverable().unwrap(), only(&o));
    assert_eq!(emitted(&deliver(&mut task, &o)), ["orders@0"]);
}

/// G2: claims on tps the task does not consume (another topic, or another
/// partition of a consumed topic) are not waited on; they are carried forward
/// (G5).
#[test]
fn g2_claims_on_tps_not_consumed_are_not_waited_on() {
    let f = fixture(echo(&[orders(), payments()], false));
    let mut task = f.started(0);
    let o = tp(ORDERS, 0);
    let claims = [("elsewhere", 0, 3), (ORDERS, 1, 50), (PAYMENTS, 1, 7)];

    feed(&mut task, &o, vec![rec(0).stamp(&claims)], 1);
    assert_eq!(task.deliverable().unwrap(), only(&o));
    assert_eq!(task.heads(), [(o.clone(), 0, HeadStatus::Deliverable)]);

    let produced = deliver(&mut task, &o);
    assert_eq!(
        stamp_of(&produced[0]),
        stamp(&[
            ("elsewhere", 0, 3),
            (ORDERS, 0, 0),
            (ORDERS, 1, 50),
            (PAYMENTS, 1, 7)
        ])
    );
}

// ----- G3: per-partition order -----

/// G3: records of one tp go in offset order; a held head blocks the records
/// after it in its tp (even deliverable ones) while other tps proceed.
#[test]
fn g3_held_head_blocks_its_tp_while_other_tps_proceed() {
    let f = fixture(echo(&[orders(), payments()], false));
    let mut task = f.started(0);
    let (o, p) = (tp(ORDERS, 0), tp(PAYMENTS, 0));

    // orders@1 claims nothing, but sits behind the held orders@0.
    feed(
        &mut task,
        &o,
        vec![rec(0).stamp(&[(PAYMENTS, 0, 1)]), rec(1)],
        2,
    );
    feed(&mut task, &p, vec![rec(0)], 2);
    assert_eq!(task.deliverable().unwrap(), only(&p));
    assert_eq!(emitted(&deliver(&mut task, &p)), ["payments@0"]);

    assert_eq!(task.deliverable().unwrap(), Vec::<Tp>::new());
    assert_eq!(task.position(&o), Some(0));
    assert_eq!(task.buffered(), 2);

    feed(&mut task, &p, vec![rec(1)], 2);
    assert_eq!(emitted(&deliver(&mut task, &p)), ["payments@1"]);
    assert_eq!(task.deliverable().unwrap(), only(&o));
    assert_eq!(emitted(&deliver(&mut task, &o)), ["orders@0"]);
    assert_eq!(emitted(&deliver(&mut task, &o)), ["orders@1"]);
    assert_eq!(task.position(&o), Some(2));
    assert_eq!(task.buffered(), 0);
}

/// G3: the live order takes the deliverable head with the oldest record
/// timestamp, ties broken by tp (not by the order the stage lists its sources).
#[test]
fn g3_next_deliverable_takes_oldest_timestamp_ties_by_tp() {
    // Sources listed payments first, so lane order differs from tp order.
    let f = fixture(echo(&[payments(), orders()], false));
    let mut task = f.started(0);
    let (o, p) = (tp(ORDERS, 0), tp(PAYMENTS, 0));
    assert_eq!(task.consumed_tps(), [p.clone(), o.clone()]);

    feed(&mut task, &o, vec![rec(0).at(500), rec(1).at(900)], 2);
    feed(&mut task, &p, vec![rec(0).at(300), rec(1).at(500)], 2);

    assert_eq!(task.next_deliverable().unwrap(), Some(p.clone()));
    deliver(&mut task, &p);
    // orders@0 and payments@1 both at 500: the smaller tp, orders-0, goes.
    assert_eq!(task.next_deliverable().unwrap(), Some(o.clone()));
    deliver(&mut task, &o);
    assert_eq!(task.next_deliverable().unwrap(), Some(p.clone()));
    deliver(&mut task, &p);
    assert_eq!(task.next_deliverable().unwrap(), Some(o.clone()));
    deliver(&mut task, &o);
    assert_eq!(task.next_deliverable().unwrap(), None);

    // A held head is never chosen, however old.
    feed(
        &mut task,
        &p,
        vec![rec(2).at(1).stamp(&[(ORDERS, 0, 2)])],
        3,
    );
    feed(&mut task, &o, vec![rec(2).at(800)], 3);
    assert_eq!(task.next_deliverable().unwrap(), Some(o.clone()));
}

// ----- G4: history -----

/// G4: the history is the merge of every delivered record's stamp plus a claim
/// on each delivered record; held records add nothing.
#[test]
fn g4_history_merges_delivered_stamps_and_claims_on_delivered_records() {
    let f = fixture(echo(&[orders(), payments()], false));
    let mut task = f.started(0);
    let (o, p) = (tp(ORDERS, 0), tp(PAYMENTS, 0));
    assert_eq!(task.history(), &Stamp::empty());

    feed(
        &mut task,
        &o,
        vec![
            rec(0).stamp(&[("a", 0, 7), (PAYMENTS, 1, 3)]),
            rec(1).stamp(&[("a", 0, 2), ("x", 0, 1)]),
        ],
        2,
    );
    // payments@1 claims orders@5, not delivered: it stays held.
    feed(
        &mut task,
        &p,
        vec![rec(0), rec(1).stamp(&[(ORDERS, 0, 5), ("z", 0, 9)])],
        2,
    );

    deliver(&mut task, &o);
    assert_eq!(
        task.history(),
        &stamp(&[("a", 0, 7), (ORDERS, 0, 0), (PAYMENTS, 1, 3)])
    );
    deliver(&mut task, &o);
    assert_eq!(
        task.history(),
        &stamp(&[("a", 0, 7), (ORDERS, 0, 1), (PAYMENTS, 1, 3), ("x", 0, 1)])
    );
    deliver(&mut task, &p);
    let expected = stamp(&[
        ("a", 0, 7),
        (ORDERS, 0, 1),
        (PAYMENTS, 0, 0),
        (PAYMENTS, 1, 3),
        ("x", 0, 1),
    ]);
    assert_eq!(task.history(), &expected);

    assert_eq!(task.deliverable().unwrap(), Vec::<Tp>::new());
    assert_eq!(task.history(), &expected);
}

// ----- G5: the stamping site -----

/// G5: an emission made while delivering r claims r and r's causes; with a
/// record held, every emission (and every tick: same site) is stamped with
/// the history merged with the held record's stamp — exactly that.
#[test]
fn g5_emissions_and_ticks_are_stamped_with_history_merged_with_held_stamps() {
    let f = fixture(echo(&[orders(), payments(), refunds()], true));
    let mut task = f.started(0);
    let (o, p) = (tp(ORDERS, 0), tp(PAYMENTS, 0));

    feed(
        &mut task,
        &o,
        vec![
            rec(0).stamp(&[("a", 0, 4)]),
            rec(1).stamp(&[("a", 0, 5), ("c", 0, 1)]),
        ],
        2,
    );
    let first = deliver(&mut task, &o);
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].tp, tp(OUT, 0));
    assert_eq!(stamp_of(&first[0]), stamp(&[("a", 0, 4), (ORDERS, 0, 0)]));

    // payments@0 is held on refunds@2 (refunds is consumed, never fetched).
    feed(
        &mut task,
        &p,
        vec![rec(0).stamp(&[(REFUNDS, 0, 2), ("b", 0, 9)])],
        1,
    );
    assert_eq!(
        task.heads(),
        [
            (o.clone(), 1, HeadStatus::Deliverable),
            (p.clone(), 0, HeadStatus::Held(claim(REFUNDS, 0, 2))),
        ]
    );

    let second = deliver(&mut task, &o);
    let site = stamp(&[
        ("a", 0, 5),
        ("b", 0, 9),
        ("c", 0, 1),
        (ORDERS, 0, 1),
        (REFUNDS, 0, 2),
    ]);
    assert_eq!(stamp_of(&second[0]), site);
    // The held stamp is in the emission, not in the history.
    assert_eq!(
        task.history(),
        &stamp(&[("a", 0, 5), ("c", 0, 1), (ORDERS, 0, 1)])
    );

    let tick = task.poll_tick(T0 + INTERVAL_MS).expect("a tick is due");
    assert_eq!(stamp_of(&tick), site);
}

/// G5 with G6: a record that claims its own tp at or beyond itself is
/// poison on sight, not held: emissions made before the task reaches it do
/// not carry its claims (they would name a cause that never exists), and
/// it stops the task when it is the head.
#[test]
fn g5_a_record_poison_on_sight_lends_no_claims_to_emissions() {
    let f = fixture(echo(&[orders(), payments(), refunds()], true));
    let mut task = f.started(0);
    let o = tp(ORDERS, 0);
    feed(
        &mut task,
        &o,
        vec![rec(0), rec(1).stamp(&[(ORDERS, 0, 1_000_000), ("b", 0, 9)])],
        2,
    );
    assert_eq!(task.metrics().records_held, 0, "poison is not held");
    let first = deliver(&mut task, &o);
    assert_eq!(stamp_of(&first[0]), stamp(&[(ORDERS, 0, 0)]));
    let tick = task.poll_tick(T0 + INTERVAL_MS).expect("a tick is due");
    assert_eq!(stamp_of(&tick), stamp(&[(ORDERS, 0, 0)]));
    assert!(matches!(
        task.next_deliverable(),
        Err(TaskError::UnresolvableClaim { offset: 1, .. })
    ));
}

// ----- G6: liveness and poison -----

/// Checks an `UnresolvableClaim` error field by field.
fn assert_unresolvable(error: &TaskError, at: &Tp, offset: u64, bad: Claim) {
    match error {
        TaskError::UnresolvableClaim {
            task,
            tp,
            offset: record,
            claim,
            reason,
        } => {
            assert_eq!(
                (task, tp, *record, claim),
                (&id(0), at, offset, &bad),
                "{error}"
            );
            assert!(!reason.is_empty());
        }
        other => panic!("expected UnresolvableClaim, got {other:?}"),
    }
}

/// G6: a claim at or beyond the record's own offset on its own tp is poison,
/// named with tp, offset and claim; the committed position stays before it.
#[test]
fn g6_claim_at_or_beyond_own_offset_is_poison() {
    let f = fixture(echo(&[orders(), payments()], false));
    let (o, p) = (tp(ORDERS, 0), tp(PAYMENTS, 0));

    // At its own offset.
    let mut task = f.started(0);
    feed(
        &mut task,
        &o,
        vec![rec(0), rec(1).stamp(&[(ORDERS, 0, 1)]), rec(2)],
        3,
    );
    deliver(&mut task, &o);
    let error = task.deliverable().unwrap_err();
    assert_unresolvable(&error, &o, 1, claim(ORDERS, 0, 1));
    assert_eq!(task.failure(), Some(&error));
    // The task stays stopped with the same error, its position before the record.
    assert_eq!(task.deliverable().unwrap_err(), error);
    assert_eq!(task.deliver(&o).unwrap_err(), error);
    assert_eq!(
        task.prepare_commit().unwrap().offsets,
        [(o.clone(), 1), (p.clone(), 0)]
    );
    assert!(!task.wants_commit(T0 + 10_000));

    // Beyond its own offset.
    let mut task = f.started(0);
    feed(&mut task, &o, vec![rec(0).stamp(&[(ORDERS, 0, 7)])], 8);
    let error = task.deliverable().unwrap_err();
    assert_unresolvable(&error, &o, 0, claim(ORDERS, 0, 7));
    assert_eq!(
        task.prepare_commit().unwrap().offsets,
        [(o.clone(), 0), (p.clone(), 0)]
    );
}

/// G6: a claim at or beyond the log end of a consumed tp is poison when that
/// log end was observed by a fetch made after the record was fetched.
#[test]
fn g6_claim_beyond_fresh_log_end_is_poison() {
    let f = fixture(echo(&[orders(), payments()], false));
    let (o, p) = (tp(ORDERS, 0), tp(PAYMENTS, 0));

    // At the log end, observed by a fetch with records.
    let mut task = f.started(0);
    feed(&mut task, &o, vec![rec(0).stamp(&[(PAYMENTS, 0, 3)])], 1);
    feed(&mut task, &p, vec![rec(0), rec(1), rec(2)], 3);
    let error = task.deliverable().unwrap_err();
    assert_unresolvable(&error, &o, 0, claim(PAYMENTS, 0, 3));
    assert_eq!(
        task.prepare_commit().unwrap().offsets,
        [(o.clone(), 0), (p.clone(), 0)]
    );

    // Beyond the log end, observed by an empty fetch.
    let mut task = f.started(0);
    feed(
        &mut task,
        &o,
        vec![rec(0), rec(1).stamp(&[(PAYMENTS, 0, 9)])],
        2,
    );
    deliver(&mut task, &o);
    feed(&mut task, &p, Vec::new(), 4);
    let error = task.deliverable().unwrap_err();
    assert_unresolvable(&error, &o, 1, claim(PAYMENTS, 0, 9));
    assert_eq!(
        task.prepare_commit().unwrap().offsets,
        [(o.clone(), 1), (p.clone(), 0)]
    );
}

/// G6: a log end observed before the record was fetched may be stale: a claim
/// beyond it only holds, and resolves when the claimed offset is delivered.
#[test]
fn g6_claim_beyond_stale_log_end_only_holds() {
    let f = fixture(echo(&[orders(), payments()], false));
    let mut task = f.started(0);
    let (o, p) = (tp(ORDERS, 0), tp(PAYMENTS, 0));

    feed(&mut task, &p, vec![rec(0), rec(1), rec(2)], 3);
    feed(&mut task, &o, vec![rec(0).stamp(&[(PAYMENTS, 0, 4)])], 1);
    assert_eq!(task.deliverable().unwrap(), only(&p));
    assert_eq!(
        task.heads()[0],
        (o.clone(), 0, HeadStatus::Held(claim(PAYMENTS, 0, 4)))
    );

    // A fresh log end past the claim: still held, not poison.
    feed(&mut task, &p, vec![rec(3), rec(4)], 5);
    for _ in 0..4 {
        deliver(&mut task, &p);
        assert_eq!(task.deliverable().unwrap(), only(&p));
    }
    deliver(&mut task, &p);
    assert_eq!(task.deliverable().unwrap(), only(&o));
    assert_eq!(emitted(&deliver(&mut task, &o)), ["orders@0"]);
}

/// G6, §8: a stamp header that does not decode stops the task with a typed
/// error naming tp and offset; the committed position stays before it.
#[test]
fn g6_bad_stamp_header_stops_the_task_naming_tp_and_offset() {
    let f = fixture(echo(&[orders(), payments()], false));
    let (o, p) = (tp(ORDERS, 0), tp(PAYMENTS, 0));

    let mut task = f.started(0);
    feed(
        &mut task,
        &o,
        vec![rec(0), rec(1).raw_stamp(&[9, 0]), rec(2)],
        3,
    );
    deliver(&mut task, &o);
    let error = task.deliverable().unwrap_err();
    assert_eq!(
        error,
        TaskError::BadStamp {
            task: id(0),
            tp: o.clone(),
            offset: 1,
            error: HeaderError::UnknownVersion { version: 9 },
        }
    );
    assert_eq!(task.deliver(&o).unwrap_err(), error);
    assert_eq!(
        task.prepare_commit().unwrap().offsets,
        [(o.clone(), 1), (p.clone(), 0)]
    );
    assert_eq!(task.history(), &stamp(&[(ORDERS, 0, 0)]));

    // Truncated and empty headers alike.
    for bytes in [&[1u8][..], &[]] {
        let mut task = f.started(0);
        feed(&mut task, &p, vec![rec(0).raw_stamp(bytes)], 1);
        let expected = header::decode(bytes).unwrap_err();
        assert!(matches!(
            expected,
            HeaderError::Truncated { .. } | HeaderError::Empty
        ));
        assert_eq!(
            task.deliverable().unwrap_err(),
            TaskError::BadStamp {
                task: id(0),
                tp: p.clone(),
                offset: 0,
                error: expected,
            }
        );
        assert_eq!(
            task.prepare_commit().unwrap().offsets,
            [(o.clone(), 0), (p.clone(), 0)]
        );
    }
}

// ----- G7, X3: abort and redelivery -----

/// G7, X3: after an abort, history, tick time, slots and positions return to
/// the committed snapshot; the seek positions are the committed positions;
/// the redelivered records give the same outputs and are counted.
#[test]
fn g7_x3_abort_returns_to_the_committed_snapshot_and_redelivers_the_same() {
    let f = fixture(counter_with_tick_handler());
    let mut task = f.started(0);
    let (o, k) = (tp(ORDERS, 0), tp(TICKS, 0));
    let (a, b) = (key_slot("a"), key_slot("b"));

    let inputs = || {
        [
            rec(0).key("a").value(1),
            rec(1).key("a").value(2),
            rec(2).key("b").value(5),
        ]
    };
    feed(&mut task, &o, inputs().into(), 3);
    deliver(&mut task, &o);
    assert!(task.poll_tick(T0 + INTERVAL_MS).is_some());
    let committed = task.prepare_commit().unwrap();
    task.handle_committed(T0 + INTERVAL_MS);

    // The open transaction: two deliveries and a tick.
    let a_then = deliver(&mut task, &o);
    let b_then = deliver(&mut task, &o);
    let tick_then = task.poll_tick(T0 + 2 * INTERVAL_MS).expect("a tick is due");
    assert_eq!(task.history(), &stamp(&[(ORDERS, 0, 2)]));
    assert_eq!(task.last_tick_at(), Some(T0 + 2 * INTERVAL_MS));
    assert_eq!((slot(&task, &a), slot(&task, &b)), (Some(103), Some(105)));

    let seek = task.handle_aborted();
    assert_eq!(seek, [(o.clone(), 1), (k.clone(), 0)]);
    assert_eq!(seek, committed.offsets);
    assert_eq!(task.history(), &stamp(&[(ORDERS, 0, 0)]));
    assert_eq!(task.committed_history(), &stamp(&[(ORDERS, 0, 0)]));
    assert_eq!(task.last_tick_at(), Some(T0 + INTERVAL_MS));
    assert_eq!((slot(&task, &a), slot(&task, &b)), (Some(101), None));
    assert_eq!((task.position(&o), task.position(&k)), (Some(1), Some(0)));
    assert_eq!(task.buffered(), 0);
    assert!(!task.has_open_work());
    assert_eq!(task.prepare_commit().unwrap(), committed);

    // Re-consume from the committed position: the same outputs, stamps included.
    let [_, again_a, again_b] = inputs();
    feed(&mut task, &o, vec![again_a, again_b], 3);
    assert_eq!(deliver(&mut task, &o), a_then);
    assert_eq!(deliver(&mut task, &o), b_then);
    assert_eq!(task.poll_tick(T0 + 2 * INTERVAL_MS), Some(tick_then));

    let metrics = task.metrics();
    assert_eq!(metrics.records_redelivered_total, 2);
    assert_eq!(metrics.records_delivered_total, 5);
    assert_eq!(metrics.transactions_aborted_total, 1);
    assert_eq!(metrics.transactions_committed_total, 1);
}

// ----- X1: the atomic unit -----

/// X1: `prepare_commit` carries every consumed tp's position and a checkpoint
/// with the history and the tick time; a restart from those committed offsets
/// resumes the history and the tick cadence.
#[test]
fn x1_commit_carries_positions_and_checkpoint_and_a_restart_resumes_them() {
    let f = fixture(echo(&[orders(), payments()], true));
    let mut task = f.started(0);
    let (o, p, k) = (tp(ORDERS, 0), tp(PAYMENTS, 0), tp(TICKS, 0));

    feed(&mut task, &o, vec![rec(0).stamp(&[("a", 0, 3)]), rec(1)], 2);
    feed(&mut task, &p, vec![rec(0)], 1);
    deliver(&mut task, &o);
    deliver(&mut task, &p);
    assert!(task.poll_tick(T0 + 1_500).is_some());

    let request = task.prepare_commit().unwrap();
    let history = stamp(&[("a", 0, 3), (ORDERS, 0, 0), (PAYMENTS, 0, 0)]);
    // X6: the stage's own group, `<application.id>-<stage>`.
    assert_eq!(&*request.group, "app-s");
    assert_eq!(
        request.offsets,
        [(o.clone(), 1), (p.clone(), 1), (k.clone(), 0)]
    );
    assert_eq!(
        Checkpoint::decode(&request.metadata).unwrap(),
        Checkpoint {
            history: history.clone(),
            last_tick_at: Some(T0 + 1_500),
        }
    );
    task.handle_committed(T0 + 1_500);
    assert_eq!(task.committed_history(), &history);

    // A new instance of the task, from what was committed.
    let mut task = f.task(0);
    let seek = task
        .start(&committed_offsets(&request), T0 + 1_600)
        .unwrap();
    assert_eq!(seek, request.offsets);
    assert_eq!(task.history(), &history);
    assert_eq!(task.committed_history(), &history);
    assert_eq!(task.last_tick_at(), Some(T0 + 1_500));
    assert_eq!(task.next_tick_at(), Some(T0 + 2_500));
    assert_eq!(task.poll_tick(T0 + 2_499), None);

    // The history goes on from the checkpoint.
    feed(&mut task, &o, vec![rec(1)], 2);
    let produced = deliver(&mut task, &o);
    assert_eq!(
        stamp_of(&produced[0]),
        stamp(&[("a", 0, 3), (ORDERS, 0, 1), (PAYMENTS, 0, 0)])
    );
    assert!(task.poll_tick(T0 + 2_500).is_some());
}

// ----- X2: commit interval -----

/// X2: a task wants to commit only when the commit interval has passed since
/// its last commit (or start) and there is open work (a delivery or a tick).
#[test]
fn x2_wants_commit_only_after_the_interval_with_open_work() {
    let f = fixture(echo(&[orders()], true));
    let mut task = f.started(0);
    let o = tp(ORDERS, 0);

    assert!(!task.has_open_work());
    assert!(!task.wants_commit(T0 + 10_000), "nothing to commit");

    feed(&mut task, &o, vec![rec(0), rec(1)], 2);
    deliver(&mut task, &o);
    assert!(task.has_open_work());
    assert!(!task.wants_commit(T0 + 99));
    assert!(task.wants_commit(T0 + 100));
    task.handle_committed(T0 + 100);
    assert!(!task.has_open_work());
    assert!(!task.wants_commit(T0 + 10_000), "nothing to commit");

    // The interval runs from the last commit.
    deliver(&mut task, &o);
    assert!(!task.wants_commit(T0 + 199));
    assert!(task.wants_commit(T0 + 200));
    task.handle_committed(T0 + 200);

    // A tick is work too.
    assert!(task.poll_tick(T0 + INTERVAL_MS).is_some());
    assert!(task.wants_commit(T0 + INTERVAL_MS));

    // The interval comes from the task's configuration.
    let mut slow = f.task_with(
        0,
        TaskConfig {
            commit_interval: Duration::from_secs(5),
        },
    );
    slow.start(&[None, None], T0).unwrap();
    feed(&mut slow, &o, vec![rec(0)], 1);
    deliver(&mut slow, &o);
    assert!(!slow.wants_commit(T0 + 4_999));
    assert!(slow.wants_commit(T0 + 5_000));
}

// ----- X5: logic errors -----

/// X5: a handler that returns an error stops the task with an error naming
/// stage, tp and offset; the record is not skipped.
#[test]
fn x5_handler_error_stops_the_task_and_keeps_the_record() {
    let sink = out();
    let stage = Stage::named("s")
        .on(&orders(), move |record: &Record<String, i64>| {
            if record.value < 0 {
                Err(format!("negative {}", record.value))
            } else {
                Ok(vec![sink.send(None, record.value.to_string())])
            }
        })
        .into(&out())
        .build();
    let f = fixture(stage);
    let mut task = f.started(0);
    let o = tp(ORDERS, 0);

    feed(
        &mut task,
        &o,
        vec![rec(0).value(1), rec(1).value(-1), rec(2).value(2)],
        3,
    );
    assert_eq!(emitted(&deliver(&mut task, &o)), ["1"]);
    let error = task.deliver(&o).unwrap_err();
    assert_eq!(
        error,
        TaskError::Logic {
            task: id(0),
            tp: o.clone(),
            offset: 1,
            message: "negative -1".to_string(),
        }
    );
    assert_eq!(
        error.to_string(),
        "task s/0: logic failed on orders-0@1 (X5, docs/RULES.md#x5): negative -1"
    );
    assert_eq!(error.record(), Some((&o, 1)));

    assert_eq!(task.failure(), Some(&error));
    assert_eq!(task.deliverable().unwrap_err(), error);
    assert_eq!(task.position(&o), Some(1));
    assert_eq!(task.buffered(), 2);
    assert_eq!(task.prepare_commit().unwrap().offsets, [(o.clone(), 1)]);
    assert_eq!(task.history(), &stamp(&[(ORDERS, 0, 0)]));
    assert_eq!(task.metrics().records_delivered_total, 1);
}

/// X5, T3: a stopped task emits no more ticks, however much time passes: its
/// open transaction is aborted, so a tick would be written to nothing.
#[test]
fn x5_a_stopped_task_emits_no_ticks() {
    let stage = Stage::named("s")
        .on(&orders(), |record: &Record<String, i64>| {
            if record.value < 0 {
                Err(format!("negative {}", record.value))
            } else {
                Ok(Vec::new())
            }
        })
        .ticks(interval(), |_tick| Vec::new())
        .build();
    let f = fixture(stage);
    let mut task = f.started(0);
    let o = tp(ORDERS, 0);

    feed(&mut task, &o, vec![rec(0).value(-1)], 1);
    task.deliver(&o).unwrap_err();
    assert!(task.poll_tick(T0 + 10 * INTERVAL_MS).is_none());
    assert_eq!(task.metrics().ticks_emitted_total, 0);
}

/// X5: a fold that panics stops the task the same way; its slot is untouched
/// and nothing is written to the changelog.
#[test]
fn x5_fold_panic_stops_the_task_and_keeps_the_record() {
    let stage = Stage::named("s")
        .state(Json, || 0i64)
        .on(&orders(), |sum: i64, record: &Record<String, i64>| {
            if record.value < 0 {
                panic!("boom {}", record.value);
            }
            Step::of(sum + record.value)
        })
        .build();
    let f = fixture(stage);
    let mut task = f.started(0);
    let o = tp(ORDERS, 0);

    feed(
        &mut task,
        &o,
        vec![rec(0).key("k").value(4), rec(1).key("k").value(-3)],
        2,
    );
    deliver(&mut task, &o);
    let error = task.deliver(&o).unwrap_err();
    assert_eq!(
        error,
        TaskError::Logic {
            task: id(0),
            tp: o.clone(),
            offset: 1,
            message: "panicked: boom -3".to_string(),
        }
    );
    assert_eq!(slot(&task, &key_slot("k")), Some(4));
    assert_eq!(task.prepare_commit().unwrap().offsets, [(o.clone(), 1)]);
    assert_eq!(task.deliverable().unwrap_err(), error);
}

// ----- X5: the dead-letter opt-in -----

/// Stateful over `orders` with the dead-letter opt-in: each slot sums the
/// values and emits the new sum; a negative value is refused by the logic.
fn picky_counter() -> Stage {
    let sink = out();
    Stage::named("s")
        .state(Json, || 0i64)
        .on(&orders(), move |sum: i64, record: &Record<String, i64>| {
            if record.value < 0 {
                return Err(format!("negative {}", record.value));
            }
            let sum = sum + record.value;
            Ok(Step::of(sum).emit(sink.send(record.key.clone(), sum.to_string())))
        })
        .into(&out())
        .dead_letter_queue()
        .build()
}

/// The one dead letter among `produced`, read back.
fn dead_letter_of(produced: &[ProducedRecord]) -> crate::DeadLetter {
    assert_eq!(
        produced.len(),
        1,
        "one record, on the dead-letter topic: {produced:?}"
    );
    assert_eq!(produced[0].tp.topic.as_str(), DLQ);
    crate::DeadLetter::from_record(&produced[0].data).expect("a dead letter")
}

/// X5 (opt-in): a record the logic refuses is dead-lettered in the
/// delivery's transaction instead of stopping the task: its key and value
/// bytes as they were, headers naming the error and the record, a stamp
/// claiming it and its causes; its slot, the changelog and the sinks are
/// untouched; its offset is passed and the next record is delivered.
#[test]
fn x5_dead_letter_routes_a_refused_record_and_the_task_keeps_running() {
    let f = fixture(picky_counter());
    let mut task = f.started(1);
    let (o, p) = (tp(ORDERS, 1), tp(PAYMENTS, 7));
    assert_eq!(task.dead_letter_tp(), Some(&tp(DLQ, 1)));
    feed(
        &mut task,
        &o,
        vec![
            rec(0).key("k").value(4),
            rec(1).key("k").value(-3).stamp(&[(PAYMENTS, 7, 9)]),
            rec(2).key("k").value(5),
        ],
        3,
    );
    deliver(&mut task, &o);
    let refused = task.head(&o).expect("fetched").clone();
    let produced = deliver(&mut task, &o);
    let letter = dead_letter_of(&produced);
    assert_eq!(letter.kind, crate::DeadLetterKind::Logic);
    assert_eq!((&letter.tp, letter.offset), (&o, 1));
    assert_eq!(letter.stage, "s");
    assert_eq!(
        letter.message,
        "task s/1: logic failed on orders-1@1 (X5, docs/RULES.md#x5): negative -3"
    );
    assert_eq!(letter.key, refused.data.key);
    assert_eq!(letter.value, refused.data.value);
    assert_eq!(produced[0].tp, tp(DLQ, 1));
    assert_eq!(produced[0].data.timestamp, refused.data.timestamp);
    assert_eq!(
        produced[0].data.header(crate::dead_letter::STAMP),
        refused.data.header(STAMP_HEADER)
    );
    // G5: stamped at the stamping site; it claims the record and its causes.
    assert_eq!(
        stamp_of(&produced[0]),
        stamp(&[(ORDERS, 1, 1), (PAYMENTS, 7, 9)])
    );
    assert_eq!(task.history(), &stamp(&[(ORDERS, 1, 1), (PAYMENTS, 7, 9)]));
    assert_eq!(slot(&task, &key_slot("k")), Some(4));
    assert_eq!(task.position(&o), Some(2));
    assert_eq!(task.failure(), None);
    assert_eq!(emitted(&deliver(&mut task, &o)), ["9"]);
    let _ = p;
    let metrics = task.metrics();
    assert_eq!(
        (
            metrics.records_delivered_total,
            metrics.records_dead_lettered_total
        ),
        (3, 1)
    );
    assert_eq!(task.prepare_commit().unwrap().offsets, [(o.clone(), 3)]);
}

/// X5 (opt-in), §8: a key or value the source codec refuses and a stamp
/// header that does not decode are dead-lettered too, each with its kind; a
/// bad stamp passes on only the claim on the record.
#[test]
fn x5_dead_letter_routes_codec_errors_and_bad_stamps() {
    let f = fixture(picky_counter());
    let mut task = f.started(0);
    let o = tp(ORDERS, 0);
    feed(
        &mut task,
        &o,
        vec![
            rec(0).key("k").raw_value(Some(b"not json")),
            rec(1).raw_key(b"\xff").value(1),
            rec(2).key("k").value(1).raw_stamp(&[9, 0]),
            rec(3).key("k").raw_value(None),
            rec(4).key("k").value(2),
        ],
        5,
    );
    let kinds: Vec<_> = (0..4)
        .map(|offset| {
            assert_eq!(task.deliverable().unwrap(), only(&o));
            let produced = task.deliver(&o).unwrap();
            let letter = dead_letter_of(&produced);
            assert_eq!(letter.offset, offset);
            letter.kind
        })
        .collect();
    use crate::DeadLetterKind::{BadStamp, Codec};
    assert_eq!(kinds, [Codec, Codec, BadStamp, Codec]);
    assert_eq!(emitted(&deliver(&mut task, &o)), ["2"]);
    assert_eq!(task.history(), &stamp(&[(ORDERS, 0, 4)]));
    assert_eq!(task.metrics().records_dead_lettered_total, 4);
}

/// X5 (opt-in), X3: a dead letter is part of its transaction: an abort
/// drops it with the rest, and the redelivery dead-letters the record again.
#[test]
fn x5_dead_letter_is_undone_by_an_abort_and_written_again() {
    let f = fixture(picky_counter());
    let mut task = f.started(0);
    let o = tp(ORDERS, 0);
    feed(&mut task, &o, vec![rec(0).key("k").value(-1)], 1);
    let first = deliver(&mut task, &o);
    assert_eq!(task.handle_aborted(), [(o.clone(), 0)]);
    feed(&mut task, &o, vec![rec(0).key("k").value(-1)], 1);
    let again = deliver(&mut task, &o);
    assert_eq!(first, again);
    assert_eq!(task.metrics().records_redelivered_total, 1);
}

/// X5: without the opt-in nothing changes: the refusal stops the task and
/// there is no dead-letter partition.
#[test]
fn x5_without_the_opt_in_a_refusal_still_stops_the_task() {
    let f = fixture(counter().build());
    let mut task = f.started(0);
    assert_eq!(task.dead_letter_tp(), None);
    let o = tp(ORDERS, 0);
    feed(
        &mut task,
        &o,
        vec![rec(0).key("k").raw_value(Some(b"?"))],
        1,
    );
    assert!(matches!(task.deliver(&o), Err(TaskError::Codec { .. })));
    assert_eq!(task.metrics().records_dead_lettered_total, 0);
}

/// X5: the operator's skip. A task stopped on a poison record (a claim that
/// can never resolve) is restarted from its committed position; `skip`
/// refuses an offset already delivered or that is no record, then
/// dead-letters exactly the named record as skipped (the records before it
/// are delivered as usual), and the skip is consumed by the commit.
#[test]
fn x5_skip_dead_letters_the_named_record_once_and_refuses_any_other() {
    use super::SkipError;
    let f = fixture(picky_counter());
    let o = tp(ORDERS, 0);
    let records = || {
        vec![
            rec(0).key("k").value(1),
            rec(1).key("k").value(2),
            rec(2).key("k").value(3).stamp(&[(ORDERS, 0, 5)]),
            rec(4).key("k").value(4),
        ]
    };
    let mut task = f.started(0);
    feed(&mut task, &o, records(), 5);
    deliver(&mut task, &o);
    let request = task.prepare_commit().unwrap();
    task.handle_committed(T0);
    deliver(&mut task, &o);
    let stopped = task.deliverable().unwrap_err();
    assert!(matches!(
        stopped,
        TaskError::UnresolvableClaim { offset: 2, .. }
    ));
    assert!(matches!(task.skip(&o, 2), Err(SkipError::Stopped { .. })));

    // Restart from what was committed (before offset 1), then skip.
    let mut task = f.task(0);
    assert!(matches!(
        task.skip(&o, 2),
        Err(SkipError::NotStarted { .. })
    ));
    let seek = task.start(&committed_offsets(&request), T0).unwrap();
    assert_eq!(seek, [(o.clone(), 1)]);
    assert_eq!(
        task.skip(&o, 0).unwrap_err().to_string(),
        "task s/0: orders-0@0 is behind the next record it delivers on orders-0, at offset 1; it was delivered already"
    );
    assert!(matches!(
        task.skip(&tp(PAYMENTS, 0), 0),
        Err(SkipError::NotConsumed { .. })
    ));
    feed(&mut task, &o, records().split_off(1), 5);
    assert!(matches!(
        task.skip(&o, 3),
        Err(SkipError::NotARecord { offset: 3, .. })
    ));
    task.skip(&o, 2).unwrap();
    assert!(matches!(
        task.skip(&o, 4),
        Err(SkipError::AlreadyPending { offset: 2, .. })
    ));
    assert_eq!(task.pending_skip(), Some((&o, 2)));
    // (The fixture restores no changelog: the slot starts again at 0.)
    assert_eq!(emitted(&deliver(&mut task, &o)), ["2"]);
    assert_eq!(task.heads()[0].2, HeadStatus::Deliverable);
    let produced = deliver(&mut task, &o);
    let letter = dead_letter_of(&produced);
    assert_eq!(letter.kind, crate::DeadLetterKind::Skipped);
    assert_eq!(letter.offset, 2);
    // A poison record's own claims are not passed on: only the claim on it.
    assert_eq!(stamp_of(&produced[0]), stamp(&[(ORDERS, 0, 2)]));
    assert_eq!(emitted(&deliver(&mut task, &o)), ["6"]);
    task.prepare_commit().unwrap();
    task.handle_committed(T0 + 1);
    assert_eq!(task.pending_skip(), None);

    // Without the opt-in there is nowhere to skip to.
    let plain = fixture(counter().build());
    let mut task = plain.started(0);
    assert!(matches!(
        task.skip(&o, 0),
        Err(SkipError::NoDeadLetterTopic { .. })
    ));
}

/// X5: a skip named ahead of the fetch, on an offset that turns out to be
/// no record (a transaction marker), stops the task rather than skip the
/// record after it.
#[test]
fn x5_skip_of_an_offset_that_is_no_record_stops_the_task() {
    let f = fixture(picky_counter());
    let o = tp(ORDERS, 0);
    let mut task = f.started(0);
    task.skip(&o, 0).unwrap();
    feed(&mut task, &o, vec![rec(1).key("k").value(1)], 2);
    let error = task.deliverable().unwrap_err();
    assert_eq!(
        error,
        TaskError::SkipMissed {
            task: id(0),
            tp: o.clone(),
            offset: 0,
            next: 1,
        }
    );
    assert_eq!(error.record(), Some((&o, 0)));
}

// ----- S1, S2: state slots -----

/// S1, S2: a stateful stage folds each record into its key's slot; the null
/// key has its own slot; unseen slots read as the initial value; a step with
/// no state deletes the slot, which then reads as the initial value again.
#[test]
fn s1_s2_fold_per_key_with_a_null_slot_and_deletion() {
    let f = fixture(counter().into(&out()).build());
    let mut task = f.started(0);
    let o = tp(ORDERS, 0);
    let (a, b, null) = (key_slot("a"), key_slot("b"), SlotKey::Null);
    let slots = |task: &Task| (slot(task, &a), slot(task, &b), slot(task, &null));

    assert!(task.slots::<String>().is_none());
    feed(
        &mut task,
        &o,
        vec![
            rec(0).key("a").value(1),
            rec(1).key("b").value(5),
            rec(2).value(7),
            rec(3).key("a").value(2),
            rec(4).value(1),
            rec(5).key("a").value(0),
            rec(6).key("a").value(4),
        ],
        7,
    );
    let mut step = || emitted(&deliver(&mut task, &o));

    assert_eq!(step(), ["101"]);
    assert_eq!(step(), ["105"]);
    assert_eq!(step(), ["107"]);
    assert_eq!(step(), ["103"]);
    assert_eq!(step(), ["108"]);
    assert_eq!(slots(&task), (Some(103), Some(105), Some(108)));

    assert_eq!(emitted(&deliver(&mut task, &o)), Vec::<String>::new());
    assert_eq!(slots(&task), (None, Some(105), Some(108)));
    assert_eq!(emitted(&deliver(&mut task, &o)), ["104"]);
    assert_eq!(slots(&task), (Some(104), Some(105), Some(108)));
    assert_eq!(slot(&task, &SlotKey::Tick), None);

    task.handle_committed(T0 + 100);
    let committed = task.slots::<i64>().unwrap();
    assert_eq!(committed.committed(&a), Some(&104));
    assert_eq!(committed.committed(&null), Some(&108));
}

// ----- S3, T2: where emissions may go -----

/// S3: an emission to a topic the stage does not declare with `into` is an
/// error naming stage and topic; the record is not delivered.
#[test]
fn s3_emission_to_an_undeclared_topic_is_an_error() {
    let audits: Topic<String, String> = Topic::new("audits");
    let stage = Stage::named("s")
        .on(&orders(), move |_: &Record<String, i64>| {
            vec![audits.send(None, "x")]
        })
        .into(&out())
        .build();
    let f = fixture(stage);
    let mut task = f.started(0);
    let o = tp(ORDERS, 0);

    feed(&mut task, &o, vec![rec(0)], 1);
    let error = task.deliver(&o).unwrap_err();
    assert_eq!(
        error,
        TaskError::UndeclaredSink {
            task: id(0),
            topic: "audits".to_string(),
            tp: o.clone(),
            offset: 0,
        }
    );
    assert!(
        error
            .to_string()
            .starts_with("S3 (docs/RULES.md#s3): stage \"s\" emitted to topic \"audits\""),
        "{error}"
    );
    assert_eq!(task.position(&o), Some(0));
    assert_eq!(task.history(), &Stamp::empty());
    assert!(!task.has_open_work());
}

/// T2: no logic may emit to a tick topic, even one it can name as a topic
/// without declaring it as a sink: from a record handler or a tick handler.
#[test]
fn t2_emission_to_a_tick_topic_is_an_error() {
    let tick_topic: Topic<String, String> = Topic::new(TICKS);
    let (o, k) = (tp(ORDERS, 0), tp(TICKS, 0));

    // From a record handler.
    let sneaky = tick_topic.clone();
    let stage = Stage::named("s")
        .on(&orders(), move |_: &Record<String, i64>| {
            vec![sneaky.send(None, "x")]
        })
        .ticks(interval(), |_: &Tick| Vec::new())
        .into(&out())
        .build();
    let f = fixture(stage);
    let mut task = f.started(0);
    feed(&mut task, &o, vec![rec(0)], 1);
    let error = task.deliver(&o).unwrap_err();
    assert_eq!(
        error,
        TaskError::EmitToTickTopic {
            task: id(0),
            topic: TICKS.to_string(),
            tp: o.clone(),
            offset: 0,
        }
    );
    assert!(
        error.to_string().starts_with(
            "T2 (docs/RULES.md#t2): stage \"s\" emitted to tick topic \"app-s-ticks\""
        ),
        "{error}"
    );
    assert_eq!(task.position(&o), Some(0));

    // From a tick handler.
    let sneaky = tick_topic.clone();
    let stage = Stage::named("s")
        .on(&orders(), |_: &Record<String, i64>| Vec::new())
        .ticks(interval(), move |_: &Tick| vec![sneaky.send(None, "x")])
        .into(&out())
        .build();
    let f = fixture(stage);
    let mut task = f.started(0);
    let tick = task.poll_tick(T0 + INTERVAL_MS).expect("a tick is due");
    task.handle_committed(T0 + INTERVAL_MS);
    feed(&mut task, &k, vec![back(0, &tick)], 2);
    assert_eq!(
        task.deliver(&k).unwrap_err(),
        TaskError::EmitToTickTopic {
            task: id(0),
            topic: TICKS.to_string(),
            tp: k.clone(),
            offset: 0,
        }
    );
    assert_eq!(task.position(&k), Some(0));
}

// ----- S5: changelog -----

/// S5: every state change is a changelog record on the stage's changelog, at
/// the task's partition, keyed by slot (a tombstone for a deletion); restoring
/// those records before start restores the slots.
#[test]
fn s5_state_changes_go_to_the_changelog_and_restore_the_slots() {
    let f = fixture(counter().into(&out()).build());
    let mut task = f.started(1);
    let o = tp(ORDERS, 1);
    assert_eq!(task.changelog_tp(), Some(&tp(CHANGELOG, 1)));
    let (a, b, c, null) = (key_slot("a"), key_slot("b"), key_slot("c"), SlotKey::Null);

    feed(
        &mut task,
        &o,
        vec![
            rec(0).key("a").value(1),
            rec(1).key("b").value(5),
            rec(2).value(7),
            rec(3).key("c").value(3),
            rec(4).key("a").value(2),
            rec(5).key("b").value(0),
        ],
        6,
    );
    let mut changes = Vec::new();
    for _ in 0..6 {
        changes.extend(
            deliver(&mut task, &o)
                .into_iter()
                .filter(|record| record.tp.topic.as_str() == CHANGELOG),
        );
    }
    assert_eq!(
        changes,
        [
            changelog_record(1, &a, Some(101), T0),
            changelog_record(1, &b, Some(105), T0 + 1),
            changelog_record(1, &null, Some(107), T0 + 2),
            changelog_record(1, &c, Some(103), T0 + 3),
            changelog_record(1, &a, Some(103), T0 + 4),
            changelog_record(1, &b, None, T0 + 5),
        ]
    );
    assert_eq!(null.changelog_key(), Bytes::from_static(&[0]));
    assert_eq!(a.changelog_key(), Bytes::from_static(b"\x01\"a\""));

    // A new instance restores from the changelog before it starts.
    let mut task = f.task(1);
    for (offset, change) in changes.iter().enumerate() {
        task.restore_state(offset as u64, &change.data).unwrap();
    }
    task.start(&[None], T0).unwrap();
    assert_eq!(
        (
            slot(&task, &a),
            slot(&task, &b),
            slot(&task, &c),
            slot(&task, &null)
        ),
        (Some(103), None, Some(103), Some(107))
    );
    feed(&mut task, &o, vec![rec(6).key("a").value(1)], 7);
    assert_eq!(emitted(&deliver(&mut task, &o)), ["104"]);
}

/// S5, §8: a changelog record whose key names no slot is refused.
#[test]
fn s5_bad_changelog_record_is_refused() {
    let f = fixture(counter().into(&out()).build());
    let mut task = f.task(0);
    let error = task
        .restore_state(
            4,
            &RecordData {
                key: Some(Bytes::from_static(&[7])),
                value: Some(json(&1i64)),
                headers: Vec::new(),
                timestamp: T0,
            },
        )
        .unwrap_err();
    assert!(
        matches!(&error, TaskError::BadChangelog { task, tp, offset: 4, .. } if task == &id(0) && tp == &self::tp(CHANGELOG, 0)),
        "{error:?}"
    );
}

// ----- T3: cadence -----

/// T3: the first tick comes one interval after start; at most one tick per
/// poll however late; never before the interval since the last tick.
#[test]
fn t3_ticks_one_per_poll_never_before_the_interval() {
    let f = fixture(echo(&[orders()], true));
    let mut task = f.started(0);
    assert_eq!(task.next_tick_at(), Some(T0 + INTERVAL_MS));

    assert_eq!(task.poll_tick(T0), None);
    assert_eq!(task.poll_tick(T0 + INTERVAL_MS - 1), None);
    let first = task
        .poll_tick(T0 + INTERVAL_MS)
        .expect("due one interval after start");
    assert_eq!(first.data.timestamp, T0 + INTERVAL_MS);
    assert_eq!(task.poll_tick(T0 + INTERVAL_MS), None);

    // Four and a half intervals late: one tick, no catch-up burst.
    let late = T0 + 5 * INTERVAL_MS + 500;
    assert_eq!(
        task.poll_tick(late).map(|tick| tick.data.timestamp),
        Some(late)
    );
    assert_eq!(task.poll_tick(late), None);
    assert_eq!(task.poll_tick(late + INTERVAL_MS - 1), None);
    assert!(task.poll_tick(late + INTERVAL_MS).is_some());
    assert_eq!(task.last_tick_at(), Some(late + INTERVAL_MS));

    // A stage without ticks never ticks.
    let f = fixture(echo(&[orders()], false));
    let mut task = f.started(0);
    assert_eq!(task.next_tick_at(), None);
    assert_eq!(task.tick_tp(), None);
    assert_eq!(task.poll_tick(T0 + 100 * INTERVAL_MS), None);
}

/// T3: the time of the last tick is committed, so a restart keeps the cadence
/// instead of measuring from the restart.
#[test]
fn t3_cadence_survives_a_restart() {
    let f = fixture(echo(&[orders()], true));
    let mut task = f.started(0);
    assert!(task.poll_tick(T0 + INTERVAL_MS).is_some());
    let request = task.prepare_commit().unwrap();
    task.handle_committed(T0 + INTERVAL_MS);

    let mut task = f.task(0);
    task.start(&committed_offsets(&request), T0 + INTERVAL_MS + 200)
        .unwrap();
    assert_eq!(task.poll_tick(T0 + 2 * INTERVAL_MS - 1), None);
    assert!(task.poll_tick(T0 + 2 * INTERVAL_MS).is_some());
}

// ----- T4: the tick record -----

/// T4: a tick is one record on the task's own partition of the tick topic,
/// null key, timestamp and 8-byte big-endian value = the emission time,
/// stamped at the stamping site (history merged with held stamps).
#[test]
fn t4_tick_record_has_its_exact_shape() {
    let f = fixture(echo(&[orders(), payments(), refunds()], true));
    let mut task = f.started(1);
    let (o, p) = (tp(ORDERS, 1), tp(PAYMENTS, 1));
    assert_eq!(task.tick_tp(), Some(&tp(TICKS, 1)));

    feed(&mut task, &o, vec![rec(0).stamp(&[("a", 0, 4)])], 1);
    deliver(&mut task, &o);
    // Held on refunds-1@2, never fetched.
    feed(&mut task, &p, vec![rec(0).stamp(&[(REFUNDS, 1, 2)])], 1);

    let now = T0 + 1_234;
    let tick = task.poll_tick(now).expect("a tick is due");
    assert_eq!(
        tick,
        ProducedRecord {
            tp: tp(TICKS, 1),
            data: RecordData {
                key: None,
                value: Some(Bytes::copy_from_slice(&[
                    0, 0, 0x01, 0x8b, 0xcf, 0xe5, 0x6c, 0xd2
                ])),
                headers: vec![Header {
                    name: STAMP_HEADER.into(),
                    value: header::encode(&stamp(&[("a", 0, 4), (ORDERS, 1, 0), (REFUNDS, 1, 2)])),
                }],
                timestamp: now,
            },
        }
    );
    assert_eq!(
        i64::from_be_bytes(tick.data.value.as_deref().unwrap().try_into().unwrap()),
        now
    );
}

// ----- T5: consume-back -----

/// T5: a tick emitted while a record is held claims that record's causes, so,
/// consumed back, it is held until they are delivered; then it is delivered as
/// `Tick { timestamp }`.
#[test]
fn t5_a_tick_fed_back_is_held_until_its_claim_is_delivered() {
    let f = fixture(echo(&[orders(), payments()], true));
    let mut task = f.started(0);
    let (o, p, k) = (tp(ORDERS, 0), tp(PAYMENTS, 0), tp(TICKS, 0));

    // payments@0 is held on orders@2 (orders not fetched yet).
    feed(&mut task, &p, vec![rec(0).stamp(&[(ORDERS, 0, 2)])], 1);
    let tick = task.poll_tick(T0 + INTERVAL_MS).expect("a tick is due");
    assert_eq!(stamp_of(&tick), stamp(&[(ORDERS, 0, 2)]));
    task.handle_committed(T0 + INTERVAL_MS);

    feed(&mut task, &k, vec![back(0, &tick)], 2);
    assert_eq!(task.deliverable().unwrap(), Vec::<Tp>::new());
    assert_eq!(
        task.heads(),
        [
            (p.clone(), 0, HeadStatus::Held(claim(ORDERS, 0, 2))),
            (k.clone(), 0, HeadStatus::Held(claim(ORDERS, 0, 2))),
        ]
    );

    feed(&mut task, &o, vec![rec(0), rec(1), rec(2)], 3);
    deliver(&mut task, &o);
    deliver(&mut task, &o);
    assert_eq!(task.deliverable().unwrap(), only(&o));
    deliver(&mut task, &o);
    assert_eq!(task.deliverable().unwrap(), [p.clone(), k.clone()]);
    assert_eq!(
        emitted(&deliver(&mut task, &k)),
        [format!("tick@{}", T0 + INTERVAL_MS)]
    );
    assert_eq!(task.history().offset(&k), Some(0));
}

// ----- T7: the tick slot -----

/// T7: a tick fold steps the task's tick slot, which starts at the initial
/// value and is distinct from the null key's slot; its changes go to the
/// changelog under the tick slot's key.
#[test]
fn t7_tick_fold_steps_the_tick_slot_not_the_null_slot() {
    let stage = counter()
        .tick_fold(interval(), |state: i64, _: &Tick| Step::of(state + 1_000))
        .into(&out())
        .build();
    let f = fixture(stage);
    let mut task = f.started(0);
    let (o, k) = (tp(ORDERS, 0), tp(TICKS, 0));

    feed(&mut task, &o, vec![rec(0).value(5)], 1);
    deliver(&mut task, &o);
    assert_eq!(slot(&task, &SlotKey::Null), Some(105));

    let first = task.poll_tick(T0 + INTERVAL_MS).expect("a tick is due");
    task.handle_committed(T0 + INTERVAL_MS);
    feed(&mut task, &k, vec![back(0, &first)], 2);
    assert_eq!(
        deliver(&mut task, &k),
        [changelog_record(
            0,
            &SlotKey::Tick,
            Some(1_100),
            T0 + INTERVAL_MS
        )]
    );
    assert_eq!(SlotKey::Tick.changelog_key(), Bytes::from_static(&[2]));
    assert_eq!(
        (slot(&task, &SlotKey::Tick), slot(&task, &SlotKey::Null)),
        (Some(1_100), Some(105))
    );

    let second = task.poll_tick(T0 + 2 * INTERVAL_MS).expect("a tick is due");
    task.handle_committed(T0 + 2 * INTERVAL_MS);
    feed(&mut task, &k, vec![back(2, &second)], 4);
    deliver(&mut task, &k);
    assert_eq!(
        (slot(&task, &SlotKey::Tick), slot(&task, &SlotKey::Null)),
        (Some(2_100), Some(105))
    );

    feed(&mut task, &o, vec![rec(1).value(1)], 2);
    deliver(&mut task, &o);
    assert_eq!(
        (slot(&task, &SlotKey::Tick), slot(&task, &SlotKey::Null)),
        (Some(2_100), Some(106))
    );
}

/// T7: a plain tick handler on a stateful stage emits and leaves the tick slot
/// (and every key slot) untouched: no changelog record.
#[test]
fn t7_tick_handler_on_a_stateful_stage_leaves_the_tick_slot_untouched() {
    let f = fixture(counter_with_tick_handler());
    let mut task = f.started(0);
    let (o, k) = (tp(ORDERS, 0), tp(TICKS, 0));

    feed(&mut task, &o, vec![rec(0).value(5)], 1);
    deliver(&mut task, &o);
    let tick = task.poll_tick(T0 + INTERVAL_MS).expect("a tick is due");
    task.handle_committed(T0 + INTERVAL_MS);
    feed(&mut task, &k, vec![back(0, &tick)], 2);

    let produced = deliver(&mut task, &k);
    assert_eq!(produced.len(), 1, "{produced:?}");
    assert_eq!(produced[0].tp, tp(OUT, 0));
    assert_eq!(emitted(&produced), [format!("tick@{}", T0 + INTERVAL_MS)]);
    assert_eq!(
        (slot(&task, &SlotKey::Tick), slot(&task, &SlotKey::Null)),
        (None, Some(105))
    );
}

// ----- T8: metrics -----

/// T8: ticks-emitted-total counts committed ticks only (not one in an aborted
/// transaction, not twice); transactions committed and aborted; records-held
/// is a gauge.
#[test]
fn t8_metrics_count_committed_ticks_transactions_and_held_records() {
    let f = fixture(echo(&[orders(), payments()], true));
    let mut task = f.started(0);
    let (o, p) = (tp(ORDERS, 0), tp(PAYMENTS, 0));

    assert!(task.poll_tick(T0 + INTERVAL_MS).is_some());
    assert_eq!(task.metrics().ticks_emitted_total, 0, "not committed yet");
    let _ = task.handle_aborted();
    let metrics = task.metrics();
    assert_eq!(
        (
            metrics.ticks_emitted_total,
            metrics.transactions_aborted_total,
            metrics.transactions_committed_total
        ),
        (0, 1, 0)
    );

    // The retry emits a fresh tick (T6), which commits.
    assert!(task.poll_tick(T0 + INTERVAL_MS).is_some());
    task.handle_committed(T0 + INTERVAL_MS);
    task.handle_committed(T0 + INTERVAL_MS + 100);
    let metrics = task.metrics();
    assert_eq!(
        (
            metrics.ticks_emitted_total,
            metrics.transactions_aborted_total,
            metrics.transactions_committed_total
        ),
        (1, 1, 2)
    );

    // records-held: payments@0 waits for orders@0.
    feed(&mut task, &p, vec![rec(0).stamp(&[(ORDERS, 0, 0)])], 1);
    assert_eq!(task.metrics().records_held, 1);
    feed(&mut task, &o, vec![rec(0)], 1);
    assert_eq!(task.metrics().records_held, 1);
    deliver(&mut task, &o);
    assert_eq!(task.metrics().records_held, 0);
    deliver(&mut task, &p);

    let metrics = task.metrics();
    assert_eq!(
        metrics.named(),
        [
            ("ticks-emitted-total", 1),
            ("records-delivered-total", 2),
            ("records-held", 0),
            ("transactions-committed-total", 2),
            ("transactions-aborted-total", 1),
            ("records-redelivered-total", 0),
            ("records-dead-lettered-total", 0),
        ]
    );
}

// ----- §8: codec errors -----

/// §8: a value (or key) the topic's codec rejects stops the task with a typed
/// codec error naming topic, tp and offset; the position stays at the record.
#[test]
fn codec_rejected_value_or_key_names_topic_tp_and_offset() {
    let f = fixture(echo(&[orders()], false));
    let o = tp(ORDERS, 0);

    let mut task = f.started(0);
    feed(
        &mut task,
        &o,
        vec![rec(0), rec(1).raw_value(Some(b"not json")), rec(2)],
        3,
    );
    deliver(&mut task, &o);
    let error = task.deliver(&o).unwrap_err();
    match &error {
        TaskError::Codec {
            task: who,
            tp,
            offset,
            part,
            error: codec,
        } => {
            assert_eq!(
                (who, tp, *offset, *part),
                (&id(0), &o, 1, RecordPart::Value)
            );
            assert_eq!((codec.codec, codec.direction), ("json", Direction::Decode));
        }
        other => panic!("expected a codec error, got {other:?}"),
    }
    let message = error.to_string();
    assert!(
        message.contains("orders-0@1") && message.contains("codec of topic orders"),
        "{message}"
    );
    assert_eq!(task.deliverable().unwrap_err(), error);
    assert_eq!(task.prepare_commit().unwrap().offsets, [(o.clone(), 1)]);

    // A key that does not decode, and a null value on a source.
    for (record, expected) in [
        (rec(0).raw_key(b"\xff"), RecordPart::Key),
        (rec(0).raw_value(None), RecordPart::Value),
    ] {
        let mut task = f.started(0);
        feed(&mut task, &o, vec![record], 1);
        let error = task.deliver(&o).unwrap_err();
        assert!(
            matches!(&error, TaskError::Codec { tp, offset: 0, part, .. } if tp == &o && *part == expected),
            "{error:?}"
        );
        assert_eq!(task.prepare_commit().unwrap().offsets, [(o.clone(), 0)]);
    }
}

/// §8: a tick record whose value is not an 8-byte timestamp stops the task
/// with `BadTick` naming tp and offset.
#[test]
fn codec_malformed_tick_value_is_a_bad_tick() {
    let f = fixture(echo(&[orders()], true));
    let (o, k) = (tp(ORDERS, 0), tp(TICKS, 0));
    for value in [Some(&[1u8, 2, 3][..]), Some(&[0u8; 9][..]), None] {
        let mut task = f.started(0);
        feed(&mut task, &k, vec![rec(3).raw_value(value)], 4);
        let error = task.deliver(&k).unwrap_err();
        assert_eq!(
            error,
            TaskError::BadTick {
                task: id(0),
                tp: k.clone(),
                offset: 3,
            }
        );
        assert_eq!(task.failure(), Some(&error));
        assert_eq!(
            task.prepare_commit().unwrap().offsets,
            [(o.clone(), 0), (k.clone(), 3)]
        );
    }
}

/// §8: an emission its sink's codec cannot encode stops the task naming the
/// topic, tp and offset.
#[test]
fn codec_emission_that_does_not_encode_is_an_error() {
    let maps: Topic<String, BTreeMap<(u8, u8), u8>> = Topic::new(MAPS);
    let sink = maps.clone();
    let stage = Stage::named("s")
        .on(&orders(), move |_: &Record<String, i64>| {
            vec![sink.send(None, BTreeMap::from([((1u8, 2u8), 3u8)]))]
        })
        .into(&maps)
        .build();
    let f = fixture(stage);
    let mut task = f.started(0);
    let o = tp(ORDERS, 0);
    feed(&mut task, &o, vec![rec(0)], 1);
    let error = task.deliver(&o).unwrap_err();
    assert!(
        matches!(&error, TaskError::EmissionCodec { task, topic, tp, offset: 0, .. }
            if task == &id(0) && topic == MAPS && tp == &o),
        "{error:?}"
    );
    assert_eq!(task.position(&o), Some(0));
}

/// G7: offset metadata that is not a Parsley checkpoint is refused at start.
#[test]
fn g7_bad_checkpoint_is_refused_at_start() {
    let f = fixture(echo(&[orders()], false));
    let mut task = f.task(0);
    let error = task
        .start(
            &[Some(CommittedOffset {
                offset: 3,
                metadata: "hello".into(),
            })],
            T0,
        )
        .unwrap_err();
    assert!(
        matches!(&error, TaskError::BadCheckpoint { task, tp, .. } if task == &id(0) && tp == &self::tp(ORDERS, 0)),
        "{error:?}"
    );
}

// ----- held records behind a head, and claim cycles -----

/// G2 defines *held* per record: orders@1 claims an undelivered payments
/// offset, so it is held even though it sits behind a deliverable head. G5 and
/// T4 then require a tick (a consistent cut) to claim its causes, and T5 to
/// hold the tick until they are delivered; records-held should count it.
#[test]
fn g5_a_record_held_behind_a_deliverable_head_is_merged_into_the_stamp() {
    let f = fixture(echo(&[orders(), payments()], true));
    let mut task = f.started(0);
    let o = tp(ORDERS, 0);

    feed(
        &mut task,
        &o,
        vec![rec(0), rec(1).stamp(&[(PAYMENTS, 0, 4)])],
        2,
    );
    assert_eq!(task.deliverable().unwrap(), only(&o));
    let tick = task.poll_tick(T0 + INTERVAL_MS).expect("a tick is due");
    assert_eq!(stamp_of(&tick), stamp(&[(PAYMENTS, 0, 4)]));
    assert_eq!(task.metrics().records_held, 1);
}

/// §8 ("never a silent stall"), G6: two records that each claim the other
/// (possible only with forged stamps) can never resolve, with every log end
/// fresh; they should be reported as poison rather than held forever.
#[test]
fn g6_a_claim_cycle_between_consumed_tps_is_reported_not_waited_on() {
    let f = fixture(echo(&[orders(), payments()], false));
    let mut task = f.started(0);
    let (o, p) = (tp(ORDERS, 0), tp(PAYMENTS, 0));

    feed(&mut task, &o, vec![rec(0).stamp(&[(PAYMENTS, 0, 0)])], 1);
    feed(&mut task, &p, vec![rec(0).stamp(&[(ORDERS, 0, 0)])], 1);
    feed(&mut task, &o, Vec::new(), 1);
    assert!(
        matches!(task.deliverable(), Err(TaskError::UnresolvableClaim { .. })),
        "heads: {:?}",
        task.heads()
    );
}

/// G6: a cycle may run through a record behind the waited lane's head:
/// orders@0 claims payments@5, and payments@3, the head that must be
/// delivered before payments@5, claims orders@0. Poison, not a stall.
#[test]
fn g6_a_cycle_through_a_record_behind_a_head_is_reported() {
    let f = fixture(echo(&[orders(), payments()], false));
    let mut task = f.started(0);
    let (o, p) = (tp(ORDERS, 0), tp(PAYMENTS, 0));

    feed(&mut task, &o, vec![rec(0).stamp(&[(PAYMENTS, 0, 5)])], 1);
    feed(
        &mut task,
        &p,
        vec![rec(3).stamp(&[(ORDERS, 0, 0)]), rec(4), rec(5)],
        6,
    );
    feed(&mut task, &o, Vec::new(), 1);
    let error = task.deliverable().unwrap_err();
    assert!(
        matches!(&error, TaskError::UnresolvableClaim { reason, .. } if reason.contains("cycle")),
        "{error}"
    );
}

/// G2, G6: holds that chain to a record not fetched yet are a wait, not a
/// cycle: orders@0 claims payments@0, which claims refunds@0, which exists
/// but has not arrived. Nothing is reported; once it arrives, all three
/// deliver in causal order.
#[test]
fn g6_a_chain_of_holds_ending_at_an_unfetched_record_is_not_a_cycle() {
    let f = fixture(echo(&[orders(), payments(), refunds()], false));
    let mut task = f.started(0);
    let (o, p, r) = (tp(ORDERS, 0), tp(PAYMENTS, 0), tp(REFUNDS, 0));

    feed(&mut task, &o, vec![rec(0).stamp(&[(PAYMENTS, 0, 0)])], 1);
    feed(&mut task, &p, vec![rec(0).stamp(&[(REFUNDS, 0, 0)])], 1);
    feed(&mut task, &r, Vec::new(), 1);
    assert_eq!(task.deliverable().unwrap(), Vec::<Tp>::new());
    feed(&mut task, &r, vec![rec(0)], 1);
    deliver(&mut task, &r);
    deliver(&mut task, &p);
    deliver(&mut task, &o);
}

/// G3: a driver that hands the gate a record it already queued has a bug
/// that would deliver it twice; the gate refuses it loudly.
#[test]
#[should_panic(expected = "is behind the fetch position")]
fn g3_the_same_record_fetched_twice_is_refused() {
    let f = fixture(echo(&[orders()], false));
    let mut task = f.started(0);
    let o = tp(ORDERS, 0);
    task.handle_fetched(
        &o,
        Fetched {
            records: vec![rec(0).0, rec(0).0],
            next_offset: 1,
            log_end: 1,
        },
    );
}

/// §8, X1: a history too large for Kafka's offset metadata would make every
/// commit fail; the task stops with a typed error instead of stalling.
#[test]
fn x1_checkpoint_beyond_the_offset_metadata_limit_stops_the_task() {
    let f = fixture(echo(&[orders()], false));
    let mut task = f.started(0);
    let o = tp(ORDERS, 0);
    let names: Vec<String> = (0..150)
        .map(|index| format!("an-upstream-topic-with-a-long-name-{index:03}"))
        .collect();
    let claims: Vec<(&str, u32, u64)> = names.iter().map(|name| (name.as_str(), 0, 7)).collect();
    feed(&mut task, &o, vec![rec(0).stamp(&claims)], 1);
    deliver(&mut task, &o);
    let error = task.prepare_commit().unwrap_err();
    assert!(
        matches!(&error, TaskError::CheckpointTooLarge { bytes, max: 4096, claims: 151, .. } if *bytes > 4096),
        "{error}"
    );
    assert_eq!(
        task.deliverable().unwrap_err(),
        error,
        "the task stays stopped"
    );
}
