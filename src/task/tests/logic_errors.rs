//! X5: logic errors, without the dead-letter opt-in.

use super::fixtures::*;
use crate::codec::Json;
use crate::emission::{Record, Step};
use crate::stage::Stage;
use crate::task::TaskError;

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
    let error = task.delivered(&o).unwrap_err();
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
    assert_eq!(task.ready().unwrap_err(), error);
    assert_eq!(task.position(&o), Some(1));
    assert_eq!(task.buffered(), 2);
    assert_eq!(task.committing().unwrap().offsets, [(o.clone(), 1)]);
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
    task.delivered(&o).unwrap_err();
    assert!(task.tick(T0 + 10 * INTERVAL_MS).is_none());
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
    let error = task.delivered(&o).unwrap_err();
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
    assert_eq!(task.committing().unwrap().offsets, [(o.clone(), 1)]);
    assert_eq!(task.ready().unwrap_err(), error);
}
