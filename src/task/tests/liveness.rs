//! G6: liveness and poison.

use super::fixtures::*;
use crate::header::{self, HeaderError};
use crate::stamp::Claim;
use crate::task::{HeadStatus, TaskError};
use crate::tp::Tp;

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
    let error = task.ready().unwrap_err();
    assert_unresolvable(&error, &o, 1, claim(ORDERS, 0, 1));
    assert_eq!(task.failure(), Some(&error));
    // The task stays stopped with the same error, its position before the record.
    assert_eq!(task.ready().unwrap_err(), error);
    assert_eq!(task.delivered(&o).unwrap_err(), error);
    assert_eq!(
        task.committing().unwrap().offsets,
        [(o.clone(), 1), (p.clone(), 0)]
    );
    assert!(!task.wants_commit(T0 + 10_000));

    // Beyond its own offset.
    let mut task = f.started(0);
    feed(&mut task, &o, vec![rec(0).stamp(&[(ORDERS, 0, 7)])], 8);
    let error = task.ready().unwrap_err();
    assert_unresolvable(&error, &o, 0, claim(ORDERS, 0, 7));
    assert_eq!(
        task.committing().unwrap().offsets,
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
    let error = task.ready().unwrap_err();
    assert_unresolvable(&error, &o, 0, claim(PAYMENTS, 0, 3));
    assert_eq!(
        task.committing().unwrap().offsets,
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
    let error = task.ready().unwrap_err();
    assert_unresolvable(&error, &o, 1, claim(PAYMENTS, 0, 9));
    assert_eq!(
        task.committing().unwrap().offsets,
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
    assert_eq!(task.ready().unwrap(), only(&p));
    assert_eq!(
        task.heads()[0],
        (o.clone(), 0, HeadStatus::Held(claim(PAYMENTS, 0, 4)))
    );

    // A fresh log end past the claim: still held, not poison.
    feed(&mut task, &p, vec![rec(3), rec(4)], 5);
    for _ in 0..4 {
        deliver(&mut task, &p);
        assert_eq!(task.ready().unwrap(), only(&p));
    }
    deliver(&mut task, &p);
    assert_eq!(task.ready().unwrap(), only(&o));
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
    let error = task.ready().unwrap_err();
    assert_eq!(
        error,
        TaskError::BadStamp {
            task: id(0),
            tp: o.clone(),
            offset: 1,
            error: HeaderError::UnknownVersion { version: 9 },
        }
    );
    assert_eq!(task.delivered(&o).unwrap_err(), error);
    assert_eq!(
        task.committing().unwrap().offsets,
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
            task.ready().unwrap_err(),
            TaskError::BadStamp {
                task: id(0),
                tp: p.clone(),
                offset: 0,
                error: expected,
            }
        );
        assert_eq!(
            task.committing().unwrap().offsets,
            [(o.clone(), 0), (p.clone(), 0)]
        );
    }
}
