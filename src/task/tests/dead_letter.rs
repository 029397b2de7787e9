//! X5: the dead-letter opt-in.

use super::fixtures::*;
use crate::codec::Json;
use crate::emission::{Record, Step};
use crate::header::STAMP_HEADER;
use crate::record::ProducedRecord;
use crate::stage::Stage;
use crate::task::{HeadStatus, TaskError};

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
    assert_eq!(task.committing().unwrap().offsets, [(o.clone(), 3)]);
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
    let letters: Vec<_> = (0..4)
        .map(|offset| {
            assert_eq!(task.ready().unwrap(), only(&o));
            let produced = task.delivered(&o).unwrap();
            let letter = dead_letter_of(&produced);
            assert_eq!(letter.offset, offset);
            letter
        })
        .collect();
    use crate::DeadLetterKind::{BadStamp, Codec};
    let kinds: Vec<_> = letters.iter().map(|letter| letter.kind).collect();
    assert_eq!(kinds, [Codec, Codec, BadStamp, Codec]);
    // The bytes the codec could not read are kept as they were.
    assert_eq!(letters[0].value.as_deref(), Some(&b"not json"[..]));
    assert_eq!(letters[1].key.as_deref(), Some(&b"\xff"[..]));
    assert_eq!(letters[1].value, Some(json(&1i64)));
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
    assert!(matches!(task.delivered(&o), Err(TaskError::Codec { .. })));
    assert_eq!(task.metrics().records_dead_lettered_total, 0);
}

/// X5: the operator's skip. A task stopped on a poison record (a claim that
/// can never resolve) is restarted from its committed position; `skip`
/// refuses an offset already delivered or that is no record, then
/// dead-letters exactly the named record as skipped (the records before it
/// are delivered as usual), and the skip is consumed by the commit.
#[test]
fn x5_skip_dead_letters_the_named_record_once_and_refuses_any_other() {
    use crate::task::SkipError;
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
    let request = task.committing().unwrap();
    task.handle_committed(T0);
    deliver(&mut task, &o);
    let stopped = task.ready().unwrap_err();
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
    task.committing().unwrap();
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
    let error = task.ready().unwrap_err();
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
