//! T3, T4, T5, T7, T8: cadence, the tick record, consume-back, the tick slot,
//! metrics.

use bytes::Bytes;

use super::fixtures::*;
use crate::deadline::{Deadline, DeadlineKind, TimeDomain};
use crate::emission::{Step, Tick};
use crate::header::{self, STAMP_HEADER};
use crate::record::{Header, ProducedRecord, RecordData};
use crate::stage::SlotKey;
use crate::task::HeadStatus;
use crate::tp::Tp;

// ----- T3: cadence -----

/// T3: the first tick comes one interval after start; at most one tick per
/// poll however late; never before the interval since the last tick.
#[test]
fn t3_ticks_one_per_poll_never_before_the_interval() {
    let f = fixture(echo(&[orders()], true));
    let mut task = f.started(0);
    assert_eq!(task.next_tick_at(), Some(T0 + INTERVAL_MS));

    assert_eq!(task.tick(T0), None);
    assert_eq!(task.tick(T0 + INTERVAL_MS - 1), None);
    let first = task
        .tick(T0 + INTERVAL_MS)
        .expect("due one interval after start");
    assert_eq!(first.data.timestamp, T0 + INTERVAL_MS);
    assert_eq!(task.tick(T0 + INTERVAL_MS), None);

    // Four and a half intervals late: one tick, no catch-up burst.
    let late = T0 + 5 * INTERVAL_MS + 500;
    assert_eq!(task.tick(late).map(|tick| tick.data.timestamp), Some(late));
    assert_eq!(task.tick(late), None);
    assert_eq!(task.tick(late + INTERVAL_MS - 1), None);
    assert!(task.tick(late + INTERVAL_MS).is_some());
    assert_eq!(task.last_tick_at(), Some(late + INTERVAL_MS));

    // A stage without ticks never ticks.
    let f = fixture(echo(&[orders()], false));
    let mut task = f.started(0);
    assert_eq!(task.next_tick_at(), None);
    assert_eq!(task.tick_tp(), None);
    assert_eq!(task.tick(T0 + 100 * INTERVAL_MS), None);
}

/// T3: a ticking task's deadline is its next tick, on the wall clock; it
/// moves with each tick; a task that does not tick, or has not started,
/// has none.
#[test]
fn t3_the_next_tick_is_the_tasks_deadline() {
    let f = fixture(echo(&[orders()], true));
    assert_eq!(f.task(0).deadlines().count(), 0, "not started yet");
    let mut task = f.started(0);
    let tick_deadline = |at| Deadline {
        at,
        domain: TimeDomain::WallClock,
        kind: DeadlineKind::Tick,
    };
    assert_eq!(
        task.deadlines().collect::<Vec<_>>(),
        [tick_deadline(T0 + INTERVAL_MS)]
    );
    assert!(task.tick(T0 + INTERVAL_MS + 7).is_some());
    assert_eq!(
        task.deadlines().collect::<Vec<_>>(),
        [tick_deadline(T0 + 2 * INTERVAL_MS + 7)]
    );
    let f = fixture(echo(&[orders()], false));
    assert_eq!(f.started(0).deadlines().count(), 0);
}

/// T3: the time of the last tick is committed, so a restart keeps the cadence
/// instead of measuring from the restart.
#[test]
fn t3_cadence_survives_a_restart() {
    let f = fixture(echo(&[orders()], true));
    let mut task = f.started(0);
    assert!(task.tick(T0 + INTERVAL_MS).is_some());
    let request = task.committing().unwrap();
    task.handle_committed(T0 + INTERVAL_MS);

    let mut task = f.task(0);
    task.start(&committed_offsets(&request), T0 + INTERVAL_MS + 200)
        .unwrap();
    assert_eq!(task.tick(T0 + 2 * INTERVAL_MS - 1), None);
    assert!(task.tick(T0 + 2 * INTERVAL_MS).is_some());
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
    let tick = task.tick(now).expect("a tick is due");
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
    let tick = task.tick(T0 + INTERVAL_MS).expect("a tick is due");
    assert_eq!(stamp_of(&tick), stamp(&[(ORDERS, 0, 2)]));
    task.handle_committed(T0 + INTERVAL_MS);

    feed(&mut task, &k, vec![back(0, &tick)], 2);
    assert_eq!(task.ready().unwrap(), Vec::<Tp>::new());
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
    assert_eq!(task.ready().unwrap(), only(&o));
    deliver(&mut task, &o);
    assert_eq!(task.ready().unwrap(), [p.clone(), k.clone()]);
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

    let first = task.tick(T0 + INTERVAL_MS).expect("a tick is due");
    commit(&mut task, T0 + INTERVAL_MS);
    feed(&mut task, &k, vec![back(0, &first)], 2);
    deliver(&mut task, &k);
    assert_eq!(
        commit(&mut task, T0 + INTERVAL_MS),
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

    let second = task.tick(T0 + 2 * INTERVAL_MS).expect("a tick is due");
    commit(&mut task, T0 + 2 * INTERVAL_MS);
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
    let tick = task.tick(T0 + INTERVAL_MS).expect("a tick is due");
    commit(&mut task, T0 + INTERVAL_MS);
    feed(&mut task, &k, vec![back(0, &tick)], 2);

    let produced = deliver(&mut task, &k);
    assert_eq!(commit(&mut task, T0 + INTERVAL_MS), [], "no slot changed");
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

    assert!(task.tick(T0 + INTERVAL_MS).is_some());
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
    assert!(task.tick(T0 + INTERVAL_MS).is_some());
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
